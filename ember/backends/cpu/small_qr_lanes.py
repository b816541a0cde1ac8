"""QR decompositions of small real matrices, one matrix per vector lane
(``small_linalg_kernel``'s ``geqrf`` for sides up to ``MAX_SIDE``).

LAPACK's ``geqrf`` and ``orgqr`` cost ~1-2 µs per 6 x 4 matrix, mostly call and setup
overhead. Here a group of matrices (``small_lanes``) is factored together with LAPACK's
unblocked algorithms and conventions, so the factors agree with LAPACK's to rounding:

* ``geqr2``: for each column j < k = min(m, n), the reflector ``H = I - tau v v^T`` of
  ``dlarfg``: ``beta = -sign(alpha) * |(alpha, x)|``, ``tau = (beta - alpha) / beta``,
  ``v = x / (alpha - beta)`` (``v_j = 1``), R's diagonal entry ``beta``; a column with
  ``x = 0`` gets ``tau = 0`` (H = I, the diagonal entry keeps its sign). H is applied to
  the trailing columns as ``dlarf`` does: ``w = C^T v``, ``C -= v (tau w)^T``.
* ``org2r``: Q is the first columns of ``H_0 ... H_{k-1}`` (k of them, or m for a
  complete Q), built by applying the reflectors to the identity's columns, last first.

Each matrix is scaled by a power of two first (exact) so that the sums of squares neither
overflow nor underflow; R is scaled back. A matrix with a NaN or infinite entry gives
all-NaN factors (LAPACK's NaNs spread through the columns they reach).
"""

from __future__ import annotations

from ember.backends.cpu.small_lanes import LaneKernel

# Largest side emitted (``small_linalg_kernel.MAX_DIM``).
MAX_SIDE = 16
# Largest side emitted unrolled: unrolled, a 4 x 4 or 6 x 4 QR runs at most ~20% faster
# than looped but takes ~1-1.5 s to compile instead of ~0.15 s (8 x 8: ~8 s).
UNROLL_MAX_SIDE = 1


def emit(module, fty, m: int, n: int, full: bool, name: str) -> None:
    """Adds ``name(buffers, lo, hi)`` to ``module``: the QR decomposition of the m x n
    matrices ``[lo, hi)``. Buffers: x (batch, m, n) read-only; q (batch, m, kq); r
    (batch, kq, n) with zeros below the diagonal; kq = m if ``full`` else min(m, n)."""
    kq = m if full else min(m, n)
    g = LaneKernel(module, fty, name, 3, max(m, n), UNROLL_MAX_SIDE)
    b = g.b
    a, power, bad = g.load_matrix(0, m, n)
    taus = factor(g, a, m, n)
    nan, zero = g.splat(float("nan")), g.splat(0.0)

    # R: the upper triangle of the first kq rows, scaled back.
    def r_entry(i, q):
        above = b.icmp_signed("<=", g.val(i), g.val(q))
        value = b.select(above, b.fmul(g.ld(a, i, q, n), power), zero)
        g.store(2, kq * n, g.index(i, q, n), b.select(bad, nan, value))

    g.rng(0, kq, lambda i: g.rng(0, n, lambda q: r_entry(i, q)))
    qm = form_q(g, a, taus, m, n, kq)
    g.rng(0, m, lambda i: g.rng(0, kq, lambda q: g.store(
        1, m * kq, g.index(i, q, kq), b.select(bad, nan, g.ld(qm, i, q, kq)))))
    g.finish()


def _reflect(g, a, n: int, m: int, j, col_arr, cols: int, q, tau) -> None:
    """Column q of ``col_arr`` (m rows of ``cols``) times H_j: ``c -= v (tau (v^T c))``,
    v stored below the diagonal of column j of ``a`` (n columns)."""
    b = g.b
    acc = g.slot()
    b.store(g.ld(col_arr, j, q, cols), acc)
    g.rng(g.add(j, 1), m, lambda i: b.store(
        b.fadd(b.load(acc), b.fmul(g.ld(a, i, j, n), g.ld(col_arr, i, q, cols))), acc))
    temp = b.fmul(b.fsub(g.splat(0.0), tau), b.load(acc))
    g.st(col_arr, b.fadd(g.ld(col_arr, j, q, cols), temp), j, q, cols)
    g.rng(g.add(j, 1), m, lambda i: g.st(
        col_arr, b.fadd(g.ld(col_arr, i, q, cols), b.fmul(g.ld(a, i, j, n), temp)),
        i, q, cols))


def factor(g: LaneKernel, a, m: int, n: int):
    """``geqr2`` in place on the m x n array ``a`` of ``g``: R on and above the diagonal,
    the reflectors' v below it; returns the array of the min(m, n) taus."""
    b = g.b
    taus = g.array(max(min(m, n), 1))
    acc = g.slot()
    zero, one = g.splat(0.0), g.splat(1.0)

    def householder(j):
        alpha = g.ld(a, j, j, n)
        b.store(zero, acc)
        g.rng(g.add(j, 1), m, lambda i: b.store(
            b.fadd(b.load(acc), b.fmul(g.ld(a, i, j, n), g.ld(a, i, j, n))), acc))
        xsq = b.load(acc)
        norm = g.intrinsic("sqrt", [b.fadd(b.fmul(alpha, alpha), xsq)])
        neg = b.fsub(zero, g.intrinsic("copysign", [norm, alpha]))
        trivial = b.fcmp_ordered("==", xsq, zero)
        beta = b.select(trivial, alpha, neg)
        tau = b.select(trivial, zero, b.fdiv(b.fsub(beta, alpha), beta))
        scal = b.select(trivial, one, b.fdiv(one, b.fsub(alpha, beta)))
        g.rng(g.add(j, 1), m, lambda i: g.st(a, b.fmul(g.ld(a, i, j, n), scal), i, j, n))
        g.st(a, beta, j, j, n)
        g.st(taus, tau, j)
        g.rng(g.add(j, 1), n, lambda q: _reflect(g, a, n, m, j, a, n, q, tau))

    g.rng(0, min(m, n), householder)
    return taus


def form_q(g: LaneKernel, a, taus, m: int, n: int, kq: int):
    """``org2r``: a new m x kq array, the identity's first kq columns times H_{k-1}, ...,
    H_0 (the reflectors ``factor`` left in ``a`` and ``taus``)."""
    b = g.b
    one, zero = g.splat(1.0), g.splat(0.0)
    qm = g.array(m * kq)
    g.rng(0, m, lambda i: g.rng(0, kq, lambda q: g.st(
        qm, b.select(b.icmp_signed("==", g.val(i), g.val(q)), one, zero), i, q, kq)))
    g.rng_down(min(m, n), lambda j: g.rng(j, kq, lambda q: _reflect(
        g, a, n, m, j, qm, kq, q, g.ld(taus, j))))
    return qm
