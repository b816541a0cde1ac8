"""Test-session settings: compiled object code goes to a private temporary cache.

The CPU backend caches object code on disk; tests must neither read a developer's cache nor
fill it, so the session points ``EMBER_CACHE_DIR`` at a fresh temporary directory (tests of
the cache itself use their own directories).
"""

import os
import tempfile

import pytest

_CACHE = tempfile.TemporaryDirectory(prefix="ember-test-cache-")
os.environ["EMBER_CACHE_DIR"] = _CACHE.name

# Tests that start fresh Python processes share one bytecode folder for them: where the
# environment forbids writing bytecode (``PYTHONDONTWRITEBYTECODE``, as on the CI machine),
# every child would compile ember's sources again (~0.5 s of its start).
_BYTECODE = tempfile.TemporaryDirectory(prefix="ember-test-bytecode-")
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault("PYTHONPYCACHEPREFIX", _BYTECODE.name)

# Linking each compiled program into a shared library for the disk cache costs a second
# compile and a ``cc`` run per program; only the tests of that mechanism turn it back on
# (``tests/backends/cpu/test_native_cache.py`` and the others that need it).
os.environ["EMBER_CPU_SHARED_LIBRARIES"] = "0"


@pytest.fixture(scope="module")
def jax():
    """JAX as a test-only oracle on the CPU with x64 off (the test is skipped without it)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    jax = pytest.importorskip("jax")
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_enable_x64", False)
    return jax


@pytest.fixture
def x64():
    """ember with ``jax_enable_x64`` on for the test (some files define their own)."""
    import ember

    previous = ember.config.jax_enable_x64
    ember.config.update("jax_enable_x64", True)
    yield
    ember.config.update("jax_enable_x64", previous)


def pytest_sessionfinish(session, exitstatus):
    """Freezes every object before the interpreter exits: the whole run leaves gigabytes of
    compiled programs and caches, and the collection Python runs at exit walked them for
    minutes after the summary was printed (frozen objects are not collected again)."""
    import gc

    gc.freeze()
