"""Batched small QR and SVD: the native lane kernels (``small_qr_lanes`` and
``small_svd_lanes`` through ``small_linalg_kernel``) and ``qr``/``svd`` routed to them,
checked against NumPy's LAPACK in float64 (same Householder sign conventions for QR),
orthonormality and reconstruction, and JAX as an oracle."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.cpu import small_linalg_kernel as K

SHAPES = [(1, 1), (3, 1), (1, 3), (4, 4), (6, 4), (4, 6), (9, 12), (16, 16), (16, 5)]


def _mats(nb, m, n, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal((nb, m, n)).astype(dtype)


def _check_qr(a, q, r, full, ulps):
    """q and r within ``ulps`` eps * max|a| of LAPACK's (float64); q orthonormal, r upper
    triangular, q r = a."""
    dt = a.dtype
    m, n = a.shape[-2:]
    kq = m if full else min(m, n)
    assert q.dtype == dt and r.dtype == dt
    assert q.shape == a.shape[:-2] + (m, kq) and r.shape == a.shape[:-2] + (kq, n)
    eps = np.finfo(dt).eps
    norm = np.abs(a).max(axis=(-2, -1), keepdims=True).astype(np.float64)
    q_ref, r_ref = np.linalg.qr(a.astype(np.float64), mode="complete" if full else "reduced")
    # Rounding differences grow with the condition of the factored columns.
    cond = np.linalg.cond(a[..., :min(m, n)].astype(np.float64))[..., None, None]
    assert np.all(np.abs(r - r_ref) <= ulps * eps * norm * cond)
    assert np.all(np.abs(q[..., :min(m, n)] - q_ref[..., :min(m, n)]) <= ulps * eps * cond)
    np.testing.assert_array_equal(np.tril(r, -1), 0)
    q64 = q.astype(np.float64)
    assert np.abs(np.swapaxes(q64, -1, -2) @ q64 - np.eye(kq)).max() <= ulps * eps
    assert np.all(np.abs(q64 @ r.astype(np.float64) - a) <= ulps * eps * norm)


def _check_svd(a, s, ulps):
    """Singular values within ``ulps`` eps * max|a| of LAPACK's (float64), descending."""
    eps = np.finfo(a.dtype).eps
    norm = np.abs(a).max(axis=(-2, -1)).astype(np.float64)
    ref = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    assert s.dtype == a.dtype and s.shape == ref.shape
    assert np.all(np.abs(s - ref) <= ulps * eps * norm[..., None])
    assert np.all(np.diff(s, axis=-1) <= 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_qr_kernel_random(dtype, shape):
    m, n = shape
    a = _mats(37, m, n, dtype, seed=m * 17 + n)  # 37: full groups of lanes and a ragged one
    for full in (False, True):
        q, r = K.qr(a, full)
        _check_qr(a, q, r, full, 8 * max(m, n))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_svd_kernel_random(dtype, shape):
    m, n = shape
    a = _mats(37, m, n, dtype, seed=m * 13 + n)
    _check_svd(a, K.svd(a), 8 * max(m, n))


def _check_svd_vectors(a, s, u, vt, full, ulps):
    """Values as ``_check_svd``; u and vt orthonormal (the completion too), with
    u diag(s) vt = a."""
    m, n = a.shape[-2:]
    k = min(m, n)
    ku, kv = (m, n) if full else (k, k)
    assert u.shape == a.shape[:-2] + (m, ku) and vt.shape == a.shape[:-2] + (kv, n)
    assert u.dtype == a.dtype and vt.dtype == a.dtype
    _check_svd(a, s, ulps)
    eps = np.finfo(a.dtype).eps
    u64, vt64 = u.astype(np.float64), vt.astype(np.float64)
    assert np.abs(np.swapaxes(u64, -1, -2) @ u64 - np.eye(ku)).max() <= ulps * eps
    assert np.abs(vt64 @ np.swapaxes(vt64, -1, -2) - np.eye(kv)).max() <= ulps * eps
    rec = (u64[..., :k] * s[..., None, :]) @ vt64[..., :k, :]
    norm = np.abs(a).max(axis=(-2, -1), keepdims=True)
    assert np.all(np.abs(rec - a) <= ulps * eps * norm)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (3, 1), (1, 3), (4, 4), (6, 4), (4, 6), (9, 12),
                                   (16, 16), (16, 5)])
def test_svd_vectors_kernel_random(dtype, shape):
    m, n = shape
    a = _mats(37, m, n, dtype, seed=m * 11 + n)
    for full in (False, True):
        s, u, vt = K.svd(a, compute_uv=True, full_matrices=full)
        _check_svd_vectors(a, s, u, vt, full, 8 * max(m, n))


def _special(m, n, dtype):
    """Zero, rank-deficient and structured m x n matrices (m >= 3, n >= 3)."""
    rng = np.random.default_rng(3)
    u = rng.standard_normal((m, 1))
    rank2 = u @ rng.standard_normal((1, n)) + rng.standard_normal((m, 1)) @ \
        rng.standard_normal((1, n))
    zero_col = rng.standard_normal((m, n))
    zero_col[:, 1] = 0
    below_zero = np.triu(rng.standard_normal((m, n)))  # x = 0: trivial reflectors
    below_zero[0, 0] = -2.0
    mats = [np.zeros((m, n)), np.eye(m, n), rank2, zero_col, below_zero, np.ones((m, n)),
            np.eye(m, n)[::-1]]
    return np.stack(mats * 3).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 5), (12, 10)])
def test_zero_and_rank_deficient(dtype, shape):
    a = _special(*shape, dtype)
    q, r = K.qr(a, False)
    q0, r0 = np.linalg.qr(a[0].astype(np.float64))
    np.testing.assert_array_equal(r[0], 0)
    np.testing.assert_array_equal(q[0], q0)  # (LAPACK: H = I for every column)
    rank = np.abs(np.diagonal(r, axis1=-2, axis2=-1)) > 100 * np.finfo(dtype).eps
    assert rank[2].sum() == 2
    q64 = q.astype(np.float64)
    k = min(shape)
    assert np.abs(np.swapaxes(q64, -1, -2) @ q64 - np.eye(k)).max() <= 100 * np.finfo(dtype).eps
    norm = np.abs(a).max(axis=(-2, -1), keepdims=True)
    assert np.all(np.abs(q64 @ r - a) <= 100 * np.finfo(dtype).eps * norm)
    # Triangular input: R is the input (trivial reflectors keep the diagonal's signs).
    np.testing.assert_array_equal(r[4], np.triu(a[4])[:k])
    for full in (False, True):
        sv, u, vt = K.svd(a, compute_uv=True, full_matrices=full)
        _check_svd_vectors(a, sv, u, vt, full, 100)  # (zero values: vectors still a basis)
    s = K.svd(a)
    _check_svd(a, s, 50)
    np.testing.assert_array_equal(s[0], 0)
    np.testing.assert_array_equal(s[1], 1)
    assert np.all(s[2, 2:] <= 100 * np.finfo(dtype).eps * np.abs(a[2]).max())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_extreme_scales(dtype):
    big = np.finfo(dtype).max / 1024
    tiny = np.finfo(dtype).tiny * 2.0 ** 20
    for scale in (big, tiny):
        a = _mats(20, 6, 4, np.float64, seed=4)
        a = (a / np.abs(a).max() * scale).astype(dtype)
        q, r = K.qr(a, True)
        assert np.all(np.isfinite(q)) and np.all(np.isfinite(r))
        q_ref, r_ref = np.linalg.qr(a.astype(np.float64), mode="complete")
        np.testing.assert_allclose(r, r_ref, rtol=0, atol=50 * np.finfo(dtype).eps * scale)
        np.testing.assert_allclose(q, q_ref, rtol=0, atol=50 * np.finfo(dtype).eps)
        s = K.svd(a)
        ref = np.linalg.svd(a.astype(np.float64), compute_uv=False)
        np.testing.assert_allclose(s, ref, rtol=0, atol=50 * np.finfo(dtype).eps * scale)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_gives_nan(bad):
    a = _mats(21, 6, 4, np.float32, seed=5)
    a[5, 2, 1] = bad
    a[20, 5, 3] = bad
    q, r = K.qr(a, False)
    s = K.svd(a)
    s_wide = K.svd(np.ascontiguousarray(np.swapaxes(a, 1, 2)))
    vectors = K.svd(a, compute_uv=True, full_matrices=True)
    ok = np.ones(21, bool)
    ok[[5, 20]] = False
    for i in (5, 20):
        assert np.isnan(q[i]).all() and np.isnan(r[i]).all()
        assert np.isnan(s[i]).all() and np.isnan(s_wide[i]).all()
        assert all(np.isnan(x[i]).all() for x in vectors)
    _check_qr(a[ok], q[ok], r[ok], False, 48)
    _check_svd(a[ok], s[ok], 48)
    _check_svd_vectors(a[ok], *(x[ok] for x in vectors), True, 48)


def test_jit_routes_and_matches_numpy():
    a = _mats(50, 6, 4, np.float32, seed=6)  # (16 or more matrices: the native kernels)
    q, r = ember.jit(lambda x: jnp.linalg.qr(x))(a)
    _check_qr(a, np.asarray(q), np.asarray(r), False, 48)
    q_k, r_k = K.qr(a, False)
    np.testing.assert_array_equal(np.asarray(q), q_k)
    np.testing.assert_array_equal(np.asarray(r), r_k)
    r_only = ember.jit(lambda x: jnp.linalg.qr(x, mode="r"))(a)
    np.testing.assert_array_equal(np.asarray(r_only), r_k)
    qc, rc = jnp.linalg.qr(a, mode="complete")
    _check_qr(a, np.asarray(qc), np.asarray(rc), True, 48)
    np.testing.assert_array_equal(np.asarray(qc), K.qr(a, True)[0])
    s = ember.jit(lambda x: jnp.linalg.svd(x, compute_uv=False))(a)
    np.testing.assert_array_equal(np.asarray(s), K.svd(a))
    np.testing.assert_array_equal(np.asarray(jnp.linalg.svdvals(a)), K.svd(a))
    for full in (False, True):
        u, s, vt = ember.jit(lambda x, full=full: jnp.linalg.svd(x, full_matrices=full))(a)
        for x, y in zip((s, u, vt), K.svd(a, compute_uv=True, full_matrices=full)):
            np.testing.assert_array_equal(np.asarray(x), y)


def test_small_batches_keep_lapack():
    from ember.lax import _lapack
    if not _lapack.available(np.dtype(np.float32)):
        pytest.skip("no LAPACK binding")
    a = _mats(3, 4, 4, np.float32, seed=7)
    s = np.asarray(jnp.linalg.svd(a, compute_uv=False))
    np.testing.assert_array_equal(s, _lapack.gesdd(a, False, False)[0])
    np.testing.assert_allclose(s, np.linalg.svd(a.astype(np.float64), compute_uv=False),
                               rtol=1e-5, atol=1e-6)


def test_batch_dims_and_vmap():
    a = _mats(24, 5, 3, np.float32, seed=8).reshape(4, 6, 5, 3)
    q, r = jnp.linalg.qr(a)
    _check_qr(a, np.asarray(q), np.asarray(r), False, 40)
    rm = ember.vmap(lambda x: jnp.linalg.qr(x)[1])(a)
    np.testing.assert_array_equal(np.asarray(rm), np.asarray(r))
    s = jnp.linalg.svd(a, compute_uv=False)
    _check_svd(a, np.asarray(s), 40)


def test_gradients_through_the_kernels(x64):
    # d s_i / dA = u_i v_i^T; the QR JVP uses the kernel's q and r.
    a = _mats(20, 4, 4, np.float64, seed=9)
    weights = np.arange(1.0, 5.0)
    g = ember.grad(lambda x: jnp.sum(jnp.linalg.svd(x, compute_uv=False) * weights))(a)
    u, _, vt = np.linalg.svd(a)
    np.testing.assert_allclose(np.asarray(g), np.einsum("bik,k,bkj->bij", u, weights, vt),
                               rtol=0, atol=1e-10)

    def loss(x):
        q, r = jnp.linalg.qr(x)
        return jnp.sum(jnp.sin(q)) + jnp.sum(r * r * 0.5)

    # Through u, s and vt: the reconstruction's gradient is cos(a), whatever the signs.
    g = ember.grad(lambda x: jnp.sum(jnp.sin(
        (lambda u, s, vt: (u * s[..., None, :]) @ vt)(*jnp.linalg.svd(x, full_matrices=False)))))
    for shape in ((20, 4, 4), (20, 6, 4), (20, 4, 6)):
        c = _mats(*shape, np.float64, seed=shape[1])
        np.testing.assert_allclose(np.asarray(g(c)), np.cos(c), rtol=0, atol=1e-10)

    b = _mats(20, 6, 4, np.float64, seed=10)
    g = np.asarray(ember.grad(loss)(b))
    d = np.random.default_rng(11).standard_normal(b.shape)
    h = 1e-6
    numeric = (float(loss(b + h * d)) - float(loss(b - h * d))) / (2 * h)
    np.testing.assert_allclose(np.sum(g * d), numeric, rtol=1e-6)


def test_matches_jax_oracle():
    jax = pytest.importorskip("jax")
    a = _mats(40, 6, 4, np.float32, seed=12)
    tol = 64 * np.finfo(np.float32).eps * np.abs(a).max()
    for mode in ("reduced", "complete"):
        mine = ember.jit(lambda x, mode=mode: jnp.linalg.qr(x, mode=mode))(a)
        ref = jax.jit(lambda x, mode=mode: jax.numpy.linalg.qr(x, mode=mode))(a)
        for x, y in zip(mine, ref):
            np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=0, atol=tol)
    for b in (a, np.ascontiguousarray(np.swapaxes(a, 1, 2))):
        s = ember.jit(lambda x: jnp.linalg.svd(x, compute_uv=False))(b)
        s_j = jax.jit(lambda x: jax.numpy.linalg.svd(x, compute_uv=False))(b)
        np.testing.assert_allclose(np.asarray(s), np.asarray(s_j), rtol=0, atol=tol)
        # Vectors: the same up to each pair's sign (distinct values).
        u, s, vt = ember.jit(lambda x: jnp.linalg.svd(x, full_matrices=False))(b)
        u_j, _, vt_j = jax.jit(lambda x: jax.numpy.linalg.svd(x, full_matrices=False))(b)
        sign = np.sign(np.sum(np.asarray(u) * np.asarray(u_j), axis=-2))
        np.testing.assert_allclose(np.asarray(u) * sign[..., None, :], np.asarray(u_j),
                                   rtol=0, atol=1e-3)
        np.testing.assert_allclose(np.asarray(vt) * sign[..., :, None], np.asarray(vt_j),
                                   rtol=0, atol=1e-3)


def test_run_rejects_unusable_operands():
    assert K.run("qr", np.zeros((20, 17, 3), np.float32), full_matrices=False) is None
    assert K.run("svd", np.zeros((20, 3, 3), np.int32)) is None
    with pytest.raises(ValueError):
        K.run("nope", np.zeros((2, 2, 2), np.float32))
