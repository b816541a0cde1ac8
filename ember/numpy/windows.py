"""Window functions and numeric helpers: bartlett, blackman, hamming, hanning, kaiser, i0,
spacing, unwrap, gradient, bitwise_count, packbits, unpackbits, sort_complex.

Everything is composed of ``ember.numpy`` and ``lax`` operations, so it traces, jits, vmaps
and (where JAX does) differentiates. Arguments that decide output shapes (a window's ``M``,
``axis``, ``count``, ``bitorder``, ``edge_order``) must be concrete.

``i0`` is the modified Bessel function of the first kind of order 0. There is no Bessel
primitive, so it is computed here (in float32 for 16-bit floats) from two classical
expansions (Abramowitz & Stegun 9.6.10 and 9.7.1), for ``I0`` and, for its derivative, ``I1``:

- ``|x| <= T``: the power series ``I_nu(x) = (x/2)^nu * sum_k (x^2/4)^k / (k! (k+nu)!)``,
  all of whose terms are positive, evaluated in nested (Horner) form;
- ``|x| > T``: the asymptotic series
  ``I_nu(x) = e^|x| / sqrt(2 pi |x|) * sum_k prod_{j<=k} ((2j-1)^2 - 4 nu^2) / (8 j |x|)``,
  whose truncation error is below ``e^(-2T)``.

``T`` and the numbers of terms are 10/16/10 for float32 and 20/36/24 for float64, which keeps
both series within a few ulps of the exact values (tests/test_windows.py checks them against
a high-precision reference). As in JAX, the large-argument branch is ``exp(|x|)`` times a
scaled series in the input's dtype, so ``i0`` overflows to ``inf`` where ``exp`` does (float16
inputs above ~11.09, float32 above ~88.72) and ``i0(inf)`` is NaN. The derivative of ``i0`` is
``I1`` (a ``custom_jvp`` rule, as in JAX).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import core, dtypes, lax
from ember.custom_derivatives import custom_jvp
from ember.numpy._util import (
    broadcast_shapes,
    canonicalize_axis,
    check_arraylike,
    concrete_index,
    ensure_array,
    promote_dtypes,
    promote_dtypes_inexact,
    promote_dtypes_numeric,
)
from ember.numpy.misc import diff
from ember.numpy.reductions import cumsum
from ember.numpy.shape import concatenate
from ember.numpy.ufuncs import absolute, cos, logical_and, remainder, sqrt, where

# ---------------------------------------------------------------- helpers


def _as_weak(x: Any, weak: bool) -> Any:
    return lax.convert_element_type(x, x.dtype, weak) if weak else x


def _weak(x: Any) -> bool:
    return bool(x.aval.weak_type)



def _bitorder(fn: str, bitorder: Any) -> str:
    if not isinstance(bitorder, str) or bitorder not in ("big", "little"):
        raise ValueError(f"{fn}: 'bitorder' must be either 'little' or 'big', got "
                         f"{bitorder!r}")
    return bitorder


# ---------------------------------------------------------------- windows


def _window_size(fn: str, M: Any) -> int:
    """The window length: ``int(M)`` as in JAX (so 4.5 gives 4), never negative."""
    M = core.concrete_or_error(M, f"The error occurred because of argument 'M' of jnp.{fn}.")
    try:
        size = int(M)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{fn}: M must be an integer, got {M!r}") from None
    if size < 0:  # JAX raises TypeError (from the negative shape)
        raise TypeError(f"{fn}: M must be non-negative, got {size}")
    return size


def _ones(M: int) -> Any:
    return lax.full((M,), 1, dtypes.default_float_dtype())


def _iota(M: int) -> Any:
    return lax.iota(dtypes.default_float_dtype(), M)


def _window(fn: str, M: Any, formula) -> Any:
    """``formula(n, M)`` over the points ``n = 0 .. M-1`` (``[]`` or ``[1.]`` for M <= 1)."""
    M = _window_size(fn, M)
    if M <= 1:
        return _ones(M)
    return formula(_iota(M), M)


def bartlett(M: int) -> Any:
    """The Bartlett (triangular) window of ``M`` points, in the default float dtype.

    ``w[n] = 1 - |2n + 1 - M| / (M - 1)``; ``M`` is 0 or 1 gives ``[]`` or ``[1.]``.

    Example:
        >>> jnp.bartlett(5)
        Array([0. , 0.5, 1. , 0.5, 0. ], dtype=float32)
    """
    return _window("bartlett", M, lambda n, M: 1 - absolute(2 * n + 1 - M) / (M - 1))


def blackman(M: int) -> Any:
    """The Blackman window of ``M`` points, in the default float dtype.

    ``w[n] = 0.42 - 0.5 cos(2 pi n / (M-1)) + 0.08 cos(4 pi n / (M-1))``.

    Example:
        >>> jnp.blackman(3)
        Array([-1.4901161e-08,  9.9999994e-01, -1.4901161e-08], dtype=float32)
    """
    return _window("blackman", M, lambda n, M: (0.42 - 0.5 * cos(2 * np.pi * n / (M - 1))
                                                + 0.08 * cos(4 * np.pi * n / (M - 1))))


def hamming(M: int) -> Any:
    """The Hamming window of ``M`` points, in the default float dtype.

    ``w[n] = 0.54 - 0.46 cos(2 pi n / (M-1))``.

    Example:
        >>> jnp.hamming(3)
        Array([0.08000001, 1.        , 0.08000001], dtype=float32)
    """
    return _window("hamming", M, lambda n, M: 0.54 - 0.46 * cos(2 * np.pi * n / (M - 1)))


def hanning(M: int) -> Any:
    """The Hann(ing) window of ``M`` points, in the default float dtype.

    ``w[n] = 0.5 (1 - cos(2 pi n / (M-1)))``.

    Example:
        >>> jnp.hanning(5)
        Array([0. , 0.5, 1. , 0.5, 0. ], dtype=float32)
    """
    return _window("hanning", M, lambda n, M: 0.5 * (1 - cos(2 * np.pi * n / (M - 1))))


def kaiser(M: int, beta: Any) -> Any:
    """The Kaiser window of ``M`` points with shape parameter ``beta``.

    ``w[n] = I0(beta sqrt(1 - ((n - a) / a)^2)) / I0(beta)`` with ``a = (M - 1) / 2``, in the
    default float dtype. ``beta`` may be traced (and differentiated); an array ``beta``
    broadcasts against the ``M`` points.

    Example:
        >>> jnp.kaiser(4, 1.5)
        Array([0.6072666 , 0.95102984, 0.95102984, 0.6072666 ], dtype=float32)
    """
    M = _window_size("kaiser", M)
    check_arraylike("kaiser", beta)
    beta = ensure_array(beta)
    if dtypes.is_complex(beta.dtype):
        raise ValueError(f"kaiser: beta must be real, got dtype {beta.dtype}")
    if M <= 1:
        return _ones(M)
    try:
        broadcast_shapes(beta.shape, (M,))
    except ValueError:
        raise TypeError(f"kaiser: beta of shape {beta.shape} does not broadcast against the "
                        f"window shape ({M},)") from None
    n = _iota(M)
    alpha = 0.5 * (M - 1)
    return i0(beta * sqrt(1 - ((n - alpha) / alpha) ** 2)) / i0(beta)


# ---------------------------------------------------------------- i0

# Working dtype -> (T, power-series terms, asymptotic-series terms); see the module docstring.
_BESSEL_PARAMS = {np.dtype("float32"): (10.0, 16, 10), np.dtype("float64"): (20.0, 36, 24)}


def _bessel_i(x: Any, nu: int) -> Any:
    """``I_nu(x)`` for nu in (0, 1) and a float array ``x``, in x's dtype (strong)."""
    dt = x.dtype
    wdt = np.dtype("float64") if dt == np.dtype("float64") else np.dtype("float32")
    T, n_series, n_asym = _BESSEL_PARAMS[wdt]
    xw = lax.convert_element_type(x, wdt)
    ax = lax.abs(xw)
    # Each branch is evaluated at an argument clamped into its own range, so the branch not
    # taken stays finite (in reverse mode its zero cotangent would otherwise meet an inf).
    xs = lax.clamp(-T, xw, T)
    y = lax.mul(lax.mul(xs, xs), 0.25)
    acc = lax.full_like(xs, 1)
    for k in range(n_series, 0, -1):
        acc = lax.add(lax.mul(lax.mul(acc, y), 1.0 / (k * (k + nu))), 1.0)
    small = acc if nu == 0 else lax.mul(lax.mul(xs, 0.5), acc)
    xl = lax.max(ax, T)
    z = lax.div(lax.full_like(xl, 1), xl)
    acc = lax.full_like(xl, 1)
    for k in range(n_asym, 0, -1):
        acc = lax.add(lax.mul(lax.mul(acc, z), ((2 * k - 1) ** 2 - 4 * nu * nu) / (8.0 * k)),
                      1.0)
    scaled = lax.mul(acc, lax.rsqrt(lax.mul(xl, 2 * np.pi)))  # e^-|x| I_nu(|x|)
    # exp in the input's dtype, as JAX does: it decides where the result overflows.
    large = lax.mul(lax.exp(lax.convert_element_type(xl, dt)),
                    lax.convert_element_type(scaled, dt))
    if nu == 1:  # I1 is odd
        large = lax.mul(large, lax.sign(lax.convert_element_type(x, dt, False)))
    pred = lax.le(ax, lax.full_like(ax, T))
    return lax.select(pred, lax.convert_element_type(small, dt), large)


@custom_jvp
def _i0(x: Any) -> Any:
    return _as_weak(_bessel_i(x, 0), _weak(x))


@_i0.defjvp
def _i0_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    (x,), (t,) = primals, tangents
    x, t = ensure_array(x), ensure_array(t)  # a primal may arrive as a Python scalar
    # d/dx I0(x) = I1(x).
    return _i0(x), lax.mul(_as_weak(_bessel_i(x, 1), _weak(t)), t)


def i0(x: Any) -> Any:
    """The modified Bessel function of the first kind of order 0, elementwise.

    ``I0(x) = sum_k (x^2/4)^k / (k!)^2``. Integer and boolean inputs give the default float
    dtype; complex inputs are refused. Differentiable: the derivative is ``I1(x)``. See the
    module docstring for the method and accuracy.

    Example:
        >>> jnp.i0(jnp.array([0.0, 1.0, -2.0]))
        Array([1.       , 1.266066 , 2.2795851], dtype=float32)
    """
    check_arraylike("i0", x)
    (x,) = promote_dtypes_inexact(x)
    if not dtypes.is_float(x.dtype):
        raise ValueError(f"i0: unsupported input type {x.dtype} (x must be real)")
    return _i0(x)


# ---------------------------------------------------------------- spacing


def spacing(x: Any, /) -> Any:
    """The distance from ``x`` to the next representable number away from zero.

    Signed like ``x`` (so ``spacing(-0.0)`` is minus the smallest subnormal, as in JAX);
    ``inf`` and NaN give NaN. Float16 follows NumPy's float16 rule: the step towards
    ``+inf`` (so ``spacing(-inf)`` is ``inf``). Integers and booleans become the default
    float dtype. Not differentiable (``nextafter`` has no derivative).

    Example:
        >>> jnp.spacing(jnp.array([1.0, -1.0, 0.0]))
        Array([ 1.1920929e-07, -1.1920929e-07,  1.4012985e-45], dtype=float32)
    """
    check_arraylike("spacing", x)
    (x,) = promote_dtypes_inexact(x)
    dt = x.dtype
    if dtypes.is_complex(dt):
        raise ValueError(f"spacing: not defined for complex inputs, got dtype {dt}")
    weak = _weak(x)
    x = lax.convert_element_type(x, dt, False)
    inf = lax.full(x.shape, np.inf, dt)
    if dt == np.dtype("float16"):
        return _as_weak(lax.sub(lax.nextafter(x, inf), x), weak)
    negative = lax.lt(lax.div(lax.full(x.shape, 1, dt), x), lax.full(x.shape, 0, dt))
    negative = lax.bitwise_or(lax.lt(x, lax.full(x.shape, 0, dt)), negative)  # -0.0 too
    result = lax.sub(lax.nextafter(x, lax.select(negative, lax.neg(inf), inf)), x)
    tiny = lax.full(x.shape, dtypes.finfo(dt).smallest_subnormal, dt)
    # Where subnormal differences flush to zero, the answer is the smallest subnormal.
    return lax.select(lax.eq(result, lax.full(x.shape, 0, dt)),
                      lax.select(negative, lax.neg(tiny), tiny), result)


# ---------------------------------------------------------------- unwrap


def unwrap(p: Any, discont: Any = None, axis: int = -1, period: Any = 2 * np.pi) -> Any:
    """Unwraps a periodic signal along ``axis``: jumps larger than ``discont`` (default
    ``period / 2``) are removed by adding multiples of ``period``.

    ``p`` and ``period`` are promoted together (an integer ``p`` with the default float
    period gives floats; with an integer period it stays integer). Complex inputs are
    refused.

    Example:
        >>> jnp.unwrap(jnp.array([0.0, 3.0, 6.5, 0.2]))
        Array([0.        , 3.        , 0.216815  , 0.20000048], dtype=float32)
    """
    check_arraylike("unwrap", p, period)
    if discont is not None:
        check_arraylike("unwrap", discont)
        discont = ensure_array(discont)
    p, period = promote_dtypes(p, period)
    if dtypes.is_complex(p.dtype):
        raise ValueError(f"unwrap: complex inputs are not supported, got dtype {p.dtype}")
    axis = canonicalize_axis("unwrap", axis, p.ndim)
    if p.shape[axis] == 0:
        return p
    if discont is None:
        discont = period / 2
    interval = period // 2 if dtypes.is_integer(p.dtype) else period / 2
    dd = diff(p, axis=axis)
    ddmod = remainder(dd + interval, period) - interval
    ddmod = where(logical_and(ddmod == -interval, dd > 0), interval, ddmod)
    correction = where(absolute(dd) < discont, 0, ddmod - dd)
    rest = lax.slice_in_dim(p, 1, None, axis=axis) + cumsum(correction, axis=axis)
    return concatenate((lax.slice_in_dim(p, 0, 1, axis=axis), rest), axis=axis)


# ---------------------------------------------------------------- gradient


def _gradient_axes(a: Any, axis: Any) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(a.ndim))
    axis = core.concrete_or_error(axis, "gradient: axis must be concrete")
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    # Repeated axes are allowed (each gives its own result), as in JAX.
    return tuple(canonicalize_axis("gradient", ax, a.ndim) for ax in items)


def _gradient_along(a: Any, h: Any, axis: int) -> Any:
    """Second-order central differences inside, first-order one-sided ones at the edges."""
    def part(start: int | None, stop: int | None) -> Any:
        return lax.slice_in_dim(a, start, stop, axis=axis)

    upper = part(1, 2) - part(0, 1)
    lower = part(-1, None) - part(-2, -1)
    if h.ndim == 0:
        inner = (part(2, None) - part(None, -2)) * 0.5 / h
        return concatenate((upper / h, inner, lower / h), axis=axis)
    shape = [1] * a.ndim
    shape[axis] = h.shape[0]
    h = lax.reshape(h, tuple(shape))

    def hpart(start: int | None, stop: int | None) -> Any:
        return lax.slice_in_dim(h, start, stop, axis=axis)

    upper = upper / (hpart(1, 2) - hpart(0, 1))
    lower = lower / (hpart(-1, None) - hpart(-2, -1))
    dx1 = hpart(1, -1) - hpart(0, -2)
    dx2 = hpart(2, None) - hpart(1, -1)
    c0 = -dx2 / (dx1 * (dx1 + dx2))
    c1 = (dx2 - dx1) / (dx1 * dx2)
    c2 = dx1 / (dx2 * (dx1 + dx2))
    inner = c0 * part(0, -2) + c1 * part(1, -1) + c2 * part(2, None)
    return concatenate((upper, inner, lower), axis=axis)


def gradient(f: Any, *varargs: Any, axis: int | Sequence[int] | None = None,
             edge_order: int | None = None) -> Any:
    """The numerical gradient of the samples ``f``: central differences inside, one-sided
    differences at the edges (``edge_order=1``; other orders are not supported, as in JAX).

    ``varargs``: no spacing (unit spacing), one spacing for every axis, or one per axis; a
    spacing is a scalar (uniform step) or a 1-D array of coordinates as long as its axis.
    ``f`` and the spacings are promoted to one inexact dtype. Returns one array for one axis,
    else a list with one array per axis (``[]`` when there is no axis).

    Example:
        >>> jnp.gradient(jnp.array([1.0, 2.0, 4.0, 7.0, 11.0]))
        Array([1. , 1.5, 2.5, 3.5, 4. ], dtype=float32)
    """
    check_arraylike("gradient", f, *varargs)
    if edge_order is not None and (isinstance(edge_order, bool) or edge_order != 1):
        raise NotImplementedError(f"gradient: edge_order={edge_order!r} is not supported "
                                  "(only edge_order=1)")
    a, *spacing = promote_dtypes_inexact(f, *varargs)
    axes = _gradient_axes(a, axis)
    if not axes:
        return []
    if min(a.shape[ax] for ax in axes) < 2:
        raise ValueError(f"gradient: the array of shape {a.shape} is too small along axes "
                         f"{axes} to calculate a numerical gradient; at least 2 elements "
                         "are required")
    if not spacing:
        dx = [lax.full((), 1.0, a.dtype)] * len(axes)
    elif len(spacing) == 1:
        dx = spacing * len(axes)
    elif len(spacing) == len(axes):
        dx = spacing
    else:
        raise TypeError(f"gradient: invalid number of spacing arguments {len(spacing)} for "
                        f"axis={axis}")
    for h, ax in zip(dx, axes):
        if h.ndim > 1:
            raise ValueError(f"gradient: spacing arrays must be 1-D or scalars, got shape "
                             f"{h.shape}")
        if h.ndim == 1 and h.shape[0] != a.shape[ax]:
            raise ValueError(f"gradient: a spacing array of length {h.shape[0]} does not "
                             f"match the length {a.shape[ax]} of axis {ax}")
    if not spacing:  # unit spacing keeps f's weak type
        dx = [_as_weak(h, _weak(a)) for h in dx]
    grads = [_gradient_along(a, h, ax) for h, ax in zip(dx, axes)]
    return grads[0] if len(axes) == 1 else grads


# ---------------------------------------------------------------- bits


def bitwise_count(x: Any, /) -> Any:
    """The number of 1 bits in the absolute value of each element (uint8).

    Booleans count as integers; floats are refused.

    Example:
        >>> jnp.bitwise_count(jnp.array([64, 31, -7]))
        Array([1, 5, 3], dtype=uint8)
    """
    check_arraylike("bitwise_count", x)
    (x,) = promote_dtypes_numeric(x)
    if not dtypes.is_integer(x.dtype):
        raise TypeError(f"bitwise_count: x must have an integer or boolean dtype, got "
                        f"{x.dtype}")
    x = lax.convert_element_type(x, x.dtype, False)
    if not dtypes.is_unsigned(x.dtype):
        x = lax.abs(x)  # the most negative value stays itself: one bit
    return lax.convert_element_type(lax.population_count(x), np.uint8)


def _pack_axis(fn: str, a: Any, axis: Any) -> tuple[Any, int]:
    """(array, axis): the flattened array and 0 when axis is None, else the checked axis."""
    if axis is None:
        return lax.reshape(a, (a.size,)), 0
    return a, canonicalize_axis(fn, axis, a.ndim)


def _bit_weights(bitorder: str, shape: tuple[int, ...], axis: int) -> Any:
    """1 << position of each of the 8 bits of a byte, along ``axis`` of ``shape``."""
    shifts = np.arange(8, dtype=np.uint8)
    if bitorder == "big":
        shifts = shifts[::-1]
    return lax.broadcast_in_dim(ensure_array(shifts.copy()), shape, (axis,))


def packbits(a: Any, axis: int | None = None, bitorder: str = "big") -> Any:
    """Packs the truth values of ``a`` (non-zero is 1) into the bits of uint8 bytes.

    Along ``axis`` (default: the flattened array), each group of 8 elements becomes one byte,
    the first element in the most significant bit (``bitorder="big"``) or the least
    (``"little"``); a last incomplete group is padded with zeros.

    Example:
        >>> jnp.packbits(jnp.array([1, 0, 1, 1, 0, 0, 1, 0, 1, 1]))
        Array([178, 192], dtype=uint8)
    """
    check_arraylike("packbits", a)
    a = ensure_array(a)
    if not (dtypes.is_integer(a.dtype) or a.dtype == dtypes.bool_):
        raise TypeError(f"packbits: a must have an integer or boolean dtype, got {a.dtype}")
    bitorder = _bitorder("packbits", bitorder)
    a, axis = _pack_axis("packbits", a, axis)
    bits = lax.convert_element_type(lax.ne(a, lax.full_like(a, 0)), np.uint8)
    n = a.shape[axis]
    if n % 8:
        config = [(0, 0, 0)] * a.ndim
        config[axis] = (0, 8 - n % 8, 0)
        bits = lax.pad(bits, np.uint8(0), config)
    groups = bits.shape[:axis] + (bits.shape[axis] // 8, 8) + bits.shape[axis + 1:]
    bits = lax.reshape(bits, groups)
    shifted = lax.shift_left(bits, _bit_weights(bitorder, groups, axis + 1))
    return lax.reduce_sum(shifted, (axis + 1,))


def unpackbits(a: Any, axis: int | None = None, count: int | None = None,
               bitorder: str = "big") -> Any:
    """Unpacks the bits of the uint8 array ``a`` into a uint8 array of 0s and 1s.

    Along ``axis`` (default: the flattened array) each byte becomes 8 elements, most
    significant bit first (``bitorder="big"``) or least significant first (``"little"``).
    ``count`` keeps that many bits (padding with zeros past the end); a negative ``count``
    drops bits from the end (all of them when it exceeds the length, as in JAX).

    Example:
        >>> jnp.unpackbits(jnp.array([219, 96], jnp.uint8), count=11)
        Array([1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1], dtype=uint8)
    """
    check_arraylike("unpackbits", a)
    a = ensure_array(a)
    if a.dtype != np.uint8:
        raise TypeError(f"unpackbits: a must have dtype uint8, got {a.dtype}")
    bitorder = _bitorder("unpackbits", bitorder)
    if count is not None:
        count = concrete_index("unpackbits", "count", count)
    a, axis = _pack_axis("unpackbits", a, axis)
    a = lax.convert_element_type(a, np.uint8, False)
    n = a.shape[axis]
    groups = a.shape[:axis] + (n, 8) + a.shape[axis + 1:]
    dims = tuple(d for d in range(len(groups)) if d != axis + 1)
    spread = lax.broadcast_in_dim(a, groups, dims)
    bits = lax.shift_right_logical(spread, _bit_weights(bitorder, groups, axis + 1))
    bits = lax.bitwise_and(bits, lax.full(groups, 1, np.uint8))
    bits = lax.reshape(bits, a.shape[:axis] + (8 * n,) + a.shape[axis + 1:])
    if count is not None:
        length = 8 * n
        if count > length:
            config = [(0, 0, 0)] * bits.ndim
            config[axis] = (0, count - length, 0)
            bits = lax.pad(bits, np.uint8(0), config)
        else:
            stop = count if count >= 0 else max(length + count, 0)
            bits = lax.slice_in_dim(bits, 0, stop, axis=axis)
    return bits


# ---------------------------------------------------------------- sort_complex


def _complex_dtype(dt: np.dtype) -> np.dtype:
    """JAX's rule: 64-bit types give complex128, everything else complex64."""
    wide = (np.dtype("float64"), np.dtype("complex128"), np.dtype("int64"),
            np.dtype("uint64"))
    return np.dtype("complex128") if dt in wide else np.dtype("complex64")


def sort_complex(a: Any) -> Any:
    """Sorts ``a`` along its last axis, complex numbers by real part then imaginary part
    (NaNs last), and returns a complex array (complex64, or complex128 for 64-bit inputs).

    Example:
        >>> jnp.sort_complex(jnp.array([1 + 2j, 3 - 1j, 1 + 1j]))
        Array([1.+1.j, 1.+2.j, 3.-1.j], dtype=complex64)
    """
    check_arraylike("sort_complex", a)
    a = ensure_array(a)
    canonicalize_axis("sort_complex", -1, a.ndim)  # a 0-d array has no axis to sort
    out = _complex_dtype(a.dtype)
    a = lax.convert_element_type(a, a.dtype, False)
    last = a.ndim - 1
    if dtypes.is_complex(a.dtype):
        re, im = lax.sort((lax.real(a), lax.imag(a)), dimension=last, num_keys=2)
        return lax.complex(re, im)
    return lax.convert_element_type(lax.sort(a, dimension=last), out)


__all__ = [
    "bartlett", "blackman", "hamming", "hanning", "kaiser", "i0", "spacing", "unwrap",
    "gradient", "bitwise_count", "packbits", "unpackbits", "sort_complex",
]
