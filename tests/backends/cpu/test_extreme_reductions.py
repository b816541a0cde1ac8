"""Float maximum/minimum reductions in native kernels accumulate integer order keys
(``scalar_ops.extreme_key``; ``kernel_gen.KernelBuilder._to_accumulator``). Results must equal
an exact element-by-element reference (NaN when any element is NaN, else the largest or
smallest value with -0 below +0) in every kernel layout: rows long and short, columns, full
reductions whose partial results from several calls are combined afterwards, row fusions,
several reduced dims; for every float dtype, with the special values anywhere."""

from __future__ import annotations

import glob
import math

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.cpu import executable as cpu_exe
from tests.backends.cpu.helpers import x64

rng = np.random.default_rng(11)

# (shape, reduced axes): the kernels these take are named beside them.
LAYOUTS = [
    ((37,), None),               # a full reduction, one call
    ((300000,), None),           # a full reduction in partial results (several ranges)
    ((64, 33), (1,)),            # short rows, vectorized across rows
    ((64, 300), (1,)),           # rows vectorized along the row
    ((300, 64), (0,)),           # columns
    ((20000, 16), (0,)),         # columns, few work items: reduced rows split over calls
    ((8, 16, 5), (0, 2)),        # several reduced dims
]
PATTERNS = ["normal", "nan", "negative_nan", "mixed_zeros", "negative_zeros",
            "zeros_then_negative_zeros", "negative_zeros_then_zeros", "infinities"]


def make_input(shape, pattern, dtype):
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    spots = rng.integers(0, flat.size, max(1, flat.size // 40))
    half = flat.size // 2
    if pattern == "nan":
        flat[spots] = np.nan
    elif pattern == "negative_nan":
        flat[spots] = -np.abs(np.array(np.nan, dtype))
    elif pattern == "mixed_zeros":
        flat[:] = np.where(rng.random(flat.size) < 0.5, -0.0, 0.0)
    elif pattern == "negative_zeros":
        flat[:] = -0.0
    elif pattern == "zeros_then_negative_zeros":
        flat[:half], flat[half:] = 0.0, -0.0
    elif pattern == "negative_zeros_then_zeros":
        flat[:half], flat[half:] = -0.0, 0.0
    elif pattern == "infinities":
        flat[spots] = np.inf
        flat[spots[::2]] = -np.inf
    return x


def exact_extreme(values, is_max: bool) -> float:
    values = [float(v) for v in values]
    if any(math.isnan(v) for v in values):
        return math.nan
    best = max(values) if is_max else min(values)
    if best == 0:
        signs = {math.copysign(1.0, v) for v in values if v == 0}
        wanted = 1.0 if is_max else -1.0
        best = math.copysign(0.0, wanted if wanted in signs else -wanted)
    return best


def reference(x, axes, is_max):
    axes = tuple(range(x.ndim)) if axes is None else axes
    kept = [d for d in range(x.ndim) if d not in axes]
    rows = np.transpose(x, kept + list(axes)).reshape(
        [x.shape[d] for d in kept] + [-1]).astype(np.float64)
    out = np.array([exact_extreme(row, is_max) for row in rows.reshape(-1, rows.shape[-1])])
    return out.reshape([x.shape[d] for d in kept])


def assert_exact(got, want):
    got = np.asarray(got).astype(np.float64)
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok], want[ok])
    np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(want[ok]))


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("shape,axes", LAYOUTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, jnp.bfloat16])
def test_max_and_min_are_exact(shape, axes, pattern, dtype):
    x = make_input(shape, pattern, dtype)
    for fn, is_max in ((jnp.max, True), (jnp.min, False)):
        got = ember.jit(lambda a, fn=fn: fn(a, axis=axes))(x)
        assert_exact(got, reference(x, axes, is_max))


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("shape,axes", [LAYOUTS[1], LAYOUTS[3], LAYOUTS[4], LAYOUTS[5]])
def test_float64_max_and_min_are_exact(shape, axes, pattern):
    with x64():
        x = make_input(shape, pattern, np.float64)
        for fn, is_max in ((jnp.max, True), (jnp.min, False)):
            got = ember.jit(lambda a, fn=fn: fn(a, axis=axes))(x)
            assert_exact(got, reference(x, axes, is_max))


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("row", [16, 100, 1024])
def test_row_fusion_max_is_exact(pattern, row):
    # The max is consumed within the kernel (x - max per row, softmax's first step).
    x = make_input((48, row), pattern, np.float32)
    got = np.asarray(ember.jit(lambda a: a - jnp.max(a, axis=1, keepdims=True))(x))
    best = reference(x, (1,), True).astype(np.float32)[:, None]
    with np.errstate(invalid="ignore"):
        want = x - best
    np.testing.assert_array_equal(got, want)  # (NaNs at the same places)
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(want[ok]))


@pytest.mark.parametrize("initial", [0.5, -0.0, 0.0, -np.inf, np.nan])
def test_max_with_initial_and_where(initial):
    x = make_input((50, 70), "mixed_zeros", np.float32)
    x[::3] = rng.standard_normal((17, 70))
    where = rng.random(x.shape) < 0.3
    for fn, is_max in ((jnp.max, True), (jnp.min, False)):
        got = ember.jit(lambda a, w, fn=fn: fn(a, axis=1, where=w, initial=initial))(x, where)
        rows = [np.append(r[w], initial) for r, w in zip(x, where)]
        assert_exact(got, np.array([exact_extreme(r, is_max) for r in rows]))


def test_partial_results_combine_exactly_in_any_order(monkeypatch):
    # Partial results of ranges, combined by the executable: the zero of the right sign wins
    # whichever range holds it (NumPy's maximum.reduce returns the later zero of a tie).
    monkeypatch.setattr(cpu_exe, "PARTIAL_RANGES", 4)
    for first, second in ((0.0, -0.0), (-0.0, 0.0)):
        x = np.full(1 << 19, first, np.float32)
        x[len(x) // 2:] = second
        assert np.signbit(np.asarray(ember.jit(jnp.max)(x))) == False  # noqa: E712
        assert np.signbit(np.asarray(ember.jit(jnp.min)(x))) == True  # noqa: E712


def test_max_accumulates_order_keys(tmp_path, monkeypatch):
    # The row max runs on integer vectors: no float maximum is left in the optimized code.
    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))
    x = rng.standard_normal((256, 512)).astype(np.float32)
    assert_exact(ember.jit(lambda a: jnp.max(a, axis=1))(x), reference(x, (1,), True))
    opt = open(glob.glob(str(tmp_path / "*.llvm.opt.ll"))[0]).read()
    assert "x i32>" in opt and "llvm.maximum" not in opt
