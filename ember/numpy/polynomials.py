"""Polynomials and 1-D convolution: poly*, polyval, vander, trim_zeros, convolve, correlate.

Coefficients are ordered from the highest power down, as in NumPy. Everything is composed of
``ember.numpy`` and ``lax`` operations, so it traces, jits, vmaps and differentiates; the
arguments that decide output shapes (``mode``, ``m``, ``N``, ``unroll``) must be concrete.
``trim_zeros`` and the ``trim_leading_zeros=True`` options of ``polymul``/``polydiv`` have an
output length that depends on the values: as in JAX they work eagerly only (a
``ConcretizationTypeError`` under ``jit``/``vmap``), as does ``roots`` with its default
``strip_zeros=True``. ``roots`` and ``polyfit`` use ``ember.numpy.linalg`` (eigenvalues of the
companion matrix, least squares on the Vandermonde matrix).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import core, dtypes, lax
from ember.lax.dot import canonicalize_precision
from ember.numpy._util import array_arg as _arg
from ember.numpy._util import (
    broadcast_shapes,
    canonicalize_axes,
    check_arraylike,
    concrete_index,
    ensure_array,
    promote_dtypes,
    promote_dtypes_inexact,
)
from ember.numpy.ufuncs import add, conj, multiply, negative, power, true_divide

# ---------------------------------------------------------------- helpers


class _MissingAxisError(ValueError, IndexError):
    """Bad input where JAX indexes an axis that is not there (an IndexError in JAX)."""


_MODES = ("full", "same", "valid")
_LOW_FLOATS = (np.dtype(np.float16), np.dtype(dtypes.bfloat16))


def _length(fn: str, name: str, x: Any) -> int:
    """len(x) for polynomial coefficients (a 0-d argument is a TypeError, as in JAX)."""
    if x.ndim == 0:
        raise TypeError(f"{fn}: {name} must be an array of coefficients (at least 1-D), got "
                        f"a scalar")
    return x.shape[0]


def _check_1d(fn: str, name: str, x: Any) -> None:
    _length(fn, name, x)
    if x.ndim != 1:
        raise ValueError(f"{fn}: {name} must be a 1-D array of coefficients, got shape "
                         f"{x.shape}")


def _no_bool(fn: str, x: Any) -> None:
    if x.dtype == dtypes.bool_:
        raise TypeError(f"{fn} does not accept boolean coefficients (dtype bool)")


def _const(values: np.ndarray, dt: np.dtype) -> Any:
    """Exact float64 coefficients as a (non-weak) constant of dtype ``dt``."""
    return ensure_array(np.asarray(values).astype(dt))


def _broadcasts(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether ``shape`` broadcasts to exactly ``target``."""
    try:
        return broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        return False


def _zeros(shape: tuple[int, ...], dt: np.dtype) -> Any:
    return lax.full(shape, 0, dt)


def _leading(x: Any, stop: int) -> Any:
    """x[:stop] along axis 0."""
    return lax.slice_in_dim(x, 0, stop, axis=0)


# ---------------------------------------------------------------- convolve / correlate


def _preferred(fn: str, pet: Any, in_dt: np.dtype) -> np.dtype:
    """Checks preferred_element_type against the (promoted) input dtype like JAX does."""
    try:
        out = dtypes.canonicalize_dtype(dtypes.dtype(pet))
    except (TypeError, ValueError) as e:
        raise TypeError(f"{fn}: invalid preferred_element_type {pet!r}: {e}") from None
    ik, ok = in_dt.kind, out.kind
    if out == dtypes.bfloat16:
        ok = "f"
    if in_dt == dtypes.bfloat16:
        ik = "f"
    compatible = (ik == "b" or (ik in "iu" and ok in "iuf") or (ik == "f" and ok == "f")
                  or (ik == "c" and ok == "c"))
    if not compatible:
        raise TypeError(f"{fn}: input dtype {in_dt} is incompatible with "
                        f"preferred_element_type {out}; the compatible combinations are "
                        "(integral, integral), (integral, floating), (floating, floating) "
                        "and (complex, complex)")
    if ik != "b" and out.itemsize < in_dt.itemsize:
        raise TypeError(f"{fn}: preferred_element_type {out} must not be narrower than the "
                        f"input dtype {in_dt}")
    if ik == "i" and ok == "u":
        raise TypeError(f"{fn}: preferred_element_type {out} must have the signedness of "
                        f"the input dtype {in_dt}")
    return out


def _windows(x: Any, count: int, size: int) -> Any:
    """(count, size) matrix whose row k is x[k:k + size] (one gather of windows)."""
    dn = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(),
                                    start_index_map=(0,))
    starts = lax.broadcasted_iota(dtypes.int32, (count, 1), 0)
    return lax.gather(x, starts, dn, (size,), indices_are_sorted=True,
                      mode="promise_in_bounds")


# Window matrices of at most this many elements per step (eagerly they are materialized;
# under jit each step is one fused gather-multiply-sum kernel).
_CHUNK = 1 << 22


def _sliding_dot(x: Any, y: Any) -> Any:
    """out[k] = sum_j x[k + j] * y[j] for every k where the windows fit (len(x) >= len(y)).

    Only the true products are formed (no structural zeros, so infinities stay infinities),
    in steps over chunks of y. Booleans multiply with "and" and sum with "or".
    """
    count, ny = x.shape[0] - y.shape[0] + 1, y.shape[0]
    is_bool = x.dtype == dtypes.bool_
    mul, add_, total = ((lax.bitwise_and, lax.bitwise_or, lax.reduce_or) if is_bool
                        else (lax.mul, lax.add, lax.reduce_sum))
    step = max(1, _CHUNK // count)
    out = None
    for s in range(0, ny, step):
        c = min(step, ny - s)
        w = _windows(lax.slice_in_dim(x, s, s + count + c - 1, axis=0), count, c)
        ys = lax.broadcast_in_dim(lax.slice_in_dim(y, s, s + c, axis=0), (count, c), (1,))
        part = total(mul(w, ys), (1,))
        out = part if out is None else add_(out, part)
    return out


def _padded_sliding_dot(x: Any, y: Any, lo: int, hi: int) -> Any:
    """``_sliding_dot`` of ``x`` padded with ``lo`` zeros before and ``hi`` after
    (``len(x) >= len(y)``). The windows that reach into the padding are computed apart, on
    the few elements of ``x`` they read: the others read ``x`` itself, whose windows a kernel
    loads as contiguous rows (with the padding in the same kernel, each element's read was
    clamped into a gather: ``convolve`` of 65536 by 64 taps, "same", 2.4 -> 0.3 ms)."""
    n, ny = x.shape[0], y.shape[0]
    zero = lax.full((), 0, x.dtype)
    parts = []
    if lo:
        head = lax.slice_in_dim(x, 0, ny - 1, axis=0)
        parts.append(_sliding_dot(lax.pad(head, zero, [(lo, 0, 0)]), y))
    parts.append(_sliding_dot(x, y))
    if hi:
        tail = lax.slice_in_dim(x, n - (ny - 1), n, axis=0)
        parts.append(_sliding_dot(lax.pad(tail, zero, [(0, hi, 0)]), y))
    return parts[0] if len(parts) == 1 else lax.concatenate(parts, 0)


def _conv(fn: str, a: Any, v: Any, mode: Any, precision: Any, pet: Any) -> Any:
    check_arraylike(fn, a, v)
    a, v = ensure_array(a), ensure_array(v)
    for name, x in (("a", a), ("v", v)):
        if x.ndim != 1:
            raise ValueError(f"{fn}() only supports 1-dimensional inputs; got {name} of shape "
                             f"{x.shape}")
    if not isinstance(mode, str) or mode not in _MODES:
        raise ValueError(f"{fn}: mode must be one of {list(_MODES)}, got {mode!r}")
    canonicalize_precision(precision, fn)  # validated; the CPU computes in full precision
    if a.shape[0] == 0 or v.shape[0] == 0:
        raise ValueError(f"{fn}: inputs cannot be empty, got shapes {a.shape} and {v.shape}.")
    if pet is None:
        x, y = promote_dtypes_inexact(a, v)
        out_dt = x.dtype
    else:
        out_dt = _preferred(fn, pet, dtypes.result_type(a, v))
        x, y = promote_dtypes(a, v)
    weak = x.aval.weak_type and y.aval.weak_type
    reverse = False
    if fn == "correlate":
        y = conj(y)
        if x.shape[0] < y.shape[0]:
            x, y, reverse = y, x, True
    else:
        if x.shape[0] < y.shape[0]:
            x, y = y, x
        y = lax.rev(y, (0,))
    # Products and sums in the output dtype (float32 for 16-bit floats), as a dot would.
    acc = np.dtype(np.float32) if out_dt in _LOW_FLOATS else out_dt
    x = lax.convert_element_type(x, acc, False)
    y = lax.convert_element_type(y, acc, False)
    ny = y.shape[0]
    lo, hi = {"valid": (0, 0), "same": (ny // 2, ny - ny // 2 - 1),
              "full": (ny - 1, ny - 1)}[mode]
    out = _padded_sliding_dot(x, y, lo, hi)
    if reverse:
        out = lax.rev(out, (0,))
    return lax.convert_element_type(out, out_dt, weak)


def convolve(a: Any, v: Any, mode: str = "full", *, precision: Any = None,
             preferred_element_type: Any = None) -> Any:
    """Discrete linear convolution of two non-empty 1-D arrays.

    ``mode``: "full" (length ``len(a) + len(v) - 1``), "same" (length ``max(len(a),
    len(v))``, centered) or "valid" (only where the arrays overlap completely). Inputs are
    promoted to a common inexact dtype, or, with ``preferred_element_type``, to a common dtype
    and accumulated in (and returned as) ``preferred_element_type``. ``precision`` is checked
    and otherwise ignored (the CPU computes in full precision).

    Example:
        >>> jnp.convolve(jnp.array([1., 2., 3.]), jnp.array([0., 1., 0.5]))
        Array([0. , 1. , 2.5, 4. , 1.5], dtype=float32)
    """
    return _conv("convolve", a, v, mode, precision, preferred_element_type)


def correlate(a: Any, v: Any, mode: str = "valid", *, precision: Any = None,
              preferred_element_type: Any = None) -> Any:
    """Cross-correlation of two non-empty 1-D arrays: ``c[k] = sum_n a[n + k] * conj(v[n])``.

    ``mode`` (default "valid"), ``precision`` and ``preferred_element_type`` as in
    :func:`convolve`; ``v`` is conjugated.

    Example:
        >>> jnp.correlate(jnp.array([1., 2., 3.]), jnp.array([0., 1., 0.5]), mode="full")
        Array([0.5, 2. , 3.5, 3. , 0. ], dtype=float32)
    """
    return _conv("correlate", a, v, mode, precision, preferred_element_type)


# ---------------------------------------------------------------- evaluation and arithmetic


def polyval(p: Any, x: Any, *, unroll: int = 16) -> Any:
    """Evaluates the polynomial with coefficients ``p`` at ``x`` (Horner's scheme).

    ``p`` and ``x`` are promoted to a common dtype (integers stay integers). A 2-D ``p``
    evaluates one polynomial per column: the result has the broadcast shape of ``p.shape[1:]``
    and ``x.shape``. ``unroll`` (an integer) is accepted for JAX compatibility; ember evaluates
    the loop fully unrolled.

    Example:
        >>> jnp.polyval(jnp.array([3., 0., 1.]), jnp.array([0., 1., 2.]))
        Array([ 1.,  4., 13.], dtype=float32)
    """
    check_arraylike("polyval", p, x)
    if not isinstance(unroll, (bool, int, np.integer)):
        raise TypeError(f"polyval: unroll must be an integer or a bool, got {unroll!r}")
    p, x = promote_dtypes(ensure_array(p), ensure_array(x))
    if p.ndim == 0:
        raise _MissingAxisError("polyval: p must have at least one dimension (the "
                                "coefficients along axis 0), got a scalar")
    shape = broadcast_shapes(p.shape[1:], x.shape)
    y = _zeros(shape, x.dtype)
    for i in range(p.shape[0]):
        y = add(multiply(y, x), lax.index_in_dim(p, i, 0, keepdims=False))
    return y


def polyadd(a1: Any, a2: Any) -> Any:
    """Sum of two polynomials (the shorter one is aligned with the end of the longer one).

    Example:
        >>> jnp.polyadd(jnp.array([1, 2, 3]), jnp.array([10, 20]))
        Array([ 1, 12, 23], dtype=int32)
    """
    check_arraylike("polyadd", a1, a2)
    return _polyadd("polyadd", a1, a2)


def _polyadd(fn: str, a1: Any, a2: Any, subtract: bool = False) -> Any:
    a1, a2 = ensure_array(a1), ensure_array(a2)
    if a1.ndim == 0 or a2.ndim == 0:
        raise _MissingAxisError(f"{fn}: the coefficients must be arrays of at least one "
                                f"dimension, got shapes {a1.shape} and {a2.shape}")
    a1, a2 = promote_dtypes(a1, a2)
    _no_bool(fn, a1)
    if subtract:
        a2 = negative(a2)
    long, short = (a1, a2) if a2.shape[0] <= a1.shape[0] else (a2, a1)
    # JAX adds ``short`` into ``long[-len(short):]``; an empty ``short`` means ``long[0:]``.
    start = long.shape[0] - short.shape[0] if short.shape[0] else 0
    tail_shape = (long.shape[0] - start,) + long.shape[1:]
    if not _broadcasts(short.shape, tail_shape):
        raise ValueError(f"{fn}: coefficients of shape {short.shape} do not broadcast to "
                         f"the shape {tail_shape} of the part of the other operand they add "
                         f"to")
    tail = lax.slice_in_dim(long, start, long.shape[0], axis=0)
    tail = add(tail, lax.broadcast_to_shape(short, tail_shape))
    return lax.concatenate([_leading(long, start), tail], 0)


def polysub(a1: Any, a2: Any) -> Any:
    """Difference ``a1 - a2`` of two polynomials (aligned at their constant terms).

    Example:
        >>> jnp.polysub(jnp.array([1., 2., 3.]), jnp.array([1., 1.]))
        Array([1., 1., 2.], dtype=float32)
    """
    check_arraylike("polysub", a1, a2)
    return _polyadd("polysub", a1, a2, subtract=True)


def polymul(a1: Any, a2: Any, *, trim_leading_zeros: bool = False) -> Any:
    """Product of two polynomials (a full convolution of their coefficients).

    Integer and boolean coefficients give the default float dtype. An empty operand counts as
    the zero polynomial ``[0]``. ``trim_leading_zeros=True`` strips leading zeros first
    (eagerly only: the length depends on the values).

    Example:
        >>> jnp.polymul(jnp.array([1., 2.]), jnp.array([1., -2.]))
        Array([ 1.,  0., -4.], dtype=float32)
    """
    check_arraylike("polymul", a1, a2)
    a1, a2 = ensure_array(a1), ensure_array(a2)
    _check_1d("polymul", "a1", a1)
    _check_1d("polymul", "a2", a2)
    a1, a2 = promote_dtypes_inexact(a1, a2)
    if trim_leading_zeros and (a1.shape[0] > 1 or a2.shape[0] > 1):
        a1, a2 = trim_zeros(a1, trim="f"), trim_zeros(a2, trim="f")
    if a1.shape[0] == 0:
        a1 = _zeros((1,), a2.dtype)
    if a2.shape[0] == 0:
        a2 = _zeros((1,), a1.dtype)
    return convolve(a1, a2, mode="full")


def _trim_leading_tol(fn: str, u: Any, tol: float) -> Any:
    """u without its leading entries of magnitude below ``tol`` (eager only)."""
    value = core.concrete_or_error(
        u, f"The error occurred because of the trim_leading_zeros option of jnp.{fn}.")
    small = np.abs(np.asarray(value).astype(np.complex128 if u.dtype.kind == "c"
                                            else np.float64)) < tol
    start = int(np.argmin(small)) if not small.all() else u.shape[0]
    return lax.slice_in_dim(u, start, u.shape[0], axis=0)


def polydiv(u: Any, v: Any, *, trim_leading_zeros: bool = False) -> tuple[Any, Any]:
    """Quotient and remainder of the polynomial division ``u / v``.

    Results are inexact (integers become the default float dtype). As in JAX, the remainder
    keeps the length of ``u`` (its leading entries are the zeros left by the division) unless
    ``trim_leading_zeros=True``, which strips leading entries smaller than ``sqrt(eps)``
    (eagerly only). A leading zero in ``v`` gives infinities and NaNs.

    Example:
        >>> jnp.polydiv(jnp.array([1., 2., 3., 4.]), jnp.array([1., 1.]))
        (Array([1., 1., 2.], dtype=float32), Array([0., 0., 0., 2.], dtype=float32))
    """
    check_arraylike("polydiv", u, v)
    u, v = ensure_array(u), ensure_array(v)
    _check_1d("polydiv", "u", u)
    _check_1d("polydiv", "v", v)
    if v.shape[0] == 0:
        raise _MissingAxisError("polydiv: the divisor v must have at least one coefficient")
    u, v = promote_dtypes_inexact(u, v)
    m, n = u.shape[0] - 1, v.shape[0] - 1
    scale = true_divide(1.0, lax.index_in_dim(v, 0, 0, keepdims=False))
    quotient = []
    for k in range(m - n + 1):
        d = multiply(scale, lax.index_in_dim(u, k, 0, keepdims=False))
        quotient.append(lax.broadcast_in_dim(d, (1,), ()))
        seg = add(lax.slice_in_dim(u, k, k + n + 1, axis=0), multiply(negative(d), v))
        u = lax.concatenate([_leading(u, k), seg,
                             lax.slice_in_dim(u, k + n + 1, m + 1, axis=0)], 0)
    if quotient:
        q = lax.convert_element_type(lax.concatenate(quotient, 0), u.dtype, False)
    else:
        q = _zeros((1,), u.dtype)
    if trim_leading_zeros:
        u = _trim_leading_tol("polydiv", u, float(np.sqrt(dtypes.finfo(u.dtype).eps)))
    return q, u


# ---------------------------------------------------------------- calculus


def polyder(p: Any, m: int = 1) -> Any:
    """Coefficients of the ``m``-th derivative of the polynomial ``p`` (inexact dtype).

    Example:
        >>> jnp.polyder(jnp.array([1., 2., 3., 4.]))
        Array([3., 4., 3.], dtype=float32)
    """
    p = _arg("polyder", p)
    m = concrete_index("polyder", "m", m)
    if m < 0:
        raise ValueError(f"polyder: order of derivative m must be non-negative, got {m}")
    (p,) = promote_dtypes_inexact(p)
    if m == 0:
        return p
    n = _length("polyder", "p", p)
    keep = max(n - m, 0)
    try:  # like JAX, the factors broadcast against the trailing axis of a 2-D p
        broadcast_shapes((keep,) + p.shape[1:], (keep,))
    except ValueError:
        raise ValueError(f"polyder: p of shape {p.shape} does not broadcast with its {keep} "
                         f"derivative factors") from None
    # The coefficient of x**e becomes e * (e - 1) * ... * (e - m + 1) times itself.
    powers = np.arange(n - 1, n - 1 - keep, -1, dtype=np.float64)
    factors = np.prod(powers[None, :] - np.arange(m, dtype=np.float64)[:, None], axis=0)
    return multiply(_leading(p, keep), _const(factors, p.dtype))


def polyint(p: Any, m: int = 1, k: Any = None) -> Any:
    """Coefficients of the ``m``-th antiderivative of ``p`` (inexact dtype).

    ``k`` holds the integration constants: a scalar (used for every integration) or ``m``
    values, the first for the first integration.

    Example:
        >>> jnp.polyint(jnp.array([3., 2., 1.]), k=5.)
        Array([1., 1., 1., 5.], dtype=float32)
    """
    m = concrete_index("polyint", "m", m)
    k = 0 if k is None else k
    check_arraylike("polyint", p, k)
    p, k = ensure_array(p), ensure_array(k)
    if m < 0:
        raise ValueError(f"polyint: order of integral m must be non-negative (see polyder), "
                         f"got {m}")
    k_shape = k.shape or (1,)
    # As in JAX: a k with one entry along its first axis is used for every integration.
    single = k_shape[0] == 1 and _broadcasts(k_shape[1:], (m,))
    if not single and k_shape != (m,):
        raise ValueError(f"polyint: k must be a scalar or a rank-1 array of length 1 or m "
                         f"= {m}, got shape {k.shape}")
    if m and p.ndim != 1:  # a TypeError in JAX (p and k cannot be concatenated)
        raise TypeError(f"polyint: p must be a 1-D array of coefficients, got shape {p.shape}")
    p, k = promote_dtypes_inexact(p, k)
    if m == 0:
        return p
    if single:
        k = lax.broadcast_to_shape(lax.reshape(k, k_shape[1:]), (m,))
    total = p.shape[0] + m
    # Entry i (power c = total - 1 - i) is divided by c * (c - 1) * ... (factors below 1
    # count as 1): the integration constants get the smaller factorials.
    c = np.arange(total - 1, -1, -1, dtype=np.float64)
    divisors = np.prod(np.maximum(1.0, c[None, :] - np.arange(m, dtype=np.float64)[:, None]),
                       axis=0)
    return true_divide(lax.concatenate([p, k], 0), _const(divisors, p.dtype))


# ---------------------------------------------------------------- construction


def poly(seq_of_zeros: Any) -> Any:
    """Coefficients of the monic polynomial whose roots are ``seq_of_zeros`` (1-D).

    The result has the inexact dtype of the roots (complex roots give complex coefficients,
    even in conjugate pairs, as in JAX); no roots give the 0-d constant 1. For a non-empty
    square matrix the roots are its eigenvalues (its characteristic polynomial, complex).

    Example:
        >>> jnp.poly(jnp.array([1., 2., 3.]))
        Array([ 1., -6., 11., -6.], dtype=float32)
    """
    r = _arg("poly", seq_of_zeros)
    if r.ndim == 0:
        r = lax.broadcast_in_dim(r, (1,), ())
    if r.ndim == 2 and r.shape[0] == r.shape[1] and r.shape[0] != 0:
        # The characteristic polynomial: the roots are the eigenvalues.
        from ember.numpy import linalg
        (r,) = promote_dtypes_inexact(r)
        r = linalg.eigvals(r)
    if r.ndim != 1:
        raise ValueError(f"poly: input must be 1d or non-empty square 2d array, got shape "
                         f"{r.shape}")
    (r,) = promote_dtypes_inexact(r)
    dt = r.dtype
    if r.shape[0] == 0:
        return lax.full((), 1, dt)
    # 16-bit floats are accumulated in float32, as a convolution would.
    acc = np.dtype(np.float32) if dt in _LOW_FLOATS else dt
    r = lax.convert_element_type(r, acc, False)
    a = lax.full((1,), 1, acc)
    zero = lax.full((), 0, acc)
    for i in range(r.shape[0]):
        # a * (x - r_i): the coefficients shifted down one power, minus r_i times them.
        neg = lax.broadcast_in_dim(lax.neg(lax.index_in_dim(r, i, 0, keepdims=False)),
                                   (a.shape[0] + 1,), ())
        a = lax.add(lax.pad(a, zero, [(0, 1, 0)]), lax.mul(neg, lax.pad(a, zero, [(1, 0, 0)])))
        if acc != dt:
            a = lax.convert_element_type(lax.convert_element_type(a, dt, False), acc, False)
    return lax.convert_element_type(a, dt, False)


def vander(x: Any, N: int | None = None, increasing: bool = False) -> Any:
    """Vandermonde matrix: column j is ``x ** (N - 1 - j)`` (``x ** j`` with ``increasing``).

    ``x`` is 1-D; ``N`` (default ``len(x)``) is the number of columns. The result has the
    dtype of ``x`` (integer powers wrap around on overflow).

    Example:
        >>> jnp.vander(jnp.array([1, 2, 3]))
        Array([[1, 1, 1],
               [4, 2, 1],
               [9, 3, 1]], dtype=int32)
    """
    x = _arg("vander", x)
    if x.ndim != 1:
        raise ValueError(f"vander: x must be a one-dimensional array, got shape {x.shape}")
    N = x.shape[0] if N is None else concrete_index("vander", "N", N)
    if N < 0:
        raise ValueError(f"vander: N must be nonnegative, got {N}")
    if x.dtype == dtypes.bool_:
        raise TypeError("vander: x of dtype bool is not supported (powers need a numeric "
                        "dtype)")
    increasing = bool(core.concrete_or_error(
        increasing, "The error occurred because of argument 'increasing' of jnp.vander."))
    exponents = np.arange(N) if increasing else np.arange(N - 1, -1, -1)
    exponents = ensure_array(exponents.astype(x.dtype))
    return power(lax.broadcast_in_dim(x, (x.shape[0], 1), (0,)),
                 lax.broadcast_in_dim(exponents, (1, N), (1,)))


def trim_zeros(filt: Any, trim: str = "fb", axis: Any = None) -> Any:
    """``filt`` without its leading ("f" in ``trim``) and/or trailing ("b") zeros.

    Along each axis in ``axis`` (default: all), the slices that are zero everywhere are cut
    from the front and/or the back; a ``trim`` with neither letter (any case) returns ``filt``
    unchanged. The output size depends on the values: eager only, as in JAX.

    Example:
        >>> jnp.trim_zeros(jnp.array([0, 0, 1, 2, 0, 3, 0]))
        Array([1, 2, 0, 3], dtype=int32)
    """
    filt = _arg("trim_zeros", filt)
    if not isinstance(trim, str):
        raise TypeError(f"trim_zeros: trim must be a string of 'f' and/or 'b', got {trim!r}")
    value = core.concrete_or_error(
        filt, "The error occurred because of argument 'filt' of jnp.trim_zeros: the output "
              "size depends on its values.")
    axes = set(canonicalize_axes("trim_zeros", axis, filt.ndim))
    front, back = "f" in trim.lower(), "b" in trim.lower()
    if not axes or not (front or back):
        return filt
    nonzero = np.asarray(value) != 0
    starts, limits = [], []
    for ax, size in enumerate(filt.shape):
        lo, hi = 0, size
        if ax in axes:
            mask = nonzero.any(axis=tuple(i for i in range(filt.ndim) if i != ax))
            if not mask.any():
                hi = 0
            else:
                lo = int(np.argmax(mask)) if front else 0
                hi = size - int(np.argmax(mask[::-1])) if back else size
        starts.append(lo)
        limits.append(hi)
    return lax.slice(filt, starts, limits)


def _complex_of(dt: np.dtype) -> np.dtype:
    """The complex dtype eigenvalues of a ``dt`` matrix have."""
    wide = dt in (np.dtype(np.float64), np.dtype(np.complex128))
    return np.dtype(np.complex128 if wide else np.complex64)


def _companion_roots(p: Any) -> Any:
    """Eigenvalues of the companion matrix of ``p`` (1-D, inexact, p[0] != 0)."""
    from ember.numpy import linalg  # (ember.numpy.linalg imports this package's modules)
    n = p.shape[0]
    if n < 2:
        return lax.full((0,), 0, _complex_of(p.dtype))
    first = lax.neg(lax.div(lax.slice_in_dim(p, 1, n),
                            lax.broadcast_in_dim(lax.index_in_dim(p, 0, 0, False), (n - 1,),
                                                 ())))
    # Row 0 holds -p[1:]/p[0]; below it the ones of the subdiagonal.
    sub = _const(np.eye(n - 2, n - 1), p.dtype)
    return linalg.eigvals(lax.concatenate([lax.reshape(first, (1, n - 1)), sub], 0))


def roots(p: Any, *, strip_zeros: bool = True) -> Any:
    """The roots of the polynomial with coefficients ``p`` (highest power first).

    The roots are the eigenvalues of the companion matrix, always complex (an empty array
    for fewer than two coefficients). With ``strip_zeros=True`` (the default) leading zero
    coefficients are dropped first, which makes the output length depend on the values
    (eager only); ``strip_zeros=False`` keeps the length ``len(p) - 1`` so that ``roots``
    traces, and the roots lost to ``k`` leading zeros come last as ``nan+nanj``.

    Example:
        >>> jnp.roots(jnp.array([1., -3., 2.]))
        Array([2.+0.j, 1.+0.j], dtype=complex64)
    """
    p = _arg("roots", p)
    (p,) = promote_dtypes_inexact(p)
    if p.ndim == 0:
        p = lax.broadcast_in_dim(p, (1,), ())
    if p.ndim != 1:
        raise ValueError("roots: input must be a rank-1 array, got shape "
                         f"{p.shape}")
    n = p.shape[0]
    if n < 2:
        return lax.full((0,), 0, _complex_of(p.dtype))
    zero = lax.eq(p, lax.full_like(p, 0))
    # Index of the first nonzero coefficient (n when all are zero).
    idx = lax.broadcasted_iota(dtypes.int32, (n,), 0)
    lead = lax.reduce_min(lax.select(zero, lax.full((n,), n, dtypes.int32), idx), (0,))
    if strip_zeros:
        lead = int(core.concrete_or_error(
            lead, "The error occurred in jnp.roots(): the number of leading zeros decides "
                  "the output length. To trace it, pass strip_zeros=False (leading zeros then "
                  "give nan roots)."))
        return _companion_roots(lax.slice_in_dim(p, lead, n))
    from ember.numpy import roll  # (a traced shift)
    # All zero: any polynomial will do, every root becomes nan below.
    p = lax.select(lax.broadcast_in_dim(lax.eq(lead, n), (n,), ()), lax.full_like(p, 1), p)
    r = _companion_roots(roll(p, lax.neg(lead)))
    # The zero roots the rolled-in trailing zeros made go last, then become nan.
    r = lax.sort_key_val(lax.eq(r, lax.full_like(r, 0)), r)[1]
    keep = lax.lt(lax.broadcasted_iota(dtypes.int32, (n - 1,), 0),
                  lax.broadcast_in_dim(lax.sub(lax.full((), n - 1, dtypes.int32), lead),
                                       (n - 1,), ()))
    return lax.select(keep, r, lax.full_like(r, complex(np.nan, np.nan)))


def polyfit(x: Any, y: Any, deg: int, rcond: float | None = None, full: bool = False,
            w: Any = None, cov: bool | str = False) -> Any:
    """Least-squares fit of a polynomial of degree ``deg`` to the points ``(x, y)``.

    ``x`` is 1-D (inexact); ``y`` is 1-D or 2-D (one fit per column). ``w`` weights the
    points (it multiplies the residuals). ``rcond`` (default ``len(x) * eps``) cuts off small
    singular values. Returns the coefficients, highest power first; with ``full=True``
    also the residuals, rank, singular values and rcond; with ``cov`` (True or
    ``"unscaled"``) the coefficients and their covariance matrix.

    Example:
        >>> x = jnp.array([0., 1., 2., 3.])
        >>> jnp.polyfit(x, 2 * x ** 2 + 1, 2).round(4)
        Array([ 2., -0.,  1.], dtype=float32)
    """
    from ember.numpy import linalg
    from ember.numpy.reductions import sum as _sum
    x = _arg("polyfit", x)
    y = _arg("polyfit", y)
    deg = concrete_index("polyfit", "deg", deg)
    order = deg + 1
    if deg < 0:
        raise ValueError("polyfit: expected deg >= 0")
    if x.ndim != 1:
        raise TypeError("polyfit: expected 1D vector for x")
    if x.shape[0] == 0:
        raise TypeError("polyfit: expected non-empty vector for x")
    if y.ndim < 1 or y.ndim > 2:
        raise TypeError("polyfit: expected 1D or 2D array for y")
    if x.shape[0] != y.shape[0]:
        raise TypeError("polyfit: expected x and y to have same length")
    if rcond is None:
        if not dtypes.issubdtype(x.dtype, np.inexact):
            raise ValueError(f"polyfit: data type {x.dtype} of x is not inexact (the default "
                             "rcond needs its machine epsilon)")
        rcond = x.shape[0] * float(dtypes.finfo(x.dtype).eps)
    rcond = float(core.concrete_or_error(rcond, "polyfit: rcond must be a float"))
    lhs = vander(x, order)
    rhs = y
    if w is not None:
        (w,) = promote_dtypes_inexact(_arg("polyfit", w))
        if w.ndim != 1:
            raise TypeError("polyfit: expected a 1-d array for weights")
        if w.shape[0] != y.shape[0]:
            raise TypeError("polyfit: expected w and y to have the same length")
        lhs = multiply(lhs, lax.broadcast_in_dim(w, (w.shape[0], 1), (0,)))
        rhs = multiply(rhs, lax.broadcast_in_dim(w, (w.shape[0], 1), (0,)) if rhs.ndim == 2
                       else w)
    # Columns scaled to unit norm: a better conditioned least-squares problem.
    (lhs,) = promote_dtypes_inexact(lhs)
    scale = lax.sqrt(_sum(multiply(lhs, lhs), axis=0))
    lhs = true_divide(lhs, lax.broadcast_in_dim(scale, (1, order), (1,)))
    c, resids, rank, s = linalg.lstsq(lhs, rhs, rcond=rcond)
    c = true_divide(c, lax.broadcast_in_dim(scale, (order, 1), (0,)) if c.ndim == 2 else scale)
    if full:
        return c, resids, rank, s, ensure_array(rcond)
    if not cov:
        return c
    vbase = linalg.inv(lax.dot(lax.transpose(lhs, (1, 0)), lhs))
    vbase = true_divide(vbase, multiply(lax.broadcast_in_dim(scale, (order, 1), (0,)),
                                        lax.broadcast_in_dim(scale, (1, order), (1,))))
    if isinstance(cov, str) and cov == "unscaled":
        fac = lax.full((1,), 1, vbase.dtype)
    else:
        if x.shape[0] <= order:
            raise ValueError("polyfit: the number of data points must exceed order to scale "
                             "the covariance matrix")
        fac = true_divide(resids, x.shape[0] - order)
        if fac.ndim == 0:
            fac = lax.broadcast_in_dim(fac, (1,), ())
    if y.ndim == 1:
        return c, multiply(vbase, lax.reshape(fac, (1,) * 2) if fac.shape[0] == 1 else fac)
    return c, multiply(lax.broadcast_in_dim(vbase, (order, order, 1), (0, 1)),
                       lax.reshape(fac, (1, 1, fac.shape[0])))


__all__ = [
    "convolve", "correlate", "polyval", "polyadd", "polysub", "polymul", "polydiv",
    "polyder", "polyint", "poly", "vander", "trim_zeros", "roots", "polyfit",
]
