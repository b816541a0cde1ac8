"""Collective primitives over named axes (psum, pmean, all_gather, axis_index, ...) under vmap.

A name bound by ``vmap(f, axis_name=...)`` names the mapped axis; inside ``f`` a collective
over it combines the values of all the batch members, as the same code would across devices
under ``shard_map``. Tracing a collective checks that its names are bound (JAX's NameError
otherwise); the BatchTrace owning the name evaluates it with lax operations on the stacked
values (``batching.collective_rules``), and traces of other names pass it through to their
parent (each primitive's ordinary batching rule). Params and printing follow JAX's
(``psum[axes=('i',) axis_index_groups=None]``).

Example:
    >>> ember.vmap(lambda x: x / lax.psum(x, 'i'), axis_name='i')(jnp.arange(4.))
    Array([0.        , 0.16666667, 0.33333334, 0.5       ], dtype=float32)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import _pytree, core, dtypes
from ember.interpreters import ad, batching
from ember.interpreters.batching import not_mapped
from ember.lax import base, batch_util
from ember.lax.elementwise import (
    add,
    clamp,
    convert_element_type,
    div,
    eq,
    ge,
    mul,
    select_n,
)
from ember.lax.reduction import reduce_max, reduce_min, reduce_sum
from ember.lax.shape import broadcast_in_dim, expand_dims, full_like, iota, reshape, squeeze
from ember.lax.slicing import index_in_dim, index_take

__all__ = ["psum", "pmean", "pmax", "pmin", "all_gather", "axis_index", "axis_size",
           "ppermute", "pshuffle", "all_to_all", "pswapaxes", "psum_scatter", "pbroadcast",
           "psum_p", "pmax_p", "pmin_p", "all_gather_p", "axis_index_p", "ppermute_p",
           "all_to_all_p", "reduce_scatter_p", "pbroadcast_p"]

AxisName = Any


# --------------------------------------------------------------------------- helpers


def _names(axis_name: AxisName) -> tuple:
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _check_bound(names: Sequence[Any], api: str) -> None:
    for name in names:
        if not isinstance(name, int) and not batching.axis_exists(name):
            raise NameError(f"Found an unbound axis name: {name}. To fix this, please call "
                            f"{api} under `jax.shard_map`.")


def _groups(axis_index_groups: Any) -> tuple | None:
    """Checked, canonical ``axis_index_groups`` (a tuple of tuples, or None)."""
    if axis_index_groups is None:
        return None
    groups = tuple(tuple(int(i) for i in g) for g in axis_index_groups)
    covered = [i for g in groups for i in g]
    if sorted(covered) != list(range(len(covered))):
        raise ValueError("axis_index_groups must cover all indices exactly once")
    return groups


def _group_size(names: Sequence[Any], groups: tuple | None) -> int:
    if groups is not None:
        return len(groups[0])
    return math.prod(batching.axis_frame_size(n) for n in names)


def _no_groups(groups: tuple | None) -> None:
    if groups is not None:
        raise NotImplementedError("axis_index_groups not supported in vmap collectives. "
                                  "Please open a feature request!")


def _one_name(names: tuple, name: Any) -> None:
    if names != (name,):  # (JAX's vmap collectives take one name, except the reductions)
        raise NotImplementedError("Please open a feature request!")


def _check_size(prim: str, param: int, size: int) -> None:
    if param != size:  # (a jaxpr traced for another vmap of the same name)
        raise ValueError(f"{prim}: traced for an axis of size {param}, evaluated under a "
                         f"vmap of size {size}")


def _unbound_lowering(name: str):
    def lowering(ctx, *args, **params):
        axes = params.get("axes", params.get("axis_name"))
        raise NameError(f"unbound axis name: {_names(axes)[0]} ({name} must be called "
                        "inside a vmap binding its axis name)")
    return lowering


def _unbound_impl(name: str):
    def impl(*args, **params):  # (abstract evaluation raises first: never reached)
        axes = params.get("axes", params.get("axis_name"))
        raise NameError(f"unbound axis name: {_names(axes)[0]}")
    return impl


def _collective(name: str, axes_param: str) -> core.Primitive:
    prim = core.Primitive(name)
    prim.def_impl(_unbound_impl(name))
    prim.def_lowering(_unbound_lowering(name))
    batching.collective_axes[prim] = lambda params: _names(params[axes_param])
    return prim


def _materialize(v: Any, d: int | None, size: int) -> Any:
    """The stacked values of all members, the mapped axis first."""
    return batch_util.bdim_at_front(v, d, size)


def _fold(x: Any, axis: int) -> Any:
    """``x`` with axes ``axis`` and ``axis + 1`` merged (the first one major)."""
    shape = list(core.get_aval(x).shape)
    shape[axis:axis + 2] = [shape[axis] * shape[axis + 1]]
    return reshape(x, shape)


def _split(x: Any, axis: int, n: int) -> Any:
    """``x`` with axis ``axis`` split into ``(n, size // n)``."""
    shape = list(core.get_aval(x).shape)
    shape[axis:axis + 1] = [n, shape[axis] // n]
    return reshape(x, shape)


def _scalar_like(x: Any, value: Any) -> Any:
    aval = core.get_aval(x)
    return convert_element_type(value, aval.dtype, weak_type=aval.weak_type)


# --------------------------------------------------------------------------- psum, pmax, pmin


def _allreduce_abstract_eval(api: str):
    def rule(aval, *, axes, axis_index_groups):
        _check_bound(axes, api)
        return aval
    return rule


def _allreduce_batch(prim):
    def rule(vals, dims, *, axes, axis_index_groups):
        return prim.bind(vals[0], axes=axes, axis_index_groups=axis_index_groups), dims[0]
    return rule


def _allreduce_collective(prim, reducer, if_unmapped):
    def rule(size, name, vals, dims, *, axes, axis_index_groups):
        _no_groups(axis_index_groups)
        (v,), (d,) = vals, dims
        out = if_unmapped(v, size) if d is not_mapped else reducer(v, (d,))
        rest = tuple(a for a in axes if a != name)
        if rest:
            out = prim.bind(out, axes=rest, axis_index_groups=None)
        return out, not_mapped
    return rule


psum_p = _collective("psum", "axes")
pmax_p = _collective("pmax", "axes")
pmin_p = _collective("pmin", "axes")
for _p, _reducer, _unmapped in (
        (psum_p, reduce_sum, lambda v, n: mul(v, _scalar_like(v, n))),
        (pmax_p, reduce_max, lambda v, n: v),
        (pmin_p, reduce_min, lambda v, n: v)):
    _p.def_abstract_eval(_allreduce_abstract_eval("psum"))  # (JAX names psum for all three)
    _p.def_batching(_allreduce_batch(_p))
    batching.collective_rules[_p] = _allreduce_collective(_p, _reducer, _unmapped)

# psum is linear; its transpose sums the cotangents over the axis again (JAX's rule).
ad.deflinear2(psum_p, lambda ct, x, *, axes, axis_index_groups: [
    psum_p.bind(ct, axes=axes, axis_index_groups=axis_index_groups)])


def _split_axes(axis_name: AxisName) -> tuple[tuple, tuple]:
    axes = _names(axis_name)
    named = tuple(a for a in axes if not isinstance(a, int))
    positional = tuple(a for a in axes if isinstance(a, int))
    return named, positional


def _allreduce(prim, api: str, x: Any, axis_name: AxisName, axis_index_groups: Any,
               constant=None) -> Any:
    named, positional = _split_axes(axis_name)
    if axis_index_groups is not None and positional:
        raise ValueError("axis_index_groups only supported for sums over just named axes")
    groups = _groups(axis_index_groups)
    leaves, tree = _pytree.tree_flatten(x)
    out = []
    for leaf in leaves:
        leaf = base.as_operand(leaf, api, "x")
        if prim is psum_p and core.get_aval(leaf).dtype == np.bool_:
            leaf = convert_element_type(leaf, np.int32)
        if positional:
            ndim = core.get_aval(leaf).ndim
            axes = tuple(base.check_axis(api, "axis_name", a, ndim) for a in positional)
            leaf = {psum_p: reduce_sum, pmax_p: reduce_max, pmin_p: reduce_min}[prim](
                leaf, axes)
        if not named:
            out.append(leaf)
        elif constant is not None and not isinstance(leaf, core.Tracer):
            out.append(constant(leaf, _group_size(named, groups)))
        else:
            out.append(prim.bind(leaf, axes=named, axis_index_groups=groups))
    return _pytree.tree_unflatten(tree, out)


def _const_operand(x: Any) -> Any:
    if dtypes.is_python_scalar(x):
        return base.concrete_dtype_like(x, dtypes.dtype(x, canonicalize=True), True)
    return x


def psum(x: Any, axis_name: AxisName, *, axis_index_groups: Any = None) -> Any:
    """The sum of ``x`` over the members of the mapped axis ``axis_name``.

    Args:
        x: an array or a pytree of arrays (booleans are summed as int32).
        axis_name: a name bound by an enclosing ``vmap`` (or a tuple of names, summed over
            all of them; ints name positional axes, reduced as by ``reduce_sum``).
        axis_index_groups: JAX's replica groups; not supported under vmap.

    Returns:
        The sum, the same for every member (a value that is not mapped over the axis is
        multiplied by its size).

    Example:
        >>> ember.vmap(lambda x: lax.psum(x, 'i'), axis_name='i')(jnp.arange(3.))
        Array([3., 3., 3.], dtype=float32)
    """
    def constant(leaf: Any, size: int) -> Any:
        leaf = _const_operand(leaf)
        return mul(_scalar_like(leaf, size), leaf)
    return _allreduce(psum_p, "psum", x, axis_name, axis_index_groups, constant)


def pmax(x: Any, axis_name: AxisName, *, axis_index_groups: Any = None) -> Any:
    """The maximum of ``x`` over the members of the mapped axis ``axis_name``.

    Example:
        >>> ember.vmap(lambda x: lax.pmax(x, 'i'), axis_name='i')(jnp.arange(3.))
        Array([2., 2., 2.], dtype=float32)
    """
    return _allreduce(pmax_p, "pmax", x, axis_name, axis_index_groups)


def pmin(x: Any, axis_name: AxisName, *, axis_index_groups: Any = None) -> Any:
    """The minimum of ``x`` over the members of the mapped axis ``axis_name``.

    Example:
        >>> ember.vmap(lambda x: lax.pmin(x, 'i'), axis_name='i')(jnp.arange(3.))
        Array([0., 0., 0.], dtype=float32)
    """
    return _allreduce(pmin_p, "pmin", x, axis_name, axis_index_groups)


def _axis_size(axis_name: AxisName, axis_index_groups: Any = None) -> int:
    named, _ = _split_axes(axis_name)
    return _group_size(named, _groups(axis_index_groups))


def pmean(x: Any, axis_name: AxisName, *, axis_index_groups: Any = None) -> Any:
    """The mean of ``x`` over the members of the mapped axis ``axis_name`` (integers give
    floats, as ``x / n``).

    Example:
        >>> ember.vmap(lambda x: lax.pmean(x, 'i'), axis_name='i')(jnp.arange(3.))
        Array([1., 1., 1.], dtype=float32)
    """
    total = psum(x, axis_name, axis_index_groups=axis_index_groups)
    n = _axis_size(axis_name, axis_index_groups)

    def mean(v: Any) -> Any:
        aval = core.get_aval(v)
        if not dtypes.issubdtype(aval.dtype, np.inexact):
            v = convert_element_type(v, dtypes.to_inexact_dtype(aval.dtype),
                                     weak_type=aval.weak_type)
        return div(v, _scalar_like(v, n))
    return _pytree.tree_map(mean, total)


# --------------------------------------------------------------------------- axis_index


axis_index_p = _collective("axis_index", "axis_name")


def _axis_index_abstract_eval(*, axis_name):
    _check_bound(_names(axis_name), "axis_index")
    return core.ShapedArray((), np.int32)


axis_index_p.def_abstract_eval(_axis_index_abstract_eval)
batching.collective_rules[axis_index_p] = (
    lambda size, name, vals, dims, *, axis_name: (iota(np.int32, size), 0))


def axis_index(axis_name: AxisName) -> Any:
    """The index of the current member along the mapped axis ``axis_name`` (int32).

    A tuple of names gives the index in their product, the first name major.

    Example:
        >>> ember.vmap(lambda x: lax.axis_index('i'), axis_name='i')(jnp.zeros(3))
        Array([0, 1, 2], dtype=int32)
    """
    if not isinstance(axis_name, (tuple, list)):
        return axis_index_p.bind(axis_name=axis_name)
    index, inner = None, 1
    for name in reversed(axis_name):
        term = mul(axis_index(name), np.int32(inner))
        index = term if index is None else add(index, term)
        inner *= batching.axis_frame_size(name)
    return convert_element_type(0, np.int32) if index is None else index


def axis_size(axis_name: AxisName) -> Any:
    """The size of the mapped axis ``axis_name`` (the product for a tuple of names), as a
    weakly typed int32 array.

    Example:
        >>> ember.vmap(lambda x: x * lax.axis_size('i'), axis_name='i')(jnp.ones(3))
        Array([3., 3., 3.], dtype=float32)
    """
    return psum(1, axis_name)


# --------------------------------------------------------------------------- all_gather


all_gather_p = _collective("all_gather", "axis_name")


def _all_gather_abstract_eval(aval, *, all_gather_dimension, axis_name, axis_index_groups,
                              axis_size, tiled):
    _check_bound(axis_name, "all_gather")
    shape = list(aval.shape)
    if tiled:
        shape[all_gather_dimension] *= axis_size
    else:
        shape.insert(all_gather_dimension, axis_size)
    return aval.update(shape=tuple(shape))


def _all_gather_batch(vals, dims, *, all_gather_dimension, axis_name, axis_index_groups,
                      axis_size, tiled):
    (x,), (d,) = vals, dims
    if d <= all_gather_dimension:
        all_gather_dimension += 1
    elif not tiled:
        d += 1
    return all_gather_p.bind(x, all_gather_dimension=all_gather_dimension,
                             axis_name=axis_name, axis_index_groups=axis_index_groups,
                             axis_size=axis_size, tiled=tiled), d


def _all_gather_collective(size, name, vals, dims, *, all_gather_dimension, axis_name,
                           axis_index_groups, axis_size, tiled):
    _no_groups(axis_index_groups)
    _one_name(axis_name, name)
    _check_size("all_gather", axis_size, size)
    (x,), (d,) = vals, dims
    y = batch_util.move_to(x, d, all_gather_dimension, size)
    return (_fold(y, all_gather_dimension) if tiled else y), not_mapped


all_gather_p.def_abstract_eval(_all_gather_abstract_eval)
all_gather_p.def_batching(_all_gather_batch)
batching.collective_rules[all_gather_p] = _all_gather_collective
ad.deflinear2(all_gather_p, lambda ct, x, *, all_gather_dimension, axis_name,
              axis_index_groups, axis_size, tiled: [
    psum_scatter(ct, axis_name, scatter_dimension=all_gather_dimension,
                 axis_index_groups=axis_index_groups, tiled=tiled)])


def all_gather(x: Any, axis_name: AxisName, *, axis_index_groups: Any = None, axis: int = 0,
               tiled: bool = False, to: str = "varying") -> Any:
    """The values of ``x`` of all members of the mapped axis ``axis_name``, stacked.

    Args:
        x: an array or a pytree of arrays.
        axis_name: a name bound by an enclosing ``vmap``.
        axis_index_groups: JAX's replica groups; not supported under vmap.
        axis: where the new axis goes in the result.
        tiled: concatenate along ``axis`` instead of stacking.
        to: JAX's ``'varying'`` (the only kind with a meaning under vmap).

    Returns:
        For each member, ``x`` of every member stacked (or concatenated) along ``axis``.

    Example:
        >>> ember.vmap(lambda x: lax.all_gather(x, 'i'), axis_name='i')(jnp.arange(2.))
        Array([[0., 1.],
               [0., 1.]], dtype=float32)
    """
    if to not in ("varying", "reduced", "invarying"):
        raise ValueError("Got unexpected `to` value for `jax.lax.all_gather`. Allowed `to` "
                         "values are: {'varying', 'reduced', 'invarying'}")
    if to != "varying":
        raise NotImplementedError(f"all_gather: to={to!r} needs shard_map")
    names = _names(axis_name)
    if not names:
        return x
    groups = _groups(axis_index_groups)
    size = _group_size(names, groups)

    def bind(leaf: Any) -> Any:
        leaf = base.as_operand(leaf, "all_gather", "x")
        ndim = core.get_aval(leaf).ndim
        dim = base.check_axis("all_gather", "axis", axis, ndim if tiled else ndim + 1)
        return all_gather_p.bind(leaf, all_gather_dimension=dim, axis_name=names,
                                 axis_index_groups=groups, axis_size=size, tiled=bool(tiled))
    return _pytree.tree_map(bind, x)


# --------------------------------------------------------------------------- psum_scatter


reduce_scatter_p = _collective("reduce_scatter", "axis_name")


def _reduce_scatter_abstract_eval(aval, *, axis_name, scatter_dimension, axis_index_groups,
                                  axis_size, tiled):
    _check_bound(axis_name, "reduce_scatter")
    return aval.update(shape=_scatter_shape(aval.shape, scatter_dimension, axis_size, tiled))


def _scatter_shape(shape: Sequence[int], scatter_dimension: int, axis_size: int,
                   tiled: bool) -> tuple[int, ...]:
    shape = list(shape)
    n = shape[scatter_dimension]
    if tiled:
        if n % axis_size:
            raise ValueError(f"tiled reduce_scatter operand scatter dimension size {n} must "
                             f"be divisible by shard_count {axis_size}")
        shape[scatter_dimension] = n // axis_size
    else:
        if n != axis_size:
            raise ValueError(f"reduce_scatter operand scatter dimension size {n} must match "
                             f"shard count {axis_size}")
        del shape[scatter_dimension]
    return tuple(shape)


def _reduce_scatter_batch(vals, dims, *, scatter_dimension, axis_name, axis_index_groups,
                          axis_size, tiled):
    (x,), (d,) = vals, dims
    if d <= scatter_dimension:
        scatter_dimension += 1
    elif not tiled:
        d += 1
    return reduce_scatter_p.bind(x, scatter_dimension=scatter_dimension, axis_name=axis_name,
                                 axis_index_groups=axis_index_groups, axis_size=axis_size,
                                 tiled=tiled), d


def _reduce_scatter_collective(size, name, vals, dims, *, scatter_dimension, axis_name,
                               axis_index_groups, axis_size, tiled):
    _no_groups(axis_index_groups)
    _one_name(axis_name, name)
    _check_size("reduce_scatter", axis_size, size)
    (x,), (d,) = vals, dims
    y = mul(x, _scalar_like(x, size)) if d is not_mapped else reduce_sum(x, (d,))
    if tiled:
        y = _split(y, scatter_dimension, size)
    return y, scatter_dimension  # member j holds chunk j: the scattered axis is the batch


reduce_scatter_p.def_abstract_eval(_reduce_scatter_abstract_eval)
reduce_scatter_p.def_batching(_reduce_scatter_batch)
batching.collective_rules[reduce_scatter_p] = _reduce_scatter_collective
ad.deflinear2(reduce_scatter_p, lambda ct, x, *, axis_name, scatter_dimension,
              axis_index_groups, axis_size, tiled: [
    all_gather(ct, axis_name, axis_index_groups=axis_index_groups, axis=scatter_dimension,
               tiled=tiled)])


def psum_scatter(x: Any, axis_name: AxisName, *, scatter_dimension: int = 0,
                 axis_index_groups: Any = None, tiled: bool = False) -> Any:
    """The sum of ``x`` over the mapped axis ``axis_name``, of which member ``j`` keeps
    slice ``j`` along ``scatter_dimension`` (chunk ``j`` when ``tiled``).

    Example:
        >>> ember.vmap(lambda x: lax.psum_scatter(x, 'i'), axis_name='i')(jnp.eye(2))
        Array([1., 1.], dtype=float32)
    """
    names = _names(axis_name)
    if not names:
        return x
    groups = _groups(axis_index_groups)
    size = _group_size(names, groups)

    def bind(leaf: Any) -> Any:
        leaf = base.as_operand(leaf, "psum_scatter", "x")
        dim = base.check_axis("psum_scatter", "scatter_dimension", scatter_dimension,
                              core.get_aval(leaf).ndim)
        _scatter_shape(core.get_aval(leaf).shape, dim, size, tiled)  # (checks the sizes)
        return reduce_scatter_p.bind(leaf, axis_name=names, scatter_dimension=dim,
                                     axis_index_groups=groups, axis_size=size,
                                     tiled=bool(tiled))
    return _pytree.tree_map(bind, x)


# --------------------------------------------------------------------------- ppermute


ppermute_p = _collective("ppermute", "axis_name")


def _ppermute_abstract_eval(aval, *, axis_name, perm):
    _check_bound(axis_name, "ppermute")
    return aval


def _ppermute_collective(size, name, vals, dims, *, axis_name, perm):
    _one_name(axis_name, name)
    (x,), (d,) = vals, dims
    src_of = np.zeros(size, np.int32)
    received = np.zeros(size, bool)
    for src, dst in perm:
        if not (0 <= src < size and 0 <= dst < size):
            raise ValueError(f"ppermute: perm {perm} has an index out of range for axis "
                             f"{name!r} of size {size}")
        src_of[dst], received[dst] = src, True
    if d is not_mapped:
        x, d = batch_util.broadcast_batch(x, size, 0), 0
    y = index_take(x, (src_of,), (d,))  # member dst gets the value of member src
    if not received.all():  # members no one sends to get zeros
        shape = core.get_aval(y).shape
        mask = broadcast_in_dim(received, shape, (0,))
        y = select_n(mask, full_like(y, 0), y)
    return y, 0


ppermute_p.def_abstract_eval(_ppermute_abstract_eval)
ppermute_p.def_batching(lambda vals, dims, *, axis_name, perm: (
    ppermute_p.bind(vals[0], axis_name=axis_name, perm=perm), dims[0]))
batching.collective_rules[ppermute_p] = _ppermute_collective
ad.deflinear2(ppermute_p, lambda ct, x, *, axis_name, perm: [
    ppermute_p.bind(ct, axis_name=axis_name, perm=tuple((d, s) for s, d in perm))])


def ppermute(x: Any, axis_name: AxisName, perm: Sequence[tuple[int, int]]) -> Any:
    """Sends each member's ``x`` to another member of the mapped axis ``axis_name``.

    Args:
        x: an array or a pytree of arrays.
        axis_name: a name bound by an enclosing ``vmap``.
        perm: ``(source_index, destination_index)`` pairs; no two share a source or a
            destination. Members that are no pair's destination receive zeros.

    Example:
        >>> shift = [(i, (i + 1) % 3) for i in range(3)]
        >>> ember.vmap(lambda x: lax.ppermute(x, 'i', shift), axis_name='i')(jnp.arange(3.))
        Array([2., 0., 1.], dtype=float32)
    """
    names = _names(axis_name)
    try:
        pairs = tuple((int(s), int(d)) for s, d in perm)
    except (TypeError, ValueError):
        raise TypeError(f"ppermute: perm must be a sequence of (source, destination) pairs "
                        f"of ints, got {perm!r}") from None
    srcs, dsts = [s for s, _ in pairs], [d for _, d in pairs]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
        raise ValueError(f"ppermute sources and destinations must be unique, got {pairs}.")
    return _pytree.tree_map(
        lambda leaf: ppermute_p.bind(base.as_operand(leaf, "ppermute", "x"),
                                     axis_name=names, perm=pairs), x)


def pshuffle(x: Any, axis_name: AxisName, perm: Sequence[int]) -> Any:
    """``ppermute`` with the permutation given as sources: member ``i`` gets the value of
    member ``perm[i]``.

    Example:
        >>> ember.vmap(lambda x: lax.pshuffle(x, 'i', [2, 0, 1]), axis_name='i')(
        ...     jnp.arange(3.))
        Array([2., 0., 1.], dtype=float32)
    """
    perm = list(perm)
    if set(perm) != set(range(len(perm))):
        raise ValueError(f"`perm` does not represent a permutation: {perm}")
    return ppermute(x, axis_name, list(zip(perm, range(len(perm)))))


# --------------------------------------------------------------------------- pbroadcast


pbroadcast_p = _collective("pbroadcast", "axis_name")


def _pbroadcast_abstract_eval(aval, *, axis_name, source):
    _check_bound(_names(axis_name), "ppermute")  # (JAX's message names ppermute)
    return aval


def _pbroadcast_collective(size, name, vals, dims, *, axis_name, source):
    _one_name(_names(axis_name), name)
    if not 0 <= source < size:
        raise ValueError(f"pbroadcast: source {source} is out of range for axis {name!r} of "
                         f"size {size}")
    (x,), (d,) = vals, dims
    return (x if d is not_mapped else index_in_dim(x, source, d, keepdims=False)), not_mapped


def _pbroadcast_transpose(ct, x, *, axis_name, source):
    total = psum(ct, axis_name)
    return [select_n(eq(axis_index(axis_name), np.int32(source)), full_like(total, 0), total)]


pbroadcast_p.def_abstract_eval(_pbroadcast_abstract_eval)
pbroadcast_p.def_batching(lambda vals, dims, *, axis_name, source: (
    pbroadcast_p.bind(vals[0], axis_name=axis_name, source=source), dims[0]))
batching.collective_rules[pbroadcast_p] = _pbroadcast_collective
ad.deflinear2(pbroadcast_p, _pbroadcast_transpose)


def pbroadcast(x: Any, axis_name: AxisName, source: int) -> Any:
    """The value of ``x`` of member ``source`` of the mapped axis ``axis_name``, for every
    member.

    Example:
        >>> ember.vmap(lambda x: lax.pbroadcast(x, 'i', 1), axis_name='i')(jnp.arange(3.))
        Array([1., 1., 1.], dtype=float32)
    """
    source = int(source)
    return _pytree.tree_map(
        lambda leaf: pbroadcast_p.bind(base.as_operand(leaf, "pbroadcast", "x"),
                                       axis_name=axis_name, source=source), x)


# --------------------------------------------------------------------------- all_to_all
# The primitive is always "tiled": split_axis is cut into one chunk per member, member j
# receiving chunk j of every member, concatenated (member-major) along concat_axis. The
# untiled function adds and removes the unit axes around it, as JAX's does.


all_to_all_p = _collective("all_to_all", "axis_name")


def _all_to_all_abstract_eval(aval, *, axis_name, split_axis, concat_axis, axis_index_groups,
                              tiled):
    names = _names(axis_name)
    _check_bound(names, "all_to_all")
    n = len(axis_index_groups[0]) if axis_index_groups else _group_size(names, None)
    shape = list(aval.shape)
    if shape[split_axis] % n:
        raise ValueError(f"all_to_all: split_axis size {shape[split_axis]} is not divisible "
                         f"by the axis size {n}")
    shape[split_axis] //= n
    shape[concat_axis] *= n
    return core.ShapedArray(shape, aval.dtype)


def _all_to_all_batch(vals, dims, *, axis_name, split_axis, concat_axis, axis_index_groups,
                      tiled):
    (x,), (d,) = vals, dims
    return all_to_all_p.bind(x, axis_name=axis_name, split_axis=split_axis + (d <= split_axis),
                             concat_axis=concat_axis + (d <= concat_axis),
                             axis_index_groups=axis_index_groups, tiled=tiled), d


def _all_to_all_collective(size, name, vals, dims, *, axis_name, split_axis, concat_axis,
                           axis_index_groups, tiled):
    _no_groups(axis_index_groups)
    _one_name(_names(axis_name), name)
    (x,), (d,) = vals, dims
    x = _materialize(x, d, size)                 # [k, *s]: member k's value
    x = _split(x, 1 + split_axis, size)          # split_axis -> (j, chunk)
    x = batch_util.moveaxis(x, 1 + split_axis, 0)  # [j, k, *s with the chunk]
    x = batch_util.moveaxis(x, 1, 1 + concat_axis)  # k just before concat_axis
    return _fold(x, 1 + concat_axis), 0


all_to_all_p.def_abstract_eval(_all_to_all_abstract_eval)
all_to_all_p.def_batching(_all_to_all_batch)
batching.collective_rules[all_to_all_p] = _all_to_all_collective
ad.deflinear2(all_to_all_p, lambda ct, x, *, axis_name, split_axis, concat_axis,
              axis_index_groups, tiled: [
    all_to_all_p.bind(ct, axis_name=axis_name, split_axis=concat_axis,
                      concat_axis=split_axis, axis_index_groups=axis_index_groups,
                      tiled=tiled)])


def all_to_all(x: Any, axis_name: AxisName, split_axis: int, concat_axis: int, *,
               axis_index_groups: Any = None, tiled: bool = False) -> Any:
    """Maps axis ``split_axis`` of ``x`` over ``axis_name`` and materializes the mapped axis
    at ``concat_axis``: member ``j`` gets slice ``j`` (along ``split_axis``) of every
    member's ``x``, stacked along ``concat_axis`` (or chunk ``j``, concatenated, when
    ``tiled``).

    Args:
        x: an array or a pytree of arrays.
        axis_name: a name bound by an enclosing ``vmap``.
        split_axis: the axis of ``x`` to scatter (of the axis size, or a multiple when
            ``tiled``).
        concat_axis: where the gathered axis goes in the result.
        axis_index_groups: JAX's replica groups; not supported under vmap.
        tiled: split into chunks and concatenate, keeping the rank.

    Example:
        >>> ember.vmap(lambda x: lax.all_to_all(x, 'i', 0, 0), axis_name='i')(
        ...     jnp.arange(4.).reshape(2, 2))
        Array([[0., 2.],
               [1., 3.]], dtype=float32)
    """
    groups = _groups(axis_index_groups)

    def bind(leaf: Any) -> Any:
        leaf = base.as_operand(leaf, "all_to_all", "x")
        n = _group_size(_names(axis_name), groups)
        shape = core.get_aval(leaf).shape
        split = base.check_axis("all_to_all", "split_axis", split_axis, len(shape))
        concat = concat_axis
        if tiled:
            concat = base.check_axis("all_to_all", "concat_axis", concat, len(shape))
            if shape[split] % n:
                raise ValueError(f"The size of all_to_all split_axis ({shape[split]}) has to "
                                 f"be divisible by the size of the named axis {axis_name} "
                                 f"({n})")
        else:
            concat = base.check_axis("all_to_all", "concat_axis", concat, len(shape))
            if shape[split] != n:
                raise ValueError("all_to_all requires the size of the mapped axis axis_name "
                                 "to equal x.shape[split_axis], but they are "
                                 f"{n} and {shape[split]} respectively.")
            if split < concat:
                concat += 1  # (concat_axis counts positions after split_axis is removed)
                leaf = expand_dims(leaf, (concat,))
            elif split > concat:
                leaf = expand_dims(leaf, (concat,))
                split += 1
        out = all_to_all_p.bind(leaf, axis_name=axis_name, split_axis=split,
                                concat_axis=concat, axis_index_groups=groups,
                                tiled=bool(tiled))
        if not tiled and split != concat:
            out = squeeze(out, (split,))
        return out
    return _pytree.tree_map(bind, x)


def pswapaxes(x: Any, axis_name: AxisName, axis: int, *, axis_index_groups: Any = None) -> Any:
    """Swaps the mapped axis ``axis_name`` with axis ``axis`` of ``x`` (of the same size):
    ``all_to_all(x, axis_name, axis, axis)``.

    Example:
        >>> ember.vmap(lambda x: lax.pswapaxes(x, 'i', 0), axis_name='i')(
        ...     jnp.arange(4.).reshape(2, 2))
        Array([[0., 2.],
               [1., 3.]], dtype=float32)
    """
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)


# --------------------------------------------------------------------------- ragged_all_to_all
# Member k's result is its ``output`` with, for every sender i and each of the K / size slices
# i addresses to k (entries k * per + s of i's offset/size arrays), rows
# output_offsets[i][.] ... + send_sizes[i][.] overwritten by rows input_offsets[i][.] ... of
# i's ``operand``. Under vmap this is a gather: for every output row, the last slice covering
# it names the source member and row.


ragged_all_to_all_p = _collective("ragged_all_to_all", "axis_name")
__all__ += ["ragged_all_to_all", "ragged_all_to_all_p", "pcast"]

_RAGGED_ARGS = ("input_offsets", "send_sizes", "output_offsets", "recv_sizes")


def _ragged_abstract_eval(operand, output, *index_avals, axis_name, axis_index_groups):
    for arg, aval in zip(_RAGGED_ARGS, index_avals):
        if not dtypes.is_integer(aval.dtype):
            raise ValueError(f"ragged_all_to_all {arg} must be integer type.")
        if aval.ndim != 1 or aval.shape[0] < 1:
            raise ValueError(f"ragged_all_to_all {arg} must be rank 1 with positive dimension "
                             f"size, but got shape {aval.shape}")
    if len({a.shape for a in index_avals}) != 1:
        raise ValueError("ragged_all_to_all input_offsets, send_sizes, output_offsets and "
                         "recv_sizes must have the same length, got shapes "
                         f"{[a.shape for a in index_avals]}")
    if operand.dtype != output.dtype or operand.shape[1:] != output.shape[1:] or \
            operand.ndim < 1:
        raise TypeError("ragged_all_to_all: operand and output must have the same dtype and "
                        f"the same trailing dimensions, got {operand.str_short()} and "
                        f"{output.str_short()}")
    _check_bound(axis_name, "ragged_all_to_all")
    return core.ShapedArray(output.shape, output.dtype)


def _ragged_check(vals, dims, params) -> None:
    """The abstract evaluation's checks on the members' values (a BatchTrace evaluates the
    collective without abstract evaluation of the unbatched operands)."""
    _ragged_abstract_eval(*(core.ShapedArray(batch_util.unbatched_shape(v, d),
                                             core.get_aval(v).dtype)
                            for v, d in zip(vals, dims)), **params)


def _ragged_collective(size, name, vals, dims, *, axis_name, axis_index_groups):
    _ragged_check(vals, dims, dict(axis_name=axis_name, axis_index_groups=axis_index_groups))
    _no_groups(axis_index_groups)
    _one_name(axis_name, name)
    operand, output, *idx = (_materialize(v, d, size) for v, d in zip(vals, dims))
    n_in, n_out = core.get_aval(operand).shape[1], core.get_aval(output).shape[1]
    k = core.get_aval(idx[0]).shape[1]
    if k % size:
        raise ValueError(f"ragged_all_to_all: the length {k} of the offset and size arrays "
                         f"must be divisible by the size {size} of axis {name!r}")
    per = k // size
    in_off, sizes, out_off = (convert_element_type(a, np.int32) for a in idx[:3])

    def by_receiver(a):  # [sender i, k*per + s] -> [receiver k, slice p = i*per + s]
        a = reshape(a, (size, size, per))                     # [i, k, s]
        return reshape(batch_util.moveaxis(a, 1, 0), (size, size * per))

    in_off, sizes, out_off = by_receiver(in_off), by_receiver(sizes), by_receiver(out_off)
    rows = broadcast_in_dim(iota(np.int32, n_out), (size, size * per, n_out), (2,))
    lo = broadcast_in_dim(out_off, (size, size * per, n_out), (0, 1))
    hi = add(lo, broadcast_in_dim(sizes, (size, size * per, n_out), (0, 1)))
    hit = mul(convert_element_type(ge(rows, lo), np.int32),
              convert_element_type(ge(hi, add(rows, np.int32(1))), np.int32))
    piece = broadcast_in_dim(iota(np.int32, size * per), (size, size * per, n_out), (1,))
    last = add(reduce_max(mul(hit, add(piece, np.int32(1))), (1,)), np.int32(-1))  # -1: none
    written = ge(last, np.int32(0))
    last = select_n(written, full_like(last, 0), last)
    member = div(last, np.int32(per))
    start = _take_rows(in_off, last)
    dest = _take_rows(out_off, last)
    src_row = add(start, add(_iota_rows(size, n_out), mul(dest, np.int32(-1))))
    src_row = clamp(np.int32(0), src_row, np.int32(max(n_in - 1, 0)))
    flat = reshape(add(mul(member, np.int32(n_in)), src_row), (size * n_out,))
    tail = core.get_aval(operand).shape[2:]
    got = index_take(reshape(operand, (size * n_in,) + tail), (flat,), (0,))
    got = reshape(got, (size, n_out) + tail)
    mask = broadcast_in_dim(written, (size, n_out) + tail, (0, 1))
    return select_n(mask, output, got), 0


def _iota_rows(size: int, n: int) -> Any:
    return broadcast_in_dim(iota(np.int32, n), (size, n), (1,))


def _take_rows(table: Any, idx: Any) -> Any:
    """``table[r, idx[r, j]]`` for a [R, P] table and [R, J] indices."""
    r, p = core.get_aval(table).shape
    j = core.get_aval(idx).shape[1]
    flat = add(mul(broadcast_in_dim(iota(np.int32, r), (r, j), (0,)), np.int32(p)), idx)
    return reshape(index_take(reshape(table, (r * p,)), (reshape(flat, (r * j,)),), (0,)),
                   (r, j))


def _ragged_batch(vals, dims, *, axis_name, axis_index_groups):
    # A vmap not naming the axis: its members become more rows of one ragged exchange (the
    # offsets shifted by each member's block), as JAX's rule does.
    if axis_index_groups:
        raise NotImplementedError("Please open a feature request!")
    size = next(core.get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not not_mapped)
    operand, output, *idx = (_materialize(v, d, size) for v, d in zip(vals, dims))
    n_in, n_out = core.get_aval(operand).shape[1], core.get_aval(output).shape[1]
    in_off, sizes, out_off, recv = (batch_util.moveaxis(a, 0, 1) for a in idx)  # [K, b]
    k = core.get_aval(in_off).shape[0]
    member = broadcast_in_dim(iota(core.get_aval(in_off).dtype, size), (k, size), (1,))
    in_off = add(in_off, mul(member, _scalar_like(in_off, n_in)))
    member = convert_element_type(member, core.get_aval(out_off).dtype)
    out_off = add(out_off, mul(member, _scalar_like(out_off, n_out)))

    def merge(x):
        shape = core.get_aval(x).shape
        return reshape(x, (shape[0] * shape[1],) + shape[2:])

    out = ragged_all_to_all_p.bind(merge(operand), merge(output), merge(in_off), merge(sizes),
                                   merge(out_off), merge(recv), axis_name=axis_name,
                                   axis_index_groups=axis_index_groups)
    shape = core.get_aval(out).shape
    return reshape(out, (size, shape[0] // size) + shape[1:]), 0


def _ragged_jvp(primals, tangents, *, axis_name, axis_index_groups):
    params = dict(axis_name=axis_name, axis_index_groups=axis_index_groups)
    out = ragged_all_to_all_p.bind(*primals, **params)
    if all(type(t) is ad.Zero for t in tangents[:2]):
        return out, ad.Zero.from_primal_value(out)
    t_op, t_out = (ad.instantiate_zeros(t) for t in tangents[:2])
    return out, ragged_all_to_all_p.bind(t_op, t_out, *primals[2:], **params)


def _ragged_transpose(ct, operand, output, in_off, sizes, out_off, recv, *, axis_name,
                      axis_index_groups):
    if type(ct) is ad.Zero:
        return [ad.Zero(operand.aval) if ad.is_undefined_primal(operand) else None,
                ad.Zero(output.aval) if ad.is_undefined_primal(output) else None,
                None, None, None, None]
    # Each received slice goes back to its sender's operand rows; the rest of ct is output's.
    out_off_here = all_to_all(out_off, axis_name, 0, 0, tiled=True)
    in_off_there = all_to_all(in_off, axis_name, 0, 0, tiled=True)
    op_aval = operand.aval if ad.is_undefined_primal(operand) else core.get_aval(operand)
    zeros = full_like(broadcast_in_dim(_scalar_like(ct, 0), op_aval.shape, ()), 0)
    operand_t = ragged_all_to_all_p.bind(ct, zeros, out_off_here, recv, in_off_there, sizes,
                                         axis_name=axis_name,
                                         axis_index_groups=axis_index_groups)
    shape = core.get_aval(ct).shape
    k = core.get_aval(recv).shape[0]
    rows = broadcast_in_dim(iota(np.int32, shape[0]), (k, shape[0]), (1,))
    lo = broadcast_in_dim(convert_element_type(out_off_here, np.int32), (k, shape[0]), (0,))
    hi = add(lo, broadcast_in_dim(convert_element_type(recv, np.int32), (k, shape[0]), (0,)))
    covered = mul(convert_element_type(ge(rows, lo), np.int32),
                  convert_element_type(ge(hi, add(rows, np.int32(1))), np.int32))
    written = ge(reduce_max(covered, (0,)), np.int32(1))
    mask = broadcast_in_dim(written, shape, (0,))
    output_t = select_n(mask, ct, full_like(ct, 0))
    return [operand_t if ad.is_undefined_primal(operand) else None,
            output_t if ad.is_undefined_primal(output) else None, None, None, None, None]


ragged_all_to_all_p.def_abstract_eval(_ragged_abstract_eval)
ragged_all_to_all_p.def_batching(_ragged_batch)
ragged_all_to_all_p.def_jvp(_ragged_jvp)
ragged_all_to_all_p.def_transpose(_ragged_transpose)
batching.collective_rules[ragged_all_to_all_p] = _ragged_collective


def ragged_all_to_all(operand: Any, output: Any, input_offsets: Any, send_sizes: Any,
                      output_offsets: Any, recv_sizes: Any, *, axis_name: AxisName,
                      axis_index_groups: Any = None) -> Any:
    """Exchanges ragged slices (runs of leading-axis rows) between the members of a mapped
    axis.

    The four index arrays have one length ``K``, a multiple of the axis size; entries
    ``j * K // size ...`` describe what this member sends to member ``j``: rows
    ``input_offsets[e] : input_offsets[e] + send_sizes[e]`` of ``operand``, written to member
    ``j``'s result at row ``output_offsets[e]``. ``recv_sizes`` gives the sizes received (it
    must agree with the senders' ``send_sizes``). The result is ``output`` with every received
    slice written into it.

    Args:
        operand: ``[N, ...]`` rows to send.
        output: ``[M, ...]`` the array received slices are written into.
        input_offsets, send_sizes, output_offsets, recv_sizes: 1-D integer arrays.
        axis_name: a name bound by an enclosing ``vmap``.
        axis_index_groups: JAX's replica groups; not supported under vmap.

    Example:
        >>> f = lambda *a: lax.ragged_all_to_all(*a, axis_name='i')
        >>> ember.vmap(f, axis_name='i')(
        ...     jnp.array([[1, 2, 2], [3, 4, 0]]), jnp.zeros((2, 4), int),
        ...     jnp.array([[0, 1], [0, 1]]), jnp.array([[1, 2], [1, 1]]),
        ...     jnp.array([[0, 0], [1, 2]]), jnp.array([[1, 1], [2, 1]]))
        Array([[1, 3, 0, 0],
               [2, 2, 4, 0]], dtype=int32)
    """
    fn = "ragged_all_to_all"
    args = [base.as_operand(a, fn, n) for a, n in zip(
        (operand, output, input_offsets, send_sizes, output_offsets, recv_sizes),
        ("operand", "output") + _RAGGED_ARGS)]
    return ragged_all_to_all_p.bind(*args, axis_name=_names(axis_name),
                                    axis_index_groups=_groups(axis_index_groups))


# --------------------------------------------------------------------------- pcast

_PCAST_TO = ("varying", "reduced", "unreduced")


def pcast(x: Any, axis_name: AxisName, *, to: str) -> Any:
    """JAX's cast between varying/invariant types over named axes. ember does not track
    which values vary over a mapped axis, so after checking its arguments this is the
    identity.

    Example:
        >>> ember.vmap(lambda x: lax.pcast(x, 'i', to='varying'), axis_name='i')(jnp.ones(2))
        Array([1., 1.], dtype=float32)
    """
    if isinstance(axis_name, (set, frozenset)):
        raise TypeError(f"axis_name={axis_name} must be a tuple or a str. Got {axis_name}")
    if not axis_name:
        return x
    if to not in _PCAST_TO:
        raise ValueError(f"Got unexpected `to` value. Allowed `to` values are: "
                         f"{set(_PCAST_TO)}")
    _check_bound(_names(axis_name), "pcast")
    return _pytree.tree_map(lambda leaf: base.as_operand(leaf, "pcast", "x"), x)
