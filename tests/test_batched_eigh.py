"""Batched small symmetric eigendecomposition: the native Jacobi kernel
(``small_eigh_lanes`` through ``small_linalg_kernel.syevd``) and ``eigh`` routed to it,
checked against NumPy's LAPACK in float64 (eigenvalues), orthonormality and residuals."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends.cpu import small_linalg_kernel as K


def _sym(nb, n, dtype, seed=0, scale=1.0):
    a = np.random.default_rng(seed).standard_normal((nb, n, n))
    return ((a + np.swapaxes(a, 1, 2)) * scale).astype(dtype)


def _check(a, v, w, ulps):
    """Eigenvalues within ``ulps`` eps * max|a| of LAPACK's (float64), ascending; v
    orthonormal and a v = v diag(w) to that tolerance."""
    dt = a.dtype
    eps = np.finfo(dt).eps
    n = a.shape[-1]
    norm = np.abs(a).max(axis=(-2, -1), keepdims=True).astype(np.float64)
    ref = np.linalg.eigvalsh(a.astype(np.float64))
    assert w.dtype == dt and v.dtype == dt
    assert np.all(np.abs(w - ref) <= ulps * eps * norm[..., 0])
    assert np.all(np.diff(w, axis=-1) >= 0)
    v64 = v.astype(np.float64)
    assert np.abs(np.swapaxes(v64, -1, -2) @ v64 - np.eye(n)).max() <= ulps * eps
    resid = np.abs(a.astype(np.float64) @ v64 - v64 * w[..., None, :].astype(np.float64))
    assert np.all(resid <= ulps * eps * norm)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 16])
def test_kernel_random(dtype, n):
    a = _sym(37, n, dtype, seed=n)  # 37: groups of 16 (8) lanes and a ragged last one
    v, w = K.syevd(a, True)
    _check(a, v, w, 8 * n)


@pytest.mark.parametrize("n", [3, 4, 9])
def test_kernel_reads_one_triangle(n):
    a = np.random.default_rng(1).standard_normal((20, n, n)).astype(np.float32)
    low, up = np.tril(a), np.triu(a)
    sym_low = low + np.swapaxes(np.tril(a, -1), 1, 2)
    sym_up = up + np.swapaxes(np.triu(a, 1), 1, 2)
    v, w = K.syevd(a, True)
    _check(sym_low, v, w, 8 * n)
    v, w = K.syevd(a, False)
    _check(sym_up, v, w, 8 * n)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_degenerate_diagonal_zero(dtype):
    n = 6
    rng = np.random.default_rng(2)
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    mats = [np.zeros((n, n)), np.eye(n), np.diag([3., 1., 2., 1., 3., 0.]),
            q @ np.diag([1., 1., 1., 2., 2., -5.]) @ q.T, np.ones((n, n)),
            np.diag(np.arange(n, 0, -1.0))]
    a = np.stack(mats * 4).astype(dtype)
    v, w = K.syevd(a, True)
    _check(a, v, w, 50)
    np.testing.assert_array_equal(w[0], 0)
    np.testing.assert_array_equal(w[1], 1)
    np.testing.assert_array_equal(w[2], [0, 1, 1, 2, 3, 3])
    np.testing.assert_array_equal(w[5], np.arange(1, n + 1))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_extreme_scales(dtype):
    big = np.finfo(dtype).max / 64
    tiny = np.finfo(dtype).tiny * 2.0 ** 20
    for s in (big, tiny):
        a = _sym(20, 4, dtype, seed=3).astype(np.float64)
        a = (a / np.abs(a).max() * s).astype(dtype)
        v, w = K.syevd(a, True)
        assert np.all(np.isfinite(w)) and np.all(np.isfinite(v))
        ref = np.linalg.eigvalsh(a.astype(np.float64))
        np.testing.assert_allclose(w, ref, rtol=0, atol=40 * np.finfo(dtype).eps * s)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_gives_nan(bad):
    a = _sym(21, 4, np.float32, seed=4)
    a[5, 2, 1] = bad
    a[20, 3, 3] = bad
    v, w = K.syevd(a, True)
    for i in (5, 20):
        assert np.isnan(w[i]).all() and np.isnan(v[i]).all()
    ok = np.ones(21, bool)
    ok[[5, 20]] = False
    _check(a[ok], v[ok], w[ok], 32)


def test_jit_routes_and_matches_numpy():
    a = _sym(50, 4, np.float32, seed=5)  # (16 or more matrices: the native kernel)
    f = ember.jit(lambda x: jnp.linalg.eigh(x))
    w, v = f(a)
    _check(a, np.asarray(v), np.asarray(w), 32)
    wv = ember.jit(lambda x: jnp.linalg.eigvalsh(x))(a)
    np.testing.assert_array_equal(np.asarray(wv), np.asarray(w))
    # Jit and eager both run the native kernel (Jacobi's eigenvectors, not LAPACK's).
    v_k, w_k = K.syevd(a, True)
    np.testing.assert_array_equal(np.asarray(w), w_k)
    np.testing.assert_array_equal(np.asarray(v), v_k)
    w_e, v_e = jnp.linalg.eigh(a)
    np.testing.assert_array_equal(np.asarray(w_e), w_k)


def test_lax_eigh_upper_without_symmetrizing():
    a = np.random.default_rng(6).standard_normal((30, 5, 5)).astype(np.float32)
    v, w = lax.linalg.eigh(a, lower=False, symmetrize_input=False)
    sym_up = np.triu(a) + np.swapaxes(np.triu(a, 1), 1, 2)
    _check(sym_up, np.asarray(v), np.asarray(w), 40)


def test_batch_dims_and_vmap():
    a = _sym(24, 3, np.float32, seed=7).reshape(4, 6, 3, 3)
    w, v = jnp.linalg.eigh(a)
    _check(a, np.asarray(v), np.asarray(w), 24)
    wm = ember.vmap(lambda x: jnp.linalg.eigvalsh(x))(a)
    np.testing.assert_array_equal(np.asarray(wm), np.asarray(w))


def test_gradient_of_eigenvalues():
    # d w_i / dA = v_i v_i^T (distinct eigenvalues).
    a = _sym(20, 4, np.float32, seed=8)
    weights = np.arange(1.0, 5.0)
    g = ember.grad(lambda x: jnp.sum(jnp.linalg.eigvalsh(x) * weights))(a)
    w, v = np.linalg.eigh(a.astype(np.float64))
    expect = np.einsum("bik,k,bjk->bij", v, weights, v)
    np.testing.assert_allclose(np.asarray(g), expect, rtol=0, atol=1e-5)


def test_matches_jax_oracle():
    jax = pytest.importorskip("jax")
    a = _sym(40, 8, np.float32, seed=9)
    w = np.asarray(ember.jit(lambda x: jnp.linalg.eigh(x)[0])(a))
    w_j = np.asarray(jax.jit(lambda x: jax.numpy.linalg.eigh(x)[0])(a))
    np.testing.assert_allclose(w, w_j, rtol=0, atol=64 * np.finfo(np.float32).eps *
                               np.abs(a).max())


def test_run_rejects_unknown_kernel():
    with pytest.raises(ValueError):
        K.run("nope", np.zeros((2, 2, 2), np.float32))
