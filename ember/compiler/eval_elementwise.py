"""Evaluator rules for elementwise ops, ``reduce`` and ``dot_general``, and the NumPy kernels
they share with the eager impls of ``ember.lax`` (so eager and interpreted results agree).

Kernels follow XLA's CPU results on bad values (integer division by zero gives -1, float to
integer conversion saturates, NaN converts to 0) and never warn. Float16/bfloat16 math is
computed in float32 and rounded once, like XLA.

Rules are written elementwise over whatever shapes they are given, so a reduce body can be
evaluated vectorized over all output positions at once (see ``_reduce``).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember import dtypes
from ember.compiler.evaluator import eval_rule, evaluate_computation
from ember.compiler.hlo import Computation, Instruction

LOW_FLOATS = (dtypes.float16, dtypes.bfloat16)


def accumulation_dtype(dt: Any) -> np.dtype:
    """Low-precision floats accumulate (sums, products, dots) in float32."""
    dt = np.dtype(dt)
    return dtypes.float32 if dt in LOW_FLOATS else dt


# --------------------------------------------------------------------------- kernel wrappers

# NumPy keeps its floating-point error state in a context variable. Setting it directly costs
# about a fifth of ``np.errstate`` (0.2 against 0.9 µs), which counts in per-op eager code:
# ``token = ignore_fp_errors()`` ... ``restore_fp_errors(token)`` (in a ``finally``).
try:
    from numpy._core.umath import _extobj_contextvar as _errvar

    with np.errstate(all="ignore"):
        _IGNORE_ALL = _errvar.get()
    ignore_fp_errors: Callable[[], Any] = functools.partial(_errvar.set, _IGNORE_ALL)
    restore_fp_errors: Callable[[Any], Any] = _errvar.reset
except (ImportError, AttributeError):  # pragma: no cover - other NumPy versions
    ignore_fp_errors = functools.partial(np.seterr, all="ignore")

    def restore_fp_errors(token: Any) -> None:
        np.seterr(**token)


def quiet(fn: Callable) -> Callable:
    """``fn`` with NumPy's floating-point warnings silenced."""
    def wrapped(*args, **kw):
        token = ignore_fp_errors()
        try:
            return fn(*args, **kw)
        finally:
            restore_fp_errors(token)
    wrapped.__name__ = getattr(fn, "__name__", "kernel")
    wrapped.fp_quiet = True  # (it never warns: the eager fast path needs no error state)
    return wrapped


def float_math(fn: Callable) -> Callable:
    """A float kernel computed in float32 for float16/bfloat16, cast back to the input dtype.

    Example:
        >>> float_math(np.exp)(np.ones(2, np.float16)).dtype
        dtype('float16')
    """
    def wrapped(x, *rest, **kw):
        token = ignore_fp_errors()
        try:
            if x.dtype in LOW_FLOATS:
                rest = [r.astype(np.float32) if r.dtype == x.dtype else r for r in rest]
                return np.asarray(fn(x.astype(np.float32), *rest, **kw)).astype(x.dtype)
            return np.asarray(fn(x, *rest, **kw)).astype(x.dtype, copy=False)
        finally:
            restore_fp_errors(token)
    wrapped.__name__ = getattr(fn, "__name__", "kernel")
    return wrapped


# A backend's native kernels for unary float math: ``provider(opcode, dtype)`` gives
# ``run(x) -> array`` for float32/float64 arrays, or None (see ``register_native_math``).
_native_math: Callable[[str, np.dtype], Callable | None] | None = None
_UNKNOWN = object()


def register_native_math(provider: Callable[[str, np.dtype], Callable | None]) -> None:
    """Makes the eager impls made by ``native_first`` run ``provider``'s kernels.

    The CPU backend registers its vector math here when it is imported (that is, during
    ``import ember``), before any eager op runs: an impl asks the provider once per dtype.
    """
    global _native_math
    _native_math = provider


def native_runner(opcode: str, dt: np.dtype) -> Callable | None:
    """The registered provider's kernel of ``opcode`` for ``dt``, or None."""
    if _native_math is None:
        return None
    if dt in LOW_FLOATS:  # computed in float32 and rounded once, as ``float_math`` does
        run = _native_math(opcode, np.dtype(np.float32))
        if run is None:
            return None
        f32 = np.float32
        return lambda x: run(x.astype(f32)).astype(dt)
    return _native_math(opcode, dt)


def native_first(opcode: str, impl: Callable) -> Callable:
    """The unary float ``impl`` of HLO ``opcode``, running the registered native kernel
    instead where there is one for the argument's dtype. ``.native_kernel(dtype)`` gives
    that kernel or None (the eager fast path calls it directly)."""
    kernels: dict[np.dtype, Callable | None] = {}

    def native_kernel(dt: np.dtype) -> Callable | None:
        run = kernels.get(dt, _UNKNOWN)
        if run is _UNKNOWN:
            run = native_runner(opcode, dt)
            if _native_math is not None:  # (decided once the backend has registered)
                kernels[dt] = run
        return run

    def wrapped(x, **params):
        run = kernels.get(x.dtype, _UNKNOWN)
        if run is _UNKNOWN:
            run = native_kernel(x.dtype)
        return impl(x, **params) if run is None else run(x)

    wrapped.__name__ = getattr(impl, "__name__", "kernel")
    wrapped.native_kernel = native_kernel
    return wrapped


def native_binary_first(opcode: str, impl: Callable) -> Callable:
    """The binary ``impl`` of HLO ``opcode``, running the registered native kernel instead
    where there is one for the operands' dtype and layout (the kernel returns None for a
    layout it has no loop for; its ``with_fallback(impl)`` runs ``impl`` there instead).
    ``.native_kernel(dtype)`` gives that combination as one function of (x, y), or None
    (the eager fast path calls it directly)."""
    kernels: dict[np.dtype, Callable | None] = {}

    def native_kernel(dt: np.dtype) -> Callable | None:
        combined = kernels.get(dt, _UNKNOWN)
        if combined is _UNKNOWN:
            run = _native_math(opcode, dt) if _native_math is not None else None
            combined = None if run is None else run.with_fallback(impl)
            if _native_math is not None:  # (decided once the backend has registered)
                kernels[dt] = combined
        return combined

    def wrapped(x, y, **params):
        run = kernels.get(x.dtype, _UNKNOWN)
        if run is _UNKNOWN:
            run = native_kernel(x.dtype)
        return impl(x, y, **params) if run is None else run(x, y)

    wrapped.__name__ = getattr(impl, "__name__", "kernel")
    wrapped.native_kernel = native_kernel
    return wrapped


# --------------------------------------------------------------------------- arithmetic


def _int_divide(x, y):
    # Rounds toward zero (C semantics); x / 0 gives -1 like XLA's CPU backend. ``x - fmod(x,
    # d)`` is a multiple of ``d`` between 0 and ``x`` (no overflow), whose floor division is
    # exact: two passes, in place (4M int32 by a scalar: ~10 ms, against ~70 for a floor
    # division corrected where the remainder was non-zero and the signs differed).
    zero = y == 0
    any_zero = bool(np.any(zero))
    d = np.where(zero, 1, y).astype(x.dtype) if any_zero else np.asarray(y, x.dtype)
    with np.errstate(all="ignore"):
        q = np.asarray(np.fmod(x, d))  # (of the broadcast shape: the outputs below fit it)
        np.subtract(x, q, out=q)
        np.floor_divide(q, d, out=q)
    if any_zero:
        q = np.where(zero, np.array(-1).astype(x.dtype), q)
    return np.asarray(q).astype(x.dtype, copy=False)


@quiet
def divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x / y``; integers truncate toward zero and give -1 when dividing by zero."""
    if dtypes.is_integer(x.dtype):
        return _int_divide(x, y)
    if dtypes.is_complex(x.dtype):
        return _complex_divide(x, y)
    return np.asarray(np.true_divide(x, y)).astype(x.dtype, copy=False)


def _complex_divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """XLA's complex ``x / y``: Smith's method (dividing through by the divisor's larger
    part), and where that gives NaN in both parts, C99's limits: a zero divisor gives
    ``inf * x`` (signed as ``y.re``), an infinite numerator over a finite divisor an infinite
    quotient, a finite numerator over an infinite divisor a zero one."""
    x, y = np.broadcast_arrays(x, y)
    a, b, c, d = x.real, x.imag, y.real, y.imag
    by_im = np.abs(c) < np.abs(d)  # (False where NaN: the second formula)
    ratio = np.where(by_im, c / d, d / c)
    denom = np.where(by_im, d + c * ratio, c + d * ratio)
    re = np.where(by_im, a * ratio + b, b * ratio + a) / denom
    im = np.where(by_im, b * ratio - a, b - a * ratio) / denom
    nan = np.isnan(re) & np.isnan(im)
    if nan.any():
        one, zero, inf = (np.asarray(v, a.dtype) for v in (1, 0, np.inf))
        finite_y = np.isfinite(c) & np.isfinite(d)
        finite_x = np.isfinite(a) & np.isfinite(b)
        zero_y = (c == 0) & (d == 0) & ~(np.isnan(a) & np.isnan(b))
        big = np.copysign(inf, c)
        inf_x = (np.isinf(a) | np.isinf(b)) & finite_y
        sa, sb = (np.copysign(np.where(np.isinf(v), one, zero), v) for v in (a, b))
        inf_y = (np.isinf(c) | np.isinf(d)) & finite_x
        sc, sd = (np.copysign(np.where(np.isinf(v), one, zero), v) for v in (c, d))
        re = np.where(nan, np.select([zero_y, inf_x, inf_y], [
            big * a, inf * (sa * c + sb * d), zero * (a * sc + b * sd)], re), re)
        im = np.where(nan, np.select([zero_y, inf_x, inf_y], [
            big * b, inf * (sb * c - sa * d), zero * (b * sc - a * sd)], im), im)
    out = np.empty(x.shape, x.dtype)
    out.real, out.imag = re, im
    return out


@quiet
def remainder(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Remainder with the sign of the dividend (C's fmod); integer ``x % 0`` gives ``x``."""
    if dtypes.is_integer(x.dtype):
        zero = y == 0
        if not np.any(zero):
            return np.asarray(np.fmod(x, y)).astype(x.dtype, copy=False)
        r = np.fmod(x, np.where(zero, 1, y))
        return np.where(zero, x, r).astype(x.dtype)
    return np.asarray(np.fmod(x, y)).astype(x.dtype, copy=False)


@quiet
def make_complex(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x + i*y`` from its parts (``x + 1j * y`` would give NaN real parts for infinite
    ``y``: 1j * inf is (nan + inf j))."""
    x, y = np.asarray(x), np.asarray(y)
    out = np.empty(np.broadcast_shapes(x.shape, y.shape),
                   np.complex128 if np.result_type(x, y) == np.float64 else np.complex64)
    out.real, out.imag = x, y
    return out


def sign(x: np.ndarray) -> np.ndarray:
    """-1, 0 or 1 (a float zero or NaN is returned as it is: ``sign(-0.0)`` is -0.0, as in
    XLA); complex ``x / |x|``; unsigned 0 or 1."""
    if dtypes.is_unsigned(x.dtype):
        return (x != 0).astype(x.dtype)
    if dtypes.is_complex(x.dtype):
        # x scaled by a power of two first (exact), so |x| is finite for every finite x
        _, e = np.frexp(np.maximum(np.abs(x.real), np.abs(x.imag)))
        y = np.empty_like(x)
        y.real, y.imag = np.ldexp(x.real, -e), np.ldexp(x.imag, -e)
        a = np.abs(y)
        safe = np.where(a == 0, 1, a)
        y.real, y.imag = y.real / safe, y.imag / safe  # (inf + 0j: nan + 0j, as XLA)
        return np.where(a == 0, 0, y).astype(x.dtype)
    if dtypes.is_float(x.dtype):
        return np.where((x == 0) | np.isnan(x), x, np.sign(x))
    return np.sign(x)


def absolute(x: np.ndarray) -> np.ndarray:
    """``|x|``; complex as XLA: NaN when either part is NaN (C's ``hypot`` gives inf for an
    infinite part beside a NaN)."""
    out = np.abs(x)
    if dtypes.is_complex(x.dtype):
        out = np.where(np.isnan(x.real) | np.isnan(x.imag), np.nan, out).astype(out.dtype)
    return out


def log(x: np.ndarray) -> np.ndarray:
    """``log(x)``; complex with a NaN real part where either part is NaN (XLA's ``log|x|``)."""
    out = np.asarray(np.log(x))  # (a 0-d input gives a NumPy scalar: its parts are read-only)
    if dtypes.is_complex(x.dtype):
        out.real = np.where(np.isnan(x.real) | np.isnan(x.imag), np.nan, out.real)
    return out


def sqrt(x: np.ndarray) -> np.ndarray:
    """``sqrt(x)``; complex as XLA: the imaginary part's sign from ``x.imag < 0`` left of the
    axis (``sqrt(-1 - 0j)`` is ``1j``; C99's is ``-1j``), and ``nan + nan j`` where either
    part is NaN (C99 keeps an infinite part)."""
    if not dtypes.is_complex(x.dtype):
        return np.sqrt(x)
    out = np.sqrt(np.where((x.imag == 0) & (x.real < 0), x.real + 0j, x).astype(x.dtype))
    return np.where(np.isnan(x.real) | np.isnan(x.imag), np.nan + 0j * np.nan, out).astype(
        x.dtype)


def round_afz(x: np.ndarray) -> np.ndarray:
    """Rounds half away from zero (C's ``round``)."""
    t = np.trunc(x)
    frac = np.abs(x - t)  # exact in the input's precision
    return np.where(frac >= 0.5, t + np.sign(x), t).astype(x.dtype)


def is_finite(x: np.ndarray) -> np.ndarray:
    return np.isfinite(x.astype(np.float32) if x.dtype in LOW_FLOATS else x)


def log1p(x: np.ndarray) -> np.ndarray:
    """``log(1 + x)``; for complex ``x``, accurate near 0 where NumPy's is not (it takes
    ``log|1 + x|`` directly, so ``log1p(1e-4 + 0j)`` lost its last 4 digits): the real part
    is ``log1p(x.re * (2 + x.re) + x.im**2) / 2`` while both parts are below 1/2 (complex64
    in float64, rounded once), ``log|1 + x|`` beyond."""
    if not dtypes.is_complex(x.dtype):
        return np.log1p(x)
    wide = x.astype(np.complex128)
    re, im = wide.real, wide.imag
    near = np.maximum(np.abs(re), np.abs(im)) < 0.5
    real = np.where(near, 0.5 * np.log1p(re * (2 + re) + im * im), np.log(np.abs(1 + wide)))
    return (real + 1j * np.arctan2(im, 1 + re)).astype(x.dtype)


def expm1(x: np.ndarray) -> np.ndarray:
    """``exp(x) - 1``; for complex ``x = a + ib``, ``expm1(a) cos b - 2 sin(b/2)**2`` (no
    cancellation near 0) ``+ i exp(a) sin b``, with a zero imaginary part kept as it is
    (NumPy's gave ``exp(1e20) * 0 = nan`` there; JAX gives 0)."""
    if not dtypes.is_complex(x.dtype):
        return np.expm1(x)
    with np.errstate(all="ignore"):
        a, b = x.real, x.imag
        half = np.sin(b / 2)
        real = np.expm1(a) * np.cos(b) - 2 * half * half
        imag = np.where(b == 0, b, np.exp(a) * np.sin(b))
        out = np.empty(x.shape, x.dtype)
        out.real, out.imag = real, imag
    return out


def square(x: np.ndarray) -> np.ndarray:
    """``x * x``; for complex ``x = a + ib``, ``(a - b)(a + b) + 2ab i`` as XLA computes it
    (``a*a - b*b`` would be ``inf - inf`` where both squares overflow)."""
    with np.errstate(all="ignore"):
        if not dtypes.is_complex(x.dtype):
            return np.multiply(x, x)
        a, b = x.real, x.imag
        out = np.empty(x.shape, x.dtype)
        out.real, out.imag = (a - b) * (a + b), 2 * (a * b)
    return out


def _nan_where(mask: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out`` with ``nan + nan j`` where ``mask``."""
    return np.where(mask, np.complex128(complex(np.nan, np.nan)), out).astype(out.dtype)


def _with_xla_nans(ufunc: np.ufunc, nan_at: Callable, doc: str) -> Callable:
    """``ufunc``, with ``nan + nan j`` where ``nan_at(real, imag)`` for complex input: XLA's
    formulas give NaN pairs at special values where C99 (NumPy) keeps a part."""
    def fn(x: np.ndarray) -> np.ndarray:
        out = ufunc(x)
        if dtypes.is_complex(x.dtype):
            out = _nan_where(nan_at(x.real, x.imag), out)
        return out
    fn.__name__ = fn.__qualname__ = ufunc.__name__
    fn.__doc__ = doc
    return fn


exp = _with_xla_nans(
    np.exp, lambda re, im: np.isinf(re) & ~np.isfinite(im),
    "``exp(x)``; complex ``nan + nan j`` at an infinite real part beside a non-finite "
    "imaginary part (C99 gives ``inf + nan j`` or 0 there).")
sinh = _with_xla_nans(
    np.sinh, lambda re, im: ~np.isfinite(im),
    "``sinh(x)``; complex ``nan + nan j`` at a non-finite imaginary part (C99 keeps "
    "``±0 + nan j`` and ``±inf + nan j``).")
cosh = _with_xla_nans(
    np.cosh, lambda re, im: ~np.isfinite(im),
    "``cosh(x)``; complex ``nan + nan j`` at a non-finite imaginary part.")
tanh = _with_xla_nans(
    np.tanh, lambda re, im: np.isfinite(re) & ~np.isfinite(im),
    "``tanh(x)``; complex ``nan + nan j`` at a finite real part beside a non-finite "
    "imaginary part (C99 keeps ``±0 + nan j``; ``±1 ± 0j`` at an infinite real part stays).")
sin = _with_xla_nans(
    np.sin, lambda re, im: ~np.isfinite(re),
    "``sin(x)``; complex ``nan + nan j`` at a non-finite real part.")
cos = _with_xla_nans(
    np.cos, lambda re, im: ~np.isfinite(re),
    "``cos(x)``; complex ``nan + nan j`` at a non-finite real part.")
tan = _with_xla_nans(
    np.tan, lambda re, im: ~np.isfinite(re) & np.isfinite(im),
    "``tan(x)``; complex ``nan + nan j`` at a non-finite real part beside a finite "
    "imaginary part (``tan(x) = -i tanh(i x)``).")


def exp2(x: np.ndarray) -> np.ndarray:
    """``2**x``; complex as JAX lowers it, ``exp(log(2) * x)`` with a complex product (an
    infinite part makes the other NaN: ``exp2(inf + 0j)`` is ``nan + nan j``)."""
    if not dtypes.is_complex(x.dtype):
        return np.exp2(x)
    return exp(np.asarray(np.log(2), x.dtype) * x)


def logistic(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-x))`` without overflow for large ``|x|``."""
    if dtypes.is_complex(x.dtype):  # (XLA's exp and division: 1 / (1 + exp(inf + i)) is 0)
        one = np.ones((), x.dtype)
        return _complex_divide(one, one + exp(-x))
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


@quiet
def power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x ** y`` for float/complex ``x``; ``y`` of x's dtype or an integer dtype."""
    if x.dtype in LOW_FLOATS:
        yy = y.astype(np.float32) if y.dtype == x.dtype else y
        return power(x.astype(np.float32), yy).astype(x.dtype)
    out = np.asarray(np.power(x, y)).astype(x.dtype, copy=False)
    if x.dtype.kind == "f" and y.dtype.kind == "f":
        # NumPy takes sqrt for an exponent of 1/2, whose -0 and -inf differ from C's pow
        # (and XLA's): pow(-0, 0.5) is +0 and pow(-inf, 0.5) is +inf.
        half = y == 0.5
        if half.any():
            out = np.where(half & ((x == 0) | (x == -np.inf)), np.abs(x), out)
    return out


def clamp(lo: np.ndarray, x: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``min(max(x, lo), hi)`` (NaN propagates; -0 below +0, as XLA orders zeros:
    ``clamp(-1, -0.0, 0.0)`` is -0.0)."""
    return signed_zero_minimum(signed_zero_maximum(x, lo), hi)


# --------------------------------------------------------------------------- special functions
# Computed in float64 (reference implementations), cast to the input dtype.


def special(fn: Callable) -> Callable:
    """A float64 kernel applied to any float dtype (the result is cast back)."""
    def kernel(x):
        with np.errstate(all="ignore"):
            return np.asarray(fn(x.astype(np.float64))).astype(x.dtype)
    kernel.__name__ = fn.__name__
    return kernel


def _pyfunc(f: Callable) -> Callable:
    def safe(v):
        try:
            return f(v)
        except (ValueError, OverflowError):
            return math.inf
    uf = np.frompyfunc(safe, 1, 1)

    def kernel(x):
        return np.asarray(uf(x), dtype=np.float64)
    kernel.__name__ = f.__name__
    return kernel


_erf64 = _pyfunc(math.erf)
_erfc64 = _pyfunc(math.erfc)
_lgamma64 = _pyfunc(math.lgamma)


def _digamma_pos(x):
    # x > 0: shift up with psi(x) = psi(x + 1) - 1/x until x >= 8, then the asymptotic series.
    acc = np.zeros_like(x)
    for _ in range(8):
        small = x < 8
        acc = acc - np.where(small, 1 / np.where(small, x, 1), 0)
        x = np.where(small, x + 1, x)
    x2 = 1 / (x * x)
    series = x2 * (1 / 12 - x2 * (1 / 120 - x2 * (1 / 252 - x2 * (1 / 240 - x2 / 132))))
    return acc + np.log(x) - 0.5 / x - series


def _digamma64(x):
    neg = x <= 0
    pos = _digamma_pos(np.where(neg, 1 - x, x))
    # Reflection: psi(x) = psi(1 - x) - pi / tan(pi x); poles at non-positive integers -> nan.
    refl = pos - np.pi / np.tan(np.pi * x)
    out = np.where(neg, refl, pos)
    out = np.where(neg & (x == np.floor(x)), np.nan, out)
    return np.where(x == np.inf, np.inf, out)


# Giles' single-precision approximation of erf_inv ("Approximating the erfinv function",
# 2010): erf_inv(a) ~ a * P(w) with w = -log((1 - a)(1 + a)), one polynomial in w - 2.5 below
# w = 5 and one in sqrt(w) - 3 beyond; coefficients in ascending order.
ERF_INV_GUESS_CENTRAL = (1.50140941, 0.246640727, -0.00417768164, -0.00125372503,
                         0.00021858087, -4.39150654e-06, -3.5233877e-06, 3.43273939e-07,
                         2.81022636e-08)
ERF_INV_GUESS_TAIL = (2.83297682, 1.00167406, 0.00943887047, -0.0076224613, 0.00573950773,
                      -0.00367342844, 0.00134934322, 0.000100950558, -0.000200214257)


def _erf_inv_guess(a):
    # refined by Newton below
    w = -np.log((1 - a) * (1 + a))
    p1 = np.polynomial.polynomial.polyval(w - 2.5, ERF_INV_GUESS_CENTRAL)
    p2 = np.polynomial.polynomial.polyval(np.sqrt(w) - 3, ERF_INV_GUESS_TAIL)
    return np.where(w < 5, p1, p2) * a


def _erf_inv64(y):
    a = np.abs(y)
    inside = a < 1
    a_in = np.where(inside, a, 0.5)
    x = _erf_inv_guess(a_in)
    for _ in range(3):
        # Newton on erf (small a) or erfc (a near 1, where erf loses precision).
        f = np.where(a_in < 0.5, _erf64(x) - a_in, (1 - a_in) - _erfc64(x))
        x = x - f / (2 / np.sqrt(np.pi) * np.exp(-x * x))
    out = np.where(inside, x, np.where(a == 1, np.inf, np.nan))
    return np.copysign(out, y)  # (erf_inv(-0) is -0)


erf = special(_erf64)
erfc = special(_erfc64)
erf_inv = special(_erf_inv64)
lgamma = special(_lgamma64)
digamma = special(_digamma64)


# --------------------------------------------------------------------------- bitwise


def _unsigned(dt: np.dtype) -> np.dtype:
    return np.dtype(f"u{dt.itemsize}")


def _signed(dt: np.dtype) -> np.dtype:
    return np.dtype(f"i{dt.itemsize}")


def _shift_amount(x, y):
    # Shift amounts are read as unsigned: negative or >= the bit width are out of range (XLA).
    yu = y.astype(_unsigned(y.dtype))
    bad = yu >= x.dtype.itemsize * 8
    return np.where(bad, 0, yu).astype(_unsigned(x.dtype)), bad


def shift_left(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    s, bad = _shift_amount(x, y)
    out = np.left_shift(x.astype(_unsigned(x.dtype)), s)
    return np.where(bad, 0, out).astype(_unsigned(x.dtype)).view(x.dtype)


def shift_right_logical(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    s, bad = _shift_amount(x, y)
    out = np.right_shift(x.astype(_unsigned(x.dtype)), s)
    return np.where(bad, 0, out).astype(_unsigned(x.dtype)).view(x.dtype)


def shift_right_arithmetic(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    s, bad = _shift_amount(x, y)
    xs = np.asarray(x).view(_signed(x.dtype))
    out = np.right_shift(xs, s.astype(xs.dtype))
    fill = np.where(xs < 0, -1, 0).astype(xs.dtype)
    return np.where(bad, fill, out).astype(xs.dtype).view(x.dtype)


def popcnt(x: np.ndarray) -> np.ndarray:
    return np.bitwise_count(np.asarray(x).view(_unsigned(x.dtype))).astype(x.dtype)


def count_leading_zeros(x: np.ndarray) -> np.ndarray:
    nbits = x.dtype.itemsize * 8
    udt = _unsigned(x.dtype)
    v = np.asarray(x).view(udt).copy()
    n = np.zeros(v.shape, np.int64)
    s = nbits // 2
    while s >= 1:
        top_zero = (v >> udt.type(nbits - s)) == 0
        n += np.where(top_zero, s, 0)
        v = np.where(top_zero, v << udt.type(s), v).astype(udt)
        s //= 2
    n += (v >> udt.type(nbits - 1)) == 0
    return n.astype(x.dtype)


# --------------------------------------------------------------------------- conversions


def reduce_precision(x: np.ndarray, exponent_bits: int, mantissa_bits: int) -> np.ndarray:
    """XLA's reduce_precision, on ``x``'s own bits: the mantissa rounds to nearest even at
    ``mantissa_bits`` (an integer add on the bit pattern, so a subnormal rounds as the fixed
    point number it is, and with no mantissa bits a tie goes to the even exponent); then, if
    ``exponent_bits`` is narrower than ``x``'s exponent, a value above the narrower range
    becomes infinity and one below its smallest normal number zero (no subnormals), signs
    kept. NaN stays NaN."""
    x = np.asarray(x)
    finfo = dtypes.finfo(x.dtype)
    src_mantissa, nbits = finfo.nmant, 8 * x.dtype.itemsize
    src_exponent = nbits - 1 - src_mantissa
    ut = np.dtype(f"u{x.dtype.itemsize}").type
    bits = np.array(x, copy=True).view(ut)  # (contiguous, 0-d arrays kept 0-d)
    if mantissa_bits < src_mantissa:
        shift = src_mantissa - mantissa_bits
        last_kept = ut(1 << shift)
        bias = ((bits & last_kept) >> ut(shift)) + ut((1 << (shift - 1)) - 1)
        bits = (bits + bias) & ~ut((1 << shift) - 1)
    if exponent_bits < src_exponent:
        exponent_mask = ut(((1 << src_exponent) - 1) << src_mantissa)
        src_bias = (1 << (src_exponent - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        exponent = bits & exponent_mask
        sign = bits & ut(1 << (nbits - 1))
        bits = np.where(exponent > ut((src_bias + reduced_bias) << src_mantissa),
                        sign | exponent_mask,
                        np.where(exponent <= ut((src_bias - reduced_bias) << src_mantissa),
                                 sign, bits))
    out = bits.astype(ut, copy=False).view(x.dtype)
    with np.errstate(invalid="ignore"):
        nan = np.isnan(x.astype(np.float32) if x.dtype in LOW_FLOATS else x)
    return np.where(nan, x, out).astype(x.dtype, copy=False)


def _float_to_int(x: np.ndarray, new_dtype: np.dtype) -> np.ndarray:
    """The saturating cast: a plain (truncating) cast, then the maximum where ``x >= 2**k``
    (one past the maximum: a power of two, exact in every float type that reaches it), the
    minimum below the minimum, 0 for NaN. Four passes over ``x`` in its own precision (4M
    float32: ~5 ms, against ~43 through clipped float64 copies)."""
    info = np.iinfo(new_dtype)
    if x.dtype in LOW_FLOATS:  # (exact in float32, which holds every bound)
        x = x.astype(np.float32)
    out = np.empty(x.shape, new_dtype)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.copyto(out, x, casting="unsafe")  # (what it gives out of range is replaced below)
        np.copyto(out, info.max, where=x >= float(info.max) + 1)
        np.copyto(out, info.min, where=x < float(info.min))
        np.copyto(out, 0, where=np.isnan(x))
    return out


def convert(x: np.ndarray, new_dtype: Any) -> np.ndarray:
    """Casts ``x``: float to int truncates, saturates and maps NaN to 0; to bool is ``x != 0``;
    complex to real keeps the real part.

    Example:
        >>> convert(np.array([np.nan, 1e10, -2.7], np.float32), np.int32)
        array([         0, 2147483647,         -2], dtype=int32)
    """
    new_dtype = np.dtype(new_dtype)
    if new_dtype == dtypes.bool_:
        return np.asarray(x != 0)
    if dtypes.is_complex(x.dtype) and not dtypes.is_complex(new_dtype):
        x = np.real(x)
    if dtypes.is_integer(new_dtype) and dtypes.is_inexact(x.dtype):
        return _float_to_int(np.asarray(x), new_dtype)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(x).astype(new_dtype)


# --------------------------------------------------------------------------- dot_general


def dot_general(lhs: np.ndarray, rhs: np.ndarray, dimension_numbers: Any,
                dtype: Any) -> np.ndarray:
    """Contraction with batch dims computed in ``dtype``; batch, lhs free, rhs free dims.

    ``dimension_numbers`` is ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``.

    Example:
        >>> dot_general(np.ones((2, 3)), np.ones((3, 4)), (((1,), (0,)), ((), ())),
        ...             np.float32).shape
        (2, 4)
    """
    (lc, rc), (lb, rb) = dimension_numbers
    lf = [i for i in range(lhs.ndim) if i not in lc and i not in lb]
    rf = [i for i in range(rhs.ndim) if i not in rc and i not in rb]
    lt = np.transpose(lhs, list(lb) + lf + list(lc)).astype(dtype, copy=False)
    rt = np.transpose(rhs, list(rb) + list(rc) + rf).astype(dtype, copy=False)
    bshape = lt.shape[:len(lb)]
    lfs, rfs = lt.shape[len(lb):len(lb) + len(lf)], rt.shape[len(rb) + len(rc):]
    k = math.prod(lt.shape[len(lb) + len(lf):])
    m, n, b = math.prod(lfs), math.prod(rfs), math.prod(bshape)
    lt, rt = lt.reshape(b, m, k), rt.reshape(b, k, n)
    token = ignore_fp_errors()
    try:
        exact = _exact_float_type(lt, rt, k)
        if k == 1:
            # Products without a sum: elementwise, exactly as compiled code computes them
            # (BLAS adds them to +0.0, which turned a -0.0 product into +0.0).
            out = lt * rt
        elif exact is not None:
            # BLAS in a float type whose mantissa holds every partial sum computes these
            # integer sums exactly (float32 where it can: twice float64's speed); the cast
            # back wraps as integer arithmetic would. NumPy's own integer matmul is a slow
            # naive loop.
            out = np.matmul(lt.astype(exact), rt.astype(exact))
            out = out.astype(np.int64).astype(lt.dtype)
        else:
            out = np.matmul(lt, gemm_operand(lt, rt))
    finally:
        restore_fp_errors(token)
    return out.reshape(bshape + lfs + rfs)


def gemm_operand(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``rhs`` for ``np.matmul(lhs, rhs)``, copied where it shares memory with ``lhs``:
    NumPy computes a matrix times its own transpose by BLAS ``syrk``, which OpenBLAS runs
    ~2x slower than ``gemm`` (a @ a.T of (2048, 128): 16 ms, 7 on a copy)."""
    return np.array(rhs) if np.may_share_memory(lhs, rhs) else rhs


def _largest_magnitude(x: np.ndarray) -> int:
    if x.dtype.kind == "u":
        return int(x.max())
    return max(int(x.max()), -int(x.min()))


def _exact_float_type(lhs: np.ndarray, rhs: np.ndarray, k: int) -> type | None:
    """float32 or float64 if an integer product of ``lhs`` and ``rhs`` (k terms per sum)
    stays below 2**24 or 2**53 in magnitude at every step, so arithmetic in that type is
    exact; else None."""
    if lhs.dtype.kind not in "iu" or lhs.size == 0 or rhs.size == 0 or k == 0:
        return None
    bound = k * _largest_magnitude(lhs) * _largest_magnitude(rhs)
    if bound < 2**24:
        return np.float32
    return np.float64 if bound < 2**53 else None


# --------------------------------------------------------------------------- evaluator rules


def _as(inst: Instruction, value: Any) -> np.ndarray:
    # Values keep their (possibly broadcast) shape: reduce bodies run vectorized.
    return np.asarray(value).astype(inst.dtype, copy=False)


_UNARY: dict[str, Callable] = {
    "abs": quiet(absolute), "negate": quiet(np.negative), "sign": sign,
    "floor": float_math(np.floor), "ceil": float_math(np.ceil),
    "round_nearest_even": float_math(np.rint), "round_nearest_afz": float_math(round_afz),
    "sqrt": float_math(sqrt), "rsqrt": float_math(lambda x: 1 / np.sqrt(x)),
    "cbrt": float_math(np.cbrt), "exponential": float_math(exp),
    "exponential_minus_one": float_math(expm1), "log": float_math(log),
    "log_plus_one": float_math(log1p), "logistic": float_math(logistic),
    "tanh": float_math(tanh), "sine": float_math(sin), "cosine": float_math(cos),
    "tan": float_math(tan), "asin": float_math(np.arcsin), "acos": float_math(np.arccos),
    "atan": float_math(np.arctan), "sinh": float_math(sinh), "cosh": float_math(cosh),
    "asinh": float_math(np.arcsinh), "acosh": float_math(np.arccosh),
    "atanh": float_math(np.arctanh), "not": np.invert, "popcnt": popcnt,
    "count_leading_zeros": count_leading_zeros, "is_finite": is_finite,
    "real": np.real, "imag": np.imag, "conj": np.conj, "erf": erf, "erfc": erfc,
    "erf_inv": erf_inv, "lgamma": lgamma, "digamma": digamma,
    "copy": lambda x: np.array(x, copy=True),
}


def _signed_zero_extreme(ufunc: np.ufunc) -> Callable:
    """``np.maximum``/``np.minimum`` with XLA's order of zeros, -0 below +0 (NumPy returns
    either zero of a tie, by position). NaN propagates in both. Complex values compare as
    JAX lowers them: by real parts, by imaginary parts where the real parts are equal, and
    ``y`` where that comparison is false (so NaN parts do not propagate)."""
    is_max = ufunc is np.maximum
    greater = np.greater if is_max else np.less

    def extreme(x, y):
        if np.result_type(x, y).kind == "c":
            x, y = np.asarray(x), np.asarray(y)
            pick_x = np.where(x.real == y.real, greater(x.imag, y.imag),
                              greater(x.real, y.real))
            return np.where(pick_x, x, y)
        out = ufunc(x, y)
        dt = out.dtype
        if dt.kind != "f" and dt != dtypes.bfloat16:
            return out
        if (np.ndim(x) == 0 and x != 0) or (np.ndim(y) == 0 and y != 0):
            return out  # (no tie of zeros: NaN != 0 too)
        if (out == 0).any():
            # A tie of zeros: x + y is +0 unless both are -0 (a maximum); a minimum's
            # mirror image is -0 unless both are +0.
            tie = (np.asarray(x) == 0) & (np.asarray(y) == 0)
            out = np.where(tie, np.add(x, y) if is_max else np.negative(np.negative(x) - y),
                           out)
        return out
    return quiet(extreme)  # (XLA never warns)


signed_zero_maximum = _signed_zero_extreme(np.maximum)
signed_zero_minimum = _signed_zero_extreme(np.minimum)
_SIGNED_ZERO_EXTREMES = {np.maximum: signed_zero_maximum, np.minimum: signed_zero_minimum}

_BINARY: dict[str, Callable] = {
    "add": quiet(np.add), "subtract": quiet(np.subtract), "multiply": quiet(np.multiply),
    "divide": divide, "remainder": remainder, "power": power,
    "maximum": signed_zero_maximum, "minimum": signed_zero_minimum, "and": np.bitwise_and,
    "or": np.bitwise_or, "xor": np.bitwise_xor, "shift_left": shift_left,
    "shift_right_arithmetic": shift_right_arithmetic,
    "shift_right_logical": shift_right_logical, "atan2": float_math(np.arctan2),
    "next_after": np.nextafter, "complex": make_complex,
}

_COMPARE: dict[str, Callable] = {
    "EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
    "GT": np.greater, "GE": np.greater_equal,
}


def _register_unary(opcode: str, kernel: Callable) -> None:
    @eval_rule(opcode)
    def rule(inst, x):
        return _as(inst, kernel(np.asarray(x)))


def _register_binary(opcode: str, kernel: Callable) -> None:
    @eval_rule(opcode)
    def rule(inst, x, y):
        return _as(inst, kernel(np.asarray(x), np.asarray(y)))


for _op, _kernel in _UNARY.items():
    _register_unary(_op, _kernel)
for _op, _kernel in _BINARY.items():
    _register_binary(_op, _kernel)


@eval_rule("compare")
def _compare(inst, x, y):
    with np.errstate(invalid="ignore"):  # NaN operands compare false, as in IEEE
        return np.asarray(_COMPARE[inst.attrs["comparison_direction"]](x, y))


@eval_rule("select")
def _select(inst, pred, on_true, on_false):
    return _as(inst, np.where(pred, on_true, on_false))


@eval_rule("clamp")
def _clamp(inst, lo, x, hi):
    return _as(inst, clamp(lo, x, hi))


@eval_rule("convert")
def _convert(inst, x):
    return convert(np.asarray(x), inst.dtype)


@eval_rule("bitcast_convert")
def _bitcast_convert(inst, x):
    """The same bits as ``inst.dtype`` (of the same width)."""
    return np.array(x, copy=True).view(inst.dtype)  # (contiguous, 0-d arrays kept 0-d)


@eval_rule("reduce_precision")
def _reduce_precision(inst, x):
    return reduce_precision(np.asarray(x), inst.attrs["exponent_bits"],
                            inst.attrs["mantissa_bits"])


@eval_rule("dot_general")
def _dot_general(inst, lhs, rhs):
    a = inst.attrs
    dn = ((tuple(a["lhs_contracting_dimensions"]), tuple(a["rhs_contracting_dimensions"])),
          (tuple(a["lhs_batching_dimensions"]), tuple(a["rhs_batching_dimensions"])))
    out = dot_general(np.asarray(lhs), np.asarray(rhs), dn, accumulation_dtype(inst.dtype))
    return out.astype(inst.dtype, copy=False)


# --------------------------------------------------------------------------- reduce

# Bodies that are one commutative binary op of their two parameters reduce with a ufunc.
REDUCE_UFUNCS: dict[str, np.ufunc] = {
    "add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
}


def simple_reducer_opcode(body: Computation) -> str | None:
    """The opcode of a reducer body that is one op of ``REDUCE_UFUNCS`` applied to its two
    parameters (``add(p0, p1)``...), else None."""
    root = body.root
    params = body.parameters
    if len(params) != 2 or root.opcode not in REDUCE_UFUNCS or len(root.operands) != 2:
        return None
    if {id(o) for o in root.operands} != {id(p) for p in params}:
        return None
    return root.opcode


def _simple_reducer(body: Computation) -> np.ufunc | None:
    opcode = simple_reducer_opcode(body)
    return REDUCE_UFUNCS[opcode] if opcode is not None else None


def is_reducer_identity(ufunc: np.ufunc, init: np.ndarray) -> bool:
    """Whether combining with ``init`` leaves every value unchanged (so it can be skipped)."""
    v = init[()]
    dt = init.dtype
    if ufunc is np.add or ufunc is np.bitwise_or or ufunc is np.bitwise_xor:
        return not v
    if ufunc is np.multiply:
        return v == 1
    if ufunc is np.bitwise_and:
        return bool(np.all(np.invert(init) == 0))
    if dt == np.bool_:
        return bool(v) == (ufunc is np.minimum)
    if dtypes.is_integer(dt):
        info = np.iinfo(dt)
        return v == (info.min if ufunc is np.maximum else info.max)
    if dtypes.is_complex(dt):
        return False
    return v == (-np.inf if ufunc is np.maximum else np.inf)


def order_zeros(out, x: np.ndarray, is_max: bool, seen_along: Callable) -> np.ndarray:
    """``out``, a float maximum (``is_max``) or minimum of elements of ``x`` computed by
    NumPy's ufuncs (which keep either zero of a tie), with -0 below +0 as XLA orders them: a
    zero result is +0 (a minimum's -0) where ``seen_along(mask)`` finds such a zero in the
    mask of them over the elements that result covers, else the other zero."""
    if not np.any(out == 0):
        return out
    return order_zeros_seen(out, seen_along((x == 0) & (np.signbit(x) != is_max)), is_max)


def order_zeros_seen(out, seen, is_max: bool) -> np.ndarray:
    """``out`` with each zero made +0 for a maximum (``is_max``) where ``seen`` (a +0 met
    that result), else -0; for a minimum -0 where ``seen`` (a -0 met it), else +0."""
    return np.where(out == 0, np.where(seen == is_max, 0.0, -0.0).astype(out.dtype), out)


def simple_reduce(ufunc: np.ufunc, x: np.ndarray, axis, dtype=None,
                  initial=None) -> np.ndarray:
    """``ufunc.reduce(x, axis, dtype, initial)`` for a ``REDUCE_UFUNCS`` ufunc (``initial``:
    None or the reducer's identity); a float maximum or minimum orders -0 below +0 (as
    ``signed_zero_maximum`` does), whatever the positions of the zeros."""
    extra = {} if initial is None else {"initial": initial}
    out = ufunc.reduce(x, axis=axis, dtype=dtype, **extra)
    if (ufunc is np.maximum or ufunc is np.minimum) and dtypes.is_float(out.dtype):
        out = order_zeros(out, x, ufunc is np.maximum, lambda m: np.any(m, axis=axis))
    return out


def _reduce_fast(ufunc: np.ufunc, x: np.ndarray, init: np.ndarray, dims: tuple,
                 out_dtype: np.dtype) -> np.ndarray:
    kept = tuple(d for i, d in enumerate(x.shape) if i not in dims)
    if x.size == 0:
        return np.full(kept, init, dtype=out_dtype)
    with np.errstate(all="ignore"):
        out = simple_reduce(ufunc, x, dims, out_dtype)
        if not is_reducer_identity(ufunc, init):
            out = _SIGNED_ZERO_EXTREMES.get(ufunc, ufunc)(init, out)
    return np.asarray(out).astype(out_dtype, copy=False)


def apply_body(body: Computation, args: Sequence[np.ndarray], shape: tuple,
               out_dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
    """Evaluates a scalar ``body`` vectorized over arrays: its outputs broadcast to ``shape``
    and cast to ``out_dtypes`` (a list, also for a body returning one scalar)."""
    out = evaluate_computation(body, list(args))
    outs = list(out) if isinstance(out, tuple) else [out]
    return [np.broadcast_to(np.asarray(o), shape).astype(dt, copy=False)
            for o, dt in zip(outs, out_dtypes)]


def _reduce_general(body: Computation, inputs: Sequence[np.ndarray],
                    inits: Sequence[np.ndarray], dims: tuple) -> list[np.ndarray]:
    """Reduces with any body, evaluated vectorized over all kept positions.

    The reduced elements are combined pairwise in a tree (log2(n) body evaluations), each pair
    keeping its left-to-right order; the init value is combined last, on the left.
    """
    x0 = inputs[0]
    kept_axes = [i for i in range(x0.ndim) if i not in dims]
    kept = tuple(x0.shape[i] for i in kept_axes)
    out_dtypes = [i.dtype for i in inits]
    n = math.prod(x0.shape[i] for i in dims)
    vals = [np.transpose(x, kept_axes + list(dims)).reshape(kept + (n,)) for x in inputs]
    inits_b = [np.broadcast_to(i, kept) for i in inits]
    if n == 0:
        return [np.array(i) for i in inits_b]
    while n > 1:
        half = n // 2
        lhs = [v[..., 0:2 * half:2] for v in vals]
        rhs = [v[..., 1:2 * half:2] for v in vals]
        pairs = apply_body(body, lhs + rhs, kept + (half,), out_dtypes)
        if n % 2:
            pairs = [np.concatenate([p, v[..., -1:]], axis=-1) for p, v in zip(pairs, vals)]
        vals, n = pairs, half + n % 2
    outs = apply_body(body, inits_b + [v[..., 0] for v in vals], kept, out_dtypes)
    return [np.array(o) for o in outs]  # copies: no broadcast views escape


@eval_rule("reduce")
def _reduce(inst, *values):
    n = len(values) // 2
    inputs = [np.asarray(v) for v in values[:n]]
    inits = [np.asarray(v) for v in values[n:]]
    dims = tuple(sorted(inst.attrs["dimensions"]))
    body = inst.calls[0]
    if n == 1:
        ufunc = _simple_reducer(body)
        if ufunc is not None:
            return _reduce_fast(ufunc, inputs[0], inits[0], dims, inst.dtype)
        return _reduce_general(body, inputs, inits, dims)[0]
    return tuple(_reduce_general(body, inputs, inits, dims))
