"""ember.numpy: NumPy's API with JAX's semantics (``import ember.numpy as jnp``)."""

import sys as _sys

from ember.numpy import array_methods as _array_methods
from ember.numpy.creation import *
from ember.numpy.ufuncs import *

_array_methods.install(_sys.modules[__name__])
