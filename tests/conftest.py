"""Test-session settings: compiled object code goes to a private temporary cache.

The CPU backend caches object code on disk; tests must neither read a developer's cache nor
fill it, so the session points ``EMBER_CACHE_DIR`` at a fresh temporary directory (tests of
the cache itself use their own directories).
"""

import os
import tempfile

_CACHE = tempfile.TemporaryDirectory(prefix="ember-test-cache-")
os.environ["EMBER_CACHE_DIR"] = _CACHE.name

# Linking each compiled program into a shared library for the disk cache costs a second
# compile and a ``cc`` run per program; only the tests of that mechanism turn it back on
# (``tests/backends/cpu/test_native_cache.py`` and the others that need it).
os.environ["EMBER_CPU_SHARED_LIBRARIES"] = "0"
