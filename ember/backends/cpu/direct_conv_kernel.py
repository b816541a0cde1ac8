"""A native loop for convolutions with few input features: each output computed in registers.

``lax.convolution`` runs a convolution as GEMMs (per tap over shifted rows, or im2col). With
few input features the GEMM is short and narrow: a 3x3 convolution of one feature into 32
(the first layer of a small CNN) multiplies (positions, 9) by (9, 32), where BLAS and the
gathering of the patches cost several times the 9 multiply-adds per output. Here one loop
computes the outputs where they are: for a few consecutive output positions and a slice of
output features at a time, vector accumulators (``lanes`` features wide) sum ``x * w`` over
the taps and input features, the input value broadcast across the lanes:

    out[n, oh, ow, o] = sum over taps (kh, kw), features c of
                        x[n, oh*sh + kh*dh - top, ow*sw + kw*dw - left, c] * w[kh, kw, c, o]

in that order (taps row-major, then features), each product added with one fused
multiply-add where the target has it (``llvm.fmuladd``). Taps in the zero padding are
skipped, not read: a row's window rows are clipped to the input once, and the few outputs
whose windows reach into the left or right padding clip their columns one at a time.

Operands (C-ordered, real float32/float64, one or two spatial dims, one as a unit first dim):

- ``x``: (batch, in_h, in_w, features), unpadded (``padding``: (top, bottom), (left, right));
- ``w``: (k_h, k_w, features, out_features), tap ``t = kh * k_w + kw``;
- ``out``: (batch, out_h, out_w, out_features).

A library per (dtype, lanes, accumulators per position, positions per block), compiled at
first use (~30 ms of LLVM and ``cc``) and kept in the disk cache. Its entry point
``<name>(buffers, lo, hi)`` (the parallel runtime's task signature) computes output rows
``[lo, hi)`` (a row: one (batch, out_h) pair); the buffers are ``x``, ``w``, ``out``, an int64
array of the sizes (``_DIMS``) and an int64 array of each tap's element offset in ``x``
from its window's start.
The CPU backend registers ``direct_conv`` as the custom-call target ``NATIVE_TARGET``;
``lax.convolution`` keeps its GEMMs where that answers False.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np

# The custom-call target name ``ember.lax.convolution`` looks this kernel up by.
NATIVE_TARGET = "ember.conv.direct"
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# The sizes buffer's entries, in order.
_DIMS = ("in_h", "in_w", "features", "out_h", "out_w", "out_features", "k_h", "k_w",
         "stride_h", "stride_w", "dil_h", "dil_w", "pad_top", "pad_left")
# Multiply-adds below which a whole convolution runs on the calling thread.
PARALLEL_MIN_WORK = 1 << 18
# Output features per block: at most this many accumulator vectors per position (a larger
# count of output features runs block after block).
MAX_ACCUMULATORS = 8
# Vector registers a block may use (accumulators, the weights' vectors, one broadcast): the
# 32 of AVX-512 where the host has them, else the 16 of AVX2, so nothing spills.
_REGISTERS = {64: 32, 32: 16}
# Output positions per block, at most.
MAX_POSITIONS = 8
# A kernel larger than this (no longer in L1 between blocks: each block streams it from L2)
# runs here only with at least STREAMED_MIN_POSITIONS positions per block to share each
# weight load: a 3x3 convolution of 16 features into 128 (73 KiB, 2 positions a block) took
# 1.4 times im2col's time, of 48 into 64 (110 KiB, 6 positions) 0.9 times.
L1_KERNEL_BYTES = 1 << 16
STREAMED_MIN_POSITIONS = 4

_kernels: dict[tuple, Callable | None] = {}
_lock = threading.Lock()


def _vector_bytes() -> int:
    from ember.backends.cpu import llvm_support
    return 64 if llvm_support.host_has_feature("avx512f") else 32


def layout(dtype: np.dtype, out_features: int) -> tuple[int, int, int] | None:
    """``(lanes, accumulators, positions)``: a block's vector width, its vectors per
    position and its positions for ``out_features`` outputs, or None where the output
    features are not a whole number of vectors of 4 or more lanes."""
    widest = _vector_bytes()
    for nbytes in (widest, 32, 16):
        lanes = nbytes // dtype.itemsize
        if lanes >= 4 and out_features % lanes == 0:
            break
    else:
        return None
    vectors = out_features // lanes
    accumulators = max(a for a in range(1, MAX_ACCUMULATORS + 1) if vectors % a == 0)
    registers = _REGISTERS.get(widest, 16)
    positions = max(1, min(MAX_POSITIONS, (registers - 1 - accumulators) // accumulators))
    return lanes, accumulators, positions


def _symbol(dtype: np.dtype, lanes: int, accumulators: int, positions: int) -> str:
    return f"ember_direct_conv_{dtype.name}_{lanes}x{accumulators}x{positions}"


class TaskFunction:
    """A module holding one task function ``void name(i8** bufs, i64 lo, i64 hi)`` over three
    float arrays (``arrays``: ``bufs[0..2]``), an int64 sizes array named by ``dims``
    (``sizes``: name -> value) and an int64 table (``table``: ``bufs[4]``), and what its
    vector code needs: the ``lanes``-wide vector type, ``fmuladd`` and ``splat``."""

    def __init__(self, dtype: np.dtype, lanes: int, name: str, dims: Sequence[str]):
        from llvmlite import ir
        self.ir = ir
        ty = ir.FloatType() if dtype == np.float32 else ir.DoubleType()
        self.vec = ir.VectorType(ty, lanes)
        self.i32, self.i64 = ir.IntType(32), ir.IntType(64)
        i8p = ir.IntType(8).as_pointer()
        self.module = ir.Module(name=name)
        self.fmuladd = ir.Function(
            self.module, ir.FunctionType(self.vec, [self.vec] * 3),
            f"llvm.fmuladd.v{lanes}{'f32' if dtype == np.float32 else 'f64'}")
        self.fn = ir.Function(self.module, ir.FunctionType(
            ir.VoidType(), [i8p.as_pointer(), self.i64, self.i64]), name)
        bufs, self.lo, self.hi = self.fn.args
        b = self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))

        def buffer(k, t):
            return b.bitcast(b.load(b.gep(bufs, [self.c64(k)], inbounds=True)), t)
        self.arrays = [buffer(k, ty.as_pointer()) for k in range(3)]
        sizes = buffer(3, self.i64.as_pointer())
        self.table = buffer(4, self.i64.as_pointer())
        self.sizes = {n: b.load(b.gep(sizes, [self.c64(k)], inbounds=True))
                      for k, n in enumerate(dims)}
        self._undef = ir.Constant(self.vec, ir.Undefined)
        self._mask = ir.Constant(ir.VectorType(self.i32, lanes), [0] * lanes)

    def c64(self, v: int):
        return self.ir.Constant(self.i64, v)

    def splat(self, value):
        """``value`` in every lane."""
        b = self.b
        return b.shuffle_vector(b.insert_element(self._undef, value, self.ir.Constant(
            self.i32, 0)), self._undef, self._mask)


def kernel_ir(dtype: np.dtype, lanes: int, accumulators: int, positions: int) -> str:
    """The LLVM IR of one library (see the module docstring)."""
    from llvmlite import ir

    from ember.backends.cpu.scalar_ops import carried_loop, counted_loop

    tf = TaskFunction(dtype, lanes, _symbol(dtype, lanes, accumulators, positions), _DIMS)
    b, vec, fmuladd, c64 = tf.b, tf.vec, tf.fmuladd, tf.c64
    lo, hi = tf.lo, tf.hi
    x, w, out = tf.arrays
    offsets, d = tf.table, tf.sizes
    features, out_features = d["features"], d["out_features"]
    width = lanes * accumulators  # output features per block
    zero_vec = ir.Constant(vec, [0.0] * lanes)

    def select(cond, a, b_):
        return b.select(cond, a, b_)

    def window(first, extent, size, dilation):
        """The taps ``[lo, hi)`` along a dim that read inside ``[0, extent)`` for a window
        starting at ``first`` (negative in the low padding), ``size`` taps ``dilation``
        apart: ``0 <= first + t * dilation < extent``."""
        low = select(b.icmp_signed("<", first, c64(0)),
                     b.sdiv(b.add(b.sub(c64(0), first), b.sub(dilation, c64(1))), dilation),
                     c64(0))
        room = b.sub(b.sub(extent, c64(1)), first)
        high = select(b.icmp_signed("<", room, c64(0)), c64(0),
                      b.add(b.sdiv(room, dilation), c64(1)))
        high = select(b.icmp_signed("<", high, size), high, size)
        return low, select(b.icmp_signed("<", high, low), low, high)

    def features_of(accs, tap, bases, o0):
        """``accs`` after the products of one tap: every input feature of it."""
        w_tap = b.gep(w, [b.add(b.mul(b.mul(tap, features), out_features), o0)],
                      inbounds=True)
        offset = b.load(b.gep(offsets, [tap], inbounds=True))
        starts = [b.add(base, offset) for base in bases]

        def per_feature(c, accs):
            w_c = b.gep(w_tap, [b.mul(c, out_features)], inbounds=True)
            weights = [b.load(b.bitcast(b.gep(w_c, [c64(a * lanes)], inbounds=True),
                                        vec.as_pointer()), align=dtype.itemsize)
                       for a in range(accumulators)]
            new = list(accs)
            for p, start in enumerate(starts):
                # (one address per load: a window start in the padding is no pointer)
                splat = tf.splat(b.load(b.gep(x, [b.add(start, c)], inbounds=True)))
                for a in range(accumulators):
                    k = p * accumulators + a
                    new[k] = b.call(fmuladd, [splat, weights[a], accs[k]])
            return new
        return carried_loop(b, c64(0), features, accs, per_feature)

    def store(out_row, ow, o0, accs, count):
        for p in range(count):
            dst = b.gep(out_row, [b.add(b.mul(b.add(ow, c64(p)), out_features), o0)],
                        inbounds=True)
            for a in range(accumulators):
                b.store(accs[p * accumulators + a],
                        b.bitcast(b.gep(dst, [c64(a * lanes)], inbounds=True),
                                  vec.as_pointer()), align=dtype.itemsize)

    def position(row_base, ow):
        """The element offset in ``x`` of output ``ow``'s window start (feature 0)."""
        return b.add(row_base, b.mul(b.sub(b.mul(ow, d["stride_w"]), d["pad_left"]),
                                     features))

    def interior(row_base, out_row, taps, ow, o0, count):
        """Outputs ``ow .. ow+count-1`` of a row whose windows lie inside the input's
        width: the taps of rows ``taps`` (a range of the row-major tap order)."""
        bases = [position(row_base, b.add(ow, c64(p))) for p in range(count)]
        accs = carried_loop(b, taps[0], taps[1], [zero_vec] * (count * accumulators),
                            lambda t, accs: features_of(accs, t, bases, o0))
        store(out_row, ow, o0, accs, count)

    def border(row_base, out_row, rows, ow, o0):
        """Output ``ow``, whose window reaches into the width's padding: the taps of the
        rows ``rows`` and of the columns inside the input."""
        bases = [position(row_base, ow)]
        first = b.sub(b.mul(ow, d["stride_w"]), d["pad_left"])
        cols = window(first, d["in_w"], d["k_w"], d["dil_w"])

        def per_row(kh, accs):
            return carried_loop(b, cols[0], cols[1], accs, lambda kw, accs: features_of(
                accs, b.add(b.mul(kh, d["k_w"]), kw), bases, o0))
        store(out_row, ow, o0, carried_loop(b, rows[0], rows[1], [zero_vec] * accumulators,
                                            per_row), 1)

    row, close_row = counted_loop(b, lo, hi)
    batch, oh = b.sdiv(row, d["out_h"]), b.srem(row, d["out_h"])
    # the row's window starts at input row ``first`` (negative in the top padding)
    first = b.sub(b.mul(oh, d["stride_h"]), d["pad_top"])
    rows = window(first, d["in_h"], d["k_h"], d["dil_h"])
    taps = (b.mul(rows[0], d["k_w"]), b.mul(rows[1], d["k_w"]))
    row_base = b.mul(b.mul(b.add(b.mul(batch, d["in_h"]), first), d["in_w"]), features)
    out_row = b.gep(out, [b.mul(b.mul(row, d["out_w"]), out_features)], inbounds=True)
    # outputs ``[inner_lo, inner_hi)`` have windows inside the width
    pad_left, stride_w = d["pad_left"], d["stride_w"]
    inner_lo = select(b.icmp_signed("<=", pad_left, c64(0)), c64(0),
                      b.sdiv(b.add(pad_left, b.sub(stride_w, c64(1))), stride_w))
    inner_lo = select(b.icmp_signed("<", inner_lo, d["out_w"]), inner_lo, d["out_w"])
    room = b.add(b.sub(b.sub(d["in_w"], c64(1)),
                       b.mul(b.sub(d["k_w"], c64(1)), d["dil_w"])), pad_left)
    inner_hi = select(b.icmp_signed("<", room, c64(0)), c64(0),
                      b.add(b.sdiv(room, stride_w), c64(1)))
    inner_hi = select(b.icmp_signed("<", inner_hi, d["out_w"]), inner_hi, d["out_w"])
    inner_hi = select(b.icmp_signed("<", inner_hi, inner_lo), inner_lo, inner_hi)
    chunk, close_chunk = counted_loop(b, c64(0), b.sdiv(out_features, c64(width)))
    o0 = b.mul(chunk, c64(width))
    ow, close_ow = counted_loop(b, c64(0), inner_lo)
    border(row_base, out_row, rows, ow, o0)
    close_ow()
    # blocks of ``positions`` outputs, then the rest one at a time
    blocks = b.sdiv(b.sub(inner_hi, inner_lo), c64(positions))
    blk, close_blk = counted_loop(b, c64(0), blocks)
    interior(row_base, out_row, taps, b.add(inner_lo, b.mul(blk, c64(positions))), o0,
             positions)
    close_blk()
    if positions > 1:
        ow, close_ow = counted_loop(b, b.add(inner_lo, b.mul(blocks, c64(positions))),
                                    inner_hi)
        interior(row_base, out_row, taps, ow, o0, 1)
        close_ow()
    ow, close_ow = counted_loop(b, inner_hi, d["out_w"])
    border(row_base, out_row, rows, ow, o0)
    close_ow()
    close_chunk()
    close_row()
    b.ret_void()
    return str(tf.module)


def _runner(key: tuple) -> Callable | None:
    """``run(arrays, lo, hi, threaded)`` of a library (``key``: dtype, lanes,
    accumulators, positions), or None where no code can be made."""
    from ember.backends.cpu import native_lib
    return native_lib.load_once(_kernels, _lock, key, lambda: _load(*key),
                                "direct convolution")


def _load(dtype: np.dtype, lanes: int, accumulators: int, positions: int) -> Callable:
    from ember.backends.cpu import native_lib, parallel_runtime
    from ember.backends.cpu.executable import TASKS_PER_THREAD, _ffi

    lib, entry = native_lib.load_task(
        "direct-conv", _symbol(dtype, lanes, accumulators, positions),
        lambda: kernel_ir(dtype, lanes, accumulators, positions))
    fb = _ffi.from_buffer

    def run(arrays: Sequence[np.ndarray], lo: int, hi: int, threaded: bool) -> None:
        """Rows ``[lo, hi)``; ``threaded`` (only with ``lo == 0``): as tasks of whole rows
        on the parallel runtime's threads where it is up (a row's outputs never depend on
        which thread computes them)."""
        bufs = _ffi.new("char*[]", [fb(a) for a in arrays])
        runtime = parallel_runtime.ready() if threaded and lo == 0 else None
        if runtime is None:
            entry(bufs, lo, hi)  # (frees the GIL)
        else:
            runtime.run(entry, _ffi.new("char**[]", [bufs]), 0, hi,
                        min(hi, runtime.size * TASKS_PER_THREAD))

    run._library = lib  # keeps the code loaded while the runner lives
    return run


def rows_of(out_shape: Sequence[int]) -> int:
    """The number of output rows (``direct_conv``'s ``rows``) of an ``out`` of this shape."""
    return out_shape[0] * (out_shape[1] if len(out_shape) == 4 else 1)


def direct_conv(x: np.ndarray, w: np.ndarray, out: np.ndarray, strides: Sequence[int],
                dilation: Sequence[int], rows: tuple[int, int] | None = None,
                padding: Sequence[tuple[int, int]] | None = None) -> bool:
    """Fills ``out`` (batch, *out_spatial, out_features) with the convolution of ``x``
    (batch, *spatial, features), zero-padded by ``padding`` ((low, high) per spatial dim,
    none by default; never negative), by ``w`` (*kernel, features, out_features),
    ``strides`` and kernel ``dilation`` one per spatial dim (see the module docstring), on
    the parallel runtime's threads when there is enough work. ``rows`` = (lo, hi) fills
    only those output rows, on the calling thread (``rows_of``: a row is one (batch, out_h)
    pair; threads may fill disjoint ranges at once). False (``out`` untouched) where there
    is no native loop for the operands, or a GEMM would be faster (``L1_KERNEL_BYTES``)."""
    nsp = x.ndim - 2
    if padding is None:
        padding = [(0, 0)] * max(nsp, 0)
    if not 1 <= nsp <= 2 or w.ndim != nsp + 2 or out.ndim != nsp + 2 \
            or len(strides) != nsp or len(dilation) != nsp or len(padding) != nsp:
        return False
    if x.dtype not in DTYPES or w.dtype != x.dtype or out.dtype != x.dtype \
            or not (x.flags.c_contiguous and w.flags.c_contiguous and out.flags.c_contiguous)\
            or not out.flags.writeable:
        return False
    batch, *spatial, features = x.shape
    *kernel, w_features, out_features = w.shape
    if out.shape[0] != batch or out.shape[-1] != out_features or w_features != features \
            or any(s < 1 for s in strides) or any(v < 1 for v in dilation) \
            or any(lo < 0 or hi < 0 for lo, hi in padding):
        return False
    out_sp = list(out.shape[1:-1])
    # (every output's window lies inside the padded input: taps in the padding are skipped,
    # so nothing is read out of bounds)
    padded = [n + lo + hi for n, (lo, hi) in zip(spatial, padding)]
    if any(o > 0 and (o - 1) * s + (k - 1) * v >= p
           for o, s, k, v, p in zip(out_sp, strides, kernel, dilation, padded)):
        raise ValueError(f"direct_conv: out {out.shape} reads past x {x.shape} padded by "
                         f"{list(padding)} with kernel {kernel}, strides {strides}, "
                         f"dilation {dilation}")
    lows = [lo for lo, _ in padding]
    if nsp == 1:  # (one spatial dim: a unit first one)
        spatial, out_sp, kernel = [1, *spatial], [1, *out_sp], [1, *kernel]
        strides, dilation, lows = [1, *strides], [1, *dilation], [0, *lows]
    shape = layout(x.dtype, out_features)
    if shape is None or (w.nbytes > L1_KERNEL_BYTES and shape[2] < STREAMED_MIN_POSITIONS):
        return False
    run = _runner((x.dtype, *shape))
    if run is None:
        return False
    lo, hi = (0, batch * out_sp[0]) if rows is None else rows
    if not 0 <= lo <= hi <= batch * out_sp[0]:
        raise ValueError(f"direct_conv: rows {rows} outside [0, {batch * out_sp[0]}]")
    sizes = np.array([*spatial, features, *out_sp, out_features, *kernel, *strides,
                      *dilation, *lows], np.int64)
    offsets = np.array([(kh * dilation[0] * spatial[1] + kw * dilation[1]) * features
                        for kh in range(kernel[0]) for kw in range(kernel[1])], np.int64)
    if lo < hi and out_sp[1] and out_features:
        work = (hi - lo) * out_sp[1] * out_features * len(offsets) * features
        run((x, w, out, sizes, offsets), lo, hi, rows is None and work >= PARALLEL_MIN_WORK)
    return True
