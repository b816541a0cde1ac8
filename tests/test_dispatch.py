"""Asynchronous dispatch: pending arrays, waiting, errors at the wait, inline small work."""

import copy
import os
import pickle
import subprocess
import sys
import threading

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import core
from ember.compiler.evaluator import register_custom_call_target
from ember.compiler.hlo import Shape
from ember.runtime import dispatch

# A test-only primitive lowered to a custom_call whose target runs Python code: it lets the
# tests hold the worker (on an Event), see which thread runs, and raise inside the executable.
_GATE = threading.Event()
_THREADS: list[str] = []


def _hold_target(x, **attrs):
    _THREADS.append(threading.current_thread().name)
    if not _GATE.wait(timeout=30):
        raise TimeoutError("test gate never opened")
    return np.array(x)


def _fail_target(x, **attrs):
    raise ValueError("boom inside the executable")


register_custom_call_target("test_hold", _hold_target)
register_custom_call_target("test_fail", _fail_target)


def _custom_call_primitive(target):
    prim = core.Primitive(target)
    prim.def_abstract_eval(lambda x: x)
    prim.def_impl(lambda x: np.array(x))
    prim.def_lowering(lambda ctx, x: ctx.b.op(
        "custom_call", x, shape=Shape(ctx.aval_out.dtype, ctx.aval_out.shape),
        call_target_name=target, has_side_effect=True))
    return prim


hold_p = _custom_call_primitive("test_hold")
fail_p = _custom_call_primitive("test_fail")

BIG = 1 << 22  # 16 MiB of float32: above the inline limit (INLINE_BYTES_LIMIT)


@pytest.fixture(autouse=True)
def _open_gate():
    _GATE.set()
    _THREADS.clear()
    yield
    _GATE.set()


def _wait_until(predicate) -> bool:
    """Polls ``predicate`` for up to 30 s."""
    for _ in range(3000):
        if predicate():
            return True
        threading.Event().wait(0.01)
    return False


def test_big_work_returns_before_it_is_done(monkeypatch):
    monkeypatch.setattr(dispatch, "WAKE_MIN_MICROSECONDS", 0.0)  # (work this long wakes it)
    f = ember.jit(lambda x: hold_p.bind(x) * 2.0)
    x = jnp.ones(BIG)
    _GATE.clear()
    y = f(x)
    assert not y.is_ready()
    assert y.shape == (BIG,) and y.dtype == np.float32  # metadata does not wait
    assert y.size == BIG and y.nbytes == 4 * BIG
    assert not y.is_ready()
    job = y._pending[0]
    _wait_until(job.running)  # nobody waits for it: the worker takes it up
    assert job.running() and not y.is_ready()
    _GATE.set()
    assert y.block_until_ready() is y
    assert y.is_ready()
    assert float(y[0]) == 2.0 and float(y[-1]) == 2.0
    assert _THREADS == ["ember-cpu-0"]


def test_short_queued_work_leaves_the_worker_asleep():
    """Work below WAKE_MIN_MICROSECONDS is queued without a wake-up: the thread that waits
    for it runs it; queuing more work wakes the worker, which then runs both in order."""
    f = ember.jit(lambda x: hold_p.bind(x) * 2.0)
    g = ember.jit(lambda x: hold_p.bind(x) + 1.0)
    x = jnp.ones(BIG)
    dispatch._WORKER.submit(lambda: None).result(timeout=30)  # (earlier tests' leftovers)
    # The worker, done with that, must be asleep again before the next submit: otherwise it
    # finds the work queued on its way back and runs it (as designed), a race under load.
    assert _wait_until(lambda: len(dispatch._WORKER._ready._waiters) > 0)
    _THREADS.clear()
    first = f(x)
    executable = next(iter(f._cache.fast.values())).executable
    assert not executable.inline and not executable.wake
    job = first._pending[0]
    threading.Event().wait(0.2)
    assert not job.running() and not job.done()  # nobody woke the worker
    assert float(first.block_until_ready()[1]) == 2.0
    assert _THREADS == [threading.current_thread().name]  # the waiting thread ran it

    _THREADS.clear()
    a, b = f(x), g(x)  # the second wakes the worker
    jobs = [a._pending[0], b._pending[0]]
    assert _wait_until(lambda: all(j.done() for j in jobs))
    assert _THREADS == ["ember-cpu-0", "ember-cpu-0"]
    np.testing.assert_array_equal(np.asarray(a)[:2], [2.0, 2.0])
    np.testing.assert_array_equal(np.asarray(b)[:2], [2.0, 2.0])


def test_polling_is_ready_gets_short_queued_work_done():
    f = ember.jit(lambda x: hold_p.bind(x) * 3.0)
    y = f(jnp.ones(BIG))
    assert not next(iter(f._cache.fast.values())).executable.wake
    assert _wait_until(y.is_ready)  # (without the nudge this polls forever)
    assert _THREADS == ["ember-cpu-0"]
    assert float(y[0]) == 3.0


def test_long_work_wakes_the_worker(monkeypatch):
    monkeypatch.setattr(dispatch, "WAKE_MIN_MICROSECONDS", 0.0)
    f = ember.jit(lambda x: hold_p.bind(x) - 1.0)
    y = f(jnp.ones(BIG))
    assert next(iter(f._cache.fast.values())).executable.wake
    job = y._pending[0]
    assert _wait_until(job.done)
    assert _THREADS == ["ember-cpu-0"]
    assert float(y[0]) == 0.0


def test_error_surfaces_at_the_wait():
    f = ember.jit(lambda x: fail_p.bind(x) + 1.0)
    y = f(jnp.ones(BIG))  # returns: the error happens on the worker
    with pytest.raises(ValueError, match="boom inside the executable"):
        y.block_until_ready()
    with pytest.raises(ValueError, match="boom inside the executable"):
        ember.block_until_ready(y)  # (a lone array takes a shortcut past the pytree walk)
    with pytest.raises(ValueError, match="boom"):
        np.asarray(y)
    with pytest.raises(ValueError, match="boom"):
        y + 1  # an eager op on it waits too
    assert y.is_ready()
    # The worker keeps running later work.
    g = ember.jit(lambda x: jnp.sin(x))
    np.testing.assert_allclose(g(jnp.ones(BIG))[:3], np.sin(np.ones(3)), rtol=1e-6)


def test_small_work_runs_inline():
    f = ember.jit(lambda x: hold_p.bind(x) + 1.0)
    y = f(jnp.ones(8))
    assert y.is_ready() and y._pending is None
    assert _THREADS == [threading.current_thread().name]
    with pytest.raises(ValueError, match="boom"):
        ember.jit(lambda x: fail_p.bind(x))(jnp.ones(4))  # inline errors raise at the call


def test_inline_limit_is_read_at_compile_time(monkeypatch):
    monkeypatch.setattr(dispatch, "INLINE_BYTES_LIMIT", 0)
    f = ember.jit(lambda x: hold_p.bind(x) - 1.0)
    _GATE.clear()
    y = f(jnp.ones(4))
    assert not y.is_ready()
    _GATE.set()
    np.testing.assert_array_equal(y, [0.0, 0.0, 0.0, 0.0])


def test_inline_runs_are_the_short_ones():
    # Estimated from the cost analysis: a 1e6-element sum (4 MB read, ~120 µs) runs inline;
    # a tanh of as many elements (transcendental) or a 24 MB add is dispatched.
    def inline(f, n):
        closed = ember.make_jaxpr(f)(jnp.zeros(n))
        return dispatch.compile_closed_jaxpr(closed, "f").inline
    assert inline(jnp.sum, 10**6)
    assert not inline(lambda v: jnp.tanh(v).sum(), 10**6)
    assert not inline(lambda v: v + 1.0, 3 * 10**6)
    assert inline(lambda v: v + 1.0, 10**4)
    cost = {"bytes accessed": 4e6, "flops": 1e6, "transcendentals": 0.0}
    assert 100 < dispatch.estimated_microseconds(cost) < dispatch.INLINE_MAX_MICROSECONDS


def test_products_are_estimated_at_blas_rate():
    # An MLP layer's product (~0.3 ms on BLAS's threads) is no longer estimated at the
    # elementwise rate (~2 ms): called and waited for, it needs no worker woken up.
    closed = ember.make_jaxpr(lambda a, b: jnp.tanh(a @ b))(jnp.zeros((128, 784)),
                                                            jnp.zeros((784, 512)))
    exe = dispatch.compile_closed_jaxpr(closed, "layer")
    dot = 2.0 * 128 * 784 * 512
    assert exe.cost["dot flops"] == dot == exe.cost["flops"]  # (tanh: transcendentals)
    plain = {k: v for k, v in exe.cost.items() if k != "dot flops"}
    assert dispatch.estimated_microseconds(exe.cost) == pytest.approx(
        dispatch.estimated_microseconds(plain) - dot / dispatch._FLOPS_PER_US
        + dot / dispatch._DOT_FLOPS_PER_US)
    assert not exe.inline and not exe.wake
    assert dispatch.estimated_microseconds(plain) > 2 * dispatch.estimated_microseconds(exe.cost)


def test_pending_arrays_work_everywhere():
    f = ember.jit(lambda x: hold_p.bind(x) * 3.0)
    x = jnp.arange(float(BIG))
    _GATE.clear()
    y = f(x)
    z = ember.jit(lambda a: a + 1.0)(y)  # chained: queued behind y on the worker
    assert not y.is_ready() and not z.is_ready()
    _GATE.set()
    np.testing.assert_array_equal(np.asarray(z)[:3], [1.0, 4.0, 7.0])
    _GATE.clear()
    p = f(x)
    threading.Timer(0.05, _GATE.set).start()
    assert repr(p) == repr(jnp.asarray(np.arange(BIG, dtype=np.float32) * 3))  # waits
    _GATE.clear()
    p = f(x)
    threading.Timer(0.05, _GATE.set).start()
    eager = (p + 1.0)[:2]  # eager ops read the value (waiting)
    np.testing.assert_array_equal(eager, [1.0, 4.0])
    q = f(x)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(q))[:2], [0.0, 3.0])
    q = f(x)
    np.testing.assert_array_equal(ember.device_get({"q": q})["q"][:2], [0.0, 3.0])
    q = f(x)
    np.testing.assert_array_equal(copy.deepcopy(q)[:2], [0.0, 3.0])
    q = f(x)
    assert ember.block_until_ready((q, [q]))[0] is q and q.is_ready()
    q = f(x)
    assert float(q.sum()) == 3.0 * (BIG - 1) * BIG / 2


def test_real_large_computation_is_asynchronous_and_correct():
    x = jnp.linspace(0.0, 1.0, 2 * BIG)
    f = ember.jit(lambda x: jnp.sin(x) * jnp.cos(x) + x)
    y = f(x)
    assert y._pending is not None  # queued on the worker (it may already be finished)
    ref = np.sin(np.asarray(x)) * np.cos(np.asarray(x)) + np.asarray(x)
    np.testing.assert_allclose(np.asarray(y), ref, rtol=1e-6, atol=1e-7)


def test_dispatch_from_the_worker_runs_inline():
    inner = ember.jit(lambda a: a * 2.0)
    results = []

    def nested_target(x, **attrs):
        out = inner(jnp.asarray(np.array(x)))  # big: would be async from the main thread
        results.append(out.is_ready())
        return np.asarray(out)

    register_custom_call_target("test_nested", nested_target)
    prim = _custom_call_primitive("test_nested")
    y = ember.jit(lambda x: prim.bind(x))(jnp.ones(BIG))
    np.testing.assert_array_equal(np.asarray(y)[:2], [2.0, 2.0])
    assert results == [True]


def test_eager_path_arrays_have_no_pending_state():
    a = jnp.ones(3) + 1
    assert a.is_ready() and a._pending is None
    assert a.block_until_ready() is a


def _occupy_the_worker(release: threading.Event):
    """Work that keeps the worker busy until ``release`` is set, once the worker runs it."""
    busy = dispatch._WORKER.submit(lambda: release.wait(timeout=30))
    if _wait_until(busy.running):
        return busy
    raise AssertionError("the worker never started")


_FRESH_PROCESS = """
import os, sys, threading, time
import ember, ember.numpy as jnp
from ember.runtime import dispatch

dispatch.WAKE_MIN_MICROSECONDS = 0.0  # (queued work wakes the worker: nobody waits below)
# Started by the import, ahead of any work (see dispatch.start_worker).
worker = dispatch._WORKER._thread
assert worker is not None and worker.is_alive() and worker.name == "ember-cpu-0"
f = ember.jit(lambda x: jnp.sin(x) * 2.0)
x = jnp.ones(1 << 21)  # 8 MiB: dispatched asynchronously
f(x).block_until_ready()
pid = os.fork()
if pid == 0:  # the child has none of the parent's threads: its own worker runs its work
    code = 1
    try:
        y = f(x)
        job = y._pending[0]
        deadline = time.time() + 30
        while not job.done() and time.time() < deadline:
            time.sleep(0.005)  # (nobody waits for the result: only a worker can run it)
        code = 0 if job.done() and float(y[0]) == float(2 * jnp.sin(1.0)) else 2
    finally:
        os._exit(code)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_worker_starts_at_import_and_again_in_a_forked_child():
    out = subprocess.run([sys.executable, "-c", _FRESH_PROCESS], capture_output=True,
                         text=True, timeout=300, env=dict(os.environ, EMBER_PRELOAD="0"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "child 0"


def test_a_waiting_thread_runs_queued_work_itself_in_order():
    """Work the worker has not started yet is run, in submission order, by the thread that
    waits for it (no cross-thread wake-up on the "call, then block" path)."""
    release = threading.Event()
    ran: list[tuple[str, str]] = []

    def record(name):
        ran.append((name, threading.current_thread().name))
        return name

    busy = _occupy_the_worker(release)
    first = dispatch._WORKER.submit(record, "first")
    second = dispatch._WORKER.submit(record, "second")
    try:
        assert second.result(timeout=30) == "second"
        assert first.done() and first.result() == "first"
        me = threading.current_thread().name
        assert ran == [("first", me), ("second", me)]
    finally:
        release.set()
    assert busy.result(timeout=30) is True


def test_work_run_by_a_waiting_thread_dispatches_inline():
    release = threading.Event()
    inner = ember.jit(lambda a: a * 2.0)
    seen = []

    def outer():
        out = inner(jnp.ones(BIG))  # big: asynchronous unless already running queued work
        seen.append(out.is_ready())
        return np.asarray(out)[:2]

    busy = _occupy_the_worker(release)
    job = dispatch._WORKER.submit(outer)
    try:
        np.testing.assert_array_equal(job.result(timeout=30), [2.0, 2.0])
        assert seen == [True]
    finally:
        release.set()
    busy.result(timeout=30)
