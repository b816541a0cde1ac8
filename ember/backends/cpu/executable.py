"""Runs a compiled ``Program``: native kernels through cffi, BLAS dots, library thunks.

``execute(args)`` takes one C-contiguous NumPy array per entry parameter (others are made
contiguous) and returns the outputs. A program whose steps are all kernels and whose work is
small runs as one call of its native ``entry`` function; otherwise the steps run in order,
kernels with enough work split across the thread pool (full reductions write per-range
partials, combined afterwards with the reducer).
"""

from __future__ import annotations

import cffi
import numpy as np

from ember.backends.cpu import threads
from ember.backends.cpu.program import DotStep, KernelStep, LibraryStep, Program, work_of
from ember.compiler.evaluator import Plan, evaluate_instruction

_ffi = cffi.FFI()
_fb = _ffi.from_buffer
_KERNEL_SIG = "void(*)(char**, int64_t, int64_t)"

# Elements of work below which a kernel runs on one thread (thread hand-off costs ~10 µs).
PARALLEL_MIN_WORK = 1 << 16
# Programs with less total work than this run as one native call when they can.
SINGLE_CALL_MAX_WORK = 1 << 16

_PARTIAL_COMBINE = {
    "add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
}


def _contiguous(a: np.ndarray) -> np.ndarray:
    return a if a.flags.c_contiguous else a.copy(order="C")


class _Kernel:
    __slots__ = ("fn", "step", "parallel")

    def __init__(self, fn, step: KernelStep):
        self.fn = fn
        self.step = step
        self.parallel = work_of(step) >= PARALLEL_MIN_WORK and step.info.extent > 1


class CpuExecutable:
    """A compiled module ready to run (holds its loaded object code)."""

    def __init__(self, program: Program, lib, module=None):
        self.program = program
        self.module = module
        self._lib = lib  # keeps the native code alive
        self._consts = program.constants
        self._const_ptrs = [_ffi.cast("char*", lib.global_address(n))
                            for n in program.constant_names]
        self._steps = []
        for step in program.steps:
            if isinstance(step, KernelStep):
                fn = _ffi.cast(_KERNEL_SIG, lib.address(step.info.name))
                self._steps.append(_Kernel(fn, step))
            elif isinstance(step, LibraryStep) and step.inst.opcode in ("fusion", "call"):
                self._steps.append((step, Plan(step.inst.calls[0])))
            else:
                self._steps.append((step, None))
        self._out_shapes = program.output_shapes
        self._entry = None
        total_work = sum(work_of(s) for s in program.steps if isinstance(s, KernelStep))
        if program.has_entry and total_work < SINGLE_CALL_MAX_WORK:
            n = program.n_params + len(program.output_shapes) + 1
            self._entry = _ffi.cast(f"void(*)({', '.join(['char*'] * n)})",
                                    lib.address("entry"))

    # ------------------------------------------------------------------ running

    def execute(self, args) -> list[np.ndarray]:
        """Runs the program on ``args`` (one array per parameter); returns the outputs."""
        prog = self.program
        if len(args) != prog.n_params:
            raise ValueError(f"expected {prog.n_params} arguments, got {len(args)}")
        args = [_contiguous(np.asarray(a)) for a in args]
        outs = [np.empty(dims, dt) for dims, dt in self._out_shapes]
        arena = np.empty(prog.arena_bytes, np.uint8) if prog.arena_bytes else None
        if self._entry is not None:
            self._entry(*[_fb(a) for a in args], *[_fb(o) for o in outs],
                        _fb(arena) if arena is not None else _ffi.NULL)
        else:
            self._run_steps(args, outs, arena)
        return [self._array(r, args, outs, arena, None) for r in prog.outputs]

    def _run_steps(self, args, outs, arena) -> None:
        values = [None] * self.program.n_values
        arena_ptr = _fb(arena) if arena is not None else None
        for step in self._steps:
            if type(step) is _Kernel:
                self._run_kernel(step, args, outs, arena, arena_ptr, values)
            else:
                step, plan = step
                if isinstance(step, DotStep):
                    self._run_dot(step, args, outs, arena, values)
                else:
                    self._run_library(step, plan, args, outs, arena, values)

    def _array(self, ref, args, outs, arena, values) -> np.ndarray:
        kind = ref.kind
        if kind == "param":
            return args[ref.index]
        if kind == "output":
            return outs[ref.index]
        if kind == "const":
            return self._consts[ref.index]
        if kind == "value":
            return values[ref.index]
        nbytes = int(np.prod(ref.dims, dtype=np.int64)) * ref.dtype.itemsize
        return arena[ref.index:ref.index + nbytes].view(ref.dtype).reshape(ref.dims)

    def _pointer(self, ref, args, outs, arena_ptr, values):
        kind = ref.kind
        if kind == "param":
            return _fb(args[ref.index])
        if kind == "output":
            return _fb(outs[ref.index])
        if kind == "const":
            return self._const_ptrs[ref.index]
        if kind == "temp":
            return arena_ptr + ref.index
        values[ref.index] = v = _contiguous(values[ref.index])
        return _fb(v)

    def _run_kernel(self, k: _Kernel, args, outs, arena, arena_ptr, values) -> None:
        step = k.step
        ptrs = [self._pointer(r, args, outs, arena_ptr, values)
                for r in step.inputs + step.outputs]
        extent = step.info.extent
        if not k.parallel:
            k.fn(_ffi.new("char*[]", ptrs), 0, extent)
            return
        pool = threads.pool()
        ranges = threads.split(extent, pool.size)
        partial = step.info.partial_reducers
        if not partial:
            bufs = _ffi.new("char*[]", ptrs)
            pool.run(lambda lo, hi: k.fn(bufs, lo, hi), ranges)
            return
        # Full reductions: every range writes its own partial results, combined below.
        n_in = len(step.inputs)
        partials = {i: [np.empty(step.outputs[i].dims, step.outputs[i].dtype)
                        for _ in ranges] for i, op in enumerate(partial) if op}
        tables = []
        for c in range(len(ranges)):
            p = list(ptrs)
            for i, arrays in partials.items():
                p[n_in + i] = _fb(arrays[c])
            tables.append(_ffi.new("char*[]", p))
        pool.run(lambda lo, hi: k.fn(tables[ranges.index((lo, hi))], lo, hi), ranges)
        for i, arrays in partials.items():
            ref = step.outputs[i]
            combined = _PARTIAL_COMBINE[partial[i]].reduce(np.stack(arrays), axis=0)
            dest = self._array(ref, args, outs, arena, values)
            np.copyto(dest, combined.astype(ref.dtype, copy=False))

    def _run_dot(self, step: DotStep, args, outs, arena, values) -> None:
        lhs, rhs = (self._array(r, args, outs, arena, values) for r in step.inputs)
        result = evaluate_instruction(step.inst, [lhs, rhs])
        np.copyto(self._array(step.output, args, outs, arena, values), result)

    def _run_library(self, step: LibraryStep, plan, args, outs, arena, values) -> None:
        operands = []
        for leaf_refs, operand in zip(step.inputs, step.inst.operands):
            arrays = [self._array(r, args, outs, arena, values) for r in leaf_refs]
            operands.append(tuple(arrays) if operand.shape.is_tuple else arrays[0])
        if plan is not None:
            result = plan.run(operands)
        else:
            result = evaluate_instruction(step.inst, operands)
        leaves = _flatten(result) if step.inst.shape.is_tuple else [result]
        for ref, value in zip(step.outputs, leaves):
            value = np.asarray(value)
            if value.dtype != ref.dtype:
                value = value.astype(ref.dtype)
            if ref.kind == "output":
                outs[ref.index] = _contiguous(np.broadcast_to(value, ref.dims))
            else:
                values[ref.index] = np.broadcast_to(value, ref.dims)


def _flatten(value) -> list:
    if isinstance(value, tuple):
        return [x for v in value for x in _flatten(v)]
    return [value]
