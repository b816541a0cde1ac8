"""Resampling along one dimension as a short weighted sum of shifted copies (taps).

A resize weight matrix (input size m, output size n) is banded: output pixel i only reads
the few input pixels its kernel covers. When the matrix is known at trace time (a resize's
scale is a Python number), contracting the image with it as a dense dot spends m
multiply-adds per output where a handful carry weight; gathering those few inputs instead
lets the whole resize fuse into one elementwise loop. The values are the dense dot's
when the input is finite: the dropped terms are exact zeros. (A non-finite input the dot
spreads along its whole line, ``0 * inf = nan``; the caller keeps the dot for that case.)
"""

from __future__ import annotations

import numpy as np

import ember.numpy as jnp

# Above this many taps per output the gathers cost more than the dot's few extra columns.
MAX_TAPS = 24


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


def resample(x, d: int, index: np.ndarray, taps: np.ndarray):
    """``x`` contracted along dimension ``d`` with the weight matrix ``band`` took apart.

    Equals ``moveaxis(tensordot(x, w, [[d], [0]]), -1, d)`` up to rounding for a finite
    ``x`` (the dot's other terms are exact zeros). Narrow floats are summed in float32, as
    the dot accumulates them; the weights are rounded to ``x``'s dtype first, as the dot's.
    """
    acc = np.promote_types(x.dtype, np.float32)
    shape = [1] * x.ndim
    shape[d] = index.shape[1]
    out = None
    for k in range(index.shape[0]):
        w = taps[k].astype(x.dtype).astype(acc).reshape(shape)
        term = jnp.take(x, index[k], axis=d, mode="clip").astype(acc) * w
        out = term if out is None else out + term
    return out.astype(x.dtype)
