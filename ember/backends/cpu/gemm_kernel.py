"""ember's own matrix product: a CBLAS-compatible ``gemm`` compiled by LLVM for the host.

NumPy's OpenBLAS picks its kernels at load time for the CPU it believes it runs on, and a
user's ``OPENBLAS_CORETYPE`` can pin it to older ones (this project's Zen 5 VM runs it
with ``Haswell``: 256-bit kernels at half of the core's 512-bit peak). This routine is the
classic blocked algorithm (Goto's): ``op(B)``'s ``KC x NC`` blocks packed into panels
``NR`` columns wide, ``op(A)``'s ``MC x KC`` blocks into panels ``MR`` rows tall (both
padded with zeros), and a register-tiled micro-kernel multiplying one A panel by one B
panel into ``MR x NR`` accumulators: ``NV`` vectors a row, each step one broadcast of A
per row and one fused multiply-add per accumulator. The tile fills the registers of the
host's widest vectors (14 x 32 float32 with AVX-512's 32 registers, 6 x 16 with AVX2's
16).

Every output element sums its products in the same order whatever block of the output a
call computes: ``KC`` products at a time from zero, each block's total added to the
output in order of ``k``. So a product split into row or column blocks across threads
gives the same bits as one call, on any number of threads. A second entry,
``ember_gemm_{s,d}_split`` (``_emit_split``), takes the parallel runtime's ``run`` and
thread count before CBLAS's arguments and runs one product as several tasks a thread,
claimed as threads come free (a thread that shares its core takes fewer), after packing
the operand it does not cut once for all of them.

The entry point has CBLAS's signature and meaning (``cblas_{s,d}gemm`` with 64-bit
integers: order, transposes, ``M, N, K, alpha, A, lda, B, ldb, beta, C, ldc``; ``C``'s
values are not used where ``beta`` is zero), so the native code of a program calls it
through the same kind of slot as BLAS's (``executable._bind_gemm``, ``bind``). Where the
packing buffers cannot be allocated, a call computes element by element with the same
arithmetic.

The IR is written as the code should run (explicit vectors, unrolled copies) and compiled
without LLVM's IR passes, which took ~1 s over it for nothing measurable; code generation
takes ~50 ms. It is compiled once per machine and kept in the disk cache, keyed by this
module's and ``llvm_support``'s sources. A process that finds no cache entry binds a quick
build (code generation at O0: ~10 ms, the code ~5x slower, the same bits) and builds the
optimized one after its program's first run, as tiered programs do, then rewrites the
slots bound to the quick one (a cold MLP train step's first result: ~70 ms of compile
instead of ~100 added to ~90).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import weakref
from typing import NamedTuple

import numpy as np

# Block sizes, in elements of op(A)/op(B): KC products summed per pass (a B panel,
# KC x NR, stays in the level-1 cache), MC rows of A per packed block (level 2), NC columns
# of B per packed block.
KC = 256
MC_PANELS = 10
NC = 1024
# (MR, NV): 28 accumulators of the 32 vector registers (AVX-512), 12 of 16 (AVX2, SSE). On
# the Zen 5 VM 14 x 2 beat 12 x 2, 8 x 3 and 6 x 4 by 5-10% on the MLP's products.
WIDE_TILE = (14, 2)
NARROW_TILE = (6, 2)

# The switch: ``EMBER_CPU_GEMM=blas`` keeps every product on BLAS, ``native`` takes this
# routine on any host; unset, it is taken where the host has AVX-512 (``mode``).
GEMM_ENV = "EMBER_CPU_GEMM"

_CBLAS_COL_MAJOR, _CBLAS_TRANS = 102, 112

# The routine's name beside BLAS's (``executable.blas_routine``: ``sgemm_ember``).
ROUTINE_SUFFIX = "_ember"
# The products it takes (``takes``): smaller ones, or ones with fewer rows or columns (an
# MR x NR tile computes zero padding there), stay with BLAS, whose small-matrix kernels
# start faster (on the Zen 5 VM with one thread: (64, 64) @ (64, 64) 11 us here, 7 us
# through NumPy; (128, 10) @ (10, 512) at par; (128, 512) @ (512, 10) 2.5x slower). Larger
# ones took 0.55-0.65 of OpenBLAS's time there, float32 and float64 alike.
MIN_PRODUCTS = 1 << 20
MIN_ROWS = 16
MIN_COLUMNS = 64
# The split entry (``_emit_split``) cuts a product into at most this many tasks a thread,
# each of at least SPLIT_MIN_TASK_PRODUCTS multiply-adds (~3 us): a thread that shares its
# core takes fewer of them.
SPLIT_TASKS_PER_THREAD = 4
SPLIT_MIN_TASK_PRODUCTS = 1 << 18


def symbol(letter: str) -> str:
    return f"ember_gemm_{letter}"


def split_symbol(letter: str) -> str:
    """The entry that runs one product as tasks on the parallel runtime (``_emit_split``)."""
    return f"ember_gemm_{letter}_split"


def tile(dtype: np.dtype) -> tuple[int, int, int]:
    """``(MR, NV, W)``: the micro-kernel's rows, vectors per row and lanes per vector for
    ``dtype`` on this host."""
    from ember.backends.cpu import llvm_support
    wide = llvm_support.host_has_feature("avx512f")
    vector_bytes = 64 if wide else 32 if llvm_support.host_has_feature("avx") else 16
    mr, nv = WIDE_TILE if wide else NARROW_TILE
    return mr, nv, vector_bytes // np.dtype(dtype).itemsize


def gemm_ir(dtype: np.dtype, unpacked: bool = False, quick: bool = False) -> str:
    """The LLVM IR of ``ember_gemm_{s,d}`` and its split entry for ``dtype`` (float32 or
    float64); with ``unpacked``, every call takes the path of a call whose packing buffers
    could not be allocated (for tests: it must give the same bits); with ``quick``, the
    split entry is one call of the plain one, on the calling thread (the quick build's
    code: a third less to compile, ~15 ms of a cold process's first result)."""
    from llvmlite import ir

    dtype = np.dtype(dtype)
    letter = "s" if dtype == np.float32 else "d"
    fty = ir.FloatType() if letter == "s" else ir.DoubleType()
    mr, nv, w = tile(dtype)
    module = ir.Module(name=symbol(letter))
    edge_store = _emit_edge_store(module, fty, nv * w, letter)
    micros = [_emit_micro(module, fty, rows, mr, nv, w, letter, edge_store)
              for rows in (mr // 2, mr)]
    i1, i64, ptr = ir.IntType(1), ir.IntType(64), fty.as_pointer()
    # (the blocks' tiles and the element-by-element product: one function each, which
    # both entries call, so the code is built once)
    tiles = _function(module, f"ember_gemm_{letter}_tiles",
                      [ptr, ptr, ptr, i64, i64, i64, i64, fty, fty, i1],
                      lambda b, args: _tiles(b, micros, mr, nv * w, *args))
    elementwise = _function(module, f"ember_gemm_{letter}_unpacked",
                            [i64, i64, i64, fty, ptr, i64, i64, ptr, i64, i64, fty, ptr, i64],
                            lambda b, args: _emit_unpacked(b, module, fty, *args))
    packs = (_emit_pack(module, fty, letter, mr, w), _emit_pack(module, fty, letter, nv * w, w))
    plain = _emit_entry(module, fty, mr, nv, w, tiles, elementwise, packs, letter, unpacked)
    if quick:
        i8p = ir.IntType(8).as_pointer()
        _function(module, split_symbol(letter), [i8p, i64, *_cblas_type(fty).args],
                  lambda b, args: b.call(plain, args[2:])).linkage = "external"
    else:
        _emit_split(module, fty, mr, nv * w, tiles, elementwise, packs, plain, letter,
                    unpacked)
    return str(module)


# --- helpers -------------------------------------------------------------------------------

def _i64(v: int):
    from llvmlite import ir
    return ir.Constant(ir.IntType(64), v)


def _loop(b, lo, hi, body, name: str = "i", step=None) -> None:
    """``for (i = lo; i < hi; i += step) body(i)`` (``step`` an i64 value or 1)."""
    from llvmlite import ir
    i64 = ir.IntType(64)
    pre = b.block
    head = b.append_basic_block(name + ".head")
    loop = b.append_basic_block(name + ".body")
    done = b.append_basic_block(name + ".done")
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(i64, name)
    i.add_incoming(lo, pre)
    b.cbranch(b.icmp_signed("<", i, hi), loop, done)
    b.position_at_end(loop)
    body(i)
    nxt = b.add(i, step if step is not None else ir.Constant(i64, 1))
    i.add_incoming(nxt, b.block)
    b.branch(head)
    b.position_at_end(done)


def _declare(module, name: str, fnty):
    from ember.backends.cpu.vecmath import _intrinsic  # (vecmath's: one way to declare)
    return _intrinsic(module, name, fnty)


def _min(b, x, y):
    return b.select(b.icmp_signed("<", x, y), x, y)


def _function(module, name: str, arg_types: list, emit):
    """An internal function of ``module`` taking ``arg_types`` (returning nothing), its body
    ``emit(builder, args)``."""
    from llvmlite import ir
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), arg_types), name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    emit(b, fn.args)
    b.ret_void()
    return fn


# --- the micro-kernel ------------------------------------------------------------------------

def _emit_micro(module, fty, mr: int, stride: int, nv: int, w: int, letter: str, edge_store):
    """``void micro(i64 kc, T* ap, T* bp, T* c, i64 ldc, i64 rows, i64 cols, T alpha,
    T scale, i1 read)``: the ``mr x nv*w`` products of the first ``mr`` rows of a packed A
    panel (``kc`` steps of ``stride``) and a packed B panel (``kc`` steps of ``nv*w``),
    then ``rows x cols`` of them written to ``c`` as ``alpha * acc + scale * c`` (``c``'s
    values taken as zeros where not ``read``: BLAS does not read C where beta is zero, which
    may hold NaNs, and ``0 * NaN`` is NaN). A panel's last rows, when at most half of
    ``stride``, take
    the kernel of half the rows (fewer multiply-adds of zero rows; each row's sums are its
    own, so the bits are the same either way)."""
    from llvmlite import ir
    i64, i1 = ir.IntType(64), ir.IntType(1)
    ptr = fty.as_pointer()
    vec = ir.VectorType(fty, w)
    vptr = vec.as_pointer()
    nr = nv * w
    fn = ir.Function(module, ir.FunctionType(
        ir.VoidType(), [i64, ptr, ptr, ptr, i64, i64, i64, fty, fty, i1]),
        f"ember_gemm_{letter}_micro{mr}")
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    for a in fn.args[1:4]:
        a.add_attribute("noalias")
    kc, ap, bp, c, ldc, rows, cols, alpha, scale, read = fn.args
    sfx = f"v{w}f{32 if letter == 's' else 64}"
    fma = _declare(module, f"llvm.fma.{sfx}", ir.FunctionType(vec, [vec, vec, vec]))
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    tile_slot = b.alloca(ir.ArrayType(fty, mr * nr))
    zero = ir.Constant(vec, [0.0] * w)
    head = fn.append_basic_block("k.head")
    body = fn.append_basic_block("k.body")
    done = fn.append_basic_block("k.done")
    b.branch(head)
    b.position_at_end(head)
    k = b.phi(i64, "k")
    k.add_incoming(_i64(0), entry)
    acc = [[b.phi(vec, f"acc{r}_{v}") for v in range(nv)] for r in range(mr)]
    for row in acc:
        for a in row:
            a.add_incoming(zero, entry)
    b.cbranch(b.icmp_signed("<", k, kc), body, done)
    b.position_at_end(body)
    bk = b.gep(bp, [b.mul(k, _i64(nr))], inbounds=True)
    bvec = [b.load(b.bitcast(b.gep(bk, [_i64(v * w)], inbounds=True), vptr), align=4)
            for v in range(nv)]
    ak = b.gep(ap, [b.mul(k, _i64(stride))], inbounds=True)
    undef = ir.Constant(vec, ir.Undefined)
    mask = ir.Constant(ir.VectorType(ir.IntType(32), w), [0] * w)
    for r in range(mr):
        s = b.load(b.gep(ak, [_i64(r)], inbounds=True))
        splat = b.shuffle_vector(b.insert_element(undef, s, ir.Constant(ir.IntType(32), 0)),
                                 undef, mask)
        for v in range(nv):
            new = b.call(fma, [splat, bvec[v], acc[r][v]])
            acc[r][v].add_incoming(new, body)
    k.add_incoming(b.add(k, _i64(1)), body)
    b.branch(head)

    b.position_at_end(done)
    valpha = b.shuffle_vector(b.insert_element(undef, alpha, ir.Constant(ir.IntType(32), 0)),
                              undef, mask)
    vscale = b.shuffle_vector(b.insert_element(undef, scale, ir.Constant(ir.IntType(32), 0)),
                              undef, mask)
    full = b.and_(b.icmp_signed("==", rows, _i64(mr)), b.icmp_signed("==", cols, _i64(nr)))
    with b.if_else(full) as (whole, edge):
        with whole:  # (``_combine``'s arithmetic, a vector at a time)
            for r in range(mr):
                crow = b.gep(c, [b.mul(_i64(r), ldc)], inbounds=True)
                for v in range(nv):
                    p = b.bitcast(b.gep(crow, [_i64(v * w)], inbounds=True), vptr)
                    old = b.select(read, b.load(p, align=4), zero)
                    b.store(b.fadd(b.fmul(valpha, acc[r][v]), b.fmul(vscale, old)), p,
                            align=4)
        with edge:  # (a tile past the matrix's last row or column: through the stack)
            tp = b.bitcast(tile_slot, ptr)
            for r in range(mr):
                for v in range(nv):
                    p = b.bitcast(b.gep(tp, [_i64(r * nr + v * w)], inbounds=True), vptr)
                    b.store(b.fmul(valpha, acc[r][v]), p, align=4)
            b.call(edge_store, [tp, c, ldc, rows, cols, scale, read])
    b.ret_void()
    return fn


def _emit_edge_store(module, fty, nr: int, letter: str):
    """``void edge(T* tile, T* c, i64 ldc, i64 rows, i64 cols, T scale, i1 read)``: the
    first ``rows x cols`` of a row-major tile ``nr`` wide (``alpha * acc``) added to ``c``
    as ``tile + scale * c`` (``c``'s values ignored where not ``read``), one element at a
    time: the full tiles' arithmetic, so an element's bits do not depend on its tile."""
    from llvmlite import ir
    i64, i1 = ir.IntType(64), ir.IntType(1)
    ptr = fty.as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, i64, i64, i64, fty, i1]),
                     f"ember_gemm_{letter}_edge")
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    tile, c, ldc, rows, cols, scale, read = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    def row(r):
        crow = b.gep(c, [b.mul(r, ldc)], inbounds=True)
        trow = b.gep(tile, [b.mul(r, _i64(nr))], inbounds=True)

        def col(j):
            out = b.load(b.gep(trow, [j], inbounds=True))
            p = b.gep(crow, [j], inbounds=True)
            old = b.select(read, b.load(p), ir.Constant(fty, 0.0))
            b.store(b.fadd(out, b.fmul(scale, old)), p)
        _loop(b, _i64(0), cols, col, "j")
    _loop(b, _i64(0), rows, row, "r")
    b.ret_void()
    return fn


# --- packing and the blocked loops ---------------------------------------------------------

class _Operands(NamedTuple):
    """A call's product in row-major terms: ``C[i, j] = alpha * sum_p op(A)[i, p] op(B)[p, j]
    + beta * C[i, j]`` with ``op(A)[i, p] = a[i * sai + p * sak]``, ``op(B)[p, j] = bm[p *
    sbk + j * sbj]`` and ``C[i, j] = c[i * ldc + j]`` (IR values)."""
    m: object
    n: object
    k: object
    alpha: object
    a: object
    sai: object
    sak: object
    bm: object
    sbk: object
    sbj: object
    beta: object
    c: object
    ldc: object


def _row_major(b, args) -> _Operands:
    """The ``_Operands`` of CBLAS arguments ``(order, ta, tb, m, n, k, alpha, a, lda, b,
    ldb, beta, c, ldc)``."""
    from llvmlite import ir
    i32 = ir.IntType(32)
    order, ta, tb, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc = args
    # column-major C = op(A) op(B) is row-major C^T = op(B)^T op(A)^T: swap the operands
    col = b.icmp_signed("==", order, ir.Constant(i32, _CBLAS_COL_MAJOR))
    a, bm = b.select(col, bm, a), b.select(col, a, bm)
    lda, ldb = b.select(col, ldb, lda), b.select(col, lda, ldb)
    ta, tb = b.select(col, tb, ta), b.select(col, ta, tb)
    m, n = b.select(col, n, m), b.select(col, m, n)
    trans_a = b.icmp_signed("==", ta, ir.Constant(i32, _CBLAS_TRANS))
    trans_b = b.icmp_signed("==", tb, ir.Constant(i32, _CBLAS_TRANS))
    one = _i64(1)
    sai, sak = b.select(trans_a, one, lda), b.select(trans_a, lda, one)
    sbk, sbj = b.select(trans_b, one, ldb), b.select(trans_b, ldb, one)
    return _Operands(m, n, k, alpha, a, sai, sak, bm, sbk, sbj, beta, c, ldc)


def _cblas_type(fty):
    from llvmlite import ir
    i32, i64 = ir.IntType(32), ir.IntType(64)
    ptr = fty.as_pointer()
    return ir.FunctionType(ir.VoidType(), [i32, i32, i32, i64, i64, i64, fty, ptr, i64, ptr,
                                           i64, fty, ptr, i64])


def _allocators(module):
    from llvmlite import ir
    i8p = ir.IntType(8).as_pointer()
    malloc = module.globals.get("malloc") or ir.Function(
        module, ir.FunctionType(i8p, [ir.IntType(64)]), "malloc")
    free = module.globals.get("free") or ir.Function(
        module, ir.FunctionType(ir.VoidType(), [i8p]), "free")
    return malloc, free


def _round_up(b, value, unit: int):
    return b.mul(b.sdiv(b.add(value, _i64(unit - 1)), _i64(unit)), _i64(unit))


def _depth_pass(b, fty, ops: _Operands, pc):
    """``(kc, scale, read)`` of the pass over products ``[pc, pc + KC)``: the first pass
    adds ``beta * C`` (``C`` not read where beta is zero), later ones all of ``C``."""
    from llvmlite import ir
    kc = _min(b, _i64(KC), b.sub(ops.k, pc))
    first = b.icmp_signed("==", pc, _i64(0))
    beta_zero = b.fcmp_ordered("==", ops.beta, ir.Constant(fty, 0.0))
    read = b.not_(b.and_(first, beta_zero))
    return kc, b.select(first, ops.beta, ir.Constant(fty, 1.0)), read


def _tiles(b, micros, mr: int, nr: int, ap, bp, c, ldc, rows, cols, kc, alpha, scale,
           read) -> None:
    """``C[:rows, :cols]`` (``c`` its first element) from a packed block of A (panels of
    ``mr`` rows at ``ap + ir * kc``) and one of B (panels of ``nr`` columns at ``bp + jr *
    kc``): the ``mr x nr`` tiles, a B panel's after one another (it stays in the level-1
    cache while A's block streams from level 2)."""
    half, whole = micros

    def panel_col(jr):
        tile_cols = _min(b, _i64(nr), b.sub(cols, jr))
        bpanel = b.gep(bp, [b.mul(jr, kc)], inbounds=True)

        def panel_row(ir_):
            tile_rows = _min(b, _i64(mr), b.sub(rows, ir_))
            apanel = b.gep(ap, [b.mul(ir_, kc)], inbounds=True)
            ctile = b.gep(c, [b.add(b.mul(ir_, ldc), jr)], inbounds=True)
            args = [kc, apanel, bpanel, ctile, ldc, tile_rows, tile_cols, alpha, scale, read]
            with b.if_else(b.icmp_signed("<=", tile_rows, _i64(mr // 2))) as (few, all_):
                with few:
                    b.call(half, args)
                with all_:
                    b.call(whole, args)
        _loop(b, _i64(0), rows, panel_row, "ir", _i64(mr))
    _loop(b, _i64(0), cols, panel_col, "jr", _i64(nr))


def _emit_entry(module, fty, mr: int, nv: int, w: int, tiles, elementwise, packs,
                letter: str, unpacked: bool = False):
    """The CBLAS entry point (see the module docstring); ``tiles``: a function of
    ``_tiles``'s arguments; ``elementwise``: of ``_emit_unpacked``'s; ``packs``: A's and
    B's panel copies (``_emit_pack``)."""
    from llvmlite import ir
    i8 = ir.IntType(8)
    ptr = fty.as_pointer()
    itemsize = 4 if letter == "s" else 8
    fn = ir.Function(module, _cblas_type(fty), symbol(letter))
    malloc, free = _allocators(module)
    nr = nv * w
    pack_a, pack_b = packs
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    zero = ir.Constant(fty, 0.0)
    ops = _row_major(b, fn.args)
    m, n, k, alpha, a, sai, sak, bm, sbk, sbj, beta, c, ldc = ops
    empty = b.or_(b.icmp_signed("<=", m, _i64(0)), b.icmp_signed("<=", n, _i64(0)))
    with b.if_then(empty):
        b.ret_void()
    # K == 0 or alpha == 0: C = beta * C (C not read where beta is zero)
    nothing = b.or_(b.icmp_signed("<=", k, _i64(0)), b.fcmp_ordered("==", alpha, zero))
    with b.if_then(nothing):
        def scale_row(i):
            crow = b.gep(c, [b.mul(i, ldc)], inbounds=True)

            def scale_col(j):
                p = b.gep(crow, [j], inbounds=True)
                with b.if_else(b.fcmp_ordered("==", beta, zero)) as (clear, scale):
                    with clear:
                        b.store(zero, p)
                    with scale:
                        b.store(b.fmul(beta, b.load(p)), p)
            _loop(b, _i64(0), n, scale_col, "sj")
        _loop(b, _i64(0), m, scale_row, "si")
        b.ret_void()
    mc = mr * MC_PANELS
    # (buffers as large as this call's blocks: padded to whole panels)
    depth = _min(b, _i64(KC), k)
    a_rows = _round_up(b, _min(b, _i64(mc), m), mr)
    b_cols = _round_up(b, _min(b, _i64(NC), n), nr)
    ap = b.bitcast(b.call(malloc, [b.mul(b.mul(a_rows, depth), _i64(itemsize))]), ptr)
    bp = b.bitcast(b.call(malloc, [b.mul(b.mul(b_cols, depth), _i64(itemsize))]), ptr)
    no_memory = b.or_(b.icmp_unsigned("==", ap, ir.Constant(ptr, None)),
                      b.icmp_unsigned("==", bp, ir.Constant(ptr, None)))
    if unpacked:
        no_memory = ir.Constant(ir.IntType(1), 1)
    with b.if_then(no_memory):  # (element by element, in the same order: the same bits)
        b.call(free, [b.bitcast(ap, i8.as_pointer())])
        b.call(free, [b.bitcast(bp, i8.as_pointer())])
        b.call(elementwise, [m, n, k, alpha, a, sai, sak, bm, sbk, sbj, beta, c, ldc])
        b.ret_void()

    def column_block(jc):
        nc = _min(b, _i64(NC), b.sub(n, jc))

        def depth_block(pc):
            kc, scale, read = _depth_pass(b, fty, ops, pc)
            _pack_b(b, pack_b, bp, bm, sbk, sbj, pc, jc, kc, nc, nr)

            def row_block(ic):
                rows_left = _min(b, _i64(mc), b.sub(m, ic))
                _pack_a(b, pack_a, ap, a, sai, sak, ic, pc, kc, rows_left, mr)
                b.call(tiles, [ap, bp, b.gep(c, [b.add(b.mul(ic, ldc), jc)]), ldc,
                               rows_left, nc, kc, alpha, scale, read])
            _loop(b, _i64(0), m, row_block, "ic", _i64(mc))
        _loop(b, _i64(0), k, depth_block, "pc", _i64(KC))
    _loop(b, _i64(0), n, column_block, "jc", _i64(NC))
    b.call(free, [b.bitcast(ap, i8.as_pointer())])
    b.call(free, [b.bitcast(bp, i8.as_pointer())])
    b.ret_void()
    return fn


# --- the split entry: one product's tasks on the parallel runtime ---------------------------

def _emit_split(module, fty, mr: int, nr: int, tiles, elementwise, packs, plain,
                letter: str, unpacked: bool = False) -> None:
    """``void ember_gemm_{letter}_split(i8* run, i64 threads, <CBLAS arguments>)``: the
    product of ``plain`` (the CBLAS entry) as tasks on the parallel runtime's ``run``
    (``parallel_runtime``; null: one call of ``plain``), so that a thread slowed down
    (another process's, or a BLAS thread spinning after its call, shares its core) takes
    fewer of them. The operand not split is packed once, by tasks, into a buffer all of
    them read: ``op(A)`` whole when the tasks take column panels of ``C`` (it has no more
    rows than columns), else ``op(B)``; each task packs its own part of the other. Every
    element sums its products as one call of ``plain`` does: the same bits. ``unpacked``:
    the tasks compute element by element (as where their buffers cannot be allocated)."""
    from llvmlite import ir
    i8, i64 = ir.IntType(8), ir.IntType(64)
    i8p = i8.as_pointer()
    ptr = fty.as_pointer()
    itemsize = 4 if letter == "s" else 8
    malloc, free = _allocators(module)
    pack_a, pack_b = packs
    mc = mr * MC_PANELS
    context = ir.LiteralStructType([i64, i64, i64, fty, ptr, i64, i64, ptr, i64, i64, fty,
                                    ptr, i64, ptr])  # (_Operands, then the shared panels)

    def task(name: str, body):
        def emit(b, args):
            table, lo, hi = args
            ctx = b.bitcast(table, context.as_pointer())
            fields = [b.load(b.gep(ctx, [ir.Constant(ir.IntType(32), 0),
                                         ir.Constant(ir.IntType(32), j)]))
                      for j in range(len(context.elements))]
            body(b, _Operands(*fields[:-1]), fields[-1], lo, hi)
        return _function(module, f"ember_gemm_{letter}_{name}", [i8p.as_pointer(), i64, i64],
                         emit)

    def pack_task(unit: int, extent, pack_panels):
        """A task packing panels ``[lo, hi)`` of the shared operand (``unit`` rows of op(A)
        or columns of op(B), of ``extent(ops)``) for every pass over the products."""
        def body(b, ops, shared, lo, hi):
            first = b.mul(lo, _i64(unit))
            count = b.sub(_min(b, b.mul(hi, _i64(unit)), extent(ops)), first)
            padded = _round_up(b, extent(ops), unit)

            def depth_block(pc):
                kc = _min(b, _i64(KC), b.sub(ops.k, pc))
                dst = b.gep(shared, [b.add(b.mul(pc, padded), b.mul(first, kc))],
                            inbounds=True)
                pack_panels(b, ops, dst, first, pc, kc, count)
            _loop(b, _i64(0), ops.k, depth_block, "pc", _i64(KC))
        return body
    pack_a_task = pack_task(mr, lambda ops: ops.m, lambda b, ops, dst, first, pc, kc, count:
                            _pack_a(b, pack_a, dst, ops.a, ops.sai, ops.sak, first, pc, kc,
                                    count, mr))
    pack_b_task = pack_task(nr, lambda ops: ops.n, lambda b, ops, dst, first, pc, kc, count:
                            _pack_b(b, pack_b, dst, ops.bm, ops.sbk, ops.sbj, pc, first, kc,
                                    count, nr))

    def own_buffer(b, ops, elements, row0, rows, col0, cols):
        """A task's packing buffer of ``elements`` (of ``KC``); where it cannot be
        allocated (or ``unpacked``), the task computes its block of C, ``rows x cols`` from
        ``(row0, col0)``, element by element and returns."""
        depth = _min(b, _i64(KC), ops.k)
        buf = b.bitcast(b.call(malloc, [b.mul(b.mul(elements, depth), _i64(itemsize))]), ptr)
        missing = b.icmp_unsigned("==", buf, ir.Constant(ptr, None))
        if unpacked:
            missing = ir.Constant(ir.IntType(1), 1)
        with b.if_then(missing):
            b.call(free, [b.bitcast(buf, i8p)])
            b.call(elementwise, [
                rows, cols, ops.k, ops.alpha, b.gep(ops.a, [b.mul(row0, ops.sai)]), ops.sai,
                ops.sak, b.gep(ops.bm, [b.mul(col0, ops.sbj)]), ops.sbk, ops.sbj, ops.beta,
                b.gep(ops.c, [b.add(b.mul(row0, ops.ldc), col0)]), ops.ldc])
            b.ret_void()
        return buf

    def column_task(b, ops, shared, lo, hi):  # columns of C; op(A) packed in ``shared``
        first = b.mul(lo, _i64(nr))
        end = _min(b, b.mul(hi, _i64(nr)), ops.n)
        height = _round_up(b, ops.m, mr)
        cols = b.sub(end, first)
        bp = own_buffer(b, ops, _round_up(b, _min(b, _i64(NC), cols), nr), _i64(0), ops.m,
                        first, cols)

        def column_block(jc):
            nc = _min(b, _i64(NC), b.sub(end, jc))

            def depth_block(pc):
                kc, scale, read = _depth_pass(b, fty, ops, pc)
                _pack_b(b, pack_b, bp, ops.bm, ops.sbk, ops.sbj, pc, jc, kc, nc, nr)

                def row_block(ic):
                    rows = _min(b, _i64(mc), b.sub(ops.m, ic))
                    ap = b.gep(shared, [b.add(b.mul(pc, height), b.mul(ic, kc))], inbounds=True)
                    c = b.gep(ops.c, [b.add(b.mul(ic, ops.ldc), jc)], inbounds=True)
                    b.call(tiles, [ap, bp, c, ops.ldc, rows, nc, kc, ops.alpha, scale, read])
                _loop(b, _i64(0), ops.m, row_block, "ic", _i64(mc))
            _loop(b, _i64(0), ops.k, depth_block, "pc", _i64(KC))
        _loop(b, first, end, column_block, "jc", _i64(NC))
        b.call(free, [b.bitcast(bp, i8p)])

    def row_task(b, ops, shared, lo, hi):  # rows of C; op(B) packed in ``shared``
        first = b.mul(lo, _i64(mr))
        end = _min(b, b.mul(hi, _i64(mr)), ops.m)
        width = _round_up(b, ops.n, nr)
        rows = b.sub(end, first)
        ap = own_buffer(b, ops, _round_up(b, _min(b, _i64(mc), rows), mr), first, rows,
                        _i64(0), ops.n)

        def column_block(jc):
            nc = _min(b, _i64(NC), b.sub(ops.n, jc))

            def depth_block(pc):
                kc, scale, read = _depth_pass(b, fty, ops, pc)
                bp = b.gep(shared, [b.add(b.mul(pc, width), b.mul(jc, kc))], inbounds=True)

                def row_block(ic):
                    rows = _min(b, _i64(mc), b.sub(end, ic))
                    _pack_a(b, pack_a, ap, ops.a, ops.sai, ops.sak, ic, pc, kc, rows, mr)
                    c = b.gep(ops.c, [b.add(b.mul(ic, ops.ldc), jc)], inbounds=True)
                    b.call(tiles, [ap, bp, c, ops.ldc, rows, nc, kc, ops.alpha, scale, read])
                _loop(b, first, end, row_block, "ic", _i64(mc))
            _loop(b, _i64(0), ops.k, depth_block, "pc", _i64(KC))
        _loop(b, _i64(0), ops.n, column_block, "jc", _i64(NC))
        b.call(free, [b.bitcast(ap, i8p)])

    kernels = {name: task(name, body)
               for name, body in (("pack_a", pack_a_task), ("pack_b", pack_b_task),
                                  ("columns", column_task), ("rows", row_task))}
    run_type = ir.FunctionType(ir.VoidType(), [i8p, i8p.as_pointer().as_pointer(), i64, i64,
                                               i64])
    cblas = _cblas_type(fty)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p, i64, *cblas.args]),
                     split_symbol(letter))
    run, threads, *args = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ops = _row_major(b, args)
    by_rows = b.icmp_signed(">", ops.m, ops.n)
    units = b.select(by_rows, b.sdiv(_round_up(b, ops.m, mr), _i64(mr)),
                     b.sdiv(_round_up(b, ops.n, nr), _i64(nr)))
    most = b.mul(threads, _i64(SPLIT_TASKS_PER_THREAD))
    work = b.sdiv(b.mul(b.mul(ops.m, ops.n), ops.k), _i64(SPLIT_MIN_TASK_PRODUCTS))
    tasks = _min(b, _min(b, units, most), work)
    direct = b.or_(b.icmp_unsigned("==", run, ir.Constant(i8p, None)),
                   b.icmp_signed("<", tasks, _i64(2)))
    direct = b.or_(direct, b.fcmp_ordered("==", ops.alpha, ir.Constant(fty, 0.0)))
    with b.if_then(direct):
        b.call(plain, args)
        b.ret_void()
    height, width = _round_up(b, ops.m, mr), _round_up(b, ops.n, nr)
    elements = b.mul(b.select(by_rows, width, height), ops.k)
    shared = b.bitcast(b.call(malloc, [b.mul(elements, _i64(itemsize))]), ptr)
    with b.if_then(b.icmp_unsigned("==", shared, ir.Constant(ptr, None))):
        b.call(plain, args)
        b.ret_void()
    ctx = b.alloca(context)
    for j, value in enumerate((*ops, shared)):
        b.store(value, b.gep(ctx, [ir.Constant(ir.IntType(32), 0),
                                   ir.Constant(ir.IntType(32), j)]))
    table = b.alloca(i8p.as_pointer())
    b.store(b.bitcast(ctx, i8p.as_pointer()), table)
    run = b.bitcast(run, run_type.as_pointer())

    def kernel(name):
        return b.bitcast(kernels[name], i8p)
    pack_units = b.select(by_rows, b.sdiv(width, _i64(nr)), b.sdiv(height, _i64(mr)))
    b.call(run, [b.select(by_rows, kernel("pack_b"), kernel("pack_a")), table, _i64(0),
                 pack_units, _min(b, pack_units, most)])
    b.call(run, [b.select(by_rows, kernel("rows"), kernel("columns")), table, _i64(0), units,
                 tasks])
    b.call(free, [b.bitcast(shared, i8p)])
    b.ret_void()


def _emit_unpacked(b, module, fty, m, n, k, alpha, a, sai, sak, bm, sbk, sbj, beta, c,
                   ldc) -> None:
    """The product one element at a time, with the micro-kernel's arithmetic (``KC``
    products at a time from zero by fused multiply-adds, then ``alpha * acc + scale * c``),
    for a call whose packing buffers could not be allocated."""
    from llvmlite import ir
    fma = _declare(module, f"llvm.fma.{fty.intrinsic_name}", ir.FunctionType(
        fty, [fty, fty, fty]))
    zero, one = ir.Constant(fty, 0.0), ir.Constant(fty, 1.0)
    acc_slot = b.alloca(fty)
    beta_zero = b.fcmp_ordered("==", beta, zero)

    def element(i, j):
        p_c = b.gep(c, [b.add(b.mul(i, ldc), j)], inbounds=True)

        def depth_block(pc):
            kc = _min(b, _i64(KC), b.sub(k, pc))
            b.store(zero, acc_slot)

            def step(p):
                x = b.load(b.gep(a, [b.add(b.mul(i, sai), b.mul(b.add(pc, p), sak))],
                                 inbounds=True))
                y = b.load(b.gep(bm, [b.add(b.mul(b.add(pc, p), sbk), b.mul(j, sbj))],
                                 inbounds=True))
                b.store(b.call(fma, [x, y, b.load(acc_slot)]), acc_slot)
            _loop(b, _i64(0), kc, step, "up")
            first = b.icmp_signed("==", pc, _i64(0))
            read = b.not_(b.and_(first, beta_zero))
            old = b.select(read, b.load(p_c), zero)
            scale = b.select(first, beta, one)
            b.store(b.fadd(b.fmul(alpha, b.load(acc_slot)), b.fmul(scale, old)), p_c)
        _loop(b, _i64(0), k, depth_block, "upc", _i64(KC))
    _loop(b, _i64(0), m, lambda i: _loop(b, _i64(0), n, lambda j: element(i, j), "uj"),
          "ui")


def _pack_b(b, pack, bp, bm, sbk, sbj, pc, jc, kc, nc, nr: int) -> None:
    """``op(B)[pc:pc+kc, jc:jc+nc]`` into ``bp``: panels of ``nr`` columns, each ``kc`` rows
    of ``nr`` (columns past ``nc`` zero)."""
    def panel(jr):
        cols = _min(b, _i64(nr), b.sub(nc, jr))
        b.call(pack, [b.gep(bp, [b.mul(jr, kc)], inbounds=True),
                      b.gep(bm, [b.add(b.mul(pc, sbk), b.mul(b.add(jc, jr), sbj))],
                            inbounds=True), sbk, sbj, kc, cols])
    _loop(b, _i64(0), nc, panel, "bj", _i64(nr))


def _pack_a(b, pack, ap, a, sai, sak, ic, pc, kc, rows_left, mr: int) -> None:
    """``op(A)[ic:ic+rows_left, pc:pc+kc]`` into ``ap``: panels of ``mr`` rows, each ``kc``
    steps of ``mr`` (rows past ``rows_left`` zero)."""
    def panel(ir_):
        rows = _min(b, _i64(mr), b.sub(rows_left, ir_))
        b.call(pack, [b.gep(ap, [b.mul(ir_, kc)], inbounds=True),
                      b.gep(a, [b.add(b.mul(b.add(ic, ir_), sai), b.mul(pc, sak))],
                            inbounds=True), sak, sai, kc, rows])
    _loop(b, _i64(0), rows_left, panel, "ai", _i64(mr))


def _emit_pack(module, fty, letter: str, width: int, w: int):
    """``void pack(T* dst, T* src, i64 step_stride, i64 lane_stride, i64 kc, i64 lanes)``:
    ``dst[p * width + j] = src[p * step_stride + j * lane_stride]`` for ``p < kc``,
    ``j < lanes``, and zero for ``lanes <= j < width``: one packed panel of A (``width``
    MR) or B (NR). A full panel copies a step at a time: ``w``-lane vectors where its lanes
    are contiguous, else ``width`` loads (the code is built without LLVM's IR passes, so
    what should be vectors is written as vectors)."""
    from llvmlite import ir
    i64, i1, i32 = ir.IntType(64), ir.IntType(1), ir.IntType(32)
    ptr = fty.as_pointer()
    vec = ir.VectorType(fty, w)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr] + [i64] * 4),
                     f"ember_gemm_{letter}_pack{width}")
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    for a in fn.args[:2]:
        a.add_attribute("noalias")
    dst, src, step_stride, lane_stride, kc, lanes = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    zero = ir.Constant(fty, 0.0)
    full = b.icmp_signed("==", lanes, _i64(width))
    lanes_in_order = b.icmp_signed("==", lane_stride, _i64(1))
    steps_in_order = b.icmp_signed("==", step_stride, _i64(1))
    sfx = f"v{w}f{32 if letter == 's' else 64}"
    rest = width % w  # (a masked vector for the last lanes of a step)
    if rest:
        mask_type = ir.VectorType(i1, w)
        mask = ir.Constant(mask_type, [1] * rest + [0] * (w - rest))
        masked_load = _declare(module, f"llvm.masked.load.{sfx}.p0{sfx}", ir.FunctionType(
            vec, [vec.as_pointer(), i32, mask_type, vec]))
        masked_store = _declare(module, f"llvm.masked.store.{sfx}.p0{sfx}", ir.FunctionType(
            ir.VoidType(), [vec, vec.as_pointer(), i32, mask_type]))

    def at(base, index):
        return b.gep(base, [index], inbounds=True)

    def rows_copy(p):
        s_row, d_row = at(src, b.mul(p, step_stride)), at(dst, b.mul(p, _i64(width)))
        for v in range(width // w):
            value = b.load(b.bitcast(at(s_row, _i64(v * w)), vec.as_pointer()), align=4)
            b.store(value, b.bitcast(at(d_row, _i64(v * w)), vec.as_pointer()), align=4)
        if rest:
            v = width // w * w
            value = b.call(masked_load, [b.bitcast(at(s_row, _i64(v)), vec.as_pointer()),
                                         ir.Constant(i32, 4), mask, ir.Constant(vec, None)])
            b.call(masked_store, [value, b.bitcast(at(d_row, _i64(v)), vec.as_pointer()),
                                  ir.Constant(i32, 4), mask])

    def columns_copy(p):
        s_row, d_row = at(src, p), at(dst, b.mul(p, _i64(width)))
        for j in range(width):  # (unrolled: ~10% faster packing than a loop)
            if j:
                s_row = at(s_row, lane_stride)
            b.store(b.load(s_row), at(d_row, _i64(j)))

    def general(p):
        def lane(j):
            inside = b.icmp_signed("<", j, lanes)
            jj = b.select(inside, j, _i64(0))
            value = b.load(at(src, b.add(b.mul(p, step_stride), b.mul(jj, lane_stride))))
            b.store(b.select(inside, value, zero), at(dst, b.add(b.mul(p, _i64(width)), j)))
        _loop(b, _i64(0), _i64(width), lane, "gj")
    with b.if_else(b.and_(full, lanes_in_order)) as (contiguous, other):
        with contiguous:
            _loop(b, _i64(0), kc, rows_copy, "pp")
        with other:
            with b.if_else(b.and_(full, steps_in_order)) as (strided, partial):
                with strided:
                    _loop(b, _i64(0), kc, columns_copy, "qp")
                with partial:
                    _loop(b, _i64(0), kc, general, "gp")
    b.ret_void()
    return fn


# --- loading and the switch ----------------------------------------------------------------

_log = logging.getLogger(__name__)
_lock = threading.Lock()
# letter -> the addresses of the entries (``symbol``, ``split_symbol``) programs bind now
# ((0, 0): none)
_routines: dict[str, tuple[int, int]] = {}
_quick: set[str] = set()  # letters whose routine is the quick build (``address``)
# letter -> (weak library, slot, split) bound to the quick build
_bound: dict[str, list] = {}
_pending: list = []  # (``take_pending``)
_libraries: list = []  # (keeps the code loaded)


def address(letter: str, split: bool = False) -> int:
    """The address of ``ember_gemm_{letter}`` (``split``: of its split entry,
    ``split_symbol``) as programs should bind it now (0 where it cannot be made): the
    optimized build from the disk cache, else a quick build made now and the optimized one
    left to ``take_pending``'s caller (``bind``)."""
    found = _routines.get(letter)
    if found is None:
        with _lock:
            if letter not in _routines:
                try:
                    _routines[letter] = _load(letter) or (0, 0)
                except Exception as e:  # noqa: BLE001 - the products stay with BLAS
                    _log.debug("no native gemm %s: %s", letter, e)
                    _routines[letter] = (0, 0)
            found = _routines[letter]
    return found[split]


def bind(letter: str, slot: int, lib, split: bool = False) -> bool:
    """Stores the address of the routine (``split``: its split entry) into the pointer at
    ``slot`` (a global of ``lib``'s code, ``executable._bind_gemm``); False where there is
    no routine. A slot bound to the quick build is rewritten with the optimized one's
    address once that is built: the same bits, so a program in the middle of its calls
    only gets faster."""
    from ember.backends.cpu.executable import _ffi
    if not address(letter, split):
        return False
    with _lock:
        _ffi.cast("void**", slot)[0] = _ffi.cast("void*", _routines[letter][split])
        if letter in _quick:
            _bound.setdefault(letter, []).append((weakref.ref(lib), slot, split))
    return True


def load_if_cached() -> None:
    """Loads the routines now if products will take them (``mode``) and the disk cache
    has them, leaving a missing one to its first use: ``import ember`` calls this
    (``backends.cpu.preload``)."""
    if mode() != "native":
        return
    with _lock:
        for letter in ("s", "d"):
            if letter in _routines:
                continue
            try:
                found = _load(letter, build=False)
            except Exception:  # noqa: BLE001 - the first use builds it (or logs why not)
                found = None
            if found:
                _routines[letter] = found


def _entries(lib, letter: str) -> tuple[int, int]:
    return lib.address(symbol(letter)), lib.address(split_symbol(letter))


def compiled(letter: str, opt_level: int, unpacked: bool = False, quick: bool = False):
    """``ember_gemm_{letter}`` compiled now at ``opt_level`` (code generation only) and
    loaded through MCJIT: ``(library, address)`` (``unpacked``, ``quick``: as
    ``gemm_ir``'s)."""
    from ember.backends.cpu import llvm_support
    text = gemm_ir(np.float32 if letter == "s" else np.float64, unpacked, quick)
    lib = llvm_support.LoadedObject(
        llvm_support.compile_ir(text, opt_level=opt_level, ir_passes=False).object_code)
    return lib, lib.address(symbol(letter))


def _load(letter: str, build: bool = True) -> tuple[int, int] | None:
    """(Under ``_lock``.) The optimized routine's entries (``_entries``) from the disk
    cache; else, with ``build``, a quick build's (code generation at O0: ~10 ms instead of
    ~50, the code ~5x slower, the same bits), leaving the optimized build, which goes into
    the disk cache and then replaces it (``bind``), to ``take_pending``'s caller."""
    from ember.backends.cpu import _shared_libraries_enabled, native_lib
    name = f"ember-gemm:{symbol(letter)}:{_code_stamp()}"
    shared = _shared_libraries_enabled()
    dtype = np.float32 if letter == "s" else np.float64
    lib = native_lib.load_or_build(name, lambda: gemm_ir(dtype), 3, shared, build=False,
                                   ir_passes=False)
    if lib is not None:
        _libraries.append(lib)
        return _entries(lib, letter)
    if not build:
        return None
    lib, _ = compiled(letter, 0, quick=True)
    _libraries.append(lib)
    _quick.add(letter)
    _pending.append(lambda: _build_optimized(letter, name, shared))
    return _entries(lib, letter)


def _build_optimized(letter: str, name: str, shared: bool) -> None:
    """Compiles the optimized routine into the disk cache, loads it, and rebinds every
    slot bound to the quick build (``_load``'s background work)."""
    from ember.backends.cpu import native_lib
    from ember.backends.cpu.executable import _ffi
    dtype = np.float32 if letter == "s" else np.float64
    try:
        lib = native_lib.load_or_build(name, lambda: gemm_ir(dtype), 3, shared,
                                       ir_passes=False)
        found = _entries(lib, letter)
    except Exception as e:  # noqa: BLE001 - the quick build keeps working
        _log.debug("no optimized native gemm %s: %s", letter, e)
        return
    with _lock:
        _libraries.append(lib)
        _routines[letter] = found
        _quick.discard(letter)
        for ref, slot, split in _bound.pop(letter, []):
            owner = ref()
            if owner is not None:  # (its code is still loaded: the slot is there)
                _ffi.cast("void**", slot)[0] = _ffi.cast("void*", found[split])


@functools.cache
def _code_stamp() -> str:
    """A digest of the sources the routine's code depends on (this module's generator and
    ``llvm_support``'s compile settings): its cache entry survives edits elsewhere in the
    backend, which would otherwise rebuild it in the next process."""
    import hashlib

    from ember.backends.cpu import llvm_support
    digest = hashlib.sha256()
    for path in (__file__, llvm_support.__file__):
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:24]


def take_pending() -> list:
    """The background work ``_load`` left (the optimized build), handed over once: the
    backend starts it with a program's other background work, after the program's first
    run (started at once, its compile held LLVM's lock while the program's own code was
    being loaded: a cold MLP step's first result 160 -> 230 ms)."""
    with _lock:
        work, _pending[:] = list(_pending), []
    return work


def takes(gemm: tuple) -> bool:
    """Whether the products of a ``gemm`` layout (``program.gemm_layout``: float32 or
    float64) run here rather than in BLAS: those of at least ``MIN_ROWS`` rows,
    ``MIN_COLUMNS`` columns and ``MIN_PRODUCTS`` multiply-adds each, where ``mode()`` is
    ``native``."""
    _, _, _, m, n, k = gemm[:6]
    return (m >= MIN_ROWS and n >= MIN_COLUMNS and m * n * k >= MIN_PRODUCTS
            and mode() == "native")


def mode() -> str:
    """``native`` or ``blas``: what ``EMBER_CPU_GEMM`` asks for, else ``native`` where the
    host has AVX-512 (``/proc/cpuinfo``'s ``avx512f``: read without LLVM, so that a process
    loading its programs from the disk cache never imports llvmlite)."""
    asked = os.environ.get(GEMM_ENV, "").strip().lower()
    if asked in ("native", "blas"):
        return asked
    return "native" if _host_has_avx512() else "blas"


@functools.cache
def _host_has_avx512() -> bool:
    from ember.backends.cpu import native_lib
    for field in native_lib.host_fingerprint().split(";"):
        name, _, value = field.partition("=")
        if name == "flags":
            return "avx512f" in value.split()
    return False
