"""JAX compatibility of reductions, cumulative ops, sorting, searching and set operations.

Each test pins a behaviour where ember used to differ from JAX 0.10.2 (found by running the
same calls through both). Expected values are literals computed with JAX (or closed forms /
NumPy), so the file runs without jax installed.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax

nan, inf = np.nan, np.inf


def _grad(f, x):
    return np.asarray(ember.grad(f)(np.asarray(x, np.float32)))


# ---------------------------------------------------------------- cumulative gradients


@pytest.mark.parametrize("name,x,expected", [
    # Ties split the tangent along the associative-scan tree, as in JAX (not sequentially).
    ("cummax", [3., 3., 3., 3.], [3.75, 2.75, 2.5, 1.]),
    ("cummin", [3., 3., 3., 3.], [3.75, 2.75, 2.5, 1.]),
    # A NaN result has a zero tangent: nothing flows back through it.
    ("cummax", [1., nan, 3., 2.], [1., 0., 0., 0.]),
    ("cummin", [1., nan, 3., 2.], [1., 0., 0., 0.]),
    # A first element equal to the identity (+-inf) gets its whole tangent.
    ("cummin", [inf, 1., 2., 3.], [1., 9., 0., 0.]),
    ("cummax", [-inf, 1., 2., 3.], [1., 2., 3., 4.]),
    ("cumprod", [2., inf, 0., 3.], [inf, 2., inf, nan]),
])
@pytest.mark.parametrize("jit", [False, True])
def test_cumulative_gradients_follow_jax(name, x, expected, jit):
    w = np.arange(1.0, 5.0, dtype=np.float32) if name != "cumprod" else np.ones(4, np.float32)

    def f(t):
        return jnp.sum(getattr(lax, name)(t, axis=0) * w)

    g = ember.jit(ember.grad(f)) if jit else ember.grad(f)
    np.testing.assert_array_equal(np.asarray(g(np.asarray(x, np.float32))),
                                  np.asarray(expected, np.float32))


def test_reverse_cummax_jvp_at_ties():
    x = np.array([5., 5., 1., 5.], np.float32)
    _, t = ember.jvp(lambda v: lax.cummax(v, axis=0, reverse=True), (x,),
                     (np.array([1., 2., 3., 4.], np.float32),))
    # JAX: the last three prefixes (from the right) tie on 5s along its scan tree.
    np.testing.assert_array_equal(np.asarray(t), [2.75, 3., 4., 4.])


# ---------------------------------------------------------------- argmax / argmin


@pytest.mark.parametrize("fn", [jnp.argmax, jnp.argmin, jnp.nanargmax, jnp.nanargmin,
                                lambda x: lax.argmax(x, 0, np.int32)])
def test_argminmax_refuse_complex(fn):
    # JAX: "gt does not accept dtype complex64" (complex numbers have no order).
    with pytest.raises(TypeError, match="complex64"):
        fn(np.array([1 + 2j, 3 - 1j], np.complex64))
    with pytest.raises(TypeError, match="complex64"):
        ember.jit(fn)(np.array([1 + 2j, 3 - 1j], np.complex64))


# ---------------------------------------------------------------- quantiles

_QX = np.array([[3., 1., 4., 1., 5.], [9., 2., 6., 5., 3.]], np.float32)
_QW = np.array([[1., 2., 0.5, 1., 3.], [0., 1., 1., 2., 1.]], np.float32)


@pytest.mark.parametrize("jit", [False, True])
def test_quantile_inverted_cdf_and_weights(jit):
    q = np.array([0.1, 0.5, 0.9], np.float32)
    wrap = ember.jit if jit else (lambda f: f)
    got = wrap(lambda x: jnp.quantile(x, q, axis=1, method="inverted_cdf"))(_QX)
    np.testing.assert_array_equal(np.asarray(got), [[1., 2.], [3., 5.], [5., 9.]])
    got = wrap(lambda x, w: jnp.quantile(x, q, axis=1, method="inverted_cdf",
                                         weights=w))(_QX, _QW)
    np.testing.assert_array_equal(np.asarray(got), [[1., 2.], [3., 5.], [5., 6.]])
    assert got.dtype == np.float32


def test_quantile_weights_shapes_nan_and_negative():
    # Weights of the reduced axis only; keepdims.
    got = jnp.quantile(_QX, 0.3, axis=0, method="inverted_cdf", weights=_QW[:, 0],
                       keepdims=True)
    np.testing.assert_array_equal(np.asarray(got), [[3., 1., 4., 1., 5.]])
    # nan*: NaN data carries no weight.
    got = jnp.nanpercentile(np.array([nan, 2., 1., 7.], np.float32), 60,
                            method="inverted_cdf", weights=np.array([5., 1., 1., 2.]))
    assert float(got) == 7.0
    # A negative (or NaN) weight makes that reduction NaN.
    w = np.where(_QW > 2, -1.0, _QW).astype(np.float32)
    got = jnp.quantile(_QX, 0.5, axis=1, method="inverted_cdf", weights=w)
    np.testing.assert_array_equal(np.asarray(got), [nan, 5.])


@pytest.mark.parametrize("call,exc,match", [
    (lambda: jnp.quantile(_QX, 0.5, weights=_QW), NotImplementedError, "only 'inverted_cdf'"),
    (lambda: jnp.quantile(_QX, 0.5, method="inverted_cdf", weights=_QW[0]), ValueError,
     "axis must be specified"),
    (lambda: jnp.quantile(_QX, 0.5, axis=1, method="inverted_cdf", weights=_QW[:, :2]),
     ValueError, "reduced axes"),
    (lambda: jnp.quantile(_QX, 0.5, method="inverted_cdf", weights=_QW.astype(np.complex64)),
     ValueError, "complex"),
    (lambda: jnp.median(_QX.astype(np.complex64)), ValueError, "complex input"),
    (lambda: jnp.nanquantile(_QX.astype(np.complex64), 0.5), ValueError, "complex input"),
    (lambda: jnp.quantile(_QX, np.full((2, 2), 0.5)), ValueError, "rank <= 1"),
    (lambda: jnp.quantile(_QX, 0.5, overwrite_input=True), ValueError, "overwrite_input"),
    (lambda: jnp.median(_QX, out=_QX), ValueError, "out"),
    (lambda: jnp.quantile(_QX, 0.5, interpolation="lower"), TypeError, "interpolation"),
])
def test_quantile_bad_calls(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_quantile_q_outside_unit_interval_clamps():
    # JAX does not check q (it cannot under jit); positions clamp to the ends of the data.
    x = np.array([1., 2., 3., 4.], np.float32)
    np.testing.assert_array_equal(np.asarray(jnp.quantile(x, np.array([-0.5, 1.5]))), [1., 4.])
    np.testing.assert_array_equal(
        np.asarray(jnp.percentile(x, np.array([-50, 150]), method="nearest")), [1., 4.])
    np.testing.assert_array_equal(
        np.asarray(ember.jit(lambda v: jnp.quantile(v, 2.0, method="lower"))(x)), 4.)


def test_quantile_values_at_infinities_and_signed_zero():
    # Half way between -inf and 1 is -inf (JAX and NumPy); the ends themselves are exact.
    x = np.array([-inf, 1., 2.], np.float32)
    assert float(jnp.quantile(x, 0.25)) == -inf
    np.testing.assert_array_equal(np.asarray(jnp.quantile(x, np.array([0., 1.]))), [-inf, 2.])
    # -0.0 keeps its sign (JAX gathers the element).
    assert np.signbit(np.asarray(jnp.median(np.array([-0., -0., 1.], np.float32))))
    assert np.signbit(np.asarray(jnp.quantile(np.array([-0., 5.], np.float32), 0.,
                                              method="lower")))


def test_quantile_gradients_share_ties_like_jax():
    z = np.array([0., 0., 1., 0., 2.], np.float32)
    np.testing.assert_array_equal(_grad(lambda t: jnp.quantile(t, 0.125), z),
                                  [0.5, 0.5, 0., 0., 0.])
    np.testing.assert_allclose(
        _grad(lambda t: jnp.nanquantile(t, 0.6), [3., nan, 3., 1.]), [0.8, 0., 0.2, 0.],
        rtol=1e-6)
    np.testing.assert_array_equal(
        _grad(lambda t: jnp.quantile(t, 0.6, method="inverted_cdf"), z), [0., 0., 0., 1., 0.])


# ---------------------------------------------------------------- var / std


_VX = np.array([[0., 1., 2., 3.], [4., 5., 6., 7.], [8., 9., 10., 11.]], np.float32)


@pytest.mark.parametrize("fn", [jnp.var, jnp.std, jnp.nanvar, jnp.nanstd])
def test_var_with_precomputed_mean(fn):
    sq = (lambda v: v) if fn in (jnp.var, jnp.nanvar) else np.sqrt
    # A keepdims mean is used as given (here not the true mean: each row's first value).
    got = fn(_VX, axis=1, mean=_VX[:, :1])
    np.testing.assert_allclose(np.asarray(got), sq(np.array([3.5, 3.5, 3.5], np.float32)))
    got = ember.jit(lambda x: fn(x, axis=1, ddof=1, mean=2.0))(_VX)
    np.testing.assert_allclose(np.asarray(got), sq(((_VX - 2) ** 2).sum(1) / 3), rtol=1e-6)
    with pytest.raises(TypeError, match="keepdims=True"):
        fn(_VX, axis=1, mean=_VX.mean(1))  # JAX: sub needs the same rank


def test_var_gradient_wrt_mean():
    g = ember.grad(lambda m: jnp.var(_VX[1:], mean=m))(2.0)
    assert float(g) == -11.0  # -2 * mean(x - 2), as JAX gives


def test_nan_reductions_signatures_match_jax():
    x = np.array([[1., nan, 3.], [4., 5., nan]], np.float32)
    where = np.array([[True, True, False], [True, True, True]])
    # where (and nanvar's mean) may be positional, as in JAX.
    np.testing.assert_allclose(np.asarray(jnp.nanmean(x, 1, None, None, False, where)),
                               [1., 4.5])
    np.testing.assert_allclose(np.asarray(jnp.nanvar(x, 1, None, None, 0, False, where)),
                               [0., 0.25])
    np.testing.assert_allclose(np.asarray(jnp.nanstd(x, 1, None, None, 0, False, None, 0.)),
                               np.sqrt([5., 20.5]))
    with pytest.raises(TypeError, match="correction"):  # JAX's nanvar has no 'correction'
        jnp.nanvar(x, correction=1)


# ---------------------------------------------------------------- diff, sorting, set ops


def test_ediff1d_refuses_booleans():
    with pytest.raises(TypeError, match="ediff1d"):  # JAX and NumPy: no bool subtraction
        jnp.ediff1d(np.array([True, False, True]))


@pytest.mark.parametrize("fn", [jnp.partition, jnp.argpartition])
def test_partition_refuses_complex_and_bool(fn):
    with pytest.raises(NotImplementedError, match="complex"):
        fn(np.array([1 + 1j, 0j, 2j], np.complex64), 1)
    with pytest.raises(TypeError, match="boolean"):
        fn(np.array([True, False, True]), 1)


def test_lexsort_of_scalar_keys_is_zero():
    for keys in [(np.float32(1), np.float32(2)), np.array([3, 1, 2])]:
        out = jnp.lexsort(keys)
        assert out.shape == () and out.dtype == np.int32 and int(out) == 0


_A1 = np.array([5, 1, 3, 1, 7, 3], np.int32)
_A2 = np.array([[3, 4], [1, 9]], np.int32)


@pytest.mark.parametrize("jit", [False, True])
def test_intersect1d_sized_indices_under_x64(x64, jit):
    f = lambda a, b: jnp.intersect1d(a, b, return_indices=True, size=4)  # noqa: E731
    vals, i1, i2 = (ember.jit(f) if jit else f)(_A1, _A2)
    np.testing.assert_array_equal(np.asarray(vals), [1, 3, 1, 1])
    np.testing.assert_array_equal(np.asarray(i1), [1, 2, 6, 6])
    np.testing.assert_array_equal(np.asarray(i2), [2, 0, 4, 4])
    assert (vals.dtype, i1.dtype, i2.dtype) == (np.int32, np.int64, np.int64)


@pytest.mark.parametrize("a1,a2", [(np.zeros(0, np.int32), _A2), (_A1, np.zeros(0, np.int32)),
                                   (np.zeros(0, np.int32), np.zeros(0, np.int32))])
def test_intersect1d_sized_indices_with_an_empty_input(a1, a2):
    vals, i1, i2 = jnp.intersect1d(a1, a2, return_indices=True, size=3, fill_value=-1)
    np.testing.assert_array_equal(np.asarray(vals), [-1, -1, -1])
    np.testing.assert_array_equal(np.asarray(i1), [a1.size] * 3)  # padding: len(ar1)
    np.testing.assert_array_equal(np.asarray(i2), [a2.size] * 3)


# ---------------------------------------------------------------- where= / initial= / weights


_RX = np.array([[1., -2., 3., 0.5], [4., 0., -1., 2.]], np.float32)


@pytest.mark.parametrize("fn", [jnp.sum, jnp.prod, jnp.max, jnp.min, jnp.nansum, jnp.nanmax])
def test_initial_must_be_a_scalar(fn):
    with pytest.raises(ValueError, match="initial value must be a scalar"):
        fn(_RX, axis=1, initial=np.array([0., 1.], np.float32))
    assert float(fn(_RX, initial=np.float32(10.))) == float(
        {jnp.sum: 17.5, jnp.prod: 0., jnp.max: 10., jnp.min: -2., jnp.nansum: 17.5,
         jnp.nanmax: 10.}[fn])


@pytest.mark.parametrize("fn", [jnp.sum, jnp.mean, jnp.var, jnp.all, jnp.nanmean])
def test_where_must_be_boolean(fn):
    with pytest.raises(ValueError, match="where must be None or a boolean"):
        fn(_RX, where=np.ones(_RX.shape, np.int32))


def test_average_weights_for_several_axes_in_their_order():
    w = np.array([[1., 2.], [3., 4.], [0., 1.], [2., 2.]], np.float32)  # axes (1, 0)
    expected = (_RX * w.T).sum() / w.sum()
    np.testing.assert_allclose(float(jnp.average(_RX, axis=(1, 0), weights=w)), expected,
                               rtol=1e-6)
    got = jnp.quantile(_RX, 0.5, axis=(1, 0), weights=w, method="inverted_cdf")
    assert float(got) == 0.0  # JAX's value
    with pytest.raises(ValueError, match="reduced axes"):
        jnp.average(_RX, axis=(0, 1), weights=w)
