"""ember.scipy: SciPy's API with JAX's semantics (``import ember.scipy as jsp``)."""

from ember.scipy import linalg as linalg
from ember.scipy import special as special
