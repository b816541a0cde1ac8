"""Autodiff behaviours that differential tests against JAX found to differ, checked against
closed forms: custom_vjp residuals and default arguments, vjp/linearize functions as pytrees
(``tree_util.Partial``), jacfwd/jacrev dtype checks, the updates-gradient of
``x.at[i].multiply``, out-of-bounds gather gradients, and NaN/edge derivatives."""

import functools

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.tree_util import Partial, tree_flatten, tree_leaves, tree_unflatten

# ---------------------------------------------------------------- custom_vjp residuals


def _flagged_double():
    """``f(x) = 2x`` whose bwd picks its factor from Python residuals: 2 only when they
    arrive unchanged (a tuple shape, ``True``, ``None``, a Python int and float)."""
    seen = []

    @ember.custom_vjp
    def f(x):
        return x * 2

    def fwd(x):
        return x * 2, (x.shape, True, None, 3, 2.5)

    def bwd(res, g):
        shape, flag, none, i, fl = res
        seen.append(res)
        ok = (flag is True and none is None and type(i) is int and i == 3
              and type(fl) is float and isinstance(shape, tuple)
              and all(type(d) is int for d in shape))
        return (g * (2 if ok else 3),)

    f.defvjp(fwd, bwd)
    return f, seen


@pytest.mark.parametrize("transform", ["grad", "jit_grad", "grad_jit", "vmap_grad"])
def test_custom_vjp_python_residuals_reach_bwd_unchanged(transform):
    f, seen = _flagged_double()
    loss = lambda x: f(x).sum()  # noqa: E731
    x = jnp.ones(3)
    if transform == "grad":
        g = ember.grad(loss)(x)
    elif transform == "jit_grad":
        g = ember.jit(ember.grad(loss))(x)
    elif transform == "grad_jit":
        g = ember.grad(ember.jit(loss))(x)
    else:
        g = ember.vmap(ember.grad(loss))(jnp.ones((2, 3)))
        x = jnp.ones((2, 3))
    np.testing.assert_array_equal(np.asarray(g), np.full(x.shape, 2.0, np.float32))
    assert seen and seen[-1][0] == (3,)


def test_custom_vjp_string_residual_is_rejected_as_in_jax():
    @ember.custom_vjp
    def f(x):
        return x

    f.defvjp(lambda x: (x, "tag"), lambda r, g: (g,))
    with pytest.raises(TypeError):
        ember.grad(f)(1.0)


# ---------------------------------------------------------------- default arguments


def test_custom_jvp_fills_in_default_arguments():
    @ember.custom_jvp
    def f(x, y=2.0):
        return x * y

    f.defjvp(lambda p, t: (f(*p), p[1] * t[0] + p[0] * t[1]))
    assert float(ember.grad(f)(3.0)) == 2.0           # d(xy)/dx = y = 2 (the default)
    assert float(ember.grad(f)(3.0, y=4.0)) == 4.0    # y given as a keyword
    assert float(ember.grad(lambda y: f(3.0, y=y))(4.0)) == 3.0
    assert float(ember.jit(ember.grad(lambda x: f(x, y=5.0)))(3.0)) == 5.0


def test_custom_vjp_fills_in_default_arguments():
    @ember.custom_vjp
    def f(x, y=2.0):
        return x * y

    f.defvjp(lambda x, y: (x * y, (x, y)), lambda r, ct: (ct * r[1], ct * r[0]))
    assert float(ember.grad(f)(3.0)) == 2.0
    assert float(ember.grad(f)(3.0, y=4.0)) == 4.0
    assert float(ember.grad(lambda y: f(3.0, y=y))(4.0)) == 3.0
    np.testing.assert_array_equal(np.asarray(ember.vmap(ember.grad(f))(jnp.ones(2))),
                                  [2.0, 2.0])


def test_custom_vjp_keyword_only_argument_passed_is_a_type_error():
    @ember.custom_vjp
    def f(x, *, y=2.0):
        return x * y

    f.defvjp(lambda x, y=2.0: (x * y, y), lambda y, ct: (ct * y,))
    assert float(ember.grad(f)(3.0)) == 2.0  # not passed: the function's own default
    with pytest.raises(TypeError, match="could not be resolved to positions: y"):
        f(3.0, y=1.0)
    with pytest.raises(TypeError, match="could not be resolved to positional-only"):
        f(1.0, 2.0, 3.0)


# ---------------------------------------------------------------- vjp / linearize functions


def test_partial_is_a_pytree_with_static_function():
    p = Partial(jnp.add, 1.0, jnp.ones(2))
    leaves, tree = tree_flatten(p)
    assert len(leaves) == 2
    q = tree_unflatten(tree, [2.0, jnp.zeros(2)])
    assert isinstance(q, Partial) and q.func is jnp.add
    np.testing.assert_array_equal(np.asarray(q()), [2.0, 2.0])
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda f: f())(p)), [2.0, 2.0])
    # A partial inside stays one opaque function: only this Partial's arguments are leaves.
    r = Partial(functools.partial(jnp.add, 10.0), 1.0)
    assert tree_leaves(r) == [1.0] and float(r()) == 11.0


def test_vjp_and_linearize_functions_can_be_returned_from_jit():
    x = jnp.array([0.5, 1.0, 2.0])
    pullback = ember.jit(lambda x: ember.vjp(jnp.sin, x)[1])(x)
    pushforward = ember.jit(lambda x: ember.linearize(jnp.sin, x)[1])(x)
    assert isinstance(pullback, Partial) and isinstance(pushforward, Partial)
    t = jnp.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(np.asarray(pullback(t)[0]), np.cos(x) * t, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(pushforward(t)), np.cos(x) * t, rtol=1e-6)
    # ... and passed into jit as arguments.
    _, f_vjp = ember.vjp(jnp.sin, x)
    np.testing.assert_allclose(np.asarray(ember.jit(lambda f, c: f(c))(f_vjp, t)[0]),
                               np.cos(x) * t, rtol=1e-6)
    with pytest.raises(ValueError, match="unexpected JAX type"):
        f_vjp(jnp.ones(2))


@pytest.mark.parametrize("transform", ["grad", "jit_grad", "vmap_grad"])
def test_custom_vjp_fwd_may_keep_the_vjp_function_as_residual(transform):
    @ember.custom_vjp
    def f(x):
        return jnp.sin(x)

    f.defvjp(lambda x: ember.vjp(jnp.sin, x), lambda pullback, g: pullback(g))
    g = ember.grad(lambda x: f(x).sum())
    x = np.array([[0.5, 1.0, 2.0], [1.5, -1.0, 0.0]], np.float32)
    if transform == "grad":
        got = g(x[0])
    elif transform == "jit_grad":
        got = ember.jit(g)(x[0])
    else:
        got = ember.vmap(g)(x)
    want = np.cos(x[0]) if transform != "vmap_grad" else np.cos(x)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


# ---------------------------------------------------------------- jacfwd / jacrev dtypes


@pytest.mark.parametrize("fun,msg", [
    (lambda: ember.jacrev(lambda x: x * (1 + 2j))(jnp.ones(2)),
     "jacrev requires real-valued outputs .* but got complex64. For holomorphic"),
    (lambda: ember.jacrev(lambda x: jnp.round(x).astype(jnp.int32))(jnp.ones(2)),
     "jacrev requires real-valued outputs .* but got int32. For differentiation of functions "
     "with integer outputs"),
    (lambda: ember.jacrev(lambda x: x > 0)(jnp.ones(2)), "real-valued outputs .* got bool"),
    (lambda: ember.hessian(lambda x: (x * (1 + 1j)).sum())(jnp.ones(2)),
     "jacrev requires real-valued outputs .* complex64"),
    (lambda: ember.jacrev(lambda x: x * 1.0)(jnp.ones(2, jnp.int32)),
     "jacrev requires real- or complex-valued inputs .* but got int32"),
    (lambda: ember.jacrev(jnp.abs, holomorphic=True)(jnp.ones(2, jnp.complex64)),
     "jacrev with holomorphic=True requires outputs with complex dtype, but got float32"),
    (lambda: ember.jacfwd(jnp.abs, holomorphic=True)(jnp.ones(2, jnp.complex64)),
     "jacfwd with holomorphic=True requires outputs with complex dtype, but got float32"),
    (lambda: ember.jacfwd(jnp.abs)(jnp.ones(2, jnp.complex64)),
     "jacfwd requires real-valued inputs .* but got complex64"),
], ids=["rev_complex_out", "rev_int_out", "rev_bool_out", "hessian_complex_out",
        "rev_int_in", "rev_holo_real_out", "fwd_holo_real_out", "fwd_complex_in"])
def test_jacobian_dtype_errors_follow_jax(fun, msg):
    with pytest.raises(TypeError, match=msg):
        fun()


def test_jacrev_allows_complex_inputs_with_real_outputs():
    # d|z|/dz in JAX's convention (the cotangent pulled back): conj(z) / |z|.
    z = np.array([1 + 1j, 3 - 4j], np.complex64)
    jac = ember.jacrev(jnp.abs)(jnp.asarray(z))
    np.testing.assert_allclose(np.asarray(jac), np.diag(np.conj(z) / np.abs(z)), rtol=1e-6)
    # jacfwd allows complex outputs of real inputs; int inputs with allow_int give zeros.
    np.testing.assert_allclose(np.asarray(ember.jacfwd(lambda x: x * (1 + 2j))(jnp.ones(2))),
                               np.eye(2) * (1 + 2j))
    jac_int = ember.jacrev(lambda x: x * 1.0, allow_int=True)(jnp.ones(2, jnp.int32))
    assert np.asarray(jac_int).dtype == np.int32 and not np.asarray(jac_int).any()


def test_jacobian_dtype_errors_match_jax_oracle():
    jax = pytest.importorskip("jax")
    for lib in (jax, ember):
        with pytest.raises(TypeError):
            lib.jacrev(lambda x: x * (1 + 2j))(lib.numpy.ones(2))
        with pytest.raises(TypeError):
            lib.hessian(lambda x: (x * (1 + 1j)).sum())(lib.numpy.ones(2))
        lib.jacrev(lib.numpy.abs)(lib.numpy.ones(2, lib.numpy.complex64))


# ---------------------------------------------------------------- scatter_mul gradients


def test_at_multiply_gradient_wrt_updates_for_one_index():
    # d/du sum(x.at[i].multiply(u)) = x[i] (summed over the indexed block).
    x = jnp.arange(1.0, 7.0).reshape(2, 3)
    assert float(ember.grad(lambda u: jnp.ones(3).at[1].multiply(u).sum())(2.0)) == 1.0
    assert float(ember.grad(lambda u: x.at[1, 2].multiply(u).sum())(2.0)) == 6.0
    assert float(ember.grad(lambda u: jnp.arange(3.0).at[1:].multiply(u).sum())(2.0)) == 3.0
    np.testing.assert_array_equal(
        np.asarray(ember.grad(lambda u: x.at[1].multiply(u).sum())(jnp.full(3, 2.0))),
        [4.0, 5.0, 6.0])
    # Both arguments: f = sum(x.at[1].multiply(u) ** 2).
    gx, gu = ember.grad(lambda x, u: (x.at[1].multiply(u) ** 2).sum(), argnums=(0, 1))(
        jnp.arange(1.0, 4.0), 2.0)
    np.testing.assert_array_equal(np.asarray(gx), [2.0, 2 * 2.0 * 2.0 * 2.0, 6.0])
    assert float(gu) == 2 * 2.0 * 2.0 * 2.0
    _, t = ember.jvp(lambda u: jnp.arange(3.0).at[1].multiply(u), (2.0,), (1.0,))
    np.testing.assert_array_equal(np.asarray(t), [0.0, 1.0, 0.0])


def test_at_multiply_gradient_wrt_updates_of_strided_slices():
    # Slices name each element once: JAX marks such scatters unique (d/du = sum of x[idx]).
    x = jnp.arange(1.0, 13.0).reshape(3, 4)
    assert float(ember.grad(lambda u: jnp.ones(4).at[::2].multiply(u).sum())(2.0)) == 2.0
    assert float(ember.grad(lambda u: jnp.arange(4.0).at[::-1].multiply(u).sum())(2.0)) == 6.0
    assert float(ember.grad(lambda u: x.at[1:, ::3].multiply(u).sum())(2.0)) == 5 + 8 + 9 + 12


def test_at_multiply_gradient_wrt_updates_of_array_indices_needs_unique_indices():
    idx = jnp.array([0, 2])
    with pytest.raises(NotImplementedError, match="unique_indices"):
        ember.grad(lambda u: jnp.ones(3).at[idx].multiply(u).sum())(2.0)
    g = ember.grad(lambda u: jnp.ones(3).at[idx].multiply(u, unique_indices=True).sum())(2.0)
    assert float(g) == 2.0


# ---------------------------------------------------------------- out-of-bounds gather


@pytest.mark.parametrize("i,value,grad", [(5, 2.0, [0, 0, 0]), (-4, 0.0, [0, 0, 0]),
                                          (2, 2.0, [0, 0, 1]), (-3, 0.0, [1, 0, 0])])
def test_out_of_bounds_gather_clamps_forward_and_drops_in_its_gradient(i, value, grad):
    # JAX: x[idx] gathers with mode promise_in_bounds: XLA's gather clamps an out-of-bounds
    # index, and the transpose (a scatter-add in that mode) drops it.
    x = jnp.arange(3.0)
    idx = jnp.array([i])
    assert float(x[idx][0]) == value
    np.testing.assert_array_equal(np.asarray(ember.grad(lambda x: x[idx].sum())(x)), grad)


def test_promise_in_bounds_scatter_drops_out_of_bounds_updates():
    dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    idx = jnp.array([[5], [-1], [1]])

    def f(o):
        return lax.scatter_add(o, idx, jnp.full(3, 7.0), dn, mode="promise_in_bounds")
    np.testing.assert_array_equal(np.asarray(f(jnp.ones(3))), [1.0, 8.0, 1.0])
    np.testing.assert_array_equal(np.asarray(ember.jit(f)(jnp.ones(3))), [1.0, 8.0, 1.0])
    clipped = lax.scatter_add(jnp.ones(3), idx, jnp.full(3, 7.0), dn, mode="clip")
    np.testing.assert_array_equal(np.asarray(clipped), [8.0, 8.0, 8.0])


# ---------------------------------------------------------------- NaN and edge derivatives


def test_max_and_min_gradients_propagate_nan():
    nan = np.nan
    g = ember.grad(lambda x: jnp.max(x))(jnp.array([1.0, nan]))
    assert np.isnan(np.asarray(g)).all()
    g = ember.grad(lambda x: jnp.min(x))(jnp.array([1.0, nan, 2.0]))
    assert np.isnan(np.asarray(g)).all()
    g = ember.grad(lambda x: jnp.max(x, axis=1).sum())(jnp.array([[1.0, nan], [2.0, 3.0]]))
    np.testing.assert_array_equal(np.asarray(g), [[nan, nan], [0.0, 1.0]])
    # Ties still share the tangent.
    g = ember.grad(lambda x: jnp.max(x))(jnp.array([1.0, 3.0, 3.0]))
    np.testing.assert_array_equal(np.asarray(g), [0.0, 0.5, 0.5])


def test_arccosh_derivative_at_minus_one_is_plus_inf():
    # d/dx arccosh(x) = 1/sqrt(x^2 - 1): +inf at x = +-1 (JAX's formula).
    assert float(ember.grad(jnp.arccosh)(-1.0)) == np.inf
    assert float(ember.grad(jnp.arccosh)(1.0)) == np.inf
    np.testing.assert_allclose(float(ember.grad(jnp.arccosh)(2.0)), 1 / np.sqrt(3.0),
                               rtol=1e-6)


def test_a_cotangent_of_another_structure_is_a_value_error():
    _, pullback = ember.vjp(lambda x: (x, 2 * x), 1.0)
    with pytest.raises(ValueError, match="Tree structure of cotangent"):
        pullback([1.0, 1.0])


@pytest.mark.parametrize("name", ["where", "maximum", "abs", "clip", "hypot", "mod", "pow"])
def test_a_gradient_has_its_primals_weak_type(name):
    # As in JAX: the gradient of a weak 1.3 is weak, whichever ops it passed through; that of
    # a strong float32 value is strong.
    f = {"where": lambda x: jnp.where(x > 0, x, 0.0), "maximum": lambda x: jnp.maximum(x, 0.0),
         "abs": jnp.abs, "clip": lambda x: jnp.clip(x, 0.0, 2.0),
         "hypot": lambda x: jnp.hypot(x, 1.0), "mod": lambda x: jnp.mod(x, 0.7),
         "pow": lambda y: 2.0 ** y}[name]
    weak = ember.grad(f)(1.3)
    strong = ember.grad(f)(jnp.float32(1.3))
    assert weak.weak_type and not strong.weak_type
    assert float(weak) == float(strong)
    assert ember.jit(ember.grad(f))(1.3).weak_type


def test_numpy_primals_stay_the_callers():
    # A NumPy-parameter SGD loop updates its array in place between gradient calls.
    w = np.zeros(3, np.float32)
    x, y = np.ones((4, 3), np.float32), np.ones(4, np.float32)
    g = ember.grad(lambda w: jnp.mean((x @ w - y) ** 2))
    for _ in range(3):
        w -= 0.1 * np.asarray(g(w))
    np.testing.assert_allclose(w, [0.312, 0.312, 0.312], rtol=1e-5)
    for f in (lambda a: lax.stop_gradient(a), lambda a: ember.vjp(jnp.sin, a)[0],
              lambda a: ember.value_and_grad(lambda v: v.sum())(a)[0]):
        buf = np.zeros(3, np.float32)
        out = f(buf)
        buf[0] = 7.0
        assert float(np.asarray(out).ravel()[0]) == 0.0
