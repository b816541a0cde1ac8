"""``lax.top_k`` (the ``ember.top_k`` custom call) compiles to a native kernel
(``topk_kernel``) that gives ``sort_order.top_k``'s results bit for bit: the head of the
stable descending order of XLA's TopK (+0 above -0; a NaN above everything when its sign bit
is clear, below everything when it is set), values copied with their bits."""

import ml_dtypes
import numpy as np
import pytest

import ember
from ember import lax
from ember.backends import get_backend
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu.executable import KernelPlan, LibraryPlan
from ember.backends.cpu.topk_kernel import MAX_K
from ember.compiler.hlo import Builder, Module, Shape
from ember.compiler.sort_order import top_k
from tests.bits import assert_same_bits, top_k_order

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.float16, BF16, np.float32, np.float64]
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
DTYPES = [np.bool_] + INTS + FLOATS


def top_k_module(shape, dt, k):
    m = Module("m")
    b = Builder(m, "main")
    x = b.parameter(0, Shape(np.dtype(dt), shape))
    dims = tuple(shape[:-1]) + (k,)
    out = b.op("custom_call", x, shape=Shape.tuple([Shape(np.dtype(dt), dims),
                                                    Shape(np.int32, dims)]),
               call_target_name="ember.top_k", k=k)
    b.build(b.op("tuple", *(b.op("get_tuple_element", out, index=i) for i in range(2))),
            entry=True)
    return m


def run(x, k, runs=2):
    """Every run's (values, indices) (the first runs may use code compiled quickly, later
    ones the optimized code) and the plan's step types."""
    exe = get_backend("cpu").compile(top_k_module(x.shape, x.dtype, k))
    results = [exe.execute([x]) for _ in range(runs)]
    return results, [type(s) for s in exe.program.steps]


def check(x, k, native=True, runs=2):
    results, steps = run(x, k, runs)
    assert steps == [KernelPlan if native else LibraryPlan]
    want_values, want_indices = top_k(x, k)
    np.testing.assert_array_equal(want_indices, top_k_order(x)[..., :k])
    for values, indices in results:
        assert_same_bits(indices, want_indices)
        assert_same_bits(values, want_values)


def ties(rng, shape, dt):
    """Values from a small range (many ties), with specials for floats."""
    dt = np.dtype(dt)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        lo = 0 if dt.kind == "u" else -3
        x = rng.integers(lo, 4, shape).astype(dt)
        info = np.iinfo(dt)  # (the extremes of the type too)
        x.flat[rng.integers(0, x.size, max(1, x.size // 50))] = info.max
        x.flat[rng.integers(0, x.size, max(1, x.size // 50))] = info.min
        return x
    pool = np.array([np.nan, -np.nan, -0.0, 0.0, 1.0, -1.0, np.inf, -np.inf, 2.5, -2.5],
                    np.float32)
    p = np.array([1, 1, 3, 3, 4, 4, 1, 1, 2, 2], np.float64)
    return rng.choice(pool, shape, p=p / p.sum()).astype(dt)


def random_values(rng, shape, dt):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)
    return rng.standard_normal(shape).astype(dt)


# ----------------------------------------------------------------------------- every dtype


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape, k", [((37,), 5), ((4, 37), 1), ((4, 37), 37), ((3, 100), 8),
                                      ((2, 3, 50), 17), ((6, 1), 1), ((2, 200), MAX_K),
                                      ((3, 130), MAX_K - 1)])
def test_native_top_k_matches_the_library_bit_for_bit(dt, shape, k):
    rng = np.random.default_rng(k + len(shape))
    check(ties(rng, shape, dt), k)
    check(random_values(rng, shape, dt), k)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_rows_long_enough_to_run_on_optimized_code(dt):
    # (Programs of at most 512 elements of work compile without IR optimization.)
    rng = np.random.default_rng(3)
    check(ties(rng, (7, 300), dt), 10, runs=3)
    check(random_values(rng, (5, 1000), dt), 3, runs=3)


# ----------------------------------------------------------------------------- specials


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: np.dtype(d).name)
def test_nans_zeros_and_infinities(dt):
    n = 90
    x = np.zeros((8, n), np.float32)
    x[0, [0, 3, 40, 89]] = np.nan  # (in the first k, the vector part and the tail)
    x[1, [1, 2]] = -np.nan
    x[1, 50] = np.inf
    x[2] = -0.0
    x[2, 1::3] = 0.0
    x[3] = np.nan
    x[4, :45] = -np.inf
    x[4, 45:] = np.inf
    x[5] = np.arange(n)  # ascending: every element enters
    x[6] = -np.arange(n)  # descending: none does after the first k
    x[7, ::2] = -0.0
    x[7, 60] = np.nan
    x[7, 61] = -np.inf
    x = x.astype(dt)
    for k in (1, 4, 16, 33, MAX_K, n):
        check(x, k, native=k <= MAX_K)


def test_nan_payloads_and_signs_are_kept():
    bits = np.array([0x7FC00001, 0xFFC00002, 0x7F800003, 0x80000000, 0x00000000, 0xFF800000,
                     0x7FC00000, 0x3F800000] * 5, np.uint32)
    x = bits.view(np.float32).reshape(2, 20)
    for k in (1, 3, 5, 20):
        check(x, k)
    x64 = np.array([0x7FF8000000000001, 0xFFF0000000000002, 0x8000000000000000, 0,
                    0x7FF8000000000000, 0xFFF0000000000000], np.uint64).view(np.float64)
    for k in (1, 3, 6):
        check(np.tile(x64, (3, 4)), k)


# ----------------------------------------------------------------------------- other paths


def test_k_above_the_bound_and_k_zero_use_the_library():
    rng = np.random.default_rng(0)
    x = ties(rng, (3, 300), np.float32)
    check(x, MAX_K + 1, native=False)
    check(x, 300, native=False)
    check(x, 0, native=False)
    check(np.zeros((3, 0), np.float32), 0, native=False)


def test_no_rows():
    check(np.zeros((0, 5), np.float32), 2)
    check(np.zeros((2, 0, 5), np.int32), 5)


def test_large_top_k_splits_across_threads(monkeypatch):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((512, 1024)).astype(np.float32)
    x[rng.random(x.shape) < 0.01] = np.nan
    exe = get_backend("cpu").compile(top_k_module(x.shape, x.dtype, 8))
    step, = exe.program.steps
    assert step.extent == 512 and step.work >= cpu_exe.PARALLEL_MIN_WORK
    for k in (8, MAX_K):
        threaded, _ = run(x, k, runs=3)
        with monkeypatch.context() as patch:
            patch.setattr(cpu_exe, "PARALLEL_MIN_WORK", 1 << 62)
            single, _ = run(x, k)
        want = top_k(x, k)
        for values, indices in threaded + single:
            assert_same_bits(indices, want[1])
            assert_same_bits(values, want[0])


# ----------------------------------------------------------------------------- through jit


@pytest.mark.parametrize("dt", [np.float32, np.int32, np.float16, np.bool_])
def test_jit_top_k_agrees_with_eager(dt):
    rng = np.random.default_rng(2)
    x = ties(rng, (4, 6, 70), dt)
    for k, axis in ((1, -1), (5, -1), (70, -1), (3, 1), (2, 0)):
        def f(v, k=k, axis=axis):
            return lax.top_k(v, k, axis=axis)
        eager = f(x)
        jitted = ember.jit(f)(x)
        for got, want in zip(jitted, eager):
            assert_same_bits(np.asarray(got), np.asarray(want))


def test_jit_top_k_runs_the_native_kernel():
    x = np.random.default_rng(0).standard_normal((64, 200)).astype(np.float32)
    f = ember.jit(lambda v: lax.top_k(v * 2.0, 8))
    exe = f.lower(x).compile()._executable.executable
    # The custom call is never fused: the multiply is a kernel, the top_k another.
    assert [type(s) for s in exe.program.steps] == [KernelPlan, KernelPlan]
    values, indices = f(x)
    want = top_k(x * 2.0, 8)
    assert_same_bits(np.asarray(indices), want[1])
    assert_same_bits(np.asarray(values), want[0])


def test_grad_through_top_k_under_jit():
    x = np.random.default_rng(4).standard_normal((3, 40)).astype(np.float32)

    def loss(v):
        values, _ = lax.top_k(v, 5)
        return (values * values).sum()
    got = np.asarray(ember.jit(ember.grad(loss))(x))
    want = np.zeros_like(x)
    _, idx = top_k(x, 5)
    np.put_along_axis(want, idx.astype(np.intp), 2 * np.take_along_axis(x, idx, 1), axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ember.grad(loss)(x)), want, rtol=1e-6)
