"""ember.scipy.signal, .fft, .ndimage, .integrate and .cluster.vq against JAX as the oracle
(several shapes, modes and dtypes), their errors (JAX's classes), windows against NumPy,
and gradients, jit and vmap of the composite functions."""

import warnings

import numpy as np
import pytest

import ember
import ember.numpy as jnp
import ember.scipy as esp
from ember.test_util import check_grads
from tests.op_records.scipy_signal import _convolve_ref

RNG = np.random.default_rng(0)


def _rand(shape, dtype="float32"):
    x = RNG.normal(size=shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * RNG.normal(size=shape)
    return x.astype(dtype)


def _same(want, got, tol=1e-4):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for w, g in zip(want, got):
            _same(w, g, tol)
        return
    assert got.shape == want.shape, (got.shape, want.shape)
    expected = np.dtype(want.dtype)
    if isinstance(want, np.ndarray):  # a float64 NumPy reference of a 32-bit computation
        expected = {np.dtype("float64"): np.dtype("float32"),
                    np.dtype("complex128"): np.dtype("complex64")}.get(expected, expected)
    assert np.dtype(got.dtype) == expected, (got.dtype, want.dtype)
    np.testing.assert_allclose(np.asarray(got, np.complex128 if got.dtype.kind == "c"
                                          else np.float64),
                               np.asarray(want).astype(np.complex128), rtol=tol, atol=tol)


@pytest.fixture(scope="module")
def jsp(jax):
    import jax.scipy.cluster.vq  # noqa: F401
    import jax.scipy.fft  # noqa: F401
    import jax.scipy.integrate  # noqa: F401
    import jax.scipy.ndimage  # noqa: F401
    import jax.scipy.signal  # noqa: F401
    return jax.scipy


def _jx(fn, *args, **kwargs):
    """JAX's answer, jitted as one program (JAX's op-by-op dispatch compiles every op)."""
    import jax
    return jax.jit(lambda *a: fn(*a, **kwargs))(*args)


# ---------------------------------------------------------------- convolutions


@pytest.mark.parametrize("s1,s2", [((7,), (3,)), ((3,), (6,)), ((4, 5), (2, 3)),
                                   ((2, 2), (3, 4)), ((3, 2, 2), (2, 2, 2)), ((), ())])
def test_convolve_vs_numpy_loop(s1, s2):
    """Real convolutions and correlations (direct and FFT) against a loop over the kernel."""
    a, b = _rand(s1), _rand(s2)
    for mode in ("full", "same", "valid"):
        want = _convolve_ref(mode)(a, b)
        flipped = b[(slice(None, None, -1),) * b.ndim]
        for method in ("direct", "fft"):
            _same(want, esp.signal.convolve(a, b, mode, method=method))
            _same(_convolve_ref(mode)(a, flipped),
                  esp.signal.correlate(a, b, mode, method=method))
        if len(s1) == 2:
            _same(want, esp.signal.convolve2d(a, b, mode))


@pytest.mark.parametrize("s1,s2", [((3, 4), (2, 2)), ((2, 3), (3, 5))])
def test_complex_convolutions_vs_jax(jsp, s1, s2):
    """Complex inputs (conjugation) and SciPy's own centring/order rules of correlate2d."""
    a, b = _rand(s1, "complex64"), _rand(s2, "complex64")
    fns = {"convolve": jsp.signal.convolve, "correlate": jsp.signal.correlate,
           "correlate2d": jsp.signal.correlate2d, "fftconvolve": jsp.signal.fftconvolve}
    modes = ("full", "same", "valid")
    want = _jx(lambda x, y: tuple(f(x, y, m) for m in modes for f in fns.values()), a, b)
    _same(want, tuple(getattr(esp.signal, name)(a, b, m) for m in modes for name in fns))


def test_correlate2d_real_vs_jax(jsp):
    a, b = _rand((2, 3)), _rand((3, 5))
    want = _jx(lambda x, y: tuple(jsp.signal.correlate2d(x, y, m)
                                  for m in ("full", "same", "valid")), a, b)
    _same(want, tuple(esp.signal.correlate2d(a, b, m) for m in ("full", "same", "valid")))


@pytest.mark.parametrize("dtype", ["int32", "bool", "float16"])
def test_convolve_dtypes(dtype):
    """Integers and bools promote to float32; float16 stays float16 (as in JAX)."""
    a, b = np.array([1, 0, 1, 1, 0, 1]).astype(dtype), np.array([1, 1, 0]).astype(dtype)
    want = np.convolve(a.astype(np.float64), b.astype(np.float64))
    got = esp.signal.convolve(a, b)
    assert got.dtype == (np.float16 if dtype == "float16" else np.float32)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, atol=1e-3)


def test_convolve_precision_and_jit():
    a, b = _rand((9,)), _rand((4,))
    got = ember.jit(lambda x, y: esp.signal.convolve(
        x, y, "same", precision=ember.lax.Precision.HIGHEST))(a, b)
    _same(np.convolve(a, b, "same"), got, 1e-5)


@pytest.mark.parametrize("s1,s2,axes", [((3, 4), (2, 4), [0]), ((4, 3), (4, 1), [-1]),
                                        ((2, 5), (2, 3), (1, 0))])
def test_fftconvolve_axes_vs_loop(s1, s2, axes):
    a, b = _rand(s1), _rand(s2)
    axes_t = (axes,) if isinstance(axes, int) else tuple(a_ % 2 for a_ in axes)
    for mode in ("full", "same", "valid"):
        got = esp.signal.fftconvolve(a, b, mode, axes=axes)
        if len(axes_t) == 2:
            _same(_convolve_ref(mode)(a, b), got)
            continue
        ax = axes_t[0]
        other = 1 - ax
        rows = [_convolve_ref(mode)(np.take(a, i, other), np.take(b, i, other))
                for i in range(a.shape[other])]
        _same(np.stack(rows, axis=other), got)


def test_convolve_grads():
    a, b = _rand((6,)), _rand((3,))
    for mode in ("full", "same", "valid"):
        check_grads(lambda x, y, m=mode: esp.signal.convolve(x, y, m), (a, b), order=2,
                    atol=2e-2, rtol=2e-2)
    check_grads(lambda x, y: esp.signal.correlate(x, y, "same"), (a, b), order=1,
                atol=2e-2, rtol=2e-2)
    check_grads(lambda x, y: esp.signal.fftconvolve(x, y, "same"), (a, b), order=1,
                atol=2e-2, rtol=2e-2)


def test_convolve_vmap():
    a, b = _rand((3, 7)), _rand((3, 3))
    got = ember.vmap(lambda x, y: esp.signal.correlate(x, y, "same"))(a, b)
    want = np.stack([np.correlate(a[i], b[i], "same") for i in range(3)])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- detrend


def _detrend_ref(x, axis, bps):
    """Per segment, the residual of a least-squares line fit (np.polyfit)."""
    x = np.moveaxis(np.asarray(x, np.float64), axis, -1).copy()
    edges = sorted({0, *bps, x.shape[-1]})
    for lo, hi in zip(edges[:-1], edges[1:]):
        t = np.arange(hi - lo)
        for idx in np.ndindex(*x.shape[:-1]):
            seg = x[idx][lo:hi]
            x[idx + (slice(lo, hi),)] = seg - np.polyval(np.polyfit(t, seg, 1), t)
    return np.moveaxis(x, -1, axis)


@pytest.mark.parametrize("shape,axis", [((10,), -1), ((9, 3), 0)])
def test_detrend_vs_polyfit(shape, axis):
    x = _rand(shape)
    for bp in (0, [3], [2, 6]):
        _same(_detrend_ref(x, axis, np.atleast_1d(bp)),
              esp.signal.detrend(x, axis=axis, bp=bp), 1e-4)
    _same(x - x.mean(axis, keepdims=True), esp.signal.detrend(x, axis, "constant"), 1e-5)
    got = esp.signal.detrend(np.arange(6))
    assert got.dtype == np.float32
    np.testing.assert_allclose(np.asarray(got), 0, atol=1e-5)


def test_detrend_complex_vs_jax(jsp):
    x = _rand((2, 9), "complex64")
    want = _jx(lambda v: jsp.signal.detrend(v, bp=[4]), x)
    _same(want, esp.signal.detrend(x, bp=[4]))


# ---------------------------------------------------------------- spectral estimators

WELCH_KWARGS = [
    {"nperseg": 16, "noverlap": 4, "nfft": 20, "window": "hamming", "fs": 3.0},
    {"nperseg": 15, "detrend": "linear", "scaling": "spectrum", "window": "blackman"},
    {"nperseg": 8, "average": "median", "window": "bartlett"},
    {"nperseg": 8, "return_onesided": False, "detrend": False, "window": "boxcar"},
    {"window": np.hanning(12)},
]


@pytest.mark.parametrize("kw", WELCH_KWARGS, ids=lambda kw: "-".join(sorted(kw)))
def test_welch_csd_vs_jax(jsp, kw):
    x, y, xb = _rand((64,)), _rand((60,)), _rand((3, 50))
    fns = (lambda u, v, w: jsp.signal.welch(u, **kw),
           lambda u, v, w: jsp.signal.csd(u, v, **kw),
           lambda u, v, w: jsp.signal.welch(w.T, axis=0, **kw))
    want = _jx(lambda u, v, w: tuple(f(u, v, w) for f in fns), x, y, xb)
    got = (esp.signal.welch(x, **kw), esp.signal.csd(x, y, **kw),
           esp.signal.welch(xb.T, axis=0, **kw))
    _same(want, got)


def test_welch_complex_warns(jsp):
    xc = _rand((40,), "complex64")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = _jx(lambda v: jsp.signal.welch(v, nperseg=8), xc)
    with pytest.warns(UserWarning, match="complex"):
        got = esp.signal.welch(xc, nperseg=8)
    _same(want, got)


STFT_KWARGS = [
    {"nperseg": 16, "noverlap": 12},
    {"nperseg": 15, "boundary": None, "padded": False},
    {"nperseg": 16, "boundary": "odd", "window": "hamming", "fs": 2.0},
    {"nperseg": 8, "nfft": 12, "boundary": "even"},
    {"nperseg": 8, "return_onesided": False, "boundary": "constant"},
]


@pytest.mark.parametrize("kw", STFT_KWARGS, ids=lambda kw: "-".join(sorted(kw)))
def test_stft_vs_jax(jsp, kw):
    x, xb = _rand((64,)), _rand((3, 50))
    want = _jx(lambda u, w: (jsp.signal.stft(u, **kw), jsp.signal.stft(w.T, axis=0, **kw)),
               x, xb)
    got = (esp.signal.stft(x, **kw), esp.signal.stft(xb.T, axis=0, **kw))
    _same(want, got)


@pytest.mark.parametrize("kw", [{"nperseg": 16, "noverlap": 12, "window": "hamming"},
                                {"nperseg": 8, "input_onesided": False}], ids=str)
def test_istft_vs_jax_and_roundtrip(jsp, kw):
    skw = {k: v for k, v in kw.items() if k != "input_onesided"}
    if "input_onesided" in kw:
        skw["return_onesided"] = False
    x = _rand((2, 48))
    z = np.asarray(esp.signal.stft(x, **skw)[2])
    zt = np.moveaxis(z, -2, 0)
    want = _jx(lambda u, v: (jsp.signal.istft(u, **kw),
                             jsp.signal.istft(v, time_axis=-1, freq_axis=0, **kw)), z, zt)
    _same(want, (esp.signal.istft(z, **kw),
                 esp.signal.istft(zt, time_axis=-1, freq_axis=0, **kw)))
    back = esp.signal.istft(z, **kw)[1]
    np.testing.assert_allclose(np.real(np.asarray(back)), x, atol=1e-5)


def test_spectral_jit_vmap_grad():
    x = _rand((4, 40))
    f = ember.jit(lambda v: esp.signal.welch(v, nperseg=8)[1])
    np.testing.assert_allclose(np.asarray(f(x)),
                               np.asarray(esp.signal.welch(x, nperseg=8)[1]), rtol=1e-5)
    got = ember.vmap(lambda v: esp.signal.stft(v, nperseg=8)[2])(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(esp.signal.stft(x, nperseg=8)[2]),
                               rtol=1e-5, atol=1e-6)
    check_grads(lambda v: esp.signal.welch(v, nperseg=8)[1], (x[0],), order=1,
                atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("name,numpy_window", [("hann", np.hanning), ("hamming", np.hamming),
                                               ("blackman", np.blackman),
                                               ("bartlett", np.bartlett)])
def test_windows_are_periodic_numpy_windows(name, numpy_window):
    """A window name gives SciPy's periodic window: NumPy's symmetric one of n + 1 points
    without its last point (seen through a one-segment 'spectrum' STFT of ones)."""
    n = 10
    _, _, z = esp.signal.stft(jnp.ones(n), window=name, nperseg=n, boundary=None,
                              padded=False, return_onesided=False)
    win = numpy_window(n + 1)[:-1]
    np.testing.assert_allclose(np.abs(np.asarray(z)[:, 0]),
                               np.abs(np.fft.fft(win)) / win.sum(), atol=1e-6)


# ---------------------------------------------------------------- scipy.fft


def _dct_matrix(n, norm=None):
    k = np.arange(n)
    mat = 2 * np.cos(np.pi * k[:, None] * (2 * k[None, :] + 1) / (2 * n))
    if norm == "ortho":
        mat[0] *= np.sqrt(1 / (4 * n))
        mat[1:] *= np.sqrt(1 / (2 * n))
    return mat


def _dct_ref(x, n, axis, norm, inverse=False):
    x = np.moveaxis(np.asarray(x, np.float64), axis, -1)
    if n is not None:  # truncate or zero-pad
        x = x[..., :n]
        x = np.concatenate([x, np.zeros(x.shape[:-1] + (n - x.shape[-1],))], -1)
    mat = _dct_matrix(x.shape[-1], norm)
    y = x @ (np.linalg.inv(mat).T if inverse else mat.T)
    return np.moveaxis(y, -1, axis)


@pytest.mark.parametrize("shape", [(5,), (4,), (3, 6)])
@pytest.mark.parametrize("norm", [None, "ortho"])
def test_dct_vs_matrix(shape, norm):
    x = _rand(shape)
    for inverse, fn in ((False, esp.fft.dct), (True, esp.fft.idct)):
        for n in (None, 3, 7):
            _same(_dct_ref(x, n, -1, norm, inverse), fn(x, n=n, norm=norm))
        _same(_dct_ref(x, None, 0, norm, inverse), fn(x, axis=0, norm=norm))
    for inverse, fn in ((False, esp.fft.dctn), (True, esp.fft.idctn)):
        want = x
        for axis in range(x.ndim):
            want = _dct_ref(want, None, axis, norm, inverse)
        _same(want, fn(x, norm=norm))
        _same(_dct_ref(x, 3, -1, norm, inverse), fn(x, s=[3], norm=norm))
        if len(shape) == 2:
            want = _dct_ref(_dct_ref(x, 4, 0, norm, inverse), 2, 1, norm, inverse)
            _same(want, fn(x, s=(2, 4), axes=(-1, 0), norm=norm))


def test_dct_vs_jax(jsp):
    x = _rand((2, 3, 5))
    fns = (lambda v: jsp.fft.dctn(v, s=(2, 4), axes=(-1, 0), norm="ortho"),
           lambda v: jsp.fft.idctn(v, axes=(0, 2)), lambda v: jsp.fft.dct(v, n=4, axis=1))
    want = _jx(lambda v: tuple(f(v) for f in fns), x)
    _same(want, (esp.fft.dctn(x, s=(2, 4), axes=(-1, 0), norm="ortho"),
                 esp.fft.idctn(x, axes=(0, 2)), esp.fft.dct(x, n=4, axis=1)))


@pytest.mark.parametrize("dtype", ["complex64", "float16", "int32", "bool"])
def test_dct_dtypes(dtype):
    """Complex inputs transform part by part; the others give float32 (as in JAX)."""
    x = _rand((3, 4), dtype) if dtype.startswith("c") else np.arange(12).reshape(3, 4) % 3
    x = x.astype(dtype)
    for inverse, fn in ((False, esp.fft.dct), (True, esp.fft.idct)):
        got = fn(x)
        if dtype == "complex64":
            want = (_dct_ref(x.real, None, -1, None, inverse)
                    + 1j * _dct_ref(x.imag, None, -1, None, inverse))
            assert got.dtype == np.complex64
        else:
            want = _dct_ref(x.astype(np.float64), None, -1, None, inverse)
            assert got.dtype == np.float32
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-3, atol=1e-3)


def test_dct_roundtrip_grad_vmap():
    x = _rand((3, 5))
    for norm in (None, "ortho"):
        np.testing.assert_allclose(
            np.asarray(esp.fft.idctn(esp.fft.dctn(x, norm=norm), norm=norm)), x, atol=1e-5)
        check_grads(lambda v, m=norm: esp.fft.dct(v, norm=m), (x,), order=2, atol=2e-2,
                    rtol=2e-2)
    check_grads(lambda v: esp.fft.idctn(v), (x,), order=1, atol=2e-2, rtol=2e-2)
    got = ember.vmap(esp.fft.dct)(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(esp.fft.dct(x)), rtol=1e-6)


# ---------------------------------------------------------------- ndimage, integrate, vq

MODES = ["constant", "nearest", "wrap", "mirror", "reflect"]


@pytest.mark.parametrize("shape", [(5,), (1,), (3, 4)])
def test_map_coordinates_vs_jax(jsp, shape):
    x = _rand(shape)
    coords = [RNG.uniform(-3, s + 2, size=(7,)).astype("float32") for s in shape]
    coords[0][:3] = [0.5, 1.5, -0.5]  # halves round away from zero
    cases = [(order, mode) for order in (0, 1) for mode in MODES]
    want = _jx(lambda v, *c: tuple(jsp.ndimage.map_coordinates(v, list(c), o, mode=m,
                                                               cval=1.5) for o, m in cases),
               x, *coords)
    got = tuple(esp.ndimage.map_coordinates(x, coords, o, mode=m, cval=1.5)
                for o, m in cases)
    _same(want, got, 1e-5)


def test_map_coordinates_integer_data_and_coords_vs_jax(jsp):
    xi = RNG.integers(-5, 5, size=(4, 4)).astype("int32")
    c = np.stack([RNG.uniform(-1, 4, size=(3, 2)).astype("float32") for _ in range(2)])
    ci = np.array([[0, 2, 5, -1], [1, 1, 1, 7]])
    cases = [(o, m) for o in (0, 1) for m in ("constant", "wrap", "reflect")]
    want = _jx(lambda v, w, wi: (jsp.ndimage.map_coordinates(v, w, 0),
                                 jsp.ndimage.map_coordinates(v, w, 1))
               + tuple(jsp.ndimage.map_coordinates(v * 1.0, wi, o, mode=m)
                       for o, m in cases), xi, c, ci)
    got = (esp.ndimage.map_coordinates(xi, c, 0), esp.ndimage.map_coordinates(xi, c, 1)) \
        + tuple(esp.ndimage.map_coordinates(xi * 1.0, ci, o, mode=m) for o, m in cases)
    _same(want, got, 0)


def test_map_coordinates_grads_jit():
    x, c = _rand((4, 5)), RNG.uniform(0.1, 3.9, size=(2, 6)).astype("float32")
    check_grads(lambda v, w: esp.ndimage.map_coordinates(v, list(w), 1, mode="reflect"),
                (x, c), order=2, atol=2e-2, rtol=2e-2)
    f = ember.jit(lambda v, w: esp.ndimage.map_coordinates(v, list(w), 0, mode="wrap"))
    np.testing.assert_array_equal(
        np.asarray(f(x, c)), np.asarray(esp.ndimage.map_coordinates(x, list(c), 0, "wrap")))


@pytest.mark.parametrize("shape,axis", [((5,), -1), ((2, 3, 4), 1)])
def test_trapezoid_vs_numpy(shape, axis):
    y = _rand(shape)
    x = np.sort(RNG.uniform(0, 3, size=shape[axis])).astype("float32")
    _same(np.trapezoid(y, axis=axis), esp.integrate.trapezoid(y, axis=axis), 1e-5)
    _same(np.trapezoid(y, x, axis=axis), esp.integrate.trapezoid(y, x, axis=axis), 1e-5)
    _same(np.trapezoid(y, dx=0.3, axis=axis).astype(np.float32),
          esp.integrate.trapezoid(y, dx=0.3, axis=axis), 1e-5)
    check_grads(lambda v: esp.integrate.trapezoid(v, x, axis=axis), (y,), order=2)


def _vq_ref(obs, cb):
    obs, cb = np.asarray(obs).reshape(len(obs), -1), np.asarray(cb).reshape(len(cb), -1)
    d = np.sqrt((np.abs(obs[:, None, :] - cb[None]) ** 2).sum(-1))
    return d.argmin(-1), d.min(-1)


@pytest.mark.parametrize("dtype", ["float32", "int32", "complex64"])
def test_vq(dtype):
    obs, cb = _rand((6, 3), dtype), _rand((4, 3), dtype)
    if dtype == "int32":
        obs, cb = RNG.integers(-9, 9, (6, 3)).astype(dtype), np.array(
            [[0, 0, 0], [5, 5, 5], [-5, 0, 5], [9, -9, 0]], dtype)
    for o, c in ((obs, cb), (obs[:, 0], cb[:, 0])):
        code, dist = esp.cluster.vq.vq(o, c)
        want_code, want_dist = _vq_ref(o, c)
        assert code.dtype == np.int32 and dist.dtype == np.float32
        np.testing.assert_array_equal(np.asarray(code), want_code)
        np.testing.assert_allclose(np.asarray(dist), want_dist, rtol=1e-5)


# ---------------------------------------------------------------- errors

ERROR_CASES = {
    "convolve_mode": lambda s: s.signal.convolve(np.ones(3), np.ones(2), "bad"),
    "convolve_method": lambda s: s.signal.convolve(np.ones(3), np.ones(2), method="x"),
    "convolve_ranks": lambda s: s.signal.convolve(np.ones(3), np.ones((2, 2))),
    "convolve_empty": lambda s: s.signal.convolve(np.ones(3), np.ones(0)),
    "convolve_crossed": lambda s: s.signal.convolve(np.ones((3, 2)), np.ones((2, 3))),
    "convolve2d_3d": lambda s: s.signal.convolve2d(np.ones((2, 2, 2)), np.ones((2, 2, 2))),
    "correlate2d_boundary": lambda s: s.signal.correlate2d(np.ones((2, 2)),
                                                           np.ones((2, 2)), boundary="wrap"),
    "fftconvolve_valid": lambda s: s.signal.fftconvolve(np.ones((3, 2)), np.ones((2, 3)),
                                                        "valid"),
    "fftconvolve_mapped": lambda s: s.signal.fftconvolve(np.ones((3, 2)), np.ones((2, 3)),
                                                         axes=0),
    "detrend_type": lambda s: s.signal.detrend(np.ones(4), type="quadratic"),
    "detrend_bp": lambda s: s.signal.detrend(np.ones(4), bp=[7]),
    "welch_noverlap": lambda s: s.signal.welch(np.ones(32), nperseg=8, noverlap=8),
    "welch_nfft": lambda s: s.signal.welch(np.ones(32), nperseg=8, nfft=4),
    "welch_scaling": lambda s: s.signal.welch(np.ones(32), nperseg=8, scaling="x"),
    "welch_window_2d": lambda s: s.signal.welch(np.ones(32), window=np.ones((2, 2))),
    "stft_boundary": lambda s: s.signal.stft(np.ones(32), nperseg=8, boundary="x"),
    "istft_1d": lambda s: s.signal.istft(np.ones(8, np.complex64)),
    "istft_axes": lambda s: s.signal.istft(np.ones((5, 4), np.complex64), time_axis=0,
                                           freq_axis=0),
    "dct_type": lambda s: s.fft.dct(np.ones(4), type=3),
    "dct_norm": lambda s: s.fft.dct(np.ones(4), norm="forward"),
    "idctn_s": lambda s: s.fft.idctn(np.ones(4), s=(2, 2)),
    "map_coordinates_len": lambda s: s.ndimage.map_coordinates(np.ones((2, 2)),
                                                               [np.zeros(3)], 1),
    "map_coordinates_mode": lambda s: s.ndimage.map_coordinates(np.ones(3), [np.zeros(2)],
                                                                1, mode="grid-wrap"),
    "map_coordinates_order": lambda s: s.ndimage.map_coordinates(np.ones(3),
                                                                 [np.zeros(2)], 3),
    "vq_rank": lambda s: s.cluster.vq.vq(np.ones((3, 2)), np.ones(2)),
    "vq_3d": lambda s: s.cluster.vq.vq(np.ones((3, 2, 2)), np.ones((2, 2, 2))),
}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_errors_match_jax(jsp, case):
    with pytest.raises(Exception) as want:
        ERROR_CASES[case](jsp)
    with pytest.raises(type(want.value)):
        ERROR_CASES[case](esp)


def test_windows_without_scipy_are_refused_clearly():
    with pytest.raises(NotImplementedError, match="kaiser"):
        esp.signal.welch(np.ones(32), window="kaiser", nperseg=8)
    with pytest.raises(ValueError, match="average"):  # (JAX: ValueError, after computing)
        esp.signal.welch(np.ones(32), nperseg=8, average="x")
    with pytest.raises(TypeError, match="convolve"):
        esp.signal.convolve([1.0, 2.0], np.ones(2))
