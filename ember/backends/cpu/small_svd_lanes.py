"""Singular values of small real matrices, one matrix per vector lane
(``small_linalg_kernel``'s ``svd`` for sides up to ``MAX_SIDE``).

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
entry gives all-NaN values, as LAPACK's ``gesdd`` does.
"""

from __future__ import annotations

from ember.backends.cpu.small_lanes import LaneKernel

# Largest side emitted (``small_linalg_kernel.MAX_DIM``).
MAX_SIDE = 16
# Largest side emitted unrolled (4 x 4: ~0.3 s to compile, ~10% faster than looped; 8 x 8:
# ~1.2 s, ~15% faster).
UNROLL_MAX_SIDE = 6
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
    sweep = g.slot(g.i64)
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

    b.store(g.c(0), sweep)
    head = g.fn.append_basic_block("sweep")
    b.branch(head)
    b.position_at_end(head)
    b.store(no, rotated)
    g.rng(0, nn - 1, lambda p: g.rng(g.add(p, 1), nn, lambda q: rotate(p, q)))
    count = b.add(b.load(sweep), g.c(1))
    b.store(count, sweep)
    done = b.or_(g.all_lanes(b.not_(b.load(rotated))),
                 b.icmp_signed(">=", count, g.c(MAX_SWEEPS)))
    after = g.fn.append_basic_block("converged")
    b.cbranch(done, after, head)
    b.position_at_end(after)

    # The column norms, scaled back; each one's rank among its lane's is its index.
    sig = g.array(nn)

    def norm(j):
        b.store(zero, acc[0])
        g.rng(0, mm, lambda i: b.store(
            b.fadd(b.load(acc[0]), b.fmul(g.ld(wm, i, j, nn), g.ld(wm, i, j, nn))), acc[0]))
        g.st(sig, b.fmul(g.intrinsic("sqrt", [b.load(acc[0])]), power), j)

    g.rng(0, nn, norm)
    vr = ir.VectorType(g.i32, g.w)
    ones, vzero = (ir.Constant(vr, [ir.Constant(g.i32, v)] * g.w) for v in (1, 0))
    rank = g.slot(vr)
    nan = g.splat(float("nan"))

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
        jv = b.trunc(g.val(j), g.i32)
        at = b.select(bad, b.shuffle_vector(
            b.insert_element(ir.Constant(vr, None), jv, ir.Constant(g.i32, 0)),
            ir.Constant(vr, None), ir.Constant(vr, [ir.Constant(g.i32, 0)] * g.w)),
            b.load(rank))
        g.store_at(1, nn, at, b.select(bad, nan, sj))

    g.rng(0, nn, place)
    g.finish()
