"""The CPU backend: every fusion of the optimized HLO compiled to native code by LLVM.

``CpuBackend().compile(module)`` builds one LLVM module for the program (``program.py``: a
kernel per fusion from ``kernel_gen.py``, element math from ``scalar_ops.py`` and
``vecmath.py``), optimizes it at O3 for the host CPU and loads the object code
(``llvm_support.py``); ``executable.py`` runs it. Object code is cached in memory and on disk
(``object_cache.py``), keyed by the module's LLVM IR (generated from the optimized HLO),
ember's, llvmlite's and LLVM's versions, the CPU and its features, and this code generator's
version.

``EMBER_DUMP_TO`` also gets each module's LLVM IR before and after optimization and its
assembly (``*.llvm.ll``, ``*.llvm.opt.ll``, ``*.s``).

Example:
    >>> exe = CpuBackend().compile(optimized_module)
    >>> outs = exe.execute([np.ones(3, np.float32)])
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from ember.backends.cpu import llvm_support, object_cache
from ember.backends.cpu.executable import CpuExecutable
from ember.backends.cpu.program import ProgramBuilder
from ember.compiler.hlo import Module

# Bump when generated code changes for the same HLO (invalidates cached object code).
CODEGEN_VERSION = "1"
_MEMORY_CACHE_SIZE = 512


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
        self._objects: OrderedDict[str, object] = OrderedDict()  # key -> LoadedObject
        self._lock = threading.Lock()
        self.stats = {"compiled": 0, "memory_hits": 0, "disk_hits": 0}

    def cache_key(self, ir_text: str) -> str:
        return object_cache.cache_key("ember-cpu", CODEGEN_VERSION, _ember_version(),
                                      llvm_support.backend_fingerprint(), ir_text)

    def compile(self, module: Module,
                dump: Callable[[str, str], None] | None = None) -> CpuExecutable:
        """An executable for ``module`` (already optimized: nothing is rewritten)."""
        program = ProgramBuilder(module).build()
        # The LLVM IR is a function of the optimized HLO and this code generator; keying on it
        # also covers what the generator depends on (which math routines exist, ...).
        key = self.cache_key(program.ir_text)
        if dump is not None:
            dump("llvm.ll", program.ir_text)
            art = llvm_support.compile_ir(program.ir_text, want_text=True)
            dump("llvm.opt.ll", art.optimized_ir)
            dump("s", art.assembly)
        lib = self._load(key, program.ir_text)
        return CpuExecutable(program, lib, module)

    def _load(self, key: str, ir_text: str):
        with self._lock:
            lib = self._objects.get(key)
            if lib is not None:
                self._objects.move_to_end(key)
                self.stats["memory_hits"] += 1
                return lib
        cache = object_cache.get_object_cache()
        code = cache.load(key) if cache is not None else None
        if code is not None:
            self.stats["disk_hits"] += 1
        else:
            code = llvm_support.compile_ir(ir_text).object_code
            self.stats["compiled"] += 1
            if cache is not None:
                cache.store(key, code)
        lib = llvm_support.LoadedObject(code)
        with self._lock:
            self._objects[key] = lib
            while len(self._objects) > _MEMORY_CACHE_SIZE:
                self._objects.popitem(last=False)
        return lib

    def clear_cache(self) -> None:
        """Forgets the in-memory object code (the disk cache is untouched)."""
        with self._lock:
            self._objects.clear()
