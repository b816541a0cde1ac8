"""Miscellaneous numpy functions: astype, isclose/allclose, array_equal, nan_to_num, diff, ..."""

from __future__ import annotations

import operator
import warnings
from typing import Any

import numpy as np

from ember import core, dtypes, lax
from ember.numpy._eager_jit import jit_when_large
from ember.numpy._util import (
    canonicalize_axis,
    check_arraylike,
    ensure_array,
    promote_args,
    promote_args_inexact,
    promote_dtypes,
)
from ember.numpy.creation import asarray
from ember.numpy.shape import concatenate
from ember.numpy.ufuncs import imag

# ---------------------------------------------------------------- helpers


def _aval(x: Any) -> core.ShapedArray:
    return core.get_aval(x)


def _ravel(x: Any) -> Any:
    return lax.reshape(x, (_aval(x).size,))


def _isnan(x: Any) -> Any:
    return lax.ne(x, x)


def _isinf(x: Any) -> Any:
    return lax.eq(lax.abs(x), lax.full_like(x, np.inf))


_and, _or, _not = lax.bitwise_and, lax.bitwise_or, lax.bitwise_not


def _all(x: Any) -> Any:
    # A jnp reduction: never weakly typed (JAX).
    out = lax.reduce_and(x, tuple(range(_aval(x).ndim)))
    return lax.convert_element_type(out, dtypes.bool_, False)


def _false() -> Any:
    return core.concrete_array(np.array(False), core.ShapedArray((), dtypes.bool_))


def _diff1(x: Any, axis: int) -> Any:
    """First difference along ``axis`` (``!=`` of neighbours for booleans)."""
    n = _aval(x).shape[axis]
    hi, lo = lax.slice_in_dim(x, 1, n, axis=axis), lax.slice_in_dim(x, 0, n - 1, axis=axis)
    return lax.ne(hi, lo) if _aval(x).dtype == dtypes.bool_ else lax.sub(hi, lo)


# ---------------------------------------------------------------- iscomplex / isreal


def iscomplex(x: Any) -> Any:
    """Elementwise: True where the imaginary part is nonzero (always False for real dtypes).

    Example:
        >>> jnp.iscomplex(jnp.array([1 + 1j, 2 + 0j]))
        Array([ True, False], dtype=bool)
    """
    return _compare_imag_to_zero("iscomplex", lax.ne, x)


def isreal(x: Any) -> Any:
    """Elementwise: True where the imaginary part is zero (always True for real dtypes).

    Example:
        >>> jnp.isreal(jnp.array([1 + 1j, 2 + 0j]))
        Array([False,  True], dtype=bool)
    """
    return _compare_imag_to_zero("isreal", lax.eq, x)


def _compare_imag_to_zero(fn: str, compare: Any, x: Any) -> Any:
    check_arraylike(fn, x)
    i = imag(x)
    return compare(i, lax.full_like(i, 0))


# ---------------------------------------------------------------- astype


def astype(x: Any, dtype: Any, /, *, copy: bool = False, device: Any = None) -> Any:
    """Casts ``x`` to ``dtype`` (float to int truncates toward zero, NaN becomes 0).

    Example:
        >>> jnp.astype(jnp.array([1.7, -1.7]), jnp.int32)
        Array([ 1, -1], dtype=int32)
    """
    check_arraylike("astype", x)
    if device is not None and getattr(device, "platform", None) != "cpu":
        raise ValueError(f"astype: unsupported device {device!r}; use ember.devices()[0]")
    if dtype is None:  # (NumPy's dtype(None): the default float, as in JAX)
        dt = dtypes.default_float_dtype()
    else:
        try:
            dt = dtypes.canonicalize_dtype(dtypes.dtype(dtype))
        except (TypeError, ValueError) as e:
            raise TypeError(f"astype: invalid dtype {dtype!r}: {e}") from None
    x = ensure_array(x)
    if dtypes.is_complex(x.dtype) and not dtypes.is_complex(dt) and dt != dtypes.bool_:
        warnings.warn("Casting from complex to real dtypes will soon raise a ValueError. Please "
                      "first use jnp.real or jnp.imag to take the real/imaginary component of "
                      "your input.", DeprecationWarning, stacklevel=2)
    return lax.convert_element_type(x, dt)


# ---------------------------------------------------------------- comparisons


@jit_when_large('equal_nan')
def isclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08,
            equal_nan: bool = False) -> Any:
    """Elementwise ``a == b or |a - b| <= atol + rtol * |b|`` (the latter for finite b).

    As in JAX, integer and boolean inputs are compared as floats (so the tolerances apply),
    and complex inputs by the modulus of the difference.

    Example:
        >>> jnp.isclose(jnp.array([1.0, jnp.nan]), jnp.array([1.0 + 1e-7, jnp.nan]))
        Array([ True, False], dtype=bool)
    """
    a, b = promote_args("isclose", a, b)
    a, b = promote_args_inexact("isclose", a, b)
    dt = _aval(a).dtype
    rdt = np.dtype(np.float32) if dt == dtypes.complex64 else \
        np.dtype(np.float64) if dt == dtypes.complex128 else dt
    rtol = lax.convert_element_type(rtol, rdt)
    atol = lax.convert_element_type(atol, rdt)
    b_finite = lax.is_finite(b) if rdt == dt else _and(lax.is_finite(lax.real(b)),
                                                          lax.is_finite(lax.imag(b)))
    in_range = lax.le(lax.abs(lax.sub(a, b)), lax.add(atol, lax.mul(rtol, lax.abs(b))))
    out = _or(lax.eq(a, b), _and(b_finite, in_range))
    if equal_nan:
        out = _or(out, _and(_isnan(a), _isnan(b)))
    return out


@jit_when_large('equal_nan')
def allclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08,
             equal_nan: bool = False) -> Any:
    """True when every element pair is close (see ``isclose``).

    Example:
        >>> jnp.allclose(jnp.ones(3), jnp.ones(3) + 1e-9)
        Array(True, dtype=bool)
    """
    return _all(isclose(a, b, rtol, atol, equal_nan))


def _asarray_or_none(x: Any) -> Any:
    try:
        return asarray(x)
    except (TypeError, ValueError):
        return None


def array_equal(a1: Any, a2: Any, equal_nan: bool = False) -> Any:
    """True when the arrays have the same shape and elements (NaNs equal with equal_nan).

    Example:
        >>> jnp.array_equal(jnp.arange(3), jnp.arange(3))
        Array(True, dtype=bool)
    """
    a1, a2 = _asarray_or_none(a1), _asarray_or_none(a2)
    if a1 is None or a2 is None or _aval(a1).shape != _aval(a2).shape:
        return _false()
    a1, a2 = promote_dtypes(a1, a2)
    eq = lax.eq(a1, a2)
    if equal_nan and dtypes.is_inexact(_aval(a1).dtype):
        eq = _or(eq, _and(_isnan(a1), _isnan(a2)))
    return _all(eq)


def array_equiv(a1: Any, a2: Any) -> Any:
    """True when the arrays are broadcast-compatible and equal elementwise.

    Example:
        >>> jnp.array_equiv(jnp.ones((2, 3)), jnp.ones(3))
        Array(True, dtype=bool)
    """
    a1, a2 = _asarray_or_none(a1), _asarray_or_none(a2)
    if a1 is None or a2 is None:
        return _false()
    try:
        np.broadcast_shapes(_aval(a1).shape, _aval(a2).shape)
    except ValueError:
        return _false()
    a1, a2 = promote_args("array_equiv", a1, a2)
    return _all(lax.eq(a1, a2))


# ---------------------------------------------------------------- nan_to_num


def nan_to_num(x: Any, copy: bool = True, nan: Any = 0.0, posinf: Any = None,
               neginf: Any = None) -> Any:
    """Replaces NaN by ``nan`` and infinities by ``posinf``/``neginf`` (default: dtype limits).

    Example:
        >>> jnp.nan_to_num(jnp.array([jnp.nan, jnp.inf]))
        Array([0.0000000e+00, 3.4028235e+38], dtype=float32)
    """
    check_arraylike("nan_to_num", x)
    x = ensure_array(x)
    dt = _aval(x).dtype
    if not dtypes.is_inexact(dt):
        return x
    if dtypes.is_complex(dt):
        re = nan_to_num(lax.real(x), nan=nan, posinf=posinf, neginf=neginf)
        im = nan_to_num(lax.imag(x), nan=nan, posinf=posinf, neginf=neginf)
        return lax.complex(re, im)
    info = dtypes.finfo(dt)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    shape = _aval(x).shape

    def fill(value):  # a strong value of x's dtype, as JAX's asarray(value, dtype=dt)
        check_arraylike("nan_to_num", value)
        value = lax.convert_element_type(ensure_array(value), dt, False)
        return lax.broadcast_to_shape(value, shape)

    # The result is strongly typed even for a weak x (JAX selects against strong constants).
    x = lax.convert_element_type(x, dt, False)
    out = lax.select_n(_isnan(x), x, fill(nan))
    out = lax.select_n(lax.eq(out, lax.full_like(x, np.inf)), out, fill(posinf))
    out = lax.select_n(lax.eq(out, lax.full_like(x, -np.inf)), out, fill(neginf))
    return out


# ---------------------------------------------------------------- differences


def _edge(fn: str, value: Any, arr: Any, axis: int) -> Any:
    check_arraylike(fn, value)
    value = ensure_array(value)
    if _aval(value).ndim == 0:
        shape = list(_aval(arr).shape)
        shape[axis] = 1
        value = lax.broadcast_to_shape(value, tuple(shape))
    return value


def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None) -> Any:
    """The n-th discrete difference along ``axis`` (booleans: ``!=`` of neighbours).

    Example:
        >>> jnp.diff(jnp.array([1, 4, 9]))
        Array([3, 5], dtype=int32)
    """
    check_arraylike("diff", a)
    arr = ensure_array(a)
    n = core.concrete_or_error(n, "diff: the 'n' argument must be a concrete integer")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"diff: order n must be an integer, got {n!r}") from None
    if n < 0:
        raise ValueError(f"diff: order n must be non-negative but got {n}")
    if _aval(arr).ndim == 0:
        raise ValueError(f"diff: input must be at least one-dimensional, got shape "
                         f"{_aval(arr).shape}")
    axis = canonicalize_axis("diff", axis, _aval(arr).ndim)
    if n == 0:
        return arr
    parts = []
    if prepend is not None:
        parts.append(_edge("diff", prepend, arr, axis))
    parts.append(arr)
    if append is not None:
        parts.append(_edge("diff", append, arr, axis))
    if len(parts) > 1:
        arr = concatenate(parts, axis=axis)
    for _ in range(n):
        if _aval(arr).shape[axis] == 0:
            break
        arr = _diff1(arr, axis)
    return arr


def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Any:
    """Differences of consecutive elements of the flattened array, with optional ends.

    Example:
        >>> jnp.ediff1d(jnp.array([1, 2, 4]), to_begin=0)
        Array([0, 1, 2], dtype=int32)
    """
    check_arraylike("ediff1d", ary)
    arr = _ravel(ensure_array(ary))
    dt = _aval(arr).dtype
    if dt == dtypes.bool_:  # (JAX and NumPy: booleans have no subtraction)
        raise TypeError("ediff1d: boolean input is not supported (booleans cannot be "
                        "subtracted; use jnp.diff for != of neighbours)")
    result = _diff1(arr, 0) if _aval(arr).size else arr
    parts = [result]
    if to_begin is not None:
        check_arraylike("ediff1d", to_begin)
        parts.insert(0, lax.convert_element_type(_ravel(ensure_array(to_begin)), dt))
    if to_end is not None:
        check_arraylike("ediff1d", to_end)
        parts.append(lax.convert_element_type(_ravel(ensure_array(to_end)), dt))
    return concatenate(parts, axis=0) if len(parts) > 1 else result


def append(arr: Any, values: Any, axis: int | None = None) -> Any:
    """Appends ``values`` to ``arr`` (flattening both when ``axis`` is None).

    Example:
        >>> jnp.append(jnp.array([1, 2]), 3)
        Array([1, 2, 3], dtype=int32)
    """
    check_arraylike("append", arr, values)
    arr, values = ensure_array(arr), ensure_array(values)
    if axis is None:
        return concatenate([_ravel(arr), _ravel(values)], axis=0)
    return concatenate([arr, values], axis=axis)


__all__ = ["astype", "isclose", "allclose", "array_equal", "array_equiv", "nan_to_num", "diff",
           "ediff1d", "append", "iscomplex", "isreal"]
