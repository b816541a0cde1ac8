"""Batched small matrix products (``(B, m, k) @ (B, k, n)`` for a few elements per matrix),
vectorized across the batch: one batch element per vector lane.

The looped small-dot kernel (``kernel_gen.KernelBuilder._small_dot``) computes each output
element on its own, with index arithmetic per element and the operands' elements gathered
across lanes. Here a block of ``lanes`` consecutive batch elements is loaded as contiguous
vectors and rearranged by shuffles into one vector per matrix element
(``short_rows.load_columns``: lane ``t`` holds batch element ``t``), the ``m * n`` results
are straight-line vector code over those (their ``k`` products summed in order, as the
looped kernel does, so the results are the same bits), and the result vectors are
rearranged back into the block (``short_rows.store_columns``). The last block of a range
ends at the range's end, overlapping elements computed already (same code, same values).

A dot qualifies when it stands alone (its operands the fusion's parameters), its batch dims
lead both operands in order, operands and result share a dtype of at least 4 bytes that is
its own accumulation type (float32/64, 32/64-bit integers), the looped kernel takes it too
(``is_small_dot``), its operand matrices have at most ``SHORT_DOT_MAX_OPERAND`` elements
each and ``SHORT_DOT_MAX_OPERANDS`` together, each result matrix at most one vector's lanes,
and the batch has at least ``lanes`` elements and the dot ``short_rows.SHORT_ROW_MIN_WORK``
results. The matrices' own dims may
be in any order (a transposed operand is a permutation of its column vectors).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ember.backends.cpu import scalar_ops as S
from ember.backends.cpu import short_rows
from ember.backends.cpu.kernel_gen import KernelInfo, _c, is_small_dot
from ember.backends.cpu.short_rows import _vector_bytes, load_columns, store_columns

# The most elements of one operand matrix, and of both, staged as column vectors (a float32
# matrix of 17-32 elements takes two 16x16 transposes a block). Past those the looped
# kernel was as fast or faster: (4, 8) x (8, 4) 2.2 against 2.6 ms, (2, 8) x (8, 8) 1.9
# against 3.8; (3, 8) x (8, 3), 48 elements, 11.2 against 0.86.
SHORT_DOT_MAX_OPERAND = 32
SHORT_DOT_MAX_OPERANDS = 48
_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64,
                                          np.uint32, np.uint64))


def short_dot_lanes(fused) -> int | None:
    """The batch elements per vector for a short-dot kernel of the fused computation
    ``fused``, or None where the looped kernel runs it."""
    dot = fused.root
    if dot.opcode != "dot_general" or dot.shape.is_tuple:
        return None
    lhs, rhs = dot.operands
    if any(op.opcode != "parameter" for op in (lhs, rhs)):
        return None
    if not dot.dtype == lhs.dtype == rhs.dtype or dot.dtype not in _DTYPES:
        return None
    a = dot.attrs
    nb = len(a["lhs_batching_dimensions"])
    if nb == 0 or tuple(a["lhs_batching_dimensions"]) != tuple(range(nb)) \
            or tuple(a["rhs_batching_dimensions"]) != tuple(range(nb)):
        return None
    batch = math.prod(dot.dims[:nb])
    lanes = _vector_bytes() // dot.dtype.itemsize
    if batch < lanes or dot.shape.size < short_rows.SHORT_ROW_MIN_WORK:
        return None
    if not 1 <= dot.shape.size // batch <= lanes:
        return None
    sizes = [x.shape.size // batch for x in (lhs, rhs)]
    if max(sizes) > SHORT_DOT_MAX_OPERAND or sum(sizes) > SHORT_DOT_MAX_OPERANDS:
        return None
    contracted = math.prod(lhs.dims[d] for d in a["lhs_contracting_dimensions"])
    return lanes if contracted and is_small_dot(dot) else None


def _matrix_positions(operand, batch_rank: int, contracting, free) -> dict:
    """(free position tuple, contracting position tuple) -> the element's offset within one
    batch element's matrix of ``operand`` (row-major over its non-batch dims)."""
    dims = operand.dims[batch_rank:]
    strides = [math.prod(dims[d + 1:]) for d in range(len(dims))]
    out = {}
    for f in itertools.product(*(range(operand.dims[d]) for d in free)):
        for c in itertools.product(*(range(operand.dims[d]) for d in contracting)):
            pos = [0] * len(dims)
            for d, v in zip(free, f):
                pos[d - batch_rank] = v
            for d, v in zip(contracting, c):
                pos[d - batch_rank] = v
            out[(f, c)] = sum(p * s for p, s in zip(pos, strides))
    return out


class ShortDotKernel:
    """The kernel of a lone batched small ``dot_general`` (see the module docstring)."""

    def __init__(self, kb, lanes: int):
        self.kb = kb
        self.b = kb.b
        self.dot = kb.fused.root
        self.lanes = lanes

    def build(self, lo, hi) -> KernelInfo:
        kb, b, dot, lanes = self.kb, self.b, self.dot, self.lanes
        a = dot.attrs
        lhs, rhs = dot.operands
        nb = len(a["lhs_batching_dimensions"])
        batch = math.prod(dot.dims[:nb])
        sizes = [x.shape.size // batch for x in (lhs, rhs, dot)]
        lc, rc = tuple(a["lhs_contracting_dimensions"]), tuple(a["rhs_contracting_dimensions"])
        lfree = [d for d in range(nb, lhs.shape.rank) if d not in lc]
        rfree = [d for d in range(nb, rhs.shape.rank) if d not in rc]
        lpos = _matrix_positions(lhs, nb, lc, lfree)
        rpos = _matrix_positions(rhs, nb, rc, rfree)
        ks = list(itertools.product(*(range(lhs.dims[d]) for d in lc)))
        dt = dot.dtype
        lo, hi = kb._clamp_range(lo, hi, batch)
        count = b.select(b.icmp_signed("<", lo, hi), b.sub(hi, lo), _c(0))
        blocks = b.udiv(b.add(count, _c(lanes - 1)), _c(lanes))
        # The last block ends at ``hi`` (at ``lanes`` when ``hi`` is smaller): it overlaps
        # elements that an earlier block or another call computes too, with the same values.
        last = b.sub(hi, _c(lanes))
        last = b.select(b.icmp_signed("<", last, _c(0)), _c(0), last)
        ptrs = [kb.param_ptrs[id(lhs)], kb.param_ptrs[id(rhs)], kb.out_ptrs[0]]
        mul, add = (b.fmul, b.fadd) if S.is_float(dt) else (b.mul, b.add)

        def block(k):
            row0 = b.add(lo, b.mul(k, _c(lanes), flags=("nsw", "nuw")), flags=("nsw", "nuw"))
            row0 = b.select(b.icmp_signed(">", row0, last), last, row0)
            starts = [b.gep(p, [b.mul(row0, _c(n), flags=("nsw", "nuw"))], inbounds=True)
                      for p, n in zip(ptrs, sizes)]
            x = load_columns(b, starts[0], dt, sizes[0], lanes)
            y = load_columns(b, starts[1], dt, sizes[1], lanes)
            results = []
            for f in itertools.product(*(range(lhs.dims[d]) for d in lfree)):
                for g in itertools.product(*(range(rhs.dims[d]) for d in rfree)):
                    total = None  # (the products in order, as the looped kernel sums them)
                    for c in ks:
                        term = mul(x[lpos[(f, c)]], y[rpos[(g, c)]])
                        total = term if total is None else add(total, term)
                    results.append(total)
            store_columns(b, starts[2], dt, sizes[2], lanes, results)

        kb.loops.loop(_c(0), blocks, block, name="blk", unroll=False, vectorize=False)
        return KernelInfo(kb.name, batch, sizes[2] * len(ks), ())
