"""Large outputs of flat elementwise kernels are streamed: computed a block at a time into a
stack buffer, then written with non-temporal stores (``kernel_gen.STREAM_MIN_BYTES``,
``KernelBuilder._streamed_loop``). Checked: the values (NumPy's, and the bits of a kernel too
small to stream), the code (non-temporal stores only where streamed), and outputs that are
not on a cache line's start (plain stores, nothing written outside them)."""

import glob

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu import kernel_gen
from tests.backends.cpu.helpers import cpu_executable, x64

rng = np.random.default_rng(5)


def _selu(x):
    return 1.0507 * jnp.where(x > 0, x, 1.67326 * jnp.expm1(x))


def _two(x):
    return x * 2 + 1, x - 3


def _elements(dtype) -> int:
    # (more than the threshold, not a whole number of blocks, lines or vectors)
    return kernel_gen.STREAM_MIN_BYTES // np.dtype(dtype).itemsize + 12_345


def _has_streams(folder) -> bool:
    asm = "".join(open(f).read() for f in glob.glob(str(folder / "*.s")))
    assert asm
    return "movnt" in asm


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_large_elementwise_outputs_stream_with_the_same_values(dtype, tmp_path, monkeypatch):
    n = _elements(dtype)
    x = (rng.standard_normal(n) * 100).astype(dtype)
    with x64(np.dtype(dtype).itemsize == 8):
        monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path / "large"))
        a, b = (np.asarray(v) for v in ember.jit(_two)(x))
        monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path / "small"))
        a_small, b_small = (np.asarray(v) for v in ember.jit(_two)(x[:1000]))
    np.testing.assert_array_equal(a, x * 2 + 1)
    np.testing.assert_array_equal(b, x - 3)
    np.testing.assert_array_equal(a[:1000], a_small)
    assert _has_streams(tmp_path / "large") and not _has_streams(tmp_path / "small")


def test_a_streamed_math_kernel_has_the_bits_of_a_small_one(tmp_path, monkeypatch):
    x = rng.standard_normal(_elements(np.float32)).astype(np.float32)
    got = np.asarray(ember.jit(_selu)(x))
    small = np.asarray(ember.jit(_selu)(x[-5000:]))
    np.testing.assert_array_equal(got[-5000:], small)
    want = 1.0507 * np.where(x > 0, x, 1.67326 * np.expm1(x.astype(np.float64)))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("skews", [(1, 1), (1, 0), (0, 3), (5, 21)])
def test_outputs_off_a_cache_line_are_written_exactly(skews):
    # The kernel called on outputs that start ``skews`` elements past a cache line: where
    # both share their offset, plain stores up to the first line then streamed blocks;
    # else plain stores throughout. The values of the jitted call; nothing written outside.
    n = _elements(np.float32)
    x = rng.standard_normal(n).astype(np.float32)
    want = [np.asarray(v) for v in ember.jit(_two)(x)]
    exe = cpu_executable(_two, x)
    (step,) = exe.program.steps
    kernel = cpu_exe._ffi.cast("void(*)(char**, long, long)", exe._lib.address(step.name))
    raws, outs = [], []
    for skew in skews:
        raw = np.full(n + 64, 7.0, np.float32)
        start = (-raw.ctypes.data % 64) // 4 + skew
        raws.append((raw, start))
        outs.append(raw[start:start + n])
    bufs = cpu_exe._ffi.new("char*[]", [cpu_exe._ffi.cast("char*", a.ctypes.data)
                                        for a in (x, *outs)])
    for lo, hi in ((0, n // 3), (n // 3, n)):  # (two threads' ranges, one after the other)
        kernel(bufs, lo, hi)
    for out, w, (raw, start) in zip(outs, want, raws):
        np.testing.assert_array_equal(out, w)
        assert (raw[:start] == 7.0).all() and (raw[start + n:] == 7.0).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_broadcast_rows_stream_with_the_same_values(dtype, tmp_path, monkeypatch):
    # A loop nest (a row vector broadcast along the rows) streams a row at a time.
    cols = 1024
    rows = kernel_gen.STREAM_MIN_BYTES // (cols * np.dtype(dtype).itemsize) + 3
    x = rng.standard_normal((rows, cols)).astype(dtype)
    s = rng.standard_normal(cols).astype(dtype)

    def fn(x, s):
        return jnp.maximum(x * s + 1.0, 0.0)
    with x64(dtype == np.float64):
        monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path / "large"))
        got = np.asarray(ember.jit(fn)(x, s))
        monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path / "small"))
        small = np.asarray(ember.jit(fn)(x[-5:], s))
    np.testing.assert_array_equal(got, np.maximum(x * s + 1.0, 0.0))
    np.testing.assert_array_equal(got[-5:], small)
    assert _has_streams(tmp_path / "large") and not _has_streams(tmp_path / "small")
