"""Tiered compilation in the CPU backend: the first call runs on quickly compiled code while
the optimized code compiles in the background; later calls use the optimized code."""

import logging
import threading

import numpy as np
import pytest

import ember
import ember.backends.cpu as cpu
import ember.numpy as jnp
from ember.backends import get_backend
from ember.backends.cpu.executable import KernelPlan
from ember.config import config


@pytest.fixture(autouse=True)
def tiered(monkeypatch):
    monkeypatch.setattr(cpu, "TIERED_COMPILATION", True)


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
    errors, results = [], []

    def worker():
        try:
            for _ in range(20):
                results.append(np.asarray(f(X)))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
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
