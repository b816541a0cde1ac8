"""Records for the jnp.ufunc methods (reduce, accumulate, outer, reduceat, at) of the built-in
ufuncs, against NumPy's ufunc methods."""

import numpy as np

import ember.numpy as jnp
from tests.op_records.base import OpRecord

F32, I32, I8, U8, B = (np.dtype(t) for t in ("float32", "int32", "int8", "uint8", "bool"))
MATRICES = (((3, 4),), ((1, 5),), ((4, 1),))
PAIRS = (((3,), (4,)), ((2, 2), (3,)), ((), (2,)))
SEGMENTS = np.array([0, 2, 1, 3])
ROWS = np.array([0, 2, 0])
# (A value of shape (3,) for three row indices would be ambiguous: NumPy broadcasts it against
# each selected row, JAX's maximum.at takes one entry per index; (1, 3) means the same to both.)
AT_SHAPES = (((4, 3), (1, 3)), ((3,), ()))


def _at(name):
    def ref(x, v):
        out = x.copy()
        getattr(np, name).at(out, ROWS, v)
        return out
    return ref


RECORDS = [
    OpRecord("add.reduce", lambda x: jnp.add.reduce(x, axis=1),
             lambda x: np.add.reduce(x, axis=1).astype(x.dtype if x.dtype != B else I32),
             (F32, I32, B), MATRICES, differentiable=True),
    OpRecord("multiply.reduce", lambda x: jnp.multiply.reduce(x, axis=0),
             lambda x: np.multiply.reduce(x, axis=0), (F32, I32), MATRICES, rng="small",
             differentiable=True),
    OpRecord("subtract.reduce", lambda x: jnp.subtract.reduce(x, axis=1),
             lambda x: np.subtract.reduce(x, axis=1), (F32, I32), MATRICES,
             differentiable=True),
    OpRecord("logaddexp.reduce", lambda x: jnp.logaddexp.reduce(x, axis=1),
             lambda x: np.logaddexp.reduce(x, axis=1), (F32,), MATRICES, tol=1e-5,
             differentiable=True),
    OpRecord("bitwise_xor.reduce", lambda x: jnp.bitwise_xor.reduce(x, axis=None),
             lambda x: np.bitwise_xor.reduce(x, axis=None), (I32, I8, U8, B), MATRICES),
    OpRecord("maximum.accumulate", lambda x: jnp.maximum.accumulate(x, axis=1),
             lambda x: np.maximum.accumulate(x, axis=1), (F32, I32, U8), MATRICES,
             differentiable=True),
    OpRecord("multiply.accumulate", lambda x: jnp.multiply.accumulate(x, axis=0),
             lambda x: np.multiply.accumulate(x, axis=0), (F32, I32), MATRICES, rng="small",
             differentiable=True),
    OpRecord("subtract.outer", lambda a, b: jnp.subtract.outer(a, b), np.subtract.outer,
             (F32, I32), PAIRS, differentiable=True),
    OpRecord("minimum.reduceat", lambda x: jnp.minimum.reduceat(x, SEGMENTS, axis=1),
             lambda x: np.minimum.reduceat(x, SEGMENTS, axis=1), (F32, I32),
             (((3, 4),), ((2, 6),)), differentiable=True),
    OpRecord("add.reduceat", lambda x: jnp.add.reduceat(x, SEGMENTS, axis=1),
             lambda x: np.add.reduceat(x, SEGMENTS, axis=1), (F32, I32),
             (((3, 4),), ((2, 6),)), differentiable=True),
    OpRecord("add.at", lambda x, v: jnp.add.at(x, ROWS, v, inplace=False), _at("add"),
             (F32, I32), AT_SHAPES, differentiable=True),
    OpRecord("maximum.at", lambda x, v: jnp.maximum.at(x, ROWS, v, inplace=False),
             _at("maximum"), (F32, I32), AT_SHAPES, differentiable=True),
]
