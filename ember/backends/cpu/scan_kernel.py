"""Kernels of cumulative scans: a ``reduce_window`` whose window covers a whole dim from one
end (``reduce_window.scan_axis``), as ``cumsum``, ``cumprod``, ``cummax``... lower to.

Each output element combines the previous one's accumulator with one input element, so a
line along the scanned dim is sequential. A work item scans a block of lines at once, one
accumulator per line in a stack array, and steps along the dim with an inner loop over the
block: contiguous lines (the scanned dim is not the minor one) make that loop a vector loop;
lines that are rows (the minor dim scanned) are independent chains the CPU overlaps.

The accumulators follow the evaluator's rule (``reduce_window.scan_accumulate``) bit for
bit: float sums of 32 bits or fewer accumulate in float64, each prefix rounded once; every
other scan accumulates in the element type. The init value must be the combiner's identity
(the caller checks, ``reduce_window.prefix_scan``): a line starts from its first element.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from ember.backends.cpu import scalar_ops as S
from ember.backends.cpu.kernel_gen import KernelInfo, _c
from ember.backends.cpu.scalar_ops import UnsupportedOp
from ember.compiler.hlo import Instruction
from ember.compiler.reduce_window import SCAN_OPCODES

# Lines per work item when they are contiguous (the minor dim is not scanned) ...
CONTIGUOUS_BLOCK = 256
# ... and when they are rows (the minor dim is scanned): a few independent chains, whose
# rows (often a power of two bytes apart) do not evict each other from the L1 cache.
ROW_BLOCK = 4


class ScanKernel:
    """Emits the loops of one scan into a ``KernelBuilder``'s function."""

    def __init__(self, kb, inst: Instruction, axis: int, reverse: bool, opcode: str | None):
        if len(inst.operands) != 2:
            raise UnsupportedOp("reduce_window of several operands")
        self.kb, self.b, self.inst = kb, kb.b, inst
        self.axis, self.reverse = axis, reverse
        self.dtype = inst.dtype
        self.opcode = opcode
        if self.opcode not in SCAN_OPCODES:
            raise UnsupportedOp("a scan whose body is not add/multiply/maximum/minimum")
        self.wide = self.opcode == "add" and S.is_float(self.dtype) and self.dtype.itemsize <= 4
        self.acc_type = S.F64 if self.wide else S.value_type(self.dtype)

    def build(self, lo, hi) -> KernelInfo:
        b, kb = self.b, self.kb
        dims = self.inst.dims
        if not math.prod(dims):  # (no lines, or lines of no elements: nothing to scan)
            return KernelInfo(kb.name, 0, 0, ())
        n = dims[self.axis]
        outer, inner = math.prod(dims[:self.axis]), math.prod(dims[self.axis + 1:])
        if inner > 1:  # a block of contiguous lines of one outer index
            block = min(inner, CONTIGUOUS_BLOCK)
            per_outer = -(-inner // block)
            extent = outer * per_outer
        else:  # a block of rows
            block = min(outer, ROW_BLOCK)
            extent = -(-outer // block) if outer else 0
        lo, hi = kb._clamp_range(lo, hi, extent)
        operand = kb.param_ptrs[id(kb.fused.parameters[0])]
        out = kb.out_ptrs[0]
        acc = kb.loops.alloca(ir.ArrayType(self.acc_type, block), name="acc")

        def item(t):
            if inner > 1:
                o, part = b.sdiv(t, _c(per_outer)), b.srem(t, _c(per_outer))
                lead = b.mul(part, _c(block))  # the block's first line
                base = b.add(b.mul(o, _c(n * inner)), lead)
                width = b.sub(_c(inner), lead)
                step_k, step_j = inner, 1
            else:
                lead = b.mul(t, _c(block))
                base = b.mul(lead, _c(n))
                width = b.sub(_c(outer), lead)
                step_k, step_j = 1, n
            width = b.select(b.icmp_signed("<", width, _c(block)), width, _c(block))

            def scan(width):
                def step(kk, first=False):
                    k = b.sub(_c(n - 1), kk) if self.reverse else kk
                    row = b.add(base, b.mul(k, _c(step_k)))

                    def line(j):
                        at = b.add(row, b.mul(j, _c(step_j)))
                        x = S.load(b, b.gep(operand, [at], inbounds=True), self.dtype)
                        slot = b.gep(acc, [_c(0), j], inbounds=True)
                        value = self._widen(x) if first else self._combine(b.load(slot), x)
                        b.store(value, slot)
                        S.store(b, self._narrow(value), b.gep(out, [at], inbounds=True),
                                self.dtype)
                    kb.loops.loop(_c(0), width, line, name="line")
                step(_c(0), first=True)  # (the init, the identity, is left out)
                kb.loops.loop(_c(1), _c(n), step, name="k", unroll=False)
            # A full block has a constant width: its line loop unrolls and the accumulators
            # become registers.
            with b.if_else(b.icmp_signed("==", width, _c(block))) as (full, partial):
                with full:
                    scan(_c(block))
                with partial:
                    scan(width)
        kb.loops.loop(lo, hi, item, name="item")
        return KernelInfo(kb.name, extent, n * block, ())

    def _widen(self, v):
        return self.b.fpext(v, S.F64) if self.wide and v.type != S.F64 else v

    def _narrow(self, v):
        if not self.wide or self.dtype.itemsize == 8:
            return v
        return S.convert(self.b, v, np.dtype(np.float64), self.dtype)

    def _combine(self, acc, x):
        b, dt, op = self.b, self.dtype, self.opcode
        if self.wide:
            return b.fadd(acc, self._widen(x))
        return S.binary(b, op, acc, x, dt, dt, {})
