"""ember.random against jax.random (the oracle): keys, bits and samplers, eager/jit/vmap.

Bit-level results (keys, bits, uniform on [0, 1), randint, permutation, choice, bernoulli,
categorical, ...) must equal JAX's exactly. Samplers through transcendental functions
(``erf_inv``, ``log``, ...) are compared to a few ulps: ember's ``log``/``erf_inv`` round
differently from XLA's in the last bits (see ember/random/distributions.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import random as er
from ember.lax import prng


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    np.testing.assert_array_equal(a, b)


def _close(a, b, ulps=4):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    tol = ulps * float(ember.dtypes.finfo(a.dtype).eps)
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    np.testing.assert_allclose(a.astype(wide), b.astype(wide), rtol=tol, atol=tol)


_MODES = ["eager", "jit"]


def _run(f, mode, *args):
    if mode == "jit":
        return ember.jit(f)(*args)
    if mode == "interpreter":
        return ember.jit(f, backend="interpreter")(*args)
    return f(*args)


def test_threefry2x32_known_answer_and_backends(jax):
    from jax._src.random import threefry2x32 as jt
    k1, k2 = np.uint32(0x13198A2E), np.uint32(0x03707344)
    x1 = np.arange(7, dtype=np.uint32) * np.uint32(0x9E3779B9)
    x2 = np.arange(7, 14, dtype=np.uint32)
    want = [np.asarray(w) for w in jt.threefry2x32_p.bind(k1, k2, x1, x2)]
    for mode in (*_MODES, "interpreter"):
        got = _run(lambda *a: prng.threefry2x32(*a), mode, k1, k2, x1, x2)
        for g, w in zip(got, want):
            _same(g, w)
    # The published Threefry-2x32 (20 rounds) known-answer vector for a zero key and counter.
    out = prng.threefry2x32(np.uint32(0), np.uint32(0), np.uint32(0), np.uint32(0))
    assert [int(o) for o in out] == [0x6B200159, 0x99BA4EFE]
    with pytest.raises(TypeError, match="threefry2x32"):
        prng.threefry2x32(np.int32(0), np.uint32(0), np.uint32(0), np.uint32(0))


def _numpy_threefry(k1, k2, x1, x2):
    u32 = np.uint32
    with np.errstate(over="ignore"):
        return prng._hash(np.add, np.bitwise_xor, lambda v, r: (v << u32(r)) | (v >> u32(32 - r)),
                          u32, *(np.asarray(a, u32) for a in (k1, k2, x1, x2)))


@pytest.mark.parametrize("shape", [(), (5,), (1, 7), (300, 301)])
def test_eager_threefry_native_kernel_matches_numpy(shape):
    # The eager impl runs the CPU backend's one-pass kernel (threaded for large arrays); its
    # bits must be those of the NumPy rounds, counters broadcast or not.
    from ember.backends.cpu import eager_threefry
    assert eager_threefry.runner() is not None
    rng = np.random.default_rng(len(shape))
    k1, k2 = rng.integers(0, 2 ** 32, 2, dtype=np.uint32)
    x1, x2 = (rng.integers(0, 2 ** 32, shape, dtype=np.uint32) for _ in range(2))
    column = x1[..., :1] if shape else x1
    for args in [(k1, k2, x1, x2), (k1, k2, np.uint32(3), x2), (k1, k2, column, x2)]:
        got = prng._impl(*args)
        for g, w in zip(got, _numpy_threefry(*args)):
            _same(g, np.broadcast_to(w, g.shape))
    got = prng._impl(np.full(2, k1), np.full(2, k2), np.uint32(1), np.uint32(2))  # (NumPy's)
    for g, w in zip(got, _numpy_threefry(np.full(2, k1), np.full(2, k2), 1, 2)):
        _same(g, w)


def test_eager_sampler_fast_path_gives_the_ordinary_bits():
    # From a signature's second call the samplers are replayed (ember.numpy's eager fast
    # path); typed single keys go through their data. Every call equals the ordinary path.
    from ember.numpy._fastpath import ordinary_path
    calls = [lambda k: er.normal(k, (3, 4)), lambda k: er.uniform(k, (5,), minval=-2.0),
             lambda k: er.bits(k, (6,)), lambda k: er.split(k, 3), lambda k: er.split(k),
             lambda k: er.randint(k, (4,), 0, 9), lambda k: er.bernoulli(k, 0.3, (5,)),
             lambda k: er.truncated_normal(k, -1.0, 2.0, (4,)),
             lambda k: er.gumbel(k, (2,), dtype=np.float16)]
    for key in (er.PRNGKey(7), er.key(7)):
        for call in calls:
            with ordinary_path():
                want = call(key)
            for _ in range(3):
                got = call(key)
                assert type(got) is type(want)
                _same(er.key_data(got) if er.key_array.is_typed_key(got) else got,
                      er.key_data(want) if er.key_array.is_typed_key(want) else want)
    keys = er.split(er.key(1), 2)  # (a key array: the ordinary path, with its errors)
    with pytest.raises(ValueError, match="normal accepts a single key"):
        er.normal(keys, (2,))


@pytest.mark.parametrize("seed", [0, 1, -1, 2 ** 31, 2 ** 32 + 5, -2 ** 40, 2 ** 63 - 1])
def test_prng_key_seeds(jax, seed):
    _same(er.PRNGKey(seed), jax.random.PRNGKey(seed))


def test_prng_key_seed_dtypes_traced_and_x64(jax):
    for s in (np.int8(-1), np.uint32(7), np.int32(-5), np.uint8(200), True):
        _same(er.PRNGKey(s), jax.random.PRNGKey(s))
    for mode in ("jit", "interpreter"):
        _same(_run(er.PRNGKey, mode, np.int32(-7)), jax.random.PRNGKey(np.int32(-7)))
    _same(ember.vmap(er.PRNGKey)(np.arange(3)), jax.vmap(jax.random.PRNGKey)(np.arange(3)))
    ember.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_x64", True)
    try:
        for s in (-1, 2 ** 32 + 5, -2 ** 40, 2 ** 63 - 1, np.int64(-3), np.uint64(2 ** 63 + 1)):
            _same(er.PRNGKey(s), jax.random.PRNGKey(s))
        _same(er.uniform(er.PRNGKey(3), (5,), "float64"),
              jax.random.uniform(jax.random.PRNGKey(3), (5,), "float64"))
        _same(er.bits(er.PRNGKey(3), (5,)), jax.random.bits(jax.random.PRNGKey(3), (5,)))
        _same(er.randint(er.PRNGKey(3), (9,), -2 ** 40, 2 ** 40),
              jax.random.randint(jax.random.PRNGKey(3), (9,), -2 ** 40, 2 ** 40))
    finally:
        ember.config.update("jax_enable_x64", False)
        jax.config.update("jax_enable_x64", False)


def test_prng_key_errors(jax):
    with pytest.raises(TypeError, match="PRNG key seed must be an integer"):
        er.PRNGKey(np.float32(1.5))
    with pytest.raises(TypeError, match="PRNGKey accepts a scalar seed"):
        er.PRNGKey(np.zeros(2, np.int32))
    with pytest.raises(OverflowError):
        er.PRNGKey(2 ** 64)
    key = er.PRNGKey(0)
    with pytest.raises(TypeError, match="unexpected PRNG key type"):
        er.split([0, 0])
    with pytest.raises(TypeError, match="key_data.dtype = uint32"):
        er.normal(np.zeros(2, np.int32))
    with pytest.raises(TypeError, match="key_data.shape to end with"):
        er.normal(np.zeros(3, np.uint32))
    with pytest.raises(ValueError, match="split accepts a single key"):
        er.split(er.split(key, 3))
    with pytest.raises(TypeError, match="fold_in accepts a scalar"):
        er.fold_in(key, np.arange(2))
    with pytest.raises(ValueError, match="must be an unsigned int dtype"):
        er.bits(key, (2,), np.int32)
    with pytest.raises(ValueError, match="must be a float dtype"):
        er.uniform(key, (2,), np.int32)
    with pytest.raises(TypeError, match="randint only accepts integer dtypes"):
        er.randint(key, (2,), 0, 3, np.float32)
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        er.randint(key, (2,), np.zeros(3, np.int32), 5)
    with pytest.raises(ValueError, match="broadcast-compatible"):
        er.truncated_normal(key, np.zeros((3, 2)), 1.0, (2,))
    with pytest.raises(ValueError, match="Cannot take a larger sample"):
        er.choice(key, 3, (4,), replace=False)
    with pytest.raises(ValueError, match="p must be None or a 1D vector"):
        er.choice(key, 3, (2,), p=np.ones(4, np.float32))
    with pytest.raises(TypeError, match="must have a floating dtype"):
        er.bernoulli(key, 1)
    with pytest.raises(ValueError, match="expected 'high' or 'low'"):
        er.bernoulli(key, 0.5, mode="mid")


def test_split_fold_in_bits(jax):
    jr = jax.random
    for seed in (0, 42, 2 ** 31 + 3):
        k = np.asarray(jr.PRNGKey(seed))
        for mode in _MODES:
            _same(_run(lambda k: er.split(k), mode, k), jr.split(k))
            _same(_run(lambda k: er.split(k, (2, 3)), mode, k), jr.split(k, (2, 3)))
            _same(_run(lambda k: er.fold_in(k, 7), mode, k), jr.fold_in(k, 7))
        _same(er.split(k, 0), jr.split(k, 0))
        _same(er.fold_in(k, np.uint32(2 ** 32 - 1)), jr.fold_in(k, np.uint32(2 ** 32 - 1)))
        for dt in ("uint8", "uint16", "uint32"):
            _same(er.bits(k, (5, 3), dt), jr.bits(k, (5, 3), dt))
        _same(ember.jit(lambda k: er.bits(k, (4, 4)))(k), jr.bits(k, (4, 4)))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_uniform(jax, dtype):
    jr = jax.random
    k = np.asarray(jr.PRNGKey(7))
    for mode in _MODES:
        _same(_run(lambda k: er.uniform(k, (3, 5), dtype), mode, k), jr.uniform(k, (3, 5), dtype))
    # (float32: XLA contracts floats * span + min into an FMA, ember does not: within an
    # ulp, checked below; float16 and bfloat16 round after each operation in both, except
    # float16 where the CPU has float16 FMAs, AVX512-FP16: XLA contracts it there too.)
    from ember.backends.cpu import llvm_support
    half_fma = dtype == "float16" and llvm_support.host_has_feature("avx512fp16")
    if dtype != "float32" and not half_fma:
        _same(er.uniform(k, (50,), dtype, -2, 3), jr.uniform(k, (50,), dtype, -2, 3))
    _close(er.uniform(k, (50,), dtype, -2, 3), jr.uniform(k, (50,), dtype, -2, 3))
    lo = np.array([0.0, 1.0, 2.0], np.float32)
    _close(er.uniform(k, (2, 3), dtype, lo, 5.0), jr.uniform(k, (2, 3), dtype, lo, 5.0))


@pytest.mark.parametrize("dtype", ["int32", "int8", "uint32"])
def test_randint(jax, dtype):
    jr = jax.random
    k = np.asarray(jr.PRNGKey(11))
    lo = 0 if dtype.startswith("u") else -5
    for mode in _MODES:
        _same(_run(lambda k: er.randint(k, (20,), lo, 100, dtype), mode, k),
              jr.randint(k, (20,), lo, 100, dtype))
    info = np.iinfo(dtype)
    # Bounds outside the dtype's range are clipped; maxval <= minval gives minval.
    _same(er.randint(k, (30,), -1000, 1000, dtype), jr.randint(k, (30,), -1000, 1000, dtype))
    _same(er.randint(k, (5,), 3, 3, dtype), jr.randint(k, (5,), 3, 3, dtype))
    if info.min < 0:
        _same(er.randint(k, (7,), int(info.min), int(info.max), dtype),
              jr.randint(k, (7,), int(info.min), int(info.max), dtype))
    hi = np.array([[3], [50]], np.int32)
    _same(er.randint(k, (2, 4), 0, hi, dtype), jr.randint(k, (2, 4), 0, hi, dtype))


def test_permutation_and_choice(jax):
    jr = jax.random
    k = np.asarray(jr.PRNGKey(5))
    x = np.arange(12).reshape(3, 4).astype(np.float32)
    p = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
    cases = [
        (lambda r, k: r.permutation(k, 10), True),
        (lambda r, k: r.permutation(k, x, axis=1), True),
        (lambda r, k: r.permutation(k, x, axis=1, independent=True), True),
        (lambda r, k: r.choice(k, 10, (3,)), True),
        (lambda r, k: r.choice(k, x, (2, 2), axis=1), True),
        (lambda r, k: r.choice(k, 10, (3,), replace=False), True),
        (lambda r, k: r.choice(k, 4, (6,), p=p), True),
        (lambda r, k: r.choice(k, 4, (3,), replace=False, p=p), False),  # (gumbel: log)
    ]
    for f, jit_ok in cases:
        want = f(jr, k)
        _same(f(er, k), want)
        if jit_ok:
            _same(ember.jit(lambda k, f=f: f(er, k))(k), want)
    _same(er.choice(k, 4, (0,)), jr.choice(k, 4, (0,)))


def test_bernoulli_rademacher_categorical(jax):
    jr = jax.random
    k = np.asarray(jr.PRNGKey(9))
    p = np.array([0.1, 0.5, 0.9], np.float32)
    logits = np.log(np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]], np.float32))
    for mode in _MODES:
        _same(_run(lambda k: er.bernoulli(k, 0.3, (10,)), mode, k), jr.bernoulli(k, 0.3, (10,)))
        _same(_run(lambda k: er.bernoulli(k, p, (4, 3)), mode, k), jr.bernoulli(k, p, (4, 3)))
        _same(_run(lambda k: er.rademacher(k, (10,)), mode, k), jr.rademacher(k, (10,)))
    _same(er.bernoulli(k, p, mode="high"), jr.bernoulli(k, p, mode="high"))
    _same(er.bernoulli(k), jr.bernoulli(k))
    _same(er.categorical(k, logits), jr.categorical(k, logits))
    _same(er.categorical(k, logits, axis=0), jr.categorical(k, logits, axis=0))
    _same(er.categorical(k, logits, shape=(5, 2)), jr.categorical(k, logits, shape=(5, 2)))
    _same(er.categorical(k, logits[0], shape=(2,), replace=False),
          jr.categorical(k, logits[0], shape=(2,), replace=False))


_CONTINUOUS = [
    ("normal", lambda r, k, dt: r.normal(k, (40,), dt)),
    ("truncated_normal", lambda r, k, dt: r.truncated_normal(k, -1.0, 2.0, (40,), dt)),
    ("exponential", lambda r, k, dt: r.exponential(k, (40,), dt)),
    ("gumbel", lambda r, k, dt: r.gumbel(k, (40,), dt)),
    ("gumbel_high", lambda r, k, dt: r.gumbel(k, (40,), dt, mode="high")),
    ("laplace", lambda r, k, dt: r.laplace(k, (40,), dt)),
    ("logistic", lambda r, k, dt: r.logistic(k, (40,), dt)),
    ("cauchy", lambda r, k, dt: r.cauchy(k, (40,), dt)),
    ("maxwell", lambda r, k, dt: r.maxwell(k, (40,), dt)),
    ("double_sided_maxwell", lambda r, k, dt: r.double_sided_maxwell(k, 1.0, 2.0, (40,), dt)),
    ("pareto", lambda r, k, dt: r.pareto(k, 3.0, (40,), dt)),
    ("rayleigh", lambda r, k, dt: r.rayleigh(k, 2.0, (40,), dt)),
    ("wald", lambda r, k, dt: r.wald(k, 2.0, (40,), dt)),
    ("triangular", lambda r, k, dt: r.triangular(k, 0.0, 0.3, 1.0, (40,), dt)),
    ("lognormal", lambda r, k, dt: r.lognormal(k, 0.5, (40,), dt)),
    ("weibull_min", lambda r, k, dt: r.weibull_min(k, 1.0, 2.0, (40,), dt)),
]


@pytest.mark.parametrize("name,f", _CONTINUOUS, ids=[c[0] for c in _CONTINUOUS])
def test_continuous_samplers(jax, name, f):
    k = np.asarray(jax.random.PRNGKey(13))
    # Cauchy's tan near +-pi/2 magnifies one-ulp input differences.
    ulps = 64 if name == "cauchy" else 8
    # (wald's float16 chain: XLA keeps float32 intermediates, a 1% difference once in 40)
    for dt in ("float32",) if name == "wald" else ("float32", "float16"):
        want = f(jax.random, k, dt)
        _close(f(er, k, dt), want, ulps)
        if dt == "float32":  # (jit of every sampler once is enough)
            _close(ember.jit(lambda k, dt=dt: f(er, k, dt))(k), want, ulps)


def test_normal_float16_bfloat16_and_complex(jax):
    jr = jax.random
    k = np.asarray(jr.PRNGKey(2))
    _close(er.normal(k, (64,), "float16"), jr.normal(k, (64,), "float16"))
    _close(er.normal(k, (64,), "bfloat16"), jr.normal(k, (64,), "bfloat16"))
    _close(er.normal(k, (8,), "complex64"), jr.normal(k, (8,), "complex64"))


def test_geometric(jax):
    k = np.asarray(jax.random.PRNGKey(4))
    _same(er.geometric(k, 0.3, (40,)), jax.random.geometric(k, 0.3, (40,)))


def test_multivariate_normal(jax):
    pytest.importorskip("ember.numpy.linalg")
    k = np.asarray(jax.random.PRNGKey(1))
    mean = np.array([1.0, -1.0], np.float32)
    cov = np.array([[2.0, 0.5], [0.5, 1.0]], np.float32)
    _close(er.multivariate_normal(k, mean, cov, (3,)),
           jax.random.multivariate_normal(k, mean, cov, (3,)), 16)


def test_vmap_over_keys(jax):
    jr = jax.random
    ks = np.asarray(jr.split(jr.PRNGKey(0), 4))
    for f in (lambda r, k: r.uniform(k, (3,)), lambda r, k: r.split(k),
              lambda r, k: r.randint(k, (3,), 0, 7), lambda r, k: r.permutation(k, 6),
              lambda r, k: r.fold_in(k, 3), lambda r, k: r.bernoulli(k, 0.5, (5,))):
        want = jax.vmap(lambda k, f=f: f(jr, k))(ks)
        _same(ember.vmap(lambda k, f=f: f(er, k))(ks), want)
        _same(ember.jit(ember.vmap(lambda k, f=f: f(er, k)))(ks), want)
    _close(ember.vmap(lambda k: er.normal(k, (3,)))(ks),
           jax.vmap(lambda k: jr.normal(k, (3,)))(ks))


def test_grad_through_reparameterized_samples(jax):
    jr = jax.random
    k = np.asarray(jr.PRNGKey(0))

    def loss(r, mu, sigma):
        return ((mu + sigma * r.normal(k, (16,))) ** 2).mean()

    got = ember.grad(lambda m, s: loss(er, m, s), argnums=(0, 1))(0.5, 2.0)
    want = jax.grad(lambda m, s: loss(jr, m, s), argnums=(0, 1))(0.5, 2.0)
    for g, w in zip(got, want):
        _close(g, w, 16)
    # Derivatives of the bounds of uniform: d/dmax of u * (max - min) + min is u.
    u = er.uniform(k, (4,))
    g = ember.grad(lambda hi: er.uniform(k, (4,), minval=0.0, maxval=hi).sum())(1.0)
    np.testing.assert_allclose(g, np.asarray(u).sum(), rtol=1e-6)


# ------------------------------------------------ gamma family, counting samplers (JAX 0.10.2)

_GAMMA_FAMILY = [
    ("gamma", lambda r, k: r.gamma(k, np.array([0.05, 0.3, 1.0, 2.5, 7.0], np.float32))),
    ("loggamma", lambda r, k: r.loggamma(k, np.array([0.05, 0.3, 1.0, 2.5], np.float32))),
    ("beta", lambda r, k: r.beta(k, 2.0, np.array([0.5, 3.0], np.float32), (3, 2))),
    ("dirichlet", lambda r, k: r.dirichlet(k, np.array([1.0, 2.0, 0.5], np.float32), (2,))),
    ("chisquare", lambda r, k: r.chisquare(k, 3.0, (4,))),
    ("t", lambda r, k: r.t(k, 5.0, (4,))),
    ("f", lambda r, k: r.f(k, 3.0, 7.0, (4,))),
    ("generalized_normal", lambda r, k: r.generalized_normal(k, 1.5, (4,))),
    ("ball", lambda r, k: r.ball(k, 3, 1.5, (2,))),
    ("orthogonal", lambda r, k: r.orthogonal(k, 3, (2,))),
    ("orthogonal_wide", lambda r, k: r.orthogonal(k, 2, m=4)),
]


def test_gamma_family_vs_jax(jax):
    k = np.asarray(jax.random.PRNGKey(21))
    # (one JAX compilation for all the references: JAX's compile time dominates this test)
    wants = jax.jit(lambda k: [f(jax.random, k) for _, f in _GAMMA_FAMILY])(k)
    for (_, f), want in zip(_GAMMA_FAMILY, wants):
        _close(f(er, k), want, 64)
    gamma_f = _GAMMA_FAMILY[0][1]
    _close(ember.jit(lambda k: gamma_f(er, k))(k), wants[0], 64)


def test_counting_samplers_equal_jax(jax):
    jr = jax.random
    k = np.asarray(jr.PRNGKey(8))
    lam = np.array([0.0, 0.5, 3.0, 9.9, 10.0, 50.0, 1000.0], np.float32)
    n = np.array([5, 20, 100, 1000, np.nan, -1, np.inf], np.float32)
    p = np.array([0.3, 0.7, 0.5, 0.2, 0.5, 0.5, 0.5], np.float32)
    pm = np.array([[0.2, 0.3, 0.5], [0.6, 0.0, 0.4]], np.float32)
    cases = [lambda r: r.poisson(k, lam), lambda r: r.poisson(k, 4.0, (6,), "int16"),
             lambda r: r.binomial(k, n, p), lambda r: r.binomial(k, 30.0, 0.9, (5,)),
             lambda r: r.multinomial(k, np.array([20.0, 50.0], np.float32), pm)]
    wants = jax.jit(lambda: [f(jr) for f in cases])()
    for f, want in zip(cases, wants):
        _same(f(er), want)
    _same(ember.jit(lambda k: er.poisson(k, lam))(k), wants[0])


def _moments_ok(x, mean, var, n_se=5.0):
    # Sample mean and variance within n_se standard errors (fixed seed: deterministic).
    x = np.asarray(x, np.float64)
    m = x.size
    assert abs(x.mean() - mean) < n_se * np.sqrt(var / m), (x.mean(), mean)
    assert abs(x.var() - var) < n_se * var * np.sqrt(2.0 / m) * 2, (x.var(), var)


def test_sampler_moments():
    k = er.key(123)
    m = 4000
    _moments_ok(er.gamma(k, 2.5, (m,)), 2.5, 2.5)
    _moments_ok(er.gamma(k, 0.4, (m,)), 0.4, 0.4)
    _moments_ok(np.exp(er.loggamma(k, 0.4, (m,))), 0.4, 0.4)
    _moments_ok(er.beta(k, 2.0, 3.0, (m,)), 0.4, 6 / (25 * 6))
    _moments_ok(er.chisquare(k, 4.0, (m,)), 4.0, 8.0)
    _moments_ok(er.t(k, 8.0, (m,)), 0.0, 8 / 6)
    _moments_ok(er.f(k, 5.0, 12.0, (m,)), 12 / 10, 2 * 144 * 15 / (5 * 100 * 8))
    _moments_ok(er.poisson(k, 3.0, (m,)), 3.0, 3.0)
    _moments_ok(er.poisson(k, 40.0, (m,)), 40.0, 40.0)
    _moments_ok(er.binomial(k, 8.0, 0.3, (m,)), 2.4, 1.68)
    _moments_ok(er.binomial(k, 200.0, 0.4, (m,)), 80.0, 48.0)
    d = np.asarray(er.dirichlet(k, np.array([1.0, 2.0, 3.0], np.float32), (m,)))
    np.testing.assert_allclose(d.sum(-1), 1.0, rtol=1e-5)
    _moments_ok(d[:, 2], 0.5, 0.5 * 0.5 / 7)
    # generalized normal with p=2: N(0, 1/2); the L2 ball in 3-d: E|x|^2 = 3/5
    _moments_ok(er.generalized_normal(k, 2.0, (m,)), 0.0, 0.5)
    b = np.asarray(er.ball(k, 3, 2.0, (m,)))
    assert np.all(np.linalg.norm(b, axis=-1) <= 1 + 1e-6)
    assert abs(np.mean(np.sum(b * b, -1)) - 0.6) < 0.02
    c = np.asarray(er.multinomial(k, 30.0, np.array([0.2, 0.8], np.float32), shape=(m, 2)))
    assert np.all(c.sum(-1) == 30)
    _moments_ok(c[:, 0], 6.0, 4.8)
    q = np.asarray(er.orthogonal(k, 4, (3,)))
    np.testing.assert_allclose(q @ np.swapaxes(q, -1, -2), np.broadcast_to(np.eye(4), q.shape),
                               atol=1e-5)
    qc = np.asarray(er.orthogonal(k, 3, (), "complex64"))
    np.testing.assert_allclose(qc @ qc.conj().T, np.eye(3), atol=1e-5)


def test_gamma_reparameterization_gradient(jax):
    jr = jax.random
    k = np.asarray(jr.PRNGKey(3))
    a = np.array([0.3, 1.0, 2.5, 9.0], np.float32)
    x = np.array([0.1, 0.7, 1.7, 11.0], np.float32)
    from ember.random.gamma import random_gamma_grad
    _close(random_gamma_grad(a, x), jax.lax.random_gamma_grad(a, x), 256)
    got = ember.grad(lambda a: er.gamma(k, a).sum() + er.loggamma(k, a).sum())(a)
    want = jax.grad(lambda a: jr.gamma(k, a).sum() + jr.loggamma(k, a).sum())(a)
    np.testing.assert_allclose(got, want, rtol=1e-3)


def test_new_sampler_errors():
    k = er.PRNGKey(0)
    with pytest.raises(ValueError, match="must be a float dtype"):
        er.gamma(k, 1.0, (2,), np.int32)
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        er.gamma(k, np.ones(3, np.float32), (2,))
    with pytest.raises(ValueError, match="broadcast-compatible"):
        er.gamma(k, np.ones(2, np.float32), (3, 1))
    with pytest.raises(ValueError, match="dirichlet requires alpha.ndim >= 1"):
        er.dirichlet(k, 1.0)
    with pytest.raises(ValueError, match="must be an int dtype"):
        er.poisson(k, 1.0, (2,), np.float32)
    with pytest.raises(ValueError, match="must be a float dtype"):
        er.binomial(k, 3.0, 0.5, (2,), np.int32)
    with pytest.raises(TypeError, match="binomial requires ndarray or scalar"):
        er.binomial(k, [3.0], 0.5)
    with pytest.raises(ValueError, match="split accepts a single key|gamma accepts a single"):
        er.gamma(er.split(k), 1.0)
