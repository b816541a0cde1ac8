"""Row kernels (chains of minor-dim reductions and their broadcast-back consumers fused into
one kernel making several passes per row) and column reductions (the minor dim kept) in the
CPU backend.

Results are checked against NumPy in float64 and against the interpreter; every program is
also checked to run as native kernels only (a fallback to the NumPy evaluator would hide the
code under test), threaded runs must give the same bits as one thread, and the loops must be
vectorized.
"""

import glob

import numpy as np
import pytest

import ember
import ember.backends.cpu as cpu_backend
import ember.numpy as jnp
from ember.backends.cpu import CpuBackend, kernel_gen
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu.program import KernelStep, ProgramBuilder
from ember.compiler.hlo import Computation, Instruction, Shape
from tests.backends.cpu.helpers import optimized

rng = np.random.default_rng(0)


@pytest.fixture
def one_tier(monkeypatch):
    """Bitwise comparisons between runs need the same code in both: no quick first tier
    (unoptimized code sums floats in another order) replaced by optimized code later."""
    monkeypatch.setattr(cpu_backend, "TIERED_COMPILATION", False, raising=False)


def run_native(f, *args):
    """Runs ``f``'s optimized module on the CPU backend, checking every step is a kernel."""
    module = optimized(f, *args)
    program = ProgramBuilder(module).build()
    assert program.steps and all(isinstance(s, KernelStep) for s in program.steps), \
        [type(s).__name__ for s in program.steps]
    outs = CpuBackend().compile(module).execute([np.asarray(a) for a in args])
    return outs, module


def entry_fusions(module):
    return [i for i in module.entry.instructions if i.opcode == "fusion"]


def close(got, want, rtol, atol):
    got = np.asarray(got)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol,
                               equal_nan=True)


# --------------------------------------------------------------------------- programs


def softmax(x):
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)


def np_softmax(x):
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)


def layernorm(x):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mu), axis=-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + 1e-5)


def np_layernorm(x):
    x = x.astype(np.float64)
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5)


def logsumexp(x):
    m = jnp.max(x, axis=-1, keepdims=True)
    return jnp.log(jnp.sum(jnp.exp(x - m), axis=-1)) + m[..., 0]


def np_logsumexp(x):
    x = x.astype(np.float64)
    m = x.max(-1, keepdims=True)
    return np.log(np.exp(x - m).sum(-1)) + m[..., 0]


ROW_LENGTHS = [1, 7, 16, 32, 64, 100, 127, 128, 1000, 1025, 2500]


@pytest.mark.parametrize("n", ROW_LENGTHS)
@pytest.mark.parametrize("name", ["softmax", "layernorm", "logsumexp"])
def test_row_programs_match_float64_numpy(name, n):
    f, ref = {"softmax": (softmax, np_softmax), "layernorm": (layernorm, np_layernorm),
              "logsumexp": (logsumexp, np_logsumexp)}[name]
    x = (rng.standard_normal((37, n)) * 3).astype(np.float32)
    (out,), module = run_native(f, x)
    assert len(entry_fusions(module)) == 1  # the whole chain is one row fusion
    close(out, ref(x), rtol=2e-5, atol=2e-6)
    close(np.asarray(ember.jit(f)(x)), ref(x), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("shape", [(2, 3, 50), (4, 1, 9), (3, 700)])
def test_rows_of_higher_rank_arrays_and_several_reduced_dims(shape):
    x = rng.standard_normal(shape).astype(np.float32)
    (out,), _ = run_native(softmax, x)
    close(out, np_softmax(x), rtol=2e-5, atol=2e-6)

    def norm2(a):  # rows spanning the last two dims
        mu = jnp.mean(a, axis=(-2, -1), keepdims=True)
        return (a - mu) * jnp.max(jnp.abs(a - mu), axis=(-2, -1), keepdims=True)
    (out,), module = run_native(norm2, x)
    a = x.astype(np.float64)
    mu = a.mean((-2, -1), keepdims=True)
    close(out, (a - mu) * np.abs(a - mu).max((-2, -1), keepdims=True), rtol=2e-5, atol=2e-5)
    assert len(entry_fusions(module)) == 1


def test_row_values_mixed_with_row_and_column_parameters():
    x = rng.standard_normal((33, 130)).astype(np.float32)
    bias = rng.standard_normal(33).astype(np.float32)  # one per row
    scale = rng.standard_normal(130).astype(np.float32)  # one per column

    def f(x, bias, scale):
        s = jnp.sum(x * scale, axis=1) + bias
        centered = x - s[:, None] / 130.0
        return centered * scale, s, jnp.max(centered, axis=1) * bias

    outs, module = run_native(f, x, bias, scale)
    a, b, c = (v.astype(np.float64) for v in (x, bias, scale))
    s = (a * c).sum(1) + b
    centered = a - s[:, None] / 130.0
    for got, want in zip(outs, [centered * c, s, centered.max(1) * b]):
        close(got, want, rtol=1e-5, atol=1e-5)
    assert len(entry_fusions(module)) == 1


def test_row_value_outputs_that_do_not_depend_on_the_reduce():
    # Row fusion merged a scalar (one row: a row value) into the group of a full sum that
    # reads it. No reduce result is consumed inside, and the kernel was built as a plain
    # reduction, which stored the scalar at every element index of the summed array: writes
    # past a 4-byte buffer, and a wrong scalar.
    def f(x, s):
        t = jnp.reshape(jnp.cos(s) * 2.0, ())
        return t + 1.0, jnp.sum((x - 1.0) * t)

    x = rng.standard_normal((256, 17)).astype(np.float32)
    s = np.array([[1.3]], np.float32)
    (t1, total), module = run_native(f, x, s)
    assert len(entry_fusions(module)) == 1
    t = np.cos(np.float32(1.3)) * np.float32(2)
    assert t1 == t + 1
    close(total, ((x.astype(np.float64) - 1) * t).sum(), 1e-6, 1e-3)


def test_complex_values_computed_in_a_row_pass():
    # A complex output of a row fusion (from the row max) was stored with the real-only
    # store: the compile crashed (AttributeError on the complex pair).
    def f(x, y):
        m = jnp.max(x, axis=-1, keepdims=True)
        z = ember.lax.complex(x - m, y)
        return z * z, jnp.sum(jnp.abs(z), axis=-1)

    x = rng.standard_normal((8, 33)).astype(np.float32)
    y = rng.standard_normal((8, 33)).astype(np.float32)
    (sq, total), module = run_native(f, x, y)
    assert len(entry_fusions(module)) == 1
    z = (x - x.max(-1, keepdims=True)).astype(np.complex128) + 1j * y
    close(sq.real, (z * z).real, 1e-5, 1e-5)
    close(sq.imag, (z * z).imag, 1e-5, 1e-5)
    close(total, np.abs(z).sum(-1), 1e-5, 1e-5)


def test_nan_and_inf_rows():
    x = rng.standard_normal((6, 9)).astype(np.float32)
    x[1, 3] = np.nan
    x[2, :] = np.inf
    x[3, 4] = -np.inf
    x[4, :] = -np.inf
    x[5, 2] = np.inf
    for f, ref in ((softmax, np_softmax), (logsumexp, np_logsumexp)):
        (out,), _ = run_native(f, x)
        with np.errstate(invalid="ignore"):
            close(out, ref(x), rtol=2e-5, atol=2e-6)
    interp = ember.jit(softmax, backend="interpreter")(x)
    np.testing.assert_array_equal(np.isnan(run_native(softmax, x)[0][0]),
                                  np.isnan(np.asarray(interp)))


@pytest.mark.parametrize("shape", [(0, 5), (4, 0), (0, 0), (3, 1, 0)])
def test_empty_rows_and_no_rows(shape):
    x = np.ones(shape, np.float32)

    def f(a):
        s = jnp.sum(a, axis=-1, keepdims=True)
        return a - s, s * 2.0, jnp.prod(a - s, axis=-1)
    cpu = ember.jit(f)(x)
    ref = ember.jit(f, backend="interpreter")(x)
    for c, r in zip(cpu, ref):
        assert np.asarray(c).shape == np.asarray(r).shape
        np.testing.assert_array_equal(np.asarray(c), np.asarray(r))


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8])
def test_integer_rows_are_exact(dtype):
    x = rng.integers(0, 100, (23, 41)).astype(dtype)

    def f(a):
        return a - jnp.max(a, axis=1, keepdims=True) + jnp.sum(a, axis=1, keepdims=True)
    (out,), module = run_native(f, x)
    want = ember.jit(f, backend="interpreter")(x)
    np.testing.assert_array_equal(out, np.asarray(want))
    assert len(entry_fusions(module)) == 1


@pytest.fixture
def x64():
    previous = ember.config.read("jax_enable_x64")
    ember.config.update("jax_enable_x64", True)
    yield
    ember.config.update("jax_enable_x64", previous)


def test_boolean_and_float64_rows(x64):
    x = rng.standard_normal((17, 29))

    def f(a):
        hit = jnp.any(a > 1.5, axis=1, keepdims=True)
        return jnp.where(hit, a - jnp.mean(a, axis=1, keepdims=True), 0.0)
    (out,), module = run_native(f, x)
    assert out.dtype == np.float64 and len(entry_fusions(module)) == 1
    a = x.astype(np.float64)
    want = np.where((a > 1.5).any(1, keepdims=True), a - a.mean(1, keepdims=True), 0.0)
    np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16])
def test_low_precision_rows_match_interpreter(dtype):
    x = rng.standard_normal((9, 300)).astype(dtype)
    cpu = np.asarray(ember.jit(softmax)(x)).astype(np.float64)
    ref = np.asarray(ember.jit(softmax, backend="interpreter")(x)).astype(np.float64)
    np.testing.assert_allclose(cpu, ref, rtol=2e-2, atol=1e-3)


@pytest.mark.parametrize("f", [softmax, layernorm, logsumexp])
def test_threaded_rows_are_bitwise_identical(f, monkeypatch, one_tier):
    x = rng.standard_normal((700, 301)).astype(np.float32)
    threaded = np.asarray(ember.jit(f)(x))
    monkeypatch.setattr(cpu_exe, "PARALLEL_MIN_WORK", 1 << 62)
    single = np.asarray(ember.jit(lambda a: f(a))(x))
    np.testing.assert_array_equal(threaded, single)


def test_long_rows_are_not_row_fused():
    from ember.compiler.passes.fusion import ROW_FUSION_MAX_ROW
    x = np.ones((2, ROW_FUSION_MAX_ROW + 1), np.float32)
    module = optimized(softmax, x)
    assert len(entry_fusions(module)) > 1
    close(np.asarray(ember.jit(softmax)(x)), np_softmax(x), rtol=1e-5, atol=1e-9)


def test_reduced_values_broadcast_along_another_dim_are_not_row_fused():
    # s[j] is added to x[i, j]: each row needs every row's sum, so no row kernel applies.
    x = rng.standard_normal((40, 40)).astype(np.float32)
    f = lambda a: a + jnp.sum(a, axis=1)[None, :]  # noqa: E731
    module = optimized(f, x)
    assert len(entry_fusions(module)) == 2
    (out,), _ = run_native(f, x)
    close(out, x + x.astype(np.float64).sum(1)[None, :], rtol=1e-5, atol=1e-5)


def test_softmax_computes_exp_once_and_vectorizes(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))
    x = rng.standard_normal((64, 1024)).astype(np.float32)
    ember.jit(softmax)(x)
    text = open(glob.glob(str(tmp_path / "*.llvm.ll"))[0]).read()
    kernel = text[text.index("define void"):]
    # The exp polynomial rounds once per call (``rint``): emitted once, in the sum pass.
    assert kernel.count("call float @\"llvm.rint.f32\"") == 1
    opt = open(glob.glob(str(tmp_path / "*.llvm.opt.ll"))[0]).read()
    assert "x float>" in opt


@pytest.mark.parametrize("n", [16, 32, 64, 100])
@pytest.mark.parametrize("name", ["softmax", "layernorm"])
def test_short_row_passes_vectorize_along_the_row(tmp_path, monkeypatch, name, n):
    # Fully unrolled, a short row's maximum became a scalar chain (softmax over rows of 32:
    # 4x slower), and vectorized across rows it gathered every element.
    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))
    monkeypatch.setattr(cpu_backend, "TIERED_COMPILATION", False)
    f, ref = {"softmax": (softmax, np_softmax), "layernorm": (layernorm, np_layernorm)}[name]
    x = rng.standard_normal((300, n)).astype(np.float32)
    close(np.asarray(ember.jit(f)(x)), ref(x), rtol=2e-5, atol=2e-6)
    opt = open(glob.glob(str(tmp_path / "*.llvm.opt.ll"))[0]).read()
    assert "x float>" in opt and "gather" not in opt
    assert "llvm.maximum.f32" not in opt  # (softmax's maximum runs on vectors)


@pytest.mark.parametrize("n", [1, 15, 16, 17, 100, 127, 128, 129, 1000])
def test_float_sum_lanes_cover_short_and_long_rows(n):
    lanes = kernel_gen.lane_count(n)
    assert 1 <= lanes <= min(n, kernel_gen.LANES)
    # Short sums take fewer lanes: a row pays for widening and combining every lane.
    assert lanes == (min(n, kernel_gen.SHORT_SUM_LANES) if n < kernel_gen.SHORT_SUM_MAX
                     else kernel_gen.LANES)
    x = (rng.standard_normal((50, n)) * 10 + 3).astype(np.float32)
    (out,), _ = run_native(lambda a: jnp.sum(a * 2.0, axis=1), x)
    want = (x.astype(np.float64) * 2).sum(1)
    # Float32 lanes of at most a block, then float64: within an ulp-scale error of the
    # magnitudes' sum.
    bound = np.abs(x.astype(np.float64) * 2).sum(1) * 2.0 ** -22 + 1e-30
    assert np.all(np.abs(out.astype(np.float64) - want) <= bound), (out, want)


def _lane_sum(row: np.ndarray) -> np.float32:
    """``LaneSums``' order for one float32 row of at most a block: element ``j`` of the
    whole chunks adds into lane ``j % lanes``, the rest into tail lanes; the lanes widen to
    float64 and combine pairwise (lane ``i`` adds lane ``i + half``)."""
    n = len(row)
    lanes = kernel_gen.lane_count(n)
    full = n // lanes * lanes
    main = np.zeros(lanes, np.float32)
    for j in range(full):
        main[j % lanes] += row[j]
    tail = np.zeros(lanes, np.float32)
    tail[:n - full] = row[full:]
    wide = list(main.astype(np.float64) + tail.astype(np.float64))
    while len(wide) > 1:
        half = (len(wide) + 1) // 2
        wide = [wide[i] + wide[i + half] if i + half < len(wide) else wide[i]
                for i in range(half)]
    return np.float32(0.0 + wide[0])


@pytest.mark.parametrize("n", [3, 5, 10, 12, 32, 100, 128, 1000])
def test_float_sum_lanes_combine_in_a_fixed_order(n, one_tier):
    # The lanes' pairwise tree runs on vectors where the lane count is a power of two (and
    # on scalars otherwise: for 5 or 10 lanes, vector code was slower); either way the
    # additions are the ones LaneSums documents.
    # Each row: small values and a cancelling pair of huge ones at random places. The
    # small ones survive only where the pair meets before either meets a small lane, so
    # another order of combining the lanes gives other bits.
    x = rng.standard_normal((60, n))
    for row in x:
        i, j = rng.choice(n, 2, replace=False)
        row[i], row[j] = 2.0 ** 60, -(2.0 ** 60)
    x = x.astype(np.float32)
    (out,), _ = run_native(lambda a: jnp.sum(a, axis=1), x)
    want = np.array([_lane_sum(row) for row in x])
    np.testing.assert_array_equal(out.view(np.int32), want.view(np.int32))


# --------------------------------------------------------------------------- column reductions


COLUMN_CASES = [((128, 512), (0,)), ((7, 3, 20), (0, 1)), ((5, 6, 9), (1,)),
                ((3, 1000, 33), (0, 1)), ((2000, 16), (0,)), ((4, 5, 6, 7), (0, 2)),
                ((3000, 40), (0,)), ((1, 300), (0,)),
                ((40, 5000), (0,)), ((3, 30, 4500), (1,))]  # (several column blocks)


@pytest.mark.parametrize("shape,axes", COLUMN_CASES)
@pytest.mark.parametrize("reducer", ["sum", "max", "min"])
def test_column_reductions_match_float64_numpy(shape, axes, reducer):
    x = rng.standard_normal(shape).astype(np.float32)
    f = {"sum": jnp.sum, "max": jnp.max, "min": jnp.min}[reducer]
    ref = {"sum": np.sum, "max": np.max, "min": np.min}[reducer]
    (out,), _ = run_native(lambda a: f(a * 1.0, axis=axes), x)
    want = ref(x.astype(np.float64), axis=axes)
    if reducer == "sum":  # error relative to the sum of magnitudes (cancellation)
        scale = np.sum(np.abs(x.astype(np.float64)), axis=axes)
        assert np.all(np.abs(out - want) <= 2e-6 * scale)
    else:
        np.testing.assert_array_equal(out, want.astype(np.float32))


def test_column_blocks_are_wide_even_and_cover_every_column():
    def reduce_of(dtype, reducer):
        x, y = (Instruction("parameter", [], Shape(dtype, ()), {"index": i}) for i in (0, 1))
        body = Instruction(reducer, [x, y], x.shape)
        return Instruction("reduce", [], Shape(dtype, ()), {},
                           calls=[Computation("r", [x, y, body], body)])
    f32_max, f32_sum = reduce_of(np.float32, "maximum"), reduce_of(np.float32, "add")
    for cols in (8, 100, 1024, 4096, 5000, 10000, 100_003):
        for reduces in ([f32_max], [f32_sum], [f32_sum, f32_max]):
            width, n = kernel_gen._column_blocks(cols, reduces)
            assert (n - 1) * width < cols <= n * width
            assert width == cols or width % 16 == 0
            per_column = sum(4 + (8 if r is f32_sum else 0) for r in reduces)
            assert width * per_column <= max(kernel_gen.COLUMN_BLOCK_BYTES, 16 * per_column)
            # as few blocks as the budget allows
            assert n == -(-cols // (kernel_gen.COLUMN_BLOCK_BYTES // per_column // 16 * 16))
    assert kernel_gen._column_blocks(1024, [f32_max]) == (1024, 1)  # whole rows


def test_column_sum_of_many_rows_is_accurate():
    x = rng.random((40_000, 20), dtype=np.float32)
    (out,), _ = run_native(lambda a: jnp.sum(a, axis=0), x)
    exact = x.astype(np.float64).sum(0)
    assert np.max(np.abs(out - exact) / exact) < 1e-6


def test_column_reduction_with_elementwise_output_and_integers():
    x = rng.integers(-50, 50, (300, 24)).astype(np.int32)
    outs, _ = run_native(lambda a: (jnp.sum(a * 3, axis=0), a * 3, jnp.max(a * 3, axis=0)), x)
    np.testing.assert_array_equal(outs[0], (x * 3).sum(0))
    np.testing.assert_array_equal(outs[1], x * 3)
    np.testing.assert_array_equal(outs[2], (x * 3).max(0))


def test_column_reductions_with_nan():
    x = rng.standard_normal((50, 30)).astype(np.float32)
    x[7, 3] = np.nan
    x[:, 5] = -np.inf
    # (float32 sums cancel: their error scales with the column's sum of magnitudes)
    scale = np.where(np.isfinite(x), np.abs(x), 0).astype(np.float64).sum(0).max()
    for f, ref in ((jnp.max, np.max), (jnp.min, np.min), (jnp.sum, np.sum)):
        (out,), _ = run_native(lambda a, f=f: f(a * 1.0, axis=0), x)
        close(out, ref(x.astype(np.float64), axis=0), rtol=1e-6, atol=1e-6 * scale)


@pytest.mark.parametrize("shape", [(3000, 700), (40, 75, 700)])
def test_threaded_column_reduction_matches_one_call(shape, monkeypatch, one_tier):
    # One work item (a block of 700 columns; 40 in the second shape): the calls split the
    # reduced rows and write partial results (kernel_gen.COLUMN_SPLIT_ROWS_BELOW), so the
    # sum is close to one call's (exact per thread count: see test_cpu_backend), the max
    # equal.
    x = rng.standard_normal(shape).astype(np.float32)
    axes = tuple(range(x.ndim - 1)) if x.ndim == 2 else (1,)
    f = lambda a: (jnp.sum(a, axis=axes), jnp.max(a, axis=axes))  # noqa: E731
    threaded = [np.asarray(v) for v in ember.jit(f)(x)]
    monkeypatch.setattr(cpu_exe, "PARALLEL_MIN_WORK", 1 << 62)
    single = [np.asarray(v) for v in ember.jit(lambda a: f(a))(x)]
    scale = np.sum(np.abs(x.astype(np.float64)), axis=axes)  # (cancellation)
    assert np.all(np.abs(threaded[0] - single[0]) <= 2e-6 * scale)
    assert np.all(np.abs(threaded[0] - x.astype(np.float64).sum(axis=axes)) <= 2e-6 * scale)
    np.testing.assert_array_equal(threaded[1], single[1])
    np.testing.assert_array_equal(threaded[1], x.max(axis=axes))


def test_column_reduction_vectorizes(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))
    ember.jit(lambda a: jnp.sum(a, axis=0))(np.ones((128, 512), np.float32))
    opt = open(glob.glob(str(tmp_path / "*.llvm.opt.ll"))[0]).read()
    # The column loop runs on float vectors. (Whether LLVM also vectorizes the float64 flush,
    # once per block of rows, depends on the host CPU's cost model: not asserted.)
    assert "x float>" in opt


@pytest.mark.parametrize("shape,axis", [((300, 2000), 1), ((64, 5, 700), (1, 2)),
                                        ((7, 3), 1), ((20, 40), None)])
def test_row_products_in_lanes_match_float64_numpy(shape, axis, tmp_path, monkeypatch):
    # Products accumulate in lanes as sums do (LANE_REDUCERS): vectorized, in a fixed order.
    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))
    monkeypatch.setenv("EMBER_CPU_TIERED", "0")
    monkeypatch.setattr(cpu_backend, "TIERED_COMPILATION", False)
    x = (rng.standard_normal(shape) * 0.05 + 1.0).astype(np.float32)
    got = np.asarray(ember.jit(lambda a: jnp.prod(a, axis=axis))(x))
    want = np.prod(x.astype(np.float64), axis=axis)
    # (each float32 multiplication rounds: ~sqrt(n) half-ulps over n factors)
    np.testing.assert_allclose(got, want, rtol=2e-5)
    if shape == (300, 2000):
        opt = open(glob.glob(str(tmp_path / "*.llvm.opt.ll"))[0]).read()
        assert "fmul <" in opt


def test_threaded_row_products_are_bitwise_identical(monkeypatch, one_tier):
    x = (rng.standard_normal((3000, 700)) * 0.05 + 1.0).astype(np.float32)
    threaded = np.asarray(ember.jit(lambda a: jnp.prod(a, axis=1))(x))
    monkeypatch.setattr(cpu_exe, "PARALLEL_MIN_WORK", 1 << 62)
    single = np.asarray(ember.jit(lambda a: jnp.prod(a * 1.0, axis=1))(x))
    np.testing.assert_array_equal(threaded, single)


@pytest.mark.parametrize("shape,axes", COLUMN_CASES)
def test_column_any_all_match_numpy(shape, axes):
    # Pred accumulators: a few columns with a single hit or a single miss among the rows.
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[rng.choice(flat.size, max(1, flat.size // 5000), replace=False)] = 9.0
    flat[rng.choice(flat.size, max(1, flat.size // 5000), replace=False)] = -9.0
    (hits, none_low), _ = run_native(
        lambda a: (jnp.any(a > 4, axis=axes), jnp.all(a > -4, axis=axes)), x)
    np.testing.assert_array_equal(hits, np.any(x > 4, axis=axes))
    np.testing.assert_array_equal(none_low, np.all(x > -4, axis=axes))


def test_column_any_vectorizes(tmp_path, monkeypatch):
    # The accumulators of a pred reduction are bytes: LLVM leaves loops over i1 arrays in
    # memory scalar (an any over axis 0 of (2000, 2000) float32 took 2.0 ms, 0.47 with bytes).
    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))
    monkeypatch.setenv("EMBER_CPU_TIERED", "0")
    monkeypatch.setattr(cpu_backend, "TIERED_COMPILATION", False)
    x = rng.standard_normal((256, 512)).astype(np.float32)
    out = ember.jit(lambda a: jnp.any(a > 2, axis=0))(x)
    np.testing.assert_array_equal(np.asarray(out), np.any(x > 2, axis=0))
    opt = open(glob.glob(str(tmp_path / "*.llvm.opt.ll"))[0]).read()
    assert "fcmp ogt <" in opt  # (the comparisons run on float vectors)


@pytest.mark.parametrize("reducer", ["sum", "max"])
@pytest.mark.parametrize("shape,axis", [((4096, 16), 1), ((256, 64), 1), ((4096, 16), 0),
                                        ((64, 512, 16), (0, 1))])
def test_short_runs_vectorize_without_gathers(tmp_path, monkeypatch, shape, axis, reducer):
    # Rows (and columns) of 16-64 elements: LLVM unrolls the run, and would then vectorize
    # the loop across rows or columns with a gather per element (4-7x slower).
    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))
    monkeypatch.setenv("EMBER_CPU_TIERED", "0")
    monkeypatch.setattr(cpu_backend, "TIERED_COMPILATION", False)
    x = rng.standard_normal(shape).astype(np.float32)
    f = {"sum": jnp.sum, "max": jnp.max}[reducer]
    out = np.asarray(ember.jit(lambda a: f(a, axis=axis))(x))
    want = {"sum": np.sum, "max": np.max}[reducer](x.astype(np.float64), axis=axis)
    # (A float32 sum's error scales with its terms' magnitudes, not with the result: sums of
    # 32768 terms cancel to values near 0.)
    bound = 2.0 ** -20 * np.abs(x.astype(np.float64)).sum(axis=axis)
    assert np.all(np.abs(out - want) <= bound), np.abs(out - want).max()
    opt = open(glob.glob(str(tmp_path / "*.llvm.opt.ll"))[0]).read()
    # (A float max accumulates integer order keys: kernel_gen.KernelBuilder._accumulator.)
    vector = {"sum": "x float>", "max": "x i32>"}[reducer]
    assert vector in opt and "gather" not in opt


def test_kernel_outputs_are_marked_disjoint_from_inputs(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))
    x = rng.standard_normal((48, 768)).astype(np.float32)
    out = ember.jit(softmax)(x)
    close(out, np_softmax(x), rtol=1e-5, atol=1e-7)
    text = open(glob.glob(str(tmp_path / "*.llvm.ll"))[0]).read()
    start = text.index("define void")
    kernel = text[start:text.index("define void", start + 1)]
    loads = [line for line in kernel.splitlines() if " = load float, float* " in line]
    stores = [line for line in kernel.splitlines() if line.strip().startswith("store float")]
    # The input's loads (max pass, exp pass) may not alias the output; the output's own
    # accesses (exp stored, loaded back and scaled) are in its scope.
    assert len([line for line in loads if "!noalias" in line]) >= 2
    assert len([line for line in loads + stores if "!alias.scope" in line]) >= 3
    # So the exp pass vectorizes without a scalar fallback loop guarded by an overlap check.
    opt = open(glob.glob(str(tmp_path / "*.llvm.opt.ll"))[0]).read()
    assert "lane.body" not in opt


@pytest.mark.parametrize("shape,axes", [((64, 50, 70), (0, 2)), ((8, 16, 12, 10), (0, 2, 3)),
                                        ((3, 5, 7, 9), (0, 1, 3))])
@pytest.mark.parametrize("reducer", ["sum", "max", "mean"])
def test_reductions_around_a_kept_dim_match_float64_numpy(shape, axes, reducer):
    # (The simplifier reduces the trailing dims first: row reductions, then the rest.)
    x = rng.standard_normal(shape).astype(np.float32)
    f = {"sum": jnp.sum, "max": jnp.max, "mean": jnp.mean}[reducer]
    ref = {"sum": np.sum, "max": np.max, "mean": np.mean}[reducer]
    out = np.asarray(ember.jit(lambda a: f(a * 2.0, axis=axes))(x))
    want = ref(x.astype(np.float64) * 2.0, axis=axes)
    if reducer == "max":
        np.testing.assert_array_equal(out, want.astype(np.float32))
    else:
        scale = np.sum(np.abs(x.astype(np.float64) * 2.0), axis=axes)
        scale = scale / (x.size / out.size) if reducer == "mean" else scale
        assert np.all(np.abs(out - want) <= 2e-6 * scale)


# --------------------------------------------------------------------------- deferred row outputs


def tanh_matvec(a, y):
    return jnp.tanh(jnp.sum(a * y, axis=1))


def np_tanh_matvec(a, y):
    return np.tanh((a.astype(np.float64) * y).sum(1))


def scaled_exp_of_sums(a, y):
    s = jnp.sum(a * y, axis=1)
    return jnp.exp(s * 0.1) / (1.0 + jnp.abs(s)), s


@pytest.mark.parametrize("rows", [1, 63, 64, 65, 200])
@pytest.mark.parametrize("n", [20, 64, 100])
def test_row_outputs_after_each_block_match_the_row_loop(rows, n, monkeypatch, one_tier):
    # Row outputs computed from a row's sums run in a loop of their own after each block of
    # rows (vectorized across rows); the bits are those of computing them in the row loop.
    from ember.backends.cpu import row_kernel
    a = rng.standard_normal((rows, n)).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    (out,), _ = run_native(tanh_matvec, a, y)
    close(out, np_tanh_matvec(a, y), rtol=2e-6, atol=2e-6)
    (e, s), _ = run_native(scaled_exp_of_sums, a, y)
    s64 = (a.astype(np.float64) * y).sum(1)
    close(s, s64, rtol=1e-5, atol=1e-5)
    close(e, np.exp(s64 * 0.1) / (1 + np.abs(s64)), rtol=1e-5, atol=1e-6)
    monkeypatch.setattr(row_kernel.RowKernel, "_deferred_outs", lambda self: [])
    (in_loop,), _ = run_native(tanh_matvec, a, y)
    (e_in_loop, s_in_loop), _ = run_native(scaled_exp_of_sums, a, y)
    np.testing.assert_array_equal(out, in_loop)
    np.testing.assert_array_equal(e, e_in_loop)
    np.testing.assert_array_equal(s, s_in_loop)


def test_deferred_row_outputs_vectorize_across_rows(tmp_path, monkeypatch):
    # tanh(A @ y) over rows of 64: each row's scalar tanh cost more than its sum.
    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))
    monkeypatch.setattr(cpu_backend, "TIERED_COMPILATION", False)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    y = rng.standard_normal(64).astype(np.float32)
    close(np.asarray(ember.jit(tanh_matvec)(a, y)), np_tanh_matvec(a, y), rtol=2e-6, atol=2e-6)
    opt = open(glob.glob(str(tmp_path / "*.llvm.opt.ll"))[0]).read()
    assert "fdiv <16 x float>" in opt or "fdiv <8 x float>" in opt  # (tanh's division)


def test_threaded_deferred_row_outputs_are_bitwise_identical(monkeypatch, one_tier):
    a = rng.standard_normal((5001, 96)).astype(np.float32)
    y = rng.standard_normal(96).astype(np.float32)
    threaded = np.asarray(ember.jit(tanh_matvec)(a, y))
    monkeypatch.setattr(cpu_exe, "PARALLEL_MIN_WORK", 1 << 62)
    single = np.asarray(ember.jit(lambda a, y: tanh_matvec(a, y))(a, y))
    np.testing.assert_array_equal(threaded, single)
    close(threaded, np_tanh_matvec(a, y), rtol=2e-6, atol=2e-6)


def _layernorm_and_mean(x):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mu), axis=-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + 1e-5), mu


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_outputs_stream_with_the_bits_of_a_small_kernels_rows(tmp_path, monkeypatch,
                                                                    one_tier, dtype):
    # Full outputs of at least ROW_STREAM_MIN_BYTES go through row buffers and non-temporal
    # stores, the input's next row prefetched; each row has the bits the same rows get from
    # a kernel too small to stream.
    from tests.backends.cpu.helpers import x64
    cols = 1024
    rows = kernel_gen.ROW_STREAM_MIN_BYTES // (cols * np.dtype(dtype).itemsize)
    x = rng.standard_normal((rows, cols)).astype(dtype)
    x[3, 5], x[7] = np.nan, -np.inf
    with x64(dtype == np.float64):
        for fn in (softmax, _layernorm_and_mean):
            monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path / fn.__name__ / "large"))
            large = [np.asarray(v) for v in ember.tree_util.tree_leaves(ember.jit(fn)(x))]
            monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path / fn.__name__ / "small"))
            small = [np.asarray(v) for v in
                     ember.tree_util.tree_leaves(ember.jit(fn)(x[:64]))]
            for got, want in zip(large, small):
                np.testing.assert_array_equal(got[:64], want)
            for part in ("large", "small"):
                asm = "".join(open(f).read() for f in glob.glob(
                    str(tmp_path / fn.__name__ / part / "*.s")))
                assert ("vmovntp" in asm or "movntp" in asm) == (part == "large"), part
                # (and the next row is asked for while the row's later passes compute)
                assert ("prefetcht0" in asm) == (part == "large"), part
    x64_ = x.astype(np.float64)[8:]
    e = np.exp(x64_ - x64_.max(1, keepdims=True))
    with x64(dtype == np.float64):
        got = np.asarray(ember.jit(softmax)(x))[8:]
        norm, mu = ember.jit(_layernorm_and_mean)(x)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    close(got, e / e.sum(1, keepdims=True), rtol=tol, atol=tol)
    want_mu = x64_.mean(1, keepdims=True)
    close(np.asarray(mu)[8:], want_mu, rtol=tol, atol=tol)
    close(np.asarray(norm)[8:], (x64_ - want_mu) / np.sqrt(x64_.var(1, keepdims=True) + 1e-5),
          rtol=tol * 10, atol=tol * 10)


def test_a_streamed_row_kernel_writes_an_unaligned_output_with_plain_stores(one_tier):
    # The kernel called on an output 4 bytes past a cache line: the same values, nothing
    # written outside the output.
    from tests.backends.cpu.helpers import cpu_executable
    rows = kernel_gen.ROW_STREAM_MIN_BYTES // 4096
    x = rng.standard_normal((rows, 1024)).astype(np.float32)
    want = np.asarray(ember.jit(softmax)(x))
    exe = cpu_executable(softmax, x)
    (step,) = exe.program.steps
    kernel = cpu_exe._ffi.cast("void(*)(char**, long, long)", exe._lib.address(step.name))
    raw = np.full(x.size + 32, 7.0, np.float32)
    start = (-raw.ctypes.data % 64) // 4 + 1  # (one float past a 64-byte boundary)
    out = raw[start:start + x.size]
    bufs = cpu_exe._ffi.new("char*[]", [cpu_exe._ffi.cast("char*", a.ctypes.data)
                                        for a in (x, out)])
    kernel(bufs, 0, rows)
    np.testing.assert_array_equal(out.reshape(x.shape), want)
    assert (raw[:start] == 7.0).all() and (raw[start + x.size:] == 7.0).all()
