"""ember.nn: neural-network functions with ``jax.nn``'s names and semantics."""

import sys as _sys

from ember.nn import initializers  # noqa: F401
from ember.nn.attention import *
from ember.nn.functions import *
from ember.nn.scaled import *
from ember.numpy import _fastpath

# Eager calls of the composite functions run as one replayed program per signature (the
# ``jit_when_large`` ones compile large calls themselves, as JAX jits them).
_fastpath.install(_sys.modules[__name__], {1: (
    "celu", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh",
    "leaky_relu", "log_sigmoid", "log_softmax", "logmeanexp", "logsumexp", "mish", "one_hot",
    "selu", "silu", "soft_sign", "softmax", "softplus", "sparse_plus", "sparse_sigmoid",
    "squareplus", "standardize", "swish")})
