"""Native kernels for large batches of small real matrices: LU with partial pivoting
(``getrf``), triangular solves (``trsm``), Cholesky (``potrf``), the symmetric
eigenproblem (``syevd``), QR (``qr``) and the SVD (``svd``).

``ember.lax._small_batch`` runs these algorithms vectorized over the batch in NumPy, a
handful of NumPy calls per step (~15 µs of fixed cost each, for 4 x 4 matrices more than
the arithmetic of a thousand of them). Here each is one loop over the batch of a straight
loop per matrix, compiled once per (kernel, dtype, matrix side) and kept in the disk cache
(~0.08 µs per 4 x 4 LU). The side is a constant of the code (LLVM unrolls the short loops:
~2x faster than loops over a run-time side); shapes other than square get a loop over
run-time dimensions. LU of sides up to 8 runs 16 matrices at a time, one per vector lane
(``small_lu_lanes``: ~0.015 µs per 4 x 4 LU), the scalar loop taking the rest. The
eigenproblem has only a lane kernel (``small_eigh_lanes``: Jacobi rotations, ~0.03 µs per
4 x 4 matrix where LAPACK's ``syevd`` takes ~2.5 µs), and so have QR (``small_qr_lanes``:
Householder, ~0.05 µs per 6 x 4 where ``geqrf`` and ``orgqr`` take ~2 µs) and the SVD
(``small_svd_lanes``: one-sided Jacobi for the values, ~0.1 µs per 4 x 4; two-sided with
the vectors), which are compiled per shape (m, n) and output variant.

The CPU backend registers ``run`` as the custom-call target ``NATIVE_TARGET``;
``_small_batch`` calls it first and keeps its NumPy code for what ``run`` answers None to
(complex or integer operands, matrices over ``MAX_DIM``, no native code).

The loops make the choices ``_small_batch`` documents (LAPACK's): the pivot is the first NaN
of its column, else its first entry of largest magnitude; a zero pivot leaves its column
unscaled; the updates are a product then a difference (no fused multiply-add), and a
triangular solve subtracts its row's dot product and then divides by the diagonal, so the
results agree with the NumPy code to rounding. Cholesky marks a matrix with a pivot
``<= 0`` (not NaN) as failed and fills it with NaN.

Each library has one entry point ``<name>[_<side>](buffers, lo, hi)`` over batch elements
``[lo, hi)``, the signature of the parallel runtime's tasks; the last buffer holds the
int64 dimensions. Operands are batch-first and C-ordered, (batch, rows, cols).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import numpy as np

from ember.backends.cpu import small_eigh_lanes, small_lu_lanes, small_qr_lanes, small_svd_lanes

_log = logging.getLogger(__name__)

# The custom-call target name ``ember.lax._small_batch`` looks these kernels up by.
NATIVE_TARGET = "ember.small_batch.native"
# The largest matrix side handled (``_small_batch.MAX_DIM``).
MAX_DIM = 16
KERNELS = ("getrf", "trsm", "potrf", "syevd", "qr", "svd")
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# Work (batch * n**3 multiply-adds) from which a call is split across the cores: a
# hand-off costs a few microseconds, a 4 x 4 LU ~0.05 µs.
PARALLEL_MIN_WORK = 1 << 17
TASKS_PER_THREAD = 4

_kernels: dict[tuple[str, np.dtype, int | tuple | None], Callable | None] = {}
_lock = threading.Lock()


def _symbol(kernel: str, dtype: np.dtype) -> str:
    return f"ember_small_{kernel}_{dtype.name}"


def _for(b, lo, hi, body: Callable) -> None:
    """Emits ``for i in range(lo, hi): body(i)``."""
    from ember.backends.cpu.scalar_ops import counted_loop

    i, close = counted_loop(b, lo, hi)
    body(i)
    close()


def _if(b, cond, body: Callable) -> None:
    with b.if_then(cond):
        body()


def kernel_ir(kernel: str, dtype: np.dtype, side: int | tuple | None = None) -> str:
    """The LLVM IR of the (kernel, dtype, side) library (see ``_emit`` and the module
    docstring; ``qr``'s side is (m, n, full), ``svd``'s (m, n, vectors))."""
    from llvmlite import ir

    fty = ir.FloatType() if dtype == np.float32 else ir.DoubleType()
    module = ir.Module(name=_symbol(kernel, dtype))
    name = _variant(module.name, side)
    if kernel == "syevd":
        small_eigh_lanes.emit(module, fty, side, name)
    elif kernel == "qr":
        small_qr_lanes.emit(module, fty, *side, name)
    elif kernel == "svd":  # side (m, n, 0: values only, 1: reduced vectors, 2: full)
        m, n, vectors = side
        if vectors:
            small_svd_lanes.emit_vectors(module, fty, m, n, vectors == 2, name)
        else:
            small_svd_lanes.emit(module, fty, m, n, name)
    elif _lanes(kernel, side):
        tail = _emit(module, kernel, fty, side, name + "_tail")
        tail.linkage = "internal"
        small_lu_lanes.emit(module, fty, side, name, tail)
    else:
        _emit(module, kernel, fty, side, name)
    return str(module)


def _lanes(kernel: str, side: int | None) -> bool:
    """Whether the kernel is ``small_lu_lanes``' (one matrix per vector lane)."""
    return kernel == "getrf" and side is not None and side <= small_lu_lanes.MAX_SIDE


def _emit(module, kernel: str, fty, side: int | None, name: str):
    """Adds the kernel's function ``name`` to ``module`` and returns it: for square
    matrices of ``side`` rows (the loops then have constant trip counts, which LLVM
    unrolls), or for any dimensions."""
    from llvmlite import ir

    i32, i64, i8p = ir.IntType(32), ir.IntType(64), ir.IntType(8).as_pointer()
    c = lambda v: ir.Constant(i64, v)  # noqa: E731
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p.as_pointer(), i64, i64]),
                     name)
    bufs, lo, hi = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    nbuf = {"getrf": 4, "trsm": 3, "potrf": 2}[kernel]
    raw = [b.load(b.gep(bufs, [c(k)], inbounds=True)) for k in range(nbuf)]
    dims_ptr = b.bitcast(raw[-1], i64.as_pointer())
    dims = [b.load(b.gep(dims_ptr, [c(k)], inbounds=True)) for k in range(4)]
    if side is not None:  # (trsm's right-hand sides stay a variable)
        dims[:1 if kernel == "trsm" else 2] = [c(side)] * (1 if kernel == "trsm" else 2)
    zero = ir.Constant(fty, 0.0)

    def at(ptr, base, row, col, width):
        return b.gep(ptr, [b.add(base, b.add(b.mul(row, width), col))], inbounds=True)

    def fabs(v):
        return b.call(module.declare_intrinsic("llvm.fabs", [fty]), [v])

    if kernel == "getrf":
        a = b.bitcast(raw[0], fty.as_pointer())
        piv, perm = (b.bitcast(r, i32.as_pointer()) for r in raw[1:3])
        m, n = dims[0], dims[1]
        k = b.select(b.icmp_signed("<", m, n), m, n)
        best = b.alloca(fty)
        arg = b.alloca(i64)

        def matrix(e):
            base = b.mul(e, b.mul(m, n))
            prow = b.mul(e, m)
            pk = b.mul(e, k)
            _for(b, c(0), m, lambda i: b.store(b.trunc(i, i32),
                                               b.gep(perm, [b.add(prow, i)], inbounds=True)))

            def step(j):
                b.store(fabs(b.load(at(a, base, j, j, n))), best)
                b.store(j, arg)

                def scan(i):  # the first NaN, else the first largest |a[i, j]|
                    v = fabs(b.load(at(a, base, i, j, n)))
                    old = b.load(best)
                    take = b.or_(b.fcmp_ordered(">", v, old),
                                 b.and_(b.fcmp_unordered("uno", v, v),
                                        b.fcmp_ordered("ord", old, old)))
                    b.store(b.select(take, v, old), best)
                    b.store(b.select(take, i, b.load(arg)), arg)

                _for(b, b.add(j, c(1)), m, scan)
                p = b.load(arg)
                b.store(b.trunc(p, i32), b.gep(piv, [b.add(pk, j)], inbounds=True))

                def swap():
                    def col(q):
                        x, y = at(a, base, j, q, n), at(a, base, p, q, n)
                        vx, vy = b.load(x), b.load(y)
                        b.store(vy, x)
                        b.store(vx, y)
                    _for(b, c(0), n, col)
                    x = b.gep(perm, [b.add(prow, j)], inbounds=True)
                    y = b.gep(perm, [b.add(prow, p)], inbounds=True)
                    vx, vy = b.load(x), b.load(y)
                    b.store(vy, x)
                    b.store(vx, y)

                swap()  # (p == j swaps a row with itself: no branch to mispredict)
                pv = b.load(at(a, base, j, j, n))
                j1 = b.add(j, c(1))

                def scale():  # a zero pivot leaves its column unscaled
                    _for(b, j1, m, lambda i: b.store(
                        b.fdiv(b.load(at(a, base, i, j, n)), pv), at(a, base, i, j, n)))

                _if(b, b.fcmp_unordered("!=", pv, zero), scale)

                def update(i):
                    lij = b.load(at(a, base, i, j, n))

                    def col(q):
                        ptr = at(a, base, i, q, n)
                        b.store(b.fsub(b.load(ptr), b.fmul(lij, b.load(at(a, base, j, q, n)))),
                                ptr)
                    _for(b, j1, n, col)

                _for(b, j1, m, update)

            _for(b, c(0), k, step)

    elif kernel == "trsm":
        t, x = (b.bitcast(r, fty.as_pointer()) for r in raw[:2])
        m, r, lower, unit = dims
        is_lower = b.icmp_signed("!=", lower, c(0))
        is_unit = b.icmp_signed("!=", unit, c(0))
        acc = b.alloca(fty)

        def solve(tbase, xbase, q, lower: bool, unit: bool):
            """Column q of x, with the triangle and diagonal fixed (constant loop bounds
            when m is: LLVM unrolls them)."""
            def row(ii):
                i = ii if lower else b.sub(b.sub(m, c(1)), ii)
                b.store(zero, acc)
                _for(b, c(0) if lower else b.add(i, c(1)), i if lower else m,
                     lambda kk: b.store(b.fadd(b.load(acc), b.fmul(
                         b.load(at(t, tbase, i, kk, m)), b.load(at(x, xbase, kk, q, r)))), acc))
                ptr = at(x, xbase, i, q, r)
                v = b.fsub(b.load(ptr), b.load(acc))
                b.store(v if unit else b.fdiv(v, b.load(at(t, tbase, i, i, m))), ptr)

            _for(b, c(0), m, row)

        def matrix(e):
            tbase = b.mul(e, b.mul(m, m))
            xbase = b.mul(e, b.mul(m, r))

            def column(q):
                with b.if_else(is_lower) as (low, up):
                    for flag, block in ((True, low), (False, up)):
                        with block:
                            with b.if_else(is_unit) as (yes, no):
                                with yes:
                                    solve(tbase, xbase, q, flag, True)
                                with no:
                                    solve(tbase, xbase, q, flag, False)

            _for(b, c(0), r, column)

    else:  # potrf
        a = b.bitcast(raw[0], fty.as_pointer())
        n = dims[0]
        acc = b.alloca(fty)
        failed = b.alloca(ir.IntType(1))
        sqrt = module.declare_intrinsic("llvm.sqrt", [fty])

        def matrix(e):
            base = b.mul(e, b.mul(n, n))
            b.store(ir.Constant(ir.IntType(1), 0), failed)

            def dot(i, j):  # sum over kk < j of a[i, kk] * a[j, kk]
                b.store(zero, acc)
                _for(b, c(0), j, lambda kk: b.store(b.fadd(b.load(acc), b.fmul(
                    b.load(at(a, base, i, kk, n)), b.load(at(a, base, j, kk, n)))), acc))
                return b.load(acc)

            def step(j):
                d = b.fsub(b.load(at(a, base, j, j, n)), dot(j, j))
                b.store(b.or_(b.load(failed), b.fcmp_ordered("<=", d, zero)), failed)
                djj = b.call(sqrt, [d])
                b.store(djj, at(a, base, j, j, n))
                _for(b, b.add(j, c(1)), n, lambda i: b.store(
                    b.fdiv(b.fsub(b.load(at(a, base, i, j, n)), dot(i, j)), djj),
                    at(a, base, i, j, n)))

            _for(b, c(0), n, step)
            nan = ir.Constant(fty, float("nan"))
            _if(b, b.load(failed), lambda: _for(
                b, c(0), b.mul(n, n), lambda q: b.store(nan, b.gep(a, [b.add(base, q)],
                                                                    inbounds=True))))

    _for(b, lo, hi, matrix)
    b.ret_void()
    return fn


def _variant(symbol: str, side: int | tuple | None) -> str:
    if isinstance(side, tuple):
        return f"{symbol}_{'x'.join(str(int(d)) for d in side)}"
    return symbol if side is None else f"{symbol}_{side}"


def kernel(name: str, dtype: np.dtype, side: int | tuple | None = None) -> Callable | None:
    """The compiled kernel ``ranged(buffers, lo, hi)`` of (name, dtype) for ``side`` x
    ``side`` matrices, or for any dimensions if ``side`` is None; None where no native code
    can be made (logged at debug level). Each is a library of its own, compiled at its first
    use (~0.1-0.3 s) and then loaded from the disk cache."""
    key = (name, dtype, side)
    try:
        return _kernels[key]
    except KeyError:
        pass
    with _lock:
        if key not in _kernels:
            try:
                from ember.backends.cpu import (
                    _shared_libraries_enabled,
                    _source_stamp,
                    native_lib,
                )
                from ember.backends.cpu.executable import _ffi
                symbol = _variant(_symbol(name, dtype), side)
                lib = native_lib.load_or_build(
                    f"ember-small-linalg:{symbol}:{_source_stamp()}",
                    lambda: kernel_ir(name, dtype, side), _opt_level(name, side),
                    _shared_libraries_enabled())
                _libraries.append(lib)  # keeps the code loaded
                _kernels[key] = _ffi.cast("void(*)(char**, long, long)", lib.address(symbol))
            except Exception as e:  # noqa: BLE001 - the NumPy kernels still work
                _log.debug("no native small-matrix kernel %s %s: %s", name, dtype, e)
                _kernels[key] = None
    return _kernels[key]


_libraries: list = []


def _opt_level(kernel: str, side: int | tuple | None) -> int:
    """LLVM's optimization level for the library: the unrolled straight-line code of
    ``small_lu_lanes`` is as fast at 0 for 4 x 4 (8 x 8: 2x slower than at 1-3, still
    ~4x faster than the scalar loop) and compiles in ~0.04-0.17 s instead of ~0.7-4 s."""
    if kernel in ("syevd", "qr", "svd"):  # (unrolled code needs SROA to use registers)
        return 2
    return 0 if _lanes(kernel, side) else 3


def _call(ranged, arrays: list[np.ndarray], dims: list[int], nb: int, work: int) -> None:
    """``ranged`` over the batch ``[0, nb)`` of ``arrays`` (the dimensions appended as the
    last buffer), split across the cores (``eager_math``'s runtime) when the work is large."""
    from ember.backends.cpu import eager_math
    from ember.backends.cpu.executable import _ffi

    fb = _ffi.from_buffer
    dims_arr = np.array(dims + [0] * (4 - len(dims)), np.int64)
    pointers = [fb(x) for x in arrays]
    pointers.append(fb(dims_arr))
    if work < PARALLEL_MIN_WORK or nb < 2:
        ranged(_ffi.new("char*[]", pointers), 0, nb)
    else:
        eager_math.run_split(ranged, pointers, nb)


def _stack(x: np.ndarray) -> np.ndarray:
    """A fresh, writable, C-ordered (batch, rows, cols) copy of the stack ``x``."""
    return np.array(x.reshape((-1,) + x.shape[-2:]), order="C", copy=True)


def getrf(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(lu, pivots, permutation)`` of the stack ``x`` (..., m, n), as
    ``_small_batch.getrf`` gives them; None where there is no native kernel."""
    m, n = x.shape[-2:]
    ranged = kernel("getrf", x.dtype, m if m == n else None)
    if ranged is None:
        return None
    a = _stack(x)
    nb = a.shape[0]
    piv = np.empty((nb, min(m, n)), np.int32)
    perm = np.empty((nb, m), np.int32)
    if nb:
        _call(ranged, [a, piv, perm], [m, n], nb, nb * m * n * min(m, n))
    batch = x.shape[:-2]
    return a.reshape(x.shape), piv.reshape(batch + piv.shape[1:]), \
        perm.reshape(batch + (m,))


def trsm(t: np.ndarray, x: np.ndarray, lower: bool, unit: bool) -> np.ndarray | None:
    """Solves ``t y = x`` in place of ``x`` for C-ordered (batch, m, m) ``t`` and
    (batch, m, r) ``x`` of one dtype, reading only t's ``lower`` (or upper) triangle and
    dividing by its diagonal unless ``unit``; returns ``x``, or None where there is no
    native kernel."""
    nb, m, r = x.shape
    ranged = kernel("trsm", x.dtype, m)
    if ranged is None:
        return None
    if nb and m and r:
        _call(ranged, [t, x], [m, r, int(bool(lower)), int(bool(unit))], nb, nb * m * m * r)
    return x


def potrf(x: np.ndarray) -> np.ndarray | None:
    """The lower Cholesky factor of the stack ``x`` (..., n, n), as ``_small_batch.potrf``
    gives it; None where there is no native kernel."""
    ranged = kernel("potrf", x.dtype, x.shape[-1])
    if ranged is None:
        return None
    a = _stack(x)
    nb, n = a.shape[0], a.shape[-1]
    if nb and n:
        _call(ranged, [a], [n], nb, nb * n * n * n)
    return a.reshape(x.shape)


def syevd(x: np.ndarray, lower: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """``(v, w)`` of the stack of symmetric matrices ``x`` (..., n, n), reading its
    ``lower`` (or upper) triangle: eigenvectors in the columns of v, eigenvalues ascending
    (see ``small_eigh_lanes``); None where there is no native kernel."""
    n = x.shape[-1]
    if x.shape[-2] != n or n == 0:
        return None
    ranged = kernel("syevd", x.dtype, n)
    if ranged is None:
        return None
    a = x.reshape((-1, n, n))
    # The kernel reads the lower triangle: the upper one is the transpose's lower one.
    a = np.ascontiguousarray(a if lower else np.swapaxes(a, 1, 2))
    nb = a.shape[0]
    v = np.empty_like(a)
    w = np.empty((nb, n), x.dtype)
    # The kernel works in groups of 16 (8) matrices, and a range shorter than a group
    # costs a whole group: only batches of 8 groups or more are split across the cores.
    work = nb * n * n * n * 8 if nb >= 128 else 0
    if nb:
        _call(ranged, [a, v, w], [], nb, work)
    return v.reshape(x.shape), w.reshape(x.shape[:-1])


def qr(x: np.ndarray, full_matrices: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """``(q, r)`` of the stack ``x`` (..., m, n), as LAPACK's ``geqrf`` and ``orgqr`` give
    them (see ``small_qr_lanes``): q (..., m, kq) and r (..., kq, n), kq = m if
    ``full_matrices`` else min(m, n); None where there is no native kernel."""
    m, n = x.shape[-2:]
    if m == 0 or n == 0:
        return None
    ranged = kernel("qr", x.dtype, (m, n, int(bool(full_matrices))))
    if ranged is None:
        return None
    kq = m if full_matrices else min(m, n)
    a = np.ascontiguousarray(x.reshape((-1, m, n)))
    nb = a.shape[0]
    q = np.empty((nb, m, kq), x.dtype)
    r = np.empty((nb, kq, n), x.dtype)
    if nb:
        _call(ranged, [a, q, r], [], nb, _group_work(nb, m * n * max(m, n) * 4))
    batch = x.shape[:-2]
    return q.reshape(batch + (m, kq)), r.reshape(batch + (kq, n))


def svd(x: np.ndarray, compute_uv: bool = False, full_matrices: bool = False):
    """The singular values of the stack ``x`` (..., m, n), descending, or with
    ``compute_uv`` ``(s, u, vt)``: u (..., m, ku) and vt (..., kv, n), ``(ku, kv)`` =
    (m, n) if ``full_matrices`` else (k, k), k = min(m, n) (see ``small_svd_lanes``); None
    where there is no native kernel."""
    m, n = x.shape[-2:]
    if m == 0 or n == 0:
        return None
    # (a square matrix's full vectors are its reduced ones: one kernel for both)
    vectors = (2 if full_matrices and m != n else 1) if compute_uv else 0
    ranged = kernel("svd", x.dtype, (m, n, vectors))
    if ranged is None:
        return None
    k = min(m, n)
    a = np.ascontiguousarray(x.reshape((-1, m, n)))
    nb = a.shape[0]
    s = np.empty((nb, k), x.dtype)
    outs = [s]
    if compute_uv:
        ku, kv = (m, n) if full_matrices else (k, k)
        outs += [np.empty((nb, m, ku), x.dtype), np.empty((nb, kv, n), x.dtype)]
    if nb:
        _call(ranged, [a] + outs, [], nb,
              _group_work(nb, m * n * k * (64 if compute_uv else 16)))
    batch = x.shape[:-2]
    outs = [o.reshape(batch + o.shape[1:]) for o in outs]
    return tuple(outs) if compute_uv else outs[0]


def _group_work(nb: int, per_matrix: int) -> int:
    """The work of ``nb`` matrices for ``_call``, 0 below 128 of them: the lane kernels
    work in groups of 16 (8), and a range shorter than a group costs a whole group."""
    return nb * per_matrix if nb >= 128 else 0


def _checked(x) -> bool:
    return (isinstance(x, np.ndarray) and x.dtype in DTYPES and x.ndim >= 2
            and max(x.shape[-2:]) <= MAX_DIM)


def run(kernel_name: str, *operands, **params):
    """The registered entry point: ``run("getrf", x)``, ``run("potrf", x)``,
    ``run("syevd", x, lower=...)``, ``run("qr", x, full_matrices=...)``,
    ``run("svd", x, compute_uv=..., full_matrices=...)``
    or ``run("trsm", t, x, lower=..., unit=...)`` (see those functions); None where this
    module has no kernel for the operands (other dtypes, larger or unusual shapes)."""
    if kernel_name not in KERNELS:
        raise ValueError(f"small_linalg_kernel: unknown kernel {kernel_name!r}")
    if not all(_checked(x) for x in operands):
        return None
    if kernel_name == "getrf":
        return getrf(*operands)
    if kernel_name == "potrf":
        x, = operands
        return potrf(x) if x.shape[-1] == x.shape[-2] else None
    if kernel_name == "syevd":
        x, = operands
        return syevd(x, **params)
    if kernel_name == "qr":
        x, = operands
        return qr(x, **params)
    if kernel_name == "svd":
        x, = operands
        return svd(x, **params)
    t, x = operands
    if (t.ndim != 3 or x.ndim != 3 or t.dtype != x.dtype or t.shape[0] != x.shape[0]
            or t.shape[1] != t.shape[2] or t.shape[1] != x.shape[1]
            or not t.flags.c_contiguous or not x.flags.c_contiguous
            or not x.flags.writeable):
        return None
    return trsm(t, x, **params)
