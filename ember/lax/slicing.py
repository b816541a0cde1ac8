"""Slicing primitives: slice, dynamic_slice, dynamic_update_slice, gather and the scatters.

Semantics follow XLA/JAX: dynamic start indices are clamped so the slice stays in bounds;
gather and scatter take a ``GatherScatterMode``: CLIP clamps the start of every window,
FILL_OR_DROP fills out-of-bounds gather windows with ``fill_value`` and drops out-of-bounds
scatter windows, PROMISE_IN_BOUNDS does what XLA's native ops do: gather clamps, scatter
drops (so the transpose of an out-of-bounds gather adds nothing, as in JAX). The NumPy impls
build explicit coordinate grids, so no kernel can index out of range.
"""

from __future__ import annotations

import builtins
import enum
import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ember import core, dtypes
from ember.compiler.eval_structural import clamped_starts, gather_windows, scatter_windows
from ember.compiler.hlo import Shape
from ember.core import Tracer
from ember.interpreters import ad
from ember.interpreters.batching import axis_size_of
from ember.interpreters.partial_eval import trace_to_jaxpr
from ember.jaxpr import Literal
from ember.lax import base, batch_util
from ember.lax import elementwise as E
from ember.lax.base import all_dtypes, check_dtype, int_dtypes, standard_primitive
from ember.lax.elementwise import add, convert_element_type, lt, select_n
from ember.lax.shape import (
    broadcast_in_dim,
    concatenate,
    expand_dims,
    int_tuple,
    iota,
    pad,
    reshape,
    squeeze,
)

# ---------------------------------------------------------------- slice


def _slice_shape(x, *, start_indices, limit_indices, strides):
    fn = "slice"
    if len(start_indices) != x.ndim:
        raise TypeError(f"{fn}: start_indices {start_indices} must have one entry per operand "
                        f"dimension (operand shape {x.shape})")
    if len(limit_indices) != x.ndim:
        raise TypeError(f"{fn}: limit_indices {limit_indices} must have one entry per operand "
                        f"dimension (operand shape {x.shape})")
    if strides is not None and len(strides) != x.ndim:
        raise TypeError(f"{fn}: strides {strides} must have one entry per operand dimension "
                        f"(operand shape {x.shape})")
    if any(s < 0 for s in start_indices):
        raise TypeError(f"{fn}: start_indices must be non-negative, got {start_indices}")
    if any(lim > d for lim, d in zip(limit_indices, x.shape)):
        raise TypeError(f"{fn}: limit_indices {limit_indices} must be less than or equal to "
                        f"the operand shape {x.shape}")
    if any(lim < s for s, lim in zip(start_indices, limit_indices)):
        raise TypeError(f"{fn}: limit_indices must be greater than or equal to start_indices, "
                        f"got start_indices {start_indices} and limit_indices {limit_indices}")
    strides = strides or (1,) * x.ndim
    if any(s <= 0 for s in strides):
        raise TypeError(f"{fn}: strides must be positive, got {strides}")
    return tuple((lim - s + st - 1) // st
                 for s, lim, st in zip(start_indices, limit_indices, strides))


def _slice_impl(x, *, start_indices, limit_indices, strides):
    strides = strides or (1,) * x.ndim
    return x[tuple(builtins.slice(s, lim, st)
                   for s, lim, st in zip(start_indices, limit_indices, strides))]


slice_p = standard_primitive("slice", _slice_impl, _slice_shape, lambda x, **_: x.dtype)


@slice_p.def_lowering
def _slice_lowering(ctx, x, *, start_indices, limit_indices, strides):
    strides = strides or (1,) * len(start_indices)
    return ctx.b.op("slice", x, start_indices=tuple(start_indices),
                    limit_indices=tuple(limit_indices), strides=tuple(strides))


def _slice_transpose(ct, x, *, start_indices, limit_indices, strides):
    # Zeros around and between the sliced elements: a pad.
    ct_shape = core.get_aval(ct).shape
    strides = strides or (1,) * len(ct_shape)
    ends = [s + (0 if n == 0 else 1 + (n - 1) * st)
            for s, n, st in zip(start_indices, ct_shape, strides)]
    return [pad(ct, 0, tuple((s, d - e, st - 1) for s, d, e, st in zip(
        start_indices, x.aval.shape, ends, strides)))]


ad.deflinear2(slice_p, _slice_transpose)


def slice(operand: Any, start_indices: Sequence[int], limit_indices: Sequence[int],  # noqa: A001
          strides: Sequence[int] | None = None) -> Any:
    """Static slice ``operand[start:limit:stride]`` along every dimension.

    Example:
        >>> lax.slice(jnp.arange(6), (1,), (5,), (2,))
        Array([1, 3], dtype=int32)
    """
    operand = base.as_operand(operand, "slice")
    start = int_tuple("slice", "start_indices", start_indices)
    limit = int_tuple("slice", "limit_indices", limit_indices)
    st = None if strides is None else int_tuple("slice", "strides", strides)
    if st == (1,) * len(start):  # (strides of another length are the shape rule's error)
        st = None
    return slice_p.bind(operand, start_indices=start, limit_indices=limit, strides=st)


def slice_in_dim(operand: Any, start_index: int | None, limit_index: int | None,
                 stride: int = 1, axis: int = 0) -> Any:
    """``lax.slice`` along one axis; None means the start/end and negative indices wrap.

    Example:
        >>> lax.slice_in_dim(jnp.arange(6), 1, -1)
        Array([1, 2, 3, 4], dtype=int32)
    """
    shape = core.get_aval(base.as_operand(operand, "slice_in_dim")).shape
    axis = base.check_axis("slice_in_dim", "axis", axis, len(shape))
    n = shape[axis]
    start = 0 if start_index is None else int(start_index)
    limit = n if limit_index is None else int(limit_index)
    start = start + n if start < 0 else start
    limit = limit + n if limit < 0 else limit
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, limit, int(stride)
    return slice(operand, starts, limits, strides)


def index_in_dim(operand: Any, index: int, axis: int = 0, keepdims: bool = True) -> Any:
    """Element ``index`` (static, negative wraps) along ``axis``, keeping the axis or not.

    Example:
        >>> lax.index_in_dim(jnp.arange(6).reshape(2, 3), -1, 0, keepdims=False)
        Array([3, 4, 5], dtype=int32)
    """
    shape = core.get_aval(base.as_operand(operand, "index_in_dim")).shape
    axis = base.check_axis("index_in_dim", "axis", axis, len(shape))
    n, index = shape[axis], int(index)
    wrapped = index + n if index < 0 else index
    if not 0 <= wrapped < n:
        raise IndexError(f"index_in_dim: index {index} is out of bounds for axis {axis} with "
                         f"size {n}")
    out = slice_in_dim(operand, wrapped, wrapped + 1, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


# ---------------------------------------------------------------- dynamic_slice


def _check_start_indices(fn: str, x, idx_avals) -> None:
    if len(idx_avals) != x.ndim:
        raise TypeError(f"{fn}: the number of start indices ({len(idx_avals)}) must equal the "
                        f"rank of the operand (operand shape {x.shape})")
    for i, a in enumerate(idx_avals):
        if a.shape != ():
            raise TypeError(f"{fn}: start index {i} must be a scalar, got shape {a.shape}")
        if a.dtype not in int_dtypes:
            raise TypeError(f"{fn}: start indices must have an integer dtype, got {a.dtype} "
                            f"for start index {i}")


def _dynamic_slice_shape(x, *idx, slice_sizes):
    _check_start_indices("dynamic_slice", x, idx)
    if len(slice_sizes) != x.ndim:
        raise TypeError(f"dynamic_slice: slice_sizes {slice_sizes} must have one entry per "
                        f"operand dimension (operand shape {x.shape})")
    if any(not 0 <= s <= d for s, d in zip(slice_sizes, x.shape)):
        raise TypeError(f"dynamic_slice: slice_sizes {slice_sizes} must be non-negative and "
                        f"at most the operand shape {x.shape}")
    return tuple(slice_sizes)


def _dynamic_slice_impl(x, *idx, slice_sizes):
    starts = clamped_starts(x.shape, slice_sizes, idx)
    return x[tuple(builtins.slice(s, s + n) for s, n in zip(starts, slice_sizes))]


dynamic_slice_p = standard_primitive(
    "dynamic_slice", _dynamic_slice_impl, _dynamic_slice_shape, lambda x, *_, **__: x.dtype,
    lambda x, *_, **__: x.weak_type)


def _uniform_starts(ctx, starts):
    """Start indices of one element type (HLO requires it)."""
    if len({s.dtype for s in starts}) <= 1:
        return list(starts)
    # s64 holds every value the way the eager impl's int64 cast does.
    s64 = Shape(np.int64, ())
    return [s if s.dtype == np.int64 else ctx.b.op("convert", s, shape=s64) for s in starts]


@dynamic_slice_p.def_lowering
def _dynamic_slice_lowering(ctx, x, *starts, slice_sizes):
    return ctx.b.op("dynamic_slice", x, *_uniform_starts(ctx, starts),
                    slice_sizes=tuple(slice_sizes))


def _dynamic_slice_transpose(ct, x, *idx, slice_sizes):
    if any(ad.is_undefined_primal(i) for i in idx):
        raise ValueError("dynamic_slice: cannot transpose with respect to the start indices")
    return [dynamic_update_slice_p.bind(E.zeros_of(x), ct, *idx)] + [None] * len(idx)


ad.defjvp(dynamic_slice_p, lambda g, x, *idx, slice_sizes: dynamic_slice_p.bind(
    g, *idx, slice_sizes=slice_sizes))
E.def_transpose(dynamic_slice_p, _dynamic_slice_transpose)


_I32 = np.iinfo(np.int32)


def _start_index_operands(fn: str, shape: tuple[int, ...], start_indices: Any) -> list[Any]:
    """Checks start indices; Python ints are normalized, traced negatives wrap once."""
    if isinstance(start_indices, Tracer) or hasattr(start_indices, "aval") or isinstance(
            start_indices, np.ndarray):
        aval = core.get_aval(start_indices)
        if aval.ndim != 1:
            raise TypeError(f"{fn}: start_indices must be a sequence of scalars or a 1-d array, "
                            f"got shape {aval.shape}")
        start_indices = [index_in_dim(start_indices, i, keepdims=False)
                         for i in range(aval.shape[0])]
    try:
        start_indices = list(start_indices)
    except TypeError:
        raise TypeError(f"{fn}: start_indices must be a sequence, got {start_indices!r}") \
            from None
    if len(start_indices) != len(shape):
        raise ValueError(f"{fn}: the number of start indices ({len(start_indices)}) must "
                         f"equal the rank of the operand (operand shape {shape})")
    typed = [np.dtype(type(s)) if isinstance(s, np.integer) else core.get_aval(s).dtype
             for s in start_indices
             if not isinstance(s, (int, bool, np.bool_)) and hasattr(s, "dtype")]
    if len({t for t in typed}) > 1:  # (Python ints take any integer type)
        raise TypeError(f"index arguments to {fn} must be integers of the same type, got: "
                        f"{', '.join(np.dtype(t).name for t in typed)}")
    out = []
    for i, (s, d) in enumerate(zip(start_indices, shape)):
        if isinstance(s, (bool, np.bool_)):
            raise TypeError(f"{fn}: start index {i} must be an integer, got {s!r}")
        if isinstance(s, (int, np.integer)):
            s = int(s)
            s = s + d if s < 0 else s
            # (clipped only to int32: an out-of-bounds index keeps its value for checkify)
            out.append(np.int32(np.clip(s, _I32.min, _I32.max)))
            continue
        base.as_operand(s, fn, f"start index {i}")
        aval = core.get_aval(s)
        if aval.dtype not in int_dtypes:
            raise TypeError(f"{fn}: start indices must have an integer dtype, got {aval.dtype} "
                            f"for start index {i}")
        if aval.shape != ():
            raise TypeError(f"{fn}: start index {i} must be a scalar, got shape {aval.shape}")
        out.append(normalize_index(s, d))
    return out


def normalize_index(i: Any, n: int) -> Any:
    """``i + n`` where ``i < 0`` for a (possibly traced) integer index; unsigned pass through."""
    aval = core.get_aval(i)
    if dtypes.is_unsigned(aval.dtype) and aval.dtype.itemsize >= 4:
        return i
    if aval.dtype.itemsize < 4:
        i = convert_element_type(i, dtypes.default_int_dtype())
        aval = core.get_aval(i)
    if not isinstance(i, Tracer):
        v = np.asarray(i).astype(np.int64)
        return np.asarray(np.clip(np.where(v < 0, v + n, v), -1, n), aval.dtype)
    return select_n(lt(i, 0), i, add(i, n))


def dynamic_slice(operand: Any, start_indices: Any, slice_sizes: Sequence[int]) -> Any:
    """Slice of static size ``slice_sizes`` at dynamic ``start_indices`` (clamped in bounds).

    Negative start indices wrap once (``i + dim``), then XLA's clamping keeps the slice
    inside the operand.

    Example:
        >>> lax.dynamic_slice(jnp.arange(5), (jnp.array(3),), (2,))
        Array([3, 4], dtype=int32)
    """
    operand = base.as_operand(operand, "dynamic_slice")
    shape = core.get_aval(operand).shape
    idx = _start_index_operands("dynamic_slice", shape, start_indices)
    sizes = int_tuple("dynamic_slice", "slice_sizes", slice_sizes)
    return dynamic_slice_p.bind(operand, *idx, slice_sizes=sizes)


def dynamic_slice_in_dim(operand: Any, start_index: Any, slice_size: int,
                         axis: int = 0) -> Any:
    """``dynamic_slice`` along one axis (full extent elsewhere).

    Example:
        >>> lax.dynamic_slice_in_dim(jnp.arange(5), 1, 2)
        Array([1, 2], dtype=int32)
    """
    shape = core.get_aval(base.as_operand(operand, "dynamic_slice_in_dim")).shape
    axis = base.check_axis("dynamic_slice_in_dim", "axis", axis, len(shape))
    starts: list[Any] = [0] * len(shape)
    sizes = list(shape)
    starts[axis], sizes[axis] = start_index, int(slice_size)
    return dynamic_slice(operand, starts, sizes)


def dynamic_index_in_dim(operand: Any, index: Any, axis: int = 0,
                         keepdims: bool = True) -> Any:
    """Element ``index`` (dynamic, clamped) along ``axis``.

    Example:
        >>> lax.dynamic_index_in_dim(jnp.arange(5), jnp.array(7), keepdims=False)
        Array(4, dtype=int32)
    """
    shape = core.get_aval(base.as_operand(operand, "dynamic_index_in_dim")).shape
    axis = base.check_axis("dynamic_index_in_dim", "axis", axis, len(shape))
    out = dynamic_slice_in_dim(operand, index, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


# ---------------------------------------------------------------- dynamic_update_slice


def _dus_shape(x, update, *idx):
    fn = "dynamic_update_slice"
    _check_start_indices(fn, x, idx)
    if update.ndim != x.ndim:
        raise TypeError(f"{fn}: update must have the operand's rank, got update shape "
                        f"{update.shape} for operand shape {x.shape}")
    if any(u > d for u, d in zip(update.shape, x.shape)):
        raise TypeError(f"{fn}: update shape {update.shape} must not exceed the operand shape "
                        f"{x.shape}")
    return x.shape


def _dus_dtype(x, update, *idx):
    if x.dtype != update.dtype:
        raise TypeError(f"dynamic_update_slice: operand and update must have the same dtype, "
                        f"got {x.dtype} and {update.dtype}")
    return x.dtype


def _dus_impl(x, update, *idx):
    starts = clamped_starts(x.shape, update.shape, idx)
    out = np.array(x, copy=True)
    out[tuple(builtins.slice(s, s + n) for s, n in zip(starts, update.shape))] = update
    return out


dynamic_update_slice_p = standard_primitive(
    "dynamic_update_slice", _dus_impl, _dus_shape, _dus_dtype,
    lambda x, *_, **__: x.weak_type)


@dynamic_update_slice_p.def_lowering
def _dynamic_update_slice_lowering(ctx, x, update, *starts):
    return ctx.b.op("dynamic_update_slice", x, update, *_uniform_starts(ctx, starts))


def _dus_jvp(primals, tangents):
    x, update, *idx = primals
    out = dynamic_update_slice_p.bind(x, update, *idx)
    tx, tu = tangents[:2]
    if type(tx) is ad.Zero and type(tu) is ad.Zero:
        return out, ad.Zero.from_primal_value(out)
    return out, dynamic_update_slice_p.bind(E.instantiate(tx), E.instantiate(tu), *idx)


def _dus_transpose(ct, x, update, *idx):
    if any(ad.is_undefined_primal(i) for i in idx):
        raise ValueError("dynamic_update_slice: cannot transpose with respect to the start "
                         "indices")
    u_aval = update.aval if ad.is_undefined_primal(update) else core.get_aval(update)
    ct_x = ct_u = None
    if ad.is_undefined_primal(x):
        ct_x = dynamic_update_slice_p.bind(ct, E.zeros_of(u_aval), *idx)
    if ad.is_undefined_primal(update):
        ct_u = dynamic_slice_p.bind(ct, *idx, slice_sizes=u_aval.shape)
    return [ct_x, ct_u] + [None] * len(idx)


dynamic_update_slice_p.def_jvp(_dus_jvp)
E.def_transpose(dynamic_update_slice_p, _dus_transpose)


def dynamic_update_slice(operand: Any, update: Any, start_indices: Any) -> Any:
    """``operand`` with ``update`` written at ``start_indices`` (clamped so it fits).

    Example:
        >>> lax.dynamic_update_slice(jnp.zeros(4), jnp.ones(2), (3,))
        Array([0., 0., 1., 1.], dtype=float32)
    """
    operand = base.as_operand(operand, "dynamic_update_slice")
    update = base.as_operand(update, "dynamic_update_slice", "update")
    shape = core.get_aval(operand).shape
    idx = _start_index_operands("dynamic_update_slice", shape, start_indices)
    return dynamic_update_slice_p.bind(operand, update, *idx)


def dynamic_update_slice_in_dim(operand: Any, update: Any, start_index: Any,
                                axis: int) -> Any:
    """``dynamic_update_slice`` along one axis (start 0 elsewhere).

    Example:
        >>> lax.dynamic_update_slice_in_dim(jnp.zeros(3), jnp.ones(1), 1, 0)
        Array([0., 1., 0.], dtype=float32)
    """
    shape = core.get_aval(base.as_operand(operand, "dynamic_update_slice_in_dim")).shape
    axis = base.check_axis("dynamic_update_slice_in_dim", "axis", axis, len(shape))
    starts: list[Any] = [0] * len(shape)
    starts[axis] = start_index
    return dynamic_update_slice(operand, update, starts)


def dynamic_update_index_in_dim(operand: Any, update: Any, index: Any, axis: int) -> Any:
    """Writes ``update`` (with or without the indexed axis) at ``index`` along ``axis``.

    Example:
        >>> lax.dynamic_update_index_in_dim(jnp.zeros((2, 2)), jnp.ones(2), 1, 0)[1]
        Array([1., 1.], dtype=float32)
    """
    shape = core.get_aval(base.as_operand(operand, "dynamic_update_index_in_dim")).shape
    axis = base.check_axis("dynamic_update_index_in_dim", "axis", axis, len(shape))
    uaval = core.get_aval(base.as_operand(update, "dynamic_update_index_in_dim", "update"))
    if uaval.ndim == len(shape) - 1:
        update = expand_dims(update, (axis,))
    return dynamic_update_slice_in_dim(operand, update, index, axis)


# ---------------------------------------------------------------- gather / scatter params


class GatherScatterMode(enum.Enum):
    """How gather/scatter treat out-of-bounds indices.

    CLIP clamps indices into range; FILL_OR_DROP fills out-of-bounds gathers with
    ``fill_value`` and drops out-of-bounds scatter updates; PROMISE_IN_BOUNDS lets the
    implementation assume indices are in bounds (ember does what XLA does then: gather
    clamps, scatter drops).

    Example:
        >>> GatherScatterMode.from_any("clip")
        <GatherScatterMode.CLIP: 0>
    """

    CLIP = 0
    FILL_OR_DROP = 1
    PROMISE_IN_BOUNDS = 2

    @staticmethod
    def from_any(s: Any) -> GatherScatterMode:
        if isinstance(s, GatherScatterMode):
            return s
        if s is None:
            return GatherScatterMode.FILL_OR_DROP
        if s == "clip":
            return GatherScatterMode.CLIP
        if s in ("fill", "drop"):
            return GatherScatterMode.FILL_OR_DROP
        if s == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        raise ValueError(f"Unknown gather mode {s!r}; expected one of 'clip', 'fill', 'drop', "
                         "'promise_in_bounds' or a GatherScatterMode")

    def __str__(self) -> str:
        return f"GatherScatterMode.{self.name}"


class GatherDimensionNumbers(NamedTuple):
    """Describes how a gather maps indices to operand windows (XLA's GatherDimensionNumbers).

    Example:
        >>> GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
        ...                        start_index_map=(0,))
    """

    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """Describes how a scatter maps indices and updates to operand windows.

    Example:
        >>> ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
        ...                         scatter_dims_to_operand_dims=(0,))
    """

    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


def _canon_dnums(fn: str, cls, dnums: Any):
    if isinstance(dnums, dict):
        dnums = cls(**dnums)
    if not isinstance(dnums, tuple) or len(dnums) not in (3, 5):
        raise TypeError(f"{fn}: dimension_numbers must be a {cls.__name__}, got {dnums!r}")
    return cls(*(int_tuple(fn, f"dimension_numbers.{name}", v)
                 for name, v in zip(cls._fields, dnums)))


def _check_dims(fn: str, name: str, dims, bound: int, what: str, *, sorted_: bool = True):
    if any(not 0 <= d < bound for d in dims):
        raise ValueError(f"{fn}: {name} {dims} out of range for {what} (must be in "
                         f"[0, {bound}))")
    if len(set(dims)) != len(dims):
        raise ValueError(f"{fn}: {name} {dims} contains repeated dimensions")
    if sorted_ and list(dims) != sorted(dims):
        raise ValueError(f"{fn}: {name} {dims} must be sorted")


def default_fill_value(dtype: np.dtype) -> Any:
    """JAX's gather fill: NaN for inexact, min for signed, max for unsigned, True for bool."""
    dtype = np.dtype(dtype)
    if dtypes.is_inexact(dtype):
        return np.nan
    if dtype == dtypes.bool_:
        return True
    return np.iinfo(dtype).min if dtypes.is_integer(dtype) and not dtypes.is_unsigned(dtype) \
        else np.iinfo(dtype).max


# ---------------------------------------------------------------- gather


def _gather_shape(operand, indices, *, dimension_numbers, slice_sizes, indices_are_sorted,
                  unique_indices, mode, fill_value):
    fn, dn = "gather", dimension_numbers
    if indices.dtype not in int_dtypes:
        raise TypeError(f"{fn}: start_indices must have an integer dtype, got {indices.dtype}")
    if indices.ndim < 1:
        raise TypeError(f"{fn}: start_indices must have rank >= 1 (the last dimension holds "
                        f"the index vectors), got shape {indices.shape}")
    nb = indices.ndim - 1
    out_rank = len(dn.offset_dims) + nb
    _check_dims(fn, "offset_dims", dn.offset_dims, out_rank, f"output rank {out_rank}")
    _check_dims(fn, "collapsed_slice_dims", dn.collapsed_slice_dims, operand.ndim,
                f"operand shape {operand.shape}")
    _check_dims(fn, "operand_batching_dims", dn.operand_batching_dims, operand.ndim,
                f"operand shape {operand.shape}")
    if set(dn.collapsed_slice_dims) & set(dn.operand_batching_dims):
        raise ValueError(f"{fn}: collapsed_slice_dims {dn.collapsed_slice_dims} and "
                         f"operand_batching_dims {dn.operand_batching_dims} must be disjoint")
    _check_dims(fn, "start_index_map", dn.start_index_map, operand.ndim,
                f"operand shape {operand.shape}", sorted_=False)
    if len(dn.start_index_map) != indices.shape[-1]:
        raise ValueError(f"{fn}: start_index_map {dn.start_index_map} must have one entry per "
                         f"index vector element (start_indices shape {indices.shape})")
    if set(dn.start_index_map) & set(dn.operand_batching_dims):
        raise ValueError(f"{fn}: start_index_map {dn.start_index_map} and "
                         f"operand_batching_dims {dn.operand_batching_dims} must be disjoint")
    _check_dims(fn, "start_indices_batching_dims", dn.start_indices_batching_dims, nb,
                f"start_indices shape {indices.shape} (the last dimension is the index "
                "vector)", sorted_=False)
    if len(dn.start_indices_batching_dims) != len(dn.operand_batching_dims):
        raise ValueError(f"{fn}: operand_batching_dims {dn.operand_batching_dims} and "
                         f"start_indices_batching_dims {dn.start_indices_batching_dims} must "
                         "have the same length")
    for od, idim in zip(dn.operand_batching_dims, dn.start_indices_batching_dims):
        if operand.shape[od] != indices.shape[idim]:
            raise ValueError(f"{fn}: operand batching dimension {od} (size "
                             f"{operand.shape[od]}) and start_indices batching dimension "
                             f"{idim} (size {indices.shape[idim]}) must have the same size")
    if len(slice_sizes) != operand.ndim:
        raise ValueError(f"{fn}: slice_sizes {slice_sizes} must have one entry per operand "
                         f"dimension (operand shape {operand.shape})")
    for d, (s, n) in enumerate(zip(slice_sizes, operand.shape)):
        if not 0 <= s <= n:
            raise ValueError(f"{fn}: slice_sizes {slice_sizes} must be between 0 and the "
                             f"operand shape {operand.shape} (dimension {d})")
    for d in dn.collapsed_slice_dims + dn.operand_batching_dims:
        if slice_sizes[d] > 1:
            raise ValueError(f"{fn}: slice_sizes[{d}] = {slice_sizes[d]} but collapsed and "
                             "batching dimensions must have slice size <= 1")
    removed = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    window = [s for d, s in enumerate(slice_sizes) if d not in removed]
    if len(window) != len(dn.offset_dims):
        raise ValueError(f"{fn}: offset_dims {dn.offset_dims} must have one entry per operand "
                         f"dimension that is not collapsed or batched ({len(window)}), given "
                         f"operand shape {operand.shape}")
    batch, win = iter(indices.shape[:-1]), iter(window)
    return tuple(next(win) if i in dn.offset_dims else next(batch) for i in range(out_rank))


def _gather_impl(operand, indices, *, dimension_numbers, slice_sizes, indices_are_sorted,
                 unique_indices, mode, fill_value):
    fill = None
    if mode == GatherScatterMode.FILL_OR_DROP:
        fill = default_fill_value(operand.dtype) if fill_value is None else fill_value
        fill = np.asarray(fill).astype(operand.dtype)
    return gather_windows(operand, indices, **dimension_numbers._asdict(),
                          slice_sizes=slice_sizes, fill=fill)


gather_p = standard_primitive(
    "gather", _gather_impl, _gather_shape, lambda x, *_, **__: x.dtype,
    lambda x, *_, **__: x.weak_type)


def _index_limits(b, indices, limits):
    """``limits`` (one per index vector entry) clipped to the index type, broadcast like
    ``indices`` along its last (index vector) axis."""
    info = np.iinfo(indices.dtype)
    vec = b.constant(np.array([min(max(v, info.min), info.max) for v in limits],
                              indices.dtype))
    return b.op("broadcast_in_dim", vec, shape=indices.shape,
                broadcast_dimensions=(indices.shape.rank - 1,))


def _index_zeros(b, indices):
    zero = b.constant(np.zeros((), indices.dtype))
    return b.op("broadcast_in_dim", zero, shape=indices.shape, broadcast_dimensions=())


def _windows_in_bounds(b, indices, upper):
    """pred[batch dims]: every entry of each index vector lies in [0, upper[k]]."""
    dims = indices.shape.dims
    nb = len(dims) - 1
    ok = b.op("compare", indices, _index_limits(b, indices, upper), comparison_direction="LE")
    if np.issubdtype(indices.dtype, np.signedinteger):
        ok = b.op("and", ok, b.op("compare", indices, _index_zeros(b, indices),
                                  comparison_direction="GE"))
    valid = None
    for k in range(dims[-1]):
        col = b.op("slice", ok, start_indices=(0,) * nb + (k,), limit_indices=dims[:-1] + (k + 1,),
                   strides=(1,) * (nb + 1))
        col = b.op("reshape", col, shape=Shape(np.bool_, dims[:-1]))
        valid = col if valid is None else b.op("and", valid, col)
    return valid


@gather_p.def_lowering
def _gather_lowering(ctx, operand, indices, *, dimension_numbers, slice_sizes,
                     indices_are_sorted, unique_indices, mode, fill_value):
    dn, b = dimension_numbers, ctx.b
    out = b.op("gather", operand, indices, offset_dims=dn.offset_dims,
               collapsed_slice_dims=dn.collapsed_slice_dims,
               operand_batching_dims=dn.operand_batching_dims,
               start_indices_batching_dims=dn.start_indices_batching_dims,
               start_index_map=dn.start_index_map, index_vector_dim=indices.shape.rank - 1,
               slice_sizes=tuple(slice_sizes), indices_are_sorted=bool(indices_are_sorted))
    if mode != GatherScatterMode.FILL_OR_DROP or not dn.start_index_map:
        return out
    # HLO gather clamps; FILL_OR_DROP replaces the windows that had to be clamped.
    upper = [operand.shape.dims[d] - slice_sizes[d] for d in dn.start_index_map]
    valid = _windows_in_bounds(b, indices, upper)
    batch_dims = tuple(i for i in range(out.shape.rank) if i not in dn.offset_dims)
    mask = b.op("broadcast_in_dim", valid, shape=Shape(np.bool_, out.shape.dims),
                broadcast_dimensions=batch_dims)
    fill = default_fill_value(operand.dtype) if fill_value is None else fill_value
    fill = b.op("broadcast_in_dim", b.constant(np.asarray(fill).astype(operand.dtype)),
                shape=out.shape, broadcast_dimensions=())
    return b.op("select", mask, out, fill)


def _check_index_operand(fn: str, x: Any, arg: str) -> Any:
    x = base.as_operand(x, fn, arg)
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        x = np.asarray(x, np.int32)
    return x


def _fill_param(fill_value: Any, dtype: np.dtype) -> Any:
    if fill_value is None:
        return None
    fill_value = core.concrete_or_error(fill_value, "gather: fill_value must be concrete")
    v = np.asarray(fill_value)
    if v.shape != ():  # (a ValueError, as JAX's x.at[i].get)
        raise ValueError(f"gather: fill_value must be a scalar, got shape {v.shape}")
    if np.iscomplexobj(v) and not dtypes.is_complex(dtype):
        raise TypeError(f"gather: a complex fill_value ({fill_value!r}) cannot fill an operand "
                        f"of dtype {dtype}")
    return v.item()


def gather(operand: Any, start_indices: Any, dimension_numbers: GatherDimensionNumbers,
           slice_sizes: Sequence[int], *, unique_indices: bool = False,
           indices_are_sorted: bool = False, mode: Any = None, fill_value: Any = None) -> Any:
    """XLA's gather: windows of ``slice_sizes`` at the index vectors in ``start_indices``.

    The last dimension of ``start_indices`` holds the index vectors. ``mode`` is a
    GatherScatterMode or one of 'clip', 'fill', 'promise_in_bounds' (None means
    'promise_in_bounds', as in JAX: ember clamps).

    Example:
        >>> dn = lax.GatherDimensionNumbers((), (0,), (0,))
        >>> lax.gather(jnp.arange(5), jnp.array([[4], [0]]), dn, (1,))
        Array([4, 0], dtype=int32)
    """
    operand = base.as_operand(operand, "gather")
    start_indices = _check_index_operand("gather", start_indices, "start_indices")
    dn = _canon_dnums("gather", GatherDimensionNumbers, dimension_numbers)
    sizes = int_tuple("gather", "slice_sizes", slice_sizes)
    mode = GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else \
        GatherScatterMode.from_any(mode)
    fill = _fill_param(fill_value, core.get_aval(operand).dtype) \
        if mode == GatherScatterMode.FILL_OR_DROP else None
    return gather_p.bind(operand, start_indices, dimension_numbers=dn, slice_sizes=sizes,
                         indices_are_sorted=bool(indices_are_sorted),
                         unique_indices=bool(unique_indices), mode=mode, fill_value=fill)


def index_take(src: Any, idxs: Sequence[Any], axes: Sequence[int]) -> Any:
    """``src`` indexed along ``axes`` by the 1-D index arrays ``idxs`` (one per axis, of
    one length ``n``); indices wrap around (Python's modulo), as in JAX.

    The result has shape ``(n,) + `` the sizes of the other axes of ``src``.

    Example:
        >>> lax.index_take(jnp.arange(6).reshape(2, 3), (jnp.array([2, -1]),), (1,))
        Array([[2, 5],
               [2, 5]], dtype=int32)
    """
    src = base.as_operand(src, "index_take", "src")
    shape = core.get_aval(src).shape
    if isinstance(idxs, (str, bytes)) or not isinstance(idxs, (tuple, list)):
        raise TypeError(f"index_take: idxs must be a sequence of index arrays (one per axis), "
                        f"got {type(idxs).__name__}")
    axes = tuple(base.check_axis("index_take", "axes", a, len(shape)) for a in axes)
    if len(axes) != len(idxs) or not axes or len(set(axes)) != len(axes):
        raise ValueError(f"index_take: axes must be distinct and give one axis per index "
                         f"array, got {len(idxs)} index arrays and axes {axes}")
    cols = []
    for k, (i, ax) in enumerate(zip(idxs, axes)):
        i = _check_index_operand("index_take", i, f"idxs[{k}]")
        iv = core.get_aval(i)
        if iv.dtype not in int_dtypes or iv.ndim != 1:
            raise TypeError(f"index_take: idxs[{k}] must be a 1-D integer array, got "
                            f"{iv.str_short()}")
        # The floor modulo, in a signed type that holds the axis size: a negative remainder
        # moves up by n.
        work = np.dtype(np.int64) if iv.dtype.itemsize == 8 else np.dtype(np.int32)
        i = E.convert_element_type(i, work)
        n = E.convert_element_type(builtins.max(shape[ax], 1), work)
        r = E.rem(i, n)
        r = E.select(lt(r, E.convert_element_type(0, work)), add(r, n), r)
        cols.append(expand_dims(r, (1,)))
    if len({core.get_aval(c).shape[0] for c in cols}) != 1:
        raise ValueError("index_take: the index arrays must have one length")
    indices = cols[0] if len(cols) == 1 else concatenate(cols, 1)
    sizes = tuple(1 if d in axes else n for d, n in enumerate(shape))
    dn = GatherDimensionNumbers(offset_dims=tuple(range(1, len(shape) - len(axes) + 1)),
                                collapsed_slice_dims=tuple(sorted(axes)),
                                start_index_map=axes)
    return gather(src, indices, dn, sizes)


# ---------------------------------------------------------------- scatter


def _scatter_shape(operand, indices, updates, *, dimension_numbers, indices_are_sorted,
                   unique_indices, mode, update_jaxpr, update_consts, _name="scatter"):
    fn, dn = _name, dimension_numbers
    if indices.dtype not in int_dtypes:
        raise TypeError(f"{fn}: scatter_indices must have an integer dtype, got "
                        f"{indices.dtype}")
    if indices.ndim < 1:
        raise TypeError(f"{fn}: scatter_indices must have rank >= 1 (the last dimension holds "
                        f"the index vectors), got shape {indices.shape}")
    nb = indices.ndim - 1
    _check_dims(fn, "update_window_dims", dn.update_window_dims, updates.ndim,
                f"updates shape {updates.shape}")
    _check_dims(fn, "inserted_window_dims", dn.inserted_window_dims, operand.ndim,
                f"operand shape {operand.shape}")
    _check_dims(fn, "operand_batching_dims", dn.operand_batching_dims, operand.ndim,
                f"operand shape {operand.shape}")
    if set(dn.inserted_window_dims) & set(dn.operand_batching_dims):
        raise ValueError(f"{fn}: inserted_window_dims {dn.inserted_window_dims} and "
                         f"operand_batching_dims {dn.operand_batching_dims} must be disjoint")
    _check_dims(fn, "scatter_dims_to_operand_dims", dn.scatter_dims_to_operand_dims,
                operand.ndim, f"operand shape {operand.shape}", sorted_=False)
    if len(dn.scatter_dims_to_operand_dims) != indices.shape[-1]:
        raise ValueError(f"{fn}: scatter_dims_to_operand_dims "
                         f"{dn.scatter_dims_to_operand_dims} must have one entry per index "
                         f"vector element (scatter_indices shape {indices.shape})")
    if set(dn.scatter_dims_to_operand_dims) & set(dn.operand_batching_dims):
        raise ValueError(f"{fn}: scatter_dims_to_operand_dims and operand_batching_dims must "
                         "be disjoint")
    _check_dims(fn, "scatter_indices_batching_dims", dn.scatter_indices_batching_dims, nb,
                f"scatter_indices shape {indices.shape}", sorted_=False)
    if len(dn.scatter_indices_batching_dims) != len(dn.operand_batching_dims):
        raise ValueError(f"{fn}: operand_batching_dims and scatter_indices_batching_dims must "
                         "have the same length")
    for od, idim in zip(dn.operand_batching_dims, dn.scatter_indices_batching_dims):
        if operand.shape[od] != indices.shape[idim]:
            raise ValueError(f"{fn}: operand batching dimension {od} and scatter_indices "
                             f"batching dimension {idim} must have the same size")
    removed = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
    window_operand_dims = [d for d in range(operand.ndim) if d not in removed]
    if len(window_operand_dims) != len(dn.update_window_dims):
        raise ValueError(f"{fn}: the operand rank ({operand.ndim}) must equal the number of "
                         "update_window_dims plus inserted_window_dims plus "
                         f"operand_batching_dims (dimension_numbers {dn})")
    if updates.ndim != len(dn.update_window_dims) + nb:
        raise ValueError(f"{fn}: updates shape {updates.shape} must have rank "
                         f"{len(dn.update_window_dims) + nb} (update_window_dims "
                         f"{dn.update_window_dims} plus the scatter_indices batch dimensions "
                         f"{indices.shape[:-1]})")
    scatter_dims = [d for d in range(updates.ndim) if d not in dn.update_window_dims]
    if tuple(updates.shape[d] for d in scatter_dims) != indices.shape[:-1]:
        raise ValueError(f"{fn}: the scatter dimensions of updates (shape {updates.shape}) "
                         f"must match the batch dimensions of scatter_indices "
                         f"{indices.shape[:-1]}")
    for ud, od in zip(dn.update_window_dims, window_operand_dims):
        if updates.shape[ud] > operand.shape[od]:
            raise ValueError(f"{fn}: update window dimension {ud} (size {updates.shape[ud]}) "
                             f"is larger than operand dimension {od} (size "
                             f"{operand.shape[od]})")
    return operand.shape


def _scatter_dtype(operand, indices, updates, *, _name="scatter", **_):
    if operand.dtype != updates.dtype:
        raise TypeError(f"{_name}: operand and updates must have the same dtype, got "
                        f"{operand.dtype} and {updates.dtype}")
    return operand.dtype


# The update computation's op per combine function; pred uses the logical ops.
_COMBINE_OPCODES = {np.add: ("add", "or"), np.multiply: ("multiply", "and"),
                    np.minimum: ("minimum", "and"), np.maximum: ("maximum", "or"),
                    np.subtract: ("subtract", None)}


def _update_computation(ctx, dtype, combine, update_jaxpr=None, update_consts=()):
    ub = ctx.new_builder("scatter_update")
    scalar = Shape(dtype, ())
    current, update = ub.parameter(0, scalar), ub.parameter(1, scalar)
    if update_jaxpr is not None:  # scatter_apply: the jaxpr (current, update) -> new
        consts = [ub.constant(np.asarray(c, dtype=v.aval.dtype))
                  for v, c in zip(update_jaxpr.constvars, update_consts)]
        sub = type(ctx)(ub, [], [], ctx.primitive)  # lowers into the update computation
        out, = sub.lower_jaxpr(update_jaxpr, consts, [current, update])
        return ub.build(out)
    if combine is None:
        return ub.build(update)
    opcode, pred_opcode = _COMBINE_OPCODES[combine]
    return ub.build(ub.op(pred_opcode if dtype == np.bool_ else opcode, current, update))


def _clamp_window_starts(b, operand, indices, updates, dn):
    """Index vectors clamped so every update window fits (CLIP mode)."""
    removed = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
    window = iter(updates.shape.dims[d] for d in dn.update_window_dims)
    wfull = [1 if d in removed else next(window) for d in range(operand.shape.rank)]
    upper = [operand.shape.dims[d] - wfull[d] for d in dn.scatter_dims_to_operand_dims]
    return b.op("clamp", _index_zeros(b, indices), indices, _index_limits(b, indices, upper))


def _scatter_lowering(ctx, operand, indices, updates, *, dimension_numbers, indices_are_sorted,
                      unique_indices, mode, update_jaxpr, update_consts, combine):
    dn, b = dimension_numbers, ctx.b
    if mode == GatherScatterMode.CLIP and dn.scatter_dims_to_operand_dims:
        indices = _clamp_window_starts(b, operand, indices, updates, dn)
    # HLO scatter drops out-of-bounds windows: FILL_OR_DROP, and PROMISE_IN_BOUNDS as in XLA.
    fn = _update_computation(ctx, operand.dtype, combine, update_jaxpr, update_consts)
    return b.op("scatter", operand, indices, updates, calls=[fn],
                update_window_dims=dn.update_window_dims,
                inserted_window_dims=dn.inserted_window_dims,
                input_batching_dims=dn.operand_batching_dims,
                scatter_indices_batching_dims=dn.scatter_indices_batching_dims,
                scatter_dims_to_operand_dims=dn.scatter_dims_to_operand_dims,
                index_vector_dim=indices.shape.rank - 1,
                indices_are_sorted=bool(indices_are_sorted),
                unique_indices=bool(unique_indices))


def _make_scatter(name: str, combine):
    def impl(operand, indices, updates, *, dimension_numbers, indices_are_sorted,
             unique_indices, mode, update_jaxpr, update_consts):
        fn = combine if update_jaxpr is None else _jaxpr_combiner(update_jaxpr, update_consts)
        return scatter_windows(operand, indices, updates, **dimension_numbers._asdict(),
                               clip=mode == GatherScatterMode.CLIP, combine=fn)

    def shape_rule(*avals, **params):
        return _scatter_shape(*avals, _name=name, **params)

    def dtype_rule(*avals, **params):
        dt = _scatter_dtype(*avals, _name=name)
        # As in JAX, scatter-add/-mul/-sub take numbers only (no bool or/and).
        allowed = all_dtypes if combine in (None, np.minimum, np.maximum) else \
            base.numeric_dtypes
        check_dtype(name, "operand", dt, allowed)
        return dt

    prim = standard_primitive(name, impl, shape_rule, dtype_rule,
                              lambda x, *_, **__: x.weak_type)
    prim.def_lowering(functools.partial(_scatter_lowering, combine=combine))
    return prim


scatter_p = _make_scatter("scatter", None)
scatter_add_p = _make_scatter("scatter-add", np.add)
scatter_mul_p = _make_scatter("scatter-mul", np.multiply)
scatter_min_p = _make_scatter("scatter-min", np.minimum)
scatter_max_p = _make_scatter("scatter-max", np.maximum)
scatter_sub_p = _make_scatter("scatter-sub", np.subtract)


def _jaxpr_combiner(jaxpr, consts):
    """``(current, update) -> new`` on 0-d arrays from a scatter's update jaxpr, run with
    the primitives' impls (the eager path of ``scatter_apply``)."""
    def combine(current, update):
        env = {}

        def read(a):
            return np.asarray(a.val, a.aval.dtype) if isinstance(a, Literal) else env[a.id]
        for v, x in zip(jaxpr.constvars, consts):
            env[v.id] = np.asarray(x)
        env[jaxpr.invars[0].id], env[jaxpr.invars[1].id] = current, update
        for eqn in jaxpr.eqns:
            outs = eqn.primitive.impl(*[read(a) for a in eqn.invars], **eqn.params)
            outs = outs if eqn.primitive.multiple_results else [outs]
            for v, x in zip(eqn.outvars, outs):
                env[v.id] = np.asarray(x, v.aval.dtype)
        return read(jaxpr.outvars[0])
    return combine


def _scatter_fn(prim, name: str):
    def fn(operand: Any, scatter_indices: Any, updates: Any,
           dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
           unique_indices: bool = False, mode: Any = None) -> Any:
        operand = base.as_operand(operand, name)
        scatter_indices = _check_index_operand(name, scatter_indices, "scatter_indices")
        updates = base.as_operand(updates, name, "updates")
        if dtypes.is_python_scalar(updates):
            updates = base.concrete_dtype_like(updates, core.get_aval(operand).dtype, False)
        dn = _canon_dnums(name, ScatterDimensionNumbers, dimension_numbers)
        return prim.bind(operand, scatter_indices, updates, dimension_numbers=dn,
                         indices_are_sorted=bool(indices_are_sorted),
                         unique_indices=bool(unique_indices),
                         mode=GatherScatterMode.from_any(mode), update_jaxpr=None,
                         update_consts=())
    fn.__name__ = name
    verb = {"scatter": "replaced by", "scatter_add": "plus", "scatter_mul": "times",
            "scatter_min": "min with", "scatter_max": "max with",
            "scatter_sub": "minus"}[name]
    fn.__doc__ = f"""XLA's scatter: ``operand`` windows {verb} ``updates`` at ``scatter_indices``.

    Out-of-bounds windows are dropped (mode None or 'drop') or clamped ('clip').

    Example:
        >>> dn = lax.ScatterDimensionNumbers((), (0,), (0,))
        >>> lax.{name}(jnp.zeros(3), jnp.array([[1]]), jnp.ones(1), dn).shape
        (3,)
    """
    return fn


scatter = _scatter_fn(scatter_p, "scatter")
scatter_add = _scatter_fn(scatter_add_p, "scatter_add")
scatter_mul = _scatter_fn(scatter_mul_p, "scatter_mul")
scatter_min = _scatter_fn(scatter_min_p, "scatter_min")
scatter_max = _scatter_fn(scatter_max_p, "scatter_max")
scatter_sub = _scatter_fn(scatter_sub_p, "scatter_sub")


def scatter_apply(operand: Any, scatter_indices: Any, func: Callable[[Any], Any],
                  dimension_numbers: ScatterDimensionNumbers, *,
                  update_shape: Sequence[int] = (), indices_are_sorted: bool = False,
                  unique_indices: bool = False, mode: Any = None) -> Any:
    """XLA's scatter with ``func`` as the update: ``operand`` elements at the scattered
    positions become ``func(element)``; a position hit ``n`` times gets ``func`` ``n`` times.

    ``func`` maps a scalar of the operand's dtype to one of the same dtype; it may not close
    over traced values. ``update_shape`` is the shape the updates of ``dimension_numbers``
    would have (the scatter batch dims of ``scatter_indices`` plus the window dims). Like
    JAX's, scatter_apply has no derivative.

    Args:
        operand: the array to update.
        scatter_indices: the index vectors (last dimension), as for ``lax.scatter``.
        func: the unary function applied at each scattered position.
        dimension_numbers: a ``ScatterDimensionNumbers``.
        update_shape: the shape of the (implicit) updates.
        indices_are_sorted, unique_indices: hints, as for ``lax.scatter``.
        mode: out-of-bounds handling: None/'drop'/'fill' drop, 'clip' clamps.

    Example:
        >>> dn = lax.ScatterDimensionNumbers((), (0,), (0,))
        >>> lax.scatter_apply(jnp.arange(3.0), jnp.array([[1], [1]]), lambda v: v * 10, dn,
        ...                   update_shape=(2,))
        Array([  0., 100.,   2.], dtype=float32)
    """
    if not callable(func):
        raise TypeError(f"scatter_apply: func must be callable, got {func!r}")
    operand = base.as_operand(operand, "scatter_apply")
    scatter_indices = _check_index_operand("scatter_apply", scatter_indices, "scatter_indices")
    aval = core.get_aval(operand)
    shape = int_tuple("scatter_apply", "update_shape", update_shape)
    scalar = core.ShapedArray((), aval.dtype)
    closed, _ = trace_to_jaxpr(lambda x, _: [func(x)], [scalar, scalar])
    out, = closed.jaxpr.outvars
    if (out.aval.shape, out.aval.dtype) != ((), aval.dtype):
        raise TypeError(f"scatter_apply: func must map a scalar of dtype {aval.dtype} to one "
                        f"of the same dtype, got {out.aval.str_short()}")
    if any(isinstance(c, Tracer) for c in closed.consts):
        raise NotImplementedError("scatter_apply: func cannot close over traced values (pass "
                                  "them through a jnp.where or an elementwise op instead)")
    unused = broadcast_in_dim(E.convert_element_type(0, aval.dtype), shape, ())
    dn = _canon_dnums("scatter_apply", ScatterDimensionNumbers, dimension_numbers)
    return scatter_p.bind(operand, scatter_indices, unused, dimension_numbers=dn,
                          indices_are_sorted=bool(indices_are_sorted),
                          unique_indices=bool(unique_indices),
                          mode=GatherScatterMode.from_any(mode), update_jaxpr=closed.jaxpr,
                          update_consts=tuple(closed.consts))


# ---------------------------------------------------------------- gather / scatter autodiff


def _gather_dnums_of(dn: ScatterDimensionNumbers) -> GatherDimensionNumbers:
    return GatherDimensionNumbers(
        offset_dims=dn.update_window_dims, collapsed_slice_dims=dn.inserted_window_dims,
        start_index_map=dn.scatter_dims_to_operand_dims,
        operand_batching_dims=dn.operand_batching_dims,
        start_indices_batching_dims=dn.scatter_indices_batching_dims)


def _gather_scattered(t, indices, dn, updates_shape, mode, fill_value=0):
    """For each element of a scatter's updates, the element of ``t`` it lands on (the
    inverse gather; dropped windows read ``fill_value``, None meaning the default fill)."""
    removed = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
    window = iter(updates_shape[d] for d in dn.update_window_dims)
    sizes = tuple(1 if d in removed else next(window)
                  for d in range(core.get_aval(t).ndim))
    fill = fill_value if mode == GatherScatterMode.FILL_OR_DROP else None
    return gather_p.bind(t, indices, dimension_numbers=_gather_dnums_of(dn), slice_sizes=sizes,
                         indices_are_sorted=False, unique_indices=False, mode=mode,
                         fill_value=fill)


def _shape(x) -> tuple[int, ...]:
    return (x.aval if ad.is_undefined_primal(x) else core.get_aval(x)).shape


def _check_indices_defined(name: str, indices) -> None:
    if ad.is_undefined_primal(indices):
        raise ValueError(f"{name}: cannot transpose with respect to the indices")


def _gather_jvp(g, operand, indices, *, mode, fill_value, **params):
    fill = 0 if mode == GatherScatterMode.FILL_OR_DROP else None  # tangents fill with 0
    return gather_p.bind(g, indices, mode=mode, fill_value=fill, **params)


def _gather_transpose(ct, operand, indices, *, dimension_numbers, slice_sizes,
                      indices_are_sorted, unique_indices, mode, fill_value):
    _check_indices_defined("gather", indices)
    dn = dimension_numbers
    sdn = ScatterDimensionNumbers(
        update_window_dims=dn.offset_dims, inserted_window_dims=dn.collapsed_slice_dims,
        scatter_dims_to_operand_dims=dn.start_index_map,
        operand_batching_dims=dn.operand_batching_dims,
        scatter_indices_batching_dims=dn.start_indices_batching_dims)
    return [scatter_add_p.bind(E.zeros_of(operand), indices, ct, dimension_numbers=sdn,
                               indices_are_sorted=indices_are_sorted,
                               unique_indices=unique_indices, mode=mode, update_jaxpr=None,
                               update_consts=()), None]


ad.defjvp(gather_p, _gather_jvp)
E.def_transpose(gather_p, _gather_transpose)


def _scatter_linear_jvp(prim):
    """The JVP of a scatter that is linear in (operand, updates): the same scatter."""
    def jvp(primals, tangents, **params):
        x, indices, updates = primals
        out = prim.bind(x, indices, updates, **params)
        tx, _, tu = tangents
        if type(tx) is ad.Zero and type(tu) is ad.Zero:
            return out, ad.Zero.from_primal_value(out)
        return out, prim.bind(E.instantiate(tx), indices, E.instantiate(tu), **params)
    return jvp


def _scatter_add_transpose(ct, x, indices, updates, *, dimension_numbers, mode, **params):
    _check_indices_defined("scatter_add", indices)
    ct_u = None
    if ad.is_undefined_primal(updates):
        ct_u = _gather_scattered(ct, indices, dimension_numbers, updates.aval.shape, mode)
    return [ct if ad.is_undefined_primal(x) else None, None, ct_u]


scatter_add_p.def_jvp(_scatter_linear_jvp(scatter_add_p))
E.def_transpose(scatter_add_p, _scatter_add_transpose)


def _scatter_sub_transpose(ct, x, indices, updates, *, dimension_numbers, mode, **params):
    _check_indices_defined("scatter_sub", indices)
    ct_u = None
    if ad.is_undefined_primal(updates):
        ct_u = E.neg(_gather_scattered(ct, indices, dimension_numbers, updates.aval.shape,
                                       mode))
    return [ct if ad.is_undefined_primal(x) else None, None, ct_u]


scatter_sub_p.def_jvp(_scatter_linear_jvp(scatter_sub_p))
E.def_transpose(scatter_sub_p, _scatter_sub_transpose)


def _scatter_jvp(primals, tangents, **params):
    if params["update_jaxpr"] is not None:
        if all(type(t) is ad.Zero for t in tangents):
            out = scatter_p.bind(*primals, **params)
            return out, ad.Zero.from_primal_value(out)
        raise NotImplementedError("scatter_apply has no derivative (as in JAX)")
    if params["unique_indices"]:
        return _scatter_linear_jvp(scatter_p)(primals, tangents, **params)
    x, indices, updates = primals
    out = scatter_p.bind(x, indices, updates, **params)
    tx, _, tu = tangents
    if type(tx) is ad.Zero and type(tu) is ad.Zero:
        return out, ad.Zero.from_primal_value(out)
    # With repeated indices the update that lands is unspecified: tag every update with an
    # id, scatter the ids, and keep the tangents of the updates whose id landed and of the
    # operand elements nothing landed on; a scatter-add then combines them (JAX's scheme).
    dn = params["dimension_numbers"]
    u_shape = _shape(updates)
    ids_shape = tuple(1 if d in dn.update_window_dims else n for d, n in enumerate(u_shape))
    ids = E.add(reshape(iota(np.int32, int(np.prod(ids_shape, dtype=np.int64))), ids_shape),
                np.int32(1))
    ids = broadcast_in_dim(ids, u_shape, tuple(range(len(u_shape))))
    landed = scatter_p.bind(E.full_of(_shape(x), 0, np.int32), indices, ids, **params)
    untouched = E.eq(landed, np.int32(0))
    won = E.eq(ids, _gather_scattered(landed, indices, dn, u_shape, params["mode"]))
    tx, tu = E.instantiate(tx), E.instantiate(tu)
    return out, scatter_add_p.bind(E.select(untouched, tx, E.zeros_of(tx)), indices,
                                   E.select(won, tu, E.zeros_of(tu)), **params)


def _scatter_transpose(ct, x, indices, updates, *, dimension_numbers, mode, unique_indices,
                       **params):
    _check_indices_defined("scatter", indices)
    if not unique_indices:
        raise NotImplementedError("scatter transpose is only implemented where "
                                  "unique_indices=True")
    ct_x = ct_u = None
    if ad.is_undefined_primal(x):
        ct_x = scatter_p.bind(ct, indices, E.zeros_of(updates), dimension_numbers=dimension_numbers,
                              mode=mode, unique_indices=unique_indices, **params)
    if ad.is_undefined_primal(updates):
        ct_u = _gather_scattered(ct, indices, dimension_numbers, updates.aval.shape, mode)
    return [ct_x, None, ct_u]


scatter_p.def_jvp(_scatter_jvp)
E.def_transpose(scatter_p, _scatter_transpose)


def _scatter_mul_jvp_updates(g, x, indices, updates, **params):
    # (``x.at[i].multiply(u)`` with no array in ``i`` is marked unique, as in JAX.)
    if not params["unique_indices"]:
        raise NotImplementedError("scatter_mul gradients are only implemented if "
                                  "`unique_indices=True`")
    return E.mul(x, scatter_add_p.bind(E.zeros_of(x), indices, g, **params))


def _scatter_mul_transpose(ct, x, indices, updates, **params):
    # Linear in the operand only (the JVP in the updates is a scatter-add).
    _check_indices_defined("scatter_mul", indices)
    if ad.is_undefined_primal(updates):
        raise ValueError("scatter_mul: cannot transpose with respect to the updates (it is "
                         "not linear in them)")
    return [scatter_mul_p.bind(ct, indices, updates, **params), None, None]


ad.defjvp(scatter_mul_p, lambda g, x, indices, updates, **params: scatter_mul_p.bind(
    g, indices, updates, **params), None, _scatter_mul_jvp_updates)
E.def_transpose(scatter_mul_p, _scatter_mul_transpose)


def _scatter_extremum_jvp(prim):
    def jvp(primals, tangents, **params):
        # The tangent of whatever attains the result, averaged over ties (operand element
        # and the updates landing on it), like the max/min reductions.
        x, indices, updates = primals
        out = prim.bind(x, indices, updates, **params)
        tx, _, tu = tangents
        if type(tx) is ad.Zero and type(tu) is ad.Zero:
            return out, ad.Zero.from_primal_value(out)
        tx, tu = E.instantiate(tx), E.instantiate(tu)
        dt = core.get_aval(out).dtype
        won = convert_element_type(E.eq(updates, _gather_scattered(
            out, indices, params["dimension_numbers"], _shape(updates), params["mode"], None)),
            dt)
        kept = convert_element_type(E.eq(x, out), dt)
        zeros = E.zeros_of(out)
        count = E.add(kept, scatter_add_p.bind(zeros, indices, won, **params))
        total = E.add(E.mul(tx, kept), scatter_add_p.bind(zeros, indices, E.mul(tu, won),
                                                          **params))
        return out, E.div(total, count)
    return jvp


scatter_min_p.def_jvp(_scatter_extremum_jvp(scatter_min_p))
scatter_max_p.def_jvp(_scatter_extremum_jvp(scatter_max_p))



# ---------------------------------------------------------------- batching rules
#
# slice, and dynamic_slice/dynamic_update_slice with unmapped start indices, keep the
# operand's batch dim where it is (the batch axis is sliced whole); every other rule returns
# its result with the batch dim in front. Mapped start indices turn dynamic_slice into a
# gather and dynamic_update_slice into a scatter (as in JAX). A gather or scatter whose
# operand *and* indices are mapped pairs the two batch dims as operand/indices batching dims,
# so each batch element reads or writes only its own slice of the operand.


def _shifted(dims: Sequence[int]) -> tuple[int, ...]:
    """Dimension numbers of an operand that got a new leading (batch) axis."""
    return tuple(d + 1 for d in dims)


def _slice_batch(vals, dims, *, start_indices, limit_indices, strides):
    (x,), (d,) = vals, dims
    size = core.get_aval(x).shape[d]
    start, limit = list(start_indices), list(limit_indices)
    start.insert(d, 0)
    limit.insert(d, size)
    if strides is not None:
        strides = list(strides)
        strides.insert(d, 1)
        strides = tuple(strides)
    return slice_p.bind(x, start_indices=tuple(start), limit_indices=tuple(limit),
                        strides=strides), d


slice_p.batch = _slice_batch


def _start_index_matrix(idx: Sequence[Any], dims: Sequence[int | None], size: int,
                        shape: Sequence[int], sizes: Sequence[int]) -> Any:
    """The scalar start indices of a dynamic slice as one ``(size, len(idx))`` index array
    (batch dim first); mapped starts have their batch dim at 0 (they are scalars).

    Starts of one dtype are stacked as they are. Mixed dtypes are first clamped into
    ``[0, shape - sizes]`` in their own dtype (what the slice does with them anyway), so the
    conversion to int32 cannot wrap around.
    """
    same = len({core.get_aval(i).dtype for i in idx}) == 1
    cols = []
    for i, d, n, k in zip(idx, dims, shape, sizes):
        if not same:
            dt = core.get_aval(i).dtype
            hi = np.asarray(min(n - k, np.iinfo(dt).max), dt)
            i = convert_element_type(E.clamp(np.asarray(0, dt), i, hi), np.int32)
        shape_in = () if d is None else (0,)
        cols.append(broadcast_in_dim(i, (size, 1), shape_in))
    return cols[0] if len(cols) == 1 else concatenate(cols, 1)


def _dynamic_slice_batch(vals, dims, *, slice_sizes):
    x, *idx = vals
    dx, *didx = dims
    shape = core.get_aval(x).shape
    size = axis_size_of(vals, dims)
    if all(d is None for d in didx):
        # Only the operand is mapped: the whole batch axis is part of the slice.
        idx_dt = core.get_aval(idx[0]).dtype if idx else np.dtype(np.int32)
        idx.insert(dx, np.zeros((), idx_dt))
        sizes = list(slice_sizes)
        sizes.insert(dx, size)
        return dynamic_slice_p.bind(x, *idx, slice_sizes=tuple(sizes)), dx
    # Mapped starts: a gather of one clamped window per batch element (as in JAX).
    unbatched = shape if dx is None else shape[:dx] + shape[dx + 1:]
    index = _start_index_matrix(idx, didx, size, unbatched, slice_sizes)
    n = len(idx)
    dn = GatherDimensionNumbers(offset_dims=tuple(range(n)), collapsed_slice_dims=(),
                                start_index_map=tuple(range(n)))
    return _gather_batch([x, index], [dx, 0], dimension_numbers=dn,
                         slice_sizes=tuple(slice_sizes), indices_are_sorted=False,
                         unique_indices=False, mode=GatherScatterMode.CLIP, fill_value=None)


def _dus_batch(vals, dims):
    x, update, *idx = vals
    dx, du, *didx = dims
    size = axis_size_of(vals, dims)
    if all(d is None for d in didx):
        # Unmapped starts: one dynamic_update_slice over the whole batch axis (start 0).
        at = 0 if dx is None else dx
        x = batch_util.move_to(x, dx, at, size)
        update = batch_util.move_to(update, du, at, size)
        idx_dt = core.get_aval(idx[0]).dtype if idx else np.dtype(np.int32)
        idx.insert(at, np.zeros((), idx_dt))
        return dynamic_update_slice_p.bind(x, update, *idx), at
    # Mapped starts: a scatter of one clamped window per batch element (as in JAX).
    shape = core.get_aval(x).shape
    unbatched = shape if dx is None else shape[:dx] + shape[dx + 1:]
    u_shape = core.get_aval(update).shape
    u_unbatched = u_shape if du is None else u_shape[:du] + u_shape[du + 1:]
    index = _start_index_matrix(idx, didx, size, unbatched, u_unbatched)
    n = len(idx)
    dn = ScatterDimensionNumbers(update_window_dims=tuple(range(n)), inserted_window_dims=(),
                                 scatter_dims_to_operand_dims=tuple(range(n)))
    return _scatter_batcher(scatter_p)(
        [x, index, update], [dx, 0, du], dimension_numbers=dn, indices_are_sorted=True,
        unique_indices=True, mode=GatherScatterMode.CLIP, update_jaxpr=None, update_consts=())


dynamic_slice_p.batch = _dynamic_slice_batch
dynamic_update_slice_p.batch = _dus_batch


def _gather_batch(vals, dims, *, dimension_numbers, slice_sizes, **params):
    """Gather with a mapped operand and/or mapped indices; the result's batch dim is 0.

    - operand only: the batch axis becomes a full-size window dim (output dim 0);
    - indices only: the batch axis is one more indices batch dim (output dim 0);
    - both: the two batch axes are paired as operand/indices batching dims.
    """
    (operand, indices), (d_op, d_ix) = vals, dims
    dn = dimension_numbers
    if d_ix is None:
        operand = batch_util.moveaxis(operand, d_op, 0)
        new = GatherDimensionNumbers(
            offset_dims=(0,) + _shifted(dn.offset_dims),
            collapsed_slice_dims=_shifted(dn.collapsed_slice_dims),
            start_index_map=_shifted(dn.start_index_map),
            operand_batching_dims=_shifted(dn.operand_batching_dims),
            start_indices_batching_dims=dn.start_indices_batching_dims)
        sizes = (core.get_aval(operand).shape[0],) + tuple(slice_sizes)
        return gather_p.bind(operand, indices, dimension_numbers=new, slice_sizes=sizes,
                             **params), 0
    indices = batch_util.moveaxis(indices, d_ix, 0)
    if d_op is None:
        new = dn._replace(offset_dims=_shifted(dn.offset_dims),
                          start_indices_batching_dims=_shifted(dn.start_indices_batching_dims))
        return gather_p.bind(operand, indices, dimension_numbers=new,
                             slice_sizes=tuple(slice_sizes), **params), 0
    operand = batch_util.moveaxis(operand, d_op, 0)
    batch_slice = min(1, core.get_aval(operand).shape[0])  # 0 for an empty batch
    new = GatherDimensionNumbers(
        offset_dims=_shifted(dn.offset_dims),
        collapsed_slice_dims=_shifted(dn.collapsed_slice_dims),
        start_index_map=_shifted(dn.start_index_map),
        operand_batching_dims=(0,) + _shifted(dn.operand_batching_dims),
        start_indices_batching_dims=(0,) + _shifted(dn.start_indices_batching_dims))
    return gather_p.bind(operand, indices, dimension_numbers=new,
                         slice_sizes=(batch_slice,) + tuple(slice_sizes), **params), 0


gather_p.batch = _gather_batch


def _scatter_batcher(prim):
    """Scatter rule: operand and updates get the batch dim in front (broadcast when
    unmapped, since every batch element has its own result).

    With unmapped indices the batch axis is one more update window dim spanning the whole
    operand batch axis; with mapped indices the operand and indices batch axes are paired as
    batching dims (each batch element scatters only into its own operand slice).
    """
    def rule(vals, dims, *, dimension_numbers, **params):
        (operand, indices, updates), (d_op, d_ix, d_up) = vals, dims
        size = axis_size_of(vals, dims)
        dn = dimension_numbers
        operand = batch_util.bdim_at_front(operand, d_op, size)
        updates = batch_util.bdim_at_front(updates, d_up, size)
        if d_ix is None:
            new = ScatterDimensionNumbers(
                update_window_dims=(0,) + _shifted(dn.update_window_dims),
                inserted_window_dims=_shifted(dn.inserted_window_dims),
                scatter_dims_to_operand_dims=_shifted(dn.scatter_dims_to_operand_dims),
                operand_batching_dims=_shifted(dn.operand_batching_dims),
                scatter_indices_batching_dims=dn.scatter_indices_batching_dims)
        else:
            indices = batch_util.moveaxis(indices, d_ix, 0)
            new = ScatterDimensionNumbers(
                update_window_dims=_shifted(dn.update_window_dims),
                inserted_window_dims=_shifted(dn.inserted_window_dims),
                scatter_dims_to_operand_dims=_shifted(dn.scatter_dims_to_operand_dims),
                operand_batching_dims=(0,) + _shifted(dn.operand_batching_dims),
                scatter_indices_batching_dims=(0,) + _shifted(
                    dn.scatter_indices_batching_dims))
        return prim.bind(operand, indices, updates, dimension_numbers=new, **params), 0
    return rule


for _p in (scatter_p, scatter_add_p, scatter_mul_p, scatter_min_p, scatter_max_p,
           scatter_sub_p):
    _p.batch = _scatter_batcher(_p)


__all__ = [
    "slice", "slice_in_dim", "index_in_dim", "dynamic_slice", "dynamic_slice_in_dim",
    "dynamic_index_in_dim", "dynamic_update_slice", "dynamic_update_slice_in_dim",
    "dynamic_update_index_in_dim", "gather", "scatter", "scatter_add", "scatter_mul",
    "scatter_min", "scatter_max", "scatter_sub", "scatter_apply", "index_take",
    "GatherDimensionNumbers", "ScatterDimensionNumbers",
    "GatherScatterMode", "slice_p", "dynamic_slice_p", "dynamic_update_slice_p", "gather_p",
    "scatter_p", "scatter_add_p", "scatter_mul_p", "scatter_min_p", "scatter_max_p",
    "scatter_sub_p",
]
