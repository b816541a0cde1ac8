"""The vectorized kernels for large batches of small matrices (``ember.lax._small_batch``)
against the per-matrix LAPACK calls and NumPy, and the jnp.linalg functions that use them
against JAX."""

import itertools

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.lax import _lapack
from ember.lax import _small_batch as sb
from ember.lax import linalg as lax_linalg

needs_lapack = pytest.mark.skipif(not _lapack.available(), reason="no LAPACK binding")


def _tol(dt):
    return 2e-4 if np.dtype(dt) == np.float32 else 1e-11


def _reference_getrf(x):
    """LU with partial pivoting, one matrix at a time in plain Python loops (LAPACK's
    getf2: first largest |entry| as the pivot, a zero pivot's column left unscaled)."""
    out, pivs, perms = [], [], []
    for mat in x.reshape((-1,) + x.shape[-2:]).astype(np.float64):
        a = mat.copy()
        m, n = a.shape
        perm = list(range(m))
        piv = []
        for j in range(min(m, n)):
            p = j + int(np.argmax(np.abs(a[j:, j])))
            piv.append(p)
            a[[j, p]] = a[[p, j]]
            perm[j], perm[p] = perm[p], perm[j]
            if a[j, j] != 0:
                a[j + 1:, j] /= a[j, j]
            a[j + 1:, j + 1:] -= np.outer(a[j + 1:, j], a[j, j + 1:])
        out.append(a)
        pivs.append(piv)
        perms.append(perm)
    return np.array(out).reshape(x.shape), np.array(pivs), np.array(perms)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (4, 4), (8, 8), (5, 3), (3, 5)])
def test_getrf_matches_reference(dt, shape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((30,) + shape).astype(dt)
    x[1] = 0  # all-zero: zero pivots everywhere
    x[2, :, 0] = 0  # a zero first column
    x[3, -1] = x[3, 0] + 2 * x[3, min(1, shape[0] - 1)]  # singular, no ties
    lu, piv, perm = sb.getrf(x)
    ref_lu, ref_piv, ref_perm = _reference_getrf(x)
    assert lu.dtype == dt and piv.dtype == perm.dtype == np.int32
    np.testing.assert_array_equal(piv.reshape(ref_piv.shape), ref_piv)
    np.testing.assert_array_equal(perm, ref_perm)
    np.testing.assert_allclose(lu, ref_lu, rtol=_tol(dt), atol=_tol(dt))
    # P x = L U
    m, n = shape
    k = min(m, n)
    low = np.tril(lu[..., :k], -1) + np.eye(m, k, dtype=dt)
    up = np.triu(lu[..., :k, :])
    np.testing.assert_allclose(low @ up, np.take_along_axis(x, perm[..., None], -2),
                               rtol=10 * _tol(dt), atol=10 * _tol(dt))


def test_getrf_keeps_batch_dims_and_input():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4, 4))
    keep = x.copy()
    lu, piv, perm = sb.getrf(x)
    np.testing.assert_array_equal(x, keep)
    assert lu.shape == x.shape and piv.shape == perm.shape == (2, 3, 4)
    ref = _reference_getrf(x)
    np.testing.assert_allclose(lu, ref[0], rtol=1e-12, atol=1e-12)


def test_getrf_nan_and_inf_propagate():
    x = np.tile(np.eye(3), (4, 1, 1))
    x[0, 1, 0] = np.nan
    x[1, 2, 2] = np.inf
    lu, _, _ = sb.getrf(x)
    assert np.isnan(lu[0]).any() and not np.isfinite(lu[1]).all()
    np.testing.assert_array_equal(lu[2:], x[2:])


@needs_lapack
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 3, 8])
def test_trsm_matches_lapack_every_flag(dt, n):
    rng = np.random.default_rng(2)
    a = (rng.standard_normal((20, n, n)) + 3 * np.eye(n)).astype(dt)
    a[2, 0, 0] = 0  # a zero diagonal entry: infinities/NaNs as LAPACK gives
    for left, lower, tr, unit in itertools.product([True, False], repeat=4):
        b = rng.standard_normal((20, n, 2) if left else (20, 2, n)).astype(dt)
        kw = dict(left_side=left, lower=lower, transpose_a=tr, conjugate_a=False,
                  unit_diagonal=unit)
        with np.errstate(all="ignore"):
            got, want = sb.trsm(a, b, **kw), _lapack.trsm(a, b, **kw)
        assert got.dtype == dt and got.shape == b.shape
        finite = np.isfinite(want)
        np.testing.assert_array_equal(np.isfinite(got), finite, err_msg=str(kw))
        # (which of inf and NaN a zero pivot gives depends on BLAS's kernel: OpenBLAS's
        # Haswell strsm makes NaN of the whole solution where b / 0 is an infinity)
        np.testing.assert_allclose(got[finite], want[finite], rtol=10 * _tol(dt),
                                   atol=10 * _tol(dt), err_msg=str(kw))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_potrf_matches_numpy_and_fails_like_lapack(dt, n):
    rng = np.random.default_rng(3)
    g = rng.standard_normal((20, n, n))
    s = (g @ np.swapaxes(g, -1, -2) + n * np.eye(n)).astype(dt)
    s[..., np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] = 7.0  # never read
    s[1] = -s[1]  # not positive definite: all NaN
    out = sb.potrf(s)
    assert out.dtype == dt
    ok = np.arange(20) != 1
    np.testing.assert_allclose(np.tril(out[ok]), np.linalg.cholesky(np.tril(s[ok]) + np.swapaxes(
        np.tril(s[ok], -1), -1, -2)), rtol=10 * _tol(dt), atol=10 * _tol(dt))
    np.testing.assert_array_equal(np.triu(out[ok], 1), np.triu(s[ok], 1))  # kept
    assert np.isnan(out[1]).all()


def test_potrf_nan_pivot_propagates_without_failing():
    s = np.tile(np.diag([4.0, 9.0, 1.0]), (3, 1, 1))
    s[0, 2, 2] = np.nan
    out = sb.potrf(s)
    np.testing.assert_array_equal(out[0, :2, :2], [[2, 0], [0, 3]])
    assert np.isnan(out[0, 2, 2])


def test_worth_it_routing(monkeypatch):
    from ember.compiler.evaluator import CUSTOM_CALL_TARGETS
    if sb.NATIVE_TARGET in CUSTOM_CALL_TARGETS:  # native kernels: any batch pays off
        assert sb.worth_it("getrf", np.zeros((2, 4, 4)))
        assert sb.worth_it("potrf", np.zeros((2, 16, 16), np.float32))
    monkeypatch.delitem(CUSTOM_CALL_TARGETS, sb.NATIVE_TARGET, raising=False)
    assert sb.worth_it("getrf", np.zeros((1000, 4, 4), np.float32))
    assert sb.worth_it("trsm", np.zeros((1000, 8, 8)), 8)
    assert not sb.worth_it("getrf", np.zeros((2, 4, 4)))  # too few: LAPACK per matrix
    assert not sb.worth_it("getrf", np.zeros((4, 4)))  # no batch
    assert not sb.worth_it("getrf", np.zeros((1000, 64, 64)))  # too large
    assert not sb.worth_it("potrf", np.zeros((1000, 4, 4), np.complex64))  # complex
    assert not sb.worth_it("potrf", np.zeros((0, 4, 4)))


# ---------------------------------------------------------------- through jnp.linalg, vs JAX


def _jax():
    return pytest.importorskip("jax")


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_jit_batched_solve_inv_det_match_jax(dt, n):
    jax = _jax()
    import jax.numpy as jjnp
    rng = np.random.default_rng(4)
    a = (rng.standard_normal((300, n, n)) + 2 * np.eye(n)).astype(dt)
    a[5] = 0  # singular
    b = rng.standard_normal((300, n, 1)).astype(dt)
    tol = 1e-3 if dt == np.float32 else 1e-9
    x64 = dt == np.float64
    jax.config.update("jax_enable_x64", x64)
    ember.config.update("jax_enable_x64", x64)
    try:
        want = [np.asarray(f(a, b)) for f in (
            jax.jit(lambda a, b: jjnp.linalg.solve(a, b)),
            jax.jit(lambda a, b: jjnp.linalg.inv(a)),
            jax.jit(lambda a, b: jjnp.linalg.det(a)),
            jax.jit(lambda a, b: jjnp.linalg.slogdet(a)[1]))]
        got = [np.asarray(f(a, b)) for f in (
            ember.jit(lambda a, b: jnp.linalg.solve(a, b)),
            ember.jit(lambda a, b: jnp.linalg.inv(a)),
            ember.jit(lambda a, b: jnp.linalg.det(a)),
            ember.jit(lambda a, b: jnp.linalg.slogdet(a)[1]))]
    finally:
        jax.config.update("jax_enable_x64", False)
        ember.config.update("jax_enable_x64", False)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(np.isfinite(g), np.isfinite(w))
        fin = np.isfinite(w)
        np.testing.assert_allclose(g[fin], w[fin], rtol=tol, atol=tol)


@pytest.mark.parametrize("n", [3, 8])
def test_jit_batched_cholesky_and_lu_match_jax(n):
    jax = _jax()
    import jax.numpy as jjnp
    rng = np.random.default_rng(5)
    g = rng.standard_normal((500, n, n)).astype(np.float32)
    s = g @ np.swapaxes(g, -1, -2) + n * np.eye(n, dtype=np.float32)
    s[7] = -s[7]
    want = np.asarray(jax.jit(jjnp.linalg.cholesky)(s))
    got = np.asarray(ember.jit(jnp.linalg.cholesky)(s))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    w_lu, w_piv, w_perm = (np.asarray(o) for o in jax.jit(jax.lax.linalg.lu)(g))
    g_lu, g_piv, g_perm = (np.asarray(o) for o in ember.jit(lax_linalg.lu)(g))
    np.testing.assert_array_equal(g_piv, w_piv)
    np.testing.assert_array_equal(g_perm, w_perm)
    np.testing.assert_allclose(g_lu, w_lu, rtol=1e-3, atol=1e-3)


def test_batched_solve_gradient_matches_jax():
    jax = _jax()
    import jax.numpy as jjnp
    rng = np.random.default_rng(6)
    a = (rng.standard_normal((200, 3, 3)) + 2 * np.eye(3)).astype(np.float32)
    b = rng.standard_normal((200, 3, 1)).astype(np.float32)
    want = jax.grad(lambda a, b: jjnp.sum(jjnp.linalg.solve(a, b) ** 2), (0, 1))(a, b)
    got = ember.grad(lambda a, b: jnp.sum(jnp.linalg.solve(a, b) ** 2), (0, 1))(a, b)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("n", [2, 3])
def test_small_det_formula_value_and_gradient_match_jax(n):
    jax = _jax()
    import jax.numpy as jjnp
    rng = np.random.default_rng(7)
    a = rng.standard_normal((50, n, n)).astype(np.float32)
    a[3] = 0  # singular: zero determinant, finite gradient
    np.testing.assert_allclose(ember.jit(jnp.linalg.det)(a), jax.jit(jjnp.linalg.det)(a),
                               rtol=1e-5, atol=1e-6)
    got = ember.grad(lambda x: jnp.sum(jnp.linalg.det(x)))(a)
    want = jax.grad(lambda x: jjnp.sum(jjnp.linalg.det(x)))(a)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scale,max_squarings", [(0.01, 16), (1.0, 16), (40.0, 16), (40.0, 2)])
def test_expm_squarings_match_jax(scale, max_squarings):
    """No squaring, a few, and more than ``max_squarings`` (NaN), with jvp and grad (taken
    through the scan formulation) against JAX."""
    jax = _jax()
    from jax.scipy import linalg as jsl

    from ember.scipy import linalg as esl
    rng = np.random.default_rng(8)
    a = (rng.standard_normal((6, 6)) * scale / 6).astype(np.float32)
    got = np.asarray(ember.jit(lambda x: esl.expm(x, max_squarings=max_squarings))(a))
    want = np.asarray(jsl.expm(a, max_squarings=max_squarings))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    scale_ = np.nanmax(np.abs(want)) if np.isfinite(want).any() else 1.0
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5 * scale_)
    if max_squarings != 16:
        return
    t = rng.standard_normal((6, 6)).astype(np.float32)
    _, g_t = ember.jvp(esl.expm, (a,), (t,))
    _, w_t = jax.jvp(jsl.expm, (a,), (t,))
    np.testing.assert_allclose(np.asarray(g_t), np.asarray(w_t), rtol=1e-3,
                               atol=1e-4 * np.abs(np.asarray(w_t)).max())
    g = ember.grad(lambda x: jnp.sum(esl.expm(x) * t))(a)
    w = jax.grad(lambda x: jax.numpy.sum(jsl.expm(x) * t))(a)
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-3,
                               atol=1e-4 * np.abs(np.asarray(w)).max())
