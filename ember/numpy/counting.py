"""Counting and set membership: isin, digitize, bincount and the array-API unique_* functions.

``isin`` and ``digitize`` trace like any elementwise function. ``bincount`` and the
``unique_*`` functions have an output length that depends on the data: eagerly it is read from
the values; under ``jit``/``vmap`` pass ``length=`` (bincount) or ``size=`` (unique_*).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ember import core, dtypes, lax
from ember.numpy._util import array_arg as _arg
from ember.numpy._util import (
    broadcast_shapes,
    check_arraylike,
    concrete_index,
    ensure_array,
    promote_dtypes,
)
from ember.numpy.sorting import argsort, searchsorted, unique

# ---------------------------------------------------------------- helpers


def _flat(x: Any) -> Any:
    return lax.reshape(x, (x.size,))


def _full(shape: tuple[int, ...], value: Any, dt: Any) -> Any:
    return lax.full(shape, value, dt)


def _iota(n: int) -> Any:
    return lax.iota(dtypes.int32, n)


def _concrete_bool(fn: str, name: str, value: Any) -> bool:
    value = core.concrete_or_error(
        value, f"The error occurred because of argument '{name}' of jnp.{fn}.")
    return bool(value)


def _as_weak(x: Any, weak: bool) -> Any:
    return lax.convert_element_type(x, x.dtype, weak) if weak else x


# ---------------------------------------------------------------- isin

_ISIN_METHODS = ("auto", "compare_all", "binary_search", "sort")


def _isin_sort(a: Any, b: Any) -> Any:
    """Membership of ``a`` in ``b`` from one sort of both: each element of ``a`` is found when
    the closest element of ``b`` sorted at or before it compares equal to it."""
    na, nb = a.shape[0], b.shape[0]
    keys = lax.concatenate([b, a], 0)
    # Second key: 0 for b, 1 for a, so b's copies of a value sort before a's.
    tags = lax.concatenate([_full((nb,), 0, dtypes.int32), _full((na,), 1, dtypes.int32)], 0)
    pos = _iota(na + nb)
    skeys, stags, spos = lax.sort((keys, tags, pos), dimension=0, is_stable=True, num_keys=2)
    # Index (in sorted order) of the last element of b at or before each position.
    from_b = lax.eq(stags, _full((na + nb,), 0, dtypes.int32))
    last_b = lax.cummax(lax.select(from_b, _iota(na + nb), _full((na + nb,), -1, dtypes.int32)),
                        axis=0)
    found = lax.bitwise_and(lax.ge(last_b, _full((na + nb,), 0, dtypes.int32)),
                            lax.eq(skeys, skeys[lax.max(last_b, _full((na + nb,), 0,
                                                                     dtypes.int32))]))
    # Back to a's order: the sorted position of a[i] is where spos == nb + i (b's entries
    # go out of bounds and are dropped; a negative index would wrap around).
    dest = lax.select(from_b, _full((na + nb,), na, dtypes.int32),
                      lax.sub(spos, _full((na + nb,), nb, dtypes.int32)))
    return _full((na,), False, dtypes.bool_).at[dest].set(found, mode="drop")


def isin(element: Any, test_elements: Any, assume_unique: bool = False,
         invert: bool = False, *, method: str = "auto") -> Any:
    """Whether each element of ``element`` occurs in ``test_elements`` (boolean, same shape).

    Both arguments are promoted to a common dtype first; NaN is in no array. ``invert=True``
    gives the negation. ``method``: "auto"/"compare_all" compare every pair (best for small
    inputs), "binary_search" sorts ``test_elements`` and searches each element, "sort" sorts
    both together. ``assume_unique`` is a hint and does not change the result.

    Example:
        >>> jnp.isin(jnp.array([1, 2, 3, 4]), jnp.array([4, 1, 7]))
        Array([ True, False, False,  True], dtype=bool)
    """
    check_arraylike("isin", element, test_elements)
    if method not in _ISIN_METHODS:
        raise ValueError(f"isin: method={method!r} is not implemented; options are "
                         f"{', '.join(map(repr, _ISIN_METHODS))}")
    _concrete_bool("isin", "assume_unique", assume_unique)
    invert = _concrete_bool("isin", "invert", invert)
    element, test_elements = ensure_array(element), ensure_array(test_elements)
    shape = element.shape
    a, b = promote_dtypes(element, test_elements)
    a, b = _flat(a), _flat(b)
    na, nb = a.shape[0], b.shape[0]
    if na == 0 or nb == 0:
        return _full(shape, invert, dtypes.bool_)
    if method in ("auto", "compare_all"):
        big = (na, nb)
        eq = lax.eq(lax.broadcast_in_dim(a, big, (0,)), lax.broadcast_in_dim(b, big, (1,)))
        found = lax.reduce_or(eq, (1,))
    elif method == "binary_search":
        sb = lax.sort(b, dimension=0)
        idx = lax.min(searchsorted(sb, a), _full((na,), nb - 1, dtypes.int32))
        found = lax.eq(a, sb[idx])
    else:
        found = _isin_sort(a, b)
    if invert:
        found = lax.bitwise_not(found)
    return lax.reshape(lax.convert_element_type(found, dtypes.bool_, False), shape)


# ---------------------------------------------------------------- digitize


def digitize(x: Any, bins: Any, right: bool = False, *, method: str | None = None) -> Any:
    """Index (int32) of the bin of ``bins`` that each value of ``x`` falls into.

    ``bins`` is 1-D and monotonically increasing or decreasing (the direction is read from
    its first and last entries). For increasing bins the result ``i`` satisfies
    ``bins[i-1] <= x < bins[i]`` (``bins[i-1] < x <= bins[i]`` with ``right=True``); for
    decreasing bins the inequalities are reversed. Values below/above every bin give 0 or
    ``len(bins)``; NaN goes past the largest bin. ``method`` is passed to ``searchsorted``.

    Example:
        >>> jnp.digitize(jnp.array([0.5, 1.0, 2.5, 9.0]), jnp.array([1.0, 2.0, 3.0]))
        Array([0, 1, 2, 3], dtype=int32)
    """
    check_arraylike("digitize", x, bins)
    right = _concrete_bool("digitize", "right", right)
    x, bins = ensure_array(x), ensure_array(bins)
    if bins.ndim != 1:
        raise ValueError(f"digitize: bins must be a 1-dimensional array; got bins of shape "
                         f"{bins.shape}")
    n = bins.shape[0]
    if n == 0:
        return _full(x.shape, 0, dtypes.int32)
    side = "left" if right else "right"
    kw = {} if method is None else {"method": method}
    up = searchsorted(bins, x, side=side, **kw)
    down = lax.sub(_full(x.shape, n, dtypes.int32),
                   searchsorted(lax.rev(bins, (0,)), x, side=side, **kw))
    increasing = lax.ge(bins[n - 1], bins[0])
    return lax.select(lax.broadcast_in_dim(increasing, x.shape, ()), up, down)


# ---------------------------------------------------------------- bincount


def bincount(x: Any, weights: Any = None, minlength: int = 0, *,
             length: int | None = None) -> Any:
    """Number of occurrences of each non-negative integer in the 1-D ``x`` (default int).

    With ``weights`` (same shape as ``x``) the bins sum the weights instead, in the weights'
    dtype. Eagerly the result has ``max(minlength, x.max() + 1)`` bins; under tracing pass a
    static ``length``, which then fixes the number of bins exactly (``minlength`` is ignored,
    larger values are dropped). As in JAX, negative values are counted in bin 0.

    Example:
        >>> jnp.bincount(jnp.array([0, 1, 1, 3]))
        Array([1, 2, 0, 1], dtype=int32)
    """
    x = _arg("bincount", x)
    if x.dtype == dtypes.bool_:
        x = lax.convert_element_type(x, dtypes.int32)
    if not dtypes.issubdtype(x.dtype, np.integer):
        raise TypeError(f"bincount: x argument must have an integer type; got {x.dtype}")
    if x.ndim != 1:
        raise ValueError(f"bincount: only 1-dimensional input supported, got x of shape "
                         f"{x.shape}")
    minlength = concrete_index("bincount", "minlength", minlength)
    if length is None:
        if isinstance(x, core.Tracer) and x.to_concrete_value() is None:
            raise core.ConcretizationTypeError(
                x, "The error occurred because of argument 'x' of jnp.bincount: the number of "
                   "bins depends on the values. To avoid this error, pass a static `length`.")
        value = np.asarray(core.concrete_or_error(x))
        length = max(minlength, int(max(0, value.max())) + 1 if value.size else 0)
    else:
        length = concrete_index("bincount", "length", length)
        if length < 0:
            raise TypeError(f"bincount: length must be non-negative, got {length}")
    if weights is None:
        weights = _full(x.shape, 1, dtypes.default_int_dtype())
    else:
        weights = _arg("bincount", weights)
        if weights.shape != x.shape:
            raise ValueError(f"bincount: weights must have the shape of x; got x of shape "
                             f"{x.shape} and weights of shape {weights.shape}")
        if weights.dtype == dtypes.bool_:
            raise TypeError("bincount: weights must be numeric, got dtype bool")
    idx = lax.max(x, _full(x.shape, 0, x.dtype))
    return _full((length,), 0, weights.dtype).at[idx].add(weights, mode="drop")


# ---------------------------------------------------------------- unique_*


class _UniqueAllResult(NamedTuple):
    """Result of :func:`unique_all`."""

    values: Any
    indices: Any
    inverse_indices: Any
    counts: Any


class _UniqueCountsResult(NamedTuple):
    """Result of :func:`unique_counts`."""

    values: Any
    counts: Any


class _UniqueInverseResult(NamedTuple):
    """Result of :func:`unique_inverse`."""

    values: Any
    inverse_indices: Any


def _unique_sized(fn: str, x: Any, size: int, fill_value: Any,
                  equal_nan: bool = False) -> tuple[Any, Any, Any, Any]:
    """values, indices, inverse_indices, counts with a static number ``size`` of entries.

    Traceable: sort, mark the first element of each run of equal values (NaNs are all
    distinct unless ``equal_nan``: sorted last, they then make one run), number the runs and
    scatter. Missing entries are padded: values with
    ``fill_value`` (default: the smallest value), indices with the smallest value's index,
    counts with 0; extra unique values are dropped. The values keep ``x``'s weak type unless
    a ``fill_value`` is merged into them (as in JAX, where ``where`` with the strong fill
    makes them strong; JAX's zero-length cases build them with ``full_like``: weak).
    """
    idt = dtypes.default_int_dtype()  # index dtype (int64 under x64, as in JAX)
    flat = _flat(x)
    n = flat.shape[0]
    fill = None
    if fill_value is not None:
        check_arraylike(fn, fill_value)
        fill = ensure_array(fill_value)
        try:
            broadcast_shapes(fill.shape, (size,))
        except ValueError:
            raise ValueError(f"{fn}: fill_value of shape {fill.shape} does not broadcast to "
                             f"(size,) = ({size},)") from None
        fill = lax.broadcast_to_shape(lax.convert_element_type(fill, x.dtype, False), (size,))
    if n == 0:
        if size and fill is None:
            raise ValueError(f"{fn}: for zero-sized input with nonzero size argument, "
                             "fill_value must be specified")
        values = _as_weak(fill if size else _full((0,), 0, x.dtype), x.aval.weak_type)
        return (values, _full((size,), 0, idt), _full(x.shape, 0, idt),
                _full((size,), 0, idt))
    perm = argsort(flat)
    xs = flat[perm]
    differs = lax.ne(xs[1:], xs[:-1])
    if equal_nan and dtypes.is_inexact(x.dtype):
        differs = lax.bitwise_and(differs, lax.bitwise_not(
            lax.bitwise_and(lax.ne(xs[1:], xs[1:]), lax.ne(xs[:-1], xs[:-1]))))
    is_first = lax.concatenate([_full((1,), True, dtypes.bool_), differs], 0)
    group = lax.sub(lax.cumsum(lax.convert_element_type(is_first, idt), axis=0),
                    _full((n,), 1, idt))
    dest = lax.select(is_first, group, _full((n,), size, idt))
    values = _full((size,), 0, x.dtype).at[dest].set(xs, mode="drop")
    indices = _full((size,), 0, idt).at[dest].set(perm, mode="drop")
    valid = lax.le(lax.iota(idt, size), _full((size,), group[n - 1], idt))
    if fill is None:
        fill = lax.broadcast_in_dim(xs[0], (size,), ())
    values = lax.select(valid, values, fill)
    if fill_value is None or size == 0:
        values = _as_weak(values, x.aval.weak_type)
    indices = lax.select(valid, indices, lax.broadcast_in_dim(perm[0], (size,), ()))
    counts = _full((size,), 0, idt).at[group].add(1, mode="drop")
    inverse = _full((n,), 0, idt).at[perm].set(group, unique_indices=True)
    return values, indices, lax.reshape(inverse, x.shape), counts


def _unique_sized_axis(arr: Any, axis: int, size: int | None, fill_value: Any,
                       equal_nan: bool) -> tuple[Any, Any, Any, Any]:
    """``unique(arr, axis=axis, size=size)``: values, indices, inverse, counts (as in JAX).

    The slices along ``axis`` are sorted lexicographically, a slice that differs from its
    predecessor starts a new value and the first ``size`` starts are gathered (padding repeats
    the smallest slice, or is ``fill_value``). Traceable; ``size=None`` (a concrete ``arr``)
    means the number of unique slices. Empty slices follow JAX: all of them are one value, and
    the result then ignores ``size``.
    """
    from ember.numpy.index_functions import nonzero
    from ember.numpy.reductions import any as _any
    from ember.numpy.reductions import cumsum
    from ember.numpy.shape import moveaxis
    from ember.numpy.sorting import lexsort
    from ember.numpy.ufuncs import isnan, where

    idt = dtypes.default_int_dtype()
    if arr.shape[axis] == 0 and size and fill_value is None:
        raise ValueError("unique: for zero-sized input with nonzero size argument, "
                         "fill_value must be specified")
    aux = moveaxis(arr, axis, 0)
    if dtypes.is_complex(aux.dtype):  # a NaN in either part is the one complex NaN
        aux = where(isnan(aux), lax.full((), np.nan, aux.dtype), aux)
    n, *rest = aux.shape
    if math.prod(rest) == 0:
        n, perm = 1, _full((1,), 0, idt)
    else:
        keys = lax.transpose(lax.reshape(aux, (n, math.prod(rest))), (1, 0))
        perm = lexsort(keys[::-1])
    aux = aux[perm]
    if aux.size:
        differs = lax.ne(aux[1:], aux[:-1])
        if equal_nan and dtypes.is_inexact(aux.dtype):
            differs = lax.bitwise_and(differs, lax.bitwise_not(
                lax.bitwise_and(isnan(aux[1:]), isnan(aux[:-1]))))
        mask = lax.concatenate([_full((1,), True, dtypes.bool_),
                                _any(differs, axis=tuple(range(1, aux.ndim)))], 0)
    else:
        mask = _full((n,), False, dtypes.bool_)
    n_unique = lax.reduce_sum(lax.convert_element_type(mask, idt), (0,))
    if size is None:
        size = int(n_unique)
    ind = nonzero(mask, size=size)[0]
    values = aux[ind] if aux.size else aux
    if fill_value is not None:
        check_arraylike("unique", fill_value)
        fill = lax.convert_element_type(ensure_array(fill_value), values.dtype, False)
        if values.shape[0]:
            valid = lax.lt(lax.iota(idt, size), _full((size,), n_unique, idt))
            valid = lax.broadcast_in_dim(valid, (size,) + (1,) * (values.ndim - 1), (0,))
            values = where(valid, values, fill)  # (broadcasts an empty slice to size)
        else:
            values = lax.broadcast_to_shape(fill, (size, *values.shape[1:]))
    values = moveaxis(values, 0, axis)
    if not aux.size:
        m = arr.shape[axis]
        return (values, perm, _full((m,), 0, idt),
                _full((1,) if m else (0,), m, idt))
    group = lax.sub(cumsum(mask, dtype=idt), _full((n,), 1, idt))
    inverse = _full((n,), 0, idt).at[perm].set(group)
    # Counts are the gaps between starts; each padded start (0) becomes n: a count of 0.
    starts = nonzero(mask, size=size + 1)[0]
    starts = lax.concatenate([starts[:1], lax.select(
        lax.ne(starts[1:], _full((size,), 0, idt)), starts[1:], _full((size,), n, idt))], 0)
    counts = lax.sub(starts[1:], starts[:-1])
    return values, perm[ind], inverse, counts


def _unique_parts(fn: str, x: Any, size: Any, fill_value: Any) -> tuple[Any, Any, Any, Any]:
    """values, indices, inverse_indices (shape of ``x``), counts; NaNs are all distinct."""
    x = _arg(fn, x)
    if size is None:  # fill_value pads to size: without size there is nothing to pad
        values, indices, inverse, counts = unique(
            x, return_index=True, return_inverse=True, return_counts=True, equal_nan=False)
        inverse = lax.reshape(inverse, x.shape)
    else:
        size = concrete_index(fn, "size", size)
        if size < 0:
            raise TypeError(f"{fn}: size must be non-negative, got {size}")
        values, indices, inverse, counts = _unique_sized(fn, x, size, fill_value)
    return values, indices, inverse, counts


def unique_values(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> Any:
    """Sorted unique values of ``x`` (flattened); NaNs are not merged.

    Eagerly the length comes from the data; ``size`` fixes it (padding with ``fill_value``,
    by default the smallest value, or truncating), which makes the function traceable.

    Example:
        >>> jnp.unique_values(jnp.array([3, 1, 3, 2]))
        Array([1, 2, 3], dtype=int32)
    """
    return _unique_parts("unique_values", x, size, fill_value)[0]


def unique_counts(x: Any, /, *, size: int | None = None,
                  fill_value: Any = None) -> _UniqueCountsResult:
    """Sorted unique values of ``x`` and how often each occurs (int32).

    ``size``/``fill_value`` as in :func:`unique_values`; padded counts are 0.

    Example:
        >>> jnp.unique_counts(jnp.array([3, 1, 3])).counts
        Array([1, 2], dtype=int32)
    """
    values, _, _, counts = _unique_parts("unique_counts", x, size, fill_value)
    return _UniqueCountsResult(values=values, counts=counts)


def unique_inverse(x: Any, /, *, size: int | None = None,
                   fill_value: Any = None) -> _UniqueInverseResult:
    """Sorted unique values of ``x`` and, for each element of ``x``, the index of its value.

    ``inverse_indices`` (int32) has the shape of ``x``:
    ``values[inverse_indices]`` rebuilds ``x``. ``size``/``fill_value`` as in
    :func:`unique_values`.

    Example:
        >>> jnp.unique_inverse(jnp.array([[3, 1], [3, 2]])).inverse_indices
        Array([[2, 0],
               [2, 1]], dtype=int32)
    """
    values, _, inverse, _ = _unique_parts("unique_inverse", x, size, fill_value)
    return _UniqueInverseResult(values=values, inverse_indices=inverse)


def unique_all(x: Any, /, *, size: int | None = None,
               fill_value: Any = None) -> _UniqueAllResult:
    """Sorted unique values, the index of each one's first occurrence in the flattened ``x``,
    the inverse indices (shape of ``x``) and the counts; all indices and counts are int32.

    ``size``/``fill_value`` as in :func:`unique_values`; padded indices repeat the smallest
    value's index, padded counts are 0.

    Example:
        >>> r = jnp.unique_all(jnp.array([3, 1, 3]))
        >>> r.values, r.indices, r.counts
        (Array([1, 3], dtype=int32), Array([1, 0], dtype=int32), Array([1, 2], dtype=int32))
    """
    values, indices, inverse, counts = _unique_parts("unique_all", x, size, fill_value)
    return _UniqueAllResult(values=values, indices=indices, inverse_indices=inverse,
                            counts=counts)


__all__ = [
    "isin", "digitize", "bincount", "unique_values", "unique_counts", "unique_inverse",
    "unique_all",
]
