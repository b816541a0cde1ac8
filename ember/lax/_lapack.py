"""A LAPACK/BLAS binding for the linear-algebra primitives' kernels.

NumPy's ``numpy.linalg`` links a full LAPACK (OpenBLAS in the wheels, MKL or Accelerate in
other builds) but exposes only a few drivers. This module finds the library NumPy loaded,
probes its symbol naming (``scipy_sgetrf_64_``, ``sgetrf_64_``, ``sgetrf_``, ...) and
integer width, and binds the routines with cffi in ABI mode (calls release the GIL). A
routine is declared to cffi at its first use: parsing all the declarations at once took
~60 ms, paid by a process's first ``solve``.

Every kernel takes C-ordered NumPy stacks of matrices (leading batch dimensions) and makes
one LAPACK call per matrix. LAPACK is column-major, so a C-ordered buffer is the transposed
matrix: the kernels either use that (``trsm``/``potrf`` flip their ``side``/``uplo``/``trans``
arguments) or hand LAPACK a transposed copy (the factorizations that overwrite their input
need a copy anyway). When no library matches, ``available()`` is False and the callers keep
their NumPy code; tests force that with ``disable()``.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import itertools
import threading

import numpy as np

from ember import _threads
from ember._blas_threads import blas_paths, one_blas_thread
from ember._tiled_copy import SMALL_COPY_TILE, copy_tiled

_LETTER = {np.dtype(np.float32): "s", np.dtype(np.float64): "d",
           np.dtype(np.complex64): "c", np.dtype(np.complex128): "z"}

# Signatures with the routine name as {}: I is the LAPACK integer type; each char argument
# gets a hidden trailing length (gfortran's convention, harmless where unused).
_SIGNATURES = {
    "getrf": "void {}(I*, I*, void*, I*, void*, I*);",
    "laswp": "void {}(I*, void*, I*, I*, I*, void*, I*);",
    "trsm": "void {}(char*, char*, char*, char*, I*, I*, void*, void*, I*, void*, I*, "
            "size_t, size_t, size_t, size_t);",
    "potrf": "void {}(char*, I*, void*, I*, I*, size_t);",
    "geqrf": "void {}(I*, I*, void*, I*, void*, void*, I*, I*);",
    "orgqr": "void {}(I*, I*, I*, void*, I*, void*, void*, I*, I*);",
    "ormqr": "void {}(char*, char*, I*, I*, I*, void*, I*, void*, void*, I*, void*, I*, I*, "
             "size_t, size_t);",
    "gehrd": "void {}(I*, I*, I*, void*, I*, void*, void*, I*, I*);",
    "sytrd": "void {}(char*, I*, void*, I*, void*, void*, void*, void*, I*, I*, size_t);",
    "gtsv": "void {}(I*, I*, void*, void*, void*, void*, I*, I*);",
    # transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc (BLAS, column-major)
    "gemm": "void {}(char*, char*, I*, I*, I*, void*, void*, I*, void*, I*, void*, void*, I*, "
            "size_t, size_t);",
    # real: jobvs, sort, select, n, a, lda, sdim, wr, wi, vs, ldvs, work, lwork, bwork, info
    "gees_r": "void {}(char*, char*, void*, I*, void*, I*, I*, void*, void*, void*, I*, "
              "void*, I*, void*, I*, size_t, size_t);",
    # complex: jobvs, sort, select, n, a, lda, sdim, w, vs, ldvs, work, lwork, rwork, bwork,
    # info
    "syevd_r": "void {}(char*, char*, I*, void*, I*, void*, void*, I*, void*, I*, I*, size_t, "
               "size_t);",
    # jobz, uplo, n, a, lda, w, work, lwork, rwork, lrwork, iwork, liwork, info
    "syevd_c": "void {}(char*, char*, I*, void*, I*, void*, void*, I*, void*, I*, void*, I*, "
               "I*, size_t, size_t);",
    "gees_c": "void {}(char*, char*, void*, I*, void*, I*, I*, void*, void*, I*, void*, I*, "
              "void*, void*, I*, size_t, size_t);",
    # real: jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, iwork, info
    "gesdd_r": "void {}(char*, I*, I*, void*, I*, void*, void*, I*, void*, I*, void*, I*, "
               "void*, I*, size_t);",
    # complex: jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, rwork, iwork, info
    "gesdd_c": "void {}(char*, I*, I*, void*, I*, void*, void*, I*, void*, I*, void*, I*, "
               "void*, void*, I*, size_t);",
    # real: jobvl, jobvr, n, a, lda, wr, wi, vl, ldvl, vr, ldvr, work, lwork, info
    "geev_r": "void {}(char*, char*, I*, void*, I*, void*, void*, void*, I*, void*, I*, void*, "
              "I*, I*, size_t, size_t);",
    # complex: jobvl, jobvr, n, a, lda, w, vl, ldvl, vr, ldvr, work, lwork, rwork, info
    "geev_c": "void {}(char*, char*, I*, void*, I*, void*, void*, I*, void*, I*, void*, I*, "
              "void*, I*, size_t, size_t);",
}


def _routine_names(kind: str, letter: str) -> str:
    """The LAPACK name of ``kind`` for a dtype letter (``orgqr`` is ``ungqr`` for complex)."""
    cplx = letter in "cz"
    base = {"orgqr": "ungqr" if cplx else "orgqr", "ormqr": "unmqr" if cplx else "ormqr",
            "sytrd": "hetrd" if cplx else "sytrd", "gees_r": "gees", "gees_c": "gees",
            "syevd_r": "syevd", "syevd_c": "heevd", "geev_r": "geev", "geev_c": "geev",
            "gesdd_r": "gesdd", "gesdd_c": "gesdd"}
    return letter + base.get(kind, kind)


# (prefix, suffix, integer type): the naming conventions probed, most specific first.
_CONVENTIONS = [("scipy_", "_64_", "int64_t"), ("scipy_", "64_", "int64_t"),
                ("", "_64_", "int64_t"), ("", "64_", "int64_t"), ("", "_64", "int64_t"),
                ("", "_", "int32_t"), ("", "_", "int64_t"), ("", "", "int32_t")]


def _kinds_and_letters():
    """Every (kind, dtype letter) the kernels call."""
    for kind in _SIGNATURES:
        for letter in "sdcz":
            if kind[-2:] not in ("_r", "_c") or (kind[-1] == "c") == (letter in "cz"):
                yield kind, letter


_DECLARE_LOCK = threading.Lock()


class _Binding:
    def __init__(self, ffi, lib, prefix, suffix, itype):
        self.ffi, self.lib, self.itype = ffi, lib, itype
        self.idtype = np.dtype(np.int64 if itype == "int64_t" else np.int32)
        self.prefix, self.suffix = prefix, suffix
        self.cache: dict = {}
        self.declared: dict = {}  # symbol name -> cffi function
        self.constants: dict = {}  # int -> a cell holding it, never written (``_Call.const``)

    def symbol(self, kind: str, letter: str) -> str:
        return self.prefix + _routine_names(kind, letter) + self.suffix

    def fn(self, kind: str, dtype: np.dtype):
        key = (kind, dtype)
        f = self.cache.get(key)
        if f is None:
            letter = _LETTER[np.dtype(dtype)]
            name = self.symbol(kind, letter)
            with _DECLARE_LOCK:
                f = self.declared.get(name)
                if f is None:
                    decl = _SIGNATURES[kind].replace("I*", self.itype + "*").format(name)
                    self.ffi.cdef(decl)
                    f = self.declared[name] = getattr(self.lib, name)
            self.cache[key] = f
        return f


def _loaded_lapack_paths() -> list[str]:
    import numpy.linalg._umath_linalg  # noqa: F401  (loads NumPy's LAPACK)
    # (None: dlopen(NULL), the symbols already in the process, also where there are no maps)
    return blas_paths(("blas", "lapack", "mkl")) + [None]


def _bind() -> _Binding | None:
    try:
        import cffi
    except ImportError:
        return None
    for path in _loaded_lapack_paths():
        try:
            symbols = ctypes.CDLL(path)  # (to look symbols up without declaring them)
        except OSError:
            continue
        for prefix, suffix, itype in _CONVENTIONS:
            ffi = cffi.FFI()
            try:
                binding = _Binding(ffi, ffi.dlopen(path), prefix, suffix, itype)
            except OSError:
                continue
            binding.path = path
            # every routine the kernels call must be there
            if all(hasattr(symbols, binding.symbol(kind, letter))
                   for kind, letter in _kinds_and_letters()) and _self_test(binding):
                return binding
    return None


def _self_test(b: _Binding) -> bool:
    # A wrong integer width shows up as wrong pivots: factor a known 2 x 2 matrix. Every
    # integer gets 8 bytes of room, so that a library reading or writing 64-bit integers
    # where we declared 32 stays inside them (on a little-endian machine it reads our 2).
    try:
        a = np.array([[1., 3.], [2., 4.]])  # column-major [[1, 2], [3, 4]]
        ipiv = np.zeros(4, b.idtype)  # room for two 64-bit pivots either way
        n = b.ffi.new(b.itype + "[2]", [2, 0])
        info = b.ffi.new(b.itype + "[2]")
        b.fn("getrf", a.dtype)(n, n, b.ffi.from_buffer(a), n, b.ffi.from_buffer(ipiv), info)
        return info[0] == 0 and list(ipiv[:2]) == [2, 2] and \
            np.allclose(a, [[3., 1 / 3], [4., 2 / 3]])
    except Exception:  # pragma: no cover - any failure means "do not use"
        return False


_LOCK = threading.Lock()
_STATE: dict = {}


def binding() -> _Binding | None:
    if "b" not in _STATE:
        with _LOCK:
            if "b" not in _STATE:
                _STATE["b"] = None if _STATE.get("disabled") else _bind()
    return _STATE["b"]


def available(dtype=None) -> bool:
    """Whether the LAPACK kernels run (for ``dtype``, when given)."""
    return binding() is not None and (dtype is None or np.dtype(dtype) in _LETTER)


def address(kind: str, dtype) -> int:
    """The address of the LAPACK routine ``kind`` (``getrf``, ``trsm``, ``potrf``...) for
    ``dtype``, for native code to call (Fortran's convention: every argument by pointer, a
    hidden length after the others for each character one); 0 unless the library takes
    64-bit integers (the code's only convention) and has it."""
    if not _NATIVE:  # (not ``binding()``: code compiled before ``disable`` keeps running)
        with _LOCK:
            if not _NATIVE:
                _NATIVE.append(_STATE.get("b") or _bind())
    b = _NATIVE[0]
    if b is None or b.itype != "int64_t" or np.dtype(dtype) not in _LETTER:
        return 0
    return int(b.ffi.cast("uintptr_t", b.fn(kind, np.dtype(dtype))))


_NATIVE: list = []  # the binding whose routines native code calls (``address``)


def _workspace_cells(c: _Call, size: int, dtype) -> tuple:
    """A workspace of ``size`` elements and its size's cell (``_lwork``'s result)."""
    return np.empty(size, dtype), c.i(size)


# ---------------------------------------------------------------- workspace sizes
# (one query per routine, which the kernels below and native code calling the routines
# (``backends/cpu/linalg_steps.py``) both take: the same workspace, the same calls)


def workspace(kind: str, dtype, m: int, n: int, k: int) -> int:
    """The workspace (elements) of ``geqrf`` (an m x n matrix) or ``orgqr`` (m x n, k
    reflectors), LAPACK's optimal size (a smaller one may change LAPACK's blocking, and the
    bits)."""
    b = binding()
    c = _Call(b)
    dtype = np.dtype(dtype)
    fn = b.fn(kind, dtype)
    pa = pt = c.ffi.from_buffer(np.zeros(1, dtype))  # (a query reads neither)
    M, N, K, LD = c.i(m), c.i(n), c.i(k), c.i(max(1, m))
    if kind == "geqrf":
        _, lw = _lwork(c, lambda w, l, i: fn(M, N, pa, LD, pt, w, l, i), dtype,
                       ("geqrf", m, n))
    else:
        _, lw = _lwork(c, lambda w, l, i: fn(M, N, K, pa, LD, pt, w, l, i), dtype,
                       ("orgqr", m, n, k))
    return int(lw[0])


def syevd_workspace(dtype, n: int, lower: bool) -> tuple[int, int]:
    """The float and integer workspaces (elements) of ``syevd`` with vectors for a real
    n x n matrix (as ``workspace``)."""
    b = binding()
    c = _Call(b)
    dtype = np.dtype(dtype)
    q_work, q_iwork = np.zeros(1, dtype), np.zeros(1, b.idtype)
    p = c.ffi.from_buffer(np.zeros(1, dtype))  # (a query reads no array)
    N = c.i(n)
    b.fn("syevd_r", dtype)(b"V", b"L" if lower else b"U", N, p, N, p,
                           c.ffi.from_buffer(q_work), c.i(-1), c.ffi.from_buffer(q_iwork),
                           c.i(-1), c.i(), 1, 1)
    return max(1, int(q_work[0])), max(1, int(q_iwork[0]))


def geev_workspace(dtype, n: int) -> int:
    """The workspace (elements) of ``geev`` without vectors for an n x n matrix (as
    ``workspace``)."""
    b = binding()
    c = _Call(b)
    dtype = np.dtype(dtype)
    p = c.ffi.from_buffer(np.zeros(1, dtype))  # (a query reads no array)
    N, ONE, null = c.i(n), c.i(1), c.ffi.NULL
    if dtype.kind == "c":
        fn = b.fn("geev_c", dtype)
        _, lw = _lwork(c, lambda w, l, i: fn(b"N", b"N", N, p, N, p, null, ONE, null, ONE, w,
                                             l, p, i, 1, 1), dtype, ("geev", n))
    else:
        fn = b.fn("geev_r", dtype)
        _, lw = _lwork(c, lambda w, l, i: fn(b"N", b"N", N, p, N, p, p, null, ONE, null, ONE,
                                             w, l, i, 1, 1), dtype, ("geev", n))
    return int(lw[0])


def gesdd_workspace(dtype, m: int, n: int, compute_uv: bool, full_matrices: bool) -> int:
    """The workspace (elements) of ``gesdd`` for an m x n matrix (as ``workspace``)."""
    b = binding()
    c = _Call(b)
    dtype = np.dtype(dtype)
    k = min(m, n)
    jobz = (b"A" if full_matrices else b"S") if compute_uv else b"N"
    vtrows = (n if full_matrices else k) if compute_uv else 1
    complex_ = dtype.kind == "c"
    fn = b.fn("gesdd_c" if complex_ else "gesdd_r", dtype)
    p = c.ffi.from_buffer(np.zeros(1, dtype))  # (a query reads no array)
    iwork = c.ffi.from_buffer(np.zeros(8 * max(1, k), b.idtype))
    M, N, LDA, LDVT = c.const(m), c.const(n), c.const(max(1, m)), c.const(max(1, vtrows))
    rwork = [p] if complex_ else []
    _, lw = _lwork(c, lambda w, l, i: fn(jobz, M, N, p, LDA, p, p, LDA, p, LDVT, w, l, *rwork,
                                         iwork, i, 1), dtype, ("gesdd", jobz, m, n))
    return int(lw[0])


def disable(off: bool = True) -> None:
    """Turns the binding off (the callers fall back to NumPy) or back on; for tests."""
    _STATE.clear()
    _STATE["disabled"] = off


# ---------------------------------------------------------------- threads

# Up to this size LAPACK runs on the calling thread: OpenBLAS's threads gain little on these
# matrices and, busy-waiting, lose badly when the cores are shared (a 512 x 512 getrf took
# 1.7 ms on one thread against 2-230 ms on two on a loaded 2-core machine).
SINGLE_THREAD_MAX_DIM = 1024


def _large(arrays) -> bool:
    """Whether a matrix of ``arrays`` is more than ``SINGLE_THREAD_MAX_DIM`` on a side."""
    return any(max(a.shape[-2:], default=0) > SINGLE_THREAD_MAX_DIM for a in arrays)


@contextlib.contextmanager
def single_threaded(*arrays: np.ndarray):
    """Runs the LAPACK calls inside (ours or NumPy's) on the calling thread when the
    matrices of ``arrays`` are at most ``SINGLE_THREAD_MAX_DIM`` on a side."""
    if _large(arrays):
        yield
        return
    with one_blas_thread:  # (process-wide: threads inside at once share it)
        yield


def threads_kernel(f):
    """A kernel run as under ``single_threaded`` for its array arguments (without the
    generator context's ~2 µs a call: a 64 x 64 solve's whole LAPACK call takes ~10)."""
    @functools.wraps(f)
    def run(*args, **kw):
        if _large([a for a in args if isinstance(a, np.ndarray) and a.ndim >= 2]):
            return f(*args, **kw)
        with one_blas_thread:
            return f(*args, **kw)
    return run


# A batch whose matrices add up to at least this many flops (~0.2 ms of LAPACK) is shared
# among the thread pool's threads: each takes the next matrix from a common counter, so a
# thread that loses its core (another process) holds up at most one matrix, and every
# matrix is computed by the same single-threaded code whichever thread runs it. This pays
# for LAPACK's own routines (QR, eigen and Schur reductions: 1.5-1.8x on 2 cores), not for
# those OpenBLAS implements itself (getrf, potrf, BLAS trsm): from two threads at once those
# ran no faster than from one (measured with OpenBLAS 0.3.31), so they stay serial.
PARALLEL_MIN_FLOPS = 2e6
# ... and each matrix at least this many: below, the Python loop between the calls (which
# holds the GIL) is most of the time, and two threads gained nothing (8 x 8 QR).
PARALLEL_MIN_FLOPS_EACH = 4e3


def _each_matrix(nb: int, flops_each: float, body) -> None:
    """Runs ``body(indices)`` on this thread, or on each of the pool's threads at once with
    ``indices`` drawing from one shared counter, so that together they see ``0 .. nb-1``
    once each. ``body`` makes its own scratch (integer cells, workspace) and loops over
    ``indices``."""
    pool = _threads.pool()
    parts = min(pool.size, nb)
    if parts < 2 or nb * flops_each < PARALLEL_MIN_FLOPS or \
            flops_each < PARALLEL_MIN_FLOPS_EACH:
        body(range(nb))
        return
    counter = itertools.count()  # (next() on it is atomic under the GIL)

    def indices():
        for i in counter:
            if i >= nb:
                return
            yield i

    pool.run(lambda lo, hi: body(indices()), [(p, p + 1) for p in range(parts)])


# ---------------------------------------------------------------- helpers


class _Call:
    """Per-call scratch: integer cells and pointers into a batch of matrices."""

    def __init__(self, b: _Binding):
        self.b = b
        self.ffi = b.ffi

    def i(self, v: int = 0):
        return self.ffi.new(self.b.itype + "*", int(v))

    def const(self, v: int):
        """A cell holding ``v`` for an input-only integer argument (dimensions, strides):
        shared by every call, as LAPACK never writes those."""
        cell = self.b.constants.get(v)
        if cell is None:
            cell = self.b.constants[v] = self.i(v)
        return cell

    def ptrs(self, arr: np.ndarray):
        """Pointers to each matrix/vector of a stack ``arr`` (batch, ...): C-contiguous, or
        each matrix contiguous, ``strides[0]`` apart (``trsm``'s column-major ones)."""
        if arr.flags.c_contiguous:
            base = self.ffi.cast("char*", self.ffi.from_buffer(arr))
        else:
            base = self.ffi.cast("char*", arr.__array_interface__["data"][0])
        if arr.ndim == 0 or arr.shape[0] == 1:
            return [base]
        step = arr.strides[0]
        return [base + k * step for k in range(arr.shape[0])]


# A one of each dtype, for ``alpha`` arguments (read only).
_ONES = {np.dtype(t): np.ones(1, t) for t in (np.float32, np.float64, np.complex64,
                                                np.complex128)}


def _flat_t(x: np.ndarray) -> np.ndarray:
    """A fresh stack (nb, n, m) whose matrices, read column-major, are ``x``'s (m, n)
    (copied in tiles: NumPy's copy of the transposed view took 9.5 ms for 1024 x 1024
    float32, in tiles 1.4)."""
    t = np.swapaxes(x.reshape((-1,) + x.shape[-2:]), -1, -2)
    if t.shape[-1] <= SMALL_COPY_TILE and t.shape[-2] <= SMALL_COPY_TILE:
        # (one tile: ~1 us for 64 x 64, copy_tiled's ~3; a copy even where ``t`` is
        # contiguous already: LAPACK overwrites it)
        return np.array(t, order="C", copy=True)
    out = np.empty(t.shape, x.dtype)
    copy_tiled(out, t)
    return out


def _back(f: np.ndarray, shape: tuple) -> np.ndarray:
    """The inverse of ``_flat_t``: the C-ordered (..., m, n) array."""
    return np.swapaxes(f, -1, -2).reshape(shape)


_LWORK: dict = {}  # the workspace sizes of the queries made, by ``_lwork``'s key
_LWORK_MAX = 1024


def _lwork(c: _Call, query, dtype, key: tuple | None = None) -> tuple:
    """Runs a workspace query (``query(work, lwork, info)``); returns (work, lwork cell).
    With ``key`` (the routine, its flags and dimensions: all the size depends on) a size
    found before is taken without the query (a LAPACK call and its cells: ~3 us of a
    (1000, 10) QR's two routines)."""
    if key is not None:
        key = (key, np.dtype(dtype))
        n = _LWORK.get(key)
        if n is not None:
            return np.empty(n, dtype), c.i(n)
    w = np.zeros(1, dtype)
    info = c.i()
    query(c.ffi.from_buffer(w), c.i(-1), info)
    n = max(1, int(np.real(w[0])))
    if key is not None:
        if len(_LWORK) >= _LWORK_MAX:
            _LWORK.clear()
        _LWORK[key] = n
    return np.empty(n, dtype), c.i(n)


# ---------------------------------------------------------------- kernels


@threads_kernel
def getrf(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LU with partial pivoting: ``(lu, pivots, permutation)`` with 0-based int32 pivots and
    permutation. A singular matrix gets its factorization with a zero pivot (``info > 0``
    is not an error)."""
    b = binding()
    c = _Call(b)
    m, n = x.shape[-2:]
    f = _flat_t(x)
    nb, k = f.shape[0], min(m, n)
    ipiv = np.empty((nb, k), b.idtype)
    fn = b.fn("getrf", x.dtype)
    M, N, LD, info = c.const(m), c.const(n), c.const(max(1, m)), c.i()
    # The permutation: the row swaps applied (dlaswp) to a column holding 0..m-1 (exact in
    # float64), one call per matrix instead of a Python step per pivot.
    perm = np.empty((nb, m), np.float64)
    perm[:] = np.arange(m, dtype=np.float64)
    swap = b.fn("laswp", np.dtype(np.float64))
    one, K1, K2 = c.const(1), c.const(1), c.const(k)
    for pa, pp, pr in zip(c.ptrs(f), c.ptrs(ipiv), c.ptrs(perm)):  # (serial: _each_matrix)
        fn(M, N, pa, LD, pp, info)
        swap(one, pr, LD, K1, K2, pp, one)
    pivots = ipiv.astype(np.int32)
    pivots -= 1
    batch = x.shape[:-2]
    return (_back(f, x.shape), pivots.reshape(batch + (k,)),
            perm.astype(np.int32).reshape(batch + (m,)))


def trsm_flags(left_side: bool, lower: bool, transpose_a: bool, conjugate_a: bool,
               unit_diagonal: bool) -> tuple[bytes, bytes, bytes, bytes]:
    """``trsm``'s side, uplo, transa and diag for ``op(a) x = b`` (``left_side``) or
    ``x op(a) = b`` with C-ordered ``a`` and ``b``: read column-major they are S = a^T and
    x^T, so the solve is ``x^T op(a)^T = b^T`` (the other side), with op(a)^T = S (N),
    S^T (T) or S^H (C) and S's triangle the other one."""
    return (b"R" if left_side else b"L", b"U" if lower else b"L",
            (b"C" if conjugate_a else b"T") if transpose_a else b"N",
            b"U" if unit_diagonal else b"N")


@threads_kernel
def trsm(a: np.ndarray, b_: np.ndarray, *, left_side: bool, lower: bool, transpose_a: bool,
         conjugate_a: bool, unit_diagonal: bool) -> np.ndarray:
    """Solves ``op(a) x = b`` (``left_side``) or ``x op(a) = b``; a and b share batch dims."""
    b = binding()
    c = _Call(b)
    m, n = b_.shape[-2:]
    k = a.shape[-1]
    x = np.array(b_.reshape((-1, m, n)), order="C", copy=True)
    at = a.reshape((-1, k, k))
    # The C buffers read column-major are S = a^T and x^T; x^T op(a)^T = b^T (left side) or
    # op(a)^T x^T = b^T, with op(a)^T = S (N), S^T (T) or S^H (C) in terms of S.
    if conjugate_a and not transpose_a:
        at = np.conj(at)
    if k > 1 and at.strides[-2:] == (at.itemsize, k * at.itemsize) and not (
            transpose_a and conjugate_a):
        # Matrices lying column-major (``getrf``'s factors) read as themselves, S = a: then
        # op(a)^T = S^T (N) or S (T), and S's triangle is a's (no transposing copy: 67 us
        # of a 256 x 256 solve's ~400).
        trans = b"N" if transpose_a else b"T"
        uplo = b"L" if lower else b"U"
        side, diag = trsm_flags(left_side, lower, transpose_a, conjugate_a, unit_diagonal)[::3]
    else:
        at = np.ascontiguousarray(at)
        side, uplo, trans, diag = trsm_flags(left_side, lower, transpose_a, conjugate_a,
                                             unit_diagonal)
    fn = b.fn("trsm", x.dtype)
    M, N, LDA, LDB = c.const(n), c.const(m), c.const(max(1, k)), c.const(max(1, n))
    pal = c.ffi.from_buffer(_ONES[x.dtype])
    for pa, px in zip(c.ptrs(at), c.ptrs(x)):  # (serial: see _each_matrix)
        fn(side, uplo, trans, diag, M, N, pal, pa, LDA, px, LDB, 1, 1, 1, 1)
    return x.reshape(b_.shape)


@threads_kernel
def potrf(x: np.ndarray) -> np.ndarray:
    """The lower Cholesky factor, reading x's lower triangle; above the diagonal x is left
    as it was (as JAX's primitive does: ``lax.linalg.cholesky`` zeroes it). A matrix that
    is not positive definite gives all NaNs."""
    b = binding()
    c = _Call(b)
    n = x.shape[-1]
    # Column-major, the buffer is x^T: its upper triangle is x's lower one, and potrf's
    # upper factor U (x^T = U^H U) read row-major is L = U^T with x = L L^H.
    f = np.array(x.reshape((-1, n, n)), order="C", copy=True)
    fn = b.fn("potrf", x.dtype)
    N, info = c.i(n), c.i()
    failed = []
    for i, pa in enumerate(c.ptrs(f)):  # (serial: see _each_matrix)
        fn(b"U", N, pa, N, info, 1)
        if info[0] != 0:
            failed.append(i)
    for i in failed:
        f[i] = np.nan
    return f.reshape(x.shape)


@threads_kernel
def geqrf(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """QR in LAPACK's compact form: ``(a, taus)``."""
    b = binding()
    c = _Call(b)
    m, n = x.shape[-2:]
    k = min(m, n)
    f = _flat_t(x)
    taus = np.empty((f.shape[0], k), x.dtype)
    fn = b.fn("geqrf", x.dtype)
    M, N, LD = c.i(m), c.i(n), c.i(max(1, m))
    pa, pt = c.ptrs(f), c.ptrs(taus)
    work, lw = _workspace_cells(c, workspace("geqrf", x.dtype, m, n, k), x.dtype)

    def body(indices):
        pw, info = c.ffi.from_buffer(np.empty_like(work)), c.i()
        for i in indices:
            fn(M, N, pa[i], LD, pt[i], pw, lw, info)

    _each_matrix(len(pa), 2 * m * n * k, body)
    return _back(f, x.shape), taus.reshape(x.shape[:-2] + (k,))


@threads_kernel
def orgqr(a: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """The product of the Householder reflectors stored in ``a`` (m >= n) and ``taus``."""
    b = binding()
    c = _Call(b)
    m, n = a.shape[-2:]
    k = taus.shape[-1]
    f = _flat_t(a)
    t = np.ascontiguousarray(taus.reshape(-1, k))
    fn = b.fn("orgqr", a.dtype)
    M, N, K, LD = c.i(m), c.i(n), c.i(k), c.i(max(1, m))
    pa, pt = c.ptrs(f), c.ptrs(t)
    work, lw = _workspace_cells(c, workspace("orgqr", a.dtype, m, n, k), a.dtype)

    def body(indices):
        pw, info = c.ffi.from_buffer(np.empty_like(work)), c.i()
        for i in indices:
            fn(M, N, K, pa[i], LD, pt[i], pw, lw, info)

    _each_matrix(len(pa), 2 * m * n * k, body)
    return _back(f, a.shape)


@threads_kernel
def ormqr(a: np.ndarray, taus: np.ndarray, cm: np.ndarray, *, left: bool,
          transpose: bool) -> np.ndarray:
    """``Q c``, ``c Q`` or with ``Q^H`` (``transpose``), Q from the reflectors in a, taus."""
    b = binding()
    c = _Call(b)
    m = a.shape[-2]
    k = taus.shape[-1]
    fa = _flat_t(a[..., :k] if a.shape[-1] > k else a)
    t = np.ascontiguousarray(taus.reshape(-1, k))
    fc = _flat_t(cm)
    mc, nc = cm.shape[-2:]
    fn = b.fn("ormqr", a.dtype)
    side = b"L" if left else b"R"
    trans = (b"C" if a.dtype.kind == "c" else b"T") if transpose else b"N"
    M, N, K, LDA, LDC = c.i(mc), c.i(nc), c.i(k), c.i(max(1, m)), c.i(max(1, mc))
    pa, pt, pc = c.ptrs(fa), c.ptrs(t), c.ptrs(fc)
    work, lw = _lwork(c, lambda w, l, i: fn(side, trans, M, N, K, pa[0], LDA, pt[0], pc[0],
                                            LDC, w, l, i, 1, 1), a.dtype,
                      ("ormqr", side, trans, mc, nc, k, m))

    def body(indices):
        pw, info = c.ffi.from_buffer(np.empty_like(work)), c.i()
        for i in indices:
            fn(side, trans, M, N, K, pa[i], LDA, pt[i], pc[i], LDC, pw, lw, info, 1, 1)

    _each_matrix(len(pc), 2 * mc * nc * k, body)
    return _back(fc, cm.shape)


@threads_kernel
def gehrd(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hessenberg reduction: ``(a, taus)`` (n - 1 taus)."""
    b = binding()
    c = _Call(b)
    n = x.shape[-1]
    f = _flat_t(x)
    taus = np.zeros((f.shape[0], max(n - 1, 1)), x.dtype)
    fn = b.fn("gehrd", x.dtype)
    N, ILO, IHI = c.i(n), c.i(1), c.i(n)
    pa, pt = c.ptrs(f), c.ptrs(taus)
    work, lw = _lwork(c, lambda w, l, i: fn(N, ILO, IHI, pa[0], N, pt[0], w, l, i), x.dtype)

    def body(indices):
        pw, info = c.ffi.from_buffer(np.empty_like(work)), c.i()
        for i in indices:
            fn(N, ILO, IHI, pa[i], N, pt[i], pw, lw, info)

    _each_matrix(len(pa), 10 * n ** 3 / 3, body)
    return _back(f, x.shape), taus[:, :n - 1].reshape(x.shape[:-2] + (max(n - 1, 0),))


@threads_kernel
def sytrd(x: np.ndarray, *, lower: bool) -> tuple:
    """Tridiagonal reduction of Hermitian matrices: ``(a, d, e, taus)``."""
    b = binding()
    c = _Call(b)
    n = x.shape[-1]
    f = _flat_t(x)
    nb = f.shape[0]
    rdt = np.empty(0, x.dtype).real.dtype
    d = np.empty((nb, n), rdt)
    e = np.zeros((nb, max(n - 1, 1)), rdt)
    taus = np.zeros((nb, max(n - 1, 1)), x.dtype)
    fn = b.fn("sytrd", x.dtype)
    uplo = b"L" if lower else b"U"
    N = c.i(n)
    pa, pd, pe, pt = c.ptrs(f), c.ptrs(d), c.ptrs(e), c.ptrs(taus)
    work, lw = _lwork(c, lambda w, l, i: fn(uplo, N, pa[0], N, pd[0], pe[0], pt[0], w, l, i,
                                            1), x.dtype)

    def body(indices):
        pw, info = c.ffi.from_buffer(np.empty_like(work)), c.i()
        for i in indices:
            fn(uplo, N, pa[i], N, pd[i], pe[i], pt[i], pw, lw, info, 1)

    _each_matrix(nb, 4 * n ** 3 / 3, body)
    batch = x.shape[:-2]
    return (_back(f, x.shape), d.reshape(batch + (n,)),
            e[:, :n - 1].reshape(batch + (n - 1,)), taus[:, :n - 1].reshape(batch + (n - 1,)))


@threads_kernel
def gees(x: np.ndarray, compute_vectors: bool) -> list[np.ndarray]:
    """Schur form ``[T]`` or ``[T, Q]`` (LAPACK's standardized 2 x 2 blocks for real x)."""
    b = binding()
    c = _Call(b)
    n = x.shape[-1]
    f = _flat_t(x)
    nb = f.shape[0]
    vs = np.empty_like(f) if compute_vectors else np.empty((1, 1, 1), x.dtype)
    job = b"V" if compute_vectors else b"N"
    N, LDV = c.i(n), c.i(n if compute_vectors else 1)
    pa, pv = c.ptrs(f), c.ptrs(vs)
    pv = pv if compute_vectors else pv * nb  # (jobvs N: vs is not referenced)
    null = c.ffi.NULL
    complex_ = x.dtype.kind == "c"
    fn = b.fn("gees_c" if complex_ else "gees_r", x.dtype)

    def call(a_, v_, work, lw, sdim, info, values):
        # values: w and rwork (complex) or wr and wi (real), the eigenvalues, discarded
        if complex_:
            fn(job, b"N", null, N, a_, N, sdim, values[0], v_, LDV, work, lw, values[1], null,
               info, 1, 1)
        else:
            fn(job, b"N", null, N, a_, N, sdim, values[0], values[1], v_, LDV, work, lw, null,
               info, 1, 1)

    def scratch():
        vals = (np.empty(n, x.dtype), np.empty(n, np.empty(0, x.dtype).real.dtype)) \
            if complex_ else (np.empty(n, x.dtype), np.empty(n, x.dtype))
        return c.i(), c.i(), [c.ffi.from_buffer(v) for v in vals], vals

    sdim, info, values, _keep = scratch()
    work, lw = _lwork(c, lambda wk, l, i: call(pa[0], pv[0], wk, l, sdim, i, values),
                      x.dtype)

    def body(indices):
        sdim, info, values, _keep = scratch()
        pw = c.ffi.from_buffer(np.empty_like(work))
        for i in indices:
            call(pa[i], pv[i], pw, lw, sdim, info, values)

    _each_matrix(nb, 25 * n ** 3, body)
    out = [_back(f, x.shape)]
    if compute_vectors:
        out.append(_back(vs, x.shape))
    return out


@threads_kernel
def geev_values(x: np.ndarray) -> np.ndarray:
    """The eigenvalues of each general square matrix of ``x`` (complex, in LAPACK's order),
    computed in ``x``'s precision (NumPy's ``eigvals`` computes float32 in float64, ~1.5x the
    time), without eigenvectors."""
    b = binding()
    c = _Call(b)
    n = x.shape[-1]
    f = _flat_t(x)  # (column-major: LAPACK sees the matrices themselves)
    nb = f.shape[0]
    complex_ = x.dtype.kind == "c"
    real_dt = np.empty(0, x.dtype).real.dtype
    fn = b.fn("geev_c" if complex_ else "geev_r", x.dtype)
    N, ONE = c.i(n), c.i(1)
    null = c.ffi.NULL
    pa = c.ptrs(f)
    values = np.empty((nb, n), x.dtype) if complex_ else np.empty((nb, 2, n), x.dtype)
    pv = c.ptrs(values)
    step = values.strides[1] if not complex_ else 0

    def call(a_, v_, work, lw, rwork, info):
        if complex_:
            fn(b"N", b"N", N, a_, N, v_, null, ONE, null, ONE, work, lw, rwork, info, 1, 1)
        else:
            fn(b"N", b"N", N, a_, N, v_, v_ + step, null, ONE, null, ONE, work, lw, info,
               1, 1)

    def rwork_cell():
        return c.ffi.from_buffer(np.empty(2 * n, real_dt)) if complex_ else null

    work, lw = _workspace_cells(c, geev_workspace(x.dtype, n), x.dtype)

    # (a matrix with a NaN or inf gets NaN eigenvalues, as in JAX, without the call: LAPACK
    # would reject it with a message on stdout)
    finite = np.isfinite(f).all(axis=(1, 2))
    failed = [i for i in range(nb) if not finite[i]]

    def body(indices):
        info, rwork = c.i(), rwork_cell()
        pw = c.ffi.from_buffer(np.empty_like(work))
        for i in indices:
            if finite[i]:
                call(pa[i], pv[i], pw, lw, rwork, info)
                if info[0] != 0:  # (the QR iteration failed: no eigenvalues)
                    failed.append(i)

    _each_matrix(nb, 10 * n ** 3, body)
    values[failed] = np.nan
    if complex_:
        return values.reshape(x.shape[:-1])
    out = np.empty((nb, n), np.result_type(x.dtype, np.complex64))
    out.real, out.imag = values[:, 0], values[:, 1]
    return out.reshape(x.shape[:-1])


@threads_kernel
def gesdd(x: np.ndarray, compute_uv: bool, full_matrices: bool) -> list[np.ndarray]:
    """The singular values (descending) of each (m, n) matrix of ``x``, and with
    ``compute_uv`` ``u`` (m, m or k) and ``vt`` (n or k, n), k = min(m, n): LAPACK's
    divide-and-conquer SVD in ``x``'s precision. A matrix with a NaN or inf (NumPy's svd
    raises for it; JAX gives NaN), or one where LAPACK fails, gets all NaN."""
    b = binding()
    c = _Call(b)
    m, n = x.shape[-2:]
    k = min(m, n)
    f = _flat_t(x)  # (column-major: LAPACK sees the matrices themselves)
    nb = f.shape[0]
    complex_ = x.dtype.kind == "c"
    real_dt = np.empty(0, x.dtype).real.dtype
    jobz = (b"A" if full_matrices else b"S") if compute_uv else b"N"
    ucols, vtrows = ((m, n) if full_matrices else (k, k)) if compute_uv else (1, 1)
    s = np.empty((nb, k), real_dt)
    # Column-major outputs, one matrix per batch entry: u^T and vt^T read row-major.
    u = np.empty((nb, ucols, m) if compute_uv else (1, 1, 1), x.dtype)
    vt = np.empty((nb, n, vtrows) if compute_uv else (1, 1, 1), x.dtype)
    fn = b.fn("gesdd_c" if complex_ else "gesdd_r", x.dtype)
    M, N, LDU, LDVT = c.const(m), c.const(n), c.const(max(1, m)), c.const(max(1, vtrows))
    LDA = c.const(max(1, m))
    pa, ps = c.ptrs(f), c.ptrs(s)
    pu = c.ptrs(u) if compute_uv else c.ptrs(u) * nb
    pvt = c.ptrs(vt) if compute_uv else c.ptrs(vt) * nb
    if complex_:
        mx = max(m, n)
        n_rwork = max(5 * k * k + 5 * k, 2 * mx * k + 2 * k * k + k) if compute_uv else 7 * k
    n_iwork = 8 * max(1, k)

    def scratch():
        rwork = np.empty(max(1, n_rwork), real_dt) if complex_ else None
        return rwork, np.empty(n_iwork, b.idtype)

    def call(i, work, lw, rwork, iwork, info):
        args = [jobz, M, N, pa[i], LDA, ps[i], pu[i], LDU, pvt[i], LDVT, work, lw]
        if complex_:
            args.append(c.ffi.from_buffer(rwork))
        fn(*args, c.ffi.from_buffer(iwork), info, 1)

    work, lw = _workspace_cells(c, gesdd_workspace(x.dtype, m, n, compute_uv, full_matrices),
                                x.dtype)
    finite = np.isfinite(f).all(axis=(1, 2))
    failed = [i for i in range(nb) if not finite[i]]

    def body(indices):
        info = c.i()
        rwork, iwork = scratch()
        pw = c.ffi.from_buffer(np.empty_like(work))
        for i in indices:
            if finite[i]:
                call(i, pw, lw, rwork, iwork, info)
                if info[0] != 0:
                    failed.append(i)

    _each_matrix(nb, 4 * m * n * k + (8 * k ** 3 if compute_uv else 0), body)
    batch = x.shape[:-2]
    s[failed] = np.nan
    if not compute_uv:
        return [s.reshape(batch + (k,))]
    u[failed], vt[failed] = np.nan, np.nan
    return [s.reshape(batch + (k,)), _back(u, batch + (m, ucols)),
            _back(vt, batch + (vtrows, n))]


@threads_kernel
def gtsv(dl: np.ndarray, d: np.ndarray, du: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Solves tridiagonal systems (``dl[..., 0]``, ``du[..., -1]`` unused); a singular
    system's solution is all NaN."""
    b = binding()
    c = _Call(b)
    n = d.shape[-1]
    k = rhs.shape[-1]
    dd = np.array(d.reshape(-1, n), order="C", copy=True)
    lo = np.array(dl.reshape(-1, n)[:, 1:], order="C")  # copies: gtsv overwrites them
    up = np.array(du.reshape(-1, n)[:, :-1], order="C")
    if n == 1:  # keep one element so that the pointers stay valid
        lo, up = np.zeros((dd.shape[0], 1), d.dtype), np.zeros((dd.shape[0], 1), d.dtype)
    f = _flat_t(rhs)
    fn = b.fn("gtsv", d.dtype)
    N, K = c.i(n), c.i(k)
    pl, pd, pu, pb = c.ptrs(lo), c.ptrs(dd), c.ptrs(up), c.ptrs(f)
    failed = []

    def body(indices):
        info = c.i()
        for i in indices:
            fn(N, K, pl[i], pd[i], pu[i], pb[i], N, info)
            if info[0] != 0:
                failed.append(i)

    _each_matrix(len(pd), 8 * n * k, body)
    for i in failed:
        f[i] = np.nan
    return _back(f, rhs.shape)


@threads_kernel
def syevd(x: np.ndarray, *, lower: bool) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvectors (columns) and ascending eigenvalues of Hermitian matrices, reading the
    ``lower`` (or upper) triangle; a matrix where LAPACK fails gets NaNs."""
    b = binding()
    c = _Call(b)
    n = x.shape[-1]
    f = _flat_t(x)
    nb = f.shape[0]
    w = np.empty((nb, n), np.empty(0, x.dtype).real.dtype)
    uplo = b"L" if lower else b"U"
    N, info = c.i(n), c.i()
    pa, pw = c.ptrs(f), c.ptrs(w)
    if x.dtype.kind == "c":
        fn = b.fn("syevd_c", x.dtype)
        q_work, q_iwork, q_rwork = (np.zeros(1, t) for t in (x.dtype, b.idtype, w.dtype))
        fn(b"V", uplo, N, pa[0], N, pw[0], c.ffi.from_buffer(q_work), c.i(-1),
           c.ffi.from_buffer(q_rwork), c.i(-1), c.ffi.from_buffer(q_iwork), c.i(-1), info, 1, 1)
        rwork = np.empty(max(1, int(q_rwork[0])), w.dtype)
        extra = [rwork, c.i(rwork.size)]
        n_work, n_iwork = max(1, int(np.real(q_work[0]))), max(1, int(q_iwork[0]))
    else:
        fn = b.fn("syevd_r", x.dtype)
        n_work, n_iwork = syevd_workspace(x.dtype, n, lower)
        extra = []
    failed = []

    def body(indices):
        work, iwork, info = np.empty(n_work, x.dtype), np.empty(n_iwork, b.idtype), c.i()
        rest = [np.empty_like(a) for a in extra[::2]]  # (complex: its own rwork)
        args = [c.ffi.from_buffer(work), c.i(n_work)]
        for r, cell in zip(rest, extra[1::2]):
            args += [c.ffi.from_buffer(r), cell]
        args += [c.ffi.from_buffer(iwork), c.i(n_iwork), info]
        for i in indices:
            fn(b"V", uplo, N, pa[i], N, pw[i], *args, 1, 1)
            if info[0] != 0:
                failed.append(i)

    _each_matrix(nb, 9 * n ** 3, body)
    for i in failed:
        f[i], w[i] = np.nan, np.nan
    return _back(f, x.shape), w.reshape(x.shape[:-1])


def gemm_fn(dtype):
    """A raw column-major BLAS ``gemm`` for ``dtype`` and the binding's cffi objects:
    ``(fn, ffi, itype)`` (None when unavailable). For kernels that call it on pointers into
    their own buffers (``C = alpha op(A) op(B) + beta C``)."""
    b = binding()
    if b is None or np.dtype(dtype) not in _LETTER:
        return None
    return b.fn("gemm", np.dtype(dtype)), b.ffi, b.itype
