"""Eager float math through the CPU backend's native kernels (ember.backends.cpu.eager_math).

The eager impls of exp, expm1, logistic, rsqrt, erf and erfc run the same vector math as
jitted code: their results equal the jitted ones bit for bit, stay within a few ulp of a
float64 reference, and do not depend on the path (the eager fast path's replay, threads,
strided inputs, the disk cache).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends.cpu import eager_math
from ember.compiler import eval_elementwise as K

FUNCTIONS = {
    "exponential": (lax.exp, np.exp),
    "exponential_minus_one": (lax.expm1, np.expm1),
    # (In long double: float64 formulas would round more than once.)
    "logistic": (lax.logistic, lambda x: 1 / (1 + np.exp(-x.astype(np.longdouble)))),
    "rsqrt": (lax.rsqrt, lambda x: 1 / np.sqrt(x.astype(np.longdouble))),
    "erf": (lax.erf, np.vectorize(math.erf, otypes=[np.float64])),
    "erfc": (lax.erfc, np.vectorize(math.erfc, otypes=[np.float64])),
    "log_plus_one": (lax.log1p, lambda x: np.log1p(x.astype(np.longdouble))),
    # (accuracy tested against mpmath in test_vecmath_special.py)
    "lgamma": (lax.lgamma, None),
    "digamma": (lax.digamma, None),
    "erf_inv": (lax.erf_inv, None),
}
BINARY = {"maximum": (lax.max, np.maximum), "minimum": (lax.min, np.minimum)}
DTYPES = [np.float32, np.float64]


def _values(dtype, n=4099, seed=0) -> np.ndarray:
    """Random values over the range that matters, with the special values mixed in."""
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.standard_normal(n // 2) * 8,
                        np.exp(rng.uniform(-80, 80, n - n // 2)) * rng.choice([-1, 1], n - n // 2)])
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 88.7, -103.9, 709.8, 1e30]
    return np.concatenate([x, specials]).astype(dtype)


def _bits(a) -> np.ndarray:
    a = np.asarray(a)
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


def test_the_tested_functions_are_the_native_ones():
    assert set(FUNCTIONS) == eager_math.OPCODES
    assert set(BINARY) == eager_math.BINARY_OPCODES


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("opcode", sorted(FUNCTIONS))
def test_eager_equals_jit_bit_for_bit(opcode, dtype):
    fn, _ = FUNCTIONS[opcode]
    x = jnp.asarray(_values(dtype))
    eager = np.asarray(fn(x))
    jitted = np.asarray(ember.jit(fn)(x))
    np.testing.assert_array_equal(_bits(eager), _bits(jitted))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("opcode", sorted(k for k, (_, ref) in FUNCTIONS.items() if ref))
def test_native_kernel_within_4_ulp_of_float64(opcode, dtype):
    _, reference = FUNCTIONS[opcode]
    x = _values(dtype)
    got = eager_math.kernel(opcode, np.dtype(dtype))(x)
    with np.errstate(all="ignore"):
        want = reference(x.astype(np.float64)).astype(dtype)
    assert got.dtype == dtype and got.shape == x.shape
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    finite = ~nan & np.isfinite(want)
    np.testing.assert_array_equal(got[~nan & ~finite], want[~nan & ~finite])  # infinities
    ulp = np.spacing(np.abs(want[finite]).astype(dtype))
    err = np.abs(got[finite].astype(np.float64) - want[finite].astype(np.float64)) / ulp
    assert err.max() <= 4, (opcode, dtype, x[finite][err.argmax()], err.max())


@pytest.mark.parametrize("dtype", DTYPES)
def test_threaded_and_strided_calls_match_one_thread(dtype):
    run = eager_math.kernel("exponential", np.dtype(dtype))
    n = eager_math.PARALLEL_MIN_ELEMENTS * 3 + 5
    x = _values(dtype, n=n, seed=1)
    whole = run(x)  # split across threads
    pieces = np.concatenate([run(x[i:i + 1000]) for i in range(0, x.size, 1000)])
    np.testing.assert_array_equal(_bits(whole), _bits(pieces))
    m = x[: 64 * 99].reshape(64, 99)
    np.testing.assert_array_equal(_bits(run(m.T)), _bits(run(m).T))  # a transposed view
    np.testing.assert_array_equal(_bits(run(x[::3])), _bits(whole[::3]))
    scalar = run(np.asarray(x[7]))
    assert scalar.shape == () and _bits(scalar) == _bits(whole[7])
    assert run(x[:0]).shape == (0,)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_low_precision_floats_equal_jit(dtype):
    x = jnp.asarray(np.linspace(-6, 6, 301)).astype(dtype)
    for fn in (lax.exp, lax.logistic, lax.erf, lax.lgamma, lax.erf_inv):
        eager, jitted = fn(x), ember.jit(fn)(x)
        assert eager.dtype == dtype
        np.testing.assert_array_equal(np.asarray(eager).view(np.uint16),
                                      np.asarray(jitted).view(np.uint16))


def test_fast_path_replay_gives_the_first_calls_bits():
    x = jnp.asarray(_values(np.float32, n=513, seed=2))
    results = [jnp.exp(x) for _ in range(4)]  # ordinary path, then the compiled signature
    for r in results[1:]:
        np.testing.assert_array_equal(_bits(r), _bits(results[0]))
    cache = jnp.exp._fast_cache
    assert any(callable(p) for p in cache.by_value.values())  # a compiled program
    np.testing.assert_array_equal(_bits(results[0]), _bits(ember.jit(jnp.exp)(x)))


def test_other_dtypes_and_functions_keep_numpy():
    z = jnp.asarray(np.array([1 + 2j, -0.5j], np.complex64))
    np.testing.assert_allclose(np.asarray(jnp.exp(z)), np.exp(np.asarray(z)), rtol=1e-6)
    assert eager_math.kernel("sine", np.dtype(np.float32)) is None
    assert eager_math.kernel("exponential", np.dtype(np.complex64)) is None
    x = np.linspace(-2, 2, 11, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(jnp.sin(jnp.asarray(x))), np.sin(x))


def test_without_a_provider_the_numpy_impl_runs(monkeypatch):
    impl = K.native_first("exponential", K.float_math(np.exp))
    monkeypatch.setattr(K, "_native_math", None)
    x = np.linspace(-3, 3, 9, dtype=np.float32)
    np.testing.assert_array_equal(impl(x), np.exp(x))
    assert impl.native_kernel(np.dtype(np.float32)) is None
    monkeypatch.setattr(K, "_native_math", eager_math.kernel)  # decided once registered
    np.testing.assert_array_equal(_bits(impl(x)),
                                  _bits(eager_math.kernel("exponential", x.dtype)(x)))


_CHILD = textwrap.dedent("""
    import numpy as np
    import ember.numpy as jnp
    from ember.backends.cpu import llvm_support, native_lib
    calls = []
    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    real = llvm_support.compile_ir
    llvm_support.compile_ir = counting
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    bits = np.asarray(jnp.exp(jnp.asarray(x))).view(np.uint32).tolist()
    print(len(calls), bits)
""")


@pytest.mark.parametrize("shared", ["1", "0"])
def test_second_process_loads_the_kernel_from_the_disk_cache(tmp_path, shared):
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path), EMBER_CPU_SHARED_LIBRARIES=shared)
    runs = [subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                           text=True, timeout=120) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    (first_compiles, first_bits), (second_compiles, second_bits) = (
        r.stdout.split(" ", 1) for r in runs)
    assert int(first_compiles) >= 1 and int(second_compiles) == 0
    assert first_bits == second_bits
    assert any(p.is_file() for p in tmp_path.rglob("*"))


def _pairs(dtype, n=4099, seed=3):
    """Operands covering NaN, infinities, ties, and ties of zeros of either sign."""
    rng = np.random.default_rng(seed)
    x, y = _values(dtype, n, seed), _values(dtype, n, seed + 1)
    zeros = np.array([0.0, -0.0], dtype)
    k = min(400, x.size // 4)
    for v in (x, y):
        v[rng.choice(v.size, k, replace=False)] = rng.choice(zeros, k)
    tie = rng.choice(x.size, k, replace=False)
    y[tie] = x[tie]
    return x, y


def _extreme_reference(opcode, x, y):
    """XLA's maximum/minimum from NumPy's: NaN where either is NaN, and a tie of zeros
    ordered -0 below +0 (NumPy returns either zero)."""
    ufunc = BINARY[opcode][1]
    x, y = np.broadcast_arrays(x, y)
    out = ufunc(x, y)
    both_zero = (x == 0) & (y == 0)
    signs = np.signbit(x) & np.signbit(y) if opcode == "maximum" else np.signbit(x) | np.signbit(y)
    out[both_zero] = np.where(signs[both_zero], -0.0, 0.0)
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("opcode", sorted(BINARY))
def test_binary_kernels_order_zeros_and_propagate_nan(opcode, dtype):
    run = eager_math.kernel(opcode, np.dtype(dtype))
    x, y = _pairs(dtype)
    one = np.asarray(x[5])
    cases = [(x, y), (x, one), (one, y), (x.reshape(1, -1), np.asarray([[y[9]]])),
             (np.broadcast_to(one, y.shape), y), (x, np.array(-0.0, dtype)),
             (np.array(0.0, dtype), y)]
    for a, b in cases:
        got = run(a, b)
        want = _extreme_reference(opcode, a, b)
        assert got is not None and got.shape == want.shape and got.dtype == dtype
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        keep = ~np.isnan(want)
        np.testing.assert_array_equal(_bits(got[keep]), _bits(want[keep]))


@pytest.mark.parametrize("opcode", sorted(BINARY))
def test_binary_kernels_leave_other_layouts_to_numpy(opcode):
    run = eager_math.kernel(opcode, np.dtype(np.float32))
    x, y = _pairs(np.float32, n=60)
    m = x[:64].reshape(8, 8)
    assert run(m, m.T) is None  # (a transposed view)
    assert run(m, y[:8]) is None  # (a broadcast row)
    assert run(x[::2], y[::2]) is None
    assert run(x.astype(np.float64), y.astype(np.float64)) is None  # (another dtype's kernel)
    fn = jnp.maximum if opcode == "maximum" else jnp.minimum  # (broadcasts, as NumPy)
    for a, b in ((m, m.T), (m, y[:8]), (x[::2], y[::2]), (m, y[:8, None])):
        got = np.asarray(fn(jnp.asarray(a), jnp.asarray(b)))
        want = _extreme_reference(opcode, a, b)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(got[~np.isnan(want)], want[~np.isnan(want)])


def test_binary_runner_with_a_fallback_calls_it_for_other_layouts():
    run = eager_math.kernel("maximum", np.dtype(np.float32))
    calls = []

    def fallback(a, b):
        calls.append((a.shape, b.shape))
        return "fallback"

    both = run.with_fallback(fallback)
    x, y = _pairs(np.float32, n=60)
    m = x[:64].reshape(8, 8)
    assert both(m, m.T) == "fallback" and both(x.astype(np.float64), y) == "fallback"
    assert calls == [((8, 8), (8, 8)), (x.shape, y.shape)]
    np.testing.assert_array_equal(_bits(both(x, y)), _bits(run(x, y)))  # (no call)
    assert len(calls) == 2
    assert run.fp_quiet and not both.fp_quiet  # (an unknown fallback may warn)
    assert run.with_fallback(K.quiet(np.maximum)).fp_quiet


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("opcode", sorted(BINARY))
def test_binary_eager_equals_jit_bit_for_bit(opcode, dtype):
    fn, _ = BINARY[opcode]
    x, y = (jnp.asarray(v) for v in _pairs(dtype))
    scalar = jnp.asarray(np.asarray(-0.0, dtype))
    for a, b in ((x, y), (x, scalar), (scalar, y)):
        eager = np.asarray(fn(a, b))
        jitted = np.asarray(ember.jit(fn)(a, b))
        np.testing.assert_array_equal(np.isnan(eager), np.isnan(jitted))
        keep = ~np.isnan(eager)
        np.testing.assert_array_equal(_bits(eager[keep]), _bits(jitted[keep]))
    # Through the ember.numpy fast path (a Python scalar operand), called repeatedly.
    for _ in range(3):
        got = np.asarray(jnp.maximum(x, 0.0) if opcode == "maximum" else jnp.minimum(x, 0.0))
        np.testing.assert_array_equal(_bits(got[~np.isnan(got)]), _bits(
            _extreme_reference(opcode, np.asarray(x), np.zeros((), x.dtype))[~np.isnan(got)]))


@pytest.mark.parametrize("opcode", sorted(BINARY))
def test_binary_threaded_calls_match_pieces(opcode):
    run = eager_math.kernel(opcode, np.dtype(np.float32))
    n = eager_math.PARALLEL_MIN_ELEMENTS * 3 + 5
    x, y = _pairs(np.float32, n=n, seed=5)
    for b in (y, np.asarray(y[3])):
        whole = run(x, b)  # split across threads
        pieces = np.concatenate([run(x[i:i + 1000], b if b.ndim == 0 else b[i:i + 1000])
                                 for i in range(0, n, 1000)])
        np.testing.assert_array_equal(_bits(whole), _bits(pieces))
    assert run(x[:0], y[:0]).shape == (0,)
    assert run(x[:0], np.asarray(y[0])).shape == (0,)
