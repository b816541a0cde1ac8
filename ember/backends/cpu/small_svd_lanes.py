"""Singular values and vectors of small real matrices, one matrix per vector lane
(``small_linalg_kernel``'s ``svd`` for sides up to ``MAX_SIDE``): ``emit`` the values
alone, ``emit_vectors`` with U and V (see there).

LAPACK's ``gesdd`` costs ~1-2 µs per 4 x 4 matrix, mostly call and setup overhead. Here a
group of matrices (``small_lanes``) is diagonalized together by one-sided (Hestenes)
Jacobi: W is the matrix, or its transpose when it is wide, so that W is mm x nn with
mm >= nn; each rotation of a column pair (p, q) makes the two columns orthogonal, with the
rotation that diagonalizes their Gram block ``[[a, g], [g, b]]`` (``a = |w_p|^2``,
``b = |w_q|^2``, ``g = w_p . w_q``; Rutishauser's ``t = tan(phi)``, the smaller root).
Sweeps over all pairs repeat until no lane has a pair with ``|g| > eps sqrt(a b)``
(quadratic convergence: 3-6 sweeps), or ``MAX_SWEEPS``. The singular values are then the
column norms: unlike the eigenvalues of W^T W, they keep their accuracy relative to the
norm of the matrix down to the smallest ones, as LAPACK's do.

Each matrix is scaled by a power of two first (exact) so that the sums of squares neither
overflow nor underflow; pairs with ``|g|`` below ``eps**2`` of the scaled norm are not
rotated (nothing to gain, and subnormal numbers are slow). The values come out descending
(each value's rank, ties by position, is its output index). A matrix with a NaN or infinite
entry gives all-NaN values and vectors (JAX's LAPACK path gives NaN values for a NaN).
"""

from __future__ import annotations

from ember.backends.cpu.small_lanes import LaneKernel

# Largest side emitted (``small_linalg_kernel.MAX_DIM``).
MAX_SIDE = 16
# Largest side emitted unrolled (4 x 4: ~0.3 s to compile, ~10% faster than looped; 8 x 8:
# ~1.2 s, ~15% faster).
UNROLL_MAX_SIDE = 6
# The same for the kernel with vectors: unrolled, 4 x 4 takes ~1 s to compile (6 x 6:
# ~3-5 s) and runs no faster than looped (~0.15 s).
UNROLL_MAX_SIDE_VECTORS = 1
# Sweeps after which the iteration stops even if a lane has not converged (a NaN-free
# matrix converges in far fewer).
MAX_SWEEPS = 30


def emit(module, fty, m: int, n: int, name: str) -> None:
    """Adds ``name(buffers, lo, hi)`` to ``module``: the singular values of the m x n
    matrices ``[lo, hi)``. Buffers: x (batch, m, n) read-only; s (batch, min(m, n)),
    descending."""
    mm, nn = max(m, n), min(m, n)
    g = LaneKernel(module, fty, name, 2, mm, UNROLL_MAX_SIDE)
    b, ir = g.b, g.ir
    wm, power, bad = g.load_matrix(0, mm, nn, transpose=m < n)
    f32 = g.ity.width == 32
    eps = 2.0 ** (-24 if f32 else -53)
    zero, one = g.splat(0.0), g.splat(1.0)
    acc = [g.slot() for _ in range(3)]
    rotated = g.slot(g.vb)
    no = ir.Constant(g.vb, [ir.Constant(g.i1, 0)] * g.w)

    def rotate(p, q):
        for s in acc:
            b.store(zero, s)

        def row(i):
            wp, wq = g.ld(wm, i, p, nn), g.ld(wm, i, q, nn)
            for s, (x, y) in zip(acc, ((wp, wp), (wq, wq), (wp, wq))):
                b.store(b.fadd(b.load(s), b.fmul(x, y)), s)

        g.rng(0, mm, row)
        alpha, beta, gamma = (b.load(s) for s in acc)
        mag = g.intrinsic("fabs", [gamma])
        limit = b.fmul(g.splat(eps), g.intrinsic("sqrt", [b.fmul(alpha, beta)]))
        go = b.and_(b.fcmp_ordered(">", mag, limit), b.fcmp_ordered(">", mag, g.splat(eps * eps)))
        b.store(b.or_(b.load(rotated), go), rotated)
        zeta = b.fdiv(b.fsub(beta, alpha), b.fmul(g.splat(2.0), gamma))
        root = g.intrinsic("sqrt", [b.fadd(b.fmul(zeta, zeta), one)])
        t = b.fdiv(g.intrinsic("copysign", [one, zeta]),
                   b.fadd(g.intrinsic("fabs", [zeta]), root))
        t = b.select(go, t, zero)
        cs = b.fdiv(one, g.intrinsic("sqrt", [b.fadd(b.fmul(t, t), one)]))
        sn = b.fmul(t, cs)

        def update(i):
            wp, wq = g.ld(wm, i, p, nn), g.ld(wm, i, q, nn)
            g.st(wm, b.fsub(b.fmul(cs, wp), b.fmul(sn, wq)), i, p, nn)
            g.st(wm, b.fadd(b.fmul(sn, wp), b.fmul(cs, wq)), i, q, nn)

        g.rng(0, mm, update)

    g.sweeps(nn, lambda: b.store(no, rotated), rotate,
             lambda: g.all_lanes(b.not_(b.load(rotated))), MAX_SWEEPS)

    # The column norms, scaled back; each one's rank among its lane's is its index.
    sig = g.array(nn)

    def norm(j):
        b.store(zero, acc[0])
        g.rng(0, mm, lambda i: b.store(
            b.fadd(b.load(acc[0]), b.fmul(g.ld(wm, i, j, nn), g.ld(wm, i, j, nn))), acc[0]))
        g.st(sig, b.fmul(g.intrinsic("sqrt", [b.load(acc[0])]), power), j)

    g.rng(0, nn, norm)
    ranks = g.array(nn, ir.VectorType(g.i32, g.w))
    _ranks(g, sig, nn, bad, ranks)
    nan = g.splat(float("nan"))
    g.rng(0, nn, lambda j: g.store_at(1, nn, g.ld(ranks, j), b.select(bad, nan, g.ld(sig, j))))
    g.finish()


def emit_vectors(module, fty, m: int, n: int, full: bool, name: str) -> None:
    """Adds ``name(buffers, lo, hi)`` to ``module``: the singular values and vectors of
    the m x n matrices ``[lo, hi)``. Buffers: x (batch, m, n) read-only; s (batch, k),
    descending; u (batch, m, ku); vt (batch, kv, n); k = min(m, n), ``(ku, kv)`` = (m, n)
    if ``full`` else (k, k).

    Two-sided (Kogbetliantz) Jacobi, whose left and right factors are products of
    rotations, so they are orthogonal however rank-deficient the matrix: W (the matrix, or
    its transpose when wide, mm x nn) is first reduced to its nn x nn triangle R by
    Householder QR (``small_qr_lanes``: W = Q R); each pair (p, q) of R is then
    diagonalized by a rotation of rows p, q that makes the 2 x 2 block symmetric followed
    by the symmetric Jacobi rotation of ``small_eigh_lanes`` from both sides. A negative
    diagonal entry flips its right vector. W's left vectors are Q's first nn columns times
    the left rotations (and Q's last ones for a full U)."""
    from ember.backends.cpu import small_qr_lanes

    mm, nn = max(m, n), min(m, n)
    wide = m < n
    g = LaneKernel(module, fty, name, 4, mm, UNROLL_MAX_SIDE_VECTORS)
    b, ir = g.b, g.ir
    wm, power, bad = g.load_matrix(0, mm, nn, transpose=wide)
    kw = mm if full else nn  # W's left vectors
    zero, one = g.splat(0.0), g.splat(1.0)
    f32 = g.ity.width == 32
    eps = 2.0 ** (-24 if f32 else -53)
    if mm > nn:
        taus = small_qr_lanes.factor(g, wm, mm, nn)
        qm = small_qr_lanes.form_q(g, wm, taus, mm, nn, kw)
        r = g.array(nn * nn)  # (below wm's diagonal: the reflectors)
        g.rng(0, nn, lambda i: g.rng(0, nn, lambda j: g.st(r, b.select(
            b.icmp_signed("<=", g.val(i), g.val(j)), g.ld(wm, i, j, nn), zero), i, j, nn)))
    else:
        r = wm
    left, right = g.array(nn * nn), g.array(nn * nn)
    for arr in (left, right):
        g.rng(0, nn, lambda i, arr=arr: g.rng(0, nn, lambda j: g.st(arr, b.select(
            b.icmp_signed("==", g.val(i), g.val(j)), one, zero), i, j, nn)))
    off = g.slot()
    tiny = g.splat(eps * eps)

    def rows(p, q, cs, sn):  # rows p, q of R times [[cs, sn], [-sn, cs]]
        def col(k):
            rp, rq = g.ld(r, p, k, nn), g.ld(r, q, k, nn)
            g.st(r, b.fadd(b.fmul(cs, rp), b.fmul(sn, rq)), p, k, nn)
            g.st(r, b.fsub(b.fmul(cs, rq), b.fmul(sn, rp)), q, k, nn)
        g.rng(0, nn, col)

    def cols(arr, p, q, cs, sn):  # columns p, q of arr times [[cs, -sn], [sn, cs]]^T
        def row(k):
            xp, xq = g.ld(arr, k, p, nn), g.ld(arr, k, q, nn)
            g.st(arr, b.fadd(b.fmul(cs, xp), b.fmul(sn, xq)), k, p, nn)
            g.st(arr, b.fsub(b.fmul(cs, xq), b.fmul(sn, xp)), k, q, nn)
        g.rng(0, nn, row)

    def rotate(p, q):
        rpq, rqp = g.ld(r, p, q, nn), g.ld(r, q, p, nn)
        mag = b.select(b.fcmp_ordered(">", g.intrinsic("fabs", [rqp]),
                                      g.intrinsic("fabs", [rpq])),
                       g.intrinsic("fabs", [rqp]), g.intrinsic("fabs", [rpq]))
        b.store(b.select(b.fcmp_ordered(">", mag, b.load(off)), mag, b.load(off)), off)
        # 1. Rows p, q rotated so that the block becomes symmetric.
        total = b.fadd(g.ld(r, p, p, nn), g.ld(r, q, q, nn))
        diff = b.fsub(rqp, rpq)
        hyp = g.intrinsic("sqrt", [b.fadd(b.fmul(total, total), b.fmul(diff, diff))])
        keep = b.fcmp_unordered("<=", g.intrinsic("fabs", [diff]), tiny)
        cs1 = b.select(keep, one, b.fdiv(total, hyp))
        sn1 = b.select(keep, zero, b.fdiv(diff, hyp))
        rows(p, q, cs1, sn1)
        cols(left, p, q, cs1, sn1)
        # 2. The symmetric Jacobi rotation, from both sides.
        app, aqq = g.ld(r, p, p, nn), g.ld(r, q, q, nn)
        apq = b.fmul(g.splat(0.5), b.fadd(g.ld(r, p, q, nn), g.ld(r, q, p, nn)))
        theta = b.fdiv(b.fsub(aqq, app), b.fmul(g.splat(2.0), apq))
        root = g.intrinsic("sqrt", [b.fadd(b.fmul(theta, theta), one)])
        t = b.fdiv(g.intrinsic("copysign", [one, theta]),
                   b.fadd(g.intrinsic("fabs", [theta]), root))
        small = b.fcmp_unordered("<=", g.intrinsic("fabs", [apq]), tiny)
        t = b.select(small, zero, t)
        cs = b.fdiv(one, g.intrinsic("sqrt", [b.fadd(b.fmul(t, t), one)]))
        sn = b.fsub(zero, b.fmul(t, cs))  # (the eigh rotation, in this file's sign)
        rows(p, q, cs, sn)
        for arr in (r, left, right):
            cols(arr, p, q, cs, sn)
        tapq = b.fmul(t, apq)
        g.st(r, b.fsub(app, tapq), p, p, nn)
        g.st(r, b.fadd(aqq, tapq), q, q, nn)
        g.st(r, b.select(small, g.ld(r, p, q, nn), zero), p, q, nn)
        g.st(r, b.select(small, g.ld(r, q, p, nn), zero), q, p, nn)

    g.sweeps(nn, lambda: b.store(zero, off), rotate,
             lambda: g.all_lanes(b.fcmp_ordered("<=", b.load(off), g.splat(eps))), MAX_SWEEPS)

    # Values |d_j| scaled back, a negative d_j's right vector flipped; ranks as above.
    sig = g.array(nn)
    nan = g.splat(float("nan"))

    def value(j):
        d = g.ld(r, j, j, nn)
        g.st(sig, b.fmul(g.intrinsic("fabs", [d]), power), j)
        flip = b.select(b.fcmp_ordered("<", d, zero), g.splat(-1.0), one)
        g.rng(0, nn, lambda k: g.st(right, b.fmul(g.ld(right, k, j, nn), flip), k, j, nn))

    g.rng(0, nn, value)
    ranks = g.array(nn, ir.VectorType(g.i32, g.w))
    _ranks(g, sig, nn, bad, ranks)
    # W's left vectors: Q's first nn columns times the left rotations, then Q's others.
    if mm > nn:
        uw = g.array(mm * kw)
        acc = g.slot()

        def product(i, j):
            b.store(zero, acc)
            g.rng(0, nn, lambda k: b.store(b.fadd(b.load(acc), b.fmul(
                g.ld(qm, i, k, kw), g.ld(left, k, j, nn))), acc))
            g.st(uw, b.load(acc), i, j, kw)

        g.rng(0, mm, lambda i: g.rng(0, nn, lambda j: product(i, j)))
        g.rng(0, mm, lambda i: g.rng(nn, kw, lambda j: g.st(uw, g.ld(qm, i, j, kw), i, j, kw)))
    else:
        uw = left
    s_buf, u_buf, vt_buf = 1, 2, 3
    ku, kv = (m, n) if full else (nn, nn)
    splat_i = g.splat_index

    def out_column(j):
        rank = g.ld(ranks, j)
        g.store_at(s_buf, nn, rank, b.select(bad, nan, g.ld(sig, j)))
        # Left vector j of W: a column of u (tall) or a row of vt (wide); right vector j
        # of W: a row of vt (tall) or a column of u (wide).
        for arr, rows_, stride_cols, buf, as_column in (
                (uw, mm, kw, u_buf if not wide else vt_buf, not wide),
                (right, nn, nn, vt_buf if not wide else u_buf, wide)):
            def entry(k, arr=arr, stride_cols=stride_cols, buf=buf, as_column=as_column):
                vec = b.select(bad, nan, g.ld(arr, k, j, stride_cols))
                if as_column:  # (k, rank) of a (rows, ku) matrix
                    off_ = b.add(b.mul(splat_i(k), splat_i(ku)), rank)
                    g.store_at(buf, m * ku, off_, vec)
                else:  # (rank, k) of a (kv, n) matrix
                    off_ = b.add(b.mul(rank, splat_i(n)), splat_i(k))
                    g.store_at(buf, kv * n, off_, vec)
            g.rng(0, rows_, entry)

    g.rng(0, nn, out_column)

    def completion(j):  # W's left vectors past nn (full only): in place
        def entry(k):
            vec = b.select(bad, nan, g.ld(uw, k, j, kw))
            if not wide:
                g.store(u_buf, m * ku, g.index(k, j, ku), vec)
            else:
                g.store(vt_buf, kv * n, g.index(j, k, n), vec)
        g.rng(0, mm, entry)

    g.rng(nn, kw, completion)
    g.finish()


def _ranks(g: LaneKernel, sig, nn: int, bad, ranks) -> None:
    """``ranks[j]``: value j's index in its lane's descending order (ties by position; a
    ``bad`` lane keeps its order)."""
    ir, b = g.ir, g.b
    vr = ir.VectorType(g.i32, g.w)
    ones, vzero = (ir.Constant(vr, [ir.Constant(g.i32, v)] * g.w) for v in (1, 0))
    no = ir.Constant(g.vb, [ir.Constant(g.i1, 0)] * g.w)
    rank = g.slot(vr)

    def place(j):
        sj = g.ld(sig, j)
        b.store(vzero, rank)

        def count_before(i):  # i precedes j: larger, or equal and earlier
            si = g.ld(sig, i)
            earlier = b.icmp_signed("<", g.val(i), g.val(j))
            ahead = b.select(earlier, b.fcmp_ordered(">=", si, sj), b.fcmp_ordered(">", si, sj))
            ahead = b.select(b.icmp_signed("!=", g.val(i), g.val(j)), ahead, no)
            b.store(b.add(b.load(rank), b.select(ahead, ones, vzero)), rank)

        g.rng(0, nn, count_before)
        g.st(ranks, b.select(bad, g.splat_index(j), b.load(rank)), j)

    g.rng(0, nn, place)
