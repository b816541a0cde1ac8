"""More of ``jax.scipy.special``: the incomplete beta function, exponential integrals,
``erfcx``, ``loggamma``, ``poch``, ``comb``, ``spence`` and the Bernoulli numbers.

Written on lax with fixed term counts (series, continued fractions evaluated backward or by
Lentz's method, asymptotic expansions), so they trace, jit, vmap and differentiate.
Derivatives JAX fixes by hand are ``custom_jvp`` rules with the same formulas.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ember import lax
from ember import numpy as jnp
from ember.custom_derivatives import custom_jvp
from ember.numpy._util import concrete_index, promote_args_inexact

Array = Any
ArrayLike = Any

__all__ = ["bernoulli", "betainc", "comb", "erfcx", "exp1", "expi", "expn", "loggamma",
           "poch", "spence"]

_EULER = 0.57721566490153286061


def _real(fn: str, *args: ArrayLike) -> list[Array]:
    out = promote_args_inexact(fn, *args)
    if jnp.issubdtype(out[0].dtype, np.complexfloating):
        raise ValueError(f"{fn} does not support complex-valued inputs.")
    return out


def _c(x: Array, v: float) -> float:
    del x  # (a Python float takes x's dtype and keeps its weak type)
    return float(v)


def _strong(x: Array) -> Array:
    """``x`` without its weak type (as JAX's results of these functions)."""
    return lax.convert_element_type(x, x.dtype)


# ---------------------------------------------------------------- gamma relatives


def loggamma(x: ArrayLike) -> Array:
    """``log(Gamma(x))`` for real ``x``: NaN where ``x <= 0`` (as JAX, for real inputs).

    Example:
        >>> ember.scipy.special.loggamma(jnp.array([4.]))
        Array([1.7917595], dtype=float32)
    """
    (x,) = _real("loggamma", x)
    return jnp.where(x > 0, lax.lgamma(x), _c(x, np.nan))


@custom_jvp
def _poch(z: Array, m: Array) -> Array:
    from ember.scipy.special import gamma
    return jnp.where(m == 0, jnp.ones_like(z), gamma(z + m) / gamma(z))


_poch.defjvps(
    lambda g, ans, z, m: g * (lax.digamma(z + m) - lax.digamma(z)) * ans,
    lambda g, ans, z, m: g * lax.digamma(z + m) * ans,
)


def poch(z: ArrayLike, m: ArrayLike) -> Array:
    """The Pochhammer symbol (rising factorial) ``Gamma(z + m) / Gamma(z)``; 1 where
    ``m == 0``.

    Example:
        >>> ember.scipy.special.poch(jnp.array([2.]), jnp.array([3.]))
        Array([24.], dtype=float32)
    """
    z, m = _real("poch", z, m)
    return _poch(z, m)


def comb(N: ArrayLike, k: ArrayLike, *, repetition: bool = False) -> Array:
    """The number of combinations of ``N`` things taken ``k`` at a time, as a float
    (``exp`` of log-gammas); 0 outside ``0 <= k <= N``. ``repetition=True`` counts
    combinations with repetition, ``comb(N + k - 1, k)`` (1 where ``k == 0 <= N``).

    Example:
        >>> ember.scipy.special.comb(jnp.array([5.]), jnp.array([2.]))
        Array([9.999995], dtype=float32)
    """
    N, k = _real("comb", N, k)
    if repetition:
        out = comb(N + k - 1, k)
        return jnp.where((k == 0) & (N >= 0), _c(out, 1.0), out)
    ok = (k <= N) & (N >= 0) & (k >= 0)
    n_s = jnp.where(ok, N, _c(N, 0.0))
    k_s = jnp.where(ok, k, _c(k, 0.0))
    out = lax.exp(lax.lgamma(n_s + 1) - lax.lgamma(k_s + 1) - lax.lgamma(n_s + 1 - k_s))
    return jnp.where(ok, out, _c(out, 0.0))


def _bernoulli_exact(n: int) -> list[Fraction]:
    """B_0..B_n (B_1 = -1/2) by the Akiyama-Tanigawa algorithm, in exact rationals."""
    out, row = [], []
    for m in range(n + 1):
        row.append(Fraction(1, m + 1))
        for j in range(m, 0, -1):
            row[j - 1] = j * (row[j - 1] - row[j])
        out.append(row[0])
    if n >= 1:
        out[1] = -out[1]  # (the algorithm gives B_1 = +1/2)
    return out


def bernoulli(n: int) -> Array:
    """The Bernoulli numbers ``B_0 .. B_n`` (with ``B_1 = -1/2``), a float array of length
    ``n + 1``; ``n`` must be a concrete non-negative integer.

    Example:
        >>> ember.scipy.special.bernoulli(4)
        Array([ 1.        , -0.5       ,  0.16666667,  0.        , -0.03333334],      dtype=float32)
    """
    n = concrete_index("bernoulli", "n", n)
    if n < 0:
        raise ValueError(f"bernoulli: n must be a non-negative integer, got {n}.")
    vals = [float(b) if abs(b) < 1e300 else math.copysign(math.inf, b)
            for b in _bernoulli_exact(n)]
    return jnp.asarray(np.array(vals), dtype=jnp.result_type(float))


# ---------------------------------------------------------------- erfcx

_ERFCX_CF = 60      # terms of the continued fraction for erfc (x >= _ERFCX_SWITCH)
_ERFCX_SWITCH = 2.0


def _erfcx_impl(x: Array) -> Array:
    # exp(x^2) erfc(x) directly below the switch (erfc keeps its relative accuracy there,
    # and overflows to inf for very negative x as it should); above it the Laplace
    # continued fraction erfc(x) = exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/...))),
    # evaluated backward.
    small = jnp.minimum(x, _c(x, _ERFCX_SWITCH))
    direct = lax.exp(small * small) * lax.erfc(small)
    big = jnp.maximum(x, _c(x, _ERFCX_SWITCH))
    f = jnp.zeros_like(big)
    for k in range(_ERFCX_CF, 0, -1):
        f = _c(x, k / 2) / (big + f)
    cf = _c(x, 1 / math.sqrt(math.pi)) / (big + f)
    return jnp.where(x < _c(x, _ERFCX_SWITCH), direct, cf)


@custom_jvp
def _erfcx(x: Array) -> Array:
    return _erfcx_impl(x)


_erfcx.defjvps(lambda g, ans, x: g * (2 * x * ans - _c(x, 2 / math.sqrt(math.pi))))


def erfcx(x: ArrayLike) -> Array:
    """The scaled complementary error function ``exp(x**2) * erfc(x)`` (real inputs).

    Example:
        >>> ember.scipy.special.erfcx(jnp.array([2.]))
        Array([0.2553957], dtype=float32)
    """
    (x,) = _real("erfcx", x)
    return _strong(_erfcx(x))


# ---------------------------------------------------------------- exponential integrals

_EXPN_SERIES = 40
_EXPN_CF = 120
_EXPI_SERIES = 160
_EXPI_ASYMPT = 40.0   # asymptotic expansion of Ei above this


def _expn_series(n: Array, x: Array) -> Array:
    """E_n(x) for integer n >= 1 and 0 < x <= 1 (Abramowitz & Stegun 5.1.12)."""
    total = jnp.zeros_like(x)
    term = jnp.ones_like(x)  # (-x)^k / k!
    for k in range(_EXPN_SERIES):
        if k:
            term = term * (-x) / _c(x, k)
        den = _c(x, k) - n + 1
        total = total - jnp.where(den == 0, _c(x, 0.0), term / jnp.where(den == 0, 1, den))
    nm1 = n - 1
    sign = jnp.where(jnp.remainder(nm1, 2) == 0, _c(x, 1.0), _c(x, -1.0))
    lead = sign * lax.exp(nm1 * lax.log(x) - lax.lgamma(n))
    lead = jnp.where(nm1 == 0, _c(x, 1.0), lead)
    return total + lead * (lax.digamma(n) - lax.log(x))


def _expn_cf(n: Array, x: Array) -> Array:
    """E_n(x) for x > 1: e^-x / (x + n - 1 n/(x + n + 2 - 2 (n+1)/(x + n + 4 - ...))),
    evaluated backward (A & S 5.1.22)."""
    f = jnp.zeros_like(x)
    for i in range(_EXPN_CF, 0, -1):
        f = -_c(x, i) * (n + (i - 1)) / (x + n + _c(x, 2 * i) + f)
    return lax.exp(-x) / (x + n + f)


def _expn_impl(n: Array, x: Array) -> Array:
    one = _c(x, 1.0)
    use_cf = x > one
    n_s = jnp.where(n >= 1, n, one)
    x_ser = jnp.where(use_cf | (x <= 0), one, x)
    x_cf = jnp.where(use_cf, x, _c(x, 2.0))
    out = jnp.where(use_cf, _expn_cf(n_s, x_cf), _expn_series(n_s, x_ser))
    x_pos = jnp.where(x > 0, x, one)
    out = jnp.where(n == 0, lax.exp(-x_pos) / x_pos, out)
    out = jnp.where(x == 0, jnp.where(n < 2, _c(x, np.inf),
                                      one / jnp.where(n < 2, _c(x, 2.0), n - 1)), out)
    out = jnp.where(x == _c(x, np.inf), _c(x, 0.0), out)
    return jnp.where((n < 0) | (x < 0) | jnp.isnan(x) | jnp.isnan(n), _c(x, np.nan), out)


@custom_jvp
def _expn(n: Array, x: Array) -> Array:
    return _expn_impl(n, x)


def _expn_jvp(primals, tangents):
    n, x = primals
    _, dx = tangents
    # d/dx E_n = -E_{n-1}; E_{-1}(x) = e^-x (x + 1) / x^2 (E_n's integral, not the NaN
    # that expn gives for negative n), so that E_1 has second derivatives.
    lower = _expn(jnp.maximum(n - 1, _c(n, 0.0)), x)
    e_m1 = lax.exp(-x) * (x + 1) / (x * x)
    return _expn(n, x), -dx * jnp.where(n >= 1, lower, e_m1)


_expn.defjvp(_expn_jvp)


def expn(n: ArrayLike, x: ArrayLike) -> Array:
    """The generalized exponential integral ``E_n(x) = int_1^inf exp(-x t) / t**n dt`` for
    integer ``n >= 0`` and ``x >= 0`` (NaN for negative arguments; differentiable in ``x``).

    Example:
        >>> ember.scipy.special.expn(2, jnp.array([1.]))
        Array([0.14849551], dtype=float32)
    """
    n, x = _real("expn", n, x)
    n, x = jnp.broadcast_arrays(n, x)
    return _strong(_expn(lax.stop_gradient(n), x))


def exp1(x: ArrayLike) -> Array:
    """The exponential integral ``E_1(x) = int_x^inf exp(-t) / t dt`` (``x >= 0``).

    Example:
        >>> ember.scipy.special.exp1(jnp.array([1.]))
        Array([0.21938393], dtype=float32)
    """
    (x,) = _real("exp1", x)
    return _strong(_expn(jnp.ones_like(x), x))


def _ei_pos(x: Array) -> Array:
    """Ei(x) for x > 0: the positive power series below _EXPI_ASYMPT, the asymptotic
    expansion e^x/x sum k!/x^k above (truncated before its terms grow)."""
    xs = jnp.minimum(x, _c(x, _EXPI_ASYMPT))
    term = jnp.ones_like(xs)
    total = jnp.zeros_like(xs)
    for k in range(1, _EXPI_SERIES):
        term = term * xs / _c(x, k)
        total = total + term / _c(x, k)
    series = _c(x, _EULER) + lax.log(xs) + total
    xb = jnp.maximum(x, _c(x, _EXPI_ASYMPT))
    term = jnp.ones_like(xb)
    total = term
    for k in range(1, 36):
        term = term * _c(x, k) / xb
        total = total + term
    half = lax.exp(xb / 2)  # (two halves: exp(x)/x overflows before the product does)
    asympt = half * (total / xb) * half
    return jnp.where(x < _c(x, _EXPI_ASYMPT), series, asympt)


@custom_jvp
def _expi(x: Array) -> Array:
    one = _c(x, 1.0)
    neg = -jnp.where(x < 0, -x, one)
    pos = jnp.where(x > 0, x, one)
    out = jnp.where(x < 0, -_expn_impl(jnp.ones_like(x), -neg), _ei_pos(pos))
    out = jnp.where(x == _c(x, np.inf), x, out)
    return jnp.where(x == 0, _c(x, -np.inf), jnp.where(jnp.isnan(x), x, out))


_expi.defjvps(lambda g, ans, x: g * lax.exp(x) / x)


def expi(x: ArrayLike) -> Array:
    """The exponential integral ``Ei(x) = -PV int_{-x}^inf exp(-t) / t dt``
    (``Ei(x) = -E_1(-x)`` for ``x < 0``).

    Example:
        >>> ember.scipy.special.expi(jnp.array([1.]))
        Array([1.8951179], dtype=float32)
    """
    (x,) = _real("expi", x)
    return _strong(_expi(x))


# ---------------------------------------------------------------- incomplete beta


def betainc(a: ArrayLike, b: ArrayLike, x: ArrayLike) -> Array:
    """The regularized incomplete beta function ``I_x(a, b)``, differentiable in ``x``
    (a derivative in ``a`` or ``b`` raises ValueError, as in JAX).

    Example:
        >>> ember.scipy.special.betainc(jnp.array([2.]), jnp.array([3.]), jnp.array([0.5]))
        Array([0.6875], dtype=float32)
    """
    a, b, x = _real("betainc", a, b, x)
    return lax.betainc(*jnp.broadcast_arrays(a, b, x))


# ---------------------------------------------------------------- spence

# B_2k / (2k+1)! for k = 1..10: Li2(z) = u - u^2/4 + sum_k B_2k u^(2k+1)/(2k+1)!,
# u = -log(1 - z), converging for |u| < 2 pi.
_LI2_COEFFS = [float(b / math.factorial(2 * k + 1))
               for k, b in enumerate(_bernoulli_exact(20)[2::2], start=1)]


def _spence_near_one(x: Array) -> Array:
    """spence(x) = Li2(1 - x) for x in [1/2, 2] (|u| = |log x| <= log 2)."""
    u = -lax.log(x)
    u2 = u * u
    acc = jnp.zeros_like(x)
    for c in reversed(_LI2_COEFFS):
        acc = acc * u2 + _c(x, c)
    return u - u2 / 4 + u * u2 * acc


def _spence_0_2(x: Array) -> Array:
    """x in [0, 2]: below 1/2 the reflection Li2(z) + Li2(1-z) = pi^2/6 - log z log(1-z)."""
    half = _c(x, 0.5)
    low = x < half
    y = jnp.where(low, 1 - x, x)
    near = _spence_near_one(y)
    xs = jnp.where(low & (x > 0), x, half)
    refl = _c(x, math.pi ** 2 / 6) - lax.log(xs) * lax.log1p(-xs) - near
    refl = jnp.where(x == 0, _c(x, math.pi ** 2 / 6), refl)
    return jnp.where(low, refl, near)


@custom_jvp
def _spence(x: Array) -> Array:
    two = _c(x, 2.0)
    big = x > two
    xb = jnp.where(big, x, two)
    inv = -_spence_0_2(1 / xb) - lax.log(xb) ** 2 / 2  # spence(x) + spence(1/x) = -log^2 x / 2
    out = jnp.where(big, inv, _spence_0_2(jnp.where(big | (x < 0), _c(x, 1.0), x)))
    return jnp.where(x < 0, _c(x, np.nan), out)


def _spence_deriv(x: Array) -> Array:
    # d/dx Li2(1 - x) = log(x) / (1 - x); -1 at x == 1.
    one = x == 1
    return jnp.where(one, _c(x, -1.0), lax.log(x) / jnp.where(one, _c(x, 2.0), 1 - x))


_spence.defjvps(lambda g, ans, x: g * _spence_deriv(x))


def spence(x: ArrayLike) -> Array:
    """Spence's function (dilogarithm) ``int_1^x log(t) / (1 - t) dt = Li2(1 - x)`` for
    real ``x >= 0`` (NaN below 0). Accepts float32 and float64 only, as JAX.

    Example:
        >>> ember.scipy.special.spence(jnp.array([0.5]))
        Array([0.58224053], dtype=float32)
    """
    x = jnp.asarray(x)
    if np.dtype(x.dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"x.dtype={np.dtype(x.dtype)} is not supported, see docstring for "
                        "supported types.")
    return _strong(_spence(x))
