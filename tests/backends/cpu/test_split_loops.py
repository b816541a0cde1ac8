"""Loop nests whose minor dim indexes a pad or a concatenate run their inner loop in pieces
with constant bounds (``kernel_gen._minor_splits``), so the bounds checks fold away and the
reads are contiguous vectors. The pieces must cover the dim exactly once, on one thread or
several, whatever the padding (negative, interior) or the ops between."""

import glob
import os

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu.kernel_gen import MAX_MINOR_PIECES, _minor_splits
from ember.compiler.hlo import Builder, Module, Shape
from tests.backends.cpu.helpers import run_against_evaluator

F32 = np.dtype(np.float32)


def pad_module(shape, low, high, interior, then=None, dtype=F32):
    m = Module("m")
    b = Builder(m, "main")
    x = b.parameter(0, Shape(dtype, shape))
    x = b.op("negate", x) if dtype.kind == "f" else x
    y = b.op("pad", x, b.constant(np.asarray(7, dtype)), edge_padding_low=tuple(low),
             edge_padding_high=tuple(high), interior_padding=tuple(interior))
    if then == "transpose":
        y = b.op("transpose", y, permutation=tuple(reversed(range(len(shape)))))
    elif then == "slice":
        dims = y.dims
        y = b.op("slice", y, start_indices=(0,) * (len(dims) - 1) + (1,),
                 limit_indices=tuple(dims[:-1]) + (dims[-1],), strides=(1,) * len(dims))
    y = b.op("add", y, y)
    b.build(y, entry=True)
    return m


@pytest.mark.parametrize("seed", range(40))
def test_padded_fusions_match_the_evaluator(seed):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 4))
    shape = [int(d) for d in rng.integers(1, 40, rank)]
    low = [int(v) for v in rng.integers(-3, 5, rank)]
    high = [int(v) for v in rng.integers(-3, 5, rank)]
    interior = [int(v) for v in rng.integers(0, 2, rank)] if seed % 4 == 0 else [0] * rank
    for d in range(rank):  # (every result dim at least 1 long)
        while (shape[d] - 1) * (interior[d] + 1) + 1 + low[d] + high[d] < 1:
            low[d] += 1
    dtype = np.dtype([np.float32, np.float64, np.int32, np.uint8][seed % 4])
    then = [None, "transpose", "slice"][seed % 3]
    x = (rng.standard_normal(shape) * 50).astype(dtype)
    run_against_evaluator(pad_module(shape, low, high, interior, then, dtype), [x])


@pytest.mark.parametrize("rank", [1, 2])
def test_split_pieces_across_threads_match_one_thread(rank, monkeypatch):
    shape = (300_001,) if rank == 1 else (700, 900)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    low, high = [3] * rank, [-2] * rank
    threaded, steps = run_against_evaluator(pad_module(shape, low, high, [0] * rank), [x])
    assert steps[0].extent > 1
    monkeypatch.setattr(cpu_exe, "PARALLEL_MIN_WORK", 1 << 62)
    single, _ = run_against_evaluator(pad_module(shape, low, high, [0] * rank), [x])
    np.testing.assert_array_equal(threaded, single)


def test_minor_concatenates_and_pads_in_jit_match_numpy():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 100)).astype(np.float32)
    y = rng.standard_normal((64, 37)).astype(np.float32)
    f = ember.jit(lambda a, b: jnp.concatenate([a, jnp.pad(b, ((0, 0), (2, 3))), a[:, :5]],
                                               axis=1) * 2.0)
    np.testing.assert_array_equal(f(x, y), np.concatenate(
        [x, np.pad(y, ((0, 0), (2, 3))), x[:, :5]], axis=1) * 2.0)
    g = ember.jit(lambda a: lax.pad(a, 1.5, ((1, -2, 0), (4, -3, 0))).T + 1.0)
    np.testing.assert_array_equal(g(x), np.pad(x, ((1, 0), (4, 0)), constant_values=1.5)[
        :-2, :-3].T + 1.0)


def test_split_points_follow_the_minor_index_through_other_ops():
    m = pad_module((4, 10), (1, 2), (0, 3), (0, 0))
    root = m.entry.root
    assert _minor_splits([root], root.dims[-1]) == [2, 12]
    # Through a slice starting at 1 of the padded dim: the points move left by one.
    m = pad_module((4, 10), (1, 2), (0, 3), (0, 0), then="slice")
    root = m.entry.root
    assert _minor_splits([root], root.dims[-1]) == [1, 11]
    # Interior padding is not split; a transposed pad splits at the other dim's points.
    m = pad_module((4, 10), (1, 2), (0, 3), (0, 1))
    assert _minor_splits([m.entry.root], m.entry.root.dims[-1]) == []
    m = pad_module((4, 10), (1, 2), (0, 3), (0, 0), then="transpose")
    assert _minor_splits([m.entry.root], m.entry.root.dims[-1]) == [1]


def test_too_many_pieces_are_not_split():
    m = Module("m")
    b = Builder(m, "main")
    xs = [b.parameter(i, Shape(F32, (3, 2))) for i in range(MAX_MINOR_PIECES + 1)]
    root = b.op("negate", b.op("concatenate", *xs, dimension=1))
    b.build(root, entry=True)
    assert _minor_splits([root], root.dims[-1]) == []
    assert _minor_splits([root.operands[0].operands[0]], 2) == []


def test_a_padded_loop_reads_vectors_not_gathers(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))
    x = np.random.default_rng(2).standard_normal((256, 512)).astype(np.float32)
    np.testing.assert_array_equal(ember.jit(lambda a: jnp.pad(a, 2) * 3.0)(x),
                                  np.pad(x, 2) * 3.0)
    optimized = [open(p).read() for p in glob.glob(os.path.join(tmp_path, "*.llvm.opt.ll"))]
    assert optimized and all("masked.gather" not in text for text in optimized)
    assert any("load <" in text for text in optimized)


def test_fusions_with_outputs_of_several_shapes_split_their_common_leading_dim():
    # An associative scan's down-sweep levels are fusions whose outputs have different
    # shapes sharing a leading dim ((16, 63, 128), (16, 1, 128), (16, 64, 2, 128)): each
    # kernel takes ranges of that dim, so it runs on several threads; the results must be
    # the sequential recurrence's.
    rng = np.random.default_rng(0)
    a = rng.uniform(0.5, 1.0, (16, 512, 32)).astype(np.float32)
    b = rng.standard_normal((16, 512, 32)).astype(np.float32)

    def linear_recurrence(a, b):
        return lax.associative_scan(lambda l, r: (l[0] * r[0], r[0] * l[1] + r[1]), (a, b),
                                    axis=1)[1]

    f = ember.jit(linear_recurrence)
    got = np.asarray(f(a, b))
    want = np.empty_like(b, dtype=np.float64)
    h = np.zeros((16, 32))
    for t in range(512):
        h = a[:, t] * h + b[:, t]
        want[:, t] = h
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    steps = f._cache.last.executable.executable.program.steps
    shared = [s for s in cpu_exe.nested_steps(steps) if type(s) is cpu_exe.KernelPlan and
              len({r.dims for r in s.outputs}) > 1 and len({r.dims[0] for r in s.outputs}) == 1]
    assert shared and all(s.extent == s.outputs[0].dims[0] for s in shared)
