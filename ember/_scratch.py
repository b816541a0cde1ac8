"""Large temporary arrays for library kernels written with NumPy (convolution's patch
matrices, padded inputs and results).

A fresh large NumPy array is fresh memory from the operating system, so a kernel that makes
tens of megabytes of temporaries pays their page faults on every call (on a virtual machine
each 4 KiB page can cost microseconds). A backend with a buffer pool registers its
allocator here (the CPU backend registers ``buffer_pool.empty``: reused, huge-page backed
memory); until one does, ``empty`` is ``np.empty``. Kept below every layer (it imports only
NumPy), so ``lax`` kernels use it without importing a backend.

Example:
    >>> buf = empty((1024, 1024), np.float32)  # uninitialized, maybe pooled
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

_empty: Callable = np.empty


def register_allocator(empty_fn: Callable) -> None:
    """Makes ``empty_fn(shape, dtype)`` (an uninitialized C-contiguous array) the allocator."""
    global _empty
    _empty = empty_fn


def empty(shape, dtype) -> np.ndarray:
    """An uninitialized C-contiguous array of ``shape`` and ``dtype``."""
    return _empty(shape, dtype)


def zeros(shape, dtype) -> np.ndarray:
    """A C-contiguous array of zeros of ``shape`` and ``dtype``."""
    out = _empty(shape, dtype)
    out.fill(0)
    return out


def copy(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``a``."""
    out = _empty(a.shape, a.dtype)
    np.copyto(out, a)
    return out
