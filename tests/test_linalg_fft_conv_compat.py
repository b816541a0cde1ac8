"""Differential regressions against JAX 0.10.2 for linalg, fft, convolution, windowed
reductions and the polynomial functions built on them (roots, polyfit, poly of a matrix)."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp


def close(actual, expected, tol=1e-5):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol, equal_nan=True)


# ---------------------------------------------------------------- roots / polyfit / poly

def test_roots_strip_and_nan_padding(jax):
    p = np.array([0.0, 0.0, 1.0, -3.0, 2.0], np.float32)
    close(jnp.roots(p), np.array([2, 1], np.complex64))
    nan = complex(np.nan, np.nan)
    close(jnp.roots(p, strip_zeros=False), np.array([1, 2, nan, nan], np.complex64))
    close(ember.jit(lambda q: jnp.roots(q, strip_zeros=False))(p),
          np.array([1, 2, nan, nan], np.complex64))
    trailing = np.array([1.0, -3.0, 2.0, 0.0, 0.0], np.float32)
    close(jnp.roots(trailing), jax.numpy.roots(trailing))
    close(jnp.roots(np.zeros(2, np.float32)), np.zeros(0, np.complex64))
    close(jnp.roots(np.zeros(2, np.float32), strip_zeros=False), np.array([nan], np.complex64))
    close(jnp.roots(3), np.zeros(0, np.complex64))
    with pytest.raises(ValueError, match="rank-1"):
        jnp.roots(np.ones((2, 2)))
    with pytest.raises(ember.errors.ConcretizationTypeError, match="strip_zeros=False"):
        ember.jit(jnp.roots)(p)


def test_roots_first_derivative():
    # d(root)/dp for p = (x - 2)(x - 1): dr/dp_k = -r^(n-k) / p'(r).
    p = np.array([1.0, -3.0, 2.0], np.float32)
    g = ember.grad(lambda q: jnp.roots(q, strip_zeros=False)[0].real)(p)
    r = 2.0
    close(g, np.array([-r ** 2, -r, -1.0], np.float32) / (2 * r - 3), 1e-4)


def test_polyfit_options(jax):
    x = np.arange(6, dtype=np.float32)
    y = (x ** 2 - 2 * x + np.sin(x)).astype(np.float32)
    y2 = np.stack([y, 3 * y + x], 1)
    w = np.arange(1.0, 7.0, dtype=np.float32)
    close(jnp.polyfit(x, y, 2), np.polyfit(x, y, 2).astype(np.float32), 1e-4)
    for args, kw in [((x, y, 2), {"full": True}), ((x, y2, 1), {"cov": True}),
                     ((x, y, 2), {"cov": "unscaled", "w": w}), ((x, y2, 2), {"w": w})]:
        ours, theirs = jnp.polyfit(*args, **kw), jax.numpy.polyfit(*args, **kw)
        for a, b in zip(ember.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
            close(a, b, 1e-3)
    with pytest.raises(ValueError, match="deg >= 0"):
        jnp.polyfit(x, y, -1)
    with pytest.raises(TypeError, match="same length"):
        jnp.polyfit(x, y[:3], 1)
    with pytest.raises(ValueError, match="exceed order"):
        jnp.polyfit(x[:3], y[:3], 2, cov=True)


def test_poly_of_square_matrix(jax):
    a = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    close(jnp.poly(a), jax.numpy.poly(a), 1e-5)


# ---------------------------------------------------------------- linalg

def test_det_gradient_of_singular_matrices():
    # d det / dA = adj(A)^T, finite for singular A (was nan through A^-1).
    r1 = np.array([[1.0, -1.0, 2.0], [3.0, -1.0, 5.0], [3.0, -3.0, 6.0]], np.float32)
    adj_t = np.array([[9.0, -3.0, -6.0], [0.0, 0.0, 0.0], [-3.0, 1.0, 2.0]], np.float32)
    close(ember.grad(jnp.linalg.det)(r1), adj_t, 1e-4)
    close(ember.grad(jnp.linalg.det)(np.ones((3, 3), np.float32)), np.zeros((3, 3), np.float32))
    a = np.array([[2.0, 1.0], [1.0, 3.0]], np.float32)
    close(ember.grad(jnp.linalg.det)(a), np.array([[3.0, -1.0], [-1.0, 2.0]], np.float32))


def test_solve_batched_a_with_matrix_b(jax):
    rng = np.random.default_rng(1)
    a = rng.normal(size=(2, 3, 3)).astype(np.float32)
    b = rng.normal(size=(3, 3)).astype(np.float32)
    close(jnp.linalg.solve(a, b), np.linalg.solve(a, b), 1e-4)
    with pytest.raises(ValueError, match="Invalid shapes for solve"):
        jnp.linalg.solve(a, np.ones((2, 3), np.float32))


def test_matrix_rank_rtol_is_absolute():
    m = np.diag(np.array([4.0, 1.0, 0.1], np.float32))
    assert int(jnp.linalg.matrix_rank(m, rtol=0.5)) == 2  # JAX: s > 0.5, not s > 0.5 * 4
    assert int(jnp.linalg.matrix_rank(m, tol=0.05)) == 3
    assert int(jnp.linalg.matrix_rank(m)) == 3
    with pytest.raises(ValueError, match="only one of tol or rtol"):
        jnp.linalg.matrix_rank(m, rtol=0.5, tol=0.5)


# ---------------------------------------------------------------- fft

def test_fft_input_conversion_like_jax():
    from ember import lax
    x = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    # lax.fft converts real/integer operands (was a TypeError).
    close(lax.fft(x, "fft", (4,)), np.fft.fft(x).astype(np.complex64))
    close(lax.fft(np.arange(4), "rfft", (4,)), np.fft.rfft(np.arange(4)).astype(np.complex64))
    close(lax.fft(x, "fft", ()), x.astype(np.complex64))
    with pytest.raises(ValueError, match="only real valued inputs"):
        lax.fft(x.astype(np.complex64), "rfft", (4,))
    with pytest.raises(ValueError, match="only real valued inputs"):
        jnp.fft.rfft2(np.ones((2, 2), np.complex64))
    # jnp.fft refuses lists (JAX's ensure_arraylike), except ihfft.
    with pytest.raises(TypeError, match="requires ndarray or scalar"):
        jnp.fft.fft([1.0, 2.0])
    with pytest.raises(TypeError, match="requires ndarray or scalar"):
        jnp.fft.hfft([1.0, 2.0])
    close(jnp.fft.ihfft([1.0, 2.0, 3.0]), np.fft.ihfft([1.0, 2.0, 3.0]).astype(np.complex64))
