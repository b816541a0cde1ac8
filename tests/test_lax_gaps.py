"""lax.reduce, custom_linear_solve, custom_root, rng_bit_generator, ragged_dot, conv shape
helpers, composite, platform_dependent and ember.ops segment reductions against JAX."""

import functools

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.test_util import check_grads

BACKENDS = ("cpu", "interpreter")
RNG = np.random.default_rng(0)


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# ---------------------------------------------------------------- conv shape helpers


def test_conv_shape_helpers(jax):
    jl = jax.lax
    for args in [((2, 3, 10, 10), (4, 3, 3, 3), (1, 1), "SAME"),
                 ((2, 3, 10, 10), (4, 3, 3, 3), (2, 3), [(1, 0), (2, 2)]),
                 ((2, 3, 2, 2), (4, 3, 3, 3), (1, 1), "VALID")]:
        assert lax.conv_shape_tuple(*args) == jl.conv_shape_tuple(*args)
    assert lax.conv_shape_tuple((4, 3, 5), (2, 3, 2), (1,), "VALID", 2) == (2, 2, 4)
    dn = ("NHWC", "HWIO", "NHWC")
    assert lax.conv_general_permutations(dn) == jl.conv_general_permutations(dn)
    for pad in ("SAME", "VALID", [(1, 2), (0, 1)]):
        a = ((2, 10, 11, 3), (3, 2, 3, 4), (2, 1), pad, dn)
        assert lax.conv_general_shape_tuple(*a) == jl.conv_general_shape_tuple(*a)
        assert lax.conv_transpose_shape_tuple(*a) == jl.conv_transpose_shape_tuple(*a)
    with pytest.raises(TypeError, match="Wrong number of explicit pads"):
        lax.conv_shape_tuple((1, 1, 4, 4), (1, 1, 2, 2), (1, 1), [(0, 0)])


# ---------------------------------------------------------------- lax.reduce


def _pair_max_sum(lx):
    return lambda a, b: (lx.max(a[0], b[0]), lx.add(a[1], b[1]))


def _shifted_mul(a, b):  # (a+1)(b+1)-1: a monoid with identity 0, not a known one
    return a * b + a + b


def test_reduce_monoids_become_reductions(jax):
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    for op, init, prim in [(lax.add, 0.0, "reduce_sum"), (lax.max, -np.inf, "reduce_max"),
                           (lax.mul, 1.0, "reduce_prod"), (lax.min, np.inf, "reduce_min")]:
        jop = getattr(jax.lax, op.__name__)
        close(lax.reduce(x, init, op, (1,)), jax.lax.reduce(x, init, jop, (1,)))
        assert f"{prim}[axes=(1,)]" in str(ember.make_jaxpr(
            lambda x, op=op, init=init: lax.reduce(x, init, op, (1,)))(x))
    i = np.arange(6, dtype=np.int32)
    assert "reduce_or" in str(ember.make_jaxpr(lambda i: lax.reduce(i, 0, lax.bitwise_or,
                                                                    (0,)))(i))
    # A non-identity init is not a monoid: the general reduce, and the init counts once.
    jx = str(ember.make_jaxpr(lambda x: lax.reduce(x, 1.0, lax.add, (0,)))(x))
    assert "reduce[" in jx
    close(lax.reduce(x, 1.0, lax.add, (0,)), jax.lax.reduce(x, 1.0, jax.lax.add, (0,)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_reduce_variadic(jax, backend):
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    i = np.arange(12, dtype=np.int32).reshape(3, 4)
    init = (-np.inf, np.int32(0))
    want = jax.lax.reduce((x, i), init, _pair_max_sum(jax.lax), (0,))
    got = lax.reduce((x, i), init, _pair_max_sum(lax), (0,))
    jitted = ember.jit(lambda x, i: lax.reduce((x, i), init, _pair_max_sum(lax), (0,)),
                       backend=backend)(x, i)
    for g in (got, jitted):
        close(g[0], want[0])
        np.testing.assert_array_equal(g[1], want[1])
        assert g[1].dtype == want[1].dtype
    jx = str(ember.make_jaxpr(lambda x, i: lax.reduce((x, i), init, _pair_max_sum(lax),
                                                      (0,)))(x, i))
    assert "c:f32[4] d:i32[4] = reduce[" in jx and "dimensions=(0,)" in jx


@pytest.mark.parametrize("dims", [(0,), (1,), (0, 1)])
def test_reduce_general_values_grads_vmap(jax, dims):
    x = (RNG.normal(size=(5, 3)) / 4).astype(np.float32)
    want = jax.lax.reduce(x, 0.0, _shifted_mul, dims)
    close(lax.reduce(x, 0.0, _shifted_mul, dims), want)
    close(ember.jit(lambda x: lax.reduce(x, 0.0, _shifted_mul, dims))(x), want)
    ge = ember.grad(lambda x: lax.reduce(x, 0.0, _shifted_mul, dims).sum())(x)
    gj = jax.grad(lambda x: jax.lax.reduce(x, 0.0, _shifted_mul, dims).sum())(x)
    close(ge, gj, 1e-4)
    if dims == (0, 1):  # (second order once: each is a few seconds)
        check_grads(lambda x: lax.reduce(x, 0.0, _shifted_mul, dims), (x,), order=2,
                    modes=("fwd", "rev"), atol=2e-2, rtol=2e-2)
    xs = np.stack([x, 2 * x])
    close(ember.vmap(lambda x: lax.reduce(x, 0.0, _shifted_mul, dims))(xs),
          np.stack([np.asarray(jax.lax.reduce(v, 0.0, _shifted_mul, dims)) for v in xs]))


def test_reduce_empty_and_errors():
    close(lax.reduce(np.zeros((0, 2), np.float32), 0.0, _shifted_mul, (0,)), np.zeros(2))
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match="same tree structure"):
        lax.reduce((x, x), 0.0, lax.add, (0,))
    with pytest.raises(TypeError, match="dtypes should match"):
        lax.reduce(x, np.int32(0), lambda a, b: a + b, (0,))
    with pytest.raises(ValueError, match="out of bounds"):
        lax.reduce(x, 0.0, _shifted_mul, (2,))


# ---------------------------------------------------------------- custom_linear_solve


def _solver(np_, lx, a, symmetric=False, with_transpose=True):
    def f(a, b):
        kw = {}
        if with_transpose:
            kw["transpose_solve"] = lambda vm, y: np_.linalg.solve(a.T, y)
        return lx.custom_linear_solve(lambda x: np_.dot(a, x), b,
                                      lambda mv, y: np_.linalg.solve(a, y),
                                      symmetric=symmetric, **kw)
    return f


def test_custom_linear_solve_values_and_grads(jax):
    a = (RNG.normal(size=(3, 3)) + 3 * np.eye(3)).astype(np.float32)
    b = RNG.normal(size=3).astype(np.float32)
    fe, fj = _solver(jnp, lax, a), _solver(jax.numpy, jax.lax, a)
    close(fe(a, b), fj(a, b), 1e-5)
    close(ember.jit(fe)(a, b), fj(a, b), 1e-5)
    assert "custom_linear_solve[" in str(ember.make_jaxpr(fe)(a, b))
    ge = ember.grad(lambda a, b: (fe(a, b) ** 2).sum(), (0, 1))(a, b)
    gj = jax.grad(lambda a, b: (fj(a, b) ** 2).sum(), (0, 1))(a, b)
    for x, y in zip(ge, gj):
        close(x, y, 1e-4)
    close(ember.jvp(fe, (a, b), (a, b))[1], jax.jvp(fj, (a, b), (a, b))[1], 1e-4)
    check_grads(fe, (a, b), order=2, modes=("fwd", "rev"), atol=2e-2, rtol=2e-2)


def test_custom_linear_solve_vmap_and_pytree(jax):
    a = (RNG.normal(size=(3, 3)) + 3 * np.eye(3)).astype(np.float32)
    A = np.stack([a, a + 1])
    B = RNG.normal(size=(2, 3)).astype(np.float32)
    fe, fj = _solver(jnp, lax, a), _solver(jax.numpy, jax.lax, a)
    close(ember.vmap(fe)(A, B), jax.vmap(fj)(A, B), 1e-5)
    close(ember.vmap(fe, (None, 0))(a, B), jax.vmap(fj, (None, 0))(a, B), 1e-5)
    ge = ember.grad(lambda a: ember.vmap(fe, (None, 0))(a, B).sum())(a)
    close(ge, jax.grad(lambda a: jax.vmap(fj, (None, 0))(a, B).sum())(a), 1e-4)

    # A pytree right-hand side, vecmat derived from matvec, and aux output.
    def solve_pair(mv, b):
        return (b[0] / 2.0, b[1] / 3.0), jnp.float32(7.0)
    mv = lambda x: (2.0 * x[0], 3.0 * x[1])  # noqa: E731
    b = (jnp.ones(2), jnp.arange(3.0))
    x, aux = lax.custom_linear_solve(mv, b, solve_pair, solve_pair, has_aux=True)
    close(x[0], np.full(2, 0.5))
    close(x[1], np.arange(3.0) / 3)
    assert float(aux) == 7.0
    g = ember.grad(lambda s: lax.custom_linear_solve(
        lambda x: (2.0 * s * x[0], 3.0 * x[1]), b,
        lambda m, b: (b[0] / (2.0 * s), b[1] / 3.0),
        lambda m, b: (b[0] / (2.0 * s), b[1] / 3.0))[0].sum())(1.5)
    close(g, -2.0 / (2.0 * 1.5 ** 2))


def test_custom_linear_solve_errors():
    a = np.eye(2, dtype=np.float32)
    f = _solver(jnp, lax, a, with_transpose=False)
    b = np.ones(2, np.float32)
    close(ember.jvp(lambda b: f(a, b), (b,), (b,))[1], b)  # forward mode needs no transpose
    with pytest.raises(TypeError, match="transpose_solve required"):
        ember.grad(lambda b: f(a, b).sum())(b)
    with pytest.raises(ValueError, match="output shapes must match b"):
        lax.custom_linear_solve(lambda x: x, b, lambda mv, y: jnp.ones(3))


# ---------------------------------------------------------------- custom_root


def _sqrt(lx):
    def sqrt(x):
        f = lambda y: y ** 2 - x  # noqa: E731
        newton = lambda f, y: lx.fori_loop(0, 20, lambda i, y: y - f(y) / (2 * y), y)  # noqa
        return lx.custom_root(f, 1.0, newton, lambda g, y: y / g(1.0))
    return sqrt


def test_custom_root(jax):
    se, sj = _sqrt(lax), _sqrt(jax.lax)
    close(se(4.0), 2.0)
    close(ember.grad(se)(4.0), jax.grad(sj)(4.0))
    close(ember.jit(ember.grad(se))(9.0), 1 / 6)
    close(ember.vmap(ember.grad(se))(jnp.array([4.0, 9.0])), [0.25, 1 / 6])
    close(ember.jvp(se, (4.0,), (1.0,))[1], 0.25)

    # Vector root with aux: x = A^-1 c via Newton on f(x) = A x - c.
    a = np.array([[3.0, 1.0], [1.0, 2.0]], np.float32)

    def solve_vec(c):
        f = lambda x: a @ x - c  # noqa: E731
        newton = lambda f, x: (jnp.linalg.solve(a, c), jnp.int32(1))  # noqa: E731
        tsolve = lambda g, y: jnp.linalg.solve(ember.jacfwd(g)(y), y)  # noqa: E731
        return lax.custom_root(f, jnp.zeros(2), newton, tsolve, has_aux=True)
    c = np.array([1.0, 2.0], np.float32)
    x, aux = solve_vec(c)
    close(x, np.linalg.solve(a, c))
    assert int(aux) == 1
    close(ember.jacrev(lambda c: solve_vec(c)[0])(c), np.linalg.inv(a), 1e-5)


# ---------------------------------------------------------------- rng_bit_generator


@pytest.mark.parametrize("algorithm", [0, 1, 2])
def test_rng_bit_generator_matches_xla(jax, algorithm):
    # (The second key's counter wraps around 2**64: Philox carries into its high word.)
    for key in ([1, 2, 3, 4], [0xDEADBEEF, 7, 0xFFFFFFFF, 0xFFFFFFFF]):
        for dtype in ("uint16", "uint32"):
            for shape in [(8,), (3, 3, 5), (4, 2)]:
                got = lax.rng_bit_generator(np.array(key, np.uint32), shape, dtype,
                                            lax.RandomAlgorithm(algorithm))
                want = jax.lax.rng_bit_generator(
                    jax.numpy.array(key, jax.numpy.uint32), shape, dtype,
                    jax.lax.RandomAlgorithm(algorithm))
                for g, w in zip(got, want):
                    assert g.dtype == w.dtype and g.shape == w.shape
                    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("backend", BACKENDS)
def test_rng_bit_generator_jit_vmap_jaxpr(jax, backend):
    f = lambda k: lax.rng_bit_generator(k, (3, 5))  # noqa: E731
    k = np.array([1, 2, 3, 4], np.uint32)
    for g, w in zip(ember.jit(f, backend=backend)(k), f(k)):
        np.testing.assert_array_equal(g, w)
    keys = np.stack([k, k + 1])
    want = jax.vmap(lambda k: jax.lax.rng_bit_generator(k, (3, 5)))(keys)
    for g, w in zip(ember.vmap(f)(keys), want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    jx = str(ember.make_jaxpr(f)(k))
    assert "rng_bit_generator[\n      algorithm=RNG_DEFAULT\n      dtype=uint32" in jx
    with pytest.raises(TypeError, match="unsupported dtype int32"):
        lax.rng_bit_generator(k, (2,), np.int32)
    with pytest.raises(TypeError, match="uint32\\[4\\]"):
        lax.rng_bit_generator(np.zeros(3, np.uint32), (2,))


def test_rng_uniform_distribution():
    u = np.asarray(lax.rng_uniform(2.0, 5.0, (20000,)))
    assert u.dtype == np.float32 and u.min() >= 2.0 and u.max() < 5.0
    assert abs(u.mean() - 3.5) < 0.05 and abs(u.std() - 3 / np.sqrt(12)) < 0.05
    v = np.asarray(ember.jit(lambda: lax.rng_uniform(0, 10, (20000,)))())
    assert v.dtype == np.int32 and set(np.unique(v)) == set(range(10))
    assert not np.array_equal(v, np.asarray(ember.jit(
        lambda: lax.rng_uniform(0, 10, (20000,)))()))  # stateful: a new draw each run


# ---------------------------------------------------------------- ragged_dot


def test_ragged_dot(jax):
    lhs = RNG.normal(size=(7, 3)).astype(np.float32)
    rhs = RNG.normal(size=(3, 3, 4)).astype(np.float32)
    g = np.array([2, 0, 3], np.int32)
    want = jax.lax.ragged_dot(lhs, rhs, g)
    close(lax.ragged_dot(lhs, rhs, g), want)
    close(ember.jit(lax.ragged_dot)(lhs, rhs, g), want)
    ge = ember.grad(lambda l, r: (lax.ragged_dot(l, r, g) ** 2).sum(), (0, 1))(lhs, rhs)
    gj = jax.grad(lambda l, r: (jax.lax.ragged_dot(l, r, g) ** 2).sum(), (0, 1))(lhs, rhs)
    for x, y in zip(ge, gj):
        close(x, y, 1e-4)
    assert lax.ragged_dot(lhs, rhs, g, preferred_element_type=jnp.float16).dtype == np.float16
    with pytest.raises(TypeError, match="rank 2"):
        lax.ragged_dot(lhs[0], rhs, g)


def test_ragged_dot_general_modes(jax):
    g = np.array([2, 0, 3], np.int32)
    # Ragged contracting dimension: one product per group.
    dn = (((0,), (0,)), ((), ()))
    l2 = RNG.normal(size=(7, 3)).astype(np.float32)
    r2 = RNG.normal(size=(7, 4)).astype(np.float32)
    close(lax.ragged_dot_general(l2, r2, g, lax.RaggedDotDimensionNumbers(dn, (0,), ())),
          jax.lax.ragged_dot_general(l2, r2, g, jax.lax.RaggedDotDimensionNumbers(dn, (0,),
                                                                                  ())))
    # Batched, ragged non-contracting dimension.
    dn3 = ((((2,), (1,)), ((0,), (0,))), (1,), (2,))
    l3 = RNG.normal(size=(2, 7, 3)).astype(np.float32)
    r3 = RNG.normal(size=(2, 3, 3, 5)).astype(np.float32)
    close(lax.ragged_dot_general(l3, r3, g, lax.RaggedDotDimensionNumbers(*dn3)),
          jax.lax.ragged_dot_general(l3, r3, g, jax.lax.RaggedDotDimensionNumbers(*dn3)))


# ---------------------------------------------------------------- composite, platform_dependent


def test_composite(jax):
    @functools.partial(lax.composite, name="my.tan")
    def tan(x, *, k=1.0):
        return jnp.tan(x) * k

    close(tan(0.5, k=2.0), 2 * np.tan(0.5))
    close(ember.jit(lambda x: tan(x, k=2.0))(0.5), 2 * np.tan(0.5))
    jx = str(ember.make_jaxpr(lambda x: tan(x, k=2.0))(1.0))
    assert "composite[" in jx and "name=my.tan" in jx and "version=0" in jx
    assert "('k', (2.0,)" in jx
    with pytest.raises(ValueError, match="JVP rule for composite not implemented"):
        ember.grad(tan)(1.0)


def test_platform_dependent():
    f = lambda x: lax.platform_dependent(x, cpu=jnp.sin, default=jnp.cos)  # noqa: E731
    close(f(1.0), np.sin(1.0))
    close(ember.jit(f)(1.0), np.sin(1.0))
    close(lax.platform_dependent(1.0, tpu=jnp.sin, default=jnp.cos), np.cos(1.0))
    with pytest.raises(ValueError, match="no branch"):
        lax.platform_dependent(1.0, tpu=jnp.sin)


# ---------------------------------------------------------------- ember.ops


@pytest.mark.parametrize("name", ["segment_sum", "segment_prod", "segment_max",
                                  "segment_min"])
def test_segment_ops(jax, name):
    data = RNG.normal(size=(7, 3)).astype(np.float32)
    ids = np.array([3, 0, 1, -1, 2, 0, 9])
    fe, fj = getattr(ember.ops, name), getattr(jax.ops, name)
    for kw in ({}, {"bucket_size": 2}, {"mode": "clip"}):
        close(fe(data, ids, num_segments=5, **kw), fj(data, ids, num_segments=5, **kw))
    i = np.arange(6, dtype=np.int32)
    s = np.array([0, 0, 1, 1, 2, 2])
    got, want = fe(i, s, num_segments=4), fj(i, s, num_segments=4)
    np.testing.assert_array_equal(got, want)  # the empty segment holds the identity
    assert got.dtype == want.dtype
    close(fe(data, np.array([0, 1, 1, 0, 2, 2, 0])),
          fj(data, np.array([0, 1, 1, 0, 2, 2, 0])))
    close(ember.jit(fe, static_argnums=2)(data, ids % 5, 5), fj(data, ids % 5, 5))
    if name == "segment_prod":  # scatter_mul has no gradient with repeated indices (JAX)
        with pytest.raises(NotImplementedError, match="unique_indices=True"):
            ember.grad(lambda d: fe(d, ids, 5).sum())(data)
    else:
        ge = ember.grad(lambda d: fe(d, ids, 5).sum())(data)
        close(ge, jax.grad(lambda d: fj(d, ids, 5).sum())(data))
    with pytest.raises(ember.errors.ConcretizationTypeError):
        ember.jit(fe)(data, ids)
