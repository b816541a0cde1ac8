"""``lax.while_loop`` and its primitive ``while``, with JAX's params and rules.

``while_loop(cond_fun, body_fun, init_val)`` traces both functions once into closed jaxprs
and binds ``while[cond_jaxpr cond_nconsts body_jaxpr body_nconsts]`` on the operands
``(*cond_consts, *body_consts, *carry)``: the consts are the enclosing trace's values the
functions close over. Rules: a Python loop eagerly, HLO ``while`` under jit (the consts ride
in the loop state unchanged), forward mode (the loop of the JVP'ed body), partial evaluation
(known carries in a known loop, the whole loop staged when anything is unknown), batching
(a batched predicate runs the loop while any element's holds, freezing finished elements
with ``select_n``). Reverse mode raises JAX's ValueError: the trip count is dynamic.

Example:
    >>> ember.lax.while_loop(lambda c: c < 10, lambda c: c * 2, 1)
    Array(16, dtype=int32, weak_type=True)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from ember import core, dtypes
from ember._pytree import (
    DictKey,
    SequenceKey,
    keystr,
    tree_flatten,
    tree_flatten_with_path,
    tree_map,
    tree_unflatten,
    treedef_is_leaf,
)
from ember.config import config
from ember.errors import ConcretizationTypeError
from ember.interpreters import ad, batching
from ember.interpreters import partial_eval as pe
from ember.jaxpr import ClosedJaxpr, Jaxpr, Var, eval_jaxpr
from ember.lax.control_flow.common import lower_to_computation, trace_function
from ember.lax.control_flow.eager_loops import EagerLoop

__all__ = ["while_loop", "while_p"]

T = TypeVar("T")

while_p = core.MultipleResultsPrimitive("while")

_REVERSE_MODE_ERROR = (
    "Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop with "
    "dynamic start/stop values. Try using lax.scan, or using fori_loop with static "
    "start/stop.")


def _split(xs: Sequence[Any], cond_nconsts: int, body_nconsts: int) -> tuple[list, list, list]:
    xs = list(xs)
    return (xs[:cond_nconsts], xs[cond_nconsts:cond_nconsts + body_nconsts],
            xs[cond_nconsts + body_nconsts:])


def _with_invars(closed: ClosedJaxpr, invars: Sequence[Var], outvars: Sequence[Any] | None = None
                 ) -> ClosedJaxpr:
    """``closed`` with other binders (a permutation, or extra unread ones) and outputs."""
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, list(invars),
                             j.outvars if outvars is None else list(outvars), j.eqns),
                       closed.consts)


# --------------------------------------------------------------------------- public API


def while_loop(cond_fun: Callable[[T], Any], body_fun: Callable[[T], T], init_val: T) -> T:
    """Calls ``body_fun`` on the carry while ``cond_fun`` of it is True, as one primitive.

    Semantically ``val = init_val; while cond_fun(val): val = body_fun(val); return val``,
    but traced once: the carry (any pytree of arrays) keeps its structure, shapes and dtypes
    across iterations. Forward-mode differentiable and batchable; not reverse-mode
    differentiable (the number of iterations is not known in advance: use ``scan``).

    Args:
        cond_fun: the carry -> a boolean scalar.
        body_fun: the carry -> the next carry (same pytree structure and types).
        init_val: the initial carry.

    Returns:
        The carry after the last iteration.

    Example:
        >>> lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 2.0), (0, 1.0))
        (Array(5, dtype=int32, weak_type=True), Array(32., dtype=float32, weak_type=True))
    """
    if not (callable(body_fun) and callable(cond_fun)):
        raise TypeError("lax.while_loop: body_fun and cond_fun arguments should be callable.")
    if config.jit_disabled:
        try:  # JAX runs a Python loop; under a transformation (vmap, ...) the primitive
            val = tree_map(_asarray, init_val)
            while cond_fun(val):
                val = tree_map(_asarray, body_fun(val))
            return val
        except ConcretizationTypeError:
            pass

    flat, in_tree = tree_flatten((init_val,))
    avals = [core.get_aval(x) for x in flat]
    cond, cond_consts, body, body_consts, body_tree = _trace(cond_fun, body_fun, in_tree, avals)
    if len(body.out_avals) == len(avals):
        # A weakly typed carry (a Python scalar) that the body turns into another dtype takes
        # the body's type, and both functions are traced again (as JAX does).
        promoted = [a.weak_type and not _typematch(a, o)
                    for a, o in zip(avals, body.out_avals)]
        if any(promoted):
            from ember.lax.elementwise import convert_element_type
            flat = [convert_element_type(x, dtypes.result_type(x, o)) if p else x
                    for x, o, p in zip(flat, body.out_avals, promoted)]
            avals = [core.get_aval(x) for x in flat]
            cond, cond_consts, body, body_consts, body_tree = _trace(
                cond_fun, body_fun, in_tree, avals)
    _check_carry_type(body_fun, in_tree, avals, body_tree, body.out_avals)
    cond, body, move = _forwarded_to_consts(cond, body, len(cond_consts), len(body_consts))
    moved = [x for x, m in zip(flat, move) if m]
    outs = iter(while_p.bind(*cond_consts, *moved, *body_consts,
                             *[x for x, m in zip(flat, move) if not m], cond_jaxpr=cond,
                             cond_nconsts=len(cond_consts), body_jaxpr=body,
                             body_nconsts=len(moved) + len(body_consts)))
    moved_it = iter(moved)
    return tree_unflatten(in_tree, [next(moved_it) if m else next(outs) for m in move])[0]


def _forwarded_to_consts(cond: ClosedJaxpr, body: ClosedJaxpr, cond_nconsts: int,
                         body_nconsts: int) -> tuple[ClosedJaxpr, ClosedJaxpr, list[bool]]:
    """Carries the body returns unchanged and the cond does not read become body consts
    (as JAX does): a batched predicate then leaves them unbatched, and the loop state is
    smaller. Returns the new cond and body, and which carries moved."""
    b_in, b_out = body.jaxpr.invars, body.jaxpr.outvars
    cond_reads = pe.dce_jaxpr(cond, [True])[1][cond_nconsts:]
    move = [o is b_in[body_nconsts + i] and not r
            for i, (o, r) in enumerate(zip(b_out, cond_reads))]
    if not any(move):
        return cond, body, move
    carry_in = b_in[body_nconsts:]
    body = _with_invars(body, [v for v, m in zip(carry_in, move) if m] + b_in[:body_nconsts]
                        + [v for v, m in zip(carry_in, move) if not m],
                        [o for o, m in zip(b_out, move) if not m])
    c_in = cond.jaxpr.invars
    cond = _with_invars(cond, c_in[:cond_nconsts]
                        + [v for v, m in zip(c_in[cond_nconsts:], move) if not m])
    return cond, body, move


def _asarray(x: Any) -> Any:
    """``x`` as an array of its abstract value (a Python scalar stays weakly typed)."""
    if isinstance(x, core.Tracer) or hasattr(x, "aval"):
        return x
    aval = core.get_aval(x)
    return core.concrete_array(np.array(x, aval.dtype), aval)


def _trace(cond_fun, body_fun, in_tree, avals):
    cond, cond_consts, cond_tree = trace_function(cond_fun, in_tree, avals)
    if not treedef_is_leaf(cond_tree):
        raise TypeError(f"cond_fun must return a boolean scalar, but got pytree {cond_tree}.")
    (pred,) = cond.out_avals
    if pred.shape != () or pred.dtype != np.bool_:
        raise TypeError("cond_fun must return a boolean scalar, but got output type(s) "
                        f"{cond.out_avals}.")
    body, body_consts, body_tree = trace_function(body_fun, in_tree, avals)
    return cond, cond_consts, body, body_consts, body_tree


def _typematch(a: core.ShapedArray, b: core.ShapedArray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype  # (weak types may differ)


def _check_carry_type(body_fun, in_tree, in_avals, out_tree, out_avals) -> None:
    """JAX's TypeErrors for a body whose output carry differs from its input carry."""
    try:
        name = next(iter(inspect.signature(body_fun).parameters))
    except (ValueError, TypeError, StopIteration):
        name = None
    def component(path):
        if name:
            return f"the input carry component {name}{keystr(path)}" if path \
                else f"the input carry {name}"
        return f"the input carry at path {keystr(path)}" if path else "the input carry"

    def listing(diffs):
        if len(diffs) == 1:
            return diffs[0][0].upper() + diffs[0][1:] + ".\n"
        return "\n".join(f"  * {d};\n" for d in diffs[:-1]) + f"  * {diffs[-1]}.\n"

    (init,) = tree_unflatten(in_tree, in_avals)
    if out_tree != tree_flatten(init)[1] or len(out_avals) != len(in_avals):
        diffs = _structure_diffs(init, tree_unflatten(out_tree, out_avals), (), component)
        detail = listing(diffs) if diffs else (
            f"the input tree structure is:\n{tree_flatten(init)[1]}\n"
            f"the output tree structure is:\n{out_tree}\n")
        raise TypeError(
            "while_loop body function carry input and carry output must have the same pytree "
            f"structure, but they differ:\n\n{detail}\nRevise the function so that the carry "
            "output has the same pytree structure as the carry input.")
    paths = [p for p, _ in tree_flatten_with_path(init)[0]]
    diffs = [f"{component(p)} has type {_type_str(a)} but the corresponding output carry "
             f"component has type {_type_str(b)}, so {_mismatch(a, b)}"
             for p, a, b in zip(paths, in_avals, out_avals) if not _typematch(a, b)]
    if diffs:
        raise TypeError(
            "while_loop body function carry input and carry output must have equal types, "
            f"but they differ:\n\n{listing(diffs)}\nRevise the function so that all output "
            "types match the corresponding input types.")


def _type_str(a: core.ShapedArray) -> str:
    return f"{a.dtype.name}[{','.join(map(str, a.shape))}]"  # (JAX's str_short)


def _mismatch(a: core.ShapedArray, b: core.ShapedArray) -> str:
    parts = [f"the {what} do not match" for what, differ in
             (("dtypes", a.dtype != b.dtype), ("shapes", a.shape != b.shape)) if differ]
    return ", and ".join(parts)


def _structure_diffs(x, y, path, component) -> list[str]:
    """Where two pytrees (of avals) differ in structure, JAX's way of saying it."""
    if isinstance(x, core.ShapedArray) and isinstance(y, core.ShapedArray):
        return []
    if type(x) is not type(y):
        return [f"{component(path)} is a {type(x)} but the corresponding component of the "
                f"carry output is a {type(y)}, so their Python types differ"]
    if isinstance(x, (tuple, list)):
        if len(x) != len(y):
            return [f"{component(path)} is a {type(x).__name__} of length {len(x)} but the "
                    f"corresponding component of the carry output is a {type(y).__name__} "
                    f"of length {len(y)}, so the lengths do not match"]
        return [d for i, (a, b) in enumerate(zip(x, y))
                for d in _structure_diffs(a, b, (*path, SequenceKey(i)), component)]
    if isinstance(x, dict):
        if sorted(x) != sorted(y):
            return [f"{component(path)} is a {type(x)} with pytree metadata "
                    f"{tuple(sorted(x))} but the corresponding component of the carry output "
                    f"is a {type(y)} with pytree metadata {tuple(sorted(y))}, so the pytree "
                    "node metadata does not match"]
        return [d for k in x for d in _structure_diffs(x[k], y[k], (*path, DictKey(k)),
                                                        component)]
    return []


# --------------------------------------------------------------------------- impl, types, lowering


def _while_impl(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    # Each iteration evaluates the jaxprs op by op (each equation runs eagerly); values are
    # wrapped with their avals so weakly typed carries stay weak. A loop that has run long
    # enough op by op, over its calls, runs compiled (``eager_loops``).
    params = dict(cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr, cond_nconsts=cond_nconsts,
                  body_nconsts=body_nconsts)
    in_avals = cond_jaxpr.in_avals[:cond_nconsts] + body_jaxpr.in_avals
    loop = EagerLoop(while_p, params, in_avals, body_jaxpr.out_avals)
    values = [np.asarray(x) for x in args]
    exe = loop.compiled()
    if exe is not None:
        return exe.execute_values(values)
    cconsts, bconsts, carry = _split(values, cond_nconsts, body_nconsts)
    avals = body_jaxpr.in_avals[body_nconsts:]
    carry = [core.concrete_array(x, a) for x, a in zip(carry, avals)]
    while bool(eval_jaxpr(cond_jaxpr.jaxpr, cond_jaxpr.consts, *cconsts, *carry)[0]):
        carry = eval_jaxpr(body_jaxpr.jaxpr, body_jaxpr.consts, *bconsts, *carry)
    loop.finished_op_by_op()
    return [np.asarray(x) for x in carry]


def _while_abstract_eval(*avals, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cconsts, bconsts, carry = _split(avals, cond_nconsts, body_nconsts)
    for what, closed, ins in (("cond_jaxpr", cond_jaxpr, cconsts + carry),
                              ("body_jaxpr", body_jaxpr, bconsts + carry)):
        want = closed.in_avals
        if len(want) != len(ins) or not all(map(_typematch, want, ins)):
            raise TypeError(f"while: {what} takes "
                            f"{[a.str_short() for a in want]}, got {[a.str_short() for a in ins]}")
    if not all(map(_typematch, body_jaxpr.out_avals, carry)):
        raise TypeError("while: body_jaxpr returns "
                        f"{[a.str_short() for a in body_jaxpr.out_avals]}, the carry is "
                        f"{[a.str_short() for a in carry]}")
    (pred,) = cond_jaxpr.out_avals
    if pred.shape != () or pred.dtype != np.bool_:
        raise TypeError(f"while: cond_jaxpr must return bool[], got {pred.str_short()}")
    return list(body_jaxpr.out_avals)


def _while_lowering(ctx, *args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    # The loop state is every operand; cond reads its consts and the carry, the body its
    # consts and the carry and passes every const through unchanged.
    state_vars = [Var(a) for a in ctx.avals_in]
    cc, bc, carry = _split(state_vars, cond_nconsts, body_nconsts)
    cond_state = _with_invars(cond_jaxpr, cond_jaxpr.jaxpr.invars[:cond_nconsts] + bc
                              + cond_jaxpr.jaxpr.invars[cond_nconsts:])
    b_in = body_jaxpr.jaxpr.invars
    body_state = _with_invars(body_jaxpr, cc + b_in,
                              cc + b_in[:body_nconsts] + list(body_jaxpr.jaxpr.outvars))
    cond_comp = lower_to_computation(ctx, cond_state, "while_cond", tuple_result=False)
    body_comp = lower_to_computation(ctx, body_state, "while_body")
    out = ctx.b.op("while", *args, calls=[cond_comp, body_comp])
    first = cond_nconsts + body_nconsts
    return [ctx.b.op("get_tuple_element", out, index=first + i) for i in range(len(carry))]


while_p.def_impl(_while_impl)
while_p.def_abstract_eval(_while_abstract_eval)
while_p.def_lowering(_while_lowering)


# --------------------------------------------------------------------------- autodiff


def _fixpoint(step: Callable[[list[bool]], list[bool]], flags: list[bool]) -> list[bool]:
    """The least ``flags`` (carry properties: nonzero tangent, unknown, batched) containing
    the given ones that the body maps into themselves."""
    for _ in range(len(flags) + 1):
        out = [a or b for a, b in zip(flags, step(flags))]
        if out == flags:
            return flags
        flags = out
    raise AssertionError("while: fixpoint not reached")


def _while_jvp(primals, tangents, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    nz = [type(t) is not ad.Zero for t in tangents]
    _, bconst_nz, init_nz = _split(nz, cond_nconsts, body_nconsts)
    carry_nz = _fixpoint(
        lambda c: ad.jvp_jaxpr(body_jaxpr, bconst_nz + c, instantiate=c)[1], init_nz)
    body_jvp, _ = ad.jvp_jaxpr(body_jaxpr, bconst_nz + carry_nz, instantiate=carry_nz)
    # body_jvp takes (bconsts, carry, bconst tangents, carry tangents): reorder its binders
    # to (bconsts, bconst tangents, carry, carry tangents), consts first as while wants.
    n_bt = sum(bconst_nz)
    v = body_jvp.jaxpr.invars
    nb, nc = body_nconsts, len(carry_nz)
    body_jvp = _with_invars(body_jvp, v[:nb] + v[nb + nc:nb + nc + n_bt] + v[nb:nb + nc]
                            + v[nb + nc + n_bt:])
    cconsts, bconsts, init = _split(primals, cond_nconsts, body_nconsts)
    _, bdots, idots = _split(tangents, cond_nconsts, body_nconsts)
    bdots = [t for t, z in zip(bdots, bconst_nz) if z]
    idots = [ad.instantiate_zeros(t) for t, z in zip(idots, carry_nz) if z]
    # The cond sees the tangents too, and ignores them.
    cond_aug = _with_invars(cond_jaxpr, cond_jaxpr.jaxpr.invars
                            + [Var(core.get_aval(t)) for t in idots])
    outs = while_p.bind(*cconsts, *bconsts, *bdots, *init, *idots, cond_jaxpr=cond_aug,
                        cond_nconsts=cond_nconsts, body_jaxpr=body_jvp,
                        body_nconsts=body_nconsts + n_bt)
    out_primals, out_dots = outs[:nc], iter(outs[nc:])
    return out_primals, [next(out_dots) if z else ad.Zero.from_primal_value(p)
                         for p, z in zip(out_primals, carry_nz)]


def _known_part(closed: ClosedJaxpr, unknowns: list[bool], keep: Sequence[bool]
                ) -> tuple[ClosedJaxpr, list[bool]]:
    """The known part of ``closed`` returning only its known outputs marked in ``keep``
    (no residuals), and which outputs are unknown."""
    known, _, out_uk, num_res = pe.partial_eval_jaxpr(closed, unknowns)
    used = [k for k, u in zip(keep, out_uk) if not u] + [False] * num_res
    return pe.dce_jaxpr(known, used)[0], out_uk


def _while_partial_eval(trace: pe.PartialEvalTrace, args: Sequence[Any], params: dict) -> list:
    # As JAX: the whole loop is staged (recomputing its known carries: the residuals are
    # only its known inputs), and known carries not depending on unknown ones are also
    # computed now by a loop of the known part of the body, when the predicate is known.
    cond, body = params["cond_jaxpr"], params["body_jaxpr"]
    cn, bn = params["cond_nconsts"], params["body_nconsts"]
    uk = [trace.is_unknown(x) for x in args]
    cconst_uk, bconst_uk, init_uk = _split(uk, cn, bn)
    carry_uk = _fixpoint(lambda c: pe.partial_eval_jaxpr(body, bconst_uk + c)[2], init_uk)
    staged = trace.stage(while_p, list(args), params)
    if all(carry_uk):
        return staged
    cond_known, (pred_uk,) = _known_part(cond, cconst_uk + carry_uk, [True])
    if pred_uk:
        return staged
    body_known, _ = _known_part(body, bconst_uk + carry_uk, [not u for u in carry_uk])
    with core.set_current_trace(trace.parent):
        known = while_p.bind(*[x for x, u in zip(args, cconst_uk + bconst_uk + carry_uk)
                               if not u],
                             cond_jaxpr=cond_known, cond_nconsts=cn - sum(cconst_uk),
                             body_jaxpr=body_known, body_nconsts=bn - sum(bconst_uk))
    known = iter(known)
    return [s if u else next(known) for s, u in zip(staged, carry_uk)]


def _while_transpose(cts, *args, **params):
    raise ValueError(_REVERSE_MODE_ERROR)


while_p.def_jvp(_while_jvp)
while_p.def_transpose(_while_transpose)
pe.partial_eval_rules[while_p] = _while_partial_eval


# --------------------------------------------------------------------------- batching


def _while_batch(vals, dims, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    size = batching.axis_size_of(vals, dims)
    cdims, bdims, idims = _split(dims, cond_nconsts, body_nconsts)
    cconsts, bconsts, init = _split(vals, cond_nconsts, body_nconsts)

    def as_dims(batched):
        return [0 if b else None for b in batched]

    def body_batched(carry_bat):
        _, out = batching.batch_jaxpr(body_jaxpr, size, bdims + as_dims(carry_bat))
        return [d is not None for d in out]

    carry_bat = _fixpoint(body_batched, [d is not None for d in idims])
    _, (pred_dim,) = batching.batch_jaxpr(cond_jaxpr, size, cdims + as_dims(carry_bat))
    if pred_dim is not None:  # each element runs until its own predicate fails
        carry_bat = [True] * len(carry_bat)
    carry_dims = as_dims(carry_bat)
    init = [x if d is None and c is None else batching.match_dim(x, d, 0, size)
            for x, d, c in zip(init, idims, carry_dims)]
    cond_b, _ = batching.batch_jaxpr(cond_jaxpr, size, cdims + carry_dims,
                                     out_dims=[0 if pred_dim is not None else None])
    body_b, _ = batching.batch_jaxpr(body_jaxpr, size, bdims + carry_dims, out_dims=carry_dims)
    if pred_dim is None:
        outs = while_p.bind(*cconsts, *bconsts, *init, cond_jaxpr=cond_b,
                            cond_nconsts=cond_nconsts, body_jaxpr=body_b,
                            body_nconsts=body_nconsts)
        return outs, carry_dims
    cond_any, body_sel = _select_loop(cond_b, body_b, cond_nconsts, body_nconsts)
    outs = while_p.bind(*cconsts, *cconsts, *bconsts, *init, cond_jaxpr=cond_any,
                        cond_nconsts=cond_nconsts, body_jaxpr=body_sel,
                        body_nconsts=cond_nconsts + body_nconsts)
    return outs, carry_dims


def _select_loop(cond_b: ClosedJaxpr, body_b: ClosedJaxpr, cond_nconsts: int,
                 body_nconsts: int) -> tuple[ClosedJaxpr, ClosedJaxpr]:
    """For a predicate batched along axis 0: a cond true while any element's is, and a body
    (taking the cond consts before its own) that updates only the elements whose is."""
    from ember.lax.elementwise import select_n
    from ember.lax.reduction import reduce_or
    from ember.lax.shape import broadcast_in_dim

    def any_fun(*args):
        return [reduce_or(eval_jaxpr(cond_b.jaxpr, cond_b.consts, *args)[0], (0,))]

    def sel_fun(*args):
        cc, bc, carry = _split(args, cond_nconsts, body_nconsts)
        (pred,) = eval_jaxpr(cond_b.jaxpr, cond_b.consts, *cc, *carry)
        new = eval_jaxpr(body_b.jaxpr, body_b.consts, *bc, *carry)
        return [select_n(broadcast_in_dim(pred, core.get_aval(x).shape, (0,)), x, y)
                for x, y in zip(carry, new)]

    cond_avals = cond_b.in_avals
    cond_any, _ = pe.trace_to_jaxpr(any_fun, cond_avals)
    body_sel, _ = pe.trace_to_jaxpr(sel_fun, cond_avals[:cond_nconsts] + body_b.in_avals)
    return cond_any, body_sel


while_p.def_batching(_while_batch)
