"""Rematerialization: ``checkpoint`` (alias ``remat``) and its primitive ``remat2``.

A checkpointed function saves no intermediate values for reverse mode: when it is
linearized, the forward pass keeps only its inputs, and the backward pass recomputes what
the derivative needs (the recompute sits inside the transposed ``remat2`` equation).

Example:
    >>> f = ember.checkpoint(lambda x: jnp.sin(jnp.sin(x)))
    >>> print(ember.make_jaxpr(ember.grad(f))(3.0))   # sin recomputed in the backward pass
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember import _pytree, core
from ember.interpreters import ad, batching
from ember.interpreters import partial_eval as pe
from ember.interpreters.pjit import _pjit_lowering, closure_convert, pjit_p
from ember.jaxpr import (
    ClosedJaxpr,
    Jaxpr,
    Var,
    eval_closed_jaxpr,
    eval_jaxpr,
    literal_value,
)

remat_p = core.MultipleResultsPrimitive("remat2")


def _remat_impl(*args: Any, jaxpr: ClosedJaxpr, **_: Any) -> list:
    return [np.asarray(o) for o in eval_closed_jaxpr(jaxpr, *args)]


def _remat_abstract_eval(*avals: core.ShapedArray, jaxpr: ClosedJaxpr, **_: Any) -> list:
    return list(jaxpr.out_avals)


def _remat_lowering(ctx: Any, *args: Any, jaxpr: ClosedJaxpr, **_: Any) -> list:
    return _pjit_lowering(ctx, *args, jaxpr=jaxpr, name="remat")


def _remat_jvp(primals, tangents, *, jaxpr, prevent_cse, differentiated, policy):
    nonzeros = [type(t) is not ad.Zero for t in tangents]
    jvp_closed, out_nz = ad.jvp_jaxpr(jaxpr, nonzeros, instantiate=False)
    outs = remat_p.bind(*primals, *[t for t in tangents if type(t) is not ad.Zero],
                        jaxpr=jvp_closed, prevent_cse=prevent_cse, differentiated=True,
                        policy=policy)
    n = len(jaxpr.out_avals)
    it = iter(outs[n:])
    return outs[:n], [next(it) if nz else ad.Zero(ad.tangent_aval(a))
                      for nz, a in zip(out_nz, jaxpr.out_avals)]


def _remat_partial_eval(trace: pe.PartialEvalTrace, args: Sequence[Any], params: dict) -> list:
    if params["policy"] is not None:
        return _remat_partial_eval_policy(trace, args, params)
    # Known outputs are computed now (inline, saving nothing); the unknown ones come from a
    # staged remat2 that takes the inputs it needs and recomputes the forward work. Its jaxpr
    # is the known part followed by the unknown part, so that every equation in it is either
    # wholly primal (recomputed forward when transposing) or wholly linear.
    jaxpr = params["jaxpr"]
    unknowns = tuple(trace.is_unknown(x) for x in args)
    known, unknown, out_unknowns, num_res = ad._cached(
        "partial_eval", jaxpr, unknowns, lambda: pe.partial_eval_jaxpr(jaxpr, unknowns))
    n_known = len(known.out_avals) - num_res
    known_only, _ = pe.dce_jaxpr(known, [True] * n_known + [False] * num_res)
    with core.set_current_trace(trace.parent):
        known_outs = eval_jaxpr(known_only.jaxpr, known_only.consts,
                                *[x for x, u in zip(args, unknowns) if not u])
    recompute, used = ad._cached("remat_recompute", jaxpr, unknowns, lambda: pe.dce_jaxpr(
        _compose(jaxpr.in_avals, unknowns, known, unknown, num_res),
        [True] * len(unknown.out_avals), keep_inputs=False))
    unknown_outs = trace.stage(remat_p, [x for x, u in zip(args, used) if u],
                               dict(params, jaxpr=recompute, differentiated=True))
    k, u = iter(known_outs), iter(unknown_outs)
    return [next(u) if unk else next(k) for unk in out_unknowns]


def _compose(in_avals, unknowns, known: ClosedJaxpr, unknown: ClosedJaxpr,
             num_res: int) -> ClosedJaxpr:
    """One jaxpr over all the inputs: ``known`` gives the residuals, ``unknown`` the result."""
    def fun(*args):
        res = eval_jaxpr(known.jaxpr, known.consts,
                         *[x for x, u in zip(args, unknowns) if not u])
        res = res[len(res) - num_res:] if num_res else []
        return eval_jaxpr(unknown.jaxpr, unknown.consts, *res,
                          *[x for x, u in zip(args, unknowns) if u])
    closed, _ = pe.trace_to_jaxpr(fun, list(in_avals))
    return closed


class _Decision:
    """A policy's answer (``Saveable``, ``Recompute``), or ``Offloadable(src, dst)``."""

    def __init__(self, name: str, save: bool, **fields: Any):
        self.name, self.save = name, save
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        return self.name


Saveable = _Decision("Saveable", True)
Recompute = _Decision("Recompute", False)


def Offloadable(src: Any, dst: Any) -> _Decision:  # noqa: N802 (JAX's name)
    """A policy answer asking to move a residual to other memory (kept in place here)."""
    return _Decision(f"Offloadable(src={src!r}, dst={dst!r})", True, src=src, dst=dst)


def _saves(policy: Callable, eqn: Any) -> bool:
    out = policy(eqn.primitive, *[a.aval for a in eqn.invars], **eqn.params)
    return out.save if isinstance(out, _Decision) else bool(out)


def _split_by_policy(jaxpr: ClosedJaxpr, unknowns: tuple, policy: Callable):
    """Partial evaluation that keeps the residuals ``policy`` saves.

    Returns ``(known, recompute, out_unknowns, used)``: ``known`` maps the known inputs to
    the known outputs followed by the saved values; ``recompute`` maps the inputs marked in
    ``used`` followed by the saved values to the unknown outputs, recomputing every primal
    value that is not saved.
    """
    known, unknown, out_unknowns, num_res = pe.partial_eval_jaxpr(jaxpr, unknowns)
    known = pe.inline_calls(known, (pjit_p,))  # (policies see inside nested jits, as in JAX)
    n_known = len(known.out_avals) - num_res
    saved = [v for e in known.jaxpr.eqns if _saves(policy, e) for v in e.outvars]
    saved_ids = {v.id for v in saved}

    def fun(*args):
        n = len(unknowns)
        ins, sv = args[:n], args[n:]
        env = {v.id: x for v, x in zip(saved, sv)}
        kj = known.jaxpr
        for v, x in zip(kj.constvars, known.consts):
            env[v.id] = x
        for v, x in zip(kj.invars, [x for x, u in zip(ins, unknowns) if not u]):
            env[v.id] = x

        def read(a):
            return env[a.id] if isinstance(a, Var) else literal_value(a)
        for eqn in kj.eqns:
            if eqn.outvars and all(v.id in saved_ids for v in eqn.outvars):
                continue
            outs = eqn.primitive.bind(*[read(a) for a in eqn.invars], **eqn.params)
            for v, x in zip(eqn.outvars, outs if eqn.primitive.multiple_results else [outs]):
                env[v.id] = x
        res = [read(a) for a in kj.outvars[n_known:]]
        return eval_jaxpr(unknown.jaxpr, unknown.consts, *res,
                          *[x for x, u in zip(ins, unknowns) if u])
    avals = list(jaxpr.in_avals) + [v.aval for v in saved]
    closed, _ = pe.trace_to_jaxpr(fun, avals)
    recompute, used = pe.dce_jaxpr(closed, [True] * len(closed.out_avals), keep_inputs=False)
    used_saved = used[len(unknowns):]
    kj = known.jaxpr
    known_ext = ClosedJaxpr(Jaxpr(kj.constvars, kj.invars, list(kj.outvars[:n_known]) + [
        v for v, u in zip(saved, used_saved) if u], kj.eqns), known.consts)
    known_ext, _ = pe.dce_jaxpr(known_ext, [True] * len(known_ext.out_avals))
    return known_ext, recompute, out_unknowns, list(used[:len(unknowns)])


def _remat_partial_eval_policy(trace: pe.PartialEvalTrace, args: Sequence[Any],
                               params: dict) -> list:
    # As below, but the values the policy saves are computed now and passed to the staged
    # remat2, which recomputes only the rest.
    jaxpr, policy = params["jaxpr"], params["policy"]
    unknowns = tuple(trace.is_unknown(x) for x in args)
    known, recompute, out_unknowns, used = ad._cached(
        "remat_policy", jaxpr, (unknowns, policy),
        lambda: _split_by_policy(jaxpr, unknowns, policy))
    with core.set_current_trace(trace.parent):
        outs = eval_jaxpr(known.jaxpr, known.consts,
                          *[x for x, u in zip(args, unknowns) if not u])
    n_known = sum(not u for u in out_unknowns)
    known_outs, saved = outs[:n_known], outs[n_known:]
    unknown_outs = trace.stage(remat_p, [x for x, u in zip(args, used) if u] + saved,
                               dict(params, jaxpr=recompute, differentiated=True))
    k, u = iter(known_outs), iter(unknown_outs)
    return [next(u) if unk else next(k) for unk in out_unknowns]


def _remat_transpose(cts, *args, jaxpr, prevent_cse, differentiated, policy):
    return ad.call_transpose(remat_p, cts, args, jaxpr, prevent_cse=prevent_cse,
                             differentiated=True, policy=policy)


def _remat_batch(vals, dims, *, jaxpr, **params):
    # The batched body stays one remat2, so it is still rematerialized under reverse mode.
    size = batching.axis_size_of(vals, dims)
    batched, out_dims = batching.batch_jaxpr(jaxpr, size, dims)
    return remat_p.bind(*vals, jaxpr=batched, **params), list(out_dims)


remat_p.def_impl(_remat_impl)
remat_p.def_abstract_eval(_remat_abstract_eval)
remat_p.def_lowering(_remat_lowering)
remat_p.lowering_ignores = ("policy",)  # (lowered as its jaxpr)
remat_p.def_jvp(_remat_jvp)
remat_p.def_transpose(_remat_transpose)
remat_p.def_batching(_remat_batch)
pe.partial_eval_rules[remat_p] = _remat_partial_eval


def checkpoint(fun: Callable, *, prevent_cse: bool = True, policy: Any = None,
               static_argnums: int | Sequence[int] = ()) -> Callable:
    """``fun``, rematerialized under reverse mode: its intermediates are recomputed in the
    backward pass instead of being saved.

    Args:
        fun: the function to rematerialize.
        prevent_cse: accepted for compatibility (this compiler does not merge the recompute
            with the forward pass).
        policy: ``None`` (save nothing) or a function ``policy(prim, *avals, **params)``
            saying whether an intermediate may be saved (``ember.checkpoint_policies``).
        static_argnums: positions of arguments that are Python values, not traced.

    Example:
        >>> f = ember.checkpoint(lambda x: jnp.sin(jnp.sin(x)))
        >>> ember.grad(f)(1.0)
        Array(0.36003944, dtype=float32, weak_type=True)
    """
    if not callable(fun):
        raise TypeError(f"checkpoint: expected a callable, got {type(fun).__name__}")
    if policy is not None and not callable(policy):
        raise TypeError(f"checkpoint: policy must be callable or None, got {policy!r}")
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

    @functools.wraps(fun, updated=())
    def remat_f(*args: Any, **kwargs: Any) -> Any:
        if core.is_eval_context():
            return fun(*args, **kwargs)
        dyn_pos = [i for i in range(len(args)) if i not in static]
        flat, in_tree = _pytree.tree_flatten(([args[i] for i in dyn_pos], kwargs))
        out_trees = []

        def flat_fun(*leaves):
            dyn, kw = _pytree.tree_unflatten(in_tree, list(leaves))
            full = list(args)
            for i, v in zip(dyn_pos, dyn):
                full[i] = v
            out_flat, out_tree = _pytree.tree_flatten(fun(*full, **kw))
            out_trees.append(out_tree)
            return out_flat

        closed, _ = pe.trace_to_jaxpr(flat_fun, [core.get_aval(x) for x in flat])
        closed, extra = closure_convert(closed)
        outs = remat_p.bind(*extra, *flat, jaxpr=closed, prevent_cse=prevent_cse,
                            differentiated=False, policy=policy)
        return _pytree.tree_unflatten(out_trees[0], outs)

    return remat_f


remat = checkpoint

# ``checkpoint_name``: the identity, naming a value for the name-based policies.
name_p = core.Primitive("name")
name_p.def_impl(lambda x, *, name: x)
name_p.def_abstract_eval(lambda x, *, name: x)
name_p.def_lowering(lambda ctx, x, *, name: x)
name_p.lowering_ignores = ("name",)
name_p.def_jvp(lambda primals, tangents, *, name: (name_p.bind(primals[0], name=name),
                                                   tangents[0]))  # (the tangent is unnamed)
name_p.def_batching(lambda vals, dims, *, name: (name_p.bind(vals[0], name=name), dims[0]))


def checkpoint_name(x: Any, name: str) -> Any:
    """Names every array in the pytree ``x`` for the name-based checkpoint policies.

    Args:
        x: a pytree of arrays.
        name: the name (``save_only_these_names(name)`` saves the value).

    Returns:
        ``x`` unchanged.

    Example:
        >>> def f(x):
        ...     y = checkpoint_name(jnp.sin(x), "y")
        ...     return jnp.sin(y)
        >>> policy = ember.checkpoint_policies.save_only_these_names("y")
        >>> ember.grad(ember.checkpoint(f, policy=policy))(1.0)
        Array(0.35888645, dtype=float32, weak_type=True)
    """
    from ember.lax.base import as_operand  # (ember.lax imports this module's users)
    return _pytree.tree_map(
        lambda v: name_p.bind(as_operand(v, "checkpoint_name", "x"), name=name), x)


# Policies: ``policy(prim, *avals, **params)`` says whether an output of ``prim`` is saved.
def everything_saveable(*_: Any, **__: Any) -> bool:
    """Saves every intermediate (no recompute)."""
    return True


def nothing_saveable(*_: Any, **__: Any) -> bool:
    """Saves nothing (the default: everything is recomputed)."""
    return False


def _is_dot(prim: core.Primitive) -> bool:
    return prim.name in ("dot_general", "conv_general_dilated")


def _no_batch_dims(prim: core.Primitive, params: dict) -> bool:
    if prim.name != "dot_general":
        return False
    (_, _), (lhs_b, rhs_b) = params["dimension_numbers"]
    return not lhs_b and not rhs_b


def dots_saveable(prim: core.Primitive, *_: Any, **__: Any) -> bool:
    """Saves the results of ``dot_general`` and ``conv_general_dilated``."""
    return _is_dot(prim)


def dots_with_no_batch_dims_saveable(prim: core.Primitive, *_: Any, **params: Any) -> bool:
    """Saves the results of ``dot_general`` without batch dimensions (matmuls)."""
    return _no_batch_dims(prim, params)


def offload_dot_with_no_batch_dims(offload_src: Any, offload_dst: Any) -> Callable:
    """``dots_with_no_batch_dims_saveable``, offloading to ``offload_dst`` memory (one
    memory here: the residuals stay where they are)."""
    def policy(prim: core.Primitive, *_: Any, **params: Any) -> _Decision:
        return (Offloadable(offload_src, offload_dst) if _no_batch_dims(prim, params)
                else Recompute)
    return policy


def save_anything_except_these_names(*names_not_to_save: str) -> Callable:
    """Saves every intermediate except the values named ``names_not_to_save``."""
    names = frozenset(names_not_to_save)

    def policy(prim: core.Primitive, *_: Any, **params: Any) -> bool:
        return not (prim is name_p and params["name"] in names)
    return policy


def save_any_names_but_these(*names_not_to_save: str) -> Callable:
    """Saves the named values (``checkpoint_name``) except ``names_not_to_save``."""
    names = frozenset(names_not_to_save)
    return lambda prim, *_, **params: prim is name_p and params["name"] not in names


def save_only_these_names(*names_which_can_be_saved: str) -> Callable:
    """Saves only the values named one of ``names_which_can_be_saved``."""
    names = frozenset(names_which_can_be_saved)
    return lambda prim, *_, **params: prim is name_p and params["name"] in names


def save_and_offload_only_these_names(*, names_which_can_be_saved: Sequence[str],
                                      names_which_can_be_offloaded: Sequence[str],
                                      offload_src: Any, offload_dst: Any) -> Callable:
    """``save_only_these_names``, with some names offloaded (kept in place here)."""
    saved, offloaded = set(names_which_can_be_saved), set(names_which_can_be_offloaded)
    if saved & offloaded:
        raise ValueError(
            "The names should be exclusive and should not intersect in "
            f"`names_which_can_be_saved` and `names_which_can_be_offloaded`. Got "
            f"names_which_can_be_saved={saved}, names_which_can_be_offloaded={offloaded} "
            f"and the intersection={saved & offloaded}")

    def policy(prim: core.Primitive, *_: Any, **params: Any) -> _Decision:
        if prim is name_p and params["name"] in saved:
            return Saveable
        if prim is name_p and params["name"] in offloaded:
            return Offloadable(offload_src, offload_dst)
        return Recompute
    return policy


def save_from_both_policies(policy_1: Callable, policy_2: Callable) -> Callable:
    """Saves what either policy saves."""
    def policy(prim: core.Primitive, *args: Any, **params: Any) -> bool:
        out1, out2 = policy_1(prim, *args, **params), policy_2(prim, *args, **params)
        if not (isinstance(out1, bool) and isinstance(out2, bool)):
            raise ValueError(
                f"save_from_both_policies: the policies must return booleans, got {out1} "
                f"and {out2}; write a policy function directly instead.")
        return out1 or out2
    return policy


checkpoint_policies = types.SimpleNamespace(
    everything_saveable=everything_saveable,
    nothing_saveable=nothing_saveable,
    dots_saveable=dots_saveable,
    checkpoint_dots=dots_saveable,
    dots_with_no_batch_dims_saveable=dots_with_no_batch_dims_saveable,
    checkpoint_dots_with_no_batch_dims=dots_with_no_batch_dims_saveable,
    offload_dot_with_no_batch_dims=offload_dot_with_no_batch_dims,
    save_anything_except_these_names=save_anything_except_these_names,
    save_any_names_but_these=save_any_names_but_these,
    save_only_these_names=save_only_these_names,
    save_from_both_policies=save_from_both_policies,
    save_and_offload_only_these_names=save_and_offload_only_these_names,
)

__all__ = ["Offloadable", "Recompute", "Saveable", "checkpoint", "checkpoint_name",
           "checkpoint_policies", "name_p", "remat", "remat_p"]
