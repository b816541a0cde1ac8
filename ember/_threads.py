"""A pool of worker threads that run ranges of work in parallel: the CPU backend's kernel
ranges, and library kernels' pieces (convolution chunks). Below every layer (it imports
nothing from ember), so ``lax`` kernels share it with the backend.

Kernel calls go through cffi and NumPy/BLAS calls release the GIL, so threads really run at
once. The calling thread takes the first range itself; the others go to the workers.

Example:
    >>> pool().run(lambda lo, hi: kernel(bufs, lo, hi), split(extent, pool().size))
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

_POOL = None
_LOCK = threading.Lock()


def cpu_count() -> int:
    """Cores this process may run on (``EMBER_NUM_THREADS`` overrides)."""
    env = os.environ.get("EMBER_NUM_THREADS")
    if env:
        return max(1, int(env))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class Pool:
    """``size`` threads: ``size - 1`` workers plus the caller."""

    def __init__(self, size: int):
        self.size = size
        self._executor = ThreadPoolExecutor(max(size - 1, 1), "ember-cpu") if size > 1 \
            else None

    def run(self, fn: Callable[[int, int], None], ranges: list[tuple[int, int]]) -> None:
        """Calls ``fn(lo, hi)`` for every range, in parallel; returns when all are done.
        Called from one of the pool's own workers (work nested in a range), it runs the
        ranges itself: waiting there for the other workers could wait for itself."""
        if self._executor is None or len(ranges) == 1 or getattr(_worker, "busy", False):
            for lo, hi in ranges:
                fn(lo, hi)
            return
        futures = [self._executor.submit(_as_worker, fn, lo, hi) for lo, hi in ranges[1:]]
        fn(*ranges[0])
        for f in futures:
            f.result()


_worker = threading.local()  # busy: this thread is one of a pool's workers, inside a range


def _as_worker(fn: Callable[[int, int], None], lo: int, hi: int) -> None:
    _worker.busy = True
    try:
        fn(lo, hi)
    finally:
        _worker.busy = False


def _forget_in_child() -> None:
    """A forked child has none of the pool's threads (its executor would count the parent's
    as running and start none, leaving the child's work queued forever): it makes its own
    pool when it needs one."""
    global _POOL, _LOCK
    _POOL, _LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def pool() -> Pool:
    global _POOL
    if _POOL is None:
        with _LOCK:
            if _POOL is None:
                _POOL = Pool(cpu_count())
    return _POOL


def split(extent: int, parts: int) -> list[tuple[int, int]]:
    """``[0, extent)`` cut into ``parts`` nearly equal non-empty ranges."""
    parts = max(1, min(parts, extent))
    base, extra = divmod(extent, parts)
    out, lo = [], 0
    for i in range(parts):
        hi = lo + base + (1 if i < extra else 0)
        out.append((lo, hi))
        lo = hi
    return out
