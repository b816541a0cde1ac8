"""ember.experimental: JAX's experimental names that ember implements.

``io_callback`` is here; the submodules (``shard_map``, ``mesh_utils``, ``multihost_utils``,
``ode``, ``checkify``, ``compilation_cache``) load on first use, as attributes or through
``import ember.experimental.ode``.
"""

from ember.lax.callback import io_callback

__all__ = ["io_callback"]

_LAZY_MODULES = frozenset({"shard_map", "mesh_utils", "multihost_utils", "ode", "checkify",
                           "compilation_cache"})


def __getattr__(name: str):
    if name in _LAZY_MODULES:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
