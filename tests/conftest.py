"""Test-session settings: compiled object code goes to a private temporary cache.

The CPU backend caches object code on disk; tests must neither read a developer's cache nor
fill it, so the session points ``EMBER_CACHE_DIR`` at a fresh temporary directory (tests of
the cache itself use their own directories).
"""

import os
import tempfile

_CACHE = tempfile.TemporaryDirectory(prefix="ember-test-cache-")
os.environ["EMBER_CACHE_DIR"] = _CACHE.name
