"""A native loop for kernel gradients of convolutions with few input features.

A convolution's kernel gradient is a convolution with many taps (the output gradient's
positions) and few outputs (the kernel's taps x features): ``lax.convolution`` runs it as
im2col's "outputs form", a GEMM whose rows are the kernel's taps x features (9 for a 3x3
kernel of one feature, a first layer's) and whose contraction runs over every position,
where BLAS is slow. Here one pass over the positions streams the output gradient once:

    dk[t, c, o] = sum over (n, i, j) of x[n, i*rd + th*s, j*rd + tw*s, c] * dy[n, i, j, o]

with the (t, c) pairs in groups held in vector accumulators (``lanes`` output features wide),
a group per pass, positions in row-major order, each product added with ``llvm.fmuladd``.

Operands (C-ordered, real float32/float64, one or two spatial dims, one as a unit first dim):

- ``x``: (batch, padded_h, padded_w, features), already padded;
- ``dy``: (batch, in_h, in_w, out_features): the positions;
- ``dk``: (out_h * out_w * features, out_features), row ``(th * out_w + tw) * features + c``.

Threads take rows of positions (one (batch, i) pair each) as tasks on the parallel runtime,
each summing into its own partial result; the partial results are added in task order, and
the task count depends on the shape only, so the bits never depend on the thread count.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np

from ember.backends.cpu.direct_conv_kernel import DTYPES, TaskFunction, layout

# The custom-call target name ``ember.lax.convolution`` looks this kernel up by.
NATIVE_TARGET = "ember.conv.tap_grad"
# (``step``: how far apart consecutive positions read ``x``, the convolution's kernel
# dilation; its window strides are in the pairs' offsets)
_DIMS = ("padded_h", "padded_w", "features", "in_h", "in_w", "out_features", "pairs",
         "step_h", "step_w")
# Vector accumulators a pass holds: (t, c) pairs x vectors per pair; at least MIN_GROUP
# pairs a pass, or im2col's GEMM does better (against it, on 3x3 kernel gradients: 0.35-0.8
# of the time with 6-12 pairs a pass (up to 64 output features), 1.2 times with 3 (128)).
ACCUMULATORS = 24
MIN_GROUP = 6
# Tasks (rows of positions) per call: a fixed count, so the partial sums' order is the
# shape's alone.
TASKS = 16

_kernels: dict[tuple, Callable | None] = {}
_lock = threading.Lock()


def group_of(dtype: np.dtype, out_features: int) -> tuple[int, int, int] | None:
    """``(lanes, vectors, pairs per pass)`` for ``out_features`` outputs, or None where
    they take more than one block of vectors or leave fewer than ``MIN_GROUP`` pairs."""
    shape = layout(dtype, out_features)
    if shape is None or shape[1] != out_features // shape[0]:  # (one block of outputs)
        return None
    lanes, vectors = shape[0], shape[1]
    group = ACCUMULATORS // vectors
    return (lanes, vectors, group) if group >= MIN_GROUP else None


def _symbol(dtype: np.dtype, lanes: int, vectors: int, group: int) -> str:
    return f"ember_tap_grad_{dtype.name}_{lanes}x{vectors}x{group}"


def kernel_ir(dtype: np.dtype, lanes: int, vectors: int, group: int) -> str:
    """The LLVM IR of one library: ``f(bufs, lo, hi)`` sums rows ``[lo, hi)`` of positions
    into ``bufs[2]`` (``dk``-shaped, zeroed by the caller); ``bufs[3]`` holds the sizes,
    ``bufs[4]`` each pair's element offset in ``x`` from a position's window start (the pair
    count a multiple of ``group``: padding pairs read offset 0, their rows discarded)."""
    from llvmlite import ir

    from ember.backends.cpu.scalar_ops import carried_loop, counted_loop

    tf = TaskFunction(dtype, lanes, _symbol(dtype, lanes, vectors, group), _DIMS)
    b, vec, fmuladd, c64 = tf.b, tf.vec, tf.fmuladd, tf.c64
    vptr = vec.as_pointer()
    x, dy, dk = tf.arrays
    offsets, d = tf.table, tf.sizes
    out_features = d["out_features"]

    first, close_pass = counted_loop(b, c64(0), b.sdiv(d["pairs"], c64(group)))
    first = b.mul(first, c64(group))
    pair_offsets = [b.load(b.gep(offsets, [b.add(first, c64(g))], inbounds=True))
                    for g in range(group)]

    def per_row(row, accs):
        batch, i = b.sdiv(row, d["in_h"]), b.srem(row, d["in_h"])
        top = b.add(b.mul(batch, d["padded_h"]), b.mul(i, d["step_h"]))
        x_row = b.mul(b.mul(top, d["padded_w"]), d["features"])
        dy_row = b.mul(b.mul(row, d["in_w"]), out_features)

        def per_position(j, accs):
            start = b.add(x_row, b.mul(b.mul(j, d["step_w"]), d["features"]))
            grads = [b.load(b.bitcast(b.gep(dy, [b.add(b.add(dy_row, b.mul(j, out_features)),
                                                        c64(v * lanes))], inbounds=True),
                                      vptr), align=dtype.itemsize) for v in range(vectors)]
            new = list(accs)
            for g in range(group):
                splat = tf.splat(b.load(b.gep(x, [b.add(start, pair_offsets[g])],
                                              inbounds=True)))
                for v in range(vectors):
                    k = g * vectors + v
                    new[k] = b.call(fmuladd, [splat, grads[v], accs[k]])
            return new
        return carried_loop(b, c64(0), d["in_w"], accs, per_position)

    zero = ir.Constant(vec, [0.0] * lanes)
    accs = carried_loop(b, tf.lo, tf.hi, [zero] * (group * vectors), per_row)
    for g in range(group):
        row = b.gep(dk, [b.mul(b.add(first, c64(g)), out_features)], inbounds=True)
        for v in range(vectors):
            at = b.bitcast(b.gep(row, [c64(v * lanes)], inbounds=True), vptr)
            b.store(b.fadd(b.load(at, align=dtype.itemsize), accs[g * vectors + v]), at,
                    align=dtype.itemsize)
    close_pass()
    b.ret_void()
    return str(tf.module)


def _runner(key: tuple) -> Callable | None:
    from ember.backends.cpu import native_lib
    return native_lib.load_once(_kernels, _lock, key, lambda: _load(*key), "tap gradient")


def _load(dtype: np.dtype, lanes: int, vectors: int, group: int) -> Callable:
    from ember.backends.cpu import native_lib, parallel_runtime
    from ember.backends.cpu.executable import _ffi

    lib, entry = native_lib.load_task("tap-grad", _symbol(dtype, lanes, vectors, group),
                                      lambda: kernel_ir(dtype, lanes, vectors, group))
    fb = _ffi.from_buffer

    def run(x, dy, partials, sizes, offsets, rows: int) -> None:
        """Task ``t`` of ``len(partials)`` sums its rows into ``partials[t]``."""
        tables = [_ffi.new("char*[]", [fb(x), fb(dy), fb(p), fb(sizes), fb(offsets)])
                  for p in partials]
        runtime = parallel_runtime.ready()
        if runtime is None:
            for t, table in enumerate(tables):
                entry(table, rows * t // len(tables), rows * (t + 1) // len(tables))
        else:
            runtime.run(entry, _ffi.new("char**[]", tables), 1, rows, len(tables))

    run._library = lib  # keeps the code loaded while the runner lives
    return run


def tap_grad(x: np.ndarray, dy: np.ndarray, out_sp: Sequence[int], strides: Sequence[int],
             dilation: Sequence[int]) -> np.ndarray | None:
    """The (*out_sp, features, out_features) sums (see the module docstring) of the padded
    ``x`` (batch, *padded, features) against ``dy`` (batch, *in_spatial, out_features):
    output ``(oh, ow)`` reads ``x`` at ``i * dilation + oh * strides`` for position ``i``.
    None where there is no native loop for the operands."""
    nsp = x.ndim - 2
    if not 1 <= nsp <= 2 or dy.ndim != nsp + 2 or len(out_sp) != nsp \
            or x.dtype not in DTYPES or dy.dtype != x.dtype \
            or not (x.flags.c_contiguous and dy.flags.c_contiguous):
        return None
    batch, *padded, features = x.shape
    _, *in_sp, out_features = dy.shape
    if dy.shape[0] != batch or any(v < 1 for v in (*strides, *dilation)):
        return None
    if any(o > 0 and n > 0 and (n - 1) * d + (o - 1) * s >= p
           for o, n, d, s, p in zip(out_sp, in_sp, dilation, strides, padded)):
        raise ValueError(f"tap_grad: outputs {tuple(out_sp)} read past x {x.shape} with "
                         f"dy {dy.shape}, strides {strides}, dilation {dilation}")
    result_shape = (*out_sp, features, out_features)
    if nsp == 1:
        padded, in_sp, out_sp = [1, *padded], [1, *in_sp], [1, *out_sp]
        strides, dilation = [1, *strides], [1, *dilation]
    group = group_of(x.dtype, out_features)
    if group is None:
        return None
    run = _runner((x.dtype, *group))
    if run is None:
        return None
    pairs = out_sp[0] * out_sp[1] * features
    per_pass = group[2]
    padded_pairs = -(-pairs // per_pass) * per_pass
    offsets = np.zeros(padded_pairs, np.int64)  # (padding pairs: offset 0, discarded)
    offsets[:pairs] = [(th * strides[0] * padded[1] + tw * strides[1]) * features + c
                       for th in range(out_sp[0]) for tw in range(out_sp[1])
                       for c in range(features)]
    sizes = np.array([*padded, features, *in_sp, out_features, padded_pairs,
                      *dilation], np.int64)
    rows = batch * in_sp[0]
    partials = np.zeros((min(TASKS, max(rows, 1)), padded_pairs, out_features), x.dtype)
    if rows and in_sp[1]:
        run(x, dy, list(partials), sizes, offsets, rows)
    total = partials[0].copy()
    for p in partials[1:]:
        total += p
    return total[:pairs].reshape(result_shape)
