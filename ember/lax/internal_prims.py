"""jax.lax's remaining primitive handles and small staging helpers.

``stack_p``/``unstack_p``/``tile_p`` (shape primitives with JAX's params), the comparison
primitives ``eq_to_p``/``le_to_p``/``lt_to_p`` (JAX uses them for dimension comparisons; here
they compare like ``eq``/``le``/``lt``), ``stage``, ``dce_sink`` and ``shape_as_value``, and
JAX's names for primitives ember defines under another name (``linear_solve_p``), and
``device_put_p`` (an identity on ember's one device) and ``approx_top_k_p`` (the exact top-k
of ``approx_max_k``/``approx_min_k`` behind JAX's primitive and params).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import _pytree, core, dtypes
from ember.compiler.hlo import Shape
from ember.core import ShapedArray
from ember.interpreters import ad
from ember.interpreters.partial_eval import trace_to_jaxpr
from ember.lax import base, batch_util
from ember.lax import elementwise as E
from ember.lax import sorting as S
from ember.lax.linear_solve import linear_solve_p
from ember.lax.reduction import reduce_sum
from ember.lax.shape import broadcast_in_dim, reshape

# ---------------------------------------------------------------- eq_to, le_to, lt_to

eq_to_p = E._compare("eq_to", np.equal)
le_to_p = E._compare("le_to", np.less_equal)
lt_to_p = E._compare("lt_to", np.less)
for _p, _direction in ((eq_to_p, "EQ"), (le_to_p, "LE"), (lt_to_p, "LT")):
    _p.def_lowering(E._lower_nary("compare", comparison_direction=_direction))
    ad.defjvp_zero(_p)
    batch_util.defbroadcasting(_p)


# ---------------------------------------------------------------- stack


def _check_axis(prim: str, axis: int, ndim: int) -> None:
    if not 0 <= axis <= ndim:
        raise ValueError(f"{prim}: axis {axis} is out of bounds for a result of rank {ndim}")


def _stack_abstract_eval(*avals, axis):
    if not avals:
        raise ValueError("stack: needs at least one operand")
    if len({(a.shape, a.dtype) for a in avals}) != 1:
        raise TypeError(f"stack: operands must have equal shapes and dtypes, got "
                        f"{[a.str_short() for a in avals]}")
    shape = avals[0].shape
    _check_axis("stack", axis, len(shape))
    return ShapedArray(shape[:axis] + (len(avals),) + shape[axis:], avals[0].dtype,
                       all(a.weak_type for a in avals))


stack_p = core.Primitive("stack")
stack_p.def_impl(lambda *xs, axis: np.stack(xs, axis))
stack_p.def_abstract_eval(_stack_abstract_eval)


@stack_p.def_lowering
def _stack_lowering(ctx, *xs, axis):
    shape = list(ctx.aval_out.shape)
    shape[axis] = 1
    one = Shape(ctx.aval_out.dtype, tuple(shape))
    return ctx.b.op("concatenate", *(ctx.b.op("reshape", x, shape=one) for x in xs),
                    dimension=axis)


@stack_p.def_batching
def _stack_batch(vals, dims, *, axis):
    return stack_p.bind(*batch_util.all_at_front(vals, dims), axis=axis + 1), 0


def _stack_transpose(ct, *xs, axis):
    cts = unstack_p.bind(ct, axis=axis)
    return [c if ad.is_undefined_primal(x) else None for c, x in zip(cts, xs)]


ad.deflinear2(stack_p, _stack_transpose)


# ---------------------------------------------------------------- unstack


def _unstack_abstract_eval(x, *, axis):
    if not 0 <= axis < x.ndim:
        raise ValueError(f"unstack: axis {axis} is out of bounds for an operand of rank "
                         f"{x.ndim}")
    part = ShapedArray(x.shape[:axis] + x.shape[axis + 1:], x.dtype, x.weak_type)
    return [part] * x.shape[axis]


unstack_p = core.MultipleResultsPrimitive("unstack")
unstack_p.def_impl(lambda x, *, axis: [np.ascontiguousarray(np.take(x, i, axis))
                                       for i in range(x.shape[axis])])
unstack_p.def_abstract_eval(_unstack_abstract_eval)


@unstack_p.def_lowering
def _unstack_lowering(ctx, x, *, axis):
    shape = ctx.avals_in[0].shape
    outs = []
    for i, aval in enumerate(ctx.avals_out):
        start = tuple(i if d == axis else 0 for d in range(len(shape)))
        limit = tuple(i + 1 if d == axis else s for d, s in enumerate(shape))
        one = Shape(aval.dtype, limit[:axis] + (1,) + limit[axis + 1:])
        piece = ctx.b.op("slice", x, start_indices=start, limit_indices=limit,
                         strides=(1,) * len(shape), shape=one)
        outs.append(ctx.b.op("reshape", piece, shape=Shape(aval.dtype, aval.shape)))
    return outs


@unstack_p.def_batching
def _unstack_batch(vals, dims, *, axis):
    (x,), (d,) = vals, dims
    x = batch_util.moveaxis(x, d, 0)
    outs = unstack_p.bind(x, axis=axis + 1)
    return outs, [0] * len(outs)


def _unstack_transpose(cts, x, *, axis):
    aval = x.aval
    part = ShapedArray(aval.shape[:axis] + aval.shape[axis + 1:], aval.dtype)
    cts = [ad.instantiate_zeros(ad.Zero(part)) if type(c) is ad.Zero else c for c in cts]
    return [stack_p.bind(*cts, axis=axis)]


unstack_p.def_jvp(lambda primals, tangents, *, axis: (
    unstack_p.bind(*primals, axis=axis),
    [ad.Zero(o) for o in _unstack_abstract_eval(core.get_aval(primals[0]), axis=axis)]
    if type(tangents[0]) is ad.Zero else unstack_p.bind(tangents[0], axis=axis)))
unstack_p.def_transpose(_unstack_transpose)


# ---------------------------------------------------------------- tile


def _tile_abstract_eval(x, *, reps):
    if len(reps) != x.ndim or any(r < 0 for r in reps):
        raise ValueError(f"tile: reps must be {x.ndim} non-negative ints, got {reps}")
    return ShapedArray(tuple(s * r for s, r in zip(x.shape, reps)), x.dtype, x.weak_type)


tile_p = core.Primitive("tile")
tile_p.def_impl(lambda x, *, reps: np.tile(x, reps))
tile_p.def_abstract_eval(_tile_abstract_eval)


@tile_p.def_lowering
def _tile_lowering(ctx, x, *, reps):
    shape = ctx.avals_in[0].shape
    dtype = ctx.aval_out.dtype
    wide = tuple(v for r, s in zip(reps, shape) for v in (r, s))
    b = ctx.b.op("broadcast_in_dim", x, shape=Shape(dtype, wide),
                 broadcast_dimensions=tuple(range(1, 2 * len(shape), 2)))
    return ctx.b.op("reshape", b, shape=Shape(dtype, ctx.aval_out.shape))


@tile_p.def_batching
def _tile_batch(vals, dims, *, reps):
    (x,), (d,) = vals, dims
    return tile_p.bind(x, reps=reps[:d] + (1,) + reps[d:]), d


def _tile_transpose(ct, x, *, reps):
    shape = x.aval.shape
    wide = tuple(v for r, s in zip(reps, shape) for v in (r, s))
    return [reduce_sum(reshape(ct, wide), tuple(range(0, 2 * len(shape), 2)))]


ad.deflinear2(tile_p, _tile_transpose)


# ---------------------------------------------------------------- stage, dce_sink


stage_p = core.Primitive("stage")
stage_p.def_impl(lambda x: x)
stage_p.def_abstract_eval(lambda x: x)
stage_p.def_lowering(lambda ctx, x: x)
batch_util.defvectorized(stage_p)
ad.deflinear(stage_p, lambda ct: [ct])


def stage(x: Any, /) -> Any:
    """The identity that lifts ``x`` (a Python scalar, NumPy array, ...) into the current
    trace; outside any trace it returns an ember Array.

    Example:
        >>> lax.stage(np.float32(2.0))
        Array(2., dtype=float32)
    """
    return stage_p.bind(base.as_operand(x, "stage", "x"))


dce_sink_p = core.MultipleResultsPrimitive("dce_sink")
dce_sink_p.def_impl(lambda x, **_: [])
dce_sink_p.def_abstract_eval(lambda x, **_: [])
dce_sink_p.def_lowering(lambda ctx, x, **_: [])
dce_sink_p.def_batching(lambda vals, dims, **params: ([], []))
ad.deflinear(dce_sink_p, lambda ct, **_: [None])


def dce_sink(val: Any, *, prevent_mlir_dce: bool = False) -> None:
    """Marks every leaf of ``val`` as used (ember computes what a jitted function returns,
    so this only records the use). Returns None.

    Example:
        >>> lax.dce_sink(jnp.ones(3)) is None
        True
    """
    for leaf in _pytree.tree_leaves(val):
        dce_sink_p.bind(base.as_operand(leaf, "dce_sink", "val"),
                        prevent_mlir_dce=bool(prevent_mlir_dce))


# ---------------------------------------------------------------- device_put_p
# JAX's device_put primitive: on ember's single device a (copying) identity on its operands,
# with JAX's params (``devices``, ``srcs``, ``copy_semantics``: one entry per operand).

device_put_p = core.MultipleResultsPrimitive("device_put")
device_put_p.def_impl(lambda *xs, **_: [np.array(x, copy=True) for x in xs])
device_put_p.def_abstract_eval(lambda *avals, **_: list(avals))
device_put_p.def_lowering(lambda ctx, *xs, **_: list(xs))
device_put_p.def_batching(lambda vals, dims, **params: (device_put_p.bind(*vals, **params),
                                                        list(dims)))
ad.deflinear(device_put_p, lambda cts, **params: [
    ad.instantiate_zeros(c) for c in cts])


# ---------------------------------------------------------------- approx_top_k_p
# JAX's approximate top-k primitive (params as JAX's). Its impl and lowering evaluate
# approx_max_k/approx_min_k's exact computation (see sorting.py).


def _approx_body(x, *, k, reduction_dimension, recall_target, is_max_k,
                 reduction_input_size_override, aggregate_to_topk):
    return S._approx_top_k("approx_top_k", x, k, reduction_dimension, recall_target,
                           reduction_input_size_override, aggregate_to_topk, is_max_k)


def _approx_trace(aval, params):
    closed, _ = trace_to_jaxpr(lambda x: list(_approx_body(x, **params)), [aval])
    return closed


def _approx_impl(x, **params):
    arg = core.concrete_array(np.asarray(x), ShapedArray(np.shape(x), np.asarray(x).dtype))
    return [np.asarray(o) for o in _approx_body(arg, **params)]


def _approx_lowering(ctx, x, **params):
    aval = ctx.avals_in[0]
    closed = _approx_trace(ShapedArray(aval.shape, aval.dtype), params)
    consts = [ctx.constant(np.asarray(c), np.asarray(c).dtype) for c in closed.consts]
    return list(ctx.lower_jaxpr(closed.jaxpr, consts, [x]))


def _approx_jvp(primals, tangents, **params):
    values, idx = approx_top_k_p.bind(*primals, **params)
    (t,), dim = tangents, params["reduction_dimension"] % np.ndim(primals[0])
    t_values = (ad.Zero.from_primal_value(values) if type(t) is ad.Zero
                else S._take_along(t, idx, dim))
    return [values, idx], [t_values, ad.Zero.from_primal_value(idx)]


def _approx_batch(vals, dims, **params):
    (x,), (d,) = vals, dims
    dim = params["reduction_dimension"] % (np.ndim(x) - 1)  # (of the unbatched operand)
    params = dict(params, reduction_dimension=dim + (d <= dim))
    return approx_top_k_p.bind(x, **params), [d, d]


approx_top_k_p = core.MultipleResultsPrimitive("approx_top_k")
approx_top_k_p.def_impl(_approx_impl)
approx_top_k_p.def_abstract_eval(
    lambda aval, **params: _approx_trace(ShapedArray(aval.shape, aval.dtype), params).out_avals)
approx_top_k_p.def_lowering(_approx_lowering)
approx_top_k_p.def_jvp(_approx_jvp)
approx_top_k_p.def_batching(_approx_batch)


def shape_as_value(shape: Sequence[int]) -> Any:
    """A shape as a 1-D integer array (int32 unless a size needs int64).

    Example:
        >>> lax.shape_as_value((2, 3))
        array([2, 3], dtype=int32)
    """
    shape = tuple(shape)
    if any(not isinstance(d, (int, np.integer)) for d in shape):
        raise TypeError(f"shape_as_value: shape must be a sequence of ints, got {shape!r}")
    dtype = (np.int32 if all(d <= np.iinfo(np.int32).max for d in shape)
             else dtypes.canonicalize_dtype(np.int64))
    if not shape:
        return broadcast_in_dim(np.array(0, dtype), (0,), ())
    return np.asarray(shape, dtype=dtype)


__all__ = ["approx_top_k_p", "dce_sink", "dce_sink_p", "device_put_p", "eq_to_p", "le_to_p",
           "linear_solve_p", "lt_to_p", "shape_as_value", "stack_p", "stage", "stage_p",
           "tile_p", "unstack_p"]
