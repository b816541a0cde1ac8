"""lax.linalg's LAPACK-style reductions (Hessenberg, tridiagonal, Schur, Householder products)
and the rest of scipy.linalg.

Results that follow a convention (Householder vectors and scalars, QDWH's iteration count)
are compared with JAX, each dtype's JAX calls in one ``jax.jit`` (eager JAX compiles every
call separately, which dominated this file's time). Unique results (Cholesky factors, matrix
functions, polar factors, Sylvester solutions, special matrices) are compared with NumPy
references from ``tests/op_records/linalg.py`` and with invariants; the op-record table runs
those functions under jit, vmap and check_grads too.
"""

import math

import numpy as np
import pytest

import ember
import ember.numpy as jnp
import ember.scipy.linalg as esl
from ember.lax import linalg as el
from ember.test_util import check_grads
from tests.op_records import linalg as refs

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


def _reductions(lib, geqrf, a, r, c_left, c_right):
    h, t = geqrf(r)
    return (lib.hessenberg(a), lib.tridiagonal(a, lower=True), lib.tridiagonal(a, lower=False),
            (h, t), lib.householder_product(h, t),
            [lib.ormqr(h, t, c, left=left, transpose=tr)
             for left, c in ((True, c_left), (False, c_right)) for tr in (False, True)])


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_reductions_match_jax(jax, dtype):
    from jax._src.lax.linalg import geqrf as jgeqrf
    args = (_mat((2, 5, 5), dtype), _mat((2, 5, 3), dtype), _mat((2, 5, 4), dtype),
            _mat((2, 4, 5), dtype))
    want = jax.jit(lambda *xs: _reductions(jax.lax.linalg, jgeqrf, *xs))(*args)
    got = _reductions(el, el.geqrf, *args)
    for e, j in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        _close(e, j)
    for e, j in zip(ember.jit(el.hessenberg)(args[0]), want[0]):
        _close(e, j)


def _check_schur(a, t, q, tol):
    n = a.shape[-1]
    t, q = np.asarray(t), np.asarray(q)
    assert t.dtype == a.dtype
    np.testing.assert_allclose(q @ t @ q.conj().T, a, atol=tol * n)
    np.testing.assert_allclose(q.conj().T @ q, np.eye(n), atol=tol * n)
    assert np.all(np.tril(t, -2) == 0)
    if a.dtype.kind == "c":
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


@pytest.mark.parametrize("dtype,n", [(np.float64, 1), (np.float64, 2), (np.float64, 12),
                                     (np.complex128, 2), (np.complex128, 12), (np.float32, 6)])
def test_schur_invariants(x64, dtype, n):
    a = _mat((n, n), dtype)
    _check_schur(a, *el.schur(a), 1e-4 if dtype == np.float32 else 1e-10)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.float32])
@pytest.mark.parametrize("n", [6, 30, 60])
def test_schur_invariants_large(x64, dtype, n):
    a = _mat((n, n), dtype)
    _check_schur(a, *el.schur(a), 1e-4 if dtype == np.float32 else 1e-10)


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


def test_small_lax_functions(jax):
    jl = jax.lax.linalg
    a, c = _mat((4, 3), np.float32), _mat((4, 4), np.float32)
    c = c + c.T
    _close(el.symmetric_product(a, c, alpha=2., beta=.5, symmetrize_output=True),
           (2 * a @ a.T + .5 * c).astype(np.float32))
    spd = c @ c.T + np.eye(4, dtype=np.float32)
    w = _mat((4,), np.float32)
    r = el.cholesky_update(np.linalg.cholesky(spd).T, w)
    _close(r, np.linalg.cholesky(spd + np.outer(w, w)).T.astype(np.float32), 1e-3)
    # QDWH: the iteration count follows JAX's; the factors are the unique polar factors.
    x = _mat((5, 3), np.float32)
    u, h, iters, ok = el.qdwh(x)
    ju, jh, jiters, _ = jax.jit(jl.qdwh)(x)
    assert bool(ok) and int(iters) == int(jiters)
    _close(u, ju, 1e-4)
    _close(h, jh, 1e-4)
    xc = _mat((5, 3), np.complex64)
    u, h, _, ok = el.qdwh(xc)
    wu, s, vh = np.linalg.svd(xc, full_matrices=False)
    assert bool(ok)
    _close(u, (wu @ vh).astype(np.complex64), 1e-4)
    _close(h, ((vh.conj().T * s) @ vh).astype(np.complex64), 1e-4)
    assert [m.value for m in el.SvdAlgorithm] == [m.value for m in jl.SvdAlgorithm]
    assert [m.value for m in el.EighImplementation] == [m.value for m in jl.EighImplementation]
    assert [m.value for m in el.EigImplementation] == [m.value for m in jl.EigImplementation]
    with pytest.raises(ValueError, match="M >= N"):
        el.qdwh(np.ones((2, 3), np.float32))


def test_scipy_decompositions():
    a = _mat((4, 4), np.float32)
    spd = a @ a.T + 4 * np.eye(4, dtype=np.float32)
    _close(esl.cholesky(spd), np.linalg.cholesky(spd).T)
    _close(esl.cholesky(spd, lower=True), np.linalg.cholesky(spd))
    h, q = (np.asarray(v) for v in esl.hessenberg(a, calc_q=True))
    assert np.all(np.tril(h, -2) == 0)
    np.testing.assert_allclose(q @ h @ q.T, a, atol=1e-5)
    np.testing.assert_allclose(q.T @ q, np.eye(4), atol=1e-5)
    np.testing.assert_allclose(q[:, 0], np.eye(4)[:, 0], atol=1e-6)  # Q = I (+) Householders
    _close(np.abs(h), refs.np_hessenberg_abs(a), 1e-4)
    _close(esl.hessenberg(a), h)
    _close(esl.sqrtm(spd), refs.np_matrix_function(spd, np.sqrt).astype(np.complex64), 1e-3)
    # (A general matrix may have an eigenvalue on the negative real axis, where the principal
    # root's sign turns on rounding: check the defining property there.)
    root = np.asarray(esl.sqrtm(a))
    np.testing.assert_allclose(root @ root, a, atol=1e-4)
    f, err = esl.funm(a, jnp.exp, disp=False)
    _close(f, refs.np_matrix_function(a, np.exp).astype(np.complex64), 1e-3)
    assert 0 <= float(err) < 1e-4
    # polar: both methods give the unique factors of a full-rank matrix
    u_ref, p_ref = (x.astype(np.float32) for x in refs.np_polar(a))
    for kw in ({}, {"method": "svd"}):
        u, p = esl.polar(a, **kw)
        _close(u, u_ref, 1e-3)
        _close(p, p_ref, 1e-3)
    u, p = esl.polar(a, side="left", method="svd")
    _close(u, u_ref, 1e-3)
    _close(p, (u_ref @ p_ref @ u_ref.T).astype(np.float32), 1e-3)
    b, cc = _mat((3, 3), np.float32), _mat((4, 3), np.float32)
    _close(esl.solve_sylvester(a, b, cc), refs.np_sylvester(a, b, cc), 1e-3)
    e_dir = _mat((4, 4), np.float32)
    for e, j in zip(esl.expm_frechet(0.3 * a, e_dir), refs.np_expm_frechet(0.3 * a, e_dir)):
        _close(e, j, 1e-4)
    _close(esl.expm_frechet(0.3 * a, e_dir, compute_expm=False),
           refs.np_expm_frechet(0.3 * a, e_dir)[1], 1e-4)
    d, off = _mat((5,), np.float32), _mat((4,), np.float32)
    dense = np.diag(d) + np.diag(off, 1) + np.diag(off, -1)
    _close(esl.eigh_tridiagonal(d, off, eigvals_only=True), np.linalg.eigvalsh(dense))
    _close(esl.eigh_tridiagonal(d, off, eigvals_only=True, select="i", select_range=(1, 3)),
           np.linalg.eigvalsh(dense)[1:4])
    w, v = esl.eigh_tridiagonal(d, off)
    np.testing.assert_allclose(dense @ np.asarray(v), np.asarray(v) * np.asarray(w), atol=1e-4)


def test_batches_and_edge_cases():
    """Leading batch dimensions (as JAX 0.10's polar, expm_frechet, hankel,
    convolution_matrix and fiedler_companion take), degenerate sizes, JAX's error classes."""
    x = _mat((2, 3, 5), np.float32)
    for side, method in (("left", "qdwh"), ("left", "svd"), ("right", "svd")):
        u, p = esl.polar(x, side=side, method=method)
        for k in range(2):
            w, sv, vh = np.linalg.svd(x[k], full_matrices=False)
            p_want = (w * sv) @ w.T if side == "left" else (vh.T * sv) @ vh
            _close(u[k], (w @ vh).astype(np.float32), 1e-4)
            _close(p[k], p_want.astype(np.float32), 1e-4)
    with pytest.raises(NotImplementedError, match="qdwh"):
        esl.polar(x)  # wide, side="right"
    with pytest.raises(NotImplementedError, match="qdwh"):
        esl.polar(x[..., :3], side="left")  # square, side="left"
    with pytest.raises(ValueError, match="2-D"):
        esl.polar(np.ones(3, np.float32))
    a, e = 0.3 * _mat((2, 3, 3), np.float32), _mat((2, 3, 3), np.float32)
    ex, lx = esl.expm_frechet(a, e)
    for k in range(2):
        for got, want in zip((ex[k], lx[k]), refs.np_expm_frechet(a[k], e[k])):
            _close(got, want, 1e-4)
    c, r = _mat((2, 1, 3), np.float32), _mat((4, 2), np.float32)
    h = np.asarray(esl.hankel(c, r))
    assert h.shape == (2, 4, 3, 2)
    for i in range(2):
        for j in range(4):
            _close(h[i, j], refs.np_hankel(c[i, 0], r[j]))
    v = _mat((2, 4), np.float32)
    cm, fc = esl.convolution_matrix(v, 3, "same"), esl.fiedler_companion(v)
    for k in range(2):
        _close(cm[k], refs.np_convolution_matrix(v[k], 3, "same"))
        _close(fc[k], refs.np_fiedler_companion(v[k]), 1e-5)
    for n in range(2, 10):  # both parities of Fiedler's pattern
        coef = _mat((n,), np.float32)
        _close(esl.fiedler_companion(coef), refs.np_fiedler_companion(coef), 1e-5)
    assert esl.fiedler_companion(np.ones(1, np.float32)).shape == (0, 0)
    for fn, args, match in ((esl.fiedler_companion, (np.ones(0),), "nonzero length"),
                            (esl.hankel, (np.float32(1),), "scalar"),
                            (esl.convolution_matrix, (np.float32(1), 2), "scalar"),
                            (esl.convolution_matrix, (np.ones(0), 2), "at least 1"),
                            (esl.convolution_matrix, (np.ones(2), 2, "x"), "mode"),
                            (esl.leslie, (np.ones(1), np.ones(0)), "at least 2")):
        with pytest.raises(ValueError, match=match):
            fn(*args)
    # degenerate matrices: the zero matrix's square root, a 1 x 1 Hessenberg reduction
    _close(esl.sqrtm(np.zeros((3, 3), np.float32)), np.zeros((3, 3), np.complex64))
    one = np.full((1, 1), 3., np.float32)
    for got, want in zip(esl.hessenberg(one, calc_q=True), (one, np.eye(1, dtype=np.float32))):
        _close(got, want)
    _close(el.ormqr(np.zeros((3, 0), np.float32), np.zeros(0, np.float32), x[0, :, :2]),
           x[0, :, :2])  # no reflectors: Q = I


def test_qr_multiply_and_raw_qr():
    x = _mat((5, 3), np.float32)
    q, r = np.linalg.qr(x)  # LAPACK's Householder signs, as JAX's
    c = _mat((2, 5), np.float32)
    for e, j in zip(esl.qr_multiply(x, c), (c @ q, r)):
        _close(e, j)
    c = _mat((3, 2), np.float32)
    for e, j in zip(esl.qr_multiply(x, c, "left"), (q @ c, r)):
        _close(e, j)
    c = _mat((5,), np.float32)
    for e, j in zip(esl.qr_multiply(x, c, conjugate=True), (c @ q, r)):
        _close(e, j)
    for e, j in zip(jnp.linalg.qr(x, mode="raw"), np.linalg.qr(x, mode="raw")):
        _close(e, j)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 6, 3), (3, 0), (0, 3)])
def test_qr_under_jit_matches_numpy(shape, dtype):
    # Under jit, qr is geqrf + householder_product (+ R's triangle); a program that uses R
    # alone has no Householder product call.
    x = _mat(shape, dtype)
    for mode in ("reduced", "complete", "r"):
        want = np.linalg.qr(x, mode=mode)
        got = ember.jit(lambda a, mode=mode: jnp.linalg.qr(a, mode=mode))(x)
        want, got = (want, got) if mode != "r" else ((want,), (got,))
        for g, w in zip(got, want):
            assert g.shape == w.shape
            _close(g, w)
    text = ember.jit(lambda a: jnp.linalg.qr(a)[1]).lower(x).compile().as_text()
    both = ember.jit(jnp.linalg.qr).lower(x).compile().as_text()
    assert "ember.linalg.geqrf" in text and "householder_product" not in text
    if min(shape):
        assert "householder_product" in both


def test_small_batched_qr_stays_one_call():
    x = _mat((32, 4, 3), np.float32)
    text = ember.jit(lambda a: jnp.linalg.qr(a)[1]).lower(x).compile().as_text()
    assert "ember.linalg.qr" in text and "geqrf" not in text
    for g, w in zip(ember.jit(jnp.linalg.qr)(x), np.linalg.qr(x)):
        _close(g, w)


def test_householder_product_without_reflectors_is_identity_columns():
    for shape in ((3, 2), (2, 4, 4)):
        got = el.householder_product(jnp.ones(shape), jnp.zeros(shape[:-2] + (0,)))
        np.testing.assert_array_equal(got, np.broadcast_to(np.eye(*shape[-2:]), shape))


def test_schur_forms():
    a = _mat((4, 4), np.float32)
    t, z = esl.schur(a)
    assert np.any(np.diagonal(np.asarray(t), -1) != 0)  # a 2 x 2 block to triangularize
    tc, zc = esl.rsf2csf(t, z)
    assert tc.dtype == np.complex64 and np.all(np.abs(np.tril(np.asarray(tc), -1)) < 1e-5)
    np.testing.assert_allclose(np.asarray(zc @ tc @ jnp.conj(zc.T)), a, atol=1e-4)
    np.testing.assert_allclose(np.asarray(jnp.conj(zc.T) @ zc), np.eye(4), atol=1e-5)
    t, z = esl.schur(a, output="complex")
    assert t.dtype == np.complex64 and np.all(np.tril(np.asarray(t), -1) == 0)
    np.testing.assert_allclose(np.asarray(z @ t @ jnp.conj(z.T)), a, atol=1e-5)
    with pytest.raises(ValueError, match="output"):
        esl.schur(a, output="x")


def test_matrix_function_derivatives():
    """As in JAX: polar by QDWH has forward-mode derivatives only (a while loop), by the SVD
    both modes; expm_frechet both; sqrtm, funm and solve_sylvester none (schur has no rule)."""
    a = np.array([[2., .3, .1], [.2, 3., .4], [.1, .5, 4.]], np.float32)
    tol = {"atol": 2e-2, "rtol": 2e-2, "eps": 1e-3}
    check_grads(lambda x: esl.polar(x), (a,), order=1, modes=["fwd"], **tol)
    check_grads(lambda x: esl.polar(x, side="left", method="svd"), (a,), order=1, **tol)
    check_grads(lambda x, e: esl.expm_frechet(0.3 * x, e), (a, a.T), order=1, **tol)
    with pytest.raises(ValueError, match="while_loop"):
        ember.grad(lambda x: esl.polar(x)[1].sum())(a)
    for f in (lambda x: jnp.real(esl.sqrtm(x)).sum(),
              lambda x: jnp.real(esl.funm(x, jnp.exp)).sum(),
              lambda x: esl.solve_sylvester(x, x, x).sum()):
        with pytest.raises(NotImplementedError, match="schur"):
            ember.grad(f)(a)


# (name, args, NumPy reference) for the builders; the reference's dtype is JAX's (x64 off).
def _np_hadamard(n, dtype=np.int32):
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.kron([[1, 1], [1, -1]], h)
    return h.astype(dtype)


def _np_helmert(n, full=False):
    h = np.zeros((n, n))
    h[0] = 1 / np.sqrt(n)
    for k in range(1, n):
        h[k, :k] = 1 / np.sqrt(k * (k + 1))
        h[k, k] = -k / np.sqrt(k * (k + 1))
    return (h if full else h[1:]).astype(np.float32)


def _np_dft(n, scale=None):
    m = np.exp(-2j * np.pi * np.outer(np.arange(n), np.arange(n)) / n)
    return (m / {None: 1, "n": n, "sqrtn": np.sqrt(n)}[scale]).astype(np.complex64)


def _np_hilbert(n):
    return np.array([[1 / (i + j + 1) for j in range(n)] for i in range(n)])


def _np_pascal(n, kind="symmetric"):
    f = {"symmetric": lambda i, j: math.comb(i + j, i), "lower": math.comb,
         "upper": lambda i, j: math.comb(j, i)}[kind]
    return np.array([[f(i, j) for j in range(n)] for i in range(n)], np.float64)


def _f32(x):
    return np.asarray(x).astype(np.float32)


SPECIAL = [
    ("circulant", (np.array([1, 2, 3]),), lambda c: refs.np_circulant(c).astype(np.int32)),
    ("circulant", (np.ones((2, 3), np.float32),), refs.np_circulant),
    ("companion", (np.array([2., 2, 3], np.float32),), refs.np_companion),
    ("companion", (np.array([1, 2, 3]),), lambda a: _f32(refs.np_companion(a))),
    ("convolution_matrix", (np.array([1, 2, 3]), 4),
     lambda a, n: refs.np_convolution_matrix(a, n, "full").astype(np.int32)),
    ("convolution_matrix", (np.array([1, 2, 3, 4]), 2, "same"),
     lambda a, n, m: refs.np_convolution_matrix(a, n, m).astype(np.int32)),
    ("convolution_matrix", (np.array([1., 2.], np.float32), 5, "valid"),
     refs.np_convolution_matrix),
    ("fiedler", (np.array([1, 4, 6]),), lambda a: refs.np_fiedler(a).astype(np.int32)),
    ("fiedler_companion", (np.array([2., 2, 3, 4, 5, 6, 7], np.float32),),
     refs.np_fiedler_companion),
    ("fiedler_companion", (np.array([1, 2, 3]),), lambda a: _f32(refs.np_fiedler_companion(a))),
    ("hankel", (np.array([1, 2, 3]),), lambda c: refs.np_hankel(c).astype(np.int32)),
    ("hankel", (np.array([1, 2]), np.array([3., 4, 5], np.float32)),
     lambda c, r: _f32(refs.np_hankel(c, r))),
    ("leslie", (np.array([1., 2, 3], np.float32), np.array([.5, .6], np.float32)),
     refs.np_leslie),
    ("hadamard", (8,), _np_hadamard), ("hadamard", (4, np.float32), _np_hadamard),
    ("helmert", (5,), _np_helmert), ("helmert", (4, True), _np_helmert),
    ("dft", (5,), _np_dft), ("dft", (4, "n"), _np_dft), ("dft", (3, "sqrtn"), _np_dft),
    ("hilbert", (4,), lambda n: _f32(_np_hilbert(n))),
    ("invhilbert", (5,), lambda n: _f32(np.round(np.linalg.inv(_np_hilbert(n))))),
    ("pascal", (5,), lambda n: _f32(_np_pascal(n))),
    ("pascal", (4, "lower"), lambda n, k: _f32(_np_pascal(n, k))),
    ("pascal", (4, "upper"), lambda n, k: _f32(_np_pascal(n, k))),
    ("invpascal", (5,), lambda n: _f32(np.round(np.linalg.inv(_np_pascal(n))))),
    ("invpascal", (4, "upper"), lambda n, k: _f32(np.round(np.linalg.inv(_np_pascal(n, k))))),
]


@pytest.mark.parametrize("name,args,ref", SPECIAL,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(SPECIAL)])
def test_special_matrices(name, args, ref):
    _close(getattr(esl, name)(*args), ref(*args), 1e-5)


def test_special_matrices_under_jit_match_jax(jax):
    """The builders' dtypes and values against JAX in one jit (weak int inputs included)."""
    vec = np.array([2., 1, 3, 4, 5], np.float32)
    names = ("circulant", "companion", "fiedler", "fiedler_companion", "hankel")

    def build(lib, v):
        return [getattr(lib, n)(v) for n in names] + [lib.leslie(v, v[1:]),
                                                      lib.convolution_matrix(v, 3, "same")]
    want = jax.jit(lambda v: build(jax.scipy.linalg, v))(vec)
    for e, j in zip(ember.jit(lambda v: build(esl, v))(vec), want):
        _close(e, j, 1e-5)


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
