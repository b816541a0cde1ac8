"""Runs a compiled ``Program``: native kernels through cffi, BLAS dots, library thunks.

The executable works from a ``RunPlan``: the part of a ``Program`` needed to run it (steps,
buffer references, constants, symbol names; no LLVM IR). ``RunPlan.of(program)`` makes one; a
plan pickles, so the disk cache stores it next to the native library and a warm process runs
without building the program (and without importing llvmlite or ``program.py``).

``execute(args)`` takes one C-contiguous NumPy array per entry parameter (others are made
contiguous) and returns the outputs. A program whose steps are all native runs as one native
call: of its ``entry`` function when its work is small (on the calling thread), else of its
``steps`` function (``native_call``), whose kernels with enough work run on the parallel
runtime and whose large products are CBLAS calls on BLAS's threads. Otherwise the steps run
in order from Python, kernels with enough work split across the threads (full reductions
write per-range partials, combined afterwards with the reducer). Control flow runs nested
step lists: a while loop whose steps are all native runs as one call of its ``loop``
function, others loop here (condition steps, a read of the pred, body steps); a case runs
the steps of the branch its index picks.
"""

from __future__ import annotations

import contextlib
import copy
import io
import logging
import math
import os
import pickle
import threading
import time

import _cffi_backend
import numpy as np

from ember import _threads as threads
from ember._blas_threads import blas_paths, blas_stall_guard, one_blas_thread
from ember._tiled_copy import copy_tiled
from ember.backends.cpu import buffer_pool, gemm_kernel, parallel_runtime, small_linalg_kernel
from ember.compiler.eval_elementwise import REDUCE_UFUNCS, gemm_operand, simple_reduce
from ember.compiler.evaluator import (
    CUSTOM_CALL_TARGETS,
    CustomCall,
    Plan,
    evaluate_instruction,
)
from ember.compiler.hlo import Instruction

# The C backend's FFI: casts, ``new`` and ``from_buffer`` with C type strings, without
# ``cffi.FFI``'s C parser (pycparser), whose import costs ~50 ms of the first compile.
_log = logging.getLogger(__name__)
_ffi = _cffi_backend.FFI()
_NO_REGION = contextlib.nullcontext()  # (``with one_blas_thread if ... else``)
_fb = _ffi.from_buffer
# The arena argument of an entry whose program has no arena (never read).
_NO_ARENA = np.empty(0, np.uint8)
_KERNEL_SIG = "void(*)(char**, int64_t, int64_t)"
# A program's steps function: arena, parameter and output tables, the runtime's run, tasks
# and rest (``program._emit_steps_function``).
_STEPS_SIG = "void(*)(char*, char**, char**, char*, int64_t, char*)"

# Elements of work below which a kernel runs on one thread (thread hand-off costs ~10 µs).
PARALLEL_MIN_WORK = 1 << 16
# ... and for a kernel after a dot that ran on BLAS's threads in the same program: OpenBLAS's
# workers spin for a long while after a call, so the other core is taken and a hand-off
# waits for it (an MLP train step's (128, 512) bias-and-relu kernels: 61 -> 23 us on one
# thread, the step 2.29 -> 2.21 ms).
AFTER_BLAS_MIN_WORK = 1 << 18
# Tasks per thread a parallel kernel is cut into (``parallel_runtime``): load balance.
TASKS_PER_THREAD = 8
# Programs with less total work than this run as one native call when they can, a native
# ``gemm`` counting its products over GEMM_PRODUCTS_PER_ELEMENT (a product is a fraction of
# a kernel's element: a (100, 100) @ (100, 100) gemm takes ~19 us on one thread, as ~32k
# elements of a small kernel), and each of at most SINGLE_THREAD_GEMM_MAX_PRODUCTS. Products
# up to that many multiply-adds run as ``gemm_split``'s tasks, each on one BLAS thread, on
# the parallel runtime's threads; larger ones on BLAS's threads. Measured on 2 cores with
# the bound at 1M and at 4M (a product then tanh, alone and in an 8-step loop): 128^3 68 ->
# 44 us, 362 -> 262 in the loop; (512, 64) @ (64, 64) in a loop 478 -> 419; (64, 512) @
# (512, 64) 57 -> 46 and 341 -> 241; at 4.1M (160^3) the same either way, while at 8.4M
# ((256, 256) @ (256, 128)) the tasks took 179 us against BLAS's 81.
SINGLE_CALL_MAX_WORK = 1 << 16
GEMM_PRODUCTS_PER_ELEMENT = 32
SINGLE_THREAD_GEMM_MAX_PRODUCTS = 1 << 22
# ... and SINGLE_THREAD_GEMV_MAX_PRODUCTS for a product with one row or column (``gemv``:
# it reads each matrix element once, memory-bound): OpenBLAS's threads gain nothing up to
# (512, 512) and take a (1000, 1000) float32 matvec from 113 to 31 us (each core's cache
# holds its half).
SINGLE_THREAD_GEMV_MAX_PRODUCTS = 1 << 18
# Tiered programs: while the optimized code compiles, a run whose quick code took at most this
# many seconds the first time runs the quick code again instead of waiting (both give the same
# bits), so a caller's loop goes on meanwhile; a slower quick code waits for the optimized one,
# for at most UPGRADE_WAIT_RUNS times its own first run's time before running again (None:
# as long as the compile takes).
QUICK_RERUN_MAX_SECONDS = 0.01
UPGRADE_WAIT_RUNS: float | None = 1.0
# A parallel reduction with partial results (a full reduction; a column reduction with few
# work items: ``KernelInfo.partial_reducers``) is cut into ranges that each write their own:
# one per PARALLEL_MIN_WORK elements of work, at most PARTIAL_RANGES. The count depends on
# the shape only, never on the thread count, so neither do the results.
PARTIAL_RANGES = 16


def partial_ranges(extent: int, work: int) -> list[tuple[int, int]]:
    """The ranges of a reduction's partial results (see ``PARTIAL_RANGES``): the
    parallel runtime's task slices (``t * extent // n`` to ``(t + 1) * extent // n``), so
    the Python pool computes the same partials."""
    n = max(1, min(extent, PARTIAL_RANGES, work // PARALLEL_MIN_WORK))
    return [(t * extent // n, (t + 1) * extent // n) for t in range(n)]



class _Record:
    """A plain record: fields from ``__slots__``, set once by position (a dataclass costs
    ~1 ms of import time each, on the first-call path). Each subclass gets an ``__init__``
    written for its fields: a warm start unpickles ~100 records per program, and a generic
    loop over the fields cost ~1 µs more per record."""

    __slots__ = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        fields = cls.__slots__
        source = (f"def __init__(self, {', '.join(fields)}):\n"
                  + "".join(f"    _set(self, {f!r}, {f})\n" for f in fields))
        namespace = {"_set": object.__setattr__}
        exec(source, namespace)  # noqa: S102 - generated from the class's own field names
        cls.__init__ = namespace["__init__"]

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __reduce__(self):
        return type(self), tuple(getattr(self, n) for n in self.__slots__)

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({fields})"


class Ref(_Record):
    """Where a leaf buffer lives (``program.BufferRef``'s fields): ``kind`` is "param",
    "const", "output", "temp" (``index`` is the arena offset) or "value"."""

    __slots__ = ("kind", "index", "dtype", "dims")

    kind: str
    index: int
    dtype: np.dtype
    dims: tuple


class KernelPlan(_Record):
    """A native kernel: ``name(bufs, lo, hi)`` over ``[0, extent)``; ``partial_reducers`` and
    ``blas`` as in ``KernelInfo`` (a kernel calling LAPACK runs as a ``gemm`` task does:
    under ``one_blas_thread``, see ``native_products``)."""

    __slots__ = ("name", "extent", "work", "partial_reducers", "inputs", "outputs", "blas")

    name: str
    extent: int
    work: int  # elements computed in all
    partial_reducers: tuple
    inputs: tuple
    outputs: tuple
    blas: bool


class DotPlan(_Record):
    """``dot_general`` through BLAS (``inst``"s operands are stand-in parameters); ``gemm``:
    the layout of the CBLAS call a native loop makes for it (``program.gemm_layout``), or
    None."""

    __slots__ = ("inst", "inputs", "output", "gemm")

    inst: Instruction
    inputs: tuple
    output: Ref
    gemm: tuple | None


class LibraryPlan(_Record):
    """An instruction run by the NumPy evaluator; ``inputs`` holds each operand"s leaves."""

    __slots__ = ("inst", "inputs", "outputs")

    inst: Instruction
    inputs: tuple
    outputs: tuple


class CopyPlan(_Record):
    """Copies buffer ``src`` into ``dst``."""

    __slots__ = ("src", "dst")

    src: Ref
    dst: Ref


class UpdatePlan(_Record):
    """Writes ``update`` into its window of ``dst`` at ``starts`` (clamped) in place."""

    __slots__ = ("update", "dst", "starts")

    update: Ref
    dst: Ref
    starts: tuple


class WhilePlan(_Record):
    """A while loop: ``cond`` steps, then ``pred`` says whether ``body`` steps run (and the
    loop goes on); ``loop`` is the native function running it whole (or None); ``work``
    the elements its kernels compute per iteration."""

    __slots__ = ("cond", "pred", "body", "loop", "work")

    cond: tuple
    pred: Ref
    body: tuple
    loop: str | None
    work: int


class CasePlan(_Record):
    """Runs the steps of ``branches[index]`` (the last branch for an index out of range)."""

    __slots__ = ("index", "branches")

    index: Ref
    branches: tuple


def nested_steps(steps):
    """Every step of ``steps``, those nested in loops and branches included."""
    for step in steps:
        yield step
        t = type(step)
        if t is WhilePlan:
            yield from nested_steps(step.cond + step.body)
        elif t is CasePlan:
            for branch in step.branches:
                yield from nested_steps(branch)


def plan_symbols(plan) -> list[str]:
    """The native functions ``plan`` calls (kernels, loops, the entry if it has one)."""
    names = []
    for step in nested_steps(plan.steps):
        if type(step) is KernelPlan:
            names.append(step.name)
        elif type(step) is WhilePlan and step.loop is not None:
            names.append(step.loop)
    if plan.native_call is not None:
        names.append(plan.entry_name if plan.native_call == "entry"
                     else steps_name(plan.entry_name))
    names.extend(name for _, _, name in plan.segments)
    return names


def _work(steps) -> int:
    """The elements the kernels of ``steps`` compute, plus the products of their native
    ``gemm`` calls: what decides whether they run on threads."""
    work = 0
    for s in steps:
        if type(s) is KernelPlan:
            work += s.work
        elif type(s) is DotPlan and s.gemm is not None:
            work += gemm_products(s.gemm)
    return work


def _single_call(steps) -> bool:
    """Whether ``steps`` (of a program with a native entry) do little enough work to run as
    one native call, on the calling thread: under ``SINGLE_CALL_MAX_WORK`` elements, and
    no ``gemm`` worth BLAS's threads."""
    work = 0
    for s in steps:
        if type(s) is KernelPlan:
            work += s.work
        elif type(s) is DotPlan and s.gemm is not None:
            if blas_threads_pay(s.gemm):
                return False
            work += gemm_products(s.gemm) // GEMM_PRODUCTS_PER_ELEMENT
    return work < SINGLE_CALL_MAX_WORK


def native_call(steps) -> str | None:
    """How a program whose steps are all native runs as one native call: ``"entry"`` (its
    ``entry`` function, on the calling thread: under ``SINGLE_CALL_MAX_WORK``, ``_single_call``),
    ``"steps"`` (its ``steps`` function, with threads: ``program._emit_steps_function``) or
    None, when its steps run from Python: where a reduction writes partial results over
    several ranges (combined in Python), or where products on BLAS's threads
    (``whole_gemm``) come with products whose tasks run on the parallel runtime, each on
    one BLAS thread (a batch, or those of a loop without products on BLAS's threads):
    OpenBLAS's thread count is one setting for the process, which cannot suit both within
    one call. ``steps``: the program's plan steps (``program.py``'s steps work too, made
    into plan steps)."""
    if _single_call(nested_steps(steps)):
        return "entry"
    for s in nested_steps(steps):
        if type(s) is KernelPlan and s.partial_reducers \
                and len(partial_ranges(s.extent, s.work)) > 1:
            return None
    if whole_gemms(steps) and _runtime_gemm_tasks(steps):
        return None
    return "steps"


def _runtime_gemm_tasks(steps, in_loop: bool = False) -> bool:
    """Whether ``steps`` have products whose tasks may run on the parallel runtime, each on
    one BLAS thread: a batch worth several threads, or any product of a loop (``in_loop``)
    that has none on BLAS's threads (a loop with some runs its other products on the
    calling thread, as outside loops: ``program._emit_loop``); or a kernel calling LAPACK,
    which needs one BLAS thread wherever it runs."""
    for s in steps:
        t = type(s)
        if t is DotPlan and s.gemm is not None and not whole_gemm(s.gemm) and (
                in_loop or blas_threads_pay(s.gemm)) or t is KernelPlan and s.blas:
            return True
        if t is WhilePlan:
            inner = s.cond + s.body
            if _runtime_gemm_tasks(inner, not whole_gemms(inner)):
                return True
        elif t is CasePlan and any(_runtime_gemm_tasks(b, in_loop) for b in s.branches):
            return True
    return False


def whole_gemms(steps) -> bool:
    """Whether ``steps`` (a program's, a loop's), their loops' included, have a product on
    BLAS's threads (``whole_gemm``)."""
    return any(type(s) is DotPlan and s.gemm is not None and whole_gemm(s.gemm)
               for s in nested_steps(steps))


def native_products(steps) -> bool:
    """Whether ``steps``, nested ones included, have a product with native ``gemm`` code or
    a kernel calling LAPACK (``KernelPlan.blas``): calls that must each keep to one BLAS
    thread."""
    return any(type(s) is DotPlan and s.gemm is not None or type(s) is KernelPlan and s.blas
               for s in nested_steps(steps))


def plan_steps(steps) -> tuple:
    """The run-plan records of ``program.py``'s steps (duck-typed)."""
    out = []
    for step in steps:
        if hasattr(step, "info"):  # KernelStep
            info = step.info
            out.append(KernelPlan(info.name, info.extent, info.extent * info.work_per_item,
                                  tuple(info.partial_reducers), _refs(step.inputs),
                                  _refs(step.outputs), info.blas))
        elif hasattr(step, "pred"):  # WhileStep
            cond, body = plan_steps(step.cond), plan_steps(step.body)
            work = _work(nested_steps(cond + body))
            out.append(WhilePlan(cond, _ref(step.pred), body, step.loop, work))
        elif hasattr(step, "branches"):  # CaseStep
            out.append(CasePlan(_ref(step.index),
                                tuple(plan_steps(b) for b in step.branches)))
        elif hasattr(step, "starts"):  # UpdateStep
            out.append(UpdatePlan(_ref(step.update), _ref(step.dst), _refs(step.starts)))
        elif hasattr(step, "src"):  # CopyStep
            out.append(CopyPlan(_ref(step.src), _ref(step.dst)))
        elif hasattr(step, "output"):  # DotStep
            out.append(DotPlan(_detached(step.inst), _refs(step.inputs), _ref(step.output),
                               step.gemm))
        else:  # LibraryStep
            out.append(LibraryPlan(_detached(step.inst),
                                   tuple(_refs(leaves) for leaves in step.inputs),
                                   _refs(step.outputs)))
    return tuple(out)


class RunPlan(_Record):
    """What running a ``Program`` needs (see ``program.Program`` for the fields)."""

    __slots__ = ("steps", "constants", "constant_names", "n_params", "outputs",
                 "output_shapes", "arena_bytes", "has_entry", "n_values", "entry_name",
                 "max_work", "native_call", "segments", "routines")

    steps: tuple
    constants: tuple
    constant_names: tuple
    n_params: int
    outputs: tuple
    output_shapes: tuple
    arena_bytes: int
    has_entry: bool
    n_values: int
    entry_name: str
    max_work: int
    native_call: str | None
    segments: tuple
    routines: tuple

    @staticmethod
    def of(program) -> RunPlan:
        """The plan of a ``program.Program`` (duck-typed: ``program.py`` is not imported)."""
        steps = plan_steps(program.steps)
        return RunPlan(steps, tuple(program.constants), tuple(program.constant_names),
                       program.n_params, _refs(program.outputs),
                       tuple((tuple(d), np.dtype(t)) for d, t in program.output_shapes),
                       program.arena_bytes, program.has_entry, program.n_values,
                       program.entry_name, program.max_work, program.native_call,
                       tuple(program.segments), tuple(program.routines))


class _CanonicalDtypePickler(pickle.Pickler):
    """Pickles NumPy dtypes by their scalar type, so they unpickle as NumPy's own instance.

    NumPy's pickling of a dtype unpickles a *copy*, and arrays of a copied dtype miss NumPy's
    fast paths: ``np.add.at`` on float32 ran 40x slower in a plan loaded from the disk cache.
    """

    def reducer_override(self, obj):
        if isinstance(obj, np.dtype):
            canonical = np.dtype(obj.type)
            if canonical == obj and canonical.str == obj.str:
                return np.dtype, (obj.type,)
        return NotImplemented


def dumps(obj) -> bytes:
    """``pickle.dumps`` (highest protocol) with dtypes that unpickle as NumPy's instances.

    Example:
        >>> pickle.loads(dumps(np.zeros(2, np.float32))).dtype is np.dtype(np.float32)
        True
    """
    out = io.BytesIO()
    _CanonicalDtypePickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return out.getvalue()


def renamed_plan(plan: RunPlan, old: str, new: str) -> RunPlan:
    """``plan`` with the symbol prefix ``old`` replaced by ``new`` (kernels, constants,
    entry): the same program compiled a second time under other names."""
    def rename(name: str) -> str:
        if not name.startswith(old):
            raise ValueError(f"renamed_plan: symbol {name!r} does not start with {old!r}")
        return new + name[len(old):]
    def renamed(steps) -> tuple:
        out = []
        for s in steps:
            t = type(s)
            if t is KernelPlan:
                s = KernelPlan(rename(s.name), *(getattr(s, f) for f in t.__slots__[1:]))
            elif t is WhilePlan:
                s = WhilePlan(renamed(s.cond), s.pred, renamed(s.body),
                              None if s.loop is None else rename(s.loop), s.work)
            elif t is CasePlan:
                s = CasePlan(s.index, tuple(renamed(b) for b in s.branches))
            out.append(s)
        return tuple(out)
    steps = renamed(plan.steps)
    fields = {f: getattr(plan, f) for f in RunPlan.__slots__}
    fields.update(steps=steps, constant_names=tuple(rename(n) for n in plan.constant_names),
                  entry_name=rename(plan.entry_name),
                  segments=tuple((a, b, rename(n)) for a, b, n in plan.segments))
    return RunPlan(*(fields[f] for f in RunPlan.__slots__))


def _ref(r) -> Ref:
    return Ref(r.kind, r.index, np.dtype(r.dtype), tuple(r.dims))


def _refs(refs) -> tuple:
    return tuple(_ref(r) for r in refs)


def _detached(inst: Instruction) -> Instruction:
    """``inst`` with its operands replaced by parameters of the same shapes, so the plan does
    not hold (or pickle) the rest of the module's graph."""
    params = [Instruction("parameter", [], op.shape, {"index": i}, name=f"p{i}")
              for i, op in enumerate(inst.operands)]
    return Instruction(inst.opcode, params, inst.shape, inst.attrs, inst.calls, inst.name)


def _contiguous(a: np.ndarray) -> np.ndarray:
    """``a``, or a C-contiguous copy of it: in pooled (64-byte aligned) memory when large, so
    the kernels' vector loads from it do not straddle cache lines."""
    if a.flags.c_contiguous:
        return a
    out = buffer_pool.empty(a.shape, a.dtype)
    copy_tiled(out, a)
    return out


class _GemmTasks:
    """A ``DotPlan``'s native ``gemm`` tasks (``gemm_split``): on the parallel runtime when
    ``threaded`` (a batch of products with more work than one thread does well), else one
    after another; under ``one_blas_thread`` when ``one_thread`` (always, but for a small
    product of a program whose steps function calls BLAS on its threads). ``gemm``: the
    layout (ember's own ``gemm``: a batch runs one task per thread, one matrix as one call
    of the split entry, ``split_gemm``, given the runtime or not)."""

    __slots__ = ("fn", "units", "tasks", "threaded", "one_thread", "per_thread", "split")

    def __init__(self, fn, gemm: tuple, threaded: bool, one_thread: bool = True):
        self.fn = fn
        _, self.units, self.tasks = gemm_split(gemm)
        self.per_thread = native_gemm(gemm)
        self.split = split_gemm(gemm)
        self.threaded = threaded and (self.units if self.per_thread else self.tasks) > 1
        self.one_thread = one_thread


class _WholeGemm:
    """A ``DotPlan``'s ``whole_gemm``: one CBLAS call on BLAS's threads, through cffi (the
    call ``program._emit_whole_gemm`` makes: ``gemm``, or ``gemv`` for one row or column)."""

    __slots__ = ("fn", "pointer", "arguments", "gemv")

    def __init__(self, gemm: tuple):
        c = "float" if gemm[0] == "s" else "double"
        routine = blas_routine(gemm)
        self.gemv = routine.endswith("gemv")
        if self.gemv:
            signature = (f"void(*)(int, int, int64_t, int64_t, {c}, {c}*, int64_t, {c}*, "
                         f"int64_t, {c}, {c}*, int64_t)")
            self.arguments = gemv_arguments(gemm, gemm[3], gemm[4])
        else:
            signature = (f"void(*)(int, int, int, int64_t, int64_t, int64_t, {c}, {c}*, "
                         f"int64_t, {c}*, int64_t, {c}, {c}*, int64_t)")
            self.arguments = whole_gemm_arguments(gemm)
        self.fn = _ffi.cast(signature, blas_address(routine))
        self.pointer = f"{c}*"

    def __call__(self, a, b, c) -> None:
        cast, p = _ffi.cast, self.pointer
        if self.gemv:
            matrix, trans, m, n, ld, inc = self.arguments
            mat, vec = (b, a) if matrix else (a, b)
            self.fn(CBLAS_ROW_MAJOR, trans, m, n, 1.0, cast(p, mat), ld, cast(p, vec), inc,
                    0.0, cast(p, c), 1)
            return
        order, ta, tb, m, n, k, lda, ldb, ldc = self.arguments
        self.fn(order, ta, tb, m, n, k, 1.0, cast(p, a), lda, cast(p, b), ldb, 0.0,
                cast(p, c), ldc)


class _Segment:
    """Native steps of a program stepped from Python that one native call runs
    (``program.ProgramBuilder._emit_segments``), as the steps function runs a whole program
    (``CpuExecutable._run_native_steps``); ``steps`` (prepared) run from Python while the
    parallel runtime is not ready."""

    __slots__ = ("fn", "name", "steps", "whole", "blas_tasks")

    def __init__(self, fn, name: str, steps: list, plans: tuple):
        self.fn, self.name, self.steps = fn, name, steps
        self.whole = whole_gemms(plans)
        self.blas_tasks = native_products(plans)


class _Kernel:
    __slots__ = ("fn", "step", "parallel", "blas")

    def __init__(self, fn, step: KernelPlan, min_work: int = PARALLEL_MIN_WORK):
        self.fn = fn
        self.step = step
        self.parallel = step.work >= min_work and step.extent > 1
        self.blas = step.blas  # (a kernel calling LAPACK: under ``one_blas_thread``)


class CpuExecutable:
    """A compiled module ready to run (holds its loaded native code).

    ``program``: a ``RunPlan`` or a ``program.Program`` (made into a plan); ``lib``: the
    loaded code, with ``address(name)`` and ``global_address(name)``.
    """

    def __init__(self, program, lib, module=None):
        program = program if isinstance(program, RunPlan) else RunPlan.of(program)
        self.program = program
        self.module = module
        self.native_key = None  # the disk cache's key of this code (set by the backend)
        self._lib = lib  # keeps the native code alive
        self._consts = list(program.constants)
        self._const_ptrs = [_ffi.cast("char*", lib.global_address(n))
                            for n in program.constant_names]
        gemm = _bind_gemm(program, lib)
        _bind_routines(program, lib)
        # (native ``gemm`` tasks run BLAS on their own threads, ``one_blas_thread``: held
        # around the entry's call, a native loop's, or a Python-stepped dot's tasks)
        self._blas_tasks = gemm and native_products(program.steps)
        self._steps = self._prepare(program.steps, lib, gemm,
                                    program.entry_name.removesuffix("_entry"),
                                    blas_threads=whole_gemms(program.steps))
        if gemm and program.segments:
            self._steps = self._with_segments(self._steps, program, lib)
        self._out_shapes = program.output_shapes
        self._allocate_outputs = [buffer_pool.allocator(d, t) for d, t in self._out_shapes]
        self._allocate_arena = buffer_pool.allocator(program.arena_bytes, np.uint8)
        self._entry = None
        self._runner = None  # the generated single-call runner (made by the second run)
        self._runner_listeners = []
        self._steps_fn = None  # (the native steps function, when the program runs as one)
        self._steps_whole = False
        kind = program.native_call if gemm else None
        if kind == "entry":
            n = program.n_params + len(program.output_shapes) + 1
            self._entry = _ffi.cast(f"void(*)({', '.join(['char*'] * n)})",
                                    lib.address(program.entry_name))
            self._first_run_pending = True
            self.execute_exact = self._until_runner
        else:
            if kind == "steps":
                self._steps_fn = _ffi.cast(_STEPS_SIG,
                                           lib.address(steps_name(program.entry_name)))
                self._steps_whole = whole_gemms(program.steps)
            self.execute_exact = self._execute_read_only
        self._tier = None  # (future, lock, listeners) while better code is being compiled
        self._tier_runs = 0

    @staticmethod
    def _prepare(steps, lib, gemm: bool, prefix: str, blas_threads: bool = False,
                 in_loop: bool = False) -> list:
        """What running ``steps`` needs: a ``_Kernel`` or a ``(plan, prepared)`` pair each.
        ``gemm``: whether native code may call BLAS (``_bind_gemm``); ``prefix``: that of
        the program's symbols; ``blas_threads``: whether the steps' program (a loop's steps,
        ``in_loop``: the loop) has products on BLAS's threads (``whole_gemm``), when its
        small products keep them too. (The rules are those of the native functions,
        ``program._emit_steps``: either way, the same calls with the same BLAS threads.)"""
        out = []
        # (a dot on BLAS's threads ran before, or in a loop's last round: AFTER_BLAS_MIN_WORK)
        after_blas = blas_threads and in_loop
        for step in steps:
            t = type(step)
            if t is KernelPlan:
                # (partial reductions keep the rule: their threaded runs combine partial
                # results, whose bits must not depend on what ran before)
                slow_start = after_blas and not step.partial_reducers
                out.append(_Kernel(_ffi.cast(_KERNEL_SIG, lib.address(step.name)), step,
                                   AFTER_BLAS_MIN_WORK if slow_start else PARALLEL_MIN_WORK))
                continue
            native = t is DotPlan and gemm and step.gemm is not None
            whole = native and whole_gemm(step.gemm)
            after_blas = after_blas or whole or (
                t is DotPlan and not native and _blas_threaded(step.inst))
            if whole:
                out.append((step, _WholeGemm(step.gemm)))
            elif native:
                # (the native loop's tasks, also where the loop steps from Python: the same
                # calls, so the same bits either way)
                name = gemm_task_name(prefix, step.gemm)
                large = blas_threads_pay(step.gemm)
                out.append((step, _GemmTasks(_ffi.cast(_KERNEL_SIG, lib.address(name)),
                                             step.gemm, large,
                                             not (blas_threads and not large))))
            elif t is DotPlan:
                out.append((step, _dot_plan(step.inst)))
            elif t is CopyPlan or t is UpdatePlan:
                out.append((step, None))
            elif t is WhilePlan:
                whole_inside = gemm and whole_gemms(step.cond + step.body)
                after_blas = after_blas or whole_inside
                out.append((step, tuple(
                    CpuExecutable._prepare(part, lib, gemm, prefix, whole_inside, True)
                    for part in (step.cond, step.body)) + (
                        _native_loop(step, lib) if gemm else None,)))
            elif t is CasePlan:
                out.append((step, [CpuExecutable._prepare(b, lib, gemm, prefix, blas_threads,
                                                          in_loop)
                                   for b in step.branches]))
            elif step.inst.opcode in ("fusion", "call"):
                out.append((step, Plan(step.inst.calls[0])))
            elif step.inst.opcode == "custom_call" and (
                    step.inst.attrs["call_target_name"] in CUSTOM_CALL_TARGETS):
                out.append((step, CustomCall(step.inst)))
            else:
                out.append((step, None))
        return out

    @staticmethod
    def _with_segments(prepared: list, program: RunPlan, lib) -> list:
        """``prepared`` (the program's steps) with each of its segments one ``_Segment``."""
        out, at = [], 0
        for first, end, name in program.segments:
            out.extend(prepared[at:first])
            out.append(_Segment(_ffi.cast(_STEPS_SIG, lib.address(name)), name,
                                prepared[first:end], program.steps[first:end]))
            at = end
        out.extend(prepared[at:])
        return out

    # ------------------------------------------------------------------ tiered compilation

    def upgrade_when_ready(self, future, after_first_run=None) -> None:
        """Tiered compilation: this executable runs quickly compiled code; ``future`` gives
        ``(plan, lib)`` of optimized code for the same program. The first call runs the quick
        code; later calls switch to the optimized code for good once it is ready, and until
        then run the quick code again when its first run was short
        (``QUICK_RERUN_MAX_SECONDS``: both codes give the same bits) or wait for the
        optimized code when it was not. If the optimized compile fails, the quick
        code stays (its error is logged). ``after_first_run``, if given, starts the
        optimizing compile: ``after_first_run.soon()`` when the first run ends (so that the
        first run has the cores to itself), ``after_first_run()`` (at once) when a later run
        needs the optimized code."""
        # Quick runs go through a copy holding the quick code's state, which ``_install``
        # never replaces: a quick run in flight while another thread installs the optimized
        # code reads one program throughout.
        self._quick = quick = copy.copy(self)
        self._fast_exact = getattr(quick, self.execute_exact.__name__)
        self._tier = (future, threading.Lock(), [])
        self._tier_pid = os.getpid()
        self._after_first_run = after_first_run
        self._first_run_done = False
        self._quick_seconds: float | None = None  # the first run's, on the quick code
        self.execute_exact = self._tiered_exact

    def _first_run_ended(self, seconds: float) -> None:
        if self._quick_seconds is None:
            self._quick_seconds = seconds
        hook = self._after_first_run
        if hook is not None and not self._first_run_done:
            self._first_run_done = True
            hook.soon()

    def on_upgrade(self, callback) -> None:
        """Calls ``callback()`` once this executable switched to optimized code (at once if
        no switch is pending). Callers that cached ``execute_exact`` refresh it there."""
        tier = self._tier
        if tier is None:
            if self._runner is None and self.execute_exact == self._until_runner:
                self._runner_listeners.append(callback)  # (told when the runner is made)
                return
            callback()
            return
        with tier[1]:
            if self._tier is tier:
                tier[2].append(callback)
                return
        callback()

    def _tier_gate(self) -> bool:
        """Before a run while an upgrade is pending; True when the run takes the quick code.
        The first run goes ahead on the quick code. A later run installs the optimized code
        when it is ready; until then it runs the quick code again if that took at most
        ``QUICK_RERUN_MAX_SECONDS`` the first time, or waits for the optimized code."""
        tier = self._tier
        if tier is None:
            return False
        future, lock, listeners = tier
        with lock:
            if self._tier is not tier:
                return False
            if self._tier_runs == 0:
                self._tier_runs = 1
                return True
            if os.getpid() != self._tier_pid:
                # A forked child: the optimizing thread stayed in the parent. The quick code
                # computes the same results, so it stays.
                self.execute_exact = self._fast_exact
                self._tier = None
                listeners.clear()
                return False
        if self._after_first_run is not None:
            self._after_first_run()  # (the optimizing compile must start now, if it has not)
        quick = self._quick_seconds
        if not future.done() and quick is not None:
            if quick <= QUICK_RERUN_MAX_SECONDS:
                return True
            # Wait at most UPGRADE_WAIT_RUNS quick runs' time, then run the quick code again
            # (the same bits): the optimizing thread runs at the lowest priority, and on a
            # busy machine it may get no core for seconds (an unbounded wait for it took 34 s
            # with two busy loops on a 2-core machine).
            runs = UPGRADE_WAIT_RUNS
            try:
                future.result(timeout=None if runs is None else quick * runs)
            except TimeoutError:
                return True
            except Exception:  # noqa: BLE001 - (its error is logged below)
                pass
        try:
            plan, lib = future.result()
            upgraded = CpuExecutable(plan, lib, self.module)
        except Exception as e:  # noqa: BLE001 - keep running the quick code
            _log.warning("cpu backend: optimized compile failed, keeping unoptimized code: "
                         "%s", e)
            upgraded = None
        with lock:
            if self._tier is not tier:
                return False
            if upgraded is not None:
                self._install(upgraded)
            else:
                self.execute_exact = self._fast_exact
            self._tier = None
            callbacks, listeners[:] = list(listeners), []
        for callback in callbacks:
            callback()
        return False

    def _install(self, other: CpuExecutable) -> None:
        # Each attribute is replaced whole; a run in flight keeps the objects it read (the
        # quick code stays loaded, and both programs compute the same thing).
        self._lib_quick = self._lib
        self._lib = other._lib
        self._consts = other._consts
        self._const_ptrs = other._const_ptrs
        self._steps = other._steps
        self._out_shapes = other._out_shapes
        self._allocate_outputs = other._allocate_outputs
        self._allocate_arena = other._allocate_arena
        self._entry = other._entry
        self._steps_fn, self._steps_whole = other._steps_fn, other._steps_whole
        self.program = other.program
        self.execute_exact = (self._execute_read_only if other._entry is None
                              else other._runner or other._make_runner())

    def _tiered_exact(self, values):
        if not self._tier_gate():
            return self.execute_exact(values)
        start = time.perf_counter()
        try:
            return self._fast_exact(values)
        finally:
            self._first_run_ended(time.perf_counter() - start)

    def _until_runner(self, values):
        """``execute_exact`` of a single-call program until its generated runner exists.
        Generating it compiles Python source (~0.1 ms, more than a small program's whole
        run), so the first run takes the general path and the second makes the runner,
        installs it and tells the ``on_upgrade`` listeners (who cached this method)."""
        runner = self._runner
        if runner is not None:
            return runner(values)
        if self._first_run_pending:
            self._first_run_pending = False
            return self._execute_read_only(values)
        return self._make_runner()(values)

    def _make_runner(self):
        runner = self._runner = self._single_call_runner()
        if self.execute_exact == self._until_runner:
            self.execute_exact = runner
        listeners, self._runner_listeners = self._runner_listeners, []
        for callback in listeners:
            callback()
        return runner

    def _single_call_runner(self):
        """A function made for this program's arity: args in, read-only outputs out, one
        native call in between (the cached-jit hot path)."""
        prog = self.program
        params = [f"a{i}" for i in range(prog.n_params)]
        outs = [f"o{i}" for i in range(len(prog.output_shapes))]
        lines = ["def run(values):"]
        if params:
            lines.append(f"    {', '.join(params)}, = values")
        for a in params:  # (the entry's call takes exact, C-ordered arrays)
            lines.append(f"    if type({a}) is not ndarray or not {a}.flags.c_contiguous: "
                         f"{a} = ascontiguous({a})")
        for i, (o, (dims, dt)) in enumerate(zip(outs, prog.output_shapes)):
            # (the size check once, here, not on every call)
            if buffer_pool.pooled(buffer_pool.nbytes_of(dims, dt)):
                lines.append(f"    {o} = alloc{i}()")
            else:
                lines.append(f"    {o} = empty(shape{i}, dtype{i})")
        arena = "alloc_arena()" if prog.arena_bytes else "NO_ARENA"
        call_args = params + outs + [arena]
        if self._blas_tasks:
            lines.append("    with one_blas_thread:")
            lines.append(f"        entry({', '.join(call_args)})")
        else:
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
        env = {"empty": np.empty, "ndarray": np.ndarray, "ascontiguous": np.ascontiguousarray,
               "NO_ARENA": _NO_ARENA, "entry": self._entry_call(),
               "consts": self._read_only_consts(),
               "alloc_arena": self._allocate_arena, "one_blas_thread": one_blas_thread}
        for i, (dims, dt) in enumerate(prog.output_shapes):
            env[f"shape{i}"] = dims
            env[f"dtype{i}"] = dt
            env[f"alloc{i}"] = self._allocate_outputs[i]
        exec("\n".join(lines), env)  # noqa: S102 - generated from the program's own layout
        return env["run"]

    def _entry_call(self):
        """The entry as ``f(*params, *outputs, arena)`` on arrays (``array_call``; the
        single-call runner's programs are short, so holding the GIL is fine)."""
        from ember.backends.cpu import array_call
        prog = self.program
        return array_call.function(int(_ffi.cast("intptr_t", self._entry)),
                                   prog.n_params + len(prog.output_shapes) + 1,
                                   array_call.PLAIN)

    def _read_only_consts(self) -> list[np.ndarray]:
        out = []
        for c in self._consts:
            c = c.copy()
            c.flags.writeable = False
            out.append(c)
        return out

    def _execute_read_only(self, args) -> list[np.ndarray]:
        outs = self._execute(args)
        for o in outs:
            if o.flags.writeable:
                o.flags.writeable = False
        return outs

    # ------------------------------------------------------------------ running

    def execute(self, args) -> list[np.ndarray]:
        """Runs the program on ``args`` (one array per parameter); returns the outputs."""
        if self._tier is None:
            return self._execute(args)
        if not self._tier_gate():
            return self._execute(args)
        start = time.perf_counter()
        try:
            return self._quick._execute(args)
        finally:
            self._first_run_ended(time.perf_counter() - start)

    def _execute(self, args) -> list[np.ndarray]:
        prog = self.program
        if len(args) != prog.n_params:
            raise ValueError(f"expected {prog.n_params} arguments, got {len(args)}")
        args = [_contiguous(np.asarray(a)) for a in args]
        outs = [allocate() for allocate in self._allocate_outputs]
        arena = self._allocate_arena() if prog.arena_bytes else None
        runtime = parallel_runtime.ready() if self._steps_fn is not None else None
        if runtime is not None:
            self._run_native_steps(runtime, args, outs, arena)
        elif self._entry is None:  # (also while the runtime is being built: Python's threads)
            self._run_steps(args, outs, arena)
        else:
            with one_blas_thread if self._blas_tasks else _NO_REGION:
                self._entry(*[_fb(a) for a in args], *[_fb(o) for o in outs],
                            _fb(arena) if arena is not None else _ffi.NULL)
        return [self._array(r, args, outs, arena, None) for r in prog.outputs]

    def _run_native_steps(self, runtime, args, outs, arena) -> None:
        """One call of the program's native steps function."""
        self._call_steps(self._steps_fn, "steps", self._steps_whole, self._blas_tasks,
                         runtime, args, outs, _fb(arena) if arena is not None else None)

    def _call_steps(self, fn, name: str, whole: bool, blas_tasks: bool, runtime, args,
                    outs, arena_ptr) -> None:
        """Calls ``fn``, a function of the steps function's signature (the program's, or a
        segment's ``name``): its kernels with enough work on the parallel runtime, its
        products on BLAS's threads (``whole``: under the stall guard, judged as one call)
        or as ``gemm_split``'s tasks (``blas_tasks``: each on one BLAS thread)."""
        params = _ffi.new("char*[]", [_fb(a) for a in args] or 1)
        outputs = _ffi.new("char*[]", [_fb(o) for o in outs] or 1)
        arena_ptr = arena_ptr if arena_ptr is not None else _ffi.NULL
        run, tasks = runtime.run_address, runtime.size * TASKS_PER_THREAD
        rest = runtime.rest_address
        if whole:
            blas_stall_guard.run((self.program.entry_name, name),
                                 lambda: fn(arena_ptr, params, outputs, run, tasks, rest))
        elif blas_tasks:
            with one_blas_thread:
                fn(arena_ptr, params, outputs, run, tasks, rest)
        else:
            fn(arena_ptr, params, outputs, run, tasks, rest)

    def _run_steps(self, args, outs, arena) -> None:
        values = [None] * self.program.n_values
        arena_ptr = _fb(arena) if arena is not None else None
        # (One floating-point warning context for all the BLAS calls: entering one costs
        # ~3 µs, per dot that was ~1% of an MLP train step.)
        with np.errstate(all="ignore"):
            self._run(self._steps, args, outs, arena, arena_ptr, values)

    def _run(self, steps, args, outs, arena, arena_ptr, values) -> None:
        for step in steps:
            if type(step) is _Kernel:
                self._run_kernel(step, args, outs, arena, arena_ptr, values)
                continue
            if type(step) is _Segment:
                self._run_segment(step, args, outs, arena, arena_ptr, values)
                continue
            step, plan = step
            t = type(step)
            if t is DotPlan:
                self._run_dot(step, plan, args, outs, arena, arena_ptr, values)
            elif t is CopyPlan:
                np.copyto(self._array(step.dst, args, outs, arena, values),
                          self._array(step.src, args, outs, arena, values))
            elif t is UpdatePlan:
                dst = self._array(step.dst, args, outs, arena, values)
                window = []
                for ref, dim, size in zip(step.starts, step.dst.dims, step.update.dims):
                    start = int(self._array(ref, args, outs, arena, values))
                    start = min(max(start, 0), dim - size)
                    window.append(slice(start, start + size))
                update = self._array(step.update, args, outs, arena, values)
                # (an update may name a loop state's buffer in another shape)
                dst[tuple(window)] = update.reshape(step.update.dims)
            elif t is WhilePlan:
                cond, body, loop = plan
                if loop is not None:
                    fn, threaded, tables, gemms = loop
                    run, tasks, rest = _ffi.NULL, 0, _ffi.NULL
                    runtime = parallel_runtime.ready() if threaded else None
                    if runtime is not None:
                        run, tasks = runtime.run_address, runtime.size * TASKS_PER_THREAD
                        rest = runtime.rest_address
                    if runtime is not None or not threaded:
                        p = o = _ffi.NULL
                        if tables:
                            p = _ffi.new("char*[]", [_fb(a) for a in args])
                            o = _ffi.new("char*[]", [_fb(a) for a in outs])
                        with one_blas_thread if gemms else _NO_REGION:
                            fn(arena_ptr if arena_ptr is not None else _ffi.NULL, p, o, run,
                               tasks, rest)
                        continue
                pred = step.pred
                while True:
                    self._run(cond, args, outs, arena, arena_ptr, values)
                    if not self._array(pred, args, outs, arena, values).item():
                        break
                    self._run(body, args, outs, arena, arena_ptr, values)
            elif t is CasePlan:
                i = int(self._array(step.index, args, outs, arena, values))
                if not 0 <= i < len(plan):  # (StableHLO: out of range runs the last branch)
                    i = len(plan) - 1
                self._run(plan[i], args, outs, arena, arena_ptr, values)
            else:
                self._run_library(step, plan, args, outs, arena, values)

    def _run_segment(self, seg: _Segment, args, outs, arena, arena_ptr, values) -> None:
        runtime = parallel_runtime.ready()
        if runtime is None:
            self._run(seg.steps, args, outs, arena, arena_ptr, values)
            return
        # (the tables now: a library call may have replaced an output's array)
        self._call_steps(seg.fn, seg.name, seg.whole, seg.blas_tasks, runtime, args, outs,
                         arena_ptr)

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
        nbytes = math.prod(ref.dims) * ref.dtype.itemsize  # (np.prod: ~4 µs a call)
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
        if k.blas:  # (LAPACK on the calling thread, as the library thunk runs it)
            with one_blas_thread:
                self._run_kernel_here(k, args, outs, arena, arena_ptr, values)
            return
        self._run_kernel_here(k, args, outs, arena, arena_ptr, values)

    def _run_kernel_here(self, k: _Kernel, args, outs, arena, arena_ptr, values) -> None:
        step = k.step
        ptrs = [self._pointer(r, args, outs, arena_ptr, values)
                for r in step.inputs + step.outputs]
        extent = step.extent
        partial = step.partial_reducers
        # (One call over the whole extent writes final results, partial reductions included.)
        if not k.parallel or partial and len(partial_ranges(extent, step.work)) == 1:
            k.fn(_ffi.new("char*[]", ptrs), 0, extent)
            return
        runtime = parallel_runtime.ready()
        size = runtime.size if runtime is not None else threads.pool().size
        if not partial:
            bufs = _ffi.new("char*[]", ptrs)
            if runtime is not None:
                # More tasks than threads: a worker that wakes late finds fewer left.
                runtime.run(k.fn, _ffi.new("char**[]", [bufs]), 0, extent,
                            min(extent, size * TASKS_PER_THREAD))
            else:
                threads.pool().run(lambda lo, hi: k.fn(bufs, lo, hi),
                                   threads.split(extent, size))
            return
        # Partial reductions: each of a fixed set of ranges writes its own partial results
        # (row c of an array per output), combined below in order.
        ranges = partial_ranges(extent, step.work)
        n, n_ptrs, n_in = len(ranges), len(ptrs), len(step.inputs)
        partials = {i: np.empty((n, *step.outputs[i].dims),
                                np.float64 if op == "add_f64" else step.outputs[i].dtype)
                    for i, op in enumerate(partial) if op}
        flat = _ffi.new("char*[]", n * n_ptrs)  # table c: entries [c * n_ptrs, ...)
        for c in range(n):
            flat[c * n_ptrs:(c + 1) * n_ptrs] = ptrs
        for i, arr in partials.items():
            base, row = _fb(arr), arr.itemsize * (arr.size // n)
            for c in range(n):
                flat[c * n_ptrs + n_in + i] = base + c * row
        tables = [flat + c * n_ptrs for c in range(n)]
        if runtime is not None:  # (task t writes the partial results of table t)
            runtime.run(k.fn, _ffi.new("char**[]", tables), 1, extent, n)
        else:
            table_of = {lo: tables[c] for c, (lo, _) in enumerate(ranges)}
            threads.pool().run(lambda lo, hi: k.fn(table_of[lo], lo, hi), ranges)
        for i, arr in partials.items():
            ref = step.outputs[i]
            # ("add_f64": float sums' partial results, added in float64 and rounded once)
            combined = simple_reduce(REDUCE_UFUNCS[partial[i].removesuffix("_f64")], arr, 0)
            dest = self._array(ref, args, outs, arena, values)
            np.copyto(dest, combined.astype(ref.dtype, copy=False))

    def _run_dot(self, step: DotPlan, plan, args, outs, arena, arena_ptr, values) -> None:
        if type(plan) is _WholeGemm:  # (one call on BLAS's threads; the runtime's workers sleep)
            a, b, c = (self._pointer(r, args, outs, arena_ptr, values)
                       for r in (*step.inputs, step.output))
            runtime = parallel_runtime.ready()
            if runtime is not None:
                runtime.rest()
            blas_stall_guard.run(step.gemm, lambda: plan(a, b, c))
            return
        if type(plan) is _GemmTasks:
            ptrs = [self._pointer(r, args, outs, arena_ptr, values)
                    for r in (*step.inputs, step.output)]
            units, tasks = plan.units, plan.tasks
            runtime = parallel_runtime.ready() if plan.threaded else None
            if plan.split:  # (the runtime and its size: ``program._gemm_buffers``)
                ptrs += ([runtime.run_address, _ffi.cast("char*", runtime.size)]
                         if runtime is not None else [_ffi.NULL, _ffi.cast("char*", 1)])
                plan.fn(_ffi.new("char*[]", ptrs), 0, units)
                return
            bufs = _ffi.new("char*[]", ptrs)
            with one_blas_thread if plan.one_thread else _NO_REGION:
                if runtime is not None:
                    if plan.per_thread:
                        tasks = min(units, runtime.size)
                    runtime.run(plan.fn, _ffi.new("char**[]", [bufs]), 0, units, tasks)
                    return
                for t in range(tasks):
                    plan.fn(bufs, t * units // tasks, (t + 1) * units // tasks)
            return
        lhs, rhs = (self._array(r, args, outs, arena, values) for r in step.inputs)
        dest = self._array(step.output, args, outs, arena, values)
        if plan is None or lhs.dtype != dest.dtype or rhs.dtype != dest.dtype:
            np.copyto(dest, evaluate_instruction(step.inst, [lhs, rhs]))
            return
        lperm, rperm, (b, m, k, n) = plan
        # (batch, m, k) @ (batch, k, n) straight into the output buffer; transposed operands
        # stay views, which BLAS reads with its transpose flags.
        # (``_run_steps`` ignores floating-point warnings around this.)
        lt = lhs.transpose(lperm).reshape(b, m, k)
        rt = gemm_operand(lt, rhs.transpose(rperm).reshape(b, k, n))
        if b * m * n * k > SINGLE_THREAD_GEMM_MAX_PRODUCTS:
            # (other threads run this product: the parallel runtime's workers, spinning
            # after a kernel just before, would share their cores for ~100 us)
            runtime = parallel_runtime.ready()
            if runtime is not None:
                runtime.rest()
        # (BLAS's threads, unless a recent call stalled: ``StallGuard``)
        if b == 1:
            blas_stall_guard.run((m, k, n, dest.dtype), lambda: np.matmul(
                lt[0], rt[0], out=dest.reshape(m, n)))
        elif _split_batch(b, m * n * k):
            _batch_across_threads(lt, rt, dest.reshape(b, m, n))
        else:
            blas_stall_guard.run((b, m, k, n, dest.dtype), lambda: np.matmul(
                lt, rt, out=dest.reshape(b, m, n)))

    def _run_library(self, step: LibraryPlan, plan, args, outs, arena, values) -> None:
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
            if value.shape != ref.dims:  # (a scalar's broadcast, say)
                value = np.broadcast_to(value, ref.dims)
            if ref.kind == "output":
                outs[ref.index] = _contiguous(value)
            else:
                values[ref.index] = value


# A batched dot whose matrices have at most BATCH_SPLIT_MAX_WORK products each runs them as
# native ``gemm`` tasks on the parallel runtime (``program.gemm_layout``), but where an
# operand is a library call's result. Otherwise one of at least a thread's worth of matrices and
# BATCH_SPLIT_MIN_WORK products in all runs its matrices on ember's Python-side
# threads, one single-threaded BLAS call each (``_batch_across_threads``), instead of one
# ``matmul`` whose BLAS threads split every small product and busy-wait in between: 32
# (256, 64) @ (64, 256) products took 8-120 ms so on a loaded 2-core machine, 3-8 split.
# Larger products keep BLAS's threads (four (128, 784) @ (784, 512) were faster with them).
BATCH_SPLIT_MAX_WORK = 1 << 23
BATCH_SPLIT_MIN_WORK = 1 << 20


def _blas_threaded(inst) -> bool:
    """Whether a ``dot_general`` run through NumPy (``_run_dot``) may use BLAS's threads:
    more than SINGLE_THREAD_GEMM_MAX_PRODUCTS products."""
    lhs = inst.operands[0]
    contracted = math.prod(lhs.dims[d] for d in inst.attrs["lhs_contracting_dimensions"])
    return math.prod(inst.shape.dims) * contracted > SINGLE_THREAD_GEMM_MAX_PRODUCTS


def _split_batch(batch: int, products_each: int) -> bool:
    size = threads.pool().size
    return (size > 1 and batch >= size and products_each <= BATCH_SPLIT_MAX_WORK
            and batch * products_each >= BATCH_SPLIT_MIN_WORK)


def _batch_across_threads(lhs: np.ndarray, rhs: np.ndarray, out: np.ndarray) -> None:
    """``np.matmul(lhs, rhs, out=out)`` over a batch, its matrices split across ember's
    threads, each computed by BLAS on the calling thread (``one_blas_thread``): the bits of
    NumPy's ``matmul`` on one BLAS thread, whatever the number of ember's threads."""
    def part(lo: int, hi: int) -> None:
        np.matmul(lhs[lo:hi], rhs[lo:hi], out=out[lo:hi])
    pool = threads.pool()
    with one_blas_thread:
        pool.run(part, threads.split(lhs.shape[0], pool.size))


def _plan_refs(step) -> list:
    """The buffers a step of a native loop names (its nested steps' not included)."""
    t = type(step)
    if t is KernelPlan:
        return [*step.inputs, *step.outputs]
    if t is CopyPlan:
        return [step.src, step.dst]
    if t is UpdatePlan:
        return [step.update, step.dst, *step.starts]
    if t is DotPlan:
        return [*step.inputs, step.output]
    return [step.pred] if t is WhilePlan else [step.index]


def _native_loop(step: WhilePlan, lib):
    """``(function, threaded, tables, gemms)`` running a while loop whole in native code
    (``program._emit_loop``), or None where it loops in Python. A loop with kernels of
    ``PARALLEL_MIN_WORK`` elements or more is *threaded*: they run on the parallel runtime
    (the loop runs in Python while the runtime is not ready), unless a reduction in it
    writes partial results (combined in Python, so the loop stays here). ``tables``:
    whether the loop reads the program's parameters or outputs; ``gemms``: whether it calls
    BLAS as ``gemm`` tasks, run under ``one_blas_thread``: not a loop with products on
    BLAS's threads (``whole_gemm``), whose other products keep them too, as outside loops
    (and which needs no tasks of one BLAS thread on the runtime: ``native_call``)."""
    if step.loop is None:
        return None
    inner = list(nested_steps(step.cond + step.body))
    whole = whole_gemms(step.cond + step.body)
    if whole and _runtime_gemm_tasks(step.cond + step.body, False):
        return None  # (BLAS's threads and tasks each on one: see ``native_call``)
    threaded = whole or step.work >= PARALLEL_MIN_WORK or any(
        type(s) is DotPlan and s.gemm is not None and gemm_split(s.gemm)[2] > 1
        for s in inner)
    if threaded and any(type(s) is KernelPlan and s.partial_reducers
                        and len(partial_ranges(s.extent, s.work)) > 1 for s in inner):
        return None
    tables = any(r.kind in ("param", "output") for s in inner for r in _plan_refs(s))
    gemms = not whole and native_products(step.cond + step.body)
    fn = _ffi.cast(_STEPS_SIG, lib.address(step.loop))
    return fn, threaded, tables, gemms


# CBLAS routines with 64-bit integers (``{}``: ``sgemm``, ``dgemv``...), as the BLAS libraries
# NumPy links name them (scipy-openblas, OpenBLAS built with a symbol suffix); a name without
# a 64-bit marker may take 32-bit integers, so it is not used.
_BLAS_SYMBOLS = ("scipy_cblas_{}64_", "cblas_{}64_", "cblas_{}_64")
_blas_addresses: dict[str, int] = {}


def blas_address(routine: str) -> int:
    """The address of the process's 64-bit-integer CBLAS ``routine`` (``sgemm``, ``dgemv``...;
    0 if none is loaded): from the BLAS libraries mapped in (NumPy's, loaded with NumPy);
    for ``{s,d}gemm_ember``, ember's own (``gemm_kernel``, the same signature), and for
    ``{s,d}gemm_ember_split`` its split entry (``called_routine``)."""
    if routine in _blas_addresses:
        return _blas_addresses[routine]
    if gemm_kernel.ROUTINE_SUFFIX in routine:  # (not kept: a quick build's changes)
        return gemm_kernel.address(routine[0], routine.endswith(SPLIT_SUFFIX))
    import _ctypes
    addr = 0
    for path in blas_paths():
        try:
            handle = _ctypes.dlopen(path, os.RTLD_NOW)
        except OSError:
            continue
        for pattern in _BLAS_SYMBOLS:
            try:
                addr = _ctypes.dlsym(handle, pattern.format(routine))
            except OSError:
                continue
            if addr:
                break
        if addr:
            break
    _blas_addresses[routine] = addr
    return addr


# A native ``gemm`` call is cut into tasks of at least GEMM_TASK_MIN_WORK products, along
# its longer output dim, in units of GEMM_TASK_UNIT rows or columns (at most GEMM_MAX_TASKS).
# The cut depends on the shape only (BLAS may round a block differently from the whole),
# and the tasks run on the parallel runtime, or one after another without it.
GEMM_TASK_MIN_WORK = 1 << 19
GEMM_TASK_UNIT = 32
GEMM_MAX_TASKS = 16


def gemm_split(gemm: tuple) -> tuple[bool, int, int]:
    """``(by_rows, units, tasks)``: the ``batch`` products of ``m x n`` outputs over ``k`` of
    a ``gemm`` layout (``program.gemm_layout``) cut into ``tasks`` consecutive runs of
    ``units``: each matrix's ``GEMM_TASK_UNIT`` rows if ``by_rows``, else columns (a matrix's
    last unit may be shorter), matrix after matrix.

    ember's own ``gemm`` (``native_gemm``) gives the same bits for any cut: ``tasks`` is 1
    here; one matrix is one call of its split entry, which makes its own tasks on the
    parallel runtime (``split_gemm``), and a batch runs one task per thread."""
    m, n, batch = gemm[3], gemm[4], gemm[8]
    by_rows = m > n
    units = -(-(m if by_rows else n) // GEMM_TASK_UNIT) * batch
    if native_gemm(gemm):
        return by_rows, units, 1
    return by_rows, units, max(1, min(units, GEMM_MAX_TASKS,
                                      gemm_products(gemm) // GEMM_TASK_MIN_WORK))


def native_gemm(gemm: tuple) -> bool:
    """Whether a ``gemm`` layout's products call ember's own ``gemm`` (``gemm_kernel``)."""
    return blas_routine(gemm).endswith(gemm_kernel.ROUTINE_SUFFIX)


def split_gemm(gemm: tuple) -> bool:
    """Whether a ``gemm`` layout's product is one call of ember's own ``gemm``'s split
    entry (``gemm_kernel.split_symbol``: one matrix), which runs it as tasks on the parallel
    runtime itself, sharing one packing of the operand it does not cut."""
    return gemm[8] == 1 and native_gemm(gemm)


# The name of the split entry of ember's own ``gemm`` (``called_routine``).
SPLIT_SUFFIX = "_split"


def called_routine(gemm: tuple) -> str:
    """The routine the native code of a ``gemm`` layout's products calls:
    ``blas_routine``'s, or ``{s,d}gemm_ember_split`` (``split_gemm``)."""
    return blas_routine(gemm) + (SPLIT_SUFFIX if split_gemm(gemm) else "")


def gemm_products(gemm: tuple) -> int:
    """The multiply-adds of a ``gemm`` layout's products (all of its batch)."""
    return gemm[3] * gemm[4] * gemm[5] * gemm[8]


def blas_threads_pay(gemm: tuple) -> bool:
    """Whether the products of a ``gemm`` layout are enough work for several threads: more
    than SINGLE_THREAD_GEMM_MAX_PRODUCTS, or SINGLE_THREAD_GEMV_MAX_PRODUCTS where they
    have one row or column (``blas_routine``)."""
    most = (SINGLE_THREAD_GEMV_MAX_PRODUCTS if blas_routine(gemm).endswith("gemv")
            else SINGLE_THREAD_GEMM_MAX_PRODUCTS)
    return gemm_products(gemm) > most


def whole_gemm(gemm: tuple) -> bool:
    """Whether a ``gemm`` layout is one CBLAS call on BLAS's own threads, in loops as outside
    them: one matrix with enough products (``blas_threads_pay``; a batch, a smaller
    product, or one for ember's own ``gemm``, runs as ``gemm_split``'s tasks)."""
    return gemm[8] == 1 and blas_threads_pay(gemm) and not native_gemm(gemm)


CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_TRANS = 101, 111, 112


# A product with one row or column and at least this many multiply-adds per matrix calls
# ``gemv`` (``blas_routine``); smaller ones stay ``gemm`` calls, which OpenBLAS runs through
# its small-matrix kernels: three (1, 256) @ (256, 256) products of a program took ~1 us
# longer as ``gemv``s.
GEMV_MIN_PRODUCTS = 1 << 17


def blas_routine(gemm: tuple) -> str:
    """The CBLAS routine computing a ``gemm`` layout's products: ``{letter}gemv`` where they
    have one row or one column (``gemv_arguments``) and ``GEMV_MIN_PRODUCTS`` each, else
    ``{letter}gemm``, or ``{letter}gemm_ember`` where ember's own takes them
    (``gemm_kernel.takes``)."""
    vector = (gemm[3] == 1 or gemm[4] == 1) and gemm[3] * gemm[4] * gemm[5] >= GEMV_MIN_PRODUCTS
    if vector:
        return gemm[0] + "gemv"
    return gemm[0] + "gemm" + (gemm_kernel.ROUTINE_SUFFIX if gemm_kernel.takes(gemm) else "")


def gemv_arguments(gemm: tuple, rows, cols) -> tuple:
    """The CBLAS ``gemv`` call computing ``rows`` x ``cols`` outputs of a ``gemm`` layout with
    one row or one column (``blas_routine``): ``(matrix, trans, M, N, ld, inc)``, ``matrix``
    0 where the lhs is the matrix (one column: ``C = op(A) x``), 1 where the rhs is (one row:
    ``C^T = op(B)^T a^T``); the other operand is the vector, its elements ``inc`` apart (a
    column of a matrix lying as ``gemm_layout`` says); the output's are contiguous. ``rows``
    and ``cols`` may be ints or native values (a task's share, ``program._gemm_task``): they
    are only placed.

    A product with one row or column reads its matrix once: OpenBLAS's ``gemm`` packs it
    first (a (4000, 4000) @ (4000,) float32 took 3.3 ms as ``gemm``, 1.1 as ``gemv``)."""
    _, trans_a, trans_b, m, n, k, lda, ldb, _, _ = gemm
    if n == 1 and m > 1:
        trans = CBLAS_TRANS if trans_a else CBLAS_NO_TRANS
        return (0, trans, *((k, rows) if trans_a else (rows, k)), lda, 1 if trans_b else ldb)
    trans = CBLAS_NO_TRANS if trans_b else CBLAS_TRANS
    return (1, trans, *((cols, k) if trans_b else (k, cols)), ldb, lda if trans_a else 1)


def whole_gemm_arguments(gemm: tuple) -> tuple[int, ...]:
    """The integer arguments of the one CBLAS call of a ``whole_gemm`` (order, the two
    transposes, m, n, k, lda, ldb, ldc), made from native code (``program._emit_steps``)
    or from Python (``_WholeGemm``): the same call either way, so the same bits."""
    _, trans_a, trans_b, m, n, k, lda, ldb, _, _ = gemm
    return (CBLAS_ROW_MAJOR, CBLAS_TRANS if trans_a else CBLAS_NO_TRANS,
            CBLAS_TRANS if trans_b else CBLAS_NO_TRANS, m, n, k, lda, ldb, n)


def steps_name(entry_name: str) -> str:
    """The native function running a program's steps with threads
    (``program._emit_steps_function``) for the program whose entry is ``entry_name``."""
    return entry_name.removesuffix("_entry") + "_steps"


def gemm_task_name(prefix: str, gemm: tuple) -> str:
    """The native function running the tasks of a ``gemm`` call (``program._gemm_task``),
    ``void(char** bufs, int64 lo, int64 hi)`` as a kernel."""
    numbers = [int(v) for v in gemm[1:9]] + [v for dim in gemm[9] for v in dim]
    return f"{prefix}_gemm_task_{gemm[0]}_{'_'.join(str(v) for v in numbers)}"


def blas_global(prefix: str, routine: str) -> str:
    """The name of the global of a program's native code (symbols starting ``prefix``)
    holding the address of CBLAS ``routine`` (``blas_routine``)."""
    return f"{prefix}_blas_{routine}"


def _bind_gemm(plan: RunPlan, lib) -> bool:
    """Stores the addresses of the BLAS routines the native code of ``plan`` calls for its
    products into its globals (``program.blas_global``); False when this process lacks a
    routine of the plan's products (the code that calls it must not run: its loops then
    step from Python, and so do its products, through NumPy).

    Code that calls no routine of a kind has no global for it: a program stepped from
    Python whose products all run on BLAS's threads (``whole_gemm``, through cffi there,
    ``_WholeGemm``) has none."""
    routines = {called_routine(s.gemm) for s in nested_steps(plan.steps)
                if type(s) is DotPlan and s.gemm is not None}
    if any(not blas_address(routine) for routine in routines):
        return False
    prefix = plan.entry_name.removesuffix("_entry")
    for routine in sorted(routines):
        try:
            address = lib.global_address(blas_global(prefix, routine))
        except ValueError:
            continue
        if gemm_kernel.ROUTINE_SUFFIX in routine:  # (rebound once optimized)
            gemm_kernel.bind(routine[0], address, lib, routine.endswith(SPLIT_SUFFIX))
        else:
            _ffi.cast("void**", address)[0] = _ffi.cast("void*", blas_address(routine))
    return True


# The side of a routine record naming the process's LAPACK routine ``kernel`` (``getrf``,
# ``trsm``, ``geqrf``, ``gesdd_r``, ...: ``_lapack``'s kinds) for its dtype, called with
# 64-bit integers (``_lapack.address``).
LAPACK_ROUTINE = "lapack"


def routine_global(prefix: str, routine: tuple) -> str:
    """The name of the global of a program's native code (symbols starting ``prefix``)
    holding the address of the small-matrix ``routine`` (``linalg_steps``): (kernel, dtype
    name, side), side ``LAPACK_ROUTINE`` for LAPACK's own."""
    kernel, dtype, side = routine
    return f"{prefix}_routine_{kernel}_{dtype}_{side}"


def _bind_routines(plan: RunPlan, lib) -> None:
    """Stores the addresses of the linear-algebra routines the kernels of ``plan`` call
    (``small_linalg_kernel.kernel``'s: compiled once per machine, then loaded from the disk
    cache; or LAPACK's) into its globals (``routine_global``)."""
    prefix = plan.entry_name.removesuffix("_entry")
    for routine in plan.routines:
        kernel, dtype, side = routine
        if side == LAPACK_ROUTINE:
            from ember.lax import _lapack
            fn = _lapack.address(kernel, np.dtype(dtype))
        else:
            fn = small_linalg_kernel.kernel(kernel, np.dtype(dtype), side)
        if not fn:  # (it was there when the program was made: only a broken cache lacks it)
            raise RuntimeError(f"no native linear-algebra routine {routine}")
        try:
            address = lib.global_address(routine_global(prefix, routine))
        except ValueError:  # (no kernel of this code calls it)
            continue
        _ffi.cast("void**", address)[0] = _ffi.cast("void*", fn)


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

    def size(shape, dims):  # (math.prod: np.prod costs ~4 µs a call, on the warm path)
        return math.prod(shape.dims[d] for d in dims)
    sizes = (size(lhs.shape, lb), size(lhs.shape, lf), size(lhs.shape, lc),
             size(rhs.shape, rf))
    return lb + lf + lc, rb + rc + rf, sizes
