"""ember.numpy windows and numeric helpers beyond the op records: keyword arguments, edge
cases, i0's accuracy and derivative against a high-precision reference, jit/vmap, errors,
and comparisons with JAX (skipped where jax is absent)."""

from __future__ import annotations

import decimal
import math
import warnings

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.test_util import check_grads

BF16 = np.dtype(ml_dtypes.bfloat16)
WINDOWS = ("bartlett", "blackman", "hamming", "hanning")




def _quiet(f, *args, **kw):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return f(*args, **kw)


def _same_as_jax(ours, theirs, rtol=0.0, atol=0.0):
    """Same shape, dtype, weak type and values (NaNs in the same places)."""
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    assert np.dtype(ours.dtype) == np.dtype(theirs.dtype), (ours.dtype, theirs.dtype)
    assert ours.weak_type == theirs.weak_type, (ours.aval, theirs)
    a = np.asarray(ours).astype(np.complex128 if ours.dtype.kind == "c" else np.float64)
    b = np.asarray(theirs).astype(a.dtype)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)


# ---------------------------------------------------------------- high-precision Bessel I0/I1

def _bessel_ref(x: float, nu: int) -> float:
    """I_nu(x) from its power series in 60-digit decimal arithmetic (every term positive)."""
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        half = decimal.Decimal(abs(float(x))) / 2
        y = half * half
        term = half if nu else decimal.Decimal(1)
        total = decimal.Decimal(0)
        k = 0
        while True:
            total += term
            k += 1
            term = term * y / (k * (k + nu))
            if term <= total * decimal.Decimal(10) ** -40:
                break
        value = float(total)
    return math.copysign(value, x) if nu == 1 else value


def _ulp_errors(ours, ref, dtype):
    ref = np.asarray(ref, np.float64)
    got = np.asarray(ours).astype(np.float64)
    return np.abs(got - ref) / np.maximum(np.abs(ref), np.finfo(dtype).tiny) / \
        np.finfo(dtype).eps


F32_GRID = np.concatenate([np.linspace(-88.0, 88.0, 353), np.geomspace(1e-6, 80.0, 60),
                           [9.99, 10.0, 10.01, -10.0]]).astype(np.float32)
F64_GRID = np.concatenate([np.linspace(-700.0, 700.0, 281), np.linspace(-30.0, 30.0, 241),
                           np.geomspace(1e-9, 700.0, 80), [19.99, 20.0, 20.01]])


# ---------------------------------------------------------------- windows


@pytest.mark.parametrize("name", WINDOWS)
@pytest.mark.parametrize("M", [0, 1, 2, 3, 4, 7, 16, 101])
def test_window_matches_numpy(name, M):
    out = getattr(jnp, name)(M)
    assert out.dtype == np.float32 and not out.weak_type and out.shape == (M,)
    np.testing.assert_allclose(np.asarray(out), getattr(np, name)(M), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", WINDOWS + ("kaiser",))
def test_window_float64_under_x64(name, x64):
    args = (2.5,) if name == "kaiser" else ()
    out = getattr(jnp, name)(9, *args)
    assert out.dtype == np.float64
    np.testing.assert_allclose(np.asarray(out), getattr(np, name)(9, *args), rtol=1e-13,
                               atol=1e-15)


@pytest.mark.parametrize("name", WINDOWS)
def test_window_size_conversions(name):
    f = getattr(jnp, name)
    ref = getattr(np, name)
    # Like JAX, M goes through int(): floats are truncated, integer arrays and NumPy ints work.
    np.testing.assert_allclose(np.asarray(f(4.5)), ref(4), atol=1e-6)
    np.testing.assert_allclose(np.asarray(f(np.int8(5))), ref(5), atol=1e-6)
    np.testing.assert_allclose(np.asarray(f(jnp.array(6))), ref(6), atol=1e-6)
    np.testing.assert_array_equal(np.asarray(f(True)), [1.0])
    # Under jit a static size works; a traced one cannot give a shape.
    np.testing.assert_allclose(np.asarray(ember.jit(lambda: f(5))()), ref(5), atol=1e-6)
    with pytest.raises(ember.errors.ConcretizationTypeError, match=f"jnp.{name}"):
        ember.jit(f)(3)


@pytest.mark.parametrize("name", WINDOWS + ("kaiser",))
def test_window_bad_sizes(name):
    f = getattr(jnp, name)
    extra = (1.0,) if name == "kaiser" else ()
    with pytest.raises(TypeError, match=f"{name}: M must be non-negative"):
        f(-1, *extra)
    with pytest.raises(ValueError, match=f"{name}: M must be an integer"):
        f("abc", *extra)
    with pytest.raises(TypeError, match=f"{name}: M must be an integer"):
        f(None, *extra)


def test_kaiser_values_and_beta():
    for beta in (0.0, 0.5, 3.0, 8.6, 14.0):
        np.testing.assert_allclose(np.asarray(jnp.kaiser(12, beta)), np.kaiser(12, beta),
                                   rtol=2e-6, atol=1e-7)
    np.testing.assert_array_equal(np.asarray(jnp.kaiser(4, 0.0)), np.ones(4))
    # The window is even in beta; integer and boolean betas are promoted.
    np.testing.assert_array_equal(np.asarray(jnp.kaiser(6, -3.0)), np.asarray(jnp.kaiser(6, 3.0)))
    np.testing.assert_allclose(np.asarray(jnp.kaiser(6, 3)), np.kaiser(6, 3), rtol=2e-6)
    np.testing.assert_allclose(np.asarray(jnp.kaiser(5, True)), np.kaiser(5, 1.0), rtol=2e-6)
    assert jnp.kaiser(0, 2.0).shape == (0,)
    np.testing.assert_array_equal(np.asarray(jnp.kaiser(1, 2.0)), [1.0])
    # An array beta broadcasts against the points.
    betas = np.array([0.5, 1.0, 2.0, 3.0, 4.0], np.float32)
    expected = [np.kaiser(5, b)[i] for i, b in enumerate(betas)]
    np.testing.assert_allclose(np.asarray(jnp.kaiser(5, betas)), expected, rtol=2e-6)
    # I0(100) overflows float32 (as in JAX): inf / inf in the middle.
    out = np.asarray(jnp.kaiser(5, 100.0))
    assert np.isnan(out[2]) and np.all(out[[0, 1, 3, 4]] == 0)


def test_kaiser_traced_beta_and_gradient():
    f = ember.jit(lambda b: jnp.kaiser(9, b))
    np.testing.assert_allclose(np.asarray(f(4.0)), np.kaiser(9, 4.0), rtol=2e-6)
    batched = ember.vmap(lambda b: jnp.kaiser(6, b))(jnp.array([1.0, 2.0, 5.0]))
    np.testing.assert_allclose(np.asarray(batched), [np.kaiser(6, b) for b in (1, 2, 5)],
                               rtol=2e-6)
    # d/dbeta sum(w) against a central difference of NumPy's float64 window.
    g = ember.grad(lambda b: jnp.sum(jnp.kaiser(9, b)))(3.0)
    h = 1e-5
    fd = (np.kaiser(9, 3.0 + h).sum() - np.kaiser(9, 3.0 - h).sum()) / (2 * h)
    np.testing.assert_allclose(float(g), fd, rtol=1e-5)


def test_kaiser_bad_beta():
    with pytest.raises(TypeError, match="kaiser: beta of shape"):
        jnp.kaiser(4, jnp.ones(3))
    with pytest.raises(ValueError, match="kaiser: beta must be real"):
        jnp.kaiser(4, 1j)
    with pytest.raises(TypeError, match="kaiser requires ndarray or scalar"):
        jnp.kaiser(4, [1.0])


# ---------------------------------------------------------------- i0


def test_i0_float32_accuracy():
    ours = _quiet(jnp.i0, jnp.asarray(F32_GRID))
    ref = [_bessel_ref(float(v), 0) for v in F32_GRID]
    assert _ulp_errors(ours, ref, np.float32).max() <= 4


def test_i0_float64_accuracy(x64):
    ours = jnp.i0(jnp.asarray(F64_GRID))
    assert ours.dtype == np.float64
    ref = [_bessel_ref(float(v), 0) for v in F64_GRID]
    assert _ulp_errors(ours, ref, np.float64).max() <= 8


@pytest.mark.parametrize("dtype", [np.float16, BF16])
def test_i0_low_precision(dtype):
    x = np.linspace(-10.0, 10.0, 41).astype(dtype)
    out = jnp.i0(jnp.asarray(x))
    assert out.dtype == dtype
    ref = np.array([_bessel_ref(float(v), 0) for v in x]).astype(dtype)
    # Computed in float32 and rounded once (JAX is within a few of ulps of this too).
    np.testing.assert_allclose(np.asarray(out).astype(np.float64), ref.astype(np.float64),
                               rtol=2 * float(ml_dtypes.finfo(dtype).eps))


def test_i0_special_values():
    x = jnp.array([0.0, -0.0, 88.0, -88.0, 89.0, np.inf, -np.inf, np.nan], jnp.float32)
    out = np.asarray(_quiet(jnp.i0, x))
    assert out[0] == 1.0 and out[1] == 1.0
    np.testing.assert_allclose(out[2:4], _bessel_ref(88.0, 0), rtol=4e-7)
    # As in JAX: exp(|x|) overflows first (inf), and i0(+-inf) is inf * 0 = NaN.
    assert out[4] == np.inf and np.all(np.isnan(out[5:]))
    # Float16: JAX multiplies by exp(|x|) in float16, which overflows above ~11.09.
    h = np.asarray(_quiet(jnp.i0, jnp.array([11.0, 11.5], jnp.float16)))
    assert np.isfinite(h[0]) and h[1] == np.inf
    # Symmetry.
    v = np.linspace(0.0, 30.0, 31).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(jnp.i0(v)), np.asarray(jnp.i0(-v)))


def test_i0_dtypes():
    assert jnp.i0(2.0).weak_type and jnp.i0(2.0).dtype == np.float32
    assert jnp.i0(2).weak_type
    assert jnp.i0(True).dtype == np.float32 and not jnp.i0(True).weak_type
    assert jnp.i0(jnp.array([1, 2], jnp.int8)).dtype == np.float32
    assert jnp.i0(jnp.array([1], jnp.uint8)).dtype == np.float32
    assert jnp.i0(jnp.array([1.0], jnp.bfloat16)).dtype == BF16
    np.testing.assert_allclose(np.asarray(jnp.i0(jnp.array([-2, -1, 0, 1, 2]))),
                               np.i0(np.array([-2.0, -1, 0, 1, 2])), rtol=2e-7)


def test_i0_errors():
    with pytest.raises(ValueError, match="i0: unsupported input type complex64"):
        jnp.i0(jnp.array([1j]))
    with pytest.raises(TypeError, match="i0 requires ndarray or scalar"):
        jnp.i0([1.0])


def test_i0_derivative_is_i1_float64(x64):
    x = np.concatenate([np.linspace(-60.0, 60.0, 121), [0.0, 1e-8, -19.99, 20.01, 300.0]])
    g = ember.vmap(ember.grad(jnp.i0))(jnp.asarray(x))
    ref = [_bessel_ref(float(v), 1) for v in x]
    assert _ulp_errors(g, ref, np.float64).max() <= 8
    assert float(ember.grad(jnp.i0)(0.0)) == 0.0
    # Second derivative: I1'(x) = I0(x) - I1(x) / x (and 1/2 at 0).
    pts = np.array([-7.5, -1.0, 0.3, 2.0, 9.0, 15.0, 25.0, 40.0])
    g2 = ember.vmap(ember.grad(ember.grad(jnp.i0)))(jnp.asarray(pts))
    ref2 = [_bessel_ref(v, 0) - _bessel_ref(v, 1) / v for v in pts]
    np.testing.assert_allclose(np.asarray(g2), ref2, rtol=1e-12)
    np.testing.assert_allclose(float(ember.grad(ember.grad(jnp.i0))(0.0)), 0.5, rtol=1e-12)


def test_i0_gradient_float32_and_finite_differences(x64):
    x = np.array([-12.0, -3.0, -0.5, 0.7, 4.0, 9.9, 10.1, 30.0])
    check_grads(jnp.i0, (x,), order=2, modes=("fwd", "rev"))
    ember.config.update("jax_enable_x64", False)
    x32 = x.astype(np.float32)
    g = np.asarray(ember.grad(lambda v: jnp.sum(jnp.i0(v)))(x32))
    ref = [_bessel_ref(float(v), 1) for v in x32]
    assert _ulp_errors(g, ref, np.float32).max() <= 4
    # jit and vmap give the same derivative.
    jg = np.asarray(ember.jit(ember.grad(lambda v: jnp.sum(jnp.i0(v))))(x32))
    np.testing.assert_allclose(jg, g, rtol=4e-7)
    vg = np.asarray(ember.vmap(ember.grad(jnp.i0))(x32))
    np.testing.assert_allclose(vg, g, rtol=4e-7)


def test_i0_jit_matches_eager():
    x = jnp.asarray(F32_GRID)
    eager = np.asarray(_quiet(jnp.i0, x))
    for backend in ("cpu", "interpreter"):
        jitted = np.asarray(_quiet(ember.jit(jnp.i0, backend=backend), x))
        np.testing.assert_allclose(jitted, eager, rtol=4e-7)


# ---------------------------------------------------------------- spacing


def test_spacing_special_values():
    x = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 3.4e38, -3.4e38, 1e-45,
                  -1e-45], np.float32)
    out = np.asarray(_quiet(jnp.spacing, jnp.asarray(x)))
    tiny = np.float32(1.4e-45)
    expected = [tiny, -tiny, 2.0 ** -23, -2.0 ** -23, np.nan, np.nan, np.nan, 2.0 ** 104,
                -2.0 ** 104, tiny, -tiny]
    np.testing.assert_array_equal(out, np.array(expected, np.float32))


def test_spacing_float16_and_bfloat16():
    x16 = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 65504, -65504],
                   np.float16)
    out = _quiet(jnp.spacing, jnp.asarray(x16))
    assert out.dtype == np.float16
    # Float16 steps towards +inf (NumPy's float16 rule; JAX gives inf for -inf).
    expected = np.array([2.0 ** -24, 2.0 ** -24, 2.0 ** -10, 2.0 ** -11, np.nan, np.inf,
                         np.nan, np.inf, 32.0], np.float16)
    np.testing.assert_array_equal(np.asarray(out), expected)
    xb = np.array([0.0, -0.0, 1.0, -1.0, np.inf, 3e38], BF16)
    out = jnp.spacing(jnp.asarray(xb))
    assert out.dtype == BF16
    expected = np.array([2.0 ** -133, -2.0 ** -133, 2.0 ** -7, -2.0 ** -7, np.nan, 2.0 ** 120],
                        np.float32)
    np.testing.assert_array_equal(np.asarray(out).astype(np.float32), expected)


def test_spacing_float64_and_promotion(x64):
    x = np.array([0.0, 1.0, -3.5, 1e300, 5e-324, np.pi])
    np.testing.assert_array_equal(np.asarray(jnp.spacing(jnp.asarray(x))), np.spacing(x))
    ember.config.update("jax_enable_x64", False)
    out = jnp.spacing(jnp.array([0, 1, -1]))
    assert out.dtype == np.float32 and not out.weak_type
    np.testing.assert_array_equal(np.asarray(out), np.spacing(np.array([0, 1, -1], np.float32)))
    assert not jnp.spacing(1.0).weak_type and jnp.spacing(True).dtype == np.float32


def test_spacing_jit_vmap_and_errors():
    x = jnp.array([0.0, -0.0, 2.0, -1e-45, 7e30], jnp.float32)
    for backend in ("cpu", "interpreter"):
        np.testing.assert_array_equal(np.asarray(ember.jit(jnp.spacing, backend=backend)(x)),
                                      np.asarray(jnp.spacing(x)))
    np.testing.assert_array_equal(np.asarray(ember.vmap(jnp.spacing)(x)),
                                  np.asarray(jnp.spacing(x)))
    with pytest.raises(ValueError, match="spacing: not defined for complex"):
        jnp.spacing(1j)
    with pytest.raises(NotImplementedError, match="nextafter"):
        ember.grad(jnp.spacing)(1.0)


# ---------------------------------------------------------------- unwrap


def test_unwrap_keywords():
    rng = np.random.default_rng(0)
    p = np.cumsum(rng.normal(0, 2.5, (4, 9)), axis=1).astype(np.float32)
    wrapped = np.angle(np.exp(1j * p)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(jnp.unwrap(wrapped)), np.unwrap(wrapped),
                               rtol=1e-5, atol=1e-5)
    for kw in ({"discont": 1.0}, {"discont": 5.0}, {"period": 3.0}, {"axis": 0},
               {"axis": 0, "period": 9.0, "discont": 6.0}):
        np.testing.assert_allclose(np.asarray(jnp.unwrap(p, **kw)), np.unwrap(p, **kw),
                                   rtol=1e-5, atol=1e-4, err_msg=str(kw))
    # Traced period and discont.
    f = ember.jit(lambda p, per, d: jnp.unwrap(p, discont=d, period=per))
    np.testing.assert_allclose(np.asarray(f(p, 4.0, 2.5)), np.unwrap(p, 2.5, period=4.0),
                               rtol=1e-5, atol=1e-4)


def test_unwrap_integers_and_dtypes():
    ints = np.array([0, 5, 10, 2, 9, -3])
    np.testing.assert_array_equal(np.asarray(jnp.unwrap(jnp.asarray(ints), period=8)),
                                  np.unwrap(ints, period=8))
    assert jnp.unwrap(jnp.asarray(ints), period=8).dtype == np.int32
    out = jnp.unwrap(jnp.asarray(ints))  # the float period gives floats
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), np.unwrap(ints.astype(np.float64)), rtol=1e-6)
    # uint8 arithmetic wraps, as in JAX.
    u = jnp.unwrap(jnp.array([0, 5, 10, 2], jnp.uint8), period=8)
    assert u.dtype == np.uint8 and list(np.asarray(u)) == [0, 253, 250, 250]
    assert jnp.unwrap(jnp.array([1.0, 2.0], jnp.float16)).dtype == np.float16
    # An empty axis returns the (promoted) input; one sample is returned unchanged.
    e = jnp.unwrap(jnp.zeros((3, 0), jnp.int32))
    assert e.shape == (3, 0) and e.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(jnp.unwrap(jnp.array([5.0]))), [5.0])


def test_unwrap_gradient_and_vmap():
    p = jnp.array([0.0, 3.0, 6.5, 0.2, -3.0, 4.0])
    # The corrections are piecewise constant: d(sum(unwrap(p)^2))/dp = 2 unwrap(p).
    g = ember.grad(lambda x: jnp.sum(jnp.unwrap(x) ** 2))(p)
    np.testing.assert_allclose(np.asarray(g), 2 * np.asarray(jnp.unwrap(p)), rtol=1e-6)
    batch = jnp.stack([p, -p, 2 * p])
    out = ember.vmap(jnp.unwrap)(batch)
    np.testing.assert_allclose(np.asarray(out), np.unwrap(np.asarray(batch)), rtol=1e-5,
                               atol=1e-5)


def test_unwrap_errors():
    with pytest.raises(ValueError, match="unwrap: complex"):
        jnp.unwrap(jnp.array([1j, 2j]))
    with pytest.raises(IndexError, match="unwrap: axis"):
        jnp.unwrap(1.0)
    with pytest.raises(ValueError, match="unwrap: axis 1"):
        jnp.unwrap(jnp.ones(3), axis=1)
    with pytest.raises(TypeError, match="unwrap requires ndarray or scalar"):
        jnp.unwrap([1.0, 2.0])


# ---------------------------------------------------------------- gradient


def test_gradient_spacings_and_axes():
    rng = np.random.default_rng(1)
    f = rng.normal(size=(4, 5)).astype(np.float32)
    x0 = np.array([0.0, 0.5, 2.0, 2.25], np.float32)

    def check(ours, ref):
        ours = ours if isinstance(ours, list) else [ours]
        ref = list(ref) if isinstance(ref, (list, tuple)) else [ref]
        assert len(ours) == len(ref)
        for o, r in zip(ours, ref):
            np.testing.assert_allclose(np.asarray(o), r, rtol=1e-5, atol=1e-5)

    check(jnp.gradient(f), np.gradient(f))
    check(jnp.gradient(f, 0.25), np.gradient(f, 0.25))
    check(jnp.gradient(f, x0, 3.0), np.gradient(f, x0, 3.0))
    check(jnp.gradient(f, axis=1), np.gradient(f, axis=1))
    check(jnp.gradient(f, 2.0, axis=-2), np.gradient(f, 2.0, axis=-2))
    check(jnp.gradient(f, 2.0, x0, axis=(1, 0)), np.gradient(f, 2.0, x0, axis=(1, 0)))
    check(jnp.gradient(f, jnp.asarray(0.5)), np.gradient(f, 0.5))
    check(jnp.gradient(f, edge_order=1), np.gradient(f, edge_order=1))
    assert isinstance(jnp.gradient(f), list) and not isinstance(jnp.gradient(f, axis=0), list)
    assert jnp.gradient(jnp.array(1.0)) == [] and jnp.gradient(f, axis=()) == []
    assert jnp.gradient(jnp.zeros((0, 3)), axis=1).shape == (0, 3)
    np.testing.assert_array_equal(np.asarray(jnp.gradient(jnp.array([1.0, 3.0]))), [2.0, 2.0])


def test_gradient_dtypes():
    ints = jnp.array([1, 4, 9])
    assert jnp.gradient(ints).dtype == np.float32 and not jnp.gradient(ints).weak_type
    assert jnp.gradient(ints, 0.5).weak_type  # as in JAX: int array with a Python float
    np.testing.assert_allclose(np.asarray(jnp.gradient(ints, 0.5)), [6.0, 8.0, 10.0])
    half = jnp.array([1.0, 2.0, 4.0], jnp.float16)
    assert jnp.gradient(half).dtype == np.float16
    assert jnp.gradient(half, jnp.arange(3.0)).dtype == np.float32  # promoted together
    c = jnp.gradient(jnp.array([1j, 2, 3]))
    assert c.dtype == np.complex64
    np.testing.assert_allclose(np.asarray(c), np.gradient(np.array([1j, 2, 3])), rtol=1e-6)


def test_gradient_jit_vmap_grad():
    f = jnp.array([1.0, 2.0, 4.0, 7.0, 11.0])
    x = jnp.array([0.0, 1.0, 1.5, 3.5, 4.0])
    ref = np.gradient(np.asarray(f), np.asarray(x))
    np.testing.assert_allclose(np.asarray(ember.jit(jnp.gradient)(f, x)), ref, rtol=1e-6)
    batched = ember.vmap(jnp.gradient, in_axes=(0, None))(jnp.stack([f, 2 * f]), x)
    np.testing.assert_allclose(np.asarray(batched), [ref, 2 * ref], rtol=1e-6)
    # gradient is linear in f: the VJP of sum(gradient(f)) is the column sums of its matrix.
    g = ember.grad(lambda v: jnp.sum(jnp.gradient(v)))(f)
    eye = np.eye(5)
    expected = np.array([np.gradient(e).sum() for e in eye])
    np.testing.assert_allclose(np.asarray(g), expected, rtol=1e-6)


def test_gradient_errors():
    f = jnp.ones((3, 4))
    with pytest.raises(ValueError, match="gradient: .*too small"):
        jnp.gradient(jnp.ones((3, 1)))
    with pytest.raises(ValueError, match="gradient: a spacing array of length 2"):
        jnp.gradient(f, jnp.array([0.0, 1.0]), 2.0)
    with pytest.raises(ValueError, match="gradient: spacing arrays must be 1-D"):
        jnp.gradient(f, jnp.ones((3, 4)), 1.0)
    with pytest.raises(TypeError, match="gradient: invalid number of spacing arguments 3"):
        jnp.gradient(f, 1.0, 2.0, 3.0)
    with pytest.raises(NotImplementedError, match="gradient: edge_order=2"):
        jnp.gradient(f, edge_order=2)
    with pytest.raises(ValueError, match="gradient: axis 2"):
        jnp.gradient(f, axis=2)
    with pytest.raises(TypeError, match="gradient: axis must be an integer"):
        jnp.gradient(f, axis=0.5)
    with pytest.raises(TypeError, match="gradient requires ndarray or scalar"):
        jnp.gradient(f, [0.0, 1.0, 2.0])


# ---------------------------------------------------------------- bitwise_count


def test_bitwise_count_extremes():
    cases = {
        np.int32: [0, 1, -1, 2 ** 31 - 1, -2 ** 31, 12345, -7],
        np.int8: [0, 1, -1, -128, 127, 85],
        np.uint8: [0, 1, 255, 170],
        np.uint32: [0, 2 ** 32 - 1, 2 ** 31, 0xF0F0F0F0],
    }
    for dt, values in cases.items():
        x = np.array(values, dt)
        out = jnp.bitwise_count(jnp.asarray(x))
        assert out.dtype == np.uint8
        np.testing.assert_array_equal(np.asarray(out), np.bitwise_count(x))
        np.testing.assert_array_equal(np.asarray(ember.jit(jnp.bitwise_count)(x)),
                                      np.bitwise_count(x))
    np.testing.assert_array_equal(np.asarray(jnp.bitwise_count(jnp.array([True, False]))),
                                  [1, 0])
    r = jnp.bitwise_count(7)
    assert r.dtype == np.uint8 and not r.weak_type and int(r) == 3


def test_bitwise_count_errors():
    with pytest.raises(TypeError, match="bitwise_count: x must have an integer"):
        jnp.bitwise_count(jnp.array([1.0]))
    with pytest.raises(TypeError, match="bitwise_count requires ndarray or scalar"):
        jnp.bitwise_count([3])


# ---------------------------------------------------------------- packbits / unpackbits


@pytest.mark.parametrize("bitorder", ["big", "little"])
@pytest.mark.parametrize("n", list(range(0, 18)) + [31, 64])
def test_packbits_lengths(n, bitorder):
    bits = (np.random.default_rng(n).random(n) < 0.5)
    packed = jnp.packbits(jnp.asarray(bits), bitorder=bitorder)
    np.testing.assert_array_equal(np.asarray(packed), np.packbits(bits, bitorder=bitorder))
    assert packed.dtype == np.uint8 and packed.shape == ((n + 7) // 8,)
    back = jnp.unpackbits(packed, count=n, bitorder=bitorder)
    np.testing.assert_array_equal(np.asarray(back), bits.astype(np.uint8))


def test_packbits_axes_and_values():
    a = np.random.default_rng(2).integers(-2, 3, size=(3, 10, 4)).astype(np.int32)
    for axis in (None, 0, 1, 2, -1):
        np.testing.assert_array_equal(np.asarray(jnp.packbits(a, axis=axis)),
                                      np.packbits(a, axis=axis), err_msg=str(axis))
    np.testing.assert_array_equal(np.asarray(jnp.packbits(jnp.array(3))), [128])
    jitted = ember.jit(lambda v: jnp.packbits(v, axis=1, bitorder="little"))(a)
    np.testing.assert_array_equal(np.asarray(jitted), np.packbits(a, axis=1, bitorder="little"))
    batched = ember.vmap(lambda v: jnp.packbits(v))(a)
    np.testing.assert_array_equal(np.asarray(batched), [np.packbits(r) for r in a])


def test_unpackbits_axes_and_count():
    u = np.array([[219, 96, 3], [1, 128, 255]], np.uint8)
    for kw in ({}, {"axis": 0}, {"axis": 1}, {"axis": -1, "bitorder": "little"},
               {"count": 5}, {"axis": 1, "count": 30}, {"count": -3}, {"axis": 0, "count": 0}):
        np.testing.assert_array_equal(np.asarray(jnp.unpackbits(u, **kw)),
                                      np.unpackbits(u, **kw), err_msg=str(kw))
    # A negative count larger than the bits gives nothing (JAX; NumPy raises).
    assert jnp.unpackbits(u, count=-100).shape == (0,)
    np.testing.assert_array_equal(np.asarray(jnp.unpackbits(jnp.array(5, jnp.uint8))),
                                  [0, 0, 0, 0, 0, 1, 0, 1])
    np.testing.assert_array_equal(np.asarray(jnp.unpackbits(u, count=np.int64(4))),
                                  np.unpackbits(u, count=4))
    jitted = ember.jit(lambda v: jnp.unpackbits(v, axis=0, count=11))(u)
    np.testing.assert_array_equal(np.asarray(jitted), np.unpackbits(u, axis=0, count=11))
    batched = ember.vmap(lambda v: jnp.unpackbits(v, count=-2))(u)
    np.testing.assert_array_equal(np.asarray(batched), [np.unpackbits(r, count=-2) for r in u])


def test_pack_unpack_errors():
    with pytest.raises(TypeError, match="packbits: a must have an integer or boolean"):
        jnp.packbits(jnp.ones(3))
    with pytest.raises(ValueError, match="packbits: 'bitorder'"):
        jnp.packbits(jnp.ones(3, bool), bitorder="LITTLE")
    with pytest.raises(IndexError, match="packbits: axis 2"):
        jnp.packbits(jnp.ones((2, 3), bool), axis=2)
    with pytest.raises(TypeError, match="packbits requires ndarray or scalar"):
        jnp.packbits([1, 0])
    with pytest.raises(TypeError, match="unpackbits: a must have dtype uint8"):
        jnp.unpackbits(jnp.array([5]))
    with pytest.raises(ValueError, match="unpackbits: 'bitorder'"):
        jnp.unpackbits(jnp.ones(3, jnp.uint8), bitorder=None)
    with pytest.raises(TypeError, match="unpackbits: count must be an integer"):
        jnp.unpackbits(jnp.ones(3, jnp.uint8), count=2.0)
    with pytest.raises(ValueError, match="unpackbits: axis 1"):
        jnp.unpackbits(jnp.ones(3, jnp.uint8), axis=1)


# ---------------------------------------------------------------- sort_complex


def test_sort_complex_order_and_nans():
    z = np.array([complex(np.nan, 1), 1 + 0j, complex(1, np.nan), 1 - 1j, complex(np.nan, 0),
                  -2 + 5j, complex(0.0, 1), complex(-0.0, 2)], np.complex64)
    out = np.asarray(jnp.sort_complex(jnp.asarray(z)))
    expected = np.sort_complex(z)
    np.testing.assert_array_equal(out.real, expected.real)
    np.testing.assert_array_equal(out.imag, expected.imag)
    # -0 and +0 compare equal (as in JAX and NumPy): the imaginary parts decide.
    assert not np.signbit(out.real[1]) and np.signbit(out.real[2])
    two = np.array([[5.0, 3, 4], [6, 9, 2]], np.float32)
    np.testing.assert_array_equal(np.asarray(jnp.sort_complex(two)), np.sort_complex(two))


def test_sort_complex_dtypes(x64):
    assert jnp.sort_complex(jnp.array([2, 1], jnp.int64)).dtype == np.complex128
    assert jnp.sort_complex(jnp.array([2, 1], jnp.int32)).dtype == np.complex64
    assert jnp.sort_complex(jnp.array([2.0, 1.0])).dtype == np.complex128
    ember.config.update("jax_enable_x64", False)
    for dt in (np.int8, np.uint8, np.float16, BF16, np.bool_, np.float32):
        out = jnp.sort_complex(jnp.asarray(np.array([1, 0, 1], dt)))
        assert out.dtype == np.complex64 and not out.weak_type
        np.testing.assert_array_equal(np.asarray(out), [0, 1, 1])


def test_sort_complex_jit_vmap_and_errors():
    z = jnp.array([[3 + 1j, 1 - 1j, 1 - 2j], [0j, -1j, 2 + 0j]])
    expected = np.sort_complex(np.asarray(z))
    for backend in ("cpu", "interpreter"):
        np.testing.assert_array_equal(
            np.asarray(ember.jit(jnp.sort_complex, backend=backend)(z)), expected)
    np.testing.assert_array_equal(np.asarray(ember.vmap(jnp.sort_complex)(z)), expected)
    g = ember.grad(lambda x: jnp.sum(jnp.real(jnp.sort_complex(x)) * jnp.arange(3.0)))(
        jnp.array([3.0, 1.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(g), [2.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="sort_complex: axis -1"):
        jnp.sort_complex(jnp.array(3.0))
    with pytest.raises(TypeError, match="sort_complex requires ndarray or scalar"):
        jnp.sort_complex([1.0])


# ---------------------------------------------------------------- against JAX


def _both(jax, fn, *args):
    """fn(namespace, *args) with ember.numpy and with jax.numpy."""
    return _quiet(fn, jnp, *args), _quiet(fn, jax.numpy, *args)


JAX_CASES = {
    "hanning_7": (lambda n: n.hanning(7), 1e-6),
    "blackman_6": (lambda n: n.blackman(6), 1e-6),
    "hamming_1": (lambda n: n.hamming(1), 0.0),
    "bartlett_float_M": (lambda n: n.bartlett(5.7), 1e-7),
    "kaiser_int_beta": (lambda n: n.kaiser(6, 3), 2e-6),
    "kaiser_f16_beta": (lambda n: n.kaiser(6, n.array(3.0, n.float16)), 2e-3),
    "kaiser_large_beta": (lambda n: n.kaiser(5, 100.0), 0.0),
    "i0_weak": (lambda n: n.i0(2.5), 2e-6),
    "i0_int": (lambda n: n.i0(n.array([-3, 0, 4])), 2e-6),
    # (the samples of linspace may differ from JAX's by an ulp, which moves i0 near 90 by 8e-6)
    "i0_f32_range": (lambda n: n.i0(n.linspace(-90.0, 90.0, 73)), 1.6e-5),
    "i0_f16": (lambda n: n.i0(n.array([0.5, -3.0, 9.0, 11.0, 12.0], n.float16)), 2e-3),
    "i0_bf16": (lambda n: n.i0(n.array([0.5, -3.0, 9.0, 60.0, 89.0], n.bfloat16)), 1e-2),
    "i0_specials": (lambda n: n.i0(n.array([np.inf, -np.inf, np.nan, 89.0])), 0.0),
    "spacing_f32": (lambda n: n.spacing(n.array([0.0, -0.0, 1.0, -3.0, np.inf, -np.inf,
                                                 3.4e38, 1e-45])), 0.0),
    "spacing_f16": (lambda n: n.spacing(n.array([0.0, -0.0, 1.0, -1.0, -np.inf, 65504.0,
                                                 -65504.0], n.float16)), 0.0),
    "spacing_bf16": (lambda n: n.spacing(n.array([0.0, -0.0, 1.0, -1.0], n.bfloat16)), 0.0),
    "spacing_int": (lambda n: n.spacing(n.array([0, 3, -8], n.int8)), 0.0),
    "unwrap_period_discont": (lambda n: n.unwrap(n.array([0.0, 3.0, 6.5, 0.2, -3.0]),
                                                 discont=1.0, period=4), 1e-6),
    "unwrap_int_float_period": (lambda n: n.unwrap(n.array([0, 5, 10, 2]), period=8.5), 1e-6),
    "unwrap_int8": (lambda n: n.unwrap(n.array([0, 5, 10, 2], n.int8), period=8), 0.0),
    "unwrap_uint8": (lambda n: n.unwrap(n.array([0, 5, 10, 2], n.uint8), period=8), 0.0),
    "unwrap_bool": (lambda n: n.unwrap(n.array([True, False, True])), 0.0),
    "unwrap_f16_discont_f32": (lambda n: n.unwrap(n.array([0.0, 3.0, 6.5], n.float16),
                                                  discont=n.array(3.0)), 1e-3),
    "unwrap_empty_int": (lambda n: n.unwrap(n.zeros((2, 0), n.int32)), 0.0),
    "gradient_weak": (lambda n: n.gradient(n.array([1, 4, 9]), 0.5), 1e-6),
    "gradient_unit_weak": (lambda n: n.gradient(n.broadcast_to(n.asarray(1.0), (3,))), 0.0),
    "gradient_f16_f32_coords": (lambda n: n.gradient(n.array([1.0, 2.0, 4.0], n.float16),
                                                     n.array([0.0, 1.0, 3.0])), 1e-6),
    "gradient_axes": (lambda n: n.gradient(n.arange(12.0).reshape(3, 4) ** 2, 2.0,
                                           n.array([0.0, 1.0, 3.0]), axis=(1, 0)), 1e-6),
    "gradient_dup_axis": (lambda n: n.gradient(n.arange(6.0).reshape(2, 3), axis=(1, 1)),
                          0.0),
    "bitwise_count_int8": (lambda n: n.bitwise_count(n.array([-128, -1, 0, 127], n.int8)), 0),
    "bitwise_count_scalar": (lambda n: n.bitwise_count(True), 0.0),
    "packbits_odd": (lambda n: n.packbits(n.array([[1, 0, 1], [0, 1, 1]]), axis=1,
                                          bitorder="little"), 0.0),
    "packbits_scalar": (lambda n: n.packbits(n.array(7, n.int8)), 0.0),
    "unpackbits_count": (lambda n: n.unpackbits(n.array([219, 96], n.uint8), count=-20), 0.0),
    "unpackbits_pad": (lambda n: n.unpackbits(n.array([[3], [4]], n.uint8), axis=1, count=10),
                       0.0),
    "sort_complex_bool": (lambda n: n.sort_complex(n.array([True, False])), 0.0),
    "sort_complex_nan": (lambda n: n.sort_complex(n.array([complex(np.nan, 1), 1 + 0j,
                                                           1 - 1j, complex(1, np.nan)])), 0.0),
}


@pytest.mark.parametrize("name", sorted(JAX_CASES))
def test_matches_jax(name, jax):
    fn, tol = JAX_CASES[name]
    ours, theirs = _both(jax, fn)
    if isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _same_as_jax(o, t, rtol=tol, atol=tol)
    else:
        _same_as_jax(ours, theirs, rtol=tol, atol=tol)


ERROR_CASES = {
    "window_negative": lambda n: n.hanning(-1),
    "kaiser_beta_shape": lambda n: n.kaiser(4, n.ones(2)),
    "kaiser_complex": lambda n: n.kaiser(4, 1j),
    "i0_complex": lambda n: n.i0(n.array([1j])),
    "spacing_complex": lambda n: n.spacing(1j),
    "unwrap_scalar": lambda n: n.unwrap(1.0),
    "unwrap_complex": lambda n: n.unwrap(n.array([1j, 2j])),
    "gradient_short": lambda n: n.gradient(n.ones(1)),
    "gradient_bad_count": lambda n: n.gradient(n.ones((2, 2)), 1.0, 2.0, 3.0),
    "gradient_bad_length": lambda n: n.gradient(n.ones(3), n.ones(2)),
    "gradient_edge_order": lambda n: n.gradient(n.ones(3), edge_order=2),
    "bitwise_count_float": lambda n: n.bitwise_count(n.ones(2)),
    "packbits_float": lambda n: n.packbits(n.ones(2)),
    "packbits_order": lambda n: n.packbits(n.ones(2, bool), bitorder="middle"),
    "packbits_axis": lambda n: n.packbits(n.ones((2, 2), bool), axis=3),
    "unpackbits_int32": lambda n: n.unpackbits(n.ones(2, n.int32)),
    "unpackbits_count_float": lambda n: n.unpackbits(n.ones(2, n.uint8), count=1.5),
    "sort_complex_scalar": lambda n: n.sort_complex(1.0),
}


@pytest.mark.parametrize("name", sorted(ERROR_CASES))
def test_errors_match_jax_classes(name, jax):
    """Where JAX raises, ember raises the same class or a subclass (with its own message
    naming the function)."""
    fn = ERROR_CASES[name]
    with pytest.raises(Exception) as theirs:
        _quiet(fn, jax.numpy)
    with pytest.raises(type(theirs.value)):
        _quiet(fn, jnp)


def test_grads_match_jax(jax):
    x = np.array([-9.0, -2.0, 0.0, 0.5, 3.0, 12.0, 40.0], np.float32)
    ours = np.asarray(ember.vmap(ember.grad(jnp.i0))(x))
    theirs = np.asarray(jax.vmap(jax.grad(jax.numpy.i0))(x))
    np.testing.assert_allclose(ours, theirs, rtol=2e-5)
    ours = ember.grad(lambda b: jnp.sum(jnp.kaiser(8, b)))(2.5)
    theirs = jax.grad(lambda b: jax.numpy.sum(jax.numpy.kaiser(8, b)))(2.5)
    np.testing.assert_allclose(float(ours), float(theirs), rtol=2e-5)
    f = np.array([1.0, 2.0, 4.0, 7.0], np.float32)
    ours = ember.grad(lambda v: jnp.sum(jnp.gradient(v) ** 2))(f)
    theirs = jax.grad(lambda v: jax.numpy.sum(jax.numpy.gradient(v) ** 2))(f)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6)
