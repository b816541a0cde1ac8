"""lax.linalg's LAPACK-style reductions (Hessenberg, tridiagonal, Schur, Householder products)
and the rest of scipy.linalg, against JAX and against invariants."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
import ember.scipy.linalg as esl
from ember.lax import linalg as el

RNG = np.random.default_rng(0)


def _mat(shape, dtype):
    x = RNG.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return x.astype(dtype)


def _close(a, b, tol=2e-4):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_reductions_match_jax(jax, dtype):
    from jax._src.lax.linalg import geqrf as jgeqrf
    jl = jax.lax.linalg
    a = _mat((2, 5, 5), dtype)
    for e, j in zip(el.hessenberg(a), jl.hessenberg(a)):
        _close(e, j)
    for e, j in zip(ember.jit(el.hessenberg)(a), jl.hessenberg(a)):
        _close(e, j)
    for lower in (True, False):
        for e, j in zip(el.tridiagonal(a, lower=lower), jl.tridiagonal(a, lower=lower)):
            _close(e, j)
    r = _mat((2, 5, 3), dtype)
    h, t = jgeqrf(r)
    for e, j in zip(el.geqrf(r), (h, t)):
        _close(e, j)
    _close(el.householder_product(np.asarray(h), np.asarray(t)), jl.householder_product(h, t))
    for left, c in ((True, _mat((2, 5, 4), dtype)), (False, _mat((2, 4, 5), dtype))):
        for tr in (False, True):
            _close(el.ormqr(np.asarray(h), np.asarray(t), c, left=left, transpose=tr),
                   jl.ormqr(h, t, c, left=left, transpose=tr))


@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.float32])
@pytest.mark.parametrize("n", [1, 2, 6, 30])
def test_schur_invariants(x64, dtype, n):
    a = _mat((n, n), dtype)
    t, q = (np.asarray(v) for v in el.schur(a))
    assert t.dtype == dtype
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(q @ t @ q.conj().T, a, atol=tol * n)
    np.testing.assert_allclose(q.conj().T @ q, np.eye(n), atol=tol * n)
    assert np.all(np.tril(t, -2) == 0)
    if np.dtype(dtype).kind == "c":
        assert np.all(np.tril(t, -1) == 0)
    else:  # 2x2 blocks don't touch; each has equal diagonal entries and complex eigenvalues
        sub = np.diagonal(t, -1)
        assert not np.any((sub[:-1] != 0) & (sub[1:] != 0))
        for k in np.nonzero(sub)[0]:
            assert abs(t[k, k] - t[k + 1, k + 1]) <= tol * 10 and t[k, k + 1] * t[k + 1, k] < 0
    ev = np.linalg.eigvals(a.astype(np.complex128))
    got = np.linalg.eigvals(t.astype(np.complex128))
    # each eigenvalue of T is one of a's (sorting would split rounded conjugate pairs)
    assert np.abs(got[:, None] - ev[None, :]).min(axis=1).max() <= tol * 100


def test_schur_hard_cases_and_jit():
    jordan = np.array([[1., 1, 0], [0, 1, 1], [0, 0, 1]], np.float32)
    t, q = el.schur(jordan)
    _close(t, jordan)
    perm = np.roll(np.eye(6, dtype=np.float32), 1, 0)  # unit-circle eigenvalues
    t, q = ember.jit(el.schur)(perm)
    np.testing.assert_allclose(np.asarray(q) @ np.asarray(t) @ np.asarray(q).T, perm,
                               atol=1e-5)
    t, = el.schur(np.eye(2, dtype=np.float32), compute_schur_vectors=False)
    _close(t, np.eye(2, dtype=np.float32))
    with pytest.raises(NotImplementedError):
        el.schur(np.eye(2, dtype=np.float32), sort_eig_vals=True)
    with pytest.raises(ValueError, match="square"):
        el.schur(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError):
        el.hessenberg(np.ones((2, 2), np.int32))


def test_small_lax_functions_match_jax(jax):
    jl = jax.lax.linalg
    a, c = _mat((4, 3), np.float32), _mat((4, 4), np.float32)
    c = c + c.T
    _close(el.symmetric_product(a, c, alpha=2., beta=.5, symmetrize_output=True),
           jl.symmetric_product(a, c, alpha=2., beta=.5, symmetrize_output=True))
    r = np.linalg.cholesky(c @ c.T + np.eye(4, dtype=np.float32)).T
    w = _mat((4,), np.float32)
    _close(el.cholesky_update(r, w), jl.cholesky_update(r, w))
    for dtype in (np.float32, np.complex64):
        x = _mat((5, 3), dtype)
        e, j = el.qdwh(x), jl.qdwh(x)
        _close(e[0], j[0], 1e-4)
        _close(e[1], j[1], 1e-4)
        assert bool(e[3]) and int(e[2]) == int(j[2])
    assert [m.value for m in el.SvdAlgorithm] == [m.value for m in jl.SvdAlgorithm]
    assert [m.value for m in el.EighImplementation] == [m.value for m in jl.EighImplementation]
    assert [m.value for m in el.EigImplementation] == [m.value for m in jl.EigImplementation]
    with pytest.raises(ValueError, match="M >= N"):
        el.qdwh(np.ones((2, 3), np.float32))


def test_symmetric_product_grad():
    from ember.test_util import check_grads
    a, c = _mat((3, 2), np.float32), _mat((3, 3), np.float32)
    check_grads(lambda a, c: el.symmetric_product(a, c, alpha=1.5, beta=0.5), (a, c),
                order=2, modes=["fwd", "rev"], atol=2e-2, rtol=2e-2)


def test_scipy_decompositions_match_jax(jax):
    S = jax.scipy.linalg
    a = _mat((4, 4), np.float32)
    spd = a @ a.T + 4 * np.eye(4, dtype=np.float32)
    _close(esl.cholesky(spd), S.cholesky(spd))
    _close(esl.cholesky(spd, lower=True), S.cholesky(spd, lower=True))
    for e, j in zip(esl.hessenberg(a, calc_q=True), S.hessenberg(a, calc_q=True)):
        _close(e, j)
    _close(esl.sqrtm(spd), S.sqrtm(spd))
    _close(esl.sqrtm(a), S.sqrtm(a), 1e-3)
    _close(esl.funm(a, jnp.exp), S.funm(a, jax.numpy.exp), 1e-3)
    for kw in ({}, {"method": "svd"}):
        for e, j in zip(esl.polar(a, **kw), S.polar(a, **kw)):
            _close(e, j, 1e-3)
    b, cc = _mat((3, 3), np.float32), _mat((4, 3), np.float32)
    _close(esl.solve_sylvester(a, b, cc), S.solve_sylvester(a, b, cc), 1e-3)
    e_dir = _mat((4, 4), np.float32)
    for e, j in zip(esl.expm_frechet(0.3 * a, e_dir), S.expm_frechet(0.3 * a, e_dir)):
        _close(e, j, 1e-3)
    d, off = _mat((5,), np.float32), _mat((4,), np.float32)
    _close(esl.eigh_tridiagonal(d, off, eigvals_only=True),
           S.eigh_tridiagonal(d, off, eigvals_only=True))
    _close(esl.eigh_tridiagonal(d, off, eigvals_only=True, select="i", select_range=(1, 3)),
           S.eigh_tridiagonal(d, off, eigvals_only=True, select="i", select_range=(1, 3)))
    x = _mat((5, 3), np.float32)
    for args in ((_mat((2, 5), np.float32),), (_mat((3, 2), np.float32), "left"),
                 (_mat((5,), np.float32),)):
        for e, j in zip(esl.qr_multiply(x, *args), S.qr_multiply(x, *args)):
            _close(e, j)
    for e, j in zip(jnp.linalg.qr(x, mode="raw"), jax.numpy.linalg.qr(x, mode="raw")):
        _close(e, j)
    t, z = S.schur(a)
    for e, j in zip(esl.rsf2csf(np.asarray(t), np.asarray(z)), S.rsf2csf(t, z)):
        _close(e, j, 1e-3)
    t, z = esl.schur(a, output="complex")
    assert t.dtype == np.complex64 and np.all(np.tril(np.asarray(t), -1) == 0)
    np.testing.assert_allclose(np.asarray(z @ t @ jnp.conj(z.T)), a, atol=1e-5)
    with pytest.raises(ValueError, match="output"):
        esl.schur(a, output="x")


SPECIAL = [("circulant", (np.array([1, 2, 3]),)), ("circulant", (np.ones((2, 3)),)),
           ("companion", (np.array([2., 2, 3]),)), ("companion", (np.array([1, 2, 3]),)),
           ("convolution_matrix", (np.array([1, 2, 3]), 4)),
           ("convolution_matrix", (np.array([1, 2, 3, 4]), 2, "same")),
           ("convolution_matrix", (np.array([1, 2]), 5, "valid")),
           ("fiedler", (np.array([1, 4, 6]),)),
           ("fiedler_companion", (np.array([2., 2, 3, 4, 5, 6, 7]),)),
           ("hankel", (np.array([1, 2, 3]),)), ("hankel", (np.array([1, 2]), np.array([3, 4, 5]))),
           ("leslie", (np.array([1., 2, 3]), np.array([.5, .6]))),
           ("hadamard", (8,)), ("hadamard", (4, np.float32)), ("helmert", (5,)),
           ("helmert", (4, True)), ("dft", (5,)), ("dft", (4, "n")), ("dft", (3, "sqrtn")),
           ("hilbert", (4,)), ("invhilbert", (5,)), ("pascal", (5,)), ("pascal", (4, "lower")),
           ("pascal", (4, "upper")), ("invpascal", (5,)), ("invpascal", (4, "upper"))]


@pytest.mark.parametrize("name,args", SPECIAL, ids=[f"{n}-{i}" for i, (n, _) in
                                                     enumerate(SPECIAL)])
def test_special_matrices_match_jax(jax, name, args):
    jargs = [jax.numpy.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    _close(getattr(esl, name)(*args), getattr(jax.scipy.linalg, name)(*jargs), 1e-5)


def test_special_matrix_errors():
    with pytest.raises(ValueError, match="power of 2"):
        esl.hadamard(3)
    with pytest.raises(ValueError, match="kind"):
        esl.pascal(3, "x")
    with pytest.raises(ValueError, match="scale"):
        esl.dft(3, "x")
    with pytest.raises(ValueError, match="lengths"):
        esl.leslie(np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="at least 2"):
        esl.companion(np.ones(1))
    with pytest.raises(TypeError):
        esl.circulant([1, 2, 3])
    np.testing.assert_allclose(np.asarray(esl.invhilbert(4)) @ np.asarray(esl.hilbert(4)),
                               np.eye(4), atol=2e-3)
