"""Kernels of a program's small LU and Cholesky factorizations and triangular solves.

The ``ember.linalg.lu``, ``cholesky`` and ``triangular_solve`` custom calls run LAPACK (or,
for batches, ``small_linalg_kernel``'s loops) through the library thunk, from Python: ~10-20
µs a call, and a loop holding one steps from Python at every iteration (Newton's method
on 16 unknowns: ~75 µs an iteration, JAX ~12). Real float32/float64 matrices of at most
``MAX_DIM`` rows are kernels of the program instead, whose work items are the batch's
matrices. Each calls ``small_linalg_kernel``'s routine for its dtype and side (a library
compiled once per machine and kept in the disk cache: in the program's module each
program would compile it again, ~0.1 s at O3) through a global of the program's code that
the executable sets (``executable.routine_global``):

- ``lu``: copies the matrices to the factor's buffer, then factors them in place, writing
  the 0-based pivots and the permutation;
- ``cholesky``: likewise, the lower factor over the lower triangle (the upper one kept, as
  LAPACK's ``potrf`` keeps it; a matrix that is not positive definite all NaN);
- ``triangular_solve`` with ``left_side`` (``op(a) x = b``): copies ``b`` to the result and
  solves in place, with ``a`` (or a transposed copy on the stack, for ``transpose_a``;
  ``conjugate_a`` changes nothing for real matrices). Right-side solves keep the library,
  as do solves of more than ``MAX_SOLVE_WORK`` multiply-adds per matrix past 16 rows.

The routines make the batched kernels' choices (``ember.lax._small_batch``: LAPACK's, so the
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
from ember.backends.cpu.executable import routine_global
from ember.backends.cpu.kernel_gen import I8P, KernelInfo, _c, address_slot
from ember.backends.cpu.scalar_ops import I64, UnsupportedOp
from ember.compiler.hlo import Instruction

LU_TARGET = "ember.linalg.lu"
SOLVE_TARGET = "ember.linalg.triangular_solve"
CHOLESKY_TARGET = "ember.linalg.cholesky"
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
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def is_native_linalg(inst: Instruction) -> bool:
    """Whether a lone ``inst`` is an LU or Cholesky factorization or a left-side triangular
    solve of small real matrices that a program kernel computes (the module docstring)."""
    if inst.opcode != "custom_call" or not inst.operands:
        return False
    target = inst.attrs.get("call_target_name")
    a = inst.operands[0]
    if a.shape.is_tuple or a.dtype not in _FLOATS or a.shape.rank < 2:
        return False
    m, n = a.dims[-2:]
    if m != n or not 0 < n <= MAX_DIM or 0 in a.dims:
        return False
    if target == LU_TARGET:
        leaves = inst.shape.leaves() if inst.shape.is_tuple else ()
        indices = a.dims[:-1]  # (the pivots and the permutation: int32, n per matrix)
        return len(inst.operands) == 1 and [(leaf.dtype, leaf.dims) for leaf in leaves] == \
            [(a.dtype, a.dims), (np.dtype(np.int32), indices), (np.dtype(np.int32), indices)]
    if target == CHOLESKY_TARGET:
        return len(inst.operands) == 1 and not inst.shape.is_tuple
    if target == SOLVE_TARGET:
        if len(inst.operands) != 2 or not inst.attrs.get("left_side"):
            return False
        b = inst.operands[1]
        return b.dtype == a.dtype and b.shape.rank == a.shape.rank and \
            b.dims[:-2] == a.dims[:-2] and b.dims[-2] == n and b.shape.size > 0 and (
                n <= small_linalg_kernel.MAX_DIM or n * n * b.dims[-1] <= MAX_SOLVE_WORK)
    return False


class LinalgKernel:
    """Emits one LU or Cholesky factorization or triangular solve into a
    ``KernelBuilder``'s function (a work item per matrix of the batch)."""

    def __init__(self, kb, inst: Instruction):
        if not is_native_linalg(inst):
            raise UnsupportedOp("a custom call without a native kernel")
        self.kb, self.b, self.inst = kb, kb.b, inst
        self.dtype = np.dtype(inst.operands[0].dtype)
        self.fty = S.memory_type(self.dtype)
        self.n = inst.operands[0].dims[-1]
        self.batch = math.prod(inst.operands[0].dims[:-2])

    def build(self, lo, hi) -> KernelInfo:
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
