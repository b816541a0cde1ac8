"""Conditionals: ``cond`` and ``switch``, and their primitive ``cond``.

``cond_p`` takes an int32 index, then the operands, and holds ``branches``: a tuple of closed
jaxprs, each taking the branches' common consts followed by the operands. It runs the branch
the index selects (an out-of-range index runs the last branch, as HLO's ``case`` does; the
public functions never pass one). ``cond`` binds ``branches=(false_fun, true_fun)`` with the
predicate converted to int32; ``switch`` clamps its index into range.

Example:
    >>> print(ember.make_jaxpr(lambda x: lax.cond(x > 0, jnp.sin, jnp.cos, x))(1.0))
    { lambda ; a:f32[]. let
        b:bool[] = gt a 0.0:f32[]
        c:i32[] = convert_element_type[new_dtype=int32 weak_type=False] b
        d:f32[] = cond[
          branches=(
            { lambda ; e:f32[]. let f:f32[] = cos e in (f,) }
            { lambda ; g:f32[]. let h:f32[] = sin g in (h,) }
          )
        ] c a
      in (d,) }
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember import core, dtypes
from ember._pytree import PyTreeDef, tree_flatten, tree_unflatten
from ember.config import config
from ember.interpreters import ad, batching
from ember.interpreters import partial_eval as pe
from ember.jaxpr import ClosedJaxpr, Jaxpr, Var, eval_jaxpr, has_side_effect
from ember.lax import ad_util, elementwise, shape
from ember.lax.control_flow import common

__all__ = ["cond", "cond_p", "switch"]

cond_p = core.MultipleResultsPrimitive("cond")
cond_p.pp_param_order = ("branches",)

_no_operand = object()


# --------------------------------------------------------------------------- public API


def cond(pred: Any, true_fun: Callable, false_fun: Callable, *operands: Any,
         operand: Any = _no_operand) -> Any:
    """Applies ``true_fun`` or ``false_fun`` to ``operands``, as ``pred`` says.

    Both functions are traced (once each); only the chosen one runs. Under ``vmap`` with a
    batched ``pred`` both run and the results are selected elementwise.

    Args:
        pred: a boolean or numeric scalar (a number counts as true when non-zero).
        true_fun: the function applied when ``pred`` is true.
        false_fun: the function applied otherwise; it must return the same pytree
            structure with the same shapes and dtypes as ``true_fun``.
        *operands: the arguments of either function (any pytrees of arrays).
        operand: the single operand, as a keyword (JAX's older form).

    Returns:
        What the applied function returns.

    Example:
        >>> lax.cond(True, lambda x: x * 2.0, lambda x: -x, 3.0)
        Array(6., dtype=float32, weak_type=True)
    """
    if not (callable(true_fun) and callable(false_fun)):
        # JAX's deprecated form ``cond(pred, true_operand, true_fun, false_operand, false_fun)``
        if callable(false_fun) and len(operands) == 2 and callable(operands[1]):
            x_true, f_true, x_false, f_false = true_fun, false_fun, *operands
            return cond(pred, lambda x, _: f_true(x), lambda _, x: f_false(x), x_true, x_false)
        raise TypeError("lax.cond: true_fun and false_fun arguments should be callable.")
    operands = _single_operand(operands, operand)
    if pred is None:
        raise TypeError("cond predicate is None")
    if isinstance(pred, Sequence) or np.ndim(pred) != 0:
        raise TypeError(f"Pred must be a scalar, got {pred} of " + (
            f"type {type(pred)}" if isinstance(pred, Sequence) else f"shape {np.shape(pred)}."))
    try:
        pred_dtype = dtypes.result_type(pred)
    except TypeError as err:
        raise TypeError(f"Pred type must be either boolean or number, got {pred}.") from err
    if pred_dtype.kind != "b":
        if pred_dtype.kind not in "iuf":
            raise TypeError(f"Pred type must be either boolean or number, got {pred_dtype}.")
        pred = pred != 0
    if config.jit_disabled and _is_concrete(pred):
        return true_fun(*operands) if pred else false_fun(*operands)
    index = elementwise.convert_element_type(pred, np.int32)
    return _bind_cond(index, (false_fun, true_fun), operands, "cond",
                      ("false_fun", "true_fun"), first=1)


def switch(index: Any, branches: Sequence[Callable], *operands: Any,
           operand: Any = _no_operand) -> Any:
    """Applies ``branches[index]`` to ``operands``; ``index`` is clamped into range.

    Args:
        index: an integer scalar.
        branches: the functions to choose from; all must return the same pytree structure
            with the same shapes and dtypes.
        *operands: the arguments of each branch (any pytrees of arrays).
        operand: the single operand, as a keyword (JAX's older form).

    Returns:
        What the chosen branch returns.

    Example:
        >>> lax.switch(5, [lambda x: x + 1, lambda x: x * 10], 2)  # index clamped to 1
        Array(20, dtype=int32, weak_type=True)
    """
    if not all(callable(b) for b in branches):
        raise TypeError("lax.switch: branches argument should be a sequence of callables.")
    operands = _single_operand(operands, operand)
    if len(np.shape(index)) != 0:
        raise TypeError(f"Branch index must be scalar, got {index} of shape "
                        f"{np.shape(index)}.")
    try:
        index_dtype = dtypes.result_type(index)
    except TypeError as err:
        raise TypeError(f"Index type must be an integer, got {index}.") from err
    if index_dtype.kind not in "iu":
        raise TypeError(f"Index type must be an integer, got {index} as {index_dtype}")
    branches = tuple(branches)
    if not branches:
        raise ValueError("Empty branch sequence")
    if len(branches) == 1:
        return branches[0](*operands)
    index = elementwise.convert_element_type(index, np.int32)
    index = elementwise.clamp(np.int32(0), index, np.int32(len(branches) - 1))
    if config.jit_disabled and _is_concrete(index):
        return branches[int(index)](*operands)
    names = ["branch 0"] + [f"branch{i}" for i in range(1, len(branches))]  # (JAX's names)
    return _bind_cond(index, branches, operands, "switch", names)


def _single_operand(operands: tuple, operand: Any) -> tuple:
    if operand is _no_operand:
        return operands
    if operands:
        raise TypeError("if 'operand' keyword is passed then no positional operands can be "
                        f"passed, got operand={operand} and positional operands {operands}")
    return (operand,)


def _is_concrete(x: Any) -> bool:
    return not isinstance(x, core.Tracer) or x.to_concrete_value() is not None


def _bind_cond(index: Any, funs: Sequence[Callable], operands: tuple, api: str,
               names: Sequence[str], first: int = 0) -> Any:
    """Traces ``funs`` on ``operands``, checks their outputs agree with those of
    ``funs[first]`` and binds ``cond``."""
    flat, in_tree = tree_flatten(operands)
    avals = [core.get_aval(x) for x in flat]
    # (traced ``funs[first]`` first, as JAX: the closed-over values' order follows it)
    order = [first] + [i for i in range(len(funs)) if i != first]
    traced, consts, trees = common.trace_functions([funs[i] for i in order], in_tree, avals)
    jaxprs, out_trees = [None] * len(funs), [None] * len(funs)
    for k, i in enumerate(order):
        jaxprs[i], out_trees[i] = traced[k], trees[k]
    # (``first`` is what errors name first, as JAX's: true_fun for cond, branch 0 for switch)
    for i in [i for i in range(len(funs)) if i != first]:
        _check_branch_outputs(api, names[first], names[i], funs[first], funs[i],
                              out_trees[first], out_trees[i], jaxprs[first].out_avals,
                              jaxprs[i].out_avals)
    # Outputs every branch forwards from the same input are returned directly (JAX prunes
    # them too, so its jaxprs read the same).
    fwds = [_forwarded_inputs(j.jaxpr) for j in jaxprs]
    in_fwd = [f[0] if f[0] is not None and len(set(f)) == 1 else None for f in zip(*fwds)]
    keep = [f is None for f in in_fwd]
    jaxprs = [_prune_outputs(j, keep) for j in jaxprs]
    outs = iter(cond_p.bind(index, *consts, *flat, branches=tuple(jaxprs)))
    all_in = [*consts, *flat]
    results = [next(outs) if f is None else _as_array(all_in[f]) for f in in_fwd]
    return tree_unflatten(out_trees[0], results)


def _forwarded_inputs(jaxpr: Jaxpr) -> list[int | None]:
    pos = {v.id: i for i, v in enumerate(jaxpr.invars)}
    return [pos.get(v.id) if isinstance(v, Var) else None for v in jaxpr.outvars]


def _prune_outputs(closed: ClosedJaxpr, keep: Sequence[bool]) -> ClosedJaxpr:
    if all(keep):
        return closed
    j = closed.jaxpr
    outvars = [v for v, k in zip(j.outvars, keep) if k]
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, outvars, j.eqns), closed.consts)


def _as_array(x: Any) -> Any:
    if hasattr(x, "aval"):  # a tracer or an ember array already
        return x
    aval = core.get_aval(x)
    return elementwise.convert_element_type(x, aval.dtype, aval.weak_type)


# --------------------------------------------------------------------------- output checks


def _sourceinfo(fun: Callable) -> str:
    code = getattr(fun, "__code__", None)
    name = getattr(fun, "__name__", type(fun).__name__)
    if code is None:
        return name
    return f"{name} at {code.co_filename}:{code.co_firstlineno}"


def _node_label(tree: PyTreeDef) -> str:
    data = tree.node_data()
    return "pytree leaf" if data is None else str(data[0])


def _child_keys(tree: PyTreeDef) -> list[str]:
    kind, aux = tree.node_data()
    n = len(tree.children())
    if kind is dict:
        return [f"[{k!r}]" for k in aux]
    if isinstance(aux, tuple) and len(aux) == n and hasattr(kind, "_fields"):
        return [f".{f}" for f in aux]
    return [f"[{i}]" for i in range(n)]


def _tree_differences(t1: PyTreeDef, t2: PyTreeDef, path: str = "") -> list[tuple]:
    """(path, what t1 is, what t2 is, why) for each difference of two structures, worded
    as JAX's ``equality_errors`` words them."""
    d1, d2 = t1.node_data(), t2.node_data()
    if d1 is None and d2 is None:
        return []
    if (d1 is None) != (d2 is None) or d1[0] is not d2[0]:
        return [(path, _node_label(t1), _node_label(t2), "their Python types differ")]
    kind = d1[0]
    c1, c2 = t1.children(), t2.children()
    if len(c1) != len(c2):
        if issubclass(kind, (list, tuple)):
            return [(path, f"{kind.__name__} of length {len(c1)}",
                     f"{kind.__name__} of length {len(c2)}", "the lengths do not match")]
        why = "the numbers of children do not match"
        if kind is dict:
            keys = " ".join(repr(k) for k in set(d1[1]).symmetric_difference(d2[1]))
            why += f", with the symmetric difference of key sets: {{{keys}}}"
        plural = (lambda n: f"{kind} with {n} child{'ren' if n > 1 else ''}")
        return [(path, plural(len(c1)), plural(len(c2)), why)]
    if d1[1] != d2[1]:
        meta = (lambda d: tuple(d[1]) if isinstance(d[1], list) else d[1])
        return [(path, f"{kind} with pytree metadata {meta(d1)}",
                 f"{kind} with pytree metadata {meta(d2)}",
                 "the pytree node metadata does not match")]
    diffs = []
    for key, a, b in zip(_child_keys(t1), c1, c2):
        diffs += _tree_differences(a, b, path + key)
    return diffs


def _bullets(items: list[str], capitalize: bool) -> str:
    """One difference as a sentence, several as a bulleted list (as JAX words them)."""
    if len(items) == 1:
        return (items[0][0].upper() + items[0][1:] if capitalize else items[0]) + ".\n"
    return "\n".join(f"  * {d};" for d in items[:-1]) + f"\n  * {items[-1]}.\n"


def _check_branch_outputs(api: str, name1: str, name2: str, f1: Callable, f2: Callable,
                          tree1: PyTreeDef, tree2: PyTreeDef, avals1: Sequence[Any],
                          avals2: Sequence[Any]) -> None:
    """JAX's TypeErrors for branches whose output structures or types differ."""
    where = f"{name1} is {_sourceinfo(f1)}\n{name2} is {_sourceinfo(f2)}\n\n"
    if tree1 != tree2:
        diffs = [f"{name1} output{f' at path {p}' if p else ''} is a {a} but {name2} "
                 f"output{f' at path {p}' if p else ''} is a {b}, so {why}"
                 for p, a, b, why in _tree_differences(tree1, tree2)]
        if diffs:
            raise TypeError(f"{api} branch outputs must have the same pytree structure, but "
                            f"they differ:\n\n{where}{_bullets(diffs, False)}\nRevise "
                            f"{name1} and/or {name2} so that they have the same pytree "
                            "structure.")
    paths = _leaf_paths(tree1)
    diffs = []
    for p, a1, a2 in zip(paths, avals1, avals2):
        why = [w for w, bad in (("the dtypes do not match", a1.dtype != a2.dtype),
                                ("the shapes do not match", a1.shape != a2.shape)) if bad]
        if why:
            at = f" at path {p}" if p else ""
            diffs.append(f"the output of {name1}{at} has type {a1._long()} but the "
                         f"corresponding output of {name2} has type {a2._long()}, so "
                         + ", and ".join(why))  # (JAX's wording)
    if diffs:
        raise TypeError(f"{api} branches must have equal output types but they differ.\n\n"
                        f"{where}{_bullets(diffs, True)}\nRevise {name1} and/or {name2} so "
                        "that all output types match.")


def _leaf_paths(tree: PyTreeDef, path: str = "") -> list[str]:
    if tree.node_data() is None:
        return [path]
    out = []
    for key, child in zip(_child_keys(tree), tree.children()):
        out += _leaf_paths(child, path + key)
    return out


# --------------------------------------------------------------------------- rules


def _pick(index: Any, n: int) -> int:
    i = int(index)
    return i if 0 <= i < n else n - 1  # (HLO ``case``: out of range runs the last branch)


def _cond_impl(index: Any, *args: Any, branches: tuple) -> list:
    branch = branches[_pick(index, len(branches))]
    return [np.asarray(o) for o in eval_jaxpr(branch.jaxpr, branch.consts, *args)]


def _cond_abstract_eval(index: core.ShapedArray, *avals: core.ShapedArray,
                        branches: tuple) -> list:
    if not branches:
        raise TypeError("cond requires at least one branch function")
    if index.shape != () or index.dtype != np.int32:
        raise TypeError(f"cond called with index of type {index.str_short()} instead of "
                        "int32[]")
    b0 = branches[0]
    same = (lambda xs, ys: len(xs) == len(ys)
            and all((x.shape, x.dtype) == (y.shape, y.dtype) for x, y in zip(xs, ys)))
    for i, b in enumerate(branches[1:], 1):
        if not same(b0.in_avals, b.in_avals):
            raise TypeError(f"cond branches 0 and {i} have mismatching input types: "
                            f"{_avals_short(b0.in_avals)} vs {_avals_short(b.in_avals)}")
        if not same(b0.out_avals, b.out_avals):
            raise TypeError(f"cond branches 0 and {i} have mismatching output types: "
                            f"{_avals_short(b0.out_avals)} vs {_avals_short(b.out_avals)}")
    if not same(b0.in_avals, avals):
        raise TypeError(f"cond branches take input types {_avals_short(b0.in_avals)}, called "
                        f"with operands of type {_avals_short(avals)}")
    return list(b0.out_avals)


def _avals_short(avals: Sequence[core.ShapedArray]) -> str:
    return " ".join(a.str_short() for a in avals)


def _cond_lowering(ctx: Any, index: Any, *args: Any, branches: tuple) -> list:
    comps = [common.lower_to_computation(ctx, b, f"branch_{i}")
             for i, b in enumerate(branches)]
    out = ctx.b.op("case", index, *args, calls=comps)
    return [ctx.b.op("get_tuple_element", out, index=i)
            for i in range(len(branches[0].out_avals))]


cond_p.def_impl(_cond_impl)
cond_p.def_abstract_eval(_cond_abstract_eval)
cond_p.def_lowering(_cond_lowering)


# --------------------------------------------------------------------------- autodiff
# jvp: a cond of the branches' JVP jaxprs; an output tangent is nonzero when it is in some
# branch (the others instantiate zeros). Reverse mode: the partial-eval rule splits each
# branch into a known part (run now, in a cond) and an unknown (linear) part (staged, in a
# cond), linked by residuals; each branch has its own residuals, so every known branch
# returns all of them (zeros for the others' slots) and every unknown branch takes them all.
# The transpose is a cond of the transposed branches; the index is never linear.


def _cond_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, branches: tuple):
    index, *ops = primals
    nz = [type(t) is not ad.Zero for t in tangents[1:]]
    out_nz = [any(z) for z in zip(*[ad.jvp_jaxpr(b, nz, instantiate=False)[1]
                                    for b in branches])]
    jvps = tuple(ad.jvp_jaxpr(b, nz, instantiate=out_nz)[0] for b in branches)
    outs = cond_p.bind(index, *ops, *[t for t in tangents[1:] if type(t) is not ad.Zero],
                       branches=jvps)
    n = len(out_nz)
    it = iter(outs[n:])
    return outs[:n], [next(it) if z else ad.Zero(ad.tangent_aval(a))
                      for z, a in zip(out_nz, branches[0].out_avals)]


def _merge_residuals(res_avals: Sequence[Sequence[core.ShapedArray]]
                     ) -> tuple[list[core.ShapedArray], list[list[int]]]:
    """One residual list for all branches: the k-th residual of a type in each branch
    shares a slot with the k-th of that type in the others. Returns the slots' types and,
    per branch, the slot of each of its residuals."""
    slots: dict[tuple, int] = {}
    all_avals: list[core.ShapedArray] = []
    where = []
    for avals in res_avals:
        seen: collections.Counter = collections.Counter()
        idx = []
        for a in avals:
            key = (a, seen[a])
            seen[a] += 1
            if key not in slots:
                slots[key] = len(all_avals)
                all_avals.append(a)
            idx.append(slots[key])
        where.append(idx)
    return all_avals, where


def _join_known(known: ClosedJaxpr, n_out: int, all_res: Sequence[core.ShapedArray],
                slots: Sequence[int]) -> ClosedJaxpr:
    """``known`` returning its outputs, then every residual slot (zeros where not its own)."""
    def fun(*args):
        outs = eval_jaxpr(known.jaxpr, known.consts, *args)
        res = [None] * len(all_res)
        for s, r in zip(slots, outs[n_out:]):
            res[s] = r
        return outs[:n_out] + [ad_util.zeros_like_aval(a) if r is None else r
                               for a, r in zip(all_res, res)]
    closed, _ = pe.trace_to_jaxpr(fun, known.in_avals)
    return closed


def _join_unknown(unknown: ClosedJaxpr, all_vars: Sequence[Var],
                  slots: Sequence[int]) -> ClosedJaxpr:
    """``unknown`` taking every residual slot (ignoring the others' slots) first."""
    j = unknown.jaxpr
    res = list(all_vars)
    for s, v in zip(slots, j.invars[:len(slots)]):
        res[s] = v
    # (a fresh Var per unused slot: a jaxpr binds each variable once)
    res = [Var(v.aval) if v is all_vars[i] else v for i, v in enumerate(res)]
    return ClosedJaxpr(Jaxpr(j.constvars, res + j.invars[len(slots):], j.outvars, j.eqns),
                       unknown.consts)


def _cond_partial_eval(trace: pe.PartialEvalTrace, args: Sequence[Any], params: dict) -> list:
    branches = params["branches"]
    index, *ops = args
    if trace.is_unknown(index):
        return trace.stage(cond_p, args, params)
    unknowns = tuple(trace.is_unknown(x) for x in ops)
    known_b, unknown_b, out_uks, num_res = ad._cached(
        "cond_partial_eval", branches[0], (branches, unknowns),
        lambda: _split_branches(branches, list(unknowns)))
    with core.set_current_trace(trace.parent):
        known_outs = cond_p.bind(index, *[x for x, u in zip(ops, unknowns) if not u],
                                 branches=known_b)
    n_known = len(known_outs) - num_res
    res = known_outs[n_known:]
    if any(out_uks) or any(_has_effect(b) for b in unknown_b):
        unknown_outs = trace.stage(cond_p, [index, *res, *[x for x, u in zip(ops, unknowns) if u]],
                                   dict(branches=unknown_b))
    else:
        unknown_outs = []
    k, u = iter(known_outs[:n_known]), iter(unknown_outs)
    return [next(u) if uk else next(k) for uk in out_uks]


def _has_effect(closed: ClosedJaxpr) -> bool:
    return any(has_side_effect(e) for e in closed.jaxpr.eqns)


def _split_branches(branches: tuple, unknowns: list[bool]):
    out_uks = [any(u) for u in zip(*[pe.partial_eval_jaxpr(b, unknowns)[2] for b in branches])]
    # (an output unknown in some branch is made unknown in all: a residual where known)
    splits = [pe.partial_eval_jaxpr(b, unknowns, instantiate=out_uks) for b in branches]
    splits = [(k, u, n) for k, u, _, n in splits]
    res_avals = [k.out_avals[len(k.out_avals) - n:] if n else [] for k, _, n in splits]
    all_res, where = _merge_residuals(res_avals)
    n_known = len(out_uks) - sum(out_uks)
    all_vars = [Var(a) for a in all_res]
    known_b = tuple(_join_known(k, n_known, all_res, s) for (k, _, _), s in zip(splits, where))
    unknown_b = tuple(_join_unknown(u, all_vars, s) for (_, u, _), s in zip(splits, where))
    return known_b, unknown_b, out_uks, len(all_res)


def _cond_transpose(cts: Sequence[Any], index: Any, *args: Any, branches: tuple) -> list:
    if ad.is_undefined_primal(index):
        raise ValueError("cond: the branch index cannot be linear")
    linear = [ad.is_undefined_primal(a) for a in args]
    ct_nz = [type(c) is not ad.Zero for c in cts]
    if not any(ct_nz):
        return [None] + [ad.Zero(a.aval) if lin else None for a, lin in zip(args, linear)]
    t_branches = tuple(ad.transpose_jaxpr(b, linear, ct_nz) for b in branches)
    outs = iter(cond_p.bind(index, *[a for a, lin in zip(args, linear) if not lin],
                            *[c for c in cts if type(c) is not ad.Zero], branches=t_branches))
    return [None] + [next(outs) if lin else None for lin in linear]


cond_p.def_jvp(_cond_jvp)
cond_p.def_transpose(_cond_transpose)
pe.partial_eval_rules[cond_p] = _cond_partial_eval


# --------------------------------------------------------------------------- batching
# An unbatched index stays a cond of the batched branches. A batched index runs every
# branch on the whole batch and picks each element's result with ``select_n`` (as JAX;
# host callbacks with effects would then run for branches not taken, so io_callback is
# refused, as JAX refuses IO effects there; debug prints run for every branch).


def _uses_io_callback(jaxpr: Jaxpr) -> bool:
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "io_callback":
            return True
        for value in eqn.params.values():
            for sub in (value if type(value) is tuple else (value,)):
                sub = sub.jaxpr if isinstance(sub, ClosedJaxpr) else sub
                if isinstance(sub, Jaxpr) and _uses_io_callback(sub):
                    return True
    return False


def _cond_batch(vals: Sequence[Any], dims: Sequence[Any], *, branches: tuple):
    size = batching.axis_size_of(vals, dims)
    (index, *ops), (index_dim, *op_dims) = vals, dims
    if any(_uses_io_callback(b.jaxpr) for b in branches):
        raise NotImplementedError("IO effect not supported in vmap-of-cond.")
    if index_dim is not batching.not_mapped:
        index = batching.match_dim(index, index_dim, 0, size)
        ops = [batching.match_dim(x, d, 0, size) for x, d in zip(ops, op_dims)]
        outs_per_branch = []
        for i, b in enumerate(branches):
            batched, _ = batching.batch_jaxpr(b, size, [0] * len(ops), out_dims=0)
            taken = elementwise.eq(index, np.int32(i))
            # (operands of elements that do not take this branch carry no gradient)
            ops_i = [_bcast_select(taken, x, ad_util.stop_gradient(x)) for x in ops]
            outs_per_branch.append(eval_jaxpr(batched.jaxpr, batched.consts, *ops_i))
        outs = [_bcast_select_n(index, *cases) for cases in zip(*outs_per_branch)]
        return outs, [0] * len(outs)
    ops = [batching.match_dim(x, d, 0, size) if d is not batching.not_mapped else x
           for x, d in zip(ops, op_dims)]
    in_dims = [0 if d is not batching.not_mapped else None for d in op_dims]
    nat = [batching.batch_jaxpr(b, size, in_dims)[1] for b in branches]
    out_bat = [any(d is not batching.not_mapped for d in ds) for ds in zip(*nat)]
    spec = [0 if b else None for b in out_bat]
    batched = tuple(batching.batch_jaxpr(b, size, in_dims, out_dims=spec)[0] for b in branches)
    return cond_p.bind(index, *ops, branches=batched), spec


def _bcast(pred: Any, like: Any) -> Any:
    shp = core.get_aval(like).shape
    if core.get_aval(pred).shape == shp:
        return pred
    return shape.broadcast_in_dim(pred, shp, (0,))


def _bcast_select(pred: Any, on_true: Any, on_false: Any) -> Any:
    return elementwise.select_n(_bcast(pred, on_true), on_false, on_true)


def _bcast_select_n(index: Any, *cases: Any) -> Any:
    return elementwise.select_n(_bcast(index, cases[0]), *cases)


cond_p.def_batching(_cond_batch)
