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


# ---------------------------------------------------------------- hyp1f1, hyp2f1, owens_t,
# sph_harm_y (ember/scipy/special_hyp.py)


def _grid(*axes):
    return [v.ravel().astype(np.float32) for v in np.meshgrid(*axes, indexing="ij")]


def test_hypergeometric_and_owens_t_match_jax_on_grids(jax):
    # Special values (a == 0, a == b, b == 0, NaN, the asymptotic region |x| >= 100). Not
    # x < -1, where JAX's plain series cancels catastrophically, nor the polynomials
    # (a = -3) at x >= 100, NaN in JAX (ember uses Kummer's transformation and sums the
    # polynomial: checked against mpmath below).
    args = _grid(np.array([0, 0.5, 1, 2.5, -1.5, -3, 7]), np.array([0, 0.5, 1, 2, 3.5, -1.5]),
                 np.array([-0.5, 0, 0.3, 2, 20, 99, 120, np.nan]))
    args = [v[~((args[0] == -3) & (args[2] >= 100))] for v in args]
    _close(sp.hyp1f1(*args), jax.jit(jax.scipy.special.hyp1f1)(*args), rtol=1e-4, atol=1e-6)
    # 2F1: terminating series, Euler's and the logarithmic transformation, x == 1, x > 1.
    args = _grid(np.array([-3, -1.5, 0, 0.5, 1, 2.5]), np.array([-2, 0.5, 1, 3]),
                 np.array([-2, 0, 0.5, 1, 2, 3.5, -1.5]),
                 np.array([-0.9, -0.3, 0, 0.4, 0.92, 0.99, 1, 1.5]))
    keep = ~((args[0] == 2.5) & (args[1] == -2) & (args[2] == -1.5) & (args[3] >= 0.99))
    args = [v[keep] for v in args]  # (f32 rounding times (1-x)^-2, and 0 * inf at x == 1)
    _close(sp.hyp2f1(*args), jax.jit(jax.scipy.special.hyp2f1)(*args), rtol=2e-4, atol=1e-6)
    args = _grid(np.array([-3, -1, 0, 0.2, 0.5, 1, 2, 5, 10, np.inf, np.nan]),
                 np.array([-5, -1, -0.3, 0, 0.5, 1, 1.5, 3, 20, np.inf, np.nan]))
    _close(sp.owens_t(*args), jax.jit(jax.scipy.special.owens_t)(*args), rtol=1e-5,
           atol=1e-7)


def test_hypergeometric_and_owens_t_against_mpmath():
    def owens(h, a):
        return mp.quad(lambda t: mp.exp(-h * h * (1 + t * t) / 2) / (1 + t * t), [0, a]) / (
            2 * mp.pi)
    cases = [
        (sp.hyp1f1, mp.hyp1f1, [(0.5, 1.5, -30.), (2.5, 1.5, 3.), (1., 2., 150.),
                                (-2., 1.5, -200.), (0.3, 4., -500.), (3., 0.7, 40.),
                                (7., -1.5, -4.), (-3., 2., 120.)], 1e-13),
        # (series, Euler's transformation, the log form at c - a - b = 0 and 1, terminating)
        (sp.hyp2f1, mp.hyp2f1, [(0.5, 1.5, 2., 0.3), (1., 1., 2., 0.95), (0.5, 0.5, 1., 0.999),
                                (1., 2., 3., 0.93), (2.5, 1., 1., 0.5), (-3., 2., 1.5, -0.7),
                                (1.5, 2.5, 1., 0.5)], 1e-13),
        (sp.owens_t, owens, [(0.5, 2.), (1., 0.5), (3., 0.2), (0.1, 10.), (2., -3.),
                             (0., 0.7)], 1e-13),
    ]
    with ember.enable_x64():
        for f, ref, pts, rtol in cases:
            with mp.workdps(40):
                want = [float(ref(*map(mp.mpf, p))) for p in pts]
            got = f(*(np.array(c, np.float64) for c in zip(*pts)))
            assert got.dtype == np.float64
            np.testing.assert_allclose(got, want, rtol=rtol, err_msg=f.__name__)


def test_hypergeometric_and_owens_t_derivatives_jit_vmap(jax):
    jsp = jax.scipy.special
    for f, args in [(sp.hyp1f1, (1.0, 2.0, 0.5)), (sp.hyp2f1, (1.0, 2.0, 3.0, 0.5)),
                    (sp.owens_t, (0.5, 2.0)), (sp.owens_t, (-1.0, 0.3))]:
        argnums = tuple(range(len(args)))
        got = ember.grad(f, argnums)(*args)
        want = jax.jit(jax.grad(getattr(jsp, f.__name__), argnums))(*args)
        _close(got, want, rtol=1e-5, atol=1e-7)
    _close(ember.grad(ember.grad(sp.hyp1f1, 2), 2)(1.0, 2.0, 0.5),
           jax.jit(jax.grad(jax.grad(jsp.hyp1f1, 2), 2))(1.0, 2.0, 0.5), rtol=1e-5)
    x = np.array([0.1, 0.5, 0.95, -0.5], np.float32)
    a = np.array([0.5, 1.0, 2.5, 0.7], np.float32)
    for backend in ("cpu", "interpreter"):
        _close(ember.jit(sp.hyp2f1, backend=backend)(a, 1.5, 2.0, x), sp.hyp2f1(a, 1.5, 2.0, x),
               rtol=1e-6)
    _close(ember.jit(sp.hyp1f1, backend="interpreter")(a, 2.0, x * 150),
           sp.hyp1f1(a, 2.0, x * 150), rtol=1e-5)
    _close(ember.vmap(sp.hyp1f1, (0, None, 0))(a, 2.0, x * 30),
           [sp.hyp1f1(ai, 2.0, xi * 30) for ai, xi in zip(a, x)], rtol=1e-6)
    _close(ember.vmap(sp.owens_t)(x, a), [sp.owens_t(xi, ai) for xi, ai in zip(x, a)],
           rtol=1e-6)
    # In x: second order forward, first reverse (the parameter-derivative series are loops
    # with data-dependent trip counts, not reverse-differentiable: as in JAX).
    with ember.enable_x64():
        for f in (lambda x: sp.hyp1f1(0.5, 1.5, x), lambda x: sp.hyp2f1(0.5, 1.5, 2.5, x)):
            check_grads(f, (np.array([0.3, -0.4]),), order=2, modes=("fwd",))
            check_grads(f, (np.array([0.3, -0.4]),), order=1, modes=("rev",))
    assert sp.hyp1f1(1.0, 2.0, 0.5).dtype == np.float32
    assert not sp.hyp1f1(1.0, 2.0, 0.5).weak_type and not sp.owens_t(0.5, 1.0).weak_type
    with pytest.raises(ValueError, match="hyp2f1 does not support complex"):
        sp.hyp2f1(1.0, 2.0, 3.0, 0.5j)


def test_sph_harm_y_matches_jax_and_mpmath(jax):
    n = np.array([0, 1, 2, 3, 3, 4, 5, 5, 2])
    m = np.array([0, 1, -2, 2, -3, 0, 4, -1, 3])  # (|m| > n: 0)
    theta = np.array([0.3, 0.7, 1.1, 2.0, 0.0, 3.1, 1.4, 0.5, 1.0], np.float32)
    phi = np.array([0.1, 1.0, 2.0, 3.0, 0.5, 6.0, 4.0, 0.2, 1.0], np.float32)
    got = sp.sph_harm_y(n, m, theta, phi)
    assert got.dtype == np.complex64 and got.shape == (9,)
    _close(got, jax.scipy.special.sph_harm_y(n, m, theta, phi), rtol=1e-5, atol=1e-6)
    # scalar theta, n_max clipping, jit with a static n_max
    _close(sp.sph_harm_y(n, m, 0.5, phi, n_max=2),
           jax.scipy.special.sph_harm_y(n, m, 0.5, phi, n_max=2), rtol=1e-5, atol=1e-6)
    jitted = ember.jit(lambda n, m, t, p: sp.sph_harm_y(n, m, t, p, n_max=5))
    _close(jitted(n, m, theta, phi), got, rtol=1e-5, atol=1e-6)
    with ember.enable_x64():
        th, ph = np.array([0.4, 2.2, 1.3]), np.array([0.3, 5.0, 2.0])
        nn, mm = np.array([7, 12, 20]), np.array([-3, 12, 5])
        with mp.workdps(30):
            # mpmath's spherharm has the same normalization and phase
            want = [complex(mp.spherharm(int(a), int(b), float(t), float(p)))
                    for a, b, t, p in zip(nn, mm, th, ph)]
        got = sp.sph_harm_y(nn, mm, th, ph)
        assert got.dtype == np.complex128
        np.testing.assert_allclose(got, want, rtol=1e-12)
        # d/dtheta through the recurrences, against finite differences
        check_grads(lambda t: sp.sph_harm_y(nn, mm, t, ph).real, (th,), order=1)
    with pytest.raises(NotImplementedError, match="diff_n"):
        sp.sph_harm_y(n, m, theta, phi, diff_n=1)
    with pytest.raises(TypeError, match="integer"):
        sp.sph_harm_y(np.array([1.0]), np.array([0]), 0.5, 0.5)
    with pytest.raises(ember.errors.ConcretizationTypeError):
        ember.jit(sp.sph_harm_y)(n, m, theta, phi)


def test_star_import_gives_every_jax_name(jax):
    namespace: dict = {}
    exec("from ember.scipy.special import *", namespace)
    names = {n for n in dir(jax.scipy.special) if not n.startswith("_")}
    assert names <= set(namespace), sorted(names - set(namespace))


@pytest.mark.parametrize("dtype, bound", [(np.float32, 16), (np.float64, 8)])
def test_scaled_bessel_i0e_i1e_within_ulps_of_mpmath(dtype, bound, x64):
    # Cephes' Chebyshev expansions on both sides of |x| = 8 (float32 keeps their trailing
    # terms, as XLA); zeros, infinities and NaN exactly.
    x = np.concatenate([np.linspace(-40, 40, 801), np.geomspace(1e-30, 1e4, 300),
                        [8.0, -8.0, np.nextafter(8.0, 0), np.nextafter(8.0, 9)]]).astype(dtype)
    for fn, order in ((sp.i0e, 0), (sp.i1e, 1)):
        got = np.asarray(ember.jit(fn)(x)).astype(np.float64)
        with mp.workdps(40):
            want = np.array([float(mp.besseli(order, v) * mp.exp(-abs(v)))
                             for v in map(mp.mpf, x.astype(float))])
        ulps = np.abs(got - want) / np.spacing(np.abs(want).astype(dtype)).astype(np.float64)
        assert ulps.max() <= bound, (fn.__name__, x[np.argmax(ulps)], ulps.max())
        special = np.asarray(ember.jit(fn)(np.array([0.0, np.inf, -np.inf, np.nan], dtype)))
        np.testing.assert_array_equal(special[:3], [1.0 - order, 0.0, 0.0])
        assert np.isnan(special[3]) and np.signbit(special[2]) == bool(order)  # (i1e: -0)


def test_igamma_float32_continued_fraction_stops_when_converged():
    # The continued fraction's factors jitter within an ulp or two of 1 in float32: each
    # element stops (and keeps its value) once its factor is within a few eps of 1, where
    # all of them had gone on for 2000 steps, their values drifting (median 105 eps off for
    # gammaincc, 2500 at worst).
    scipy_special = pytest.importorskip("scipy.special")
    rng = np.random.default_rng(0)  # (enough elements that one jitters for ever)
    a = (rng.random(1 << 16) * 5 + 0.5).astype(np.float32)
    x = (rng.random(1 << 16) * 10).astype(np.float32)
    eps = float(np.finfo(np.float32).eps)
    for fn, ref in ((sp.gammainc, scipy_special.gammainc),
                    (sp.gammaincc, scipy_special.gammaincc)):
        got = np.asarray(ember.jit(fn)(a, x)).astype(np.float64)
        want = ref(a.astype(np.float64), x.astype(np.float64))
        rel = np.abs(got - want)[want > 1e-30] / want[want > 1e-30]
        assert np.median(rel) < 2 * eps and rel.max() < 100 * eps, (np.median(rel), rel.max())


def test_betainc_float32_continued_fraction_stops_when_converged():
    # As igamma's: each element keeps its value once its step's factor is within a few eps
    # of 1 (all had gone on for the 100 steps, drifting: median 2 eps off, now 1).
    scipy_special = pytest.importorskip("scipy.special")
    rng = np.random.default_rng(0)
    a, b = ((rng.random(1 << 16) * 5 + 0.5).astype(np.float32) for _ in range(2))
    x = rng.random(1 << 16).astype(np.float32)
    got = np.asarray(ember.jit(sp.betainc)(a, b, x)).astype(np.float64)
    want = scipy_special.betainc(*(v.astype(np.float64) for v in (a, b, x)))
    rel = np.abs(got - want)[want > 1e-30] / want[want > 1e-30]
    eps = float(np.finfo(np.float32).eps)
    assert np.median(rel) < 1.5 * eps and rel.max() < 100 * eps, (np.median(rel), rel.max())
