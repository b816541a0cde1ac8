"""ember.experimental.ode.odeint against jax.experimental.ode.odeint, analytic solutions and
finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as ejnp
from ember.experimental.ode import odeint


@pytest.fixture(scope="module")
def jode(jax):
    from jax.experimental.ode import odeint as jax_odeint
    return jax_odeint


def _close(got, want, rtol, atol):
    got_leaves = ember.tree_util.tree_leaves(got)
    want_leaves = ember.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def _decay(y, t, k):
    return -k * y


def _oscillator(state, t, w):
    x, v = state
    return v, -w ** 2 * x


def _coupled(np_):
    # A nonlinear, time-dependent system on a dict state with dict parameters.
    def f(y, t, p):
        return {"a": -p["k"] * y["a"] + np_.sin(t) * y["b"],
                "b": p["w"] * y["a"] - 0.3 * y["b"] ** 2}
    return f


_TS = np.array([0., 0.5, 1.2, 2.0], np.float32)
_Y0 = {"a": np.array([1.0, 0.5], np.float32), "b": np.array([0.2, -0.1], np.float32)}
_P = {"k": np.float32(0.8), "w": np.array([0.3, 0.6], np.float32)}


def test_exponential_decay_matches_analytic_and_jax(jax, jode):
    t = np.linspace(0., 3., 7).astype(np.float32)
    y0 = np.array([1.0, -2.0, 0.5], np.float32)
    got = odeint(_decay, ejnp.asarray(y0), ejnp.asarray(t), 0.7)
    assert got.shape == (7, 3) and got.dtype == np.float32
    np.testing.assert_allclose(np.asarray(got), np.exp(-0.7 * t)[:, None] * y0,
                               rtol=2e-6, atol=2e-6)
    want = jode(_decay, jax.numpy.asarray(y0), jax.numpy.asarray(t), 0.7)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-6, atol=2e-6)


def test_jit_with_closure_over_integer_tracer():
    # The rate is an integer tracer that func closes over (closure conversion keeps it inside
    # the converted function): a second call must not reuse the first call's conversion.
    t = np.linspace(0., 1., 3).astype(np.float32)
    solve = ember.jit(lambda n, y0: odeint(lambda y, t: -n * y, y0, t))
    for n in (2, 3):
        np.testing.assert_allclose(np.asarray(solve(n, ejnp.ones(1)))[:, 0], np.exp(-n * t),
                                   rtol=2e-6, atol=2e-6)


def test_harmonic_oscillator_pytree_state(jax, jode):
    t = np.linspace(0., 4., 9).astype(np.float32)
    got = odeint(_oscillator, (ejnp.float32(1.), ejnp.float32(0.)), ejnp.asarray(t), 1.5)
    assert isinstance(got, tuple) and got[0].shape == (9,)
    np.testing.assert_allclose(np.asarray(got[0]), np.cos(1.5 * t), atol=5e-6)
    np.testing.assert_allclose(np.asarray(got[1]), -1.5 * np.sin(1.5 * t), atol=5e-6)
    want = jode(_oscillator, (np.float32(1.), np.float32(0.)), jax.numpy.asarray(t), 1.5)
    _close(got, want, rtol=1e-5, atol=5e-6)


def _tight_coupled(y0, t):
    return odeint(_coupled(ejnp), y0, ejnp.asarray(t), _P)


def test_step_limits_match_jax(jax, jode):
    # hmax and loose tolerances change the step sequence: this pins down the step-size
    # controller and the interpolation.
    t = np.array([0., 1., 2.5], np.float32)
    y0 = {"a": np.array([1.0, 0.3], np.float32), "b": np.array([0.3, 1.0], np.float32)}
    kwargs = {"rtol": 1e-3, "atol": 1e-4, "hmax": 0.4}
    got = odeint(_coupled(ejnp), y0, ejnp.asarray(t), _P, **kwargs)
    want = jode(_coupled(jax.numpy), y0, jax.numpy.asarray(t), _P, **kwargs)
    _close(got, want, rtol=1e-5, atol=1e-6)
    # Both limits did bind: without hmax, and with the default tolerances, the answers differ.
    no_hmax = odeint(_coupled(ejnp), y0, ejnp.asarray(t), _P, rtol=1e-3, atol=1e-4)
    assert np.abs(np.asarray(got["a"]) - np.asarray(no_hmax["a"])).max() > 1e-5
    assert np.abs(np.asarray(no_hmax["a"]) - np.asarray(_tight_coupled(y0, t)["a"])).max() > 1e-5


def test_mxstep_stops_early():
    # One step from the initial step size, then the step's polynomial is extrapolated to
    # t = 1 (the comparison with JAX is ill-conditioned there: the extrapolation magnifies
    # rounding, so only the semantics are checked).
    t = ejnp.array([0., 1.])
    full = odeint(_decay, ejnp.ones(2), t, 1.0, mxstep=1000)
    np.testing.assert_allclose(np.asarray(full[1]), np.exp(-1.0), rtol=2e-6)
    limited = np.asarray(odeint(_decay, ejnp.ones(2), t, 1.0, mxstep=1)[1])
    assert np.isfinite(limited).all() and np.abs(limited - np.exp(-1.0)).min() > 1e-2


def _loss(np_, ode):
    def loss(y0, ts, p):
        k = p["k"]  # closed over: closure conversion hands it to the adjoint as an argument

        def f(y, t, w):
            return {"a": -k * y["a"] + np_.sin(t) * y["b"], "b": w * y["a"] - 0.3 * y["b"] ** 2}

        ys = ode(f, y0, ts, p["w"])
        return np_.sum(ys["a"] ** 2) + np_.sum(ys["b"] * ts[:, None])
    return loss


def test_jit_grad_matches_jax_and_finite_differences(jax, jode):
    want = jax.grad(_loss(jax.numpy, jode), argnums=(0, 1, 2))(_Y0, _TS, _P)
    value_and_grad = ember.jit(ember.value_and_grad(_loss(ejnp, odeint), argnums=(0, 1, 2)))
    value, grads = value_and_grad(_Y0, _TS, _P)
    _close(grads, want, rtol=2e-5, atol=2e-5)
    # Central differences along a random direction (the loss is smooth; float32 with
    # eps = 1e-2 leaves ~1e-4 relative error).
    rs = np.random.RandomState(3)
    x = (_Y0, _TS, _P)
    v = ember.tree_util.tree_map(lambda a: np.asarray(rs.randn(*np.shape(a)), np.float32), x)
    v[1][0] = 0.  # keep the times increasing
    eps = 1e-2
    plus = ember.tree_util.tree_map(lambda a, d: a + eps * d, x, v)
    minus = ember.tree_util.tree_map(lambda a, d: a - eps * d, x, v)
    fd = (float(value_and_grad(*plus)[0]) - float(value_and_grad(*minus)[0])) / (2 * eps)
    directional = sum(float(np.vdot(np.asarray(g), d)) for g, d in zip(
        ember.tree_util.tree_leaves(grads), ember.tree_util.tree_leaves(v)))
    np.testing.assert_allclose(directional, fd, rtol=1e-3)
    assert abs(fd) > 1e-2


def test_grad_with_pytree_args_holding_integers():
    # y(1) = exp(-k n) for dy/dt = -k n y: d/dk sum(y(1)) = -2 n exp(-k n). (JAX's adjoint
    # fails on integer args; here they simply get no cotangent.)
    def total(k):
        ys = odeint(lambda y, t, a: -a["k"] * a["n"] * y, ejnp.ones(2), ejnp.array([0., 1.]),
                    {"k": k, "n": 2})
        return ys[-1].sum()

    np.testing.assert_allclose(float(ember.grad(total)(0.5)), -4 * np.exp(-1.0), rtol=2e-6)


def test_vmap_and_vmap_of_grad_match_analytic():
    # Each batch member takes its own step sequence (the while loop's predicate is batched).
    t = np.linspace(0., 2., 5).astype(np.float32)
    y0s = np.array([[1.0, -2.0], [0.5, 3.0], [2.0, 0.1]], np.float32)
    ks = np.array([0.1, 1.0, 3.0], np.float32)
    got = ember.vmap(lambda y0, k: odeint(_decay, y0, t, k))(y0s, ks)
    want = y0s[:, None, :] * np.exp(-ks[:, None, None] * t[None, :, None])
    np.testing.assert_allclose(np.asarray(got), want, rtol=5e-6, atol=5e-6)
    # The batched adjoint: d/dk y(2) = -2 y0 exp(-2k).
    grads = ember.vmap(ember.grad(lambda k, y0: odeint(_decay, y0, t, k)[-1, 1]))
    np.testing.assert_allclose(np.asarray(grads(ks, y0s)), -2 * y0s[:, 1] * np.exp(-2 * ks),
                               rtol=5e-6, atol=5e-6)


def test_bad_arguments_raise_jax_errors():
    t = ejnp.linspace(0., 1., 3)
    for bad in (lambda x: x, "abc", {"a": object()}):
        with pytest.raises(TypeError, match="odeint \\*args must be arrays or scalars"):
            odeint(_decay, ejnp.ones(2), t, bad)
    with pytest.raises(TypeError, match="t must be an array of floats"):
        odeint(_decay, ejnp.ones(2), ejnp.arange(3), 1.0)
    with pytest.raises(TypeError, match="y0 must hold floating-point"):
        odeint(_decay, {"a": ejnp.arange(2), "b": ejnp.arange(2)}, t, 1.0)
    with pytest.raises(ValueError, match="1-D"):
        odeint(_decay, ejnp.ones(2), ejnp.ones((2, 2)), 1.0)
