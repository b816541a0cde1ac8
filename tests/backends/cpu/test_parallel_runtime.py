"""The native parallel runtime: tasks cover the range exactly once, results match the
Python pool and a single thread, concurrent callers and forked children stay correct."""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu import parallel_runtime
from tests.backends.cpu.helpers import run_in_threads

runtime = parallel_runtime.get()
needs_runtime = pytest.mark.skipif(runtime is None, reason="no native parallel runtime here")


def _kernel():
    """A tiny jitted program's only kernel: ``out[i] = f(x[i])`` as a native function."""
    f = ember.jit(lambda x: x * 3.0 + 1.0)
    x = np.zeros(1 << 20, np.float32)
    exe = f.lower(x).compile()._executable.executable
    (kernel,) = [s for s in exe._steps if type(s) is cpu_exe._Kernel]
    return kernel


@needs_runtime
@pytest.mark.parametrize("n_tasks", [1, 2, 3, 7, 64, 1000])
def test_tasks_cover_the_range_exactly_once(n_tasks):
    kernel = _kernel()
    extent = 100_003
    x = np.arange(extent, dtype=np.float32)
    out = np.full(extent, np.nan, np.float32)
    bufs = cpu_exe._ffi.new("char*[]", [cpu_exe._fb(x), cpu_exe._fb(out)])
    runtime.run(kernel.fn, cpu_exe._ffi.new("char**[]", [bufs]), 0, extent, n_tasks)
    np.testing.assert_array_equal(out, x * 3 + 1)


@needs_runtime
def test_per_task_tables_give_each_task_its_own_buffers():
    kernel = _kernel()
    extent, n = 40_000, 4
    x = np.arange(extent, dtype=np.float32)
    outs = [np.full(extent, -1.0, np.float32) for _ in range(n)]
    tables = [cpu_exe._ffi.new("char*[]", [cpu_exe._fb(x), cpu_exe._fb(o)]) for o in outs]
    runtime.run(kernel.fn, cpu_exe._ffi.new("char**[]", tables), 1, extent, n)
    for t, o in enumerate(outs):
        lo, hi = t * extent // n, (t + 1) * extent // n
        np.testing.assert_array_equal(o[lo:hi], x[lo:hi] * 3 + 1)
        assert np.all(o[:lo] == -1.0) and np.all(o[hi:] == -1.0)


def _programs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((512, 1024)).astype(np.float32)

    def softmax(a):
        e = jnp.exp(a - jnp.max(a, axis=-1, keepdims=True))
        return e / jnp.sum(e, axis=-1, keepdims=True)
    return x, [softmax, lambda a: jnp.sin(a) * 2 + 1, lambda a: jnp.sum(a, axis=0),
               lambda a: (jnp.sum(a), jnp.max(a))]


def _run_all(x, fns):
    results = []
    for f in fns:
        r = ember.jit(f)(x)
        results.append([np.asarray(v) for v in (r if isinstance(r, tuple) else (r,))])
    return results


@needs_runtime
def test_native_threads_match_the_python_pool_and_one_thread(monkeypatch):
    x, fns = _programs()
    native = _run_all(x, fns)
    monkeypatch.setattr(parallel_runtime, "_runtime", None)
    pool = _run_all(x, fns)
    monkeypatch.setattr(cpu_exe, "PARALLEL_MIN_WORK", 1 << 62)
    single = _run_all(x, [lambda a, f=f: f(a) for f in fns])  # (new functions: recompiled)
    for a, b in zip(native, pool):
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)  # same tasks, same partial results
    for a, b in zip(native[:2], single[:2]):  # no partial sums: bitwise as one thread
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)
    # (Split into partial sums: the column sum's reduced rows, the full sum.)
    np.testing.assert_allclose(native[2][0], single[2][0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(native[3][0], single[3][0], rtol=1e-5)
    np.testing.assert_array_equal(native[3][1], single[3][1])


@needs_runtime
def test_concurrent_callers_get_correct_results():
    x, fns = _programs()
    expected = _run_all(x, fns)

    def work():
        for _ in range(5):
            for exp, got in zip(expected, _run_all(x, fns)):
                for u, v in zip(exp, got):
                    np.testing.assert_array_equal(u, v)

    errors = run_in_threads(work, 3)
    assert errors == []


@needs_runtime
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_computes_without_the_parents_workers():
    program = """
import os, numpy as np, ember, ember.numpy as jnp
from ember.backends.cpu import parallel_runtime
f = ember.jit(lambda a: jnp.sin(a) * 2 + 1)
x = np.linspace(0, 1, 1 << 20, dtype=np.float32)
assert parallel_runtime.get() is not None
f(x).block_until_ready()
pid = os.fork()
if pid == 0:
    ok = np.allclose(np.asarray(f(x * 2)), np.sin(x * 2) * 2 + 1, atol=1e-6)
    ok = ok and parallel_runtime.get() is None
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
"""
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "child 0" in out.stdout


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_makes_its_own_python_pool():
    # The parent's pool has a running worker; a child forked after it must not queue work for
    # that thread, which it does not have (the child would wait forever).
    program = """
import os, threading
from ember import _threads as threads
done = []
threads.pool().run(lambda lo, hi: done.append((lo, hi)), [(0, 1), (1, 2)])
assert sorted(done) == [(0, 1), (1, 2)] and threads.pool().size == 2
pid = os.fork()
if pid == 0:
    finished = threading.Event()
    def work():
        threads.pool().run(lambda lo, hi: done.append((lo, hi)), [(2, 3), (3, 4)])
        finished.set()
    threading.Thread(target=work, daemon=True).start()
    os._exit(0 if finished.wait(20) and sorted(done)[-2:] == [(2, 3), (3, 4)] else 3)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
"""
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, EMBER_NUM_THREADS="2"))
    assert out.returncode == 0, out.stderr
    assert "child 0" in out.stdout


def test_switched_off_the_python_pool_is_used():
    program = ("import os; os.environ['EMBER_CPU_NATIVE_THREADS'] = '0'\n"
               "from ember.backends.cpu import parallel_runtime\n"
               "print(parallel_runtime.get())")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "None"


@needs_runtime
def test_a_missing_runtime_is_built_in_the_background(tmp_path):
    """With an empty disk cache the first compile does not wait for the runtime's build:
    its first run uses the Python pool (same results), the build lands in the cache, and
    the next process loads the runtime (and starts its workers) at import."""
    program = """
import numpy as np, ember, ember.numpy as jnp
from ember.backends import get_backend
from ember.backends.cpu import parallel_runtime
print("at_import", parallel_runtime._runtime is not None)
x = np.linspace(-3, 3, 1 << 20, dtype=np.float32)
expected = np.tanh(x) * 2 + 1
f = ember.jit(lambda a: jnp.tanh(a) * 2 + 1)
compiled = f.lower(x).compile()
print("during_compile", parallel_runtime.ready() is not None)
np.testing.assert_allclose(np.asarray(compiled(x)), expected, rtol=2e-6, atol=2e-6)
get_backend("cpu").wait_for_background()
print("after_wait", parallel_runtime.ready() is not None)
np.testing.assert_allclose(np.asarray(compiled(x)), expected, rtol=2e-6, atol=2e-6)
"""
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                           timeout=300, env=env) for _ in range(2)]
    for out in runs:
        assert out.returncode == 0, out.stderr
    assert runs[0].stdout.split() == ["at_import", "False", "during_compile", "False",
                                      "after_wait", "True"]
    assert runs[1].stdout.split() == ["at_import", "True", "during_compile", "True",
                                      "after_wait", "True"]


def _custom_runtime(name: str, **options) -> parallel_runtime.Runtime:
    """A runtime of two threads built with ``runtime_ir``'s ``options`` (stop it after)."""
    from ember.backends.cpu import _source_stamp, native_lib
    machine = parallel_runtime.platform.machine()
    lib = native_lib.load_or_build(
        f"test-runtime-{name}:{_source_stamp()}",
        lambda: parallel_runtime.runtime_ir(parallel_runtime._FUTEX[machine],
                                            machine == "x86_64", **options),
        2, native_lib.linker() is not None)
    return parallel_runtime.Runtime(lib, 2)


@needs_runtime
def test_a_caller_that_sleeps_for_late_workers_still_gets_every_task():
    # A runtime built to sleep at once whenever a worker is still in its tasks: the
    # sleep-and-wake handshake runs on every such job, and every job still covers its range.
    eager = _custom_runtime("sleeping-drain", drain_spin_cycles=0)
    try:
        kernel = _kernel()
        extent = 1 << 18
        x = np.arange(extent, dtype=np.float32)
        # (On a loaded machine the worker may never be inside a task when the caller runs
        # out of them: keep going, for a while, until the caller has slept a few times.)
        deadline = time.monotonic() + 10
        jobs = 0
        while jobs < 120 or (eager.drain_sleeps() < 5 and time.monotonic() < deadline):
            out = np.full(extent, np.nan, np.float32)
            bufs = cpu_exe._ffi.new("char*[]", [cpu_exe._fb(x), cpu_exe._fb(out)])
            n_tasks = (2, 3, 16)[jobs % 3]
            eager.run(kernel.fn, cpu_exe._ffi.new("char**[]", [bufs]), 0, extent, n_tasks)
            np.testing.assert_array_equal(out, x * 3 + 1)
            jobs += 1
        if eager.drain_sleeps() == 0:
            pytest.skip("no worker was still in a task when the caller finished its own")
    finally:
        eager.stop()


@needs_runtime
def test_rest_sends_spinning_workers_to_sleep():
    # A runtime whose worker would spin for ages after a job: ``rest`` (called before BLAS
    # runs on its own threads) puts it to sleep, and the next job wakes it and is whole.
    spinning = _custom_runtime("long-spin", spin_cycles=1 << 62, spin_iterations=1 << 62)
    try:
        kernel = _kernel()
        extent = 1 << 16
        x = np.arange(extent, dtype=np.float32)

        def job():
            out = np.full(extent, np.nan, np.float32)
            bufs = cpu_exe._ffi.new("char*[]", [cpu_exe._fb(x), cpu_exe._fb(out)])
            spinning.run(kernel.fn, cpu_exe._ffi.new("char**[]", [bufs]), 0, extent, 8)
            np.testing.assert_array_equal(out, x * 3 + 1)

        def sleepers_after(seconds, until):
            deadline = time.monotonic() + seconds
            while spinning.sleepers() != until and time.monotonic() < deadline:
                time.sleep(0.001)
            return spinning.sleepers()

        job()
        assert sleepers_after(0.05, until=1) == 0  # (still spinning)
        spinning.rest()
        assert sleepers_after(5, until=1) == 1
        job()  # (wakes it: it spins again)
        assert sleepers_after(5, until=0) == 0
    finally:
        spinning.stop()
