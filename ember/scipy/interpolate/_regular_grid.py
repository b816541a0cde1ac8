"""Linear and nearest-neighbour interpolation on a rectilinear grid."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

import ember.numpy as jnp
from ember import dtypes
from ember._pytree import register_pytree_node
from ember.numpy._util import check_arraylike, promote_dtypes_inexact

_METHODS = ("linear", "nearest")


class RegularGridInterpolator:
    """Interpolates values given on a rectilinear grid at arbitrary points.

    As in JAX, each grid axis must be strictly increasing (not checked), ``bounds_error``
    must be False, and points outside the grid get ``fill_value`` (or are extrapolated
    when it is None). The interpolator is a pytree (grid, values and fill value are its
    leaves), so it can be passed through ``jit`` and ``vmap``.

    Args:
        points: the grid coordinates, one 1-D array per dimension.
        values: the values on the grid, shape ``(len(p) for p in points) + trailing``.
        method: ``"linear"`` or ``"nearest"``.
        bounds_error: must be False.
        fill_value: the value outside the grid (default NaN); None extrapolates.

    Example:
        >>> interp = RegularGridInterpolator((jnp.array([0.0, 1.0]),), jnp.array([0.0, 2.0]))
        >>> interp(jnp.array([[0.25]]))
        Array([0.5], dtype=float32)
    """

    def __init__(self, points, values, method: str = "linear", bounds_error: bool = False,
                 fill_value: Any = np.nan):
        if method not in _METHODS:
            raise ValueError(f"method {method!r} is not defined")
        if bounds_error:
            raise NotImplementedError("`bounds_error` takes no effect under JIT")
        check_arraylike("RegularGridInterpolator", values)
        values, = promote_dtypes_inexact(jnp.asarray(values))
        if len(points) > values.ndim:
            raise ValueError(f"there are {len(points)} point arrays, but values has "
                             f"{values.ndim} dimensions")
        if fill_value is not None:
            check_arraylike("RegularGridInterpolator", fill_value)
            fill_value = jnp.asarray(fill_value)
            if not dtypes.can_cast(fill_value.dtype, values.dtype, casting="same_kind"):
                raise ValueError("fill_value must be either 'None' or of a type compatible "
                                 "with values")
        check_arraylike("RegularGridInterpolator", *points)
        self.method = method
        self.bounds_error = bounds_error
        self.fill_value = fill_value
        self.grid = tuple(jnp.asarray(p) for p in points)
        self.values = values

    def __call__(self, xi, method: str | None = None):
        """Interpolates at ``xi``, shape ``(..., ndim)`` (or a tuple of ``ndim`` coordinate
        arrays); the result has shape ``xi.shape[:-1] + values.shape[ndim:]``."""
        method = self.method if method is None else method
        if method not in _METHODS:
            raise ValueError(f"method {method!r} is not defined")
        ndim = len(self.grid)
        xi = _as_points(xi, ndim)
        if xi.shape[-1] != ndim:
            raise ValueError(f"the requested sample points xi have dimension {xi.shape[-1]}, "
                             f"but this RegularGridInterpolator has dimension {ndim}")
        lead = xi.shape[:-1]
        xi = xi.reshape(-1, ndim)
        idx, frac, outside = [], [], jnp.zeros(xi.shape[0], bool)
        for d, g in enumerate(self.grid):
            x = xi[:, d]
            # the cell [g[i], g[i+1]] holding x (the first or last cell beyond the grid)
            i = jnp.clip(jnp.searchsorted(g, x) - 1, 0, g.size - 2)
            idx.append(i)
            frac.append((x - g[i]) / (g[i + 1] - g[i]))
            outside = outside | (x < g[0]) | (x > g[-1])
        trailing = (slice(None),) + (None,) * (self.values.ndim - ndim)
        if method == "linear":
            out = jnp.asarray(0.0)
            for corner in itertools.product((0, 1), repeat=ndim):
                w = jnp.asarray(1.0)
                for c, t in zip(corner, frac):
                    w = w * (t if c else 1 - t)
                out = out + self.values[tuple(i + c for i, c in zip(idx, corner))] * w[trailing]
        else:
            out = self.values[tuple(jnp.where(t <= 0.5, i, i + 1) for i, t in zip(idx, frac))]
        if self.fill_value is not None:
            out = jnp.where(outside.reshape((-1,) + (1,) * (out.ndim - 1)), self.fill_value,
                            out)
        return out.reshape(lead + self.values.shape[ndim:])


def _as_points(xi, ndim: int):
    if isinstance(xi, tuple) and len(xi) == 1:
        xi = xi[0]
    if isinstance(xi, tuple):
        parts = jnp.broadcast_arrays(*xi)
        return jnp.stack([jnp.asarray(p, dtype=float) for p in parts], axis=-1)
    check_arraylike("RegularGridInterpolator", xi)
    xi = jnp.asarray(xi)
    return xi.reshape(-1, ndim) if xi.ndim == 1 else xi


register_pytree_node(
    RegularGridInterpolator,
    lambda r: ((r.grid, r.values, r.fill_value), (r.method, r.bounds_error)),
    lambda aux, ch: RegularGridInterpolator(ch[0], ch[1], aux[0], aux[1], ch[2]))
