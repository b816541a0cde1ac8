"""The jit and tracing API surface against JAX's behaviour (values checked against JAX 0.10
and written here as literals): jit's static/donated argument specifications, the
lowered/compiled/traced stage objects, ShapeDtypeStruct, make_jaxpr, device_get and the
errors for leaked tracers."""

from __future__ import annotations

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
