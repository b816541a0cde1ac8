"""Records for host callbacks: ``pure_callback`` under each batching method that vmap can
check against a loop, and ``experimental.io_callback``. The callbacks compute with NumPy."""

import numpy as np

import ember
from tests.op_records.base import FLOATS, UNARY_SHAPES, OpRecord

SAME_RANK_SHAPES = (((), ()), ((4,), (4,)), ((2, 3), (2, 3)), ((2, 1), (1, 3)), ((0,), (0,)))


def _like(x):
    return ember.ShapeDtypeStruct(np.shape(x), x.dtype)


def _in_dtype(fn):
    """``fn`` on NumPy arrays, its result in the first argument's dtype."""
    return lambda *xs: np.asarray(fn(*[np.asarray(x) for x in xs])).astype(np.asarray(xs[0]).dtype)


def _both(x, y):
    return ember.ShapeDtypeStruct(np.broadcast_shapes(np.shape(x), np.shape(y)), x.dtype)


RECORDS = [
    OpRecord("pure_callback[sin,sequential]",
             lambda x: ember.pure_callback(_in_dtype(np.sin), _like(x), x,
                                           vmap_method="sequential"),
             np.sin, FLOATS, UNARY_SHAPES),
    OpRecord("pure_callback[exp,expand_dims]",
             lambda x: ember.pure_callback(_in_dtype(np.exp), _like(x), x,
                                           vmap_method="expand_dims"),
             np.exp, FLOATS, UNARY_SHAPES),
    OpRecord("pure_callback[add,broadcast_all]",
             lambda x, y: ember.pure_callback(_in_dtype(np.add), _both(x, y), x, y,
                                              vmap_method="broadcast_all"),
             np.add, FLOATS, SAME_RANK_SHAPES),
    OpRecord("io_callback[cos]",
             lambda x: ember.experimental.io_callback(_in_dtype(np.cos), _like(x), x),
             np.cos, FLOATS, UNARY_SHAPES),
]
