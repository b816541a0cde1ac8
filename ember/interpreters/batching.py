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

import threading
from collections.abc import Callable, Sequence
from typing import Any

from ember import core

not_mapped = None


# --------------------------------------------------------------------------- named axes
# ``vmap(f, axis_name=n)`` binds the name ``n`` while ``f`` runs: collectives
# (``ember.lax.parallel``) look its size up here when they are traced (abstract evaluation),
# and the BatchTrace owning the name evaluates them (``collective_rules``).


class _AxisEnv(threading.local):
    def __init__(self):
        self.frames: list[tuple[Any, int]] = []  # (name, size), innermost last
        self.rule_trace: BatchTrace | None = None  # the trace whose batching rule is running


_env = _AxisEnv()


def axis_exists(name: Any) -> bool:
    """Whether an enclosing ``vmap`` (or ``extend_axis_env``) binds the axis ``name``."""
    return any(n == name for n, _ in _env.frames)


def axis_frame_size(name: Any) -> int:
    """The size of the innermost axis named ``name``; JAX's NameError when unbound."""
    for n, size in reversed(_env.frames):
        if n == name:
            return size
    raise NameError(f"unbound axis name: {name}")


def axis_env_key() -> tuple:
    """The bound axis names and sizes: what a cached trace of code with collectives
    depends on beyond its arguments' types (for compile-cache keys)."""
    return tuple(_env.frames)


class extend_axis_env:  # noqa: N801 - used like a function
    """Binds axis ``name`` with ``size`` for the block (like an enclosing ``vmap``), so that
    collectives over it can be traced (``make_jaxpr(..., axis_env=...)``)."""

    __slots__ = ("_frame",)

    def __init__(self, name: Any, size: int):
        self._frame = (name, int(size))

    def __enter__(self) -> None:
        _env.frames.append(self._frame)

    def __exit__(self, *exc_info) -> None:
        _env.frames.pop()


# Collective primitives: ``collective_axes[prim](params)`` gives the axis names it works
# over; ``collective_rules[prim](axis_size, axis_name, vals, dims, **params)`` is the batching
# rule used by the trace owning one of them (even when every operand is unmapped). The
# primitive's ordinary ``batch`` rule is used by traces of other names.
collective_axes: dict[core.Primitive, Callable[[dict], tuple]] = {}
collective_rules: dict[core.Primitive, Callable] = {}


def _uses_axis(params: dict, name: Any) -> bool:
    """Whether a jaxpr among ``params`` holds a collective over ``name``."""
    from ember.jaxpr import ClosedJaxpr, Jaxpr

    def in_value(v: Any) -> bool:
        if isinstance(v, ClosedJaxpr):
            v = v.jaxpr
        if isinstance(v, Jaxpr):
            return any(in_eqn(e) for e in v.eqns)
        if isinstance(v, (tuple, list)):
            return any(in_value(x) for x in v)
        return False

    def in_eqn(e: Any) -> bool:
        axes = collective_axes.get(e.primitive)
        if axes is not None and name in axes(e.params):
            return True
        return any(in_value(v) for v in e.params.values())

    return any(in_value(v) for v in params.values())


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
        name = self.axis_name
        ctx = core._ctx  # (set_current_trace(self.parent), inlined)
        previous_trace, ctx.trace = ctx.trace, self.parent
        try:
            collective = (name is not None and primitive in collective_rules
                          and name in collective_axes[primitive](params))
            if not collective and all(d is not_mapped for d in dims) and (
                    name is None or not _uses_axis(params, name)):
                return self.parent.process_primitive(primitive, vals, params)
            previous, _env.rule_trace = _env.rule_trace, self
            try:
                if collective:
                    out, out_dim = collective_rules[primitive](self.axis_size, name, vals,
                                                               dims, **params)
                elif (trace_rule := batch_rules_with_trace.get(primitive)) is not None:
                    out, out_dim = trace_rule(self, vals, dims, **params)
                elif primitive.batch is None:
                    raise NotImplementedError(
                        f"Batching rule for '{primitive.name}' not implemented")
                else:
                    out, out_dim = primitive.batch(vals, dims, **params)
            finally:
                _env.rule_trace = previous
        finally:
            ctx.trace = previous_trace
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
    if axis_name is not None:
        _env.frames.append((axis_name, axis_size))
    try:
        with core.set_current_trace(trace):
            outs = fun(*ins)
        pairs = [trace.to_batch_info(o) for o in outs]
    finally:
        trace.invalidate()
        if axis_name is not None:
            _env.frames.pop()
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


_RULE_AXIS = object()  # batch_jaxpr's default axis name: that of the rule's trace


def batch_jaxpr(closed: Any, axis_size: int, in_dims: Sequence[int | None],
                out_dims: int | Sequence[int | None] | None = None,
                axis_name: Any = _RULE_AXIS) -> tuple[Any, list[int | None]]:
    """``closed`` (a ClosedJaxpr) batched along ``in_dims`` of its inputs.

    The batched jaxpr takes each input with an axis of size ``axis_size`` inserted at its
    ``in_dims`` entry (unchanged where ``not_mapped``). ``out_dims`` says where the outputs'
    batch dimensions go: None keeps the dimension each output gets from its rules (an output
    that does not depend on a mapped input stays unmapped); an int moves every output there,
    broadcasting unmapped ones; a sequence does that per output (a None entry keeps the
    natural dimension). Returns the batched ClosedJaxpr and its outputs' batch dimensions.
    ``axis_name`` defaults to the name of the vmap whose batching rule calls this (so that
    collectives in ``closed`` over that name are evaluated).

    Example:
        >>> batched, dims = batch_jaxpr(make_jaxpr(jnp.sin)(1.0), 3, [0], out_dims=0)
        >>> batched.in_avals, dims
        ([ShapedArray(float32[3])], [0])
    """
    from ember.interpreters import ad
    if axis_name is _RULE_AXIS:
        rule = _env.rule_trace
        axis_name = rule.axis_name if rule is not None and rule.axis_size == axis_size else None
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
    if _env.rule_trace is not None:  # (a jaxpr with a collective over the rule's axis)
        return _env.rule_trace.axis_size
    raise ValueError("axis_size_of: no operand is mapped")
