"""Edge cases where XLA (so JAX) defines the result and ember once differed, found by the
random-program fuzzer against JAX: signed zeros in clamp, top_k's order of signed zeros and
NaNs, reduce_precision's rounding and flushing, modf of infinities, the sign bit of NaNs,
and HLO's elementwise ``bitcast_convert``. Each runs eagerly and under ``jit``."""

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends import get_backend
from ember.backends.cpu.executable import KernelPlan
from ember.compiler.parser import parse_module
from ember.compiler.pipeline import optimize
from tests.backends.cpu.helpers import x64
from tests.bits import assert_same_bits

F32 = np.float32
NEG_NAN = np.array([0xFFC00000], np.uint32).view(F32)[0]


def both(f, *args):
    """``f`` eagerly and under ``jit``."""
    return [np.asarray(f(*args)), np.asarray(ember.jit(f)(*args))]


def test_clamp_orders_negative_zero_below_positive_zero():
    x = jnp.asarray(np.array([-0.0, 0.0, -0.0, 0.0], F32))
    lo = jnp.asarray(np.array([0.0, -0.0, -1.0, -1.0], F32))
    hi = jnp.asarray(np.array([1.0, 1.0, 0.0, -0.0], F32))
    # max(-0, +0) = +0, max(+0, -0) = +0, min(-0, +0) = -0, min(+0, -0) = -0
    for got in both(lax.clamp, lo, x, hi):
        assert_same_bits(got, np.array([0.0, 0.0, -0.0, -0.0], F32))


@pytest.mark.parametrize("dt", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_top_k_follows_the_total_order_of_bits(dt):
    x = np.array([[1.0, NEG_NAN, np.nan, -np.inf, -0.0, 0.0, 2.0, -0.0, 0.0]], F32).astype(dt)
    # +NaN, 2, 1, the two +0s, the two -0s, -inf, -NaN
    want = np.array([[2, 6, 0, 5, 8, 4, 7, 3, 1]], np.int32)
    for k in (3, 9):
        for values, indices in (lax.top_k(x, k), ember.jit(lambda v, k=k: lax.top_k(v, k))(x)):
            np.testing.assert_array_equal(np.asarray(indices), want[:, :k])
            assert_same_bits(np.asarray(values), np.take_along_axis(x, want[:, :k], axis=1))


def test_reduce_precision_rounds_and_flushes_as_xla():
    x = np.array([1e-5, -1e-5, 6.2e-5, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, 70000.0, np.nan,
                  NEG_NAN], F32)
    # To float16's range: below its smallest normal (2**-14) is +-0 (no subnormals);
    # 6.2e-5 rounds to 10 mantissa bits; halfway cases round to even; too big is inf.
    want = np.array([0.0, -0.0, float(np.float16(6.2e-5)), 1.0, 1.0 + 2.0**-9, np.inf,
                     np.nan, NEG_NAN], F32)
    for got in both(lambda v: lax.reduce_precision(v, exponent_bits=5, mantissa_bits=10), x):
        assert_same_bits(got, want)
    # No mantissa bits: a tie rounds to the neighbour whose (biased) exponent is even:
    # 1.5 * 2**-30 (exponent 97) up to 2**-29, 1.5 * 2**-31 (exponent 96) down to 2**-31,
    # which is below the smallest normal number of 6 exponent bits (2**-30): zero.
    y = np.array([1.5 * 2.0**-30, 1.5 * 2.0**-31, 1.5], F32)
    for got in both(lambda v: lax.reduce_precision(v, exponent_bits=6, mantissa_bits=0), y):
        assert_same_bits(got, np.array([2.0**-29, 0.0, 2.0], F32))
    # float16 subnormals round on their own bits: 2**-24 has no bit left at 7 mantissa bits.
    h = np.array([2.0**-24, 3 * 2.0**-17], np.float16)
    for got in both(lambda v: lax.reduce_precision(v, exponent_bits=8, mantissa_bits=7), h):
        assert_same_bits(got, np.array([0.0, 3 * 2.0**-17], np.float16))


def test_modf_of_infinities_and_negative_integers():
    x = np.array([np.inf, -np.inf, -2.0, 2.5], F32)
    for frac, whole in (jnp.modf(x), ember.jit(jnp.modf)(x)):
        frac = np.asarray(frac)
        assert np.isnan(frac[:2]).all()  # inf - trunc(inf), as in JAX
        assert_same_bits(frac[2:], np.array([0.0, 0.5], F32))  # (+0 for -2.0)
        np.testing.assert_array_equal(np.asarray(whole), [np.inf, -np.inf, -2.0, 2.0])


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
def test_power_of_one_half_has_c_special_values(dt):
    # NumPy's power takes sqrt for an exponent of 1/2 (-0 and NaN below); C's pow and XLA
    # give +0 and +inf, eagerly and under jit alike.
    x = np.array([-0.0, 0.0, -np.inf, np.inf, 4.0], F32).astype(dt)
    want = np.array([0.0, 0.0, np.inf, np.inf, 2.0], F32).astype(dt)
    with x64(dt == np.float64):
        for got in (*both(lambda v: jnp.asarray(v) ** 0.5, x),
                    *both(lambda v: jnp.power(v, jnp.full_like(v, 0.5)), x)):
            assert_same_bits(np.asarray(got), want)
        assert all(np.isnan(np.asarray(g, F32)).all()
                   for g in both(lambda v: jnp.asarray(v) ** 0.5, -np.ones(3, dt)))


@pytest.mark.parametrize("dt", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_signbit_and_copysign_see_the_sign_of_nans(dt):
    x = np.array([NEG_NAN, np.nan, -0.0, 0.0, -1.0, 1.0], F32).astype(dt)
    want = np.array([True, False, True, False, True, False])
    for got in both(jnp.signbit, x):
        np.testing.assert_array_equal(got, want)
    ones = np.ones(6, dt)
    for got in both(jnp.copysign, ones, x):
        np.testing.assert_array_equal(got.astype(F32), np.where(want, -1.0, 1.0))


def test_bitcast_convert_is_an_elementwise_op_with_a_native_kernel():
    x = np.array([1.0, -0.0, np.nan, -np.inf, 1e-45], F32)
    f = lambda v: lax.bitcast_convert_type(v, jnp.int32) + 1  # noqa: E731
    for got in both(f, x):
        np.testing.assert_array_equal(got, x.view(np.int32) + 1)
    text = ember.jit(f).lower(x).as_text()
    assert "bitcast_convert(" in text
    exe = get_backend("cpu").compile(optimize(parse_module(text)))
    assert [type(s) for s in exe.program.steps] == [KernelPlan]  # fused with the add
    np.testing.assert_array_equal(exe.execute([x])[0], x.view(np.int32) + 1)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_native_reduce_precision_has_the_evaluators_bits(dt):
    # The CPU backend's kernels compute it in place (not through the evaluator): every
    # format on random bit patterns (NaNs, infinities and subnormals among them).
    from ember.compiler.eval_elementwise import reduce_precision
    rng = np.random.default_rng(12)
    ut = np.uint32 if dt == np.float32 else np.uint64
    x = np.concatenate([rng.integers(0, np.iinfo(ut).max, 4000, dtype=ut).view(dt),
                        (rng.standard_normal(2000) * 1e3).astype(dt),
                        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65520.0], dt)])
    formats = [(5, 10), (8, 7), (8, 0), (2, 1), (4, 22)] + (
        [(11, 52), (11, 30), (9, 40)] if dt == np.float64 else [])
    with ember.enable_x64(dt == np.float64):
        for e, m in formats:
            f = ember.jit(lambda v, e=e, m=m: lax.reduce_precision(v * 1, e, m))
            steps = f.lower(x).compile()._executable.executable.program.steps
            assert [type(s).__name__ for s in steps] == ["KernelPlan"]  # (native)
            got = np.asarray(f(x))
            want = reduce_precision(x, e, m)
            nan = np.isnan(want)
            np.testing.assert_array_equal(np.isnan(got), nan)
            np.testing.assert_array_equal(got[~nan].view(ut), want[~nan].view(ut))
