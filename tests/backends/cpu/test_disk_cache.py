"""The CPU backend's on-disk object cache, end to end: a second process loads object code
instead of compiling; damaged entries are recompiled, never loaded; versions are in the key."""

import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.backends.cpu as cpu
import ember.numpy as jnp
from ember.backends import get_backend
from ember.backends.cpu import object_cache

PROGRAM = """
import json, numpy as np, ember, ember.numpy as jnp
from ember.backends import get_backend
x = np.linspace(-3, 3, 4096, dtype=np.float32)
out = ember.jit(lambda a: jnp.sum(jnp.tanh(a * 2.0 + 1.0)))(x)
get_backend("cpu").wait_for_background()  # optimized compile, link, cache entries
print(json.dumps({"value": float(out), "stats": get_backend("cpu").stats}))
"""


def run_process(cache_dir, **env):
    full_env = dict(os.environ, EMBER_CACHE_DIR=str(cache_dir), **env)
    out = subprocess.run([sys.executable, "-c", PROGRAM], env=full_env, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def entries(cache_dir):
    """The cache's entries (not its shared size estimate)."""
    return glob.glob(os.path.join(cache_dir, "*", "*" + object_cache.SUFFIX))


def expected():
    x = np.linspace(-3, 3, 4096, dtype=np.float32)
    return float(np.sum(np.tanh(x.astype(np.float64) * 2 + 1)))


def test_second_process_hits_the_disk_cache(tmp_path):
    first = run_process(tmp_path)
    assert first["stats"]["compiled"] == 1 and first["stats"]["disk_hits"] == 0
    assert entries(tmp_path)
    second = run_process(tmp_path)
    assert second["stats"]["compiled"] == 0 and second["stats"]["disk_hits"] == 1
    assert second["value"] == first["value"]
    assert abs(second["value"] - expected()) < 1e-3


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
def test_damaged_entries_are_recompiled(tmp_path, damage):
    run_process(tmp_path)
    for path in entries(tmp_path):
        data = open(path, "rb").read()
        if damage == "truncate":
            data = data[: len(data) // 2]
        elif damage == "flip":
            i = len(data) - 100
            data = data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:]
        else:
            data = b""
        open(path, "wb").write(data)
    again = run_process(tmp_path)
    assert again["stats"]["compiled"] == 1 and again["stats"]["disk_hits"] == 0
    assert abs(again["value"] - expected()) < 1e-3
    # The recompiled entry replaced the damaged one and is loadable.
    assert run_process(tmp_path)["stats"]["disk_hits"] == 1


def test_cache_switch_off_writes_nothing(tmp_path):
    result = run_process(tmp_path, EMBER_ENABLE_COMPILATION_CACHE="0")
    assert result["stats"]["compiled"] == 1
    assert entries(tmp_path) == []


def test_codegen_version_is_part_of_the_key(monkeypatch):
    backend = get_backend("cpu")
    key = backend.cache_key("define void @f() { ret void }")
    monkeypatch.setattr(cpu, "CODEGEN_VERSION", cpu.CODEGEN_VERSION + "-next")
    assert backend.cache_key("define void @f() { ret void }") != key


def test_same_module_twice_in_one_process_compiles_once():
    backend = get_backend("cpu")
    x = np.arange(5000, dtype=np.float32)
    f = lambda a: a * 3.0 - 1.0  # noqa: E731
    np.testing.assert_allclose(ember.jit(f)(x), x * 3 - 1)
    backend.wait_for_background()  # (tiered: the optimized compile finishes in the background)
    before = dict(backend.stats)
    np.testing.assert_allclose(ember.jit(lambda a: f(a))(jnp.asarray(x)), x * 3 - 1)
    assert backend.stats["memory_hits"] == before["memory_hits"] + 1
    assert backend.stats["compiled"] == before["compiled"]
