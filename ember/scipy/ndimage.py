"""``jax.scipy.ndimage``: ``map_coordinates`` (interpolation of orders 0 and 1).

Each output value is a weighted sum over the ``2**ndim`` (order 1) or one (order 0) nearest
grid points; out-of-range indices are mapped back into the array by the boundary mode first.
Everything is a gather plus elementwise arithmetic, so it traces, jits, vmaps and
differentiates (with respect to the input and, for order 1, the coordinates).
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember import dtypes, lax
from ember import numpy as jnp
from ember.numpy._util import check_arraylike, ensure_array

Array = Any
ArrayLike = Any

__all__ = ["map_coordinates"]


def _mirror(index: Array, size: int) -> Array:
    # A triangle wave of period 2(size - 1): ... 2 1 [0 1 2 ... size-1] size-2 ...
    if size == 1:
        return jnp.zeros_like(index)
    s = size - 1
    return jnp.abs((index + s) % (2 * s) - s)


def _reflect(index: Array, size: int) -> Array:
    # Reflection about the pixel edges (the edge sample repeats): a mirror of the
    # half-integer grid 2*index + 1 over 2*size + 1 points.
    return jnp.floor_divide(_mirror(2 * index + 1, 2 * size + 1) - 1, 2)


_INDEX_FIXERS: dict[str, Callable[[Array, int], Array]] = {
    "constant": lambda index, size: jnp.clip(index, 0, size - 1),  # (masked by validity)
    "nearest": lambda index, size: jnp.clip(index, 0, size - 1),
    "wrap": lambda index, size: index % size,
    "mirror": _mirror,
    "reflect": _reflect,
}


def _round_half_away(a: Array) -> Array:
    return a if dtypes.issubdtype(a.dtype, np.integer) else lax.round(a)


def _nodes(coordinate: Array, order: int) -> list[tuple[Array, Any]]:
    """The grid indices (int32) contributing to ``coordinate`` and their weights."""
    if order == 0:
        return [(_round_half_away(coordinate).astype(np.int32), None)]
    lower = jnp.floor(coordinate)
    upper_weight = coordinate - lower
    index = lower.astype(np.int32)
    return [(index, 1 - upper_weight), (index + 1, upper_weight)]


def map_coordinates(input: ArrayLike, coordinates: Sequence[ArrayLike], order: int,
                    mode: str = "constant", cval: ArrayLike = 0.0) -> Array:
    """Values of ``input`` interpolated at the given coordinates
    (``scipy.ndimage.map_coordinates``, orders 0 and 1 as in JAX).

    Args:
        input: the array to sample.
        coordinates: one array of coordinates per dimension of ``input`` (a sequence of
            ``input.ndim`` arrays of one common broadcast shape, or an array whose leading
            axis has length ``input.ndim``).
        order: 0 (nearest grid point, rounding halves away from zero) or 1 (linear).
        mode: how coordinates outside the array are treated: 'constant' (``cval``),
            'nearest', 'wrap', 'mirror' or 'reflect'.
        cval: the value outside the array in 'constant' mode.

    Returns:
        an array of the coordinates' shape and of ``input``'s dtype (integer results are
        rounded half away from zero).

    Example:
        >>> ember.scipy.ndimage.map_coordinates(jnp.array([0., 10., 20.]),
        ...                                     [jnp.array([0.5, 1.25])], order=1)
        Array([ 5. , 12.5], dtype=float32)
    """
    check_arraylike("map_coordinates", input)
    x = ensure_array(input)
    coords = [ensure_array(c) for c in coordinates]
    if len(coords) != x.ndim:
        raise ValueError("coordinates must be a sequence of length input.ndim, but "
                         f"{len(coords)} != {x.ndim}")
    fixer = _INDEX_FIXERS.get(mode)
    if fixer is None:
        raise NotImplementedError(
            f"jax.scipy.ndimage.map_coordinates does not yet support mode {mode}. "
            f"Currently supported modes are {set(_INDEX_FIXERS)}.")
    if order not in (0, 1):
        raise NotImplementedError(
            "jax.scipy.ndimage.map_coordinates currently requires order<=1")
    if x.ndim == 0:
        return x
    if any(s == 0 for s in x.shape):
        raise ValueError("map_coordinates: input must not be empty, got shape "
                         f"{x.shape}")
    cval_arr = jnp.asarray(cval, x.dtype)

    # Per dimension: (fixed index, in-range mask or None, weight or None) for each node.
    per_dim = []
    for c, size in zip(coords, x.shape):
        items = []
        for index, weight in _nodes(c, order):
            valid = (index >= 0) & (index < size) if mode == "constant" else None
            items.append((fixer(index, size), valid, weight))
        per_dim.append(items)

    terms = []
    for corner in itertools.product(*per_dim):
        indices, valids, weights = zip(*corner)
        value = x[tuple(indices)]
        masks = [v for v in valids if v is not None]
        if masks:
            value = jnp.where(functools.reduce(operator.and_, masks), value, cval_arr)
        ws = [w for w in weights if w is not None]
        terms.append(functools.reduce(operator.mul, ws) * value if ws else value)
    result = functools.reduce(operator.add, terms)
    if dtypes.issubdtype(x.dtype, np.integer):
        result = _round_half_away(result)
    return result.astype(x.dtype)
