"""Eager loops that compile themselves (``ember.lax.control_flow.eager_loops``): the compiled
runs give the op-by-op results, a run that goes over budget finishes op by op and the next
run is compiled (never a switch midway), and the switches that keep loops op by op
(disable_jit, debug_nans, host callbacks) hold."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.lax.control_flow import eager_loops


@pytest.fixture
def loops(monkeypatch):
    """A clean table of loops; ``budget(s)`` sets the op-by-op budget."""
    eager_loops.clear()

    class Control:
        @staticmethod
        def budget(seconds):
            monkeypatch.setattr(eager_loops, "COMPILE_AFTER_S", seconds)

        @staticmethod
        def compiled():
            return len(eager_loops._compiled)

    yield Control
    eager_loops.clear()


def _np_fori(n, x):
    for _ in range(n):
        x = np.tanh(x) * np.float32(0.9) + np.float32(0.1)
    return x


def _fori(n, x):
    return lax.fori_loop(0, n, lambda i, v: jnp.tanh(v) * 0.9 + 0.1, x)


def test_over_budget_loop_is_compiled_and_reused(loops):
    x = np.linspace(-2, 2, 16, dtype=np.float32)
    loops.budget(1e9)
    eager = np.asarray(_fori(50, x))
    assert loops.compiled() == 0
    np.testing.assert_allclose(eager, _np_fori(50, x), rtol=2e-6, atol=2e-6)
    loops.budget(0.0)  # the time spent so far is over budget: this run compiles first
    first = _fori(50, x)
    assert loops.compiled() == 1
    again = _fori(50, x)  # (a new trace of the same loop: the same executable)
    assert loops.compiled() == 1
    for out in (first, again):
        assert out.dtype == jnp.float32 and out.shape == (16,)
        np.testing.assert_allclose(np.asarray(out), eager, rtol=2e-6, atol=2e-6)


def test_while_over_budget_finishes_op_by_op_then_runs_compiled(loops):
    def run():
        def body(c):
            i, s, v = c
            return i + 1, s + jnp.sum(v) * i, v * 1.01
        return lax.while_loop(lambda c: c[0] < 40, body,
                              (0, jnp.float32(0.0), jnp.arange(4, dtype=jnp.float32)))
    loops.budget(1e-9)  # (over budget during the first run: it still finishes op by op)
    want = [np.asarray(v) for v in run()]
    assert loops.compiled() == 0
    got = run()
    assert loops.compiled() == 1
    assert int(got[0]) == 40 == int(want[0])
    np.testing.assert_allclose(np.asarray(got[1]), want[1], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got[2]), want[2], rtol=1e-6)
    # the reference: a Python loop
    s, v = 0.0, np.arange(4, dtype=np.float64)
    for i in range(40):
        s, v = s + v.sum() * i, v * 1.01
    np.testing.assert_allclose(np.asarray(got[1]), s, rtol=1e-5)
    # a compiled run has jit's bits
    jitted = ember.jit(run)()
    for a, b in zip(got, jitted):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_over_budget_runs_compiled_next_time(loops, reverse):
    xs = np.random.default_rng(0).standard_normal((30, 3)).astype(np.float32)

    def step(c, x):
        c = c * 0.5 + jnp.sin(x)
        return c, c * 2.0

    def run():
        return lax.scan(step, jnp.zeros(3, jnp.float32), xs, reverse=reverse)
    loops.budget(1e-9)
    want_c, want_ys = (np.asarray(v) for v in run())
    assert loops.compiled() == 0
    got_c, got_ys = run()
    assert loops.compiled() == 1
    np.testing.assert_allclose(np.asarray(got_c), want_c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got_ys), want_ys, rtol=1e-5, atol=1e-6)
    c, ys = np.zeros(3, np.float32), np.empty_like(xs)
    for i in (range(29, -1, -1) if reverse else range(30)):
        c = c * np.float32(0.5) + np.sin(xs[i])
        ys[i] = c * 2
    np.testing.assert_allclose(want_ys, ys, rtol=1e-5, atol=1e-6)


def test_loop_with_host_callback_stays_op_by_op(loops):
    # (a callback's function is no param the fingerprint can vouch for: never compiled, and
    # never run twice)
    seen = []

    def step(c, x):
        ember.debug.callback(lambda v: seen.append(float(v)), x)
        return c + x, c

    xs = jnp.arange(6, dtype=jnp.float32)
    loops.budget(0.0)
    for _ in range(2):
        seen.clear()
        c, ys = lax.scan(step, jnp.float32(0.0), xs)
        ember.effects_barrier()
        assert seen == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        assert float(c) == 15.0
        np.testing.assert_array_equal(np.asarray(ys), [0, 0, 1, 3, 6, 10])
    assert loops.compiled() == 0


def test_weak_typed_carry_stays_weak(loops):
    loops.budget(0.0)
    out = lax.fori_loop(0, 5, lambda i, v: v * 2.0, 1.0)
    assert loops.compiled() == 1
    assert float(out) == 32.0
    assert out.dtype == jnp.float32 and out.weak_type


def test_disable_jit_and_debug_nans_stay_op_by_op(loops):
    loops.budget(0.0)
    x = np.ones(4, np.float32)
    with ember.disable_jit():
        np.testing.assert_allclose(np.asarray(_fori(3, x)), _np_fori(3, x), rtol=1e-6)
    assert loops.compiled() == 0
    with ember.debug_nans(True):
        with pytest.raises(FloatingPointError, match="log"):
            lax.fori_loop(0, 3, lambda i, v: jnp.log(v - 2.0), x)
    assert loops.compiled() == 0


def test_clear_caches_forgets_compiled_loops(loops):
    loops.budget(0.0)
    _fori(3, np.ones(2, np.float32))
    assert loops.compiled() == 1
    ember.clear_caches()
    assert loops.compiled() == 0


def test_composite_special_functions_tier_like_loops(loops):
    # igamma's body (series and continued-fraction while loops) runs op by op until the
    # calls of one signature spend the budget, then as one compiled program with jit's bits.
    from ember.scipy import special
    rng = np.random.default_rng(3)
    a = rng.uniform(0.5, 10, (8, 5)).astype(np.float32)
    x = rng.uniform(0, 12, (8, 5)).astype(np.float32)
    a[0, :3], x[0, :3] = [1.0, 2.0, np.nan], [0.0, np.inf, 1.0]
    want = np.vectorize(_regularized_lower_gamma)(a.astype(np.float64), x.astype(np.float64))
    loops.budget(1e9)
    op_by_op = np.asarray(special.gammainc(a, x))
    assert loops.compiled() == 0
    loops.budget(0.0)  # (spent: the next call of this signature compiles)
    compiled = np.asarray(special.gammainc(a, x))
    assert loops.compiled() == 1
    special.gammainc(a, x)
    special.gammaincc(a, x)  # (another primitive: its own entry)
    assert loops.compiled() == 2
    jitted = np.asarray(ember.jit(special.gammainc)(a, x))
    np.testing.assert_array_equal(compiled.view(np.uint32), jitted.view(np.uint32))
    for got in (op_by_op, compiled):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
    loops.budget(1e9)
    special.gammainc(a[:4], x[:4])  # (another shape: op by op until it spends its budget)
    assert loops.compiled() == 2


def _regularized_lower_gamma(a: float, x: float) -> float:
    """P(a, x) by its series (a slow reference; NaN for NaN arguments)."""
    import math
    if math.isnan(a) or math.isnan(x):
        return math.nan
    if x == 0:
        return 0.0
    if math.isinf(x):
        return 1.0
    if x > a + 30:
        return 1.0
    term = total = 1.0 / a
    k = a
    while abs(term) > 1e-17 * abs(total):
        k += 1
        term *= x / k
        total += term
    return total * math.exp(-x + a * math.log(x) - math.lgamma(a))
