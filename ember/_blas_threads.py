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
import time

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


_symbols: dict = {}  # name -> the function or None, once looked up


def _openblas_function(name: str):
    """OpenBLAS's ``int name(...)`` as a cffi function, or None where the process's BLAS has
    none."""
    if name not in _symbols:
        import _ctypes

        import numpy  # noqa: F401  (loads NumPy's BLAS)
        address = 0
        for path in blas_paths():
            try:
                address = _ctypes.dlsym(_ctypes.dlopen(path, os.RTLD_NOW), name)
            except OSError:
                continue
            if address:
                break
        signature = "int(*)(int)" if name.startswith("openblas_set") else "int(*)(void)"
        _symbols[name] = _ffi.cast(signature, address) if address else None
    return _symbols[name]


def setter():
    """OpenBLAS's ``int openblas_set_num_threads_local(int)`` (returning the count before),
    or None where the process's BLAS has none."""
    return _openblas_function("openblas_set_num_threads_local")


def blas_thread_count() -> int | None:
    """How many threads OpenBLAS may use outside ``one_blas_thread`` (None: not OpenBLAS)."""
    saved = one_blas_thread._saved
    if saved is not None:
        return saved
    for name in ("openblas_get_num_threads", "scipy_openblas_get_num_threads64_",
                 "openblas_get_num_threads64_"):  # (plain, NumPy's wheels, ILP64 builds)
        getter = _openblas_function(name)
        if getter is not None:
            return int(getter())
    return None


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


class StallGuard:
    """Runs large BLAS calls on OpenBLAS's threads until one *stalls*, then for a while on
    the calling thread alone.

    OpenBLAS splits a product among its threads, which wait for each other by spinning.
    When other processes keep the cores busy, a thread that has lost its core holds up the
    others: a (256, 512) @ (512, 512) product that takes ~0.3 ms took 5-60 ms on a 2-core
    machine running two busy processes, where one thread takes ~1-2 ms. Such a call is seen
    by the CPU time it got: OpenBLAS's threads compute or spin for the whole call, so an
    unhindered call gets ~cores x its wall time of CPU time (this process's, all threads);
    a call that got less than ``BUSY_FRACTION`` of that, lasting ``MIN_SECONDS`` or more,
    stalled. (An idle machine has such calls too, now and then: a call whose helper thread
    woke late, ran on one thread. Contention makes them come in runs.) After two stalls
    within ``STALL_WINDOW_SECONDS`` the calls run under ``one_blas_thread`` for
    ``HOLD_SECONDS``; a stall of the first threaded call after a hold holds again, twice
    as long (up to ``HOLD_MAX_SECONDS``); a threaded call that doesn't stall ends that.
    (A shape whose last call was shorter than ``MIN_SECONDS`` skips the CPU clock's ~1 µs.
    With more than ``MAX_CORES`` BLAS threads nothing is judged: a product there need not
    use them all, so its CPU time says less.)
    The threading changes no result: OpenBLAS's products do not depend on it.
    """

    MIN_SECONDS = 1e-3
    BUSY_FRACTION = 0.6
    MAX_CORES = 8
    STALL_WINDOW_SECONDS = 0.1
    HOLD_SECONDS = 0.5
    HOLD_MAX_SECONDS = 8.0

    def __init__(self, cores: int | None = None):
        self.cores = cores  # (OpenBLAS's thread count, read at the first call)
        self._last: dict = {}  # shape key -> its last threaded call's seconds
        self._single_until = 0.0
        self._last_stall = float("-inf")
        self._hold = self.HOLD_SECONDS
        self.stalls = 0  # (counted, for tests and curiosity)

    def run(self, key, call) -> None:
        """Runs ``call()``, a BLAS product of a shape named by ``key``, as above."""
        start = time.perf_counter()
        if start < self._single_until:
            with one_blas_thread:
                call()
            return
        if self.cores is None:
            self.cores = blas_thread_count() or 1
        judged = 1 < self.cores <= self.MAX_CORES and \
            self._last.get(key, self.MIN_SECONDS) >= self.MIN_SECONDS
        cpu = time.process_time() if judged else 0.0
        call()
        wall = time.perf_counter() - start
        self._last[key] = wall
        if not judged or wall < self.MIN_SECONDS:
            return
        if time.process_time() - cpu < self.BUSY_FRACTION * self.cores * wall:
            self.stalls += 1
            now = time.perf_counter()
            # (a hold longer than the first: no threaded call has gone well since a hold)
            if now - self._last_stall <= self.STALL_WINDOW_SECONDS or \
                    self._hold > self.HOLD_SECONDS:
                self._single_until = now + self._hold
                self._hold = min(2 * self._hold, self.HOLD_MAX_SECONDS)
            self._last_stall = now
        else:
            self._hold = self.HOLD_SECONDS


blas_stall_guard = StallGuard()
