"""Elementwise primitives: arithmetic, math functions, bitwise ops, comparisons, selection.

Each primitive is defined once with its NumPy impl and its dtype rule; the lax function of the
same name binds it. Binary operands must share a dtype; rank-0 operands, and dimensions of size
1 among operands of one rank, broadcast (as in JAX). Impls never warn or crash on bad values
(division by zero, domain errors): they give XLA's results.
"""

from __future__ import annotations

import builtins
import enum
import math
import sys
from typing import Any

import numpy as np

from ember import core, dtypes
from ember.compiler import eval_elementwise as K
from ember.compiler.hlo import Builder, Instruction, Shape
from ember.core import ShapedArray
from ember.interpreters import ad
from ember.lax import base, batch_util
from ember.lax.base import (
    all_dtypes,
    bool_dtypes,
    broadcasting_shape,
    check_dtype,
    check_same_dtypes,
    complex_dtypes,
    float_dtypes,
    inexact_dtypes,
    int_dtypes,
    numeric_dtypes,
    signed_numeric_dtypes,
    standard_primitive,
)

_int_float = int_dtypes + float_dtypes
_int_bool = int_dtypes + bool_dtypes
_low_floats = (dtypes.float16, dtypes.bfloat16)


def _unary_shape(x, **_):
    return x.shape


def _same_dtype_rule(name: str, allowed):
    def rule(x, **_):
        check_dtype(name, "x", x.dtype, allowed)
        return x.dtype
    return rule


def unop(name: str, impl, allowed=inexact_dtypes, result_dtype=None, weak_type_rule=None):
    """A unary elementwise primitive whose output has the input's shape (and dtype)."""
    dtype_rule = _same_dtype_rule(name, allowed)
    if result_dtype is not None:
        def dtype_rule(x, _check=dtype_rule, **params):
            _check(x)
            return result_dtype(x.dtype) if callable(result_dtype) else result_dtype
    return standard_primitive(name, impl, _unary_shape, dtype_rule, weak_type_rule)


def _binary_dtype_rule(name: str, allowed, result_dtype=None):
    def rule(*avals, **_):
        for arg, a in zip("xyz", avals):
            check_dtype(name, arg, a.dtype, allowed)
        dt = check_same_dtypes(name, *avals)
        return dt if result_dtype is None else result_dtype
    return rule


def binop(name: str, impl, allowed=numeric_dtypes, result_dtype=None, weak_type_rule=None):
    """An n-ary elementwise primitive over operands of one dtype (rank-0 ones broadcast)."""
    return standard_primitive(
        name, impl, lambda *avals, **_: broadcasting_shape(name, *avals),
        _binary_dtype_rule(name, allowed, result_dtype), weak_type_rule)


_errstate = K.quiet
_math = K.float_math


def _unary_doc(prim) -> str:
    return (f"Elementwise ``{prim.name}`` (lax semantics: no dtype promotion).\n\n"
            f"Example:\n    >>> lax.{prim.name}(x)")


def _unary(prim, doc: str | None = None):
    def fn(x: Any) -> Any:
        return prim.bind(base.as_operand(x, prim.name, "x"))
    fn.__name__ = fn.__qualname__ = prim.name
    fn.__doc__ = doc or _unary_doc(prim)
    return fn


def _binary(prim, name: str | None = None, doc: str | None = None):
    def fn(x: Any, y: Any) -> Any:
        x, y = base.scalars_like(prim.name, x, y)
        return prim.bind(x, y)
    fn.__name__ = fn.__qualname__ = name or prim.name
    fn.__doc__ = doc or (f"Elementwise ``{prim.name}`` of two arrays of the same dtype (lax "
                         f"semantics).\n\nExample:\n    >>> lax.{name or prim.name}(x, y)")
    return fn


# ---------------------------------------------------------------- arithmetic


add_p = binop("add", _errstate(np.add))
sub_p = binop("sub", _errstate(np.subtract))
mul_p = binop("mul", _errstate(np.multiply))
div_p = binop("div", K.divide)
rem_p = binop("rem", K.remainder, _int_float)
max_p = binop("max", K.signed_zero_maximum, all_dtypes)
min_p = binop("min", K.signed_zero_minimum, all_dtypes)
neg_p = unop("neg", _errstate(np.negative), numeric_dtypes)

add, sub, mul, div, rem = (_binary(p) for p in (add_p, sub_p, mul_p, div_p, rem_p))
max, min = _binary(max_p), _binary(min_p)  # noqa: A001 - lax's names
neg = _unary(neg_p)


sign_p = unop("sign", K.sign, numeric_dtypes)
floor_p = unop("floor", _math(np.floor), float_dtypes)
ceil_p = unop("ceil", _math(np.ceil), float_dtypes)


class RoundingMethod(enum.IntEnum):
    """How ``lax.round`` breaks ties: away from zero (C's round) or to the nearest even."""

    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def _round_impl(x, *, rounding_method):
    if rounding_method == RoundingMethod.TO_NEAREST_EVEN:
        return np.rint(x)
    return K.round_afz(x)


round_p = unop("round", _math(_round_impl), float_dtypes)


is_finite_p = unop("is_finite", K.is_finite, float_dtypes, result_dtype=dtypes.bool_)
sign, floor, ceil, is_finite = (_unary(p) for p in (sign_p, floor_p, ceil_p, is_finite_p))


def round(x: Any, rounding_method: int | RoundingMethod = RoundingMethod.AWAY_FROM_ZERO) -> Any:  # noqa: A001
    """Rounds to the nearest integer; ties away from zero (default) or to even.

    Example:
        >>> lax.round(jnp.array([0.5, 1.5]), lax.RoundingMethod.TO_NEAREST_EVEN)
        Array([0., 2.], dtype=float32)
    """
    try:
        method = RoundingMethod(int(rounding_method))
    except (ValueError, TypeError):
        raise ValueError(f"round: rounding_method must be a RoundingMethod (0 or 1), got "
                         f"{rounding_method!r}") from None
    return round_p.bind(base.as_operand(x, "round", "x"), rounding_method=method)


# ---------------------------------------------------------------- math functions


exp_p = unop("exp", _math(K.exp))
exp2_p = unop("exp2", _math(K.exp2))
expm1_p = unop("expm1", _math(K.expm1))
log_p = unop("log", _math(K.log))
log1p_p = unop("log1p", _math(K.log1p))
sqrt_p = unop("sqrt", _math(K.sqrt))
rsqrt_p = unop("rsqrt", _math(lambda x: 1 / np.sqrt(x)))
cbrt_p = unop("cbrt", _math(np.cbrt), float_dtypes)
logistic_p = unop("logistic", _math(K.logistic))
sin_p = unop("sin", _math(K.sin))
cos_p = unop("cos", _math(K.cos))
tan_p = unop("tan", _math(K.tan))
asin_p = unop("asin", _math(np.arcsin))
acos_p = unop("acos", _math(np.arccos))
atan_p = unop("atan", _math(np.arctan))
sinh_p = unop("sinh", _math(K.sinh))
cosh_p = unop("cosh", _math(K.cosh))
tanh_p = unop("tanh", _math(K.tanh))
asinh_p = unop("asinh", _math(np.arcsinh))
acosh_p = unop("acosh", _math(np.arccosh))
atanh_p = unop("atanh", _math(np.arctanh))
(asin, acos, atan, sinh, cosh, asinh, acosh, atanh) = (_unary(p) for p in (
    asin_p, acos_p, atan_p, sinh_p, cosh_p, asinh_p, acosh_p, atanh_p))


def _unary_with_accuracy(prim):
    """``_unary`` with JAX's ``accuracy`` keyword: a ``Tolerance`` or ``AccuracyMode`` the
    implementation must meet. ember's vector math is within 4 ulp everywhere (its accuracy
    tests), which meets every request XLA's CPU backend accepts, so one implementation
    serves them all; other values raise JAX's NotImplementedError."""
    def fn(x: Any, accuracy: Any = None) -> Any:
        if accuracy is not None:
            from ember.lax.dot_algorithms import AccuracyMode, Tolerance
            if not isinstance(accuracy, (Tolerance, AccuracyMode)):
                raise NotImplementedError(f"Accuracy {accuracy} not supported")
        return prim.bind(base.as_operand(x, prim.name, "x"))
    fn.__name__ = fn.__qualname__ = prim.name
    fn.__doc__ = _unary_doc(prim)
    return fn


(exp, exp2, expm1, log, log1p, sqrt, rsqrt, cbrt, logistic, sin, cos, tan, tanh) = (
    _unary_with_accuracy(p) for p in (exp_p, exp2_p, expm1_p, log_p, log1p_p, sqrt_p, rsqrt_p,
                                      cbrt_p, logistic_p, sin_p, cos_p, tan_p, tanh_p))

atan2_p = binop("atan2", _math(np.arctan2), float_dtypes)
atan2 = _binary(atan2_p)


def _abs_dtype(x, **_):
    check_dtype("abs", "x", x.dtype, signed_numeric_dtypes)
    return {dtypes.complex64: dtypes.float32, dtypes.complex128: dtypes.float64}.get(
        x.dtype, x.dtype)


abs_p = standard_primitive("abs", _errstate(K.absolute), _unary_shape, _abs_dtype)
abs = _unary(abs_p)  # noqa: A001


square_p = unop("square", K.square, numeric_dtypes)
square = _unary(square_p)


def _nextafter_impl(x, y):
    return np.nextafter(x, y)


nextafter_p = binop("nextafter", _nextafter_impl, float_dtypes)
nextafter = _binary(nextafter_p)


# pow: x is float/complex; y has x's dtype or is an integer array (JAX allows both).
def _pow_dtype(x, y, **_):
    check_dtype("pow", "x", x.dtype, inexact_dtypes)
    if not dtypes.is_integer(y.dtype) and y.dtype != x.dtype:
        raise TypeError(f"pow: exponent y must have the dtype of x ({x.dtype}) or an integer "
                        f"dtype, got {y.dtype}")
    return x.dtype


pow_p = standard_primitive("pow", K.power, lambda x, y, **_: broadcasting_shape("pow", x, y),
                           _pow_dtype, lambda x, y, **_: x.weak_type and y.weak_type)


def pow(x: Any, y: Any) -> Any:  # noqa: A001
    """``x ** y`` elementwise; ``x`` floating or complex, ``y`` of x's dtype or an integer.

    Example:
        >>> lax.pow(jnp.float32(2), jnp.int32(3))
        Array(8., dtype=float32)
    """
    x = base.as_operand(x, "pow", "x")
    y = base.as_operand(y, "pow", "y")
    if dtypes.is_python_scalar(x) and not dtypes.is_python_scalar(y):
        ydt = core.get_aval(y).dtype
        if dtypes.is_complex(type(x)):  # (a Python complex)
            xdt = ydt if dtypes.is_complex(ydt) else dtypes.default_complex_dtype()
        else:
            xdt = ydt if dtypes.is_inexact(ydt) else dtypes.default_float_dtype()
        x = base.concrete_dtype_like(x, xdt, True)
    elif dtypes.is_python_scalar(y) and not dtypes.is_python_scalar(x):
        xdt = core.get_aval(x).dtype
        y = base.concrete_dtype_like(
            y, dtypes.default_int_dtype() if isinstance(y, int) else xdt, True)
    return pow_p.bind(x, y)


def _integer_pow_impl(x, *, y):
    # Square-and-multiply, in the order of the lowering (``_power_by_squaring``, as XLA
    # computes it), so eager and jitted results have the same bits: integers wrap, float16 and
    # bfloat16 work in float32, ``x ** -n`` is ``1 / x ** n``. (NumPy's ``power`` rounds
    # x ** 3 once where the product of three rounds twice, and takes ~5x as long for x ** 2.)
    # Negative integer powers never get here: the wrapper rejects them.
    with np.errstate(all="ignore"):
        work = x.astype(np.float32) if x.dtype in _low_floats else x
        dt, n = work.dtype, -y if y < 0 else y
        acc, sq = None, work
        while n:
            if n & 1:
                acc = sq if acc is None else np.multiply(acc, sq, dtype=dt)
            n >>= 1
            if n:
                sq = np.multiply(sq, sq, dtype=dt)
        if acc is None:
            acc = np.ones_like(work)
        if y < 0:
            acc = np.divide(np.ones((), dt), acc, dtype=dt)
        if acc is x:  # (x ** 1: a new array all the same)
            return np.array(x, copy=True)
        return acc.astype(x.dtype, copy=False)


integer_pow_p = unop("integer_pow", _integer_pow_impl, numeric_dtypes)
_integer_pow_abstract_eval = integer_pow_p.abstract_eval


@integer_pow_p.def_abstract_eval
def _integer_pow_checked(x, *, y):
    if y < 0 and dtypes.is_integer(x.dtype):  # JAX's error, raised before any work
        dims = ",".join(str(d) for d in x.shape)
        raise TypeError(f"Integers cannot be raised to negative powers, got "
                        f"integer_pow({x.dtype.name}[{dims}], {int(y)})")
    return _integer_pow_abstract_eval(x, y=y)


def integer_pow(x: Any, y: int) -> Any:
    """``x ** y`` for a static Python integer ``y`` (computed by repeated multiplication).

    Example:
        >>> lax.integer_pow(jnp.array([2.0, 3.0]), 3)
        Array([ 8., 27.], dtype=float32)
    """
    if isinstance(y, (float, np.floating)) and float(y).is_integer():
        y = int(y)  # (JAX accepts an integral float: integer_pow(x, 2.0))
    if isinstance(y, bool) or not isinstance(y, (int, np.integer)):
        raise TypeError(f"integer_pow: exponent y must be a Python integer, got {y!r}")
    x = base.as_operand(x, "integer_pow", "x")
    return integer_pow_p.bind(x, y=int(y))


def reciprocal(x: Any) -> Any:
    """``1 / x`` elementwise (``integer_pow(x, -1)``).

    Example:
        >>> lax.reciprocal(jnp.array([2.0]))
        Array([0.5], dtype=float32)
    """
    return integer_pow(x, -1)


# ---------------------------------------------------------------- special functions
# Computed in float64 with NumPy (eager reference implementations), cast to the input dtype.


erf_p = unop("erf", K.erf, float_dtypes)
erfc_p = unop("erfc", K.erfc, float_dtypes)
erf_inv_p = unop("erf_inv", K.erf_inv, float_dtypes)
lgamma_p = unop("lgamma", K.lgamma, float_dtypes)
digamma_p = unop("digamma", K.digamma, float_dtypes)
erf, erfc, erf_inv, lgamma, digamma = (_unary(p) for p in (
    erf_p, erfc_p, erf_inv_p, lgamma_p, digamma_p))


# ---------------------------------------------------------------- bitwise


not_p = unop("not", np.invert, _int_bool)
and_p = binop("and", np.bitwise_and, _int_bool)
or_p = binop("or", np.bitwise_or, _int_bool)
xor_p = binop("xor", np.bitwise_xor, _int_bool)
bitwise_not = _unary(not_p)
bitwise_and = _binary(and_p, "bitwise_and")
bitwise_or = _binary(or_p, "bitwise_or")
bitwise_xor = _binary(xor_p, "bitwise_xor")
bitwise_not.__name__ = bitwise_not.__qualname__ = "bitwise_not"


shift_left_p = binop("shift_left", K.shift_left, int_dtypes)
shift_right_arithmetic_p = binop("shift_right_arithmetic", K.shift_right_arithmetic,
                                 int_dtypes)
shift_right_logical_p = binop("shift_right_logical", K.shift_right_logical, int_dtypes)
shift_left, shift_right_arithmetic, shift_right_logical = (_binary(p) for p in (
    shift_left_p, shift_right_arithmetic_p, shift_right_logical_p))


population_count_p = unop("population_count", K.popcnt, int_dtypes)
clz_p = unop("clz", K.count_leading_zeros, int_dtypes)
population_count, clz = _unary(population_count_p), _unary(clz_p)


# ---------------------------------------------------------------- comparisons


def _compare(name, ufunc):
    def impl(x, y):
        with np.errstate(invalid="ignore"):  # NaN compares false (bfloat16 ufuncs warn)
            return ufunc(x, y)
    # Weak when every operand is weak (JAX: jnp.arange(3) < 1.5 is a weakly typed bool).
    return binop(name, impl, all_dtypes, result_dtype=dtypes.bool_)


eq_p = _compare("eq", np.equal)
ne_p = _compare("ne", np.not_equal)
lt_p = _compare("lt", np.less)
le_p = _compare("le", np.less_equal)
gt_p = _compare("gt", np.greater)
ge_p = _compare("ge", np.greater_equal)
eq, ne, lt, le, gt, ge = (_binary(p) for p in (eq_p, ne_p, lt_p, le_p, gt_p, ge_p))


# ---------------------------------------------------------------- selection


def _select_n_shape(which, *cases, **_):
    if not cases:
        raise ValueError("select_n: at least one case is required")
    shape = cases[0].shape
    for i, c in enumerate(cases):
        if c.shape != shape:
            raise TypeError(f"select_n: all cases must have the same shape, got case 0 of "
                            f"shape {shape} and case {i} of shape {c.shape}")
    if which.shape not in ((), shape):
        raise TypeError(f"select_n: which must be a scalar or have the cases' shape {shape}, "
                        f"got shape {which.shape}")
    return shape


def _select_n_dtype(which, *cases, **_):
    if which.dtype not in (dtypes.bool_, dtypes.int32):
        raise TypeError(f"select_n: which must be a boolean or int32 array, got {which.dtype}")
    if which.dtype == dtypes.bool_ and len(cases) > 2:
        raise TypeError(f"select_n: a boolean which selects between at most 2 cases, got "
                        f"{len(cases)}")
    dts = {c.dtype for c in cases}
    if len(dts) != 1:
        raise TypeError(f"select_n: all cases must have the same dtype, got "
                        f"{', '.join(str(c.dtype) for c in cases)}")
    return cases[0].dtype


def _select_n_impl(which, *cases):
    if len(cases) == 1:
        return np.array(cases[0], copy=True)
    if which.dtype == np.bool_:
        return np.where(which, cases[1], cases[0])
    idx = np.clip(which, 0, len(cases) - 1)
    return np.choose(idx, cases)


select_n_p = standard_primitive(
    "select_n", _select_n_impl, _select_n_shape, _select_n_dtype,
    lambda which, *cases, **_: all(c.weak_type for c in cases))


def select_n(which: Any, *cases: Any) -> Any:
    """Picks ``cases[which]`` elementwise (``which`` is bool for 2 cases, or an integer:
    other integer types than int32 are converted to it, as JAX accepts them).

    Example:
        >>> lax.select_n(jnp.array([True, False]), jnp.zeros(2), jnp.ones(2))
        Array([1., 0.], dtype=float32)
    """
    which = base.as_operand(which, "select_n", "which")
    which_dtype = core.get_aval(which).dtype
    if which_dtype.kind in "iu" and which_dtype != dtypes.int32:  # (cheap: jnp.where's path)
        which = convert_element_type(which, dtypes.int32)
    cases = base.scalars_like("select_n", *cases) if cases else ()
    return select_n_p.bind(which, *cases)


def select(pred: Any, on_true: Any, on_false: Any) -> Any:
    """``on_true`` where ``pred`` else ``on_false`` (``select_n(pred, on_false, on_true)``).

    Example:
        >>> lax.select(jnp.array([True]), jnp.ones(1), jnp.zeros(1))
        Array([1.], dtype=float32)
    """
    return select_n(pred, on_false, on_true)


def _clamp_shape(lo, x, hi, **_):
    for arg, a in (("min", lo), ("max", hi)):
        if a.shape not in ((), x.shape):
            raise TypeError(f"clamp: {arg} must be a scalar or have the operand's shape "
                            f"{x.shape}, got shape {a.shape}")
    return x.shape


def _clamp_dtype(lo, x, hi, **_):
    check_dtype("clamp", "x", x.dtype, all_dtypes)
    if lo.dtype != x.dtype or hi.dtype != x.dtype:
        raise TypeError(f"clamp requires min, x and max to have the same dtypes, got "
                        f"{lo.dtype}, {x.dtype}, {hi.dtype}.")
    return x.dtype


clamp_p = standard_primitive("clamp", K.clamp, _clamp_shape, _clamp_dtype)


def clamp(min: Any, x: Any, max: Any) -> Any:  # noqa: A002
    """Clamps ``x`` to ``[min, max]`` (bounds are scalars or have x's shape).

    Example:
        >>> lax.clamp(0.0, jnp.array([-1.0, 2.0]), 1.0)
        Array([0., 1.], dtype=float32)
    """
    lo, xx, hi = (base.as_operand(a, "clamp", n) for a, n in ((min, "min"), (x, "x"),
                                                             (max, "max")))
    if not dtypes.is_python_scalar(xx):
        dt = core.get_aval(xx).dtype
        lo, hi = (base.concrete_dtype_like(a, dt, True) if dtypes.is_python_scalar(a) else a
                  for a in (lo, hi))
    return clamp_p.bind(lo, xx, hi)


# ---------------------------------------------------------------- complex numbers


def _real_dtype(name):
    def rule(x, **_):
        check_dtype(name, "x", x.dtype, complex_dtypes)
        return dtypes.float32 if x.dtype == dtypes.complex64 else dtypes.float64
    return rule


def _to_complex(dt: np.dtype) -> np.dtype:
    return dtypes.complex128 if dt in (dtypes.float64, dtypes.complex128) else dtypes.complex64


real_p = standard_primitive("real", lambda x: np.array(np.real(x)), _unary_shape,
                            _real_dtype("real"))
imag_p = standard_primitive("imag", lambda x: np.array(np.imag(x)), _unary_shape,
                            _real_dtype("imag"))


def _conj_dtype(x, *, input_dtype):
    # (JAX's rule: float16/bfloat16 have no complex counterpart)
    check_dtype("conj", "x", x.dtype, (dtypes.float32, dtypes.float64) + complex_dtypes)
    return _to_complex(x.dtype)


conj_p = standard_primitive("conj", lambda x, *, input_dtype: np.conj(x.astype(
    _to_complex(x.dtype))), _unary_shape, _conj_dtype)


def _complex_dtype(x, y, **_):
    for arg, a in (("x", x), ("y", y)):
        check_dtype("complex", arg, a.dtype, (dtypes.float32, dtypes.float64))
    return _to_complex(check_same_dtypes("complex", x, y))


complex_p = standard_primitive(
    "complex", lambda x, y: K.make_complex(x, y).astype(_to_complex(x.dtype), copy=False),
    lambda x, y, **_: broadcasting_shape("complex", x, y), _complex_dtype)
real, imag = _unary(real_p), _unary(imag_p)
complex = _binary(complex_p)  # noqa: A001


def conj(x: Any) -> Any:
    """Complex conjugate; real inputs give a complex result, as in JAX.

    Example:
        >>> lax.conj(jnp.array([1 + 2j]))
        Array([1.-2.j], dtype=complex64)
    """
    x = base.as_operand(x, "conj", "x")
    return conj_p.bind(x, input_dtype=core.get_aval(x).dtype)


copy_p = unop("copy", lambda x: np.array(x, copy=True), all_dtypes)


# ---------------------------------------------------------------- reduce_precision


def _reduce_precision_impl(x, *, exponent_bits, mantissa_bits):
    return K.reduce_precision(x, exponent_bits, mantissa_bits)


reduce_precision_p = unop("reduce_precision", _reduce_precision_impl, float_dtypes)


def reduce_precision(operand: Any, exponent_bits: int, mantissa_bits: int) -> Any:
    """Rounds ``operand`` to a float format with the given exponent and mantissa bits.

    Example:
        >>> lax.reduce_precision(jnp.array([1.1]), exponent_bits=8, mantissa_bits=7)
        Array([1.1015625], dtype=float32)
    """
    for name, v, lo in (("exponent_bits", exponent_bits, 1), ("mantissa_bits", mantissa_bits,
                                                              0)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"reduce_precision: {name} must be an integer, got {v!r}")
        if v < lo:
            raise ValueError(f"reduce_precision: {name} must be an integer >= {lo}, got {v!r}")
    return reduce_precision_p.bind(base.as_operand(operand, "reduce_precision"),
                                   exponent_bits=int(exponent_bits),
                                   mantissa_bits=int(mantissa_bits))


# ---------------------------------------------------------------- conversion


def _convert_impl(x, *, new_dtype, weak_type):
    return K.convert(x, new_dtype)


convert_element_type_p = standard_primitive(
    "convert_element_type", _convert_impl,
    lambda x, **_: x.shape,
    lambda x, *, new_dtype, weak_type: new_dtype,
    lambda x, *, new_dtype, weak_type: weak_type)


# Python scalar -> concrete array conversions, memoized (arrays are immutable, so sharing is
# safe). Floats equal to zero or NaN are not memoized: -0.0 == 0.0 and NaN != NaN.
_scalar_cache: dict = {}


# Python scalars NumPy casts on its own exactly like ``convert`` (no overflow, no wrapping):
# dtype -> (the largest float, the largest int, that converts exactly or without a warning;
# None: convert). The common case skips ``convert``'s error state and warning filters (~0.1
# ms the first time in a process).
# (The float limits are float32's and float64's largest finite values, written out: the
# first ``np.finfo`` of each costs ~40 µs of ``import ember``.)
_PLAIN_CASTS = {np.dtype(np.float32): (3.4028234663852886e38, 2 ** 24),
                np.dtype(np.float64): (sys.float_info.max, 2 ** 53),
                np.dtype(np.int32): (None, 2 ** 31 - 1),
                np.dtype(np.int64): (None, 2 ** 63 - 1)}


def _plain_cast(x: Any, new_dtype: np.dtype) -> bool:
    """Whether ``np.array(x, new_dtype)`` is the conversion of the Python scalar ``x``."""
    limits = _PLAIN_CASTS.get(new_dtype)
    if limits is None:
        return False
    if type(x) is float:
        top = limits[0]
        return top is not None and (x != x or math.isinf(x) or -top <= x <= top)
    return type(x) is int and -limits[1] <= x <= limits[1]


def _convert_python_scalar(x: Any, new_dtype: np.dtype, weak_type: bool) -> Any:
    cacheable = not (type(x) is float and (x == 0.0 or x != x))
    key = (type(x), x, new_dtype, weak_type)
    if cacheable:
        out = _scalar_cache.get(key)
        if out is not None:
            return out
    if _plain_cast(x, new_dtype):
        value = np.array(x, new_dtype)
    elif type(x) is int:
        # Like JAX, a C-style cast from 64 bits: convert_element_type(300, int8) wraps to 44.
        # (jnp functions reject Python ints outside the default int type before this.)
        if not -2 ** 63 <= x < 2 ** 64:
            raise OverflowError(f"Python int {x} too large to convert to {new_dtype}")
        src = np.asarray(x, np.int64 if x < 2 ** 63 else np.uint64)
        value = np.asarray(_convert_impl(src, new_dtype=new_dtype, weak_type=weak_type))
    else:
        value = np.asarray(_convert_impl(np.asarray(x, dtypes.dtype(x, canonicalize=True)),
                                         new_dtype=new_dtype, weak_type=weak_type))
    out = core.concrete_array(value, ShapedArray((), new_dtype, weak_type))
    if cacheable:
        if len(_scalar_cache) > 1024:
            _scalar_cache.clear()
        _scalar_cache[key] = out
    return out


def convert_element_type(operand: Any, new_dtype: Any, weak_type: bool = False) -> Any:
    """Casts ``operand`` to ``new_dtype`` (canonicalized); a no-op when nothing changes.

    Example:
        >>> lax.convert_element_type(jnp.array([1.5]), jnp.int32)
        Array([1], dtype=int32)
    """
    aval = getattr(operand, "aval", None)
    if aval is not None and aval.weak_type == weak_type and aval.dtype == new_dtype:
        return operand  # fast path: arrays and tracers already of the (canonical) type
    operand = base.as_operand(operand, "convert_element_type")
    new_dtype = dtypes.canonicalize_dtype(dtypes.dtype(new_dtype))
    if type(operand) in (int, float, bool):
        return _convert_python_scalar(operand, new_dtype, bool(weak_type))
    if not isinstance(operand, core.Tracer):
        aval = core.get_aval(operand)
        if aval.dtype == new_dtype and aval.weak_type == weak_type and \
                not dtypes.is_python_scalar(operand) and hasattr(operand, "aval"):
            return operand
        # Concrete values convert without staging anything (keeps jaxprs free of
        # conversions of constants, as in JAX).
        value = _convert_impl(np.asarray(operand, aval.dtype), new_dtype=new_dtype,
                              weak_type=weak_type)
        return core.concrete_array(np.asarray(value), ShapedArray(np.shape(value), new_dtype,
                                                                  weak_type))
    aval = operand.aval
    if aval.dtype == new_dtype and aval.weak_type == weak_type:
        return operand
    return convert_element_type_p.bind(operand, new_dtype=new_dtype, weak_type=bool(weak_type))


# ---------------------------------------------------------------- autodiff rules
# JVP rules use only lax ops that have rules themselves, so derivatives nest to any order.
# Rank-0 operands of n-ary ops broadcast: their tangents are broadcast to the output shape
# and their cotangents summed back to rank 0. ``full_of``, ``zeros_of``, ``instantiate`` and
# ``def_transpose`` are shared with the other lax modules' rules.


def _shape_of(x: Any) -> tuple[int, ...]:
    return x.aval.shape if ad.is_undefined_primal(x) else core.get_aval(x).shape


def _out_shape(*xs: Any) -> tuple[int, ...]:
    return base.broadcast_dims("lax", *(_shape_of(x) for x in xs))


def _bcast(t: Any, shape: tuple[int, ...]) -> Any:
    """``t`` (rank 0, or of ``shape`` up to dimensions of size 1) broadcast to ``shape``."""
    t_shape = core.get_aval(t).shape
    if t_shape == tuple(shape):
        return t
    from ember.lax.shape import broadcast_in_dim  # shape.py imports this module
    return broadcast_in_dim(t, shape, tuple(range(len(t_shape))))


def _unbcast(x: Any, ct: Any) -> Any:
    """Cotangent ``ct`` of a broadcasting op, summed down to operand ``x``'s shape."""
    shape, ct_shape = _shape_of(x), core.get_aval(ct).shape
    if shape == ct_shape:
        return ct
    from ember.lax.reduction import reduce_sum  # reduction.py imports this module
    if not shape:
        return reduce_sum(ct, tuple(range(len(ct_shape))))
    from ember.lax.shape import reshape
    summed = tuple(i for i, (d, c) in enumerate(zip(shape, ct_shape)) if d != c)
    return reshape(reduce_sum(ct, summed), shape)


def full_of(shape: tuple[int, ...], value: Any, dtype: Any) -> Any:
    """A ``dtype`` array of ``shape`` filled with ``value`` (staged when tracing)."""
    return _bcast(convert_element_type(value, dtype), shape)


def zeros_of(x: Any) -> Any:
    """Zeros like ``x``: a value, a ``Zero``, an ``UndefinedPrimal`` or an abstract value
    (its weak type too, as JAX's ``full_like``: a rule mixing them into a cotangent keeps
    the cotangent's weak type, so the gradient of a weak value through ``where`` is weak)."""
    aval = x if isinstance(x, ShapedArray) else x.aval if isinstance(
        x, (ad.Zero, ad.UndefinedPrimal)) else core.get_aval(x)
    return _bcast(convert_element_type(0, aval.dtype, aval.weak_type), aval.shape)


def instantiate(t: Any) -> Any:
    """A tangent with a symbolic ``Zero`` replaced by zeros."""
    return zeros_of(t) if type(t) is ad.Zero else t


def _cts(args: tuple, *cts: Any) -> list[Any]:
    """One cotangent per argument: the given one for linear arguments, None for the rest."""
    return [ct if ad.is_undefined_primal(a) else None for a, ct in zip(args, cts)]


def def_transpose(prim, rule) -> None:
    """``prim.transpose`` from ``rule(ct, *args, **params)``; a symbolic zero ``ct`` gives
    zero cotangents without calling it."""
    def transpose(ct, *args, **params):
        if type(ct) is ad.Zero:
            return [ad.Zero(a.aval) if ad.is_undefined_primal(a) else None for a in args]
        return rule(ct, *args, **params)
    prim.def_transpose(transpose)


def _def_transpose_bcast(prim, rule) -> None:
    """Like ``def_transpose``; the cotangents of rank-0 operands are summed to rank 0."""
    def_transpose(prim, lambda ct, *args: [
        None if c is None else _unbcast(a, c) for a, c in zip(args, rule(ct, *args))])


def _add_jvp(primals, tangents):
    x, y = primals
    out = add_p.bind(x, y)
    shape = core.get_aval(out).shape
    tx, ty = (t if type(t) is ad.Zero else _bcast(t, shape) for t in tangents)
    if type(tx) is ad.Zero and type(ty) is ad.Zero:
        return out, ad.Zero.from_primal_value(out)
    return out, ad.add_tangents(tx, ty)


add_p.def_jvp(_add_jvp)
_def_transpose_bcast(add_p, lambda ct, x, y: _cts((x, y), ct, ct))
ad.defjvp(sub_p, lambda g, x, y: _bcast(g, _out_shape(x, y)),
          lambda g, x, y: _bcast(neg(g), _out_shape(x, y)))
_def_transpose_bcast(sub_p, lambda ct, x, y: _cts((x, y), ct, neg(ct)))


def _mul_transpose(ct, x, y):
    if ad.is_undefined_primal(x) == ad.is_undefined_primal(y):
        raise ValueError("mul: cannot transpose a product of two linear operands")
    if ad.is_undefined_primal(x):
        return [_unbcast(x, mul(ct, y)), None]
    return [None, _unbcast(y, mul(x, ct))]


ad.defjvp(mul_p, lambda g, x, y: mul(g, y), lambda g, x, y: mul(x, g))
def_transpose(mul_p, _mul_transpose)


def _div_transpose(ct, x, y):
    if ad.is_undefined_primal(y):
        raise ValueError("div: cannot transpose with respect to the divisor (it is not linear)")
    return [_unbcast(x, div(ct, y)), None]


ad.defjvp(div_p, lambda g, x, y: div(_bcast(g, _out_shape(x, y)), y),
          lambda g, x, y: div(mul(neg(g), x), integer_pow(y, 2)))
def_transpose(div_p, _div_transpose)
ad.defjvp(rem_p, lambda g, x, y: _bcast(g, _out_shape(x, y)),
          lambda g, x, y: mul(neg(g), mul(sign(div(x, y)), floor(abs(div(x, y))))))


def _balanced_eq(x, z, y):
    """1 where ``x`` alone attains ``z``, 0.5 where ``x`` and ``y`` both do, else 0 (JAX's
    split of a max/min gradient at ties)."""
    aval = core.get_aval(z)  # (the constants take its weak type, as JAX's full_like does)
    one, half, zero = (_bcast(convert_element_type(v, aval.dtype, aval.weak_type), aval.shape)
                       for v in (1, 0.5, 0))
    return select(eq(x, z), select(eq(y, z), half, one), zero)


for _p in (max_p, min_p):
    ad.defjvp2(_p, lambda g, ans, x, y: mul(g, _balanced_eq(x, ans, y)),
               lambda g, ans, x, y: mul(g, _balanced_eq(y, ans, x)))
ad.deflinear(neg_p, lambda ct: [neg(ct)])
# nextafter has no derivative rule, as in JAX.
for _p in (sign_p, floor_p, ceil_p, round_p, is_finite_p):
    ad.defjvp_zero(_p)


def _trigamma(x):
    """polygamma(1, x) from lax ops (the derivative of digamma): the recurrence
    psi1(x) = psi1(x + 1) + 1/x**2 up to x + 8, then the asymptotic series; reflection
    psi1(x) = pi**2 / sin(pi x)**2 - psi1(1 - x) below 0.5."""
    reflect = lt(x, 0.5)
    z = select(reflect, sub(1.0, x), x)
    acc = None
    for k in range(8):
        term = integer_pow(add(z, float(k)), -2)
        acc = term if acc is None else add(acc, term)
    r = integer_pow(add(z, 8.0), -1)
    r2 = mul(r, r)
    series = 5 / 66
    for c in (-1 / 30, 1 / 42, -1 / 30, 1 / 6):  # Bernoulli-number coefficients
        series = add(mul(series, r2), c)
    series = mul(r, add(1.0, mul(r, add(0.5, mul(r, series)))))
    psi1 = add(acc, series)
    pi2 = math.pi ** 2
    out = select(reflect, sub(div(pi2, square(sin(mul(x, math.pi)))), psi1), psi1)
    # (a pole at 0, -1, -2, ... and -inf: inf as polygamma(1, x) gives, where sin(pi x)
    # rounded to a tiny nonzero value would leave a huge finite one)
    pole = bitwise_and(le(x, 0.0), eq(floor(x), x))
    aval = core.get_aval(x)
    inf = _bcast(convert_element_type(math.inf, aval.dtype, aval.weak_type), aval.shape)
    return select(pole, inf, out)


_sqrt_pi = math.sqrt(math.pi)
ad.defjvp2(exp_p, lambda g, ans, x: mul(g, ans))
ad.defjvp2(exp2_p, lambda g, ans, x: mul(g, mul(ans, math.log(2.0))))
ad.defjvp2(expm1_p, lambda g, ans, x: mul(g, add(ans, 1.0)))
ad.defjvp(log_p, lambda g, x: div(g, x))
ad.defjvp(log1p_p, lambda g, x: div(g, add(x, 1.0)))
ad.defjvp2(sqrt_p, lambda g, ans, x: div(g, mul(ans, 2.0)))
ad.defjvp2(rsqrt_p, lambda g, ans, x: mul(g, mul(div(ans, x), -0.5)))
ad.defjvp2(cbrt_p, lambda g, ans, x: mul(g, mul(integer_pow(ans, -2), 1 / 3)))
ad.defjvp2(logistic_p, lambda g, ans, x: mul(g, mul(ans, sub(1.0, ans))))
ad.defjvp(sin_p, lambda g, x: mul(g, cos(x)))
ad.defjvp(cos_p, lambda g, x: neg(mul(g, sin(x))))
ad.defjvp2(tan_p, lambda g, ans, x: mul(g, add(square(ans), 1.0)))
ad.defjvp(asin_p, lambda g, x: mul(g, rsqrt(sub(1.0, square(x)))))
ad.defjvp(acos_p, lambda g, x: neg(mul(g, rsqrt(sub(1.0, square(x))))))
ad.defjvp(atan_p, lambda g, x: div(g, add(square(x), 1.0)))
ad.defjvp(sinh_p, lambda g, x: mul(g, cosh(x)))
ad.defjvp(cosh_p, lambda g, x: mul(g, sinh(x)))
ad.defjvp2(tanh_p, lambda g, ans, x: mul(g, sub(1.0, square(ans))))
ad.defjvp(asinh_p, lambda g, x: mul(g, rsqrt(add(square(x), 1.0))))
# x*x - 1 as JAX (not (x-1)*(x+1), which is -0 at x = -1: rsqrt(-0) = -inf where JAX has +inf).
ad.defjvp(acosh_p, lambda g, x: mul(g, rsqrt(sub(square(x), 1.0))))
ad.defjvp(atanh_p, lambda g, x: div(g, mul(add(x, 1.0), sub(1.0, x))))
ad.defjvp(atan2_p, lambda g, x, y: mul(g, div(y, add(square(x), square(y)))),
          lambda g, x, y: mul(g, div(neg(x), add(square(x), square(y)))))


def _abs_jvp(g, ans, x):
    if dtypes.is_complex(core.get_aval(x).dtype):  # d|x| = re(conj(x) dx) / |x|
        safe = select(eq(ans, 0.0), full_of(core.get_aval(ans).shape, 1, ans.dtype), ans)
        return div(real(mul(conj(x), g)), safe)
    return select(ge(x, 0.0), g, neg(g))  # JAX's convention: slope 1 at 0 (a float 0: x is real)


ad.defjvp2(abs_p, _abs_jvp)
ad.defjvp(square_p, lambda g, x: mul(g, mul(x, 2.0)))


def _pow_jvp_x(g, x, y):
    xdt = core.get_aval(x).dtype
    if dtypes.is_integer(core.get_aval(y).dtype):
        yx = convert_element_type(y, xdt)
        jac = mul(yx, pow(x, sub(y, 1)))
        jac = select(eq(yx, 0), zeros_of(jac), jac)
    else:  # (in the result's dtype, not weakly typed: as JAX's rule converts them)
        x, y = convert_element_type(x, xdt), convert_element_type(y, xdt)
        jac = mul(y, pow(x, sub(y, 1.0)))
    return mul(g, jac)


def _pow_jvp_y(g, ans, x, y):
    aval = core.get_aval(x)  # (the ones take its weak type, as JAX's full_like does)
    safe_x = select(eq(x, 0), _bcast(convert_element_type(1, aval.dtype, aval.weak_type),
                                     aval.shape), x)
    return mul(g, mul(log(safe_x), ans))


def _pow_jvp(primals, tangents):
    x, y = primals
    gx, gy = tangents
    out = pow_p.bind(x, y)
    shape = core.get_aval(out).shape
    terms = []
    if type(gx) is not ad.Zero:
        terms.append(_bcast(_pow_jvp_x(gx, x, y), shape))
    if type(gy) is not ad.Zero:
        terms.append(_bcast(_pow_jvp_y(gy, out, x, y), shape))
    if not terms:
        return out, ad.Zero.from_primal_value(out)
    return out, terms[0] if len(terms) == 1 else ad.add_tangents(*terms)


pow_p.def_jvp(_pow_jvp)


def _integer_pow_jvp(g, x, *, y):
    if y == 0:
        return zeros_of(g)
    return mul(g, mul(integer_pow(x, y - 1), float(y)))


ad.defjvp(integer_pow_p, _integer_pow_jvp)
ad.defjvp(erf_p, lambda g, x: mul(g, mul(exp(neg(square(x))), 2 / _sqrt_pi)))
ad.defjvp(erfc_p, lambda g, x: mul(g, mul(exp(neg(square(x))), -2 / _sqrt_pi)))
ad.defjvp2(erf_inv_p, lambda g, ans, x: mul(g, mul(exp(square(ans)), _sqrt_pi / 2)))
ad.defjvp(lgamma_p, lambda g, x: mul(g, digamma(x)))
ad.defjvp(digamma_p, lambda g, x: mul(g, _trigamma(x)))
for _p in (not_p, and_p, or_p, xor_p, shift_left_p, shift_right_arithmetic_p,
           shift_right_logical_p, population_count_p, clz_p, eq_p, ne_p, lt_p, le_p, gt_p,
           ge_p):
    ad.defjvp_zero(_p)


def _select_n_jvp(primals, tangents):
    which, *cases = primals
    out = select_n_p.bind(which, *cases)
    ts = tangents[1:]
    if all(type(t) is ad.Zero for t in ts):
        return out, ad.Zero.from_primal_value(out)
    return out, select_n_p.bind(which, *(instantiate(t) for t in ts))


def _select_n_transpose(ct, which, *cases):
    if ad.is_undefined_primal(which):
        raise ValueError("select_n: cannot transpose with respect to the predicate 'which'")
    zeros = zeros_of(ct)
    return [None] + _cts(cases, *(
        select_n(which, *(ct if j == i else zeros for j in range(len(cases))))
        for i in range(len(cases))))


select_n_p.def_jvp(_select_n_jvp)
def_transpose(select_n_p, _select_n_transpose)


def _clamp_term(g, pred):
    shape = core.get_aval(pred).shape
    g = _bcast(g, shape)
    return select(pred, g, zeros_of(g))


ad.defjvp(clamp_p,
          lambda g, lo, x, hi: _clamp_term(g, bitwise_and(gt(lo, x), lt(lo, hi))),
          lambda g, lo, x, hi: _clamp_term(g, bitwise_and(gt(x, lo), lt(x, hi))),
          lambda g, lo, x, hi: _clamp_term(g, lt(hi, x)))
# (JAX's transposes pair the cotangent with a NumPy zero: the result is never weakly typed)
ad.deflinear(real_p, lambda ct: [complex(ct, np.zeros((), core.get_aval(ct).dtype))])
ad.deflinear(imag_p, lambda ct: [complex(np.zeros((), core.get_aval(ct).dtype), neg(ct))])
ad.deflinear(complex_p, lambda ct: None)  # the jvp; the transpose rule follows
_def_transpose_bcast(complex_p, lambda ct, x, y: _cts((x, y), real(ct), imag(neg(ct))))
ad.deflinear2(conj_p, lambda ct, x, *, input_dtype: [
    conj(ct) if dtypes.is_complex(input_dtype) else real(ct)])
ad.deflinear(copy_p, lambda ct: [copy_p.bind(ct)])
ad.deflinear(reduce_precision_p, lambda ct, **params: [reduce_precision_p.bind(ct, **params)])


def _convert_jvp(primals, tangents, *, new_dtype, weak_type):
    x, = primals
    t, = tangents
    out = convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type)
    if type(t) is ad.Zero or not dtypes.is_inexact(new_dtype):
        return out, ad.Zero.from_primal_value(out)
    return out, convert_element_type(t, new_dtype, weak_type)


def _convert_transpose(ct, x, *, new_dtype, weak_type):
    aval = x.aval
    if not dtypes.is_inexact(aval.dtype):
        return [ad.Zero(ad.tangent_aval(aval))]
    return [convert_element_type(ct, aval.dtype, aval.weak_type)]


convert_element_type_p.def_jvp(_convert_jvp)
def_transpose(convert_element_type_p, _convert_transpose)


# ---------------------------------------------------------------- batching rules
# Unary primitives (params included) keep the batch dim where it is; n-ary ones align their
# operands (``batch_util.align_operands``): the batch dim of the first full-rank mapped operand
# wins, unmapped scalars stay scalars. select_n and clamp have operands that must have the
# full shape (the cases; clamp's x), so those are always materialized.

for _p in (neg_p, sign_p, floor_p, ceil_p, round_p, is_finite_p, exp_p, exp2_p, expm1_p, log_p,
           log1p_p, sqrt_p, rsqrt_p, cbrt_p, logistic_p, sin_p, cos_p, tan_p, asin_p, acos_p,
           atan_p, sinh_p, cosh_p, tanh_p, asinh_p, acosh_p, atanh_p, abs_p, square_p,
           integer_pow_p, erf_p, erfc_p, erf_inv_p, lgamma_p, digamma_p, not_p,
           population_count_p, clz_p, real_p, imag_p, conj_p, copy_p, reduce_precision_p,
           convert_element_type_p):
    batch_util.defvectorized(_p)
for _p in (add_p, sub_p, mul_p, div_p, rem_p, max_p, min_p, atan2_p, nextafter_p, pow_p, and_p,
           or_p, xor_p, shift_left_p, shift_right_arithmetic_p, shift_right_logical_p, eq_p,
           ne_p, lt_p, le_p, gt_p, ge_p, complex_p):
    batch_util.defbroadcasting(_p)


@select_n_p.def_batching
def _select_n_batch(vals, dims):
    # The cases must have the full shape; ``which`` may stay a scalar only when unmapped.
    # (Other rules may pass a rank-0 case, e.g. pad's mapped padding value: it is broadcast.)
    which, *cases = vals
    out_shape = builtins.max((batch_util.unbatched_shape(c, d) for c, d in
                              zip(cases, dims[1:])), key=len)
    args, out_dim = batch_util.align_operands(vals, dims, out_shape,
                                              [True] + [False] * len(cases))
    return select_n_p.bind(*args), out_dim


@clamp_p.def_batching
def _clamp_batch(vals, dims):
    # x has the full shape; unmapped rank-0 bounds stay scalars.
    out_shape = batch_util.unbatched_shape(vals[1], dims[1])
    args, out_dim = batch_util.align_operands(vals, dims, out_shape, (True, False, True))
    return clamp_p.bind(*args), out_dim


# ---------------------------------------------------------------- lowering
# Rank-0 operands of n-ary primitives are broadcast first: HLO elementwise ops need equal dims.


def lower_broadcast(b: Builder, x: Instruction, dims: tuple[int, ...]) -> Instruction:
    """``x`` with ``dims``: unchanged when it has them, else ``x`` (rank 0, or of ``dims`` up
    to dimensions of size 1) broadcast.

    Example (in a lowering rule):
        >>> y = lower_broadcast(ctx.b, ctx.constant(1.0, np.float32), (2, 3))  # f32[2,3]
    """
    dims = tuple(dims)
    if x.dims == dims:
        return x
    return b.op("broadcast_in_dim", x, shape=Shape(x.dtype, dims),
                broadcast_dimensions=tuple(range(len(x.dims))))


def lower_broadcast_operands(b: Builder, *xs: Instruction) -> list[Instruction]:
    """The operands broadcast to their common dims (lax: rank 0, or one rank with dimensions
    of size 1 broadcasting).

    Example (in a lowering rule):
        >>> x, y = lower_broadcast_operands(ctx.b, x, y)  # f32[3], f32[] -> f32[3], f32[3]
    """
    dims = base.broadcast_dims("lax", *(tuple(x.dims) for x in xs))
    return [lower_broadcast(b, x, dims) for x in xs]


def lower_full(b: Builder, value: Any, dtype: Any, dims: tuple[int, ...]) -> Instruction:
    """A ``dtype`` array of ``dims`` filled with ``value`` (a broadcast scalar constant).

    Example (in a lowering rule):
        >>> ones = lower_full(ctx.b, 1, np.int32, (4,))  # s32[4]
    """
    return lower_broadcast(b, b.constant(np.asarray(value).astype(dtype)), dims)


def lower_convert(b: Builder, x: Instruction, dtype: Any) -> Instruction:
    """``x`` converted to ``dtype`` (``x`` itself when it already has it).

    Example (in a lowering rule):
        >>> x32 = lower_convert(ctx.b, x, np.float32)  # a convert, unless x is f32
    """
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    return b.op("convert", x, shape=Shape(dtype, x.dims))


def _lower_nary(opcode: str, **attrs: Any):
    def rule(ctx, *args, **params):
        return ctx.b.op(opcode, *lower_broadcast_operands(ctx.b, *args), **attrs)
    return rule


_OPCODES = {
    add_p: "add", sub_p: "subtract", mul_p: "multiply", div_p: "divide", rem_p: "remainder",
    max_p: "maximum", min_p: "minimum", neg_p: "negate", sign_p: "sign", floor_p: "floor",
    ceil_p: "ceil", is_finite_p: "is_finite", exp_p: "exponential",
    expm1_p: "exponential_minus_one", log_p: "log", log1p_p: "log_plus_one", sqrt_p: "sqrt",
    rsqrt_p: "rsqrt", cbrt_p: "cbrt", logistic_p: "logistic", sin_p: "sine", cos_p: "cosine",
    tan_p: "tan", asin_p: "asin", acos_p: "acos", atan_p: "atan", sinh_p: "sinh",
    cosh_p: "cosh", tanh_p: "tanh", asinh_p: "asinh", acosh_p: "acosh", atanh_p: "atanh",
    atan2_p: "atan2", nextafter_p: "next_after", erf_p: "erf", erfc_p: "erfc",
    erf_inv_p: "erf_inv", lgamma_p: "lgamma", digamma_p: "digamma", not_p: "not",
    and_p: "and", or_p: "or", xor_p: "xor", shift_left_p: "shift_left",
    shift_right_arithmetic_p: "shift_right_arithmetic",
    shift_right_logical_p: "shift_right_logical", population_count_p: "popcnt",
    clz_p: "count_leading_zeros", real_p: "real", imag_p: "imag", complex_p: "complex",
    copy_p: "copy",
}
for _prim, _opcode in _OPCODES.items():
    _prim.def_lowering(_lower_nary(_opcode))
# Unary float math: eager impls run a backend's native kernel where it registered one
# (the CPU backend's vector math, the same code as jitted programs: see ``K.native_first``).
for _prim in (exp_p, expm1_p, log_p, log1p_p, rsqrt_p, cbrt_p, logistic_p, sin_p, cos_p, tan_p,
              asin_p, acos_p, atan_p, sinh_p, cosh_p, tanh_p, asinh_p, acosh_p, atanh_p, erf_p,
              erfc_p, lgamma_p, digamma_p, erf_inv_p):
    _prim.def_impl(K.native_first(_OPCODES[_prim], _prim.impl))
for _prim in (max_p, min_p):  # (XLA's order of zeros in one pass: see K.native_binary_first)
    _prim.def_impl(K.native_binary_first(_OPCODES[_prim], _prim.impl))
for _prim, _direction in ((eq_p, "EQ"), (ne_p, "NE"), (lt_p, "LT"), (le_p, "LE"), (gt_p, "GT"),
                          (ge_p, "GE")):
    _prim.def_lowering(_lower_nary("compare", comparison_direction=_direction))


@abs_p.def_lowering
def _abs_lowering(ctx, x):
    return ctx.b.op("abs", x, shape=Shape(ctx.aval_out.dtype, x.dims))  # complex -> real


@round_p.def_lowering
def _round_lowering(ctx, x, *, rounding_method):
    even = rounding_method == RoundingMethod.TO_NEAREST_EVEN
    return ctx.b.op("round_nearest_even" if even else "round_nearest_afz", x)


@exp2_p.def_lowering
def _exp2_lowering(ctx, x):
    if dtypes.is_complex(x.dtype):  # as JAX: a complex product, so inf + 0j gives nan + nan j
        return ctx.b.op("exponential", ctx.b.op(
            "multiply", lower_full(ctx.b, math.log(2.0), x.dtype, x.dims), x))
    return ctx.b.op("power", lower_full(ctx.b, 2, x.dtype, x.dims), x)


@square_p.def_lowering
def _square_lowering(ctx, x):
    if not dtypes.is_complex(x.dtype):
        return ctx.b.op("multiply", x, x)
    # (a - b)(a + b) + 2ab i, as XLA computes a complex square (see eval_elementwise.square)
    part = Shape(dtypes.finfo(x.dtype).dtype, x.dims)
    a, b = ctx.b.op("real", x, shape=part), ctx.b.op("imag", x, shape=part)
    re = ctx.b.op("multiply", ctx.b.op("subtract", a, b), ctx.b.op("add", a, b))
    im = ctx.b.op("multiply", lower_full(ctx.b, 2, part.dtype, x.dims),
                  ctx.b.op("multiply", a, b))
    return ctx.b.op("complex", re, im, shape=Shape(x.dtype, x.dims))


@pow_p.def_lowering
def _pow_lowering(ctx, x, y):
    # HLO's power takes one element type: an integer exponent is converted (as JAX does).
    y = lower_convert(ctx.b, y, x.dtype)
    return ctx.b.op("power", *lower_broadcast_operands(ctx.b, x, y))


def _power_by_squaring(b: Builder, x: Instruction, n: int) -> Instruction:
    acc = None
    while n:
        if n & 1:
            acc = x if acc is None else b.op("multiply", acc, x)
        n >>= 1
        if n:
            x = b.op("multiply", x, x)
    return acc


@integer_pow_p.def_lowering
def _integer_pow_lowering(ctx, x, *, y):
    b, dt = ctx.b, x.dtype
    work = lower_convert(b, x, np.float32) if dt in _low_floats else x
    if y == 0:
        out = lower_full(b, 1, work.dtype, x.dims)
    else:
        out = _power_by_squaring(b, work, -y if y < 0 else y)
        if y < 0:
            out = b.op("divide", lower_full(b, 1, work.dtype, x.dims), out)
    return lower_convert(b, out, dt)


@select_n_p.def_lowering
def _select_n_lowering(ctx, which, *cases):
    b = ctx.b
    if len(cases) == 1:
        return cases[0]
    if which.dtype == dtypes.bool_:
        return b.op("select", which, cases[1], cases[0])
    # Nested selects; which <= 0 picks case 0 and which >= n - 1 the last (the impl clips).
    out = cases[-1]
    for i in range(len(cases) - 2, -1, -1):
        bound = lower_full(b, i, which.dtype, which.dims)
        out = b.op("select", b.op("compare", which, bound, comparison_direction="LE"),
                   cases[i], out)
    return out


@clamp_p.def_lowering
def _clamp_lowering(ctx, lo, x, hi):
    return ctx.b.op("clamp", lo, x, hi)  # HLO's clamp takes rank-0 bounds too


@conj_p.def_lowering
def _conj_lowering(ctx, x, *, input_dtype):
    return ctx.b.op("conj", lower_convert(ctx.b, x, ctx.aval_out.dtype))


@reduce_precision_p.def_lowering
def _reduce_precision_lowering(ctx, x, *, exponent_bits, mantissa_bits):
    return ctx.b.op("reduce_precision", x, exponent_bits=exponent_bits,
                    mantissa_bits=mantissa_bits)


@convert_element_type_p.def_lowering
def _convert_element_type_lowering(ctx, x, *, new_dtype, weak_type):
    return lower_convert(ctx.b, x, new_dtype)


__all__ = [
    "RoundingMethod",
    "add", "sub", "mul", "div", "rem", "max", "min", "neg", "sign", "floor", "ceil", "round",
    "is_finite", "exp", "exp2", "expm1", "log", "log1p", "sqrt", "rsqrt", "cbrt", "logistic",
    "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh",
    "acosh", "atanh", "pow", "integer_pow", "square", "reciprocal", "abs", "nextafter", "erf",
    "erfc", "erf_inv", "lgamma", "digamma", "bitwise_not", "bitwise_and", "bitwise_or",
    "bitwise_xor", "shift_left", "shift_right_arithmetic", "shift_right_logical",
    "population_count", "clz", "eq", "ne", "lt", "le", "gt", "ge", "select_n", "select",
    "clamp", "real", "imag", "conj", "complex", "convert_element_type", "reduce_precision",
    "add_p", "sub_p", "mul_p", "div_p", "rem_p", "max_p", "min_p", "neg_p", "sign_p",
    "floor_p", "ceil_p", "round_p", "is_finite_p", "exp_p", "exp2_p", "expm1_p", "log_p",
    "log1p_p", "sqrt_p", "rsqrt_p", "cbrt_p", "logistic_p", "sin_p", "cos_p", "tan_p",
    "asin_p", "acos_p", "atan_p", "atan2_p", "sinh_p", "cosh_p", "tanh_p", "asinh_p",
    "acosh_p", "atanh_p", "pow_p", "integer_pow_p", "square_p", "abs_p", "nextafter_p",
    "erf_p", "erfc_p", "erf_inv_p", "lgamma_p", "digamma_p", "not_p", "and_p", "or_p",
    "xor_p", "shift_left_p", "shift_right_arithmetic_p", "shift_right_logical_p",
    "population_count_p", "clz_p", "eq_p", "ne_p", "lt_p", "le_p", "gt_p", "ge_p",
    "select_n_p", "clamp_p", "real_p", "imag_p", "conj_p", "complex_p", "copy_p",
    "convert_element_type_p", "reduce_precision_p",
    "unop", "binop", "float_dtypes", "int_dtypes",
]
