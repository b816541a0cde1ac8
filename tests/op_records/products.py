"""Records for dot_general / lax.dot and the ember.numpy products (matmul, einsum, ...)."""

import warnings

import numpy as np

import ember.numpy as jnp
from ember import lax
from tests.op_records.base import FLOATS, OpRecord, bfloat16

F32, I32, I8, U8, B = (np.dtype(t) for t in ("float32", "int32", "int8", "uint8", "bool"))
DOT_DTYPES = FLOATS + (I32, I8, U8, B)
NUM_DTYPES = FLOATS + (I32, I8)
_ = bfloat16

MATMUL_SHAPES = (
    ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
    ((1, 2, 3), (4, 3, 2)), ((2, 1, 2, 3), (3, 3, 2)), ((2, 0), (0, 3)), ((0, 2, 3), (3, 4)),
    ((3,), (2, 3, 4)),
)


def _dg(dn, **kw):
    return lambda x, y: lax.dot_general(x, y, dn, **kw)


def _np_dg(dn):
    def ref(x, y):
        (lc, rc), (lb, rb) = dn
        letters = iter("abcdefghijklmnop")
        xl = [next(letters) for _ in range(x.ndim)]
        yl = [next(letters) for _ in range(y.ndim)]
        for i, j in zip(lc + lb, rc + rb):
            yl[j] = xl[i]
        out = [xl[i] for i in lb] + [c for i, c in enumerate(xl) if i not in lc + lb] + \
            [c for i, c in enumerate(yl) if i not in rc + rb]
        return np.einsum(f"{''.join(xl)},{''.join(yl)}->{''.join(out)}", x, y).astype(x.dtype)
    return ref


def _np_cross_2d(a, b):
    with warnings.catch_warnings():  # NumPy 2 deprecates 2-vectors; JAX keeps them
        warnings.simplefilter("ignore", DeprecationWarning)
        return np.cross(a, b)


_MM = (((1,), (0,)), ((), ()))
_BMM = (((2,), (1,)), ((0,), (0,)))
_ODD = (((0, 2), (2, 0)), ((1,), (1,)))


def _es(subs):
    return OpRecord(f"einsum[{subs}]", lambda *a: jnp.einsum(subs, *a),
                    lambda *a: np.einsum(subs, *a), NUM_DTYPES, _EINSUM[subs],
                    differentiable=True)


_EINSUM = {
    "ij,jk->ik": (((2, 3), (3, 4)), ((2, 0), (0, 4))),
    "ii->i": (((3, 3),), ((0, 0),)),
    "ij,ij->": (((2, 3), (2, 3)), ((0, 3), (0, 3))),
    "bij,bjk->bik": (((2, 3, 4), (2, 4, 5)),),
    "...ij,...jk->...ik": (((2, 3, 4), (1, 4, 5)), ((3, 4), (4, 5)), ((2, 1, 2, 3), (4, 3, 2))),
    "ij->": (((3, 4),), ((0, 4),)),
    "i,j->ij": (((3,), (4,)),),
    "ij,jk,kl->il": (((2, 3), (3, 4), (4, 5)),),
    "iij,jk": (((3, 3, 2), (2, 4)),),
    "...i,...i": (((2, 3), (3,)), ((4,), (2, 4))),
}

RECORDS = [
    OpRecord("lax.dot_general[mm]", _dg(_MM), _np_dg(_MM), DOT_DTYPES,
             (((2, 3), (3, 4)), ((2, 0), (0, 4)), ((0, 3), (3, 1))), kind="lax",
             differentiable=True),
    OpRecord("lax.dot_general[batch]", _dg(_BMM), _np_dg(_BMM), DOT_DTYPES,
             (((2, 3, 4), (2, 4, 5)), ((0, 3, 4), (0, 4, 5)), ((2, 3, 0), (2, 0, 5))),
             kind="lax", differentiable=True),
    OpRecord("lax.dot_general[odd]", _dg(_ODD), _np_dg(_ODD), DOT_DTYPES,
             (((2, 3, 4), (4, 3, 2, 5)),), kind="lax", differentiable=True),
    OpRecord("lax.dot_general[outer]", _dg((((), ()), ((), ()))),
             _np_dg((((), ()), ((), ()))), DOT_DTYPES, (((), (3,)), ((2,), (3,)), ((), ())),
             kind="lax", differentiable=True),
    OpRecord("lax.dot_general[preferred]",
             _dg(_MM, preferred_element_type=np.float32),
             lambda x, y: np.matmul(x.astype(np.float32), y.astype(np.float32)),
             (np.dtype("float16"), bfloat16, I8, U8, B), (((2, 3), (3, 4)),), kind="lax",
             out_dtype=lambda d: F32),
    OpRecord("lax.dot", lax.dot, np.dot, DOT_DTYPES,
             (((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((2, 0), (0, 4))),
             kind="lax", differentiable=True),
    OpRecord("lax.batch_matmul", lax.batch_matmul, np.matmul, NUM_DTYPES,
             (((2, 3, 4), (2, 4, 5)), ((2, 1, 2, 3), (2, 1, 3, 0))), kind="lax",
             differentiable=True),
    OpRecord("matmul", jnp.matmul, np.matmul, DOT_DTYPES, MATMUL_SHAPES, differentiable=True),
    OpRecord("matmul[mixed]", jnp.matmul, np.matmul, (I8,), (((2, 3), (3, 4)),),
             arg_dtypes={1: F32}, out_dtype=lambda d: F32),
    OpRecord("dot", jnp.dot, np.dot, DOT_DTYPES,
             (((), (3,)), ((3,), (3,)), ((2, 3), (3,)), ((2, 3), (4, 3, 5)), ((2, 3), ()),
              ((0,), (0,))), differentiable=True),
    OpRecord("vdot", jnp.vdot, np.vdot, NUM_DTYPES, (((3,), (3,)), ((2, 3), (6,)), ((0,), (0,))),
             differentiable=True),
    OpRecord("inner", jnp.inner, np.inner, NUM_DTYPES,
             (((3,), (3,)), ((2, 3), (4, 3)), ((), (2,))), differentiable=True),
    OpRecord("outer", jnp.outer, np.outer, DOT_DTYPES, (((3,), (4,)), ((2, 3), (2,)), ((0,), (3,))),
             differentiable=True),
    OpRecord("tensordot", jnp.tensordot, np.tensordot, NUM_DTYPES,
             (((2, 3, 4), (3, 4, 5)), ((3, 4), (3, 4)), ((2, 0, 3), (0, 3, 4))),
             differentiable=True),
    OpRecord("tensordot[axes]", lambda a, b: jnp.tensordot(a, b, axes=([1, 0], [0, 1])),
             lambda a, b: np.tensordot(a, b, axes=([1, 0], [0, 1])), NUM_DTYPES,
             (((3, 4, 5), (4, 3, 2)),), differentiable=True),
    OpRecord("tensordot[1]", lambda a, b: jnp.tensordot(a, b, 1),
             lambda a, b: np.tensordot(a, b, 1), NUM_DTYPES, (((2, 3), (3, 4)),),
             differentiable=True),
    OpRecord("kron", jnp.kron, np.kron, NUM_DTYPES,
             (((2, 3), (4, 5)), ((2,), (3, 4)), ((), (2,)), ((0, 2), (2, 2))),
             differentiable=True),
    OpRecord("trace", jnp.trace, np.trace, DOT_DTYPES, (((3, 3),), ((3, 4),), ((2, 3, 4),),
                                                         ((0, 3),)), differentiable=True),
    OpRecord("trace[offset]", lambda a: jnp.trace(a, 1, 1, 2), lambda a: np.trace(a, 1, 1, 2),
             NUM_DTYPES, (((2, 3, 4),), ((2, 4, 3),)), differentiable=True),
    OpRecord("trace[neg_offset]", lambda a: jnp.trace(a, -1), lambda a: np.trace(a, -1),
             NUM_DTYPES, (((3, 4),), ((4, 3),)), differentiable=True),
    OpRecord("cross", jnp.cross, np.cross, NUM_DTYPES,
             (((3,), (3,)), ((4, 3), (4, 3)), ((2, 1, 3), (5, 3)), ((0, 3), (0, 3))),
             differentiable=True),
    OpRecord("cross[axis]", lambda a, b: jnp.cross(a, b, axis=0),
             lambda a, b: np.cross(a, b, axis=0), NUM_DTYPES, (((3, 2, 4), (3, 2, 4)),),
             differentiable=True),
    OpRecord("cross[axisa,axisb,axisc]", lambda a, b: jnp.cross(a, b, 0, -1, 1),
             lambda a, b: np.cross(a, b, 0, -1, 1), NUM_DTYPES, (((3, 4), (4, 3)),),
             differentiable=True),
    OpRecord("cross[2-vectors]", jnp.cross, _np_cross_2d, NUM_DTYPES,
             (((4, 2), (2,)), ((2,), (3,)), ((4, 3), (4, 2))), differentiable=True),
] + [_es(s) for s in _EINSUM]
