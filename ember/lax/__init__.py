"""ember.lax: primitives with JAX's names and semantics (no implicit promotion)."""

from ember.lax.elementwise import *
from ember.lax.shape import *
