"""Index helpers and array editing: c_, r_, s_, index_exp, mgrid, ogrid, block, delete, insert,
fill_diagonal, put, put_along_axis, place, mask_indices, piecewise, vectorize, apply_along_axis,
apply_over_axes and fromfunction (the set operations live in ``setops.py``).

Everything is composed of ``ember.numpy``, ``lax`` and ``vmap``, so it traces, vmaps and
differentiates where JAX's versions do. Arguments that decide output shapes must be concrete:
slice bounds of the index objects, ``delete``'s ``obj`` (unless ``assume_unique_indices``),
the number of insertions of ``insert``, ``mask_indices``' ``n`` and ``size``. JAX arrays are
immutable, so ``fill_diagonal``, ``put``, ``put_along_axis`` and ``place`` require
``inplace=False`` and return an updated copy.
"""

from __future__ import annotations

import functools
import operator
import re
import warnings
from collections.abc import Callable, Collection, Sequence
from typing import Any

import numpy as np

from ember import _pytree, core, dtypes, lax
from ember._vmap_api import vmap
from ember.config import config
from ember.numpy._util import array_arg as _arg
from ember.numpy._util import broadcast_shapes, canonicalize_axis, check_arraylike, ensure_array
from ember.numpy._util import promote_dtypes as _promote_dtypes
from ember.numpy.creation import arange, array, asarray, linspace, meshgrid, ones
from ember.numpy.index_functions import diag_indices, nonzero, take
from ember.numpy.reductions import cumsum
from ember.numpy.reductions import sum as _sum
from ember.numpy.shape import (
    broadcast_to,
    concatenate,
    expand_dims,
    moveaxis,
    ravel,
    squeeze,
    stack,
    transpose,
)
from ember.numpy.sorting import argsort, searchsorted
from ember.numpy.ufuncs import clip, remainder, where

# ---------------------------------------------------------------- helpers


def _int32(x: Any) -> Any:
    return lax.convert_element_type(x, dtypes.int32, False)


def _like(x: Any, ref: Any) -> Any:
    """``x`` converted to the dtype and weak type of ``ref``."""
    return lax.convert_element_type(x, ref.dtype, ref.aval.weak_type)


def _static_int(fn: str, name: str, value: Any) -> int:
    value = core.concrete_or_error(
        value, f"The error occurred because of argument '{name}' of jnp.{fn}.")
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{fn}: {name} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{fn}: {name} must be an integer, got {value!r}") from None


def _check_integer_indices(fn: str, name: str, x: Any, allow_bool: bool = False) -> None:
    dt = x.dtype
    if not (dtypes.is_integer(dt) or (allow_bool and dt == dtypes.bool_)):
        kinds = "integer or boolean" if allow_bool else "integer"
        raise TypeError(f"{fn}: {name} must have an {kinds} dtype, got {dt}")


def _cycle(x: Any, n: int) -> Any:
    """The 1-D ``x`` repeated (and truncated) to length ``n``: ``x[arange(n) % len(x)]``."""
    return take(x, np.arange(n) % x.shape[0], mode="clip")


def _no_inplace(fn: str, inplace: bool) -> None:
    if inplace:
        raise ValueError(f"{fn}: ember arrays are immutable, as JAX's are, so the array cannot "
                         "be modified in place. Pass inplace=False to get an updated copy.")


# ---------------------------------------------------------------- index objects


def _grid_from_slice(s: slice, fn: str) -> Any:
    """``arange(start, stop, step)``, or ``linspace(start, stop, |step|)`` for a complex step."""
    start, stop, step = (
        core.concrete_or_error(v, f"The error occurred in the slice {part} of jnp.{fn}.")
        for v, part in ((s.start, "start"), (s.stop, "stop"), (s.step, "step")))
    # As in JAX, a missing or zero start is the integer 0 (so 0.0:2 is an integer range),
    # and a missing or zero step means 1.
    start = start if start is not None and start != 0 else 0
    step = step if step is not None and step != 0 else 1
    if np.iscomplex(step):
        return linspace(start, stop, int(abs(step)))
    return arange(start, stop, step)


def _grid_key(fn: str, key: Any) -> list[slice]:
    if not isinstance(key, tuple):
        key = (key,)
    for k in key:
        if not isinstance(k, slice):
            raise TypeError(f"{fn}: indices must be slices (start:stop:step), got "
                            f"{type(k).__name__}")
    return list(key)


class _Mgrid:
    """Dense multi-dimensional grids: ``mgrid[0:2, 0:3]`` stacks the ``meshgrid`` (``'ij'``)
    of one range per slice. A slice ``a:b:s`` gives ``arange(a, b, s)``; an imaginary step
    ``a:b:nj`` gives ``n`` points from ``a`` to ``b`` inclusive (``linspace``).

    Example:
        >>> jnp.mgrid[0:2, 0:3]
        Array([[[0, 0, 0],
                [1, 1, 1]],
        <BLANKLINE>
               [[0, 1, 2],
                [0, 1, 2]]], dtype=int32)
    """

    def __getitem__(self, key: slice | tuple[slice, ...]) -> Any:
        if isinstance(key, slice):
            return _grid_from_slice(key, "mgrid")
        grids = [_grid_from_slice(k, "mgrid") for k in _grid_key("mgrid", key)]
        if not grids:
            return arange(0)
        return stack(meshgrid(*_promote_dtypes(*grids), indexing="ij"), 0)


class _Ogrid:
    """Open (sparse) multi-dimensional grids: like :data:`mgrid`, but a list of arrays that
    broadcast against each other instead of one dense array.

    Example:
        >>> [g.shape for g in jnp.ogrid[0:2, 0:1:3j]]
        [(2, 1), (1, 3)]
    """

    def __getitem__(self, key: slice | tuple[slice, ...]) -> Any:
        if isinstance(key, slice):
            return _grid_from_slice(key, "ogrid")
        grids = [_grid_from_slice(k, "ogrid") for k in _grid_key("ogrid", key)]
        if not grids:
            return []
        return meshgrid(*_promote_dtypes(*grids), indexing="ij", sparse=True)


def _parse_directive(fn: str, directive: str, axis: int, ndmin: int,
                     trans1d: int) -> tuple[int, int, int, int]:
    """``'axis,ndmin,trans1d'`` (missing parts keep the defaults), or 'r' / 'c'; the last
    value is the axis a 1-D result is expanded at (-1: not expanded)."""
    if directive == "r":
        return axis, ndmin, trans1d, 0
    if directive == "c":
        return axis, ndmin, trans1d, 1
    parts = directive.split(",")[:3]
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"{fn}: could not understand directive {directive!r}") from None
    values += [axis, ndmin, trans1d][len(values):]
    return values[0], values[1], values[2], -1


class _AxisConcatenator:
    """Concatenates slices (as ranges), scalars and arrays along an axis (``r_``, ``c_``)."""

    _fn = ""
    _axis = 0
    _ndmin = 1
    _trans1d = -1

    def __getitem__(self, key: Any) -> Any:
        fn = self._fn
        items = key if isinstance(key, tuple) else (key,)
        if not items:
            raise ValueError(f"{fn}: nothing to concatenate")
        axis, ndmin, trans1d, matrix = self._axis, self._ndmin, self._trans1d, -1
        if isinstance(items[0], str):
            axis, ndmin, trans1d, matrix = _parse_directive(fn, items[0], axis, ndmin, trans1d)
            items = items[1:]
        pieces = []
        for item in items:
            if isinstance(item, slice):
                piece, item_ndim = _grid_from_slice(item, fn), 0
            elif isinstance(item, str):
                raise ValueError(f"{fn}: a string directive must be placed at the beginning, "
                                 f"got {item!r} later")
            else:
                piece = array(item, copy=False)
                item_ndim = piece.ndim
            piece = array(piece, copy=False, ndmin=ndmin)
            if trans1d != -1 and ndmin > item_ndim:
                # The upgraded array's own dims (at the end after ndmin) move so that its last
                # one lands at trans1d: a rotation of the dims.
                shift = ndmin - abs(ndmin + trans1d + 1) % ndmin
                order = list(range(ndmin))
                piece = transpose(piece, order[shift:] + order[:shift])
            pieces.append(piece)
        out = concatenate(pieces, axis=axis)
        if matrix != -1 and out.ndim == 1:
            out = expand_dims(out, matrix)
        return out

    def __len__(self) -> int:
        return 0


class RClass(_AxisConcatenator):
    """Concatenates slices, scalars and arrays along the first axis (``jnp.r_[...]``).

    A slice ``a:b:s`` stands for ``arange(a, b, s)`` and ``a:b:nj`` for ``linspace(a, b, n)``.
    A leading string directive ``'axis,ndmin,trans1d'`` sets the concatenation axis, the
    minimum number of dimensions of every piece, and where a piece's own dimensions go when it
    is upgraded; ``'r'`` / ``'c'`` turn a 1-D result into a row / a column.

    Example:
        >>> jnp.r_[0:3, 7, jnp.array([8, 9])]
        Array([0, 1, 2, 7, 8, 9], dtype=int32)
        >>> jnp.r_['0,2', [1, 2], [3, 4]]
        Array([[1, 2],
               [3, 4]], dtype=int32)
    """

    _fn, _axis, _ndmin, _trans1d = "r_", 0, 1, -1


class CClass(_AxisConcatenator):
    """Concatenates slices, scalars and arrays along the last axis, 1-D pieces becoming columns
    (``jnp.c_[...]``; directives as for :data:`r_`).

    Example:
        >>> jnp.c_[jnp.array([1, 2]), jnp.array([3, 4])]
        Array([[1, 3],
               [2, 4]], dtype=int32)
    """

    _fn, _axis, _ndmin, _trans1d = "c_", -1, 2, 0


mgrid = _Mgrid()
ogrid = _Ogrid()
r_ = RClass()
c_ = CClass()
s_ = np.s_  # plain index expressions (tuples of slices), as NumPy's and JAX's
index_exp = np.index_exp


# ---------------------------------------------------------------- block


def _block(fn: str, x: Any) -> tuple[Any, int]:
    """The assembled array of one nesting level and its depth (1 for a leaf)."""
    if isinstance(x, tuple):
        raise ValueError(f"{fn}: tuples are not allowed, use lists; got {x!r}")
    if not isinstance(x, list):
        return asarray(x), 1
    if not x:
        raise ValueError(f"{fn}: empty lists are not allowed")
    parts = [_block(fn, e) for e in x]
    depth = parts[0][1]
    if any(d != depth for _, d in parts):
        raise ValueError(f"{fn}: mismatched list depths")
    rank = max(depth, max(p.ndim for p, _ in parts))
    arrays = [lax.reshape(p, (1,) * (rank - p.ndim) + p.shape) for p, _ in parts]
    return concatenate(arrays, axis=-depth), depth + 1


def block(arrays: Any) -> Any:
    """Assembles an array from nested lists of blocks: the innermost lists are concatenated
    along the last axis, the next level along the second-to-last, and so on (blocks are
    given leading 1-dimensions to the common rank first).

    Example:
        >>> jnp.block([[jnp.ones((2, 2)), jnp.zeros((2, 1))], [jnp.full((1, 3), 2.0)]])
        Array([[1., 1., 0.],
               [1., 1., 0.],
               [2., 2., 2.]], dtype=float32)
    """
    return _block("block", arrays)[0]


# ---------------------------------------------------------------- delete / insert


def _delete_unique(a: Any, obj: Any, axis: int) -> Any:
    """delete with integer indices promised unique: traceable (the output length is static)."""
    n = a.shape[axis]
    idx = _int32(ravel(obj))
    m = idx.shape[0]
    idx = clip(where(idx < 0, idx + n, idx), 0, n)
    # The j-th kept element is j plus the number of deleted positions at or before it; with
    # sorted deletions, the k-th lies at s[k] - k among the kept ones.
    shifted = lax.sub(lax.sort(idx, dimension=0), lax.iota(dtypes.int32, m))
    kept = arange(max(n - m, 0), dtype=dtypes.int32)
    before = lax.le(lax.broadcast_in_dim(shifted, (m, kept.shape[0]), (0,)),
                    lax.broadcast_in_dim(kept, (m, kept.shape[0]), (1,)))
    src = lax.add(kept, _sum(before, axis=0, dtype=dtypes.int32))
    return take(a, src, axis=axis, mode="clip")


def delete(arr: Any, obj: Any, axis: int | None = None, *,
           assume_unique_indices: bool = False) -> Any:
    """``arr`` without the entries ``obj`` along ``axis`` (the flattened array when None).

    ``obj`` is an integer, a slice, an integer array (repeats allowed) or a boolean mask of the
    axis' length. An integer array must be concrete, unless ``assume_unique_indices=True``
    promises it holds no repeats: then it may be traced (out-of-range entries are clipped).

    Example:
        >>> jnp.delete(jnp.arange(6), jnp.array([0, 2]))
        Array([1, 3, 4, 5], dtype=int32)
    """
    a = _arg("delete", arr)
    if axis is None:
        a, axis = ravel(a), 0
    axis = canonicalize_axis("delete", axis, a.ndim)
    n = a.shape[axis]
    if not isinstance(obj, slice):
        try:
            i = operator.index(obj)
        except TypeError:
            pass
        else:
            if not -n <= i < n:
                raise np.exceptions.AxisError(
                    f"delete: index {i} is out of bounds for axis {axis} with size {n}")
            i %= n
            return concatenate([lax.slice_in_dim(a, 0, i, axis=axis),
                                lax.slice_in_dim(a, i + 1, n, axis=axis)], axis=axis)
    if isinstance(obj, slice):
        return take(a, np.delete(np.arange(n), obj).astype(np.int32), axis=axis, mode="clip")
    check_arraylike("delete", a, obj)
    obj = ensure_array(obj)
    if dtypes.is_integer(obj.dtype) and assume_unique_indices:
        return _delete_unique(a, obj, axis)
    value = np.asarray(core.concrete_or_error(
        obj, "The error occurred because of argument 'obj' of jnp.delete(); pass "
             "assume_unique_indices=True to delete traced unique indices."))
    if dtypes.is_integer(value.dtype):
        keep = np.ones(n, dtype=bool)
        try:
            keep[value.ravel()] = False
        except IndexError as e:
            raise IndexError(f"delete: {e}") from None
    elif value.dtype == np.bool_:
        if value.shape != (n,):
            raise ValueError(f"delete: a boolean obj must be 1-D with the length {n} of axis "
                             f"{axis}, got shape {value.shape}")
        keep = ~value
    else:
        raise ValueError(f"delete: obj must have an integer or boolean dtype, got {value.dtype}")
    return take(a, np.nonzero(keep)[0].astype(np.int32), axis=axis, mode="clip")


def insert(arr: Any, obj: Any, values: Any, axis: int | None = None) -> Any:
    """``arr`` with ``values`` inserted before the indices ``obj`` along ``axis`` (the
    flattened array when None).

    ``obj`` is an integer, a slice or a 1-D integer array (may be traced); negative indices
    count from the end and out-of-range ones are clipped to ``[0, len]`` (as in JAX; NumPy
    raises). ``values`` is converted to ``arr``'s dtype and broadcast to the inserted
    slices; with a scalar ``obj``, the first axis of ``values`` runs along ``axis``.

    Example:
        >>> jnp.insert(jnp.arange(4), jnp.array([1, 3]), jnp.array([10, 30]))
        Array([ 0, 10,  1,  2, 30,  3], dtype=int32)
    """
    check_arraylike("insert", arr, 0 if isinstance(obj, slice) else obj, values)
    a = ensure_array(arr)
    if axis is None:
        a, axis = ravel(a), 0
    axis = core.concrete_or_error(axis, "The error occurred because of argument 'axis' of "
                                        "jnp.insert().")
    axis = canonicalize_axis("insert", axis, a.ndim)
    n = a.shape[axis]
    if isinstance(obj, slice):
        indices = asarray(np.arange(*obj.indices(n)).astype(np.int32))
    else:
        indices = ensure_array(obj)
    if indices.ndim > 1:
        raise ValueError(f"insert: obj must be a slice, a 1-D array or a scalar, got an array "
                         f"of shape {indices.shape}")
    if not dtypes.is_integer(indices.dtype):
        if indices.size == 0 and not hasattr(obj, "aval"):  # NumPy's empty float arrays
            indices = lax.full((0,), 0, dtypes.int32)
        else:
            raise ValueError(f"insert: obj must have an integer dtype, got {indices.dtype}")
    v = lax.convert_element_type(ensure_array(values), a.dtype, a.aval.weak_type)
    if v.ndim < a.ndim:
        v = lax.reshape(v, (1,) * (a.ndim - v.ndim) + v.shape)
    if indices.size == 1:
        if indices.ndim == 0:  # one index: values' first axis runs along the inserted axis
            v = moveaxis(v, 0, axis)
        indices = lax.broadcast_in_dim(lax.reshape(indices, ()), (v.shape[axis],), ())
    n_insert = broadcast_shapes(indices.shape, (v.shape[axis],))[0]
    target = a.shape[:axis] + (n_insert,) + a.shape[axis + 1:]
    try:
        if np.broadcast_shapes(v.shape, target) != target:
            raise ValueError
    except ValueError:
        raise ValueError(f"insert: values of shape {v.shape} cannot be broadcast to the "
                         f"inserted shape {target}") from None
    v = broadcast_to(v, target)
    idx = broadcast_to(_int32(indices), (n_insert,))
    idx = clip(where(idx < 0, idx + n, idx), 0, n)
    # Inserted slice k goes to idx[k] plus its rank among the insertions (stable: ties keep
    # their order); original slice j to j plus the number of insertions at or before it.
    order = argsort(idx)
    sorted_idx = take(idx, order)
    dest_values = lax.full((n_insert,), 0, dtypes.int32).at[order].set(
        lax.add(sorted_idx, lax.iota(dtypes.int32, n_insert)), unique_indices=True)
    positions = lax.iota(dtypes.int32, n)
    dest_arr = lax.add(positions, searchsorted(sorted_idx, positions, side="right"))
    source = argsort(concatenate([dest_arr, dest_values]))  # the inverse permutation
    return take(concatenate([a, v], axis=axis), source, axis=axis, mode="clip")


# ---------------------------------------------------------------- updates


def fill_diagonal(a: Any, val: Any, wrap: bool = False, *, inplace: bool = True) -> Any:
    """A copy of ``a`` (at least 2-D, all dimensions equal beyond 2-D) whose main diagonal is
    ``val``: a scalar, or values repeated to the diagonal's length. Requires ``inplace=False``
    (``wrap=True`` is not supported, as in JAX).

    Example:
        >>> jnp.fill_diagonal(jnp.zeros((2, 3), jnp.int32), 7, inplace=False)
        Array([[7, 0, 0],
               [0, 7, 0]], dtype=int32)
    """
    if inplace:
        raise NotImplementedError("fill_diagonal: ember arrays are immutable, as JAX's are; "
                                  "pass inplace=False to get an updated copy")
    if wrap:
        raise NotImplementedError("fill_diagonal: wrap=True is not implemented, pass "
                                  "wrap=False")
    check_arraylike("fill_diagonal", a, val)
    a, val = ensure_array(a), ensure_array(val)
    if a.ndim < 2:
        raise ValueError(f"fill_diagonal: array must be at least 2-d, got shape {a.shape}")
    if a.ndim > 2 and any(d != a.shape[0] for d in a.shape[1:]):
        raise ValueError(f"fill_diagonal: all dimensions of the array must be of equal length "
                         f"when it has more than 2, got shape {a.shape}")
    n = min(a.shape)
    if val.ndim:
        val = ravel(val)
        if val.shape[0] == 0:
            raise ValueError("fill_diagonal: val must not be empty")
        val = _cycle(val, n)
    return a.at[diag_indices(n, a.ndim)].set(val)


_PUT_MODES = (None, "clip", "wrap", "raise")


def put(a: Any, ind: Any, v: Any, mode: str | None = None, *, inplace: bool = True) -> Any:
    """A copy of ``a`` with ``a.flat[ind] = v`` (``v`` repeated to the number of indices).
    Requires ``inplace=False``.

    ``mode``: None (negative indices count from the end, out-of-range ones are clamped),
    ``'clip'`` (clamped to ``[0, size - 1]``, negatives included) or ``'wrap'`` (modulo the
    size); ``'raise'`` is not supported. With repeated indices one write wins.

    Example:
        >>> jnp.put(jnp.zeros(5, jnp.int32), jnp.array([0, -1]), jnp.array([7, 8]),
        ...         inplace=False)
        Array([7, 0, 0, 0, 8], dtype=int32)
    """
    _no_inplace("put", inplace)
    check_arraylike("put", a, ind, v)
    if mode == "raise":
        raise NotImplementedError("put: the 'raise' mode is not supported (indices are not "
                                  "checked at run time); use None, 'clip' or 'wrap'")
    if mode not in _PUT_MODES:
        raise ValueError(f"put: mode should be one of None, 'clip' or 'wrap'; got {mode!r}")
    arr, ind, v = ensure_array(a), ensure_array(ind), ensure_array(v)
    _check_integer_indices("put", "ind", ind, allow_bool=True)
    ind, v = _int32(ravel(ind)), ravel(v)
    size = arr.size
    if size == 0 or ind.shape[0] == 0 or v.shape[0] == 0:
        return arr
    v = _cycle(v, ind.shape[0])
    if mode is None:
        ind = clip(where(ind < 0, ind + size, ind), 0, size - 1)
    elif mode == "clip":
        ind = clip(ind, 0, size - 1)
    else:
        ind = remainder(ind, size)
    flat = lax.reshape(arr, (size,)).at[ind].set(v, mode="promise_in_bounds")
    return lax.reshape(flat, arr.shape)


_SCATTER_MODES = (None, "clip", "fill", "drop", "promise_in_bounds")


def put_along_axis(arr: Any, indices: Any, values: Any, axis: int | None,
                   inplace: bool = True, *, mode: str | None = None) -> Any:
    """A copy of ``arr`` with ``values`` written at ``indices`` along ``axis`` (the
    counterpart of :func:`take_along_axis`; the flattened array when ``axis`` is None).
    Requires ``inplace=False``.

    ``indices`` has ``arr``'s number of dimensions and broadcasts against it outside
    ``axis``; ``values`` broadcasts to ``indices``. Negative indices count from the end;
    out-of-range ones are dropped (``mode`` None, 'fill' or 'drop') or clamped ('clip').

    Example:
        >>> jnp.put_along_axis(jnp.zeros((2, 3), jnp.int32), jnp.array([[2], [0]]), 5, axis=1,
        ...                    inplace=False)
        Array([[0, 0, 5],
               [5, 0, 0]], dtype=int32)
    """
    _no_inplace("put_along_axis", inplace)
    check_arraylike("put_along_axis", arr, indices, values)
    if mode not in _SCATTER_MODES:
        raise ValueError(f"put_along_axis: unknown mode {mode!r}; expected None, 'clip', "
                         "'fill', 'drop' or 'promise_in_bounds'")
    a, idx, v = ensure_array(arr), ensure_array(indices), ensure_array(values)
    _check_integer_indices("put_along_axis", "indices", idx)
    shape = a.shape
    if axis is None:
        a, axis = ravel(a), 0
    if a.ndim != idx.ndim:
        raise ValueError(f"put_along_axis: arguments 'arr' and 'indices' must have the same "
                         f"number of dimensions, got arr.ndim={a.ndim} and "
                         f"indices.ndim={idx.ndim}")
    axis = canonicalize_axis("put_along_axis", axis, a.ndim)
    try:
        if np.broadcast_shapes(v.shape, idx.shape) != idx.shape:
            raise ValueError
    except ValueError:
        raise ValueError(f"put_along_axis: 'values' of shape {v.shape} must be broadcastable "
                         f"to 'indices' of shape {idx.shape}") from None
    try:
        np.broadcast_shapes(tuple(1 if d == axis else s for d, s in enumerate(a.shape)),
                            tuple(1 if d == axis else s for d, s in enumerate(idx.shape)))
    except ValueError:
        raise ValueError(f"put_along_axis: 'indices' of shape {idx.shape} do not broadcast "
                         f"against 'arr' of shape {a.shape} outside axis {axis}") from None
    coords = []
    for d, s in enumerate(a.shape):
        if d == axis:
            coords.append(idx)
        else:
            coords.append(np.arange(s, dtype=np.int32).reshape(
                tuple(s if e == d else 1 for e in range(a.ndim))))
    out = a.at[tuple(coords)].set(broadcast_to(v, idx.shape), mode=mode)
    return lax.reshape(out, shape)


def place(arr: Any, mask: Any, vals: Any, *, inplace: bool = True) -> Any:
    """A copy of ``arr`` whose elements where ``mask`` is true take the successive values of
    ``vals`` (repeated as needed). ``mask`` has ``arr``'s size. Requires ``inplace=False``.

    Example:
        >>> x = jnp.arange(5)
        >>> jnp.place(x, x % 2 == 0, jnp.array([10, 20]), inplace=False)
        Array([10,  1, 20,  3, 10], dtype=int32)
    """
    check_arraylike("place", arr, mask, vals)
    _no_inplace("place", inplace)
    data, m, v = ensure_array(arr), ensure_array(mask), ravel(ensure_array(vals))
    if data.size != m.size:
        raise ValueError(f"place: arr and mask must be the same size, got {data.size} and "
                         f"{m.size}")
    if v.shape[0] == 0:
        raise ValueError("place: cannot place values from an empty array")
    if data.size == 0:
        return data
    flat_mask = lax.ne(ravel(m), lax.full((), 0, m.dtype)) if m.dtype != dtypes.bool_ \
        else ravel(m)
    # The k-th selected element (in order) takes vals[k % len(vals)].
    rank = lax.sub(cumsum(flat_mask, dtype=dtypes.int32), lax.full((m.size,), 1, dtypes.int32))
    picked = _like(take(v, remainder(rank, v.shape[0]), mode="clip"), data)
    return lax.reshape(lax.select(flat_mask, picked, ravel(data)), data.shape)


def mask_indices(n: int, mask_func: Callable[[Any, int], Any], k: int = 0, *,
                 size: int | None = None) -> tuple[Any, Any]:
    """Row and column indices of the nonzero entries of ``mask_func(ones((n, n)), k)``, e.g.
    ``mask_func=jnp.triu`` for the upper triangle. The count depends on the mask: under
    tracing pass ``size`` (padded with 0s or truncated, as in :func:`nonzero`).

    Example:
        >>> jnp.mask_indices(3, jnp.triu, 1)
        (Array([0, 0, 1], dtype=int32), Array([1, 2, 2], dtype=int32))
    """
    n = _static_int("mask_indices", "n", n)
    if n < 0:
        raise ValueError(f"mask_indices: n must be non-negative, got {n}")
    if not callable(mask_func):
        raise TypeError(f"mask_indices: mask_func must be callable, got {mask_func!r}")
    i, j = nonzero(mask_func(ones((n, n)), k), size=size)
    return i, j


# ---------------------------------------------------------------- vectorize

_DIM = r"\w+"
_CORE_DIMS = rf"(?:{_DIM}(?:,{_DIM})*)?"
_ARG = rf"\({_CORE_DIMS}\)"
_ARG_LIST = rf"{_ARG}(?:,{_ARG})*"
_SIGNATURE = re.compile(rf"^{_ARG_LIST}->{_ARG_LIST}$")


def _parse_signature(signature: str) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """``'(n,m),(m)->(n)'`` -> ``([('n', 'm'), ('m',)], [('n',)])``."""
    if not isinstance(signature, str) or not _SIGNATURE.match(signature):
        raise ValueError(f"vectorize: not a valid gufunc signature: {signature}")
    ins, outs = signature.split("->")
    return ([tuple(re.findall(_DIM, a)) for a in re.findall(_ARG, ins)],
            [tuple(re.findall(_DIM, a)) for a in re.findall(_ARG, outs)])


def _record_core_sizes(sizes: dict[str, int], shape: tuple[int, ...], dims: tuple[str, ...],
                       context: str, is_input: bool) -> None:
    if is_input and len(shape) < len(dims):
        raise ValueError(f"vectorize: input with shape {shape} does not have enough "
                         f"dimensions for all core dimensions {dims} {context}")
    if not is_input and len(shape) != len(dims):
        raise ValueError(f"vectorize: output shape {shape} does not match core dimensions "
                         f"{dims} {context}")
    for name, size in zip(dims, shape[len(shape) - len(dims):]):
        if sizes.setdefault(name, size) != size:
            raise ValueError(f"vectorize: inconsistent size for core dimension {name!r}: "
                             f"{size} vs {sizes[name]} {context}")


def _checking_outputs(func: Callable, sizes: dict[str, int], out_dims: list[tuple[str, ...]],
                      context: str) -> Callable:
    """``func`` checking that its outputs have the signature's core dimensions."""
    def checked(*args):
        out = func(*args)
        if len(out_dims) > 1 and not isinstance(out, tuple):
            raise TypeError(f"vectorize: output must be a tuple when multiple outputs are "
                            f"expected, got {type(out).__name__} {context}")
        outs = out if isinstance(out, tuple) else (out,)
        if len(outs) != len(out_dims):
            raise TypeError(f"vectorize: wrong number of output arguments: expected "
                            f"{len(out_dims)}, got {len(outs)} {context}")
        local = dict(sizes)
        for o, dims in zip(outs, out_dims):
            shape = tuple(o.shape) if hasattr(o, "shape") else np.shape(o)
            _record_core_sizes(local, shape, dims, context, is_input=False)
        return out
    return checked


def _bind_static(func: Callable, positions: Collection[int], names: Collection[str],
                 args: Sequence[Any], kwargs: dict[str, Any]
                 ) -> tuple[Callable, list[Any], dict[str, Any]]:
    """``func`` of the remaining arguments, with the excluded ones bound."""
    static_pos = [(i, args[i]) for i in sorted(positions) if i < len(args)]
    static_kw = {k: val for k, val in kwargs.items() if k in names}
    rest = [x for i, x in enumerate(args) if i not in positions]
    rest_kw = {k: val for k, val in kwargs.items() if k not in names}
    if not static_pos and not static_kw:
        return func, rest, rest_kw

    def bound(*dynamic, **dynamic_kw):
        full = list(dynamic)
        for i, x in static_pos:
            full.insert(i, x)
        return func(*full, **dynamic_kw, **static_kw)
    return bound, rest, rest_kw


def _check_rank_promotion(args: list[Any], in_dims: list[tuple[str, ...]],
                          signature: str | None) -> None:
    level = config.jax_numpy_rank_promotion
    if level == "allow":
        return
    ranks = {x.ndim - len(d) for x, d in zip(args, in_dims) if x.ndim}
    if len(ranks) > 1:
        msg = (f"vectorize: operands with shapes {[x.shape for x in args]} require rank "
               f"promotion for jnp.vectorize function with signature {signature}. Set the "
               "jax_numpy_rank_promotion config option to 'allow' to disable this message.")
        if level == "raise":
            raise ValueError(msg)
        warnings.warn(msg, stacklevel=4)


def vectorize(pyfunc: Callable, *, excluded: Collection[int | str] = frozenset(),
              signature: str | None = None) -> Callable:
    """Vectorizes ``pyfunc`` like a NumPy ufunc, with :func:`ember.vmap`.

    Without ``signature`` the function sees scalars (0-D arrays) and the arguments broadcast
    against each other. A gufunc ``signature`` such as ``'(n),(n)->()'`` gives each argument
    core dimensions that the function sees whole; the leading dimensions broadcast.
    ``excluded`` lists positions or keyword names passed through unvectorized (keyword
    arguments that are not excluded are rejected). ``None`` arguments are passed through
    as they are.

    Example:
        >>> dot = jnp.vectorize(lambda a, b: jnp.sum(a * b), signature="(n),(n)->()")
        >>> dot(jnp.ones((2, 3)), jnp.arange(3.0))
        Array([3., 3.], dtype=float32)
    """
    if not callable(pyfunc):
        raise TypeError(f"vectorize: pyfunc must be callable, got {pyfunc!r}")
    if any(isinstance(e, bool) or not isinstance(e, (str, int)) for e in excluded):
        raise TypeError(f"vectorize: can only exclude integer or string arguments, but "
                        f"excluded={excluded!r}")
    if any(isinstance(e, int) and e < 0 for e in excluded):
        raise ValueError(f"vectorize: excluded={excluded!r} contains negative numbers")
    positions = frozenset(e for e in excluded if isinstance(e, int))
    names = frozenset(e for e in excluded if isinstance(e, str))

    @functools.wraps(pyfunc)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        context = (f"on vectorized function with excluded={excluded!r} and "
                   f"signature={signature!r}")
        func, args, kwargs = _bind_static(pyfunc, positions, names, args, kwargs)
        if kwargs:
            raise TypeError(f"vectorize: keyword arguments are not vectorized; list "
                            f"{sorted(kwargs)} in excluded= or pass them by position "
                            f"{context}")
        if signature is None:
            in_dims, out_dims = [()] * len(args), None
        else:
            in_dims, out_dims = _parse_signature(signature)
        nones = frozenset(i for i, x in enumerate(args) if x is None)
        if nones:
            if any(i < len(in_dims) and in_dims[i] for i in nones):
                raise ValueError(f"vectorize: cannot pass None at locations {set(nones)} with "
                                 f"signature={signature!r}")
            func, args, _ = _bind_static(func, nones, (), args, {})
            in_dims = [d for i, d in enumerate(in_dims) if i not in nones]
        args = [asarray(x) for x in args]
        if len(args) != len(in_dims):
            raise TypeError(f"vectorize: wrong number of positional arguments: expected "
                            f"{len(in_dims)}, got {len(args)} {context}")
        if not args:
            raise TypeError(f"vectorize: the vectorized function needs at least one array "
                            f"argument {context}")
        sizes: dict[str, int] = {}
        loop_shapes = []
        for x, dims in zip(args, in_dims):
            _record_core_sizes(sizes, x.shape, dims, context, is_input=True)
            loop_shapes.append(x.shape[:x.ndim - len(dims)])
        bshape = broadcast_shapes(*loop_shapes)
        _check_rank_promotion(args, in_dims, signature)
        f = func if out_dims is None else _checking_outputs(func, sizes, out_dims, context)
        # One vmap per broadcast dimension, innermost last; size-1 dims are squeezed away
        # and the arguments without the dimension are not mapped along it.
        padded = [(1,) * (len(bshape) - len(s)) + s for s in loop_shapes]
        squeezed = [squeeze(x, axis=tuple(i for i, d in enumerate(s) if d == 1))
                    for x, s in zip(args, loop_shapes)]
        unmapped = []
        for dim in reversed(range(len(bshape))):
            in_axes = tuple(None if p[dim] == 1 else 0 for p in padded)
            if all(ax is None for ax in in_axes):
                unmapped.append(dim)
            else:
                f = vmap(f, in_axes=in_axes)
        out = f(*squeezed)
        if not unmapped:
            return out
        return _pytree.tree_map(lambda r: expand_dims(r, sorted(unmapped)), out)

    return wrapped


# ---------------------------------------------------------------- piecewise


def piecewise(x: Any, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any) -> Any:
    """Evaluates piecewise: where ``condlist[i]`` holds (the last true condition wins), the
    result is ``funclist[i](x, *args, **kw)``, or ``funclist[i]`` itself when it is a
    constant. An extra last entry of ``funclist`` gives the value where no condition holds
    (0 otherwise). The functions see scalars (they are vectorized over ``x``); the result has
    ``x``'s dtype.

    Example:
        >>> x = jnp.array([-2.0, -1.0, 0.5, 3.0])
        >>> jnp.piecewise(x, [x < 0, x > 2], [lambda v: -v, 9.0, lambda v: 2 * v])
        Array([2., 1., 1., 9.], dtype=float32)
    """
    x = _arg("piecewise", x)
    nc, nf = len(condlist), len(funclist)
    if nf == nc + 1:
        funcs = [funclist[-1], *funclist[:-1]]
    elif nf == nc:
        funcs = [0, *funclist]
    else:
        raise ValueError(f"piecewise: with {nc} condition(s), either {nc} or {nc + 1} "
                         f"functions are expected; got {nf}")
    if nc == 0:
        raise ValueError("piecewise: condlist must hold at least one condition")
    conds = asarray(condlist, dtype=dtypes.bool_)
    which = lax.full(conds.shape[1:], 0, dtypes.int32)
    for i in range(nc):
        which = lax.select(conds[i], lax.full(which.shape, i + 1, dtypes.int32), which)
    shape = broadcast_shapes(which.shape, x.shape)
    dt = x.dtype

    def branch(f):
        if callable(f):
            return lambda v: lax.convert_element_type(asarray(f(v, *args, **kw)), dt, False)
        return lambda v: lax.convert_element_type(asarray(f), dt, False)

    xb = broadcast_to(x, shape)
    outs = [vectorize(branch(f))(xb) for f in funcs]
    if any(o.shape != outs[0].shape for o in outs):
        raise TypeError(f"piecewise: the functions must return values of equal shapes, got "
                        f"{[o.shape[len(shape):] for o in outs]}")
    which = lax.broadcast_in_dim(broadcast_to(which, shape), outs[0].shape,
                                 tuple(range(len(shape))))
    return lax.select_n(which, *outs)


# ---------------------------------------------------------------- apply / fromfunction


def apply_along_axis(func1d: Callable, axis: int, arr: Any, *args: Any, **kwargs: Any) -> Any:
    """Applies ``func1d(v, *args, **kwargs)`` to every 1-D slice ``v`` of ``arr`` along
    ``axis`` (with :func:`ember.vmap`); the dimensions of its result replace ``axis``.

    Example:
        >>> jnp.apply_along_axis(jnp.sum, 1, jnp.arange(6).reshape(2, 3))
        Array([ 3, 12], dtype=int32)
    """
    a = _arg("apply_along_axis", arr)
    axis = canonicalize_axis("apply_along_axis", axis, a.ndim)

    def f(v):
        return func1d(v, *args, **kwargs)
    # The dims after ``axis`` are mapped innermost (their results go last), then the dims
    # before it (their results go first).
    for pos in range(1, a.ndim - axis):
        f = vmap(f, in_axes=pos, out_axes=-1)
    for _ in range(axis):
        f = vmap(f, in_axes=0, out_axes=0)
    return f(a)


def apply_over_axes(func: Callable[[Any, int], Any], a: Any, axes: Sequence[int]) -> Any:
    """Applies ``func(a, axis)`` for each axis in turn; a result with one dimension less
    gets it back (as size 1), so reductions keep the rank.

    Example:
        >>> jnp.apply_over_axes(jnp.sum, jnp.arange(6).reshape(2, 3), [0, 1])
        Array([[15]], dtype=int32)
    """
    a = _arg("apply_over_axes", a)
    try:
        axes = list(axes)
    except TypeError:
        raise TypeError(f"apply_over_axes: axes must be a sequence of integers, got "
                        f"{axes!r}") from None
    for axis in axes:
        b = asarray(func(a, axis))
        if b.ndim == a.ndim:
            a = b
        elif b.ndim == a.ndim - 1:
            a = expand_dims(b, axis)
        else:
            raise ValueError(f"apply_over_axes: func returned an array of shape {b.shape} for "
                             f"an array of shape {a.shape}; it must keep the rank or remove "
                             "one dimension")
    return a


def _shape_arg(fn: str, shape: Any) -> tuple[int, ...]:
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    out = []
    for s in shape:
        s = core.concrete_or_error(s, f"The error occurred because of argument 'shape' of "
                                      f"jnp.{fn}.")
        if isinstance(s, (bool, np.bool_)):
            raise TypeError(f"{fn}: shape must be a sequence of integers, got {shape!r}")
        try:
            out.append(operator.index(s))
        except TypeError:
            raise TypeError(f"{fn}: shape must be a sequence of integers, got "
                            f"{shape!r}") from None
    return tuple(out)


def fromfunction(function: Callable[..., Any], shape: Any, *, dtype: Any = float,
                 **kwargs: Any) -> Any:
    """An array of the given ``shape`` whose element ``[i, j, ...]`` is
    ``function(i, j, ...)``: the function is vectorized (``vmap``) over coordinates of
    ``dtype`` (default float), so it sees scalars.

    Example:
        >>> jnp.fromfunction(lambda i, j: 10 * i + j, (2, 3), dtype=int)
        Array([[ 0,  1,  2],
               [10, 11, 12]], dtype=int32)
    """
    if not callable(function):
        raise TypeError(f"fromfunction: function must be callable, got {function!r}")
    shape = _shape_arg("fromfunction", shape)
    dt = dtypes.canonicalize_dtype(dtypes.dtype(dtype))
    if dt == dtypes.bool_:
        raise TypeError("fromfunction: dtype bool is not supported; use an integer, floating "
                        "or complex dtype")
    f = function
    # The last coordinate is mapped innermost, so the first one runs along axis 0.
    for pos in reversed(range(len(shape))):
        f = vmap(f, in_axes=tuple(0 if j == pos else None for j in range(len(shape))))
    return f(*(arange(max(s, 0), dtype=dt) for s in shape), **kwargs)


__all__ = [
    "c_", "r_", "s_", "index_exp", "mgrid", "ogrid", "block", "delete", "insert",
    "fill_diagonal", "put", "put_along_axis", "place", "mask_indices", "piecewise",
    "vectorize", "apply_along_axis", "apply_over_axes", "fromfunction",
]
