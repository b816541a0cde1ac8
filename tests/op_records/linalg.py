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
