"""Custom vmap rules: ``custom_vmap`` and ``sequential_vmap`` (``jax.custom_batching``).

A ``custom_vmap`` function runs as itself, except under ``vmap``, where its rule runs
instead: ``rule(axis_size, in_batched, *args) -> (out, out_batched)`` gets the arguments
with their batch dimension (if any) first and says which outputs it batched. It is staged
as one ``custom_vmap_call`` primitive holding the function's jaxpr and the rule. Forward
mode differentiates both (a JVP under vmap runs the JVP of the rule); as in JAX, reverse
mode is not supported.

Example:
    >>> @custom_vmap
    ... def f(x):
    ...     return jnp.sin(x)
    >>> @f.def_vmap
    ... def f_rule(axis_size, in_batched, x):
    ...     return jnp.cos(x), in_batched[0]   # (a different function when batched)
    >>> f(0.0), ember.vmap(f)(jnp.zeros(2))
    (Array(0., dtype=float32, weak_type=True), Array([1., 1.], dtype=float32))
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ember import _pytree, core
from ember.interpreters import ad, batching
from ember.interpreters import partial_eval as pe
from ember.interpreters.pjit import _pjit_lowering, closure_convert
from ember.jaxpr import ClosedJaxpr, eval_closed_jaxpr

__all__ = ["custom_vmap", "sequential_vmap"]

custom_vmap_p = core.MultipleResultsPrimitive("custom_vmap_call")


def _rule_name(rule: Callable) -> str:
    return getattr(rule, "__name__", "<unnamed rule>")


def _check_rule_trees(rule: Callable, original: Any, out_tree: Any, batched_tree: Any) -> None:
    if out_tree != batched_tree:
        raise ValueError(
            "structure of output value and output batching specification returned by "
            f"custom vmap rule ({_rule_name(rule)}) do not match.\n"
            f"Output values: {out_tree}\nBatching spec: {batched_tree}")
    if out_tree != original:
        raise ValueError(
            f"structure of output returned by custom vmap rule ({_rule_name(rule)}) does "
            "not match that of original custom-vmapped function.\n"
            f"Original output: {original}\nRule output: {out_tree}")


def _impl(*args: Any, call: ClosedJaxpr, **_: Any) -> list:
    return eval_closed_jaxpr(call, *args)


def _abstract_eval(*avals: core.ShapedArray, call: ClosedJaxpr, **_: Any) -> list:
    return list(call.out_avals)


def _lowering(ctx: Any, *args: Any, call: ClosedJaxpr, **_: Any) -> list:
    return _pjit_lowering(ctx, *args, jaxpr=call, name="custom_vmap")


def _batch(vals, dims, *, call, rule, in_tree, out_tree, num_consts):
    from ember.lax import batch_util
    if any(d is not batching.not_mapped for d in dims[:num_consts]):
        raise ValueError("custom_vmap: the function closes over a value that vmap batches; "
                         "pass that value as an argument instead")
    size = batching.axis_size_of(vals, dims)
    args = [v if d is batching.not_mapped else batch_util.move_to(v, d, 0, size)
            for v, d in zip(vals[num_consts:], dims[num_consts:])]
    in_batched = _pytree.tree_unflatten(
        in_tree, [d is not batching.not_mapped for d in dims[num_consts:]])
    out, out_batched = rule(size, list(in_batched), *_pytree.tree_unflatten(in_tree, args))
    flat_out, tree1 = _pytree.tree_flatten(out)
    flat_batched, tree2 = _pytree.tree_flatten(out_batched)
    _check_rule_trees(rule, out_tree, tree1, tree2)
    return flat_out, [0 if b else batching.not_mapped for b in flat_batched]


def _jvp(primals, tangents, *, call, rule, in_tree, out_tree, num_consts):
    # The JVP is again a custom_vmap_call: of the JVP of ``call``, and under vmap of the JVP
    # of ``rule`` (vmapped further over what only the primals or only the tangents batch).
    # Closed-over values (the first ``num_consts`` operands) and their tangents stay leading
    # operands that the rule never sees.
    tangents = [ad.instantiate_zeros(t) for t in tangents]
    n_c, n = num_consts, len(primals)
    jvp_call, _ = ad.jvp_jaxpr(call, [True] * n, True)
    in_avals = list(jvp_call.in_avals)
    order = (list(range(n_c)) + list(range(n, n + n_c)) + list(range(n_c, n))
             + list(range(n + n_c, 2 * n)))  # (c, ct, p, t) -> jvp_call's (c, p, ct, t)

    def reordered(*xs):
        ins = [None] * (2 * n)
        for pos, x in zip(order, xs):
            ins[pos] = x
        return eval_closed_jaxpr(jvp_call, *ins)
    closed, _ = pe.trace_to_jaxpr(reordered, [in_avals[i] for i in order])
    closed, extra = closure_convert(closed)
    args = (list(primals[:n_c]) + list(tangents[:n_c]) + list(primals[n_c:])
            + list(tangents[n_c:]))
    outs = custom_vmap_p.bind(
        *extra, *args, call=closed, rule=_Rule(_jvp_of_rule(rule, out_tree), rule),
        in_tree=_pytree.tree_structure((_pytree.tree_unflatten(in_tree, [0] * (n - n_c)),)
                                         * 2),
        out_tree=_pytree.tree_structure(
            (_pytree.tree_unflatten(out_tree, [0] * out_tree.num_leaves),) * 2),
        num_consts=len(extra) + 2 * n_c)
    k = len(outs) // 2
    return outs[:k], outs[k:]


def _jvp_of_rule(rule: Callable, out_tree: Any) -> Callable:
    def jvp_rule(axis_size: int, in_batched: list, ps: Any, ts: Any):
        from ember.api import jvp
        from ember.lax import batch_util
        pb, tb = in_batched
        both = _pytree.tree_map(lambda p, t: p and t, pb, tb)
        pl, tl = _pytree.tree_leaves(pb), _pytree.tree_leaves(tb)
        extra = ([0 if p and not t else batching.not_mapped for p, t in zip(pl, tl)]
                 + [0 if t and not p else batching.not_mapped for p, t in zip(pl, tl)])
        flat_ps, ps_tree = _pytree.tree_flatten(ps)
        flat_ts = _pytree.tree_leaves(ts)
        store = []

        def to_jvp(*p):
            out, out_b = rule(axis_size, both, *p)
            _check_rule_trees(rule, out_tree, _pytree.tree_structure(out),
                              _pytree.tree_structure(out_b))
            store.append(_pytree.tree_leaves(out_b))
            return out

        def flat(*leaves):
            p = _pytree.tree_unflatten(ps_tree, list(leaves[:len(flat_ps)]))
            t = _pytree.tree_unflatten(ps_tree, list(leaves[len(flat_ps):]))
            o, ot = jvp(to_jvp, tuple(p), tuple(t))
            return _pytree.tree_leaves(o) + _pytree.tree_leaves(ot)
        if all(d is batching.not_mapped for d in extra):
            outs = flat(*flat_ps, *flat_ts)
            dims = [batching.not_mapped] * len(outs)
        else:
            outs, dims = batching.batch_flat(flat, flat_ps + flat_ts, extra, axis_size)
        outs = [o if d is batching.not_mapped else batch_util.move_to(o, d, 0, axis_size)
                for o, d in zip(outs, dims)]
        k = len(outs) // 2
        ob = [m or d is not batching.not_mapped for m, d in zip(store[0], dims[:k])]
        tb_out = [m or d is not batching.not_mapped for m, d in zip(store[0], dims[k:])]
        unflat = functools.partial(_pytree.tree_unflatten, out_tree)
        return ((unflat(outs[:k]), unflat(outs[k:])), (unflat(ob), unflat(tb_out)))
    return jvp_rule


class _Rule:
    """A rule with the name of the rule it derives from (for error messages)."""

    def __init__(self, fn: Callable, origin: Callable):
        self.fn, self.__name__ = fn, _rule_name(origin)

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)

    def __repr__(self) -> str:
        return self.__name__


def _partial_eval(trace: pe.PartialEvalTrace, args: Sequence[Any], params: dict) -> list:
    raise ValueError(
        "Linearization failed to produce known values for all output primals: reverse-mode "
        "differentiation of a custom_vmap function (custom_vmap_call) is not supported, as "
        "in JAX; use forward mode (jvp, jacfwd) or a custom_vjp inside it.")


custom_vmap_p.def_impl(_impl)
custom_vmap_p.def_abstract_eval(_abstract_eval)
custom_vmap_p.def_lowering(_lowering)
custom_vmap_p.lowering_ignores = ("rule", "in_tree", "out_tree", "num_consts")
custom_vmap_p.def_batching(_batch)
custom_vmap_p.def_jvp(_jvp)
pe.partial_eval_rules[custom_vmap_p] = _partial_eval


class custom_vmap:  # noqa: N801 (JAX's name)
    """A function with a custom rule for ``vmap``.

    Args:
        fun: the function (arrays or pytrees of arrays in, the same out).

    Example:
        >>> @custom_vmap
        ... def f(x, y):
        ...     return x + y
        >>> @f.def_vmap
        ... def rule(axis_size, in_batched, xs, ys):
        ...     x_b, y_b = in_batched
        ...     return xs + ys, x_b or y_b
        >>> ember.vmap(f, (0, None))(jnp.arange(3.0), 1.0)
        Array([1., 2., 3.], dtype=float32)
    """

    def __init__(self, fun: Callable):
        if not callable(fun):
            raise TypeError(f"custom_vmap: expected a callable, got {type(fun).__name__}")
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.vmap_rule: Callable | None = None

    def def_vmap(self, vmap_rule: Callable) -> Callable:
        """Sets the rule ``vmap_rule(axis_size, in_batched, *args) -> (out, out_batched)``;
        returns it unchanged."""
        self.vmap_rule = vmap_rule
        return vmap_rule

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = getattr(self.fun, "__name__", "<unnamed function>")
        if kwargs:
            try:
                bound = inspect.signature(self.fun).bind(*args, **kwargs)
            except TypeError as e:
                raise TypeError(
                    "The input arguments to the custom_vmap-decorated function "
                    f"{name} could not be resolved to positional-only arguments. "
                    f"Binding failed with the error:\n{e}") from e
            if bound.kwargs:
                raise TypeError(f"custom_vmap: {name} has keyword-only arguments "
                                f"{sorted(bound.kwargs)}; pass them positionally")
            args = bound.args
        if self.vmap_rule is None:
            raise AttributeError(
                f"No batching rule defined for custom_vmap function {name} using def_vmap.")
        flat, in_tree = _pytree.tree_flatten(args)
        out_trees = []

        def flat_fun(*leaves):
            out = self.fun(*_pytree.tree_unflatten(in_tree, list(leaves)))
            out_flat, out_tree = _pytree.tree_flatten(out)
            out_trees.append(out_tree)
            return out_flat
        closed, _ = pe.trace_to_jaxpr(flat_fun, [core.get_aval(x) for x in flat])
        closed, consts = closure_convert(closed)
        outs = custom_vmap_p.bind(*consts, *flat, call=closed, rule=self.vmap_rule,
                                  in_tree=in_tree, out_tree=out_trees[0],
                                  num_consts=len(consts))
        return _pytree.tree_unflatten(out_trees[0], outs)


def sequential_vmap(f: Callable) -> custom_vmap:
    """``f`` as a ``custom_vmap`` whose batched form loops over the batch (``lax.map``):
    for functions that do not batch natively.

    Args:
        f: the function.

    Example:
        >>> g = sequential_vmap(lambda x: x + 1)
        >>> ember.vmap(g)(jnp.arange(3))
        Array([1, 2, 3], dtype=int32)
    """
    from ember import lax
    f = custom_vmap(f)

    @f.def_vmap
    def rule(axis_size: int, in_batched: list, *args: Any):
        mask = _pytree.tree_leaves(in_batched)
        leaves, tree = _pytree.tree_flatten(list(args))
        mapped = [x for x, b in zip(leaves, mask) if b]

        def one(xs):
            it = iter(xs)
            return f(*_pytree.tree_unflatten(tree, [next(it) if b else x
                                                      for x, b in zip(leaves, mask)]))
        out = lax.map(one, mapped)
        return out, _pytree.tree_map(lambda _: True, out)
    return f
