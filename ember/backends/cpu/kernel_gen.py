"""One LLVM function per fusion: loops over the fusion's iteration space, elements computed by
walking the fused computation (an "elemental" emitter, as XLA's), nothing materialized.

A kernel has the signature ``void kernel(i8** buffers, i64 lo, i64 hi)``: ``buffers`` holds
the fusion's operands, then its output leaves; ``[lo, hi)`` is the part of the *parallel
dimension* this call computes (callers split it across threads; ``KernelInfo`` says what it
is). Shape ops inside a fusion (broadcast, reshape, transpose, slice, concatenate, pad,
reverse, iota) are index arithmetic on the way to the loads; reads of concatenate/pad
operands use clamped indices, so no load is ever out of bounds. A ``dot_general`` contracting
few elements (``is_small_dot``) is an element op too: its products summed in registers.
Complex values are pairs of floats (``complex_ops``). Where the output's minor dim
indexes a pad or concatenate, the inner loop runs in pieces with constant bounds between the
points where they switch operands (``_minor_splits``), so LLVM folds the clamps away.

Iteration spaces:

- **loop fusions** run over their output's dims: flat (one loop over linear indices) when
  every op maps linear indices to linear indices (elementwise ops, scalar broadcasts,
  reshapes); otherwise a loop nest whose outermost dim is the parallel one.
- **row fusions** (input fusions in which reduce results are consumed: softmax, layernorm;
  see ``fusion.row_space``) run over rows, the leading dims of the reduces' input; per row,
  one pass over its elements per level of reduces, then a pass computing the full-shape
  outputs (``_RowKernel``). Reduced values and what depends only on them are registers.
- **column reductions** (input fusions keeping the minor dim, simple reducers or
  argmax/argmin) run over blocks of contiguous kept elements, the reduced dims outside and a
  vectorizable loop over the block inside, with an accumulator array per block and reduce
  input (``KernelBuilder._build_column_reduce``).
- **concatenate roots** (a fusion whose result is a wide concatenate, which fusion keeps
  as the sole root): a loop nest per operand writing its slab of the result.
- other **input fusions** (reduce outputs) run over the reduce's input dims D: kept dims
  outside, reduced dims inside. The parallel dim is the first kept dim; with none (a full
  reduction) it is the first reduced dim, and each call writes a *partial* result that the
  caller combines (only for simple reducers whose init is their identity). Float sums
  accumulate in lanes (``LaneSums``): in the element type within blocks of ``BLOCK``
  elements, in float64 across blocks, the lanes combined by a fixed tree at the end: accurate,
  vectorized, and in an order written in the IR itself (no reassociation flags), so code
  compiled at any optimization level gives bit-identical results (tiered compilation relies
  on it).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from ember.backends.cpu import complex_ops as C
from ember.backends.cpu import llvm_support, window_kernel
from ember.backends.cpu import scalar_ops as S
from ember.backends.cpu.scalar_ops import I64, UnsupportedOp
from ember.compiler.arg_reducer import arg_reducer_kind
from ember.compiler.eval_elementwise import (
    REDUCE_UFUNCS,
    accumulation_dtype,
    is_reducer_identity,
    simple_reducer_opcode,
)
from ember.compiler.hlo import (
    BINARY_ELEMENTWISE,
    TERNARY_ELEMENTWISE,
    UNARY_ELEMENTWISE,
    Computation,
    Instruction,
)
from ember.compiler.passes.fusion import cone_cost

I8P = S.I8.as_pointer()
I8PP = I8P.as_pointer()
KERNEL_TYPE = ir.FunctionType(ir.VoidType(), [I8PP, I64, I64])
BLOCK = 1024
# Kernels whose outputs take at least STREAM_MIN_BYTES (more than the caches would keep for
# their consumer) write them with non-temporal stores (``stream_lines``): a plain store
# first reads the output's cache line from memory, a third of the traffic of ``x * 2``. The
# values go to a stack buffer first (a flat loop's blocks of STREAM_BLOCK_BYTES, a loop
# nest's or a row kernel's rows), then whole 64-byte lines of it to the output. On the
# 2-core Zen 5 VM (32 MiB of L3): ``x * 2 + 1`` and ``relu(x * s + 1)`` over 16 MiB ran
# 20-30% slower streamed when called again and again (their arrays partly stayed in L3),
# 10-30% faster over 32 MiB and more; row kernels, whose passes over a row read it from the
# level-1 cache, gained over 16 MiB already (softmax and layernorm over (4096, 1024) 1.2 ->
# 0.7 and 1.0 -> 0.45 ms), so they stream from ROW_STREAM_MIN_BYTES.
STREAM_MIN_BYTES = 32 << 20
ROW_STREAM_MIN_BYTES = 16 << 20
STREAM_BLOCK_BYTES = 4 << 10
CACHE_LINE = 64
# (a loop nest's or a row kernel's rows, of at most this many bytes a stack buffer)
STREAM_ROW_MAX_BYTES = 16 << 10
# A loop fusion walks a root reshape's operand (``KernelBuilder._walk``) when that keeps at
# least this many items (or all of them) in its parallel dim: not a leading unit dim.
WALK_MIN_EXTENT = 2
# An innermost loop of a loop nest with a constant trip count in [SHORT_INNER_MIN,
# SHORT_INNER_MAX] is marked not to unroll (``Loops.nest``). LLVM fully unrolls such a loop
# before it vectorizes, then vectorizes the loop around it, storing with scatters (a stride of
# the inner extent): ``kron`` of (64, 64) and (32, 32), a (2048, 2048) result, took 2.0 ms so,
# 0.14 ms with the inner loop vectorized. Shorter inner loops (3 RGB channels) still unroll:
# their stores form interleaved groups that vectorize well.
SHORT_INNER_MIN, SHORT_INNER_MAX = 8, 256
# Lanes of a float sum (``LaneSums``): independent accumulators that the loop vectorizer maps
# to vector registers' elements (64: four AVX-512 or eight AVX2 vectors of float32).
LANES = 64
# Sums along fewer than ``SHORT_SUM_MAX`` elements use ``SHORT_SUM_LANES`` lanes: every row
# pays for widening and combining all of its lanes, and 64 lanes over a row of 100 left a
# ragged tail of 36 (float32 sums of (10000, 100): 0.20 -> 0.10 ms with 16 lanes).
SHORT_SUM_MAX = 128
SHORT_SUM_LANES = 16
# Element emissions allowed per kernel. Concatenate and pad read every operand at a clamped
# index, so nested ones multiply the code; past this budget the fusion runs as a library
# thunk instead of compiling (for minutes) into a huge function.
MAX_EMISSIONS = 20_000
# ``ElementEmitter.emit`` nesting past which elementwise operands are emitted by a loop.
_DEEP_EMIT = 64
_SAME_INDEX_OPS = UNARY_ELEMENTWISE | BINARY_ELEMENTWISE | TERNARY_ELEMENTWISE
# Column reductions (the minor dim kept): the most bytes of accumulators (on the stack, in the
# L1 cache) per work item, whose contiguous outputs they are; the fewest contiguous kept
# elements that take that path.
COLUMN_BLOCK_BYTES = 16 << 10
COLUMN_MIN = 8
# Row reductions whose contiguous reduced run has at least this many elements are vectorized
# along the rows (``KernelBuilder._build_reduce``).
ROW_VECTOR_MIN = 8
# argmax/argmin over rows of at most this many elements run one unrolled pass per row that
# LLVM vectorizes across rows (``KernelBuilder._arg_tiny_row``; past 8 LLVM gathers across
# rows: (1e6, 9) float32 10 ms).
ARG_TINY_ROW_MAX = 8
# Longer contiguous rows of up to this many elements are held in one vector
# (``KernelBuilder._arg_vector_row``; (1e6, 16) float32: 17 -> 1.7 ms, (1e6, 64): 22 -> 6.7);
# longer rows take two vectorized passes.
ARG_VECTOR_ROW_MAX = 64
# Values costing more than this (``fusion.cone_cost``) are computed into a row on the stack
# first, by a loop, rather than unrolled once per element: ``categorical``'s Gumbel noise
# over 40 logits (a threefry hash each) was 10k instructions, 0.45 s to compile.
ARG_UNROLL_MAX_COST = 8
# A column reduction with fewer work items than this (kept positions times column blocks:
# (4096, 1024).sum(0) has one) splits its reduced rows across calls instead, each call
# writing partial results that the executable combines, when its reducers allow that.
COLUMN_SPLIT_ROWS_BELOW = 8
# Loop nests of fusions holding a transpose that moves the minor dim run in square tiles of
# this many elements a side (``KernelBuilder._tiled_nest``) when both dims are at least this
# long (4096 x 4096 float32: 8 → 33 ms, 16 → 41 ms, 32 → 45 ms, untiled 128 ms):
TRANSPOSE_TILE = 8
TRANSPOSE_TILE_MIN = 8
# Full tiles go through registers (``KernelBuilder._register_tile``): their values are
# computed along the operand's minor dim into a stack block, transposed there with vector
# shuffles (``_transpose_block``) and stored in rows of the output. Left to LLVM, the tile
# loops were vectorized along one of the two dims and the other accessed element by element,
# with scatter stores or chains of inserts: ``swapaxes`` of (4096, 64, 16) float32 took 4.2
# ms, now ~0.8; (32, 64, 56, 56) NCHW -> NHWC 6.9 ms, now ~2.4; JAX 1.4 and 2.6).
# The most pieces the inner loop of a loop nest is split into (``_minor_splits``), and the
# most (instruction, dim, offset) steps it follows looking for split points.
MAX_MINOR_PIECES = 8
# The longest group of an interleaved inner loop (``_minor_interleave``): its body is copied
# this many times.
MAX_INTERLEAVE = 8
MAX_SPLIT_STEPS = 2048
# dot_general contracting at most this many elements per result runs as a kernel
# (``is_small_dot``) rather than through BLAS: measured faster for every shape tried up to 8
# (1e4 8x8 products: 0.55 against 0.63 ms; 1e4 4x4: 0.22 against 0.36; (1000, 4) @ (4, 1000):
# 0.10 against 0.19), but at 16 only for batches of square products.
SMALL_DOT_K = 8


# Kernels of at most this many elements may be inlined into their callers (``build``).
INLINE_MAX_WORK = 16


@dataclass(frozen=True)
class KernelInfo:
    """What the caller needs to run a kernel.

    Attributes:
        name: the LLVM function's name.
        extent: size of the parallel dimension (calls cover ``[0, extent)``).
        work_per_item: elements computed per unit of the parallel dimension.
        partial_reducers: for reductions whose calls each reduce part of the reduced
            positions (full reductions; column reductions with few work items), the reducer
            opcode of each output leaf ("add_f64" for a float sum whose partial results are
            float64; None for elementwise outputs); empty when calls write final results.
        blas: whether the kernel calls LAPACK or BLAS itself (``linalg_steps``), which must
            then run on the calling thread alone (``one_blas_thread``).
        scratch: bytes of an arena buffer the kernel works in, passed after its outputs
            (``ProgramBuilder._step``); 0 for none.
    """

    name: str
    extent: int
    work_per_item: int
    partial_reducers: tuple
    blas: bool = False
    scratch: int = 0



def simple_reducer(body: Computation) -> str | None:
    """The opcode of a reducer body that is ``op(p0, p1)`` (``add``, ``maximum``...)."""
    return simple_reducer_opcode(body)


def _is_identity(opcode: str, inst: Instruction) -> bool:
    """Whether ``inst`` is a constant equal to the identity of the reducer ``opcode``."""
    return inst.opcode == "constant" and is_reducer_identity(
        REDUCE_UFUNCS[opcode], np.asarray(inst.attrs["value"]))


def address_slot(module: ir.Module, name: str) -> ir.GlobalVariable:
    """The ``i8*`` global ``name`` of ``module`` (made at the first request) holding the
    address of a function outside the code, which the executable stores when it loads the
    code: a BLAS routine (``executable._bind_gemm``), a small-matrix routine
    (``executable._bind_routines``)."""
    slot = module.globals.get(name)
    if slot is None:
        slot = ir.GlobalVariable(module, I8P, name)
        slot.initializer = ir.Constant(I8P, None)  # (external: LLVM may not fold it)
        slot.align = 8
    return slot


def _strides(dims) -> list[int]:
    out, s = [], 1
    for d in reversed(dims):
        out.append(s)
        s *= d
    return out[::-1]


class Index:
    """An element position in an array of ``dims``: a multi-index, a linear index, or both
    (each derived from the other on demand)."""

    __slots__ = ("dims", "multi", "linear")

    def __init__(self, dims, multi=None, linear=None):
        self.dims = tuple(dims)
        self.multi = multi
        self.linear = linear

    def get_multi(self, b: ir.IRBuilder) -> tuple:
        if self.multi is None and len(self.dims) == 1:  # (a valid linear index is < dims[0])
            self.multi = (_c(0) if self.dims[0] == 1 else self.linear,)
        if self.multi is None:
            rest, multi = self.linear, []
            for d in reversed(self.dims):
                if d == 1:
                    multi.append(ir.Constant(I64, 0))
                    continue
                multi.append(b.urem(rest, ir.Constant(I64, d)))
                rest = b.udiv(rest, ir.Constant(I64, d))
            self.multi = tuple(reversed(multi))
        return self.multi

    def get_linear(self, b: ir.IRBuilder) -> ir.Value:
        if self.linear is None:
            lin = ir.Constant(I64, 0)
            for i, s in zip(self.multi, _strides(self.dims)):
                if s == 0 or (isinstance(i, ir.Constant) and i.constant == 0):
                    continue
                term = i if s == 1 else b.mul(i, ir.Constant(I64, s), flags=("nsw", "nuw"))
                lin = term if (isinstance(lin, ir.Constant) and lin.constant == 0) else \
                    b.add(lin, term, flags=("nsw", "nuw"))
            self.linear = lin
        return self.linear

    def key(self):
        # (Constants by value: a constant no instruction uses can be freed, and its id reused
        # by another constant.)
        if self.multi is not None:
            return ("m",) + tuple(_value_key(v) for v in self.multi)
        return ("l", _value_key(self.linear))


def _value_key(v: ir.Value):
    return ("c", v.constant) if isinstance(v, ir.Constant) else id(v)


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def _scalar_index() -> Index:
    return Index((), multi=(), linear=_c(0))


class ElementEmitter:
    """Emits the value of a fused instruction at an index (memoized per index)."""

    def __init__(self, b: ir.IRBuilder, param_ptrs: dict, module_consts, budget=None,
                 strided=None):
        self.b = b
        self.param_ptrs = param_ptrs  # id(parameter inst) -> typed pointer
        self.module_consts = module_consts  # fn(builder, ndarray) -> typed global pointer
        # Index values known as ``scale * j + offset`` of an interleaved loop's counter ``j``
        # (``Loops.nest``): id(value) -> (j, scale, offset). Shared with the kernel's loops.
        self.strided: dict = strided if strided is not None else {}
        self.memo: dict = {}
        self.budget = budget if budget is not None else [MAX_EMISSIONS]
        self._depth = 0  # nested ``emit`` calls

    def emit(self, inst: Instruction, index: Index) -> ir.Value:
        key = (id(inst),) + index.key()
        v = self.memo.get(key)
        if v is None:
            if self._depth >= _DEEP_EMIT and inst.opcode in _SAME_INDEX_OPS:
                self._emit_operands_first(inst, index)
            self.budget[0] -= 1
            if self.budget[0] < 0:
                raise UnsupportedOp("kernel too large")
            self._depth += 1
            try:
                v = self._emit(inst, index)
            finally:
                self._depth -= 1
            self.memo[key] = v
        return v

    def _emit_operands_first(self, inst: Instruction, index: Index) -> None:
        """Emits the elementwise operands below ``inst`` (read at ``index`` too) without
        recursion, producers first, in the order recursion would take: a fusion of a chain
        of thousands of elementwise ops (an unrolled loop) would otherwise nest ``emit`` past
        Python's recursion limit."""
        index_key = index.key()
        order, seen, stack = [], {id(inst)}, [(inst, 0)]
        while stack:
            node, k = stack.pop()
            if k == len(node.operands):
                order.append(node)
                continue
            stack.append((node, k + 1))
            operand = node.operands[k]
            if (operand.opcode in _SAME_INDEX_OPS and id(operand) not in seen
                    and (id(operand),) + index_key not in self.memo):
                seen.add(id(operand))
                stack.append((operand, 0))
        for node in order[:-1]:  # (the last is ``inst``)
            self.emit(node, index)

    def _load(self, ptr, inst, index):
        if inst.shape.rank == 0:
            p = ptr
        else:
            p = self.b.gep(ptr, [index.get_linear(self.b)], inbounds=True)
        return C.load(self.b, p, inst.dtype)

    def _emit(self, inst: Instruction, index: Index) -> ir.Value:
        b, op = self.b, inst.opcode
        if op == "parameter":
            return self._load(self.param_ptrs[id(inst)], inst, index)
        if op == "constant":
            value = np.asarray(inst.attrs["value"])
            if value.ndim == 0:
                return C.const(inst.dtype, value[()])
            return self._load(self.module_consts(self.b, value), inst, index)
        operands = inst.operands
        if op in UNARY_ELEMENTWISE:
            x = self.emit(operands[0], index)
            return C.unary(b, op, x, operands[0].dtype, inst.dtype, inst.attrs)
        if op in BINARY_ELEMENTWISE:
            x = self.emit(operands[0], index)
            y = self.emit(operands[1], index)
            return C.binary(b, op, x, y, operands[0].dtype, inst.dtype, inst.attrs,
                            y_dt=operands[1].dtype)
        if op in TERNARY_ELEMENTWISE:
            a, x, y = (self.emit(o, index) for o in operands)
            if op == "select":
                return C.select(b, a, x, y)
            return S.clamp(b, a, x, y, inst.dtype)
        if op == "broadcast_in_dim":
            return self.emit(operands[0], self._broadcast_index(inst, index))
        if op == "reshape":
            return self.emit(operands[0], self._reshape_index(inst, index))
        if op == "transpose":
            multi = index.get_multi(b)
            perm = inst.attrs["permutation"]
            src = [None] * len(perm)
            for i, p in enumerate(perm):
                src[p] = multi[i]
            return self.emit(operands[0], Index(operands[0].dims, multi=tuple(src)))
        if op == "slice":
            multi = index.get_multi(b)
            a = inst.attrs
            src = tuple(self._affine(i, s, st) for i, s, st in
                        zip(multi, a["strides"], a["start_indices"]))
            return self.emit(operands[0], Index(operands[0].dims, multi=src))
        if op == "reverse":
            multi = list(index.get_multi(b))
            for d in inst.attrs["dimensions"]:
                multi[d] = b.sub(_c(inst.dims[d] - 1), multi[d])
            return self.emit(operands[0], Index(operands[0].dims, multi=tuple(multi)))
        if op == "iota":
            i = index.get_multi(b)[inst.attrs["iota_dimension"]]
            return S.convert(b, i, np.dtype(np.int64), inst.dtype)
        if op == "concatenate":
            return self._concatenate(inst, index)
        if op == "pad":
            return self._pad(inst, index)
        if op == "gather":
            return self._gather(inst, index)
        if op == "dynamic_slice":
            return self._dynamic_slice(inst, index)
        if op == "dynamic_update_slice":
            return self._dynamic_update_slice(inst, index)
        if op == "dot_general" and is_small_dot(inst):
            return self._small_dot(inst, index)
        if op == "reduce_window":
            return window_kernel.emit_reduce_window(self, inst, index)
        if op == "custom_call" and window_kernel.is_window_call(inst):
            return window_kernel.emit_window_call(self, inst, index)
        raise UnsupportedOp(op)

    def _small_dot(self, inst, index):
        """A ``dot_general`` element: its products over the (few) contracted positions,
        summed in order in the accumulation dtype (float32 for float16/bfloat16)."""
        b, a = self.b, inst.attrs
        lhs, rhs = inst.operands
        lb, rb = a["lhs_batching_dimensions"], a["rhs_batching_dimensions"]
        lc, rc = a["lhs_contracting_dimensions"], a["rhs_contracting_dimensions"]
        multi = iter(index.get_multi(b))
        lpos, rpos = [None] * lhs.shape.rank, [None] * rhs.shape.rank
        for dl, dr in zip(lb, rb):
            lpos[dl] = rpos[dr] = next(multi)
        for pos, side, skip in ((lpos, lhs, (*lb, *lc)), (rpos, rhs, (*rb, *rc))):
            for d in range(side.shape.rank):
                if d not in skip:
                    pos[d] = next(multi)
        acc_dt = accumulation_dtype(inst.dtype)
        total = None
        for ks in itertools.product(*(range(lhs.dims[d]) for d in lc)):
            for dl, dr, k in zip(lc, rc, ks):
                lpos[dl] = rpos[dr] = _c(k)
            x, y = (C.convert(b, self.emit(side, Index(side.dims, multi=tuple(pos))),
                              side.dtype, acc_dt)
                    for side, pos in ((lhs, lpos), (rhs, rpos)))
            term = C.binary(b, "multiply", x, y, acc_dt, acc_dt, {})
            total = term if total is None else C.binary(b, "add", total, term, acc_dt,
                                                        acc_dt, {})
        if total is None:  # nothing contracted: a sum of no terms
            return C.const(inst.dtype, 0)
        return C.convert(b, total, acc_dt, inst.dtype)

    def _as_index(self, value: ir.Value, dtype: np.dtype) -> ir.Value:
        """An index read from an index array, as a signed 64-bit value."""
        if dtype == np.uint64:  # (above 2**63 it would read as negative)
            raise UnsupportedOp("uint64 indices")
        return S.convert(self.b, value, dtype, np.dtype(np.int64))

    def index_vector_entry(self, indices, batch, vector_dim: int, k: int) -> ir.Value:
        """Entry ``k`` of the index vector at ``batch`` (the indices' other dims in order) of
        a gather's or scatter's index array, as a signed 64-bit value."""
        pos = list(batch)
        if vector_dim < indices.shape.rank:
            pos.insert(vector_dim, _c(k))
        return self._as_index(self.emit(indices, Index(indices.dims, multi=tuple(pos))),
                              indices.dtype)

    def _gather(self, inst, index):
        """StableHLO gather: each output element reads the operand at its window's clamped
        start plus its offset in the window; along an operand batching dim, at the position
        of the matching indices batching dim."""
        b, a = self.b, inst.attrs
        operand, indices = inst.operands
        offset_dims = set(a["offset_dims"])
        multi = index.get_multi(b)
        batch = [m for d, m in enumerate(multi) if d not in offset_dims]
        window = iter(m for d, m in enumerate(multi) if d in offset_dims)
        vector_dim = a["index_vector_dim"]

        def batch_position(idim):  # (the output's batch dims are the indices' dims in order,
            # the index vector dim left out)
            return idim - (vector_dim < indices.shape.rank and idim > vector_dim)

        index_map = list(a["start_index_map"])
        collapsed = set(a["collapsed_slice_dims"])
        batching = dict(zip(a["operand_batching_dims"], a["start_indices_batching_dims"]))
        src = []
        for d, size in enumerate(a["slice_sizes"]):
            if d in batching:
                src.append(batch[batch_position(batching[d])])
                continue
            offset = _c(0) if d in collapsed else next(window)
            if d in index_map:
                first = self._clamp(self.index_vector_entry(
                    indices, batch, vector_dim, index_map.index(d)), operand.dims[d] - size)
                offset = b.add(first, offset, flags=("nsw",))
            src.append(offset)
        return self.emit(operand, Index(operand.dims, multi=tuple(src)))

    def _dynamic_slice(self, inst, index):
        b = self.b
        operand, starts = inst.operands[0], inst.operands[1:]
        multi = index.get_multi(b)
        src = []
        for i, st, dim, size in zip(multi, starts, operand.dims, inst.attrs["slice_sizes"]):
            first = self._clamp(self._as_index(self.emit(st, _scalar_index()), st.dtype),
                                dim - size)
            src.append(b.add(first, i, flags=("nsw",)))
        return self.emit(operand, Index(operand.dims, multi=tuple(src)))

    def _dynamic_update_slice(self, inst, index):
        """The update's element inside its window (starts clamped so that it fits, as in
        StableHLO), the operand's elsewhere."""
        b = self.b
        operand, update, starts = inst.operands[0], inst.operands[1], inst.operands[2:]
        multi = index.get_multi(b)
        outside = self.emit(operand, index)
        if update.shape.size == 0:
            return outside
        inside = ir.Constant(S.I1, 1)
        src = []
        for i, st, dim, size in zip(multi, starts, operand.dims, update.dims):
            first = self._clamp(self._as_index(self.emit(st, _scalar_index()), st.dtype),
                                dim - size)
            shifted = b.sub(i, first)
            inside = b.and_(inside, b.and_(b.icmp_signed(">=", shifted, _c(0)),
                                           b.icmp_signed("<", shifted, _c(size))))
            src.append(self._clamp(shifted, size - 1))
        value = self.emit(update, Index(update.dims, multi=tuple(src)))
        return C.select(b, inside, value, outside)

    def _reshape_index(self, inst, index):
        """The operand position of a reshape's element. Trailing dims that both shapes share
        (unit dims aside: a reshape adding or dropping dims of size 1 shares them all) keep
        their indices, so the inner loop stays a contiguous, vectorizable walk; only the
        leading dims go through a linear index."""
        src, dst = inst.operands[0].dims, inst.dims
        s_pos = [k for k, n in enumerate(src) if n != 1]
        d_pos = [k for k, n in enumerate(dst) if n != 1]
        shared = 0
        while (shared < min(len(s_pos), len(d_pos))
               and src[s_pos[-1 - shared]] == dst[d_pos[-1 - shared]]):
            shared += 1
        if index.multi is None or shared == 0:
            return Index(src, linear=index.get_linear(self.b))
        # (A reshape keeps linear positions: a known linear index carries over.)
        s_lead, d_lead = s_pos[:len(s_pos) - shared], d_pos[:len(d_pos) - shared]
        multi = [_c(0)] * len(src)
        for s, d in zip(s_pos[len(s_lead):], d_pos[len(d_lead):]):
            multi[s] = index.multi[d]
        if s_lead:
            lead = Index([dst[d] for d in d_lead], multi=tuple(index.multi[d] for d in d_lead))
            moved = Index([src[s] for s in s_lead], linear=lead.get_linear(self.b))
            for s, v in zip(s_lead, moved.get_multi(self.b)):
                multi[s] = v
        return Index(src, multi=tuple(multi), linear=index.linear)

    def _affine(self, i, scale, offset):
        b = self.b
        known = self.strided.get(id(i))
        if scale != 1:
            i = b.mul(i, _c(scale), flags=("nsw", "nuw"))
        if offset:
            i = b.add(i, _c(offset), flags=("nsw", "nuw"))
        if known is not None:
            self.strided[id(i)] = (known[0], known[1] * scale, known[2] * scale + offset)
        return i

    def _shifted(self, i, delta: int):
        """``i + delta`` (a constant; the table entry of ``i`` carried over)."""
        out = self.b.add(i, _c(delta), flags=("nsw",)) if delta else i
        known = self.strided.get(id(i))
        if known is not None:
            self.strided[id(out)] = (known[0], known[1], known[2] + delta)
        return out

    def _affine_of(self, known):
        """The value ``scale * j + offset`` of a table entry, entered in the table."""
        j, scale, offset = known
        b = self.b
        out = j if scale == 1 else b.mul(j, _c(scale), flags=("nsw", "nuw"))
        if offset:
            out = b.add(out, _c(offset), flags=("nsw",))
        self.strided[id(out)] = known
        return out

    def _clamped_index(self, i, hi, known):
        """``_clamp(i, hi)``, entered in the table as ``i``: a reader uses the clamped
        index only where ``i`` is in range (elsewhere its value is selected away), so what is
        known of ``i`` holds wherever it matters."""
        out = self._clamp(i, hi)
        if known is not None:
            self.strided[id(out)] = known
        return out

    def _broadcast_index(self, inst, index):
        operand = inst.operands[0]
        if operand.shape.rank == 0:
            return _scalar_index()
        multi = index.get_multi(self.b)
        src = []
        for j, d in enumerate(inst.attrs["broadcast_dimensions"]):
            src.append(_c(0) if operand.dims[j] == 1 else multi[d])
        return Index(operand.dims, multi=tuple(src))

    def _clamp(self, i, hi):
        """``i`` clamped into ``[0, hi]`` (signed)."""
        b = self.b
        i = b.select(b.icmp_signed("<", i, _c(0)), _c(0), i)
        return b.select(b.icmp_signed(">", i, _c(hi)), _c(hi), i)

    def _concatenate(self, inst, index):
        b = self.b
        d = inst.attrs["dimension"]
        multi = index.get_multi(b)
        offset = 0
        pieces = []
        for operand in inst.operands:
            size = operand.dims[d]
            if size == 0:
                continue
            shifted = self._shifted(multi[d], -offset)
            local = self._clamped_index(shifted, size - 1, self.strided.get(id(shifted)))
            src = multi[:d] + (local,) + multi[d + 1:]
            pieces.append((offset, self.emit(operand, Index(operand.dims, multi=src))))
            offset += size
        if not pieces:  # an empty result: this code never runs
            return C.const(inst.dtype, 0)
        return self._pick(multi[d], pieces)

    def _pick(self, pos, pieces):
        b = self.b
        out = pieces[0][1]
        for start, value in pieces[1:]:
            out = C.select(b, b.icmp_signed(">=", pos, _c(start)), value, out)
        return out

    def _pad(self, inst, index):
        b = self.b
        operand, pad_value = inst.operands
        a = inst.attrs
        multi = index.get_multi(b)
        inside = ir.Constant(S.I1, 1)
        src = []
        for i, lo, interior, size in zip(multi, a["edge_padding_low"], a["interior_padding"],
                                         operand.dims):
            step = interior + 1
            known = self.strided.get(id(i))
            if step > 1 and known is not None and known[1] % step == 0:
                # (``i`` is ``scale * j + offset`` of an interleaved loop: whether it falls
                # on the operand's grid is known here, and off the grid the element is the
                # padding value, its operand never computed)
                j, scale, offset = known
                if (offset - lo) % step:
                    return self.emit(pad_value, _scalar_index())
                known = (j, scale // step, (offset - lo) // step)
                q = self._affine_of(known)
                ok = b.and_(b.icmp_signed(">=", q, _c(0)), b.icmp_signed("<", q, _c(size)))
            else:
                shifted = b.sub(i, _c(lo))
                if step == 1:
                    q = shifted
                    known = known and (known[0], known[1], known[2] - lo)
                else:
                    q = b.sdiv(shifted, _c(step))
                    exact = b.icmp_signed("==", b.srem(shifted, _c(step)), _c(0))
                    inside = b.and_(inside, exact)
                    known = None
                ok = b.and_(b.icmp_signed(">=", shifted, _c(0)),
                            b.icmp_signed("<", q, _c(size)))
            inside = b.and_(inside, ok)
            src.append(self._clamped_index(q, max(size - 1, 0), known))
        if operand.shape.size == 0:
            return self.emit(pad_value, _scalar_index())
        value = self.emit(operand, Index(operand.dims, multi=tuple(src)))
        return C.select(b, inside, value, self.emit(pad_value, _scalar_index()))


# --------------------------------------------------------------------------- loops


def is_small_dot(inst: Instruction) -> bool:
    """Whether a ``dot_general`` contracts so few elements per result (``SMALL_DOT_K``) that
    a kernel computing each result element in registers beats BLAS (1e5 3x3 products take
    3.2 ms through NumPy's ``matmul``, 0.7 ms so)."""
    lhs = inst.operands[0]
    k = math.prod(lhs.dims[d] for d in inst.attrs["lhs_contracting_dimensions"])
    return k <= SMALL_DOT_K


def _assume(b: ir.IRBuilder, condition: ir.Value) -> None:
    fn = b.module.declare_intrinsic("llvm.assume", (), ir.FunctionType(ir.VoidType(), [S.I1]))
    b.call(fn, [condition])


def _loop_id(module: ir.Module, unroll: bool, vectorize: bool, width: int | None = None):
    """A new loop ID (``!N = !{!N, !{"llvm.loop.unroll.disable"}, ...}``: a loop ID's first
    operand is the node itself, which llvmlite cannot build, so it is patched in). ``width``
    asks the vectorizer for that many lanes without forcing it (``vectorize.enable``): a
    loop it cannot vectorize stays scalar instead of LLVM warning on stderr."""
    hints = []
    if not unroll:
        hints.append(module.add_metadata([ir.MetaDataString(module,
                                                            "llvm.loop.unroll.disable")]))
    if not vectorize:
        hints.append(module.add_metadata([ir.MetaDataString(module, "llvm.loop.vectorize.enable"),
                                          ir.Constant(ir.IntType(1), 0)]))
    if vectorize and width is not None:
        hints.append(module.add_metadata([ir.MetaDataString(module, "llvm.loop.vectorize.width"),
                                          ir.Constant(S.I32, width)]))
    loop_id = module.add_metadata([ir.MetaDataString(module, f"ember.loop.{len(module.metadata)}"),
                                   *hints])
    loop_id.operands = (loop_id, *hints)
    return loop_id


def _short_constant_trip(lo, hi) -> bool:
    """Whether ``[lo, hi)`` is a constant range of ``SHORT_INNER_MIN`` to
    ``SHORT_INNER_MAX`` iterations."""
    if not (isinstance(lo, ir.Constant) and isinstance(hi, ir.Constant)):
        return False
    return SHORT_INNER_MIN <= hi.constant - lo.constant <= SHORT_INNER_MAX


class Loops:
    """Helpers for counted loops and stack slots in one function."""

    def __init__(self, b: ir.IRBuilder, entry_block):
        self.b = b
        self.entry_block = entry_block
        # The index values of interleaved loops (``nest``): see ``ElementEmitter.strided``.
        self.strided: dict = {}

    def alloca(self, ty, name="", align=None):
        b = self.b
        with b.goto_block(self.entry_block):
            b.position_at_start(self.entry_block)
            slot = b.alloca(ty, name=name)
            slot.align = align
            return slot

    def loop(self, lo, hi, body, name="i", unroll=True, vectorize=True, width=None):
        """Emits ``for i in [lo, hi): body(i)``; ``unroll=False`` tells LLVM not to unroll
        it (a loop of constant trip count around a vectorizable loop: unrolled first, the
        copies of the inner loop no longer vectorize as one); ``vectorize=False`` not to
        vectorize it (a loop whose body, once unrolled, vectorizes across its elements);
        ``width`` to vectorize it with that many lanes."""
        b = self.b
        pre = b.block
        head = b.append_basic_block(f"{name}.head")
        loop_body = b.append_basic_block(f"{name}.body")
        done = b.append_basic_block(f"{name}.end")
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64, name=name)
        i.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", i, hi), loop_body, done)
        b.position_at_end(loop_body)
        body(i)
        i.add_incoming(b.add(i, _c(1), flags=("nsw", "nuw")), b.block)
        latch = b.branch(head)
        if not unroll or not vectorize or width is not None:
            latch.set_metadata("llvm.loop", _loop_id(b.module, unroll, vectorize, width))
        b.position_at_end(done)

    def _interleaved(self, lo, hi, step: int, body, name: str, vectorize: bool) -> None:
        """``for i in [lo, hi): body(i)`` (``lo >= 0``) as ``for j: for r < step:
        body(step * j + r)`` over the whole groups of ``step`` in the range, the elements
        before and after them one by one."""
        b = self.b

        def group(j):
            for r in range(step):
                i = b.mul(j, _c(step), flags=("nsw", "nuw"))
                if r:
                    i = b.add(i, _c(r), flags=("nsw", "nuw"))
                self.strided[id(i)] = (j, step, r)
                body(i)
        if isinstance(lo, ir.Constant) and isinstance(hi, ir.Constant):
            first, last = -(-lo.constant // step), hi.constant // step
            if lo.constant < min(hi.constant, first * step):
                self.loop(lo, _c(min(hi.constant, first * step)), body, name=f"{name}.head",
                          vectorize=False)
            self.loop(_c(first), _c(last), group, name=name, vectorize=vectorize)
            if max(first, last) * step < hi.constant:
                self.loop(_c(max(first, last) * step), hi, body, name=f"{name}.rest",
                          vectorize=False)
            return
        # (a thread's range: whole groups from the first multiple of ``step`` in it)
        first = b.udiv(b.add(lo, _c(step - 1), flags=("nsw", "nuw")), _c(step))
        last = b.udiv(hi, _c(step))
        start = b.mul(first, _c(step), flags=("nsw", "nuw"))
        end = b.mul(last, _c(step), flags=("nsw", "nuw"))
        self.loop(lo, b.select(b.icmp_signed("<", hi, start), hi, start), body,
                  name=f"{name}.head", vectorize=False)
        self.loop(first, last, group, name=name, vectorize=vectorize)
        self.loop(b.select(b.icmp_signed(">", end, start), end, start), hi, body,
                  name=f"{name}.rest", vectorize=False)

    def nest(self, ranges, body, prefix="d", splits=(), vectorize=True, interleave=1):
        """Nested loops over ``ranges`` (a list of (lo, hi) values); ``body(indices)``. The
        innermost loop runs as consecutive loops split at the constants ``splits``;
        ``vectorize`` as in ``loop`` (for all of them). An innermost loop of a short constant
        trip count (``_short_constant_trip``) is not unrolled, so that it is the loop that
        vectorizes (see ``SHORT_INNER_MIN``). ``interleave`` > 1 (with no ``splits``): the
        innermost loop counts ``j`` and runs the body at ``i = interleave * j + r`` for each
        ``r`` in turn (``_interleaved``), entering each ``i`` in ``strided``."""
        b, last = self.b, len(ranges) - 1

        def level(k, acc):
            if k == len(ranges):
                body(tuple(acc))
                return
            lo, hi = ranges[k]
            if k == last and interleave > 1:
                self._interleaved(lo, hi, interleave, lambda i: body(tuple(acc + [i])),
                                  f"{prefix}{k}", vectorize)
                return
            if k < last or not splits:
                unroll = not (vectorize and k == last > 0 and _short_constant_trip(lo, hi))
                self.loop(lo, hi, lambda i: level(k + 1, acc + [i]), name=f"{prefix}{k}",
                          vectorize=vectorize, unroll=unroll)
                return
            for start, end in zip([lo, *map(_c, splits)], [*map(_c, splits), hi]):
                piece = (start, end)
                if k == 0:  # (the parallel dim: the caller's range cuts the pieces)
                    start = b.select(b.icmp_signed(">", start, lo), start, lo)
                    end = b.select(b.icmp_signed("<", end, hi), end, hi)

                def inner(i, piece=piece):
                    if k == 0:  # (tells LLVM the piece's constant bounds)
                        for bound, pred in zip(piece, (">=", "<")):
                            if isinstance(bound, ir.Constant):
                                _assume(b, b.icmp_signed(pred, i, bound))
                    level(k + 1, acc + [i])
                self.loop(start, end, inner, name=f"{prefix}{k}", vectorize=vectorize)
        level(0, [])


# --------------------------------------------------------------------------- kernels


def _outputs(fused: Computation) -> list[tuple[Instruction, int]]:
    """(instruction, leaf) of each output leaf of a fused computation."""
    root = fused.root
    if root.opcode == "tuple":
        return [(op, 0) for op in root.operands]
    if root.shape.is_tuple:
        return [(root, i) for i in range(len(root.shape.tuple_shapes))]
    return [(root, 0)]


def _leaf_shape(inst, leaf):
    return inst.shape.tuple_shapes[leaf] if inst.shape.is_tuple else inst.shape


_LINEAR_OPS = UNARY_ELEMENTWISE | BINARY_ELEMENTWISE | TERNARY_ELEMENTWISE | {
    "parameter", "constant", "reshape"}


def streamable(dtype) -> bool:
    """Whether outputs of ``dtype`` may be streamed (``stream_lines``): real elements of at
    least 4 bytes (whole elements to a cache line, one vector type to copy them)."""
    dtype = np.dtype(dtype)
    return dtype.kind in "fiu" and dtype.itemsize >= 4


def stream_lines(b: ir.IRBuilder, loops: Loops, src, dst, lines, dtype) -> None:
    """Copies ``lines`` 64-byte lines from ``src`` (a stack buffer, 64-byte aligned) to
    ``dst`` (elements of ``dtype``): non-temporal stores where ``dst`` is 64-byte aligned,
    else plain ones. Non-temporal stores are weakly ordered: the kernel fences before it
    returns (``fence_streams``)."""
    ty = S.memory_type(dtype)
    vec = ir.VectorType(ty, CACHE_LINE // np.dtype(dtype).itemsize)
    src = b.bitcast(src, vec.as_pointer())
    aligned = b.icmp_unsigned("==", b.and_(b.ptrtoint(dst, I64), _c(CACHE_LINE - 1)), _c(0))
    dst = b.bitcast(dst, vec.as_pointer())
    nontemporal = b.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
    with b.if_else(aligned) as (streamed, plain):
        for fast, block in ((True, streamed), (False, plain)):
            with block:
                def line(i, fast=fast):
                    value = b.load(b.gep(src, [i], inbounds=True), align=CACHE_LINE)
                    store = b.store(value, b.gep(dst, [i], inbounds=True),
                                    align=CACHE_LINE if fast else np.dtype(dtype).itemsize)
                    if fast:
                        store.set_metadata("nontemporal", nontemporal)
                loops.loop(_c(0), lines, line, name="stream", vectorize=False)


def fence_streams(b: ir.IRBuilder) -> None:
    """Orders a kernel's non-temporal stores before what follows (its return: the thread
    that waits for the kernel then reads the output)."""
    b.fence("seq_cst")


def _is_flat(fused: Computation, size: int) -> bool:
    """Whether every op maps linear indices to linear indices (see module doc)."""
    for inst in fused.instructions:
        if inst.opcode == "tuple":
            continue
        if inst.opcode == "broadcast_in_dim" and inst.operands[0].shape.rank == 0:
            continue
        if inst.opcode not in _LINEAR_OPS:
            return False
        if inst.shape.rank and inst.shape.size != size:
            return False
    return True


def _transposed_dim(fused: Computation, dims, roots) -> int | None:
    """The output dim to tile with the last one (``KernelBuilder._tiled_nest``): where a
    transpose of the output's dims puts its operand's minor dim; None when no transpose
    moves it, the dims are too short to tile, or no read of memory strides along the output's
    minor dim (``_strided_minor_read``: a transpose of a broadcast product, such as the
    per-example outer products of ``vmap(grad)``, reads contiguously untiled, and tiling it
    cost 15x)."""
    rank = len(dims)
    if rank < 2:
        return None
    for inst in fused.instructions:
        if inst.opcode != "transpose" or tuple(inst.dims) != tuple(dims):
            continue
        moved = list(inst.attrs["permutation"]).index(rank - 1)
        if moved != rank - 1 and min(dims[moved], dims[-1]) >= TRANSPOSE_TILE_MIN:
            return moved if _strided_minor_read(roots) else None
    return None


def _strided_minor_read(roots) -> bool:
    """Whether a read of memory (a parameter or an array constant) moves along one of its
    non-minor dims (a stride of more than one element) as the output's minor index moves:
    the reads that square tiles serve. Ops this does not follow count as strided."""
    seen: set[tuple] = set()
    pending = [(root, root.shape.rank - 1) for root in roots if root.shape.rank]
    while pending:
        inst, dim = pending.pop()
        if (id(inst), dim) in seen:
            continue
        if len(seen) >= MAX_SPLIT_STEPS:
            return True
        seen.add((id(inst), dim))
        op, a = inst.opcode, inst.attrs
        if op in ("parameter", "constant"):
            if math.prod(inst.dims[dim + 1:]) > 1:
                return True
        elif op in UNARY_ELEMENTWISE or op in BINARY_ELEMENTWISE or op in TERNARY_ELEMENTWISE:
            pending += [(o, dim) for o in inst.operands if o.shape.rank]
        elif op == "broadcast_in_dim":
            bdims = list(a["broadcast_dimensions"])
            if dim in bdims and inst.operands[0].dims[bdims.index(dim)] > 1:
                pending.append((inst.operands[0], bdims.index(dim)))
        elif op == "transpose":
            pending.append((inst.operands[0], a["permutation"][dim]))
        elif op in ("slice", "reverse", "pad", "concatenate"):
            pending += [(o, dim) for o in inst.operands if o.shape.rank]
        elif op == "reshape":
            # (moving one step along ``dim`` moves the linear index by ``step``; the operand
            # dim with that linear stride moves with it, when there is one)
            o = inst.operands[0]
            step = math.prod(inst.dims[dim + 1:])
            same = [k for k in range(o.shape.rank)
                    if math.prod(o.dims[k + 1:]) == step and o.dims[k] > 1]
            if not same:
                return True
            pending.append((o, same[-1]))
        elif op != "iota":
            return True
    return False


def _same_position_reads(inst, dim: int) -> list[tuple] | None:
    """How ``inst`` reads its operands as the index along its ``dim`` moves, when each read
    moves with it: (operand, the operand's dim, operand index - ``inst``'s index) for
    elementwise ops, broadcasts that keep the dim, transposes and unit-stride slices; None
    for other ops (the walks of ``_minor_splits`` and ``_minor_interleave`` take those)."""
    op, a = inst.opcode, inst.attrs
    if op in UNARY_ELEMENTWISE or op in BINARY_ELEMENTWISE or op in TERNARY_ELEMENTWISE:
        return [(o, dim, 0) for o in inst.operands if o.shape.rank]
    if op == "broadcast_in_dim":
        o = inst.operands[0]
        bdims = list(a["broadcast_dimensions"])
        if dim in bdims and o.dims[bdims.index(dim)] == inst.dims[dim]:
            return [(o, bdims.index(dim), 0)]
        return []
    if op == "transpose":
        return [(inst.operands[0], a["permutation"][dim], 0)]
    if op == "slice" and a["strides"][dim] == 1:
        return [(inst.operands[0], dim, a["start_indices"][dim])]
    return None


def _minor_splits(roots, n: int) -> list[int]:
    """Where, along the output's minor dim (of length ``n``), a pad or concatenate that this
    dim indexes directly switches between its operands or its padding: the inner loop runs
    in pieces between these points, each with constant bounds, so that LLVM folds each
    piece's bounds checks and clamps away and reads contiguous vectors instead of gathering
    clamped indices (``jnp.pad(x, 2)`` of 2048 x 2048 float32: 2.7 → 0.73 ms; of 4M values:
    2.1 → 0.9 ms). Empty when there are none, or too many pieces (each holds a copy of the loop
    body)."""
    points: set[int] = set()
    seen: set[tuple] = set()

    # (A stack, not recursion: a fusion may chain thousands of ops. Children are pushed in
    # reverse, so nodes are visited in the order recursion would take.)
    pending = [(root, root.shape.rank - 1, 0) for root in reversed(roots) if root.shape.rank]
    while pending:
        # ``inst``'s index along ``dim`` is the output's minor index plus ``offset``.
        inst, dim, offset = pending.pop()
        key = (id(inst), dim, offset)
        if key in seen or len(seen) >= MAX_SPLIT_STEPS:  # (fewer points: still correct)
            continue
        seen.add(key)
        op, a = inst.opcode, inst.attrs
        reads = _same_position_reads(inst, dim)
        visits = []
        if reads is not None:
            visits = [(o, d, offset + shift) for o, d, shift in reads]
        elif op == "reshape":
            o = inst.operands[0]
            if dim == inst.shape.rank - 1 and o.shape.rank and o.dims[-1] == inst.dims[-1]:
                visits = [(o, o.shape.rank - 1, offset)]
        elif op == "pad" and a["interior_padding"][dim] == 0:
            low, size = a["edge_padding_low"][dim], inst.operands[0].dims[dim]
            points.update((low - offset, low + size - offset))
            visits = [(inst.operands[0], dim, offset - low)]
        elif op == "concatenate":
            start = 0
            for o in inst.operands:
                if a["dimension"] == dim:
                    points.add(start - offset)
                    visits.append((o, dim, offset - start))
                    start += o.dims[dim]
                else:
                    visits.append((o, dim, offset))
        pending += reversed(visits)
    inner = sorted(p for p in points if 0 < p < n)
    return inner if len(inner) < MAX_MINOR_PIECES else []


def _minor_interleave(roots, n: int) -> int:
    """The step of the interleaved loop (``Loops.nest``) for an output minor dim of length
    ``n``: the stride between the grid points of the pads with interior padding that read
    this dim (through ops that keep it: elementwise ones, broadcasts, transposes, slices,
    pads, concatenates), times those of such pads below them (reading their operand's dim
    the same way), up to ``MAX_INTERLEAVE``; 1 when there are none or ``n`` is under two
    steps. Each iteration of that loop computes one element at each grid offset, where every
    such pad knows whether it reads its operand or gives its padding: a loop over ``i``
    computed both and selected one (an associative scan's interleave of two halves,
    ``pad(a, interior=1) + pad(b, low=1, interior=1)``, has in its gradient a few such levels
    in one fusion, every one computed at each element)."""
    top: set[int] = set()
    nested: set[int] = set()
    seen: set[tuple] = set()
    pending = [(root, root.shape.rank - 1, 1) for root in roots if root.shape.rank]
    while pending:
        inst, dim, step = pending.pop()
        if (id(inst), dim, step) in seen or len(seen) >= MAX_SPLIT_STEPS:
            continue
        seen.add((id(inst), dim, step))
        op, a = inst.opcode, inst.attrs
        reads = _same_position_reads(inst, dim)
        if reads is not None:
            pending += [(o, d, step) for o, d, _ in reads]
        elif op == "pad" and a["interior_padding"][dim] > 0:
            grid = step * (a["interior_padding"][dim] + 1)
            (top if step == 1 else nested).add(grid)
            if grid <= MAX_INTERLEAVE:
                pending.append((inst.operands[0], dim, grid))
        elif op in ("pad", "concatenate"):
            pending += [(o, dim, step) for o in inst.operands[:1 if op == "pad" else None]]
    step = math.lcm(*top, *nested) if top else 1
    if step > MAX_INTERLEAVE:
        step = math.lcm(*top)
    return step if 1 < step <= MAX_INTERLEAVE and n >= 2 * step else 1


def _full_tiles(b: ir.IRBuilder, lo, hi):
    """Whole tiles of ``TRANSPOSE_TILE`` that fit in ``[lo, hi)`` (none when it is empty)."""
    span = b.sub(hi, lo)
    span = b.select(b.icmp_signed("<", span, _c(0)), _c(0), span)
    return b.sdiv(span, _c(TRANSPOSE_TILE))


def _register_tile_type(dt) -> ir.Type | None:
    """The element type of an output block that ``_transpose_block`` can shuffle: a vector's
    element (an integer or a float), not a complex pair."""
    ty = S.memory_type(dt)
    return ty if isinstance(ty, (ir.IntType, ir.HalfType, ir.FloatType, ir.DoubleType)) else None


# ``_transpose_block``'s three stages: each maps pairs of vectors (x, y) to two vectors,
# indices < 8 picking from x. Per 128-bit lane of 32-bit elements, these are the cheap x86
# shuffles (unpack, shufps, then moves of 128-bit halves); as permutations they hold for any
# element type.
_TRANSPOSE_STAGES = (
    (1, ((0, 8, 1, 9, 4, 12, 5, 13), (2, 10, 3, 11, 6, 14, 7, 15))),
    (2, ((0, 1, 8, 9, 4, 5, 12, 13), (2, 3, 10, 11, 6, 7, 14, 15))),
    (4, ((0, 1, 2, 3, 8, 9, 10, 11), (4, 5, 6, 7, 12, 13, 14, 15))),
)


def _transpose_block(b: ir.IRBuilder, rows: list) -> list:
    """The columns of the 8 x 8 block whose rows are the 8-element vectors ``rows``.

    Stage by stage, vector ``r`` is paired with vector ``r + step`` (``step`` 1, 2, 4 of
    each group of ``2 * step``); their two shuffles replace them. Stage one interleaves
    elements of rows 2r and 2r+1, stage two pairs of them, stage three fours: each element
    of row ``r`` and column ``c`` then sits in vector ``c`` at position ``r``."""
    assert len(rows) == TRANSPOSE_TILE == 8
    mask_type = ir.VectorType(S.I32, 8)
    vecs = list(rows)
    for step, (lo_mask, hi_mask) in _TRANSPOSE_STAGES:
        out = [None] * 8
        for group in range(0, 8, 2 * step):
            for r in range(group, group + step):
                x, y = vecs[r], vecs[r + step]
                out[r] = b.shuffle_vector(x, y, ir.Constant(mask_type, list(lo_mask)))
                out[r + step] = b.shuffle_vector(x, y, ir.Constant(mask_type, list(hi_mask)))
        vecs = out
    # (stage two leaves its pairs' halves in the order 0, 2, 1, 3, so columns 1 and 2, and
    # 5 and 6, come out swapped)
    return [vecs[c] for c in (0, 2, 1, 3, 4, 6, 5, 7)]


def _buffer_base(ptr: ir.Value, bases: set[int]) -> ir.Value:
    """The pointer of ``bases`` (ids) that ``ptr`` (an element address) was computed from
    through GEPs and pointer casts; else the first pointer that is neither."""
    while id(ptr) not in bases:
        if isinstance(ptr, ir.GEPInstr):
            ptr = ptr.pointer
        elif isinstance(ptr, ir.CastInstr) and ptr.opname == "bitcast":
            ptr = ptr.operands[0]
        else:
            break
    return ptr


class KernelBuilder:
    """Builds the kernel of one fused computation into an LLVM module."""

    def __init__(self, module: ir.Module, name: str, fused: Computation, module_consts,
                 short_rows: bool = True, scatter_phase: str | None = None,
                 interleave: bool = True):
        self.module = module
        # Whether loop nests may run in groups (``_minor_interleave``), and whether one did.
        self.interleave = interleave
        self.interleaved = False
        # A scatter's kernel copies the operand, then applies the updates; "copy" or
        # "update" builds one of the two (``scatter_kernel``).
        self.scatter_phase = scatter_phase
        self.short_rows = short_rows  # (may take ``short_rows.ShortRowKernel``)
        self.short_row_kernel = False  # (whether it did)
        self.routines: list[tuple] = []  # small-matrix routines it calls (``linalg_steps``)
        self.name = name
        self.fused = fused
        self.module_consts = module_consts
        self.budget = [MAX_EMISSIONS]  # shared by every emitter of this kernel
        # Reduces whose accumulators (made by ``_accumulator``) hold order keys: id -> is_max.
        self.keyed: dict[int, bool] = {}
        for inst in fused.instructions:
            C.check_instruction(inst)

    def build(self) -> KernelInfo:
        fn = self.fn = ir.Function(self.module, KERNEL_TYPE, self.name)
        fn.args[0].add_attribute("noalias")
        # Kept out of line: the entry function calls it, threads call it on ranges; one copy
        # of the (vectorized) loop code is enough and compiles faster. (Unless it turns out
        # tiny: see the end.)
        fn.attributes.add("noinline")
        entry = fn.append_basic_block("entry")
        b = self.b = ir.IRBuilder(entry)
        self.loops = Loops(b, entry)
        bufs, lo, hi = fn.args
        params = self.fused.parameters
        self.param_ptrs = {}
        for k, p in enumerate(params):
            raw = b.load(b.gep(bufs, [_c(k)], inbounds=True))
            self.param_ptrs[id(p)] = b.bitcast(raw, S.memory_type(p.dtype).as_pointer())
        self.outputs = _outputs(self.fused)
        self.out_ptrs = []
        for k, (inst, leaf) in enumerate(self.outputs):
            raw = b.load(b.gep(bufs, [_c(len(params) + k)], inbounds=True))
            dt = _leaf_shape(inst, leaf).dtype
            self.out_ptrs.append(b.bitcast(raw, S.memory_type(dt).as_pointer()))
        # (Once each: a variadic reduce is an output per leaf.)
        reduces = list({id(inst): inst for inst, _ in self.outputs
                        if inst.opcode == "reduce"}.values())
        from ember.backends.cpu.linalg_steps import LinalgKernel, is_native_linalg
        from ember.backends.cpu.row_kernel import RowKernel, row_kernel_space
        from ember.backends.cpu.short_dots import ShortDotKernel, short_dot_lanes
        from ember.backends.cpu.short_rows import (
            ShortRowKernel,
            short_reduction_space,
            short_row_lanes,
        )

        space = row_kernel_space(self.fused)
        lanes = dot_lanes = None
        if self.short_rows:
            short = space or (short_reduction_space(self.fused) if reduces else None)
            lanes = short_row_lanes(self.fused, short) if short is not None else None
            dot_lanes = short_dot_lanes(self.fused)
        if lanes is not None:
            self.short_row_kernel = True
            info = ShortRowKernel(self, short, lanes).build(lo, hi)
        elif dot_lanes is not None:
            self.short_row_kernel = True
            info = ShortDotKernel(self, dot_lanes).build(lo, hi)
        elif space is not None:
            info = RowKernel(self, space).build(lo, hi)
        elif self.fused.root.opcode == "scatter":
            from ember.backends.cpu.scatter_kernel import ScatterKernel
            info = ScatterKernel(self, self.fused.root).build(lo, hi)
        elif self.fused.root.opcode == "reduce_window" and window_kernel.is_scan(self.fused.root):
            info = self._build_scan(self.fused.root, lo, hi)
        elif window_kernel.is_scatter_call(self.fused.root):
            info = window_kernel.ScatterSelectedKernel(self, self.fused.root).build(lo, hi)
        elif is_native_linalg(self.fused.root):
            info = LinalgKernel(self, self.fused.root).build(lo, hi)
        elif (self.fused.root.opcode == "custom_call"
              and not window_kernel.is_window_call(self.fused.root)):  # (top_k)
            from ember.backends.cpu.topk_kernel import TopKKernel
            info = TopKKernel(self, self.fused.root).build(lo, hi)
        elif self.fused.root.opcode == "concatenate":
            info = self._build_concatenate(self.fused.root, lo, hi)
        elif reduces:
            info = self._build_reduce(reduces, lo, hi)
        else:
            info = self._build_loop(lo, hi)
            work = window_kernel.window_work(self.fused)  # (per output element)
            if work > 1:
                info = KernelInfo(info.name, info.extent, info.work_per_item * work,
                                  info.partial_reducers)
        b.ret_void()
        if info.extent * info.work_per_item <= INLINE_MAX_WORK:
            # A kernel of a few elements (a loop's counter, a scalar index, a dynamic slice
            # of one element) may be inlined where it is called: in a loop's body, its
            # values stay in registers across the kernels (a Gauss-Seidel sweep of 5000
            # one-element updates: 13 -> 5 ns a step). Its outputs are not marked
            # disjoint: inlined into a loop, those marks would hold across iterations too.
            fn.attributes.discard("noinline")
        else:
            self._mark_outputs_disjoint(fn)
        return info

    def _mark_outputs_disjoint(self, fn: ir.Function) -> None:
        """Tells LLVM (alias scopes) that each output buffer overlaps no other buffer the
        kernel touches. True by construction: an output is a fresh array or an arena block
        that buffer assignment gave to no value live during this instruction, its operands
        included. Without it, LLVM must assume a store to an output may change any input
        element: vectorized loops get overlap checks at run time, and values such as
        broadcast constants and lane accumulators are reloaded around every chunk."""
        if not self.out_ptrs:
            return
        module = self.module
        domain = module.add_metadata([ir.MetaDataString(module, f"ember.{self.name}")])
        scopes = [module.add_metadata([ir.MetaDataString(module, f"ember.{self.name}.out{k}"),
                                       domain]) for k in range(len(self.out_ptrs))]
        own = {id(ptr): k for k, ptr in enumerate(self.out_ptrs)}
        inputs = {id(ptr) for ptr in self.param_ptrs.values()}
        bases = inputs | set(own)
        every_output = module.add_metadata(scopes)
        own_scope = [module.add_metadata([scope]) for scope in scopes]
        others = [module.add_metadata(scopes[:k] + scopes[k + 1:])
                  for k in range(len(scopes))]
        for block in fn.blocks:
            for inst in block.instructions:
                if isinstance(inst, ir.LoadInstr):
                    base = _buffer_base(inst.operands[0], bases)
                elif isinstance(inst, ir.StoreInstr):
                    base = _buffer_base(inst.operands[1], bases)
                else:
                    continue
                k = own.get(id(base))
                if k is not None:
                    inst.set_metadata("alias.scope", own_scope[k])
                    if len(scopes) > 1:
                        inst.set_metadata("noalias", others[k])
                elif id(base) in inputs:
                    inst.set_metadata("noalias", every_output)

    def _emitter(self) -> ElementEmitter:
        return ElementEmitter(self.b, self.param_ptrs, self.module_consts, self.budget,
                              self.loops.strided)

    def _clamp_range(self, lo, hi, extent):
        b = self.b
        lo = b.select(b.icmp_signed("<", lo, _c(0)), _c(0), lo)
        hi = b.select(b.icmp_signed(">", hi, _c(extent)), _c(extent), hi)
        return lo, hi

    def _store(self, k, value, index: Index):
        inst, leaf = self.outputs[k]
        shape = _leaf_shape(inst, leaf)
        ptr = self.out_ptrs[k]
        if shape.rank:
            ptr = self.b.gep(ptr, [index.get_linear(self.b)], inbounds=True)
        C.store(self.b, value, ptr, shape.dtype)

    # ------------------------------------------------------------------ loop fusions

    def _build_loop(self, lo, hi) -> KernelInfo:
        by_dims: dict[tuple, list[int]] = {}
        for k, (inst, leaf) in enumerate(self.outputs):
            by_dims.setdefault(_leaf_shape(inst, leaf).dims, []).append(k)
        if len(by_dims) > 1:
            # Outputs over different iteration spaces: one loop each, in a single call. When
            # every loop walks a leading dim of the same extent (an associative scan's level:
            # (16, 63, 128), (16, 1, 128) and (16, 64, 2, 128)), the call takes a range of
            # it, so the kernel splits across threads as a single-shape one does.
            total = sum(math.prod(d) for d in by_dims)
            extents = {self._loop_extent(dims, ks) for dims, ks in by_dims.items()}
            extent = extents.pop() if len(extents) == 1 else 1
            if extent > 1 and not any(_is_flat(self.fused, math.prod(d)) for d in by_dims):
                lo, hi = self._clamp_range(lo, hi, extent)
                for dims, ks in by_dims.items():
                    self._output_loop(dims, ks, lo, hi)
                return KernelInfo(self.name, extent, total // extent, ())
            lo, hi = self._clamp_range(lo, hi, 1)
            with self.b.if_then(self.b.icmp_signed("<", lo, hi)):
                for dims, ks in by_dims.items():
                    self._output_loop(dims, ks, _c(0), _c(self._loop_extent(dims, ks)))
            return KernelInfo(self.name, 1, total, ())
        dims = next(iter(by_dims))
        ks = list(range(len(self.outputs)))
        extent = self._loop_extent(dims, ks)
        lo, hi = self._clamp_range(lo, hi, extent)
        self._output_loop(dims, ks, lo, hi)
        return KernelInfo(self.name, extent, math.prod(dims) // max(extent, 1), ())

    def _streamed_loop(self, dims, ks, lo, hi, body, dtype) -> None:
        """The flat loop ``body(i)`` over ``[lo, hi)`` with its outputs ``ks`` (all of
        ``dtype``) streamed (``STREAM_MIN_BYTES``): plain stores up to the first element
        whose outputs all start a cache line, then blocks of ``STREAM_BLOCK_BYTES`` computed
        into stack buffers and streamed out, then the rest with plain stores. (Outputs whose
        addresses differ by other than whole lines are all stored plainly.)"""
        b, loops = self.b, self.loops
        itemsize = np.dtype(dtype).itemsize
        block = STREAM_BLOCK_BYTES // itemsize
        ty = S.memory_type(dtype)
        buffers = {k: loops.alloca(ir.ArrayType(ty, block), name="stream", align=CACHE_LINE)
                   for k in ks}
        offsets = [b.and_(b.ptrtoint(b.gep(self.out_ptrs[k], [lo]), I64), _c(CACHE_LINE - 1))
                   for k in ks]
        together = ir.Constant(S.I1, 1)
        for offset in offsets[1:]:
            together = b.and_(together, b.icmp_unsigned("==", offset, offsets[0]))
        whole = b.icmp_unsigned("==", b.and_(offsets[0], _c(itemsize - 1)), _c(0))
        head = b.udiv(b.and_(b.sub(_c(CACHE_LINE), offsets[0]), _c(CACHE_LINE - 1)),
                      _c(itemsize))
        start = b.add(lo, head)
        start = b.select(b.and_(b.and_(together, whole), b.icmp_signed("<", start, hi)),
                         start, hi)
        blocks = b.sdiv(b.sub(hi, start), _c(block))
        end = b.add(start, b.mul(blocks, _c(block)))
        loops.loop(lo, start, body, name="head")

        def streamed(blk):
            first = b.add(start, b.mul(blk, _c(block)))

            def element(j):
                em = self._emitter()
                index = Index(dims, linear=b.add(first, j))
                for k in ks:
                    C.store(b, em.emit(self.outputs[k][0], index),
                            b.gep(buffers[k], [_c(0), j], inbounds=True), dtype)
            loops.loop(_c(0), _c(block), element, name="block")
            for k in ks:
                stream_lines(b, loops, buffers[k], b.gep(self.out_ptrs[k], [first]),
                             _c(block * itemsize // CACHE_LINE), dtype)
        loops.loop(_c(0), blocks, streamed, name="blocks", unroll=False, vectorize=False)
        loops.loop(end, hi, body, name="tail")
        fence_streams(b)

    def _loop_extent(self, dims, ks) -> int:
        """The parallel dim's extent of ``_output_loop`` over ``dims``: every element when
        the loop is flat (one linear index), else the leading dim of the walk."""
        size = math.prod(dims)
        return size if not dims or _is_flat(self.fused, size) else \
            self._walk(dims, ks)[0][0]

    def _walk(self, dims, ks) -> tuple[tuple, list[Instruction]]:
        """The dims the loop nest walks for outputs ``ks`` (of ``dims``) and the instruction
        computed at each position: the outputs themselves, or, when every output is a reshape
        merging dims of operands of one shape, those operands over their own dims (a reshape
        keeps linear positions, so the stores land in the same places, and the operand's
        indexing needs no division: ``jnp.repeat(x, 3)`` read ``x[i // 3]`` with vector
        gathers, 1.6 ns an element)."""
        roots = [self.outputs[k] for k in ks]
        if all(leaf == 0 and inst.opcode == "reshape" for inst, leaf in roots):
            sources = {tuple(inst.operands[0].dims) for inst, _ in roots}
            src = next(iter(sources))
            # (and the walk's leading dim still splits across the threads)
            if len(sources) == 1 and len(src) > len(dims) >= 1 and \
                    src[0] >= min(dims[0], WALK_MIN_EXTENT):
                return src, [inst.operands[0] for inst, _ in roots]
        return tuple(dims), [inst for inst, _ in roots]

    def _output_loop(self, dims, ks, lo, hi) -> None:
        """Computes outputs ``ks`` (all of ``dims``) over ``[lo, hi)`` of the parallel dim
        (``_loop_extent``)."""
        size = math.prod(dims)
        if not dims or _is_flat(self.fused, size):
            def body(i):
                em = self._emitter()
                index = Index(dims, linear=i)
                for k in ks:
                    self._store(k, em.emit(self.outputs[k][0], index), index)
            dtype = self._stream_dtype(ks, size)
            if dtype is not None:
                self._streamed_loop(dims, ks, lo, hi, body, dtype)
                return
            self.loops.loop(lo, hi, body)
            return
        dims, roots = self._walk(dims, ks)
        ranges = [(lo, hi)] + [(_c(0), _c(d)) for d in dims[1:]]

        def values(multi):
            em = self._emitter()
            index = Index(dims, multi=multi)
            out = []
            for k, root in zip(ks, roots):
                value = em.emit(root, index)
                if isinstance(value, window_kernel.Leaves):  # (a variadic reduce_window)
                    value = value[self.outputs[k][1]]
                out.append(value)
            return index, out

        def nest_body(multi):
            index, vals = values(multi)
            for k, value in zip(ks, vals):
                self._store(k, value, index)
        tiled = _transposed_dim(self.fused, dims, roots)
        step = _minor_interleave(roots, dims[-1]) if self.interleave else 1
        self.interleaved |= step > 1
        if tiled is None and step > 1:
            self.loops.nest(ranges, nest_body, interleave=step)
        elif tiled is None:
            splits = _minor_splits(roots, dims[-1])
            dtype = self._streamed_rows_dtype(dims, ks) if not splits else None
            if dtype is not None:
                self._streamed_rows(dims, ks, ranges, values, dtype)
            else:
                self.loops.nest(ranges, nest_body, splits=splits)
        else:
            self._tiled_nest(dims, ranges, tiled, nest_body, ks, values)

    def _stream_dtype(self, ks, size: int):
        """The dtype of outputs ``ks`` (of ``size`` elements each) when they are streamed:
        one streamable dtype and ``STREAM_MIN_BYTES`` in all; else None."""
        dtypes = {_leaf_shape(*self.outputs[k]).dtype for k in ks}
        if len(dtypes) != 1 or not streamable(next(iter(dtypes))):
            return None
        dtype = next(iter(dtypes))
        return dtype if size * dtype.itemsize * len(ks) >= STREAM_MIN_BYTES else None

    def _streamed_rows_dtype(self, dims, ks):
        """``_stream_dtype`` of outputs ``ks`` of a loop nest over ``dims`` (the walk's),
        streamed a row at a time (``_streamed_rows``): rows (the minor dim) of whole cache
        lines and at most ``STREAM_ROW_MAX_BYTES``; else None."""
        dtype = self._stream_dtype(ks, math.prod(dims)) if len(dims) >= 2 else None
        if dtype is None:
            return None
        row_bytes = dims[-1] * dtype.itemsize
        return None if row_bytes % CACHE_LINE or row_bytes > STREAM_ROW_MAX_BYTES else dtype

    def _streamed_rows(self, dims, ks, ranges, values, dtype) -> None:
        """The loop nest over ``ranges`` with each row (the minor dim) of outputs ``ks``
        computed into stack buffers (``values(multi)``: the index and the outputs' values),
        then streamed to the outputs (``stream_lines``)."""
        b, loops, n = self.b, self.loops, dims[-1]
        buffers = {k: loops.alloca(ir.ArrayType(S.memory_type(dtype), n), name="stream",
                                   align=CACHE_LINE) for k in ks}

        def row(outer):
            def element(j):
                _, vals = values(tuple(outer) + (j,))
                for k, value in zip(ks, vals):
                    C.store(b, value, b.gep(buffers[k], [_c(0), j], inbounds=True), dtype)
            loops.loop(_c(0), _c(n), element, name="srow")
            start = Index(dims, multi=tuple(outer) + (_c(0),)).get_linear(b)
            for k in ks:
                stream_lines(b, loops, buffers[k], b.gep(self.out_ptrs[k], [start]),
                             _c(n * dtype.itemsize // CACHE_LINE), dtype)
        loops.nest(ranges[:-1], row)
        fence_streams(b)

    def _tiled_nest(self, dims, ranges, tiled: int, body, ks, values) -> None:
        """The loop nest over ``ranges`` (of ``dims``) with dim ``tiled`` and the last dim in
        square tiles of ``TRANSPOSE_TILE``: a transpose's reads then walk ``TRANSPOSE_TILE``
        long runs of its operand's minor dim (``tiled``) while its writes walk runs of the
        output's, instead of reading one element per page across a whole output row (every
        read a TLB miss: a 4096 x 4096 float32 transpose took 128 ms, tiled 33). The dims
        between stay outside the tile loops. Whole tiles of outputs ``ks`` go through
        registers (``_register_tile``, given ``values(multi)``: the index and the outputs'
        values there) when every output's element fits a vector; the ragged edges, and
        tiles of complex outputs, run ``body(multi)`` element by element."""
        b, loops, t = self.b, self.loops, TRANSPOSE_TILE
        last = len(ranges) - 1
        llvm_support.keep_vector_width(self.fn)
        dts = [_leaf_shape(*self.outputs[k]).dtype for k in ks]
        blocks = None
        if all(_register_tile_type(dt) is not None for dt in dts):
            blocks = [loops.alloca(ir.ArrayType(_register_tile_type(dt), t * t),
                                   name="tile", align=64) for dt in dts]

        def at(acc, i, j):
            return tuple(i if e == tiled else j if e == last else acc[e]
                         for e in range(len(ranges)))

        def elements(acc, i_range, j_range):
            loops.loop(*i_range, lambda i: loops.loop(
                *j_range, lambda j: body(at(acc, i, j)), name="tile.j"), name="tile.i")

        def tile_row(acc):  # (the tiles of one run of ``TRANSPOSE_TILE`` rows)
            i0 = acc[tiled]
            whole, rest = divmod(dims[last], t)  # (the last dim's range is all of it)

            def tile(k):
                j0 = b.mul(k, _c(t))
                if blocks is None:
                    elements(acc, (i0, b.add(i0, _c(t))), (j0, b.add(j0, _c(t))))
                else:
                    self._register_tile(dims, ks, dts, blocks, values,
                                        lambda i, j: at(acc, i, j), i0, j0)
            loops.loop(_c(0), _c(whole), tile, name=f"t{last}", unroll=False)
            if rest:
                elements(acc, (i0, b.add(i0, _c(t))), (_c(whole * t), _c(dims[last])))

        def level(d, acc):
            lo, hi = ranges[d]
            if d == last:
                tile_row(acc)
            elif d == tiled:
                tiles = _full_tiles(b, lo, hi)
                loops.loop(_c(0), tiles,
                           lambda k: level(d + 1, acc + [b.add(lo, b.mul(k, _c(t)))]),
                           name=f"t{d}", unroll=False)
                # (the rows past the whole tiles: fewer than ``TRANSPOSE_TILE``)
                start = b.add(lo, b.mul(tiles, _c(t)))
                with b.if_then(b.icmp_signed("<", start, hi)):
                    rest(d + 1, acc + [None], (start, hi))
            else:
                loops.loop(lo, hi, lambda i: level(d + 1, acc + [i]), name=f"d{d}")

        def rest(d, acc, i_range):  # (the dims after ``tiled``, for the rows ``i_range``)
            if d == last:
                elements(acc, i_range, ranges[last])
            else:
                loops.loop(*ranges[d], lambda i: rest(d + 1, acc + [i], i_range),
                           name=f"r{d}")
        level(0, [])

    def _register_tile(self, dims, ks, dts, blocks, values, at, i0, j0) -> None:
        """The tile of outputs ``ks`` (of dtypes ``dts``, over ``dims``) at rows ``[i0, i0 +
        T)`` of the tiled dim and ``[j0, j0 + T)`` of the last (``at(i, j)``: the multi-index
        there), through the stack ``blocks``: computed column by column (the loop along the tiled
        dim, which LLVM vectorizes: contiguous reads of the transposed operand), stored
        column by column, then loaded as rows, transposed in registers and stored as
        contiguous runs of the output rows."""
        b, loops, t = self.b, self.loops, TRANSPOSE_TILE

        def column(j):
            def element(i):
                _, vals = values(at(b.add(i0, i), b.add(j0, j)))
                slot = b.add(b.mul(j, _c(t)), i)
                for block, value, dt in zip(blocks, vals, dts):
                    C.store(b, value, b.gep(block, [_c(0), slot], inbounds=True), dt)
            loops.loop(_c(0), _c(t), element, name="tile.a", unroll=False, width=t)
        loops.loop(_c(0), _c(t), column, name="tile.c")
        for k, block, dt in zip(ks, blocks, dts):
            vec = ir.VectorType(_register_tile_type(dt), t).as_pointer()
            base = b.bitcast(block, vec)
            size = np.dtype(dt).itemsize
            rows = [b.load(b.gep(base, [_c(j)], inbounds=True), align=size) for j in range(t)]
            for i, row in enumerate(_transpose_block(b, rows)):
                index = Index(dims, multi=at(b.add(i0, _c(i)), j0))
                ptr = b.gep(self.out_ptrs[k], [index.get_linear(b)], inbounds=True)
                b.store(row, b.bitcast(ptr, vec), align=size)

    # ------------------------------------------------------------------ concatenates

    def _build_concatenate(self, inst, lo, hi) -> KernelInfo:
        """A fusion whose result is a concatenate: a loop nest per operand writing its slab
        of the result (an element is computed from its own operand only, not picked among
        every operand's). Work items are the indices of dim 0: stacked along it, a call
        runs the part of each operand's slab within its range (as whole operands, a one-row
        piece beside a large one left the large one to one thread: ``jnp.gradient``'s edges
        made it 2x slower)."""
        b, d, dims = self.b, inst.attrs["dimension"], inst.dims
        pieces, offset = [], 0
        for operand in inst.operands:
            if operand.shape.size:
                pieces.append((offset, operand))
            offset += operand.dims[d]

        def copy(offset, operand, rows):
            ranges = [rows] + [(_c(0), _c(n)) for n in operand.dims[1:]]

            def element(multi):
                at = list(multi)
                at[d] = b.add(at[d], _c(offset))
                value = self._emitter().emit(operand, Index(operand.dims, multi=multi))
                self._store(0, value, Index(dims, multi=tuple(at)))
            self.loops.nest(ranges, element, prefix="c")
        extent = dims[0] if inst.shape.size else 0
        lo, hi = self._clamp_range(lo, hi, extent)
        if d == 0:
            for offset, operand in pieces:
                start = b.sub(lo, _c(offset))
                start = b.select(b.icmp_signed("<", start, _c(0)), _c(0), start)
                end = b.sub(hi, _c(offset))
                end = b.select(b.icmp_signed(">", end, _c(operand.dims[0])),
                               _c(operand.dims[0]), end)
                with b.if_then(b.icmp_signed("<", start, end)):
                    copy(offset, operand, (start, end))
        else:
            def row(i):
                for offset, operand in pieces:
                    copy(offset, operand, (i, b.add(i, _c(1))))
            self.loops.loop(lo, hi, row, name="row")
        return KernelInfo(self.name, extent, inst.shape.size // max(extent, 1), ())

    # ------------------------------------------------------------------ scans

    def _build_scan(self, inst, lo, hi) -> KernelInfo:
        """A cumulative scan from the identity (``scan_kernel``), whose float sums follow the
        evaluator's scan rule; a scan's windows from another init run in the library, as the
        kernel cannot see a parameter's value. Other ``reduce_window``s are element ops
        (``window_kernel``)."""
        from ember.backends.cpu.scan_kernel import ScanKernel
        from ember.compiler.reduce_window import prefix_scan

        scan = prefix_scan(inst)
        if scan is None:
            raise UnsupportedOp("a scan's windows from an init that is not the identity")
        return ScanKernel(self, inst, *scan).build(lo, hi)

    # ------------------------------------------------------------------ input fusions

    def _build_reduce(self, reduces, lo, hi) -> KernelInfo:
        b = self.b
        first = reduces[0]
        in_dims = first.operands[0].dims
        red = sorted(first.attrs["dimensions"])
        kept = [d for d in range(len(in_dims)) if d not in red]
        if _is_column_reduce(reduces, in_dims, red):
            return self._build_column_reduce(reduces, in_dims, red, lo, hi)
        kept_dims = [in_dims[d] for d in kept]
        red_dims = [in_dims[d] for d in red]
        # A full reduction splits over its first reduced dim when every reduce is simple
        # with an identity init (then per-call partials combine correctly).
        partials = self._partial_reducers(reduces) if red and not kept else ()
        split_reduced = bool(partials)
        if kept:
            extent = kept_dims[0]
        elif split_reduced:
            extent = red_dims[0]
        else:
            extent = 1
        lo, hi = self._clamp_range(lo, hi, extent)
        partials, wide_outs = self._float64_partials(partials)

        def kept_body(kidx):
            self._reduce_row(reduces, in_dims, kept, red, kidx, lo, hi, split_reduced,
                             wide_outs, extent)

        if kept:
            ranges = [(lo, hi)] + [(_c(0), _c(d)) for d in kept_dims[1:]]
            # Rows of at least ROW_VECTOR_MIN contiguous reduced elements are vectorized
            # along the row, never across rows: once LLVM unrolls a short row, it would
            # vectorize the kept loop, gathering every element ((1e6, 16).sum(1): 10 ms,
            # along rows 2.7 ms). Shorter rows (and argmax/argmin) gain from that loop.
            along_rows = (bool(red) and red[-1] == len(in_dims) - 1
                          and in_dims[-1] >= ROW_VECTOR_MIN
                          and (self._arg_reduction(reduces, red) is None
                               or _arg_vector_row_fits(in_dims, red[0])))
            self.loops.nest(ranges, kept_body, prefix="k", vectorize=not along_rows)
        else:
            # extent 1 and no split: run when this call's range covers item 0.
            if split_reduced:
                kept_body(())
            else:
                then = b.icmp_signed("<", lo, hi)
                with b.if_then(then):
                    kept_body(())
        work = math.prod(in_dims) // max(extent, 1)
        return KernelInfo(self.name, extent, work, partials)

    def _reduce_row(self, reduces, in_dims, kept, red, kidx, lo, hi, split_reduced,
                    wide_outs=frozenset(), extent=1):
        """Reduces over all reduced dims at kept position ``kidx`` and stores the results
        (the float sums at outputs ``wide_outs`` by ``_store_sum``)."""
        b, loops = self.b, self.loops
        arg = self._arg_reduction(reduces, red)
        if arg is not None:
            self._arg_reduce_row(*arg, in_dims, kept, red[0], kidx)
            return
        # Accumulator slots: per reduce, one per variadic input; initialized from the inits.
        init_em = self._emitter()
        accs, slot_types = {}, {}
        for r in reduces:
            n = len(r.operands) // 2
            slots = []
            for j in range(n):
                slot = self._accumulator(r, init_em.emit(r.operands[n + j], _scalar_index()))
                slots.append(slot)
                slot_types[id(r)] = slot.allocated_type
            accs[id(r)] = slots
        # Float sums (and products): lanes of narrow accumulators per block, float64 across
        # blocks.
        float_sums = [r for r in reduces if simple_reducer(r.calls[0]) in LANE_REDUCERS
                      and len(r.operands) == 2 and S.is_float(r.dtype)] if red else []
        n_inner = in_dims[red[-1]] if red else 1
        # (Exact: every run of the inner dim covers all of it, unless calls split it.)
        exact = len(red) == 1 and not split_reduced
        unordered = [(r, accs[id(r)][0], slot_types[id(r)]) for r in reduces
                     if len(r.operands) == 2 and simple_reducer(r.calls[0]) in
                     UNORDERED_REDUCERS]
        lanes = LaneSums(self, float_sums, n_inner, exact=exact, unordered=tuple(unordered))
        red_ranges = [(_c(0), _c(in_dims[d])) for d in red]
        if split_reduced:
            red_ranges[0] = (lo, hi)
        elementwise_outs = [k for k, (inst, _) in enumerate(self.outputs)
                            if inst.opcode != "reduce"]

        def element(ridx):
            full = [None] * len(in_dims)
            for d, v in zip(kept, kidx):
                full[d] = v
            for d, v in zip(red, ridx):
                full[d] = v
            index = Index(in_dims, multi=tuple(full))
            em = self._emitter()
            for r in reduces:
                n = len(r.operands) // 2
                values = [em.emit(r.operands[j], index) for j in range(n)]
                slots = lanes.current.get(id(r)) or accs[id(r)]
                self._combine(r, slots, values)
            for k in elementwise_outs:
                self._store(k, em.emit(self.outputs[k][0], index), index)

        def inner(outer_ridx):
            lo_in, hi_in = red_ranges[-1]
            lanes.accumulate(lo_in, hi_in, lambda j: element(outer_ridx + (j,)))

        lanes.clear()
        if red:
            if len(red) > 1:
                loops.nest(red_ranges[:-1], inner, prefix="ro")
            else:
                inner(())
        else:
            element(())
        # Results.
        totals = {}
        for r in float_sums:
            totals[id(r)] = lanes.fold(r, self._widen(b.load(accs[id(r)][0])), lanes.total(r))
            b.store(self._narrow(totals[id(r)], r.dtype), accs[id(r)][0])
        kidx_full = Index([in_dims[d] for d in kept], multi=tuple(kidx))
        if wide_outs:
            whole = b.and_(b.icmp_signed("==", lo, _c(0)),
                           b.icmp_signed("==", hi, _c(extent)))
        for k, (inst, leaf) in enumerate(self.outputs):
            if k in wide_outs:  # (a full reduction's: no kept dims)
                self._store_sum(k, totals[id(inst)], kidx_full, whole)
            elif inst.opcode == "reduce":
                self._store(k, self._from_accumulator(inst, b.load(accs[id(inst)][leaf])),
                            kidx_full)

    def _arg_reduction(self, reduces, red):
        """``(reduce, "max" | "min")`` when the fusion is one argmax/argmin over one dim:
        values and an iota along that dim, initialized with the extreme value's identity
        (see ``ember.compiler.arg_reducer``); else None."""
        if len(reduces) != 1 or len(red) != 1 or len(self.outputs) != 2:
            return None
        r = reduces[0]
        if len(r.operands) != 4 or any(inst is not r for inst, _ in self.outputs):
            return None
        values, positions, init_value, init_index = r.operands
        if positions.opcode != "iota" or positions.attrs["iota_dimension"] != red[0] or \
                positions.dtype.kind != "i" or init_value.opcode != "constant" or \
                init_index.opcode != "constant" or \
                not (S.is_float(values.dtype) or values.dtype.kind in "iu"):
            return None
        kind = arg_reducer_kind(r.calls[0])
        if kind is None or not is_reducer_identity(
                np.maximum if kind == "max" else np.minimum,
                np.asarray(init_value.attrs["value"])):
            return None
        return r, kind

    def _arg_reduce_row(self, r, kind, in_dims, kept, dim, kidx):
        """argmax/argmin of one row: one unrolled pass over a short row, else two
        vectorizable passes. With the init the extreme's identity, an init pair can only tie
        with an element of the same value, where the smaller index wins."""
        b = self.b
        values, positions, init_value, init_index = r.operands
        vdt, idt = values.dtype, positions.dtype
        n = in_dims[dim]
        em = self._emitter()
        v0, i0 = (em.emit(x, _scalar_index()) for x in (init_value, init_index))
        out = Index([in_dims[d] for d in kept], multi=tuple(kidx))

        def at(j):
            full = [None] * len(in_dims)
            for d, v in zip(kept, kidx):
                full[d] = v
            full[dim] = j
            return Index(in_dims, multi=tuple(full))

        def store(value, index):
            for k, (_, leaf) in enumerate(self.outputs):
                self._store(k, value if leaf == 0 else index, out)

        if n == 0:
            store(v0, i0)
            return
        if n <= ARG_TINY_ROW_MAX:
            m, w = self._arg_tiny_row(values, kind, n, at)
        elif _arg_vector_row_fits(in_dims, dim):
            m, w = self._arg_vector_row(self._row_loader(values, n, at), vdt, kind, n)
        else:
            m, w = self._arg_two_passes(values, kind, n, at, v0)
        index = S.convert(b, w, np.dtype(np.int64), idt)
        # (The init is the extreme's identity: it can only tie, and wins a tie by a smaller
        # position.)
        init_first = b.and_(self._same(vdt, v0, m), b.icmp_signed("<", i0, index))
        store(m, b.select(init_first, i0, index))

    def _same(self, vdt, v, m):
        """``v == m``, NaN equal to NaN."""
        b = self.b
        if not S.is_float(vdt):
            return b.icmp_signed("==", v, m) if vdt.kind == "i" else \
                b.icmp_unsigned("==", v, m)
        both_nan = b.and_(b.fcmp_unordered("uno", v, v), b.fcmp_unordered("uno", m, m))
        return b.or_(b.fcmp_ordered("==", v, m), both_nan)

    def _arg_two_passes(self, values, kind, n, at, v0):
        """(extreme, its first position as i64) of a row in two vectorizable passes: the
        extreme value (NaN if any), then the first position holding it."""
        b, loops, vdt = self.b, self.loops, values.dtype
        best = loops.alloca(v0.type)
        b.store(v0, best)

        def extreme(j):
            v = self._emitter().emit(values, at(j))
            b.store(S.binary(b, "maximum" if kind == "max" else "minimum", b.load(best), v,
                             vdt, vdt, {}), best)
        loops.loop(_c(0), _c(n), extreme, name="argbest")
        m = b.load(best)
        first = loops.alloca(I64)
        b.store(_c(n), first)

        def find(j):
            hit = self._same(vdt, self._emitter().emit(values, at(j)), m)
            cand = b.select(hit, j, _c(n))
            cur = b.load(first)
            b.store(b.select(b.icmp_signed("<", cand, cur), cand, cur), first)
        loops.loop(_c(0), _c(n), find, name="argfirst")
        w = b.load(first)  # (< n: the extreme is an element's value or the init's, a tie)
        return self._emitter().emit(values, at(w)), w

    def _row_loader(self, values, n, at):
        """``load(j)``: the element ``j`` (an i64 value or constant) of a row of ``n``
        ``values`` (``at(j)`` its index). Values costing more than ARG_UNROLL_MAX_COST are
        computed once into a row on the stack by a loop and loaded from there."""
        b = self.b
        if cone_cost(values, ARG_UNROLL_MAX_COST) <= ARG_UNROLL_MAX_COST:
            return lambda j: self._emitter().emit(values, at(j))
        row = self.loops.alloca(ir.ArrayType(S.value_type(values.dtype), n), name="arg_row")

        def fill(j):
            b.store(self._emitter().emit(values, at(j)), b.gep(row, [_c(0), j]))
        self.loops.loop(_c(0), _c(n), fill, name="argrow")
        return lambda j: b.load(b.gep(row, [_c(0), j]))

    def _arg_vector_row(self, load, vdt, kind, n):
        """(extreme, its first position as i64) of a contiguous row of a few dozen elements
        (``load(j)`` the element at ``j``) held in one vector (LLVM turns the row's element
        loads into vector loads): a tree of compare-and-selects for the extreme, then the
        first set bit of the mask of lanes equal to it, or of the NaN lanes when there are
        any. Lanes past the row's end repeat its first element, which changes neither."""
        b = self.b
        xs = [load(_c(j)) for j in range(n)]
        lanes = 1 << (n - 1).bit_length()
        vec = ir.Constant(ir.VectorType(xs[0].type, lanes), ir.Undefined)
        for j in range(lanes):
            vec = b.insert_element(vec, xs[j] if j < n else xs[0], ir.Constant(S.I32, j))

        op = ">" if kind == "max" else "<"
        if S.is_float(vdt):
            def better(x, y):
                return b.fcmp_ordered(op, x, y)
        else:
            cmp = b.icmp_signed if vdt.kind == "i" else b.icmp_unsigned

            def better(x, y):
                return cmp(op, x, y)
        tree, width = vec, lanes
        while width > 1:  # (NaNs are ignored here and found by the mask below)
            width //= 2
            low, high = _lanes_of(b, tree, 0, width), _lanes_of(b, tree, width, width)
            tree = b.select(better(high, low), high, low)
        m = b.extract_element(tree, ir.Constant(S.I32, 0))
        splat = b.shuffle_vector(
            b.insert_element(ir.Constant(vec.type, ir.Undefined), m, ir.Constant(S.I32, 0)),
            ir.Constant(vec.type, ir.Undefined),
            ir.Constant(ir.VectorType(S.I32, lanes), [ir.Constant(S.I32, 0)] * lanes))
        bits = ir.IntType(lanes)
        if S.is_float(vdt):
            hits = b.bitcast(b.fcmp_ordered("==", vec, splat), bits)
            nans = b.bitcast(b.fcmp_unordered("uno", vec, vec), bits)
            hits = b.select(b.icmp_unsigned("!=", nans, ir.Constant(bits, 0)), nans, hits)
        else:
            hits = b.bitcast(b.icmp_signed("==", vec, splat), bits)
        w = b.cttz(hits, ir.Constant(ir.IntType(1), 1))
        w = b.zext(w, I64) if lanes < 64 else w
        return load(w), w

    def _arg_tiny_row(self, values, kind, n, at):
        """(extreme, its first position as i64) of a row of a few elements in one unrolled
        pass keeping the best value and its position: an element replaces the best only when
        strictly better (a NaN beats any number, nothing beats a NaN), so the first of equal
        extremes wins. LLVM vectorizes the straight-line code across rows, 32-bit positions
        included ((1e6, 3) float32: 0.98 -> 0.31 ms, (1e6, 8): 2.0 -> 1.2 ms)."""
        b, vdt = self.b, values.dtype
        op = ">" if kind == "max" else "<"

        def better(v, best):
            if not S.is_float(vdt):
                return (b.icmp_signed if vdt.kind == "i" else b.icmp_unsigned)(op, v, best)
            new_nan = b.and_(b.fcmp_unordered("uno", v, v), b.fcmp_ordered("ord", best, best))
            return b.or_(b.fcmp_ordered(op, v, best), new_nan)

        best, where = self._emitter().emit(values, at(_c(0))), ir.Constant(S.I32, 0)
        for j in range(1, n):
            v = self._emitter().emit(values, at(_c(j)))
            take = better(v, best)
            best = b.select(take, v, best)
            where = b.select(take, ir.Constant(S.I32, j), where)
        return best, b.zext(where, I64)

    # ------------------------------------------------------------------ column reductions

    def _build_column_reduce(self, reduces, in_dims, red, lo, hi) -> KernelInfo:
        """A reduction that keeps the minor dim: per work item, a block (``_column_blocks``) of
        contiguous kept elements ("columns") with an accumulator array each; the reduced
        dims run outside, a vectorizable loop over the block's columns inside.

        The input's dims are ``(outer kept..., then reduced and kept dims mixed, ...,
        trailing kept)`` where the trailing kept dims (after the last reduced dim) flatten
        to ``cols`` contiguous elements. Work items are (kept index before the trailing run,
        column block) pairs. Float sums accumulate ``BLOCK`` reduced positions at a time in
        the element type, then into float64 accumulators. A variadic reduce (argmax/argmin:
        values and indices, see ``_column_arg_reducer``) has an accumulator array per input,
        combined by its body (``_combine``) in the order of the generic path: the reduced
        positions in row-major order, never split across calls.
        """
        b, loops = self.b, self.loops
        last = red[-1]
        cols = math.prod(in_dims[last + 1:])
        mid = [d for d in range(last) if d not in red]  # kept dims before the trailing run
        width, n_blocks = _column_blocks(cols, reduces)
        n_mid = math.prod(in_dims[d] for d in mid)
        n_red = math.prod(in_dims[d] for d in red)
        items = n_mid * n_blocks
        partials = self._partial_reducers(reduces)
        split_rows = items < COLUMN_SPLIT_ROWS_BELOW and n_red > 1 and bool(partials)
        # Calls cover work items, or with ``split_rows`` reduced rows of every item.
        extent = n_red if split_rows else items
        lo, hi = self._clamp_range(lo, hi, extent)
        row_lo, row_hi = (lo, hi) if split_rows else (_c(0), _c(n_red))
        init_em = self._emitter()
        # Accumulators keyed (id(reduce), input): one array per variadic input.
        leaves = {(id(r), j): leaf for r in reduces
                  for j, leaf in enumerate(_reduce_leaves(r))}
        inits = {(id(r), j): self._to_accumulator(r, init_em.emit(
                     r.operands[len(r.operands) // 2 + j], _scalar_index()))
                 for r in reduces for j in range(len(r.operands) // 2)}
        float_sums = [r for r in reduces if len(r.operands) == 2 and
                      simple_reducer(r.calls[0]) == "add" and S.is_float(r.dtype)]
        arrays = {key: loops.alloca(ir.ArrayType(_held_type(inits[key].type), width), align=64)
                  for key in leaves}
        wide = {(id(r), 0): loops.alloca(ir.ArrayType(S.F64, width), align=64)
                for r in float_sums}
        elementwise_outs = [k for k, (inst, _) in enumerate(self.outputs)
                            if inst.opcode != "reduce"]
        partials, wide_outs = self._float64_partials(partials if split_rows else ())
        if wide_outs:
            whole = b.and_(b.icmp_signed("==", lo, _c(0)),
                           b.icmp_signed("==", hi, _c(extent)))

        def slot(arr, c):
            return b.gep(arr, [_c(0), c], inbounds=True)

        def item(t):
            m_lin = b.udiv(t, _c(n_blocks))
            c0 = b.mul(b.urem(t, _c(n_blocks)), _c(width), flags=("nsw", "nuw"))
            c1 = b.add(c0, _c(width), flags=("nsw", "nuw"))
            c1 = b.select(b.icmp_signed(">", c1, _c(cols)), _c(cols), c1)
            m_multi = Index([in_dims[d] for d in mid], linear=m_lin).get_multi(b)
            n = b.sub(c1, c0)

            def fill(arrs, value_of):
                def body(c):
                    for key, arr in arrs.items():
                        _store_held(b, value_of(key), slot(arr, c))
                loops.loop(_c(0), n, body, name="fill")
            fill(arrays, lambda key: inits[key])
            fill(wide, lambda key: self._widen(inits[key]))

            def rows(r_lo, r_hi):
                def row(r_lin):
                    r_multi = Index([in_dims[d] for d in red], linear=r_lin).get_multi(b)

                    def column(c):
                        col = b.add(c0, c, flags=("nsw", "nuw"))
                        full = [None] * len(in_dims)
                        for d, v in zip(mid, m_multi):
                            full[d] = v
                        for d, v in zip(red, r_multi):
                            full[d] = v
                        tail = Index(in_dims[last + 1:], linear=col)
                        for d, v in zip(range(last + 1, len(in_dims)), tail.get_multi(b)):
                            full[d] = v
                        # (row-major: the flat index of (prefix, col) is prefix * cols + col)
                        prefix = Index(in_dims[:last + 1], multi=tuple(full[:last + 1]))
                        lin = b.add(b.mul(prefix.get_linear(b), _c(cols), flags=("nsw", "nuw")),
                                    col, flags=("nsw", "nuw"))
                        index = Index(in_dims, multi=tuple(full), linear=lin)
                        em = self._emitter()
                        for r in reduces:
                            n_in = len(r.operands) // 2
                            self._combine(r, [slot(arrays[(id(r), j)], c) for j in range(n_in)],
                                          [em.emit(r.operands[j], index) for j in range(n_in)])
                        values = [(k, em.emit(self.outputs[k][0], index))
                                  for k in elementwise_outs]
                        for k, v in values:
                            self._store(k, v, index)
                    loops.loop(_c(0), n, column, name="col")
                # (Across rows, a vectorized loop would gather a column's elements: when the
                # column loop is short enough to unroll, its elements vectorize instead.)
                loops.loop(r_lo, r_hi, row, name="red", vectorize=False)

            if not float_sums:
                rows(row_lo, row_hi)
            else:
                def block(blk):
                    start = b.add(row_lo, b.mul(blk, _c(BLOCK), flags=("nsw", "nuw")),
                                  flags=("nsw", "nuw"))
                    end = b.add(start, _c(BLOCK), flags=("nsw", "nuw"))
                    end = b.select(b.icmp_signed(">", end, row_hi), row_hi, end)
                    fill({key: arrays[key] for key in wide},
                         lambda key: ir.Constant(S.value_type(leaves[key].dtype), 0.0))
                    rows(start, end)

                    def flush(c):
                        for key in wide:
                            w = slot(wide[key], c)
                            part = self._widen(b.load(slot(arrays[key], c)))
                            b.store(b.fadd(b.load(w), part), w)
                    loops.loop(_c(0), n, flush, name="flush")
                n_row_blocks = b.sdiv(b.add(b.sub(row_hi, row_lo), _c(BLOCK - 1)), _c(BLOCK))
                loops.loop(_c(0), n_row_blocks, block, name="blk")

            def store(c):
                col = b.add(c0, c, flags=("nsw", "nuw"))
                out_lin = b.add(b.mul(m_lin, _c(cols), flags=("nsw", "nuw")), col,
                                flags=("nsw", "nuw"))
                for k, (inst, leaf) in enumerate(self.outputs):
                    if inst.opcode != "reduce":
                        continue
                    key = (id(inst), leaf)
                    index = Index(_leaf_shape(inst, leaf).dims, linear=out_lin)
                    if k in wide_outs:
                        self._store_sum(k, b.load(slot(wide[key], c)), index, whole)
                        continue
                    if key in wide:
                        value = self._narrow(b.load(slot(wide[key], c)), inst.dtype)
                    else:
                        value = self._from_accumulator(
                            inst, _load_held(b, slot(arrays[key], c), inits[key].type))
                    self._store(k, value, index)
            loops.loop(_c(0), n, store, name="out")

        if split_rows:
            loops.loop(_c(0), _c(items), item, name="item")
            return KernelInfo(self.name, extent, items * width, partials)
        loops.loop(lo, hi, item, name="item")
        return KernelInfo(self.name, extent, n_red * width, ())

    def _store_sum(self, k, total, index: Index, whole) -> None:
        """Stores the float64 sum ``total`` at output ``k`` of a kernel with float64 partial
        results ("add_f64"): rounded to the output's dtype by a call covering the whole
        extent (``whole``), unrounded into the float64 partial buffer the executable gives
        a call covering part of it."""
        b = self.b
        inst, leaf = self.outputs[k]
        with b.if_else(whole) as (final, partial):
            with final:
                self._store(k, self._narrow(total, _leaf_shape(inst, leaf).dtype), index)
            with partial:
                ptr = b.bitcast(self.out_ptrs[k], S.F64.as_pointer())
                if _leaf_shape(inst, leaf).rank:
                    ptr = b.gep(ptr, [index.get_linear(b)], inbounds=True)
                b.store(total, ptr)

    def _float64_partials(self, partials: tuple) -> tuple[tuple, set]:
        """(``partials`` with its float sum outputs marked "add_f64", those outputs): their
        calls store float64 partial sums (``_store_sum``), which the executable adds in
        float64 and rounds once, as one call over everything would."""
        outs = {k for k, op in enumerate(partials) if op == "add" and S.is_float(
            _leaf_shape(*self.outputs[k]).dtype)}
        return tuple("add_f64" if k in outs else op for k, op in enumerate(partials)), outs

    def _partial_reducers(self, reduces) -> tuple:
        """``KernelInfo.partial_reducers`` for calls that each reduce part of the reduced
        positions: per output leaf its reducer's opcode (None for elementwise outputs);
        empty unless every reduce is simple with an identity init (then partial results
        combine into the whole one)."""
        ops = {}
        for r in reduces:
            op = simple_reducer(r.calls[0])
            if op is None or len(r.operands) != 2 or not _is_identity(op, r.operands[1]):
                return ()
            ops[id(r)] = op
        return tuple(ops.get(id(inst)) if inst.opcode == "reduce" else None
                     for inst, _ in self.outputs)

    def _widen(self, v):
        return v if v.type == S.F64 else self.b.fpext(v, S.F64)

    def _narrow(self, v, dt):
        ty = S.value_type(dt)
        if ty == S.F64:
            return v
        return S.convert(self.b, v, np.dtype(np.float64), dt)

    def _to_accumulator(self, r, value: ir.Value) -> ir.Value:
        """``value`` of reduce ``r`` as its accumulators hold it: a float maximum's or
        minimum's hold order keys (``S.extreme_key``), which ``_combine`` and ``_merge``
        keep; ``_from_accumulator`` turns them back into values. Other accumulators hold
        values."""
        is_max = _keyed_extreme(r)
        if is_max is None:
            return value
        self.keyed[id(r)] = is_max
        return S.extreme_key(self.b, value, is_max)

    def _from_accumulator(self, r, held: ir.Value) -> ir.Value:
        """The value of reduce ``r`` that an accumulator holding ``held`` stands for."""
        is_max = self.keyed.get(id(r))
        if is_max is None:
            return held
        return S.from_extreme_key(self.b, held, S.value_type(r.dtype), is_max)

    def _accumulator(self, r, init: ir.Value) -> ir.Value:
        """A stack slot for a running result of reduce ``r``, starting at ``init``."""
        init = self._to_accumulator(r, init)
        slot = self.loops.alloca(init.type)
        self.b.store(init, slot)
        return slot

    def _merge(self, r, slot, other: ir.Value) -> None:
        """Combines ``other``, the content of another slot of ``r``'s (a lane), into
        ``slot``."""
        is_max = self.keyed.get(id(r))
        if is_max is None:
            self._combine(r, [slot], [other])
            return
        self.b.store(S.extreme_of_keys(self.b, self.b.load(slot), other, is_max), slot)

    def _combine(self, r, slots, values):
        """``slots := body(slots, values)`` for one reduce."""
        b = self.b
        is_max = self.keyed.get(id(r))
        if is_max is not None:
            key = S.extreme_key(b, values[0], is_max)
            b.store(S.extreme_of_keys(b, b.load(slots[0]), key, is_max), slots[0])
            return
        body = r.calls[0]
        op = simple_reducer(body)
        if op is not None and len(slots) == 1:
            acc = _load_held(b, slots[0], values[0].type)
            dt = r.dtype if not r.shape.is_tuple else r.shape.tuple_shapes[0].dtype
            if op == "add" and S.is_float(dt):
                out = b.fadd(acc, values[0])
                out = S.round_low_float(b, out, dt)
            elif op == "multiply" and S.is_float(dt):
                out = S.round_low_float(b, b.fmul(acc, values[0]), dt)
            else:
                out = S.binary(b, op, acc, values[0], dt, dt, {})
            _store_held(b, out, slots[0])
            return
        accs = [_load_held(b, s, v.type) for s, v in zip(slots, values)]
        outs = emit_computation(b, body, accs + list(values), self.module_consts)
        for s, v in zip(slots, outs):
            _store_held(b, v, s)


def _held_type(ty: ir.Type) -> ir.Type:
    """The element type of an accumulator array for values of type ``ty``: a byte for a
    pred, as LLVM does not vectorize loads and stores of ``i1`` (not a whole byte)."""
    return S.I8 if ty == S.I1 else ty


def _store_held(b: ir.IRBuilder, value: ir.Value, ptr: ir.Value) -> None:
    """Stores an accumulator's ``value`` at ``ptr`` (a pred into a byte as 0 or 1)."""
    if value.type == S.I1 and ptr.type.pointee == S.I8:
        value = b.zext(value, S.I8)
    b.store(value, ptr)


def _load_held(b: ir.IRBuilder, ptr: ir.Value, ty: ir.Type) -> ir.Value:
    """The accumulator value of type ``ty`` held at ``ptr`` (see ``_store_held``)."""
    value = b.load(ptr)
    return b.trunc(value, S.I1) if ty == S.I1 and value.type == S.I8 else value


# Reducers whose result does not depend on the order of combining (float maximum/minimum
# included: LLVM's maximum/minimum propagate NaN and order -0 below +0, as do the integer
# max/min of order keys they accumulate as).
UNORDERED_REDUCERS = frozenset({"maximum", "minimum", "and", "or"})


def _keyed_extreme(r: Instruction) -> bool | None:
    """For a float maximum (True) or minimum (False) reduce, whose accumulators hold order
    keys (``KernelBuilder._accumulator``); None for other reduces."""
    if len(r.operands) != 2 or not S.is_float(r.dtype):
        return None
    return {"maximum": True, "minimum": False}.get(simple_reducer(r.calls[0]))


# Float reducers that ``LaneSums`` accumulates in lanes: sums, and products (LLVM vectorizes
# neither on its own without reassociating; a (2000, 2000) float32 product along rows took
# 1.5 ms as one chain of multiplications, 0.36 in lanes, against JAX's 0.7). (A product whose
# partial products overflow and underflow can give NaN where another order gives inf or 0:
# any order is as good for those.)
LANE_REDUCERS = ("add", "multiply")


class LaneSums:
    """Float sums of a loop over a reduced dim, accumulated in ``lane_count(length)`` lanes
    (and products alike: ``LANE_REDUCERS``, multiplying where sums add, from ones).

    Element ``j`` of a block of ``BLOCK`` elements adds into lane ``(j - block start) %
    lanes`` of a narrow (element type) lane array: the block's whole chunks of ``lanes``
    elements into the main lanes, the rest into the tail lanes. After each block, both add
    into float64 lanes, and ``total`` combines those by a fixed pairwise tree. Every lane
    loop is elementwise across lanes, so LLVM vectorizes it (keeping the main lanes in
    vector registers) without reassociating anything: the order of the additions is the one
    written here, whatever the optimization level, so tiered compilation's first and later
    calls agree bit for bit.

    ``length``: the most elements one result sums along the loop; ``exact``: every
    ``accumulate`` covers exactly ``length`` elements (then a tail that is always empty is
    left out). Usage per result: ``clear()``, ``accumulate(start, end, element)`` for each
    run of the inner dim (``element(j)`` combines into ``current[id(reduce)]``), then
    ``total(r)``.

    ``unordered``: (reduce, accumulator slot, its type) of the loop's other reductions whose
    result does not depend on the order of combining (max, min, and, or: see
    ``UNORDERED_REDUCERS``). Beside float sums they get lanes too: each ``accumulate`` spreads
    the accumulator over its lanes and combines them back at the end. (In one scalar, a
    maximum beside the sums was reduced across the vector every chunk: 3.5x slower.)
    """

    def __init__(self, kb: KernelBuilder, sums: list, length: int, exact: bool = False,
                 unordered: tuple = ()):
        self.kb, self.b, self.sums = kb, kb.b, sums
        self.products = {id(r) for r in sums if simple_reducer(r.calls[0]) == "multiply"}
        self.lanes = lane_count(length)
        self.unordered = list(unordered) if sums else []
        self.spread = {id(r): kb.loops.alloca(ir.ArrayType(ty, self.lanes), align=64)
                       for r, _, ty in self.unordered}
        self.blocked = length > BLOCK
        # One block per result: its flush stores the float64 lanes, nothing to clear.
        self.single_block = exact and not self.blocked
        with_tail = not (self.single_block and length % self.lanes == 0)

        def arrays(ty):
            return {id(r): kb.loops.alloca(ir.ArrayType(ty(r), self.lanes), align=64)
                    for r in sums}
        self.narrow = arrays(lambda r: S.value_type(r.dtype))
        self.tail = arrays(lambda r: S.value_type(r.dtype)) if with_tail else None
        self.wide = arrays(lambda r: S.F64)
        self.current: dict = {}

    def _slot(self, array, lane):
        return self.b.gep(array, [_c(0), lane], inbounds=True)

    def identity(self, r, ty: ir.Type) -> ir.Constant:
        """The value ``r``'s lanes start from: zero for a sum, one for a product."""
        return ir.Constant(ty, 1.0 if id(r) in self.products else 0.0)

    def fold(self, r, a: ir.Value, b: ir.Value) -> ir.Value:
        """``a + b`` for a sum's lanes, ``a * b`` for a product's."""
        return (self.b.fmul if id(r) in self.products else self.b.fadd)(a, b)

    def _each_lane(self, body, count: int | None = None, name: str = "ln"):
        self.kb.loops.loop(_c(0), _c(self.lanes if count is None else count), body, name=name)

    def _narrow_arrays(self):
        return (self.narrow,) if self.tail is None else (self.narrow, self.tail)

    def clear(self) -> None:
        """Zeroes the float64 lanes (before a result's first ``accumulate``)."""
        if self.sums and not self.single_block:
            self._each_lane(lambda ln: [self.b.store(self.identity(r, S.F64),
                                                     self._slot(self.wide[id(r)], ln))
                                        for r in self.sums], name="clr")

    def accumulate(self, start, end, element) -> None:
        """``element(j)`` for ``j`` in ``[start, end)``, in order, each with its lane (a plain
        loop when there are no float sums)."""
        b, loops, n_lanes = self.b, self.kb.loops, self.lanes
        if not self.sums:
            loops.loop(start, end, element, name="r")
            return

        def lanes(c_start, count, arrays):
            def lane(ln):
                for r in self.sums:
                    self.current[id(r)] = [self._slot(arrays[id(r)], ln)]
                for r, _, _ in self.unordered:
                    self.current[id(r)] = [self._slot(self.spread[id(r)], ln)]
                element(b.add(c_start, ln, flags=("nsw", "nuw")))
                self.current.clear()
            loops.loop(_c(0), count, lane, name="lane")

        def block(b_start, b_end):
            for r in self.sums:
                zero = self.identity(r, S.value_type(r.dtype))
                for array in (arrays[id(r)] for arrays in self._narrow_arrays()):
                    self._each_lane(lambda ln, a=array, zero=zero: b.store(
                        zero, self._slot(a, ln)), name="zn")
            full = b.udiv(b.sub(b_end, b_start), _c(n_lanes))
            # Whole chunks (a constant trip count: the lanes stay in vector registers; the
            # chunk loop is not unrolled, or its copies would not vectorize), then the rest.
            loops.loop(_c(0), full, lambda c: lanes(
                b.add(b_start, b.mul(c, _c(n_lanes), flags=("nsw", "nuw")), flags=("nsw", "nuw")),
                _c(n_lanes), self.narrow), name="chunk", unroll=False)
            if self.tail is not None:
                t_start = b.add(b_start, b.mul(full, _c(n_lanes), flags=("nsw", "nuw")),
                                flags=("nsw", "nuw"))
                lanes(t_start, b.sub(b_end, t_start), self.tail)

            def flush(ln):
                for r in self.sums:
                    w = self._slot(self.wide[id(r)], ln)
                    value = None if self.single_block else b.load(w)
                    for arrays in self._narrow_arrays():
                        part = self.kb._widen(b.load(self._slot(arrays[id(r)], ln)))
                        value = part if value is None else self.fold(r, value, part)
                    b.store(value, w)
            self._each_lane(flush, name="fl")

        for r, slot, _ in self.unordered:  # each lane starts from the accumulator
            spread, value = self.spread[id(r)], b.load(slot)
            self._each_lane(lambda ln, a=spread, v=value: b.store(v, self._slot(a, ln)),
                            name="sp")
        if not self.blocked:
            block(start, end)
        else:
            def blocked(blk):
                b_start = b.add(start, b.mul(blk, _c(BLOCK), flags=("nsw", "nuw")),
                                flags=("nsw", "nuw"))
                b_end = b.add(b_start, _c(BLOCK), flags=("nsw", "nuw"))
                block(b_start, b.select(b.icmp_signed(">", b_end, end), end, b_end))
            count = b.sdiv(b.add(b.sub(end, start), _c(BLOCK - 1)), _c(BLOCK))
            loops.loop(_c(0), count, blocked, name="blk")
        for r, slot, _ in self.unordered:  # and the lanes combine back into it
            self._each_lane(lambda ln, r=r, slot=slot: self.kb._merge(
                r, slot, b.load(self._slot(self.spread[id(r)], ln))), name="ga")

    def total(self, r):
        """The float64 sum (product) of ``r``'s lanes (pairwise: lane ``i`` adds lane
        ``i + half``),
        as straight-line code on loaded values: folding in place in the lane array made the
        vectorized tree store and reload overlapping vectors, stalling on every level (a sum
        over rows of 64 elements spent most of its time there)."""
        b, wide = self.b, self.wide[id(r)]
        n = self.lanes
        if n > 1 and n & (n - 1) == 0:
            # The same tree on one vector: each level adds its upper half to its lower half
            # (written on scalars, LLVM widened each lane on its own and added them one by
            # one: most of a row kernel's time on rows of 32). Other lane counts keep the
            # scalar tree: as vectors with odd levels padded, sums over rows of 5 ran 3x
            # slower.
            vec = ir.VectorType(S.F64, n)
            v = b.load(b.bitcast(wide, vec.as_pointer()), align=64)
            while n > 1:
                n //= 2
                v = self.fold(r, _lanes_of(b, v, 0, n), _lanes_of(b, v, n, n))
            return b.extract_element(v, ir.Constant(S.I32, 0))
        values = [b.load(self._slot(wide, _c(ln))) for ln in range(self.lanes)]
        while len(values) > 1:
            half = (len(values) + 1) // 2
            values = [self.fold(r, values[i], values[i + half]) if i + half < len(values)
                      else values[i] for i in range(half)]
        return values[0]


def _lanes_of(b: ir.IRBuilder, v: ir.Value, start: int, count: int) -> ir.Value:
    """Lanes ``start .. start + count - 1`` of the vector ``v``, as a vector of ``count``."""
    mask = ir.Constant(ir.VectorType(S.I32, count),
                       [ir.Constant(S.I32, start + k) for k in range(count)])
    return b.shuffle_vector(v, v, mask)


def lane_count(length: int) -> int:
    """The lanes of a float sum along ``length`` elements (``LaneSums``)."""
    if length < SHORT_SUM_MAX:
        return max(1, min(SHORT_SUM_LANES, length))
    return LANES


def _column_blocks(cols: int, reduces) -> tuple[int, int]:
    """(block width, number of blocks) of a column reduction's ``cols`` contiguous kept
    elements: as few blocks as the accumulators' budget (``COLUMN_BLOCK_BYTES``) allows, of
    even widths (multiples of 16 elements).

    Wide blocks matter for memory traffic: a work item reads a block-wide piece of every
    reduced row, and pieces much narrower than a 4 KiB page, a page apart, defeat the CPU's
    stream prefetchers (a (16384, 1024) float32 max took 4.3 ms in 256-wide blocks, 1.3 ms
    reading whole rows). Every accumulator counts: an argmax's index array as well as its
    value array, a float sum's float64 array as well as its element-type one."""
    per_column = sum(_accumulator_bytes(leaf.dtype) for r in reduces
                     for leaf in _reduce_leaves(r))
    per_column += sum(8 for r in reduces if not r.shape.is_tuple and
                      simple_reducer(r.calls[0]) == "add" and S.is_float(r.dtype))
    most = max(16, COLUMN_BLOCK_BYTES // per_column // 16 * 16)
    per_block = -(-cols // -(-cols // most))
    width = min(cols, -(-per_block // 16) * 16)
    return width, -(-cols // width)


def _reduce_leaves(r: Instruction) -> list:
    """The shapes of a reduce's results: one per variadic input."""
    return list(r.shape.tuple_shapes) if r.shape.is_tuple else [r.shape]


def _accumulator_bytes(dt) -> int:
    """Bytes of one accumulator element: its register type's (float16/bfloat16
    accumulate in float32)."""
    dt = np.dtype(dt)
    return max(dt.itemsize, 4) if S.is_float(dt) else dt.itemsize


def _arg_vector_row_fits(in_dims, dim: int) -> bool:
    """Whether an argmax/argmin over ``dim`` takes one vector per row
    (``KernelBuilder._arg_vector_row``): a contiguous row too long for the unrolled pass."""
    return dim == len(in_dims) - 1 and ARG_TINY_ROW_MAX < in_dims[dim] <= ARG_VECTOR_ROW_MAX


def _column_arg_reducer(r: Instruction) -> bool:
    """Whether ``r`` is an argmax/argmin over (values, indices) (``arg_reducer_kind``).
    Its body is then a strict weak order on (value, index) pairs (NaN the extreme, ties to
    the smaller index) that keeps one side of a pair: folding in any bracketing of the same
    element order gives the same pair, bit for bit, as the evaluator's tree does."""
    return len(r.operands) == 4 and r.shape.is_tuple and \
        arg_reducer_kind(r.calls[0]) is not None


def _is_column_reduce(reduces, in_dims, red) -> bool:
    """Whether the reduces keep the minor dim (a run of at least ``COLUMN_MIN`` contiguous
    kept elements after the last reduced dim) with simple single-input reducers or
    argmax/argmin reducers (``_column_arg_reducer``): then the column kernel
    (``KernelBuilder._build_column_reduce``) runs them."""
    if not red or red[-1] == len(in_dims) - 1:
        return False
    if math.prod(in_dims[red[-1] + 1:]) < COLUMN_MIN or math.prod(in_dims) == 0:
        return False
    return all((not r.shape.is_tuple and len(r.operands) == 2
                and simple_reducer(r.calls[0]) is not None) or _column_arg_reducer(r)
               for r in reduces)


def emit_computation(b: ir.IRBuilder, comp: Computation, args: list, module_consts) -> list:
    """Emits a scalar computation (a reducer body) on register values; returns its outputs."""
    em = ElementEmitter(b, {}, module_consts)
    scalar = _scalar_index()
    for p, v in zip(comp.parameters, args):
        em.memo[(id(p),) + scalar.key()] = v
    root = comp.root
    if root.opcode == "tuple":
        return [em.emit(o, scalar) for o in root.operands]
    return [em.emit(root, scalar)]
