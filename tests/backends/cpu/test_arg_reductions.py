"""argmax/argmin reductions: the reducer bodies are recognized by their truth table
(``ember.compiler.arg_reducer``) and compiled to two vectorizable passes per row (one
unrolled pass over rows of up to ``ARG_TINY_ROW_MAX`` elements, one vector per contiguous
row of up to ``ARG_VECTOR_ROW_MAX``); results
(the index and the value output) must equal the evaluator's, NaNs, infinities, ties and
signed zeros included. Also: a variadic reduce is combined once per element, whatever the
number of its outputs."""

import contextlib
import math
import zlib

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends import get_backend
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu import kernel_gen
from ember.backends.cpu.executable import KernelPlan, LibraryPlan
from ember.backends.cpu.program import KernelStep, ProgramBuilder
from ember.compiler.arg_reducer import arg_reducer_kind
from ember.compiler.evaluator import evaluate_computation
from ember.compiler.hlo import Builder, Module, Shape
from ember.compiler.lower import lower_closed_jaxpr
from ember.compiler.passes.fusion import fuse_module
from ember.compiler.pipeline import optimize
from tests.backends.cpu.helpers import optimized, x64

DTYPES = [np.float32, np.float16, jnp.bfloat16, np.int32, np.uint8, np.int8]  # (float64: x64)
BODY_DTYPES = DTYPES + [np.bool_]


def lowered_body(f, x):
    module = lower_closed_jaxpr(ember.make_jaxpr(f)(x)).module
    return next(i.calls[0] for c in module.computations for i in c.instructions
                if i.opcode == "reduce" and len(i.operands) == 4)


@pytest.mark.parametrize("dtype", BODY_DTYPES)
def test_lowered_argmax_and_argmin_bodies_are_recognized(dtype):
    x = np.zeros((2, 3), dtype)
    assert arg_reducer_kind(lowered_body(lambda a: jnp.argmax(a, axis=1), x)) == "max"
    assert arg_reducer_kind(lowered_body(lambda a: jnp.argmin(a, axis=0), x)) == "min"


def body(build, vdt=np.float32, idt=np.int32):
    """A hand-written reducer body: ``build(b, av, ai, bv, bi)`` returns the picked pair."""
    m = Module("m")
    b = Builder(m, "body")
    av, ai = b.parameter(0, Shape(vdt, ())), b.parameter(1, Shape(idt, ()))
    bv, bi = b.parameter(2, Shape(vdt, ())), b.parameter(3, Shape(idt, ()))
    v, i = build(b, av, ai, bv, bi)
    return b.build(b.op("tuple", v, i))


def cmp(b, x, y, direction):
    return b.op("compare", x, y, comparison_direction=direction)


def pick(b, take_a, av, ai, bv, bi):
    return b.op("select", take_a, av, bv), b.op("select", take_a, ai, bi)


def nan_aware(b, av, ai, bv, bi, direction="GT", tie="LT"):
    better = b.op("or", cmp(b, av, bv, direction),
                  b.op("and", cmp(b, av, av, "NE"), b.op("not", cmp(b, bv, bv, "NE"))))
    same = b.op("or", cmp(b, av, bv, "EQ"), b.op("and", cmp(b, av, av, "NE"),
                                                   cmp(b, bv, bv, "NE")))
    return b.op("or", better, b.op("and", same, cmp(b, ai, bi, tie)))


def test_a_hand_written_argmax_in_another_form_is_recognized():
    def build(b, av, ai, bv, bi):  # b wins instead of a, with the comparisons turned round
        b_better = b.op("or", cmp(b, bv, av, "GT"), b.op("and", cmp(b, bv, bv, "NE"),
                                                          cmp(b, av, av, "EQ")))
        tie = b.op("and", b.op("or", cmp(b, av, bv, "EQ"), b.op(
            "and", cmp(b, av, av, "NE"), cmp(b, bv, bv, "NE"))), cmp(b, bi, ai, "LT"))
        return pick(b, b.op("or", b_better, tie), bv, bi, av, ai)
    assert arg_reducer_kind(body(build)) == "max"


NOT_ARG = {
    "ties go to the larger index": lambda b, av, ai, bv, bi: pick(
        b, nan_aware(b, av, ai, bv, bi, tie="GT"), av, ai, bv, bi),
    "NaN not the best": lambda b, av, ai, bv, bi: pick(
        b, b.op("or", cmp(b, av, bv, "GT"), b.op("and", cmp(b, av, bv, "EQ"),
                                                  cmp(b, ai, bi, "LT"))), av, ai, bv, bi),
    "value and index from different pairs": lambda b, av, ai, bv, bi: (
        b.op("select", nan_aware(b, av, ai, bv, bi), av, bv),
        b.op("select", nan_aware(b, av, ai, bv, bi), bi, ai)),
    "arithmetic in the body": lambda b, av, ai, bv, bi: (
        b.op("add", av, bv), b.op("select", nan_aware(b, av, ai, bv, bi), ai, bi)),
    "index compared with a constant": lambda b, av, ai, bv, bi: pick(
        b, cmp(b, ai, b.constant(np.int32(0)), "LT"), av, ai, bv, bi),
}


@pytest.mark.parametrize("name", sorted(NOT_ARG))
def test_other_bodies_are_not_arg_reducers(name):
    assert arg_reducer_kind(body(NOT_ARG[name])) is None


def special_values(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        pool = np.array([info.min, info.max, 0, 1, 2, 3], np.int64)
        return rng.choice(pool, shape).astype(dtype)
    pool = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -1.5, 2.0],
                    np.float64)
    x = rng.choice(pool, shape).astype(dtype)
    mask = rng.random(shape) < 0.5
    x[mask] = rng.normal(size=shape).astype(dtype)[mask]
    return x


def arg_module(kind, x, axis):
    """reduce((x, iota), (identity, 0)) with the lowered argmax/argmin body."""
    f = jnp.argmax if kind == "max" else jnp.argmin
    reducer = lowered_body(f, np.zeros(2, x.dtype))  # (the body depends on the dtype only)
    m = Module("m")
    m.add_computation(reducer)
    b = Builder(m, "main")
    p = b.parameter(0, Shape(x.dtype, x.shape))
    index = np.dtype(jnp.argmax(np.zeros(2, x.dtype)).dtype)  # (int64 under x64, as in JAX)
    iota = b.op("iota", shape=Shape(index, x.shape), iota_dimension=axis)
    dt = x.dtype
    if kernel_gen.S.is_float(dt):  # (bfloat16 is kind "V")
        init = -np.inf if kind == "max" else np.inf
    else:
        init = np.iinfo(dt).min if kind == "max" else np.iinfo(dt).max
    r = b.op("reduce", p, iota, b.constant(np.asarray(init, dt)), b.constant(index.type(0)),
             dimensions=(axis,), calls=[reducer])
    b.build(r, entry=True)
    return m


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("shape,axis", [((6, 33), 1), ((1, 7), 1), ((40,), 0), ((3, 1), 1),
                                        ((2, 3, 20), 2), ((5, 0), 1),
                                        # rows of up to 8: one unrolled pass, vectorized
                                        # across rows (and one row past it)
                                        ((300, 2), 1), ((200, 5), 1), ((130, 8), 1),
                                        ((7, 19, 3), 2),
                                        # contiguous rows of 9 to 64: one vector a row
                                        ((90, 9), 1), ((70, 16), 1), ((33, 5, 24), 2),
                                        ((20, 64), 1),
                                        # longer: two passes
                                        ((20, 65), 1)])
def test_native_arg_reductions_match_the_evaluator_bit_for_bit(dtype, kind, shape, axis):
    rng = np.random.default_rng(zlib.crc32(repr((np.dtype(dtype).name, kind, shape)).encode()))
    x = special_values(rng, shape, dtype)
    check_native_arg_reduction(kind, x, axis)


def check_native_arg_reduction(kind, x, axis):
    m = arg_module(kind, x, axis)
    want = evaluate_computation(m.entry, [x])
    optimize(m)  # (fused with its iota: the native arg reduction, not a library call)
    exe = get_backend("cpu").compile(m)
    assert not any(isinstance(s, LibraryPlan) for s in exe.program.steps)
    got = exe.execute([x])
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(np.ascontiguousarray(g).view(np.uint8),
                                      np.ascontiguousarray(w).view(np.uint8))


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("n", [12, 32, 64])
def test_float64_rows_in_one_vector(kind, n):
    rng = np.random.default_rng(n)
    with x64():
        check_native_arg_reduction(kind, special_values(rng, (40, n), np.float64), 1)


def planted_rows(n):
    """Rows of ``n`` that single out the first extreme: ties, the extreme last, NaNs among
    numbers (first one wins), signed zeros (equal), all of one value, infinities only."""
    rows = np.tile(np.linspace(-1, 1, n), (9, 1))
    rows[0, [2, n - 1]] = 5.0
    rows[1, -1] = 7.0
    rows[2, [n // 2, n - 2]] = [np.nan, -np.nan]
    rows[3] = np.where(np.arange(n) % 2, 0.0, -0.0)
    rows[4] = 3.0
    rows[5] = np.where(np.arange(n) % 3, -np.inf, np.inf)
    rows[6, [1, 3]] = -9.0
    rows[7, 0] = np.nan
    rows[8] = -np.inf
    return rows


@pytest.mark.parametrize("n", [9, 13, 16, 31, 64, 65])
def test_vector_rows_find_the_first_extreme_as_numpy(n, monkeypatch):
    rows = planted_rows(n).astype(np.float32)
    built = []
    original = kernel_gen.KernelBuilder._arg_vector_row

    def spy(self, *args):
        built.append(args[3])
        return original(self, *args)
    monkeypatch.setattr(kernel_gen.KernelBuilder, "_arg_vector_row", spy)
    f = ember.jit(lambda a: (jnp.argmax(a, axis=1), jnp.argmin(a, axis=1),
                             jnp.argmax(a * 2 - 1, axis=1)), backend="cpu")
    amax, amin, fused = f(rows)
    assert built == ([n] * 3 if n <= kernel_gen.ARG_VECTOR_ROW_MAX else [])

    def numpy_arg(x, pick):  # (NumPy: the first NaN wins)
        nan = np.isnan(x)
        return np.where(nan.any(1), nan.argmax(1), pick(x, 1))
    np.testing.assert_array_equal(np.asarray(amax), numpy_arg(rows, np.argmax))
    np.testing.assert_array_equal(np.asarray(amin), numpy_arg(rows, np.argmin))
    np.testing.assert_array_equal(np.asarray(fused), numpy_arg(rows * 2 - 1, np.argmax))


def row_hash(a):
    """A costly integer function of each element (a few dozen ops, as a random number
    generator's hash), exact in NumPy and in ember."""
    for k in range(4):
        a = a * np.uint32(2654435761) + np.uint32(k)
        a = a ^ (a >> np.uint32(13))
    return a


def staged_rows(monkeypatch):
    """Spies on ``KernelBuilder._row_loader``: the list it fills with whether each row was
    computed into a row on the stack."""
    staged = []
    original = kernel_gen.KernelBuilder._row_loader

    def spy(self, *args):
        load = original(self, *args)
        staged.append(any(i.name.startswith("arg_row")
                          for i in self.loops.entry_block.instructions))
        return load
    monkeypatch.setattr(kernel_gen.KernelBuilder, "_row_loader", spy)
    return staged


@pytest.mark.parametrize("n", [9, 40, 64])
def test_costly_row_values_are_computed_once_into_a_stack_row(n, monkeypatch):
    x = np.random.default_rng(n).integers(0, 2**32, (50, n), dtype=np.uint32)
    x[3] = x[3, 0]  # (a row of one value: the first position wins)
    staged = staged_rows(monkeypatch)
    amax = ember.jit(lambda a: jnp.argmax(row_hash(a), axis=1), backend="cpu")(x)
    amin = ember.jit(lambda a: jnp.argmin(row_hash(a), axis=1), backend="cpu")(x)
    cheap = ember.jit(lambda a: jnp.argmax(a + 1, axis=1), backend="cpu")(x)
    assert staged == [True, True, False]
    h = row_hash(x)
    np.testing.assert_array_equal(np.asarray(amax), np.argmax(h, axis=1))
    np.testing.assert_array_equal(np.asarray(amin), np.argmin(h, axis=1))
    np.testing.assert_array_equal(np.asarray(cheap), np.argmax(x + 1, axis=1))


def test_staged_and_unrolled_float_rows_agree_bit_for_bit(monkeypatch):
    rows = planted_rows(40).astype(np.float32)

    def f(a, pick):
        return pick(jnp.exp(jnp.sin(a) * 3.0) + jnp.tanh(a) * jnp.log1p(jnp.abs(a)), axis=1)
    staged = staged_rows(monkeypatch)
    got = [ember.jit(f, static_argnums=1, backend="cpu")(rows, pick)
           for pick in (jnp.argmax, jnp.argmin)]
    monkeypatch.setattr(kernel_gen, "ARG_UNROLL_MAX_COST", 10**9)
    unrolled = [ember.jit(lambda a, pick: f(a + 0.0, pick), static_argnums=1,  # (new programs)
                          backend="cpu")(rows, pick) for pick in (jnp.argmax, jnp.argmin)]
    assert staged == [True, True, False, False]
    for g, u in zip(got, unrolled):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(u))
    assert int(got[0][2]) == 20  # (the row's first NaN)


def test_jitted_argmax_and_argmin_match_numpy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 257)).astype(np.float32)
    x[3, 5] = np.nan
    x[7, :] = -np.inf
    x[8, [4, 9]] = 10.0
    f = ember.jit(lambda a: (jnp.argmax(a, axis=1), jnp.argmin(a, axis=1), jnp.argmax(a)))
    amax, amin, flat = f(x)
    np.testing.assert_array_equal(np.asarray(amax), np.argmax(x, axis=1))
    np.testing.assert_array_equal(np.asarray(amin), np.argmin(x, axis=1))
    assert int(flat) == np.argmax(x)


def test_a_variadic_reduce_combines_each_element_once():
    # Two sums as one variadic reduce: a second combine per element (once per output, as
    # before) would double both.
    m = Module("m")
    rb = Builder(m, "body")
    a0, a1 = rb.parameter(0, Shape(np.float32, ())), rb.parameter(1, Shape(np.int32, ()))
    b0, b1 = rb.parameter(2, Shape(np.float32, ())), rb.parameter(3, Shape(np.int32, ()))
    reducer = rb.build(rb.op("tuple", rb.op("add", a0, b0), rb.op("add", a1, b1)))
    b = Builder(m, "main")
    x = b.parameter(0, Shape(np.float32, (4, 9)))
    y = b.parameter(1, Shape(np.int32, (4, 9)))
    b.build(b.op("reduce", b.op("negate", x), y, b.constant(np.float32(0)),
                 b.constant(np.int32(0)), dimensions=(1,), calls=[reducer]), entry=True)
    fuse_module(m)  # (a fusion: a lone tuple-shaped reduce would be a library step)
    xs = np.arange(36, dtype=np.float32).reshape(4, 9)
    ys = np.arange(36, dtype=np.int32).reshape(4, 9) ** 2
    exe = get_backend("cpu").compile(m)
    assert [type(s) for s in exe.program.steps] == [KernelPlan]
    sums, squares = exe.execute([xs, ys])
    np.testing.assert_array_equal(sums, -xs.sum(1))
    np.testing.assert_array_equal(squares, ys.sum(1))


# --------------------------------------------------------------------------- column kernel
# Arg reductions that keep the minor dim run in the column kernel (``kernel_gen.
# KernelBuilder._build_column_reduce``): a value and an index accumulator per column, combined
# by the reducer body row after row.


def bytes_equal(got, want):
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(np.ascontiguousarray(g).view(np.uint8),
                                      np.ascontiguousarray(w).view(np.uint8))


def column_cases(rng, shape, dtype, dims, kind):
    """``special_values`` with planted columns (positions along the kept dims): ties, the
    init's value (an init/element tie), NaNs first, last and several, mixed signed zeros."""
    dtype = np.dtype(dtype)
    kept = [d for d in range(len(shape)) if d not in dims]
    n = math.prod(shape[d] for d in dims)
    y = special_values(rng, (n, math.prod(shape[d] for d in kept)), dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        extreme = info.min if kind == "max" else info.max
        planted = [np.full(n, 3), np.full(n, extreme), np.arange(n) % 2 * (info.max - 1)]
    else:
        extreme = -np.inf if kind == "max" else np.inf
        zeros = np.where(np.arange(n) % 2, 0.0, -0.0)
        nan_first, nan_last, nans = (np.full(n, 1.5) for _ in range(3))
        nan_first[[0, n // 2]] = [np.nan, -np.nan]
        nan_last[-1] = -np.nan
        nans[n // 3::3] = np.nan
        nans[n // 3 + 1::3] = -np.nan
        planted = [np.full(n, 2.0), np.full(n, extreme), zeros, np.full(n, -extreme),
                   nan_first, nan_last, nans, np.where(np.arange(n) % 2, np.inf, -np.inf)]
    for k, column in enumerate(planted[:y.shape[1]]):
        y[:, 3 * k % y.shape[1]] = column.astype(dtype)
    y = y.reshape([shape[d] for d in list(dims) + kept])
    return np.ascontiguousarray(np.transpose(y, np.argsort(list(dims) + kept)))


def arg_columns_module(reducer, x, dims, positions="iota"):
    """``reduce((x, positions), (extreme, 0))`` over ``dims`` with the body ``reducer``.
    positions: "iota" (along the first of ``dims``: with several dims, positions repeat)
    or "flat" (the row-major position among the reduced elements; ``dims`` must lead)."""
    kind = arg_reducer_kind(reducer)
    idt = np.dtype(reducer.parameters[1].shape.dtype)
    m = Module("m")
    m.add_computation(reducer)
    b = Builder(m, "main")
    p = b.parameter(0, Shape(x.dtype, x.shape))
    if positions == "iota":
        pos = b.op("iota", shape=Shape(idt, x.shape), iota_dimension=dims[0])
    else:
        assert tuple(dims) == tuple(range(len(dims)))
        n = math.prod(x.shape[:len(dims)])
        flat = b.op("iota", shape=Shape(idt, (n,) + x.shape[len(dims):]), iota_dimension=0)
        pos = b.op("reshape", flat, shape=Shape(idt, x.shape))
    dt = x.dtype
    if kernel_gen.S.is_float(dt):
        init = -np.inf if kind == "max" else np.inf
    else:
        init = np.iinfo(dt).min if kind == "max" else np.iinfo(dt).max
    r = b.op("reduce", p, pos, b.constant(np.asarray(init, dt)), b.constant(idt.type(0)),
             dimensions=tuple(dims), calls=[reducer])
    b.build(r, entry=True)
    return m


def lowered_reducer(kind, dtype):
    return lowered_body(jnp.argmax if kind == "max" else jnp.argmin, np.zeros(2, dtype))


@contextlib.contextmanager
def column_kernels(monkeypatch):
    """Counts the kernels that the column kernel builds (a list, filled on exit)."""
    built = []
    original = kernel_gen.KernelBuilder._build_column_reduce

    def spy(self, *args):
        built.append(self.name)
        return original(self, *args)
    with monkeypatch.context() as patch:
        patch.setattr(kernel_gen.KernelBuilder, "_build_column_reduce", spy)
        yield built


def run_fused(module, args, monkeypatch):
    """Runs a fused module on the CPU backend, checking it is one kernel, a column kernel."""
    with column_kernels(monkeypatch) as built:
        steps = ProgramBuilder(module).build().steps
    assert [type(s) for s in steps] == [KernelStep] and len(built) == 1
    exe = get_backend("cpu").compile(module)
    return exe.execute(args)


def check_columns(reducer, x, dims, monkeypatch, positions="iota"):
    m = arg_columns_module(reducer, x, dims, positions)
    want = evaluate_computation(m.entry, [x])
    fuse_module(m)
    bytes_equal(run_fused(m, [x], monkeypatch), want)
    return m, want


COLUMN_SHAPES = [((40, 33), (0,)), ((3, 50, 24), (1,)), ((5, 7, 16), (0, 1)),
                 ((4, 5, 6, 9), (0, 2)), ((2, 3, 4, 5, 8), (1, 3)), ((1, 8), (0,)),
                 ((300, 2100), (0,))]  # (several column blocks)
COLUMN_DTYPES = [np.float32, np.float16, jnp.bfloat16, np.int32, np.uint8, np.int8]


@pytest.mark.parametrize("dtype", COLUMN_DTYPES + [np.float64])
@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("shape,dims", COLUMN_SHAPES)
def test_column_arg_reductions_match_the_evaluator_bit_for_bit(dtype, kind, shape, dims,
                                                               monkeypatch):
    rng = np.random.default_rng(zlib.crc32(repr((np.dtype(dtype).name, kind, shape)).encode()))
    with x64(dtype == np.float64):
        x = column_cases(rng, shape, dtype, dims, kind)
        check_columns(lowered_reducer(kind, dtype), x, dims, monkeypatch)


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("shape,dims", [((5, 7, 16), (0, 1)), ((6, 4, 2, 3, 10), (0, 1, 2)),
                                        ((3, 700, 24), (0, 1))])
def test_column_arg_reductions_over_flat_positions_of_several_dims(kind, shape, dims,
                                                                   monkeypatch):
    rng = np.random.default_rng(zlib.crc32(repr((kind, shape)).encode()))
    x = column_cases(rng, shape, np.float32, dims, kind)
    _, (value, index) = check_columns(lowered_reducer(kind, np.float32), x, dims, monkeypatch,
                                      positions="flat")
    # (the flat argmax of the reduced dims, as NumPy's: a NaN wins, the first one)
    rows = x.reshape((-1,) + x.shape[len(dims):])
    want = np.where(np.isnan(rows).any(0), np.isnan(rows).argmax(0),
                    rows.argmax(0) if kind == "max" else rows.argmin(0))
    np.testing.assert_array_equal(index, want)


@pytest.mark.parametrize("idt", [np.int64, np.uint32, np.int16])
def test_column_arg_reductions_with_other_index_dtypes(idt, monkeypatch):
    def build(b, av, ai, bv, bi):
        return pick(b, nan_aware(b, av, ai, bv, bi, direction="LT"), av, ai, bv, bi)
    reducer = body(build, np.float32, idt)
    assert arg_reducer_kind(reducer) == "min"
    x = column_cases(np.random.default_rng(1), (70, 3, 40), np.float32, (0,), "min")
    check_columns(reducer, x, (0,), monkeypatch)


def test_column_blocks_count_the_index_accumulators():
    reducer = lowered_reducer("max", np.float32)
    m = arg_columns_module(reducer, np.zeros((4, 8), np.float32), (0,))
    r = next(i for i in m.entry.instructions if i.opcode == "reduce")
    budget = kernel_gen.COLUMN_BLOCK_BYTES
    # 4 + 4 bytes a column: value and index
    assert kernel_gen._column_blocks(budget // 8, [r]) == (budget // 8, 1)
    assert kernel_gen._column_blocks(budget // 8 + 16, [r])[1] == 2
    m = arg_columns_module(lowered_reducer("max", np.uint8), np.zeros((4, 8), np.uint8), (0,))
    r = next(i for i in m.entry.instructions if i.opcode == "reduce")
    width, n = kernel_gen._column_blocks(10_000, [r])  # 1 + 4 bytes a column
    assert width * 5 <= budget and n == -(-10_000 // (budget // 5 // 16 * 16))


def test_threaded_column_arg_reductions_are_bitwise_identical(monkeypatch):
    rng = np.random.default_rng(2)
    cases = [((40, 4100), (0,)), ((8, 300, 40), (1,)), ((19, 5, 90, 8), (0, 2))]
    for kind in ("max", "min"):
        for shape, dims in cases:
            x = column_cases(rng, shape, np.float32, dims, kind)
            m = arg_columns_module(lowered_reducer(kind, np.float32), x, dims)
            want = evaluate_computation(m.entry, [x])
            fuse_module(m)
            (plan,) = get_backend("cpu").compile(m).program.steps
            assert plan.extent > 1 and plan.work >= cpu_exe.PARALLEL_MIN_WORK  # (split)
            threaded = get_backend("cpu").compile(m).execute([x])
            with monkeypatch.context() as patch:
                patch.setattr(cpu_exe, "PARALLEL_MIN_WORK", 1 << 62)
                single = get_backend("cpu").compile(m).execute([x])
            bytes_equal(threaded, want)
            bytes_equal(single, want)


JITTED = {
    "argmax axis 0": lambda a: jnp.argmax(a, axis=0),
    "argmin axis 0": lambda a: jnp.argmin(a, axis=0),
    "argmin axis 1 of rank 3": lambda a: jnp.argmin(a.reshape(6, -1, 40), axis=1),
    "argmax of a fused producer": lambda a: jnp.argmax(a * 2 + 1, axis=0),
    "argmin of a fused producer, axis 1": lambda a: jnp.argmin(
        jnp.abs(a.reshape(6, -1, 40)) - 1, axis=1),
}


@pytest.mark.parametrize("dtype", [np.float32, jnp.bfloat16, np.int32, np.float64])
@pytest.mark.parametrize("name", sorted(JITTED))
def test_jitted_column_arg_reductions_match_the_interpreter(name, dtype, monkeypatch):
    f = JITTED[name]
    rng = np.random.default_rng(zlib.crc32(repr((np.dtype(dtype).name, name)).encode()))
    with x64(dtype == np.float64):
        x = column_cases(rng, (60, 40), dtype, (0,), "min" if "argmin" in name else "max")
        module = optimized(f, x)
        (got,) = run_fused(module, [x], monkeypatch)
        want = np.asarray(ember.jit(f, backend="interpreter")(x))
        bytes_equal([got, np.asarray(ember.jit(f)(x))], [want, want])
    assert got.dtype == (np.int64 if dtype == np.float64 else np.int32)  # (x64's default int)


def test_jitted_column_argmax_matches_numpy():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(1000, 300)).astype(np.float32)
    x[[0, 5, 900], 7] = np.nan
    x[:, 9] = 4.0
    x[[3, 4], 11] = 100.0
    y = rng.normal(size=(7, 400, 48)).astype(np.float32)
    y[:, 20, 3] = -np.inf
    y[:, 10, 3] = -np.inf
    f = ember.jit(lambda a, b: (jnp.argmax(a, axis=0), jnp.argmin(b, axis=1),
                                jnp.argmax(a * 2 + 1, axis=0)))
    amax, amin, fused = f(x, y)
    np.testing.assert_array_equal(np.asarray(amax), np.argmax(x, axis=0))
    np.testing.assert_array_equal(np.asarray(amin), np.argmin(y, axis=1))
    np.testing.assert_array_equal(np.asarray(fused), np.argmax(x * 2 + 1, axis=0))


def test_column_argmax_and_argmin_of_preds_match_numpy():
    # (argmax(mask, axis=0): the first True of each column, or 0 where there is none; pred
    # values run in the column kernel, bytes in its accumulators)
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2000, 300)).astype(np.float32)
    x[:, 5] = 0.0  # (a column without a hit)
    y = rng.normal(size=(6, 500, 40)).astype(np.float32)
    f = ember.jit(lambda a, b: (jnp.argmax(a > 2, axis=0), jnp.argmin(a > -2, axis=0),
                                jnp.argmax(b > 2.5, axis=1)))
    first_hit, first_miss, in_middle = f(x, y)
    np.testing.assert_array_equal(np.asarray(first_hit), np.argmax(x > 2, axis=0))
    np.testing.assert_array_equal(np.asarray(first_miss), np.argmin(x > -2, axis=0))
    np.testing.assert_array_equal(np.asarray(in_middle), np.argmax(y > 2.5, axis=1))
    assert np.asarray(first_hit)[5] == 0
