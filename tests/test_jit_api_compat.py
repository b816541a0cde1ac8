"""The jit and tracing API surface against JAX's behaviour (values checked against JAX 0.10
and written here as literals): jit's static/donated argument specifications, the
lowered/compiled/traced stage objects, ShapeDtypeStruct, make_jaxpr, device_get and the
errors for leaked tracers."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import ember
import ember.numpy as jnp


def _f(x, n):
    return x * n


# --------------------------------------------------------------------------- jit arguments


@pytest.mark.parametrize("kwargs", [
    {"donate_argnums": 5},                            # (JAX: only 2 positional arguments)
    {"donate_argnums": -3},
    {"donate_argnames": "zz"},                        # (not a parameter of _f)
    {"donate_argnums": 1, "static_argnums": 1},       # (static and donated)
    {"donate_argnames": "n", "static_argnames": "n"},
])
def test_jit_rejects_bad_donation(kwargs):
    with pytest.raises(ValueError, match="jit"):
        ember.jit(_f, **kwargs)


@pytest.mark.parametrize("kwargs", [
    {"static_argnums": "1"}, {"donate_argnums": "0"}, {"static_argnums": 1.0},
    {"static_argnames": 1},
])
def test_jit_argnums_must_be_ints_and_names_strings(kwargs):
    with pytest.raises(TypeError, match="jit: (static|donate)_argn"):
        ember.jit(_f, **kwargs)


def test_jit_static_argnums_out_of_range_message_names_the_given_number():
    with pytest.raises(ValueError, match=r"static_argnums=\(-3,\)"):
        ember.jit(_f, static_argnums=-3)


def test_jit_positional_only_names_are_rejected():
    def f(x, n, /):
        return x * n
    with pytest.raises(ValueError, match="positional-only"):
        ember.jit(f, static_argnames="n")
    with pytest.raises(ValueError, match="positional-only"):
        ember.jit(f, donate_argnames="x")
    assert ember.jit(f, static_argnums=1)(jnp.ones(2), 3).tolist() == [3.0, 3.0]


def test_jit_donation_accepted():
    g = ember.jit(_f, donate_argnums=0)
    assert g(jnp.ones(2), 2.0).tolist() == [2.0, 2.0]
    g = ember.jit(_f, donate_argnums=-1, donate_argnames="x")
    assert g(jnp.ones(2), 2.0).tolist() == [2.0, 2.0]


def test_jit_negative_static_argnums_count_from_the_call_arguments():
    # JAX resolves -1 against each call's positional arguments: here that is x, an array,
    # which is not hashable.
    def f(x, n=3):
        return x * n
    g = ember.jit(f, static_argnums=-1)
    with pytest.raises(ValueError, match="hashable"):
        g(jnp.ones(2))
    assert g(jnp.ones(2), 4).tolist() == [4.0, 4.0]

    # n given by keyword: -1 is x again.
    with pytest.raises(ValueError, match="hashable"):
        ember.jit(_f, static_argnums=-1)(jnp.ones(2), n=2.0)


def test_jit_donate_argnames_of_a_builtin():
    with pytest.raises(ValueError, match="donate_argnums"):
        ember.jit(max, donate_argnames="a")


# --------------------------------------------------------------------------- make_jaxpr


def test_make_jaxpr_negative_static_argnums():
    text = str(ember.make_jaxpr(_f, static_argnums=-1)(jnp.ones(3), 2))
    assert text == "{ lambda ; a:f32[3]. let b:f32[3] = mul a 2.0:f32[] in (b,) }"


def test_make_jaxpr_unhashable_static_argument():
    with pytest.raises(ValueError, match="make_jaxpr.*hashable"):
        ember.make_jaxpr(lambda x, n: x * n[0], static_argnums=1)(jnp.ones(2), [2])
    with pytest.raises(TypeError, match="make_jaxpr: static_argnums"):
        ember.make_jaxpr(_f, static_argnums="1")


def test_make_jaxpr_static_argument_given_by_keyword():
    text = str(ember.make_jaxpr(_f, static_argnums=(1,))(1.0, n=2))
    assert text == "{ lambda ; a:f32[]. let b:f32[] = mul a 2.0:f32[] in (b,) }"


def test_make_jaxpr_checks_its_arguments():
    with pytest.raises(ValueError, match="make_jaxpr: static_argnums"):
        ember.make_jaxpr(_f, static_argnums=(5,))
    with pytest.raises(TypeError, match="callable"):
        ember.make_jaxpr(3)


def test_make_jaxpr_return_shape_keeps_weak_types():
    _, shapes = ember.make_jaxpr(lambda x: (x, x * 2, x.astype(jnp.int32)),
                                 return_shape=True)(1.0)
    assert shapes == (ember.ShapeDtypeStruct((), np.float32, weak_type=True),
                      ember.ShapeDtypeStruct((), np.float32, weak_type=True),
                      ember.ShapeDtypeStruct((), np.int32))


# --------------------------------------------------------------------------- stages


def _g(x, n, *, k):
    return {"a": x * n + k, "b": (x.sum(),)}


def test_lowered_and_compiled_describe_their_arguments():
    lowered = ember.jit(_g, static_argnums=1).lower(jnp.ones((2, 3)), 3, k=1.0)
    compiled = lowered.compile()
    for stage in (lowered, compiled):
        assert str(stage.in_tree) == "PyTreeDef(((*,), {'k': *}))"
        assert repr(stage.in_avals) == ("((ShapedArray(float32[2,3]),), "
                                        "{'k': ShapedArray(float32[], weak_type=True)})")
        assert repr(stage.args_info) == (
            "((ArgInfo(_aval=ShapedArray(float32[2,3]), donated=False),), "
            "{'k': ArgInfo(_aval=ShapedArray(float32[], weak_type=True), donated=False)})")
        assert stage.args_info[0][0].shape == (2, 3)
        assert stage.args_info[0][0].dtype == np.float32
        assert str(stage.out_tree) == "PyTreeDef({'a': *, 'b': (*,)})"
        assert stage.donate_argnums == ()


def test_stages_donate_argnums_are_flat_leaf_indices():
    g = ember.jit(lambda x, y: (x, y["a"] + 1), donate_argnums=1)
    traced = g.trace(1.0, {"a": jnp.ones(2), "b": jnp.ones(3)})
    assert traced.donate_argnums == (1, 2)
    assert traced.lower().donate_argnums == (1, 2)
    assert traced.lower().compile().donate_argnums == (1, 2)
    assert [a.donated for a in ember.tree_util.tree_leaves(traced.args_info)] == [
        False, True, True]


def test_lowered_out_info_has_no_weak_types_but_traced_does():
    # (JAX's lowered and compiled stages build their ShapeDtypeStructs without weak types.)
    g = ember.jit(lambda x: x)
    assert g.lower(1.0).out_info == ember.ShapeDtypeStruct((), np.float32)
    assert g.lower(1.0).compile().out_info == ember.ShapeDtypeStruct((), np.float32)
    assert g.trace(1.0).out_info == ember.ShapeDtypeStruct((), np.float32, weak_type=True)
    assert g.eval_shape(1.0) == ember.ShapeDtypeStruct((), np.float32, weak_type=True)


def test_compiled_accepts_arguments_differing_in_weak_type_only():
    g = ember.jit(lambda x, y: y)
    compiled = g.lower(jnp.ones(2), 1.0).compile()
    out = compiled(jnp.ones(2), jnp.float32(2))
    assert out.item() == 2.0 and out.aval.weak_type  # (the compiled output type)
    out = g.lower(jnp.ones(2), jnp.float32(1)).compile()(jnp.ones(2), 2.0)
    assert out.item() == 2.0 and not out.aval.weak_type
    with pytest.raises(TypeError):
        compiled(jnp.ones(2), 2)  # (int32: a different dtype)


def test_trace_stage():
    traced = ember.jit(_g, static_argnums=1).trace(jnp.ones(2), 3, k=1.0)
    assert traced.fun_name == "_g"
    assert str(ember.jit(_f, static_argnums=1).trace(jnp.ones(2), 3).jaxpr) == (
        "{ lambda ; a:f32[2]. let b:f32[2] = mul a 3.0:f32[] in (b,) }")
    assert repr(traced.out_avals) == (
        "{'a': ShapedArray(float32[2]), 'b': (ShapedArray(float32[]),)}")
    assert str(traced.in_tree) == "PyTreeDef(((*,), {'k': *}))"
    out = traced.lower().compile()(jnp.ones(2), k=2.0)
    assert out["a"].tolist() == [5.0, 5.0] and out["b"][0].item() == 2.0


def test_compiled_memory_analysis_peak_memory_in_bytes():
    m = ember.jit(jnp.sin).lower(jnp.ones(4)).compile().memory_analysis()
    assert m.peak_memory_in_bytes == m.peak_bytes >= 16


# --------------------------------------------------------------------------- ShapeDtypeStruct


def test_shape_dtype_struct_needs_a_dtype():
    with pytest.raises(ValueError, match="dtype must be specified"):
        ember.ShapeDtypeStruct((2,), None)
    with pytest.raises(TypeError):
        ember.ShapeDtypeStruct((2,), np.float32, True)  # (weak_type is keyword-only)


def test_shape_dtype_struct_is_immutable():
    s = ember.ShapeDtypeStruct((2,), np.float32)
    with pytest.raises(RuntimeError, match="immutable"):
        s.shape = (3,)
    assert s.shape == (2,)
    assert copy.deepcopy(s) == s and pickle.loads(pickle.dumps(s)) == s


def test_shape_dtype_struct_len_and_update():
    s = ember.ShapeDtypeStruct((2, 3), np.float32)
    assert len(s) == 2
    with pytest.raises(TypeError, match="unsized"):
        len(ember.ShapeDtypeStruct((), np.float32))
    assert s.update(shape=(3,)) == ember.ShapeDtypeStruct((3,), np.float32)
    assert s.update(dtype=np.int32, weak_type=True) == ember.ShapeDtypeStruct(
        (2, 3), np.int32, weak_type=True)


# --------------------------------------------------------------------------- leaks, device_get


def _leaked_tracer():
    store = []
    ember.jit(lambda x: store.append(x) or x)(jnp.ones(2))
    return store[0]


def test_leaked_tracer_passed_to_jit_or_device_put():
    leaked = _leaked_tracer()
    with pytest.raises(ember.errors.UnexpectedTracerError):
        ember.jit(lambda y: y)(leaked)
    with pytest.raises(ember.errors.UnexpectedTracerError):
        ember.jit(lambda y, z: y + z)(jnp.ones(2), leaked)
    with pytest.raises(ember.errors.UnexpectedTracerError):
        ember.device_put(leaked)
    # Under a running transformation device_put passes tracers through.
    assert ember.jit(lambda x: ember.device_put(x) * 2)(jnp.ones(2)).tolist() == [2.0, 2.0]


def test_device_get_converts_numpy_scalars_to_arrays():
    out = ember.device_get({"a": np.float32(1), "b": 2.0, "c": jnp.int32(3)})
    assert type(out["a"]) is np.ndarray and out["a"].dtype == np.float32 and out["a"].shape == ()
    assert type(out["b"]) is float
    assert type(out["c"]) is np.ndarray and out["c"].dtype == np.int32
    x = np.ones(2)
    assert ember.device_get(x) is x


# --------------------------------------------------------------------------- jaxpr printing


def test_nested_jit_binders_print_with_the_equation_names():
    # (JAX 0.10's text, operand repeated and a literal operand included.)
    jaxpr = ember.make_jaxpr(
        lambda x, y: ember.jit(lambda a, b, c: (a * b + c, c, a))(x, x, y))(1.0, 2.0)
    assert str(jaxpr) == (
        "{ lambda ; a:f32[] b:f32[]. let\n"
        "    c:f32[] d:f32[] e:f32[] = jit[\n"
        "      name=<lambda>\n"
        "      jaxpr={ lambda ; a:f32[] f:f32[] b:f32[]. let\n"
        "          g:f32[] = mul a f\n"
        "          c:f32[] = add g b\n"
        "        in (c, b, a) }\n"
        "    ] a a b\n"
        "  in (c, d, e) }")
    jaxpr = ember.make_jaxpr(lambda x: ember.jit(lambda a, b: a * b)(x, 2.0))(1.0)
    assert str(jaxpr) == (
        "{ lambda ; a:f32[]. let\n"
        "    b:f32[] = jit[\n"
        "      name=<lambda>\n"
        "      jaxpr={ lambda ; a:f32[] c:f32[]. let b:f32[] = mul a c in (b,) }\n"
        "    ] a 2.0:f32[]\n"
        "  in (b,) }")


def test_nested_jit_twice():
    inner = ember.jit(lambda b: jnp.exp(b) + 1.0)
    jaxpr = ember.make_jaxpr(lambda x: ember.jit(lambda a: inner(a * 2.0))(x) - 1.0)(1.0)
    assert str(jaxpr) == (
        "{ lambda ; a:f32[]. let\n"
        "    b:f32[] = jit[\n"
        "      name=<lambda>\n"
        "      jaxpr={ lambda ; a:f32[]. let\n"
        "          c:f32[] = mul a 2.0:f32[]\n"
        "          b:f32[] = jit[\n"
        "            name=<lambda>\n"
        "            jaxpr={ lambda ; c:f32[]. let\n"
        "                d:f32[] = exp c\n"
        "                b:f32[] = add d 1.0:f32[]\n"
        "              in (b,) }\n"
        "          ] c\n"
        "        in (b,) }\n"
        "    ] a\n"
        "    e:f32[] = sub b 1.0:f32[]\n"
        "  in (e,) }")


def test_jit_under_grad_keeps_its_name():
    def f(x):
        return -2 * jnp.sin(x) + x
    jaxpr = ember.make_jaxpr(ember.grad(ember.jit(f)))(3.0)
    assert [e.params["name"] for e in jaxpr.eqns if e.primitive.name == "jit"] == ["f", "f"]
    jaxpr = ember.make_jaxpr(lambda x: ember.jvp(ember.jit(f), (x,), (x,)))(1.0)
    assert jaxpr.eqns[0].params["name"] == "f"


def test_pretty_print_options_and_var_repr():
    jaxpr = ember.make_jaxpr(lambda x: jnp.sin(x) * 2 + ember.jit(jnp.cos)(x))(1.0)
    assert jaxpr.pretty_print(print_shapes=False, use_color=False) == (
        "{ lambda ; a. let\n"
        "    b = sin a\n"
        "    c = mul b 2.0:f32[]\n"
        "    d = jit[name=cos jaxpr={ lambda ; a. let d = cos a in (d,) }] a\n"
        "    e = add c d\n"
        "  in (e,) }")
    assert jaxpr.jaxpr.pretty_print(width=40) == (
        "{ lambda ; a:f32[]. let\n"
        "    b:f32[] = sin a\n"
        "    c:f32[] = mul b 2.0:f32[]\n"
        "    d:f32[] = jit[\n"
        "      name=cos\n"
        "      jaxpr={ lambda ; a:f32[]. let\n"
        "          d:f32[] = cos a\n"
        "        in (d,) }\n"
        "    ] a\n"
        "    e:f32[] = add c d\n"
        "  in (e,) }")
    assert repr(jaxpr.jaxpr.invars[0]).endswith(":float32[]")


def test_literal_of_a_fixed_dtype_prints_its_exact_value():
    # JAX prints a literal's value as a Python scalar: for f32/bf16/f16 literals that is the
    # exact value of the rounded constant; a weak-typed literal keeps its short text.
    assert str(ember.make_jaxpr(lambda x: x * 0.1)(jnp.ones(2))) == (
        "{ lambda ; a:f32[2]. let b:f32[2] = mul a 0.10000000149011612:f32[] in (b,) }")
    assert str(ember.make_jaxpr(lambda x: x * 0.1)(1.0)) == (
        "{ lambda ; a:f32[]. let b:f32[] = mul a 0.1:f32[] in (b,) }")
    assert str(ember.make_jaxpr(lambda x: x * 0.1)(jnp.ones(2, jnp.bfloat16))) == (
        "{ lambda ; a:bf16[2]. let b:bf16[2] = mul a 0.10009765625:bf16[] in (b,) }")
    assert str(ember.make_jaxpr(lambda x: x * 0.1)(jnp.ones(2, jnp.float16))) == (
        "{ lambda ; a:f16[2]. let b:f16[2] = mul a 0.0999755859375:f16[] in (b,) }")
    assert str(ember.make_jaxpr(lambda x: x + 3)(jnp.ones(2, jnp.int32))) == (
        "{ lambda ; a:i32[2]. let b:i32[2] = add a 3:i32[] in (b,) }")
    assert str(ember.make_jaxpr(lambda x: x * 0.5)(jnp.ones(2))) == (
        "{ lambda ; a:f32[2]. let b:f32[2] = mul a 0.5:f32[] in (b,) }")


def test_traced_stage_is_callable():
    traced = ember.jit(lambda x, y: (x, y + 1)).trace(1.0, y=jnp.ones(2))
    out = traced(2.0, y=jnp.ones(2))
    assert out[0] == 2.0 and out[1].tolist() == [2.0, 2.0]
    with pytest.raises(TypeError, match="structure"):
        traced(2.0, jnp.ones(2))


@pytest.mark.parametrize("transform", ["jit", "grad", "vmap"])
def test_compiled_under_a_transformation_is_a_type_error(transform):
    compiled = ember.jit(lambda x, y: x + y).lower(1.0, 1.0).compile()
    g = {"jit": ember.jit, "grad": ember.grad, "vmap": ember.vmap}[transform]
    arg = jnp.ones(2) if transform == "vmap" else 1.0
    with pytest.raises(TypeError, match="lowered and compiled") as info:
        g(lambda a: compiled(a, a))(arg)
    assert not isinstance(info.value, ember.errors.UnexpectedTracerError)


def test_device_put_keywords():
    x = jnp.ones(2)
    assert ember.device_put(x) is x and ember.device_put(x, may_alias=True) is x
    for kwargs in ({"may_alias": False}, {"donate": True}):
        y = ember.device_put(x, **kwargs)
        assert y is not x and y.tolist() == [1.0, 1.0]
    out = ember.device_put(1.0, src=ember.devices()[0])
    assert out.dtype == np.float32 and out.aval.weak_type


def test_broadcast_in_dim_prints_as_jax():
    assert str(ember.make_jaxpr(lambda: jnp.ones(2))()) == (
        "{ lambda ; . let a:f32[2] = broadcast_in_dim 1.0:f32[] in (a,) }")
    assert str(ember.make_jaxpr(lambda x: jnp.broadcast_to(x, (2, 3)))(jnp.ones(3))) == (
        "{ lambda ; a:f32[3]. let\n"
        "    b:f32[2,3] = broadcast_in_dim[broadcast_dimensions=(1,)] a\n"
        "  in (b,) }")
    eqn = ember.make_jaxpr(lambda x: jnp.broadcast_to(x, (2, 3)))(jnp.ones(3)).eqns[0]
    assert eqn.params == {"shape": (2, 3), "broadcast_dimensions": (1,)}  # (all still there)
