"""Eager execution: the bottom (eval) trace runs each primitive's NumPy impl directly.

The hot path (``apply_primitive``) is kept lean: ember.Array inputs are read without any
dispatch, and the abstract evaluation of a (primitive, input avals, params) combination is
cached, so a repeated small op costs little more than its NumPy kernel.
"""

from __future__ import annotations

import functools

import numpy as np

from ember import core, dtypes
from ember.compiler.eval_elementwise import ignore_fp_errors, restore_fp_errors
from ember.config import config
from ember.errors import UnexpectedTracerError
from ember.interpreters.pjit import pjit_p
from ember.jaxpr import eval_jaxpr
from ember.runtime.array import Array

_ndarray = np.ndarray
_new_array = object.__new__
_setflags = np.ndarray.setflags  # setflags(a, False) is several times cheaper than flags.writeable

# (primitive, avals, params items, x64) -> output aval(s). Only successful evaluations are
# stored, so errors are raised afresh each time; bounded by clearing when full.
_aval_cache: dict = {}
_AVAL_CACHE_SIZE = 4096


def _slow_input(x, primitive):
    if isinstance(x, core.Tracer):
        raise UnexpectedTracerError(
            x, f"It was passed to the primitive {primitive.name!r} outside of the "
               "transformation that created it.")
    aval = core.get_aval(x)
    if type(x) is Array:
        return x._value, aval
    # (A copy of a caller's writeable NumPy array, as JAX takes one: an impl may return its
    # input or a view of it, which the result would share and freeze.)
    copy = isinstance(x, np.ndarray) and x.flags.writeable
    return np.array(x, dtype=aval.dtype) if copy else np.asarray(x, dtype=aval.dtype), aval


def _wrap(value, aval: core.ShapedArray) -> Array:
    if type(value) is not _ndarray:
        value = np.asarray(value)
    if value.dtype != aval.dtype:
        value = value.astype(aval.dtype)
    if value.shape != aval.shape:
        raise AssertionError(f"impl produced shape {value.shape}, abstract eval {aval.shape}")
    # Views of inputs are fine: every buffer is read-only, so sharing is safe.
    _setflags(value, False)
    out = _new_array(Array)
    out._value = value
    out.aval = aval
    return out


def _abstract_eval(primitive, avals, params):
    try:
        key = (primitive, tuple(avals), tuple(params.items()) if params else (),
               config.x64_enabled)
        out = _aval_cache.get(key)
    except TypeError:  # unhashable params: no caching
        return primitive.abstract_eval(*avals, **params)
    if out is None:
        out = primitive.abstract_eval(*avals, **params)
        if len(_aval_cache) >= _AVAL_CACHE_SIZE:
            _aval_cache.clear()
        _aval_cache[key] = out
    return out


def apply_primitive(primitive: core.Primitive, args, params):
    """Checks the arguments by abstract evaluation, then runs the NumPy impl."""
    values, avals = [], []
    for a in args:
        if type(a) is Array:
            values.append(a._value)
            avals.append(a.aval)
        else:
            v, av = _slow_input(a, primitive)
            values.append(v)
            avals.append(av)
    out_aval = _abstract_eval(primitive, avals, params)
    # No NumPy floating-point warnings (overflow, invalid, divide by zero): XLA never warns.
    token = ignore_fp_errors()
    try:
        out = primitive.impl(*values, **params)
        if primitive.multiple_results:
            return [_wrap(o, a) for o, a in zip(out, out_aval)]
        return _wrap(out, out_aval)
    finally:
        restore_fp_errors(token)


# ------------------------------------------------------------- jax_debug_nans / jax_debug_infs
# While either option is on, the eager handler is ``apply_primitive_checked``: the ordinary
# handler costs nothing more when they are off.


def special_value(value: np.ndarray) -> str | None:
    """``"nan"``/``"inf"`` if ``value`` holds one that the debug options report, else None."""
    if value.dtype.kind not in "fc" and value.dtype != dtypes.bfloat16:
        return None
    if config.jax_debug_nans and np.isnan(value).any():
        return "nan"
    if config.jax_debug_infs and np.isinf(value).any():
        return "inf"
    return None


def deoptimized_error(name: str, kind: str, rerun) -> FloatingPointError:
    """What a jitted computation ``name`` whose outputs hold a ``kind`` ("nan"/"inf") raises,
    as in JAX: ``rerun()`` runs it op by op, so that the first primitive producing one raises
    (its error is returned); if none does, an error saying so."""
    print("Invalid nan value encountered in the output of a jax.jit function. Calling the "
          "de-optimized version.")
    try:
        rerun()
    except (FloatingPointError, ZeroDivisionError) as e:
        return e
    return FloatingPointError(
        f"invalid value ({kind}) encountered in jit({name}). Because "
        "jax_config.debug_nans.value and/or config.jax_debug_infs is set, the de-optimized "
        "function (i.e., the function as if the `jit` decorator were removed) was called in "
        "an attempt to get a more precise error message. However, the de-optimized function "
        "did not produce invalid values during its execution. This behavior can result from "
        "`jit` optimizations causing the invalid value to be produced. It may also arise "
        "from having nan/inf literals as inputs or outputs, like "
        "`jax.jit(lambda ...: jax.numpy.nan)(...)`. \n\nIt may be possible to avoid the "
        "invalid value by removing the `jit` decorator, at the cost of losing optimizations.")


def apply_primitive_checked(primitive: core.Primitive, args, params):
    """``apply_primitive``, then a FloatingPointError if an output has a NaN/inf."""
    out = apply_primitive(primitive, args, params)
    for o in (out if primitive.multiple_results else (out,)):
        kind = special_value(o._value)
        if kind is None:
            continue
        if primitive is pjit_p:  # a jitted call: find the primitive op by op
            closed = params["jaxpr"]
            raise deoptimized_error(params["name"], kind, functools.partial(
                eval_jaxpr, closed.jaxpr, closed.consts, *args)) from None
        raise FloatingPointError(f"invalid value ({kind}) encountered in {primitive.name}")
    return out


def _on_config_change(name: str, value) -> None:
    if name in ("jax_debug_nans", "jax_debug_infs"):
        handler = apply_primitive_checked if config.debug_checks else apply_primitive
        core.set_eager_handler(handler, Array._wrap)


core.set_eager_handler(apply_primitive_checked if config.debug_checks else apply_primitive,
                       Array._wrap)
config._listeners.append(_on_config_change)
