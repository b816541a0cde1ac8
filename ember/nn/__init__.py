"""ember.nn: neural-network functions with ``jax.nn``'s names and semantics."""

from ember.nn import initializers  # noqa: F401
from ember.nn.attention import *
from ember.nn.functions import *
from ember.nn.scaled import *
