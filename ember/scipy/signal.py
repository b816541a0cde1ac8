"""``jax.scipy.signal``: convolutions and correlations (direct and by FFT), detrending, and
the windowed-FFT estimators ``stft``/``istft``, ``csd`` and ``welch``.

Direct convolutions are one ``lax.conv_general_dilated`` (a cross-correlation, so the kernel
is flipped) with the padding of the requested mode; ``fftconvolve`` multiplies spectra from
``jnp.fft``. Inputs promote to an inexact dtype (integers and bools to float32), as in JAX.
Window names are computed here (SciPy is not a dependency): the periodic 'hann', 'hamming',
'blackman', 'bartlett' and 'boxcar' windows; any window may also be given as an array.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from ember import core, dtypes, lax
from ember import numpy as jnp
from ember.numpy._util import (
    canonicalize_axis,
    check_arraylike,
    ensure_array,
    promote_dtypes_inexact,
)

Array = Any
ArrayLike = Any
ModeString = Literal["full", "same", "valid"]

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d", "csd", "detrend",
           "fftconvolve", "istft", "stft", "welch"]

_MODES = ("full", "same", "valid")


# ---------------------------------------------------------------- direct convolution


def _conv_nd(in1: Array, in2: Array, mode: str, precision: Any) -> Array:
    """N-d convolution of two same-rank arrays, one at least as large as the other in every
    dimension; 'same' is the size of ``in1`` (centred as SciPy does)."""
    if mode not in _MODES:
        raise ValueError("mode must be one of ['full', 'same', 'valid']")
    if in1.ndim != in2.ndim:
        raise ValueError("in1 and in2 must have the same number of dimensions")
    if in1.size == 0 or in2.size == 0:
        raise ValueError("zero-size arrays not supported in convolutions, got shapes "
                         f"{in1.shape} and {in2.shape}.")
    in1, in2 = promote_dtypes_inexact(in1, in2)
    s1, s2 = in1.shape, in2.shape
    if all(a >= b for a, b in zip(s1, s2)):
        big, small = in1, in2
    elif all(a <= b for a, b in zip(s1, s2)):
        big, small = in2, in1
    else:
        raise ValueError("One input must be smaller than the other in every dimension.")
    k = small.shape
    if mode == "full":
        padding = [(n - 1, n - 1) for n in k]
    elif mode == "valid":
        padding = [(0, 0)] * len(k)
    else:
        # The full result starts (s2 - 1) // 2 in and is cut to in1's size.
        padding = []
        for n, b, a, o in zip(k, big.shape, s1, s2):
            lo = n - 1 - (o - 1) // 2
            padding.append((lo, a - b - lo + n - 1))
    out = lax.conv_general_dilated(big[None, None], jnp.flip(small)[None, None],
                                   (1,) * len(k), padding, precision=precision)
    return out[0, 0]


def _arrays(fn: str, *args: ArrayLike) -> list[Array]:
    check_arraylike(fn, *args)
    return [ensure_array(a) for a in args]


def convolve(in1: ArrayLike, in2: ArrayLike, mode: ModeString = "full", method: str = "auto",
             precision: Any = None) -> Array:
    """N-dimensional convolution of two arrays (``scipy.signal.convolve``).

    Args:
        in1: first input.
        in2: second input, of the same rank; one input must be at least as large as the
            other in every dimension.
        mode: 'full' (every overlap), 'same' (the size of ``in1``, centred) or 'valid' (only
            full overlaps).
        method: 'auto' or 'direct' (a ``lax.conv_general_dilated``), or 'fft'
            (``fftconvolve``).
        precision: the ``lax.Precision`` of the direct convolution.

    Returns:
        the convolution, in the inputs' promoted inexact dtype.

    Example:
        >>> ember.scipy.signal.convolve(jnp.array([1., 2., 3.]), jnp.array([0., 1., 0.5]))
        Array([0. , 1. , 2.5, 4. , 1.5], dtype=float32)
    """
    in1, in2 = _arrays("convolve", in1, in2)
    if method == "fft":
        return fftconvolve(in1, in2, mode=mode)
    if method in ("direct", "auto"):
        return _conv_nd(in1, in2, mode, precision)
    raise ValueError(f"Got method={method!r}; expected 'auto', 'fft', or 'direct'.")


def correlate(in1: ArrayLike, in2: ArrayLike, mode: ModeString = "full",
              method: str = "auto", precision: Any = None) -> Array:
    """N-dimensional cross-correlation of two arrays (``scipy.signal.correlate``):
    ``convolve(in1, flip(conj(in2)))``.

    Args:
        in1: first input.
        in2: second input, of the same rank.
        mode: 'full', 'same' or 'valid' (as in ``convolve``).
        method: 'auto', 'direct' or 'fft'.
        precision: the ``lax.Precision`` of the direct convolution.

    Returns:
        the cross-correlation, in the inputs' promoted inexact dtype.

    Example:
        >>> ember.scipy.signal.correlate(jnp.array([1., 2., 3.]), jnp.array([1., 1.]))
        Array([1., 3., 5., 3.], dtype=float32)
    """
    in1, in2 = _arrays("correlate", in1, in2)
    return convolve(in1, jnp.flip(jnp.conj(in2)), mode, method=method, precision=precision)


def _check_2d(fn: str, in1: Array, in2: Array, boundary: str, fillvalue: Any) -> None:
    if boundary != "fill" or fillvalue != 0:
        raise NotImplementedError(f"{fn}() only supports boundary='fill', fillvalue=0")
    if in1.ndim != 2 or in2.ndim != 2:
        raise ValueError(f"{fn}() only supports 2-dimensional inputs.")


def convolve2d(in1: ArrayLike, in2: ArrayLike, mode: ModeString = "full",
               boundary: str = "fill", fillvalue: float = 0, precision: Any = None) -> Array:
    """Two-dimensional convolution (``scipy.signal.convolve2d``).

    Args:
        in1: first 2-D input.
        in2: second 2-D input.
        mode: 'full', 'same' or 'valid' (as in ``convolve``).
        boundary: only 'fill' is supported (as in JAX).
        fillvalue: only 0 is supported.
        precision: the ``lax.Precision`` of the convolution.

    Returns:
        the 2-D convolution, in the inputs' promoted inexact dtype.

    Example:
        >>> ember.scipy.signal.convolve2d(jnp.ones((2, 2)), jnp.ones((2, 2)))
        Array([[1., 2., 1.],
               [2., 4., 2.],
               [1., 2., 1.]], dtype=float32)
    """
    in1, in2 = _arrays("convolve2d", in1, in2)
    _check_2d("convolve2d", in1, in2, boundary, fillvalue)
    return _conv_nd(in1, in2, mode, precision)


def correlate2d(in1: ArrayLike, in2: ArrayLike, mode: ModeString = "full",
                boundary: str = "fill", fillvalue: float = 0, precision: Any = None) -> Array:
    """Two-dimensional cross-correlation (``scipy.signal.correlate2d``).

    SciPy centres 'same' differently from ``correlate`` (on the flipped problem) and, in
    'valid' mode with a smaller ``in1``, correlates ``in2`` against ``in1``; both are kept.

    Args:
        in1: first 2-D input.
        in2: second 2-D input.
        mode: 'full', 'same' or 'valid'.
        boundary: only 'fill' is supported (as in JAX).
        fillvalue: only 0 is supported.
        precision: the ``lax.Precision`` of the convolution.

    Returns:
        the 2-D cross-correlation, in the inputs' promoted inexact dtype.

    Example:
        >>> ember.scipy.signal.correlate2d(jnp.eye(2), jnp.array([[1., 2.], [3., 4.]]))
        Array([[4., 3., 0.],
               [2., 5., 3.],
               [0., 2., 1.]], dtype=float32)
    """
    in1, in2 = _arrays("correlate2d", in1, in2)
    _check_2d("correlate2d", in1, in2, boundary, fillvalue)
    if mode == "same":
        return jnp.flip(_conv_nd(jnp.flip(in1), jnp.conj(in2), mode, precision))
    smaller = all(a <= b for a, b in zip(in1.shape, in2.shape))
    if mode == "valid" and smaller and in1.shape != in2.shape:
        return _conv_nd(jnp.flip(in2), jnp.conj(in1), mode, precision)
    return _conv_nd(in1, jnp.flip(jnp.conj(in2)), mode, precision)


# ---------------------------------------------------------------- FFT convolution


def fftconvolve(in1: ArrayLike, in2: ArrayLike, mode: ModeString = "full",
                axes: Sequence[int] | None = None) -> Array:
    """Convolution by multiplying FFT spectra (``scipy.signal.fftconvolve``).

    Args:
        in1: first input.
        in2: second input, of the same rank.
        mode: 'full', 'same' or 'valid' (as in ``convolve``).
        axes: the axes to convolve over (default all); along the other axes the two inputs
            must have the same size, and each slice is convolved separately.

    Returns:
        the convolution, in the inputs' promoted inexact dtype.

    Example:
        >>> ember.scipy.signal.fftconvolve(jnp.array([1., 2., 3.]), jnp.array([1., 1.]))
        Array([1., 3., 5., 3.], dtype=float32)
    """
    check_arraylike("fftconvolve", in1, in2)
    in1, in2 = promote_dtypes_inexact(in1, in2)
    if in1.ndim != in2.ndim:
        raise ValueError("in1 and in2 should have the same dimensionality")
    if mode not in _MODES:
        raise ValueError("mode must be one of ['same', 'full', 'valid']")
    if axes is None:
        axes = tuple(range(in1.ndim))
    else:
        axes = (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
        axes = tuple(sorted({canonicalize_axis("fftconvolve", a, in1.ndim) for a in axes}))
    mapped = [a for a in range(in1.ndim) if a not in axes]
    if any(in1.shape[a] != in2.shape[a] for a in mapped):
        raise ValueError(f"mapped axes must have same shape; got in1.shape={in1.shape} "
                         f"in2.shape={in2.shape} axes={axes}")
    s1 = [in1.shape[a] for a in axes]
    s2 = [in2.shape[a] for a in axes]
    if mode == "valid":
        if all(a <= b for a, b in zip(s1, s2)) and not all(a >= b for a, b in zip(s1, s2)):
            in1, in2, s1, s2 = in2, in1, s2, s1
        elif not all(a >= b for a, b in zip(s1, s2)):
            raise ValueError("For 'valid' mode, One input must be at least as large as the "
                             "other in every dimension.")
    full = [a + b - 1 for a, b in zip(s1, s2)]
    if all(a == 1 or b == 1 for a, b in zip(s1, s2)):
        conv = in1 * in2  # an outer product: no transform needed
    elif dtypes.issubdtype(in1.dtype, np.complexfloating):
        conv = jnp.fft.ifftn(jnp.fft.fftn(in1, full, axes) * jnp.fft.fftn(in2, full, axes),
                             full, axes)
    else:
        conv = jnp.fft.irfftn(jnp.fft.rfftn(in1, full, axes) * jnp.fft.rfftn(in2, full, axes),
                              full, axes)
    if mode == "full":
        out = full
    elif mode == "same":
        out = s1
    else:
        out = [a - b + 1 for a, b in zip(s1, s2)]
    for a, f, o in zip(axes, full, out):
        start = (f - o) // 2
        conv = lax.slice_in_dim(conv, start, start + o, axis=a)
    return conv.astype(in1.dtype)


# ---------------------------------------------------------------- detrending


def detrend(data: ArrayLike, axis: int = -1, type: str = "linear",
            bp: int | Sequence[int] | np.ndarray = 0, overwrite_data: None = None) -> Array:
    """Removes the mean or a least-squares line from ``data`` (``scipy.signal.detrend``).

    Args:
        data: input array.
        axis: the axis along which to detrend.
        type: 'linear' (subtract a least-squares line per segment) or 'constant' (subtract
            the mean).
        bp: breakpoints (static) splitting ``axis`` into segments fitted separately
            ('linear' only).
        overwrite_data: must be None (arrays are immutable).

    Returns:
        the detrended data, in its inexact dtype.

    Example:
        >>> ember.scipy.signal.detrend(jnp.array([1., 3., 2., 6.]), type="constant")
        Array([-2.,  0., -1.,  3.], dtype=float32)
        >>> jnp.allclose(ember.scipy.signal.detrend(jnp.arange(5.)), 0., atol=1e-6)
        Array(True, dtype=bool)
    """
    if overwrite_data is not None:
        raise NotImplementedError("overwrite_data argument not implemented.")
    if type not in ("constant", "linear"):
        raise ValueError("Trend type must be 'linear' or 'constant'.")
    check_arraylike("detrend", data)
    (x,) = promote_dtypes_inexact(data)
    if type == "constant":
        return x - jnp.mean(x, axis, keepdims=True)
    axis = canonicalize_axis("detrend", axis, x.ndim)
    n = x.shape[axis]
    bps = np.sort(np.unique(np.r_[0, np.asarray(bp, dtype=np.int64).ravel(), n]))
    if bps[0] < 0 or bps[-1] > n:
        raise ValueError("Breakpoints must be non-negative and less than length of data "
                         "along given axis.")
    real_dtype = {np.dtype(np.complex64): np.dtype(np.float32),
                  np.dtype(np.complex128): np.dtype(np.float64)}.get(x.dtype, x.dtype)
    pieces = []
    for lo, hi in zip(bps[:-1], bps[1:]):
        seg = lax.slice_in_dim(x, int(lo), int(hi), axis=axis)
        # The least-squares line through (t, y): y - mean(y) - slope * (t - mean(t)).
        t = np.arange(hi - lo, dtype=np.float64)
        t -= t.mean()
        tt = float(np.dot(t, t))
        shape = [-1 if a == axis else 1 for a in range(x.ndim)]
        tcol = t.reshape(shape).astype(real_dtype)
        centred = seg - jnp.mean(seg, axis, keepdims=True)
        if tt > 0:
            slope = jnp.sum(centred * tcol, axis, keepdims=True) / tt
            centred = centred - slope * tcol
        pieces.append(centred.astype(x.dtype))
    return jnp.concatenate(pieces, axis) if pieces else x


# ---------------------------------------------------------------- windows


def _periodic_window(name: str, n: int) -> np.ndarray:
    """SciPy's ``get_window(name, n)`` (``fftbins=True``: periodic) for a few names."""
    k = np.arange(n, dtype=np.float64)
    if n == 1:
        return np.ones(1)
    if name in ("hann", "hanning", "han"):
        return np.sin(np.pi * k / n) ** 2
    if name in ("hamming", "hamm", "ham"):
        return 0.54 - 0.46 * np.cos(2 * np.pi * k / n)
    if name in ("blackman", "black", "blk"):
        return 0.42 - 0.5 * np.cos(2 * np.pi * k / n) + 0.08 * np.cos(4 * np.pi * k / n)
    if name in ("bartlett", "bart", "brt"):
        return 1.0 - np.abs(2.0 * k / n - 1.0)
    if name in ("boxcar", "box", "ones", "rect", "rectangular"):
        return np.ones(n)
    raise NotImplementedError(
        f"window={name!r} is not available in ember (SciPy is not a dependency): use one of "
        "'hann', 'hamming', 'blackman', 'bartlett', 'boxcar', or pass the window as an array")


def _window(window: Any, nperseg: int | None, input_length: int,
            dtype: np.dtype) -> tuple[Array, int]:
    """The window array and segment length (SciPy's ``_triage_segments``)."""
    if isinstance(window, (str, tuple)):
        n = input_length if nperseg is None else int(nperseg)
        if n > input_length:
            warnings.warn(f"nperseg={n} is greater than input_length={input_length}, using "
                          f"nperseg={input_length}", stacklevel=4)
            n = input_length
        name = window if isinstance(window, str) else window[0]
        if isinstance(window, tuple) and len(window) > 1:
            raise NotImplementedError(f"window={window!r}: parametrized windows are not "
                                      "available in ember; pass the window as an array")
        return jnp.asarray(_periodic_window(name, n), dtype=dtype), n
    win = jnp.asarray(window, dtype=dtype)
    n = win.size if nperseg is None else int(nperseg)
    if win.ndim != 1:
        raise ValueError("window must be 1-D")
    if input_length < win.size:
        raise ValueError("window is longer than input signal")
    if n != win.size:
        raise ValueError("value specified for nperseg is different from length of window")
    return win, n


# ---------------------------------------------------------------- windowed FFTs


def _concrete_int(value: Any, what: str) -> int:
    return operator.index(core.concrete_or_error(value, f"{what} must be a concrete integer"))


def _pad_last(x: Array, lo: int, hi: int, mode: str = "constant") -> Array:
    return jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(lo, hi)], mode)


def _odd_ext(x: Array, n: int) -> Array:
    """Odd extension by ``n`` points at both ends of the last axis (``2*x[0] - x[n:0:-1]``)."""
    if n < 1:
        return x
    size = x.shape[-1]
    if n > size - 1:
        raise ValueError(f"The extension length n ({n}) is too big. It must not exceed "
                         f"x.shape[axis]-1, which is {size - 1}.")
    left = 2 * x[..., :1] - jnp.flip(x[..., 1:n + 1], -1)
    right = 2 * x[..., -1:] - jnp.flip(x[..., size - n - 1:size - 1], -1)
    return jnp.concatenate([left, x, right], -1)


_BOUNDARIES: dict[Any, Callable[[Array, int], Array]] = {
    "even": lambda x, n: _pad_last(x, n, n, "reflect"),
    "odd": _odd_ext,
    "constant": lambda x, n: _pad_last(x, n, n, "edge"),
    "zeros": lambda x, n: _pad_last(x, n, n),
    None: lambda x, n: x,
}


def _segments(x: Array, nperseg: int, step: int) -> Array:
    """``(..., L)`` -> ``(..., nseg, nperseg)``: the overlapping segments of the last axis."""
    starts = np.arange(0, x.shape[-1] - nperseg + 1, step)
    return x[..., starts[:, None] + np.arange(nperseg)[None, :]]


def _spectral(x: ArrayLike, y: ArrayLike | None, fs: Any, window: Any, nperseg: Any,
              noverlap: Any, nfft: Any, detrend_type: Any, return_onesided: bool,
              scaling: str, axis: int, mode: str, boundary: Any = None,
              padded: bool = False) -> tuple[Array, Array, Array]:
    """The windowed FFTs of ``x`` (and cross spectra with ``y``): (freqs, times, result)."""
    if mode not in ("psd", "stft"):
        raise ValueError(f"Unknown value for mode {mode}, must be one of: ('psd', 'stft')")
    if boundary not in _BOUNDARIES:
        raise ValueError(f"Unknown boundary option '{boundary}', must be one of: "
                         f"{list(_BOUNDARIES)}")
    if y is None:
        check_arraylike("spectral_helper", x)
        (x,) = promote_dtypes_inexact(x)
        axis = canonicalize_axis("spectral_helper", axis, x.ndim)
        outer = x.shape[:axis] + x.shape[axis + 1:]
    else:
        if mode != "psd":
            raise ValueError("two-argument mode is available only when mode=='psd'")
        check_arraylike("spectral_helper", x, y)
        x, y = promote_dtypes_inexact(x, y)
        if x.ndim != y.ndim:
            raise ValueError(f"two-arguments must have the same rank ({x.ndim} vs {y.ndim}).")
        axis = canonicalize_axis("spectral_helper", axis, x.ndim)
        try:
            outer = np.broadcast_shapes(x.shape[:axis] + x.shape[axis + 1:],
                                        y.shape[:axis] + y.shape[axis + 1:])
        except ValueError as err:
            raise ValueError("x and y cannot be broadcast together.") from err
    wide = x.dtype in (np.float64, np.complex128)
    result_dtype = np.dtype(np.complex128 if wide else np.complex64)
    freq_dtype = np.dtype(np.float64 if wide else np.float32)

    nperseg_int = None
    if nperseg is not None:
        nperseg_int = _concrete_int(nperseg, "nperseg of windowed-FFT")
        if nperseg_int < 1:
            raise ValueError("nperseg must be a positive integer")
    win, nperseg_int = _window(window, nperseg_int, x.shape[axis], x.dtype)
    noverlap_int = (nperseg_int // 2 if noverlap is None
                    else _concrete_int(noverlap, "noverlap of windowed-FFT"))
    nfft_int = nperseg_int if nfft is None else _concrete_int(nfft, "nfft of windowed-FFT")

    if y is None and x.size == 0:
        z = jnp.zeros(x.shape, freq_dtype)
        return z, z, jnp.zeros(x.shape, result_dtype)
    if y is not None and (x.size == 0 or y.size == 0):
        shape = outer[:axis] + (min(x.shape[axis], y.shape[axis]),) + outer[axis:]
        z = jnp.zeros(shape, freq_dtype)
        return z, z, jnp.zeros(shape, result_dtype)

    x = jnp.moveaxis(x, axis, -1)
    if y is not None:
        y = jnp.moveaxis(y, axis, -1)
        if x.shape[-1] < y.shape[-1]:
            x = _pad_last(x, 0, y.shape[-1] - x.shape[-1])
        elif y.shape[-1] < x.shape[-1]:
            y = _pad_last(y, 0, x.shape[-1] - y.shape[-1])
    if nfft_int < nperseg_int:
        raise ValueError("nfft must be greater than or equal to nperseg.")
    if noverlap_int >= nperseg_int:
        raise ValueError("noverlap must be less than nperseg.")
    nstep = nperseg_int - noverlap_int

    def extend(a: Array) -> Array:
        a = _BOUNDARIES[boundary](a, nperseg_int // 2)
        if padded:  # to a whole number of segments
            nadd = (-(a.shape[-1] - nperseg_int) % nstep) % nperseg_int
            a = _pad_last(a, 0, nadd)
        return a

    x = extend(x)
    if y is not None:
        y = extend(y)

    if isinstance(detrend_type, str):
        def detrend_fn(d):
            return detrend(d, type=detrend_type, axis=-1)
    elif callable(detrend_type):
        detrend_fn = detrend_type
    elif not detrend_type:
        def detrend_fn(d):
            return d
    else:
        raise ValueError(f"Unsupported detrend type: {detrend_type}")

    if scaling == "density":
        scale = 1.0 / (fs * jnp.sum(win * win))
    elif scaling == "spectrum":
        scale = 1.0 / jnp.sum(win) ** 2
    else:
        raise ValueError(f"Unknown scaling: {scaling}")
    if mode == "stft":
        scale = jnp.sqrt(scale)

    complex_input = jnp.iscomplexobj(x) or (y is not None and jnp.iscomplexobj(y))
    sides = "twosided"
    if return_onesided:
        if complex_input:
            warnings.warn("Input data is complex, switching to return_onesided=False",
                          stacklevel=4)
        else:
            sides = "onesided"
    if sides == "twosided":
        freqs = jnp.fft.fftfreq(nfft_int, 1 / fs, dtype=freq_dtype)
    else:
        freqs = jnp.fft.rfftfreq(nfft_int, 1 / fs, dtype=freq_dtype)

    def windowed_fft(a: Array) -> Array:
        segs = detrend_fn(_segments(a, nperseg_int, nstep))
        if jnp.iscomplexobj(win) and not jnp.iscomplexobj(segs):
            segs = segs.astype(result_dtype)
        segs = win * segs
        if sides == "twosided":
            return jnp.fft.fft(segs, n=nfft_int)
        return jnp.fft.rfft(jnp.real(segs), n=nfft_int)

    result = windowed_fft(x)
    if y is not None:
        result = jnp.conj(result) * windowed_fft(y)
    elif mode == "psd":
        result = jnp.conj(result) * result
    result = result * jnp.asarray(scale).astype(result_dtype)
    if sides == "onesided" and mode == "psd":
        # Every frequency but 0 (and Nyquist for even nfft) stands for itself and its mirror.
        double = np.full(result.shape[-1], 2.0)
        double[0] = 1.0
        if nfft_int % 2 == 0:
            double[-1] = 1.0
        result = result * double.astype(result_dtype)

    half = nperseg_int / 2
    time = np.arange(half, x.shape[-1] - half + 1, nstep)
    if boundary is not None:
        time = time - half
    time = jnp.asarray(time, dtype=freq_dtype) / fs
    time = time.astype(freq_dtype)
    result = result.astype(result_dtype)
    if y is None and mode != "stft":
        result = jnp.real(result)
    return freqs, time, jnp.moveaxis(result, -1, axis)


def stft(x: ArrayLike, fs: ArrayLike = 1.0, window: Any = "hann", nperseg: int = 256,
         noverlap: int | None = None, nfft: int | None = None, detrend: Any = False,
         return_onesided: bool = True, boundary: str | None = "zeros", padded: bool = True,
         axis: int = -1) -> tuple[Array, Array, Array]:
    """Short-time Fourier transform (``scipy.signal.stft``).

    Args:
        x: the signal.
        fs: sampling frequency.
        window: a window name ('hann', 'hamming', 'blackman', 'bartlett', 'boxcar') or a
            1-D array of length ``nperseg``.
        nperseg: segment length.
        noverlap: overlap between segments (default ``nperseg // 2``).
        nfft: FFT length (default ``nperseg``).
        detrend: False, 'constant', 'linear' or a function applied to each segment.
        return_onesided: one-sided spectra for real input.
        boundary: extension at both ends: 'zeros', 'even', 'odd', 'constant' or None.
        padded: zero-pad the end to a whole number of segments.
        axis: the time axis of ``x``.

    Returns:
        ``(f, t, Zxx)``: frequencies, segment times, and the complex STFT with the frequency
        axis in place of ``axis`` and segments last.

    Example:
        >>> f, t, z = ember.scipy.signal.stft(jnp.ones(8), nperseg=4)
        >>> z.shape
        (3, 5)
    """
    return _spectral(x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                     "spectrum", axis, "stft", boundary, padded)


def csd(x: ArrayLike, y: ArrayLike | None, fs: ArrayLike = 1.0, window: Any = "hann",
        nperseg: int | None = None, noverlap: int | None = None, nfft: int | None = None,
        detrend: Any = "constant", return_onesided: bool = True, scaling: str = "density",
        axis: int = -1, average: str = "mean") -> tuple[Array, Array]:
    """Cross power spectral density by Welch's method (``scipy.signal.csd``).

    Args:
        x: first signal.
        y: second signal (None: the power spectral density of ``x``).
        fs: sampling frequency.
        window: a window name or a 1-D array.
        nperseg: segment length (default: the signal length, as in JAX).
        noverlap: overlap between segments (default ``nperseg // 2``).
        nfft: FFT length (default ``nperseg``).
        detrend: 'constant', 'linear', False or a function applied to each segment.
        return_onesided: one-sided spectra for real input.
        scaling: 'density' (V**2/Hz) or 'spectrum' (V**2).
        axis: the time axis.
        average: 'mean' or 'median' (bias-corrected) over segments.

    Returns:
        ``(f, Pxy)``: frequencies and the (complex) cross spectral density.

    Example:
        >>> f, p = ember.scipy.signal.csd(jnp.arange(8.), jnp.ones(8), nperseg=4)
        >>> f
        Array([0.  , 0.25, 0.5 ], dtype=float32)
    """
    freqs, _, pxy = _spectral(x, y, fs, window, nperseg, noverlap, nfft, detrend,
                              return_onesided, scaling, axis, "psd")
    if y is not None:
        pxy = pxy + 0j  # the cross spectrum is complex even for x is y
    if pxy.ndim >= 2 and pxy.size > 0:
        if pxy.shape[-1] > 1:
            if average == "median":
                m = pxy.shape[-1]
                even = np.arange(2.0, m, 2)
                bias = 1 + np.sum(1.0 / (even + 1) - 1.0 / even)
                if jnp.iscomplexobj(pxy):
                    pxy = lax.complex(jnp.median(jnp.real(pxy), axis=-1),
                                      jnp.median(jnp.imag(pxy), axis=-1))
                else:
                    pxy = jnp.median(pxy, axis=-1)
                pxy = pxy / np.asarray(bias).astype(pxy.dtype)
            elif average == "mean":
                pxy = jnp.mean(pxy, axis=-1)
            else:
                raise ValueError(f'average must be "median" or "mean", got {average}')
        else:
            pxy = jnp.reshape(pxy, pxy.shape[:-1])
    return freqs, pxy


def welch(x: ArrayLike, fs: ArrayLike = 1.0, window: Any = "hann",
          nperseg: int | None = None, noverlap: int | None = None, nfft: int | None = None,
          detrend: Any = "constant", return_onesided: bool = True, scaling: str = "density",
          axis: int = -1, average: str = "mean") -> tuple[Array, Array]:
    """Power spectral density by Welch's method (``scipy.signal.welch``).

    Args:
        x: the signal.
        fs: sampling frequency.
        window: a window name or a 1-D array.
        nperseg: segment length (default: the signal length).
        noverlap: overlap between segments (default ``nperseg // 2``).
        nfft: FFT length (default ``nperseg``).
        detrend: 'constant', 'linear', False or a function applied to each segment.
        return_onesided: one-sided spectrum for real input.
        scaling: 'density' (V**2/Hz) or 'spectrum' (V**2).
        axis: the time axis.
        average: 'mean' or 'median' over segments.

    Returns:
        ``(f, Pxx)``: frequencies and the (real) power spectral density.

    Example:
        >>> f, p = ember.scipy.signal.welch(jnp.array([1., -1.] * 4), nperseg=4)
        >>> p
        Array([0.       , 1.3333334, 2.6666667], dtype=float32)
    """
    freqs, pxx = csd(x, None, fs=fs, window=window, nperseg=nperseg, noverlap=noverlap,
                     nfft=nfft, detrend=detrend, return_onesided=return_onesided,
                     scaling=scaling, axis=axis, average=average)
    return freqs, jnp.real(pxx)


def _overlap_add(frames: Array, step: int) -> Array:
    """``(..., nframes, seglen)`` frames summed at offsets ``0, step, 2 step, ...``."""
    *batch, nframes, seglen = frames.shape
    per = -(-seglen // step)  # blocks of ``step`` samples per frame
    frames = _pad_last(frames, 0, per * step - seglen)
    frames = frames.reshape((*batch, nframes, per, step))
    total = None
    for q in range(per):  # block q of frame i lands in output block i + q
        part = frames[..., q, :]
        pad = [(0, 0)] * len(batch) + [(q, per - 1 - q), (0, 0)]
        part = jnp.pad(part, pad)
        total = part if total is None else total + part
    out = total.reshape((*batch, (nframes + per - 1) * step))
    return out[..., :step * (nframes - 1) + seglen]


def istft(Zxx: ArrayLike, fs: ArrayLike = 1.0, window: Any = "hann",
          nperseg: int | None = None, noverlap: int | None = None, nfft: int | None = None,
          input_onesided: bool = True, boundary: bool = True, time_axis: int = -1,
          freq_axis: int = -2) -> tuple[Array, Array]:
    """Inverse short-time Fourier transform (``scipy.signal.istft``), by overlap-add.

    Args:
        Zxx: the STFT, at least 2-D.
        fs: sampling frequency.
        window: a window name or a 1-D array of length ``nperseg``.
        nperseg: segment length (default from the frequency axis).
        noverlap: overlap between segments (default ``nperseg // 2``).
        nfft: FFT length (default from the frequency axis).
        input_onesided: whether ``Zxx`` holds one-sided spectra.
        boundary: whether the STFT was computed with a boundary extension (it is removed).
        time_axis: the segment axis of ``Zxx``.
        freq_axis: the frequency axis of ``Zxx``.

    Returns:
        ``(t, x)``: times and the reconstructed signal.

    Example:
        >>> x = jnp.arange(8.)
        >>> _, _, z = ember.scipy.signal.stft(x, nperseg=4)
        >>> ember.scipy.signal.istft(z, nperseg=4)[1]
        Array([0., 1., 2., 3., 4., 5., 6., 7.], dtype=float32)
    """
    check_arraylike("istft", Zxx)
    z = ensure_array(Zxx)
    if z.ndim < 2:
        raise ValueError("Input stft must be at least 2d!")
    freq_axis = canonicalize_axis("istft", freq_axis, z.ndim)
    time_axis = canonicalize_axis("istft", time_axis, z.ndim)
    if freq_axis == time_axis:
        raise ValueError("Must specify differing time and frequency axes!")
    wide = z.dtype in (np.float64, np.complex128)
    z = z.astype(np.complex128 if wide else np.complex64)

    n_default = 2 * (z.shape[freq_axis] - 1) if input_onesided else z.shape[freq_axis]
    nperseg_int = _concrete_int(nperseg or n_default, "nperseg: segment length of STFT")
    if nperseg_int < 1:
        raise ValueError("nperseg must be a positive integer")
    if nfft is None:
        nfft_int = n_default
        if input_onesided and nperseg_int == n_default + 1:
            nfft_int += 1  # odd nperseg, no FFT padding
    else:
        nfft_int = _concrete_int(nfft, "nfft of STFT")
    if nfft_int < nperseg_int:
        raise ValueError(f"FFT length ({nfft_int}) must be longer than nperseg "
                         f"({nperseg_int}).")
    noverlap_int = _concrete_int(noverlap or nperseg_int // 2, "noverlap of STFT")
    if noverlap_int >= nperseg_int:
        raise ValueError("noverlap must be less than nperseg.")
    nstep = nperseg_int - noverlap_int

    if time_axis != z.ndim - 1 or freq_axis != z.ndim - 2:
        outer = tuple(a for a in range(z.ndim) if a not in (time_axis, freq_axis))
        z = jnp.transpose(z, outer + (freq_axis, time_axis))
    inverse = jnp.fft.irfft if input_onesided else jnp.fft.ifft
    xsubs = inverse(z, axis=-2, n=nfft_int)[..., :nperseg_int, :]  # (..., nperseg, nframes)

    real_dtype = np.dtype(np.float64 if wide else np.float32)
    if isinstance(window, (str, tuple)):
        win, _ = _window(window, nperseg_int, nperseg_int, real_dtype)
        win = win.astype(xsubs.dtype)
    else:
        win = jnp.asarray(window)
        if win.ndim != 1:
            raise ValueError("window must be 1-D")
        if win.shape[0] != nperseg_int:
            raise ValueError(f"window must have length of {nperseg_int}")
    xsubs = xsubs * jnp.sum(win)  # undoes the 'spectrum' scaling of stft

    frames = jnp.swapaxes(xsubs * win[:, None], -2, -1)
    x = _overlap_add(frames, nstep)
    wsq = jnp.broadcast_to((win * win)[None, :], (xsubs.shape[-1], nperseg_int))
    norm = _overlap_add(wsq, nstep)
    if boundary:
        h = nperseg_int // 2
        x = x[..., h:x.shape[-1] - h]
        norm = norm[..., h:norm.shape[-1] - h]
    x = x / jnp.where(norm > 1e-10, norm, 1.0)

    if x.ndim > 1 and time_axis != z.ndim - 1:
        if freq_axis < time_axis:
            time_axis -= 1
        x = jnp.moveaxis(x, -1, time_axis)
    time = jnp.arange(x.shape[0], dtype=real_dtype) / fs
    return time, x
