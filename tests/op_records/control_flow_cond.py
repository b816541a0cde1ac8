"""Records for ``lax.cond`` and ``lax.switch``: the predicate or index depends on the
arguments, so under vmap it is batched (every branch runs and the results are selected). The
NumPy references choose the branch with plain Python conditionals."""

import numpy as np

import ember.numpy as jnp
from ember import lax
from tests.op_records.base import FLOATS, UNARY_SHAPES, OpRecord

PAIR_SHAPES = (((), ()), ((4,), (4,)), ((2, 3), (2, 3)), ((0,), (0,)))
INDEX_SHAPES = (((), ()), ((), (5,)), ((), (2, 3)))


def _ref_cond(x):
    return np.sin(x) if x.astype(np.float64).sum() > 0 else np.cos(x)


def _ref_pair(x, y):
    big = x.astype(np.float64).sum() > y.astype(np.float64).sum()
    return (x * y, y) if big else (x - y, -y)


def _ref_switch(i, x):
    return [np.sin, np.cos, lambda v: v * v][min(max(int(i), 0), 2)](x)


RECORDS = [
    OpRecord("cond[sin,cos]", lambda x: lax.cond(x.sum() > 0, jnp.sin, jnp.cos, x),
             _ref_cond, FLOATS, UNARY_SHAPES, differentiable=True, kind="lax"),
    OpRecord("cond[pytree,two operands]",
             lambda x, y: lax.cond(x.sum() > y.sum(), lambda x, y: (x * y, y),
                                   lambda x, y: (x - y, -y), x, y),
             _ref_pair, FLOATS, PAIR_SHAPES, differentiable=True, kind="lax"),
    OpRecord("switch[sin,cos,square]",
             lambda i, x: lax.switch(i, [jnp.sin, jnp.cos, lambda v: v * v], x),
             _ref_switch, FLOATS, INDEX_SHAPES, differentiable=True, kind="lax",
             arg_dtypes={0: np.dtype("int32")}, arg_rngs={0: "default"}),
]
