"""ember.lax: primitives with JAX's names and semantics (no implicit promotion)."""

import sys as _sys

from ember import _extended_types
from ember.lax import linalg  # noqa: F401  (the lax.linalg namespace)
from ember.lax.ad_util import *
from ember.lax.barrier import *
from ember.lax.bits import *
from ember.lax.checks import *
from ember.lax.control_flow.conditionals import *
from ember.lax.control_flow.scan import *
from ember.lax.control_flow.while_loop import *
from ember.lax.conv_shapes import *
from ember.lax.convolution import *
from ember.lax.dot import *
from ember.lax.dot_algorithms import *
from ember.lax.elementwise import *
from ember.lax.fft import *
from ember.lax.internal_prims import *
from ember.lax.linear_solve import *
from ember.lax.local_conv import *
from ember.lax.parallel import *
from ember.lax.prefix_scan import *
from ember.lax.ragged import *
from ember.lax.reduction import *
from ember.lax.rng import *
from ember.lax.shape import *
from ember.lax.sharding import *
from ember.lax.slicing import *
from ember.lax.sorting import *
from ember.lax.special import *
from ember.lax.tokens import *
from ember.lax.variadic_reduce import *
from ember.lax.windowed import *

# The functions that only move elements take typed PRNG key arrays, as in JAX.
_extended_types.install(_sys.modules[__name__], (
    "broadcast", "broadcast_in_dim", "concatenate", "dynamic_index_in_dim", "dynamic_slice",
    "dynamic_slice_in_dim", "dynamic_update_index_in_dim", "dynamic_update_slice",
    "dynamic_update_slice_in_dim", "expand_dims", "index_in_dim", "index_take", "reshape",
    "rev", "select", "select_n", "slice", "slice_in_dim", "squeeze", "transpose"))
