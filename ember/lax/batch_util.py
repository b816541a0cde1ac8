"""Helpers for batching rules: moving and materializing batch dimensions, shared rule builders.

Rules follow ``ember.interpreters.batching`` (``rule(vals, dims, **params) -> (out, out_dim)``)
and run with the parent trace current, so they are written with lax operations.

Example:
    >>> defvectorized(exp_p)          # unary elementwise: the batch dim passes through
    >>> defbroadcasting(add_p)        # n-ary elementwise: operands aligned, then applied
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ember import core
from ember.interpreters.batching import axis_size_of, not_mapped


def moveaxis(x: Any, src: int, dst: int) -> Any:
    """``x`` with axis ``src`` moved to position ``dst`` (a transpose, or ``x`` itself)."""
    from ember.lax.shape import transpose
    ndim = core.get_aval(x).ndim
    src, dst = src % ndim, dst % ndim
    if src == dst:
        return x
    perm = [i for i in range(ndim) if i != src]
    perm.insert(dst, src)
    return transpose(x, perm)


def broadcast_batch(x: Any, size: int, dim: int = 0) -> Any:
    """An unmapped ``x`` materialized with a new axis of ``size`` at position ``dim``."""
    from ember.lax.shape import broadcast_in_dim
    aval = core.get_aval(x)
    shape = list(aval.shape)
    shape.insert(dim, size)
    kept = [i for i in range(len(shape)) if i != dim]
    return broadcast_in_dim(x, tuple(shape), tuple(kept))


def bdim_at_front(x: Any, dim: int | None, size: int) -> Any:
    """``x`` with its batch dimension first; an unmapped ``x`` is broadcast to ``size``."""
    if dim is not_mapped:
        return broadcast_batch(x, size, 0)
    return moveaxis(x, dim, 0)


def move_to(x: Any, dim: int | None, dst: int, size: int) -> Any:
    """``x`` with its batch dimension at ``dst`` (broadcast there when unmapped)."""
    if dim is not_mapped:
        return broadcast_batch(x, size, dst)
    return moveaxis(x, dim, dst)


def vectorized_batcher(prim: core.Primitive):
    """Rule of a unary elementwise primitive: applied as is, the batch dim is unchanged."""
    def rule(vals, dims, **params):
        (x,), (d,) = vals, dims
        return prim.bind(x, **params), d
    return rule


def defvectorized(prim: core.Primitive) -> None:
    prim.batch = vectorized_batcher(prim)


def broadcast_batcher(prim: core.Primitive):
    """Rule of an n-ary elementwise primitive (equal shapes, or rank-0 operands).

    When every mapped operand has the same full shape and batch dim and every unmapped one is
    rank 0, the primitive applies directly. Otherwise mapped operands get their batch dim
    first and are broadcast to the full output shape; unmapped rank-0 operands stay scalars,
    other unmapped operands are broadcast along a new leading axis.
    """
    def rule(vals, dims, **params):
        avals = [core.get_aval(v) for v in vals]
        mapped = [(a, d) for a, d in zip(avals, dims) if d is not not_mapped]
        first_shape, first_dim = mapped[0][0].shape, mapped[0][1]
        if all(a.shape == first_shape and d == first_dim for a, d in mapped) and all(
                a.ndim == 0 for a, d in zip(avals, dims) if d is not_mapped):
            out = prim.bind(*vals, **params)
            return out, ([first_dim] * len(out) if prim.multiple_results else first_dim)
        size = axis_size_of(vals, dims)
        # The unbatched output shape: the shape of any non-scalar operand, unbatched.
        out_shape: tuple[int, ...] = ()
        for a, d in zip(avals, dims):
            shape = a.shape if d is not_mapped else a.shape[:d] + a.shape[d + 1:]
            if shape:
                out_shape = shape
                break
        args = [_align(v, a, d, size, out_shape) for v, a, d in zip(vals, avals, dims)]
        out = prim.bind(*args, **params)
        return out, ([0] * len(out) if prim.multiple_results else 0)
    return rule


def _align(v: Any, aval: core.ShapedArray, d: int | None, size: int,
           out_shape: tuple[int, ...]) -> Any:
    from ember.lax.shape import broadcast_in_dim
    if d is not_mapped:
        if aval.ndim == 0:
            return v
        return broadcast_in_dim(v, (size,) + out_shape, tuple(range(1, len(out_shape) + 1)))
    v = moveaxis(v, d, 0)
    if aval.ndim == 1 and out_shape:
        return broadcast_in_dim(v, (size,) + out_shape, (0,))
    return v


def defbroadcasting(prim: core.Primitive) -> None:
    prim.batch = broadcast_batcher(prim)


def all_at_front(vals: Sequence[Any], dims: Sequence[int | None]) -> list[Any]:
    """Every operand with its batch dim first; unmapped operands broadcast to the axis size."""
    size = axis_size_of(vals, dims)
    return [bdim_at_front(v, d, size) for v, d in zip(vals, dims)]
