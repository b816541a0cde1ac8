"""ember.numpy.linalg: NumPy's linear algebra with JAX's semantics (``jnp.linalg``).

Every function takes stacks of matrices (leading batch dimensions), promotes integer input to
the default float dtype, and is built on the ``lax.linalg`` primitives, so it traces, jits,
vmaps and differentiates like any other ember code.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

import ember.numpy as jnp
from ember import core, dtypes, lax
from ember.custom_derivatives import custom_jvp
from ember.lax import linalg as lax_linalg
from ember.numpy._eager_jit import jit_when_large
from ember.numpy._util import check_arraylike, ensure_array, promote_dtypes_inexact


class EighResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


class EigResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


class QRResult(NamedTuple):
    Q: Any
    R: Any


class SVDResult(NamedTuple):
    U: Any
    S: Any
    Vh: Any


class SlogdetResult(NamedTuple):
    sign: Any
    logabsdet: Any


# ---------------------------------------------------------------- helpers


def _inexact(fn: str, *args: Any) -> list[Any]:
    check_arraylike(fn, *args)
    return promote_dtypes_inexact(*(ensure_array(a) for a in args))


def _square(fn: str, a: Any) -> None:
    s = np.shape(a)
    if len(s) < 2 or s[-1] != s[-2]:
        raise ValueError(f"Argument to {fn} must have shape [..., n, n], got {s}.")


def _matrix(fn: str, a: Any) -> None:
    if np.ndim(a) < 2:
        raise ValueError(f"{fn}: argument must have rank at least 2 (a stack of matrices), "
                         f"got shape {np.shape(a)}")


def _H(x: Any) -> Any:
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def _real_dtype(dt: Any) -> np.dtype:
    return np.finfo(dt).dtype if dtypes.is_complex(dt) else np.dtype(dt)


def _eps(x: Any) -> float:
    return float(np.finfo(_real_dtype(np.asarray(0, core.get_aval(x).dtype).dtype)).eps)


# ---------------------------------------------------------------- factorizations


def cholesky(a: Any, *, upper: bool = False, symmetrize_input: bool = True) -> Any:
    """Cholesky factor of Hermitian positive definite matrices (NaN when not definite).

    Args:
        a: an array of shape ``(..., n, n)``.
        upper: return the upper factor ``U = L^H`` (``a = U^H U``) instead of ``L``.
        symmetrize_input: factor ``(a + a^H) / 2`` (otherwise only the lower triangle is
            read).

    Returns:
        ``L`` with ``a = L @ L^H`` (or ``U``), of ``a``'s shape.

    Example:
        >>> jnp.linalg.cholesky(jnp.array([[4., 2.], [2., 5.]]))
        Array([[2., 0.],
               [1., 2.]], dtype=float32)
    """
    a, = _inexact("jnp.linalg.cholesky", a)
    _square("cholesky", a)
    L = lax_linalg.cholesky(a, symmetrize_input=symmetrize_input)
    return _H(L) if upper else L


def qr(a: Any, mode: str = "reduced") -> Any:
    """QR decomposition: ``QRResult(Q, R)``, or ``R`` alone for ``mode="r"``.

    Args:
        a: an array of shape ``(..., m, n)``.
        mode: ``"reduced"`` (``Q`` is ``(..., m, k)``, ``k = min(m, n)``), ``"complete"``
            (``Q`` is ``(..., m, m)``), ``"r"``, or ``"raw"`` (LAPACK's compact
            ``(h, taus)``, ``h`` transposed as in NumPy).

    Example:
        >>> q, r = jnp.linalg.qr(jnp.array([[3., 0.], [4., 5.]]))
        >>> r
        Array([[-5., -4.],
               [ 0.,  3.]], dtype=float32)
    """
    a, = _inexact("jnp.linalg.qr", a)
    if mode not in ("reduced", "complete", "r", "raw"):
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    _matrix("qr", a)
    if mode == "raw":  # LAPACK's compact form, transposed as NumPy's: (h, taus)
        h, taus = lax_linalg.geqrf(a)
        return jnp.swapaxes(h, -1, -2), taus
    q, r = lax_linalg.qr(a, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False,
        subset_by_index: tuple[int, int] | None = None) -> Any:
    """Singular value decomposition ``a = U @ diag(S) @ Vh``: ``SVDResult(U, S, Vh)``, or
    ``S`` (real, descending) when ``compute_uv=False``.

    Args:
        a: an array of shape ``(..., m, n)``.
        full_matrices: ``U`` is ``(..., m, m)`` and ``Vh`` ``(..., n, n)``; else ``k = min``.
        compute_uv: also return the singular vectors.
        hermitian: ``a`` is Hermitian (computed with ``eigh``).
        subset_by_index: ``(start, end)``: only the singular values of these indices.

    Example:
        >>> jnp.linalg.svd(jnp.array([[3., 0.], [0., 4.]]), compute_uv=False)
        Array([4., 3.], dtype=float32)
    """
    a, = _inexact("jnp.linalg.svd", a)
    if np.ndim(a) < 2:
        raise TypeError(f"Input 0 to svd must have rank at least 2, but got "
                        f"shape={np.shape(a)}")
    if hermitian:
        v, w = lax_linalg.eigh(a, subset_by_index=subset_by_index)
        s = jnp.abs(w)
        order = jnp.flip(jnp.argsort(s, axis=-1), axis=-1)  # descending
        s = jnp.take_along_axis(s, order, axis=-1)
        if not compute_uv:
            return s
        cols = order[..., None, :]
        u = jnp.take_along_axis(v, cols, axis=-1)
        vh = _H(jnp.take_along_axis(v * jnp.sign(w)[..., None, :].astype(v.dtype), cols,
                                    axis=-1))
        return SVDResult(u, s, vh)
    out = lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv,
                         subset_by_index=subset_by_index)
    return SVDResult(*out) if compute_uv else out


def svdvals(x: Any, /) -> Any:
    """The singular values of ``x`` (real, descending).

    Example:
        >>> jnp.linalg.svdvals(jnp.array([[0., 2.], [1., 0.]]))
        Array([2., 1.], dtype=float32)
    """
    return svd(x, compute_uv=False)


def eigh(a: Any, UPLO: str | None = None, symmetrize_input: bool = True) -> EighResult:
    """Eigenvalues (real, ascending) and eigenvectors of Hermitian matrices.

    Args:
        a: an array of shape ``(..., n, n)``.
        UPLO: ``"L"`` (default) or ``"U"``: the triangle read when not symmetrizing.
        symmetrize_input: use ``(a + a^H) / 2``.

    Returns:
        ``EighResult(eigenvalues, eigenvectors)`` (eigenvectors in columns).

    Example:
        >>> jnp.linalg.eigh(jnp.array([[2., 0.], [0., 1.]])).eigenvalues
        Array([1., 2.], dtype=float32)
    """
    a, = _inexact("jnp.linalg.eigh", a)
    lower = _uplo(UPLO)
    _square("eigh", a)
    v, w = lax_linalg.eigh(a, lower=lower, symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def _uplo(UPLO: str | None) -> bool:
    if UPLO is None or UPLO == "L":
        return True
    if UPLO == "U":
        return False
    raise ValueError(f"UPLO must be one of None, 'L', or 'U', got {UPLO}")


def eigvalsh(a: Any, UPLO: str | None = "L", *, symmetrize_input: bool = True) -> Any:
    """The eigenvalues (real, ascending) of Hermitian matrices.

    Example:
        >>> jnp.linalg.eigvalsh(jnp.array([[2., 1.], [1., 2.]]))
        Array([1., 3.], dtype=float32)
    """
    return eigh(a, UPLO, symmetrize_input).eigenvalues


def eig(a: Any) -> EigResult:
    """Eigenvalues and right eigenvectors of general square matrices (always complex).

    Example:
        >>> jnp.linalg.eig(jnp.array([[2., 0.], [0., 3.]])).eigenvalues
        Array([2.+0.j, 3.+0.j], dtype=complex64)
    """
    a, = _inexact("jnp.linalg.eig", a)
    _square("eig", a)
    w, v = lax_linalg.eig(a, compute_left_eigenvectors=False)
    return EigResult(w, v)


def eigvals(a: Any) -> Any:
    """The eigenvalues of general square matrices (complex).

    Example:
        >>> jnp.linalg.eigvals(jnp.array([[0., 1.], [-1., 0.]]))
        Array([0.+1.j, 0.-1.j], dtype=complex64)
    """
    a, = _inexact("jnp.linalg.eigvals", a)
    _square("eigvals", a)
    return lax_linalg.eig(a, compute_left_eigenvectors=False,
                          compute_right_eigenvectors=False)[0]


# ---------------------------------------------------------------- determinants


def _lu_parts(a: Any) -> tuple[Any, Any]:
    """(diagonal of U, the permutation's parity as 0/1) of ``a``'s LU decomposition."""
    lu, pivots, _ = lax_linalg.lu(a)
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)
    moved = pivots != lax.broadcasted_iota(np.int32, np.shape(pivots), np.ndim(pivots) - 1)
    parity = jnp.count_nonzero(moved, axis=-1) % 2
    return diag, parity


def _det_lu(a: Any) -> Any:
    diag, parity = _lu_parts(a)
    sign = (1 - 2 * parity).astype(a.dtype)
    return sign * jnp.prod(diag, axis=-1)


@custom_jvp
def _det(a: Any) -> Any:
    return _det_lu(a)


@_det.defjvp
def _det_jvp(primals, tangents):
    a, = primals
    g, = tangents
    y, z = _adjugate_times(a, g)
    # d det(A) = tr(adj(A) dA): defined (and finite) for singular A too.
    return y, jnp.trace(z, axis1=-2, axis2=-1)


def _adjugate_times(a: Any, b: Any) -> tuple[Any, Any]:
    """(det(a), adj(a) @ b) without dividing by det(a), so that singular ``a`` works.

    With P a = L U: adj(a) b = det(a) U^-1 L^-1 P b. The last pivot u_nn (the one LU makes
    zero for a rank n-1 matrix) is never divided by: U's last diagonal entry is replaced by
    1 / (u_11 ... u_{n-1,n-1} * sign), and every row but the last of L^-1 P b is scaled by
    det(a). Matrices of rank below n - 1 (another zero pivot) have adj(a) = 0.
    """
    n = a.shape[-1]
    if n == 1:
        return a[..., 0, 0], b
    lu, pivots, perm = lax_linalg.lu(a)
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)
    moved = pivots != lax.broadcasted_iota(np.int32, pivots.shape, pivots.ndim - 1)
    sign = (1 - 2 * (jnp.count_nonzero(moved, axis=-1) % 2)).astype(a.dtype)
    partial = jnp.cumprod(diag, axis=-1) * sign[..., None]
    det = partial[..., -1]
    lu = lu.at[..., -1, -1].set(1 / partial[..., -2])
    # Rank below n - 1: U (modified) stays singular, its solve has infs or nans.
    probe = lax_linalg.triangular_solve(lu, jnp.ones(a.shape[:-1] + (1,), a.dtype),
                                        left_side=True, lower=False)[..., 0]
    low_rank = jnp.any(~jnp.isfinite(probe), axis=-1)[..., None, None]
    x = jnp.where(low_rank, 0, b)
    x = jnp.take_along_axis(x, jnp.broadcast_to(perm[..., :, None], x.shape), axis=-2)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
    x = jnp.concatenate([x[..., :-1, :] * det[..., None, None], x[..., -1:, :]], axis=-2)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=False)
    return det, jnp.where(low_rank, 0, x)


def _det_2x2(a: Any) -> Any:
    return a[..., 0, 0] * a[..., 1, 1] - a[..., 0, 1] * a[..., 1, 0]


def _det_3x3(a: Any) -> Any:
    # The rule of Sarrus, term for term as JAX writes it (so that rounding agrees).
    return (a[..., 0, 0] * a[..., 1, 1] * a[..., 2, 2] +
            a[..., 0, 1] * a[..., 1, 2] * a[..., 2, 0] +
            a[..., 0, 2] * a[..., 1, 0] * a[..., 2, 1] -
            a[..., 0, 2] * a[..., 1, 1] * a[..., 2, 0] -
            a[..., 0, 0] * a[..., 1, 2] * a[..., 2, 1] -
            a[..., 0, 1] * a[..., 1, 0] * a[..., 2, 2])


def det(a: Any) -> Any:
    """The determinant of square matrices: the explicit formula for 2 x 2 and 3 x 3 (as JAX
    does: a few fused multiplies instead of an LU per matrix), else LU with partial pivoting.

    Example:
        >>> jnp.linalg.det(jnp.array([[1., 2.], [3., 4.]]))
        Array(-2., dtype=float32)
    """
    a, = _inexact("jnp.linalg.det", a)
    _square("det", a)
    n = np.shape(a)[-1]
    if n == 2:
        return _det_2x2(a)
    if n == 3:
        return _det_3x3(a)
    return _det(a)


def slogdet(a: Any, *, method: str | None = None) -> SlogdetResult:
    """Sign (or unit phase, for complex) and natural log of ``|det(a)|``: a zero
    determinant gives sign 0 and ``-inf``.

    Args:
        a: an array of shape ``(..., n, n)``.
        method: ``"lu"`` (the default); ``"qr"`` is accepted and computed the same way.

    Example:
        >>> jnp.linalg.slogdet(jnp.array([[1., 2.], [3., 4.]]))
        SlogdetResult(sign=Array(-1., dtype=float32), logabsdet=Array(0.6931472, dtype=float32))
    """
    a, = _inexact("jnp.linalg.slogdet", a)
    if method not in (None, "lu", "qr"):
        raise ValueError(f"Unknown slogdet method '{method}'. Supported methods are 'lu' "
                         "(`None`), and 'qr'.")
    _square("slogdet", a)
    diag, parity = _lu_parts(a)
    absdiag = jnp.abs(diag)
    is_zero = jnp.any(diag == 0, axis=-1)
    logdet = jnp.sum(jnp.log(absdiag), axis=-1)
    sign = (1 - 2 * parity).astype(a.dtype)
    if dtypes.is_complex(a.dtype):
        phase = diag / absdiag.astype(a.dtype)
        sign = sign * jnp.prod(phase, axis=-1)
    else:  # (by counting negative pivots: a NaN pivot leaves the sign finite, as JAX's)
        negatives = jnp.count_nonzero(diag < 0, axis=-1)
        sign = sign * (1 - 2 * (negatives % 2)).astype(a.dtype)
    sign = jnp.where(is_zero, jnp.zeros_like(sign), sign)
    logdet = jnp.where(is_zero, jnp.full_like(logdet, -np.inf), logdet)
    return SlogdetResult(sign, logdet)


# ---------------------------------------------------------------- solves and inverses


def _lu_solve(a: Any, b: Any) -> Any:
    """``a^-1 b`` for matrices ``b`` with ``a``'s batch shape."""
    return lax_linalg.lu_solve_matrix(a, b)


def solve(a: Any, b: Any) -> Any:
    """Solves ``a @ x = b``.

    ``b`` is a vector when 1-D (solved against every matrix in ``a``), otherwise a stack of
    matrices whose batch dimensions broadcast with ``a``'s.

    Example:
        >>> jnp.linalg.solve(jnp.array([[2., 0.], [0., 4.]]), jnp.array([2., 2.]))
        Array([1. , 0.5], dtype=float32)
    """
    a, b = _inexact("jnp.linalg.solve", a, b)
    _square("solve", a)
    n = np.shape(a)[-1]
    if np.ndim(b) == 1:
        if np.shape(b)[0] != n:
            raise ValueError(f"solve: b of shape {np.shape(b)} does not match a of shape "
                             f"{np.shape(a)}")
        bb = jnp.broadcast_to(b[:, None], np.shape(a)[:-2] + (n, 1))
        return _lu_solve(a, bb)[..., 0]
    if (np.ndim(b) == np.ndim(a) - 1 and np.shape(b)[-1] == n
            and np.shape(b)[-2] != n):
        raise ValueError(
            f"Invalid shapes for solve: {np.shape(a)}, {np.shape(b)}. Prior to JAX v0.5.0, "
            "this would have been treated as a batched 1-dimensional solve. To recover this "
            "behavior, use solve(a, b[..., None]).squeeze(-1).")
    if np.shape(b)[-2] != n:
        raise ValueError(f"solve: b of shape {np.shape(b)} does not match a of shape "
                         f"{np.shape(a)} (b.shape[-2] must be {n})")
    try:
        batch = np.broadcast_shapes(np.shape(a)[:-2], np.shape(b)[:-2])
    except ValueError:
        raise ValueError(f"Incompatible shapes for broadcasting: shapes="
                         f"{[np.shape(a)[:-2], np.shape(b)[:-2]]}") from None
    a = jnp.broadcast_to(a, batch + (n, n))
    b = jnp.broadcast_to(b, batch + np.shape(b)[-2:])
    return _lu_solve(a, b)


def inv(a: Any) -> Any:
    """The inverse of square matrices (``inf``/``nan`` for singular ones).

    Example:
        >>> jnp.linalg.inv(jnp.array([[2., 0.], [0., 4.]]))
        Array([[0.5 , 0.  ],
               [0.  , 0.25]], dtype=float32)
    """
    a, = _inexact("jnp.linalg.inv", a)
    _square("inv", a)
    n = np.shape(a)[-1]
    eye = jnp.broadcast_to(jnp.eye(n, dtype=a.dtype), np.shape(a))
    return _lu_solve(a, eye)


def pinv(a: Any, rtol: Any = None, hermitian: bool = False, *, rcond: Any = None) -> Any:
    """The Moore-Penrose pseudo-inverse (via the SVD), singular values below
    ``rtol * max(s)`` treated as zero (default ``rtol``: ``10 * max(m, n) * eps``).

    Example:
        >>> jnp.linalg.pinv(jnp.array([[2., 0.], [0., 0.]]))
        Array([[0.5, 0. ],
               [0. , 0. ]], dtype=float32)
    """
    a, = _inexact("jnp.linalg.pinv", a)
    _matrix("pinv", a)
    if rcond is not None:
        if rtol is not None:
            raise ValueError("pinv: only one of rtol and rcond may be given")
        rtol = rcond
    m, n = np.shape(a)[-2:]
    if m == 0 or n == 0:
        return jnp.zeros(np.shape(a)[:-2] + (n, m), a.dtype)
    if rtol is None:
        rtol = 10 * max(m, n) * _eps(a)
    u, s, vh = svd(a, full_matrices=False, hermitian=hermitian)
    rtol = ensure_array(rtol).astype(s.dtype)
    cutoff = rtol[..., None] * jnp.max(s, axis=-1, keepdims=True)
    keep = s > cutoff
    s_inv = jnp.where(keep, 1 / jnp.where(keep, s, jnp.ones_like(s)),
                         jnp.zeros_like(s))
    return jnp.matmul(_H(vh) * s_inv[..., None, :].astype(a.dtype), _H(u))


def lstsq(a: Any, b: Any, rcond: float | None = None, *,
          numpy_resid: bool = False) -> tuple[Any, Any, Any, Any]:
    """Least-squares solution of ``a @ x = b`` (2-D ``a``; ``b`` 1-D or 2-D) via the SVD.

    Returns:
        ``(x, residuals, rank, s)``: residuals are the squared column norms of
        ``b - a @ x`` (empty with ``numpy_resid=True`` where NumPy gives none).

    Example:
        >>> x, *_ = jnp.linalg.lstsq(jnp.array([[1., 0.], [0., 1.], [0., 0.]]),
        ...                          jnp.array([1., 2., 3.]))
        >>> x
        Array([1., 2.], dtype=float32)
    """
    a, b = _inexact("jnp.linalg.lstsq", a, b)
    if np.ndim(a) != 2:
        raise TypeError(f"{np.ndim(a)}-dimensional array given. Array must be two-dimensional")
    if np.ndim(b) not in (1, 2):
        raise TypeError(f"{np.ndim(b)}-dimensional array given. Array must be one or "
                        "two-dimensional")
    m, n = np.shape(a)
    if np.shape(b)[0] != m:
        raise TypeError("Incompatible dimensions: a and b must have the same number of rows, "
                        f"got shapes {np.shape(a)} and {np.shape(b)}")
    vector = np.ndim(b) == 1
    if vector:
        b = b[:, None]
    rdt = _real_dtype(a.dtype)
    if a.size == 0:
        s = jnp.empty(0, rdt)
        rank = jnp.asarray(0, dtypes.int32)
        x = jnp.zeros((n, np.shape(b)[1]), a.dtype)
    else:
        eps = _eps(a)
        rc = eps * max(n, m) if rcond is None else \
            jnp.where(ensure_array(rcond) < 0, eps, rcond)
        u, s, vt = svd(a, full_matrices=False)
        mask = (s > 0) & (s >= ensure_array(rc).astype(s.dtype) * s[0])  # (zero a: x = 0)
        rank = jnp.sum(mask).astype(dtypes.int32)
        safe_s = jnp.where(mask, s, 1).astype(a.dtype)
        s_inv = jnp.where(mask, 1 / safe_s, 0)[:, None]
        x = jnp.matmul(_H(vt), s_inv * jnp.matmul(_H(u), b))
    if numpy_resid and (rank < n or m <= n):  # NumPy's empty residuals (needs concrete rank)
        resid = jnp.asarray([], dtype=rdt)
    else:
        resid = norm(b - jnp.matmul(a, x), axis=0) ** 2
    if vector:
        x = x.ravel()
    return x, resid, rank, s


def matrix_power(a: Any, n: int) -> Any:
    """``a`` raised to the integer power ``n`` (negative: of the inverse) by squaring.

    Example:
        >>> jnp.linalg.matrix_power(jnp.array([[1, 1], [0, 1]]), 3)
        Array([[1, 3],
               [0, 1]], dtype=int32)
    """
    check_arraylike("jnp.linalg.matrix_power", a)
    a = ensure_array(a)
    s = np.shape(a)
    if len(s) < 2 or s[-1] != s[-2]:
        raise TypeError(f"{len(s)}-dimensional array given. Array must be at least "
                        "two-dimensional" if len(s) < 2 else
                        "Last 2 dimensions of the array must be square")
    try:
        n = operator.index(core.concrete_or_error(n, "matrix_power: n must be concrete"))
    except TypeError as err:
        raise TypeError(f"exponent must be an integer, got {n}") from err
    if n == 0:
        return jnp.broadcast_to(jnp.eye(s[-1], dtype=a.dtype), s)
    if n < 0:
        a = inv(a)
        n = -n
    if n == 1:
        return a
    result = None
    z = a
    while n > 0:
        if n & 1:
            result = z if result is None else jnp.matmul(result, z)
        n >>= 1
        if n:
            z = jnp.matmul(z, z)
    return result


def matrix_rank(M: Any, rtol: Any = None, *, hermitian: bool = False, tol: Any = None) -> Any:
    """The rank of matrices: the number of singular values above a threshold, by default
    ``max(s) * max(m, n) * eps``. As in JAX, an explicit ``rtol`` (or its deprecated alias
    ``tol``) is that threshold itself, absolute, not relative to ``max(s)``.

    Example:
        >>> jnp.linalg.matrix_rank(jnp.array([[1., 2.], [2., 4.]]))
        Array(1, dtype=int32)
    """
    M, = _inexact("jnp.linalg.matrix_rank", M)
    if np.ndim(M) < 2:
        return jnp.any(M != 0).astype(dtypes.int32)
    s = svd(M, full_matrices=False, compute_uv=False, hermitian=hermitian)
    if tol is not None:
        if rtol is not None:
            raise ValueError("matrix_rank: only one of tol or rtol may be specified.")
        rtol = tol
    if rtol is None:
        thresh = (jnp.max(s, axis=-1, keepdims=True) * (max(np.shape(M)[-2:]) * _eps(M))
                  if np.shape(s)[-1] else jnp.zeros_like(s))
    else:
        # As in JAX, an explicit rtol (like tol) is an absolute threshold on the
        # singular values, not one relative to the largest.
        thresh = ensure_array(rtol).astype(s.dtype)
        thresh = thresh[..., None]
    return jnp.sum(s > thresh, axis=-1).astype(dtypes.int32)


def cond(x: Any, p: Any = None) -> Any:
    """The condition number of ``x`` in the ``p`` norm (default: 2-norm, from the SVD);
    ``inf`` for singular matrices.

    Example:
        >>> jnp.linalg.cond(jnp.array([[1., 0.], [0., 4.]]))
        Array(4., dtype=float32)
    """
    x, = _inexact("jnp.linalg.cond", x)
    _matrix("cond", x)
    if p is None or p == 2:
        s = svd(x, compute_uv=False)
        return s[..., 0] / s[..., -1]
    if p == -2:
        s = svd(x, compute_uv=False)
        r = s[..., -1] / s[..., 0]
    else:
        _square("cond", x)
        r = norm(x, ord=p, axis=(-2, -1)) * norm(inv(x), ord=p, axis=(-2, -1))
    # Singular matrices give NaN through inv: their condition number is infinite.
    return jnp.where(jnp.isnan(r) & ~jnp.any(jnp.isnan(x), axis=(-2, -1)),
                        np.inf, r)


def tensorinv(a: Any, ind: int = 2) -> Any:
    """The inverse of ``a`` viewed as a matrix from its first ``ind`` axes to the rest.

    Example:
        >>> jnp.linalg.tensorinv(jnp.eye(4).reshape(2, 2, 2, 2)).shape
        (2, 2, 2, 2)
    """
    a, = _inexact("jnp.linalg.tensorinv", a)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"ind must be a positive integer, got {ind}")
    s = np.shape(a)
    out_shape = s[ind:] + s[:ind]
    rows = functools.reduce(operator.mul, s[ind:], 1)
    cols = functools.reduce(operator.mul, s[:ind], 1)
    if rows != cols:
        raise ValueError(f"tensorinv: a.shape[ind:] should match a.shape[:ind]; got "
                         f"a.shape={s} and ind={ind}")
    return inv(a.reshape(cols, rows)).reshape(out_shape)


def tensorsolve(a: Any, b: Any, axes: tuple[int, ...] | None = None) -> Any:
    """Solves ``tensordot(a, x, x.ndim) = b`` for ``x``.

    Example:
        >>> jnp.linalg.tensorsolve(jnp.eye(4).reshape(2, 2, 4), jnp.ones((2, 2))).shape
        (4,)
    """
    a, b = _inexact("jnp.linalg.tensorsolve", a, b)
    if axes is not None:
        nd = np.ndim(a)
        axes = [ax % nd for ax in axes]
        rest = [i for i in range(nd) if i not in axes]
        a = jnp.transpose(a, rest + axes)
    s = np.shape(a)
    out_shape = s[np.ndim(b):]
    n = functools.reduce(operator.mul, out_shape, 1)
    if functools.reduce(operator.mul, np.shape(b), 1) != n:
        raise ValueError(f"tensorsolve: the product of b.shape {np.shape(b)} must equal the "
                         f"product of the trailing dims of a {out_shape}")
    return solve(a.reshape(n, n), b.ravel()).reshape(out_shape)


def multi_dot(arrays: Sequence[Any], *, precision: Any = None) -> Any:
    """The product of a chain of matrices (the first and last may be vectors).

    Example:
        >>> jnp.linalg.multi_dot([jnp.ones((2, 3)), jnp.ones((3, 4)), jnp.ones(4)])
        Array([12., 12.], dtype=float32)
    """
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError(f"multi_dot requires at least two arrays, got {len(arrays)}")
    check_arraylike("jnp.linalg.multi_dot", *arrays)
    for i, x in enumerate(arrays):
        nd = np.ndim(x)
        ok = nd in (1, 2) if i in (0, len(arrays) - 1) else nd == 2
        if not ok:
            raise ValueError(f"multi_dot: array {i} has {nd} dimensions; the first and last "
                             "must be 1-D or 2-D, the others 2-D")
    # The cheaper association first, for three matrices (as NumPy's chain order would).
    if len(arrays) == 3 and all(np.ndim(x) == 2 for x in arrays):
        (p, q), (_, r), (_, t) = (np.shape(x) for x in arrays)
        if q * r * (p + t) < p * t * (q + r):
            return jnp.matmul(arrays[0], jnp.matmul(arrays[1], arrays[2],
                                                              precision=precision),
                                   precision=precision)
    return functools.reduce(lambda x, y: jnp.matmul(x, y, precision=precision), arrays)


# ---------------------------------------------------------------- norms

def _vector_norm(x: Any, ord: Any, axis: tuple[int, ...], keepdims: bool) -> Any:
    ax = jnp.abs(x)
    if ord is None or ord == 2:
        if dtypes.is_complex(x.dtype):
            sq = jnp.real(x * jnp.conj(x))
        else:
            sq = x * x
        return jnp.sqrt(jnp.sum(sq, axis=axis, keepdims=keepdims))
    if isinstance(ord, str):
        raise ValueError(f"Invalid order '{ord}' for vector norm.")
    if ord == np.inf:
        return jnp.max(ax, axis=axis, keepdims=keepdims, initial=0)
    if ord == -np.inf:
        return jnp.min(ax, axis=axis, keepdims=keepdims)
    if ord == 0:
        return jnp.sum(x != 0, axis=axis, keepdims=keepdims).astype(ax.dtype)
    if ord == 1:
        return jnp.sum(ax, axis=axis, keepdims=keepdims)
    p = ensure_array(ord).astype(ax.dtype)
    return jnp.sum(ax ** p, axis=axis, keepdims=keepdims) ** (1 / p)


def _matrix_norm(x: Any, ord: Any, axis: tuple[int, int], keepdims: bool) -> Any:
    row, col = axis
    if ord is None or ord in ("fro", "f"):
        return _vector_norm(x, 2, axis, keepdims)
    if ord == 1 or ord == -1:
        red = jnp.max if ord == 1 else jnp.min
        out = red(jnp.sum(jnp.abs(x), axis=row, keepdims=True), axis=col,
                  keepdims=True)
    elif ord == np.inf or ord == -np.inf:
        red = jnp.max if ord == np.inf else jnp.min
        out = red(jnp.sum(jnp.abs(x), axis=col, keepdims=True), axis=row,
                  keepdims=True)
    elif ord in (2, -2, "nuc"):
        moved = jnp.moveaxis(x, (row, col), (-2, -1))
        s = svd(moved, compute_uv=False)
        s = (jnp.max(s, axis=-1) if ord == 2 else
             jnp.min(s, axis=-1) if ord == -2 else jnp.sum(s, axis=-1))
        out = jnp.expand_dims(jnp.expand_dims(s, min(row, col)), max(row, col))
    else:
        raise ValueError(f"Invalid order '{ord}' for matrix norm.")
    return out if keepdims else jnp.squeeze(out, axis=(row, col))


@jit_when_large('ord', 'axis', 'keepdims')
def norm(x: Any, ord: int | str | None = None, axis: None | tuple[int, ...] | int = None,
         keepdims: bool = False) -> Any:
    """Vector or matrix norm (NumPy's ``ord`` values: ``None``, ``'fro'``, ``'nuc'``,
    ``±inf``, ``±1``, ``±2``, other numbers for vectors).

    With ``axis=None`` a 1-D input gets a vector norm and a 2-D input a matrix norm
    (``ord=None``: the 2-norm of all elements, whatever the rank).

    Example:
        >>> jnp.linalg.norm(jnp.array([3., 4.]))
        Array(5., dtype=float32)
    """
    x, = _inexact("jnp.linalg.norm", x)
    nd = np.ndim(x)
    if axis is None:
        if ord is None:
            out = _vector_norm(x.ravel(), None, (0,), False)
            return out.reshape((1,) * nd) if keepdims else out
        axis = tuple(range(nd))
    elif isinstance(axis, (int, np.integer)):
        axis = (int(axis),)
    axis = tuple(operator.index(a) % nd if nd else operator.index(a) for a in axis)
    if len(axis) == 1:
        return _vector_norm(x, ord, axis, keepdims)
    if len(axis) == 2:
        return _matrix_norm(x, ord, axis, keepdims)
    raise ValueError(f"Improper number of axes for norm: axis={axis}. Pass one axis to "
                     "compute a vector-norm, or two axes to compute a matrix-norm.")


def vector_norm(x: Any, /, *, axis: int | tuple[int, ...] | None = None,
                keepdims: bool = False, ord: int | str = 2) -> Any:
    """The vector ``ord``-norm over ``axis`` (all axes, flattened, by default).

    Example:
        >>> jnp.linalg.vector_norm(jnp.array([[3., 4.]]))
        Array(5., dtype=float32)
    """
    x, = _inexact("jnp.linalg.vector_norm", x)
    if axis is None:
        out = _vector_norm(x.ravel(), ord, (0,), False)
        return out.reshape((1,) * np.ndim(x)) if keepdims else out
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = tuple(operator.index(a) % max(np.ndim(x), 1) for a in axes)
    return _vector_norm(x, ord, axes, keepdims)


def matrix_norm(x: Any, /, *, keepdims: bool = False, ord: str | int = "fro") -> Any:
    """The matrix ``ord``-norm over the last two axes.

    Example:
        >>> jnp.linalg.matrix_norm(jnp.array([[3., 0.], [0., 4.]]), ord=2)
        Array(4., dtype=float32)
    """
    x, = _inexact("jnp.linalg.matrix_norm", x)
    if np.ndim(x) < 2:
        raise ValueError(f"matrix_norm: x must have at least 2 dimensions, got shape "
                         f"{np.shape(x)}")
    nd = np.ndim(x)
    return _matrix_norm(x, ord, (nd - 2, nd - 1), keepdims)


# ---------------------------------------------------------------- array-API products


def outer(x1: Any, x2: Any, /) -> Any:
    """The outer product of two 1-D arrays.

    Example:
        >>> jnp.linalg.outer(jnp.array([1, 2]), jnp.array([3, 4]))
        Array([[3, 4],
               [6, 8]], dtype=int32)
    """
    check_arraylike("jnp.linalg.outer", x1, x2)
    if np.ndim(x1) != 1 or np.ndim(x2) != 1:
        raise ValueError(f"Input arrays must be one-dimensional, but they are "
                         f"x1.ndim={np.ndim(x1)} x2.ndim={np.ndim(x2)}")
    return jnp.outer(x1, x2)


def cross(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    """The cross product of (stacks of) 3-vectors along ``axis``.

    Example:
        >>> jnp.linalg.cross(jnp.array([1., 0., 0.]), jnp.array([0., 1., 0.]))
        Array([0., 0., 1.], dtype=float32)
    """
    check_arraylike("jnp.linalg.cross", x1, x2)
    s1, s2 = np.shape(x1), np.shape(x2)
    if not s1 or not s2 or s1[axis] != 3 or s2[axis] != 3:
        raise ValueError("Both input arrays must be (arrays of) 3-dimensional vectors, but "
                         f"they have x1.shape[axis]={s1[axis] if s1 else None} and "
                         f"x2.shape[axis]={s2[axis] if s2 else None}")
    return jnp.cross(x1, x2, axis=axis)


def matmul(x1: Any, x2: Any, /, *, precision: Any = None,
           preferred_element_type: Any = None) -> Any:
    """``jnp.matmul``: the matrix product of (stacks of) matrices.

    Example:
        >>> jnp.linalg.matmul(jnp.eye(2), jnp.array([1., 2.]))
        Array([1., 2.], dtype=float32)
    """
    return jnp.matmul(x1, x2, precision=precision,
                           preferred_element_type=preferred_element_type)


def tensordot(x1: Any, x2: Any, /, *, axes: Any = 2, precision: Any = None,
              preferred_element_type: Any = None) -> Any:
    """``jnp.tensordot`` with the array API's keyword-only ``axes``.

    Example:
        >>> jnp.linalg.tensordot(jnp.ones((2, 3)), jnp.ones((3, 2)), axes=1).shape
        (2, 2)
    """
    return jnp.tensordot(x1, x2, axes=axes, precision=precision,
                              preferred_element_type=preferred_element_type)


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1, precision: Any = None,
           preferred_element_type: Any = None) -> Any:
    """The conjugated dot product of vectors along ``axis`` (broadcasting the rest).

    Example:
        >>> jnp.linalg.vecdot(jnp.array([1., 2.]), jnp.array([3., 4.]))
        Array(11., dtype=float32)
    """
    return jnp.vecdot(x1, x2, axis=axis, precision=precision,
                           preferred_element_type=preferred_element_type)


def matrix_transpose(x: Any, /) -> Any:
    """Swaps the last two axes (rank >= 2).

    Example:
        >>> jnp.linalg.matrix_transpose(jnp.ones((2, 3))).shape
        (3, 2)
    """
    check_arraylike("jnp.linalg.matrix_transpose", x)
    if np.ndim(x) < 2:
        raise ValueError(f"matrix_transpose requires at least 2 dimensions; got "
                         f"ndim={np.ndim(x)}")
    return jnp.swapaxes(x, -1, -2)


def trace(x: Any, /, *, offset: int = 0, dtype: Any = None) -> Any:
    """The sum along the ``offset`` diagonal of the last two axes.

    Example:
        >>> jnp.linalg.trace(jnp.eye(3))
        Array(3., dtype=float32)
    """
    check_arraylike("jnp.linalg.trace", x)
    return jnp.trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


def diagonal(x: Any, /, *, offset: int = 0) -> Any:
    """The ``offset`` diagonal of the last two axes.

    Example:
        >>> jnp.linalg.diagonal(jnp.array([[1, 2], [3, 4]]))
        Array([1, 4], dtype=int32)
    """
    check_arraylike("jnp.linalg.diagonal", x)
    return jnp.diagonal(x, offset=offset, axis1=-2, axis2=-1)


__all__ = [
    "cholesky", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh",
    "inv", "lstsq", "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose",
    "multi_dot", "norm", "outer", "pinv", "qr", "slogdet", "solve", "svd", "svdvals",
    "tensordot", "tensorinv", "tensorsolve", "trace", "vecdot", "vector_norm",
    "EighResult", "EigResult", "QRResult", "SVDResult", "SlogdetResult",
]
