"""Short-row kernels: row fusions over rows of a few elements (softmax or logsumexp over 10
classes), vectorized across rows instead of along them.

A row kernel (``row_kernel.RowKernel``) makes its passes along each row; along 10 elements
that leaves a vector loop barely entered and a scalar remainder (logsumexp over (200000, 10)
spent ~260 instructions a row). Here the row's elements are unrolled into straight-line code
(every pass, one after the other, with the values of earlier passes in registers) and the
loop over ``lanes`` consecutive rows is the one LLVM vectorizes, a row per vector lane:

- a parameter read at the row space's own positions (``x[row, j]``) would be a strided load
  per lane; instead the block's ``lanes * row_size`` contiguous elements are loaded as
  ``row_size`` vectors and rearranged by shuffles into one vector per column, kept in a
  stack buffer that the lane loop reads contiguously (``_Stage``);
- a parameter broadcast along some of the row dims, keeping whole rows (``b[None, :, :]``
  and ``a[:, None, :]`` of pairwise distances), would be a gather per lane too; a block reads
  consecutive rows of it, copied the same way, or one row, splat across the lanes
  (``broadcast_plan``), unless the block wraps or crosses a row: then it is copied element
  by element;
- full-shape outputs are written to such a buffer and rearranged back the same way;
- row values (reduce results) are read and written at one position per row: contiguous.

Rows past the last whole block run the same straight-line code one row at a time, so a row's
result does not depend on where the caller's range starts. Float sums add in the order of
``kernel_gen.LaneSums`` over a row this short (each element in its own lane, lanes widened to
float64, a fixed pairwise tree), so results are those of the looped row kernel, bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from ember.backends.cpu import complex_ops as C
from ember.backends.cpu import scalar_ops as S
from ember.backends.cpu.kernel_gen import Index, KernelInfo, _c, _scalar_index, simple_reducer
from ember.backends.cpu.row_kernel import RowEmitter, RowKernel
from ember.compiler.passes.fusion import RowSpace

# Rows of at most this many elements are vectorized across rows (logsumexp over (200000, 10)
# float32: 4.4 -> 0.9 ms; rows of 16 fill a 16-lane vector along the row already); up to
# ``SHORT_ROW_MAX_REDUCED`` when every output has one value per row (nothing to rearrange
# back: logsumexp over rows of 24, ~180 instructions a row on a chain of dependent steps,
# 1.4 -> 0.9 ms).
SHORT_ROW_MAX = 15
SHORT_ROW_MAX_REDUCED = 32
SHORT_ROW_MIN = 2
# Fusions of fewer elements keep the looped kernel: the shuffles that rearrange a block cost
# LLVM 10-20 ms to compile, more than small arrays can win back.
SHORT_ROW_MIN_WORK = 1 << 14


def _vector_bytes() -> int:
    from ember.backends.cpu.llvm_support import host_has_feature
    return 64 if host_has_feature("avx512f") else 32


def short_row_lanes(fused, space: RowSpace) -> int | None:
    """The rows per vector for a short-row kernel of ``fused``, or None where the looped row
    kernel runs it (long rows, fewer rows than lanes, complex values)."""
    from ember.backends.cpu.kernel_gen import _outputs

    full = any(inst.opcode != "reduce" and inst.shape.size != space.rows
               for inst, _ in _outputs(fused))
    longest = SHORT_ROW_MAX if full else SHORT_ROW_MAX_REDUCED
    if not SHORT_ROW_MIN <= space.row_size <= longest:
        return None
    if space.rows * space.row_size < SHORT_ROW_MIN_WORK:
        return None
    sizes = []
    for inst in fused.instructions:
        shapes = inst.shape.tuple_shapes if inst.shape.is_tuple else (inst.shape,)
        for shape in shapes:
            if shape.dtype.kind == "c":
                return None
            sizes.append(np.dtype(shape.dtype).itemsize)
    lanes = _vector_bytes() // max(4, *sizes)
    return lanes if space.rows >= lanes else None


def short_reduction_space(fused) -> RowSpace | None:
    """The row space of a reduction fusion (no reduce result consumed) over trailing rows
    of ``ROW_VECTOR_MIN`` to ``SHORT_ROW_MAX`` elements, for ``ShortRowKernel``; None
    otherwise. (Shorter rows are vectorized across rows by LLVM itself: (400000, 5).sum(1)
    0.35 ms so, 0.47 ms here; (200000, 10).sum(1) 0.71 ms along the rows, 0.44 here.)"""
    from ember.backends.cpu.kernel_gen import ROW_VECTOR_MIN, _outputs
    from ember.compiler.passes.fusion import row_space
    outputs = [inst for inst, _ in _outputs(fused)]
    insts = [i for i in fused.instructions if i.opcode != "tuple"]
    space = row_space(insts, outputs)
    if space is None or not ROW_VECTOR_MIN <= space.row_size <= SHORT_ROW_MAX:
        return None
    return space


def broadcast_plan(inst, dims, n_inner: int) -> tuple[str, int] | None:
    """How a block of consecutive rows reads ``inst``, a broadcast of a parameter over the
    row space ``dims`` that keeps each row whole (its trailing dims are the row's, its others
    some of the dims indexing rows): ``("rows", p)`` when the parameter's row for row ``r``
    is ``r % p`` (it keeps trailing row dims: a block reads consecutive parameter rows, a
    block of contiguous memory, unless it wraps), ``("row", q)`` when it is ``r // q`` (it
    keeps leading ones: a block reads one row, unless it crosses into the next); None for
    any other read. Pairwise distances ``a[:, None, :] - b[None, :, :]`` read ``b`` so and
    ``a`` so; lane by lane they were gathers (two per element and block)."""
    if inst.opcode != "broadcast_in_dim" or tuple(inst.dims) != tuple(dims):
        return None
    param = inst.operands[0]
    m = param.shape.rank - n_inner  # (the parameter's dims that index rows)
    if param.opcode != "parameter" or m < 0 or not param.shape.rank:
        return None
    n_outer = len(dims) - n_inner
    bdims = list(inst.attrs["broadcast_dimensions"])
    if bdims[m:] != list(range(n_outer, len(dims))) or \
            list(param.dims) != [dims[d] for d in bdims]:
        return None
    if m and bdims[:m] == list(range(n_outer - m, n_outer)):
        return "rows", math.prod(param.dims[:m])
    if bdims[:m] == list(range(m)):
        return "row", math.prod(dims[m:n_outer])
    return None


def _gather_lanes(b: ir.IRBuilder, sources: list, picks: list) -> ir.Value:
    """A vector whose lane ``t`` is lane ``picks[t][1]`` of ``sources[picks[t][0]]`` (vectors
    of one type and length): a chain of two-source shuffles, one per source after the
    first (each one ``vpermt2ps``-like instruction on AVX-512)."""
    n = len(picks)
    by_source: dict[int, list] = {}
    for t, (k, lane) in enumerate(picks):
        by_source.setdefault(k, []).append((t, lane))
    order = sorted(by_source)

    def mask(values):
        return ir.Constant(ir.VectorType(S.I32, n), [ir.Constant(S.I32, v) for v in values])

    first = sources[order[0]]
    if len(order) == 1:
        return b.shuffle_vector(first, first, mask([lane for _, lane in picks]))
    m = list(range(n))
    for t, lane in by_source[order[0]]:
        m[t] = lane
    for t, lane in by_source[order[1]]:
        m[t] = n + lane
    acc = b.shuffle_vector(first, sources[order[1]], mask(m))
    for k in order[2:]:
        m = list(range(n))
        for t, lane in by_source[k]:
            m[t] = n + lane
        acc = b.shuffle_vector(acc, sources[k], mask(m))
    return acc


def _square_transpose(b: ir.IRBuilder, rows: list) -> list:
    """The columns of the square matrix whose rows are the vectors ``rows`` (as many as
    their lanes, a power of two): ``log2(n)`` rounds of ``n`` two-source shuffles, round
    ``h`` exchanging bit ``h`` of the row and the column index."""
    n = len(rows)

    def mask(values):
        return ir.Constant(ir.VectorType(S.I32, n), [ir.Constant(S.I32, v) for v in values])

    h = n // 2
    while h:
        low = mask([k if k & h == 0 else n + k - h for k in range(n)])
        high = mask([k + h if k & h == 0 else n + k for k in range(n)])
        out = list(rows)
        for i in range(n):
            if i & h == 0:
                out[i] = b.shuffle_vector(rows[i], rows[i | h], low)
                out[i | h] = b.shuffle_vector(rows[i], rows[i | h], high)
        rows = out
        h //= 2
    return rows


def _splat(b: ir.IRBuilder, value: ir.Value, lanes: int) -> ir.Value:
    """A ``lanes``-element vector of ``value`` in every lane."""
    vec = ir.VectorType(value.type, lanes)
    one = b.insert_element(ir.Constant(vec, None), value, ir.Constant(S.I32, 0))
    return b.shuffle_vector(one, one, ir.Constant(ir.VectorType(S.I32, lanes), [0] * lanes))


def _vector_at(b: ir.IRBuilder, ptr, dt, lanes: int, offset: int) -> ir.Value:
    """A pointer to the ``lanes``-element vector at element ``offset`` of ``ptr``."""
    vec = ir.VectorType(S.memory_type(dt), lanes)
    return b.bitcast(b.gep(ptr, [_c(offset)], inbounds=True), vec.as_pointer())


def load_columns(b: ir.IRBuilder, start, dt, n: int, lanes: int) -> list:
    """The ``n`` column vectors of the ``lanes`` rows of ``n`` elements at ``start`` (lane
    ``t`` of column ``j``: element ``j`` of row ``t``), reading nothing past those rows."""
    align = np.dtype(dt).itemsize
    if n < lanes // 2:
        vectors = [b.load(_vector_at(b, start, dt, lanes, k * lanes), align=align)
                   for k in range(n)]
        return [_gather_lanes(b, vectors, [divmod(lane * n + j, lanes)
                                           for lane in range(lanes)]) for j in range(n)]
    # Rows of more than half a vector: a vector per row (two for rows longer than a
    # vector, each holding ``lanes`` columns), transposed as squares.
    last = lanes * n - lanes  # (the block's last whole vector)
    tail = None
    columns = []
    for first in range(0, n, lanes):
        rows = []
        for row in range(lanes):
            offset = row * n + first
            if offset <= last:
                rows.append(b.load(_vector_at(b, start, dt, lanes, offset), align=align))
                continue
            if tail is None:
                tail = b.load(_vector_at(b, start, dt, lanes, last), align=align)
            shift = offset - last  # (the row's elements from lane ``shift`` of ``tail``)
            rows.append(_gather_lanes(b, [tail], [(0, min(shift + k, lanes - 1))
                                                  for k in range(lanes)]))
        columns += _square_transpose(b, rows)[:n - first]
    return columns


def store_columns(b: ir.IRBuilder, start, dt, n: int, lanes: int, columns: list) -> None:
    """Stores the ``n`` column vectors ``columns`` as the ``lanes`` rows of ``n`` elements
    at ``start``, writing nothing past those rows: transposed as one square for rows of half
    a vector to a vector, else by chains of shuffles."""
    align = np.dtype(dt).itemsize
    if not lanes // 2 <= n <= lanes:
        for v in range(n):  # lane t of vector v: element v * lanes + t = row l, column j
            picks = [divmod(v * lanes + t, n)[::-1] for t in range(lanes)]
            b.store(_gather_lanes(b, columns, picks),
                    _vector_at(b, start, dt, lanes, v * lanes), align=align)
        return
    filler = ir.Constant(columns[0].type, None)
    rows = _square_transpose(b, columns + [filler] * (lanes - n))
    last = lanes * n - lanes
    # Row vectors stored in order, each one's lanes past the row overwritten by the
    # next; the rows that would reach past the block go into its last vector instead.
    for row in range(lanes):
        if row * n <= last:
            b.store(rows[row], _vector_at(b, start, dt, lanes, row * n), align=align)
    picks = [divmod(last + t, n) for t in range(lanes)]
    b.store(_gather_lanes(b, rows, picks), _vector_at(b, start, dt, lanes, last),
            align=align)


class _Stage:
    """The stack buffers of one block of ``lanes`` rows: a column-major copy (column ``j`` at
    ``j * lanes``) of each parameter read at the row space's positions, made on first use
    by code placed before the lane loop; and one per full-shape output, rearranged into
    the output after the loop.

    The block's ``lanes * n`` elements (``n`` a row) are rearranged in registers: rows of
    at least half a vector are loaded one vector per row (per ``lanes`` columns of longer
    rows; the last rows from the block's last vector, so nothing past the block is read)
    and transposed as squares (``_square_transpose``: 64 shuffles for 16 lanes); shorter
    rows are loaded as ``n`` consecutive vectors and each column gathered from the vectors
    holding its elements (``_gather_lanes``: ``n - 1`` shuffles at most). Outputs (rows of
    at most ``SHORT_ROW_MAX``) are stored by the same two methods in reverse."""

    def __init__(self, kernel: ShortRowKernel, row0):
        self.kernel = kernel
        self.row0 = row0
        self.inputs: dict[int, tuple] = {}  # id(ptr) -> (ptr, buffer, dtype)
        self.broadcasts: dict[int, tuple] = {}  # id(inst) -> (ptr, buffer, dtype, plan)
        self.outputs: dict[int, ir.Value] = {}

    def _buffer(self, dt) -> ir.Value:
        k = self.kernel
        return k.kb.loops.alloca(ir.ArrayType(S.memory_type(dt), k.row_size * k.lanes),
                                 align=64)

    def _block_start(self, b, ptr):
        return b.gep(ptr, [b.mul(self.row0, _c(self.kernel.row_size), flags=("nsw", "nuw"))],
                     inbounds=True)

    def _vector_at(self, b, ptr, dt, offset):
        return _vector_at(b, ptr, dt, self.kernel.lanes, offset)

    def input(self, ptr, dt) -> ir.Value:
        """The column-major copy of the block of the parameter at ``ptr`` (filled by
        ``read_inputs``)."""
        entry = self.inputs.get(id(ptr))
        if entry is None:
            entry = self.inputs[id(ptr)] = (ptr, self._buffer(dt), dt)
        return entry[1]

    def broadcast(self, inst, ptr, plan) -> ir.Value:
        """The column-major copy of what the block reads of ``inst``, a broadcast of the
        parameter at ``ptr`` read as ``plan`` says (``broadcast_plan``; filled by
        ``read_inputs``)."""
        entry = self.broadcasts.get(id(inst))
        if entry is None:
            dt = inst.dtype
            entry = self.broadcasts[id(inst)] = (ptr, self._buffer(dt), dt, plan)
        return entry[1]

    def read_inputs(self, b: ir.IRBuilder) -> None:
        """Fills the parameters' copies (before the lane loop)."""
        lanes, n = self.kernel.lanes, self.kernel.row_size
        for ptr, buf, dt in self.inputs.values():
            self._store_columns(b, buf, dt, load_columns(
                b, self._block_start(b, ptr), dt, n, lanes))
        for ptr, buf, dt, (kind, size) in self.broadcasts.values():
            first = self._param_row(b, kind, size, self.row0)
            last = self._param_row(b, kind, size, b.add(self.row0, _c(lanes - 1)))
            # (consecutive rows, or one row: else the block wraps or crosses a row)
            fast = b.icmp_signed("==", b.sub(last, first), _c(lanes - 1 if kind == "rows" else 0))
            with b.if_else(fast) as (then, otherwise):
                with then:
                    start = b.gep(ptr, [b.mul(first, _c(n))], inbounds=True)
                    if kind == "rows":
                        columns = load_columns(b, start, dt, n, lanes)
                    else:
                        columns = [_splat(b, b.load(b.gep(start, [_c(j)], inbounds=True)),
                                          lanes) for j in range(n)]
                    self._store_columns(b, buf, dt, columns)
                with otherwise:
                    self._copy_rows(b, ptr, buf, kind, size)

    def _param_row(self, b, kind, size, row):
        """The row of a broadcast parameter that row ``row`` of the row space reads."""
        return b.srem(row, _c(size)) if kind == "rows" else b.sdiv(row, _c(size))

    def _copy_rows(self, b, ptr, buf, kind, size) -> None:
        """Fills ``buf`` element by element: lane ``t`` of column ``j`` from element ``j``
        of the parameter row that row ``row0 + t`` reads."""
        loops, lanes, n = self.kernel.kb.loops, self.kernel.lanes, self.kernel.row_size

        def lane(t):
            src = b.mul(self._param_row(b, kind, size, b.add(self.row0, t)), _c(n))

            def element(j):
                value = b.load(b.gep(ptr, [b.add(src, j)], inbounds=True))
                b.store(value, b.gep(buf, [_c(0), b.add(b.mul(j, _c(lanes)), t)],
                                     inbounds=True))
            loops.loop(_c(0), _c(n), element, name="bcast.j", vectorize=False)
        loops.loop(_c(0), _c(lanes), lane, name="bcast.t", vectorize=False)

    def _store_columns(self, b, buf, dt, columns) -> None:
        lanes, align = self.kernel.lanes, np.dtype(dt).itemsize
        for j, column in enumerate(columns):
            b.store(column, self._vector_at(b, self._slot(b, buf), dt, j * lanes), align=align)

    def _slot(self, b, buffer):
        return b.gep(buffer, [_c(0), _c(0)], inbounds=True)

    def output(self, k_out: int, dt) -> ir.Value:
        buf = self.outputs.get(k_out)
        if buf is None:
            buf = self.outputs[k_out] = self._buffer(dt)
        return buf

    def write_outputs(self, b: ir.IRBuilder) -> None:
        """Rearranges each staged output's columns into its block of rows (after the lane
        loop)."""
        kb, n, lanes = self.kernel.kb, self.kernel.row_size, self.kernel.lanes
        for k_out, buf in self.outputs.items():
            dt = kb.outputs[k_out][0].dtype
            align = np.dtype(dt).itemsize
            columns = [b.load(self._vector_at(b, self._slot(b, buf), dt, j * lanes),
                              align=align) for j in range(n)]
            store_columns(b, self._block_start(b, kb.out_ptrs[k_out]), dt, n, lanes, columns)


class _ShortRowEmitter(RowEmitter):
    """A row emitter that, in a block's lane loop, reads parameters at the row space's
    positions from the block's column-major copies."""

    def __init__(self, kernel: ShortRowKernel, values, positions, stage, lane):
        kb = kernel.kb
        super().__init__(kernel.b, kb.param_ptrs, kb.module_consts, kb.budget, values, {})
        self.kernel = kernel
        self.positions = positions  # id(linear index of column j) -> j
        self.stage = stage
        self.lane = lane

    def _emit(self, inst, index):
        plan = self.kernel.broadcast_plans.get(id(inst))
        j = self.positions.get(id(index.linear)) if plan is not None else None
        if j is None:
            return super()._emit(inst, index)
        param = inst.operands[0]
        buf = self.stage.broadcast(inst, self.param_ptrs[id(param)], plan)
        b = self.b
        slot = b.gep(buf, [_c(0), b.add(_c(j * self.kernel.lanes), self.lane)], inbounds=True)
        return C.load(b, slot, inst.dtype)

    def _load(self, ptr, inst, index):
        if inst.opcode == "parameter" and inst.shape.rank:
            j = self.positions.get(id(index.linear))
            if j is not None:
                buf = self.stage.input(ptr, inst.dtype)
                b = self.b
                slot = b.gep(buf, [_c(0), b.add(_c(j * self.kernel.lanes), self.lane)],
                             inbounds=True)
                return C.load(b, slot, inst.dtype)
        return super()._load(ptr, inst, index)


class ShortRowKernel(RowKernel):
    """The kernel of a row fusion over short rows (see the module docstring): blocks of
    ``lanes`` rows, each one loop vectorized across its rows; then the remaining rows."""

    def __init__(self, kb, space: RowSpace, lanes: int):
        super().__init__(kb, space)
        self.caches = {}  # (every pass of a row is in registers)
        self.lanes = lanes
        self.broadcast_plans = {}  # id(broadcast inst) -> ``broadcast_plan``
        for inst in kb.fused.instructions:
            plan = broadcast_plan(inst, self.dims, space.n_inner)
            if plan is not None:
                self.broadcast_plans[id(inst)] = plan

    def build(self, lo, hi) -> KernelInfo:
        kb, b, lanes = self.kb, self.b, self.lanes
        lo, hi = kb._clamp_range(lo, hi, self.rows)
        count = b.select(b.icmp_signed("<", lo, hi), b.sub(hi, lo), _c(0))
        blocks = b.udiv(b.add(count, _c(lanes - 1)), _c(lanes))
        # The last block ends at ``hi`` (at ``lanes`` when ``hi`` is smaller), overlapping
        # rows that an earlier block (or another call: there are at least ``lanes`` rows)
        # computes too: the same code gives them the same values, which are written again.
        last = b.sub(hi, _c(lanes))
        last = b.select(b.icmp_signed("<", last, _c(0)), _c(0), last)

        def block(k):
            row0 = b.add(lo, b.mul(k, _c(lanes), flags=("nsw", "nuw")), flags=("nsw", "nuw"))
            row0 = b.select(b.icmp_signed(">", row0, last), last, row0)
            stage = _Stage(self, row0)
            # The lane loop first, then the copies it reads in a block before it.
            copies, pre = b.append_basic_block("copies"), b.append_basic_block("lanes.pre")
            b.branch(copies)
            b.position_at_end(pre)
            kb.loops.loop(_c(0), _c(lanes), lambda lane: self._row_code(
                b.add(row0, lane, flags=("nsw", "nuw")), stage, lane), name="lane",
                width=lanes)
            stage.write_outputs(b)
            with b.goto_block(copies):
                stage.read_inputs(b)
                b.branch(pre)

        kb.loops.loop(_c(0), blocks, block, name="blk", unroll=False, vectorize=False)
        return KernelInfo(kb.name, self.rows, self.row_size, ())

    def _row_code(self, row, stage: _Stage, lane) -> None:
        """Straight-line code for one row: its passes with the row's elements unrolled."""
        kb, b = self.kb, self.b
        n_outer = len(self.dims) - self.space.n_inner
        outer = Index(self.dims[:n_outer], linear=row).get_multi(b)
        base = b.mul(row, _c(self.row_size), flags=("nsw", "nuw"))
        columns = [self._full_index(outer, base, _c(j)) for j in range(self.row_size)]
        positions = {id(ix.linear): j for j, ix in enumerate(columns)}
        values: dict[int, ir.Value] = {}
        em = _ShortRowEmitter(self, values, positions, stage, lane)
        for p in range(self.n_passes + 1):
            for inst in self.row_insts:
                if id(inst) not in values and self.after[id(inst)] <= p:
                    values[id(inst)] = em.emit(inst, Index(inst.dims, linear=row))
            if p < self.n_passes:
                for r in self.insts:
                    if r.opcode == "reduce" and self.pass_of[id(r)] == p:
                        values[id(r)] = self._reduce(em, r, columns)
                continue
            for k in self.full_outs:
                inst = self.kb.outputs[k][0]
                for j, ix in enumerate(columns):
                    slot = b.gep(stage.output(k, inst.dtype),
                                 [_c(0), b.add(_c(j * self.lanes), lane)], inbounds=True)
                    C.store(b, em.emit(inst, ix), slot, inst.dtype)
        for k in self.row_outs:
            inst = self.kb.outputs[k][0]
            index = Index(inst.dims, linear=row)
            kb._store(k, em.emit(inst, index), index)

    def _reduce(self, em, r, columns) -> ir.Value:
        """Reduce ``r`` over one row's elements, combined as the looped row kernel does."""
        kb, b = self.kb, self.b
        init = em.emit(r.operands[1], _scalar_index())
        elements = [em.emit(r.operands[0], ix) for ix in columns]
        if simple_reducer(r.calls[0]) == "add" and S.is_float(r.dtype):
            lanes = self._lane_sums(elements, r.dtype)
            while len(lanes) > 1:
                half = (len(lanes) + 1) // 2
                lanes = [b.fadd(lanes[i], lanes[i + half]) if i + half < len(lanes)
                         else lanes[i] for i in range(half)]
            return kb._narrow(b.fadd(kb._widen(init), lanes[0]), r.dtype)
        acc = kb._accumulator(r, init)
        for v in elements:
            kb._combine(r, [acc], [v])
        return kb._from_accumulator(r, b.load(acc))

    def _lane_sums(self, elements, dt) -> list:
        """The float64 lanes of ``kernel_gen.LaneSums`` over one row (one block, exact):
        element ``j`` of the whole chunks adds into narrow lane ``j % lanes`` in order, the
        rest into tail lanes, and each lane widens to float64 (plus its tail lane)."""
        from ember.backends.cpu.kernel_gen import lane_count

        b, kb = self.b, self.kb
        n = len(elements)
        count = lane_count(n)
        full = n // count * count
        zero = ir.Constant(S.value_type(dt), 0.0)

        def add(acc, v):
            return S.round_low_float(b, b.fadd(acc, v), dt)
        narrow = [zero] * count
        for j in range(full):
            narrow[j % count] = add(narrow[j % count], elements[j])
        lanes = [kb._widen(v) for v in narrow]
        if n % count:
            tail = [add(zero, v) for v in elements[full:]]
            tail += [zero] * (count - len(tail))
            lanes = [b.fadd(w, kb._widen(t)) for w, t in zip(lanes, tail)]
        return lanes
