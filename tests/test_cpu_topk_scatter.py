"""The CPU backend's native top_k for large ``k`` and its scatter kernels: the results are
the library routines' (``sort_order.top_k``; the interpreter's scatter) bit for bit, and
JAX's."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends import get_backend
from ember.backends.cpu.executable import KernelPlan, LibraryPlan
from ember.backends.cpu.topk_kernel import LARGEST_K, MAX_K
from ember.compiler.sort_order import top_k
from tests.backends.cpu.test_topk_kernel import top_k_module
from tests.bits import assert_same_bits, top_k_order

# (NaN updates: the interpreter's NumPy min/max warn)
pytestmark = pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")


def check_top_k(x, k, native):
    exe = get_backend("cpu").compile(top_k_module(x.shape, x.dtype, k))
    assert [type(s) for s in exe.program.steps] == [KernelPlan if native else LibraryPlan]
    want_values, want_indices = top_k(x, k)
    np.testing.assert_array_equal(want_indices, top_k_order(x)[..., :k])
    for _ in range(2):  # (quickly compiled code, then the optimized code)
        values, indices = exe.execute([x])
        assert_same_bits(indices, want_indices)
        assert_same_bits(values, want_values)


def specials(rng, shape, dt):
    """Random values with many ties, NaNs of both signs, infinities and zeros of both signs."""
    pool = np.array([np.nan, -np.nan, -0.0, 0.0, 1.0, -1.0, np.inf, -np.inf], np.float32)
    x = rng.standard_normal(shape).astype(np.float32)
    hit = rng.random(shape) < 0.05
    x[hit] = rng.choice(pool, int(hit.sum()))
    return x.astype(dt)


# ----------------------------------------------------------------------------- top_k


@pytest.mark.parametrize("k", [MAX_K + 1, 100, 128, 129, 300, LARGEST_K])
def test_large_k_on_long_rows_is_native_and_exact(k):
    rng = np.random.default_rng(k)
    shape = (2, 20000) if k < 256 else (1, 100000)  # (long enough rows for the kernel)
    check_top_k(specials(rng, shape, np.float32), k, native=True)


@pytest.mark.parametrize("dt", [np.float64, np.int64, np.int8, np.float16])
def test_large_k_other_dtypes(dt):
    rng = np.random.default_rng(1)
    x = specials(rng, (3, 8000), np.float64) * 100 if np.dtype(dt).kind == "f" else \
        rng.integers(-100, 100, (3, 8000))
    check_top_k(x.astype(dt), 100, native=True)


def test_large_k_ordered_rows_ties_and_nans():
    n = 20000
    x = np.zeros((6, n), np.float32)
    x[0] = np.arange(n)  # ascending: every element enters
    x[1] = -np.arange(n)  # descending: none enters after the first k
    x[2] = -0.0
    x[2, 1::3] = 0.0  # (+0 before -0, then positions)
    x[3] = np.nan
    x[3, ::7] = -np.nan
    x[4, : n // 2] = -np.inf
    x[4, n // 2:] = np.inf
    x[5] = np.arange(n) % 5  # (ties, each value many times)
    x[5, [10, 2000, n - 1]] = np.nan
    for k in (65, 200):
        check_top_k(x, k, native=True)


def test_large_k_on_short_rows_keeps_the_library():
    rng = np.random.default_rng(2)
    # (rows of 1000 with k=100: the insertions would cost more than the library's pass)
    check_top_k(rng.standard_normal((4, 1000)).astype(np.float32), 100, native=False)
    check_top_k(rng.standard_normal((1, 70000)).astype(np.float32), LARGEST_K + 1,
                native=False)


def test_large_k_under_jit_matches_jax_and_eager(jax):
    rng = np.random.default_rng(3)
    x = specials(rng, (3, 50000), np.float32)
    values, indices = ember.jit(lambda v: lax.top_k(v, 100))(x)
    want_values, want_indices = jax.lax.top_k(x, 100)
    np.testing.assert_array_equal(np.asarray(indices), np.asarray(want_indices))
    assert_same_bits(np.asarray(values), np.asarray(want_values))
    eager = lax.top_k(x, 100)
    assert_same_bits(np.asarray(indices), np.asarray(eager[1]))


# ----------------------------------------------------------------------------- scatter

SORTED = np.repeat(np.arange(0, 40, 3), 7).astype(np.int32)  # (runs of 7, gaps)
# Runs broken by out-of-bounds, negative and repeated indices (dropped ones inside runs).
MIXED = np.array([2, 2, 99, 2, 5, 5, -1, -1, 39, 0, 0, -41, 7, 7, 40, 7, 3], np.int32)
RANDOM = np.random.default_rng(5).integers(-45, 45, 500).astype(np.int32)
UPDATES = {
    "set": lambda x, i, u, mode: x.at[i].set(u, mode=mode),
    "add": lambda x, i, u, mode: x.at[i].add(u, mode=mode),
    "mul": lambda x, i, u, mode: x.at[i].multiply(u, mode=mode),
    "min": lambda x, i, u, mode: x.at[i].min(u, mode=mode),
    "max": lambda x, i, u, mode: x.at[i].max(u, mode=mode),
}


def float_values(rng, n, dt=np.float32):
    u = rng.standard_normal(n).astype(np.float32)
    u[rng.random(n) < 0.05] = np.nan
    u[rng.random(n) < 0.05] = -0.0
    u[rng.random(n) < 0.03] = np.inf
    return u.astype(dt)


def against_interpreter(fn, *args):
    got = ember.jit(fn, backend="cpu")(*args)
    want = ember.jit(fn, backend="interpreter")(*args)
    assert_same_bits(np.asarray(got), np.asarray(want))
    return np.asarray(got)


@pytest.mark.parametrize("op", sorted(UPDATES))
@pytest.mark.parametrize("mode", [None, "clip", "drop", "fill"])
@pytest.mark.parametrize("indices", ["sorted", "mixed", "random"])
def test_scalar_scatters_match_the_interpreter(op, mode, indices):
    i = {"sorted": SORTED, "mixed": MIXED, "random": RANDOM}[indices]
    rng = np.random.default_rng(len(i))
    x = float_values(rng, 40)
    u = float_values(rng, len(i))
    if op == "mul":
        u = np.where(np.isfinite(u), 1 + u / 8, u).astype(np.float32)
    against_interpreter(lambda x, i, u: UPDATES[op](x, i, u, mode), x, i, u)


def test_scatter_add_adds_in_update_order_like_numpy():
    rng = np.random.default_rng(6)
    x = rng.standard_normal(40).astype(np.float32)
    for i in (SORTED, RANDOM % 40):
        u = (rng.standard_normal(len(i)) * 10.0 ** rng.integers(-6, 6, len(i))).astype(
            np.float32)
        want = x.copy()
        np.add.at(want, i, u)  # (unbuffered: one add at a time, in order)
        got = against_interpreter(lambda x, i, u: x.at[i].add(u), x, i, u)
        assert_same_bits(got, want)


@pytest.mark.parametrize("dt", [np.float16, "bfloat16", np.int32, np.uint8])
def test_scatter_runs_round_every_combine(dt):
    # (a run of many small addends: rounding only at the end would give another sum)
    rng = np.random.default_rng(7)
    dt = jnp.dtype(dt)
    i = np.sort(rng.integers(0, 5, 3000)).astype(np.int32)
    if dt.kind == "f":
        x, u = np.full(5, 256, dt), (rng.random(3000) * 0.9).astype(dt)
    else:
        x, u = np.full(5, 7, dt), rng.integers(0, 120, 3000).astype(dt)  # (wraps)
    for op in ("add", "mul", "max"):
        against_interpreter(lambda x, i, u, op=op: UPDATES[op](x, i, u, None), x, i, u)


def test_scatter_set_of_bools_and_float64(x64):
    i = MIXED
    x = np.zeros(40, np.bool_)
    u = np.arange(len(i)) % 3 == 0
    against_interpreter(lambda x, i, u: x.at[i].set(u), x, i, u)
    against_interpreter(lambda x, i, u: x.at[i].max(u), x, i, u)
    rng = np.random.default_rng(8)
    x, u = float_values(rng, 40, np.float64), float_values(rng, len(i), np.float64)
    got = against_interpreter(lambda x, i, u: x.at[i].add(u), x, i, u)
    assert got.dtype == np.float64


def test_scatter_edge_shapes():
    rng = np.random.default_rng(9)
    x = float_values(rng, 40)
    add = UPDATES["add"]
    against_interpreter(lambda x, i, u: add(x, i, u, None), x, np.zeros(0, np.int32),
                        np.zeros(0, np.float32))  # (no updates)
    against_interpreter(lambda x, i, u: add(x, i, u, None), x, np.array([3], np.int32),
                        np.ones(1, np.float32))  # (one update)
    against_interpreter(lambda x, i, u: add(x, i, u, None), x[:1], MIXED % 2,
                        float_values(rng, len(MIXED)))  # (an operand of one element)
    # A scalar update broadcast to every index, and an operand of no elements.
    against_interpreter(lambda x, i: x.at[i].add(2.5), x, RANDOM)
    against_interpreter(lambda x, i, u: x.at[i].add(u), np.zeros(0, np.float32),
                        np.array([0, -1], np.int32), np.ones(2, np.float32))


def test_scatter_of_elements_of_a_matrix_and_transposed_updates():
    rng = np.random.default_rng(10)
    x = float_values(rng, 48).reshape(6, 8)
    i = rng.integers(-7, 7, (5, 9)).astype(np.int32)
    j = np.sort(rng.integers(0, 9, (5, 9)), axis=None).reshape(5, 9).astype(np.int32)
    u = float_values(rng, 45).reshape(9, 5)
    against_interpreter(lambda x, i, j, u: x.at[i, j].add(u.T), x, i, j, u)
    against_interpreter(lambda x, i, j, u: x.at[i, j].max(u.T, mode="clip"), x, i, j, u)


def test_vmapped_scatter_add():
    rng = np.random.default_rng(12)
    x = float_values(rng, 120).reshape(3, 40)
    i = rng.integers(0, 40, (3, 50)).astype(np.int32)
    u = float_values(rng, 150).reshape(3, 50)
    got = against_interpreter(ember.vmap(lambda x, i, u: x.at[i].add(u)), x, i, u)
    for r in range(3):
        want = x[r].copy()
        np.add.at(want, i[r], u[r])
        assert_same_bits(got[r], want)


@pytest.mark.parametrize("sorted_ids", [False, True])
def test_segment_sum_matches_jax(jax, sorted_ids):
    rng = np.random.default_rng(13)
    seg = rng.integers(-2, 102, 20000).astype(np.int32)  # (some out of range: dropped)
    seg = np.sort(seg) if sorted_ids else seg
    x = rng.standard_normal(20000).astype(np.float32)

    def f(ops, x, s):
        return ops.segment_sum(x, s, num_segments=100, indices_are_sorted=sorted_ids)
    got = ember.jit(lambda x, s: f(ember.ops, x, s))(x, seg)
    want = jax.jit(lambda x, s: f(jax.ops, x, s))(x, seg)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-6, atol=2e-5)
    ref = np.zeros(100, np.float32)
    keep = (seg >= 0) & (seg < 100)
    np.add.at(ref, seg[keep], x[keep])
    assert_same_bits(np.asarray(got), ref)
