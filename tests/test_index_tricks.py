"""Index objects, array editing, functions of functions and set operations.

The op records (tests/op_records/index_tricks.py) cover dtypes and shapes; this file covers
what they cannot: the index objects and their directives, keyword arguments, vectorize's
signatures, the eager-only set operations, jit/vmap/grad, the error cases, and a comparison
with JAX (values, dtypes, weak types and error classes) where JAX is installed. Values are
checked against NumPy or against hand-computed results.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import errors
from tests.probes import run_probe


def A(x, dtype=None):
    return jnp.asarray(np.asarray(x, dtype=dtype))


def same(actual, expected, dtype=None, weak=None):
    """Exact comparison (NaNs equal), optionally of the dtype and weak type too."""
    expected = np.asarray(expected)
    np.testing.assert_array_equal(np.asarray(actual), expected)
    assert np.shape(actual) == expected.shape
    if dtype is not None:
        assert np.dtype(actual.dtype) == np.dtype(dtype), actual.dtype
    if weak is not None:
        assert actual.weak_type == weak, actual.aval


def close(actual, expected, tol=1e-5):
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64),
                               rtol=tol, atol=tol)


# ---------------------------------------------------------------- r_ / c_


def test_r_slices_scalars_and_arrays():
    same(jnp.r_[0:5:2, 7, A([8, 9])], [0, 2, 4, 7, 8, 9], np.int32, weak=False)
    same(jnp.r_[1, 2, 3], [1, 2, 3], np.int32, weak=True)  # only Python scalars: weak
    same(jnp.r_[1.0, 2], [1.0, 2.0], np.float32, weak=True)
    same(jnp.r_[A([1, 2], np.int8), 3], [1, 2, 3], np.int8, weak=False)
    same(jnp.r_[True, False], [True, False], np.bool_)
    same(jnp.r_[3:0:-1], [3, 2, 1])
    close(jnp.r_[0:1:0.25], np.r_[0:1:0.25])
    assert jnp.r_[0:1:0.25].dtype == np.float32


def test_r_complex_step_counts_points_inclusive():
    close(jnp.r_[0:1:5j], np.linspace(0, 1, 5))
    close(jnp.r_[:1:5j, 2], [0, 0.25, 0.5, 0.75, 1, 2])
    close(jnp.r_[-1:1:2.5j], [-1.0, 1.0])  # int(abs(step)) points


@pytest.mark.parametrize("directive,expected", [
    ("0,2", [[1, 2, 3], [4, 5, 6]]),
    ("1,2", [[1, 2, 3, 4, 5, 6]]),
    ("0,2,0", [[1], [2], [3], [4], [5], [6]]),
    ("0,2,-2", [[1], [2], [3], [4], [5], [6]]),
    ("0,3,1", [[[1], [2], [3]], [[4], [5], [6]]]),
    ("-1,3,-2", [[[1, 4], [2, 5], [3, 6]]]),
    ("0,2,0,5", [[1], [2], [3], [4], [5], [6]]),  # parts past the third are ignored
    ("r", [[1, 2, 3, 4, 5, 6]]),
    ("c", [[1], [2], [3], [4], [5], [6]]),
])
def test_r_directives(directive, expected):
    same(jnp.r_[directive, [1, 2, 3], [4, 5, 6]], expected, np.int32)


def test_r_directives_match_numpy_where_numpy_agrees():
    a, b = [[1, 2, 3]], [[4, 5, 6]]
    for d in ("0,2", "1,2", "0,2,0", "-1,3,-2", "1", "0,3,-1"):
        same(jnp.r_[d, a, b], np.r_[d, a, b])
    # With several dimensions to add, JAX (and ember) rotate the dims where NumPy swaps two.
    same(jnp.r_["0,3,1", a, b], [[[1], [2], [3]], [[4], [5], [6]]])


def test_r_directive_with_slices_and_2d_pieces():
    same(jnp.r_["0,2", 0:3, [4, 5, 6]], [[0, 1, 2], [4, 5, 6]])
    same(jnp.r_["0,2,0", 0:3, [4, 5, 6]], [[0], [1], [2], [4], [5], [6]])
    same(jnp.r_["0,2,0", 7, [4, 5, 6]], [[7], [4], [5], [6]])
    same(jnp.r_["c", [[1, 2, 3]], [[4, 5, 6]]], [[1, 2, 3], [4, 5, 6]])
    same(jnp.r_[jnp.ones((2, 2)), jnp.zeros((1, 2))], np.r_[np.ones((2, 2)), np.zeros((1, 2))])


def test_c_columns():
    same(jnp.c_[A([1, 2, 3]), A([4, 5, 6])], np.c_[[1, 2, 3], [4, 5, 6]], np.int32)
    same(jnp.c_[0:3, [4, 5, 6]], [[0, 4], [1, 5], [2, 6]])
    same(jnp.c_[1, 2], [[1, 2]], np.int32, weak=True)
    same(jnp.c_[jnp.ones((2, 2)), jnp.zeros((2, 1))], np.c_[np.ones((2, 2)), np.zeros((2, 1))])
    same(jnp.c_["r", [1, 2, 3], [4, 5, 6]], [[1, 4], [2, 5], [3, 6]])
    same(jnp.c_["0,2", [1, 2, 3], [4, 5, 6]], [[1], [2], [3], [4], [5], [6]])
    same(jnp.c_["0,2,-1", [1, 2, 3], [4, 5, 6]], [[1, 2, 3], [4, 5, 6]])
    assert len(jnp.r_) == 0 and len(jnp.c_) == 0


def test_r_c_trace_under_jit_and_vmap():
    f = ember.jit(lambda x: jnp.r_[x, 0:2, 5.0])
    same(f(A([1.0, 2.0])), [1, 2, 0, 1, 5])
    g = ember.vmap(lambda x: jnp.c_[x, 2 * x])
    same(g(A([[1, 2], [3, 4]])), [[[1, 2], [2, 4]], [[3, 6], [4, 8]]])


def test_r_c_errors():
    with pytest.raises(ValueError, match="r_.*directive"):
        jnp.r_["a,b", [1, 2]]
    with pytest.raises(ValueError, match="r_.*beginning"):
        jnp.r_[[1, 2], "r"]
    with pytest.raises(ValueError, match="c_.*directive"):
        jnp.c_["x", [1]]
    with pytest.raises(ValueError, match="r_"):  # JAX: IndexError (an empty tuple)
        jnp.r_[()]
    with pytest.raises(TypeError, match="concatenate"):
        jnp.c_[A([1, 2]), 3.5]
    with pytest.raises(errors.ConcretizationTypeError):
        ember.jit(lambda n: jnp.r_[0:n])(3)


# ---------------------------------------------------------------- mgrid / ogrid / s_


def test_mgrid_matches_numpy():
    for key in [np.s_[0:3], np.s_[0:2, 0:3], np.s_[0:2, 1:3, 2:4], np.s_[3:0:-1],
                np.s_[0:2, 0:1:3j]]:
        got, expected = jnp.mgrid[key], np.mgrid[key]
        close(got, expected)
        assert got.shape == expected.shape
    assert jnp.mgrid[0:2, 0:3].dtype == np.int32 and not jnp.mgrid[0:3].weak_type
    assert jnp.mgrid[0:2, 0:1:3j].dtype == np.float32  # int and float grids promote


def test_mgrid_edge_cases():
    same(jnp.mgrid[()], np.zeros(0), np.int32)
    same(jnp.mgrid[0:], [], np.int32)
    same(jnp.mgrid[3:], [0, 1, 2])  # JAX's arange(3, None): the stop is the start
    same(jnp.mgrid[0:1:1j], [0.0], np.float32)
    same(jnp.mgrid[0:1:0j], [0], np.int32)  # a zero step means 1
    same(jnp.mgrid[0:3:0], [0, 1, 2])
    same(jnp.r_[0.0:2], [0, 1], np.int32)  # a zero start is the integer 0, as in JAX
    same(jnp.r_[1.0:3], [1.0, 2.0], np.float32)
    close(jnp.mgrid[0:1:0.5], [0.0, 0.5])


def test_ogrid_matches_numpy():
    got = jnp.ogrid[0:2, 0:3]
    expected = np.ogrid[0:2, 0:3]
    assert isinstance(got, list) and len(got) == 2
    for g, e in zip(got, expected):
        same(g, e, np.int32)
    assert jnp.ogrid[()] == []
    same(jnp.ogrid[0:3], [0, 1, 2])
    mixed = jnp.ogrid[0:2, 0:1:3j]
    assert [m.dtype for m in mixed] == [np.float32, np.float32]
    close(mixed[1], [[0.0, 0.5, 1.0]])


def test_grid_errors():
    with pytest.raises(TypeError, match="mgrid"):
        jnp.mgrid[3]
    with pytest.raises(TypeError, match="ogrid"):
        jnp.ogrid[0:2, 3]
    with pytest.raises(errors.ConcretizationTypeError, match="mgrid"):
        ember.jit(lambda n: jnp.mgrid[0:n])(3)


def test_s_and_index_exp():
    assert jnp.s_[1:2, ...] == (slice(1, 2), Ellipsis)
    assert jnp.s_[3] == 3 and jnp.index_exp[3] == (3,)
    same(jnp.arange(10)[jnp.s_[1:8:2]], [1, 3, 5, 7])


# ---------------------------------------------------------------- block


def test_block_matches_numpy():
    a, b, c = np.ones((2, 2)), np.zeros((2, 1)), np.full((1, 3), 2.0)
    same(jnp.block([[A(a), A(b)], [A(c)]]), np.block([[a, b], [c]]))
    same(jnp.block([A([1, 2]), A([3])]), [1, 2, 3])
    same(jnp.block([[A([1, 2])], [A([3, 4])]]), [[1, 2], [3, 4]])
    x = np.arange(8.0).reshape(1, 2, 2, 2)
    same(jnp.block([[[A(x)], [A(x)]], [[A(x)], [A(x)]]]), np.block([[[x], [x]], [[x], [x]]]))
    same(jnp.block([jnp.ones((2, 2, 2)), jnp.ones((2, 2, 1))]), np.ones((2, 2, 3)))


def test_block_scalars_dtypes_and_weak_types():
    same(jnp.block(1), 1, np.int32, weak=True)
    same(jnp.block([1, 2]), [1, 2], np.int32, weak=True)
    same(jnp.block([[1]]), [[1]], np.int32, weak=True)
    same(jnp.block([1, 2.0]), [1.0, 2.0], np.float32, weak=True)
    same(jnp.block(np.arange(3)), [0, 1, 2], np.int32, weak=False)
    same(jnp.block([jnp.ones(2, jnp.int8), jnp.ones(2, jnp.float16)]), np.ones(4), np.float16)


def test_block_jit_and_grad():
    f = ember.jit(lambda x, y: jnp.block([[x, y], [y, x]]))
    x, y = np.eye(2, dtype=np.float32), np.ones((2, 2), np.float32)
    same(f(x, y), np.block([[x, y], [y, x]]))
    g = ember.grad(lambda x: jnp.sum(jnp.block([[x, x], [x, 2 * x]]) * 1.5))(A(x))
    close(g, np.full((2, 2), 1.5 * 5))


def test_block_errors():
    with pytest.raises(ValueError, match="block.*tuple"):
        jnp.block((A(1), A(2)))
    with pytest.raises(ValueError, match="block.*empty"):
        jnp.block([])
    with pytest.raises(ValueError, match="block.*empty"):
        jnp.block([[]])
    with pytest.raises(ValueError, match="block.*depth"):
        jnp.block([[A(1)], A(2)])
    with pytest.raises(TypeError):
        jnp.block([[A([1, 2]), A([3])], [A([4])]])  # rows of different widths
    with pytest.raises(ValueError, match="None"):
        jnp.block([None])


# ---------------------------------------------------------------- delete


X34 = np.arange(12).reshape(3, 4)


@pytest.mark.parametrize("obj,axis", [
    (1, None), (1, 0), (-1, 1), (np.int8(2), 1), (slice(0, None, 2), 1),
    (slice(None, None, -3), 1), (slice(5, 9), 1), (np.array([0, 2, 2, -1]), 1),
    (np.array([[0], [1]]), 1), (np.array([True, False, True, False]), 1),
    (np.array([], np.int32), 1), (np.array([0, 11]), None),
])
def test_delete_matches_numpy(obj, axis):
    same(jnp.delete(A(X34), obj, axis=axis), np.delete(X34, obj, axis=axis), np.int32)
    if isinstance(obj, np.ndarray):
        same(jnp.delete(A(X34), A(obj), axis=axis), np.delete(X34, obj, axis=axis))


def test_delete_keeps_weak_type_and_scalars():
    same(jnp.delete(jnp.asarray(3.0), 0), np.zeros(0), np.float32, weak=True)
    same(jnp.delete(jnp.asarray(3.0), A([0])), np.zeros(0), np.float32, weak=True)
    same(jnp.delete(A(X34), A(2), axis=1), np.delete(X34, 2, axis=1))
    same(jnp.delete(A(X34), True, axis=1), np.delete(X34, 1, axis=1))  # NumPy: a mask


@pytest.mark.parametrize("obj,expected", [
    ([0, 2], [[1, 3], [5, 7], [9, 11]]),
    ([3, 0], [[1, 2], [5, 6], [9, 10]]),
    ([0, 9], [[1, 2], [5, 6], [9, 10]]),  # out of range: clipped to the end
    ([-1, -9], [[1, 2], [5, 6], [9, 10]]),
])
def test_delete_assume_unique_indices(obj, expected):
    same(jnp.delete(A(X34), A(obj), axis=1, assume_unique_indices=True), expected)
    f = ember.jit(lambda a, i: jnp.delete(a, i, axis=1, assume_unique_indices=True))
    same(f(A(X34), A(obj)), expected)


def test_delete_vmap_and_grad():
    out = ember.vmap(lambda a, i: jnp.delete(a, i, assume_unique_indices=True))(
        A(X34), A([[0], [2], [3]]))
    same(out, [np.delete(X34[k], i) for k, i in enumerate([0, 2, 3])])
    g = ember.grad(lambda a: jnp.sum(jnp.delete(a, A([1, 3])) * jnp.arange(3.0)))(
        jnp.arange(5.0))
    same(g, [0, 0, 1, 0, 2])


def test_delete_errors():
    with pytest.raises(IndexError, match="delete"):  # also a ValueError (an AxisError)
        jnp.delete(A(X34), 5, axis=1)
    with pytest.raises(ValueError, match="delete"):
        jnp.delete(A(X34), -5, axis=1)
    with pytest.raises(IndexError, match="delete.*out of bounds"):
        jnp.delete(A(X34), A([0, 7]), axis=1)
    with pytest.raises(ValueError, match="delete.*boolean"):
        jnp.delete(A(X34), A([True, False]), axis=1)
    with pytest.raises(ValueError, match="delete.*dtype"):
        jnp.delete(A(X34), A([1.0]), axis=1)
    with pytest.raises(ValueError, match="delete.*dtype"):
        jnp.delete(A(X34), 1.0, axis=1)
    with pytest.raises(ValueError, match="delete"):
        jnp.delete(A(X34), 0, axis=2)
    with pytest.raises(TypeError, match="delete"):
        jnp.delete([1, 2, 3], 0)
    with pytest.raises(TypeError, match="delete"):
        jnp.delete(A(X34), [0, 2], axis=1)
    with pytest.raises(errors.ConcretizationTypeError, match="obj"):
        ember.jit(lambda a, i: jnp.delete(a, i, axis=1))(A(X34), A([3, 1]))
    with pytest.raises(errors.ConcretizationTypeError):
        ember.jit(lambda a, i: jnp.delete(a, i, axis=1))(A(X34), 1)


# ---------------------------------------------------------------- insert


X23 = np.arange(6).reshape(2, 3)


@pytest.mark.parametrize("obj,values,axis", [
    (1, 9, None), (1, 9, 1), (1, [7, 8], 1), (1, [7, 8, 9], 0),
    (1, [[7, 8, 9], [1, 1, 1]], 0), (1, [[7, 8], [1, 1]], 1), ([1], [7, 8], 1),
    ([1], [[7], [8]], 1), ([0, 2, 2], [7, 8, 9], 1), ([0, 2, 3], 5, 1),
    (slice(0, 4, 2), [10, 11], None), (slice(None), 0, None), (-1, [4, 5], 1),
])
def test_insert_matches_numpy(obj, values, axis):
    expected = np.insert(X23, obj, values, axis=axis)
    o = A(obj) if isinstance(obj, list) else obj
    same(jnp.insert(A(X23), o, A(values), axis=axis), expected, np.int32)


def test_insert_unsorted_repeated_and_out_of_range_indices():
    # Values go before the indexed elements; equal indices keep their order.
    same(jnp.insert(jnp.arange(5), A([3, 0, 5, -1]), A([10, 11, 12, 13])),
         np.insert(np.arange(5), [3, 0, 5, -1], [10, 11, 12, 13]))
    same(jnp.insert(jnp.arange(5), A([3, 1, 3, 1, 0]), A([10, 11, 12, 13, 14])),
         np.insert(np.arange(5), [3, 1, 3, 1, 0], [10, 11, 12, 13, 14]))
    # Unlike NumPy (an IndexError), out-of-range indices are clipped, as in JAX.
    same(jnp.insert(jnp.arange(5), A([9, -9]), A([10, 11])), [11, 0, 1, 2, 3, 4, 10])
    same(jnp.insert(jnp.arange(5), 9, 10), [0, 1, 2, 3, 4, 10])
    same(jnp.insert(jnp.arange(5), -9, 10), [10, 0, 1, 2, 3, 4])


def test_insert_converts_values_to_the_array_dtype():
    same(jnp.insert(jnp.arange(5), 1, 2.7), [0, 2, 1, 2, 3, 4], np.int32, weak=False)
    same(jnp.insert(jnp.arange(5), 1, -2.7), [0, -2, 1, 2, 3, 4], np.int32)
    same(jnp.insert(jnp.arange(3, dtype=jnp.uint8), 1, -1), [0, 255, 1, 2], np.uint8)
    same(jnp.insert(jnp.arange(3, dtype=jnp.uint8), 1, 300), [0, 44, 1, 2], np.uint8)
    same(jnp.insert(A([True, False]), 1, 2), [True, True, False], np.bool_)
    same(jnp.insert(jnp.asarray(5.0), 0, 1), [1.0, 5.0], np.float32, weak=True)
    same(jnp.insert(jnp.zeros((0,), jnp.int32), 0, A([1, 2])), [1, 2])
    same(jnp.insert(jnp.arange(5), np.array([]), A([], np.int32)), np.arange(5))


def test_insert_traced_indices_jit_vmap_grad():
    f = ember.jit(lambda a, i, v: jnp.insert(a, i, v))
    same(f(jnp.arange(5), A([1, 3]), A([8, 9])), np.insert(np.arange(5), [1, 3], [8, 9]))
    same(f(jnp.arange(5), 2, 8), np.insert(np.arange(5), 2, 8))
    a, i, v = X23, np.array([[0, 1], [3, 3]]), np.array([[8, 9], [6, 7]])
    same(ember.vmap(jnp.insert)(A(a), A(i), A(v)),
         [np.insert(a[k], i[k], v[k]) for k in range(2)])
    ga, gv = ember.grad(lambda a, v: jnp.sum(jnp.insert(a, A([1, 2]), v) * jnp.arange(7.0)),
                        argnums=(0, 1))(jnp.arange(5.0), A([2.0, 3.0]))
    same(ga, [0, 2, 4, 5, 6])
    same(gv, [1, 3])


def test_insert_errors():
    with pytest.raises(ValueError, match="insert.*integer"):
        jnp.insert(jnp.arange(5), 1.0, 1)
    with pytest.raises(ValueError, match="insert.*integer"):
        jnp.insert(jnp.arange(5), A([True, False]), 1)
    with pytest.raises(ValueError, match="insert.*integer"):
        jnp.insert(jnp.arange(5), A([]), A([], np.int32))
    with pytest.raises(ValueError, match="insert.*1-D"):
        jnp.insert(jnp.arange(5), A([[1]]), 1)
    with pytest.raises(ValueError, match="broadcast"):
        jnp.insert(jnp.arange(5), A([1, 2]), A([1, 2, 3]))
    with pytest.raises(ValueError, match="insert.*broadcast"):
        jnp.insert(A(X23), 1, A([1, 2, 3, 4]), axis=1)
    with pytest.raises(ValueError, match="insert.*broadcast"):
        jnp.insert(jnp.arange(3), 1, A([[1, 2]]))
    with pytest.raises(ValueError, match="insert"):
        jnp.insert(A(X23), 0, 1, axis=3)
    with pytest.raises(TypeError, match="insert"):
        jnp.insert(jnp.arange(5), [1, 2], 1)
    with pytest.raises(TypeError, match="insert"):
        jnp.insert(jnp.arange(5), 1, [1, 2])


# ---------------------------------------------------------------- fill_diagonal


def _np_fill_diagonal(a, val):
    out = np.array(a, copy=True)
    np.fill_diagonal(out, val)
    return out


@pytest.mark.parametrize("shape,val", [
    ((3, 4), 5), ((3, 4), [1, 2]), ((3, 4), [1, 2, 3, 4, 5]), ((3, 4), [[1, 2], [3, 4]]),
    ((5, 2), [1, 2, 3]), ((2, 2, 2), 1), ((3, 3, 3), [1, 2]), ((0, 3), 1),
])
def test_fill_diagonal_matches_numpy(shape, val):
    a = np.zeros(shape, np.float32)
    same(jnp.fill_diagonal(A(a), A(val), inplace=False), _np_fill_diagonal(a, val),
         np.float32)


def test_fill_diagonal_casts_and_traces():
    same(jnp.fill_diagonal(jnp.zeros((2, 2), jnp.int32), 2.7, inplace=False), [[2, 0], [0, 2]],
         np.int32)
    f = ember.jit(lambda a, v: jnp.fill_diagonal(a, v, inplace=False))
    same(f(jnp.zeros((3, 3)), A([1.0, 2.0])), np.diag([1.0, 2.0, 1.0]))
    g = ember.grad(lambda a, v: jnp.sum(jnp.fill_diagonal(a, v, inplace=False) ** 2),
                   argnums=(0, 1))(jnp.ones((2, 2)), A([3.0, 4.0]))
    same(g[0], [[0, 2], [2, 0]])
    same(g[1], [6, 8])


def test_fill_diagonal_errors():
    with pytest.raises(NotImplementedError, match="inplace=False"):
        jnp.fill_diagonal(jnp.zeros((2, 2)), 1)
    with pytest.raises(NotImplementedError, match="wrap"):
        jnp.fill_diagonal(jnp.zeros((2, 2)), 1, wrap=True, inplace=False)
    with pytest.raises(ValueError, match="fill_diagonal.*2-d"):
        jnp.fill_diagonal(jnp.zeros(3), 1, inplace=False)
    with pytest.raises(ValueError, match="fill_diagonal.*equal"):
        jnp.fill_diagonal(jnp.zeros((2, 2, 3)), 1, inplace=False)
    with pytest.raises(ValueError, match="fill_diagonal.*empty"):  # JAX: ZeroDivisionError
        jnp.fill_diagonal(jnp.zeros((2, 2)), A([], np.float32), inplace=False)
    with pytest.raises(TypeError, match="fill_diagonal"):
        jnp.fill_diagonal([[1, 2], [3, 4]], 1, inplace=False)


# ---------------------------------------------------------------- put


def _np_put(a, ind, v, mode="raise"):
    out = np.array(a, copy=True)
    np.put(out, ind, v, mode=mode)
    return out


@pytest.mark.parametrize("ind,v,mode", [
    ([0, 4], [7, 8], None), ([-1, -6], [7, 8], None), ([0, 1, 2, 3, 4], [7, 8], None),
    ([0, 1], [7, 8, 9], None), ([[0], [5]], [[1, 2]], None), ([6, -7, 100, -1], [7, 8, 9, 4],
                                                              "clip"),
    ([6, -7, 100], [7, 8, 9], "wrap"),
])
def test_put_matches_numpy(ind, v, mode):
    np_mode = "raise" if mode is None else mode
    same(jnp.put(A(X23), A(ind), A(v), mode=mode, inplace=False), _np_put(X23, ind, v, np_mode))


def test_put_default_mode_clamps_out_of_range():
    # JAX's default mode: negative indices count from the end, then indices are clamped.
    same(jnp.put(A(X23), A([6, -7, 100]), A([7, 8, 9]), inplace=False), [[8, 1, 2], [3, 4, 9]])
    same(jnp.put(A(X23), A([True, False]), 5, inplace=False), [[5, 5, 2], [3, 4, 5]])
    same(jnp.put(A(X23), A([], np.int32), 2, inplace=False), X23)
    same(jnp.put(A(X23), 1, A([], np.int32), inplace=False), X23)
    same(jnp.put(A(X23), 1, 2.5, inplace=False), [[0, 2, 2], [3, 4, 5]], np.int32)
    same(jnp.put(jnp.zeros(7), A([-128], np.int8), 5.0, mode="wrap", inplace=False),
         _np_put(np.zeros(7), [-128], 5.0, "wrap"))


def test_put_jit_vmap_grad():
    f = ember.jit(lambda x, i, v: jnp.put(x, i, v, inplace=False))
    same(f(A(X23), A([1, -1]), A([10, 20])), [[0, 10, 2], [3, 4, 20]])
    out = ember.vmap(lambda a, i, v: jnp.put(a, i, v, inplace=False))(
        jnp.zeros((2, 4)), A([[0, 1], [3, -1]]), A([[1.0, 2.0], [3.0, 4.0]]))
    same(out, [[1, 2, 0, 0], [0, 0, 0, 4]])
    ga, gv = ember.grad(lambda a, v: jnp.sum(jnp.put(a, A([0, 3]), v, inplace=False)
                                             * jnp.arange(6.0)), argnums=(0, 1))(
        jnp.ones(6), A([2.0, 5.0]))
    same(ga, [0, 1, 2, 0, 4, 5])
    same(gv, [0, 3])


def test_put_errors():
    with pytest.raises(ValueError, match="put.*inplace=False"):
        jnp.put(A(X23), 1, 9)
    with pytest.raises(NotImplementedError, match="raise"):
        jnp.put(A(X23), 1, 1, mode="raise", inplace=False)
    with pytest.raises(ValueError, match="put.*mode"):
        jnp.put(A(X23), 1, 1, mode="foo", inplace=False)
    with pytest.raises(TypeError, match="put.*ind"):
        jnp.put(A(X23), 1.0, 2, inplace=False)
    with pytest.raises(TypeError, match="put"):
        jnp.put(A(X23), [1], 2, inplace=False)


# ---------------------------------------------------------------- put_along_axis


def _np_put_along_axis(a, idx, v, axis):
    out = np.array(a, copy=True)
    np.put_along_axis(out, np.asarray(idx), v, axis=axis)
    return out


@pytest.mark.parametrize("idx,v,axis", [
    ([[0], [1]], 9, 1), ([[-1], [-3]], [[7], [8]], 1), ([[1, 0, 1]], [[7, 8, 9]], 0),
    ([[1], [0]], [[7], [8]], -1), ([0, 5], [7, 8], None), ([[1]], 5, 1),
    ([[1, 2, 0, 1], [2, 2, 2, 0]], np.arange(8).reshape(2, 4), 1),
])
def test_put_along_axis_matches_numpy(idx, v, axis):
    got = jnp.put_along_axis(A(X23), A(idx), A(v), axis=axis, inplace=False)
    same(got, _np_put_along_axis(X23, idx, v, axis))


def test_put_along_axis_modes():
    idx, v = A([[3], [-4]]), A([[7], [8]])
    for mode in (None, "fill", "drop"):  # out of range: dropped
        same(jnp.put_along_axis(A(X23), idx, v, axis=1, inplace=False, mode=mode), X23)
    same(jnp.put_along_axis(A(X23), idx, v, axis=1, inplace=False, mode="clip"),
         [[0, 1, 7], [8, 4, 5]])


def test_put_along_axis_jit_and_grad():
    f = ember.jit(lambda a, i, v: jnp.put_along_axis(a, i, v, axis=0, inplace=False))
    same(f(jnp.zeros((3, 2)), A([[2, 0]]), A([[1.0, 2.0]])), [[0, 2], [0, 0], [1, 0]])
    ga, gv = ember.grad(lambda a, v: jnp.sum(
        jnp.put_along_axis(a, A([[2], [0]]), v, axis=1, inplace=False)
        * jnp.arange(6.0).reshape(2, 3)), argnums=(0, 1))(jnp.ones((2, 3)), A([[2.0], [5.0]]))
    same(ga, [[0, 1, 0], [0, 4, 5]])
    same(gv, [[2], [3]])


def test_put_along_axis_errors():
    with pytest.raises(ValueError, match="put_along_axis.*inplace=False"):
        jnp.put_along_axis(A(X23), A([[0], [1]]), 9, axis=1)
    with pytest.raises(ValueError, match="put_along_axis.*same number of dimensions"):
        jnp.put_along_axis(A(X23), A([1]), 1, axis=1, inplace=False)
    with pytest.raises(ValueError, match="put_along_axis.*'values'"):
        jnp.put_along_axis(A(X23), A([[1], [2]]), A([[5, 6]]), axis=1, inplace=False)
    with pytest.raises(ValueError, match="put_along_axis.*mode"):
        jnp.put_along_axis(A(X23), A([[1]]), 1, axis=1, inplace=False, mode="wrap")
    with pytest.raises(TypeError, match="put_along_axis.*integer"):
        jnp.put_along_axis(A(X23), A([[1.0], [2.0]]), 2, axis=1, inplace=False)
    with pytest.raises(ValueError, match="put_along_axis"):  # JAX: AssertionError
        jnp.put_along_axis(A(X23), A([[1], [2]]), 2, axis=2, inplace=False)
    with pytest.raises(ValueError, match="put_along_axis.*broadcast"):
        jnp.put_along_axis(A(X23), A([[1], [2], [0]]), 5, axis=1, inplace=False)
    with pytest.raises(TypeError, match="put_along_axis"):
        jnp.put_along_axis(A(X23), [[1], [2]], 2, axis=1, inplace=False)


# ---------------------------------------------------------------- place


def _np_place(a, mask, vals):
    out = np.array(a, copy=True)
    np.place(out, mask, vals)
    return out


@pytest.mark.parametrize("mask,vals", [
    (X23 % 2 == 0, [7, 8]), (X23 % 2 == 0, [7, 8, 9, 10]), (X23 % 2, [7, 8]),
    ((X23 % 2 == 0).ravel(), [7, 8]), (X23 % 2 == 0, [[1, 2], [3, 4]]),
    (np.zeros((2, 3), bool), [1]), ((X23 % 2) * 0.5, [7]),
])
def test_place_matches_numpy(mask, vals):
    same(jnp.place(A(X23), A(mask), A(vals), inplace=False), _np_place(X23, mask, vals))


def test_place_traces_and_keeps_dtype():
    same(jnp.place(A(X23), A(X23 > 2), 2.5, inplace=False), [[0, 1, 2], [2, 2, 2]], np.int32)
    same(jnp.place(jnp.asarray(2.0), A(True), 1, inplace=False), 1.0, np.float32, weak=True)
    f = ember.jit(lambda x, m, v: jnp.place(x, m, v, inplace=False))
    same(f(A(X23), A(X23 % 2 == 0), A([7, 8])), _np_place(X23, X23 % 2 == 0, [7, 8]))
    m = np.array([[True, False, True], [False, True, True]])
    out = ember.vmap(lambda x, m: jnp.place(x, m, A([9, 8]), inplace=False))(A(X23), A(m))
    same(out, [_np_place(X23[k], m[k], [9, 8]) for k in range(2)])
    g = ember.grad(lambda a, v: jnp.sum(jnp.place(a, A([True, False, True]), v, inplace=False)
                                        * jnp.arange(3.0)), argnums=(0, 1))(jnp.ones(3),
                                                                            A([2.0, 5.0]))
    same(g[0], [0, 1, 0])
    same(g[1], [0, 2])


def test_place_errors():
    with pytest.raises(ValueError, match="place.*inplace=False"):
        jnp.place(A(X23), A(X23 > 1), 9)
    with pytest.raises(ValueError, match="place.*same size"):
        jnp.place(A(X23), A([True, False]), A([7]), inplace=False)
    with pytest.raises(ValueError, match="place.*empty"):
        jnp.place(A(X23), A(X23 > 1), A([], np.int32), inplace=False)
    same(jnp.place(jnp.zeros((0,)), jnp.zeros((0,), bool), 1, inplace=False), np.zeros(0))
    with pytest.raises(TypeError, match="place"):
        jnp.place(A(X23), [True] * 6, 1, inplace=False)


# ---------------------------------------------------------------- mask_indices


@pytest.mark.parametrize("n,func,k", [(3, "triu", 0), (3, "triu", 1), (4, "tril", -1),
                                      (0, "triu", 0)])
def test_mask_indices_matches_numpy(n, func, k):
    got = jnp.mask_indices(n, getattr(jnp, func), k)
    expected = np.mask_indices(n, getattr(np, func), k)
    assert len(got) == 2
    for g, e in zip(got, expected):
        same(g, e, np.int32)


def test_mask_indices_size_and_jit():
    i, j = jnp.mask_indices(3, jnp.tril, size=8)
    same(i, [0, 1, 1, 2, 2, 2, 0, 0])
    same(j, [0, 0, 1, 0, 1, 2, 0, 0])
    i, j = ember.jit(lambda: jnp.mask_indices(3, jnp.triu, 1, size=2))()
    same(i, [0, 0])
    same(j, [1, 2])
    with pytest.raises(errors.ConcretizationTypeError):
        ember.jit(lambda: jnp.mask_indices(3, jnp.triu))()
    with pytest.raises(TypeError, match="mask_indices.*n"):
        jnp.mask_indices(3.0, jnp.triu)
    with pytest.raises(TypeError, match="mask_indices.*callable"):
        jnp.mask_indices(3, 1)


# ---------------------------------------------------------------- piecewise


XS = np.arange(-3.0, 3.0, dtype=np.float32)


def _neg(x):
    return -x


def _double(x):
    return x * 2


@pytest.mark.parametrize("conds,funcs", [
    (lambda x: [x < 0], [_neg, _double]),
    (lambda x: [x < 0, x > 1], [_neg, 7.0]),
    (lambda x: [x < 0, x > 1], [1, 2, 3]),
    (lambda x: [x < 1, x < 0], [1.0, 2.0, 3.0]),  # overlapping: the last true one wins
    (lambda x: [x.astype(int)], [1.0, 2.0]),  # integer conditions: nonzero
    (lambda x: [[True, False, True, False, True, False]], [1.0, 2.0]),
])
def test_piecewise_matches_numpy(conds, funcs):
    same(jnp.piecewise(A(XS), conds(A(XS)), funcs), np.piecewise(XS, conds(XS), funcs),
         np.float32, weak=False)


def test_piecewise_arguments_dtypes_and_broadcasting():
    same(jnp.piecewise(A(XS), [A(XS) < 0], [lambda x, a: x + a, lambda x, a: x - a], 10.0),
         np.where(XS < 0, XS + 10, XS - 10))
    same(jnp.piecewise(A(XS), [A(XS) < 0], [lambda x, a: x + a, lambda x, a: x - a], a=10.0),
         np.where(XS < 0, XS + 10, XS - 10))
    xi = np.arange(-3, 3, dtype=np.int32)
    same(jnp.piecewise(A(xi), [A(xi) < 0], [lambda x: x * 1.5, lambda x: x / 2]),
         [-4, -3, -1, 0, 0, 1], np.int32)  # results are converted to x's dtype
    same(jnp.piecewise(2.0, [True], [lambda x: x * 3, 0.0]), 6.0, np.float32, weak=False)
    same(jnp.piecewise(jnp.ones((2, 3)), [A([True, False, True])], [lambda x: x * 3, 0.0]),
         [[3, 0, 3], [3, 0, 3]])
    same(jnp.piecewise(A(XS), [jnp.ones((2, 6), bool)], [1.0, 0.0]), np.ones((2, 6)))
    # The functions see scalars, as in JAX (they are vectorized).
    same(jnp.piecewise(A(XS), [A(XS) < 0], [lambda x: jnp.zeros_like(x) + x.ndim, 0.0]),
         np.zeros(6))
    same(jnp.piecewise(jnp.zeros((0,)), [jnp.zeros((0,), bool)], [1.0, 0.0]), np.zeros(0))


def test_piecewise_jit_vmap_grad():
    def f(x):
        return jnp.piecewise(x, [x < 0, x > 1], [lambda v: v ** 2, 5.0, jnp.sin])
    expected = np.piecewise(XS, [XS < 0, XS > 1], [lambda v: v ** 2, 5.0, np.sin])
    close(ember.jit(f)(A(XS)), expected)
    close(ember.vmap(f)(A(XS)), expected)
    g = ember.grad(lambda x: jnp.sum(f(x)))(A(XS))
    close(g, np.where(XS < 0, 2 * XS, np.where(XS > 1, 0.0, np.cos(XS))))


def test_piecewise_errors():
    with pytest.raises(ValueError, match="piecewise.*2 or 3 functions"):
        jnp.piecewise(A(XS), [A(XS) < 1, A(XS) < 2], [1.0])
    with pytest.raises(ValueError, match="piecewise"):  # an array is a list of 6 conditions
        jnp.piecewise(A(XS), A(XS) < 0, [1.0, 2.0])
    with pytest.raises(ValueError, match="piecewise.*condlist"):
        jnp.piecewise(A(XS), [], [lambda x: x + 1])
    with pytest.raises(TypeError, match="piecewise"):
        jnp.piecewise([1.0, 2.0], [A(XS) < 0], [1.0])
    with pytest.raises(TypeError, match="piecewise.*shape"):
        jnp.piecewise(A(XS), [A(XS) < 0], [lambda x: jnp.array([1.0, 2.0]), 0.0])


# ---------------------------------------------------------------- vectorize


X2 = np.arange(6.0, dtype=np.float32).reshape(2, 3)


def test_vectorize_broadcasts_scalars_like_numpy():
    add = jnp.vectorize(lambda a, b: a + b)
    same(add(A(X2), A([1.0, 2.0, 3.0])), X2 + [1, 2, 3])
    same(add(1, 2), 3, np.int32, weak=True)
    same(jnp.vectorize(lambda a, b: a * b)(jnp.ones((3, 1)), jnp.arange(4.0)),
         np.ones((3, 1)) * np.arange(4.0))
    same(jnp.vectorize(lambda a: a * 2)([1, 2, 3]), [2, 4, 6], np.int32)
    same(jnp.vectorize(lambda a: a > 1)(A(X2)), X2 > 1, np.bool_)
    assert jnp.vectorize(lambda a: a * 2)(jnp.ones((0, 3))).shape == (0, 3)
    # The function sees 0-d arrays.
    same(jnp.vectorize(lambda a: jnp.zeros(()) + a.ndim)(A(X2)), np.zeros((2, 3)))
    got = jnp.vectorize(lambda a, b: (a, a * b))(jnp.ones((1, 3)), jnp.full((1, 1), 2.0))
    assert isinstance(got, tuple)
    same(got[1], np.full((1, 3), 2.0))


def test_vectorize_signatures():
    mm = jnp.vectorize(jnp.matmul, signature="(n,m),(m,k)->(n,k)")
    a = np.arange(30.0, dtype=np.float32).reshape(5, 2, 3)
    b = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    close(mm(A(a), A(b)), a @ b)
    total = jnp.vectorize(lambda v: v.sum(), signature="(n)->()")
    same(total(A(X2)), X2.sum(-1))
    same(total(A([1.0, 2.0])), 3.0)
    stats = jnp.vectorize(lambda v: (v.sum(), v.max()), signature="(n)->(),()")
    s, m = stats(A(X2))
    same(s, X2.sum(-1))
    same(m, X2.max(-1))
    pair = jnp.vectorize(lambda v: jnp.stack([v.sum(), v.max()]), signature="(n)->(k)")
    same(pair(A(X2)), np.stack([X2.sum(-1), X2.max(-1)], -1))
    scaled = jnp.vectorize(lambda s, v: s * v.sum(), signature="(),(n)->()")
    same(scaled(jnp.full((4, 1), 2.0), jnp.ones((4, 3))), np.full((4, 4), 6.0))
    same(jnp.vectorize(lambda v: v.sum(), signature="(n)->()")(jnp.ones((1, 2, 1, 3))),
         np.full((1, 2, 1), 3.0))


def test_vectorize_excluded_and_none():
    power = jnp.vectorize(lambda a, p: a ** p, excluded={1})
    same(power(A(X2), 2), X2 ** 2)
    power_kw = jnp.vectorize(lambda a, p=1: a ** p, excluded={"p"})
    same(power_kw(A(X2), p=2), X2 ** 2)
    both = jnp.vectorize(lambda a, s, p=1: a ** p + s[1], excluded={1, "p"})
    same(both(A(X2), [0.0, 5.0], p=2), X2 ** 2 + 5)
    reduce = jnp.vectorize(lambda f, a: f(a), excluded={0}, signature="(n)->()")
    same(reduce(jnp.max, A(X2)), X2.max(-1))
    same(jnp.vectorize(lambda a, b: a if b is None else a + b)(A(X2), None), X2)
    # JAX skips None only past position 0 (an accident of any({0})); ember at any position.
    same(jnp.vectorize(lambda b, a: a if b is None else a + b)(None, A(X2)), X2)
    same(jnp.vectorize(lambda a, b: a.sum(), signature="(n),()->()")(A(X2), None), [3, 12])


def test_vectorize_wraps_and_traces():
    def my_fn(a):
        """My doc."""
        return jnp.sin(a)
    v = jnp.vectorize(my_fn)
    assert v.__name__ == "my_fn" and v.__doc__ == "My doc."
    close(ember.grad(lambda x: jnp.sum(v(x)))(A(X2)), np.cos(X2))
    dot = jnp.vectorize(jnp.dot, signature="(n),(n)->()")
    close(ember.jit(dot)(A(X2), jnp.arange(3.0)), X2 @ np.arange(3.0))
    close(ember.vmap(dot)(jnp.ones((4, 2, 3)), jnp.ones((4, 3))), np.full((4, 2), 3.0))
    close(ember.grad(lambda x: jnp.sum(dot(x, x)))(A(X2)), 2 * X2)


def test_vectorize_rank_promotion_config():
    f = jnp.vectorize(lambda a, b: a + b)
    previous = ember.config.jax_numpy_rank_promotion
    try:
        ember.config.update("jax_numpy_rank_promotion", "raise")
        with pytest.raises(ValueError, match="rank promotion"):
            f(jnp.ones((2, 3)), jnp.ones(3))
        same(f(jnp.ones(3), 1.0), np.full(3, 2.0))  # scalars never count
        ember.config.update("jax_numpy_rank_promotion", "warn")
        with pytest.warns(UserWarning, match="rank promotion"):
            f(jnp.ones((2, 3)), jnp.ones(3))
    finally:
        ember.config.update("jax_numpy_rank_promotion", previous)


def test_vectorize_errors():
    x = A(X2)
    with pytest.raises(ValueError, match="not a valid gufunc signature"):
        jnp.vectorize(lambda a: a, signature="(n)->")(x)
    with pytest.raises(ValueError, match="not a valid gufunc signature"):
        jnp.vectorize(lambda a: a, signature="n->n")(x)
    with pytest.raises(ValueError, match="inconsistent size for core dimension 'm'"):
        jnp.vectorize(jnp.matmul, signature="(n,m),(m,k)->(n,k)")(jnp.ones((5, 2, 3)),
                                                                  jnp.ones((2, 4)))
    with pytest.raises(ValueError, match="does not match core dimensions"):
        jnp.vectorize(lambda a: a, signature="(n)->()")(x)
    with pytest.raises(TypeError, match="output must be a tuple"):
        jnp.vectorize(lambda a: a.sum(), signature="(n)->(),()")(x)
    with pytest.raises(TypeError, match="wrong number of output arguments"):
        jnp.vectorize(lambda a: (a.sum(),) * 3, signature="(n)->(),()")(x)
    with pytest.raises(ValueError, match="not have enough dimensions"):
        jnp.vectorize(lambda a: a.sum(), signature="(n,m)->()")(jnp.ones(3))
    with pytest.raises(TypeError, match="wrong number of positional arguments"):
        jnp.vectorize(lambda a, b: a.sum(), signature="(n)->()")(x, x)
    with pytest.raises(ValueError, match="None"):
        jnp.vectorize(lambda a, b: a.sum(), signature="(n),(n)->()")(x, None)
    with pytest.raises(ValueError, match="broadcasting"):
        jnp.vectorize(lambda a, b: a * b)(jnp.ones(3), jnp.arange(4.0))
    with pytest.raises(TypeError, match="vectorize.*exclude"):
        jnp.vectorize(lambda a: a, excluded={1.5})
    with pytest.raises(ValueError, match="vectorize.*negative"):
        jnp.vectorize(lambda a: a, excluded={-1})
    with pytest.raises(TypeError, match="vectorize.*callable"):
        jnp.vectorize(3)
    # Keyword arguments must be excluded (JAX silently drops them).
    with pytest.raises(TypeError, match="vectorize.*keyword"):
        jnp.vectorize(lambda a, b: a + b)(x, b=jnp.arange(3.0))
    with pytest.raises(TypeError, match="vectorize"):
        jnp.vectorize(lambda: jnp.ones(3))()


# ---------------------------------------------------------------- apply_along_axis / over_axes


X3 = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)


@pytest.mark.parametrize("ours,theirs,axis", [
    (jnp.sum, np.sum, 1), (jnp.sum, np.sum, -1), (jnp.sum, np.sum, 0),
    (jnp.cumsum, np.cumsum, 1), (jnp.sort, np.sort, 2),
    (lambda v: v[:2] * 2, lambda v: v[:2] * 2, 1),
    (lambda v: jnp.outer(v, v), lambda v: np.outer(v, v), 0),
    (lambda v: jnp.outer(v, v[:2]), lambda v: np.outer(v, v[:2]), 1),
])
def test_apply_along_axis_matches_numpy(ours, theirs, axis):
    got = jnp.apply_along_axis(ours, axis, A(X3))
    expected = np.apply_along_axis(theirs, axis, X3)
    assert got.shape == expected.shape
    close(got, expected)


def test_apply_along_axis_arguments_and_outputs():
    got = jnp.apply_along_axis(lambda v, a, b=0: v.sum() * a + b, 2, A(X3), 2.0, b=1.0)
    same(got, X3.sum(-1) * 2 + 1)
    s, m = jnp.apply_along_axis(lambda v: (v.sum(), v.max()), 1, A(X3))
    same(s, X3.sum(1))
    same(m, X3.max(1))
    same(jnp.apply_along_axis(jnp.cumsum, 0, jnp.arange(4)), [0, 1, 3, 6], np.int32)
    same(jnp.apply_along_axis(lambda v: jnp.zeros(()) + v.shape[0], 0, A(X3)),
         np.full((3, 4), 2.0))
    close(ember.jit(lambda x: jnp.apply_along_axis(jnp.sort, 1, x))(A(X3[:, ::-1])),
          np.sort(X3[:, ::-1], 1))
    close(ember.grad(lambda x: jnp.sum(jnp.apply_along_axis(lambda v: jnp.sum(v ** 2), 1, x)))(
        A(X3)), 2 * X3)
    with pytest.raises(ValueError, match="apply_along_axis"):
        jnp.apply_along_axis(jnp.sum, 3, A(X3))
    with pytest.raises(ValueError, match="apply_along_axis"):
        jnp.apply_along_axis(jnp.sum, 0, jnp.asarray(3.0))
    with pytest.raises(TypeError, match="apply_along_axis"):
        jnp.apply_along_axis(jnp.sum, 0, [1, 2])


@pytest.mark.parametrize("axes", [[0, 2], [-1], [-2], (0, 1), [], [1, 1]])
def test_apply_over_axes_matches_numpy(axes):
    same(jnp.apply_over_axes(jnp.sum, A(X3), axes), np.apply_over_axes(np.sum, X3, axes))
    keep = jnp.apply_over_axes(lambda a, ax: jnp.max(a, ax, keepdims=True), A(X3), axes)
    same(keep, np.apply_over_axes(np.max, X3, axes))


def test_apply_over_axes_errors_and_jit():
    same(ember.jit(lambda x: jnp.apply_over_axes(jnp.max, x, [0, 1]))(A(X3)),
         X3.max((0, 1), keepdims=True))
    with pytest.raises(ValueError, match="apply_over_axes"):
        jnp.apply_over_axes(lambda a, ax: a.sum(), A(X3), [0])
    with pytest.raises(TypeError, match="apply_over_axes.*axes"):
        jnp.apply_over_axes(jnp.sum, A(X3), 1)
    with pytest.raises(TypeError, match="apply_over_axes"):
        jnp.apply_over_axes(jnp.sum, [[1, 2]], [0])


# ---------------------------------------------------------------- fromfunction


@pytest.mark.parametrize("func,shape,dtype", [
    (lambda i, j: i + j, (2, 3), float), (lambda i, j: i * 10 + j, (2, 3), int),
    (lambda i: i ** 2, (4,), float), (lambda i, j, k: 100 * i + 10 * j + k, (2, 3, 4), int),
    (lambda i, j: i - j, [2, 2], float), (lambda i, j: i + j, (0, 3), float),
    (lambda i, j: i + j, (2, 3), np.float16),
])
def test_fromfunction_matches_numpy(func, shape, dtype):
    got = jnp.fromfunction(func, shape, dtype=dtype)
    expected = np.fromfunction(func, shape, dtype=dtype)
    close(got, expected)
    assert got.shape == expected.shape
    assert got.dtype == {float: np.float32, int: np.int32}.get(dtype, dtype)


def test_fromfunction_scalars_kwargs_and_outputs():
    same(jnp.fromfunction(lambda i: i ** 2, 4), [0.0, 1.0, 4.0, 9.0], np.float32)
    same(jnp.fromfunction(lambda: jnp.ones(()), ()), 1.0)
    same(jnp.fromfunction(lambda i, j: jnp.zeros(()) + i.ndim, (2, 3)), np.zeros((2, 3)))
    same(jnp.fromfunction(lambda i, j: jnp.stack([i, j]), (2, 3)),
         np.stack(np.indices((2, 3)), -1).astype(np.float32))
    i, j = jnp.fromfunction(lambda i, j: (i, j), (2, 3))
    same(i, np.indices((2, 3))[0])
    same(jnp.fromfunction(lambda i, j: 1.0, (2, 3)), np.ones((2, 3)), np.float32, weak=True)
    # Keyword arguments are mapped along axis 0, as in JAX.
    same(jnp.fromfunction(lambda i, j, a: i + j + a, (2, 2), a=jnp.arange(4.0).reshape(2, 2)),
         [[0, 2], [3, 5]])
    same(ember.jit(lambda: jnp.fromfunction(lambda i, j: i * j, (3, 3)))(),
         np.fromfunction(lambda i, j: i * j, (3, 3)))
    same(jnp.fromfunction(lambda i: i, (-1,)), np.zeros(0))  # as JAX: empty


def test_fromfunction_errors():
    with pytest.raises(TypeError, match="fromfunction.*shape"):
        jnp.fromfunction(lambda i: i, (2.0,))
    with pytest.raises(TypeError, match="fromfunction.*bool"):
        jnp.fromfunction(lambda i, j: i + j, (2, 3), dtype=bool)
    with pytest.raises(TypeError, match="fromfunction.*callable"):
        jnp.fromfunction(3, (2,))
    with pytest.raises(ValueError, match="vmap"):
        jnp.fromfunction(lambda i, j, a=0: i + j + a, (2, 2), a=10.0)


# ---------------------------------------------------------------- set operations

SA = np.array([3, 1, 4, 1, 5, 9, 2, 6], np.int32)
SB = np.array([[5, 3], [5, 8]], np.int32)
NAN = np.array([np.nan, 1.0, np.nan, -0.0], np.float32)
NAN2 = np.array([np.nan, 2.0, 0.0], np.float32)


@pytest.mark.parametrize("name", ["intersect1d", "setdiff1d", "setxor1d", "union1d"])
@pytest.mark.parametrize("a,b", [(SA, SB), (NAN, NAN2), (SA, SA[:0]), (SA[:0], SB),
                                 (SA[:0], SA[:0]), (np.array([True, False]), np.array([True]))])
def test_setops_without_size_match_numpy(name, a, b):
    # NumPy also merges NaNs within an input (np.unique's equal_nan) and never pairs them.
    got = getattr(jnp, name)(A(a), A(b))
    same(got, getattr(np, name)(a, b), dtype=a.dtype, weak=False)


def test_setops_assume_unique_and_return_indices():
    a, b = np.array([3, 1, 4, 5, 9], np.int32), np.array([9, 5, 8, 0], np.int32)
    same(jnp.intersect1d(A(a), A(b), assume_unique=True), np.intersect1d(a, b, True))
    same(jnp.setdiff1d(A(a), A(b), assume_unique=True), np.setdiff1d(a, b, True))
    same(jnp.setxor1d(A(a), A(b), assume_unique=True), np.setxor1d(a, b, True))
    for x, y in [(SA, SB), (a, b), (np.array([2, 2, 1, 1]), np.array([1, 1, 2])),
                 (np.array([[4, 1], [3, 1]]), np.array([[3], [1]]))]:
        got = jnp.intersect1d(A(x), A(y), return_indices=True)
        for g, e in zip(got, np.intersect1d(x, y, return_indices=True)):
            same(g, e, np.int32)
    got = jnp.intersect1d(A(a), A(b), assume_unique=True, return_indices=True)
    for g, e in zip(got, np.intersect1d(a, b, assume_unique=True, return_indices=True)):
        same(g, e)


def _padded(values, size, pad):
    values = np.asarray(values)[:size]
    return np.concatenate([values, np.full(size - len(values), pad, values.dtype)])


@pytest.mark.parametrize("size", [2, 6, 10])
def test_setops_with_size_pad_and_truncate(size):
    inter = np.intersect1d(SA, SB)
    same(jnp.intersect1d(A(SA), A(SB), size=size), _padded(inter, size, inter.min()))
    same(jnp.setdiff1d(A(SA), A(SB), size=size), _padded(np.setdiff1d(SA, SB), size, 0))
    xor = np.setxor1d(SA, SB)
    same(jnp.setxor1d(A(SA), A(SB), size=size), _padded(xor, size, xor.min()))
    union = np.union1d(SA, SB)
    same(jnp.union1d(A(SA), A(SB), size=size), _padded(union, size, union.min()))
    for fn, ref in [(jnp.intersect1d, inter), (jnp.setdiff1d, np.setdiff1d(SA, SB)),
                    (jnp.setxor1d, xor), (jnp.union1d, union)]:
        same(fn(A(SA), A(SB), size=size, fill_value=-1), _padded(ref, size, -1))


def test_setops_with_size_under_jit_and_vmap():
    for name in ("intersect1d", "setdiff1d", "setxor1d", "union1d"):
        fn = getattr(jnp, name)
        eager = fn(A(SA), A(SB), size=9)
        same(ember.jit(lambda a, b, fn=fn: fn(a, b, size=9))(A(SA), A(SB)), eager)
        a2 = SA.reshape(2, 4)
        out = ember.vmap(lambda a, b, fn=fn: fn(a, b, size=5))(A(a2), A(SB))
        same(out, [fn(A(a2[k]), A(SB[k]), size=5) for k in range(2)])
        with pytest.raises(errors.ConcretizationTypeError, match=name):
            ember.jit(fn)(A(SA), A(SB))
        with pytest.raises(errors.ConcretizationTypeError):
            ember.vmap(fn)(A(a2), A(SB))
    vals, i1, i2 = ember.jit(lambda a, b: jnp.intersect1d(a, b, return_indices=True, size=4))(
        A(SA), A(SB))
    same(vals, [3, 5, 3, 3])
    same(i1, [0, 4, 8, 8])  # padding: the lengths of the inputs
    same(i2, [1, 0, 4, 4])


def test_setops_with_size_nan_and_dtypes():
    # NaNs are merged within each input and never equal another NaN.
    same(jnp.union1d(A(NAN), A(NAN2), size=5), [-0.0, 1.0, 2.0, np.nan, -0.0])
    same(jnp.setxor1d(A(NAN), A(NAN2), size=5), [1.0, 2.0, np.nan, np.nan, np.nan])
    same(jnp.intersect1d(A(NAN), A(NAN2), size=3), [0.0, 0.0, 0.0])
    same(jnp.setdiff1d(A(NAN), A(NAN2), size=3), [1.0, np.nan, 0.0])
    # fill_value promotes like jnp.where in intersect1d/setxor1d, is cast in the others.
    same(jnp.intersect1d(A(SA), A(SB), size=3, fill_value=2.5), [3.0, 5.0, 2.5], np.float32,
         weak=True)
    same(jnp.setdiff1d(A(SA), A(SB), size=6, fill_value=2.5), [1, 2, 4, 6, 9, 2], np.int32)
    same(jnp.union1d(A(SA), A(SB), size=9, fill_value=2.5), [1, 2, 3, 4, 5, 6, 8, 9, 2])
    same(jnp.intersect1d(A([1, 2], np.int8), A([2.5, 1.0]), size=3), [1.0, 1.0, 1.0],
         np.float32)
    same(jnp.setdiff1d(A([1, 2], np.int8), A([2.5, 1.0])), [2], np.int8)  # ar1's dtype
    # Weak types: eager results keep them; the sized intersect1d/setxor1d results are strong.
    w = jnp.asarray(1.0)
    assert jnp.union1d(w, w).weak_type and jnp.intersect1d(w, w).weak_type
    assert jnp.setdiff1d(w, jnp.asarray(2.0), size=2).weak_type
    assert not jnp.intersect1d(w, w, size=2).weak_type
    assert not jnp.setxor1d(w, w, size=2).weak_type


def test_setops_empty_inputs_with_size():
    e = A([], np.int32)
    same(jnp.intersect1d(e, A(SB), size=3), [0, 0, 0])
    same(jnp.setdiff1d(e, A(SB), size=3), [0, 0, 0])
    same(jnp.setdiff1d(A([1, 2]), e, size=3), [1, 2, 0])
    same(jnp.setxor1d(e, A(SB), size=3), [3, 5, 8])
    same(jnp.union1d(e, A(SB), size=4), [3, 5, 8, 3])
    same(jnp.union1d(e, e, size=2, fill_value=7), [7, 7])
    with pytest.raises(ValueError, match="union1d.*fill_value"):
        jnp.union1d(e, e, size=2)
    # size=0 gives empty results (JAX raises an accidental error for some of these).
    for fn in (jnp.intersect1d, jnp.setdiff1d, jnp.setxor1d, jnp.union1d):
        assert fn(A(SA), A(SB), size=0).shape == (0,)


def test_setops_with_size_differentiate_like_a_gather():
    # Each result takes the derivative of its first occurrence in the sorted inputs.
    x, y = A([3.0, 1.0, 4.0, 1.0, 5.0]), A([5.0, 3.0, 7.0])
    w = jnp.arange(1.0, 5.0)
    gx, gy = ember.grad(lambda x, y: jnp.sum(jnp.union1d(x, y, size=4) * w),
                        argnums=(0, 1))(x, y)
    same(gx, [2, 1, 3, 0, 4])
    same(gy, [0, 0, 0])
    gx, gy = ember.grad(lambda x, y: jnp.sum(jnp.intersect1d(x, y, size=4) * w),
                        argnums=(0, 1))(x, y)
    same(gx, [1 + 3 + 4, 0, 0, 0, 2])  # [3, 5, 3, 3]: padded with the smallest result
    same(gy, [0, 0, 0])


def test_setops_errors():
    for fn in (jnp.intersect1d, jnp.setdiff1d, jnp.setxor1d, jnp.union1d):
        name = fn.__name__
        with pytest.raises(TypeError, match=name):
            fn([1], A(SA))
        with pytest.raises(TypeError, match=f"{name}.*size"):
            fn(A(SA), A(SB), size=3.0)
        with pytest.raises(TypeError, match=f"{name}.*size"):
            fn(A(SA), A(SB), size=-1)
    with pytest.raises(errors.NonConcreteBooleanIndexError):
        ember.jit(lambda a, b: jnp.intersect1d(a, b, assume_unique=True))(A(SA), A(SB))
    with pytest.raises(errors.ConcretizationTypeError):
        ember.jit(lambda a, b: jnp.intersect1d(a, b, size=2, assume_unique=a.sum() > 0))(
            A(SA), A(SB))


# ---------------------------------------------------------------- comparison with JAX


def _probes(n, top):
    """Calls run on ember (n=ember.numpy, top=ember) and on JAX (jax.numpy, jax)."""
    a34, a23 = n.arange(12).reshape(3, 4), n.arange(6).reshape(2, 3)
    xs = n.arange(-3.0, 3.0)
    sa, sb = n.array([3, 1, 4, 1, 5, 9, 2, 6]), n.array([[5, 3], [5, 8]])
    return {
        "r_ints": lambda: n.r_[1, 2, 3],
        "r_slices": lambda: n.r_[0:5:2, 7, 0:1:3j],
        "r_int8": lambda: n.r_[n.array([1, 2], n.int8), 3],
        "r_directive": lambda: n.r_["-1,3,-2", [1, 2, 3], [4, 5, 6]],
        "r_c": lambda: n.r_["c", [1, 2, 3], [4, 5, 6]],
        "r_bad_directive": lambda: n.r_["a,b", [1, 2, 3]],
        "r_mid_string": lambda: n.r_[[1, 2], "r"],
        "c_scalars": lambda: n.c_[1, 2],
        "c_slices": lambda: n.c_[0:3, [4, 5, 6]],
        "c_mismatch": lambda: n.c_[n.array([1, 2]), 3.5],
        "mgrid": lambda: n.mgrid[0:2, 0:1:3j],
        "mgrid_empty": lambda: n.mgrid[()],
        "mgrid_open_stop": lambda: n.mgrid[3:],
        "r_float_zero_start": lambda: n.r_[0.0:2, 1.0:2],
        "ogrid": lambda: tuple(n.ogrid[0:2, 0:3]),
        "mgrid_traced": lambda: top.jit(lambda k: n.mgrid[0:k])(3),
        "block": lambda: n.block([[n.ones((2, 2)), n.zeros((2, 1))], [n.ones((1, 3))]]),
        "block_scalars": lambda: n.block([1, 2.0]),
        "block_tuple": lambda: n.block((1, 2)),
        "block_depths": lambda: n.block([[1], 2]),
        "block_widths": lambda: n.block([[[1, 2], [3]]]),
        "delete_int": lambda: n.delete(a34, -1, axis=1),
        "delete_oob": lambda: n.delete(a34, 5, axis=1),
        "delete_array": lambda: n.delete(a34, n.array([0, 2, 2, -1]), axis=1),
        "delete_array_oob": lambda: n.delete(a34, n.array([0, 7]), axis=1),
        "delete_bool_bad": lambda: n.delete(a34, n.array([True, False]), axis=1),
        "delete_float": lambda: n.delete(a34, n.array([1.0]), axis=1),
        "delete_unique_oob": lambda: n.delete(a34, n.array([-1, -9]), axis=1,
                                              assume_unique_indices=True),
        "delete_unique_dup": lambda: n.delete(a34, n.array([1, 1]), axis=1,
                                              assume_unique_indices=True),
        "delete_weak": lambda: n.delete(n.array(3.0), 0),
        "delete_traced": lambda: top.jit(lambda a, i: n.delete(a, i))(a34, n.array([1])),
        "insert_scalar_idx": lambda: n.insert(a23, 1, n.array([[7, 8], [1, 1]]), axis=1),
        "insert_unsorted": lambda: n.insert(n.arange(5), n.array([3, 0, 5, -1]),
                                            n.array([10, 11, 12, 13])),
        "insert_oob": lambda: n.insert(n.arange(5), n.array([9, -9]), n.array([10, 11])),
        "insert_uint8": lambda: n.insert(n.arange(3, dtype=n.uint8), 1, -1),
        "insert_weak": lambda: n.insert(n.array(5.0), 0, 1),
        "insert_float_idx": lambda: n.insert(n.arange(5), n.array([1.0]), 1),
        "insert_bad_values": lambda: n.insert(n.arange(3), 1, n.array([[1, 2]])),
        "insert_jit": lambda: top.jit(lambda a, i, v: n.insert(a, i, v))(
            n.arange(5), n.array([1, 3]), n.array([8, 9])),
        "fill_diagonal": lambda: n.fill_diagonal(n.zeros((3, 4), n.int32), n.array([1, 2]),
                                                 inplace=False),
        "fill_diagonal_float_val": lambda: n.fill_diagonal(n.zeros((2, 2), n.int32), 2.7,
                                                           inplace=False),
        "fill_diagonal_inplace": lambda: n.fill_diagonal(n.zeros((2, 2)), 1),
        "fill_diagonal_3d_bad": lambda: n.fill_diagonal(n.zeros((2, 2, 3)), 1, inplace=False),
        "put_default": lambda: n.put(a23, n.array([6, -7, 100]), n.array([7, 8, 9]),
                                     inplace=False),
        "put_clip": lambda: n.put(a23, n.array([6, -7, -1]), n.array([7, 8, 9]), mode="clip",
                                  inplace=False),
        "put_wrap": lambda: n.put(a23, n.array([6, -7, 100]), n.array([7, 8, 9]), mode="wrap",
                                  inplace=False),
        "put_inplace": lambda: n.put(a23, 1, 9),
        "put_raise": lambda: n.put(a23, 1, 1, mode="raise", inplace=False),
        "put_float_idx": lambda: n.put(a23, 1.0, 2, inplace=False),
        "put_along_axis_clip": lambda: n.put_along_axis(a23, n.array([[3], [-4]]),
                                                        n.array([[7], [8]]), axis=1,
                                                        inplace=False, mode="clip"),
        "put_along_axis_drop": lambda: n.put_along_axis(a23, n.array([[3], [-4]]),
                                                        n.array([[7], [8]]), axis=1,
                                                        inplace=False),
        "put_along_axis_none": lambda: n.put_along_axis(a23, n.array([0, 5]),
                                                        n.array([7, 8]), axis=None,
                                                        inplace=False),
        "put_along_axis_ndim": lambda: n.put_along_axis(a23, n.array([1]), 1, axis=1,
                                                        inplace=False),
        "put_along_axis_inplace": lambda: n.put_along_axis(a23, n.array([[1]]), 1, axis=1),
        "place": lambda: n.place(a23, a23 % 2 == 0, n.array([7, 8]), inplace=False),
        "place_weak": lambda: n.place(n.array(2.0), n.array(True), 1, inplace=False),
        "place_bad_size": lambda: n.place(a23, n.array([True]), n.array([7]), inplace=False),
        "place_inplace": lambda: n.place(a23, a23 > 1, 9),
        "mask_indices": lambda: n.mask_indices(3, n.tril, size=8),
        "mask_indices_traced": lambda: top.jit(lambda: n.mask_indices(3, n.triu))(),
        "piecewise": lambda: n.piecewise(xs, [xs < 0, xs > 1], [lambda x: -x, 7.0]),
        "piecewise_int": lambda: n.piecewise(n.arange(-3, 3), [n.arange(-3, 3) < 0],
                                             [lambda x: x * 1.5, lambda x: x / 2]),
        "piecewise_weak": lambda: n.piecewise(n.array(2.0), [n.array(True)],
                                              [lambda x: x * 3, 0.0]),
        "piecewise_grad": lambda: top.grad(lambda x: n.piecewise(
            x, [x < 0], [lambda v: v ** 2, n.sin]).sum())(xs),
        "piecewise_bad_count": lambda: n.piecewise(xs, [xs < 1], [1.0, 2.0, 3.0]),
        "vectorize_scalars": lambda: n.vectorize(lambda a, b: a * b)(1.5, n.arange(3)),
        "vectorize_weak": lambda: n.vectorize(lambda a: a * 2)(n.asarray(3.0)),
        "vectorize_matmul": lambda: n.vectorize(n.matmul, signature="(n,m),(m,k)->(n,k)")(
            n.ones((5, 2, 3)), n.arange(12.0).reshape(3, 4)),
        "vectorize_two_outputs": lambda: n.vectorize(
            lambda v: (v.sum(), v.max()), signature="(n)->(),()")(xs.reshape(2, 3)),
        "vectorize_expand": lambda: n.vectorize(lambda a, b: a * b)(n.ones((1, 3)),
                                                                    n.ones((1, 1))),
        "vectorize_bad_signature": lambda: n.vectorize(lambda a: a, signature="(n)->")(xs),
        "vectorize_core_mismatch": lambda: n.vectorize(
            lambda a, b: a.sum(), signature="(n),(n)->()")(n.ones(3), n.ones(4)),
        "vectorize_output_shape": lambda: n.vectorize(lambda a: a, signature="(n)->()")(xs),
        "vectorize_broadcast": lambda: n.vectorize(lambda a, b: a * b)(n.ones(3), n.ones(4)),
        "apply_along_axis": lambda: n.apply_along_axis(lambda v: n.outer(v, v), 0,
                                                       n.arange(6.0).reshape(2, 3)),
        "apply_along_axis_np": lambda: n.apply_along_axis(n.sum, 0, np.arange(3)),
        "apply_along_axis_weak": lambda: n.apply_along_axis(lambda v: v * 2, 0,
                                                            n.asarray(2.0)[None]),
        "apply_over_axes": lambda: n.apply_over_axes(n.sum, n.arange(24.0).reshape(2, 3, 4),
                                                     [0, 2]),
        "apply_over_axes_bad": lambda: n.apply_over_axes(lambda a, ax: a.sum(), xs, [0]),
        "fromfunction": lambda: n.fromfunction(lambda i, j: i * 10 + j, (2, 3), dtype=int),
        "fromfunction_const": lambda: n.fromfunction(lambda i, j: 1.0, (2, 3)),
        "fromfunction_f16": lambda: n.fromfunction(lambda i, j: i + j, (2, 3),
                                                   dtype=n.float16),
        "intersect1d_indices": lambda: n.intersect1d(sa, sb, return_indices=True),
        "intersect1d_indices_size": lambda: n.intersect1d(sa, sb, return_indices=True,
                                                          size=4, fill_value=-7),
        "intersect1d_fill_float": lambda: n.intersect1d(sa, sb, size=10, fill_value=2.5),
        "intersect1d_au_dup": lambda: n.intersect1d(sa, sb, assume_unique=True, size=5),
        "intersect1d_weak": lambda: n.intersect1d(n.asarray(1.0), n.asarray(1.0)),
        "intersect1d_weak_size": lambda: n.intersect1d(n.asarray(1.0), n.asarray(1.0), size=2),
        "intersect1d_traced": lambda: top.jit(n.intersect1d)(sa, sb),
        "setdiff1d_nan_size": lambda: n.setdiff1d(n.array([np.nan, np.nan, 1.0]),
                                                  n.array([np.nan]), size=4),
        "setdiff1d_all_nan_size": lambda: n.setdiff1d(n.array([np.nan, np.nan]),
                                                      n.array([1.0]), size=3),
        "setdiff1d_fill_float": lambda: n.setdiff1d(sa, sb, size=10, fill_value=2.5),
        "setdiff1d_scalars_size": lambda: n.setdiff1d(1, 2, size=2),
        "setdiff1d_au_size": lambda: n.setdiff1d(sa, sb, assume_unique=True, size=9),
        "setxor1d_nan": lambda: n.setxor1d(n.array([np.nan, 1.0, np.nan]),
                                           n.array([np.nan, 2.0])),
        "setxor1d_nan_size": lambda: n.setxor1d(n.array([np.nan, 1.0, np.nan]),
                                                n.array([np.nan, 2.0]), size=5),
        "setxor1d_neg_size": lambda: n.setxor1d(n.array([-3, -2]), n.array([-5]), size=5),
        "setxor1d_au_size": lambda: n.setxor1d(n.array([1, 1, 2]), n.array([3]),
                                               assume_unique=True, size=4),
        "union1d_size": lambda: n.union1d(sa, sb, size=10),
        "union1d_nan_size": lambda: n.union1d(n.array([np.nan, 1.0, np.nan]),
                                              n.array([np.nan, 2.0]), size=5),
        "union1d_weak_size": lambda: n.union1d(n.asarray(1.0), n.asarray(1.0), size=2),
        "union1d_empty_size": lambda: n.union1d(n.array([], n.int32), n.array([], n.int32),
                                                size=3),
        "union1d_traced": lambda: top.jit(n.union1d)(sa, sb),
        "union1d_size_float": lambda: n.union1d(sa, sb, size=3.0),
        "union1d_grad": lambda: top.grad(lambda x: (n.union1d(x, xs[3:], size=7)
                                                    * n.arange(7.0)).sum())(xs[::-1]),
        "setxor1d_jvp": lambda: top.jvp(lambda x: n.setxor1d(x, xs[:4], size=5), (xs[::-1],),
                                        (n.arange(6.0),)),
    }


PROBE_NAMES = list(_probes(jnp, ember))


@pytest.mark.parametrize("name", PROBE_NAMES)
def test_matches_jax(name, jax):
    ours, our_exc = run_probe(_probes(jnp, ember)[name])
    theirs, their_exc = run_probe(_probes(jax.numpy, jax)[name])
    if their_exc is not None:
        assert our_exc is not None, f"JAX raises {their_exc!r}, ember returns"
        # Same class name somewhere in our error's classes (the libraries' own error
        # classes are distinct objects with JAX's names).
        assert type(their_exc).__name__ in [c.__name__ for c in type(our_exc).__mro__], \
            (our_exc, their_exc)
        return
    assert our_exc is None, f"ember raises {our_exc!r}"
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        assert (o.shape, np.dtype(o.dtype)) == (t.shape, np.dtype(t.dtype)), (o, t)
        assert o.weak_type == t.weak_type, (o.aval, t)
        np.testing.assert_allclose(np.asarray(o).astype(np.float64),
                                   np.asarray(t).astype(np.float64), rtol=1e-6, atol=1e-6,
                                   equal_nan=True)
