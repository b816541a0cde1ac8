"""The last of ``jax.scipy.special``: the confluent and Gauss hypergeometric functions
``hyp1f1``/``hyp2f1`` (series, asymptotic expansions and the classical transformations, after
Pearson, Olver & Porter 2014 and Abramowitz & Stegun 15.3), Owen's T function (Gauss-Legendre
quadrature, Patefield & Tandy's method T5) and the spherical harmonics ``sph_harm_y``
(normalized associated Legendre recurrences).

Series run in one array-wide ``while_loop`` (:func:`_iterate`) that freezes each element once
its own convergence test passes, so an element gets the same sum as a per-element loop and the
functions trace, jit and vmap. Derivatives are ``custom_jvp`` rules with JAX's formulas.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember import core, lax
from ember import numpy as jnp
from ember.custom_derivatives import custom_jvp
from ember.lax.control_flow.while_loop import while_loop
from ember.numpy._util import promote_args_inexact

Array = Any
ArrayLike = Any

__all__ = ["hyp1f1", "hyp2f1", "owens_t", "sph_harm_y"]

_MAX_TERMS = 250


def _gamma(x: Array) -> Array:
    from ember.scipy.special import gamma  # (special.py re-exports this module)
    return gamma(x)


def _eps(x: Array) -> float:
    return float(jnp.finfo(x.dtype).eps)


def _iterate(step: Callable, init: Sequence[Array], done: Array) -> list[Array]:
    """Runs ``vals, converged = step(k, vals)`` for k = 1, 2, ... (k in the values' dtype)
    until every element has converged or ``_MAX_TERMS`` is reached; an element's values stop
    changing from the step at which its own ``converged`` (or ``done`` at the start) holds."""
    dtype = init[0].dtype

    def cond(state):
        k, done = state[0], state[1]
        return (k < _MAX_TERMS) & ~jnp.all(done)

    def body(state):
        k, done, *vals = state
        new, converged = step(lax.convert_element_type(k, dtype), vals)
        vals = [jnp.where(done, v, n) for v, n in zip(vals, new)]
        return (k + 1, done | converged, *vals)

    shape = jnp.broadcast_shapes(*(jnp.shape(v) for v in init), jnp.shape(done))
    init = [jnp.broadcast_to(v, shape) for v in init]
    out = while_loop(cond, body, (np.int32(1), jnp.broadcast_to(done, shape), *init))
    return list(out[2:])


def _not_above(term: Array, total: Array, tol: float) -> Array:
    # (the negation of |term| / |total| > tol: NaN counts as converged)
    return ~(jnp.abs(term) / jnp.abs(total) > tol)


def _real(fn: str, *args: ArrayLike) -> list[Array]:
    out = promote_args_inexact(fn, *args)
    if jnp.issubdtype(out[0].dtype, np.complexfloating):
        raise ValueError(f"{fn} does not support complex-valued inputs.")
    return [lax.convert_element_type(v, v.dtype) for v in out]  # (results are never weak)


# ---------------------------------------------------------------- 1F1


def _weighted_series(ratio: Callable, first: Array, weight: Callable, start: Array) -> Array:
    """``start + sum_{k>=1} t_k weight(k)`` with t_1 = first, t_{k+1} = t_k ratio(k), stopped
    when a term falls below eps of the sum (the shared shape of all the series here)."""
    tol = _eps(first)

    def step(k, vals):
        total, term = vals
        total = total + term * weight(k)
        term = term * ratio(k)
        return (total, term), _not_above(term, total, tol)

    w1 = weight(jnp.ones_like(first))
    return _iterate(step, [start, first], _not_above(first * w1, start, tol))[0]


def _one(x: Array) -> Array:
    return jnp.ones_like(x)


def _hyp1f1_series(a: Array, b: Array, x: Array) -> Array:
    # sum (a)_k / (b)_k x^k / k!
    return _weighted_series(lambda k: (a + k) / (b + k) * x / (k + 1), a / b * x, _one,
                            jnp.ones_like(x))


def _hyp1f1_asymptotic(a: Array, b: Array, x: Array) -> Array:
    # Gamma(b)/Gamma(a) e^x x^(a-b) sum (b-a)_k (1-a)_k / k! x^-k (large positive x)
    s = _weighted_series(lambda k: (b - a + k) * (1 - a + k) / (k + 1) / x,
                         (b - a) * (1 - a) / x, _one, jnp.ones_like(x))
    return _gamma(b) / _gamma(a) * jnp.exp(x) * x ** (a - b) * s


def _hyp1f1_negative_asymptotic(a: Array, b: Array, x: Array) -> Array:
    # Kummer's e^x 1F1(b-a, b, -x) with the asymptotic form of the latter (large negative x):
    # the e^x cancels, Gamma(b)/Gamma(b-a) (-x)^-a sum (a)_k (1+a-b)_k / k! (-x)^-k.
    y = -x
    s = _weighted_series(lambda k: (a + k) * (1 + a - b + k) / (k + 1) / y,
                         a * (1 + a - b) / y, _one, jnp.ones_like(x))
    return _gamma(b) / _gamma(b - a) * y ** (-a) * s


@custom_jvp
def _hyp1f1(a: Array, b: Array, x: Array) -> Array:
    neg = x < 0
    # The series of 1F1(a, b, x), for x < 0 of Kummer's e^x 1F1(b-a, b, -x) (no cancellation);
    # for |x| < 100, and at any x where that series is a polynomial (a non-positive integer
    # top parameter). The asymptotic expansions elsewhere (NaN x included).
    top = jnp.where(neg, b - a, a)
    poly = (top <= 0) & (top == jnp.round(top))
    use_series = (jnp.abs(x) < 100) | poly
    xs = jnp.where(use_series, x, 0.0)
    series = _hyp1f1_series(top, b, jnp.abs(xs))
    series = jnp.where(neg, jnp.exp(xs) * series, series)
    xb = jnp.where(use_series, 100.0, jnp.abs(x))
    far = jnp.where(neg, _hyp1f1_negative_asymptotic(a, b, -xb),
                    _hyp1f1_asymptotic(a, b, xb))
    out = jnp.where(jnp.isnan(x), x, jnp.where(use_series, series, far))
    return jnp.where(a == 0, 1.0, jnp.where(a == b, jnp.exp(x),
                                            jnp.where(b == 0, np.inf, out)))


def _hyp1f1_param_derivative(a: Array, b: Array, x: Array, weight: Callable) -> Array:
    return _weighted_series(lambda k: (a + k) / (b + k) * x / (k + 1), a / b * x, weight,
                            jnp.zeros_like(x))


_hyp1f1.defjvps(
    lambda g, ans, a, b, x: g * _hyp1f1_param_derivative(
        a, b, x, lambda k: lax.digamma(a + k) - lax.digamma(a)),
    lambda g, ans, a, b, x: g * _hyp1f1_param_derivative(
        a, b, x, lambda k: lax.digamma(b) - lax.digamma(b + k)),
    lambda g, ans, a, b, x: g * (a / b * _hyp1f1(a + 1, b + 1, x)),
)


def hyp1f1(a: ArrayLike, b: ArrayLike, x: ArrayLike) -> Array:
    """The confluent hypergeometric function ``1F1(a; b; x) = sum_k (a)_k / (b)_k x^k / k!``.

    Real arguments. As JAX: 1 where ``a == 0`` (also at ``b == 0``), ``exp(x)`` where
    ``a == b``, inf where ``b == 0``; large values need float64. Differentiable in all three
    arguments (the ``a`` and ``b`` derivatives by their series).

    Example:
        >>> ember.scipy.special.hyp1f1(1.0, 2.0, jnp.array([0.5, 1.0]))
        Array([1.2974426, 1.7182816], dtype=float32)
    """
    a, b, x = _real("hyp1f1", a, b, x)
    a, b, x = jnp.broadcast_arrays(a, b, x)
    return _hyp1f1(a, b, x)


# ---------------------------------------------------------------- 2F1


def _near_int(v: Array, tol: float) -> Array:
    return jnp.abs(v - jnp.round(v)) < tol


def _hyp2f1_series(a: Array, b: Array, c: Array, x: Array, terminates: Array) -> Array:
    """sum (a)_k (b)_k / (c)_k x^k / k!; where ``terminates`` (a or b a non-positive integer)
    the polynomial is summed to its end, not stopped early."""
    tol = _eps(x)

    def step(k, vals):
        total, term = vals
        total = total + term
        term = term * ((a + k - 1) * (b + k - 1) / (c + k - 1) / k * x)
        return (total, term), jnp.where(terminates, term == 0,
                                        ~(jnp.abs(term) > tol * jnp.abs(total)))

    return _iterate(step, [jnp.zeros_like(x), jnp.ones_like(x)], jnp.zeros(x.shape, bool))[0]


def _hyp2f1_log_case(a: Array, b: Array, c: Array, x: Array) -> Array:
    """2F1 near x = 1 when c - a - b = m is a non-negative integer (Abramowitz & Stegun
    15.3.10/15.3.11): a finite sum of m terms and a series in s = 1 - x with log(s)."""
    tol = _eps(x)
    s = 1 - x
    m = jnp.maximum(jnp.round(c - a - b), 0.0)
    log_s = jnp.log(s)
    psi = lax.digamma
    # Finite part: Gamma(m) Gamma(c) / (Gamma(a+m) Gamma(b+m)) sum_{n<m} (a)_n (b)_n
    # / (n! (1-m)_n) s^n (empty for m = 0).

    def finite_step(k, vals):
        total, term = vals
        n = k - 1  # term holds the n-th summand
        total = total + term
        term = term * (a + n) * (b + n) / ((n + 1) * (n + 1 - m)) * s
        return (total, term), k >= m

    fin = _iterate(finite_step, [jnp.zeros_like(x), jnp.ones_like(x)], m <= 0)[0]
    fin = jnp.where(m > 0, _gamma(m) * fin / (_gamma(a + m) * _gamma(b + m)), 0.0)
    # Log part: -(-1)^m / (Gamma(a) Gamma(b)) sum_n (a+m)_n (b+m)_n / (n! (n+m)!) s^(n+m)
    # [log s - psi(n+1) - psi(n+m+1) + psi(a+n+m) + psi(b+n+m)]   (times Gamma(c) below).

    def weight(n):
        return log_s - psi(n + 1) - psi(n + m + 1) + psi(a + n + m) + psi(b + n + m)

    t0 = s ** m / _gamma(m + 1)
    q0 = t0 * weight(jnp.zeros_like(x))

    def log_step(k, vals):
        total, term = vals
        n = k - 1
        term = term * (a + m + n) * (b + m + n) * s / ((n + 1) * (n + m + 1))
        q = term * weight(n + 1)
        total = total + q
        return (total, term), ~(jnp.abs(q) >= tol * jnp.abs(total))

    log_sum = _iterate(log_step, [q0, t0], jnp.zeros(x.shape, bool))[0]
    sign = jnp.where(jnp.round(m) % 2 == 1, 1.0, -1.0)
    return _gamma(c) * (fin + sign * log_sum / (_gamma(a) * _gamma(b)))


def _hyp2f1_sum(a: Array, b: Array, c: Array, x: Array) -> Array:
    """2F1 for x < 1 from its series: summed to the end for a non-positive integer a or b,
    by the log form near 1 when c - a - b is an integer, the plain series otherwise."""
    tol = 50 * _eps(x)
    terminates = ((a <= 0) & _near_int(a, tol)) | ((b <= 0) & _near_int(b, tol))
    series = _hyp2f1_series(a, b, c, x, terminates)
    use_log = (x > 0.9) & ~terminates & _near_int(c - a - b, tol)
    xl = jnp.where(use_log, x, 0.95)
    return jnp.where(use_log, _hyp2f1_log_case(a, b, c, xl), series)


@custom_jvp
def _hyp2f1(a: Array, b: Array, c: Array, x: Array) -> Array:
    tol = 50 * _eps(x)
    d = c - a - b
    s = 1 - x
    euler = (d <= -1) & ~(~_near_int(d, tol) & (s < 0))
    # Euler's transformation (1-x)^d 2F1(c-a, c-b; c; x) where c - a - b <= -1.
    direct = _hyp2f1_sum(jnp.where(euler, c - a, a), jnp.where(euler, c - b, b), c, x)
    cases = [
        (x == 0) | (((a == 0) | (b == 0)) & (c != 0)), 1.0,
        (c == 0) | ((c < 0) & (c % 1 == 0)), np.inf,
        euler, s ** d * direct,
        (d <= 0) & (x == 1), np.inf,
        (x < 1) & (b == c), s ** (-a),
        (x < 1) & (a == c), s ** (-b),
        x > 1, np.inf,
        x == 1, _gamma(c) * _gamma(d) / (_gamma(c - a) * _gamma(c - b)),
    ]
    out = direct
    for i in range(len(cases) - 2, -1, -2):  # (the first matching case wins)
        out = jnp.where(cases[i], cases[i + 1], out)
    return out


def _hyp2f1_param_derivative(a, b, c, x, weight):
    return _weighted_series(lambda k: (a + k) * (b + k) / (c + k) / (k + 1) * x,
                            a * b / c * x, weight, jnp.zeros_like(x))


_hyp2f1.defjvps(
    lambda g, ans, a, b, c, x: g * _hyp2f1_param_derivative(
        a, b, c, x, lambda k: lax.digamma(a + k) - lax.digamma(a)),
    lambda g, ans, a, b, c, x: g * _hyp2f1_param_derivative(
        a, b, c, x, lambda k: lax.digamma(b + k) - lax.digamma(b)),
    lambda g, ans, a, b, c, x: g * _hyp2f1_param_derivative(
        a, b, c, x, lambda k: lax.digamma(c) - lax.digamma(c + k)),
    lambda g, ans, a, b, c, x: g * (a * b / c * _hyp2f1(a + 1, b + 1, c + 1, x)),
)


def hyp2f1(a: ArrayLike, b: ArrayLike, c: ArrayLike, x: ArrayLike) -> Array:
    """The Gauss hypergeometric function
    ``2F1(a, b; c; x) = sum_k (a)_k (b)_k / (c)_k x^k / k!`` for real arguments.

    As JAX: inf for ``x > 1`` and for ``c`` a non-positive integer, Gauss's formula at
    ``x == 1``, Euler's transformation where ``c - a - b <= -1``, the logarithmic form near
    1 where ``c - a - b`` is an integer; the series diverges for ``x < -1`` (as JAX).
    Differentiable in all four arguments.

    Example:
        >>> ember.scipy.special.hyp2f1(1.0, 2.0, 3.0, jnp.array([0.5]))
        Array([1.5451772], dtype=float32)
    """
    a, b, c, x = _real("hyp2f1", a, b, c, x)
    a, b, c, x = jnp.broadcast_arrays(a, b, c, x)
    return _hyp2f1(a, b, c, x)


# ---------------------------------------------------------------- Owen's T


def _owens_t_rule() -> tuple[np.ndarray, np.ndarray]:
    # T(h, a) = a/(2 pi) int_0^1 f(a s) ds with f(u) = exp(-h^2 (1+u^2)/2) / (1+u^2), even in
    # s: the positive half of 26-point Gauss-Legendre on [-1, 1], as s^2 and w / (2 pi).
    s, w = np.polynomial.legendre.leggauss(26)
    keep = s > 0
    return s[keep] ** 2, w[keep] / (2 * np.pi)


_OWENS_S2, _OWENS_W = _owens_t_rule()


def _owens_t_quadrature(h: Array, a: Array) -> Array:
    r = (a * a)[..., None] * _OWENS_S2.astype(a.dtype)
    f = jnp.exp(-0.5 * (h * h)[..., None] * (1 + r)) / (1 + r)
    return a * jnp.sum(f * _OWENS_W.astype(a.dtype), axis=-1)


@custom_jvp
def _owens_t(h: Array, a: Array) -> Array:
    h, abs_a = jnp.abs(h), jnp.abs(a)
    r2 = math.sqrt(2.0)
    # |a| > 1 by T(h, a) = (Phi(h) + Phi(ah))/2 - Phi(h) Phi(ah) - T(ah, 1/a) (h >= 0).
    small = abs_a <= 1
    qa = jnp.where(small, abs_a, 1 / abs_a)
    qh = jnp.where(small, h, abs_a * h)
    t = _owens_t_quadrature(qh, qa)
    t = jnp.where(qh == 0, jnp.arctan(qa) / (2 * np.pi), t)
    t = jnp.where(qa == 1, 0.125 * lax.erfc(-qh / r2) * lax.erfc(qh / r2), t)
    eh, eah = lax.erfc(h / r2), lax.erfc(abs_a * h / r2)
    # (near h = 0 through erf: 1/4 - erf erf / 4 keeps its digits there)
    reflected = jnp.where(abs_a * h <= 0.67,
                          0.25 - 0.25 * lax.erf(h / r2) * lax.erf(abs_a * h / r2),
                          0.25 * (eh + eah - eh * eah))
    t = jnp.where(small, t, reflected - t)
    t = jnp.sign(a) * t
    return jnp.where(jnp.isnan(a) | jnp.isnan(h), np.nan, t)


@_owens_t.defjvp
def _owens_t_jvp(primals, tangents):
    (h, a), (dh, da) = primals, tangents
    # dT/dh = -exp(-h^2/2) erf(a h / sqrt 2) / (2 sqrt(2 pi)),
    # dT/da = exp(-(1 + a^2) h^2 / 2) / (2 pi (1 + a^2))
    d_h = -jnp.exp(-0.5 * h * h) * lax.erf(a * h / math.sqrt(2.0)) / (
        2 * math.sqrt(2 * np.pi))
    d_a = jnp.exp(-0.5 * (1 + a * a) * h * h) / (2 * np.pi * (1 + a * a))
    return _owens_t(h, a), d_h * dh + d_a * da


def owens_t(h: ArrayLike, a: ArrayLike) -> Array:
    """Owen's T function ``T(h, a) = 1/(2 pi) int_0^a exp(-h^2 (1+x^2)/2) / (1+x^2) dx``.

    By 13-node Gauss-Legendre quadrature of the integral (with ``a`` reflected to
    ``1/a`` above 1), as JAX; exact at ``h == 0`` and ``|a| == 1``.

    Example:
        >>> ember.scipy.special.owens_t(0.5, jnp.array([2.0]))
        Array([0.14158061], dtype=float32)
    """
    h, a = _real("owens_t", h, a)
    h, a = jnp.broadcast_arrays(h, a)
    return _owens_t(h, a)


# ---------------------------------------------------------------- spherical harmonics


def _legendre_normalized(n: Array, m: Array, x: Array, n_max: int) -> Array:
    """The orthonormal associated Legendre function P_n^m(x) sqrt((2n+1)/(4 pi)
    (n-m)!/(n+m)!) with the Condon-Shortley phase, 0 <= m, n <= n_max (0 where m > n)."""
    mf = lax.convert_element_type(m, x.dtype)
    nf = lax.convert_element_type(n, x.dtype)
    sin = jnp.sqrt(1 - x * x)
    # Diagonal: P_k^k = -sqrt(1 + 1/(2k)) sin P_{k-1}^{k-1}, P_0^0 = 1/sqrt(4 pi).
    p_kk = jnp.full_like(x, 0.5 / math.sqrt(math.pi))
    diag = p_kk
    for k in range(1, n_max + 1):
        p_kk = -math.sqrt(1 + 0.5 / k) * sin * p_kk
        diag = jnp.where(m == k, p_kk, diag)
    # Upward in degree: P_l^m = c_l (x P_{l-1}^m - P_{l-2}^m / c_{l-1}),
    # c_l = sqrt((4 l^2 - 1) / (l^2 - m^2)), from P_{m-1}^m = 0.
    prev, cur = jnp.zeros_like(x), diag
    inv_c_prev = jnp.zeros_like(x)
    for ell in range(1, n_max + 1):
        active = (ell > m) & (ell <= n)
        denom = jnp.where(active, ell * ell - mf * mf, 1.0)
        c = jnp.sqrt((4.0 * ell * ell - 1) / denom)
        new = c * (x * cur - prev * inv_c_prev)
        prev, cur = jnp.where(active, cur, prev), jnp.where(active, new, cur)
        inv_c_prev = jnp.where(active, 1 / c, inv_c_prev)
    return jnp.where(mf > nf, 0.0, cur)


def sph_harm_y(n: ArrayLike, m: ArrayLike, theta: ArrayLike, phi: ArrayLike,
               diff_n: int | None = None, n_max: int | None = None) -> Array:
    """The spherical harmonics ``Y_n^m(theta, phi) = N P_n^|m|(cos theta) e^(i m phi)``
    (orthonormal on the sphere, with the Condon-Shortley phase) as ``scipy.special``.

    Args:
        n: integer degrees ``n >= 0``.
        m: integer orders ``|m| <= n`` (0 where ``|m| > n``).
        theta: the polar angle (colatitude) in ``[0, pi]``.
        phi: the azimuth in ``[0, 2 pi]``.
        diff_n: not supported (as JAX).
        n_max: a static bound on ``n`` (default ``max(n)``, which needs a concrete ``n``);
            larger degrees are clipped to it.

    Returns:
        A complex array of the broadcast shape of the arguments (at least 1-D).

    Example:
        >>> ember.scipy.special.sph_harm_y(jnp.array([1]), jnp.array([0]), 0.0, 0.0)
        Array([0.48860252+0.j], dtype=complex64)
    """
    if diff_n is not None:
        raise NotImplementedError(
            "The 'diff_n' argument to sph_harm_y is not supported.")
    if n_max is None:
        n_max = np.max(np.asarray(core.concrete_or_error(
            n, "The n_max argument of sph_harm_y must be given to use it under a "
               "transformation (default max(n) needs a concrete n).")))
    n_max = int(core.concrete_or_error(n_max, "The n_max argument of sph_harm_y."))
    n, m = jnp.asarray(n), jnp.asarray(m)
    if not (jnp.issubdtype(n.dtype, np.integer) and jnp.issubdtype(m.dtype, np.integer)):
        raise TypeError(f"sph_harm_y: n and m must be integer arrays, got {n.dtype} and "
                        f"{m.dtype}")
    theta, phi = promote_args_inexact("sph_harm_y", theta, phi)
    n, m, theta, phi = jnp.broadcast_arrays(n, m, theta, phi)
    if n.ndim == 0:
        n, m, theta, phi = (v.reshape(1) for v in (n, m, theta, phi))
    abs_m = jnp.abs(m)
    # (degree and order clipped to n_max for the Legendre factor only, as JAX's table lookup)
    p = _legendre_normalized(jnp.clip(n, 0, n_max), jnp.minimum(abs_m, n_max), jnp.cos(theta),
                             n_max)
    angle = lax.convert_element_type(abs_m, phi.dtype) * phi
    y = lax.complex(p * jnp.cos(angle), p * jnp.sin(angle))
    # Y_n^-m = (-1)^m conj(Y_n^m)
    return jnp.where(m < 0, jnp.where(abs_m % 2 == 1, -1, 1) * jnp.conj(y), y)
