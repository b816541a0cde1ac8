"""lax's special-function primitives (ember/lax/special.py) and ember.scipy.special_extra,
against JAX (oracle) and mpmath."""

import math

import mpmath as mp
import numpy as np
import pytest

import ember
import ember.numpy as jnp
import ember.scipy.special as sp
from ember import lax
from ember.test_util import check_grads

# Grids with the special values: 0, inf, NaN, negative, and both series/fraction regions.
A = np.array([0., 0., 1., np.inf, 1., -1., 0.5, 2., 10., 3., 120., np.nan, 1.], np.float32)
X = np.array([1., 0., 0., 1., np.inf, 1., 0.1, 1.5, 9.5, 30., 100., 1., np.nan], np.float32)


def _close(got, want, rtol, atol=0.0):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


def test_igamma_family_matches_jax(jax):
    for name in ("igamma", "igammac", "igamma_grad_a", "random_gamma_grad"):
        got, want = getattr(lax, name)(A, X), getattr(jax.lax, name)(A, X)
        _close(got, want, rtol=2e-4, atol=1e-6)
    # jit (the lowering inlines the same math) on the interpreter backend too
    for backend in ("cpu", "interpreter"):
        _close(ember.jit(lax.igamma_grad_a, backend=backend)(A, X), lax.igamma_grad_a(A, X),
               rtol=1e-5, atol=1e-7)


def test_igamma_and_betainc_edge_values_match_jax(jax):
    # Zeros, infinities, NaNs and out-of-domain arguments in every combination (XLA's
    # choices, e.g. igamma(0, x) is NaN below x = 1 and 1 from there; betainc at x = 0 is 0).
    vals = np.array([0.0, 1e-30, 0.5, 1.0, 2.0, 50.0, np.inf, np.nan, -1.0], np.float32)
    a, x = (v.ravel() for v in np.meshgrid(vals, vals))
    for name in ("igamma", "igammac"):
        np.testing.assert_allclose(getattr(lax, name)(a, x), getattr(jax.lax, name)(a, x),
                                   rtol=1e-5, atol=1e-6, err_msg=name)
    for name in ("gammainc", "gammaincc"):
        np.testing.assert_allclose(getattr(sp, name)(a, x),
                                   getattr(jax.scipy.special, name)(a, x), rtol=1e-5,
                                   atol=1e-6, err_msg=name)
    ab = np.array([0.0, 0.5, 2.0, np.inf, np.nan, -1.0], np.float32)
    a, b, x = (v.ravel() for v in np.meshgrid(ab, ab, np.array([0.0, 0.3, 1.0, -0.5, 1.5,
                                                                  np.nan], np.float32)))
    np.testing.assert_allclose(sp.betainc(a, b, x), jax.scipy.special.betainc(a, b, x),
                               rtol=1e-5, atol=1e-6)


def test_igamma_family_against_mpmath():
    a, x = np.array([0.5, 3.0, 12.0]), np.array([0.7, 4.5, 9.0])
    with mp.workdps(30):
        p = [mp.gammainc(ai, 0, xi, regularized=True) for ai, xi in zip(a, x)]
        dpa = [mp.diff(lambda t, xi=xi: mp.gammainc(t, 0, xi, regularized=True), ai)
               for ai, xi in zip(a, x)]
        pdf = [xi ** (ai - 1) * mp.exp(-xi) / mp.gamma(ai) for ai, xi in zip(a, x)]
    with ember.enable_x64():
        _close(lax.igamma(a, x), [float(v) for v in p], rtol=1e-12)
        _close(lax.igammac(a, x), [float(1 - v) for v in p], rtol=1e-12)
        _close(lax.igamma_grad_a(a, x), [float(v) for v in dpa], rtol=1e-10)
        _close(lax.random_gamma_grad(a, x), [float(-d / f) for d, f in zip(dpa, pdf)],
               rtol=1e-10)
        # The jvp rules: a via igamma_grad_a, x via the density (first order, both modes).
        check_grads(lax.igamma, (a, x), order=1)
        check_grads(lax.igammac, (a, x), order=1)


def test_zeta_polygamma_bessel_betainc_match_jax(jax):
    s = np.array([2., 3., 1., 0.5, 4., 2., 3.], np.float32)
    q = np.array([1., 0.3, 1., 1., -2., 50., 0.], np.float32)
    _close(lax.zeta(s, q), jax.lax.zeta(s, q), rtol=1e-5)
    # scipy.special.zeta is lax.zeta (its far terms underflow to 0, not NaN), differentiable
    # in both arguments through the same series (as JAX's custom jvp).
    assert float(sp.zeta(121.5, 100.0)) == 0.0 == float(jax.scipy.special.zeta(121.5, 100.0))
    for argnum in (0, 1):
        _close(ember.grad(sp.zeta, argnum)(3.0, 1.5),
               jax.grad(jax.scipy.special.zeta, argnum)(3.0, 1.5), rtol=1e-5)
    m = np.array([0., 1., 2., 3., 1.5, -1., 1.], np.float32)
    xs = np.array([0.7, 2., -1.5, 5., 1., 1., -1.], np.float32)
    _close(lax.polygamma(m, xs), jax.lax.polygamma(m, xs), rtol=1e-5)
    z = np.array([-40., -3., -1e-3, 0., 0.5, 7., 15., 16., 100.], np.float32)
    for name in ("bessel_i0e", "bessel_i1e"):
        _close(getattr(lax, name)(z), getattr(jax.lax, name)(z), rtol=1e-6, atol=1e-7)
    a = np.array([0.5, 2., 5., 0., 1., -1., 2., 30.], np.float32)
    b = np.array([0.5, 3., 1., 1., 0., 1., 2., 40.], np.float32)
    x = np.array([0.3, 0.5, 0.9, 0.5, 0.5, 0.5, 1.5, 0.4], np.float32)
    _close(lax.betainc(a, b, x), jax.lax.betainc(a, b, x), rtol=5e-5, atol=1e-6)
    _close(ember.jit(lax.betainc)(a, b, x), lax.betainc(a, b, x), rtol=1e-6)


def test_derivative_rules_match_jax(jax):
    for f, args in [(lax.polygamma, (1.0, 1.5)), (lax.bessel_i0e, (-0.7,)),
                    (lax.bessel_i1e, (0.0,)), (lax.bessel_i1e, (2.5,)),
                    (lax.betainc, (2.0, 3.0, 0.4))]:
        argnum = len(args) - 1
        got = ember.grad(f, argnum)(*args)
        want = getattr(jax.lax, f.__name__)  # the same lax function in JAX
        _close(got, jax.grad(want, argnum)(*args), rtol=1e-5)
    with pytest.raises(ValueError, match="polygamma gradient with respect to m"):
        ember.grad(lax.polygamma)(1.0, 1.5)
    with pytest.raises(ValueError, match="Betainc gradient with respect to a and b"):
        ember.grad(lax.betainc)(2.0, 3.0, 0.4)
    with pytest.raises(NotImplementedError):
        ember.grad(lax.zeta, 1)(2.0, 1.0)


def test_dtypes_weak_types_vmap_and_errors(jax):
    h = lax.igamma(jnp.float16(2.0), jnp.float16(1.0))
    assert h.dtype == np.float16
    _close(h, jax.lax.igamma(np.float16(2.0), np.float16(1.0)), rtol=1e-3)
    assert lax.igamma(1.0, 2.0).weak_type and not lax.igamma(np.float32(1.0), 2.0).weak_type
    assert lax.betainc(np.ones(3, np.float32), 2.0, 0.5).shape == (3,)
    a, x = np.array([1., 2., 3.], np.float32), np.array([0.5, 2., 4.], np.float32)
    _close(ember.vmap(lax.igamma, (0, None))(a, np.float32(2.0)), lax.igamma(a, 2.0),
           rtol=1e-6)
    _close(ember.vmap(lax.random_gamma_grad)(a, x), lax.random_gamma_grad(a, x), rtol=1e-6)
    assert "regularized_incomplete_beta" in str(ember.make_jaxpr(lax.betainc)(1., 2., .5))
    with pytest.raises(TypeError, match="igamma"):
        lax.igamma(np.int32(1), np.int32(2))
    with pytest.raises(TypeError, match="bessel_i0e"):
        lax.bessel_i0e(np.int32(1))
    with pytest.raises(TypeError, match="same dtypes"):
        lax.zeta(np.float32(2.0), np.float16(1.0))
    with pytest.raises(TypeError, match="igamma"):
        lax.igamma(np.ones(3, np.float32), np.ones(2, np.float32))


# ---------------------------------------------------------------- scipy.special_extra


def test_boxcox_matches_jax(jax):
    x = np.array([0., 1e-6, 0.5, 1., 2., 50., -1.], np.float32)
    for lmbda in (0.0, 0.5, -1.5, 1e-7, 2.0):
        _close(sp.boxcox(x, lmbda), jax.scipy.special.boxcox(x, lmbda), rtol=1e-6)
        _close(sp.boxcox1p(x - 0.5, lmbda), jax.scipy.special.boxcox1p(x - 0.5, lmbda),
               rtol=1e-6)
    assert sp.boxcox(np.int32(2), 0.5).dtype == np.float32
    check_grads(lambda x, lm: sp.boxcox(x, lm), (np.float32(2.0), np.float32(0.5)), order=2)
    check_grads(lambda x, lm: sp.boxcox1p(x, lm), (np.float32(0.3), np.float32(-0.5)), order=2)


def test_bessel_jn_against_mpmath_and_jax(jax):
    z = np.array([-3., 0., 1e-3, 0.5, 1., 5., 20.], np.float32)
    got = sp.bessel_jn(z, v=3)
    assert got.shape == (4, 7) and got.dtype == np.float32
    with mp.workdps(30):
        ref = [[float(mp.besselj(k, float(t))) for t in z] for k in range(4)]
    _close(got, ref, rtol=0, atol=2e-6)
    # (JAX's float32 recurrence overflows to NaN at small |z|; where it is finite we agree.)
    want = np.asarray(jax.scipy.special.bessel_jn(z, v=3))
    ok = np.isfinite(want)
    assert ok[:, -1].all()
    _close(np.asarray(got)[ok], want[ok], rtol=0, atol=2e-6)
    _close(ember.jit(lambda t: sp.bessel_jn(t, v=3))(z), got, rtol=1e-6, atol=1e-7)
    check_grads(lambda t: sp.bessel_jn(t, v=2)[2], (np.float32(1.7),), order=1)
    with pytest.raises(TypeError, match="bessel_jn"):
        sp.bessel_jn(z, v=1.5)
    with pytest.raises(ValueError, match="complex"):
        sp.bessel_jn(z.astype(np.complex64), v=1)
    assert math.isclose(float(sp.bessel_jn(np.float32(2.0), v=0)[0]), 0.22389078, rel_tol=1e-5)


# ---------------------------------------------------------------- wofz, dawsn, fresnel, sici

GRID = np.array([0., 1e-30, -0.3, 0.45, 0.55, 1.5, 1.59, 1.61, -3.9, 4.1, 7.3, 30., 1e7,
                 np.inf, -np.inf, np.nan], np.float32)
FINITE = np.array([1e-3, -0.3, 0.45, 0.55, 1.5, 1.61, -3.9, 4.1, 7.3, 30., 250.])


def _mp_refs(x):
    with mp.workdps(30):
        return {
            "dawsn": [mp.sqrt(mp.pi) / 2 * mp.exp(-t * t) * mp.erfi(t) for t in x],
            "fresnel": ([mp.fresnels(t) for t in x], [mp.fresnelc(t) for t in x]),
            # (Ci of a negative argument is Ci(|x|) here, as JAX)
            "sici": ([mp.si(t) for t in x], [mp.ci(abs(t)) for t in x]),
        }


def test_wofz_dawsn_fresnel_sici_match_jax(jax):
    js = jax.scipy.special
    with np.errstate(all="ignore"):
        for name in ("dawsn", "fresnel", "sici"):
            got, want = getattr(sp, name)(GRID), getattr(js, name)(GRID)
            for g, w in zip(np.atleast_2d(got), np.atleast_2d(want)):
                assert g.dtype == np.float32 and not getattr(g, "weak_type", False)
                _close(g, w, rtol=2e-6, atol=1e-7)
    z = np.array([0, 1 + 1j, -3 - 2j, 5j, -2 + 0.1j, 10 - 10j, 0.5 - 3j, 40 + 1e-3j],
                 np.complex64)
    _close(sp.wofz(z), js.wofz(z), rtol=2e-6, atol=1e-7)
    assert sp.wofz(2).dtype == np.complex64 and sp.dawsn(2).dtype == np.float32
    with pytest.raises(ValueError, match="dawsn does not support complex"):
        sp.dawsn(np.complex64(1))


def test_wofz_dawsn_fresnel_sici_against_mpmath_x64():
    refs = _mp_refs(FINITE)
    with ember.enable_x64():
        _close(sp.dawsn(FINITE), [float(v) for v in refs["dawsn"]], rtol=1e-12)
        for name in ("fresnel", "sici"):
            for got, want in zip(getattr(sp, name)(FINITE), refs[name]):
                _close(got, [float(v) for v in want], rtol=1e-11, atol=1e-15)
        z = np.array([0.3 + 0.2j, 1 + 1j, -3 - 2j, 6 + 0.5j, 0.1 - 7j])
        with mp.workdps(30):
            want = [complex(mp.exp(-t * t) * mp.erfc(-1j * t)) for t in z]
        _close(sp.wofz(z), want, rtol=1e-12)


def test_wofz_dawsn_fresnel_sici_grads_jit_vmap(jax):
    js = jax.scipy.special
    for name in ("dawsn", "fresnel", "sici"):
        def f(v, mod=sp, name=name):
            return sum(ember.tree_util.tree_leaves(getattr(mod, name)(v)))
        want = jax.grad(lambda v, name=name: sum(jax.tree.leaves(getattr(js, name)(v))))(1.3)
        _close(ember.grad(f)(1.3), want, rtol=1e-5)
    _close(ember.grad(lambda v: jnp.imag(sp.wofz(v)))(1.5),
           jax.grad(lambda v: jax.numpy.imag(js.wofz(v)))(1.5), rtol=1e-5)
    with ember.enable_x64():
        check_grads(sp.dawsn, (np.array([0.2, 1.3, -2.5]),), order=2)
        check_grads(lambda v: sp.sici(v)[1], (np.array([0.7, 5.0]),), order=1)
    x = GRID[:12]
    fns = lambda v: (sp.dawsn(v), *sp.fresnel(v), *sp.sici(v), sp.wofz(v))  # noqa: E731
    eager = fns(x)
    for got, want in zip(ember.jit(fns)(x), eager):
        _close(got, want, rtol=1e-6, atol=1e-7)
    for got, want in zip(ember.vmap(fns)(x), eager):
        _close(got, want, rtol=1e-6, atol=1e-7)
