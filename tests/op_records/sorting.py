"""Records for sorting and searching (ember.numpy and lax)."""

import numpy as np

import ember.numpy as jnp
from ember import lax
from tests.op_records.base import ALL, FLOATS, NUMERIC, OpRecord

I32 = np.dtype("int32")
SIGNED_AND_FLOATS = FLOATS + (np.dtype("int32"), np.dtype("int8"))
LAST_SHAPES = (((5,),), ((0,),), ((2, 3),), ((1, 4, 3),), ((3, 0),))
AX0_SHAPES = (((5,),), ((0,),), ((4, 3),), ((0, 3),))


def _desc_argsort(x, axis):
    return np.argsort(-x.astype(np.float64), axis=axis, kind="stable")


def _asc_argsort(x, axis):
    return np.argsort(x.astype(np.float64), axis=axis, kind="stable")


RECORDS = [
    OpRecord("sort", jnp.sort, np.sort, ALL, LAST_SHAPES, differentiable=True),
    OpRecord("sort_axis0", lambda x: jnp.sort(x, axis=0), lambda x: np.sort(x, axis=0), ALL,
             AX0_SHAPES, differentiable=True),
    OpRecord("sort_none", lambda x: jnp.sort(x, axis=None), lambda x: np.sort(x, axis=None),
             NUMERIC, (((),), ((2, 3),), ((0, 2),)), differentiable=True),
    OpRecord("sort_descending", lambda x: jnp.sort(x, descending=True),
             lambda x: np.flip(np.sort(x), -1), NUMERIC, LAST_SHAPES, differentiable=True),
    OpRecord("argsort", jnp.argsort, lambda x: np.argsort(x, kind="stable"), ALL, LAST_SHAPES,
             out_dtype=lambda d: I32),
    OpRecord("argsort_axis0", lambda x: jnp.argsort(x, axis=0),
             lambda x: np.argsort(x, axis=0, kind="stable"), NUMERIC, AX0_SHAPES),
    OpRecord("argsort_descending", lambda x: jnp.argsort(x, axis=0, descending=True),
             lambda x: _desc_argsort(x, 0), SIGNED_AND_FLOATS, AX0_SHAPES),
    OpRecord("msort", jnp.msort, lambda x: np.sort(x, axis=0), NUMERIC, AX0_SHAPES,
             differentiable=True),
    OpRecord("lexsort", lambda a, b: jnp.lexsort((a, b)), lambda a, b: np.lexsort((a, b)),
             NUMERIC, (((6,), (6,)), ((0,), (0,)), ((2, 5), (2, 5))), rng="small"),
    OpRecord("lexsort_axis0", lambda a, b, c: jnp.lexsort((a, b, c), axis=0),
             lambda a, b, c: np.lexsort((a, b, c), axis=0), (I32, np.dtype("bool")),
             (((6, 2), (6, 2), (6, 2)),), rng="small"),
    OpRecord("searchsorted", lambda a, v: jnp.searchsorted(jnp.sort(a), v),
             lambda a, v: np.searchsorted(np.sort(a), v), NUMERIC,
             (((8,), ()), ((8,), (5,)), ((0,), (3,)), ((6,), (2, 3)), ((4,), (0,))),
             rng="small"),
    OpRecord("searchsorted_right", lambda a, v: jnp.searchsorted(jnp.sort(a), v, side="right"),
             lambda a, v: np.searchsorted(np.sort(a), v, side="right"), NUMERIC,
             (((8,), ()), ((8,), (5,)), ((6,), (2, 3))), rng="small"),
    OpRecord("partition_kth", lambda x: jnp.partition(x, 2, axis=-1)[..., 2],
             lambda x: np.partition(x, 2, axis=-1)[..., 2], NUMERIC, (((5,),), ((2, 4),)),
             differentiable=True),
    OpRecord("argpartition_kth", lambda x: jnp.take_along_axis(
        x, jnp.argpartition(x, 1), axis=-1)[..., 1],
        lambda x: np.take_along_axis(x, np.argpartition(x, 1), axis=-1)[..., 1],
        (np.dtype("float32"),), (((5,),), ((2, 4),))),
    # lax
    OpRecord("lax.sort", lambda x: lax.sort(x), np.sort, ALL, LAST_SHAPES, kind="lax",
             differentiable=True),
    OpRecord("lax.sort_dim0", lambda x: lax.sort(x, dimension=0), lambda x: np.sort(x, axis=0),
             ALL, AX0_SHAPES, kind="lax", differentiable=True),
    OpRecord("lax.sort_key_val", lambda k, v: lax.sort_key_val(k, v),
             lambda k, v: (np.sort(k, kind="stable"),
                           np.take_along_axis(v, np.argsort(k, kind="stable"), -1)),
             NUMERIC, (((6,), (6,)), ((2, 5), (2, 5)), ((0,), (0,))), rng="small",
             kind="lax", differentiable=True),
    OpRecord("lax.sort_2keys", lambda a, b, c: lax.sort((a, b, c), num_keys=2),
             lambda a, b, c: [np.take_along_axis(x, np.lexsort((b, a)), -1)
                              for x in (a, b, c)],
             (I32, np.dtype("float32")), (((7,), (7,), (7,)), ((2, 4), (2, 4), (2, 4))),
             rng="small", kind="lax", differentiable=True),
    OpRecord("lax.top_k", lambda x: lax.top_k(x, 2),
             lambda x: (np.take_along_axis(x, _desc_argsort(x, -1)[..., :2], -1),
                        _desc_argsort(x, -1)[..., :2]),
             SIGNED_AND_FLOATS, (((5,),), ((3, 4),), ((2, 1, 2),)), kind="lax",
             differentiable=True),
    # Exact answers, as JAX's CPU backend gives (floating operands only).
    OpRecord("lax.approx_max_k", lambda x: lax.approx_max_k(x, 2),
             lambda x: (np.take_along_axis(x, _desc_argsort(x, -1)[..., :2], -1),
                        _desc_argsort(x, -1)[..., :2]),
             FLOATS, (((5,),), ((3, 4),)), kind="lax", differentiable=True),
    OpRecord("lax.approx_min_k_dim0", lambda x: lax.approx_min_k(x, 2, reduction_dimension=0),
             lambda x: (np.take_along_axis(x, _asc_argsort(x, 0)[:2], 0),
                        _asc_argsort(x, 0)[:2]),
             FLOATS, (((5,),), ((3, 4),)), kind="lax", differentiable=True),
]
