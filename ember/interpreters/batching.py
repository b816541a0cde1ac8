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


class BatchTrace(core.Trace):
    """Runs each primitive's batching rule on the parent trace.

    ``axis_size`` is the size of the mapped axis; ``axis_name`` its name (or None).
    A value that is not a tracer of this trace is unmapped, so nested vmaps keep their batch
    dimensions apart.
    """

    def __init__(self, axis_size: int, axis_name: Any = None):
        super().__init__()
        self.axis_size = axis_size
        self.axis_name = axis_name

    def to_batch_info(self, x: Any) -> tuple[Any, int | None]:
        if type(x) is BatchTracer and x._trace is self:
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
            if primitive.batch is None:
                raise NotImplementedError(
                    f"Batching rule for '{primitive.name}' not implemented")
            out, out_dim = primitive.batch(vals, dims, **params)
        if primitive.multiple_results:
            return [self.new(v, d) for v, d in zip(out, out_dim)]
        return self.new(out, out_dim)


def batch_flat(fun: Callable, vals: Sequence[Any], dims: Sequence[int | None],
               axis_size: int, axis_name: Any = None) -> tuple[list, list]:
    """Runs ``fun`` (flat list in, flat list out) on values mapped along ``dims``.

    Returns the outputs (values of the current trace) and their batch dimensions
    (``not_mapped`` for an output that does not depend on a mapped input).
    """
    trace = BatchTrace(axis_size, axis_name)
    ins = [trace.new(v, d) for v, d in zip(vals, dims)]
    try:
        with core.set_current_trace(trace):
            outs = fun(*ins)
        pairs = [trace.to_batch_info(o) for o in outs]
    finally:
        trace.invalidate()
    return [v for v, _ in pairs], [d for _, d in pairs]


def axis_size_of(vals: Sequence[Any], dims: Sequence[int | None]) -> int:
    """The mapped axis size, read off the first mapped operand of a rule."""
    for v, d in zip(vals, dims):
        if d is not not_mapped:
            return core.get_aval(v).shape[d]
    raise ValueError("axis_size_of: no operand is mapped")
