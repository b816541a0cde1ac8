"""Sorting and searching: sort, argsort, lexsort, searchsorted, partition, unique, ...

Everything but ``unique`` is written with primitives and traces; NaNs sort to the end.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import core, dtypes, lax
from ember.numpy._util import array_arg as _arg
from ember.numpy._util import (
    canonicalize_axes,
    check_arraylike,
    concrete_index,
    ensure_array,
    promote_dtypes,
)
from ember.numpy.index_functions import take


def _sort_arg(fn: str, a: Any, axis: Any, kind: Any, order: Any) -> tuple[Any, int]:
    """The array to sort (flattened when ``axis`` is None) and the canonical axis."""
    if kind is not None:  # (JAX 0.10 refuses NumPy's algorithm names)
        raise TypeError(f"{fn}: the 'kind' argument is not supported; use stable=True or "
                        f"stable=False to specify sort stability")
    if order is not None:
        raise TypeError(f"{fn}: the 'order' argument is not supported")
    a = _arg(fn, a)
    if axis is None:
        return lax.reshape(a, (a.size,)), 0
    if a.ndim == 0:
        raise ValueError(f"{fn}: axis {axis} is out of bounds for array of dimension 0")
    (ax,) = canonicalize_axes(fn, axis, a.ndim)
    return a, ax


def sort(a: Any, axis: int | None = -1, *, kind: Any = None, order: Any = None,
         stable: bool = True, descending: bool = False) -> Any:
    """Sorted copy of ``a`` along ``axis`` (flattened when None); NaNs go last.

    Example:
        >>> jnp.sort(jnp.array([3, 1, 2]))
        Array([1, 2, 3], dtype=int32)
    """
    a, ax = _sort_arg("sort", a, axis, kind, order)
    if dtypes.is_complex(a.dtype):
        out = _sort_keyed(a, (a,), ax, stable)[0]
    else:
        out = lax.sort(a, dimension=ax, is_stable=stable)
    return lax.rev(out, (ax,)) if descending else out


def _sort_keyed(a: Any, operands: tuple, ax: int, stable: bool) -> list:
    """``operands`` sorted along ``ax`` by the keys of ``a``: itself, or its real then its
    imaginary part when complex (lexicographic, as in NumPy and JAX)."""
    keys = (lax.real(a), lax.imag(a)) if dtypes.is_complex(a.dtype) else (a,)
    out = lax.sort(keys + tuple(operands), dimension=ax, is_stable=stable,
                   num_keys=len(keys))
    return list(out[len(keys):])


def argsort(a: Any, axis: int | None = -1, *, kind: Any = None, order: Any = None,
            stable: bool = True, descending: bool = False) -> Any:
    """Indices (default int dtype) that sort ``a`` along ``axis``; ties keep their order.

    Example:
        >>> jnp.argsort(jnp.array([3, 1, 2]))
        Array([1, 2, 0], dtype=int32)
    """
    a, ax = _sort_arg("argsort", a, axis, kind, order)
    int_dt = dtypes.default_int_dtype()
    iota = lax.broadcasted_iota(int_dt, a.shape, ax)
    if descending:
        # Stable descending: sort the reversed array with reversed indices, reverse back.
        n = a.shape[ax]
        rev_iota = lax.sub(lax.full(a.shape, n - 1, int_dt), iota)
        (idx,) = _sort_keyed(lax.rev(a, (ax,)), (rev_iota,), ax, True)
        return lax.rev(idx, (ax,))
    (idx,) = _sort_keyed(a, (iota,), ax, True)
    return idx


def msort(a: Any) -> Any:
    """Sorts along the first axis.

    Example:
        >>> jnp.msort(jnp.array([[2, 1], [1, 2]]))
        Array([[1, 1], [2, 2]], dtype=int32)
    """
    return sort(a, axis=0)


def lexsort(keys: Sequence[Any], axis: int = -1) -> Any:
    """Indirect stable sort by several keys; the LAST key is the primary one (like NumPy).

    Example:
        >>> jnp.lexsort((jnp.array([1, 0]), jnp.array([0, 0])))
        Array([1, 0], dtype=int32)
    """
    if isinstance(keys, (tuple, list)):
        keys = [_arg("lexsort", k) for k in keys]
    else:
        k = _arg("lexsort", keys)
        if k.ndim == 0:
            raise TypeError("lexsort: keys must be a sequence of arrays or an array of rank>=1")
        keys = [k[i] for i in range(k.shape[0])]
    if not keys:
        raise TypeError("lexsort: need sequence of keys with len > 0")
    shape = keys[0].shape
    if any(k.shape != shape for k in keys):
        raise ValueError(f"lexsort: all keys need to be the same shape, got "
                         f"{[k.shape for k in keys]}")
    if not shape:  # one element: index 0 (as in JAX and NumPy)
        return lax.full((), 0, dtypes.default_int_dtype())
    (ax,) = canonicalize_axes("lexsort", axis, len(shape))
    iota = lax.broadcasted_iota(dtypes.default_int_dtype(), shape, ax)
    out = lax.sort(tuple(reversed(keys)) + (iota,), dimension=ax, is_stable=True,
                   num_keys=len(keys))
    return out[-1]


def _nan_aware_less(x: Any, y: Any) -> Any:
    """x < y in sort order: NaN is greater than every number and equal to itself."""
    lt = lax.lt(x, y)
    if not dtypes.is_inexact(x.dtype):
        return lt
    x_nan, y_nan = lax.ne(x, x), lax.ne(y, y)
    return lax.bitwise_or(lt, lax.bitwise_and(y_nan, lax.bitwise_not(x_nan)))


_SEARCH_METHODS = ("scan", "scan_unrolled", "sort", "compare_all")


def searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None, *,
                 method: str = "scan") -> Any:
    """Indices (int32) where ``v`` would be inserted into the sorted 1-D ``a``.

    ``method``: "compare_all" compares every ``v`` with every element of ``a`` (fast for a
    short ``a``); "scan" (the default), "scan_unrolled" and "sort" run a binary search,
    ``ceil(log2(len(a) + 1))`` steps of a gather and a compare for each ``v``.

    Example:
        >>> jnp.searchsorted(jnp.array([1, 2, 3]), 2, side="right")
        Array(2, dtype=int32)
    """
    check_arraylike("searchsorted", a, v)
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if method not in _SEARCH_METHODS:
        raise ValueError(f"searchsorted: method must be one of {_SEARCH_METHODS}, got "
                         f"{method!r}")
    a, v = ensure_array(a), ensure_array(v)
    if a.ndim != 1:
        raise ValueError(f"searchsorted: a must be 1-D, got an array of shape {a.shape}")
    if sorter is not None:
        a = take(a, sorter)
    a, v = promote_dtypes(a, v)

    def goes_after(x):  # whether v goes after the element x of a
        # left: after every x < v; right: after every x <= v, i.e. not (v < x).
        return _nan_aware_less(x, v) if side == "left" else \
            lax.bitwise_not(_nan_aware_less(v, x))

    n = a.shape[0]
    if method == "compare_all" or n == 0:
        big = tuple(v.shape) + (n,)
        ab = lax.broadcast_in_dim(a, big, (len(big) - 1,))
        vb = lax.broadcast_in_dim(v, big, tuple(range(v.ndim)))
        below = _nan_aware_less(ab, vb) if side == "left" else \
            lax.bitwise_not(_nan_aware_less(vb, ab))
        return lax.reduce_sum(lax.convert_element_type(below, dtypes.int32), (len(big) - 1,))
    # Binary search: [lo, hi) holds the answer and halves every step.
    lo = lax.full(v.shape, 0, dtypes.int32)
    hi = lax.full(v.shape, n, dtypes.int32)
    one = lax.full(v.shape, 1, dtypes.int32)
    for _ in range(n.bit_length()):
        mid = lax.shift_right_logical(lax.add(lo, hi), one)
        after = goes_after(take(a, lax.min(mid, lax.full(v.shape, n - 1, dtypes.int32)),
                                mode="clip"))
        open_ = lax.lt(lo, hi)
        lo = lax.select(lax.bitwise_and(open_, after), lax.add(mid, one), lo)
        hi = lax.select(lax.bitwise_and(open_, lax.bitwise_not(after)), mid, hi)
    return lo


def _partition_arg(fn: str, a: Any, kth: Any, axis: Any) -> tuple[Any, int, int]:
    """The array, the canonical axis and the canonical (non-negative) ``kth``."""
    a = _arg(fn, a)
    # As in JAX (whose partition is a top_k of -a): no complex numbers, no booleans.
    if dtypes.is_complex(a.dtype):
        raise NotImplementedError(f"{fn}: complex dtypes are not supported, got {a.dtype}")
    if a.dtype == dtypes.bool_:
        raise TypeError(f"{fn}: boolean input is not supported; convert it to an integer "
                        "dtype first")
    (ax,) = canonicalize_axes(fn, axis, a.ndim)
    kth = core.concrete_or_error(kth, f"{fn}: kth must be a concrete integer")
    n = a.shape[ax]
    if not -n <= int(kth) < n:
        raise ValueError(f"{fn}: kth={kth} out of bounds for axis of size {n}")
    return a, ax, int(kth) % n


def _reversed_order(a: Any) -> Any:
    """An order-reversing map of ``a``'s values: ``-a`` for floats (NaN becomes a NaN with
    the sign bit, which top_k ranks lowest), ``~a`` for integers (``-a - 1``, which unlike
    ``-a`` cannot overflow at the most negative value)."""
    return lax.neg(a) if dtypes.is_float(a.dtype) else lax.bitwise_not(a)


def _bottom_of_partition(fn: str, a: Any, kth: Any, axis: Any) -> tuple:
    """``(a, axis, kth, (values, indices))``: the arguments checked and canonical, and the
    ``kth + 1`` smallest values along the axis in ascending order with their indices (ties:
    the lower index first)."""
    a, ax, kth = _partition_arg(fn, a, kth, axis)
    values, indices = lax.top_k(_reversed_order(a), kth + 1, axis=ax)
    return a, ax, kth, (_reversed_order(values), indices)


def partition(a: Any, kth: int, axis: int = -1) -> Any:
    """Array whose ``kth`` element along ``axis`` is in sorted position, the smaller ones
    before it and the larger ones after.

    As JAX's: the first ``kth + 1`` in ascending order and the rest in descending order
    (two ``top_k``), so a caller keeping one side pays only for that side's ``top_k``.

    Example:
        >>> jnp.partition(jnp.array([5, 1, 4, 2, 3]), 1)
        Array([1, 2, 5, 4, 3], dtype=int32)
    """
    a, ax, kth, (bottom, _) = _bottom_of_partition("partition", a, kth, axis)
    n = a.shape[ax]
    if kth + 1 == n:
        return bottom
    top, _ = lax.top_k(a, n - kth - 1, axis=ax)
    return lax.concatenate([bottom, top], ax)


def argpartition(a: Any, kth: int, axis: int = -1) -> Any:
    """Indices that partition ``a`` around ``kth`` (as ``partition``'s layout: the indices
    of the ``kth + 1`` smallest in ascending order of value, then the others in ascending
    index order, as JAX's).

    Example:
        >>> jnp.argpartition(jnp.array([5, 1, 4, 2, 3]), 1)
        Array([1, 3, 0, 2, 4], dtype=int32)
    """
    a, ax, kth, (_, bottom) = _bottom_of_partition("argpartition", a, kth, axis)
    n = a.shape[ax]
    if kth + 1 == n:
        return bottom
    # The others, lowest index first: the top_k of a mask of ones set to 0 at the bottom's
    # indices (ties go to the lower index).
    last = lax.transpose(bottom, _moved_to_end(a.ndim, ax))
    rows = math.prod(last.shape[:-1])
    flat = lax.reshape(last, (rows, kth + 1))
    mask = lax.full((rows, n), 1.0, dtypes.float32)
    mask = mask.at[lax.broadcasted_iota(dtypes.int32, flat.shape, 0), flat].set(0.0)
    _, rest = lax.top_k(mask, n - kth - 1)
    rest = lax.reshape(rest, last.shape[:-1] + (n - kth - 1,))
    rest = lax.transpose(rest, tuple(np.argsort(_moved_to_end(a.ndim, ax))))
    return lax.concatenate([bottom, rest], ax)


def _moved_to_end(ndim: int, axis: int) -> tuple[int, ...]:
    return tuple(d for d in range(ndim) if d != axis) + (axis,)


def _concrete_value(fn: str, a: Any) -> np.ndarray:
    if isinstance(a, core.Tracer):
        value = a.to_concrete_value()
        if value is None:
            raise core.ConcretizationTypeError(
                a, f"{fn} has a data-dependent output shape and needs a concrete array; "
                   "under tracing pass size= (not supported) or call it outside jit")
        return np.asarray(value)
    return np.asarray(a)


def unique(ar: Any, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis: int | None = None, *,
           equal_nan: bool = True, size: int | None = None, fill_value: Any = None,
           sorted: bool = True) -> Any:
    """Sorted unique elements (or slices along ``axis``, sorted lexicographically).

    Without ``size`` the output length depends on the data, so ``ar`` must be concrete;
    ``size`` fixes it (as in JAX: missing entries are padded with ``fill_value``, by default
    the smallest value, and their counts are 0; extra unique values are dropped), which makes
    ``unique`` traceable. ``sorted`` is accepted and ignored, as in JAX.

    Example:
        >>> jnp.unique(jnp.array([3, 1, 3]))
        Array([1, 3], dtype=int32)
        >>> jnp.unique(jnp.array([3, 1, 3]), size=3)
        Array([1, 3, 1], dtype=int32)
    """
    check_arraylike("unique", ar)
    arr = ensure_array(ar)
    if size is not None:
        return _unique_of_size(arr, return_index, return_inverse, return_counts, axis,
                               equal_nan, size, fill_value)
    value = _concrete_value("unique", arr)
    if axis is not None:  # (NumPy never merges NaN slices: equal_nan is for axis=None only)
        from ember.numpy.counting import _unique_sized_axis

        (axis,) = canonicalize_axes("unique", axis, value.ndim)
        res = _unique_sized_axis(_wrap(value, arr.dtype, arr.aval.weak_type), axis, None,
                                 None, bool(equal_nan))
        out = [r for r, want in zip(res, (True, return_index, return_inverse, return_counts))
               if want]
        return out[0] if len(out) == 1 else tuple(out)
    res = np.unique(value, return_index=return_index, return_inverse=return_inverse,
                    return_counts=return_counts, axis=axis, equal_nan=equal_nan)
    if not isinstance(res, tuple):
        res = (res,)
    out = [_wrap(res[0], arr.dtype, arr.aval.weak_type)]
    out += [_wrap(r, dtypes.default_int_dtype()) for r in res[1:]]
    return out[0] if len(out) == 1 else tuple(out)


def _unique_of_size(arr, return_index, return_inverse, return_counts, axis, equal_nan, size,
                    fill_value) -> Any:
    # (counting imports this module)
    from ember.numpy.counting import _unique_sized, _unique_sized_axis

    size = concrete_index("unique", "size", size)
    if size < 0:
        raise TypeError(f"unique: size must be non-negative, got {size}")
    if axis is None:
        values, indices, inverse, counts = _unique_sized("unique", arr, size, fill_value,
                                                         bool(equal_nan))
    else:
        (axis,) = canonicalize_axes("unique", axis, arr.ndim)
        values, indices, inverse, counts = _unique_sized_axis(arr, axis, size, fill_value,
                                                              bool(equal_nan))
    out = [values] + [r for r, want in ((indices, return_index), (inverse, return_inverse),
                                        (counts, return_counts)) if want]
    return out[0] if len(out) == 1 else tuple(out)


def _wrap(value: np.ndarray, dt: np.dtype, weak_type: bool = False) -> Any:
    value = np.asarray(value).astype(dt)
    return core.concrete_array(value, core.ShapedArray(value.shape, dt, weak_type))


__all__ = [
    "sort", "argsort", "msort", "lexsort", "searchsorted", "partition", "argpartition",
    "unique",
]
