"""More of JAX's ``lax.linalg``: ``hessenberg``, ``householder_product``, ``ormqr``,
``tridiagonal``, ``schur``, ``geqrf`` (QR in LAPACK's compact form), ``symmetric_product``,
``cholesky_update``, ``qdwh`` and the implementation enums.

The decompositions are library primitives like those of ``ember.lax.linalg`` (LAPACK through
``ember.lax._lapack`` eagerly, or the NumPy kernels of ``ember.lax._linalg_kernels`` when no
LAPACK library is bound; ``custom_call`` targets under jit, batching by
moving the batch dimension to the front). As in JAX, the LAPACK-style reductions have no
derivative rules; ``symmetric_product`` and ``qdwh`` are differentiable.
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from ember import core, dtypes
from ember.core import ShapedArray
from ember.interpreters import ad
from ember.interpreters import partial_eval as pe
from ember.interpreters.pjit import _pjit_lowering
from ember.lax import _lapack, _small_batch, base
from ember.lax import _linalg_kernels as K
from ember.lax import elementwise as E
from ember.lax.linalg import (
    _H,
    _LINALG_DTYPES,
    _T,
    _check_matrix,
    _eye_like,
    _library_primitive,
    _mm,
    _real_dtype,
    _scalar,
    _tril,
    _triu,
    cholesky,
    qr,
    qr_p,
    triangular_solve,
)
from ember.lax.shape import pad
from ember.lax.slicing import slice as lax_slice

_FLOATS = (dtypes.float32, dtypes.float64)


class EigImplementation(enum.Enum):
    """Which eigendecomposition routine ``eig`` uses (ember always uses LAPACK's, via NumPy)."""
    CUSOLVER = "cusolver"
    MAGMA = "magma"
    LAPACK = "lapack"


class EighImplementation(enum.Enum):
    """Which algorithm ``eigh`` uses (ember always uses LAPACK's, via NumPy)."""
    QR = "qr"
    JACOBI = "jacobi"
    QDWH = "qdwh"


class SvdAlgorithm(enum.Enum):
    """Which algorithm ``svd`` uses (ember always uses LAPACK's, via NumPy)."""
    DEFAULT = "default"
    QR = "QR"
    JACOBI = "Jacobi"
    POLAR = "polar"
    DIVIDE_AND_CONQUER = "divide_and_conquer"


def _per_matrix(fn, *arrays, **kw):
    """Runs ``fn`` on each matrix of a batch; stacks each output back to the batch shape."""
    batch = arrays[0].shape[:-2]
    flat = [a.reshape((-1,) + a.shape[len(batch):]) for a in arrays]
    outs = [fn(*args, **kw) for args in zip(*flat)]
    outs = [o if isinstance(o, tuple) else (o,) for o in outs]
    return [np.stack(col).reshape(batch + col[0].shape) for col in zip(*outs)]


def _kernel(lapack_fn, numpy_fn, **kw):
    """An impl running LAPACK (one call per matrix) when bound, else the NumPy kernel
    ``numpy_fn`` matrix by matrix; both return a list of outputs."""
    def impl(x, *rest):
        if _lapack.available(x.dtype):
            out = lapack_fn(x, *rest, **kw)
            return list(out) if isinstance(out, (tuple, list)) else [out]
        return _per_matrix(numpy_fn, x, *rest, **kw)
    return impl


def _same_batch(prim, *operands):
    """``operands``: (aval, core rank) pairs whose leading (batch) dimensions must agree."""
    if len({a.shape[:a.ndim - r] for a, r in operands}) != 1:
        raise ValueError(f"{prim}: the batch dimensions of the operands must agree, got "
                         f"shapes {[a.shape for a, _ in operands]}")


def _same_dtype(prim, *avals):
    if len({a.dtype for a in avals}) != 1:
        raise TypeError(f"{prim} requires arguments to have the same dtypes, got "
                        f"{', '.join(str(a.dtype) for a in avals)}")


# ---------------------------------------------------------------- geqrf / hessenberg


def _geqrf_abstract_eval(x):
    _check_matrix("geqrf", x)
    return [ShapedArray(x.shape, x.dtype),
            ShapedArray(x.shape[:-2] + (min(x.shape[-2:]),), x.dtype)]


geqrf_p = _library_primitive("geqrf", _kernel(_lapack.geqrf, K.geqrf),
                             _geqrf_abstract_eval, True)


def geqrf(a: Any) -> tuple[Any, Any]:
    """QR decomposition in LAPACK's compact form: ``(a, taus)``, R on and above the
    diagonal, the Householder reflectors below it, their scalar factors in ``taus``.

    Example:
        >>> r, taus = lax.linalg.geqrf(jnp.array([[3., 0.], [4., 5.]]))
        >>> r[0, 0]
        Array(-5., dtype=float32)
    """
    return tuple(geqrf_p.bind(base.as_operand(a, "geqrf", "a")))


def _hessenberg_abstract_eval(x):
    _check_matrix("hessenberg", x, square=True)
    return [ShapedArray(x.shape, x.dtype),
            ShapedArray(x.shape[:-2] + (max(x.shape[-1] - 1, 0),), x.dtype)]


hessenberg_p = _library_primitive("hessenberg", _kernel(_lapack.gehrd, K.gehrd),
                                  _hessenberg_abstract_eval, True)


def hessenberg(a: Any) -> tuple[Any, Any]:
    """Reduces square matrices to upper Hessenberg form (LAPACK's ``gehrd``): ``(a, taus)``
    with the Hessenberg matrix on and above the first subdiagonal of ``a`` and the
    Householder reflectors below it.

    Example:
        >>> h, taus = lax.linalg.hessenberg(jnp.eye(3))
        >>> taus
        Array([0., 0.], dtype=float32)
    """
    return tuple(hessenberg_p.bind(base.as_operand(a, "hessenberg", "a")))


# ---------------------------------------------------------------- householder_product / ormqr


def _householder_product_abstract_eval(a, taus):
    _check_matrix("householder_product", a)
    base.check_dtype("householder_product", "taus", taus.dtype, _LINALG_DTYPES)
    _same_dtype("householder_product", a, taus)
    m, n = a.shape[-2:]
    if m < n:
        raise ValueError(f"The first argument to householder_product must have at least as "
                         f"many rows as columns, got shape {a.shape}")
    if taus.ndim < 1 or taus.shape[-1] > min(m, n):
        raise ValueError("The second argument to householder_product must not have more "
                         "rows than the minimum of the first argument's rows and columns.")
    _same_batch("householder_product", (a, 2), (taus, 1))
    return ShapedArray(a.shape, a.dtype)


householder_product_p = _library_primitive(
    "householder_product",
    lambda a, t: _kernel(_lapack.orgqr, K.householder_product)(a, t)[0],
    _householder_product_abstract_eval, False)


def householder_product(a: Any, taus: Any) -> Any:
    """The product of elementary Householder reflectors (LAPACK's ``orgqr``/``ungqr``): the
    orthonormal columns ``Q`` (shape of ``a``) from reflectors stored below the diagonal.

    Example:
        >>> a = jnp.array([[1., 2.], [3., 4.], [5., 6.]])
        >>> h, taus = lax.linalg.geqrf(a)
        >>> q = lax.linalg.householder_product(h, taus)
        >>> q.shape
        (3, 2)
    """
    a = base.as_operand(a, "householder_product", "a")
    taus = base.as_operand(taus, "householder_product", "taus")
    return householder_product_p.bind(a, taus)


# ---------------------------------------------------------------- qr under jit


def _qr_lowering(ctx, x, *, pivoting, full_matrices, use_magma):
    """``qr`` in a compiled program: ``geqrf``, R from its upper triangle and Q from
    ``householder_product`` as separate calls (as JAX lowers it), so a program that uses
    only R never forms Q (dead-code elimination drops that call). A batch that the small
    native kernel takes (``_small_batch``) stays one call computing both."""
    aval = ctx.avals_in[0]
    if _small_batch.worth_it("qr", aval):
        return _qr_one_call(ctx, x, pivoting=pivoting, full_matrices=full_matrices,
                            use_magma=use_magma)

    def split(a):
        m, n = a.shape[-2:]
        k = min(m, n)
        h, taus = geqrf_p.bind(a)
        r = h if full_matrices else _slice_last2(h, k, n)
        if full_matrices and m > n:
            qa = pad(h, E.full_of((), 0, a.dtype),
                     [(0, 0, 0)] * (a.ndim - 1) + [(0, m - n, 0)])
        else:
            qa = _slice_last2(h, m, k)
        return [householder_product_p.bind(qa, taus), _triu(r)]

    return _pjit_lowering(ctx, x, jaxpr=pe.trace_to_jaxpr(split, [aval])[0], name="qr")


def _slice_last2(x, rows, cols):
    """``x[..., :rows, :cols]``."""
    shape = core.get_aval(x).shape
    return lax_slice(x, (0,) * len(shape), shape[:-2] + (rows, cols))


_qr_one_call = qr_p.lowering
qr_p.def_lowering(_qr_lowering)


def _ormqr_abstract_eval(a, taus, c, *, left, transpose):
    _check_matrix("ormqr", a, arg="a")
    _check_matrix("ormqr", c, arg="c")
    _same_dtype("ormqr", a, taus, c)
    _same_batch("ormqr", (a, 2), (taus, 1), (c, 2))
    m = a.shape[-2]
    if taus.shape[-1] > min(a.shape[-2:]):
        raise ValueError("ormqr: taus must not be longer than the minimum of a's dimensions")
    if left and c.shape[-2] != m:
        raise ValueError(f"ormqr with left=True expects c to have the same number of rows as "
                         f"the Householder matrix a. Got a shape {a.shape} and c shape "
                         f"{c.shape}.")
    if not left and c.shape[-1] != m:
        raise ValueError(f"ormqr with left=False expects c to have the same number of "
                         f"columns as the Householder matrix a has rows. Got a shape "
                         f"{a.shape} and c shape {c.shape}.")
    return ShapedArray(c.shape, c.dtype)


ormqr_p = _library_primitive(
    "ormqr", lambda a, t, c, *, left, transpose: _kernel(
        _lapack.ormqr, K.ormqr, left=left, transpose=transpose)(a, t, c)[0],
    _ormqr_abstract_eval, False)


def ormqr(a: Any, taus: Any, c: Any, *, left: bool = True, transpose: bool = False) -> Any:
    """Multiplies ``c`` by the ``Q`` of a compact QR factorization without forming ``Q``:
    ``Q c`` (``left``), ``c Q`` (not ``left``), with ``Q^H`` instead when ``transpose``.

    Example:
        >>> a = jnp.array([[1., 2.], [3., 4.], [5., 6.]])
        >>> h, taus = lax.linalg.geqrf(a)
        >>> lax.linalg.ormqr(h, taus, jnp.eye(3)).shape
        (3, 3)
    """
    a = base.as_operand(a, "ormqr", "a")
    taus = base.as_operand(taus, "ormqr", "taus")
    c = base.as_operand(c, "ormqr", "c")
    return ormqr_p.bind(a, taus, c, left=bool(left), transpose=bool(transpose))


# ---------------------------------------------------------------- tridiagonal


def _tridiagonal_abstract_eval(x, *, lower):
    _check_matrix("tridiagonal", x, square=True)
    n = x.shape[-1]
    if n == 0:
        raise ValueError(f"The input to tridiagonal must be a square matrix. Got shape "
                         f"{x.shape}.")
    batch, rdt = x.shape[:-2], _real_dtype(x.dtype)
    return [ShapedArray(x.shape, x.dtype), ShapedArray(batch + (n,), rdt),
            ShapedArray(batch + (n - 1,), rdt), ShapedArray(batch + (n - 1,), x.dtype)]


tridiagonal_p = _library_primitive(
    "tridiagonal", lambda x, *, lower: _kernel(_lapack.sytrd, K.sytrd, lower=lower)(x),
    _tridiagonal_abstract_eval, True)


def tridiagonal(a: Any, *, lower: bool = True) -> tuple[Any, Any, Any, Any]:
    """Reduces Hermitian matrices to tridiagonal form (LAPACK's ``sytrd``/``hetrd``), reading
    only the ``lower`` (or upper) triangle: ``(a, d, e, taus)`` with the diagonal ``d``
    (real), the off-diagonal ``e`` (real), and the reflectors stored in ``a`` past it.

    Example:
        >>> _, d, e, _ = lax.linalg.tridiagonal(jnp.array([[2., 1.], [1., 3.]]))
        >>> d
        Array([2., 3.], dtype=float32)
    """
    a = base.as_operand(a, "tridiagonal", "a")
    return tuple(tridiagonal_p.bind(a, lower=bool(lower)))


# ---------------------------------------------------------------- schur


def _schur_impl(x, *, compute_schur_vectors, sort_eig_vals, select_callable):
    if _lapack.available(x.dtype):
        return _lapack.gees(x, compute_schur_vectors)
    outs = _per_matrix(K.gees, x)
    return outs if compute_schur_vectors else outs[:1]


def _schur_abstract_eval(x, *, compute_schur_vectors, sort_eig_vals, select_callable):
    _check_matrix("schur", x, square=True)
    if sort_eig_vals:
        raise NotImplementedError(
            "The sort feature of LAPACK's gees routine is not implemented.")
    return [ShapedArray(x.shape, x.dtype)] * (2 if compute_schur_vectors else 1)


schur_p = _library_primitive("schur", _schur_impl, _schur_abstract_eval, True)


def schur(x: Any, *, compute_schur_vectors: bool = True, sort_eig_vals: bool = False,
          select_callable: Any = None) -> Any:
    """Schur decomposition ``x = Q T Q^H`` (LAPACK's ``gees``): ``(T, Q)``, or ``(T,)`` without
    ``compute_schur_vectors``. ``T`` is upper triangular for complex input; for real input it
    is quasi upper triangular, a complex-conjugate eigenvalue pair giving a 2 x 2 block with
    equal diagonal entries. ``sort_eig_vals`` is not implemented (as in JAX).

    Example:
        >>> t, q = lax.linalg.schur(jnp.array([[1., 2.], [0., 3.]]))
        >>> t
        Array([[1., 2.],
               [0., 3.]], dtype=float32)
    """
    x = base.as_operand(x, "schur", "x")
    return tuple(schur_p.bind(x, compute_schur_vectors=bool(compute_schur_vectors),
                              sort_eig_vals=bool(sort_eig_vals),
                              select_callable=select_callable))


# ---------------------------------------------------------------- symmetric_product


def _symmetric_product_abstract_eval(a, c, *, alpha, beta):
    for name, v in (("a_matrix", a), ("c_matrix", c)):
        if v.ndim < 2:
            raise ValueError(f"symmetric_product: {name} must have rank >= 2, got shape "
                             f"{v.shape}")
        base.check_dtype("symmetric_product", name, v.dtype, _FLOATS)
    _same_dtype("symmetric_product", a, c)
    if a.shape[-2] != c.shape[-1] or c.shape[-2] != c.shape[-1]:
        raise ValueError(f"symmetric_update expects a rectangular matrix of shape (m, n) and "
                         f"a square matrix of shape (n, n). Got shapes {a.shape} and "
                         f"{c.shape}.")
    _same_batch("symmetric_product", (a, 2), (c, 2))
    return ShapedArray(c.shape, c.dtype)


@_lapack.threads_kernel
def _symmetric_product_impl(a, c, *, alpha, beta):
    out = np.matmul(a, np.swapaxes(a, -1, -2))  # in place from here: one temporary less
    if alpha != 1:
        out *= alpha
    out += beta * c
    return out.astype(c.dtype, copy=False)


symmetric_product_p = _library_primitive("symmetric_product", _symmetric_product_impl,
                                         _symmetric_product_abstract_eval, False)


def _symmetric_product_jvp(primals, tangents, *, alpha, beta):
    a, c = primals
    da, dc = tangents
    out = symmetric_product_p.bind(a, c, alpha=alpha, beta=beta)
    t = None
    if type(da) is not ad.Zero:
        prod = _mm(da, _T(a))
        t = E.mul(E.add(prod, _T(prod)), _scalar(prod, alpha))
    if type(dc) is not ad.Zero:
        dc = E.mul(dc, _scalar(dc, beta))
        t = dc if t is None else E.add(t, dc)
    return out, (ad.Zero.from_primal_value(out) if t is None else t)


symmetric_product_p.def_jvp(_symmetric_product_jvp)


def symmetric_product(a_matrix: Any, c_matrix: Any, *, alpha: float = 1.,
                      beta: float = 0., symmetrize_output: bool = False) -> Any:
    """``alpha * a @ a.T + beta * c`` for a symmetric ``c`` (``syrk``). Only the lower
    triangle is guaranteed (as in JAX); ``symmetrize_output`` mirrors it onto the upper.

    Example:
        >>> lax.linalg.symmetric_product(jnp.array([[1.], [2.]]), jnp.eye(2), beta=1.)
        Array([[2., 2.],
               [2., 5.]], dtype=float32)
    """
    a = base.as_operand(a_matrix, "symmetric_product", "a_matrix")
    c = base.as_operand(c_matrix, "symmetric_product", "c_matrix")
    out = symmetric_product_p.bind(a, c, alpha=float(alpha), beta=float(beta))
    if symmetrize_output:
        low = _tril(out, -1)
        out = E.add(_tril(out), _T(low))
    return out


# ---------------------------------------------------------------- cholesky_update


def _cholesky_update_abstract_eval(r, w):
    base.check_dtype("cholesky_update", "r_matrix", r.dtype, _FLOATS)
    base.check_dtype("cholesky_update", "w_vector", w.dtype, _FLOATS)
    _same_dtype("cholesky_update", r, w)
    if r.ndim < 2 or w.ndim != r.ndim - 1 or r.shape[-1] != r.shape[-2] or \
            w.shape[-1] != r.shape[-1] or w.shape[:-1] != r.shape[:-2]:
        raise ValueError(f"Rank-1 update to Cholesky decomposition takes a square matrix and "
                         f"a vector of the same size as input. Got shapes {r.shape} and "
                         f"{w.shape} instead")
    return ShapedArray(r.shape, r.dtype)


def _cholesky_update_one(r, w):
    # Givens rotations (LAPACK's rotg) folding w into the rows of R one at a time.
    r, w = r.copy(), w.copy()
    for k in range(r.shape[0]):
        x, y = r[k, k], w[k]
        if y == 0:
            continue
        den = max(abs(x), abs(y))
        xs, ys = x / den, y / den
        rh = 1 / np.sqrt(xs * xs + ys * ys)
        c, s = xs * rh, -ys * rh
        r[k, :], w = c * r[k, :] - s * w, c * w + s * r[k, :]
    return r


def _cholesky_update_run(r, w):
    return _cholesky_update_one(r, w[:, 0])


cholesky_update_p = _library_primitive(
    "cholesky_update", lambda r, w: _per_matrix(_cholesky_update_run, r, w[..., None])[0],
    _cholesky_update_abstract_eval, False)


def cholesky_update(r_matrix: Any, w_vector: Any) -> Any:
    """Rank-1 update of a Cholesky factorization: for upper triangular ``R`` with
    ``A = R^T R``, the upper factor of ``A + w w^T`` (O(n^2), by Givens rotations).

    Example:
        >>> lax.linalg.cholesky_update(jnp.eye(2), jnp.array([0., 1.]))
        Array([[1.       , 0.       ],
               [0.       , 1.4142135]], dtype=float32)
    """
    r = base.as_operand(r_matrix, "cholesky_update", "r_matrix")
    w = base.as_operand(w_vector, "cholesky_update", "w_vector")
    return cholesky_update_p.bind(r, w)


# ---------------------------------------------------------------- qdwh


def _qdwh_coefficients(eps: float, max_iterations: int) -> list[tuple[float, float, float]]:
    # Dynamically weighted Halley coefficients (a, b, c) from the lower bound l on the
    # smallest singular value of the scaled iterate (Nakatsukasa, Bai & Gygi, 2010); known
    # ahead of time since l starts at eps.
    coefs, l, tol_l = [], eps, 5 * eps
    while l + tol_l < 1 and len(coefs) < max_iterations:
        l2 = l * l
        dd = (4 * (1 / l2 - 1) / l2) ** (1 / 3)
        sqd = np.sqrt(1 + dd)
        a = sqd + np.sqrt(2 - dd + 2 * (2 - l2) / (l2 * sqd))
        b = (a - 1) ** 2 / 4
        c = a + b - 1
        l = l * (a + b * l2) / (1 + c * l2)
        coefs.append((float(a), float(b), float(c)))
    return coefs


def _qdwh_step(u, a, b, c):
    """``u (a I + b u^H u)(I + c u^H u)^-1``, by QR when ``c`` is large, else Cholesky."""
    from ember.lax.shape import concatenate
    from ember.lax.slicing import slice as lax_slice
    m, n = core.get_aval(u).shape
    dt = core.get_aval(u).dtype
    e = b / c
    eye = _eye_like((n, n), dt)
    if c > 100:
        q, _ = qr(concatenate([E.mul(u, _scalar(u, np.sqrt(c))), eye], 0),
                  full_matrices=False)
        q1, q2 = lax_slice(q, (0, 0), (m, n)), lax_slice(q, (m, 0), (m + n, n))
        upd = E.mul(_mm(q1, _H(q2)), _scalar(u, (a - e) / np.sqrt(c)))
    else:
        z = E.add(eye, E.mul(_mm(_H(u), u), _scalar(eye, c)))
        chol = cholesky(z, symmetrize_input=False)
        # u z^-1 = (u L^-H) L^-1
        y = triangular_solve(chol, u, left_side=False, lower=True, transpose_a=True,
                             conjugate_a=True)
        y = triangular_solve(chol, y, left_side=False, lower=True)
        upd = E.mul(y, _scalar(y, a - e))
    return E.add(E.mul(u, _scalar(u, e)), upd)


def qdwh(x: Any, *, is_hermitian: bool = False, max_iterations: int | None = None,
         eps: float | None = None, dynamic_shape: tuple[int, int] | None = None
         ) -> tuple[Any, Any, Any, Any]:
    """Polar decomposition ``x = u h`` by the QR-based dynamically weighted Halley iteration:
    ``(u, h, num_iters, is_converged)`` with ``u`` having orthonormal columns and ``h``
    Hermitian positive semidefinite. ``x`` has shape ``(m, n)`` with ``m >= n``.

    Example:
        >>> u, h, _, ok = lax.linalg.qdwh(jnp.array([[2., 0.], [0., -3.]]))
        >>> jnp.round(u, 4)
        Array([[ 1.,  0.],
               [ 0., -1.]], dtype=float32)
    """
    from ember.lax.control_flow.while_loop import while_loop
    from ember.lax.reduction import reduce_max, reduce_sum
    x = base.as_operand(x, "qdwh", "x")
    aval = core.get_aval(x)
    if aval.ndim != 2:
        raise ValueError(f"qdwh: x must be a matrix, got shape {aval.shape}")
    base.check_dtype("qdwh", "x", aval.dtype, _LINALG_DTYPES)
    if dynamic_shape is not None:
        raise NotImplementedError("qdwh: dynamic_shape is not supported by ember")
    m, n = aval.shape
    if m < n:
        raise ValueError("The input matrix of shape M x N must have M >= N.")
    max_iterations = 10 if max_iterations is None else int(core.concrete_or_error(
        max_iterations, "The `max_iterations` argument must be statically specified to use "
        "`qdwh` within JAX transformations."))
    rdt = _real_dtype(aval.dtype)
    eps = float(np.finfo(rdt).eps) if eps is None else float(eps)
    # Scale by 1/sqrt(|x|_1 |x|_inf) >= 1/|x|_2 so that the singular values are <= 1.
    ax = E.abs(x)
    one = reduce_max(reduce_sum(ax, (0,)), (0,))
    inf = reduce_max(reduce_sum(ax, (1,)), (0,))
    scale = E.mul(E.rsqrt(one), E.rsqrt(inf))
    scale = E.select(E.eq(one, _scalar(one, 0)), _scalar(one, 1), scale)
    u = E.mul(x, E.convert_element_type(scale, aval.dtype) if _is_cplx(aval) else scale)
    tol_norm = np.cbrt(5 * eps)

    def diff_norm(u1, u0):
        d = E.abs(E.sub(u1, u0))
        return E.sqrt(reduce_sum(E.mul(d, d), (0, 1)))

    not_converged = E.full_of((), True, np.bool_)
    for a, b, c in _qdwh_coefficients(eps, max_iterations):
        u_new = _qdwh_step(u, a, b, c)
        if c <= 100:
            not_converged = E.gt(diff_norm(u_new, u), E.full_of((), tol_norm, rdt))
        u = u_new
    k0 = len(_qdwh_coefficients(eps, max_iterations))

    def cond(state):
        k, _, nc = state
        return E.bitwise_and(nc, E.lt(k, E.full_of((), max_iterations, np.int32)))

    def body(state):  # plain Halley iterations (a, b, c -> 3, 1, 3) until convergence
        k, u0, _ = state
        u1 = _qdwh_step(u0, 3., 1., 3.)
        return (E.add(k, E.full_of((), 1, np.int32)), u1,
                E.gt(diff_norm(u1, u0), E.full_of((), tol_norm, rdt)))

    num_iters, u, not_converged = while_loop(
        cond, body, (E.full_of((), k0, np.int32), u, not_converged))
    u = E.sub(E.mul(u, _scalar(u, 1.5)), E.mul(_mm(u, _mm(_H(u), u)), _scalar(u, 0.5)))
    h = _mm(_H(u), x)
    h = E.mul(E.add(h, _H(h)), _scalar(h, 0.5))
    return u, h, num_iters, E.bitwise_not(not_converged)


def _is_cplx(aval) -> bool:
    return dtypes.is_complex(aval.dtype)


__all__ = [
    "EigImplementation", "EighImplementation", "SvdAlgorithm",
    "cholesky_update", "geqrf", "hessenberg", "householder_product", "ormqr", "qdwh",
    "schur", "symmetric_product", "tridiagonal",
    "cholesky_update_p", "geqrf_p", "hessenberg_p", "householder_product_p", "ormqr_p",
    "schur_p", "symmetric_product_p", "tridiagonal_p",
]
