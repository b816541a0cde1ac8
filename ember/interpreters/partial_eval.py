"""Staging: a trace that records every primitive into a jaxpr instead of running it.

Values that are not tracers of the staging trace are lifted: scalars become Literals, arrays
(and tracers of enclosing traces) become constvars of the jaxpr.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember import core
from ember.config import config
from ember.core import ShapedArray, Trace, Tracer, get_aval
from ember.errors import UnexpectedTracerError
from ember.interpreters.batching import _env as _axis_env
from ember.jaxpr import (
    ClosedJaxpr,
    Jaxpr,
    JaxprEqn,
    Literal,
    Var,
    eval_jaxpr,
    has_side_effect,
    literal_value,
)


class JaxprTracer(Tracer):
    __slots__ = ("_aval", "_var", "_debug_origin")

    def __init__(self, trace: DynamicJaxprTrace, aval: ShapedArray, var: Var):
        self._trace = trace
        self._aval = aval
        self._var = var  # (not "var": that is the array method x.var())
        self._debug_origin = None

    @property
    def aval(self) -> ShapedArray:
        return self._aval


class _CompileTimeEval(threading.local):
    on = False  # inside ``ember.ensure_compile_time_eval()``: concrete operands run at once


compile_time_eval = _CompileTimeEval()


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
            return x._var
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
        if compile_time_eval.on and not any(isinstance(x, Tracer) for x in args):
            with core.set_current_trace(core.eval_trace()):  # ``ensure_compile_time_eval``
                return primitive.bind(*args, **params)
        origin = None
        atoms = []
        for x in args:
            if type(x) is JaxprTracer and x._trace is self:
                atoms.append(x._var)
                if origin is None:  # outputs remember which argument they derive from
                    origin = x._debug_origin
            else:
                if origin is None and type(x) is JaxprTracer:
                    origin = x._debug_origin
                atoms.append(self.to_atom(x))
        out = abstract_eval(primitive, [a.aval for a in atoms], params)
        if primitive.multiple_results:
            outvars = [Var(a) for a in out]
            self.eqns.append(JaxprEqn(atoms, outvars, primitive, params))
            tracers = [JaxprTracer(self, a, v) for a, v in zip(out, outvars)]
            if origin is not None:
                for t in tracers:
                    t._debug_origin = origin
            return tracers
        var = Var(out)
        self.eqns.append(JaxprEqn(atoms, [var], primitive, params))
        tracer = JaxprTracer(self, out, var)
        tracer._debug_origin = origin
        return tracer

    def to_jaxpr(self, outs: Sequence[Any]) -> ClosedJaxpr:
        outvars = [self.to_atom(x) for x in outs]
        jaxpr = Jaxpr(self.constvars, self.invars, outvars, self.eqns)
        return ClosedJaxpr(jaxpr, self.consts)


# ---------------------------------------------------------------- cached abstract evaluation
# Tracing evaluates the same rule on the same avals and params over and over (every layer of
# a network, every JVP and transpose of it): results are kept per (rule, config, avals,
# params) when the params are plain data whose equality implies equal behaviour (ints, strs,
# dtypes, enums, tuples of ints and strs; each value's type is part of the key, so 1, 1.0 and
# True never share an entry). Errors are never cached: a bad call raises on every call. Rules
# may read the config (its trace key is part of the key) and the bound axis names (nothing is
# cached while a name is bound), nothing else.

_aval_cache: dict[tuple, Any] = {}
_AVAL_CACHE_MAX = 8192
_plain_types: dict[type, bool] = {}  # top-level param types whose values key the cache


def _is_plain_type(t: type) -> bool:
    return t in (int, bool, float, str, type(None)) or issubclass(t, (np.dtype, enum.Enum))


def _plain_tuple(v: tuple) -> bool:
    for e in v:
        t = type(e)
        if t is int or t is str or e is None:
            continue
        if isinstance(e, tuple) and _plain_tuple(e):  # (namedtuples of ints too)
            continue
        return False
    return True


def _cache_key(rule: Callable, avals: list, params: dict) -> tuple | None:
    if _axis_env.frames:  # (collectives' rules read the bound axis names: no cache under them)
        return None
    for a in avals:
        if type(a) is not ShapedArray:
            return None
    types = []
    for v in params.values():
        t = type(v)
        plain = _plain_types.get(t)
        if plain is None:
            plain = _plain_types[t] = _is_plain_type(t)
        if not plain and not (isinstance(v, tuple) and _plain_tuple(v)):
            return None
        types.append(t)
    return (rule, config.trace_key, *avals, *params.items(), *types)


def abstract_eval(primitive: core.Primitive, avals: list, params: dict) -> Any:
    """``primitive.abstract_eval(*avals, **params)``, cached when the params allow it."""
    rule = primitive.abstract_eval
    key = _cache_key(rule, avals, params)
    if key is None:
        return rule(*avals, **params)
    out = _aval_cache.get(key)
    if out is None:
        out = rule(*avals, **params)
        if primitive.multiple_results:
            out = tuple(out)
        if len(_aval_cache) >= _AVAL_CACHE_MAX:
            _aval_cache.clear()
        _aval_cache[key] = out
    return out


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


# --------------------------------------------------------------------------- partial evaluation
# A PartialEvalTrace stages only the equations that depend on its own tracers (the *unknown*
# values); an equation whose inputs are all known runs on the parent trace at once. Reverse
# mode uses it under a JVP trace (linearize): primal work runs, tangent work is staged into
# the linear jaxpr, and known values it uses become that jaxpr's constvars (the residuals).

# Primitives holding jaxprs (pjit, remat2, ...) split themselves into a known and an unknown
# part: ``rule(trace, args, params) -> outputs``.
partial_eval_rules: dict[core.Primitive, Callable] = {}


class PartialEvalTrace(DynamicJaxprTrace):
    """Stages equations with an unknown input; runs the others on the parent trace."""

    def is_unknown(self, x: Any) -> bool:
        return type(x) is JaxprTracer and x._trace is self

    def process_primitive(self, primitive, args, params):
        for x in args:
            if type(x) is JaxprTracer and x._trace is self:
                break
        else:  # no unknown input: run on the parent (set_current_trace + bind, inlined)
            ctx = core._ctx
            previous, ctx.trace = ctx.trace, self.parent
            try:
                return self.parent.process_primitive(primitive, args, params)
            finally:
                ctx.trace = previous
        rule = partial_eval_rules.get(primitive)
        if rule is not None:
            return rule(self, args, params)
        return self.stage(primitive, args, params)

    def stage(self, primitive, args, params):
        """Records ``primitive`` as an equation whatever its inputs."""
        return DynamicJaxprTrace.process_primitive(self, primitive, args, params)


def inline_calls(closed: ClosedJaxpr, primitives: Sequence[core.Primitive]) -> ClosedJaxpr:
    """``closed`` traced again with each equation of ``primitives`` replaced by its body.

    ``primitives`` call a closed jaxpr held in their ``call_jaxpr`` or ``jaxpr`` parameter
    (nested jits, custom derivative calls); bodies are inlined recursively.

    Example:
        >>> inline_calls(make_jaxpr(lambda x: jit(jnp.sin)(x))(1.0), (pjit_p,))
        { lambda ; a:f32[]. let b:f32[] = sin a in (b,) }
    """
    calls = tuple(primitives)
    if not any(e.primitive in calls for e in closed.jaxpr.eqns):
        return closed

    def run(jaxpr: Jaxpr, consts: Sequence[Any], args: Sequence[Any]) -> list:
        env: dict[int, Any] = {}

        def read(a: Any) -> Any:
            return env[a.id] if isinstance(a, Var) else literal_value(a)
        for v, x in zip(jaxpr.constvars, consts):
            env[v.id] = x
        for v, x in zip(jaxpr.invars, args):
            env[v.id] = x
        for eqn in jaxpr.eqns:
            ins = [read(a) for a in eqn.invars]
            if eqn.primitive in calls:
                body = eqn.params.get("call_jaxpr", eqn.params.get("jaxpr"))
                outs = run(body.jaxpr, body.consts, ins)
            else:
                outs = eqn.primitive.bind(*ins, **eqn.params)
                if not eqn.primitive.multiple_results:
                    outs = [outs]
            for v, x in zip(eqn.outvars, outs):
                env[v.id] = x
        return [read(a) for a in jaxpr.outvars]

    out, _ = trace_to_jaxpr(lambda *args: run(closed.jaxpr, closed.consts, args),
                            list(closed.in_avals))
    return out


def partial_eval_jaxpr(closed: ClosedJaxpr, unknowns: Sequence[bool],
                       instantiate: bool | Sequence[bool] = False
                       ) -> tuple[ClosedJaxpr, ClosedJaxpr, list[bool], int]:
    """Splits ``closed`` by which inputs are unknown.

    Returns ``(known, unknown, out_unknowns, num_res)``: ``known`` maps the known inputs to
    the known outputs followed by ``num_res`` residuals; ``unknown`` maps the residuals
    followed by the unknown inputs to the unknown outputs. Outputs marked in ``instantiate``
    are unknown even when computable from known inputs (a loop's carries must keep one kind).
    """
    avals = closed.in_avals
    known_trace = DynamicJaxprTrace()
    try:
        with core.set_current_trace(known_trace):
            pe_trace = PartialEvalTrace()
        args = [pe_trace.new_arg(a) if u else known_trace.new_arg(a)
                for a, u in zip(avals, unknowns)]
        # new_arg appended to both invars lists in argument order: keep each list's order.
        try:
            with core.set_current_trace(pe_trace):
                outs = eval_jaxpr(closed.jaxpr, closed.consts, *args)
        finally:
            pe_trace.invalidate()
        inst = [instantiate] * len(outs) if isinstance(instantiate, bool) else instantiate
        out_unknowns = [pe_trace.is_unknown(o) or bool(i) for o, i in zip(outs, inst)]
        unknown_closed = pe_trace.to_jaxpr([o for o, u in zip(outs, out_unknowns) if u])
        res_vars, res_vals, keep_vars, keep_vals = [], [], [], []
        for v, c in zip(unknown_closed.jaxpr.constvars, unknown_closed.consts):
            if isinstance(c, Tracer):
                res_vars.append(v)
                res_vals.append(c)
            else:
                keep_vars.append(v)
                keep_vals.append(c)
        j = unknown_closed.jaxpr
        unknown = ClosedJaxpr(Jaxpr(keep_vars, res_vars + j.invars, j.outvars, j.eqns),
                              keep_vals)
        known = known_trace.to_jaxpr([o for o, u in zip(outs, out_unknowns) if not u]
                                     + res_vals)
    finally:
        known_trace.invalidate()
    return known, unknown, out_unknowns, len(res_vals)


# Primitives holding jaxprs that can drop some of their own outputs and inputs:
# ``rule(used_outputs, eqn) -> (used_inputs, new_eqn)``; ``used_inputs`` is per operand of
# ``new_eqn`` (the rule may remove operands).
dce_rules: dict[core.Primitive, Callable] = {}


def dce_jaxpr(closed: ClosedJaxpr, used_outputs: Sequence[bool],
              keep_inputs: bool = True) -> tuple[ClosedJaxpr, list[bool]]:
    """Drops the outputs not used and every equation they alone needed (equations with a
    side effect stay).

    Returns the new jaxpr and which inputs it still reads; with ``keep_inputs=False`` the
    unread inputs are removed from its signature too.
    """
    j = closed.jaxpr
    outvars = [v for v, u in zip(j.outvars, used_outputs) if u]
    live = {v.id for v in outvars if isinstance(v, Var)}
    eqns = []
    for eqn in reversed(j.eqns):
        used = [v.id in live for v in eqn.outvars]
        if any(used) or has_side_effect(eqn):
            rule = dce_rules.get(eqn.primitive)
            if rule is None:
                eqns.append(eqn)
                live.update(a.id for a in eqn.invars if isinstance(a, Var))
            else:  # (a loop drops its unused outputs and what only they needed)
                used_inputs, eqn = rule(used, eqn)
                eqns.append(eqn)
                live.update(a.id for a, u in zip(eqn.invars, used_inputs)
                            if u and isinstance(a, Var))
    eqns.reverse()
    used_inputs = [v.id in live for v in j.invars]
    invars = j.invars if keep_inputs else [v for v, u in zip(j.invars, used_inputs) if u]
    used_consts = [v.id in live for v in j.constvars]
    constvars = [v for v, u in zip(j.constvars, used_consts) if u]
    consts = [c for c, u in zip(closed.consts, used_consts) if u]
    return ClosedJaxpr(Jaxpr(constvars, invars, outvars, eqns), consts), used_inputs
