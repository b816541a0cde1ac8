"""Staging: a trace that records every primitive into a jaxpr instead of running it.

Values that are not tracers of the staging trace are lifted: scalars become Literals, arrays
(and tracers of enclosing traces) become constvars of the jaxpr.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember import core
from ember.core import ShapedArray, Trace, Tracer, get_aval
from ember.errors import UnexpectedTracerError
from ember.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var


class JaxprTracer(Tracer):
    __slots__ = ("_aval", "var", "_debug_origin")

    def __init__(self, trace: DynamicJaxprTrace, aval: ShapedArray, var: Var):
        self._trace = trace
        self._aval = aval
        self.var = var
        self._debug_origin = None

    @property
    def aval(self) -> ShapedArray:
        return self._aval


class DynamicJaxprTrace(Trace):
    """Records primitives applied to its tracers as equations of a jaxpr."""

    def __init__(self):
        super().__init__()
        self.invars: list[Var] = []
        self.eqns: list[JaxprEqn] = []
        self.constvars: list[Var] = []
        self.consts: list[Any] = []
        self._const_ids: dict[int, Var] = {}

    def new_arg(self, aval: ShapedArray) -> JaxprTracer:
        var = Var(aval)
        self.invars.append(var)
        return JaxprTracer(self, aval, var)

    def to_atom(self, x: Any):
        """The jaxpr atom (Var or Literal) standing for ``x`` in this trace."""
        if isinstance(x, JaxprTracer) and x._trace is self:
            return x.var
        if isinstance(x, Tracer):
            if not x._trace.alive:
                raise UnexpectedTracerError(x)
            return self._const_var(x, x.aval)
        aval = get_aval(x)
        if aval.shape == () and not isinstance(x, Tracer) and _is_plain_scalar(x):
            return Literal(np.asarray(x, aval.dtype), aval)
        return self._const_var(x, aval)

    def _const_var(self, x: Any, aval: ShapedArray) -> Var:
        var = self._const_ids.get(id(x))
        if var is None:
            var = Var(aval)
            self._const_ids[id(x)] = var
            self.constvars.append(var)
            self.consts.append(x)
        return var

    def process_primitive(self, primitive, args, params):
        origin = None
        for x in args:  # outputs remember which argument they derive from (for errors)
            if type(x) is JaxprTracer and x._debug_origin is not None:
                origin = x._debug_origin
                break
        atoms = [self.to_atom(x) for x in args]
        avals = [a.aval for a in atoms]
        out = primitive.abstract_eval(*avals, **params)
        out_avals = out if primitive.multiple_results else [out]
        outvars = [Var(a) for a in out_avals]
        self.eqns.append(JaxprEqn(atoms, outvars, primitive, params))
        tracers = [JaxprTracer(self, a, v) for a, v in zip(out_avals, outvars)]
        if origin is not None:
            for t in tracers:
                t._debug_origin = origin
        return tracers if primitive.multiple_results else tracers[0]

    def to_jaxpr(self, outs: Sequence[Any]) -> ClosedJaxpr:
        outvars = [self.to_atom(x) for x in outs]
        jaxpr = Jaxpr(self.constvars, self.invars, outvars, self.eqns)
        return ClosedJaxpr(jaxpr, self.consts)


def _is_plain_scalar(x: Any) -> bool:
    return isinstance(x, (bool, int, float, complex, np.generic)) or (
        isinstance(x, np.ndarray) and x.shape == ()) or (
        hasattr(x, "_value") and getattr(x, "shape", None) == ())


def trace_to_jaxpr(fun: Callable, in_avals: Sequence[ShapedArray],
                   debug_names: Sequence[str] | None = None) -> tuple[ClosedJaxpr, Any]:
    """Traces ``fun`` (flat arguments in, flat list of outputs out) into a closed jaxpr.

    Returns the closed jaxpr and whatever ``fun`` returned besides (its output list).
    """
    trace = DynamicJaxprTrace()
    tracers = [trace.new_arg(a) for a in in_avals]
    if debug_names:
        for t, name in zip(tracers, debug_names):
            t._debug_origin = f"derived from the argument {name!r}"
    try:
        with core.set_current_trace(trace):
            outs = fun(*tracers)
        closed = trace.to_jaxpr(outs)
    finally:
        trace.invalidate()
    return closed, outs
