"""Compiles an optimized HLO module into one LLVM module and a plan of steps that runs it.

Every instruction of the entry computation becomes a *step*:

- ``KernelStep``: a fusion (or a lone shape op, reduce, gather, dynamic slice,
  single-operand scatter, cumulative scan or ``ember.top_k`` custom call) compiled to a
  native kernel;
- ``DotStep``: ``dot_general`` through BLAS (NumPy's ``matmul``);
- ``LibraryStep`` (the library thunk): everything without a kernel — sort, scatters of
  several operands or with batching dims, dynamic updates, control flow, custom calls, and
  fusions whose ops have no native code (complex ``exp``, ``lgamma``, ...) — run by the
  NumPy evaluator, the interpreter's rules;
- parameters, constants, tuples and ``get_tuple_element`` only name buffers.

All kernels of a module go into one LLVM module (one LLVM compile per program). When every
step is a kernel, the module also gets an ``entry`` function calling the kernels in order on
buffers laid out by buffer assignment, so a small program runs with a single native call.

A *buffer* is one leaf array of an instruction's result; ``BufferRef`` says where it lives:
a parameter, a module constant, an output array, or a temporary at an offset of the arena
(one allocation per run, laid out from ``assign_buffers``: values that are not live at the
same time share memory).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from ember.backends.cpu import scalar_ops as S
from ember.backends.cpu.kernel_gen import (
    I8P,
    KernelBuilder,
    KernelInfo,
    is_small_dot,
)
from ember.backends.cpu.scalar_ops import UnsupportedOp
from ember.backends.cpu.topk_kernel import is_native_top_k
from ember.compiler.buffer_assignment import assign_buffers, leaf_range
from ember.compiler.hlo import ELEMENTWISE, Computation, Instruction, Module
from ember.compiler.reduce_window import prefix_scan

ALIGN = 64
# Ops that get a kernel of their own when they stand alone in the entry computation.
STANDALONE_KERNEL_OPS = ELEMENTWISE | frozenset({
    "broadcast_in_dim", "reshape", "transpose", "slice", "concatenate", "pad", "reverse",
    "iota", "reduce", "gather", "dynamic_slice", "scatter", "reduce_window", "dot_general",
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


@dataclass
class DotStep:
    inst: Instruction
    inputs: list[BufferRef]
    output: BufferRef


@dataclass
class LibraryStep:
    inst: Instruction
    inputs: list[list[BufferRef]]  # the leaves of each operand
    outputs: list[BufferRef]


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
    ``reduce_window`` only when it is a cumulative scan from the identity, a ``dot_general``
    only when it contracts few elements (others go to BLAS)."""
    if inst.opcode == "dot_general":
        return is_small_dot(inst)
    return inst.opcode != "reduce_window" or prefix_scan(inst) is not None


def _single_op_computation(inst: Instruction) -> Computation:
    """A fused computation holding just ``inst`` (parameters for its operands)."""
    params = [Instruction("parameter", [], op.shape, {"index": i}, name=f"p{i}")
              for i, op in enumerate(inst.operands)]
    body = Instruction(inst.opcode, params, inst.shape, inst.attrs, inst.calls,
                       name=inst.name or "op")
    return Computation(f"single.{inst.name}", params + [body], body)


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

    @property
    def max_work(self) -> int:
        """Elements computed by the biggest kernel (0 without kernels)."""
        return max((work_of(s) for s in self.steps if isinstance(s, KernelStep)), default=0)


class ProgramBuilder:
    """Turns the entry computation into a ``Program``."""

    def __init__(self, module: Module, prefix: str = "m", short_rows: bool = True):
        self.module = module
        self.prefix = prefix  # makes every symbol unique in the process's shared engine
        # Whether row fusions over short rows may take ``short_rows.ShortRowKernel`` (same
        # results as the looped row kernel, bit for bit: faster code, slower to compile).
        self.short_rows = short_rows
        self.short_row_kernels = 0
        self.entry = module.entry
        self.ir_module = ir.Module(name="ember")
        self.consts = ConstantPool(self.ir_module, prefix)
        self.refs: dict[int, list[BufferRef]] = {}  # id(inst) -> leaf refs
        self.n_values = 0
        self.kernel_count = 0

    @property
    def entry_name(self) -> str:
        return f"{self.prefix}_entry"

    def build(self) -> Program:
        comp = self.entry
        assignment = assign_buffers(comp)
        offsets = self._layout(assignment)
        root_leaves = self._root_leaves(comp)
        output_of: dict[tuple, int] = {}
        output_shapes = []
        for key in root_leaves:
            if key is not None and key not in output_of:
                inst, leaf = key
                shape = inst.shape.leaves()[leaf]
                output_of[key] = len(output_shapes)
                output_shapes.append((shape.dims, shape.dtype))
        steps = []
        for inst in comp.instructions:
            op = inst.opcode
            if op == "parameter":
                self.refs[id(inst)] = [BufferRef("param", inst.attrs["index"], inst.dtype,
                                                 inst.dims)]
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
            step = self._step(inst, assignment, offsets, output_of)
            steps.extend(step if isinstance(step, list) else [step])
        outputs = list(self._root_refs(comp))
        has_entry = all(isinstance(s, KernelStep) for s in steps)
        if has_entry:
            self._emit_entry(steps, len(comp.parameters), len(output_shapes))
        arena = max(offsets.values(), default=0)
        return Program(str(self.ir_module), steps, self.consts.arrays, self.consts.names,
                       len(comp.parameters), outputs, output_shapes, arena, has_entry,
                       self.n_values, self.entry_name, self.short_row_kernels)

    # ------------------------------------------------------------------ buffers

    @staticmethod
    def _layout(assignment) -> dict:
        """Arena offset of every allocation; the "end" key is the arena size."""
        offsets, pos = {}, 0
        for alloc in assignment.allocations:
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
                                       and not inst.shape.is_tuple and _has_kernel(inst)) \
                or is_native_top_k(inst):
            fused = inst.calls[0] if inst.opcode == "fusion" else _single_op_computation(inst)
            phases = [None]
            if (fused.root.opcode == "scatter"
                    and fused.root.operands[0].shape.size >= SPLIT_SCATTER_MIN_SIZE):
                phases = ["copy", "update"]
            infos = [self._try_kernel(fused, phase) for phase in phases]
            if None not in infos and all(len(r) == 1 for r in inputs):
                outs = self._result_refs(inst, assignment, offsets, output_of)
                self.refs[id(inst)] = outs
                return [KernelStep(info, [r[0] for r in inputs], outs) for info in infos]
        if inst.opcode == "dot_general" and all(len(r) == 1 for r in inputs):
            out = self._result_refs(inst, assignment, offsets, output_of)
            self.refs[id(inst)] = out
            return DotStep(inst, [r[0] for r in inputs], out[0])
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
        name = f"{self.prefix}_kernel_{self.kernel_count}"
        self.kernel_count += 1
        try:
            kb = KernelBuilder(self.ir_module, name, fused, self.consts.typed_pointer,
                               short_rows=self.short_rows, scatter_phase=scatter_phase)
            info = kb.build()
            self.short_row_kernels += kb.short_row_kernel
            return info
        except UnsupportedOp:
            self.ir_module.globals.pop(name, None)
            return None

    # ------------------------------------------------------------------ entry

    def _emit_entry(self, steps, n_params, n_outputs) -> None:
        """``void entry(i8* params..., i8* outputs..., i8* arena)``: runs every kernel."""
        n_args = n_params + n_outputs + 1
        fn = ir.Function(self.ir_module, ir.FunctionType(ir.VoidType(), [I8P] * n_args),
                         self.entry_name)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        args = fn.args
        kernels = {}
        for step in steps:
            info = step.info
            kfn = kernels.get(info.name) or self.ir_module.globals[info.name]
            refs = step.inputs + step.outputs
            arr = b.alloca(ir.ArrayType(I8P, len(refs)))
            for k, ref in enumerate(refs):
                slot = b.gep(arr, [ir.Constant(S.I64, 0), ir.Constant(S.I32, k)])
                b.store(self._entry_pointer(b, ref, args, n_params), slot)
            bufs = b.bitcast(arr, I8P.as_pointer())
            b.call(kfn, [bufs, ir.Constant(S.I64, 0), ir.Constant(S.I64, info.extent)])
        b.ret_void()

    def _entry_pointer(self, b, ref: BufferRef, args, n_params) -> ir.Value:
        if ref.kind == "param":
            return args[ref.index]
        if ref.kind == "output":
            return args[n_params + ref.index]
        if ref.kind == "const":
            return self.consts.pointer(b, ref.index, I8P)
        return b.gep(args[-1], [ir.Constant(S.I64, ref.index)])  # temp: arena + offset


def work_of(step: KernelStep) -> int:
    return step.info.extent * step.info.work_per_item
