"""Reuse of large buffers: outputs and arenas of compiled programs.

A fresh large NumPy array is fresh memory from the operating system (``malloc`` maps big
blocks and unmaps them when freed), so every call that allocates a 40 MB output pays for
zeroing ~10,000 pages on first touch: a third of the run time of a memory-bound kernel.
``empty(shape, dtype)`` hands out arrays of at least ``MIN_BYTES`` whose memory comes back
to this pool when the last array (or view) using it is gone, and serves later requests of
the same size from it. Smaller requests are plain ``np.empty``. ``MIN_BYTES`` is 256 KiB:
``malloc`` returned freed blocks of 0.5-1 MiB to the system between calls here, so a jitted
``a + b`` on 1e6 int8 took 214 page faults per call (0.37 ms against 0.06 from the pool),
while a pooled array costs ~2 µs more than ``np.empty`` (``allocator`` does the size
arithmetic once for a caller that allocates the same array on every call).

The pool keeps at most ``PER_SIZE`` idle buffers of one size and ``capacity()`` bytes in all
(``EMBER_CPU_BUFFER_POOL_BYTES``, default 512 MiB; 0 turns reuse off); ``clear()`` frees
every idle buffer. ``PER_SIZE`` is large: an optimizer step over a model's parameters makes
dozens of outputs of one size (48 of 1 MiB in an Adam step over 8 transformer layers), and
with four kept per size the rest were fresh memory on every call (11.5 ms a step, 5.5 with
all of them reused); the capacity is the real bound. Buffers are 64-byte aligned. A buffer
given back to a full pool makes room by freeing the buffers idle longest: a process that
ran many programs keeps the sizes its current ones use (when a full pool turned new sizes
away, a pooling gradient took 0.65 ms a call in fresh huge pages, against 0.18 from the
pool).

Fresh pooled memory is mapped for transparent huge pages where the system offers them
(``MADV_HUGEPAGE``): its first touch then costs one fault per 2 MiB instead of one per 4 KiB
page (8 MiB: ~0.9 ms instead of ~5 ms on a virtual machine), which is most of a program's
first run after a warm start. Memory past a buffer's last whole huge page faults in 4 KiB
pages, each ~2.5 µs on a virtual machine (16x a huge page's cost per byte: first touch of
1 MiB, 0.65 ms against 0.09), so a tail of at least ``MIN_HUGE_TAIL`` (512 KiB) is rounded
up to a huge page of its own: a 1 MiB buffer (a 512x512 float32 weight) takes one huge page,
at the price of 1 MiB more memory, while the 0.1 MiB tail of a 2.1 MiB buffer stays in
4 KiB pages. (Without the rounding, whether a tail could take a huge page depended on where
the map landed.)

Example:
    >>> out = empty((4096, 1024), np.float32)   # pooled: 16 MiB
    >>> del out                                  # its memory is idle in the pool
    >>> again = empty((4096, 1024), np.float32)  # the same memory, no page faults
"""

from __future__ import annotations

import functools
import math
import mmap
import os
import threading
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

MIN_BYTES = 1 << 18
PER_SIZE = 256
ALIGN = 64
_PAGE = 4096
HUGE_PAGE = 2 << 20
_HUGE_PAGES = hasattr(mmap, "MADV_HUGEPAGE") and hasattr(mmap, "MAP_ANONYMOUS")
# The shortest tail (the part of a buffer past its last whole huge page) rounded up to a huge
# page of its own: shorter tails take 4 KiB pages (see the module doc).
MIN_HUGE_TAIL = HUGE_PAGE // 4

_lock = threading.RLock()  # (re-entrant: a lease may die in a collection run under it)
_idle: dict[int, list[tuple[np.ndarray, int]]] = {}
# Every idle buffer, by ``id`` of its array, the longest idle first: (size, block).
_idle_order: OrderedDict[int, tuple[int, tuple[np.ndarray, int]]] = OrderedDict()
_idle_bytes = 0
_capacity: int | None = None


def capacity() -> int:
    """The most bytes the pool keeps idle."""
    global _capacity
    if _capacity is None:
        value = os.environ.get("EMBER_CPU_BUFFER_POOL_BYTES", str(512 << 20))
        try:
            _capacity = max(0, int(value))
        except ValueError:
            raise ValueError(f"EMBER_CPU_BUFFER_POOL_BYTES must be an integer number of "
                             f"bytes, got {value!r}") from None
    return _capacity


class _Lease:
    """Owns one pooled buffer while arrays use it: the arrays ``empty`` returns are views
    whose base chain ends here, so this object dies with the last of them and gives the
    buffer back."""

    __slots__ = ("block", "__array_interface__")

    def __init__(self, block: tuple[np.ndarray, int], shape: tuple, typestr: str):
        self.block = block
        self.__array_interface__ = {"data": (block[1], False), "shape": shape,
                                    "typestr": typestr, "version": 3}

    def __del__(self):
        try:
            _release(self.block)
        except Exception:  # noqa: BLE001 - (interpreter shutdown: the module may be gone)
            pass


def _size_class(nbytes: int) -> int:
    return -(-nbytes // _PAGE) * _PAGE


def _release(block: tuple[np.ndarray, int]) -> None:
    global _idle_bytes
    size = block[0].nbytes
    with _lock:
        bucket = _idle.setdefault(size, [])
        if len(bucket) >= PER_SIZE or size > capacity():
            return
        while _idle_bytes + size > capacity():  # (free the buffers idle longest)
            old_size, old = _idle_order.popitem(last=False)[1]
            old_bucket = _idle[old_size]
            del old_bucket[next(i for i, b in enumerate(old_bucket) if b is old)]
            _idle_bytes -= old_size
        bucket.append(block)
        _idle_order[id(block[0])] = (size, block)
        _idle_bytes += size


def _acquire(size: int) -> tuple[np.ndarray, int]:
    """A buffer of ``size`` bytes and its first ``ALIGN``-aligned address."""
    global _idle_bytes
    with _lock:
        bucket = _idle.get(size)
        if bucket:
            _idle_bytes -= size
            block = bucket.pop()
            del _idle_order[id(block[0])]
            return block
    raw = _fresh(size)
    address = raw.ctypes.data
    return raw, address + -address % ALIGN


def _fresh(size: int) -> np.ndarray:
    """``size`` bytes of new memory, on huge pages where possible (see the module doc)."""
    if not _HUGE_PAGES or size < HUGE_PAGE // 2:
        return np.empty(size, np.uint8)
    whole = -(-size // HUGE_PAGE) * HUGE_PAGE
    tail = size % HUGE_PAGE
    length = whole if tail == 0 or tail >= MIN_HUGE_TAIL else size
    try:
        # (Private: a shared anonymous map would be shared memory, which has its own, usually
        # disabled, huge page setting. One huge page more than needed, so the buffer can
        # start on a huge page boundary.)
        region = mmap.mmap(-1, length + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        region.madvise(mmap.MADV_HUGEPAGE)
    except (OSError, ValueError):
        return np.empty(size, np.uint8)
    whole_map = np.frombuffer(region, np.uint8)  # (keeps ``region`` mapped while it lives)
    start = -whole_map.ctypes.data % HUGE_PAGE
    return whole_map[start:start + size]


def nbytes_of(shape, dtype) -> int:
    count = int(shape) if isinstance(shape, (int, np.integer)) else math.prod(shape)
    return count * np.dtype(dtype).itemsize


def pooled(nbytes: int) -> bool:
    """Whether ``empty`` takes arrays of ``nbytes`` from the pool."""
    return nbytes >= MIN_BYTES and capacity() > 0


def empty(shape, dtype) -> np.ndarray:
    """An uninitialized C-contiguous array, from the pool when it is large."""
    return allocator(shape, dtype)()


def allocator(shape, dtype) -> Callable[[], np.ndarray]:
    """A function of no arguments returning ``empty(shape, dtype)``: the size and layout
    are worked out once, for a caller that allocates the same array on every call."""
    dtype = np.dtype(dtype)
    nbytes = nbytes_of(shape, dtype)
    if not pooled(nbytes):
        return functools.partial(np.empty, shape, dtype)
    size = _size_class(nbytes) + ALIGN
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if dtype.isbuiltin == 1:  # (the array interface names NumPy's own dtypes exactly)
        typestr = dtype.str

        def allocate():
            return np.asarray(_Lease(_acquire(size), shape, typestr))
    else:
        def allocate():
            data = np.asarray(_Lease(_acquire(size), (nbytes,), "|u1"))
            return data.view(dtype).reshape(shape)
    return allocate


def idle_bytes() -> int:
    """Bytes held idle by the pool now."""
    return _idle_bytes


def clear() -> None:
    """Frees every idle buffer."""
    global _idle_bytes
    with _lock:
        _idle.clear()
        _idle_order.clear()
        _idle_bytes = 0
