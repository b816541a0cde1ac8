"""The CPU backend: every fusion of the optimized HLO compiled to native code by LLVM.

``CpuBackend().compile(module)`` builds one LLVM module for the program (``program.py``: a
kernel per fusion from ``kernel_gen.py``, element math from ``scalar_ops.py`` and
``vecmath.py``), optimizes it at O3 for the host CPU and loads the object code
(``llvm_support.py``); ``executable.py`` runs it. Object code is cached in memory and on disk
(``object_cache.py``), keyed by the optimized HLO text, ember's, llvmlite's and LLVM's
versions, the CPU and its features, this code generator's version and the optimization level.

``EMBER_DUMP_TO`` also gets each module's LLVM IR before and after optimization and its
assembly (``*.llvm.ll``, ``*.llvm.opt.ll``, ``*.s``).

Example:
    >>> exe = CpuBackend().compile(optimized_module)
    >>> outs = exe.execute([np.ones(3, np.float32)])
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ember.backends.cpu import llvm_support, object_cache
from ember.backends.cpu.executable import CpuExecutable
from ember.backends.cpu.program import ProgramBuilder
from ember.compiler.hlo import Module

# Bump when generated code changes for the same HLO (invalidates cached object code).
CODEGEN_VERSION = "1"
# Programs whose biggest kernel computes at most this many elements compile without IR
# optimization (see ``llvm_support.compile_ir``): their run time is all call overhead.
FAST_COMPILE_MAX_WORK = 512


def _ember_version() -> str:
    try:
        from importlib.metadata import version
        return version("ember")
    except Exception:  # not installed as a distribution
        return "dev"


class CpuBackend:
    """Compiles modules to native code for the host CPU (platform ``cpu``)."""

    name = "cpu"
    platform = "cpu"

    def __init__(self):
        # key -> LoadedObject. Never evicted: code cannot be unloaded from the shared engine.
        self._objects: dict[str, object] = {}
        self._lock = threading.Lock()
        self.stats = {"compiled": 0, "memory_hits": 0, "disk_hits": 0}

    def cache_key(self, module_text: str) -> str:
        """The key of a module's object code: its optimized HLO text, the versions of ember,
        of this code generator, of llvmlite and LLVM, and the host CPU and its features."""
        return object_cache.cache_key("ember-cpu", CODEGEN_VERSION, _ember_version(),
                                      llvm_support.backend_fingerprint(), module_text)

    def compile(self, module: Module,
                dump: Callable[[str, str], None] | None = None) -> CpuExecutable:
        """An executable for ``module`` (already optimized: nothing is rewritten)."""
        key = self.cache_key(module.to_text())
        # Symbols are named after the key: unique in the process's shared engine, and the
        # same in every process, so cached object code matches the program rebuilt here.
        program = ProgramBuilder(module, prefix=f"m{key[:20]}").build()
        opt_level = 0 if program.max_work <= FAST_COMPILE_MAX_WORK else 3
        if dump is not None:
            dump("llvm.ll", program.ir_text)
            art = llvm_support.compile_ir(program.ir_text, want_text=True, opt_level=opt_level)
            dump("llvm.opt.ll", art.optimized_ir)
            dump("s", art.assembly)
        lib = self._load(object_cache.cache_key(key, f"O{opt_level}"), program.ir_text,
                         opt_level)
        return CpuExecutable(program, lib, module)

    def _load(self, key: str, ir_text: str, opt_level: int):
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
