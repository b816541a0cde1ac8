"""Special-function primitives of lax: ``igamma``, ``igammac``, ``igamma_grad_a``,
``random_gamma_grad``, ``polygamma``, ``zeta``, ``bessel_i0e``, ``bessel_i1e`` and ``betainc``
(the ``regularized_incomplete_beta`` primitive).

Each primitive is elementwise over floating operands of one dtype (rank-0 operands broadcast,
no promotion; integers raise TypeError, as in lax). Its math is one function written on lax
operations (series, continued fractions, asymptotic expansions); the same function is the
primitive's eager impl (run op by op) and its lowering (traced and inlined into the HLO
graph), so eager, jit and both backends agree. Half precision is evaluated in float32.

Derivatives are JAX's: ``igamma``'s in ``a`` is ``igamma_grad_a`` (itself computed as the
forward-mode derivative of the series/continued fraction), ``polygamma``'s in ``x`` is
``polygamma(m + 1, x)``, ``betainc``'s only in ``x``; ``zeta`` and ``igamma_grad_a`` have none.

Example:
    >>> lax.igamma(jnp.float32(1.), jnp.float32(1.))
    Array(0.63212055, dtype=float32)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ember import core
from ember.core import ShapedArray
from ember.interpreters import ad
from ember.interpreters.partial_eval import trace_to_jaxpr
from ember.lax import base, batch_util
from ember.lax import elementwise as E
from ember.lax.base import float_dtypes
from ember.lax.control_flow.while_loop import while_loop
from ember.lax.elementwise import binop
from ember.lax.reduction import reduce_or
from ember.lax.shape import broadcast_in_dim, full_like

Array = Any

__all__ = [
    "igamma", "igammac", "igamma_grad_a", "random_gamma_grad", "polygamma", "zeta",
    "bessel_i0e", "bessel_i1e", "betainc",
    "igamma_p", "igammac_p", "igamma_grad_a_p", "random_gamma_grad_p", "polygamma_p", "zeta_p",
    "bessel_i0e_p", "bessel_i1e_p", "regularized_incomplete_beta_p",
]


# ---------------------------------------------------------------- the composite mechanism


def _up_and_broadcast(fn: Callable) -> Callable:
    """``fn`` on operands broadcast to one shape, in float32 for half-precision dtypes."""
    def run(*args):
        avals = [core.get_aval(a) for a in args]
        shape = base.broadcast_dims("special", *(a.shape for a in avals))
        args = [a if av.shape == shape else
                broadcast_in_dim(a, shape, tuple(range(len(shape) - av.ndim, len(shape))))
                for a, av in zip(args, avals)]
        dt = np.dtype(avals[0].dtype)
        if dt.itemsize >= 4:
            return fn(*args)
        f32 = np.dtype(np.float32)
        out = fn(*[E.convert_element_type(a, f32) for a in args])
        return E.convert_element_type(out, dt)
    return run


def _composite(name: str, fn: Callable) -> core.Primitive:
    """An elementwise primitive over floats whose impl and lowering both evaluate ``fn``."""
    prim = binop(name, None, allowed=float_dtypes)
    body = _up_and_broadcast(fn)

    def impl(*vals):
        # Op by op at first; compiled once the calls of this signature have spent a
        # compile's worth of time (``eager_loops.composite``).
        from ember.lax.control_flow import eager_loops
        vals = [np.asarray(v) for v in vals]
        avals = [ShapedArray(v.shape, v.dtype) for v in vals]
        tier = eager_loops.composite(prim, avals, prim.abstract_eval(*avals))
        exe = tier.compiled()
        if exe is not None:
            return exe.execute_values(vals)[0]
        out = np.asarray(body(*[core.concrete_array(v, a) for v, a in zip(vals, avals)]))
        tier.finished_op_by_op()
        return out

    def lowering(ctx, *xs):
        avals = [ShapedArray(a.shape, a.dtype) for a in ctx.avals_in]
        closed, _ = trace_to_jaxpr(lambda *a: [body(*a)], avals)
        consts = [ctx.constant(np.asarray(c), np.asarray(c).dtype) for c in closed.consts]
        out, = ctx.lower_jaxpr(closed.jaxpr, consts, list(xs))
        return out

    prim.def_impl(impl)
    prim.def_lowering(lowering)
    batch_util.defbroadcasting(prim)
    return prim


def _bind(prim: core.Primitive, *args: Any) -> Array:
    args = [base.as_operand(a, prim.name, arg) for a, arg in zip(args, "abx")]
    return prim.bind(*base.scalars_like(prim.name, *args))


# Small lax helpers: constants take the operand's dtype; ``_where`` accepts Python scalars.
def _full(x: Array, v: float) -> Array:
    return full_like(x, v)


def _where(c: Array, a: Any, b: Any) -> Array:
    # (at least one of a, b is an array: it gives the constants' dtype and shape)
    ref = a if not isinstance(a, (int, float)) else b
    a = _full(ref, a) if isinstance(a, (int, float)) else a
    b = _full(ref, b) if isinstance(b, (int, float)) else b
    return E.select(c, a, b)


def _isnan(x: Array) -> Array:
    return E.ne(x, x)


def _finfo(x: Array) -> Any:
    return np.finfo(np.dtype(core.get_aval(x).dtype))


def _any(pred: Array) -> Array:
    return reduce_or(pred, tuple(range(core.get_aval(pred).ndim)))


# ---------------------------------------------------------------- incomplete gamma

_IGAMMA_MAX_ITERS = 2000


def _igamma_series_sum(a: Array, x: Array) -> Array:
    """S = sum_n x^n / ((a+1)...(a+n)), so that P(a, x) = x^a e^-x / Gamma(a+1) * S; iterated
    until the terms stop changing the sum (every element), at most 2000 terms."""
    eps = float(_finfo(x).eps)

    def cond(state):
        i, term, total, _ = state
        return E.bitwise_and(E.lt(i, _IGAMMA_MAX_ITERS),
                             _any(E.gt(E.abs(term), eps * E.abs(total))))

    def body(state):
        i, term, total, ap = state
        ap = ap + 1.0
        term = term * x / ap
        return i + 1, term, total + term, ap

    one = _full(x, 1.0)
    _, _, total, _ = while_loop(cond, body, (np.int32(0), one, one, a))
    return total


# A continued fraction's factors (igamma's, betainc's) end within rounding of 1 but may
# not reach it: they jitter by an ulp or two (float32: 1 - 2 eps for ever, so every call
# ran all its steps). An element stops at a factor this many eps from 1, and its value no
# longer changes.
_CF_TOLERANCE = 4


def _igammac_cf(a: Array, x: Array, derivative: bool = False) -> Array:
    """H, so that Q(a, x) = x^a e^-x / Gamma(a) * H: Legendre's continued fraction by the
    modified Lentz method (converges for x > a, x > 1); each element stops at its last
    factor within ``_CF_TOLERANCE`` eps of 1. With ``derivative`` (differentiated
    in ``a``: the derivative's terms fade more slowly than the value's), every element goes
    on until all factors are within eps of 1, as many as ``_IGAMMA_MAX_ITERS``."""
    fi = _finfo(x)
    tiny, eps = float(fi.tiny) * 16, float(fi.eps)

    def guard(v):
        return _where(E.lt(E.abs(v), tiny), tiny, v)

    def cond(state):
        i, _, _, _, _, active = state
        return E.bitwise_and(E.lt(i, _IGAMMA_MAX_ITERS), _any(active))

    def body(state):
        i, b, c, d, h, active = state
        fi_ = E.convert_element_type(i + 1, core.get_aval(x).dtype)
        an = -fi_ * (fi_ - a)
        b = b + 2.0
        d = 1.0 / guard(an * d + b)
        c = guard(b + an / c)
        delta = d * c
        if derivative:
            return i + 1, b, c, d, h * delta, E.gt(E.abs(delta - 1.0), eps)
        h = _where(active, h * delta, h)
        active = E.bitwise_and(active,
                               E.gt(E.abs(delta - 1.0), _CF_TOLERANCE * eps))
        return i + 1, b, c, d, h, active

    b0 = x + 1.0 - a
    d0 = 1.0 / guard(b0)
    state = (np.int32(0), b0, _full(x, 1.0 / tiny), d0, d0, E.eq(_full(x, 0.0), 0.0))
    return while_loop(cond, body, state)[4]


def _igamma_parts(a: Array, x: Array, derivative: bool = False
                  ) -> tuple[Array, Array, Array]:
    """(series?, log prefactor, sum) on safe arguments (a > 0, 0 < x < inf): P = e^lp * S
    where the series is used (x <= 1 or x <= a, as XLA), else Q = e^lp * H
    (``derivative``: see ``_igammac_cf``)."""
    series = E.bitwise_or(E.le(x, 1.0), E.le(x, a))
    # Each branch sees arguments in its own region (the other's may not converge).
    xs = _where(series, x, E.min(x, a))
    xc = _where(series, E.max(a + 1.0, _full(a, 2.0)), x)
    s = _igamma_series_sum(a, xs)
    h = _igammac_cf(a, xc, derivative)
    log_x = E.log(x)
    lp = _where(series, a * log_x - x - E.lgamma(a + 1.0), a * log_x - x - E.lgamma(a))
    return series, lp, _where(series, s, h)


def _igamma_domain(a: Array, x: Array) -> tuple[Array, Array, Array]:
    """(NaN mask, safe a, safe x): a < 0, x < 0, a == x == 0 and NaNs give NaN, and so does
    a == inf with 1 <= x < inf (XLA's series there computes inf * log(x) - lgamma(inf))."""
    inf = float("inf")
    nan = E.bitwise_or(E.bitwise_or(E.lt(a, 0.0), E.lt(x, 0.0)),
                       E.bitwise_or(E.bitwise_and(E.eq(a, 0.0), E.eq(x, 0.0)),
                                    E.bitwise_or(_isnan(a), _isnan(x))))
    nan = E.bitwise_or(nan, E.bitwise_and(E.eq(a, inf),
                                          E.bitwise_and(E.ge(x, 1.0), E.ne(x, inf))))
    ok = E.bitwise_and(E.bitwise_and(E.gt(a, 0.0), E.gt(x, 0.0)),
                       E.bitwise_and(E.lt(x, inf), E.lt(a, inf)))
    return nan, _where(ok, a, 1.0), _where(ok, x, 1.0)


def _igamma_value(a: Array, x: Array, upper: bool) -> Array:
    nan, sa, sx = _igamma_domain(a, x)
    series, lp, v = _igamma_parts(sa, sx)
    part = E.exp(lp) * v
    out = _where(series, part, 1.0 - part)  # P
    if upper:
        out = 1.0 - out
        out = _where(series, out, part)  # (Q directly from the continued fraction)
    at_inf = 0.0 if upper else 1.0
    out = _where(E.eq(a, float("inf")), 1.0 - at_inf, out)
    out = _where(E.bitwise_or(E.eq(a, 0.0), E.eq(x, float("inf"))), at_inf, out)
    out = _where(E.eq(x, 0.0), 1.0 - at_inf, out)
    if not upper:  # (as XLA: its series divides by a == 0 where x < 1)
        nan = E.bitwise_or(nan, E.bitwise_and(E.eq(a, 0.0), E.lt(x, 1.0)))
    return _where(nan, float("nan"), out)


def _igamma_a_derivative(a: Array, x: Array) -> tuple[Array, Array, Array, Array, Array]:
    """(NaN mask, series?, safe x, safe a, d(e^-lp * P or Q)/da-ish terms): the forward-mode
    derivative in ``a`` of the series / continued fraction, ``dlp * v + dv``."""
    nan, sa, sx = _igamma_domain(a, x)
    nan = E.bitwise_or(nan, E.bitwise_or(E.le(a, 0.0), E.eq(x, float("inf"))))

    def parts(a_):
        _, lp, v = _igamma_parts(a_, sx, derivative=True)
        return [lp, v]

    (lp, v), (dlp, dv) = ad.jvp_flat(parts, [sa], [_full(sa, 1.0)])
    series = E.bitwise_or(E.le(sx, 1.0), E.le(sx, sa))
    return nan, series, lp, sa, dlp * v + dv


def _igamma_grad_a_impl(a: Array, x: Array) -> Array:
    nan, series, lp, _, d = _igamma_a_derivative(a, x)
    out = E.exp(lp) * d
    out = _where(series, out, -out)
    out = _where(E.bitwise_or(E.eq(x, 0.0), E.lt(lp, math.log(float(_finfo(x).tiny)))),
                 0.0, out)
    return _where(nan, float("nan"), out)


def _random_gamma_grad_impl(a: Array, x: Array) -> Array:
    # dx/da of a Gamma(a, 1) sample x: -(dP/da) / (dP/dx). The prefactor e^lp cancels
    # against the density: (e^lp / pdf) is x / a for the series and x for the fraction.
    nan, series, _, sa, d = _igamma_a_derivative(a, x)
    sx = _where(E.bitwise_and(E.gt(x, 0.0), E.lt(x, float("inf"))), x, 1.0)
    out = _where(series, -d * sx / sa, d * sx)
    out = _where(E.eq(x, 0.0), 0.0, out)
    return _where(nan, float("nan"), out)


igamma_p = _composite("igamma", lambda a, x: _igamma_value(a, x, False))
igammac_p = _composite("igammac", lambda a, x: _igamma_value(a, x, True))
igamma_grad_a_p = _composite("igamma_grad_a", _igamma_grad_a_impl)
random_gamma_grad_p = _composite("random_gamma_grad", _random_gamma_grad_impl)


def _igamma_gradx(g, a, x):
    return g * E.exp(-x + (a - 1.0) * E.log(x) - E.lgamma(a))


ad.defjvp(igamma_p, lambda g, a, x: g * igamma_grad_a(a, x), _igamma_gradx)
ad.defjvp(igammac_p, lambda g, a, x: -(g * igamma_grad_a(a, x)),
          lambda g, a, x: -_igamma_gradx(g, a, x))


def igamma(a: Any, x: Any) -> Array:
    """The regularized lower incomplete gamma function ``P(a, x)`` (elementwise, floats).

    Args:
        a: the shape parameter (``a >= 0``).
        x: the upper limit of integration (``x >= 0``), of ``a``'s dtype.

    Example:
        >>> lax.igamma(jnp.float32(2.), jnp.float32(1.))
        Array(0.26424113, dtype=float32)
    """
    return _bind(igamma_p, a, x)


def igammac(a: Any, x: Any) -> Array:
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``.

    Example:
        >>> lax.igammac(jnp.float32(2.), jnp.float32(1.))
        Array(0.7357589, dtype=float32)
    """
    return _bind(igammac_p, a, x)


def igamma_grad_a(a: Any, x: Any) -> Array:
    """The derivative ``dP(a, x)/da`` of the regularized incomplete gamma function.

    Example:
        >>> lax.igamma_grad_a(jnp.float32(2.), jnp.float32(1.5))
        Array(-0.3134886, dtype=float32)
    """
    return _bind(igamma_grad_a_p, a, x)


def random_gamma_grad(a: Any, x: Any) -> Array:
    """The derivative ``dx/da`` of a sample ``x`` of Gamma(a, 1) (implicit reparametrization:
    ``-(dP/da) / (dP/dx)``), used by the gradient of ``random.gamma``.

    Example:
        >>> lax.random_gamma_grad(jnp.float32(2.), jnp.float32(1.5))
        Array(0.9368694, dtype=float32)
    """
    return _bind(random_gamma_grad_p, a, x)


# ---------------------------------------------------------------- Hurwitz zeta, polygamma

# Euler-Maclaurin summation: N direct terms, the integral, then Bernoulli corrections at q + N.
_ZETA_N = 12
_BERNOULLI_2K = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510,
                 43867 / 798, -174611 / 330]


def _zeta_impl(s: Array, q: Array) -> Array:
    total = _full(s, 0.0)
    for k in range(_ZETA_N):
        total = total + E.pow(q + float(k), -s)
    w = q + float(_ZETA_N)
    w_s = E.pow(w, -s)
    total = total + w * w_s / (s - 1.0) + w_s / 2.0
    # Corrections B_2j / (2j)! * s (s+1) ... (s+2j-2) * w^(-s-2j+1).
    rising, w_pow, inv_w2 = s, w_s / w, 1.0 / (w * w)
    for j, b in enumerate(_BERNOULLI_2K, start=1):
        # (once w_pow underflows, rising may overflow: inf * 0 must not poison the sum)
        total = total + _where(E.eq(w_pow, 0.0), 0.0, (b / math.factorial(2 * j)) * rising * w_pow)
        rising = rising * (s + float(2 * j - 1)) * (s + float(2 * j))
        w_pow = w_pow * inv_w2
    # As XLA: s == 1 is the pole, s < 1 is NaN; for q <= 0 the sum is defined only for
    # integer s, and at integer q (a term k + q == 0) it is +inf for even s, else NaN.
    int_s = E.eq(s, E.floor(s))
    even_s = E.bitwise_and(int_s, E.eq(E.rem(s, _full(s, 2.0)), 0.0))
    nonpos = E.le(q, 0.0)
    total = _where(E.bitwise_and(nonpos, E.bitwise_not(int_s)), float("nan"), total)
    pole = E.bitwise_and(nonpos, E.eq(q, E.floor(q)))
    total = _where(pole, _where(even_s, _full(s, float("inf")), float("nan")), total)
    return _where(E.eq(s, 1.0), float("inf"), _where(E.lt(s, 1.0), float("nan"), total))


def _polygamma_impl(m: Array, x: Array) -> Array:
    # psi^(m)(x) = (-1)^(m+1) m! zeta(m+1, x) for integer m >= 1; digamma at m == 0; NaN for
    # negative or non-integer m.
    m1 = m + 1.0
    sign = _where(E.eq(E.rem(m, _full(m, 2.0)), 0.0), _full(m, -1.0), 1.0)
    high = sign * E.exp(E.lgamma(m1)) * _zeta_impl(_where(E.eq(m, 0.0), 2.0, m1), x)
    out = _where(E.eq(m, 0.0), E.digamma(x), high)
    bad = E.bitwise_or(E.lt(m, 0.0), E.ne(m, E.floor(m)))
    return _where(bad, float("nan"), out)


zeta_p = _composite("zeta", _zeta_impl)
polygamma_p = _composite("polygamma", _polygamma_impl)


def _polygamma_gradm(g, m, x):
    raise ValueError("polygamma gradient with respect to m is not supported")


ad.defjvp(polygamma_p, _polygamma_gradm, lambda g, m, x: g * polygamma(m + 1.0, x))


def zeta(x: Any, q: Any) -> Array:
    """The Hurwitz zeta function ``sum_k (k + q)**(-x)`` (elementwise, floats; no derivative,
    as in JAX).

    Example:
        >>> lax.zeta(jnp.float32(2.), jnp.float32(1.))
        Array(1.644934, dtype=float32)
    """
    return _bind(zeta_p, x, q)


def polygamma(m: Any, x: Any) -> Array:
    """The polygamma function ``psi^(m)(x)``, the m-th derivative of digamma; ``m`` is a float
    holding a non-negative integer (NaN otherwise), of ``x``'s dtype.

    Example:
        >>> lax.polygamma(jnp.float32(1.), jnp.float32(1.))
        Array(1.644934, dtype=float32)
    """
    return _bind(polygamma_p, m, x)


# ---------------------------------------------------------------- modified Bessel I0, I1

# Cephes' Chebyshev expansions (i0.c, i1.c) of exp(-x) I_nu(x) on [0, 8], in T_k(x / 2 - 2)
# (times x for nu = 1), and of exp(-x) sqrt(x) I_nu(x) on (8, inf), in T_k(32 / x - 2),
# highest degree first; float32 sums the trailing terms alone (Cephes' single-precision sets,
# as XLA): a handful of multiply-adds instead of a 48-term series with a division each.
_I0E_SMALL = (
    -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
    1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
    -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
    9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
    -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7,
    1.11738753912010371815e-6, -4.41673835845875056359e-6, 1.64484480707288970893e-5,
    -5.75419501008210370398e-5, 1.88502885095841655729e-4, -5.76375574538582365885e-4,
    1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
    -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2,
    1.71620901522208775349e-1, -3.04682672343198398683e-1, 6.76795274409476084995e-1)
_I0E_LARGE = (
    -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
    3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
    1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
    -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
    7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
    -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
    3.39623202570838634515e-9, 2.26666899049817806459e-8, 2.04891858946906374183e-7,
    2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
    8.04490411014108831608e-1)
_I1E_SMALL = (
    2.77791411276104639959e-18, -2.11142121435816608115e-17, 1.55363195773620046921e-16,
    -1.10559694773538630805e-15, 7.60068429473540693410e-15, -5.04218550472791168711e-14,
    3.22379336594557470981e-13, -1.98397439776494371520e-12, 1.17361862988909016308e-11,
    -6.66348972350202774223e-11, 3.62559028155211703701e-10, -1.88724975172282928790e-9,
    9.38153738649577178388e-9, -4.44505912879632808065e-8, 2.00329475355213526229e-7,
    -8.56872026469545474066e-7, 3.47025130813767847674e-6, -1.32731636560394358279e-5,
    4.78156510755005422638e-5, -1.61760815825896745588e-4, 5.12285956168575772895e-4,
    -1.51357245063125314899e-3, 4.15642294431288815669e-3, -1.05640848946261981558e-2,
    2.47264490306265168283e-2, -5.29459812080949914269e-2, 1.02643658689847095384e-1,
    -1.76416518357834055153e-1, 2.52587186443633654823e-1)
_I1E_LARGE = (
    7.51729631084210481353e-18, 4.41434832307170791151e-18, -4.65030536848935832153e-17,
    -3.20952592199342395980e-17, 2.96262899764595013876e-16, 3.30820231092092828324e-16,
    -1.88035477551078244854e-15, -3.81440307243700780478e-15, 1.04202769841288027642e-14,
    4.27244001671195135429e-14, -2.10154184277266431302e-14, -4.08355111109219731823e-13,
    -7.19855177624590851209e-13, 2.03562854414708950722e-12, 1.41258074366137813316e-11,
    3.25260358301548823856e-11, -1.89749581235054123450e-11, -5.58974346219658380687e-10,
    -3.83538038596423702205e-9, -2.63146884688951950684e-8, -2.51223623787020892529e-7,
    -3.88256480887769039346e-6, -1.10588938762623716291e-4, -9.76109749136146840777e-3,
    7.78576235018280120474e-1)
# (terms of each expansion float32 keeps: small and large argument, nu = 0 and 1)
_BESSEL_F32_TERMS = {0: (18, 7), 1: (17, 7)}


def _chebyshev(t: Array, coefficients: tuple) -> Array:
    """Cephes' ``chbevl``: the Chebyshev series of ``coefficients`` (highest degree first,
    the constant term counted half) at ``t``, by Clenshaw's recurrence."""
    b0, b1, b2 = _full(t, coefficients[0]), _full(t, 0.0), _full(t, 0.0)
    for c in coefficients[1:]:
        b2, b1 = b1, b0
        b0 = t * b1 - b2 + c
    return (b0 - b2) * 0.5


def _bessel_ie(x: Array, nu: int) -> Array:
    """exp(-|x|) I_nu(|x|) for nu in {0, 1}: Cephes' Chebyshev expansions below and above
    |x| = 8 (float64's whole sets, float32's trailing terms)."""
    small_c, large_c = (_I0E_SMALL, _I0E_LARGE) if nu == 0 else (_I1E_SMALL, _I1E_LARGE)
    if np.dtype(x.dtype) != np.float64:
        n_small, n_large = _BESSEL_F32_TERMS[nu]
        small_c, large_c = small_c[-n_small:], large_c[-n_large:]
    ax = E.abs(x)
    near = E.min(ax, _full(x, 8.0))
    small = _chebyshev(near * 0.5 - 2.0, small_c)
    if nu:
        small = small * near
    far = E.max(ax, _full(x, 8.0))  # (NaN stays NaN; inf gives 0)
    large = _chebyshev(32.0 / far - 2.0, large_c) / E.sqrt(far)
    out = _where(E.le(ax, _full(x, 8.0)), small, large)
    # (i0e(0) = 1 exactly: float32's sum rounds to 1 + eps there)
    return _where(E.eq(ax, _full(x, 0.0)), _full(x, 1.0), out) if nu == 0 else out


bessel_i0e_p = _composite("bessel_i0e", lambda x: _bessel_ie(x, 0))
bessel_i1e_p = _composite("bessel_i1e", lambda x: E.sign(x) * _bessel_ie(x, 1))


def _bessel_i1e_jvp(g, ans, x):
    # d/dx i1e = i0e - i1e (sign(x) + 1/x); 1/2 near 0.
    eps = float(_finfo(x).eps)
    not_tiny = E.gt(E.abs(x), eps)
    safe = _where(not_tiny, x, eps)
    return g * _where(not_tiny, bessel_i0e(safe) - ans * (E.sign(safe) + 1.0 / safe), 0.5)


ad.defjvp2(bessel_i0e_p, lambda g, ans, x: g * (bessel_i1e(x) - E.sign(x) * ans))
ad.defjvp2(bessel_i1e_p, _bessel_i1e_jvp)


def bessel_i0e(x: Any) -> Array:
    """The exponentially scaled modified Bessel function of order 0, ``exp(-|x|) I0(x)``.

    Example:
        >>> lax.bessel_i0e(jnp.float32(1.))
        Array(0.46575963, dtype=float32)
    """
    return bessel_i0e_p.bind(base.as_operand(x, "bessel_i0e", "x"))


def bessel_i1e(x: Any) -> Array:
    """The exponentially scaled modified Bessel function of order 1, ``exp(-|x|) I1(x)``.

    Example:
        >>> lax.bessel_i1e(jnp.float32(1.))
        Array(0.20791042, dtype=float32)
    """
    return bessel_i1e_p.bind(base.as_operand(x, "bessel_i1e", "x"))


# ---------------------------------------------------------------- regularized incomplete beta


def _betainc_cf(a: Array, b: Array, x: Array, steps: int) -> Array:
    """1 / (1 + d1/(1 + d2/(1 + ...))) with DLMF 8.17.22's coefficients, by modified Lentz
    (two coefficients per step), each element until its step's factor is within
    ``_CF_TOLERANCE`` eps of 1 (then kept), at most ``steps`` steps; converges fast
    for x < (a + 1) / (a + b + 2)."""
    fi = _finfo(x)
    tiny, eps = float(fi.tiny) * 16, float(fi.eps)
    dt = core.get_aval(x).dtype

    def lentz(d_j, c, d, f):
        d = 1.0 + d_j * d
        d = 1.0 / _where(E.lt(E.abs(d), tiny), tiny, d)
        c = 1.0 + d_j / c
        c = _where(E.lt(E.abs(c), tiny), tiny, c)
        return c, d, f * c * d, c * d

    def cond(state):
        m, _, _, _, active = state
        return E.bitwise_and(E.lt(m, steps), _any(active))

    def body(state):
        m, c, d, f, active = state
        before = f
        mf = E.convert_element_type(m, dt)
        odd = -(a + mf) * (a + b + mf) * x / ((a + 2.0 * mf) * (a + 2.0 * mf + 1.0))
        c, d, f, delta1 = lentz(odd, c, d, f)
        m1 = mf + 1.0
        even = m1 * (b - m1) * x / ((a + 2.0 * m1 - 1.0) * (a + 2.0 * m1))
        c, d, f, delta2 = lentz(even, c, d, f)
        f = _where(active, f, before)
        active = E.bitwise_and(active, E.gt(E.abs(delta1 * delta2 - 1.0),
                                            _CF_TOLERANCE * eps))
        return m + 1, c, d, f, active

    one = _full(x, 1.0)
    _, _, _, f, _ = while_loop(cond, body, (np.int32(0), one, _full(x, 0.0), one,
                                            E.eq(one, 1.0)))
    return 1.0 / f


def _betainc_impl(a: Array, b: Array, x: Array) -> Array:
    inf = float("inf")
    # Edge values as XLA: a == 0 (or b == inf) puts all mass at 0, b == 0 (or a == inf) at 1
    # (but I_0 is 0 whatever a and b);
    # negative arguments, x outside [0, 1], a == b == 0 and NaNs give NaN.
    a0 = E.bitwise_or(E.eq(a, 0.0), E.eq(b, inf))
    b0 = E.bitwise_or(E.eq(b, 0.0), E.eq(a, inf))
    nan = E.bitwise_or(E.bitwise_or(E.lt(a, 0.0), E.lt(b, 0.0)),
                       E.bitwise_or(E.lt(x, 0.0), E.gt(x, 1.0)))
    nan = E.bitwise_or(nan, E.bitwise_or(E.bitwise_and(a0, b0),
                                         E.bitwise_or(_isnan(a), E.bitwise_or(_isnan(b),
                                                                              _isnan(x)))))
    ok = E.bitwise_and(E.bitwise_not(E.bitwise_or(E.bitwise_or(a0, b0), nan)),
                       E.bitwise_and(E.gt(x, 0.0), E.lt(x, 1.0)))
    a_s, b_s, x_s = _where(ok, a, 1.0), _where(ok, b, 1.0), _where(ok, x, 0.5)
    direct = E.lt(x_s, (a_s + 1.0) / (a_s + b_s + 2.0))
    # Otherwise the symmetry I_x(a, b) = 1 - I_{1-x}(b, a).
    p, q = _where(direct, a_s, b_s), _where(direct, b_s, a_s)
    y = _where(direct, x_s, 1.0 - x_s)
    lbeta = E.lgamma(p) + E.lgamma(q) - E.lgamma(p + q)
    pref = E.exp(p * E.log(y) + q * E.log1p(-y) - lbeta) / p
    steps = 300 if np.dtype(core.get_aval(x).dtype) == np.float64 else 100
    val = pref * _betainc_cf(p, q, y, steps)
    val = _where(direct, val, 1.0 - val)
    val = _where(E.le(x, 0.0), 0.0, val)  # (as JAX 0.10: even where a == 0)
    val = _where(E.ge(x, 1.0), 1.0, val)
    val = _where(E.bitwise_and(a0, E.gt(x, 0.0)), 1.0, val)
    val = _where(E.bitwise_and(b0, E.lt(x, 1.0)), 0.0, val)
    return _where(nan, float("nan"), val)


regularized_incomplete_beta_p = _composite("regularized_incomplete_beta", _betainc_impl)


def _betainc_grad_ab(g, a, b, x):
    raise ValueError("Betainc gradient with respect to a and b not supported.")


def _betainc_gradx(g, a, b, x):
    lbeta = E.lgamma(a) + E.lgamma(b) - E.lgamma(a + b)
    return g * E.exp((b - 1.0) * E.log1p(-x) + (a - 1.0) * E.log(x) - lbeta)


ad.defjvp(regularized_incomplete_beta_p, _betainc_grad_ab, _betainc_grad_ab, _betainc_gradx)


def betainc(a: Any, b: Any, x: Any) -> Array:
    """The regularized incomplete beta function ``I_x(a, b)`` (elementwise, floats of one
    dtype); differentiable in ``x`` only (ValueError in ``a`` or ``b``, as in JAX).

    Example:
        >>> lax.betainc(jnp.float32(2.), jnp.float32(3.), jnp.float32(0.5))
        Array(0.6875, dtype=float32)
    """
    return _bind(regularized_incomplete_beta_p, a, b, x)

