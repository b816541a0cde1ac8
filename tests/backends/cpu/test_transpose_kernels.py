"""Loop nests of fusions holding a transpose that moves the minor dim run in square tiles
(``kernel_gen._tiled_nest``): a different loop order, the same results as the evaluator,
on one thread or several, for every permutation, ragged tile edges included."""

import itertools

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu import kernel_gen
from ember.compiler.hlo import Builder, Module, Shape
from ember.compiler.pipeline import optimize
from tests.backends.cpu.helpers import optimized, run_against_evaluator


def transpose_module(shape, perm, dtype=np.float32, with_add=True):
    m = Module("m")
    b = Builder(m, "main")
    x = b.parameter(0, Shape(np.dtype(dtype), shape))
    t = b.op("transpose", x, permutation=tuple(perm))
    if with_add:  # (elementwise work fused after the transpose: a loop fusion)
        t = b.op("add", t, b.op("negate", t))
        t = b.op("multiply", t, b.op("transpose", b.op("exponential", x),
                                      permutation=tuple(perm)))
    b.build(t, entry=True)
    return m


def run_both(m, args):
    return run_against_evaluator(m, args)[0]


def test_only_transposes_that_move_the_minor_dim_are_tiled():
    def fused(shape, perm):
        m = transpose_module(shape, perm)
        optimize(m)
        comp = next(i for i in m.entry.instructions if i.opcode == "fusion").calls[0]
        return kernel_gen._transposed_dim(comp, comp.root.dims, [comp.root])
    assert fused((64, 32), (1, 0)) == 0
    assert fused((4, 64, 32), (2, 0, 1)) == 0  # (the operand's minor dim leads the output)
    assert fused((4, 64, 32), (0, 2, 1)) == 1
    assert fused((4, 64, 32), (1, 0, 2)) is None  # (the minor dim stays: rows move whole)
    assert fused((64, 3), (1, 0)) is None  # (too short to tile)


def _fusion_of(fn, *args):
    return next(i for i in optimized(fn, *args).entry.instructions
                if i.opcode == "fusion").calls[0]


def test_transposes_whose_reads_stay_contiguous_are_not_tiled():
    # A transposed outer product (vmap(grad)'s per-example weight gradients) reads both
    # factors contiguously or not at all along the output's minor dim: tiling it took 15x
    # the time of the plain nest.
    g, x = np.ones((16, 32), np.float32), np.ones((16, 48), np.float32)
    comp = _fusion_of(lambda g, x: jnp.swapaxes(g[:, :, None] * x[:, None, :], 1, 2), g, x)
    assert any(i.opcode == "transpose" for i in comp.instructions)
    assert kernel_gen._transposed_dim(comp, comp.root.dims, [comp.root]) is None
    # The same product with one factor read across its rows along the minor dim is tiled.
    comp = _fusion_of(lambda a, x: jnp.swapaxes(a.T[:, :, None] * x[:, None, :], 1, 2),
                      np.ones((32, 16), np.float32), x)
    assert kernel_gen._transposed_dim(comp, comp.root.dims, [comp.root]) is not None


def test_strided_reads_are_found_through_shape_ops():
    def sh(*dims):
        return Shape(np.dtype(np.float32), dims)

    def strided(shape, fn):
        m = Module("m")
        b = Builder(m, "main")
        x = b.parameter(0, Shape(np.dtype(np.float32), shape))
        return kernel_gen._strided_minor_read([fn(b, x)])
    t = lambda b, x: b.op("transpose", x, permutation=(1, 0))  # noqa: E731
    assert strided((8, 16), t)
    assert not strided((8, 16), lambda b, x: b.op("negate", x))
    assert not strided((8, 1), t)  # (a column: one element per row, contiguous)
    # A reshape splitting the minor dim keeps the minor dim minor; a transposed one does not.
    assert not strided((8, 16), lambda b, x: b.op("reshape", x, shape=sh(8, 4, 4)))
    assert strided((8, 16), lambda b, x: b.op("reshape", t(b, x), shape=sh(4, 4, 8)))
    assert not strided((8, 16), lambda b, x: b.op(
        "broadcast_in_dim", b.op("slice", x, start_indices=(0, 0), limit_indices=(8, 1),
                                 strides=(1, 1)), shape=sh(8, 64), broadcast_dimensions=(0, 1)))
    assert not strided((8,), lambda b, x: b.op(
        "broadcast_in_dim", x, shape=sh(8, 64), broadcast_dimensions=(0,)))
    assert not strided((8,), lambda b, x: b.op(
        "broadcast_in_dim", x, shape=sh(64, 8), broadcast_dimensions=(1,)))


@pytest.mark.parametrize("shape", [(37, 53), (8, 8), (9, 130), (5, 19, 23), (3, 4, 17, 29)])
def test_every_permutation_matches_the_evaluator(shape):
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    for perm in itertools.permutations(range(len(shape))):
        run_both(transpose_module(shape, perm), [x])


@pytest.mark.parametrize("dtype", [np.float64, np.int8, np.int64, np.bool_])
def test_tiled_transposes_of_other_dtypes(dtype):
    x = (np.random.default_rng(3).standard_normal((45, 70)) * 50).astype(dtype)
    got = run_both(transpose_module(x.shape, (1, 0), dtype, with_add=False), [x])
    np.testing.assert_array_equal(got, x.T)


def test_threaded_and_single_threaded_tiles_agree(monkeypatch):
    x = np.random.default_rng(4).standard_normal((1030, 777)).astype(np.float32)
    threaded = run_both(transpose_module(x.shape, (1, 0)), [x])
    monkeypatch.setattr(cpu_exe, "PARALLEL_MIN_WORK", 1 << 62)
    single = run_both(transpose_module(x.shape, (1, 0)), [x])
    np.testing.assert_array_equal(threaded, single)


def test_transposes_under_jit():
    x = np.random.default_rng(5).standard_normal((6, 50, 90)).astype(np.float32)
    out = ember.jit(lambda a: jnp.moveaxis(a, 2, 0) * 2.0 + 1.0)(x)
    np.testing.assert_array_equal(np.asarray(out), np.moveaxis(x, 2, 0) * np.float32(2.0)
                                  + np.float32(1.0))
    y = x[0]
    out = ember.jit(lambda a: a[:, :50] + a[:, :50].T)(y)
    np.testing.assert_array_equal(np.asarray(out), y[:, :50] + y[:, :50].T)
