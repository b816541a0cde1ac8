"""ember.scipy: SciPy's API with JAX's semantics (``import ember.scipy as jsp``).

``linalg`` and ``special`` load with the package; the other namespaces (``stats``,
``signal``, ...) load on first use, as attributes or through ``import ember.scipy.stats``.
"""

import importlib

from ember.scipy import linalg as linalg
from ember.scipy import special as special

_LAZY = frozenset({"cluster", "fft", "integrate", "interpolate", "ndimage", "optimize",
                   "signal", "sparse", "spatial", "stats"})


def __getattr__(name: str):
    if name in _LAZY:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _LAZY)
