"""Records for index helpers and array editing (delete, insert, block, fill_diagonal, put,
put_along_axis, place, piecewise, vectorize, apply_*, fromfunction, r_/c_/mgrid) and the set
operations with a static ``size=``.

Traced indices are made unique where the operation needs it (``argsort`` of a drawn array:
a permutation), so jit and eager agree on which write wins. The data-sized set operations
(no ``size``), the index objects' directives and the error cases are covered in
tests/test_index_tricks.py.
"""

import numpy as np

import ember.numpy as jnp
from tests.op_records.base import ALL, FLOATS, INTS, NUMERIC, OpRecord

I32 = np.dtype("int32")
F32 = np.dtype("float32")
BOOL = np.dtype("bool")
INTS_BOOL = INTS + (BOOL,)


def _edited(edit):
    """A NumPy reference for the in-place NumPy functions: edit a copy, return it."""
    def ref(a, *rest):
        out = np.array(a, copy=True)
        edit(out, *rest)
        return out
    return ref


def _pad(values, size, pad):
    values = np.asarray(values)[:size]
    return np.concatenate([values, np.full(size - len(values), pad, values.dtype)])


def _smallest_or_zero(r):
    return r.min() if len(r) else 0


def _union_ref(a, b, size):
    u = np.union1d(a, b)
    return _pad(u, size, u[0])


def _intersect_ref(a, b, size):
    r = np.intersect1d(a, b)
    return _pad(r, size, _smallest_or_zero(r))


def _intersect_indices_ref(a, b, size):
    r, i1, i2 = np.intersect1d(a, b, return_indices=True)
    return (_pad(r, size, _smallest_or_zero(r)), _pad(i1, size, np.size(a)),
            _pad(i2, size, np.size(b)))


def _setdiff_ref(a, b, size):
    return _pad(np.setdiff1d(a, b), size, 0)


def _setxor_ref(a, b, size):
    r = np.setxor1d(a, b)
    return _pad(r, size, _smallest_or_zero(r))


def _q(x):
    """Floats quantized to halves, so that drawn arrays share values."""
    return jnp.round(x * 2) / 2


def _q_np(x):
    return np.round(x * 2) / 2


# Set-operation dtypes (a sample: each costs a sort per record, dtype, shape and backend).
SETOP_INTS = (np.dtype("int32"), np.dtype("uint8"), BOOL)
# Set-operation shapes: no case where both inputs are empty (union1d then needs fill_value).
SETOP_SHAPES = (((6,), (4,)), ((2, 3), (5,)), ((), (3,)), ((0,), (3,)), ((4,), (0,)))


def _setop_records(name, fn, ref, size):
    return [
        OpRecord(f"{name}_size", lambda a, b: fn(a, b, size=size),
                 lambda a, b: ref(a, b, size), SETOP_INTS, SETOP_SHAPES, rng="small"),
        OpRecord(f"{name}_size_float", lambda a, b: fn(_q(a), _q(b), size=size),
                 lambda a, b: ref(_q_np(a), _q_np(b), size), FLOATS[::2], SETOP_SHAPES,
                 rng="small"),
    ]


def _fill_diagonal(a, v):
    np.fill_diagonal(a, v)


def _put_along_axis_ref(a, k, v):
    out = np.array(a, copy=True)
    np.put_along_axis(out, np.argsort(k, axis=1, kind="stable")[:, :2], v, axis=1)
    return out


def _delete_unique_ref(a, k):
    return np.delete(a, np.argsort(k, kind="stable")[:2], axis=0)


def _piecewise(x):
    return jnp.piecewise(x, [x < 0, x > 1], [lambda v: v * 2, 5, lambda v: v - 1])


def _piecewise_np(x):
    return np.piecewise(x, [x < 0, x > 1], [lambda v: v * 2, 5, lambda v: v - 1])


RECORDS = [
    # ---------------------------------------------------------------- delete / insert
    OpRecord("delete_int", lambda a: jnp.delete(a, 1, axis=0),
             lambda a: np.delete(a, 1, axis=0), ALL, (((3,),), ((4, 2),), ((2, 3, 2),)),
             differentiable=True),
    OpRecord("delete_negative_int", lambda a: jnp.delete(a, -1, axis=-1),
             lambda a: np.delete(a, -1, axis=-1), NUMERIC, (((2, 3),), ((4,),))),
    OpRecord("delete_slice", lambda a: jnp.delete(a, slice(None, None, 2), axis=-1),
             lambda a: np.delete(a, slice(None, None, 2), axis=-1), ALL,
             (((5,),), ((2, 4),), ((3, 1),)), differentiable=True),
    OpRecord("delete_array", lambda a: jnp.delete(a, np.array([0, 2, 2, -1]), axis=1),
             lambda a: np.delete(a, [0, 2, 2, -1], axis=1), ALL, (((2, 5),), ((3, 4, 2),)),
             differentiable=True),
    OpRecord("delete_mask", lambda a: jnp.delete(a, np.array([True, False, True]), axis=0),
             lambda a: np.delete(a, np.array([True, False, True]), axis=0), NUMERIC,
             (((3,),), ((3, 2),))),
    OpRecord("delete_flat", lambda a: jnp.delete(a, np.array([0, -1])),
             lambda a: np.delete(a, [0, -1]), ALL, (((5,),), ((2, 3),), ((2,),))),
    OpRecord("delete_unique_traced",
             lambda a, k: jnp.delete(a, jnp.argsort(k)[:2], axis=0, assume_unique_indices=True),
             _delete_unique_ref, ALL, (((4,), (4,)), ((4, 3), (4,)), ((2, 2), (2,))),
             arg_dtypes={1: I32}, differentiable=True),
    OpRecord("insert_scalar", lambda a: jnp.insert(a, 1, 7, axis=0),
             lambda a: np.insert(a, 1, 7, axis=0), NUMERIC, (((3,),), ((2, 3),), ((1,),))),
    OpRecord("insert_values", lambda a, v: jnp.insert(a, np.array([0, 2, 2]), v, axis=0),
             lambda a, v: np.insert(a, [0, 2, 2], v, axis=0), ALL,
             (((3, 2), (3, 2)), ((4,), (3,)), ((2,), (1,))), differentiable=True),
    OpRecord("insert_column", lambda a, v: jnp.insert(a, -1, v, axis=1),
             lambda a, v: np.insert(a, -1, v, axis=1), NUMERIC, (((2, 3), (2,)), ((3, 1), ()))),
    OpRecord("insert_traced_index", lambda a, i, v: jnp.insert(a, i, v),
             lambda a, i, v: np.insert(a, i, v), ALL,
             (((5,), (2,), (2,)), ((2, 2), (3,), (3,)), ((3,), (1,), (1,))),
             arg_dtypes={1: I32}, arg_rngs={1: "index"}, differentiable=True),
    OpRecord("insert_slice", lambda a, v: jnp.insert(a, slice(0, 3), v, axis=-1),
             lambda a, v: np.insert(a, slice(0, 3), v, axis=-1), NUMERIC,
             (((2, 4), (3,)), ((3,), (3,)))),
    # ---------------------------------------------------------------- block
    OpRecord("block_2x2", lambda a, b, c, d: jnp.block([[a, b], [c, d]]),
             lambda a, b, c, d: np.block([[a, b], [c, d]]), ALL,
             (((2, 2), (2, 3), (1, 2), (1, 3)), ((2,), (3,), (2,), (3,)),
              ((), (1,), (1, 1), (1, 1))), differentiable=True),
    OpRecord("block_row", lambda a, b: jnp.block([a, b]), lambda a, b: np.block([a, b]), ALL,
             (((3,), (2,)), ((2, 2), (2, 1)), ((1, 2, 2), (2, 1)))),
    # ---------------------------------------------------------------- updates
    OpRecord("fill_diagonal_scalar", lambda a: jnp.fill_diagonal(a, 3, inplace=False),
             _edited(lambda a: np.fill_diagonal(a, 3)), ALL,
             (((3, 3),), ((2, 4),), ((4, 2),), ((2, 2, 2),)), differentiable=True),
    OpRecord("fill_diagonal_vector", lambda a, v: jnp.fill_diagonal(a, v, inplace=False),
             _edited(_fill_diagonal), ALL, (((3, 3), (3,)), ((4, 2), (2,)), ((3, 3), (2,))),
             differentiable=True),
    OpRecord("put", lambda a, v: jnp.put(a, np.array([0, -1, 3]), v, inplace=False),
             _edited(lambda a, v: np.put(a, [0, -1, 3], v)), ALL,
             (((2, 3), (3,)), ((5,), (1,)), ((4,), (2, 2))), differentiable=True),
    OpRecord("put_clip", lambda a, v: jnp.put(a, np.array([-2, 9]), v, mode="clip",
                                               inplace=False),
             _edited(lambda a, v: np.put(a, [-2, 9], v, mode="clip")), NUMERIC,
             (((2, 3), (2,)), ((4,), ()))),
    OpRecord("put_wrap", lambda a, v: jnp.put(a, np.array([-2, 9]), v, mode="wrap",
                                               inplace=False),
             _edited(lambda a, v: np.put(a, [-2, 9], v, mode="wrap")), NUMERIC,
             (((2, 3), (2,)), ((4,), ()))),
    OpRecord("put_along_axis",
             lambda a, k, v: jnp.put_along_axis(a, jnp.argsort(k, axis=1)[:, :2], v, axis=1,
                                                inplace=False),
             _put_along_axis_ref, ALL, (((3, 4), (3, 4), (3, 2)), ((2, 3), (2, 3), (2, 1)),
                                        ((1, 2), (1, 2), ())),
             arg_dtypes={1: I32}, differentiable=True),
    OpRecord("put_along_axis_negative",
             lambda a, v: jnp.put_along_axis(a, np.array([[-1, 0]]), v, axis=0, inplace=False),
             _edited(lambda a, v: np.put_along_axis(a, np.array([[-1, 0]]), v, axis=0)),
             NUMERIC, (((3, 2), (1, 2)), ((2, 2), ()))),
    OpRecord("place", lambda a, m, v: jnp.place(a, m, v, inplace=False),
             _edited(np.place), ALL, (((2, 3), (2, 3), (2,)), ((5,), (5,), (3,)),
                                      ((4,), (2, 2), (1,))),
             arg_dtypes={1: BOOL}, differentiable=True),
    # ---------------------------------------------------------------- functions of functions
    OpRecord("piecewise", _piecewise, _piecewise_np, FLOATS + INTS[:3],
             (((7,),), ((2, 3),), ((),)), differentiable=True),
    OpRecord("vectorize_signature",
             lambda a, b: jnp.vectorize(jnp.dot, signature="(n),(n)->()")(a, b),
             lambda a, b: np.sum(a * b, axis=-1), (F32,),
             (((2, 3), (3,)), ((4, 1, 3), (2, 3)), ((3,), (3,))), differentiable=True),
    OpRecord("vectorize_scalars", lambda a, b: jnp.vectorize(lambda x, y: x * y - y)(a, b),
             lambda a, b: a * b - b, NUMERIC, (((2, 3), (3,)), ((2, 1), (1, 4)), ((), (2,))),
             differentiable=True),
    OpRecord("apply_along_axis", lambda a: jnp.apply_along_axis(jnp.cumsum, 1, a),
             lambda a: np.apply_along_axis(np.cumsum, 1, a), FLOATS[:1] + INTS,
             (((2, 3),), ((2, 3, 4),), ((1, 2),)), differentiable=True),
    OpRecord("apply_over_axes", lambda a: jnp.apply_over_axes(jnp.sum, a, [0, 2]),
             lambda a: np.apply_over_axes(np.sum, a, [0, 2]), FLOATS[:1] + INTS,
             (((2, 3, 4),), ((1, 2, 3),)), differentiable=True),
    OpRecord("fromfunction",
             lambda x: jnp.fromfunction(lambda i, j: i * x + j, (2, 3), dtype=x.dtype),
             lambda x: np.fromfunction(lambda i, j: i * x + j, (2, 3), dtype=x.dtype),
             NUMERIC, (((),),), differentiable=True),
    # ---------------------------------------------------------------- index objects
    OpRecord("r_", lambda x: jnp.r_[x, 0:3, 7], lambda x: np.r_[x, 0:3, 7], NUMERIC,
             (((3,),), ((0,),))),
    OpRecord("c_", lambda x, y: jnp.c_[x, y, 0:2], lambda x, y: np.c_[x, y, 0:2], NUMERIC,
             (((2,), (2,)), ((2, 3), (2, 1)))),
    OpRecord("mgrid", lambda x: jnp.mgrid[0:2, 0:3] * x, lambda x: np.mgrid[0:2, 0:3] * x,
             FLOATS[:1] + INTS[:1], (((),),)),
    *_setop_records("union1d", jnp.union1d, _union_ref, 6),
    *_setop_records("intersect1d", jnp.intersect1d, _intersect_ref, 4),
    *_setop_records("setdiff1d", jnp.setdiff1d, _setdiff_ref, 5),
    *_setop_records("setxor1d", jnp.setxor1d, _setxor_ref, 7),
    OpRecord("intersect1d_indices_size",
             lambda a, b: jnp.intersect1d(a, b, return_indices=True, size=4),
             lambda a, b: _intersect_indices_ref(a, b, 4), (I32, np.dtype("uint8"), F32),
             SETOP_SHAPES[:3], rng="small"),
]
