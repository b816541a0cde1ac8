"""Targeted tests for cov, corrcoef, trapezoid, interp, histogram_bin_edges and histogram.

Keyword arguments, edge cases and bad input that the op-record table cannot express; values
are checked against NumPy, dtypes / weak types / error classes against JAX where installed.
"""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import errors
from tests.probes import run_probe

BF16 = np.dtype(ml_dtypes.bfloat16)
RNG = np.random.default_rng(0)


def A(x, dtype=None):
    return jnp.asarray(np.asarray(x, dtype=dtype))


def close(actual, expected, tol=1e-5):
    actual = np.asarray(actual).astype(np.complex128 if np.iscomplexobj(actual) else np.float64)
    np.testing.assert_allclose(actual, np.asarray(expected), rtol=tol, atol=tol, equal_nan=True)


def np_quiet(fn, *args, **kw):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args, **kw)


# ---------------------------------------------------------------- cov


M = RNG.normal(size=(3, 6)).astype(np.float32)
Y = RNG.normal(size=(2, 6)).astype(np.float32)
FW = np.array([1, 2, 1, 3, 1, 2], np.int32)
AW = RNG.uniform(0.2, 2.0, size=6).astype(np.float32)


@pytest.mark.parametrize("kw", [
    {}, {"rowvar": False}, {"bias": True}, {"ddof": 0}, {"ddof": 2}, {"ddof": 3.5},
    {"bias": True, "ddof": 1}, {"fweights": FW}, {"aweights": AW},
    {"fweights": FW, "aweights": AW}, {"fweights": FW, "aweights": AW, "ddof": 0},
    {"fweights": FW, "ddof": 2}, {"aweights": AW, "bias": True},
])
def test_cov_keywords_match_numpy(kw):
    m = M.T if kw.get("rowvar") is False else M
    if isinstance(kw.get("ddof"), float):  # NumPy insists on an integer ddof; JAX does not
        n = m.shape[1]
        expected = np.cov(m, bias=True) * n / (n - kw["ddof"])
    else:
        expected = np.cov(m, **kw)
    ekw = {k: (A(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
    close(jnp.cov(A(m), **ekw), expected)


def test_cov_with_y():
    close(jnp.cov(A(M), A(Y)), np.cov(M, Y))
    close(jnp.cov(A(M.T), A(Y.T), rowvar=False), np.cov(M.T, Y.T, rowvar=False))
    close(jnp.cov(A(M[0]), A(Y)), np.cov(M[0], Y))
    close(jnp.cov(A(M.T), A(Y[0, :, None]), rowvar=False),
          np.cov(M.T, Y[0, :, None], rowvar=False))
    # JAX broadcasts m and y of different ranks together first: (6, 3) and (6,) do not
    # (NumPy would read y as one more variable).
    with pytest.raises(ValueError, match="incompatible shapes"):
        jnp.cov(A(M.T), A(Y[0]), rowvar=False)


def test_cov_dtypes():
    assert jnp.cov(A(M.astype(np.float16))).dtype == np.float16
    assert jnp.cov(A(M.astype(BF16))).dtype == BF16
    assert jnp.cov(A([[1, 2, 4], [0, 1, 1]], np.int8)).dtype == np.float32
    assert jnp.cov(A([True, False, True])).dtype == np.float32
    # float32 weights promote a float16 m; integer fweights do not.
    assert jnp.cov(A(M.astype(np.float16)), aweights=A(AW)).dtype == np.float32
    assert jnp.cov(A(M.astype(np.float16)), fweights=A(FW)).dtype == np.float16
    out = jnp.cov(A(M), dtype=jnp.float16)
    assert out.dtype == np.float16
    close(out, np.cov(M), tol=3e-2)
    assert not jnp.cov(A(M)).weak_type


def test_cov_complex():
    z = (RNG.normal(size=(2, 5)) + 1j * RNG.normal(size=(2, 5))).astype(np.complex64)
    out = jnp.cov(A(z))
    assert out.dtype == np.complex64
    close(out, np.cov(z))
    close(jnp.corrcoef(A(z)), np.corrcoef(z), tol=1e-5)


def test_cov_shapes_and_empty():
    assert jnp.cov(A(M[0])).shape == ()
    assert jnp.cov(A(M[:1])).shape == ()
    assert jnp.cov(A(np.zeros((0, 4), np.float16))).shape == (0, 0)
    assert jnp.cov(A(np.zeros((0, 4), np.float16))).dtype == np.float32  # JAX's jnp.array([])
    nan = jnp.cov(A(np.zeros((3, 0), np.float16)))
    assert nan.shape == (3, 3) and nan.dtype == np.float16 and np.isnan(np.asarray(nan)).all()
    assert np.isnan(float(jnp.cov(A(2.0))))
    # one observation: N - ddof = 0
    close(jnp.cov(A(M[:, :1])), np_quiet(np.cov, M[:, :1]))


def test_cov_negative_weights_are_made_positive():
    # NumPy rejects negative weights; JAX (and ember) use their absolute values.
    close(jnp.cov(A(M), fweights=A(-FW), aweights=A(-AW)), np.cov(M, fweights=FW, aweights=AW))


def test_cov_errors():
    with pytest.raises(ValueError, match="m has more than 2"):
        jnp.cov(jnp.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="y has more than 2"):
        jnp.cov(jnp.ones((2, 2)), jnp.ones((2, 2, 2)))
    with pytest.raises(TypeError, match="cov requires ndarray"):
        jnp.cov([1.0, 2.0])
    with pytest.raises(TypeError, match="cov requires ndarray"):
        jnp.cov(A(M), fweights=[1, 2, 1, 3, 1, 2])
    with pytest.raises(TypeError, match="fweights must be integer"):
        jnp.cov(A(M), fweights=A(FW, np.float32))
    with pytest.raises(RuntimeError, match="multidimensional fweights"):
        jnp.cov(A(M), fweights=A(FW.reshape(2, 3)))
    with pytest.raises(RuntimeError, match="samples and aweights"):
        jnp.cov(A(M), aweights=A(AW[:4]))
    with pytest.raises(RuntimeError, match="samples and fweights"):
        jnp.cov(A(M), fweights=A(3))
    with pytest.raises(ValueError, match="dtype must be"):
        jnp.cov(A(M), dtype=jnp.int32)
    with pytest.raises(TypeError, match="same number of observations"):
        jnp.cov(A(M), A(Y[:, :4]))
    with pytest.raises(ValueError, match="incompatible shapes"):  # JAX's rank promotion
        jnp.cov(A(M), A(Y[0, :4]))
    with pytest.raises(TypeError, match="ddof"):
        jnp.cov(A(M), ddof="1")


def test_cov_jit_grad_vmap():
    f = ember.jit(lambda m, fw, aw: jnp.cov(m, fweights=fw, aweights=aw))
    close(f(A(M), A(FW), A(AW)), np.cov(M, fweights=FW, aweights=AW))
    # ddof may be traced (the divisor is then computed on device).
    close(ember.jit(lambda m, d: jnp.cov(m, ddof=d))(A(M), 2), np.cov(M, ddof=2))
    with pytest.raises(errors.ConcretizationTypeError):
        ember.jit(lambda m, b: jnp.cov(m, bias=b))(A(M), True)
    # d/dm of sum(cov(m) * 1): the derivative of a sum of covariances.
    g = ember.grad(lambda m: jnp.sum(jnp.cov(m)))(A(M))
    xc = M - M.mean(axis=1, keepdims=True)
    expected = 2 * np.sum(xc, axis=0, keepdims=True) / (M.shape[1] - 1)
    close(g, np.broadcast_to(expected, M.shape), tol=1e-4)
    batch = RNG.normal(size=(4, 3, 6)).astype(np.float32)
    close(ember.vmap(jnp.cov)(A(batch)), np.stack([np.cov(b) for b in batch]))


# ---------------------------------------------------------------- corrcoef


def test_corrcoef_matches_numpy():
    close(jnp.corrcoef(A(M)), np.corrcoef(M))
    close(jnp.corrcoef(A(M), A(Y)), np.corrcoef(M, Y))
    close(jnp.corrcoef(A(M.T), A(Y.T), rowvar=False), np.corrcoef(M.T, Y.T, rowvar=False))
    close(jnp.corrcoef(A(M), dtype=jnp.float16), np.corrcoef(M), tol=2e-2)
    assert jnp.corrcoef(A(M), dtype=jnp.float16).dtype == np.float16


def test_corrcoef_edge_cases():
    assert float(jnp.corrcoef(A(M[0]))) == 1.0
    assert np.isnan(float(jnp.corrcoef(A([2.0, 2.0, 2.0]))))  # zero variance
    out = np.asarray(jnp.corrcoef(A([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]])))
    assert out[0, 0] == 1.0 and np.isnan(out[1, 1])
    # Perfectly (anti-)correlated rows: clipped into [-1, 1].
    x = np.array([[0.1, 0.7, 1.3, 9.1], [0.2, 1.4, 2.6, 18.2], [-0.3, -2.1, -3.9, -27.3]])
    c = np.asarray(jnp.corrcoef(A(x, np.float32)))
    assert np.all(np.abs(c) <= 1.0)
    close(c, np.sign(np.corrcoef(x)))
    assert jnp.corrcoef(A([[1, 2, 4], [0, 1, 1]], np.uint8)).dtype == np.float32
    with pytest.raises(TypeError, match="corrcoef requires ndarray"):
        jnp.corrcoef([1.0, 2.0])
    with pytest.raises(ValueError, match="dtype must be"):
        jnp.corrcoef(A(M), dtype=jnp.int8)


def test_corrcoef_grad_and_jit():
    f = ember.jit(lambda x: jnp.corrcoef(x)[0, 1])
    close(f(A(M)), np.corrcoef(M)[0, 1])
    g = np.asarray(ember.grad(lambda x: jnp.corrcoef(x)[0, 1])(A(M)))
    eps = 1e-3
    fd = np.zeros_like(M, dtype=np.float64)
    m64 = M.astype(np.float64)
    for idx in np.ndindex(M.shape):
        d = np.zeros_like(m64)
        d[idx] = eps
        fd[idx] = (np.corrcoef(m64 + d)[0, 1] - np.corrcoef(m64 - d)[0, 1]) / (2 * eps)
    close(g, fd, tol=1e-3)


# ---------------------------------------------------------------- trapezoid


Y2 = RNG.normal(size=(3, 5)).astype(np.float32)


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_trapezoid_x_and_dx(axis):
    n = Y2.shape[axis]
    x1 = np.sort(RNG.uniform(0, 4, size=n)).astype(np.float32)
    close(jnp.trapezoid(A(Y2), axis=axis), np.trapezoid(Y2, axis=axis))
    close(jnp.trapezoid(A(Y2), dx=0.25, axis=axis), np.trapezoid(Y2, dx=0.25, axis=axis))
    close(jnp.trapezoid(A(Y2), A(x1), axis=axis), np.trapezoid(Y2, x1, axis=axis))
    xn = RNG.uniform(0, 4, size=Y2.shape).astype(np.float32)
    close(jnp.trapezoid(A(Y2), A(xn), axis=axis), np.trapezoid(Y2, xn, axis=axis))


def test_trapezoid_dx_array_and_broadcast_x():
    dx = np.array([[0.5], [1.0], [2.0]], np.float32)  # one spacing per row
    close(jnp.trapezoid(A(Y2), dx=A(dx)), np.trapezoid(Y2, dx=dx))
    dx = np.array([0.5, 1.0, 2.0], np.float32)  # one spacing per row, integrating axis 0
    close(jnp.trapezoid(A(Y2.T), dx=A(dx), axis=0), np.trapezoid(Y2.T, dx=dx[:, None].T, axis=0))
    x = np.cumsum(RNG.uniform(0.1, 1, size=(1, 5)), axis=1).astype(np.float32)
    close(jnp.trapezoid(A(Y2), A(x)), np.trapezoid(Y2, x))


def test_trapezoid_dtypes_and_empty():
    assert jnp.trapezoid(A([1, 2, 3])).dtype == np.float32
    assert jnp.trapezoid(A([1, 2, 3], np.float16)).dtype == np.float16
    assert jnp.trapezoid(A([1, 2, 3], BF16)).dtype == BF16
    assert jnp.trapezoid(A([1, 2, 3], np.float16), dx=A(2.0, np.float32)).dtype == np.float32
    assert jnp.trapezoid(A([1, 2, 3], np.float16), A([0, 1, 3], np.float32)).dtype == np.float32
    assert not jnp.trapezoid(jnp.broadcast_to(A(1.0), (3,))).weak_type
    close(jnp.trapezoid(A([True, False, True])), 1.0)
    # An empty integration axis integrates to 0 (NumPy; JAX 0.10 raises an IndexError).
    for shape in [(0,), (3, 0)]:
        out = jnp.trapezoid(jnp.zeros(shape))
        assert out.shape == shape[:-1]
        close(out, np.trapezoid(np.zeros(shape)))
    close(jnp.trapezoid(jnp.ones((2, 1))), np.zeros(2))
    close(jnp.trapezoid(jnp.zeros(0), jnp.zeros(0)), 0.0)


def test_trapezoid_errors():
    with pytest.raises(ValueError, match="one-dimensional"):
        jnp.trapezoid(A(1.0))
    with pytest.raises(ValueError):  # np.exceptions.AxisError
        jnp.trapezoid(A(Y2), axis=2)
    with pytest.raises(ValueError, match="does not match"):
        jnp.trapezoid(A(Y2), A(np.arange(4.0)))
    with pytest.raises(TypeError, match="trapezoid requires ndarray"):
        jnp.trapezoid([1.0, 2.0])
    with pytest.raises(TypeError, match="trapezoid requires ndarray"):
        jnp.trapezoid(A(Y2), x=[1.0, 2.0, 3.0, 4.0, 5.0])


def test_trapezoid_grad_jit_vmap():
    x = np.array([0.0, 0.5, 2.0, 2.5, 4.0], np.float32)
    g = ember.grad(lambda y: jnp.trapezoid(y, A(x)))(A(Y2[0]))
    dx = np.diff(x)
    expected = np.concatenate([[dx[0]], dx[1:] + dx[:-1], [dx[-1]]]) / 2
    close(g, expected)
    gx = ember.grad(lambda x: jnp.trapezoid(A(Y2[0]), x))(A(x))
    yy = Y2[0].astype(np.float64)
    s = (yy[1:] + yy[:-1]) / 2
    close(gx, np.concatenate([[0.0], s]) - np.concatenate([s, [0.0]]), tol=1e-5)
    close(ember.jit(jnp.trapezoid, static_argnames="axis")(A(Y2), axis=0),
          np.trapezoid(Y2, axis=0))
    close(ember.vmap(lambda y: jnp.trapezoid(y, A(x)))(A(Y2)), np.trapezoid(Y2, x))


# ---------------------------------------------------------------- interp


XP = np.array([0.0, 1.0, 2.5, 4.0], np.float32)
FP = np.array([1.0, 3.0, -1.0, 0.5], np.float32)
XS = np.array([-1.0, 0.0, 0.3, 1.0, 2.0, 3.9, 4.0, 5.0], np.float32)


def test_interp_matches_numpy():
    close(jnp.interp(A(XS), A(XP), A(FP)), np.interp(XS, XP, FP))
    close(jnp.interp(A(XS.reshape(2, 4)), A(XP), A(FP)), np.interp(XS.reshape(2, 4), XP, FP))
    close(jnp.interp(1.5, A(XP), A(FP)), np.interp(1.5, XP, FP))
    close(jnp.interp(A(XS), A(XP), A(FP), left=-7.0, right=A(9.0)),
          np.interp(XS, XP, FP, left=-7.0, right=9.0))
    # array-valued left/right broadcast against x
    lv = np.arange(8.0, dtype=np.float32)
    close(jnp.interp(A(XS), A(XP), A(FP), left=A(lv)), np.where(XS < 0, lv, np.interp(XS, XP, FP)))
    # NaN x stays NaN
    assert np.isnan(float(jnp.interp(A(np.nan), A(XP), A(FP))))


def test_interp_extrapolate():
    out = np.asarray(jnp.interp(A(XS), A(XP), A(FP), left="extrapolate", right="extrapolate"))
    inner = np.interp(XS, XP, FP)
    lo = FP[0] + (XS - XP[0]) * (FP[1] - FP[0]) / (XP[1] - XP[0])
    hi = FP[-2] + (XS - XP[-2]) * (FP[-1] - FP[-2]) / (XP[-1] - XP[-2])
    close(out, np.where(XS < XP[0], lo, np.where(XS > XP[-1], hi, inner)))
    only_left = jnp.interp(A(XS), A(XP), A(FP), left="extrapolate")
    close(only_left, np.where(XS < XP[0], lo, inner))


@pytest.mark.parametrize("period", [3.0, -3.0, 360.0])
def test_interp_period(period):
    xp = np.array([190.0, -190.0, 350.0, 10.0, 170.0], np.float32)  # unsorted
    fp = np.array([5.0, 10.0, 3.0, 4.0, 1.0], np.float32)
    x = np.array([-180.0, -170.0, -185.0, 185.0, 3.5, 0.0, 359.0, 720.5], np.float32)
    close(jnp.interp(A(x), A(xp), A(fp), period=period), np.interp(x, xp, fp, period=period),
          tol=1e-4)
    # left / right are ignored with a period
    close(jnp.interp(A(x), A(xp), A(fp), left=99.0, right=-99.0, period=period),
          np.interp(x, xp, fp, period=period), tol=1e-4)


def test_interp_dtypes():
    ints = jnp.interp(A([0, 1, 3]), A([0, 2, 4]), A([0, 4, 8]))
    assert ints.dtype == np.float32
    close(ints, [0.0, 2.0, 6.0])
    assert jnp.interp(A(XS, np.float16), A(XP, np.float16), A(FP, np.float16)).dtype == \
        np.float16
    assert jnp.interp(A(XS, np.float16), A(XP), A(FP, np.float16)).dtype == np.float32
    assert jnp.interp(A(XS), A(XP), A(FP, np.float16)).dtype == np.float32
    assert jnp.interp(A(XS), A(XP), A(FP, np.float16), left=-1, right=7.5).dtype == np.float32
    out = jnp.interp(A(XS), A(XP), A(FP + 1j * FP, np.complex64))
    assert out.dtype == np.complex64
    close(out, np.interp(XS, XP, FP + 1j * FP))


def test_interp_bfloat16():
    # JAX 0.10 fails on bfloat16 (np.finfo of the bfloat16 scalar type); ember supports it.
    out = jnp.interp(A(XS, BF16), A(XP, BF16), A(FP, BF16))
    assert out.dtype == BF16
    close(out.astype(np.float32), np.interp(XS, XP.astype(BF16).astype(np.float32),
                                            FP.astype(BF16).astype(np.float32)), tol=3e-2)


def test_interp_degenerate_sample_points():
    close(jnp.interp(A(XS), A([2.0]), A([7.0])), np.interp(XS, [2.0], [7.0]))
    # Repeated xp: the right-hand value (NumPy's choice too, away from the last point).
    xp, fp = [0.0, 1.0, 1.0, 2.0], [0.0, 1.0, 3.0, 4.0]
    close(jnp.interp(A([0.0, 0.5, 1.0, 1.5]), A(xp), A(fp)),
          np.interp([0.0, 0.5, 1.0, 1.5], xp, fp))
    assert jnp.interp(A(np.zeros(0, np.float32)), A(XP), A(FP)).shape == (0,)


def test_interp_errors():
    with pytest.raises(ValueError, match="one-dimensional arrays of equal size"):
        jnp.interp(A(XS), A(XP), A(FP[:3]))
    with pytest.raises(ValueError, match="one-dimensional arrays of equal size"):
        jnp.interp(A(XS), A(XP.reshape(2, 2)), A(FP.reshape(2, 2)))
    with pytest.raises(ValueError, match="must not be empty"):
        jnp.interp(A(XS), jnp.zeros(0), jnp.zeros(0))
    with pytest.raises(ValueError, match="'extrapolate'"):
        jnp.interp(A(XS), A(XP), A(FP), left="linear")
    with pytest.raises(ValueError, match="'extrapolate'"):
        jnp.interp(A(XS), A(XP), A(FP), right="clip")
    with pytest.raises(ValueError, match="complex x"):
        jnp.interp(A(XS + 1j), A(XP), A(FP))
    with pytest.raises(ValueError, match="period must be a scalar"):
        jnp.interp(A(XS), A(XP), A(FP), period=A([2.0]))
    with pytest.raises(TypeError, match="interp requires ndarray"):
        jnp.interp([1.0], A(XP), A(FP))
    with pytest.raises(TypeError, match="interp requires ndarray"):
        jnp.interp(A(XS), A(XP), A(FP), left=[1.0])


def test_interp_jit_grad_vmap():
    f = ember.jit(lambda x, xp, fp, lv, rv, p: jnp.interp(x, xp, fp, lv, rv, p))
    close(f(A(XS), A(XP), A(FP), -7.0, 9.0, 3.0), np.interp(XS, XP, FP, period=3.0), tol=1e-4)
    g = ember.jit(lambda x, lv: jnp.interp(x, A(XP), A(FP), left=lv))
    close(g(A(XS), 5.0), np.interp(XS, XP, FP, left=5.0))
    # slope of the segment
    close(ember.grad(lambda x: jnp.interp(x, A(XP), A(FP)))(A(np.float32(1.75))), -4.0 / 1.5)
    # d/dfp is the hat-function weight; flat outside the points
    close(ember.grad(lambda fp: jnp.interp(A(np.float32(1.75)), A(XP), fp))(A(FP)),
          [0.0, 0.5, 0.5, 0.0])
    close(ember.grad(lambda x: jnp.interp(x, A(XP), A(FP)))(A(np.float32(-3.0))), 0.0)
    # repeated sample points give no NaN gradients
    gd = ember.grad(lambda fp: jnp.sum(jnp.interp(A([0.5, 1.0, 1.5]), A([0.0, 1.0, 1.0, 2.0]),
                                                  fp)))(A([0.0, 1.0, 3.0, 4.0]))
    assert np.all(np.isfinite(np.asarray(gd)))
    xs = RNG.uniform(-1, 5, size=(3, 4)).astype(np.float32)
    close(ember.vmap(lambda x: jnp.interp(x, A(XP), A(FP)))(A(xs)), np.interp(xs, XP, FP))


# ---------------------------------------------------------------- histogram_bin_edges / histogram


DATA = RNG.normal(size=(4, 5)).astype(np.float32)


def test_histogram_bin_edges():
    close(jnp.histogram_bin_edges(A(DATA), 7), np.histogram_bin_edges(DATA, 7))
    close(jnp.histogram_bin_edges(A(DATA), 4, range=(-1, 3)),
          np.histogram_bin_edges(DATA, 4, range=(-1, 3)))
    close(jnp.histogram_bin_edges(A(DATA), 4, range=A([-1.0, 3.0])), [-1.0, 0.0, 1.0, 2.0, 3.0])
    close(jnp.histogram_bin_edges(A(DATA), 4, range=(A(-1.0), 3)), [-1.0, 0.0, 1.0, 2.0, 3.0])
    close(jnp.histogram_bin_edges(A([2.0, 2.0]), 2), np.histogram_bin_edges([2.0, 2.0], 2))
    close(jnp.histogram_bin_edges(A(DATA), 3, weights=A(DATA)), np.histogram_bin_edges(DATA, 3))
    edges = jnp.histogram_bin_edges(A(DATA), A([0, 1, 5], np.int8))
    assert edges.dtype == np.float32 and not edges.weak_type
    close(edges, [0.0, 1.0, 5.0])
    assert jnp.histogram_bin_edges(A([1, 2, 3], np.int16), 2).dtype == np.float32
    assert jnp.histogram_bin_edges(A([1, 2, 3], np.float16), 2).dtype == np.float16
    assert jnp.histogram_bin_edges(A([1, 2, 3], BF16), A([0, 1])).dtype == BF16
    assert jnp.histogram_bin_edges(A(DATA), A(3)).shape == (4,)  # 0-d integer array
    assert jnp.histogram_bin_edges(A(DATA), 0).shape == (1,)
    close(jnp.histogram_bin_edges(jnp.zeros(0), 2, range=(0, 1)), [0.0, 0.5, 1.0])


@pytest.mark.parametrize("bins", [7, 100, 257])
def test_jitted_histogram_of_many_values_matches_numpy(bins):
    """Many values: the bin search runs as its own threaded loop and the counting scatter
    reads its indices (the fusion pass keeps a long index computation out of a scatter)."""
    width = 1.0 / bins
    centers = (RNG.integers(0, bins, 200_001) + 0.5) * width  # (never near an edge)
    data = np.concatenate([centers, [0.0, 1.0, -0.5, 2.0, np.nan]]).astype(np.float32)
    weights = RNG.random(data.size).astype(np.float32)
    counts = ember.jit(lambda d: jnp.histogram(d, bins=bins, range=(0.0, 1.0))[0])(data)
    want, _ = np.histogram(data[~np.isnan(data)], bins=bins, range=(0.0, 1.0))
    np.testing.assert_array_equal(np.asarray(counts), want)
    got_w = ember.jit(lambda d, w: jnp.histogram(d, bins=bins, range=(0.0, 1.0),
                                                 weights=w)[0])(data, weights)
    ok = ~np.isnan(data)
    want_w, _ = np.histogram(data[ok], bins=bins, range=(0.0, 1.0), weights=weights[ok])
    np.testing.assert_allclose(np.asarray(got_w), want_w, rtol=1e-4)


def test_histogram_bin_edges_errors():
    with pytest.raises(NotImplementedError):
        jnp.histogram_bin_edges(A(DATA), "auto")
    with pytest.raises(TypeError):
        jnp.histogram_bin_edges(A(DATA), 2.5)
    with pytest.raises(TypeError):
        jnp.histogram_bin_edges(A(DATA), jnp.ones((2, 2)))
    with pytest.raises(TypeError, match="requires ndarray"):
        jnp.histogram_bin_edges(A(DATA), [0, 1, 2])
    with pytest.raises(ValueError, match="non-negative"):
        jnp.histogram_bin_edges(A(DATA), -2)
    with pytest.raises(ValueError, match="range"):
        jnp.histogram_bin_edges(A(DATA), 2, range=(0, 1, 2))
    with pytest.raises(ValueError, match="range"):
        jnp.histogram_bin_edges(A(DATA), 2, range=A([[0, 1]]))
    with pytest.raises(ValueError, match="zero-size"):  # min of no data (as JAX)
        jnp.histogram_bin_edges(jnp.zeros(0), 2)
    with pytest.raises(errors.ConcretizationTypeError):
        ember.jit(lambda a, b: jnp.histogram_bin_edges(a, b))(A(DATA), 3)


@pytest.mark.parametrize("kw", [
    {"bins": 5}, {"bins": 4, "range": (-1.0, 1.0)}, {"bins": 6, "density": True},
    {"bins": 3, "range": (-2.0, 2.0), "density": True},
    {"bins": np.array([-2.0, -0.5, 0.0, 0.25, 3.0], np.float32)},
    {"bins": np.array([-1.0, 0.0, 1.0], np.float32), "density": True},
])
@pytest.mark.parametrize("weighted", [False, True])
def test_histogram_matches_numpy(kw, weighted):
    w = RNG.uniform(0.1, 2.0, size=DATA.shape).astype(np.float32) if weighted else None
    ekw = {k: (A(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
    counts, edges = jnp.histogram(A(DATA), weights=None if w is None else A(w), **ekw)
    ref_counts, ref_edges = np.histogram(DATA, weights=w, **kw)
    close(counts, ref_counts)
    close(edges, ref_edges)
    assert counts.dtype == edges.dtype == np.float32


def test_histogram_bins_edges_semantics():
    a = np.array([-3.0, 0.0, 0.5, 1.0, 1.0, 2.0, 2.0, 7.0, np.nan], np.float32)
    # [0, 1), [1, 2]: values on an interior edge go right, on the last edge inside, outside
    # values and NaN nowhere.
    counts, _ = jnp.histogram(A(a), A([0.0, 1.0, 2.0]))
    close(counts, [2.0, 4.0])
    counts, _ = jnp.histogram(A([1, 2, 2, 3, 9], np.int32), 2, range=(0, 4))
    close(counts, [1.0, 3.0])
    counts, edges = jnp.histogram(A([5.0, 6.0]), A([1.0]))
    assert counts.shape == (0,) and edges.shape == (1,)
    counts, _ = jnp.histogram(A([5.0, 6.0]), A([1.0, 2.0, 3.0]), density=True)
    assert np.isnan(np.asarray(counts)).all()  # nothing inside: 0 / 0 (NumPy too)
    counts, _ = jnp.histogram(jnp.zeros(0), 3, range=(0, 1))
    close(counts, [0.0, 0.0, 0.0])


def test_histogram_dtypes():
    c, e = jnp.histogram(A([1, 2, 2, 3], np.int8), 2)
    assert c.dtype == e.dtype == np.float32
    c, e = jnp.histogram(A([1, 2, 2, 3], np.float16), 2)
    assert c.dtype == e.dtype == np.float16
    c, e = jnp.histogram(A([1, 2, 2, 3], np.int32), 2, weights=A([1, 2, 3, 4], np.float16))
    assert c.dtype == e.dtype == np.float16
    close(c, [1.0, 9.0])
    c, e = jnp.histogram(A([True, False, True]), 2)
    close(c, [1.0, 2.0])
    c, _ = jnp.histogram(A(1.0), 2)
    assert not c.weak_type


def test_histogram_errors():
    with pytest.raises(ValueError, match="same shape"):
        jnp.histogram(A(DATA), 3, weights=jnp.ones(3))
    with pytest.raises(TypeError, match="histogram requires ndarray"):
        jnp.histogram(A(DATA), 3, weights=[1.0] * 20)
    with pytest.raises(TypeError, match="requires ndarray"):
        jnp.histogram([1.0, 2.0], 3)
    with pytest.raises(ValueError, match="at least one edge"):
        jnp.histogram(A(DATA), jnp.zeros(0))
    with pytest.raises(errors.ConcretizationTypeError):
        ember.jit(lambda a, d: jnp.histogram(a, 3, density=d))(A(DATA), True)


def test_histogram_jit_grad_vmap():
    bins = A([-2.0, -0.5, 0.0, 0.5, 2.0])
    f = ember.jit(lambda a, b, w: jnp.histogram(a, b, weights=w, density=True))
    w = RNG.uniform(0.1, 2.0, size=DATA.shape).astype(np.float32)
    c, e = f(A(DATA), bins, A(w))
    rc, re = np.histogram(DATA, np.asarray(bins), weights=w, density=True)
    close(c, rc)
    close(e, re)
    c, _ = ember.jit(lambda a: jnp.histogram(a, 5, range=(-2, 2)))(A(DATA))
    close(c, np.histogram(DATA, 5, range=(-2, 2))[0])
    # d counts[k] / d w[i] = [value i falls in bin k]
    jac = np.asarray(ember.jacrev(lambda w: jnp.histogram(A(DATA.ravel()), bins, weights=w)[0])(
        A(w.ravel())))
    idx = np.searchsorted(np.asarray(bins), DATA.ravel(), side="right") - 1
    expected = np.zeros((4, DATA.size))
    inside = (idx >= 0) & (idx < 4)
    expected[idx[inside], np.nonzero(inside)[0]] = 1.0
    close(jac, expected)
    batched = ember.vmap(lambda a: jnp.histogram(a, 4))(A(DATA))
    for row, c, e in zip(DATA, *batched):
        rc, re = np.histogram(row, 4)
        close(c, rc)
        close(e, re)


# ---------------------------------------------------------------- against JAX (test-only oracle)


def _probes(n):
    m = n.asarray(M)
    return {
        "cov_weak_python_scalar": lambda: n.cov(3.0),
        "cov_weak_1d": lambda: n.cov(n.broadcast_to(n.asarray(1.0), (3,))),
        "cov_int_y_float16": lambda: n.cov(n.arange(3), n.ones(3, n.float16)),
        "cov_fweights_bool": lambda: n.cov(m, fweights=n.ones(6, bool)),
        "cov_aweights_int": lambda: n.cov(m, aweights=n.arange(6)),
        "cov_ddof_float": lambda: n.cov(m, ddof=0.5),
        "cov_dtype_float16": lambda: n.cov(m, dtype=n.float16),
        "cov_dtype_int": lambda: n.cov(m, dtype=n.int32),
        "cov_empty_rows": lambda: n.cov(n.zeros((0, 3), n.float16)),
        "cov_no_observations": lambda: n.cov(n.zeros((2, 0), n.float16)),
        "cov_y_3d": lambda: n.cov(n.ones((2, 2)), n.ones((2, 2, 2))),
        "cov_y_wrong_n": lambda: n.cov(n.ones((2, 3)), n.ones((2, 4))),
        "cov_fweights_float": lambda: n.cov(m, fweights=n.ones(6)),
        "cov_aweights_2d": lambda: n.cov(m, aweights=n.ones((6, 1))),
        "corrcoef_weak": lambda: n.corrcoef(n.broadcast_to(n.asarray(1.0), (2, 3))),
        "corrcoef_1d": lambda: n.corrcoef(n.arange(5)),
        "corrcoef_int8_y": lambda: n.corrcoef(n.arange(4, dtype=n.int8), n.ones(4, n.float16)),
        "corrcoef_bfloat16": lambda: n.corrcoef(m.astype(n.bfloat16)),
        "trapezoid_weak": lambda: n.trapezoid(n.broadcast_to(n.asarray(1.0), (3,))),
        "trapezoid_float16_dx_float32": lambda: n.trapezoid(n.ones(4, n.float16),
                                                            dx=n.float32(2)),
        "trapezoid_dx_column": lambda: n.trapezoid(n.ones((2, 3)), dx=n.array([[1.0], [2.0]])),
        "trapezoid_x_2d_axis0": lambda: n.trapezoid(n.ones((3, 2)), n.arange(6.0).reshape(3, 2),
                                                    axis=0),
        "trapezoid_scalar": lambda: n.trapezoid(n.asarray(1.0)),
        "trapezoid_axis_oob": lambda: n.trapezoid(n.ones((2, 3)), axis=2),
        "interp_weak_x": lambda: n.interp(n.asarray(1.5), m[0], m[1]),
        "interp_python_x": lambda: n.interp(0.5, n.arange(3.0), n.arange(3.0)),
        "interp_weak_fp": lambda: n.interp(m[0], n.sort(m[1]),
                                           n.broadcast_to(n.asarray(1.0), (6,))),
        "interp_int_all": lambda: n.interp(n.arange(5), n.arange(0, 10, 2), n.arange(5)),
        "interp_float16_left_float32": lambda: n.interp(
            n.arange(3.0, dtype=n.float16), n.arange(3.0, dtype=n.float16),
            n.ones(3, n.float16), left=n.float32(3)),
        "interp_float16_left_python": lambda: n.interp(
            n.arange(-1.0, 4.0, dtype=n.float16), n.arange(3.0, dtype=n.float16),
            n.ones(3, n.float16), left=-1, right=7.5),
        "interp_period_int": lambda: n.interp(n.array([-1, 5, 0]), n.array([0, 1, 2]),
                                              n.array([0.0, 10.0, 5.0]), period=3),
        "interp_period_zero": lambda: n.interp(n.array([0.5]), n.array([0.0, 1.0]),
                                               n.array([0.0, 1.0]), period=0),
        "interp_extrapolate": lambda: n.interp(n.array([-1.0, 5.0]), n.arange(3.0),
                                               n.array([0.0, 10.0, 5.0]), left="extrapolate",
                                               right="extrapolate"),
        "interp_bool": lambda: n.interp(n.array([True]), n.array([False, True]),
                                        n.array([True, False])),
        "interp_bad_shape": lambda: n.interp(n.ones(3), n.ones(3), n.ones(2)),
        "hbe_weak": lambda: n.histogram_bin_edges(n.asarray(1.0), 3),
        "hbe_int8_edges": lambda: n.histogram_bin_edges(n.ones(3, n.int8),
                                                        n.array([0, 1, 2], n.int8)),
        "hbe_bins_zero": lambda: n.histogram_bin_edges(n.ones(3), 0),
        "hbe_inverted_range": lambda: n.histogram_bin_edges(n.ones(3), 2, range=(5, 1)),
        "hbe_float16": lambda: n.histogram_bin_edges(m.astype(n.float16), 4),
        "hbe_bfloat16": lambda: n.histogram_bin_edges(m.astype(n.bfloat16), 4),
        "hbe_bins_float": lambda: n.histogram_bin_edges(m, 2.0),
        "hist_weak": lambda: n.histogram(n.asarray(1.0), 2),
        "hist_weak_int": lambda: n.histogram(n.asarray(1), 2),
        "hist_bool": lambda: n.histogram(n.array([True, False, True]), 2),
        "hist_float16": lambda: n.histogram(m.astype(n.float16), 4, range=(-2, 2)),
        "hist_bfloat16": lambda: n.histogram(m.astype(n.bfloat16), 4, range=(-2, 2)),
        "hist_weights_float16_int_a": lambda: n.histogram(n.array([1, 2, 2, 3]), 2,
                                                          weights=n.array([1, 2, 3, 4],
                                                                          n.float16)),
        "hist_bins_zero": lambda: n.histogram(n.array([1.0, 2.0]), 0),
        "hist_density_empty": lambda: n.histogram(n.array([5.0, 6.0]), n.array([1.0, 2, 3]),
                                                  density=True),
        "hist_weights_shape": lambda: n.histogram(n.ones(4), 2, weights=n.ones(3)),
    }


PROBE_NAMES = list(_probes(jnp))


@pytest.mark.parametrize("name", PROBE_NAMES)
def test_matches_jax(name, jax):
    ours, our_exc = run_probe(_probes(jnp)[name])
    theirs, their_exc = run_probe(_probes(jax.numpy)[name])
    if their_exc is not None:
        assert our_exc is not None, f"JAX raises {their_exc!r}, ember returns"
        assert isinstance(our_exc, type(their_exc)), (our_exc, their_exc)
        return
    assert our_exc is None, f"ember raises {our_exc!r}"
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        assert (o.shape, np.dtype(o.dtype)) == (t.shape, np.dtype(t.dtype)), (o, t)
        assert o.weak_type == t.weak_type, (o.aval, t)
        dt = np.dtype(t.dtype)
        tol = 3e-2 if dt == BF16 else 5e-3 if dt == np.float16 else 1e-5
        conv = np.complex128 if dt.kind == "c" else np.float64
        np.testing.assert_allclose(np.asarray(o).astype(conv), np.asarray(t).astype(conv),
                                   rtol=tol, atol=tol, equal_nan=True)


# ---------------------------------------------------------------- histogramdd / histogram2d


def test_histogramdd_and_histogram2d_match_numpy():
    rng = np.random.default_rng(3)
    x = rng.standard_normal(200).astype(np.float32)
    y = (rng.standard_normal(200) * 2).astype(np.float32)
    w = rng.random(200).astype(np.float32)
    sample = np.stack([x, y, x * y], 1)
    for kwargs in ({"bins": 4}, {"bins": (3, 5, 2)}, {"bins": 3, "weights": w},
                   {"bins": (np.array([-2.0, 0.0, 0.5, 3.0]), 4, 2),
                    "range": [None, (-1.0, 1.0), None]},
                   {"bins": 3, "density": True}):
        got, got_edges = jnp.histogramdd(jnp.asarray(sample), **kwargs)
        want, want_edges = np.histogramdd(sample.astype(np.float64), **kwargs)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-6)
        for g, e in zip(got_edges, want_edges):
            np.testing.assert_allclose(np.asarray(g), e, rtol=1e-5, atol=1e-6)
    h, ex, ey = jnp.histogram2d(jnp.asarray(x), jnp.asarray(y), bins=(4, 6))
    want = np.histogram2d(x, y, bins=(4, 6))
    assert h.dtype == np.int32  # counts, as in JAX
    np.testing.assert_array_equal(np.asarray(h), want[0])
    np.testing.assert_allclose(np.asarray(ey), want[2], rtol=1e-6, atol=1e-6)
    edges = np.array([-3.0, -1.0, 0.0, 1.0, 3.0], np.float32)  # one edge array for both
    h = jnp.histogram2d(jnp.asarray(x), jnp.asarray(y), bins=edges)[0]
    np.testing.assert_array_equal(np.asarray(h), np.histogram2d(x, y, bins=edges)[0])
    jitted = ember.jit(lambda a, b: jnp.histogram2d(a, b, bins=3)[0])(x, y)
    np.testing.assert_array_equal(np.asarray(jitted), np.histogram2d(x, y, bins=3)[0])
    with pytest.raises(ValueError, match="one entry per sample"):
        jnp.histogramdd(jnp.asarray(sample), weights=jnp.ones(3))
    with pytest.raises(ValueError, match="one entry per dimension"):
        jnp.histogramdd(jnp.asarray(sample), bins=(2, 2))
    with pytest.raises(ValueError, match="pairs or Nones"):
        jnp.histogramdd(jnp.asarray(sample), range=[(0, 1)])
