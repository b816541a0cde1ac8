"""Row kernels: the code of a row fusion (see ``fusion.row_space``), e.g. softmax's
max -> sum(exp(x - max)) -> exp(x - max) / sum or layernorm's mean -> variance -> normalize
fused into one kernel that runs over rows and makes several passes over each row while it is
in cache. ``KernelBuilder`` (``kernel_gen``) hands such fusions to ``RowKernel``; the kernel
has the usual signature and its parallel dimension is the (flattened) row index.
"""

from __future__ import annotations

from llvmlite import ir

from ember.backends.cpu import complex_ops as C
from ember.backends.cpu import scalar_ops as S
from ember.backends.cpu.kernel_gen import (
    CACHE_LINE,
    ROW_STREAM_MIN_BYTES,
    SHORT_SUM_MAX,
    STREAM_ROW_MAX_BYTES,
    ElementEmitter,
    Index,
    KernelBuilder,
    KernelInfo,
    LaneSums,
    _c,
    _outputs,
    _scalar_index,
    fence_streams,
    simple_reducer,
    stream_lines,
    streamable,
)
from ember.backends.cpu.scalar_ops import UnsupportedOp
from ember.backends.cpu.vecmath import _intrinsic
from ember.compiler.hlo import ELEMENTWISE, EXPENSIVE_ELEMENTWISE, Computation, Instruction
from ember.compiler.passes.fusion import RowSpace, row_space

# Rows per block when a row kernel's row outputs run in a loop of their own
# (``RowKernel._deferred_outs``).
ROW_BLOCK = 64


def row_kernel_space(fused: Computation) -> RowSpace | None:
    """The row space of a row fusion: a fused computation in which a reduce result is
    consumed, or with an output the reduction loop cannot store (next to a reduce, an output
    with one element per row that does not depend on it: row fusion merges such groups).
    None for other fusions. Raises ``UnsupportedOp`` for a computation that needs a row space and is
    not a valid row fusion (the evaluator runs it)."""
    users = fused.users()
    consumed = any(u.opcode != "tuple" for inst in fused.instructions if inst.opcode == "reduce"
                   for u in users.get(inst, ()))
    outputs = [inst for inst, _ in _outputs(fused)]
    if not consumed and _reduce_loop_fits(fused, outputs):
        return None
    insts = [i for i in fused.instructions if i.opcode != "tuple"]
    space = row_space(insts, outputs)
    if space is None:
        raise UnsupportedOp("reduce result consumed outside a row space")
    return space


def _reduce_loop_fits(fused: Computation, outputs: list[Instruction]) -> bool:
    """Whether a reduction kernel's loop can produce every output: no reduce, or every
    output not a reduce has the reduced array's dims (it is stored at each of its indices)."""
    reduces = [i for i in fused.instructions if i.opcode == "reduce"]
    if not reduces:
        return True
    dims = reduces[0].operands[0].dims
    return all(o.opcode == "reduce" or o.dims == dims for o in outputs)


class RowEmitter(ElementEmitter):
    """An emitter that reads row values (``row_values``: one register value per row) and
    cached full values (``cache_ptrs``: ``(pointer, row_base)`` of the values an earlier
    pass over the row stored; ``row_base`` None for a buffer of the full shape, else the
    linear index of the row's first element, the buffer holding one row)."""

    def __init__(self, b, param_ptrs, module_consts, budget, row_values, cache_ptrs):
        super().__init__(b, param_ptrs, module_consts, budget)
        self.row_values = row_values
        self.cache_ptrs = cache_ptrs

    def emit(self, inst: Instruction, index: Index) -> ir.Value:
        v = self.row_values.get(id(inst))
        if v is not None:
            return v
        cached = self.cache_ptrs.get(id(inst))
        if cached is not None:
            ptr, row_base = cached
            at = index.get_linear(self.b)
            if row_base is not None:
                at = self.b.sub(at, row_base, flags=("nsw", "nuw"))
            return C.load(self.b, self.b.gep(ptr, [at], inbounds=True), inst.dtype)
        return super().emit(inst, index)


class RowKernel:
    """The kernel of a row fusion: ``for row in [lo, hi)``, several passes over the row.

    Pass ``p`` accumulates the reduces whose inputs need only reduces of earlier passes (for
    softmax: pass 0 the max, pass 1 the sum of exp(x - max)); between passes the *row
    values* (instructions of one value per row: reduce results and what is computed from
    them) become registers; a last pass computes the outputs of the full shape. Each pass is
    a plain loop over the row's elements (vectorizable); float sums accumulate in lanes
    (``kernel_gen.LaneSums``), as in input fusions. An expensive elementwise value
    needed by several passes (softmax's exp) is stored by its first pass into an output
    buffer of its dtype that only the last pass writes, and loaded by the later passes:
    every pass reads and writes only the current row, the last pass loads every value of an
    element before storing any. Large outputs are streamed (``ROW_STREAM_MIN_BYTES``): the
    passes store into stack buffers of one row instead, copied out after the last.
    """

    def __init__(self, kb: KernelBuilder, space: RowSpace):
        self.kb = kb
        self.b = kb.b
        self.space = space
        self.insts = kb.fused.instructions
        self.rows, self.row_size = space.rows, space.row_size
        self.dims = space.dims
        self.deferred: list[int] = []
        self._schedule()

    # ------------------------------------------------------------------ analysis

    def _row_like(self, inst: Instruction) -> bool:
        """Whether ``inst`` (a reduce-dependent instruction) holds one value per row."""
        return inst.shape.size == self.rows and (inst.dims != self.dims or self.row_size == 1)

    def _schedule(self) -> None:
        dep = self.space.dependent
        after: dict[int, int] = {}  # passes that must run before the value is known
        self.pass_of: dict[int, int] = {}
        for inst in self.insts:
            if id(inst) not in dep:
                continue
            a = max((after.get(id(o), 0) for o in inst.operands), default=0)
            if inst.opcode == "reduce":
                self.pass_of[id(inst)] = a
                after[id(inst)] = a + 1
            else:
                after[id(inst)] = a
        self.after = after
        self.n_passes = max(self.pass_of.values()) + 1
        self.row_insts = [i for i in self.insts if id(i) in dep and i.opcode != "reduce"
                          and self._row_like(i)]
        outs = self.kb.outputs
        self.row_outs = [k for k, (inst, _) in enumerate(outs)
                         if inst.opcode == "reduce" or self._row_like(inst)]
        self.full_outs = [k for k in range(len(outs)) if k not in self.row_outs]
        self.caches = self._choose_caches() if self.row_size > 1 else {}
        self.stream = self._streams()
        self.scratch: dict[int, ir.Value] = {}

    def _streams(self) -> bool:
        """Whether the full outputs are written through row buffers with non-temporal
        stores (``stream_lines``; a third of a softmax's memory traffic was reading the
        output's lines before writing them): at least ``ROW_STREAM_MIN_BYTES`` of real
        outputs of the full shape, rows of whole cache lines (aligned rows stay aligned) of
        at most ``STREAM_ROW_MAX_BYTES`` (a stack buffer each)."""
        outs = [self.kb.outputs[k][0] for k in self.full_outs]
        if not outs or self.row_size < 2 or any(
                o.dims != self.dims or not streamable(o.dtype) for o in outs):
            return False
        row_bytes = [self.row_size * o.dtype.itemsize for o in outs]
        return (all(n % CACHE_LINE == 0 and n <= STREAM_ROW_MAX_BYTES for n in row_bytes)
                and sum(row_bytes) * self.rows >= ROW_STREAM_MIN_BYTES)

    def _pass_roots(self, p: int) -> list[Instruction]:
        if p < self.n_passes:
            return [i.operands[0] for i in self.insts
                    if i.opcode == "reduce" and self.pass_of[id(i)] == p]
        return [self.kb.outputs[k][0] for k in self.full_outs]

    def _choose_caches(self) -> dict[int, tuple[int, int]]:
        """id(inst) -> (first pass, output index) for the values stored for later passes."""
        users = self.kb.fused.users()
        root = self.kb.fused.root
        # Instructions only ever evaluated at the element a pass is at (so a buffer holding
        # the current row's values can stand in for them).
        current: set[int] = set()
        for inst in reversed(self.insts):
            if inst.shape.is_tuple or inst.dims != self.dims or inst.opcode not in ELEMENTWISE:
                continue
            us = users.get(inst, ())
            if all(u is root and u.opcode == "tuple" or u.opcode == "reduce"
                   and u.operands[0] is inst or id(u) in current for u in us) and (
                    us or inst is root):
                current.add(id(inst))
        passes: dict[int, list[int]] = {}
        for p in range(self.n_passes + 1):
            seen: set[int] = set()
            stack = list(self._pass_roots(p))
            while stack:
                inst = stack.pop()
                if id(inst) in seen or id(inst) not in current:
                    continue
                seen.add(id(inst))
                passes.setdefault(id(inst), []).append(p)
                stack.extend(inst.operands)
        free = {k: self.kb.outputs[k][0].dtype for k in self.full_outs}
        chosen = {}
        for inst in reversed(self.insts):
            ps = passes.get(id(inst), [])
            if inst.opcode not in EXPENSIVE_ELEMENTWISE or len(ps) < 2:
                continue
            k = next((k for k, dt in free.items() if dt == inst.dtype), None)
            if k is not None:
                del free[k]
                chosen[id(inst)] = (min(ps), k)
        return chosen

    # ------------------------------------------------------------------ emission

    def build(self, lo, hi) -> KernelInfo:
        kb = self.kb
        lo, hi = kb._clamp_range(lo, hi, self.rows)
        self.deferred = self._deferred_outs()
        if self.stream:
            for k in self.full_outs:
                ty = S.memory_type(kb.outputs[k][0].dtype)
                row = kb.loops.alloca(ir.ArrayType(ty, self.row_size), align=CACHE_LINE)
                with self.b.goto_block(kb.loops.entry_block):
                    self.b.position_after(row)
                    self.scratch[k] = self.b.bitcast(row, ty.as_pointer())
        if self.deferred:
            self._blocked_rows(lo, hi)
        else:
            kb.loops.loop(lo, hi, self._row, name="row")
        if self.stream:
            fence_streams(self.b)
        return KernelInfo(kb.name, self.rows, max(self.row_size, 1), ())

    def _deferred_outs(self) -> list[int]:
        """The row outputs computed from the row's reduce results (``tanh(A @ y)``,
        ``exp(sum * c)``) when they run after each block of rows, in a loop of their own that
        LLVM vectorizes across rows; [] where they stay in the row loop. Computed there, each
        row's scalar ``tanh`` cost more than its 64-element sum (a 64x64 matvec + tanh:
        1.2 us, 0.3 without the tanh)."""
        outs = self.kb.outputs
        deferred = [k for k in self.row_outs if outs[k][0].opcode != "reduce"]
        reduces = [i for i in self.insts if i.opcode == "reduce"]
        if any(len(r.operands) != 2 or r.dtype.kind == "c" for r in reduces) or \
                any(outs[k][0].dtype.kind == "c" for k in deferred):
            return []
        return deferred

    def _blocked_rows(self, lo, hi) -> None:
        """Rows in blocks of ``ROW_BLOCK``: the row loop over a block keeps each row's reduce
        results in a stack array, then a loop over the block computes the deferred outputs
        from them (the same code per row, so the same bits as computing them in the row
        loop)."""
        kb, b = self.kb, self.b
        reduces = [i for i in self.insts if i.opcode == "reduce"]
        self.stash = {id(r): kb.loops.alloca(ir.ArrayType(S.value_type(r.dtype), ROW_BLOCK),
                                             align=64) for r in reduces}

        def block(blk):
            start = b.add(lo, b.mul(blk, _c(ROW_BLOCK), flags=("nsw", "nuw")),
                          flags=("nsw", "nuw"))
            end = b.add(start, _c(ROW_BLOCK), flags=("nsw", "nuw"))
            end = b.select(b.icmp_signed(">", end, hi), hi, end)
            self.block_start = start
            kb.loops.loop(start, end, self._row, name="row")

            def epilogue(row):
                at = b.sub(row, start, flags=("nsw", "nuw"))
                values = {id(r): b.load(self._stash_slot(r, at)) for r in reduces}
                em = self._emitter(values)
                for k in self.deferred:
                    inst = kb.outputs[k][0]
                    index = Index(inst.dims, linear=row)
                    kb._store(k, em.emit(inst, index), index)
            kb.loops.loop(start, end, epilogue, name="rowout")

        count = b.sdiv(b.add(b.sub(hi, lo), _c(ROW_BLOCK - 1)), _c(ROW_BLOCK))
        kb.loops.loop(_c(0), count, block, name="rblk", unroll=False, vectorize=False)

    def _stash_slot(self, r: Instruction, at) -> ir.Value:
        return self.b.gep(self.stash[id(r)], [_c(0), at], inbounds=True)

    def _emitter(self, values, cache_ptrs=None) -> RowEmitter:
        kb = self.kb
        return RowEmitter(self.b, kb.param_ptrs, kb.module_consts, kb.budget, values,
                           cache_ptrs or {})

    def _row(self, row) -> None:
        b = self.b
        n_outer = len(self.dims) - self.space.n_inner
        outer = Index(self.dims[:n_outer], linear=row).get_multi(b)
        base = b.mul(row, _c(self.row_size), flags=("nsw", "nuw"))
        values: dict[int, ir.Value] = {}
        for p in range(self.n_passes + 1):
            if p == 1 and self.stream:
                self._prefetch_next_row(base)
            self._row_values(values, row, p)
            stores = [(inst, self.caches[id(inst)][1]) for inst in self.insts
                      if id(inst) in self.caches and self.caches[id(inst)][0] == p]
            loads = {i: self._full_buffer(k, base) for i, (first, k) in self.caches.items()
                     if first < p}
            if p < self.n_passes:
                reduces = [i for i in self.insts
                           if i.opcode == "reduce" and self.pass_of[id(i)] == p]
                self._pass(values, outer, base, reduces, stores, loads, [])
            elif self.full_outs:
                self._pass(values, outer, base, [], stores, loads, self.full_outs)
        if self.stream:
            for k in self.full_outs:
                dtype = self.kb.outputs[k][0].dtype
                stream_lines(self.b, self.kb.loops, self.scratch[k],
                             self.b.gep(self.kb.out_ptrs[k], [base], inbounds=True),
                             _c(self.row_size * dtype.itemsize // CACHE_LINE), dtype)
        if self.deferred:
            at = b.sub(row, self.block_start, flags=("nsw", "nuw"))
            for r in self.insts:
                if r.opcode == "reduce":
                    b.store(values[id(r)], self._stash_slot(r, at))
        em = self._emitter(values)
        for k in self.row_outs:
            if k in self.deferred:
                continue
            inst = self.kb.outputs[k][0]
            index = Index(inst.dims, linear=row)
            self.kb._store(k, em.emit(inst, index), index)

    def _prefetch_next_row(self, base) -> None:
        """Asks for the next row of every full-shape parameter, a cache line at a time, while
        this row's later passes compute from the caches."""
        b, kb = self.b, self.kb
        fn = _intrinsic(kb.module, "llvm.prefetch.p0i8", ir.FunctionType(
            ir.VoidType(), [S.I8.as_pointer(), S.I32, S.I32, S.I32]))
        for p in kb.fused.parameters:
            if p.dims != self.dims or not streamable(p.dtype):
                continue
            row_bytes = self.row_size * p.dtype.itemsize
            start = b.bitcast(b.gep(kb.param_ptrs[id(p)], [b.add(base, _c(self.row_size))]),
                              S.I8.as_pointer())

            def line(i, start=start):
                b.call(fn, [b.gep(start, [b.mul(i, _c(CACHE_LINE))]), ir.Constant(S.I32, 0),
                            ir.Constant(S.I32, 3), ir.Constant(S.I32, 1)])
            kb.loops.loop(_c(0), _c(row_bytes // CACHE_LINE), line, name="prefetch",
                          vectorize=False)

    def _full_buffer(self, k: int, base) -> tuple:
        """Where the passes over the row at ``base`` put full output ``k`` (and a value
        cached in its place): ``(pointer, row_base)`` as ``RowEmitter.cache_ptrs`` has it."""
        if self.stream:
            return self.scratch[k], base
        return self.kb.out_ptrs[k], None

    def _row_values(self, values, row, p) -> None:
        """Computes the row values that the reduces of passes before ``p`` determine."""
        em = self._emitter(values)
        for inst in self.row_insts:
            if id(inst) not in values and self.after[id(inst)] <= p:
                values[id(inst)] = em.emit(inst, Index(inst.dims, linear=row))

    def _full_index(self, outer, base, j) -> Index:
        lin = self.b.add(base, j, flags=("nsw", "nuw"))
        if self.space.n_inner == 1:
            return Index(self.dims, multi=tuple(outer) + (j,), linear=lin)
        return Index(self.dims, linear=lin)

    def _pass(self, values, outer, base, reduces, stores, loads, outs) -> None:
        """One loop over the row: accumulates ``reduces`` (their results become row values),
        stores the cached values ``stores`` and computes the full outputs ``outs``."""
        kb, b = self.kb, self.b
        init_em = self._emitter(values)
        accs = {}
        for r in reduces:
            accs[id(r)] = [kb._accumulator(r, init_em.emit(r.operands[1], _scalar_index()))]
        float_sums = [r for r in reduces if simple_reducer(r.calls[0]) == "add"
                      and S.is_float(r.dtype)]
        lanes = LaneSums(kb, float_sums, self.row_size, exact=True)

        def element(j):
            index = self._full_index(outer, base, j)
            em = self._emitter(values, loads)
            for r in reduces:
                kb._combine(r, lanes.current.get(id(r)) or accs[id(r)],
                            [em.emit(r.operands[0], index)])
            results = [(em.emit(inst, index), k, inst.dtype) for inst, k in stores]
            results += [(em.emit(kb.outputs[k][0], index), k, kb.outputs[k][0].dtype)
                        for k in outs]
            for value, k, dt in results:  # every load of this element came first
                ptr, row_base = self._full_buffer(k, base)
                at = j if row_base is not None else index.get_linear(b)
                C.store(b, value, b.gep(ptr, [at], inbounds=True), dt)

        if float_sums:
            lanes.clear()
            lanes.accumulate(_c(0), _c(self.row_size), element)
        else:
            # A short row's pass stays a loop for the loop vectorizer: unrolled first,
            # softmax's chain of maximums over rows of 32 or 64 stayed scalar (4x slower), and
            # layernorm's last pass over rows of 16 ran at half speed. (Longer rows are not
            # unrolled whole, and partly unrolled they run faster.)
            kb.loops.loop(_c(0), _c(self.row_size), element, name="r",
                          unroll=self.row_size >= SHORT_SUM_MAX)
        for r in float_sums:
            total = b.fadd(kb._widen(b.load(accs[id(r)][0])), lanes.total(r))
            b.store(kb._narrow(total, r.dtype), accs[id(r)][0])
        for r in reduces:
            values[id(r)] = kb._from_accumulator(r, b.load(accs[id(r)][0]))
