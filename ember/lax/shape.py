"""Shape primitives: broadcast_in_dim, reshape, squeeze, transpose, rev, pad, concatenate, iota."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import core, dtypes
from ember.compiler.eval_structural import pad_array
from ember.compiler.hlo import Shape
from ember.interpreters import ad
from ember.interpreters.batching import axis_size_of, not_mapped
from ember.lax import base, batch_util, elementwise
from ember.lax.base import check_shape, standard_primitive


def hlo_shape(aval: Any) -> Shape:
    """The HLO array shape of an abstract value (for lowering rules)."""
    return Shape(aval.dtype, aval.shape)


# ---------------------------------------------------------------- broadcast_in_dim


# Eager broadcasts to at most this many elements are copied: ``np.broadcast_to`` costs ~4 µs
# a call, a small copy ~0.5 µs (eager ``random.normal(key, (100,))`` makes seven).
_COPIED_BROADCAST_MAX = 1 << 12


def _broadcast_in_dim_impl(x, *, shape, broadcast_dimensions):
    expanded = [1] * len(shape)
    for src, dst in enumerate(broadcast_dimensions):
        expanded[dst] = x.shape[src]
    x = np.reshape(x, expanded)
    if math.prod(shape) <= _COPIED_BROADCAST_MAX:
        out = np.empty(shape, x.dtype)
        np.copyto(out, x)
        return out
    return np.broadcast_to(x, shape)


def _broadcast_in_dim_shape(x, *, shape, broadcast_dimensions):
    name = "broadcast_in_dim"
    if len(broadcast_dimensions) != x.ndim:
        raise TypeError(f"{name}: broadcast_dimensions {broadcast_dimensions} must have one "
                        f"entry per operand dimension (operand shape {x.shape})")
    if any(not 0 <= d < len(shape) for d in broadcast_dimensions):
        raise TypeError(f"{name}: broadcast_dimensions {broadcast_dimensions} out of range "
                        f"for target shape {shape}")
    if list(broadcast_dimensions) != sorted(set(broadcast_dimensions)):
        raise TypeError(f"{name}: broadcast_dimensions {broadcast_dimensions} must be strictly "
                        "increasing")
    for src, dst in enumerate(broadcast_dimensions):
        if x.shape[src] not in (1, shape[dst]):
            raise TypeError(f"{name}: operand dimension {src} of size {x.shape[src]} cannot "
                            f"be broadcast to size {shape[dst]} (operand shape {x.shape}, "
                            f"target shape {shape})")
    return shape


broadcast_in_dim_p = standard_primitive(
    "broadcast_in_dim", _broadcast_in_dim_impl, _broadcast_in_dim_shape,
    lambda x, **_: x.dtype)


# Printed as JAX prints it: the shape is the result's type; no broadcast_dimensions=().
broadcast_in_dim_p.pp_params = lambda params: (
    {"broadcast_dimensions": params["broadcast_dimensions"]}
    if params["broadcast_dimensions"] else {})


@broadcast_in_dim_p.def_lowering
def _broadcast_in_dim_lowering(ctx, x, *, shape, broadcast_dimensions):
    return ctx.b.op("broadcast_in_dim", x, shape=hlo_shape(ctx.aval_out),
                    broadcast_dimensions=tuple(broadcast_dimensions))


def _sum(x: Any, axes: tuple[int, ...]) -> Any:
    from ember.lax.reduction import reduce_sum  # reduction.py imports this module
    return reduce_sum(x, axes) if axes else x


def _broadcast_in_dim_transpose(ct, x, *, shape, broadcast_dimensions):
    # Sum over the new dimensions and over the size-1 dimensions that were stretched.
    in_shape = x.aval.shape
    kept = {d for d, n in zip(broadcast_dimensions, in_shape) if n == shape[d]}
    return [reshape(_sum(ct, tuple(d for d in range(len(shape)) if d not in kept)), in_shape)]


ad.deflinear2(broadcast_in_dim_p, _broadcast_in_dim_transpose)


@broadcast_in_dim_p.def_batching
def _broadcast_in_dim_batch(vals, dims, *, shape, broadcast_dimensions):
    # The batch dim lands right after the output dim of the operand dim before it, which
    # keeps broadcast_dimensions increasing: no transpose.
    (x,), (d,) = vals, dims
    size = core.get_aval(x).shape[d]
    out_dim = broadcast_dimensions[d - 1] + 1 if d > 0 else 0
    new_dims = (tuple(broadcast_dimensions[:d]) + (out_dim,)
                + tuple(b + 1 for b in broadcast_dimensions[d:]))
    new_shape = tuple(shape[:out_dim]) + (size,) + tuple(shape[out_dim:])
    return broadcast_in_dim_p.bind(x, shape=new_shape, broadcast_dimensions=new_dims), out_dim


def broadcast_in_dim(operand: Any, shape: Sequence[int],
                     broadcast_dimensions: Sequence[int]) -> Any:
    """Broadcasts ``operand`` to ``shape``; operand dim i maps to ``broadcast_dimensions[i]``.

    Example:
        >>> lax.broadcast_in_dim(jnp.ones(3), (2, 3), (1,)).shape
        (2, 3)
    """
    operand = base.as_operand(operand, "broadcast_in_dim")
    shape = check_shape("broadcast_in_dim", "shape", shape)
    dims = tuple(int(d) for d in broadcast_dimensions)
    aval = core.get_aval(operand)
    if aval.shape == shape and dims == tuple(range(len(shape))) and \
            not isinstance(operand, (int, float, complex, np.ndarray, np.generic)):
        return operand
    return broadcast_in_dim_p.bind(operand, shape=shape, broadcast_dimensions=dims)


def broadcast(operand: Any, sizes: Sequence[int]) -> Any:
    """Adds leading dimensions of the given sizes."""
    aval = core.get_aval(base.as_operand(operand, "broadcast"))
    sizes = check_shape("broadcast", "sizes", sizes)
    dims = tuple(range(len(sizes), len(sizes) + aval.ndim))
    return broadcast_in_dim(operand, sizes + aval.shape, dims)


def broadcast_to_shape(operand: Any, shape: Sequence[int]) -> Any:
    """NumPy-style broadcast (trailing alignment) of ``operand`` to ``shape``."""
    aval = core.get_aval(operand)
    shape = tuple(shape)
    if aval.shape == shape:
        return operand
    nlead = len(shape) - aval.ndim
    if nlead < 0:
        raise ValueError(f"cannot broadcast an array of shape {aval.shape} to {shape}")
    return broadcast_in_dim(operand, shape, tuple(range(nlead, len(shape))))


# ---------------------------------------------------------------- reshape


def _reshape_shape(x, *, new_sizes, dimensions):
    if int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        raise TypeError(f"reshape total size must be unchanged, got new_sizes {new_sizes} for "
                        f"shape {x.shape}.")
    if dimensions is not None and sorted(dimensions) != list(range(x.ndim)):
        raise TypeError(f"reshape dimensions must be a permutation of the operand dimensions, "
                        f"got {dimensions} for shape {x.shape}")
    return tuple(new_sizes)


def _reshape_impl(x, *, new_sizes, dimensions):
    if dimensions is not None:
        x = np.transpose(x, dimensions)
    return np.reshape(x, new_sizes)


reshape_p = standard_primitive("reshape", _reshape_impl, _reshape_shape, lambda x, **_: x.dtype)


@reshape_p.def_lowering
def _reshape_lowering(ctx, x, *, new_sizes, dimensions):
    if dimensions is not None:
        x = ctx.b.op("transpose", x, permutation=tuple(dimensions))
    return ctx.b.op("reshape", x, shape=hlo_shape(ctx.aval_out))


def _reshape_transpose(ct, x, *, new_sizes, dimensions):
    if dimensions is None:
        return [reshape(ct, x.aval.shape)]
    permuted = tuple(x.aval.shape[d] for d in dimensions)
    return [transpose(reshape(ct, permuted), _inverse(dimensions))]


ad.deflinear2(reshape_p, _reshape_transpose)


@reshape_p.def_batching
def _reshape_batch(vals, dims, *, new_sizes, dimensions):
    # Row-major reshapes keep a leading or a trailing batch axis apart from the others, so
    # a batch dim already last stays last; any other moves to the front.
    (x,), (d,) = vals, dims
    aval = core.get_aval(x)
    size, last = aval.shape[d], aval.ndim - 1
    if d == last and last > 0:
        perm = None if dimensions is None else tuple(dimensions) + (last,)
        out = reshape_p.bind(x, new_sizes=tuple(new_sizes) + (size,), dimensions=perm)
        return out, len(new_sizes)
    x = batch_util.moveaxis(x, d, 0)
    perm = None if dimensions is None else (0,) + tuple(i + 1 for i in dimensions)
    return reshape_p.bind(x, new_sizes=(size,) + tuple(new_sizes), dimensions=perm), 0


def reshape(operand: Any, new_sizes: Sequence[int],
            dimensions: Sequence[int] | None = None) -> Any:
    """Reshapes ``operand`` (row-major), optionally transposing by ``dimensions`` first.

    Example:
        >>> lax.reshape(jnp.arange(6), (2, 3)).shape
        (2, 3)
    """
    operand = base.as_operand(operand, "reshape")
    new_sizes = check_shape("reshape", "new_sizes", new_sizes)
    dims = None if dimensions is None else tuple(int(d) for d in dimensions)
    aval = core.get_aval(operand)
    if dims is not None and dims == tuple(range(aval.ndim)):
        dims = None
    if aval.shape == new_sizes and dims is None and hasattr(operand, "aval"):
        return operand
    return reshape_p.bind(operand, new_sizes=new_sizes, dimensions=dims)


def _same_dtype(x, **_):
    return x.dtype


def _check_dims(prim: str, arg: str, dims: Sequence[int], ndim: int,
                unique: bool = True, error: type[Exception] = ValueError) -> tuple[int, ...]:
    """Validates static dimension indices (already ints) against a rank."""
    for d in dims:
        if not 0 <= d < ndim:
            raise error(f"{prim}: {arg} {tuple(dims)} contains {d}, out of range for an "
                        f"operand of rank {ndim}")
    if unique and len(set(dims)) != len(dims):
        raise error(f"{prim}: {arg} {tuple(dims)} contains duplicates")
    return tuple(dims)


def int_tuple(prim: str, arg: str, values: Any) -> tuple[int, ...]:
    """Static integer parameters (an int, or a sequence of ints / 0-d integer arrays)."""
    if isinstance(values, (int, np.integer)) and not isinstance(values, bool):
        values = (values,)
    try:
        values = tuple(values)
    except TypeError:
        raise TypeError(f"{prim}: {arg} must be a sequence of integers, got {values!r}") \
            from None
    for v in values:
        if isinstance(v, core.Tracer):
            core.concrete_or_error(v, f"{prim}: {arg} must be concrete")
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) and not (
                hasattr(v, "ndim") and v.ndim == 0 and dtypes.is_integer(v.dtype)):
            raise TypeError(f"{prim}: {arg} must contain only integers, got {values!r}")
    return tuple(int(v) for v in values)


def _canonical_dims(prim: str, arg: str, dims: Any, ndim: int) -> tuple[int, ...]:
    """Distinct integers in [-ndim, ndim) normalized to [0, ndim)."""
    dims = int_tuple(prim, arg, dims)
    for d in dims:
        if not -ndim <= d < ndim:
            raise ValueError(f"{prim}: {arg} {dims} contains {d}, out of range for an operand "
                             f"of rank {ndim}")
    out = tuple(d % ndim for d in dims)
    if len(set(out)) != len(out):
        raise ValueError(f"{prim}: {arg} {dims} contains duplicates")
    return out


def _is_array(x: Any) -> bool:
    return hasattr(x, "aval") and not isinstance(x, (np.ndarray, np.generic))


# ---------------------------------------------------------------- squeeze / expand_dims


def _squeeze_shape(x, *, dimensions):
    _check_dims("squeeze", "dimensions", dimensions, x.ndim)
    for d in dimensions:
        if x.shape[d] != 1:
            raise ValueError(f"squeeze: cannot squeeze dimension {d} of size {x.shape[d]} "
                             f"(operand shape {x.shape}); only size-1 dimensions can be "
                             "squeezed")
    return tuple(s for i, s in enumerate(x.shape) if i not in dimensions)


squeeze_p = standard_primitive(
    "squeeze", lambda x, *, dimensions: np.squeeze(x, axis=dimensions), _squeeze_shape,
    _same_dtype)


@squeeze_p.def_lowering
def _squeeze_lowering(ctx, x, *, dimensions):
    return ctx.b.op("reshape", x, shape=hlo_shape(ctx.aval_out))


ad.deflinear2(squeeze_p, lambda ct, x, *, dimensions: [reshape(ct, x.aval.shape)])


@squeeze_p.def_batching
def _squeeze_batch(vals, dims, *, dimensions):
    (x,), (d,) = vals, dims
    out_dim = d - sum(1 for i in dimensions if i < d)
    return squeeze_p.bind(x, dimensions=tuple(batch_util.batched_axis(i, d)
                                              for i in dimensions)), out_dim


def squeeze(array: Any, dimensions: Sequence[int]) -> Any:
    """Removes the given size-1 dimensions (negative indices allowed).

    Example:
        >>> lax.squeeze(jnp.ones((1, 3)), (0,)).shape
        (3,)
    """
    array = base.as_operand(array, "squeeze", "array")
    aval = core.get_aval(array)
    dims = tuple(sorted(_canonical_dims("squeeze", "dimensions", dimensions, aval.ndim)))
    if not dims and _is_array(array):
        return array
    return squeeze_p.bind(array, dimensions=dims)


def expand_dims(array: Any, dimensions: Sequence[int]) -> Any:
    """Inserts size-1 dimensions at the given output positions (via broadcast_in_dim).

    Example:
        >>> lax.expand_dims(jnp.ones(3), (0,)).shape
        (1, 3)
    """
    array = base.as_operand(array, "expand_dims", "array")
    aval = core.get_aval(array)
    dims = int_tuple("expand_dims", "dimensions", dimensions)
    out_ndim = aval.ndim + len(dims)
    dims = _canonical_dims("expand_dims", "dimensions", dims, out_ndim)
    shape = [1] * out_ndim
    rest = [i for i in range(out_ndim) if i not in dims]
    for i, s in zip(rest, aval.shape):
        shape[i] = s
    return broadcast_in_dim(array, tuple(shape), tuple(rest))


def broadcast_to_rank(x: Any, rank: int) -> Any:
    """Adds leading size-1 dimensions until ``x`` has ``rank`` dimensions.

    Example:
        >>> lax.broadcast_to_rank(jnp.ones(3), 3).shape
        (1, 1, 3)
    """
    aval = core.get_aval(base.as_operand(x, "broadcast_to_rank", "x"))
    if rank < aval.ndim:
        raise ValueError(f"broadcast_to_rank: rank {rank} is smaller than the operand rank "
                         f"{aval.ndim}")
    if rank == aval.ndim:
        return x
    return broadcast(x, (1,) * (rank - aval.ndim))


def collapse(operand: Any, start_dimension: int, stop_dimension: int | None = None) -> Any:
    """Collapses dimensions ``[start_dimension, stop_dimension)`` into one.

    Example:
        >>> lax.collapse(jnp.ones((2, 3, 4)), 0, 2).shape
        (6, 4)
    """
    aval = core.get_aval(base.as_operand(operand, "collapse"))
    nd = aval.ndim
    stop = nd if stop_dimension is None else stop_dimension
    start, stop = int(start_dimension), int(stop)
    start, stop = (start + nd if start < 0 else start), (stop + nd if stop < 0 else stop)
    if not 0 <= start <= stop <= nd:
        raise ValueError(f"collapse: invalid dimension range [{start_dimension}, "
                         f"{stop_dimension}) for an operand of rank {nd}")
    size = math.prod(aval.shape[start:stop])
    return reshape(operand, aval.shape[:start] + (size,) + aval.shape[stop:])


# ---------------------------------------------------------------- transpose


def _transpose_shape(x, *, permutation):
    if tuple(sorted(permutation)) != tuple(range(x.ndim)):  # a TypeError in JAX
        raise TypeError(f"transpose: permutation {tuple(permutation)} is not a permutation of "
                        f"the operand dimensions {tuple(range(x.ndim))}")
    return tuple(x.shape[p] for p in permutation)


transpose_p = standard_primitive(
    "transpose", lambda x, *, permutation: np.transpose(x, permutation), _transpose_shape,
    _same_dtype)


@transpose_p.def_lowering
def _transpose_lowering(ctx, x, *, permutation):
    return ctx.b.op("transpose", x, permutation=tuple(permutation))


def _inverse(permutation: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argsort(permutation))


ad.deflinear(transpose_p, lambda ct, *, permutation: [transpose(ct, _inverse(permutation))])


@transpose_p.def_batching
def _transpose_batch(vals, dims, *, permutation):
    # The batch dim keeps its position: output dim d is the operand's batch dim.
    (x,), (d,) = vals, dims
    perm = [batch_util.batched_axis(p, d) for p in permutation]
    perm.insert(d, d)
    return transpose_p.bind(x, permutation=tuple(perm)), d


def transpose(operand: Any, permutation: Sequence[int]) -> Any:
    """Permutes the dimensions: output dimension i is operand dimension ``permutation[i]``.

    Example:
        >>> lax.transpose(jnp.ones((2, 3)), (1, 0)).shape
        (3, 2)
    """
    operand = base.as_operand(operand, "transpose")
    perm = int_tuple("transpose", "permutation", permutation)
    if perm == tuple(range(core.get_aval(operand).ndim)) and _is_array(operand):
        return operand
    return transpose_p.bind(operand, permutation=perm)


# ---------------------------------------------------------------- rev


def _rev_shape(x, *, dimensions):
    _check_dims("rev", "dimensions", dimensions, x.ndim, error=TypeError)  # (as in JAX)
    return x.shape


rev_p = standard_primitive(
    "rev", lambda x, *, dimensions: np.flip(x, dimensions) if dimensions else x, _rev_shape,
    _same_dtype)


@rev_p.def_lowering
def _rev_lowering(ctx, x, *, dimensions):
    return ctx.b.op("reverse", x, dimensions=tuple(dimensions))


ad.deflinear(rev_p, lambda ct, *, dimensions: [rev(ct, dimensions)])


@rev_p.def_batching
def _rev_batch(vals, dims, *, dimensions):
    (x,), (d,) = vals, dims
    return rev_p.bind(x, dimensions=tuple(batch_util.batched_axis(i, d)
                                          for i in dimensions)), d


def rev(operand: Any, dimensions: Sequence[int]) -> Any:
    """Reverses the order of elements along ``dimensions``.

    Example:
        >>> lax.rev(jnp.arange(3), (0,))
        Array([2, 1, 0], dtype=int32)
    """
    operand = base.as_operand(operand, "rev")
    dims = int_tuple("rev", "dimensions", dimensions)
    if not dims and _is_array(operand):
        return operand
    return rev_p.bind(operand, dimensions=dims)


# ---------------------------------------------------------------- pad


def _pad_out_size(n: int, lo: int, hi: int, interior: int) -> int:
    return lo + hi + n + max(n - 1, 0) * interior


def _pad_shape(x, padding_value, *, padding_config):
    if padding_value.shape != ():
        raise ValueError(f"pad: padding_value must be a scalar, got shape "
                         f"{padding_value.shape}")
    if len(padding_config) != x.ndim:
        raise ValueError(f"pad: padding_config {padding_config} must have one (lo, hi, "
                         f"interior) triple per operand dimension (operand shape {x.shape})")
    out = []
    for d, (lo, hi, interior) in zip(x.shape, padding_config):
        if interior < 0:
            raise ValueError(f"pad: interior padding must be non-negative, got "
                             f"padding_config {padding_config}")
        size = _pad_out_size(d, lo, hi, interior)
        if size < 0:
            raise ValueError(f"pad: padding_config {padding_config} gives a negative dimension "
                             f"size {size} for operand shape {x.shape}")
        out.append(size)
    return tuple(out)


def _pad_dtype(x, padding_value, **_):
    if x.dtype != padding_value.dtype:
        raise TypeError(f"pad: operand and padding_value must have the same dtype, got "
                        f"{x.dtype} and {padding_value.dtype}")
    return x.dtype


def _pad_impl(x, padding_value, *, padding_config):
    return pad_array(x, padding_value, padding_config)


pad_p = standard_primitive("pad", _pad_impl, _pad_shape, _pad_dtype,
                           lambda x, v, **_: x.weak_type)


@pad_p.def_lowering
def _pad_lowering(ctx, x, padding_value, *, padding_config):
    lo, hi, interior = (tuple(c[k] for c in padding_config) for k in range(3))
    return ctx.b.op("pad", x, padding_value, edge_padding_low=lo, edge_padding_high=hi,
                    interior_padding=interior)


def _pad_transpose(ct, x, padding_value, *, padding_config):
    # Crop the edges (or restore cropped ones as zeros), then skip the interior padding;
    # the padding value received everything the operand did not.
    from ember.lax.slicing import slice  # slicing.py imports this module
    unpadded = pad(ct, 0, tuple((-lo, -hi, 0) for lo, hi, _ in padding_config))
    ndim = len(padding_config)
    ct_x = slice(unpadded, (0,) * ndim, core.get_aval(unpadded).shape,
                 tuple(interior + 1 for _, _, interior in padding_config))
    ct_v = None
    if ad.is_undefined_primal(padding_value):
        everything = tuple(range(ndim))
        ct_v = elementwise.sub(_sum(ct, everything), _sum(ct_x, everything))
    return [ct_x if ad.is_undefined_primal(x) else None, ct_v]


ad.deflinear2(pad_p, _pad_transpose)


@pad_p.def_batching
def _pad_batch(vals, dims, *, padding_config):
    (x, value), (dx, dv) = vals, dims
    if dv is not_mapped:  # the batch axis gets no padding
        config = list(padding_config)
        config.insert(dx, (0, 0, 0))
        return pad_p.bind(x, value, padding_config=tuple(config)), dx
    # A padding value per batch element: pad with any value (the operand's own padding rule
    # handles a mapped or unmapped x), then select the value where a padded mask is False.
    aval = core.get_aval(value)
    zero = elementwise.convert_element_type(0, aval.dtype, aval.weak_type)
    padded, dp = (pad_p.bind(x, zero, padding_config=padding_config), not_mapped) \
        if dx is not_mapped else _pad_batch([x, zero], [dx, not_mapped],
                                            padding_config=padding_config)
    true, false = (elementwise.convert_element_type(b, dtypes.bool_) for b in (True, False))
    ones = broadcast_in_dim(true, batch_util.unbatched_shape(x, dx), ())
    mask = pad_p.bind(ones, false, padding_config=padding_config)
    return elementwise.select_n_p.batch([mask, value, padded], [not_mapped, dv, dp])


def pad(operand: Any, padding_value: Any, padding_config: Sequence[tuple[int, int, int]]) -> Any:
    """Pads with ``padding_value``: per dimension (low, high, interior); negative lo/hi crop.

    Example:
        >>> lax.pad(jnp.ones(2), 0.0, [(1, 1, 1)])
        Array([0., 1., 0., 1., 0.], dtype=float32)
    """
    operand, padding_value = base.scalars_like("pad", operand, padding_value)
    try:
        config = tuple(int_tuple("pad", "padding_config", c) for c in padding_config)
    except TypeError:
        raise TypeError(f"pad: padding_config must be a sequence of (lo, hi, interior) "
                        f"integer triples, got {padding_config!r}") from None
    if any(len(c) != 3 for c in config):
        raise ValueError(f"pad: padding_config must contain (lo, hi, interior) triples, got "
                         f"{padding_config!r}")
    return pad_p.bind(operand, padding_value, padding_config=config)


# ---------------------------------------------------------------- concatenate


def _concatenate_shape(*xs, dimension):
    if not xs:
        raise TypeError("concatenate: needs at least one operand")
    nd = xs[0].ndim
    if not 0 <= dimension < max(nd, 0) or nd == 0:
        raise TypeError(f"concatenate: dimension {dimension} is out of range for operands "
                        f"of rank {nd}")
    for x in xs:
        if x.ndim != nd:
            raise TypeError(f"concatenate: all operands must have the same rank, got shapes "
                            f"{', '.join(str(a.shape) for a in xs)}")
        if any(a != b for i, (a, b) in enumerate(zip(x.shape, xs[0].shape)) if i != dimension):
            raise TypeError(f"concatenate: operand shapes must match except in dimension "
                            f"{dimension}, got shapes {', '.join(str(a.shape) for a in xs)}")
    size = sum(x.shape[dimension] for x in xs)
    return xs[0].shape[:dimension] + (size,) + xs[0].shape[dimension + 1:]


concatenate_p = standard_primitive(
    "concatenate", lambda *xs, dimension: np.concatenate(xs, axis=dimension),
    _concatenate_shape, lambda *xs, **_: base.check_same_dtypes("concatenate", *xs))


@concatenate_p.def_lowering
def _concatenate_lowering(ctx, *xs, dimension):
    return ctx.b.op("concatenate", *xs, dimension=dimension)


def _concatenate_transpose(ct, *xs, dimension):
    from ember.lax.slicing import slice  # slicing.py imports this module
    ct_shape = core.get_aval(ct).shape
    out, start = [], 0
    for x in xs:
        stop = start + (x.aval if ad.is_undefined_primal(x) else core.get_aval(x)).shape[
            dimension]
        if ad.is_undefined_primal(x):
            starts, limits = [0] * len(ct_shape), list(ct_shape)
            starts[dimension], limits[dimension] = start, stop
            out.append(slice(ct, starts, limits))
        else:
            out.append(None)
        start = stop
    return out


ad.deflinear2(concatenate_p, _concatenate_transpose)


@concatenate_p.def_batching
def _concatenate_batch(vals, dims, *, dimension):
    # Every operand gets the first mapped operand's batch dim (unmapped ones are broadcast).
    size = axis_size_of(vals, dims)
    at = next(d for d in dims if d is not not_mapped)
    xs = [batch_util.move_to(x, d, at, size) for x, d in zip(vals, dims)]
    return concatenate_p.bind(*xs, dimension=batch_util.batched_axis(dimension, at)), at


def concatenate(operands: Sequence[Any], dimension: int) -> Any:
    """Concatenates same-dtype, same-rank operands along ``dimension``.

    Example:
        >>> lax.concatenate([jnp.ones(2), jnp.zeros(1)], 0)
        Array([1., 1., 0.], dtype=float32)
    """
    if isinstance(operands, core.Tracer) or _is_array(operands):
        raise TypeError("concatenate: operands must be a sequence of arrays")
    operands = [base.as_operand(x, "concatenate") for x in operands]
    if not operands:
        raise ValueError("concatenate: needs at least one operand")
    if isinstance(dimension, bool) or not isinstance(dimension, (int, np.integer)):
        raise TypeError(f"concatenate: dimension must be an integer, got {dimension!r}")
    if len(operands) == 1 and _is_array(operands[0]):
        _concatenate_shape(core.get_aval(operands[0]), dimension=int(dimension))
        return operands[0]
    return concatenate_p.bind(*operands, dimension=int(dimension))


# ---------------------------------------------------------------- split


def _split_abstract_eval(x, *, sizes, axis):
    if not 0 <= axis < x.ndim:
        raise ValueError(f"split: axis {axis} is out of bounds for an operand of rank "
                         f"{x.ndim}")
    if any(s < 0 for s in sizes):
        raise ValueError(f"split: sizes must be non-negative, got {list(sizes)}")
    if sum(sizes) != x.shape[axis]:
        raise ValueError(f"split: the sizes {list(sizes)} sum to {sum(sizes)}, but dimension "
                         f"{axis} of the operand (shape {x.shape}) has size {x.shape[axis]}")
    return [core.ShapedArray(x.shape[:axis] + (s,) + x.shape[axis + 1:], x.dtype, x.weak_type)
            for s in sizes]


def _split_impl(x, *, sizes, axis):
    offsets = np.cumsum(sizes[:-1], dtype=np.int64) if sizes else []
    return [np.array(p, copy=True) for p in np.split(x, offsets, axis=axis)][:len(sizes)]


split_p = core.MultipleResultsPrimitive("split")
split_p.def_impl(_split_impl)
split_p.def_abstract_eval(_split_abstract_eval)


@split_p.def_lowering
def _split_lowering(ctx, x, *, sizes, axis):
    outs, start = [], 0
    for size in sizes:
        starts, limits = [0] * x.shape.rank, list(x.dims)
        starts[axis], limits[axis] = start, start + size
        outs.append(ctx.b.op("slice", x, start_indices=tuple(starts),
                             limit_indices=tuple(limits), strides=(1,) * x.shape.rank))
        start += size
    return outs


def _split_jvp(primals, tangents, *, sizes, axis):
    (x,), (t,) = primals, tangents
    out = split_p.bind(x, sizes=sizes, axis=axis)
    if type(t) is ad.Zero:
        return out, [ad.Zero.from_primal_value(o) for o in out]
    return out, split_p.bind(t, sizes=sizes, axis=axis)


def _split_transpose(cts, x, *, sizes, axis):
    if all(type(c) is ad.Zero for c in cts):
        return [ad.Zero(x.aval)]
    parts = [elementwise.instantiate(c) for c in cts]
    return [concatenate_p.bind(*parts, dimension=axis) if parts else None]


split_p.def_jvp(_split_jvp)
split_p.def_transpose(_split_transpose)


@split_p.def_batching
def _split_batch(vals, dims, *, sizes, axis):
    (x,), (d,) = vals, dims
    out = split_p.bind(x, sizes=sizes, axis=batch_util.batched_axis(axis, d))
    return out, [d] * len(out)


def split(operand: Any, sizes: Sequence[int], axis: int = 0) -> list[Any]:
    """Splits ``operand`` along ``axis`` into pieces of the given ``sizes`` (summing to the
    axis' size).

    Example:
        >>> lax.split(jnp.arange(5), (2, 3))
        [Array([0, 1], dtype=int32), Array([2, 3, 4], dtype=int32)]
    """
    operand = base.as_operand(operand, "split")
    sizes = int_tuple("split", "sizes", sizes)
    ndim = core.get_aval(operand).ndim
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"split: axis must be an integer, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"split: axis {axis} is out of bounds for an operand of rank {ndim}")
    return list(split_p.bind(operand, sizes=sizes, axis=int(axis) % ndim))


# ---------------------------------------------------------------- composites: tile, stack...


def tile(operand: Any, reps: Sequence[int]) -> Any:
    """``operand`` repeated ``reps[i]`` times along each axis ``i`` (one rep per axis).

    Example:
        >>> lax.tile(jnp.array([1, 2]), (3,))
        Array([1, 2, 1, 2, 1, 2], dtype=int32)
    """
    operand = base.as_operand(operand, "tile")
    reps = int_tuple("tile", "reps", reps)
    shape = core.get_aval(operand).shape
    if len(reps) != len(shape):
        raise TypeError(f"tile: reps must have one entry per dimension of the operand, got "
                        f"reps={reps} for an operand of shape {shape}")
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: reps must be non-negative, got {reps}")
    # Each axis i becomes (reps[i], shape[i]), then the pairs are merged.
    wide = tuple(n for pair in zip(reps, shape) for n in pair)
    tiled = broadcast_in_dim(operand, wide, tuple(range(1, 2 * len(shape), 2)))
    return reshape(tiled, tuple(r * n for r, n in zip(reps, shape)))


def stack(operands: Sequence[Any], axis: int = 0) -> Any:
    """Stacks same-shape, same-dtype arrays along a new axis ``axis``.

    Example:
        >>> lax.stack([jnp.zeros(2), jnp.ones(2)], axis=1)
        Array([[0., 1.],
               [0., 1.]], dtype=float32)
    """
    if isinstance(operands, core.Tracer) or _is_array(operands) or \
            isinstance(operands, np.ndarray):
        operands = list(unstack(operands, 0))  # an array stacks its rows (as in JAX)
    operands = [base.as_operand(x, "stack", f"operands[{i}]") for i, x in
                enumerate(operands)]
    if not operands:
        raise ValueError("stack: needs at least one operand")
    avals = [core.get_aval(x) for x in operands]
    base.check_same_dtypes("stack", *avals)
    if any(a.shape != avals[0].shape for a in avals):
        raise ValueError(f"stack: all operands must have the same shape, got shapes "
                         f"{', '.join(str(a.shape) for a in avals)}")
    axis = base.check_axis("stack", "axis", axis, avals[0].ndim + 1)
    return concatenate([expand_dims(x, (axis,)) for x in operands], axis)


def unstack(x: Any, axis: int = 0) -> tuple[Any, ...]:
    """The slices of ``x`` along ``axis``, as a tuple of arrays of one rank less.

    Example:
        >>> lax.unstack(jnp.array([[1, 2], [3, 4]]), axis=1)
        (Array([1, 3], dtype=int32), Array([2, 4], dtype=int32))
    """
    x = base.as_operand(x, "unstack", "x")
    aval = core.get_aval(x)
    if aval.ndim == 0:
        raise ValueError("unstack: axis 0 is out of bounds for an operand of rank 0")
    axis = base.check_axis("unstack", "axis", axis, aval.ndim)
    if aval.shape[axis] == 0:
        return ()
    pieces = split(x, (1,) * aval.shape[axis], axis)
    return tuple(squeeze(p, (axis,)) for p in pieces)


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The NumPy broadcast of ``shapes`` (tuples of integers).

    Example:
        >>> lax.broadcast_shapes((3, 1), (1, 4), (5, 1, 1))
        (5, 3, 4)
    """
    if not shapes:
        raise ValueError("broadcast_shapes: needs at least one shape")
    shapes = [check_shape("broadcast_shapes", "shapes", s) for s in shapes]
    rank = max(len(s) for s in shapes)
    out = base.merge_sizes([(1,) * (rank - len(s)) + s for s in shapes])
    if out is None:
        raise ValueError(f"broadcast_shapes: incompatible shapes for broadcasting: "
                         f"{[tuple(s) for s in shapes]}")
    return out


def broadcast_like(arr: Any, like_arr: Any) -> Any:
    """``arr`` broadcast (NumPy's rules) to the shape of ``like_arr``.

    Example:
        >>> lax.broadcast_like(jnp.array([1, 2]), jnp.zeros((2, 2)))
        Array([[1, 2],
               [1, 2]], dtype=int32)
    """
    arr = base.as_operand(arr, "broadcast_like", "arr")
    target = core.get_aval(base.as_operand(like_arr, "broadcast_like", "like_arr")).shape
    aval = core.get_aval(arr)
    lead = len(target) - aval.ndim
    if lead < 0 or any(n not in (1, t) for n, t in zip(aval.shape, target[lead:])):
        raise ValueError(f"broadcast_like: cannot broadcast an array of shape {aval.shape} "
                         f"to shape {target}")
    if aval.shape == target:
        return arr
    kept = tuple(i for i, (n, t) in enumerate(zip(aval.shape, target[lead:])) if n == t)
    if len(kept) != aval.ndim:  # size-1 axes that stretch are dropped first
        arr = reshape(arr, tuple(aval.shape[i] for i in kept))
    return broadcast_in_dim(arr, target, tuple(lead + i for i in kept))


def empty(shape: Any, dtype: Any, *, out_sharding: Any = None) -> Any:
    """An array of ``shape`` and ``dtype`` whose values are unspecified (ember: zeros).

    Example:
        >>> lax.empty((2,), jnp.float32).shape
        (2,)
    """
    if out_sharding is not None:
        raise NotImplementedError("empty: out_sharding is not supported (one device)")
    shape = check_shape("empty", "shape", (shape,) if isinstance(shape, (int, np.integer))
                        else shape)
    try:
        dt = dtypes.canonicalize_dtype(dtypes.dtype(dtype))
    except Exception:
        raise TypeError(f"empty: dtype must be a dtype, got {dtype!r}") from None
    return broadcast(elementwise.convert_element_type(0, dt), shape)


def dtype(x: Any) -> np.dtype:
    """The dtype of a value or dtype-like, canonicalized as JAX's ``lax.dtype`` does: Python
    scalars and types, NumPy values, types and dtypes are canonicalized; ember arrays keep
    theirs.

    Example:
        >>> lax.dtype(1.0), lax.dtype(np.arange(3, dtype=np.int64))
        (dtype('float32'), dtype('int32'))
    """
    if x is None:
        raise ValueError("dtype: invalid argument None")
    if _is_array(x) or isinstance(x, core.Tracer):
        return core.get_aval(x).dtype
    return dtypes.dtype(x, canonicalize=True)


# ---------------------------------------------------------------- iota


def _iota_shape(*, dtype, shape, dimension):
    check_shape("iota", "shape", shape)
    if not 0 <= dimension < len(shape):
        raise ValueError(f"iota: dimension {dimension} is out of range for shape {shape}")
    return shape


def _iota_dtype(*, dtype, shape, dimension):
    base.check_dtype("iota", "dtype", dtype, base.numeric_dtypes)
    return dtype


def _iota_impl(*, dtype, shape, dimension):
    ar = np.arange(shape[dimension], dtype=np.int64).astype(dtype)
    expanded = [1] * len(shape)
    expanded[dimension] = shape[dimension]
    return np.broadcast_to(ar.reshape(expanded), shape)


iota_p = standard_primitive("iota", _iota_impl, _iota_shape, _iota_dtype,
                            lambda **_: False)


@iota_p.def_lowering
def _iota_lowering(ctx, *, dtype, shape, dimension):
    return ctx.b.op("iota", shape=hlo_shape(ctx.aval_out), iota_dimension=dimension)


ad.defjvp_zero(iota_p)  # no operands: never differentiated, zero for completeness


def broadcasted_iota(dtype: Any, shape: Sequence[int], dimension: int) -> Any:
    """An array of ``shape`` whose values count along ``dimension``.

    Example:
        >>> lax.broadcasted_iota(jnp.int32, (2, 2), 1)
        Array([[0, 1],
               [0, 1]], dtype=int32)
    """
    dtype = dtypes.canonicalize_dtype(dtypes.dtype(dtype))
    shape = check_shape("broadcasted_iota", "shape", shape)
    if isinstance(dimension, bool) or not isinstance(dimension, (int, np.integer)):
        raise TypeError(f"broadcasted_iota: dimension must be an integer, got {dimension!r}")
    dimension = int(dimension)
    if not -len(shape) <= dimension < len(shape):
        raise ValueError(f"broadcasted_iota: dimension {dimension} is out of range for shape "
                         f"{shape}")
    return iota_p.bind(dtype=dtype, shape=shape, dimension=dimension % len(shape))


def iota(dtype: Any, size: int) -> Any:
    """``[0, 1, ..., size - 1]`` with the given dtype.

    Example:
        >>> lax.iota(jnp.int32, 3)
        Array([0, 1, 2], dtype=int32)
    """
    size = core.concrete_or_error(size, "iota: size must be a concrete integer")
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
        raise TypeError(f"iota: size must be an integer, got {size!r}")
    return broadcasted_iota(dtype, (int(size),), 0)


# ---------------------------------------------------------------- full


def full(shape: Sequence[int], fill_value: Any, dtype: Any = None) -> Any:
    """An array of ``shape`` filled with the scalar ``fill_value`` (cast to ``dtype``).

    Example:
        >>> lax.full((2,), 3.0)
        Array([3., 3.], dtype=float32)
    """
    shape = check_shape("full", "shape", (shape,) if isinstance(shape, (int, np.integer))
                        else shape)
    fill_value = base.as_operand(fill_value, "full", "fill_value")
    aval = core.get_aval(fill_value)
    if aval.shape != ():
        raise TypeError(f"full: fill_value must be a scalar, got shape {aval.shape}")
    if dtype is None:
        value = fill_value if _is_array(fill_value) or isinstance(fill_value, core.Tracer) \
            else elementwise.convert_element_type(fill_value, aval.dtype, aval.weak_type)
    else:
        value = elementwise.convert_element_type(fill_value, dtype)
    return broadcast(value, shape)


def full_like(x: Any, fill_value: Any, dtype: Any = None,
              shape: Sequence[int] | None = None) -> Any:
    """Like ``full``, taking the shape and dtype from ``x`` unless overridden.

    Example:
        >>> lax.full_like(jnp.ones((2,), jnp.int32), 5)
        Array([5, 5], dtype=int32)
    """
    aval = core.get_aval(base.as_operand(x, "full_like", "x"))
    weak = dtype is None and aval.weak_type
    dt = aval.dtype if dtype is None else dtypes.canonicalize_dtype(dtypes.dtype(dtype))
    value = elementwise.convert_element_type(fill_value, dt, weak)
    return broadcast(value, aval.shape if shape is None else tuple(shape))


def zeros_like_array(x: Any) -> Any:
    """Zeros with the shape and dtype of ``x``."""
    return full_like(x, 0)


__all__ = [
    "broadcast_in_dim", "broadcast", "broadcast_to_shape", "broadcast_to_rank", "reshape",
    "squeeze", "expand_dims", "collapse", "transpose", "rev", "pad", "concatenate", "iota",
    "broadcasted_iota", "full", "full_like", "zeros_like_array", "split", "tile", "stack",
    "unstack", "broadcast_shapes", "broadcast_like", "empty", "dtype",
    "broadcast_in_dim_p", "reshape_p", "squeeze_p", "transpose_p", "rev_p", "pad_p",
    "concatenate_p", "iota_p", "split_p",
]
