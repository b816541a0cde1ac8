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

from collections.abc import Callable, Sequence
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


_inexact: dict[Any, bool] = {}  # dtype -> dtypes.is_inexact(dtype), memoized


def tangent_aval(aval: core.ShapedArray) -> core.ShapedArray:
    """The abstract value of tangents of ``aval``: float0 for integer and bool values."""
    dt = aval.dtype
    inexact = _inexact.get(dt)
    if inexact is None:
        inexact = _inexact[dt] = dtypes.is_inexact(dt)
    if inexact:
        # (avals are immutable: a plain ShapedArray is its own tangent aval)
        return aval if type(aval) is core.ShapedArray else core.ShapedArray(
            aval.shape, dt, aval.weak_type)
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


def _jvp_from_terms(prim: core.Primitive, rules: tuple, with_output: bool) -> None:
    """Sets ``prim.jvp`` to the sum of the per-argument terms of ``rules``."""
    def jvp(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        extra = (out,) if with_output else ()
        tangent_out = None
        for rule, t in zip(rules, tangents):
            if rule is None or type(t) is Zero:
                continue
            term = rule(t, *extra, *primals, **params)
            tangent_out = term if tangent_out is None else add_tangents(tangent_out, term)
        if tangent_out is None:
            tangent_out = Zero.from_primal_value(out)
        return out, tangent_out
    prim.jvp = jvp


def defjvp(prim: core.Primitive, *rules: Callable | None) -> None:
    """JVP of ``prim`` as a sum of per-argument terms ``rule(g, *primals, **params)``.

    ``rules[i]`` gives the tangent contribution of argument ``i`` from its tangent ``g``
    (never called with a ``Zero``); ``None`` marks a non-differentiable argument.
    """
    _jvp_from_terms(prim, rules, with_output=False)


def defjvp2(prim: core.Primitive, *rules: Callable | None) -> None:
    """Like ``defjvp`` but each rule also gets the primal output: ``rule(g, ans, *primals)``."""
    _jvp_from_terms(prim, rules, with_output=True)


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
    deflinear2(prim, lambda ct, *args, **params: transpose_rule(ct, **params))


def deflinear2(prim: core.Primitive, transpose_rule: Callable) -> None:
    """Like ``deflinear`` but the rule also sees the arguments: ``rule(ct, *args, **params)``."""
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
        return transpose_rule(ct, *args, **params)
    prim.transpose = transpose


# --------------------------------------------------------------------------- JVP trace


class JVPTracer(core.Tracer):
    """A primal value (of the parent trace) carrying a tangent (never a symbolic ``Zero``)."""

    __slots__ = ("primal", "tangent")

    def __init__(self, trace: JVPTrace, primal: Any, tangent: Any):
        self._trace = trace
        self.primal = primal
        self.tangent = tangent

    @property
    def aval(self) -> core.ShapedArray:
        p = self.primal
        return p.aval if isinstance(p, core.Tracer) else core.get_aval(p)

    def to_concrete_value(self):
        p = self.primal
        return p.to_concrete_value() if isinstance(p, core.Tracer) else p


class JVPTrace(core.Trace):
    """Forward mode: each primitive runs its JVP rule on the parent trace.

    A value that is not a tracer of this trace (a constant, or a tracer of an enclosing
    transformation) has a symbolic zero tangent, so nested JVPs never confuse their tangents.
    """

    def to_primal_tangent_pair(self, x: Any) -> tuple[Any, Any]:
        if type(x) is JVPTracer and x._trace is self:
            return x.primal, x.tangent
        return x, Zero.from_primal_value(x)

    def new(self, primal: Any, tangent: Any) -> Any:
        """A tracer for ``primal`` and ``tangent``, or ``primal`` itself for a zero tangent."""
        if type(tangent) is Zero:
            return primal
        return JVPTracer(self, primal, tangent)

    def process_primitive(self, primitive, args, params):
        primals, tangents = [], []
        all_zero = True
        for x in args:  # (to_primal_tangent_pair, inlined)
            if type(x) is JVPTracer and x._trace is self:
                primals.append(x.primal)
                tangents.append(x.tangent)
                all_zero = False
            else:
                primals.append(x)
                tangents.append(Zero.from_primal_value(x))
        ctx = core._ctx  # (set_current_trace(self.parent), inlined)
        previous, ctx.trace = ctx.trace, self.parent
        try:
            if all_zero:
                return self.parent.process_primitive(primitive, primals, params)
            if primitive.jvp is None:
                raise NotImplementedError(
                    f"Differentiation rule for '{primitive.name}' not implemented")
            out, tangent_out = primitive.jvp(primals, tangents, **params)
        finally:
            ctx.trace = previous
        if primitive.multiple_results:
            return [self.new(p, t) for p, t in zip(out, tangent_out)]
        return self.new(out, tangent_out)


def _tangent_in(primal: Any, tangent: Any) -> Any:
    aval = core.get_aval(primal)
    if tangent is None or type(tangent) is Zero or not dtypes.is_inexact(aval.dtype) or \
            getattr(tangent, "dtype", None) == dtypes.float0:
        return Zero(tangent_aval(aval))
    return tangent


def jvp_flat(fun: Callable, primals: list, tangents: list) -> tuple[list, list]:
    """Runs ``fun`` (flat list in, flat list out) forward on primals and tangents.

    Returns the output primals and tangents; a tangent may be a symbolic ``Zero``. Tangents
    of integer inputs (and ``None`` entries) are zeros.
    """
    trace = JVPTrace()
    ins = [trace.new(p, _tangent_in(p, t)) for p, t in zip(primals, tangents)]
    try:
        with core.set_current_trace(trace):
            outs = fun(*ins)
        pairs = [trace.to_primal_tangent_pair(o) for o in outs]
    finally:
        trace.invalidate()
    return [p for p, _ in pairs], [t for _, t in pairs]


# --------------------------------------------------------------------------- linearize


class Linearized:
    """The linear part of a function at a point, as a jaxpr over the input tangents.

    ``jaxpr`` takes the tangents of the inputs marked in ``in_mask`` (the inexact ones) and
    returns the tangents of the outputs not marked in ``out_zero``; its constants are the
    residuals saved from the forward pass.
    """

    __slots__ = ("jaxpr", "in_avals", "in_mask", "out_avals", "out_zero", "primals_known")

    def __init__(self, jaxpr, in_avals, in_mask, out_avals, out_zero, primals_known=True):
        self.jaxpr = jaxpr
        self.in_avals = in_avals
        self.in_mask = in_mask
        self.out_avals = out_avals
        self.out_zero = out_zero
        self.primals_known = primals_known

    def with_residuals(self, residuals: Sequence[Any]) -> Linearized:
        """This linear map with other values for its residuals (``jaxpr.consts``): those
        values, traced or batched by a transformation, come back as leaves of a pytree."""
        from ember.jaxpr import ClosedJaxpr
        return Linearized(ClosedJaxpr(self.jaxpr.jaxpr, residuals), self.in_avals,
                          self.in_mask, self.out_avals, self.out_zero, self.primals_known)

    def jvp(self, tangents: Sequence[Any]) -> list:
        """The output tangents (zeros instantiated) for the input tangents."""
        j = self.jaxpr
        ins = [t for t, m in zip(tangents, self.in_mask) if m]
        outs = iter(_eval_keep_weak(j.jaxpr, j.consts, ins))
        return [instantiate_zeros(Zero(a)) if z else next(outs)
                for a, z in zip(self.out_avals, self.out_zero)]

    def check_primals_known(self) -> None:
        """Raises JAX's ValueError if the linearization left output primals unknown (a JVP
        rule computed them together with the tangents): forward mode works, reverse mode
        and ``linearize``'s primal outputs cannot."""
        if not self.primals_known:
            raise ValueError(
                "Linearization failed to produce known values for all output primals. This "
                "is typically caused by attempting to differentiate a function uses an "
                "operation that does not support reverse-mode autodiff.")

    def transpose(self, cts: Sequence[Any]) -> list:
        """The input cotangents (zeros instantiated; float0 for integer inputs)."""
        self.check_primals_known()
        j = self.jaxpr
        args = [UndefinedPrimal(tangent_aval(a))
                for a, m in zip(self.in_avals, self.in_mask) if m]
        cts = [ct for ct, z in zip(cts, self.out_zero) if not z]
        cts_in = iter(backward_pass(j.jaxpr, j.consts, args, cts))
        return [instantiate_zeros(next(cts_in)) if m else instantiate_zeros(Zero(tangent_aval(a)))
                for a, m in zip(self.in_avals, self.in_mask)]


def _eval_keep_weak(jaxpr: Any, consts: Sequence[Any], args: Sequence[Any]) -> list:
    from ember.jaxpr import Literal
    env = {v.id: x for v, x in zip(jaxpr.constvars, consts)}
    env.update((v.id, x) for v, x in zip(jaxpr.invars, args))

    def read(a):
        return literal_value(a) if type(a) is Literal else env[a.id]

    for eqn in jaxpr.eqns:
        outs = eqn.primitive.bind(*[read(a) for a in eqn.invars], **eqn.params)
        outs = outs if eqn.primitive.multiple_results else [outs]
        env.update((v.id, x) for v, x in zip(eqn.outvars, outs))
    return [read(a) for a in jaxpr.outvars]


def linearize_flat(fun: Callable, primals: list) -> tuple[list, Linearized]:
    """Evaluates ``fun`` at ``primals`` and stages its linear part (jvp + partial eval).

    Primal work runs on the current trace (eagerly, or staged into an enclosing jit); the
    work on tangents is recorded into the jaxpr of the returned ``Linearized``.
    """
    from ember.interpreters import partial_eval as pe
    from ember.interpreters.partial_eval import PartialEvalTrace
    in_avals = [core.get_aval(p) for p in primals]
    in_mask = [dtypes.is_inexact(a.dtype) for a in in_avals]
    pe_trace = PartialEvalTrace()
    try:
        tangents = [pe_trace.new_arg(tangent_aval(a)) if m else Zero(tangent_aval(a))
                    for a, m in zip(in_avals, in_mask)]
        with core.set_current_trace(pe_trace):
            jvp_trace = JVPTrace()
        ins = [jvp_trace.new(p, t) for p, t in zip(primals, tangents)]
        try:
            with core.set_current_trace(jvp_trace):
                outs = fun(*ins)
            pairs = [jvp_trace.to_primal_tangent_pair(o) for o in outs]
        finally:
            jvp_trace.invalidate()
        out_primals = [p for p, _ in pairs]
        # (a JVP rule computing primals together with tangents, e.g. a generic
        # reduce_window's, leaves them unknown: forward mode works, reverse mode can't)
        primals_known = not any(pe_trace.is_unknown(p) for p in out_primals)
        out_zero = [type(t) is Zero for _, t in pairs]
        jaxpr = pe_trace.to_jaxpr([t for _, t in pairs if type(t) is not Zero])
    finally:
        pe_trace.invalidate()
    # (as JAX: results of staged equations that no output needs, e.g. a scan's unused
    # tangent ys, are dropped, and the residuals only they read)
    jaxpr, _ = pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.jaxpr.outvars))
    out_avals = [tangent_aval(core.get_aval(p)) for p in out_primals]
    return out_primals, Linearized(jaxpr, in_avals, in_mask, out_avals, out_zero,
                                   primals_known)


# --------------------------------------------------------------------------- transposition


def literal_value(lit: Any) -> Any:
    """A Literal's value as an array keeping the Literal's weak type."""
    if lit.aval.weak_type:
        return core.concrete_array(np.asarray(lit.val, lit.aval.dtype), lit.aval)
    return lit.val


def backward_pass(jaxpr: Any, consts: Sequence[Any], args: Sequence[Any],
                  cts_out: Sequence[Any]) -> list:
    """Transposes the linear part of ``jaxpr``.

    ``args`` holds a value for each non-linear input and an ``UndefinedPrimal`` for each
    linear one; ``cts_out`` one cotangent (value or ``Zero``) per output. Equations with no
    linear input are evaluated forward; the others are transposed in reverse order. Returns
    one cotangent per argument: a value or ``Zero`` for linear ones, ``None`` for the others.
    """
    from ember.jaxpr import Literal
    primal_env: dict[int, Any] = {}
    ct_env: dict[int, Any] = {}
    linear: set[int] = set()

    def read(a):
        if type(a) is Literal:
            return literal_value(a)
        if a.id in linear:
            return UndefinedPrimal(a.aval)
        return primal_env[a.id]

    def add_ct(v, ct):
        if type(v) is Literal or v.id not in linear or ct is None or type(ct) is Zero:
            return
        prev = ct_env.get(v.id)
        ct_env[v.id] = ct if prev is None else add_tangents(prev, ct)

    for v, c in zip(jaxpr.constvars, consts):
        primal_env[v.id] = c
    for v, x in zip(jaxpr.invars, args):
        if is_undefined_primal(x):
            linear.add(v.id)
        else:
            primal_env[v.id] = x
    linear_eqns = []
    for eqn in jaxpr.eqns:
        for a in eqn.invars:
            if type(a) is not Literal and a.id in linear:
                linear_eqns.append(eqn)
                linear.update(v.id for v in eqn.outvars)
                break
        else:  # no linear input: evaluate forward
            outs = eqn.primitive.bind(*[read(a) for a in eqn.invars], **eqn.params)
            if eqn.primitive.multiple_results:
                for v, x in zip(eqn.outvars, outs):
                    primal_env[v.id] = x
            else:
                primal_env[eqn.outvars[0].id] = outs
    for v, ct in zip(jaxpr.outvars, cts_out):
        add_ct(v, ct)
    for eqn in reversed(linear_eqns):
        cts = [ct_env.pop(v.id, None) for v in eqn.outvars]
        if all(ct is None for ct in cts):
            continue
        cts = [Zero(tangent_aval(v.aval)) if ct is None else ct
               for v, ct in zip(eqn.outvars, cts)]
        if eqn.primitive.transpose is None:
            raise NotImplementedError(f"Transpose rule (for reverse-mode differentiation) for "
                                      f"'{eqn.primitive.name}' not implemented")
        ct = cts if eqn.primitive.multiple_results else cts[0]
        cts_in = eqn.primitive.transpose(ct, *[read(a) for a in eqn.invars], **eqn.params)
        for a, c in zip(eqn.invars, cts_in):
            add_ct(a, c)
    out = []
    for v, x in zip(jaxpr.invars, args):
        if is_undefined_primal(x):
            ct = ct_env.get(v.id)
            out.append(Zero(x.aval) if ct is None else ct)
        else:
            out.append(None)
    return out


# --------------------------------------------------------------------------- jaxpr transforms
# Used by the rules of primitives that hold a jaxpr (pjit, remat2): the jaxpr is
# transformed once per signature and cached, so repeated calls reuse compiled code.

_jaxpr_cache: dict[tuple, tuple[Any, Any]] = {}
_JAXPR_CACHE_SIZE = 512


def call_transpose(prim: core.Primitive, cts: Sequence[Any], args: Sequence[Any],
                   jaxpr: Any, **params: Any) -> list:
    """The transpose rule of a primitive that calls ``jaxpr`` (pjit, remat): the same
    primitive calling the transposed jaxpr on the non-linear args and non-zero cotangents."""
    return _transpose_call(cts, args, jaxpr,
                           lambda t_closed, ins: prim.bind(*ins, jaxpr=t_closed, **params))


def inline_transpose(cts: Sequence[Any], args: Sequence[Any], jaxpr: Any) -> list:
    """The transpose of a call of ``jaxpr`` evaluated in place (not bound as a call): for
    a ``custom_jvp`` function applied to linear values, as inside another derivative rule,
    whose custom rule is for differentiation, not transposition (JAX inlines the function
    there too)."""
    from ember.jaxpr import eval_jaxpr
    return _transpose_call(cts, args, jaxpr,
                           lambda t_closed, ins: eval_jaxpr(t_closed.jaxpr, t_closed.consts,
                                                            *ins))


def _transpose_call(cts: Sequence[Any], args: Sequence[Any], jaxpr: Any,
                    run: Callable) -> list:
    """Transposes a call of ``jaxpr``: ``run(transposed, ins)`` evaluates the transposed
    jaxpr on the non-linear args and the non-zero cotangents (one output per linear arg)."""
    linear = [is_undefined_primal(a) for a in args]
    ct_nz = [type(c) is not Zero for c in cts]
    if not any(ct_nz):
        return [Zero(a.aval) if lin else None for a, lin in zip(args, linear)]
    t_closed = transpose_jaxpr(jaxpr, linear, ct_nz)
    outs = iter(run(t_closed, [*[a for a, lin in zip(args, linear) if not lin],
                               *[c for c in cts if type(c) is not Zero]]))
    return [next(outs) if lin else None for lin in linear]


def _cached(kind: str, closed: Any, key: tuple, make: Callable) -> Any:
    full_key = (kind, id(closed), key)
    hit = _jaxpr_cache.get(full_key)
    if hit is not None and hit[0] is closed:
        return hit[1]
    value = make()
    if not any(isinstance(c, core.Tracer) for c in closed.consts):
        if len(_jaxpr_cache) >= _JAXPR_CACHE_SIZE:
            _jaxpr_cache.pop(next(iter(_jaxpr_cache)))
        _jaxpr_cache[full_key] = (closed, value)
    return value


def jvp_jaxpr(closed: Any, nonzeros: Sequence[bool], instantiate: bool | Sequence[bool]
              ) -> tuple[Any, list[bool]]:
    """A jaxpr computing ``closed``'s outputs and tangents.

    It takes the primals, then the tangents of the inputs marked in ``nonzeros``; it returns
    the primal outputs, then the output tangents that are not symbolic zeros (or are marked
    in ``instantiate``). Returns the jaxpr and which output tangents it returns.
    """
    n_out = len(closed.out_avals)
    inst = [instantiate] * n_out if isinstance(instantiate, bool) else list(instantiate)
    return _cached("jvp", closed, (tuple(nonzeros), tuple(inst)),
                   lambda: _make_jvp_jaxpr(closed, list(nonzeros), inst))


def _make_jvp_jaxpr(closed, nonzeros, instantiate):
    from ember.interpreters import partial_eval as pe
    from ember.jaxpr import eval_jaxpr
    avals = closed.in_avals
    n = len(avals)
    out_nz_box = []

    def fun(*args):
        it = iter(args[n:])
        trace = JVPTrace()
        ins = [trace.new(p, next(it) if nz else Zero(tangent_aval(a)))
               for p, nz, a in zip(args[:n], nonzeros, avals)]
        try:
            with core.set_current_trace(trace):
                outs = eval_jaxpr(closed.jaxpr, closed.consts, *ins)
            pairs = [trace.to_primal_tangent_pair(o) for o in outs]
        finally:
            trace.invalidate()
        out_nz = [type(t) is not Zero or i for (_, t), i in zip(pairs, instantiate)]
        out_nz_box.append(out_nz)
        return ([p for p, _ in pairs]
                + [instantiate_zeros(t) for (_, t), nz in zip(pairs, out_nz) if nz])

    tangent_avals = [tangent_aval(a) for a, nz in zip(avals, nonzeros) if nz]
    jaxpr, _ = pe.trace_to_jaxpr(fun, list(avals) + tangent_avals)
    return jaxpr, out_nz_box[0]


def transpose_jaxpr(closed: Any, linear: Sequence[bool], ct_nonzeros: Sequence[bool]) -> Any:
    """A jaxpr taking the non-linear inputs of ``closed``, then the cotangents of the outputs
    marked in ``ct_nonzeros``, and returning the cotangents of the ``linear`` inputs."""
    return _cached("transpose", closed, (tuple(linear), tuple(ct_nonzeros)),
                   lambda: _make_transpose_jaxpr(closed, list(linear), list(ct_nonzeros)))


def _make_transpose_jaxpr(closed, linear, ct_nonzeros):
    from ember.interpreters import partial_eval as pe
    avals = closed.in_avals
    res_avals = [a for a, lin in zip(avals, linear) if not lin]
    out_avals = [tangent_aval(a) for a in closed.out_avals]
    ct_avals = [a for a, nz in zip(out_avals, ct_nonzeros) if nz]

    def fun(*args):
        res = iter(args[:len(res_avals)])
        cts = iter(args[len(res_avals):])
        ins = [UndefinedPrimal(a) if lin else next(res) for a, lin in zip(avals, linear)]
        cts_out = [next(cts) if nz else Zero(a) for a, nz in zip(out_avals, ct_nonzeros)]
        cts_in = backward_pass(closed.jaxpr, closed.consts, ins, cts_out)
        return [instantiate_zeros(c) for c, lin in zip(cts_in, linear) if lin]

    jaxpr, _ = pe.trace_to_jaxpr(fun, res_avals + ct_avals)
    return jaxpr
