"""Index functions of ember.numpy: take, take_along_axis, nonzero, select, choose,
and the index constructors (tril_indices, unravel_index, ix_, indices, ...)."""


from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import core, dtypes, lax
from ember.core import Tracer
from ember.lax.slicing import normalize_index
from ember.numpy import _util
from ember.numpy.creation import array
from ember.numpy.indexing import (
    _empty_result,
    _int_dtype,
    _is_array_index,
    _prep_index,
    _stack_last,
)
from ember.numpy.reductions import cumsum
from ember.numpy.shape import static_int

# ---------------------------------------------------------------- take / take_along_axis


def _take_mode(fn: str, mode: Any) -> str:
    mode = "fill" if mode is None else mode
    if mode == "raise":
        raise NotImplementedError(f"{fn}: the 'raise' mode is not supported (indices are not "
                                  "checked at run time); use 'fill', 'clip' or 'wrap'")
    if mode not in ("fill", "clip", "wrap", "promise_in_bounds", "drop"):
        raise ValueError(f"{fn}: invalid mode {mode!r}; expected 'fill', 'clip', 'wrap' or "
                         "'promise_in_bounds'")
    return mode


def _index_array(fn: str, indices: Any) -> Any:
    _util.check_arraylike(fn, indices)
    dt = np.dtype(core.get_aval(indices).dtype)
    if not dtypes.is_integer(dt):
        raise TypeError(f"{fn}: indices must have an integer dtype, got {dt}")
    return indices if _is_array_index(indices) else np.asarray(indices)


# How each take mode maps to a gather mode.
_GATHER_MODE = {"fill": "fill", "drop": "fill", "clip": "clip", "wrap": "promise_in_bounds",
                "promise_in_bounds": "promise_in_bounds"}


def _floor_mod(i: Any, n: int) -> Any:
    """``i mod max(n, 1)`` in [0, n) for a traced integer ``i``."""
    r = lax.rem(i, max(n, 1))
    return lax.add(r, lax.mul(lax.convert_element_type(lax.lt(r, 0), r.dtype), max(n, 1)))


def _wrap_or_normalize(idx: Any, n: int, mode: str, shape: tuple[int, ...],
                       wrap_negative: bool = True) -> Any:
    if mode == "wrap":
        if isinstance(idx, Tracer):
            r = _floor_mod(lax.convert_element_type(idx, _int_dtype()), n)
            return lax.broadcast_to_shape(r, shape)
        v = np.mod(np.asarray(idx).astype(np.int64), max(n, 1)).astype(_int_dtype())
        return np.broadcast_to(v, shape)
    if not wrap_negative:  # JAX's take in 'clip' mode clamps -1 to 0 instead of wrapping
        if isinstance(idx, Tracer):
            return lax.broadcast_to_shape(lax.convert_element_type(idx, _int_dtype()), shape)
        v = np.clip(np.asarray(idx).astype(np.int64), -1, n)  # stays clamped, fits int32
        return np.broadcast_to(v.astype(_int_dtype()), shape)
    return _prep_index(idx, n, shape)


def take(a: Any, indices: Any, axis: int | None = None, out: None = None,
         mode: str | None = None, unique_indices: bool = False,
         indices_are_sorted: bool = False, fill_value: Any = None) -> Any:
    """Elements of ``a`` at ``indices`` along ``axis`` (the flattened array when None).

    ``mode`` is 'fill' by default (out-of-bounds give ``fill_value``: NaN for floats), or
    'clip' / 'wrap'. Negative indices count from the end.

    Example:
        >>> jnp.take(jnp.array([4., 5., 6.]), jnp.array([2, 0]))
        Array([6., 4.], dtype=float32)
    """
    if out is not None:
        raise NotImplementedError("take: the 'out' argument is not supported")
    _util.check_arraylike("take", a)
    a = _util.ensure_array(a)
    indices = _index_array("take", indices)
    mode = _take_mode("take", mode)
    if axis is None:
        a = lax.reshape(a, (core.get_aval(a).size,))
        axis = 0
    shape = core.get_aval(a).shape
    axis = _util.canonicalize_axis("take", axis, len(shape))
    ishape = tuple(indices.shape)
    n = shape[axis]
    out_shape = shape[:axis] + ishape + shape[axis + 1:]
    if n == 0:
        if int(np.prod(ishape, dtype=np.int64)) == 0 or mode == "fill":
            if int(np.prod(out_shape, dtype=np.int64)) == 0:
                return _empty_result(a, out_shape)
        raise IndexError(f"take: cannot take from axis {axis} of size 0 with non-empty indices")
    idx = _wrap_or_normalize(indices, n, mode, ishape, wrap_negative=mode != "clip")
    idx = _stack_last([idx], ishape)
    offset = tuple(range(axis)) + tuple(range(axis + len(ishape), len(out_shape)))
    dn = lax.GatherDimensionNumbers(offset_dims=offset, collapsed_slice_dims=(axis,),
                                    start_index_map=(axis,))
    sizes = tuple(1 if d == axis else s for d, s in enumerate(shape))
    return lax.gather(a, idx, dn, sizes, mode=_GATHER_MODE[mode], fill_value=fill_value,
                      unique_indices=unique_indices, indices_are_sorted=indices_are_sorted)


def take_along_axis(arr: Any, indices: Any, axis: int | None = -1, mode: str | None = None,
                    fill_value: Any = None) -> Any:
    """Picks ``arr`` values at ``indices`` along ``axis``; other axes broadcast.

    Example:
        >>> jnp.take_along_axis(jnp.array([[3, 1], [0, 2]]), jnp.array([[1], [0]]), axis=1)
        Array([[1],
               [0]], dtype=int32)
    """
    _util.check_arraylike("take_along_axis", arr)
    arr = _util.ensure_array(arr)
    indices = _index_array("take_along_axis", indices)
    mode = _take_mode("take_along_axis", mode)
    if axis is None:
        if indices.ndim != 1:
            raise ValueError(f"take_along_axis: indices must be 1-d when axis=None, got shape "
                             f"{tuple(indices.shape)}")
        arr = lax.reshape(arr, (core.get_aval(arr).size,))
        axis = 0
    shape = core.get_aval(arr).shape
    ishape = tuple(indices.shape)
    if len(ishape) != len(shape):
        raise ValueError(f"take_along_axis: indices and arr must have the same number of "
                         f"dimensions, got {len(ishape)} and {len(shape)}")
    axis = _util.canonicalize_axis("take_along_axis", axis, len(shape))
    try:
        bshape = np.broadcast_shapes(tuple(1 if d == axis else s for d, s in enumerate(shape)),
                                     tuple(1 if d == axis else s for d, s in enumerate(ishape)))
    except ValueError:
        raise ValueError(f"take_along_axis: arr shape {shape} and indices shape {ishape} are "
                         "not broadcast-compatible outside the axis") from None
    out_shape = tuple(ishape[axis] if d == axis else s for d, s in enumerate(bshape))
    n = shape[axis]
    if int(np.prod(out_shape, dtype=np.int64)) == 0:
        return _empty_result(arr, out_shape)
    if n == 0:
        raise IndexError("take_along_axis: cannot take from an axis of size 0")
    if isinstance(indices, Tracer):
        indices = lax.broadcast_to_shape(indices, out_shape) if tuple(ishape) != out_shape \
            else indices
    else:
        indices = np.broadcast_to(np.asarray(indices), out_shape)
    traced = isinstance(indices, Tracer)
    if all(s == out_shape[d] for d, s in enumerate(shape) if d != axis):
        # No broadcasting of ``arr``: its other dims are batch dims of the gather (as JAX
        # lowers it), one index per element (an iota per dim, concatenated into index
        # vectors, cost the kernel ~1.4x).
        idx = _stack_last([_wrap_or_normalize(indices, n, mode, out_shape)], out_shape)
        batch = tuple(d for d in range(len(shape)) if d != axis)
        dn = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(axis,),
                                        start_index_map=(axis,), operand_batching_dims=batch,
                                        start_indices_batching_dims=batch)
        return lax.gather(arr, idx, dn, (1,) * len(shape), mode=_GATHER_MODE[mode],
                          fill_value=fill_value)
    cols = []
    for d, s in enumerate(shape):
        if d == axis:
            cols.append(_wrap_or_normalize(indices, n, mode, out_shape))
        elif traced:  # (an iota stays index arithmetic in a fused kernel, not a big constant)
            cols.append(lax.broadcasted_iota(_int_dtype(), out_shape, d) if s != 1
                        else lax.full(out_shape, 0, _int_dtype()))
        else:
            v = np.arange(out_shape[d]) if s != 1 else np.zeros(out_shape[d], np.int64)
            bs = [1] * len(out_shape)
            bs[d] = out_shape[d]
            cols.append(np.broadcast_to(v.reshape(bs).astype(_int_dtype()), out_shape))
    idx = _stack_last(cols, out_shape)
    dn = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=tuple(range(len(shape))),
                                    start_index_map=tuple(range(len(shape))))
    return lax.gather(arr, idx, dn, (1,) * len(shape), mode=_GATHER_MODE[mode],
                      fill_value=fill_value)


# ---------------------------------------------------------------- nonzero and friends


# Why an index checked with mode='raise' must be concrete (JAX's words).
_RAISE_MODE = ("The error occurred because {} was jit-compiled with mode='raise'. Use "
               "mode='wrap' or mode='clip' instead.")


def _concrete_value(fn: str, a: Any, why: str | None = None) -> np.ndarray:
    a = core.concrete_or_error(
        a, why or f"{fn}: the size of the result depends on the values of the argument; pass "
                  "a static size= to use it under jit/tracing")
    return np.asarray(a)


def _fill_tuple(fn: str, fill_value: Any, n: int) -> list[Any]:
    if fill_value is None:
        return [0] * n
    if isinstance(fill_value, (tuple, list)):
        if len(fill_value) != n:
            raise ValueError(f"{fn}: fill_value must be a scalar or a tuple of length {n}, got "
                             f"{fill_value!r}")
        return list(fill_value)
    return [fill_value] * n


def nonzero(a: Any, *, size: int | None = None,
            fill_value: Any = None) -> tuple[Any, ...]:
    """Indices of the non-zero elements, one array per dimension.

    Without ``size`` the argument must be concrete; with ``size`` the result has that
    length (padded with ``fill_value``, default 0, or truncated) and works under tracing.

    Example:
        >>> jnp.nonzero(jnp.array([0, 3, 0, 5]))
        (Array([1, 3], dtype=int32),)
    """
    _util.check_arraylike("nonzero", a)
    aval = core.get_aval(a)
    if aval.ndim == 0:
        raise ValueError("nonzero: calling nonzero on 0d arrays is not allowed; use "
                         "jnp.atleast_1d(a).nonzero() instead")
    if size is None:
        if fill_value is not None:
            raise ValueError("nonzero: fill_value requires size to be set")
        v = _concrete_value("nonzero", a)
        return tuple(array(i.astype(_int_dtype())) for i in np.nonzero(v))
    size = int(core.concrete_or_error(size, "nonzero: size must be a static integer"))
    if size < 0:
        raise ValueError(f"nonzero: size must be non-negative, got {size}")
    fills = _fill_tuple("nonzero", fill_value, aval.ndim)
    if not isinstance(a, Tracer):
        v = np.asarray(a)
        res = []
        for i, f in zip(np.nonzero(v), fills):
            i = i[:size]
            pad = np.full(size - len(i), f, _int_dtype())
            res.append(array(np.concatenate([i.astype(_int_dtype()), pad])))
        return tuple(res)
    return _traced_nonzero(a, aval, size, fills)


def _traced_nonzero(a: Any, aval: core.ShapedArray, size: int, fills: list[Any]):
    n = aval.size
    flat = lax.reshape(a, (n,))
    mask = lax.ne(flat, np.zeros((), aval.dtype)) if aval.dtype != np.bool_ else flat
    pos = cumsum(lax.convert_element_type(mask, _int_dtype())) - 1
    # Selected elements go to their rank; the rest to `size` (out of bounds: dropped).
    target = lax.select_n(mask, lax.broadcast_in_dim(np.asarray(size, _int_dtype()), (n,), ()),
                          lax.convert_element_type(pos, _int_dtype()))
    coords = np.unravel_index(np.arange(n), aval.shape)
    dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    out = []
    for c, f in zip(coords, fills):
        f = core.concrete_or_error(f, "nonzero: fill_value must be concrete")
        init = np.full((size,), f, _int_dtype())
        out.append(lax.scatter(init, lax.reshape(target, (n, 1)), c.astype(_int_dtype()), dn,
                               unique_indices=True, mode="drop"))
    return tuple(out)


def flatnonzero(a: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """Indices of the non-zero elements of the flattened array.

    Example:
        >>> jnp.flatnonzero(jnp.array([[0, 1], [2, 0]]))
        Array([1, 2], dtype=int32)
    """
    _util.check_arraylike("flatnonzero", a)
    a = _util.ensure_array(a)
    return nonzero(lax.reshape(a, (core.get_aval(a).size,)), size=size,
                   fill_value=fill_value)[0]


def argwhere(a: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """Indices of the non-zero elements as an ``(N, a.ndim)`` array.

    Example:
        >>> jnp.argwhere(jnp.array([[0, 1], [2, 0]]))
        Array([[0, 1],
               [1, 0]], dtype=int32)
    """
    _util.check_arraylike("argwhere", a)
    aval = core.get_aval(a)
    if aval.ndim == 0:
        v = bool(_concrete_value("argwhere", a)) if size is None else None
        rows = (1 if v else 0) if size is None else size
        return array(np.zeros((rows, 0), _int_dtype()))
    cols = nonzero(a, size=size, fill_value=fill_value)
    n = core.get_aval(cols[0]).shape[0]
    return _util.ensure_array(_stack_last(list(cols), (n,)))


def compress(condition: Any, a: Any, axis: int | None = None, *, size: int | None = None,
             fill_value: Any = 0, out: None = None) -> Any:
    """Slices of ``a`` along ``axis`` where the 1-d ``condition`` is true.

    Without ``size`` the condition must be concrete; with ``size`` the result has that
    length (at most the axis length; padded with ``fill_value``) and works under tracing.
    Entries of ``condition`` beyond the axis length are ignored with ``size``, an error
    without it (as in JAX).

    Example:
        >>> jnp.compress(jnp.array([True, False, True]), jnp.array([1, 2, 3]))
        Array([1, 3], dtype=int32)
    """
    if out is not None:
        raise NotImplementedError("compress: the 'out' argument is not supported")
    _util.check_arraylike("compress", condition, a, fill_value)
    if np.ndim(condition) != 1:
        raise ValueError(f"compress: condition must be a 1-d array, got shape "
                         f"{np.shape(condition)}")
    a = _util.ensure_array(a)
    if axis is None:
        a = lax.reshape(a, (core.get_aval(a).size,))
        axis = 0
    shape = core.get_aval(a).shape
    axis = _util.canonicalize_axis("compress", axis, len(shape))
    n = shape[axis]
    if size is None:
        cond = _concrete_value("compress", condition) != 0
        if cond[n:].any():
            raise ValueError(f"compress: condition has true entries beyond the length {n} of "
                             f"axis {axis}")
        idx = np.nonzero(cond[:n])[0]
        return take(a, idx.astype(_int_dtype()), axis=axis, mode="clip")
    size = static_int("compress", "size", size)
    cond = _util.ensure_array(condition)
    m = min(n, core.get_aval(cond).shape[0])
    if not 0 <= size <= m:
        raise ValueError(f"compress: size must be non-negative and at most the length {m} of "
                         f"the axis (and of the condition), got size={size}")
    if m < core.get_aval(cond).shape[0]:
        cond = lax.slice(cond, (0,), (m,))
    # The true positions, then n (out of bounds, so the take fills) up to size.
    idx, = nonzero(cond, size=size, fill_value=n)
    return take(a, idx, axis=axis, mode="fill", fill_value=fill_value)


def extract(condition: Any, arr: Any, *, size: int | None = None, fill_value: Any = 0) -> Any:
    """Elements of ``arr`` where ``condition`` is true (both flattened; concrete unless
    ``size`` is given).

    Example:
        >>> jnp.extract(jnp.array([0, 1, 1]), jnp.array([4, 5, 6]))
        Array([5, 6], dtype=int32)
    """
    _util.check_arraylike("extract", condition, arr)
    # (A concrete condition stays concrete: a lax op would stage it under tracing.)
    cond = lax.reshape(condition, (condition.size,)) if isinstance(condition, Tracer) else \
        np.ravel(np.asarray(condition))
    arr = _util.ensure_array(arr)
    return compress(cond, lax.reshape(arr, (core.get_aval(arr).size,)), size=size,
                    fill_value=fill_value)


def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Any:
    """``choicelist[i]`` where ``condlist[i]`` is the first true condition, else ``default``.

    Example:
        >>> x = jnp.arange(4)
        >>> jnp.select([x < 1, x > 2], [x, -x], 9)
        Array([ 0,  9,  9, -3], dtype=int32)
    """
    # Any sequence works, an array too (its rows are the entries), as in JAX.
    try:
        condlist, choicelist = list(condlist), list(choicelist)
    except TypeError:
        raise TypeError("select: condlist and choicelist must be sequences of arrays, got "
                        f"{type(condlist).__name__} and {type(choicelist).__name__}") from None
    if len(condlist) != len(choicelist):
        raise ValueError(f"select: condlist and choicelist must have the same length, got "
                         f"{len(condlist)} and {len(choicelist)}")
    if not condlist:
        raise ValueError("select: condlist must not be empty")
    _util.check_arraylike("select", *condlist, *choicelist, default)
    # A non-boolean condition is true where nonzero (JAX casts the conditions to bool).
    condlist = [c if core.get_aval(c).dtype == np.bool_ else
                lax.convert_element_type(_util.ensure_array(c), np.bool_) for c in condlist]
    *choices, default = _util.promote_dtypes(*choicelist, default)
    args = [*condlist, *choices, default]
    shape = _util.broadcast_shapes(*(core.get_aval(x).shape for x in args))  # ValueError (JAX)
    args = [lax.broadcast_to_shape(_util.ensure_array(x), shape) for x in args]
    conds, choices, result = args[:len(condlist)], args[len(condlist):-1], args[-1]
    for c, v in zip(reversed(conds), reversed(choices)):
        result = lax.select_n(c, result, v)
    return result


def choose(a: Any, choices: Sequence[Any], out: None = None, mode: str = "raise") -> Any:
    """``choices[a[i]][i]`` elementwise; ``mode`` 'clip' or 'wrap' ('raise' needs concrete a).

    Example:
        >>> jnp.choose(jnp.array([0, 1]), [jnp.array([1, 2]), jnp.array([3, 4])])
        Array([1, 4], dtype=int32)
    """
    if out is not None:
        raise NotImplementedError("choose: the 'out' argument is not supported")
    _util.check_arraylike("choose", a, *choices)
    n = len(choices)
    if mode == "raise":
        v = _concrete_value("choose", a, _RAISE_MODE.format("jnp.choose"))
        if v.size and (v.min() < 0 or v.max() >= n):
            raise ValueError("choose: invalid entry in choice array")
        mode = "clip"
    if mode not in ("clip", "wrap"):
        raise ValueError(f"choose: invalid mode {mode!r}; expected 'raise', 'clip' or 'wrap'")
    if mode == "clip":  # clipped into [0, n), negative entries included (no wrapping)
        a = lax.clamp(0, _util.ensure_array(a), n - 1)
    ch = _util.promote_dtypes(*choices)
    args = _util.promote_shapes("choose", _util.ensure_array(a), *ch, check_rank=False)
    shape = _util.broadcast_shapes(*(core.get_aval(x).shape for x in args))
    a, *ch = [lax.broadcast_to_shape(_util.ensure_array(x), shape) for x in args]
    stacked = lax.concatenate([lax.broadcast_in_dim(c, (1,) + shape,
                                                    tuple(range(1, len(shape) + 1)))
                               for c in ch], 0)
    idx = lax.reshape(_util.ensure_array(a), (1,) + shape)
    return take_along_axis(stacked, idx, axis=0, mode=mode)[0]


# ---------------------------------------------------------------- index construction


def _arrays(*xs: np.ndarray) -> tuple[Any, ...]:
    return tuple(array(np.asarray(x).astype(_int_dtype())) for x in xs)


def diag_indices(n: int, ndim: int = 2) -> tuple[Any, ...]:
    """Indices of the main diagonal of an ``n``-sized ``ndim``-dimensional array.

    Example:
        >>> jnp.diag_indices(2)
        (Array([0, 1], dtype=int32), Array([0, 1], dtype=int32))
    """
    n = static_int("diag_indices", "n", n)
    ndim = static_int("diag_indices", "ndim", ndim)
    if n < 0 or ndim < 0:
        raise ValueError(f"diag_indices: n and ndim must be non-negative, got {n}, {ndim}")
    return _arrays(*np.diag_indices(n, ndim))


def diag_indices_from(arr: Any) -> tuple[Any, ...]:
    """Main-diagonal indices of a square array.

    Example:
        >>> jnp.diag_indices_from(jnp.zeros((2, 2)))[0]
        Array([0, 1], dtype=int32)
    """
    _util.check_arraylike("diag_indices_from", arr)
    shape = core.get_aval(arr).shape
    if len(shape) < 2:
        raise ValueError("diag_indices_from: input array must be at least 2-d")
    if len(set(shape)) != 1:
        raise ValueError(f"diag_indices_from: all dimensions of the input must be of equal "
                         f"length, got shape {shape}")
    return diag_indices(shape[0], len(shape))


def _tri_indices(fn: str, n: Any, k: Any, m: Any, np_fn) -> tuple[Any, Any]:
    n = static_int(fn, "n", n)
    k = static_int(fn, "k", k)
    m = n if m is None else static_int(fn, "m", m)
    if n < 0 or m < 0:
        raise ValueError(f"{fn}: n and m must be non-negative, got {n}, {m}")
    return _arrays(*np_fn(n, k, m))


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Any, Any]:
    """Row and column indices of the lower triangle of an ``(n, m)`` array.

    Example:
        >>> jnp.tril_indices(2)
        (Array([0, 1, 1], dtype=int32), Array([0, 0, 1], dtype=int32))
    """
    return _tri_indices("tril_indices", n, k, m, np.tril_indices)


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Any, Any]:
    """Row and column indices of the upper triangle of an ``(n, m)`` array.

    Example:
        >>> jnp.triu_indices(2)
        (Array([0, 0, 1], dtype=int32), Array([0, 1, 1], dtype=int32))
    """
    return _tri_indices("triu_indices", n, k, m, np.triu_indices)


def _from_2d(fn: str, arr: Any) -> tuple[int, int]:
    _util.check_arraylike(fn, arr)
    shape = core.get_aval(arr).shape
    if len(shape) != 2:
        raise ValueError(f"{fn}: input array must be 2-d, got shape {shape}")
    return shape


def tril_indices_from(arr: Any, k: int = 0) -> tuple[Any, Any]:
    """``tril_indices`` for the shape of the 2-d ``arr``.

    Example:
        >>> jnp.tril_indices_from(jnp.zeros((2, 2)))[1]
        Array([0, 0, 1], dtype=int32)
    """
    n, m = _from_2d("tril_indices_from", arr)
    return tril_indices(n, k, m)


def triu_indices_from(arr: Any, k: int = 0) -> tuple[Any, Any]:
    """``triu_indices`` for the shape of the 2-d ``arr``.

    Example:
        >>> jnp.triu_indices_from(jnp.zeros((2, 2)))[1]
        Array([0, 1, 1], dtype=int32)
    """
    n, m = _from_2d("triu_indices_from", arr)
    return triu_indices(n, k, m)


def _shape_tuple(fn: str, shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        dims = tuple(static_int(fn, "shape", d) for d in shape)
    except TypeError as e:
        if "Abstract tracer" in str(e):
            raise
        raise TypeError(f"{fn}: shape must be a sequence of integers, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise ValueError(f"{fn}: dimensions must be non-negative, got {dims}")
    return dims


def unravel_index(indices: Any, shape: Sequence[int]) -> tuple[Any, ...]:
    """Converts flat indices into coordinate arrays for ``shape``.

    Negative indices count from the end; out-of-bounds indices are clamped (JAX). Boolean
    indices count as 0 and 1. As in JAX, the coordinates have the dtype of ``indices``
    promoted with the (weakly typed) Python-int dimensions: int32 (weak) for Python ints and
    booleans, the dtype of integer arrays.

    Example:
        >>> jnp.unravel_index(jnp.array([5, 1]), (2, 3))
        (Array([1, 0], dtype=int32), Array([2, 1], dtype=int32))
    """
    _util.check_arraylike("unravel_index", indices)
    shape = _shape_tuple("unravel_index", shape)
    dt = core.get_aval(indices).dtype
    if not (dtypes.is_integer(dt) or dtypes.is_bool(dt)):
        raise TypeError(f"unravel_index: indices must have an integer or boolean dtype, "
                        f"got {dt}")
    out_dtype, weak = dtypes.result_type(indices, 1, return_weak_type_flag=True)
    total = int(np.prod(shape, dtype=np.int64))
    idx = _util.ensure_array(indices)
    if not isinstance(idx, Tracer):
        v = np.asarray(idx).astype(np.int64)
        v = np.clip(np.where(v < 0, v + total, v), 0, max(total - 1, 0))
        out = np.unravel_index(v, shape) if shape and total else [np.zeros_like(v)] * len(shape)
    else:
        idx = lax.convert_element_type(idx, _int_dtype())
        idx = normalize_index(idx, total)
        idx = lax.max(lax.min(idx, max(total - 1, 0)), 0)
        out, stride = [], total
        for d in shape:
            stride = stride // d if d else 0
            q = lax.div(idx, max(stride, 1))
            out.append(lax.rem(q, max(d, 1)))
    return tuple(lax.convert_element_type(c, out_dtype, weak) for c in out)


def ravel_multi_index(multi_index: Sequence[Any], dims: Sequence[int], mode: str = "raise",
                      order: str = "C", *, dtype: Any = None) -> Any:
    """Flat indices of the coordinate arrays ``multi_index`` in an array of shape ``dims``.

    ``mode`` is 'raise' (concrete indices only), 'clip', 'wrap' or 'ignore' (no check). The
    result has ``dtype``, by default the indices' dtypes promoted with a (weak) Python int,
    as in JAX: int32 for int32 or mixed int8/uint8 indices (int16), uint8 for uint8 ones.

    Example:
        >>> jnp.ravel_multi_index((jnp.array([1, 0]), jnp.array([2, 1])), (2, 3))
        Array([5, 1], dtype=int32)
    """
    dims = _shape_tuple("ravel_multi_index", dims)
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: got {len(multi_index)} index arrays for "
                         f"{len(dims)} dimensions")
    if order not in ("C", "F"):
        raise ValueError(f"ravel_multi_index: order must be 'C' or 'F', got {order!r}")
    if mode not in ("raise", "clip", "wrap", "ignore"):
        raise ValueError(f"ravel_multi_index: invalid mode {mode!r}; expected 'raise', "
                         "'clip', 'wrap' or 'ignore'")
    _util.check_arraylike("ravel_multi_index", *multi_index)
    for i in multi_index:
        if not dtypes.is_integer(core.get_aval(i).dtype):
            raise TypeError("ravel_multi_index: only integer indices are supported, got "
                            f"dtype {core.get_aval(i).dtype}")
    dt = dtypes.result_type(1, *multi_index) if dtype is None else \
        dtypes.canonicalize_dtype(dtypes.dtype(dtype))
    if not dtypes.is_integer(dt):
        raise ValueError(f"ravel_multi_index: dtype must be an integer type, got {dt}")
    if int(np.prod(dims, dtype=np.int64)) - 1 > np.iinfo(dt).max:
        raise ValueError(f"ravel_multi_index: dtype {dt} cannot hold the flat indices of an "
                         f"array of shape {dims}; pass a larger dtype=")
    if mode == "raise":
        for k, (i, d) in enumerate(zip(multi_index, dims)):
            v = _concrete_value("ravel_multi_index", i, _RAISE_MODE.format("ravel_multi_index"))
            if v.size and (v.min() < 0 or v.max() >= d):
                raise ValueError(f"ravel_multi_index: invalid entry in coordinates array "
                                 f"{k} (out of bounds for dimension of size {d})")
    idx = [_util.ensure_array(i) for i in multi_index]
    if mode == "clip":
        idx = [lax.clamp(0, i, max(d - 1, 0)) for i, d in zip(idx, dims)]
    elif mode == "wrap":
        idx = [_floor_mod(i, d) for i, d in zip(idx, dims)]
    strides = [int(np.prod(dims[k + 1:], dtype=np.int64)) for k in range(len(dims))] \
        if order == "C" else [int(np.prod(dims[:k], dtype=np.int64)) for k in range(len(dims))]
    result = array(0, dtype=dt)
    for i, st in zip(idx, strides):
        term = lax.mul(lax.convert_element_type(i, dt), lax.convert_element_type(st, dt))
        result = lax.add(*_util.promote_shapes("ravel_multi_index", result, term))
    return result


def ix_(*args: Any) -> tuple[Any, ...]:
    """Open-mesh index arrays from 1-d sequences (boolean ones are converted by nonzero).

    Example:
        >>> [a.shape for a in jnp.ix_(jnp.array([0, 1]), jnp.array([2, 0, 1]))]
        [(2, 1), (1, 3)]
    """
    _util.check_arraylike("ix_", *args)
    n = len(args)
    out = []
    for k, a in enumerate(args):
        aval = core.get_aval(a)
        if aval.ndim != 1:
            raise ValueError(f"ix_: arguments must be 1-d, got shape {aval.shape} at position "
                             f"{k}")
        if aval.dtype == np.bool_:
            (a,) = nonzero(a)
        elif not dtypes.is_integer(aval.dtype):
            raise TypeError(f"ix_: arguments must be integer or boolean, got {aval.dtype}")
        a = _util.ensure_array(a)
        shape = [1] * n
        shape[k] = core.get_aval(a).shape[0]
        out.append(lax.reshape(a, tuple(shape)))
    return tuple(out)


def indices(dimensions: Sequence[int], dtype: Any = None,
            sparse: bool = False) -> Any:
    """A grid of coordinate arrays for an array of shape ``dimensions``.

    Example:
        >>> jnp.indices((2, 2))[0]
        Array([[0, 0],
               [1, 1]], dtype=int32)
    """
    if isinstance(dimensions, (int, np.integer)):  # (TypeErrors in JAX, as its iota's)
        raise TypeError(f"indices: dimensions must be a sequence of integers, got "
                        f"{dimensions!r}")
    try:
        dims = _shape_tuple("indices", dimensions)
    except ValueError as e:  # (negative dimensions)
        raise TypeError(str(e)) from None
    dt = dtypes.canonicalize_dtype(dtypes.dtype(dtype)) if dtype is not None else _int_dtype()
    res = np.indices(dims, dtype=np.int64, sparse=sparse)
    if sparse:
        return tuple(array(r.astype(dt)) for r in res)
    return array(res.astype(dt))


__all__ = [
    "take", "take_along_axis", "nonzero", "flatnonzero",
    "argwhere", "compress", "extract", "select", "choose", "diag_indices",
    "diag_indices_from", "tril_indices", "triu_indices", "tril_indices_from",
    "triu_indices_from", "unravel_index", "ravel_multi_index", "ix_", "indices",
]
