"""Kernels of a program's LU and Cholesky factorizations, triangular solves, QR, SVD,
symmetric eigenproblems and eigenvalues.

The linear-algebra custom calls run LAPACK (or, for batches, ``small_linalg_kernel``'s
loops) through the library thunk, from Python: ~10-35 µs a call, and a loop holding one
steps from Python at every iteration (Newton's method on 16 unknowns: ~75 µs an iteration,
JAX ~12). Under jit they are kernels of the program instead, in two ways:

- LAPACK's own routine called from native code (``LinalgKernel._build_lapack``) for real
  matrices up to ``LAPACK_MAX_DIM`` rows: LU and Cholesky past ``MAX_DIM``, the triangular
  solves the small routines leave, QR, SVD and symmetric eigenproblems past
  ``small_linalg_kernel.MAX_DIM``, eigenvalues of general matrices; and complex64 LU,
  Cholesky and solves of any size. These are the library thunk's calls, with its workspace
  sizes, so its bits; matrices go to LAPACK's column-major order and back in 8 x 8 register
  tiles, in an arena scratch buffer the kernel asks for (``KernelInfo.scratch``), and the
  kernel runs under ``one_blas_thread`` as native ``gemm`` tasks do (``KernelInfo.blas``).
- Real matrices of at most ``MAX_DIM`` rows: the batch's matrices are the work items, each
  calling ``small_linalg_kernel``'s routine for its dtype and side (a library compiled once
  per machine and kept in the disk cache: in the program's module each program would
  compile it again, ~0.1 s at O3) through a global of the program's code that the
  executable sets (``executable.routine_global``). ``lu`` copies the matrices to the
  factor's buffer, then factors them in place, writing the 0-based pivots and the
  permutation; ``cholesky`` likewise, the lower factor over the lower triangle (the upper
  one kept, as LAPACK's ``potrf`` keeps it; a matrix that is not positive definite all
  NaN); ``triangular_solve`` with ``left_side`` (``op(a) x = b``) copies ``b`` to the
  result and solves in place, with ``a`` (or a transposed copy on the stack, for
  ``transpose_a``; ``conjugate_a`` changes nothing for real matrices). Right-side solves,
  and those of more than ``MAX_SOLVE_WORK`` multiply-adds per matrix past 16 rows, call
  LAPACK.

The small routines make the batched kernels' choices (``ember.lax._small_batch``: LAPACK's, so the
results agree with LAPACK's to rounding), but for a column holding a NaN, whose pivot is its
first NaN: OpenBLAS's vectorized search may pick another row there (the factors and
solutions are NaN either way).
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from ember.backends.cpu import scalar_ops as S
from ember.backends.cpu import small_linalg_kernel
from ember.backends.cpu.executable import LAPACK_ROUTINE, PARALLEL_MIN_WORK, routine_global
from ember.backends.cpu.kernel_gen import (
    I8P,
    TRANSPOSE_TILE,
    KernelInfo,
    _c,
    _transpose_block,
    address_slot,
)
from ember.backends.cpu.scalar_ops import I64, UnsupportedOp
from ember.compiler.hlo import Instruction
from ember.lax import _lapack

LU_TARGET = "ember.linalg.lu"
SOLVE_TARGET = "ember.linalg.triangular_solve"
CHOLESKY_TARGET = "ember.linalg.cholesky"
QR_TARGET = "ember.linalg.geqrf"
SVD_TARGET = "ember.linalg.svd"
EIGH_TARGET = "ember.linalg.eigh"
EIG_TARGET = "ember.linalg.eig"
Q_TARGET = "ember.linalg.householder_product"
# The largest side of a program's native matrices. Past ``small_linalg_kernel.MAX_DIM``
# (whose routines are compiled per side) a routine over run-time sides, one per kernel and
# dtype, runs them: as fast as the per-side code there, and up to 64 faster than LAPACK's
# call from Python (float32, one matrix: LU 32 5 us against ~22, 64 20 against 34; solves
# 1-7 against 11-15; Cholesky 64 17 against 22). At 96, LAPACK's blocked LU and Cholesky
# (~45-60 us) pull ahead of the unblocked loops.
MAX_DIM = 64
# ... and a solve past ``small_linalg_kernel.MAX_DIM`` only with at most this many
# multiply-adds per matrix (n * n * columns): the unblocked loop computes ~5 per ns, where
# LAPACK's blocked ``trsm`` takes over (64 x 64 by 16 columns: 13 us against 15; by 64, the
# solves of an inverse: 50 against 26).
MAX_SOLVE_WORK = 1 << 16
# Larger matrices, up to this many rows and columns, and the solves the small routines leave
# (right-side ones, those past ``MAX_SOLVE_WORK``) call LAPACK's routine from the kernel
# (``executable.LAPACK_ROUTINE``), on the calling thread as the library thunk calls it: the
# thunk's Python (~15-35 us a call: a 128 x 128 LU's 90 us held 55 of LAPACK) goes. Past
# it the library thunk runs them, letting OpenBLAS use its threads.
LAPACK_MAX_DIM = _lapack.SINGLE_THREAD_MAX_DIM
# The decompositions LAPACK implements itself give each matrix of a batch its own scratch
# (the matrices are work items, run on threads) while that takes at most this many bytes in
# all; a larger batch runs its matrices one after another in one scratch.
SCRATCH_MAX_BYTES = 1 << 26
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
# complex64 matrices take LAPACK's LU, Cholesky and solves too (their transposes move each
# element as one 64-bit integer)
_COMPLEX = np.dtype(np.complex64)
_COMPLEX_TARGETS = (LU_TARGET, CHOLESKY_TARGET, SOLVE_TARGET)


def is_native_linalg(inst: Instruction) -> bool:
    """Whether a lone ``inst`` is an LU or Cholesky factorization, a triangular solve, a
    QR, an SVD, a symmetric eigenproblem or the eigenvalues of matrices that a program
    kernel computes (the module docstring)."""
    return _native_kind(inst) is not None


def _native_kind(inst: Instruction) -> str | None:
    """``"small"`` where the kernel runs ``small_linalg_kernel``'s routine, ``"lapack"``
    where it calls LAPACK's, None where the library thunk runs ``inst``."""
    if inst.opcode != "custom_call" or not inst.operands:
        return None
    target = inst.attrs.get("call_target_name")
    a = inst.operands[0]
    complex_ = a.dtype == _COMPLEX and target in _COMPLEX_TARGETS
    if a.shape.is_tuple or a.dtype not in _FLOATS and not complex_ or a.shape.rank < 2:
        return None
    m, n = a.dims[-2:]
    if target in _DECOMPOSITIONS:
        return _decomposition_kind(inst)
    if m != n or not 0 < n <= LAPACK_MAX_DIM or 0 in a.dims:
        return None
    small = "small" if n <= MAX_DIM and not complex_ else _lapack_kind(target, a.dtype)
    if target == LU_TARGET:
        leaves = inst.shape.leaves() if inst.shape.is_tuple else ()
        indices = a.dims[:-1]  # (the pivots and the permutation: int32, n per matrix)
        ok = len(inst.operands) == 1 and [(leaf.dtype, leaf.dims) for leaf in leaves] == \
            [(a.dtype, a.dims), (np.dtype(np.int32), indices), (np.dtype(np.int32), indices)]
        return small if ok else None
    if target == CHOLESKY_TARGET:
        return small if len(inst.operands) == 1 and not inst.shape.is_tuple else None
    if target == SOLVE_TARGET:
        if len(inst.operands) != 2:
            return None
        b = inst.operands[1]
        left = bool(inst.attrs.get("left_side"))
        if b.dtype != a.dtype or b.shape.rank != a.shape.rank or b.dims[:-2] != a.dims[:-2] \
                or b.dims[-2 if left else -1] != n or b.shape.size == 0:
            return None
        if complex_ and inst.attrs.get("conjugate_a") and not inst.attrs.get("transpose_a"):
            return None  # (the library conjugates a copy of a)
        if left and small == "small" and (n <= small_linalg_kernel.MAX_DIM
                                          or n * n * b.dims[-1] <= MAX_SOLVE_WORK):
            return "small"
        if max(b.dims[-2:]) <= LAPACK_MAX_DIM:
            return _lapack_kind(target, a.dtype)
    return None


_DECOMPOSITIONS = (QR_TARGET, Q_TARGET, SVD_TARGET, EIGH_TARGET, EIG_TARGET)


def _decomposition_kind(inst: Instruction) -> str | None:
    """``"lapack"`` for a QR (``geqrf``), its Q (``householder_product``: ``orgqr``), an
    SVD (``gesdd``) or a symmetric eigenproblem (``syevd``) of real matrices with a side
    past ``small_linalg_kernel.MAX_DIM`` (smaller ones keep the library's vector-lane
    kernels for batches) and none past ``LAPACK_MAX_DIM``, all of its values (no
    ``subset_by_index``); or the eigenvalues alone of general matrices of any size up to
    ``LAPACK_MAX_DIM`` (``geev``, as ``_lapack.geev_values``)."""
    target = inst.attrs["call_target_name"]
    a = inst.operands[0]
    *batch, m, n = a.dims
    batch, k = tuple(batch), min(m, n)
    least = 0 if target == EIG_TARGET else small_linalg_kernel.MAX_DIM
    if 0 in a.dims or not least < max(m, n) <= LAPACK_MAX_DIM or \
            inst.attrs.get("subset_by_index") not in (None, "none"):
        return None
    operands = 1
    if target == QR_TARGET:
        results = [(a.dtype, a.dims), (a.dtype, batch + (k,))]
    elif target == Q_TARGET:
        taus = inst.operands[-1]
        operands = 2 if taus.dtype == a.dtype and taus.dims[:-1] == batch and \
            m >= n >= taus.dims[-1] else 0
        results = [(a.dtype, a.dims)]
    elif target == SVD_TARGET:
        results = [(a.dtype, batch + (k,))]
        if inst.attrs.get("compute_uv"):
            full = bool(inst.attrs.get("full_matrices"))
            results += [(a.dtype, batch + (m, m if full else k)),
                        (a.dtype, batch + (n if full else k, n))]
    elif target == EIGH_TARGET:
        operands = 1 if m == n else 0
        results = [(a.dtype, a.dims), (a.dtype, batch + (n,))]
    else:
        vectors = inst.attrs.get("compute_left_eigenvectors") or \
            inst.attrs.get("compute_right_eigenvectors")
        operands = 1 if m == n and not vectors else 0
        results = [(np.dtype(np.complex64 if a.dtype == np.float32 else np.complex128),
                    batch + (n,))]
    leaves = inst.shape.leaves() if inst.shape.is_tuple else [inst.shape]
    if len(inst.operands) != operands or [(x.dtype, x.dims) for x in leaves] != results:
        return None
    return _lapack_kind(target, a.dtype)


_LAPACK_KERNELS = {LU_TARGET: "getrf", CHOLESKY_TARGET: "potrf", SOLVE_TARGET: "trsm",
                   QR_TARGET: "geqrf", Q_TARGET: "orgqr", SVD_TARGET: "gesdd_r",
                   EIGH_TARGET: "syevd_r", EIG_TARGET: "geev_r"}


def _lapack_kind(target: str, dtype) -> str | None:
    """``"lapack"`` where this process's LAPACK routine for ``target`` can be called from
    native code (``_lapack.address``; not while tests turn the binding off)."""
    kernel = _LAPACK_KERNELS.get(target)
    return "lapack" if kernel is not None and _lapack.available() and \
        _lapack.address(kernel, dtype) else None


class LinalgKernel:
    """Emits one LU or Cholesky factorization or triangular solve into a
    ``KernelBuilder``'s function (a work item per matrix of the batch)."""

    def __init__(self, kb, inst: Instruction):
        self.kind = _native_kind(inst)
        if self.kind is None:
            raise UnsupportedOp("a custom call without a native kernel")
        self.kb, self.b, self.inst = kb, kb.b, inst
        self.dtype = np.dtype(inst.operands[0].dtype)
        self.fty = S.memory_type(self.dtype)
        self.n = inst.operands[0].dims[-1]
        self.batch = math.prod(inst.operands[0].dims[:-2])

    def build(self, lo, hi) -> KernelInfo:
        if self.kind == "lapack":
            return self._build_lapack(lo, hi)
        kb, n = self.kb, self.n
        lo, hi = kb._clamp_range(lo, hi, self.batch)
        ptrs = [kb.param_ptrs[id(p)] for p in kb.fused.parameters]
        target = self.inst.attrs["call_target_name"]
        if target == LU_TARGET:
            self._lu(ptrs[0], kb.out_ptrs, lo, hi)
            work = n * n * n
        elif target == CHOLESKY_TARGET:
            self._cholesky(ptrs[0], kb.out_ptrs[0], lo, hi)
            work = n * n * n
        else:
            cols = self.inst.operands[1].dims[-1]
            self._solve(ptrs[0], ptrs[1], kb.out_ptrs[0], cols, lo, hi)
            work = n * n * cols
        return KernelInfo(kb.name, self.batch, max(1, work), ())

    def _routine(self, kernel: str) -> ir.Value:
        """``small_linalg_kernel``'s routine for this dtype and side (any side past its
        ``MAX_DIM``), a library compiled once per machine (its disk cache), called
        through a global of the program's module that the executable sets
        (``executable.routine_global``)."""
        side = self.n if self.n <= small_linalg_kernel.MAX_DIM else None
        routine = (kernel, self.dtype.name, side)
        if small_linalg_kernel.kernel(kernel, self.dtype, side) is None:
            raise UnsupportedOp(f"no native {kernel} routine")  # (the library thunk runs it)
        self.kb.routines.append(routine)
        prefix = self.kb.name.rsplit("_kernel_", 1)[0]  # (``ProgramBuilder._try_kernel``)
        slot = address_slot(self.kb.module, routine_global(prefix, routine))
        fn_type = ir.FunctionType(ir.VoidType(), [I8P.as_pointer(), I64, I64])
        return self.b.bitcast(self.b.load(slot), fn_type.as_pointer())

    def _buffers(self, pointers: list, dims: list) -> ir.Value:
        """An ``i8**`` of ``pointers`` and then of the int64 ``dims`` (the routine's last
        buffer), on the stack."""
        b, loops = self.b, self.kb.loops
        table = loops.alloca(ir.ArrayType(I8P, len(pointers) + 1))
        sizes = loops.alloca(ir.ArrayType(I64, 4))
        for k, v in enumerate(dims + [0] * (4 - len(dims))):
            b.store(v if isinstance(v, ir.Value) else _c(v), b.gep(sizes, [_c(0), _c(k)]))
        for k, p in enumerate([*pointers, sizes]):
            b.store(b.bitcast(p, I8P), b.gep(table, [_c(0), _c(k)]))
        return b.bitcast(table, I8P.as_pointer())

    def _copy(self, dst, src, lo, hi, per_item: int) -> None:
        """Copies work items ``[lo, hi)`` of ``per_item`` elements from ``src`` to ``dst``."""
        b = self.b
        memcpy = self.kb.module.declare_intrinsic("llvm.memcpy", [I8P, I8P, I64])
        start = b.mul(lo, _c(per_item))
        nbytes = b.mul(b.sub(hi, lo), _c(per_item * self.dtype.itemsize))
        b.call(memcpy, [b.bitcast(b.gep(dst, [start], inbounds=True), I8P),
                        b.bitcast(b.gep(src, [start], inbounds=True), I8P), nbytes,
                        ir.Constant(ir.IntType(1), 0)])

    def _lu(self, x, outs, lo, hi) -> None:
        b, n = self.b, self.n
        lu, pivots, permutation = outs
        with b.if_then(b.icmp_signed("<", lo, hi)):
            self._copy(lu, x, lo, hi, n * n)
            b.call(self._routine("getrf"),
                   [self._buffers([lu, pivots, permutation], [n, n]), lo, hi])

    def _cholesky(self, x, factor, lo, hi) -> None:
        b, n = self.b, self.n
        with b.if_then(b.icmp_signed("<", lo, hi)):
            self._copy(factor, x, lo, hi, n * n)
            b.call(self._routine("potrf"), [self._buffers([factor], [n]), lo, hi])

    def _solve(self, a, rhs, x, cols: int, lo, hi) -> None:
        b, kb, n, attrs = self.b, self.kb, self.n, self.inst.attrs
        transpose = bool(attrs.get("transpose_a"))
        lower = bool(attrs.get("lower")) != transpose
        dims = [n, cols, int(lower), int(bool(attrs.get("unit_diagonal")))]
        solve = self._routine("trsm")
        with b.if_then(b.icmp_signed("<", lo, hi)):
            self._copy(x, rhs, lo, hi, n * cols)
            if not transpose:
                b.call(solve, [self._buffers([a, x], dims), lo, hi])
                return
            # (each matrix transposed into a stack copy, then solved alone)
            square = kb.loops.alloca(ir.ArrayType(self.fty, n * n))
            t = b.bitcast(square, self.fty.as_pointer())
            buffers = self._buffers([t, x], dims)
            slots = b.bitcast(buffers, I8P.as_pointer())

            def matrix(e):
                base = b.mul(e, _c(n * n))

                def entry(q):  # t[i, j] = a[j, i], q = i * n + j
                    i, j = b.udiv(q, _c(n)), b.urem(q, _c(n))
                    src = b.gep(a, [b.add(base, b.add(b.mul(j, _c(n)), i))], inbounds=True)
                    b.store(b.load(src), b.gep(t, [q], inbounds=True))
                kb.loops.loop(_c(0), _c(n * n), entry, name="transpose", unroll=False)
                column = b.gep(x, [b.mul(e, _c(n * cols))], inbounds=True)
                b.store(b.bitcast(column, I8P), b.gep(slots, [_c(1)]))
                b.call(solve, [buffers, _c(0), _c(1)])
            kb.loops.loop(lo, hi, matrix, name="matrices", unroll=False)

    # ------------------------------------------------------------ LAPACK's routines

    def _build_lapack(self, lo, hi) -> KernelInfo:
        """One work item, all the matrices in turn (OpenBLAS's LU, Cholesky and ``trsm``
        ran no faster from two threads at once: ``_lapack.PARALLEL_MIN_FLOPS``); the
        decompositions LAPACK itself implements take a work item per matrix
        (``_build_qr``, ``_build_svd``, ``_build_eigh``)."""
        kb, b, n = self.kb, self.b, self.n
        ptrs = [kb.param_ptrs[id(p)] for p in kb.fused.parameters]
        target = self.inst.attrs["call_target_name"]
        if target in _DECOMPOSITIONS:
            build = {SVD_TARGET: self._build_svd, EIGH_TARGET: self._build_eigh,
                     EIG_TARGET: self._build_eig}.get(target, self._build_qr)
            return build(lo, hi, ptrs)
        lo, hi = kb._clamp_range(lo, hi, 1)
        scratch = 0
        with b.if_then(b.icmp_signed("<", lo, hi)):
            if target == LU_TARGET:
                square = b.bitcast(self._scratch(), self.fty.as_pointer())
                kb.loops.loop(_c(0), _c(self.batch), lambda e: self._lapack_lu(
                    ptrs[0], kb.out_ptrs, e, square), name="matrices", unroll=False)
                work = n * n * n
                scratch = n * n * self.dtype.itemsize
            elif target == CHOLESKY_TARGET:
                kb.loops.loop(_c(0), _c(self.batch), lambda e: self._lapack_cholesky(
                    ptrs[0], kb.out_ptrs[0], e), name="matrices", unroll=False)
                work = n * n * n
            else:
                rhs = self.inst.operands[1].dims[-2:]
                kb.loops.loop(_c(0), _c(self.batch), lambda e: self._lapack_solve(
                    ptrs[0], ptrs[1], kb.out_ptrs[0], rhs, e), name="matrices", unroll=False)
                work = n * math.prod(rhs)
        return KernelInfo(kb.name, 1, max(1, self.batch * work), (), blas=True,
                          scratch=scratch)

    def _constant(self, value: float) -> ir.Constant:
        """``value`` as an element of the matrices (complex: ``value + 0j``, as NumPy
        stores a float into a complex array)."""
        if self.dtype.kind == "c":
            part = self.fty.element
            return ir.Constant(self.fty, [ir.Constant(part, value), ir.Constant(part, 0.0)])
        return ir.Constant(self.fty, value)

    def _scratch(self) -> ir.Value:
        """The ``i8*`` of the kernel's scratch buffer (``KernelInfo.scratch``: the buffer
        after its outputs)."""
        kb = self.kb
        index = len(kb.fused.parameters) + len(kb.out_ptrs)
        return self.b.load(self.b.gep(kb.fn.args[0], [_c(index)], inbounds=True))

    def _each_matrix(self, lo, hi, each: int, work: int, body) -> KernelInfo:
        """Emits ``body(e, scratch)`` for the batch's matrices ``e``, ``scratch`` an ``i8*``
        to ``each`` bytes of the kernel's scratch buffer; returns the kernel's info. The
        matrices are the work items, each with its own scratch (LAPACK's own routines gain
        from two threads at once: ``_lapack.PARALLEL_MIN_FLOPS``; ``work`` flops each, counted
        so that a batch splits where ``_lapack``'s does), up to ``SCRATCH_MAX_BYTES`` of
        scratch; past it one work item runs them all in one scratch."""
        kb, b = self.kb, self.b
        scratch = self._scratch()
        work = max(1, work * PARALLEL_MIN_WORK // int(_lapack.PARALLEL_MIN_FLOPS))
        if self.batch * each <= SCRATCH_MAX_BYTES:
            lo, hi = kb._clamp_range(lo, hi, self.batch)
            kb.loops.loop(lo, hi, lambda e: body(e, b.gep(scratch, [b.mul(e, _c(each))],
                                                          inbounds=True)),
                          name="matrices", unroll=False)
            return KernelInfo(kb.name, self.batch, work, (), blas=True,
                              scratch=self.batch * each)
        lo, hi = kb._clamp_range(lo, hi, 1)
        with b.if_then(b.icmp_signed("<", lo, hi)):
            kb.loops.loop(_c(0), _c(self.batch), lambda e: body(e, scratch),
                          name="matrices", unroll=False)
        return KernelInfo(kb.name, 1, self.batch * work, (), blas=True, scratch=each)

    def _build_qr(self, lo, hi, ptrs) -> KernelInfo:
        """``geqrf`` or ``orgqr`` of each matrix in its scratch (``_each_matrix``): the
        matrix transposed there (LAPACK's column-major order), then LAPACK's workspace (the
        size ``_lapack``'s kernels query: ``_lapack.workspace``); the result transposed
        back."""
        kb, b = self.kb, self.b
        a = self.inst.operands[0]
        m, n = a.dims[-2:]
        geqrf = self.inst.attrs["call_target_name"] == QR_TARGET
        k = min(m, n) if geqrf else self.inst.operands[1].dims[-1]
        kernel = "geqrf" if geqrf else "orgqr"
        lwork = _lapack.workspace(kernel, self.dtype, m, n, k)
        taus = ptrs[1] if not geqrf else kb.out_ptrs[1]
        result = kb.out_ptrs[0]

        def matrix(e, scratch):
            square = b.bitcast(scratch, self.fty.as_pointer())
            work = b.gep(square, [_c(m * n)], inbounds=True)
            self._transpose(square, self._matrix(ptrs[0], e, m * n), m, n)
            rows, cols, info = self._cell(m), self._cell(n), self._cell(0)
            t = self._matrix(taus, e, k)
            size = [rows, cols] if geqrf else [rows, cols, self._cell(k)]
            self._lapack(kernel, [*size, square, rows, t, work, self._cell(lwork), info])
            self._transpose(self._matrix(result, e, m * n), square, n, m)

        return self._each_matrix(lo, hi, (m * n + lwork) * self.dtype.itemsize,
                                 2 * m * n * k, matrix)

    def _build_svd(self, lo, hi, ptrs) -> KernelInfo:
        """``gesdd`` of each matrix as ``_lapack.gesdd`` calls it, in its scratch
        (``_each_matrix``): the matrix transposed (column-major), u and vt as LAPACK writes them
        (column-major, transposed into the results), the workspace (``gesdd_workspace``),
        then the integer workspace. A matrix holding a NaN or inf, or one LAPACK fails on,
        gets all NaN results (JAX's answer there)."""
        kb, b = self.kb, self.b
        m, n = self.inst.operands[0].dims[-2:]
        k = min(m, n)
        uv = bool(self.inst.attrs.get("compute_uv"))
        full = bool(self.inst.attrs.get("full_matrices"))
        ucols, vtrows = ((m, n) if full else (k, k)) if uv else (1, 1)
        lwork = _lapack.gesdd_workspace(self.dtype, m, n, uv, full)
        floats = self._aligned(m * n + (m * ucols + n * vtrows if uv else 1) + lwork)
        each = floats * self.dtype.itemsize + 8 * 8 * k  # (bytes: floats, then integers)
        results = [(kb.out_ptrs[0], k)]
        if uv:
            results += [(kb.out_ptrs[1], m * ucols), (kb.out_ptrs[2], vtrows * n)]
        ptr = self.fty.as_pointer()

        def matrix(e, base):
            a = b.bitcast(base, ptr)
            u = b.gep(a, [_c(m * n)], inbounds=True)
            vt = b.gep(u, [_c(m * ucols if uv else 0)], inbounds=True)
            work = b.gep(vt, [_c(n * vtrows if uv else 1)], inbounds=True)
            iwork = b.bitcast(b.gep(base, [_c(floats * self.dtype.itemsize)], inbounds=True),
                              I64.as_pointer())
            x = self._matrix(ptrs[0], e, m * n)
            finite = self._all_finite(x, m * n)
            info = self._cell(0)
            with b.if_then(finite):
                self._transpose(a, x, m, n)
                job = self._cell(ord(("A" if full else "S") if uv else "N"), S.I8)
                rows = self._cell(m)
                self._lapack("gesdd_r", [job, rows, self._cell(n), a, rows,
                                         self._matrix(kb.out_ptrs[0], e, k), u, rows, vt,
                                         self._cell(max(1, vtrows)), work, self._cell(lwork),
                                         iwork, info, _c(1)])
            ok = b.and_(finite, b.icmp_signed("==", b.load(info), _c(0)))
            with b.if_else(ok) as (good, bad):
                with good:
                    if uv:
                        self._transpose(self._matrix(kb.out_ptrs[1], e, m * ucols), u,
                                        ucols, m)
                        self._transpose(self._matrix(kb.out_ptrs[2], e, vtrows * n), vt,
                                        n, vtrows)
                with bad:
                    for out, size in results:
                        self._fill_nan(self._matrix(out, e, size), size)

        return self._each_matrix(lo, hi, each, 4 * m * n * k + (8 * k ** 3 if uv else 0),
                                 matrix)

    def _aligned(self, floats: int) -> int:
        """``floats`` elements rounded up to a whole number of 8 bytes (the 64-bit integer
        workspace that follows them in a scratch buffer stays aligned)."""
        return floats + -floats % (8 // self.dtype.itemsize)

    def _fill_nan(self, dst, size: int) -> None:
        """Stores NaN (complex: NaN + 0j) into the ``size`` elements at ``dst``."""
        b, nan = self.b, self._constant(float("nan"))
        self.kb.loops.loop(_c(0), _c(size), lambda q: b.store(
            nan, b.gep(dst, [q], inbounds=True)), name="nans")

    def _all_finite(self, x, size: int) -> ir.Value:
        """Whether the ``size`` elements at ``x`` are all finite (an ``i1``)."""
        b = self.b
        inf = ir.Constant(self.fty, float("inf"))
        fabs = self.kb.module.declare_intrinsic("llvm.fabs", [self.fty])
        finite = self.kb.loops.alloca(ir.IntType(1))
        b.store(ir.Constant(ir.IntType(1), 1), finite)

        def check(q):  # (|x| < inf: false for inf and NaN)
            size = b.call(fabs, [b.load(b.gep(x, [q], inbounds=True))])
            b.store(b.and_(b.load(finite), b.fcmp_ordered("<", size, inf)), finite)
        self.kb.loops.loop(_c(0), _c(size), check, name="finite")
        return b.load(finite)

    def _build_eig(self, lo, hi, ptrs) -> KernelInfo:
        """The eigenvalues of each general matrix as ``_lapack.geev_values`` computes them
        (``geev`` without vectors), in its scratch (``_each_matrix``): the matrix transposed
        (column-major), the real and imaginary parts, the workspace (``geev_workspace``);
        then the complex results. A matrix with a NaN or inf (LAPACK is not called: it
        rejects one with a message), or where the QR iteration fails, gets NaN values."""
        kb, b, n = self.kb, self.b, self.n
        lwork = _lapack.geev_workspace(self.dtype, n)
        values = kb.out_ptrs[0]  # (complex: pairs of this dtype)
        null = ir.Constant(self.fty.as_pointer(), None)
        nan = ir.Constant(self.fty, float("nan"))

        def matrix(e, scratch):
            a = b.bitcast(scratch, self.fty.as_pointer())
            real = b.gep(a, [_c(n * n)], inbounds=True)
            imag = b.gep(real, [_c(n)], inbounds=True)
            work = b.gep(imag, [_c(n)], inbounds=True)
            x = self._matrix(ptrs[0], e, n * n)
            finite = self._all_finite(x, n * n)
            info = self._cell(0)
            with b.if_then(finite):
                self._transpose(a, x, n, n)
                job, side, one = self._cell(ord("N"), S.I8), self._cell(n), self._cell(1)
                self._lapack("geev_r", [job, job, side, a, side, real, imag, null, one, null,
                                        one, work, self._cell(lwork), info, _c(1), _c(1)])
            ok = b.and_(finite, b.icmp_signed("==", b.load(info), _c(0)))
            out = self._matrix(values, e, n)

            def value(i):
                for part, source in ((0, real), (1, imag)):
                    v = b.select(ok, b.load(b.gep(source, [i], inbounds=True)), nan)
                    b.store(v, b.gep(out, [i, ir.Constant(S.I32, part)], inbounds=True))
            kb.loops.loop(_c(0), _c(n), value, name="values")

        return self._each_matrix(lo, hi, (n * n + 2 * n + lwork) * self.dtype.itemsize,
                                 10 * n ** 3, matrix)

    def _build_eigh(self, lo, hi, ptrs) -> KernelInfo:
        """``syevd`` of each matrix as ``_lapack.syevd`` calls it, in its scratch
        (``_each_matrix``): the matrix transposed there (column-major), overwritten by the
        vectors (columns) and transposed into the results; then the workspaces
        (``syevd_workspace``). A matrix LAPACK fails on gets all NaN."""
        kb, b, n = self.kb, self.b, self.n
        lower = bool(self.inst.attrs.get("lower"))
        lwork, liwork = _lapack.syevd_workspace(self.dtype, n, lower)
        floats = self._aligned(n * n + lwork)
        each = floats * self.dtype.itemsize + 8 * liwork  # (bytes)
        vectors, values = kb.out_ptrs

        def matrix(e, base):
            square = b.bitcast(base, self.fty.as_pointer())
            work = b.gep(square, [_c(n * n)], inbounds=True)
            iwork = b.bitcast(b.gep(base, [_c(floats * self.dtype.itemsize)], inbounds=True),
                              I64.as_pointer())
            v, w = self._matrix(vectors, e, n * n), self._matrix(values, e, n)
            self._transpose(square, self._matrix(ptrs[0], e, n * n), n, n)
            side, info = self._cell(n), self._cell(0)
            self._lapack("syevd_r", [self._cell(ord("V"), S.I8),
                                     self._cell(ord("L" if lower else "U"), S.I8), side,
                                     square, side, w, work, self._cell(lwork), iwork,
                                     self._cell(liwork), info, _c(1), _c(1)])
            with b.if_else(b.icmp_signed("==", b.load(info), _c(0))) as (good, bad):
                with good:
                    self._transpose(v, square, n, n)
                with bad:
                    self._fill_nan(v, n * n)
                    self._fill_nan(w, n)

        return self._each_matrix(lo, hi, each, 9 * n ** 3, matrix)

    def _transpose(self, dst, src, rows: int, cols: int) -> None:
        """``dst`` (cols x rows) = ``src`` (rows x cols) transposed, for distinct buffers:
        whole 8 x 8 tiles through registers (``_transpose_block``), the edges element by
        element."""
        b, loops, t = self.b, self.kb.loops, TRANSPOSE_TILE
        if self.dtype.kind == "c":  # (each complex64 element moved as one integer)
            word = ir.IntType(8 * self.dtype.itemsize).as_pointer()
            dst, src = b.bitcast(dst, word), b.bitcast(src, word)
            vec = ir.VectorType(word.pointee, t).as_pointer()
        else:
            vec = ir.VectorType(self.fty, t).as_pointer()
        align = self.dtype.itemsize
        row_tiles, col_tiles = rows // t, cols // t

        def at(ptr, i, j, width):
            return b.gep(ptr, [b.add(b.mul(i, _c(width)), j)], inbounds=True)

        def tile(ti, tj):
            i0, j0 = b.mul(ti, _c(t)), b.mul(tj, _c(t))
            block = [b.load(b.bitcast(at(src, b.add(i0, _c(r)), j0, cols), vec), align=align)
                     for r in range(t)]
            for c, column in enumerate(_transpose_block(b, block)):
                b.store(column, b.bitcast(at(dst, b.add(j0, _c(c)), i0, rows), vec),
                        align=align)

        def element(i, j):
            b.store(b.load(at(src, i, j, cols)), at(dst, j, i, rows))

        if row_tiles and col_tiles:
            loops.loop(_c(0), _c(row_tiles), lambda ti: loops.loop(
                _c(0), _c(col_tiles), lambda tj: tile(ti, tj), name="tj", unroll=False,
                vectorize=False), name="ti", unroll=False, vectorize=False)
        if col_tiles * t < cols:  # (the last columns of the tiles' rows)
            loops.loop(_c(0), _c(row_tiles * t), lambda i: loops.loop(
                _c(col_tiles * t), _c(cols), lambda j: element(i, j), name="ej",
                vectorize=False), name="ei", unroll=False, vectorize=False)
        if row_tiles * t < rows:  # (the last rows, whole)
            loops.loop(_c(row_tiles * t), _c(rows), lambda i: loops.loop(
                _c(0), _c(cols), lambda j: element(i, j), name="rj", vectorize=False),
                name="ri", unroll=False, vectorize=False)

    def _lapack(self, kernel: str, arguments: list) -> None:
        """Calls LAPACK's ``kernel`` for this dtype through a global of the program's module
        that the executable sets (``executable.LAPACK_ROUTINE``): ``arguments`` are pointers
        (Fortran's convention), then the hidden lengths of the character ones."""
        routine = (kernel, self.dtype.name, LAPACK_ROUTINE)
        self.kb.routines.append(routine)
        prefix = self.kb.name.rsplit("_kernel_", 1)[0]  # (``ProgramBuilder._try_kernel``)
        slot = address_slot(self.kb.module, routine_global(prefix, routine))
        fn_type = ir.FunctionType(ir.VoidType(), [v.type for v in arguments])
        self.b.call(self.b.bitcast(self.b.load(slot), fn_type.as_pointer()), arguments)

    def _cell(self, value: int, ty=I64) -> ir.Value:
        """A stack cell holding ``value`` (an integer or character argument)."""
        cell = self.kb.loops.alloca(ty)
        self.b.store(ir.Constant(ty, value), cell)
        return cell

    def _matrix(self, ptr, e, size: int):
        return self.b.gep(ptr, [self.b.mul(e, _c(size))], inbounds=True)

    def _lapack_lu(self, x, outs, e, square) -> None:
        """LU of matrix ``e``: transposed into ``square`` (LAPACK's column-major order),
        factored there by ``getrf`` and transposed into the factor's buffer; the pivots
        0-based, and the permutation their row swaps applied in turn to 0 .. n-1 (as
        ``_lapack.getrf``)."""
        b, n = self.b, self.n
        lu, pivots, permutation = outs
        self._transpose(square, self._matrix(x, e, n * n), n, n)
        ipiv = self.kb.loops.alloca(ir.ArrayType(I64, n))
        ipiv = b.bitcast(ipiv, I64.as_pointer())
        side, info = self._cell(n), self._cell(0)
        self._lapack("getrf", [side, side, square, side, ipiv, info])
        self._transpose(self._matrix(lu, e, n * n), square, n, n)
        piv, perm = self._matrix(pivots, e, n), self._matrix(permutation, e, n)
        loops = self.kb.loops
        loops.loop(_c(0), _c(n), lambda i: b.store(
            b.trunc(i, S.I32), b.gep(perm, [i], inbounds=True)), name="iota")

        def swap(i):
            p = b.sub(b.load(b.gep(ipiv, [i], inbounds=True)), _c(1))
            # (LAPACK's pivots lie in [i, n): clamped all the same, never out of bounds)
            p = b.select(b.icmp_unsigned("<", p, _c(n)), p, i)
            b.store(b.trunc(p, S.I32), b.gep(piv, [i], inbounds=True))
            x, y = b.gep(perm, [i], inbounds=True), b.gep(perm, [p], inbounds=True)
            vx, vy = b.load(x), b.load(y)
            b.store(vy, x)
            b.store(vx, y)
        loops.loop(_c(0), _c(n), swap, name="pivots", unroll=False, vectorize=False)

    def _lapack_cholesky(self, x, factor, e) -> None:
        """Cholesky of matrix ``e`` as ``_lapack.potrf``: its copy, read column-major, is its
        transpose, whose upper factor is the lower one read row-major; a matrix that is not
        positive definite all NaN."""
        b, n = self.b, self.n
        f = self._matrix(factor, e, n * n)
        self._copy(factor, x, e, b.add(e, _c(1)), n * n)
        info = self._cell(0)
        self._lapack("potrf", [self._cell(ord("U"), S.I8), self._cell(n), f, self._cell(n),
                               info, _c(1)])
        with b.if_then(b.icmp_signed("!=", b.load(info), _c(0))):
            self._fill_nan(f, n * n)

    def _lapack_solve(self, a, rhs, x, dims: tuple, e) -> None:
        """Triangular solve of matrix ``e`` as ``_lapack.trsm`` for a row-major ``a``: ``b``
        copied to ``x``, which read column-major is x^T, and ``op(a) x = b`` solved as
        ``x^T op(a)^T = b^T`` (the other side for ``x op(a) = b``) with ``a`` read
        column-major as a^T: its other triangle, ``op`` kept."""
        b, n, attrs = self.b, self.n, self.inst.attrs
        rows, cols = dims
        self._copy(x, rhs, e, b.add(e, _c(1)), rows * cols)
        flags = _lapack.trsm_flags(
            bool(attrs.get("left_side")), bool(attrs.get("lower")),
            bool(attrs.get("transpose_a")),
            bool(attrs.get("conjugate_a")) and self.dtype.kind == "c",
            bool(attrs.get("unit_diagonal")))
        flags = [self._cell(flag[0], S.I8) for flag in flags]
        one = self.kb.loops.alloca(self.fty)
        b.store(self._constant(1.0), one)
        self._lapack("trsm", [*flags, self._cell(cols), self._cell(rows), one,
                              self._matrix(a, e, n * n), self._cell(n),
                              self._matrix(x, e, rows * cols), self._cell(cols),
                              *[_c(1)] * 4])
