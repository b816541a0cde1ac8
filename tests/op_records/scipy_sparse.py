"""Records for ember.scipy.sparse.linalg (references: np.linalg.solve; the matrices are made
well conditioned in ``fn``: symmetric positive definite for ``cg``, diagonally dominant for
the others)."""

import numpy as np

import ember.numpy as jnp
import ember.scipy.sparse.linalg as ssl
from tests.op_records.base import OpRecord

F32 = (np.dtype("float32"),)
SHAPES = (((4, 4), (4,)),)


def _spd(a, xp):
    return xp.matmul(a, a.T) + 4 * xp.eye(4, dtype=a.dtype)


def _wc(a, xp):
    return a + 8 * xp.eye(4, dtype=a.dtype)


def _tol(b):
    # Tight enough that the float64 derivative checks see the exact solve.
    return 1e-6 if b.dtype == jnp.float32 else 1e-13


def _rec(name, solver, make, **kw):
    return OpRecord(f"scipy.sparse.linalg.{name}",
                    lambda a, b: solver(make(a, jnp), b, tol=_tol(b), **kw)[0],
                    lambda a, b: np.linalg.solve(make(a.astype(np.float64), np),
                                                 b).astype(np.float32),
                    F32, SHAPES, differentiable=True, tol=1e-4)


# (gmres's 'incremental' method is left to tests/test_scipy_sparse_linalg.py: its eager
# result changes in the last bit once ember compiles the loop, which test_op_records' exact
# traced-versus-eager comparison does not allow.)
RECORDS = [
    _rec("cg", ssl.cg, _spd),
    _rec("bicgstab", ssl.bicgstab, _wc),
    _rec("gmres", ssl.gmres, _wc),
]
