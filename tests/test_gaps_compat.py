"""JAX-compatibility gaps: ``jnp.unique`` along an axis with a static ``size``, and the
exception classes of ``ember.lax`` for bad shapes, dimensions and dtypes.

Expected values were computed with JAX 0.10.2 and written in as literals.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp

NAN = np.nan


def _check(got, want, dtype):
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want)
    for g, (w, dt) in zip(got, zip(want, dtype)):
        assert g.dtype == np.dtype(dt)
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w, dt))


# ---------------------------------------------------------------- unique(axis=..., size=...)

_ROWS = np.array([[1, 2], [0, 5], [1, 2], [0, 3], [0, 5]], np.int32)
_I4 = ("int32",) * 4


@pytest.mark.parametrize("size, fill, want", [
    (2, None, ([[0, 3], [0, 5]], [3, 1], [2, 1, 2, 0, 1], [1, 2])),
    (4, None, ([[0, 3], [0, 5], [1, 2], [0, 3]], [3, 1, 0, 3], [2, 1, 2, 0, 1],
               [1, 2, 2, 0])),
    (6, -1, ([[0, 3], [0, 5], [1, 2], [-1, -1], [-1, -1], [-1, -1]], [3, 1, 0, 3, 3, 3],
             [2, 1, 2, 0, 1], [1, 2, 2, 0, 0, 0])),
])
@pytest.mark.parametrize("jit", [False, True])
def test_unique_axis_size_int_rows(size, fill, want, jit):
    def f(x):
        return jnp.unique(x, True, True, True, axis=0, size=size, fill_value=fill)

    _check((ember.jit(f) if jit else f)(jnp.asarray(_ROWS)), want, _I4)


_NAN_ROWS = np.array([[1., NAN], [1., NAN], [0., 2.], [NAN, NAN], [NAN, NAN], [-0., 2.]],
                     np.float32)
_F_I3 = ("float32", "int32", "int32", "int32")


@pytest.mark.parametrize("equal_nan, want", [
    (True, ([[0., 2.], [1., NAN], [NAN, NAN], [0., 2.], [0., 2.], [0., 2.]],
            [2, 0, 3, 2, 2, 2], [1, 1, 0, 2, 2, 0], [2, 2, 2, 0, 0, 0])),
    (False, ([[0., 2.], [1., NAN], [1., NAN], [NAN, NAN], [NAN, NAN], [0., 2.]],
             [2, 0, 1, 3, 4, 2], [1, 2, 0, 3, 4, 0], [2, 1, 1, 1, 1, 0])),
])
def test_unique_axis_size_nan_rows(equal_nan, want):
    got = jnp.unique(_NAN_ROWS, True, True, True, axis=0, size=6, equal_nan=equal_nan)
    _check(got, want, _F_I3)


def test_unique_axis_merges_nan_rows_without_size():
    # NumPy never merges NaN slices; JAX does with equal_nan=True (the default).
    got = jnp.unique(jnp.asarray(_NAN_ROWS), True, True, True, axis=0)
    want = ([[0., 2.], [1., NAN], [NAN, NAN]], [2, 0, 3], [1, 1, 0, 2, 2, 0], [2, 2, 2])
    _check(got, want, _F_I3)
    got = jnp.unique(jnp.asarray(_NAN_ROWS), axis=0, equal_nan=False)
    _check(got, ([[0., 2.], [1., NAN], [1., NAN], [NAN, NAN], [NAN, NAN]],), ("float32",))


def test_unique_axis_size_bool_columns():
    b = jnp.asarray([[True, False, True, False], [True, True, True, True]])
    got = jnp.unique(b, True, True, True, axis=1, size=4, fill_value=False)
    want = ([[False, True, False, False], [True, True, False, False]], [1, 0, 1, 1],
            [1, 0, 1, 0], [2, 2, 0, 0])
    _check(got, want, ("bool",) + _I4[:3])
    got = ember.jit(lambda b: jnp.unique(b, True, True, True, axis=-1, size=2))(b)
    _check(got, ([[False, True], [True, True]], [1, 0], [1, 0, 1, 0], [2, 2]),
           ("bool",) + _I4[:3])


def test_unique_axis_size_vmap_and_empty():
    x = jnp.asarray([[[1, 2], [1, 2], [0, 1]], [[3, 3], [0, 0], [3, 3]]])
    vals, counts = ember.vmap(
        lambda r: jnp.unique(r, axis=0, size=3, fill_value=-1, return_counts=True))(x)
    np.testing.assert_array_equal(vals, [[[0, 1], [1, 2], [-1, -1]],
                                         [[0, 0], [3, 3], [-1, -1]]])
    np.testing.assert_array_equal(counts, [[1, 2, 0], [1, 2, 0]])
    empty = jnp.zeros((0, 3), jnp.float32)
    np.testing.assert_array_equal(jnp.unique(empty, axis=0, size=2, fill_value=5.0),
                                  np.full((2, 3), 5.0, np.float32))
    with pytest.raises(ValueError, match="fill_value must be specified"):
        jnp.unique(empty, axis=0, size=2)
    assert jnp.unique(jnp.arange(3), sorted=False).shape == (3,)
    with pytest.raises(TypeError, match="size must be non-negative"):  # (TypeError in JAX)
        jnp.unique(empty, axis=0, size=-1, fill_value=0.0)


# ---------------------------------------------------------------- lax exception classes

_X = np.ones((2, 3), np.float32)

# (call, JAX 0.10.2's exception class, a fragment of ember's message)
_LAX_BAD = [
    (lambda: ember.lax.rev(_X, (2,)), TypeError, "rev: dimensions"),
    (lambda: ember.lax.rev(_X, (0, 0)), TypeError, "rev: dimensions"),
    (lambda: ember.lax.concatenate([_X, _X], 2), TypeError, "concatenate: dimension 2"),
    (lambda: ember.lax.concatenate([_X, _X], -1), TypeError, "concatenate: dimension -1"),
    (lambda: ember.lax.iota(np.int32, -1), TypeError, "shape must be non-negative"),
    (lambda: ember.lax.reshape(_X, (-1,)), TypeError, "reshape: new_sizes"),
    (lambda: ember.lax.broadcast_in_dim(_X, (2, -3), (0, 1)), TypeError, "broadcast_in_dim"),
    (lambda: ember.lax.broadcast(_X, (-1,)), TypeError, "broadcast: sizes"),
    (lambda: ember.lax.full((-1,), 0.0), TypeError, "full: shape"),
    (lambda: ember.lax.broadcast_shapes((-1,), (2,)), TypeError, "broadcast_shapes"),
    (lambda: ember.lax.slice(_X, (0, 0), (2, 3), (1,)), TypeError, "slice: strides"),
    (lambda: ember.lax.dynamic_slice(_X, (0,), (1, 1)), ValueError,
     "dynamic_slice: the number of start indices"),
    (lambda: ember.lax.dynamic_update_slice(_X, np.ones((1, 1), np.float32), (0,)), ValueError,
     "dynamic_update_slice: the number of start indices"),
    (lambda: ember.lax.pad(_X, np.ones(1, np.float32), [(0, 0, 0)] * 2), ValueError,
     "pad: padding_value must be a scalar"),
    (lambda: ember.lax.select_n(np.ones((2, 3), bool)), ValueError, "select_n: at least one"),
    (lambda: ember.lax.index_in_dim(_X, 0, axis=3), IndexError, "index_in_dim: axis=3"),
    (lambda: ember.lax.slice_in_dim(_X, 0, 1, axis=-3), IndexError, "slice_in_dim: axis=-3"),
    (lambda: ember.lax.dynamic_index_in_dim(_X, 0, axis=3), IndexError, "axis=3"),
    (lambda: ember.lax.dynamic_update_index_in_dim(_X, np.ones(3, np.float32), 0, axis=3),
     ValueError, "axis=3"),
]


@pytest.mark.parametrize("i", range(len(_LAX_BAD)))
def test_lax_bad_input_raises_jax_exception_class(i):
    call, cls, match = _LAX_BAD[i]
    with pytest.raises(cls, match=match):
        call()


def test_lax_slice_strides_of_the_wrong_length_under_jit():
    # (ember used to drop all-ones strides before checking their length)
    with pytest.raises(TypeError, match="slice: strides"):
        ember.jit(lambda x: ember.lax.slice(x, (0, 0), (2, 3), (1, 1, 1)))(_X)
    np.testing.assert_array_equal(ember.lax.slice(_X, (0, 0), (2, 3), (1, 2)),
                                  np.ones((2, 2), np.float32))
