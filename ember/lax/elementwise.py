"""Elementwise primitives: arithmetic, math functions, comparisons, selection, conversion.

Each primitive is defined once with its NumPy impl and its dtype rule; the lax function of the
same name binds it. Binary operands must share a dtype; rank-0 operands broadcast.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import core, dtypes
from ember.core import ShapedArray
from ember.lax import base
from ember.lax.base import (
    all_dtypes,
    broadcasting_shape,
    check_dtype,
    check_same_dtypes,
    float_dtypes,
    inexact_dtypes,
    int_dtypes,
    numeric_dtypes,
    standard_primitive,
)


def _unary_shape(x, **_):
    return x.shape


def _same_dtype_rule(name: str, allowed):
    def rule(x, **_):
        check_dtype(name, "x", x.dtype, allowed)
        return x.dtype
    return rule


def unop(name: str, impl, allowed=inexact_dtypes):
    """A unary elementwise primitive whose output has the input's shape and dtype."""
    return standard_primitive(name, impl, _unary_shape, _same_dtype_rule(name, allowed))


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


def _errstate(fn):
    def wrapped(*args, **kw):
        with np.errstate(all="ignore"):
            return fn(*args, **kw)
    wrapped.__name__ = getattr(fn, "__name__", "impl")
    return wrapped


# ---------------------------------------------------------------- arithmetic


def _int_div(x, y):
    # lax.div on integers rounds toward zero (C semantics); x / 0 gives -1 like XLA's CPU.
    q = np.where(y == 0, 1, y)
    out = np.abs(x) // np.abs(q)
    out = np.where((x < 0) != (q < 0), -out, out) if dtypes.is_integer(x.dtype) and \
        not dtypes.is_unsigned(x.dtype) else out
    return np.where(y == 0, np.array(-1).astype(x.dtype), out).astype(x.dtype)


def _div_impl(x, y):
    if dtypes.is_integer(x.dtype):
        return _int_div(x, y)
    return np.true_divide(x, y).astype(x.dtype)


def _int_rem(x, y):
    # Remainder with the sign of the dividend (C fmod semantics); x % 0 gives x.
    q = np.where(y == 0, 1, y)
    r = np.fmod(x, q)
    return np.where(y == 0, x, r).astype(x.dtype)


def _rem_impl(x, y):
    if dtypes.is_integer(x.dtype):
        return _int_rem(x, y)
    return np.fmod(x, y)


add_p = binop("add", np.add)
sub_p = binop("sub", np.subtract)
mul_p = binop("mul", np.multiply)
div_p = binop("div", _errstate(_div_impl))
rem_p = binop("rem", _errstate(_rem_impl))
max_p = binop("max", np.maximum, all_dtypes)
min_p = binop("min", np.minimum, all_dtypes)
neg_p = unop("neg", np.negative, numeric_dtypes)
exp_p = unop("exp", _errstate(np.exp))
log_p = unop("log", _errstate(np.log))
sin_p = unop("sin", _errstate(np.sin))
cos_p = unop("cos", _errstate(np.cos))


def _binary(prim):
    def fn(x: Any, y: Any) -> Any:
        x, y = base.scalars_like(prim.name, x, y)
        return prim.bind(x, y)
    fn.__name__ = prim.name
    fn.__doc__ = f"Elementwise ``{prim.name}`` of two arrays of the same dtype (lax semantics)."
    return fn


def _unary(prim):
    def fn(x: Any) -> Any:
        return prim.bind(base.as_operand(x, prim.name, "x"))
    fn.__name__ = prim.name
    fn.__doc__ = f"Elementwise ``{prim.name}`` (lax semantics: no dtype promotion)."
    return fn


add, sub, mul, div, rem = (_binary(p) for p in (add_p, sub_p, mul_p, div_p, rem_p))
max, min = _binary(max_p), _binary(min_p)  # noqa: A001 - lax's names
neg, exp, log, sin, cos = (_unary(p) for p in (neg_p, exp_p, log_p, sin_p, cos_p))


# ---------------------------------------------------------------- comparisons


def _compare(name, impl):
    return binop(name, impl, all_dtypes, result_dtype=dtypes.bool_,
                 weak_type_rule=lambda *a, **_: False)


eq_p = _compare("eq", np.equal)
ne_p = _compare("ne", np.not_equal)
lt_p = _compare("lt", np.less)
le_p = _compare("le", np.less_equal)
gt_p = _compare("gt", np.greater)
ge_p = _compare("ge", np.greater_equal)
eq, ne, lt, le, gt, ge = (_binary(p) for p in (eq_p, ne_p, lt_p, le_p, gt_p, ge_p))


# ---------------------------------------------------------------- conversion


def _convert_impl(x, *, new_dtype, weak_type):
    if dtypes.is_integer(new_dtype) and dtypes.is_inexact(x.dtype):
        # Float -> int: NaN gives 0 and out-of-range values saturate (XLA's CPU behaviour).
        info = np.iinfo(new_dtype)
        with np.errstate(invalid="ignore"):
            x = np.where(np.isnan(x), 0, x)
            x = np.clip(np.trunc(x.astype(np.float64)), info.min, info.max)
    if new_dtype == dtypes.bool_:
        return x != 0
    with np.errstate(all="ignore"):
        return x.astype(new_dtype)


convert_element_type_p = standard_primitive(
    "convert_element_type", _convert_impl,
    lambda x, **_: x.shape,
    lambda x, *, new_dtype, weak_type: new_dtype,
    lambda x, *, new_dtype, weak_type: weak_type)


def convert_element_type(operand: Any, new_dtype: Any, weak_type: bool = False) -> Any:
    """Casts ``operand`` to ``new_dtype`` (canonicalized); a no-op when nothing changes.

    Example:
        >>> lax.convert_element_type(jnp.array([1.5]), jnp.int32)
        Array([1], dtype=int32)
    """
    operand = base.as_operand(operand, "convert_element_type")
    new_dtype = dtypes.canonicalize_dtype(dtypes.dtype(new_dtype))
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


__all__ = [
    "add", "sub", "mul", "div", "rem", "max", "min", "neg", "exp", "log", "sin", "cos",
    "eq", "ne", "lt", "le", "gt", "ge", "convert_element_type",
    "unop", "binop", "float_dtypes", "int_dtypes",
]
