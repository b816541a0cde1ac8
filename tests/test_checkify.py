"""ember.experimental.checkify against JAX's: the same program written once for both
frameworks, its error message and outputs compared (eager and under jit), plus the API's
error paths."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.experimental import checkify


def _programs(jx, np_, lax, C):
    """name -> (function, arguments, enabled errors), written against either framework."""
    f32 = lambda v: np_.array(v, np_.float32)  # noqa: E731
    i32 = lambda v: np_.array(v, np_.int32)  # noqa: E731

    def user(x):
        C.check(x > 0, "x must be positive: {x} {}", x, x=x * 2)
        return x

    def first(x):
        y = np_.log(x)
        C.check(x > 0, "checked first")
        return y / 0.0

    def cond_f(x):
        return lax.cond(x > 0, lambda x: np_.log(x - 2.0), lambda x: np_.sin(x) / 0.0, x)

    def switch_f(i, x):
        return lax.switch(i, [np_.log, lambda x: x / 0.0,
                              lambda x: (C.check(x > 5, "branch {}", x), x)[1]], x)

    def while_f(x):
        def cond_fun(v):
            C.check(v[0] < 5, "cond check {}", v[0])
            return v[0] < 10

        def body(v):
            C.check(v[1] > 0, "body check {}", v[1])
            return v[0] + 1, v[1] - 1.0
        return lax.while_loop(cond_fun, body, (x, f32(3.0)))

    def scan_f(xs):
        def body(c, x):
            C.check(x < 3, "x too big {}", x)
            return c + np_.log(x - 1.0), c
        return lax.scan(body, f32(0.0), xs)

    def fori_f(x):
        return lax.fori_loop(0, 4, lambda i, c: c + np_.arange(3.0)[i], x)

    def fori_check(x):
        def body(i, c):
            C.check(c < 3, "c={c} i={i}", c=c, i=i)
            return c + 1
        return lax.fori_loop(0, 5, body, x)

    def grad_f(x):
        def g(x):
            C.check(x < 1, "grad check {}", x)
            return np_.sin(x) * x
        return jx.grad(g)(x)

    @jx.custom_jvp
    def cjvp(x):
        C.check(x > 0, "custom_jvp check {}", x)
        return np_.log(x)
    cjvp.defjvp(lambda p, t: (cjvp(p[0]), t[0] * 3.0))

    @jx.custom_vjp
    def cvjp(x):
        C.check(x > 0, "custom_vjp check {}", x)
        return np_.sqrt(x)
    cvjp.defvjp(lambda x: (cvjp(x), x), lambda r, g: (g * 10.0,))

    floor_div = lambda x, y: x // y  # noqa: E731
    true_div = lambda x, y: x / y  # noqa: E731
    return {
        "nan_sin": (np_.sin, (f32(np.inf),), C.float_checks),
        "nan_log": (np_.log, (f32(-1.0),), C.all_checks),
        "nan_off": (np_.log, (f32(-1.0),), C.user_checks),
        "div_int": (floor_div, (i32(3), i32(0)), C.all_checks),
        "div_float": (true_div, (f32(3.0), f32(0.0)), C.div_checks),
        "nan_div": (true_div, (f32(0.0), f32(0.0)), C.nan_checks),
        "nan_rem": (lambda x, y: x % y, (f32(3.0), f32(0.0)), C.all_checks),
        "oob_dynamic_index": (lambda x, i: x[i], (np_.arange(3.0), i32(5)), C.index_checks),
        "oob_negative": (lambda x, i: x[i], (np_.arange(3.0), i32(-5)), C.index_checks),
        "oob_gather": (lambda x, i: x[:, i], (np_.ones((2, 3)), np_.array([0, 1, 4])),
                       C.all_checks),
        "oob_scatter": (lambda x, i: x.at[i].add(1.0), (np_.arange(3.0), np_.array([1, 9])),
                        C.all_checks),
        "oob_dynamic_slice": (lambda x, i: lax.dynamic_slice(x, (i,), (2,)),
                              (np_.arange(3.0), i32(2)), C.all_checks),
        "oob_dynamic_update": (lambda x, i: lax.dynamic_update_slice(x, np_.ones(2), (i,)),
                               (np_.arange(3.0), i32(-1)), C.all_checks),
        "user": (user, (f32(-1.0),), C.user_checks),
        "user_ok": (user, (f32(1.0),), C.user_checks),
        "user_disabled": (user, (f32(-1.0),), C.nan_checks),
        "first_error_wins": (first, (f32(-1.0),), C.all_checks),
        "cond_true": (cond_f, (f32(1.0),), C.all_checks),
        "cond_false": (cond_f, (f32(-1.0),), C.all_checks),
        "switch0": (switch_f, (i32(0), f32(-1.0)), C.all_checks),
        "switch1": (switch_f, (i32(1), f32(-1.0)), C.all_checks),
        "switch2": (switch_f, (i32(2), f32(-1.0)), C.all_checks),
        "while_cond_check": (while_f, (i32(0),), C.user_checks),
        "while_initial_cond": (while_f, (i32(6),), C.user_checks),
        "scan": (scan_f, (np_.array([2.0, 0.5, 4.0]),), C.all_checks),
        "fori_oob": (fori_f, (f32(0.0),), C.all_checks),
        "fori_check": (fori_check, (i32(0),), C.user_checks),
        "nested_jit": (jx.jit(lambda x: jx.jit(first)(x) + 1.0), (f32(-4.0),), C.all_checks),
        "vmap_user": (jx.vmap(user), (np_.array([1.0, -2.0, -3.0]),), C.all_checks),
        "vmap_nan": (jx.vmap(np_.log), (np_.array([1.0, -2.0, -3.0]),), C.all_checks),
        "grad": (grad_f, (f32(2.0),), C.all_checks),
        "grad_ok": (grad_f, (f32(0.5),), C.all_checks),
        "custom_jvp": (cjvp, (f32(-1.0),), C.all_checks),
        "grad_custom_jvp": (jx.grad(cjvp), (f32(-1.0),), C.user_checks),
        "custom_vjp": (cvjp, (f32(-4.0),), C.user_checks),
        "grad_custom_vjp": (jx.grad(cvjp), (f32(4.0),), C.user_checks),
        "checkpoint": (jx.checkpoint(user), (f32(-4.0),), C.user_checks),
    }


_NAMES = list(_programs(ember, jnp, ember.lax, checkify))


@pytest.fixture(scope="module")
def jax_programs():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_platforms", "cpu")
    from jax.experimental import checkify as jc
    return jax, _programs(jax, jax.numpy, jax.lax, jc), jc


@pytest.mark.parametrize("name", _NAMES)
def test_matches_jax(name, jax_programs):
    jax, jprogs, jc = jax_programs
    jf, jargs, jerrors = jprogs[name]
    jerr, jout = jc.checkify(jf, errors=jerrors)(*jargs)
    f, args, errors = _programs(ember, jnp, ember.lax, checkify)[name]
    checked = checkify.checkify(f, errors=errors)
    for run in (checked, ember.jit(checked)):
        err, out = run(*args)
        assert err.get() == jerr.get()
        got, want = ember.tree_util.tree_leaves(out), jax.tree.leaves(jout)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


def _user(x):
    checkify.check(x > 0, "bad {}", x)
    return jnp.log(x)


def test_vmap_of_checkify_reports_each_element(jax_programs):
    jax, _, jc = jax_programs

    def juser(x):
        jc.check(x > 0, "bad {}", x)
        return jax.numpy.log(x)
    xs = np.array([[1.0, -2.0], [-3.0, 4.0]], np.float32)
    want = jax.vmap(jax.vmap(jc.checkify(juser)))(xs)[0].get()
    err, _ = ember.vmap(ember.vmap(checkify.checkify(_user)))(xs)
    assert err.get() == want
    assert want.startswith("at mapped index 0, 1: bad -2.0")
    # Thrown, a batched error reports one element: the last failing one, as JAX.
    err, _ = ember.vmap(checkify.checkify(_user))(jnp.array([1.0, -2.0, -3.0, 4.0]))
    with pytest.raises(checkify.JaxRuntimeError, match=r"^bad -3.0 \(`check` failed\)$"):
        err.throw()
    ok, _ = ember.vmap(checkify.checkify(_user))(jnp.array([1.0, 2.0]))
    assert ok.get() is None and ok.get_exception() is None


def test_checkify_of_jit_and_jit_of_checkify():
    want = "bad -2.0 (`check` failed)"
    assert checkify.checkify(ember.jit(_user))(jnp.float32(-2.0))[0].get() == want
    err, out = ember.jit(checkify.checkify(_user))(jnp.float32(-2.0))
    assert err.get() == want and np.isnan(np.asarray(out))
    assert ember.jit(checkify.checkify(_user))(jnp.float32(2.0))[0].get() is None


def test_check_outside_checkify():
    with pytest.raises(checkify.JaxRuntimeError, match=r"^eager -1.0 \(`check` failed\)$"):
        checkify.check(jnp.float32(-1.0) > 0, "eager {}", jnp.float32(-1.0))
    checkify.check(jnp.float32(1.0) > 0, "fine")  # passes: nothing raised
    with pytest.raises(checkify.JaxRuntimeError,
                       match=r"^v=-1.50 w=Array\(-1.5, dtype=float32\) \(`check` failed\)$"):
        checkify.check(jnp.float32(-1.5) > 0, "v={:.2f} w={w!r}", jnp.float32(-1.5),
                       w=jnp.float32(-1.5))
    # The class is both JAX's checkify error (a ValueError) and ember's runtime error.
    assert issubclass(checkify.JaxRuntimeError, ValueError)
    assert issubclass(checkify.JaxRuntimeError, ember.errors.JaxRuntimeError)
    with pytest.raises(checkify.JaxRuntimeError, match="bad -3.0"):  # last failing element
        ember.vmap(_user)(jnp.array([1.0, -2.0, -3.0]))
    with pytest.raises(checkify.JaxRuntimeError, match="bad -2.0"):
        ember.grad(_user)(jnp.float32(-2.0))
    with pytest.raises(ValueError, match="Cannot abstractly evaluate a checkify.check which "
                                         "was not functionalized"):
        ember.jit(_user)(jnp.float32(1.0))


def test_debug_check():
    def f(x):
        checkify.debug_check(x > 0, "dbg {}", x)
        return x * 2
    assert float(ember.jit(f)(jnp.float32(-1.0))) == -2.0  # dropped outside checkify
    assert float(f(jnp.float32(-1.0))) == -2.0
    assert checkify.checkify(f)(jnp.float32(-1.0))[0].get() == "dbg -1.0 (`check` failed)"


def test_error_methods_and_check_error():
    err, _ = checkify.checkify(_user)(jnp.float32(-2.0))
    assert str(err) == "Error(bad -2.0 (`check` failed))"
    assert isinstance(err.get_exception(), checkify.FailedCheckError)
    with pytest.raises(checkify.JaxRuntimeError, match="bad -2.0"):
        err.throw()
    with pytest.raises(checkify.JaxRuntimeError, match="bad -2.0"):
        checkify.check_error(err)
    ok, _ = checkify.checkify(_user)(jnp.float32(2.0))
    ok.throw()
    checkify.check_error(ok)

    def inner(x):  # an error value turned back into a check, then checkified again
        e, out = ember.jit(checkify.checkify(_user))(x)
        checkify.check_error(e)
        return out
    assert checkify.checkify(inner)(jnp.float32(-5.0))[0].get() == "bad -5.0 (`check` failed)"
    with pytest.raises(TypeError, match="check_error takes an Error as argument"):
        checkify.check_error(3)


def test_bad_arguments():
    with pytest.raises(TypeError, match="check takes a scalar pred as argument"):
        checkify.checkify(lambda x: checkify.check(x > 0, "v"))(jnp.ones(3))
    with pytest.raises(TypeError, match="debug_check takes a scalar pred"):
        checkify.debug_check(jnp.ones(2) > 0, "v")
    with pytest.raises(TypeError, match="Formatting arguments to checkify.check need to be "
                                        "PyTrees of arrays, but got 1.0"):
        checkify.check(True, "v {}", 1.0)
    with pytest.raises(TypeError, match="checkify: expected a callable"):
        checkify.checkify(3)


def test_error_sets():
    C = checkify
    assert C.all_checks == {C.FailedCheckError, C.NaNError, C.OOBError,
                            C.DivisionByZeroError}
    assert C.automatic_checks == C.all_checks - C.user_checks
    assert C.float_checks == C.nan_checks | C.div_checks
    assert C.automatic_checks - C.float_checks == C.index_checks


def test_staged_check_and_gradients():
    text = str(ember.make_jaxpr(_user)(jnp.float32(1.0)))
    assert "check[debug=False]" in text and "err_tree" not in text
    # A checkified function differentiates as the original; a custom_vjp keeps its rule.
    g = ember.grad(lambda x: checkify.checkify(_user)(x)[1])(jnp.float32(2.0))
    assert float(g) == pytest.approx(0.5)
    # (a function closing over a differentiated value)
    g = ember.grad(lambda y: checkify.checkify(lambda x: jnp.log(x * y))(jnp.float32(2.0))[1])
    assert float(g(jnp.float32(3.0))) == pytest.approx(1 / 3)

    @ember.custom_vjp
    def f(x):
        return jnp.sin(x)
    f.defvjp(lambda x: (f(x), x), lambda r, g: (g * 10.0,))
    g = ember.grad(lambda x: checkify.checkify(f, errors=checkify.all_checks)(x)[1])(1.0)
    assert float(g) == pytest.approx(10.0)


def test_static_out_of_bounds_int_index_is_checked():
    # As in JAX, an out-of-bounds Python int index is read by a dynamic_slice (clamped), not
    # folded into a static slice, so index_checks sees it and reports the index as written
    # (negative ones wrapped once).
    x = jnp.ones((3, 2))
    msg = "out-of-bounds indexing for array of shape (3, 2): index {} is out of bounds " \
          "for axis 0 with size 3."
    for f, i in [(lambda x: x[5], 5), (lambda x: x.at[5].get(), 5), (lambda x: x[-5], -2)]:
        err, out = checkify.checkify(f, errors=checkify.index_checks)(x)
        assert err.get().strip() == msg.format(i)
        np.testing.assert_array_equal(out, np.ones(2))  # the clamped row
    err, _ = checkify.checkify(lambda x: ember.lax.dynamic_slice(x, (7, 0), (1, 2)),
                               errors=checkify.index_checks)(x)
    assert "index 7 is out of bounds" in err.get()
    # In-bounds ints, and mode="clip", stay static slices and report nothing.
    for f in (lambda x: x[2], lambda x: x[-3], lambda x: x.at[5].get(mode="clip")):
        assert checkify.checkify(f, errors=checkify.index_checks)(x)[0].get() is None
    # The values are unchanged: reads clamp into bounds.
    m = jnp.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(m[5], [4.0, 5.0])
    np.testing.assert_array_equal(m[-7], [0.0, 1.0])
    np.testing.assert_array_equal(ember.jit(lambda m: m[1:, 7])(m), [3.0, 5.0])
