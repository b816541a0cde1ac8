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


_blas_paths: list[str] = []  # (the default words' answer, once it names a library)


def blas_paths(words: tuple[str, ...] = ("blas",)) -> list[str]:
    """The mapped libraries whose file names contain one of ``words`` (Linux
    ``/proc/self/maps``; none elsewhere). The default words' answer is kept once it names
    a library: reading the map takes ~1 ms (hundreds of mappings)."""
    if words == ("blas",) and _blas_paths:
        return list(_blas_paths)
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
    if words == ("blas",) and paths:
        _blas_paths[:] = paths
    return paths


def resolve() -> None:
    """Looks up OpenBLAS's thread functions now (``preload`` calls it at import), so that
    no call pays for reading the library map."""
    setter()
    blas_thread_count()


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
    """Runs large BLAS calls on OpenBLAS's threads unless they stall, when the calling
    thread alone does better.

    OpenBLAS splits a product among its threads, which wait for each other by spinning.
    When other processes keep the cores busy, a thread that has lost its core holds up the
    others: a (256, 512) @ (512, 512) product that takes ~0.3 ms took 5-60 ms on a 2-core
    machine running two busy processes, where one thread takes ~1-2 ms.

    - *Stalls* are seen by the CPU time a call got: OpenBLAS's threads compute or spin for
      the whole call, so an unhindered call gets ~threads x its wall time of CPU time (this
      process's, all threads); one that got less than ``BUSY_FRACTION`` of that, lasting
      ``MIN_SECONDS`` or more and ``SLOWDOWN`` times its key's fastest threaded call,
      stalled. (The kernel counts the time of a thread running on another core at its clock
      ticks, every 4 ms at 250 Hz, so a call of a few ms, a whole program's, often reads
      as one thread's time: a call no slower than usual is not judged. A shape whose last
      call was shorter than ``MIN_SECONDS`` skips the CPU clock's ~1 µs. With more than
      ``MAX_THREADS`` BLAS threads nothing is judged: a product there need not use them
      all.)
    - An idle machine has such calls now and then (a helper thread woke late); contention
      makes them come in runs. Two stalls within ``STALL_WINDOW_SECONDS`` start a *trial*:
      the products run under ``one_blas_thread`` for ``HOLD_SECONDS``, each shape's
      fastest time noted.
    - Then the next ``DECIDING_CALLS`` threaded calls of noted shapes decide: one slower
      than its shape's single-threaded time, and the products go back to one thread for
      twice as long (up to ``HOLD_MAX_SECONDS``), to be decided again after; all faster
      (under load, one lucky call can be), and the threads stay,
      and no trial starts for ``TRIAL_BACKOFF_SECONDS``, doubled (up to
      ``TRIAL_BACKOFF_MAX_SECONDS``) each time a trial ends so (other threads of this
      process, say, make stalls that do not make one thread faster) and back to the start
      after one that found one thread faster.

    A held product may round differently in its last bits: OpenBLAS's SkylakeX kernels'
    products mostly do not depend on the thread count, but some do ((128, 784) @ (784, 512)
    float32 on an Intel Xeon); its Haswell kernels, which it runs on a Zen 5 CPU, round many
    products split over threads differently ((256, 64) @ (64, 256) float32, say).
    """

    MIN_SECONDS = 1e-3
    SLOWDOWN = 2.0
    BUSY_FRACTION = 0.6
    MAX_THREADS = 8
    STALL_WINDOW_SECONDS = 0.1
    HOLD_SECONDS = 0.5
    HOLD_MAX_SECONDS = 8.0
    DECIDING_CALLS = 2
    TRIAL_BACKOFF_SECONDS = 2.0
    TRIAL_BACKOFF_MAX_SECONDS = 64.0

    def __init__(self, threads: int | None = None):
        self.threads = threads  # (OpenBLAS's thread count, read at the first call)
        self._last: dict = {}  # shape key -> its last threaded call's seconds
        self._fastest: dict = {}  # shape key -> its fastest threaded call's seconds
        self._single: dict = {}  # shape key -> its fastest call on one thread, this hold
        self._single_until = 0.0
        self._deciding = 0  # threaded calls of noted shapes still to beat one thread
        self._hold = self.HOLD_SECONDS
        self._last_stall = float("-inf")
        self._no_trial_until = 0.0
        self._backoff = self.TRIAL_BACKOFF_SECONDS
        self.stalls = 0  # (counted, for tests and curiosity)

    def run(self, key, call) -> None:
        """Runs ``call()``, a BLAS product of a shape named by ``key``, as above."""
        start = time.perf_counter()
        if start < self._single_until:
            with one_blas_thread:
                call()
            seconds = time.perf_counter() - start
            if seconds < self._single.get(key, float("inf")):
                self._single[key] = seconds
            return
        if self.threads is None:
            self.threads = blas_thread_count() or 1
        judged = 1 < self.threads <= self.MAX_THREADS and \
            self._last.get(key, self.MIN_SECONDS) >= self.MIN_SECONDS
        cpu = time.process_time() if judged else 0.0
        call()
        end = time.perf_counter()
        wall = end - start
        self._last[key] = wall
        fastest = self._fastest.get(key, float("inf"))
        if wall < fastest:
            self._fastest[key] = wall
        if self._deciding and key in self._single:
            if wall > self._single[key]:  # one thread did better: hold longer
                self._backoff = self.TRIAL_BACKOFF_SECONDS
                self._start_hold(end, min(2 * self._hold, self.HOLD_MAX_SECONDS))
                return
            self._deciding -= 1
            if not self._deciding:  # the threads did better: no trial for a while
                self._hold = self.HOLD_SECONDS
                self._no_trial_until = end + self._backoff
                self._backoff = min(2 * self._backoff, self.TRIAL_BACKOFF_MAX_SECONDS)
            return
        if self._deciding and end - self._single_until > self.HOLD_MAX_SECONDS:
            self._deciding = 0  # (the noted shapes stopped coming)
        if not judged or wall < self.MIN_SECONDS or wall < self.SLOWDOWN * fastest or \
                time.process_time() - cpu >= self.BUSY_FRACTION * self.threads * wall:
            return
        self.stalls += 1
        if end - self._last_stall <= self.STALL_WINDOW_SECONDS and \
                end >= self._no_trial_until and not self._deciding:
            self._start_hold(end, self.HOLD_SECONDS)
        self._last_stall = end

    def _start_hold(self, now: float, seconds: float) -> None:
        self._hold = seconds
        self._single_until = now + seconds
        self._single.clear()
        self._deciding = self.DECIDING_CALLS


blas_stall_guard = StallGuard()
