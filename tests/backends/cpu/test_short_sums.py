"""Short-row kernels reading broadcast parameters (``short_rows.broadcast_plan``): the
pairwise distance ``sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))`` reads, for a block
of consecutive rows, one row of ``a`` (splat across the lanes) and consecutive rows of ``b``
(a contiguous block, rearranged by shuffles) instead of gathering both lane by lane. Blocks
that cross a row of ``a`` or wrap around ``b`` are copied element by element.

The data movement changes, not the arithmetic: results must equal the looped row kernel's
(the quick tier's) bit for bit, on any split of the rows, and float64 NumPy closely."""

import itertools

import numpy as np
import pytest

import ember.numpy as jnp
from ember.backends.cpu import llvm_support, short_rows
from ember.backends.cpu.executable import CpuExecutable
from ember.backends.cpu.program import ProgramBuilder
from tests.backends.cpu.helpers import optimized
from tests.backends.cpu.test_short_rows import _guarded, _kernel_runner

rng = np.random.default_rng(17)
_names = itertools.count()


def build(module, short: bool):
    program = ProgramBuilder(module, prefix=f"ss{next(_names)}short{int(short)}",
                             short_rows=short).build()
    lib = llvm_support.LoadedObject(llvm_support.compile_ir(program.ir_text).object_code)
    return CpuExecutable(program, lib, module), program


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def pdist(a, b):
    return jnp.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))


def pdist64(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))


def check(f, ref, *args):
    """``f`` through short-row and looped kernels: the same bits, close to ``ref``."""
    module = optimized(f, *args)
    short, program = build(module, True)
    looped, plain = build(module, False)
    assert program.short_row_kernels == 1 and plain.short_row_kernels == 0
    got = short.execute(list(args))[0]
    same_bits(got, looped.execute(list(args))[0])
    np.testing.assert_allclose(got, ref(*args), rtol=2e-6, atol=1e-6)
    return got, short, program


@pytest.mark.parametrize("m,k", [(512, 64), (64, 1024), (40, 37), (33, 100), (3, 700)])
@pytest.mark.parametrize("n", [8, 10, 16, 24, 32])
def test_pairwise_distances_match_the_looped_kernel(m, k, n, monkeypatch):
    # (k a multiple of the lanes: every block reads one row of a and consecutive rows of b;
    # else some cross a row of a and wrap around b)
    monkeypatch.setattr(short_rows, "SHORT_ROW_MIN_WORK", 0)
    a = rng.standard_normal((m, n)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    check(pdist, pdist64, a, b)


def test_cancelling_values_keep_the_lane_sums_order(monkeypatch):
    monkeypatch.setattr(short_rows, "SHORT_ROW_MIN_WORK", 0)
    a = (rng.standard_normal((64, 16)) * 1e4).astype(np.float32)
    b = a[::-1] + np.float32(1e-3)
    a[5], b[7] = np.inf, np.nan
    check(lambda a, b: ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1) - 3.0,
          lambda a, b: (pdist64(a, b) ** 2 - 3.0).astype(np.float32), a, b)


def test_broadcasts_over_several_row_dims(monkeypatch):
    """``a`` keeps the leading row dim, ``b`` the two trailing ones, ``c`` the middle one
    (neither: read lane by lane as before)."""
    monkeypatch.setattr(short_rows, "SHORT_ROW_MIN_WORK", 0)
    a = rng.standard_normal((5, 12)).astype(np.float32)
    b = rng.standard_normal((6, 8, 12)).astype(np.float32)
    c = rng.standard_normal((6, 12)).astype(np.float32)

    def f(a, b, c):
        d = a[:, None, None, :] * b[None] - c[None, :, None, :]
        return jnp.sum(d * d, axis=-1)

    def ref(a, b, c):
        d = a[:, None, None, :].astype(np.float64) * b[None] - c[None, :, None, :]
        return (d * d).sum(-1)
    check(f, ref, a, b, c)
    comp = next(i for i in optimized(f, a, b, c).entry.instructions
                if i.opcode == "fusion").calls[0]
    plans = sorted(p for p in (short_rows.broadcast_plan(i, (5, 6, 8, 12), 1)
                               for i in comp.instructions) if p is not None)
    assert plans == [("row", 48), ("rows", 48)]


def test_any_split_of_the_rows_gives_the_same_bits(monkeypatch):
    monkeypatch.setattr(short_rows, "SHORT_ROW_MIN_WORK", 0)
    a = rng.standard_normal((9, 16)).astype(np.float32)
    b = rng.standard_normal((32, 16)).astype(np.float32)
    whole, exe, program = check(pdist, pdist64, a, b)
    (step,) = program.steps
    run = _kernel_runner(program, exe, step.info.name)
    rows = 9 * 32
    for cuts in ([1], [5, 6, 7], [15, 16, 17, 40], list(range(0, rows, 7)),
                 sorted(rng.choice(np.arange(1, rows), 9, replace=False))):
        out = np.full((9, 32), np.nan, np.float32)
        bounds = [0, *cuts, rows]
        for lo, hi in zip(bounds, bounds[1:]):
            run([a, b, out], lo, hi)
        same_bits(out, whole)


@pytest.mark.parametrize("m,k", [(16, 32), (7, 19)])
def test_reads_stay_inside_the_parameters(m, k, monkeypatch):
    # Parameters against inaccessible pages (a fault ends the test run).
    monkeypatch.setattr(short_rows, "SHORT_ROW_MIN_WORK", 0)
    a = rng.standard_normal((m, 16)).astype(np.float32)
    b = rng.standard_normal((k, 16)).astype(np.float32)
    module = optimized(pdist, a, b)
    exe, program = build(module, True)
    (step,) = program.steps
    run = _kernel_runner(program, exe, step.info.name)
    for at_end in (True, False):
        ga, keep_a = _guarded(a, at_end)
        gb, keep_b = _guarded(b, at_end)
        out = np.zeros((m, k), np.float32)
        run([ga, gb, out], 0, m * k)
        np.testing.assert_allclose(out, pdist64(a, b), rtol=2e-6, atol=1e-6)
        del ga, gb


def test_pairwise_distances_read_without_gathers():
    a = rng.standard_normal((512, 16)).astype(np.float32)
    program = ProgramBuilder(optimized(pdist, a, a), prefix=f"ss{next(_names)}").build()
    assert program.short_row_kernels == 1
    opt = llvm_support.compile_ir(program.ir_text, want_text=True, opt_level=3).optimized_ir
    assert "gather" not in opt and "shufflevector" in opt
