"""The CPU backend: every fusion of the optimized HLO compiled to native code by LLVM.

``CpuBackend().compile(module)`` builds one LLVM module for the program (``program.py``: a
kernel per fusion from ``kernel_gen.py``, element math from ``scalar_ops.py`` and
``vecmath.py``), optimizes it at O3 for the host CPU and loads the object code
(``llvm_support.py``); ``executable.py`` runs it. Object code is cached in memory and on disk
(``object_cache.py``), keyed by the optimized HLO text, ember's, llvmlite's and LLVM's
versions, the CPU and its features, this code generator's version and the optimization level.

Warm path: after a compile, the object code is also linked into a shared library (in a
background thread, off the critical path; ``native_lib``) and stored in the disk cache with the
program's run plan (a tiered program's optimized code is compiled once, for that library, which
the process then runs too), under the *native key* (the optimized HLO text, ember's, NumPy's and
llvmlite's versions, the CPU and its features, this code generator's version and a stamp of
the code generator's source files). A later process that finds it loads the library with
``dlopen`` and runs: no program building, no LLVM, no llvmlite import. Without a working linker
(or off Linux) the object code is loaded through MCJIT as before.

A third kind of entry maps a *lowered* (not yet optimized) module to its native entry and its
optimized text (``load_lowered``/``remember_lowered``, used by ``ember.runtime.dispatch``), so
a warm process skips the HLO pipeline too. Its key (``lowered_key``) adds a stamp of the
compiler's sources. The same entry is also stored under the jaxpr's lowering fingerprint
(``fingerprint_key``; ``ember.compiler.lowering_fingerprint``, whose key adds a stamp of the
sources of the lowering rules), so a warm process skips lowering and printing the module too.

``EMBER_DUMP_TO`` also gets each module's LLVM IR before and after optimization and its
assembly (``*.llvm.ll``, ``*.llvm.opt.ll``, ``*.s``).

Example:
    >>> exe = CpuBackend().compile(optimized_module)
    >>> outs = exe.execute([np.ones(3, np.float32)])
"""

from __future__ import annotations

import gc
import logging
import os
import pickle
import sys
import threading
from collections.abc import Callable

import numpy as np

import ember
from ember import _blas_threads, _scratch
from ember import monitoring as _monitoring
from ember.backends.cpu import (
    buffer_pool,
    denormals,
    direct_conv_kernel,
    eager_math,
    fft_kernel,
    gemm_kernel,
    native_lib,
    object_cache,
    parallel_runtime,
    small_linalg_kernel,
    tap_grad_kernel,
    tap_sum_kernel,
)
from ember.backends.cpu.executable import (
    PARALLEL_MIN_WORK,
    CpuExecutable,
    RunPlan,
    plan_symbols,
)
from ember.backends.cpu.executable import dumps as executable_dumps
from ember.compiler import eval_elementwise
from ember.compiler.evaluator import register_custom_call_target
from ember.compiler.hlo import ELEMENTWISE, EXPENSIVE_ELEMENTWISE, Module
from ember.compiler.passes.fusion import EXPENSIVE_CODE_COST

_log = logging.getLogger(__name__)

# Eager float math (exp, logistic, erf, ...) runs this backend's vector math: see eager_math.
eval_elementwise.register_native_math(eager_math.kernel)
# FFTs of power-of-two lengths run native code (the ``lax.fft`` kernel: see fft_kernel).
register_custom_call_target(fft_kernel.NATIVE_TARGET, fft_kernel.transform)
# Large batches of small LU, triangular solves and Cholesky run native loops (see
# small_linalg_kernel and ``lax._small_batch``).
register_custom_call_target(small_linalg_kernel.NATIVE_TARGET, small_linalg_kernel.run)
# A transposed convolution's tap sums run a native loop (see tap_sum_kernel).
register_custom_call_target(tap_sum_kernel.NATIVE_TARGET, tap_sum_kernel.tap_sums)
# Convolutions with few input features run a native direct loop (see direct_conv_kernel).
register_custom_call_target(direct_conv_kernel.NATIVE_TARGET, direct_conv_kernel.direct_conv)
register_custom_call_target(tap_grad_kernel.NATIVE_TARGET, tap_grad_kernel.tap_grad)
# Library kernels' large temporaries (``ember._scratch``) come from the buffer pool.
_scratch.register_allocator(buffer_pool.empty)

# Bump when generated code changes for the same HLO (invalidates cached object code).
CODEGEN_VERSION = "8"
# Bump when the native cache entry's layout (the pickled dict, ``RunPlan``) changes.
NATIVE_FORMAT = "2"
# Programs whose biggest kernel computes at most this many elements compile without IR
# optimization (see ``llvm_support.compile_ir``): their run time is all call overhead...
FAST_COMPILE_MAX_WORK = 512
# ...unless a kernel does more than this many element-ops (elements times the ops of its
# fusion, a math function counting as ``EXPENSIVE_CODE_COST``): unoptimized scalar code of
# 300 ``sin``s over 64 elements took 0.84 ms a call, against ~0.1 ms optimized (tiered: the
# first calls still run the quick build).
FAST_COMPILE_MAX_OPS = 1 << 14
# Tiered compilation: a program that needs optimizing first runs on code compiled without
# IR optimization (~30-50x faster to compile), while the optimized code compiles in a
# low-priority background thread; from its second run on it uses the optimized code, once
# ready (until then a run whose quick code was fast runs it again, a slower one waits, for at
# most about one quick run: ``executable.QUICK_RERUN_MAX_SECONDS``, ``UPGRADE_WAIT_RUNS``).
# Both compile the same IR, whose float sums fix their order (``kernel_gen.LaneSums``), so
# the first call's results equal later calls' bit for bit. ``EMBER_CPU_TIERED=0`` optimizes
# before the first call instead.
TIERED_COMPILATION = os.environ.get("EMBER_CPU_TIERED", "1") == "1"
# ``EMBER_CPU_SHARED_LIBRARIES=0`` stops linking programs into shared libraries for the disk
# cache (each costs a second compile and a ``cc`` run in the background); cached object code
# then still loads through MCJIT. The test suite turns it off except where it tests it.
SHARED_LIBRARIES_VAR = "EMBER_CPU_SHARED_LIBRARIES"


def preload() -> None:
    """Imports the compiler (the HLO pipeline, the code generator, llvmlite and LLVM's
    library) and registers LLVM's native target: ``import ember`` runs this for the default
    backend (see ``ember.backends.preload_default_backend``), so a first compile does not
    wait for module loading. It also computes the per-process parts of the cache keys (the
    CPU's and llvmlite's fingerprints, the source stamps) and runs a full garbage collection:
    the first full collection of a process walks every object that importing made (~10 ms
    here), and one due while a first call compiles (every tenth collection of the middle
    generation is full) would land inside it. After this one, CPython defers the next until
    the objects made since outnumber a quarter of these. A parallel runtime in the disk cache
    is loaded and its workers started (``parallel_runtime.load_if_cached``), and so is
    ember's own ``gemm`` (``gemm_kernel.load_if_cached``)."""
    from ember.backends.cpu import llvm_support, program, row_kernel  # noqa: F401
    from ember.compiler import parser, pipeline, printer, shape_inference  # noqa: F401
    pipeline.load_passes()
    llvm_support._init()
    _key_parts()
    _source_stamp(_PIPELINE_DIRS)
    _source_stamp(_LOWERING_DIRS)
    parallel_runtime.load_if_cached()
    gemm_kernel.load_if_cached()
    _blas_threads.resolve()
    gc.collect()


# The nice value of background compiles' threads. Not the lowest (19): with two busy
# processes on a 2-core machine a nice-19 compile got ~1% of a core, so a program ran its
# unoptimized code (15x slower there) for half a minute and more, and other compiles waited
# for the LLVM lock it held. At 10 it got there in ~2 s; idle, the first calls lose little.
BACKGROUND_NICE = 10


def _lower_thread_priority() -> None:
    """Makes the calling thread yield the CPU to the process's other threads (Linux: a
    thread's own nice value, ``BACKGROUND_NICE``). Background compiles use it: they are
    work for later calls, and on a machine with few cores they would otherwise slow down the
    current call's threads (BLAS's and the parallel runtime's wait for their slowest
    member)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)
    except OSError:  # (a sandbox may forbid it: the compile only competes harder)
        pass


def _shared_libraries_enabled() -> bool:
    """Whether compiled programs are linked into shared libraries for the disk cache (read
    on every compile, so a test can switch it with ``monkeypatch.setenv``)."""
    return (os.environ.get(SHARED_LIBRARIES_VAR, "1") != "0" and native_lib.available()
            and native_lib.linker() is not None)
# Source folders whose files' sizes and times stamp the native key (so editing the code
# generator or the executable never reuses stale cached libraries, version bump or not).
_STAMPED_DIRS = (os.path.dirname(os.path.abspath(__file__)),)
# What maps a lowered module to its optimized form: the compiler and its passes.
_COMPILER_DIR = os.path.join(os.path.dirname(os.path.dirname(_STAMPED_DIRS[0])), "compiler")
_PIPELINE_DIRS = (_COMPILER_DIR, os.path.join(_COMPILER_DIR, "passes"))
# What maps a jaxpr to its lowered module: the lowering rules (beside each primitive) and the
# jaxpr's types, and the lowering itself.
_EMBER_DIR = os.path.dirname(_COMPILER_DIR)
_LOWERING_DIRS = (_EMBER_DIR, os.path.join(_EMBER_DIR, "lax"),
                  os.path.join(_EMBER_DIR, "interpreters"), *_PIPELINE_DIRS)


def _ember_version() -> str:
    return ember.__version__


_stamps: dict[tuple, str] = {}
_folder_files: dict[str, list[str]] = {}


def _source_stamp(folders: tuple = _STAMPED_DIRS) -> str:
    """Digest of the names, sizes and modification times of the ``.py`` files in
    ``folders`` (each folder read once per process)."""
    stamp = _stamps.get(folders)
    if stamp is None:
        entries = sorted(e for folder in folders for e in _python_files(folder))
        stamp = _stamps[folders] = object_cache.cache_key(*entries)
    return stamp


def _python_files(folder: str) -> list[str]:
    """``path:size:mtime`` of each ``.py`` file in ``folder`` (read once per process)."""
    files = _folder_files.get(folder)
    if files is None:
        files = []
        try:
            with os.scandir(folder) as it:
                for e in it:
                    if e.name.endswith(".py"):
                        st = e.stat()
                        files.append(f"{e.path}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            files.append(f"{folder}:unreadable")
        _folder_files[folder] = files
    return files


def _key_parts() -> tuple[str, ...]:
    """What the native and lowered keys hold besides the module: the entry format, this
    code generator's version and source stamp, ember's and NumPy's versions, the CPU and
    llvmlite (each computed once per process), whether code flushes denormals and which
    ``gemm`` its products call (``gemm_kernel.mode``; both read from their switches each
    time)."""
    return (NATIVE_FORMAT, CODEGEN_VERSION, _ember_version(), np.__version__,
            native_lib.host_fingerprint(), native_lib.toolchain_fingerprint(), _source_stamp(),
            denormals.mode(), gemm_kernel.mode())


def heaviest_kernel_ops(module: Module) -> int:
    """The most element-ops of one fusion of ``module``: its largest array's elements times
    its ops (a math function counting ``EXPENSIVE_CODE_COST``, data movement nothing)."""
    heaviest = 0
    for comp in module.computations:
        for inst in comp.instructions:
            if inst.opcode != "fusion" or not inst.calls:
                continue
            body = inst.calls[0].instructions
            ops = sum(EXPENSIVE_CODE_COST if i.opcode in EXPENSIVE_ELEMENTWISE else 1
                      for i in body if i.opcode in ELEMENTWISE or i.opcode == "reduce")
            size = max((i.shape.size for i in body if not i.shape.is_tuple), default=0)
            heaviest = max(heaviest, ops * size)
    return heaviest


def _check_symbols(plan: RunPlan, lib) -> None:
    """Raises ValueError unless every symbol ``plan`` uses resolves in ``lib``."""
    for name in plan_symbols(plan):
        lib.address(name)
    for name in plan.constant_names:
        lib.global_address(name)


# Seconds between the end of a tiered executable's first run and the start of its optimizing
# compile, so the caller gets the first result without competing with the compile's Python
# work for the interpreter lock. A second run that needs the optimized code starts it at once.
FIRST_RESULT_GRACE = 0.02


class _DeferredStart:
    """Background work of one program held back until its executable's first run ended:
    started once, ``soon()`` (``FIRST_RESULT_GRACE`` seconds later) or at once by calling it
    (a run that needs the optimized code, ``wait_for_background``)."""

    def __init__(self, backend: CpuBackend, nkey: str, works: list):
        self._backend, self._nkey = backend, nkey
        self._works = [(w, nkey) for w in works]  # (work, native key it is listed under)
        self._started = False
        self._timer: threading.Timer | None = None

    def add(self, work) -> bool:
        """Holds back ``work`` too (started untagged, after the others); False when the
        held-back work has started already. Called under the backend's lock."""
        if self._started:
            return False
        self._works.append((work, None))
        return True

    def __call__(self) -> None:
        backend = self._backend
        with backend._lock:
            if self._started:
                return
            self._started = True
            if backend._deferred.get(self._nkey) is self:
                del backend._deferred[self._nkey]
            # (Listed as background threads in the same critical section that removes them
            # from the deferred ones: ``wait_for_background`` sees the work in one or the
            # other, never in neither.)
            for work, nkey in self._works:
                backend._start_background_locked(work, nkey)
            timer = self._timer
        if timer is not None:  # (started early: the process need not wait for the timer)
            timer.cancel()

    def soon(self) -> None:
        # Not a daemon (said explicitly: a thread inherits its creator's flag, and runs end
        # on the dispatch worker, a daemon): a process exiting within the grace period still
        # starts the work and waits for it (threads started while the interpreter shuts down
        # are waited for too), so the disk cache gets the optimized code.
        timer = threading.Timer(FIRST_RESULT_GRACE, self)
        timer.daemon = False
        with self._backend._lock:
            if self._started:
                return
            self._timer = timer
        timer.start()


def _at_thread_shutdown(fn: Callable[[], None]) -> None:
    """Calls ``fn`` at exit before the interpreter joins its non-daemon threads (so threads
    ``fn`` starts are waited for), where this Python says how (the hook ``concurrent.futures``
    uses); else with ``atexit``."""
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        try:
            register(fn)
        except RuntimeError:  # (the interpreter is shutting down already)
            pass
    else:
        import atexit
        atexit.register(fn)


class CpuBackend:
    """Compiles modules to native code for the host CPU (platform ``cpu``)."""

    name = "cpu"
    platform = "cpu"
    # Compiles fused native kernels: eager code hands it multi-pass programs on large arrays
    # (``ember.numpy._compiled``).
    fuses_kernels = True

    def __init__(self):
        # native key -> (RunPlan, loaded code). Never evicted: code is never unloaded.
        self._programs: dict[str, tuple] = {}
        # object key -> LoadedObject (MCJIT).
        self._objects: dict[str, object] = {}
        self._lock = threading.Lock()
        self._linking: set[str] = set()  # native keys being linked in the background
        # native key -> (quick plan, quick code, future of the optimized (plan, code),
        # the ``_DeferredStart`` of the optimizing compile)
        self._tiers: dict[str, tuple] = {}
        self._background: list[threading.Thread] = []  # compiles, links, entries
        # native key -> background work waiting for an executable's first run.
        self._deferred: dict[str, _DeferredStart] = {}
        self.stats = {"compiled": 0, "memory_hits": 0, "disk_hits": 0, "native_hits": 0,
                      "linked": 0, "quick_compiled": 0}
        # At exit, work still held back for a first run that never came (a program compiled
        # ahead of time, ``lower().compile()``, and not run) starts, before the interpreter
        # waits for its non-daemon threads: the disk cache gets the optimized code.
        _at_thread_shutdown(self._start_held_back)

    def _start_held_back(self) -> None:
        with self._lock:
            deferred = list(self._deferred.values())
        for start in deferred:
            start()

    def native_key(self, module_text: str) -> str:
        """The key of a module's native library and run plan; needs no llvmlite."""
        return object_cache.cache_key("ember-cpu-native", *_key_parts(), module_text)

    def lowered_key(self, lowered_text: str) -> str:
        """The key of what a *lowered* (not yet optimized) module compiles to: its text, the
        compiler's sources (the optimization pipeline) and everything in ``native_key``."""
        return object_cache.cache_key("ember-cpu-lowered", *_key_parts(),
                                      _source_stamp(_PIPELINE_DIRS), lowered_text)

    def fingerprint_key(self, fingerprint: str) -> str:
        """The key of what a jaxpr with this lowering fingerprint compiles to: the fingerprint,
        the sources of the lowering rules and everything in ``lowered_key``."""
        return object_cache.cache_key("ember-cpu-traced", *_key_parts(),
                                      _source_stamp(_LOWERING_DIRS), fingerprint)

    def caches_lowered(self) -> bool:
        """Whether ``load_lowered`` can hit (the disk cache is on and libraries load)."""
        return object_cache.get_object_cache() is not None and native_lib.available()

    def load_lowered(self, lkey: str):
        """``(executable, optimized module text, cost analysis)`` for a ``lowered_key`` or
        ``fingerprint_key`` whose compilation a process stored before (``remember_lowered``),
        or None. Nothing is optimized or compiled: this is the warm path that skips the HLO
        pipeline."""
        cache = object_cache.get_object_cache()
        if cache is None or not native_lib.available():
            return None
        payload = cache.load(lkey)
        if payload is None:
            return None
        try:
            entry = pickle.loads(payload)
            nkey, text, cost = entry["native_key"], entry["text"], entry["cost"]
            if entry.get("format") != NATIVE_FORMAT or not isinstance(text, str):
                raise ValueError("unexpected lowered entry layout")
            if nkey != self.native_key(text):
                raise ValueError("entry's native key does not match its module")
        except Exception as e:  # noqa: BLE001 - any bad entry is a miss, never an error
            _log.debug("cpu backend: discarding lowered cache entry %s: %s", lkey, e)
            cache.remove(lkey)
            return None
        hit = self._load_native(nkey)
        if hit is None:
            return None
        exe = CpuExecutable(hit[0], hit[1], None)
        exe.native_key = nkey
        return exe, text, dict(cost)

    def remember_lowered(self, lkeys: list[str], executable: CpuExecutable,
                         cost: dict) -> None:
        """Records (in the background, after the native library is stored) that the lowered
        modules or jaxprs of ``lkeys`` (``lowered_key``, ``fingerprint_key``) compile to
        ``executable``'s native entry, for ``load_lowered``."""
        nkey = getattr(executable, "native_key", None)
        module = executable.module
        cache = object_cache.get_object_cache()
        if nkey is None or module is None or cache is None or not _shared_libraries_enabled():
            return

        def work():
            while True:  # (the optimizing thread starts the link thread: wait for both)
                pending = [t for t in self._pending_links(nkey) if t.is_alive()]
                if not pending:
                    break
                for t in pending:
                    t.join()
            try:
                from ember.compiler.parser import parse_module
                text = module.to_text()
                # Only a module the parser reads back exactly can stand in for the original.
                if parse_module(text).to_text() != text or self.native_key(text) != nkey:
                    return
                if cache.load(nkey) is None:  # no native library stored: nothing to map to
                    return
                payload = pickle.dumps({"format": NATIVE_FORMAT, "native_key": nkey,
                                        "text": text, "cost": dict(cost)},
                                       protocol=pickle.HIGHEST_PROTOCOL)
                for lkey in lkeys:
                    cache.store(lkey, payload)
            except Exception as e:  # noqa: BLE001 - the cache is an optimization
                _log.debug("cpu backend: cannot record lowered module: %s", e)

        with self._lock:  # (after the native library's work if that is held back)
            held = self._deferred.get(nkey)
            if held is not None and held.add(work):
                return
        self._start_background(work)

    def alias_lowered(self, lkey: str, existing: str) -> None:
        """Stores the entry of the key ``existing`` under ``lkey`` too (in the background)."""
        cache = object_cache.get_object_cache()
        if cache is None:
            return

        def work():
            payload = cache.load(existing)
            if payload is not None:
                cache.store(lkey, payload)

        self._start_background(work)

    def _pending_links(self, nkey: str) -> list:
        with self._lock:
            return [t for t in self._background if getattr(t, "native_key", None) == nkey]

    def _start_background(self, work, nkey: str | None = None) -> None:
        with self._lock:
            self._start_background_locked(work, nkey)

    def _start_background_locked(self, work, nkey: str | None = None) -> None:
        """Starts ``work`` on a listed background thread (the caller holds ``_lock``)."""
        def run():
            _lower_thread_priority()
            _monitoring._timed(_monitoring.BACKGROUND_WORK_EVENT, nkey or "", work)
        # Not a daemon: the process waits for it at exit, so the entry gets written.
        thread = threading.Thread(target=run, name="ember-cpu-cache", daemon=False)
        thread.native_key = nkey
        self._background = [t for t in self._background if t.is_alive()]
        self._background.append(thread)
        # (Started under the lock: a listed thread that is not alive yet would be dropped by
        # another thread's filter above, or skipped by ``wait_for_background``.)
        thread.start()

    def cache_key(self, module_text: str) -> str:
        """The key of a module's object code: its optimized HLO text, the versions of ember,
        of this code generator, of llvmlite and LLVM, and the host CPU and its features."""
        from ember.backends.cpu import llvm_support
        return object_cache.cache_key("ember-cpu", CODEGEN_VERSION, _ember_version(),
                                      llvm_support.backend_fingerprint(), module_text)

    def compile(self, module: Module,
                dump: Callable[[str, str], None] | None = None) -> CpuExecutable:
        """An executable for ``module`` (already optimized: nothing is rewritten)."""
        text = module.to_text()
        nkey = self.native_key(text)
        if dump is None:
            hit = self._load_native(nkey)
            if hit is not None:
                exe = CpuExecutable(hit[0], hit[1], module)
                exe.native_key = nkey
                self._start_helper_builds()
                return exe
            with self._lock:
                tier = self._tiers.get(nkey)
            if tier is not None:  # compiled by this process, still being optimized
                self.stats["memory_hits"] += 1
                return self._tiered_executable(nkey, tier, module)
        from ember.backends.cpu import llvm_support
        from ember.backends.cpu.program import ProgramBuilder
        # Symbols are named after the key: unique in the process, and the same in every
        # process, so cached code matches the program rebuilt here.
        program = ProgramBuilder(module, prefix=f"m{nkey[:20]}").build()
        plan = RunPlan.of(program)
        cheap = (program.max_work <= FAST_COMPILE_MAX_WORK
                 and heaviest_kernel_ops(module) <= FAST_COMPILE_MAX_OPS)
        opt_level = 0 if cheap else 3
        later: list = []  # background work for after the first run (tiered executables)
        if program.max_work >= PARALLEL_MIN_WORK:
            # Loaded now from the disk cache, or built (once per machine) in the background
            # while the first runs use the Python pool.
            parallel_runtime.prepare(later.append)
        if dump is not None:
            dump("llvm.ll", program.ir_text)
            art = llvm_support.compile_ir(program.ir_text, want_text=True, opt_level=opt_level)
            dump("llvm.opt.ll", art.optimized_ir)
            dump("s", art.assembly)
        # (The native key names the symbols, so it is part of the object code's key too.)
        okey = object_cache.cache_key(self.cache_key(text), f"O{opt_level}", nkey)
        if opt_level > 0 and dump is None and TIERED_COMPILATION:
            started = self._start_tier(okey, nkey, plan, program, module, opt_level)
            if started is not None:
                quick, work = started
                later.append(work)
                tier = quick + (self._after_first_run(later, nkey),)
                with self._lock:
                    self._tiers[nkey] = tier
                exe = self._tiered_executable(nkey, tier, module)
                self._start_helper_builds(tier[3])
                return exe
        for work in later:
            self._start_background(work)
        lib = self._load_object(okey, program.ir_text, opt_level)
        with self._lock:
            self._programs.setdefault(nkey, (plan, lib))
        exe = CpuExecutable(plan, lib, module)
        exe.native_key = nkey
        # (Started only now: the library's compile holds LLVM, which loading needed.)
        self._store_native_later(nkey, plan, program.ir_text, opt_level)
        self._start_helper_builds()
        return exe

    def _start_helper_builds(self, held: _DeferredStart | None = None) -> None:
        """Starts the background work that loading an executable left behind (the disk
        cache's copy of ember's own ``gemm``, built once per machine:
        ``gemm_kernel.take_pending``), after the first run where ``held`` holds a
        program's work back until then."""
        for work in gemm_kernel.take_pending():
            with self._lock:
                if held is not None and held.add(work):
                    continue
            self._start_background(work)

    # ------------------------------------------------------------------ tiered compilation

    def _start_tier(self, okey: str, nkey: str, plan: RunPlan, program, module: Module,
                    opt_level: int):
        """Compiles ``program``'s IR quickly (symbols renamed, so both versions can be
        loaded; rebuilt without short-row kernels, whose shuffles are slow to compile even
        unoptimized, where it has some: the looped row kernels give the same bits);
        returns ``(quick plan, quick code, future of the optimized (plan, code))`` and the
        optimizing compile's work (for a background thread), or None when the optimized
        object code is at hand (memory or disk)."""
        from concurrent.futures import Future

        from ember.backends.cpu import llvm_support
        from ember.backends.cpu.executable import renamed_plan
        from ember.backends.cpu.program import ProgramBuilder
        ir_text = program.ir_text
        cache = object_cache.get_object_cache()
        with self._lock:
            if okey in self._objects:
                return None
        if cache is not None and os.path.exists(cache.path(okey)):
            return None
        prefix = plan.entry_name[:-len("_entry")]
        quick_prefix = "q" + prefix[1:]
        if program.short_row_kernels:
            quick = ProgramBuilder(module, prefix=quick_prefix, short_rows=False).build()
            quick_ir, quick_plan = quick.ir_text, RunPlan.of(quick)
        else:
            # (Symbols are printed bare or quoted: ``@m..._kernel_0`` or ``@"m..._kernel_0"``.)
            quick_ir = ir_text.replace(f'@"{prefix}_', f'@"{quick_prefix}_').replace(
                f"@{prefix}_", f"@{quick_prefix}_")
            quick_plan = renamed_plan(plan, prefix, quick_prefix)
        code = llvm_support.compile_ir(quick_ir, opt_level=0).object_code
        quick_lib = llvm_support.LoadedObject(code)
        self.stats["quick_compiled"] += 1
        future: Future = Future()

        def work():
            try:
                # One optimizing compile: into the shared library that the disk cache stores,
                # loaded here too; MCJIT only where no library can be made.
                lib = self._build_native(nkey, plan, ir_text, opt_level)
                if lib is None:
                    lib = self._load_object(okey, ir_text, opt_level)
                else:
                    with self._lock:
                        self.stats["compiled"] += 1
                with self._lock:
                    self._programs.setdefault(nkey, (plan, lib))
                future.set_result((plan, lib))
            except BaseException as e:  # the waiting executable reports it
                future.set_exception(e)
            finally:
                with self._lock:
                    self._tiers.pop(nkey, None)

        return (quick_plan, quick_lib, future), work

    def _after_first_run(self, works: list, nkey: str) -> _DeferredStart:
        """Starts ``works`` in the background once, after the executable's first run: the
        first run (BLAS's threads included) then has the cores to itself instead of sharing
        them with an O3 compile and the interpreter lock with code generation."""
        start = _DeferredStart(self, nkey, works)
        with self._lock:
            self._deferred[nkey] = start
        return start

    @staticmethod
    def _tiered_executable(nkey: str, tier: tuple, module) -> CpuExecutable:
        quick_plan, quick_lib, future, start = tier
        exe = CpuExecutable(quick_plan, quick_lib, module)
        exe.native_key = nkey
        exe.upgrade_when_ready(future, start)
        return exe

    # ------------------------------------------------------------------ native libraries

    def _load_native(self, nkey: str):
        """(plan, library) from memory or the disk cache, or None."""
        with self._lock:
            hit = self._programs.get(nkey)
        if hit is not None:
            self.stats["memory_hits"] += 1
            return hit
        cache = object_cache.get_object_cache()
        if cache is None or not native_lib.available():
            return None
        payload = cache.load(nkey)
        if payload is None:
            return None
        try:
            entry = pickle.loads(payload)
            plan, so = entry["plan"], entry["so"]
            if entry.get("format") != NATIVE_FORMAT or not isinstance(plan, RunPlan):
                raise ValueError("unexpected native entry layout")
            lib = native_lib.NativeLibrary(so, cache.directory)
            _check_symbols(plan, lib)
        except Exception as e:  # noqa: BLE001 - any bad entry is a miss, never an error
            _log.debug("cpu backend: discarding native cache entry %s: %s", nkey, e)
            cache.remove(nkey)
            return None
        with self._lock:
            hit = self._programs.setdefault(nkey, (plan, lib))
        self.stats["disk_hits"] += 1
        self.stats["native_hits"] += 1
        return hit

    def _store_native_later(self, nkey: str, plan: RunPlan, ir_text: str,
                            opt_level: int) -> None:
        """``_build_native`` in a background thread (not a daemon: the process waits for it
        at exit, so the entry gets written), for a program this process runs on MCJIT code.
        MCJIT's objects use another code model, so they are not reused for the library (see
        ``llvm_support._target_machine``)."""
        if object_cache.get_object_cache() is not None and _shared_libraries_enabled():
            self._start_background(lambda: self._build_native(nkey, plan, ir_text, opt_level),
                                   nkey)

    def _build_native(self, nkey: str, plan: RunPlan, ir_text: str, opt_level: int):
        """Compiles ``ir_text`` for a shared library, links it, stores it with ``plan`` under
        ``nkey`` and returns it loaded; None without a disk cache or shared libraries, while
        another thread builds it, or when a step fails (logged at debug level)."""
        cache = object_cache.get_object_cache()
        if cache is None or not _shared_libraries_enabled():
            return None
        with self._lock:
            if nkey in self._linking:
                return None
            self._linking.add(nkey)
        try:
            so = native_lib.build_library(ir_text, opt_level, cache.directory)
            if so is None:
                return None
            lib = native_lib.NativeLibrary(so, cache.directory)
            _check_symbols(plan, lib)
            payload = executable_dumps({"format": NATIVE_FORMAT, "opt_level": opt_level,
                                        "plan": plan, "so": so})
            cache.store(nkey, payload)
            with self._lock:
                self.stats["linked"] += 1
            return lib
        except Exception as e:  # noqa: BLE001 - the cache is an optimization
            _log.debug("cpu backend: cannot store native library %s: %s", nkey, e)
            return None
        finally:
            with self._lock:
                self._linking.discard(nkey)

    def wait_for_background(self) -> None:
        """Waits until the background work (optimized compiles, links, cache entries) has
        finished, including work started by work it waited for."""
        current = threading.current_thread()
        while True:
            self._start_held_back()
            with self._lock:
                pending = [t for t in self._background if t.is_alive() and t is not current]
            if not pending:
                return
            for t in pending:
                t.join()

    # ------------------------------------------------------------------ MCJIT objects

    def _load_object(self, key: str, ir_text: str, opt_level: int):
        from ember.backends.cpu import llvm_support
        with self._lock:
            lib = self._objects.get(key)
            if lib is not None:
                self.stats["memory_hits"] += 1
                return lib
        cache = object_cache.get_object_cache()
        code = cache.load(key) if cache is not None else None
        if code is not None:
            self.stats["disk_hits"] += 1
        else:
            code = llvm_support.compile_ir(ir_text, opt_level=opt_level).object_code
            self.stats["compiled"] += 1
            if cache is not None:
                cache.store(key, code)
        with self._lock:
            lib = self._objects.get(key)
            if lib is None:  # (another thread may have loaded it meanwhile)
                lib = self._objects[key] = llvm_support.LoadedObject(code)
        return lib
