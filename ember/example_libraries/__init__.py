"""ember.example_libraries: JAX's small example libraries, ``stax`` and ``optimizers``.

Both load on first use, as attributes or through ``from ember.example_libraries import stax``.

Example:
    >>> from ember.example_libraries import stax, optimizers
    >>> init_fun, apply_fun = stax.serial(stax.Dense(4), stax.Relu)
"""

__all__ = ["optimizers", "stax"]

_LAZY_MODULES = frozenset(__all__)


def __getattr__(name: str):
    if name in _LAZY_MODULES:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
