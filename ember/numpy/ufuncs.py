"""Elementwise functions (NumPy's ufuncs) with JAX's promotion rules."""

from __future__ import annotations

from typing import Any

from ember import lax
from ember.numpy._util import promote_args, promote_args_inexact, promote_args_numeric


def _binary(lax_fn, name: str, promote=promote_args):
    def fn(x1: Any, x2: Any, /) -> Any:
        x1, x2 = promote(name, x1, x2)
        return lax_fn(x1, x2)
    fn.__name__ = name
    fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}`` with NumPy broadcasting and JAX dtype promotion."
    return fn


def _unary(lax_fn, name: str, promote=promote_args_inexact):
    def fn(x: Any, /) -> Any:
        (x,) = promote(name, x)
        return lax_fn(x)
    fn.__name__ = name
    fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}``; integer inputs are promoted to float."
    return fn


add = _binary(lax.add, "add")
subtract = _binary(lax.sub, "subtract", promote_args_numeric)
multiply = _binary(lax.mul, "multiply")
true_divide = _binary(lax.div, "true_divide", promote_args_inexact)
divide = true_divide
maximum = _binary(lax.max, "maximum")
minimum = _binary(lax.min, "minimum")
equal = _binary(lax.eq, "equal")
not_equal = _binary(lax.ne, "not_equal")
less = _binary(lax.lt, "less")
less_equal = _binary(lax.le, "less_equal")
greater = _binary(lax.gt, "greater")
greater_equal = _binary(lax.ge, "greater_equal")
negative = _unary(lax.neg, "negative", promote_args_numeric)
exp = _unary(lax.exp, "exp")
log = _unary(lax.log, "log")
sin = _unary(lax.sin, "sin")
cos = _unary(lax.cos, "cos")

__all__ = [
    "add", "subtract", "multiply", "true_divide", "divide", "maximum", "minimum", "equal",
    "not_equal", "less", "less_equal", "greater", "greater_equal", "negative", "exp", "log",
    "sin", "cos",
]
