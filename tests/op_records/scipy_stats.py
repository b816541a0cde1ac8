"""Records for ember.scipy.stats (references: the densities written out in NumPy / math)."""

import math
import statistics

import numpy as np

import ember.scipy.stats as st
from tests.op_records.base import OpRecord

F32 = (np.dtype("float32"),)
B = (((5,), (5,)), ((2, 3), (3,)))
T = (((5,), (5,), (5,)), ((2, 3), (3,), ()))


def _r(name, fn, ref, shapes, rng="positive", diff=True, **kw):
    return OpRecord("scipy.stats." + name, fn, ref, F32, shapes, rng=rng,
                    differentiable=diff, kind="scipy", **kw)


def _vec(f):
    return lambda *a: np.vectorize(lambda *v: f(*map(float, v)), otypes=[np.float64])(*a)


def _t_logpdf(x, df):
    return (math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
            - (df + 1) / 2 * math.log1p(x * x / df))


def _beta_logpdf(x, a, b):
    return ((a - 1) * math.log(x) + (b - 1) * math.log1p(-x)
            - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)))


def _prob(u):
    """Maps a "unit" draw in (-0.9, 0.9) to a probability in (0.2, 0.8): away from 0 and 1,
    where the large higher derivatives of quantiles and log-probabilities spoil the float64
    finite differences of the order-2 gradient check."""
    return u / 3 + 0.5


def _counts(a, mod, start=0):
    """Fixed integer counts along the last axis of ``a`` (the discrete argument)."""
    return np.arange(a.shape[-1]) % mod + start


def _binom_logpmf(k, n, p):
    return (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
            + k * math.log(p) + (n - k) * math.log1p(-p))


def _chi2_logpdf(x, df):
    return ((df / 2 - 1) * math.log(x) - x / 2 - df / 2 * math.log(2)
            - math.lgamma(df / 2))


def _gumbel_r_logpdf(x, m, s):
    z = (x - m) / s
    return -math.log(s) - z - math.exp(-z)


_NORMAL = statistics.NormalDist()


RECORDS = [
    _r("norm.logpdf", st.norm.logpdf,
       lambda x, m, s: -0.5 * ((x - m) / s) ** 2 - np.log(s) - 0.5 * np.log(2 * np.pi), T,
       arg_rngs={0: "default", 1: "small", 2: "ge1"}),
    _r("t.logpdf", st.t.logpdf, _vec(_t_logpdf), B, arg_rngs={0: "default", 1: "ge1"}),
    # (x = u/4 + 0.5 keeps the point inside (0, 1) for every drawn u in (-0.9, 0.9).)
    _r("beta.logpdf", lambda u, a, b: st.beta.logpdf(u * 0.25 + 0.5, a, b),
       lambda u, a, b: _vec(_beta_logpdf)(u * 0.25 + 0.5, a, b), T,
       arg_rngs={0: "unit", 1: "ge1", 2: "ge1"}),
    _r("gamma.logpdf", st.gamma.logpdf,
       _vec(lambda x, a: (a - 1) * math.log(x) - x - math.lgamma(a)), B),
    # (logpmf in mu, at fixed integer counts.)
    _r("poisson.logpmf", lambda mu: st.poisson.logpmf(np.arange(mu.shape[-1]) % 4, mu),
       lambda mu: _vec(lambda k, m: k * math.log(m) - math.lgamma(k + 1) - m)(
           np.arange(mu.shape[-1]) % 4, mu), (((5,),), ((2, 3),))),
    _r("norm.cdf", st.norm.cdf,
       _vec(lambda x, m, s: 0.5 * math.erfc(-(x - m) / (s * math.sqrt(2)))), T,
       arg_rngs={0: "default", 1: "small", 2: "ge1"}),
    _r("norm.ppf", lambda u, m, s: st.norm.ppf(_prob(u), m, s),
       lambda u, m, s: _vec(lambda q, m, s: m + s * _NORMAL.inv_cdf(q))(_prob(u), m, s), T,
       arg_rngs={0: "unit", 1: "small", 2: "ge1"}, tol=1e-4),
    # (x + 1 > loc + 0.1 keeps every point inside the support.)
    _r("expon.logpdf", lambda x, m, s: st.expon.logpdf(x + 1, m, s),
       lambda x, m, s: -np.log(s) - (x + 1 - m) / s, T,
       arg_rngs={1: "small", 2: "ge1"}),
    _r("laplace.logpdf", st.laplace.logpdf,
       lambda x, m, s: -np.log(2 * s) - np.abs(x - m) / s, T,
       arg_rngs={0: "default", 1: "small", 2: "ge1"}),
    _r("logistic.cdf", st.logistic.cdf,
       lambda x, m, s: 1 / (1 + np.exp(-(x - m) / s)), T,
       arg_rngs={0: "default", 1: "small", 2: "ge1"}),
    _r("cauchy.logpdf", st.cauchy.logpdf,
       lambda x, m, s: -np.log(np.pi * s) - np.log1p(((x - m) / s) ** 2), T,
       arg_rngs={0: "default", 1: "small", 2: "ge1"}),
    _r("chi2.logpdf", st.chi2.logpdf, _vec(_chi2_logpdf), B, arg_rngs={1: "ge1"}),
    # (x = loc + scale * q with q in (0.2, 0.8): strictly inside the support.)
    _r("uniform.logpdf", lambda u, m, s: st.uniform.logpdf(m + s * _prob(u), m, s),
       lambda u, m, s: np.broadcast_to(-np.log(s), np.broadcast_shapes(u.shape, m.shape,
                                                                         s.shape)), T,
       arg_rngs={0: "unit", 1: "small", 2: "ge1"}),
    _r("gumbel_r.logpdf", st.gumbel_r.logpdf, _vec(_gumbel_r_logpdf), T,
       arg_rngs={0: "default", 1: "small", 2: "ge1"}),
    # (The discrete pmfs: differentiated in p only, at fixed integer counts.)
    _r("binom.logpmf", lambda u: st.binom.logpmf(_counts(u, 4), 5, _prob(u)),
       lambda u: _vec(_binom_logpmf)(_counts(u, 4), 5, _prob(u)), (((5,),), ((2, 3),)),
       rng="unit"),
    _r("geom.logpmf", lambda u: st.geom.logpmf(_counts(u, 4, 1), _prob(u)),
       lambda u: _vec(lambda k, p: (k - 1) * math.log1p(-p) + math.log(p))(
           _counts(u, 4, 1), _prob(u)), (((5,),), ((2, 3),)), rng="unit"),
    _r("bernoulli.logpmf", lambda u: st.bernoulli.logpmf(_counts(u, 2), _prob(u)),
       lambda u: _vec(lambda k, p: k * math.log(p) + (1 - k) * math.log1p(-p))(
           _counts(u, 2), _prob(u)), (((5,),), ((2, 3),)), rng="unit"),
]
