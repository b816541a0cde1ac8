"""The kernel of ``lax.top_k`` (the ``ember.top_k`` custom call): per row (last dim), the
first ``k`` positions of the stable descending order and the values there.

Each element gets an unsigned key whose order is the descending order's (``order_key``:
for floats the total order of their bits, +NaN > +inf > ... > +0 > -0 > ... > -inf > -NaN,
as XLA's TopK; ``sort_order._descending_key``'s rule),
32 bits wide for values of 32 bits or fewer, else 64. A row keeps its best ``k`` (key,
index) pairs sorted, best first, in two vectors (registers): the first ``k`` elements are
inserted in turn, then a later element enters only when its key is strictly greater than
the ``k``-th key (an equal key with a later index comes after it in the stable order).
An insertion has no branches: the entries from the first with a smaller key move down a
lane (one shuffle) and the new one takes its place (selects), so equal keys keep their
order. On random rows only about ``k * ln(n / k)`` elements enter: the scan compares a
vector of keys with the ``k``-th key at once, and only the lanes above it are inserted, in
order. Values are copied from the input at the chosen indices, bits and all (NaN
payloads, the sign of zero).

A work item is a row. An insertion costs ``k`` lanes of work (rounded up to a power of
two), so a large ``k`` on short rows is left to the library routine (``sort_order.top_k``, a
partition and a sort of ``k`` entries, ~6 ns an element): ``k`` up to ``MAX_K`` always
takes the kernel, a larger one up to ``LARGEST_K`` when the expected work of a random row,
``k * (1 + ln(n / k))`` insertions of ``lanes`` lanes (of 32 bits), stays below
``LANES_PER_ELEMENT`` lanes per element (1e6 float32, k=100: 0.19 ms native, 2.8 ms
library; rows of 1000, k=100: 7 us native, 6 us library a row). ``k == 0`` keeps the
library routine. A sorted ascending row inserts every element (1e6, k=100: 12 ms; XLA's
TopK takes 34 ms there).
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from ember import dtypes
from ember.backends.cpu import scalar_ops as S
from ember.backends.cpu.kernel_gen import KernelInfo, _c
from ember.backends.cpu.scalar_ops import I1, I32, I64, UnsupportedOp
from ember.compiler.hlo import Instruction

TARGET = "ember.top_k"
# The largest k that always takes the native kernel, and the largest that may (the kernel's
# code grows with k: k=512 compiles in ~0.1 s, k=1024 in ~0.4 s).
MAX_K = 64
LARGEST_K = 512
# Above MAX_K: the most lanes of insertion work per element (see the module docstring).
LANES_PER_ELEMENT = 20
# Bytes of keys compared at once (one AVX-512 vector, two AVX2 ones).
VECTOR_BYTES = 64
_BF16 = np.dtype(dtypes.bfloat16)
_FLOATS = (np.dtype(np.float16), _BF16, np.dtype(np.float32), np.dtype(np.float64))


def is_native_top_k(inst: Instruction) -> bool:
    """Whether a lone ``inst`` is a top_k custom call that this kernel computes."""
    if inst.opcode != "custom_call" or inst.attrs.get("call_target_name") != TARGET:
        return False
    if len(inst.operands) != 1 or not inst.shape.is_tuple:
        return False
    x = inst.operands[0]
    k, dt = inst.attrs.get("k"), np.dtype(x.dtype)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not x.dims or \
            not 1 <= k <= min(x.dims[-1], LARGEST_K) or x.dims[-1] >= 2**31:
        return False
    # (64-bit keys: lanes twice as wide)
    n, lanes = x.dims[-1], (1 << (int(k) - 1).bit_length()) * (2 if dt.itemsize == 8 else 1)
    if k > MAX_K and k * (1 + math.log(n / k)) * lanes > LANES_PER_ELEMENT * n:
        return False
    if dt not in _FLOATS and not (dt.kind in "biu" and dt.itemsize <= 8):
        return False
    dims = x.dims[:-1] + (int(k),)
    return [(leaf.dtype, leaf.dims) for leaf in inst.shape.leaves()] == \
        [(dt, dims), (np.dtype(np.int32), dims)]


def _constant(ty: ir.Type, value: int) -> ir.Constant:
    """``value`` (an unsigned bit pattern) as a constant of ``ty`` or of each lane of it."""
    lane = ty.element if isinstance(ty, ir.VectorType) else ty
    if value >= 1 << (lane.width - 1):  # (written signed: the IR parser wants it so)
        value -= 1 << lane.width
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [value] * ty.count)
    return ir.Constant(ty, value)


def _like(raw: ir.Value, element: ir.Type) -> ir.Type:
    """``element``, or a vector of it as wide as ``raw``."""
    if isinstance(raw.type, ir.VectorType):
        return ir.VectorType(element, raw.type.count)
    return element


def order_key(b: ir.IRBuilder, raw: ir.Value, dt: np.dtype) -> ir.Value:
    """The unsigned key (i32, or i64 for 64-bit types) of elements as stored in memory
    (``raw``: one, or a vector); a larger key comes first in the descending order."""
    dt = np.dtype(dt)
    wide = dt.itemsize == 8
    bits = 64 if wide else 32
    kty = _like(raw, I64 if wide else I32)
    if dt == np.bool_:
        return b.zext(b.icmp_unsigned("!=", raw, _constant(raw.type, 0)), kty)
    if dt.kind in "iu":
        key = raw
        if dt.itemsize < 4:
            key = b.sext(raw, kty) if dt.kind == "i" else b.zext(raw, kty)
        if dt.kind == "i":  # (the sign bit flipped: the signed order as unsigned)
            key = b.xor(key, _constant(kty, 1 << (bits - 1)))
        return key
    if not S.is_float(dt):
        raise UnsupportedOp(f"top_k of {dt}")
    if dt == np.float16:  # (widened exactly: signs and the order of NaN payloads kept)
        word = b.bitcast(b.fpext(raw, _like(raw, S.F32)), kty)
    elif dt == _BF16:
        word = b.shl(b.zext(raw, kty), _constant(kty, 16))
    else:
        word = b.bitcast(raw, kty)
    # Negative: every bit flipped; positive: the sign bit set.
    sign = _constant(kty, 1 << (bits - 1))
    return b.xor(word, b.or_(b.ashr(word, _constant(kty, bits - 1)), sign))


class TopKKernel:
    """Emits the loops of one top_k into a ``KernelBuilder``'s function."""

    def __init__(self, kb, inst: Instruction):
        if not is_native_top_k(inst):
            raise UnsupportedOp("a custom call without a native kernel")
        self.kb, self.b, self.inst = kb, kb.b, inst
        self.dtype = np.dtype(inst.operands[0].dtype)
        self.k = int(inst.attrs["k"])
        self.key_type = I64 if self.dtype.itemsize == 8 else I32
        self.width = VECTOR_BYTES // (self.key_type.width // 8)
        # The best entries: vectors of a power of two lanes (those past k are scratch).
        self.lanes = 1 << (self.k - 1).bit_length()

    def build(self, lo, hi) -> KernelInfo:
        b, kb, k, width = self.b, self.kb, self.k, self.width
        dims = self.inst.operands[0].dims
        n, rows = dims[-1], math.prod(dims[:-1])
        lo, hi = kb._clamp_range(lo, hi, rows)
        self.x = kb.param_ptrs[id(kb.fused.parameters[0])]
        out_values, out_indices = kb.out_ptrs
        # (Whole-vector loads and stores: LLVM keeps them in registers.)
        self.key_vector = ir.VectorType(self.key_type, self.lanes)
        self.index_vector = ir.VectorType(I32, self.lanes)
        self.keys = kb.loops.alloca(self.key_vector, name="keys")
        self.indices = kb.loops.alloca(self.index_vector, name="indices")
        chunks = (n - k) // width
        raw_vector = ir.VectorType(S.memory_type(self.dtype), width).as_pointer()

        def row(r):
            base = b.mul(r, _c(n))
            b.store(ir.Constant(self.key_vector, None), self.keys)
            b.store(ir.Constant(self.index_vector, None), self.indices)

            def first(j):  # (entries [0, j) are taken)
                self._insert(self._key_at(b.add(base, j)), j, taken=j)
            kb.loops.loop(_c(0), _c(k), first, name="first", unroll=False)

            def chunk(c):
                start = b.add(_c(k), b.mul(c, _c(width)))
                ptr = b.bitcast(b.gep(self.x, [b.add(base, start)], inbounds=True), raw_vector)
                keys = order_key(b, b.load(ptr, align=self.dtype.itemsize), self.dtype)
                limit = self._splat(self._threshold(), keys.type)
                above = b.bitcast(b.icmp_unsigned(">", keys, limit), ir.IntType(width))
                with b.if_then(b.icmp_unsigned("!=", above, ir.Constant(above.type, 0)),
                               likely=False):
                    self._lanes(keys, above, start)
            kb.loops.loop(_c(0), _c(chunks), chunk, name="chunk", unroll=False)

            def rest(j):
                self._consider(self._key_at(b.add(base, j)), j)
            kb.loops.loop(_c(k + chunks * width), _c(n), rest, name="rest", unroll=False)

            indices = b.load(self.indices)

            def write(i):
                index = b.extract_element(indices, i)
                value = b.load(b.gep(self.x, [b.add(base, b.zext(index, I64))], inbounds=True))
                at = b.add(b.mul(r, _c(k)), i)
                b.store(value, b.gep(out_values, [at], inbounds=True))
                b.store(index, b.gep(out_indices, [at], inbounds=True))
            kb.loops.loop(_c(0), _c(k), write, name="write")
        kb.loops.loop(lo, hi, row, name="row")
        return KernelInfo(kb.name, rows, n, ())

    def _splat(self, value, ty: ir.VectorType):
        b = self.b
        one = b.insert_element(ir.Constant(ty, ir.Undefined), value, _c(0))
        return b.shuffle_vector(one, ir.Constant(ty, ir.Undefined),
                                ir.Constant(ir.VectorType(I32, ty.count), [0] * ty.count))

    def _key_at(self, at):
        b = self.b
        return order_key(b, b.load(b.gep(self.x, [at], inbounds=True)), self.dtype)

    def _threshold(self):
        """The k-th best key."""
        return self.b.extract_element(self.b.load(self.keys), _c(self.k - 1))

    def _consider(self, key, j):
        """Inserts element ``j`` (of ``key``) when it beats the k-th entry."""
        self._insert(key, j, beats=self.b.icmp_unsigned(">", key, self._threshold()))

    def _lanes(self, keys, above, start):
        """Considers the lanes of ``keys`` set in the mask ``above`` (not 0), lowest first."""
        b = self.b
        pre = b.block
        head = b.append_basic_block("lane.head")
        done = b.append_basic_block("lane.end")
        b.branch(head)
        b.position_at_end(head)
        mask = b.phi(above.type, name="mask")
        mask.add_incoming(above, pre)
        lane = S.intrinsic(b, f"llvm.cttz.i{above.type.width}", above.type,
                           [mask, ir.Constant(I1, 1)])
        lane = b.zext(lane, I64) if above.type.width < 64 else lane
        self._consider(b.extract_element(keys, lane), b.add(start, lane))
        rest = b.and_(mask, b.sub(mask, ir.Constant(mask.type, 1)))
        mask.add_incoming(rest, b.block)
        b.cbranch(b.icmp_unsigned("!=", rest, ir.Constant(mask.type, 0)), head, done)
        b.position_at_end(done)

    def _insert(self, key, j, taken=None, beats=None):
        """Puts (``key``, ``j``) into the sorted entries, without branches: the entries from
        the first with a smaller key (or the first of those not ``taken`` yet) move down a
        lane and ``key`` takes its place. ``beats`` (i1): insert only when it is true."""
        b, lanes = self.b, self.lanes
        keys, indices = b.load(self.keys), b.load(self.indices)
        new_key = self._splat(key, self.key_vector)
        new_index = self._splat(b.trunc(j, I32), self.index_vector)
        down = ir.Constant(self.index_vector, [lanes] + list(range(lanes - 1)))
        moved_keys = b.shuffle_vector(keys, new_key, down)  # (lane 0: the new key)
        moved_indices = b.shuffle_vector(indices, new_index, down)
        after = b.icmp_unsigned("<", keys, new_key)  # (a suffix of the lanes below k)
        moved = b.icmp_unsigned("<", moved_keys, new_key)  # (``after`` one lane down)
        if taken is not None:
            lane = ir.Constant(self.index_vector, list(range(lanes)))
            count = self._splat(b.trunc(taken, I32), self.index_vector)
            after = b.or_(after, b.icmp_unsigned(">=", lane, count))
            moved = b.or_(moved, b.icmp_unsigned(">", lane, count))
        if beats is not None:
            after = b.and_(after, self._splat(beats, ir.VectorType(I1, lanes)))
        b.store(b.select(after, b.select(moved, moved_keys, new_key), keys), self.keys)
        b.store(b.select(after, b.select(moved, moved_indices, new_index), indices),
                self.indices)


__all__ = ["TopKKernel", "is_native_top_k", "order_key", "MAX_K", "LARGEST_K"]
