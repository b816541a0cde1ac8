"""Records for ember.image.resize, against per-pixel NumPy loops written from the definition:
output pixel i of a dimension resized from m to n samples the input at
c = (i + 0.5) * m / n - 0.5 with kernel weights k(|c - j| / s) (s = max(m / n, 1) with
antialiasing, else 1), normalized to sum 1, and is 0 when c lies off [-0.5, m - 0.5].
JAX-oracle tests of every method and of scale_and_translate are in tests/test_image.py."""

import numpy as np

import ember.image
from tests.op_records.base import OpRecord

F32 = (np.dtype("float32"),)


def _keys_cubic(x):
    x = np.abs(x)
    return np.where(x < 1, (1.5 * x - 2.5) * x * x + 1,
                    np.where(x < 2, ((-0.5 * x + 2.5) * x - 4) * x + 2, 0.0))


def _lanczos3(x):
    x = np.abs(x)
    return np.where(x < 3, np.sinc(x) * np.sinc(x / 3), 0.0)


_KERNELS = {"linear": lambda x: np.maximum(0.0, 1 - np.abs(x)), "cubic": _keys_cubic,
            "lanczos3": _lanczos3}


def _resize_dim(x, axis, n, method, antialias):
    m = x.shape[axis]
    x = np.moveaxis(x.astype(np.float64), axis, -1)
    out = np.zeros(x.shape[:-1] + (n,))
    for i in range(n):
        if method == "nearest":
            out[..., i] = x[..., int(np.floor((i + 0.5) * m / n))]
            continue
        c = (i + 0.5) * m / n - 0.5
        if not -0.5 <= c <= m - 0.5:
            continue
        s = max(m / n, 1.0) if antialias else 1.0
        w = np.array([_KERNELS[method]((c - j) / s) for j in range(m)])
        out[..., i] = x @ (w / w.sum())
    return np.moveaxis(out, -1, axis)


def _ref(shape, method, antialias=True):
    def ref(x):
        for d, n in enumerate(shape):
            if x.shape[d] != n:
                x = _resize_dim(x, d, n, method, antialias)
        return x.astype(np.float32)
    return ref


def _rec(name, shape, method, in_shapes, antialias=True):
    return OpRecord(f"image.resize_{name}",
                    lambda x: ember.image.resize(x, shape, method, antialias=antialias),
                    _ref(shape, method, antialias), F32, in_shapes, differentiable=True,
                    tol=1e-4, kind="image")


RECORDS = [
    _rec("nearest", (5, 2), "nearest", (((3, 4),),)),
    _rec("linear_up", (5, 7), "linear", (((3, 4),),)),
    _rec("linear_antialias_down", (3, 2), "linear", (((6, 5),),)),
    _rec("linear_down", (3, 2), "linear", (((6, 5),),), antialias=False),
    _rec("cubic", (2, 7, 3), "cubic", (((2, 4, 6),),)),
    _rec("lanczos3_down", (4,), "lanczos3", (((9,),),)),
]
