"""More of ``jax.scipy.special``: the Box-Cox transforms, ``bessel_jn`` (Bessel functions of
the first kind of integer order, by Miller's backward recurrence), the Faddeeva function
``wofz`` (Weideman's rational approximation) and what follows from it (``dawsn``,
``fresnel``), and the sine/cosine integrals ``sici``; written on lax and ``ember.numpy`` so
they trace, jit, vmap and differentiate.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from ember import core, lax
from ember import numpy as jnp
from ember.custom_derivatives import custom_jvp
from ember.numpy._util import promote_args_inexact

Array = Any
ArrayLike = Any

__all__ = ["bessel_jn", "boxcox", "boxcox1p", "dawsn", "fresnel", "sici", "wofz"]


def _real(fn: str, *args: ArrayLike) -> list[Array]:
    out = promote_args_inexact(fn, *args)
    if jnp.issubdtype(out[0].dtype, np.complexfloating):
        raise TypeError(f"{fn} does not accept dtype {np.dtype(out[0].dtype)}. Accepted "
                        "dtypes are subtypes of floating.")
    return out


def _boxcox_of_log(log_x: Array, lmbda: Array) -> Array:
    # (x**l - 1) / l as expm1(l log x) / l: no cancellation for small l; log x at l == 0.
    zero = lmbda == 0
    safe = jnp.where(zero, jnp.ones_like(lmbda), lmbda)
    return jnp.where(zero, log_x, jnp.expm1(safe * log_x) / safe)


def boxcox(x: ArrayLike, lmbda: ArrayLike) -> Array:
    """The Box-Cox transform ``(x**lmbda - 1) / lmbda``, ``log(x)`` at ``lmbda == 0``
    (NaN for negative ``x``).

    Args:
        x: positive input.
        lmbda: the power.

    Example:
        >>> ember.scipy.special.boxcox(jnp.array([1., 4.]), 0.5)
        Array([0., 2.], dtype=float32)
    """
    x, lmbda = _real("boxcox", x, lmbda)
    return _boxcox_of_log(jnp.log(x), lmbda)


def boxcox1p(x: ArrayLike, lmbda: ArrayLike) -> Array:
    """The Box-Cox transform of ``1 + x``, accurate for small ``x`` (NaN for ``x < -1``).

    Args:
        x: input greater than -1.
        lmbda: the power.

    Example:
        >>> ember.scipy.special.boxcox1p(jnp.array([0., 3.]), 0.5)
        Array([0., 2.], dtype=float32)
    """
    x, lmbda = _real("boxcox1p", x, lmbda)
    return _boxcox_of_log(jnp.log1p(x), lmbda)


_RESCALE = 1e4  # backward-recurrence values are scaled back to 1 past this (float32 range,
# with room for the second-order tangents, which grow like (n / z)**2 times the values)


def _bessel_jn_miller(z: Array, v: int, n_iter: int) -> Array:
    """J_0..J_v at z != 0 by Miller's algorithm: the recurrence
    f_{k-1} = 2k/z f_k - f_{k+1} run downward from k = n_iter with an arbitrary tiny start,
    then normalized by J_0 + 2 (J_2 + J_4 + ...) = 1. Values are rescaled whenever they grow
    past ``_RESCALE`` (the result is a ratio: any scale cancels), so float32 does not overflow."""
    f_next = jnp.zeros_like(z)   # f_{k+1}
    f_cur = jnp.full_like(z, 1e-30)  # f_k
    norm = jnp.zeros_like(z)
    kept: list[Array | None] = [None] * (v + 1)
    for k in range(n_iter, 0, -1):
        f_prev = (2.0 * k) * f_cur / z - f_next
        f_next, f_cur = f_cur, f_prev  # now f_cur = f_{k-1}
        if (k - 1) % 2 == 0 and k - 1 > 0:
            norm = norm + 2.0 * f_cur
        if k - 1 <= v:
            kept[k - 1] = f_cur
        # Rescale everything carried (and the orders already kept) together.
        big = jnp.abs(f_cur) > _RESCALE
        scale = jnp.where(big, 1.0 / jnp.where(big, jnp.abs(f_cur), 1.0), 1.0)
        f_cur, f_next, norm = f_cur * scale, f_next * scale, norm * scale
        kept = [None if j is None else j * scale for j in kept]
    if n_iter <= v:  # orders above the start are 0 in this truncation
        kept = [jnp.zeros_like(z) if j is None else j for j in kept]
    norm = norm + f_cur  # + f_0
    return jnp.stack(kept) / norm


def bessel_jn(z: ArrayLike, *, v: int, n_iter: int = 50) -> Array:
    """Bessel functions of the first kind ``J_0(z), ..., J_v(z)`` of real ``z``.

    Args:
        z: real input.
        v: the highest order (a concrete non-negative integer).
        n_iter: where the backward recurrence starts (more for larger ``|z|``: it must
            exceed ``|z|`` comfortably).

    Returns:
        An array of shape ``(v + 1, *z.shape)``, row ``k`` holding ``J_k(z)``.

    Example:
        >>> ember.scipy.special.bessel_jn(jnp.array([1.]), v=1)
        Array([[0.7651977 ],
               [0.44005057]], dtype=float32)
    """
    z = jnp.asarray(z)
    (z,) = promote_args_inexact("bessel_jn", z)
    if jnp.issubdtype(z.dtype, np.complexfloating):
        raise ValueError("complex input not supported.")
    try:
        v = operator.index(core.concrete_or_error(v, "Argument v of bessel_jn."))
        n_iter = operator.index(core.concrete_or_error(n_iter, "Argument n_iter of bessel_jn."))
    except TypeError:
        raise TypeError(f"bessel_jn: v and n_iter must be integers, got v={v!r}, "
                        f"n_iter={n_iter!r}") from None
    if v < 0:
        raise ValueError(f"bessel_jn: v must be non-negative, got {v}")
    if n_iter < 1:
        raise ValueError(f"bessel_jn: n_iter must be positive, got {n_iter}")
    # J_k(-z) = (-1)^k J_k(z); at z == 0, J_0 = 1 and the others vanish.
    az = jnp.abs(z)
    zero = az == 0
    vals = _bessel_jn_miller(jnp.where(zero, jnp.ones_like(az), az), v, n_iter)
    signs = np.array([(-1.0) ** k for k in range(v + 1)]).reshape((v + 1,) + (1,) * z.ndim)
    vals = jnp.where(z < 0, vals * signs.astype(z.dtype), vals)
    at_zero = np.eye(v + 1, 1).reshape((v + 1,) + (1,) * z.ndim).astype(z.dtype)
    return lax.convert_element_type(jnp.where(zero, at_zero, vals), z.dtype)


# ---------------------------------------------------------------- Faddeeva function

_SQRT_PI = math.sqrt(math.pi)


def _weideman_coefficients(n: int) -> tuple[np.ndarray, float]:
    """Weideman's (1994) coefficients: w(z) = 2 p(Z) / (L - iz)^2 + 1 / (sqrt(pi) (L - iz))
    with Z = (L + iz) / (L - iz) and p a polynomial of degree n - 1 (highest power first),
    from the FFT of exp(-t^2) (L^2 + t^2) sampled at t = L tan(theta / 2)."""
    m = 2 * n
    big_l = math.sqrt(n / math.sqrt(2))
    theta = np.arange(-m + 1, m) * np.pi / m
    t = big_l * np.tan(theta / 2)
    f = np.concatenate([[0.0], np.exp(-t * t) * (big_l * big_l + t * t)])
    a = np.real(np.fft.fft(np.fft.fftshift(f))) / (2 * m)
    return a[1:n + 1][::-1].copy(), big_l


_WEIDEMAN_A, _WEIDEMAN_L = _weideman_coefficients(40)


def _wofz_upper(z: Array) -> Array:
    """w(z) for Im z >= 0."""
    lz = _WEIDEMAN_L - 1j * z
    big_z = (_WEIDEMAN_L + 1j * z) / lz
    p = jnp.zeros_like(z)
    for coef in _WEIDEMAN_A:  # (Horner)
        p = p * big_z + coef
    return 2 * p / (lz * lz) + (1 / _SQRT_PI) / lz


@custom_jvp
def _wofz(z: Array) -> Array:
    # The lower half plane by w(z) = 2 exp(-z^2) - w(-z).
    lower = jnp.imag(z) < 0
    w = _wofz_upper(jnp.where(lower, -z, z))
    return jnp.where(lower, 2 * jnp.exp(-z * z) - w, w)


_wofz.defjvps(lambda g, ans, z: g * (2j / _SQRT_PI - 2 * z * ans))


def _complex(fn: str, z: ArrayLike) -> Array:
    (z,) = promote_args_inexact(fn, z)
    z = lax.convert_element_type(z, jnp.promote_types(z.dtype, np.complex64))
    return z


def wofz(z: ArrayLike) -> Array:
    """The Faddeeva function ``w(z) = exp(-z**2) erfc(-iz)`` (complex result).

    Args:
        z: real or complex input (promoted to complex).

    Example:
        >>> ember.scipy.special.wofz(jnp.complex64(1 + 1j))
        Array(0.30474418+0.20821893j, dtype=complex64)
    """
    return _wofz(_complex("wofz", z))


def _real_only(fn: str, x: ArrayLike) -> Array:
    (x,) = promote_args_inexact(fn, x)
    if jnp.issubdtype(x.dtype, np.complexfloating):
        raise ValueError(f"{fn} does not support complex-valued inputs.")
    return lax.convert_element_type(x, x.dtype)  # (JAX's results are never weak here)


def _nan_through(x: Array, outs: tuple[Array, ...]) -> tuple[Array, ...]:
    """Each of ``outs`` with NaN wherever ``x`` is NaN."""
    nan = jnp.isnan(x)
    return tuple(jnp.where(nan, x, v) for v in outs)


def _series(x: Array, coefs: list[float]) -> Array:
    """sum_k coefs[k] x**k by Horner."""
    out = jnp.zeros_like(x)
    for c in coefs[::-1]:
        out = out * x + c
    return out


@custom_jvp
def _dawsn(x: Array) -> Array:
    # Taylor series near 0 (where Im w(x) ~ 2x / sqrt(pi) would carry w's absolute error),
    # sqrt(pi)/2 Im w(x) elsewhere; 1 / (2x) beyond where w's 1/x tail is exact.
    ax = jnp.abs(x)
    near = _series(x * x, [(-2.0) ** k / math.prod(range(1, 2 * k + 2, 2)) for k in range(9)])
    far = (_SQRT_PI / 2) * jnp.imag(_wofz(lax.convert_element_type(
        jnp.minimum(ax, 1e6), jnp.promote_types(x.dtype, np.complex64))))
    out = jnp.where(ax < 0.5, x * near, jnp.sign(x) * jnp.where(ax > 1e6, 0.5 / ax, far))
    return jnp.where(jnp.isinf(x), jnp.sign(x) * 0.0, out)


_dawsn.defjvps(lambda g, ans, x: g * (1 - 2 * x * ans))


def dawsn(x: ArrayLike) -> Array:
    """Dawson's integral ``F(x) = exp(-x**2) * integral_0^x exp(t**2) dt``.

    Example:
        >>> ember.scipy.special.dawsn(jnp.float32(1.))
        Array(0.5380795, dtype=float32)
    """
    x = _real_only("dawsn", x)
    return jnp.where(jnp.isnan(x), x, _dawsn(x))


_FRESNEL_SWITCH = 1.6  # power series below (in |x|), the Faddeeva function above


def _fresnel_impl(x: Array) -> tuple[Array, Array]:
    ax = jnp.abs(x)
    # Series: C = sum (-1)^n (pi/2)^(2n) x^(4n+1) / ((2n)! (4n+1)), S likewise with 2n+1.
    small = jnp.minimum(ax, _FRESNEL_SWITCH)
    u = small ** 4
    half_pi = math.pi / 2
    c_co = [(-1) ** n * half_pi ** (2 * n) / (math.factorial(2 * n) * (4 * n + 1))
            for n in range(18)]
    s_co = [(-1) ** n * half_pi ** (2 * n + 1) / (math.factorial(2 * n + 1) * (4 * n + 3))
            for n in range(18)]
    c_small, s_small = small * _series(u, c_co), small ** 3 * _series(u, s_co)
    # C + iS = (1 + i)/2 (1 - exp(i pi x^2 / 2) w((1 + i) sqrt(pi) x / 2)), x > 0.
    big = jnp.maximum(ax, _FRESNEL_SWITCH)
    cdt = jnp.promote_types(x.dtype, np.complex64)
    big_c = lax.convert_element_type(big, cdt)
    # (x^2 reduced mod 4 before scaling by pi/2: the phase of a large x keeps its digits)
    sq = big * big
    sq = lax.convert_element_type(sq - 4 * jnp.round(sq / 4), cdt)
    phase = jnp.exp(1j * (half_pi * sq))
    val = (0.5 + 0.5j) * (1 - phase * _wofz_upper((0.5 + 0.5j) * _SQRT_PI * big_c))
    near = ax < _FRESNEL_SWITCH
    sgn = jnp.sign(x)
    c = sgn * jnp.where(near, c_small, jnp.where(jnp.isinf(ax), 0.5, jnp.real(val)))
    s = sgn * jnp.where(near, s_small, jnp.where(jnp.isinf(ax), 0.5, jnp.imag(val)))
    return s, c


_fresnel = custom_jvp(_fresnel_impl)


@_fresnel.defjvp
def _fresnel_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    arg = (math.pi / 2) * x * x
    return _fresnel(x), (t * jnp.sin(arg), t * jnp.cos(arg))


def fresnel(x: ArrayLike) -> tuple[Array, Array]:
    """The Fresnel integrals ``S(x) = int_0^x sin(pi t^2 / 2) dt`` and
    ``C(x) = int_0^x cos(pi t^2 / 2) dt``.

    Returns:
        The pair ``(S, C)``.

    Example:
        >>> ember.scipy.special.fresnel(jnp.float32(1.))
        (Array(0.43825915, dtype=float32), Array(0.7798934, dtype=float32))
    """
    x = _real_only("fresnel", x)
    return _nan_through(x, _fresnel(x))


# ---------------------------------------------------------------- sine and cosine integrals

_EULER = 0.57721566490153286061
_SICI_SWITCH = 4.0   # power series below (in |x|), E1(ix)'s continued fraction above
_SICI_CF = 60


def _sici_impl(x: Array) -> tuple[Array, Array]:
    ax = jnp.abs(x)
    small = jnp.minimum(ax, _SICI_SWITCH)
    u = small * small
    si_co = [(-1) ** n / ((2 * n + 1) * math.factorial(2 * n + 1)) for n in range(16)]
    ci_co = [0.0] + [(-1) ** n / (2 * n * math.factorial(2 * n)) for n in range(1, 16)]
    si_small = small * _series(u, si_co)
    ci_small = _EULER + jnp.log(small) + _series(u, ci_co)
    # E1(ix) = -Ci(x) + i (Si(x) - pi/2) = exp(-ix) / (ix + 1 - 1/(ix + 3 - 4/(ix + 5 - ...)))
    # (evaluated backward, fixed depth: it converges fast for x >= 4).
    big = jnp.maximum(ax, _SICI_SWITCH)
    b0 = lax.complex(jnp.ones_like(big), big)  # 1 + ix
    f = jnp.zeros_like(b0)
    for k in range(_SICI_CF, 0, -1):
        f = -(k * k) / (b0 + 2 * k + f)
    e1 = jnp.exp(-1j * lax.convert_element_type(big, b0.dtype)) / (b0 + f)
    near = ax < _SICI_SWITCH
    si = jnp.where(near, si_small, jnp.where(jnp.isinf(ax), math.pi / 2,
                                             jnp.imag(e1) + math.pi / 2))
    ci = jnp.where(near, ci_small, jnp.where(jnp.isinf(ax), 0.0, -jnp.real(e1)))
    return jnp.sign(x) * si, ci


_sici = custom_jvp(_sici_impl)


@_sici.defjvp
def _sici_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _sici(x), (t * jnp.sinc(x / math.pi), t * jnp.cos(x) / x)


def sici(x: ArrayLike) -> tuple[Array, Array]:
    """The sine and cosine integrals ``Si(x) = int_0^x sin(t)/t dt`` and
    ``Ci(x) = gamma + log|x| + int_0^x (cos(t) - 1)/t dt`` (``Ci(-x) = Ci(x)``, NaN at -inf,
    as JAX).

    Returns:
        The pair ``(Si, Ci)``.

    Example:
        >>> ember.scipy.special.sici(jnp.float32(1.))
        (Array(0.94608307, dtype=float32), Array(0.33740392, dtype=float32))
    """
    x = _real_only("sici", x)
    si, ci = _sici(x)
    ci = jnp.where(x == 0, -np.inf, jnp.where(x == -np.inf, np.nan, ci))
    return _nan_through(x, (si, ci))
