"""ember.scipy.special's betainc, exponential integrals, erfcx, loggamma, poch, comb,
spence and bernoulli: values against mpmath (30 digits) and JAX, gradients, jit and vmap."""

import mpmath as mp
import numpy as np
import pytest

import ember
import ember.numpy as jnp
import ember.scipy.special as sp

# (references at 30 digits, inside ``mp.workdps``: other test files in the same process set
# mpmath's global precision, and expint(n, x) at large x needs the digits)

X = np.array([1e-3, 0.1, 0.5, 1.0, 1.5, 3.0, 10.0, 30.0, 60.0], np.float32)
CASES = {
    "erfcx": (sp.erfcx, lambda v: mp.exp(v * v) * mp.erfc(v)),
    "exp1": (sp.exp1, lambda v: mp.expint(1, v)),
    "expi": (sp.expi, mp.ei),
    "expi_neg": (lambda v: sp.expi(-v), lambda v: mp.ei(-v)),
    "expn3": (lambda v: sp.expn(3, v), lambda v: mp.expint(3, v)),
    "expn20": (lambda v: sp.expn(20, v), lambda v: mp.expint(20, v)),
    "spence": (sp.spence, lambda v: mp.polylog(2, 1 - v)),
}


def _ulps(got, ref, dtype):
    tiny = np.finfo(dtype).tiny
    ok = np.abs(ref) > tiny * 2**24  # (results that are not (nearly) subnormal)
    return np.abs(got - ref)[ok] / np.abs(ref)[ok] / np.finfo(dtype).eps


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_vs_mpmath(name, dtype, x64):
    fn, ref = CASES[name]
    x = X.astype(dtype)
    with mp.workdps(30):
        want = np.array([float(ref(mp.mpf(float(v)))) for v in x])
    got = np.asarray(fn(jnp.asarray(x)))
    assert got.dtype == dtype
    finite = np.abs(want) < np.finfo(dtype).max
    assert np.all(np.isinf(got[~finite]))
    assert np.max(_ulps(got[finite], want[finite], dtype)) < 8, name


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_betainc_vs_mpmath(dtype, x64):
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(0.1, 10, 30).astype(dtype) for _ in range(2))
    x = rng.uniform(0, 1, 30).astype(dtype)
    with mp.workdps(30):
        want = np.array([float(mp.betainc(float(p), float(q), 0, float(y), regularized=True))
                         for p, q, y in zip(a, b, x)])
    got = np.asarray(sp.betainc(a, b, x))
    # (the prefactor x^a (1-x)^b / B(a, b) amplifies the rounding of its logarithm)
    assert np.max(_ulps(got, want, dtype)) < 64


def test_special_values_as_jax(jax):
    js = jax.scipy.special
    cases = [
        ("betainc", ([0., 1., 2., -1, 2., 2., 3.], [1., 0., 2., 2., 2., 2., np.inf],
                     [0.5, 0.5, 1.5, .5, 0., 1., 0.3])),
        ("expn", ([0, 1, 3, -1, 2], [0., 0., 2.5, 1., -1.])),
        ("erfcx", ([-30., -10., 0., 1e10, np.inf, -np.inf, 0.7],)),
        ("loggamma", ([-0.5, 0., 4.5, -2.],)),
        ("poch", ([-2.5, 0.5, 1.], [1., 0., -1.5])),
        ("comb", ([5., 5., 2., 5.5, 0.], [2., -1., 5., 2., 0.])),
        ("spence", ([0., 1., -1., 2., 0.5, 3.],)),
    ]
    for name, args in cases:
        args = [np.asarray(a, np.float32) for a in args]
        got = np.asarray(getattr(sp, name)(*args))
        want = np.asarray(getattr(js, name)(*args))
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=0, err_msg=name)
    # JAX 0.10.2's values for these (tracing its exp1/expi takes ~5 s each, every run):
    np.testing.assert_allclose(sp.exp1(np.array([0., -1., 1e-6], np.float32)),
                               [np.inf, np.nan, 13.238295555114746], rtol=2e-5)
    np.testing.assert_allclose(sp.expi(np.array([-1e-6, 1e-6, -3., np.nan], np.float32)),
                               [-13.238295555114746, -13.238293647766113,
                                -0.013048382475972176, np.nan], rtol=2e-5)
    for rep in (False, True):
        np.testing.assert_allclose(sp.comb(np.float32(6), np.float32(3), repetition=rep),
                                   js.comb(np.float32(6), np.float32(3), repetition=rep),
                                   rtol=1e-5)


def test_deliberate_differences_from_jax():
    # JAX gives NaN at these points, and 1/n for E_n(0) (n >= 2); the limits are the true
    # values (as SciPy).
    np.testing.assert_allclose(sp.expn(jnp.array([2, 3, 5]), 0.0), [1.0, 0.5, 0.25])
    got = np.asarray(sp.expi(jnp.array([0., np.inf])))
    assert got[0] == -np.inf and got[1] == np.inf
    assert float(sp.exp1(jnp.float32(np.inf))) == 0.0


def test_bernoulli():
    got = np.asarray(sp.bernoulli(12))
    want = [float(mp.bernoulli(k)) for k in range(13)]
    want[1] = -0.5
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got.dtype == np.float32 and len(sp.bernoulli(0)) == 1
    with pytest.raises(ValueError):
        sp.bernoulli(-1)
    with pytest.raises(TypeError):
        sp.bernoulli(2.5)


def test_dtypes_and_errors(jax):
    js = jax.scipy.special
    for name, args in [("erfcx", (2.0,)), ("loggamma", (-0.5,)), ("comb", (5, 2)),
                       ("poch", (2.0, 3.0)), ("expn", (2, 1.0)), ("betainc", (2., 3., .5)),
                       ("expi", (1.0,)), ("exp1", (1.0,)), ("spence", (0.5,))]:
        got, want = getattr(sp, name)(*args), getattr(js, name)(*args)
        assert got.dtype == want.dtype, name
        assert got.weak_type == want.weak_type, name
    with pytest.raises(TypeError):
        sp.spence(jnp.array([1, 2]))
    with pytest.raises(ValueError):
        sp.erfcx(jnp.array([1j]))


@pytest.mark.parametrize("name,fn,x", [
    ("erfcx", lambda j, x: j.scipy.special.erfcx(x), [-1.0, 0.3, 2.5, 7.0]),
    ("expi", lambda j, x: j.scipy.special.expi(x), [-2.0, 0.5, 3.0]),
    ("exp1", lambda j, x: j.scipy.special.exp1(x), [0.5, 3.0]),
    ("expn", lambda j, x: j.scipy.special.expn(3, x), [0.5, 3.0]),
    ("poch_z", lambda j, x: j.scipy.special.poch(x, 2.5), [0.7, 3.0]),
    ("poch_m", lambda j, x: j.scipy.special.poch(1.5, x), [0.7, 3.0]),
    ("betainc_x", lambda j, x: j.scipy.special.betainc(2.5, 1.5, x), [0.2, 0.7]),
])
def test_grads_vs_jax(jax, name, fn, x):
    x = np.asarray(x, np.float32)
    got = ember.vmap(ember.grad(lambda v: fn(ember, v)))(x)
    want = jax.vmap(jax.grad(lambda v: fn(jax, v)))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-4)


def test_spence_grad_matches_finite_difference():
    from ember.test_util import check_grads
    check_grads(sp.spence, (jnp.array([0.3, 1.0, 1.7, 4.0]),), order=1, modes=["fwd", "rev"])


def test_jit_and_vmap_match_eager():
    x = jnp.asarray(X[:6])
    for fn in (sp.erfcx, sp.expi, sp.spence, lambda v: sp.betainc(2.0, 3.0, v / 40)):
        np.testing.assert_allclose(ember.jit(fn)(x), fn(x), rtol=1e-6)
        np.testing.assert_allclose(ember.vmap(fn)(x), fn(x), rtol=1e-6)


def test_betainc_refuses_derivatives_in_a_and_b():
    # As JAX: a ValueError (the rule sees which tangents are symbolic zeros), never a
    # silent zero; the derivative in x is the beta density.
    for argnums in (0, 1, (0, 2)):
        with pytest.raises(ValueError, match="Betainc gradient with respect to a and b"):
            ember.grad(sp.betainc, argnums=argnums)(2.0, 3.0, 0.5)
    with pytest.raises(ValueError, match="Betainc gradient"):
        ember.jit(ember.grad(sp.betainc))(2.0, 3.0, 0.5)
    # d/dx I_x(2, 3) = x (1 - x)^2 / B(2, 3) = 12 x (1 - x)^2
    assert abs(float(ember.grad(sp.betainc, argnums=2)(2.0, 3.0, 0.5)) - 1.5) < 1e-5
    assert abs(float(ember.jacfwd(sp.betainc, argnums=2)(2.0, 3.0, 0.25)) - 1.6875) < 1e-5


def test_custom_jvp_with_symbolic_zeros_sees_which_tangents_are_zero():
    seen = []

    @ember.custom_jvp
    def f(x, y):
        return x * y

    def f_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        seen.append((isinstance(tx, ember.custom_derivatives.SymbolicZero),
                     isinstance(ty, ember.custom_derivatives.SymbolicZero)))
        out = tx * y if not isinstance(tx, ember.custom_derivatives.SymbolicZero) else 0.0
        if not isinstance(ty, ember.custom_derivatives.SymbolicZero):
            out = out + x * ty
        return f(x, y), out

    f.defjvp(f_jvp, symbolic_zeros=True)
    assert float(ember.grad(f)(2.0, 3.0)) == 3.0 and seen[-1] == (False, True)
    assert float(ember.grad(f, argnums=1)(2.0, 3.0)) == 2.0 and seen[-1] == (True, False)
    assert float(ember.jit(ember.grad(f))(2.0, 5.0)) == 5.0 and seen[-1] == (False, True)
