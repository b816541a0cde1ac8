"""ember.numpy: NumPy's API with JAX's semantics (``import ember.numpy as jnp``)."""

import sys as _sys

from ember.numpy import _extended, _fastpath, linalg
from ember.numpy import array_methods as _array_methods
from ember.numpy import fft as fft  # the jnp.fft namespace
from ember.numpy import ufunc_api as _ufunc_api
from ember.numpy.counting import *
from ember.numpy.creation import *
from ember.numpy.host import *
from ember.numpy.index_functions import *
from ember.numpy.index_tricks import *
from ember.numpy.indexing import *
from ember.numpy.indexing import _getitem, _IndexUpdateHelper  # used by array_methods
from ember.numpy.misc import *
from ember.numpy.padding import *
from ember.numpy.polynomials import *
from ember.numpy.products import *
from ember.numpy.reductions import *
from ember.numpy.scalar_types import *
from ember.numpy.setops import *
from ember.numpy.shape import *
from ember.numpy.sorting import *
from ember.numpy.statistics import *
from ember.numpy.ufunc_api import *
from ember.numpy.ufuncs import *
from ember.numpy.windows import *

__array_api_version__ = "2024.12"  # (the namespace ``x.__array_namespace__()`` returns)

_fastpath.install(_sys.modules[__name__])  # reductions, shapes, products: the eager fast path
_fastpath.install(linalg, {1: ("norm", "vector_norm", "matrix_norm")})
_array_methods.install(_sys.modules[__name__])
_ufunc_api.install(_sys.modules[__name__])
_extended.install(_sys.modules[__name__])  # key arrays in the functions that move elements
