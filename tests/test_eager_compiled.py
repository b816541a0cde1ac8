"""Eager fast-path programs compiled by the CPU backend for large arrays (ember/numpy/_compiled.py).

A compiled program is chosen only when its first result has the ordinary path's bits; these
tests check that the expected signatures are compiled, and that later calls on other values
(NaN, infinities, signed zeros, subnormals, integer extremes, values at the edges of the
integer ranges) still give the ordinary path's bits, dtypes and weak types.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import dtypes
from ember.numpy import _compiled
from ember.numpy._fastpath import _SEEN, _SLOW, fastpath, ordinary_path
from ember.runtime.array import Array

SHAPE = (256, 256)  # 64 KiB of int8: every dtype reaches _compiled.MIN_BYTES

_FLOAT_SPECIALS = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-40, -1e-45, 3e38, -3e38, 0.5, -0.5,
                   2.5, -2.5, 127.9, 128.0, -128.5, 255.5, 256.0, 2147483520.0, 2147483648.0,
                   -2147483648.0, -2147483904.0, 4294967296.0, 9.3e18, -9.3e18, 1e30]


def _values(dtype, seed: int) -> np.ndarray:
    """Random values of ``dtype`` with its special values mixed in."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    n = int(np.prod(SHAPE))
    if dt == np.bool_:
        return rng.random(n).reshape(SHAPE) < 0.5
    if dtypes.is_integer(dt):
        info = np.iinfo(dt)
        out = rng.integers(max(info.min, -1000), min(info.max, 1000), n, endpoint=True)
        out = out.astype(dt)
        specials = np.array([info.min, info.max, 0, 1, -1 if info.min else 2, info.min + 1,
                             info.max - 1], dtype=np.int64).astype(dt)
    else:
        with np.errstate(over="ignore", under="ignore"):
            out = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(dt)
            specials = np.array(_FLOAT_SPECIALS).astype(dt)
    positions = rng.choice(n, 4 * len(specials), replace=False)
    out[positions] = np.tile(specials, 4)
    return out.reshape(SHAPE)


def _bits(a) -> tuple:
    value = np.asarray(a)
    return value.dtype, a.weak_type, value.shape, value.tobytes()


def _program(fn, args, kwargs=None):
    cache = fn._fast_cache
    return cache.by_value.get(cache.key_objects(args, kwargs or {}))


def _check_compiled_and_exact(fn, make_args, kwargs=None, seeds=(1, 2, 3)):
    """Compiles ``fn``'s signature (three calls), checks it is served by a compiled program,
    then compares the fast path with the ordinary path on other values."""
    args = make_args(0)
    for _ in range(3):
        fn(*args, **(kwargs or {}))
    prog = _program(fn, args, kwargs)
    assert prog not in (None, _SEEN, _SLOW) and hasattr(prog, "serves"), prog
    for seed in seeds:
        args = make_args(seed)
        fast = fn(*args, **(kwargs or {}))
        with ordinary_path():
            slow = fn(*args, **(kwargs or {}))
        assert type(fast) is Array
        assert _bits(fast) == _bits(slow)
        assert not np.asarray(fast).flags.writeable


def _dt(name: str) -> np.dtype:
    return np.dtype(dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("float32", "uint8"),
                                     ("float32", "int8"), ("float32", "uint32"),
                                     ("float32", "float16"), ("float32", "bfloat16"),
                                     ("float16", "int32"), ("bfloat16", "int8"),
                                     ("float16", "float32"), ("int32", "bool")])
def test_astype_is_compiled_and_exact(src, dst):
    _check_compiled_and_exact(jnp.astype, lambda seed: (jnp.asarray(_values(_dt(src), seed)),
                                                        _dt(dst)))


@pytest.mark.parametrize("src,dst", [("float64", "int32"), ("float64", "int64"),
                                     ("float64", "uint64"), ("float32", "int64"),
                                     ("float64", "float16")])
def test_astype_with_x64_is_compiled_and_exact(x64, src, dst):
    _check_compiled_and_exact(jnp.astype, lambda seed: (jnp.asarray(_values(_dt(src), seed)),
                                                        _dt(dst)))


@pytest.mark.parametrize("name,dtype", [
    (name, dtype) for name in ("floor_divide", "remainder", "fmod")
    for dtype in ("int8", "int32", "uint32")] + [
    ("remainder", "float32"), ("fmod", "float32"), ("heaviside", "float32")])
def test_binary_functions_are_compiled_and_exact(name, dtype):
    fn = getattr(jnp, name)
    _check_compiled_and_exact(fn, lambda seed: (jnp.asarray(_values(dtype, seed)),
                                                jnp.asarray(_values(dtype, seed + 100))))
    _check_compiled_and_exact(fn, lambda seed: (jnp.asarray(_values(dtype, seed)), 7))


def _replayed(fn, args) -> bool:
    prog = _program(fn, args)
    return prog not in (None, _SEEN, _SLOW) and not hasattr(prog, "serves")


def _check_replayed_and_exact(fn, make_args):
    args = make_args(0)
    for _ in range(3):
        fn(*args)
    assert _replayed(fn, args), _program(fn, args)
    for seed in (1, 2):
        args = make_args(seed)
        fast = fn(*args)
        with ordinary_path():
            slow = fn(*args)
        assert _bits(fast) == _bits(slow)


def _float32_values(seed: int) -> np.ndarray:
    """Zeros for seed 0 (on which every program gives NumPy's bits), else ``_values``."""
    return np.zeros(SHAPE, np.float32) if seed == 0 else _values("float32", seed)


def test_programs_that_could_round_differently_stay_replayed():
    # Float division by a constant compiles to a multiplication by its reciprocal, float
    # powers and sums to other roundings than NumPy's: never compiled, whatever their size,
    # even where the first call's result (on zeros) would have passed the check.
    _check_replayed_and_exact(jnp.floor_divide, lambda seed: (
        jnp.asarray(_float32_values(seed)), 7.0))
    sum_of_squares = fastpath(lambda x, /: jnp.sum(x * x), nargs=1)
    _check_replayed_and_exact(sum_of_squares, lambda seed: (jnp.asarray(_float32_values(seed)),))


def test_composite_functions_compile_whole_from_the_first_call():
    # (float_power and logaddexp, like JAX's jitted functions, run as ``jit`` on large arrays
    # (``_eager_jit``): the fast path stands aside, and every call has jit's bits)
    for fn, make_args in ((jnp.float_power, lambda seed: (
            jnp.asarray(_float32_values(seed)), 3.0)),
            (jnp.logaddexp, lambda seed: (jnp.asarray(_float32_values(seed)),
                                          jnp.asarray(_float32_values(seed + 1))))):
        for seed in (1, 2, 2, 2):
            args = make_args(seed)
            assert _bits(fn(*args)) == _bits(ember.jit(fn)(*args))
        assert _program(fn, args) is _SLOW


def test_small_arrays_and_single_fast_kernels_stay_replayed():
    assert np.prod(SHAPE) >= _compiled.MIN_BYTES > 100 * 4  # (the tests' sizes)
    small = (jnp.asarray(np.arange(-50, 50, dtype=np.int32)), 7)
    for _ in range(3):
        jnp.floor_divide(*small)
    assert _replayed(jnp.floor_divide, small)
    big = (jnp.asarray(_values("float32", 0)), jnp.asarray(_values("float32", 1)))
    for _ in range(3):
        jnp.add(*big)  # (one NumPy kernel, one pass)
    assert _replayed(jnp.add, big)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32", "uint8"])
@pytest.mark.parametrize("y", [2, 3, 7])
def test_integer_powers_are_compiled_and_exact(dtype, y):
    # (eager integer_pow multiplies in the lowering's order, so floats compile exactly too)
    _check_compiled_and_exact(jnp.power, lambda seed: (jnp.asarray(_values(_dt(dtype), seed)),
                                                       y))


def test_where_clip_and_cumsum_are_compiled_and_exact():
    f32 = "float32"
    _check_compiled_and_exact(jnp.where, lambda seed: (
        jnp.asarray(_values("bool", seed)), jnp.asarray(_values(f32, seed)),
        jnp.asarray(_values(f32, seed + 1))))
    _check_compiled_and_exact(jnp.clip, lambda seed: (jnp.asarray(_values(f32, seed)), -1.5,
                                                      2.0))
    _check_compiled_and_exact(jnp.clip, lambda seed: (jnp.asarray(_values("int32", seed)),
                                                      -10, 10))
    for dtype in ("float32", "int32", "int8"):
        for axis in (0, 1):
            _check_compiled_and_exact(jnp.cumsum, lambda seed, dtype=dtype, axis=axis: (
                jnp.asarray(_values(dtype, seed)), axis))


def test_very_large_single_kernels_are_compiled_and_exact():
    # From SINGLE_KERNEL_MIN_BYTES, one exact NumPy pass is compiled too (two threads);
    # a float division only by an argument of the result's shape.
    shape = (_compiled.SINGLE_KERNEL_MIN_BYTES // 4 // 1024, 1024)

    def big(seed):
        return jnp.asarray(np.resize(_values("float32", seed), shape))

    _check_compiled_and_exact(jnp.add, lambda seed: (big(seed), big(seed + 1)))
    _check_compiled_and_exact(jnp.true_divide, lambda seed: (big(seed), big(seed + 1)))
    _check_compiled_and_exact(jnp.multiply, lambda seed: (big(seed), 3.0))
    zeros = jnp.zeros(shape, jnp.float32)  # (where the reciprocal's product is exact too)
    _check_replayed_and_exact(jnp.true_divide, lambda seed: (zeros if seed == 0 else big(seed),
                                                             3.0))


def test_strided_arguments_are_served_by_the_replay():
    # Compiled programs read dense buffers: a transposed view goes to the NumPy replay (which
    # reads it in place) instead of being copied, with the same bits.
    a, b = _values("int32", 0), _values("int32", 1)
    for _ in range(3):
        jnp.floor_divide(jnp.asarray(a), 7)
    assert hasattr(_program(jnp.floor_divide, (jnp.asarray(a), 7)), "serves")
    view = jnp.transpose(jnp.asarray(b))
    assert not np.asarray(view).flags.c_contiguous
    fast = jnp.floor_divide(view, 7)
    with ordinary_path():
        slow = jnp.floor_divide(view, 7)
    assert _bits(fast) == _bits(slow)
    np.testing.assert_array_equal(np.asarray(fast), np.floor_divide(b.T, 7))


def test_a_signature_first_compiled_on_a_strided_argument_is_replayed():
    # The compiled program cannot be checked on a call it would not compute itself.
    c = jnp.transpose(jnp.asarray(_values("uint32", 5).reshape(128, 512)))
    for _ in range(3):
        jnp.fmod(c, 9)
    assert _replayed(jnp.fmod, (c, 9))


def test_other_default_backends_replay():
    args = (jnp.asarray(_values("int8", 3).reshape(512, 128)), 5)
    previous = ember.config.read("jax_default_backend")
    ember.config.update("jax_default_backend", "interpreter")
    try:
        for _ in range(3):
            jnp.remainder(*args)
        assert _replayed(jnp.remainder, args)
    finally:
        ember.config.update("jax_default_backend", previous)
    for _ in range(3):  # (a config change clears the caches)
        jnp.remainder(*args)
    assert hasattr(_program(jnp.remainder, args), "serves")


def test_dtype_instances_are_static_keys_of_the_fast_path():
    # ``x.astype(y.dtype)`` passes a dtype instance: once an unusable key (every call took
    # the ordinary path), now a signature like ``x.astype(jnp.int32)``.
    x = jnp.asarray(np.arange(6, dtype=np.float32))
    for _ in range(3):
        out = jnp.astype(x, np.dtype("int16"))
    assert out.dtype == np.int16
    assert _program(jnp.astype, (x, np.dtype("int16"))) not in (None, _SEEN, _SLOW)
