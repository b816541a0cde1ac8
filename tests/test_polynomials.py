"""Targeted tests for convolve, correlate, polyval, polyadd, polysub, polymul, polydiv,
polyder, polyint, poly, vander and trim_zeros.

Keyword arguments, modes, edge cases, transformations and bad input that the op-record table
cannot express. Values are checked against NumPy (or a float64 formula), dtypes / weak types /
error classes against JAX where it is installed.
"""

from __future__ import annotations

import os
import warnings

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as jnp
import ember.numpy.polynomials as polynomials
from ember import errors
from ember.test_util import check_grads
from tests.op_records.polynomials import long_division

BF16 = np.dtype(ml_dtypes.bfloat16)
RNG = np.random.default_rng(0)


def A(x, dtype=None):
    return jnp.asarray(np.asarray(x, dtype=dtype))


def weak(value, shape):
    """A weakly typed array (a Python scalar broadcast)."""
    return jnp.broadcast_to(jnp.asarray(value), shape)


def close(actual, expected, tol=1e-5):
    actual = np.asarray(actual)
    actual = actual.astype(np.complex128 if np.iscomplexobj(actual) else np.float64)
    np.testing.assert_allclose(actual, np.asarray(expected), rtol=tol, atol=tol, equal_nan=True)


def same(actual, expected):
    assert np.asarray(actual).shape == np.shape(expected)
    np.testing.assert_array_equal(np.asarray(actual), expected)


X7 = RNG.normal(size=7).astype(np.float32)
Y3 = RNG.normal(size=3).astype(np.float32)
Y4 = RNG.normal(size=4).astype(np.float32)
C5 = (RNG.normal(size=5) + 1j * RNG.normal(size=5)).astype(np.complex64)
C3 = (RNG.normal(size=3) + 1j * RNG.normal(size=3)).astype(np.complex64)


# ---------------------------------------------------------------- convolve / correlate


@pytest.mark.parametrize("fn", ["convolve", "correlate"])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("a,v", [(X7, Y3), (Y3, X7), (Y4, Y4), (X7[:1], Y3), (X7, Y4),
                                 (Y4, X7)])
def test_conv_modes_match_numpy(fn, mode, a, v):
    out = getattr(jnp, fn)(A(a), A(v), mode=mode)
    assert out.dtype == np.float32
    close(out, getattr(np, fn)(a.astype(np.float64), v.astype(np.float64), mode=mode))


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("a,v", [(C5, C3), (C3, C5), (C5, Y3), (Y3, C5)])
def test_complex_conv_and_conjugating_correlate(mode, a, v):
    for fn in ("convolve", "correlate"):
        out = getattr(jnp, fn)(A(a), A(v), mode=mode)
        assert out.dtype == np.complex64
        close(out, getattr(np, fn)(a.astype(np.complex128), v.astype(np.complex128),
                                   mode=mode))


def test_conv_default_modes_and_keywords():
    close(jnp.convolve(A(X7), A(Y3)), np.convolve(X7, Y3))  # full
    close(jnp.correlate(A(X7), A(Y3)), np.correlate(X7, Y3))  # valid
    close(jnp.convolve(a=A(X7), v=A(Y3), mode="same"), np.convolve(X7, Y3, "same"))
    close(jnp.correlate(v=A(Y3), a=A(X7), mode="full"), np.correlate(X7, Y3, "full"))
    for p in (None, "highest", "default", "float32", ember.lax.Precision.HIGH,
              ("highest", "default")):
        close(jnp.convolve(A(X7), A(Y3), precision=p), np.convolve(X7, Y3))


def test_conv_dtypes():
    ints = A([1, 2, 3], np.int8), A([1, -1], np.int8)
    assert jnp.convolve(*ints).dtype == np.float32
    same(jnp.convolve(A([True, False]), A([True])), np.array([1.0, 0.0], np.float32))
    assert jnp.convolve(A([1, 2], np.float16), A([1, 2], np.float16)).dtype == np.float16
    assert jnp.convolve(A([1, 2], BF16), A([1, 2], BF16)).dtype == BF16
    assert jnp.convolve(A([1, 2], np.float16), A([1, 2], np.float32)).dtype == np.float32
    # weak inputs give a weak result; one strong input a strong one
    assert jnp.convolve(weak(1.0, (3,)), weak(2, (2,))).weak_type
    assert not jnp.convolve(weak(1.0, (3,)), A([1.0, 2.0])).weak_type


def test_conv_preferred_element_type():
    a, v = np.array([100, 100, -3], np.int8), np.array([100, 7], np.int8)
    out = jnp.convolve(A(a), A(v), preferred_element_type=jnp.int32)
    assert out.dtype == np.int32
    same(out, np.convolve(a.astype(np.int64), v.astype(np.int64)).astype(np.int32))
    # accumulation wraps in the requested integer type, as in JAX
    out = jnp.convolve(A([200, 200], np.uint8), A([2, 2], np.uint8),
                       preferred_element_type=jnp.uint8)
    same(out, np.array([144, 32, 144], np.uint8))
    out = jnp.correlate(A(a), A(v), mode="full", preferred_element_type=jnp.float32)
    assert out.dtype == np.float32
    close(out, np.correlate(a.astype(np.float64), v.astype(np.float64), "full"))
    same(jnp.convolve(A([True, False]), A([True, True]), preferred_element_type=bool),
         np.array([True, True, False]))
    f16 = jnp.convolve(A([1, 2], np.float16), A([3, 4], np.float16),
                       preferred_element_type=jnp.float32)
    assert f16.dtype == np.float32
    same(f16, np.array([3.0, 10.0, 8.0], np.float32))
    assert jnp.convolve(weak(1.0, (3,)), weak(2.0, (2,)),
                        preferred_element_type=jnp.float32).weak_type


def test_conv_keeps_infinities_and_nans_local():
    x = np.array([np.inf, 1.0, 2.0, np.nan, 3.0, 4.0, 5.0], np.float32)
    for mode in ("full", "same", "valid"):
        with np.errstate(invalid="ignore"):
            expected = np.convolve(x.astype(np.float64), [1.0, 1.0], mode)
        close(jnp.convolve(A(x), A([1.0, 1.0]), mode=mode), expected)


@pytest.mark.parametrize("fn", ["convolve", "correlate"])
@pytest.mark.parametrize("mode", ["full", "same"])
@pytest.mark.parametrize("n,m", [(300, 64), (300, 65), (65, 300), (40, 40), (41, 2)])
def test_conv_with_padding_matches_numpy_under_jit(fn, mode, n, m):
    # The windows reaching into the padding run apart from the interior ones (one
    # concatenated result): every output position against NumPy, eagerly and under jit.
    a = RNG.normal(size=n).astype(np.float32)
    v = RNG.normal(size=m).astype(np.float32)
    want = getattr(np, fn)(a.astype(np.float64), v.astype(np.float64), mode=mode)
    close(getattr(jnp, fn)(A(a), A(v), mode=mode), want, tol=2e-5)
    close(ember.jit(lambda x, y: getattr(jnp, fn)(x, y, mode=mode))(A(a), A(v)), want,
          tol=2e-5)


def test_conv_in_several_chunks(monkeypatch):
    """Long kernels are summed over chunks of windows; forced here with a tiny chunk size."""
    monkeypatch.setattr(polynomials, "_CHUNK", 7)
    x, y = RNG.normal(size=9).astype(np.float32), RNG.normal(size=5).astype(np.float32)
    for mode in ("full", "same", "valid"):
        close(jnp.convolve(A(x), A(y), mode=mode), np.convolve(x, y, mode))
        close(jnp.correlate(A(y), A(x), mode=mode), np.correlate(y, x, mode))
        close(ember.jit(lambda a, b, m=mode: jnp.convolve(a, b, mode=m))(A(x), A(y)),
              np.convolve(x, y, mode))
    ember.config.update("jax_enable_x64", True)
    try:
        check_grads(lambda a, b: jnp.convolve(a, b, mode="same"), (x.astype(np.float64),
                    y.astype(np.float64)), order=2, modes=("fwd", "rev"))
    finally:
        ember.config.update("jax_enable_x64", False)


def test_conv_jit_vmap_grad():
    xs = RNG.normal(size=(4, 7)).astype(np.float32)
    out = ember.vmap(lambda a: jnp.convolve(a, A(Y3), mode="same"))(A(xs))
    close(out, np.stack([np.convolve(r, Y3, "same") for r in xs]))
    out = ember.vmap(jnp.correlate, in_axes=(None, 0))(A(X7), A(xs[:, :3]))
    close(out, np.stack([np.correlate(X7, r) for r in xs[:, :3]]))
    jitted = ember.jit(jnp.convolve, static_argnames="mode")
    close(jitted(A(X7), A(Y3), mode="valid"), np.convolve(X7, Y3, "valid"))
    # d/dx sum(w * convolve(x, y)) = correlate(w, y) (valid), d/dy = correlate(w, x)
    w = RNG.normal(size=9).astype(np.float32)
    gx, gy = ember.grad(lambda x, y: jnp.sum(A(w) * jnp.convolve(x, y)), argnums=(0, 1))(
        A(X7), A(Y3))
    close(gx, np.correlate(w, Y3, "valid"), 1e-4)
    close(gy, np.correlate(w, X7, "valid"), 1e-4)


@pytest.mark.parametrize("fn", ["convolve", "correlate"])
def test_conv_errors(fn):
    f = getattr(jnp, fn)
    with pytest.raises(ValueError, match=f"{fn}.*empty"):
        f(A([], np.float32), A([1.0]))
    with pytest.raises(ValueError, match=f"{fn}.*empty"):
        f(A([1.0]), A([], np.float32))
    with pytest.raises(ValueError, match=f"{fn}.*1-dimensional.*a of shape"):
        f(jnp.ones((2, 2)), A([1.0]))
    with pytest.raises(ValueError, match=f"{fn}.*1-dimensional.*v of shape"):
        f(A([1.0]), 2.0)
    with pytest.raises(ValueError, match=f"{fn}: mode"):
        f(A([1.0]), A([1.0]), mode="foo")
    with pytest.raises(ValueError, match=f"{fn}: mode"):
        f(A([1.0]), A([1.0]), mode=None)
    with pytest.raises(TypeError, match=fn):
        f([1.0, 2.0], A([1.0]))
    with pytest.raises(ValueError, match=f"{fn}: precision"):
        f(A([1.0]), A([1.0]), precision="foo")
    with pytest.raises(TypeError, match=f"{fn}.*incompatible"):
        f(A([1.0]), A([1.0]), preferred_element_type=jnp.int32)
    with pytest.raises(TypeError, match=f"{fn}.*narrower"):
        f(A([1.0]), A([1.0]), preferred_element_type=jnp.float16)
    with pytest.raises(TypeError, match=f"{fn}.*signedness"):
        f(A([1], np.int8), A([1], np.int8), preferred_element_type=jnp.uint8)
    with pytest.raises(TypeError, match=f"{fn}.*preferred_element_type"):
        f(A([1]), A([1]), preferred_element_type="foo")


# ---------------------------------------------------------------- polyval


def test_polyval_matches_numpy():
    p = RNG.normal(size=5).astype(np.float32)
    x = RNG.normal(size=(2, 3)).astype(np.float32)
    close(jnp.polyval(A(p), A(x)), np.polyval(p.astype(np.float64), x), 1e-4)
    close(jnp.polyval(A(p), 1.5), np.polyval(p.astype(np.float64), 1.5), 1e-4)
    # 2-D p: one polynomial per column, broadcast against x
    p2 = RNG.normal(size=(3, 4)).astype(np.float32)
    x2 = RNG.normal(size=(2, 1)).astype(np.float32)
    close(jnp.polyval(A(p2), A(x2)), np.polyval(p2.astype(np.float64), x2), 1e-4)
    same(jnp.polyval(A([], np.float32), A([1.0, 2.0])), np.zeros(2, np.float32))
    c = np.array([1j, 2, 3 - 1j], np.complex64)
    close(jnp.polyval(A(c), A([1.0, 2j])), np.polyval(c.astype(np.complex128), [1.0, 2j]))


def test_polyval_dtypes_and_unroll():
    out = jnp.polyval(A([1, 2, 3]), A([0, 1, 2]))
    assert out.dtype == np.int32
    same(out, np.array([3, 6, 11], np.int32))
    assert jnp.polyval(A([1, 2, 3]), 2.0).dtype == np.float32
    assert jnp.polyval(A([1, 2, 3]), 2).dtype == np.int32
    assert jnp.polyval(A([1, 2, 3], np.float16), 2).dtype == np.float16
    assert not jnp.polyval(weak(1.0, (3,)), 2.0).weak_type
    same(jnp.polyval(A([True, False]), A([True])), np.array([True]))
    # integer arithmetic wraps like NumPy's
    p8, x8 = np.array([7, 5, 3], np.int8), np.array([9, -11], np.int8)
    same(jnp.polyval(A(p8), A(x8)), np.polyval(p8, x8))
    for unroll in (1, 3, 16, True, np.int64(2)):
        close(jnp.polyval(A([1.0, 2.0, 3.0]), A([2.0]), unroll=unroll), [11.0])


def test_polyval_transformations():
    p = RNG.normal(size=4).astype(np.float32)
    xs = RNG.normal(size=(3, 5)).astype(np.float32)
    close(ember.jit(jnp.polyval)(A(p), A(xs)), np.polyval(p.astype(np.float64), xs), 1e-4)
    close(ember.vmap(jnp.polyval, in_axes=(None, 0))(A(p), A(xs)),
          np.polyval(p.astype(np.float64), xs), 1e-4)
    # d/dx p(x) = polyder(p)(x); d/dp_i p(x) = x ** (n - 1 - i)
    x0 = 0.7
    close(ember.grad(jnp.polyval, argnums=1)(A(p), x0), np.polyval(np.polyder(p), x0), 1e-4)
    close(ember.grad(jnp.polyval)(A(p), x0), x0 ** np.arange(3, -1, -1), 1e-5)


def test_polyval_errors():
    with pytest.raises(ValueError, match="polyval.*p must") as info:
        jnp.polyval(A(2.0), A([1.0]))
    assert isinstance(info.value, IndexError)  # JAX's class
    with pytest.raises(ValueError):
        jnp.polyval(jnp.ones((3, 2)), A([1.0, 2.0, 3.0]))
    with pytest.raises(TypeError, match="polyval.*unroll"):
        jnp.polyval(A([1.0]), A([1.0]), unroll=1.5)
    with pytest.raises(TypeError, match="polyval"):
        jnp.polyval([1.0, 2.0], A([1.0]))


# ---------------------------------------------------------------- polyadd / polysub / polymul


@pytest.mark.parametrize("n1,n2", [(3, 5), (5, 3), (4, 4), (1, 6), (0, 0)])
def test_polyadd_polysub_match_numpy(n1, n2):
    a = RNG.normal(size=n1).astype(np.float32)
    b = RNG.normal(size=n2).astype(np.float32)
    close(jnp.polyadd(A(a), A(b)), np.polyadd(a, b) if n1 + n2 else np.zeros(0))
    close(jnp.polysub(A(a), A(b)), np.polysub(a, b) if n1 + n2 else np.zeros(0))


def test_polyadd_polysub_dtypes_and_2d():
    out = jnp.polysub(A([1, 2], np.uint8), A([3], np.uint8))
    assert out.dtype == np.uint8
    same(out, np.array([1, 255], np.uint8))
    assert jnp.polyadd(A([1, 2], np.int8), A([1], np.int8)).dtype == np.int8
    assert jnp.polyadd(weak(1.0, (3,)), weak(2.0, (2,))).weak_type
    assert jnp.polyadd(weak(1.0, (3,)), A([1, 2])).weak_type  # weak float + int32
    assert not jnp.polyadd(weak(1.0, (3,)), A([1.0, 2.0])).weak_type
    # like JAX, the shorter operand is added into the last rows of the longer one
    same(jnp.polyadd(jnp.ones((3, 2)), A([[1.0], [2.0]])), [[1, 1], [2, 2], [3, 3]])
    same(jnp.polyadd(jnp.ones((2, 2)), A([1.0, 2.0])), [[2, 3], [2, 3]])
    same(jnp.polysub(jnp.ones((3, 2)), jnp.ones((2,))), [[1, 1], [0, 0], [0, 0]])


def test_polyadd_polysub_errors():
    for fn in (jnp.polyadd, jnp.polysub):
        name = fn.__name__
        with pytest.raises(TypeError, match=f"{name}.*bool"):
            fn(A([True, False]), A([True]))
        with pytest.raises(ValueError, match=name) as info:
            fn(A(1.0), A([1.0, 2.0]))
        assert isinstance(info.value, IndexError)  # JAX's class
        with pytest.raises(ValueError, match=f"{name}.*broadcast"):
            fn(A([1.0, 2.0]), A([], np.float32))  # JAX cannot add [] to the whole of a1
        with pytest.raises(ValueError, match=f"{name}.*broadcast"):
            fn(jnp.ones((3, 1)), jnp.ones((2, 2)))
        with pytest.raises(TypeError, match=name):
            fn([1.0], A([1.0]))


def test_polymul():
    a, b = np.array([1.0, 2.0, 3.0], np.float32), np.array([2.0, -1.0], np.float32)
    close(jnp.polymul(A(a), A(b)), np.polymul(a, b))
    out = jnp.polymul(A([1, 2]), A([1, 1]))
    assert out.dtype == np.float32
    same(out, np.array([1.0, 3.0, 2.0], np.float32))
    same(jnp.polymul(A([], np.float32), A([1.0, 1.0])), np.zeros(2, np.float32))
    same(jnp.polymul(A([], np.float32), A([], np.float32)), np.zeros(1, np.float32))
    # leading zeros are kept unless asked (NumPy always strips them)
    same(jnp.polymul(A([0.0, 1.0, 2.0]), A([0.0, 1.0])), [0, 0, 1, 2])
    same(jnp.polymul(A([0.0, 0.0, 1.0, 2.0]), A([0.0, 1.0, 1.0]), trim_leading_zeros=True),
         [1, 3, 2])
    same(jnp.polymul(A([0.0, 0.0]), A([0.0, 1.0, 1.0]), trim_leading_zeros=True), [0, 0])
    assert jnp.polymul(weak(1.0, (3,)), weak(1.0, (2,))).weak_type
    assert not jnp.polymul(weak(1.0, (0,)), weak(1.0, (2,))).weak_type  # [] -> strong [0]
    grad = ember.grad(lambda x: jnp.sum(jnp.polymul(x, x, trim_leading_zeros=True)))(
        A([0.0, 1.0, 2.0]))
    same(grad, [0.0, 6.0, 6.0])
    with pytest.raises(errors.ConcretizationTypeError):
        ember.jit(lambda a, b: jnp.polymul(a, b, trim_leading_zeros=True))(A([0, 1.0]),
                                                                           A([1.0, 2.0]))
    with pytest.raises(TypeError, match="polymul.*scalar"):
        jnp.polymul(A(2.0), A([1.0]))
    with pytest.raises(ValueError, match="polymul.*a1.*1-D"):
        jnp.polymul(jnp.ones((2, 2)), A([1.0]))


# ---------------------------------------------------------------- polydiv


@pytest.mark.parametrize("nu,nv", [(6, 2), (6, 3), (4, 4), (2, 3), (1, 1), (0, 2)])
def test_polydiv_matches_long_division(nu, nv):
    u = RNG.normal(size=nu).astype(np.float32)
    v = (RNG.uniform(0.5, 2.0, size=nv) * RNG.choice([-1, 1], size=nv)).astype(np.float32)
    q, r = jnp.polydiv(A(u), A(v))
    eq, er = long_division(u, v)
    close(q, eq, 1e-4)
    close(r, er, 1e-4)
    assert r.shape == u.shape  # not trimmed
    if nu >= nv:  # NumPy agrees on the quotient and on the trimmed remainder
        nq, nr = np.polydiv(u.astype(np.float64), v.astype(np.float64))
        close(q, nq, 1e-4)
        close(r[-len(nr):], nr, 1e-4)


def test_polydiv_options_and_dtypes():
    q, r = jnp.polydiv(A([1.0, 2.0, 3.0, 4.0]), A([1.0, 1.0]), trim_leading_zeros=True)
    same(q, [1.0, 1.0, 2.0])
    same(r, [2.0])
    q, r = jnp.polydiv(A([1.0, 1.0]), A([1.0, 1.0]), trim_leading_zeros=True)
    same(q, [1.0])
    assert r.shape == (0,)
    q, r = jnp.polydiv(A([1, 2, 3], np.int8), A([2, 1], np.int8))
    assert q.dtype == r.dtype == np.float32
    close(q, [0.5, 0.75])
    close(r, [0.0, 0.0, 2.25])
    q, r = jnp.polydiv(weak(2.0, (3,)), weak(1.0, (2,)))
    assert not q.weak_type and r.weak_type  # as in JAX
    with np.errstate(all="ignore"):
        q, r = jnp.polydiv(A([1.0, 2.0]), A([0.0, 1.0]))
    same(q, [np.inf])
    same(r, [np.nan, -np.inf])
    c = jnp.polydiv(A([1j, 2, 3]), A([2, 1j]))
    close(c[0], [0.5j, 1.25])
    close(c[1], [0, 0, 3 - 1.25j])


def test_polydiv_transformations():
    u, v = A([1.0, 2.0, 3.0, 4.0]), A([2.0, 1.0])
    for got, want in zip(ember.jit(jnp.polydiv)(u, v), jnp.polydiv(u, v)):
        close(got, np.asarray(want))
    us = RNG.normal(size=(3, 4)).astype(np.float32)
    q, r = ember.vmap(jnp.polydiv, in_axes=(0, None))(A(us), v)
    for i in range(3):
        eq, er = long_division(us[i], [2.0, 1.0])
        close(q[i], eq, 1e-5)
        close(r[i], er, 1e-5)
    ember.config.update("jax_enable_x64", True)
    try:
        check_grads(lambda a, b: jnp.polydiv(a, b)[0] + jnp.sum(jnp.polydiv(a, b)[1]),
                    (np.array([1.0, -2.0, 0.5, 3.0]), np.array([1.5, -0.5])), order=2,
                    modes=("fwd", "rev"))
    finally:
        ember.config.update("jax_enable_x64", False)
    with pytest.raises(errors.ConcretizationTypeError):
        ember.jit(lambda a, b: jnp.polydiv(a, b, trim_leading_zeros=True))(u, v)


def test_polydiv_errors():
    with pytest.raises(ValueError, match="polydiv.*divisor") as info:
        jnp.polydiv(A([1.0]), A([], np.float32))
    assert isinstance(info.value, IndexError)  # JAX's class
    with pytest.raises(TypeError, match="polydiv.*u.*scalar"):
        jnp.polydiv(A(1.0), A([1.0]))
    with pytest.raises(ValueError, match="polydiv.*u.*1-D"):
        jnp.polydiv(jnp.ones((3, 2)), A([1.0, 2.0]))
    with pytest.raises(TypeError, match="polydiv"):
        jnp.polydiv(A([1.0]), [1.0])


# ---------------------------------------------------------------- polyder / polyint


P5 = np.array([2.0, -1.0, 0.5, 3.0, 1.0], np.float32)


@pytest.mark.parametrize("m", [0, 1, 2, 4, 5, 7])
def test_polyder_matches_numpy(m):
    close(jnp.polyder(A(P5), m), np.polyder(P5.astype(np.float64), m))
    close(jnp.polyder(p=A(P5), m=m), np.polyder(P5.astype(np.float64), m))


def test_polyder_dtypes_and_shapes():
    assert jnp.polyder(A([1, 2, 3])).dtype == np.float32
    assert jnp.polyder(A([1, 2, 3], np.float16)).dtype == np.float16
    assert jnp.polyder(A([1, 2, 3]), 0).dtype == np.float32
    assert not jnp.polyder(weak(1.0, (3,))).weak_type
    assert jnp.polyder(weak(1.0, (3,)), 0).weak_type
    same(jnp.polyder(A([], np.float32)), np.zeros(0, np.float32))
    close(jnp.polyder(A([1j, 2, 3])), [2j, 2])
    # like JAX, the factors broadcast against the last axis of a 2-D p
    same(jnp.polyder(jnp.ones((3, 2))), [[2, 1], [2, 1]])


@pytest.mark.parametrize("m,k", [(1, None), (1, 3.0), (2, None), (2, 5.0), (2, [5.0, -6.0]),
                                 (3, [1.0, 2.0, 3.0]), (0, None), (0, 4.0), (6, None)])
def test_polyint_matches_numpy(m, k):
    expected = np.polyint(P5.astype(np.float64), m, 0 if k is None else k)
    kk = None if k is None else A(k)
    close(jnp.polyint(A(P5), m, kk), expected)
    close(jnp.polyint(A(P5), m=m, k=kk), expected)


def test_polyint_dtypes_and_shapes():
    assert jnp.polyint(A([1, 2, 3])).dtype == np.float32
    assert jnp.polyint(A([1, 2, 3], np.int8)).dtype == np.float32
    assert jnp.polyint(A([1, 2, 3], np.float16), 1, 2.5).dtype == np.float16
    out = jnp.polyint(A([1.0, 2.0, 3.0]), 1, 1j)
    assert out.dtype == np.complex64
    close(out, [1 / 3, 1, 3, 1j])
    assert not jnp.polyint(weak(1.0, (3,))).weak_type
    same(jnp.polyint(A([], np.float32)), np.zeros(1, np.float32))
    same(jnp.polyint(A([], np.float32), 2, A([1.0, 2.0])), [1.0, 2.0])
    # a k of shape (1, 1) has one element: used for every integration, as in JAX
    close(jnp.polyint(A([1.0, 2.0, 3.0]), 2, jnp.ones((1, 1))), [1 / 12, 1 / 3, 1.5, 1, 1])


def test_polyder_polyint_transformations():
    close(ember.jit(jnp.polyder, static_argnums=1)(A(P5), 2), np.polyder(P5, 2))
    close(ember.jit(lambda p, k: jnp.polyint(p, 2, k))(A(P5), A([1.0, 2.0])),
          np.polyint(P5, 2, [1.0, 2.0]))
    ps = RNG.normal(size=(3, 4)).astype(np.float32)
    close(ember.vmap(jnp.polyder)(A(ps)), np.stack([np.polyder(p) for p in ps]))
    close(ember.vmap(lambda p: jnp.polyint(p, 2, 1.0))(A(ps)),
          np.stack([np.polyint(p, 2, 1.0) for p in ps]))
    # both are linear: the gradient of sum(w * f(p)) is f's factor vector times w
    w = RNG.normal(size=6).astype(np.float32)
    g = ember.grad(lambda p: jnp.sum(A(w) * jnp.polyint(p, 1, 0.0)))(A(P5))
    close(g, w[:5] / np.arange(5, 0, -1), 1e-6)
    w7 = RNG.normal(size=7).astype(np.float32)
    g = ember.grad(lambda k: jnp.sum(A(w7) * jnp.polyint(A(P5), 2, k)))(A(2.0))
    close(g, w7[5] + w7[6], 1e-6)  # k lands in x**1 / 1! and x**0 / 0!
    with pytest.raises(errors.ConcretizationTypeError, match="'m'"):
        ember.jit(jnp.polyder)(A(P5), 1)
    with pytest.raises(errors.ConcretizationTypeError, match="'m'"):
        ember.jit(jnp.polyint)(A(P5), 1)


def test_polyder_polyint_errors():
    with pytest.raises(ValueError, match="polyder.*m must be non-negative"):
        jnp.polyder(A(P5), -1)
    with pytest.raises(TypeError, match="polyder: m must be an integer"):
        jnp.polyder(A(P5), 1.0)
    with pytest.raises(TypeError, match="polyder.*scalar"):
        jnp.polyder(A(3.0))
    with pytest.raises(ValueError, match="polyder.*broadcast"):
        jnp.polyder(jnp.ones((3, 4)))
    with pytest.raises(ValueError, match="polyint.*m must be non-negative"):
        jnp.polyint(A(P5), -1)
    with pytest.raises(TypeError, match="polyint: m must be an integer"):
        jnp.polyint(A(P5), 1.5)
    with pytest.raises(ValueError, match="polyint: k must be"):
        jnp.polyint(A(P5), 2, A([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="polyint: k must be"):
        jnp.polyint(A(P5), 0, A([1.0, 2.0]))
    with pytest.raises(TypeError, match="polyint: p must be a 1-D"):
        jnp.polyint(A(3.0))
    with pytest.raises(TypeError, match="polyint.*1-D"):
        jnp.polyint(jnp.ones((3, 2)))
    with pytest.raises(TypeError, match="polyint"):
        jnp.polyint(A(P5), 2, [1.0, 2.0])


# ---------------------------------------------------------------- poly


def test_poly_matches_numpy():
    roots = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    close(jnp.poly(A(roots)), np.poly(roots.astype(np.float64)), 1e-5)
    close(jnp.poly(A([1, 2, 3])), [1, -6, 11, -6])
    close(jnp.poly(2), [1, -2])
    close(jnp.poly(A(2.5)), [1, -2.5])
    out = jnp.poly(A([], np.int32))
    assert out.shape == () and out.dtype == np.float32 and float(out) == 1.0
    # complex roots keep a complex result, conjugate pairs included (NumPy would go real)
    out = jnp.poly(A([1j, -1j]))
    assert out.dtype == np.complex64
    close(out, [1, 0, 1])
    c = np.array([1 + 1j, 2 - 0.5j, -1j], np.complex64)
    close(jnp.poly(A(c)), np.poly(c.astype(np.complex128)), 1e-5)
    assert jnp.poly(A([1, 2], np.float16)).dtype == np.float16
    assert jnp.poly(A([1, 2], BF16)).dtype == BF16
    close(jnp.poly(A([1, 2, 3.5], np.float16)), [1, -6.5, 12.5, -7], 1e-3)
    assert not jnp.poly(weak(2.0, (2,))).weak_type


def test_poly_transformations():
    r = RNG.normal(size=4).astype(np.float32)
    close(ember.jit(jnp.poly)(A(r)), np.poly(r), 1e-5)
    rs = RNG.normal(size=(3, 4)).astype(np.float32)
    close(ember.vmap(jnp.poly)(A(rs)), np.stack([np.poly(x) for x in rs]), 1e-5)
    # d/dr_i of the constant term prod(-r) is prod over the other roots of -r_j times -1
    g = ember.grad(lambda x: jnp.poly(x)[-1])(A(r))
    expected = [-np.prod(-np.delete(r, i)) for i in range(4)]
    close(g, expected, 1e-5)


def test_poly_errors():
    # A square matrix: its characteristic polynomial, (x - 1) ** 3.
    np.testing.assert_allclose(np.asarray(jnp.poly(jnp.eye(3))), [1, -3, 3, -1], atol=1e-6)
    with pytest.raises(ValueError, match="poly: input must be 1d"):
        jnp.poly(jnp.ones((2, 3)))
    with pytest.raises(ValueError, match="poly: input must be 1d"):
        jnp.poly(jnp.ones((0, 0)))
    with pytest.raises(ValueError, match="poly: input must be 1d"):
        jnp.poly(jnp.ones((2, 2, 2)))
    with pytest.raises(TypeError, match="poly"):
        jnp.poly([1.0, 2.0])


# ---------------------------------------------------------------- vander


@pytest.mark.parametrize("N", [None, 0, 1, 3, 6])
@pytest.mark.parametrize("increasing", [False, True])
def test_vander_matches_numpy(N, increasing):
    x = np.array([1.5, -2.0, 0.0, 3.0], np.float32)
    close(jnp.vander(A(x), N, increasing), np.vander(x, N, increasing))
    close(jnp.vander(x=A(x), N=N, increasing=increasing), np.vander(x, N, increasing))
    xi = np.array([2, -3, 0, 5], np.int8)  # powers wrap around (NumPy computes in int64)
    same(jnp.vander(A(xi), N, increasing), np.vander(xi, N, increasing).astype(np.int8))


def test_vander_dtypes_and_edges():
    assert jnp.vander(A([1, 2])).dtype == np.int32
    assert jnp.vander(A([1, 2], np.uint8), 4).dtype == np.uint8
    assert jnp.vander(A([1, 2], np.float16)).dtype == np.float16
    assert not jnp.vander(weak(2.0, (2,))).weak_type
    assert jnp.vander(A([], np.float32)).shape == (0, 0)
    # NumPy agrees; JAX 0.10 raises OverflowError for an empty unsigned x
    assert jnp.vander(A([], np.uint8)).shape == (0, 0)
    assert jnp.vander(A([1.0, 2.0]), 0).shape == (2, 0)
    close(jnp.vander(A([1j, 2])), [[1j, 1], [2, 1]], 1e-6)


def test_vander_transformations():
    x = np.array([0.5, -1.5, 2.0], np.float32)
    close(ember.jit(jnp.vander, static_argnums=1)(A(x), 4), np.vander(x, 4))
    xs = RNG.normal(size=(2, 3)).astype(np.float32)
    close(ember.vmap(lambda r: jnp.vander(r, 4, increasing=True))(A(xs)),
          np.stack([np.vander(r, 4, increasing=True) for r in xs]), 1e-5)
    g = ember.grad(lambda v: jnp.sum(jnp.vander(v, 4)))(A(x))
    close(g, 3 * x ** 2 + 2 * x + 1, 1e-5)
    with pytest.raises(errors.ConcretizationTypeError, match="'N'"):
        ember.jit(jnp.vander)(A(x), 2)


def test_vander_errors():
    with pytest.raises(ValueError, match="vander: x must be a one-dimensional"):
        jnp.vander(jnp.ones((2, 2)))
    with pytest.raises(ValueError, match="vander: x must be a one-dimensional"):
        jnp.vander(2.0)
    with pytest.raises(ValueError, match="vander: N must be nonnegative"):
        jnp.vander(A([1.0]), -1)
    with pytest.raises(TypeError, match="vander: N must be an integer"):
        jnp.vander(A([1.0]), 2.0)
    with pytest.raises(TypeError, match="vander.*bool"):
        jnp.vander(A([True, False]))


# ---------------------------------------------------------------- trim_zeros


FILT = np.array([0, 0, 1, 2, 0, 3, 0], np.int32)


@pytest.mark.parametrize("trim", ["fb", "f", "b", "F", "B", "bF"])
def test_trim_zeros_matches_numpy(trim):
    same(jnp.trim_zeros(A(FILT), trim), np.trim_zeros(FILT, trim))
    same(jnp.trim_zeros(filt=A(FILT), trim=trim), np.trim_zeros(FILT, trim))


def test_trim_zeros_edges():
    same(jnp.trim_zeros(A(FILT)), [1, 2, 0, 3])
    for trim in ("", "x", "ace"):  # like JAX: no 'f'/'b' leaves the input (NumPy refuses)
        x = A(FILT)
        assert jnp.trim_zeros(x, trim) is x
    same(jnp.trim_zeros(A([0.0, 0.0])), np.zeros(0, np.float32))
    same(jnp.trim_zeros(A([0.0, 0.0]), "f"), np.zeros(0, np.float32))
    same(jnp.trim_zeros(A([], np.float32)), np.zeros(0, np.float32))
    s = jnp.asarray(0.0)
    assert jnp.trim_zeros(s) is s
    same(jnp.trim_zeros(A([0.0, np.nan, 0.0])), [np.nan])
    same(jnp.trim_zeros(A([-0.0, 1.0, 0.0])), [1.0])
    same(jnp.trim_zeros(A([False, True, False])), [True])
    assert jnp.trim_zeros(A([0, 1, 0], BF16)).tolist() == [1.0]
    # purely imaginary values are not zero (JAX 0.10 drops them: its any() ignores them)
    close(jnp.trim_zeros(A([0j, 1j, 0])), np.trim_zeros(np.array([0j, 1j, 0])))
    out = jnp.trim_zeros(jnp.concatenate([weak(0.0, (2,)), weak(2.0, (1,)), weak(0.0, (1,))]))
    assert out.weak_type and out.tolist() == [2.0]


def test_trim_zeros_axes():
    m = np.array([[0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 2, 0]], np.int32)
    same(jnp.trim_zeros(A(m)), [[1, 0], [0, 2]])
    same(jnp.trim_zeros(A(m), axis=(0, 1)), [[1, 0], [0, 2]])
    same(jnp.trim_zeros(A(m), axis=1), m[:, 1:3])
    same(jnp.trim_zeros(A(m), "b", axis=0), m)
    same(jnp.trim_zeros(A(m), "f", axis=-1), m[:, 1:])
    same(jnp.trim_zeros(A(m), "f", axis=0), m[1:])
    same(jnp.trim_zeros(A(m), axis=()), m)
    same(jnp.trim_zeros(jnp.zeros((2, 3))), np.zeros((0, 0)))
    same(jnp.trim_zeros(jnp.zeros((2, 3)), axis=1), np.zeros((2, 0)))


def test_trim_zeros_transformations_and_errors():
    g = ember.grad(lambda x: jnp.sum(jnp.trim_zeros(x) ** 2))(A([0.0, 1.0, 2.0, 0.0]))
    same(g, [0.0, 2.0, 4.0, 0.0])
    with pytest.raises(errors.ConcretizationTypeError, match="filt"):
        ember.jit(jnp.trim_zeros)(A(FILT))
    with pytest.raises(errors.ConcretizationTypeError):
        ember.vmap(jnp.trim_zeros)(A([FILT]))
    with pytest.raises(TypeError, match="trim_zeros: trim must be a string"):
        jnp.trim_zeros(A(FILT), None)
    with pytest.raises(TypeError, match="trim_zeros"):
        jnp.trim_zeros([0, 1, 0])
    with pytest.raises(ValueError, match="trim_zeros"):
        jnp.trim_zeros(A([[0, 1]]), axis=2)
    with pytest.raises(ValueError, match="trim_zeros: duplicate"):
        jnp.trim_zeros(A([[0, 1]]), axis=(0, 0))


# ---------------------------------------------------------------- against JAX

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def _cases():
    def w(n, value, shape):
        return n.broadcast_to(n.asarray(value), shape)

    def a(n, x, dt=None):
        return n.array(np.asarray(x, dt))

    m2 = [[0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 2, 0]]
    cases = {
        "conv_int": lambda n: n.convolve(a(n, [1, 2, 3]), a(n, [0, 1])),
        "conv_same_even": lambda n: n.convolve(a(n, [1.0, 2, 3, 4, 5]),
                                               a(n, [1.0, 10, 100, 1000]), mode="same"),
        "corr_same_short": lambda n: n.correlate(a(n, [1.0, 2, 3]), a(n, [0, 1, 5, 6.0]),
                                                 mode="same"),
        "corr_full_short": lambda n: n.correlate(a(n, [1.0, 2, 3]), a(n, [0, 1, 5, 6.0]),
                                                 mode="full"),
        "corr_complex": lambda n: n.correlate(a(n, [1 + 1j, 2, 3j]), a(n, [1j, 2 - 1j]),
                                              mode="full"),
        "conv_bool": lambda n: n.convolve(a(n, [True, False]), a(n, [True])),
        "conv_weak": lambda n: n.convolve(w(n, 1.0, (3,)), w(n, 2, (2,))),
        "conv_f16_f32": lambda n: n.convolve(a(n, [1, 2], np.float16), a(n, [1, 2.5])),
        "conv_pet_u8": lambda n: n.convolve(a(n, [200, 200], np.uint8), a(n, [2, 2], np.uint8),
                                            preferred_element_type=n.uint8),
        "conv_pet_bool_i8": lambda n: n.convolve(a(n, [True, False]), a(n, [True]),
                                                 preferred_element_type=n.int8),
        "conv_pet_weak": lambda n: n.convolve(w(n, 1.0, (3,)), w(n, 2.0, (2,)),
                                              preferred_element_type=n.float32),
        "conv_pet_f_int": lambda n: n.convolve(a(n, [1.0]), a(n, [1.0]),
                                               preferred_element_type=n.int32),
        "conv_pet_i32_f16": lambda n: n.convolve(a(n, [1]), a(n, [1]),
                                                 preferred_element_type=n.float16),
        "conv_pet_i8_u8": lambda n: n.convolve(a(n, [1], np.int8), a(n, [1], np.int8),
                                               preferred_element_type=n.uint8),
        "conv_pet_u8_i8": lambda n: n.convolve(a(n, [1], np.uint8), a(n, [1], np.uint8),
                                               preferred_element_type=n.int8),
        "conv_pet_i_c": lambda n: n.convolve(a(n, [1]), a(n, [1]),
                                             preferred_element_type=n.complex64),
        "conv_empty": lambda n: n.convolve(a(n, [], np.float32), a(n, [1.0])),
        "conv_2d": lambda n: n.correlate(n.ones((2, 2)), a(n, [1.0])),
        "conv_mode": lambda n: n.convolve(a(n, [1.0]), a(n, [1.0]), mode="foo"),
        "conv_precision": lambda n: n.convolve(a(n, [1.0]), a(n, [1.0]), precision="foo"),
        "polyval_int_float": lambda n: n.polyval(a(n, [1, 2, 3]), 2.0),
        "polyval_2d": lambda n: n.polyval(n.arange(6.0).reshape(3, 2), a(n, [[1.0], [2.0]])),
        "polyval_weak": lambda n: n.polyval(w(n, 1.0, (3,)), 2.0),
        "polyval_empty": lambda n: n.polyval(a(n, [], np.int32), a(n, [1, 2])),
        "polyval_bool": lambda n: n.polyval(a(n, [True, False]), a(n, [True])),
        "polyval_0d": lambda n: n.polyval(a(n, 2.0), a(n, [1.0])),
        "polyval_bad_shape": lambda n: n.polyval(n.ones((3, 2)), a(n, [1.0, 2, 3])),
        "polyval_unroll": lambda n: n.polyval(a(n, [1.0, 2]), a(n, [1.0]), unroll=1.5),
        "polyadd_2d": lambda n: n.polyadd(n.ones((3, 2)), n.ones((2, 1))),
        "polyadd_2d_1d": lambda n: n.polyadd(n.ones((3, 2)), n.ones((2,))),
        "polyadd_weak": lambda n: n.polyadd(w(n, 1.0, (3,)), w(n, 2.0, (2,))),
        "polyadd_mixed": lambda n: n.polyadd(a(n, [1, 2], np.int8), a(n, [3, 4, 5], np.uint8)),
        "polyadd_bool": lambda n: n.polyadd(a(n, [True]), a(n, [True])),
        "polyadd_empty": lambda n: n.polyadd(a(n, [1.0, 2]), a(n, [], np.float32)),
        "polyadd_empties": lambda n: n.polyadd(a(n, [], np.float32), a(n, [], np.float32)),
        "polyadd_0d": lambda n: n.polyadd(a(n, 1.0), a(n, [1.0])),
        "polyadd_bad_2d": lambda n: n.polyadd(n.ones((3, 1)), n.ones((2, 2))),
        "polysub_short": lambda n: n.polysub(a(n, [1.0]), a(n, [3.0, 4, 5])),
        "polysub_bool": lambda n: n.polysub(a(n, [True]), a(n, [True])),
        "polymul_weak": lambda n: n.polymul(w(n, 1.0, (3,)), w(n, 1.0, (2,))),
        "polymul_weak_empty": lambda n: n.polymul(w(n, 1.0, (0,)), w(n, 1.0, (2,))),
        "polymul_trim": lambda n: n.polymul(a(n, [0, 0, 1.0, 2]), a(n, [0, 1, 1.0]),
                                            trim_leading_zeros=True),
        "polymul_0d": lambda n: n.polymul(a(n, 2.0), a(n, [1.0])),
        "polydiv_short": lambda n: n.polydiv(a(n, [1, 2.0]), a(n, [1, 1, 1.0])),
        "polydiv_trim": lambda n: n.polydiv(a(n, [1, 1.0001, 3]), a(n, [1, 1.0]),
                                            trim_leading_zeros=True),
        "polydiv_trim_short": lambda n: n.polydiv(a(n, [1, 2.0]), a(n, [1, 1, 1.0]),
                                                  trim_leading_zeros=True),
        "polydiv_weak": lambda n: n.polydiv(w(n, 2.0, (3,)), w(n, 1.0, (2,))),
        "polydiv_f16": lambda n: n.polydiv(a(n, [1, 2, 3], np.float16),
                                           a(n, [3, 1], np.float16)),
        "polydiv_empty_u": lambda n: n.polydiv(a(n, [], np.float32), a(n, [1.0])),
        "polydiv_empty_v": lambda n: n.polydiv(a(n, [1.0]), a(n, [], np.float32)),
        "polydiv_0d": lambda n: n.polydiv(a(n, 1.0), a(n, [1.0])),
        "polydiv_2d": lambda n: n.polydiv(n.ones((3, 2)), a(n, [1.0, 2.0])),
        "polyder_m0_weak": lambda n: n.polyder(w(n, 1.0, (3,)), 0),
        "polyder_long": lambda n: n.polyder(n.arange(12.0), 3),
        "polyder_bool": lambda n: n.polyder(a(n, [True, True])),
        "polyder_m5": lambda n: n.polyder(a(n, [1, 2, 3, 4.0]), 5),
        "polyder_2d": lambda n: n.polyder(n.ones((3, 2))),
        "polyder_2d_bad": lambda n: n.polyder(n.ones((3, 4))),
        "polyder_0d": lambda n: n.polyder(a(n, 3.0)),
        "polyder_neg": lambda n: n.polyder(a(n, [1.0]), -1),
        "polyder_float_m": lambda n: n.polyder(a(n, [1.0]), 1.0),
        "polyint_m3_k": lambda n: n.polyint(a(n, [1, 2, 3]), 3, a(n, [5, 6, 7])),
        "polyint_k_f32_p_f16": lambda n: n.polyint(a(n, [1, 2], np.float16), 1,
                                                   a(n, 2.5, np.float32)),
        "polyint_m0_0d": lambda n: n.polyint(a(n, 3.0), 0),
        "polyint_m0_weak": lambda n: n.polyint(w(n, 1.0, (3,)), 0),
        "polyint_k_13": lambda n: n.polyint(a(n, [1, 2, 3.0]), 2, n.ones((1, 3))),
        "polyint_bad_k": lambda n: n.polyint(a(n, [1, 2, 3.0]), 2, a(n, [5.0, 6, 7])),
        "polyint_0d": lambda n: n.polyint(a(n, 3.0)),
        "polyint_2d": lambda n: n.polyint(n.ones((3, 2))),
        "polyint_bool": lambda n: n.polyint(a(n, [True, False])),
        "poly_bool": lambda n: n.poly(a(n, [True, False])),
        "poly_many": lambda n: n.poly(n.linspace(-1, 1, 9)),
        "poly_complex": lambda n: n.poly(a(n, [1j, -1j, 2])),
        "poly_empty": lambda n: n.poly(a(n, [], np.float32)),
        "poly_nonsquare": lambda n: n.poly(n.ones((2, 3))),
        "vander_int8": lambda n: n.vander(a(n, [2, 3], np.int8), 9),
        "vander_weak_int": lambda n: n.vander(w(n, 2, (2,))),
        "vander_inc_str": lambda n: n.vander(a(n, [0, -2]), increasing="yes"),
        "vander_bool": lambda n: n.vander(a(n, [True])),
        "vander_neg_n": lambda n: n.vander(a(n, [1.0]), -1),
        "vander_float_n": lambda n: n.vander(a(n, [1.0]), 2.0),
        "vander_2d": lambda n: n.vander(n.ones((2, 2))),
        "trim_fb": lambda n: n.trim_zeros(a(n, [0, 0, 1, 2, 0, 3, 0])),
        "trim_b": lambda n: n.trim_zeros(a(n, [0, 0, 1, 2, 0, 3, 0]), "B"),
        "trim_x": lambda n: n.trim_zeros(a(n, [0, 0, 1, 0]), "x"),
        "trim_weak": lambda n: n.trim_zeros(n.concatenate([w(n, 0.0, (2,)), w(n, 2.0, (1,)),
                                                           w(n, 0.0, (1,))])),
        "trim_0d": lambda n: n.trim_zeros(n.asarray(0.0)),
        "trim_all_zero": lambda n: n.trim_zeros(a(n, [0, 0.0])),
        "trim_2d": lambda n: n.trim_zeros(a(n, m2)),
        "trim_2d_axis": lambda n: n.trim_zeros(a(n, m2), "f", axis=-1),
        "trim_2d_zeros_axis": lambda n: n.trim_zeros(n.zeros((2, 3)), axis=1),
        "trim_axis_dup": lambda n: n.trim_zeros(a(n, m2), axis=(1, 1)),
        "trim_axis_bad": lambda n: n.trim_zeros(a(n, m2), axis=2),
    }
    return cases


CASES = _cases()


def _leaves(out):
    return list(out) if isinstance(out, tuple) else [out]


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(name):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_platforms", "cpu")
    import jax.numpy as jjnp

    fn = CASES[name]

    def run(ns):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            try:
                return fn(ns), None
            except Exception as e:  # noqa: BLE001
                return None, e

    (ours, our_err), (theirs, their_err) = run(jnp), run(jjnp)
    if their_err is not None:
        assert our_err is not None, f"JAX raises {their_err!r}, ember returns {ours!r}"
        assert isinstance(our_err, type(their_err)), (our_err, their_err)
        return
    assert our_err is None, f"ember raises {our_err!r}, JAX returns {theirs!r}"
    assert len(_leaves(ours)) == len(_leaves(theirs))
    for o, t in zip(_leaves(ours), _leaves(theirs)):
        assert o.shape == t.shape and np.dtype(o.dtype) == np.dtype(t.dtype), (o, t)
        assert o.weak_type == t.weak_type, (o, t)
        tol = 2e-3 if np.dtype(o.dtype) in (np.dtype(np.float16), BF16) else 1e-6
        close(np.asarray(o).astype(np.asarray(t).dtype), np.asarray(t).astype(
            np.complex128 if np.iscomplexobj(np.asarray(t)) else np.float64), tol)
