"""jnp.linalg, lax.linalg: values vs NumPy and JAX, batching, complex, jit on both backends,
vmap, derivatives (check_grads and JAX's JVPs), errors."""

import re

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.test_util import check_grads

L = lax.linalg
RNG = np.random.default_rng(0)


def _rand(shape, dtype=np.float64):
    x = RNG.normal(size=shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * RNG.normal(size=shape)
    return x.astype(dtype)


def _spd(shape, dtype=np.float64):
    a = _rand(shape, dtype)
    n = shape[-1]
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


def _tol(dtype):
    return 2e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10


BACKENDS = ("cpu", "interpreter")


def _jit(f, backend):
    return ember.jit(f, backend=backend)


# ---------------------------------------------------------------- values vs NumPy


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_decompositions_match_numpy(dtype):
    a = _rand((2, 4, 4), dtype)
    spd = _spd((2, 4, 4), dtype)
    tol = _tol(dtype)
    np.testing.assert_allclose(jnp.linalg.cholesky(spd), np.linalg.cholesky(spd), atol=tol)
    np.testing.assert_allclose(jnp.linalg.cholesky(spd, upper=True),
                               np.conj(np.swapaxes(np.linalg.cholesky(spd), -1, -2)), atol=tol)
    for mode in ("reduced", "complete"):
        q, r = jnp.linalg.qr(_rand((3, 5, 3), dtype), mode=mode)
    x = _rand((3, 5, 3), dtype)
    q, r = jnp.linalg.qr(x)
    nq, nr = np.linalg.qr(x)
    np.testing.assert_allclose(q, nq, atol=tol)
    np.testing.assert_allclose(r, nr, atol=tol)
    np.testing.assert_allclose(jnp.linalg.qr(x, mode="r"), np.linalg.qr(x, mode="r"), atol=tol)
    u, s, vh = jnp.linalg.svd(x, full_matrices=False)
    np.testing.assert_allclose(s, np.linalg.svd(x, compute_uv=False), rtol=tol)
    np.testing.assert_allclose(np.asarray(u) * np.asarray(s)[..., None, :] @ np.asarray(vh), x,
                               atol=10 * tol)
    w, v = jnp.linalg.eigh(spd)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(spd), rtol=tol)
    np.testing.assert_allclose(np.asarray(spd) @ np.asarray(v), np.asarray(v) * np.asarray(w)[
        ..., None, :], atol=20 * tol)
    np.testing.assert_allclose(np.sort_complex(np.asarray(jnp.linalg.eigvals(a)).ravel()),
                               np.sort_complex(np.linalg.eigvals(a).ravel()), atol=10 * tol)
    w, v = jnp.linalg.eig(a)
    assert w.dtype == np.result_type(dtype, np.complex64)
    np.testing.assert_allclose(a @ np.asarray(v), np.asarray(v) * np.asarray(w)[..., None, :],
                               atol=20 * tol)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_solvers_and_determinants_match_numpy(dtype):
    a = _rand((3, 4, 4), dtype) + 4 * np.eye(4, dtype=dtype)
    b = _rand((3, 4, 2), dtype)
    tol = _tol(dtype)
    np.testing.assert_allclose(jnp.linalg.solve(a, b), np.linalg.solve(a, b), atol=tol)
    vec = _rand((4,), dtype)
    np.testing.assert_allclose(jnp.linalg.solve(a, vec), np.linalg.solve(a, vec), atol=tol)
    np.testing.assert_allclose(jnp.linalg.solve(a, b[:1]), np.linalg.solve(a, b[:1]), atol=tol)
    np.testing.assert_allclose(jnp.linalg.inv(a), np.linalg.inv(a), atol=tol)
    np.testing.assert_allclose(jnp.linalg.det(a), np.linalg.det(a), rtol=tol)
    sign, logdet = jnp.linalg.slogdet(a)
    nsign, nlogdet = np.linalg.slogdet(a)
    np.testing.assert_allclose(sign, nsign, atol=tol)
    np.testing.assert_allclose(logdet, nlogdet, rtol=tol)
    x = _rand((5, 3), dtype)
    np.testing.assert_allclose(jnp.linalg.pinv(x), np.linalg.pinv(x), atol=tol)
    for p in (None, 1, -1, 2, -2, np.inf, -np.inf, "fro", "nuc"):
        np.testing.assert_allclose(jnp.linalg.norm(a, ord=p, axis=(1, 2)),
                                   np.linalg.norm(a, ord=p, axis=(1, 2)), rtol=tol)
        if p not in (-2, "nuc") and (p is None or p != -1 or dtype == np.float32):
            np.testing.assert_allclose(jnp.linalg.cond(a, p), np.linalg.cond(a, p), rtol=10 * tol)
    for p in (None, 0, 1, 2, 3, 0.5, np.inf, -np.inf):
        np.testing.assert_allclose(jnp.linalg.norm(a, ord=p, axis=1),
                                   np.linalg.norm(a, ord=p, axis=1), rtol=tol)
    np.testing.assert_allclose(jnp.linalg.norm(a), np.linalg.norm(a), rtol=tol)
    np.testing.assert_allclose(jnp.linalg.vector_norm(a, ord=1), np.sum(np.abs(a)), rtol=tol)
    np.testing.assert_allclose(jnp.linalg.matrix_norm(a, ord=2), np.linalg.norm(a, 2, (1, 2)),
                               rtol=tol)
    np.testing.assert_allclose(jnp.linalg.matrix_power(a[0], 5),
                               np.linalg.matrix_power(a[0], 5), rtol=10 * tol)
    np.testing.assert_allclose(jnp.linalg.matrix_power(a[0], -2),
                               np.linalg.matrix_power(a[0], -2), rtol=10 * tol, atol=tol)


def test_lstsq_rank_tensor_functions():
    a = _rand((6, 3))
    b = _rand((6, 2))
    x, resid, rank, s = jnp.linalg.lstsq(a, b)
    nx, nresid, nrank, ns = np.linalg.lstsq(a, b, rcond=None)
    np.testing.assert_allclose(x, nx, atol=1e-4)
    np.testing.assert_allclose(resid, nresid, rtol=1e-4)
    assert int(rank) == nrank
    np.testing.assert_allclose(s, ns, rtol=1e-5)
    low = np.outer(_rand((4,)), _rand((5,)))
    assert int(jnp.linalg.matrix_rank(low)) == 1 == np.linalg.matrix_rank(low)
    np.testing.assert_array_equal(jnp.linalg.matrix_rank(np.stack([low, _rand((4, 5))])),
                                  [1, 4])
    # (well conditioned whatever the shared RNG's state: which tests ran before varies)
    t = 0.1 * _rand((4, 6, 8, 3)) + np.eye(24).reshape(4, 6, 8, 3)
    np.testing.assert_allclose(jnp.linalg.tensorinv(t, ind=2), np.linalg.tensorinv(t, ind=2),
                               rtol=1e-3, atol=1e-4)
    tb = _rand((4, 6))
    np.testing.assert_allclose(jnp.linalg.tensorsolve(t, tb), np.linalg.tensorsolve(t, tb),
                               atol=1e-4)
    ms = [_rand((2, 5)), _rand((5, 7)), _rand((7, 3)), _rand((3,))]
    np.testing.assert_allclose(jnp.linalg.multi_dot(ms), np.linalg.multi_dot(ms), rtol=1e-4)
    v1, v2 = _rand((2, 3)), _rand((2, 3))
    np.testing.assert_allclose(jnp.linalg.cross(v1, v2), np.cross(v1, v2), rtol=1e-5)
    np.testing.assert_allclose(jnp.linalg.outer(v1[0], v2[1]), np.outer(v1[0], v2[1]),
                               rtol=1e-6)
    np.testing.assert_allclose(jnp.linalg.vecdot(v1, v2), np.sum(v1 * v2, -1), rtol=1e-5)
    m3 = _rand((2, 3, 4))
    np.testing.assert_allclose(jnp.linalg.trace(m3, offset=1), np.trace(m3, 1, -2, -1),
                               rtol=1e-5)
    np.testing.assert_allclose(jnp.linalg.diagonal(m3), np.diagonal(m3, 0, -2, -1))
    assert jnp.linalg.matrix_transpose(m3).shape == (2, 4, 3)
    h = _spd((4, 4))
    u, s, vh = jnp.linalg.svd(h, hermitian=True)
    np.testing.assert_allclose(s, np.linalg.svd(h, compute_uv=False), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(u) * np.asarray(s) @ np.asarray(vh), h, atol=1e-4)
    np.testing.assert_allclose(jnp.linalg.svdvals(m3), np.linalg.svd(m3, compute_uv=False),
                               rtol=1e-5)


def test_failures_follow_lapack():
    # Not positive definite: NaN factor (JAX's). Singular: inf/nan inverse, zero det.
    failed = np.asarray(jnp.linalg.cholesky(-np.eye(2)))  # JAX's: NaN below, zero above
    assert np.isnan(failed[np.tril_indices(2)]).all() and failed[0, 1] == 0
    ok_and_bad = np.stack([np.eye(2), -np.eye(2)])
    out = np.asarray(jnp.linalg.cholesky(ok_and_bad))
    np.testing.assert_array_equal(out[0], np.eye(2))
    assert np.isnan(out[1][np.tril_indices(2)]).all()
    sing = np.array([[1., 2.], [2., 4.]], np.float32)
    assert float(jnp.linalg.det(sing)) == 0.0
    sign, logdet = jnp.linalg.slogdet(sing)
    assert float(sign) == 0.0 and float(logdet) == -np.inf
    assert not np.isfinite(np.asarray(jnp.linalg.inv(sing))).all()
    assert float(jnp.linalg.cond(sing)) > 1e6


# ---------------------------------------------------------------- lax.linalg vs JAX


def test_lax_linalg_values_vs_jax(jax):
    jl = jax.lax.linalg
    a = _rand((2, 4, 4), np.float32)
    spd = _spd((2, 4, 4), np.float32)
    rect = _rand((2, 5, 3), np.float32)
    wide = _rand((2, 3, 5), np.float32)
    for x in (a, rect, wide):
        mine, theirs = L.lu(x), jl.lu(x)
        np.testing.assert_allclose(mine[0], theirs[0], atol=1e-5)
        for m, t in zip(mine[1:], theirs[1:]):
            np.testing.assert_array_equal(m, t)
            assert m.dtype == t.dtype
    for full in (True, False):
        for x in (rect, wide):
            for m, t in zip(L.qr(x, full_matrices=full), jl.qr(x, full_matrices=full)):
                np.testing.assert_allclose(m, t, atol=1e-5)
            for m, t in zip(L.svd(x, full_matrices=full), jl.svd(x, full_matrices=full)):
                np.testing.assert_allclose(np.abs(m), np.abs(t), atol=1e-5)
    for m, t in zip(L.eigh(spd), jl.eigh(spd)):
        np.testing.assert_allclose(np.abs(m), np.abs(t), atol=1e-4)
    np.testing.assert_allclose(L.cholesky(spd), jl.cholesky(spd), atol=1e-5)
    # eig: eigenvalues and eigenvectors up to a unit factor per column (LAPACK's
    # sign is not canonical), satisfying a vr = vr w and vl^H a = w vl^H.
    w, vl, vr = L.eig(a)
    jw, jvl, jvr = jl.eig(a)
    np.testing.assert_allclose(w, jw, atol=1e-4)
    np.testing.assert_allclose(np.abs(vr), np.abs(jvr), atol=1e-4)
    np.testing.assert_allclose(a @ np.asarray(vr), np.asarray(w)[..., None, :] * vr, atol=1e-4)
    np.testing.assert_allclose(np.abs(vl), np.abs(jvl), atol=1e-4)
    vlh = np.conj(np.swapaxes(np.asarray(vl), -1, -2))
    np.testing.assert_allclose(vlh @ a, np.asarray(w)[..., :, None] * vlh, atol=1e-4)
    for kw in (dict(left_side=True, lower=True), dict(left_side=False, lower=False,
                                                      transpose_a=True, unit_diagonal=True)):
        b = a[..., :2, :] if not kw["left_side"] else a[..., :2]
        np.testing.assert_allclose(L.triangular_solve(spd, b, **kw),
                                   jl.triangular_solve(spd, b, **kw), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(L.triangular_solve(spd, a[:, 0], left_side=True, lower=True),
                               jl.triangular_solve(spd, a[:, 0], left_side=True, lower=True),
                               rtol=1e-5)
    piv = np.array([[2, 2, 3], [0, 1, 2]], np.int32)
    np.testing.assert_array_equal(L.lu_pivots_to_permutation(piv, 5),
                                  jl.lu_pivots_to_permutation(piv, 5))
    d = (a[:, 0], a[:, 1] + 5, a[:, 2], rect[:, :4, :2] * 1)
    np.testing.assert_allclose(L.tridiagonal_solve(*d), jl.tridiagonal_solve(*d), rtol=1e-5)


# ---------------------------------------------------------------- jit (both backends), vmap


@pytest.mark.parametrize("backend", BACKENDS)
def test_jit_matches_eager(backend):
    spd = _spd((2, 3, 3), np.float32)
    x = _rand((2, 4, 3), np.float32)
    fns = [
        lambda a, b: L.cholesky(a), lambda a, b: L.lu(a), lambda a, b: L.qr(b),
        lambda a, b: L.svd(b), lambda a, b: L.eigh(a), lambda a, b: L.eig(a),
        lambda a, b: L.triangular_solve(a, b, left_side=False),
        lambda a, b: jnp.linalg.solve(a, b[:, :3]), lambda a, b: jnp.linalg.det(a),
        lambda a, b: jnp.linalg.slogdet(a), lambda a, b: jnp.linalg.pinv(b),
        lambda a, b: L.lu_pivots_to_permutation(L.lu(a)[1], 4),
        lambda a, b: L.tridiagonal_solve(a[:, 0], a[:, 1], a[:, 2], b[:, :3]),
    ]
    for f in fns:
        want = ember.tree_util.tree_leaves(f(spd, x))
        got = ember.tree_util.tree_leaves(_jit(f, backend)(spd, x))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_vmap_matches_loop():
    spd = _spd((3, 2, 4, 4), np.float32)
    b = _rand((2, 4, 2), np.float32)
    fns = [jnp.linalg.cholesky, jnp.linalg.det, jnp.linalg.inv, lambda a: L.lu(a),
           lambda a: jnp.linalg.qr(a), lambda a: L.eigh(a)[1], jnp.linalg.svdvals,
           lambda a: jnp.linalg.solve(a, b), lambda a: L.triangular_solve(a, b, left_side=True),
           jnp.linalg.eigvals]
    for f in fns:
        got = ember.tree_util.tree_leaves(ember.vmap(f)(spd))
        loop = [ember.tree_util.tree_leaves(f(s)) for s in spd]
        for i, g in enumerate(got):
            np.testing.assert_allclose(g, np.stack([np.asarray(lp[i]) for lp in loop]),
                                       rtol=1e-5, atol=1e-5)
    # An unbatched operand next to a batched one (b batched, a not).
    bs = _rand((3, 4, 2), np.float32)
    got = ember.vmap(lambda bb: L.triangular_solve(spd[0, 0], bb, left_side=True))(bs)
    want = [L.triangular_solve(spd[0, 0], bb, left_side=True) for bb in bs]
    # (atol: the shared generator's data varies with test order; a solution entry that
    # cancels to ~1e-3 differs in its relative ~1e-5 between batched and per-matrix solves.)
    np.testing.assert_allclose(got, np.stack(want), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- derivatives


def _grad_cases():
    a = _rand((2, 3, 3))
    spd = _spd((2, 3, 3))
    rect = _rand((4, 3))
    wide = _rand((2, 3, 4))
    c = _rand((3, 3), np.complex128)
    return [
        ("cholesky", lambda m: L.cholesky(m), spd),
        ("lu", lambda m: L.lu(m)[0], a),
        ("lu_wide", lambda m: L.lu(m)[0], wide),
        ("qr", lambda m: L.qr(m, full_matrices=False), rect),
        ("svd", lambda m: L.svd(m, full_matrices=False), rect),
        ("svd_wide", lambda m: L.svd(m, full_matrices=False), wide),
        ("svdvals", lambda m: L.svd(m, compute_uv=False), a),
        ("eigh", lambda m: L.eigh(m), spd),
        ("eigvals", lambda m: jnp.linalg.eigvals(m), a),
        ("tri_left", lambda m: L.triangular_solve(m, m[..., :2], left_side=True, lower=True), spd),
        ("tri_right", lambda m: L.triangular_solve(m, m[..., :2, :], transpose_a=True), spd),
        ("tridiag", lambda m: L.tridiagonal_solve(m[..., 0, :], m[..., 1, :] + 4, m[..., 2, :],
                                                  m[..., :2]), a),
        ("det", jnp.linalg.det, a),
        ("slogdet", lambda m: jnp.linalg.slogdet(m)[1], a),
        ("inv", jnp.linalg.inv, a),
        ("solve", lambda m: jnp.linalg.solve(m, m[..., :1]), a),
        ("pinv", jnp.linalg.pinv, rect),
        ("norm2", lambda m: jnp.linalg.norm(m, 2), rect),
        ("cholesky_c", lambda m: L.cholesky(m), _spd((3, 3), np.complex128)),
        ("qr_c", lambda m: L.qr(m), c),
        ("det_c", jnp.linalg.det, c),
    ]


_CASES = _grad_cases()


@pytest.mark.parametrize("name,f,x", _CASES, ids=[c[0] for c in _CASES])
def test_check_grads(x64, name, f, x):
    order = 2 if name in ("cholesky", "det", "inv", "eigh", "tri_left") else 1
    check_grads(f, (x,), order=order, modes=("fwd", "rev"))


_JAX_CASES = [c for c in _CASES if c[0] in ("cholesky", "lu_wide", "qr", "svd_wide", "eigh",
                                             "tri_right", "det", "qr_c")]


@pytest.mark.parametrize("name,f,x", _JAX_CASES, ids=[c[0] for c in _JAX_CASES])
def test_jvp_vs_jax(jax, name, f, x):
    jax_fns = _jax_versions(jax)
    x = x.astype(np.complex64 if x.dtype.kind == "c" else np.float32)
    t = _rand(x.shape, x.dtype)
    p, tt = ember.jvp(f, (x,), (t,))
    jp, jt = jax.jvp(jax_fns[name], (x,), (t,))
    leaves = ember.tree_util.tree_leaves
    for m, w in zip(leaves(tt), jax.tree_util.tree_leaves(jt)):
        np.testing.assert_allclose(m, w, rtol=2e-3, atol=2e-3)
    for m, w in zip(leaves(p), jax.tree_util.tree_leaves(jp)):
        np.testing.assert_allclose(m, w, rtol=1e-4, atol=1e-4)


def _jax_versions(jax):
    jl, jn = jax.lax.linalg, jax.numpy.linalg
    return {
        "cholesky": jl.cholesky, "lu": lambda m: jl.lu(m)[0], "lu_wide": lambda m: jl.lu(m)[0],
        "qr": lambda m: jl.qr(m, full_matrices=False),
        "svd": lambda m: jl.svd(m, full_matrices=False),
        "svd_wide": lambda m: jl.svd(m, full_matrices=False),
        "svdvals": lambda m: jl.svd(m, compute_uv=False), "eigh": jl.eigh,
        "eigvals": jn.eigvals,
        "tri_left": lambda m: jl.triangular_solve(m, m[..., :2], left_side=True, lower=True),
        "tri_right": lambda m: jl.triangular_solve(m, m[..., :2, :], transpose_a=True),
        "det": jn.det, "slogdet": lambda m: jn.slogdet(m)[1], "inv": jn.inv,
        "solve": lambda m: jn.solve(m, m[..., :1]), "pinv": jn.pinv,
        "cholesky_c": jl.cholesky, "qr_c": jl.qr, "det_c": jn.det,
    }


def test_grad_under_jit_and_eig_vectors_not_differentiable():
    a = _rand((3, 3), np.float32) + 3 * np.eye(3, dtype=np.float32)
    g = ember.grad(lambda m: jnp.linalg.slogdet(m)[1])(a)
    np.testing.assert_allclose(g, np.linalg.inv(a).T, rtol=1e-4)
    # d/dA sum(A^-1 1) = -A^-T 1 (A^-1 1)^T
    gj = ember.jit(ember.grad(lambda m: jnp.sum(jnp.linalg.solve(m, jnp.ones(3)))))(a)
    ainv = np.linalg.inv(a.astype(np.float64))
    np.testing.assert_allclose(gj, -np.outer(ainv.T @ np.ones(3), ainv @ np.ones(3)),
                               rtol=1e-4)
    with pytest.raises(NotImplementedError, match="eigenvectors"):
        ember.jvp(lambda m: jnp.linalg.eig(m)[1], (a,), (a,))


# ---------------------------------------------------------------- errors and dtypes


@pytest.mark.parametrize("call,exc,match", [
    (lambda: jnp.linalg.inv(jnp.ones(3)), ValueError, r"inv must have shape \[..., n, n\]"),
    (lambda: jnp.linalg.det(jnp.ones((2, 3))), ValueError, "det must have shape"),
    (lambda: jnp.linalg.solve(jnp.ones((2, 3, 3)), jnp.ones((2, 3))), ValueError,
     "Invalid shapes for solve"),
    (lambda: jnp.linalg.norm(jnp.ones((2, 2)), ord="bad"), ValueError,
     "Invalid order 'bad' for matrix norm"),
    (lambda: jnp.linalg.norm(jnp.ones((2, 2, 2)), axis=(0, 1, 2)), ValueError,
     "Improper number of axes"),
    (lambda: jnp.linalg.qr(jnp.ones((2, 2)), mode="bad"), ValueError, "Unsupported QR"),
    (lambda: jnp.linalg.outer(jnp.ones((2, 2)), jnp.ones(2)), ValueError, "one-dimensional"),
    (lambda: jnp.linalg.cross(jnp.ones(2), jnp.ones(2)), ValueError, "3-dimensional"),
    (lambda: jnp.linalg.svd(jnp.ones(3)), TypeError, "rank at least 2"),
    (lambda: jnp.linalg.matrix_power(jnp.ones((2, 3)), 2), TypeError, "must be square"),
    (lambda: jnp.linalg.eigh(jnp.ones((2, 2)), UPLO="X"), ValueError, "UPLO"),
    (lambda: L.cholesky(jnp.ones((2, 2), jnp.int32)), TypeError, "cholesky does not accept"),
    (lambda: L.triangular_solve(jnp.ones((3, 3)), jnp.ones((3, 2))), TypeError,
     "triangular_solve"),
    (lambda: L.lu_pivots_to_permutation(jnp.ones(3, jnp.int32), 2), ValueError,
     "permutation_size"),
    (lambda: jnp.linalg.solve([[1.]], [1.]), TypeError, "requires ndarray"),
])
def test_bad_calls(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_dtypes_and_empty():
    i = np.array([[2, 1], [1, 2]], np.int32)
    assert jnp.linalg.det(i).dtype == np.float32
    assert jnp.linalg.inv(i).dtype == np.float32
    assert jnp.linalg.norm(np.arange(3)).dtype == np.float32
    assert jnp.linalg.svd(i.astype(np.complex64), compute_uv=False).dtype == np.float32
    assert jnp.linalg.eigh(i)[0].dtype == np.float32
    assert jnp.linalg.inv(np.zeros((0, 3, 3), np.float32)).shape == (0, 3, 3)
    np.testing.assert_array_equal(jnp.linalg.det(np.zeros((0, 0), np.float32)), 1.0)
    assert L.lu(np.zeros((0, 2, 2), np.float32))[2].shape == (0, 2)


# ---------------------------------------------------------------- ember.scipy.linalg vs JAX


def test_scipy_linalg_vs_jax(jax):
    import jax.scipy.linalg as JS

    import ember.scipy.linalg as S
    a = _rand((4, 4), np.float32)
    a2 = a + 6 * np.eye(4, dtype=np.float32)
    spd = _spd((4, 4), np.float32)
    b = _rand((4, 2), np.float32)

    def same(mine, theirs, tol=1e-4):
        for m, t in zip(ember.tree_util.tree_leaves(mine), jax.tree_util.tree_leaves(theirs)):
            np.testing.assert_allclose(m, t, rtol=tol, atol=tol)

    for low in (True, False):
        c = S.cho_factor(spd, lower=low)[0]
        np.testing.assert_allclose(c @ np.conj(c.T) if low else np.conj(c.T) @ c, spd,
                                   rtol=1e-4)
        same(S.cho_solve(S.cho_factor(spd, lower=low), b),
             JS.cho_solve(JS.cho_factor(spd, lower=low), b))
    same(S.lu(a), JS.lu(a))
    same(S.lu(a[:, :3], permute_l=True), JS.lu(a[:, :3], permute_l=True))
    for t in (0, 1, 2):
        same(S.lu_solve(S.lu_factor(a2), b, trans=t), JS.lu_solve(JS.lu_factor(a2), b, trans=t))
        same(S.solve_triangular(a2, b, trans=t, lower=True),
             JS.solve_triangular(a2, b, trans=t, lower=True))
    same(S.solve(spd, b, assume_a="pos"), JS.solve(spd, b, assume_a="pos"))
    same(S.qr(a[:, :3]), JS.qr(a[:, :3]))
    same(S.qr(a[:, :3], mode="economic"), JS.qr(a[:, :3], mode="economic"))
    same(S.eigh(spd, eigvals_only=True), JS.eigh(spd, eigvals_only=True), tol=1e-3)
    for scale in (0.01, 3.0):  # a low Padé degree; the highest with squarings
        want = np.asarray(JS.expm(a * scale))
        np.testing.assert_allclose(S.expm(a * scale), want, rtol=2e-4,
                                   atol=2e-5 * np.abs(want).max())
    batch = np.stack([a, a * 0.1])
    np.testing.assert_allclose(ember.jit(S.expm)(batch), np.stack([S.expm(m) for m in batch]),
                               rtol=1e-5)
    same(ember.grad(lambda x: jnp.sum(S.expm(x)))(a * 0.3),
         jax.grad(lambda x: jax.numpy.sum(JS.expm(x)))(a * 0.3))
    blocks = (np.ones((1, 2)), 2.0, np.arange(4).reshape(2, 2))
    same(S.block_diag(*blocks), JS.block_diag(*blocks))
    same(S.toeplitz(np.arange(3), np.arange(4) + 5), JS.toeplitz(np.arange(3), np.arange(4) + 5))
    same(S.toeplitz(np.arange(3.0) + 1j), JS.toeplitz(np.arange(3.0) + 1j))


def test_scipy_eigh_symmetrizes_its_input():
    # jax.scipy.linalg.eigh symmetrizes (a + a^H) / 2 before decomposing, so both
    # triangles count and `lower` changes nothing (unlike SciPy, which reads one triangle).
    import ember.scipy.linalg as S
    a = np.array([[1.0, 99.0], [2.0, 3.0]], np.float32)
    want = np.linalg.eigvalsh((a + a.T) / 2)
    for lower in (True, False):
        np.testing.assert_allclose(S.eigh(a, lower=lower, eigvals_only=True), want, rtol=1e-5)
        w, v = S.eigh(a, lower=lower)
        np.testing.assert_allclose(w, want, rtol=1e-5)
        np.testing.assert_allclose((a + a.T) / 2 @ v, v * w, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_eigvals_run_lapack_geev_in_their_own_precision(dtype, monkeypatch):
    # (NumPy's eigvals computes float32 in float64: the binding's geev, ~1.5x faster)
    from ember.lax import _lapack
    if not _lapack.available(dtype):
        pytest.skip("no LAPACK binding")
    rng = np.random.default_rng(9)
    a = rng.standard_normal((4, 24, 24)).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((4, 24, 24)).astype(np.float32)
    want = np.linalg.eigvals(a.astype(np.complex128))
    monkeypatch.setattr(np.linalg, "eigvals", lambda *_: pytest.fail("NumPy's eigvals"))
    got = np.asarray(ember.jit(jnp.linalg.eigvals)(a))
    assert got.dtype == np.complex64
    for g, w in zip(got, want):  # (each eigenvalue's nearest: conjugate pairs tie in order)
        nearest = np.abs(g[:, None] - w[None, :]).min(axis=1)
        assert np.max(nearest) < 2e-4 * np.abs(w).max()
    a[1, 3, 2] = np.nan  # (NaN eigenvalues for that matrix alone, as JAX gives)
    got = np.asarray(ember.jit(jnp.linalg.eigvals)(a))
    assert np.isnan(got[1]).all() and np.isfinite(got[[0, 2, 3]]).all()


def test_eigvals_computes_no_eigenvectors(monkeypatch):
    # (eigenvalues alone come from LAPACK's geev without vectors, 2x faster)
    a = np.random.default_rng(8).standard_normal((3, 20, 20)).astype(np.float32)
    monkeypatch.setattr(np.linalg, "eig", lambda *_: pytest.fail("eigenvectors computed"))
    got = np.asarray(ember.jit(jnp.linalg.eigvals)(a))
    assert got.dtype == np.complex64
    want = np.linalg.eigvals(a.astype(np.float64))
    np.testing.assert_allclose(np.sort_complex(got), np.sort_complex(want), atol=1e-4)


def test_solve_and_inv_gradients_use_one_factorization_and_the_transposed_solve():
    """Reverse mode of ``solve`` goes through the equation ``a x = b``: ``ct_b = a^-T g``
    and ``ct_a = -ct_b x^T`` from the forward pass's single LU factorization, never through
    the factorization's own derivative (whose triangular solves take n x n right-hand
    sides)."""
    rng = np.random.default_rng(3)
    n, k = 24, 3
    a = (rng.standard_normal((2, n, n)) + 6 * np.eye(n)).astype(np.float32)
    b = rng.standard_normal((2, n, k)).astype(np.float32)
    g = rng.standard_normal((2, n, k)).astype(np.float32)

    def loss(a, b):
        return jnp.sum(jnp.linalg.solve(a, b) * g)

    grad = ember.jit(ember.grad(loss, argnums=(0, 1)))
    ga, gb = grad(a, b)
    a64, b64, g64 = (x.astype(np.float64) for x in (a, b, g))
    x64 = np.linalg.solve(a64, b64)
    ct_b = np.linalg.solve(np.swapaxes(a64, -1, -2), g64)
    np.testing.assert_allclose(gb, ct_b, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ga, -ct_b @ np.swapaxes(x64, -1, -2), rtol=1e-4, atol=1e-5)

    jaxpr = str(ember.make_jaxpr(ember.grad(loss, argnums=(0, 1)))(a, b))
    assert jaxpr.count(" lu ") == 1
    hlo = grad.lower(a, b).compile().as_text()
    assert hlo.count("ember.linalg.lu") == 1
    assert not re.search(r"f32\[2,24,24\] custom_call\(.*triangular_solve", hlo)
    assert len(re.findall(r"f32\[2,24,3\] custom_call\(.*triangular_solve", hlo)) == 4

    # inv's gradient: d(inv a) = -inv(a) da inv(a), so ct_a = -inv(a)^T g inv(a)^T.
    ginv = ember.jit(ember.grad(lambda a: jnp.sum(jnp.linalg.inv(a) * g[..., :1])))(a)
    inv64 = np.linalg.inv(a64)
    gi = np.broadcast_to(g64[..., :1], a.shape)
    want = -np.swapaxes(inv64, -1, -2) @ gi @ np.swapaxes(inv64, -1, -2)
    np.testing.assert_allclose(ginv, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
@pytest.mark.parametrize("shape", [(2, 9, 6), (6, 9), (7, 7)])
def test_svd_runs_lapack_gesdd_and_gives_nan_for_nonfinite_matrices(dtype, shape, monkeypatch,
                                                                     x64):
    """``svd`` calls LAPACK's gesdd through the binding (NumPy's svd never runs): values,
    reconstruction and orthonormal vectors for every ``full_matrices``; a matrix with a NaN
    or inf gets all-NaN outputs (NumPy raises for it; JAX gives NaN), the other matrices
    of the batch their SVD."""
    from ember.lax import _lapack
    if not _lapack.available(dtype):
        pytest.skip("no LAPACK binding")
    rng = np.random.default_rng(11)
    a = rng.standard_normal(shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape).astype(np.float32)
    want = np.linalg.svd(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64),
                         compute_uv=False)
    monkeypatch.setattr(np.linalg, "svd", lambda *_, **__: pytest.fail("NumPy's svd"))
    tol = 1e-5 if a.dtype in (np.float32, np.complex64) else 1e-12
    s = np.asarray(ember.jit(lambda x: jnp.linalg.svd(x, compute_uv=False))(a))
    np.testing.assert_allclose(s, want, rtol=tol * 10, atol=tol * 10)
    k = min(shape[-2:])
    for full in (False, True):
        u, s, vt = (np.asarray(o) for o in jnp.linalg.svd(a, full_matrices=full))
        assert u.shape == shape[:-2] + (shape[-2], shape[-2] if full else k)
        assert vt.shape == shape[:-2] + (shape[-1] if full else k, shape[-1])
        np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ vt[..., :k, :], a,
                                   rtol=tol * 100, atol=tol * 100)
        for q in (u, np.swapaxes(vt, -1, -2)):
            gram = np.swapaxes(q.conj(), -1, -2) @ q
            np.testing.assert_allclose(gram, np.broadcast_to(np.eye(q.shape[-1]), gram.shape),
                                       atol=tol * 100)
    bad = a.copy()
    bad[(0,) * (len(shape) - 2) + (1, 2)] = np.nan if len(shape) == 2 else np.inf
    for out in (jnp.linalg.svd(bad, compute_uv=False), *jnp.linalg.svd(bad)):
        out = np.asarray(out)
        first = out[0] if len(shape) == 3 else out
        assert np.isnan(first).all()
        if len(shape) == 3:
            assert np.isfinite(out[1]).all()


def test_svd_of_a_nonfinite_matrix_without_the_binding_is_nan_too(monkeypatch):
    from ember.lax import _lapack
    monkeypatch.setattr(_lapack, "available", lambda *_: False)
    a = np.ones((2, 5, 5), np.float32)
    a[1, 0, 0] = np.nan
    s = np.asarray(jnp.linalg.svd(a, compute_uv=False))
    assert np.isnan(s[1]).all()
    np.testing.assert_allclose(s[0], [5, 0, 0, 0, 0], atol=1e-5)
    u, s, vt = (np.asarray(o) for o in jnp.linalg.svd(a[1]))
    assert np.isnan(u).all() and np.isnan(s).all() and np.isnan(vt).all()


@pytest.mark.parametrize("vectors", ["none", "right", "both"])
def test_eig_of_a_nonfinite_matrix_is_nan(vectors, monkeypatch):
    """(NumPy's eig and eigvals raise for a NaN or inf; JAX gives NaN) The other matrices of
    a batch keep their eigenpairs; without the LAPACK binding too."""
    from ember.lax import _lapack
    rng = np.random.default_rng(12)
    a = rng.standard_normal((3, 5, 5)).astype(np.float32)
    a[1, 2, 3], a[2, 0, 0] = np.nan, np.inf
    left, right = vectors == "both", vectors != "none"
    for binding in (True, False):
        if not binding:
            monkeypatch.setattr(_lapack, "available", lambda *_: False)
        outs = lax.linalg.eig(a, compute_left_eigenvectors=left,
                              compute_right_eigenvectors=right)
        for out in outs:
            out = np.asarray(out)
            assert np.isnan(out[1:]).all() and np.isfinite(out[0]).all()
        w = np.asarray(outs[0][0])
        np.testing.assert_allclose(np.sort_complex(w), np.sort_complex(
            np.linalg.eigvals(a[0].astype(np.float64))), atol=1e-4)
        if right:
            v = np.asarray(outs[-1][0])
            np.testing.assert_allclose(a[0] @ v, v * w, atol=1e-4)


def test_slogdet_sign_of_a_matrix_with_a_nan_stays_finite():
    # (JAX counts negative pivots for the sign: a NaN pivot does not make it NaN)
    rng = np.random.default_rng(13)
    a = rng.standard_normal((4, 4)).astype(np.float32)
    sign, logdet = jnp.linalg.slogdet(a)
    want_sign, want_logdet = np.linalg.slogdet(a.astype(np.float64))
    assert float(sign) == want_sign
    np.testing.assert_allclose(float(logdet), want_logdet, rtol=1e-5)
    a[1, 2] = np.nan
    sign, logdet = jnp.linalg.slogdet(a)
    assert abs(float(sign)) == 1 and np.isnan(float(logdet))


def test_lstsq_and_funm_of_a_zero_matrix_are_finite():
    # lstsq keeps only positive singular values (a zero matrix: x = 0, rank 0, as NumPy and
    # JAX); funm leaves a repeated eigenvalue's entry undivided (as JAX) instead of 0 / 0.
    import ember.scipy.linalg as S
    zero = np.zeros((4, 3), np.float32)
    x, resid, rank, s = jnp.linalg.lstsq(zero, np.ones(4, np.float32))
    np.testing.assert_array_equal(x, np.zeros(3, np.float32))
    assert int(rank) == 0
    np.testing.assert_allclose(resid, [4.0])
    f = np.asarray(S.funm(np.zeros((3, 3), np.float32), jnp.cos))
    np.testing.assert_allclose(f, np.eye(3), atol=1e-6)
