"""Records for ember.scipy.special (references: NumPy formulas and math-module loops)."""

import math

import numpy as np

import ember.scipy.special as sp
from tests.op_records.base import OpRecord

F32 = (np.dtype("float32"),)
U = (((),), ((5,),), ((2, 3),))
B = (((5,), (5,)), ((2, 3), (3,)))


def _r(name, fn, ref, shapes=U, rng="default", diff=True, **kw):
    return OpRecord("scipy.special." + name, fn, ref, F32, shapes, rng=rng,
                    differentiable=diff, kind="scipy", **kw)


def _vec(f):
    return lambda *a: np.vectorize(lambda *v: f(*map(float, v)), otypes=[np.float64])(*a)


def _i0(x):
    return sum((x * x / 4) ** k / math.factorial(k) ** 2 for k in range(60))


def _i1(x):
    return sum((x / 2) ** (2 * k + 1) / (math.factorial(k) * math.factorial(k + 1))
               for k in range(60))


def _gammainc(a, x):  # the series, term by term in log space
    return sum(math.exp((a + n) * math.log(x) - x - math.lgamma(a + n + 1))
               for n in range(200))


def _zeta(s, q):  # direct sum plus the integral tail
    n = 20000
    return sum((q + k) ** -s for k in range(n)) + (q + n) ** (1 - s) / (s - 1) \
        - (q + n) ** -s / 2


RECORDS = [
    _r("gammaln", sp.gammaln, _vec(math.lgamma), rng="positive"),
    _r("expit", sp.expit, lambda x: 1 / (1 + np.exp(-x))),
    # (Arguments moved into (0, 1); zeta and polygamma's away from the pole at 0, where
    # second finite differences lose their accuracy.)
    _r("logit", lambda x: sp.logit(x * 0.5 + 0.5), lambda x: np.log((1 + x) / (1 - x)),
       rng="unit", tol=1e-5),
    _r("ndtr", sp.ndtr, _vec(lambda x: 0.5 * math.erfc(-x / math.sqrt(2)))),
    _r("log_ndtr", sp.log_ndtr, _vec(lambda x: math.log(0.5 * math.erfc(-x / math.sqrt(2))))),
    _r("i0e", sp.i0e, _vec(lambda x: _i0(x) * math.exp(-abs(x)))),
    _r("i1e", sp.i1e, _vec(lambda x: _i1(x) * math.exp(-abs(x)))),
    _r("entr", sp.entr, lambda x: -x * np.log(x), rng="positive"),
    _r("xlogy", sp.xlogy, lambda x, y: x * np.log(y), B, rng="positive"),
    _r("rel_entr", sp.rel_entr, lambda p, q: p * np.log(p / q), B, rng="positive"),
    _r("betaln", sp.betaln, _vec(lambda a, b: math.lgamma(a) + math.lgamma(b)
                                 - math.lgamma(a + b)), B, rng="positive"),
    # (the second derivative in a needs igamma_grad_a's, which JAX does not define either)
    _r("gammainc", sp.gammainc, _vec(_gammainc), B, rng="positive", tol=1e-5, diff=False),
    _r("gammainc_x", lambda x: sp.gammainc(1.5, x), _vec(lambda x: _gammainc(1.5, x)),
       (((5,),),), rng="positive", tol=1e-5),
    _r("zeta_q", lambda q: sp.zeta(3.0, q + 0.5), _vec(lambda q: _zeta(3.0, q + 0.5)),
       rng="positive", tol=1e-5),
    _r("polygamma1", lambda x: sp.polygamma(1, x + 0.5), _vec(lambda x: _zeta(2.0, x + 0.5)),
       rng="positive", tol=1e-5),
]

# ember.scipy.special_more (references: mpmath and the math module).
import mpmath as _mp  # noqa: E402

RECORDS += [
    _r("loggamma", sp.loggamma, _vec(math.lgamma), rng="positive"),
    _r("erfcx", sp.erfcx, _vec(lambda x: math.exp(x * x) * math.erfc(x)), tol=1e-5),
    _r("exp1", sp.exp1, _vec(lambda x: float(_mp.expint(1, x))), rng="positive", tol=1e-5),
    _r("expi", sp.expi, _vec(lambda x: float(_mp.ei(x))), rng="positive", tol=1e-5),
    _r("expn3", lambda x: sp.expn(3, x), _vec(lambda x: float(_mp.expint(3, x))),
       rng="positive", tol=1e-5),
    _r("spence", sp.spence, _vec(lambda x: float(_mp.polylog(2, 1 - x))), rng="positive",
       tol=1e-5),
    _r("poch", lambda z: sp.poch(z + 1, 1.5),
       _vec(lambda z: math.gamma(z + 2.5) / math.gamma(z + 1)),
       rng="positive", tol=1e-5),
    _r("betainc_x", lambda x: sp.betainc(2.5, 1.5, x * 0.5 + 0.5),
       _vec(lambda x: float(_mp.betainc(2.5, 1.5, 0, x * 0.5 + 0.5, regularized=True))),
       shapes=(((5,),),), rng="unit", tol=1e-5),
]

RECORDS += [
    _r("erfinv", sp.erfinv, _vec(lambda x: float(_mp.erfinv(x))), rng="unit", tol=1e-5),
    _r("gammaincc", sp.gammaincc, _vec(lambda a, x: 1 - _gammainc(a, x)), B, rng="positive",
       tol=1e-5, diff=False),
    _r("ndtri", lambda p: sp.ndtri(p * 0.5 + 0.5),
       _vec(lambda p: math.sqrt(2) * float(_mp.erfinv(2 * (p * 0.5 + 0.5) - 1))),
       rng="unit", tol=1e-5),
    _r("xlog1py", sp.xlog1py, lambda x, y: x * np.log1p(y), B, rng="positive"),
    _r("kl_div", sp.kl_div, lambda p, q: p * np.log(p / q) - p + q, B, rng="positive"),
    _r("multigammaln", lambda a: sp.multigammaln(a + 1.0, 2),
       _vec(lambda a: math.log(math.pi) / 2 + math.lgamma(a + 1) + math.lgamma(a + 0.5)),
       rng="positive", tol=1e-5),
    _r("gammasgn", sp.gammasgn, _vec(lambda x: math.copysign(1.0, math.gamma(x))),
       rng="nonzero", diff=False),
    _r("factorial", sp.factorial, _vec(lambda n: math.gamma(n + 1)), rng="positive",
       diff=False, tol=1e-5),
]
