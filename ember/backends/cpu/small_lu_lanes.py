"""LU with partial pivoting of small square matrices, one matrix per vector lane
(``small_linalg_kernel``'s ``getrf`` for sides up to ``MAX_SIDE``).

A 4 x 4 LU done one matrix at a time is a chain of dependent loads, compares, swaps and
divisions (~80 ns of latency). Here ``LANES`` matrices are factored together: the matrix
lives in registers as n x n vectors (one entry of every lane's matrix each), the pivot
search is a compare-and-select over the column, and the row swap, which differs per lane,
is a select per entry. The code is emitted fully unrolled for a constant side; its choices
are the scalar loop's (the first NaN, else the first largest magnitude; a zero pivot
leaves its column unscaled; a product then a difference), so the results are the same.
"""

from __future__ import annotations

# Largest side emitted this way (the unrolled code grows like n**3).
MAX_SIDE = 8
# Matrices per group: one 512-bit vector of float32, or two of float64.
LANES = 16


def emit(module, fty, n: int, name: str, tail) -> None:
    """Adds ``name(buffers, lo, hi)`` to ``module``: the LU of the n x n matrices
    ``[lo, hi)`` in groups of ``LANES``, the rest through ``tail`` (the scalar kernel, a
    function of the same signature in ``module``). Buffers: a (batch, n, n) in place,
    pivots and permutation (batch, n) int32, dims (unused here)."""
    from llvmlite import ir

    from ember.backends.cpu.scalar_ops import counted_loop

    i32, i64, i8p = ir.IntType(32), ir.IntType(64), ir.IntType(8).as_pointer()
    w = LANES
    vf, vi = ir.VectorType(fty, w), ir.VectorType(i32, w)
    c = lambda v: ir.Constant(i64, v)  # noqa: E731
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p.as_pointer(), i64, i64]),
                     name)
    bufs, lo, hi = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    raw = [b.load(b.gep(bufs, [c(k)], inbounds=True)) for k in range(3)]
    a = b.bitcast(raw[0], fty.as_pointer())
    piv, perm = (b.bitcast(r, i32.as_pointer()) for r in raw[1:])
    suffix = f"v{w}{'f32' if isinstance(fty, ir.FloatType) else 'f64'}"
    fabs = ir.Function(module, ir.FunctionType(vf, [vf]), f"llvm.fabs.{suffix}")
    groups = b.sdiv(b.sub(hi, lo), c(w))
    split = b.add(lo, b.mul(groups, c(w)))

    e0, close = counted_loop(b, lo, split, w)  # (the first matrix of a group of w)

    def gather(ptr, stride, offset, vty):
        v = ir.Constant(vty, None)
        for lane in range(w):
            at = b.add(b.mul(b.add(e0, c(lane)), c(stride)), c(offset))
            v = b.insert_element(v, b.load(b.gep(ptr, [at], inbounds=True)),
                                 ir.Constant(i32, lane))
        return v

    def scatter(ptr, stride, offset, v):
        for lane in range(w):
            at = b.add(b.mul(b.add(e0, c(lane)), c(stride)), c(offset))
            b.store(b.extract_element(v, ir.Constant(i32, lane)),
                    b.gep(ptr, [at], inbounds=True))

    def splat_i(k):
        return ir.Constant(vi, [ir.Constant(i32, k)] * w)

    zero = ir.Constant(vf, [ir.Constant(fty, 0.0)] * w)
    m = [[gather(a, n * n, i * n + q, vf) for q in range(n)] for i in range(n)]
    rows = [splat_i(i) for i in range(n)]  # the permutation: which row is at i
    for j in range(n):
        best = b.call(fabs, [m[j][j]])
        p = splat_i(j)
        for i in range(j + 1, n):  # the first NaN, else the first largest |a[i, j]|
            v = b.call(fabs, [m[i][j]])
            take = b.or_(b.fcmp_ordered(">", v, best),
                         b.and_(b.fcmp_unordered("uno", v, v),
                                b.fcmp_ordered("ord", best, best)))
            best = b.select(take, v, best)
            p = b.select(take, splat_i(i), p)
        scatter(piv, n, j, p)
        old_row, old_perm = list(m[j]), rows[j]
        for i in range(j + 1, n):  # swap rows j and p, lane by lane
            here = b.icmp_signed("==", p, splat_i(i))
            for q in range(n):
                m[j][q] = b.select(here, m[i][q], m[j][q])
                m[i][q] = b.select(here, old_row[q], m[i][q])
            rows[j] = b.select(here, rows[i], rows[j])
            rows[i] = b.select(here, old_perm, rows[i])
        pv = m[j][j]
        nonzero = b.fcmp_unordered("!=", pv, zero)  # a zero pivot: the column unscaled
        for i in range(j + 1, n):
            m[i][j] = b.select(nonzero, b.fdiv(m[i][j], pv), m[i][j])
            for q in range(j + 1, n):
                m[i][q] = b.fsub(m[i][q], b.fmul(m[i][j], m[j][q]))
    for i in range(n):
        for q in range(n):
            scatter(a, n * n, i * n + q, m[i][q])
        scatter(perm, n, i, rows[i])
    close()
    b.call(tail, [bufs, split, hi])
    b.ret_void()
