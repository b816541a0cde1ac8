"""make_jaxpr golden text (JAX's exact format), typecheck_jaxpr and eval_jaxpr."""

import numpy as np
import pytest

import ember
import ember.lax as lax
import ember.numpy as jnp
from ember.core import Primitive, ShapedArray
from ember.jaxpr import (
    ClosedJaxpr,
    Jaxpr,
    JaxprEqn,
    JaxprTypeError,
    Literal,
    Var,
    eval_jaxpr,
    typecheck_jaxpr,
)


def jaxpr_text(fun, *args, **kw):
    return str(ember.make_jaxpr(fun, **kw)(*args))


# A primitive with arbitrary params, to exercise the printer independently of lax.
_ident_p = Primitive("ident")
_ident_p.def_impl(lambda x, **_: x)
_ident_p.def_abstract_eval(lambda x, **_: x)


def test_log_div_multiline():
    assert jaxpr_text(lambda x: jnp.log(x) / jnp.log(2.0), 1.0) == (
        "{ lambda ; a:f32[]. let\n"
        "    b:f32[] = log a\n"
        "    c:f32[] = log 2.0:f32[]\n"
        "    d:f32[] = div b c\n"
        "  in (d,) }")


def test_short_form_on_one_line():
    assert jaxpr_text(jnp.sin, 1.0) == "{ lambda ; a:f32[]. let b:f32[] = sin a in (b,) }"
    assert jaxpr_text(lambda x: jnp.sin(jnp.cos(x)), 1.0) == (
        "{ lambda ; a:f32[]. let b:f32[] = cos a; c:f32[] = sin b in (c,) }")


def test_array_shapes_and_dtypes():
    assert jaxpr_text(jnp.exp, jnp.ones((2, 3), jnp.float16 if hasattr(jnp, "float16")
                                        else np.float16)) == (
        "{ lambda ; a:f16[2,3]. let b:f16[2,3] = exp a in (b,) }")
    assert jaxpr_text(lax.neg, np.zeros((0, 4), np.int8)) == (
        "{ lambda ; a:i8[0,4]. let b:i8[0,4] = neg a in (b,) }")


def test_constvars():
    c = jnp.ones(3)
    assert jaxpr_text(lambda x: x + c, jnp.ones(3)) == (
        "{ lambda a:f32[3]; b:f32[3]. let c:f32[3] = add b a in (c,) }")
    closed = ember.make_jaxpr(lambda x: x + c)(jnp.ones(3))
    assert len(closed.consts) == 1 and closed.consts[0] is c
    # the same constant object used twice is one constvar
    n = jnp.arange(3.0) if hasattr(jnp, "arange") else jnp.asarray(np.arange(3.0))
    assert jaxpr_text(lambda x: x * n + n, jnp.ones(3)) == (
        "{ lambda a:f32[3]; b:f32[3]. let\n"
        "    c:f32[3] = mul b a\n"
        "    d:f32[3] = add c a\n"
        "  in (d,) }")


def test_multiple_inputs_and_outputs():
    assert jaxpr_text(lambda x, y: (x + y, x * y), 1.0, 2.0) == (
        "{ lambda ; a:f32[] b:f32[]. let c:f32[] = add a b; d:f32[] = mul a b in (c, d) }")


def test_literals_of_each_type():
    assert jaxpr_text(lambda x: x * 2, 1) == (
        "{ lambda ; a:i32[]. let b:i32[] = mul a 2:i32[] in (b,) }")
    assert jaxpr_text(lambda x: lax.bitwise_and(x, True), True) == (
        "{ lambda ; a:bool[]. let b:bool[] = and a True:bool[] in (b,) }")
    assert jaxpr_text(lambda x: x + 1.5, 1.0) == (
        "{ lambda ; a:f32[]. let b:f32[] = add a 1.5:f32[] in (b,) }")
    assert jaxpr_text(lambda x: x * np.float32(3), jnp.ones(3)) == (
        "{ lambda ; a:f32[3]. let b:f32[3] = mul a 3.0:f32[] in (b,) }")
    assert jaxpr_text(lambda x: x > 0, 1.0) == (
        "{ lambda ; a:f32[]. let b:bool[] = gt a 0.0:f32[] in (b,) }")


def test_pytree_inputs_and_outputs():
    def f(d, t):
        return {"s": d["a"] + t[0], "p": (t[1] * d["b"],)}

    closed = ember.make_jaxpr(f)({"b": 1.0, "a": 2.0}, (3.0, 4.0))
    # dict keys flatten in sorted order: a, b; then the tuple
    assert str(closed) == (
        "{ lambda ; a:f32[] b:f32[] c:f32[] d:f32[]. let\n"
        "    e:f32[] = add a c\n"
        "    f:f32[] = mul d b\n"
        "  in (f, e) }")
    _, shape = ember.make_jaxpr(f, return_shape=True)({"b": 1.0, "a": 2.0}, (3.0, 4.0))
    weak = ember.ShapeDtypeStruct((), np.float32, weak_type=True)  # (as JAX)
    assert shape == {"s": weak, "p": (weak,)}


def test_outputs_that_are_inputs_or_constants():
    assert jaxpr_text(lambda x: x, 1.0) == "{ lambda ; a:f32[]. let  in (a,) }"
    assert jaxpr_text(lambda x: 1.0, 1.0) == "{ lambda ; a:f32[]. let  in (1.0:f32[],) }"
    assert jaxpr_text(lambda x, y: (y, x), 1.0, 2) == (
        "{ lambda ; a:f32[] b:i32[]. let  in (b, a) }")
    c = jnp.ones(2)
    assert jaxpr_text(lambda x: c, 1.0) == "{ lambda a:f32[2]; b:f32[]. let  in (a,) }"
    assert jaxpr_text(lambda: (), ) == "{ lambda ; . let  in () }"


def test_static_argnums():
    def f(x, n, y):
        for _ in range(n):
            x = jnp.sin(x)
        return x + y

    assert jaxpr_text(f, 1.0, 2, 3.0, static_argnums=1) == (
        "{ lambda ; a:f32[] b:f32[]. let\n"
        "    c:f32[] = sin a\n"
        "    d:f32[] = sin c\n"
        "    e:f32[] = add d b\n"
        "  in (e,) }")
    assert jaxpr_text(f, 1.0, 1, 3.0, static_argnums=(1,)) == (
        "{ lambda ; a:f32[] b:f32[]. let c:f32[] = sin a; d:f32[] = add c b in (d,) }")


def test_python_side_effects_run_once_and_are_not_recorded(capsys):
    log = []

    def f(x):
        print("tracing")
        log.append(x)
        return jnp.sin(x)

    text = jaxpr_text(f, 1.0)
    assert text == "{ lambda ; a:f32[]. let b:f32[] = sin a in (b,) }"
    assert capsys.readouterr().out == "tracing\n"
    assert len(log) == 1 and isinstance(log[0], ember.core.Tracer)


def test_variable_names_past_z():
    def f(x):
        for _ in range(27):
            x = jnp.sin(x)
        return x

    lines = jaxpr_text(f, 1.0).splitlines()
    assert lines[0] == "{ lambda ; a:f32[]. let"
    assert lines[1] == "    b:f32[] = sin a"
    assert lines[25] == "    z:f32[] = sin y"
    assert lines[26] == "    ba:f32[] = sin z"
    assert lines[27] == "    bb:f32[] = sin ba"
    assert lines[-1] == "  in (bb,) }"
    from ember.jaxpr import _encode_name
    assert [_encode_name(i) for i in (0, 25, 26, 51, 52, 676, 702)] == [
        "a", "z", "ba", "bz", "ca", "baa", "bba"]


def test_params_sorted_and_printed_like_jax():
    assert jaxpr_text(lambda x: lax.transpose(x, (1, 0)), jnp.ones((2, 3))) == (
        "{ lambda ; a:f32[2,3]. let\n"
        "    b:f32[3,2] = transpose[permutation=(1, 0)] a\n"
        "  in (b,) }")
    text = jaxpr_text(lambda x: _ident_p.bind(x, zeta=1, alpha=np.dtype("int8"), mid=(2, 3)),
                      1.0)
    assert text == (
        "{ lambda ; a:f32[]. let\n"
        "    b:f32[] = ident[alpha=int8 mid=(2, 3) zeta=1] a\n"
        "  in (b,) }")
    assert jaxpr_text(lambda x: _ident_p.bind(x, b=1, a=(2,)), 1.0) == (
        "{ lambda ; a:f32[]. let b:f32[] = ident[a=(2,) b=1] a in (b,) }")


def test_reduce_sum_params():
    assert jaxpr_text(lambda x: lax.reduce_sum(x, (0, 1)), jnp.ones((2, 3))) == (
        "{ lambda ; a:f32[2,3]. let b:f32[] = reduce_sum[axes=(0, 1)] a in (b,) }")
    assert jaxpr_text(lambda x: x.sum(axis=0), jnp.ones((2, 3))) == (
        "{ lambda ; a:f32[2,3]. let b:f32[3] = reduce_sum[axes=(0,)] a in (b,) }")


def test_long_params_break_across_lines():
    long_a = "a" * 40
    long_b = "b" * 40
    text = jaxpr_text(lambda x: _ident_p.bind(x, first=long_a, second=long_b), jnp.ones(3))
    assert text == (
        "{ lambda ; a:f32[3]. let\n"
        "    b:f32[3] = ident[\n"
        f"      first={long_a}\n"
        f"      second={long_b}\n"
        "    ] a\n"
        "  in (b,) }")


def test_nested_jaxpr_param_shares_names():
    inner = ember.make_jaxpr(jnp.sin)(1.0)
    text = jaxpr_text(lambda x: _ident_p.bind(x, jaxpr=inner, name="f"), 1.0)
    assert text == (
        "{ lambda ; a:f32[]. let\n"
        "    b:f32[] = ident[\n"
        "      jaxpr={ lambda ; c:f32[]. let d:f32[] = sin c in (d,) }\n"
        "      name=f\n"
        "    ] a\n"
        "  in (b,) }")


def test_long_variable_lists_fill_lines():
    text = jaxpr_text(lambda *xs: xs[-1], *([1.0] * 30))
    lines = text.splitlines()
    # Like JAX, each separator in a variable list is its own group: a line is filled until it
    # reaches the width, then continues indented by 4.
    assert lines[0].startswith("{ lambda ; a:f32[] b:f32[] ")
    assert lines[1].startswith("    ")
    joined = " ".join(line.lstrip() for line in lines)
    assert joined == "{ lambda ; " + " ".join(
        f"{n}:f32[]" for n in "abcdefghijklmnopqrstuvwxyz") + \
        " ba:f32[] bb:f32[] bc:f32[] bd:f32[]. let  in (bd,) }"
    for line in lines:
        # no line breaks before reaching the width (the last token may overflow it)
        assert len(line) <= 80 + len(" bd:f32[]")


def test_width_argument():
    closed = ember.make_jaxpr(lambda x: jnp.sin(jnp.cos(x)))(1.0)
    assert closed.pretty_print(width=200) == (
        "{ lambda ; a:f32[]. let b:f32[] = cos a; c:f32[] = sin b in (c,) }")
    assert closed.pretty_print(width=30) == (
        "{ lambda ; a:f32[]. let\n"
        "    b:f32[] = cos a\n"
        "    c:f32[] = sin b\n"
        "  in (c,) }")


def test_zero_operand_equation_keeps_trailing_space():
    const_p = Primitive("make_one")
    const_p.def_impl(lambda: np.ones((), np.float32))
    const_p.def_abstract_eval(lambda: ShapedArray((), np.float32))
    text = jaxpr_text(lambda x: lax.add(x, const_p.bind()), np.float32(1))
    assert text == (
        "{ lambda ; a:f32[]. let b:f32[] = make_one ; c:f32[] = add a b in (c,) }")


# ---------------------------------------------------------------- typecheck / eval


def _f32(shape=()):
    return ShapedArray(shape, np.float32)


def test_typecheck_accepts_traced_jaxprs():
    closed = ember.make_jaxpr(lambda x, y: jnp.sin(x) * y + 1.0)(jnp.ones(3), jnp.ones(3))
    typecheck_jaxpr(closed.jaxpr)


def test_typecheck_use_before_def():
    a, b, c = Var(_f32()), Var(_f32()), Var(_f32())
    sin_p = lax.sin_p
    jaxpr = Jaxpr([], [a], [c], [JaxprEqn([b], [c], sin_p, {}), JaxprEqn([a], [b], sin_p, {})])
    with pytest.raises(JaxprTypeError, match="used before it is defined"):
        typecheck_jaxpr(jaxpr)


def test_typecheck_wrong_output_type():
    a, b = Var(_f32((3,))), Var(_f32((4,)))
    jaxpr = Jaxpr([], [a], [b], [JaxprEqn([a], [b], lax.sin_p, {})])
    with pytest.raises(JaxprTypeError, match=r"f32\[4\].*f32\[3\]"):
        typecheck_jaxpr(jaxpr)
    c = Var(ShapedArray((3,), np.int32))
    jaxpr = Jaxpr([], [a], [c], [JaxprEqn([a], [c], lax.sin_p, {})])
    with pytest.raises(JaxprTypeError, match="does not match"):
        typecheck_jaxpr(jaxpr)


def test_typecheck_double_definition_and_bad_primitive_input():
    a = Var(_f32())
    jaxpr = Jaxpr([], [a], [a], [JaxprEqn([a], [a], lax.sin_p, {})])
    with pytest.raises(JaxprTypeError, match="defined twice"):
        typecheck_jaxpr(jaxpr)
    x, y = Var(ShapedArray((), np.int32)), Var(ShapedArray((), np.int32))
    jaxpr = Jaxpr([], [x], [y], [JaxprEqn([x], [y], lax.sin_p, {})])
    with pytest.raises(TypeError, match="sin"):
        typecheck_jaxpr(jaxpr)


def test_typecheck_undefined_output():
    a, b = Var(_f32()), Var(_f32())
    with pytest.raises(JaxprTypeError, match="used before"):
        typecheck_jaxpr(Jaxpr([], [a], [b], []))


def test_eval_jaxpr_roundtrip():
    c = np.arange(3, dtype=np.float32)

    def f(x, y):
        return jnp.sin(x) * y + c, jnp.exp(y)

    x, y = jnp.asarray(np.linspace(0, 1, 3, dtype=np.float32)), jnp.ones(3)
    closed = ember.make_jaxpr(f)(x, y)
    outs = eval_jaxpr(closed.jaxpr, closed.consts, x, y)
    eager = f(x, y)
    for o, e in zip(outs, eager):
        assert isinstance(o, ember.Array)
        np.testing.assert_array_equal(np.asarray(o), np.asarray(e))
    np.testing.assert_allclose(np.asarray(outs[0]),
                               np.sin(np.asarray(x)) * 1.0 + c, rtol=1e-6)
    with pytest.raises(TypeError, match="expected 2 arguments"):
        eval_jaxpr(closed.jaxpr, closed.consts, x)


def test_eval_jaxpr_under_tracing_restages():
    closed = ember.make_jaxpr(lambda x: jnp.sin(x) + 1.0)(1.0)
    again = ember.make_jaxpr(lambda x: eval_jaxpr(closed.jaxpr, closed.consts, x)[0])(1.0)
    assert str(again) == str(closed)


def test_literal_output_and_closed_jaxpr_api():
    closed = ember.make_jaxpr(lambda x: (x, 2))(1.0)
    assert isinstance(closed, ClosedJaxpr)
    assert isinstance(closed.jaxpr.outvars[1], Literal)
    assert closed.in_avals == [ShapedArray((), np.float32, True)]
    assert [a.str_short() for a in closed.out_avals] == ["f32[]", "i32[]"]
    assert eval_jaxpr(closed.jaxpr, closed.consts, 5.0)[1] == 2
    with pytest.raises(ValueError, match="consts"):
        ClosedJaxpr(closed.jaxpr, [1.0])


def test_eval_jaxpr_keeps_weak_types_of_literals():
    f = lambda x: -2 * jnp.sin(x) + x  # noqa: E731
    closed = ember.make_jaxpr(f)(3.0)
    (out,) = ember.jaxpr.eval_closed_jaxpr(closed, 3.0)
    assert out.weak_type
    g = ember.grad(ember.jit(f))(3.0)
    assert g.weak_type and abs(float(g) - 2.979985) < 1e-6


def test_inline_calls_replaces_jit_and_custom_derivative_calls_by_their_bodies():
    from ember.custom_derivatives import custom_jvp_call_p, custom_vjp_call_p
    from ember.interpreters.partial_eval import inline_calls
    from ember.interpreters.pjit import pjit_p

    @ember.custom_jvp
    def f(x):
        return jnp.sin(x) * 2.0

    f.defjvp(lambda primals, tangents: (f(*primals), tangents[0]))

    @ember.custom_vjp
    def g(x):
        return jnp.exp(x) + 1.0

    g.defvjp(lambda x: (g(x), None), lambda _, ct: (ct,))
    inner = ember.jit(lambda x, y: f(x) - g(y) * y)
    closed = ember.make_jaxpr(lambda x, y: inner(x + 1.0, y) * 3.0)(1.0, 2.0)
    calls = (pjit_p, custom_jvp_call_p, custom_vjp_call_p)
    flat = inline_calls(closed, calls)
    names = [e.primitive.name for e in flat.jaxpr.eqns]
    assert not any(e.primitive in calls for e in flat.jaxpr.eqns)
    assert names == ["add", "sin", "mul", "exp", "add", "mul", "sub", "mul"]
    for x, y in ((1.0, 2.0), (-0.5, 0.25)):
        want = (np.sin(np.float32(x + 1)) * 2 - (np.exp(np.float32(y)) + 1) * y) * 3
        np.testing.assert_allclose(eval_jaxpr(flat.jaxpr, flat.consts, x, y)[0], want,
                                   rtol=1e-6)
    assert inline_calls(flat, calls) is flat  # (nothing to inline: the same jaxpr)
