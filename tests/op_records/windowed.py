"""Records for windowed reductions (lax.reduce_window: sum, max, min and a generic reducer),
with a slow-loop NumPy reference."""

import itertools

import numpy as np

from ember import lax
from tests.op_records.base import OpRecord

F32 = (np.dtype("float32"),)


def window_ref(x, init, op, dims, strides, pads, base_dil=None, win_dil=None):
    """``reduce_window`` by a loop over output positions and window offsets (row-major,
    from ``init``); ``op`` is a binary NumPy function."""
    nd = x.ndim
    base_dil = base_dil or (1,) * nd
    win_dil = win_dil or (1,) * nd
    dil_shape = tuple((n - 1) * b + 1 if n else 0 for n, b in zip(x.shape, base_dil))
    valid = np.zeros(dil_shape, bool)
    full = np.zeros(dil_shape, x.dtype)
    idx = tuple(slice(None, None, b) for b in base_dil)
    full[idx], valid[idx] = x, True
    eff = [(w - 1) * d + 1 for w, d in zip(dims, win_dil)]
    out_shape = [max(0, (n + lo + hi - e) // s + 1) if n + lo + hi >= e else 0
                 for n, (lo, hi), e, s in zip(dil_shape, pads, eff, strides)]
    out = np.full(out_shape, init, x.dtype)
    for pos in itertools.product(*map(range, out_shape)):
        acc = np.asarray(init, x.dtype)
        for off in itertools.product(*map(range, dims)):
            src = tuple(p * s + k * d - lo for p, s, k, d, (lo, _) in
                        zip(pos, strides, off, win_dil, pads))
            if all(0 <= i < n for i, n in zip(src, dil_shape)) and valid[src]:
                acc = op(acc, full[src])
            else:
                acc = op(acc, np.asarray(init, x.dtype))
        out[pos] = acc
    return out


_PADS = ((0, 0), (1, 2), (1, 0))

RECORDS = [
    OpRecord("lax.reduce_window_sum",
             lambda x: lax.reduce_window(x, 0, lax.add, (1, 2, 3), (1, 2, 1), _PADS),
             lambda x: window_ref(x, 0, np.add, (1, 2, 3), (1, 2, 1), _PADS),
             F32 + (np.dtype("int32"),), (((2, 5, 4),),), differentiable=True, kind="lax",
             tol=1e-5),
    OpRecord("lax.reduce_window_max",
             lambda x: lax.reduce_window(x, -np.inf, lax.max, (2, 2), (2, 1), "SAME"),
             lambda x: window_ref(x, -np.inf, np.maximum, (2, 2), (2, 1), ((0, 1), (0, 1))),
             F32, (((5, 4),),), differentiable=True, kind="lax"),
    OpRecord("lax.reduce_window_min_dilated",
             lambda x: lax.reduce_window(x, np.inf, lax.min, (2, 2), (1, 1), ((1, 0), (0, 0)),
                                         window_dilation=(1, 2)),
             lambda x: window_ref(x, np.inf, np.minimum, (2, 2), (1, 1), ((1, 0), (0, 0)),
                                  win_dil=(1, 2)),
             F32, (((4, 5),),), kind="lax"),
    OpRecord("lax.reduce_window_min",
             lambda x: lax.reduce_window(x, np.inf, lax.min, (3,), (2,), ((1, 1),)),
             lambda x: window_ref(x, np.inf, np.minimum, (3,), (2,), ((1, 1),)),
             F32, (((7,),),), differentiable=True, kind="lax"),
    OpRecord("lax.reduce_window_generic",
             lambda x: lax.reduce_window(x, np.float32(1), lax.mul, (2, 2), (1, 1), "VALID",
                                         base_dilation=(2, 1)),
             lambda x: window_ref(x, 1, np.multiply, (2, 2), (1, 1), ((0, 0), (0, 0)),
                                  base_dil=(2, 1)),
             F32, (((3, 4),),), kind="lax"),
]
