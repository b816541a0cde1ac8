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
