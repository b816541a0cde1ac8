"""LLVM through llvmlite: the host target, the O3 pipeline, object code and loading it.

``compile_ir(text)`` optimizes a textual LLVM module for the host CPU (its name and features;
512-bit vectors where the host has them: ``preferred_vector_bits``) with the new pass
manager at O3, so loops vectorize, and returns the object code plus the
optimized IR and assembly for dumps. ``LoadedObject(object_code)`` loads object code into the
process's one execution engine (which owns its target machine: llvmlite frees the target
machine with the engine, so both live as long as the process) and hands out addresses.

llvmlite serializes LLVM behind a lock, so compiles are also serialized here (``_LOCK``).

Example:
    >>> art = compile_ir(ir_text)
    >>> lib = LoadedObject(art.object_code)
    >>> addr = lib.address("kernel_0")
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass

import llvmlite
import llvmlite.binding as llvm

from ember.backends.cpu import denormals

_LOCK = threading.RLock()


def _new_lock_in_child() -> None:
    """A forked child gets a free lock (a background compile in the parent may have held it;
    that thread does not exist in the child)."""
    global _LOCK
    _LOCK = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)
_INITIALIZED = False


# Runtime-library routines LLVM's code generator may call (half-precision conversions it
# does not expand inline); they live in libgcc_s, which MCJIT does not search by itself.
_BUILTINS = ("__truncdfhf2", "__truncsfhf2", "__extendhfsf2", "__extendhfdf2")


def _libgcc_candidates():
    yield "libgcc_s.so.1"
    import ctypes.util  # (find_library runs ldconfig: only when the usual name fails)
    found = ctypes.util.find_library("gcc_s")
    if found:
        yield found


def _register_builtins() -> None:
    import ctypes
    for lib in _libgcc_candidates():
        try:
            handle = ctypes.CDLL(lib)
        except OSError:
            continue
        for name in _BUILTINS:
            fn = getattr(handle, name, None)
            if fn is not None:
                llvm.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)
        return


def _init() -> None:
    global _INITIALIZED
    if not _INITIALIZED:
        with _LOCK:
            if not _INITIALIZED:
                llvm.initialize_native_target()
                llvm.initialize_native_asmprinter()
                _register_builtins()
                _INITIALIZED = True


_host_cpu: tuple[str, str] | None = None


def host_cpu() -> tuple[str, str]:
    """The host CPU's LLVM name and feature string (``+avx2,+fma,...``), asked of LLVM
    once, under the lock (code generation calls this beside compiles on other threads)."""
    global _host_cpu
    if _host_cpu is None:
        _init()
        with _LOCK:
            _host_cpu = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    return _host_cpu


def host_has_feature(name: str) -> bool:
    """Whether the host CPU has feature ``name`` (LLVM's spelling, e.g. ``avx512f``)."""
    return f"+{name}" in host_cpu()[1].split(",")


# AVX-512 CPUs whose 512-bit instructions lower the clock enough to lose to 256-bit code.
_THROTTLING_AVX512 = frozenset({"skylake-avx512", "cascadelake", "cooperlake", "knl", "knm"})
_DEFINE_LINE = re.compile(r"^(define .*?)(\s*\{)?$", re.M)  # (a brace ends a line only)
# Functions carrying this attribute keep LLVM's width for the CPU (``keep_vector_width``).
_KEEP_WIDTH = '"ember-keep-vector-width"'


def preferred_vector_bits() -> int | None:
    """512 where kernels should use the host's 512-bit vectors, else None (LLVM's choice).

    LLVM's Intel tunings prefer 256-bit vectors (to spare Skylake-era servers the clock
    drop of 512-bit instructions); its AMD Zen 4/5 tunings already take 512. On later Intel
    cores 512-bit code is the faster: on this project's Intel VM (AVX-512 with AMX, reported
    as "rocketlake") a (4096, 1024) softmax took 1.31 -> 0.89 ms and a 4M-element exp 0.83
    -> 0.65 ms, as on Zen 4.
    """
    name, _ = host_cpu()
    if host_has_feature("avx512f") and name not in _THROTTLING_AVX512:
        return 512
    return None


def keep_vector_width(fn) -> None:
    """Leaves the llvmlite function ``fn`` at LLVM's vector width for the CPU: loops whose
    wider vectorization LLVM gets wrong (8 x 8 transpose tiles: scatters at 512 bits on
    Intel, a (64, 128, 128) transpose 0.40 -> 0.55 ms)."""
    set.add(fn.attributes, _KEEP_WIDTH)  # (llvmlite's ``add`` takes only enum attributes)


def _with_vector_width(ir_text: str) -> str:
    """``ir_text`` with every defined function, except those marked by
    ``keep_vector_width``, asking for ``preferred_vector_bits()`` wide vectors (LLVM reads
    the width from a function attribute; it is added to each ``define`` line, as llvmlite's
    IR builder offers no way to write such attributes)."""
    bits = preferred_vector_bits()
    if bits is None:
        return ir_text
    width = f' "prefer-vector-width"="{bits}"'
    return _DEFINE_LINE.sub(lambda m: m.group(0) if _KEEP_WIDTH in m.group(1)
                            else m.group(1) + width + (m.group(2) or ""), ir_text)


def target_triple() -> str:
    _init()
    return llvm.get_process_triple()


def _target_machine(opt: int = 3, shared_library: bool = False) -> llvm.TargetMachine:
    """The host target machine. Objects for MCJIT use its default code model (large: sections
    may land anywhere in memory, so 32-bit PC-relative relocations could overflow, which
    aborts RuntimeDyld); objects linked into a shared library (``native_lib.link_shared``)
    are position-independent in the small code model, as shared libraries are."""
    name, features = host_cpu()
    target = llvm.Target.from_triple(target_triple())
    if shared_library:
        return target.create_target_machine(cpu=name, features=features, opt=opt,
                                            reloc="pic", codemodel="small")
    return target.create_target_machine(cpu=name, features=features, opt=opt,
                                        codemodel="jitdefault")


def backend_fingerprint() -> str:
    """What object code depends on besides the IR: llvmlite/LLVM versions, CPU and features,
    whether code flushes denormals (``denormals``)."""
    name, features = host_cpu()
    version = ".".join(map(str, llvm.llvm_version_info))
    return (f"llvmlite={llvmlite.__version__};llvm={version};cpu={name};features={features};"
            f"{denormals.mode()};vector_bits={preferred_vector_bits()}")


@dataclass(frozen=True)
class CompiledArtifact:
    """The result of compiling one LLVM module."""

    object_code: bytes
    optimized_ir: str | None = None
    assembly: str | None = None


def compile_ir(ir_text: str, want_text: bool = False, opt_level: int = 3,
               shared_library: bool = False,
               flush_denormals: bool | None = None, ir_passes: bool = True) -> CompiledArtifact:
    """Parses, verifies and optimizes ``ir_text`` for the host, returning object code.

    ``opt_level`` 3 runs the O3 pipeline (loops vectorize); 0 skips IR optimization and uses
    LLVM's fast instruction selection: about 30x less compile time, for programs whose arrays
    are so small that the code's speed does not matter. With ``want_text``, the optimized IR
    and the assembly come back too (for dumps). ``shared_library`` makes code to be linked
    into a shared library instead of loaded by MCJIT (see ``_target_machine``).
    ``flush_denormals``: the module's external functions run with denormals flushed to zero,
    as XLA's code does (``denormals.flush_denormals``); None: as the switch
    ``EMBER_CPU_FLUSH_DENORMALS`` says (off by default). ``ir_passes`` False skips the IR
    pipeline but generates code at ``opt_level`` (instruction selection, register
    allocation): for IR written as it should run (``gemm_kernel``'s explicit vectors).
    """
    _init()
    if denormals.enabled() if flush_denormals is None else flush_denormals:
        ir_text = denormals.flush_denormals(ir_text)
    with _LOCK:
        tm = _target_machine(opt_level, shared_library)
        mod = llvm.parse_assembly(_with_vector_width(ir_text))
        mod.triple = target_triple()
        mod.data_layout = str(tm.target_data)
        mod.verify()
        if opt_level > 0 and ir_passes:
            pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
            pto.loop_vectorization = True
            pto.slp_vectorization = True
            pb = llvm.create_pass_builder(tm, pto)
            pb.getModulePassManager().run(mod, pb)
        obj = tm.emit_object(mod)
        if not want_text:
            return CompiledArtifact(obj)
        return CompiledArtifact(obj, str(mod), tm.emit_assembly(mod))


class _SharedEngine:
    """The process's one MCJIT engine (and the target machine it owns, kept alive with it).

    Every module's object code is added to it: adding an object costs ~0.15 ms where a new
    engine costs ~7 ms. Symbols must therefore be unique across modules (the CPU backend
    prefixes them with the module's cache key). Code is never unloaded.
    """

    def __init__(self):
        self.tm = _target_machine()
        backing = llvm.parse_assembly("")
        backing.triple = target_triple()
        self.engine = llvm.create_mcjit_compiler(backing, self.tm)
        self.objects: list = []  # the object files, kept alive with the engine


_ENGINE: _SharedEngine | None = None


def _shared_engine() -> _SharedEngine:
    global _ENGINE
    if _ENGINE is None:
        _ENGINE = _SharedEngine()
    return _ENGINE


class LoadedObject:
    """Object code loaded into the process's execution engine; hands out addresses."""

    __slots__ = ("_engine", "__weakref__")

    def __init__(self, object_code: bytes):
        _init()
        with _LOCK:
            shared = _shared_engine()
            obj = llvm.ObjectFileRef.from_data(object_code)
            shared.engine.add_object_file(obj)
            shared.objects.append(obj)
            shared.engine.finalize_object()
            self._engine = shared.engine

    def address(self, name: str) -> int:
        """The address of the function ``name`` (``ValueError`` if the object lacks it)."""
        with _LOCK:
            addr = self._engine.get_function_address(name)
        if not addr:
            raise ValueError(f"compiled object has no function {name!r}")
        return addr

    def global_address(self, name: str) -> int:
        """The address of the global variable ``name``."""
        with _LOCK:
            addr = self._engine.get_global_value_address(name)
        if not addr:
            raise ValueError(f"compiled object has no global {name!r}")
        return addr
