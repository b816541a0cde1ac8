"""The LLVM CPU backend against the NumPy interpreter and NumPy itself.

Each program is jitted on both backends; values must agree (integers exactly, floats within a
few ulps). Also: the code is vectorized, big loops split across threads give the same bits as
one thread, full reductions are accurate, unsupported ops fall back to library thunks, dumps
are written.
"""

import glob
import itertools
import os

import numpy as np
import pytest

import ember
import ember.backends.cpu as cpu_backend
import ember.numpy as jnp
from ember import _threads as threads
from ember import lax
from ember.backends import get_backend
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu import llvm_support, parallel_runtime
from tests.backends.cpu.helpers import optimized, x64

rng = np.random.default_rng(0)


@pytest.fixture
def one_tier(monkeypatch):
    """Bitwise comparisons between runs need the same code in both: no quick first tier
    (unoptimized code sums floats in another order) replaced by optimized code later."""
    monkeypatch.setattr(cpu_backend, "TIERED_COMPILATION", False, raising=False)


def both(f, *args, static_argnums=()):
    cpu = ember.jit(f, backend="cpu", static_argnums=static_argnums)(*args)
    ref = ember.jit(f, backend="interpreter", static_argnums=static_argnums)(*args)
    return cpu, ref


def assert_close(cpu, ref, rtol=2e-6, atol=0.0):
    for c, r in zip(ember.tree_util.tree_leaves(cpu), ember.tree_util.tree_leaves(ref)):
        c, r = np.asarray(c), np.asarray(r)
        assert c.shape == r.shape and c.dtype == r.dtype
        if c.dtype.kind in "iub":
            np.testing.assert_array_equal(c, r)
        else:
            np.testing.assert_allclose(c.astype(np.float64), r.astype(np.float64),
                                       rtol=rtol, atol=atol, equal_nan=True)


def test_default_backend_is_cpu():
    assert get_backend().name == "cpu"
    assert ember.jit(lambda x: x)(jnp.ones(2)) is not None


# --------------------------------------------------------------------------- index arithmetic


SHAPE_PROGRAMS = {
    "broadcast": lambda x, y: x[:, None, :] * y[0][None, :, None],
    "transpose": lambda x, y: jnp.transpose(x) + 1.0,
    "reshape_mix": lambda x, y: jnp.reshape(x, (6, 4)).T * 2.0,
    "slice": lambda x, y: x[1:, ::2] - 3.0,
    "concat": lambda x, y: jnp.concatenate([x, x * 2.0, y[:4, :]], axis=0) + 1.0,
    "pad": lambda x, y: lax.pad(x + 1.0, 0.5, ((1, 2, 1), (-1, 1, 0))),
    "reverse": lambda x, y: jnp.flip(x, axis=1) * 3.0,
    "iota": lambda x, y: x + jnp.arange(6, dtype=jnp.float32),
    "row_reduce": lambda x, y: jnp.sum(x * 2.0, axis=1),
    "col_reduce": lambda x, y: jnp.max(x, axis=0),
    "multi_output": lambda x, y: (jnp.exp(x), jnp.sum(x, 1)),
    "argmax": lambda x, y: jnp.argmax(x, axis=1),
    "softmax": lambda x, y: jnp.exp(x - jnp.max(x, 1, keepdims=True)) /
        jnp.sum(jnp.exp(x - jnp.max(x, 1, keepdims=True)), 1, keepdims=True),
}


@pytest.mark.parametrize("name", sorted(SHAPE_PROGRAMS))
def test_shape_ops_in_fusions(name):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    y = rng.standard_normal((6, 6)).astype(np.float32)
    cpu, ref = both(SHAPE_PROGRAMS[name], x, y)
    assert_close(cpu, ref, rtol=1e-5)


# --------------------------------------------------------------------------- integer semantics

INT_EDGES = {
    np.int32: [0, 1, -1, 7, -7, 2**31 - 1, -2**31, 3, -3],
    np.uint8: [0, 1, 2, 7, 128, 255, 3, 100, 9],
    np.int8: [0, 1, -1, 127, -128, 5, -5, 64, 3],
}


@pytest.mark.parametrize("dtype", sorted(INT_EDGES, key=str))
@pytest.mark.parametrize("op", ["div", "rem", "shl", "shr", "max", "min", "neg", "abs"])
def test_integer_edge_semantics(dtype, op):
    v = np.array(INT_EDGES[dtype], dtype)
    x = np.repeat(v, len(v))
    y = np.tile(v, len(v))
    fns = {
        "div": lax.div, "rem": lax.rem, "shl": lax.shift_left,
        "shr": lax.shift_right_arithmetic, "max": lax.max, "min": lax.min,
        "neg": lambda a, b: lax.neg(a), "abs": lambda a, b: lax.abs(a),
    }
    if op in ("neg", "abs") and np.dtype(dtype).kind == "u":
        pytest.skip("signed ops")
    cpu, ref = both(fns[op], x, y)
    assert_close(cpu, ref)


def _truncated_division(x, y):
    """C's quotient and remainder with the evaluator's guards, in Python integers."""
    q, r = [], []
    for a, b in zip(x.tolist(), y.tolist()):
        if b == 0:
            q.append(-1)
            r.append(a)
            continue
        t = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        q.append(t)
        r.append(a - t * b)
    return q, r


def _near_multiples(dtype, n):
    """Large dividends just below and above multiples of the divisor: where a rounded float
    quotient would cross an integer first."""
    info = np.iinfo(dtype)
    y = rng.integers(1, min(info.max, 2**20), n).astype(np.int64)
    y[: n // 4] = rng.integers(1, 8, n // 4)
    k = info.max // y
    x = np.concatenate([k * y - 1, k * y, (k - 1) * y + 1, k * y + (info.max - k * y)])
    y = np.concatenate([y] * 4)
    if info.min < 0:
        x, y = np.concatenate([x, -x, x, -x - 1]), np.concatenate([y, y, -y, -y])
    return x.astype(dtype), y.astype(dtype)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32,
                                   np.uint32])
def test_integer_division_in_floating_point_is_exact(dtype):
    # Up to 32 bits, div and rem divide in float32/float64: every quotient must truncate
    # to the exact one. All pairs of 8-bit values; near-multiples and random pairs beyond.
    info = np.iinfo(dtype)
    if info.bits == 8:
        v = np.arange(info.min, info.max + 1).astype(dtype)
        x, y = np.repeat(v, len(v)), np.tile(v, len(v))
    else:
        nx, ny = _near_multiples(dtype, 4000)
        rx = rng.integers(info.min, info.max, 20000, dtype=dtype, endpoint=True)
        ry = rng.integers(info.min, info.max, 20000, dtype=dtype, endpoint=True)
        ry[::50] >>= info.bits // 2  # small divisors too
        x, y = np.concatenate([nx, rx]), np.concatenate([ny, ry])
        x[:3], y[:3] = info.min, [-1 if info.min else 0, 0, 1]
    q, r = ember.jit(lambda a, b: (lax.div(a, b), lax.rem(a, b)), backend="cpu")(x, y)
    want_q, want_r = _truncated_division(x, y)
    np.testing.assert_array_equal(np.asarray(q), np.array(want_q).astype(dtype))
    np.testing.assert_array_equal(np.asarray(r), np.array(want_r).astype(dtype))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32,
                                   np.uint32])
def test_integer_division_by_a_constant_is_exact(dtype):
    # (a constant divisor divides natively, by LLVM's multiply-by-reciprocal: every value of
    # the dividend's range near its ends, multiples and random values, each small and large
    # divisor, -1 and the extremes for signed types)
    info = np.iinfo(dtype)
    x = np.concatenate([np.arange(info.min, min(info.min + 300, info.max)),
                        np.arange(max(info.max - 300, info.min), info.max + 1),
                        rng.integers(info.min, info.max, 5000, dtype=dtype, endpoint=True),
                        np.arange(-300, 301) if info.min < 0 else np.arange(0, 601)])
    x = x.astype(dtype)
    divisors = [1, 2, 3, 7, 10, 100, info.max // 3, info.max]
    if info.min < 0:
        divisors += [-1, -3, -100, info.min, info.min + 1]
    for c in divisors:
        c = dtype(c)
        q, r = ember.jit(lambda a, c=c: (lax.div(a, c), lax.rem(a, c)), backend="cpu")(x)
        want_q, want_r = _truncated_division(x, np.full_like(x, c))
        np.testing.assert_array_equal(np.asarray(q), np.array(want_q).astype(dtype), str(c))
        np.testing.assert_array_equal(np.asarray(r), np.array(want_r).astype(dtype), str(c))
        with np.errstate(over="ignore"):  # (NumPy's MIN // -1 wraps too, with a warning)
            want_mod, want_floor = x % c, x // c
        np.testing.assert_array_equal(np.asarray(ember.jit(lambda a, c=c: a % c)(x)), want_mod)
        np.testing.assert_array_equal(np.asarray(ember.jit(lambda a, c=c: a // c)(x)),
                                      want_floor)


def test_float_to_int_conversion_saturates():
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.7, -2.7, 0.5], np.float32)
    for dt in (np.int32, np.uint8, np.int8, np.uint32, np.bool_):
        cpu, ref = both(lambda a, dt=dt: lax.convert_element_type(a * 1.0, dt), x)
        assert_close(cpu, ref)


def _saturated(v, dt):
    """XLA's float -> int, one element at a time in Python integers."""
    info = np.iinfo(dt)
    out = []
    for a in v.astype(np.float64):
        if np.isnan(a):
            out.append(0)
        elif a >= float(info.max) + 1.0:
            out.append(int(info.max))
        elif a < float(info.min):
            out.append(int(info.min))
        else:
            out.append(int(a))
    return np.array(out, dt)


@pytest.mark.parametrize("src", [np.float32, np.float64, np.float16])
def test_float_to_int_saturates_in_vectorized_loops(src, tmp_path, monkeypatch):
    # Long arrays, so the boundary values go through the vector loop, not only its scalar
    # remainder: the conversion is compares and selects around a plain fptosi (LLVM's
    # fptosi.sat vectorizes in IR but x86 converts it one lane at a time).
    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))
    ints = (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64)
    with x64():
        for dt in ints:
            info = np.iinfo(dt)
            edges = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, -0.99, 1.5, 1e30, -1e30,
                     float(info.max), float(info.max) + 1, float(info.min),
                     float(info.min) - 1, float(info.min) - 0.5, 2.0**31, -2.0**31, 2.0**63,
                     -2.0**63, 2.0**64]
            v = np.concatenate([rng.choice(np.array(edges), 1500),
                                rng.standard_normal(500) * 10.0 ** rng.integers(0, 20, 500)])
            with np.errstate(all="ignore"):
                v = v.astype(src)
            got = np.asarray(ember.jit(lambda a, dt=dt: a.astype(dt), backend="cpu")(v))
            assert got.dtype == dt
            np.testing.assert_array_equal(got, _saturated(v, dt), err_msg=f"{src} -> {dt}")
    if src == np.float32:  # no scalar conversion call left in any kernel's loops
        asm = "".join(open(p).read() for p in glob.glob(str(tmp_path / "*.s")))
        assert "cvttps2dq" in asm or "cvttps2udq" in asm


def test_float64_to_float16_rounds_once():
    # Through float32 by round-to-odd, so vectorized and still one rounding (NumPy's
    # value; a plain double rounding gets ties such as 1 + 2**-11 + 2**-40 wrong).
    n = 20000
    bits = rng.integers(0, 2 ** 63, n, dtype=np.int64) | (rng.integers(0, 2, n) << 63)
    half = rng.standard_normal(n).astype(np.float16)
    ties = half.astype(np.float64) + np.spacing(half).astype(np.float64) / 2
    nudged = ties + rng.choice([-1.0, 1.0, 0.0], n) * 2.0 ** rng.integers(-60, -20, n) * ties
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0,
                         65520.0 - 2 ** -20, 1e300, -1e300, 1e-300, 2.0 ** -24, 2.0 ** -25,
                         2.0 ** -25 + 2.0 ** -60, -3 * 2.0 ** -26, 1 + 2 ** -11 + 2 ** -40])
    x = np.concatenate([bits.view(np.float64), nudged, np.tile(specials, 50)])
    with x64():
        got = np.asarray(ember.jit(lambda a: a.astype(jnp.float16), backend="cpu")(x))
    with np.errstate(all="ignore"):
        want = x.astype(np.float16)
    same = (got.view(np.uint16) == want.view(np.uint16)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), (x[~same][:4], got[~same][:4], want[~same][:4])


_BITS = {np.float64: np.uint64, np.float32: np.uint32, np.float16: np.uint16}


def _fmod_cases(dtype, n=20000):
    """(x, y) pairs for fmod: random bit patterns (every exponent difference), products
    near multiples, and every pair of special values."""
    bits = _BITS[dtype]
    info = np.iinfo(bits)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.1, 2.5, 3.0, -7.0,
                         float(np.finfo(dtype).max), float(np.finfo(dtype).smallest_subnormal),
                         float(np.finfo(dtype).smallest_normal)], dtype)

    def random_bits():
        return rng.integers(0, int(info.max) + 1, n, dtype=np.uint64).astype(bits).view(dtype)
    def exponent_field(lo, hi):  # random bits with the biased exponent in [lo, hi)
        width = np.finfo(dtype).nmant
        mant = rng.integers(0, 1 << width, n, dtype=np.uint64)
        exp = rng.integers(lo, hi, n, dtype=np.uint64) << np.uint64(width)
        return (mant | exp).astype(bits).view(dtype)
    top = 2 * np.finfo(dtype).maxexp - 2  # the largest finite biased exponent
    y = rng.standard_normal(n).astype(dtype)
    with np.errstate(all="ignore"):
        multiple = (y.astype(np.float64) * rng.integers(1, 2 ** 20, n)).astype(dtype)
    xs = [random_bits(), multiple, np.nextafter(multiple, dtype(np.inf)),
          np.nextafter(multiple, dtype(-np.inf)), np.repeat(specials, len(specials)),
          (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(dtype),
          exponent_field(top - 8, top + 1)]
    ys = [random_bits(), y, y, y, np.tile(specials, len(specials)),
          (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 1, n)).astype(dtype),
          exponent_field(0, 8)]  # huge over tiny: the widest exponent differences
    return np.concatenate(xs), np.concatenate(ys)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_float_remainder_is_exact(dtype):
    # fmod is one exact division step per lane (float32 in float64, float16 in float32
    # and then float64) unless a quotient exceeds 2**48 (float64: 2**52), then float32's
    # six steps or float64's libm (vecmath._fmod_function): bit-for-bit NumPy's fmod, for
    # jit and eager, and so is mod, built on it (JAX's mod: the remainder moved to the
    # divisor's sign when nonzero; NumPy's differs on the sign of zeros).
    x, y = _fmod_cases(dtype)
    with np.errstate(all="ignore"):
        rem = np.fmod(x, y)
        mod = np.where((rem != 0) & ((rem < 0) != (y < 0)), rem + y, rem)
    with x64():
        for fn, want in ((lambda a, b: lax.rem(a, b), rem), (jnp.mod, mod)):
            for got in (ember.jit(fn, backend="cpu")(x, y), fn(jnp.asarray(x), jnp.asarray(y))):
                got = np.asarray(got)
                same = (got == want) & (np.signbit(got) == np.signbit(want))
                same |= np.isnan(got) & np.isnan(want)
                assert same.all(), (x[~same][:4], y[~same][:4], got[~same][:4], want[~same][:4])
        # fmod's NaNs have libm's bits (sort and top_k order NaNs by sign): the processor's
        # default NaN for fmod(x, 0) and fmod(inf, y), a NaN operand itself otherwise.
        got = np.asarray(ember.jit(lambda a, b: lax.rem(a, b), backend="cpu")(x, y))
    np.testing.assert_array_equal(got.view(_BITS[dtype]), rem.view(_BITS[dtype]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_remainder_loops_call_the_vector_variant(dtype, tmp_path, monkeypatch):
    # One step per lane, the general code only for vectors with a lane beyond it.
    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))
    monkeypatch.setattr(cpu_backend, "TIERED_COMPILATION", False)
    x = rng.standard_normal(4096).astype(dtype)
    with x64():
        got = ember.jit(lambda a, b: lax.rem(a, b), backend="cpu")(x, x[::-1] + 0.5)
    np.testing.assert_array_equal(np.asarray(got), np.fmod(x, x[::-1] + 0.5))
    opt = open(glob.glob(str(tmp_path / "*.llvm.opt.ll"))[0]).read()
    name = "@__ember_vecmath_fmod_" + ("f64" if dtype == np.float64 else "f32") + "_v"
    assert [ln for ln in opt.splitlines() if name in ln and "call" in ln]


@pytest.mark.parametrize("c", [1.0, 0.5, 2.0, 2.0 ** -20, 2.0 ** 40, 2 * np.pi, 360.0, 1e-9,
                               1e-40, 3e38, 1e30, -3.0])
def test_float32_remainder_by_a_constant_is_exact(c):
    # A constant divisor takes fewer steps (one for a power of two): x % 1.0 must not pay
    # for divisors 2**276 times smaller than x.
    x, _ = _fmod_cases(np.float32)
    c = np.float32(c)
    with np.errstate(all="ignore"):
        want = np.fmod(x, c)
    got = np.asarray(ember.jit(lambda a: lax.rem(a, c), backend="cpu")(x))
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("c", [0.25, 0.75, 1e300])
def test_float64_remainder_by_a_constant(c, one_tier):
    # Float64 always calls the function with vector variants. A column broadcast along rows
    # by a constant divisor: LLVM used to drop the constant argument from the internal
    # function, whose variants' names then described the wrong signature (an LLVM
    # assertion: a crash). Also every kind of value against NumPy.
    x, _ = _fmod_cases(np.float64, n=4000)
    column = x[:333, None]
    with np.errstate(all="ignore"):
        want = np.fmod(x, c), np.fmod(np.broadcast_to(column, (333, 333)), c)
    with x64():
        got = (ember.jit(lambda a: lax.rem(a, c), backend="cpu")(x),
               ember.jit(lambda a: lax.rem(jnp.broadcast_to(a, (333, 333)), c),
                         backend="cpu")(column))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g).view(np.uint64), w.view(np.uint64))


def test_nan_propagates_through_max_min_and_clamp():
    x = np.array([np.nan, 1.0, -0.0, np.inf], np.float32)
    y = np.array([0.0, np.nan, 0.0, -np.inf], np.float32)
    cpu, ref = both(lambda a, b: (jnp.maximum(a, b), jnp.minimum(a, b),
                                  jnp.clip(a, -1.0, b), jnp.max(a), jnp.min(b)), x, y)
    assert_close(cpu, ref)


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16])
def test_low_precision_floats_round_per_op(dtype):
    x = (rng.standard_normal(257) * 3).astype(dtype)
    cpu, ref = both(lambda a: (a * 1.1 + 0.3) / 0.7 - a, x)
    assert_close(cpu, ref, rtol=0)


# --------------------------------------------------------------------------- reductions


def test_float32_sum_of_ten_million_is_accurate():
    x = rng.random(10_000_000, dtype=np.float32)
    out = ember.jit(lambda a: jnp.sum(a))(x)
    exact = np.sum(x, dtype=np.float64)
    assert abs(float(out) - exact) / exact < 1e-6


@pytest.mark.parametrize("reducer", ["sum", "max", "min", "prod", "any"])
def test_threaded_full_reduction_matches_single_thread(reducer, monkeypatch, one_tier):
    x = rng.standard_normal(300_001).astype(np.float32)
    if reducer == "prod":  # products of +-1 are exact in any order
        x = np.sign(x).astype(np.float32)
    fn = {"sum": jnp.sum, "max": jnp.max, "min": jnp.min, "prod": jnp.prod,
          "any": lambda a: jnp.any(a > 4.0)}[reducer]
    threaded = np.asarray(ember.jit(lambda a: fn(a * 1.0))(x))
    monkeypatch.setattr(cpu_exe, "PARALLEL_MIN_WORK", 1 << 62)
    single = np.asarray(ember.jit(lambda a: fn(a * 1.0 + 0.0))(x))
    if reducer == "sum":  # (a float32 sum's error scales with its terms, not its value)
        bound = 2.0 ** -24 * np.abs(x.astype(np.float64)).sum()
        assert abs(float(threaded) - float(single)) <= bound
        assert abs(float(threaded) - x.astype(np.float64).sum()) <= bound
    else:
        np.testing.assert_array_equal(threaded, single)


def _bits(v):
    v = np.asarray(v)
    return v.view(f"u{v.dtype.itemsize}") if v.dtype.kind == "f" else v


@pytest.mark.parametrize("n", [5_003, 300_001])
@pytest.mark.parametrize("case", ["plain", "nan_inside", "nan_last", "signed_zeros", "ints",
                                  "bools", "two_dims", "rows"])
def test_order_free_reductions_beside_float_sums(case, n):
    # Max/min/and/or fused with a float sum get lanes of their own (LaneSums' ``unordered``):
    # their bits equal those of the reduction compiled alone, and NumPy's results.
    x = (rng.standard_normal(n) * 100).astype(np.float32)
    if case == "nan_inside":
        x[n // 3] = np.nan
    elif case == "nan_last":
        x[-1] = np.nan
    elif case == "signed_zeros":
        x[::2] = 0.0
        x[1::2] = -0.0
        x[n // 2] = -1e-30
    if case == "ints":
        xi = (x * 1000).astype(np.int32)
        fused = ember.jit(lambda a: (jnp.max(a), jnp.min(a), jnp.sum(a.astype(jnp.float32))))
        alone = [ember.jit(jnp.max), ember.jit(jnp.min)]
        args = (xi,)
    elif case == "bools":
        fused = ember.jit(lambda a: (jnp.any(a > 250.0), jnp.all(a > -400.0), jnp.sum(a)))
        alone = [ember.jit(lambda a: jnp.any(a > 250.0)), ember.jit(lambda a: jnp.all(a > -400.0))]
        args = (x,)
    else:
        m = x.reshape(-1, 1) if case not in ("two_dims", "rows") else \
            x[: n // 1000 * 1000].reshape(n // 1000, 1000)
        axis = 1 if case == "rows" else None
        fused = ember.jit(lambda a: (jnp.max(a, axis=axis), jnp.min(a, axis=axis),
                                     jnp.sum(a, axis=axis)))
        alone = [ember.jit(lambda a: jnp.max(a, axis=axis)),
                 ember.jit(lambda a: jnp.min(a, axis=axis))]
        args = (m if case in ("two_dims", "rows") else x,)
    text = fused.lower(*args).compile().as_text()
    assert text.count(" fusion(") == 1, text  # one kernel computes all three
    got = fused(*args)
    for g, f in zip(got[:2], alone):
        np.testing.assert_array_equal(_bits(g), _bits(f(*args)))
    want_sum = np.sum(np.asarray(args[0]).astype(np.float64), axis=1 if case == "rows" else None)
    np.testing.assert_allclose(np.asarray(got[2]), want_sum, rtol=1e-5, atol=1e-2,
                               equal_nan=True)
    if case != "signed_zeros":  # (NumPy's maximum keeps the first of -0 and +0)
        ops = (np.max, np.min) if case != "bools" else (
            lambda a: np.any(a > 250.0), lambda a: np.all(a > -400.0))
        for g, op in zip(got[:2], ops):
            want = op(args[0], axis=1) if case == "rows" else op(args[0])
            np.testing.assert_array_equal(np.asarray(g), want)


def test_every_lane_of_a_fused_max_counts():
    # The extreme values in each lane position in turn (and in the tail lanes).
    base = rng.standard_normal(5_003).astype(np.float32)
    fused = ember.jit(lambda a: (jnp.max(a), jnp.min(a), jnp.sum(a)))
    for p in [*range(1024, 1024 + 65), 5_000, 5_002]:
        x = base.copy()
        x[p], x[p - 1] = 1e6, -1e6
        hi, lo, _ = fused(x)
        assert float(hi) == 1e6 and float(lo) == -1e6, p


@pytest.mark.parametrize("rows", [4095, 4096, 8191, 8192, 20_000])
@pytest.mark.parametrize("cols", [1, 16])
def test_reductions_around_the_partial_split_thresholds(rows, cols, one_tier):
    # One call (below PARALLEL_MIN_WORK, or one partial range) writes final sums; several
    # ranges write float64 partial sums into the executable's buffers (never into the
    # float32 output: an 8-byte store there would overrun it).
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    x64 = x.astype(np.float64)
    f = ember.jit(lambda a: (jnp.sum(a, axis=0), jnp.max(a, axis=0), jnp.sum(a),
                             jnp.sum(a * 2.0, axis=1)))
    col_sum, col_max, total, row_sums = (np.asarray(v) for v in f(x))
    scale = np.abs(x64).sum(axis=0)
    assert col_sum.dtype == np.float32 and col_sum.shape == (cols,)
    assert np.all(np.abs(col_sum - x64.sum(axis=0)) <= 2e-6 * scale)
    np.testing.assert_array_equal(col_max, x.max(axis=0))
    assert abs(float(total) - x64.sum()) <= 2e-6 * np.abs(x64).sum()
    np.testing.assert_allclose(row_sums, 2 * x64.sum(axis=1), rtol=1e-5, atol=1e-5)


def _columns(a):
    return a[: a.size // 16 * 16].reshape(-1, 16)


@pytest.mark.parametrize("reducer", ["sum", "sum_of_squares", "max_and_mean", "column_sums"])
def test_reductions_do_not_depend_on_the_thread_count(reducer, monkeypatch, one_tier):
    # Partial results per fixed range (executable.partial_ranges), never per thread: one, two,
    # three or five threads (the Python pool) and the native runtime give the same bits.
    # (Several inputs: a float32 sum split two ways differs in the last bit for about a
    # quarter of them.) Column reductions with few columns split their rows the same way.
    fn = {"sum": lambda a: (jnp.sum(a),), "sum_of_squares": lambda a: (jnp.sum(a * a),),
          "max_and_mean": lambda a: (jnp.max(a), jnp.mean(a)),
          "column_sums": lambda a: (jnp.sum(_columns(a), axis=0),
                                    jnp.max(_columns(a), axis=0))}[reducer]
    f = ember.jit(fn)
    xs = [(np.random.default_rng(seed).standard_normal(400_003 + seed) * 1000 + 3)
          .astype(np.float32) for seed in range(8)]
    results = [[np.asarray(v) for x in xs for v in f(x)]]  # the native runtime, if any
    monkeypatch.setattr(parallel_runtime, "_runtime", None)
    monkeypatch.setattr(parallel_runtime, "_tried", True)
    for size in (1, 2, 3, 5):
        pool = threads.Pool(size)
        monkeypatch.setattr(threads, "pool", lambda pool=pool: pool)
        results.append([np.asarray(v) for x in xs for v in f(x)])
    for other in results[1:]:
        for u, v in zip(results[0], other):
            np.testing.assert_array_equal(u, v)


def test_threaded_elementwise_is_bitwise_identical(monkeypatch, one_tier):
    assert threads.pool().size >= 1
    x = rng.standard_normal((700, 301)).astype(np.float32)
    f = lambda a: (jnp.tanh(a) * 2.0 + jnp.sum(a, axis=1, keepdims=True))  # noqa: E731
    threaded = np.asarray(ember.jit(f)(x))
    monkeypatch.setattr(cpu_exe, "PARALLEL_MIN_WORK", 1 << 62)
    single = np.asarray(ember.jit(lambda a: f(a))(x))
    np.testing.assert_array_equal(threaded, single)


# --------------------------------------------------------------------------- library thunks


def test_library_ops_run_beside_kernels():
    x = rng.standard_normal((5, 7)).astype(np.float32)
    idx = np.array([4, 0, 2], np.int32)

    def f(a, i):
        s = jnp.sort(a * 2.0, axis=1)
        g = a[i] + 1.0
        d = jnp.dot(a, a.T) * 0.5
        u = a.at[i, 0].add(10.0)
        return s, g, d, u, lax.dynamic_slice(a, (1, 2), (2, 3)) - 1.0

    cpu, ref = both(f, x, idx)
    assert_close(cpu, ref, rtol=1e-5)


def test_complex_fusions_without_native_code_fall_back_to_the_evaluator():
    x = (rng.standard_normal(8) + 1j * rng.standard_normal(8)).astype(np.complex64)
    cpu, ref = both(lambda a: jnp.arcsinh(a * a + 1.0) + a ** a, x)  # (no complex asinh, pow)
    assert_close(cpu, ref, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, jnp.bfloat16, np.float16])
def test_nextafter_kernel_matches_numpy_bit_for_bit(dtype):
    """A native kernel for float32/float64 (fused with its neighbours), the evaluator for
    float16/bfloat16 (steps of their own bits)."""
    info = jnp.finfo(dtype)
    v = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, info.max, -info.max,
                  info.tiny, info.smallest_subnormal, -info.smallest_subnormal, 2.5, -3.0], dtype)
    x, y = (a.ravel() for a in np.meshgrid(v, v))
    wide = dtype == np.float64
    with x64(wide):
        got = np.asarray(ember.jit(lambda a, b: lax.nextafter(a * 1, b))(x, y))
        steps = [type(s).__name__ for s in get_backend("cpu").compile(
            optimized(lax.nextafter, x, y)).program.steps]
    with np.errstate(all="ignore"):
        want = np.nextafter(x, y)
    bits = np.dtype(f"u{np.dtype(dtype).itemsize}")
    same = (got.view(bits) == want.view(bits)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), (x[~same], y[~same], got[~same], want[~same])
    native = np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.float64))
    assert ("LibraryPlan" in steps) != native, steps


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4)])
def test_empty_arrays(shape):
    x = np.ones(shape, np.float32)
    cpu, ref = both(lambda a: (a * 2.0, jnp.sum(a, axis=0), jnp.sum(a)), x)
    assert_close(cpu, ref)


def test_outputs_that_are_parameters_and_constants():
    x = np.arange(3, dtype=np.float32)
    cpu, ref = both(lambda a: (a, jnp.array([1.0, 2.0]), a + 1.0, a + 1.0), x)
    assert_close(cpu, ref)


def test_non_contiguous_arguments():
    base = rng.standard_normal((6, 8)).astype(np.float32)
    x = jnp.asarray(base)[:, ::2]
    cpu, ref = both(lambda a: a * 2.0 + 1.0, x)
    assert_close(cpu, ref)


# --------------------------------------------------------------------------- dumps


def test_dump_writes_llvm_ir_and_assembly(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))
    ember.jit(lambda a: jnp.exp(a) * 2.0)(np.ones(4096, np.float32))
    names = os.listdir(tmp_path)
    assert any(n.endswith(".llvm.ll") for n in names)
    assert any(n.endswith(".llvm.opt.ll") for n in names)
    asm = glob.glob(str(tmp_path / "*.s"))
    assert asm and "kernel_0" in open(asm[0]).read()
    opt = glob.glob(str(tmp_path / "*.llvm.opt.ll"))[0]
    assert "x float>" in open(opt).read()  # the loop was vectorized


def test_oversized_fusions_fall_back_instead_of_exploding():
    # Second-order derivatives of a cumulative op give fusions of deeply nested pads and
    # concatenates; those exceed the emission budget and run as library thunks.
    x = np.array([0.3, -1.2, 0.5, 2.0, -0.7], np.float32)

    def f(v):
        inner = ember.grad(lambda y: jnp.sum(lax.cumlogsumexp(y, axis=0)))
        return jnp.sum(inner(v) ** 2)

    cpu, ref = both(ember.grad(f), x)
    assert_close(cpu, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["repeat", "tile", "split_lead", "merge_lead", "no_shared",
                                  "transposed"])
def test_reshapes_keeping_trailing_dims_in_nested_kernels(case):
    # The kernel keeps the indices of trailing dims both shapes share and derives only the
    # leading ones; every arrangement must still read the right elements.
    x = rng.standard_normal((6, 5, 7)).astype(np.float32)
    fns = {
        "repeat": lambda a: jnp.repeat(a, 3, axis=1) * 2.0,
        "tile": lambda a: jnp.tile(a, (2, 1, 3)) + 1.0,
        "split_lead": lambda a: (a.reshape(3, 2, 5, 7) + a[:3, None, :, :]).sum(axis=1),
        "merge_lead": lambda a: a.reshape(30, 7)[::2] - 1.0,
        "no_shared": lambda a: a.reshape(7, 30).T * 3.0,
        "transposed": lambda a: jnp.transpose(a, (1, 0, 2)).reshape(5, 42) + a[0, :, :1],
    }
    f = fns[case]
    cpu, ref = both(f, x)
    assert_close(cpu, ref, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(cpu), f(x), rtol=1e-6)


@pytest.mark.parametrize("shape", [(2, 3), (5, 40), (3, 4, 5)])
def test_loop_fusion_with_outputs_of_several_shapes_writes_every_element(shape):
    # A loop fusion computing x * 2 (of ``shape``) and its flattening: one loop per output
    # shape. A flat loop (one linear index) ran only over the leading dim, dims[0] elements,
    # and left the rest of its outputs unwritten (jnp.intersect1d(..., size=) on floats
    # returned garbage).
    from ember.compiler.evaluator import evaluate_computation
    from ember.compiler.parser import parse_module

    dims = ",".join(map(str, shape))
    n = int(np.prod(shape))
    text = f"""HloModule m

%fused (p: f32[{dims}]) -> (f32[{dims}], f32[{n}]) {{
  %p = f32[{dims}] parameter(0)
  %c = f32[] constant(2)
  %b = f32[{dims}] broadcast_in_dim(%c), broadcast_dimensions={{}}
  %m = f32[{dims}] multiply(%p, %b)
  %r = f32[{n}] reshape(%m)
  ROOT %t = (f32[{dims}], f32[{n}]) tuple(%m, %r)
}}

ENTRY %main (x: f32[{dims}]) -> (f32[{dims}], f32[{n}]) {{
  %x = f32[{dims}] parameter(0)
  %f = (f32[{dims}], f32[{n}]) fusion(%x), kind=loop, calls={{%fused}}
  %a = f32[{dims}] get_tuple_element(%f), index=0
  %r = f32[{n}] get_tuple_element(%f), index=1
  ROOT %out = (f32[{dims}], f32[{n}]) tuple(%a, %r)
}}
"""
    x = np.arange(n, dtype=np.float32).reshape(shape) - 3
    for _ in range(3):  # (fresh pooled buffers hold earlier results: run a few times)
        got = get_backend("cpu").compile(parse_module(text)).execute([x])
        want = evaluate_computation(parse_module(text).entry, [x])
        np.testing.assert_array_equal(got[0], 2 * x)
        np.testing.assert_array_equal(got[1], (2 * x).reshape(-1))
        np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.parametrize("cpu, features, bits", [
    ("sapphirerapids", "+avx2,+avx512f,+fma", 512), ("rocketlake", "+avx512f", 512),
    ("znver4", "+avx512f,+avx512bw", 512), ("cascadelake", "+avx512f", None),
    ("skylake-avx512", "+avx2,+avx512f", None), ("znver3", "+avx2,+fma", None),
    ("haswell", "+avx2,-avx512f", None)])
def test_preferred_vector_bits(cpu, features, bits, monkeypatch):
    monkeypatch.setattr(llvm_support, "host_cpu", lambda: (cpu, features))
    assert llvm_support.preferred_vector_bits() == bits
    assert llvm_support.backend_fingerprint().endswith(f";vector_bits={bits}")  # (cache key)
    text = ('define void @"k"(i8* %".1") noinline\n{\n  ret void\n}\ndeclare void @"g"()\n'
            'define void @"t"() "ember-keep-vector-width" noinline\n{\n  ret void\n}\n'
            'define {float, float} @"s"({float, float} %".1") {\n  ret {float, float} %".1"\n}\n')
    marked = llvm_support._with_vector_width(text)
    if bits is None:
        assert marked == text
    else:
        lines, original = marked.splitlines(), text.splitlines()
        assert lines[0] == original[0] + ' "prefer-vector-width"="512"'
        assert lines[9] == original[9][:-2] + ' "prefer-vector-width"="512" {'
        # (declarations and functions marked by keep_vector_width are untouched)
        assert lines[1:9] + lines[10:] == original[1:9] + original[10:]
        llvm_support.compile_ir(text)  # LLVM reads the attribute


def test_tiled_transpose_kernels_keep_the_cpus_vector_width(tmp_path, monkeypatch):
    # (512-bit vectors turned their 8 x 8 tiles into scatters on an Intel host)
    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))
    t = rng.standard_normal((16, 64, 64)).astype(np.float32)
    got = ember.jit(lambda a: jnp.transpose(a, (2, 0, 1)) + 1.0, backend="cpu")(t)
    np.testing.assert_array_equal(np.asarray(got), np.transpose(t, (2, 0, 1)) + 1)
    ir_text = "".join(open(p).read() for p in glob.glob(str(tmp_path / "*.llvm.ll")))
    kernels = [line for line in ir_text.splitlines() if line.startswith("define")
               and "_kernel_" in line]
    assert kernels and all("ember-keep-vector-width" in line for line in kernels)


@pytest.mark.skipif(llvm_support.preferred_vector_bits() != 512,
                    reason="the host does not prefer 512-bit vectors")
def test_kernels_use_512_bit_vectors(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))
    x = rng.standard_normal(10**5).astype(np.float32)
    got = ember.jit(lambda a: jnp.exp(a) * 2.0 + 1.0, backend="cpu")(x)
    np.testing.assert_allclose(np.asarray(got), np.exp(x) * 2 + 1, rtol=2e-6)
    asm = "".join(open(p).read() for p in glob.glob(str(tmp_path / "*.s")))
    assert "zmm" in asm


def test_strided_arguments_are_copied_into_aligned_memory():
    from ember.backends.cpu.executable import _contiguous
    base = np.arange(512 * 1024, dtype=np.float32).reshape(512, 1024)
    for strided in (base.T, base[:, ::2], base[::-1]):
        got = _contiguous(strided)
        assert got.flags.c_contiguous and not np.shares_memory(got, base)
        np.testing.assert_array_equal(got, strided)
        assert got.ctypes.data % 64 == 0
    assert _contiguous(base) is base
    f = ember.jit(lambda x: x * 2.0 + 1.0)
    np.testing.assert_array_equal(np.asarray(f(ember.device_put(base).T)), base.T * 2 + 1)


def _views():
    """Strided views of every kind: transposes (2-D and 3-D, each axis order), reversed and
    stepped axes, sizes that are not multiples of the tile, and single-element axes."""
    rng = np.random.default_rng(7)
    for shape in ((600, 300), (257, 1), (1, 700), (3, 300, 520), (2, 1, 600, 5), (1000, 10),
                  (3000, 40)):
        base = rng.integers(-1000, 1000, shape).astype(np.int32)
        for perm in itertools.permutations(range(len(shape))):
            yield base.transpose(perm)
            yield base.transpose(perm)[..., ::-1]
            yield base.transpose(perm)[::2]
    yield np.arange(1000.0).reshape(10, 100)[:, ::3].T  # (float64)
    yield np.arange(1000, dtype=np.int8).reshape(500, 2).T[::-1]


@pytest.mark.parametrize("k", range(len(list(_views()))))
def test_tiled_copies_equal_numpys(k):
    view = list(_views())[k]
    out = np.full(view.shape, -1, view.dtype)
    cpu_exe.copy_tiled(out, view)
    np.testing.assert_array_equal(out, view)
    assert out.tobytes() == np.ascontiguousarray(view).tobytes()


@pytest.mark.parametrize("start", ["plain", "pad", "transpose"])
def test_thousands_of_chained_elementwise_ops_compile(start):
    # (An unrolled loop: kernel generation used to recurse once per fused op and hit
    # Python's recursion limit at about 800.)
    x = np.linspace(-1, 1, 60, dtype=np.float32).reshape(6, 10)

    def f(x):
        if start == "pad":
            x = jnp.pad(x, 1)
        elif start == "transpose":
            x = x.T
        for i in range(1500):
            x = jnp.abs(x) - 1.0 if i % 2 else x * 0.999 + 0.5
        return x

    cpu, ref = both(f, x)
    with ember.disable_jit():
        eager = np.asarray(f(x))
    np.testing.assert_array_equal(np.asarray(cpu), np.asarray(ref))
    np.testing.assert_allclose(np.asarray(cpu), eager, rtol=1e-5)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_division_by_a_constant_or_broadcast_rounds_like_xla(dtype):
    # XLA divides bfloat16 by multiplying with a float32 reciprocal (rounding the
    # reciprocal to bfloat16 first moved a third of the quotients by a step) and float16
    # with a float16 one.
    dt = np.dtype(dtype)
    r = np.random.default_rng(1)
    a = r.uniform(-100, 100, 3000).astype(dt)
    s = r.uniform(0.5, 9, 30).astype(dt)
    m = r.uniform(-10, 10, (30, 50)).astype(dt)
    wide = np.float32 if dtype == "bfloat16" else dt
    for c in (3.0, 0.3):
        want = (a.astype(wide) * (np.ones((), wide) / np.asarray(c, dt).astype(wide))).astype(dt)
        for got in both(lambda x, c=c: x / c, a):
            np.testing.assert_array_equal(np.asarray(got).view(np.uint16), want.view(np.uint16))
    want = (m.astype(wide) * (np.ones((), wide) / s.astype(wide))[:, None]).astype(dt)
    for got in both(lambda x, s: x / s[:, None], m, s):
        np.testing.assert_array_equal(np.asarray(got).view(np.uint16), want.view(np.uint16))
