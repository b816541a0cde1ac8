"""Host callbacks: ``debug.print``, ``debug.callback``, ``pure_callback`` and
``experimental.io_callback``, eagerly and under jit, grad, vmap and remat, against NumPy
values and JAX's documented behaviour (what runs, how often, in which order, which errors)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.compiler import host_callbacks
from ember.errors import JaxRuntimeError
from ember.experimental import io_callback
from ember.interpreters import partial_eval as pe

F32 = ember.ShapeDtypeStruct((), jnp.float32)


def _lines(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


# ------------------------------------------------------------------------- debug.print

@pytest.mark.parametrize("jit", [False, True])
def test_print_formats_values_when_the_program_runs(capsys, jit):
    def f(x):
        ember.debug.print("x = {}", x)
        ember.debug.print("sum {s:.2f} and {t[1]}", s=x.sum(), t=(x[0], x[2]))
        ember.debug.print("plain", x, skip_format_check=True)
        return x * 2
    g = ember.jit(f) if jit else f
    out = g(jnp.arange(3.0))
    np.testing.assert_array_equal(out, [0.0, 2.0, 4.0])
    assert _lines(capsys) == ["x = [0. 1. 2.]", "sum 3.00 and 2.0", "plain [0. 1. 2.]"]


def test_print_runs_at_each_call_not_at_trace(capsys):
    f = ember.jit(lambda x: (ember.debug.print("v={}", x), x + 1)[1])
    ember.make_jaxpr(f)(1.0)
    assert _lines(capsys) == []
    f(1.0)
    f(2.0)
    assert _lines(capsys) == ["v=1.0", "v=2.0"]


def test_prints_keep_program_order_across_fused_work(capsys):
    @ember.jit
    def f(x):
        for i in range(5):
            ember.debug.print("step {} {:.4f}", i, x)
            x = jnp.sin(x) * 2 + 1
        return x
    f(jnp.float32(0.5))
    x, expected = np.float32(0.5), []
    for i in range(5):
        expected.append(f"step {i} {x:.4f}")
        x = np.sin(x) * np.float32(2) + np.float32(1)
    assert _lines(capsys) == expected


def test_print_without_outputs_is_not_dead_code(capsys):
    ember.jit(lambda x: ember.debug.print("only {}", x))(3)
    assert _lines(capsys) == ["only 3"]


def test_print_under_grad_sees_primals(capsys):
    f = lambda x: (ember.debug.print("x {}", x), x ** 3)[1]  # noqa: E731
    assert float(ember.grad(f)(2.0)) == 12.0
    assert float(ember.jit(ember.grad(f))(3.0)) == 27.0
    assert float(ember.grad(ember.jit(f))(1.0)) == 3.0
    assert _lines(capsys) == ["x 2.0", "x 3.0", "x 1.0"]


def test_print_under_vmap_runs_per_element(capsys):
    f = lambda x, y: (ember.debug.print("{} {}", x, y), x + y)[1]  # noqa: E731
    out = ember.vmap(f, in_axes=(0, None))(jnp.arange(3), 10)
    np.testing.assert_array_equal(out, [10, 11, 12])
    ember.jit(ember.vmap(f))(jnp.arange(2), jnp.arange(2) * 5)
    assert _lines(capsys) == ["0 10", "1 10", "2 10", "0 0", "1 5"]


def test_print_under_checkpoint_grad(capsys):
    g = ember.grad(ember.checkpoint(lambda x: (ember.debug.print("r {}", x), jnp.sin(x))[1]))
    np.testing.assert_allclose(g(1.0), np.cos(1.0), rtol=1e-6)
    assert set(_lines(capsys)) == {"r 1.0"}  # (run again for the recomputation, as in JAX)


def test_print_options_and_two_call_form(capsys):
    with np.printoptions(precision=2):
        ember.jit(lambda x: ember.debug.print("{}", x))(jnp.array([1 / 3, 2 / 3]))
    ember.debug.print(ordered=True)("two {}", jnp.int32(7))
    assert _lines(capsys) == ["[0.33 0.67]", "two 7"]


def test_print_argument_errors():
    with pytest.raises(ValueError, match="Unused positional"):
        ember.debug.print("{}", 1, 2)
    with pytest.raises(ValueError, match="f-string"):
        ember.debug.print("3", x=1)
    with pytest.raises(TypeError, match="fmt must be a string"):
        ember.debug.print(3)
    with pytest.raises(TypeError, match="two-call form"):
        ember.debug.print(None, 1)
    with pytest.raises(IndexError):  # (unchecked, the format itself fails, as in JAX)
        ember.debug.print("{} {}", 1, skip_format_check=True)


# ------------------------------------------------------------------------- debug.callback

def test_debug_callback_gets_arrays_and_static_leaves():
    seen = []

    def record(x, label, *, scale):
        seen.append((type(x).__name__, np.asarray(x).tolist(), label, scale))

    @ember.jit
    def f(x):
        ember.debug.callback(record, x * 2, "twice", scale=None)
        return x
    f(jnp.arange(2.0))
    ember.debug.callback(record, jnp.ones(1), "eager", scale=3)
    assert seen == [("Array", [0.0, 2.0], "twice", None), ("Array", [1.0], "eager", 3)]


def test_debug_callback_exceptions():
    def boom(x):
        raise KeyError("no")
    with pytest.raises(KeyError):
        ember.debug.callback(boom, 1.0)
    with pytest.raises(JaxRuntimeError, match="KeyError") as info:
        ember.jit(lambda x: ember.debug.callback(boom, x))(1.0)
    assert isinstance(info.value.__cause__, KeyError)


def test_debug_callback_prints_without_an_equals_sign_in_jaxprs():
    text = str(ember.make_jaxpr(lambda x: ember.debug.callback(print, x))(1.0))
    assert text.splitlines()[1].strip() == \
        "debug_callback[callback=print ordered=False partitioned=False] a"


def test_jaxpr_dce_keeps_effects():
    closed = ember.make_jaxpr(lambda x: (ember.debug.print("{}", x), x + 1, x * 2))(1.0)
    pruned, used = pe.dce_jaxpr(closed, [False, True])
    assert [e.primitive.name for e in pruned.eqns] == ["debug_callback", "mul"]
    assert used == [True]


# ------------------------------------------------------------------------- pure_callback

@pytest.mark.parametrize("jit", [False, True])
def test_pure_callback_values_and_pytrees(jit):
    def f(x):
        out = ember.pure_callback(
            lambda v, k: {"a": np.sin(v), "b": (v * k, np.asarray(v).astype(np.int32))},
            {"a": ember.ShapeDtypeStruct((3,), jnp.float32),
             "b": (ember.ShapeDtypeStruct((3,), jnp.float32),
                   ember.ShapeDtypeStruct((3,), jnp.int32))},
            x, k=jnp.float32(3))
        return out["a"] + 1, out["b"]
    g = ember.jit(f) if jit else f
    x = np.array([0.5, 1.5, 2.5], np.float32)
    a, (b, c) = g(jnp.asarray(x))
    np.testing.assert_allclose(a, np.sin(x) + 1, rtol=1e-6)
    np.testing.assert_array_equal(b, x * 3)
    assert c.dtype == np.int32 and c.tolist() == [0, 1, 2]


def test_pure_callback_unused_results_are_dropped_io_callback_kept():
    calls = []

    def note(tag):
        return lambda v: (calls.append(tag), np.float32(0))[1]

    @ember.jit
    def f(x):
        ember.pure_callback(note("pure"), F32, x)
        io_callback(note("io"), F32, x)
        return x + 1
    assert float(f(1.0)) == 2.0
    assert float(f(2.0)) == 3.0
    assert calls == ["io", "io"]


def test_pure_callback_result_checks():
    one = lambda v: np.zeros(3, np.float32)  # noqa: E731
    with pytest.raises(JaxRuntimeError, match=r"shape \(3,\)"):
        ember.jit(lambda x: ember.pure_callback(one, F32, x))(1.0)
    with pytest.raises(JaxRuntimeError, match="dtype int32"):
        ember.pure_callback(lambda v: np.int32(1), F32, 1.0)
    with pytest.raises(JaxRuntimeError, match="returned 2 arrays"):
        ember.pure_callback(lambda v: (v, v), F32, 1.0)
    # A float64 result is canonicalized to the declared float32 (x64 off), as in JAX.
    assert float(ember.jit(lambda x: ember.pure_callback(lambda v: 1.5, F32, x))(0.0)) == 1.5
    with pytest.raises(ValueError, match="64-bit"):
        ember.pure_callback(np.sin, ember.ShapeDtypeStruct((), np.float64), 1.0)
    with pytest.raises(ValueError, match="vmap_method"):
        ember.pure_callback(np.sin, F32, 1.0, vmap_method="loop")
    with pytest.raises(TypeError, match="callable"):
        ember.pure_callback(3, F32, 1.0)


def test_pure_callback_errors_are_runtime_errors_caused_by_the_callback():
    with pytest.raises(JaxRuntimeError, match="ZeroDivisionError") as info:
        ember.jit(lambda x: ember.pure_callback(lambda v: 1 / 0, F32, x))(1.0)
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_pure_callback_differentiation_needs_custom_jvp():
    with pytest.raises(ValueError, match="custom_jvp"):
        ember.grad(lambda x: ember.pure_callback(np.sin, F32, x))(1.0)

    @ember.custom_jvp
    def sin(x):
        return ember.pure_callback(np.sin, ember.ShapeDtypeStruct(x.shape, x.dtype), x,
                                   vmap_method="sequential")

    @sin.defjvp
    def _(primals, tangents):
        (x,), (dx,) = primals, tangents
        cos = ember.pure_callback(np.cos, ember.ShapeDtypeStruct(x.shape, x.dtype), x,
                                  vmap_method="expand_dims")
        return sin(x), cos * dx
    x = jnp.float32(0.7)
    np.testing.assert_allclose(ember.grad(sin)(x), np.cos(0.7), rtol=1e-6)
    np.testing.assert_allclose(ember.jit(ember.grad(sin))(x), np.cos(0.7), rtol=1e-6)
    np.testing.assert_allclose(ember.vmap(ember.grad(sin))(jnp.arange(3.0)),
                               np.cos(np.arange(3.0)), rtol=1e-6)


def _shapes_seen(vmap_method):
    seen = []

    def cb(a, b):
        seen.append((np.shape(a), np.shape(b)))
        return np.asarray(a) + np.asarray(b)
    f = lambda x, y: ember.pure_callback(cb, F32, x, y, vmap_method=vmap_method)  # noqa: E731
    out = ember.vmap(f, in_axes=(0, None))(jnp.arange(3.0), jnp.float32(1))
    np.testing.assert_array_equal(out, [1.0, 2.0, 3.0])
    return seen


def test_pure_callback_vmap_methods():
    assert _shapes_seen("sequential") == [((), ())] * 3
    assert _shapes_seen("sequential_unrolled") == [((), ())] * 3
    assert _shapes_seen("expand_dims") == [((3,), (1,))]
    assert _shapes_seen("broadcast_all") == [((3,), (3,))]
    assert _shapes_seen("legacy_vectorized") == [((3,), ())]
    with pytest.raises(NotImplementedError, match="vmap_method=None"):
        _shapes_seen(None)


def test_pure_callback_nested_vmap_under_jit():
    f = lambda x: ember.pure_callback(  # noqa: E731
        lambda v: np.asarray(v) * 2 + 1, F32, x, vmap_method="sequential")
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(ember.jit(ember.vmap(ember.vmap(f)))(x), x * 2 + 1)
    np.testing.assert_array_equal(ember.vmap(ember.vmap(f), in_axes=1)(x), (x * 2 + 1).T)


def test_callback_may_use_ember_itself():
    inner = ember.jit(lambda a: a * 10)

    def cb(v):
        return np.asarray(inner(v) + jnp.ones(()), np.float32)
    assert float(ember.jit(lambda x: ember.pure_callback(cb, F32, x))(2.0)) == 21.0


# ------------------------------------------------------------------------- io_callback

def test_io_callback_runs_each_call_and_vmaps_sequentially():
    seen = []

    def log(v):
        seen.append(float(v))
        return np.float32(v) * 3
    f = ember.jit(lambda x: io_callback(log, F32, x))
    assert float(f(2.0)) == 6.0 and float(f(2.0)) == 6.0
    out = ember.vmap(lambda x: io_callback(log, F32, x))(jnp.arange(3.0))
    np.testing.assert_array_equal(out, [0.0, 3.0, 6.0])
    assert seen == [2.0, 2.0, 0.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="ordered"):
        ember.vmap(lambda x: io_callback(log, F32, x, ordered=True))(jnp.arange(3.0))
    with pytest.raises(ValueError, match="JVP"):
        ember.grad(lambda x: io_callback(log, F32, x))(1.0)


# ------------------------------------------------------------------------- caching

def test_equal_callbacks_share_a_number_so_retraces_give_the_same_program():
    def f(x):
        ember.debug.print("x {}", x)
        return ember.pure_callback(np.sin, F32, x)
    a = ember.jit(f).lower(1.0).as_text()
    b = ember.jit(f).lower(2.0).as_text()
    assert a == b and host_callbacks.TARGET in a
    other = ember.jit(lambda x: ember.pure_callback(np.cos, F32, x)).lower(1.0).as_text()
    assert other != ember.jit(lambda x: ember.pure_callback(np.sin, F32, x)).lower(1.0).as_text()


_DISK_PROGRAM = """
import json, sys, numpy as np, ember, ember.numpy as jnp
from ember.backends import get_backend
F = ember.ShapeDtypeStruct((4,), jnp.float32)
plus = lambda x: np.asarray(x) + 1
times = lambda x: np.asarray(x) * 100
f = ember.jit(lambda x: jnp.sin(ember.pure_callback(plus, F, x)) * 2)
g = ember.jit(lambda x: jnp.sin(ember.pure_callback(times, F, x)) * 2)
x = jnp.arange(4.0)
order = [f, g] if sys.argv[1] == "fg" else [g, f]
outs = {fn is f and "f" or "g": np.asarray(fn(x)).tolist() for fn in order}
get_backend("cpu").wait_for_background()
print(json.dumps(outs))
"""


def test_disk_cache_entries_call_this_process_callbacks(tmp_path):
    # Callback numbers are per process: the second process registers the two callbacks in
    # the other order, so its programs' texts swap numbers; each must still call its own.
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path), EMBER_ENABLE_COMPILATION_CACHE="1",
               EMBER_CPU_SHARED_LIBRARIES="1")
    env.pop("EMBER_DUMP_TO", None)
    x = np.arange(4.0)
    expected = {"f": np.sin(x + 1) * 2, "g": np.sin(x * 100) * 2}
    for order in ("fg", "gf"):
        out = subprocess.run([sys.executable, "-c", _DISK_PROGRAM, order], env=env, check=True,
                             capture_output=True, text=True, timeout=300)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        for name in "fg":
            np.testing.assert_allclose(result[name], expected[name], rtol=1e-5, atol=1e-6)
