"""vmap: API semantics and errors (checked against JAX), pytrees, nesting, compositions with
grad/jvp/jit, custom derivatives and checkpoint under vmap, batch_jaxpr, and the jacobians
built on vmap (jacfwd/jacrev/hessian) against NumPy and finite differences.

Per-primitive batching rules are tested against a Python loop in test_vmap_op_records.py.
"""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import core, errors, lax
from ember.interpreters import batching
from ember.jaxpr import eval_closed_jaxpr

jax = pytest.importorskip("jax")
jjnp = pytest.importorskip("jax.numpy")

RNG = np.random.default_rng(0)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def both(ours, theirs):
    """Runs ``ours`` and ``theirs`` (the same call under ember and JAX); returns the
    exception type and message of each (None when it returns)."""
    out = []
    for f in (ours, theirs):
        try:
            f()
        except Exception as e:  # noqa: BLE001 - the test compares whatever is raised
            out.append((type(e).__name__, str(e)))
        else:
            out.append(None)
    return out


# --------------------------------------------------------------------------- in_axes / out_axes


def test_in_axes_int_none_tuple_and_negative():
    x, y = rand(3, 4), rand(4)
    got = ember.vmap(lambda a, b: lax.add_any(a, b), in_axes=(0, None))(x, y)
    close(got, x + y)
    got = ember.vmap(lambda a, b: lax.add_any(a, b), in_axes=(-1, None))(x.T, y)
    close(got, x + y)
    got = ember.vmap(lambda a, b: lax.add_any(a, b), in_axes=[1, 0])(x.T, x)
    close(got, 2 * x)
    # in_axes=None everywhere needs axis_size; the output is broadcast along the new axis.
    got = ember.vmap(lambda a: a, in_axes=None, axis_size=2)(y)
    close(got, np.broadcast_to(y, (2, 4)))


def test_in_axes_pytree_prefix_and_kwargs():
    d = {"a": rand(3, 2), "b": rand(2)}
    f = ember.vmap(lambda t: lax.add_any(t["a"], t["b"]), in_axes=({"a": 0, "b": None},))
    close(f(d), d["a"] + d["b"])
    # A tuple entry may be a prefix: one axis for a whole argument.
    pair = (rand(5, 3), rand(3, 5))
    g = ember.vmap(lambda p: lax.add_any(p[0], p[1]), in_axes=((0, 1),))
    close(g(pair), pair[0] + pair[1].T)
    # Keyword arguments are mapped along axis 0.
    x, y = rand(4, 2), rand(4, 2)
    h = ember.vmap(lambda a, b: lax.add_any(a, b), in_axes=(1,))
    close(h(x.T, b=x), 2 * x)
    close(ember.vmap(lambda a, *, k: lax.add_any(a, k))(x, k=y), x + y)


def test_unmapped_non_array_arguments_pass_through():
    x = rand(3, 2)
    f = ember.vmap(lambda a, s, cfg: lax.add_any(a, a) if s == "twice" and cfg["on"] else a,
                   in_axes=(0, None, None))
    close(f(x, "twice", {"on": True}), 2 * x)
    # None leaves inside an argument are empty subtrees.
    close(ember.vmap(lambda a, b: a)(x, None), x)


def test_out_axes_pytrees_negative_and_none():
    x = rand(3, 4)
    out = ember.vmap(lambda a: (a, {"k": a}), out_axes=(0, {"k": 1}))(x)
    close(out[0], x)
    close(out[1]["k"], x.T)
    close(ember.vmap(lambda a: a, out_axes=-1)(x), x.T)
    out = ember.vmap(lambda a: [a, a], out_axes=[0, -2])(x)
    close(out[1], x)
    # out_axes=None for an output that does not depend on the mapped input: passed as is.
    a, c = ember.vmap(lambda a: (a, 2.0), out_axes=(0, None))(x)
    close(a, x)
    assert c == 2.0
    ja, jc = jax.vmap(lambda a: (a, 2.0), out_axes=(0, None))(x)
    assert type(c) is type(jc)


@pytest.mark.parametrize("value", [1.0, 1, True])
def test_python_scalar_outputs_broadcast_like_jax(value):
    x = rand(3, 2)
    got = ember.vmap(lambda a: value)(x)
    want = jax.vmap(lambda a: value)(x)
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    assert got.weak_type == want.weak_type
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_unmapped_array_output_broadcast_along_out_axis():
    x, w = rand(3, 2), rand(2, 5)
    got = ember.vmap(lambda a, b: b, in_axes=(0, None), out_axes=1)(x, w)
    close(got, np.broadcast_to(w[:, None, :], (2, 3, 5)))
    got = ember.vmap(lambda a, b: b, in_axes=(0, None), out_axes=-1)(x, w)
    close(got, np.broadcast_to(w[:, :, None], (2, 5, 3)))


def test_zero_size_axis_and_identity_keeps_numpy():
    got = ember.vmap(lambda a: lax.add_any(a, a))(np.ones((0, 2), np.float32))
    assert got.shape == (0, 2)
    x = np.ones(3, np.float32)
    # Like JAX, a mapped argument returned unchanged along its own axis is not copied.
    assert type(ember.vmap(lambda a: a)(x)) is type(jax.vmap(lambda a: a)(x))


def test_axis_name_is_kept_on_the_trace():
    seen = []

    def f(a):
        trace = core.current_trace()
        seen.append((type(trace).__name__, trace.axis_name, trace.axis_size))
        return a

    ember.vmap(f, axis_name="batch")(rand(4, 2))
    assert seen == [("BatchTrace", "batch", 4)]


def test_pytree_inputs_and_outputs():
    tree = {"w": rand(3, 2, 2), "b": (rand(3, 2), rand(2))}

    def f(t):
        return {"sum": lax.add_any(t["b"][0], t["b"][1]), "w": t["w"]}

    out = ember.vmap(f, in_axes=({"w": 0, "b": (0, None)},))(tree)
    close(out["sum"], tree["b"][0] + tree["b"][1])
    close(out["w"], tree["w"])


# --------------------------------------------------------------------------- errors


_X, _Y = np.ones((3, 4), np.float32), np.ones((5, 4), np.float32)


def _same_error(call):
    """Calls ``call(vmap, jnp_mod)`` with ember and with JAX; both must raise the same
    exception type with the same message."""
    ours, theirs = both(lambda: call(ember.vmap), lambda: call(jax.vmap))
    assert ours is not None and theirs is not None, (ours, theirs)
    assert ours == theirs


@pytest.mark.parametrize("name,call", [
    ("inconsistent sizes", lambda vmap: vmap(lambda a, b: a)(_X, _Y)),
    ("inconsistent sizes, grouped",
     lambda vmap: vmap(lambda a, b, c, d, e: a)(_X, _X, _Y, _Y, np.ones(7, np.float32))),
    ("inconsistent sizes, kwargs", lambda vmap: vmap(lambda a, b: a)(_X, b=_Y)),
    ("inconsistent sizes, pytree", lambda vmap: vmap(lambda a: a)({"a": _X, "b": _Y})),
    ("inconsistent sizes, negative axis",
     lambda vmap: vmap(lambda a, b: a, in_axes=(-1, 0))(_X, _Y)),
    ("axis_size disagrees", lambda vmap: vmap(lambda a: a, axis_size=2)(_X)),
    ("in_axes length", lambda vmap: vmap(lambda a, b: a, in_axes=(0,))(_X, _X)),
    ("axis out of range", lambda vmap: vmap(lambda a: a, in_axes=2)(_X)),
    ("negative axis out of range", lambda vmap: vmap(lambda a: a, in_axes=-3)(_X)),
    ("scalar mapped", lambda vmap: vmap(lambda a: a)(1.0)),
    ("nothing mapped", lambda vmap: vmap(lambda a: a, in_axes=None)(_X)),
    ("no arguments", lambda vmap: vmap(lambda: 1.0)()),
    ("out_axes None, mapped output", lambda vmap: vmap(lambda a: a, out_axes=None)(_X)),
    ("out_axes None, mapped leaf",
     lambda vmap: vmap(lambda a: {"q": a}, out_axes=None)(_X)),
    ("out_axes out of range", lambda vmap: vmap(lambda a: a, out_axes=3)(_X)),
    ("out_axes negative out of range", lambda vmap: vmap(lambda a: a, out_axes=-4)(_X)),
    ("non-array argument", lambda vmap: vmap(lambda a: a)("abc")),
    ("non-array keyword argument", lambda vmap: vmap(lambda a, s=None: a)(_X, s="q")),
    ("non-array output", lambda vmap: vmap(lambda a: "s")(_X)),
    ("in_axes float", lambda vmap: vmap(lambda a: a, in_axes=1.0)),
    ("in_axes dict", lambda vmap: vmap(lambda a: a, in_axes={"a": 0})(_X)),
    ("in_axes bool", lambda vmap: vmap(lambda a: a, in_axes=True)),
    ("in_axes numpy int leaf", lambda vmap: vmap(lambda a: a, in_axes=(np.int64(1),))),
    ("out_axes float", lambda vmap: vmap(lambda a: a, out_axes=1.0)),
    ("out_axes bool", lambda vmap: vmap(lambda a: a, out_axes=True)),
    ("not callable", lambda vmap: vmap(3)),
])
def test_errors_match_jax(name, call):
    _same_error(call)


def test_tree_prefix_errors():
    with pytest.raises(ValueError, match="vmap in_axes specification must be a tree prefix "
                                         "of the corresponding value"):
        ember.vmap(lambda a: a, in_axes=({"c": 0},))({"a": _X})
    with pytest.raises(ValueError, match="vmap out_axes specification must be a tree prefix "
                                         "of the corresponding value"):
        ember.vmap(lambda a: (a, a), out_axes=(0, 1, 2))(_X)


def test_value_dependent_python_control_flow_raises_tracer_error():
    with pytest.raises(errors.TracerBoolConversionError):
        ember.vmap(lambda a: 1 if a else 0)(np.ones(3, bool))


# --------------------------------------------------------------------------- nesting


def test_nested_vmap_with_different_axes():
    x = rand(2, 3, 4)
    y = rand(4, 3)
    # inner maps x's axis 0 (of the 3x4 slice) against y's axis 1; outer maps x's axis 0.
    inner = ember.vmap(lambda a, b: lax.add_any(a, b), in_axes=(0, 1))
    got = ember.vmap(inner, in_axes=(0, None))(x, y)
    want = x + y.T[None]
    close(got, want)
    got = ember.vmap(ember.vmap(lambda a: a, out_axes=1), in_axes=2, out_axes=0)(x)
    close(got, np.transpose(x, (2, 1, 0)))


def test_nested_vmap_inner_unmapped_outer_mapped():
    x = rand(3, 5)
    f = ember.vmap(ember.vmap(lambda a, b: lax.add_any(a, b), in_axes=(None, 0)),
                   in_axes=(0, None))
    got = f(x[:, 0], x[0])
    close(got, x[:, 0][:, None] + x[0][None, :])


# --------------------------------------------------------------------------- compositions


def _f(x, w):
    return jnp.sum(jnp.tanh(x * w) ** 2)


def _jf(x, w):
    return jjnp.sum(jjnp.tanh(x * w) ** 2)


def test_vmap_of_grad_and_grad_of_vmap():
    xs, w = rand(4, 3), rand(3)
    want = jax.vmap(jax.grad(_jf), in_axes=(0, None))(xs, w)
    close(ember.vmap(ember.grad(_f), in_axes=(0, None))(xs, w), want)
    want_w = jax.grad(lambda w: jjnp.sum(jax.vmap(_jf, in_axes=(0, None))(xs, w)))(w)
    got_w = ember.grad(lambda w: jnp.sum(ember.vmap(_f, in_axes=(0, None))(xs, w)))(w)
    close(got_w, want_w)


def test_jvp_of_vmap_and_vmap_of_jvp():
    xs, ts, w = rand(4, 3), rand(4, 3), rand(3)
    f = ember.vmap(_f, in_axes=(0, None))
    jf = jax.vmap(_jf, in_axes=(0, None))
    y, t = ember.jvp(lambda x: f(x, w), (xs,), (ts,))
    jy, jt = jax.jvp(lambda x: jf(x, w), (xs,), (ts,))
    close(y, jy)
    close(t, jt)
    y, t = ember.vmap(lambda x, tx: ember.jvp(lambda a: _f(a, w), (x,), (tx,)))(xs, ts)
    close(y, jy)
    close(t, jt)


def test_jit_of_vmap_and_vmap_of_jit():
    xs, w = rand(5, 3), rand(3)
    want = jax.vmap(_jf, in_axes=(0, None))(xs, w)
    close(ember.jit(ember.vmap(_f, in_axes=(0, None)))(xs, w), want)
    close(ember.vmap(ember.jit(_f), in_axes=(0, None))(xs, w), want)
    close(ember.vmap(ember.jit(_f), in_axes=(1, None))(xs.T, w), want)


def test_vmap_of_jit_stays_one_pjit():
    xs = rand(5, 3)
    jaxpr = ember.make_jaxpr(ember.vmap(ember.jit(lambda a: lax.add_any(a, a))))(xs)
    assert [e.primitive.name for e in jaxpr.eqns] == ["jit"]
    inner = jaxpr.eqns[0].params["jaxpr"]
    assert inner.in_avals[0].shape == (5, 3)
    assert [e.primitive.name for e in inner.eqns] == ["add_any"]
    # A mapped axis in the middle stays there (no transpose): the rules' own dims are kept.
    jaxpr = ember.make_jaxpr(ember.vmap(ember.jit(lambda a: lax.add_any(a, a)), in_axes=1,
                                        out_axes=1))(xs.T)
    assert [e.primitive.name for e in jaxpr.eqns] == ["jit"]
    assert jaxpr.out_avals[0].shape == (3, 5)


def test_vmap_of_vmap_of_jit_and_grad():
    xs, w = rand(2, 3, 4), rand(4)
    g = ember.vmap(ember.vmap(ember.jit(ember.grad(_f)), in_axes=(0, None)), in_axes=(1, None))
    jg = jax.vmap(jax.vmap(jax.grad(_jf), in_axes=(0, None)), in_axes=(1, None))
    close(g(xs, w), jg(xs, w))


def test_vmap_of_jit_with_unmapped_outputs():
    x, y = rand(3, 2), rand(2)
    a, b = ember.vmap(ember.jit(lambda a, b: (lax.add_any(a, a), b)), in_axes=(0, None))(x, y)
    close(a, 2 * x)
    close(b, np.broadcast_to(y, (3, 2)))
    jaxpr = ember.make_jaxpr(ember.vmap(ember.jit(lambda a, b: (a, b)), in_axes=(0, None)))(x, y)
    assert [e.primitive.name for e in jaxpr.eqns] == ["jit", "broadcast_in_dim"]


def test_grad_of_jit_of_vmap():
    xs, w = rand(4, 3), rand(3)
    f = ember.jit(ember.vmap(_f, in_axes=(0, None)))
    got = ember.grad(lambda w: jnp.sum(f(xs, w)))(w)
    want = jax.grad(lambda w: jjnp.sum(jax.vmap(_jf, in_axes=(0, None))(xs, w)))(w)
    close(got, want)


def test_make_jaxpr_of_vmap():
    jaxpr = ember.make_jaxpr(ember.vmap(lambda a, b: lax.add_any(a, b), in_axes=(1, None)))(
        rand(4, 3), rand(4))
    assert [a.shape for a in jaxpr.in_avals] == [(4, 3), (4,)]
    assert jaxpr.out_avals[0].shape == (3, 4)
    names = [e.primitive.name for e in jaxpr.eqns]
    # The unmapped operand is materialized along the mapped axis (1), then the result's
    # batch axis moves to the front (out_axes=0).
    assert names == ["broadcast_in_dim", "add_any", "transpose"]


def test_add_any_and_stop_gradient_batching():
    x, y = rand(3, 4), rand(4, 3)
    close(ember.vmap(lax.add_any, in_axes=(0, 1))(x, y), x + y.T)
    close(ember.vmap(lax.add_any, in_axes=(1, None))(x, y[0]), x.T + y[0])
    close(ember.vmap(lax.stop_gradient, in_axes=1)(x), x.T)
    g = ember.grad(lambda w: jnp.sum(ember.vmap(lambda a: a * lax.stop_gradient(a))(w)))(x)
    close(g, x)


# --------------------------------------------------------------------------- custom_jvp


@ember.custom_jvp
def _cj(x, y):
    return jnp.sin(x) * y


@_cj.defjvp
def _cj_jvp(primals, tangents):
    x, y = primals
    tx, ty = tangents
    # Deliberately not the true derivative, so the tests can tell the rule was used.
    return _cj(x, y), 3.0 * tx + 5.0 * ty


def test_custom_jvp_value_under_vmap():
    xs, y = rand(4, 3), rand(3)
    close(ember.vmap(_cj, in_axes=(0, None))(xs, y), np.sin(xs) * y)
    jaxpr = ember.make_jaxpr(ember.vmap(_cj, in_axes=(0, None)))(xs, y)
    assert "custom_jvp_call" in [e.primitive.name for e in jaxpr.eqns]


def test_custom_jvp_rule_used_by_grad_of_vmap_and_vmap_of_grad():
    xs, y = rand(4, 3), rand(3)
    f = ember.vmap(_cj, in_axes=(0, None))
    gx, gy = ember.grad(lambda x, y: jnp.sum(f(x, y)), argnums=(0, 1))(xs, y)
    close(gx, np.full_like(xs, 3.0))
    close(gy, np.full_like(y, 5.0 * 4))  # y is shared by the 4 examples: summed
    g = ember.vmap(ember.grad(lambda x, y: jnp.sum(_cj(x, y)), argnums=(0, 1)),
                   in_axes=(0, None))(xs, y)
    close(g[0], np.full_like(xs, 3.0))
    close(g[1], np.full((4, 3), 5.0))


def test_custom_jvp_rule_used_by_jvp_of_vmap():
    xs, ts, y = rand(4, 3), rand(4, 3), rand(3)
    out, tout = ember.jvp(lambda x: ember.vmap(_cj, in_axes=(0, None))(x, y), (xs,), (ts,))
    close(out, np.sin(xs) * y)
    close(tout, 3.0 * ts)
    out, tout = ember.vmap(lambda x, t: ember.jvp(lambda a: _cj(a, y), (x,), (t,)))(xs, ts)
    close(tout, 3.0 * ts)


def test_custom_jvp_under_vmap_and_jit():
    xs, y = rand(4, 3), rand(3)
    f = ember.jit(ember.vmap(_cj, in_axes=(0, None)))
    close(f(xs, y), np.sin(xs) * y)
    g = ember.grad(lambda x: jnp.sum(f(x, y)))(xs)
    close(g, np.full_like(xs, 3.0))
    g = ember.jit(ember.vmap(ember.grad(lambda x: jnp.sum(_cj(x, y)))))(xs)
    close(g, np.full_like(xs, 3.0))
    g = ember.vmap(ember.jit(ember.grad(lambda x: jnp.sum(_cj(x, y)))))(xs)
    close(g, np.full_like(xs, 3.0))
    # The custom rule survives inside a jitted callee that is then batched and differentiated.
    f = ember.vmap(ember.jit(_cj), in_axes=(0, None))
    gx, gy = ember.grad(lambda x, y: jnp.sum(f(x, y)), argnums=(0, 1))(xs, y)
    close(gx, np.full_like(xs, 3.0))
    close(gy, np.full_like(y, 20.0))


def test_custom_jvp_nested_vmap_and_batched_jvp_rule():
    xs = rand(2, 3, 4)
    y = rand(4)
    f = ember.vmap(ember.vmap(_cj, in_axes=(0, None)), in_axes=(1, None))
    close(f(xs, y), np.transpose(np.sin(xs) * y, (1, 0, 2)))
    g = ember.grad(lambda x: jnp.sum(f(x, y)))(xs)
    close(g, np.full_like(xs, 3.0))


def test_custom_jvp_closing_over_a_mapped_value():
    xs, ys = rand(4, 3), rand(4, 3)

    def outer(x, y):
        @ember.custom_jvp
        def f(a):
            return a * y

        # The rule closes over the mapped y too: it must see each example's y.
        f.defjvp(lambda p, t: (f(p[0]), t[0] * 7.0 * y))
        return f(x)

    close(ember.vmap(outer)(xs, ys), xs * ys)
    close(ember.vmap(ember.grad(lambda x, y: jnp.sum(outer(x, y))))(xs, ys), 7.0 * ys)
    close(ember.grad(lambda x: jnp.sum(ember.vmap(outer)(x, ys)))(xs), 7.0 * ys)
    _, t = ember.jvp(lambda x: ember.vmap(outer)(x, ys), (xs,), (xs,))
    close(t, 7.0 * ys * xs)


def test_custom_vjp_closing_over_a_mapped_value():
    xs, ys = rand(4, 3), rand(4, 3)

    def outer(x, y):
        @ember.custom_vjp
        def g(a):
            return a * y

        g.defvjp(lambda a: (a * y, None), lambda r, ct: (ct * 5.0 * y,))
        return g(x)

    close(ember.vmap(outer)(xs, ys), xs * ys)
    close(ember.grad(lambda x: jnp.sum(ember.vmap(outer)(x, ys)))(xs), 5.0 * ys)
    close(ember.vmap(ember.grad(lambda x, y: jnp.sum(outer(x, y))))(xs, ys), 5.0 * ys)


# --------------------------------------------------------------------------- custom_vjp


@ember.custom_vjp
def _cv(x, y):
    return jnp.sin(x) * y


def _cv_fwd(x, y):
    return _cv(x, y), (jnp.cos(x), y)


def _cv_bwd(res, g):
    cos_x, y = res
    # Not the true derivative: x gets 2 * g * cos(x) * y, y gets 7 * g.
    return 2.0 * g * cos_x * y, 7.0 * g


_cv.defvjp(_cv_fwd, _cv_bwd)


def test_custom_vjp_rule_used_by_vmap_of_grad():
    xs, y = rand(4, 3), rand(3)
    close(ember.vmap(_cv, in_axes=(0, None))(xs, y), np.sin(xs) * y)
    g = ember.vmap(ember.grad(lambda x, y: jnp.sum(_cv(x, y)), argnums=(0, 1)),
                   in_axes=(0, None))(xs, y)
    close(g[0], 2.0 * np.cos(xs) * y)
    close(g[1], np.full((4, 3), 7.0))


def test_custom_vjp_rule_used_by_grad_of_sum_of_vmap():
    xs, y = rand(4, 3), rand(3)
    f = ember.vmap(_cv, in_axes=(0, None))
    gx, gy = ember.grad(lambda x, y: jnp.sum(f(x, y)), argnums=(0, 1))(xs, y)
    close(gx, 2.0 * np.cos(xs) * y)
    close(gy, np.full(3, 7.0 * 4))  # summed over the batch for the shared y
    jaxpr = ember.make_jaxpr(f)(xs, y)
    assert "custom_vjp_call" in [e.primitive.name for e in jaxpr.eqns]


def test_custom_vjp_under_vmap_and_jit():
    xs, y = rand(4, 3), rand(3)
    f = ember.jit(ember.vmap(_cv, in_axes=(0, None)))
    gx = ember.grad(lambda x: jnp.sum(f(x, y)))(xs)
    close(gx, 2.0 * np.cos(xs) * y)
    gx = ember.jit(ember.vmap(ember.grad(lambda x: jnp.sum(_cv(x, y)))))(xs)
    close(gx, 2.0 * np.cos(xs) * y)
    gy = ember.jit(ember.grad(lambda y: jnp.sum(ember.vmap(_cv, in_axes=(0, None))(xs, y))))(y)
    close(gy, np.full(3, 28.0))
    f = ember.vmap(ember.jit(_cv), in_axes=(0, None))
    gx, gy = ember.grad(lambda x, y: jnp.sum(f(x, y)), argnums=(0, 1))(xs, y)
    close(gx, 2.0 * np.cos(xs) * y)
    close(gy, np.full(3, 28.0))


def test_custom_vjp_nested_vmap():
    xs, y = rand(2, 3, 4), rand(4)
    f = ember.vmap(ember.vmap(_cv, in_axes=(0, None)), in_axes=(0, None))
    gx, gy = ember.grad(lambda x, y: jnp.sum(f(x, y)), argnums=(0, 1))(xs, y)
    close(gx, 2.0 * np.cos(xs) * y)
    close(gy, np.full(4, 7.0 * 6))


def test_custom_vjp_shared_input_cotangent_is_the_sum_over_the_batch():
    # bwd ignores the cotangent for y: every example contributes ones, so the gradient of
    # the sum over the batch is the batch size (what a Python loop of grads gives). JAX 0.10
    # returns ones here (it does not sum an unmapped cotangent); ember follows the loop.
    @ember.custom_vjp
    def f(x, y):
        return x * y

    f.defvjp(lambda x, y: (x * y, None), lambda r, g: (g, jnp.ones(3)))
    xs, y = rand(4, 3), rand(3)
    g = ember.grad(lambda y: jnp.sum(ember.vmap(f, in_axes=(0, None))(xs, y)))(y)
    loop = sum(np.asarray(ember.grad(lambda y, x=x: jnp.sum(f(x, y)))(y)) for x in xs)
    close(g, loop)
    close(g, np.full(3, 4.0))


def test_custom_derivatives_with_integer_values_under_vmap():
    @ember.custom_jvp
    def f(x, k):
        return x * k, k

    f.defjvp(lambda p, t: (f(*p), (t[0] * 10.0, np.zeros(np.shape(p[1]), ember.dtypes.float0))))
    xs, ks = rand(4, 3), np.arange(12, dtype=np.int32).reshape(4, 3)
    out, kk = ember.vmap(f)(xs, ks)
    close(out, xs * ks)
    np.testing.assert_array_equal(np.asarray(kk), ks)
    g = ember.grad(lambda x: jnp.sum(ember.vmap(f)(x, ks)[0]))(xs)
    close(g, np.full_like(xs, 10.0))

    @ember.custom_vjp
    def h(x, k):
        return x * k

    h.defvjp(lambda x, k: (x * k, k), lambda k, g: (g * 3.0, None))
    g = ember.grad(lambda x: jnp.sum(ember.vmap(h)(x, ks)))(xs)
    close(g, np.full_like(xs, 3.0))
    g = ember.vmap(ember.grad(lambda x, k: jnp.sum(h(x, k))))(xs, ks)
    close(g, np.full_like(xs, 3.0))


def test_custom_vjp_forward_mode_under_vmap_raises():
    xs = rand(4, 3)
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        ember.vmap(lambda x, t: ember.jvp(lambda a: _cv(a, a), (x,), (t,)))(xs, xs)


# --------------------------------------------------------------------------- checkpoint


def test_checkpoint_under_vmap():
    xs, w = rand(4, 3), rand(3)
    cf = ember.checkpoint(_f)
    want = jax.vmap(_jf, in_axes=(0, None))(xs, w)
    close(ember.vmap(cf, in_axes=(0, None))(xs, w), want)
    jaxpr = ember.make_jaxpr(ember.vmap(cf, in_axes=(0, None)))(xs, w)
    assert [e.primitive.name for e in jaxpr.eqns] == ["remat2"]
    want_g = jax.grad(lambda w: jjnp.sum(jax.vmap(_jf, in_axes=(0, None))(xs, w)))(w)
    got_g = ember.grad(lambda w: jnp.sum(ember.vmap(cf, in_axes=(0, None))(xs, w)))(w)
    close(got_g, want_g)
    close(ember.vmap(ember.grad(cf), in_axes=(0, None))(xs, w),
          jax.vmap(jax.grad(_jf), in_axes=(0, None))(xs, w))


# --------------------------------------------------------------------------- batch_jaxpr


def test_batch_jaxpr_natural_and_forced_dims():
    closed = ember.make_jaxpr(lambda a, b: (lax.add_any(a, b), b))(rand(3), rand(3))
    batched, dims = batching.batch_jaxpr(closed, 4, [1, None])
    assert [a.shape for a in batched.in_avals] == [(3, 4), (3,)]
    assert list(dims) == [1, None]
    x, y = rand(3, 4), rand(3)
    outs = eval_closed_jaxpr(batched, x, y)
    close(outs[0], x + y[:, None])
    close(outs[1], y)
    forced, dims = batching.batch_jaxpr(closed, 4, [1, None], out_dims=0)
    assert list(dims) == [0, 0]
    assert [a.shape for a in forced.out_avals] == [(4, 3), (4, 3)]
    outs = eval_closed_jaxpr(forced, x, y)
    close(outs[0], (x + y[:, None]).T)
    close(outs[1], np.broadcast_to(y, (4, 3)))
    # Cached per signature.
    again, _ = batching.batch_jaxpr(closed, 4, [1, None], out_dims=0)
    assert again is forced


# --------------------------------------------------------------------------- jacobians


def _g(x, w):
    return jnp.tanh(w @ x) * x[0]


def _jg(x, w):
    return jjnp.tanh(w @ x) * x[0]


def test_jacfwd_jacrev_match_jax_and_finite_differences():
    x, w = rand(3), rand(4, 3)
    want = jax.jacfwd(_jg)(x, w)
    close(ember.jacfwd(_g)(x, w), want, 1e-5)
    close(ember.jacrev(_g)(x, w), want, 1e-5)
    # Central finite differences in float64 NumPy.
    eps = 1e-4
    fd = np.stack([(np.tanh(w @ (x + eps * e)) * (x + eps * e)[0]
                    - np.tanh(w @ (x - eps * e)) * (x - eps * e)[0]) / (2 * eps)
                   for e in np.eye(3)], axis=-1)
    close(ember.jacrev(_g)(x, w), fd, 2e-3)


def test_jacobians_of_pytrees_and_argnums():
    x, w = rand(3), rand(2, 3)

    def f(x, w):
        return {"a": w @ x, "b": (jnp.sum(x * x), w * 2.0)}

    def jf(x, w):
        return {"a": w @ x, "b": (jjnp.sum(x * x), w * 2.0)}

    for ours, theirs in ((ember.jacfwd, jax.jacfwd), (ember.jacrev, jax.jacrev)):
        got = ours(f, argnums=(0, 1))(x, w)
        want = theirs(jf, argnums=(0, 1))(x, w)
        got_l, got_t = ember.tree_util.tree_flatten(got)
        want_l = jax.tree_util.tree_leaves(want)
        assert len(got_l) == len(want_l)
        for g, e in zip(got_l, want_l):
            assert g.shape == e.shape
            close(g, e)


def test_jacobian_has_aux_and_jit():
    x = rand(4)

    def f(x):
        return jnp.sin(x) * 2.0, {"aux": x}

    jac, aux = ember.jacrev(f, has_aux=True)(x)
    close(jac, np.diag(2.0 * np.cos(x)))
    close(aux["aux"], x)
    jac, aux = ember.jit(ember.jacfwd(f, has_aux=True))(x)
    close(jac, np.diag(2.0 * np.cos(x)))


def test_hessian_matches_numpy():
    x, a = rand(3), rand(3, 3)

    def f(x):
        return jnp.sum(x ** 3) + x @ (a @ x)

    h = ember.hessian(f)(x)
    close(h, np.diag(6.0 * x) + a + a.T, 1e-4)
    close(ember.jit(ember.hessian(f))(x), np.diag(6.0 * x) + a + a.T, 1e-4)


def test_jacobians_of_integer_values_match_jax():
    x, k = rand(3), np.int32(2)
    got = ember.jacrev(lambda x, k: x * 2.0, argnums=(0, 1), allow_int=True)(x, k)
    want = jax.jacrev(lambda x, k: x * 2.0, argnums=(0, 1), allow_int=True)(x, k)
    for g, w in zip(got, want):
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
        close(g, w)
    got = ember.jacfwd(lambda x: (x > 0).astype(jnp.int32))(x)
    want = jax.jacfwd(lambda x: (x > 0).astype(jjnp.int32))(x)
    assert (got.shape, got.dtype) == (want.shape, want.dtype)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_jacobian_of_empty_input():
    jac = ember.jacfwd(lambda x: jnp.sum(x) + 1.0)(np.zeros((0,), np.float32))
    assert jac.shape == (0,)
    jac = ember.jacrev(lambda x: x * 2.0)(np.zeros((0,), np.float32))
    assert jac.shape == (0, 0)


@pytest.mark.parametrize("jac", [ember.jacfwd, ember.jacrev])
def test_jacobian_is_one_batched_call_not_a_loop(jac):
    # One vmapped pushforward/pullback: the traced program does not grow with the size.
    def f(x):
        return jnp.sin(x) * jnp.sum(x)

    small = ember.make_jaxpr(jac(f))(rand(2))
    large = ember.make_jaxpr(jac(f))(rand(40))
    assert len(small.eqns) == len(large.eqns)
