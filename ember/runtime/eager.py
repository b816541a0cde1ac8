"""Eager execution: the bottom (eval) trace runs each primitive's NumPy impl directly.

The hot path (``apply_primitive``) is kept lean: ember.Array inputs are read without any
dispatch, and the abstract evaluation of a (primitive, input avals, params) combination is
cached, so a repeated small op costs little more than its NumPy kernel.
"""

from __future__ import annotations

import numpy as np

from ember import core
from ember.compiler.eval_elementwise import ignore_fp_errors, restore_fp_errors
from ember.config import config
from ember.errors import UnexpectedTracerError
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


core.set_eager_handler(apply_primitive, Array._wrap)
