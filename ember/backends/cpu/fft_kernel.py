"""Native FFTs: the CPU backend's implementation of the ``ember.fft`` target.

``lax.fft`` runs NumPy's pocketfft (scalar C++) unless a backend registers a faster kernel
(``lax.fft.register_fft_kernel``); the CPU backend registers ``transform``, which handles
complex64/complex128 (float32/float64 for the real transforms) of every length.

The algorithm: every transform is made of *column FFTs*: the FFT along the rows of an
``(n, lanes)`` block, computed for all lanes at once. Each of its stages is a Stockham pass
of radix 4, 2, 3, 5 or 7 (``_plan``: the radices of ``n``'s prime factors, 4 for each pair
of 2s) whose butterflies load whole rows of lanes as vectors, so each twiddle factor is one
value for a whole vector and no stage shuffles data between lanes. The lanes are taken
``CHUNK`` at a time through a scratch block that stays in the L1/L2 cache, so a column FFT
reads and writes the array about once, whatever ``n``.

- An axis that is not the last one is a column FFT over (rows = that axis, lanes = the
  axes after it).
- Short last axes (``SHORT_ROW_MAX``) run ``CHUNK`` rows at a time: transposed into the
  lanes of one column FFT and back (``emit_short_rows``).
- A longer last axis (length ``n = n1 * n2``, ``_split``) takes the four-step route: a
  column FFT of each row viewed as an ``(n1, n2)`` matrix, a transposition that multiplies
  by the twiddles ``W_n^(k1 n2)`` (8x8 or 4x4 tiles of vectors where both sides hold whole
  vectors), and a column FFT of the ``(n2, n1)`` result, which is the transform in natural
  order.
- A real transform of length ``2h`` is the complex FFT of length ``h`` of its pairs of values
  (the float array viewed as complex), followed by the usual split into even and odd
  parts (``rfft``; ``irfft`` runs the inverse steps backwards). ``irfft`` ignores the
  imaginary parts of frequency 0 and ``h``, as NumPy and JAX do.
- A length with a prime factor above 7 is Bluestein's: a chirp times a cyclic convolution
  of a native length (``_any_length_rows``); an axis before the last one is moved last for
  it. A real transform of such a length, or of an odd one, is a complex transform.

Twiddle factors are computed in float64 and rounded once. Inverse transforms conjugate the
twiddles and fold the ``1 / prod(fft_lengths)`` scale into their first stage. Rows (or the
chunks of a single large transform's phases) are split across the parallel runtime's threads;
each task has its own scratch memory.

The library (per precision) is compiled once per machine and kept in the disk cache
(``native_lib.load_or_build``). Its entry points have the parallel runtime's task signature
``fn(buffers, lo, hi)``; ``params`` is an int64 array whose float slots hold float64 bits.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
from collections.abc import Callable

import numpy as np

_log = logging.getLogger(__name__)

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_C64, _C128 = np.dtype(np.complex64), np.dtype(np.complex128)
_COMPLEX_OF = {_F32: _C64, _F64: _C128}
_REAL_OF = {_C64: _F32, _C128: _F64}
# Complex numbers per vector (a 512-bit vector; LLVM splits it on narrower machines) and
# lanes per column-FFT chunk (two vectors: 128 bytes per row).
VECTOR = {_C64: 8, _C128: 4}
CHUNK = {_C64: 16, _C128: 8}
# Columns per block of the four-step transposition.
TRANSPOSE_BLOCK = 64
# Largest supported length along one axis (the twiddle tables hold about 2n values).
MAX_LENGTH = 1 << 26
# Transforms of fewer elements run on the calling thread alone.
PARALLEL_MIN_ELEMENTS = 1 << 15
TASKS_PER_THREAD = 4
# ... but column FFTs one task per thread: each task has its own scratch block (``n *
# CHUNK`` numbers, 32 KB for n = 256), so a thread running four tasks cycles through four
# blocks instead of keeping one in its caches (c64 (256, 129) along axis 0: 203-248 us ->
# 117-123; rfft2 of (256, 256) 175-188 -> 141-156; of (1024, 1024) 1.83-1.94 ms -> 1.50-1.57).
COLUMN_TASKS_PER_THREAD = 1
# Last-axis transforms of at most SHORT_ROW_MAX (complex) elements, or SHORT_UNTILED_ROW_MAX
# where the four-step route's transposition has no whole tiles of vectors (``_split``),
# run CHUNK rows at a time as the lanes of one column FFT (``emit_short_rows``); others
# take the four-step route (c64, 2 threads: 256 x 256 0.23 ms so, 0.26 four-step; 128 x
# 2048 0.38, 0.23 four-step; 256 x 1536 0.64, 0.38 four-step; 128 x 3000 0.53, 0.61
# four-step).
SHORT_ROW_MAX = 256
SHORT_UNTILED_ROW_MAX = 4096
# A last-axis transform of at least this length, with fewer rows than threads, splits its
# own phases (column chunks, transposition tiles) across the threads.
PHASED_MIN_LENGTH = 1 << 14

# The custom-call target name ``lax.fft`` looks its native kernel up by.
NATIVE_TARGET = "ember.fft.native"
# Row kinds of ``rows`` (see ``_emit_rows``).
C2C, R2C, C2R = 0, 1, 2
# Slots of the params array.
P_N, P_PLAN, P_INNER, P_TMUL, P_CHUNKS, P_OUTER_IN, P_OUTER_OUT, P_SCALE, P_ROT = range(9)
P_KIND, P_N1, P_N2, P_PLAN1, P_PLAN2, P_IN_ROW, P_OUT_ROW, P_H, P_TMUL1, P_TMUL2 = range(9, 19)
N_PARAMS = 19
# The radices of the Stockham stages (``_plan``): a length's prime factors must all be
# among ``RADICES`` (radix 4 taking pairs of 2s); a *plan* packs the stage count in its low
# PLAN_BITS bits and each stage's radix in the next PLAN_BITS, first stage first.
RADICES = (2, 3, 5, 7)
PLAN_BITS = 4
MAX_STAGES = 64 // PLAN_BITS - 1


# ---------------------------------------------------------------- IR generation


class _Gen:
    """Emits the library of one complex dtype into an llvmlite module."""

    def __init__(self, dtype: np.dtype):
        from llvmlite import ir
        self.ir = ir
        self.dtype = dtype
        self.f = ir.FloatType() if dtype == _C64 else ir.DoubleType()
        self.fp = self.f.as_pointer()
        self.i64 = ir.IntType(64)
        self.vl = VECTOR[dtype]
        self.chunk = CHUNK[dtype]
        self.align = 4 if dtype == _C64 else 8
        self.module = ir.Module(name=_symbol(dtype, "lib"))

    # -- small helpers
    def c(self, v: int):
        return self.ir.Constant(self.i64, v)

    def fc(self, v: float):
        return self.ir.Constant(self.f, v)

    def vty(self, w: int):
        return self.ir.VectorType(self.f, 2 * w)

    def function(self, name: str, args: list, internal: bool = True):
        ir = self.ir
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), args), name)
        if internal:
            fn.linkage = "internal"
        return fn, ir.IRBuilder(fn.append_basic_block("entry"))

    def loop(self, b, lo, hi, step: int = 1):
        """A counted loop ``for i in range(lo, hi, step)``; returns ``(i, close)``: emit the
        body, then call ``close()`` (``scalar_ops.counted_loop``)."""
        from ember.backends.cpu.scalar_ops import counted_loop
        return counted_loop(b, lo, hi, step)

    def ptr(self, b, base, cidx):
        """Address of complex number ``cidx`` of the complex array at ``base`` (float*)."""
        return b.gep(base, [b.shl(cidx, self.c(1))], inbounds=True)

    def load(self, b, base, cidx, w: int):
        p = b.bitcast(self.ptr(b, base, cidx), self.vty(w).as_pointer())
        return b.load(p, align=self.align)

    def store(self, b, value, base, cidx, w: int):
        p = b.bitcast(self.ptr(b, base, cidx), self.vty(w).as_pointer())
        b.store(value, p, align=self.align)

    def shuffle(self, b, x, y, mask):
        ir = self.ir
        return b.shuffle_vector(x, y, ir.Constant(ir.VectorType(ir.IntType(32), len(mask)),
                                                  [ir.Constant(ir.IntType(32), m)
                                                   for m in mask]))

    def swap(self, b, v, w: int):
        """(re, im) -> (im, re) in every complex number of ``v``."""
        return self.shuffle(b, v, v, [k ^ 1 for k in range(2 * w)])

    def pair(self, b, x, y, w: int):
        """The vector (x, y, x, y, ...) of ``w`` complex numbers."""
        ir = self.ir
        v = ir.Constant(self.vty(1), ir.Undefined)
        v = b.insert_element(b.insert_element(v, x, ir.Constant(ir.IntType(32), 0)), y,
                             ir.Constant(ir.IntType(32), 1))
        return self.shuffle(b, v, v, [k & 1 for k in range(2 * w)])

    def cmul_scalar(self, b, v, wr, wi, w: int):
        """``v`` times the complex number ``wr + i wi`` (each lane)."""
        re = self.pair(b, wr, wr, w)
        im = self.pair(b, b.fneg(wi), wi, w)
        return b.fadd(b.fmul(v, re), b.fmul(self.swap(b, v, w), im))

    def cmul(self, b, v, t, w: int):
        """``v`` times ``t``, lane by lane."""
        tr = self.shuffle(b, t, t, [k & ~1 for k in range(2 * w)])
        ti = self.shuffle(b, t, t, [k | 1 for k in range(2 * w)])
        signs = self.ir.Constant(self.vty(w), [self.fc(-1.0 if k % 2 == 0 else 1.0)
                                               for k in range(2 * w)])
        return b.fadd(b.fmul(v, tr), b.fmul(self.swap(b, v, w), b.fmul(ti, signs)))

    def twiddle(self, b, tw, k):
        p = self.ptr(b, tw, k)
        return b.load(p), b.load(b.gep(p, [self.c(1)], inbounds=True))

    # -- the Stockham stages
    def emit_stage(self, radix: int, scaled: bool):
        """``stage(src, ss, dst, ds, lanes, s, m, tw, tmul, rot, scale)``: one Stockham pass
        of radix 2, 3, 4, 5 or 7 over rows of ``lanes`` complex numbers (row strides ``ss``,
        ``ds``): input rows ``q + s (p + j m)``, output rows ``q + s (radix p + j)``,
        twiddles ``tw[j p s tmul]``; ``rot`` is +1 forward, -1 inverse; ``scaled``
        multiplies the inputs by ``scale``."""
        fp, i64, f = self.fp, self.i64, self.f
        name = f"stage{radix}{'s' if scaled else ''}"
        fn, b = self.function(name, [fp, i64, fp, i64, i64, i64, i64, fp, i64, f, f])
        src, ss, dst, ds, lanes, s, m, tw, tmul, rot, scale = fn.args
        for a in (src, dst, tw):
            a.add_attribute("noalias")
        nvec = b.and_(lanes, self.c(-self.vl))
        full = b.icmp_signed("==", lanes, self.c(self.chunk))
        with b.if_else(full) as (then, other):
            with then:  # (the usual case: whole chunks, the lane loop unrolled)
                self.stage_nest(b, fn, radix, scaled, None)
            with other:
                self.stage_nest(b, fn, radix, scaled, nvec)
        b.ret_void()
        return fn

    def stage_nest(self, b, fn, radix: int, scaled: bool, nvec):
        """The loops of ``emit_stage``'s function ``fn``: over whole chunks (``nvec`` None)
        or over any ``lanes``, ``nvec`` of them in vectors."""
        src, ss, dst, ds, lanes, s, m, tw, tmul, rot, scale = fn.args
        p, close_p = self.loop(b, self.c(0), m)
        k1 = b.mul(b.mul(p, s), tmul)
        ws = [self.twiddle(b, tw, b.mul(k1, self.c(j))) for j in range(1, radix)]
        q, close_q = self.loop(b, self.c(0), s)
        rows_in = [b.add(q, b.mul(s, b.add(p, b.mul(m, self.c(j))))) for j in range(radix)]
        out0 = b.add(q, b.mul(s, b.mul(p, self.c(radix))))
        rows_out = [b.add(out0, b.mul(s, self.c(j))) for j in range(radix)]
        ins = [b.mul(r, ss) for r in rows_in]
        outs = [b.mul(r, ds) for r in rows_out]

        def butterfly(lane, w):
            xs = [self.load(b, src, b.add(o, lane), w) for o in ins]
            if scaled:
                sv = self.pair(b, scale, scale, w)
                xs = [b.fmul(x, sv) for x in xs]
            if radix == 2:
                a, c = xs
                ys = [b.fadd(a, c), self.cmul_scalar(b, b.fsub(a, c), *ws[0], w)]
            elif radix % 2:
                ys = self.odd_butterfly(b, xs, rot, w)
                ys = ys[:1] + [self.cmul_scalar(b, y, *t, w) for y, t in zip(ys[1:], ws)]
            else:
                a, bb, c, d = xs
                apc, amc, bpd, bmd = b.fadd(a, c), b.fsub(a, c), b.fadd(bb, d), b.fsub(bb, d)
                jb = b.fmul(self.swap(b, bmd, w), self.pair(b, rot, b.fneg(rot), w))
                ys = [b.fadd(apc, bpd),
                      self.cmul_scalar(b, b.fadd(amc, jb), *ws[0], w),
                      self.cmul_scalar(b, b.fsub(apc, bpd), *ws[1], w),
                      self.cmul_scalar(b, b.fsub(amc, jb), *ws[2], w)]
            for y, o in zip(ys, outs):
                self.store(b, y, dst, b.add(o, lane), w)

        if nvec is None:
            for k in range(0, self.chunk, self.vl):
                butterfly(self.c(k), self.vl)
        else:
            lane, close = self.loop(b, self.c(0), nvec, self.vl)
            butterfly(lane, self.vl)
            close()
            lane, close = self.loop(b, nvec, lanes)
            butterfly(lane, 1)
            close()
        close_q()
        close_p()

    def odd_butterfly(self, b, xs, rot, w: int) -> list:
        """The DFT of odd length ``r = len(xs)``: ``y_k = sum_j x_j W_r^(jk)``, ``W_r =
        exp(-2 pi i rot / r)``, with each mirrored pair ``x_j``, ``x_(r-j)`` added and
        subtracted once (the cosines multiply the sums, the sines the differences)."""
        r = len(xs)
        sums = [b.fadd(xs[j], xs[r - j]) for j in range(1, r // 2 + 1)]
        diffs = [self.swap(b, b.fsub(xs[j], xs[r - j]), w) for j in range(1, r // 2 + 1)]
        ys = [xs[0]]
        for x in sums:
            ys[0] = b.fadd(ys[0], x)
        for k in range(1, r):
            y = xs[0]
            for j in range(1, r // 2 + 1):
                angle = 2.0 * math.pi * ((j * k) % r) / r
                cos = self.pair(b, self.fc(math.cos(angle)), self.fc(math.cos(angle)), w)
                y = b.fadd(y, b.fmul(sums[j - 1], cos))
                # (-i rot sin) (re + i im) = rot sin (im - i re): the swapped difference
                # times (rot sin, -rot sin)
                sine = b.fmul(rot, self.fc(math.sin(angle)))
                y = b.fadd(y, b.fmul(diffs[j - 1], self.pair(b, sine, b.fneg(sine), w)))
            ys.append(y)
        return ys

    def emit_column(self):
        """``column(x, xs, y, ys, lanes, n, plan, tw, tmul, scr, rot, scale)``: the FFT along
        the ``n`` rows of ``lanes`` (at most ``CHUNK``) columns, ``x`` to ``y`` (which must
        not overlap), through ``scr`` (``n * CHUNK`` complex numbers), in the Stockham
        stages of ``plan`` (``_plan``); the first one scales its inputs."""
        fp, i64, f = self.fp, self.i64, self.f
        stage_fns = {(r, scaled): self.emit_stage(r, scaled)
                     for r in (2, 3, 4, 5, 7) for scaled in (False, True)}
        fn, b = self.function("column", [fp, i64, fp, i64, i64, i64, i64, fp, i64, fp, f, f])
        x, xs, y, ys, lanes, n, plan, tw, tmul, scr, rot, scale = fn.args
        bits = self.c(PLAN_BITS)
        mask = self.c((1 << PLAN_BITS) - 1)
        stages = b.and_(plan, mask)
        with b.if_then(b.icmp_signed("==", stages, self.c(0))):  # n == 1: a scaled copy
            lane, close = self.loop(b, self.c(0), lanes)
            v = self.load(b, x, lane, 1)
            self.store(b, b.fmul(v, self.pair(b, scale, scale, 1)), y, lane, 1)
            close()
            b.ret_void()
        # State across stages: source, its stride, s, the stage index.
        cur, cur_s = b.alloca(fp), b.alloca(i64)
        sv, tv = b.alloca(i64), b.alloca(i64)
        b.store(x, cur)
        b.store(xs, cur_s)
        b.store(self.c(1), sv)
        b.store(self.c(0), tv)
        chunk = self.c(self.chunk)
        fn_ = b.block.function
        head, body, end = (fn_.append_basic_block(s) for s in ("shead", "sbody", "send"))
        b.branch(head)
        b.position_at_end(head)
        t = b.load(tv)
        b.cbranch(b.icmp_signed("<", t, stages), body, end)
        b.position_at_end(body)
        s = b.load(sv)
        radix = b.and_(b.lshr(plan, b.mul(b.add(t, self.c(1)), bits)), mask)
        # (the last stage writes y; before it they alternate so that it does)
        to_y = b.icmp_signed("==", b.and_(b.sub(b.sub(stages, t), self.c(1)), self.c(1)),
                             self.c(0))
        d, ds = b.select(to_y, y, scr), b.select(to_y, ys, chunk)
        m = b.udiv(n, b.mul(s, radix))
        args = [b.load(cur), b.load(cur_s), d, ds, lanes, s, m, tw, tmul, rot, scale]
        first = b.icmp_signed("==", t, self.c(0))
        done = fn_.append_basic_block("stage_done")
        switch = b.switch(radix, done)
        for r in (2, 3, 4, 5, 7):
            case = fn_.append_basic_block(f"radix{r}")
            switch.add_case(self.c(r), case)
            b.position_at_end(case)
            with b.if_else(first) as (then, other):
                with then:
                    b.call(stage_fns[r, True], args)
                with other:
                    b.call(stage_fns[r, False], args)
            b.branch(done)
        b.position_at_end(done)
        b.store(d, cur)
        b.store(ds, cur_s)
        b.store(b.mul(s, radix), sv)
        b.store(b.add(t, self.c(1)), tv)
        b.branch(head)
        b.position_at_end(end)
        b.ret_void()
        return fn

    def emit_columns(self, column):
        """``columns(x, y, tw, scr, p, lo, hi)``: chunks ``[lo, hi)`` of the column FFTs of
        an ``(outer, n, inner)`` array (chunk ``k``: block ``k // chunks``, lanes from
        ``CHUNK * (k % chunks)``)."""
        fp, i64 = self.fp, self.i64
        ip = i64.as_pointer()
        fn, b = self.function("columns", [fp, fp, fp, fp, ip, i64, i64])
        x, y, tw, scr, p, lo, hi = fn.args
        n, plan, inner, tmul, chunks, oin, oout, scale, rot = self.params(
            b, p, [P_N, P_PLAN, P_INNER, P_TMUL, P_CHUNKS, P_OUTER_IN, P_OUTER_OUT], [P_SCALE,
                                                                                   P_ROT])
        k, close = self.loop(b, lo, hi)
        blk, part = b.udiv(k, chunks), b.urem(k, chunks)
        first = b.mul(part, self.c(self.chunk))
        lanes = b.sub(inner, first)
        lanes = b.select(b.icmp_signed("<", lanes, self.c(self.chunk)), lanes,
                         self.c(self.chunk))
        xo = b.add(b.mul(blk, oin), first)
        yo = b.add(b.mul(blk, oout), first)
        b.call(column, [self.ptr(b, x, xo), inner, self.ptr(b, y, yo), inner, lanes, n, plan,
                        tw, tmul, scr, rot, scale])
        close()
        b.ret_void()
        return fn

    def params(self, b, p, ints: list, floats: list):
        out = [b.load(b.gep(p, [self.c(i)], inbounds=True)) for i in ints]
        fptr = b.bitcast(p, self.ir.DoubleType().as_pointer())
        for i in floats:
            v = b.load(b.gep(fptr, [self.c(i)], inbounds=True))
            out.append(b.fptrunc(v, self.f) if self.dtype == _C64 else v)
        return out

    def emit_transpose(self):
        """``transpose(a, n1, n2, t, out, lo, hi)``: ``out[c, r] = a[r, c] * W_n^(c r)`` for the
        rows ``r`` of ``a`` (``n1 x n2``) in ``[lo, hi)``; tiles of vectors where both sides
        are whole vectors (``lo``, ``hi`` then multiples of ``VECTOR``)."""
        fp, i64 = self.fp, self.i64
        fn, b = self.function("transpose", [fp, i64, i64, fp, fp, i64, i64])
        a, n1, n2, t, out, lo, hi = fn.args
        for arg in (a, t, out):
            arg.add_attribute("noalias")
        vl = self.vl
        # The twiddles W_n^(c r) = t[c, r % unit] * t[n2 unit + c (n1 / unit) + r // unit]
        # (``_transpose_unit``: a divisor of n1): two small tables instead of one of n values.
        whole = b.icmp_signed("==", b.urem(n1, self.c(vl)), self.c(0))
        unit = b.select(b.icmp_signed("<", n1, self.c(vl)), n1,
                        b.select(whole, self.c(vl), self.c(1)))
        per = b.udiv(n1, unit)
        v_tab = self.ptr(b, t, b.mul(n2, unit))
        tiled = b.and_(b.and_(b.icmp_signed(">=", n1, self.c(vl)), whole),
                       b.and_(b.icmp_signed(">=", n2, self.c(vl)),
                              b.icmp_signed("==", b.urem(n2, self.c(vl)), self.c(0))))
        with b.if_else(tiled) as (then, other):
            with then:
                # (Blocks of TRANSPOSE_BLOCK columns: the writes then go to that many rows
                # of ``out`` at a time, advancing along them.)
                cb, close_b = self.loop(b, self.c(0), n2, TRANSPOSE_BLOCK)
                c_end = b.add(cb, self.c(TRANSPOSE_BLOCK))
                c_end = b.select(b.icmp_signed("<", c_end, n2), c_end, n2)
                r0, close_r = self.loop(b, lo, hi, vl)
                r_hi = b.udiv(r0, self.c(vl))
                c0, close_c = self.loop(b, cb, c_end, vl)
                rows = [self.load(b, a, b.add(b.mul(b.add(r0, self.c(i)), n2), c0), vl)
                        for i in range(vl)]
                h = vl // 2
                while h >= 1:  # swap the off-diagonal h x h blocks of each 2h x 2h block
                    new = list(rows)
                    for i in range(vl):
                        if i & h:
                            continue
                        lo_mask, hi_mask = [], []
                        for blk in range(0, vl, 2 * h):
                            lo_mask += [blk + j for j in range(h)] + \
                                [vl + blk + j for j in range(h)]
                            hi_mask += [blk + h + j for j in range(h)] + \
                                [vl + blk + h + j for j in range(h)]
                        new[i] = self.shuffle(b, rows[i], rows[i + h], _floats(lo_mask))
                        new[i + h] = self.shuffle(b, rows[i], rows[i + h], _floats(hi_mask))
                    rows = new
                    h //= 2
                for j in range(vl):
                    c = b.add(c0, self.c(j))
                    at = b.add(b.mul(c, n1), r0)
                    tv = self.cmul_scalar(b, self.load(b, t, b.mul(c, self.c(vl)), vl),
                                          *self.twiddle(b, v_tab, b.add(b.mul(c, per), r_hi)),
                                          vl)
                    self.store(b, self.cmul(b, rows[j], tv, vl), out, at, vl)
                close_c()
                close_r()
                close_b()
            with other:
                r, close_r = self.loop(b, lo, hi)
                c, close_c = self.loop(b, self.c(0), n2)
                at = b.add(b.mul(c, n1), r)
                v = self.load(b, a, b.add(b.mul(r, n2), c), 1)
                lo_r, hi_r = b.urem(r, unit), b.udiv(r, unit)
                tv = self.cmul_scalar(b, self.load(b, t, b.add(b.mul(c, unit), lo_r), 1),
                                      *self.twiddle(b, v_tab, b.add(b.mul(c, per), hi_r)), 1)
                self.store(b, self.cmul(b, v, tv, 1), out, at, 1)
                close_c()
                close_r()
        b.ret_void()
        return fn

    def emit_real_steps(self):
        """``post(z, h, rt, out, lo, hi)``: frequencies ``k`` in ``[lo, hi)`` (``k < h``; with
        ``k = 0`` also ``h``) of the rfft of a real signal of length ``2h``, from the FFT
        ``z`` of its pairs of values: ``X[k] = (z[k] + conj z[h-k]) / 2 - i W^k (z[k] -
        conj z[h-k]) / 2`` with ``rt[k] = W_2h^k``. ``pre(x, h, rt, z, lo, hi)``: its inverse
        (up to the factor 2h), ``z[k] = (x[k] + conj x[h-k]) + i rt[k] (x[k] - conj x[h-k])``
        with ``rt`` conjugated, from ``x`` (``h + 1`` frequencies; 0 and ``h`` count by their
        real parts only). Each ``k`` reads ``k`` and its mirror, so the loop runs in vectors
        (the mirrors' reversed)."""
        return [self.emit_real_step("post"), self.emit_real_step("pre")]

    def emit_real_step(self, name: str):
        """``emit_real_steps``'s function ``name``."""
        fp, i64, i32 = self.fp, self.i64, self.ir.IntType(32)
        fn, b = self.function(name, [fp, i64, fp, fp, i64, i64])
        src, h, rt, dst, lo, hi = fn.args
        for arg in (src, rt, dst):
            arg.add_attribute("noalias")

        def value(k, w):
            u = self.load(b, src, k, w)
            v = self.load(b, src, b.sub(b.sub(h, k), self.c(w - 1)), w)
            if w > 1:  # (the mirrors, in the order of their k)
                v = self.shuffle(b, v, v, _floats(list(range(w - 1, -1, -1))))
            conj = self.ir.Constant(self.vty(w), [self.fc(1.0 - 2 * (j % 2))
                                                  for j in range(2 * w)])
            cv = b.fmul(v, conj)
            t = self.load(b, rt, k, w)
            if name == "post":
                half = self.pair(b, self.fc(0.5), self.fc(0.5), w)
                rot = b.fmul(self.swap(b, b.fsub(u, cv), w), conj)  # -i (u - conj v)
                out = b.fmul(b.fadd(b.fadd(u, cv), self.cmul(b, rot, t, w)), half)
            else:
                odd = self.cmul(b, b.fsub(u, cv), t, w)
                rot = b.fmul(self.swap(b, odd, w), b.fneg(conj))  # i * odd
                out = b.fadd(b.fadd(u, cv), rot)
            self.store(b, out, dst, k, w)

        with b.if_then(b.icmp_signed("==", lo, self.c(0))):
            first = self.load(b, src, self.c(0), 1)
            re = b.extract_element(first, self.ir.Constant(i32, 0))
            if name == "post":  # X[0] and X[h] are real
                im = b.extract_element(first, self.ir.Constant(i32, 1))
                zero = self.fc(0.0)
                self.store(b, self.pair(b, b.fadd(re, im), zero, 1), dst, self.c(0), 1)
                self.store(b, self.pair(b, b.fsub(re, im), zero, 1), dst, h, 1)
            else:
                last = b.extract_element(self.load(b, src, h, 1), self.ir.Constant(i32, 0))
                self.store(b, self.pair(b, b.fadd(re, last), b.fsub(re, last), 1), dst,
                           self.c(0), 1)
        start = b.select(b.icmp_signed("==", lo, self.c(0)), self.c(1), lo)
        vec_end = b.sub(hi, self.c(self.vl - 1))
        k, close = self.loop(b, start, vec_end, self.vl)
        value(k, self.vl)
        close()
        # (Then the k the vector loop left: from the first one it did not run.)
        steps = b.udiv(b.add(b.sub(vec_end, start), self.c(self.vl - 1)), self.c(self.vl))
        ran = b.icmp_signed("<", start, vec_end)
        rest = b.select(ran, b.add(start, b.mul(steps, self.c(self.vl))), start)
        k, close = self.loop(b, rest, hi)
        value(k, 1)
        close()
        b.ret_void()
        return fn

    def emit_rows(self, column, transpose, post, pre):
        """``rows(x, y, tw, scr, p, tt, rt, lo, hi)``: the last-axis transforms of rows
        ``[lo, hi)`` (kind C2C, R2C or C2R), each by the four-step route (``n = n1 n2``,
        ``tw`` the roots of a multiple of both, taken every ``tmul1``-th and ``tmul2``-th);
        ``scr`` holds ``2 n + max(n1, n2) * CHUNK`` complex numbers."""
        fp, i64 = self.fp, self.i64
        ip = i64.as_pointer()
        fn, b = self.function("rows", [fp, fp, fp, fp, ip, fp, fp, i64, i64])
        x, y, tw, scr, p, tt, rt, lo, hi = fn.args
        (kind, n, n1, n2, plan1, plan2, in_row, out_row, h, tmul1, tmul2, scale,
         rot) = self.params(b, p, [P_KIND, P_N, P_N1, P_N2, P_PLAN1, P_PLAN2, P_IN_ROW,
                                   P_OUT_ROW, P_H, P_TMUL1, P_TMUL2], [P_SCALE, P_ROT])
        a = scr
        bt = self.ptr(b, scr, n)
        cs = self.ptr(b, scr, b.mul(n, self.c(2)))
        r, close = self.loop(b, lo, hi)
        src = self.ptr(b, x, b.mul(r, in_row))
        dst = self.ptr(b, y, b.mul(r, out_row))
        is_r2c = b.icmp_signed("==", kind, self.c(R2C))
        is_c2r = b.icmp_signed("==", kind, self.c(C2R))
        with b.if_then(is_c2r):
            b.call(pre, [src, h, rt, bt, self.c(0), h])
        inp = b.select(is_c2r, bt, src)
        self.chunks(b, column, inp, n2, a, n2, n1, plan1, tw, tmul1, cs, rot, scale)
        b.call(transpose, [a, n1, n2, tt, bt, self.c(0), n1])
        last = b.select(is_r2c, a, dst)
        one = self.fc(1.0)
        self.chunks(b, column, bt, n1, last, n1, n2, plan2, tw, tmul2, cs, rot, one)
        with b.if_then(is_r2c):
            b.call(post, [a, h, rt, dst, self.c(0), h])
        close()
        b.ret_void()
        return fn

    def emit_short_rows(self, column, post, pre):
        """``short_rows(x, y, tw, scr, p, rt, lo, hi)``: the last-axis transforms (kind C2C,
        R2C or C2R, complex length ``n``) of the blocks ``[lo, hi)`` of ``CHUNK`` rows (of
        ``rows``): each block transposed into ``CHUNK`` lanes, one column FFT, and
        transposed back, so that short rows run whole vectors through every stage (the
        four-step route would run its column FFTs on a few lanes each). ``scr`` holds ``4 n
        CHUNK`` complex numbers."""
        fp, i64 = self.fp, self.i64
        ip = i64.as_pointer()
        fn, b = self.function("short_rows", [fp, fp, fp, fp, ip, fp, i64, i64])
        x, y, tw, scr, p, rt, lo, hi = fn.args
        (kind, n, plan, rows, in_row, out_row, h, scale, rot) = self.params(
            b, p, [P_KIND, P_N, P_PLAN, P_INNER, P_IN_ROW, P_OUT_ROW, P_H], [P_SCALE, P_ROT])
        chunk = self.c(self.chunk)
        block = b.mul(n, chunk)
        a, bb, cs, rows_tmp = (self.ptr(b, scr, b.mul(block, self.c(i))) for i in range(4))
        is_r2c = b.icmp_signed("==", kind, self.c(R2C))
        is_c2r = b.icmp_signed("==", kind, self.c(C2R))
        k, close = self.loop(b, lo, hi)
        r0 = b.mul(k, chunk)
        lanes = b.sub(rows, r0)
        lanes = b.select(b.icmp_signed("<", lanes, chunk), lanes, chunk)
        first = self.ptr(b, x, b.mul(r0, in_row))
        with b.if_then(is_c2r):  # (each row's complex FFT input, in rows of n)
            lane, close_l = self.loop(b, self.c(0), lanes)
            b.call(pre, [self.ptr(b, first, b.mul(lane, in_row)), h, rt,
                         self.ptr(b, rows_tmp, b.mul(lane, n)), self.c(0), h])
            close_l()
        row_major = (b.select(is_c2r, rows_tmp, first), b.select(is_c2r, n, in_row))
        self.block_copy(b, row_major, (a, chunk), lanes, n, to_lanes=True)
        b.call(column, [a, chunk, bb, chunk, lanes, n, plan, tw, self.c(1), cs, rot, scale])
        out_first = self.ptr(b, y, b.mul(r0, out_row))
        row_major = (b.select(is_r2c, rows_tmp, out_first), b.select(is_r2c, n, out_row))
        self.block_copy(b, row_major, (bb, chunk), lanes, n, to_lanes=False)
        with b.if_then(is_r2c):
            lane, close_l = self.loop(b, self.c(0), lanes)
            b.call(post, [self.ptr(b, rows_tmp, b.mul(lane, n)), h, rt,
                          self.ptr(b, out_first, b.mul(lane, out_row)), self.c(0), h])
            close_l()
        close()
        b.ret_void()
        return fn

    def block_copy(self, b, rows, lane_block, lanes, n, to_lanes: bool) -> None:
        """Copies ``lanes`` rows of ``n`` complex numbers (``rows``: base and row stride)
        to the columns of a block of lanes (``lane_block``: base and stride between the
        lanes' rows), or back (``to_lanes`` False)."""
        (r_base, r_stride), (l_base, l_stride) = rows, lane_block
        lane, close_l = self.loop(b, self.c(0), lanes)
        j, close_j = self.loop(b, self.c(0), n)
        at_row = b.add(b.mul(lane, r_stride), j)
        at_lane = b.add(b.mul(j, l_stride), lane)
        if to_lanes:
            self.store(b, self.load(b, r_base, at_row, 1), l_base, at_lane, 1)
        else:
            self.store(b, self.load(b, l_base, at_lane, 1), r_base, at_row, 1)
        close_j()
        close_l()

    def chunks(self, b, column, x, xs, y, ys, n, plan, tw, tmul, scr, rot, scale):
        """Calls ``column`` over all the lanes (``xs`` of them) in chunks."""
        k, close = self.loop(b, self.c(0), xs, self.chunk)
        lanes = b.sub(xs, k)
        lanes = b.select(b.icmp_signed("<", lanes, self.c(self.chunk)), lanes,
                         self.c(self.chunk))
        b.call(column, [self.ptr(b, x, k), xs, self.ptr(b, y, k), ys, lanes, n, plan, tw,
                        tmul, scr, rot, scale])
        close()

    def entry(self, name: str, inner, n_pointers: int, extra: Callable | None = None):
        """The exported ``name(buffers, lo, hi)``: calls ``inner(*buffers, lo, hi)`` with
        ``n_pointers`` float buffers and the params array as the fifth one."""
        ir, i64 = self.ir, self.i64
        i8p = ir.IntType(8).as_pointer()
        fn, b = self.function(_symbol(self.dtype, name), [i8p.as_pointer(), i64, i64],
                              internal=False)
        bufs, lo, hi = fn.args
        args = []
        for j, ty in enumerate(t.type for t in inner.args[:n_pointers]):
            args.append(b.bitcast(b.load(b.gep(bufs, [self.c(j)], inbounds=True)), ty))
        b.call(inner, args + [lo, hi])
        b.ret_void()

    def build(self) -> str:
        column = self.emit_column()
        columns = self.emit_columns(column)
        transpose = self.emit_transpose()
        post, pre = self.emit_real_steps()
        rows = self.emit_rows(column, transpose, post, pre)
        short_rows = self.emit_short_rows(column, post, pre)
        self.entry("columns", columns, 5)
        self.entry("rows", rows, 7)
        self.entry("short_rows", short_rows, 6)
        self.entry("transpose", transpose_entry(self, transpose), 4)
        self.entry("post", real_entry(self, post), 4)
        self.entry("pre", real_entry(self, pre), 4)
        return str(self.module)


def transpose_entry(g: _Gen, transpose):
    """``(a, t, out, p, lo, hi)`` -> ``transpose`` of rows ``[lo * unit, hi * unit)``, with
    ``n1``, ``n2`` and ``unit`` from ``p``."""
    fp, i64 = g.fp, g.i64
    fn, b = g.function("transpose_p", [fp, fp, fp, i64.as_pointer(), i64, i64])
    a, t, out, p, lo, hi = fn.args
    n1, n2, unit = g.params(b, p, [P_N1, P_N2, P_TMUL], [])  # (rows per task slot)
    b.call(transpose, [a, n1, n2, t, out, b.mul(lo, unit), b.mul(hi, unit)])
    b.ret_void()
    return fn


def real_entry(g: _Gen, step):
    """``(src, rt, dst, p, lo, hi)`` -> ``step`` with ``h`` from ``p``."""
    fp, i64 = g.fp, g.i64
    fn, b = g.function(step.name + "_p", [fp, fp, fp, i64.as_pointer(), i64, i64])
    src, rt, dst, p, lo, hi = fn.args
    (h,) = g.params(b, p, [P_H], [])
    b.call(step, [src, h, rt, dst, lo, hi])
    b.ret_void()
    return fn


def _floats(complex_mask: list) -> list:
    """A shuffle mask over complex numbers as one over their floats."""
    return [2 * m + k for m in complex_mask for k in (0, 1)]


def _symbol(dtype: np.dtype, name: str) -> str:
    return f"ember_fft_{dtype.name}_{name}"


def library_ir(dtype: np.dtype) -> str:
    """The LLVM IR of the FFT library of ``dtype`` (complex64 or complex128)."""
    return _Gen(np.dtype(dtype)).build()


# ---------------------------------------------------------------- running it


class _Library:
    """The loaded library of one complex dtype: its entry points as C function pointers."""

    def __init__(self, lib, dtype: np.dtype):
        from ember.backends.cpu.executable import _ffi
        self._lib = lib  # keeps the code loaded
        self.dtype = dtype
        for name in ("columns", "rows", "short_rows", "transpose", "post", "pre"):
            setattr(self, name, _ffi.cast("void(*)(char**, long, long)",
                                          lib.address(_symbol(dtype, name))))


_libraries: dict[np.dtype, _Library | None] = {}
_lock = threading.Lock()


def library(dtype: np.dtype) -> _Library | None:
    """The FFT library of complex ``dtype``, loaded (or built once per machine), or None
    where no native code can be made."""
    try:
        return _libraries[dtype]
    except KeyError:
        pass
    with _lock:
        if dtype not in _libraries:
            try:
                from ember.backends.cpu import (
                    _shared_libraries_enabled,
                    _source_stamp,
                    native_lib,
                )
                lib = native_lib.load_or_build(
                    f"ember-fft:{dtype.name}:{_source_stamp()}", lambda: library_ir(dtype), 3,
                    _shared_libraries_enabled())
                _libraries[dtype] = _Library(lib, dtype)
            except Exception as e:  # noqa: BLE001 - NumPy's FFT still works
                _log.debug("no native FFT for %s: %s", dtype, e)
                _libraries[dtype] = None
    return _libraries[dtype]


def _exp_table(k: np.ndarray, n: int, inverse: bool, dtype: np.dtype) -> np.ndarray:
    """``W_n^k = exp(-+2 pi i k / n)`` (``k`` reduced mod n first), computed in float64."""
    angle = (2.0 * np.pi / n) * (k % n)
    out = np.empty(k.shape, np.complex128)
    out.real = np.cos(angle)
    out.imag = np.sin(angle) if inverse else -np.sin(angle)
    return out.astype(dtype)


_tables: dict[tuple, np.ndarray] = {}
_TABLES_KEPT = 32


def _table(kind: str, n1: int, n2: int, inverse: bool, dtype: np.dtype) -> np.ndarray:
    """Twiddle tables (kept for the last ``_TABLES_KEPT`` uses): ``roots`` ``W_n1^k``,
    ``k < n1``; ``transpose`` the factors of ``W_(n1 n2)^(r c)`` (``emit_transpose``); ``real``
    ``W_(2 n1)^k``, ``k < n1``."""
    key = (kind, n1, n2, inverse, dtype)
    t = _tables.get(key)
    if t is None:
        if kind == "roots":
            t = _exp_table(np.arange(n1, dtype=np.int64), n1, inverse, dtype)
        elif kind == "transpose":  # (see ``emit_transpose``)
            unit = _transpose_unit(n1, dtype)
            c = np.arange(n2, dtype=np.int64)[:, None]
            small = c * np.arange(unit, dtype=np.int64)
            big = c * np.arange(0, n1, unit, dtype=np.int64)
            t = _exp_table(np.concatenate([small.ravel(), big.ravel()]), n1 * n2, inverse,
                           dtype)
        else:
            t = _exp_table(np.arange(n1, dtype=np.int64), 2 * n1, inverse, dtype)
        if len(_tables) >= _TABLES_KEPT:
            _tables.pop(next(iter(_tables)))
        _tables[key] = t
    return t


def _transpose_unit(n1: int, dtype: np.dtype) -> int:
    """The divisor of ``n1`` that splits the four-step twiddles into two tables
    (``emit_transpose``): ``n1`` below a vector, a vector where it divides ``n1``, else 1."""
    vl = VECTOR[dtype]
    return n1 if n1 < vl else vl if n1 % vl == 0 else 1


@functools.lru_cache(maxsize=256)
def _plan(n: int) -> int | None:
    """The Stockham stages of a length-``n`` transform, packed (``PLAN_BITS``): a 2 left
    over from the pairs of 2s first (as the power-of-two transforms always had it), radix 4
    for each pair, then 3s, 5s and 7s; None when ``n`` has another prime factor or needs
    more than ``MAX_STAGES`` stages."""
    if not 1 <= n <= MAX_LENGTH:
        return None
    radices, rest = [], n
    for r in RADICES:
        while rest % r == 0:
            radices.append(r)
            rest //= r
    if rest != 1:
        return None
    twos = radices.count(2)
    radices = [2] * (twos % 2) + [4] * (twos // 2) + [r for r in radices if r != 2]
    if len(radices) > MAX_STAGES:
        return None
    plan = len(radices)
    for t, r in enumerate(radices):
        plan |= r << (PLAN_BITS * (t + 1))
    return plan


@functools.lru_cache(maxsize=256)
def _split(n: int) -> tuple[int, int]:
    """``(n1, n2)`` with ``n1 n2 = n`` and ``n1 <= n2`` as close as they go (the four-step
    route's two column FFTs); for a power of two, ``n1`` divides ``n2``."""
    n1 = max(d for d in range(1, math.isqrt(n) + 1) if n % d == 0)
    return n1, n // n1


def _params(**values) -> np.ndarray:
    p = np.zeros(N_PARAMS, np.int64)
    f = p.view(np.float64)
    for name, v in values.items():
        slot = globals()["P_" + name.upper()]
        if name in ("scale", "rot"):
            f[slot] = v
        else:
            p[slot] = v
    return p


def _run(fn, pointers: list, extent: int, work: int, scratch: int, dtype: np.dtype,
         tasks_per_thread: int = TASKS_PER_THREAD) -> None:
    """``fn(buffers, lo, hi)`` over ``[0, extent)``, split into tasks (``tasks_per_thread``
    for each of the runtime's threads) when ``work`` (elements) is large; ``pointers`` has
    None where each task's own scratch memory of ``scratch`` complex numbers goes."""
    from ember import _scratch
    from ember.backends.cpu import parallel_runtime
    from ember.backends.cpu.eager_math import start_thread
    from ember.backends.cpu.executable import _ffi

    runtime = None
    if work >= PARALLEL_MIN_ELEMENTS and extent > 1:
        parallel_runtime.prepare(start_thread)
        runtime = parallel_runtime.ready()
    n_tasks = 1 if runtime is None else min(extent, runtime.size * tasks_per_thread)
    keep = []
    if None in pointers:
        space = _scratch.empty((n_tasks, max(scratch, 1)), dtype)
        keep.append(space)
        at = pointers.index(None)
        tables = []
        for t in range(n_tasks):
            ptrs = list(pointers)
            ptrs[at] = _ffi.from_buffer(space[t])
            tables.append(_ffi.new("char*[]", ptrs))
    else:
        tables = [_ffi.new("char*[]", pointers)]
    if n_tasks == 1:
        fn(tables[0], 0, extent)
    else:
        runtime.run(fn, _ffi.new("char**[]", tables), int(len(tables) > 1), extent, n_tasks)
    del keep


def _columns(lib: _Library, src: np.ndarray, dst: np.ndarray, shape: tuple, axis: int,
             inverse: bool, scale: float) -> None:
    """The FFT along ``axis`` of the complex array ``src`` (of ``shape``) into ``dst``."""
    from ember.backends.cpu.executable import _ffi
    fb = _ffi.from_buffer
    outer, n = math.prod(shape[:axis]), shape[axis]
    inner = math.prod(shape[axis + 1:])
    chunk = CHUNK[lib.dtype]
    chunks = -(-inner // chunk)
    p = _params(n=n, plan=_plan(n), inner=inner, tmul=1, chunks=chunks,
                outer_in=n * inner, outer_out=n * inner, scale=scale,
                rot=-1.0 if inverse else 1.0)
    tw = _table("roots", n, 1, inverse, lib.dtype)
    _run(lib.columns, [fb(src), fb(dst), fb(tw), None, fb(p)], outer * chunks, src.size,
         n * chunk, lib.dtype, COLUMN_TASKS_PER_THREAD)


def _phased(n: int, rows: int) -> bool:
    """Whether rows of length ``n`` run phase by phase, each phase split across threads
    (long rows, fewer than the threads), rather than row by row."""
    from ember.backends.cpu import parallel_runtime
    runtime = parallel_runtime.ready()
    return n >= PHASED_MIN_LENGTH and runtime is not None and rows < runtime.size


def _rows(lib: _Library, src: np.ndarray, dst: np.ndarray, kind: int, n: int, rows: int,
          inverse: bool, scale: float) -> None:
    """The last-axis transforms of ``rows`` rows, each of complex length ``n`` (for R2C and
    C2R, ``n`` is half the real length)."""
    from ember import _scratch
    from ember.backends.cpu.executable import _ffi
    fb, dt = _ffi.from_buffer, lib.dtype
    in_row = n + 1 if kind == C2R else n
    out_row = n + 1 if kind == R2C else n
    n1, n2 = _split(n)
    vl = VECTOR[dt]
    if n <= SHORT_ROW_MAX or (n <= SHORT_UNTILED_ROW_MAX and (n1 % vl or n2 % vl)):
        p = _params(kind=kind, n=n, plan=_plan(n), inner=rows, in_row=in_row,
                    out_row=out_row, h=n, scale=scale, rot=-1.0 if inverse else 1.0)
        tw = _table("roots", n, 1, inverse, dt)
        rt = _table("real", n, 1, kind == C2R, dt) if kind != C2C else tw
        _run(lib.short_rows, [fb(src), fb(dst), fb(tw), None, fb(p), fb(rt)],
             -(-rows // CHUNK[dt]), rows * n, 4 * n * CHUNK[dt], dt)
        return
    roots = math.lcm(n1, n2)  # (one table serves both column FFTs)
    p = _params(kind=kind, n=n, n1=n1, n2=n2, plan1=_plan(n1), plan2=_plan(n2),
                in_row=in_row, out_row=out_row, h=n, tmul1=roots // n1, tmul2=roots // n2,
                scale=scale, rot=-1.0 if inverse else 1.0)
    tw = _table("roots", roots, 1, inverse, dt)
    tt = _table("transpose", n1, n2, inverse, dt)
    rt = _table("real", n, 1, kind == C2R, dt) if kind != C2C else tw
    if not _phased(n, rows):
        _run(lib.rows, [fb(src), fb(dst), fb(tw), None, fb(p), fb(tt), fb(rt)], rows,
             rows * n, 2 * n + n2 * CHUNK[dt], dt)  # (n2 >= n1)
        return
    # A few long rows: each row's phases split across the threads.
    a, bt = _scratch.empty(n, dt), _scratch.empty(n, dt)
    chunk, vl = CHUNK[dt], VECTOR[dt]
    src_c = src.reshape(rows, -1).view(dt) if kind == R2C else src.reshape(rows, -1)
    dst_c = dst.reshape(rows, -1).view(dt) if kind == C2R else dst.reshape(rows, -1)
    first = _params(n=n1, plan=_plan(n1), inner=n2, tmul=roots // n1,
                    chunks=-(-n2 // chunk), scale=scale, rot=p.view(np.float64)[P_ROT])
    second = _params(n=n2, plan=_plan(n2), inner=n1, tmul=roots // n2,
                     chunks=-(-n1 // chunk), scale=1.0, rot=p.view(np.float64)[P_ROT])
    # (rows of the transposition per task: whole tiles of vectors where it has them)
    unit = vl if n1 >= vl and n2 >= vl and n1 % vl == 0 and n2 % vl == 0 else 1
    tp = _params(n1=n1, n2=n2, tmul=unit, h=n)
    for r in range(rows):
        x, y = src_c[r], dst_c[r]
        if kind == C2R:
            _run(lib.pre, [fb(x), fb(rt), fb(bt), fb(tp)], n, n, 0, dt)
            x = bt
        _run(lib.columns, [fb(x), fb(a), fb(tw), None, fb(first)], -(-n2 // chunk), n,
             n1 * chunk, dt, COLUMN_TASKS_PER_THREAD)
        _run(lib.transpose, [fb(a), fb(tt), fb(bt), fb(tp)], n1 // unit, n, 0, dt)
        last = a if kind == R2C else y
        _run(lib.columns, [fb(bt), fb(last), fb(tw), None, fb(second)], -(-n1 // chunk), n,
             n2 * chunk, dt, COLUMN_TASKS_PER_THREAD)
        if kind == R2C:
            _run(lib.post, [fb(a), fb(rt), fb(y), fb(tp)], n, n, 0, dt)


@functools.lru_cache(maxsize=256)
def _bluestein_length(n: int) -> int | None:
    """The smallest length ``m >= 2 n - 1`` of a native transform (``_plan``): Bluestein's
    convolution length for ``n``; None past ``MAX_LENGTH``."""
    m = 2 * n - 1
    while m <= MAX_LENGTH:
        if _plan(m) is not None:
            return m
        m += 1
    return None


def _chirp(n: int, m: int, inverse: bool, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Bluestein's ``w_k = W_2n^(k^2)`` (``k < n``) and the transform of the length-``m``
    sequence ``conj(w)`` mirrored (``b_k = b_(m-k)``), divided by ``m``: float64 values,
    rounded once (kept as the twiddle tables are)."""
    key = ("chirp", n, m, inverse, dtype)
    got = _tables.get(key)
    if got is None:
        k = np.arange(n, dtype=np.int64)
        w = _exp_table(k * k % (2 * n), 2 * n, inverse, np.dtype(np.complex128))
        b = np.zeros(m, np.complex128)
        b[:n] = w.conj()
        b[m - n + 1:] = w.conj()[1:][::-1]
        got = w.astype(dtype), (np.fft.fft(b) / m).astype(dtype)
        if len(_tables) >= _TABLES_KEPT:
            _tables.pop(next(iter(_tables)))
        _tables[key] = got
    return got


def _any_length_rows(lib: _Library, x: np.ndarray, n: int, inverse: bool,
                     scale: float) -> np.ndarray:
    """The complex transforms (times ``scale``) of the rows of ``x`` (``rows x n``), of any
    length: native where ``_plan`` has stages for ``n``, else Bluestein's: ``X_k = w_k sum_j
    (x_j w_j) conj(w_(k-j))``, the sum a cyclic convolution of length ``m`` computed by
    native transforms (``_chirp``)."""
    from ember import _scratch
    rows, dt = x.shape[0], lib.dtype
    x = np.ascontiguousarray(x)
    out = _scratch.empty((rows, n), dt)
    if _plan(n) is not None:
        _rows(lib, x, out, C2C, n, rows, inverse, scale)
        return out
    m = _bluestein_length(n)
    w, kernel = _chirp(n, m, inverse, dt)
    a = np.zeros((rows, m), dt)
    np.multiply(x, w, out=a[:, :n])
    spectrum = _scratch.empty((rows, m), dt)
    _rows(lib, a, spectrum, C2C, m, rows, False, 1.0)
    spectrum *= kernel
    _rows(lib, spectrum, a, C2C, m, rows, True, 1.0)
    np.multiply(a[:, :n], w * dt.type(scale), out=out)
    return out


def _axis(lib: _Library, src: np.ndarray, dst: np.ndarray, shape: tuple, axis: int,
          inverse: bool, scale: float) -> None:
    """The complex transform along ``axis`` (not the last) of ``src`` into ``dst``: column
    FFTs where ``_plan`` has stages for its length, else the axis moved last
    (``_any_length_rows``) and back."""
    n = shape[axis]
    if _plan(n) is not None:
        _columns(lib, src, dst, shape, axis, inverse, scale)
        return
    moved = np.moveaxis(src.reshape(shape), axis, -1)
    rows = _any_length_rows(lib, moved.reshape(-1, n), n, inverse, scale)
    np.copyto(dst.reshape(shape), np.moveaxis(rows.reshape(moved.shape), -1, axis))


def _irfft_any(lib: _Library, spectrum: np.ndarray, n: int, scale: float) -> np.ndarray:
    """The real inverse transforms (times ``scale``) of length ``n`` of the rows of
    ``spectrum`` (``n // 2 + 1`` frequencies each): the real part of the complex inverse of
    the Hermitian spectrum they start (the imaginary parts of frequency 0, and of ``n / 2``,
    then count for nothing, as in NumPy and JAX)."""
    half = n // 2 + 1
    full = np.empty((spectrum.shape[0], n), lib.dtype)
    full[:, :half] = spectrum
    np.conjugate(spectrum[:, n - half:0:-1], out=full[:, half:])
    return _any_length_rows(lib, full, n, True, scale).real


def transform(x: np.ndarray, fft_type: int, fft_lengths) -> np.ndarray | None:
    """``lax.fft``'s transform of ``x`` (FFT 0, IFFT 1, RFFT 2, IRFFT 3) over its last
    ``len(fft_lengths)`` axes, or None where this module has no kernel for it (other
    dtypes, a real length below 2, empty arrays). An axis whose length has a prime factor
    above 7 (``_plan``), or a real transform's odd last axis, is a complex transform
    (``_any_length_rows``; an axis before the last one moved last for it)."""
    kind = int(fft_type)
    lengths = tuple(int(n) for n in fft_lengths)
    x = np.asarray(x)
    if not lengths or x.size == 0 or any(_plan(n) is None and _bluestein_length(n) is None
                                         for n in lengths):
        return None
    trailing = lengths[:-1] + (lengths[-1] // 2 + 1,) if kind == 3 else lengths
    if x.shape[x.ndim - len(lengths):] != trailing:
        return None
    last = lengths[-1] // 2 if kind >= 2 else lengths[-1]  # (a real transform's half)
    last_native = not (kind >= 2 and lengths[-1] % 2) and _plan(last) is not None
    if kind == 2:
        cdt = _COMPLEX_OF.get(x.dtype)
    else:
        cdt = x.dtype if x.dtype in _REAL_OF else None
    if cdt is None or (kind >= 2 and lengths[-1] < 2):
        return None
    lib = library(cdt)
    if lib is None:
        return None
    from ember import _scratch
    x = np.ascontiguousarray(x)
    inverse = kind in (1, 3)
    scale = 1.0 / math.prod(lengths) if inverse else 1.0
    k, nd = len(lengths), x.ndim
    cols = list(range(nd - 2, nd - k - 1, -1))  # the axes before the last one
    if kind == 3:
        shape = x.shape
        out = _scratch.empty(shape[:-1] + (lengths[-1],), _REAL_OF[cdt])
        src = x
        if cols:
            tmp = [_scratch.empty(shape, cdt) for _ in range(min(2, len(cols)))]
            for i, axis in enumerate(cols):
                dst = tmp[i % 2]
                _axis(lib, src, dst, shape, axis, True, scale if i == 0 else 1.0)
                src = dst
        rows = math.prod(shape[:-1])
        if last_native:
            _rows(lib, src, out, C2R, lengths[-1] // 2, rows, True, 1.0 if cols else scale)
        else:
            out.reshape(rows, -1)[...] = _irfft_any(lib, src.reshape(rows, -1), lengths[-1],
                                                    1.0 if cols else scale)
        return out
    if kind == 2:
        h = lengths[-1] // 2
        shape = x.shape[:-1] + (h + 1,)
        rows_kind, n = R2C, h
    else:
        shape = x.shape
        rows_kind, n = C2C, lengths[-1]
    out = _scratch.empty(shape, cdt)
    passes = 1 + len(cols)
    tmp = _scratch.empty(shape, cdt) if passes > 1 else None
    dst = out if passes % 2 == 1 else tmp
    rows = math.prod(shape[:-1])
    if last_native:
        _rows(lib, x, dst, rows_kind, n, rows, inverse, scale)
    else:
        length = lengths[-1]
        full = _any_length_rows(lib, x.reshape(rows, length).astype(cdt, copy=False), length,
                                inverse, scale)
        dst.reshape(rows, -1)[...] = full[:, :shape[-1]]
    src = dst
    for i, axis in enumerate(cols):
        dst = out if (passes - 2 - i) % 2 == 0 else tmp
        _axis(lib, src, dst, shape, axis, inverse, 1.0)
        src = dst
    return out
