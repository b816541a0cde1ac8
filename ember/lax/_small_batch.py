"""Vectorized kernels for large batches of small matrices: LU with partial pivoting
(``getrf``), triangular solves (``trsm``) and Cholesky (``potrf``); and the symmetric
eigenproblem (``syevd``), QR (``qr``) and singular values (``svd``) where a backend has a
native kernel for them.

The LAPACK kernels of ``ember.lax._lapack`` make one cffi call per matrix, a few
microseconds each, which dominates for thousands of 4 x 4 matrices. These kernels run the
same algorithms one step at a time over the whole batch instead: the matrices are stored
batch-last, ``(m, n, batch)``, so that every step is a handful of NumPy operations on
contiguous vectors of the batch. They follow LAPACK's choices, so the results agree to
rounding: the pivot is the first entry of largest ``|re| + |im|`` in its column (a NaN is
taken as the largest), a zero pivot leaves its column unscaled, a triangular solve divides
by a zero diagonal entry (inf/NaN), and a matrix with a non-positive pivot gets an all-NaN
Cholesky factor (a NaN pivot is not a failure: it propagates, as in OpenBLAS and JAX).

``worth_it`` says when the batch is large enough for this to beat the per-matrix calls;
it takes real matrices only (complex ones keep LAPACK, whose complex division by zero gives
NaNs where NumPy's gives infinities). The kernels themselves accept complex input.

A backend may register faster kernels for real float32/float64 matrices as the custom-call
target ``NATIVE_TARGET`` (the CPU backend's ``small_linalg_kernel.run``: a compiled loop
per matrix, ~0.1 µs for a 4 x 4 LU where each NumPy step here costs ~15 µs); they make the
same choices, and the NumPy code below runs what they answer None to. The registry keeps
this layer from importing a backend. ``syevd``, ``qr`` and ``svd`` (singular values) have
no NumPy version here (stepped from NumPy they would not beat LAPACK): without the native
kernel ``worth_it`` says no and LAPACK runs them.
"""

from __future__ import annotations

import numpy as np

from ember.compiler.evaluator import CUSTOM_CALL_TARGETS

# The largest matrix side handled here: the step count grows with n while LAPACK's per-call
# overhead does not, and around 16 the two meet even for large batches.
MAX_DIM = 16
# A backend's native kernels: ``fn(kernel, *operands, **params)`` -> the result, or None
# where it has none for the operands (see ``_native``).
NATIVE_TARGET = "ember.small_batch.native"


def _native(kernel: str, *operands, **params):
    """The registered native kernel's result for real operands, or None (no kernel, or
    none for these operands)."""
    fn = CUSTOM_CALL_TARGETS.get(NATIVE_TARGET)
    if fn is None or any(x.dtype.kind != "f" for x in operands):
        return None
    return fn(kernel, *operands, **params)


def _cost_us(kernel: str, n: int, nb: int, cols: int = 1,
             native: bool = False) -> tuple[float, float]:
    """Rough times (µs) of this module's kernel and of the LAPACK loop for ``nb`` matrices
    of side ``n`` (``cols`` right-hand sides for ``trsm``), fitted on a Zen 4 core: each of
    the n NumPy steps costs a fixed ~4-18 µs of NumPy calls plus a little per matrix; a
    ``native`` kernel (``NATIVE_TARGET``) costs ~8 µs a call plus ~0.7-5 ns * n**2 a matrix
    (its steps are latency-bound, so it grows like n**2 up to 16); a LAPACK call costs
    ~0.5-1 µs of cffi overhead plus its arithmetic, after ~7-15 µs of setup."""
    if kernel == "getrf":
        lapack = 15 + nb * (1 + 0.05 * n + 0.005 * n * n)
        mine = (8 + nb * 0.005 * n * n) if native else n * (18 + nb * (0.035 + 0.0006 * n * n))
    elif kernel == "potrf":
        lapack = 7 + nb * (0.45 + 0.0025 * n * n)
        mine = (7 + nb * 0.0017 * n * n) if native else n * (14 + nb * (0.005 + 0.00015 * n * n))
    else:  # trsm
        lapack = 12 + nb * (1 + 0.001 * n * n * cols)
        mine = (9 + nb * cols * 0.0007 * n * n) if native \
            else n * (4 + nb * cols * (0.004 + 0.00007 * n * n))
    return mine, lapack


def worth_it(kernel: str, x: np.ndarray, cols: int = 1) -> bool:
    """Whether ``kernel`` (``getrf``, ``potrf``, ``trsm``, ``syevd``, ``qr`` or ``svd``,
    ``x`` its (..., m, n) matrix operand) should run here: real matrices of at most ``MAX_DIM`` rows
    and columns, in a batch large enough to beat a LAPACK call per matrix (with the native
    kernels, any batch: measured from 2 matrices on)."""
    if x.ndim < 3 or x.dtype.kind != "f" or max(x.shape[-2:]) > MAX_DIM or x.size == 0:
        return False
    n = max(x.shape[-2:])
    native = x.dtype.itemsize in (4, 8) and NATIVE_TARGET in CUSTOM_CALL_TARGETS
    if kernel == "syevd":
        # Native only: ~0.1 µs (4 x 4) to ~10 µs (16 x 16) a matrix where LAPACK takes
        # ~2.5 to ~20 µs, but in groups of 16 (8) matrices. Below one group the saving is
        # at most tens of µs, and LAPACK keeps its eigenvector signs (either sign is an
        # eigenvector; Jacobi's differ from LAPACK's, as JAX's GPU ones do).
        return native and x.size >= 16 * n * n
    if kernel in ("qr", "svd"):
        # Native only, likewise in groups of 16 (8) matrices: ~0.02-0.1 µs per 4 x 4 to
        # 6 x 4 matrix where LAPACK takes ~1-2 µs.
        return native and x.size >= 16 * x.shape[-1] * x.shape[-2]
    mine, lapack = _cost_us(kernel, n, x.size // (x.shape[-1] * x.shape[-2]), cols, native)
    return mine < lapack


def _to_batch_last(x: np.ndarray) -> np.ndarray:
    """A fresh C-ordered (m, n, batch) copy of the (..., m, n) stack ``x``."""
    m, n = x.shape[-2:]
    return np.array(np.moveaxis(x.reshape((-1, m, n)), 0, -1), order="C", copy=True)


def _from_batch_last(a: np.ndarray, shape: tuple) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(a, -1, 0)).reshape(shape)


def _magnitude(v: np.ndarray) -> np.ndarray:
    """LAPACK's i?amax measure: |x| for real, |re| + |im| for complex."""
    return np.abs(v.real) + np.abs(v.imag) if v.dtype.kind == "c" else np.abs(v)


def getrf(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LU with partial pivoting of a stack (..., m, n): ``(lu, pivots, permutation)`` with
    0-based int32 pivots (LAPACK's row swaps) and the permutation they make."""
    native = _native("getrf", x)
    if native is not None:
        return native
    m, n = x.shape[-2:]
    k = min(m, n)
    a = _to_batch_last(x)
    nb = a.shape[-1]
    cols = np.arange(nb)
    pivots = np.empty((k, nb), np.int32)
    perm = np.empty((m, nb), np.int32)
    perm[:] = np.arange(m, dtype=np.int32)[:, None]
    for j in range(k):
        p = np.argmax(_magnitude(a[j:, j]), axis=0)  # the first NaN, else the first max
        if j + 1 < m and p.any():
            p += j
            row = a[p, :, cols]  # (nb, n): the pivot rows
            a[p, :, cols] = a[j].T
            a[j] = row.T
            prow = perm[p, cols]
            perm[p, cols] = perm[j]
            perm[j] = prow
            pivots[j] = p
        else:
            pivots[j] = p + j
        if j + 1 < m:
            piv = a[j, j]
            low = a[j + 1:, j]
            nonzero = piv != 0
            if nonzero.all():
                low /= piv
            else:  # LAPACK leaves a zero pivot's column unscaled
                low[:] = np.where(nonzero, low / np.where(nonzero, piv, 1), low)
            if j + 1 < n:
                a[j + 1:, j + 1:] -= low[:, None, :] * a[j, None, j + 1:]
    batch = x.shape[:-2]
    return (_from_batch_last(a, x.shape), _from_batch_last(pivots, batch + (k,)),
            _from_batch_last(perm, batch + (m,)))


def _substitute(t: np.ndarray, b: np.ndarray, lower: bool, unit: bool) -> np.ndarray:
    """Solves ``t x = b`` in place of b for batch-last t (m, m, nb) and b (m, r, nb),
    reading only t's ``lower`` (or upper) triangle; divides by the diagonal unless
    ``unit``."""
    m = t.shape[0]
    for i in (range(m) if lower else range(m - 1, -1, -1)):
        lo, hi = (0, i) if lower else (i + 1, m)
        if hi > lo:
            b[i] -= np.einsum("kb,krb->rb", t[i, lo:hi], b[lo:hi])
        if not unit:
            b[i] /= t[i, i]
    return b


def trsm(a: np.ndarray, b: np.ndarray, *, left_side: bool, lower: bool, transpose_a: bool,
         conjugate_a: bool, unit_diagonal: bool) -> np.ndarray:
    """Solves ``op(a) x = b`` (``left_side``) or ``x op(a) = b`` for stacks of triangular
    ``a`` (..., k, k) and ``b`` (..., m, n) with the same batch dimensions."""
    dtype = np.result_type(a, b)
    native = _native_trsm(a.astype(dtype, copy=False), b.astype(dtype, copy=False),
                          left_side, lower, transpose_a, unit_diagonal)
    if native is not None:
        return native
    t = _to_batch_last(a.astype(dtype, copy=False))
    if conjugate_a:
        t = np.conj(t)
    # op(t) x = b, with op(t) lower iff lower != transpose_a; the right side solves
    # op(t)^T x^T = b^T, whose matrix is lower iff the left one is upper.
    eff_lower = lower != bool(transpose_a)
    if transpose_a != (not left_side):  # the matrix solved with is t^T
        t = np.ascontiguousarray(np.swapaxes(t, 0, 1))
    if not left_side:
        eff_lower = not eff_lower
        bb = _to_batch_last(np.swapaxes(b, -1, -2).astype(dtype, copy=False))
    else:
        bb = _to_batch_last(b.astype(dtype, copy=False))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = _substitute(t, bb, eff_lower, unit_diagonal)
    if not left_side:
        return np.swapaxes(_from_batch_last(x, b.shape[:-2] + (b.shape[-1], b.shape[-2])),
                           -1, -2)
    return _from_batch_last(x, b.shape)


def _native_trsm(a: np.ndarray, b: np.ndarray, left_side: bool, lower: bool,
                 transpose_a: bool, unit_diagonal: bool) -> np.ndarray | None:
    """``trsm`` through the native kernel, or None: the same reduction to a left-side
    solve as below, on batch-first (batch, m, m) and (batch, m, r) copies. (Real only, so
    ``conjugate_a`` changes nothing.)"""
    if a.dtype.kind != "f" or CUSTOM_CALL_TARGETS.get(NATIVE_TARGET) is None:
        return None
    k = a.shape[-1]
    t = a.reshape((-1, k, k))
    if transpose_a != (not left_side):
        t = np.swapaxes(t, 1, 2)
    t = np.ascontiguousarray(t)
    x = np.swapaxes(b, -1, -2) if not left_side else b
    x = np.array(x.reshape((-1,) + x.shape[-2:]), order="C", copy=True)
    eff_lower = (lower != bool(transpose_a)) != (not left_side)
    out = _native("trsm", t, x, lower=eff_lower, unit=bool(unit_diagonal))
    if out is None:
        return None
    if not left_side:
        return np.swapaxes(out.reshape(b.shape[:-2] + (b.shape[-1], b.shape[-2])), -1, -2)
    return out.reshape(b.shape)


def syevd(x: np.ndarray, lower: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """``(v, w)`` of a stack (..., n, n) of real symmetric matrices, reading the ``lower``
    (or upper) triangle: eigenvectors in the columns of v, eigenvalues w ascending (a
    matrix with a NaN or infinite entry: all NaN); None without a native kernel."""
    return _native("syevd", x, lower=bool(lower))


def qr(x: np.ndarray, full_matrices: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """``(q, r)`` of a real stack (..., m, n) as LAPACK's ``geqrf`` and ``orgqr`` give them:
    q (..., m, k) and r (..., k, n) with k = m if ``full_matrices`` else min(m, n) (a
    matrix with a NaN or infinite entry: all NaN); None without a native kernel."""
    return _native("qr", x, full_matrices=bool(full_matrices))


def svd(x: np.ndarray, compute_uv: bool = False, full_matrices: bool = False):
    """The singular values (..., k), descending, of a real stack (..., m, n), k = min(m, n),
    or with ``compute_uv`` ``(s, u, vt)``, u (..., m, m or k) and vt (..., n or k, n) as
    ``full_matrices`` says (a matrix with a NaN or infinite entry: all NaN); None without a
    native kernel. The vectors are orthonormal, but their signs need not be LAPACK's."""
    return _native("svd", x, compute_uv=bool(compute_uv), full_matrices=bool(full_matrices))


def potrf(x: np.ndarray) -> np.ndarray:
    """The lower Cholesky factor of a stack (..., n, n), reading its lower triangle; above
    the diagonal x is kept. A matrix that is not positive definite gives all NaNs."""
    native = _native("potrf", x)
    if native is not None:
        return native
    n = x.shape[-1]
    a = _to_batch_last(x)
    low = np.zeros_like(a)
    failed = np.zeros(a.shape[-1], bool)
    cplx = a.dtype.kind == "c"
    with np.errstate(invalid="ignore", divide="ignore"):
        for j in range(n):
            lj = low[j, :j]  # (j, nb): row j of L so far
            lc = np.conj(lj) if cplx else lj
            d = a[j, j].real - np.einsum("kb,kb->b", lj, lc).real if j else a[j, j].real
            failed |= d <= 0  # LAPACK's info > 0 (a NaN propagates, as OpenBLAS's does)
            djj = np.sqrt(d)
            low[j, j] = djj
            if j + 1 < n:
                col = a[j + 1:, j]
                if j:
                    col = col - np.einsum("ikb,kb->ib", low[j + 1:, :j], lc)
                low[j + 1:, j] = col / djj
    rows, cols = np.tril_indices(n)
    a[rows, cols] = low[rows, cols]
    a[:, :, failed] = np.nan
    return _from_batch_last(a, x.shape)
