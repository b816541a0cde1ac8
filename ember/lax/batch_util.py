"""Helpers for batching rules: moving and materializing batch dimensions, shared rule builders.

Rules follow ``ember.interpreters.batching`` (``rule(vals, dims, **params) -> (out, out_dim)``)
and run with the parent trace current, so they are written with lax operations.

``align_operands`` aligns the operands of custom elementwise rules (select_n, clamp, ...);
``unbatched_shape`` and ``batched_axis`` translate shapes and axes across the batch dim.

Example:
    >>> defvectorized(exp_p)          # unary elementwise: the batch dim passes through
    >>> defbroadcasting(add_p)        # n-ary elementwise: operands aligned, then applied
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ember import core
from ember.interpreters.batching import axis_size_of, not_mapped
from ember.lax.base import broadcast_dims


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


def unbatched_shape(x: Any, dim: int | None) -> tuple[int, ...]:
    """The shape of ``x`` without its batch dimension (all of it when unmapped)."""
    shape = core.get_aval(x).shape
    return shape if dim is not_mapped else shape[:dim] + shape[dim + 1:]


def batched_axis(axis: int, dim: int) -> int:
    """Where unbatched axis ``axis`` sits in an operand whose batch dimension is ``dim``."""
    return axis + 1 if axis >= dim else axis


def align_operands(vals: Sequence[Any], dims: Sequence[int | None], out_shape: Sequence[int],
                   keep_scalars: Sequence[bool] | None = None) -> tuple[list[Any], int]:
    """Operands of an elementwise rule given the full batched shape, with one batch dim.

    ``out_shape`` is the unbatched shape of the result. The batch dim goes where the first
    mapped operand of full rank has it (0 when none has full rank), so operands that already
    agree are not transposed. Mapped operands are moved there; mapped scalars (rank 1 once
    batched) and unmapped operands are broadcast to the full shape, except unmapped rank-0
    operands whose ``keep_scalars`` entry is true (default: all), which stay scalars.
    Returns the operands and the batch dim.
    """
    size = axis_size_of(vals, dims)
    out_shape = tuple(out_shape)
    ndim = len(out_shape) + 1
    target = next((d for v, d in zip(vals, dims)
                   if d is not not_mapped and core.get_aval(v).ndim == ndim), 0)
    full = out_shape[:target] + (size,) + out_shape[target:]
    rest = tuple(i for i in range(ndim) if i != target)
    if keep_scalars is None:
        keep_scalars = [True] * len(vals)
    return [_align(v, d, keep, target, full, rest)
            for v, d, keep in zip(vals, dims, keep_scalars)], target


def _align(v: Any, d: int | None, keep: bool, target: int, full: tuple[int, ...],
           rest: tuple[int, ...]) -> Any:
    from ember.lax.shape import broadcast_in_dim
    v_ndim = core.get_aval(v).ndim
    if d is not_mapped:
        if v_ndim == 0 and keep:
            return v
        return broadcast_in_dim(v, full, () if v_ndim == 0 else rest)
    if v_ndim == len(full):
        return moveaxis(v, d, target)
    return broadcast_in_dim(v, full, (target,))  # a mapped scalar


def broadcast_batcher(prim: core.Primitive):
    """Rule of an n-ary elementwise primitive (equal shapes, or rank-0 operands).

    Operands are aligned by ``align_operands``: when every mapped operand has the full shape
    and one batch dim and every unmapped one is rank 0, the primitive applies directly;
    otherwise mapped operands move to the batch dim of the first full-rank mapped operand,
    mapped scalars and unmapped arrays are broadcast to the full shape, unmapped rank-0
    operands stay scalars.
    """
    def rule(vals, dims, **params):
        # The unbatched output shape: the operands' unbatched shapes broadcast.
        out_shape = broadcast_dims(prim.name, *(unbatched_shape(v, d)
                                                for v, d in zip(vals, dims)))
        args, out_dim = align_operands(vals, dims, out_shape)
        out = prim.bind(*args, **params)
        return out, ([out_dim] * len(out) if prim.multiple_results else out_dim)
    return rule


def defbroadcasting(prim: core.Primitive) -> None:
    prim.batch = broadcast_batcher(prim)


def all_at_front(vals: Sequence[Any], dims: Sequence[int | None]) -> list[Any]:
    """Every operand with its batch dim first; unmapped operands broadcast to the axis size."""
    size = axis_size_of(vals, dims)
    return [bdim_at_front(v, d, size) for v, d in zip(vals, dims)]
