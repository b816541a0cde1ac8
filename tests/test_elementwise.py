"""Targeted tests of elementwise lax primitives and ufuncs: special values, integer
semantics, promotion, special functions and bad-input errors (references: NumPy, math)."""

import math
import warnings

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from tests.backends.cpu.helpers import x64

f32 = np.float32


def A(x, dtype=None):
    return jnp.asarray(np.asarray(x, dtype=dtype))


def npa(x):
    return np.asarray(x)


# ---------------------------------------------------------------- NaN / inf semantics


def test_maximum_minimum_propagate_nan_fmax_ignores_it():
    x = A([np.nan, 1.0, np.nan, -np.inf], f32)
    y = A([0.0, np.nan, np.nan, 2.0], f32)
    for fn, ref in ((jnp.maximum, np.maximum), (jnp.minimum, np.minimum), (jnp.fmax, np.fmax),
                    (jnp.fmin, np.fmin)):
        np.testing.assert_array_equal(npa(fn(x, y)), ref(npa(x), npa(y)))


def test_float_classification_with_specials():
    v = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.0], f32)
    x = A(v)
    for fn, ref in ((jnp.isnan, np.isnan), (jnp.isinf, np.isinf), (jnp.isfinite, np.isfinite),
                    (jnp.isposinf, np.isposinf), (jnp.isneginf, np.isneginf)):
        np.testing.assert_array_equal(npa(fn(x)), ref(v))
    nonan = v[1:]
    np.testing.assert_array_equal(npa(jnp.signbit(A(nonan))), np.signbit(nonan))
    np.testing.assert_array_equal(npa(jnp.copysign(1.0, A(nonan))), np.copysign(1.0, nonan))
    np.testing.assert_array_equal(npa(lax.is_finite(x)), np.isfinite(v))


@pytest.mark.parametrize("backend", [None, "cpu", "interpreter"])
def test_float_to_64_bit_integers_saturates(backend):
    # float(2**63 - 1) is 2**63: clipping to it in floats and casting gave INT64_MIN for inf.
    v = np.array([np.nan, np.inf, -np.inf, 1e19, -1e19, 9.2e18, -3.7, 2.0**64], np.float64)
    i64, u64 = np.iinfo(np.int64), np.iinfo(np.uint64)
    want = {np.int64: [0, i64.max, i64.min, i64.max, i64.min, 9_200_000_000_000_000_000, -3,
                       i64.max],
            np.uint64: [0, u64.max, 0, 10**19, 0, 9_200_000_000_000_000_000, 0, u64.max]}
    previous = ember.config.read("jax_enable_x64")
    ember.config.update("jax_enable_x64", True)
    try:
        for dt, expected in want.items():
            fn = lambda x, dt=dt: x.astype(dt)  # noqa: E731
            if backend is not None:
                fn = ember.jit(fn, backend=backend)
            got = npa(fn(A(v)))
            assert got.dtype == dt
            np.testing.assert_array_equal(got, np.array(expected, dt))
    finally:
        ember.config.update("jax_enable_x64", previous)


@pytest.mark.parametrize("backend", [None, "cpu", "interpreter"])
def test_complex_from_infinite_and_signed_zero_parts(backend):
    # x + 1j * y would turn complex(1, inf) into nan + inf j (1j * inf is nan + inf j).
    x = np.array([1, np.inf, -np.inf, np.nan, -0.0, 0.0], np.float32)
    y = np.array([np.inf, 2, -np.inf, 1, -0.0, -np.inf], np.float32)
    fn = lax.complex if backend is None else ember.jit(lax.complex, backend=backend)
    z = npa(fn(A(x), A(y)))
    assert z.dtype == np.complex64
    np.testing.assert_array_equal(z.real, x)
    np.testing.assert_array_equal(z.imag, y)
    np.testing.assert_array_equal(np.signbit(z.real), np.signbit(x))
    np.testing.assert_array_equal(np.signbit(z.imag), np.signbit(y))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, jnp.bfloat16])
@pytest.mark.parametrize("backend", [None, "cpu", "interpreter"])
def test_sign_keeps_the_sign_of_zero(dtype, backend):
    # XLA (and so JAX, eager or jitted): sign(-0.0) is -0.0; NumPy's sign gives +0.0.
    v = np.array([-0.0, 0.0, -3.5, 2.0, np.inf, -np.inf], dtype)
    fn = jnp.sign if backend is None else ember.jit(jnp.sign, backend=backend)
    got = npa(fn(A(v))).astype(np.float64)
    np.testing.assert_array_equal(got, [0, 0, -1, 1, 1, -1])
    np.testing.assert_array_equal(np.signbit(got), [True, False, True, False, False, True])
    assert np.isnan(npa(fn(A(np.array([np.nan], dtype)))).astype(np.float64)).all()


def test_special_values_of_math_functions():
    v = np.array([np.inf, -np.inf, np.nan, 0.0, -1.0], f32)
    with np.errstate(all="ignore"):
        for fn, ref in ((jnp.exp, np.exp), (jnp.log, np.log), (jnp.sqrt, np.sqrt),
                        (jnp.tanh, np.tanh), (jnp.log1p, np.log1p), (jnp.expm1, np.expm1)):
            # (Infinities, NaN and zeros exactly; exp(-1) may round differently from NumPy's.)
            np.testing.assert_allclose(npa(fn(A(v))), ref(v), rtol=2e-7, atol=0)
        a, b = np.array([np.inf, -np.inf, 1.0, np.nan], f32), np.array([np.inf, -np.inf, 2.0, 1.0],
                                                                       f32)
        np.testing.assert_allclose(npa(jnp.logaddexp(A(a), A(b))), np.logaddexp(a, b),
                                   rtol=1e-6)
        np.testing.assert_array_equal(npa(jnp.hypot(A(a), A(b))), np.hypot(a, b))


def test_divide_by_zero_float_and_int():
    x, y = np.array([1.0, -1.0, 0.0], f32), np.zeros(3, f32)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(npa(jnp.true_divide(A(x), A(y))), x / y)
        np.testing.assert_array_equal(npa(jnp.floor_divide(A(x), A(y))), np.floor_divide(x, y))
        np.testing.assert_array_equal(npa(jnp.remainder(A(x), A(y))), np.remainder(x, y))
    xi = A([7, -7, 0], np.int32)
    # Integer division by zero must neither crash nor warn; results are XLA's (not NumPy's).
    with np.errstate(all="raise"):
        for fn in (jnp.floor_divide, jnp.remainder, jnp.fmod, lax.div, lax.rem):
            out = fn(xi, A([0, 0, 0], np.int32))
            assert out.shape == (3,) and out.dtype == np.int32
    np.testing.assert_array_equal(npa(lax.div(xi, A([0, 0, 0], np.int32))), [-1, -1, -1])
    np.testing.assert_array_equal(npa(lax.rem(xi, A([0, 0, 0], np.int32))), [7, -7, 0])


# ---------------------------------------------------------------- integer semantics


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8])
def test_integer_floor_divide_remainder_vs_numpy(dtype):
    lo = 0 if np.dtype(dtype).kind == "u" else -9
    vals = np.arange(lo, 10)
    x, y = np.meshgrid(vals, vals[vals != 0])
    x, y = x.ravel().astype(dtype), y.ravel().astype(dtype)
    np.testing.assert_array_equal(npa(jnp.floor_divide(A(x), A(y))), np.floor_divide(x, y))
    np.testing.assert_array_equal(npa(jnp.remainder(A(x), A(y))), np.remainder(x, y))
    np.testing.assert_array_equal(npa(jnp.fmod(A(x), A(y))), np.fmod(x, y))
    q, r = jnp.divmod(A(x), A(y))
    np.testing.assert_array_equal(npa(q), x // y)
    np.testing.assert_array_equal(npa(r), x % y)
    np.testing.assert_array_equal(npa(A(x) // A(y)), x // y)
    np.testing.assert_array_equal(npa(A(x) % A(y)), x % y)


def test_float_floor_divide_remainder_negative_operands():
    x = np.array([-7.5, 7.5, -7.5, 7.5, 6.0, -6.0], f32)
    y = np.array([2.0, -2.0, -2.0, 2.0, -3.0, 3.0], f32)
    np.testing.assert_array_equal(npa(jnp.floor_divide(A(x), A(y))), np.floor_divide(x, y))
    np.testing.assert_array_equal(npa(jnp.remainder(A(x), A(y))), np.remainder(x, y))


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8,
                                   np.uint32, np.uint64])
def test_eager_integer_div_rem_match_a_python_loop(dtype, x64):
    # C semantics, as XLA: truncation toward zero, x / 0 == -1, x % 0 == x, and
    # INT_MIN / -1 wraps to INT_MIN; against Python integers, element by element, with
    # array and scalar divisors.
    info = np.iinfo(dtype)
    rng = np.random.default_rng(3)
    x = rng.integers(info.min, info.max, 300, dtype=dtype)
    x[:6] = [info.min, info.max, 0, 1, info.min + 1, 5]
    divisors = [rng.integers(info.min, info.max, 300, dtype=dtype), np.asarray(7, dtype),
                np.asarray(0, dtype), np.asarray(info.max, dtype)]
    divisors[0][:8] = [0, 1, 2, info.max, info.min, 3, 0, 7]
    if info.min:
        divisors[0][8] = -1
        divisors.append(np.asarray(-1, dtype))

    def wrap(v):
        return (v - info.min) % (1 << 8 * np.dtype(dtype).itemsize) + info.min

    for y in divisors:
        ys = np.broadcast_to(y, x.shape)
        want_q = [wrap(-1) if int(b) == 0 else wrap(int(a) // int(b) if (int(a) < 0) == (int(b) < 0)
                                              else -(abs(int(a)) // abs(int(b))))
                  for a, b in zip(x, ys)]
        want_r = [int(a) if int(b) == 0 else int(a) - int(b) * wrap(
                  int(a) // int(b) if (int(a) < 0) == (int(b) < 0)
                  else -(abs(int(a)) // abs(int(b)))) for a, b in zip(x, ys)]
        q, r = lax.div(A(x), A(y)), lax.rem(A(x), A(y))
        assert q.dtype == dtype and r.dtype == dtype
        np.testing.assert_array_equal(npa(q).astype(object), np.array(want_q, object))
        np.testing.assert_array_equal(npa(r).astype(object),
                                      np.array([wrap(v) for v in want_r], object))


@pytest.mark.parametrize("src", [np.float16, "bfloat16", np.float32, np.float64])
def test_eager_float_to_integer_casts_saturate_like_a_python_loop(src, x64):
    # NaN -> 0, truncation toward zero, values past either end -> that end.
    import math

    from ember import dtypes
    src = dtypes.bfloat16 if src == "bfloat16" else src
    specials = [0.0, -0.0, np.nan, np.inf, -np.inf, 0.5, -0.5, -0.99, -1.0, 127.9, 128.0,
                -128.5, -129.0, 255.5, 256.0, 32767.5, 32768.0, 65504.0, 65536.0,
                2147483520.0, 2147483648.0, -2147483904.0, 4294967296.0, 9.3e18, -9.3e18,
                1.9e19, 1e30]
    rng = np.random.default_rng(4)
    with np.errstate(over="ignore"):
        v = np.concatenate([specials, rng.standard_normal(300) * 10.0 ** rng.integers(
            -2, 20, 300)]).astype(src)
    for dst in (np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.uint64):
        info = np.iinfo(dst)
        want = [0 if math.isnan(f) else info.max if f >= info.max + 1 else
                info.min if f < info.min else math.trunc(f)
                for f in v.astype(np.float64).tolist()]
        got = lax.convert_element_type(A(v), dst)
        assert got.dtype == dst
        np.testing.assert_array_equal(npa(got).astype(object), np.array(want, object))


def test_lax_div_rem_truncate():
    x, y = A([-7, 7, -7, 7], np.int32), A([2, 2, -2, -2], np.int32)
    np.testing.assert_array_equal(npa(lax.div(x, y)), [-3, 3, 3, -3])
    np.testing.assert_array_equal(npa(lax.rem(x, y)), [-1, 1, -1, 1])


def test_integer_power():
    x = np.array([-3, -2, -1, 0, 1, 2, 3], np.int32)
    for p in range(0, 6):
        np.testing.assert_array_equal(npa(jnp.power(A(x), p)), x ** p)
        np.testing.assert_array_equal(npa(jnp.power(A(x), A(np.full(7, p), np.int32))), x ** p)
    # Negative integer exponents: 1 // x**|y| (JAX gives 0, 1 or -1 instead of raising).
    np.testing.assert_array_equal(npa(jnp.power(A(x), A(np.full(7, -1), np.int32))),
                                  [0, 0, -1, 0, 1, 0, 0])
    # A static negative Python int exponent goes to lax.integer_pow, which (like JAX) rejects
    # integer bases.
    for fn in (lambda: jnp.power(A(x), -2), lambda: A(x) ** -1,
               lambda: lax.integer_pow(A(x), -1), lambda: lax.reciprocal(A(x))):
        with pytest.raises(TypeError, match="Integers cannot be raised to negative powers"):
            fn()
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(npa(lax.integer_pow(A(x, np.float32), -1)),
                                      np.float32(1) / x.astype(np.float32))
    big = np.array([3], np.int32)
    np.testing.assert_array_equal(npa(jnp.power(A(big), A([25], np.int32))), big ** 25)


def test_power_float_int_exponent_and_float_power():
    x = np.array([0.5, 2.0, -3.0], f32)
    np.testing.assert_allclose(npa(jnp.power(A(x), 3)), x ** 3)
    np.testing.assert_allclose(npa(lax.pow(A(x), A([2, -1, 3], np.int32))),
                               [0.25, 0.5, -27.0])
    assert jnp.float_power(A([2], np.int32), 2).dtype == np.float32


def test_shift_edge_cases():
    x = A([1, -8, 127, -128], np.int8)
    big = A([8, 9, 100, -1], np.int8)  # out of range (negative reads as huge unsigned)
    np.testing.assert_array_equal(npa(lax.shift_left(x, big)), [0, 0, 0, 0])
    np.testing.assert_array_equal(npa(lax.shift_right_logical(x, big)), [0, 0, 0, 0])
    np.testing.assert_array_equal(npa(lax.shift_right_arithmetic(x, big)), [0, -1, 0, -1])
    np.testing.assert_array_equal(npa(lax.shift_right_logical(A([-8], np.int8),
                                                              A([1], np.int8))), [124])
    np.testing.assert_array_equal(npa(lax.shift_right_arithmetic(A([-8], np.int8),
                                                                 A([1], np.int8))), [-4])
    np.testing.assert_array_equal(npa(lax.shift_left(A([64], np.int8), A([1], np.int8))),
                                  [-128])
    u = A([200], np.uint8)
    np.testing.assert_array_equal(npa(jnp.right_shift(u, A([1], np.uint8))), [100])
    np.testing.assert_array_equal(npa(jnp.right_shift(A([-8], np.int32), 1)), [-4])
    np.testing.assert_array_equal(npa(jnp.left_shift(A([1], np.int32), A([31], np.int32))),
                                  [np.int32(-2 ** 31)])


def test_population_count_and_clz():
    x = np.array([0, 1, -1, 2 ** 31 - 1, -2 ** 31, 12345], np.int32)
    np.testing.assert_array_equal(npa(lax.population_count(A(x))),
                                  [bin(int(v) % 2 ** 32).count("1") for v in x])
    np.testing.assert_array_equal(npa(lax.clz(A(x))),
                                  [32 - (int(v) % 2 ** 32).bit_length() for v in x])


def _pell_pairs(bits: int) -> list[tuple[int, int]]:
    """Consecutive Pell numbers below 2**bits: the worst case of Euclid's algorithm with the
    nearest remainder (each step divides by about 1 + sqrt(2))."""
    p = [0, 1]
    while 2 * p[-1] + p[-2] < 2 ** bits:
        p.append(2 * p[-1] + p[-2])
    return [(p[i], p[i - 1]) for i in range(len(p) - 8, len(p))]


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32,
                                   np.uint32, np.int64, np.uint64])
def test_gcd_lcm_worst_cases_and_edges_match_numpy(dtype):
    info = np.iinfo(dtype)
    pairs = _pell_pairs(info.bits - (info.min < 0))
    a = [p for p, _ in pairs] + [q for _, q in pairs] + [0, 0, 12, info.max, info.min]
    b = [q for _, q in pairs] + [p for p, _ in pairs] + [5, 0, 18, info.max - 1, 6]
    if info.min < 0:  # negative values and |INT_MIN|, which only fits as unsigned
        a += [-12, info.min, info.min, info.min, -(2 ** (info.bits - 3)) * 3]
        b += [18, info.min, 0, 2 ** (info.bits - 2) + 2, info.min]
    rand = np.random.default_rng(7).integers(info.min, info.max, 300, dtype=dtype,
                                             endpoint=True)
    a, b = np.array(a, dtype), np.array(b, dtype)
    a, b = np.concatenate([a, rand]), np.concatenate([b, rand[::-1] // 3])
    with x64(info.bits == 64), np.errstate(over="ignore"):
        for fn, ref in ((jnp.gcd, np.gcd), (jnp.lcm, np.lcm)):
            np.testing.assert_array_equal(npa(fn(A(a), A(b))), ref(a, b))
            np.testing.assert_array_equal(npa(ember.jit(fn)(a, b)), ref(a, b))


# ---------------------------------------------------------------- promotion


def test_promotion_results():
    i8, u8 = A([1], np.int8), A([1], np.uint8)
    assert (i8 + 2).dtype == np.int8
    assert jnp.add(u8, i8).dtype == np.int16
    out = jnp.add(A([1], np.int32), 1.5)
    assert out.dtype == np.float32 and out.weak_type  # i32 joined with f* is f* (weak)
    assert not jnp.add(A([1], np.int32), A([1.5], f32)).weak_type
    w = jnp.multiply(2, 1.5)
    assert w.dtype == np.float32 and w.weak_type
    assert jnp.sqrt(A([4], np.int32)).dtype == np.float32
    assert jnp.true_divide(A([1], np.int32), A([2], np.int32)).dtype == np.float32
    assert jnp.add(A([1], np.float16), 1.0).dtype == np.float16
    assert jnp.add(A([1], np.float16), A([1], np.int32)).dtype == np.float16
    assert jnp.floor(A([1], np.int8)).dtype == np.int8
    assert jnp.rint(A([1], np.int8)).dtype == np.float32
    assert jnp.reciprocal(A([2], np.int32)).dtype == np.float32
    assert jnp.add(A([True]), A([True])).dtype == np.bool_
    np.testing.assert_array_equal(npa(jnp.add(A([True, False]), A([True, False]))),
                                  [True, False])
    assert jnp.angle(A([1], np.int32)).dtype == np.float32
    assert jnp.where(A([True]), 1, 2.0).dtype == np.float32
    assert jnp.clip(A([1, 5], np.int32), 2.5).dtype == np.float32


def test_weak_types_of_float_results_follow_jax():
    """JAX converts to a strong float here, so weak inputs give strong results."""
    weak_int, weak_float = jnp.asarray(1), jnp.asarray(-1.0)
    for out in (jnp.angle(weak_int), jnp.angle(weak_float), jnp.rint(weak_int),
                jnp.nan_to_num(weak_float), jnp.frexp(weak_int)[0], jnp.frexp(weak_float)[0]):
        assert out.dtype == np.float32 and not out.weak_type
    assert jnp.angle(jnp.broadcast_to(weak_float, (2,))).weak_type  # 1-d floats stay weak
    assert jnp.angle(A(-1.0, np.float16)).dtype == np.float32  # 0-d floats: default float
    assert jnp.angle(2 + 3j).weak_type
    assert jnp.nan_to_num(weak_int).weak_type  # integers are returned unchanged
    assert not jnp.asarray(weak_float, dtype=np.float32).weak_type


def test_ufuncs_trace():
    x = A([1.0, -2.0], f32)
    jaxpr = ember.make_jaxpr(lambda v: jnp.exp(v) + jnp.sin(v))(x)
    text = str(jaxpr)
    assert "exp" in text and "sin" in text and "add" in text


# ---------------------------------------------------------------- special functions


def test_erf_lgamma_against_math():
    v = np.linspace(-4, 4, 41)
    np.testing.assert_allclose(npa(lax.erf(A(v, f32))), [math.erf(f32(t)) for t in v],
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(npa(lax.erfc(A(v, f32))), [math.erfc(f32(t)) for t in v],
                               rtol=1e-6, atol=1e-30)
    p = np.array([0.1, 0.5, 1.0, 2.5, 10.0, 100.0, -0.5, -2.5])
    np.testing.assert_allclose(npa(lax.lgamma(A(p, f32))),
                               [math.log(abs(math.gamma(f32(t)))) for t in p], rtol=1e-6)
    assert np.isinf(npa(lax.lgamma(A([0.0, -1.0, -2.0], f32)))).all()


def test_digamma_against_float64_reference():
    # digamma(1) = -euler_gamma, digamma(1/2) = -euler_gamma - 2 ln 2, recurrence to others.
    g = 0.5772156649015329
    x = np.array([1.0, 0.5, 2.0, 3.5, 10.0, -0.5, -1.5, 1e-3])
    t = float(f32(1e-3))  # series near 0: -1/t - g + zeta(2) t - zeta(3) t^2
    expected = [-g, -g - 2 * math.log(2), 1 - g, -g - 2 * math.log(2) + 2 + 2 / 3 + 0.4,
                -g + sum(1 / k for k in range(1, 10)),
                -g - 2 * math.log(2) + 2, -g - 2 * math.log(2) + 2 + 2 / 3,
                -1 / t - g + math.pi ** 2 / 6 * t - 1.2020569 * t * t]
    np.testing.assert_allclose(npa(lax.digamma(A(x, f32))), expected, rtol=2e-5)
    assert np.isnan(npa(lax.digamma(A([0.0, -1.0, -3.0], f32)))).all()


def test_erf_inv_round_trip():
    y = np.array([-0.999999, -0.9, -0.5, -1e-6, 0.0, 1e-3, 0.3, 0.75, 0.99, 0.99999], np.float64)
    x = npa(lax.erf_inv(A(y, f32))).astype(np.float64)
    np.testing.assert_allclose([math.erf(t) for t in x], y.astype(f32), rtol=3e-6, atol=1e-7)
    out = npa(lax.erf_inv(A([1.0, -1.0, 1.5, np.nan], f32)))
    assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2:]).all()


def test_round_methods_and_decimals():
    x = A([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997], f32)
    np.testing.assert_array_equal(npa(lax.round(x)), [1, 2, 3, -1, -3, 0])
    np.testing.assert_array_equal(npa(lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)),
                                  [0, 2, 2, -0.0, -2, 0])
    v = np.array([1.25, 2.675, -3.14159, 1234.5678], f32)
    for d in (0, 1, 2, -1, -2):
        np.testing.assert_allclose(npa(jnp.round(A(v), d)), np.round(v, d), rtol=1e-6)
    np.testing.assert_array_equal(npa(jnp.round(A([1234, -1250], np.int32), 2)),
                                  [1234, -1250])
    with pytest.raises(NotImplementedError):  # JAX: integers with decimals < 0
        jnp.round(A([1234, -1250], np.int32), -2)
    with pytest.raises(ValueError):  # JAX: bool is not inexact
        jnp.round(A([True]))


def test_integer_remainder_by_zero_is_zero():
    x, z = A([5, -5, 0], np.int32), A([0, 0, 0], np.int32)
    for fn in (jnp.remainder, jnp.mod, jnp.fmod, lambda a, b: jnp.divmod(a, b)[1]):
        np.testing.assert_array_equal(npa(fn(x, z)), [0, 0, 0])
    np.testing.assert_array_equal(npa(lax.rem(x, z)), [5, -5, 0])  # lax keeps the dividend


def test_python_int_operands_wrap_like_jax():
    i8 = A([0, 1, 2], np.int8)
    np.testing.assert_array_equal(npa(i8 + 300), [44, 45, 46])  # 300 -> int8 wraps to 44
    np.testing.assert_array_equal(npa(A([0, 1], np.uint8) + -1), [255, 0])
    np.testing.assert_array_equal(npa(jnp.where(A([True, False]), i8[:2], 300)), [0, 44])
    np.testing.assert_array_equal(npa(jnp.full(2, 300, jnp.int8)), [44, 44])
    np.testing.assert_array_equal(npa(lax.convert_element_type(300, jnp.int8)), 44)
    np.testing.assert_array_equal(npa(i8 ** 300), [0, 1, 0])
    for bad in (2 ** 31, -2 ** 31 - 1):  # outside the default int type: OverflowError
        with pytest.raises(OverflowError):
            i8 + bad
    with pytest.raises(OverflowError):  # explicit construction keeps NumPy's check
        jnp.array(300, jnp.int8)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.int8,
                                   np.uint32, np.float16])
def test_python_scalar_conversions_match_the_general_conversion(dtype):
    # Common casts take NumPy's own cast (lax._plain_cast); every value must come out as the
    # general conversion (float64/int64 source, then convert) gives it: bits and warnings.
    from ember.compiler import eval_elementwise as K
    from ember.lax import elementwise as E
    values = [0.0, -0.0, 1.5, -2.75, 1e-45, 3.4028234663852886e38, 3.4028235677973366e38,
              3.5e38, 1e39, -1e300, float("inf"), -float("inf"), float("nan"), 0, 7, -7,
              2 ** 24, 2 ** 24 + 1, 2 ** 31 - 1, 2 ** 31, -2 ** 31, -2 ** 31 - 1, 2 ** 53 + 1,
              2 ** 63 - 1, -2 ** 63]
    dt = np.dtype(dtype)
    for x in values:
        src = np.asarray(x, np.float64 if type(x) is float else np.int64)
        with np.errstate(all="ignore"):
            want = K.convert(src, dt)
        E._scalar_cache.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("error" if E._plain_cast(x, dt) else "ignore")
            got = np.asarray(E._convert_python_scalar(x, dt, True))
        assert got.dtype == dt
        assert got.tobytes() == np.asarray(want, dt).tobytes(), (x, dt, got, want)


def test_comparisons_of_weak_operands_are_weak():
    assert (jnp.arange(3) < 1.5).weak_type
    assert not (jnp.arange(3) < 1).weak_type
    assert jnp.isnan(jnp.asarray(1.0)).weak_type
    assert not jnp.isinf(jnp.asarray(1.0)).weak_type


def test_frexp_ldexp_modf():
    v = np.array([8.0, 0.3, -5.0, 0.0, 1e-40, 3.4e38, np.inf], f32)
    m, e = jnp.frexp(A(v))
    rm, re = np.frexp(v)
    np.testing.assert_array_equal(npa(m), rm)
    np.testing.assert_array_equal(npa(e), re)
    np.testing.assert_array_equal(npa(jnp.ldexp(m, e)), np.ldexp(rm, re))
    frac, ip = jnp.modf(A([-1.5, 2.25, np.inf, -2.0], f32))
    # (As JAX: x - trunc(x), so NaN for an infinity where NumPy gives 0, +0 for -2.0.)
    np.testing.assert_array_equal(npa(frac), np.array([-0.5, 0.25, np.nan, 0.0], f32))
    assert not np.signbit(npa(frac)[3])
    np.testing.assert_array_equal(npa(ip), np.array([-1.0, 2.0, np.inf, -2.0], f32))


@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16"])
def test_frexp_from_the_bits_matches_numpy_on_every_kind_of_float(dt):
    dt = np.dtype(jnp.bfloat16) if dt == "bfloat16" else np.dtype(dt)
    info = jnp.finfo(dt)
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(500) * 2.0 ** rng.integers(-30, 30, 500),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, 0.5, -2.0, float(info.max),
                         float(info.tiny), float(info.smallest_subnormal),
                         -3 * float(info.smallest_subnormal)]]).astype(dt)
    wide = x.astype(np.float64)
    want_m, want_e = np.frexp(wide)  # (exact in float64 for every narrower float)
    with x64(dt == np.float64):
        for m, e in (jnp.frexp(x), ember.jit(jnp.frexp)(x)):
            m, e = npa(m), npa(e)
            assert m.dtype == dt and e.dtype == np.int32
            got = m.astype(np.float64)
            np.testing.assert_array_equal(got, want_m.astype(dt).astype(np.float64))
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want_m))
            np.testing.assert_array_equal(e, want_e)


def test_frexp_mantissa_derivative_is_two_to_the_minus_exponent():
    x = np.array([3.0, -0.3, 8.0, 1e-3, 1e30], f32)
    _, e = np.frexp(x)
    grads = ember.vmap(ember.grad(lambda v: jnp.frexp(v)[0]))(x)
    np.testing.assert_array_equal(npa(grads), np.ldexp(np.ones_like(x), -e))


def test_complex_ops():
    z = np.array([1 + 2j, -3 - 0.5j, 0j], np.complex64)
    np.testing.assert_array_equal(npa(jnp.real(A(z))), z.real)
    np.testing.assert_array_equal(npa(jnp.imag(A(z))), z.imag)
    np.testing.assert_array_equal(npa(jnp.conjugate(A(z))), np.conj(z))
    np.testing.assert_allclose(npa(jnp.angle(A(z))), np.angle(z), rtol=1e-6)
    np.testing.assert_allclose(npa(jnp.abs(A(z))), np.abs(z), rtol=1e-6)
    assert jnp.abs(A(z)).dtype == np.float32
    np.testing.assert_allclose(npa(jnp.exp(A(z))), np.exp(z), rtol=1e-6)
    np.testing.assert_allclose(npa(lax.sign(A(z))), np.sign(z), rtol=1e-6)
    c = lax.complex(A([1.0], f32), A([2.0], f32))
    assert c.dtype == np.complex64 and npa(c)[0] == 1 + 2j


def test_where_clip_select_clamp():
    c = np.array([[True], [False]])
    np.testing.assert_array_equal(npa(jnp.where(A(c), A([1, 2, 3], np.int32), 0)),
                                  np.where(c, [1, 2, 3], 0))
    np.testing.assert_array_equal(npa(jnp.clip(A([-2.0, 0.5, 3.0], f32), min=0.0)),
                                  [0.0, 0.5, 3.0])
    with pytest.raises(TypeError):  # JAX dropped NumPy's a_min/a_max keywords
        jnp.clip(A([-2.0, 0.5, 3.0], f32), a_min=0.0)
    with pytest.raises(ValueError):
        jnp.clip(None, 0.0)
    np.testing.assert_array_equal(npa(jnp.clip(A([-2.0, 0.5, 3.0], f32), max=1.0)),
                                  [-2.0, 0.5, 1.0])
    np.testing.assert_array_equal(npa(A([-2.0, 3.0], f32).clip(0.0, 1.0)), [0.0, 1.0])
    which = A([0, 1, 2, 1], np.int32)
    out = lax.select_n(which, A([1, 1, 1, 1], np.int32), A([2, 2, 2, 2], np.int32),
                       A([3, 3, 3, 3], np.int32))
    np.testing.assert_array_equal(npa(out), [1, 2, 3, 2])
    np.testing.assert_array_equal(npa(lax.clamp(0.0, A([-1.0, 0.5, 2.0], f32), 1.0)),
                                  [0.0, 0.5, 1.0])


# ---------------------------------------------------------------- bad input


BAD_CALLS = [
    (lambda: lax.exp(A([1], np.int32)), TypeError, r"exp does not accept dtype int32"),
    (lambda: lax.sqrt(A([True])), TypeError, r"sqrt does not accept dtype bool"),
    (lambda: lax.add(A([1], np.int32), A([1.0], f32)), TypeError,
     r"add requires arguments to have the same dtypes"),
    (lambda: lax.add(A(np.ones(3), f32), A(np.ones(4), f32)), TypeError,
     r"add got incompatible shapes"),
    (lambda: jnp.add(A(np.ones(3), f32), A(np.ones(4), f32)), TypeError,
     r"add got incompatible shapes"),
    (lambda: jnp.sin([1.0, 2.0]), TypeError, r"sin requires ndarray or scalar"),
    (lambda: jnp.add(A([1.0], f32), [1.0]), TypeError, r"add requires ndarray or scalar"),
    (lambda: lax.add([1.0], A([1.0], f32)), TypeError, r"must be an array, got a list"),
    (lambda: jnp.bitwise_and(A([1.0], f32), A([1.0], f32)), TypeError,
     r"bitwise_and: only integer and boolean dtypes"),
    (lambda: lax.bitwise_or(A([1.0], f32), A([1.0], f32)), TypeError,
     r"or does not accept dtype float32"),
    (lambda: jnp.left_shift(A([1.0], f32), 1), TypeError, r"left_shift: only integer"),
    (lambda: lax.shift_left(A([True]), A([True])), TypeError, r"shift_left does not accept"),
    (lambda: lax.floor(A([1], np.int32)), TypeError, r"floor does not accept dtype int32"),
    (lambda: lax.atan2(A([1], np.int32), A([1], np.int32)), TypeError, r"atan2 does not"),
    (lambda: lax.population_count(A([1.0], f32)), TypeError, r"population_count does not"),
    (lambda: lax.pow(A([2.0], f32), A([2.0], np.float16)), TypeError, r"pow: exponent y"),
    (lambda: lax.integer_pow(A([2.0], f32), 2.5), TypeError, r"integer_pow: exponent y"),
    (lambda: lax.round(A([1.0], f32), 7), ValueError, r"round: rounding_method"),
    (lambda: lax.select_n(A([True]), A([1.0], f32), A([1], np.int32)), TypeError,
     r"select_n: all cases must have the same dtype"),
    (lambda: lax.select_n(A([True, False]), A([1.0], f32), A([1.0], f32)), TypeError,
     r"select_n: which must be a scalar or have the cases' shape"),
    (lambda: lax.select_n(A([1.0], f32), A([1.0], f32), A([1.0], f32)), TypeError,
     r"select_n: which must be a boolean or int32"),
    (lambda: lax.clamp(A([0.0, 1.0], f32), A([1.0, 2.0, 3.0], f32), 1.0), TypeError,
     r"clamp: min must be a scalar or have the operand's shape"),
    (lambda: lax.real(A([1.0], f32)), TypeError, r"real does not accept dtype float32"),
    (lambda: jnp.subtract(A([True]), A([False])), TypeError, r"subtract: boolean subtract"),
    # JAX's classes: ValueError for gcd/lcm/ldexp dtypes, TypeError for sign of bools
    (lambda: jnp.gcd(A([1.0], f32), A([2.0], f32)), ValueError, r"gcd: arguments must be int"),
    (lambda: jnp.gcd(A([True]), A([True])), ValueError, r"gcd: arguments must be integers, got b"),
    (lambda: jnp.lcm(A([1]), 2.5), ValueError, r"lcm: arguments must be integers"),
    (lambda: jnp.ldexp(A([1.0], f32), A([1.0], f32)), ValueError, r"ldexp: not supported for"),
    (lambda: jnp.ldexp(A([1j]), A([1])), ValueError, r"ldexp: not supported for input types"),
    (lambda: jnp.sign(A([True])), TypeError, r"sign: does not accept dtype bool"),
    (lambda: jnp.where(A([True]), A([1.0], f32)), ValueError, r"where: either both or neither"),
    (lambda: jnp.round(A([1.0], f32), 1.5), TypeError, r"round: decimals must be an integer"),
    (lambda: lax.reduce_precision(A([1.0], f32), 0, 3), ValueError,
     r"reduce_precision: exponent_bits"),
]


@pytest.mark.parametrize("call,exc,match", BAD_CALLS, ids=[m for _, _, m in BAD_CALLS])
def test_bad_calls(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_bad_calls_while_tracing():
    with pytest.raises(TypeError, match="log does not accept dtype int32"):
        ember.make_jaxpr(lambda v: lax.log(v))(A([1], np.int32))


def test_reduce_precision_float64_formats_do_not_overflow():
    # (11, 52) is float64 itself: the identity (it used to raise OverflowError).
    x = np.array([1.1, 1e308, -3e-310, np.inf, np.nan, 5e-324, -0.0])
    with _x64():
        got = np.asarray(lax.reduce_precision(x, exponent_bits=11, mantissa_bits=52))
        np.testing.assert_array_equal(got, x)
        # Wider than float64: also the identity.
        got = np.asarray(lax.reduce_precision(x, exponent_bits=15, mantissa_bits=60))
        np.testing.assert_array_equal(got, x)
        # bfloat16's format from float64: rounds and overflows like a bfloat16 cast.
        got = np.asarray(lax.reduce_precision(x, exponent_bits=8, mantissa_bits=7))
        with np.errstate(over="ignore"):
            want = x.astype(jnp.bfloat16).astype(np.float64)
        np.testing.assert_array_equal(got, want)


class _x64:
    def __enter__(self):
        self.previous = ember.config.jax_enable_x64
        ember.config.update("jax_enable_x64", True)

    def __exit__(self, *exc):
        ember.config.update("jax_enable_x64", self.previous)


def test_complex_log1p_is_accurate_near_zero():
    # log1p(z) = log|1 + z| + i arg(1 + z); NumPy's complex log1p loses the real part's
    # digits for small |z| (log1p(1e-4 + 0j) ~ 1.000116e-4 in complex64).
    mpmath = pytest.importorskip("mpmath")
    r = np.random.default_rng(0)
    z = (r.normal(size=300) * 10.0 ** r.integers(-9, 3, 300)
         + 1j * r.normal(size=300) * 10.0 ** r.integers(-9, 3, 300)).astype(np.complex64)
    z[:3] = [1e-4, 1e-8 + 1e-8j, 1e-6 - 2e-6j]
    want = np.array([complex(mpmath.log(1 + mpmath.mpc(complex(v)))) for v in z])
    eps = np.finfo(np.float32).eps
    eager = [np.asarray(jnp.log1p(z)) for _ in range(3)]  # (the third call replays)
    for got in (*eager, np.asarray(ember.jit(jnp.log1p)(z))):
        for part in (np.real, np.imag):
            np.testing.assert_allclose(part(got), part(want), rtol=4 * eps, atol=0)
    special = np.array([-1, np.inf, complex(np.nan, 1)], np.complex64)
    out = np.asarray(jnp.log1p(special))
    assert out[0].real == -np.inf and out[1].real == np.inf and np.isnan(out[2].real)
