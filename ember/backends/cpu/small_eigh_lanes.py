"""Eigenvalues and eigenvectors of small real symmetric matrices, one matrix per vector lane
(``small_linalg_kernel``'s ``syevd`` for sides up to ``MAX_SIDE``).

LAPACK's ``syevd`` costs ~2-3 µs per 4 x 4 matrix, mostly call and setup overhead. Here
``lanes(fty)`` matrices (one 512-bit vector) are diagonalized together by cyclic Jacobi
rotations: every entry of the matrix and of the eigenvector matrix is a vector holding that
entry of each lane's matrix, and each rotation is the same handful of vector operations for
all lanes, with each lane's own angle. Sweeps over all pairs (p, q) repeat until every
lane's largest off-diagonal entry met in a sweep is at most ``eps`` times its largest entry
(Jacobi converges quadratically: 3-6 sweeps), or ``MAX_SWEEPS``.

Each matrix is first scaled by a power of two (exact) that brings its largest entry into
[1, 2), so that the rotation angles neither overflow nor underflow; the eigenvalues are
scaled back. A matrix with a NaN or infinite entry gives all-NaN eigenvalues and vectors
(LAPACK's NaNs spread through the block they touch; here through the whole matrix). The
eigenvalues come out ascending with their vectors in the same columns: each value's rank
(ties by position) is its output column. The rotation is Rutishauser's (Numerical Recipes'
``jacobi``): ``t = tan(phi)`` the smaller root, ``a_pp -= t a_pq``, ``a_qq += t a_pq``.

The side is a constant of the code. Up to ``UNROLL_MAX_SIDE`` a sweep is emitted unrolled
(LLVM keeps the matrices in registers); larger sides loop over (p, q) at run time over
matrices kept on the stack. The last group of a range repeats its last matrix in the lanes
past the end (they compute and store the same values again), so nothing outside the
operands is read or written.
"""

from __future__ import annotations

from ember.backends.cpu.small_lanes import lanes

# Largest side emitted (``small_linalg_kernel.MAX_DIM``).
MAX_SIDE = 16
# Sides whose sweeps are emitted fully unrolled.
UNROLL_MAX_SIDE = 6
# Sweeps after which the iteration stops even if a lane has not converged (never reached
# in tests: a NaN-free matrix converges in at most ~8).
MAX_SWEEPS = 20


def emit(module, fty, n: int, name: str) -> None:
    """Adds ``name(buffers, lo, hi)`` to ``module``: the eigendecomposition of the n x n
    symmetric matrices ``[lo, hi)``. Buffers: x (batch, n, n) read-only, of which the lower
    triangle is read; v (batch, n, n), the eigenvectors in columns; w (batch, n), the
    ascending eigenvalues; dims (unused)."""
    from llvmlite import ir

    from ember.backends.cpu.scalar_ops import counted_loop

    i1, i32, i64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)
    i8p = ir.IntType(8).as_pointer()
    w = lanes(fty)
    f32 = isinstance(fty, ir.FloatType)
    ity = ir.IntType(32 if f32 else 64)
    vf, vi, vb = ir.VectorType(fty, w), ir.VectorType(ity, w), ir.VectorType(i1, w)
    vr = ir.VectorType(i32, w)
    c = lambda v: ir.Constant(i64, v)  # noqa: E731
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p.as_pointer(), i64, i64]),
                     name)
    bufs, lo, hi = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    x, v_out, w_out = (b.bitcast(b.load(b.gep(bufs, [c(k)], inbounds=True)), fty.as_pointer())
                       for k in range(3))
    amat = b.alloca(ir.ArrayType(vf, n * n))
    vmat = b.alloca(ir.ArrayType(vf, n * n))
    diag = b.alloca(ir.ArrayType(vf, n))
    off, amax_slot = b.alloca(vf), b.alloca(vf)
    bad_slot = b.alloca(vb)
    rank_slot = b.alloca(ir.VectorType(i32, w))
    sweep = b.alloca(i64)
    suffix = f"v{w}{'f32' if f32 else 'f64'}"
    intrinsic = lambda nm: ir.Function(  # noqa: E731
        module, ir.FunctionType(vf, [vf] * (2 if nm == "copysign" else 1)),
        f"llvm.{nm}.{suffix}")
    fabs, sqrt, copysign = intrinsic("fabs"), intrinsic("sqrt"), intrinsic("copysign")

    def splat(v):
        return ir.Constant(vf, [ir.Constant(fty, v)] * w)

    zero, one = splat(0.0), splat(1.0)
    last = b.sub(hi, c(1))

    def lane_base(e0, lane, stride):  # the lane's matrix, clamped to the range's last
        e = b.add(e0, c(lane))
        e = b.select(b.icmp_signed("<", e, hi), e, last)
        return b.mul(e, c(stride))

    def idx(i, j):
        if isinstance(i, int) and isinstance(j, int):
            return c(i * n + j)
        i = c(i) if isinstance(i, int) else i
        j = c(j) if isinstance(j, int) else j
        return b.add(b.mul(i, c(n)), j)

    def ptr(mat, i, j):
        return b.gep(mat, [c(0), idx(i, j)], inbounds=True)

    def ld(mat, i, j):
        return b.load(ptr(mat, i, j))

    def st(mat, i, j, val):
        b.store(val, ptr(mat, i, j))

    unrolled = n <= UNROLL_MAX_SIDE

    def val(i):
        return c(i) if isinstance(i, int) else i

    def rng(start, stop, body):
        """``for i in range(start, stop): body(i)``: unrolled (Python ints) for small
        sides, else a run-time loop."""
        if unrolled:
            for i in range(start, stop):
                body(i)
        else:
            i, close_loop = counted_loop(b, val(start), val(stop))
            body(i)
            close_loop()

    def splat_i1(flag):
        return b.select(flag, ir.Constant(vb, [ir.Constant(i1, 1)] * w),
                        ir.Constant(vb, [ir.Constant(i1, 0)] * w))

    def splat_index(i):
        if isinstance(i, int):
            return ir.Constant(vr, [ir.Constant(i32, i)] * w)
        one_lane = b.insert_element(ir.Constant(vr, None), b.trunc(i, i32),
                                    ir.Constant(i32, 0))
        return b.shuffle_vector(one_lane, one_lane, ir.Constant(vr, [ir.Constant(i32, 0)] * w))

    def same(i, j):  # i == j, for ints or run-time indices
        if isinstance(i, int) and isinstance(j, int):
            return ir.Constant(i1, int(i == j))
        return b.icmp_signed("==", val(i), val(j))

    e0, close = counted_loop(b, lo, hi, w)
    bases = [lane_base(e0, lane, n * n) for lane in range(w)]

    # The lower triangle mirrored, one vector per entry; per lane the largest magnitude and
    # whether an entry is not finite.
    inf = splat(float("inf"))
    b.store(zero, amax_slot)
    b.store(ir.Constant(vb, [ir.Constant(i1, 0)] * w), bad_slot)

    def gather_row(i):
        def entry(j):
            vec = ir.Constant(vf, None)
            for lane in range(w):
                at = b.add(bases[lane], idx(i, j))
                vec = b.insert_element(vec, b.load(b.gep(x, [at], inbounds=True)),
                                       ir.Constant(i32, lane))
            mag = b.call(fabs, [vec])
            b.store(b.or_(b.load(bad_slot), b.fcmp_unordered(">=", mag, inf)), bad_slot)
            old = b.load(amax_slot)
            b.store(b.select(b.fcmp_ordered(">", mag, old), mag, old), amax_slot)
            st(amat, i, j, vec)
            st(amat, j, i, vec)
        rng(0, i + 1 if isinstance(i, int) else b.add(i, c(1)), entry)

    rng(0, n, gather_row)
    amax, bad = b.load(amax_slot), b.load(bad_slot)
    # 2**floor(log2(amax)) (0 for a zero or subnormal amax, where no scaling is done).
    expmask = ir.Constant(vi, [ir.Constant(ity, 0x7F800000 if f32 else 0x7FF << 52)] * w)
    pow2 = b.bitcast(b.and_(b.bitcast(amax, vi), expmask), vf)
    unscale = b.select(b.fcmp_ordered(">", pow2, zero), pow2, one)
    scale = b.fdiv(one, unscale)
    eps = 2.0 ** (-24 if f32 else -53)
    tol = b.fmul(splat(eps), b.fmul(amax, scale))
    # Entries below eps**2 times the norm are left alone: rotating them changes nothing
    # and would make subnormal numbers (slow).
    tiny = b.fmul(splat(eps * eps), b.fmul(amax, scale))

    def init_row(i):
        def entry(j):  # a bad lane: a zero matrix (converged at once)
            st(amat, i, j, b.select(bad, zero, b.fmul(ld(amat, i, j), scale)))
            st(vmat, i, j, b.select(same(i, j), one, zero))
        rng(0, n, entry)

    rng(0, n, init_row)
    b.store(c(0), sweep)

    def rotate(p, q):
        app, aqq, apq = ld(amat, p, p), ld(amat, q, q), ld(amat, p, q)
        mag = b.call(fabs, [apq])
        b.store(b.select(b.fcmp_ordered(">", mag, b.load(off)), mag, b.load(off)), off)
        theta = b.fdiv(b.fsub(aqq, app), b.fmul(splat(2.0), apq))
        root = b.call(sqrt, [b.fadd(b.fmul(theta, theta), one)])
        t = b.fdiv(b.call(copysign, [one, theta]), b.fadd(b.call(fabs, [theta]), root))
        small = b.fcmp_unordered("<=", mag, tiny)
        t = b.select(small, zero, t)
        cs = b.fdiv(one, b.call(sqrt, [b.fadd(b.fmul(t, t), one)]))
        sn = b.fmul(t, cs)
        ks = [k for k in range(n) if k not in (p, q)] if unrolled else range(n)
        for k in ks:
            akp, akq = ld(amat, k, p), ld(amat, k, q)
            new_p = b.fsub(b.fmul(cs, akp), b.fmul(sn, akq))
            new_q = b.fadd(b.fmul(sn, akp), b.fmul(cs, akq))
            st(amat, k, p, new_p)
            st(amat, p, k, new_p)
            st(amat, k, q, new_q)
            st(amat, q, k, new_q)
        for k in range(n):
            vkp, vkq = ld(vmat, k, p), ld(vmat, k, q)
            st(vmat, k, p, b.fsub(b.fmul(cs, vkp), b.fmul(sn, vkq)))
            st(vmat, k, q, b.fadd(b.fmul(sn, vkp), b.fmul(cs, vkq)))
        # (with run-time p and q the loop above also wrote these four: now set right)
        tapq = b.fmul(t, apq)
        st(amat, p, p, b.fsub(app, tapq))
        st(amat, q, q, b.fadd(aqq, tapq))
        st(amat, p, q, b.select(small, apq, zero))
        st(amat, q, p, b.select(small, apq, zero))

    head = fn.append_basic_block("sweep")
    b.branch(head)
    b.position_at_end(head)
    b.store(zero, off)
    rng(0, n - 1, lambda p: rng(p + 1 if isinstance(p, int) else b.add(p, c(1)), n,
                                lambda q: rotate(p, q)))
    count = b.add(b.load(sweep), c(1))
    b.store(count, sweep)
    converged = b.bitcast(b.fcmp_ordered("<=", b.load(off), tol), ir.IntType(w))
    done = b.or_(b.icmp_signed("==", converged, ir.Constant(ir.IntType(w), (1 << w) - 1)),
                 b.icmp_signed(">=", count, c(MAX_SWEEPS)))
    after = fn.append_basic_block("sorted")
    b.cbranch(done, after, head)
    b.position_at_end(after)

    # Eigenvalues scaled back (a lane with a NaN among them is bad too).
    def value(i):
        d = b.fmul(ld(amat, i, i), unscale)
        b.store(d, b.gep(diag, [c(0), val(i)], inbounds=True))
        b.store(b.or_(b.load(bad_slot), b.fcmp_unordered("uno", d, d)), bad_slot)

    rng(0, n, value)
    bad = b.load(bad_slot)
    nan = splat(float("nan"))
    ones = ir.Constant(vr, [ir.Constant(i32, 1)] * w)
    vzero = ir.Constant(vr, [ir.Constant(i32, 0)] * w)

    # Each value's rank among its lane's values (ties by position) is its column.
    def store_column(i):
        di = b.load(b.gep(diag, [c(0), val(i)], inbounds=True))
        b.store(vzero, rank_slot)

        def count_before(j):
            dj = b.load(b.gep(diag, [c(0), val(j)], inbounds=True))
            if isinstance(i, int):
                before = b.not_(b.fcmp_ordered("<", di, dj)) if j < i else \
                    b.fcmp_ordered("<", dj, di) if j > i else None
            else:
                lt = b.icmp_signed("<", val(j), val(i))
                before = b.select(splat_i1(lt), b.not_(b.fcmp_ordered("<", di, dj)),
                                  b.fcmp_ordered("<", dj, di))
                before = b.and_(before, splat_i1(b.not_(same(i, j))))
            if before is not None:
                b.store(b.add(b.load(rank_slot), b.select(before, ones, vzero)), rank_slot)

        rng(0, n, count_before)
        rank = b.select(bad, splat_index(i), b.load(rank_slot))
        di = b.select(bad, nan, di)
        for lane in range(w):
            lane_i = ir.Constant(i32, lane)
            col = b.sext(b.extract_element(rank, lane_i), i64)
            b.store(b.extract_element(di, lane_i),
                    b.gep(w_out, [b.add(lane_base(e0, lane, n), col)], inbounds=True))

            def vector_entry(k, lane_i=lane_i, col=col, lane=lane):
                vk = b.select(bad, nan, ld(vmat, k, i))
                at = b.add(bases[lane], b.add(b.mul(val(k), c(n)), col))
                b.store(b.extract_element(vk, lane_i), b.gep(v_out, [at], inbounds=True))

            rng(0, n, vector_entry)

    rng(0, n, store_column)
    close()
    b.ret_void()
