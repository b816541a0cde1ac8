"""A scatter of one window (``x.at[i].set(row)``, ``x.at[i, j].add(v)``) becomes a
``dynamic_update_slice`` of the operand (algebraic rule ``scatter_one_window``), the form a
loop body updates in place. It must give the scatter's values for every index: a window out
of bounds anywhere is dropped by the scatter, while a slice update would clamp its start."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.compiler.evaluator import evaluate_computation
from ember.compiler.hlo import Builder, Module, Shape
from ember.compiler.pipeline import run_pass
from ember.compiler.verifier import verify_module

S32 = np.dtype(np.int32)


def scatter_module(dims, indexed, window, combiner, dtype, index_dtype=S32):
    """A scatter into an operand of ``dims`` at one index vector over the operand dims
    ``indexed`` (inserted: unit windows), of an update window ``window`` (the sizes of the
    other dims)."""
    m = Module("m")
    rb = Builder(m, "combine")
    cur, upd = rb.parameter(0, Shape(dtype, ())), rb.parameter(1, Shape(dtype, ()))
    region = rb.build(upd if combiner == "set" else rb.op(combiner, cur, upd))
    b = Builder(m, "main")
    x = b.parameter(0, Shape(dtype, dims))
    i = b.parameter(1, Shape(index_dtype, (len(indexed),)))
    u = b.parameter(2, Shape(dtype, window))
    out = b.op("scatter", x, i, u, update_window_dims=tuple(range(len(window))),
               inserted_window_dims=tuple(indexed), scatter_dims_to_operand_dims=tuple(indexed),
               input_batching_dims=(), scatter_indices_batching_dims=(), index_vector_dim=0,
               indices_are_sorted=True, unique_indices=True, calls=[region],
               shape=Shape(dtype, dims))
    b.build(out, entry=True)
    return m


CASES = [  # (operand dims, indexed dims, update window, combiner, dtype)
    ((7, 3), (0,), (3,), "set", np.float32),
    ((7, 3), (0,), (3,), "add", np.float32),
    ((5, 4, 3), (0, 2), (4,), "maximum", np.int32),
    ((6, 5), (1,), (6,), "multiply", np.float64),
    ((9,), (0,), (), "set", np.int8),
    ((4, 6), (0, 1), (), "subtract", np.float32),
]


@pytest.mark.parametrize("dims, indexed, window, combiner, dtype", CASES)
def test_one_window_scatter_becomes_a_slice_update_with_the_same_values(
        dims, indexed, window, combiner, dtype):
    rng = np.random.default_rng(len(dims) * 7 + len(indexed))
    m = scatter_module(dims, indexed, window, combiner, np.dtype(dtype))
    x = (rng.standard_normal(dims) * 10).astype(dtype)
    u = (rng.standard_normal(window) * 10).astype(dtype)
    index_sets = [np.array(v, np.int32) for v in
                  np.ndindex(*[dims[d] + 4 for d in indexed])]  # in bounds and past the end
    index_sets += [np.full(len(indexed), -1, np.int32), np.full(len(indexed), -9, np.int32)]
    wants = [evaluate_computation(m.entry, [x, i, u]) for i in index_sets]
    assert run_pass(m, "algebraic_simplifier")
    run_pass(m, "dce")
    verify_module(m)
    opcodes = [inst.opcode for inst in m.entry.instructions]
    assert "scatter" not in opcodes and "dynamic_update_slice" in opcodes
    for i, want in zip(index_sets, wants):
        np.testing.assert_array_equal(evaluate_computation(m.entry, [x, i, u]), want)


def test_several_windows_stay_a_scatter():
    m = Module("m")
    rb = Builder(m, "combine")
    rb.parameter(0, Shape(np.dtype(np.float32), ()))
    rb.build(rb.parameter(1, Shape(np.dtype(np.float32), ())))
    b = Builder(m, "main")
    x = b.parameter(0, Shape(np.dtype(np.float32), (5, 2)))
    i = b.parameter(1, Shape(S32, (2, 1)))
    u = b.parameter(2, Shape(np.dtype(np.float32), (2, 2)))
    b.build(b.op("scatter", x, i, u, update_window_dims=(1,), inserted_window_dims=(0,),
                 scatter_dims_to_operand_dims=(0,), input_batching_dims=(),
                 scatter_indices_batching_dims=(), index_vector_dim=1,
                 indices_are_sorted=False, unique_indices=False, calls=[m.computations[0]],
                 shape=Shape(np.dtype(np.float32), (5, 2))), entry=True)
    assert not run_pass(m, "algebraic_simplifier")


def test_row_updates_in_a_fori_loop_match_numpy():
    """The program this serves: each step sets row i from row i - 1 (written in place)."""
    x = np.random.default_rng(0).standard_normal((64, 16)).astype(np.float32)

    def f(x):
        return lax.fori_loop(1, 64, lambda i, x: x.at[i].set(x[i - 1] * 0.5 + 1.0), x)
    want = x.copy()
    for i in range(1, 64):
        want[i] = want[i - 1] * np.float32(0.5) + np.float32(1.0)
    np.testing.assert_allclose(np.asarray(ember.jit(f)(x)), want, rtol=1e-6)
    # out-of-bounds rows are dropped, negative ones wrap (JAX's indexing), as NumPy would not
    g = ember.jit(lambda x, i: x.at[i].add(1.0))
    for i in (0, 63, 64, 100, -1, -64, -65):
        got = np.asarray(g(x, np.int32(i)))
        expected = x.copy()
        if -64 <= i < 64:
            expected[i] += 1.0
        np.testing.assert_array_equal(got, expected)
    assert jnp.asarray(x).at[3].set(7.0)[3, 0] == 7.0
