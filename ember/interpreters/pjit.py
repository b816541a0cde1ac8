"""The ``pjit`` primitive: a call of a jitted function, staged as one equation.

When a jitted function is called while another transformation traces (``make_jaxpr``, an
enclosing ``jit``, ...), it is traced to its own closed jaxpr and bound as
``pjit[name=f jaxpr={ lambda ... }]``. Lowering inlines the jaxpr; the eager impl (used when a
jaxpr holding a ``pjit`` equation is evaluated op by op) compiles and runs it. The impl needs
the runtime, which installs it at import (``ember.runtime.dispatch``), the way
``core.set_eager_handler`` wires the eager path.

Example:
    >>> print(ember.make_jaxpr(lambda x: ember.jit(jnp.sin)(x))(1.0))
    { lambda ; a:f32[]. let
        b:f32[] = pjit[
          name=sin
          jaxpr={ lambda ; c:f32[]. let d:f32[] = sin c in (d,) }
        ] a
      in (b,) }
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ember import core
from ember.interpreters import ad, batching
from ember.interpreters import partial_eval as pe
from ember.jaxpr import ClosedJaxpr, Jaxpr

pjit_p = core.MultipleResultsPrimitive("jit")  # (JAX prints nested jits as ``jit[...]``)
pjit_p.pp_param_order = ("name", "jaxpr")
pjit_p.pp_aliased_jaxpr = "jaxpr"


def _pjit_abstract_eval(*avals: core.ShapedArray, jaxpr: ClosedJaxpr, name: str):
    expected = jaxpr.in_avals
    if len(avals) != len(expected):
        raise TypeError(f"pjit {name!r}: expected {len(expected)} arguments, got {len(avals)}")
    for i, (got, want) in enumerate(zip(avals, expected)):
        if (got.shape, got.dtype) != (want.shape, want.dtype):
            raise TypeError(f"pjit {name!r}: argument {i} has type {got.str_short()}, the jaxpr "
                            f"expects {want.str_short()}")
    return list(jaxpr.out_avals)


def _pjit_lowering(ctx: Any, *args: Any, jaxpr: ClosedJaxpr, name: str) -> list:
    consts = [ctx.constant(c, v.aval.dtype) for c, v in zip(jaxpr.consts, jaxpr.jaxpr.constvars)]
    return ctx.lower_jaxpr(jaxpr.jaxpr, consts, list(args))


pjit_p.def_abstract_eval(_pjit_abstract_eval)
pjit_p.def_lowering(_pjit_lowering)


def closure_convert(closed: ClosedJaxpr) -> tuple[ClosedJaxpr, list[Any]]:
    """Turns constants that are tracers (values of an enclosing trace) into leading inputs.

    Returns the new closed jaxpr and the tracers to pass before the original arguments.
    """
    tracer_vars, tracer_vals, keep_vars, keep_vals = [], [], [], []
    for v, c in zip(closed.jaxpr.constvars, closed.consts):
        if isinstance(c, core.Tracer):
            tracer_vars.append(v)
            tracer_vals.append(c)
        else:
            keep_vars.append(v)
            keep_vals.append(c)
    if not tracer_vars:
        return closed, []
    j = closed.jaxpr
    jaxpr = Jaxpr(keep_vars, tracer_vars + j.invars, j.outvars, j.eqns)
    return ClosedJaxpr(jaxpr, keep_vals), tracer_vals


def bind_pjit(closed: ClosedJaxpr, name: str, args: Sequence[Any]) -> list[Any]:
    """Binds ``pjit`` on the current trace for a traced jitted call (consts closed over)."""
    closed, extra = closure_convert(closed)
    return pjit_p.bind(*extra, *args, jaxpr=closed, name=name)


# --------------------------------------------------------------------------- autodiff rules
# jvp: a pjit of the JVP jaxpr; partial eval: a known pjit (run now) and an unknown one
# (staged) linked by residuals; transpose: a pjit of the transposed jaxpr. Each keeps the
# function's name, as in JAX.


def _pjit_jvp(primals, tangents, *, jaxpr: ClosedJaxpr, name: str):
    nonzeros = [type(t) is not ad.Zero for t in tangents]
    jvp_closed, out_nz = ad.jvp_jaxpr(jaxpr, nonzeros, instantiate=False)
    outs = pjit_p.bind(*primals, *[t for t in tangents if type(t) is not ad.Zero],
                       jaxpr=jvp_closed, name=name)
    n = len(jaxpr.out_avals)
    it = iter(outs[n:])
    tangents_out = [next(it) if nz else ad.Zero(ad.tangent_aval(a))
                    for nz, a in zip(out_nz, jaxpr.out_avals)]
    return outs[:n], tangents_out


def _pjit_partial_eval(trace: pe.PartialEvalTrace, args: Sequence[Any], params: dict) -> list:
    jaxpr, name = params["jaxpr"], params["name"]
    unknowns = [trace.is_unknown(x) for x in args]
    known, unknown, out_unknowns, num_res = ad._cached(
        "partial_eval", jaxpr, tuple(unknowns), lambda: pe.partial_eval_jaxpr(jaxpr, unknowns))
    with core.set_current_trace(trace.parent):
        known_outs = pjit_p.bind(*[x for x, u in zip(args, unknowns) if not u],
                                 jaxpr=known, name=name)
    n_known = len(known_outs) - num_res
    residuals = known_outs[n_known:]
    unknown_outs = trace.stage(pjit_p, [*residuals, *[x for x, u in zip(args, unknowns) if u]],
                               dict(jaxpr=unknown, name=name))
    k, u = iter(known_outs[:n_known]), iter(unknown_outs)
    return [next(u) if unk else next(k) for unk in out_unknowns]


def _pjit_transpose(cts, *args, jaxpr: ClosedJaxpr, name: str):
    return ad.call_transpose(pjit_p, cts, args, jaxpr, name=name)


pjit_p.def_jvp(_pjit_jvp)
pjit_p.def_transpose(_pjit_transpose)
pe.partial_eval_rules[pjit_p] = _pjit_partial_eval


# --------------------------------------------------------------------------- batching
# vmap of a jitted call stays one pjit: the callee's jaxpr is batched (once per signature,
# cached) and each output keeps the batch dimension its rules gave it.


def _pjit_batch(vals, dims, *, jaxpr: ClosedJaxpr, name: str):
    size = batching.axis_size_of(vals, dims)
    batched, out_dims = batching.batch_jaxpr(jaxpr, size, dims)
    return pjit_p.bind(*vals, jaxpr=batched, name=name), list(out_dims)


pjit_p.def_batching(_pjit_batch)
