"""``jnp.fft``: NumPy's FFT API on ``lax.fft`` (single precision stays single, as in JAX).

Every transform moves its axes last, pads or crops them to the requested sizes, calls
``lax.fft`` on at most three axes at a time and scales by the ``norm`` mode: "backward"
(the default: inverse transforms divide by n), "ortho" (both by sqrt(n)) or "forward".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import core, dtypes, lax
from ember.lax.fft import FftType
from ember.numpy import creation, shape, ufuncs
from ember.numpy._util import check_arraylike

_NORMS = (None, "backward", "ortho", "forward")
_INVERSE = (FftType.IFFT, FftType.IRFFT)


def _scale(x: Any, n: int, fft_type: FftType, norm: str | None, fn: str) -> Any:
    if norm not in _NORMS:
        raise ValueError(f'jax.numpy.fft.{fn}: invalid norm value {norm}; should be "backward",'
                         f' "ortho" or "forward".')
    if norm in (None, "backward"):
        return x
    inverse = fft_type in _INVERSE
    if norm == "ortho":
        factor = math.sqrt(n) if inverse else 1 / math.sqrt(n)
    else:
        factor = n if inverse else 1 / n
    return x * np.asarray(factor, _real(x.dtype))


def _real(dt) -> np.dtype:
    dt = np.dtype(dt)
    return np.dtype(np.float64 if dt in (np.complex128, np.float64) else np.float32)


def _resize(x: Any, axis: int, n: int) -> Any:
    size = core.get_aval(x).shape[axis]
    if n < size:
        return lax.slice_in_dim(x, 0, n, axis=axis)
    if n > size:
        cfg = [(0, 0, 0)] * core.get_aval(x).ndim
        cfg[axis] = (0, n - size, 0)
        return lax.pad(x, np.zeros((), core.get_aval(x).dtype), cfg)
    return x


def _fft_core(fn: str, fft_type: FftType, a: Any, s: Sequence[int] | None,
              axes: Sequence[int] | None, norm: str | None) -> Any:
    check_arraylike(f"jax.numpy.fft.{fn}", a)
    a = creation.asarray(a)
    nd = a.ndim
    if s is not None:
        s = tuple(int(v) for v in s)
        if any(v < 1 for v in s):
            raise ValueError(f"jax.numpy.fft.{fn}: invalid size in s={s}: sizes must be >= 1")
    if axes is None:
        axes = tuple(range(nd - len(s), nd)) if s is not None else tuple(range(nd))
    axes = tuple(int(ax) for ax in axes)
    if s is not None and len(s) != len(axes):
        raise ValueError(f"jax.numpy.fft.{fn}: shape and axes have different lengths: "
                         f"s={s}, axes={axes}")
    if not axes:
        return a
    for ax in axes:
        if not -nd <= ax < nd:
            raise ValueError(f"jax.numpy.fft.{fn}: axis {ax} is out of bounds for an array "
                             f"of dimension {nd}")
    axes = tuple(ax % nd for ax in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"jax.numpy.fft.{fn} does not support repeated axes. Got axes "
                         f"{axes}.")
    if fft_type == FftType.RFFT:
        if dtypes.is_complex(a.dtype):
            raise ValueError(f"jax.numpy.fft.{fn}: only real valued inputs supported for "
                             "rfft")
        a = a.astype(dtypes.canonicalize_dtype(np.float64))
    else:
        a = a.astype(dtypes.canonicalize_dtype(np.complex128))
    if s is None:
        s = tuple(a.shape[ax] for ax in axes)
        if fft_type == FftType.IRFFT:
            s = s[:-1] + (2 * (s[-1] - 1),)
    if fft_type == FftType.IRFFT and s[-1] < 1:
        raise ValueError(f"jax.numpy.fft.{fn}: invalid number of data points ({s[-1]}) "
                         f"specified")
    for ax, n in zip(axes[:-1], s[:-1]):
        a = _resize(a, ax, n)
    last = s[-1] // 2 + 1 if fft_type == FftType.IRFFT else s[-1]
    a = _resize(a, axes[-1], last)
    # lax.fft transforms the trailing axes: move ours there, at most three per call (the
    # real transforms' half-spectrum axis last, so it is in the last call).
    moved = shape.moveaxis(a, axes, tuple(range(nd - len(axes), nd)))
    # A real forward transform starts with the half-spectrum axis, a real inverse ends with it.
    groups = [list(range(max(0, len(s) - 3 * (i + 1)), len(s) - 3 * i))
              for i in range((len(s) + 2) // 3)]
    if fft_type == FftType.IRFFT:
        groups.reverse()
    out = moved
    for grp in groups:
        sub = tuple(s[i] for i in grp)
        if grp[-1] == len(s) - 1:
            typ = fft_type
        else:
            typ = FftType.IFFT if fft_type in _INVERSE else FftType.FFT
        # Bring this group of axes to the end.
        k = len(grp)
        first = nd - len(s) + grp[0]
        perm = [d for d in range(nd) if not first <= d < first + k] + list(
            range(first, first + k))
        inv = list(np.argsort(perm))
        out = lax.transpose(lax.fft(lax.transpose(out, perm), typ, sub), inv)
    out = shape.moveaxis(out, tuple(range(nd - len(axes), nd)), axes)
    return _scale(out, math.prod(s), fft_type, norm, fn)


def _check_axis_int(fn: str, axis: Any) -> None:
    if isinstance(axis, (tuple, list)):
        raise TypeError(f"jax.numpy.fft.{fn} does not support multiple axes. Please use "
                        f"jax.numpy.fft.{fn}n. Got axis = {axis!r}.")


def _one(fn: str, fft_type: FftType, a: Any, n: int | None, axis: int, norm: str | None):
    _check_axis_int(fn, axis)
    return _fft_core(fn, fft_type, a, None if n is None else (n,), (axis,), norm)


def fft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """One-dimensional discrete Fourier transform.

    Example:
        >>> jnp.fft.fft(jnp.array([1., 2., 3., 4.]))
        Array([10.+0.j, -2.+2.j, -2.+0.j, -2.-2.j], dtype=complex64)
    """
    return _one("fft", FftType.FFT, a, n, axis, norm)


def ifft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """One-dimensional inverse discrete Fourier transform.

    Example:
        >>> jnp.fft.ifft(jnp.array([4., 0., 0., 0.]))
        Array([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j], dtype=complex64)
    """
    return _one("ifft", FftType.IFFT, a, n, axis, norm)


def rfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """Transform of a real signal: the ``n // 2 + 1`` non-negative frequencies.

    Example:
        >>> jnp.fft.rfft(jnp.array([1., 2., 3., 4.]))
        Array([10.+0.j, -2.+2.j, -2.+0.j], dtype=complex64)
    """
    return _one("rfft", FftType.RFFT, a, n, axis, norm)


def irfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """Inverse of ``rfft``: a real signal of length ``n`` (default ``2 * (m - 1)``).

    Example:
        >>> jnp.fft.irfft(jnp.array([10., -2.+2.j, -2.]))
        Array([1., 2., 3., 4.], dtype=float32)
    """
    return _one("irfft", FftType.IRFFT, a, n, axis, norm)


_SWAP = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


def hfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """Transform of a Hermitian-symmetric signal given by its first half (a real result).

    Example:
        >>> jnp.fft.hfft(jnp.array([1., 2., 3.]))
        Array([ 9., -1., -3., -1.], dtype=float32)
    """
    if norm not in _NORMS:
        _scale(None, 1, FftType.FFT, norm, "hfft")
    check_arraylike("jax.numpy.fft.hfft", a)
    return irfft(ufuncs.conj(creation.asarray(a)), n, axis, _SWAP[norm])


def ihfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """Inverse of ``hfft``: the first half of the spectrum of a real signal.

    Example:
        >>> jnp.fft.ihfft(jnp.array([4., 0., 0., 0.]))
        Array([1.-0.j, 1.-0.j, 1.-0.j], dtype=complex64)
    """
    if norm not in _NORMS:
        _scale(None, 1, FftType.FFT, norm, "ihfft")
    # (Unlike the other transforms, JAX accepts a list here.)
    return ufuncs.conj(rfft(creation.asarray(a), n, axis, _SWAP[norm]))


def fftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: str | None = None) -> Any:
    """N-dimensional discrete Fourier transform (all axes by default).

    Example:
        >>> jnp.fft.fftn(jnp.ones((2, 2)))
        Array([[4.+0.j, 0.+0.j],
               [0.+0.j, 0.+0.j]], dtype=complex64)
    """
    return _fft_core("fftn", FftType.FFT, a, s, axes, norm)


def ifftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Any:
    """N-dimensional inverse discrete Fourier transform.

    Example:
        >>> jnp.fft.ifftn(jnp.array([[4., 0.], [0., 0.]])).real
        Array([[1., 1.],
               [1., 1.]], dtype=float32)
    """
    return _fft_core("ifftn", FftType.IFFT, a, s, axes, norm)


def rfftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Any:
    """N-dimensional transform of a real signal (the last axis halved).

    Example:
        >>> jnp.fft.rfftn(jnp.ones((2, 4))).shape
        (2, 3)
    """
    return _fft_core("rfftn", FftType.RFFT, a, s, axes, norm)


def irfftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: str | None = None) -> Any:
    """Inverse of ``rfftn``.

    Example:
        >>> jnp.fft.irfftn(jnp.fft.rfftn(jnp.ones((2, 4)))).shape
        (2, 4)
    """
    return _fft_core("irfftn", FftType.IRFFT, a, s, axes, norm)


def _two(fn: str, axes: Any) -> None:
    if len(axes) != 2:
        raise ValueError(f"jax.numpy.fft.{fn} only supports 2 axes. Got axes = {axes}.")


def fft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
         norm: str | None = None) -> Any:
    """Two-dimensional discrete Fourier transform.

    Example:
        >>> jnp.fft.fft2(jnp.ones((2, 2)))[0, 0]
        Array(4.+0.j, dtype=complex64)
    """
    _two("fft2", axes)
    return _fft_core("fft2", FftType.FFT, a, s, axes, norm)


def ifft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: str | None = None) -> Any:
    """Two-dimensional inverse discrete Fourier transform.

    Example:
        >>> jnp.fft.ifft2(jnp.ones((2, 2)))[0, 0]
        Array(1.+0.j, dtype=complex64)
    """
    _two("ifft2", axes)
    return _fft_core("ifft2", FftType.IFFT, a, s, axes, norm)


def rfft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: str | None = None) -> Any:
    """Two-dimensional transform of a real signal.

    Example:
        >>> jnp.fft.rfft2(jnp.ones((2, 4))).shape
        (2, 3)
    """
    _two("rfft2", axes)
    return _fft_core("rfft2", FftType.RFFT, a, s, axes, norm)


def irfft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
           norm: str | None = None) -> Any:
    """Inverse of ``rfft2``.

    Example:
        >>> jnp.fft.irfft2(jnp.ones((2, 3))).shape
        (2, 4)
    """
    _two("irfft2", axes)
    return _fft_core("irfft2", FftType.IRFFT, a, s, axes, norm)


def fftfreq(n: int, d: Any = 1.0, *, dtype: Any = None, device: Any = None) -> Any:
    """Sample frequencies of an ``n``-point transform with sample spacing ``d``.

    Example:
        >>> jnp.fft.fftfreq(4)
        Array([ 0.  ,  0.25, -0.5 , -0.25], dtype=float32)
    """
    n = core.concrete_or_error(n, "jax.numpy.fft.fftfreq: n must be a concrete integer")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise ValueError(f"The n argument of jax.numpy.fft.fftfreq only takes an int. Got "
                         f"n = {n!r}.")
    dt = dtypes.canonicalize_dtype(dtype if dtype is not None else np.float64)
    k = np.concatenate([np.arange(0, (n - 1) // 2 + 1), np.arange(-(n // 2), 0)])
    return creation.asarray(k, dt) / (creation.asarray(d, dt) * n)


def rfftfreq(n: int, d: Any = 1.0, *, dtype: Any = None, device: Any = None) -> Any:
    """Sample frequencies of ``rfft``: ``0 .. n // 2`` over ``n * d``.

    Example:
        >>> jnp.fft.rfftfreq(4)
        Array([0.  , 0.25, 0.5 ], dtype=float32)
    """
    n = core.concrete_or_error(n, "jax.numpy.fft.rfftfreq: n must be a concrete integer")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise ValueError(f"The n argument of jax.numpy.fft.rfftfreq only takes an int. Got "
                         f"n = {n!r}.")
    dt = dtypes.canonicalize_dtype(dtype if dtype is not None else np.float64)
    return creation.asarray(np.arange(n // 2 + 1), dt) / (creation.asarray(d, dt) * n)


def _shift(x: Any, axes: Any, sign: int) -> Any:
    x = creation.asarray(x)
    if axes is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axes, (int, np.integer)):
        axes = (int(axes),)
    axes = tuple(axes)
    shifts = tuple(sign * (x.shape[ax] // 2) for ax in axes)
    return shape.roll(x, shifts, axes)


def fftshift(x: Any, axes: int | Sequence[int] | None = None) -> Any:
    """Moves the zero frequency to the center.

    Example:
        >>> jnp.fft.fftshift(jnp.array([0, 1, 2, -2, -1]))
        Array([-2, -1,  0,  1,  2], dtype=int32)
    """
    return _shift(x, axes, 1)


def ifftshift(x: Any, axes: int | Sequence[int] | None = None) -> Any:
    """Inverse of ``fftshift``.

    Example:
        >>> jnp.fft.ifftshift(jnp.array([-2, -1, 0, 1, 2]))
        Array([ 0,  1,  2, -2, -1], dtype=int32)
    """
    return _shift(x, axes, -1)


__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fftn", "ifftn", "rfftn",
           "irfftn", "fft2", "ifft2", "rfft2", "irfft2", "fftfreq", "rfftfreq", "fftshift",
           "ifftshift"]
