"""``with_sharding_constraint``: the ``sharding_constraint`` primitive (the identity on values).

The primitive records the sharding a value should have; ember runs on one device, where every
sharding holds the whole array, so it computes nothing: eagerly it returns its operand, and
its lowering is the operand itself. Params and printing follow JAX's
(``sharding_constraint[context_mesh=... layout=None sharding=... unconstrained_dims=...]``);
its JVP and transpose constrain tangents and cotangents the same way, and batching marks the
mapped dimension unconstrained (as JAX does when no ``spmd_axis_name`` is given).

Example:
    >>> mesh = ember.make_mesh((1,), ('x',))
    >>> s = ember.NamedSharding(mesh, ember.P('x'))
    >>> lax.with_sharding_constraint(jnp.arange(3.), s)
    Array([0., 1., 2.], dtype=float32)
"""

from __future__ import annotations

from typing import Any

from ember import _pytree, core
from ember.interpreters import ad
from ember.lax import base

__all__ = ["with_sharding_constraint", "sharding_constraint_p"]


class _Dims(frozenset):
    """``unconstrained_dims``: a frozenset that prints as JAX's (``frozenset({})`` too)."""

    def __repr__(self) -> str:
        return f"frozenset({{{', '.join(map(repr, sorted(self)))}}})"

    __str__ = __repr__

    def lowering_fingerprint(self) -> str:  # (see ``compiler.lowering_fingerprint``)
        return repr(self)


sharding_constraint_p = core.Primitive("sharding_constraint")
sharding_constraint_p.def_impl(lambda x, **params: x)
sharding_constraint_p.def_abstract_eval(lambda aval, **params: aval)
sharding_constraint_p.def_lowering(lambda ctx, x, **params: x)
ad.deflinear2(sharding_constraint_p,
              lambda ct, x, **params: [sharding_constraint_p.bind(ct, **params)])


@sharding_constraint_p.def_batching
def _sharding_constraint_batch(vals, dims, *, sharding, layout, context_mesh,
                               unconstrained_dims):
    (x,), (d,) = vals, dims
    if d is None:
        return sharding_constraint_p.bind(
            x, sharding=sharding, layout=layout, context_mesh=context_mesh,
            unconstrained_dims=unconstrained_dims), None
    dims_out = {u + (d <= u) for u in unconstrained_dims} | {d}
    spec = getattr(sharding, "spec", None)
    if spec is not None:
        # Every sharding on one device is replicated: JAX then keeps the spec, pads it to the
        # batched rank and marks the unconstrained dimensions (the mapped one among them).
        from ember.sharding import NamedSharding, PartitionSpec
        entries = list(spec) + [None] * (core.get_aval(x).ndim - len(spec))
        for u in dims_out:
            entries[u] = PartitionSpec.UNCONSTRAINED
        sharding = NamedSharding(sharding.mesh, PartitionSpec(*entries),
                                 memory_kind=sharding._memory_kind)
    out = sharding_constraint_p.bind(x, sharding=sharding, layout=layout,
                                     context_mesh=context_mesh,
                                     unconstrained_dims=_Dims(dims_out))
    return out, d


def with_sharding_constraint(x: Any, shardings: Any) -> Any:
    """Asks that each array of ``x`` have the given sharding (on ember's one device every
    sharding holds the whole array: values pass through unchanged, and the constraint stays in
    the jaxpr as JAX's ``sharding_constraint``).

    Args:
        x: a pytree of arrays.
        shardings: a ``Sharding``, a ``PartitionSpec`` (taken over the mesh of
            ``set_mesh``) or ``None``, or a pytree prefix of ``x`` of them.

    Returns:
        ``x``'s values.

    Raises:
        ValueError: a sharding's spec is longer than its array's rank.
        RuntimeError: a ``PartitionSpec`` is given with no context mesh.

    Example:
        >>> with ember.set_mesh(ember.make_mesh((1,), ('x',))):
        ...     lax.with_sharding_constraint(jnp.ones(2), ember.P('x'))
        Array([1., 1.], dtype=float32)
    """
    from ember import sharding as shd
    leaves, treedef = _pytree.tree_flatten(x)
    per_leaf = shd.broadcast_shardings(shardings, x, "with_sharding_constraint",
                                       "shardings")
    mesh = shd.get_mesh()
    context_mesh = shd.context_mesh()
    outs = []
    for i, (leaf, s) in enumerate(zip(leaves, per_leaf)):
        leaf = base.as_operand(leaf, "with_sharding_constraint", f"x leaf {i}")
        if isinstance(s, shd.PartitionSpec) and not mesh.empty:
            s = shd.NamedSharding(context_mesh, s)  # (as JAX: over the abstract context)
        s = shd.resolve_sharding(s, "with_sharding_constraint", "shardings")
        if s is None:
            outs.append(leaf)
            continue
        s.check_rank(core.get_aval(leaf).ndim, "with_sharding_constraint arguments")
        unconstrained = _Dims(i for i, e in enumerate(getattr(s, "spec", ()))
                              if e is shd.PartitionSpec.UNCONSTRAINED)
        out = sharding_constraint_p.bind(leaf, sharding=s, layout=None,
                                         context_mesh=context_mesh,
                                         unconstrained_dims=unconstrained)
        outs.append(shd.placed(out, s))  # (an eager result reports its sharding)
    return _pytree.tree_unflatten(treedef, outs)
