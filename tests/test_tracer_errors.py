"""Using traced values where concrete Python values are needed raises JAX's error classes."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import errors
from ember.errors import (
    ConcretizationTypeError,
    TracerArrayConversionError,
    TracerBoolConversionError,
    TracerIntegerConversionError,
    UnexpectedTracerError,
)


def trace(fun, *args):
    return ember.make_jaxpr(fun)(*args)


@pytest.mark.parametrize("cls", [ConcretizationTypeError, TracerBoolConversionError,
                                 TracerIntegerConversionError, TracerArrayConversionError,
                                 UnexpectedTracerError])
def test_all_are_type_errors(cls):
    assert issubclass(cls, TypeError)
    assert getattr(ember.errors, cls.__name__) is cls


def test_if_on_traced_value():
    def f(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(TracerBoolConversionError) as info:
        trace(f, 1.0)
    msg = str(info.value)
    assert "boolean conversion" in msg
    assert "bool[]" in msg
    assert "derived from the argument 'x'" in msg
    assert "lax.cond" in msg and "static" in msg


def test_while_and_not_and_or_on_traced_value():
    with pytest.raises(TracerBoolConversionError):
        trace(lambda x: not x, True)
    with pytest.raises(TracerBoolConversionError):
        trace(lambda x, y: x and y, True, False)

    def loop(x):
        while x < 3:
            x = x + 1
        return x

    with pytest.raises(TracerBoolConversionError):
        trace(loop, 1)


def test_bool_error_is_a_concretization_error():
    with pytest.raises(ConcretizationTypeError):
        trace(lambda x: bool(x), 1.0)


def test_argument_names_in_messages():
    def g(alpha, beta):
        return int(beta)

    with pytest.raises(ConcretizationTypeError, match="argument 'beta'"):  # (as JAX)
        trace(g, 1.0, 2)

    def h(*xs):
        return float(xs[1])

    with pytest.raises(ConcretizationTypeError, match=r"argument 'xs\[1\]'"):
        trace(h, 1.0, 2.0)

    def k(d):
        return bool(d["a"])

    with pytest.raises(TracerBoolConversionError, match="argument 'd'"):
        trace(k, {"a": 1.0, "b": 2.0})


def test_int_range_and_list_index():
    with pytest.raises(ConcretizationTypeError) as info:  # (int(); an index is below)
        trace(lambda x: int(x), 3)
    assert "i32[]" in str(info.value)
    assert "argument 'x'" in str(info.value)
    with pytest.raises(TracerIntegerConversionError):
        trace(lambda n: [jnp.sin(1.0) for _ in range(n)], 3)
    with pytest.raises(TracerIntegerConversionError, match="index"):
        trace(lambda i: [1.0, 2.0, 3.0][i], 1)
    with pytest.raises(TracerIntegerConversionError):
        trace(lambda i: (10, 20)[i + 1], 0)


def test_numpy_on_tracer():
    with pytest.raises(TracerArrayConversionError) as info:
        trace(lambda x: np.asarray(x), jnp.ones(3))
    msg = str(info.value)
    assert "__array__" in msg and "f32[3]" in msg and "jnp" in msg
    with pytest.raises(TracerArrayConversionError):
        trace(lambda x: np.sin(x), jnp.ones(3))
    with pytest.raises(TracerArrayConversionError):
        trace(lambda x: np.array(x), 1.0)


def test_float_and_complex_of_tracer():
    with pytest.raises(ConcretizationTypeError) as info:
        trace(lambda x: float(x), 1.0)
    assert not isinstance(info.value, TracerBoolConversionError)
    assert "concrete value" in str(info.value)
    with pytest.raises(ConcretizationTypeError):
        trace(lambda x: complex(x), 1.0)


def test_item_and_tolist_of_tracer():
    with pytest.raises(ConcretizationTypeError, match="item"):
        trace(lambda x: x.item(), 1.0)
    with pytest.raises(ConcretizationTypeError, match="tolist"):
        trace(lambda x: x.tolist(), jnp.ones(2))


def test_hash_and_setitem_of_tracer():
    with pytest.raises(TypeError, match="unhashable"):
        trace(lambda x: {x: 1}, 1.0)
    with pytest.raises(TypeError, match="immutable"):
        def f(x):
            x[0] = 1.0
            return x
        trace(f, jnp.ones(3))


def test_leaked_tracer_used_after_tracing():
    leaked = []

    def f(x):
        leaked.append(x)
        return x

    trace(f, 1.0)
    (t,) = leaked
    with pytest.raises(UnexpectedTracerError) as info:
        jnp.sin(t)
    assert "leaked" in str(info.value) and "f32[]" in str(info.value)
    with pytest.raises(UnexpectedTracerError):
        t + 1.0
    # used inside another transformation
    with pytest.raises(UnexpectedTracerError):
        trace(lambda y: y * t, 2.0)


def test_tracer_repr_len_iter():
    shapes = []

    def f(x):
        shapes.append((repr(x), len(x), [v.shape for v in x]))
        return x

    trace(f, jnp.ones((2, 3)))
    rep, n, rows = shapes[0]
    assert rep.startswith("Traced<f32[2,3]>")
    assert n == 2 and rows == [(3,), (3,)]
    with pytest.raises(TypeError, match="unsized"):
        trace(lambda x: len(x), 1.0)


def test_shape_from_tracer_is_a_concretization_error():
    with pytest.raises(ConcretizationTypeError):
        trace(lambda n: jnp.zeros((n,)), 3)


def test_concrete_or_error():
    from ember.core import concrete_or_error

    assert concrete_or_error(3) == 3
    with pytest.raises(ConcretizationTypeError, match="shape needed"):
        trace(lambda x: concrete_or_error(x, "shape needed"), 1)


def test_error_attributes_hold_the_tracer():
    try:
        trace(lambda x: int(x), 1)
    except errors.ConcretizationTypeError as e:
        assert isinstance(e.tracer, ember.core.Tracer)
        assert e.tracer.aval.str_short() == "i32[]"
    else:  # pragma: no cover
        raise AssertionError("no error raised")
