"""``jax.scipy.fft``: the discrete cosine transform (type 2) and its inverse, in one and in
several dimensions.

Each 1-D transform is one complex FFT of length ``N`` (Makhoul's reordering: even-indexed
samples, then the odd-indexed ones reversed), so they trace, jit, vmap and differentiate
through ``jnp.fft``. As in JAX only type 2 is implemented and ``norm`` is None, 'backward'
or 'ortho'; the results are real arrays of the input's complex-promoted precision (float32 for
float16, bfloat16 and integer inputs), complex inputs are transformed part by part.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import dtypes, lax
from ember import numpy as jnp
from ember.numpy._util import array_arg, canonicalize_axis, promote_dtypes_inexact

Array = Any
ArrayLike = Any

__all__ = ["dct", "dctn", "idct", "idctn"]


def _check(fn: str, type: int, norm: str | None) -> None:
    if type != 2:
        raise NotImplementedError("Only DCT type 2 is implemented.")
    if norm is not None and norm not in ("backward", "ortho"):
        raise ValueError(f"jax.scipy.fft.{fn}: norm={norm!r} is not implemented")


def _resize(x: Array, n: int | None, axis: int) -> Array:
    """``x`` zero-padded or truncated to length ``n`` along ``axis``."""
    if n is None:
        return x
    n = operator.index(n)
    if n < 1:
        raise ValueError(f"invalid number of data points ({n}) specified")
    size = x.shape[axis]
    if n < size:
        return lax.slice_in_dim(x, 0, n, axis=axis)
    if n > size:
        pads = [(0, n - size if a == axis else 0, 0) for a in range(x.ndim)]
        return lax.pad(x, lax.full((), 0, x.dtype), pads)
    return x


def _along(c: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """A 1-D constant shaped to broadcast along ``axis`` of an ``ndim``-array."""
    return c.reshape([-1 if a == axis else 1 for a in range(ndim)])


def _ortho_factors(n: int) -> np.ndarray:
    """The 'ortho' scaling of DCT-II: ``1/sqrt(4N)`` for the first term, ``1/sqrt(2N)``."""
    f = np.full(n, 1.0 / np.sqrt(2.0 * n))
    f[:1] = 1.0 / np.sqrt(4.0 * n)
    return f


def _twiddle(n: int, sign: float) -> np.ndarray:
    return np.exp(sign * 0.5j * np.pi * np.arange(n) / n)


def _split_complex(fn, x: Array, *args: Any) -> Array | None:
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        return lax.complex(fn(lax.real(x), *args), fn(lax.imag(x), *args))
    return None


def _dct1(x: Array, n: int | None, axis: int, norm: str | None) -> Array:
    """DCT-II of a real array along one (canonical) axis."""
    x = _resize(x, n, axis)
    size = x.shape[axis]
    # Makhoul: v = [x0, x2, x4, ..., x5, x3, x1]; then dct(x)_k = 2 Re(e^{-i pi k/2N} V_k).
    v = lax.concatenate([lax.slice_in_dim(x, 0, None, 2, axis),
                         lax.rev(lax.slice_in_dim(x, 1, None, 2, axis), (axis,))], axis)
    big = jnp.fft.fft(v, axis=axis)
    w = _along(_twiddle(size, -1.0), x.ndim, axis).astype(big.dtype)
    out = 2 * lax.real(big * w)
    if norm == "ortho":
        out = out * _along(_ortho_factors(size), x.ndim, axis).astype(out.dtype)
    return out


def _idct1(x: Array, n: int | None, axis: int, norm: str | None) -> Array:
    """Inverse of DCT-II (a scaled DCT-III) of a real array along one (canonical) axis."""
    x = _resize(x, n, axis)
    size = x.shape[axis]
    # Undo the ortho scaling, halve the first term, rotate by e^{+i pi k/2N}: the real part
    # of the inverse FFT is the reordered signal v (see _dct1); put it back in order.
    scale = np.full(size, 1.0)
    if norm == "ortho":
        scale = 1.0 / _ortho_factors(size)
    scale[:1] *= 0.5
    ctype = np.dtype(np.complex128 if x.dtype == np.float64 else np.complex64)
    c = lax.convert_element_type(x, ctype) * _along(scale * _twiddle(size, 1.0), x.ndim,
                                                    axis).astype(ctype)
    v = lax.real(jnp.fft.ifft(c, axis=axis))
    half = (size + 1) // 2
    evens = lax.slice_in_dim(v, 0, half, axis=axis)
    odds = lax.rev(lax.slice_in_dim(v, half, None, axis=axis), (axis,))
    if size % 2:  # interleave with a zero-padded last odd sample, then drop it
        odds = lax.pad(odds, lax.full((), 0, v.dtype),
                       [(0, 1 if a == axis else 0, 0) for a in range(v.ndim)])
    both = jnp.stack([evens, odds], axis=axis + 1)
    shape = list(v.shape)
    shape[axis] = 2 * half
    return lax.slice_in_dim(both.reshape(shape), 0, size, axis=axis)


def _one(fn: str, kernel, x: ArrayLike, type: int, n: int | None, axis: int,
         norm: str | None) -> Array:
    x = array_arg(f"jax.scipy.fft.{fn}", x)
    _check(fn, type, norm)
    (x,) = promote_dtypes_inexact(x)
    axis = canonicalize_axis(fn, axis, x.ndim)
    out = _split_complex(lambda p: kernel(p, n, axis, norm), x)
    return kernel(x, n, axis, norm) if out is None else out


def _axes_and_sizes(fn: str, x: Array, s: Any, axes: Any) -> tuple[tuple[int, ...], list]:
    if s is not None:
        try:
            s = [operator.index(v) for v in s]
        except TypeError:
            s = [operator.index(s)]
        if len(s) > x.ndim:
            raise ValueError(f"s must have at most x.ndim ({x.ndim}) elements, got {len(s)}")
    if axes is None:
        axes = tuple(range(x.ndim - len(s), x.ndim)) if s is not None else tuple(range(x.ndim))
    else:
        axes = (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
        axes = tuple(canonicalize_axis(fn, a, x.ndim) for a in axes)
        if len(set(axes)) != len(axes):
            raise ValueError(f"jax.scipy.fft.{fn}: repeated axes {axes}")
    if s is not None and len(s) != len(axes):
        raise ValueError(f"jax.scipy.fft.{fn}: s and axes have different lengths: "
                         f"{len(s)} and {len(axes)}")
    return axes, (list(s) if s is not None else [None] * len(axes))


def _many(fn: str, kernel, x: ArrayLike, type: int, s: Any, axes: Any,
          norm: str | None) -> Array:
    x = array_arg(f"jax.scipy.fft.{fn}", x)
    _check(fn, type, norm)
    (x,) = promote_dtypes_inexact(x)
    axes, sizes = _axes_and_sizes(fn, x, s, axes)

    def run(p: Array) -> Array:
        for axis, n in zip(axes, sizes):
            p = kernel(p, n, axis, norm)
        return p

    out = _split_complex(run, x)
    if out is not None:
        return out
    if not axes:  # nothing to transform: JAX still returns the complex-promoted real dtype
        return lax.convert_element_type(x, dtypes.to_inexact_dtype(x.dtype))
    return run(x)


def dct(x: ArrayLike, type: int = 2, n: int | None = None, axis: int = -1,
        norm: str | None = None) -> Array:
    """Discrete cosine transform (type 2) along one axis, as ``scipy.fft.dct``.

    Args:
        x: input array (integers promote to float; complex inputs are transformed part by
            part).
        type: the DCT type; only 2 is implemented.
        n: transform length: ``x`` is zero-padded or truncated to it along ``axis``.
        axis: the axis to transform.
        norm: None or 'backward' (unscaled), or 'ortho' (orthonormal).

    Returns:
        ``y[k] = 2 * sum_n x[n] * cos(pi * k * (2n + 1) / (2N))`` (scaled for 'ortho').

    Example:
        >>> ember.scipy.fft.dct(jnp.array([1., 2., 3.]))
        Array([12.       , -3.4641016,  0.       ], dtype=float32)
    """
    return _one("dct", _dct1, x, type, n, axis, norm)


def idct(x: ArrayLike, type: int = 2, n: int | None = None, axis: int = -1,
         norm: str | None = None) -> Array:
    """Inverse of the type-2 discrete cosine transform along one axis (``scipy.fft.idct``).

    Args:
        x: input array.
        type: the DCT type; only 2 is implemented.
        n: transform length: ``x`` is zero-padded or truncated to it along ``axis``.
        axis: the axis to transform.
        norm: None or 'backward', or 'ortho'; ``idct(dct(x, norm=m), norm=m) == x``.

    Returns:
        the inverse transform, a real array (complex for complex ``x``).

    Example:
        >>> ember.scipy.fft.idct(jnp.array([12., -3.4641016, 0.]))
        Array([1., 2., 3.], dtype=float32)
    """
    return _one("idct", _idct1, x, type, n, axis, norm)


def dctn(x: ArrayLike, type: int = 2, s: Sequence[int] | None = None,
         axes: Sequence[int] | None = None, norm: str | None = None) -> Array:
    """Multidimensional type-2 discrete cosine transform (``scipy.fft.dctn``).

    Args:
        x: input array.
        type: the DCT type; only 2 is implemented.
        s: output sizes along ``axes`` (zero-padding or truncating ``x``).
        axes: axes to transform: the last ``len(s)`` axes by default, or all of them.
        norm: None or 'backward', or 'ortho'.

    Returns:
        the transform along every axis in ``axes``.

    Example:
        >>> ember.scipy.fft.dctn(jnp.ones((2, 2)))
        Array([[16.,  0.],
               [ 0.,  0.]], dtype=float32)
    """
    return _many("dctn", _dct1, x, type, s, axes, norm)


def idctn(x: ArrayLike, type: int = 2, s: Sequence[int] | None = None,
          axes: Sequence[int] | None = None, norm: str | None = None) -> Array:
    """Multidimensional inverse of the type-2 DCT (``scipy.fft.idctn``).

    Args:
        x: input array.
        type: the DCT type; only 2 is implemented.
        s: output sizes along ``axes`` (zero-padding or truncating ``x``).
        axes: axes to transform: the last ``len(s)`` axes by default, or all of them.
        norm: None or 'backward', or 'ortho'.

    Returns:
        the inverse transform along every axis in ``axes``.

    Example:
        >>> ember.scipy.fft.idctn(jnp.array([[16., 0.], [0., 0.]]))
        Array([[1., 1.],
               [1., 1.]], dtype=float32)
    """
    return _many("idctn", _idct1, x, type, s, axes, norm)
