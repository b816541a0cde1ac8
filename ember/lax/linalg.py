"""Linear-algebra primitives (JAX's ``lax.linalg``): ``cholesky``, ``lu``,
``lu_pivots_to_permutation``, ``qr``, ``svd``, ``eigh``, ``eig``, ``triangular_solve`` and
``tridiagonal_solve``.

Every operand is a stack of matrices: leading dimensions are batch dimensions. Eagerly each
primitive runs LAPACK: ``getrf``, ``trsm``, ``potrf``, ``gtsv``, ``geqrf``/``orgqr`` (qr) and
``syevd`` (eigh) through ``ember.lax._lapack`` (the library NumPy loaded, bound with cffi),
svd and eig through ``np.linalg``; without a usable library LU, the triangular and tridiagonal
solves fall back to NumPy code written here and the rest to ``np.linalg``. Large batches of
small real matrices run LU, Cholesky and triangular solves vectorized over the batch instead
(``ember.lax._small_batch``: a LAPACK call per 4 x 4 matrix costs more than its arithmetic),
with LAPACK's pivoting and failure conventions; from 16 such matrices, ``eigh``, ``qr`` and
``svd`` run native kernels with one matrix per vector lane (Jacobi rotations; Householder
reflections as LAPACK's), whose eigen- and singular-vector signs are theirs, not LAPACK's,
and which give NaN for every output of a matrix holding a NaN or infinity. Under jit each
lowers to a ``custom_call`` of a library target (``ember.linalg.<name>``) that the HLO
evaluator runs with the same function, so both backends give the eager answers. Batching
moves the batch dimension to the front. Failures follow LAPACK as JAX does: a non positive
definite matrix has a NaN Cholesky factor, a singular triangular solve divides by zero, a
singular LU keeps its zero pivot.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ember import core, dtypes
from ember.compiler.evaluator import register_custom_call_target
from ember.compiler.hlo import Shape
from ember.core import ShapedArray
from ember.custom_derivatives import custom_jvp
from ember.interpreters import ad
from ember.interpreters.batching import axis_size_of
from ember.lax import _lapack, _small_batch, base, batch_util
from ember.lax import elementwise as E
from ember.lax.dot import dot_general
from ember.lax.reduction import reduce_sum
from ember.lax.shape import broadcasted_iota, hlo_shape, pad, transpose
from ember.lax.slicing import slice as lax_slice

_LINALG_DTYPES = (dtypes.float32, dtypes.float64, dtypes.complex64, dtypes.complex128)
_TARGET = "ember.linalg."

# ---------------------------------------------------------------- the library mechanism


def _library_primitive(name: str, impl: Callable, abstract_eval: Callable,
                       multiple_results: bool) -> core.Primitive:
    """A primitive run by ``impl`` (NumPy) eagerly and, under jit, as the custom-call target
    ``ember.linalg.<name>``; operands carry leading batch dimensions, so vmap moves them
    to the front."""
    prim = core.MultipleResultsPrimitive(name) if multiple_results else core.Primitive(name)

    def run(*args, **params):
        avals = abstract_eval(*(ShapedArray(np.shape(a), np.asarray(a).dtype) for a in args),
                              **params)
        avals = avals if multiple_results else [avals]
        # Empty operands skip the kernel (a 1 x 1 matrix's empty taus are not a reason to).
        if any(np.size(a) == 0 for a in args):
            outs = _empty_outputs(name, avals, *args, **params)
        else:
            outs = impl(*(np.asarray(a) for a in args), **params)
            outs = outs if multiple_results else [outs]
        outs = [np.ascontiguousarray(o, dtype=a.dtype).reshape(a.shape)
                for o, a in zip(outs, avals)]
        return outs if multiple_results else outs[0]

    def compiled(*args, **params):
        # (a compiled program's operands have the shapes and dtypes it was traced for, and
        # it shapes the results: only empty operands need ``run``)
        for a in args:
            if a.size == 0:
                outs = run(*args, **params)
                return tuple(outs) if multiple_results else outs
        outs = impl(*args, **params)
        return tuple(outs) if multiple_results else outs

    prim.def_impl(run)
    prim.def_abstract_eval(abstract_eval)
    target = _TARGET + name
    register_custom_call_target(
        target, (lambda *v, **p: tuple(run(*v, **p))) if multiple_results else run, compiled)

    @prim.def_lowering
    def _lowering(ctx, *operands, **params):
        shapes = [hlo_shape(a) for a in ctx.avals_out]
        shape = Shape.tuple(shapes) if multiple_results else shapes[0]
        out = ctx.b.op("custom_call", *operands, shape=shape, call_target_name=target,
                       **params)
        if not multiple_results:
            return out
        return [ctx.b.op("get_tuple_element", out, index=i) for i in range(len(shapes))]

    @prim.def_batching
    def _batch(vals, dims, **params):
        size = axis_size_of(vals, dims)
        out = prim.bind(*(batch_util.bdim_at_front(x, d, size) for x, d in zip(vals, dims)),
                        **params)
        return out, ([0] * len(out) if multiple_results else 0)

    return prim


def _empty_outputs(name, avals, *args, **params):
    # Empty operands: zeros, with identities where a factor is an orthogonal/unit matrix.
    if name == "ormqr":  # no reflectors: Q = I
        return [np.asarray(args[2])]
    if name == "householder_product":  # no reflectors: the identity's first columns
        a = avals[0]
        return [np.broadcast_to(np.eye(*a.shape[-2:], dtype=a.dtype), a.shape)]
    outs = []
    for a in avals:
        o = np.zeros(a.shape, a.dtype)
        if a.ndim >= 2 and a.shape[-1] == a.shape[-2] and a.dtype.kind in "fc" and \
                name in ("qr", "svd", "eigh", "eig"):
            o[...] = np.eye(a.shape[-1], dtype=a.dtype)
        if name == "lu_pivots_to_permutation" or (name == "lu" and a.dtype == np.int32):
            o[...] = np.arange(a.shape[-1], dtype=np.int32)
        outs.append(o)
    return outs


def _check_matrix(prim: str, x: ShapedArray, square: bool = False, arg: str = "x") -> None:
    if x.ndim < 2:
        raise ValueError(f"{prim}: argument {arg} must have rank >= 2, got shape {x.shape}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{prim}: argument {arg} must be a batch of square matrices, got "
                         f"shape {x.shape}")
    base.check_dtype(prim, arg, x.dtype, _LINALG_DTYPES)


def _real_dtype(dt: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if dt in (np.complex64, np.float32) else np.dtype(np.float64)


def _complex_dtype(dt: np.dtype) -> np.dtype:
    return np.dtype(np.complex64) if dt in (np.complex64, np.float32) else \
        np.dtype(np.complex128)


def _flat(x: np.ndarray) -> np.ndarray:
    return x.reshape((-1,) + x.shape[-2:])


# ---------------------------------------------------------------- lax helpers for the rules


def _T(x: Any) -> Any:
    nd = core.get_aval(x).ndim
    return transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _is_complex(x: Any) -> bool:
    return dtypes.is_complex(core.get_aval(x).dtype)


def _H(x: Any) -> Any:
    return E.conj(_T(x)) if _is_complex(x) else _T(x)


def _conj(x: Any) -> Any:
    return E.conj(x) if _is_complex(x) else x


def _mm(a: Any, b: Any) -> Any:
    """Batched matrix product over the last two dimensions (same batch dimensions)."""
    nd = core.get_aval(a).ndim
    batch = tuple(range(nd - 2))
    return dot_general(a, b, (((nd - 1,), (nd - 2,)), (batch, batch)))


def _tri_mask(shape: tuple, k: int, lower: bool) -> Any:
    rows = broadcasted_iota(np.int32, shape, len(shape) - 2)
    cols = broadcasted_iota(np.int32, shape, len(shape) - 1)
    if lower:  # col <= row + k
        return E.le(cols, E.add(rows, E.full_of(shape, k, np.int32)))
    return E.ge(cols, E.add(rows, E.full_of(shape, k, np.int32)))


def _tril(x: Any, k: int = 0) -> Any:
    aval = core.get_aval(x)
    return E.select(_tri_mask(aval.shape, k, True), x, E.full_of(aval.shape, 0, aval.dtype))


def _triu(x: Any, k: int = 0) -> Any:
    aval = core.get_aval(x)
    return E.select(_tri_mask(aval.shape, k, False), x, E.full_of(aval.shape, 0, aval.dtype))


def _eye_like(shape: tuple, dtype: Any) -> Any:
    """Identity matrices of ``shape`` (the last two dims) and ``dtype``."""
    rows = broadcasted_iota(np.int32, shape, len(shape) - 2)
    cols = broadcasted_iota(np.int32, shape, len(shape) - 1)
    return E.convert_element_type(E.eq(rows, cols), dtype)


def _diagonal(x: Any) -> Any:
    aval = core.get_aval(x)
    return reduce_sum(E.mul(x, _eye_like(aval.shape, aval.dtype)), (aval.ndim - 1,))


def _diag_embed(v: Any) -> Any:
    aval = core.get_aval(v)
    shape = aval.shape + (aval.shape[-1],)
    return E.mul(_bcast_last(v, shape, -2), _eye_like(shape, aval.dtype))


def _bcast_last(v: Any, shape: tuple, at: int) -> Any:
    """``v`` (shape ``shape`` without axis ``at``) broadcast along a new axis ``at``."""
    from ember.lax.shape import broadcast_in_dim
    nd = len(shape)
    at %= nd
    return broadcast_in_dim(v, shape, tuple(i for i in range(nd) if i != at))


def _cast(x: Any, dtype: Any) -> Any:
    return x if core.get_aval(x).dtype == np.dtype(dtype) else E.convert_element_type(x, dtype)


def _scalar(x: Any, value: Any) -> Any:
    aval = core.get_aval(x)
    return E.full_of(aval.shape, value, aval.dtype)


# ---------------------------------------------------------------- cholesky


def _cholesky_impl(x):
    if _small_batch.worth_it("potrf", x):
        return _small_batch.potrf(x)
    if _lapack.available(x.dtype):
        return _lapack.potrf(x)
    try:
        return np.linalg.cholesky(x)
    except np.linalg.LinAlgError:  # per matrix: a failed factorization is all NaN (JAX's)
        flat = _flat(x)
        out = np.empty_like(flat)
        for i, m in enumerate(flat):
            try:
                out[i] = np.linalg.cholesky(m)
            except np.linalg.LinAlgError:
                out[i] = np.nan
        return out.reshape(x.shape)


def _cholesky_abstract_eval(x):
    _check_matrix("cholesky", x, square=True)
    return ShapedArray(x.shape, x.dtype)


cholesky_p = _library_primitive("cholesky", _cholesky_impl, _cholesky_abstract_eval, False)


def _cholesky_jvp(primals, tangents):
    x, = primals
    g, = tangents
    L = _tril(cholesky_p.bind(x))  # the primitive leaves x's upper triangle in place
    if type(g) is ad.Zero:
        return L, ad.Zero.from_primal_value(L)
    g = E.mul(E.add(g, _H(g)), _scalar(g, 0.5))
    # dL = L phi(L^-1 dA L^-H), phi taking the lower triangle with a halved diagonal.
    tmp = triangular_solve(L, g, left_side=False, transpose_a=True, conjugate_a=True,
                           lower=True)
    inner = triangular_solve(L, tmp, left_side=True, lower=True)
    shape = core.get_aval(inner).shape
    half = E.sub(_scalar(inner, 1), E.mul(_eye_like(shape, core.get_aval(inner).dtype),
                                          _scalar(inner, 0.5)))
    return L, _mm(L, E.mul(_tril(inner), half))


cholesky_p.def_jvp(_cholesky_jvp)


def cholesky(x: Any, *, symmetrize_input: bool = True) -> Any:
    """The lower Cholesky factor ``L`` of Hermitian positive definite matrices (``x = L L^H``).

    Only the lower triangle is read (after symmetrizing ``(x + x^H) / 2`` when
    ``symmetrize_input``); a matrix that is not positive definite gives NaNs.

    Example:
        >>> lax.linalg.cholesky(jnp.array([[4., 2.], [2., 5.]]))
        Array([[2., 0.],
               [1., 2.]], dtype=float32)
    """
    x = base.as_operand(x, "cholesky", "x")
    if symmetrize_input:
        x = symmetrize(x)
    return _tril(cholesky_p.bind(x))


def symmetrize(x: Any) -> Any:
    """``(x + x^H) / 2``, the Hermitian part of a batch of square matrices."""
    return E.div(E.add(x, _H(x)), _scalar(x, 2))


# ---------------------------------------------------------------- lu / lu_pivots_to_permutation


def _lu_impl(x):
    if _small_batch.worth_it("getrf", x):
        return list(_small_batch.getrf(x))
    if _lapack.available(x.dtype):
        return list(_lapack.getrf(x))
    # Right-looking LU with partial pivoting, as LAPACK's getrf: the pivot is the first entry
    # of largest |re| + |im| (i?amax) in the column; a zero pivot leaves the column unscaled.
    a = _flat(x).copy()
    nb, m, n = a.shape
    k = min(m, n)
    pivots = np.zeros((nb, k), np.int32)
    rows = np.arange(nb)
    for j in range(k):
        col = a[:, j:, j]
        mag = np.abs(col.real) + np.abs(col.imag) if col.dtype.kind == "c" else np.abs(col)
        p = j + np.argmax(np.where(np.isnan(mag), np.inf, mag), axis=1)
        pivots[:, j] = p
        a[rows, j], a[rows, p] = a[rows, p], a[rows, j].copy()
        piv = a[:, j, j]
        safe = np.where(piv == 0, 1, piv)
        a[:, j + 1:, j] = np.where((piv != 0)[:, None], a[:, j + 1:, j] / safe[:, None],
                                   a[:, j + 1:, j])
        a[:, j + 1:, j + 1:] -= a[:, j + 1:, j, None] * a[:, j, None, j + 1:]
    perm = _pivots_to_permutation(pivots, m)
    batch = x.shape[:-2]
    return [a.reshape(x.shape), pivots.reshape(batch + (k,)), perm.reshape(batch + (m,))]


def _pivots_to_permutation(pivots, size):
    flat = pivots.reshape(-1, pivots.shape[-1]) if pivots.ndim else pivots.reshape(1, 0)
    if flat.shape[0] <= 32:  # Python lists beat a NumPy step per pivot for small batches
        out = []
        for row in flat.tolist():
            perm = list(range(size))
            for i, p in enumerate(row):
                if 0 <= p < size:  # out-of-range pivots are ignored
                    perm[i], perm[p] = perm[p], perm[i]
            out.append(perm)
        return np.array(out, np.int32).reshape(pivots.shape[:-1] + (size,))
    perm = np.tile(np.arange(size, dtype=np.int32), (flat.shape[0], 1))
    rows = np.arange(flat.shape[0])
    for i in range(flat.shape[1]):
        p = flat[:, i]
        ok = (p >= 0) & (p < size)  # out-of-range pivots are ignored
        p = np.where(ok, p, i)
        perm[rows, i], perm[rows, p] = perm[rows, p], perm[rows, i].copy()
    return perm.reshape(pivots.shape[:-1] + (size,))


def _lu_abstract_eval(x):
    _check_matrix("lu", x)
    *batch, m, n = x.shape
    batch = tuple(batch)
    return [ShapedArray(x.shape, x.dtype), ShapedArray(batch + (min(m, n),), dtypes.int32),
            ShapedArray(batch + (m,), dtypes.int32)]


lu_p = _library_primitive("lu", _lu_impl, _lu_abstract_eval, True)


def _permute_rows(x: Any, perm: Any) -> Any:
    """``x[..., perm, :]`` (a gather with the batch dimensions as batching dimensions)."""
    from ember.lax.shape import expand_dims
    from ember.lax.slicing import GatherDimensionNumbers, GatherScatterMode, gather
    shape = core.get_aval(x).shape
    if 0 in shape:  # nothing to move (and a gather's batch slices need a size of 1)
        return x
    nb = len(shape) - 2
    batch = tuple(range(nb))
    dnums = GatherDimensionNumbers(offset_dims=(nb + 1,), collapsed_slice_dims=(nb,),
                                   start_index_map=(nb,), operand_batching_dims=batch,
                                   start_indices_batching_dims=batch)
    return gather(x, expand_dims(perm, (nb + 1,)), dnums, (1,) * (nb + 1) + (shape[-1],),
                  mode=GatherScatterMode.PROMISE_IN_BOUNDS)


def _lu_jvp(primals, tangents):
    x, = primals
    g, = tangents
    lu, pivots, perm = lu_p.bind(x)
    zeros = [ad.Zero.from_primal_value(pivots), ad.Zero.from_primal_value(perm)]
    if type(g) is ad.Zero:
        return [lu, pivots, perm], [ad.Zero.from_primal_value(lu)] + zeros
    aval = core.get_aval(x)
    *batch, m, n = aval.shape
    k = min(m, n)
    nb = len(batch)
    dt = aval.dtype
    pg = _permute_rows(g, perm)
    # L (m x m, unit lower) and U (n x n, upper, with an identity block past k).
    l_part = _tril(lax_slice(lu, (0,) * (nb + 2), tuple(batch) + (m, k)), -1)
    zero = E.full_of((), 0, dt)
    l_full = E.add(pad(l_part, zero, [(0, 0, 0)] * (nb + 1) + [(0, m - k, 0)]),
                   _eye_like(tuple(batch) + (m, m), dt))
    u_part = _triu(lax_slice(lu, (0,) * (nb + 2), tuple(batch) + (k, n)))
    u_full = pad(u_part, zero, [(0, 0, 0)] * nb + [(0, n - k, 0), (0, 0, 0)])
    if n > k:
        one_block = pad(_eye_like(tuple(batch) + (n - k, n - k), dt), zero,
                        [(0, 0, 0)] * nb + [(k, 0, 0), (k, 0, 0)])
        u_full = E.add(u_full, one_block)
    la = triangular_solve(l_full, pg, left_side=True, lower=True, unit_diagonal=True)
    lau = triangular_solve(u_full, la, left_side=False, lower=False)
    dlu = E.add(_mm(l_full, _tril(lau, -1)), _mm(_triu(lau), u_full))
    return [lu, pivots, perm], [dlu] + zeros


lu_p.def_jvp(_lu_jvp)


def _lu_pivots_abstract_eval(pivots, *, permutation_size):
    if pivots.ndim < 1:
        raise ValueError("lu_pivots_to_permutation: pivots must have rank >= 1, got a scalar")
    if pivots.dtype != dtypes.int32:
        raise TypeError(f"lu_pivots_to_permutation: pivots must have dtype int32, got "
                        f"{pivots.dtype}")
    if isinstance(permutation_size, bool) or not isinstance(permutation_size, int) or \
            permutation_size < pivots.shape[-1]:
        raise ValueError(f"lu_pivots_to_permutation: permutation_size ({permutation_size!r}) "
                         f"must be an integer >= the number of pivots ({pivots.shape[-1]})")
    return ShapedArray(pivots.shape[:-1] + (permutation_size,), dtypes.int32)


lu_pivots_to_permutation_p = _library_primitive(
    "lu_pivots_to_permutation",
    lambda p, *, permutation_size: _pivots_to_permutation(p, permutation_size),
    _lu_pivots_abstract_eval, False)
ad.defjvp_zero(lu_pivots_to_permutation_p)


def lu(x: Any) -> list[Any]:
    """LU decomposition with partial pivoting: ``(lu, pivots, permutation)``.

    ``lu`` holds the unit lower factor L below the diagonal and U on and above it;
    ``x[..., permutation, :] == L @ U``. ``pivots`` (int32) are LAPACK's row swaps.

    Example:
        >>> lu, piv, perm = lax.linalg.lu(jnp.array([[1., 2.], [3., 4.]]))
        >>> perm
        Array([1, 0], dtype=int32)
    """
    return list(lu_p.bind(base.as_operand(x, "lu", "x")))  # (a list, as JAX's)


def lu_pivots_to_permutation(pivots: Any, permutation_size: int) -> Any:
    """The permutation (int32) that LAPACK row swaps ``pivots`` apply to ``range(size)``.

    Example:
        >>> lax.linalg.lu_pivots_to_permutation(jnp.array([2, 2], jnp.int32), 3)
        Array([2, 0, 1], dtype=int32)
    """
    pivots = base.as_operand(pivots, "lu_pivots_to_permutation", "pivots")
    size = core.concrete_or_error(permutation_size, "lu_pivots_to_permutation: "
                                  "permutation_size must be a concrete integer")
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
        raise TypeError(f"lu_pivots_to_permutation: permutation_size must be an integer, got "
                        f"{permutation_size!r}")
    return lu_pivots_to_permutation_p.bind(pivots, permutation_size=int(size))


# ---------------------------------------------------------------- qr


def _qr_impl(x, *, pivoting, full_matrices, use_magma):
    small = _small_batch.qr(x, full_matrices) if _small_batch.worth_it("qr", x) else None
    if small is not None:
        return list(small)
    if not _lapack.available(x.dtype):
        q, r = np.linalg.qr(x, mode="complete" if full_matrices else "reduced")
        return [q, r]
    # geqrf, then orgqr on the reflectors (padded to m columns for a full, tall Q).
    m, n = x.shape[-2:]
    k = min(m, n)
    a, taus = _lapack.geqrf(x)
    r = np.triu(a if full_matrices else a[..., :k, :])
    if full_matrices and m > n:
        qa = np.concatenate([a, np.zeros(a.shape[:-1] + (m - n,), a.dtype)], -1)
    else:
        qa = a[..., :k]
    return [_lapack.orgqr(qa, taus), r]


def _qr_abstract_eval(x, *, pivoting, full_matrices, use_magma):
    _check_matrix("qr", x)
    if pivoting:
        raise NotImplementedError("qr: pivoting=True is not supported by ember")
    *batch, m, n = x.shape
    batch = tuple(batch)
    k = m if full_matrices else min(m, n)
    return [ShapedArray(batch + (m, k), x.dtype), ShapedArray(batch + (k, n), x.dtype)]


qr_p = _library_primitive("qr", _qr_impl, _qr_abstract_eval, True)


def _qr_jvp(primals, tangents, *, pivoting, full_matrices, use_magma):
    x, = primals
    dx, = tangents
    q, r = qr_p.bind(x, pivoting=pivoting, full_matrices=full_matrices, use_magma=use_magma)
    if type(dx) is ad.Zero:
        return [q, r], [ad.Zero.from_primal_value(q), ad.Zero.from_primal_value(r)]
    *batch, m, n = core.get_aval(x).shape
    if m < n or (full_matrices and m != n):
        raise NotImplementedError("Unimplemented case of QR decomposition derivative")
    # With C = Q^H dX R^-1: dQ = Q (Ω - C) + dX R^-1 and dR = (C - Ω) R, Ω skew-Hermitian
    # from C's strict lower triangle (its diagonal keeps C's imaginary part).
    dx_rinv = triangular_solve(r, dx)  # right side, upper
    c = _mm(_H(q), dx_rinv)
    low = _tril(c, -1)
    omega = E.sub(low, _H(low))
    if _is_complex(c):
        eye = _eye_like(core.get_aval(c).shape, core.get_aval(c).dtype)
        omega = E.add(omega, E.mul(eye, E.sub(c, _cast(E.real(c), core.get_aval(c).dtype))))
    dq = E.add(_mm(q, E.sub(omega, c)), dx_rinv)
    dr = _mm(E.sub(c, omega), r)
    return [q, r], [dq, dr]


qr_p.def_jvp(_qr_jvp)


def qr(x: Any, *, pivoting: bool = False, full_matrices: bool = True,
       use_magma: bool | None = None) -> tuple[Any, Any]:
    """QR decomposition ``x = Q R`` (Householder, LAPACK's signs).

    ``full_matrices=True`` gives ``Q`` of shape ``(..., m, m)``; otherwise ``(..., m, k)``
    with ``k = min(m, n)``. Column pivoting is not supported.

    Example:
        >>> q, r = lax.linalg.qr(jnp.array([[3., 0.], [4., 5.]]))
        >>> r
        Array([[-5., -4.],
               [ 0.,  3.]], dtype=float32)
    """
    x = base.as_operand(x, "qr", "x")
    if pivoting:
        raise NotImplementedError("qr: pivoting=True is not supported by ember")
    q, r = qr_p.bind(x, pivoting=False, full_matrices=bool(full_matrices), use_magma=use_magma)
    return q, r


# ---------------------------------------------------------------- svd


def _subset(subset_by_index, k):
    if subset_by_index is None:
        return 0, k
    lo, hi = (int(i) for i in subset_by_index)
    return lo, hi


def _nan_for_nonfinite(x, compute) -> list:
    """``compute(x)`` (a list of arrays with x's batch dims first) where a matrix of ``x``
    with a NaN or inf gets all-NaN outputs, as JAX gives (NumPy raises for it): it is
    replaced by zeros for the call."""
    bad = ~np.isfinite(x).all(axis=(-2, -1))
    if not bad.any():
        return compute(x)
    outs = compute(np.where(bad[..., None, None], np.zeros((), x.dtype), x))
    for out in outs:
        out[bad] = np.nan
    return outs


def _numpy_svd(x, compute_uv: bool, full_matrices: bool) -> list:
    """``[s]`` or ``[s, u, vt]`` by NumPy (without the LAPACK binding)."""
    if not compute_uv:
        return _nan_for_nonfinite(x, lambda x: [np.linalg.svd(x, compute_uv=False)])

    def uv(x):
        u, s, vt = np.linalg.svd(x, full_matrices=full_matrices)
        return [s, u, vt]
    return _nan_for_nonfinite(x, uv)


@_lapack.threads_kernel
def _svd_impl(x, *, full_matrices, compute_uv, subset_by_index, algorithm):
    k = min(x.shape[-2:])
    lo, hi = _subset(subset_by_index, k)
    small = _small_batch.svd(x, compute_uv, full_matrices) \
        if _small_batch.worth_it("svd", x) else None
    if small is None and x.size and _lapack.available(x.dtype):
        small = _lapack.gesdd(x, compute_uv, full_matrices)  # (LAPACK's signs: JAX's)
        small = small[0] if not compute_uv else small
    if not compute_uv:
        s = _numpy_svd(x, False, False)[0] if small is None else small
        return [s[..., lo:hi]]
    if small is not None:  # (the small-batch kernel's signs are Jacobi's, not LAPACK's)
        s, u, vt = small
    else:
        s, u, vt = _numpy_svd(x, True, full_matrices)
    if subset_by_index is not None:
        u, s, vt = u[..., lo:hi], s[..., lo:hi], vt[..., lo:hi, :]
    return [s, u, vt]


def _svd_abstract_eval(x, *, full_matrices, compute_uv, subset_by_index, algorithm):
    _check_matrix("svd", x)
    *batch, m, n = x.shape
    batch = tuple(batch)
    k = min(m, n)
    lo, hi = _subset(subset_by_index, k)
    if not 0 <= lo <= hi <= k:
        raise ValueError(f"svd: subset_by_index {subset_by_index!r} must satisfy "
                         f"0 <= start <= end <= {k}")
    if subset_by_index is not None and full_matrices and (lo, hi) != (0, k):
        raise ValueError("svd: full_matrices and subset_by_index cannot both be set")
    s = ShapedArray(batch + (hi - lo,), _real_dtype(x.dtype))
    if not compute_uv:
        return [s]
    ku, kv = (m, n) if full_matrices else (hi - lo, hi - lo)
    return [s, ShapedArray(batch + (m, ku), x.dtype), ShapedArray(batch + (kv, n), x.dtype)]


svd_p = _library_primitive("svd", _svd_impl, _svd_abstract_eval, True)


def _svd_jvp(primals, tangents, *, full_matrices, compute_uv, subset_by_index, algorithm):
    a, = primals
    da, = tangents
    *batch, m, n = core.get_aval(a).shape
    if compute_uv and full_matrices and m != n:
        raise NotImplementedError(
            "Singular value decomposition JVP not implemented for full matrices")
    s, u, vt = svd_p.bind(a, full_matrices=False, compute_uv=True,
                          subset_by_index=subset_by_index, algorithm=algorithm)
    if type(da) is ad.Zero:
        outs = [s, u, vt] if compute_uv else [s]
        return outs, [ad.Zero.from_primal_value(o) for o in outs]
    dt = core.get_aval(a).dtype
    ut, v = _H(u), _H(vt)
    ds_mat = _mm(_mm(ut, da), v)
    ds = _diagonal(E.real(ds_mat) if _is_complex(ds_mat) else ds_mat)
    if not compute_uv:
        return [s], [ds]
    kk = core.get_aval(s).shape[-1]
    sq = tuple(batch) + (kk, kk)
    s_row = _bcast_last(s, sq, -2)  # s_j at [i, j]
    s_col = _T(s_row)               # s_i at [i, j]
    eye = _eye_like(sq, core.get_aval(s).dtype)
    diffs = E.mul(E.add(s_row, s_col), E.sub(s_row, s_col))
    f = E.sub(E.div(_scalar(eye, 1), E.add(diffs, eye)), eye)
    s_row_c, s_col_c = _cast(s_row, dt), _cast(s_col, dt)
    dss = E.mul(s_row_c, ds_mat)
    sds = E.mul(s_col_c, ds_mat)
    s_zero = E.convert_element_type(E.eq(s, _scalar(s, 0)), core.get_aval(s).dtype)
    s_inv = E.sub(E.div(_scalar(s, 1), E.add(s, s_zero)), s_zero)
    du_diag = E.mul(E.mul(E.sub(ds_mat, _H(ds_mat)), _scalar(ds_mat, 0.5)),
                    _cast(_diag_embed(s_inv), dt))
    fc = _cast(f, dt)
    du = _mm(u, E.add(E.mul(fc, E.add(dss, _H(dss))), du_diag))
    dv = _mm(v, E.mul(fc, E.add(sds, _H(sds))))
    if m > n:
        dav = _mm(da, v)
        du = E.add(du, E.div(E.sub(dav, _mm(u, _mm(ut, dav))),
                             _bcast_last(_cast(s, dt), core.get_aval(dav).shape, -2)))
    if n > m:
        dahu = _mm(_H(da), u)
        dv = E.add(dv, E.div(E.sub(dahu, _mm(v, _mm(vt, dahu))),
                             _bcast_last(_cast(s, dt), core.get_aval(dahu).shape, -2)))
    return [s, u, vt], [ds, du, _H(dv)]


svd_p.def_jvp(_svd_jvp)


def svd(x: Any, *, full_matrices: bool = True, compute_uv: bool = True,
        subset_by_index: tuple[int, int] | None = None, algorithm: Any = None) -> Any:
    """Singular value decomposition ``x = U diag(s) V^H``: ``(u, s, vh)``, or ``s`` alone
    when ``compute_uv=False``. Singular values are real and descending.

    Example:
        >>> lax.linalg.svd(jnp.array([[3., 0.], [0., 4.]]), compute_uv=False)
        Array([4., 3.], dtype=float32)
    """
    x = base.as_operand(x, "svd", "x")
    if subset_by_index is not None:
        subset_by_index = tuple(int(i) for i in subset_by_index)
    out = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv),
                     subset_by_index=subset_by_index, algorithm=algorithm)
    if not compute_uv:
        return out[0]
    s, u, vt = out
    return u, s, vt


# ---------------------------------------------------------------- eigh


@_lapack.threads_kernel
def _eigh_impl(x, *, lower, sort_eigenvalues, subset_by_index, algorithm):
    small = _small_batch.syevd(x, lower) if _small_batch.worth_it("syevd", x) else None
    if small is not None:
        v, w = small
    elif _lapack.available(x.dtype):
        v, w = _lapack.syevd(x, lower=lower)
    else:
        w, v = np.linalg.eigh(x, UPLO="L" if lower else "U")
    if subset_by_index is not None:
        lo, hi = _subset(subset_by_index, x.shape[-1])
        w, v = w[..., lo:hi], v[..., lo:hi]
    return [v, w]


def _eigh_abstract_eval(x, *, lower, sort_eigenvalues, subset_by_index, algorithm):
    _check_matrix("eigh", x, square=True)
    n = x.shape[-1]
    lo, hi = _subset(subset_by_index, n)
    if not 0 <= lo <= hi <= n:
        raise ValueError(f"eigh: subset_by_index {subset_by_index!r} must satisfy "
                         f"0 <= start <= end <= {n}")
    batch = x.shape[:-2]
    return [ShapedArray(batch + (n, hi - lo), x.dtype),
            ShapedArray(batch + (hi - lo,), _real_dtype(x.dtype))]


eigh_p = _library_primitive("eigh", _eigh_impl, _eigh_abstract_eval, True)


def _eigh_jvp(primals, tangents, *, lower, sort_eigenvalues, subset_by_index, algorithm):
    x, = primals
    g, = tangents
    n = core.get_aval(x).shape[-1]
    if subset_by_index is not None and tuple(subset_by_index) != (0, n):
        raise NotImplementedError("Derivatives not defined for partial eigen decomposition.")
    v, w = eigh_p.bind(x, lower=lower, sort_eigenvalues=sort_eigenvalues,
                       subset_by_index=subset_by_index, algorithm=algorithm)
    if type(g) is ad.Zero:
        return [v, w], [ad.Zero.from_primal_value(v), ad.Zero.from_primal_value(w)]
    dt = core.get_aval(x).dtype
    # dw = diag(V^H dA V); dV = V (F * V^H dA V), F[i, j] = 1 / (w_j - w_i) off the diagonal.
    vdv = _mm(_mm(_H(v), g), v)
    sq = core.get_aval(vdv).shape
    w_row = _bcast_last(w, sq, -2)
    eye = _eye_like(sq, core.get_aval(w).dtype)
    f = E.sub(E.div(_scalar(eye, 1), E.add(eye, E.sub(w_row, _T(w_row)))), eye)
    dv = _mm(v, E.mul(_cast(f, dt), vdv))
    dw = _diagonal(E.real(vdv) if _is_complex(vdv) else vdv)
    return [v, w], [dv, dw]


eigh_p.def_jvp(_eigh_jvp)


def eigh(x: Any, *, lower: bool = True, symmetrize_input: bool = True,
         sort_eigenvalues: bool = True, subset_by_index: tuple[int, int] | None = None,
         implementation: Any = None) -> tuple[Any, Any]:
    """Eigendecomposition of Hermitian matrices: ``(v, w)`` with ``x v = v diag(w)``,
    eigenvalues ``w`` real and ascending, eigenvectors in the columns of ``v``.

    Example:
        >>> v, w = lax.linalg.eigh(jnp.array([[2., 0.], [0., 1.]]))
        >>> w
        Array([1., 2.], dtype=float32)
    """
    x = base.as_operand(x, "eigh", "x")
    if symmetrize_input:
        x = symmetrize(x)
    if subset_by_index is not None:
        subset_by_index = tuple(int(i) for i in subset_by_index)
    v, w = eigh_p.bind(x, lower=bool(lower), sort_eigenvalues=bool(sort_eigenvalues),
                       subset_by_index=subset_by_index, algorithm=None)
    return v, w


# ---------------------------------------------------------------- eig


def _normalize_columns(v):
    # LAPACK geev's convention: unit 2-norm, the largest component real and positive.
    v = v / np.linalg.norm(v, axis=-2, keepdims=True)
    idx = np.argmax(np.abs(v), axis=-2)[..., None, :]
    big = np.take_along_axis(v, idx, axis=-2)
    return v * (np.conj(big) / np.abs(big))


@_lapack.threads_kernel
def _eig_impl(x, *, compute_left_eigenvectors, compute_right_eigenvectors,
              enable_eigvec_derivs, implementation):
    if not (compute_left_eigenvectors or compute_right_eigenvectors):
        # (eigenvalues alone: LAPACK skips the eigenvectors' back-transformation, 3x faster
        # for a 64 x 64 float32 matrix; in x's own precision through the binding, another
        # ~1.5x for float32, whose eigenvalues NumPy computes in float64)
        if _lapack.available(x.dtype) and x.shape[-1] > 0 and x.size:
            return [_lapack.geev_values(x).astype(_complex_dtype(x.dtype), copy=False)]
        return _nan_for_nonfinite(x, lambda x: [np.linalg.eigvals(x).astype(
            _complex_dtype(x.dtype))])
    return _nan_for_nonfinite(x, lambda x: _numpy_eig(x, compute_left_eigenvectors,
                                                      compute_right_eigenvectors))


def _numpy_eig(x, left: bool, right: bool) -> list:
    w, vr = np.linalg.eig(x)
    cdt = _complex_dtype(x.dtype)
    out = [w.astype(cdt)]
    if left:
        # Left eigenvectors are the columns of inv(VR)^H, rescaled like LAPACK's.
        out.append(_normalize_columns(np.conj(np.swapaxes(np.linalg.inv(vr), -1, -2)))
                   .astype(cdt))
    if right:
        out.append(vr.astype(cdt))
    return out


def _eig_abstract_eval(x, *, compute_left_eigenvectors, compute_right_eigenvectors,
                       enable_eigvec_derivs, implementation):
    _check_matrix("eig", x, square=True)
    cdt = _complex_dtype(x.dtype)
    out = [ShapedArray(x.shape[:-1], cdt)]
    out += [ShapedArray(x.shape, cdt)] * (int(bool(compute_left_eigenvectors)) +
                                          int(bool(compute_right_eigenvectors)))
    return out


eig_p = _library_primitive("eig", _eig_impl, _eig_abstract_eval, True)


def _eig_jvp(primals, tangents, *, compute_left_eigenvectors, compute_right_eigenvectors,
             enable_eigvec_derivs, implementation):
    if compute_left_eigenvectors or compute_right_eigenvectors:
        raise NotImplementedError(
            "The derivatives of eigenvectors are not implemented, only eigenvalues. See "
            "https://github.com/jax-ml/jax/issues/2748 for discussion.")
    x, = primals
    g, = tangents
    w, v = eig_p.bind(x, compute_left_eigenvectors=False, compute_right_eigenvectors=True,
                      enable_eigvec_derivs=False, implementation=implementation)
    if type(g) is ad.Zero:
        return [w], [ad.Zero.from_primal_value(w)]
    # dw = diag(V^-1 dA V).
    # (the plain solve: inside a derivative rule, lu_solve_matrix's own rule adds nothing)
    lu_, _, perm = lu_p.bind(v)
    dw = _diagonal(_mm(_solve_factored(lu_, perm, _cast(g, core.get_aval(v).dtype)), v))
    return [w], [dw]


eig_p.def_jvp(_eig_jvp)


def eig(x: Any, *, compute_left_eigenvectors: bool = True,
        compute_right_eigenvectors: bool = True, enable_eigvec_derivs: bool = False,
        implementation: Any = None, use_magma: bool | None = None) -> list[Any]:
    """Eigendecomposition of general square matrices: ``[w, vl, vr]`` (complex), with the
    eigenvector outputs present as requested (LAPACK's normalization: unit columns whose
    largest component is real).

    Example:
        >>> w, = lax.linalg.eig(jnp.array([[2., 0.], [0., 3.]]),
        ...                     compute_left_eigenvectors=False,
        ...                     compute_right_eigenvectors=False)
        >>> w
        Array([2.+0.j, 3.+0.j], dtype=complex64)
    """
    x = base.as_operand(x, "eig", "x")
    return list(eig_p.bind(x, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                           compute_right_eigenvectors=bool(compute_right_eigenvectors),
                           enable_eigvec_derivs=bool(enable_eigvec_derivs),
                           implementation=None))


# ---------------------------------------------------------------- triangular_solve


def _effective_triangle(a, lower, transpose_a, conjugate_a, unit_diagonal):
    """op(tri(a)) as an explicit matrix, and whether it is lower triangular."""
    t = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        n = a.shape[-1]
        t = t.copy()
        t[..., np.arange(n), np.arange(n)] = 1
    if conjugate_a:
        t = np.conj(t)
    if transpose_a:
        t = np.swapaxes(t, -1, -2)
    return t, lower != bool(transpose_a)


def _substitute(t, b, lower):
    """Solves t x = b by substitution (as LAPACK's trsm: a zero pivot gives inf/NaN)."""
    t, b = _flat(t), _flat(b)
    m = t.shape[-1]
    x = np.zeros(np.broadcast_shapes(b.shape, (t.shape[0], m, b.shape[-1])),
                 np.result_type(t, b))
    order = range(m) if lower else range(m - 1, -1, -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in order:
            lo, hi = (0, i) if lower else (i + 1, m)
            acc = b[:, i] - np.einsum("bk,bkn->bn", t[:, i, lo:hi], x[:, lo:hi])
            x[:, i] = acc / t[:, i, i, None]
    return x


def _triangular_solve_impl(a, b, *, left_side, lower, transpose_a, conjugate_a,
                           unit_diagonal):
    params = dict(left_side=left_side, lower=lower, transpose_a=transpose_a,
                  conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
    if _small_batch.worth_it("trsm", a, b.shape[-1] if left_side else b.shape[-2]):
        return _small_batch.trsm(a, b, **params)
    if _lapack.available(b.dtype):
        return _lapack.trsm(a, b, left_side=left_side, lower=lower, transpose_a=transpose_a,
                            conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
    t, low = _effective_triangle(a, lower, transpose_a, conjugate_a, unit_diagonal)
    if left_side:
        return _substitute(t, b, low).reshape(b.shape)
    # x t = b  <=>  t^T x^T = b^T
    xt = _substitute(np.swapaxes(t, -1, -2), np.swapaxes(b, -1, -2), not low)
    return np.swapaxes(xt.reshape(b.shape[:-2] + (b.shape[-1], b.shape[-2])), -1, -2)


def _triangular_solve_abstract_eval(a, b, *, left_side, lower, transpose_a, conjugate_a,
                                    unit_diagonal):
    _check_matrix("triangular_solve", a, square=True, arg="a")
    _check_matrix("triangular_solve", b, arg="b")
    if a.dtype != b.dtype:
        raise TypeError(f"triangular_solve requires a and b to have the same dtype, got "
                        f"{a.dtype} and {b.dtype}")
    if a.shape[:-2] != b.shape[:-2]:
        raise TypeError(f"triangular_solve: a and b must have equal batch dimensions, got "
                        f"a of shape {a.shape} and b of shape {b.shape}")
    common = b.shape[-2] if left_side else b.shape[-1]
    if common != a.shape[-1]:
        side = "b.shape[-2]" if left_side else "b.shape[-1]"
        raise TypeError(f"triangular_solve: {side} ({common}) must equal a's size "
                        f"{a.shape[-1]} (left_side={bool(left_side)})")
    return ShapedArray(b.shape, b.dtype)


triangular_solve_p = _library_primitive("triangular_solve", _triangular_solve_impl,
                                        _triangular_solve_abstract_eval, False)


def _triangular_solve_jvp(primals, tangents, *, left_side, lower, transpose_a, conjugate_a,
                          unit_diagonal):
    a, b = primals
    ga, gb = tangents
    params = dict(left_side=left_side, lower=lower, transpose_a=transpose_a,
                  conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
    x = triangular_solve_p.bind(a, b, **params)
    out = None
    if type(gb) is not ad.Zero:
        out = triangular_solve_p.bind(a, gb, **params)
    if type(ga) is not ad.Zero:
        # op(A) X = B  =>  op(A) dX = -op(dA) X (and X op(A) = B likewise on the right).
        ga = _tril(ga, -1 if unit_diagonal else 0) if lower else \
            _triu(ga, 1 if unit_diagonal else 0)
        ga = E.neg(ga)
        if conjugate_a:
            ga = _conj(ga)
        if transpose_a:
            ga = _T(ga)
        rhs = _mm(ga, x) if left_side else _mm(x, ga)
        term = triangular_solve_p.bind(a, rhs, **params)
        out = term if out is None else E.add(out, term)
    return x, (ad.Zero.from_primal_value(x) if out is None else out)


def _triangular_solve_transpose(ct, a, b, *, left_side, lower, transpose_a, conjugate_a,
                                unit_diagonal):
    if ad.is_undefined_primal(a):
        raise ValueError("triangular_solve: can only transpose with respect to b")
    if type(ct) is ad.Zero:
        return [None, ad.Zero(b.aval)]
    ct_b = triangular_solve_p.bind(a, ct, left_side=left_side, lower=lower,
                                   transpose_a=not transpose_a, conjugate_a=conjugate_a,
                                   unit_diagonal=unit_diagonal)
    return [None, ct_b]


triangular_solve_p.def_jvp(_triangular_solve_jvp)
triangular_solve_p.def_transpose(_triangular_solve_transpose)


def triangular_solve(a: Any, b: Any, *, left_side: bool = False, lower: bool = False,
                     transpose_a: bool = False, conjugate_a: bool = False,
                     unit_diagonal: bool = False) -> Any:
    """Solves ``op(a) @ x = b`` (``left_side``) or ``x @ op(a) = b`` for triangular ``a``.

    Only the ``lower`` (or upper) triangle of ``a`` is read; ``op`` transposes and/or
    conjugates it as asked; ``unit_diagonal`` assumes ones on the diagonal. ``b`` may be a
    batch of vectors (one rank less than ``a``).

    Example:
        >>> a = jnp.array([[2., 0.], [1., 1.]])
        >>> lax.linalg.triangular_solve(a, jnp.array([2., 3.]), left_side=True, lower=True)
        Array([1., 2.], dtype=float32)
    """
    a = base.as_operand(a, "triangular_solve", "a")
    b = base.as_operand(b, "triangular_solve", "b")
    conjugate_a = bool(conjugate_a) and _is_complex(a)
    singleton = np.ndim(b) == np.ndim(a) - 1
    if singleton:
        from ember.lax.shape import expand_dims
        b = expand_dims(b, (np.ndim(b) if left_side else np.ndim(b) - 1,))
    out = triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower),
                                  transpose_a=bool(transpose_a), conjugate_a=conjugate_a,
                                  unit_diagonal=bool(unit_diagonal))
    if singleton:
        from ember.lax.shape import squeeze
        nd = core.get_aval(out).ndim
        out = squeeze(out, (nd - 1,) if left_side else (nd - 2,))
    return out


def _solve_factored(lu_: Any, perm: Any, b: Any) -> Any:
    """``a^-1 b`` from ``lu(a)``'s packed factors and row permutation."""
    y = triangular_solve(lu_, _permute_rows(b, perm), left_side=True, lower=True,
                         unit_diagonal=True)
    return triangular_solve(lu_, y, left_side=True, lower=False)


@custom_jvp
def lu_solve_matrix(a: Any, b: Any) -> Any:
    """``a^-1 b`` for square ``a`` and matrices ``b`` with a's batch dims (via ``lu``).

    Differentiated through the equation, not through the factorization: ``a x = b`` gives
    ``a dx = db - da x``, a second solve with the same factors (so reverse mode solves the
    transposed system once and takes ``-ct_b x^T`` for ``a``)."""
    lu_, _, perm = lu_p.bind(a)
    return _solve_factored(lu_, perm, b)


@lu_solve_matrix.defjvp
def _lu_solve_matrix_jvp(primals, tangents):
    a, b = primals
    da, db = tangents
    lu_, _, perm = lu_p.bind(a)
    x = _solve_factored(lu_, perm, b)
    return x, _solve_factored(lu_, perm, E.sub(db, _mm(da, x)))


# ---------------------------------------------------------------- tridiagonal_solve


def _tridiagonal_solve_impl(dl, d, du, b, *, perturb_singular):
    if _lapack.available(b.dtype):
        return _lapack.gtsv(dl, d, du, b)
    m = d.shape[-1]
    a = np.zeros(d.shape + (m,), d.dtype)
    i = np.arange(m)
    a[..., i, i] = d
    a[..., i[1:], i[:-1]] = dl[..., 1:]
    a[..., i[:-1], i[1:]] = du[..., :-1]
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:  # singular: NaNs, as LAPACK's gtsv leaves them
        return np.full(b.shape, np.nan, b.dtype)


def _tridiagonal_solve_abstract_eval(dl, d, du, b, *, perturb_singular):
    for name, x in (("dl", dl), ("d", d), ("du", du)):
        if x.ndim < 1 or x.shape != d.shape:
            raise ValueError(f"tridiagonal_solve: dl, d and du must have the same shape "
                             f"(rank >= 1), got {dl.shape}, {d.shape}, {du.shape}")
        base.check_dtype("tridiagonal_solve", name, x.dtype, _LINALG_DTYPES)
    _check_matrix("tridiagonal_solve", b, arg="b")
    if b.shape[:-1] != d.shape:
        raise ValueError(f"tridiagonal_solve: b must have shape {d.shape} + (n,), got "
                         f"{b.shape}")
    if len({dl.dtype, d.dtype, du.dtype, b.dtype}) != 1:
        raise TypeError("tridiagonal_solve: dl, d, du and b must have the same dtype")
    return ShapedArray(b.shape, b.dtype)


tridiagonal_solve_p = _library_primitive("tridiagonal_solve", _tridiagonal_solve_impl,
                                         _tridiagonal_solve_abstract_eval, False)


def _tridiagonal_solve_jvp(primals, tangents, *, perturb_singular):
    dl, d, du, b = primals
    x = tridiagonal_solve_p.bind(dl, d, du, b, perturb_singular=perturb_singular)
    out = None
    tb = tangents[3]
    if type(tb) is not ad.Zero:
        out = tridiagonal_solve_p.bind(dl, d, du, tb, perturb_singular=perturb_singular)
    if any(type(t) is not ad.Zero for t in tangents[:3]):
        # A X = B  =>  A dX = -dA X, with dA X computed from the three diagonals.
        aval = core.get_aval(x)
        m = aval.shape[-2]
        nb = aval.ndim - 2
        tdl, td, tdu = (E.instantiate(t) if type(t) is not ad.Zero else
                        E.full_of(core.get_aval(p).shape, 0, core.get_aval(p).dtype)
                        for t, p in zip(tangents[:3], primals[:3]))
        col = aval.shape

        def diag_times(v, shift):
            # v[..., i] * x[..., i + shift, :] (zero past the ends)
            vb = _bcast_last(v, col, -1)
            zero = E.full_of((), 0, aval.dtype)
            if shift == 0:
                xs = x
            elif shift > 0:
                xs = pad(lax_slice(x, (0,) * nb + (1, 0), aval.shape), zero,
                         [(0, 0, 0)] * nb + [(0, 1, 0), (0, 0, 0)])
            else:
                xs = pad(lax_slice(x, (0,) * (nb + 2), aval.shape[:-2] + (m - 1, col[-1])),
                         zero, [(0, 0, 0)] * nb + [(1, 0, 0), (0, 0, 0)])
            return E.mul(vb, xs)

        dax = E.add(E.add(diag_times(td, 0), diag_times(tdl, -1)), diag_times(tdu, 1))
        term = E.neg(tridiagonal_solve_p.bind(dl, d, du, dax,
                                              perturb_singular=perturb_singular))
        out = term if out is None else E.add(out, term)
    return x, (ad.Zero.from_primal_value(x) if out is None else out)


def _tridiagonal_solve_transpose(ct, dl, d, du, b, *, perturb_singular):
    if any(ad.is_undefined_primal(v) for v in (dl, d, du)):
        raise ValueError("tridiagonal_solve: can only transpose with respect to b")
    if type(ct) is ad.Zero:
        return [None, None, None, ad.Zero(b.aval)]
    # A^T has sub-diagonal du shifted down by one and super-diagonal dl shifted up by one.
    aval = core.get_aval(d)
    nb = aval.ndim - 1
    m = aval.shape[-1]
    zero = E.full_of((), 0, aval.dtype)
    dl_t = pad(lax_slice(du, (0,) * (nb + 1), aval.shape[:-1] + (m - 1,)), zero,
               [(0, 0, 0)] * nb + [(1, 0, 0)])
    du_t = pad(lax_slice(dl, (0,) * nb + (1,), aval.shape), zero,
               [(0, 0, 0)] * nb + [(0, 1, 0)])
    return [None, None, None, tridiagonal_solve_p.bind(dl_t, d, du_t, ct,
                                                       perturb_singular=perturb_singular)]


tridiagonal_solve_p.def_jvp(_tridiagonal_solve_jvp)
tridiagonal_solve_p.def_transpose(_tridiagonal_solve_transpose)


def tridiagonal_solve(dl: Any, d: Any, du: Any, b: Any, *,
                      perturb_singular: bool = False) -> Any:
    """Solves ``A x = b`` for tridiagonal ``A`` given by its diagonals: ``d`` the diagonal,
    ``dl`` the sub-diagonal (``dl[..., 0]`` unused) and ``du`` the super-diagonal
    (``du[..., -1]`` unused); ``b`` has shape ``d.shape + (k,)``.

    Example:
        >>> lax.linalg.tridiagonal_solve(jnp.array([0., 1.]), jnp.array([2., 2.]),
        ...                              jnp.array([1., 0.]), jnp.array([[3.], [3.]]))
        Array([[1.],
               [1.]], dtype=float32)
    """
    args = [base.as_operand(v, "tridiagonal_solve", n)
            for v, n in ((dl, "dl"), (d, "d"), (du, "du"), (b, "b"))]
    return tridiagonal_solve_p.bind(*args, perturb_singular=bool(perturb_singular))


__all__ = [
    "cholesky", "lu", "lu_pivots_to_permutation", "qr", "svd", "eigh", "eig",
    "triangular_solve", "tridiagonal_solve", "symmetrize",
    "cholesky_p", "lu_p", "lu_pivots_to_permutation_p", "qr_p", "svd_p", "eigh_p", "eig_p",
    "triangular_solve_p", "tridiagonal_solve_p",
]

# The rest of JAX's lax.linalg (Schur, Hessenberg, Householder products, ...), re-exported.
from ember.lax.linalg_decomp import *  # noqa: E402, F403
from ember.lax.linalg_decomp import __all__ as _decomp_all  # noqa: E402

__all__ += _decomp_all
