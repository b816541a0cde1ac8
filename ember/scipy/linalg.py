"""ember.scipy.linalg: SciPy's linear algebra with JAX's semantics (``jax.scipy.linalg``).

Built on ``lax.linalg`` and ``jnp.linalg``; the ``overwrite_*`` and ``check_finite``
arguments are accepted and ignored, as in JAX.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

import ember.numpy as jnp
from ember import dtypes, lax
from ember.custom_derivatives import custom_jvp
from ember.lax import linalg as lax_linalg
from ember.numpy import linalg as jnp_linalg
from ember.numpy._util import check_arraylike, ensure_array, promote_dtypes_inexact


def _inexact(fn: str, *args: Any) -> list[Any]:
    check_arraylike(fn, *args)
    return promote_dtypes_inexact(*(ensure_array(a) for a in args))


def _H(x: Any) -> Any:
    return jnp.conj(jnp.swapaxes(x, -1, -2))


# ---------------------------------------------------------------- Cholesky


def cho_factor(a: Any, lower: bool = False, overwrite_a: bool = False,
               check_finite: bool = True) -> tuple[Any, bool]:
    """Cholesky factorization for ``cho_solve``: ``(c, lower)`` with ``c`` the lower (or
    upper) factor; the other triangle of ``c`` is zero.

    Example:
        >>> c, low = jsp.linalg.cho_factor(jnp.array([[4., 2.], [2., 5.]]))
        >>> c
        Array([[2., 1.],
               [0., 2.]], dtype=float32)
    """
    a, = _inexact("jax.scipy.linalg.cho_factor", a)
    jnp_linalg._square("cho_factor", a)
    c = lax_linalg.cholesky(a if lower else _H(a), symmetrize_input=False)
    return (c if lower else _H(c)), lower


def cho_solve(c_and_lower: tuple[Any, bool], b: Any, overwrite_b: bool = False,
              check_finite: bool = True) -> Any:
    """Solves ``a x = b`` given ``cho_factor(a)``.

    Example:
        >>> cf = jsp.linalg.cho_factor(jnp.array([[4., 2.], [2., 5.]]))
        >>> jsp.linalg.cho_solve(cf, jnp.array([6., 7.]))
        Array([1., 1.], dtype=float32)
    """
    c, lower = c_and_lower
    c, b = _inexact("jax.scipy.linalg.cho_solve", c, b)
    vector = np.ndim(b) == np.ndim(c) - 1
    if vector:
        b = b[..., None]
    if np.shape(b)[-2] != np.shape(c)[-1]:
        raise ValueError(f"cho_solve: b of shape {np.shape(b)} does not match c of shape "
                         f"{np.shape(c)}")
    # lower: L L^H x = b; upper: U^H U x = b.
    y = lax_linalg.triangular_solve(c, b, left_side=True, lower=lower,
                                    transpose_a=not lower, conjugate_a=not lower)
    x = lax_linalg.triangular_solve(c, y, left_side=True, lower=lower,
                                    transpose_a=lower, conjugate_a=lower)
    return x[..., 0] if vector else x


# ---------------------------------------------------------------- LU


def lu_factor(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Any, Any]:
    """LU factorization for ``lu_solve``: ``(lu, pivots)`` (LAPACK's int32 row swaps).

    Example:
        >>> lu, piv = jsp.linalg.lu_factor(jnp.array([[1., 2.], [3., 4.]]))
        >>> piv
        Array([1, 1], dtype=int32)
    """
    a, = _inexact("jax.scipy.linalg.lu_factor", a)
    lu_, pivots, _ = lax_linalg.lu(a)
    return lu_, pivots


def lu_solve(lu_and_piv: tuple[Any, Any], b: Any, trans: int = 0, overwrite_b: bool = False,
             check_finite: bool = True) -> Any:
    """Solves ``a x = b`` (``trans=0``), ``a^T x = b`` (1) or ``a^H x = b`` (2) given
    ``lu_factor(a)``.

    Example:
        >>> f = jsp.linalg.lu_factor(jnp.array([[2., 0.], [0., 4.]]))
        >>> jsp.linalg.lu_solve(f, jnp.array([2., 4.]))
        Array([1., 1.], dtype=float32)
    """
    lu_, pivots = lu_and_piv
    lu_, b = _inexact("jax.scipy.linalg.lu_solve", lu_, b)
    if trans not in (0, 1, 2):
        raise ValueError(f"'trans' value must be 0, 1, or 2, got {trans}")
    m = np.shape(lu_)[-1]
    vector = np.ndim(b) == 1
    if vector:
        b = b[:, None]
    if np.shape(b)[-2] != m:
        raise ValueError(f"lu_solve: b of shape {np.shape(b)} does not match lu of shape "
                         f"{np.shape(lu_)}")
    batch = np.broadcast_shapes(np.shape(lu_)[:-2], np.shape(b)[:-2])
    lu_ = jnp.broadcast_to(lu_, batch + (m, m))
    b = jnp.broadcast_to(b, batch + np.shape(b)[-2:])
    perm = lax_linalg.lu_pivots_to_permutation(
        jnp.broadcast_to(jnp.asarray(pivots, jnp.int32), batch + np.shape(pivots)[-1:]), m)
    p = (perm[..., :, None] == jnp.arange(m)).astype(b.dtype)  # P a = L U
    if trans == 0:
        y = lax_linalg.triangular_solve(lu_, p @ b, left_side=True, lower=True,
                                        unit_diagonal=True)
        x = lax_linalg.triangular_solve(lu_, y, left_side=True, lower=False)
    else:  # a^T = U^T L^T P: solve U^T, then L^T, then apply P^T
        conj = trans == 2
        y = lax_linalg.triangular_solve(lu_, b, left_side=True, lower=False,
                                        transpose_a=True, conjugate_a=conj)
        y = lax_linalg.triangular_solve(lu_, y, left_side=True, lower=True,
                                        transpose_a=True, conjugate_a=conj,
                                        unit_diagonal=True)
        x = jnp.swapaxes(p, -1, -2) @ y
    return x[..., 0] if vector else x


def lu(a: Any, permute_l: bool = False, overwrite_a: bool = False,
       check_finite: bool = True) -> tuple[Any, ...]:
    """LU decomposition ``a = p @ l @ u``: ``(p, l, u)``, or ``(p @ l, u)`` with
    ``permute_l``.

    Example:
        >>> p, l, u = jsp.linalg.lu(jnp.array([[1., 2.], [3., 4.]]))
        >>> u
        Array([[3.       , 4.       ],
               [0.       , 0.6666666]], dtype=float32)
    """
    a, = _inexact("jax.scipy.linalg.lu", a)
    lu_, _, perm = lax_linalg.lu(a)
    *_, m, n = np.shape(a)
    k = min(m, n)
    lower = jnp.tril(lu_, -1)[..., :, :k] + jnp.eye(m, k, dtype=a.dtype)
    upper = jnp.triu(lu_)[..., :k, :]
    p = jnp.swapaxes((perm[..., :, None] == jnp.arange(m)).astype(a.dtype), -1, -2)
    if permute_l:
        return p @ lower, upper
    return p, lower, upper


# ---------------------------------------------------------------- solves


def solve_triangular(a: Any, b: Any, trans: int | str = 0, lower: bool = False,
                     unit_diagonal: bool = False, overwrite_b: bool = False,
                     debug: Any = None, check_finite: bool = True) -> Any:
    """Solves ``op(a) x = b`` for triangular ``a``: ``trans`` 0/'N' (``a``), 1/'T'
    (``a^T``), 2/'C' (``a^H``); ``b`` a vector or matrix (with ``a``'s batch dims).

    Example:
        >>> a = jnp.array([[2., 0.], [1., 1.]])
        >>> jsp.linalg.solve_triangular(a, jnp.array([2., 3.]), lower=True)
        Array([1., 2.], dtype=float32)
    """
    a, b = _inexact("jax.scipy.linalg.solve_triangular", a, b)
    modes = {0: (False, False), "N": (False, False), 1: (True, False), "T": (True, False),
             2: (True, True), "C": (True, True)}
    if trans not in modes:
        raise ValueError(f"Invalid 'trans' value {trans!r}")
    transpose_a, conjugate_a = modes[trans]
    vector = np.ndim(b) == np.ndim(a) - 1
    if vector:
        b = b[..., None]
    out = lax_linalg.triangular_solve(a, b, left_side=True, lower=lower,
                                      transpose_a=transpose_a, conjugate_a=conjugate_a,
                                      unit_diagonal=unit_diagonal)
    return out[..., 0] if vector else out


def solve(a: Any, b: Any, lower: bool = False, overwrite_a: bool = False,
          overwrite_b: bool = False, debug: bool = False, check_finite: bool = True,
          assume_a: str = "gen") -> Any:
    """Solves ``a x = b``; ``assume_a="pos"`` uses a Cholesky factorization (of the
    ``lower`` or upper triangle), ``"gen"``/``"sym"``/``"her"`` an LU one.

    Example:
        >>> jsp.linalg.solve(jnp.array([[2., 0.], [0., 4.]]), jnp.array([2., 2.]))
        Array([1. , 0.5], dtype=float32)
    """
    if assume_a not in ("gen", "sym", "her", "pos"):
        raise ValueError(f"Expected assume_a to be one of {{'gen', 'sym', 'her', 'pos'}}, "
                         f"got {assume_a}.")
    a, b = _inexact("jax.scipy.linalg.solve", a, b)
    if assume_a != "pos":
        return jnp_linalg.solve(a, b)
    return cho_solve(cho_factor(a, lower=lower), b)


def inv(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """The inverse of square matrices (as ``jnp.linalg.inv``).

    Example:
        >>> jsp.linalg.inv(jnp.array([[2., 0.], [0., 4.]]))
        Array([[0.5 , 0.  ],
               [0.  , 0.25]], dtype=float32)
    """
    return jnp_linalg.inv(a)


def det(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """The determinant of square matrices (as ``jnp.linalg.det``).

    Example:
        >>> jsp.linalg.det(jnp.array([[1., 2.], [3., 4.]]))
        Array(-2., dtype=float32)
    """
    return jnp_linalg.det(a)


# ---------------------------------------------------------------- decompositions


def qr(a: Any, overwrite_a: bool = False, lwork: Any = None, mode: str = "full",
       pivoting: bool = False, check_finite: bool = True) -> tuple[Any, ...]:
    """QR decomposition: ``(q, r)`` for ``mode="full"`` (complete ``q``) or ``"economic"``
    (reduced); ``(r,)`` for ``mode="r"``.

    Example:
        >>> q, r = jsp.linalg.qr(jnp.array([[3., 0.], [4., 5.]]))
        >>> r
        Array([[-5., -4.],
               [ 0.,  3.]], dtype=float32)
    """
    a, = _inexact("jax.scipy.linalg.qr", a)
    if mode not in ("full", "r", "economic"):
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    if pivoting:
        raise NotImplementedError("jax.scipy.linalg.qr: pivoting=True is not supported")
    q, r = lax_linalg.qr(a, full_matrices=mode != "economic")
    return (r,) if mode == "r" else (q, r)


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True,
        overwrite_a: bool = False, check_finite: bool = True,
        lapack_driver: str = "gesdd") -> Any:
    """Singular value decomposition: ``(u, s, vh)``, or ``s`` (``compute_uv=False``).

    Example:
        >>> jsp.linalg.svd(jnp.array([[3., 0.], [0., 4.]]), compute_uv=False)
        Array([4., 3.], dtype=float32)
    """
    out = jnp_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return tuple(out) if compute_uv else out


def eigh(a: Any, b: Any = None, lower: bool = True, eigvals_only: bool = False,
         overwrite_a: bool = False, overwrite_b: bool = False, turbo: bool = True,
         eigvals: None = None, type: int = 1, check_finite: bool = True) -> Any:  # noqa: A002
    """Eigenvalues (ascending) and eigenvectors ``(w, v)`` of Hermitian matrices; ``w`` alone
    with ``eigvals_only``. As in JAX, the input is symmetrized first (``(a + a^H) / 2``), so
    ``lower`` does not change the result for any input. The generalized problem (``b``) is
    not supported, as in JAX.

    Example:
        >>> jsp.linalg.eigh(jnp.array([[2., 0.], [0., 1.]]), eigvals_only=True)
        Array([1., 2.], dtype=float32)
    """
    if b is not None:
        raise NotImplementedError("Only the b=None case of eigh is implemented")
    if type != 1:
        raise NotImplementedError("Only the type=1 case of eigh is implemented.")
    if eigvals is not None:
        raise NotImplementedError("Only the eigvals=None case of eigh is implemented.")
    a, = _inexact("jax.scipy.linalg.eigh", a)
    v, w = lax_linalg.eigh(a, lower=lower)
    return w if eigvals_only else (w, v)


# ---------------------------------------------------------------- expm

# Padé coefficients of degrees 3..13 (Higham, "The scaling and squaring method for the matrix
# exponential revisited", 2005) and the 1-norm bounds below which each degree is accurate.
_PADE = {
    3: (120., 60., 12., 1.),
    5: (30240., 15120., 3360., 420., 30., 1.),
    7: (17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.),
    9: (17643225600., 8821612800., 2075673600., 302702400., 30270240., 2162160., 110880.,
        3960., 90., 1.),
    13: (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
         129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
         40840800., 960960., 16380., 182., 1.),
}
_BOUNDS64 = ((1.495585217958292e-2, 2.539398330063230e-1, 9.504178996162932e-1,
              2.097847961257068e0), (3, 5, 7, 9, 13), 5.371920351148152)
_BOUNDS32 = ((4.258730016922831e-1, 1.880152677804762e0), (3, 5, 7), 3.925724783138660)


def _pade(m: int, A: Any) -> tuple[Any, Any]:
    """(U, V) of the degree-``m`` Padé approximant: exp(A) ≈ (V - U)^-1 (V + U)."""
    b = _PADE[m]
    eye = jnp.eye(A.shape[-1], dtype=A.dtype)
    A2 = A @ A
    if m == 13:
        A4 = A2 @ A2
        A6 = A4 @ A2
        U = A @ (A6 @ (b[13] * A6 + b[11] * A4 + b[9] * A2) + b[7] * A6 + b[5] * A4 +
                 b[3] * A2 + b[1] * eye)
        V = A6 @ (b[12] * A6 + b[10] * A4 + b[8] * A2) + b[6] * A6 + b[4] * A4 + \
            b[2] * A2 + b[0] * eye
        return U, V
    powers = [eye, A2]
    while len(powers) < (m + 1) // 2:
        powers.append(powers[-1] @ A2)
    U = A @ sum(b[2 * i + 1] * p for i, p in enumerate(powers))
    V = sum(b[2 * i] * p for i, p in enumerate(powers))
    return U, V


def expm(A: Any, *, upper_triangular: bool = False, max_squarings: int = 16) -> Any:
    """The matrix exponential by scaling and squaring with a Padé approximant chosen by the
    1-norm (JAX's choice of degrees; NaN when more than ``max_squarings`` are needed).

    Example:
        >>> jsp.linalg.expm(jnp.zeros((2, 2)))
        Array([[1., 0.],
               [0., 1.]], dtype=float32)
    """
    A, = _inexact("jax.scipy.linalg.expm", A)
    if np.ndim(A) < 2 or np.shape(A)[-1] != np.shape(A)[-2]:
        raise ValueError(f"Expected A to be a (batched) square matrix, got A.shape="
                         f"{np.shape(A)}.")
    if np.ndim(A) > 2:
        return jnp.vectorize(lambda x: expm(x, upper_triangular=upper_triangular,
                                            max_squarings=max_squarings),
                             signature="(n,n)->(n,n)")(A)
    return _expm(A, bool(upper_triangular), int(max_squarings))


def _expm_parts(A: Any, upper_triangular: bool) -> tuple[Any, Any]:
    """The Padé approximant of the scaled ``A`` and the number of squarings that undo the
    scaling."""
    double = A.dtype in (np.float64, np.complex128)
    conds, degrees, maxnorm = _BOUNDS64 if double else _BOUNDS32
    norm1 = jnp.max(jnp.sum(jnp.abs(A), axis=-2))
    n_sq = jnp.maximum(0, jnp.floor(jnp.log2(norm1 / maxnorm)))
    A = A / (2 ** n_sq).astype(A.dtype)
    idx = jnp.digitize(norm1, jnp.asarray(conds, norm1.dtype))
    U, V = lax.switch(idx, [lambda x, m=m: _pade(m, x) for m in degrees], A)
    P, Q = U + V, V - U
    R = solve_triangular(Q, P) if upper_triangular else jnp_linalg.solve(Q, P)
    return R, n_sq


def _expm_scan(A: Any, upper_triangular: bool, max_squarings: int) -> Any:
    """expm squaring in a scan of ``max_squarings`` conditional steps (JAX's formulation:
    differentiable in both modes)."""
    R, n_sq = _expm_parts(A, upper_triangular)

    def square(r, i):
        return lax.cond(i < n_sq, lambda x: x @ x, lambda x: x, r), None

    R, _ = lax.scan(square, R, jnp.arange(max_squarings, dtype=n_sq.dtype))
    return jnp.where(n_sq > max_squarings, jnp.full_like(R, np.nan), R)


@partial(custom_jvp, nondiff_argnums=(1, 2))
def _expm(A: Any, upper_triangular: bool, max_squarings: int) -> Any:
    # The same squarings as ``_expm_scan`` in a while loop that runs only the n_sq needed
    # (usually none or a few) instead of max_squarings conditionals; the derivatives are
    # ``_expm_scan``'s (a while loop has no transpose).
    R, n_sq = _expm_parts(A, upper_triangular)
    steps = jnp.minimum(n_sq, max_squarings).astype(np.int32)
    R, _ = lax.while_loop(lambda c: c[1] < steps, lambda c: (c[0] @ c[0], c[1] + 1),
                          (R, jnp.zeros((), np.int32)))
    return jnp.where(n_sq > max_squarings, jnp.full_like(R, np.nan), R)


@_expm.defjvp
def _expm_jvp(upper_triangular, max_squarings, primals, tangents):
    from ember import jvp
    return jvp(lambda a: _expm_scan(a, upper_triangular, max_squarings), primals, tangents)


# ---------------------------------------------------------------- constructions


def block_diag(*arrs: Any) -> Any:
    """A block-diagonal matrix of the given (at most 2-D) arrays.

    Example:
        >>> jsp.linalg.block_diag(jnp.ones((1, 2)), 2.)
        Array([[1., 1., 0.],
               [0., 0., 2.]], dtype=float32)
    """
    if not arrs:
        return jnp.zeros((1, 0))
    check_arraylike("jax.scipy.linalg.block_diag", *arrs)
    arrs = [jnp.atleast_2d(a) for a in arrs]
    for i, a in enumerate(arrs):
        if a.ndim != 2:
            raise ValueError(f"arguments in the following positions have dimension greater "
                             f"than 2: [{i}]")
    dt = dtypes.result_type(*arrs)
    rows = sum(a.shape[0] for a in arrs)
    cols = sum(a.shape[1] for a in arrs)
    out = jnp.zeros((rows, cols), dt)
    r = c = 0
    for a in arrs:
        out = out.at[r:r + a.shape[0], c:c + a.shape[1]].set(a.astype(dt))
        r, c = r + a.shape[0], c + a.shape[1]
    return out


def toeplitz(c: Any, r: Any = None) -> Any:
    """The Toeplitz matrix with first column ``c`` and first row ``r`` (default
    ``conj(c)``); ``r[0]`` is ignored. Leading dimensions are batch dimensions.

    Example:
        >>> jsp.linalg.toeplitz(jnp.array([1, 2, 3]), jnp.array([1, 4, 5]))
        Array([[1, 4, 5],
               [2, 1, 4],
               [3, 2, 1]], dtype=int32)
    """
    if r is None:
        check_arraylike("jax.scipy.linalg.toeplitz", c)
        r = jnp.conj(c)
    else:
        check_arraylike("jax.scipy.linalg.toeplitz", c, r)
    c, r = jnp.atleast_1d(c), jnp.atleast_1d(r)
    dt = dtypes.result_type(c, r)
    c, r = c.astype(dt), r.astype(dt)
    batch = np.broadcast_shapes(c.shape[:-1], r.shape[:-1])
    nc, nr = c.shape[-1], r.shape[-1]
    vals = jnp.concatenate([jnp.broadcast_to(jnp.flip(c, -1), batch + (nc,)),
                            jnp.broadcast_to(r[..., 1:], batch + (nr - 1,))], axis=-1)
    idx = (nc - 1) - np.arange(nc)[:, None] + np.arange(nr)[None, :]
    return vals[..., idx]


# Decompositions, matrix functions and special matrices live in their own modules.
from ember.scipy._linalg_decomp import *  # noqa: E402, F403
from ember.scipy._linalg_decomp import __all__ as _decomp_all  # noqa: E402
from ember.scipy._linalg_special import (  # noqa: E402
    circulant,
    companion,
    convolution_matrix,
    dft,
    fiedler,
    fiedler_companion,
    hadamard,
    hankel,
    helmert,
    hilbert,
    invhilbert,
    invpascal,
    leslie,
    pascal,
)

__all__ = ["block_diag", "cho_factor", "cho_solve", "det", "eigh", "expm", "inv", "lu",
           "lu_factor", "lu_solve", "qr", "solve", "solve_triangular", "svd", "toeplitz",
           "circulant", "companion", "convolution_matrix", "dft", "fiedler",
           "fiedler_companion", "hadamard", "hankel", "helmert", "hilbert", "invhilbert",
           "invpascal", "leslie", "pascal", *_decomp_all]
