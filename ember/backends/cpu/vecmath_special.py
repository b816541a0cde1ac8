"""Vector math for the special functions ``lgamma``, ``digamma`` and ``erf_inv``.

The same straight-line style as ``vecmath`` (whose helpers this module uses). lgamma and
digamma are float64 code, which float32 runs (``vecmath._run`` converts) and rounds once;
erf_inv has float32 code of its own. Measured against mpmath (``tests/backends/cpu/
test_vecmath_special.py``): within 4 ulp for positive arguments of ``lgamma`` and
``digamma`` and for ``erf_inv``; for negative arguments the reflection formulas are
accurate to a few ulp of their larger term (near the zeros of lgamma and digamma on the
negative axis the result itself is a cancellation, as in every library that reflects).

- ``lgamma``: on [1, 2], ``(x - 1)(x - 2) R(x - 1.5)`` with ``R`` a Taylor polynomial, so the
  zeros at 1 and 2 keep their relative accuracy; below 1 one step of the recurrence
  (``lgamma(x) = lgamma(x + 1) - log(x)``, with ``lgamma(x + 1) = x (x - 1) R(x - 0.5)``: no
  rounded ``x + 1``), from 2 to 9 up to seven steps down (one logarithm of the product),
  beyond 9 Stirling's series. Negative x: ``log(pi / |sin(pi x)|) - lgamma(1 - x)`` with
  ``lgamma(1 - x) = lgamma(|x|) + log|x|`` (``1 - x`` would round), one logarithm of the
  quotient.
- ``digamma``: on [1, 2), a Taylor polynomial about the positive root ``x0`` (so digamma keeps
  its relative accuracy there); below 1 ``digamma(x + 1) - 1/x``, from 2 to 10 the downward
  recurrence (``digamma(x) = digamma(x - n) + sum 1/(x - k)``: positive terms, little
  cancellation), beyond 10 the asymptotic series. Negative x: ``digamma(1 - x) - pi cot(pi
  x)`` with ``digamma(1 - x) = digamma(|x|) + 1/|x|``.
- ``erf_inv``: Giles' single-precision approximation (a polynomial fitted here beyond it,
  where 1 - a is under 6e-8): in float32 that is the result (within 4 ulp, as XLA's);
  float64 takes one Halley step on ``erf(x) - a`` from it (``(1 - a) - erfc(x)`` from x = 1,
  where 1 - a is exact), which triples the guess's ~24 correct bits.

The Taylor coefficients were computed with mpmath at 60 digits (``_LGAMMA_R``:
``mpmath.taylor(lambda d: loggamma(1.5 + d) / ((d + 0.5) * (d - 0.5)), 0, 34)``;
``_LGAMMA_NEAR_TWO``: ``1 - euler`` and ``(-1)**k (zeta(k) - 1) / k``, the series used on
[2, 2.5); ``_DIGAMMA_ROOT``: ``polygamma(k, x0) / k!`` for k = 1..38); the tests recompute
them.
"""

from __future__ import annotations

import math

from ember.backends.cpu.vecmath import (
    _PI_HI,
    _PI_LO,
    _TWO_OVER_SQRTPI_LO,
    _Em,
    _erfc_big,
    _exp_core,
    _log,
    _or,
    _sin_cos_kernels,
)
from ember.compiler.eval_elementwise import ERF_INV_GUESS_CENTRAL, ERF_INV_GUESS_TAIL

_LGAMMA_R = (
    0.4831289505409809, -0.14595989591430608, 0.06291140107456494, -0.031308487501011,
    0.01679709863118688, -0.009425622448469822, 0.005446457844550326, -0.003212074077194137,
    0.0019229161402980364, -0.0011644144741047397, 0.0007115222580316257,
    -0.00043799512094843095, 0.0002712770999739084, -0.0001688943252076928,
    0.00010562363796385701, -6.631354825996798e-05, 4.1776965355324556e-05,
    -2.63996995905211e-05, 1.6728224342849443e-05, -1.062605648524703e-05,
    6.764963737960895e-06, -4.315621172395368e-06, 2.75822905390482e-06,
    -1.7658773695423894e-06, 1.1323372779009059e-06, -7.271509729816384e-07,
    4.675854595934381e-07, -3.0105369740055603e-07, 1.9406025683828697e-07,
    -1.2522920908629922e-07, 8.089486684438361e-08, -5.230644988327076e-08,
    3.385194149380904e-08, -2.1927202904347372e-08, 1.4214558706871942e-08,
)
# lgamma(2 + t) / t for 0 <= t < 1/2: 1 - euler_gamma, then (-1)^k (zeta(k) - 1) / k for
# k = 2..26 (the series of log Gamma about 2; 26 terms leave under 1e-17 at t = 1/2)
_LGAMMA_NEAR_TWO = (
    0.42278433509846713, 0.3224670334241132, -0.0673523010531981, 0.020580808427784546,
    -0.007385551028673986, 0.0028905103307415234, -0.001192753911703261, 0.0005096695247430425,
    -0.00022315475845357939, 9.945751278180853e-05, -4.492623673813314e-05,
    2.050721277567069e-05, -9.439488275268397e-06, 4.374866789907488e-06,
    -2.039215753801366e-06, 9.55141213040742e-07, -4.492469198764566e-07,
    2.1207184805554665e-07, -1.0043224823968099e-07, 4.7698101693639804e-08,
    -2.2711094608943164e-08, 1.0838659214896955e-08, -5.183475041970047e-09,
    2.4836745438024785e-09, -1.1921401405860912e-09, 5.731367241678862e-10,
)
# Stirling: lgamma(x) = (x - 1/2)(log x - 1) + (log(2 pi) - 1)/2 + sum B_2k / (2k (2k-1) x^(2k-1))
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156,
             -3617 / 122400)
_STIRLING_C0 = 0.5 * math.log(2 * math.pi) - 0.5
_LGAMMA_MAX_SHIFT = 7  # 2 <= x < 9: up to seven steps down to [1, 2)
_LGAMMA_STIRLING_FROM = 9.0

# the positive root of digamma as a double-double, and digamma's Taylor coefficients there
_DIGAMMA_X0_HI, _DIGAMMA_X0_LO = 1.4616321449683622, 9.549995429965697e-17
_DIGAMMA_ROOT = (
    0.9676722454476212, -0.4427631689835921, 0.258499760955651, -0.16394270544240652,
    0.10782405069126237, -0.07219956125645471, 0.04880428816414311, -0.03316112647484736,
    0.022597648232218104, -0.01542476590494896, 0.010538791616612175, -0.007204534386356869,
    0.004926781395729853, -0.003369801655439328, 0.002305126326734928, -0.0015769367714301972,
    0.0010788252019162967, -0.0007380709389960052, 0.000504953265834602,
    -0.0003454680251063077, 0.00023635601564027053, -0.00016170622091974803,
    0.0001106337276874741, -7.569179582195066e-05, 5.178575795222081e-05,
    -3.5430070947659604e-05, 2.424006611860132e-05, -1.6584242271854135e-05,
    1.134638458466385e-05, -7.762817668462094e-06, 5.3110609208898636e-06,
    -3.6336507898010456e-06, 2.486022733129538e-06, -1.7008538854332607e-06,
    1.1636675363548843e-06, -7.96142543124197e-07, 5.446941930669446e-07,
    -3.7266161283438227e-07,
)
# digamma(x) ~ log x - 1/(2x) - sum B_2k / (2k x^2k): B_2k / 2k for k = 1..8
_DIGAMMA_ASYMPTOTIC = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12,
                       -3617 / 8160)
_DIGAMMA_MAX_SHIFT = 8  # 2 <= x < 10: up to eight steps down to [1, 2)
_DIGAMMA_ASYMPTOTIC_FROM = 10.0
_TINY = 2.0 ** -56  # below this, lgamma(-a) = -log(a) and digamma(-a) = 1/a to the last bit

_SQRT_PI = math.sqrt(math.pi)
# Beyond w = -log((1 - a)(1 + a)) = 16 (1 - a < 6e-8: float64 only) Giles' guess is too coarse;
# there erf_inv(a) is this polynomial in sqrt(w) - 5, fitted here by least squares to mpmath at
# 60 Chebyshev nodes of sqrt(w) in [4, 6.1] (relative error under 7e-9).
_ERF_INV_FAR_W = 16.0
_ERF_INV_FAR_TAIL = (4.849906406208918, 1.010300325717611, -0.00013881020541110732,
                     -0.00021400121969289383, 7.615605270781078e-05, -2.1540958815915557e-05,
                     4.588949811708908e-06)


def _sin_cos_pi(e: _Em, f):
    """(sin(pi f), cos(pi f)) for |f| <= 1/2: the argument is reduced exactly to [0, 1/4]
    (using cos(pi f) = sin(pi (1/2 - |f|))) and multiplied by pi as a double-double."""
    af = e.fabs(f)
    far = e.cmp(">", af, 0.25)
    g = e.sel(far, e.sub(0.5, af), af)  # exact (Sterbenz)
    y = e.mul(_PI_HI, g)
    yl = e.fma(_PI_LO, g, e.fma(_PI_HI, g, e.neg(y)))
    s, c = _sin_cos_kernels(e, y, yl)
    return e.copysign(e.sel(far, c, s), f), e.sel(far, s, c)


def _shifted(e: _Em, a, small, max_shift: int):
    """For a >= 1: (n, base = a - n in [1, 2)) with n = min(floor(a) - 1, max_shift); n = 0
    where ``small``. a - n is exact."""
    n = e.sel(small, 0.0, e.call("minnum", e.sub(e.call("floor", a), 1.0), float(max_shift)))
    return n, e.sub(a, n)


def _lgamma(e: _Em, x):
    b = e.b
    neg = e.cmp("<", x, 0.0)
    a = e.fabs(x)
    small = e.cmp("<", a, 1.0)
    big = e.cmp(">=", a, _LGAMMA_STIRLING_FROM)
    n, base = _shifted(e, a, small, _LGAMMA_MAX_SHIFT)
    prod = e.c(1.0)
    for k in range(1, _LGAMMA_MAX_SHIFT + 1):
        prod = e.sel(e.cmp("<=", e.c(float(k)), n), e.mul(prod, e.sub(a, float(k))), prod)
    # lgamma(base) on [1, 2), or lgamma(a + 1) below 1, from the one polynomial
    d = e.sel(small, e.sub(a, 0.5), e.sub(base, 1.5))
    f1 = e.sel(small, a, e.sub(base, 1.0))
    f2 = e.sel(small, e.sub(a, 1.0), e.sub(base, 2.0))
    core = e.mul(e.mul(f1, f2), e.poly(d, _LGAMMA_R))
    # Stirling's series for a >= 9 (1/a and log a are harmless elsewhere)
    z = e.div(1.0, a)
    log_a = _log(e, a)
    stirling = e.add(e.fma(e.sub(a, 0.5), e.sub(log_a, 1.0), _STIRLING_C0),
                     e.mul(z, e.poly(e.mul(z, z), _STIRLING)))
    # the one other logarithm: of a (below 1), of the product (2 to 9), or for negative x of
    # pi / (|sin(pi x)| * a * product) (pi / |sin(pi x)| below 1, pi / (|sin(pi x)| a) from 9)
    fr = e.sub(x, e.rint(x))
    sin_pi, _ = _sin_cos_pi(e, fr)
    fold = e.mul(e.sel(small, 1.0, a), e.sel(_or(b, small, big), 1.0, prod))
    w_neg = e.div(math.pi, e.mul(e.fabs(sin_pi), fold))
    w = e.sel(neg, w_neg, e.sel(small, a, prod))
    log_w = _log(e, w)
    pos = e.sel(big, stirling, e.sel(small, e.sub(core, log_w), e.add(core, log_w)))
    # Just above the zero at 2 the step down (lgamma(a - 1) + log(a - 1): about -0.58 t + t
    # for a = 2 + t) cancels to 0.42 t, 5 ulp. The series about 2 keeps t as a factor.
    t2 = e.sub(a, 2.0)
    near_two = b.and_(e.cmp(">=", a, 2.0), e.cmp("<", a, 2.5))
    pos = e.sel(near_two, e.mul(t2, e.poly(t2, _LGAMMA_NEAR_TWO)), pos)
    res = e.sel(neg, e.sub(log_w, e.sel(big, stirling, core)), pos)
    res = e.sel(b.and_(neg, e.cmp("<", a, _TINY)), e.neg(log_a), res)
    pole = b.and_(neg, e.cmp("==", fr, 0.0))  # (-0 and +0 take the positive path's log(0))
    res = e.sel(_or(b, pole, e.cmp("==", a, math.inf)), math.inf, res)
    return e.sel(e.isnan(x), x, res)


def _digamma(e: _Em, x):
    b = e.b
    neg = e.cmp("<", x, 0.0)
    a = e.fabs(x)
    small = e.cmp("<", a, 1.0)
    big = e.cmp(">=", a, _DIGAMMA_ASYMPTOTIC_FROM)
    n, base = _shifted(e, a, small, _DIGAMMA_MAX_SHIFT)
    # below 1 the base is a + 1, rounded: its rounding error joins the polynomial's argument
    up, up_err = e.fast_two_sum(1.0, a)
    base = e.sel(small, up, base)
    inv_a = e.div(1.0, a)
    # digamma(a) = P(base) + acc; for negative x the wanted digamma(1 + a) is digamma(a) + 1/a
    # (below 1 that is P(a + 1) itself)
    acc = e.sel(small, e.sel(neg, 0.0, e.neg(inv_a)), e.sel(neg, inv_a, 0.0))
    for k in range(1, _DIGAMMA_MAX_SHIFT + 1):
        term = e.div(1.0, e.sub(a, float(k)))
        acc = e.add(acc, e.sel(e.cmp("<=", e.c(float(k)), n), term, 0.0))
    dd = e.add(e.sub(base, _DIGAMMA_X0_HI), e.sub(e.sel(small, up_err, 0.0), _DIGAMMA_X0_LO))
    core = e.fma(dd, e.poly(dd, _DIGAMMA_ROOT), acc)
    w = e.mul(inv_a, inv_a)
    asym = e.sub(e.sub(_log(e, a), e.mul(0.5, inv_a)), e.mul(w, e.poly(w, _DIGAMMA_ASYMPTOTIC)))
    r = e.sel(big, e.add(asym, e.sel(neg, inv_a, 0.0)), core)
    fr = e.sub(x, e.rint(x))
    sin_pi, cos_pi = _sin_cos_pi(e, fr)
    res = e.sel(neg, e.sub(r, e.div(e.mul(math.pi, cos_pi), sin_pi)), r)
    res = e.sel(b.and_(neg, e.cmp("<", a, _TINY)), inv_a, res)
    pole = b.and_(e.cmp("<=", x, 0.0), e.cmp("==", fr, 0.0))
    res = e.sel(_or(b, pole, e.cmp("==", x, -math.inf)), e.nan(), res)
    return e.sel(e.isnan(x), x, res)


def _erf_inv(e: _Em, x, steps: int):
    a = e.fabs(x)
    one_minus = e.sub(1.0, a)
    w = e.neg(_log(e, e.mul(one_minus, e.add(1.0, a))))
    sw = e.sqrt(w)
    central = e.poly(e.sub(w, 2.5), ERF_INV_GUESS_CENTRAL)
    tail = e.poly(e.sub(sw, 3.0), ERF_INV_GUESS_TAIL)
    guess = e.mul(e.sel(e.cmp("<", w, 5.0), central, tail), a)
    v = e.sel(e.cmp("<", w, _ERF_INV_FAR_W), guess, e.poly(e.sub(sw, 5.0), _ERF_INV_FAR_TAIL))
    cs = e.C("erf")
    for _ in range(steps):
        z = e.mul(v, v)
        # erf(v) - a with one rounding in the leading product, or (1 - a) - erfc(v)
        r_small = e.add(e.fma(v, cs[0], e.neg(a)),
                        e.mul(v, e.fma(z, e.poly(z, cs[1:]), _TWO_OVER_SQRTPI_LO)))
        r_big = e.sub(one_minus, _erfc_big(e, v))
        r = e.sel(e.cmp("<", v, 1.0), r_small, r_big)
        q = e.div(r, e.mul(2.0 / _SQRT_PI, _exp_core(e, e.neg(z))))
        v = e.sub(v, e.div(q, e.fma(v, q, 1.0)))
    res = e.sel(e.cmp("<", a, 1.0), v, e.sel(e.cmp("==", a, 1.0), math.inf, e.nan()))
    res = e.sel(e.cmp("==", a, 0.0), 0.0, res)
    return e.sel(e.isnan(x), x, e.copysign(res, x))


def lgamma(e: _Em, x):
    """log|Gamma(x)| of float64 ``x``: +inf at the poles (0 and the negative integers) and at
    +-inf."""
    return _lgamma(e, x)


def digamma(e: _Em, x):
    """The logarithmic derivative of Gamma of float64 ``x``: NaN at the poles (0 and the
    negative integers) and at -inf, +inf at +inf."""
    return _digamma(e, x)


def erf_inv(e: _Em, x):
    """The inverse of erf (float32 or float64): +-inf at +-1, NaN beyond."""
    return _erf_inv(e, x, steps=1 if e.d else 0)
