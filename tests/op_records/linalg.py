"""Records for jnp.linalg and lax.linalg (float32; inputs made well conditioned in ``fn``)."""

import numpy as np

import ember.numpy as jnp
from ember import lax
from tests.op_records.base import OpRecord

F32 = (np.dtype("float32"),)
SQ = (((3, 3),), ((2, 3, 3),))
RECT = (((4, 3),), ((2, 3, 4),))


def _spd(x, xp):
    # A symmetric positive definite matrix from any square x.
    n = x.shape[-1]
    return xp.matmul(x, xp.swapaxes(x, -1, -2)) + n * xp.eye(n, dtype=x.dtype)


def _wc(x, xp):
    # Diagonally dominant: well conditioned, no pivot ties.
    n = x.shape[-1]
    return x + 2 * n * xp.eye(n, dtype=x.dtype)


def _rec(name, fn, ref, shapes=SQ, tol=1e-4, differentiable=True, **kw):
    return OpRecord(f"linalg.{name}", fn, ref, F32, shapes, tol=tol,
                    differentiable=differentiable, **kw)


RECORDS = [
    _rec("cholesky", lambda x: jnp.linalg.cholesky(_spd(x, jnp)),
         lambda x: np.linalg.cholesky(_spd(x, np))),
    _rec("det", lambda x: jnp.linalg.det(_wc(x, jnp)), lambda x: np.linalg.det(_wc(x, np))),
    _rec("slogdet", lambda x: jnp.linalg.slogdet(_wc(x, jnp))[1],
         lambda x: np.linalg.slogdet(_wc(x, np))[1]),
    _rec("inv", lambda x: jnp.linalg.inv(_wc(x, jnp)), lambda x: np.linalg.inv(_wc(x, np))),
    _rec("solve", lambda x, b: jnp.linalg.solve(_wc(x, jnp), b),
         lambda x, b: np.linalg.solve(_wc(x, np), b), shapes=(((3, 3), (3, 2)),
                                                              ((2, 3, 3), (2, 3, 1)))),
    _rec("eigvalsh", lambda x: jnp.linalg.eigvalsh(_spd(x, jnp)),
         lambda x: np.linalg.eigvalsh(_spd(x, np))),
    _rec("svdvals", jnp.linalg.svdvals, lambda x: np.linalg.svd(x, compute_uv=False),
         shapes=RECT),
    _rec("qr_r_abs", lambda x: jnp.abs(jnp.linalg.qr(x, mode="r")),
         lambda x: np.abs(np.linalg.qr(x, mode="r")), shapes=(((4, 3),), ((2, 4, 3),))),
    _rec("pinv", jnp.linalg.pinv, np.linalg.pinv, shapes=RECT),
    _rec("norm_fro", lambda x: jnp.linalg.norm(x, axis=(-2, -1)),
         lambda x: np.linalg.norm(x, axis=(-2, -1)), shapes=RECT),
    _rec("norm_nuc", lambda x: jnp.linalg.norm(x, "nuc", axis=(-2, -1)),
         lambda x: np.linalg.norm(x, "nuc", axis=(-2, -1)), shapes=RECT),
    _rec("matrix_power", lambda x: jnp.linalg.matrix_power(x, 3),
         lambda x: np.linalg.matrix_power(x, 3)),
    _rec("lu_pivots_to_permutation",
         lambda p: lax.linalg.lu_pivots_to_permutation(p, 4),
         lambda p: _np_perm(p, 4), shapes=(((3,),), ((2, 3),)), differentiable=False,
         rng="index", arg_dtypes={0: np.dtype("int32")}),
    _rec("triangular_solve", lambda a, b: lax.linalg.triangular_solve(
        _wc(a, jnp), b, left_side=True, lower=True),
         lambda a, b: np.linalg.solve(np.tril(_wc(a, np)), b),
         shapes=(((3, 3), (3, 2)), ((2, 3, 3), (2, 3, 2)))),
]


def _np_perm(p, n):
    p = np.asarray(p)
    out = np.tile(np.arange(n, dtype=np.int32), p.shape[:-1] + (1,))
    flat, pf = out.reshape(-1, n), p.reshape(-1, p.shape[-1])
    for row, piv in zip(flat, pf):
        for i, j in enumerate(piv):
            row[i], row[j] = row[j], row[i]
    return out

import ember.scipy.linalg as jsl  # noqa: E402


def _tri_lower(x, xp):
    return xp.tril(x) + 2 * x.shape[-1] * xp.eye(x.shape[-1], dtype=x.dtype)


def _np_solve_tri(a, b, lower):
    return np.linalg.solve(np.tril(a) if lower else np.triu(a), b)


RECORDS += [
    _rec("vector_norm", lambda x: jnp.linalg.vector_norm(x, axis=-1),
         lambda x: np.linalg.norm(x, axis=-1), shapes=(((4,),), ((2, 3),))),
    _rec("matrix_norm_fro", lambda x: jnp.linalg.matrix_norm(x),
         lambda x: np.linalg.norm(x, axis=(-2, -1)), shapes=RECT),
    _rec("multi_dot", lambda a, b, c: jnp.linalg.multi_dot([a, b, c]),
         lambda a, b, c: np.linalg.multi_dot([a, b, c]), shapes=(((2, 3), (3, 4), (4, 2)),)),
    _rec("lstsq", lambda a, b: jnp.linalg.lstsq(_wc(a, jnp), b)[0],
         lambda a, b: np.linalg.lstsq(_wc(a, np), b, rcond=None)[0],
         shapes=(((3, 3), (3, 2)),)),
    _rec("matrix_rank", lambda x: jnp.linalg.matrix_rank(_wc(x, jnp)),
         lambda x: np.linalg.matrix_rank(_wc(x, np)), differentiable=False),
    _rec("tensorsolve", lambda a, b: jnp.linalg.tensorsolve(_wc(a, jnp).reshape(2, 3, 6), b),
         lambda a, b: np.linalg.tensorsolve(_wc(a, np).reshape(2, 3, 6), b),
         shapes=(((6, 6), (2, 3)),)),
    _rec("tensorinv", lambda a: jnp.linalg.tensorinv(_wc(a, jnp).reshape(6, 2, 3), ind=1),
         lambda a: np.linalg.tensorinv(_wc(a, np).reshape(6, 2, 3), ind=1),
         shapes=(((6, 6),),)),
    _rec("tridiagonal_solve",
         lambda d, b: lax.linalg.tridiagonal_solve(
             jnp.concatenate([jnp.zeros(1), jnp.full(2, 0.5)]), d + 3.0,
             jnp.concatenate([jnp.full(2, 0.25), jnp.zeros(1)]), b),
         lambda d, b: np.linalg.solve(np.diag(d + 3.0) + np.diag([0.5, 0.5], -1)
                                      + np.diag([0.25, 0.25], 1), b),
         shapes=(((3,), (3, 2)),), rng="positive"),
    _rec("scipy.solve_triangular", lambda a, b: jsl.solve_triangular(_tri_lower(a, jnp), b,
                                                                     lower=True),
         lambda a, b: _np_solve_tri(_tri_lower(a, np), b, True),
         shapes=(((3, 3), (3, 2)),)),
    _rec("scipy.cho_solve", lambda a, b: jsl.cho_solve(jsl.cho_factor(_spd(a, jnp)), b),
         lambda a, b: np.linalg.solve(_spd(a, np), b), shapes=(((3, 3), (3, 2)),)),
    _rec("scipy.lu_solve", lambda a, b: jsl.lu_solve(jsl.lu_factor(_wc(a, jnp)), b),
         lambda a, b: np.linalg.solve(_wc(a, np), b), shapes=(((3, 3), (3, 2)),)),
    _rec("scipy.block_diag", lambda a, b: jsl.block_diag(a, b),
         lambda a, b: np.block([[a, np.zeros((a.shape[0], b.shape[1]), a.dtype)],
                                [np.zeros((b.shape[0], a.shape[1]), a.dtype), b]]),
         shapes=(((2, 3), (3, 2)),)),
    _rec("scipy.toeplitz", lambda c, r: jsl.toeplitz(c, r),
         lambda c, r: np.array([[c[i - j] if i >= j else r[j - i] for j in range(len(r))]
                                for i in range(len(c))], dtype=c.dtype),
         shapes=(((3,), (4,)),)),
]


# --- scipy.linalg's structured-matrix builders and matrix functions. References are written
# from the definitions (loops, np.convolve, eigendecompositions, Taylor series in float64).

def np_circulant(c):
    n = c.shape[-1]
    return np.stack([np.roll(c, j, axis=-1) for j in range(n)], axis=-1)


def np_companion(a):
    a = np.asarray(a, np.result_type(a.dtype, np.float32))
    n = a.shape[-1] - 1
    out = np.zeros(a.shape[:-1] + (n, n), a.dtype)
    out[..., 0, :] = -a[..., 1:] / a[..., :1]
    out[..., np.arange(1, n), np.arange(n - 1)] = 1
    return out


def np_hankel(c, r=None):
    r = np.zeros_like(c) if r is None else r
    vals = np.concatenate([c, r[1:]])
    return np.array([[vals[i + j] for j in range(len(r))] for i in range(len(c))],
                    np.result_type(c, r))


def np_convolution_matrix(a, n, mode):
    # Column j is the convolution of a with the j-th unit vector.
    return np.stack([np.convolve(a, np.eye(n, dtype=a.dtype)[j], mode) for j in range(n)],
                    axis=1)


def np_leslie(f, s):
    n = f.shape[-1]
    out = np.zeros(f.shape[:-1] + (n, n), np.result_type(f, s))
    out[..., 0, :] = f
    out[..., np.arange(1, n), np.arange(n - 1)] = s
    return out


def np_fiedler(a):
    return np.abs(a[..., :, None] - a[..., None, :])


def np_fiedler_companion(a):
    # Fiedler (2003): with p(z) = z^n + c_1 z^(n-1) + ... + c_n (c_k = a[k] / a[0]),
    # M_k = I with the 2 x 2 block [[-c_k, 1], [1, 0]] at rows/columns k-1, k (k < n) and
    # M_n = diag(1, ..., 1, -c_n); the matrix is (M_1 M_3 M_5 ...) (M_2 M_4 ...).
    c = np.asarray(a, np.float64)[1:] / a[0]
    n = c.shape[0]

    def m(k):
        out = np.eye(n)
        if k < n:
            out[k - 1:k + 1, k - 1:k + 1] = [[-c[k - 1], 1], [1, 0]]
        else:
            out[n - 1, n - 1] = -c[n - 1]
        return out
    odd = np.linalg.multi_dot([np.eye(n)] * 2 + [m(k) for k in range(1, n + 1, 2)])
    even = np.linalg.multi_dot([np.eye(n)] * 2 + [m(k) for k in range(2, n + 1, 2)])
    return (odd @ even).astype(a.dtype)


def _over_batch(ref):
    # A reference of vectors applied to each vector of a batch.
    def batched(a, *rest):
        if a.ndim == 1:
            return ref(a, *rest)
        return np.stack([batched(x, *rest) for x in a])
    return batched


def np_matrix_function(a, f):
    # f(A) = V f(w) V^-1 in complex128 (the test matrices have distinct eigenvalues).
    w, v = np.linalg.eig(a.astype(np.complex128))
    return (v * f(w)[..., None, :]) @ np.linalg.inv(v)


def np_expm_frechet(a, e, terms=40):
    # Taylor series of expm([[A, E], [0, A]]) in float64; its upper-right block is L(A, E).
    n = a.shape[0]
    big = np.block([[a, e], [np.zeros_like(a), a]]).astype(np.float64)
    out, term = np.eye(2 * n), np.eye(2 * n)
    for k in range(1, terms):
        term = term @ big / k
        out = out + term
    return out[:n, :n].astype(a.dtype), out[:n, n:].astype(a.dtype)


def np_hessenberg_abs(a):
    # Householder reduction to upper Hessenberg form; |H| does not depend on the signs of
    # the reflectors (the form is unique up to a diagonal +-1 similarity).
    h = a.astype(np.float64)
    n = h.shape[0]
    for k in range(n - 2):
        x = h[k + 1:, k].copy()
        x[0] += np.copysign(np.linalg.norm(x), x[0])
        if np.linalg.norm(x) == 0:
            continue
        p = np.eye(n)
        p[k + 1:, k + 1:] -= 2 * np.outer(x, x) / (x @ x)
        h = p @ h @ p
    return np.abs(np.triu(h, -1)).astype(a.dtype)


def np_sylvester(a, b, c):
    m, n = c.shape
    k = np.kron(np.eye(n), a) + np.kron(b.T, np.eye(m))
    return np.linalg.solve(k, c.T.reshape(-1)).reshape(n, m).T.astype(c.dtype)


def np_polar(a):
    w, s, vh = np.linalg.svd(a, full_matrices=False)
    return w @ vh, (vh.T * s) @ vh


def _np_tridiagonal_eigvals(d, e):
    return np.linalg.eigvalsh(np.diag(d) + np.diag(e, 1) + np.diag(e, -1))


RECORDS += [
    _rec("scipy.circulant", jsl.circulant, np_circulant, shapes=(((3,),), ((2, 4),))),
    _rec("scipy.companion", jsl.companion, np_companion, shapes=(((3,),), ((2, 4),)),
         rng="nonzero"),
    _rec("scipy.hankel", jsl.hankel, np_hankel, shapes=(((3,), (4,)), ((4,), (2,)))),
    _rec("scipy.hankel_c_only", jsl.hankel, np_hankel, shapes=(((3,),),),
         differentiable=False),
    _rec("scipy.convolution_matrix",
         lambda a: tuple(jsl.convolution_matrix(a, 4, m) for m in ("full", "same", "valid")),
         lambda a: tuple(_over_batch(np_convolution_matrix)(a, 4, m)
                         for m in ("full", "same", "valid")),
         shapes=(((3,),), ((2, 5),))),
    _rec("scipy.leslie", jsl.leslie, np_leslie, shapes=(((3,), (2,)), ((2, 4), (2, 3)))),
    _rec("scipy.fiedler", jsl.fiedler, np_fiedler, shapes=(((4,),), ((2, 3),))),
    _rec("scipy.fiedler_companion", jsl.fiedler_companion, _over_batch(np_fiedler_companion),
         shapes=(((5,),), ((2, 6),)), rng="nonzero"),
    _rec("scipy.cholesky", lambda x: jsl.cholesky(_spd(x, jnp)),
         lambda x: np.swapaxes(np.linalg.cholesky(_spd(x, np)), -1, -2)),
    _rec("lax.symmetric_product",
         lambda a, c: lax.linalg.symmetric_product(a, c, alpha=1.5, beta=0.5),
         lambda a, c: 1.5 * a @ np.swapaxes(a, -1, -2) + 0.5 * c,
         shapes=(((3, 2), (3, 3)), ((2, 3, 4), (2, 3, 3)))),
    # JAX has no derivative of schur: sqrtm, funm, solve_sylvester and hessenberg have none.
    _rec("scipy.sqrtm", lambda x: jsl.sqrtm(_wc(x, jnp)),
         lambda x: np_matrix_function(_wc(x, np), np.sqrt), differentiable=False),
    _rec("scipy.funm_exp", lambda x: jsl.funm(0.3 * x, jnp.exp),
         lambda x: np_matrix_function(0.3 * x, np.exp), shapes=(((3, 3),),), tol=1e-3,
         differentiable=False),
    _rec("scipy.solve_sylvester", lambda a, b, c: jsl.solve_sylvester(_wc(a, jnp), _wc(b, jnp), c),
         lambda a, b, c: np_sylvester(_wc(a, np), _wc(b, np), c),
         shapes=(((3, 3), (2, 2), (3, 2)),), differentiable=False),
    _rec("scipy.hessenberg_abs", lambda x: jnp.abs(jsl.hessenberg(x)), np_hessenberg_abs,
         shapes=(((4, 4),),), differentiable=False),
    # polar by QDWH has only a forward-mode derivative in JAX (a while loop): checked in
    # tests/test_linalg2.py; the SVD method has both.
    _rec("scipy.polar_svd", lambda x: jsl.polar(x, method="svd"), np_polar,
         shapes=(((3, 3),), ((4, 3),))),
    _rec("scipy.polar_qdwh", jsl.polar, np_polar, shapes=(((3, 3),), ((4, 3),)),
         differentiable=False),
    _rec("scipy.expm_frechet", lambda a, e: jsl.expm_frechet(0.3 * a, e),
         lambda a, e: np_expm_frechet(0.3 * a, e), shapes=(((3, 3), (3, 3)),)),
    _rec("scipy.eigh_tridiagonal", lambda d, e: jsl.eigh_tridiagonal(d, e, eigvals_only=True),
         _np_tridiagonal_eigvals, shapes=(((4,), (3,)),)),
    _rec("scipy.qr_multiply", lambda a, c: jsl.qr_multiply(a, c)[0],
         lambda a, c: c @ np.linalg.qr(a)[0], shapes=(((4, 3), (2, 4)),),
         differentiable=False),
]
