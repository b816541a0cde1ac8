"""Decompositions and matrix functions of ``jax.scipy.linalg`` (re-exported by
``ember.scipy.linalg``): cholesky, hessenberg, schur, rsf2csf, sqrtm, funm, polar,
solve_sylvester, expm_frechet, eigh_tridiagonal, qr_multiply.

The matrix functions work on the complex Schur form ``A = Z T Z^H``: ``T``'s function is
filled one superdiagonal at a time (Parlett's recurrence; Björck & Hammarling's for the
square root), each superdiagonal one matrix product, so everything stays traceable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import ember.numpy as jnp
from ember import lax
from ember.lax import linalg as lax_linalg
from ember.numpy._util import check_arraylike, ensure_array, promote_dtypes_inexact


def _inexact(fn: str, *args: Any) -> list[Any]:
    check_arraylike(fn, *args)
    return promote_dtypes_inexact(*(ensure_array(a) for a in args))


def _square(fn: str, a: Any, name: str = "a") -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{fn}: {name} must be a (batch of) square matrices, got shape "
                         f"{a.shape}")


def _H(x: Any) -> Any:
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def _complex(x: Any) -> Any:
    return x if jnp.iscomplexobj(x) else x.astype(jnp.result_type(x.dtype, 1j))


def cholesky(a: Any, lower: bool = False, overwrite_a: bool = False,
             check_finite: bool = True) -> Any:
    """The Cholesky factor of Hermitian positive definite matrices: upper ``U`` with
    ``a = U^H U`` by default, lower ``L`` (``a = L L^H``) when ``lower``; only that triangle
    of ``a`` is read.

    Example:
        >>> jsp.linalg.cholesky(jnp.array([[4., 2.], [2., 5.]]))
        Array([[2., 1.],
               [0., 2.]], dtype=float32)
    """
    a, = _inexact("jax.scipy.linalg.cholesky", a)
    _square("cholesky", a)
    c = lax_linalg.cholesky(a if lower else _H(a), symmetrize_input=False)
    return c if lower else _H(c)


def hessenberg(a: Any, *, calc_q: bool = False, overwrite_a: bool = False,
               check_finite: bool = True) -> Any:
    """The upper Hessenberg form ``h = q^H a q``: ``h``, or ``(h, q)`` with ``calc_q``.

    Example:
        >>> h = jsp.linalg.hessenberg(jnp.array([[1., 2., 3.], [4., 5., 6.], [7., 8., 0.]]))
        >>> bool(h[2, 0] == 0)
        True
    """
    a, = _inexact("jax.scipy.linalg.hessenberg", a)
    _square("hessenberg", a)
    a_out, taus = lax_linalg.hessenberg(a)
    h = jnp.triu(a_out, -1)
    if not calc_q:
        return h
    n = a.shape[-1]
    q = jnp.broadcast_to(jnp.eye(n, dtype=a.dtype), a.shape)
    if n > 1:
        q = q.at[..., 1:, 1:].set(lax_linalg.householder_product(a_out[..., 1:, :-1], taus))
    return h, q


def schur(a: Any, output: str = "real") -> tuple[Any, Any]:
    """Schur decomposition ``a = z t z^H``: ``(t, z)``; ``output="complex"`` gives a
    triangular ``t`` for real ``a`` too (else quasi triangular with 2 x 2 blocks).

    Example:
        >>> t, z = jsp.linalg.schur(jnp.array([[1., 2.], [0., 3.]]))
        >>> jnp.diag(t)
        Array([1., 3.], dtype=float32)
    """
    if output not in ("real", "complex"):
        raise ValueError(f"Expected 'output' to be either 'real' or 'complex', got "
                         f"output={output}.")
    a, = _inexact("jax.scipy.linalg.schur", a)
    _square("schur", a)
    if output == "complex":
        a = _complex(a)
    return lax_linalg.schur(a)


def rsf2csf(T: Any, Z: Any, check_finite: bool = True) -> tuple[Any, Any]:
    """Converts a real Schur form ``(T, Z)`` to the complex one (Givens rotations that
    triangularize each 2 x 2 block).

    Example:
        >>> t, z = jsp.linalg.rsf2csf(jnp.array([[0., 1.], [-1., 0.]]), jnp.eye(2))
        >>> jnp.round(jnp.imag(jnp.diag(t)), 4)
        Array([ 1., -1.], dtype=float32)
    """
    T, Z = _inexact("jax.scipy.linalg.rsf2csf", T, Z)
    if T.ndim != 2 or Z.ndim != 2 or T.shape[0] != T.shape[1] or Z.shape != T.shape:
        raise ValueError(f"rsf2csf: T and Z must be square matrices of the same shape, got "
                         f"{T.shape} and {Z.shape}")
    T, Z = _complex(T), _complex(Z)
    n = T.shape[0]
    eps = jnp.finfo(T.dtype).eps
    for m in range(n - 1, 0, -1):
        blk = T[m - 1:m + 1, m - 1:m + 1]
        sub = T[m, m - 1]
        # mu: the block's eigenvalue (a +- sqrt(...)) minus T[m, m].
        tr, det = blk[0, 0] + blk[1, 1], blk[0, 0] * blk[1, 1] - blk[0, 1] * blk[1, 0]
        disc = jnp.sqrt(tr * tr / 4 - det)
        mu = tr / 2 + disc - T[m, m]
        r = jnp.sqrt(jnp.abs(mu) ** 2 + jnp.abs(sub) ** 2)
        act = (jnp.abs(sub) > eps * (jnp.abs(T[m - 1, m - 1]) + jnp.abs(T[m, m]))) & (r > 0)
        rs = jnp.where(act, r, 1)
        c, s = jnp.where(act, mu / rs, 1), jnp.where(act, sub / rs, 0)
        g = jnp.stack([jnp.stack([jnp.conj(c), s]), jnp.stack([-s, c])])
        T = T.at[m - 1:m + 1, m - 1:].set(g @ T[m - 1:m + 1, m - 1:])
        T = T.at[:m + 1, m - 1:m + 1].set(T[:m + 1, m - 1:m + 1] @ _H(g))
        Z = Z.at[:, m - 1:m + 1].set(Z[:, m - 1:m + 1] @ _H(g))
        T = T.at[m, m - 1].set(0)
    return T, Z


def _by_superdiagonal(T: Any, diag: Any, entry: Callable[..., Any]) -> Any:
    """Fills the upper triangular ``F`` from its diagonal, one superdiagonal ``d`` at a time:
    ``F[i, i+d] = entry(i, j, F)`` from the entries filled so far."""
    n = T.shape[-1]
    F = jnp.zeros_like(T).at[..., np.arange(n), np.arange(n)].set(diag)
    for d in range(1, n):
        i = np.arange(n - d)
        F = F.at[..., i, i + d].set(entry(i, i + d, F))
    return F


def sqrtm(A: Any, blocksize: int = 1) -> Any:
    """The principal matrix square root (complex), from the complex Schur form.

    Example:
        >>> jnp.real(jsp.linalg.sqrtm(jnp.array([[4., 0.], [0., 9.]])))
        Array([[2., 0.],
               [0., 3.]], dtype=float32)
    """
    if blocksize > 1:
        raise NotImplementedError("Blocked version is not implemented yet.")
    A, = _inexact("jax.scipy.linalg.sqrtm", A)
    _square("sqrtm", A, "A")
    T, Z = lax_linalg.schur(_complex(A))
    n = T.shape[-1]
    d = jnp.sqrt(T[..., np.arange(n), np.arange(n)])

    def entry(i, j, R):
        # R_ij (R_ii + R_jj) = T_ij - sum_{i<k<j} R_ik R_kj; (R @ R)_ij is that sum now.
        rr = (R @ R)[..., i, j]
        t = T[..., i, j]
        # Zero where nothing is left to divide (0 / 0 for a singular T's zero roots).
        return jnp.where(t == rr, 0, (t - rr) / (R[..., i, i] + R[..., j, j]))

    R = _by_superdiagonal(T, d, entry)
    return Z @ R @ _H(Z)


def funm(A: Any, func: Callable[[Any], Any], disp: bool = True) -> Any:
    """A matrix function ``func(A)`` by the Schur–Parlett method (``func`` elementwise on
    the eigenvalues; distinct eigenvalues needed). Returns ``(F, errest)`` when not
    ``disp`` (``errest`` the relative residual of ``F T = T F``).

    Example:
        >>> f = jsp.linalg.funm(jnp.array([[1., 0.], [0., 2.]]), jnp.exp)
        >>> bool(jnp.allclose(f, jnp.diag(jnp.exp(jnp.array([1., 2.])))))
        True
    """
    A, = _inexact("jax.scipy.linalg.funm", A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"expected square array_like input, got shape {A.shape}")
    T, Z = lax_linalg.schur(_complex(A))
    n = T.shape[-1]
    f = jnp.asarray(func(T[np.arange(n), np.arange(n)])).astype(T.dtype)

    def entry(i, j, F):
        # Parlett, from F T = T F: F_ij (T_jj - T_ii) = T_ij (F_jj - F_ii) +
        # sum_{i<k<j} (T_ik F_kj - F_ik T_kj), which is (T F - F T)_ij while F_ij is 0.
        # (a repeated eigenvalue leaves the numerator undivided, as JAX's funm does)
        num, den = (T @ F - F @ T)[i, j], T[j, j] - T[i, i]
        return jnp.where(den != 0, num / jnp.where(den != 0, den, 1), num)

    F = _by_superdiagonal(T, f, entry)
    out = Z @ F @ _H(Z)
    if disp:
        return out
    err = jnp.linalg.norm(F @ T - T @ F, 1) / jnp.maximum(jnp.linalg.norm(F, 1), 1e-30)
    return out, err


def polar(a: Any, side: str = "right", *, method: str = "qdwh", eps: float | None = None,
          max_iterations: int | None = None) -> tuple[Any, Any]:
    """Polar decomposition of (a batch of) matrices: ``(u, p)`` with ``a = u p``
    (``side="right"``) or ``a = p u`` (``"left"``), ``u`` with orthonormal columns (rows)
    and ``p`` Hermitian positive semidefinite. ``method="svd"`` takes any shape; ``"qdwh"``
    (QDWH iterations) needs ``m >= n`` for ``side="right"`` and ``m < n`` for ``"left"``.

    Example:
        >>> u, p = jsp.linalg.polar(jnp.array([[2., 0.], [0., -3.]]))
        >>> jnp.round(p, 4)
        Array([[2., 0.],
               [0., 3.]], dtype=float32)
    """
    a, = _inexact("jax.scipy.linalg.polar", a)
    if a.ndim < 2:
        raise ValueError("The input `a` must be at least a 2-D array.")
    if side not in ("right", "left"):
        raise ValueError("The argument `side` must be either 'right' or 'left'.")
    sig = "(m,n)->(m,n),(n,n)" if side == "right" else "(m,n)->(m,n),(m,m)"
    return jnp.vectorize(lambda x: _polar_2d(x, side, method, eps, max_iterations),
                         signature=sig)(a)


def _polar_2d(a: Any, side: str, method: str, eps: float | None,
              max_iterations: int | None) -> tuple[Any, Any]:
    m, n = a.shape
    if method == "qdwh":
        if m >= n and side == "right":
            return lax_linalg.qdwh(a, max_iterations=max_iterations, eps=eps)[:2]
        if m < n and side == "left":  # a^H = u' p' gives a = p' u'^H
            u, p = lax_linalg.qdwh(_H(a), max_iterations=max_iterations, eps=eps)[:2]
            return _H(u), _H(p)
        raise NotImplementedError(f"polar: method='qdwh' needs m >= n for side='right' and "
                                  f"m < n for side='left'; got shape {a.shape} with "
                                  f"side={side!r} (method='svd' takes any shape)")
    if method != "svd":
        raise ValueError(f"Unknown polar decomposition method {method}.")
    w, s, vh = jnp.linalg.svd(a, full_matrices=False)
    s = s.astype(a.dtype)
    p = (_H(vh) * s) @ vh if side == "right" else (w * s) @ _H(w)
    return w @ vh, p


def solve_sylvester(A: Any, B: Any, C: Any, *, method: str = "schur",
                    tol: float = 1e-8) -> Any:
    """Solves ``A X + X B = C`` by the Bartels–Stewart method (complex Schur forms of ``A``
    and ``B``, then one triangular solve per column).

    Example:
        >>> jsp.linalg.solve_sylvester(jnp.eye(2), jnp.eye(2), 4 * jnp.eye(2))
        Array([[2., 0.],
               [0., 2.]], dtype=float32)
    """
    if method != "schur":
        raise ValueError(f"Unsupported method: {method}")
    A, B, C = _inexact("jax.scipy.linalg.solve_sylvester", A, B, C)
    for name, x in (("A", A), ("B", B)):
        if x.ndim != 2 or x.shape[0] != x.shape[1]:
            raise ValueError(f"solve_sylvester: {name} must be a square matrix, got shape "
                             f"{x.shape}")
    if C.shape != (A.shape[0], B.shape[0]):
        raise ValueError(f"solve_sylvester: C must have shape {(A.shape[0], B.shape[0])}, "
                         f"got {C.shape}")
    R, U = lax_linalg.schur(_complex(A))
    S, V = lax_linalg.schur(_complex(B))
    F = _H(U) @ _complex(C) @ V
    m, n = F.shape
    eye = jnp.eye(m, dtype=R.dtype)
    cols = []
    for j in range(n):  # (R + S_jj I) y_j = f_j - sum_{k<j} S_kj y_k
        rhs = F[:, j]
        for k in range(j):
            rhs = rhs - S[k, j] * cols[k]
        cols.append(lax_linalg.triangular_solve(R + S[j, j] * eye, rhs[:, None],
                                                left_side=True, lower=False)[:, 0])
    Y = jnp.stack(cols, axis=1) if cols else F
    X = U @ Y @ _H(V)
    return X if jnp.iscomplexobj(A) or jnp.iscomplexobj(B) or jnp.iscomplexobj(C) else \
        jnp.real(X).astype(A.dtype)


def expm_frechet(A: Any, E: Any, *, method: str | None = None,
                 compute_expm: bool = True) -> Any:
    """The Frechet derivative of the matrix exponential at ``A`` in direction ``E``:
    ``(expm(A), L)`` or ``L`` alone, from ``expm([[A, E], [0, A]])`` (its upper-right
    block is ``L``); leading dimensions are batch dimensions.

    Example:
        >>> e, l = jsp.linalg.expm_frechet(jnp.zeros((1, 1)), jnp.ones((1, 1)))
        >>> l
        Array([[1.]], dtype=float32)
    """
    from ember.scipy.linalg import expm
    if method not in (None, "SPS", "blockEnlarge"):
        raise ValueError(f"Unknown implementation {method}")
    A, E = _inexact("jax.scipy.linalg.expm_frechet", A, E)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"expected A to be a (batch of) square matrices, got shape "
                         f"{A.shape}")
    if E.shape != A.shape:
        raise ValueError(f"expected A and E to be the same shape, got {A.shape} and "
                         f"{E.shape}")
    n = A.shape[-1]
    big = jnp.concatenate([jnp.concatenate([A, E], axis=-1),
                           jnp.concatenate([jnp.zeros_like(A), A], axis=-1)], axis=-2)
    out = expm(big)
    L = out[..., :n, n:]
    return (out[..., :n, :n], L) if compute_expm else L


def eigh_tridiagonal(d: Any, e: Any, *, eigvals_only: bool = False, select: str = "a",
                     select_range: tuple[float, float] | None = None, tol: float | None = None,
                     key: Any = None) -> Any:
    """Eigenvalues (ascending), and eigenvectors unless ``eigvals_only``, of the symmetric
    tridiagonal matrix with diagonal ``d`` and off-diagonal ``e``; ``select="i"`` keeps the
    eigenvalues with indices ``select_range = (lo, hi)`` (inclusive).

    Example:
        >>> jsp.linalg.eigh_tridiagonal(jnp.array([2., 2.]), jnp.array([1.]),
        ...                             eigvals_only=True)
        Array([1., 3.], dtype=float32)
    """
    d, e = _inexact("jax.scipy.linalg.eigh_tridiagonal", d, e)
    if d.ndim != 1 or e.ndim != 1 or e.shape[0] != max(d.shape[0] - 1, 0):
        raise ValueError(f"eigh_tridiagonal: d must be a vector and e one element shorter, "
                         f"got shapes {d.shape} and {e.shape}")
    if select not in ("a", "i", "v"):
        raise ValueError(f"eigh_tridiagonal: select must be 'a', 'i' or 'v', got {select!r}")
    if select == "v":
        raise NotImplementedError("eigh_tridiagonal: select='v' is not implemented.")
    n = d.shape[0]
    idx = np.arange(n - 1)
    t = jnp.diag(d).at[idx + 1, idx].set(e).at[idx, idx + 1].set(jnp.conj(e))
    w, v = jnp.linalg.eigh(t)
    if select == "i":
        lo, hi = (int(x) for x in select_range)
        w, v = w[lo:hi + 1], v[:, lo:hi + 1]
    return w if eigvals_only else (w, v)


def qr_multiply(a: Any, c: Any, mode: str = "right", pivoting: bool = False,
                conjugate: bool = False, overwrite_a: bool = False,
                overwrite_c: bool = False) -> tuple[Any, Any]:
    """The QR decomposition of ``a`` (``(..., M, N)``, ``K = min(M, N)``) with ``Q`` applied
    to ``c``: ``(c @ Q, R)`` for ``mode="right"`` (``c`` of shape ``(..., P, M)``) or
    ``(Q @ c, R)`` for ``"left"`` (``c`` of shape ``(..., K, P)``); ``conjugate`` uses
    ``conj(Q)``. A 1-D ``c`` is a row (right) or column (left) vector.

    Example:
        >>> cq, r = jsp.linalg.qr_multiply(jnp.array([[3., 0.], [4., 5.]]), jnp.eye(2))
        >>> r
        Array([[-5., -4.],
               [ 0.,  3.]], dtype=float32)
    """
    if mode not in ("right", "left"):
        raise ValueError(f"mode must be 'right' or 'left', got {mode!r}")
    if pivoting:
        raise NotImplementedError("jax.scipy.linalg.qr_multiply: pivoting=True is not "
                                  "supported")
    a, c = _inexact("jax.scipy.linalg.qr_multiply", a, c)
    if a.ndim < 2:
        raise ValueError(f"qr_multiply: a must have rank >= 2, got shape {a.shape}")
    onedim = c.ndim == 1
    if onedim:
        c = c[None, :] if mode == "right" else c[:, None]
    q, r = lax.linalg.qr(a, full_matrices=False)
    if conjugate:
        q = jnp.conj(q)
    m, k = q.shape[-2:]
    if mode == "right":
        if c.shape[-1] != m:
            raise ValueError(f"Array shapes are not compatible for c @ Q operation: a has "
                             f"shape {a.shape} so Q has {m} rows, but c has {c.shape[-1]} "
                             f"columns (expected {m}).")
        out = c @ q
    else:
        if c.shape[-2] != k:
            raise ValueError(f"Array shapes are not compatible for Q @ c operation: a has "
                             f"shape {a.shape} so Q has {k} columns, but c has "
                             f"{c.shape[-2]} rows (expected {k}).")
        out = q @ c
    return (jnp.ravel(out) if onedim else out), r


__all__ = ["cholesky", "eigh_tridiagonal", "expm_frechet", "funm", "hessenberg", "polar",
           "qr_multiply", "rsf2csf", "schur", "solve_sylvester", "sqrtm"]
