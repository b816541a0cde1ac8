"""Shape manipulation: reshape, transpose, concatenate, stack, split, tile, repeat, flip, roll,
broadcasting helpers, atleast_nd, shape/ndim/size (``pad`` is in ``padding``).

Everything is written on lax shape primitives, so it works on tracers as well as on arrays;
only static arguments (shapes, axes, split points, pad widths) are ever handled with NumPy.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import core, dtypes, lax
from ember.core import Tracer
from ember.numpy import _util
from ember.numpy._util import array_arg as _arr
from ember.numpy._util import canonicalize_axes, canonicalize_axis, check_arraylike
from ember.numpy.ufuncs import remainder

_max = builtins.max


def _is_array(x: Any) -> bool:
    return isinstance(x, (Tracer, np.ndarray)) or hasattr(x, "aval")


def static_int(fn: str, arg: str, x: Any) -> int:
    """A concrete integer argument (Python/NumPy int or 0-d integer array)."""
    x = core.concrete_or_error(x, f"{fn}: {arg} must be a concrete integer")
    if _is_array(x):
        x = np.asarray(x)
        if x.ndim != 0 or x.dtype.kind not in "iu":
            raise TypeError(f"{fn}: {arg} must be an integer, got {x!r}")
        return int(x)
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise TypeError(f"{fn}: {arg} must be an integer, got {x!r}")
    return int(x)


def _static_ints(fn: str, arg: str, xs: Any) -> tuple[int, ...]:
    xs = core.concrete_or_error(xs, f"{fn}: {arg} must be concrete")
    if isinstance(xs, (int, np.integer)) and not isinstance(xs, bool):
        return (int(xs),)
    if _is_array(xs):
        xs = np.asarray(xs)
        if xs.dtype.kind not in "iu":
            raise TypeError(f"{fn}: {arg} must contain integers, got {xs!r}")
        return tuple(int(v) for v in xs.reshape(-1))
    try:
        return tuple(static_int(fn, arg, v) for v in xs)
    except TypeError:
        raise TypeError(f"{fn}: {arg} must be an integer or a sequence of integers, got "
                        f"{xs!r}") from None


def _slice(x: Any, axis: int, start: int, stop: int) -> Any:
    """``x[..., start:stop, ...]`` along ``axis`` (static bounds, already in range)."""
    if start == 0 and stop == core.get_aval(x).shape[axis]:
        return x
    return lax.slice_in_dim(x, start, stop, axis=axis)


# ---------------------------------------------------------------- shape queries


def shape(a: Any) -> tuple[int, ...]:
    """The shape of an array (or array-like).

    Example:
        >>> jnp.shape(jnp.ones((2, 3)))
        (2, 3)
    """
    return tuple(a.shape) if hasattr(a, "shape") else np.shape(a)


def ndim(a: Any) -> int:
    """The number of dimensions of an array.

    Example:
        >>> jnp.ndim(jnp.ones((2, 3)))
        2
    """
    return len(shape(a))


def size(a: Any, axis: int | None = None) -> int:
    """The number of elements, in total or along ``axis``.

    Example:
        >>> jnp.size(jnp.ones((2, 3)), axis=1)
        3
    """
    s = shape(a)
    if axis is None:
        return math.prod(s)
    return s[canonicalize_axis("size", axis, len(s))]


# ---------------------------------------------------------------- reshape family


def _reshape_target(fn: str, shape_in: tuple[int, ...], newshape: Any) -> tuple[int, ...]:
    # Bad target shapes are TypeErrors in JAX.
    new = _static_ints(fn, "shape", newshape)
    total = math.prod(shape_in)
    if new.count(-1) > 1:
        raise TypeError(f"{fn}: can only specify one unknown dimension (-1), got shape {new}")
    if any(d < -1 for d in new):
        raise TypeError(f"{fn}: negative dimensions are not allowed, got shape {new}")
    if -1 in new:
        known = math.prod(d for d in new if d != -1)
        if known == 0 or total % known:
            raise TypeError(f"{fn}: cannot reshape array of shape {shape_in} (size {total}) "
                            f"into shape {new}")
        new = tuple(total // known if d == -1 else d for d in new)
    if math.prod(new) != total:
        raise TypeError(f"{fn}: cannot reshape array of shape {shape_in} (size {total}) into "
                        f"shape {new} (size {math.prod(new)})")
    return new


def reshape(a: Any, shape: Any = None, order: str = "C", *, copy: bool | None = None) -> Any:
    """Gives ``a`` a new shape with the same number of elements; one entry may be -1.

    Example:
        >>> jnp.reshape(jnp.arange(6), (2, -1)).shape
        (2, 3)
    """
    a = _arr("reshape", a)
    if shape is None:  # (JAX has dropped NumPy's deprecated ``newshape`` keyword)
        raise TypeError("reshape: missing required argument 'shape'")
    aval = core.get_aval(a)
    new = _reshape_target("reshape", aval.shape, shape)
    if order == "F":
        t = lax.transpose(a, tuple(range(aval.ndim))[::-1])
        out = lax.reshape(t, new[::-1])
        return lax.transpose(out, tuple(range(len(new)))[::-1])
    if order == "A":  # (JAX's error: NumPy's memory-layout order has no meaning here)
        raise NotImplementedError("reshape: order='A' is not implemented; use 'C' or 'F'")
    if order != "C":
        raise ValueError(f"reshape: order must be 'C' or 'F', got {order!r}")
    return lax.reshape(a, new)


def ravel(a: Any, order: str = "C") -> Any:
    """The elements of ``a`` as a 1-d array.

    Example:
        >>> jnp.ravel(jnp.ones((2, 3))).shape
        (6,)
    """
    a = _arr("ravel", a)
    if order == "K":
        raise NotImplementedError("ravel: order='K' is not implemented; use 'C' or 'F'")
    return reshape(a, (-1,), order=order)


def transpose(a: Any, axes: Sequence[int] | None = None) -> Any:
    """Permutes the axes of ``a`` (reverses them by default).

    Example:
        >>> jnp.transpose(jnp.ones((2, 3, 4)), (1, 0, 2)).shape
        (3, 2, 4)
    """
    a = _arr("transpose", a)
    nd = core.get_aval(a).ndim
    if axes is None:
        perm = tuple(range(nd))[::-1]
    else:
        axes_t = _static_ints("transpose", "axes", axes)
        perm = tuple(canonicalize_axis("transpose", a, nd) for a in axes_t)
        if sorted(perm) != list(range(nd)):  # a TypeError in JAX (out of bounds: ValueError)
            raise TypeError(f"transpose: axes {axes_t} are not a permutation of the dimensions "
                            f"of an array of dimension {nd}")
    return lax.transpose(a, perm)


def permute_dims(a: Any, /, axes: Sequence[int]) -> Any:
    """Array API name of ``transpose`` (axes required).

    Example:
        >>> jnp.permute_dims(jnp.ones((2, 3)), (1, 0)).shape
        (3, 2)
    """
    return transpose(a, axes)


def matrix_transpose(x: Any, /) -> Any:
    """Swaps the last two axes.

    Example:
        >>> jnp.matrix_transpose(jnp.ones((4, 2, 3))).shape
        (4, 3, 2)
    """
    x = _arr("matrix_transpose", x)
    nd = core.get_aval(x).ndim
    if nd < 2:
        raise ValueError(f"matrix_transpose: x must have at least 2 dimensions, got {nd}")
    return swapaxes(x, -1, -2)


def swapaxes(a: Any, axis1: int, axis2: int) -> Any:
    """Exchanges two axes.

    Example:
        >>> jnp.swapaxes(jnp.ones((2, 3)), 0, 1).shape
        (3, 2)
    """
    a = _arr("swapaxes", a)
    nd = core.get_aval(a).ndim
    i, j = canonicalize_axis("swapaxes", axis1, nd), canonicalize_axis("swapaxes", axis2, nd)
    perm = list(range(nd))
    perm[i], perm[j] = perm[j], perm[i]
    return lax.transpose(a, tuple(perm))


def moveaxis(a: Any, source: int | Sequence[int], destination: int | Sequence[int]) -> Any:
    """Moves axes to new positions; the others keep their order.

    Example:
        >>> jnp.moveaxis(jnp.ones((2, 3, 4)), 0, -1).shape
        (3, 4, 2)
    """
    a = _arr("moveaxis", a)
    nd = core.get_aval(a).ndim
    src = tuple(canonicalize_axis("moveaxis", ax, nd)
                for ax in _static_ints("moveaxis", "source", source))
    if len(set(src)) != len(src):  # (JAX's transpose rejects the permutation: a TypeError)
        raise TypeError(f"moveaxis: repeated axis in source {source}")
    dst = canonicalize_axes("moveaxis", _static_ints("moveaxis", "destination", destination),
                            nd)
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: source {source} and destination {destination} must have "
                         "the same number of elements")
    perm = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        perm.insert(d, s)
    return lax.transpose(a, tuple(perm))


def rollaxis(a: Any, axis: int, start: int = 0) -> Any:
    """Moves ``axis`` so that it lies before the axis now at position ``start``.

    ``start`` may be any position in ``[-ndim, ndim]`` (``ndim`` means the end); prefer
    ``moveaxis``, whose meaning of the destination does not depend on ``axis``.

    Example:
        >>> jnp.rollaxis(jnp.ones((2, 3, 4)), 2).shape
        (4, 2, 3)
    """
    a = _arr("rollaxis", a)
    nd = core.get_aval(a).ndim
    start = static_int("rollaxis", "start", start)
    ax = canonicalize_axis("rollaxis", axis, nd)
    if not -nd <= start <= nd:
        raise ValueError(f"rollaxis: start={start} must satisfy {-nd} <= start <= {nd}")
    if start < 0:
        start += nd
    if start > ax:
        start -= 1
    return moveaxis(a, ax, start)


def expand_dims(a: Any, axis: int | Sequence[int]) -> Any:
    """Inserts size-1 axes at the positions ``axis`` of the result.

    Example:
        >>> jnp.expand_dims(jnp.ones(3), (0, 2)).shape
        (1, 3, 1)
    """
    a = _arr("expand_dims", a)
    axes = _static_ints("expand_dims", "axis", axis)
    out_nd = core.get_aval(a).ndim + len(axes)
    axes = canonicalize_axes("expand_dims", axes, out_nd)
    return lax.expand_dims(a, axes)


def squeeze(a: Any, axis: int | Sequence[int] | None = None) -> Any:
    """Removes size-1 axes (all of them, or those in ``axis``, which must have size 1).

    Example:
        >>> jnp.squeeze(jnp.ones((1, 3, 1))).shape
        (3,)
    """
    a = _arr("squeeze", a)
    aval = core.get_aval(a)
    if axis is None:
        axes = tuple(i for i, d in enumerate(aval.shape) if d == 1)
    else:
        axes = canonicalize_axes("squeeze", _static_ints("squeeze", "axis", axis), aval.ndim)
        for ax in axes:
            if aval.shape[ax] != 1:
                raise ValueError(f"squeeze: cannot select an axis to squeeze out which has "
                                 f"size not equal to one: axis {ax} of shape {aval.shape}")
    return lax.squeeze(a, axes)


# ---------------------------------------------------------------- joining


def _sequence_of_arrays(fn: str, arrays: Any) -> list[Any]:
    if isinstance(arrays, Tracer) or _util.is_arraylike(arrays):
        raise TypeError(f"{fn}: expects a sequence of arrays")  # arrays handled by callers
    try:
        arrays = list(arrays)
    except TypeError:
        raise TypeError(f"{fn}: arrays must be a sequence of arrays, got "
                        f"{type(arrays).__name__}") from None
    if not arrays:
        raise ValueError(f"{fn}: need at least one array to concatenate")
    check_arraylike(fn, *arrays)
    return arrays


def _promote(fn: str, arrays: list[Any], dtype: Any) -> list[Any]:
    if dtype is not None:
        dt = dtypes.canonicalize_dtype(dtypes.dtype(dtype))
        return [lax.convert_element_type(a, dt) for a in arrays]
    return _util.promote_dtypes(*arrays)


def concatenate(arrays: Any, axis: int | None = 0, dtype: Any = None) -> Any:
    """Joins arrays along an existing axis (``axis=None`` flattens them first).

    Example:
        >>> jnp.concatenate([jnp.ones(2), jnp.zeros(3)]).shape
        (5,)
    """
    if _is_array(arrays):
        arr = _util.ensure_array(arrays)
        aval = core.get_aval(arr)
        if aval.ndim == 0:
            raise ValueError("concatenate: zero-dimensional arrays cannot be concatenated")
        if axis is None:
            return ravel(arr if dtype is None else lax.convert_element_type(
                arr, dtypes.canonicalize_dtype(dtypes.dtype(dtype))))
        return concatenate(list(_unstack0(arr)), axis, dtype)
    arrays = _sequence_of_arrays("concatenate", arrays)
    if axis is None:
        arrays = [ravel(a) for a in arrays]
        axis = 0
    arrays = _promote("concatenate", arrays, dtype)
    avals = [core.get_aval(a) for a in arrays]
    if any(av.ndim == 0 for av in avals):
        raise ValueError("concatenate: zero-dimensional arrays cannot be concatenated")
    nd = avals[0].ndim
    ax = canonicalize_axis("concatenate", axis, nd)
    for av in avals:
        if av.ndim != nd:  # TypeErrors, as in JAX
            raise TypeError(f"concatenate: all the input arrays must have the same number of "
                            f"dimensions, got shapes {[a.shape for a in avals]}")
        if any(s != t for i, (s, t) in enumerate(zip(av.shape, avals[0].shape)) if i != ax):
            raise TypeError(f"concatenate: all the input array dimensions except for the "
                            f"concatenation axis {ax} must match exactly, got shapes "
                            f"{[a.shape for a in avals]}")
    return lax.concatenate(arrays, ax)


def _unstack0(x: Any) -> list[Any]:
    n = core.get_aval(x).shape[0]
    return [lax.squeeze(_slice(x, 0, i, i + 1), (0,)) for i in range(n)]


def unstack(x: Any, /, *, axis: int = 0) -> tuple[Any, ...]:
    """Splits ``x`` along ``axis`` into a tuple of arrays with that axis removed.

    Example:
        >>> [t.shape for t in jnp.unstack(jnp.ones((2, 3)), axis=1)]
        [(2,), (2,), (2,)]
    """
    x = _arr("unstack", x)
    aval = core.get_aval(x)
    ax = canonicalize_axis("unstack", axis, aval.ndim)
    return tuple(lax.index_in_dim(x, i, axis=ax, keepdims=False)
                 for i in range(aval.shape[ax]))


def concat(arrays: Sequence[Any], /, *, axis: int | None = 0) -> Any:
    """Array API name of ``concatenate``.

    Example:
        >>> jnp.concat([jnp.ones(2), jnp.ones(2)]).shape
        (4,)
    """
    return concatenate(arrays, axis=axis)


def stack(arrays: Any, axis: int = 0, out: None = None, dtype: Any = None) -> Any:
    """Joins same-shaped arrays along a new axis.

    Example:
        >>> jnp.stack([jnp.ones(3), jnp.zeros(3)], axis=1).shape
        (3, 2)
    """
    if out is not None:
        raise NotImplementedError("stack: the 'out' argument is not supported")
    if _is_array(arrays):
        arr = _util.ensure_array(arrays)
        if dtype is not None:
            arr = lax.convert_element_type(arr, dtypes.canonicalize_dtype(dtypes.dtype(dtype)))
        nd = core.get_aval(arr).ndim
        if nd == 0:
            raise ValueError("stack: expects a sequence of arrays, got a 0-d array")
        return moveaxis(arr, 0, canonicalize_axis("stack", axis, nd))
    arrays = _sequence_of_arrays("stack", arrays)
    shapes = {shape(a) for a in arrays}
    if len(shapes) != 1:
        raise ValueError(f"stack: all input arrays must have the same shape, got "
                         f"{sorted(shapes)}")
    nd = len(next(iter(shapes))) + 1
    ax = canonicalize_axis("stack", axis, nd)
    arrays = _promote("stack", arrays, dtype)
    return lax.concatenate([lax.expand_dims(a, (ax,)) for a in arrays], ax)


def _stack_helper(fn: str, tup: Any, promote_fn, axis_fn, dtype: Any) -> Any:
    if _is_array(tup):
        tup = _unstack0(_util.ensure_array(tup))
    arrays = _sequence_of_arrays(fn, tup)
    arrays = [promote_fn(a) for a in arrays]
    return concatenate(arrays, axis=axis_fn(arrays), dtype=dtype)


def hstack(tup: Sequence[Any], dtype: Any = None) -> Any:
    """Joins arrays horizontally (along axis 1, or axis 0 for 1-d arrays).

    Example:
        >>> jnp.hstack([jnp.ones(2), jnp.ones(3)]).shape
        (5,)
    """
    return _stack_helper("hstack", tup, atleast_1d,
                         lambda arrs: 0 if core.get_aval(arrs[0]).ndim == 1 else 1, dtype)


def vstack(tup: Sequence[Any], dtype: Any = None) -> Any:
    """Joins arrays vertically (1-d arrays become rows).

    Example:
        >>> jnp.vstack([jnp.ones(3), jnp.ones(3)]).shape
        (2, 3)
    """
    return _stack_helper("vstack", tup, atleast_2d, lambda arrs: 0, dtype)


row_stack = vstack


def dstack(tup: Sequence[Any], dtype: Any = None) -> Any:
    """Joins arrays along the third axis.

    Example:
        >>> jnp.dstack([jnp.ones((2, 2)), jnp.ones((2, 2))]).shape
        (2, 2, 2)
    """
    return _stack_helper("dstack", tup, atleast_3d, lambda arrs: 2, dtype)


def column_stack(tup: Sequence[Any]) -> Any:
    """Stacks 1-d arrays as columns (2-d arrays are joined along axis 1).

    Example:
        >>> jnp.column_stack([jnp.ones(3), jnp.zeros(3)]).shape
        (3, 2)
    """
    def as_column(a):
        a = _util.ensure_array(a)
        nd = core.get_aval(a).ndim
        return lax.reshape(a, (core.get_aval(a).size, 1)) if nd < 2 else a
    return _stack_helper("column_stack", tup, as_column, lambda arrs: 1, None)


# ---------------------------------------------------------------- splitting


def _split_points(fn: str, n: int, indices_or_sections: Any, even: bool) -> list[int]:
    ios = core.concrete_or_error(indices_or_sections,
                                 f"{fn}: indices_or_sections must be concrete")
    if isinstance(ios, (int, np.integer)) and not isinstance(ios, bool) or (
            _is_array(ios) and np.ndim(ios) == 0):
        k = static_int(fn, "indices_or_sections", ios)
        if k <= 0:
            raise ValueError(f"{fn}: number of sections must be larger than 0, got {k}")
        if even and n % k:
            raise ValueError(f"{fn}: array split does not result in an equal division: an axis "
                             f"of size {n} cannot be split into {k} sections")
        q, r = divmod(n, k)
        sizes = [q + 1] * r + [q] * (k - r)
        return list(np.cumsum(sizes)[:-1])
    return list(_static_ints(fn, "indices_or_sections", ios))


def _split(fn: str, ary: Any, indices_or_sections: Any, axis: int, even: bool) -> list[Any]:
    ary = _arr(fn, ary)
    aval = core.get_aval(ary)
    ax = canonicalize_axis(fn, axis, aval.ndim)
    n = aval.shape[ax]
    bounds = [0] + [int(p) for p in _split_points(fn, n, indices_or_sections, even)] + [n]
    # JAX (unlike NumPy) neither wraps negative split points nor clamps them: the piece
    # sizes are the differences of the points and must all be nonnegative.
    sizes = [hi - lo for lo, hi in zip(bounds[:-1], bounds[1:])]
    if any(sz < 0 for sz in sizes):
        raise ValueError(f"{fn}: sizes passed to split must be nonnegative, got {sizes} (split "
                         f"points must be increasing and within [0, {n}])")
    return [_slice(ary, ax, lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]


def split(ary: Any, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Any]:
    """Splits into equal sections (an int that must divide the axis) or at the given indices.

    Example:
        >>> [p.shape for p in jnp.split(jnp.ones(6), [1, 4])]
        [(1,), (3,), (2,)]
    """
    return _split("split", ary, indices_or_sections, axis, True)


def array_split(ary: Any, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Any]:
    """Like ``split``, but an int number of sections need not divide the axis.

    Example:
        >>> [p.shape for p in jnp.array_split(jnp.ones(5), 2)]
        [(3,), (2,)]
    """
    return _split("array_split", ary, indices_or_sections, axis, False)


def hsplit(ary: Any, indices_or_sections: int | Sequence[int]) -> list[Any]:
    """Splits along axis 1 (axis 0 for 1-d arrays).

    Example:
        >>> len(jnp.hsplit(jnp.ones((2, 4)), 2))
        2
    """
    ary = _arr("hsplit", ary)
    nd = core.get_aval(ary).ndim
    if nd == 0:
        raise ValueError("hsplit: only works on arrays of 1 or more dimensions")
    return _split("hsplit", ary, indices_or_sections, 0 if nd == 1 else 1, True)


def vsplit(ary: Any, indices_or_sections: int | Sequence[int]) -> list[Any]:
    """Splits along axis 0 (as JAX, 1-d arrays too, where NumPy wants 2 or more dimensions).

    Example:
        >>> len(jnp.vsplit(jnp.ones((4, 2)), 2))
        2
    """
    ary = _arr("vsplit", ary)
    if core.get_aval(ary).ndim < 1:
        raise ValueError("vsplit: only works on arrays of 1 or more dimensions")
    return _split("vsplit", ary, indices_or_sections, 0, True)


def dsplit(ary: Any, indices_or_sections: int | Sequence[int]) -> list[Any]:
    """Splits along axis 2 (arrays of 3 or more dimensions).

    Example:
        >>> len(jnp.dsplit(jnp.ones((1, 1, 4)), 2))
        2
    """
    ary = _arr("dsplit", ary)
    if core.get_aval(ary).ndim < 3:
        raise ValueError("dsplit: only works on arrays of 3 or more dimensions")
    return _split("dsplit", ary, indices_or_sections, 2, True)


# ---------------------------------------------------------------- tile / repeat


def tile(A: Any, reps: int | Sequence[int]) -> Any:
    """Repeats the whole array ``reps`` times along each axis.

    Example:
        >>> jnp.tile(jnp.arange(2), 2)
        Array([0, 1, 0, 1], dtype=int32)
    """
    A = _arr("tile", A)
    reps_t = _static_ints("tile", "reps", reps)
    if any(r < 0 for r in reps_t):
        raise ValueError(f"tile: reps must be non-negative, got {reps_t}")
    aval = core.get_aval(A)
    nd = _max(len(reps_t), aval.ndim)
    reps_t = (1,) * (nd - len(reps_t)) + reps_t
    shp = (1,) * (nd - aval.ndim) + aval.shape
    A = lax.reshape(A, shp)
    # Interleave a broadcast (rep) axis before every axis, then merge the pairs.
    bshape = tuple(v for pair in zip(reps_t, shp) for v in pair)
    out = lax.broadcast_in_dim(A, bshape, tuple(range(1, 2 * nd, 2)))
    return lax.reshape(out, tuple(r * s for r, s in zip(reps_t, shp)))


def repeat(a: Any, repeats: Any, axis: int | None = None, *,
           total_repeat_length: int | None = None) -> Any:
    """Repeats each element ``repeats`` times (an int, or one count per element). Without
    ``total_repeat_length`` the repeats must be concrete; with it they may be traced, and the
    result is cut or padded with the last element to that length (as in JAX).

    Example:
        >>> jnp.repeat(jnp.array([1, 2]), 2)
        Array([1, 1, 2, 2], dtype=int32)
    """
    a = _arr("repeat", a)
    if not isinstance(repeats, (int, np.integer)):  # (JAX: lists are not array-likes here)
        check_arraylike("repeat", repeats)
    if axis is None:
        a = ravel(a)
        axis = 0
    aval = core.get_aval(a)
    ax = canonicalize_axis("repeat", axis, aval.ndim)
    if total_repeat_length is not None:
        total = static_int("repeat", "total_repeat_length", total_repeat_length)
        if total < 0:  # (a TypeError in JAX)
            raise TypeError(f"repeat: total_repeat_length must be non-negative, got {total}")
        return _repeat_to_length(a, repeats, ax, total)
    reps = np.asarray(core.concrete_or_error(
        repeats, "repeat: repeats must be concrete (or give a static total_repeat_length)"))
    if reps.dtype.kind not in "iub" or reps.ndim > 1:
        raise TypeError(f"repeat: repeats must be an integer or a 1-d integer array, got "
                        f"{repeats!r}")
    if np.any(reps < 0):
        raise ValueError("repeat: repeats may not contain negative values")
    n = aval.shape[ax]
    if reps.ndim == 0:
        r = int(reps)
        expanded = aval.shape[:ax + 1] + (r,) + aval.shape[ax + 1:]
        dims = tuple(i for i in range(aval.ndim + 1) if i != ax + 1)
        out = lax.broadcast_in_dim(a, expanded, dims)
        return lax.reshape(out, aval.shape[:ax] + (n * r,) + aval.shape[ax + 1:])
    reps = np.broadcast_to(reps, (n,)) if reps.size == 1 else reps
    if reps.shape != (n,):
        raise ValueError(f"repeat: repeats of shape {reps.shape} cannot be broadcast to the "
                         f"axis size {n}")
    from ember.numpy.index_functions import take  # index_functions -> creation -> shape
    return take(a, np.repeat(np.arange(n), reps).astype(np.int32), axis=ax,
                mode="promise_in_bounds")


def _repeat_to_length(a: Any, repeats: Any, ax: int, total: int) -> Any:
    """repeat with a static total length, the repeats possibly traced: JAX's algorithm (so a
    short total cuts the result, a long one repeats the element after the last counted)."""
    from ember.numpy.index_functions import take  # (imports that would be circular at the top)
    from ember.numpy.reductions import cumsum
    aval = core.get_aval(a)
    reps = ravel(_util.ensure_array(repeats))
    if not dtypes.is_integer(reps.dtype) and reps.dtype != dtypes.bool_:
        raise TypeError(f"repeat: repeats must be integers, got {reps.dtype}")
    if aval.ndim == 0:
        return lax.broadcast_in_dim(a, (total,), ())
    shape = aval.shape[:ax] + (total,) + aval.shape[ax + 1:]
    if total == 0 or aval.shape[ax] == 0:
        return lax.full(shape, 0, aval.dtype) if aval.shape[ax] else a
    reps = broadcast_to(reps, (aval.shape[ax],))
    # The first output position of each element: [1, 2, 0, 5] -> [0, 1, 3, 3]; marks there,
    # summed, give each output position's element (marks past the end are dropped).
    starts = cumsum(lax.concatenate([lax.full((1,), 0, reps.dtype), reps[:-1]], 0))
    marks = lax.full((total,), 0, dtypes.int32).at[starts].add(1)
    return take(a, lax.sub(cumsum(marks), lax.full((total,), 1, dtypes.int32)), axis=ax)


def resize(a: Any, new_shape: int | Sequence[int]) -> Any:
    """An array of ``new_shape`` filled with the elements of ``a`` repeated cyclically.

    Example:
        >>> jnp.resize(jnp.array([1, 2, 3]), (2, 2))
        Array([[1, 2],
               [3, 1]], dtype=int32)
    """
    a = ravel(_arr("resize", a))
    new = _static_ints("resize", "new_shape", new_shape)
    if any(d < 0 for d in new):
        raise ValueError(f"resize: new_shape must be non-negative, got {new}")
    total, n = math.prod(new), core.get_aval(a).size
    if n == 0 or total == 0:
        return lax.full(new, 0, core.get_aval(a).dtype)
    copies = -(-total // n)
    flat = lax.concatenate([a] * copies, 0) if copies > 1 else a
    return lax.reshape(_slice(flat, 0, 0, total), new)


# ---------------------------------------------------------------- flip / roll / rot90


def flip(m: Any, axis: int | Sequence[int] | None = None) -> Any:
    """Reverses the order of elements along ``axis`` (all axes by default).

    Example:
        >>> jnp.flip(jnp.arange(3))
        Array([2, 1, 0], dtype=int32)
    """
    m = _arr("flip", m)
    nd = core.get_aval(m).ndim
    axes = tuple(range(nd)) if axis is None else tuple(
        canonicalize_axis("flip", ax, nd) for ax in _static_ints("flip", "axis", axis))
    if len(set(axes)) != len(axes):  # (a TypeError in JAX, from rev)
        raise TypeError(f"flip: repeated axis in {axis}")
    return lax.rev(m, axes)


def fliplr(m: Any) -> Any:
    """Reverses the columns (axis 1).

    Example:
        >>> jnp.fliplr(jnp.eye(2))[0]
        Array([0., 1.], dtype=float32)
    """
    m = _arr("fliplr", m)
    if core.get_aval(m).ndim < 2:
        raise ValueError("fliplr: input must have at least 2 dimensions")
    return lax.rev(m, (1,))


def flipud(m: Any) -> Any:
    """Reverses the rows (axis 0).

    Example:
        >>> jnp.flipud(jnp.arange(3))
        Array([2, 1, 0], dtype=int32)
    """
    m = _arr("flipud", m)
    if core.get_aval(m).ndim < 1:
        raise ValueError("flipud: input must have at least 1 dimension")
    return lax.rev(m, (0,))


def _roll_static(a: Any, shift: int, ax: int) -> Any:
    n = core.get_aval(a).shape[ax]
    if n == 0:
        return a
    s = shift % n
    if s == 0:
        return a
    return lax.concatenate([_slice(a, ax, n - s, n), _slice(a, ax, 0, n - s)], ax)


def _roll_dynamic(a: Any, shift: Any, ax: int) -> Any:
    n = core.get_aval(a).shape[ax]
    if n == 0:
        return a
    s = remainder(lax.convert_element_type(shift, np.int32), np.int32(n))
    doubled = lax.concatenate([a, a], ax)
    return lax.dynamic_slice_in_dim(doubled, lax.sub(np.int32(n), s), n, axis=ax)


def roll(a: Any, shift: Any, axis: int | Sequence[int] | None = None) -> Any:
    """Rolls elements along ``axis`` by ``shift`` (flattened first when ``axis`` is None).

    Example:
        >>> jnp.roll(jnp.arange(4), 1)
        Array([3, 0, 1, 2], dtype=int32)
    """
    a = _arr("roll", a)
    aval = core.get_aval(a)
    if axis is None:
        return lax.reshape(roll(ravel(a), shift, 0), aval.shape)
    axes = _static_ints("roll", "axis", axis)
    axes = tuple(canonicalize_axis("roll", ax, aval.ndim) for ax in axes)
    traced = isinstance(shift, Tracer) and shift.to_concrete_value() is None
    if traced:
        shifts = [shift] if shift.ndim == 0 else list(shift)
    else:
        shifts = list(_static_ints("roll", "shift", np.asarray(core.concrete_or_error(shift))))
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    elif len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError(f"roll: shift and axis must have the same length, got shift={shift} "
                         f"and axis={axis}")
    for s, ax in zip(shifts, axes):
        a = _roll_dynamic(a, s, ax) if traced else _roll_static(a, s, ax)
    return a


def rot90(m: Any, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Any:
    """Rotates by 90 degrees ``k`` times in the plane of ``axes`` (first towards second).

    Example:
        >>> jnp.rot90(jnp.array([[1, 2], [3, 4]]))
        Array([[2, 4],
               [1, 3]], dtype=int32)
    """
    m = _arr("rot90", m)
    nd = core.get_aval(m).ndim
    ax = _static_ints("rot90", "axes", axes)
    if len(ax) != 2:
        raise ValueError(f"rot90: axes must contain exactly 2 entries, got {axes}")
    if nd < 2:
        raise ValueError(f"rot90: input must have at least 2 dimensions, got {nd}")
    a0, a1 = (canonicalize_axis("rot90", x, nd) for x in ax)
    if a0 == a1:
        raise ValueError(f"rot90: axes must be different, got {axes}")
    k = static_int("rot90", "k", k) % 4
    if k == 0:
        return m
    if k == 2:
        return lax.rev(m, (a0, a1))
    perm = list(range(nd))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return lax.transpose(lax.rev(m, (a1,)), tuple(perm))
    return lax.rev(lax.transpose(m, tuple(perm)), (a1,))


# ---------------------------------------------------------------- broadcasting


def broadcast_shapes(*shapes: Any) -> tuple[int, ...]:
    """The shape that arrays of the given shapes broadcast to.

    Example:
        >>> jnp.broadcast_shapes((2, 1), (3,))
        (2, 3)
    """
    norm = [(s,) if isinstance(s, (int, np.integer)) else tuple(s) for s in shapes]
    for s in norm:
        if any(d < 0 for d in _static_ints("broadcast_shapes", "shape", s)):  # (as JAX)
            raise TypeError(f"broadcast_shapes: negative dimensions are not allowed, got {s}")
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*norm))
    except ValueError:
        raise ValueError(f"broadcast_shapes: incompatible shapes for broadcasting: "
                         f"{', '.join(str(s) for s in norm)}") from None


def broadcast_to(array: Any, shape: Any) -> Any:
    """Broadcasts ``array`` to ``shape`` (NumPy rules).

    Example:
        >>> jnp.broadcast_to(jnp.ones(3), (2, 3)).shape
        (2, 3)
    """
    array = _arr("broadcast_to", array)
    aval = core.get_aval(array)
    target = _static_ints("broadcast_to", "shape", shape)
    if any(d < 0 for d in target):  # (a TypeError in JAX, from broadcast_in_dim)
        raise TypeError(f"broadcast_to: negative dimensions are not allowed, got {target}")
    nlead = len(target) - aval.ndim
    if nlead < 0 or any(s not in (1, t) for s, t in zip(aval.shape, target[nlead:])):
        raise ValueError(f"broadcast_to: incompatible shapes for broadcasting: {aval.shape} "
                         f"and requested shape {target}")
    return lax.broadcast_to_shape(array, target)


def broadcast_arrays(*args: Any) -> list[Any]:
    """Broadcasts the arguments against each other.

    Example:
        >>> [a.shape for a in jnp.broadcast_arrays(jnp.ones(3), jnp.ones((2, 1)))]
        [(2, 3), (2, 3)]
    """
    check_arraylike("broadcast_arrays", *args)
    arrays = [_util.ensure_array(a) for a in args]
    target = broadcast_shapes(*[core.get_aval(a).shape for a in arrays])
    return [broadcast_to(a, target) for a in arrays]


# ---------------------------------------------------------------- atleast_nd


def _atleast(fn: str, arys: tuple, nd: int, place) -> Any:
    out = []
    for a in arys:
        a = _arr(fn, a)
        av = core.get_aval(a)
        out.append(lax.reshape(a, place(av.shape)) if av.ndim < nd else a)
    return out[0] if len(out) == 1 else out


def atleast_1d(*arys: Any) -> Any:
    """Views inputs as arrays with at least one dimension.

    Example:
        >>> jnp.atleast_1d(1.0).shape
        (1,)
    """
    return _atleast("atleast_1d", arys, 1, lambda s: (1,))


def atleast_2d(*arys: Any) -> Any:
    """Views inputs as arrays with at least two dimensions (1-d arrays become rows).

    Example:
        >>> jnp.atleast_2d(jnp.ones(3)).shape
        (1, 3)
    """
    return _atleast("atleast_2d", arys, 2, lambda s: (1,) * (2 - len(s)) + s)


def atleast_3d(*arys: Any) -> Any:
    """Views inputs as arrays with at least three dimensions: (n,) -> (1, n, 1),
    (m, n) -> (m, n, 1).

    Example:
        >>> jnp.atleast_3d(jnp.ones(3)).shape
        (1, 3, 1)
    """
    def place(s):
        return {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}[len(s)]
    return _atleast("atleast_3d", arys, 3, place)


__all__ = [
    "shape", "ndim", "size", "reshape", "ravel", "transpose", "permute_dims",
    "matrix_transpose", "swapaxes", "moveaxis", "expand_dims", "squeeze", "concatenate",
    "concat", "stack", "hstack", "vstack", "row_stack", "dstack", "column_stack", "split",
    "array_split", "hsplit", "vsplit", "dsplit", "tile", "repeat", "resize", "flip", "fliplr",
    "flipud", "roll", "rot90", "broadcast_shapes", "broadcast_to", "broadcast_arrays",
    "atleast_1d", "atleast_2d", "atleast_3d", "rollaxis", "unstack",
]
