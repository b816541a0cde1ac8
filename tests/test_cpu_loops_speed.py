"""Compiled loops on the CPU backend: where a while's state lives, results written in place,
scan rows stored from the carry's buffer, and loops of big kernels run whole in native code
on the parallel runtime (``program._loop_state``, ``_write_results_in_place``,
``_update_views``, ``executable._native_loop``). Every program is checked against the
interpreter backend bit for bit (and a few against JAX)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends import cpu as cpu_backend
from ember.backends.cpu import parallel_runtime
from ember.backends.cpu.executable import CopyPlan, KernelPlan, WhilePlan, nested_steps
from ember.backends.cpu.program import INVARIANT_ALIAS_MIN_BYTES
from ember.compiler.parser import parse_module
from ember.compiler.pipeline import optimize
from tests.backends.test_cpu_control_flow import run_both as run_text_on_both

RNG = np.random.default_rng(0)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def run_both(fn, *args, runs: int = 3):
    """Compiles ``fn`` for the CPU backend and checks its outputs (each of ``runs`` runs:
    the first on quick code) against the interpreter's, bit for bit; returns the CPU
    executable."""
    text = ember.jit(fn).lower(*args).as_text()
    return run_text_on_both(text, [np.asarray(a) for a in args], runs)


def loops_of(exe):
    return [s for s in nested_steps(exe.program.steps) if type(s) is WhilePlan]


def scan_carry(xs, reverse=False):
    return lax.scan(lambda c, x: (c * 0.99 + x, c), jnp.zeros(xs.shape[1:], xs.dtype), xs,
                    reverse=reverse)


# ------------------------------------------------------------------ scans


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_carry_and_stacked_rows(reverse):
    xs = f32(300, 64)
    exe = run_both(lambda xs: scan_carry(xs, reverse), xs)
    (loop,) = loops_of(exe)
    assert loop.loop is not None
    # The carry is computed in place and the rows stored from its buffer: the body copies
    # nothing but the counter.
    copies = [s for s in loop.body if type(s) is CopyPlan]
    assert all(c.dst.dims == () for c in copies)


def test_scan_matches_jax(jax):
    xs = f32(200, 32)
    got = ember.jit(scan_carry)(xs)
    want = jax.jit(lambda xs: jax.lax.scan(lambda c, x: (c * 0.99 + x, c),
                                           jax.numpy.zeros(32, xs.dtype), xs))(xs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


def test_scan_two_carries_two_outputs_and_a_pytree_of_xs():
    def fn(xs, ys):
        def step(c, x):
            a, b = c
            u, v = x
            return (a * 0.9 + u, b + a * v), (a - u, b * 0.5)
        return lax.scan(step, (jnp.zeros(48, jnp.float32), jnp.ones(48, jnp.float32)),
                        (xs, ys))
    run_both(fn, f32(100, 48), f32(100, 48))


def test_scan_stacking_a_reshaped_carry_and_the_xs_rows():
    # ys rows that are a reshape of the carry, and ys that are the xs rows themselves.
    def fn(xs):
        def step(c, x):
            c = c * 0.5 + x.reshape(4, 4)
            return c, (c.reshape(16), x, c.T)
        return lax.scan(step, jnp.ones((4, 4), jnp.float32), xs)
    run_both(fn, f32(20, 16))


def test_scan_of_transposed_and_special_values():
    xs = f32(32, 8).T.copy()  # (8, 32)
    xs[1, 3], xs[2, 5], xs[4, 0] = np.nan, np.inf, -np.inf
    run_both(lambda xs: scan_carry(xs.T), xs)


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (1, 1), (1, 7)])
def test_scan_of_empty_and_size_one(shape):
    run_both(scan_carry, f32(*shape))


def test_scan_float64(x64):
    xs = RNG.standard_normal((50, 16))
    exe = run_both(scan_carry, xs)
    assert exe.program.output_shapes[0][1] == np.float64


# ------------------------------------------------------------------ loop state


@pytest.mark.parametrize("n", [64, 20_000])
def test_invariant_state_elements_stay_in_their_buffers(n):
    # x (a parameter) and y (a temporary) pass through unchanged: y is neither copied in
    # nor out (y2 is y), nor is x when it is big (a small x is copied, to aligned memory).
    def fn(x):
        y = x * 2.0
        c, _, y2 = lax.fori_loop(0, 7, lambda i, s: (s[0] * 0.5 + s[1] - s[2], s[1], s[2]),
                                 (x, x, y))
        return c, y2, y
    exe = run_both(fn, f32(n))
    (loop,) = loops_of(exe)
    before = exe.program.steps[:exe.program.steps.index(loop)]
    # (x goes into the carry as its initial value: one copy)
    copies = sum(type(s) is CopyPlan and s.src.kind == "param" for s in before)
    assert copies == (1 if n * 4 >= INVARIANT_ALIAS_MIN_BYTES else 2)
    after = exe.program.steps[exe.program.steps.index(loop) + 1:]
    assert not [s for s in after if type(s) is CopyPlan]


def test_results_used_twice_and_swapped_state():
    def fn(a, b):
        def body(i, s):
            x, y, z = s
            return z, x + y, x  # a rotation: every element reads another's old value
        out = lax.fori_loop(0, 5, body, (a, b, a * 3.0))
        return out, out[0] + out[2]
    run_both(fn, f32(16), f32(16))


def test_carry_read_after_its_update_is_not_written_in_place():
    # The new carry's kernel comes before a kernel reading the old carry, and a reversed
    # carry reads other elements than it writes.
    def fn(x):
        def body(i, s):
            c, d = s
            c1 = c + 1.0
            return c1, d * 0.5 + c[::-1] + c1
        return lax.fori_loop(0, 6, body, (x, x))
    run_both(fn, f32(33))


@pytest.mark.parametrize("case", ["escape_count", "reads_before_write", "swap"])
def test_multi_output_body_kernels_write_their_carries_in_place(case):
    # One kernel computes two carries. A carry computed from its own old value is written
    # over it (its element is read before it is written, and the other carry's formula
    # uses the value read); one computed only from the other carry is not: the other
    # output still reads the old element after it would be written.
    def body(i, s):
        a, b, x = s  # (x passes through; the swap's two outputs read it, so fuse)
        if case == "escape_count":  # (Mandelbrot's z = z * z + c, n += |z| < 2)
            z = a * a + x
            return z, b + (jnp.abs(z) < 2.0).astype(b.dtype), x
        if case == "reads_before_write":
            return b * 2.0, a + b, x
        return b + x, a - x, x

    exe = run_both(lambda a, b, x: lax.fori_loop(0, 9, body, (a, b, x * 0.3)),
                   f32(7, 33), f32(7, 33), f32(7, 33))
    (loop,) = loops_of(exe)
    assert sum(type(s) is KernelPlan for s in loop.body) == 2  # (the counter's, and one)
    copies = [s for s in loop.body if type(s) is CopyPlan]
    assert len(copies) == {"escape_count": 0, "reads_before_write": 1, "swap": 2}[case]


def test_initial_value_read_elsewhere_keeps_its_copy():
    def fn(x):
        z = jnp.zeros((8, 16), jnp.float32) + x[0]
        out = lax.fori_loop(0, 4, lambda i, c: c * 2.0 + x, z)
        return out, z
    run_both(fn, f32(8, 16))


@pytest.mark.parametrize("returned", [False, True])
def test_constant_initial_values_are_computed_into_the_state(returned):
    # One iota starts two state elements (computed again into each); returned, it is
    # kept as well.
    def fn(x):
        r = jnp.arange(4096, dtype=jnp.float32)
        a, b = lax.fori_loop(0, 3, lambda i, s: (s[0] * 0.5 + x, s[1] - s[0]), (r, r))
        return (a, b, r) if returned else (a, b)
    exe = run_both(fn, f32(4096))
    (loop,) = loops_of(exe)
    before = exe.program.steps[:exe.program.steps.index(loop)]
    assert not any(type(s) is CopyPlan and s.src.kind != "param" and s.dst.dims == (4096,)
                   for s in before)


def test_constant_initial_value_also_an_invariant_element():
    # The iota starts a changing element and is itself an invariant one: its first
    # computation must stay (the loop reads it).
    def fn(x):
        r = jnp.arange(300, dtype=jnp.float32) * 0.5
        a, b = lax.fori_loop(0, 4, lambda i, s: (s[0], s[1] * 0.5 + s[0] + x), (r, r))
        return b
    run_both(fn, f32(300))


def test_loop_with_a_library_step_runs_from_python():
    # A sort has no kernel: the loop runs its steps from Python, with the state in the
    # parameter and result buffers and a scan row stored from the carry.
    def fn(xs):
        def step(c, x):
            c = jnp.sort(c * 0.5 + x)
            return c, c
        return lax.scan(step, xs[0], xs)
    exe = run_both(fn, f32(12, 10))
    assert any(loop.loop is None for loop in loops_of(exe))


def test_nested_loops_and_case():
    def fn(x):
        def inner(j, c):
            return lax.cond(j % 2 == 0, lambda c: c * 0.5, lambda c: c + 1.0, c)
        return lax.fori_loop(0, 3, lambda i, c: lax.fori_loop(0, 4, inner, c) - x, x)
    run_both(fn, f32(40))


# ------------------------------------------------------------------ big loops, threaded


def _runtime_ready():
    return parallel_runtime.get() is not None


def test_big_while_runs_natively_on_the_runtime():
    x = np.abs(f32(100_000)) + 1.0
    fn = lambda x: lax.while_loop(  # noqa: E731
        lambda c: c[1] < 20, lambda c: ((c[0] + x / c[0]) * 0.5, c[1] + 1), (x, 0))[0]
    ready = _runtime_ready()
    exe = run_both(fn, x)
    (loop,) = loops_of(exe)
    assert loop.loop is not None and loop.work >= 1 << 16
    if ready:
        (_, (_, _, native)) = [s for s in exe._steps if type(s) is tuple
                               and type(s[0]) is WhilePlan][0]
        assert native is not None and native[1]  # (threaded)
    np.testing.assert_allclose(exe.execute([x])[0], np.sqrt(x), rtol=1e-6)


def test_big_loop_without_the_runtime_loops_in_python(monkeypatch):
    # Until the parallel runtime is there, a loop of big kernels runs from Python (on the
    # Python thread pool), with the same bits.
    monkeypatch.setattr(parallel_runtime, "ready", lambda: None)
    x = f32(300, 300)
    run_both(lambda x: lax.fori_loop(0, 4, lambda i, c: c * 0.5 - x * c, x), x)


def test_big_loop_with_a_reduced_condition():
    x = np.abs(f32(70_000)) * 100 + 1.0

    def fn(x):
        return lax.while_loop(lambda c: jnp.max(jnp.abs(c[0] * c[0] - x)) > 1e-2,
                              lambda c: ((c[0] + x / c[0]) * 0.5, c[1] + 1), (x, 0))
    run_both(fn, x)


def test_big_loop_with_a_sum_keeps_partial_results():
    # A float sum over 2**17 elements is combined from partial results in Python: the loop
    # stays there (its bits are the backend's for that sum, not the interpreter's).
    x = f32(1 << 17)

    def fn(x):
        return lax.fori_loop(0, 3, lambda i, c: c * 0.5 + jnp.sum(c) * 1e-6, x)
    exe = cpu_backend.CpuBackend().compile(_optimized(fn, x))
    got = exe.execute([x])[0]
    want = x.astype(np.float64)
    for _ in range(3):
        want = want * 0.5 + want.sum() * 1e-6
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    (loop,) = [s for s in exe._steps if type(s) is tuple and type(s[0]) is WhilePlan]
    assert loop[1][2] is None  # (no native loop)


def _optimized(fn, *args):
    module = parse_module(ember.jit(fn).lower(*args).as_text())
    optimize(module, verify=True)
    return module


def test_big_fori_loop_over_a_matrix():
    x = f32(512, 256)
    run_both(lambda x: lax.fori_loop(0, 5, lambda i, c: jnp.maximum(c, 0.25) * 0.5 + x, x),
             x)
