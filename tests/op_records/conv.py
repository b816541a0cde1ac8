"""Records for convolutions (lax.conv_general_dilated and friends), with a slow-loop NumPy
reference (pooling windows are in ``windowed.py``)."""

import itertools

import numpy as np

from ember import lax
from tests.op_records.base import OpRecord

F32 = (np.dtype("float32"),)


def conv_ref(x, w, strides, pads, lhs_dil=None, rhs_dil=None, groups=1):
    """NCHW/OIHW convolution by loops over output positions (float64)."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    nsp = x.ndim - 2
    lhs_dil = lhs_dil or (1,) * nsp
    rhs_dil = rhs_dil or (1,) * nsp
    # Dilate and pad the input explicitly (negative pads crop).
    dil = np.zeros(x.shape[:2] + tuple((n - 1) * d + 1 for n, d in zip(x.shape[2:], lhs_dil)))
    dil[(slice(None),) * 2 + tuple(slice(None, None, d) for d in lhs_dil)] = x
    for i, (lo, hi) in enumerate(pads):
        ax = i + 2
        dil = np.pad(dil, [(0, 0)] * ax + [(max(lo, 0), max(hi, 0))] + [(0, 0)] * (nsp - i - 1))
        dil = np.take(dil, range(max(-lo, 0), dil.shape[ax] - max(-hi, 0)), axis=ax)
    ks = w.shape[2:]
    eff = [(k - 1) * d + 1 for k, d in zip(ks, rhs_dil)]
    out_sp = [max(0, (p - e) // s + 1) for p, e, s in zip(dil.shape[2:], eff, strides)]
    o = w.shape[0]
    og = o // groups
    out = np.zeros((x.shape[0], o) + tuple(out_sp))
    for pos in itertools.product(*map(range, out_sp)):
        idx = tuple(slice(p * s, p * s + e, d) for p, s, e, d in zip(pos, strides, eff, rhs_dil))
        patch = dil[(slice(None), slice(None)) + idx]  # (N, C, K...)
        for g in range(groups):
            pg = patch[:, g * w.shape[1]:(g + 1) * w.shape[1]]
            wg = w[g * og:(g + 1) * og]
            out[(slice(None), slice(g * og, (g + 1) * og)) + pos] = np.tensordot(
                pg, wg, axes=(list(range(1, pg.ndim)), list(range(1, wg.ndim))))
    return out


RECORDS = [
    OpRecord("lax.conv_general_dilated",
             lambda x, w: lax.conv_general_dilated(x, w, (2, 1), [(1, 0), (0, 2)],
                                                   rhs_dilation=(1, 2)),
             lambda x, w: conv_ref(x, w, (2, 1), [(1, 0), (0, 2)], rhs_dil=(1, 2)),
             F32, (((2, 3, 5, 4), (2, 3, 2, 2)),), differentiable=True, kind="lax", tol=1e-4),
    OpRecord("lax.conv_general_dilated_groups",
             lambda x, w: lax.conv_general_dilated(x, w, (1,), [(2, 1)], lhs_dilation=(2,),
                                                   feature_group_count=2),
             lambda x, w: conv_ref(x, w, (1,), [(2, 1)], lhs_dil=(2,), groups=2),
             F32, (((2, 4, 5), (4, 2, 3)),), differentiable=True, kind="lax", tol=1e-4),
    OpRecord("lax.conv",
             lambda x, w: lax.conv(x, w, (1, 1), "SAME"),
             lambda x, w: conv_ref(x, w, (1, 1), [(1, 1), (1, 1)]),
             F32 + (np.dtype("int32"),), (((1, 2, 4, 4), (3, 2, 3, 3)),), differentiable=True,
             kind="lax", tol=1e-4),
]


def _patches_ref(x, filter_shape):
    # Each output feature c * prod(filter_shape) + k is input channel c at window offset k.
    c, k = x.shape[1], int(np.prod(filter_shape))
    w = np.eye(c * k).reshape(c * k, c, *filter_shape)
    return conv_ref(x, w, (1,) * len(filter_shape), [(0, 0)] * len(filter_shape))


RECORDS += [
    OpRecord("lax.conv_with_general_padding",
             lambda x, w: lax.conv_with_general_padding(x, w, (1, 2), [(1, 1), (0, 1)],
                                                        (1, 1), (2, 1)),
             lambda x, w: conv_ref(x, w, (1, 2), [(1, 1), (0, 1)], rhs_dil=(2, 1)),
             F32, (((1, 2, 5, 4), (3, 2, 2, 2)),), differentiable=True, kind="lax", tol=1e-4),
    OpRecord("lax.conv_transpose",
             lambda x, w: lax.conv_transpose(x, w, (2,), "VALID",
                                             dimension_numbers=("NCH", "OIH", "NCH")),
             lambda x, w: conv_ref(x, w, (1,), [(2, 2)], lhs_dil=(2,)),
             F32, (((2, 3, 4), (2, 3, 3)),), differentiable=True, kind="lax", tol=1e-4),
    OpRecord("lax.conv_general_dilated_patches",
             lambda x: lax.conv_general_dilated_patches(x, (2, 2), (1, 1), "VALID"),
             lambda x: _patches_ref(x, (2, 2)),
             F32, (((2, 3, 4, 3),),), differentiable=True, kind="lax", tol=1e-4),
]
