"""What every control-flow primitive shares: tracing user functions into closed jaxprs whose
closed-over tracers become leading operands, and lowering a closed jaxpr to an HLO
sub-computation (a loop body, a condition, a branch).

JAX calls the tracing step "initial style": ``cond``, ``while_loop`` and ``scan`` trace their
function arguments once, at the call, into jaxprs held as primitive params. Values of an
enclosing trace that a function closes over (a jit argument, a JVP tracer, ...) cannot live
inside the jaxpr, so they are passed to the primitive as extra leading operands; concrete
arrays the function closes over stay as the jaxpr's constants.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ember import core
from ember._pytree import PyTreeDef, tree_flatten, tree_unflatten
from ember.compiler.hlo import Builder, Computation, Instruction
from ember.compiler.lower import lower_jaxpr_body, shape_of
from ember.interpreters import partial_eval as pe
from ember.interpreters.pjit import closure_convert
from ember.jaxpr import ClosedJaxpr, Jaxpr, Var


def trace_function(fun: Callable, in_tree: PyTreeDef, in_avals: Sequence[core.ShapedArray]
                   ) -> tuple[ClosedJaxpr, list[Any], PyTreeDef]:
    """Traces ``fun`` (called with one pytree argument per child of ``in_tree``) at ``in_avals``.

    Returns ``(closed, consts, out_tree)``: ``closed`` takes ``consts`` (the enclosing trace's
    values ``fun`` closed over) followed by the flat arguments, and returns the flat outputs.
    """
    (closed,), consts, (out_tree,) = trace_functions([fun], in_tree, in_avals)
    return closed, consts, out_tree


def trace_functions(funs: Sequence[Callable], in_tree: PyTreeDef,
                    in_avals: Sequence[core.ShapedArray]
                    ) -> tuple[list[ClosedJaxpr], list[Any], list[PyTreeDef]]:
    """``trace_function`` of several functions of the same arguments (the branches of a
    ``cond``/``switch``) with common leading consts: every jaxpr takes all the functions'
    closed-over tracers, in one order, and ignores those it does not use."""
    traced = []
    for fun in funs:
        out_tree_box = []

        def flat_fun(*flat_args, fun=fun, out_tree_box=out_tree_box):
            args = tree_unflatten(in_tree, flat_args)
            out = fun(*args) if isinstance(args, tuple) else fun(args)
            leaves, out_tree = tree_flatten(out)
            out_tree_box.append(out_tree)
            return leaves

        closed, _ = pe.trace_to_jaxpr(flat_fun, list(in_avals))
        # (closed-over tracers become the leading inputs, their values ``t_vals``)
        converted, t_vals = closure_convert(closed)
        traced.append((converted, t_vals, out_tree_box[0]))
    consts: list[Any] = []
    index: dict[int, int] = {}  # id of a tracer -> its position in consts
    for _, t_vals, _ in traced:
        for c in t_vals:
            if id(c) not in index:
                index[id(c)] = len(consts)
                consts.append(c)
    jaxprs, out_trees = [], []
    for converted, t_vals, out_tree in traced:
        j = converted.jaxpr
        by_pos = {index[id(c)]: v for v, c in zip(j.invars, t_vals)}
        lead = [by_pos[i] if i in by_pos else Var(core.get_aval(c)) for i, c in enumerate(consts)]
        jaxprs.append(ClosedJaxpr(Jaxpr(j.constvars, lead + list(j.invars[len(t_vals):]),
                                        j.outvars, j.eqns), converted.consts))
        out_trees.append(out_tree)
    return jaxprs, consts, out_trees


def lower_to_computation(ctx: Any, closed: ClosedJaxpr, name: str,
                         tuple_result: bool = True) -> Computation:
    """``closed`` as an HLO sub-computation of ``ctx``'s module: one parameter per jaxpr
    input; the root is a tuple of the outputs (or the single output, ``tuple_result=False``)."""
    b = Builder(ctx.module, ctx.module.new_name(name))
    params = [b.parameter(i, shape_of(v.aval)) for i, v in enumerate(closed.jaxpr.invars)]
    consts: list[Instruction] = [b.constant(c, v.aval.dtype)
                                 for v, c in zip(closed.jaxpr.constvars, closed.consts)]
    outs = lower_jaxpr_body(b, closed.jaxpr, consts, params)
    if tuple_result:
        root = b.op("tuple", *outs)
    else:
        (root,) = outs
    return b.build(root)
