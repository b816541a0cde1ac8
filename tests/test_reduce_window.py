"""lax.reduce_window against JAX: values (eager and jit on both backends), gradients
(max-pool ties included), vmap, the generic reducer over pytrees, and input checks."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.test_util import check_grads
from tests.op_records.windowed import window_ref

MONOIDS = {"sum": (0.0, "add"), "max": (-np.inf, "max"), "min": (np.inf, "min")}
WINDOWS = [
    dict(window_dimensions=(1, 2, 2), window_strides=(1, 2, 2), padding="VALID"),
    dict(window_dimensions=(1, 3, 3), window_strides=(1, 2, 1), padding="SAME"),
    dict(window_dimensions=(1, 2, 3), window_strides=(1, 1, 2), padding=((0, 0), (1, 2), (2, 0))),
    dict(window_dimensions=(2, 2, 1), window_strides=(1, 1, 1), padding="SAME_LOWER"),
]
DILATED = dict(window_dimensions=(1, 3, 2), window_strides=(1, 2, 1),
               padding=((0, 0), (1, 1), (0, 2)), base_dilation=(1, 2, 1),
               window_dilation=(1, 1, 2))


def _pool(lx, name, kw):
    init, op = MONOIDS[name]
    return lambda x: lx.reduce_window(x, init, getattr(lx, op), **kw)


def _ties(shape=(2, 5, 6)):
    # Small integers: many windows hold their maximum (minimum) more than once.
    return np.random.RandomState(0).randint(0, 3, shape).astype(np.float32)


@pytest.mark.parametrize("name", sorted(MONOIDS))
@pytest.mark.parametrize("kw", WINDOWS + [DILATED], ids=range(len(WINDOWS) + 1))
def test_values_match_jax(jax, name, kw):
    x = _ties()
    ref = np.asarray(_pool(jax.lax, name, kw)(x))
    np.testing.assert_array_equal(np.asarray(_pool(lax, name, kw)(x)), ref)
    for backend in ("cpu", "interpreter"):
        out = ember.jit(_pool(lax, name, kw), backend=backend)(x)
        np.testing.assert_array_equal(np.asarray(out), ref)


@pytest.mark.parametrize("name", sorted(MONOIDS))
@pytest.mark.parametrize("kw", WINDOWS, ids=range(len(WINDOWS)))
def test_grads_match_jax_with_ties(jax, name, kw):
    x = _ties()
    w = np.random.RandomState(1).randn(*jax.eval_shape(_pool(jax.lax, name, kw), x).shape)
    w = w.astype(np.float32)

    def loss(lx, np_):
        return lambda x: np_.sum(_pool(lx, name, kw)(x) * w)

    ref = np.asarray(jax.grad(loss(jax.lax, jax.numpy))(x))
    np.testing.assert_allclose(np.asarray(ember.grad(loss(lax, jnp))(x)), ref, atol=1e-6)
    for backend in ("cpu", "interpreter"):
        out = ember.jit(ember.grad(loss(lax, jnp)), backend=backend)(x)
        np.testing.assert_allclose(np.asarray(out), ref, atol=1e-6)


def test_max_pool_tie_gradient_goes_to_first_maximum():
    x = np.array([[1.0, 3.0, 3.0, 0.0], [3.0, 2.0, 3.0, 3.0]], np.float32)
    g = ember.grad(lambda x: lax.reduce_window(x, -np.inf, lax.max, (2, 2), (2, 2),
                                               "VALID").sum())(x)
    np.testing.assert_array_equal(np.asarray(g), [[0, 1, 1, 0], [0, 0, 0, 0]])


@pytest.mark.parametrize("name", sorted(MONOIDS))
def test_check_grads_dilated_and_cropped(name):
    # Distinct values (no ties): finite differences are valid; negative padding crops.
    x = np.random.RandomState(2).permutation(40).reshape(2, 4, 5).astype(np.float32) / 7
    kw = dict(window_dimensions=(1, 2, 2), window_strides=(1, 1, 2),
              padding=((0, 0), (1, -1), (2, 1)))
    if name == "sum":
        kw.update(base_dilation=(1, 2, 1), window_dilation=(1, 1, 2))
    check_grads(_pool(lax, name, kw), (x,), order=2, modes=("fwd", "rev"), atol=1e-2,
                rtol=1e-2)


@pytest.mark.parametrize("name", sorted(MONOIDS))
def test_vmap_matches_loop(name):
    x = _ties((3, 2, 5, 6))
    f = _pool(lax, name, WINDOWS[1])
    out = ember.vmap(f, in_axes=1)(np.moveaxis(x, 0, 1))
    np.testing.assert_array_equal(np.asarray(out), np.stack([np.asarray(f(xi)) for xi in x]))
    g = ember.vmap(ember.grad(lambda x: f(x).sum()))(x)
    ref = np.stack([np.asarray(ember.grad(lambda x: f(x).sum())(xi)) for xi in x])
    np.testing.assert_allclose(np.asarray(g), ref)


def test_avg_pool_matches_reference():
    x = np.random.RandomState(3).randn(2, 6, 6, 3).astype(np.float32)
    out = lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4
    ref = x.reshape(2, 3, 2, 3, 2, 3).mean(axis=(2, 4))
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-6)


def test_generic_pytree_matches_jax(jax):
    rng = np.random.RandomState(4)
    x, y = rng.randn(4, 5).astype(np.float32), rng.randn(4, 5).astype(np.float32)

    def f(lx):
        def argmax_pair(a, b):  # (value, payload) of the larger value
            pick = a[0] >= b[0]
            return (lx.select(pick, a[0], b[0]), lx.select(pick, a[1], b[1]))
        return lambda x, y: lx.reduce_window((x, y), (-np.inf, 0.0), argmax_pair, (2, 3),
                                             (1, 1), "SAME")

    ref = jax.jit(f(jax.lax))(x, y)
    for out in (f(lax)(x, y), ember.jit(f(lax))(x, y),
                ember.jit(f(lax), backend="interpreter")(x, y)):
        for a, b in zip(out, ref):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b))


def test_generic_jvp_and_vmap_match_jax(jax):
    x = np.random.RandomState(5).rand(3, 6).astype(np.float32) + 0.5
    t = np.random.RandomState(6).randn(3, 6).astype(np.float32)

    def f(lx):
        return lambda x: lx.reduce_window(x, 1.0, lx.mul, (3,), (2,), "SAME")

    ref = jax.jvp(jax.vmap(f(jax.lax)), (x,), (t,))
    out = ember.jvp(ember.vmap(f(lax)), (x,), (t,))
    for a, b in zip(out, ref):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5)
    ref = window_ref(x[0], 1, np.multiply, (3,), (2,), ((0, 1),))
    np.testing.assert_allclose(np.asarray(f(lax)(x[0])), ref, rtol=1e-6)


def test_integer_sum_and_primitive_choice():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    out = lax.reduce_window(x, 0, lax.add, (2, 2), (1, 1), "VALID")
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), window_ref(x, 0, np.add, (2, 2), (1, 1),
                                                              ((0, 0), (0, 0))))
    jaxpr = str(ember.make_jaxpr(
        lambda x: lax.reduce_window(x, -np.inf, lax.max, (2,), (1,), "VALID"))(
            np.ones(4, np.float32)))
    assert "reduce_window_max" in jaxpr
    jaxpr = str(ember.make_jaxpr(
        lambda x: lax.reduce_window(x, 1.0, lax.max, (2,), (1,), "VALID"))(
            np.ones(4, np.float32)))
    assert "reduce_window[" in jaxpr or "reduce_window " in jaxpr


def test_shape_tuple_and_padtype():
    assert lax.reduce_window_shape_tuple((7, 6), (3, 2), (2, 2), ((1, 1), (0, 1)), (1, 2),
                                         (2, 1)) == (3, 6)
    assert lax.padtype_to_pads((5, 6), (3, 3), (2, 1), "SAME") == [(1, 1), (1, 1)]


def test_bad_input_errors():
    x = np.ones((4, 4), np.float32)
    with pytest.raises(TypeError, match="wrong number of window_dimensions"):
        lax.reduce_window(x, 0.0, lax.add, (2,), (1,), "VALID")
    with pytest.raises(TypeError, match="inconsistent window_strides"):
        lax.reduce_window(x, 0.0, lax.add, (2, 2), (1,), "VALID")
    with pytest.raises(TypeError, match="must have every element be nonzero"):
        lax.reduce_window(x, 0.0, lax.add, (2, 0), (1, 1), "VALID")
    with pytest.raises(ValueError, match="Unrecognized padding"):
        lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), "FULL")
    with pytest.raises(ValueError, match="same tree structure"):
        lax.reduce_window((x, x), 0.0, lax.add, (2, 2), (1, 1), "VALID")
    with pytest.raises(TypeError, match="number type"):
        lax.reduce_window(x > 0, False, lax.add, (2, 2), (1, 1), "VALID")
    with pytest.raises(TypeError, match="inconsistent dtypes"):
        lax.reduce_window(x, np.int32(1), lax.mul, (2, 2), (1, 1), "VALID")


@pytest.mark.parametrize("name", ["max", "min"])
def test_jvp_with_ties_matches_jax(jax, name):
    # Forward mode is select_and_gather_add: the tangent of the first selected element.
    x = _ties()
    t = np.random.RandomState(9).randn(*x.shape).astype(np.float32)
    kw = WINDOWS[2]
    ref = jax.jvp(_pool(jax.lax, name, kw), (x,), (t,))[1]
    def tangent(x, t):
        return ember.jvp(_pool(lax, name, kw), (x,), (t,))[1]

    for out in (tangent(x, t), ember.jit(tangent)(x, t),
                ember.jit(tangent, backend="interpreter")(x, t)):
        np.testing.assert_array_equal(np.asarray(out), np.asarray(ref))


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.bool_, np.float16])
def test_max_min_pools_of_other_dtypes(dtype):
    x = np.random.RandomState(10).randint(-4, 5, (5, 6)).astype(dtype)
    pads = ((1, 0), (0, 1))
    for fn, op in ((lax.max, np.maximum), (lax.min, np.minimum)):
        if dtype == np.float16:
            init = -np.inf if fn is lax.max else np.inf  # weak: still the identity
        elif dtype == np.bool_:
            init = np.bool_(fn is lax.min)
        else:  # (a Python int would be a weak int32, not int8's identity: as JAX)
            info = np.iinfo(dtype)
            init = np.array(info.min if fn is lax.max else info.max, dtype)
        out = lax.reduce_window(x, init, fn, (2, 3), (1, 2), pads)
        ref = window_ref(x, init, op, (2, 3), (1, 2), pads)
        np.testing.assert_array_equal(np.asarray(out), ref)
        assert out.dtype == dtype


def test_generic_reverse_mode_is_not_implemented(jax):
    x = np.random.RandomState(11).rand(6).astype(np.float32) + 0.5

    def f(lx):
        return lambda x: lx.reduce_window(x, 1.0, lx.mul, (2,), (1,), "VALID").sum()

    # As JAX: the jvp reduces (primal, tangent) pairs jointly, so linearizing leaves the
    # primal output unknown, a ValueError (not a missing transpose rule) in reverse mode.
    # vjp and linearize raise at once, before any unusable primal output is returned.
    for rev in (ember.grad, ember.jacrev, lambda g: lambda x: ember.vjp(g, x),
                lambda g: lambda x: ember.linearize(g, x)):
        with pytest.raises(ValueError, match="Linearization failed"):
            rev(f(lax))(x)
    with pytest.raises(ValueError, match="Linearization failed"):
        ember.grad(lambda x: lax.reduce_window(
            x, 0.0, lambda a, b: a + b * b, (2,), (1,), "VALID").sum())(x)
    with pytest.raises(ValueError, match="Linearization failed"):
        jax.grad(f(jax.lax))(x)
    # Forward mode works: d(x_i x_{i+1}) = x_{i+1} dx_i + x_i dx_{i+1}. (JAX's own jacfwd of
    # this window fails in its batching of the jvp, so the reference is analytic.)
    ref = np.zeros((5, 6), np.float32)
    ref[np.arange(5), np.arange(5)] = x[1:]
    ref[np.arange(5), np.arange(1, 6)] = x[:-1]
    out = ember.jacfwd(lambda x: lax.reduce_window(x, 1.0, lax.mul, (2,), (1,), "VALID"))(x)
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-6)
