"""ember.nn: neural-network functions with ``jax.nn``'s names and semantics."""

from ember.nn.attention import *
from ember.nn.functions import *
