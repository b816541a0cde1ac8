"""OpenBLAS held on the calling thread while ember's own threads are the parallelism.

Where ember splits work across its threads and each part calls BLAS (batched products, a
convolution's row blocks, native ``gemm`` tasks, small LAPACK problems), OpenBLAS must not
split each call again over its own threads. Its ``openblas_set_num_threads_local`` sets a
process-wide count in OpenBLAS's pthreads builds (NumPy's wheels), so a set and a restore per
thread race: one thread's restore undoes another's set, and the last restore can write back a
one for good (every later large product then ran on one core). ``one_blas_thread`` therefore
sets the count once for all the threads inside: the first in sets one, the last out restores
what was there.
"""

from __future__ import annotations

import os
import threading

import _cffi_backend

_ffi = _cffi_backend.FFI()


def blas_paths(words: tuple[str, ...] = ("blas",)) -> list[str]:
    """The mapped libraries whose file names contain one of ``words`` (Linux
    ``/proc/self/maps``; none elsewhere)."""
    paths = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                name = os.path.basename(path).lower()
                if any(w in name for w in words) and path not in paths:
                    paths.append(path)
    except OSError:
        pass
    return paths


_setter: list = []  # [the setter or None], once looked up


def setter():
    """OpenBLAS's ``int openblas_set_num_threads_local(int)`` (returning the count before),
    or None where the process's BLAS has none."""
    if not _setter:
        import _ctypes

        import numpy  # noqa: F401  (loads NumPy's BLAS)
        address = 0
        for path in blas_paths():
            try:
                address = _ctypes.dlsym(_ctypes.dlopen(path, os.RTLD_NOW),
                                        "openblas_set_num_threads_local")
            except OSError:
                continue
            if address:
                break
        _setter.append(_ffi.cast("int(*)(int)", address) if address else None)
    return _setter[0]


class _OneBlasThread:
    """A context (re-entrant, for any number of threads) in which OpenBLAS runs each call
    on the thread making it."""

    def __init__(self):
        self._lock = threading.Lock()
        self._depth = 0
        self._saved: int | None = None

    def __enter__(self) -> None:
        with self._lock:
            if self._depth == 0:
                set_threads = setter()
                self._saved = set_threads(1) if set_threads is not None else None
            self._depth += 1

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._saved is not None:
                setter()(self._saved)
                self._saved = None


one_blas_thread = _OneBlasThread()
