"""isin, digitize, bincount and unique_*: keyword arguments, tracing, NaNs and bad input.

The op records (tests/op_records/counting.py) cover dtypes and shapes; this file covers what
they cannot: the eager data-sized forms, jit with and without ``length=``/``size=``, and errors.
"""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import errors

# ---------------------------------------------------------------- isin


@pytest.mark.parametrize("method", ["auto", "compare_all", "binary_search", "sort"])
@pytest.mark.parametrize("invert", [False, True])
def test_isin_methods_and_invert(method, invert):
    rng = np.random.default_rng(1)
    a = rng.integers(-4, 5, size=(3, 5)).astype(np.int32)
    b = rng.integers(-4, 5, size=(7,)).astype(np.int32)
    got = jnp.isin(a, b, invert=invert, method=method)
    np.testing.assert_array_equal(got, np.isin(a, b, invert=invert))
    assert got.dtype == np.bool_ and got.shape == a.shape and not got.weak_type
    jitted = ember.jit(lambda a, b: jnp.isin(a, b, invert=invert, method=method))(a, b)
    np.testing.assert_array_equal(jitted, got)


@pytest.mark.parametrize("method", ["auto", "binary_search", "sort"])
def test_isin_nan_is_never_found_and_signed_zeros_match(method):
    a = np.array([np.nan, 1.0, 0.0, -0.0, 2.0], np.float32)
    b = np.array([np.nan, 1.0, -0.0], np.float32)
    np.testing.assert_array_equal(jnp.isin(a, b, method=method), np.isin(a, b))
    np.testing.assert_array_equal(jnp.isin(a, b, assume_unique=True, method=method),
                                  np.isin(a, b))


def test_isin_promotes_and_handles_scalars_and_empty():
    assert bool(jnp.isin(2, jnp.array([1, 2])))
    np.testing.assert_array_equal(jnp.isin(jnp.arange(4.0) + 0.5, jnp.array([1, 2])),
                                  [False] * 4)
    np.testing.assert_array_equal(jnp.isin(jnp.arange(3, dtype=jnp.int8), 300), [False] * 3)
    np.testing.assert_array_equal(jnp.isin(jnp.arange(3), jnp.array([], jnp.int32),
                                           invert=True), [True] * 3)
    assert jnp.isin(jnp.zeros((0, 2)), jnp.ones(3)).shape == (0, 2)
    np.testing.assert_array_equal(jnp.isin(jnp.array([1j, 1.0]), jnp.array([1j])),
                                  [True, False])


def test_isin_vmap():
    a = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    b = np.array([[3, 1], [6, 0]], np.int32)
    got = ember.vmap(jnp.isin)(a, b)
    np.testing.assert_array_equal(got, [np.isin(a[i], b[i]) for i in range(2)])


def test_isin_errors():
    with pytest.raises(TypeError, match="isin"):
        jnp.isin([1, 2], jnp.array([1]))
    with pytest.raises(ValueError, match="method"):
        jnp.isin(jnp.arange(3), jnp.arange(2), method="table")
    with pytest.raises(errors.ConcretizationTypeError):
        ember.jit(lambda a, b, inv: jnp.isin(a, b, invert=inv))(jnp.arange(3), jnp.arange(2),
                                                                 True)


# ---------------------------------------------------------------- digitize

X = np.array([-1.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, np.inf, np.nan], np.float32)


@pytest.mark.parametrize("bins", [[0.0, 1.0, 2.0], [2.0, 1.0, 0.0], [1.0, 1.0, 2.0],
                                  [2.0, 1.0, 1.0], [1.0], [1.0, 1.0]])
@pytest.mark.parametrize("right", [False, True])
def test_digitize_increasing_decreasing_and_nan(bins, right):
    bins = np.array(bins, np.float32)
    expected = np.digitize(X, bins, right=right)
    got = jnp.digitize(X, bins, right=right)
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == np.int32 and not got.weak_type
    for method in ("scan", "compare_all", "sort"):
        np.testing.assert_array_equal(jnp.digitize(X, bins, right, method=method), expected)
    jitted = ember.jit(lambda x, b: jnp.digitize(x, b, right=right))(X, bins)
    np.testing.assert_array_equal(jitted, expected)


def test_digitize_scalar_empty_bins_and_vmap():
    assert jnp.digitize(2, jnp.array([1, 2, 3])).shape == ()
    assert int(jnp.digitize(2, jnp.array([1, 2, 3]))) == 2
    np.testing.assert_array_equal(jnp.digitize(jnp.ones((2, 3)), jnp.zeros(0)),
                                  np.zeros((2, 3), np.int32))
    x = np.array([[0.5, 1.5], [2.5, 0.5]], np.float32)
    b = np.array([[1.0, 2.0], [3.0, 2.0]], np.float32)
    got = ember.vmap(jnp.digitize)(x, b)
    np.testing.assert_array_equal(got, [np.digitize(x[i], b[i]) for i in range(2)])


def test_digitize_errors():
    with pytest.raises(ValueError, match="digitize: bins must be a 1-dimensional"):
        jnp.digitize(jnp.ones(3), jnp.ones((2, 2)))
    with pytest.raises(ValueError, match="digitize"):
        jnp.digitize(jnp.ones(3), 1.0)
    with pytest.raises(ValueError, match="method"):
        jnp.digitize(jnp.ones(3), jnp.ones(2), method="bad")
    with pytest.raises(TypeError, match="digitize"):
        jnp.digitize([1.0], jnp.ones(2))
    with pytest.raises(errors.ConcretizationTypeError):
        ember.jit(lambda x, b, r: jnp.digitize(x, b, r))(jnp.ones(3), jnp.ones(2), True)


# ---------------------------------------------------------------- bincount

XI = np.array([0, 1, 1, 3, 7, 3, 3], np.int32)


def test_bincount_eager_length_from_data_and_minlength():
    np.testing.assert_array_equal(jnp.bincount(XI), np.bincount(XI))
    np.testing.assert_array_equal(jnp.bincount(XI, minlength=12), np.bincount(XI, minlength=12))
    np.testing.assert_array_equal(jnp.bincount(XI, minlength=3), np.bincount(XI, minlength=3))
    out = jnp.bincount(XI)
    assert out.dtype == np.int32 and not out.weak_type
    assert jnp.bincount(jnp.zeros(0, jnp.int32)).shape == (0,)
    assert jnp.bincount(jnp.zeros(0, jnp.int32), minlength=4).shape == (4,)
    np.testing.assert_array_equal(jnp.bincount(jnp.array([True, False, True])), [1, 2])
    np.testing.assert_array_equal(jnp.bincount(XI.astype(np.uint8)), np.bincount(XI))


def test_bincount_length_drops_and_negative_values_go_to_bin0():
    # length fixes the number of bins exactly (minlength is then ignored); values >= length
    # are dropped and negative values are counted in bin 0 (JAX's behaviour).
    np.testing.assert_array_equal(jnp.bincount(XI, length=4), np.bincount(XI)[:4])
    np.testing.assert_array_equal(jnp.bincount(XI, minlength=10, length=4),
                                  np.bincount(XI)[:4])
    np.testing.assert_array_equal(jnp.bincount(jnp.array([-1, -3, 2])), [2, 0, 1])
    np.testing.assert_array_equal(jnp.bincount(XI, minlength=-1), np.bincount(XI))
    assert jnp.bincount(XI, length=0).shape == (0,)
    assert jnp.bincount(XI, length=jnp.array(3)).shape == (3,)


@pytest.mark.parametrize("wdtype", ["float32", "float16", "int8", "complex64"])
def test_bincount_weights(wdtype):
    w = (np.arange(7) + 1).astype(wdtype)
    got = jnp.bincount(XI, weights=w)
    assert got.dtype == np.dtype(wdtype)
    np.testing.assert_allclose(np.asarray(got).astype(np.complex128),
                               np.bincount(XI, weights=w.astype(np.complex128).real))
    got = jnp.bincount(XI, w, minlength=10)
    assert got.shape == (10,)


def test_bincount_jit_with_and_without_length():
    f = ember.jit(lambda x, w: jnp.bincount(x, w, length=5))
    np.testing.assert_allclose(f(XI, np.ones(7, np.float32)), np.bincount(XI, minlength=8)[:5])
    g = ember.jit(lambda x: jnp.bincount(x, length=9))
    np.testing.assert_array_equal(g(XI), np.bincount(XI, minlength=9))
    with pytest.raises(errors.ConcretizationTypeError, match="length"):
        ember.jit(jnp.bincount)(XI)
    with pytest.raises(errors.ConcretizationTypeError):
        ember.jit(lambda x: jnp.bincount(x, minlength=5))(XI)
    with pytest.raises(errors.ConcretizationTypeError):
        ember.jit(lambda x, n: jnp.bincount(x, length=n))(XI, 3)
    got = ember.vmap(lambda x: jnp.bincount(x, length=4))(np.array([[1, 2], [3, 3]], np.int32))
    np.testing.assert_array_equal(got, [[0, 1, 1, 0], [0, 0, 0, 2]])


def test_bincount_errors():
    with pytest.raises(TypeError, match="integer"):
        jnp.bincount(jnp.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="1-dimensional"):
        jnp.bincount(jnp.ones((2, 2), jnp.int32))
    with pytest.raises(ValueError, match="1-dimensional"):
        jnp.bincount(3)
    with pytest.raises(TypeError, match="bincount"):
        jnp.bincount([1, 2])
    with pytest.raises(ValueError, match="weights"):
        jnp.bincount(XI, weights=jnp.ones(5))
    with pytest.raises(TypeError, match="weights"):
        jnp.bincount(XI, weights=jnp.ones(7, bool))
    with pytest.raises(TypeError, match="length"):
        jnp.bincount(XI, length=2.0)
    with pytest.raises(TypeError, match="length"):
        jnp.bincount(XI, length=-1)
    with pytest.raises(TypeError, match="minlength"):
        jnp.bincount(XI, minlength=None)


# ---------------------------------------------------------------- unique_*

UX = np.array([[3.0, 1.0, np.nan], [3.0, -0.0, 0.0], [np.nan, 1.0, 2.0]], np.float32)


@pytest.mark.parametrize("x", [UX, np.array([[3, 1], [3, 2]], np.int32),
                               np.array([True, False, True]), np.zeros((0, 3), np.float32),
                               np.array(5, np.int8)])
def test_unique_functions_match_numpy(x):
    ref = np.unique_all(x)
    got = jnp.unique_all(x)
    assert type(got).__name__ == "_UniqueAllResult"
    assert got._fields == ("values", "indices", "inverse_indices", "counts")
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, np.asarray(r))
    assert got.inverse_indices.shape == x.shape
    assert got.values.dtype == x.dtype
    assert all(a.dtype == np.int32 for a in got[1:])
    np.testing.assert_array_equal(jnp.unique_values(x), np.unique_values(x))
    c = jnp.unique_counts(x)
    assert c._fields == ("values", "counts")
    np.testing.assert_array_equal(c.counts, np.unique_counts(x).counts)
    i = jnp.unique_inverse(x)
    assert i._fields == ("values", "inverse_indices")
    np.testing.assert_array_equal(i.inverse_indices, np.unique_inverse(x).inverse_indices)
    # values[inverse] rebuilds x (NaNs included: each NaN is its own entry)
    np.testing.assert_array_equal(np.asarray(i.values)[np.asarray(i.inverse_indices)], x)


def test_unique_weak_type_follows_input():
    assert jnp.unique_values(3).weak_type
    assert jnp.unique_all(2.0).values.weak_type and not jnp.unique_all(2.0).counts.weak_type
    assert not jnp.unique_values(jnp.array([1, 2])).weak_type


def test_unique_size_and_fill_value():
    x = np.array([5, 3, 3, 9, 4], np.int32)
    r = jnp.unique_all(x, size=7)
    np.testing.assert_array_equal(r.values, [3, 4, 5, 9, 3, 3, 3])
    np.testing.assert_array_equal(r.indices, [1, 4, 0, 3, 1, 1, 1])
    np.testing.assert_array_equal(r.inverse_indices, [2, 0, 0, 3, 1])
    np.testing.assert_array_equal(r.counts, [2, 1, 1, 1, 0, 0, 0])
    r = jnp.unique_all(x, size=7, fill_value=100)
    np.testing.assert_array_equal(r.values, [3, 4, 5, 9, 100, 100, 100])
    r = jnp.unique_counts(x, size=2)
    np.testing.assert_array_equal(r.values, [3, 4])
    np.testing.assert_array_equal(r.counts, [2, 1])
    assert jnp.unique_values(x, fill_value=1).shape == (4,)  # fill_value needs size
    r = jnp.unique_all(jnp.zeros(0, jnp.int32), size=3, fill_value=7)
    np.testing.assert_array_equal(r.values, [7, 7, 7])
    assert r.indices.shape == (3,) and r.counts.shape == (3,)


def test_unique_jit_needs_size():
    x = np.array([[3.0, np.nan], [1.0, 3.0]], np.float32)
    with pytest.raises(errors.ConcretizationTypeError):
        ember.jit(jnp.unique_values)(x)
    got = ember.jit(lambda x: jnp.unique_all(x, size=4))(x)
    eager = jnp.unique_all(x, size=4)
    assert type(got).__name__ == "_UniqueAllResult"
    for g, e in zip(got, eager):
        np.testing.assert_array_equal(g, e)
    np.testing.assert_array_equal(got.values, [1.0, 3.0, np.nan, 1.0])
    batched = ember.vmap(lambda x: jnp.unique_counts(x, size=3))(
        np.array([[1, 1, 2], [3, 4, 5]], np.int32))
    np.testing.assert_array_equal(batched.values, [[1, 2, 1], [3, 4, 5]])
    np.testing.assert_array_equal(batched.counts, [[2, 1, 0], [1, 1, 1]])


def test_unique_errors():
    with pytest.raises(TypeError, match="unique_values"):
        jnp.unique_values([1, 2])
    with pytest.raises(ValueError, match="fill_value must be specified"):
        jnp.unique_all(jnp.zeros(0, jnp.int32), size=3)
    with pytest.raises(TypeError, match="size"):
        jnp.unique_all(jnp.arange(3), size=-1)
    with pytest.raises(TypeError, match="size"):
        jnp.unique_all(jnp.arange(3), size=2.0)
    with pytest.raises(ValueError, match="fill_value"):
        jnp.unique_all(jnp.arange(3), size=5, fill_value=jnp.array([1, 2]))
