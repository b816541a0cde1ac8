"""lax.while_loop: values (eager, jit on both backends) against Python loops, forward-mode
derivatives against finite differences and JAX, the reverse-mode error, vmap against a loop
of while_loops, JAX's error messages and jaxpr text."""

import re

import jax
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.test_util import check_grads

BACKENDS = ["cpu", "interpreter"]


def _run(f, mode, *args):
    if mode == "eager":
        return f(*args)
    return ember.jit(f, backend=mode)(*args)


MODES = ["eager", *BACKENDS]


def _collatz_steps(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def collatz(n):
    def body(c):
        n, k = c
        return jnp.where(n % 2 == 0, n // 2, 3 * n + 1), k + 1
    return lax.while_loop(lambda c: c[0] != 1, body, (n, 0))[1]


@pytest.mark.parametrize("mode", MODES)
def test_integer_carry_matches_python_loop(mode):
    for n in (1, 6, 27):
        out = _run(collatz, mode, np.int32(n))
        assert int(out) == _collatz_steps(n)
        assert out.dtype == np.int32


@pytest.mark.parametrize("mode", MODES)
def test_pytree_float_carry_and_closures(mode):
    scale = np.array([1.0, 2.0, 3.0], np.float32)  # a concrete array closed over

    def f(x, limit):  # ``limit`` (a jit argument) closed over by cond
        def body(c):
            return {"x": c["x"] * 1.5 + scale, "i": c["i"] + 1}
        return lax.while_loop(lambda c: jnp.sum(c["x"]) < limit, body, {"x": x, "i": 0})

    x = np.array([0.5, -1.0, 0.25], np.float32)
    out = _run(f, mode, x, np.float32(100.0))
    rx, ri = x.copy(), 0
    while rx.sum() < 100:
        rx, ri = rx * np.float32(1.5) + scale, ri + 1
    np.testing.assert_allclose(np.asarray(out["x"]), rx, rtol=1e-6)
    assert int(out["i"]) == ri and ri > 2


@pytest.mark.parametrize("mode", MODES)
def test_zero_iterations_returns_init(mode):
    f = lambda x: lax.while_loop(lambda c: c[0] > 100.0, lambda c: (c[0] * 2, c[1] - 1),  # noqa: E731
                                 (x, np.int32(7)))
    x, k = _run(f, mode, np.float32(3.0))
    assert float(x) == 3.0 and int(k) == 7


def test_weak_carry_promoted_as_jax():
    for cond, body, init in [(lambda c: c < 10, lambda c: c + 1.0, 0),
                             (lambda c: c < 10, lambda c: c + 1.5, 0),
                             (lambda c: c < 10, lambda c: c + 1, 0.0),
                             (lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 1.0), (0, 1))]:
        ours = ember.tree_util.tree_leaves(lax.while_loop(cond, body, init))
        theirs = jax.tree_util.tree_leaves(jax.lax.while_loop(cond, body, init))
        for a, b in zip(ours, theirs):
            assert (a.dtype, a.weak_type) == (b.dtype, b.weak_type)
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_disable_jit_runs_a_python_loop():
    seen = []

    def body(c):
        seen.append(float(c))  # concrete: only possible in a Python loop
        return c + 1.0

    with ember.disable_jit():
        out = lax.while_loop(lambda c: c < 3.0, body, 0.0)
    assert float(out) == 3.0 and seen == [0.0, 1.0, 2.0]


def test_debug_print_once_per_iteration_under_jit(capsys):
    def f(x):
        def body(c):
            ember.debug.print("it {}", c[1])
            return c[0] * 2, c[1] + 1
        return lax.while_loop(lambda c: c[0] < 20.0, body, (x, 0))[0]

    for backend in BACKENDS:
        assert float(ember.jit(f, backend=backend)(np.float32(3.0))) == 24.0
        assert capsys.readouterr().out.split("\n")[:-1] == ["it 0", "it 1", "it 2"]


@pytest.mark.parametrize("mode", MODES)
def test_nested_loops(mode):
    def f(n):
        def outer(c):
            i, total = c
            inner = lax.while_loop(lambda d: d[0] < i, lambda d: (d[0] + 1, d[1] + d[0]),
                                   (0, total))
            return i + 1, inner[1]
        return lax.while_loop(lambda c: c[0] < n, outer, (0, 0))[1]
    ref = sum(j for i in range(6) for j in range(i))
    assert int(_run(f, mode, np.int32(6))) == ref


# --------------------------------------------------------------------------- forward mode


def newton_sqrt(a, steps=6):
    def body(c):
        x, i = c
        return 0.5 * (x + a / x), i + 1
    return lax.while_loop(lambda c: c[1] < steps, body, (a, 0))[0]


def test_jvp_and_jacfwd_against_finite_differences_and_jax():
    a = np.float32(3.0)
    check_grads(newton_sqrt, (a,), order=2, modes=["fwd"], atol=2e-2, rtol=2e-2)
    _, t = ember.jvp(newton_sqrt, (a,), (np.float32(1.0),))
    np.testing.assert_allclose(float(t), 0.5 / np.sqrt(3.0), rtol=1e-5)

    def f(x):  # tangent of a carry flows from another carry only (fixpoint)
        return lax.while_loop(lambda c: c[2] < 4, lambda c: (c[0] * 1.1, c[1] * c[0], c[2] + 1),
                              (x[0], x[1], 0))[:2]
    x = np.array([1.3, 0.7], np.float32)
    ours = np.asarray(ember.jacfwd(f)(x))
    theirs = np.asarray(jax.jacfwd(lambda x: jax.lax.while_loop(
        lambda c: c[2] < 4, lambda c: (c[0] * 1.1, c[1] * c[0], c[2] + 1), (x[0], x[1], 0))[:2])(x))
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)


def test_jvp_under_jit_and_linearize():
    a = np.float32(2.0)
    for backend in BACKENDS:
        _, t = ember.jit(lambda a: ember.jvp(newton_sqrt, (a,), (np.float32(1.0),)),
                         backend=backend)(a)
        np.testing.assert_allclose(float(t), 0.5 / np.sqrt(2.0), rtol=1e-5)
    y, lin = ember.linearize(newton_sqrt, a)
    np.testing.assert_allclose(float(y), np.sqrt(2.0), rtol=1e-6)
    np.testing.assert_allclose(float(lin(np.float32(2.0))), 1 / np.sqrt(2.0), rtol=1e-5)


def test_linearize_computes_known_carries_in_a_known_loop():
    f = lambda x: lax.while_loop(lambda c: c[1] < 10, lambda c: (c[0] * 2, c[1] + 1), (x, 0))  # noqa: E731
    text = str(ember.make_jaxpr(lambda x: ember.linearize(f, x)[1](1.0))(1.0))
    assert text.count("while[") == 2  # the counter loop alone, then the whole loop (staged)
    _, lin = ember.linearize(f, np.float32(1.0))
    assert float(lin(np.float32(1.0))[0]) == 1024.0


def test_grad_raises_jax_error():
    f = lambda x: lax.while_loop(lambda c: c < 10.0, lambda c: c * 2, x)  # noqa: E731
    msg = "Reverse-mode differentiation does not work for lax.while_loop"
    with pytest.raises(ValueError, match=msg):
        ember.grad(f)(1.0)
    with pytest.raises(ValueError, match=msg):
        ember.jit(ember.grad(f))(1.0)


# --------------------------------------------------------------------------- vmap


def _loop_of(f, *xs):
    return np.stack([np.asarray(f(*row)) for row in zip(*xs)])


def test_vmap_batched_init_only():
    f = lambda x: lax.while_loop(lambda c: c[1] < 5, lambda c: (c[0] * 1.5 + 1, c[1] + 1),  # noqa: E731
                                 (x, 0))[0]
    x = np.array([0.0, 1.0, -2.0], np.float32)
    text = str(ember.make_jaxpr(ember.vmap(f))(x))
    assert "select_n" not in text  # the predicate is not batched
    np.testing.assert_allclose(np.asarray(ember.vmap(f)(x)), _loop_of(f, x), rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_vmap_batched_predicate_each_element_stops_on_its_own(mode):
    def f(x, limit):  # the batched closure makes the predicate batched
        return lax.while_loop(lambda c: c[0] < limit, lambda c: (c[0] * 2, c[1] + 1),
                              (x, np.int32(0)))
    x = np.array([1.0, 3.0, 50.0, 0.5], np.float32)
    lim = np.array([10.0, 100.0, 20.0, 1.0], np.float32)
    xs, ks = _run(ember.vmap(f), mode, x, lim)
    refs = [f(a, b) for a, b in zip(x, lim)]
    np.testing.assert_array_equal(np.asarray(xs), [float(r[0]) for r in refs])
    np.testing.assert_array_equal(np.asarray(ks), [int(r[1]) for r in refs])
    assert list(np.asarray(ks)) == [4, 6, 0, 1]


def test_vmap_of_jvp_and_jit_inside_vmap():
    a = np.array([2.0, 5.0, 9.0], np.float32)
    _, t = ember.vmap(lambda a: ember.jvp(newton_sqrt, (a,), (np.float32(1.0),)))(a)
    np.testing.assert_allclose(np.asarray(t), 0.5 / np.sqrt(a), rtol=1e-5)
    lim = np.array([3, 0, 7], np.int32)
    g = ember.jit(lambda n: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 2),
                                           (0, 1))[1])
    np.testing.assert_array_equal(np.asarray(ember.vmap(g)(lim)), 2 ** lim)


def test_vmap_nested_batched_predicates():
    def f(x, n):
        return lax.while_loop(lambda c: c[1] < n, lambda c: (c[0] + x, c[1] + 1), (0.0, 0))[0]
    x = np.array([1.0, 2.0], np.float32)
    n = np.array([0, 1, 3], np.int32)
    out = ember.vmap(ember.vmap(f, (None, 0)), (0, None))(x, n)
    np.testing.assert_array_equal(np.asarray(out), np.outer(x, n))


# --------------------------------------------------------------------------- errors, jaxprs


def _messages(f):
    out = []
    for mod in (ember, jax):
        with pytest.raises(TypeError) as e:
            f(mod)
        out.append(str(e.value))
    return out


@pytest.mark.parametrize("case", [
    lambda m: m.lax.while_loop(lambda c: m.numpy.array([True, False]), lambda c: c, 0),
    lambda m: m.lax.while_loop(lambda c: c, lambda c: c, 0),
    lambda m: m.lax.while_loop(lambda c: (c < 1, c < 2), lambda c: c, 0),
    lambda m: m.lax.while_loop(1, lambda c: c, 0),
    lambda m: m.lax.while_loop(lambda c: c < 10, lambda c: (c + 1).astype(np.int16),
                               np.int32(0)),
    lambda m: m.lax.while_loop(lambda c: c < 3, lambda c: m.numpy.zeros(3), m.numpy.zeros(2)),
    lambda m: m.lax.while_loop(lambda c: c[0] < 10, lambda c: [c[0] + 1, c[1]], (0, 1)),
    lambda m: m.lax.while_loop(lambda c: c < 10, lambda c: (c + 1, c), 0),
    lambda m: m.lax.while_loop(lambda c: c < 3, lambda c: m.numpy.zeros(3), 0),
    lambda m: m.lax.while_loop(lambda c: c["a"] < 3, lambda c: {"b": c["a"]}, {"a": 0}),
    lambda m: m.lax.while_loop(lambda c: c[0] < 3,
                               lambda c: (c[0], m.numpy.zeros(2, np.int32)), (0, 1.0)),
    lambda m: m.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0],), (0, 1.0)),
])
def test_errors_as_jax(case):
    ours, theirs = _messages(case)
    norm = lambda s: s.replace("ember.core", "jax._src.core")  # noqa: E731
    assert norm(ours) == theirs


def test_make_jaxpr_reads_like_jax():
    def f(m):
        return lambda x, y: m.lax.while_loop(lambda c: c[0] < y,
                                             lambda c: (c[0] * 2 + y, c[1] + 1), (x, 0))
    ours = str(ember.make_jaxpr(f(ember))(1.0, 2.0))
    theirs = str(jax.make_jaxpr(f(jax))(1.0, 2.0))
    assert re.sub(r"\s+", " ", ours) == re.sub(r"\s+", " ", theirs)


def test_forwarded_carries_become_body_consts_as_jax():
    def f(m):
        return lambda x, y: m.lax.while_loop(
            lambda c: c[0] < 3, lambda c: (c[0] + c[1], c[1], c[2] * 2), (x, y, 1.0))
    ours = str(ember.make_jaxpr(f(ember))(1.0, 2.0))
    theirs = str(jax.make_jaxpr(f(jax))(1.0, 2.0))
    assert "body_nconsts=1" in ours
    assert re.sub(r"\s+", " ", ours) == re.sub(r"\s+", " ", theirs)
    out = f(ember)(np.float32(0.5), np.float32(2.0))
    assert [float(v) for v in out] == [4.5, 2.0, 4.0]


def test_unused_loop_with_side_effect_is_kept(capsys):
    def f(x):
        def body(c):
            ember.debug.print("tick {}", c)
            return c + 1
        lax.while_loop(lambda c: c < 2, body, 0)
        return x * 2
    for mode in MODES:
        assert float(_run(f, mode, np.float32(1.0))) == 2.0
        assert capsys.readouterr().out == "tick 0\ntick 1\n"


def test_disable_jit_falls_back_to_the_primitive_under_vmap():
    f = lambda x, lim: lax.while_loop(lambda c: c < lim, lambda c: c * 1.5, x)  # noqa: E731
    with ember.disable_jit():
        out = ember.vmap(f)(np.array([1.0, 2.0], np.float32), np.array([3.0, 10.0], np.float32))
    np.testing.assert_allclose(np.asarray(out), [3.375, 10.125])


def test_jvp_jaxpr_reads_like_jax():
    def f(m):
        loop = lambda x: m.lax.while_loop(lambda c: c < 10.0, lambda c: c * 2, x)  # noqa: E731
        return lambda x: m.jvp(loop, (x,), (1.0,))
    ours = str(ember.make_jaxpr(f(ember))(1.0))
    theirs = str(jax.make_jaxpr(f(jax))(1.0))
    assert re.sub(r"\s+", " ", ours) == re.sub(r"\s+", " ", theirs)
