"""Set operations on flattened arrays: intersect1d, setdiff1d, setxor1d and union1d.

Results are sorted and hold unique values (NaNs merged into one, as in ``jnp.unique``). Their
length depends on the data, so without ``size`` these functions work only eagerly (under
``jit``/``vmap`` they raise JAX's tracer errors); with a static ``size`` the result is
truncated or padded to that length and everything traces. Padding is ``fill_value`` when
given; otherwise ``union1d`` and ``setdiff1d`` pad as ``jnp.unique`` and ``jnp.setdiff1d``
do (the smallest value, and 0), and ``intersect1d``/``setxor1d`` with the smallest result
(0 when the result is empty).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import core, dtypes, lax
from ember.numpy._util import check_arraylike, concrete_index, ensure_array, promote_dtypes
from ember.numpy.counting import isin
from ember.numpy.creation import full_like
from ember.numpy.index_functions import nonzero, take
from ember.numpy.reductions import cumsum
from ember.numpy.reductions import min as _min
from ember.numpy.reductions import sum as _sum
from ember.numpy.shape import concatenate, ravel
from ember.numpy.sorting import argsort, unique
from ember.numpy.ufuncs import isnan, where

# ---------------------------------------------------------------- helpers


def _iota(n: int) -> Any:
    return lax.iota(dtypes.int32, n)


def _flat_args(fn: str, ar1: Any, ar2: Any, promote: bool) -> tuple[Any, Any]:
    check_arraylike(fn, ar1, ar2)
    a1, a2 = ensure_array(ar1), ensure_array(ar2)
    if promote:
        a1, a2 = promote_dtypes(a1, a2)
    return ravel(a1), ravel(a2)


def _size_arg(fn: str, size: Any) -> int | None:
    if size is None:
        return None
    if isinstance(size, (bool, np.bool_)):
        raise TypeError(f"{fn}: size must be an integer, got {size!r}")
    size = concrete_index(fn, "size", size)
    if size < 0:
        raise TypeError(f"{fn}: size must be non-negative, got {size}")
    return size


def _bool_arg(fn: str, name: str, value: Any) -> bool:
    return bool(core.concrete_or_error(
        value, f"The error occurred because of argument '{name}' of jnp.{fn}()."))


def _concrete(fn: str, x: Any) -> None:
    """Without ``size`` the result's length is read from the values: they must be concrete."""
    core.concrete_or_error(
        x, f"The error arose in jnp.{fn}(): the length of the result depends on the values. "
           "To use it under jit or vmap, pass a static size= (and optionally fill_value=).")


def _weak_as(x: Any, ref: Any) -> Any:
    return lax.convert_element_type(x, ref.dtype, ref.aval.weak_type)


def _strong(x: Any) -> Any:
    return lax.convert_element_type(x, x.dtype, False)


def _unique_padded(x: Any) -> tuple[Any, Any, Any]:
    """Sorted unique values of the 1-D ``x`` (NaNs merged) in an array of ``len(x)`` entries,
    padded with the smallest value; the index of each value's first occurrence (padded with
    the smallest value's); the number of unique values. Traceable."""
    n = x.shape[0]
    if n == 0:
        return x, lax.full((0,), 0, dtypes.int32), lax.full((), 0, dtypes.int32)
    perm = lax.convert_element_type(argsort(x), dtypes.int32)
    xs = take(x, perm, mode="clip")
    new = lax.ne(xs[1:], xs[:-1])
    if dtypes.is_inexact(x.dtype):
        new = lax.bitwise_and(new, lax.bitwise_not(lax.bitwise_and(isnan(xs[1:]),
                                                                   isnan(xs[:-1]))))
    first = concatenate([lax.full((1,), True, dtypes.bool_), new])
    group = lax.sub(cumsum(first, dtype=dtypes.int32), lax.full((n,), 1, dtypes.int32))
    count = lax.add(group[n - 1], lax.full((), 1, dtypes.int32))
    dest = lax.select(first, group, lax.full((n,), n, dtypes.int32))  # repeats: dropped
    values = lax.full((n,), 0, x.dtype).at[dest].set(xs, mode="drop")
    index = lax.full((n,), 0, dtypes.int32).at[dest].set(perm, mode="drop")
    valid = lax.lt(_iota(n), lax.broadcast_in_dim(count, (n,), ()))
    values = lax.select(valid, values, lax.broadcast_in_dim(xs[0], (n,), ()))
    index = lax.select(valid, index, lax.broadcast_in_dim(perm[0], (n,), ()))
    return _weak_as(values, x), index, count


def _compact(aux: Any, keep: Any, size: int, fill_value: Any) -> tuple[Any, Any, Any]:
    """The entries of ``aux`` where ``keep``, in order, in ``size`` slots: (values, their
    positions in ``aux`` (``len(aux)`` for padding), whether each slot holds a result).

    Padding is ``fill_value`` (promoted with the values, as ``where`` does) or, by default,
    the smallest result (NaN if one is NaN), 0 when there is none. The values are strong.
    """
    n = aux.shape[0]
    count = _sum(keep, dtype=dtypes.int32)
    if keep.shape[0]:
        pos = nonzero(keep, size=size, fill_value=n)[0]
    else:
        pos = lax.full((size,), n, dtypes.int32)
    valid = lax.lt(_iota(size), lax.broadcast_in_dim(count, (size,), ()))
    if n:
        vals = _strong(take(aux, pos, mode="fill", fill_value=0))
    else:
        vals = lax.full((size,), 0, aux.dtype)
    if fill_value is not None:
        return where(valid, vals, fill_value), pos, valid
    smallest = _min(vals, where=valid, initial=vals[0])
    pad = lax.select(lax.gt(count, lax.full((), 0, dtypes.int32)), smallest,
                     lax.full((), 0, vals.dtype))
    return lax.select(valid, vals, lax.broadcast_in_dim(pad, (size,), ())), pos, valid


def _sorted_valid_first(values: Any, valid: Any) -> tuple[Any, Any, Any]:
    """``values`` sorted with the valid entries first (stable among equal values): sorted
    values, their original positions, sorted validity."""
    n = values.shape[0]
    invalid = lax.convert_element_type(lax.bitwise_not(valid), dtypes.int32)
    inv, vals, perm = lax.sort((invalid, values, _iota(n)), dimension=0, is_stable=True,
                               num_keys=2)
    return vals, perm, lax.eq(inv, lax.full((n,), 0, dtypes.int32))


def _unique_both(a1: Any, a2: Any) -> tuple[Any, Any, Any, Any]:
    """The padded unique values of ``a1`` and ``a2`` side by side, the validity of each entry,
    and the first-occurrence indices of each."""
    u1, i1, c1 = _unique_padded(a1)
    u2, i2, c2 = _unique_padded(a2)
    n1, n2 = a1.shape[0], a2.shape[0]
    valid = concatenate([lax.lt(_iota(n1), lax.broadcast_in_dim(c1, (n1,), ())),
                         lax.lt(_iota(n2), lax.broadcast_in_dim(c2, (n2,), ()))])
    return concatenate([u1, u2]), valid, i1, i2


def _all_valid(n: int) -> Any:
    return lax.full((n,), True, dtypes.bool_)


# ---------------------------------------------------------------- the set operations


def union1d(ar1: Any, ar2: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """Sorted unique values found in either array (flattened; dtypes promoted).

    Without ``size`` both arrays must be concrete. ``size`` fixes the length: missing entries
    are ``fill_value`` (default: the smallest value), extra ones are dropped.

    Example:
        >>> jnp.union1d(jnp.array([3, 1, 3]), jnp.array([[2, 1]]))
        Array([1, 2, 3], dtype=int32)
    """
    check_arraylike("union1d", ar1, ar2)
    size = _size_arg("union1d", size)
    if size is None:
        _concrete("union1d", ar1)
        _concrete("union1d", ar2)
    x = concatenate([ravel(ensure_array(ar1)), ravel(ensure_array(ar2))])
    if size is None:
        return unique(x)
    n = x.shape[0]
    if n == 0:
        if size and fill_value is None:
            raise ValueError("union1d: for zero-sized input with nonzero size argument, "
                             "fill_value must be specified")
        if not size:
            return x
        return lax.broadcast_in_dim(lax.convert_element_type(ensure_array(fill_value), x.dtype,
                                                             False), (size,), ())
    values, _, count = _unique_padded(x)
    got = take(values, np.minimum(np.arange(size), n - 1).astype(np.int32), mode="clip")
    valid = lax.lt(_iota(size), lax.broadcast_in_dim(count, (size,), ()))
    if fill_value is None:
        pad = lax.broadcast_in_dim(values[0], (size,), ())
    else:
        check_arraylike("union1d", fill_value)
        pad = lax.convert_element_type(ensure_array(fill_value), x.dtype, False)
        try:
            pad = lax.broadcast_to_shape(pad, (size,))
        except (TypeError, ValueError):
            raise ValueError(f"union1d: fill_value of shape {pad.shape} does not broadcast to "
                             f"(size,) = ({size},)") from None
        got = _strong(got)
    return lax.select(valid, got, pad)


def setdiff1d(ar1: Any, ar2: Any, assume_unique: bool = False, *, size: int | None = None,
              fill_value: Any = None) -> Any:
    """Sorted unique values of ``ar1`` that are not in ``ar2`` (flattened; ``ar1``'s dtype).

    ``assume_unique=True`` promises ``ar1`` has no repeats: its order is then kept. Without
    ``size``, ``ar1`` must be concrete. ``size`` fixes the length, padding with ``fill_value``
    (default 0, converted to ``ar1``'s dtype).

    Example:
        >>> jnp.setdiff1d(jnp.array([5, 1, 3, 1]), jnp.array([3, 4]))
        Array([1, 5], dtype=int32)
    """
    a1, a2 = _flat_args("setdiff1d", ar1, ar2, promote=False)
    assume_unique = _bool_arg("setdiff1d", "assume_unique", assume_unique)
    size = _size_arg("setdiff1d", size)
    if size is None:  # (under JAX's jit neither input is ever concrete)
        _concrete("setdiff1d", ar1)
        _concrete("setdiff1d", ar2)
    fill = full_like(a1, 0 if fill_value is None else fill_value, shape=())
    n = a1.shape[0]
    if n == 0 or size == 0:
        return full_like(a1, fill, shape=(size or 0,))
    if size is None:
        u = a1 if assume_unique else unique(a1)
        return u[isin(u, a2, invert=True)]
    if assume_unique:
        u = a1
        keep = isin(u, a2, invert=True)
    else:
        u = _unique_padded(a1)[0]
        # Entries equal to the first one past it are padding (with NaNs first, nothing is).
        n_unique = lax.sub(lax.full((), n + 1, dtypes.int32),
                           _sum(lax.eq(u, lax.broadcast_in_dim(u[0], (n,), ())),
                                dtype=dtypes.int32))
        keep = lax.bitwise_and(isin(u, a2, invert=True),
                               lax.lt(_iota(n), lax.broadcast_in_dim(n_unique, (n,), ())))
    pos = nonzero(keep, size=size, fill_value=0)[0]
    valid = lax.lt(_iota(size), lax.broadcast_in_dim(_sum(keep, dtype=dtypes.int32), (size,),
                                                     ()))
    return where(valid, take(u, pos, mode="clip"), fill)


def setxor1d(ar1: Any, ar2: Any, assume_unique: bool = False, *, size: int | None = None,
             fill_value: Any = None) -> Any:
    """Sorted unique values found in exactly one of the arrays (flattened; dtypes promoted).

    ``assume_unique=True`` promises each array has no repeats. Without ``size`` the arrays
    must be concrete. ``size`` fixes the length, padding with ``fill_value`` (default: the
    smallest result, 0 if there is none).

    Example:
        >>> jnp.setxor1d(jnp.array([1, 2, 3]), jnp.array([2, 3, 4, 4]))
        Array([1, 4], dtype=int32)
    """
    a1, a2 = _flat_args("setxor1d", ar1, ar2, promote=True)
    assume_unique = _bool_arg("setxor1d", "assume_unique", assume_unique)
    size = _size_arg("setxor1d", size)
    if size is None:
        if not assume_unique:
            _concrete("setxor1d", a1)
            _concrete("setxor1d", a2)
            a1, a2 = unique(a1), unique(a2)
        aux = concatenate([a1, a2])
        n = aux.shape[0]
        if n == 0:
            return aux
        aux = lax.sort(aux, dimension=0, is_stable=True)
        keep = _alone(aux, _all_valid(n))
        return aux[keep]
    if size == 0:
        return _strong(concatenate([a1, a2])[:0])
    if assume_unique:
        values, valid = concatenate([a1, a2]), _all_valid(a1.shape[0] + a2.shape[0])
    else:
        values, valid, _, _ = _unique_both(a1, a2)
    aux, _, valid = _sorted_valid_first(values, valid)
    return _compact(aux, _alone(aux, valid), size, fill_value)[0]


def _alone(aux: Any, valid: Any) -> Any:
    """Valid entries of the sorted ``aux`` (valid entries first) that differ from both
    neighbours (the first and last valid entries from their one neighbour)."""
    n = aux.shape[0]
    if n < 2:
        return valid
    differs = lax.ne(aux[1:], aux[:-1])
    true = lax.full((1,), True, dtypes.bool_)
    from_prev = concatenate([true, differs])
    # The last valid entry has no valid successor.
    next_valid = concatenate([valid[1:], lax.full((1,), False, dtypes.bool_)])
    from_next = lax.bitwise_or(concatenate([differs, true]), lax.bitwise_not(next_valid))
    return lax.bitwise_and(valid, lax.bitwise_and(from_prev, from_next))


def intersect1d(ar1: Any, ar2: Any, assume_unique: bool = False,
                return_indices: bool = False, *, size: int | None = None,
                fill_value: Any = None) -> Any:
    """Sorted unique values found in both arrays (flattened; dtypes promoted).

    ``assume_unique=True`` promises each array has no repeats. ``return_indices=True`` also
    returns, for each value, the index of its first occurrence in each flattened input.
    Without ``size`` the arrays must be concrete. ``size`` fixes the length, padding the values
    with ``fill_value`` (default: the smallest result, 0 if there is none) and the indices
    with ``len(ar1)`` and ``len(ar2)``.

    Example:
        >>> jnp.intersect1d(jnp.array([4, 1, 3, 1]), jnp.array([3, 1, 7]),
        ...                 return_indices=True)
        (Array([1, 3], dtype=int32), Array([1, 2], dtype=int32), Array([1, 0], dtype=int32))
    """
    a1, a2 = _flat_args("intersect1d", ar1, ar2, promote=True)
    assume_unique = _bool_arg("intersect1d", "assume_unique", assume_unique)
    return_indices = _bool_arg("intersect1d", "return_indices", return_indices)
    size = _size_arg("intersect1d", size)
    n1, n2 = a1.shape[0], a2.shape[0]
    if size is None:
        return _intersect1d_eager(a1, a2, assume_unique, return_indices)
    if size == 0:
        empty_i = lax.full((0,), 0, dtypes.int32)
        vals = _strong(concatenate([a1, a2])[:0])
        return (vals, empty_i, empty_i) if return_indices else vals
    if assume_unique:
        values, valid = concatenate([a1, a2]), _all_valid(n1 + n2)
        first1 = first2 = None
    else:
        values, valid, first1, first2 = _unique_both(a1, a2)
    aux, perm, valid = _sorted_valid_first(values, valid)
    n = aux.shape[0]
    if n >= 2:  # a value in both arrays is a pair of equal neighbours: ar1's copy first
        pair = lax.bitwise_and(lax.eq(aux[1:], aux[:-1]), valid[1:])
    else:
        pair = lax.full((0,), False, dtypes.bool_)
    vals, pos, ok = _compact(aux, pair, size, fill_value)
    if not return_indices:
        return vals
    # Indices in the default int dtype (int64 under x64, as in JAX); padding is n1 and n2.
    idt = dtypes.default_int_dtype()

    def full(value):
        return lax.full((size,), value, idt)

    if n1 == 0 or n2 == 0:  # nothing in common: all padding (and nothing to take from)
        return vals, full(n1), full(n2)
    pos, perm = lax.convert_element_type(pos, idt), lax.convert_element_type(perm, idt)
    idx1 = take(perm, pos, mode="fill", fill_value=n1)
    idx2 = lax.sub(take(perm, lax.add(pos, full(1)), mode="fill", fill_value=n1 + n2),
                   full(n1))
    idx1 = lax.select(ok, idx1, full(n1))
    idx2 = lax.select(ok, idx2, full(n2))
    if not assume_unique:
        idx1 = take(lax.convert_element_type(first1, idt), idx1, mode="fill", fill_value=n1)
        idx2 = take(lax.convert_element_type(first2, idt), idx2, mode="fill", fill_value=n2)
    return vals, idx1, idx2


def _intersect1d_eager(a1: Any, a2: Any, assume_unique: bool, return_indices: bool) -> Any:
    first1 = first2 = None
    if not assume_unique:
        _concrete("intersect1d", a1)
        _concrete("intersect1d", a2)
        if return_indices:
            (a1, first1), (a2, first2) = unique(a1, True), unique(a2, True)
        else:
            a1, a2 = unique(a1), unique(a2)
    arr = concatenate([a1, a2])
    perm = lax.convert_element_type(argsort(arr), dtypes.int32)
    aux = take(arr, perm, mode="clip")
    pair = lax.eq(aux[1:], aux[:-1])
    vals = aux[:-1][pair]
    if not return_indices:
        return vals
    idx1 = perm[:-1][pair]
    idx2 = perm[1:][pair]
    idx2 = lax.sub(idx2, lax.full(idx2.shape, a1.shape[0], dtypes.int32))
    if not assume_unique:
        idx1, idx2 = take(first1, idx1, mode="clip"), take(first2, idx2, mode="clip")
    return vals, idx1, idx2


__all__ = ["intersect1d", "setdiff1d", "setxor1d", "union1d"]
