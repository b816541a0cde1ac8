"""A fusion whose root is a concatenate writes each operand's slab with a loop nest of its
own (not a pick among every operand per element), a call the part of each slab within its
range of rows; it must agree exactly with the evaluator, on one thread or several."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu.executable import KernelPlan
from ember.compiler.hlo import Builder, Module, Shape
from tests.backends.cpu.helpers import run_against_evaluator


def concat_module(pieces, dim, unary=None):
    m = Module("m")
    b = Builder(m, "main")
    xs = [b.parameter(i, Shape(np.dtype(p.dtype), p.shape)) for i, p in enumerate(pieces)]
    if unary is not None:
        xs = [b.op(unary, x) for x in xs]
    b.build(b.op("concatenate", *xs, dimension=dim), entry=True)
    return m


run_both = run_against_evaluator


@pytest.mark.parametrize("seed", range(30))
def test_concatenate_kernels_match_the_evaluator(seed):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 4))
    dims = [int(d) for d in rng.integers(1, 5, rank)]
    dim = int(rng.integers(0, rank))
    count = int(rng.choice([2, 3, 9, 20]))
    pieces = []
    for _ in range(count):
        shape = list(dims)
        shape[dim] = int(rng.integers(0, 4))  # (empty pieces too)
        pieces.append(rng.standard_normal(shape).astype(np.float32))
    unary = ["negate", "abs", None][seed % 3]
    _, steps = run_both(concat_module(pieces, dim, unary), pieces)
    if any(p.size for p in pieces):
        assert [type(s) for s in steps] == [KernelPlan]


@pytest.mark.parametrize("dim", [0, 1])
def test_large_concatenates_split_across_threads(dim, monkeypatch):
    rng = np.random.default_rng(0)
    shapes = [(300, 500), (700, 500), (1, 500)] if dim == 0 else [(900, 3), (900, 400),
                                                                   (900, 250)]
    pieces = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    threaded, steps = run_both(concat_module(pieces, dim, "negate"), pieces)
    assert [type(s) for s in steps] == [KernelPlan]
    # The work items are the rows of dim 0, split among the pieces stacked along it (whole
    # pieces as items left the (700, 500) one to one thread).
    assert steps[0].extent == (1001 if dim == 0 else shapes[0][0])
    monkeypatch.setattr(cpu_exe, "PARALLEL_MIN_WORK", 1 << 62)
    single, _ = run_both(concat_module(pieces, dim, "negate"), pieces)
    np.testing.assert_array_equal(threaded, single)


def test_stacking_many_arrays_under_jit():
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((16, 8)).astype(np.float32) for _ in range(40)]
    stacked = ember.jit(lambda xs: jnp.stack([jnp.sin(x) for x in xs], axis=1))(xs)
    np.testing.assert_allclose(np.asarray(stacked), np.stack([np.sin(x) for x in xs], axis=1),
                               rtol=1e-6, atol=1e-6)
    total = ember.jit(lambda xs: jnp.stack(xs).sum(0))(xs)
    np.testing.assert_allclose(np.asarray(total), np.sum(xs, axis=0), rtol=1e-5, atol=1e-5)
