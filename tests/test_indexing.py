"""Targeted tests of indexing: x[idx] vs NumPy, .at[] updates, lax slicing params and errors."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.core import ConcretizationTypeError
from ember.numpy.indexing import NonConcreteBooleanIndexError

X = np.arange(60, dtype=np.float32).reshape(3, 4, 5)

INDEX_CASES = [
    np.s_[0], np.s_[-1], np.s_[2, -1, 3], np.s_[1:3], np.s_[::-1], np.s_[1::2, ::-2],
    np.s_[-100:100:3], np.s_[5:1], np.s_[:0], np.s_[3:0:-1, :, ::-3], np.s_[..., 1],
    np.s_[0, ...], np.s_[None], np.s_[None, 1, None], np.s_[:, None, :, None],
    np.s_[..., None], np.s_[()], np.s_[np.array([0, 2])], np.s_[np.array([-1, 0])],
    np.s_[[0, 2], :, [1, 3]],
    np.s_[:, [0, 2], [1, 3]], np.s_[[[0], [2]], [1, 3]], np.s_[1, :, [0, 1]],
    np.s_[[0, 1], 2], np.s_[:, 1, [0, 4]], np.s_[..., [4, -1]], np.s_[:, None, [0, 1]],
    np.s_[[0, 1], None, [1, 2]], np.s_[True], np.s_[False], np.s_[np.array([], np.int32)],
    np.s_[np.array([], np.int32), 1], np.s_[:, 1:3, [0, 1], None],
    np.s_[0, [1, 2], None, [0, 1]], np.s_[np.array([[0, 1], [2, 0]])],
    np.s_[X[:, :, 0] > 20], np.s_[0, X[0] > 7], np.s_[:, X[0, :, 0] > 7],
    np.s_[X > 1000], np.s_[np.array(1)], np.s_[np.int64(2), np.int8(-1)],
    np.s_[1:, [2, 0], ::2], np.s_[[1, 0], [0, 1], [2, 3]],
]


@pytest.mark.parametrize("idx", INDEX_CASES, ids=[str(i) for i in range(len(INDEX_CASES))])
def test_getitem_matches_numpy(idx):
    out = jnp.asarray(X)[idx]
    expected = X[idx]
    assert out.shape == expected.shape
    np.testing.assert_array_equal(np.asarray(out), expected)


@pytest.mark.parametrize("idx", INDEX_CASES, ids=[str(i) for i in range(len(INDEX_CASES))])
def test_at_set_matches_numpy(idx):
    expected = X.copy()
    expected[idx] = -7.0
    np.testing.assert_array_equal(np.asarray(jnp.asarray(X).at[idx].set(-7.0)), expected)


@pytest.mark.parametrize("idx", INDEX_CASES[:20], ids=[str(i) for i in range(20)])
def test_traced_getitem_matches_eager(idx):
    x = jnp.asarray(X)
    closed = ember.make_jaxpr(lambda a: a[idx])(x)
    from ember.jaxpr import eval_jaxpr
    (out,) = eval_jaxpr(closed.jaxpr, closed.consts, x)
    np.testing.assert_array_equal(np.asarray(out), X[idx])


def test_int_list_and_lists_of_lists():
    x = jnp.asarray(X)
    # lists inside a tuple index are arrays; a top-level list is rejected, as in JAX
    np.testing.assert_array_equal(np.asarray(x[[0, 1], [1, 2]]), X[[0, 1], [1, 2]])
    for idx in ([[0, 1], [1, 2]], [0, 1], [], [slice(None), 0]):
        with pytest.raises(TypeError, match="non-tuple sequence for multidimensional"):
            x[idx]
        with pytest.raises(TypeError, match="non-tuple sequence for multidimensional"):
            x.at[idx].set(0.0)


def test_out_of_bounds_gather_clamps():
    a = jnp.asarray(np.arange(3, dtype=np.int32))
    assert int(a[5]) == 2 and int(a[-7]) == 0
    idx = np.array([-10, -4, -3, -1, 0, 2, 3, 100])
    ref = np.array([a_[min(max(i + 3 if i < 0 else i, 0), 2)] for a_ in [np.arange(3)]
                    for i in idx])
    np.testing.assert_array_equal(np.asarray(a[idx]), ref)
    # traced indices clamp the same way
    f = lambda x, i: x[i]  # noqa: E731
    for i in idx:
        closed = ember.make_jaxpr(f)(a, jnp.asarray(np.int32(i)))
        from ember.jaxpr import eval_jaxpr
        (out,) = eval_jaxpr(closed.jaxpr, closed.consts, a, jnp.asarray(np.int32(i)))
        assert int(out) == ref[list(idx).index(i)]


def test_out_of_bounds_scatter_drops():
    x = np.zeros((4, 2), np.float32)
    idx = np.array([0, 4, -1, -5, 9, 1])
    out = jnp.asarray(x).at[idx].add(1.0)
    ref = x.copy()
    for i in idx:  # slow reference loop: wrap negatives once, drop the rest
        j = i + 4 if i < 0 else i
        if 0 <= j < 4:
            ref[j] += 1
    np.testing.assert_array_equal(np.asarray(out), ref)
    clipped = jnp.asarray(x).at[idx].add(1.0, mode="clip")
    ref2 = x.copy()
    for i in idx:
        j = i + 4 if i < 0 else i
        ref2[min(max(j, 0), 3)] += 1
    np.testing.assert_array_equal(np.asarray(clipped), ref2)


def test_at_add_accumulates_like_add_at():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 3)).astype(np.float32)
    idx = rng.integers(-5, 5, size=20)
    v = rng.normal(size=(20, 3)).astype(np.float32)
    ref = x.copy()
    np.add.at(ref, idx, v)
    np.testing.assert_allclose(np.asarray(jnp.asarray(x).at[idx].add(jnp.asarray(v))), ref,
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("method,ufunc", [("multiply", np.multiply), ("min", np.minimum),
                                          ("max", np.maximum)])
def test_at_ufunc_methods(method, ufunc):
    x = np.arange(12, dtype=np.int32).reshape(4, 3) - 5
    idx = np.array([1, 3, 1])
    v = np.array([[2, -3, 4], [1, 1, -1], [3, 0, 2]], np.int32)
    ref = x.copy()
    ufunc.at(ref, idx, v)
    out = getattr(jnp.asarray(x).at[idx], method)(jnp.asarray(v))
    np.testing.assert_array_equal(np.asarray(out), ref)
    assert out.dtype == np.int32


def test_at_misc_methods():
    x = jnp.asarray(np.full(4, 8.0, np.float32))
    np.testing.assert_array_equal(np.asarray(x.at[1:3].divide(2.0)), [8, 4, 4, 8])
    np.testing.assert_array_equal(np.asarray(x.at[0].subtract(3.0)), [5, 8, 8, 8])
    np.testing.assert_array_equal(np.asarray(x.at[::2].mul(0.5)), [4, 8, 4, 8])
    np.testing.assert_array_equal(np.asarray(x.at[-1].get()), 8)
    out = jnp.asarray(np.arange(3, dtype=np.int32)).at[np.array([0, 5])].get(
        mode="fill", fill_value=-1)
    np.testing.assert_array_equal(np.asarray(out), [0, -1])
    out = jnp.asarray(np.arange(3, dtype=np.int32)).at[5].get(mode="clip")
    assert int(out) == 2


def test_at_set_casts_and_broadcasts():
    x = jnp.asarray(np.zeros((2, 3), np.int32))
    out = x.at[:, 1].set(2.7)  # cast to x's dtype
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), [[0, 2, 0], [0, 2, 0]])
    out = x.at[0].set(np.array([1, 2, 3], np.int32))
    np.testing.assert_array_equal(np.asarray(out), [[1, 2, 3], [0, 0, 0]])
    with pytest.raises(ValueError, match="at"):  # as in JAX: no extra leading dims, even 1s
        x.at[0].set(np.array([[1, 2, 3]], np.int32))


def test_static_index_lowers_to_slices():
    text = str(ember.make_jaxpr(lambda a: a[1:, ::-1, 0])(jnp.asarray(X)))
    assert "slice[" in text and "rev[" in text and "squeeze[" in text
    assert "gather" not in text and "dynamic_slice" not in text


def test_traced_scalar_index_lowers_to_dynamic_slice():
    text = str(ember.make_jaxpr(lambda a, i: a[i])(jnp.asarray(X), 1))
    assert "dynamic_slice[slice_sizes=(1, 4, 5)]" in text and "gather" not in text
    assert "select_n" in text  # negative indices wrap


def test_traced_array_index_lowers_to_gather():
    idx = jnp.asarray(np.array([0, 2], np.int32))
    closed = ember.make_jaxpr(lambda a, i: a[:, i])(jnp.asarray(X), idx)
    text = str(closed)
    assert "gather[" in text and "GatherScatterMode.PROMISE_IN_BOUNDS" in text
    assert "offset_dims=(0, 2)" in text
    text = str(ember.make_jaxpr(lambda a, i: a.at[i].add(1.0))(jnp.asarray(X), idx))
    assert "scatter-add[" in text and "GatherScatterMode.FILL_OR_DROP" in text


def test_lax_gather_modes_and_fill():
    x = jnp.asarray(np.arange(4, dtype=np.float32))
    dn = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,),
                                    start_index_map=(0,))
    idx = np.array([[1], [4], [-1]], np.int32)
    np.testing.assert_array_equal(np.asarray(lax.gather(x, idx, dn, (1,), mode="clip")),
                                  [1, 3, 0])
    out = np.asarray(lax.gather(x, idx, dn, (1,), mode="fill"))
    assert out[0] == 1 and np.isnan(out[1]) and np.isnan(out[2])
    # JAX: mode=None is promise_in_bounds (clamped here, as by XLA on CPU), not fill
    np.testing.assert_array_equal(np.asarray(lax.gather(x, idx, dn, (1,))), [1, 3, 0])
    xi = jnp.asarray(np.arange(4, dtype=np.int8))
    assert np.asarray(lax.gather(xi, idx, dn, (1,), mode="fill"))[1] == -128
    xu = jnp.asarray(np.arange(4, dtype=np.uint8))
    assert np.asarray(lax.gather(xu, idx, dn, (1,), mode="fill"))[1] == 255
    xb = jnp.asarray(np.zeros(4, bool))
    assert np.asarray(lax.gather(xb, idx, dn, (1,), mode="fill"))[1]
    assert lax.GatherScatterMode.from_any(None) is lax.GatherScatterMode.FILL_OR_DROP
    assert lax.GatherScatterMode.from_any("promise_in_bounds") is \
        lax.GatherScatterMode.PROMISE_IN_BOUNDS
    hash(dn)


def test_dynamic_slice_clamps_and_wraps():
    x = jnp.asarray(np.arange(10, dtype=np.int32))
    for start in range(-12, 13):
        out = np.asarray(lax.dynamic_slice(x, (jnp.asarray(np.int32(start)),), (3,)))
        s = start + 10 if start < 0 else start
        s = min(max(s, 0), 7)
        np.testing.assert_array_equal(out, np.arange(s, s + 3))
    out = lax.dynamic_update_slice(x, jnp.asarray(np.array([-1, -1], np.int32)), (9,))
    np.testing.assert_array_equal(np.asarray(out)[-3:], [7, -1, -1])


def test_take_modes():
    x = jnp.asarray(np.array([1.0, 2.0, 3.0], np.float32))
    out = np.asarray(jnp.take(x, np.array([0, -1, 3, -4])))
    np.testing.assert_array_equal(out[:2], [1, 3])
    assert np.isnan(out[2]) and np.isnan(out[3])
    np.testing.assert_array_equal(np.asarray(jnp.take(x, np.array([4, -4]), mode="wrap")),
                                  [2, 3])
    np.testing.assert_array_equal(np.asarray(jnp.take(x, np.array([4, -4]), mode="clip")),
                                  [3, 1])
    # JAX: 'clip' does not wrap negative indices first (-1 clamps to 0)
    np.testing.assert_array_equal(np.asarray(jnp.take(x, np.array([-1, 1]), mode="clip")),
                                  [1, 2])
    np.testing.assert_array_equal(
        np.asarray(jnp.take(x, np.array([5]), fill_value=-1.0)), [-1])


def test_nonzero_family():
    a = np.array([[0, 3, 0], [4, 0, 5]], np.int32)
    for got, ref in zip(jnp.nonzero(jnp.asarray(a)), np.nonzero(a)):
        np.testing.assert_array_equal(np.asarray(got), ref)
    np.testing.assert_array_equal(np.asarray(jnp.argwhere(jnp.asarray(a))), np.argwhere(a))
    np.testing.assert_array_equal(np.asarray(jnp.flatnonzero(jnp.asarray(a))),
                                  np.flatnonzero(a))
    r, c = jnp.nonzero(jnp.asarray(a), size=5, fill_value=-1)
    np.testing.assert_array_equal(np.asarray(r), [0, 1, 1, -1, -1])
    np.testing.assert_array_equal(np.asarray(c), [1, 0, 2, -1, -1])
    r, _ = jnp.nonzero(jnp.asarray(a), size=2)
    np.testing.assert_array_equal(np.asarray(r), [0, 1])


def test_nonzero_traced_with_size():
    a = jnp.asarray(np.array([[0, 3, 0], [4, 0, 5]], np.int32))
    from ember.jaxpr import eval_jaxpr
    closed = ember.make_jaxpr(lambda v: jnp.nonzero(v, size=4, fill_value=9))(a)
    r, c = eval_jaxpr(closed.jaxpr, closed.consts, a)
    np.testing.assert_array_equal(np.asarray(r), [0, 1, 1, 9])
    np.testing.assert_array_equal(np.asarray(c), [1, 0, 2, 9])


def test_index_helpers():
    for got, ref in zip(jnp.tril_indices(4, 1, 5), np.tril_indices(4, 1, 5)):
        np.testing.assert_array_equal(np.asarray(got), ref)
    for got, ref in zip(jnp.triu_indices_from(jnp.zeros((3, 4))), np.triu_indices(3, 0, 4)):
        np.testing.assert_array_equal(np.asarray(got), ref)
    for got, ref in zip(jnp.diag_indices(3, 3), np.diag_indices(3, 3)):
        np.testing.assert_array_equal(np.asarray(got), ref)
    flat = np.array([0, 5, 11, 7])
    for got, ref in zip(jnp.unravel_index(jnp.asarray(flat), (3, 4)),
                        np.unravel_index(flat, (3, 4))):
        np.testing.assert_array_equal(np.asarray(got), ref)
    got = jnp.unravel_index(jnp.asarray(np.array([-1, 100])), (3, 4))  # wrap, then clamp
    np.testing.assert_array_equal([np.asarray(g) for g in got], [[2, 2], [3, 3]])
    multi = (np.array([1, 2, 0]), np.array([3, 0, 1]))
    np.testing.assert_array_equal(
        np.asarray(jnp.ravel_multi_index(tuple(map(jnp.asarray, multi)), (3, 4))),
        np.ravel_multi_index(multi, (3, 4)))
    np.testing.assert_array_equal(
        np.asarray(jnp.ravel_multi_index((jnp.asarray(np.array([5])),
                                          jnp.asarray(np.array([-1]))), (3, 4), mode="clip")),
        [8])
    rows, cols = jnp.ix_(jnp.asarray(np.array([0, 2])), jnp.asarray(np.array([1, 0, 3])))
    np.testing.assert_array_equal(np.asarray(jnp.asarray(X[0])[rows, cols]),
                                  X[0][np.ix_([0, 2], [1, 0, 3])])
    np.testing.assert_array_equal(np.asarray(jnp.indices((2, 3))), np.indices((2, 3)))
    ch = [np.array([1, 2, 3]), np.array([10, 20, 30])]
    np.testing.assert_array_equal(
        np.asarray(jnp.choose(jnp.asarray(np.array([1, 0, 1])), [jnp.asarray(c) for c in ch])),
        np.choose([1, 0, 1], ch))


# ---------------------------------------------------------------- bad input


def test_too_many_indices():
    with pytest.raises(IndexError, match="Too many indices: 3-dimensional array indexed "
                                          "with 4"):
        jnp.asarray(X)[0, 0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        jnp.asarray(X)[..., 0, ...]


def test_float_index_is_type_error():
    with pytest.raises(TypeError, match="Indexer must have integer or boolean type"):
        jnp.asarray(X)[1.5]
    with pytest.raises(TypeError, match="Indexer must have integer or boolean type, got "
                                        "indexer with type float32"):
        jnp.asarray(X)[np.array([1.0], np.float32)]
    with pytest.raises(TypeError, match="slice indices must be integers"):
        jnp.asarray(X)[1.0:2]
    with pytest.raises(TypeError, match="not supported"):
        jnp.asarray(X)["a"]


def test_traced_boolean_mask():
    with pytest.raises(NonConcreteBooleanIndexError, match="boolean indices must be concrete"):
        ember.make_jaxpr(lambda x: x[x > 0])(jnp.asarray(X))
    assert issubclass(NonConcreteBooleanIndexError, IndexError)
    with pytest.raises(IndexError, match="boolean index did not match"):
        jnp.asarray(X)[np.array([True, False])]


def test_traced_slice_bound():
    with pytest.raises(IndexError, match="static start/stop/step"):
        ember.make_jaxpr(lambda x, i: x[i:])(jnp.asarray(X), 1)


def test_bad_mode():
    with pytest.raises(ValueError, match="Unknown gather mode 'wrong'"):
        jnp.asarray(X).at[0].set(1.0, mode="wrong")
    with pytest.raises(ValueError, match="invalid mode 'bogus'"):
        jnp.take(jnp.asarray(X), np.array([0]), mode="bogus")
    with pytest.raises(NotImplementedError, match="'raise' mode"):
        jnp.take(jnp.asarray(X), np.array([0]), mode="raise")


def test_gather_bad_dimension_numbers():
    x = jnp.asarray(X)
    idx = np.zeros((2, 1), np.int32)
    with pytest.raises(ValueError, match="gather: start_index_map \\(0, 1\\) must have one "
                                         "entry per index vector element"):
        lax.gather(x, idx, lax.GatherDimensionNumbers((1, 2), (0,), (0, 1)), (1, 4, 5))
    with pytest.raises(ValueError, match="offset_dims \\(2, 1\\) must be sorted"):
        lax.gather(x, idx, lax.GatherDimensionNumbers((2, 1), (0,), (0,)), (1, 4, 5))
    with pytest.raises(ValueError, match="slice_sizes\\[0\\] = 2 but collapsed"):
        lax.gather(x, idx, lax.GatherDimensionNumbers((1, 2), (0,), (0,)), (2, 4, 5))
    with pytest.raises(ValueError, match="slice_sizes \\(1, 9, 5\\) must be between 0 and"):
        lax.gather(x, idx, lax.GatherDimensionNumbers((1, 2), (0,), (0,)), (1, 9, 5))
    with pytest.raises(TypeError, match="gather: start_indices must have an integer dtype"):
        lax.gather(x, idx.astype(np.float32), lax.GatherDimensionNumbers((1, 2), (0,), (0,)),
                   (1, 4, 5))
    with pytest.raises(ValueError, match="offset_dims \\(1,\\) must have one entry per"):
        lax.gather(x, idx, lax.GatherDimensionNumbers((1,), (0,), (0,)), (1, 4, 5))


def test_scatter_bad_dimension_numbers():
    x = jnp.asarray(np.zeros((4, 3), np.float32))
    dn = lax.ScatterDimensionNumbers((1,), (0,), (0,))
    with pytest.raises(ValueError, match="scatter-add: the scatter dimensions of updates"):
        lax.scatter_add(x, np.zeros((2, 1), np.int32), jnp.asarray(np.zeros((3, 3),
                                                                             np.float32)), dn)
    with pytest.raises(TypeError, match="scatter: operand and updates must have the same "
                                        "dtype"):
        lax.scatter(x, np.zeros((2, 1), np.int32), jnp.asarray(np.zeros((2, 3), np.int32)), dn)


def test_dynamic_slice_bad_calls():
    x = jnp.asarray(X)
    with pytest.raises(ValueError, match="dynamic_slice: the number of start indices \\(1\\) "
                                        "must equal the rank of the operand"):
        lax.dynamic_slice(x, (0,), (1, 1, 1))
    with pytest.raises(TypeError, match="slice_sizes \\(4, 1, 1\\) must be non-negative and at "
                                        "most"):
        lax.dynamic_slice(x, (0, 0, 0), (4, 1, 1))
    with pytest.raises(TypeError, match="start indices must have an integer dtype"):
        lax.dynamic_slice(x, (jnp.asarray(np.float32(0)), 0, 0), (1, 1, 1))
    with pytest.raises(TypeError, match="dynamic_update_slice: update must have the operand's "
                                        "rank"):
        lax.dynamic_update_slice(x, jnp.asarray(np.zeros(2, np.float32)), (0, 0, 0))


def test_slice_bad_calls():
    x = jnp.asarray(X)
    with pytest.raises(TypeError, match="limit_indices must be greater than or equal to "
                                        "start_indices"):
        lax.slice(x, (2, 0, 0), (1, 4, 5))
    with pytest.raises(TypeError, match="slice: start_indices \\(0,\\) must have one entry per"):
        lax.slice(x, (0,), (1, 1, 1))
    with pytest.raises(TypeError, match="strides must be positive"):
        lax.slice(x, (0, 0, 0), (1, 1, 1), (1, 0, 1))
    with pytest.raises(TypeError, match="must be less than or equal to the operand shape"):
        lax.slice(x, (0, 0, 0), (4, 1, 1))
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 0"):
        lax.index_in_dim(x, 3)


def test_at_set_mismatched_update_shape():
    with pytest.raises(ValueError, match="at\\[...\\].set: cannot broadcast update values of "
                                         "shape \\(3,\\) to the indexed shape \\(2, 5\\)"):
        jnp.asarray(X)[0].at[np.array([0, 1])].set(jnp.asarray(np.zeros(3, np.float32)))


def test_nonzero_needs_concrete_or_size():
    with pytest.raises(ConcretizationTypeError, match="size="):
        ember.make_jaxpr(lambda v: jnp.nonzero(v))(jnp.asarray(X))
    with pytest.raises(ValueError, match="0d arrays"):
        jnp.nonzero(jnp.asarray(np.float32(1)))
    with pytest.raises(TypeError, match="take requires ndarray or scalar arguments"):
        jnp.take([1, 2], np.array([0]))


def test_empty_axis_index_errors():
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 0"):
        jnp.asarray(np.zeros((0, 3), np.float32))[0]
    out = jnp.asarray(np.zeros((0, 3), np.float32))[np.zeros(0, np.int32)]
    assert out.shape == (0, 3)


def test_row_updates_scatter_whole_rows():
    # x.at[i] with the indexed dims leading and the rest whole: one coordinate per row
    # (update windows), not one per element; same values as NumPy, traced or not.
    rng = np.random.default_rng(3)
    x = rng.normal(size=(6, 4, 3)).astype(np.float32)
    idx = np.array([1, -1, 1, 7, 0])  # a repeat, a negative and an out-of-bounds index
    v = rng.normal(size=(5, 4, 3)).astype(np.float32)
    text = str(ember.make_jaxpr(lambda a, i, u: a.at[i].add(u))(x, idx, v))
    assert "update_window_dims=(1, 2)" in text and "inserted_window_dims=(0,)" in text
    keep = idx < 6  # (the default mode drops out-of-bounds updates)
    ref = x.copy()
    np.add.at(ref, idx[keep], v[keep])
    for fn in (lambda a, i, u: a.at[i].add(u), ember.jit(lambda a, i, u: a.at[i].add(u))):
        np.testing.assert_allclose(np.asarray(fn(jnp.asarray(x), idx, v)), ref, rtol=1e-6,
                                   atol=1e-6)
    clipped = x.copy()
    np.add.at(clipped, np.clip(np.where(idx < 0, idx + 6, idx), 0, 5), v)
    got = ember.jit(lambda a, i, u: a.at[i].add(u, mode="clip"))(x, idx, v)
    np.testing.assert_allclose(np.asarray(got), clipped, rtol=1e-6, atol=1e-6)
    # Two leading indices, then a whole dim; a scalar index.
    ref2 = x.copy()
    np.add.at(ref2, (np.array([0, 2, 0]), np.array([3, 1, 3])), v[:3, 0])
    got2 = ember.jit(lambda a, u: a.at[np.array([0, 2, 0]), np.array([3, 1, 3])].add(u))(
        x, v[:3, 0])
    np.testing.assert_allclose(np.asarray(got2), ref2, rtol=1e-6, atol=1e-6)
    ref3 = x.copy()
    ref3[4] = 2.0
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda a: a.at[4].set(2.0))(x)), ref3)
    # Gradients: the updates' cotangent is a gather of rows; x's passes through.
    g_x, g_u = ember.grad(lambda a, u: (a.at[idx].add(u) ** 2).sum(), argnums=(0, 1))(x, v)
    np.testing.assert_allclose(np.asarray(g_x), 2 * ref, rtol=1e-5, atol=1e-5)
    want_u = np.where(keep[:, None, None], 2 * ref[np.clip(idx, -6, 5)], 0.0)
    np.testing.assert_allclose(np.asarray(g_u), want_u, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("idx", [np.s_[1:3], np.s_[4, 1:3], np.s_[:, 2], np.s_[-2:, 1, 0:2],
                                 np.s_[..., 1:2], np.s_[5:1], np.s_[1, 2, 0]])
def test_block_updates_scatter_one_window(idx):
    # Integers and slices of step 1 update a block: one corner index, the block a window
    # (as JAX), not one coordinate per element.
    rng = np.random.default_rng(4)
    x = rng.normal(size=(6, 4, 3)).astype(np.float32)
    block = x[idx].shape
    if 0 in block:
        return
    v = rng.normal(size=block).astype(np.float32)
    closed = ember.make_jaxpr(lambda a, u: a.at[idx].add(u))(x, v)
    scatter = closed.jaxpr.eqns[-1]
    assert scatter.invars[1].aval.shape == (3,)  # the block's corner
    for method, ufunc in (("set", None), ("add", np.add), ("max", np.maximum)):
        ref = x.copy()
        ref[idx] = v if ufunc is None else ufunc(ref[idx], v)
        fn = lambda a, u, m=method: getattr(a.at[idx], m)(u)  # noqa: E731
        for f in (fn, ember.jit(fn)):
            np.testing.assert_array_equal(np.asarray(f(jnp.asarray(x), v)), ref)


def test_block_update_at_a_traced_integer_drops_out_of_bounds():
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    f = ember.jit(lambda a, i: a.at[i, 1:3].set(-1.0))
    for i in (0, 5, -1, -6, 6, -7, 100):
        ref = x.copy()
        if -6 <= i < 6:
            ref[i, 1:3] = -1.0
        np.testing.assert_array_equal(np.asarray(f(x, i)), ref)
    clipped = ember.jit(lambda a, i: a.at[i, 1:3].set(-1.0, mode="clip"))(x, 9)
    ref = x.copy()
    ref[5, 1:3] = -1.0
    np.testing.assert_array_equal(np.asarray(clipped), ref)


def test_at_apply_applies_the_function_once_per_index():
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    want = x.copy()
    for i in (1, 1, 2):  # a repeated index gets the function twice
        want[i] = want[i] * 10
    f = lambda v: v.at[np.array([1, 1, 2])].apply(lambda t: t * 10)  # noqa: E731
    for got in (f(jnp.asarray(x)), ember.jit(f)(jnp.asarray(x))):
        np.testing.assert_array_equal(np.asarray(got), want)
    window = np.asarray(jnp.asarray(x).at[:, 1:3].apply(jnp.sin))
    want = x.copy()
    want[:, 1:3] = np.sin(x[:, 1:3])
    np.testing.assert_allclose(window, want, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(jnp.asarray(x).at[2:2].apply(jnp.sin)), x)


@pytest.mark.parametrize("method", ["set", "add", "multiply", "min", "max"])
def test_updates_of_a_transposed_array(method):
    # The evaluator copied the operand in its own (transposed) layout, and flattening that
    # copy made a second one that took the updates: eager x.T.at[i, j].add(v) returned x.T.
    x = np.arange(20.0, dtype=np.float32).reshape(4, 5)
    i, j = np.array([0, 1, 4, 1]), np.array([1, 2, 3, 2])
    v = np.array([100.0, -3.0, 7.0, 2.0], np.float32)
    want = x.T.copy()
    ufunc = {"set": None, "add": np.add, "multiply": np.multiply, "min": np.minimum,
             "max": np.maximum}[method]
    if ufunc is None:
        want[i, j] = v
    else:
        ufunc.at(want, (i, j), v)

    def f(a):
        return getattr(a.T.at[i, j], method)(v)
    np.testing.assert_array_equal(np.asarray(f(jnp.asarray(x))), want)
    np.testing.assert_array_equal(np.asarray(ember.jit(f)(x)), want)
    np.testing.assert_array_equal(np.asarray(ember.jit(f, backend="interpreter")(x)), want)
