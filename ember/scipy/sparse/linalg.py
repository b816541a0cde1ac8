"""ember.scipy.sparse.linalg: Krylov solvers with JAX's interface (``jax.scipy.sparse.linalg``).

``cg`` (conjugate gradients), ``bicgstab`` (biconjugate gradients, stabilized) and ``gmres``
(generalized minimal residuals, restarted) solve ``A x = b`` for a square matrix ``A`` or a
linear function ``A`` on arrays or pytrees of arrays. Each solver is one ``lax.while_loop``
inside ``lax.custom_linear_solve``: derivatives are taken through the equation at the solution
(another solve with the same method, on ``A`` or its transpose), never through the iterations.

A solve stops once the residual ``|b - A x|`` is at most ``max(tol * |b|, atol)`` or after
``maxiter`` iterations (``gmres``: restart cycles, measured on the preconditioned residual);
nothing reports which. As in JAX, ``cg`` and ``bicgstab`` return ``(x, None)``, and ``gmres``
returns ``(x, info)`` with ``info`` -1 when ``x`` holds a NaN and 0 otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

import ember.numpy as jnp
from ember import _pytree, lax
from ember.scipy.linalg import solve_triangular

__all__ = ["bicgstab", "cg", "gmres"]


# ---------------------------------------------------------------- vector algebra on pytrees


def _dot(a: Any, b: Any) -> Any:
    return jnp.dot(a, b, precision=lax.Precision.HIGHEST)


def _vdot(x: Any, y: Any) -> Any:
    """``<x, y>`` over all leaves, conjugating ``x``."""
    return sum(jnp.vdot(a, b, precision=lax.Precision.HIGHEST)
               for a, b in zip(_pytree.tree_leaves(x), _pytree.tree_leaves(y)))


def _vdot_real(x: Any, y: Any) -> Any:
    """The real part of ``<x, y>``."""
    return jnp.real(_vdot(x, y))


def _norm(x: Any) -> Any:
    return jnp.sqrt(_vdot_real(x, x))


def _add(x: Any, y: Any) -> Any:
    return _pytree.tree_map(lambda a, b: a + b, x, y)


def _sub(x: Any, y: Any) -> Any:
    return _pytree.tree_map(lambda a, b: a - b, x, y)


def _scale(s: Any, x: Any) -> Any:
    return _pytree.tree_map(lambda a: s * a, x)


def _where(pred: Any, x: Any, y: Any) -> Any:
    return _pytree.tree_map(partial(jnp.where, pred), x, y)


def _dtype(tree: Any) -> np.dtype:
    return jnp.result_type(*_pytree.tree_leaves(tree))


# ---------------------------------------------------------------- argument handling


def _identity(x: Any) -> Any:
    return x


def _operator(fn: str, name: str, op: Any, b: Any) -> Callable:
    """``op`` as a function: a callable as it is, a square matrix as ``x -> op @ x``."""
    if callable(op):
        return op
    if isinstance(op, (np.ndarray, jnp.ndarray)):
        shape = tuple(np.shape(op))
        if len(shape) != 2 or shape[0] != shape[1]:
            raise ValueError(f"{fn}: linear operator {name} must be a square matrix, but has "
                             f"shape: {shape}")
        b_leaves = _pytree.tree_leaves(b)
        if len(b_leaves) == 1 and (np.ndim(b_leaves[0]) == 0
                                   or np.shape(b_leaves[0])[0] != shape[1]):
            raise TypeError(f"{fn}: matrix {name} of shape {shape} does not match b of shape "
                            f"{np.shape(b_leaves[0])}")
        return partial(_dot, op)
    if hasattr(op, "__matmul__"):  # e.g. a sparse matrix class
        return op.__matmul__
    raise TypeError(f"{fn}: linear operator {name} must be either a function or ndarray: {op}")


def _prepare(fn: str, A: Any, b: Any, x0: Any, M: Any, maxiter: int | None):
    """Arrays for ``b`` and ``x0`` (zeros by default) after checks, the operators ``A`` and
    ``M`` as functions, and ``maxiter`` (default ten times the size of ``b``)."""
    b = _pytree.tree_map(jnp.asarray, b)
    if x0 is None:
        x0 = _pytree.tree_map(jnp.zeros_like, b)
    x0 = _pytree.tree_map(jnp.asarray, x0)
    b_tree, x0_tree = _pytree.tree_structure(b), _pytree.tree_structure(x0)
    if x0_tree != b_tree:
        raise ValueError(f"{fn}: x0 and b must have matching tree structure: {x0_tree} vs "
                         f"{b_tree}")
    b_shapes = [tuple(np.shape(v)) for v in _pytree.tree_leaves(b)]
    x0_shapes = [tuple(np.shape(v)) for v in _pytree.tree_leaves(x0)]
    if x0_shapes != b_shapes:
        raise ValueError(f"{fn}: arrays in x0 and b must have matching shapes: {x0_shapes} vs "
                         f"{b_shapes}")
    A = _operator(fn, "A", A, b)
    M = _identity if M is None else _operator(fn, "M", M, b)
    if maxiter is None:
        maxiter = 10 * sum(int(np.prod(s)) for s in b_shapes)  # SciPy's default
    return A, b, x0, M, maxiter


def _is_real(tree: Any) -> bool:
    return not any(jnp.iscomplexobj(v) for v in _pytree.tree_leaves(tree))


# ---------------------------------------------------------------- cg


def _cg_solve(A: Callable, b: Any, x0: Any, tol: Any, atol: Any, maxiter: int,
              M: Callable) -> Any:
    """Preconditioned conjugate gradients (Saad, Iterative Methods, algorithm 9.1)."""
    atol2 = jnp.maximum(tol ** 2 * _vdot_real(b, b), atol ** 2)
    r0 = _sub(b, A(x0))
    z0 = M(r0)
    dtype = _dtype(z0)
    gamma0 = _vdot_real(r0, z0).astype(dtype)  # <r, M r>

    def cond(state):
        _, r, gamma, _, k = state
        rs = jnp.real(gamma) if M is _identity else _vdot_real(r, r)
        return (rs > atol2) & (k < maxiter)

    def body(state):
        x, r, gamma, p, k = state
        ap = A(p)
        alpha = gamma / _vdot_real(p, ap).astype(dtype)
        x = _add(x, _scale(alpha, p))
        r = _sub(r, _scale(alpha, ap))
        z = M(r)
        gamma_new = _vdot_real(r, z).astype(dtype)
        p = _add(z, _scale(gamma_new / gamma, p))
        return x, r, gamma_new, p, k + 1

    return lax.while_loop(cond, body, (x0, r0, gamma0, z0, 0))[0]


def cg(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0,
       maxiter: int | None = None, M: Any = None) -> tuple[Any, None]:
    """Solves ``A x = b`` by conjugate gradients, for ``A`` Hermitian positive definite.

    Args:
        A: a square matrix, or a function computing ``A @ x`` for ``x`` shaped like ``b``
            (``A`` need not be a matrix: any linear map on pytrees shaped like ``b``). Its
            derivatives assume ``A`` symmetric (Hermitian).
        b: the right-hand side, an array or a pytree of arrays.
        x0: the starting guess, shaped like ``b`` (zeros by default).
        tol, atol: stop once ``|b - A x| <= max(tol * |b|, atol)``.
        maxiter: at most this many iterations (default ``10 * size(b)``).
        M: a preconditioner approximating ``A^-1`` (matrix or function), itself positive
            definite.

    Returns:
        ``(x, None)``; no convergence information is returned.

    Example:
        >>> a = jnp.array([[4., 1.], [1., 3.]])
        >>> jax.scipy.sparse.linalg.cg(a, jnp.array([1., 2.]))
        (Array([0.09090909, 0.6363636 ], dtype=float32), None)
    """
    A, b, x0, M, maxiter = _prepare("cg", A, b, x0, M, maxiter)
    solve = partial(_cg_solve, x0=x0, tol=tol, atol=atol, maxiter=maxiter, M=M)
    x = lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve,
                                symmetric=_is_real(b))
    return x, None


# ---------------------------------------------------------------- bicgstab


def _bicgstab_solve(A: Callable, b: Any, x0: Any, tol: Any, atol: Any, maxiter: int,
                    M: Callable) -> Any:
    """Preconditioned BiCGSTAB (van der Vorst 1992; Saad, Iterative Methods, algorithm 7.7).

    The loop also stops at a breakdown: ``<rhat, r> == 0``, or a zero step ``alpha`` or
    ``omega`` (that iteration's update is kept)."""
    atol2 = jnp.maximum(tol ** 2 * _vdot_real(b, b), atol ** 2)
    r0 = _sub(b, A(x0))
    one = jnp.ones((), _dtype(b))
    zeros = _pytree.tree_map(jnp.zeros_like, r0)

    def cond(state):
        r, k, broken = state[1], state[-2], state[-1]
        return (_vdot_real(r, r) > atol2) & (k < maxiter) & ~broken

    def body(state):
        x, r, rhat, alpha, omega, rho, p, v, k, _ = state
        rho_new = _vdot(rhat, r)
        beta = (rho_new / rho) * (alpha / omega)
        p = _add(r, _scale(beta, _sub(p, _scale(omega, v))))
        phat = M(p)
        v = A(phat)
        alpha = rho_new / _vdot(rhat, v)
        s = _sub(r, _scale(alpha, v))
        s_small = _vdot_real(s, s) < atol2  # converged half way: skip the second half
        shat = M(s)
        t = A(shat)
        omega = _vdot(t, s) / _vdot(t, t)
        half = _add(x, _scale(alpha, phat))
        x = _where(s_small, half, _add(half, _scale(omega, shat)))
        r = _where(s_small, s, _sub(s, _scale(omega, t)))
        broken = (rho_new == 0) | (alpha == 0) | (omega == 0)
        return x, r, rhat, alpha, omega, rho_new, p, v, k + 1, broken

    init = (x0, r0, r0, one, one, one, zeros, zeros, 0, jnp.asarray(False))
    return lax.while_loop(cond, body, init)[0]


def bicgstab(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0,
             maxiter: int | None = None, M: Any = None) -> tuple[Any, None]:
    """Solves ``A x = b`` by the biconjugate gradient stabilized method (any square ``A``).

    Args:
        A: a square matrix, or a function computing ``A @ x`` for ``x`` shaped like ``b``.
        b: the right-hand side, an array or a pytree of arrays.
        x0: the starting guess, shaped like ``b`` (zeros by default).
        tol, atol: stop once ``|b - A x| <= max(tol * |b|, atol)``.
        maxiter: at most this many iterations (default ``10 * size(b)``).
        M: a preconditioner approximating ``A^-1`` (matrix or function).

    Returns:
        ``(x, None)``; no convergence information is returned.

    Example:
        >>> a = jnp.array([[3., 1.], [-1., 2.]])
        >>> x, _ = jax.scipy.sparse.linalg.bicgstab(a, jnp.array([4., 1.]))
        >>> x
        Array([1., 1.], dtype=float32)
    """
    A, b, x0, M, maxiter = _prepare("bicgstab", A, b, x0, M, maxiter)
    solve = partial(_bicgstab_solve, x0=x0, tol=tol, atol=atol, maxiter=maxiter, M=M)
    x = lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve)
    return x, None


# ---------------------------------------------------------------- gmres


def _safe_normalize(x: Any, thresh: Any = None) -> tuple[Any, Any]:
    """``(x / |x|, |x|)``, or zeros and 0 where ``|x| <= thresh`` (default: epsilon)."""
    norm = _norm(x)
    if thresh is None:
        thresh = jnp.finfo(norm.dtype).eps
    big = norm > thresh
    unit = _pytree.tree_map(lambda v: jnp.where(big, v / norm.astype(v.dtype), 0), x)
    return unit, jnp.where(big, norm, 0)


def _column(V: Any, k: Any) -> Any:
    return _pytree.tree_map(lambda a: a[..., k], V)


def _project_out(V: Any, w: Any) -> tuple[Any, Any]:
    """``(w - V h, h)`` for ``h = V^H w``: one classical Gram-Schmidt pass against the
    columns of the basis ``V`` (the vectors along its last axis)."""
    h = sum(jnp.tensordot(jnp.conj(basis), v, axes=(list(range(v.ndim)),) * 2,
                          precision=lax.Precision.HIGHEST)
            for basis, v in zip(_pytree.tree_leaves(V), _pytree.tree_leaves(w)))
    return _pytree.tree_map(lambda v, basis: v - _dot(basis, h), w, V), h


def _arnoldi_step(k: Any, A: Callable, M: Callable, V: Any, H: Any) -> tuple[Any, Any, Any]:
    """Extends the orthonormal Krylov basis ``V`` (trailing axis: the vectors) by
    ``M A V[k]`` orthogonalized by classical Gram-Schmidt done twice ("twice is enough");
    the coefficients go to row ``k`` of ``H`` (the Hessenberg matrix, transposed).
    Returns ``V``, ``H`` and whether the new vector vanished (breakdown)."""
    w = M(A(_column(V, k)))
    w_norm = _norm(w)
    w, h = _project_out(V, w)
    w, h2 = _project_out(V, w)
    unit, w_norm_new = _safe_normalize(w, thresh=jnp.finfo(w_norm.dtype).eps * w_norm)
    V = _pytree.tree_map(lambda basis, u: basis.at[..., k + 1].set(u), V, unit)
    h = (h + h2).at[k + 1].set(w_norm_new.astype(h.dtype))
    return V, H.at[k, :].set(h), w_norm_new == 0


def _givens(a: Any, b: Any) -> tuple[Any, Any]:
    """``(c, s)`` with ``[[conj(c), conj(s)], [-s, c]] @ [a, b] == [r, 0]``."""
    r = jnp.hypot(jnp.abs(a), jnp.abs(b))
    safe = jnp.where(r == 0, 1, r).astype(a.dtype)
    return jnp.where(r == 0, 1, a / safe), jnp.where(r == 0, 0, b / safe)


def _rotate(v: Any, i: Any, c: Any, s: Any) -> Any:
    """Applies the rotation ``(c, s)`` to entries ``i, i + 1`` of the vector ``v``."""
    x, y = v[i], v[i + 1]
    return v.at[i].set(jnp.conj(c) * x + jnp.conj(s) * y).at[i + 1].set(c * y - s * x)


def _basis(unit_residual: Any, restart: int) -> Any:
    """The Krylov basis: ``unit_residual`` then ``restart`` zero vectors, on a new last axis."""
    return _pytree.tree_map(
        lambda v: jnp.pad(v[..., None], [(0, 0)] * v.ndim + [(0, restart)]), unit_residual)


def _gmres_incremental(A, b, x, unit_residual, residual_norm, ptol, restart, M):
    """One GMRES cycle, solving the small least-squares problem as the basis grows (QR of
    the Hessenberg matrix by Givens rotations), stopping early once the residual
    estimate is at most ``ptol``."""
    dtype = _dtype(b)
    V = _basis(unit_residual, restart)
    R = jnp.eye(restart, restart + 1, dtype=dtype)  # rows: the rotated Hessenberg columns
    rotations = jnp.zeros((restart, 2), dtype)
    beta = jnp.zeros(restart + 1, dtype).at[0].set(residual_norm.astype(dtype))

    def cond(state):
        k, err = state[:2]
        return (k < restart) & (err > ptol)

    def body(state):
        k, _, V, R, beta, rotations = state
        V, H, _ = _arnoldi_step(k, A, M, V, R)
        row = lax.fori_loop(0, k, lambda i, row: _rotate(row, i, *rotations[i]), H[k])
        c, s = _givens(row[k], row[k + 1])
        rotations = rotations.at[k].set(jnp.stack([c, s]))
        R = R.at[k].set(_rotate(row, k, c, s))
        beta = _rotate(beta, k, c, s)
        return k + 1, jnp.abs(beta[k + 1]), V, R, beta, rotations

    k, _, V, R, beta, _ = lax.while_loop(
        cond, body, (0, residual_norm, V, R, beta, rotations))
    # Unused rows of R are identity rows; beta past the k steps taken is the residual.
    beta = jnp.where(jnp.arange(restart + 1) < k, beta, 0)
    y = solve_triangular(R[:, :-1].T, beta[:-1], lower=False)
    x = _add(x, _pytree.tree_map(lambda basis: _dot(basis[..., :-1], y), V))
    return (x, *_safe_normalize(M(_sub(b, A(x)))))


def _gmres_batched(A, b, x, unit_residual, residual_norm, ptol, restart, M):
    """One GMRES cycle: the full Arnoldi process (``restart`` steps unless it breaks down),
    then one least-squares solve with the Hessenberg matrix."""
    dtype = _dtype(b)
    V = _basis(unit_residual, restart)
    H = jnp.eye(restart, restart + 1, dtype=dtype)  # transposed; unused rows stay identity

    def cond(state):
        k, broken = state[2:]
        return (k < restart) & ~broken

    def body(state):
        V, H, k, _ = state
        V, H, broken = _arnoldi_step(k, A, M, V, H)
        return V, H, k + 1, broken

    V, H, _, _ = lax.while_loop(cond, body, (V, H, 0, jnp.asarray(False)))
    beta = jnp.zeros(restart + 1, dtype).at[0].set(residual_norm.astype(dtype))
    y = jnp.linalg.lstsq(H.T, beta)[0]
    x = _add(x, _pytree.tree_map(lambda basis: _dot(basis[..., :-1], y), V))
    return (x, *_safe_normalize(M(_sub(b, A(x)))))


def _gmres_solve(A: Callable, b: Any, x0: Any, tol: Any, atol: Any, restart: int,
                 maxiter: int, M: Callable, cycle: Callable) -> Any:
    """Restarted GMRES on the left-preconditioned system ``M A x = M b``: at most
    ``maxiter`` cycles of ``cycle``, until the preconditioned residual is at most ``ptol``
    (the tolerance on ``|b - A x|`` scaled by ``|M b| / |b|``)."""
    b_norm = _norm(b)
    atol = jnp.maximum(tol * b_norm, atol)
    ratio = jnp.where(b_norm > 0, atol / jnp.where(b_norm > 0, b_norm, 1), 1)
    ptol = _norm(M(b)) * jnp.minimum(1.0, ratio)
    unit_residual, residual_norm = _safe_normalize(M(_sub(b, A(x0))))

    def cond(state):
        return (state[1] < maxiter) & (state[3] > ptol)

    def body(state):
        x, k, unit_residual, residual_norm = state
        x, unit_residual, residual_norm = cycle(A, b, x, unit_residual, residual_norm, ptol,
                                                restart, M)
        return x, k + 1, unit_residual, residual_norm

    return lax.while_loop(cond, body, (x0, 0, unit_residual, residual_norm))[0]


def gmres(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0,
          restart: int = 20, maxiter: int | None = None, M: Any = None,
          solve_method: str = "batched") -> tuple[Any, Any]:
    """Solves ``A x = b`` by restarted GMRES (any square, nonsingular ``A``).

    Each cycle builds an orthonormal basis of up to ``restart`` Krylov vectors of
    ``M A`` from the current residual and takes the ``x`` minimizing the preconditioned
    residual ``|M (b - A x)|`` over it; cycles repeat from the new ``x``.

    Args:
        A: a square matrix, or a function computing ``A @ x`` for ``x`` shaped like ``b``.
        b: the right-hand side, an array or a pytree of arrays.
        x0: the starting guess, shaped like ``b`` (zeros by default).
        tol, atol: stop once ``|M (b - A x)| <= |M b| * min(1, max(tol, atol / |b|))``.
        restart: the basis size per cycle (at most the size of ``b``).
        maxiter: at most this many restart cycles (default ``10 * size(b)``).
        M: a (left) preconditioner approximating ``A^-1`` (matrix or function).
        solve_method: ``'batched'`` (build the whole basis, then solve one least-squares
            problem: faster on accelerators) or ``'incremental'`` (update a QR factorization
            step by step, stopping within a cycle once converged: fewer matrix products).

    Returns:
        ``(x, info)``: ``info`` is -1 when ``x`` holds a NaN, 0 otherwise.

    Example:
        >>> a = jnp.array([[3., 1.], [-1., 2.]])
        >>> x, info = jax.scipy.sparse.linalg.gmres(a, jnp.array([4., 1.]))
        >>> x.round(4), info
        (Array([1., 1.], dtype=float32), Array(0, dtype=int32, weak_type=True))
    """
    cycles = {"batched": _gmres_batched, "incremental": _gmres_incremental}
    if solve_method not in cycles:
        raise ValueError(f"gmres: invalid solve_method {solve_method!r}, must be either "
                         f"'incremental' or 'batched'")
    A, b, x0, M, maxiter = _prepare("gmres", A, b, x0, M, maxiter)
    size = sum(int(np.size(v)) for v in _pytree.tree_leaves(b))
    restart = min(int(restart), size)
    if restart < 1:
        raise ValueError(f"gmres: restart must be positive, got {restart}")
    solve = partial(_gmres_solve, x0=x0, tol=tol, atol=atol, restart=restart,
                    maxiter=maxiter, M=M, cycle=cycles[solve_method])
    x = lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve)
    info = jnp.where(jnp.isnan(_norm(x)), -1, 0)
    return x, info
