"""The CPU backend's native FFT (``backends/cpu/fft_kernel``) against NumPy in float64."""

import math

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends.cpu import fft_kernel as fk

rng = np.random.default_rng(0)
FFT, IFFT, RFFT, IRFFT = 0, 1, 2, 3


def _complex(shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _rel_rms(got, want):
    return float(np.sqrt(np.mean(np.abs(got - want) ** 2) / np.mean(np.abs(want) ** 2)))


def _bound(dtype, lengths):
    # Float32 transforms: comparable to JAX's; float64: a few ulps per stage.
    unit = 1e-6 if np.dtype(dtype) in (np.complex64, np.float32) else 4e-16
    return unit * max(1, math.log2(math.prod(lengths)))


def _reference(x, kind, lengths):
    axes = tuple(range(-len(lengths), 0))
    wide = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    fn = (np.fft.fftn, np.fft.ifftn, np.fft.rfftn, np.fft.irfftn)[kind]
    return fn(wide, lengths, axes)


@pytest.fixture(scope="module", autouse=True)
def _native():
    if fk.library(np.dtype(np.complex64)) is None:
        pytest.skip("no native code on this machine")


CASES = [((8,), (8,)), ((3, 16), (16,)), ((2, 1024), (1024,)), ((1, 2), (2,)), ((3, 1), (1,)),
         ((5, 4, 32), (4, 32)), ((4, 8, 16), (4, 8, 16)), ((2, 3, 64, 8), (64, 8)),
         ((1, 1 << 15), (1 << 15,)), ((6, 2, 128), (2, 128)), ((300, 4), (4,)),
         # (mixed radices: 2, 3, 4, 5 and 7 stages, four-step splits that are not powers of
         # two, transpositions without whole vectors, 3 * 7^4 and 2^6 * 3 * 5^2)
         ((3, 6), (6,)), ((2, 1000), (1000,)), ((4, 3, 100), (3, 100)),
         ((2, 5, 7, 9), (5, 7, 9)), ((1, 7203), (7203,)), ((2, 4800), (4800,)),
         ((3, 48, 40), (48, 40)), ((2, 35, 3), (35, 3)),
         # (last lengths with a prime factor above 7: Bluestein's convolution, natively)
         ((5, 257), (257,)), ((2, 3, 1001), (3, 1001)), ((1, 11), (11,)), ((4, 26), (26,)),
         # (and before the last axis: moved last for it)
         ((3, 11, 8), (11, 8)), ((2, 13, 17), (13, 17)), ((22, 6), (22, 6))]


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("shape, lengths", CASES)
def test_complex_transforms_match_numpy(dtype, shape, lengths):
    x = _complex(shape, dtype)
    for kind in (FFT, IFFT):
        got = fk.transform(x, kind, lengths)
        assert got is not None and got.dtype == dtype and got.shape == shape
        assert _rel_rms(got, _reference(x, kind, lengths)) < _bound(dtype, lengths)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, lengths", [
    ((2,), (2,)), ((4,), (4,)), ((3, 16), (16,)), ((64, 64), (64, 64)), ((2, 8, 64), (8, 64)),
    ((1, 1 << 16), (1 << 16,)), ((3, 4, 2, 32), (4, 2, 32)), ((5, 16, 512), (512,)),
    ((3, 30), (30,)), ((2, 6, 1000), (1000,)), ((4, 12, 20), (12, 20)), ((1, 6), (6,)),
    ((2, 9600), (9600,)),
    # (odd real lengths, and lengths with a prime factor above 7: complex transforms)
    ((3, 15), (15,)), ((2, 22), (22,)), ((4, 5, 13), (5, 13)), ((2, 11, 9), (11, 9))])
def test_real_transforms_match_numpy(dtype, shape, lengths):
    x = rng.standard_normal(shape).astype(dtype)
    got = fk.transform(x, RFFT, lengths)
    want = _reference(x, RFFT, lengths)
    assert got.dtype == np.result_type(dtype, np.complex64) and got.shape == want.shape
    assert _rel_rms(got, want) < _bound(dtype, lengths)
    spectrum = want.astype(got.dtype)
    back = fk.transform(spectrum, IRFFT, lengths)
    assert back.dtype == dtype and back.shape == shape
    assert _rel_rms(back, _reference(spectrum, IRFFT, lengths)) < _bound(dtype, lengths)


@pytest.mark.parametrize("route", ["short_rows", "four_step"])
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_both_last_axis_routes_match_numpy(route, dtype, monkeypatch):
    # Every length through each route: blocks of rows as the lanes of one column FFT (full
    # and partial blocks), or the four-step route (tiled transpositions or not).
    short = 1 << 20 if route == "short_rows" else 0
    monkeypatch.setattr(fk, "SHORT_ROW_MAX", short)
    monkeypatch.setattr(fk, "SHORT_UNTILED_ROW_MAX", short)
    real = np.float32 if dtype == np.complex64 else np.float64
    for rows, n in [(37, 2), (5, 12), (16, 64), (20, 100), (3, 384), (9, 1000), (2, 2048)]:
        x = _complex((rows, n), dtype)
        for kind in (FFT, IFFT):
            assert _rel_rms(fk.transform(x, kind, (n,)), _reference(x, kind, (n,))) < \
                _bound(dtype, (n,))
        r = rng.standard_normal((rows, 2 * n)).astype(real)
        spectrum = fk.transform(r, RFFT, (2 * n,))
        assert _rel_rms(spectrum, _reference(r, RFFT, (2 * n,))) < _bound(dtype, (2 * n,))
        back = fk.transform(spectrum, IRFFT, (2 * n,))
        assert _rel_rms(back, r) < _bound(dtype, (2 * n,))


@pytest.mark.parametrize("n", [16, 15, 22])
def test_irfft_ignores_imaginary_parts_of_zero_and_nyquist(n):
    # (natively, and as a complex transform of the Hermitian spectrum: odd and 2 * 11)
    x = _complex((3, n // 2 + 1), np.complex128)  # (not a real signal's spectrum)
    got = fk.transform(x, IRFFT, (n,))
    np.testing.assert_allclose(got, np.fft.irfft(x, n), rtol=1e-13, atol=1e-14)


def test_single_long_rows_split_into_phases(monkeypatch):
    # (A row's phases run as separate parallel steps when rows are fewer than threads.)
    monkeypatch.setattr(fk, "_phased", lambda n, rows: True)
    n = 1 << 14
    x = _complex((2, n), np.complex64)
    for kind in (FFT, IFFT):
        assert _rel_rms(fk.transform(x, kind, (n,)), _reference(x, kind, (n,))) < 2e-6
    r = rng.standard_normal((1, 2 * n)).astype(np.float32)
    spectrum = fk.transform(r, RFFT, (2 * n,))
    assert _rel_rms(spectrum, _reference(r, RFFT, (2 * n,))) < 2e-6
    assert _rel_rms(fk.transform(spectrum, IRFFT, (2 * n,)), r) < 2e-6
    n = 3 * 5 * (1 << 10)  # (mixed radices: a four-step split of 120 x 128)
    x = _complex((1, n), np.complex64)
    for kind in (FFT, IFFT):
        assert _rel_rms(fk.transform(x, kind, (n,)), _reference(x, kind, (n,))) < 2e-6


def test_special_values_propagate():
    x = _complex((2, 256), np.complex64)
    x[0, 7] = np.nan
    x[1, 3] = np.inf
    got = fk.transform(x, FFT, (256,))
    assert np.isnan(got[0]).all()
    assert not np.isfinite(got[1]).any() or np.isinf(got[1]).all()
    r = rng.standard_normal(64)
    r[5] = np.nan
    assert np.isnan(fk.transform(r, RFFT, (64,))).all()


def test_unsupported_cases_answer_none():
    x = _complex((4, 22), np.complex64)
    assert fk.transform(x[:, :4], FFT, (3, 4)) is None  # (lengths that are not its dims)
    assert fk.transform(np.ones((2, 5), np.complex64), IRFFT, (10,)) is None
    assert fk.transform(np.ones((2, 1), np.float32), RFFT, (1,)) is None
    assert fk.transform(np.ones(4, np.float16), RFFT, (4,)) is None
    assert fk.transform(np.ones((2, 1), np.float32), RFFT, (1,)) is None
    assert fk.transform(np.ones((0, 8), np.complex64), FFT, (8,)) is None


def test_lax_and_jnp_run_the_native_kernel():
    x = _complex((8, 128), np.complex64)
    want = fk.transform(x, FFT, (128,))
    np.testing.assert_array_equal(np.asarray(lax.fft(x, "FFT", (128,))), want)
    np.testing.assert_array_equal(np.asarray(ember.jit(jnp.fft.fft)(x)), want)
    r = rng.standard_normal((64, 64)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(ember.jit(jnp.fft.rfft2)(r)),
                                  fk.transform(r, RFFT, (64, 64)))


def test_jit_matches_jax(jax):
    x = rng.standard_normal((16, 512)).astype(np.float32)
    for name in ("rfft2", "fft2", "ifft"):
        got = ember.jit(getattr(jnp.fft, name))(x)
        want = getattr(jax.numpy.fft, name)(x)
        assert _rel_rms(np.asarray(got), np.asarray(want)) < 2e-6


@pytest.mark.parametrize("tasks", [1, 3])
def test_threads_and_task_splits_give_the_serial_bits(tasks, monkeypatch):
    # (each column chunk and row is computed whole by one task: how many tasks a thread
    # runs, or whether there are threads at all, changes no bit)
    cases = [(_complex((256, 129), np.complex64), FFT, (256, 129)),
             (rng.standard_normal((256, 256)).astype(np.float32), RFFT, (256, 256)),
             (_complex((32, 32, 32), np.complex64), IFFT, (32, 32, 32)),
             (_complex((1, 3 * 5 * (1 << 10)), np.complex64), FFT, (3 * 5 * (1 << 10),))]
    monkeypatch.setattr(fk, "PARALLEL_MIN_ELEMENTS", 1 << 62)
    serial = [fk.transform(x, kind, lengths) for x, kind, lengths in cases]
    monkeypatch.setattr(fk, "PARALLEL_MIN_ELEMENTS", 0)
    monkeypatch.setattr(fk, "COLUMN_TASKS_PER_THREAD", tasks)
    monkeypatch.setattr(fk, "TASKS_PER_THREAD", tasks + 1)
    monkeypatch.setattr(fk, "_phased", lambda n, rows: True)
    for (x, kind, lengths), want in zip(cases, serial):
        got = fk.transform(x, kind, lengths)
        np.testing.assert_array_equal(got, want)
        assert _rel_rms(got, _reference(x, kind, lengths)) < 4 * _bound(x.dtype, lengths)
