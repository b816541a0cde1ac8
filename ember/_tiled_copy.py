"""Copies of transposed views in tiles (``copy_tiled``), for the CPU backend's outputs and
the LAPACK kernels' column-major operands."""

from __future__ import annotations

import math

import numpy as np

# The side, in elements, of the tiles ``copy_tiled`` copies a transposed view in; arrays of
# at most SMALL_TILED_COPY_MAX elements take tiles of SMALL_COPY_TILE (a 256 x 256 float32
# transpose: 67 us in one NumPy copy, 35 in 64 x 64 tiles; past ~64 tiles, their Python
# loop costs more than the larger tiles lose: (2000, 300) 0.23 ms in tiles of 256, 0.33
# in tiles of 64).
COPY_TILE = 256
SMALL_COPY_TILE = 64
SMALL_TILED_COPY_MAX = 1 << 18
# A view whose fastest-varying axis has at most this many elements (a cache line of
# float32), or whose last axis is at most a tile long, is copied in one NumPy copy: the
# lines it reads for a run of the output stay in cache for the next runs, and tiles would
# only add their Python loop (the transposed copy of a (1000, 10) float32 matrix: 12 us in
# tiles, 3 in one copy; (100000, 3) 341 against 88; (3, 100000) 704 against 324).
SHORT_FASTEST_AXIS = 16


def copy_tiled(out: np.ndarray, a: np.ndarray) -> None:
    """``np.copyto(out, a)`` for a C-contiguous ``out``, in square tiles where ``a``'s
    fastest-varying axis is not its last. NumPy's copy walks ``a`` in ``out``'s order, so a
    transposed view is read one element per cache line: (4096, 1024) float32 from a
    transpose took ~30 ms, in tiles of 256 x 256 (whose lines stay in cache while a tile is
    copied) ~5.6 ms, a plain copy ~1.2 ms."""
    last = a.ndim - 1
    if last < 1:
        np.copyto(out, a)
        return
    fastest = min(range(a.ndim), key=lambda d: abs(a.strides[d]) if a.shape[d] > 1
                  else math.inf)
    tile = SMALL_COPY_TILE if a.size <= SMALL_TILED_COPY_MAX else COPY_TILE
    if fastest == last or a.shape[fastest] <= SHORT_FASTEST_AXIS or a.shape[last] <= tile:
        np.copyto(out, a)
        return
    index = [slice(None)] * a.ndim
    for i in range(0, a.shape[fastest], tile):
        index[fastest] = slice(i, i + tile)
        for j in range(0, a.shape[last], tile):
            index[last] = slice(j, j + tile)
            out[tuple(index)] = a[tuple(index)]
