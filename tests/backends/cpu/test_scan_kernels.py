"""Cumulative scans (``reduce_window`` over a whole dim from one end) compile to native
kernels that follow the evaluator's precision rule bit for bit (``scan_accumulate``); other
``reduce_window``s are element ops of fused kernels (``test_window_kernel.py``)."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import dtypes, lax
from ember.backends import get_backend
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu.executable import KernelPlan, LibraryPlan
from ember.compiler.evaluator import evaluate_computation
from ember.compiler.hlo import Builder, Module, Shape
from ember.compiler.reduce_window import scan_accumulate

IDENTITY = {"add": 0, "multiply": 1}
DTYPES = [np.float32, np.float64, np.int32, np.int8, np.uint8, np.float16, dtypes.bfloat16]


def identity(opcode, dt):
    dt = np.dtype(dt)
    if opcode in IDENTITY:
        return IDENTITY[opcode]
    big = opcode == "minimum"
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return info.max if big else info.min
    return np.inf if big else -np.inf


def scan_module(shape, dt, opcode, axis, reverse, init=None):
    m = Module("m")
    body = Builder(m, "body")
    a, c = (body.parameter(i, Shape(dt, ())) for i in range(2))
    region = body.build(body.op(opcode, a, c))
    b = Builder(m, "main")
    x = b.parameter(0, Shape(dt, shape))
    n = shape[axis]
    window = [1] * len(shape)
    padding = [(0, 0)] * len(shape)
    window[axis] = n
    padding[axis] = (0, n - 1) if reverse else (n - 1, 0)
    start = b.constant(identity(opcode, dt) if init is None else init, np.dtype(dt))
    b.build(b.op("reduce_window", x, start, calls=[region], window_dimensions=tuple(window),
                 padding=tuple(padding)), entry=True)
    return m


def random_values(rng, shape, dt, opcode):
    dt = np.dtype(dt)
    if dt.kind in "iu":
        return rng.integers(0, 5 if opcode == "multiply" else 100, shape).astype(dt)
    if opcode == "multiply":  # (products of values near 1 stay finite)
        return (1 + 0.05 * rng.standard_normal(shape)).astype(dt)
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)
    return x.astype(dt)


def run_native(m, args):
    exe = get_backend("cpu").compile(m)
    got = exe.execute(args)
    return got[0], exe.program.steps


@pytest.mark.parametrize("seed", range(48))
def test_native_scans_match_the_evaluator_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 4))
    shape = tuple(int(d) for d in rng.integers(1, 9, rank))
    if rng.random() < 0.3:  # lines longer than a block, more lines than a block
        shape = shape[:-1] + (int(rng.integers(257, 600)),)
    axis = int(rng.integers(0, rank))
    reverse = bool(rng.random() < 0.5)
    opcode = ["add", "multiply", "maximum", "minimum"][seed % 4]
    dt = DTYPES[seed % len(DTYPES)]
    x = random_values(rng, shape, dt, opcode)
    if np.dtype(dt).kind == "f" and rng.random() < 0.5:
        x.flat[rng.integers(0, x.size)] = np.nan
    m = scan_module(shape, np.dtype(dt), opcode, axis, reverse)
    got, steps = run_native(m, [x])
    assert [type(s) for s in steps] == [KernelPlan]
    want = evaluate_computation(m.entry, [x])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, scan_accumulate(x, axis, reverse, opcode))


@pytest.mark.parametrize("shape, axis", [((1024, 512), 1), ((512, 1024), 0), ((3, 200_000), 1),
                                         ((7, 5, 4096), 1), ((300_000,), 0)])
def test_large_scans_split_across_threads_match_a_float64_reference(shape, axis, monkeypatch):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32)
    for reverse in (False, True):
        m = scan_module(shape, np.dtype(np.float32), "add", axis, reverse)
        ref = np.flip(np.cumsum(np.flip(x, axis).astype(np.float64), axis), axis) if reverse \
            else np.cumsum(x.astype(np.float64), axis)
        threaded, _ = run_native(m, [x])
        with monkeypatch.context() as patch:
            patch.setattr(cpu_exe, "PARALLEL_MIN_WORK", 1 << 62)
            single, _ = run_native(m, [x])
        # Each prefix is the float64 sum rounded once, on any number of threads.
        np.testing.assert_array_equal(threaded, ref.astype(np.float32))
        np.testing.assert_array_equal(single, ref.astype(np.float32))


@pytest.mark.parametrize("shape, axis", [((256, 256, 0), 0), ((4, 0, 3), 2), ((0, 5), 1),
                                         ((7, 0), 0)])
def test_scans_of_no_elements_touch_no_memory(shape, axis):
    # (256, 256, 0) along axis 0 once scanned 256 "rows" of 256 elements each: reads and
    # writes through the pointers of empty buffers, which corrupted the heap.
    for reverse in (False, True):
        m = scan_module(shape, np.dtype(np.float32), "add", axis, reverse)
        got, _ = run_native(m, [np.zeros(shape, np.float32)])
        assert got.shape == shape
        f = ember.jit(lambda x, r=reverse: lax.cumsum(x, axis=axis, reverse=r))
        assert f(jnp.zeros(shape, np.float32)).shape == shape


def test_a_scan_from_a_non_identity_init_runs_as_a_library_step():
    x = np.arange(6, dtype=np.float32)
    m = scan_module((6,), np.dtype(np.float32), "add", 0, False, init=10.0)
    got, steps = run_native(m, [x])
    assert [type(s) for s in steps] == [LibraryPlan]
    # The init starts every window and fills its n - 1 - i padding elements.
    np.testing.assert_array_equal(got, 10 * (6 - np.arange(6)) + np.cumsum(x))


def test_negative_zero_survives_a_sum_scan():
    x = np.array([-0.0, -0.0, 1.0], np.float32)
    got, _ = run_native(scan_module((3,), np.dtype(np.float32), "add", 0, False), [x])
    assert np.signbit(got[0]) and np.signbit(got[1]) and got[2] == 1


@pytest.mark.parametrize("fn", [jnp.cumsum, jnp.cumprod])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
def test_jit_scans_agree_with_eager_and_numpy(fn, dtype):
    rng = np.random.default_rng(0)
    x = (1 + 0.01 * rng.standard_normal((6, 40))).astype(dtype) if dtype != np.int32 \
        else rng.integers(-3, 4, (6, 40)).astype(np.int32)
    for axis in (0, 1):
        eager = np.asarray(fn(x, axis=axis))
        jitted = np.asarray(ember.jit(lambda v, axis=axis: fn(v, axis=axis))(x))
        np.testing.assert_array_equal(jitted, eager)
        ref = getattr(np, fn.__name__)(x.astype(np.float64), axis=axis)
        np.testing.assert_allclose(jitted.astype(np.float64), ref,
                                   rtol=2e-2 if dtype == np.float16 else 1e-5)


def test_cummax_and_cummin_propagate_nan_under_jit():
    x = np.array([[1.0, np.nan, 3.0, 0.5], [2.0, -1.0, np.inf, -np.inf]], np.float32)
    for f, ref in ((lax.cummax, np.fmax), (lax.cummin, np.fmin)):
        got = np.asarray(ember.jit(lambda v, f=f: f(v, axis=1))(x))
        assert np.isnan(got[0, 1:]).all() and got[0, 0] == 1
        np.testing.assert_array_equal(got[1], ref.accumulate(x[1]))
        rev = np.asarray(ember.jit(lambda v, f=f: f(v, axis=1, reverse=True))(x))
        assert np.isnan(rev[0, :2]).all()
        np.testing.assert_array_equal(rev[0, 2:], ref.accumulate(x[0, ::-1])[:2][::-1])


def test_cumsum_lowers_to_a_scan_kernel():
    f = ember.jit(lambda v: jnp.cumsum(v, axis=1))
    x = np.ones((4, 8), np.float32)
    assert "reduce_window" in f.lower(x).as_text()
    exe = f.lower(x).compile()
    np.testing.assert_array_equal(np.asarray(exe(x)), np.cumsum(x, axis=1))
