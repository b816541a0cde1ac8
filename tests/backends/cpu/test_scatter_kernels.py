"""Scatter kernels: a scatter into a large operand runs as two kernels, the operand's copy
split across threads and then the updates (``program.SPLIT_SCATTER_MIN_SIZE``); a small one as
one kernel. Either way the result equals the evaluator's, bit for bit."""

import numpy as np
import pytest

import ember
from ember.backends import get_backend
from ember.backends.cpu import program as cpu_program
from ember.backends.cpu.executable import KernelPlan
from tests.backends.cpu.helpers import optimized

rng = np.random.default_rng(11)
ROWS = np.array([3, 0, 599, 3, -1, 700, 250, -601], np.int32)  # repeats, negative, outside


def _kernels(f, *args) -> list[str]:
    exe = get_backend("cpu").compile(optimized(f, *args))
    return [s.name for s in exe.program.steps if type(s) is KernelPlan]


CASES = {
    "set": lambda x, u: x.at[ROWS].set(u),
    "add": lambda x, u: x.at[ROWS].add(u),
    "max": lambda x, u: x.at[ROWS].max(u),
    "multiply": lambda x, u: x.at[ROWS].multiply(u),
    "fused operand": lambda x, u: (x * 2.0 + 1.0).at[ROWS].add(u),
    "fused updates": lambda x, u: x.at[ROWS].set(u * u - 3.0),
    "block": lambda x, u: x.at[100:108].add(u),
    "elements": lambda x, u: x.at[ROWS, ROWS % 128].add(u[:, 0]),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("rows", [600, 40])  # 76800 elements (two kernels), 5120 (one)
def test_scatters_match_the_evaluator(name, rows):
    fn = CASES[name]
    x = rng.standard_normal((rows, 128)).astype(np.float32)
    u = rng.standard_normal((len(ROWS), 128)).astype(np.float32)
    want = np.asarray(ember.jit(fn, backend="interpreter")(x, u))
    got = np.asarray(ember.jit(fn, backend="cpu")(x, u))
    np.testing.assert_array_equal(got, want)
    if x.size >= cpu_program.SPLIT_SCATTER_MIN_SIZE:
        assert len(_kernels(fn, x, u)) >= 2


def test_a_large_scatter_copies_then_updates_in_two_kernels():
    x = rng.standard_normal((600, 128)).astype(np.float32)
    u = rng.standard_normal((len(ROWS), 128)).astype(np.float32)
    big = _kernels(CASES["add"], x, u)
    small = _kernels(CASES["add"], x[:40], u)
    assert len(big) == len(small) + 1


def test_integer_scatter_of_a_large_operand():
    x = rng.integers(-1000, 1000, (300, 300)).astype(np.int32)
    idx = rng.integers(-300, 300, 500).astype(np.int32)
    u = rng.integers(-5, 5, (500, 300)).astype(np.int32)
    ref = x.copy()
    np.add.at(ref, idx, u)
    got = ember.jit(lambda a, i, v: a.at[i].add(v), backend="cpu")(x, idx, u)
    np.testing.assert_array_equal(np.asarray(got), ref)
