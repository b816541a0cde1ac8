"""Compiled kernels as shared libraries: linked once, then loaded without LLVM.

A program's object code (position-independent, see ``llvm_support``) is linked into a shared
library by the system C compiler driver (``link_shared``); the disk cache stores the library
with the program's run plan. A later process loads it with ``NativeLibrary(so_bytes, dir)``:
the bytes the cache verified are written to an anonymous in-memory file (``memfd``), or
where that is not possible to a new private file (``mkstemp``: a unique name, readable only
by this user) that is ``dlopen``'ed and then unlinked, so what is loaded is exactly what was
verified, and neither llvmlite nor LLVM is imported. (A fresh name matters: ``dlopen`` hands
back an already loaded library when given a name it has seen before.)

``host_fingerprint()`` and ``toolchain_fingerprint()`` identify, without importing llvmlite,
what native code depends on: the CPU (``/proc/cpuinfo``: vendor, family, model, features) and
the installed llvmlite/LLVM (its version file and the size and time of its library).

Linux only (``available()``); elsewhere the backend keeps loading object code through MCJIT.

Example:
    >>> so = link_shared(object_code)          # None when no linker works
    >>> lib = NativeLibrary(so, cache_dir)
    >>> lib.address("m0123_kernel_0")
"""

from __future__ import annotations

import _ctypes  # dlopen/dlsym/dlclose as ctypes itself uses them
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable

from ember.backends.cpu import denormals

_log = logging.getLogger(__name__)

# Seconds a link may take before it is abandoned (it normally takes ~20-50 ms).
LINK_TIMEOUT_S = 120.0
_CPUINFO_KEYS = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags",
                 "features", "cpu implementer", "cpu architecture", "cpu variant",
                 "cpu part", "cpu revision", "isa")

_host: str | None = None
_toolchain: str | None = None
_linker: list | None = None


def available() -> bool:
    """Whether this module's shared libraries work here (Linux: ELF, ``dlopen``)."""
    return sys.platform.startswith("linux")


def host_fingerprint() -> str:
    """The machine and its first CPU's identity and feature flags (``/proc/cpuinfo``).

    Example:
        >>> host_fingerprint()[:40]  # doctest: +SKIP
        'x86_64;vendor_id=AuthenticAMD;cpu family'
    """
    global _host
    if _host is None:
        fields = [os.uname().machine]
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                for line in f:
                    if not line.strip():
                        break  # the first processor's block is enough
                    name, _, value = line.partition(":")
                    name = name.strip().lower()
                    if name in _CPUINFO_KEYS:
                        fields.append(f"{name}={' '.join(value.split())}")
        except OSError:
            fields.append("cpuinfo=unavailable")
        _host = ";".join(fields)
    return _host


def toolchain_fingerprint() -> str:
    """The installed llvmlite (and so LLVM, which it bundles): its version file's digest and
    its native library's size and modification time. Found without importing llvmlite."""
    global _toolchain
    if _toolchain is None:
        import importlib.util
        spec = importlib.util.find_spec("llvmlite")
        parts = []
        if spec is None or not spec.submodule_search_locations:
            parts.append("llvmlite=missing")
        else:
            root = list(spec.submodule_search_locations)[0]
            try:
                with open(os.path.join(root, "_version.py"), "rb") as f:
                    parts.append("version=" + hashlib.sha256(f.read()).hexdigest()[:16])
            except OSError:
                parts.append("version=unknown")
            try:
                names = sorted(n for n in os.listdir(os.path.join(root, "binding"))
                               if n.startswith("libllvmlite"))
                for name in names:
                    st = os.stat(os.path.join(root, "binding", name))
                    parts.append(f"{name}={st.st_size}:{st.st_mtime_ns}")
            except OSError:
                parts.append("lib=unknown")
        _toolchain = ";".join(parts)
    return _toolchain


def linker() -> list | None:
    """The command linking an object into a shared library (the C compiler driver, which
    adds libgcc for the runtime routines LLVM calls), or None without one."""
    global _linker
    if _linker is None:
        for name in ("cc", "gcc", "clang"):
            path = shutil.which(name)
            if path:
                _linker = [path, "-shared", "-Wl,-z,noexecstack", "-Wl,--no-undefined"]
                break
        else:
            _linker = []
    return _linker or None


def link_shared(object_code: bytes) -> bytes | None:
    """The bytes of a shared library made of ``object_code``; None if linking fails (logged
    at debug level: the caller keeps using MCJIT)."""
    if not isinstance(object_code, (bytes, bytearray, memoryview)):
        raise TypeError(f"link_shared: object_code must be bytes, got "
                        f"{type(object_code).__name__}")
    command = linker()
    if command is None:
        return None
    with tempfile.TemporaryDirectory(prefix="ember-link-") as tmp:
        obj, lib = os.path.join(tmp, "kernels.o"), os.path.join(tmp, "kernels.so")
        with open(obj, "wb") as f:
            f.write(object_code)
        try:
            done = subprocess.run([*command, "-o", lib, obj], capture_output=True,
                                  timeout=LINK_TIMEOUT_S, check=False)
        except (OSError, subprocess.SubprocessError) as e:
            _log.debug("native_lib: cannot run the linker: %s", e)
            return None
        if done.returncode != 0:
            _log.debug("native_lib: link failed (%d): %s", done.returncode,
                       done.stderr.decode(errors="replace")[-2000:])
            return None
        with open(lib, "rb") as f:
            return f.read()


def build_library(ir_text: str, opt_level: int, directory: str | None,
                  ir_passes: bool = True) -> bytes | None:
    """``ir_text`` compiled for a shared library (position-independent; imports llvmlite),
    linked, and checked to load from ``directory``; None if any step fails. (``ir_passes``:
    as ``llvm_support.compile_ir``'s.)"""
    from ember.backends.cpu import llvm_support
    object_code = llvm_support.compile_ir(ir_text, opt_level=opt_level, shared_library=True,
                                          ir_passes=ir_passes).object_code
    so = link_shared(object_code)
    if so is None or not can_load(so, directory):
        return None
    return so


def load_or_build(name: str, ir_text: Callable[[], str], opt_level: int, shared: bool,
                  build: bool = True, ir_passes: bool = True):
    """Code compiled once per machine: from the disk cache entry of ``name`` (a key naming
    the code and what it depends on), else compiled from ``ir_text()`` and stored there. A
    shared library (``NativeLibrary``) when ``shared`` and linking works, else object code
    loaded through MCJIT (``llvm_support.LoadedObject``); a damaged entry is removed and
    rebuilt. None when the entry is missing and ``build`` is False."""
    from ember.backends.cpu import object_cache  # (llvm_support imports llvmlite: below)
    cache = object_cache.get_object_cache()
    directory = cache.directory if cache is not None else None
    key = object_cache.cache_key(name, "so" if shared else "o", host_fingerprint(),
                                 toolchain_fingerprint(), denormals.mode())
    code = cache.load(key) if cache is not None else None
    if code is not None:
        try:
            if shared:
                return NativeLibrary(code, directory)
            from ember.backends.cpu import llvm_support
            return llvm_support.LoadedObject(code)
        except (OSError, RuntimeError):
            cache.remove(key)
    if not build:
        return None
    if shared:
        code = build_library(ir_text(), opt_level, directory, ir_passes)
        if code is not None:
            if cache is not None:
                cache.store(key, code)
            return NativeLibrary(code, directory)
    from ember.backends.cpu import llvm_support
    code = llvm_support.compile_ir(ir_text(), opt_level=opt_level,
                                   ir_passes=ir_passes).object_code
    if cache is not None and not shared:
        cache.store(key, code)
    return llvm_support.LoadedObject(code)


# How many libraries were loaded from memory through each file-descriptor number (see
# ``_dlopen_in_memory``).
_fd_name_uses: dict[int, int] = {}
_fd_name_lock = threading.Lock()
_MAX_NAME = 1024
_DLOPEN_MODE = os.RTLD_NOW | os.RTLD_LOCAL


def load_task(kind: str, name: str, ir_text: Callable[[], str]):
    """``(library, entry)``: the helper library ``kind`` whose one task function ``name``
    (``void(i8** buffers, i64 lo, i64 hi)``, the parallel runtime's signature) ``ir_text()``
    defines, from the disk cache or compiled at O3 (keyed by the backend's sources too);
    ``entry`` calls it through cffi (which frees the GIL). Keep ``library`` alive while
    ``entry`` is used."""
    from ember.backends.cpu import _shared_libraries_enabled, _source_stamp
    from ember.backends.cpu.executable import _ffi
    lib = load_or_build(f"ember-{kind}:{name}:{_source_stamp()}", ir_text, 3,
                        _shared_libraries_enabled())
    return lib, _ffi.cast("void(*)(char**, long, long)", lib.address(name))


def load_once(table: dict, lock: threading.Lock, key, load: Callable[[], object],
              what: str):
    """``table[key]``, made by ``load()`` at the first call (under ``lock``); None, kept,
    where ``load`` fails (``what`` names the code in the debug log): a module's lazily built
    native helpers, one per key."""
    found = table.get(key, False)
    if found is not False:
        return found
    with lock:
        if key not in table:
            try:
                table[key] = load()
            except Exception as e:  # noqa: BLE001 - callers keep their fallback
                _log.debug("no native %s for %s: %s", what, key, e)
                table[key] = None
    return table[key]


def _dlopen(so_bytes: bytes, directory: str | None) -> int:
    """The ``dlopen`` handle of ``so_bytes`` loaded as a library: from an anonymous
    in-memory file where the system allows it (about 0.2 ms faster than a file on disk),
    else written to a fresh file in ``directory`` (the temporary directory if None), loaded,
    and the file removed (the mapping outlives it). (Raw handles, not ``ctypes.CDLL``: that
    builds a class per library, ~40 µs of a warm first call.)"""
    handle = _dlopen_in_memory(so_bytes)
    if handle is not None:
        return handle
    fd, path = tempfile.mkstemp(prefix=".tmp-lib-", suffix=".so", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(so_bytes)
        return _ctypes.dlopen(path, _DLOPEN_MODE)
    finally:
        try:
            os.remove(path)
        except OSError:
            pass


def _dlopen_in_memory(so_bytes: bytes) -> int | None:
    """``so_bytes`` loaded from a ``memfd`` through its ``/proc/self/fd`` path; None where
    that does not work (no ``memfd_create``, no ``/proc``, memory files not executable).

    ``dlopen`` returns the library already loaded under the same name, and a descriptor's
    number is reused once it is closed, so each path is made new: the ``n``-th library
    loaded through descriptor ``N`` is named ``/proc/self/fd/./(n times)N``. (Duplicating
    the descriptor to ever higher numbers instead would grow the process's descriptor table,
    which waits ~10 ms for the kernel in a process with threads.)"""
    if not hasattr(os, "memfd_create"):
        return None
    try:
        fd = os.memfd_create("ember-kernels", os.MFD_CLOEXEC)
    except OSError:
        return None
    try:
        view = memoryview(so_bytes)
        while view:
            view = view[os.write(fd, view):]
        with _fd_name_lock:
            uses = _fd_name_uses.get(fd, 0)
            _fd_name_uses[fd] = uses + 1
        name = "/proc/self/fd/" + "./" * uses + str(fd)
        if len(name) > _MAX_NAME:
            return None
        return _ctypes.dlopen(name, _DLOPEN_MODE)
    except OSError as e:
        _log.debug("native_lib: cannot load a library from memory: %s", e)
        return None
    finally:
        os.close(fd)


def can_load(so_bytes: bytes, directory: str | None = None) -> bool:
    """Whether ``so_bytes`` loads from ``directory`` (unloaded again at once): checked before
    a library is stored, so a place where libraries cannot load (``noexec``) stores none."""
    try:
        handle = _dlopen(so_bytes, directory)
    except OSError as e:
        _log.debug("native_lib: a fresh library does not load from %s: %s", directory, e)
        return False
    _ctypes.dlclose(handle)
    return True


class NativeLibrary:
    """A shared library loaded from bytes (through a private file in ``directory``, the
    temporary directory if None); hands out symbol addresses.

    The library is never unloaded (code addresses handed out must stay valid). ``OSError``
    if the bytes are not a loadable library.
    """

    __slots__ = ("_handle", "__weakref__")

    def __init__(self, so_bytes: bytes, directory: str | None = None):
        if not available():
            raise OSError("NativeLibrary: shared libraries are only loaded on Linux")
        if not isinstance(so_bytes, (bytes, bytearray, memoryview)):
            raise TypeError(f"NativeLibrary: so_bytes must be bytes, got "
                            f"{type(so_bytes).__name__}")
        self._handle = _dlopen(so_bytes, directory)

    def _symbol(self, name: str) -> int:
        try:
            return _ctypes.dlsym(self._handle, name)
        except OSError:  # (undefined symbol)
            return 0

    def address(self, name: str) -> int:
        """The address of the function ``name`` (``ValueError`` if the library lacks it)."""
        addr = self._symbol(name)
        if not addr:
            raise ValueError(f"native library has no function {name!r}")
        return addr

    def global_address(self, name: str) -> int:
        """The address of the global variable ``name``."""
        addr = self._symbol(name)
        if not addr:
            raise ValueError(f"native library has no global {name!r}")
        return addr
