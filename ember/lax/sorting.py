"""Sorting primitives: ``sort`` (variadic, sorted by the first ``num_keys`` operands) and
``top_k``. NaNs sort to the end (ascending), as in JAX.
"""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from ember import core, dtypes
from ember.compiler.hlo import Shape
from ember.compiler.sort_order import stable_order
from ember.compiler.sort_order import top_k as top_k_rows
from ember.core import ShapedArray
from ember.interpreters import ad
from ember.interpreters.batching import axis_size_of, not_mapped
from ember.lax import base, batch_util
from ember.lax import elementwise as E
from ember.lax.shape import broadcasted_iota, concatenate, reshape, transpose
from ember.lax.slicing import GatherDimensionNumbers, GatherScatterMode, gather

# ---------------------------------------------------------------- comparators
# The eager order: NaNs after every number (equal among themselves), -0.0 == 0.0, stable.


def _isnan(b, x):
    return b.op("compare", x, x, comparison_direction="NE")


def _before(b, lhs, rhs):
    lt = b.op("compare", lhs, rhs, comparison_direction="LT")
    if lhs.dtype not in base.float_dtypes:
        return lt
    return b.op("or", lt, b.op("and", b.op("not", _isnan(b, lhs)), _isnan(b, rhs)))


def _equivalent(b, lhs, rhs):
    eq = b.op("compare", lhs, rhs, comparison_direction="EQ")
    if lhs.dtype not in base.float_dtypes:
        return eq
    return b.op("or", eq, b.op("and", _isnan(b, lhs), _isnan(b, rhs)))


def _comparator(ctx, element_types, num_keys: int):
    """A sort comparator ordering by the first ``num_keys`` operands lexicographically."""
    cb = ctx.new_builder("compare")
    pairs = []
    for i, dt in enumerate(element_types):
        scalar = Shape(dt, ())
        pairs.append((cb.parameter(2 * i, scalar), cb.parameter(2 * i + 1, scalar)))
    result = None
    for lhs, rhs in reversed(pairs[:num_keys]):
        lt = _before(cb, lhs, rhs)
        if result is not None:
            lt = cb.op("or", lt, cb.op("and", _equivalent(cb, lhs, rhs), result))
        result = lt
    return cb.build(result)


# ---------------------------------------------------------------- sort


def _sort_impl(*operands, dimension, is_stable, num_keys):
    if operands[0].size == 0:
        return list(operands)
    order = stable_order(operands[:num_keys], dimension)
    return [np.take_along_axis(x, order, axis=dimension) for x in operands]


def _sort_abstract_eval(*avals, dimension, is_stable, num_keys):
    if not avals:
        raise TypeError("sort: requires at least one operand")
    shape = avals[0].shape
    for i, a in enumerate(avals):
        if a.shape != shape:
            shapes = ", ".join(str(b.shape) for b in avals)
            raise TypeError(f"sort: all operands must have the same shape, got {shapes} "
                            f"(operand {i} differs)")
    if isinstance(dimension, bool) or not isinstance(dimension, int) or \
            not 0 <= dimension < len(shape):
        raise ValueError(f"sort: dimension {dimension!r} is out of bounds for operands of "
                         f"shape {shape}")
    if isinstance(num_keys, bool) or not isinstance(num_keys, int) or \
            not 1 <= num_keys <= len(avals):
        raise ValueError(f"sort: num_keys={num_keys!r} must be between 1 and the number of "
                         f"operands ({len(avals)})")
    for i, a in enumerate(avals[:num_keys]):
        if dtypes.is_complex(a.dtype):
            raise TypeError(f"sort: complex keys are not supported (operand {i})")
    return [ShapedArray(shape, a.dtype, a.weak_type) for a in avals]


sort_p = core.MultipleResultsPrimitive("sort")
sort_p.def_impl(_sort_impl)
sort_p.def_abstract_eval(_sort_abstract_eval)


@sort_p.def_lowering
def _sort_lowering(ctx, *operands, dimension, is_stable, num_keys):
    # Always stable: the eager impl is, whatever is_stable says.
    cmp = _comparator(ctx, [x.dtype for x in operands], num_keys)
    out = ctx.b.op("sort", *operands, calls=[cmp], dimension=dimension, is_stable=True)
    return [ctx.b.op("get_tuple_element", out, index=i) for i in range(len(operands))]


def _take_along(t: Any, idx: Any, dimension: int) -> Any:
    """``t`` permuted along ``dimension`` by the int32 positions ``idx`` (a gather; its
    shape is ``idx``'s)."""
    shape = core.get_aval(idx).shape
    nd = len(shape)
    if 0 in shape or 0 in core.get_aval(t).shape:
        return E.full_of(shape, 0, core.get_aval(t).dtype)
    coords = [idx if d == dimension else broadcasted_iota(np.int32, shape, d) for d in range(nd)]
    indices = concatenate([reshape(c, shape + (1,)) for c in coords], nd)
    dn = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=tuple(range(nd)),
                                start_index_map=tuple(range(nd)))
    return gather(t, indices, dn, (1,) * nd, mode=GatherScatterMode.PROMISE_IN_BOUNDS)


def _sort_jvp(primals, tangents, *, dimension, is_stable, num_keys):
    # Sort an iota along with the operands: it gives the permutation the tangents follow.
    shape = core.get_aval(primals[0]).shape
    *out, perm = sort_p.bind(*primals, broadcasted_iota(np.int32, shape, dimension),
                             dimension=dimension, is_stable=is_stable, num_keys=num_keys)
    return out, [ad.Zero.from_primal_value(o) if type(t) is ad.Zero else
                 _take_along(t, perm, dimension) for o, t in zip(out, tangents)]


sort_p.def_jvp(_sort_jvp)


@sort_p.def_batching
def _sort_batch(vals, dims, *, dimension, is_stable, num_keys):
    # Every operand gets the first mapped operand's batch dim; unmapped ones are broadcast
    # (they are permuted per batch element, so they must be materialized).
    size = axis_size_of(vals, dims)
    at = next(d for d in dims if d is not not_mapped)
    xs = [batch_util.move_to(x, d, at, size) for x, d in zip(vals, dims)]
    out = sort_p.bind(*xs, dimension=batch_util.batched_axis(dimension, at),
                      is_stable=is_stable, num_keys=num_keys)
    return out, [at] * len(out)


def sort(operand: Any, dimension: int = -1, is_stable: bool = True, num_keys: int = 1) -> Any:
    """Sorts ``operand`` (or a sequence of operands, by their first ``num_keys``) along a dim.

    NaNs sort to the end; complex keys sort by real part, then imaginary part. With a
    sequence, every operand is permuted like the keys.

    Example:
        >>> lax.sort(jnp.array([3., 1., 2.]))
        Array([1., 2., 3.], dtype=float32)
    """
    single = not isinstance(operand, (tuple, list))
    operands = [operand] if single else list(operand)
    if not operands:
        raise TypeError("sort: requires at least one operand")
    operands = [base.as_operand(x, "sort", f"operand {i}") for i, x in enumerate(operands)]
    ndim = core.get_aval(operands[0]).ndim
    if ndim == 0:
        raise ValueError("sort: operand must have rank >= 1, got a scalar")
    dimension = base.check_axis("sort", "dimension", dimension, ndim)
    if isinstance(num_keys, bool) or not isinstance(num_keys, (int, np.integer)):
        raise TypeError(f"sort: num_keys must be an integer, got {num_keys!r}")
    num_keys = int(num_keys)
    keys = operands[:num_keys]
    split = [] if num_keys > len(operands) else \
        [part for k in keys for part in ((E.real(k), E.imag(k))
                                         if dtypes.is_complex(core.get_aval(k).dtype) else (k,))]
    if len(split) > len(keys):
        # Complex keys order lexicographically (real, imaginary), as JAX's comparator does:
        # sort by the split keys, carrying every operand.
        out = sort_p.bind(*split, *operands, dimension=dimension, is_stable=bool(is_stable),
                          num_keys=len(split))[len(split):]
    else:
        out = sort_p.bind(*operands, dimension=dimension, is_stable=bool(is_stable),
                          num_keys=num_keys)
    return out[0] if single else tuple(out)


def sort_key_val(keys: Any, values: Any, dimension: int = -1,
                 is_stable: bool = True) -> tuple[Any, Any]:
    """Sorts ``keys`` along ``dimension`` and permutes ``values`` the same way.

    Example:
        >>> lax.sort_key_val(jnp.array([2, 1]), jnp.array([10, 20]))
        (Array([1, 2], dtype=int32), Array([20, 10], dtype=int32))
    """
    k, v = sort((keys, values), dimension=dimension, is_stable=is_stable, num_keys=1)
    return k, v


# ---------------------------------------------------------------- top_k


def _top_k_impl(x, *, k):
    # Descending and stable (lower index first among ties; NaN counts as the largest).
    return list(top_k_rows(x, k))


def _top_k_abstract_eval(x, *, k):
    if x.ndim == 0:
        raise ValueError("top_k: operand must have rank >= 1, got a scalar")
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"top_k: k must be a non-negative integer, got {k!r}")
    if k > x.shape[-1]:
        raise ValueError(f"top_k: k={k} is larger than the last dimension of the operand "
                         f"(shape {x.shape})")
    base.check_dtype("top_k", "operand", x.dtype, base.bool_dtypes + base.int_dtypes +
                     base.float_dtypes)
    shape = x.shape[:-1] + (k,)
    return [ShapedArray(shape, x.dtype, x.weak_type), ShapedArray(shape, dtypes.int32)]


top_k_p = core.MultipleResultsPrimitive("top_k")
top_k_p.def_impl(_top_k_impl)
top_k_p.def_abstract_eval(_top_k_abstract_eval)


@top_k_p.def_lowering
def _top_k_lowering(ctx, x, *, k):
    # A library routine (``sort_order.top_k``) that partitions instead of sorting whole rows.
    dims = x.shape.dims[:-1] + (k,)
    shape = Shape.tuple([Shape(x.dtype, dims), Shape(np.int32, dims)])
    out = ctx.b.op("custom_call", x, shape=shape, call_target_name="ember.top_k", k=k)
    return [ctx.b.op("get_tuple_element", out, index=i) for i in range(2)]


def _top_k_jvp(primals, tangents, *, k):
    values, idx = top_k_p.bind(*primals, k=k)
    t, = tangents
    t_values = ad.Zero.from_primal_value(values) if type(t) is ad.Zero else \
        _take_along(t, idx, len(core.get_aval(idx).shape) - 1)
    return [values, idx], [t_values, ad.Zero.from_primal_value(idx)]


top_k_p.def_jvp(_top_k_jvp)


@top_k_p.def_batching
def _top_k_batch(vals, dims, *, k):
    # top_k works on the last axis: a batch dim there moves to the front; elsewhere it stays.
    (x,), (d,) = vals, dims
    if d == core.get_aval(x).ndim - 1:
        x, d = batch_util.moveaxis(x, d, 0), 0
    out = top_k_p.bind(x, k=k)
    return out, [d, d]


def top_k(operand: Any, k: int, *, axis: int = -1) -> list[Any]:
    """The ``k`` largest entries along ``axis`` and their (int32) indices, as a list (JAX's).

    Example:
        >>> lax.top_k(jnp.array([1., 3., 2.]), 2)
        [Array([3., 2.], dtype=float32), Array([1, 2], dtype=int32)]
    """
    operand = base.as_operand(operand, "top_k")
    k = core.concrete_or_error(k, "top_k: k must be a concrete integer")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"top_k: k must be an integer, got {k!r}")
    nd = np.ndim(operand)
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or \
            not -nd <= axis < nd:
        raise ValueError(f"top_k: axis {axis!r} is out of bounds for an operand of rank {nd}")
    axis = int(axis) % nd
    if axis == nd - 1:
        return list(top_k_p.bind(operand, k=int(k)))
    # top_k_p works on the last axis: move ``axis`` there and back.
    perm = tuple(d for d in range(nd) if d != axis) + (axis,)
    inv = tuple(int(i) for i in np.argsort(perm))
    outs = top_k_p.bind(transpose(operand, perm), k=int(k))
    return [transpose(o, inv) for o in outs]


# ---------------------------------------------------------------- approx_max_k / approx_min_k
# Exact answers (as JAX's CPU backend gives): top_k along the reduction dimension. With
# aggregate_to_topk=False the result keeps as many candidates as XLA's approximate algorithm
# would return (``_approx_output_size``), sorted, the first k being the exact top k.


def _log2_floor(n: int) -> int:
    return n.bit_length() - 1 if n > 0 else 0


def _log2_ceil(n: int) -> int:
    return (n - 1).bit_length() if n > 0 else 0


def _approx_output_size(name: str, n: int, rank: int, k: int, recall_target: float,
                        input_size_override: int) -> int:
    """How many candidates XLA's approximate top-k keeps along a dimension of ``n``: the
    input is cut into 2**r windows (one candidate each, 128 lanes, 1024 for rank 1) with r
    the largest reduction whose expected recall still meets ``recall_target``."""
    tiling = 1024 if rank == 1 else 128
    if n <= tiling:
        return n
    if input_size_override >= 0 and n > input_size_override:
        raise ValueError(f"{name}: reduction_input_size_override ({input_size_override}) must "
                         f"be at least the size of the reduction dimension ({n})")
    logical = input_size_override if input_size_override >= 0 else n
    if k == 1:
        log2_reduction = _log2_ceil(-(-logical // tiling))
    else:
        if recall_target == 1.0:
            return n
        # The expected recall with m windows is about exp((1 - k) / m).
        windows = builtins.max(int((1.0 - k) / math.log(recall_target)), tiling)
        log2_reduction = _log2_floor(logical // windows)
        if log2_reduction == 0:
            return n
        log2_reduction = builtins.min(log2_reduction, _log2_ceil(n // tiling))
    lanes = -(-n // tiling)  # ceil(n / tiling)
    return -(-lanes // (1 << log2_reduction)) * tiling


def _approx_check(name: str, operand: Any, k: Any, reduction_dimension: Any,
                  recall_target: Any, reduction_input_size_override: Any) -> tuple:
    """``approx_max_k``/``approx_min_k``'s argument checks: ``(operand, k, dim, recall)``."""
    operand = base.as_operand(operand, name)
    aval = core.get_aval(operand)
    if aval.ndim == 0:
        raise TypeError(f"{name}: operand must have >= 1 dimension, got shape ()")
    k = core.concrete_or_error(k, f"{name}: k must be a concrete integer")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"{name}: k must be an integer, got {k!r}")
    k = int(k)
    if k <= 0:
        raise ValueError(f"{name}: k must be positive, got {k}")
    if isinstance(reduction_dimension, bool) or not isinstance(reduction_dimension,
                                                               (int, np.integer)):
        raise TypeError(f"{name}: reduction_dimension must be an integer, got "
                        f"{reduction_dimension!r}")
    if not -aval.ndim <= reduction_dimension < aval.ndim:
        raise ValueError(f"{name}: reduction_dimension {reduction_dimension} is out of bounds "
                         f"for an operand of rank {aval.ndim}")
    dim = int(reduction_dimension) % aval.ndim
    n = aval.shape[dim]
    if n < k:
        raise ValueError(f"{name}: k ({k}) must not exceed the size of the reduction dimension "
                         f"({n})")
    if aval.dtype not in base.float_dtypes:
        raise ValueError(f"{name}: operand must have a floating dtype, got {aval.dtype}")
    try:
        recall = float(recall_target)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: recall_target must be a float, got {recall_target!r}") \
            from None
    if not 0.0 < recall <= 1.0:
        raise ValueError(f"{name}: recall_target must be in (0, 1], got {recall_target!r}")
    if isinstance(reduction_input_size_override, bool) or not isinstance(
            reduction_input_size_override, (int, np.integer)):
        raise TypeError(f"{name}: reduction_input_size_override must be an integer, got "
                        f"{reduction_input_size_override!r}")
    return operand, k, dim, recall


def _approx_top_k(name: str, operand: Any, k: int, reduction_dimension: int,
                  recall_target: float, reduction_input_size_override: int,
                  aggregate_to_topk: bool, is_max_k: bool) -> list[Any]:
    """The exact computation behind ``approx_top_k_p`` (``lax.internal_prims``)."""
    operand, k, dim, recall = _approx_check(name, operand, k, reduction_dimension,
                                            recall_target, reduction_input_size_override)
    aval = core.get_aval(operand)
    size = k if aggregate_to_topk else _approx_output_size(
        name, aval.shape[dim], aval.ndim, k, recall, int(reduction_input_size_override))
    if is_max_k:
        return top_k(operand, size, axis=dim)  # a list, as JAX's
    # The smallest first: top_k of the negation, with NaNs (greatest, as in sort) last.
    nan = E.ne(operand, operand)
    key = E.select(nan, E.full_of(aval.shape, -np.inf, aval.dtype), E.neg(operand))
    _, idx = top_k(key, size, axis=dim)
    return [_take_along(operand, idx, dim), idx]


def _bind_approx(name: str, operand: Any, k: Any, reduction_dimension: Any,
                 recall_target: Any, reduction_input_size_override: Any,
                 aggregate_to_topk: Any, is_max_k: bool) -> list[Any]:
    # JAX's ``approx_top_k`` primitive, with its params as given (checked first, so errors
    # name the function called).
    from ember.lax.internal_prims import approx_top_k_p
    operand, k, _, recall = _approx_check(name, operand, k, reduction_dimension,
                                          recall_target, reduction_input_size_override)
    return approx_top_k_p.bind(
        operand, k=k, reduction_dimension=int(reduction_dimension), recall_target=recall,
        is_max_k=is_max_k, reduction_input_size_override=int(reduction_input_size_override),
        aggregate_to_topk=bool(aggregate_to_topk))


def approx_max_k(operand: Any, k: int, reduction_dimension: int = -1,
                 recall_target: float = 0.95, reduction_input_size_override: int = -1,
                 aggregate_to_topk: bool = True) -> list[Any]:
    """The ``k`` largest values along ``reduction_dimension`` and their int32 indices.

    JAX's approximate top-k for TPUs; ember (like JAX's CPU backend) returns the exact
    answer. ``aggregate_to_topk=False`` returns the candidates the approximate algorithm
    would keep (at least ``k``, sorted, the first ``k`` exact); ``recall_target`` (in
    (0, 1]) and ``reduction_input_size_override`` only affect that count.

    Args:
        operand: a floating array of rank >= 1.
        k: how many values to return.
        reduction_dimension: the axis to search.
        recall_target: the recall the approximation targets.
        reduction_input_size_override: the logical size of the reduction dimension, when
            ``operand`` is a shard of a larger input (-1: its own size).
        aggregate_to_topk: whether to return exactly ``k`` values.

    Returns:
        ``[values, indices]``, each of ``operand``'s shape with ``k`` (or the candidate
        count) along ``reduction_dimension``; values in descending order.

    Example:
        >>> lax.approx_max_k(jnp.array([1., 5., 3.]), 2)
        [Array([5., 3.], dtype=float32), Array([1, 2], dtype=int32)]
    """
    return _bind_approx("approx_max_k", operand, k, reduction_dimension, recall_target,
                        reduction_input_size_override, aggregate_to_topk, True)


def approx_min_k(operand: Any, k: int, reduction_dimension: int = -1,
                 recall_target: float = 0.95, reduction_input_size_override: int = -1,
                 aggregate_to_topk: bool = True) -> list[Any]:
    """The ``k`` smallest values along ``reduction_dimension`` and their int32 indices
    (ascending; NaNs count as the greatest values). Exact, like ``approx_max_k``.

    Example:
        >>> lax.approx_min_k(jnp.array([1., 5., 3.]), 2)
        [Array([1., 3.], dtype=float32), Array([0, 2], dtype=int32)]
    """
    return _bind_approx("approx_min_k", operand, k, reduction_dimension, recall_target,
                        reduction_input_size_override, aggregate_to_topk, False)


__all__ = ["sort", "sort_key_val", "top_k", "sort_p", "top_k_p", "approx_max_k",
           "approx_min_k"]
