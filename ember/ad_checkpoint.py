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
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember import core, tree_util
from ember.interpreters import ad, batching
from ember.interpreters import partial_eval as pe
from ember.interpreters.pjit import _pjit_lowering, closure_convert
from ember.jaxpr import ClosedJaxpr, eval_closed_jaxpr, eval_jaxpr

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
    backward pass instead of being saved. ``policy`` is accepted; only ``None`` (save
    nothing) is supported.

    Example:
        >>> f = ember.checkpoint(lambda x: jnp.sin(jnp.sin(x)))
        >>> ember.grad(f)(1.0)
        Array(0.36003944, dtype=float32, weak_type=True)
    """
    if not callable(fun):
        raise TypeError(f"checkpoint: expected a callable, got {type(fun).__name__}")
    if policy is not None:
        raise NotImplementedError("checkpoint: only policy=None (save nothing) is supported")
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

    @functools.wraps(fun, updated=())
    def remat_f(*args: Any, **kwargs: Any) -> Any:
        if core.is_eval_context():
            return fun(*args, **kwargs)
        dyn_pos = [i for i in range(len(args)) if i not in static]
        flat, in_tree = tree_util.tree_flatten(([args[i] for i in dyn_pos], kwargs))
        out_trees = []

        def flat_fun(*leaves):
            dyn, kw = tree_util.tree_unflatten(in_tree, list(leaves))
            full = list(args)
            for i, v in zip(dyn_pos, dyn):
                full[i] = v
            out_flat, out_tree = tree_util.tree_flatten(fun(*full, **kw))
            out_trees.append(out_tree)
            return out_flat

        closed, _ = pe.trace_to_jaxpr(flat_fun, [core.get_aval(x) for x in flat])
        closed, extra = closure_convert(closed)
        outs = remat_p.bind(*extra, *flat, jaxpr=closed, prevent_cse=prevent_cse,
                            differentiated=False, policy=policy)
        return tree_util.tree_unflatten(out_trees[0], outs)

    return remat_f


remat = checkpoint

__all__ = ["checkpoint", "remat", "remat_p"]
