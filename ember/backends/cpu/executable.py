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
from ember.compiler.eval_elementwise import REDUCE_UFUNCS
from ember.compiler.evaluator import Plan, evaluate_instruction

_ffi = cffi.FFI()
_fb = _ffi.from_buffer
# cffi's backend call without the Python-level wrapper of ``ffi.from_buffer`` (~0.4 µs less).
_from_buffer = _ffi._backend.from_buffer
_CHAR_ARRAY = _ffi.typeof("char[]")
_KERNEL_SIG = "void(*)(char**, int64_t, int64_t)"

# Elements of work below which a kernel runs on one thread (thread hand-off costs ~10 µs).
PARALLEL_MIN_WORK = 1 << 16
# Programs with less total work than this run as one native call when they can.
SINGLE_CALL_MAX_WORK = 1 << 16



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
            elif isinstance(step, DotStep):
                self._steps.append((step, _dot_plan(step.inst)))
            elif step.inst.opcode in ("fusion", "call"):
                self._steps.append((step, Plan(step.inst.calls[0])))
            else:
                self._steps.append((step, None))
        self._out_shapes = program.output_shapes
        self._entry = None
        total_work = sum(work_of(s) for s in program.steps if isinstance(s, KernelStep))
        if program.has_entry and total_work < SINGLE_CALL_MAX_WORK:
            n = program.n_params + len(program.output_shapes) + 1
            self._entry = _ffi.cast(f"void(*)({', '.join(['char*'] * n)})",
                                    lib.address(program.entry_name))
            self.execute_exact = self._single_call_runner()
        else:
            self.execute_exact = self._execute_read_only

    def _single_call_runner(self):
        """A function made for this program's arity: args in, read-only outputs out, one
        native call in between (the cached-jit hot path)."""
        prog = self.program
        params = [f"a{i}" for i in range(prog.n_params)]
        outs = [f"o{i}" for i in range(len(prog.output_shapes))]
        lines = ["def run(values):"]
        if params:
            lines.append(f"    {', '.join(params)}, = values")
        for a in params:
            lines.append(f"    if not {a}.flags.c_contiguous: {a} = {a}.copy(order='C')")
        for i, o in enumerate(outs):
            lines.append(f"    {o} = empty(shape{i}, dtype{i})")
        arena = "fb(CHAR, empty(ARENA, uint8))" if prog.arena_bytes else "NULL"
        call_args = [f"fb(CHAR, {v})" for v in params + outs] + [arena]
        lines.append(f"    entry({', '.join(call_args)})")
        for o in outs:
            lines.append(f"    {o}.flags.writeable = False")
        results = []
        for ref in prog.outputs:
            if ref.kind == "param":
                results.append(f"a{ref.index}")
            elif ref.kind == "output":
                results.append(f"o{ref.index}")
            else:
                results.append(f"consts[{ref.index}]")
        lines.append(f"    return [{', '.join(results)}]")
        env = {"empty": np.empty, "uint8": np.uint8, "fb": _from_buffer, "CHAR": _CHAR_ARRAY,
               "NULL": _ffi.NULL, "entry": self._entry, "ARENA": prog.arena_bytes,
               "consts": self._read_only_consts()}
        for i, (dims, dt) in enumerate(prog.output_shapes):
            env[f"shape{i}"] = dims
            env[f"dtype{i}"] = dt
        exec("\n".join(lines), env)  # noqa: S102 - generated from the program's own layout
        return env["run"]

    def _read_only_consts(self) -> list[np.ndarray]:
        out = []
        for c in self._consts:
            c = c.copy()
            c.flags.writeable = False
            out.append(c)
        return out

    def _execute_read_only(self, args) -> list[np.ndarray]:
        outs = self.execute(args)
        for o in outs:
            if o.flags.writeable:
                o.flags.writeable = False
        return outs

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
                    self._run_dot(step, plan, args, outs, arena, values)
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
        table_of = {}  # range start -> that range's pointer table
        for c, (lo, _) in enumerate(ranges):
            p = list(ptrs)
            for i, arrays in partials.items():
                p[n_in + i] = _fb(arrays[c])
            table_of[lo] = _ffi.new("char*[]", p)
        pool.run(lambda lo, hi: k.fn(table_of[lo], lo, hi), ranges)
        for i, arrays in partials.items():
            ref = step.outputs[i]
            combined = REDUCE_UFUNCS[partial[i]].reduce(np.stack(arrays), axis=0)
            dest = self._array(ref, args, outs, arena, values)
            np.copyto(dest, combined.astype(ref.dtype, copy=False))

    def _run_dot(self, step: DotStep, plan, args, outs, arena, values) -> None:
        lhs, rhs = (self._array(r, args, outs, arena, values) for r in step.inputs)
        dest = self._array(step.output, args, outs, arena, values)
        if plan is None or lhs.dtype != dest.dtype or rhs.dtype != dest.dtype:
            np.copyto(dest, evaluate_instruction(step.inst, [lhs, rhs]))
            return
        lperm, rperm, (b, m, k, n) = plan
        # (batch, m, k) @ (batch, k, n) straight into the output buffer; transposed operands
        # stay views, which BLAS reads with its transpose flags.
        lt = lhs.transpose(lperm).reshape(b, m, k)
        rt = rhs.transpose(rperm).reshape(b, k, n)
        with np.errstate(all="ignore"):
            if b == 1:
                np.matmul(lt[0], rt[0], out=dest.reshape(m, n))
            else:
                np.matmul(lt, rt, out=dest.reshape(b, m, n))

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


_BLAS_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


def _dot_plan(inst):
    """Operand permutations to (batch, m, k) and (batch, k, n), and the four sizes; None
    for dtypes BLAS does not do (they go through the evaluator)."""
    if inst.dtype not in _BLAS_DTYPES:
        return None
    a = inst.attrs
    lhs, rhs = inst.operands
    lc, rc = list(a["lhs_contracting_dimensions"]), list(a["rhs_contracting_dimensions"])
    lb, rb = list(a["lhs_batching_dimensions"]), list(a["rhs_batching_dimensions"])
    lf = [i for i in range(lhs.shape.rank) if i not in lc and i not in lb]
    rf = [i for i in range(rhs.shape.rank) if i not in rc and i not in rb]

    def size(shape, dims):
        return int(np.prod([shape.dims[d] for d in dims], dtype=np.int64))
    sizes = (size(lhs.shape, lb), size(lhs.shape, lf), size(lhs.shape, lc),
             size(rhs.shape, rf))
    return lb + lf + lc, rb + rc + rf, sizes
