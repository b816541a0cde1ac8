"""``associative_scan``: an inclusive prefix scan with any associative operator, in
``O(log n)`` rounds of whole-array operations (no loop primitive).

The parallel-prefix recursion: combine neighbouring pairs ``(x0, x1), (x2, x3), ...``; scan
that half-length sequence recursively, which gives the prefixes ending at every odd
position; each even position ``2i > 0`` is then the odd prefix at ``2i - 1`` combined with
``x[2i]``, and position 0 is ``x0``. The two halves are interleaved back. ``fn`` is only
ever called on whole arrays (vectorized over the scanned axis) and must be associative;
it is applied with the earlier elements on the left.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember import _pytree, core
from ember.lax import base
from ember.lax.elementwise import convert_element_type
from ember.lax.shape import concatenate, expand_dims, pad, reshape, rev
from ember.lax.slicing import slice_in_dim


def _every_other(x: Any, start: int, axis: int) -> Any:
    return slice_in_dim(x, start, None, 2, axis)


def _interleave(evens: Any, odds: Any, axis: int) -> Any:
    """``evens[0], odds[0], evens[1], ...`` along ``axis`` (``len(evens) - len(odds)`` is 0
    or 1): the two stacked on a new axis after ``axis``, then that pair merged."""
    shape = core.get_aval(evens).shape
    n_even, n_odd = shape[axis], core.get_aval(odds).shape[axis]
    if n_odd < n_even:  # an odd total: one filler odd element, sliced off at the end
        config = [(0, 0, 0)] * len(shape)
        config[axis] = (0, 1, 0)
        odds = pad(odds, convert_element_type(0, core.get_aval(odds).dtype), config)
    pairs = concatenate([expand_dims(evens, (axis + 1,)), expand_dims(odds, (axis + 1,))],
                        axis + 1)
    merged = reshape(pairs, shape[:axis] + (2 * n_even,) + shape[axis + 1:])
    return slice_in_dim(merged, 0, n_even + n_odd, 1, axis)


def associative_scan(fn: Callable, elems: Any, reverse: bool = False, axis: int = 0) -> Any:
    """The inclusive scan of ``elems`` along ``axis`` with the associative ``fn``.

    ``fn(a, b)`` takes two pytrees shaped like ``elems`` (slices of it along ``axis``) and
    returns one of the same structure; it must be associative and work elementwise along
    ``axis``. The result ``r`` has ``r[i] = fn(r[i - 1], elems[i])``, ``r[0] = elems[0]``.

    Args:
        fn: the associative binary operator, on pytrees of arrays.
        elems: a pytree of arrays with the same size along ``axis``.
        reverse: scan from the end: ``r[i] = fn(r[i + 1], elems[i])`` (the scan of the
            reversed elements, reversed back).
        axis: the scanned axis.

    Returns:
        A pytree like ``elems`` holding the prefix results.

    Example:
        >>> lax.associative_scan(lax.add, jnp.arange(5))
        Array([ 0,  1,  3,  6, 10], dtype=int32)
    """
    if not callable(fn):
        raise TypeError(f"associative_scan: fn must be callable, got {fn!r}")
    leaves, treedef = _pytree.tree_flatten(elems)
    if not leaves:
        raise ValueError("associative_scan: elems must contain at least one array")
    leaves = [base.as_operand(x, "associative_scan", "elems") for x in leaves]
    leaves = [x if hasattr(x, "aval") else convert_element_type(
        x, core.get_aval(x).dtype, core.get_aval(x).weak_type) for x in leaves]
    ndim = core.get_aval(leaves[0]).ndim
    if ndim == 0:
        raise ValueError("associative_scan: elems must be arrays of rank >= 1, got a scalar")
    axis = base.check_axis("associative_scan", "axis", axis, ndim)
    sizes = {core.get_aval(x).shape[axis] if core.get_aval(x).ndim > axis else None
             for x in leaves}
    if len(sizes) != 1 or None in sizes:
        shapes = [core.get_aval(x).shape for x in leaves]
        raise ValueError(f"associative_scan: every array of elems must have the same size "
                         f"along axis {axis}, got shapes {shapes}")

    def combine(a: list[Any], b: list[Any]) -> list[Any]:
        out = fn(_pytree.tree_unflatten(treedef, a), _pytree.tree_unflatten(treedef, b))
        out_leaves, out_tree = _pytree.tree_flatten(out)
        if out_tree != treedef:
            raise TypeError(f"associative_scan: fn must return a pytree with the structure "
                            f"of elems ({treedef}), got {out_tree}")
        want = [core.get_aval(x).shape for x in a]
        got = [core.get_aval(x).shape for x in out_leaves]
        if got != want:
            raise TypeError(f"associative_scan: fn must keep the shapes of its arguments "
                            f"(elementwise along axis {axis}), got {got} for {want}")
        return out_leaves

    def scan(xs: list[Any]) -> list[Any]:
        n = core.get_aval(xs[0]).shape[axis]
        if n < 2:
            return xs
        # Pairs (x[2i], x[2i+1]) combined; their scan is the prefix at each odd position.
        pairs = combine([slice_in_dim(x, 0, n - n % 2, 2, axis) for x in xs],
                        [_every_other(x, 1, axis) for x in xs])
        odd = scan(pairs)
        # Even positions 2, 4, ...: the odd prefix just before, combined with x[2i].
        n_tail = (n - 1) // 2
        even_tail = combine([slice_in_dim(o, 0, n_tail, 1, axis) for o in odd],
                            [_every_other(x, 2, axis) for x in xs]) if n_tail else None
        out = []
        for k, x in enumerate(xs):
            first = slice_in_dim(x, 0, 1, 1, axis)
            even = first if even_tail is None else concatenate([first, even_tail[k]], axis)
            out.append(_interleave(even, odd[k], axis))
        return out

    if reverse:
        leaves = [rev(x, (axis,)) for x in leaves]
    result = scan(leaves)
    if reverse:
        result = [rev(x, (axis,)) for x in result]
    return _pytree.tree_unflatten(treedef, result)


__all__ = ["associative_scan"]
