"""Records for ember.ops segment reductions, lax.ragged_dot and lax.custom_linear_solve."""

import numpy as np

import ember
import ember.numpy as jnp
from ember import lax
from tests.op_records.base import OpRecord

F32 = np.dtype("float32")
I32 = np.dtype("int32")
_IDS = np.array([0, 2, 1, 0, 2, 1, 1, 0])  # every one of 3 segments non-empty


def _segment_ref(ufunc, identity):
    def ref(d):
        out = np.full((3,) + d.shape[1:], identity, d.dtype)
        ufunc.at(out, _IDS, d)
        return out
    return ref


_GROUPS = np.array([2, 0, 3], np.int32)


def _ragged_ref(lhs, rhs):
    out = np.zeros((lhs.shape[0], rhs.shape[2]), np.result_type(lhs, rhs))
    start = 0
    for j, n in enumerate(_GROUPS):
        out[start:start + n] = lhs[start:start + n] @ rhs[j]
        start += n
    return out


def _spd_solve(a, b):
    m = a @ a.T + 3 * jnp.eye(a.shape[0], dtype=a.dtype)
    return lax.custom_linear_solve(lambda x: m @ x, b, lambda mv, y: jnp.linalg.solve(m, y),
                                   symmetric=True)


def _spd_ref(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return np.linalg.solve(a @ a.T + 3 * np.eye(a.shape[0]), b)


RECORDS = [
    OpRecord("ops.segment_sum", lambda d: ember.ops.segment_sum(d, _IDS, 3),
             _segment_ref(np.add, 0), (F32, I32), (((8,),), ((8, 2),)), differentiable=True,
             kind="lax"),
    OpRecord("ops.segment_max", lambda d: ember.ops.segment_max(d, _IDS, 3),
             _segment_ref(np.maximum, -np.inf), (F32,), (((8,),), ((8, 2),)),
             differentiable=True, kind="lax"),
    OpRecord("ops.segment_min", lambda d: ember.ops.segment_min(d, _IDS, 3),
             _segment_ref(np.minimum, np.inf), (F32,), (((8,),), ((8, 2),)),
             differentiable=True, kind="lax"),
    # (no gradient: JAX's segment_prod refuses it with repeated segment ids)
    OpRecord("ops.segment_prod", lambda d: ember.ops.segment_prod(d, _IDS, 3),
             _segment_ref(np.multiply, 1), (F32,), (((8,),), ((8, 2),)), kind="lax"),
    OpRecord("lax.ragged_dot", lambda lhs, rhs: lax.ragged_dot(lhs, rhs, _GROUPS),
             _ragged_ref, (F32,), (((6, 3), (3, 3, 4)),), tol=1e-4, differentiable=True,
             kind="lax"),
    OpRecord("lax.custom_linear_solve", _spd_solve, _spd_ref, (F32,),
             (((3, 3), (3,)), ((2, 2), (2,))), tol=1e-4, differentiable=True, kind="lax"),
]
