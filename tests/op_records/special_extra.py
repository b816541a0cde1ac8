"""Records for ember.lax's special-function primitives (ember/lax/special.py) and
ember.scipy.special_extra (references: mpmath and math-module loops)."""

import math

import mpmath as mp
import numpy as np

from ember import lax
from tests.op_records.base import OpRecord

F32 = (np.dtype("float32"),)
U = (((5,),),)
B = (((5,), (5,)), ((), (4,)))


def _vec(f):
    return lambda *a: np.vectorize(lambda *v: float(f(*map(float, v))), otypes=[np.float64])(*a)


def _r(name, fn, ref, shapes=U, rng="positive", diff=True, kind="lax", **kw):
    return OpRecord(name, fn, ref, F32, shapes, rng=rng, differentiable=diff, kind=kind, **kw)


def _reg_gammainc(a, x):
    return mp.gammainc(a, 0, x, regularized=True)


RECORDS = [
    # (Second derivatives in a need igamma_grad_a's, which JAX does not define either: the
    # derivative records differentiate in x; test_special_extra checks the first in a.)
    _r("lax.igamma", lax.igamma, _vec(_reg_gammainc), B, tol=1e-5, diff=False),
    _r("lax.igammac", lax.igammac, _vec(lambda a, x: 1 - _reg_gammainc(a, x)), B, tol=1e-5,
       diff=False),
    # (one record for both jvp rules in x: one jit compile)
    _r("lax.igamma_igammac_x", lambda x: (lax.igamma(2.5, x), lax.igammac(0.5, x)),
       lambda x: (_vec(lambda x: _reg_gammainc(2.5, x))(x),
                  _vec(lambda x: 1 - _reg_gammainc(0.5, x))(x)), shapes=(((3,),),), tol=1e-5),
    # (no derivatives of igamma_grad_a and random_gamma_grad, as in JAX)
    _r("lax.igamma_grad_a", lax.igamma_grad_a,
       _vec(lambda a, x: mp.diff(lambda t: _reg_gammainc(t, x), a)), B, tol=1e-4, diff=False),
    _r("lax.random_gamma_grad", lax.random_gamma_grad,
       _vec(lambda a, x: -mp.diff(lambda t: _reg_gammainc(t, x), a)
            / (x ** (a - 1) * mp.exp(-x) / mp.gamma(a))), B, tol=1e-4, diff=False),
    _r("lax.zeta", lambda s, q: lax.zeta(s + 1.5, q), _vec(lambda s, q: mp.zeta(s + 1.5, q)),
       B, tol=1e-5, diff=False),
    _r("lax.polygamma", lambda x: lax.polygamma(2.0, x + 0.5),
       _vec(lambda x: mp.polygamma(2, x + 0.5)), shapes=(((3,),),), tol=1e-5),
    _r("lax.bessel_i0e_i1e", lambda x: (lax.bessel_i0e(x), lax.bessel_i1e(x)),
       lambda x: tuple(_vec(lambda x, n=n: mp.besseli(n, x) * math.exp(-abs(x)))(x)
                       for n in (0, 1)), rng="default"),
    _r("lax.betainc", lambda x: lax.betainc(2.5, 1.5, x * 0.5 + 0.5),
       _vec(lambda x: mp.betainc(2.5, 1.5, 0, x * 0.5 + 0.5, regularized=True)),
       shapes=(((3,),),), rng="unit", tol=1e-5),
]

# ember.scipy.special_extra
import ember.scipy.special as sp  # noqa: E402

RECORDS += [
    _r("scipy.special.boxcox", lambda x: sp.boxcox(x, 0.5), lambda x: (np.sqrt(x) - 1) / 0.5,
       kind="scipy"),
    _r("scipy.special.boxcox1p", lambda x: sp.boxcox1p(x, -1.5),
       lambda x: ((1 + x) ** -1.5 - 1) / -1.5, kind="scipy"),
    # (|z| of a few units here: a 20-step recurrence is accurate and keeps the grads quick)
    _r("scipy.special.bessel_jn", lambda z: sp.bessel_jn(z, v=2, n_iter=20)[2],
       _vec(lambda z: mp.besselj(2, z)), shapes=(((3,),),), rng="default", kind="scipy",
       tol=1e-5),
]

RECORDS += [
    _r("scipy.special.dawsn", sp.dawsn,
       _vec(lambda x: mp.sqrt(mp.pi) / 2 * mp.exp(-x * x) * mp.erfi(x)), rng="default",
       kind="scipy", tol=1e-5),
    _r("scipy.special.fresnel", sp.fresnel,
       lambda x: (_vec(mp.fresnels)(x), _vec(mp.fresnelc)(x)), rng="default", kind="scipy",
       tol=1e-5),
    _r("scipy.special.sici", sp.sici, lambda x: (_vec(mp.si)(x), _vec(mp.ci)(x)),
       rng="positive", kind="scipy", tol=1e-5),
    _r("scipy.special.wofz_real", lambda x: sp.wofz(x).imag,
       _vec(lambda x: mp.im(mp.exp(-x * x) * mp.erfc(-1j * x))), rng="default", kind="scipy",
       tol=1e-5),
]

# ember.scipy.special_hyp (hyp1f1/hyp2f1 are differentiated in tests/test_special_extra.py:
# their parameter-derivative series are while loops, not reverse-differentiable twice, as JAX)
RECORDS += [
    _r("scipy.special.hyp1f1", lambda x: sp.hyp1f1(0.5, 1.5, x),
       _vec(lambda x: mp.hyp1f1(0.5, 1.5, x)), rng="default", kind="scipy", tol=1e-5,
       diff=False),
    _r("scipy.special.hyp2f1", lambda x: sp.hyp2f1(0.5, 1.5, 2.5, x * 0.4),
       _vec(lambda x: mp.hyp2f1(0.5, 1.5, 2.5, x * 0.4)), rng="unit", kind="scipy",
       tol=1e-5, diff=False),
    _r("scipy.special.owens_t", sp.owens_t,
       _vec(lambda h, a: mp.quad(lambda t: mp.exp(-h * h * (1 + t * t) / 2) / (1 + t * t),
                                 [0, a]) / (2 * mp.pi)), B, rng="default", kind="scipy",
       tol=1e-5),
    _r("scipy.special.sph_harm_y",
       lambda t: sp.sph_harm_y(np.array([0, 1, 2, 3, 4]), np.array([0, -1, 2, 1, -3]), t,
                               0.7).real,
       lambda t: np.array([float(mp.re(mp.spherharm(n, m, float(ti), 0.7)))
                           for n, m, ti in zip([0, 1, 2, 3, 4], [0, -1, 2, 1, -3], t)]),
       kind="scipy", tol=1e-5),
]
