"""The eager fast path of ember.numpy's elementwise functions (ember/numpy/_fastpath.py).

Every fast result is compared with the ordinary path (promotion, lax binding, abstract
evaluation, impls) for value bytes, dtype, weak type and shape, across dtypes, scalars,
broadcasting and x64; errors must be the same. Independent NumPy references pin a few values.
"""

from __future__ import annotations

import concurrent.futures
import itertools

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import dtypes
from ember.core import ShapedArray
from ember.jaxpr import JaxprEqn, Var
from ember.lax import base
from ember.lax import elementwise as ew
from ember.numpy import _fastpath, _replay
from ember.numpy._fastpath import _SLOW, ordinary_path
from ember.runtime.array import Array

_VALUES = {
    "b": [True, False, True, True],
    "i": [0, 1, -3, 127, -128, 100],
    "u": [0, 1, 7, 255, 200, 3],
    "f": [0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 3e38, 1e-30, 7.0],
    "c": [0j, 1 + 2j, -1 - 0j, complex(np.inf, 1), complex(np.nan, 0), complex(0, np.inf),
          complex(np.inf, np.inf), -3.5 - 0.5j],
}
X32_DTYPES = ["bool", "int8", "int32", "uint8", "uint32", "float16", "bfloat16", "float32",
              "complex64"]


def _array(dtype: str, shape=(6,), offset: int = 0) -> Array:
    dt = np.dtype(dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    kind = "f" if dtype == "bfloat16" else dt.kind
    vals = _VALUES[kind]
    n = int(np.prod(shape))
    flat = [vals[(i + offset) % len(vals)] for i in range(n)]
    if kind == "f":
        flat = [v if not (dt.itemsize <= 2 and abs(v) > 6e4) else 6e4 for v in flat]
    with np.errstate(all="ignore"):
        value = np.array(flat).astype(dt).reshape(shape)
    return jnp.asarray(value)


def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except Exception as e:  # noqa: BLE001 - the error itself is compared
        return "error", (type(e), str(e))


def _check_same(fast, slow):
    if isinstance(slow, (tuple, list)):
        assert type(fast) is type(slow) and len(fast) == len(slow)
        for f, s in zip(fast, slow):
            _check_same(f, s)
        return
    assert type(fast) is Array and type(slow) is Array
    assert fast.shape == slow.shape
    assert fast.dtype == slow.dtype
    assert fast.weak_type == slow.weak_type
    assert np.asarray(fast).tobytes() == np.asarray(slow).tobytes()
    assert not np.asarray(fast).flags.writeable


def _compare(fn, *args, expect_fast: bool | None = None):
    """Calls ``fn`` on the ordinary path, then thrice more (first sight, compile, replay)."""
    with ordinary_path():
        slow = _outcome(fn, *args)
    calls = [_outcome(fn, *args) for _ in range(3)]
    for fast in calls:
        assert fast[0] == slow[0], (fast, slow)
        if slow[0] == "ok":
            _check_same(fast[1], slow[1])
        else:
            assert fast[1] == slow[1]
    if expect_fast is not None:
        cache = fn._fast_cache
        keys = cache.key_objects(args, {})
        prog = cache.by_value.get(keys)
        assert (prog is not None and prog is not _SLOW) == expect_fast, (keys, prog)
    return slow


UNARY = ["negative", "positive", "abs", "sign", "sqrt", "exp", "log1p", "sin", "tanh",
         "arctan", "floor", "trunc", "rint", "round", "isnan", "isfinite", "signbit",
         "logical_not", "invert", "square", "reciprocal", "real", "imag", "conj", "angle",
         "frexp", "modf", "log2", "sinc", "deg2rad", "expm1", "cbrt"]
BINARY = ["add", "subtract", "multiply", "true_divide", "floor_divide", "remainder", "fmod",
          "power", "maximum", "minimum", "fmax", "arctan2", "logaddexp", "hypot", "equal",
          "less", "greater_equal", "logical_and", "logical_xor", "bitwise_and", "bitwise_xor",
          "left_shift", "right_shift", "divmod", "copysign", "nextafter", "heaviside",
          "ldexp", "gcd", "float_power"]


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", X32_DTYPES)
def test_unary_matches_ordinary_path(name, dtype):
    _compare(getattr(jnp, name), _array(dtype))


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint32", "float16", "bfloat16", "float32",
                                   "complex64"])
def test_binary_same_dtype_matches_ordinary_path(name, dtype):
    _compare(getattr(jnp, name), _array(dtype), _array(dtype, offset=3))


@pytest.mark.parametrize("name", ["add", "multiply", "true_divide", "maximum", "power",
                                  "less", "remainder", "bitwise_or", "arctan2"])
@pytest.mark.parametrize("d1,d2", [("int8", "uint8"), ("int32", "float32"),
                                   ("float16", "bfloat16"), ("bool", "int8"),
                                   ("uint32", "int32"), ("float32", "complex64")])
def test_binary_mixed_dtypes_matches_ordinary_path(name, d1, d2):
    _compare(getattr(jnp, name), _array(d1), _array(d2, offset=1))
    _compare(getattr(jnp, name), _array(d2), _array(d1, offset=2))


@pytest.mark.parametrize("scalar", [0, 1, 300, -7, 2 ** 31 - 1, -2 ** 31, 1.5, -0.0, 0.0,
                                    float("nan"), float("inf"), 1e10, 3.4e38, True, False,
                                    2 + 3j])
@pytest.mark.parametrize("dtype", X32_DTYPES)
@pytest.mark.parametrize("name", ["add", "multiply", "subtract", "maximum", "less",
                                  "power", "true_divide"])
def test_python_scalars_match_ordinary_path(name, dtype, scalar):
    fn = getattr(jnp, name)
    _compare(fn, _array(dtype), scalar)
    _compare(fn, scalar, _array(dtype))


@pytest.mark.parametrize("a,b", [(2, 3), (2, 3.5), (1.5, 2.5), (True, 2), (1j, 2.0),
                                 (True, False), (0, -0.0)])
def test_two_python_scalars(a, b):
    for name in ["add", "multiply", "maximum", "equal", "true_divide"]:
        _compare(getattr(jnp, name), a, b)


@pytest.mark.parametrize("s1,s2", [((2, 3), (3,)), ((2, 1), (1, 4)), ((), (5,)),
                                   ((3,), ()), ((), ()), ((0,), (1,))])
def test_broadcasting(s1, s2):
    a = _array("float32", s1)
    b = _array("int32", s2, offset=1)
    for name in ["add", "multiply", "maximum", "greater", "arctan2", "logaddexp"]:
        _compare(getattr(jnp, name), a, b)
        _compare(getattr(jnp, name), b, a)
    _compare(jnp.where, a > 1, a, b)
    _compare(jnp.where, _array("bool", s2), 1.0, a)


def test_incompatible_shapes_raise_like_the_ordinary_path():
    slow = _compare(jnp.add, _array("float32", (3,)), _array("float32", (4,)))
    assert slow[0] == "error" and slow[1][0] is TypeError


def test_where_and_clip():
    x, y = _array("float32"), _array("float32", offset=2)
    _compare(jnp.where, x > 0, x, y, expect_fast=True)
    _compare(jnp.where, x > 0, x, 0.0, expect_fast=True)
    _compare(jnp.where, True, x, 2)
    _compare(jnp.where, _array("int8"), _array("int8"), _array("uint8"))
    _compare(jnp.clip, x, -1.0, 2.0, expect_fast=True)
    _compare(jnp.clip, _array("int8"), 0, 100)
    # Other call forms take the ordinary path.
    np.testing.assert_array_equal(jnp.clip(x, max=1.0), jnp.minimum(x, 1.0))
    assert jnp.where(jnp.asarray([0, 3]))[0].tolist() == [1]


def test_fast_path_is_taken_for_common_signatures():
    x = _array("float32")
    _compare(jnp.add, x, x, expect_fast=True)
    _compare(jnp.multiply, x, 2.0, expect_fast=True)
    _compare(jnp.add, x, 1, expect_fast=True)
    _compare(jnp.sin, x, expect_fast=True)
    _compare(jnp.power, x, 3, expect_fast=True)
    _compare(jnp.add, _array("int8"), 300, expect_fast=True)


def test_integer_overflow_wraps_and_nan_propagates():
    i8 = jnp.asarray(np.array([127, -128, 5], np.int8))
    for _ in range(2):
        out = jnp.add(i8, 1)
        assert out.dtype == np.int8 and out.tolist() == [-128, -127, 6]
        assert jnp.multiply(i8, 300).tolist() == (np.array([127, -128, 5], np.int8)
                                                  * np.int8(44)).tolist()
    f = jnp.asarray(np.array([np.nan, 1.0, np.inf], np.float32))
    for _ in range(2):
        out = jnp.maximum(f, 2.0)
        assert np.isnan(out[0]) and out.tolist()[1:] == [2.0, np.inf]
        assert np.isnan(jnp.subtract(f, np.inf)[2])


def test_no_warnings_on_bad_values():
    f = jnp.asarray(np.array([0.0, -1.0, 3e38], np.float32))
    with np.errstate(all="raise"):
        for _ in range(2):
            jnp.log(f)
            jnp.true_divide(f, 0.0)
            jnp.multiply(f, 10.0)
            jnp.sqrt(f)


def test_programs_of_native_kernels_skip_the_error_state_and_leave_no_flags():
    # Native loops never touch NumPy's error state, so their programs do not set it; the
    # hardware flags they raise (exp overflow, NaN) must not reach a later NumPy call.
    f = jnp.asarray(np.array([100.0, -0.0, np.nan, 3e38, -1e30, 0.0], np.float32))
    with np.errstate(all="raise"):
        for _ in range(4):
            jnp.exp(f), jnp.expm1(f), jnp.maximum(f, f), jnp.minimum(f, 0.0)
            np.add(np.ones(3), 1.0)  # (would raise FloatingPointError on stale flags)
            jnp.multiply(f, 10.0)  # (NumPy's kernel: overflow, under the program's state)
    for fn, args, prim in ((jnp.exp, (f,), ew.exp_p), (jnp.maximum, (f, f), ew.max_p),
                           (jnp.minimum, (f, 0.0), ew.min_p), (jnp.multiply, (f, 10.0), None)):
        cache = fn._fast_cache
        prog = cache.by_id[cache.id_key(cache.key_objects(args, {}))][0]
        native = prim is not None and prim.impl.native_kernel(np.dtype(np.float32)) is not None
        assert ("_errset" in prog.source) != native, prog.source


def test_python_int_out_of_range_raises_every_time():
    x = _array("int32")
    jnp.add(x, 5)
    jnp.add(x, 5)  # compiles the (i32[6], int) signature
    for _ in range(2):
        with pytest.raises(OverflowError):
            jnp.add(x, 2 ** 31)
        with pytest.raises(OverflowError):
            x + 2 ** 40
    assert jnp.add(x, 5).tolist() == (np.asarray(x) + 5).tolist()


@pytest.mark.parametrize("args", [
    ("add", [_array("float32"), [1.0, 2.0]]),
    ("add", [_array("float32"), "a"]),
    ("add", [_array("float32"), None]),
    ("subtract", [_array("bool"), _array("bool")]),
    ("bitwise_and", [_array("float32"), _array("float32")]),
    ("left_shift", [_array("float32"), 1]),
    ("negative", [_array("bool")]),
    ("power", [_array("int32"), -2]),
    ("ldexp", [_array("float32"), _array("float32")]),
    ("frexp", [_array("complex64")]),
])
def test_errors_match_ordinary_path(args):
    name, call_args = args
    slow = _compare(getattr(jnp, name), *call_args)
    assert slow[0] == "error"
    assert slow[1][0] in (TypeError, ValueError, NotImplementedError)


def test_operators():
    x = _array("float32")
    i = _array("int32")
    cases = [lambda: x + 1, lambda: 1 + x, lambda: x * 2.0, lambda: 2.0 * x, lambda: x - i,
             lambda: i // 2, lambda: i % 3, lambda: x ** 2, lambda: 2 ** i, lambda: -x,
             lambda: abs(x), lambda: ~i, lambda: x > 0.5, lambda: x == x, lambda: i & 6,
             lambda: i << 1, lambda: x / 3, lambda: 1 / x, lambda: i != 2]
    for case in cases:
        with ordinary_path():
            slow = case()
        for _ in range(2):
            _check_same(case(), slow)
    assert (x + np.float32(1)).dtype == np.float32  # NumPy operands take the ordinary path
    assert (x.__sub__([1]) is NotImplemented)  # (x + [1] raises, as in JAX)


def test_operator_methods_run_compiled_programs_with_operands_in_order():
    # Array operators look up the function's compiled programs themselves: reflected ones
    # must pass their operands swapped, and anything else must still reach the method.
    x, y, i = _array("float32"), _array("float32", offset=3), _array("int32", offset=2)
    cases = [lambda: x - y, lambda: y - x, lambda: 2.5 - x, lambda: x - 2.5, lambda: 3 / x,
             lambda: x / 3, lambda: 7 // i, lambda: i // 7, lambda: 5 % i, lambda: 1 << i,
             lambda: i >> 1, lambda: 2 - i, lambda: 1.5 < x, lambda: x <= y, lambda: 0 == i,
             lambda: x != 2.0, lambda: i & 3, lambda: 6 ^ i, lambda: x @ y, lambda: 2 ** i]
    for case in cases:
        with ordinary_path():
            slow = case()
        for _ in range(4):  # (first sight, compile, then programs)
            _check_same(case(), slow)
    # The programs do serve the operators: count the runs of subtract's (f32[6], f32[6]).
    cache = jnp.subtract._fast_cache
    prog, keys = cache.by_id[cache.id_key(cache.key_objects((x, y), {}))]
    runs = []

    def counted(a, b):
        runs.append(1)
        return prog(a, b)

    cache.by_id[cache.id_key(keys)] = (counted, keys)
    cache.last[0] = _fastpath._NO_ENTRY
    assert np.asarray(x - y).tobytes() == np.asarray(jnp.subtract(x, y)).tobytes()
    assert len(runs) == 2
    cache.clear()


def test_operator_methods_still_defer_and_trace():
    x = _array("float32")
    for _ in range(3):
        x - x, x * 2.0  # (compiled)

    class Other:
        def __rsub__(self, other):
            return "deferred"

        def __rmul__(self, other):
            return "deferred"

    class Wrapped:
        def __jax_array__(self):
            return jnp.ones(6, np.float32)

    for _ in range(3):
        assert x - Other() == "deferred" and x * Other() == "deferred"
        np.testing.assert_array_equal(np.asarray(x - Wrapped()), np.asarray(x) - 1)
        with pytest.raises(TypeError):
            x * [1.0]
    out = ember.jit(lambda t: x - t * 2.0)(x)  # (a tracer operand: the method's route)
    with np.errstate(all="ignore"):
        want = np.asarray(x) - np.asarray(x) * np.float32(2)
    np.testing.assert_array_equal(np.asarray(out), want)


def test_positive_returns_its_argument():
    x = _array("float32")
    assert jnp.positive(x) is x
    assert jnp.positive(x) is x


@pytest.mark.parametrize("name", ["add", "multiply", "true_divide", "power", "maximum"])
def test_x64_toggle(name):
    fn = getattr(jnp, name)
    ember.config.update("jax_enable_x64", True)
    try:
        x64 = [jnp.asarray(np.array([1, 2, 3], np.int64)),
               jnp.asarray(np.array([1.5, -2.0, 0.5])), 2, 2.5, 2 ** 40]
        for a, b in itertools.product(x64, repeat=2):
            _compare(fn, a, b)
        assert fn(2, 2.5).dtype == np.float64
        if name != "true_divide":
            assert fn(x64[0], 2 ** 40).dtype == np.int64
    finally:
        ember.config.update("jax_enable_x64", False)
    assert fn(2, 2.5).dtype == np.float32
    slow = _compare(fn, jnp.asarray(np.array([1, 2, 3], np.int32)), 2 ** 40)
    # An int exponent is static (integer_pow); elsewhere the int must fit in int32.
    assert slow[0] == ("ok" if name == "power" else "error")


def test_x64_toggle_invalidates_compiled_signatures():
    x = jnp.asarray(np.array([1, 2], np.int32))
    for _ in range(3):
        assert jnp.multiply(3, 2.5).dtype == np.float32
        assert jnp.add(x, 1).dtype == np.int32
    ember.config.update("jax_enable_x64", True)
    try:
        for _ in range(3):
            assert jnp.multiply(3, 2.5).dtype == np.float64
            assert jnp.add(x, 1).dtype == np.int32
            assert jnp.add(x, 2 ** 40).tolist() == [1, 2]  # wraps to int32, as in JAX
            assert jnp.add(2 ** 40, 1).dtype == np.int64
    finally:
        ember.config.update("jax_enable_x64", False)
    assert jnp.multiply(3, 2.5).dtype == np.float32


def test_tracing_does_not_take_the_fast_path():
    x = _array("float32")
    f = ember.jit(lambda v: jnp.maximum(v * 2.0 + 1, 0.5), backend="interpreter")
    ref = np.maximum(np.asarray(x) * np.float32(2) + np.float32(1), np.float32(0.5))
    np.testing.assert_array_equal(np.asarray(f(x)), ref)
    cache = jnp.sin._fast_cache
    before = dict(cache.by_value)
    y = _array("float32", (7,))
    ember.make_jaxpr(lambda v: jnp.sin(v))(y)
    assert cache.by_value == before  # tracing left the cache alone
    jaxpr = ember.make_jaxpr(lambda v: jnp.add(v, 1.0))(y)
    assert "add" in str(jaxpr)
    g = ember.grad(lambda v: jnp.sum(jnp.tanh(v) * 3.0))(x)
    ref = 3.0 * (1 - np.tanh(np.asarray(x, np.float64)) ** 2)
    finite = np.isfinite(ref)
    np.testing.assert_allclose(np.asarray(g)[finite], ref[finite], rtol=1e-5)


@pytest.mark.skipif(not hasattr(ember, "vmap"), reason="ember.vmap not available yet")
def test_vmap_uses_tracers():
    x = jnp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    out = ember.vmap(lambda r: jnp.maximum(r, 2.0) * r)(x)
    ref = np.maximum(np.asarray(x), 2.0) * np.asarray(x)
    np.testing.assert_array_equal(np.asarray(out), ref)


def test_pending_array_inputs():
    value = np.array([1.0, 2.0, 3.0], np.float32)
    future = concurrent.futures.Future()
    pending = Array._make_pending(ShapedArray((3,), np.float32), future, 0)
    future.set_result([value])
    x = jnp.asarray(value)
    for _ in range(2):
        jnp.add(x, 1.0)  # compiles the signature for ready arrays
        jnp.multiply(x, x)
    for _ in range(2):
        out = jnp.add(pending, 1.0)
        assert out.tolist() == [2.0, 3.0, 4.0]
        assert jnp.multiply(pending, x).tolist() == [1.0, 4.0, 9.0]


def test_non_ember_inputs_take_the_ordinary_path():
    x = _array("float32")
    for other in (np.float32(2), np.arange(6, dtype=np.float32), np.int64(3)):
        _compare(jnp.add, x, other, expect_fast=False)
        _compare(jnp.multiply, other, x, expect_fast=False)


_BINARY_PRIMS = {"add", "sub", "mul", "max", "min", "eq", "ne", "lt", "le", "gt", "ge",
                 "and", "or", "xor", "atan2", "div"}


def _sample(dt, reverse=False):
    kind = "f" if dt == dtypes.bfloat16 else np.dtype(dt).kind
    with np.errstate(all="ignore"):
        out = np.array(_VALUES[kind] * 2).astype(dt)[:8]
    return out[::-1].copy() if reverse else out


def test_raw_kernels_agree_with_the_impls():
    prims = [*_replay.ANY_DTYPE, *_replay.NOT_LOW_FLOAT, ew.div_p]
    checked = 0
    for prim, dt in itertools.product(prims, base.all_dtypes):
        nargs = 2 if prim.name in _BINARY_PRIMS else 1
        aval = ShapedArray((8,), dt)
        try:
            out_aval = prim.abstract_eval(*[aval] * nargs)
        except TypeError:
            continue  # the primitive rejects this dtype
        eqn = JaxprEqn([Var(aval)] * nargs, [Var(out_aval)], prim, {})
        raw = _replay.raw_kernel(eqn)
        if raw is None:
            continue
        args = (_sample(dt), _sample(dt, reverse=True))[:nargs]
        with np.errstate(all="ignore"):
            expected = np.asarray(prim.impl(*args))
            got = np.asarray(raw(*args))
        assert got.dtype == expected.dtype == out_aval.dtype, (prim, dt)
        assert got.tobytes() == expected.tobytes(), (prim, dt)
        checked += 1
    assert checked > 150


def test_raw_conversions_and_select_agree_with_the_impls():
    for src, dst in itertools.product(base.all_dtypes, repeat=2):
        raw = _replay.raw_convert(np.dtype(src), np.dtype(dst))
        if raw is None:
            continue
        x = _sample(src)
        with np.errstate(all="ignore"):
            expected = np.asarray(ew.convert_element_type_p.impl(x, new_dtype=np.dtype(dst),
                                                                 weak_type=False))
            got = raw(x)
        assert got.dtype == expected.dtype == dst
        assert got.tobytes() == expected.tobytes(), (src, dst)
    which = np.array([True, False, True, False])
    a, b = np.arange(4.0), -np.arange(4.0)
    np.testing.assert_array_equal(_replay._select2(which, a, b),
                                  ew.select_n_p.impl(which, a, b))


def test_one_off_signatures_are_not_compiled():
    x = jnp.asarray(np.ones(11, np.float32))
    jnp.cos(x)
    assert jnp.cos._fast_cache.by_value[(x.aval,)] is _fastpath._SEEN
    jnp.cos(x)
    assert callable(jnp.cos._fast_cache.by_value[(x.aval,)])


def test_config_change_clears_caches():
    x = _array("float32")
    jnp.add(x, 1.0)
    assert jnp.add._fast_cache.by_value
    ember.config.update("jax_enable_x64", False)
    assert not jnp.add._fast_cache.by_value


def test_cache_sizes_are_bounded():
    cache = jnp.negative._fast_cache
    for n in range(_fastpath._L2_SIZE + 10):
        jnp.negative(jnp.asarray(np.zeros(n + 1, np.float32)))
    assert len(cache.by_value) <= _fastpath._L2_SIZE
    assert len(cache.by_id) <= _fastpath._L1_SIZE


def test_wrappers_keep_names_and_docs():
    assert jnp.add.__name__ == "add" and "x1 + x2" in jnp.add.__doc__
    assert jnp.asin is jnp.arcsin
    with pytest.raises(TypeError, match="add"):
        jnp.add(1)


# ------------------------------------------------------------------ static arguments


def _compare_kw(fn, args, kwargs):
    with ordinary_path():
        slow = _outcome(lambda: fn(*args, **kwargs))
    for _ in range(3):
        fast = _outcome(lambda: fn(*args, **kwargs))
        assert fast[0] == slow[0], (fast, slow)
        if slow[0] == "ok":
            _check_same(fast[1], slow[1])
        else:
            assert fast[1] == slow[1]
    return slow


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "var", "std", "all",
                                  "any", "argmax", "argmin", "cumsum", "nansum", "ptp",
                                  "count_nonzero"])
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint32", "float16", "float32"])
def test_reductions_match_ordinary_path(name, dtype):
    fn = getattr(jnp, name)
    x = _array(dtype, (2, 3))
    _compare_kw(fn, (x,), {})
    for axis in (0, 1, -1, (0, 1), 2, (0, 0), 1.0, None):
        _compare_kw(fn, (x,), {"axis": axis})
        _compare_kw(fn, (x, axis), {})
    if name not in ("argmax", "argmin", "cumsum"):
        _compare_kw(fn, (x,), {"axis": 1, "keepdims": True})
    if name in ("sum", "prod", "mean", "cumsum"):
        _compare_kw(fn, (x,), {"dtype": jnp.float32})
        _compare_kw(fn, (x,), {"dtype": "int32"})
    _compare_kw(fn, (3.5,), {})


def test_array_methods_take_the_fast_path():
    x = _array("float32", (2, 3))
    cases = [lambda: x.sum(), lambda: x.sum(axis=0), lambda: x.mean(1), lambda: x.max(),
             lambda: x.reshape(3, 2), lambda: x.reshape((6,)), lambda: x.reshape(-1),
             lambda: x.T, lambda: x.transpose(1, 0), lambda: x.astype(jnp.int32),
             lambda: x.astype("float16"), lambda: x[0], lambda: x[:, 1], lambda: x[..., None],
             lambda: x[-1, ::-2], lambda: x[1:, np.int64(0)], lambda: x @ x.T,
             lambda: x.ravel(), lambda: x.squeeze(), lambda: x.argmax(axis=1),
             lambda: x.cumsum(axis=1), lambda: x[True]]
    for case in cases:
        with ordinary_path():
            slow = case()
        for _ in range(3):
            _check_same(case(), slow)
    assert "run" in repr(jnp.sum._fast_cache.by_value)  # compiled programs are cached


@pytest.mark.parametrize("call", [
    ("reshape", (_array("float32", (2, 3)), (3, 2)), {}),
    ("reshape", (_array("float32", (2, 3)), (4, 2)), {}),
    ("reshape", (_array("float32", (2, 3)), (3, -1)), {"order": "F"}),
    ("transpose", (_array("int8", (2, 3)),), {"axes": (1, 0)}),
    ("transpose", (_array("int8", (2, 3)), (0, 0)), {}),
    ("swapaxes", (_array("float32", (2, 3, 1)), 0, 2), {}),
    ("moveaxis", (_array("float32", (2, 3, 1)), 0, -1), {}),
    ("expand_dims", (_array("float32", (2, 3)), (0, 3)), {}),
    ("squeeze", (_array("float32", (1, 3)),), {"axis": 0}),
    ("squeeze", (_array("float32", (2, 3)),), {"axis": 0}),
    ("flip", (_array("complex64", (2, 3)),), {"axis": 1}),
    ("broadcast_to", (_array("float32", (3,)), (2, 3)), {}),
    ("broadcast_to", (_array("float32", (3,)), (2, 4)), {}),
    ("broadcast_to", (2.5, (2,)), {}),
    ("astype", (_array("float32"), jnp.int8), {}),
    ("astype", (_array("float32"), np.dtype("bool")), {}),
    ("astype", (_array("float32"), None), {}),
    ("matmul", (_array("float32", (2, 3)), _array("float32", (3,))), {}),
    ("matmul", (_array("int8", (2, 3)), _array("float16", (3, 2))), {}),
    ("matmul", (_array("float32", (2, 3)), _array("float32", (2, 3))), {}),
    ("dot", (_array("float32", (3,)), _array("float32", (3,))), {}),
    ("dot", (_array("float32", (3,)), 2.0), {}),
    ("outer", (_array("int32", (3,)), _array("float32", (2,))), {}),
    ("tensordot", (_array("float32", (2, 3)), _array("float32", (3, 2))), {"axes": 1}),
    ("_getitem", (_array("float32", (2, 3)), (1, 5)), {}),
    ("_getitem", (_array("float32", (2, 3)), (slice(None), None, 0)), {}),
    ("_getitem", (_array("float32", (2, 3)), 1.5), {}),
])
def test_static_arguments_match_ordinary_path(call):
    name, args, kwargs = call
    _compare_kw(getattr(jnp, name), args, kwargs)


def test_static_keys_tell_values_apart():
    x = _array("float32", (2, 3))
    assert jnp.sum(x, axis=1).shape == (2,)
    assert jnp.sum(x, axis=1).shape == (2,)
    with pytest.raises(TypeError):
        jnp.sum(x, axis=1.0)  # 1.0 == 1, but a float axis is an error
    with pytest.raises(TypeError):
        jnp.sum(x, axis=True)  # True == 1 too
    assert jnp.astype(x, "int8").dtype == np.int8
    assert jnp.astype(x, np.dtype("int8")).dtype == np.int8
    # Unhashable or array-valued static arguments take the ordinary path.
    np.testing.assert_array_equal(jnp.sum(x, where=x > 0), np.where(np.asarray(x) > 0,
                                                                    np.asarray(x), 0).sum())
    assert jnp.sum(x, axis=[0, 1]).shape == ()


def test_unreplayable_signatures_stay_on_the_ordinary_path():
    scalar = jnp.asarray(np.float32(2.0))
    for _ in range(3):
        assert jnp.imag(scalar).tolist() == 0.0  # a constant output
    assert jnp.imag._fast_cache.by_value[(scalar.aval,)] is _SLOW

    def branchy(x, /):  # value-dependent Python control flow: cannot be traced
        return jnp.negative(x) if float(jnp.sum(x)) > 0 else jnp.add(x, 1.0)

    fast = _fastpath.fastpath(branchy, 1)
    pos, neg = jnp.asarray(np.ones(3, np.float32)), jnp.asarray(-np.ones(3, np.float32))
    for _ in range(3):
        assert fast(pos).tolist() == [-1.0] * 3
        assert fast(neg).tolist() == [0.0] * 3
    assert fast._fast_cache.by_value[(pos.aval,)] is _SLOW


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint16, np.bool_,
                                   np.complex64])
def test_large_selects_by_masks_give_wheres_bits(dtype):
    # (the replay's select of two cases picks bits by integer masks on large arrays:
    # NumPy's where branches on each element)
    from ember.numpy import _replay
    rng = np.random.default_rng(4)
    n = 3 * _replay._BLEND_MIN_SIZE
    which = rng.random(n) > 0.5
    a = (rng.standard_normal(n) * 100).astype(dtype)
    b = (rng.standard_normal(n) * 100).astype(dtype)
    if np.dtype(dtype).kind == "f":
        a[:6] = [np.nan, -0.0, np.inf, -np.inf, 0.0, -np.nan]
        b[:6] = [-0.0, np.nan, 1.0, -np.nan, -np.inf, 0.0]
    for w, c0, c1 in ((which, a, b), (which, a, b[3]), (which.astype(np.int32), a[0], b),
                      (which.reshape(3, -1), a.reshape(3, -1), b.reshape(3, -1)[:1])):
        got = _replay._select2(w, c0, c1)
        want = np.where(w, c1, c0)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()


# ember.nn's composite functions and the linalg norms: one replayed program per signature.
_NN_CALLS = {
    "celu": ((), {}), "elu": ((), {"alpha": 0.5}), "gelu": ((), {"approximate": False}),
    "glu": ((), {"axis": -1}), "hard_sigmoid": ((), {}), "hard_silu": ((), {}),
    "hard_tanh": ((), {}), "leaky_relu": ((), {}), "log_sigmoid": ((), {}),
    "log_softmax": ((), {"axis": 0}), "logmeanexp": ((), {"axis": 1}),
    "logsumexp": ((), {"axis": -1, "keepdims": True}), "mish": ((), {}), "selu": ((), {}),
    "silu": ((), {}), "soft_sign": ((), {}), "softmax": ((), {"axis": -1}),
    "softplus": ((), {}), "sparse_plus": ((), {}), "sparse_sigmoid": ((), {}),
    "squareplus": ((), {}), "standardize": ((), {"axis": -1}),
}


def _check_fast_calls(fn, args, kwargs):
    with ordinary_path():
        slow = fn(*args, **kwargs)
    for _ in range(4):  # (first sight, compile, then the program)
        _check_same(fn(*args, **kwargs), slow)
    cache = fn._fast_cache
    prog = cache.by_id.get(cache.id_key(cache.key_objects(args, kwargs)))
    assert prog is not None, "the signature was not compiled"
    return prog[0]


@pytest.mark.parametrize("name", sorted(_NN_CALLS))
def test_nn_functions_replay_the_ordinary_paths_bits(name):
    x = _array("float32", shape=(4, 6))  # (zeros of both signs, infinities, NaN, extremes)
    extra, kwargs = _NN_CALLS[name]
    _check_fast_calls(getattr(ember.nn, name), (x, *extra), kwargs)


def test_nn_one_hot_and_norms_replay_the_ordinary_paths_bits():
    _check_fast_calls(ember.nn.one_hot, (_array("int32", shape=(5,)), 130), {})
    x = _array("float32", shape=(4, 6))
    _check_fast_calls(jnp.linalg.norm, (x,), {"axis": -1})
    _check_fast_calls(jnp.linalg.vector_norm, (x,), {"ord": 1})
    _check_fast_calls(jnp.linalg.matrix_norm, (x,), {})


def test_programs_run_custom_derivative_bodies_inline():
    # softplus is logaddexp(x, 0), a custom_jvp function: its program runs the body's
    # kernels (native exp and log1p) instead of evaluating the call equation by equation.
    from ember.custom_derivatives import custom_jvp_call_p
    prog = _check_fast_calls(ember.nn.softplus, (_array("float32", shape=(3, 5)),), {})
    kernels = [v for k, v in prog.__globals__.items() if k.startswith("_k")]
    assert kernels and not any(getattr(k, "func", k) is custom_jvp_call_p.impl
                               for k in kernels)



@pytest.mark.parametrize("name,make,kwargs", [
    ("stack", list, {}), ("stack", tuple, {"axis": 1}), ("concatenate", list, {"axis": 0}),
    ("concatenate", tuple, {"axis": None}), ("concat", list, {"axis": 1}),
    ("hstack", list, {}), ("vstack", tuple, {}), ("dstack", list, {}),
    ("column_stack", list, {}), ("stack", list, {"axis": -1, "dtype": jnp.float16}),
])
def test_sequence_functions_replay_the_ordinary_paths_bits(name, make, kwargs):
    fn = getattr(jnp, name)
    x, y, z = (_array("float32", shape=(4, 6), offset=k) for k in range(3))
    for arrays in (make([x, y]), make([x, y, z]), make([z])):
        with ordinary_path():
            slow = fn(arrays, **kwargs)
        for _ in range(4):
            _check_same(fn(arrays, **kwargs), slow)


def test_sequence_functions_keep_every_other_route():
    x = _array("float32", shape=(2, 3))
    i = _array("int32", shape=(2, 3))
    for _ in range(3):  # mixed dtypes promote; NumPy arrays and scalars take the plain path
        assert jnp.concatenate([x, i]).dtype == np.float32
        np.testing.assert_array_equal(np.asarray(jnp.stack([x, np.ones((2, 3))])[1]), 1.0)
        with pytest.raises(TypeError, match="must match exactly"):  # (as in JAX)
            jnp.concatenate([x, x.T])
        with pytest.raises(ValueError):
            jnp.stack([])
    many = [x] * 40  # (beyond the compiled lengths)
    assert jnp.stack(many).shape == (40, 2, 3)
    out = ember.jit(lambda a, b: jnp.stack([a, b * 2.0]))(x, x)  # (tracers: the plain path)
    np.testing.assert_array_equal(np.asarray(out[1]), np.asarray(x) * 2)
    keys = [ember.random.key(k) for k in range(3)]  # (key arrays: the extended handler)
    for _ in range(3):
        assert jnp.stack(keys).shape == (3,)


def test_indexing_by_arrays_replays_the_ordinary_paths_bits():
    x = _array("float32", shape=(5, 6, 4))
    i = jnp.asarray(np.array([0, 4, -1, -5, 2, 3], np.int32))  # (negative indices too)
    j = jnp.asarray(np.array([[1, 0], [5, 2]], np.int8))
    b = jnp.asarray(np.array([True, False, True, True, False]))
    cases = [lambda: x[i], lambda: x[:, i], lambda: x[i, 3], lambda: x[j], lambda: x[..., j],
             lambda: x[i, None], lambda: x[(i,)], lambda: x[i, i], lambda: x[1:3, j, 0],
             lambda: x[j, :, 1:], lambda: x[jnp.asarray(2)], lambda: x[b],
             lambda: x[jnp.asarray([0.5])]]  # (a float index: the same TypeError)
    for case in cases:
        with ordinary_path():
            slow = _outcome(case)
        for _ in range(4):
            fast = _outcome(case)
            assert fast[0] == slow[0]
            if slow[0] == "ok":
                _check_same(fast[1], slow[1])
            else:
                assert fast[1] == slow[1]
    out = ember.jit(lambda t, k: t[k, 1])(x, i)  # (tracers: the ordinary path)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x)[np.asarray(i), 1])


def test_indexing_by_arrays_runs_programs_without_the_index_parser(monkeypatch):
    from ember.numpy import indexing
    x = _array("float32", shape=(5, 6))
    i = jnp.asarray(np.array([4, 0, 2], np.int32))
    for _ in range(3):
        x[:, i], x[i]  # (compiled)
    parsed = []
    take = indexing._rewriting_take
    monkeypatch.setattr(indexing, "_rewriting_take", lambda *a: parsed.append(1) or take(*a))
    np.testing.assert_array_equal(np.asarray(x[:, i]), np.asarray(x)[:, [4, 0, 2]])
    np.testing.assert_array_equal(np.asarray(x[i]), np.asarray(x)[[4, 0, 2]])
    assert not parsed
    x[i, 1:2]  # (a new template: parsed on its first calls)
    assert parsed


def test_take_and_take_along_axis_replay_the_ordinary_paths_bits():
    x = _array("float32", shape=(4, 6))
    i = jnp.asarray(np.array([[0, 5, 2], [1, 1, 3], [2, 0, 0], [3, 4, 5]], np.int32))
    _check_fast_calls(jnp.take_along_axis, (x, i), {"axis": 1})
    _check_fast_calls(jnp.take, (x, i[0]), {"axis": 1})
    _check_fast_calls(jnp.take, (x, i), {"axis": 0, "mode": "clip"})


_SPECIAL_ONE = ("logsumexp", "softmax", "log_softmax", "expit", "ndtr", "log_ndtr", "ndtri",
                "entr", "i0e", "i1e", "i0", "i1", "erfcx", "spence", "gammaln", "digamma",
                "erf", "erfc", "erfinv", "gamma", "loggamma")
_SPECIAL_TWO = ("kl_div", "rel_entr", "gammainc", "gammaincc", "polygamma", "betaln")


@pytest.mark.parametrize("name", _SPECIAL_ONE + _SPECIAL_TWO)
def test_scipy_special_functions_replay_the_ordinary_paths_bits(name):
    import ember.scipy.special as special
    fn = getattr(special, name)
    x = jnp.asarray(np.array([[0.5, 2.0, 0.0, -0.0, 7.5], [1e-3, 30.0, np.inf, np.nan, 3.0]],
                             np.float32))
    args = (x,) if name in _SPECIAL_ONE else (
        (jnp.asarray(np.full((2, 5), 2, np.int32)), x) if name == "polygamma" else (x, x))
    with ordinary_path():
        slow = fn(*args)
    for _ in range(4):
        _check_same(fn(*args), slow)
    cache = fn._fast_cache
    assert cache.by_value.get(cache.key_objects(args, {})) is not None


def _program(fn, args, kwargs=None):
    cache = fn._fast_cache
    entry = cache.by_id.get(cache.id_key(cache.key_objects(args, kwargs or {})))
    return None if entry is None else entry[0]


def test_small_multi_pass_programs_compile_once_replayed_long_enough(monkeypatch):
    # hard_tanh is two comparisons and two selects: exact compiled, so once its signature
    # has spent the budget replayed, it runs one compiled kernel with the same bits.
    x = jnp.asarray(np.linspace(-3, 3, 40, dtype=np.float32).reshape(5, 8))
    with ordinary_path():
        want = np.asarray(ember.nn.hard_tanh(x)).tobytes()
    monkeypatch.setattr(_fastpath, "TIER_AFTER_S", 1e9)
    for _ in range(3):
        assert np.asarray(ember.nn.hard_tanh(x)).tobytes() == want
    replayed = _program(ember.nn.hard_tanh, (x,))
    assert hasattr(replayed, "replay")  # (counting its time)
    monkeypatch.setattr(_fastpath, "TIER_AFTER_S", 0.0)
    # a strided argument (compiled code would copy it): the check waits for another call
    wide = jnp.asarray(np.linspace(-3, 3, 80, dtype=np.float32).reshape(5, 16))
    view = wide[:, ::2]
    assert view.aval == x.aval
    np.testing.assert_array_equal(ember.nn.hard_tanh(view), np.clip(np.asarray(view), -1, 1))
    assert _program(ember.nn.hard_tanh, (x,)) is replayed
    assert np.asarray(ember.nn.hard_tanh(x)).tobytes() == want  # (compiles after this run)
    compiled = _program(ember.nn.hard_tanh, (x,))
    assert compiled is not replayed and hasattr(compiled, "serves")
    for _ in range(2):
        got = ember.nn.hard_tanh(x)
        assert np.asarray(got).tobytes() == want and not np.asarray(got).flags.writeable
    # the compiled signature's program replays strided arguments
    np.testing.assert_array_equal(ember.nn.hard_tanh(view), np.clip(np.asarray(view), -1, 1))


@pytest.mark.parametrize("case", ["math", "one_kernel", "disable_jit"])
def test_programs_that_would_not_compile_exactly_stay_replayed(monkeypatch, case):
    monkeypatch.setattr(_fastpath, "TIER_AFTER_S", 0.0)
    x = jnp.asarray(np.linspace(-3, 3, 40, dtype=np.float32).reshape(5, 8))
    if case == "math":  # (exp and log: NumPy's bits are not the compiled code's)
        fn, args = ember.nn.log_softmax, (x,)
    elif case == "one_kernel":  # (one fast NumPy pass: nothing to gain)
        fn, args = jnp.add, (x, 1.0)
    else:
        fn, args = ember.nn.hard_tanh, (x[:4],)
    with ember.disable_jit(case == "disable_jit"):  # (a config change clears the caches)
        for _ in range(5):
            fn(*args)
        prog = _program(fn, args)
    assert prog is not None and not hasattr(prog, "replay") and not hasattr(prog, "serves")
