"""Tiered compilation in the CPU backend: the first call runs on quickly compiled code while
the optimized code compiles in the background; later calls use the optimized code."""

import logging
import os
import sys
import threading
import time

import numpy as np
import pytest

import ember
import ember.backends.cpu as cpu
import ember.backends.cpu.executable as cpu_executable_module
import ember.numpy as jnp
from ember.backends import get_backend
from ember.backends.cpu.executable import KernelPlan
from ember.config import config
from tests.backends.cpu.helpers import run_in_threads


@pytest.fixture(autouse=True)
def tiered(monkeypatch):
    monkeypatch.setattr(cpu, "TIERED_COMPILATION", True)
    # Later runs wait for the optimized code (as a slow quick code does), so these tests see
    # the switch at the second call; the quick reruns have tests of their own below.
    monkeypatch.setattr(cpu_executable_module, "QUICK_RERUN_MAX_SECONDS", 0.0)
    monkeypatch.setattr(cpu_executable_module, "UPGRADE_WAIT_RUNS", None)
    get_backend("cpu").wait_for_background()  # (earlier tests' compiles would count here)


@pytest.fixture
def cache_dir(tmp_path):
    old = (config.read("jax_enable_compilation_cache"), config.read("jax_compilation_cache_dir"))
    config.update("jax_enable_compilation_cache", True)
    config.update("jax_compilation_cache_dir", str(tmp_path))
    yield tmp_path
    get_backend("cpu").wait_for_background()
    config.update("jax_enable_compilation_cache", old[0])
    config.update("jax_compilation_cache_dir", old[1])


_counter = iter(range(1, 1 << 30))


def fresh_function():
    """A jitted function whose module no earlier test compiled (a unique constant)."""
    c = np.float32(1.0 + next(_counter) * 1e-3)
    return ember.jit(lambda a: jnp.sum(jnp.exp(jnp.sin(a) * c), axis=1) + c), c


def reference(x, c):
    return np.sum(np.exp(np.sin(x.astype(np.float64)) * c), axis=1) + c


X = np.linspace(-2, 2, 64 * 300, dtype=np.float32).reshape(64, 300)  # > FAST_COMPILE_MAX_WORK


def cpu_executable(f):
    return f._cache.last.executable.executable


def test_first_call_quick_later_calls_optimized(cache_dir):
    backend = get_backend("cpu")
    before = dict(backend.stats)
    f, c = fresh_function()
    np.testing.assert_allclose(f(X), reference(X, c), rtol=2e-5)
    exe = cpu_executable(f)
    loaded = f._cache.last.executable
    assert backend.stats["quick_compiled"] == before["quick_compiled"] + 1
    assert exe.program.entry_name.startswith("q")  # the quick code's symbols
    np.testing.assert_allclose(f(X), reference(X, c), rtol=2e-5)
    # The second call waited for the optimized code and switched to it for good.
    assert exe.program.entry_name.startswith("m") and exe._tier is None
    assert all(s.name.startswith("m") for s in exe.program.steps if type(s) is KernelPlan)
    assert loaded._exact_run == exe.execute_exact  # dispatch's cached runner was refreshed
    assert backend.stats["compiled"] == before["compiled"] + 1
    for _ in range(3):
        np.testing.assert_allclose(f(X), reference(X, c), rtol=2e-5)


def test_the_optimizing_compile_starts_when_the_first_run_ends(cache_dir):
    """The first run has the cores to itself: the O3 compile starts only when it ends."""
    backend = get_backend("cpu")
    f, c = fresh_function()
    compiled = f.lower(X).compile()
    exe = compiled._executable.executable
    assert exe._tier is not None and len(backend._deferred) == 1
    assert backend._pending_links(exe.native_key) == []  # nothing started at compile time
    quick_run = exe._fast_exact
    started_during_run = []

    def watching(values):  # the quick code's run, seen from inside
        started_during_run.append(len(backend._pending_links(exe.native_key)))
        return quick_run(values)

    exe._fast_exact = watching
    np.testing.assert_allclose(compiled(X), reference(X, c), rtol=2e-5)
    assert started_during_run == [0]
    deadline = time.monotonic() + 30  # started a grace period after the run
    while backend._deferred and time.monotonic() < deadline:
        time.sleep(0.005)
    assert backend._deferred == {}
    np.testing.assert_allclose(compiled(X), reference(X, c), rtol=2e-5)
    assert exe._tier is None and exe.program.entry_name.startswith("m")


def test_a_second_run_starts_the_optimizing_compile_at_once(cache_dir, monkeypatch):
    monkeypatch.setattr(cpu, "FIRST_RESULT_GRACE", 3600.0)  # the timer never fires here
    backend = get_backend("cpu")
    f, c = fresh_function()
    np.testing.assert_allclose(f(X), reference(X, c), rtol=2e-5)
    assert len(backend._deferred) == 1  # still in its grace period
    np.testing.assert_allclose(f(X), reference(X, c), rtol=2e-5)
    exe = cpu_executable(f)
    assert backend._deferred == {} and exe._tier is None
    assert exe.program.entry_name.startswith("m")
    # The grace timer is cancelled: a process exiting now does not wait the hour out.
    timers = [t for t in threading.enumerate() if isinstance(t, threading.Timer)]
    for t in timers:
        t.join(timeout=2)
    assert not any(t.is_alive() for t in timers)


def test_waiting_for_the_background_starts_compiles_of_programs_never_run(cache_dir):
    backend = get_backend("cpu")
    before = dict(backend.stats)
    f, c = fresh_function()
    f.lower(X).compile()
    assert backend.stats["compiled"] == before["compiled"]
    backend.wait_for_background()
    assert backend.stats["compiled"] == before["compiled"] + 1
    assert backend._deferred == {}
    g = ember.jit(lambda a: f(a))  # the optimized code is at hand now: no quick compile
    np.testing.assert_allclose(g(X), reference(X, c), rtol=2e-5)
    assert backend.stats["quick_compiled"] == before["quick_compiled"] + 1


def test_waiting_for_the_background_sees_work_a_timer_is_starting(monkeypatch):
    """A deferred start fired by its timer while another thread waits for the background:
    the work is listed as deferred or as a background thread at every moment, so the wait
    does not return before it ran (it could, between the two lists: a flaky cache test)."""
    backend = get_backend("cpu")
    done = []
    start = cpu._DeferredStart(backend, "test-deferred", [lambda: done.append(1)])
    with backend._lock:
        backend._deferred["test-deferred"] = start
    plain_thread = threading.Thread

    class SlowThread(plain_thread):  # widens the window between the two lists
        def __init__(self, *args, **kwargs):
            if kwargs.get("name") == "ember-cpu-cache":
                time.sleep(0.2)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(cpu.threading, "Thread", SlowThread)
    timer = plain_thread(target=start)
    timer.start()
    time.sleep(0.05)  # (the timer's thread is making the background thread now)
    backend.wait_for_background()
    assert done == [1]
    timer.join()


def test_same_module_while_optimizing_compiles_once(cache_dir):
    backend = get_backend("cpu")
    before = dict(backend.stats)
    f, c = fresh_function()
    g = ember.jit(lambda a: f(a))  # same module, another jit function
    np.testing.assert_allclose(f(X), reference(X, c), rtol=2e-5)
    np.testing.assert_allclose(g(X), reference(X, c), rtol=2e-5)
    np.testing.assert_allclose(g(X), reference(X, c), rtol=2e-5)
    backend.wait_for_background()
    assert backend.stats["quick_compiled"] == before["quick_compiled"] + 1
    assert backend.stats["compiled"] == before["compiled"] + 1


def test_concurrent_calls_during_the_switch(cache_dir):
    f, c = fresh_function()
    expected = reference(X, c)
    np.testing.assert_allclose(f(X), expected, rtol=2e-5)  # compiled, optimizing now
    results = []

    def worker():
        for _ in range(20):
            results.append(np.asarray(f(X)))

    errors = run_in_threads(worker, 4)
    assert not errors
    assert len(results) == 80
    for r in results:
        np.testing.assert_allclose(r, expected, rtol=2e-5)
    assert cpu_executable(f)._tier is None


def test_failed_optimized_compile_keeps_the_quick_code(cache_dir, monkeypatch, caplog):
    backend = get_backend("cpu")

    def fail(*args, **kwargs):
        raise RuntimeError("optimizer exploded")
    monkeypatch.setattr(backend, "_load_object", fail)
    f, c = fresh_function()
    np.testing.assert_allclose(f(X), reference(X, c), rtol=2e-5)
    with caplog.at_level(logging.WARNING, logger="ember.backends.cpu.executable"):
        np.testing.assert_allclose(f(X), reference(X, c), rtol=2e-5)
    assert "optimizer exploded" in caplog.text
    exe = cpu_executable(f)
    assert exe._tier is None and exe.program.entry_name.startswith("q")
    np.testing.assert_allclose(f(X), reference(X, c), rtol=2e-5)


def test_switch_off_optimizes_before_the_first_call(cache_dir, monkeypatch):
    monkeypatch.setattr(cpu, "TIERED_COMPILATION", False)
    backend = get_backend("cpu")
    before = dict(backend.stats)
    f, c = fresh_function()
    np.testing.assert_allclose(f(X), reference(X, c), rtol=2e-5)
    assert backend.stats["quick_compiled"] == before["quick_compiled"]
    assert backend.stats["compiled"] == before["compiled"] + 1
    assert cpu_executable(f).program.entry_name.startswith("m")


def test_without_disk_cache_tiering_still_upgrades(monkeypatch):
    old = config.read("jax_enable_compilation_cache")
    config.update("jax_enable_compilation_cache", False)
    try:
        f, c = fresh_function()
        np.testing.assert_allclose(f(X), reference(X, c), rtol=2e-5)
        np.testing.assert_allclose(f(X), reference(X, c), rtol=2e-5)
        assert cpu_executable(f).program.entry_name.startswith("m")
    finally:
        config.update("jax_enable_compilation_cache", old)


# Programs whose quick (unoptimized) and optimized code must agree bit for bit: float sums
# accumulate in lanes whose order is written in the IR (``kernel_gen.LaneSums``), so no
# optimization may reorder them. Each gets a fresh constant so no earlier test compiled it.
_RNG = np.random.default_rng(7)
_BIG = (_RNG.standard_normal(70_001) * 100).astype(np.float32)  # several blocks, a tail
_ROWS = _RNG.standard_normal((96, 1000)).astype(np.float32)  # rows not a multiple of lanes
_SHORT = _RNG.standard_normal((300, 100)).astype(np.float32)  # 16 lanes and a tail of 4
_SPECIAL_ROWS = _ROWS[:48].copy()  # zeros of both signs, NaNs of both signs, infinities
_SPECIAL_ROWS[::3] = np.where(_RNG.random((16, 1000)) < 0.5, -0.0, 0.0)
_SPECIAL_ROWS[1::6, ::97] = np.nan
_SPECIAL_ROWS[4::6, ::89] = -np.abs(np.float32(np.nan))
_SPECIAL_ROWS[2::6, ::101] = np.inf
_TRIG = np.concatenate([np.linspace(-1e6, 1e6, 4001), [0.0, -0.0, np.inf, -np.inf, np.nan],
                        _RNG.standard_normal(3000) * 1e4]).astype(np.float32)

TIER_CASES = {
    "full sum": (lambda a, c: jnp.sum(a * c), _BIG),
    "split sum float64": (lambda a, c: jnp.sum(a.astype(jnp.float64) * c), _BIG),
    "mean and var": (lambda a, c: (jnp.mean(a * c), jnp.var(a)), _BIG),
    "product": (lambda a, c: jnp.prod(1.0 + a[:3000] * 1e-4 * c), _BIG),
    "row softmax": (lambda a, c: jnp.exp(a * c - jnp.max(a, -1, keepdims=True))
                    / jnp.sum(jnp.exp(a * c - jnp.max(a, -1, keepdims=True)), -1,
                              keepdims=True), _ROWS),
    "layernorm": (lambda a, c: (a - jnp.mean(a, -1, keepdims=True))
                  / jnp.sqrt(jnp.var(a * c, -1, keepdims=True) + 1e-5), _ROWS),
    "row sums": (lambda a, c: jnp.sum(jnp.tanh(a * c), axis=1), _ROWS),
    "short row sums": (lambda a, c: jnp.sum(jnp.tanh(a * c), axis=1), _SHORT),
    "short row softmax": (lambda a, c: jnp.exp(a * c - jnp.max(a, -1, keepdims=True))
                          / jnp.sum(jnp.exp(a * c - jnp.max(a, -1, keepdims=True)), -1,
                                    keepdims=True), _SHORT),
    "column sums": (lambda a, c: jnp.sum(a * c, axis=0), _ROWS),
    "max and min": (lambda a, c: (jnp.max(a * c, axis=1), jnp.min(a, axis=1),
                                  jnp.max(a, axis=0), jnp.min(a[:, :100] * c)), _SPECIAL_ROWS),
    "middle axis": (lambda a, c: jnp.sum(a.reshape(8, 12, 1000) * c, axis=1), _ROWS),
    "sin cos": (lambda a, c: (jnp.sin(a * c), jnp.cos(a) + c), _TRIG),
    "transcendentals": (lambda a, c: (jnp.exp(a * 1e-3 * c), jnp.log1p(jnp.abs(a)),
                                      jnp.arctan2(a, c), jnp.sum(jnp.expm1(a * 1e-5))), _TRIG),
}


@pytest.mark.parametrize("case", sorted(TIER_CASES))
def test_quick_and_optimized_code_agree_bit_for_bit(case):
    fn, x = TIER_CASES[case]
    c = np.float32(1.0 + next(_counter) * 1e-3)
    f = ember.jit(lambda a: fn(a, c))
    quick = [np.asarray(v) for v in ember.tree_util.tree_leaves(f(x))]
    exe = cpu_executable(f)
    assert exe.program.entry_name.startswith("q")  # the first call ran the quick code
    get_backend("cpu").wait_for_background()
    optimized = [np.asarray(v) for v in ember.tree_util.tree_leaves(f(x))]
    assert exe.program.entry_name.startswith("m")
    for q, o in zip(quick, optimized):
        np.testing.assert_array_equal(q.reshape(-1).view(np.uint8), o.reshape(-1).view(np.uint8))
    # And both are right: the interpreter (NumPy) backend computes the same program.
    reference_f = ember.jit(lambda a: fn(a, c), backend="interpreter")
    for o, r in zip(optimized, ember.tree_util.tree_leaves(reference_f(x))):
        np.testing.assert_allclose(o, np.asarray(r), rtol=2e-5, atol=1e-4)


def test_forked_child_keeps_the_quick_code():
    """The optimizing thread stays in the parent: a forked child's later calls run the quick
    code (same results) instead of waiting for it forever."""
    import os
    f, c = fresh_function()
    expected = np.asarray(f(X))  # quick code; the optimized compile is under way
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code
        try:
            exe = cpu_executable(f)
            ok = all(np.array_equal(np.asarray(f(X)), expected) for _ in range(2))
            os._exit(0 if ok and exe._tier is None else 3)
        finally:
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    np.testing.assert_array_equal(np.asarray(f(X)), expected)  # the parent upgrades
    assert cpu_executable(f).program.entry_name.startswith("m")


def test_a_process_exiting_right_after_its_first_run_still_caches_the_optimized_code(
        tmp_path):
    """The optimizing compile starts after a grace period, on a timer made by the dispatch
    worker (a daemon thread); the timer must still fire and the compile finish when the
    process exits at once, or the next process would find nothing in the disk cache. The
    lowered module's entry (written after the native library) is held back with it."""
    import os
    import subprocess
    import sys
    program = """
import numpy as np, ember, ember.numpy as jnp
from ember.backends import get_backend
from ember.runtime import dispatch
optimized = []
real_optimize = dispatch.optimize
dispatch.optimize = lambda *a, **k: optimized.append(1) or real_optimize(*a, **k)
f = ember.jit(lambda a: jnp.sum(jnp.exp(jnp.sin(a) * 1.5), axis=1))
x = np.linspace(-2, 2, 64 * 300, dtype=np.float32).reshape(64, 300)
np.asarray(f(x))
s = get_backend("cpu").stats
print(s["quick_compiled"], s["disk_hits"] + s["native_hits"], len(optimized))
"""
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path), EMBER_CPU_SHARED_LIBRARIES="1")
    outs = [subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                           timeout=300, env=env, check=True).stdout.split() for _ in range(2)]
    assert outs[0] == ["1", "0", "1"]  # cold: the HLO pipeline, then quick code first
    # Warm: the cached optimized code, found from the lowered module (no HLO pipeline).
    assert outs[1][0] == "0" and int(outs[1][1]) >= 1 and outs[1][2] == "0"


def test_single_call_runner_is_generated_by_the_second_run(monkeypatch):
    """Generating the single-call runner compiles Python source: not before the first
    result. The second run makes it, and dispatch's cached runner switches to it."""
    monkeypatch.setattr(cpu, "TIERED_COMPILATION", False)
    x = np.linspace(-1, 1, 16, dtype=np.float32)
    f, c = fresh_function()
    want = reference(x.reshape(1, 16), c)
    np.testing.assert_allclose(f(x.reshape(1, 16)), want, rtol=2e-5)
    exe = cpu_executable(f)
    loaded = f._cache.last.executable
    assert exe._entry is not None and exe._runner is None
    np.testing.assert_allclose(f(x.reshape(1, 16)), want, rtol=2e-5)
    assert exe._runner is not None and exe.execute_exact == exe._runner
    assert loaded._exact_run == exe._runner
    for _ in range(3):
        np.testing.assert_allclose(f(x.reshape(1, 16)), want, rtol=2e-5)


@pytest.mark.skipif(not cpu.native_lib.available() or cpu.native_lib.linker() is None,
                    reason="needs Linux memfd_create and a C compiler driver")
def test_one_optimizing_compile_makes_both_the_running_and_the_cached_code(cache_dir,
                                                                        monkeypatch):
    """With shared libraries on, the optimized tier is compiled once, for the library: the
    process runs the library it stores (no second, MCJIT compile of the same IR)."""
    from ember.backends.cpu import llvm_support
    monkeypatch.setenv(cpu.SHARED_LIBRARIES_VAR, "1")
    compiles = []
    real = llvm_support.compile_ir

    def counting(ir_text, *args, **kwargs):
        compiles.append((kwargs.get("opt_level"), kwargs.get("shared_library", False)))
        return real(ir_text, *args, **kwargs)
    monkeypatch.setattr(llvm_support, "compile_ir", counting)
    f, c = fresh_function()
    for _ in range(3):
        np.testing.assert_allclose(f(X), reference(X, c), rtol=2e-5)
    get_backend("cpu").wait_for_background()
    exe = cpu_executable(f)
    assert exe.program.entry_name.startswith("m") and exe._tier is None
    assert isinstance(exe._lib, cpu.native_lib.NativeLibrary)
    assert [k for k in compiles if k[0] == 3] == [(3, True)]


class _HeldCompile:
    """Holds the optimizing compile back until ``release()``: the quick code's reruns are
    seen before it ends."""

    def __init__(self, monkeypatch):
        self.gate = threading.Event()
        backend = get_backend("cpu")
        build = backend._build_native

        def held_build(*args, **kwargs):
            assert self.gate.wait(60)
            return build(*args, **kwargs)
        monkeypatch.setattr(backend, "_build_native", held_build)

    def release(self):
        self.gate.set()
        get_backend("cpu").wait_for_background()


def test_fast_quick_code_runs_again_while_the_optimized_code_compiles(cache_dir, monkeypatch):
    monkeypatch.setattr(cpu_executable_module, "QUICK_RERUN_MAX_SECONDS", 60.0)
    held = _HeldCompile(monkeypatch)
    try:
        f, c = fresh_function()
        first = np.asarray(f(X))
        np.testing.assert_allclose(first, reference(X, c), rtol=2e-5)
        exe = cpu_executable(f)
        for _ in range(3):  # no waiting: the quick code again, the same bits
            np.testing.assert_array_equal(np.asarray(f(X)), first)
        assert exe._tier is not None and exe.program.entry_name.startswith("q")
        assert exe._quick_seconds is not None and exe._quick_seconds < 60.0
    finally:
        held.release()
    np.testing.assert_array_equal(np.asarray(f(X)), first)  # now the optimized code
    assert exe._tier is None and exe.program.entry_name.startswith("m")
    assert f._cache.last.executable._exact_run == exe.execute_exact


def test_slow_quick_code_waits_for_the_optimized_code(cache_dir, monkeypatch):
    monkeypatch.setattr(cpu_executable_module, "QUICK_RERUN_MAX_SECONDS", 60.0)
    f, c = fresh_function()
    first = np.asarray(f(X))
    exe = cpu_executable(f)
    exe._quick_seconds = 61.0  # (as if the first run had taken longer than the limit)
    np.testing.assert_array_equal(np.asarray(f(X)), first)
    assert exe._tier is None and exe.program.entry_name.startswith("m")


def test_slow_quick_code_waits_a_bounded_time_for_a_starved_compile(cache_dir, monkeypatch):
    # (the optimizing thread runs at a low priority: on a busy machine it may not run
    # for seconds, and a caller must not wait that long for it)
    monkeypatch.setattr(cpu_executable_module, "UPGRADE_WAIT_RUNS", 2.0)
    held = _HeldCompile(monkeypatch)
    try:
        f, c = fresh_function()
        first = np.asarray(f(X))
        exe = cpu_executable(f)
        exe._quick_seconds = 0.05  # slow quick code: waits up to 2 x 50 ms, then reruns it
        for _ in range(2):
            start = time.perf_counter()
            np.testing.assert_array_equal(np.asarray(f(X)), first)
            assert time.perf_counter() - start < 5.0
        assert exe._tier is not None and exe.program.entry_name.startswith("q")
    finally:
        held.release()
    np.testing.assert_array_equal(np.asarray(f(X)), first)  # the optimized code, once ready
    assert exe._tier is None and exe.program.entry_name.startswith("m")


def test_quick_reruns_through_execute_and_concurrent_calls(cache_dir, monkeypatch):
    """The general ``execute`` path reruns the quick code too, and threads calling while the
    optimized code is installed all get the right results."""
    monkeypatch.setattr(cpu_executable_module, "QUICK_RERUN_MAX_SECONDS", 60.0)
    held = _HeldCompile(monkeypatch)
    f, c = fresh_function()
    expected = np.asarray(f(X))
    exe = cpu_executable(f)
    out = exe.execute([X])
    np.testing.assert_array_equal(out[0], expected)
    assert exe._tier is not None
    results = []

    def worker():
        for _ in range(20):
            results.append(np.asarray(f(X)))
    releaser = threading.Timer(0.01, held.gate.set)
    releaser.start()
    errors = run_in_threads(worker, 4)
    releaser.join()
    held.release()
    assert not errors and len(results) == 80
    for r in results:
        np.testing.assert_array_equal(r, expected)
    np.testing.assert_array_equal(exe.execute([X])[0], expected)
    assert exe._tier is None and exe.program.entry_name.startswith("m")


def _sin_chain(c, steps):
    def f(x):
        for i in range(steps):
            x = jnp.sin(x) * 0.5 + x * (c + i * 1e-3)
        return x
    return f


def _sin_chain_reference(x, c, steps):
    x = x.astype(np.float64)
    for i in range(steps):
        x = np.sin(x) * 0.5 + x * (c + i * 1e-3)
    return x


@pytest.mark.parametrize("steps, optimized", [(40, True), (1, False)])
def test_few_elements_of_many_ops_get_optimized_code(cache_dir, steps, optimized):
    """A program of few elements (at most FAST_COMPILE_MAX_WORK) compiles unoptimized only
    while its kernels do few element-ops (FAST_COMPILE_MAX_OPS): 40 ``sin`` steps over 64
    elements take the tiers (quick code first, then optimized code), one step does not."""
    backend = get_backend("cpu")
    before = dict(backend.stats)
    c = 0.1 + next(_counter) * 1e-4
    f = ember.jit(_sin_chain(c, steps))
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    for _ in range(3):
        np.testing.assert_allclose(f(x), _sin_chain_reference(x, c, steps), rtol=1e-4,
                                   atol=1e-5)
    exe = cpu_executable(f)
    module = f._cache.last.executable.module
    heavy = cpu.heaviest_kernel_ops(module)
    assert (heavy > cpu.FAST_COMPILE_MAX_OPS) == optimized
    assert (backend.stats["quick_compiled"] > before["quick_compiled"]) == optimized
    assert exe.program.entry_name.startswith("m")


def test_heaviest_kernel_ops_counts_elements_times_weighted_ops():
    from ember.compiler.parser import parse_module
    from ember.compiler.passes.fusion import EXPENSIVE_CODE_COST
    from tests.backends.cpu.helpers import optimized as optimized_module
    x = np.ones((8, 16), np.float32)
    module = optimized_module(lambda x: jnp.sin(x) * 2.0 + x, x)
    # (one fusion over 128 elements: sin, multiply, add)
    assert cpu.heaviest_kernel_ops(module) == 128 * (EXPENSIVE_CODE_COST + 2)
    assert cpu.heaviest_kernel_ops(parse_module(
        ember.jit(lambda x: x).lower(x).compile().as_text())) == 0


@pytest.mark.skipif(not hasattr(os, "getpriority") or not sys.platform.startswith("linux"),
                    reason="thread nice values are Linux's")
def test_background_work_runs_at_the_background_nice_value():
    # (Not the lowest: a nice-19 compile got ~1% of a core beside two busy processes on 2
    # cores, and others waited for the LLVM lock it held.)
    seen = []
    backend = get_backend("cpu")
    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    backend._start_background(
        lambda: seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
    backend.wait_for_background()
    assert cpu.BACKGROUND_NICE == 10
    assert seen in ([max(before, cpu.BACKGROUND_NICE)], [before])  # ([before]: forbidden)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before
