"""ember.test_util.check_grads: passes on correct derivatives, catches wrong ones."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.test_util import check_grads, numerical_jvp


@pytest.fixture
def x64():
    ember.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        ember.config.update("jax_enable_x64", False)


def _wrong_jvp_sin():
    @ember.custom_jvp
    def f(x):
        return jnp.sin(x)

    f.defjvp(lambda p, t: (f(p[0]), t[0] * jnp.cos(p[0]) * 1.1))  # 10% off
    return f


def _wrong_vjp_sin():
    @ember.custom_vjp
    def f(x):
        return jnp.sin(x)

    f.defvjp(lambda x: (f(x), x), lambda x, g: (g * jnp.sin(x),))  # sin instead of cos
    return f


def test_correct_functions_pass_to_order_three():
    x = np.array([0.3, -0.7, 1.1], np.float32)
    check_grads(jnp.sin, (x,), order=3)
    check_grads(lambda x, y: jnp.sum(jnp.exp(x) * y), (x, x[::-1].copy()), order=2)
    check_grads(lambda d: {"p": d["a"] * jnp.tanh(d["b"])},
                ({"a": x, "b": x + 1.0},), order=2)
    check_grads(lambda x: -2 * jnp.sin(x) + x, (np.float32(3.0),), order=3,
                modes=("fwd",))
    check_grads(lambda x: -2 * jnp.sin(x) + x, (np.float32(3.0),), order=3,
                modes=("rev",))


def test_float64_tight(x64):
    x = np.array([0.3, -0.7, 1.1], np.float64)
    check_grads(lambda x: jnp.sum(jnp.sin(x) * jnp.exp(x)), (x,), order=2,
                atol=1e-7, rtol=1e-7)


def test_catches_a_wrong_custom_jvp_rule():
    f = _wrong_jvp_sin()
    with pytest.raises(AssertionError, match="JVP tangent"):
        check_grads(f, (np.float32(0.5),), order=1, modes=("fwd",))
    with pytest.raises(AssertionError, match="VJP cotangent projection"):
        check_grads(f, (np.float32(0.5),), order=1, modes=("rev",))


def test_catches_a_wrong_custom_vjp_rule():
    f = _wrong_vjp_sin()
    with pytest.raises(AssertionError, match="VJP cotangent projection"):
        check_grads(f, (np.float32(0.5),), order=1, modes=("rev",))


def test_catches_an_error_only_at_second_order():
    # First derivative right, but the rule's tangent is not differentiated through cos(x).
    @ember.custom_jvp
    def f(x):
        return jnp.sin(x)

    f.defjvp(lambda p, t: (f(p[0]), t[0] * lax.stop_gradient(jnp.cos(p[0]))))
    x = (np.float32(0.5),)
    check_grads(f, x, order=1)
    with pytest.raises(AssertionError, match="of JVP"):
        check_grads(f, x, order=2, modes=("fwd",))
    with pytest.raises(AssertionError, match="of VJP"):
        check_grads(f, x, order=2, modes=("rev",))


def test_tolerances_can_loosen_the_check():
    f = _wrong_jvp_sin()
    check_grads(f, (np.float32(0.5),), order=1, modes=("fwd",), atol=0.2, rtol=0.2)
    check_grads(f, (np.float32(0.5),), order=1, modes=("fwd",),
                atol={np.float32: 0.2}, rtol={np.float32: 0.2})


def test_numerical_jvp_is_central_difference():
    t = numerical_jvp(lambda x: x ** 3, (np.float64(2.0),), (np.float64(1.0),), eps=1e-3)
    # central difference of x^3: 3 x^2 + eps^2
    assert t == pytest.approx(12.0 + 1e-6, rel=1e-9)


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown mode"):
        check_grads(jnp.sin, (np.float32(1.0),), order=1, modes=("sideways",))
    with pytest.raises(ValueError, match="order must be a positive integer"):
        check_grads(jnp.sin, (np.float32(1.0),), order=0)


def test_under_jit():
    f = ember.jit(lambda x: jnp.sum(jnp.tanh(x) ** 2))
    check_grads(f, (np.array([0.1, 0.5, -0.4], np.float32),), order=2)
