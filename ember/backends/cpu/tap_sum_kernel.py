"""A native loop for the second half of a transposed convolution: summing the taps' products.

``lax.convolution``'s ``_conv_scatter`` computes a transposed convolution (input dilation
``s``: ``conv_transpose``, the input gradient of a strided convolution) as one GEMM giving
every input position times every tap's kernel matrix, ``y[b, i, j, t, :]``, and then adds each
tap's block into the outputs it reaches, ``o = s*i + lo - t`` along each spatial dim. In
NumPy those adds are one strided ``+=`` per tap whose inner loop is only the output features
(32 floats for a typical decoder layer): 2.5 ms of the 2.8 ms a stride-2 3x3 64->32
transpose on (8, 28, 28) took, against ~1.5 ms for the GEMM.

Here the sums are one loop over the outputs: each output row of features is the sum of the
tap rows that reach it, ``out = ((0 + y_t1) + y_t2) + ...`` in ascending tap order, the order
(and so the bits) of NumPy's zeroed output and per-tap adds. Real float32/float64 operands,
one or two spatial dims (one as a unit first dim), C-ordered:

- ``y``: (batch, in_h, in_w, taps, features), tap ``t = th * kw + tw``;
- ``out``: (batch, out_h, out_w, features).

One library per dtype, compiled at first use (~20-40 ms of LLVM and ``cc``) and kept in the
disk cache. Its entry point ``<name>(buffers, lo, hi)`` (the parallel runtime's task
signature) sums output rows ``[lo, hi)`` (a row: one (batch, out_h) pair); the buffers are
``y``, ``out`` and an int64 array of the sizes (``_DIMS``). The CPU backend registers
``tap_sums`` as the custom-call target ``NATIVE_TARGET``; ``_conv_scatter`` keeps its NumPy
adds where that answers False (no native code, other dtypes or ranks).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np

# The custom-call target name ``ember.lax.convolution`` looks this kernel up by.
NATIVE_TARGET = "ember.conv.tap_sums"
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# The sizes buffer's entries, in order.
_DIMS = ("in_h", "in_w", "taps", "features", "out_h", "out_w", "stride_h", "stride_w",
         "low_h", "low_w", "k_h", "k_w")

_kernels: dict[np.dtype, Callable | None] = {}
_lock = threading.Lock()


def _symbol(dtype: np.dtype) -> str:
    return f"ember_tap_sums_{dtype.name}"


def kernel_ir(dtype: np.dtype) -> str:
    """The LLVM IR of the dtype's library (see the module docstring)."""
    from llvmlite import ir

    from ember.backends.cpu.scalar_ops import counted_loop

    ty = ir.FloatType() if dtype == np.float32 else ir.DoubleType()
    i64, i8p = ir.IntType(64), ir.IntType(8).as_pointer()
    ptr = ty.as_pointer()
    module = ir.Module(name=_symbol(dtype))
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p.as_pointer(), i64, i64]),
                     _symbol(dtype))
    bufs, lo, hi = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    def buffer(k, t):
        return b.bitcast(b.load(b.gep(bufs, [ir.Constant(i64, k)], inbounds=True)), t)

    y, out = buffer(0, ptr), buffer(1, ptr)
    sizes = buffer(2, i64.as_pointer())
    d = {name: b.load(b.gep(sizes, [ir.Constant(i64, k)], inbounds=True))
         for k, name in enumerate(_DIMS)}
    zero = ir.Constant(i64, 0)
    features = d["features"]

    def input_index(o, t, low, stride, size):
        """(whether output ``o`` reads input ``i`` through tap ``t``, that ``i``)."""
        num = b.add(b.sub(o, low), t)
        reached = b.and_(b.icmp_signed(">=", num, zero),
                         b.icmp_signed("==", b.srem(num, stride), zero))
        i = b.sdiv(num, stride)
        return b.and_(reached, b.icmp_signed("<", i, size)), i

    row, close_row = counted_loop(b, lo, hi)
    batch, oh = b.sdiv(row, d["out_h"]), b.srem(row, d["out_h"])
    ow, close_col = counted_loop(b, zero, d["out_w"])
    dst = b.gep(out, [b.mul(b.add(b.mul(row, d["out_w"]), ow), features)], inbounds=True)
    c, close_zero = counted_loop(b, zero, features)
    b.store(ir.Constant(ty, 0.0), b.gep(dst, [c], inbounds=True))
    close_zero()
    th, close_th = counted_loop(b, zero, d["k_h"])
    reads_h, ih = input_index(oh, th, d["low_h"], d["stride_h"], d["in_h"])
    with b.if_then(reads_h):
        tw, close_tw = counted_loop(b, zero, d["k_w"])
        reads_w, iw = input_index(ow, tw, d["low_w"], d["stride_w"], d["in_w"])
        with b.if_then(reads_w):
            pixel = b.add(b.mul(b.add(b.mul(batch, d["in_h"]), ih), d["in_w"]), iw)
            tap = b.add(b.mul(th, d["k_w"]), tw)
            src = b.gep(y, [b.mul(b.add(b.mul(pixel, d["taps"]), tap), features)],
                        inbounds=True)
            c, close_add = counted_loop(b, zero, features)
            target = b.gep(dst, [c], inbounds=True)
            b.store(b.fadd(b.load(target), b.load(b.gep(src, [c], inbounds=True))), target)
            close_add()
        close_tw()
    close_th()
    close_col()
    close_row()
    b.ret_void()
    return str(module)


def _runner(dtype: np.dtype) -> Callable | None:
    """``run(y, out, sizes)`` of the dtype's library, or None where no code can be made."""
    from ember.backends.cpu import native_lib
    return native_lib.load_once(_kernels, _lock, dtype, lambda: _load(dtype), "tap sums")


def _load(dtype: np.dtype) -> Callable:
    from ember.backends.cpu import native_lib
    from ember.backends.cpu.executable import _ffi

    lib, entry = native_lib.load_task("tap-sums", _symbol(dtype), lambda: kernel_ir(dtype))
    fb = _ffi.from_buffer

    def run(y: np.ndarray, out: np.ndarray, sizes: np.ndarray, lo: int, hi: int) -> None:
        entry(_ffi.new("char*[]", [fb(y), fb(out), fb(sizes)]), lo, hi)  # (frees the GIL)

    run._library = lib  # keeps the code loaded while the runner lives
    return run


def rows_of(out_shape: Sequence[int]) -> int:
    """The number of output rows (``tap_sums``' ``rows``) of an ``out`` of this shape."""
    return out_shape[0] * (out_shape[1] if len(out_shape) == 4 else 1)


def tap_sums(y: np.ndarray, out: np.ndarray, strides: Sequence[int], lows: Sequence[int],
             kernel: Sequence[int], rows: tuple[int, int] | None = None) -> bool:
    """Fills ``out`` (batch, *out_spatial, features) with the sums of ``y``'s (batch,
    *in_spatial, taps, features) tap rows reaching each output (see the module docstring);
    ``strides`` are the input dilations, ``lows`` the low paddings and ``kernel`` the
    kernel's spatial sizes, one per spatial dim. ``rows`` = (lo, hi) fills only those output
    rows (``rows_of``: a row is one (batch, out_h) pair; threads may fill disjoint ranges at
    once). False (``out`` untouched) where there is no native loop for the operands."""
    nsp = len(kernel)
    if not 1 <= nsp <= 2 or len(strides) != nsp or len(lows) != nsp:
        return False
    if y.dtype not in DTYPES or out.dtype != y.dtype or y.ndim != nsp + 3 \
            or out.ndim != nsp + 2 or not y.flags.c_contiguous \
            or not out.flags.c_contiguous or not out.flags.writeable:
        return False
    batch, *in_sp, taps, features = y.shape
    if out.shape[0] != batch or out.shape[-1] != features or taps != int(np.prod(kernel)) \
            or any(s < 1 for s in strides):
        return False
    out_sp = list(out.shape[1:-1])
    if nsp == 1:  # (one spatial dim: a unit first one)
        in_sp, out_sp = [1, *in_sp], [1, *out_sp]
        strides, lows, kernel = [1, *strides], [0, *lows], [1, *kernel]
    run = _runner(y.dtype)
    if run is None:
        return False
    sizes = np.array([*in_sp, taps, features, *out_sp, *strides, *lows, *kernel], np.int64)
    lo, hi = (0, batch * out_sp[0]) if rows is None else rows
    if not 0 <= lo <= hi <= batch * out_sp[0]:
        raise ValueError(f"tap_sums: rows {rows} outside [0, {batch * out_sp[0]}]")
    if lo < hi and out_sp[1] and features:
        run(y, out, sizes, lo, hi)
    return True
