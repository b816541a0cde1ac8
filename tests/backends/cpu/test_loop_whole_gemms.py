"""Products worth BLAS's threads inside loops (``executable.whole_gemm``) are one CBLAS call
each round, as outside loops: cut into one-BLAS-thread tasks, a (512, 512) product ran ~40%
slower (each task packs the other operand again). The loop's other products then keep
BLAS's threads too (no ``one_blas_thread``), and kernels after such a product need
``AFTER_BLAS_MIN_WORK`` for threads. Native loops, loops stepped from Python and programs
mixing such products with tasks on the parallel runtime all give the float64 reference's
values, and native and Python stepping the same bits."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import _blas_threads, lax
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu import gemm_kernel
from tests.backends.cpu.helpers import cpu_executable as _executable
from tests.backends.cpu.helpers import replanned

rng = np.random.default_rng(31)


@pytest.fixture(autouse=True)
def _blas_products(monkeypatch):
    # (the products here stay with BLAS, whose paths this file checks; ember's own gemm
    # is ``test_native_gemm.py``'s)
    monkeypatch.setenv(gemm_kernel.GEMM_ENV, "blas")


@pytest.fixture(autouse=True)
def _no_stall_holds(monkeypatch):
    monkeypatch.setattr(_blas_threads.blas_stall_guard, "run", lambda key, call: call())


def _data(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _loops(exe):
    return [(s, p) for s, p in (x for x in exe._steps if type(x) is tuple)
            if type(s) is cpu_exe.WhilePlan]


def _reference_loop(h, w, rounds):
    h = h.astype(np.float64)
    for _ in range(rounds):
        h = np.tanh(h @ w.astype(np.float64))
    return h


def _stepped_from_python(exe):
    return replanned(exe, native_call=None)


def test_a_loops_large_products_are_whole_and_need_no_tasks():
    w, h = _data(512, 512, scale=0.04), _data(512, 512)
    f = lambda w, h: lax.fori_loop(0, 3, lambda i, h: jnp.tanh(h @ w), h)  # noqa: E731
    exe = _executable(f, w, h)
    (dot,) = [s for s in cpu_exe.nested_steps(exe.program.steps) if type(s) is cpu_exe.DotPlan]
    assert cpu_exe.whole_gemm(dot.gemm) and exe._steps_whole
    # (no task function was made for it: the loop calls CBLAS itself)
    with pytest.raises(ValueError):
        exe._lib.address(cpu_exe.gemm_task_name(
            exe.program.entry_name.removesuffix("_entry"), dot.gemm))
    got = np.asarray(ember.jit(f)(w, h))
    np.testing.assert_allclose(got, _reference_loop(h, w, 3), rtol=2e-5, atol=2e-5)
    np.testing.assert_array_equal(_stepped_from_python(exe).execute([w, h])[0], got)


def test_python_stepped_program_with_a_native_loop_of_large_products():
    # A full sum's partial results step the program from Python; the loop stays native and
    # gets the runtime's rest (its product is on BLAS's threads, not in one_blas_thread).
    x, a = _data(512, 512), _data(512, 512, scale=0.04)

    def f(x, a):
        return jnp.sum(x) + jnp.sum(lax.fori_loop(0, 3, lambda i, h: jnp.tanh(h @ a), x))
    exe = _executable(f, x, a)
    assert exe.program.native_call is None
    ((_, prepared),) = _loops(exe)
    native = prepared[2]
    assert native is not None and not native[3]  # (a native loop, no one_blas_thread)
    want = np.sum(x.astype(np.float64)) + np.sum(_reference_loop(x, a, 3))
    np.testing.assert_allclose(float(ember.jit(f)(x, a)), want, rtol=1e-4)


def test_a_loop_mixing_large_products_and_batched_tasks_steps_from_python():
    # A batch worth several threads runs as one-BLAS-thread tasks on the runtime, which
    # cannot share a call with products on BLAS's threads: the loop steps from Python.
    w, h = _data(512, 512, scale=0.04), _data(512, 512)
    q = _data(16, 256, 256, scale=0.06)

    def body(i, c):
        h, q = c
        return jnp.tanh(h @ w), jnp.tanh(q @ q)
    f = lambda w, h, q: lax.fori_loop(0, 2, body, (h, q))  # noqa: E731
    exe = _executable(f, w, h, q)
    assert exe.program.native_call is None
    ((_, prepared),) = _loops(exe)
    assert prepared[2] is None
    got_h, got_q = (np.asarray(v) for v in ember.jit(f)(w, h, q))
    np.testing.assert_allclose(got_h, _reference_loop(h, w, 2), rtol=2e-5, atol=2e-5)
    want_q = q.astype(np.float64)
    for _ in range(2):
        want_q = np.tanh(want_q @ want_q)
    np.testing.assert_allclose(got_q, want_q, rtol=2e-5, atol=2e-5)


def test_large_products_in_a_loops_case_and_small_ones_beside():
    w, h = _data(512, 512, scale=0.04), _data(512, 512)
    small = _data(512, 16, scale=0.2)

    def body(i, h):
        h = lax.cond(i % 2 == 0, lambda: jnp.tanh(h @ w), lambda: h * 0.5)
        return h + jnp.tanh(h[:, :16] @ small[:16]).sum(axis=1, keepdims=True) * 0.01
    f = lambda w, h, small: lax.fori_loop(0, 3, body, h)  # noqa: E731
    exe = _executable(f, w, h, small)
    assert exe._steps_whole
    want = h.astype(np.float64)
    w64, s64 = w.astype(np.float64), small.astype(np.float64)
    for i in range(3):
        want = np.tanh(want @ w64) if i % 2 == 0 else want * 0.5
        want = want + np.tanh(want[:, :16] @ s64[:16]).sum(axis=1, keepdims=True) * 0.01
    got = np.asarray(ember.jit(f)(w, h, small))
    np.testing.assert_allclose(got, want, rtol=5e-5, atol=5e-5)
    np.testing.assert_array_equal(_stepped_from_python(exe).execute([w, h, small])[0], got)


def test_a_scan_of_train_steps_matches_the_steps_run_one_by_one():
    params = [(_data(784, 256, scale=0.05), _data(256, scale=0.1)),
              (_data(256, 10, scale=0.05), _data(10, scale=0.1))]
    xs, ys = _data(4, 128, 784), np.eye(10, dtype=np.float32)[rng.integers(0, 10, (4, 128))]

    def step(params, x, y):
        def loss(params):
            (w1, b1), (w2, b2) = params
            logits = jnp.maximum(x @ w1 + b1, 0.0) @ w2 + b2
            return -(ember.nn.log_softmax(logits) * y).sum(axis=1).mean()
        value, grads = ember.value_and_grad(loss)(params)
        return ember.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), value

    scanned = ember.jit(lambda p, xs, ys: lax.scan(lambda p, xy: step(p, *xy), p, (xs, ys)))
    final, losses = scanned(params, xs, ys)
    one = ember.jit(step)
    p = params
    for t in range(4):
        p, value = one(p, xs[t], ys[t])
        np.testing.assert_allclose(float(losses[t]), float(value), rtol=1e-5)
    for got, want in zip(ember.tree_util.tree_leaves(final), ember.tree_util.tree_leaves(p)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-6)
