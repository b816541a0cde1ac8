"""ember.random bit for bit against jax.random where a sweep (December 2026) found differences.

Each case is checked twice: against fixed raw bits recorded from JAX 0.10.2 (x64 off, CPU),
so the test means something without JAX installed, and against JAX itself where it is
installed (the ``jax`` fixture skips that part otherwise). Samplers whose float32 results go
through a transcendental function (``log``, ``erf_inv``, ...) are not here: ember's own
polynomial approximations round differently from XLA's in the last bit (see
tests/test_random.py, which compares those to a few ulps).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ember
from ember import random as er

BF16 = ml_dtypes.bfloat16


def _raw(x):
    x = np.ascontiguousarray(np.asarray(x))
    return x.dtype, x.shape, x.view(np.uint16 if x.dtype.itemsize == 2 else np.uint32).ravel()


def _same_bits(got, want):
    gd, gs, gb = _raw(got)
    wd, ws, wb = _raw(want)
    assert (gd, gs) == (wd, ws)
    np.testing.assert_array_equal(gb, wb)


def _half_fma_host() -> bool:
    """Whether this CPU has float16 arithmetic (AVX512-FP16): XLA then contracts a float16
    ``a * b + c`` into one FMA (one rounding), as it does float32 everywhere, where ember
    rounds after each operation; on other hosts XLA computes float16 in float32 and rounds
    after each operation too."""
    from ember.backends.cpu import llvm_support
    return llvm_support.host_has_feature("avx512fp16")


def _one_rounding_apart(got, want):
    """Equal up to one rounding of the largest intermediate, ``u * 5`` < 8 for
    ``uniform(.., -2.0, 3.0)`` (an ulp there is 2**-8; after the shift by -2 that can be
    many ulps of a result near 0)."""
    gd, gs, _ = _raw(got)
    wd, ws, _ = _raw(want)
    assert (gd, gs) == (wd, ws)
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=0, atol=2.0 ** -8)


# (name, sampler(random module, key), raw bits of JAX 0.10.2's result for key(0))
_CASES = [
    # float16 bounds: the scale rounds after each operation (ember rounded once via float32)
    ("uniform_f16_bounds", lambda r, k: r.uniform(k, (6,), np.float16, -2.0, 3.0),
     np.float16, [46888, 47996, 48872, 15648, 47796, 11008]),
    ("laplace_f16", lambda r, k: r.laplace(k, (6,), np.float16),
     np.float16, [14236, 15058, 16491, 46594, 14879, 12862]),
    ("normal_f16", lambda r, k: r.normal(k, (6,), np.float16),
     np.float16, [47078, 47709, 48741, 13938, 47575, 45867]),
    # bfloat16 c = (1/3) / sqrt(d) in Marsaglia-Tsang: XLA divides (no rsqrt rewrite)
    ("gamma_bf16", lambda r, k: r.gamma(k, np.array([0.5, 1.0, 3.0, 30.0]), (4,), BF16),
     BF16, [15595, 16334, 16423, 16869]),
    ("beta_bf16", lambda r, k: r.beta(k, 0.5, 2.0, (4,), BF16),
     BF16, [16087, 15360, 15531, 16007]),
    ("t_bf16", lambda r, k: r.t(k, 4.0, (4,), BF16),
     BF16, [16491, 48807, 16278, 16149]),
]


@pytest.mark.parametrize("name,fn,dtype,bits", _CASES, ids=[c[0] for c in _CASES])
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_recorded_bits(name, fn, dtype, bits, mode):
    want = np.array(bits, np.uint16).view(dtype)
    for k in (er.key(0), er.PRNGKey(0)):
        got = fn(er, k) if mode == "eager" else ember.jit(lambda k: fn(er, k))(k)
        _same_bits(got, want)


@pytest.mark.parametrize("name,fn,dtype,bits", _CASES, ids=[c[0] for c in _CASES])
def test_against_jax(jax, name, fn, dtype, bits):
    jr = jax.random
    # (a scale and shift of float16 values: XLA's FMA on float16 hosts, see _half_fma_host;
    # the recorded bits are those of a host without)
    same = _one_rounding_apart if name == "uniform_f16_bounds" and _half_fma_host() \
        else _same_bits
    same(fn(jr, jr.key(0)), np.array(bits, np.uint16).view(dtype))
    ks, eks = jr.split(jr.key(3), 3), er.split(er.key(3), 3)
    same(ember.vmap(lambda k: fn(er, k))(eks), jax.vmap(lambda k: fn(jr, k))(ks))
    same(ember.jit(lambda k: fn(er, k))(er.PRNGKey(5)), fn(jr, jr.PRNGKey(5)))


_DIVISIONS = {
    "sqrt": lambda lax, a, b: a / lax.sqrt(b), "rsqrt": lambda lax, a, b: a / lax.rsqrt(b),
    "exp": lambda lax, a, b: a / lax.exp(b), "exp_exp": lambda lax, a, b: lax.exp(a) / lax.exp(b),
    "pow": lambda lax, a, b: a / lax.pow(b, a)}


@pytest.mark.parametrize("name", sorted(_DIVISIONS))
def test_bfloat16_division_by_a_function_divides(name):
    # XLA computes bfloat16 operations in float32 between conversions, so its simplifier's
    # a / f(b) -> a * g(b) does not apply: jit gives the rounded quotient of the rounded
    # f(b), as eager operations do.
    f = _DIVISIONS[name]
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(0.5, 3, 400).astype(BF16) for _ in range(2))
    got = ember.jit(lambda a, b: f(ember.lax, a, b))(a, b)
    _same_bits(got, f(ember.lax, ember.numpy.asarray(a), ember.numpy.asarray(b)))
    # float16 keeps XLA's rewrite (a / sqrt(b) is a * rsqrt(b) there too)
    h = ember.jit(lambda a, b: a / ember.lax.sqrt(b))(a.astype(np.float16), b.astype(np.float16))
    _same_bits(h, a.astype(np.float16) * np.asarray(ember.lax.rsqrt(b.astype(np.float16))))


@pytest.mark.parametrize("name", sorted(_DIVISIONS))
def test_bfloat16_division_by_a_function_against_jax(jax, name):
    f = _DIVISIONS[name]
    rng = np.random.default_rng(1)
    a, b = (rng.uniform(0.5, 3, 400).astype(BF16) for _ in range(2))
    _same_bits(ember.jit(lambda a, b: f(ember.lax, a, b))(a, b),
               jax.jit(lambda a, b: f(jax.lax, a, b))(a, b))
