"""Host callbacks as in JAX 0.10: what the callbacks receive (weak types), results of the
wrong kind, result types that cannot be, and vmap over a batch of size 0. Expected values
were taken from JAX and written in as literals."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.errors import JaxRuntimeError
from ember.experimental import io_callback

F32 = ember.ShapeDtypeStruct((), jnp.float32)


def _weak_types_seen(run) -> list:
    seen = []
    run(lambda *a: seen.extend((str(v.dtype), v.aval.weak_type) for v in a))
    return seen


def test_eager_debug_callback_gets_weak_types_jit_does_not():
    # JAX gives an eager debug callback the caller's arrays, weak types kept; a compiled one
    # gets plain buffers.
    weak = jnp.asarray(1.0) * 2
    assert weak.aval.weak_type
    args = (1, 2.5, weak, jnp.float32(3), True)
    assert _weak_types_seen(lambda cb: ember.debug.callback(cb, *args)) == [
        ("int32", True), ("float32", True), ("float32", True), ("float32", False),
        ("bool", False)]
    assert _weak_types_seen(lambda cb: ember.jit(
        lambda *a: ember.debug.callback(cb, *a))(*args)) == [
        ("int32", False), ("float32", False), ("float32", False), ("float32", False),
        ("bool", False)]
    # Eager vmap: the unbatched weak scalar stays weak in every call.
    assert _weak_types_seen(lambda cb: ember.vmap(
        lambda x, y: ember.debug.callback(cb, x, y), in_axes=(None, 0))(
        1.5, jnp.arange(2))) == [("float32", True), ("int32", False)] * 2


def test_eager_debug_print_repr_shows_weak_type(capsys):
    ember.debug.print("{} {!r}", 1.5, 1.5)
    ember.debug.print("{!r}", {"k": (2, jnp.int32(2))})
    ember.jit(lambda x: ember.debug.print("{!r}", x))(1.5)
    assert capsys.readouterr().out.splitlines() == [
        "1.5 Array(1.5, dtype=float32, weak_type=True)",
        "{'k': (Array(2, dtype=int32, weak_type=True), Array(2, dtype=int32))}",
        "Array(1.5, dtype=float32)"]


def test_eager_debug_callback_with_ember_errors_and_leaked_tracers():
    with pytest.raises(KeyError):  # (eagerly the callback's own exception, as in JAX)
        ember.debug.callback(lambda x: {}["no"], 1.0)
    leaked = []
    ember.jit(lambda x: leaked.append(x) or x)(1.0)
    with pytest.raises(ember.errors.UnexpectedTracerError):
        ember.debug.callback(lambda x: None, leaked[0])


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("result", ["a", object()])
def test_results_of_no_array_type_are_runtime_errors(jit, result):
    f = lambda x: ember.pure_callback(lambda v: result, F32, x)  # noqa: E731
    with pytest.raises(JaxRuntimeError, match="result 0 has dtype"):
        (ember.jit(f) if jit else f)(1.0)
    with pytest.raises(JaxRuntimeError, match="result 0 has dtype"):
        io_callback(lambda v: result, F32, 1.0)


def test_result_shape_dtypes_shapes_are_checked_at_the_call():
    calls = []

    def cb(x):
        calls.append(x)
        return np.zeros(2, np.float32)
    with pytest.raises(TypeError, match="pure_callback: result_shape_dtypes"):  # (as lax's)
        ember.jit(lambda x: ember.pure_callback(
            cb, ember.ShapeDtypeStruct((-1,), jnp.float32), x))(1.0)
    with pytest.raises(TypeError, match="io_callback: result_shape_dtypes"):
        io_callback(cb, ember.ShapeDtypeStruct((2.5,), jnp.float32), 1.0)
    assert calls == []


@pytest.mark.parametrize("jit", [False, True])
def test_vmap_over_an_empty_batch(jit, capsys):
    calls = []

    def cb(x):
        calls.append(np.shape(x))
        return np.asarray(x) + 1

    def pure(x):
        return ember.pure_callback(cb, ember.ShapeDtypeStruct(x.shape, x.dtype), x,
                                   vmap_method="sequential")

    def io(x):
        return io_callback(cb, {"a": ember.ShapeDtypeStruct(x.shape, x.dtype)}, x)["a"]

    def show(x):
        ember.debug.print("{}", x)
        return x
    x = jnp.zeros((0, 2), jnp.int32)
    for f in (pure, io, show):
        g = ember.vmap(f)
        out = (ember.jit(g) if jit else g)(x)
        assert out.shape == (0, 2) and out.dtype == np.int32
    assert calls == [] and capsys.readouterr().out == ""


def test_pure_callback_without_results_is_never_called():
    calls = []
    cb = lambda x: calls.append(x) or ()  # noqa: E731
    assert ember.pure_callback(cb, (), 1.0) == ()
    ember.jit(lambda x: ember.pure_callback(cb, (), x))(1.0)
    ember.vmap(lambda x: ember.pure_callback(cb, [], x, vmap_method="sequential"))(jnp.ones(2))
    assert calls == []


def test_vmapped_callbacks_print_without_addresses_in_jaxprs():
    text = str(ember.make_jaxpr(ember.vmap(
        lambda x: ember.pure_callback(np.sin, F32, x, vmap_method="sequential")))(jnp.ones(2)))
    assert "callback=sequential(size=2, sin)" in text and " at 0x" not in text


def test_eager_debug_callback_copies_a_callers_numpy_array():
    a = np.arange(3.0, dtype=np.float32)
    seen = []
    ember.debug.callback(seen.append, a)
    ember.vmap(lambda x, y: ember.debug.callback(seen.append, y), in_axes=(0, None))(
        jnp.ones(2), a)
    a[0] = 9.0  # (still writeable, and the callbacks' arrays do not see it)
    # (Nothing batched reaches the vmapped callback: it runs once, as in JAX.)
    assert [np.asarray(s).tolist() for s in seen] == [[0.0, 1.0, 2.0]] * 2
