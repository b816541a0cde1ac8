"""The scaffolding shared by the one-matrix-per-lane kernels of ``small_qr_lanes`` and
``small_svd_lanes``: a loop over groups of ``lanes(fty)`` matrices (one 512-bit vector),
matrices held as arrays of vectors (one entry of every lane's matrix each), loads and
stores between those and the batch-first operands, and the power-of-two scaling that keeps
sums of squares from overflowing or underflowing.

Loops over matrix indices are unrolled (Python ints) for sides up to a kernel's
``unroll_max_side``, where LLVM keeps the arrays in registers; larger sides get run-time
loops over arrays on the stack, which are nearly as fast (the work is latency-bound) and
compile far faster (an unrolled 8 x 8 QR: ~8 s at -O2, ~0.13 s looped).
The last group of a range repeats its last matrix in the lanes past the end, so nothing
outside the operands is read or written.
"""

from __future__ import annotations

from collections.abc import Callable


def lanes(fty) -> int:
    """Matrices per group: one 512-bit vector of float32 or float64."""
    from llvmlite import ir

    return 16 if isinstance(fty, ir.FloatType) else 8


class LaneKernel:
    """Emits ``name(buffers, lo, hi)`` into ``module``: ``self.b`` is positioned inside the
    loop over groups (first matrix ``self.e0``) after construction; call ``finish()`` after
    the body. Loops are unrolled when ``side`` (the largest matrix side) is at most
    ``unroll_max_side``."""

    def __init__(self, module, fty, name: str, nbuf: int, side: int, unroll_max_side: int):
        from llvmlite import ir

        from ember.backends.cpu.scalar_ops import counted_loop

        self.ir, self.module, self.fty = ir, module, fty
        i8p = ir.IntType(8).as_pointer()
        self.i1, self.i32, self.i64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)
        self.w = w = lanes(fty)
        f32 = isinstance(fty, ir.FloatType)
        self.ity = ir.IntType(32 if f32 else 64)
        self.vf, self.vb = ir.VectorType(fty, w), ir.VectorType(self.i1, w)
        self.vi = ir.VectorType(self.ity, w)
        self.fn = fn = ir.Function(
            module, ir.FunctionType(ir.VoidType(), [i8p.as_pointer(), self.i64, self.i64]),
            name)
        bufs, lo, self.hi = fn.args
        self.b = b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.bufs = [b.bitcast(b.load(b.gep(bufs, [self.c(k)], inbounds=True)),
                               fty.as_pointer()) for k in range(nbuf)]
        self.unrolled = side <= unroll_max_side
        self._suffix = f"v{w}{'f32' if f32 else 'f64'}"
        self._counted_loop = counted_loop
        self._entry = b.block
        self.e0, self._close = counted_loop(b, lo, self.hi, w)
        last = b.sub(self.hi, self.c(1))
        self._elems = []
        for lane in range(w):  # the lane's matrix, clamped to the range's last
            e = b.add(self.e0, self.c(lane))
            self._elems.append(b.select(b.icmp_signed("<", e, self.hi), e, last))

    # ---------------------------------------------------------------- values

    def c(self, v):
        return self.ir.Constant(self.i64, v)

    def splat(self, v: float):
        return self.ir.Constant(self.vf, [self.ir.Constant(self.fty, v)] * self.w)

    def intrinsic(self, name: str, args: list):
        """``llvm.<name>`` on vectors (fabs, sqrt, copysign)."""
        ir = self.ir
        fn = self.module.globals.get(f"llvm.{name}.{self._suffix}")
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(self.vf, [self.vf] * len(args)),
                             f"llvm.{name}.{self._suffix}")
        return self.b.call(fn, args)

    def splat_index(self, i):
        """A vector of i32 holding the index ``i`` (an int or an i64) in every lane."""
        ir, b = self.ir, self.b
        vr = ir.VectorType(self.i32, self.w)
        if isinstance(i, int):
            return ir.Constant(vr, [ir.Constant(self.i32, i)] * self.w)
        one = b.insert_element(ir.Constant(vr, None), b.trunc(i, self.i32),
                               ir.Constant(self.i32, 0))
        return b.shuffle_vector(one, ir.Constant(vr, None),
                                ir.Constant(vr, [ir.Constant(self.i32, 0)] * self.w))

    def all_lanes(self, mask):
        """An i1: every lane of the vector of i1 ``mask`` is set."""
        ir, w = self.ir, self.w
        return self.b.icmp_signed("==", self.b.bitcast(mask, ir.IntType(w)),
                                  ir.Constant(ir.IntType(w), (1 << w) - 1))

    def sweeps(self, n: int, start: Callable, pairs: Callable, converged: Callable,
               max_sweeps: int) -> None:
        """Cyclic Jacobi sweeps, run until ``converged()`` (an i1 for the whole group) or
        ``max_sweeps``: each sweep calls ``start()`` then ``pairs(p, q)`` for every pair
        ``p < q < n``; the builder is left after the last sweep."""
        b = self.b
        sweep = self.slot(self.i64)
        b.store(self.c(0), sweep)
        head = self.fn.append_basic_block("sweep")
        b.branch(head)
        b.position_at_end(head)
        start()
        self.rng(0, n - 1, lambda p: self.rng(self.add(p, 1), n, lambda q: pairs(p, q)))
        count = b.add(b.load(sweep), self.c(1))
        b.store(count, sweep)
        done = b.or_(converged(), b.icmp_signed(">=", count, self.c(max_sweeps)))
        after = self.fn.append_basic_block("converged")
        b.cbranch(done, after, head)
        b.position_at_end(after)

    # ---------------------------------------------------------------- arrays and loops

    def array(self, size: int, ty=None):
        """A stack array of ``size`` vectors (allocated in the entry block)."""
        b = self.b
        here = b.block
        b.position_at_start(self._entry)
        slot = b.alloca(self.ir.ArrayType(ty or self.vf, size))
        b.position_at_end(here)
        return slot

    def slot(self, ty=None):
        b = self.b
        here = b.block
        b.position_at_start(self._entry)
        s = b.alloca(ty or self.vf)
        b.position_at_end(here)
        return s

    def val(self, i):
        return self.c(i) if isinstance(i, int) else i

    def add(self, i, k: int):
        return i + k if isinstance(i, int) else self.b.add(i, self.c(k))

    def index(self, i, j, cols: int):
        if isinstance(i, int) and isinstance(j, int):
            return self.c(i * cols + j)
        return self.b.add(self.b.mul(self.val(i), self.c(cols)), self.val(j))

    def ld(self, arr, i, j=None, cols: int = 0):
        at = self.val(i) if j is None else self.index(i, j, cols)
        return self.b.load(self.b.gep(arr, [self.c(0), at], inbounds=True))

    def st(self, arr, value, i, j=None, cols: int = 0):
        at = self.val(i) if j is None else self.index(i, j, cols)
        self.b.store(value, self.b.gep(arr, [self.c(0), at], inbounds=True))

    def rng(self, start, stop, body: Callable) -> None:
        """``for i in range(start, stop): body(i)``: unrolled when both bounds are ints and
        the kernel is unrolled, else a run-time loop."""
        if self.unrolled and isinstance(start, int) and isinstance(stop, int):
            for i in range(start, stop):
                body(i)
        else:
            i, close = self._counted_loop(self.b, self.val(start), self.val(stop))
            body(i)
            close()

    def rng_down(self, stop: int, body: Callable) -> None:
        """``for i in reversed(range(stop)): body(i)``."""
        if self.unrolled:
            for i in reversed(range(stop)):
                body(i)
        else:
            self.rng(0, stop, lambda ii: body(self.b.sub(self.c(stop - 1), ii)))

    # ---------------------------------------------------------------- operands

    def load(self, buf: int, stride: int, offset):
        """The vector of ``buffers[buf][elem * stride + offset]`` over the lanes."""
        ir, b = self.ir, self.b
        vec = ir.Constant(self.vf, None)
        for lane, e in enumerate(self._elems):
            at = b.add(b.mul(e, self.c(stride)), self.val(offset))
            vec = b.insert_element(vec, b.load(b.gep(self.bufs[buf], [at], inbounds=True)),
                                   ir.Constant(self.i32, lane))
        return vec

    def store(self, buf: int, stride: int, offset, vec) -> None:
        ir, b = self.ir, self.b
        for lane, e in enumerate(self._elems):
            at = b.add(b.mul(e, self.c(stride)), self.val(offset))
            b.store(b.extract_element(vec, ir.Constant(self.i32, lane)),
                    b.gep(self.bufs[buf], [at], inbounds=True))

    def store_at(self, buf: int, stride: int, offsets, vec) -> None:
        """Stores lane l of ``vec`` at ``buffers[buf][elem * stride + offsets[l]]``
        (``offsets`` a vector of i32, each in [0, stride))."""
        ir, b = self.ir, self.b
        for lane, e in enumerate(self._elems):
            lane_i = ir.Constant(self.i32, lane)
            off = b.sext(b.extract_element(offsets, lane_i), self.i64)
            b.store(b.extract_element(vec, lane_i),
                    b.gep(self.bufs[buf], [b.add(b.mul(e, self.c(stride)), off)],
                          inbounds=True))

    def load_matrix(self, buf: int, rows: int, cols: int, transpose: bool = False):
        """The (rows, cols) matrices of ``buffers[buf]`` (their transposes if
        ``transpose``) into a new array, and per lane ``(power, bad)``: the power of two
        ``2**floor(log2(max |entry|))`` (1 for a zero or subnormal maximum) and whether an
        entry is NaN or infinite. The array holds the matrix divided by the power (its
        largest entry in [1, 2): exact), a bad lane's as zeros."""
        ir, b = self.ir, self.b
        arr = self.array(rows * cols)
        amax, bad = self.slot(), self.slot(self.vb)
        b.store(self.splat(0.0), amax)
        b.store(ir.Constant(self.vb, [ir.Constant(self.i1, 0)] * self.w), bad)
        inf = self.splat(float("inf"))

        def entry(i, j):
            at = self.index(j, i, rows) if transpose else self.index(i, j, cols)
            vec = self.load(buf, rows * cols, at)
            mag = self.intrinsic("fabs", [vec])
            b.store(b.or_(b.load(bad), b.fcmp_unordered(">=", mag, inf)), bad)
            old = b.load(amax)
            b.store(b.select(b.fcmp_ordered(">", mag, old), mag, old), amax)
            self.st(arr, vec, i, j, cols)

        self.rng(0, rows, lambda i: self.rng(0, cols, lambda j: entry(i, j)))
        expmask = 0x7F800000 if self.ity.width == 32 else 0x7FF << 52
        mask = ir.Constant(self.vi, [ir.Constant(self.ity, expmask)] * self.w)
        pow2 = b.bitcast(b.and_(b.bitcast(b.load(amax), self.vi), mask), self.vf)
        power = b.select(b.fcmp_ordered(">", pow2, self.splat(0.0)), pow2, self.splat(1.0))
        scale = b.fdiv(self.splat(1.0), power)
        is_bad = b.load(bad)

        def rescale(i, j):
            self.st(arr, b.select(is_bad, self.splat(0.0),
                                  b.fmul(self.ld(arr, i, j, cols), scale)), i, j, cols)

        self.rng(0, rows, lambda i: self.rng(0, cols, lambda j: rescale(i, j)))
        return arr, power, is_bad

    def finish(self) -> None:
        self._close()
        self.b.ret_void()
