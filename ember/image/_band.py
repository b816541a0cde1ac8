"""Resampling along one dimension as a short weighted sum of shifted copies (taps).

A resize weight matrix (input size m, output size n) is banded: output pixel i only reads
the few input pixels its kernel covers. When the matrix is known at trace time (a resize's
scale is a Python number), contracting the image with it as a dense dot spends m
multiply-adds per output where a handful carry weight; gathering those few inputs instead
costs a handful, in loops the backend fuses with the gathers. The values are the dense
dot's when the input is finite: the dropped terms are exact zeros. (A non-finite input the
dot spreads along its whole line, ``0 * inf = nan``; the caller keeps the dot for that
case. Only an inf that finite inputs overflow to between two passes stays local here.)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

import ember.numpy as jnp

# Above this many taps per output a pass is left to the dot. Measured on (8, 224, 224, 3)
# images, 48 taps (lanczos3 to 1/8) still run ~15x faster than ember's dot; the bound keeps
# the program (one gather per tap) small.
MAX_TAPS = 64
# A gather reads a run of contiguous elements per tap; under this many (the channels of a
# channel-last image) the loop is scalar and each tap costs about SHORT_RUN_COST times more.
SHORT_RUN = 8
SHORT_RUN_COST = 8
# How much cheaper a dense dot's multiply-add is than a gathered tap (a packed GEMM kernel).
DOT_SPEEDUP = 4


def band(w: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The taps of the (m, n) weight matrix ``w``, or None when it is not narrow enough.

    Returns ``(index, taps)``, both (K, n): output i is ``sum_k taps[k, i] *
    x[index[k, i]]``, with ``index[:, i]`` the K consecutive inputs from ``index[0, i]``
    covering every nonzero of column i, all inside [0, m).
    """
    m, n = w.shape
    if m == 0 or n == 0:
        return None
    nonzero = w != 0
    used = nonzero.any(axis=0)
    first = np.where(used, nonzero.argmax(axis=0), 0)
    last = np.where(used, m - 1 - nonzero[::-1].argmax(axis=0), 0)
    k = int((last - first).max()) + 1
    if k > MAX_TAPS or k > m:
        return None
    start = np.clip(first, 0, m - k)  # keeps [first, last] inside [start, start + k)
    index = (start[None, :] + np.arange(k)[:, None]).astype(np.int32)
    return index, np.take_along_axis(w, index, axis=0)


def order(shape: Sequence[int], dims: Sequence[int], sizes: Sequence[int],
          bands: Sequence[tuple | None]) -> tuple[int, ...]:
    """The order (positions in ``dims``) in which to resample, cheapest by a cost estimate.

    The passes commute (up to rounding), but their costs differ: a pass costs its output
    size times its taps, and a pass over a dimension with few elements behind it (the width
    of a channel-last image) gathers element by element, so it should run while the image
    is small: first when upsampling, last when downsampling. ``sizes`` are the output sizes;
    a pass without a band (None) is a dot over the whole input dimension.
    """
    if len(dims) > 4:  # 24 orders at most
        return tuple(range(len(dims)))

    def cost(perm):
        current, total = list(shape), 0
        for i in perm:
            d = dims[i]
            m, current[d] = current[d], sizes[i]
            out, run = math.prod(current), math.prod(current[d + 1:])
            if bands[i] is None:
                total += out * m / DOT_SPEEDUP
            else:
                taps = len(bands[i][0]) * (SHORT_RUN_COST if run < SHORT_RUN else 1)
                total += out * (1 + taps)
        return total

    return min(itertools.permutations(range(len(dims))), key=cost)


def resample(x, d: int, index: np.ndarray, taps: np.ndarray, last: bool = True):
    """``x`` contracted along dimension ``d`` with the weight matrix ``band`` took apart.

    Equals ``moveaxis(tensordot(x, w, [[d], [0]]), -1, d)`` up to rounding for a finite
    ``x`` (the dot's other terms are exact zeros). Narrow floats are summed in float32, as
    the dot accumulates them; the weights are rounded to ``x``'s dtype first, as the dot's.

    Unless ``last``, the taps are summed by a reduction: it ends the fused loop, so the next
    pass reads this one's result instead of recomputing all its taps for each of its own.
    """
    acc = np.promote_types(x.dtype, np.float32)
    k, n = index.shape
    if not last:
        shape = [1] * (x.ndim + 1)
        shape[d:d + 2] = n, k
        w = taps.T.astype(x.dtype).astype(acc).reshape(shape)
        gathered = jnp.take(x, index.T, axis=d, mode="clip").astype(acc)
        return jnp.sum(gathered * w, axis=d + 1).astype(x.dtype)
    shape = [1] * x.ndim
    shape[d] = n
    out = None
    for i in range(k):
        w = taps[i].astype(x.dtype).astype(acc).reshape(shape)
        term = jnp.take(x, index[i], axis=d, mode="clip").astype(acc) * w
        out = term if out is None else out + term
    return out.astype(x.dtype)
