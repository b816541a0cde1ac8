"""Compiles an optimized HLO module into one LLVM module and a plan of steps that runs it.

Every instruction of the entry computation becomes a *step*:

- ``KernelStep``: a fusion (or a lone shape op, reduce, gather, dynamic slice or update,
  single-operand scatter, ``reduce_window``, ``ember.top_k`` custom call or a custom call of
  ``select_and_scatter_add``) compiled to a native kernel;
- ``DotStep``: ``dot_general`` through BLAS: a float product calls CBLAS ``gemm`` from
  native code on its operands as they lie (``gemm_layout``: batch dims anywhere, each
  matrix's rows a stride apart), or on copies of those it cannot read so, made by a
  transpose kernel (``_gemm_operand_copies``); others (other dtypes, operands a library
  call made) go through NumPy's ``matmul``;
- ``LibraryStep`` (the library thunk): everything without a kernel — sort, scatters of
  several operands or with batching dims, custom calls, and fusions whose
  ops have no native code (complex ``exp``, ``lgamma``, ...) — run by the NumPy evaluator,
  the interpreter's rules;
- control flow runs the steps of its called computations, each planned like the entry
  (its own buffer assignment, in a region of the arena of its own, which only the regions of
  computations never live at the same time share: a case's branches, a loop's condition
  and body): ``WhileStep`` (the
  condition's steps, a read of its pred, the body's steps, then copies (``CopyStep``) moving the
  body's results into the loop state), ``CaseStep`` (the steps of the branch its index
  picks; an out-of-range index runs the last branch, as in StableHLO), and ``call``, whose
  callee's steps are inlined. A while's state lives in arena buffers of its own: the
  operands are copied in before the loop and the state out after it;
- parameters, constants, tuples and ``get_tuple_element`` only name buffers.

All kernels of a module go into one LLVM module (one LLVM compile per program). When every
step is native (kernels, ``gemm`` calls, copies, and loops and cases made of those), the
module also gets a function running them in order on buffers laid out by buffer
assignment (``executable.native_call`` picks which): ``entry``, on the calling thread, for
a small program, or ``steps``, its kernels with enough work on the parallel runtime and its
large products on BLAS's threads: a program runs with a single native call. A while whose
condition and body are all native gets a function ``loop_N`` running the whole loop, which
the steps call (or the executable, when other steps are not native).

A *buffer* is one leaf array of an instruction's result; ``BufferRef`` says where it lives:
a parameter, a module constant, an output array, or a temporary at an offset of the arena
(one allocation per run, laid out from ``assign_buffers``: values that are not live at the
same time share memory).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from ember.backends.cpu import scalar_ops as S
from ember.backends.cpu.executable import (
    AFTER_BLAS_MIN_WORK,
    BATCH_SPLIT_MAX_WORK,
    CBLAS_NO_TRANS,
    CBLAS_ROW_MAJOR,
    CBLAS_TRANS,
    GEMM_TASK_UNIT,
    PARALLEL_MIN_WORK,
    TASKS_PER_THREAD,
    blas_global,
    blas_routine,
    blas_threads_pay,
    called_routine,
    gemm_split,
    gemm_task_name,
    gemv_arguments,
    native_call,
    native_gemm,
    plan_steps,
    split_gemm,
    steps_name,
    whole_gemm,
    whole_gemm_arguments,
    whole_gemms,
)
from ember.backends.cpu.kernel_gen import (
    I8P,
    SMALL_DOT_K,
    KernelBuilder,
    KernelInfo,
    _strides,
    address_slot,
    is_small_dot,
)
from ember.backends.cpu.linalg_steps import is_native_linalg
from ember.backends.cpu.scalar_ops import UnsupportedOp
from ember.backends.cpu.topk_kernel import is_native_top_k
from ember.backends.cpu.window_kernel import is_window_call
from ember.compiler.buffer_assignment import assign_buffers, leaf_range
from ember.compiler.hlo import (
    CONTROL_FLOW,
    ELEMENTWISE,
    EXPENSIVE_ELEMENTWISE,
    Computation,
    Instruction,
    Module,
)
from ember.compiler.passes.cse import computation_fingerprint

ALIGN = 64
# Ops that get a kernel of their own when they stand alone in the entry computation.
STANDALONE_KERNEL_OPS = ELEMENTWISE | frozenset({
    "broadcast_in_dim", "reshape", "transpose", "slice", "concatenate", "pad", "reverse",
    "iota", "reduce", "gather", "dynamic_slice", "dynamic_update_slice", "scatter",
    "reduce_window", "dot_general",
})
# Scatters into operands of at least this many elements take two kernels, a copy of the
# operand split across threads and then the updates (``KernelBuilder``'s ``scatter_phase``):
# x.at[0].set(1.0) on a (10000, 128) float32 x took 222 us in one kernel, 4x a plain pass.
SPLIT_SCATTER_MIN_SIZE = 1 << 16
_STRUCTURAL = frozenset({"parameter", "constant", "tuple", "get_tuple_element"})


@dataclass(frozen=True)
class BufferRef:
    """Where a leaf buffer lives: ``kind`` is "param" (``index``), "const" (``index`` into
    the constants), "output" (``index``), "temp" (arena ``offset``) or "value" (a library
    result, ``index`` into the run's value slots)."""

    kind: str
    index: int
    dtype: np.dtype
    dims: tuple


@dataclass
class KernelStep:
    info: KernelInfo
    inputs: list[BufferRef]
    outputs: list[BufferRef]
    # ``(output, input)`` pairs (``_same_index_params``): the kernel may write the output
    # over the input's buffer.
    same_index: frozenset = frozenset()
    # The work of an element relative to a plain one (``_element_cost``): a native loop
    # runs the kernel on threads when its elements times this reach PARALLEL_MIN_WORK.
    cost: int = 1


@dataclass
class DotStep:
    inst: Instruction
    inputs: list[BufferRef]
    output: BufferRef
    # ``gemm_layout``'s call, made from native code (a step of a native loop), or None
    # (NumPy's matmul runs the dot).
    gemm: tuple | None = None


@dataclass
class LibraryStep:
    inst: Instruction
    inputs: list[list[BufferRef]]  # the leaves of each operand
    outputs: list[BufferRef]


@dataclass
class CopyStep:
    """Copies the buffer ``src`` into ``dst`` (same dtype and dims)."""

    src: BufferRef
    dst: BufferRef


@dataclass
class WhileStep:
    """``while``: runs ``cond`` and reads ``pred``; while it is true, runs ``body`` (which
    ends with the copies of the new state into the state buffers). ``loop`` names the native
    function running the whole loop (None when a step is not native)."""

    cond: list
    pred: BufferRef
    body: list
    loop: str | None


@dataclass
class UpdateStep:
    """``dynamic_update_slice`` in place: writes ``update`` into ``dst`` at ``starts``
    (each clamped so that the window fits, as in StableHLO)."""

    update: BufferRef
    dst: BufferRef
    starts: list[BufferRef]


@dataclass
class CaseStep:
    """``case``: runs ``branches[index]`` (the last branch for an index out of range)."""

    index: BufferRef
    branches: list[list]


_NATIVE_INDEX = (np.dtype(np.int32), np.dtype(np.int64))
# A loop-invariant parameter or output smaller than this is copied into the arena, 64-byte
# aligned, rather than read where it is (NumPy aligns arrays to 16 bytes).
INVARIANT_ALIAS_MIN_BYTES = 1 << 16
# A guess of a loop's trip count, for the work measures that decide the optimization level.
LOOP_TRIPS_ESTIMATE = 1024
# The fewest native steps a segment of a program stepped from Python holds: one step gains
# nothing (a kernel's call from Python costs what a segment's does, ~2 us).
MIN_SEGMENT_STEPS = 2


def nested_kernels(steps, trips: int = 1):
    """``(kernel step, runs per program run)`` for each kernel in ``steps``, nested ones
    (in loops and branches) included; a loop counts ``LOOP_TRIPS_ESTIMATE`` runs."""
    for step in steps:
        if isinstance(step, KernelStep):
            yield step, trips
        elif isinstance(step, WhileStep):
            yield from nested_kernels(step.cond + step.body, trips * LOOP_TRIPS_ESTIMATE)
        elif isinstance(step, CaseStep):
            for branch in step.branches:
                yield from nested_kernels(branch, trips)


def is_native(step) -> bool:
    """Whether ``step`` runs in native code without Python (kernels, and copies, loops and
    cases of those)."""
    if isinstance(step, KernelStep):
        return True
    if isinstance(step, CopyStep):
        return step.src.kind != "value"
    if isinstance(step, UpdateStep):
        return step.update.kind != "value" and all(
            r.kind != "value" and np.dtype(r.dtype) in _NATIVE_INDEX for r in step.starts)
    if isinstance(step, WhileStep):
        return step.loop is not None
    if isinstance(step, DotStep):
        return step.gemm is not None
    if isinstance(step, CaseStep):
        return step.index.kind != "value" and all(is_native(s) for b in step.branches
                                                  for s in b)
    return False


class ConstantPool:
    """Array constants of the module as LLVM globals (deduplicated by content)."""

    def __init__(self, module: ir.Module, prefix: str):
        self.module = module
        self.prefix = prefix
        self.arrays: list[np.ndarray] = []
        self.names: list[str] = []
        self._by_key: dict = {}

    def index_of(self, value: np.ndarray) -> int:
        value = np.asarray(value)
        if not value.flags.c_contiguous:  # (ascontiguousarray would make 0-d arrays 1-d)
            value = value.copy(order="C")
        key = (value.dtype.str, value.shape, value.tobytes())
        i = self._by_key.get(key)
        if i is None:
            i = self._by_key[key] = len(self.arrays)
            name = f"{self.prefix}_const_{i}"
            data = bytearray(value.tobytes()) or bytearray(1)
            g = ir.GlobalVariable(self.module, ir.ArrayType(S.I8, len(data)), name)
            g.initializer = ir.Constant(ir.ArrayType(S.I8, len(data)), data)
            g.global_constant = True
            g.align = ALIGN
            self.arrays.append(value)
            self.names.append(name)
        return i

    def pointer(self, b: ir.IRBuilder, i: int, ty: ir.Type) -> ir.Value:
        g = self.module.globals[self.names[i]]
        return b.bitcast(g, ty)

    def typed_pointer(self, b: ir.IRBuilder, value: np.ndarray) -> ir.Value:
        """A pointer to ``value``'s elements (for kernels reading constants in fusions)."""
        return self.pointer(b, self.index_of(value), S.memory_type(value.dtype).as_pointer())


def _has_kernel(inst: Instruction) -> bool:
    """Whether a lone ``inst`` of ``STANDALONE_KERNEL_OPS`` may get a kernel: a
    ``dot_general`` only when it contracts few elements (others go to BLAS)."""
    if inst.opcode == "dot_general":
        return is_small_dot(inst)
    return True


# A dot in a loop body contracting up to LOOP_DOT_MAX_K elements, with at most
# LOOP_DOT_MAX_WORK products in all, is a kernel summing chunks of SMALL_DOT_K products
# (``_loop_dot_computation``): the loop then runs without leaving native code, where a
# BLAS call from Python costs ~10 us per iteration (an RNN step's matmuls are this small).
# A dot whose kernel's vector lanes would stride through the rhs calls the native loop's
# ``gemm`` instead, where it can (``_lanes_stride_rhs``).
LOOP_DOT_MAX_K = 128
LOOP_DOT_MAX_WORK = 1 << 16
_FLOAT32_64 = (np.dtype(np.float32), np.dtype(np.float64))


def gemm_layout(inst: Instruction) -> tuple | None:
    """``(letter, trans_a, trans_b, m, n, k, lda, ldb, batch, batches)``: a float32/64
    ``dot_general`` as ``batch`` row-major CBLAS ``gemm`` calls on its operands' buffers as
    they lie, or None for other dots, and for empty ones. Each operand's matrix is its free
    and contracting dims (``_matrix_layout``: each group strided as one dim, one group
    contiguous: a transposed matrix where that is the rows); its batch dims may lie
    anywhere: ``batches`` holds ``(size, lhs_stride, rhs_stride)`` per batch dim, outer
    to inner, merged where they can be (empty for one matrix), so that matrix ``i`` of the
    result (its batch dims lead) reads the operands' matrices at those strides
    (``_matrix_offsets``)."""
    a = inst.attrs
    lhs, rhs = inst.operands
    if inst.dtype not in _FLOAT32_64 or lhs.dtype != inst.dtype or rhs.dtype != inst.dtype:
        return None
    lb, rb = list(a["lhs_batching_dimensions"]), list(a["rhs_batching_dimensions"])
    lc, rc = list(a["lhs_contracting_dimensions"]), list(a["rhs_contracting_dimensions"])
    lf = [d for d in range(lhs.shape.rank) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.shape.rank) if d not in rb and d not in rc]
    # (by side, not identity: ``x @ x`` reads one instruction twice)
    matrix_a = _matrix_layout(lhs.dims, lf, lc)
    matrix_b = _matrix_layout(rhs.dims, rc, rf)
    if matrix_a is None or matrix_b is None:
        return None
    (trans_a, lda), (trans_b, ldb) = matrix_a, matrix_b
    m, k, n = (math.prod(lhs.dims[d] for d in lf), math.prod(lhs.dims[d] for d in lc),
               math.prod(rhs.dims[d] for d in rf))
    batch = math.prod(lhs.dims[d] for d in lb)
    if 0 in (m, n, k, batch):
        return None
    lhs_strides, rhs_strides = _strides(lhs.dims), _strides(rhs.dims)
    batches: list[list[int]] = []
    for dl, dr in zip(lb, rb):
        size, sa, sb = lhs.dims[dl], lhs_strides[dl], rhs_strides[dr]
        if size == 1:
            continue
        if batches and batches[-1][1] == sa * size and batches[-1][2] == sb * size:
            batches[-1] = [batches[-1][0] * size, sa, sb]  # (one dim with the inner one)
        else:
            batches.append([size, sa, sb])
    letter = "s" if inst.dtype == np.float32 else "d"
    return (letter, trans_a, trans_b, m, n, k, lda, ldb, batch,
            tuple(tuple(b) for b in batches))


def _gemm_operand_copies(inst: Instruction) -> tuple | None:
    """``(dot, copies)``: a float32/64 ``dot_general`` that ``gemm_layout`` cannot read as
    its operands lie (a transpose folded into it split a matrix's rows, say) as the same
    product of the operands it cannot read transposed (batch dims, then each matrix's rows
    and columns), which it can: ``copies`` holds ``(side, transpose)`` for each; None where
    that does not help (other dtypes, empty products). The free dims keep their order, so
    the result lies as it did."""
    if inst.dtype not in _FLOAT32_64 or any(op.dtype != inst.dtype for op in inst.operands):
        return None
    attrs, operands, copies = dict(inst.attrs), list(inst.operands), []
    for side, prefix in enumerate(("lhs", "rhs")):
        op = operands[side]
        batch = list(attrs[f"{prefix}_batching_dimensions"])
        contracting = list(attrs[f"{prefix}_contracting_dimensions"])
        free = [d for d in range(op.shape.rank) if d not in batch and d not in contracting]
        rows, cols = (free, contracting) if side == 0 else (contracting, free)
        if _matrix_layout(op.dims, rows, cols) is not None:
            continue
        perm = batch + rows + cols
        transpose = Instruction("transpose", [op], op.shape.with_dims([op.dims[d] for d in perm]),
                                {"permutation": tuple(perm)}, name=f"{inst.name}.{prefix}")
        attrs[f"{prefix}_batching_dimensions"] = tuple(range(len(batch)))
        attrs[f"{prefix}_contracting_dimensions"] = tuple(perm.index(d) for d in contracting)
        operands[side] = transpose
        copies.append((side, transpose))
    dot = Instruction("dot_general", operands, inst.shape, attrs, name=inst.name)
    return (dot, copies) if copies and gemm_layout(dot) is not None else None


def _matrix_layout(dims, rows: list, cols: list) -> tuple[bool, int] | None:
    """``(trans, ld)``: how a row-major CBLAS call reads the matrix whose row index runs
    over dims ``rows`` and column index over ``cols`` (row-major over each list) of an
    array of ``dims``: each group's dims (size-1 ones aside) one after another in memory,
    and one group contiguous: the columns (``ld`` the rows' stride), or the rows (``trans``:
    it lies as its transpose, ``ld`` the columns' stride); None where it cannot. A group of
    one element lies either way; the other group is the contiguous one where it can be, so
    a vector's elements lie one after another."""
    strides = _strides(dims)

    def run(group):  # (elements, stride of its innermost dim), or None: not one stride
        group = [d for d in group if dims[d] != 1]
        for outer, inner in zip(group, group[1:]):
            if strides[outer] != strides[inner] * dims[inner]:
                return None
        return math.prod(dims[d] for d in group), strides[group[-1]] if group else None
    row_run, col_run = run(rows), run(cols)
    if row_run is None or col_run is None:
        return None
    (n_rows, row_stride), (n_cols, col_stride) = row_run, col_run
    # (ld >= the contiguous group's length: its dims come last, all others before them)
    if col_stride in (None, 1) and not (n_cols == 1 and row_stride == 1):
        return False, max(1, n_cols) if row_stride is None else row_stride
    if row_stride in (None, 1):
        return True, max(1, n_rows) if col_stride is None else col_stride
    return None


def _loop_dot_computation(inst: Instruction) -> Computation | None:
    """A fused computation for a small ``dot_general`` in a loop body with one contracting
    dim: the sum, in order, of dots over consecutive ``SMALL_DOT_K`` slices of it (each a
    small dot, computed in registers); None for other dots."""
    a = inst.attrs
    lhs, rhs = inst.operands
    # (float32/64 only: a float16 dot would round each chunk's sum)
    if len(a["lhs_contracting_dimensions"]) != 1 or inst.dtype not in _FLOAT32_64:
        return None
    (lc,), (rc,) = a["lhs_contracting_dimensions"], a["rhs_contracting_dimensions"]
    k = lhs.dims[lc]
    if k > LOOP_DOT_MAX_K or inst.shape.size * k > LOOP_DOT_MAX_WORK:
        return None
    params = [Instruction("parameter", [], op.shape, {"index": i}, name=f"p{i}")
              for i, op in enumerate(inst.operands)]
    body: list[Instruction] = []
    total = None
    for lo in range(0, k, SMALL_DOT_K):
        hi = min(lo + SMALL_DOT_K, k)
        parts = []
        for p, d in ((params[0], lc), (params[1], rc)):
            dims = list(p.dims)
            dims[d] = hi - lo
            starts, limits = [0] * p.shape.rank, list(p.dims)
            starts[d], limits[d] = lo, hi
            parts.append(Instruction("slice", [p], p.shape.with_dims(dims),
                                     {"start_indices": tuple(starts),
                                      "limit_indices": tuple(limits),
                                      "strides": (1,) * p.shape.rank}, name=f"s{lo}"))
        dot = Instruction("dot_general", parts, inst.shape, a, name=f"dot{lo}")
        body += parts + [dot]
        if total is not None:
            dot = Instruction("add", [total, dot], inst.shape, name=f"sum{lo}")
            body.append(dot)
        total = dot
    return Computation(f"loop_dot.{inst.name}", params + body, total)


def _lanes_stride_rhs(inst: Instruction) -> bool:
    """Whether a ``dot_general``'s rhs is contracted along its minor dim while one of its
    free dims is the result's minor dim: a kernel's vector lanes (along that dim) would
    then read the rhs a row apart each (``h @ W.T`` in an RNN's backward loop took 30 us a
    step so, against ~2 us for BLAS's ``gemm`` reading it in order)."""
    a = inst.attrs
    rhs = inst.operands[1]
    free = rhs.shape.rank - len(a["rhs_batching_dimensions"]) - len(
        a["rhs_contracting_dimensions"])
    return free > 0 and tuple(a["rhs_contracting_dimensions"]) == (rhs.shape.rank - 1,)


def _single_op_computation(inst: Instruction) -> Computation:
    """A fused computation holding just ``inst`` (parameters for its operands). A
    ``reduce_window`` reads a scalar constant init as that constant (the parameter is left
    unread): its kernel needs the value to tell a cumulative scan from the identity
    (``scan_kernel``) from other windows."""
    params = [Instruction("parameter", [], op.shape, {"index": i}, name=f"p{i}")
              for i, op in enumerate(inst.operands)]
    operands, consts = list(params), []
    if inst.opcode == "reduce_window":
        for k, op in enumerate(inst.operands):
            if op.opcode == "constant" and op.shape.rank == 0 and not op.shape.is_tuple:
                consts.append(Instruction("constant", [], op.shape, dict(op.attrs),
                                          name=f"c{k}"))
                operands[k] = consts[-1]
    body = Instruction(inst.opcode, operands, inst.shape, inst.attrs, inst.calls,
                       name=inst.name or "op")
    return Computation(f"single.{inst.name}", params + consts + [body], body)


@dataclass
class Program:
    """The compiled form of a module: LLVM IR text plus the step plan."""

    ir_text: str
    steps: list
    constants: list[np.ndarray]
    constant_names: list[str]
    n_params: int
    outputs: list[BufferRef]  # one per leaf of the root, in order
    output_shapes: list[tuple]  # (dims, dtype) of output arrays, by output index
    arena_bytes: int
    has_entry: bool
    n_values: int
    entry_name: str
    # Kernels vectorized across short rows (``short_rows``): their code compiles slowly,
    # so a quick first tier rebuilds the program without them (``ProgramBuilder``).
    short_row_kernels: int = 0
    # The native function that runs a program of native steps in one call: "entry",
    # "steps" or None (``executable.native_call``, decided when the code is made).
    native_call: str | None = None
    # In a program stepped from Python, runs of native steps that one native call runs:
    # ``(first, end, function)`` over ``steps`` (``ProgramBuilder._emit_segments``).
    segments: tuple = ()
    # The small-matrix routines its kernels call (``linalg_steps``): (kernel, dtype name,
    # side), whose addresses the executable stores in the code's globals.
    routines: tuple = ()

    @property
    def max_work(self) -> int:
        """Elements computed by the biggest kernel (0 without kernels); a kernel in a loop
        counts its work times ``LOOP_TRIPS_ESTIMATE`` (so loops get optimized code)."""
        return max((work_of(s) * trips for s, trips in nested_kernels(self.steps)), default=0)


class ProgramBuilder:
    """Turns the entry computation into a ``Program``."""

    def __init__(self, module: Module, prefix: str = "m", short_rows: bool = True):
        self.module = module
        self.prefix = prefix  # makes every symbol unique in the process's shared engine
        # Whether row fusions over short rows may take ``short_rows.ShortRowKernel`` (same
        # results as the looped row kernel, bit for bit: faster code, slower to compile).
        self.short_rows = short_rows
        self.short_row_kernels = 0
        self.routines: set[tuple] = set()  # (``Program.routines``)
        self.entry = module.entry
        self.ir_module = ir.Module(name="ember")
        self.consts = ConstantPool(self.ir_module, prefix)
        self.refs: dict[int, list[BufferRef]] = {}  # id(inst) -> leaf refs
        self.n_values = 0
        self.kernel_count = 0
        # Kernels by what they compute (``cse.computation_fingerprint``, the scatter
        # phase): a fusion computing what another one does runs that one's kernel on its
        # own buffers (an optimizer's update of same-shaped parameters, the two gamma
        # samplers of ``beta``: one function compiled instead of several).
        self.kernels: dict[tuple, KernelInfo] = {}
        self.fingerprints: dict = {}  # (``computation_fingerprint``'s memo)
        self.loop_count = 0
        self.whole_loops: set[str] = set()  # (loops with a product on BLAS's threads)
        self.loop_depth = 0  # how many while loops enclose the computation being planned
        self.arena_end = 0  # the arena's size so far (each computation takes a region)

    @property
    def entry_name(self) -> str:
        return f"{self.prefix}_entry"

    def build(self) -> Program:
        comp = self.entry
        root_leaves = self._root_leaves(comp)
        output_of: dict[tuple, int] = {}
        output_shapes = []
        for key in root_leaves:
            if key is not None and key not in output_of:
                inst, leaf = key
                shape = inst.shape.leaves()[leaf]
                output_of[key] = len(output_shapes)
                output_shapes.append((shape.dims, shape.dtype))
        params = [[BufferRef("param", p.attrs["index"], p.dtype, p.dims)]
                  for p in comp.parameters]
        steps = self._plan(comp, params, output_of)
        outputs = list(self._root_refs(comp))
        has_entry = all(is_native(s) for s in steps)
        # (one native function runs the program: the executable picks it by the same rule)
        kind = native_call(plan_steps(steps)) if has_entry else None
        if kind == "entry":
            self._emit_entry(steps, len(comp.parameters), len(output_shapes))
        elif kind == "steps":
            self._emit_steps_function(steps)
        segments = () if has_entry else self._emit_segments(steps)
        return Program(str(self.ir_module), steps, self.consts.arrays, self.consts.names,
                       len(comp.parameters), outputs, output_shapes, self.arena_end,
                       has_entry, self.n_values, self.entry_name, self.short_row_kernels,
                       kind, segments, tuple(sorted(self.routines, key=repr)))

    def _emit_segments(self, steps) -> tuple:
        """The segments of a program stepped from Python (one with a library call, say):
        each run of at least ``MIN_SEGMENT_STEPS`` native steps that reads no value a
        library call made (those live in Python) gets a function of the steps function's
        signature (``_emit_steps_function``) that runs it, so that the executable makes one
        call where it made one per kernel or product (~2-8 us of Python each). Steps that
        need Python (``native_call``: a reduction whose partial results are combined there)
        end a run; a run that could not be one native call (products on BLAS's threads
        mixed with tasks of one BLAS thread) stays stepped."""
        segments, run = [], []

        def close(end: int) -> None:
            if len(run) >= MIN_SEGMENT_STEPS and native_call(plan_steps(run)) is not None:
                name = f"{self.prefix}_segment_{len(segments)}"
                self._emit_steps_function(run, name)
                segments.append((end - len(run), end, name))
            run.clear()

        for i, step in enumerate(steps):
            if is_native(step) and native_call(plan_steps([step])) is not None and \
                    not any(r.kind == "value" for r in _step_refs(step)[0]):
                run.append(step)
            else:
                close(i)
        close(len(steps))
        return tuple(segments)

    def _plan(self, comp: Computation, param_refs: list[list[BufferRef]],
              output_of: dict, in_place: frozenset[int] = frozenset(),
              views: frozenset[int] = frozenset()) -> list:
        """The steps running ``comp`` whose parameters live in ``param_refs`` (the leaves of
        each); its temporaries take a new region of the arena. Leaves ``self.refs`` naming
        the buffers of ``comp``'s instructions (its root's among them). The
        ``dynamic_update_slice`` ops in ``in_place`` (ids) write their operand's buffer;
        the reshapes in ``views`` (ids) name their operand's buffer."""
        assignment = assign_buffers(comp)
        users = comp.users() if in_place else {}
        offsets = self._layout(assignment, self.arena_end, output_of)
        self.arena_end = offsets["end"]
        steps = []
        for inst in comp.instructions:
            op = inst.opcode
            if op == "parameter":
                self.refs[id(inst)] = list(param_refs[inst.attrs["index"]])
                continue
            if op == "constant":
                value = np.asarray(inst.attrs["value"])
                self.refs[id(inst)] = [BufferRef("const", self.consts.index_of(value),
                                                 value.dtype, value.shape)]
                continue
            if op == "tuple":
                self.refs[id(inst)] = [r for o in inst.operands for r in self.refs[id(o)]]
                continue
            if op == "get_tuple_element":
                self.refs[id(inst)] = self._gte_refs(inst)
                continue
            if op in CONTROL_FLOW:
                steps.extend(self._control_flow(inst, assignment, offsets, output_of, comp,
                                                steps))
                continue
            if id(inst) in views:
                (src,) = self.refs[id(inst.operands[0])]
                self.refs[id(inst)] = [BufferRef(src.kind, src.index, src.dtype, inst.dims)]
                continue
            if id(inst) in in_place and _readers_own_their_results(inst, users, self.refs):
                (dst,) = self.refs[id(inst.operands[0])]
                self.refs[id(inst)] = [dst]
                steps.append(UpdateStep(self.refs[id(inst.operands[1])][0], dst,
                                        [self.refs[id(o)][0] for o in inst.operands[2:]]))
                continue
            step = self._step(inst, assignment, offsets, output_of)
            steps.extend(step if isinstance(step, list) else [step])
        return steps

    # ------------------------------------------------------------------ control flow

    def _control_flow(self, inst, assignment, offsets, output_of, comp, prior) -> list:
        """The steps of a ``while``, ``case`` or ``call``; its results land in the buffers
        the enclosing computation's assignment gave it."""
        outs = self._result_refs(inst, assignment, offsets, output_of)
        operands = [self.refs[id(o)] for o in inst.operands]
        if inst.opcode == "while":
            cond_comp, body_comp = inst.calls
            state, steps, after = self._loop_state(inst, operands, outs, comp, prior)
            flat = [r for refs in state for r in refs]
            # (The body's region may reuse the condition's: the pred is read in between.)
            base = self.arena_end
            self.loop_depth += 1
            cond = self._plan(cond_comp, state, {})
            pred = self.refs[id(cond_comp.root)][0]
            cond_end, self.arena_end = self.arena_end, base
            in_place = _in_place_updates(body_comp)
            body = self._plan(body_comp, state, {}, in_place,
                              _update_views(body_comp, in_place))
            self.loop_depth -= 1
            results = _write_results_in_place(body, list(self.refs[id(body_comp.root)]), flat)
            body += self._state_update(results, flat)
            self.arena_end = max(self.arena_end, cond_end)
            loop = None
            if pred.kind != "value" and all(is_native(s) for s in cond + body):
                loop = self._emit_loop(cond, pred, body)
            steps.append(WhileStep(cond, pred, body, loop))
            steps += after
        else:
            branches = []
            base = end = self.arena_end  # (one branch runs: their regions overlap)
            for comp in inst.calls:
                self.arena_end = base
                sub = self._plan(comp, operands[1:] if inst.opcode == "case" else operands, {})
                # (a branch's kernel writes its result straight into the result buffer)
                results = _write_results_in_place(sub, list(self.refs[id(comp.root)]), outs)
                sub += [CopyStep(s, d) for s, d in zip(results, outs) if s != d]
                branches.append(sub)
                end = max(end, self.arena_end)
            self.arena_end = end
            steps = [CaseStep(operands[0][0], branches)] if inst.opcode == "case" \
                else branches[0]
        self.refs[id(inst)] = outs
        return steps

    def _loop_state(self, inst, operands, outs, comp, prior) -> tuple[list, list, list]:
        """The buffers holding a while's state (the leaves of each operand), the copies into
        them before the loop and the copies out of them after it. An element the body passes
        on unchanged stays in its operand's buffer, which the loop only reads, and is copied
        out only when the while's result is read; an element the loop changes lives in the
        while's result buffer when that overlaps no operand (no copy after the loop), else
        in a buffer of its own, and the kernel computing its initial value (in ``prior``,
        the steps so far) writes it there when nothing else reads that value."""
        root, params = inst.calls[1].root, {p.attrs["index"]: p for p in inst.calls[1].parameters}
        used, users = _used_results(inst, comp), comp.users()
        flat = [r for refs in operands for r in refs]
        # (A library value may be a view of an arena buffer whose memory the results reuse.)
        own_results = all(r.kind != "value" for r in flat)
        taken = list(flat)
        state, before, after, refilled, pos = [], [], [], [], 0
        for j, refs in enumerate(operands):
            results, pos = outs[pos:pos + len(refs)], pos + len(refs)
            if (root.opcode == "tuple" and j < len(root.operands)
                    and root.operands[j] is params.get(j)
                    and all(r.kind in ("const", "temp") or r.kind in ("param", "output")
                            and _nbytes(r) >= INVARIANT_ALIAS_MIN_BYTES for r in refs)):
                state.append(list(refs))
                if used is None or j in used:
                    after += [CopyStep(s, d) for s, d in zip(refs, results) if s != d]
                continue
            new = []
            for ref, out in zip(refs, results):
                if own_results and out.kind in ("temp", "output") and not any(
                        _overlaps(out, t) for t in taken):
                    dst = out
                else:
                    dst = self._scratch(ref)
                    after.append(CopyStep(dst, out))
                taken.append(dst)
                new.append(dst)
                if len(refs) == 1 and _only_user(inst.operands[j], inst, comp) \
                        and _write_into(prior, ref, dst):
                    continue
                refill = _refill(prior, ref, dst)
                before.append(refill or CopyStep(ref, dst))
                if refill is not None and all(u is inst for u in users[inst.operands[j]]) \
                        and comp.root is not inst.operands[j]:
                    refilled.append(ref)  # (its first computation may then be dead)
            state.append(new)
        live = [r for refs in state for r in refs]  # (an invariant element reads its operand)
        for ref in refilled:
            if not any(_overlaps(r, ref) for r in live) and not any(
                    _overlaps(r, ref) for s in prior + before + after for r in _step_refs(s)[0]):
                prior[:] = [s for s in prior if not (isinstance(s, KernelStep)
                                                     and s.outputs == [ref])]
        return state, before, after

    def _kernel_scratch(self, info: KernelInfo) -> list[BufferRef]:
        """The arena buffer a kernel works in (``KernelInfo.scratch``), if it needs one."""
        if not info.scratch:
            return []
        return [self._scratch(BufferRef("temp", 0, np.dtype(np.uint8), (info.scratch,)))]

    def _scratch(self, like) -> BufferRef:
        """A new arena buffer of ``like``'s dtype and dims (a buffer's, or a shape's)."""
        offset = self.arena_end
        nbytes = int(np.prod(like.dims, dtype=np.int64)) * np.dtype(like.dtype).itemsize
        self.arena_end += -(-max(nbytes, 1) // ALIGN) * ALIGN
        return BufferRef("temp", offset, like.dtype, like.dims)

    def _state_update(self, results: list[BufferRef], state: list[BufferRef]) -> list:
        """Copies moving a body's results into the state buffers. A result that is a state
        buffer (the body passing a state element on, maybe to another slot: a swap) or a
        library value (which may be a view of one) is first copied aside, so no copy
        overwrites a state buffer that a later copy still reads."""
        aside, copies = [], []
        for src, dst in zip(results, state):
            if src == dst:
                continue
            if src.kind == "value" or any(_overlaps(src, s) for s in state):
                tmp = self._scratch(src)
                aside.append(CopyStep(src, tmp))
                src = tmp
            copies.append(CopyStep(src, dst))
        return aside + copies

    # ------------------------------------------------------------------ buffers

    @staticmethod
    def _layout(assignment, base: int = 0, output_of: dict | None = None) -> dict:
        """Arena offset of every allocation, from ``base``, but those whose every buffer
        is written to an output (``output_of``) instead; the "end" key is where the region
        ends."""
        offsets, pos = {}, base
        for alloc in assignment.allocations:
            if output_of and all((b.instruction, b.leaf) in output_of for b in alloc.buffers):
                continue
            offsets[alloc.index] = pos
            pos += -(-max(alloc.size, 1) // ALIGN) * ALIGN
        offsets["end"] = pos
        return offsets

    @staticmethod
    def _root_leaves(comp: Computation) -> list:
        """(defining instruction, leaf) for each root leaf (None for params/constants)."""
        def leaves(inst):
            if inst.opcode == "tuple":
                return [x for o in inst.operands for x in leaves(o)]
            if inst.opcode == "get_tuple_element":
                start, stop = leaf_range(inst.operands[0], inst.attrs["index"])
                return leaves(inst.operands[0])[start:stop]
            if inst.opcode in ("parameter", "constant"):
                return [None]
            return [(inst, i) for i in range(len(inst.shape.leaves()))]
        return leaves(comp.root)

    def _root_refs(self, comp: Computation) -> list[BufferRef]:
        return self.refs[id(comp.root)]

    def _gte_refs(self, inst: Instruction) -> list[BufferRef]:
        start, stop = leaf_range(inst.operands[0], inst.attrs["index"])
        return self.refs[id(inst.operands[0])][start:stop]

    def _result_refs(self, inst, assignment, offsets, output_of) -> list[BufferRef]:
        refs = []
        allocs = assignment.allocations_of(inst)
        for leaf, shape in enumerate(inst.shape.leaves()):
            out = output_of.get((inst, leaf))
            if out is not None:
                refs.append(BufferRef("output", out, shape.dtype, shape.dims))
            else:
                refs.append(BufferRef("temp", offsets[allocs[leaf].index], shape.dtype,
                                      shape.dims))
        return refs

    # ------------------------------------------------------------------ steps

    def _step(self, inst, assignment, offsets, output_of):
        inputs = [self.refs[id(o)] for o in inst.operands]
        if inst.opcode == "fusion" or (inst.opcode in STANDALONE_KERNEL_OPS
                                       and (not inst.shape.is_tuple
                                            or inst.opcode == "reduce_window")
                                       and _has_kernel(inst)) \
                or is_native_top_k(inst) or is_window_call(inst) or is_native_linalg(inst):
            fused = inst.calls[0] if inst.opcode == "fusion" else _single_op_computation(inst)
            phases = [None]
            if (fused.root.opcode == "scatter"
                    and fused.root.operands[0].shape.size >= SPLIT_SCATTER_MIN_SIZE):
                phases = ["copy", "update"]
            infos = [self._try_kernel(fused, phase) for phase in phases]
            if None not in infos and all(len(r) == 1 for r in inputs):
                outs = self._result_refs(inst, assignment, offsets, output_of)
                self.refs[id(inst)] = outs
                same = _same_index_params(fused) if self.loop_depth and len(infos) == 1 \
                    else frozenset()
                cost = _element_cost(fused) if self.loop_depth else 1
                return [KernelStep(info, [r[0] for r in inputs], outs + self._kernel_scratch(info),
                                   same, cost) for info in infos]
        if inst.opcode == "dot_general" and all(len(r) == 1 for r in inputs):
            out = self._result_refs(inst, assignment, offsets, output_of)
            self.refs[id(inst)] = out
            refs = [r[0] for r in inputs]
            gemm = copied = None
            if all(r.kind != "value" for r in refs + out) \
                    and not any(_overlaps(r, out[0]) for r in refs):
                gemm = gemm_layout(inst)
                copied = _gemm_operand_copies(inst) if gemm is None else None
                # (one product worth several threads (``blas_threads_pay``) is one CBLAS
                # call on BLAS's threads (``whole_gemm``), in loops too; smaller ones run
                # on the calling thread. A batch of products runs its matrices as tasks on
                # the parallel runtime, each on one thread, unless they are large enough
                # for BLAS's threads: outside loops, those go through NumPy's matmul.)
                layout = gemm or (copied and gemm_layout(copied[0]))
                if not self.loop_depth and layout and layout[8] > 1 \
                        and math.prod(layout[3:6]) > BATCH_SPLIT_MAX_WORK:
                    gemm = copied = None
            if self.loop_depth and not (gemm is not None and _lanes_stride_rhs(inst)):
                # (a kernel whose output lanes would stride through the rhs loses to gemm)
                fused = _loop_dot_computation(inst)
                info = self._try_kernel(fused) if fused is not None else None
                if info is not None:
                    return KernelStep(info, refs, out)
            if copied is not None:  # (each copy a transpose kernel into a scratch buffer)
                dot, copies = copied
                infos = [self._try_kernel(_single_op_computation(t)) for _, t in copies]
                if None not in infos:
                    steps = []
                    for (side, transpose), info in zip(copies, infos):
                        scratch = self._scratch(transpose.shape)
                        steps.append(KernelStep(info, [refs[side]], [scratch]))
                        refs[side] = scratch
                    inst, gemm = dot, gemm_layout(dot)
                    if not whole_gemm(gemm):
                        self._gemm_task(gemm)
                    return steps + [DotStep(inst, refs, out[0], gemm)]
            if gemm is not None and not whole_gemm(gemm):
                self._gemm_task(gemm)  # (also run from Python where the loop steps)
            return DotStep(inst, refs, out[0], gemm)
        # Library thunk: results are fresh arrays held in value slots (or copied into outputs).
        outs = []
        for leaf, shape in enumerate(inst.shape.leaves()):
            out = output_of.get((inst, leaf))
            if out is not None:
                outs.append(BufferRef("output", out, shape.dtype, shape.dims))
            else:
                outs.append(BufferRef("value", self.n_values, shape.dtype, shape.dims))
                self.n_values += 1
        self.refs[id(inst)] = outs
        return LibraryStep(inst, inputs, outs)

    def _try_kernel(self, fused: Computation, scatter_phase: str | None = None
                    ) -> KernelInfo | None:
        key = (computation_fingerprint(fused, self.fingerprints), scatter_phase)
        if key in self.kernels:
            return self.kernels[key]
        info = None
        for interleave in (True, False):
            # (a function's name stays taken in the module: the second build takes another)
            name = f"{self.prefix}_kernel_{self.kernel_count}"
            self.kernel_count += 1
            kb = None
            try:
                kb = KernelBuilder(self.ir_module, name, fused, self.consts.typed_pointer,
                                   short_rows=self.short_rows, scatter_phase=scatter_phase,
                                   interleave=interleave)
                info = kb.build()
            except UnsupportedOp:
                self.ir_module.globals.pop(name, None)
                if kb is not None and kb.interleaved:  # (its groups' copies of the body
                    continue  # may be what was too large: built again, element by element)
                break
            self.short_row_kernels += kb.short_row_kernel
            self.routines.update(kb.routines)
            break
        self.kernels[key] = info
        return info

    # ------------------------------------------------------------------ entry

    def _emit_entry(self, steps, n_params, n_outputs) -> None:
        """``void entry(i8* params..., i8* outputs..., i8* arena)``: runs every step on the
        calling thread (a small program's single native call)."""
        n_args = n_params + n_outputs + 1
        fn = ir.Function(self.ir_module, ir.FunctionType(ir.VoidType(), [I8P] * n_args),
                         self.entry_name)
        entry, start = fn.append_basic_block("entry"), fn.append_basic_block("start")
        ir.IRBuilder(entry).branch(start)  # (the entry block holds the stack slots)
        b = ir.IRBuilder(start)
        args = fn.args

        def pointer(b, ref):
            if ref.kind == "param":
                return args[ref.index]
            if ref.kind == "output":
                return args[n_params + ref.index]
            return self._arena_pointer(b, ref, args[-1])
        # (the tables of parameters and outputs a loop function takes)
        tables = []
        for first, n in ((0, n_params), (n_params, n_outputs)):
            at = ir.IRBuilder(entry)
            at.position_at_start(entry)
            table = at.alloca(ir.ArrayType(I8P, max(n, 1)))
            for k in range(n):
                b.store(args[first + k], b.gep(table, [_i32(0), _i32(k)]))
            tables.append(b.bitcast(table, I8P.as_pointer()))
        loop_args = [args[-1], *tables, ir.Constant(I8P, None), _i64(0),
                     ir.Constant(I8P, None)]
        self._emit_steps(b, steps, pointer, loop_args)
        b.ret_void()

    def _emit_steps_function(self, steps, name: str | None = None) -> None:
        """``void steps(i8* arena, i8** params, i8** outputs, i8* run, i64 tasks, i8* rest)``
        (or ``name``: a segment's) runs every step: ``params`` and ``outputs`` hold the
        program's parameter and output buffers, ``run`` and ``tasks`` are a loop
        function's (``_emit_loop``), and ``rest``, when not null, is the parallel runtime's
        ``ember_rt_rest``, called before each product on BLAS's threads (``_emit_steps``)."""
        fn = ir.Function(self.ir_module, ir.FunctionType(ir.VoidType(), _STEPS_ARGS),
                         name or steps_name(self.entry_name))
        arena, params, outputs, *_, rest = fn.args
        entry, start = fn.append_basic_block("entry"), fn.append_basic_block("start")
        ir.IRBuilder(entry).branch(start)  # (the entry block holds the stack slots)
        b = ir.IRBuilder(start)
        self._emit_steps(b, steps, self._table_pointer(arena, params, outputs),
                         list(fn.args), threaded=True, rest=rest)
        b.ret_void()

    def _table_pointer(self, arena, params, outputs):
        """``pointer(b, ref)`` of a function taking the arena and the tables of the
        program's parameter and output buffers (a loop's, the steps')."""
        def pointer(b, ref):
            if ref.kind in ("param", "output"):
                table = params if ref.kind == "param" else outputs
                return b.load(b.gep(table, [_i64(ref.index)]))
            return self._arena_pointer(b, ref, arena)
        return pointer

    def _emit_loop(self, cond: list, pred: BufferRef, body: list) -> str:
        """``void loop_N(i8* arena, i8** params, i8** outputs, i8* run, i64 tasks,
        i8* rest)``: runs a while loop. ``params`` and ``outputs`` hold the program's
        parameter and output buffers. ``run``, when not null, is the parallel runtime's
        ``ember_rt_run``: kernels of at least ``PARALLEL_MIN_WORK`` elements then run as up
        to ``tasks`` tasks on its threads, without leaving native code (which results never
        depend on). A loop with a product worth BLAS's threads (``whole_gemm``) runs its
        products as the steps function runs the program's (``_emit_steps``, with ``rest``);
        in other loops every product runs as tasks, on the runtime when it is given."""
        name = f"{self.prefix}_loop_{self.loop_count}"
        self.loop_count += 1
        fn = ir.Function(self.ir_module, ir.FunctionType(ir.VoidType(), _LOOP_ARGS), name)
        arena, params, outputs = fn.args[:3]
        whole = whole_gemms(plan_steps(cond + body))
        if whole:
            self.whole_loops.add(name)
        rest = fn.args[5] if whole else None
        blocks = [fn.append_basic_block(n) for n in ("entry", "cond", "body", "done")]
        entry, test, loop, done = blocks
        ir.IRBuilder(entry).branch(test)
        b = ir.IRBuilder(test)
        pointer = self._table_pointer(arena, params, outputs)
        # (after a round's product on BLAS's threads, the next round's kernels come)
        self._emit_steps(b, cond, pointer, list(fn.args), True, rest, after_blas=whole)
        flag = b.load(pointer(b, pred))
        b.cbranch(b.icmp_unsigned("!=", flag, ir.Constant(S.I8, 0)), loop, done)
        b.position_at_end(loop)
        self._emit_steps(b, body, pointer, list(fn.args), True, rest, after_blas=whole)
        b.branch(test)
        b.position_at_end(done)
        b.ret_void()
        return name

    def _arena_pointer(self, b, ref: BufferRef, arena) -> ir.Value:
        if ref.kind == "const":
            return self.consts.pointer(b, ref.index, I8P)
        assert ref.kind == "temp", ref
        return b.gep(arena, [ir.Constant(S.I64, ref.index)])

    def _emit_steps(self, b: ir.IRBuilder, steps: list, pointer, loop_args: list,
                    threaded: bool = False, rest: ir.Value | None = None,
                    after_blas: bool = False) -> None:
        """Emits ``steps`` at ``b``'s position; ``pointer(b, ref)`` gives a buffer's
        address; ``loop_args`` are the arguments of a loop function (``_emit_loop``), and
        ``threaded`` says whether their ``run`` may be set. ``rest`` is given for the
        program's own steps and those of a loop with a product on BLAS's threads: the
        ``rest`` argument of the function (``_emit_steps_function``, ``_emit_loop``); and
        ``after_blas`` where such a product may have run before. There, one product worth
        several threads (``blas_threads_pay``) is a single CBLAS call on BLAS's threads
        (``whole_gemm``), after which kernels need AFTER_BLAS_MIN_WORK elements for threads,
        and the tasks of other products go to the parallel runtime only when worth it (a
        batch), as ``executable.CpuExecutable._prepare`` steps them from Python.
        Stack slots go to the function's entry block, which holds nothing else (a loop must
        not grow the stack)."""
        fn = b.function
        slots = ir.IRBuilder(fn.entry_basic_block)
        for step in steps:
            if isinstance(step, KernelStep):
                info = step.info
                kfn = self.ir_module.globals[info.name]
                refs = step.inputs + step.outputs
                slots.position_at_start(fn.entry_basic_block)
                arr = slots.alloca(ir.ArrayType(I8P, len(refs)))
                for k, ref in enumerate(refs):
                    slot = b.gep(arr, [ir.Constant(S.I64, 0), ir.Constant(S.I32, k)])
                    b.store(pointer(b, ref), slot)
                bufs = b.bitcast(arr, I8P.as_pointer())
                call = [bufs, ir.Constant(S.I64, 0), ir.Constant(S.I64, info.extent)]
                min_work = AFTER_BLAS_MIN_WORK if after_blas else PARALLEL_MIN_WORK
                if not (threaded and info.extent > 1 and not info.partial_reducers
                        and info.extent * info.work_per_item * step.cost >= min_work):
                    b.call(kfn, call)
                    continue
                self._on_runtime(b, loop_args, kfn, bufs, info.extent, None,
                                 lambda kfn=kfn, call=call: b.call(kfn, call))
            elif isinstance(step, CopyStep):
                nbytes = _nbytes(step.dst)
                min_bytes = COPY_THREADS_MIN_BYTES * (
                    AFTER_BLAS_MIN_WORK // PARALLEL_MIN_WORK if after_blas else 1)
                if threaded and nbytes >= min_bytes:
                    self._emit_threaded_copy(b, step, pointer, nbytes, loop_args, slots)
                elif nbytes:
                    b.call(self._memcpy(), [pointer(b, step.dst), pointer(b, step.src),
                                            ir.Constant(S.I64, nbytes), ir.Constant(S.I1, 0)])
            elif isinstance(step, UpdateStep):
                self._emit_update(b, step, pointer)
            elif isinstance(step, DotStep):
                if rest is not None and whole_gemm(step.gemm):
                    self._emit_whole_gemm(b, step, pointer, rest)
                    after_blas = True
                else:
                    self._emit_gemm(b, step, pointer, loop_args, threaded and (
                        rest is None or blas_threads_pay(step.gemm)))
            elif isinstance(step, WhileStep):
                b.call(self.ir_module.globals[step.loop], loop_args)
                after_blas = after_blas or step.loop in self.whole_loops
            elif isinstance(step, CaseStep):
                n = len(step.branches)
                index = b.load(b.bitcast(pointer(b, step.index), S.I32.as_pointer()))
                # (unsigned: a negative index is out of range too)
                in_range = b.icmp_unsigned("<", index, ir.Constant(S.I32, n))
                index = b.select(in_range, index, ir.Constant(S.I32, n - 1))
                blocks = [fn.append_basic_block(f"branch{k}") for k in range(n)]
                done = fn.append_basic_block("case_done")
                switch = b.switch(index, blocks[-1])
                for k in range(n - 1):
                    switch.add_case(ir.Constant(S.I32, k), blocks[k])
                for block, branch in zip(blocks, step.branches):
                    b.position_at_end(block)
                    self._emit_steps(b, branch, pointer, loop_args, threaded, rest,
                                     after_blas)
                    b.branch(done)
                b.position_at_end(done)
            else:
                raise AssertionError(f"no native code for {type(step).__name__}")

    def _memcpy(self) -> ir.Function:
        return self.ir_module.declare_intrinsic(
            "llvm.memcpy", [I8P, I8P, S.I64],
            ir.FunctionType(ir.VoidType(), [I8P, I8P, S.I64, S.I1]))

    def _emit_threaded_copy(self, b: ir.IRBuilder, step: CopyStep, pointer, nbytes: int,
                            loop_args: list, slots: ir.IRBuilder) -> None:
        """Copies ``step``'s ``nbytes`` as ``COPY_CHUNK_BYTES`` chunks on the parallel
        runtime (``_copy_chunks``) when its ``run`` is given, else with one ``memcpy``: one
        core copied 4 MiB in ~290 us here, two in ~180."""
        slots.position_at_start(b.function.entry_basic_block)
        arr = slots.alloca(ir.ArrayType(I8P, 3))
        dst, src = pointer(b, step.dst), pointer(b, step.src)
        for j, v in enumerate((dst, src, b.inttoptr(_i64(nbytes), I8P))):
            b.store(v, b.gep(arr, [_i64(0), _i32(j)]))
        self._on_runtime(b, loop_args, self._copy_chunks(), b.bitcast(arr, I8P.as_pointer()),
                         -(-nbytes // COPY_CHUNK_BYTES), None,
                         lambda: b.call(self._memcpy(), [dst, src, _i64(nbytes),
                                                         ir.Constant(S.I1, 0)]))

    def _on_runtime(self, b: ir.IRBuilder, loop_args: list, kernel: ir.Function,
                    bufs: ir.Value, extent: int, tasks: int | None, serial) -> None:
        """Runs the kernel-shaped ``kernel(bufs, lo, hi)`` over ``[0, extent)`` as ``tasks``
        tasks on the parallel runtime when the function's ``run`` (``loop_args[3]``) is
        given, else emits ``serial()``. ``tasks`` None: as many as the function's ``tasks``
        argument, at most ``extent``; 0: one per thread (that argument over
        ``TASKS_PER_THREAD``), at most ``extent``."""
        run = loop_args[3]
        slots = ir.IRBuilder(b.function.entry_basic_block)
        slots.position_at_start(b.function.entry_basic_block)
        table = slots.alloca(I8P.as_pointer())
        b.store(bufs, table)
        with b.if_else(b.icmp_unsigned("!=", run, ir.Constant(I8P, None))) as (par, seq):
            with par:
                if tasks:
                    n = _i64(tasks)
                else:
                    n = loop_args[4]
                    if tasks == 0:
                        n = b.sdiv(n, _i64(TASKS_PER_THREAD))
                        n = b.select(b.icmp_signed("<", n, _i64(1)), _i64(1), n)
                    n = b.select(b.icmp_signed("<", n, _i64(extent)), n, _i64(extent))
                b.call(b.bitcast(run, _RUN.as_pointer()),
                       [b.bitcast(kernel, I8P), table, _i64(0), _i64(extent), n])
            with seq:
                serial()

    def _copy_chunks(self) -> ir.Function:
        """``void copy_chunks(i8** bufs, i64 lo, i64 hi)``: chunks ``[lo, hi)`` of
        ``COPY_CHUNK_BYTES`` of the copy of ``bufs[2]`` (a byte count) bytes from ``bufs[1]``
        to ``bufs[0]`` (the last chunk ends at the count), a kernel for the runtime."""
        name = f"{self.prefix}_copy_chunks"
        if name in self.ir_module.globals:
            return self.ir_module.globals[name]
        fn = ir.Function(self.ir_module, ir.FunctionType(
            ir.VoidType(), [I8P.as_pointer(), S.I64, S.I64]), name)
        bufs, lo, hi = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        dst, src = (b.load(b.gep(bufs, [_i64(j)])) for j in range(2))
        total = b.ptrtoint(b.load(b.gep(bufs, [_i64(2)])), S.I64)
        start = b.mul(lo, _i64(COPY_CHUNK_BYTES))
        end = b.mul(hi, _i64(COPY_CHUNK_BYTES))
        end = b.select(b.icmp_signed("<", end, total), end, total)
        with b.if_then(b.icmp_signed("<", start, end)):
            b.call(self._memcpy(), [b.gep(dst, [start]), b.gep(src, [start]),
                                    b.sub(end, start), ir.Constant(S.I1, 0)])
        b.ret_void()
        return fn

    def _blas_slot(self, routine: str) -> ir.GlobalVariable:
        """The global holding the address of CBLAS ``routine``, which the executable sets
        when it loads the code (``executable._bind_gemm``)."""
        return address_slot(self.ir_module, blas_global(self.prefix, routine))

    def _gemm_buffers(self, b: ir.IRBuilder, step: DotStep, pointer,
                      runtime: tuple = ()) -> ir.Value:
        """``i8**`` of ``step``'s lhs, rhs and output (a ``gemm`` task's ``bufs``), then
        the values of ``runtime``: the parallel runtime's ``run`` (or null) and its thread
        count (as a pointer), which the task of a ``split_gemm`` passes on."""
        slots = ir.IRBuilder(b.function.entry_basic_block)
        slots.position_at_start(b.function.entry_basic_block)
        arr = slots.alloca(ir.ArrayType(I8P, 3 + len(runtime)))
        for j, value in enumerate((*(pointer(b, ref) for ref in (*step.inputs, step.output)),
                                   *runtime)):
            b.store(value, b.gep(arr, [_i64(0), _i32(j)]))
        return b.bitcast(arr, I8P.as_pointer())

    def _emit_gemm(self, b: ir.IRBuilder, step: DotStep, pointer, run_args: list,
                   threaded: bool) -> None:
        """Runs ``step``'s ``gemm`` as the tasks of ``gemm_split`` (``_gemm_task``): on
        the parallel runtime when ``threaded`` and it is there, else one after another; a
        ``split_gemm`` as one task that makes its own on the runtime (given ``threaded``)."""
        _, units, tasks = gemm_split(step.gemm)
        task = self._gemm_task(step.gemm)
        if split_gemm(step.gemm):
            run, threads = run_args[3], b.sdiv(run_args[4], _i64(TASKS_PER_THREAD))
            if not threaded:
                run = ir.Constant(I8P, None)
            bufs = self._gemm_buffers(b, step, pointer, (run, b.inttoptr(threads, I8P)))
            b.call(task, [bufs, _i64(0), _i64(units)])
            return
        bufs = self._gemm_buffers(b, step, pointer)
        per_thread = native_gemm(step.gemm)  # (ember's own: one task per thread)

        def serial():
            for t in range(tasks):
                b.call(task, [bufs, _i64(t * units // tasks), _i64((t + 1) * units // tasks)])
        if not (threaded and (units if per_thread else tasks) > 1):
            serial()
            return
        self._on_runtime(b, run_args, task, bufs, units, 0 if per_thread else tasks, serial)

    def _emit_whole_gemm(self, b: ir.IRBuilder, step: DotStep, pointer,
                         rest: ir.Value) -> None:
        """Runs ``step``'s ``gemm`` as one CBLAS call (``executable.whole_gemm_arguments``),
        which BLAS splits across its own threads; first, when ``rest`` is not null, the
        parallel runtime's spinning workers go to sleep (their cores are BLAS's now)."""
        letter = step.gemm[0]
        ty = S.F32 if letter == "s" else S.F64
        ptr = ty.as_pointer()
        a, x, c = (b.bitcast(pointer(b, ref), ptr) for ref in (*step.inputs, step.output))
        with b.if_then(b.icmp_unsigned("!=", rest, ir.Constant(I8P, None))):
            b.call(b.bitcast(rest, ir.FunctionType(ir.VoidType(), []).as_pointer()), [])
        if blas_routine(step.gemm).endswith("gemv"):
            self._emit_gemv(b, step.gemm, _i64(step.gemm[3]), _i64(step.gemm[4]), a, x, c)
            return
        gemm_fn = b.bitcast(b.load(self._blas_slot(blas_routine(step.gemm))),
                            _cblas_gemm_type(ty).as_pointer())
        order, ta, tb, m, n, k, lda, ldb, ldc = whole_gemm_arguments(step.gemm)
        b.call(gemm_fn, [_i32(order), _i32(ta), _i32(tb), _i64(m), _i64(n), _i64(k),
                         ir.Constant(ty, 1.0), a, _i64(lda), x, _i64(ldb),
                         ir.Constant(ty, 0.0), c, _i64(ldc)])

    def _emit_gemv(self, b: ir.IRBuilder, gemm: tuple, rows: ir.Value, cols: ir.Value,
                   a: ir.Value, x: ir.Value, c: ir.Value) -> None:
        """Calls CBLAS ``gemv`` for ``rows`` x ``cols`` outputs ``c`` of a ``gemm`` layout
        with one row or column, from its lhs ``a`` and rhs ``x`` (``gemv_arguments``)."""
        ty = S.F32 if gemm[0] == "s" else S.F64
        ptr = ty.as_pointer()
        fn_type = ir.FunctionType(ir.VoidType(), [S.I32, S.I32, S.I64, S.I64, ty, ptr, S.I64,
                                                  ptr, S.I64, ty, ptr, S.I64])
        gemv_fn = b.bitcast(b.load(self._blas_slot(blas_routine(gemm))), fn_type.as_pointer())
        matrix, trans, m, n, ld, inc = gemv_arguments(gemm, rows, cols)
        mat, vec = (x, a) if matrix else (a, x)
        m, n = (v if isinstance(v, ir.Value) else _i64(v) for v in (m, n))
        b.call(gemv_fn, [_i32(CBLAS_ROW_MAJOR), _i32(trans), m, n, ir.Constant(ty, 1.0), mat,
                         _i64(ld), vec, _i64(inc), ir.Constant(ty, 0.0), c, _i64(1)])

    def _gemm_task(self, gemm: tuple) -> ir.Function:
        """``void task(i8** bufs, i64 lo, i64 hi)``: units ``[lo, hi)`` (``gemm_split``) of
        the products ``bufs[2] = bufs[0] @ bufs[1]`` laid out as ``gemm`` says, one CBLAS
        ``gemm`` call for the units of each matrix of the batch (through the global the
        executable sets; the executable keeps OpenBLAS on the calling thread meanwhile,
        ``_blas_threads.one_blas_thread``). A ``split_gemm``'s calls its split entry, with
        the runtime and thread count of ``bufs[3]`` and ``bufs[4]``."""
        name = gemm_task_name(self.prefix, gemm)
        if name in self.ir_module.globals:
            return self.ir_module.globals[name]
        letter, trans_a, trans_b, m, n, k, lda, ldb, _, batches = gemm
        by_rows = gemm_split(gemm)[0]
        per_matrix = -(-(m if by_rows else n) // GEMM_TASK_UNIT)  # (units of one matrix)
        ty = S.F32 if letter == "s" else S.F64
        ptr = ty.as_pointer()
        fn = ir.Function(self.ir_module, ir.FunctionType(
            ir.VoidType(), [I8P.as_pointer(), S.I64, S.I64]), name)
        bufs, lo, hi = fn.args
        entry = fn.append_basic_block("entry")
        b = ir.IRBuilder(entry)
        base_a, base_x, base_c = (b.bitcast(b.load(b.gep(bufs, [_i64(j)])), ptr)
                                  for j in range(3))
        gemv = blas_routine(gemm).endswith("gemv")
        runtime = []
        if split_gemm(gemm):
            runtime = [b.load(b.gep(bufs, [_i64(3)])),
                       b.ptrtoint(b.load(b.gep(bufs, [_i64(4)])), S.I64)]
        if not gemv:
            fn_type = _cblas_gemm_type(ty)
            if runtime:
                fn_type = ir.FunctionType(ir.VoidType(), [I8P, S.I64, *fn_type.args])
            gemm_fn = b.bitcast(b.load(self._blas_slot(called_routine(gemm))),
                                fn_type.as_pointer())
        total = _i64(m if by_rows else n)
        loop, done = fn.append_basic_block("matrix"), fn.append_basic_block("done")
        b.cbranch(b.icmp_signed("<", lo, hi), loop, done)
        # one call per matrix: its units in [lo, hi), rows (or columns) [start, stop)
        b.position_at_end(loop)
        u = b.phi(S.I64)
        u.add_incoming(lo, entry)
        matrix = b.sdiv(u, _i64(per_matrix))
        first = b.mul(matrix, _i64(per_matrix))
        end = b.add(first, _i64(per_matrix))
        end = b.select(b.icmp_signed("<", end, hi), end, hi)
        start = b.mul(b.sub(u, first), _i64(GEMM_TASK_UNIT))
        stop = b.mul(b.sub(end, first), _i64(GEMM_TASK_UNIT))
        stop = b.select(b.icmp_signed("<", stop, total), stop, total)
        count = b.sub(stop, start)
        a, x = (b.gep(base, [offset])
                for base, offset in zip((base_a, base_x), _matrix_offsets(b, matrix, batches)))
        c = b.gep(base_c, [b.mul(matrix, _i64(m * n))])
        if by_rows:  # rows of A (its columns where it lies transposed) and C
            a = b.gep(a, [b.mul(start, _i64(1 if trans_a else lda))])
            c = b.gep(c, [b.mul(start, _i64(n))])
            rows, cols = count, _i64(n)
        else:  # columns of B (its rows where it lies transposed) and C
            x = b.gep(x, [b.mul(start, _i64(ldb if trans_b else 1))])
            c = b.gep(c, [start])
            rows, cols = _i64(m), count
        if gemv:
            self._emit_gemv(b, gemm, rows, cols, a, x, c)
        else:
            b.call(gemm_fn, [*runtime, _i32(CBLAS_ROW_MAJOR),
                             _i32(CBLAS_TRANS if trans_a else CBLAS_NO_TRANS),
                             _i32(CBLAS_TRANS if trans_b else CBLAS_NO_TRANS), rows, cols,
                             _i64(k), ir.Constant(ty, 1.0), a, _i64(lda), x, _i64(ldb),
                             ir.Constant(ty, 0.0), c, _i64(n)])
        u.add_incoming(end, b.block)
        b.cbranch(b.icmp_signed("<", end, hi), loop, done)
        b.position_at_end(done)
        b.ret_void()
        return fn

    def _emit_update(self, b: ir.IRBuilder, step: UpdateStep, pointer) -> None:
        """Copies ``step.update`` into its window of ``step.dst``: one ``memcpy`` per
        contiguous run (the window's trailing dims that span the buffer, and one more)."""
        dims, sizes = step.dst.dims, step.update.dims
        if 0 in sizes:
            return
        itemsize = np.dtype(step.dst.dtype).itemsize
        strides = [int(np.prod(dims[k + 1:], dtype=np.int64)) for k in range(len(dims))]
        partial = [k for k in range(len(dims)) if sizes[k] != dims[k]]
        j = partial[-1] if partial else 0  # runs are sizes[j] * strides[j] elements long
        run = sizes[j] * strides[j] * itemsize if dims else itemsize
        base = ir.Constant(S.I64, 0)
        for k, ref in enumerate(step.starts):
            if sizes[k] == dims[k]:
                continue  # (the start clamps to 0)
            start = b.load(b.bitcast(pointer(b, ref), S.memory_type(ref.dtype).as_pointer()))
            if start.type != S.I64:
                start = b.sext(start, S.I64)
            start = b.select(b.icmp_signed("<", start, _i64(0)), _i64(0), start)
            hi = _i64(dims[k] - sizes[k])
            start = b.select(b.icmp_signed(">", start, hi), hi, start)
            base = b.add(base, b.mul(start, _i64(strides[k])))
        dst, src = pointer(b, step.dst), pointer(b, step.update)
        memcpy = self._memcpy()
        n_runs = int(np.prod(sizes[:j], dtype=np.int64))
        if n_runs == 1:
            b.call(memcpy, [b.gep(dst, [b.mul(base, _i64(itemsize))]), src, _i64(run),
                            ir.Constant(S.I1, 0)])
            return
        fn = b.function
        head, done = fn.append_basic_block("runs"), fn.append_basic_block("runs_done")
        before = b.block
        b.branch(head)
        b.position_at_end(head)
        r = b.phi(S.I64)
        r.add_incoming(_i64(0), before)
        offset, rest = base, r  # the window position of run r, its index along dims < j
        for k in reversed(range(j)):
            offset = b.add(offset, b.mul(b.urem(rest, _i64(sizes[k])), _i64(strides[k])))
            rest = b.udiv(rest, _i64(sizes[k]))
        b.call(memcpy, [b.gep(dst, [b.mul(offset, _i64(itemsize))]),
                        b.gep(src, [b.mul(r, _i64(run))]), _i64(run), ir.Constant(S.I1, 0)])
        nxt = b.add(r, _i64(1))
        r.add_incoming(nxt, b.block)
        b.cbranch(b.icmp_unsigned("<", nxt, _i64(n_runs)), head, done)
        b.position_at_end(done)


def _matrix_offsets(b: ir.IRBuilder, matrix: ir.Value, batches: tuple) -> list[ir.Value]:
    """The offsets (elements) of the lhs and rhs matrices of a ``gemm`` layout's product
    ``matrix`` (``gemm_layout``'s ``batches``: its index split over the batch dims)."""
    offsets, rest = [_i64(0), _i64(0)], matrix
    for j in reversed(range(len(batches))):
        size, *strides = batches[j]
        index = rest if j == 0 else b.urem(rest, _i64(size))
        rest = b.udiv(rest, _i64(size))
        offsets = [b.add(o, b.mul(index, _i64(s))) for o, s in zip(offsets, strides)]
    return offsets


def _i64(v: int) -> ir.Constant:
    return ir.Constant(S.I64, int(v))


def _i32(v: int) -> ir.Constant:
    return ir.Constant(S.I32, int(v))


# A loop function's arguments (``_emit_loop``) and the parallel runtime's ``ember_rt_run``.
def _cblas_gemm_type(ty: ir.Type) -> ir.FunctionType:
    """CBLAS ``gemm``'s type with 64-bit integers, for ``ty`` (float or double)."""
    ptr = ty.as_pointer()
    return ir.FunctionType(ir.VoidType(), [S.I32, S.I32, S.I32, S.I64, S.I64, S.I64, ty, ptr,
                                           S.I64, ptr, S.I64, ty, ptr, S.I64])


# Copies of at least COPY_THREADS_MIN_BYTES in native code with the runtime run as chunks of
# COPY_CHUNK_BYTES on its threads (``ProgramBuilder._emit_threaded_copy``).
COPY_THREADS_MIN_BYTES = 1 << 20
COPY_CHUNK_BYTES = 1 << 16
# (the runtime's ``ember_rt_rest`` last; a steps function takes a loop function's arguments)
_LOOP_ARGS = [I8P, I8P.as_pointer(), I8P.as_pointer(), I8P, S.I64, I8P]
_STEPS_ARGS = _LOOP_ARGS
_RUN = ir.FunctionType(ir.VoidType(), [I8P, I8P.as_pointer().as_pointer(), S.I64, S.I64,
                                       S.I64])


# Readers of a loop state that may run before an in-place update of it
# (``_in_place_updates``): ops computing a buffer of their own (a reshape may be a view,
# control flow may return its operand, a tuple aliases it).
# (``_plan`` also checks that each such reader's result is a buffer of the program, not a
# library step's value, which may be a view of its operand.)
_READS_INTO_OWN_BUFFER = frozenset({"fusion", "dot_general", "dynamic_slice", "slice",
                                    "gather", "reduce", "transpose", "broadcast_in_dim",
                                    "concatenate", "pad", "reverse", "reduce_window"}) \
    | ELEMENTWISE


def _readers_own_their_results(update: Instruction, users: dict, refs: dict) -> bool:
    """Whether every other reader of the state that ``update`` writes in place (planned
    before it) put its result in a buffer of the program: a library step's value (NumPy's
    evaluator) may be a view of the state, which the update would then change."""
    state = update.operands[0]
    return all(r is update or all(ref.kind != "value" for ref in refs[id(r)])
               for r in users.get(state, []))


def _in_place_updates(body: Computation) -> frozenset[int]:
    """The ``dynamic_update_slice`` ops of a loop body that may write the state in place:
    each updates a parameter and lands in that parameter's slot of the new state, and every
    other reader of the parameter computes a buffer of its own before the update runs (scan's
    write of its output row; ``x.at[i].set(f(x[i - 1]))`` in a ``fori_loop``, which copied
    the whole array every step): the body then writes one window of the buffer instead of
    copying all of it, twice, per iteration."""
    root = body.root
    if root.opcode != "tuple" or any(o.shape.is_tuple for o in root.operands):
        return frozenset()
    users = body.users()
    position = {id(inst): n for n, inst in enumerate(body.instructions)}
    found = set()
    for p in body.parameters:
        k = p.attrs["index"]
        if p.shape.is_tuple or k >= len(root.operands):
            continue
        dus = root.operands[k]
        readers = users.get(p, [])
        if (dus.opcode != "dynamic_update_slice" or dus.operands[0] is not p
                or p in dus.operands[1:]):
            continue
        if all(r is dus or (r.opcode in _READS_INTO_OWN_BUFFER
                            and position[id(r)] < position[id(dus)]) for r in readers):
            found.add(id(dus))
    return frozenset(found)


def _used_results(inst: Instruction, comp: Computation) -> set[int] | None:
    """The indices of ``inst``'s result elements that ``comp`` reads (None: all)."""
    if comp.root is inst:
        return None
    used = set()
    for user in comp.instructions:
        if any(o is inst for o in user.operands):
            if user.opcode != "get_tuple_element":
                return None
            used.add(user.attrs["index"])
    return used


def _only_user(value: Instruction, user: Instruction, comp: Computation) -> bool:
    """Whether ``user`` is the one reader of ``value`` in ``comp``, reading it once."""
    return comp.root is not value and sum(
        o is value for inst in comp.instructions for o in inst.operands) == 1


def _write_into(prior: list, ref: BufferRef, dst: BufferRef) -> bool:
    """Makes the kernel step of ``prior`` writing ``ref`` write ``dst`` instead, when that
    kernel is ``ref``'s one writer and no step from it on reads ``ref`` or touches ``dst``
    (whose memory buffer assignment may have given to values live before the loop).
    Returns whether it did."""
    writers = [i for i, s in enumerate(prior)
               if any(_overlaps(w, ref) for w in _step_refs(s)[1])]
    if len(writers) != 1 or ref.kind != "temp":
        return False
    kernel = prior[writers[0]]
    if not isinstance(kernel, KernelStep) or kernel.outputs != [ref]:
        return False
    for s in prior[writers[0]:]:
        reads, writes = _step_refs(s)
        if any(_overlaps(r, dst) for r in reads + writes) or (
                s is not kernel and any(_overlaps(r, ref) for r in reads)):
            return False
    kernel.outputs = [dst]
    return True


# How many plain element ops one op of ``EXPENSIVE_ELEMENTWISE`` (a vector ``tanh``,
# ``logistic``, ``exp``...) is worth, for ``_element_cost``.
EXPENSIVE_OP_COST = 8


def _element_cost(fused: Computation) -> int:
    """The work of an element of ``fused`` relative to a plain one: 1, plus
    ``EXPENSIVE_OP_COST`` per expensive elementwise op. (An LSTM cell's 4096 elements of
    five ``tanh``/``logistic`` each take ~11 µs: worth two threads in a native loop,
    whose runtime workers are awake between a step's kernels.)"""
    return 1 + EXPENSIVE_OP_COST * sum(_expensive(i) for i in fused.instructions)


def _expensive(inst: Instruction) -> bool:
    """Whether ``inst`` is an expensive elementwise op: one of EXPENSIVE_ELEMENTWISE, or the
    magnitude (``abs``, ``sign``) of a complex number, a float64 square root (a Mandelbrot
    step's 60,000 elements took ~100 us on one thread)."""
    return inst.opcode in EXPENSIVE_ELEMENTWISE or (
        inst.opcode in ("abs", "sign") and bool(inst.operands)
        and np.dtype(inst.operands[0].dtype).kind == "c")


def _refill(prior: list, ref: BufferRef, dst: BufferRef) -> KernelStep | None:
    """A step computing ``ref`` again into ``dst``, when ``ref``'s one writer in ``prior``
    is a kernel reading only constants (a broadcast of a scalar, an iota): writing its
    result costs less than copying it."""
    writers = [s for s in prior if any(_overlaps(w, ref) for w in _step_refs(s)[1])]
    if (len(writers) != 1 or not isinstance(writers[0], KernelStep)
            or writers[0].outputs != [ref]
            or any(r.kind != "const" for r in writers[0].inputs)):
        return None
    return KernelStep(writers[0].info, list(writers[0].inputs), [dst])


def _update_views(body: Computation, in_place: frozenset[int]) -> frozenset[int]:
    """The reshapes (``reshape``, or ``broadcast_in_dim`` adding unit dims) of a body
    parameter that only in-place updates (``in_place``) read as their update: the update
    then reads the parameter's buffer, as its bytes are the reshape's (scan's stacking of
    an output row), instead of a copy made by a kernel."""
    users = body.users()
    found = set()
    for inst in body.instructions:
        if id(inst) not in in_place:
            continue
        u = inst.operands[1]
        x = u.operands[0] if u.operands else None
        if x is None or x.opcode != "parameter" or x.shape.is_tuple or u.shape.is_tuple:
            continue
        if u.opcode == "broadcast_in_dim":
            dims = list(u.attrs["broadcast_dimensions"])
            if x.shape.size != u.shape.size or dims != sorted(dims):
                continue
        elif u.opcode != "reshape":
            continue
        if all(id(r) in in_place and r.operands[1] is u and u not in r.operands[2:]
               and r.operands[0] is not u for r in users.get(u, [])):
            found.add(id(u))
    return frozenset(found)


def _overlaps(a: BufferRef, b: BufferRef) -> bool:
    """Whether two buffers may share memory."""
    if a.kind != b.kind:
        return False
    if a.kind != "temp":
        return a.index == b.index
    return (a.index < b.index + max(_nbytes(b), 1)
            and b.index < a.index + max(_nbytes(a), 1))


# Ops whose kernel code computes each output element from loads of its inputs alone (no
# accumulator, nothing written before all of an element's loads).
_INDEX_MAP_OPS = ELEMENTWISE | frozenset({
    "parameter", "constant", "broadcast_in_dim", "reshape", "transpose", "slice",
    "dynamic_slice", "iota", "concatenate", "pad", "reverse", "gather"})


def _same_index_params(fused: Computation) -> frozenset[tuple[int, int]]:
    """``(output, parameter)`` pairs of ``fused`` such that its kernel may write the output
    over the parameter's buffer: every output has the parameter's dims, the parameter
    reaches the outputs through elementwise ops alone (so it is read only at the element
    being written), and the output is computed from it (so the element is read, once, before
    that output's element is written; another output reading it uses the value read)."""
    root = fused.root
    outputs = list(root.operands) if root.opcode == "tuple" else [root]
    if any(i.opcode not in _INDEX_MAP_OPS and not (i is root and root.opcode == "tuple")
           for i in fused.instructions) \
            or any(o.shape.is_tuple or o.dims != outputs[0].dims for o in outputs):
        return frozenset()
    dims = outputs[0].dims
    users = fused.users()
    ancestors = [_parameters_below(o) for o in outputs]
    found = set()
    for p in fused.parameters:
        if p.shape.is_tuple or p.dims != dims:
            continue
        stack, ok = [p], True
        while stack and ok:
            for u in users.get(stack.pop(), []):
                if u is root and root.opcode == "tuple":
                    continue
                if u.opcode not in ELEMENTWISE or u.shape.is_tuple or u.dims != dims:
                    ok = False
                    break
                stack.append(u)
        if ok:
            found.update((k, p.attrs["index"]) for k, below in enumerate(ancestors)
                         if p in below)
    return frozenset(found)


def _parameters_below(inst: Instruction) -> set:
    """The parameters that ``inst`` is computed from (itself, if it is one)."""
    seen, stack, found = set(), [inst], set()
    while stack:
        i = stack.pop()
        if id(i) in seen:
            continue
        seen.add(id(i))
        if i.opcode == "parameter":
            found.add(i)
        stack.extend(i.operands)
    return found


def _step_refs(step) -> tuple[list, list]:
    """(buffers ``step`` reads, buffers it writes), nested steps included."""
    if isinstance(step, KernelStep):
        return list(step.inputs), list(step.outputs)
    if isinstance(step, CopyStep):
        return [step.src], [step.dst]
    if isinstance(step, UpdateStep):
        return [step.update, step.dst, *step.starts], [step.dst]
    if isinstance(step, DotStep):
        return list(step.inputs), [step.output]
    if isinstance(step, LibraryStep):
        return [r for leaves in step.inputs for r in leaves], list(step.outputs)
    nested = step.cond + step.body if isinstance(step, WhileStep) else \
        [s for b in step.branches for s in b]
    reads, writes = [step.pred if isinstance(step, WhileStep) else step.index], []
    for s in nested:
        r, w = _step_refs(s)
        reads += r
        writes += w
    return reads, writes


def _write_results_in_place(body: list, results: list, state: list) -> list:
    """Makes the kernel computing a loop body's result write it straight into its state
    buffer, which saves a copy per iteration (a case branch's, into the case's result
    buffer: a copy per call), where that cannot change what is computed:
    the kernel is the result's only writer and reads the state buffer at most at the element
    it writes, no later step (and no other result) reads the state buffer, and no loop or
    case follows (their native code is already emitted). Returns the results' buffers."""
    for k, (src, dst) in enumerate(zip(results, state)):
        if (src.kind != "temp" or dst.kind not in ("temp", "output") or _overlaps(src, dst)
                or sum(_overlaps(r, src) for r in results) != 1
                or any(_overlaps(r, dst) for r in results)):
            continue
        writers = [i for i, s in enumerate(body)
                   if any(_overlaps(w, src) for w in _step_refs(s)[1])]
        if len(writers) != 1 or not isinstance(body[writers[0]], KernelStep):
            continue
        i = writers[0]
        kernel, later = body[i], body[i + 1:]
        if src not in kernel.outputs:
            continue
        o = kernel.outputs.index(src)
        if any(_overlaps(r, dst) and (o, j) not in kernel.same_index
               for j, r in enumerate(kernel.inputs)):
            continue
        if any(isinstance(s, (WhileStep, CaseStep))
               or any(_overlaps(r, dst) for r in _step_refs(s)[0]) for s in later):
            continue
        kernel.outputs = kernel.outputs[:o] + [dst] + kernel.outputs[o + 1:]
        for s in later:
            _redirect_reads(s, src, dst)
        results[k] = dst
    return results


def _redirect_reads(step, src: BufferRef, dst: BufferRef) -> None:
    """Makes ``step`` (not control flow) read ``dst`` where it read ``src``."""
    def swap(refs):
        return [dst if r == src else r for r in refs]
    if isinstance(step, KernelStep):
        step.inputs = swap(step.inputs)
    elif isinstance(step, CopyStep):
        step.src = dst if step.src == src else step.src
    elif isinstance(step, UpdateStep):
        step.update = dst if step.update == src else step.update
        step.starts = swap(step.starts)
    elif isinstance(step, DotStep):
        step.inputs = swap(step.inputs)
    elif isinstance(step, LibraryStep):
        step.inputs = [swap(leaves) for leaves in step.inputs]


def _nbytes(ref: BufferRef) -> int:
    return int(np.prod(ref.dims, dtype=np.int64)) * np.dtype(ref.dtype).itemsize


def work_of(step: KernelStep) -> int:
    return step.info.extent * step.info.work_per_item
