"""JAX-compatibility fixes in ember.numpy: logaddexp and sinc derivatives, isclose on ints and
complex numbers, fmax/fmin signed zeros, round's reciprocal, var/sum dtypes, complex linspace
and sort, int64 indices under x64. References are NumPy and closed forms."""

import math

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as jnp


def _bits(x):
    return np.asarray(x).view(np.uint8)


# ---------------------------------------------------------------- logaddexp / logaddexp2


@pytest.mark.parametrize("fn,base", [(jnp.logaddexp, math.e), (jnp.logaddexp2, 2.0)])
def test_logaddexp_gradient_of_equal_arguments_is_one_half(fn, base):
    g = ember.grad(fn, argnums=(0, 1))(1.0, 1.0)
    np.testing.assert_allclose([float(g[0]), float(g[1])], [0.5, 0.5], rtol=1e-6)
    assert float(ember.grad(lambda x: fn(x, 0.0))(0.0)) == pytest.approx(0.5)
    # Equal infinities: each argument's weight is exp(0) = 1.
    assert float(ember.grad(lambda x: fn(x, x))(np.inf)) == 2.0
    # Elsewhere the closed form d/dx1 = b**x1 / (b**x1 + b**x2).
    x1 = np.array([-3.0, 0.5, 2.0, 40.0], np.float32)
    x2 = np.array([1.0, -0.5, 2.0, 0.0], np.float32)
    g1, g2 = ember.vmap(ember.grad(fn, argnums=(0, 1)))(jnp.asarray(x1), jnp.asarray(x2))
    w1 = base ** x1.astype(np.float64)
    w2 = base ** x2.astype(np.float64)
    np.testing.assert_allclose(np.asarray(g1), w1 / (w1 + w2), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(g2), w2 / (w1 + w2), rtol=1e-5)


def test_logaddexp_values_and_jit_second_derivative():
    x1 = np.array([-np.inf, np.inf, np.nan, 1.0, -2.0, 0.0], np.float32)
    x2 = np.array([-np.inf, np.inf, 1.0, 1.0, 3.0, np.inf], np.float32)
    with np.errstate(invalid="ignore"):
        ref = np.logaddexp(x1, x2)
    np.testing.assert_array_equal(np.asarray(jnp.logaddexp(jnp.asarray(x1), jnp.asarray(x2))),
                                  ref)
    # d2/dx2 logaddexp(x, 0) = s(1 - s) with s = sigmoid(x); jit and grad-of-grad.
    f = ember.jit(ember.grad(ember.grad(lambda x: jnp.logaddexp(x, 0.0))))
    s = 1 / (1 + math.exp(-0.3))
    assert float(f(0.3)) == pytest.approx(s * (1 - s), rel=1e-5)
    assert float(f(0.0)) == pytest.approx(0.25, rel=1e-6)
    # broadcasting: the gradient of a scalar against an array sums the weights
    g = ember.grad(lambda a: jnp.sum(jnp.logaddexp(a, jnp.zeros(3))))(0.0)
    assert float(g) == pytest.approx(1.5)


# ---------------------------------------------------------------- sinc


def test_sinc_higher_derivatives_at_zero():
    # sinc(x) = sum (-1)^n (pi x)^(2n) / (2n+1)!: the k-th derivative at 0 is
    # (-1)^(k/2) pi^k / (k+1) for even k, else 0.
    f = jnp.sinc
    expected = [1.0]
    for k in range(1, 5):
        f = ember.grad(f)
        expected.append(0.0 if k % 2 else (-1) ** (k // 2) * math.pi ** k / (k + 1))
        assert float(f(0.0)) == pytest.approx(expected[k], rel=1e-5, abs=1e-6), k
    assert float(ember.jit(ember.grad(ember.grad(jnp.sinc)))(0.0)) == pytest.approx(
        -math.pi ** 2 / 3, rel=1e-6)
    # away from 0 the second derivative matches a finite difference of the first
    g = ember.grad(jnp.sinc)
    h = 1e-3
    fd = (float(g(np.float64(0.7 + h))) - float(g(np.float64(0.7 - h)))) / (2 * h)
    assert float(ember.grad(g)(0.7)) == pytest.approx(fd, rel=1e-3)
    x = np.array([0.0, 0.5, -1.5, 2.0], np.float32)
    np.testing.assert_allclose(np.asarray(jnp.sinc(jnp.asarray(x))), np.sinc(x), atol=1e-7)
    np.testing.assert_allclose(np.asarray(ember.vmap(ember.grad(ember.grad(jnp.sinc)))(
        jnp.asarray(x)))[0], -math.pi ** 2 / 3, rtol=1e-6)


# ---------------------------------------------------------------- isclose / allclose


def test_isclose_complex_and_integer_tolerances():
    a = jnp.asarray(np.array([1 + 1j, 1 + 1j, np.inf + 0j, np.nan * 1j], np.complex64))
    b = jnp.asarray(np.array([1 + 1j, 1 + 1.1j, np.inf + 0j, np.nan * 1j], np.complex64))
    out = jnp.isclose(a, b)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(np.asarray(out), [True, False, True, False])
    np.testing.assert_array_equal(np.asarray(jnp.isclose(a, b, equal_nan=True)),
                                  [True, False, True, True])
    np.testing.assert_array_equal(np.asarray(jnp.isclose(a, b, atol=0.2)),
                                  [True, True, True, False])
    assert bool(jnp.allclose(a[:1], b[:1]))
    # integers and bools are compared as floats, so the tolerances apply (as in NumPy)
    i, j = np.array([2, 5, -7], np.int32), np.array([3, 5, -9], np.int32)
    for kw in ({}, {"atol": 1}, {"atol": 0, "rtol": 0.25}):
        np.testing.assert_array_equal(np.asarray(jnp.isclose(jnp.asarray(i), jnp.asarray(j),
                                                             **kw)),
                                      np.isclose(i, j, **kw))
    assert bool(jnp.allclose(jnp.asarray(i), jnp.asarray(j), atol=2))
    assert bool(jnp.isclose(jnp.asarray(True), jnp.asarray(False), atol=1))
    x = np.array([np.inf, -np.inf, np.nan, 1.0, np.inf], np.float32)
    y = np.array([np.inf, np.inf, np.nan, np.inf, 1.0], np.float32)
    np.testing.assert_array_equal(np.asarray(jnp.isclose(jnp.asarray(x), jnp.asarray(y))),
                                  np.isclose(x, y))


# ---------------------------------------------------------------- fmax / fmin


def test_fmax_fmin_signed_zeros_nans_and_gradient():
    vals = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan], np.float32)
    a, b = (v.ravel() for v in np.meshgrid(vals, vals))
    # JAX's definition: where((x1 > x2) | isnan(x2), x1, x2) (and < for fmin)
    with np.errstate(invalid="ignore"):
        ref_max = np.where((a > b) | np.isnan(b), a, b)
        ref_min = np.where((a < b) | np.isnan(b), a, b)
    np.testing.assert_array_equal(_bits(jnp.fmax(jnp.asarray(a), jnp.asarray(b))),
                                  _bits(ref_max))
    np.testing.assert_array_equal(_bits(jnp.fmin(jnp.asarray(a), jnp.asarray(b))),
                                  _bits(ref_min))
    assert np.signbit(np.asarray(jnp.fmax(0.0, -0.0)))
    assert not np.signbit(np.asarray(jnp.fmin(-0.0, 0.0)))
    g = ember.grad(jnp.fmax, argnums=(0, 1))(1.0, 1.0)
    assert (float(g[0]), float(g[1])) == (0.0, 1.0)
    g = ember.grad(jnp.fmin, argnums=(0, 1))(2.0, 1.0)
    assert (float(g[0]), float(g[1])) == (0.0, 1.0)
    ints = jnp.fmax(jnp.asarray(np.array([1, 5], np.int32)), jnp.asarray(np.array([3, 2],
                                                                                  np.int32)))
    assert ints.dtype == np.int32 and np.asarray(ints).tolist() == [3, 5]


# ---------------------------------------------------------------- round


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_round_multiplies_by_the_reciprocal_like_jit(dtype, request):
    if dtype == np.float64:
        request.getfixturevalue("x64")
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(2000) * 10.0 ** rng.integers(-3, 5, 2000)).astype(dtype)
    work = np.float32 if dtype == np.float16 else dtype
    for d in (-2, 1, 2, 3):
        factor = np.asarray(10 ** d, work)
        recip = np.asarray(np.ones((), work) / factor)
        with np.errstate(over="ignore"):
            ref = (np.round(x.astype(work) * factor) * recip).astype(work).astype(dtype)
        eager = jnp.round(jnp.asarray(x), d)
        jitted = ember.jit(lambda v, d=d: jnp.round(v, d))(jnp.asarray(x))
        assert eager.dtype == dtype
        np.testing.assert_array_equal(_bits(eager), _bits(ref))
        np.testing.assert_array_equal(_bits(jitted), _bits(ref))
    got = np.asarray(jnp.round(jnp.asarray(np.array([2.675, -70.37], np.float32)), 2))
    np.testing.assert_array_equal(got, np.array([2.6799998, -70.369995], np.float32))


def test_round_bfloat16_and_beyond_precision():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(500) * 100).astype(ml_dtypes.bfloat16)
    # bfloat16 is rounded in its own type with a true division (XLA keeps it a division)
    factor = np.asarray(100, ml_dtypes.bfloat16)
    ref = np.round(x * factor) / factor
    np.testing.assert_array_equal(_bits(jnp.round(jnp.asarray(x), 2)), _bits(ref))
    # decimals beyond the dtype's range leave the values unchanged
    h = np.array([1.2345, 60000.0], np.float16)
    np.testing.assert_array_equal(_bits(jnp.round(jnp.asarray(h), 5)), _bits(h))


# ---------------------------------------------------------------- reduction dtypes


def test_var_std_dtype_arguments():
    x = jnp.arange(4.0)
    v = jnp.var(x, dtype="int8")  # computed in int8, then NaN-guarded into a float
    assert v.dtype == np.float32 and float(v) == 1.0
    v = jnp.var(x, dtype="complex64")
    assert v.dtype == np.complex64 and complex(v) == pytest.approx(1.25)
    s = jnp.std(x, dtype="complex64")
    assert s.dtype == np.complex64 and complex(s) == pytest.approx(math.sqrt(1.25))
    assert jnp.nanvar(x, dtype="complex64").dtype == np.complex64
    with pytest.raises(ValueError):
        jnp.var(jnp.asarray(np.array([1 + 1j, 2], np.complex64)), dtype="float32")
    # a count not above ddof gives NaN (NumPy warns and gives inf or negative values)
    for fn in (jnp.var, jnp.std, jnp.nanvar, jnp.nanstd):
        assert np.isnan(float(fn(jnp.asarray(np.array([1.0, 2.0], np.float32)), ddof=2)))
        assert np.isnan(float(fn(jnp.asarray(np.array([1.0, 2.0], np.float32)), ddof=3)))
    np.testing.assert_allclose(float(jnp.var(x, ddof=1)), np.var(np.arange(4.0), ddof=1))


def test_sum_prod_with_bool_dtype_are_any_and_all():
    a = np.array([[0.0, 1.0, np.nan], [0.0, 0.0, 0.0], [2.0, 3.0, 4.0]], np.float32)
    x = jnp.asarray(a)
    for fn, ref in ((jnp.sum, np.any), (jnp.prod, np.all)):
        out = fn(x, dtype=bool, axis=1)
        assert out.dtype == np.bool_
        np.testing.assert_array_equal(np.asarray(out), ref(a.astype(bool), axis=1))
        assert bool(fn(x, dtype=bool)) == bool(ref(a.astype(bool)))
        jitted = ember.jit(lambda v, fn=fn: fn(v, dtype=bool, axis=0))(x)
        np.testing.assert_array_equal(np.asarray(jitted), ref(a.astype(bool), axis=0))
    np.testing.assert_array_equal(np.asarray(jnp.nansum(x[:, 1:], dtype=bool, axis=1)),
                                  [True, False, True])  # NaN counts as 0
    assert not bool(jnp.nansum(jnp.asarray(np.array([np.nan, 0.0], np.float32)), dtype=bool))
    np.testing.assert_array_equal(np.asarray(jnp.sum(x, dtype=bool, axis=1, where=x > 1)),
                                  [False, False, True])
    assert bool(jnp.prod(jnp.zeros(0), dtype=bool)) and not bool(jnp.sum(jnp.zeros(0),
                                                                           dtype=bool))


# ---------------------------------------------------------------- linspace, sort


def test_complex_linspace():
    for args, kw in [((0, 1 + 1j, 3), {}), ((1j, 2.0, 5), {"endpoint": False}),
                     ((np.array([0, 1j]), 1 + 1j, 4), {"axis": 1})]:
        out = jnp.linspace(*args, **kw)
        assert out.dtype == np.complex64
        np.testing.assert_allclose(np.asarray(out), np.linspace(*args, **kw), rtol=1e-6)
    out, step = jnp.linspace(0, 1 + 1j, 3, retstep=True)
    assert complex(step) == pytest.approx(0.5 + 0.5j)
    traced = ember.jit(lambda a, b: jnp.linspace(a, b, 3))(
        jnp.asarray(np.complex64(1j)), jnp.asarray(np.complex64(2 + 2j)))
    np.testing.assert_allclose(np.asarray(traced), np.linspace(1j, 2 + 2j, 3), rtol=1e-6)


def test_complex_sort_and_argsort_are_lexicographic():
    rng = np.random.default_rng(0)
    z = (rng.integers(0, 3, 24) + 1j * rng.integers(0, 3, 24)).astype(np.complex64)
    z[5] = complex(np.nan, 1)
    z = z.reshape(4, 6)
    for axis in (-1, 0, None):
        np.testing.assert_array_equal(np.asarray(jnp.sort(jnp.asarray(z), axis=axis)),
                                      np.sort(z, axis=axis))
        np.testing.assert_array_equal(np.asarray(jnp.argsort(jnp.asarray(z), axis=axis)),
                                      np.argsort(z, axis=axis, kind="stable"))
    np.testing.assert_array_equal(
        np.asarray(jnp.sort(jnp.asarray(z), descending=True)), np.sort(z)[:, ::-1])
    assert jnp.argsort(jnp.asarray(z)).dtype == np.int32


# ---------------------------------------------------------------- x64 index dtypes


def test_index_results_are_int64_under_x64(x64):
    y = jnp.asarray(np.array([[3.0, 1.0, 5.0], [0.0, 2.0, 1.0]]))
    n = jnp.asarray(np.array([[3.0, np.nan, 5.0], [np.nan, 2.0, 1.0]]))
    results = {
        "argmax": (jnp.argmax(y), 2), "argmin": (jnp.argmin(y, axis=0), [1, 0, 1]),
        "argmax_jit": (ember.jit(jnp.argmax)(y), 2),
        "nanargmax": (jnp.nanargmax(n, axis=1), [2, 1]), "nanargmin": (jnp.nanargmin(n), 5),
        "argsort": (jnp.argsort(y), [[1, 0, 2], [0, 2, 1]]),
        "argsort_desc": (jnp.argsort(y, descending=True), [[2, 0, 1], [1, 2, 0]]),
        "lexsort": (jnp.lexsort((y[0], y[1])), [0, 2, 1]),
        "bincount": (jnp.bincount(jnp.asarray(np.array([1, 2], np.int8))), [0, 1, 1]),
        "unique_inverse": (jnp.unique(y, return_inverse=True)[1], [[3, 1, 4], [0, 2, 1]]),
        "unique_sized_counts": (jnp.unique(y, size=3, return_counts=True)[1], [1, 2, 1]),
    }
    for name, (got, want) in results.items():
        assert got.dtype == np.int64, name
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=name)
    # these stay int32 in JAX
    assert jnp.argpartition(y, 1).dtype == np.int32
    assert jnp.searchsorted(jnp.arange(5.0), 2.5).dtype == np.int32


def test_index_results_are_int32_without_x64():
    y = jnp.asarray(np.array([[3.0, 1.0, 5.0], [0.0, 2.0, 1.0]], np.float32))
    for got in (jnp.argmax(y), jnp.argmin(y, axis=1), jnp.argsort(y), jnp.lexsort((y[0],)),
                jnp.nanargmax(y), jnp.unique(y, return_index=True)[1]):
        assert got.dtype == np.int32


# ---------------------------------------------------------------- inexact promotion under x64

# JAX's table (dtypes.to_inexact_dtype): 64-bit integers become the default float, narrower
# integers and bool become float32, also under x64. Each row: expression, expected dtype.
_X64_INEXACT = [
    ("jnp.sin(i32)", "float32"), ("jnp.sin(u64)", "float64"), ("jnp.sin(b)", "float32"),
    ("jnp.sin(i64)", "float64"), ("jnp.sin(3)", "float64"), ("jnp.sin(True)", "float32"),
    ("i32 / i32", "float32"), ("i8 / 2", "float32"), ("jnp.sqrt(i8)", "float32"),
    ("jnp.mean(i32)", "float32"), ("jnp.mean(u64)", "float64"), ("jnp.mean(b)", "float32"),
    ("jnp.var(i32)", "float32"), ("jnp.std(i8)", "float32"), ("jnp.nanvar(i32)", "float32"),
    ("jnp.average(i32, weights=i32)", "float32"), ("jnp.median(i32)", "float32"),
    ("jnp.quantile(i32, 0.5)", "float32"), ("jnp.percentile(i8, 50)", "float32"),
    ("jnp.quantile(f32, np.float64(0.5))", "float32"),
    ("jnp.linspace(i32[0], i32[2], 3)", "float32"), ("jnp.linspace(0, 1, 3)", "float64"),
    ("jnp.logspace(i32[0], i32[2], 3)", "float32"), ("jnp.geomspace(i32[1], i32[2], 3)",
                                                      "float32"),
    ("jnp.arctan2(i32, i8)", "float32"), ("jnp.hypot(i32, i32)", "float32"),
    ("jnp.float_power(i32, 2)", "float32"), ("jnp.convolve(i32, i32)", "float32"),
    ("jnp.histogram_bin_edges(i32)", "float32"), ("jnp.interp(i32, i32, i32)", "float32"),
    ("jnp.tri(2)", "float32"), ("jnp.rint(i32)", "float64"), ("jnp.angle(i32)", "float64"),
    ("i32 * 1.5", "float64"), ("jnp.hanning(3)", "float64"), ("jnp.zeros(3)", "float64"),
]


@pytest.mark.parametrize("expr,expected", _X64_INEXACT)
def test_integers_become_float32_unless_64_bit_under_x64(expr, expected, x64):
    names = {"jnp": jnp, "np": np, "b": jnp.asarray(np.array([True, False, True]))}
    for name, dt in (("i8", np.int8), ("i32", np.int32), ("i64", np.int64), ("u64", np.uint64),
                     ("f32", np.float32)):
        names[name] = jnp.asarray(np.array([1, 2, 3], dt))
    assert eval(expr, names).dtype == np.dtype(expected)


def test_quantile_of_integers_under_x64_keeps_the_values(x64):
    x = np.array([3, 1, 4, 1, 5, 9, 2, 6], np.int32)
    got = jnp.quantile(jnp.asarray(x), jnp.asarray(np.array([0.1, 0.5, 0.9])))
    assert got.dtype == np.float32
    np.testing.assert_allclose(np.asarray(got), np.quantile(x, [0.1, 0.5, 0.9]), rtol=1e-6)


# ---------------------------------------------------------------- power: float base, int exponent


@pytest.mark.parametrize("x64_on", [False, True])
def test_power_of_a_float_to_integers_is_not_promoted(x64_on, request):
    """As in JAX: a float/complex base to an integer power keeps the base's dtype, and a Python
    float base gives a strongly typed result."""
    if x64_on:
        request.getfixturevalue("x64")
    fdt = np.float64 if x64_on else np.float32
    i = jnp.asarray(np.array([0, 1, 2, 3], np.int32))
    for got in (jnp.power(2.0, i), 2.0 ** i):
        assert got.dtype == fdt and not got.aval.weak_type
        np.testing.assert_array_equal(np.asarray(got), [1.0, 2.0, 4.0, 8.0])
    h = jnp.power(jnp.asarray(np.array([1.5, 2.0], np.float16)), jnp.asarray(np.array([2, 3])))
    assert h.dtype == np.float16
    np.testing.assert_array_equal(np.asarray(h), np.array([2.25, 8.0], np.float16))
    z = jnp.power(2j, i)
    assert z.dtype == (np.complex128 if x64_on else np.complex64)
    np.testing.assert_allclose(np.asarray(z), (2j) ** np.arange(4), atol=1e-6)
    # the derivative of x ** 0 at x = 0 is 0 (a float exponent would give 0 * inf)
    g = ember.grad(lambda x: jnp.power(x, jnp.asarray(np.int32(0))))(0.0)
    assert float(g) == 0.0


# ---------------------------------------------------------------- linspace: one formula


@pytest.mark.parametrize("dtype", [None, np.float16, ml_dtypes.bfloat16, np.int32,
                                   np.complex64])
@pytest.mark.parametrize("endpoint", [True, False])
def test_linspace_gives_the_same_bits_eagerly_and_under_jit(dtype, endpoint):
    """JAX's formula ``start * (1 - t) + stop * t`` with ``t = i * (1 / div)``, for Python
    scalars (computed by NumPy), ember arrays (eager lax) and traced values alike."""
    for a, b, n in [(-5.0, 2.0, 4), (0.0, 1.0, 7), (-1.3, 7.7, 11), (2.0, -3.7, 9)]:
        kw = {"endpoint": endpoint, "dtype": dtype}
        scalars = np.asarray(jnp.linspace(a, b, n, **kw))
        arrays = np.asarray(jnp.linspace(jnp.asarray(a), jnp.asarray(b), n, **kw))
        traced = np.asarray(ember.jit(lambda a, b, kw=kw, n=n: jnp.linspace(a, b, n, **kw))(a, b))
        np.testing.assert_array_equal(scalars, arrays)
        np.testing.assert_array_equal(scalars, traced)
        want = np.linspace(a, b, n, endpoint=endpoint)
        if dtype in (None, np.complex64):
            np.testing.assert_allclose(scalars, want, rtol=3e-7, atol=3e-7)
    # the last sample is the endpoint exactly; t = 3 * (1 / 7) as XLA rounds it
    np.testing.assert_array_equal(np.asarray(jnp.linspace(0.0, 1.0, 7, endpoint=False))[3],
                                  np.float32(3) * (np.float32(1) / np.float32(7)))
    assert float(jnp.linspace(-1.3, 7.7, 11)[-1]) == np.float32(7.7)


# ---------------------------------------------------------------- complex square and expm1


def test_complex_square_and_expm1_edge_values():
    """square is (a - b)(a + b) + 2ab i (as XLA: no inf - inf), eagerly and under jit alike;
    expm1 keeps a zero imaginary part (NumPy's gave exp(1e20) * 0 = nan; JAX gives 0)."""
    z = np.array([1e20 + 1e20j, 1e20 + 1e30j, 3 + 4j, -2.5 + 0.5j, 1e-30 + 1e-30j],
                 np.complex64)
    want = [complex(0, np.inf), complex(-np.inf, np.inf), -7 + 24j, 6 - 2.5j, 0j]
    for got in (jnp.square(jnp.asarray(z)), ember.jit(jnp.square)(jnp.asarray(z))):
        np.testing.assert_array_equal(np.asarray(got), np.array(want, np.complex64))
    z = np.array([1e20 + 0j, complex(1e20, -0.0), 0.5 + 0.25j, 1e-4 + 1e-4j, -1e-8 + 2e-8j],
                 np.complex64)
    ref = np.expm1(z[2:].astype(np.complex128))
    for got in (jnp.expm1(jnp.asarray(z)), ember.jit(jnp.expm1)(jnp.asarray(z))):
        got = np.asarray(got)
        np.testing.assert_array_equal(got[:2], np.array([np.inf, np.inf], np.complex64))
        assert np.signbit(got[1].imag)
        np.testing.assert_allclose(got[2:], ref, rtol=2e-7)


# ---------------------------------------------------------------- log2 / log10 as JAX


def test_log2_and_log10_scale_the_logarithm_as_jax():
    """log10 is log(x) * 0.4342944819032518 (rounded to x's dtype) and log2 log(x) times the
    reciprocal of log(2) in x's dtype, as JAX and XLA compute them; a complex logarithm's
    parts are scaled apart, so log2(0j) is -inf+0j (a complex division gave -inf+nanj)."""
    z = np.array([0j, complex(0, np.inf), 8 + 0j, -1 + 0j], np.complex64)
    for fn, base in ((jnp.log2, 2.0), (jnp.log10, 10.0)):
        for got in (fn(jnp.asarray(z)), ember.jit(fn)(jnp.asarray(z))):
            got = np.asarray(got)
            assert got[0] == complex(-np.inf, 0.0)
            ln = np.log(z[1:].astype(np.complex128))
            np.testing.assert_allclose(got[1:].real, ln.real / np.log(base), rtol=1e-6)
            np.testing.assert_allclose(got[1:].imag, ln.imag / np.log(base), rtol=1e-6)
    x = np.array([0.3, 2.0, 10.0, 77.0, 1e-3], np.float32)
    for dt in (np.float32, np.float16, ml_dtypes.bfloat16):
        xs = x.astype(dt)
        ln = np.asarray(jnp.log(jnp.asarray(xs)))
        work = np.float32 if dt == ml_dtypes.bfloat16 else dt
        recip = np.ones((), work) / np.asarray(np.log(2.0), dt).astype(work)
        want2 = (ln.astype(work) * recip).astype(dt)
        want10 = (ln * np.asarray(0.4342944819032518, dt)).astype(dt)
        for fn, want in ((jnp.log2, want2), (jnp.log10, want10)):
            np.testing.assert_array_equal(np.asarray(fn(jnp.asarray(xs))), want)


def test_logspace_of_python_scalars_is_jaxs_formula():
    """base ** linspace(start, stop) in the computation dtype, as JAX (and ember's traced
    path) computes it; NumPy's float64 logspace rounded once differed from JAX's values."""
    for a, b, n in [(-1.3, 2.7, 11), (0.5, 2.0, 7), (2.0, -1.0, 5)]:
        lin = np.asarray(jnp.linspace(a, b, n))
        want = np.power(np.float32(10), lin)
        np.testing.assert_array_equal(np.asarray(jnp.logspace(a, b, n)), want)
        np.testing.assert_allclose(np.asarray(ember.jit(lambda a, b, n=n: jnp.logspace(
            a, b, n))(a, b)), want, rtol=3e-7)
    np.testing.assert_array_equal(np.asarray(jnp.logspace(0, 3, 4, base=2)), [1, 2, 4, 8])


def test_products_without_a_sum_keep_negative_zeros_eagerly_as_compiled():
    """An outer product (no contracting dimension, or one of size 1) is elementwise products;
    eager code summed them onto +0.0 through BLAS, so 0 * -3 came out +0.0 (compiled: -0.0,
    as in JAX)."""
    a = jnp.asarray(np.array([0.0, 1.0], np.float32))
    b = jnp.asarray(np.array([-3.0, 2.0], np.float32))
    want = np.array([[True, False], [True, False]])
    for got in (jnp.outer(a, b), ember.jit(jnp.outer)(a, b),
                jnp.matmul(a[:, None], b[None, :]),
                ember.lax.dot_general(a, b, (((), ()), ((), ())))):
        np.testing.assert_array_equal(np.signbit(np.asarray(got)), want)
        np.testing.assert_array_equal(np.asarray(got), np.outer([0.0, 1.0], [-3.0, 2.0]))
