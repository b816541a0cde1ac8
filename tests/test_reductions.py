"""Targeted tests for reductions: dtype rules, NaNs, empty inputs, params and bad calls."""

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax


def A(x, dtype=None):
    return jnp.asarray(np.asarray(x, dtype=dtype))


# ---------------------------------------------------------------- dtype rules


@pytest.mark.parametrize("dt,expected", [
    ("bool", "int32"), ("int8", "int32"), ("uint8", "uint32"), ("int32", "int32"),
    ("float16", "float16"), ("float32", "float32"),
])
def test_sum_prod_cumsum_dtypes(dt, expected):
    x = A(np.ones(4), dt)
    assert jnp.sum(x).dtype == np.dtype(expected)
    assert jnp.prod(x).dtype == np.dtype(expected)
    assert jnp.cumulative_sum(x).dtype == np.dtype(expected)
    # JAX: cumsum/cumprod keep narrow int dtypes; only bools widen
    kept = "int32" if dt == "bool" else dt
    assert jnp.cumsum(x).dtype == np.dtype(kept)
    assert jnp.cumprod(x).dtype == np.dtype(kept)


def test_cumsum_int8_wraps_like_jax():
    out = jnp.cumsum(A([100, 100], "int8"))
    assert out.dtype == np.int8 and np.asarray(out).tolist() == [100, -56]
    assert np.asarray(jnp.cumsum(A([-1, 1, 0]), dtype=bool)).tolist() == [True, True, True]
    assert np.asarray(jnp.cumsum(jnp.asarray(3), axis=0)).tolist() == [3]
    with pytest.raises(TypeError):
        lax.cummax(A([True, False]))
    with pytest.raises(TypeError):
        jnp.ptp(A([True, False]))


def test_sum_dtype_argument_and_promote_integers():
    x = A(np.full(300, 1), "int8")
    assert jnp.sum(x, dtype=jnp.float32).dtype == np.float32
    assert int(jnp.sum(x)) == 300
    assert jnp.sum(x, promote_integers=False).dtype == np.int8
    assert jnp.cumsum(x, dtype=jnp.int8).dtype == np.int8


@pytest.mark.parametrize("dt", ["int32", "int8", "uint8", "bool"])
def test_mean_var_std_of_ints_are_float32(dt):
    x = A(np.arange(6) % 2, dt)
    for fn in (jnp.mean, jnp.var, jnp.std, jnp.median):
        assert fn(x).dtype == np.float32, fn


def test_argmax_dtype_and_weak_types():
    assert jnp.argmax(A([1.0, 3.0, 2.0], "float32")).dtype == np.int32
    assert not jnp.sum(2.0).weak_type  # JAX's reductions drop weak types
    assert not jnp.max(jnp.asarray(3)).weak_type and not jnp.mean(2.0).weak_type
    assert not jnp.sum(A([1.0], "float32")).weak_type
    assert jnp.mean(A([1.0, 2.0], "float16")).dtype == np.float16


def test_float16_bfloat16_sums_accumulate_in_float32():
    x = np.full(4096, 0.1, np.float32)
    for dt in (np.float16, ml_dtypes.bfloat16):
        out = jnp.sum(A(x, dt))
        assert out.dtype == np.dtype(dt)
        np.testing.assert_allclose(float(out), float(np.sum(x.astype(dt).astype(np.float64))),
                                   rtol=1e-2)


def test_float32_sum_accuracy_1e6():
    x = np.random.default_rng(0).uniform(0, 1, 10**6).astype(np.float32)
    out = float(jnp.sum(A(x)))
    ref = float(np.sum(x.astype(np.float64)))
    assert abs(out - ref) / ref < 1e-5


# ---------------------------------------------------------------- NaN handling


def test_nan_semantics():
    x = np.array([1.0, np.nan, 3.0, np.nan], np.float32)
    assert np.isnan(float(jnp.max(A(x)))) and np.isnan(float(jnp.min(A(x))))
    assert int(jnp.argmax(A(x))) == 1 and int(jnp.argmin(A(x))) == 1
    assert int(lax.argmax(A(x), 0, np.int32)) == 1
    assert np.isnan(float(lax.reduce_max(A(x), (0,))))
    assert float(jnp.nanmax(A(x))) == 3.0 and float(jnp.nanmin(A(x))) == 1.0
    assert float(jnp.nansum(A(x))) == 4.0 and float(jnp.nanmean(A(x))) == 2.0
    assert int(jnp.nanargmax(A(x))) == 2 and int(jnp.nanargmin(A(x))) == 0
    assert np.isnan(float(jnp.median(A(x))))
    assert float(jnp.nanmedian(A(x))) == 2.0
    np.testing.assert_array_equal(np.asarray(jnp.nancumsum(A(x))), np.nancumsum(x))
    allnan = A([np.nan, np.nan], "float32")
    assert np.isnan(float(jnp.nanmax(allnan))) and int(jnp.nanargmax(allnan)) == -1
    np.testing.assert_array_equal(np.asarray(lax.cummax(A(x))), np.maximum.accumulate(x))


@pytest.mark.parametrize("mode", ["eager", "interpreter", "cpu"])
@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
def test_max_min_order_negative_zero_below_zero(mode, dt):
    # As XLA: maximum(+0, -0) is +0 and minimum is -0 in either order, elementwise and in
    # reductions (NumPy returns the zero of a tie by position).
    def run(f, *args):
        g = f if mode == "eager" else ember.jit(f, backend=mode)
        return np.asarray(g(*args)).astype(np.float64)

    pz, nz = np.array(0.0, dt), np.array(-0.0, dt)
    for a, b in ((pz, nz), (nz, pz)):
        assert not np.signbit(run(jnp.maximum, a, b))
        assert np.signbit(run(jnp.minimum, a, b))
        pair = np.stack([a, b])
        assert not np.signbit(run(jnp.max, pair)) and np.signbit(run(jnp.min, pair))
        assert not np.signbit(run(lambda v: lax.reduce_max(v, (0,)), pair))
    both = np.array([-0.0, -0.0], dt)
    assert np.signbit(run(jnp.max, both)) and not np.signbit(run(jnp.min, -both))
    assert np.signbit(run(jnp.maximum, nz, nz)) and not np.signbit(run(jnp.minimum, pz, pz))
    rows = np.array([[0.0, -0.0], [-0.0, 0.0], [-0.0, -0.0], [-1.0, -0.0], [1.0, 0.0]], dt)
    np.testing.assert_array_equal(np.signbit(run(lambda v: jnp.max(v, axis=1), rows)),
                                  [False, False, True, True, False])
    np.testing.assert_array_equal(np.signbit(run(lambda v: jnp.min(v, axis=1), rows)),
                                  [True, True, True, True, False])
    scan = np.array([0.0, -0.0, -1.0, -0.0, 0.0], dt)
    np.testing.assert_array_equal(np.signbit(run(lax.cummax, scan)), [0, 0, 0, 0, 0])
    np.testing.assert_array_equal(np.signbit(run(lax.cummin, scan)), [0, 1, 1, 1, 1])
    rising = np.array([-0.0, -1.0, -0.0, 0.0, -0.0], dt)
    np.testing.assert_array_equal(np.signbit(run(lax.cummax, rising)), [1, 1, 1, 0, 0])
    np.testing.assert_array_equal(np.signbit(run(lax.cummin, -rising)), [0, 0, 0, 1, 1])
    # Broadcasting operands, NaN untouched.
    got = run(jnp.maximum, np.array([0.0, -0.0, np.nan, -2.0], dt), nz)
    np.testing.assert_array_equal(np.signbit(got[[0, 1, 3]]), [False, True, True])
    assert np.isnan(got[2])


@pytest.mark.parametrize("mode", ["eager", "interpreter", "cpu"])
@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "float64"])
def test_scatter_max_min_order_negative_zero_below_zero(mode, dt):
    # Scatter-max/min too (NumPy's ufunc.at keeps either zero of a tie); JAX agrees.
    def run(f, *args):
        g = f if mode == "eager" else ember.jit(f, backend=mode)
        return np.asarray(g(*args)).astype(np.float64)
    base = np.array([0.0, -0.0, 0.0, -0.0, -0.0, 1.0, 0.0], dt)
    idx = np.array([0, 1, 2, 3, 4, 4, 6, 6], np.int32)
    upd = np.array([-0.0, 0.0, 0.0, -0.0, -0.0, -0.0, -0.0, 0.0], dt)
    mx = run(lambda b, u: jnp.asarray(b).at[idx].max(u), base, upd)
    mn = run(lambda b, u: jnp.asarray(b).at[idx].min(u), base, upd)
    # max: +0 when any +0 meets the position; min: -0 when any -0 does.
    np.testing.assert_array_equal(np.signbit(mx), [0, 0, 0, 1, 1, 0, 0])
    np.testing.assert_array_equal(np.signbit(mn), [1, 1, 0, 1, 1, 0, 1])
    np.testing.assert_array_equal(mx, [0, 0, 0, 0, 0, 1, 0])


@pytest.mark.parametrize("mode", ["eager", "interpreter", "cpu"])
def test_windowed_scatter_max_min_order_negative_zero_below_zero(mode):
    dn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
    base = np.array([[0.0, -0.0, 5.0], [-0.0, -0.0, 5.0], [1.0, -0.0, 0.0]], np.float32)
    idx = np.array([[0], [0], [1]], np.int32)
    upd = np.array([[-0.0, -0.0], [-0.0, 0.0], [-0.0, 0.0]], np.float32)
    def run(f):
        g = f if mode == "eager" else ember.jit(f, backend=mode)
        return np.asarray(g(jnp.asarray(base), jnp.asarray(upd)))
    mx = run(lambda b, u: lax.scatter_max(b, idx, u, dn))
    mn = run(lambda b, u: lax.scatter_min(b, idx, u, dn))
    np.testing.assert_array_equal(np.signbit(mx), [[0, 0, 0], [1, 0, 0], [0, 1, 0]])
    np.testing.assert_array_equal(np.signbit(mn), [[1, 1, 0], [1, 1, 0], [0, 1, 0]])


# ---------------------------------------------------------------- empty reductions


def test_empty_reductions_give_identity():
    e = A(np.zeros((0, 3)), "float32")
    np.testing.assert_array_equal(np.asarray(jnp.sum(e, axis=0)), np.zeros(3))
    np.testing.assert_array_equal(np.asarray(jnp.prod(e, axis=0)), np.ones(3))
    assert float(lax.reduce_max(e, (0, 1))) == -np.inf
    assert float(lax.reduce_min(e, (0, 1))) == np.inf
    ei = A(np.zeros((0,)), "int8")
    assert int(lax.reduce_max(ei, (0,))) == -128 and int(lax.reduce_min(ei, (0,))) == 127
    assert bool(jnp.all(A(np.zeros(0, bool)))) and not bool(jnp.any(A(np.zeros(0, bool))))
    assert float(jnp.max(e, initial=5.0)) == 5.0
    assert jnp.max(e, axis=1).shape == (0,)
    assert np.isnan(float(jnp.mean(e)))


# ---------------------------------------------------------------- params


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), (2, 0, 1)])
def test_keepdims_shapes(axis):
    x = np.random.default_rng(1).normal(size=(2, 3, 4)).astype(np.float32)
    for name in ("sum", "prod", "max", "min", "mean", "var", "std", "any", "all", "median",
                 "ptp"):
        out = getattr(jnp, name)(A(x), axis=axis, keepdims=True)
        ref = getattr(np, name)(x, axis=axis, keepdims=True)
        assert out.shape == ref.shape, name
        np.testing.assert_allclose(np.asarray(out, np.float64), ref, rtol=1e-5, atol=1e-5)


def test_argmax_keepdims_and_axis_none():
    x = np.random.default_rng(2).normal(size=(3, 4)).astype(np.float32)
    assert jnp.argmax(A(x), keepdims=True).shape == (1, 1)
    assert jnp.argmin(A(x), axis=1, keepdims=True).shape == (3, 1)
    assert int(jnp.argmax(A(x))) == np.argmax(x)


@pytest.mark.parametrize("ddof", [0, 1, 2])
def test_var_std_ddof(ddof):
    x = np.random.default_rng(3).normal(size=(5, 4)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(jnp.var(A(x), axis=0, ddof=ddof)),
                               np.var(x, axis=0, ddof=ddof), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(jnp.std(A(x), ddof=ddof)), np.std(x, ddof=ddof),
                               rtol=1e-5)
    np.testing.assert_allclose(np.asarray(jnp.var(A(x), correction=ddof)),
                               np.var(x, ddof=ddof), rtol=1e-5)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's mean of an empty slice
def test_where_and_initial():
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    w = x > 0
    np.testing.assert_allclose(np.asarray(jnp.sum(A(x), axis=1, where=A(w), initial=2.0)),
                               np.sum(x, axis=1, where=w, initial=2.0))
    np.testing.assert_allclose(np.asarray(jnp.mean(A(x), axis=0, where=A(w[0]))),
                               np.mean(x, axis=0, where=w[0]))
    np.testing.assert_allclose(np.asarray(jnp.max(A(x), axis=1, where=A(~w), initial=-99)),
                               np.max(x, axis=1, where=~w, initial=-99))
    assert bool(jnp.all(A(x), where=A(x != 0)))


def _np_quantile(x, q, axis, method, **kw):
    """NumPy's quantile, except that "nearest" breaks a tie towards the lower neighbour, as
    JAX does (NumPy takes the even one)."""
    if method != "nearest":
        return np.quantile(x, q, axis=axis, method=method, **kw)
    n = x.size if axis is None else np.prod([x.shape[a] for a in np.atleast_1d(axis)])
    q = np.asarray(q, np.float32)
    pos = q * np.float32(n - 1)
    lower = np.quantile(x, q, axis=axis, method="lower", **kw)
    higher = np.quantile(x, q, axis=axis, method="higher", **kw)
    take_lower = (pos - np.floor(pos) <= 0.5).reshape(q.shape + (1,) * (lower.ndim - q.ndim))
    return np.where(take_lower, lower, higher)


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_percentile_median_vs_numpy(method):
    x = np.random.default_rng(4).normal(size=(5, 6)).astype(np.float32)
    q = np.array([0.0, 0.1, 0.5, 0.9, 1.0], np.float32)
    for axis in (None, 0, 1, (0, 1)):
        np.testing.assert_allclose(
            np.asarray(jnp.quantile(A(x), A(q), axis=axis, method=method)),
            _np_quantile(x, q, axis, method), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        np.asarray(jnp.percentile(A(x), 30.0, axis=1, method=method, keepdims=True)),
        _np_quantile(x, 0.3, 1, method, keepdims=True), rtol=1e-5, atol=1e-6)
    if method == "nearest":  # (1.5 and 2.5 are ties)
        assert float(jnp.quantile(A(np.arange(4.0, dtype=np.float32)), 0.5, method=method)) == 1
        assert float(jnp.percentile(A(np.arange(6.0, dtype=np.float32)), 50.0,
                                    method=method)) == 2
    np.testing.assert_allclose(np.asarray(jnp.median(A(x), axis=0)), np.median(x, axis=0),
                               rtol=1e-6)


def test_quantile_traces_with_traced_q():
    x = np.random.default_rng(5).normal(size=(7,)).astype(np.float32)
    closed = ember.make_jaxpr(lambda a, q: jnp.quantile(a, q))(A(x), A(0.3, "float32"))
    assert "sort" in str(closed)


def test_average_count_nonzero_ptp():
    x = np.random.default_rng(6).normal(size=(3, 4)).astype(np.float32)
    w = np.arange(1, 5, dtype=np.float32)
    avg, ws = jnp.average(A(x), axis=1, weights=A(w), returned=True)
    ravg, rws = np.average(x, axis=1, weights=w, returned=True)
    np.testing.assert_allclose(np.asarray(avg), ravg, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(ws), rws)
    xi = np.array([[0, 1, 2], [0, 0, 3]], np.int32)
    np.testing.assert_array_equal(np.asarray(jnp.count_nonzero(A(xi), axis=1, keepdims=True)),
                                  np.count_nonzero(xi, axis=1, keepdims=True))
    assert jnp.count_nonzero(A(xi)).dtype == np.int32
    assert float(jnp.ptp(A(x))) == pytest.approx(float(np.ptp(x)))


def test_lax_cumulative_reverse_and_jaxpr():
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    np.testing.assert_array_equal(np.asarray(lax.cumsum(A(x), axis=1, reverse=True)),
                                  np.flip(np.cumsum(np.flip(x, 1), 1), 1))
    np.testing.assert_allclose(np.asarray(lax.cumlogsumexp(A(x), axis=0)),
                               np.logaddexp.accumulate(x, 0), rtol=1e-6)
    text = str(ember.make_jaxpr(lambda a: lax.cumsum(lax.reduce_sum(a, (0,)), 0))(A(x)))
    assert "reduce_sum[axes=(0,)]" in text and "cumsum[axis=0 reverse=False]" in text
    text = str(ember.make_jaxpr(lambda a: lax.argmax(a, 1, np.int32))(A(x)))
    assert "argmax[axes=(1,) index_dtype=int32]" in text


def test_lax_bitwise_reductions():
    x = np.array([[0b1100, 0b1010], [0b0110, 0b0011]], np.uint8)
    np.testing.assert_array_equal(np.asarray(lax.reduce_and(A(x), (1,))),
                                  np.bitwise_and.reduce(x, 1))
    np.testing.assert_array_equal(np.asarray(lax.reduce_or(A(x), (0,))),
                                  np.bitwise_or.reduce(x, 0))
    np.testing.assert_array_equal(np.asarray(lax.reduce_xor(A(x), (0, 1))),
                                  np.bitwise_xor.reduce(x.ravel()))


# ---------------------------------------------------------------- bad calls


X = np.zeros((2, 3), np.float32)


@pytest.mark.parametrize("call,exc,match", [
    (lambda: jnp.sum(A(X), axis=2), ValueError, "sum: axis 2 is out of bounds"),
    (lambda: jnp.mean(A(X), axis=-3), ValueError, "mean: axis -3 is out of bounds"),
    (lambda: jnp.sum(A(X), axis=(0, 0)), ValueError, "duplicate value in 'axis'"),
    (lambda: jnp.max(A(X), axis=1.5), TypeError, "axis must be an integer"),
    (lambda: jnp.argmax(A(X), axis=(0, 1)), TypeError, "argmax: axis must be an integer"),
    (lambda: jnp.max(A(np.zeros(0, np.float32))), ValueError,
     "zero-size array to reduction operation max which has no identity"),
    (lambda: jnp.min(A(np.zeros((2, 0), np.float32)), axis=1), ValueError,
     "reduction operation min"),
    (lambda: jnp.max(A(X), where=A(X > 0)), ValueError, "specify 'initial'"),
    (lambda: jnp.argmax(A(np.zeros(0, np.float32))), ValueError, "empty sequence"),
    (lambda: lax.reduce_sum(A(X), (2,)), ValueError, "reduce_sum: axis 2"),
    (lambda: lax.reduce_sum(A(X), (0, 0)), ValueError, "duplicate value in 'axes'"),
    (lambda: lax.reduce_sum(A(X), "a"), TypeError, "reduce_sum: axes must contain only"),
    (lambda: lax.reduce_sum_p.bind(A(X), axes=(-1,)), ValueError, "out-of-bounds"),
    (lambda: lax.reduce_and(A(X), (0,)), TypeError, "reduce_and does not accept dtype float32"),
    (lambda: lax.reduce_sum(A(np.zeros(2, bool)), (0,)), TypeError, "reduce_sum"),
    (lambda: lax.argmax(A(X), 0, np.float32), TypeError, "index_dtype must be an integer"),
    (lambda: lax.argmax(A(np.zeros((0, 2), np.float32)), 0, np.int32), ValueError,
     "non-empty reduced dimension"),
    (lambda: lax.cumsum(A(X), axis=2), ValueError, "cumsum: axis=2 is out of bounds"),
    (lambda: lax.cumlogsumexp(A(np.zeros(2, np.int32))), TypeError, "cumlogsumexp"),
    (lambda: jnp.quantile(A(X), np.full((2, 2), 0.5)), ValueError, "q must have rank <= 1"),
    (lambda: jnp.percentile(A(X.astype(np.complex64)), 50), ValueError, "complex input"),
    (lambda: jnp.quantile(A(X), 0.5, method="bogus"), ValueError, "method must be one of"),
    (lambda: jnp.sum([1, 2]), TypeError, "sum requires ndarray or scalar arguments"),
    (lambda: jnp.var(A(X), ddof=1, correction=1), ValueError, "ddof and correction"),
])
def test_bad_calls(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_bad_axes_raise_numpy_axis_error():
    # JAX raises ValueError or IndexError depending on the function; NumPy's AxisError is both.
    for call in (lambda: jnp.sum(jnp.ones((2, 3)), axis=2),
                 lambda: jnp.mean(jnp.ones((2, 3)), axis=-3),
                 lambda: jnp.argmax(jnp.ones((2, 3)), axis=2),
                 lambda: jnp.swapaxes(jnp.ones((2, 3)), 0, 2),
                 lambda: jnp.split(jnp.ones((2, 4)), 2, axis=2)):
        with pytest.raises(np.exceptions.AxisError, match="axis .* is out of bounds"):
            call()
    assert issubclass(np.exceptions.AxisError, ValueError)
    assert issubclass(np.exceptions.AxisError, IndexError)


def test_std_dtype_and_cumulative_axis_checks():
    with pytest.raises(ValueError, match="dtype argument to jnp.std must be inexact"):
        jnp.std(jnp.arange(4.0), dtype=jnp.int32)
    assert jnp.nanstd(jnp.arange(4), dtype=jnp.float16).dtype == np.float16
    with pytest.raises(TypeError, match="cumsum: axis must be an integer"):
        jnp.cumsum(jnp.ones((2, 3)), axis=(0, 1))


def test_nanvar_and_nanstd_gradients_ignore_nans():
    # Masked entries are dropped before squaring: finite gradients, zero at the NaNs.
    x = np.array([1.0, np.nan, 3.0, 4.0, np.nan, -2.0])
    keep = ~np.isnan(x)
    xv = x[keep]
    expected_var = np.zeros_like(x)
    expected_var[keep] = 2 * (xv - xv.mean()) / xv.size
    got = ember.grad(jnp.nanvar)(x.astype(np.float32))
    np.testing.assert_allclose(np.asarray(got), expected_var, rtol=1e-5, atol=1e-6)
    expected_std = expected_var / (2 * np.sqrt(np.var(xv)))
    got = ember.grad(jnp.nanstd)(x.astype(np.float32))
    np.testing.assert_allclose(np.asarray(got), expected_std, rtol=1e-5, atol=1e-6)
