"""Loop nests whose minor dim is read by pads with interior padding run their inner loop in
groups of the pads' grid step (``kernel_gen._minor_interleave``, ``Loops.nest``): each
element of a group knows which pads read their operand there and which give their padding
(an associative scan's interleave, and the levels of its gradient). The groups and the rest
after them must cover the dim exactly once, whatever the padding or the ops between."""

import glob
import os

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu.kernel_gen import MAX_INTERLEAVE, _minor_interleave
from ember.compiler.hlo import Builder, Module, Shape
from tests.backends.cpu.helpers import run_against_evaluator

F32 = np.dtype(np.float32)


def _pad(b, x, fill, low, high, interior):
    """``pad`` of ``x``'s minor dim (the others untouched)."""
    rank = x.shape.rank
    return b.op("pad", x, fill, edge_padding_low=(0,) * (rank - 1) + (low,),
                edge_padding_high=(0,) * (rank - 1) + (high,),
                interior_padding=(0,) * (rank - 1) + (interior,))


def _minor_slice(b, x, length):
    dims = x.dims
    return b.op("slice", x, start_indices=(0,) * len(dims),
                limit_indices=tuple(dims[:-1]) + (length,), strides=(1,) * len(dims))


def interleave_module(lead, sizes, pads, dtype=F32, nested=None):
    """``sum(pad(x_k))`` over the minor dim, each padded operand sliced to the shortest;
    ``nested`` (low, high, interior) pads the sum again after adding a parameter."""
    m = Module("m")
    b = Builder(m, "main")
    fill = b.constant(np.asarray(0, dtype))
    padded = []
    for k, (n, (low, high, interior)) in enumerate(zip(sizes, pads)):
        x = b.parameter(k, Shape(dtype, tuple(lead) + (n,)))
        x = b.op("multiply", x, x)
        padded.append(_pad(b, x, fill, low, high, interior))
    length = min(p.dims[-1] for p in padded)
    total = _minor_slice(b, padded[0], length)
    for p in padded[1:]:
        total = b.op("add", total, _minor_slice(b, p, length))
    if nested is not None:
        y = b.parameter(len(sizes), Shape(dtype, tuple(lead) + (length,)))
        total = _pad(b, b.op("subtract", total, y), fill, *nested)
    b.build(b.op("add", total, total), entry=True)
    return m


def _random_pads(rng, n):
    interior = int(rng.integers(1, 4))
    return (int(rng.integers(-2, 4)), int(rng.integers(-2, 4)), interior)


@pytest.mark.parametrize("seed", range(24))
def test_interleaved_fusions_match_the_evaluator(seed):
    rng = np.random.default_rng(seed)
    lead = [int(d) for d in rng.integers(1, 6, int(rng.integers(0, 3)))]
    count = int(rng.integers(1, 4))
    sizes = [int(n) for n in rng.integers(2, 30, count)]
    pads = [_random_pads(rng, n) for n in sizes]
    if seed % 3 == 0:  # (every operand on one grid: the interleave of an associative scan)
        pads = [(low, high, pads[0][2]) for low, high, _ in pads]
    for k, n in enumerate(sizes):  # (every padded operand at least 1 long)
        low, high, interior = pads[k]
        while (n - 1) * (interior + 1) + 1 + low + high < 1:
            low += 1
        pads[k] = (low, high, interior)
    dtype = np.dtype([np.float32, np.float64, np.int32][seed % 3])
    nested = (int(rng.integers(-1, 3)), int(rng.integers(-1, 3)), 1) if seed % 2 else None
    m = interleave_module(lead, sizes, pads, dtype, nested)
    params = m.entry.parameters
    args = [(rng.standard_normal(p.dims) * 10).astype(dtype) for p in params]
    run_against_evaluator(m, args)


def test_an_associative_scans_interleave_runs_in_groups():
    # out[2i] = a[i], out[2i + 1] = b[i]: the group step is 2, and the loop's code asks
    # no division or remainder to tell which operand an element reads
    m = interleave_module((3,), (8, 8), [(0, 1, 1), (1, 0, 1)])
    assert _minor_interleave([m.entry.root], m.entry.root.dims[-1]) == 2
    a = np.arange(24, dtype=np.float32).reshape(3, 8)
    b = -np.arange(24, dtype=np.float32).reshape(3, 8)
    got, _ = run_against_evaluator(m, [a, b])
    want = np.empty((3, 16), np.float32)
    want[:, 0::2], want[:, 1::2] = a * a, b * b
    np.testing.assert_array_equal(got, 2 * want)


def test_group_steps_multiply_through_nested_pads_and_stop_at_the_limit():
    m = interleave_module((3,), (8, 8), [(0, 1, 1), (1, 0, 1)], nested=(0, 1, 1))
    assert _minor_interleave([m.entry.root], m.entry.root.dims[-1]) == 4
    # Grids of 2 and 3 on one dim: a group of 6 holds both.
    m = interleave_module((3,), (9, 6), [(0, 0, 1), (0, 2, 2)])
    assert _minor_interleave([m.entry.root], m.entry.root.dims[-1]) == 6
    # A nested grid past the limit leaves the group at the top grid; a top grid past it,
    # no groups.
    m = interleave_module((3,), (8, 8), [(0, 1, MAX_INTERLEAVE)] * 2, nested=(0, 1, 1))
    assert _minor_interleave([m.entry.root], m.entry.root.dims[-1]) == 2
    m = interleave_module((3,), (8, 8), [(0, 1, 1), (1, 0, 1)], nested=(0, 0, MAX_INTERLEAVE))
    assert _minor_interleave([m.entry.root], m.entry.root.dims[-1]) == 1
    # No interior padding, or a dim too short for two groups: no groups.
    m = interleave_module((3,), (8,), [(1, 2, 0)])
    assert _minor_interleave([m.entry.root], m.entry.root.dims[-1]) == 1
    m = interleave_module((3,), (2,), [(0, 0, 1)])
    assert _minor_interleave([m.entry.root], m.entry.root.dims[-1]) == 1


@pytest.mark.parametrize("lead, n", [((600,), 700), ((), 300_001)])
def test_interleaved_groups_across_threads_match_one_thread(lead, n, monkeypatch):
    # (1-d: the groups run over each thread's range of the parallel dim, which need not
    # start or end on a group)
    def module():
        return interleave_module(lead, (n, n), [(0, 1, 1), (1, 0, 1)], nested=(1, 0, 1))
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(p.dims).astype(np.float32) for p in module().entry.parameters]
    threaded, steps = run_against_evaluator(module(), args)
    assert steps[0].extent > 1
    monkeypatch.setattr(cpu_exe, "PARALLEL_MIN_WORK", 1 << 62)
    single, _ = run_against_evaluator(module(), args)
    np.testing.assert_array_equal(threaded, single)


def test_an_interleave_kernel_computes_no_grid_positions(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))
    a = np.random.default_rng(4).standard_normal((64, 256)).astype(np.float32)

    def interleave(x, y):
        return lax.pad(x, 0.0, ((0, 0, 0), (0, 1, 1))) + lax.pad(y, 0.0, ((0, 0, 0), (1, 0, 1)))
    got = ember.jit(lambda x, y: interleave(jnp.exp(x), jnp.sin(y)))(a, a)
    want = np.empty((64, 512), np.float32)
    want[:, 0::2], want[:, 1::2] = np.exp(a), np.sin(a)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    kernels = [open(p).read() for p in glob.glob(os.path.join(tmp_path, "*.llvm.ll"))]
    assert kernels and not any(" srem " in text or " sdiv " in text for text in kernels)


def _cumprod_grad_reference(a):
    """d/da of sum(cumprod(a, axis=1)) in float64, by the product rule."""
    a = a.astype(np.float64)
    n = a.shape[1]
    grad = np.zeros_like(a)
    for k in range(n):
        others = a.copy()
        others[:, k] = 1.0
        grad[:, k] = np.cumprod(others, axis=1)[:, k:].sum(axis=1)
    return grad


@pytest.mark.parametrize("n", [7, 64, 129])
def test_cumulative_gradients_through_interleaved_kernels_match_numpy(n):
    rng = np.random.default_rng(n)
    a = rng.uniform(0.5, 1.5, (5, n)).astype(np.float32)
    got = ember.jit(ember.grad(lambda a: jnp.sum(jnp.cumprod(a, axis=1))))(a)
    np.testing.assert_allclose(got, _cumprod_grad_reference(a), rtol=2e-5)
    # cummax without ties: each output's cotangent (2 * value) goes to its running argmax
    x = rng.permutation(5 * n).reshape(5, n).astype(np.float32)
    got = ember.jit(ember.grad(lambda x: jnp.sum(lax.cummax(x, axis=1) ** 2)))(x)
    want = np.zeros((5, n))
    for row in range(5):
        for j in range(n):
            k = int(np.argmax(x[row, :j + 1]))
            want[row, k] += 2 * x[row, k]
    np.testing.assert_array_equal(got, want)


def _emissions(fused, interleave: bool) -> int:
    import llvmlite.ir as ir

    from ember.backends.cpu import kernel_gen
    kb = kernel_gen.KernelBuilder(ir.Module("t"), "k", fused, lambda b, v: None,
                                  interleave=interleave)
    kb.build()
    assert kb.interleaved == interleave
    return kernel_gen.MAX_EMISSIONS - kb.budget[0]


def test_a_kernel_too_large_in_groups_is_built_element_by_element(monkeypatch):
    # (a group copies the loop body once per grid offset: past the emission budget, the
    # fusion is built again without groups rather than left to the evaluator)
    from ember.backends.cpu import kernel_gen
    from ember.compiler.pipeline import optimize

    def module():
        return interleave_module((6,), (40, 40), [(0, 1, 1), (1, 0, 1)], nested=(1, 0, 1))
    m = module()
    optimize(m)
    fused = next(c for c in m.computations if c.name.startswith("fused_computation"))
    grouped, plain = _emissions(fused, True), _emissions(fused, False)
    assert grouped > plain
    monkeypatch.setattr(kernel_gen, "MAX_EMISSIONS", (grouped + plain) // 2)
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(p.dims).astype(np.float32) for p in module().entry.parameters]
    _, steps = run_against_evaluator(module(), args)
    assert [type(s).__name__ for s in steps] == ["KernelPlan"]
