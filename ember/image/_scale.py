"""Image resampling as separable linear maps: one (input, output) weight matrix per resized
dimension, built from a sampling kernel, contracted with the image dimension by dimension."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import ember.numpy as jnp
from ember import core, lax
from ember.api import ensure_compile_time_eval
from ember.custom_derivatives import custom_jvp
from ember.image import _band
from ember.numpy._util import canonicalize_axis, check_arraylike, promote_dtypes_inexact


class ResizeMethod(enum.Enum):
    """Image resize method.

    NEAREST: nearest neighbour. LINEAR: linear interpolation (a triangle kernel).
    LANCZOS3 / LANCZOS5: Lanczos resampling of radius 3 / 5. CUBIC: the Keys cubic kernel.
    CUBIC_PYTORCH: PyTorch's bicubic (kernel a=-0.75, edge pixels repeated) without
    antialiasing, CUBIC with it. AREA: the average of the input pixels each output pixel
    covers.
    """

    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s: str) -> ResizeMethod:
        """The method named ``s`` (``"linear"``, ``"bilinear"``, ``"cubic"``, ...)."""
        for method, names in _NAMES.items():
            if s in names:
                return method
        raise ValueError(f'Unknown resize method "{s}"')


_NAMES = {
    ResizeMethod.NEAREST: ("nearest",),
    ResizeMethod.LINEAR: ("linear", "bilinear", "trilinear", "triangle"),
    ResizeMethod.LANCZOS3: ("lanczos3",),
    ResizeMethod.LANCZOS5: ("lanczos5",),
    ResizeMethod.CUBIC: ("cubic", "bicubic", "tricubic"),
    ResizeMethod.CUBIC_PYTORCH: ("cubic-pytorch", "bicubic-pytorch"),
    ResizeMethod.AREA: ("area",),
}


def _lanczos(radius: float) -> Callable:
    def kernel(x):
        num = radius * jnp.sin(np.pi * x) * jnp.sin(np.pi * x / radius)
        safe = jnp.where(x != 0, np.pi ** 2 * x ** 2, 1)
        out = jnp.where(x > 1e-3, num / safe, 1)  # sinc(x) sinc(x/r) -> 1 at 0
        return jnp.where(x > radius, 0.0, out)
    return kernel


def _cubic(a: float) -> Callable:
    """The cubic convolution kernel with parameter ``a`` (Keys: -0.5; OpenCV/PyTorch: -0.75)."""
    def kernel(x):
        inner = ((a + 2) * x - (a + 3)) * x * x + 1
        outer = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
        return jnp.where(x >= 2, 0.0, jnp.where(x >= 1, outer, inner))
    return kernel


def _triangle(x):
    return jnp.maximum(0, 1 - jnp.abs(x))


_AREA = "area"
# method -> (kernel radius, kernel)
_KERNELS: dict[ResizeMethod, tuple[int, Any]] = {
    ResizeMethod.LINEAR: (1, _triangle),
    ResizeMethod.LANCZOS3: (3, _lanczos(3.0)),
    ResizeMethod.LANCZOS5: (5, _lanczos(5.0)),
    ResizeMethod.CUBIC: (2, _cubic(-0.5)),
    ResizeMethod.CUBIC_PYTORCH: (2, _cubic(-0.75)),
    ResizeMethod.AREA: (1, _AREA),
}


def _weights(m: int, n: int, scale, translation, kernel, antialias: bool,
             edge_radius: int | None):
    """The (m, n) matrix taking an input dimension of size m to an output of size n.

    Output pixel i samples the input at ``(i + 0.5 - translation) / scale - 0.5`` (pixel
    centres at half-integers). With ``edge_radius`` the input is extended by repeating its
    edge pixels; otherwise samples off the input get weight 0 and each column is normalized.
    """
    dtype = jnp.result_type(scale, translation)
    inv = 1.0 / scale
    kscale = jnp.maximum(inv, 1.0) if antialias else 1.0  # widen the kernel to downsample
    out = jnp.arange(n, dtype=dtype)
    sample = (out + 0.5) * inv - translation * inv - 0.5
    k = edge_radius or 0
    src = jnp.arange(-k, m + k, dtype=dtype)
    if kernel is _AREA:
        lo = out * inv - translation * inv
        left = jnp.arange(m, dtype=dtype)
        w = jnp.maximum(0.0, jnp.minimum((lo + inv)[None, :], (left + 1.0)[:, None])
                        - jnp.maximum(lo[None, :], left[:, None]))
    else:
        w = kernel(jnp.abs(sample[None, :] - src[:, None]) / kscale)
    if edge_radius is not None:  # fold the extension's rows onto the edge pixels they repeat
        fold = (jnp.clip(src.astype(np.int32), 0, m - 1)[None, :]
                == jnp.arange(m, dtype=np.int32)[:, None]).astype(dtype)
        w = jnp.matmul(fold, w, precision=lax.Precision.HIGHEST)
    total = jnp.sum(w, axis=0, keepdims=True)
    tiny = 1000.0 * float(np.finfo(np.float32).eps)
    w = jnp.where(jnp.abs(total) > tiny, w / jnp.where(total != 0, total, 1), 0)
    if edge_radius is None:
        w = jnp.where(((sample >= -0.5) & (sample <= m - 0.5))[None, :], w, 0)
    return w


def _apply(x, shape: tuple, dims: Sequence[int], scale, translation, method: ResizeMethod,
           antialias: bool, precision):
    if method is ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    radius, kernel = _KERNELS[method]
    edge = radius if (method is ResizeMethod.CUBIC_PYTORCH and not antialias) else None
    weight_args, bands = [], []
    for i, d in enumerate(dims):
        args = (x.shape[d], shape[d], scale[i], translation[i], kernel, antialias, edge)
        weight_args.append(args)
        if _real_floating(x):
            # built at trace time when the scale is not traced: then its taps are known
            with ensure_compile_time_eval():
                bands.append(_band_of(_weights(*args)))
        else:
            bands.append(None)

    def dense(x, i):
        # the dot's weights are computed by the program (an (m, n) constant is slow to
        # build and hash), where they are used: in the custom_jvp rule it closes over none
        w = _weights(*weight_args[i])
        y = jnp.tensordot(x, w.astype(x.dtype), axes=[[dims[i]], [0]], precision=precision)
        return jnp.moveaxis(y, -1, dims[i])

    def contract(x):
        for i in range(len(dims)):
            x = dense(x, i)
        return x

    def banded(x):
        steps = _band.order(x.shape, dims, [shape[d] for d in dims], bands)
        for j, i in enumerate(steps):
            if bands[i] is None:
                x = dense(x, i)
            else:
                x = _banded_pass(x, dims[i], bands[i], j == len(steps) - 1,
                                 lambda t, i=i: dense(t, i))
        return x

    if all(taps is None for taps in bands):
        return contract(x)
    # the dot spreads a non-finite input along its line (0 * inf = nan): keep it for those
    return lax.cond(jnp.all(jnp.isfinite(x)), banded, contract, x)


def _banded_pass(x, d: int, band: tuple, last: bool, dense: Callable):
    """``_band.resample`` differentiated as ``dense``, the same linear map as a dot: the
    transpose of a gather is a scatter-add, far slower than the dot's transpose."""
    @custom_jvp
    def resample(x):
        return _band.resample(x, d, *band, last=last)

    @resample.defjvp
    def _(primals, tangents):
        return resample(*primals), dense(*tangents)

    return resample(x)


def _band_of(w):
    # any tracer, even one with a known value: a traced scale's derivative flows through w
    return None if isinstance(w, core.Tracer) else _band.band(np.asarray(w))


def _real_floating(x) -> bool:
    return jnp.issubdtype(x.dtype, jnp.floating)


def _check(fn: str, image, shape) -> tuple:
    check_arraylike(fn, image)
    try:
        shape = tuple(int(s) for s in shape)
    except TypeError:
        raise TypeError(f"{fn}: shape must be a sequence of integers, got {shape!r}") from None
    if len(shape) != np.ndim(image):
        raise ValueError("shape must have length equal to the number of dimensions of x; "
                         f" {shape} vs {np.shape(image)}")
    if any(s < 0 for s in shape):
        raise ValueError(f"{fn}: shape must be non-negative, got {shape}")
    return shape


def _method(method) -> ResizeMethod:
    if isinstance(method, str):
        return ResizeMethod.from_string(method)
    if not isinstance(method, ResizeMethod):
        raise TypeError(f"method must be a string or a ResizeMethod, got {method!r}")
    return method


def scale_and_translate(image, shape: Sequence[int], spatial_dims: Sequence[int], scale,
                        translation, method: str | ResizeMethod, antialias: bool = True,
                        precision=lax.Precision.HIGHEST):
    """Resamples ``image`` to ``shape`` under a scale and translation of ``spatial_dims``.

    An input location ``x`` along spatial dimension ``spatial_dims[i]`` moves to
    ``x * scale[i] + translation[i]`` (pixel centres at half-integers); output pixels whose
    source falls outside the input are 0. ``scale`` and ``translation`` may be traced.

    Args:
        image: the input array.
        shape: the output shape (one entry per dimension of ``image``).
        spatial_dims: the dimensions to transform.
        scale: one scale per spatial dimension.
        translation: one translation per spatial dimension.
        method: a :class:`ResizeMethod` or its name; not ``"nearest"``.
        antialias: widen the kernel when downsampling (no effect when upsampling).
        precision: precision of the contractions.

    Returns:
        The resampled image, of a floating dtype.

    Example:
        >>> scale_and_translate(jnp.arange(4.0), (4,), (0,), jnp.array([1.0]),
        ...                     jnp.array([1.0]), "linear")
        Array([0., 0., 1., 2.], dtype=float32)
    """
    shape = _check("scale_and_translate", image, shape)
    method = _method(method)
    if method is ResizeMethod.NEAREST:
        raise ValueError("Nearest neighbor resampling is not currently supported for "
                         "scale_and_translate.")
    if hasattr(spatial_dims, "shape"):  # (an array of dimensions, as JAX accepts)
        spatial_dims = np.asarray(spatial_dims).reshape(-1).tolist()
    dims = [canonicalize_axis("scale_and_translate", d, np.ndim(image)) for d in spatial_dims]
    if not len(dims) == np.shape(scale)[0] == np.shape(translation)[0]:
        raise ValueError("scale_and_translate: spatial_dims, scale and translation must have "
                         f"the same length, got {len(dims)}, {np.shape(scale)} and "
                         f"{np.shape(translation)}")
    if not dims:
        return image
    image, = promote_dtypes_inexact(image)
    scale, translation = promote_dtypes_inexact(scale, translation)
    return _apply(image, shape, dims, scale, translation, method, antialias, precision)


def _resize_nearest(x, shape: tuple):
    for d, (m, n) in enumerate(zip(x.shape, shape)):
        if m != n:
            # computed in float32 as JAX does, so the picked pixels agree
            src = (np.arange(n, dtype=np.float32) + np.float32(0.5)) * np.float32(m)
            src = np.floor(src / np.float32(n)).astype(np.int32)
            x = jnp.take(x, jnp.asarray(src), axis=d)
    return x


def resize(image, shape: Sequence[int], method: str | ResizeMethod, antialias: bool = True,
           precision=lax.Precision.HIGHEST):
    """Resizes ``image`` to ``shape`` with the given interpolation ``method``.

    Every dimension whose size changes is resampled (batch and channel dimensions keep
    their size). ``"nearest"`` keeps the dtype; the other methods return a floating dtype.
    Methods: ``nearest``, ``linear`` (``bilinear``, ``trilinear``, ``triangle``),
    ``lanczos3``, ``lanczos5``, ``cubic`` (``bicubic``, ``tricubic``), ``cubic-pytorch``,
    ``area``, or a :class:`ResizeMethod`.

    Args:
        image: the input array.
        shape: the output shape (one entry per dimension of ``image``).
        method: the interpolation method.
        antialias: widen the kernel when downsampling (no effect when upsampling or for
            ``nearest``).
        precision: precision of the contractions.

    Returns:
        The resized image.

    Example:
        >>> resize(jnp.array([0.0, 1.0]), (4,), "linear")
        Array([0.  , 0.25, 0.75, 1.  ], dtype=float32)
    """
    shape = _check("resize", image, shape)
    method = _method(method)
    image = jnp.asarray(image)
    if method is ResizeMethod.NEAREST:
        return _resize_nearest(image, shape)
    image, = promote_dtypes_inexact(image)
    dims = [d for d in range(image.ndim) if image.shape[d] != shape[d]]
    scale = [shape[d] / image.shape[d] if shape[d] and image.shape[d] else 1.0 for d in dims]
    if not dims:
        return image
    # Python float scales: the weights take the default float dtype, as in JAX
    dt = jnp.result_type(float)
    scale = [np.asarray(s, dt) for s in scale]
    zeros = [np.asarray(0.0, dt)] * len(dims)
    return _apply(image, shape, dims, scale, zeros, method, antialias, precision)

