"""Targeted tests for sorting and searching: stability, NaNs, searchsorted, unique, errors."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax


def A(x, dtype=None):
    return jnp.asarray(np.asarray(x, dtype=dtype))


def test_argsort_is_stable_for_ties():
    x = np.array([2, 1, 2, 1, 0, 2, 1], np.int32)
    np.testing.assert_array_equal(np.asarray(jnp.argsort(A(x))), np.argsort(x, kind="stable"))
    # Descending keeps ties in their original order too.
    np.testing.assert_array_equal(np.asarray(jnp.argsort(A(x), descending=True)),
                                  np.argsort(-x, kind="stable"))
    assert jnp.argsort(A(x)).dtype == np.int32


def test_nans_sort_last():
    x = np.array([np.nan, 1.0, -np.inf, np.nan, 0.5, np.inf], np.float32)
    np.testing.assert_array_equal(np.asarray(jnp.sort(A(x))), np.sort(x))
    np.testing.assert_array_equal(np.asarray(jnp.argsort(A(x))), np.argsort(x, kind="stable"))
    np.testing.assert_array_equal(np.asarray(lax.sort(A(x))), np.sort(x))
    vals, idx = lax.top_k(A(x), 2)
    assert np.isnan(np.asarray(vals)[0]) and list(np.asarray(idx)) == [0, 3]


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_top_k_axis_returns_list(axis):
    x = np.random.default_rng(1).normal(size=(3, 4)).astype(np.float32)
    out = lax.top_k(A(x), 2, axis=axis)
    assert isinstance(out, list) and len(out) == 2  # JAX returns a list
    order = np.take(np.argsort(-x, axis=axis, kind="stable"), [0, 1], axis=axis)
    np.testing.assert_array_equal(np.asarray(out[1]), order)
    np.testing.assert_array_equal(np.asarray(out[0]), np.take_along_axis(x, order, axis=axis))
    with pytest.raises(ValueError):
        lax.top_k(A(x), 2, axis=2)


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8"])
def test_searchsorted_vs_numpy(side, dtype):
    rng = np.random.default_rng(0)
    a = np.sort(rng.integers(0, 10, 20)).astype(dtype)
    v = rng.integers(-2, 12, (3, 5)).astype(dtype)
    out = jnp.searchsorted(A(a), A(v), side=side)
    np.testing.assert_array_equal(np.asarray(out), np.searchsorted(a, v, side=side))
    assert out.dtype == np.int32


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 8, 9, 63, 64, 65, 1000])
@pytest.mark.parametrize("method", ["scan", "compare_all"])
def test_searchsorted_methods_agree_with_numpy(n, method):
    rng = np.random.default_rng(n)
    a = np.sort(rng.integers(0, 8, n).astype(np.float32))
    if n > 4:
        a[-2:] = np.nan  # (NaNs sort last)
    v = np.concatenate([rng.integers(-1, 10, 50), [np.nan, np.inf, -np.inf]]).astype(np.float32)
    for side in ("left", "right"):
        f = ember.jit(lambda a, v, side=side: jnp.searchsorted(a, v, side=side, method=method))
        np.testing.assert_array_equal(np.asarray(f(a, v)), np.searchsorted(a, v, side=side))
    ints = np.sort(rng.integers(-5, 5, n)).astype(np.int32)
    w = np.arange(-6, 7, dtype=np.int32)
    np.testing.assert_array_equal(np.asarray(jnp.searchsorted(A(ints), A(w), method=method)),
                                  np.searchsorted(ints, w))


def test_searchsorted_nan_and_sorter_and_traces():
    a = np.array([1.0, 2.0, 2.0, np.nan], np.float32)
    v = np.array([np.nan, 2.0, 0.0, 5.0], np.float32)
    for side in ("left", "right"):
        np.testing.assert_array_equal(np.asarray(jnp.searchsorted(A(a), A(v), side=side)),
                                      np.searchsorted(a, v, side=side))
    text = str(ember.make_jaxpr(lambda a, v: jnp.searchsorted(a, v))(A(a), A(v)))
    assert "gather" in text and "reduce_sum" not in text  # (a binary search by default)
    text = str(ember.make_jaxpr(lambda a, v: jnp.searchsorted(a, v, method="compare_all"))(
        A(a), A(v)))
    assert "reduce_sum" in text
    with pytest.raises(ValueError, match="method"):
        jnp.searchsorted(A(a), A(v), method="bisect")
    b = np.array([3, 1, 2], np.int32)
    s = np.argsort(b).astype(np.int32)
    try:
        out = jnp.searchsorted(A(b), A(2, "int32"), sorter=A(s))
    except (AttributeError, ImportError):  # indexing.take not available yet
        pytest.skip("jnp.take not available")
    assert int(out) == np.searchsorted(b, 2, sorter=s)


def test_unique_vs_numpy():
    x = np.array([[3, 1, 3], [2, 1, 0]], np.int32)
    vals, idx, inv, cnt = jnp.unique(A(x), return_index=True, return_inverse=True,
                                     return_counts=True)
    rv, ri, rinv, rc = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    for o, r in ((vals, rv), (idx, ri), (inv, rinv), (cnt, rc)):
        np.testing.assert_array_equal(np.asarray(o), r)
    assert vals.dtype == np.int32 and idx.dtype == np.int32
    f = np.array([1.0, np.nan, 1.0, np.nan], np.float32)
    np.testing.assert_array_equal(np.asarray(jnp.unique(A(f))), np.unique(f))
    np.testing.assert_array_equal(np.asarray(jnp.unique(A(x), axis=0)), np.unique(x, axis=0))


def test_unique_under_tracing_raises():
    with pytest.raises(Exception, match="unique"):
        ember.make_jaxpr(jnp.unique)(A([1, 2], "int32"))


def test_unique_with_size_traces_and_pads_as_jax():
    x = np.array([[3, 1, np.nan], [3, np.nan, 2]], np.float32)
    nan = np.nan
    # (Expected values from JAX 0.10: padding with the smallest value, index of its first
    # occurrence, count 0; equal_nan merges the NaNs.)
    vals, idx, inv, cnt = jnp.unique(A(x), return_index=True, return_inverse=True,
                                     return_counts=True, size=6)
    np.testing.assert_array_equal(np.asarray(vals), [1, 2, 3, nan, 1, 1])
    np.testing.assert_array_equal(np.asarray(idx), [1, 5, 0, 2, 1, 1])
    np.testing.assert_array_equal(np.asarray(inv), [[2, 0, 3], [2, 3, 1]])
    np.testing.assert_array_equal(np.asarray(cnt), [1, 1, 2, 2, 0, 0])
    np.testing.assert_array_equal(
        np.asarray(jnp.unique(A(x), size=6, fill_value=-1, equal_nan=False)),
        [1, 2, 3, nan, nan, -1])
    got = ember.jit(lambda v: jnp.unique(v, size=2, return_counts=True, equal_nan=False))(x)
    np.testing.assert_array_equal(np.asarray(got[0]), [1, 2])
    np.testing.assert_array_equal(np.asarray(got[1]), [1, 1])
    rows = ember.vmap(lambda v: jnp.unique(v, size=3))(A(x))
    np.testing.assert_array_equal(np.asarray(rows), [[1, 3, nan], [2, 3, nan]])
    np.testing.assert_array_equal(np.asarray(jnp.unique(A(x), size=3, axis=0)),
                                  [x[0], x[1], x[0]])  # (sized unique rows: as in JAX)
    with pytest.raises(TypeError, match="unique: size must be non-negative"):  # (as in JAX)
        jnp.unique(A(x), size=-1)


def test_lexsort_and_multi_key_sort():
    k1 = np.array([1, 0, 1, 0, 1], np.int32)
    k2 = np.array([3.0, 3.0, 1.0, 2.0, 1.0], np.float32)
    np.testing.assert_array_equal(np.asarray(jnp.lexsort((A(k2), A(k1)))),
                                  np.lexsort((k2, k1)))
    s1, s2 = lax.sort((A(k1), A(k2)), num_keys=2)
    order = np.lexsort((k2, k1))
    np.testing.assert_array_equal(np.asarray(s1), k1[order])
    np.testing.assert_array_equal(np.asarray(s2), k2[order])
    text = str(ember.make_jaxpr(lambda a, b: lax.sort((a, b), num_keys=2))(A(k1), A(k2)))
    assert "sort[dimension=0 is_stable=True num_keys=2]" in text


def test_sort_axes_and_descending():
    x = np.random.default_rng(1).normal(size=(3, 4, 5)).astype(np.float32)
    for axis in (0, 1, -1, None):
        np.testing.assert_array_equal(np.asarray(jnp.sort(A(x), axis=axis)),
                                      np.sort(x, axis=axis))
    np.testing.assert_array_equal(np.asarray(jnp.sort(A(x), axis=1, descending=True)),
                                  np.flip(np.sort(x, axis=1), 1))


@pytest.mark.parametrize("call,exc,match", [
    (lambda: lax.sort(A(np.zeros((2, 3))), dimension=2), ValueError,
     "sort: dimension=2 is out of bounds"),
    (lambda: lax.sort(A(np.zeros(3)), dimension=1.0), TypeError, "sort: dimension must be"),
    (lambda: lax.sort((A(np.zeros(3)), A(np.zeros(4)))), TypeError, "same shape"),
    (lambda: lax.sort(A(np.zeros(3)), num_keys=2), ValueError, "num_keys=2"),
    (lambda: lax.sort(A(np.float32(1.0))), ValueError, "rank >= 1"),
    (lambda: lax.sort_p.bind(A(np.zeros(3)), dimension=-1, is_stable=True, num_keys=1),
     ValueError, "sort: dimension -1 is out of bounds"),
    (lambda: jnp.sort(A(np.zeros((2, 3))), axis=3), ValueError, "sort: axis 3 is out"),
    (lambda: jnp.argsort(A(np.zeros(3)), axis="0"), TypeError, "axis must be an integer"),
    (lambda: jnp.searchsorted(A(np.zeros(3)), A(1.0), side="middle"), ValueError,
     "side must be 'left' or 'right'"),
    (lambda: jnp.searchsorted(A(np.zeros((2, 2))), A(1.0)), ValueError, "a must be 1-D"),
    (lambda: jnp.searchsorted([1, 2], 1), TypeError, "searchsorted requires ndarray"),
    (lambda: lax.top_k(A(np.zeros(3)), 4), ValueError, "top_k: k=4 is larger"),
    (lambda: jnp.lexsort((A(np.zeros(3)), A(np.zeros(2)))), ValueError, "same shape"),
    (lambda: jnp.partition(A(np.zeros(3)), 5), ValueError, "kth=5 out of bounds"),
])
def test_bad_calls(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.int8])
def test_partition_layout_is_jaxs_and_a_partition(dtype):
    """JAX's layout (two top_k): the kth + 1 smallest ascending, then the rest descending;
    argpartition's tail lists the other indices in ascending index order. Every row is a
    partition around its sorted kth value (checked against NumPy's sort)."""
    x = np.array([5, 1, 4, 2, 3, 1, 0], dtype)
    np.testing.assert_array_equal(jnp.partition(A(x), 2), np.array([0, 1, 1, 5, 4, 3, 2], dtype))
    np.testing.assert_array_equal(jnp.argpartition(A(x), 2), [6, 1, 5, 0, 2, 3, 4])
    rng = np.random.default_rng(5)
    lo = 0 if np.dtype(dtype).kind == "u" else -4
    for axis, kth in [(1, 0), (1, 3), (0, -1), (-1, 8), (0, 2)]:
        x = rng.integers(lo, 5, (6, 9)).astype(dtype)
        if dtype == np.float32:
            x[rng.random(x.shape) < 0.1] = np.nan
        for fn in (lambda v: v, ember.jit):
            p = np.asarray(fn(lambda v, k=kth, a=axis: jnp.partition(v, k, axis=a))(x))
            i = np.asarray(fn(lambda v, k=kth, a=axis: jnp.argpartition(v, k, axis=a))(x))
            k = kth % x.shape[axis]
            pivot = np.take(np.sort(x, axis=axis), [k], axis=axis)
            # (the two layouts differ after kth: partition's is descending, argpartition's
            # in index order; both are partitions)
            for out in (p, np.take_along_axis(x, i, axis=axis)):
                np.testing.assert_array_equal(np.take(out, [k], axis=axis), pivot)
                np.testing.assert_array_equal(np.sort(out, axis=axis), np.sort(x, axis=axis))
                before, after = np.split(out, [k], axis=axis)
                with np.errstate(invalid="ignore"):
                    assert not np.any(before > pivot) and not np.any(after < pivot)
            np.testing.assert_array_equal(np.sort(i, axis=axis),
                                          np.broadcast_to(np.arange(x.shape[axis]).reshape(
                                              (-1, 1) if axis in (0, -2) else (1, -1)), x.shape))


def test_partition_of_the_most_negative_integer():
    # (ranked with ~x, which cannot overflow; -x would turn -2**31 into itself)
    x = np.array([-2**31, 5, 2**31 - 1, 0], np.int32)
    np.testing.assert_array_equal(jnp.partition(A(x), 1), [-2**31, 0, 2**31 - 1, 5])
    np.testing.assert_array_equal(jnp.argpartition(A(x), 1), [0, 3, 1, 2])


def test_partition_gradient_and_vmap():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 7)).astype(np.float32)
    weights = np.arange(3.0, dtype=np.float32)
    g = ember.grad(lambda v: jnp.sum(jnp.partition(v, 2, axis=1)[:, :3] ** 2 * weights))(x)
    order = np.argsort(x, axis=1)[:, :3]
    want = np.zeros_like(x)
    np.put_along_axis(want, order, 2 * np.take_along_axis(x, order, 1) * weights, 1)
    np.testing.assert_allclose(g, want, rtol=1e-6)
    np.testing.assert_array_equal(ember.vmap(lambda v: jnp.argpartition(v, 2))(x),
                                  jnp.argpartition(A(x), 2, axis=1))
