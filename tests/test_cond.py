"""lax.cond and lax.switch: values (eager, jit on both backends), pytrees, closures,
derivatives, vmap, printing, errors and side effects; JAX (when installed) and NumPy loops as
references."""

import re

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.test_util import check_grads

BACKENDS = ["cpu", "interpreter"]


def _f(x):
    return lax.cond(x.sum() > 0, lambda x: jnp.sin(x) * 2.0, jnp.cos, x)


def _ref_f(x):
    return np.sin(x) * 2.0 if x.sum() > 0 else np.cos(x)


XS = [np.array([0.5, -0.2, 1.5], np.float32), np.array([-0.5, -0.2, 0.3], np.float32)]


# --------------------------------------------------------------------------- values


@pytest.mark.parametrize("x", XS)
def test_cond_eager(x):
    np.testing.assert_allclose(_f(x), _ref_f(x), rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cond_and_switch_jit(backend):
    f = ember.jit(_f, backend=backend)
    for x in XS:
        np.testing.assert_allclose(f(x), _ref_f(x), rtol=1e-6)
    fns = [jnp.sin, jnp.cos, lambda x: x * 3.0]
    g = ember.jit(lambda i, x: lax.switch(i, fns, x), backend=backend)
    x = np.float32(0.7)
    for i, want in [(-3, np.sin(x)), (0, np.sin(x)), (1, np.cos(x)), (2, 3 * x), (9, 3 * x)]:
        np.testing.assert_allclose(g(np.int32(i), x), want, rtol=1e-6)


def test_switch_eager_clamps_index():
    fns = [lambda: 10, lambda: 20, lambda: 30]
    assert [int(lax.switch(i, fns)) for i in (-5, 0, 1, 2, 7)] == [10, 10, 20, 30, 30]
    assert int(lax.switch(np.uint8(1), fns)) == 20
    assert lax.switch(3, [lambda x: x + 1], 1) == 2  # a single branch is just called


def test_cond_numeric_predicate_and_keyword_operand():
    assert float(lax.cond(2, lambda x: x, lambda x: -x, 1.0)) == 1.0
    assert float(lax.cond(0.0, lambda x: x, lambda x: -x, 1.0)) == -1.0
    assert float(lax.cond(True, lambda x: x + 1, lambda x: x, operand=1.0)) == 2.0
    # JAX's older five-argument form: cond(pred, true_operand, true_fun, false_operand, false_fun)
    assert float(lax.cond(False, 1.0, lambda x: x, 5.0, lambda x: x * 2)) == 10.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_cond_pytrees_and_several_operands(backend):
    def f(p, a, b):
        return lax.cond(p, lambda a, b: {"s": a["x"] + b, "t": (a["y"], b)},
                        lambda a, b: {"s": a["x"] - b, "t": (a["y"] * 2, -b)}, a, b)

    a = {"x": np.arange(3, dtype=np.float32), "y": np.int32(4)}
    b = np.float32(1.5)
    for fn in (f, ember.jit(f, backend=backend)):
        out = fn(True, a, b)
        np.testing.assert_allclose(out["s"], a["x"] + b)
        assert int(out["t"][0]) == 4 and float(out["t"][1]) == 1.5
        out = fn(False, a, b)
        np.testing.assert_allclose(out["s"], a["x"] - b)
        assert int(out["t"][0]) == 8 and float(out["t"][1]) == -1.5
        assert out["t"][0].dtype == np.int32


@pytest.mark.parametrize("backend", BACKENDS)
def test_cond_closures_over_jit_arguments_and_concrete_arrays(backend):
    c = np.array([1.0, 2.0, 3.0], np.float32)

    def f(x, y, p):
        return lax.cond(p, lambda: x * y + c, lambda: x - c)

    f = ember.jit(f, backend=backend)
    x, y = np.float32(2.0), np.array([1.0, -1.0, 0.5], np.float32)
    np.testing.assert_allclose(f(x, y, True), x * y + c)
    np.testing.assert_allclose(f(x, y, False), x - c)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_conds(backend):
    def f(x, i):
        def outer_true(x):
            return lax.cond(x > 1.0, lambda x: x * 10.0, lambda x: x * 100.0, x)
        return lax.cond(i > 0, outer_true,
                        lambda x: lax.switch(i + 2, [jnp.sin, jnp.cos, jnp.exp], x), x)

    def ref(x, i):
        if i > 0:
            return x * 10.0 if x > 1.0 else x * 100.0
        return [np.sin, np.cos, np.exp][min(max(i + 2, 0), 2)](x)

    jf = ember.jit(f, backend=backend)
    for x in (np.float32(0.5), np.float32(2.0)):
        for i in (-3, -2, -1, 0, 1):
            want = ref(x, i)
            np.testing.assert_allclose(f(x, np.int32(i)), want, rtol=1e-6)
            np.testing.assert_allclose(jf(x, np.int32(i)), want, rtol=1e-6)


def test_cond_weak_type_of_result_follows_jax(jax):
    x = np.float32(2.0)
    for f in (lambda x: lax.cond(x > 0, lambda x: 1.0, lambda x: x, x),
              lambda x: lax.cond(x > 0, lambda x: x, lambda x: 1.0, x)):
        got = ember.make_jaxpr(f)(x).out_avals[0].weak_type
        want = jax.make_jaxpr(_as_jax(f))(x).out_avals[0].weak_type
        assert got == want


def _as_jax(f):
    """``f`` (written against ember.lax) run with JAX's lax."""
    import jax
    code = f.__code__
    return type(f)(code, {"lax": jax.lax, "jnp": jax.numpy}, None, f.__defaults__, f.__closure__)


# --------------------------------------------------------------------------- derivatives


@pytest.mark.parametrize("x", XS)
def test_cond_check_grads(x):
    check_grads(_f, (x.astype(np.float64),), order=2, modes=("fwd", "rev"), atol=1e-2,
                rtol=1e-2)


def test_grad_jacfwd_jacrev_hessian_match_jax(jax):
    def f(x, y):
        return lax.cond(x.sum() > y, lambda x, y: jnp.sin(x) * y ** 2,
                        lambda x, y: jnp.exp(x) / y, x, y)

    def transform(lib, fn, kind):
        if kind == "grad":
            return lib.grad(lambda x, y: fn(x, y).sum(), argnums=(0, 1))
        return getattr(lib, kind)(fn, argnums=(0, 1))

    jf = _as_jax(f)
    for (x, y), kinds in (((XS[0], np.float32(0.5)), ("grad", "jacrev", "hessian")),
                          ((XS[1], np.float32(2.0)), ("jacfwd", "jacrev"))):
        for kind in kinds:
            got = transform(ember, f, kind)(x, y)
            want = jax.jit(transform(jax, jf, kind))(x, y)  # (JAX's eager ops are slow)
            for g, w in zip(ember.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
                np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6, err_msg=kind)


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_of_jit_and_jit_of_grad(backend):
    loss = lambda x: _f(x).sum()  # noqa: E731
    for x in XS:
        want = 2 * np.cos(x) if x.sum() > 0 else -np.sin(x)
        np.testing.assert_allclose(ember.grad(ember.jit(loss, backend=backend))(x), want,
                                   rtol=1e-5)
        np.testing.assert_allclose(ember.jit(ember.grad(loss), backend=backend)(x), want,
                                   rtol=1e-5)


def test_grad_with_branch_specific_residuals_and_constant_branch():
    # The true branch saves cos(x) and x*y; the false branch saves exp(y); an output tangent
    # that is zero in one branch (a constant) and nonzero in the other.
    def f(x, y, p):
        return lax.cond(p, lambda x, y: (jnp.sin(x) * (x * y), 1.0 + 0 * y),
                        lambda x, y: (jnp.exp(y) * 3.0, jnp.exp(y)), x, y)

    def loss(x, y, p):
        a, b = f(x, y, p)
        return a + 2 * b

    x, y = 0.3, 0.8
    gx, gy = ember.grad(loss, argnums=(0, 1))(x, y, True)
    np.testing.assert_allclose(gx, np.cos(x) * x * y + np.sin(x) * y, rtol=1e-5)
    np.testing.assert_allclose(gy, np.sin(x) * x, rtol=1e-5)
    gx, gy = ember.grad(loss, argnums=(0, 1))(x, y, False)
    assert float(gx) == 0.0
    np.testing.assert_allclose(gy, 5 * np.exp(y), rtol=1e-5)


def test_grad_through_switch_with_integer_operand():
    def f(x, n, i):
        return lax.switch(i, [lambda x, n: x * n, lambda x, n: x ** 2, lambda x, n: x], x, n)

    for i, want in ((0, 3.0), (1, 2 * 1.5), (2, 1.0)):
        np.testing.assert_allclose(ember.grad(f)(1.5, 3, i), want, rtol=1e-6)


# --------------------------------------------------------------------------- vmap


@pytest.mark.parametrize("backend", [None, *BACKENDS])
def test_vmap_batched_and_unbatched_predicate(backend):
    xs = np.array([[0.5, -1.0], [-2.0, 0.3], [1.0, 1.0]], np.float32)
    ys = np.array([1.0, 2.0, 3.0], np.float32)

    def f(p, x, y):
        return lax.cond(p, lambda x, y: (x * y, y), lambda x, y: (x - y, -y), x, y)

    def ref(p, x, y):
        return (x * y, y) if p else (x - y, -y)

    def run(fn):
        return fn if backend is None else ember.jit(fn, backend=backend)

    preds = np.array([True, False, True])
    got = run(ember.vmap(f))(preds, xs, ys)  # batched predicate: select
    for k in range(3):
        for g, w in zip(got, ref(preds[k], xs[k], ys[k])):
            np.testing.assert_allclose(g[k], w)
    for p in (True, False):  # unbatched predicate, y unbatched
        got = run(ember.vmap(f, in_axes=(None, 0, None)))(p, xs, ys[0])
        for k in range(3):
            np.testing.assert_allclose(got[0][k], ref(p, xs[k], ys[0])[0])
        np.testing.assert_allclose(got[1], ref(p, xs[0], ys[0])[1])  # stays unbatched
    sw = ember.vmap(lambda i, x: lax.switch(i, [jnp.sin, jnp.cos, jnp.exp], x))
    idx = np.array([-1, 0, 1, 2, 5], np.int32)
    x = np.linspace(-1, 1, 5).astype(np.float32)
    want = [[np.sin, np.cos, np.exp][min(max(i, 0), 2)](v) for i, v in zip(idx, x)]
    np.testing.assert_allclose(run(sw)(idx, x), want, rtol=1e-6)


def test_vmap_of_grad_and_grad_of_vmap():
    xs = np.array([[0.5, -0.2, 1.5], [-0.5, -0.2, 0.3], [0.1, 0.1, -0.3]], np.float32)
    want = np.stack([2 * np.cos(x) if x.sum() > 0 else -np.sin(x) for x in xs])
    got = ember.vmap(ember.grad(lambda x: _f(x).sum()))(xs)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    got = ember.grad(lambda xs: ember.vmap(_f)(xs).sum())(xs)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_vmap_io_callback_with_batched_predicate_is_refused():
    def f(p, x):
        def t(x):
            return ember.experimental.io_callback(lambda v: v, ember.ShapeDtypeStruct((), x.dtype),
                                                  x)
        return lax.cond(p, t, lambda x: x, x)

    with pytest.raises(NotImplementedError, match="IO effect not supported in vmap-of-cond"):
        ember.vmap(f)(np.array([True, False]), np.ones(2, np.float32))


# --------------------------------------------------------------------------- printing, DCE


def test_make_jaxpr_matches_jax_text(jax):
    f = lambda x: lax.cond(x > 0, jnp.sin, jnp.cos, x)  # noqa: E731
    g = lambda x: lax.cond(x > 0, lambda x: (x, jnp.sin(x)), lambda x: (x, jnp.cos(x)), x)  # noqa
    h = lambda i: lax.switch(i, [lambda: 1.0, lambda: 2.0, lambda: 3.0])  # noqa: E731
    for fn, arg in ((f, np.float32(1.0)), (g, np.float32(1.0)), (h, np.int32(1))):
        got = str(ember.make_jaxpr(fn)(arg))
        want = str(jax.make_jaxpr(_as_jax(fn))(arg))
        assert "cond[" in got and "branches=(" in got
        assert got == want


def test_unused_cond_is_dropped_unless_a_branch_has_an_effect():
    def f(x):
        lax.cond(x > 0, jnp.sin, jnp.cos, x)
        return x * 2

    from ember.interpreters import partial_eval as pe
    closed = ember.make_jaxpr(f)(1.0)
    dced, _ = pe.dce_jaxpr(closed, [True])
    assert all(e.primitive.name != "cond" for e in dced.eqns)

    def g(x):
        lax.cond(x > 0, lambda x: ember.debug.print("hi {}", x), lambda x: None, x)
        return x * 2

    dced, _ = pe.dce_jaxpr(ember.make_jaxpr(g)(1.0), [True])
    assert any(e.primitive.name == "cond" for e in dced.eqns)


@pytest.mark.parametrize("backend", BACKENDS)
def test_debug_print_only_in_taken_branch(backend, capsys):
    def f(x):
        return lax.cond(x > 0, lambda x: (ember.debug.print("pos {}", x), x * 2)[1],
                        lambda x: (ember.debug.print("neg {}", x), -x)[1], x)

    jf = ember.jit(f, backend=backend)
    assert float(jf(np.float32(3.0))) == 6.0
    ember.effects_barrier()
    assert capsys.readouterr().out == "pos 3.0\n"
    assert float(jf(np.float32(-1.0))) == 1.0
    ember.effects_barrier()
    assert capsys.readouterr().out == "neg -1.0\n"
    assert float(f(np.float32(-2.0))) == 2.0  # eager
    ember.effects_barrier()
    assert capsys.readouterr().out == "neg -2.0\n"


@pytest.mark.parametrize("backend", BACKENDS)
def test_cond_without_outputs_runs_for_its_effect(backend, capsys):
    g = ember.jit(lambda p, x: lax.cond(p, lambda x: ember.debug.print("x={}", x),
                                        lambda x: None, x), backend=backend)
    assert g(True, np.float32(1.0)) is None and g(False, np.float32(2.0)) is None
    ember.effects_barrier()
    assert capsys.readouterr().out == "x=1.0\n"


def test_cond_in_scan_body_grad_and_vmap_match_jax(jax):
    def make(L, np_):
        def f(x):
            def body(c, xi):
                c = L.cond(xi > 0, lambda c: c * np_.sin(xi) + xi, lambda c: c - xi ** 2, c)
                return c, c * 2
            c, ys = L.scan(body, x[0], x)
            return c + ys.sum()
        return f

    f, jf = make(lax, jnp), make(jax.lax, jax.numpy)
    xs = np.array([[0.5, -0.3, 1.2, -0.7], [-0.5, 0.3, -1.2, 0.7]], np.float32)
    want = jax.jit(jax.vmap(jax.grad(jf)))(xs)
    np.testing.assert_allclose(ember.jit(ember.grad(f))(xs[0]), want[0], rtol=1e-5)
    np.testing.assert_allclose(ember.vmap(ember.grad(f))(xs), want, rtol=1e-5)


def test_disable_jit_runs_the_python_branch():
    seen = []

    def t(x):
        seen.append(type(x))
        return x + 1

    with ember.disable_jit():
        assert lax.cond(True, t, lambda x: x, np.float32(1.0)) == 2.0
        assert lax.switch(0, [t, lambda x: x], np.float32(1.0)) == 2.0
    assert seen == [np.float32, np.float32]  # called on the operand itself, not a tracer


# --------------------------------------------------------------------------- errors


def _raises(cls, match, fn, *args, **kwargs):
    with pytest.raises(cls, match=re.compile(match, re.DOTALL)):
        fn(*args, **kwargs)


def test_cond_errors():
    one = lambda x: x  # noqa: E731
    _raises(TypeError, "Pred must be a scalar, got .* of shape \\(2,\\)", lax.cond,
            np.ones(2) > 0, one, one, 1.0)
    _raises(TypeError, "Pred must be a scalar, got \\[True\\] of type", lax.cond, [True], one,
            one, 1.0)
    _raises(TypeError, "Pred type must be either boolean or number, got complex64", lax.cond,
            1j, one, one, 1.0)
    _raises(TypeError, "cond predicate is None", lax.cond, None, one, one, 1.0)
    _raises(TypeError, "true_fun and false_fun arguments should be callable", lax.cond, True,
            1, one, 1.0)
    _raises(TypeError, "if 'operand' keyword is passed", lax.cond, True, one, one, 1.0,
            operand=2.0)
    _raises(TypeError, "cond branch outputs must have the same pytree structure.*true_fun "
            "output is a <class 'tuple'> but false_fun output is a pytree leaf",
            lax.cond, True, lambda x: (x,), one, 1.0)
    _raises(TypeError, "metadata \\('a',\\) but false_fun output is a <class 'dict'> with "
            "pytree metadata \\('b',\\)", lax.cond, True, lambda x: {"a": x},
            lambda x: {"b": x}, 1.0)
    _raises(TypeError, "cond branches must have equal output types.*The output of true_fun "
            "has type float32\\[2\\] but the corresponding output of false_fun has type "
            "float32\\[3\\], so the shapes do not match", lax.cond, True,
            lambda x: jnp.ones(2), lambda x: jnp.ones(3), 1.0)
    _raises(TypeError, "output of true_fun at path \\[1\\] has type float32\\[\\] but .* "
            "int32\\[\\], so the dtypes do not match", lax.cond, True,
            lambda x: (x, x), lambda x: (x, jnp.int32(1)), 1.0)


def test_switch_errors():
    one = lambda x: x  # noqa: E731
    _raises(TypeError, "Index type must be an integer, got 1.0 as float32", lax.switch, 1.0,
            [one, one], 1.0)
    _raises(TypeError, "Branch index must be scalar", lax.switch, np.ones(2, np.int32),
            [one, one], 1.0)
    _raises(ValueError, "Empty branch sequence", lax.switch, 0, [], 1.0)
    _raises(TypeError, "branches argument should be a sequence of callables", lax.switch, 0,
            [one, 2], 1.0)
    _raises(TypeError, "switch branches must have equal output types.*output of branch 0 has "
            "type float32\\[\\] but the corresponding output of branch1 has type int32",
            lax.switch, 0, [lambda x: x, lambda x: jnp.int32(1)], 1.0)


def test_primitive_abstract_eval_checks():
    closed = ember.make_jaxpr(jnp.sin)(1.0)
    with pytest.raises(TypeError, match="index of type f32\\[\\] instead of int32"):
        ember.make_jaxpr(lambda x: lax.cond_p.bind(x, x, branches=(closed, closed)))(1.0)
    with pytest.raises(TypeError, match="called with operands of type i32\\[\\]"):
        ember.make_jaxpr(lambda i: lax.cond_p.bind(i, i, branches=(closed, closed)))(1)


def _branch_pairs(np_):
    """Pairs of branches whose outputs disagree, made with ``np_`` (ember's or JAX's numpy):
    the same code, so both libraries name the same source lines in their errors."""
    return [
        (lambda x: (x, np_.ones(2)), lambda x: (np_.int32(1), np_.ones(3))),
        (lambda x: {"a": x, "b": [x]}, lambda x: {"a": x, "b": (x,)}),
        (lambda x: [x, x], lambda x: [x]),
        (lambda x: x, lambda x: np_.ones((2, 2), np_.int32)),
    ]


def test_branch_output_errors_read_as_jax(jax):
    for (t, f), (jt, jf) in zip(_branch_pairs(jnp), _branch_pairs(jax.numpy)):
        with pytest.raises(TypeError) as got:
            lax.cond(True, t, f, 1.0)
        with pytest.raises(TypeError) as want:
            jax.lax.cond(True, jt, jf, 1.0)
        assert str(got.value) == str(want.value)
        with pytest.raises(TypeError) as got:
            lax.switch(0, [t, t, f], 1.0)
        with pytest.raises(TypeError) as want:
            jax.lax.switch(0, [jt, jt, jf], 1.0)
        assert str(got.value) == str(want.value)


def _more_branch_pairs(np_):
    return [
        (lambda x: {"a": x}, lambda x: {"a": x, "b": x}),
        (lambda x: (x, [x, x], {"k": x}), lambda x: (x, (x, x), {"k": [x]})),
        (lambda x: (x, None), lambda x: (x, x)),
    ]


def test_more_branch_output_errors_read_as_jax(jax):
    for (t, f), (jt, jf) in zip(_more_branch_pairs(jnp), _more_branch_pairs(jax.numpy)):
        with pytest.raises(TypeError) as got:
            lax.cond(True, t, f, 1.0)
        with pytest.raises(TypeError) as want:
            jax.lax.cond(True, jt, jf, 1.0)
        assert str(got.value) == str(want.value)
