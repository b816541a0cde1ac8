"""Native code for windowed reductions: ``reduce_window`` (pooling) as an element op of fused
kernels, and the two custom calls max pooling's gradient (``select_and_scatter_add``) lowers to.

**reduce_window** (any reducer body; several operands too, whose element is ``Leaves``:
max pooling's JVP, ``select_and_gather_add``, reduces (value, tangent) pairs): an output
element is its window's reduction, computed where it is needed, like any other element op
(``ElementEmitter`` calls ``emit_reduce_window``): the window's elements are combined into
an accumulator starting from the init value, in row-major window order, each padding
position or base-dilation hole combining the init value itself, exactly as the HLO
evaluator's general path does (so results are bit-identical to it: same operations in the
same order). Reading the operand through the emitter means fused producers are computed at
the window's positions instead of being materialized. Windows of at most ``UNROLL_MAX``
elements are unrolled: the loop nest over the output then has a straight-line body, which
LLVM vectorizes along the output's minor dim (a pooling window over NHWC reads contiguous
channels). Larger one-operand windows run as a loop nest with the accumulator in a stack
slot. Cumulative scans keep their own kernel (``scan_kernel``), whose float sums follow the
evaluator's scan rule.

Each window position along a dim is a *tap* (``_tap``): the operand index is an affine
function of the output index that is valid only inside the operand (and, under base dilation,
on its lattice). A tap that is valid for every output index (the interior of a VALID window)
costs no check; one that never is (a pad wider than a window) combines the init value without
a load; others clamp the index, so that no load leaves the buffer, and select the init value
outside.

**select_and_scatter_add** (each window's source value added at the element it selects, the
first maximum in row-major window order, XLA's ``select(ge(best, x), best, x)`` from the
identity) runs as two kernels, each parallel over its own result (no write conflicts):

- ``ember.window_select`` (an element op over the windows): the row-major offset, int32, of
  the element each window selects, padding reading as the selection identity;
- ``ember.window_scatter_selected`` (``ScatterSelectedKernel``, over the operand): each
  element sums the source values of the windows that hold it and chose it, in increasing
  window order (XLA's order: the window offsets decreasing), from zero; the operand is
  walked by residues of the strides, so each element's code holds only the windows that can
  hold it.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from llvmlite import ir

from ember.backends.cpu import complex_ops as C
from ember.backends.cpu import scalar_ops as S
from ember.backends.cpu.scalar_ops import I64, UnsupportedOp
from ember.compiler.eval_elementwise import simple_reducer_opcode
from ember.compiler.hlo import Computation, Instruction
from ember.compiler.reduce_window import scan_axis
from ember.compiler.shape_inference import reduce_window_attrs

# Windows of at most this many elements are unrolled (the loop over the output's minor dim
# then vectorizes); larger ones run as a loop nest.
UNROLL_MAX = 64
# The custom calls ``lax.select_and_scatter_add`` lowers to (``ember.lax.windowed``).
SELECT_TARGET = "ember.window_select"
SCATTER_TARGET = "ember.window_scatter_selected"
WINDOW_TARGETS = (SELECT_TARGET, SCATTER_TARGET)

_NEVER = "never"  # a tap that no output index reaches inside the operand


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def _tap(b: ir.IRBuilder, x, scale: int, shift: int, extent: int, step: int, size: int,
         extra=None, extra_max: int = 0):
    """The index ``(x * scale + shift + extra) / step`` into a dim of ``size``, for ``x`` in
    ``[0, extent)`` and ``extra`` (an optional dynamic term) in ``[0, extra_max]``; valid when
    the division is exact and the quotient lies in ``[0, size)``.

    Returns ``(index, valid)``: the index clamped into the dim and the validity as an ``i1``
    (None when it always holds), or ``_NEVER`` when no ``x`` gives a valid index."""
    last = (size - 1) * step  # the largest valid dividend
    low, high = shift, (extent - 1) * scale + shift + extra_max
    if size == 0 or high < 0 or low > last:
        return _NEVER
    exact = step == 1 or (extra is None and scale % step == 0)
    if exact and step != 1 and shift % step:  # (every dividend is off the lattice)
        return _NEVER
    t = x if scale == 1 else b.mul(x, _c(scale))
    if shift:
        t = b.add(t, _c(shift))
    if extra is not None:
        t = b.add(t, extra)
    conds = []
    if low < 0:
        conds.append(b.icmp_signed(">=", t, _c(0)))
        t = b.select(conds[-1], t, _c(0))
    if high > last:
        conds.append(b.icmp_signed("<=", t, _c(last)))
        t = b.select(conds[-1], t, _c(last))
    if step != 1:
        if not exact:
            conds.append(b.icmp_unsigned("==", b.urem(t, _c(step)), _c(0)))
        t = b.udiv(t, _c(step))
    valid = None
    for cond in conds:
        valid = cond if valid is None else b.and_(valid, cond)
    return t, valid


def _gather_taps(b: ir.IRBuilder, taps):
    """The multi-index and validity (None: always) of one window position from its taps per
    dim, or ``_NEVER``."""
    if any(t is _NEVER for t in taps):
        return _NEVER
    valid = None
    for _, cond in taps:
        if cond is not None:
            valid = cond if valid is None else b.and_(valid, cond)
    return tuple(i for i, _ in taps), valid


# --------------------------------------------------------------------------- reduce_window


class Leaves(tuple):
    """The elements of a variadic ``reduce_window``, one per result leaf."""


def check_reduce_window(inst: Instruction) -> None:
    """Raises ``UnsupportedOp`` unless ``emit_reduce_window`` computes ``inst``."""
    body = inst.calls[0]
    for b_inst in body.instructions:
        C.check_instruction(b_inst)
    window = reduce_window_attrs(inst.attrs, inst.operands[0].shape.rank)
    large = math.prod(window["window_dimensions"]) > UNROLL_MAX
    if large and (len(inst.operands) != 2 or C.is_complex(inst.dtype)):
        raise UnsupportedOp("a variadic or complex reduce_window over a large window")


def is_scan(inst: Instruction) -> bool:
    """Whether ``inst`` (a ``reduce_window``) has a cumulative scan's windows: those take
    ``scan_kernel`` when the init is the identity, else the library (see module doc)."""
    return scan_axis(inst) is not None


def _combiner(b: ir.IRBuilder, body: Computation, dt, module_consts):
    opcode = simple_reducer_opcode(body)
    if opcode is not None and body.root.operands[0] is body.parameters[0]:
        return lambda acc, v: C.binary(b, opcode, acc, v, dt, dt, {})
    from ember.backends.cpu.kernel_gen import emit_computation
    return lambda acc, v: emit_computation(b, body, [acc, v], module_consts)[0]


def window_work(fused: Computation) -> int:
    """The most window elements a ``reduce_window`` of ``fused`` combines per output element
    (1 without one): a kernel's work per output element, for threading decisions."""
    most = 1
    for inst in fused.instructions:
        if inst.opcode == "reduce_window":
            window = reduce_window_attrs(inst.attrs, inst.operands[0].shape.rank)
            most = max(most, math.prod(window["window_dimensions"]))
    return most


def emit_reduce_window(em, inst: Instruction, index) -> ir.Value | Leaves:
    """The element of ``inst`` (a ``reduce_window``) at ``index`` (a ``kernel_gen.Index``),
    emitted by the ``ElementEmitter`` ``em``: a value, or ``Leaves`` for several operands."""
    check_reduce_window(inst)
    if len(inst.operands) > 2:
        return _emit_variadic(em, inst, index)
    from ember.backends.cpu.kernel_gen import Index, _scalar_index
    b = em.b
    operand, init_inst = inst.operands
    rank = operand.shape.rank
    w = reduce_window_attrs(inst.attrs, rank)
    sizes = w["window_dimensions"]
    init = em.emit(init_inst, _scalar_index())
    combine = _combiner(b, inst.calls[0], inst.dtype, em.module_consts)
    out = index.get_multi(b) if rank else ()

    def tap(d, k=None, extra=None):  # window position k (or k + extra) along dim d
        shift = (k or 0) * w["window_dilations"][d] - w["padding"][d][0]
        return _tap(b, out[d], w["window_strides"][d], shift, inst.dims[d],
                    w["base_dilations"][d], operand.dims[d], extra,
                    (sizes[d] - 1) * w["window_dilations"][d] if extra is not None else 0)

    def value(emitter, position):
        if position is _NEVER:
            return init
        multi, valid = position
        x = emitter.emit(operand, Index(operand.dims, multi=multi))
        return x if valid is None else C.select(b, valid, x, init)

    if math.prod(sizes) <= UNROLL_MAX:
        taps = [[tap(d, k) for k in range(n)] for d, n in enumerate(sizes)]
        acc = init
        for offset in itertools.product(*(range(n) for n in sizes)):
            position = _gather_taps(b, [taps[d][k] for d, k in enumerate(offset)])
            acc = combine(acc, value(em, position))
        return acc
    return _window_loop(em, inst, w["window_dilations"], init, combine, tap, value)


def _emit_variadic(em, inst: Instruction, index) -> Leaves:
    """A variadic window (``select_and_gather_add``'s (value, tangent) pairs): the body
    combines every operand's accumulator with its element at each position, unrolled."""
    from ember.backends.cpu.kernel_gen import Index, _scalar_index, emit_computation
    b = em.b
    n = len(inst.operands) // 2
    operands, init_insts = inst.operands[:n], inst.operands[n:]
    w = reduce_window_attrs(inst.attrs, operands[0].shape.rank)
    sizes = w["window_dimensions"]
    inits = [em.emit(i, _scalar_index()) for i in init_insts]
    out = index.get_multi(b)
    out_dims = inst.shape.tuple_shapes[0].dims
    taps = [[_tap(b, out[d], w["window_strides"][d],
                  k * w["window_dilations"][d] - w["padding"][d][0], out_dims[d],
                  w["base_dilations"][d], operands[0].dims[d]) for k in range(size)]
            for d, size in enumerate(sizes)]
    accs = list(inits)
    for offset in itertools.product(*(range(size) for size in sizes)):
        position = _gather_taps(b, [taps[d][k] for d, k in enumerate(offset)])
        if position is _NEVER:
            xs = list(inits)
        else:
            multi, valid = position
            xs = [em.emit(o, Index(o.dims, multi=multi)) for o in operands]
            if valid is not None:
                xs = [C.select(b, valid, x, i) for x, i in zip(xs, inits)]
        accs = emit_computation(b, inst.calls[0], accs + xs, em.module_consts)
    return Leaves(accs)


def _window_loop(em, inst, dilations, init, combine, tap, value) -> ir.Value:
    """A large window's reduction as a loop nest over its positions (row-major), the
    accumulator in a stack slot; the loop body's emissions use an emitter of their own (its
    values do not dominate the code after the loop)."""
    from ember.backends.cpu.kernel_gen import ElementEmitter, Loops
    b = em.b
    loops = Loops(b, b.function.blocks[0])
    slot = loops.alloca(S.value_type(inst.dtype), name="window.acc")
    b.store(init, slot)
    inner = ElementEmitter(b, em.param_ptrs, em.module_consts, em.budget, em.strided)
    inner.memo = dict(em.memo)

    sizes = reduce_window_attrs(inst.attrs, len(dilations))["window_dimensions"]

    def level(d, ks):
        if d == len(sizes):
            taps = [tap(e, extra=b.mul(k, _c(dilations[e]))) for e, k in enumerate(ks)]
            b.store(combine(b.load(slot), value(inner, _gather_taps(b, taps))), slot)
            return
        loops.loop(_c(0), _c(sizes[d]), lambda k: level(d + 1, ks + [k]), name=f"w{d}",
                   unroll=False, vectorize=False)
    level(0, [])
    return b.load(slot)


# --------------------------------------------------------------------------- select/scatter


def is_scatter_call(inst: Instruction) -> bool:
    """Whether ``inst`` is an ``ember.window_scatter_selected`` custom call (whose kernel is
    ``ScatterSelectedKernel``)."""
    return is_window_call(inst) and inst.attrs["call_target_name"] == SCATTER_TARGET


def is_window_call(inst: Instruction) -> bool:
    """Whether a lone ``inst`` is one of the custom calls of ``select_and_scatter_add`` that
    ``emit_window_call`` computes natively."""
    if inst.opcode != "custom_call" or inst.attrs.get("call_target_name") not in WINDOW_TARGETS:
        return False
    if inst.shape.is_tuple or math.prod(inst.attrs["window_dimensions"]) > UNROLL_MAX:
        return False
    try:
        for dt in {inst.dtype, *(o.dtype for o in inst.operands)}:
            S.check_dtype(np.dtype(dt))
    except UnsupportedOp:
        return False
    return inst.dtype != np.bool_


def _pads(attrs) -> list[tuple[int, int]]:
    flat = attrs["padding"]
    return list(zip(flat[::2], flat[1::2]))


def _select_identity(select_prim: str, dt: np.dtype):
    """The value padding reads as: the minimum for ``ge`` (the maximum for ``le``)."""
    is_max = select_prim == "ge"
    if dt == np.bool_:
        return not is_max
    if S.is_float(dt):
        return -np.inf if is_max else np.inf
    info = np.iinfo(dt)
    return info.min if is_max else info.max


def emit_window_call(em, inst: Instruction, index) -> ir.Value:
    """The element at ``index`` of an ``ember.window_select`` custom call (see module doc;
    the scatter step has a kernel of its own, ``ScatterSelectedKernel``)."""
    if inst.attrs["call_target_name"] != SELECT_TARGET:
        raise UnsupportedOp("window_scatter_selected outside its own kernel")
    return _emit_select(em, inst, index)


def _emit_select(em, inst: Instruction, index) -> ir.Value:
    from ember.backends.cpu.kernel_gen import Index
    b, a = em.b, inst.attrs
    x = inst.operands[0]
    dt = np.dtype(x.dtype)
    sizes, strides, pads = a["window_dimensions"], a["window_strides"], _pads(a)
    keep_dir = "GE" if a["select_prim"] == "ge" else "LE"
    ident = C.const(dt, _select_identity(a["select_prim"], dt))
    out = index.get_multi(b)
    taps = [[_tap(b, out[d], strides[d], k - pads[d][0], inst.dims[d], 1, x.dims[d])
             for k in range(n)] for d, n in enumerate(sizes)]
    best, which = ident, ir.Constant(S.I32, 0)
    for k, offset in enumerate(itertools.product(*(range(n) for n in sizes))):
        position = _gather_taps(b, [taps[d][j] for d, j in enumerate(offset)])
        if position is _NEVER:
            v = ident
        else:
            multi, valid = position
            v = em.emit(x, Index(x.dims, multi=multi))
            if valid is not None:
                v = b.select(valid, v, ident)
        keep = S.compare(b, keep_dir, best, v, dt)
        best = b.select(keep, best, v)
        which = b.select(keep, which, ir.Constant(S.I32, k))
    return which


class ScatterSelectedKernel:
    """The loops of ``ember.window_scatter_selected`` in a ``KernelBuilder``'s function.

    An operand element ``i`` lies in window ``o`` at offset ``k`` along a dim where
    ``o * stride + k == i + lo``: only offsets ``k`` of ``i``'s residue mod the stride can
    hold it. So each dim is walked by residue ``r`` (unrolled) and quotient ``q``
    (``i = q * stride + r``): within a residue the offsets that never hold its elements are
    left out of the code, and the others read window ``o = q + (r + lo - k) / stride``,
    with a check only where ``o`` may leave the windows' range (a 3x3 window of stride 2
    holds an element in 2.25 windows on average: 2.25 terms per element instead of 9
    selects). The parallel dim is dim 0's quotient; an element's sum takes its windows in
    increasing order, from zero."""

    def __init__(self, kb, inst: Instruction):
        self.kb, self.b, self.inst = kb, kb.b, inst
        a = inst.attrs
        self.sizes, self.strides, self.pads = a["window_dimensions"], a["window_strides"], \
            _pads(a)
        self.dtype = np.dtype(inst.dtype)

    def build(self, lo, hi):
        from ember.backends.cpu.kernel_gen import Index, KernelInfo
        b, kb, inst = self.b, self.kb, self.inst
        dims = inst.dims
        if not dims:
            return self._scalar(lo, hi)
        if not math.prod(dims):
            return KernelInfo(kb.name, 0, 0, ())
        s0 = self.strides[0]
        extent = -(-dims[0] // s0)
        lo, hi = kb._clamp_range(lo, hi, extent)
        out = kb.out_ptrs[0]
        window_count = math.prod(self.sizes)

        def level(d, at):
            if d == len(dims):
                index = Index(dims, multi=tuple(i for i, _, _ in at))
                value = self._element(kb._emitter(), at)
                C.store(b, value, b.gep(out, [index.get_linear(b)], inbounds=True),
                        self.dtype)
                return
            s, n = self.strides[d], dims[d]
            for r in range(min(s, n)):
                count = -(-(n - r) // s)  # (the quotients of residue r)

                def body(q, r=r, count=count):
                    i = q if s == 1 else b.add(b.mul(q, _c(s)), _c(r))
                    level(d + 1, at + [(i, q, (r, count))])
                if d == 0:  # (the caller's quotients; the last may lack this residue)
                    self._parallel_residue(lo, hi, r, count, body)
                else:
                    kb.loops.loop(_c(0), _c(count), body, name=f"q{d}")
        level(0, [])
        return KernelInfo(kb.name, extent, math.prod(dims[1:]) * s0 * window_count, ())

    def _parallel_residue(self, lo, hi, r, count, body):
        """Quotients ``[lo, hi)`` of dim 0 that residue ``r`` has (those below ``count``)."""
        b = self.b
        end = b.select(b.icmp_signed("<", hi, _c(count)), hi, _c(count))
        self.kb.loops.loop(lo, end, body, name=f"q0r{r}")

    def _scalar(self, lo, hi):
        from ember.backends.cpu.kernel_gen import KernelInfo
        b, kb = self.b, self.kb
        lo, hi = kb._clamp_range(lo, hi, 1)
        with b.if_then(b.icmp_signed("<", lo, hi)):
            C.store(b, self._element(kb._emitter(), []), kb.out_ptrs[0], self.dtype)
        return KernelInfo(kb.name, 1, math.prod(self.sizes), ())

    def _element(self, em, at):
        """The sum at the element ``at`` (per dim: index, quotient, (residue, quotients))."""
        from ember.backends.cpu.kernel_gen import Index
        b = self.b
        source, which = self.inst.operands
        taps = []
        for d, (_, q, (r, count)) in enumerate(at):
            s, lo = self.strides[d], self.pads[d][0]
            per_k = []
            for k in range(self.sizes[d]):
                shift = r + lo - k
                per_k.append(_NEVER if shift % s else
                             _tap(b, q, 1, shift // s, count, 1, source.dims[d]))
            taps.append(per_k)
        zero = C.const(self.dtype, 0)
        acc = zero
        offsets = list(enumerate(itertools.product(*(range(n) for n in self.sizes))))
        for k, offset in reversed(offsets):
            position = _gather_taps(b, [taps[d][j] for d, j in enumerate(offset)])
            if position is _NEVER:
                continue
            multi, valid = position
            window = Index(source.dims, multi=multi)
            chosen = b.icmp_signed("==", em.emit(which, window), ir.Constant(S.I32, k))
            if valid is not None:
                chosen = b.and_(valid, chosen)
            term = C.select(b, chosen, em.emit(source, window), zero)
            acc = C.binary(b, "add", acc, term, self.dtype, self.dtype, {})
        return acc
