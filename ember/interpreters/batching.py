"""Batching (vmap): the batch trace and the rule registration API.

A batched value is a value of the parent trace plus a *batch dimension*: the axis of the
value that the vmap maps over, or ``not_mapped`` (None) when the value is the same for every
batch element. Each primitive's batching rule lives beside its other rules in ``ember/lax``.

Rule convention (JAX's):

- ``prim.batch(vals, dims, **params) -> (out, out_dim)``: ``vals`` are the operands (values of
  the parent trace), ``dims`` their batch dimensions (an int, or ``not_mapped``; at least one is
  mapped). It returns the result and its batch dimension; for primitives with
  ``multiple_results`` both are lists. The rule binds primitives on the parent trace (it runs
  with the parent trace current), so a rule is ordinary lax code.

Shared rule builders (``vectorized_batcher``, ``broadcast_batcher``, ...) live in
``ember.lax.batch_util``, since they bind lax primitives.

Primitives that hold a jaxpr (``pjit``, ``remat2``, the custom-derivative calls) batch it with
``batch_jaxpr``, which mirrors ``ad.jvp_jaxpr``: the batched jaxpr is traced once per
signature and cached.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ember import core

not_mapped = None


class BatchTracer(core.Tracer):
    """A value of the parent trace with a batch dimension (never ``not_mapped``)."""

    __slots__ = ("val", "batch_dim")

    def __init__(self, trace: BatchTrace, val: Any, batch_dim: int):
        self._trace = trace
        self.val = val
        self.batch_dim = batch_dim

    @property
    def aval(self) -> core.ShapedArray:
        aval = core.get_aval(self.val)
        shape = aval.shape[:self.batch_dim] + aval.shape[self.batch_dim + 1:]
        return core.ShapedArray(shape, aval.dtype, aval.weak_type)


# Primitives whose rules need the batch trace itself (the custom-derivative calls: their
# batched rules must see the trace's tracers that the user's rule closes over):
# ``rule(trace, vals, dims, **params) -> (out, out_dim)``; used instead of ``prim.batch``.
batch_rules_with_trace: dict[core.Primitive, Callable] = {}


class BatchTrace(core.Trace):
    """Runs each primitive's batching rule on the parent trace.

    ``axis_size`` is the size of the mapped axis; ``axis_name`` its name (or None). A value
    that is not a tracer of this trace is unmapped, so nested vmaps keep their batch
    dimensions apart. ``tag`` identifies the vmap: a trace made later with the same tag (to
    run a custom rule batched) treats this trace's tracers as its own.
    """

    def __init__(self, axis_size: int, axis_name: Any = None, tag: Any = None):
        super().__init__()
        self.axis_size = axis_size
        self.axis_name = axis_name
        self.tag = object() if tag is None else tag

    def to_batch_info(self, x: Any) -> tuple[Any, int | None]:
        if type(x) is BatchTracer and x._trace.tag is self.tag:
            return x.val, x.batch_dim
        return x, not_mapped

    def new(self, val: Any, dim: int | None) -> Any:
        """A tracer for ``val`` mapped along ``dim``, or ``val`` itself when unmapped."""
        if dim is not_mapped:
            return val
        return BatchTracer(self, val, dim)

    def process_primitive(self, primitive, args, params):
        vals, dims = [], []
        for x in args:
            v, d = self.to_batch_info(x)
            vals.append(v)
            dims.append(d)
        with core.set_current_trace(self.parent):
            if all(d is not_mapped for d in dims):
                return primitive.bind(*vals, **params)
            trace_rule = batch_rules_with_trace.get(primitive)
            if trace_rule is not None:
                out, out_dim = trace_rule(self, vals, dims, **params)
            elif primitive.batch is None:
                raise NotImplementedError(
                    f"Batching rule for '{primitive.name}' not implemented")
            else:
                out, out_dim = primitive.batch(vals, dims, **params)
        if primitive.multiple_results:
            return [self.new(v, d) for v, d in zip(out, out_dim)]
        return self.new(out, out_dim)


def batch_flat(fun: Callable, vals: Sequence[Any], dims: Sequence[int | None],
               axis_size: int, axis_name: Any = None, tag: Any = None) -> tuple[list, list]:
    """Runs ``fun`` (flat list in, flat list out) on values mapped along ``dims``.

    ``tag`` (a ``BatchTrace.tag``) makes the trace also treat that trace's tracers, which
    ``fun`` may close over, as mapped values.

    Returns the outputs (values of the current trace) and their batch dimensions
    (``not_mapped`` for an output that does not depend on a mapped input).
    """
    trace = BatchTrace(axis_size, axis_name, tag)
    ins = [trace.new(v, d) for v, d in zip(vals, dims)]
    try:
        with core.set_current_trace(trace):
            outs = fun(*ins)
        pairs = [trace.to_batch_info(o) for o in outs]
    finally:
        trace.invalidate()
    return [v for v, _ in pairs], [d for _, d in pairs]


def match_dim(x: Any, dim: int | None, dst: int | None, size: int) -> Any:
    """``x`` (mapped along ``dim``) with its batch dimension at ``dst``.

    An unmapped ``x`` is broadcast along a new axis at ``dst``; ``dst=None`` needs ``x``
    unmapped. Runs on the current trace (lax operations).
    """
    from ember.lax import batch_util
    if dst is not_mapped:
        if dim is not not_mapped:
            raise ValueError("match_dim: a mapped value cannot be made unmapped")
        return x
    return batch_util.move_to(x, dim, dst, size)


def sum_to_unmapped(x: Any, dim: int | None, size: int) -> Any:
    """The sum over the batch of ``x``: what a value shared by every batch element receives
    as cotangent. An unmapped ``x`` (the same for every element) is multiplied by ``size``."""
    from ember.lax import elementwise
    from ember.lax.reduction import reduce_sum
    if dim is not_mapped:
        aval = core.get_aval(x)
        return elementwise.mul(x, elementwise.convert_element_type(
            size, aval.dtype, weak_type=aval.weak_type))
    return reduce_sum(x, (dim,))


def batch_jaxpr(closed: Any, axis_size: int, in_dims: Sequence[int | None],
                out_dims: int | Sequence[int | None] | None = None,
                axis_name: Any = None) -> tuple[Any, list[int | None]]:
    """``closed`` (a ClosedJaxpr) batched along ``in_dims`` of its inputs.

    The batched jaxpr takes each input with an axis of size ``axis_size`` inserted at its
    ``in_dims`` entry (unchanged where ``not_mapped``). ``out_dims`` says where the outputs'
    batch dimensions go: None keeps the dimension each output gets from its rules (an output
    that does not depend on a mapped input stays unmapped); an int moves every output there,
    broadcasting unmapped ones; a sequence does that per output (a None entry keeps the
    natural dimension). Returns the batched ClosedJaxpr and its outputs' batch dimensions.

    Example:
        >>> batched, dims = batch_jaxpr(make_jaxpr(jnp.sin)(1.0), 3, [0], out_dims=0)
        >>> batched.in_avals, dims
        ([ShapedArray(float32[3])], [0])
    """
    from ember.interpreters import ad
    n_out = len(closed.out_avals)
    if out_dims is None or isinstance(out_dims, int):
        spec = [out_dims] * n_out
    else:
        spec = list(out_dims)
        if len(spec) != n_out:
            raise ValueError(f"batch_jaxpr: {len(spec)} out_dims for {n_out} outputs")
    in_dims = [d if d is not_mapped else int(d) for d in in_dims]
    if len(in_dims) != len(closed.in_avals):
        raise ValueError(f"batch_jaxpr: {len(in_dims)} in_dims for {len(closed.in_avals)} "
                         "inputs")
    try:
        key = (axis_size, tuple(in_dims), tuple(spec), axis_name)
        hash(key)
    except TypeError:  # an unhashable axis name: no caching
        return _make_batch_jaxpr(closed, axis_size, in_dims, spec, axis_name)
    return ad._cached("batch", closed, key, lambda: _make_batch_jaxpr(
        closed, axis_size, in_dims, spec, axis_name))


def _batched_aval(aval: core.ShapedArray, dim: int | None, size: int) -> core.ShapedArray:
    if dim is not_mapped:
        return aval
    shape = list(aval.shape)
    shape.insert(dim, size)
    return core.ShapedArray(shape, aval.dtype, aval.weak_type)


def _make_batch_jaxpr(closed, axis_size, in_dims, spec, axis_name):
    from ember.interpreters import ad
    from ember.interpreters import partial_eval as pe
    dims_box: list[list[int | None]] = []

    def fun(*args):
        # Literals keep their weak types, so the batched outputs have the original types.
        outs, dims = batch_flat(lambda *xs: ad._eval_keep_weak(closed.jaxpr, closed.consts, xs),
                                args, in_dims, axis_size, axis_name)
        final = [d if s is None else s for d, s in zip(dims, spec)]
        dims_box.append(final)
        return [o if s is None else match_dim(o, d, s, axis_size)
                for o, d, s in zip(outs, dims, spec)]

    avals = [_batched_aval(a, d, axis_size) for a, d in zip(closed.in_avals, in_dims)]
    batched, _ = pe.trace_to_jaxpr(fun, avals)
    return batched, dims_box[0]


def axis_size_of(vals: Sequence[Any], dims: Sequence[int | None]) -> int:
    """The mapped axis size, read off the first mapped operand of a rule."""
    for v, d in zip(vals, dims):
        if d is not not_mapped:
            return core.get_aval(v).shape[d]
    raise ValueError("axis_size_of: no operand is mapped")
