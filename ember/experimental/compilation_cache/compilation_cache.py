"""The persistent compilation cache's switches, as
``jax.experimental.compilation_cache.compilation_cache``.

ember's persistent cache is the CPU backend's on-disk cache of compiled programs
(``ember.backends.cpu.object_cache``): native code, run plans and the optimized HLO of every
jitted program, keyed by its jaxpr or HLO, so a later process skips the compile. Its folder
is the config ``jax_compilation_cache_dir`` (default ``$EMBER_CACHE_DIR`` or ember's folder
in the user's cache directory), read at every compile; ``jax_enable_compilation_cache``
switches it off. ``set_cache_dir`` sets that config, so later compiles read and write there.

Example:
    >>> from ember.experimental.compilation_cache import compilation_cache as cc
    >>> cc.set_cache_dir("/tmp/ember-cache")
"""

from __future__ import annotations

import os

from ember.backends.cpu import object_cache as _object_cache
from ember.config import config

__all__ = ["initialize_cache", "is_initialized", "reset_cache", "set_cache_dir"]


def set_cache_dir(path: os.PathLike | str) -> None:
    """Makes later compiles read and write the persistent cache in ``path`` (created when
    first written): sets the config ``jax_compilation_cache_dir``.

    The cache is trusted: a process runs the code it finds there, so never share its
    folder with users you do not trust.

    Example:
        >>> cc.set_cache_dir("/tmp/ember-cache")
        >>> ember.config.read("jax_compilation_cache_dir")
        '/tmp/ember-cache'
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"set_cache_dir: path must be a str or a path, got "
                        f"{type(path).__name__}")
    config.update("jax_compilation_cache_dir", os.fspath(path))


def initialize_cache(path: os.PathLike | str) -> None:
    """Deprecated in JAX: ``set_cache_dir(path)``.

    Example:
        >>> cc.initialize_cache("/tmp/ember-cache")
    """
    set_cache_dir(path)


def is_initialized() -> bool:
    """Whether compiles use a persistent cache (deprecated in JAX, which keeps the name:
    the cache opens lazily, so this says whether it is enabled).

    Example:
        >>> cc.is_initialized()
        True
    """
    return _object_cache.get_object_cache() is not None


def reset_cache() -> None:
    """Returns the cache to its pristine state: the cache objects this process opened are
    forgotten, so the next compile opens the folder the config names afresh (the entries on
    disk stay; the config is not changed, as in JAX).

    Example:
        >>> cc.reset_cache()
    """
    with _object_cache._caches_lock:
        _object_cache._caches.clear()
