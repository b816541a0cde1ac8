"""custom_jvp and custom_vjp: eagerly, under jit (both ways), to second order, with pytrees."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.test_util import check_grads

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402

# --------------------------------------------------------------------------- custom_jvp


@ember.custom_jvp
def log1pexp(x):
    return jnp.log(1.0 + jnp.exp(x))


@log1pexp.defjvp
def _log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return log1pexp(x), t * (1.0 - 1.0 / (1.0 + jnp.exp(x)))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def test_custom_jvp_is_used_eagerly_and_under_jit():
    # Differentiating the formula gives nan at 100 (inf / inf); the rule gives 1.
    assert np.isnan(float(ember.grad(lambda x: jnp.log(1.0 + jnp.exp(x)))(100.0)))
    for g in (ember.grad(log1pexp), ember.jit(ember.grad(log1pexp)),
              ember.grad(ember.jit(log1pexp))):
        assert float(g(100.0)) == 1.0
        assert float(g(0.5)) == pytest.approx(_sigmoid(0.5), rel=1e-6)
    y, t = ember.jvp(log1pexp, (0.5,), (2.0,))
    assert float(y) == pytest.approx(np.log1p(np.exp(0.5)), rel=1e-6)
    assert float(t) == pytest.approx(2 * _sigmoid(0.5), rel=1e-6)
    assert float(log1pexp(0.5)) == pytest.approx(np.log1p(np.exp(0.5)), rel=1e-6)
    assert float(ember.jit(log1pexp)(0.5)) == pytest.approx(np.log1p(np.exp(0.5)), rel=1e-6)


def test_custom_jvp_second_order():
    # the rule is itself differentiable: d2/dx2 log1pexp = sigmoid * (1 - sigmoid)
    s = _sigmoid(0.3)
    for g2 in (ember.grad(ember.grad(log1pexp)), ember.jit(ember.grad(ember.grad(log1pexp))),
               ember.grad(ember.grad(ember.jit(log1pexp)))):
        assert float(g2(0.3)) == pytest.approx(s * (1 - s), rel=1e-5)
    check_grads(log1pexp, (np.float32(0.3),), order=2)


def test_custom_jvp_rule_replaces_the_function_derivative():
    @ember.custom_jvp
    def f(x):
        return jnp.sin(x)

    f.defjvp(lambda p, t: (f(p[0]), 2.0 * t[0]))
    assert float(ember.grad(f)(1.0)) == 2.0
    assert float(ember.jit(ember.grad(f))(1.0)) == 2.0
    assert float(ember.grad(ember.jit(f))(1.0)) == 2.0
    assert float(f(1.0)) == pytest.approx(np.sin(1.0))


def test_custom_jvp_jaxpr_prints_like_jax():
    @ember.custom_jvp
    def f(x):
        return jnp.sin(x)
    f.defjvp(lambda p, t: (f(p[0]), 2.0 * t[0]))

    @jax.custom_jvp
    def jf(x):
        return jjnp.sin(x)
    jf.defjvp(lambda p, t: (jf(p[0]), 2.0 * t[0]))
    assert str(ember.make_jaxpr(f)(1.0)) == str(jax.make_jaxpr(jf)(1.0)).replace("name=jf",
                                                                         "name=f")


def test_custom_jvp_defjvps_pytrees_and_nondiff_argnums():
    @ember.custom_jvp
    def f(x, y):
        return x * y

    f.defjvps(lambda g, ans, x, y: g * y * 10.0, None)  # y gets no derivative
    gx, gy = ember.grad(f, argnums=(0, 1))(2.0, 3.0)
    assert float(gx) == 30.0 and float(gy) == 0.0

    @ember.custom_jvp
    def tree_fn(d):
        return {"s": d["a"] * d["b"], "a": d["a"]}

    @tree_fn.defjvp
    def _tree_jvp(primals, tangents):
        (d,), (t,) = primals, tangents
        return tree_fn(d), {"s": t["a"] * d["b"] + d["a"] * t["b"], "a": t["a"]}

    g = ember.grad(lambda d: tree_fn(d)["s"] + tree_fn(d)["a"])({"a": 2.0, "b": 5.0})
    assert float(g["a"]) == 6.0 and float(g["b"]) == 2.0

    from functools import partial

    @partial(ember.custom_jvp, nondiff_argnums=(0,))
    def app(fn, x):
        return fn(x)

    @app.defjvp
    def _app_jvp(fn, primals, tangents):
        (x,), (t,) = primals, tangents
        return app(fn, x), 3.0 * t

    assert float(ember.grad(lambda x: app(jnp.sin, x))(1.0)) == 3.0
    assert float(ember.jit(ember.grad(lambda x: app(jnp.sin, x)))(1.0)) == 3.0


def test_custom_jvp_errors():
    f = ember.custom_jvp(lambda x: x)
    with pytest.raises(AttributeError, match="No JVP defined for custom_jvp function"):
        f(1.0)
    f.defjvp(lambda p, t: (p[0], jnp.ones(3)))
    with pytest.raises(TypeError, match=r"Expected float32\[\] \(tangent type of float32\[\]\) "
                                        r"but got float32\[3\]"):
        ember.jvp(f, (1.0,), (1.0,))
    f.defjvp(lambda p, t: p[0])
    with pytest.raises(TypeError, match="must produce a pair"):
        ember.jvp(f, (1.0,), (1.0,))


# --------------------------------------------------------------------------- custom_vjp


@ember.custom_vjp
def clip_gradient(x):
    return x


clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -1.0, 1.0),))


def test_custom_vjp_clip_gradient():
    f = lambda x: 3.0 * clip_gradient(x)  # noqa: E731
    assert float(ember.grad(f)(2.0)) == 1.0
    assert float(ember.jit(ember.grad(f))(2.0)) == 1.0
    assert float(ember.grad(ember.jit(f))(2.0)) == 1.0
    assert float(ember.grad(lambda x: 0.5 * clip_gradient(x))(2.0)) == 0.5
    assert float(f(2.0)) == 6.0 and float(ember.jit(f)(2.0)) == 6.0


def test_custom_vjp_residuals_none_and_second_order():
    @ember.custom_vjp
    def f(x, n):
        return jnp.sin(x) * n

    def fwd(x, n):
        return f(x, n), (jnp.cos(x), n)

    def bwd(res, g):
        cos_x, n = res
        return (g * cos_x * n, None)  # no derivative for n

    f.defvjp(fwd, bwd)
    gx, gn = ember.grad(f, argnums=(0, 1))(0.5, 2.0)
    assert float(gx) == pytest.approx(2 * np.cos(0.5), rel=1e-6)
    assert float(gn) == 0.0
    # second order: the bwd rule is differentiated (d/dx 2 cos x = -2 sin x)
    g2 = ember.grad(ember.grad(f))(0.5, 2.0)
    assert float(g2) == pytest.approx(-2 * np.sin(0.5), rel=1e-5)
    assert float(ember.jit(ember.grad(ember.grad(f)))(0.5, 2.0)) == pytest.approx(
        -2 * np.sin(0.5), rel=1e-5)
    check_grads(lambda x: f(x, 2.0), (np.float32(0.5),), order=2, modes=("rev",))


def test_custom_vjp_pytrees_and_nondiff_argnums():
    from functools import partial

    @ember.custom_vjp
    def f(d):
        return {"y": d["a"] * d["b"]}

    f.defvjp(lambda d: (f(d), d),
             lambda d, ct: ({"a": ct["y"] * d["b"], "b": None},))
    g = ember.grad(lambda d: f(d)["y"])({"a": 2.0, "b": 5.0})
    assert float(g["a"]) == 5.0 and float(g["b"]) == 0.0

    @partial(ember.custom_vjp, nondiff_argnums=(0,))
    def scale(k, x):
        return k * x

    scale.defvjp(lambda k, x: (scale(k, x), None), lambda k, _, g: (g * k * 100.0,))
    assert float(ember.grad(lambda x: scale(2.0, x))(1.0)) == 200.0
    assert float(ember.jit(ember.grad(lambda x: scale(2.0, x)))(1.0)) == 200.0


def test_custom_vjp_jaxpr_prints_like_jax():
    @ember.custom_vjp
    def g(x, y):
        return x * y
    g.defvjp(lambda x, y: (x * y, (x, y)), lambda r, ct: (r[1] * ct, None))

    @jax.custom_vjp
    def jg(x, y):
        return x * y
    jg.defvjp(lambda x, y: (x * y, (x, y)), lambda r, ct: (r[1] * ct, None))
    expected = str(jax.make_jaxpr(jg)(1.0, 2.0)).replace("name=jg", "name=g")
    assert str(ember.make_jaxpr(g)(1.0, 2.0)) == expected


def test_custom_vjp_errors():
    g = ember.custom_vjp(lambda x: x)
    with pytest.raises(AttributeError, match="No VJP defined for custom_vjp function"):
        g(1.0)
    g.defvjp(lambda x: (x, None), lambda r, ct: (ct, ct))
    with pytest.raises(TypeError, match="Custom VJP bwd rule must produce an output with the "
                                        "same container"):
        ember.grad(g)(1.0)
    g.defvjp(lambda x: (x, None), lambda r, ct: (ct,))
    with pytest.raises(TypeError, match=r"can't apply forward-mode autodiff \(jvp\) to a "
                                        "custom_vjp function."):
        ember.jvp(g, (1.0,), (1.0,))
    assert float(ember.grad(g)(1.0)) == 1.0


def test_custom_rules_match_jax_on_a_small_model():
    @ember.custom_vjp
    def relu(x):
        return jnp.maximum(x, 0.0)
    relu.defvjp(lambda x: (relu(x), x), lambda x, g: (jnp.where(x > 0, g, 0.0),))

    def loss(w, x):
        return jnp.sum(relu(x @ w) ** 2)

    def jloss(w, x):
        return jjnp.sum(jax.nn.relu(x @ w) ** 2)

    rng = np.random.RandomState(1)
    w = rng.randn(3, 2).astype(np.float32)
    x = rng.randn(4, 3).astype(np.float32)
    np.testing.assert_allclose(ember.grad(loss)(w, x), jax.grad(jloss)(w, x), rtol=1e-5)
    np.testing.assert_allclose(ember.jit(ember.grad(loss))(w, x), jax.grad(jloss)(w, x),
                               rtol=1e-5)


def test_eager_calls_with_the_plain_parameters_run_the_function_directly():
    calls = []

    @ember.custom_jvp
    def f(x, y):
        calls.append((type(x), type(y)))
        return x * y

    f.defjvp(lambda p, t: (f(*p), t[0] * 10.0 + t[1] * 100.0))

    @ember.custom_vjp
    def g(x):
        return jnp.sin(x)

    g.defvjp(lambda x: (g(x), x), lambda x, ct: (ct * 7.0,))
    x = jnp.asarray(np.array([1.0, 2.0], np.float32))
    assert f(x, 3.0).tolist() == [3.0, 6.0] and calls == [(type(x), float)]
    np.testing.assert_allclose(g(x), np.sin(np.array([1.0, 2.0], np.float32)))
    # the rules still apply under transformations, called the same way
    assert float(ember.grad(lambda a: f(a, 3.0))(2.0)) == 10.0
    assert float(ember.grad(lambda a: g(a))(2.0)) == 7.0
    assert float(ember.jit(lambda a: f(a, 2.0))(4.0)) == 8.0
    # keyword arguments and wrong counts still go through argument resolution
    assert f(x, y=2.0).tolist() == [2.0, 4.0]
    with pytest.raises(TypeError, match="could not be resolved"):
        f(x)
    with pytest.raises(TypeError, match="could not be resolved"):
        f(x, 1.0, 2.0)

    @ember.custom_jvp
    def h(x, scale=2.0):  # (a default: resolved as JAX binds it)
        return x * scale

    h.defjvp(lambda p, t: (h(*p), t[0]))
    assert h(x).tolist() == [2.0, 4.0] and h(x, 3.0).tolist() == [3.0, 6.0]


def test_custom_jvp_function_applied_to_tangents_is_transposed_as_its_function():
    """A rule that applies a custom_jvp function to its tangents (here ``jnp.linalg.solve``,
    whose own rule differentiates through ``a x = b``) stages that call into the linear
    function reverse mode transposes: it is transposed as the function it calls."""
    a = np.array([[3.0, 1.0], [1.0, 2.0]], np.float32)

    @ember.custom_jvp
    def f(x):
        return jnp.linalg.solve(a, x) * 2.0

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), jnp.linalg.solve(a, t) * 2.0

    x = np.array([1.0, -1.0], np.float32)
    want = 2 * np.linalg.inv(a.astype(np.float64))
    np.testing.assert_allclose(ember.jacrev(f)(x), want, rtol=1e-6)
    np.testing.assert_allclose(ember.jit(ember.jacrev(f))(x), want, rtol=1e-6)
    np.testing.assert_allclose(ember.grad(lambda x: jnp.sum(f(x) ** 2))(x),
                               2 * want.T @ (want @ x), rtol=1e-5)
