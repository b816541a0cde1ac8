"""``optimization_barrier``: the identity on a pytree of arrays, staged as one primitive.

The primitive keeps its operands together in the jaxpr (transformations see one equation
for all of them): its JVP is a barrier on the primals and one on the non-zero tangents, its
transpose a barrier on the non-zero cotangents, and batching passes every batch dim through.
ember's HLO has no barrier op, so the lowering returns the operands unchanged.

Example:
    >>> print(ember.make_jaxpr(lambda x: lax.optimization_barrier((x, x * 2)))(1.0))
    { lambda ; a:f32[]. let
        b:f32[] = mul a 2.0:f32[]
        c:f32[] d:f32[] = optimization_barrier a b
      in (c, d) }
"""

from __future__ import annotations

from typing import Any

from ember import _pytree, core
from ember.interpreters import ad
from ember.lax import base

optimization_barrier_p = core.MultipleResultsPrimitive("optimization_barrier")
optimization_barrier_p.def_impl(lambda *xs: list(xs))
optimization_barrier_p.def_abstract_eval(lambda *avals: list(avals))
optimization_barrier_p.def_lowering(lambda ctx, *xs: list(xs))


def _through_barrier(values: list[Any]) -> list[Any]:
    """The non-zero ``values`` passed through one barrier; symbolic zeros stay symbolic (they
    carry no computation, and integer operands' zeros are float0)."""
    live = [i for i, v in enumerate(values) if type(v) is not ad.Zero]
    out = list(values)
    if live:
        for i, v in zip(live, optimization_barrier_p.bind(*[values[i] for i in live])):
            out[i] = v
    return out


def _barrier_jvp(primals, tangents):
    out = optimization_barrier_p.bind(*primals)
    tangents = [ad.Zero.from_primal_value(o) if type(t) is ad.Zero else t
                for o, t in zip(out, tangents)]
    return out, _through_barrier(tangents)


def _barrier_transpose(cts, *args):
    cts = _through_barrier(list(cts))
    return [c if ad.is_undefined_primal(a) else None for c, a in zip(cts, args)]


optimization_barrier_p.def_jvp(_barrier_jvp)
optimization_barrier_p.def_transpose(_barrier_transpose)


@optimization_barrier_p.def_batching
def _barrier_batch(vals, dims):
    return optimization_barrier_p.bind(*vals), list(dims)


def optimization_barrier(operand: Any, /) -> Any:
    """The identity on a pytree of arrays that compilers may not move computation across.

    Args:
        operand: a pytree of arrays (or scalars, which become arrays).

    Returns:
        The same pytree of values.

    Example:
        >>> lax.optimization_barrier((jnp.ones(2), 3.0))
        (Array([1., 1.], dtype=float32), Array(3., dtype=float32, weak_type=True))
    """
    leaves, treedef = _pytree.tree_flatten(operand)
    leaves = [base.as_operand(x, "optimization_barrier", f"leaf {i}")
              for i, x in enumerate(leaves)]
    outs = optimization_barrier_p.bind(*leaves) if leaves else []
    return _pytree.tree_unflatten(treedef, list(outs))


__all__ = ["optimization_barrier", "optimization_barrier_p"]
