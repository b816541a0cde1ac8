"""``jax.scipy.special``: special functions written on lax (series, asymptotic expansions and
continued fractions with fixed term counts, so they trace, jit, vmap and differentiate).

The incomplete gamma, zeta, polygamma and scaled Bessel functions are lax's special-function
primitives (``ember/lax/special.py``), as in JAX. Derivatives JAX fixes by hand (logit, xlogy,
xlog1py, x*log(x), log_ndtr, zeta) are ``custom_jvp`` rules with the same formulas; the rest
differentiate their formulas.
"""

from __future__ import annotations

import math
import operator
import sys as _sys
from typing import Any

import numpy as np

from ember import lax
from ember import nn as _nn
from ember import numpy as jnp
from ember.custom_derivatives import custom_jvp
from ember.nn.functions import logsumexp
from ember.numpy import _fastpath
from ember.numpy._util import promote_args_inexact
from ember.scipy import special_extra, special_hyp, special_more
from ember.scipy.special_extra import *  # noqa: F403  (more functions, re-exported)
from ember.scipy.special_extra import _real
from ember.scipy.special_hyp import *  # noqa: F403  (more functions, re-exported)
from ember.scipy.special_more import *  # noqa: F403  (more functions, re-exported)

Array = Any
ArrayLike = Any

__all__ = [
    "beta", "betaln", "digamma", "entr", "erf", "erfc", "erfinv", "expit", "factorial",
    "gamma", "gammainc", "gammaincc", "gammaln", "gammasgn", "i0", "i0e", "i1", "i1e",
    "kl_div", "log_ndtr", "log_softmax", "logit", "logsumexp", "multigammaln", "ndtr",
    "ndtri", "polygamma", "rel_entr", "softmax", "xlog1py", "xlogy", "zeta",
    *special_extra.__all__, *special_hyp.__all__, *special_more.__all__,
]


def _strong(x: Array) -> Array:
    """``x`` without its weak type (JAX's results of these functions are never weak)."""
    return lax.convert_element_type(x, x.dtype)


def _c(x: Array, v: float) -> float:
    """The constant ``v`` for arithmetic with ``x``: a Python float, which takes ``x``'s dtype
    and keeps its weak type (a NumPy scalar would make a weakly typed ``x`` strong)."""
    return float(v)


# ---------------------------------------------------------------- gamma family


def gammaln(x: ArrayLike) -> Array:
    """``log|Gamma(x)|``.

    Example:
        >>> ember.scipy.special.gammaln(jnp.array([4.]))
        Array([1.7917595], dtype=float32)
    """
    (x,) = _real("gammaln", x)
    return lax.lgamma(x)


def gammasgn(x: ArrayLike) -> Array:
    """The sign of ``Gamma(x)``: NaN at poles (non-positive integers) and -inf, -1 at -0.

    Example:
        >>> ember.scipy.special.gammasgn(jnp.array([-0.5, 0.5]))
        Array([-1.,  1.], dtype=float32)
    """
    (x,) = _real("gammasgn", x)
    fl = lax.floor(x)
    neg = x < 0
    pole = (neg & (x == fl)) | jnp.isnan(x)
    minus = (neg & (jnp.remainder(fl, 2) != 0)) | ((x == 0) & jnp.signbit(x))
    return _strong(jnp.where(pole, _c(x, np.nan), jnp.where(minus, _c(x, -1.0), _c(x, 1.0))))


def gamma(x: ArrayLike) -> Array:
    """The gamma function (real inputs), ``gammasgn(x) * exp(gammaln(x))``.

    Example:
        >>> ember.scipy.special.gamma(jnp.array([5.]))
        Array([24.], dtype=float32)
    """
    (x,) = _real("gamma", x)
    return gammasgn(x) * lax.exp(lax.lgamma(x))


def factorial(n: ArrayLike, exact: bool = False) -> Array:
    """``Gamma(n + 1)`` as a float (0 for negative ``n``); ``exact=True`` is not supported.

    Example:
        >>> ember.scipy.special.factorial(jnp.array([4.]))
        Array([24.], dtype=float32)
    """
    if exact:
        raise NotImplementedError("factorial with exact=True")
    (n,) = _real("factorial", n)
    return jnp.where(n < 0, _c(n, 0.0), lax.exp(lax.lgamma(n + _c(n, 1.0))))


def betaln(a: ArrayLike, b: ArrayLike) -> Array:
    """``log|B(a, b)|`` = ``gammaln(a) + gammaln(b) - gammaln(a + b)``.

    Example:
        >>> ember.scipy.special.betaln(jnp.array([2.]), jnp.array([3.]))
        Array([-2.4849067], dtype=float32)
    """
    a, b = _real("betaln", a, b)
    return lax.lgamma(a) + lax.lgamma(b) - lax.lgamma(a + b)


def beta(a: ArrayLike, b: ArrayLike) -> Array:
    """The beta function ``Gamma(a) Gamma(b) / Gamma(a + b)``.

    Example:
        >>> ember.scipy.special.beta(jnp.array([2.]), jnp.array([3.]))
        Array([0.08333334], dtype=float32)
    """
    a, b = _real("beta", a, b)
    sign = gammasgn(a) * gammasgn(b) * gammasgn(a + b)
    return sign * lax.exp(betaln(a, b))


def digamma(x: ArrayLike) -> Array:
    """The digamma function ``d/dx log Gamma(x)``.

    Example:
        >>> ember.scipy.special.digamma(jnp.array([1.]))
        Array([-0.5772157], dtype=float32)
    """
    (x,) = _real("digamma", x)
    return lax.digamma(x)


def multigammaln(a: ArrayLike, d: int) -> Array:
    """Log of the multivariate gamma function of dimension ``d``.

    Example:
        >>> ember.scipy.special.multigammaln(jnp.array([3.]), 2)
        Array([1.2880225], dtype=float32)
    """
    try:
        d = operator.index(d)
    except TypeError:
        raise TypeError("multigammaln: the d argument must be a concrete integer, got "
                        f"{d!r}") from None
    (a,) = _real("multigammaln", a)
    const = _c(a, 0.25 * d * (d - 1) * math.log(math.pi))
    halves = np.arange(d, dtype=np.dtype(a.dtype)) / 2
    return jnp.sum(lax.lgamma(a[..., None] - halves), axis=-1) + const


def _zeta_series(x: Array, q: Array) -> Array:
    # lax.zeta's own lax-written sum (no primitive), differentiated by the custom_jvp below:
    # JAX likewise differentiates a series expansion (lax.zeta has no derivative).
    from ember.lax.special import _up_and_broadcast, _zeta_impl
    return _up_and_broadcast(_zeta_impl)(x, q)


@custom_jvp
def _zeta(x: Array, q: Array) -> Array:
    return lax.zeta(x, q)


@_zeta.defjvp
def _zeta_jvp(primals, tangents):
    from ember import jvp
    return _zeta(*primals), jvp(_zeta_series, primals, tangents)[1]


def zeta(x: ArrayLike, q: ArrayLike | None = None) -> Array:
    """The Hurwitz zeta function ``sum_k (k + q)**(-x)`` (``x > 1``, ``q > 0``).

    Args:
        x: the exponent.
        q: the shift; required (the Riemann zeta function ``q=None`` is not implemented, as
            in JAX).

    Example:
        >>> ember.scipy.special.zeta(jnp.array([2.]), 1.)
        Array([1.644934], dtype=float32)
    """
    if q is None:
        raise NotImplementedError("Riemann zeta function not implemented; pass q != None to "
                                  "compute the Hurwitz Zeta function.")
    x, q = _real("zeta", x, q)
    return _zeta(*jnp.broadcast_arrays(x, q))


def polygamma(n: ArrayLike, x: ArrayLike) -> Array:
    """The n-th derivative of digamma: ``(-1)**(n+1) n! zeta(n+1, x)`` for ``n >= 1``.

    Args:
        n: a non-negative integer array (the order).
        x: real input.

    Example:
        >>> ember.scipy.special.polygamma(1, jnp.array([1.]))
        Array([1.644934], dtype=float32)
    """
    if not jnp.issubdtype(jnp.result_type(n), np.integer):
        raise ValueError("Argument `n` to polygamma must be of integer type. Got dtype "
                         f"{jnp.result_type(n)}.")
    n, x = _real("polygamma", n, x)
    return lax.polygamma(*jnp.broadcast_arrays(n, x))


# ---------------------------------------------------------------- incomplete gamma

def gammainc(a: ArrayLike, x: ArrayLike) -> Array:
    """The regularized lower incomplete gamma function ``P(a, x)``.

    Example:
        >>> ember.scipy.special.gammainc(jnp.array([1.]), jnp.array([1.]))
        Array([0.63212055], dtype=float32)
    """
    return lax.igamma(*jnp.broadcast_arrays(*_real("gammainc", a, x)))


def gammaincc(a: ArrayLike, x: ArrayLike) -> Array:
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``.

    Example:
        >>> ember.scipy.special.gammaincc(jnp.array([1.]), jnp.array([1.]))
        Array([0.36787945], dtype=float32)
    """
    return lax.igammac(*jnp.broadcast_arrays(*_real("gammaincc", a, x)))


# ---------------------------------------------------------------- error function family


def erf(x: ArrayLike) -> Array:
    """The error function.

    Example:
        >>> ember.scipy.special.erf(jnp.array([0.5]))
        Array([0.5204999], dtype=float32)
    """
    (x,) = _real("erf", x)
    return lax.erf(x)


def erfc(x: ArrayLike) -> Array:
    """The complementary error function ``1 - erf(x)``.

    Example:
        >>> ember.scipy.special.erfc(jnp.array([0.5]))
        Array([0.47950014], dtype=float32)
    """
    (x,) = _real("erfc", x)
    return lax.erfc(x)


def erfinv(x: ArrayLike) -> Array:
    """The inverse error function.

    Example:
        >>> ember.scipy.special.erfinv(jnp.array([0.5]))
        Array([0.4769363], dtype=float32)
    """
    (x,) = _real("erfinv", x)
    return lax.erf_inv(x)


def _float_only(fn: str, x: ArrayLike) -> Array:
    x = jnp.asarray(x)
    if np.dtype(x.dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"{fn}: x.dtype={np.dtype(x.dtype)} is not supported, only float32 "
                        "and float64.")
    return _strong(x)  # (JAX's results are never weakly typed here)


def _ndtr(x: Array) -> Array:
    # erfc(-w) is 1 + erf(w) near 0 and 2 - erfc(w) past it as erfc computes it, so one
    # erfc is JAX's three-way choice between erf and erfc (which, fused, computed both for
    # every element: Black-Scholes on 1e6 options ran at JAX's speed).
    return _c(x, 0.5) * lax.erfc(-(x * _c(x, math.sqrt(0.5))))


def ndtr(x: ArrayLike) -> Array:
    """The standard normal CDF (float32/float64 inputs).

    Example:
        >>> ember.scipy.special.ndtr(jnp.array([0.]))
        Array([0.5], dtype=float32)
    """
    return _ndtr(_float_only("ndtr", x))


def _norm_logpdf(x: Array) -> Array:
    return _c(x, -0.5 * math.log(2 * math.pi)) - x * x / 2


def _log_ndtr_tail(x: Array, order: int) -> Array:
    """log Phi(x) for x << 0: log(phi(x) / -x) + log(1 + sum_n (-1)^n (2n-1)!! / x^(2n))."""
    x2 = x * x
    series = jnp.ones_like(x)
    power = jnp.ones_like(x)
    for n in range(1, order + 1):
        power = power / x2
        coef = float(np.prod(np.arange(1, 2 * n, 2, dtype=np.float64)))
        series = series + _c(x, (-1) ** n * coef) * power
    return _norm_logpdf(x) - lax.log(-x) + lax.log(series)


def _log_ndtr_impl(x: Array, order: int) -> Array:
    f64 = np.dtype(x.dtype) == np.float64
    lower, upper = (-20.0, 8.0) if f64 else (-10.0, 5.0)
    hi = x > upper
    mid = _ndtr(jnp.where(hi, -x, jnp.maximum(x, _c(x, lower))))
    tail = _log_ndtr_tail(jnp.minimum(x, _c(x, lower)), order)
    # Above `upper`, log(1 - Phi(-x)) ~ -Phi(-x).
    return jnp.where(hi, -mid, jnp.where(x > lower, lax.log(mid), tail))


_log_ndtr = custom_jvp(_log_ndtr_impl, nondiff_argnums=(1,))


@_log_ndtr.defjvp
def _log_ndtr_jvp(order, primals, tangents):
    (x,), (t,) = primals, tangents
    ans = _log_ndtr(x, order)
    return ans, t * lax.exp(_norm_logpdf(x) - ans)


def log_ndtr(x: ArrayLike, series_order: int = 3) -> Array:
    """``log(ndtr(x))``, accurate far into both tails (float32/float64 inputs).

    Args:
        x: input.
        series_order: terms of the asymptotic series used for very negative ``x`` (0..30).

    Example:
        >>> ember.scipy.special.log_ndtr(jnp.array([-20.]))
        Array([-203.91714], dtype=float32)
    """
    if not isinstance(series_order, int):
        raise TypeError("series_order must be a Python integer.")
    if series_order < 0:
        raise ValueError("series_order must be non-negative.")
    if series_order > 30:
        raise ValueError("series_order must be <= 30.")
    return _log_ndtr(_float_only("log_ndtr", x), series_order)


# Cephes' rational approximations of ndtri (Moshier, Cephes Math Library 2.1), the ones JAX
# evaluates: P0/Q0 on the centre (w = p - 1/2, |w| <= 3/8), P1/Q1 and P2/Q2 in 1/z for the tails
# (z = sqrt(-2 log p); P2/Q2 from z = 8). Coefficients from the highest power down; the Qs'
# leading 1 is left implicit.
_NDTRI_P0 = (-5.99633501014107895267E1, 9.80010754185999661536E1, -5.66762857469070293439E1,
             1.39312609387279679503E1, -1.23916583867381258016E0)
_NDTRI_Q0 = (1.95448858338141759834E0, 4.67627912898881538453E0, 8.63602421390890590575E1,
             -2.25462687854119370527E2, 2.00260212380060660359E2, -8.20372256168333339912E1,
             1.59056225126211695515E1, -1.18331621121330003142E0)
_NDTRI_P1 = (4.05544892305962419923E0, 3.15251094599893866154E1, 5.71628192246421288162E1,
             4.40805073893200834700E1, 1.46849561928858024014E1, 2.18663306850790267539E0,
             -1.40256079171354495875E-1, -3.50424626827848203418E-2, -8.57456785154685413611E-4)
_NDTRI_Q1 = (1.57799883256466749731E1, 4.53907635128879210584E1, 4.13172038254672030440E1,
             1.50425385692907503408E1, 2.50464946208309415979E0, -1.42182922854787788574E-1,
             -3.80806407691578277194E-2, -9.33259480895457427372E-4)
_NDTRI_P2 = (3.23774891776946035970E0, 6.91522889068984211695E0, 3.93881025292474443415E0,
             1.33303460815807542389E0, 2.01485389549179081538E-1, 1.23716634817820021358E-2,
             3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9)
_NDTRI_Q2 = (6.02427039364742014255E0, 3.67983563856160859403E0, 1.37702099489081330271E0,
             2.16236993594496635890E-1, 1.34204006088543189037E-2, 3.28014464682127739104E-4,
             2.89247864745380683936E-6, 6.79019408009981274425E-9)


def _horner(x: Array, coefs, leading_one: bool = False, pick=None, other=()) -> Array:
    """The polynomial with ``coefs`` (highest power first) at ``x``, by Horner's rule; with
    ``leading_one``, an implicit leading coefficient 1. ``pick``: a mask choosing, per
    element, the coefficients ``other`` over ``coefs`` (the same values as evaluating both
    and selecting, for one evaluation)."""
    def coef(i):
        if pick is None:
            return _c(x, coefs[i])
        return jnp.where(pick, _c(x, other[i]), _c(x, coefs[i]))
    y = jnp.ones_like(x) if leading_one else coef(0)
    for i in range(0 if leading_one else 1, len(coefs)):
        y = y * x + coef(i)
    return y


def ndtri(p: ArrayLike) -> Array:
    """The inverse of ``ndtr``: the standard normal quantile (float32/float64 inputs).

    Cephes' algorithm, as JAX evaluates it: a rational function of ``p - 1/2`` in the centre,
    and in the tails (``p`` below exp(-2) or above 1 - exp(-2), by symmetry)
    ``z - log(z)/z - R(1/z)/z`` with ``z = sqrt(-2 log p)``.

    Example:
        >>> ember.scipy.special.ndtri(jnp.array([0.975]))
        Array([1.9599644], dtype=float32)
    """
    p = _float_only("ndtri", p)
    upper = p > _c(p, -math.expm1(-2.0))
    q = jnp.where(upper, 1 - p, p)  # (exact for p >= 1/2)
    q = jnp.where(q == 0, _c(p, 0.5), q)  # (p = 0 or 1: any value without NaNs)
    w = q - _c(p, 0.5)
    ww = w * w
    centre = w + w * ww * (_horner(ww, _NDTRI_P0) / _horner(ww, _NDTRI_Q0, leading_one=True))
    centre = centre * _c(p, -math.sqrt(2 * math.pi))
    z = lax.sqrt(_c(p, -2.0) * lax.log(q))
    u = 1 / z
    far = z >= _c(p, 8.0)
    tail = (z - lax.log(z) / z) - (
        _horner(u, _NDTRI_P1, pick=far, other=_NDTRI_P2)
        / _horner(u, _NDTRI_Q1, leading_one=True, pick=far, other=_NDTRI_Q2) / z)
    x = jnp.where(q > _c(p, math.exp(-2.0)), centre, tail)
    x = jnp.where(upper, x, -x)
    x = jnp.where(p == 0, _c(p, -np.inf), jnp.where(p == 1, _c(p, np.inf), x))
    return jnp.where((p < 0) | (p > 1) | jnp.isnan(p), _c(p, np.nan), x)


# ---------------------------------------------------------------- logistic, entropy


def expit(x: ArrayLike) -> Array:
    """The logistic sigmoid ``1 / (1 + exp(-x))``.

    Example:
        >>> ember.scipy.special.expit(jnp.array([0.]))
        Array([0.5], dtype=float32)
    """
    (x,) = promote_args_inexact("expit", x)
    return lax.logistic(x)


@custom_jvp
def logit(x: ArrayLike) -> Array:
    """``log(x / (1 - x))``, the inverse of ``expit``.

    Example:
        >>> ember.scipy.special.logit(jnp.array([0.5]))
        Array([0.], dtype=float32)
    """
    (x,) = promote_args_inexact("logit", x)
    return lax.log(x / (1 - x))


logit.defjvps(lambda g, ans, x: g / (x * (1 - x)))


@custom_jvp
def xlogy(x: ArrayLike, y: ArrayLike) -> Array:
    """``x * log(y)``, 0 where ``x == 0`` (NaN ``y`` still propagates).

    Example:
        >>> ember.scipy.special.xlogy(jnp.array([0., 2.]), jnp.array([0., 1.]))
        Array([0., 0.], dtype=float32)
    """
    x, y = promote_args_inexact("xlogy", x, y)
    return jnp.where((x != 0) | jnp.isnan(y), x * lax.log(y), jnp.zeros_like(x))


@xlogy.defjvp
def _xlogy_jvp(primals, tangents):
    (x, y), (dx, dy) = primals, tangents
    out = xlogy(x, y)
    return out, (dx * lax.log(y) + dy * x / y).astype(out.dtype)


@custom_jvp
def xlog1py(x: ArrayLike, y: ArrayLike) -> Array:
    """``x * log1p(y)``, 0 where ``x == 0`` (NaN ``y`` still propagates).

    Example:
        >>> ember.scipy.special.xlog1py(jnp.array([0., 2.]), jnp.array([-1., 0.]))
        Array([0., 0.], dtype=float32)
    """
    x, y = promote_args_inexact("xlog1py", x, y)
    return jnp.where((x != 0) | jnp.isnan(y), x * lax.log1p(y), jnp.zeros_like(x))


@xlog1py.defjvp
def _xlog1py_jvp(primals, tangents):
    (x, y), (dx, dy) = primals, tangents
    out = xlog1py(x, y)
    return out, (dx * lax.log1p(y) + dy * x / (1 + y)).astype(out.dtype)


@custom_jvp
def _xlogx(x: Array) -> Array:
    return xlogy(x, x)


_xlogx.defjvps(lambda g, ans, x: g * (lax.log(x) + 1))


def entr(x: ArrayLike) -> Array:
    """Elementwise entropy: ``-x log x`` for ``x > 0``, 0 at 0, -inf for ``x < 0``.

    Example:
        >>> ember.scipy.special.entr(jnp.array([0., 0.5]))
        Array([0.        , 0.34657356], dtype=float32)
    """
    (x,) = _real("entr", x)
    return jnp.where(x < 0, jnp.full_like(x, -np.inf), -_xlogx(x))


def rel_entr(p: ArrayLike, q: ArrayLike) -> Array:
    """Relative entropy ``p log(p / q)`` (0 where ``p == 0 <= q``, inf elsewhere outside).

    Example:
        >>> ember.scipy.special.rel_entr(jnp.array([0.5]), jnp.array([0.25]))
        Array([0.34657356], dtype=float32)
    """
    p, q = _real("rel_entr", p, q)
    both = (p > 0) & (q > 0)
    zero_ok = (p == 0) & (q >= 0)
    sp = jnp.where(both, p, _c(p, 1.0))
    sq = jnp.where(both, q, _c(q, 1.0))
    val = _xlogx(sp) - xlogy(sp, sq)
    return jnp.where(both, val, jnp.where(zero_ok, _c(p, 0.0), _c(p, np.inf)))


def kl_div(p: ArrayLike, q: ArrayLike) -> Array:
    """``rel_entr(p, q) - p + q``.

    Example:
        >>> ember.scipy.special.kl_div(jnp.array([0.5]), jnp.array([0.25]))
        Array([0.09657356], dtype=float32)
    """
    p, q = _real("kl_div", p, q)
    return rel_entr(p, q) - p + q


# ---------------------------------------------------------------- modified Bessel I0, I1

def i0e(x: ArrayLike) -> Array:
    """The exponentially scaled modified Bessel function of order 0, ``exp(-|x|) I0(x)``.

    Example:
        >>> ember.scipy.special.i0e(jnp.array([0., 1.]))
        Array([1.        , 0.46575963], dtype=float32)
    """
    (x,) = _real("i0e", x)
    return lax.bessel_i0e(x)


def i0(x: ArrayLike) -> Array:
    """The modified Bessel function of order 0.

    Example:
        >>> ember.scipy.special.i0(jnp.array([1.]))
        Array([1.2660658], dtype=float32)
    """
    (x,) = _real("i0", x)
    half = lax.exp(jnp.abs(x) / 2)  # (two halves: exp(|x|) alone overflows first)
    return half * lax.bessel_i0e(x) * half


def i1e(x: ArrayLike) -> Array:
    """The exponentially scaled modified Bessel function of order 1, ``exp(-|x|) I1(x)``.

    Example:
        >>> ember.scipy.special.i1e(jnp.array([1.]))
        Array([0.20791042], dtype=float32)
    """
    (x,) = _real("i1e", x)
    return lax.bessel_i1e(x)


def i1(x: ArrayLike) -> Array:
    """The modified Bessel function of order 1.

    Example:
        >>> ember.scipy.special.i1(jnp.array([1.]))
        Array([0.5651591], dtype=float32)
    """
    (x,) = _real("i1", x)
    half = lax.exp(jnp.abs(x) / 2)
    return half * lax.bessel_i1e(x) * half


# ---------------------------------------------------------------- softmax family
# (scipy's signatures: keyword-only ``axis``, default None = over all axes, no ``where``)


def softmax(x: ArrayLike, /, *, axis: int | tuple[int, ...] | None = None) -> Array:
    """``exp(x) / sum(exp(x))`` over ``axis`` (default: all axes).

    Example:
        >>> ember.scipy.special.softmax(jnp.array([0., 0.]))
        Array([0.5, 0.5], dtype=float32)
    """
    return _nn.softmax(x, axis=axis)


def log_softmax(x: ArrayLike, /, *, axis: int | tuple[int, ...] | None = None) -> Array:
    """``x - logsumexp(x)`` over ``axis`` (default: all axes).

    Example:
        >>> ember.scipy.special.log_softmax(jnp.array([0., 0.]))
        Array([-0.6931472, -0.6931472], dtype=float32)
    """
    return _nn.log_softmax(x, axis=axis)


# Eager calls of the composite functions run as one replayed program per signature.
_fastpath.install(_sys.modules[__name__], {
    1: ("logsumexp", "softmax", "log_softmax", "expit", "ndtr", "log_ndtr", "ndtri", "entr",
        "i0e", "i1e", "i0", "i1", "erfcx", "spence", "gammaln", "digamma", "erf", "erfc",
        "erfinv", "gamma", "loggamma"),
    2: ("kl_div", "rel_entr", "gammainc", "gammaincc", "polygamma", "betaln"),
})
