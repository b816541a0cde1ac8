"""Records for ember.scipy.signal/fft/ndimage/integrate (references: NumPy loops and
formulas written from the definitions)."""

import itertools

import numpy as np

import ember.scipy.fft as sfft
import ember.scipy.integrate as sint
import ember.scipy.ndimage as snd
import ember.scipy.signal as ssig
from tests.op_records.base import OpRecord

F32 = (np.dtype("float32"),)


def _conv_full(a, b):
    """Full N-d convolution by summing shifted copies of ``a`` (float64)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    out = np.zeros([p + q - 1 for p, q in zip(a.shape, b.shape)])
    for idx in itertools.product(*[range(n) for n in b.shape]):
        sl = tuple(slice(i, i + n) for i, n in zip(idx, a.shape))
        out[sl] += b[idx] * a
    return out


def _cut(full, s1, s2, mode):
    """SciPy's 'same' (centred, in1's size) and 'valid' windows of a full result."""
    if mode == "full":
        return full
    size = s1 if mode == "same" else [abs(p - q) + 1 for p, q in zip(s1, s2)]
    sl = tuple(slice((f - o) // 2, (f - o) // 2 + o) for f, o in zip(full.shape, size))
    return full[sl]


def _convolve_ref(mode):
    return lambda a, b: _cut(_conv_full(a, b), a.shape, b.shape, mode).astype(np.float32)


def _correlate2d_ref(mode):
    # For real inputs in1 >= in2, correlate2d is the convolution with the flipped in2,
    # except that SciPy centres 'same' on the flipped problem: flip, convolve, flip back.
    def ref(a, b):
        if mode == "same":
            full = _conv_full(a[::-1, ::-1], b)
            return _cut(full, a.shape, b.shape, mode)[::-1, ::-1].astype(np.float32)
        return _cut(_conv_full(a, b[::-1, ::-1]), a.shape, b.shape, mode).astype(np.float32)
    return ref


def _dct_ref(norm):
    def ref(x):
        n = x.shape[-1]
        k = np.arange(n)
        mat = 2 * np.cos(np.pi * k[:, None] * (2 * k[None, :] + 1) / (2 * n))
        if norm == "ortho":
            mat[0] *= np.sqrt(1 / (4 * n))
            mat[1:] *= np.sqrt(1 / (2 * n))
        return (x.astype(np.float64) @ mat.T).astype(np.float32)
    return ref


def _idct_ref(x):
    n = x.shape[-1]
    k = np.arange(n)
    mat = 2 * np.cos(np.pi * k[:, None] * (2 * k[None, :] + 1) / (2 * n))
    return (x.astype(np.float64) @ np.linalg.inv(mat.T)).astype(np.float32)


def _map_coordinates_ref(mode):
    """Multilinear interpolation at each point, by a loop over points and corners."""
    def ref(x, coords):
        x = x.astype(np.float64)
        out = np.zeros(coords.shape[1:])
        for p in np.ndindex(*coords.shape[1:]):
            c = [coords[(d,) + p] for d in range(x.ndim)]
            total = 0.0
            for corner in itertools.product((0, 1), repeat=x.ndim):
                idx, w = [], 1.0
                for d, (cd, up) in enumerate(zip(c, corner)):
                    i = int(np.floor(cd)) + up
                    w *= (cd - np.floor(cd)) if up else 1 - (cd - np.floor(cd))
                    idx.append(min(max(i, 0), x.shape[d] - 1))
                    if mode == "constant" and not 0 <= i < x.shape[d]:
                        w = 0.0
                total += w * x[tuple(idx)]
            out[p] = total
        return out.astype(np.float32)
    return ref


def _mc(mode):
    return lambda x, c: snd.map_coordinates(x, list(c), order=1, mode=mode)


def _idctn_ref(y):
    # The inverse of the 2-d DCT: each axis's DCT matrix inverted.
    inv = [np.linalg.inv(2 * np.cos(np.pi * np.arange(n)[:, None]
                                    * (2 * np.arange(n)[None, :] + 1) / (2 * n)))
           for n in y.shape]
    return (inv[0] @ y.astype(np.float64) @ inv[1].T).astype(np.float32)


def _detrend_ref(x):
    t = np.arange(x.shape[-1])
    slope, intercept = np.polyfit(t, x.astype(np.float64), 1)
    return (x - (slope * t + intercept)).astype(np.float32)


RECORDS = []
for _mode in ("full", "same", "valid"):
    RECORDS += [
        OpRecord(f"scipy.signal.convolve_{_mode}",
                 (lambda m: lambda a, b: ssig.convolve(a, b, m))(_mode), _convolve_ref(_mode),
                 F32, (((7,), (3,)), ((4, 5), (2, 3))), differentiable=True, tol=1e-4),
        OpRecord(f"scipy.signal.correlate2d_{_mode}",
                 (lambda m: lambda a, b: ssig.correlate2d(a, b, m))(_mode),
                 _correlate2d_ref(_mode), F32, (((4, 5), (2, 3)), ((3, 3), (3, 2))),
                 differentiable=True, tol=1e-4),
    ]

RECORDS += [
    OpRecord("scipy.signal.fftconvolve", lambda a, b: ssig.fftconvolve(a, b),
             _convolve_ref("full"), F32, (((6,), (3,)), ((3, 4), (2, 2))),
             differentiable=True, tol=1e-4),
    OpRecord("scipy.fft.dct", lambda x: sfft.dct(x), _dct_ref(None), F32,
             (((5,),), ((3, 4),)), differentiable=True, tol=1e-4),
    OpRecord("scipy.fft.dct_ortho", lambda x: sfft.dct(x, norm="ortho"), _dct_ref("ortho"),
             F32, (((6,),), ((2, 3),)), differentiable=True, tol=1e-4),
    OpRecord("scipy.fft.idct", lambda x: sfft.idct(x), _idct_ref, F32, (((5,),), ((2, 4),)),
             differentiable=True, tol=1e-4),
    OpRecord("scipy.fft.dctn", lambda x: sfft.dctn(x),
             lambda x: _dct_ref(None)(np.swapaxes(_dct_ref(None)(x), 0, 1)).T, F32,
             (((3, 4),),), differentiable=True, tol=1e-3),
    OpRecord("scipy.fft.idctn", lambda y: sfft.idctn(y), _idctn_ref, F32, (((3, 4),),),
             differentiable=True, tol=1e-3),
    OpRecord("scipy.signal.convolve2d", lambda a, b: ssig.convolve2d(a, b),
             _convolve_ref("full"), F32, (((4, 5), (2, 3)),), differentiable=True, tol=1e-4),
    OpRecord("scipy.signal.detrend", lambda x: ssig.detrend(x), _detrend_ref, F32,
             (((8,),),), differentiable=True, tol=1e-4),
    OpRecord("scipy.ndimage.map_coordinates_linear", _mc("nearest"),
             _map_coordinates_ref("nearest"), F32, (((4, 5), (2, 6)), ((5,), (1, 3, 2))),
             arg_rngs={1: "nonneg"}, differentiable=True, tol=1e-4),
    OpRecord("scipy.ndimage.map_coordinates_constant", _mc("constant"),
             _map_coordinates_ref("constant"), F32, (((4, 5), (2, 6)),),
             arg_rngs={1: "nonneg"}, differentiable=True, tol=1e-4),
    OpRecord("scipy.integrate.trapezoid", lambda y: sint.trapezoid(y, dx=0.5),
             lambda y: np.trapezoid(y.astype(np.float64), dx=0.5).astype(np.float32), F32,
             (((5,),), ((2, 4),)), differentiable=True, tol=1e-5),
    OpRecord("scipy.integrate.trapezoid_x", lambda y, x: sint.trapezoid(y, x, axis=0),
             lambda y, x: np.trapezoid(y.astype(np.float64), x.astype(np.float64),
                                       axis=0).astype(np.float32),
             F32, (((4, 3), (4,)),), differentiable=True, tol=1e-4),
]
