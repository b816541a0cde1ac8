"""The CPU backend's native top_k for large ``k`` and its scatter kernels: the results are
the library routines' (``sort_order.top_k``; the interpreter's scatter) bit for bit, and
JAX's."""

import numpy as np
import pytest

import ember
from ember import lax
from ember.backends import get_backend
from ember.backends.cpu.executable import KernelPlan, LibraryPlan
from ember.backends.cpu.topk_kernel import LARGEST_K, MAX_K
from ember.compiler.hlo import Builder, Module, Shape
from ember.compiler.sort_order import top_k
from tests.bits import assert_same_bits, top_k_order


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
