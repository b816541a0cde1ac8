"""JAX compatibility of reductions, cumulative ops, sorting, searching and set operations.

Each test pins a behaviour where ember used to differ from JAX 0.10.2 (found by running the
same calls through both). Expected values are literals computed with JAX (or closed forms /
NumPy), so the file runs without jax installed.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax

nan, inf = np.nan, np.inf


def _grad(f, x):
    return np.asarray(ember.grad(f)(np.asarray(x, np.float32)))


# ---------------------------------------------------------------- cumulative gradients


@pytest.mark.parametrize("name,x,expected", [
    # Ties split the tangent along the associative-scan tree, as in JAX (not sequentially).
    ("cummax", [3., 3., 3., 3.], [3.75, 2.75, 2.5, 1.]),
    ("cummin", [3., 3., 3., 3.], [3.75, 2.75, 2.5, 1.]),
    # A NaN result has a zero tangent: nothing flows back through it.
    ("cummax", [1., nan, 3., 2.], [1., 0., 0., 0.]),
    ("cummin", [1., nan, 3., 2.], [1., 0., 0., 0.]),
    # A first element equal to the identity (+-inf) gets its whole tangent.
    ("cummin", [inf, 1., 2., 3.], [1., 9., 0., 0.]),
    ("cummax", [-inf, 1., 2., 3.], [1., 2., 3., 4.]),
    ("cumprod", [2., inf, 0., 3.], [inf, 2., inf, nan]),
])
@pytest.mark.parametrize("jit", [False, True])
def test_cumulative_gradients_follow_jax(name, x, expected, jit):
    w = np.arange(1.0, 5.0, dtype=np.float32) if name != "cumprod" else np.ones(4, np.float32)

    def f(t):
        return jnp.sum(getattr(lax, name)(t, axis=0) * w)

    g = ember.jit(ember.grad(f)) if jit else ember.grad(f)
    np.testing.assert_array_equal(np.asarray(g(np.asarray(x, np.float32))),
                                  np.asarray(expected, np.float32))


def test_reverse_cummax_jvp_at_ties():
    x = np.array([5., 5., 1., 5.], np.float32)
    _, t = ember.jvp(lambda v: lax.cummax(v, axis=0, reverse=True), (x,),
                     (np.array([1., 2., 3., 4.], np.float32),))
    # JAX: the last three prefixes (from the right) tie on 5s along its scan tree.
    np.testing.assert_array_equal(np.asarray(t), [2.75, 3., 4., 4.])


# ---------------------------------------------------------------- argmax / argmin


@pytest.mark.parametrize("fn", [jnp.argmax, jnp.argmin, jnp.nanargmax, jnp.nanargmin,
                                lambda x: lax.argmax(x, 0, np.int32)])
def test_argminmax_refuse_complex(fn):
    # JAX: "gt does not accept dtype complex64" (complex numbers have no order).
    with pytest.raises(TypeError, match="complex64"):
        fn(np.array([1 + 2j, 3 - 1j], np.complex64))
    with pytest.raises(TypeError, match="complex64"):
        ember.jit(fn)(np.array([1 + 2j, 3 - 1j], np.complex64))
