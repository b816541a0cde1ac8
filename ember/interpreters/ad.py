"""Automatic differentiation: JVP rules, symbolic zeros, linearize and transposition.

This module starts with the *rule registration API* that every primitive's rules use (it is
stable: ``ember/lax/*`` registers against it). The JVP trace, linearize and the backward pass
(transposition) build on it.

Rule conventions (JAX's):

- ``prim.jvp(primals, tangents, **params) -> (primal_out, tangent_out)``: ``tangents`` has one
  entry per primal, each a value or ``Zero(aval)`` (a symbolic zero); the returned tangent may
  be ``Zero``. For primitives with ``multiple_results`` both outputs are lists.
- ``prim.transpose(ct, *args, **params) -> list``: ``args`` holds the primal inputs, the linear
  ones as ``UndefinedPrimal(aval)``; ``ct`` (the output cotangent) may be ``Zero``. It returns
  one cotangent per argument: a value, ``Zero`` or ``None`` (for non-linear arguments).

Example:
    >>> defjvp(sin_p, lambda g, x: mul(g, cos(x)))
    >>> deflinear(neg_p, lambda ct: [neg(ct)])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ember import core, dtypes


class Zero:
    """A symbolic zero tangent or cotangent of abstract value ``aval`` (costs nothing)."""

    __slots__ = ("aval",)

    def __init__(self, aval: core.ShapedArray):
        self.aval = aval

    @staticmethod
    def from_primal_value(x: Any) -> Zero:
        return Zero(tangent_aval(core.get_aval(x)))

    def __repr__(self) -> str:
        return f"Zero({self.aval})"


class UndefinedPrimal:
    """A linear input of a transpose rule: only its abstract value is known."""

    __slots__ = ("aval",)

    def __init__(self, aval: core.ShapedArray):
        self.aval = aval

    def __repr__(self) -> str:
        return f"UndefinedPrimal({self.aval})"


def is_undefined_primal(x: Any) -> bool:
    return type(x) is UndefinedPrimal


def tangent_aval(aval: core.ShapedArray) -> core.ShapedArray:
    """The abstract value of tangents of ``aval``: float0 for integer and bool values."""
    if dtypes.is_inexact(aval.dtype):
        return core.ShapedArray(aval.shape, aval.dtype, aval.weak_type)
    return core.ShapedArray(aval.shape, dtypes.float0)


# Set by ember.lax (which may import this module, not the other way round): makes a zeros
# array of an abstract value, traced when a trace is active.
zeros_like_aval: Callable[[core.ShapedArray], Any] | None = None
# Set by ember.lax: adds two tangents of one abstract value (``add_any``).
add_jaxvals: Callable[[Any, Any], Any] | None = None


def instantiate_zeros(t: Any) -> Any:
    """``t``, with a symbolic ``Zero`` replaced by a zeros array of its abstract value."""
    if type(t) is Zero:
        if t.aval.dtype == dtypes.float0:
            return np.zeros(t.aval.shape, dtypes.float0)
        return zeros_like_aval(t.aval)
    return t


def add_tangents(x: Any, y: Any) -> Any:
    """``x + y`` for tangents, where either may be a symbolic ``Zero``."""
    if type(x) is Zero:
        return y
    if type(y) is Zero:
        return x
    return add_jaxvals(x, y)


# --------------------------------------------------------------------------- rule helpers


def defjvp(prim: core.Primitive, *rules: Callable | None) -> None:
    """JVP of ``prim`` as a sum of per-argument terms ``rule(g, *primals, **params)``.

    ``rules[i]`` gives the tangent contribution of argument ``i`` from its tangent ``g``
    (never called with a ``Zero``); ``None`` marks a non-differentiable argument.
    """
    def jvp(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        tangent_out = None
        for rule, t in zip(rules, tangents):
            if rule is None or type(t) is Zero:
                continue
            term = rule(t, *primals, **params)
            tangent_out = term if tangent_out is None else add_tangents(tangent_out, term)
        if tangent_out is None:
            tangent_out = Zero.from_primal_value(out)
        return out, tangent_out
    prim.jvp = jvp


def defjvp2(prim: core.Primitive, *rules: Callable | None) -> None:
    """Like ``defjvp`` but each rule also gets the primal output: ``rule(g, ans, *primals)``."""
    def jvp(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        tangent_out = None
        for rule, t in zip(rules, tangents):
            if rule is None or type(t) is Zero:
                continue
            term = rule(t, out, *primals, **params)
            tangent_out = term if tangent_out is None else add_tangents(tangent_out, term)
        if tangent_out is None:
            tangent_out = Zero.from_primal_value(out)
        return out, tangent_out
    prim.jvp = jvp


def defjvp_zero(prim: core.Primitive) -> None:
    """``prim``'s outputs have zero tangents (integer results, comparisons, rounding...)."""
    def jvp(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        if prim.multiple_results:
            return out, [Zero.from_primal_value(o) for o in out]
        return out, Zero.from_primal_value(out)
    prim.jvp = jvp


def deflinear(prim: core.Primitive, transpose_rule: Callable) -> None:
    """``prim`` is linear in all its arguments: ``transpose_rule(ct, **params) -> cts``."""
    def jvp(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        if all(type(t) is Zero for t in tangents):
            zero = ([Zero.from_primal_value(o) for o in out] if prim.multiple_results
                    else Zero.from_primal_value(out))
            return out, zero
        return out, prim.bind(*[instantiate_zeros(t) for t in tangents], **params)
    prim.jvp = jvp

    def transpose(ct, *args, **params):
        if type(ct) is Zero:
            return [Zero(a.aval) if is_undefined_primal(a) else None for a in args]
        return transpose_rule(ct, **params)
    prim.transpose = transpose


def deflinear2(prim: core.Primitive, transpose_rule: Callable) -> None:
    """Like ``deflinear`` but the rule also sees the arguments: ``rule(ct, *args, **params)``."""
    deflinear(prim, lambda ct, **params: None)

    def transpose(ct, *args, **params):
        if type(ct) is Zero:
            return [Zero(a.aval) if is_undefined_primal(a) else None for a in args]
        return transpose_rule(ct, *args, **params)
    prim.transpose = transpose
