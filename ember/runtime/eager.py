"""Eager execution: the bottom (eval) trace runs each primitive's NumPy impl directly."""

from __future__ import annotations

import numpy as np

from ember import core
from ember.runtime.array import Array


def _as_input(x):
    if type(x) is Array:
        return x._value, x.aval
    aval = core.get_aval(x)
    if isinstance(x, Array):
        return x._value, aval
    return np.asarray(x, dtype=aval.dtype), aval


def _wrap(value, aval: core.ShapedArray) -> Array:
    value = np.asarray(value)
    if value.dtype != aval.dtype:
        value = value.astype(aval.dtype)
    if value.shape != aval.shape:
        raise AssertionError(f"impl produced shape {value.shape}, abstract eval {aval.shape}")
    # Views of inputs are fine: every buffer is read-only, so sharing is safe.
    return Array._wrap(value, aval)


def apply_primitive(primitive: core.Primitive, args, params):
    """Checks the arguments by abstract evaluation, then runs the NumPy impl."""
    values, avals = [], []
    for a in args:
        v, av = _as_input(a)
        values.append(v)
        avals.append(av)
    out_aval = primitive.abstract_eval(*avals, **params)
    out = primitive.impl(*values, **params)
    if primitive.multiple_results:
        return [_wrap(o, a) for o, a in zip(out, out_aval)]
    return _wrap(out, out_aval)


core.set_eager_handler(apply_primitive, Array._wrap)
