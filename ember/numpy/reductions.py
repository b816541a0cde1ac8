"""Reductions (sum, mean, var, max, argmax, quantile, the nan-variants, ...) and cumulative
functions with JAX's dtype rules: sums of bools/small ints give the default int, means of ints
give the default float, argmax gives the default int.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import dtypes, lax
from ember.lax.reduction import accumulation_dtype, max_identity, min_identity
from ember.numpy._eager_jit import jit_when_large
from ember.numpy._util import array_arg as _arg
from ember.numpy._util import canonicalize_axes, canonicalize_axis, check_arraylike, ensure_array

# ---------------------------------------------------------------- helpers


def _full(shape: tuple[int, ...], value: Any, dtype: np.dtype) -> Any:
    return lax.full(shape, value, dtype)


def _select(mask: Any, x: Any, fill: Any) -> Any:
    """``where(mask, x, fill)`` with a scalar ``fill`` and ``mask`` broadcast to ``x``."""
    shape = x.shape
    mask = lax.broadcast_to_shape(mask, shape)
    return lax.select(mask, x, _full(shape, fill, x.dtype))


def _isnan(x: Any) -> Any:
    return lax.ne(x, x)


def _where_mask(fn: str, where: Any, shape: tuple[int, ...]) -> Any:
    check_arraylike(fn, where)
    where = ensure_array(where)
    if where.dtype != dtypes.bool_:  # (JAX and NumPy refuse to cast it)
        raise ValueError(f"{fn}: where must be None or a boolean array, got dtype "
                         f"{where.dtype}")
    try:
        fits = np.broadcast_shapes(where.shape, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{fn}: where of shape {where.shape} cannot be broadcast to the "
                         f"operand's shape {shape}")
    return lax.broadcast_to_shape(where, shape)


def _keepdims(out: Any, shape: tuple[int, ...], axes: tuple[int, ...]) -> Any:
    new = tuple(1 if i in axes else d for i, d in enumerate(shape))
    return lax.reshape(out, new)


def _reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool):
    return tuple(1 if i in axes else d for i, d in enumerate(shape) if keepdims or i not in axes)


def _initial(fn: str, initial: Any, dt: np.dtype, weak_type: bool) -> Any:
    check_arraylike(fn, initial)
    if np.ndim(initial) != 0:
        raise ValueError(f"{fn}: initial value must be a scalar, got an array of shape "
                         f"{np.shape(initial)}")
    return lax.convert_element_type(initial, dt, weak_type)


def _check_out(fn: str, out: Any) -> None:
    if out is not None:
        raise NotImplementedError(f"{fn}: the 'out' argument is not supported (arrays are "
                                  "immutable)")


def _dtype_arg(dtype: Any) -> np.dtype | None:
    return None if dtype is None else dtypes.canonicalize_dtype(dtypes.dtype(dtype))


def _upcast_integers(dt: np.dtype) -> np.dtype:
    """JAX's promote_integers: bools and narrow ints widen to the default (u)int."""
    if dt == dtypes.bool_:
        return dtypes.default_int_dtype()
    if dtypes.is_unsigned(dt):
        return dt if dt.itemsize >= dtypes.default_uint_dtype().itemsize \
            else dtypes.default_uint_dtype()
    if dtypes.is_integer(dt):
        return dt if dt.itemsize >= dtypes.default_int_dtype().itemsize \
            else dtypes.default_int_dtype()
    return dt


def _convert(a: Any, dt: np.dtype) -> Any:
    # JAX's reductions end in convert_element_type(result, dtype): never weakly typed.
    return lax.convert_element_type(a, dt, False)


def _count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    return int(math.prod(shape[i] for i in axes))


# ---------------------------------------------------------------- sum / prod


def _sum_like(fn: str, lax_reduce, identity, a, axis, dtype, out, keepdims, initial, where,
              promote_integers, combine):
    _check_out(fn, out)
    a = _arg(fn, a)
    axes = canonicalize_axes(fn, axis, a.ndim)
    dt = _dtype_arg(dtype)
    if dt is None:
        dt = _upcast_integers(a.dtype) if promote_integers else (
            dtypes.default_int_dtype() if a.dtype == dtypes.bool_ else a.dtype)
    a = _convert(a, dt)
    if dt == dtypes.bool_:  # a sum of bools is an any, a product an all (as in JAX)
        lax_reduce, combine = ((lax.reduce_or, lax.bitwise_or) if identity == 0
                               else (lax.reduce_and, lax.bitwise_and))
    if where is not None:
        a = _select(_where_mask(fn, where, a.shape), a, identity)
    result = lax_reduce(a, axes)
    if initial is not None:
        result = combine(result, _initial(fn, initial, dt, result.weak_type))
    return _keepdims(result, a.shape, axes) if keepdims else result


def sum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
        initial: Any = None, where: Any = None, promote_integers: bool = True) -> Any:
    """Sum of array elements over the given axes.

    Bools and integers narrower than the default int are summed as the default int.

    Example:
        >>> jnp.sum(jnp.array([[1, 2], [3, 4]]), axis=0)
        Array([4, 6], dtype=int32)
    """
    return _sum_like("sum", lax.reduce_sum, 0, a, axis, dtype, out, keepdims, initial, where,
                     promote_integers, lax.add)


def prod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
         initial: Any = None, where: Any = None, promote_integers: bool = True) -> Any:
    """Product of array elements over the given axes.

    Example:
        >>> jnp.prod(jnp.array([1., 2., 3.]))
        Array(6., dtype=float32)
    """
    return _sum_like("prod", lax.reduce_prod, 1, a, axis, dtype, out, keepdims, initial, where,
                     promote_integers, lax.mul)


# ---------------------------------------------------------------- max / min


def _minmax(fn: str, lax_reduce, combine, identity_fn, a, axis, out, keepdims, initial, where):
    _check_out(fn, out)
    a = _arg(fn, a)
    axes = canonicalize_axes(fn, axis, a.ndim)
    if initial is None:
        if _count(a.shape, axes) == 0:
            raise ValueError(f"zero-size array to reduction operation {fn} which has no "
                             "identity")
        if where is not None:
            raise ValueError(f"reduction operation {fn} does not have an identity, so to use "
                             "a where mask one has to specify 'initial'")
    a = _convert(a, a.dtype)
    if where is not None:
        a = _select(_where_mask(fn, where, a.shape), a, identity_fn(a.dtype))
    result = lax_reduce(a, axes)
    if initial is not None:
        result = combine(result, _initial(fn, initial, a.dtype, result.weak_type))
    return _keepdims(result, a.shape, axes) if keepdims else result


def max(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False,
        initial: Any = None, where: Any = None) -> Any:
    """Maximum over the given axes (NaN propagates).

    Example:
        >>> jnp.max(jnp.array([1., 3., 2.]))
        Array(3., dtype=float32)
    """
    return _minmax("max", lax.reduce_max, lax.max, max_identity, a, axis, out, keepdims,
                   initial, where)


def min(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False,
        initial: Any = None, where: Any = None) -> Any:
    """Minimum over the given axes (NaN propagates).

    Example:
        >>> jnp.min(jnp.array([1., 3., 2.]))
        Array(1., dtype=float32)
    """
    return _minmax("min", lax.reduce_min, lax.min, min_identity, a, axis, out, keepdims,
                   initial, where)


amax = max
amin = min


def ptp(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """Range (maximum minus minimum) over the given axes.

    Example:
        >>> jnp.ptp(jnp.array([1., 5., 2.]))
        Array(4., dtype=float32)
    """
    if _arg("ptp", a).dtype == dtypes.bool_:
        raise TypeError("ptp does not accept dtype bool (maximum minus minimum needs a "
                        "numeric subtraction)")
    hi = max(a, axis=axis, out=out, keepdims=keepdims)
    lo = min(a, axis=axis, keepdims=keepdims)
    return lax.sub(hi, lo)


# ---------------------------------------------------------------- all / any


def _bool_reduce(fn: str, lax_reduce, identity, a, axis, out, keepdims, where):
    _check_out(fn, out)
    a = _arg(fn, a)
    axes = canonicalize_axes(fn, axis, a.ndim)
    if a.dtype != dtypes.bool_:
        a = lax.convert_element_type(a, dtypes.bool_)
    if where is not None:
        a = _select(_where_mask(fn, where, a.shape), a, identity)
    result = lax_reduce(a, axes)
    return _keepdims(result, a.shape, axes) if keepdims else result


def all(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, *,
        where: Any = None) -> Any:
    """True when every element over the given axes is nonzero.

    Example:
        >>> jnp.all(jnp.array([True, False]))
        Array(False, dtype=bool)
    """
    return _bool_reduce("all", lax.reduce_and, True, a, axis, out, keepdims, where)


def any(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, *,
        where: Any = None) -> Any:
    """True when some element over the given axes is nonzero.

    Example:
        >>> jnp.any(jnp.array([True, False]))
        Array(True, dtype=bool)
    """
    return _bool_reduce("any", lax.reduce_or, False, a, axis, out, keepdims, where)


def count_nonzero(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """Number of nonzero elements over the given axes (default int dtype).

    Example:
        >>> jnp.count_nonzero(jnp.array([0, 1, 2]))
        Array(2, dtype=int32)
    """
    a = _arg("count_nonzero", a)
    nz = lax.convert_element_type(a, dtypes.bool_) if a.dtype != dtypes.bool_ else a
    return sum(nz, axis=axis, dtype=dtypes.default_int_dtype(), keepdims=keepdims)


# ---------------------------------------------------------------- argmax / argmin


def _argminmax(fn: str, lax_fn, a, axis, out, keepdims):
    _check_out(fn, out)
    a = _arg(fn, a)
    shape = a.shape
    if axis is None:
        if a.size == 0:
            raise ValueError(f"attempt to get {fn} of an empty sequence")
        a = lax.reshape(a, (a.size,))
        result = lax_fn(a, 0, dtypes.default_int_dtype())
        return lax.reshape(result, (1,) * len(shape)) if keepdims else result
    if isinstance(axis, (tuple, list)):
        raise TypeError(f"{fn}: axis must be an integer or None, got {axis!r}")
    (ax,) = canonicalize_axes(fn, axis, a.ndim)
    if shape[ax] == 0:
        raise ValueError(f"attempt to get {fn} of an empty sequence (axis {ax} of shape "
                         f"{shape} has size 0)")
    result = lax_fn(a, ax, dtypes.default_int_dtype())
    return _keepdims(result, shape, (ax,)) if keepdims else result


def argmax(a: Any, axis: int | None = None, out: Any = None, keepdims: bool = False) -> Any:
    """Index of the maximum (first occurrence; NaN counts as the maximum), in the default
    integer dtype.

    Example:
        >>> jnp.argmax(jnp.array([1., 3., 2.]))
        Array(1, dtype=int32)
    """
    return _argminmax("argmax", lax.argmax, a, axis, out, keepdims)


def argmin(a: Any, axis: int | None = None, out: Any = None, keepdims: bool = False) -> Any:
    """Index of the minimum (first occurrence; NaN counts as the minimum), in the default
    integer dtype.

    Example:
        >>> jnp.argmin(jnp.array([1., 3., 0.]))
        Array(2, dtype=int32)
    """
    return _argminmax("argmin", lax.argmin, a, axis, out, keepdims)


def _nanargminmax(fn: str, plain, fill, a, axis, out, keepdims):
    a = _arg(fn, a)
    if not dtypes.is_inexact(a.dtype):
        return plain(a, axis=axis, out=out, keepdims=keepdims)
    nan = _isnan(a)
    idx = plain(_select(lax.bitwise_not(nan), a, fill), axis=axis, out=out, keepdims=keepdims)
    all_nan = all(nan, axis=axis, keepdims=keepdims)
    return lax.select(all_nan, _full(idx.shape, -1, idx.dtype), idx)


def nanargmax(a: Any, axis: int | None = None, out: Any = None, keepdims: bool = False) -> Any:
    """argmax ignoring NaNs; -1 where every element is NaN.

    Example:
        >>> jnp.nanargmax(jnp.array([1., jnp.nan, 2.]))
        Array(2, dtype=int32)
    """
    return _nanargminmax("nanargmax", argmax, -np.inf, a, axis, out, keepdims)


def nanargmin(a: Any, axis: int | None = None, out: Any = None, keepdims: bool = False) -> Any:
    """argmin ignoring NaNs; -1 where every element is NaN.

    Example:
        >>> jnp.nanargmin(jnp.array([1., jnp.nan, 0.]))
        Array(2, dtype=int32)
    """
    return _nanargminmax("nanargmin", argmin, np.inf, a, axis, out, keepdims)


# ---------------------------------------------------------------- mean / var / std


def _inexact_result_dtype(a: Any, dtype: Any) -> np.dtype:
    dt = _dtype_arg(dtype)
    if dt is not None:
        return dt
    return dtypes.to_inexact_dtype(a.dtype)


@jit_when_large('axis', 'dtype', 'out', 'keepdims')
def mean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
         *, where: Any = None) -> Any:
    """Arithmetic mean over the given axes (integers give the default float dtype).

    Example:
        >>> jnp.mean(jnp.array([1, 2, 3, 4]))
        Array(2.5, dtype=float32)
    """
    _check_out("mean", out)
    a = _arg("mean", a)
    axes = canonicalize_axes("mean", axis, a.ndim)
    res_dt = _inexact_result_dtype(a, dtype)
    comp = accumulation_dtype(res_dt)
    x = _convert(a, comp)
    if where is None:
        total = lax.reduce_sum(x, axes)
        result = lax.div(total, _full(total.shape, _count(a.shape, axes), total.dtype))
    else:
        mask = _where_mask("mean", where, a.shape)
        total = lax.reduce_sum(_select(mask, x, 0), axes)
        count = lax.reduce_sum(_convert(mask, comp), axes)
        result = lax.div(total, count)
    result = _convert(result, res_dt)
    return _keepdims(result, a.shape, axes) if keepdims else result


def _given_mean(fn: str, mean: Any, shape: tuple[int, ...], dt: np.dtype) -> Any:
    """A precomputed ``mean=`` of var/std: a scalar, or of a's rank and broadcastable to it
    (``keepdims=True``), as JAX requires."""
    check_arraylike(fn, mean)
    m = _convert(ensure_array(mean), dt)
    try:
        fits = m.ndim in (0, len(shape)) and np.broadcast_shapes(m.shape, shape) == shape
    except ValueError:
        fits = False
    if not fits:  # (a TypeError, as JAX's lax.sub raises)
        raise TypeError(f"{fn}: mean of shape {m.shape} must be a scalar or broadcast to the "
                        f"input's shape {shape} at its rank (compute it with keepdims=True)")
    return lax.broadcast_to_shape(m, shape)


def _var(fn: str, a, axis, dtype, out, ddof, keepdims, where, correction, nan: bool,
         mean: Any = None):
    _check_out(fn, out)
    if correction is not None:
        if ddof != 0:
            raise ValueError(f"{fn}: ddof and correction can't be provided simultaneously.")
        ddof = correction
    a = _arg(fn, a)
    axes = canonicalize_axes(fn, axis, a.ndim)
    out_dt = _dtype_arg(dtype)
    if (out_dt is not None and dtypes.is_complex(a.dtype)
            and not dtypes.is_complex(out_dt)):
        raise ValueError(f"{fn}: a real dtype ({out_dt}) for the variance of complex values "
                         "is not supported (as in JAX)")
    res_dt = _inexact_result_dtype(a, dtype)
    if dtypes.is_complex(res_dt):  # computed as a real variance (complex dtype: converted)
        res_dt = np.dtype(np.float32) if res_dt == dtypes.complex64 else np.dtype(np.float64)
    out_dt = res_dt if out_dt is None else out_dt
    comp = accumulation_dtype(res_dt) if not dtypes.is_complex(a.dtype) else a.dtype
    x = _convert(a, comp)
    mask = None if where is None else _where_mask(fn, where, a.shape)
    if nan and dtypes.is_inexact(x.dtype):
        notnan = lax.bitwise_not(_isnan(x))
        mask = notnan if mask is None else lax.bitwise_and(mask, notnan)
    if mask is None:
        count = _full((), _count(a.shape, axes), comp)
        total = lax.reduce_sum(x, axes)
    else:
        count = lax.reduce_sum(lax.convert_element_type(mask, comp), axes)
        total = lax.reduce_sum(_select(mask, x, 0), axes)
    count_b = lax.broadcast_to_shape(count, total.shape)
    if mean is None:
        mu = lax.div(total, count_b)
        keep = tuple(i for i in range(a.ndim) if i not in axes)
        centered = lax.sub(x, lax.broadcast_in_dim(mu, a.shape, keep))
    else:
        centered = lax.sub(x, _given_mean(fn, mean, a.shape, comp))
    if mask is not None:
        # Masked before squaring, so excluded entries (NaNs of nanvar) add nothing to the
        # value and nothing (not NaN) to its gradient.
        centered = _select(mask, centered, 0)
    if dtypes.is_complex(centered.dtype):
        sq = lax.real(lax.mul(centered, lax.conj(centered)))
        count_b = lax.real(count_b)
    else:
        sq = lax.mul(centered, centered)
    ss = lax.reduce_sum(sq, axes)
    denom = lax.sub(count_b, _full(count_b.shape, ddof, count_b.dtype))
    # As in JAX, NaN where the count less ddof is not positive (here by dividing by NaN, so
    # the tangent is NaN too); for var, an integer dtype's result is then promoted to a
    # (weakly typed) float by that NaN.
    positive = lax.gt(denom, _full(denom.shape, 0, denom.dtype))
    if dtypes.is_inexact(denom.dtype):
        denom = lax.select(positive, denom, _full(denom.shape, np.nan, denom.dtype))
    result = lax.div(ss, denom)
    if dtypes.is_inexact(result.dtype):
        result = _convert(result, out_dt)
    elif not nan:
        result = _convert(_convert(result, res_dt), dtypes.default_float_dtype())
        result = lax.select(positive, result, _full(result.shape, np.nan, result.dtype))
        result = lax.convert_element_type(result, result.dtype, True)
    else:
        result = _convert(result, res_dt)
    return _keepdims(result, a.shape, axes) if keepdims else result


@jit_when_large('axis', 'dtype', 'out', 'ddof', 'keepdims', 'correction')
def var(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
        keepdims: bool = False, *, where: Any = None, mean: Any = None,
        correction: int | None = None) -> Any:
    """Variance over the given axes; ``ddof``/``correction`` subtracts from the count.

    ``mean`` is a precomputed mean (a scalar, or computed with ``keepdims=True``).

    Example:
        >>> jnp.var(jnp.array([1., 2., 3., 4.]))
        Array(1.25, dtype=float32)
    """
    return _var("var", a, axis, dtype, out, ddof, keepdims, where, correction, nan=False,
                mean=mean)


@jit_when_large('axis', 'dtype', 'out', 'ddof', 'keepdims', 'correction')
def std(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
        keepdims: bool = False, *, where: Any = None, mean: Any = None,
        correction: int | None = None) -> Any:
    """Standard deviation over the given axes (square root of ``var``).

    Example:
        >>> jnp.std(jnp.array([1., 3.]))
        Array(1., dtype=float32)
    """
    _check_inexact_dtype("std", dtype)
    return lax.sqrt(_var("std", a, axis, dtype, out, ddof, keepdims, where, correction, False,
                         mean=mean))


def _check_inexact_dtype(fn: str, dtype: Any) -> None:
    dt = _dtype_arg(dtype)
    if dt is not None and not dtypes.is_inexact(dt):
        raise ValueError(f"dtype argument to jnp.{fn} must be inexact; got {dt}")


def nanvar(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
           keepdims: bool = False, where: Any = None, mean: Any = None) -> Any:
    """Variance ignoring NaNs (``mean``: a precomputed mean, as in ``var``).

    Example:
        >>> jnp.nanvar(jnp.array([1., jnp.nan, 3.]))
        Array(1., dtype=float32)
    """
    return _var("nanvar", a, axis, dtype, out, ddof, keepdims, where, None, nan=True,
                mean=mean)


def nanstd(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
           keepdims: bool = False, where: Any = None, mean: Any = None) -> Any:
    """Standard deviation ignoring NaNs.

    Example:
        >>> jnp.nanstd(jnp.array([1., jnp.nan, 3.]))
        Array(1., dtype=float32)
    """
    return lax.sqrt(_var("nanstd", a, axis, dtype, out, ddof, keepdims, where, None,
                         nan=True, mean=mean))


def _weights_like(fn: str, w: Any, shape: tuple[int, ...], axis: Any,
                  axes: tuple[int, ...]) -> Any:
    """Weights of a's ``shape``, or of the shape of the reduced ``axes`` (in their order),
    broadcast to ``shape`` (as JAX's average and quantile accept them)."""
    if w.shape == shape:
        return w
    if axis is None:
        raise ValueError(f"{fn}: axis must be specified when shapes of a {shape} and weights "
                         f"{w.shape} differ")
    reduced = tuple(shape[i] for i in axes)
    if w.shape != reduced:
        raise ValueError(f"{fn}: weights of shape {w.shape} must have the shape of a {shape} "
                         f"or of its reduced axes {reduced}")
    order = sorted(range(len(axes)), key=lambda i: axes[i])
    return lax.broadcast_in_dim(lax.transpose(w, tuple(order)), shape, tuple(sorted(axes)))


def average(a: Any, axis: Any = None, weights: Any = None, returned: bool = False,
            keepdims: bool = False) -> Any:
    """Weighted average over the given axes (``returned`` also gives the sum of weights).

    Example:
        >>> jnp.average(jnp.array([1., 2.]), weights=jnp.array([3., 1.]))
        Array(1.25, dtype=float32)
    """
    a = _arg("average", a)
    if weights is None:
        avg = mean(a, axis=axis, keepdims=keepdims)
        axes = canonicalize_axes("average", axis, a.ndim)
        count = _full(avg.shape, _count(a.shape, axes), avg.dtype)
        return (avg, count) if returned else avg
    w = _arg("average", weights)
    dt = dtypes.to_inexact_dtype(dtypes.result_type(a, w))
    a = lax.convert_element_type(a, dt)
    w = lax.convert_element_type(w, dt)
    axes = canonicalize_axes("average", axis, a.ndim)
    w = _weights_like("average", w, a.shape, axis, axes)
    wsum = lax.reduce_sum(w, axes)
    avg = lax.div(lax.reduce_sum(lax.mul(a, w), axes), wsum)
    if keepdims:
        avg, wsum = _keepdims(avg, a.shape, axes), _keepdims(wsum, a.shape, axes)
    return (avg, wsum) if returned else avg


# ---------------------------------------------------------------- nan-reductions


def _nan_to(a: Any, value: Any) -> Any:
    return _select(lax.bitwise_not(_isnan(a)), a, value) if dtypes.is_inexact(a.dtype) else a


def nansum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
           keepdims: bool = False, initial: Any = None, where: Any = None) -> Any:
    """Sum treating NaNs as zero.

    Example:
        >>> jnp.nansum(jnp.array([1., jnp.nan, 2.]))
        Array(3., dtype=float32)
    """
    a = _arg("nansum", a)
    return sum(_nan_to(a, 0), axis=axis, dtype=dtype, out=out, keepdims=keepdims,
               initial=initial, where=where)


def nanprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
            keepdims: bool = False, initial: Any = None, where: Any = None) -> Any:
    """Product treating NaNs as one.

    Example:
        >>> jnp.nanprod(jnp.array([2., jnp.nan, 3.]))
        Array(6., dtype=float32)
    """
    a = _arg("nanprod", a)
    return prod(_nan_to(a, 1), axis=axis, dtype=dtype, out=out, keepdims=keepdims,
                initial=initial, where=where)


def _nanminmax(fn: str, plain, fill, a, axis, out, keepdims, initial, where):
    a = _arg(fn, a)
    if not dtypes.is_inexact(a.dtype):
        return plain(a, axis=axis, out=out, keepdims=keepdims, initial=initial, where=where)
    nan = _isnan(a)
    result = plain(_select(lax.bitwise_not(nan), a, fill), axis=axis, out=out, keepdims=keepdims,
                   initial=initial, where=where)
    if initial is not None:
        return result
    notnan = lax.bitwise_not(nan)
    if where is not None:
        notnan = lax.bitwise_and(notnan, _where_mask(fn, where, a.shape))
    some = any(notnan, axis=axis, keepdims=keepdims)
    return lax.select(some, result, _full(result.shape, np.nan, result.dtype))


def nanmax(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False,
           initial: Any = None, where: Any = None) -> Any:
    """Maximum ignoring NaNs (NaN where every element is NaN).

    Example:
        >>> jnp.nanmax(jnp.array([1., jnp.nan, 2.]))
        Array(2., dtype=float32)
    """
    return _nanminmax("nanmax", max, -np.inf, a, axis, out, keepdims, initial, where)


def nanmin(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False,
           initial: Any = None, where: Any = None) -> Any:
    """Minimum ignoring NaNs (NaN where every element is NaN).

    Example:
        >>> jnp.nanmin(jnp.array([1., jnp.nan, 2.]))
        Array(1., dtype=float32)
    """
    return _nanminmax("nanmin", min, np.inf, a, axis, out, keepdims, initial, where)


def nanmean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
            keepdims: bool = False, where: Any = None) -> Any:
    """Mean ignoring NaNs (NaN where every element is NaN).

    Example:
        >>> jnp.nanmean(jnp.array([1., jnp.nan, 3.]))
        Array(2., dtype=float32)
    """
    _check_out("nanmean", out)
    a = _arg("nanmean", a)
    if not dtypes.is_inexact(a.dtype):
        return mean(a, axis=axis, dtype=dtype, keepdims=keepdims, where=where)
    mask = lax.bitwise_not(_isnan(a))
    if where is not None:
        mask = lax.bitwise_and(mask, _where_mask("nanmean", where, a.shape))
    return mean(a, axis=axis, dtype=dtype, keepdims=keepdims, where=mask)


# ---------------------------------------------------------------- cumulative


def _cumulative(fn: str, lax_fn, a, axis, dtype, out=None, nan_fill=None,
                promote_integers=False):
    # Like JAX, cumsum/cumprod keep narrow int dtypes (int8 wraps); only bools widen, and
    # cumulative_sum (promote_integers) widens like sum.
    _check_out(fn, out)
    a = _arg(fn, a)
    if axis is None or a.ndim == 0:  # JAX flattens scalars too, then checks the axis
        a = lax.reshape(a, (a.size,))
        axis = 0 if axis is None else axis
    ax = canonicalize_axis(fn, axis, a.ndim)  # one axis: a tuple is a TypeError, as in JAX
    dt = _dtype_arg(dtype)
    if dt is None:
        dt = _upcast_integers(a.dtype) if promote_integers or a.dtype == dtypes.bool_ \
            else a.dtype
    elif dt == dtypes.bool_ and a.dtype != dtypes.bool_:
        a = lax.ne(a, _full(a.shape, 0, a.dtype))
    a = _convert(a, dt)
    if nan_fill is not None:
        a = _nan_to(a, nan_fill)
    if a.dtype == dtypes.bool_:
        a = lax.convert_element_type(a, dtypes.default_int_dtype())
        return lax.convert_element_type(lax_fn(a, ax), dtypes.bool_)
    return lax_fn(a, ax)


def cumsum(a: Any, axis: int | None = None, dtype: Any = None, out: Any = None) -> Any:
    """Cumulative sum along ``axis`` (flattened when None).

    Example:
        >>> jnp.cumsum(jnp.array([1, 2, 3]))
        Array([1, 3, 6], dtype=int32)
    """
    return _cumulative("cumsum", lax.cumsum, a, axis, dtype, out)


def cumprod(a: Any, axis: int | None = None, dtype: Any = None, out: Any = None) -> Any:
    """Cumulative product along ``axis`` (flattened when None).

    Example:
        >>> jnp.cumprod(jnp.array([1, 2, 3]))
        Array([1, 2, 6], dtype=int32)
    """
    return _cumulative("cumprod", lax.cumprod, a, axis, dtype, out)


def nancumsum(a: Any, axis: int | None = None, dtype: Any = None, out: Any = None) -> Any:
    """Cumulative sum treating NaNs as zero.

    Example:
        >>> jnp.nancumsum(jnp.array([1., jnp.nan, 2.]))
        Array([1., 1., 3.], dtype=float32)
    """
    return _cumulative("nancumsum", lax.cumsum, a, axis, dtype, out, nan_fill=0)


def nancumprod(a: Any, axis: int | None = None, dtype: Any = None, out: Any = None) -> Any:
    """Cumulative product treating NaNs as one.

    Example:
        >>> jnp.nancumprod(jnp.array([2., jnp.nan, 3.]))
        Array([2., 2., 6.], dtype=float32)
    """
    return _cumulative("nancumprod", lax.cumprod, a, axis, dtype, out, nan_fill=1)


def _cumulative_include(fn: str, lax_fn, x, axis, dtype, include_initial, identity):
    x = _arg(fn, x)
    if axis is None:
        if x.ndim > 1:
            raise ValueError(f"{fn}: the input array has {x.ndim} dimensions; axis must be "
                             "specified for arrays with more than one dimension")
        axis = 0
    if x.ndim == 0:
        raise ValueError(f"{fn}: the input array must have at least one dimension")
    out = _cumulative(fn, lax_fn, x, axis, dtype, promote_integers=fn == "cumulative_sum")
    if include_initial:
        (ax,) = canonicalize_axes(fn, axis, x.ndim)
        cfg = [(0, 0, 0)] * out.ndim
        cfg[ax] = (1, 0, 0)
        out = lax.pad(out, _full((), identity, out.dtype), cfg)
    return out


def cumulative_sum(x: Any, /, *, axis: int | None = None, dtype: Any = None,
                   include_initial: bool = False) -> Any:
    """Array-API cumulative sum (``include_initial`` prepends a zero).

    Example:
        >>> jnp.cumulative_sum(jnp.array([1, 2]), include_initial=True)
        Array([0, 1, 3], dtype=int32)
    """
    return _cumulative_include("cumulative_sum", lax.cumsum, x, axis, dtype, include_initial, 0)


def cumulative_prod(x: Any, /, *, axis: int | None = None, dtype: Any = None,
                    include_initial: bool = False) -> Any:
    """Array-API cumulative product (``include_initial`` prepends a one).

    Example:
        >>> jnp.cumulative_prod(jnp.array([2, 3]))
        Array([2, 6], dtype=int32)
    """
    return _cumulative_include("cumulative_prod", lax.cumprod, x, axis, dtype, include_initial,
                               1)


# ---------------------------------------------------------------- quantiles


_METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf")


def _quantile(fn: str, a, q, axis, method, keepdims, scale: float, nan: bool = False,
              weights: Any = None):
    a = _arg(fn, a)
    check_arraylike(fn, q)
    if method not in _METHODS:
        raise ValueError(f"{fn}: method must be one of {_METHODS}, got {method!r}")
    w = None if weights is None else _arg(fn, weights)
    if w is not None and dtypes.is_complex(w.dtype):
        raise ValueError(f"{fn}: weights cannot be complex, got dtype {w.dtype}")
    if dtypes.is_complex(a.dtype):
        raise ValueError(f"{fn} does not support complex input (complex numbers have no "
                         "order)")
    q = ensure_array(q)
    if q.ndim > 1:
        raise ValueError(f"{fn}: q must have rank <= 1, got shape {q.shape}")
    # As in JAX: the result has a's dtype (promoted with the weights') made inexact; the
    # computation runs in the wider of that and q's (inexact) dtype. q is not range-checked
    # (it cannot be under jit): positions outside the data clamp to its ends, as in JAX.
    out_dt = dtypes.to_inexact_dtype(a.dtype if w is None else dtypes.result_type(a, w))
    dt = dtypes.promote_types(out_dt, dtypes.to_inexact_dtype(q.dtype))
    a = lax.convert_element_type(a, dt, False)
    q = lax.convert_element_type(q, dt, False)
    if scale != 1:
        q = lax.div(q, _full(q.shape, scale, dt))
    shape = a.shape
    axes = canonicalize_axes(fn, axis, a.ndim)
    if w is not None:
        if method != "inverted_cdf":
            raise NotImplementedError(f"{fn}: method {method!r} does not support weights; "
                                      "only 'inverted_cdf' does")
        w = _weights_like(fn, lax.convert_element_type(w, dt, False), shape, axis, axes)
    keep = [i for i in range(a.ndim) if i not in axes]
    batch = tuple(shape[i] for i in keep)
    n = _count(shape, axes)
    nb = int(np.prod(batch, dtype=np.int64))
    x = lax.reshape(a, (nb, n), dimensions=tuple(keep) + axes)
    out_shape = tuple(q.shape) + (_reduced_shape(shape, axes, True) if keepdims else batch)
    if n == 0 or nb == 0:  # (no data: NaN; no batch: an empty result)
        return _full(out_shape, np.nan, out_dt)
    isnan = _isnan(x)
    any_nan = lax.reduce_or(isnan, (1,))
    cnt = lax.reduce_sum(lax.convert_element_type(lax.bitwise_not(isnan), dt), (1,))
    if w is None:
        x = lax.sort(x, dimension=1)
    else:
        x, w = lax.sort((x, lax.reshape(w, (nb, n), dimensions=tuple(keep) + axes)),
                        dimension=1, num_keys=1)
    nq = q.size
    qf = lax.reshape(q, (nq,))
    big = (nq, nb, n)
    # The index of the last usable element: sorted NaNs are at the end (ignored by nan*).
    last = lax.sub(cnt, _full((nb,), 1, dt)) if nan else _full((nb,), n - 1, dt)
    last = lax.broadcast_in_dim(last, (nq, nb), (1,))
    x_flat = lax.reshape(x, (nb * n,))
    row_start = lax.mul(lax.broadcasted_iota(dtypes.int32, (nq, nb), 1),
                        _full((nq, nb), n, dtypes.int32))

    def clamp(idx):
        return lax.clamp(_full(idx.shape, 0, dt), idx, lax.max(last, _full(idx.shape, 0, dt)))

    def take(idx):  # x[b, idx[j, b]] for every (j, b)
        flat = lax.add(row_start, lax.convert_element_type(idx, dtypes.int32))
        return lax.gather(x_flat, lax.reshape(flat, (nq, nb, 1)),
                          lax.GatherDimensionNumbers((), (0,), (0,)), (1,))

    if nan:
        bad = lax.eq(cnt, _full((nb,), 0, dt))
    else:
        bad = any_nan
    if method == "inverted_cdf":
        # The first element whose cumulative weight reaches q times the total weight.
        if w is None:
            w = _full((nb, n), 1, dt)
        bad_w = lax.bitwise_or(lax.lt(w, _full(w.shape, 0, dt)), _isnan(w))
        w = _select(lax.bitwise_not(lax.bitwise_or(bad_w, _isnan(x))), w, 0)
        cum = lax.cumsum(w, axis=1)
        total = lax.reshape(lax.slice_in_dim(cum, n - 1, n, axis=1), (nb,))
        target = lax.mul(lax.broadcast_in_dim(qf, (nq, nb), (0,)),
                         lax.broadcast_in_dim(total, (nq, nb), (1,)))
        below = lax.lt(lax.broadcast_in_dim(cum, big, (1, 2)),
                       lax.broadcast_in_dim(target, big, (0, 1)))
        res = take(clamp(lax.reduce_sum(lax.convert_element_type(below, dt), (2,))))
        bad = lax.bitwise_or(bad, lax.reduce_or(bad_w, (1,)))
    else:
        pos = lax.mul(lax.broadcast_in_dim(qf, (nq, nb), (0,)), last)
        lo, hi = lax.floor(pos), lax.ceil(pos)
        t = lax.sub(pos, lo)
        lo, hi = clamp(lo), clamp(hi)
        if method == "lower":
            res = take(lo)
        elif method == "higher":
            res = take(hi)
        elif method == "nearest":  # (a tie takes the lower neighbour, as in JAX; NumPy's even)
            res = take(lax.select(lax.le(t, _full(t.shape, 0.5, dt)), lo, hi))
        else:
            vlo, vhi = take(lo), take(hi)
            if method == "midpoint":
                res = lax.mul(lax.add(vlo, vhi), _full(vlo.shape, 0.5, dt))
            else:  # JAX's weighting (so ties share the gradient as in JAX)...
                one = _full(t.shape, 1, dt)
                res = lax.add(lax.mul(vlo, lax.sub(one, t)), lax.mul(vhi, t))
                # ...but one element is taken exactly (no inf * 0 = NaN at q = 0 or 1).
                res = lax.select(lax.eq(lo, hi), vlo, res)
    bad = lax.broadcast_in_dim(bad, (nq, nb), (1,))
    res = lax.select(bad, _full(res.shape, np.nan, dt), res)
    return lax.convert_element_type(lax.reshape(res, out_shape), out_dt, False)


def _check_quantile_args(fn: str, out: Any, overwrite_input: Any) -> None:
    if out is not None or overwrite_input:
        raise ValueError(f"{fn} does not support overwrite_input=True or out != None "
                         "(arrays are immutable)")


def quantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False, *, weights: Any = None) -> Any:
    """The ``q``-th quantile(s) over the given axes (q in [0, 1]); q's shape leads the result.

    ``method`` is "linear", "lower", "higher", "midpoint", "nearest" or "inverted_cdf"; only
    the last accepts ``weights`` (of a's shape, or the shape of the reduced axes).

    Example:
        >>> jnp.quantile(jnp.array([1., 2., 3., 4.]), 0.5)
        Array(2.5, dtype=float32)
    """
    _check_quantile_args("quantile", out, overwrite_input)
    return _quantile("quantile", a, q, axis, method, keepdims, 1.0, weights=weights)


def percentile(a: Any, q: Any, axis: Any = None, out: Any = None,
               overwrite_input: bool = False, method: str = "linear", keepdims: bool = False,
               *, weights: Any = None) -> Any:
    """The ``q``-th percentile(s) over the given axes (q in [0, 100]); see ``quantile``.

    Example:
        >>> jnp.percentile(jnp.array([1., 2., 3., 4.]), 50)
        Array(2.5, dtype=float32)
    """
    _check_quantile_args("percentile", out, overwrite_input)
    return _quantile("percentile", a, q, axis, method, keepdims, 100.0, weights=weights)


def median(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
           keepdims: bool = False) -> Any:
    """Median over the given axes (NaN if any element is NaN).

    Example:
        >>> jnp.median(jnp.array([3., 1., 2.]))
        Array(2., dtype=float32)
    """
    _check_quantile_args("median", out, overwrite_input)
    return _quantile("median", a, 0.5, axis, "midpoint", keepdims, 1.0)


def nanquantile(a: Any, q: Any, axis: Any = None, out: Any = None,
                overwrite_input: bool = False, method: str = "linear",
                keepdims: bool = False, *, weights: Any = None) -> Any:
    """quantile ignoring NaNs.

    Example:
        >>> jnp.nanquantile(jnp.array([1., jnp.nan, 3.]), 0.5)
        Array(2., dtype=float32)
    """
    _check_quantile_args("nanquantile", out, overwrite_input)
    return _quantile("nanquantile", a, q, axis, method, keepdims, 1.0, nan=True,
                     weights=weights)


def nanpercentile(a: Any, q: Any, axis: Any = None, out: Any = None,
                  overwrite_input: bool = False, method: str = "linear",
                  keepdims: bool = False, *, weights: Any = None) -> Any:
    """percentile ignoring NaNs.

    Example:
        >>> jnp.nanpercentile(jnp.array([1., jnp.nan, 3.]), 50)
        Array(2., dtype=float32)
    """
    _check_quantile_args("nanpercentile", out, overwrite_input)
    return _quantile("nanpercentile", a, q, axis, method, keepdims, 100.0, nan=True,
                     weights=weights)


def nanmedian(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
              keepdims: bool = False) -> Any:
    """Median ignoring NaNs.

    Example:
        >>> jnp.nanmedian(jnp.array([1., jnp.nan, 3.]))
        Array(2., dtype=float32)
    """
    _check_quantile_args("nanmedian", out, overwrite_input)
    return _quantile("nanmedian", a, 0.5, axis, "midpoint", keepdims, 1.0, nan=True)


__all__ = [
    "sum", "prod", "max", "min", "amax", "amin", "ptp", "all", "any", "count_nonzero",
    "argmax", "argmin", "nanargmax", "nanargmin", "mean", "var", "std", "nanvar", "nanstd",
    "average", "nansum", "nanprod", "nanmax", "nanmin", "nanmean", "cumsum", "cumprod",
    "nancumsum", "nancumprod", "cumulative_sum", "cumulative_prod", "quantile", "percentile",
    "median", "nanquantile", "nanpercentile", "nanmedian",
]
