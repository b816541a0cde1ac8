"""Large eager calls of composite functions (``jnp.var``, ``ember.nn.softmax``,
``jnp.linalg.norm``...) run as one compiled program, as JAX's jitted functions do
(``ember/numpy/_eager_jit.py``): the results are ``jit``'s on every call."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import nn
from ember.numpy import _eager_jit

rng = np.random.default_rng(21)
BIG = (300, 200)  # 240 KB of float32: compiled
SMALL = (6, 4)


def _erf(x):
    import math
    return np.vectorize(math.erf)(x)


def _data(shape):
    return jnp.asarray(rng.standard_normal(shape).astype(np.float32))


CASES = [
    ("mean", lambda x: jnp.mean(x), lambda x: np.mean(np.asarray(x, np.float64))),
    ("mean axis", lambda x: x.mean(1), lambda x: np.asarray(x, np.float64).mean(1)),
    ("var", lambda x: x.var(), lambda x: np.asarray(x, np.float64).var()),
    ("std ddof", lambda x: jnp.std(x, 0, ddof=1),
     lambda x: np.asarray(x, np.float64).std(0, ddof=1)),
    ("softmax", lambda x: nn.softmax(x, axis=-1),
     lambda x: np.exp(x - np.asarray(x, np.float64).max(-1, keepdims=True))
     / np.exp(x - np.asarray(x, np.float64).max(-1, keepdims=True)).sum(-1, keepdims=True)),
    ("log_softmax", lambda x: nn.log_softmax(x, axis=0),
     lambda x: np.asarray(x, np.float64) - np.log(np.exp(np.asarray(x, np.float64)).sum(0))),
    ("standardize", lambda x: nn.standardize(x, axis=-1),
     lambda x: (np.asarray(x, np.float64) - np.asarray(x, np.float64).mean(-1, keepdims=True))
     / np.sqrt(np.asarray(x, np.float64).var(-1, keepdims=True) + 1e-5)),
    ("norm", lambda x: jnp.linalg.norm(x), lambda x: np.linalg.norm(np.asarray(x, np.float64))),
    ("norm axis", lambda x: jnp.linalg.norm(x, axis=1),
     lambda x: np.linalg.norm(np.asarray(x, np.float64), axis=1)),
    ("allclose", lambda x: jnp.allclose(x, x * 1.0000001), lambda x: True),
    ("softplus", lambda x: nn.softplus(x), lambda x: np.logaddexp(np.asarray(x, np.float64), 0)),
    ("gelu exact", lambda x: nn.gelu(x, approximate=False),
     lambda x: np.asarray(x, np.float64) * 0.5 * (1 + _erf(np.asarray(x, np.float64)
                                                         / np.sqrt(2)))),
    ("leaky_relu", lambda x: nn.leaky_relu(x, 0.2),
     lambda x: np.where(x > 0, x, 0.2 * np.asarray(x, np.float64))),
    ("logsumexp", lambda x: nn.logsumexp(x, axis=1, keepdims=True),
     lambda x: np.log(np.exp(np.asarray(x, np.float64)).sum(1, keepdims=True))),
    ("glu", lambda x: nn.glu(x, axis=1),
     lambda x: np.asarray(x, np.float64)[:, :x.shape[1] // 2]
     / (1 + np.exp(-np.asarray(x, np.float64)[:, x.shape[1] // 2:]))),
]


@pytest.mark.parametrize("name, fn, ref", CASES, ids=[c[0] for c in CASES])
def test_large_eager_calls_give_jits_results(name, fn, ref):
    x = _data(BIG)
    want = np.asarray(ember.jit(fn)(x))
    for _ in range(3):  # (the first call too, and the calls after it)
        got = np.asarray(fn(x))
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, ref(np.asarray(x)), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name, fn, ref", CASES, ids=[c[0] for c in CASES])
def test_small_eager_calls_stay_correct(name, fn, ref):
    x = _data(SMALL)
    first = np.asarray(fn(x))
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(fn(x)), first)
    np.testing.assert_allclose(first, ref(np.asarray(x)), rtol=2e-5, atol=2e-6)


def test_large_calls_compile_and_small_ones_do_not(monkeypatch):
    calls = []
    real = ember.api.jit

    def spy(fn, **kw):
        calls.append(kw.get("static_argnames"))
        return real(fn, **kw)
    monkeypatch.setattr(ember.api, "jit", spy)

    @_eager_jit.jit_when_large("axis")
    def spread(x, axis=None):
        return x.max(axis) - x.min(axis)
    small = _data(SMALL)
    np.testing.assert_array_equal(np.asarray(spread(small, axis=0)),
                                  np.asarray(small).max(0) - np.asarray(small).min(0))
    assert calls == []
    x = _data(BIG)
    got = spread(x, axis=0)
    assert calls == [("axis",)]
    np.testing.assert_array_equal(np.asarray(got), np.asarray(x).max(0) - np.asarray(x).min(0))
    spread(x, 1)  # (positional static: the same jitted function)
    assert len(calls) == 1


def test_traced_calls_inline_and_unhashable_statics_run_eagerly():
    x = _data(BIG)
    jaxpr = ember.make_jaxpr(lambda x: jnp.var(x, axis=0))(x)
    assert not any("jit" in str(e.primitive) for e in jaxpr.jaxpr.eqns)
    got = jnp.var(x, axis=[0, 1])  # (a list of axes: not hashable, so not compiled)
    np.testing.assert_allclose(np.asarray(got), np.asarray(x, np.float64).var(), rtol=1e-5)


def test_grad_through_an_eagerly_compiled_function():
    x = _data(BIG)
    g = ember.grad(lambda x: jnp.std(x))(x)
    x64 = np.asarray(x, np.float64)
    want = (x64 - x64.mean()) / (x64.size * x64.std())
    np.testing.assert_allclose(np.asarray(g), want, rtol=1e-4, atol=1e-8)


@pytest.mark.parametrize("name, sample", [
    ("normal", lambda k, s: ember.random.normal(k, s)),
    ("uniform", lambda k, s: ember.random.uniform(k, s, minval=-1.0, maxval=2.0)),
    ("bernoulli", lambda k, s: ember.random.bernoulli(k, 0.3, s)),
    ("randint", lambda k, s: ember.random.randint(k, s, 0, 10)),
    ("normal, list shape", lambda k, s: ember.random.normal(k, list(s))),
])
def test_large_eager_samples_are_jits(name, sample):
    # (a sampler's shape makes its call large: compiled, with jit's bits, the first call too)
    key = ember.random.PRNGKey(3)
    for shape in ((200, 300), (5,)):
        want = np.asarray(ember.jit(lambda k, shape=shape: sample(k, shape))(key))
        for _ in range(2):
            np.testing.assert_array_equal(np.asarray(sample(key, shape)), want)
    moments = {"normal": (0.0, 1.0), "uniform": (0.5, 3 / np.sqrt(12)),
               "bernoulli": (0.3, np.sqrt(0.21)), "randint": (4.5, np.sqrt(99 / 12)),
               "normal, list shape": (0.0, 1.0)}[name]
    big = np.asarray(sample(key, (200, 300)), np.float64)
    assert abs(big.mean() - moments[0]) < 0.05 and abs(big.std() - moments[1]) < 0.05
