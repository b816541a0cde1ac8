"""ragged_dot and ragged_dot_general: grouped matrix products over ragged groups of rows.

A composition of lax operations (so jit, grad and vmap come from theirs): the dense product
against every group is masked by the group each row (or contracted element) belongs to.
That costs ``num_groups`` times the dense product, which is fine for the small group counts
of mixture-of-experts layers on a CPU; the grads and dtypes are JAX's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ember import core, dtypes
from ember.lax import base
from ember.lax import elementwise as E
from ember.lax.dot import dot_general
from ember.lax.reduction import reduce_sum
from ember.lax.shape import broadcast_in_dim, full_like, int_tuple, iota, transpose

__all__ = ["RaggedDotDimensionNumbers", "ragged_dot", "ragged_dot_general"]


class RaggedDotDimensionNumbers(NamedTuple):
    """Which dimensions of a ragged dot are ragged, grouped, contracted and batched.

    ``dot_dimension_numbers`` is ``((lhs_contracting, rhs_contracting), (lhs_batch,
    rhs_batch))`` as for ``dot_general``; ``lhs_ragged_dimensions`` names the one lhs
    dimension split into groups; ``rhs_group_dimensions`` the rhs dimension indexing the
    groups (empty when the ragged dimension is contracted).

    Example:
        >>> lax.RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), (0,), (0,))
    """

    dot_dimension_numbers: Any
    lhs_ragged_dimensions: Sequence[int]
    rhs_group_dimensions: Sequence[int]


_RAGGED_DOT_DN = RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), (0,), (0,))


def _group_mask(group_sizes: Any, n: int, g: int) -> Any:
    """bool[n, g]: whether element ``i`` of the ragged dimension is in group ``j`` (elements
    past the last group are in none)."""
    sizes = E.convert_element_type(group_sizes, np.int32)
    ends = _cumsum(sizes, g)
    starts = E.sub(ends, sizes)
    i = iota(np.int32, n)
    col = broadcast_in_dim(i, (n, g), (0,))
    return E.bitwise_and(E.ge(col, broadcast_in_dim(starts, (n, g), (1,))),
                         E.lt(col, broadcast_in_dim(ends, (n, g), (1,))))


def _cumsum(x: Any, g: int) -> Any:
    # A (g, g) lower-triangular product: g is small, and it stays a plain matrix product.
    tri = E.ge(broadcast_in_dim(iota(np.int32, g), (g, g), (0,)),
               broadcast_in_dim(iota(np.int32, g), (g, g), (1,)))
    return dot_general(E.convert_element_type(tri, np.int32), x, (((1,), (0,)), ((), ())))


def ragged_dot_general(lhs: Any, rhs: Any, group_sizes: Any,
                       ragged_dot_dimension_numbers: RaggedDotDimensionNumbers,
                       precision: Any = None, preferred_element_type: Any = None,
                       group_offset: Any = None) -> Any:
    """A ``dot_general`` whose lhs ragged dimension is split into consecutive groups of
    ``group_sizes`` elements.

    Two modes: a non-contracting ragged dimension multiplies each group of rows by its own
    slice of ``rhs`` along the group dimension (rows past ``sum(group_sizes)`` give 0); a
    contracting ragged dimension (no rhs group dimension) gives one product per group,
    stacked along a new leading dimension.

    Example:
        >>> dn = lax.RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), (0,), (0,))
        >>> lax.ragged_dot_general(jnp.ones((3, 2)), jnp.ones((2, 2, 4)),
        ...                        jnp.array([1, 2]), dn).shape
        (3, 4)
    """
    fn = "ragged_dot_general"
    if group_offset is not None:
        raise NotImplementedError(f"{fn}: group_offset is not supported")
    lhs = base.as_operand(lhs, fn, "lhs")
    rhs = base.as_operand(rhs, fn, "rhs")
    group_sizes = base.as_operand(group_sizes, fn, "group_sizes")
    la, ra, ga = (core.get_aval(x) for x in (lhs, rhs, group_sizes))
    if not dtypes.is_integer(ga.dtype) or ga.ndim != 1:
        raise TypeError(f"{fn}: group_sizes must be a 1-D integer array, got {ga.str_short()}")
    g = ga.shape[0]
    dn = RaggedDotDimensionNumbers(*ragged_dot_dimension_numbers)
    (lc, rc), (lb, rb) = (tuple(map(tuple, p)) for p in dn.dot_dimension_numbers)
    ragged = int_tuple(fn, "lhs_ragged_dimensions", dn.lhs_ragged_dimensions)
    group = int_tuple(fn, "rhs_group_dimensions", dn.rhs_group_dimensions)
    if len(ragged) != 1:
        raise ValueError(f"{fn}: expected exactly one lhs ragged dimension, got {ragged}")
    (r,) = ragged
    if not 0 <= r < la.ndim:
        raise ValueError(f"{fn}: lhs ragged dimension {r} out of range for rank {la.ndim}")
    out_dt = dtypes.result_type(la.dtype, ra.dtype) if preferred_element_type is None \
        else np.dtype(preferred_element_type)
    lhs = E.convert_element_type(lhs, out_dt)
    rhs = E.convert_element_type(rhs, out_dt)
    n = la.shape[r]
    mask = _group_mask(group_sizes, n, g)
    if r in lb:
        raise NotImplementedError(f"{fn}: a ragged batch dimension is not supported")
    if r in lc:  # ragged contraction: one product per group, stacked in front
        if group:
            raise ValueError(f"{fn}: a contracting ragged dimension takes no rhs group "
                             f"dimensions, got {group}")
        shape = (g, *la.shape)
        m = broadcast_in_dim(transpose(mask, (1, 0)), shape, (0, r + 1))
        lhs_b = broadcast_in_dim(lhs, shape, tuple(range(1, la.ndim + 1)))
        lhs_g = E.select_n(m, full_like(lhs_b, 0), lhs_b)
        out = dot_general(lhs_g, rhs, ((tuple(d + 1 for d in lc), rc),
                                       (tuple(d + 1 for d in lb), rb)), precision=precision)
        nb = len(lb)  # out: (batch..., g, lhs free..., rhs free...) -> g first
        perm = (nb,) + tuple(range(nb)) + tuple(range(nb + 1, core.get_aval(out).ndim))
        return transpose(out, perm)
    if len(group) != 1:
        raise ValueError(f"{fn}: expected exactly one rhs group dimension, got {group}")
    (gd,) = group
    if not 0 <= gd < ra.ndim or gd in rc or gd in rb:
        raise ValueError(f"{fn}: invalid rhs group dimension {gd}")
    if ra.shape[gd] != g:
        raise ValueError(f"{fn}: group_sizes has {g} groups, rhs group dimension {gd} has "
                         f"size {ra.shape[gd]}")
    full = dot_general(lhs, rhs, ((lc, rc), (lb, rb)), precision=precision)
    lfree = [d for d in range(la.ndim) if d not in lc and d not in lb]
    rfree = [d for d in range(ra.ndim) if d not in rc and d not in rb]
    pos_r = len(lb) + lfree.index(r)
    pos_g = len(lb) + len(lfree) + rfree.index(gd)
    fshape = core.get_aval(full).shape
    m = broadcast_in_dim(mask, fshape, (pos_r, pos_g))
    return reduce_sum(E.select_n(m, full_like(full, 0), full), (pos_g,))


def ragged_dot(lhs: Any, rhs: Any, group_sizes: Any, precision: Any = None,
               preferred_element_type: Any = None, group_offset: Any = None) -> Any:
    """Grouped matrix product: rows ``lhs[start_j:end_j]`` (consecutive groups of
    ``group_sizes[j]`` rows) times ``rhs[j]``; rows past ``sum(group_sizes)`` give 0.

    Args:
        lhs: ``[m, k]``. rhs: ``[g, k, n]``. group_sizes: integer ``[g]``.
        precision, preferred_element_type: as ``lax.dot``.
        group_offset: not supported (as JAX on CPU).

    Returns:
        ``[m, n]``.

    Example:
        >>> lax.ragged_dot(jnp.ones((3, 2)), jnp.ones((2, 2, 4)), jnp.array([1, 2])).shape
        (3, 4)
    """
    la = core.get_aval(base.as_operand(lhs, "ragged_dot", "lhs"))
    ra = core.get_aval(base.as_operand(rhs, "ragged_dot", "rhs"))
    if la.ndim != 2 or ra.ndim != 3:
        raise TypeError(f"ragged_dot: expected lhs of rank 2 and rhs of rank 3, got "
                        f"{la.str_short()} and {ra.str_short()}")
    if la.shape[1] != ra.shape[1]:
        raise TypeError(f"ragged_dot: lhs contracting dimension {la.shape[1]} does not match "
                        f"rhs contracting dimension {ra.shape[1]}")
    return ragged_dot_general(lhs, rhs, group_sizes, _RAGGED_DOT_DN, precision,
                              preferred_element_type, group_offset)
