"""Records for ``lax.while_loop``: a fixed-count loop on a counter (Newton's square root), a
data-dependent trip count (doubling until a bound: under vmap the predicate is batched) and
an integer loop. Not differentiable here: the grad tests run reverse mode, which a
while_loop raises on (its forward mode is tested in ``tests/test_while_loop.py``)."""

import numpy as np

import ember.numpy as jnp
from ember import lax
from tests.op_records.base import OpRecord

F32 = (np.dtype("float32"),)
ARRAY_SHAPES = (((),), ((5,),), ((2, 3),))


def _newton_sqrt(a):
    def body(c):
        x, i = c
        return 0.5 * (x + a / x), i + 1
    return lax.while_loop(lambda c: c[1] < 6, body, (a, 0))[0]


def _newton_sqrt_ref(a):
    x = a.astype(np.float64)
    for _ in range(6):
        x = 0.5 * (x + a / x)
    return x.astype(a.dtype)


def _double_until(x):
    return lax.while_loop(lambda c: jnp.max(c) < 50.0, lambda c: c * 2, x)


def _double_until_ref(x):
    while np.max(x) < 50.0:
        x = x * 2
    return x


def _halvings(x):
    return lax.while_loop(lambda c: jnp.any(c[0] > 0), lambda c: (c[0] // 2, c[1] + 1),
                          (x, np.int32(0)))[1]


def _halvings_ref(x):
    k = 0
    while np.any(x > 0):
        x, k = x // 2, k + 1
    return np.int32(k)


RECORDS = [
    OpRecord("while_loop[newton_sqrt]", _newton_sqrt, _newton_sqrt_ref, F32, ARRAY_SHAPES,
             rng="positive", tol=1e-5),
    OpRecord("while_loop[double_until]", _double_until, _double_until_ref, F32, ARRAY_SHAPES,
             rng="positive"),
    OpRecord("while_loop[halvings]", _halvings, _halvings_ref,
             (np.dtype("int32"), np.dtype("uint8")), ARRAY_SHAPES, rng="nonneg"),
]
