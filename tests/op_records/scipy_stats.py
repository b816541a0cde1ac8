"""Records for ember.scipy.stats (references: the densities written out in NumPy / math)."""

import math

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
]
