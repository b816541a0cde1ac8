"""ember.lax: primitives with JAX's names and semantics (no implicit promotion)."""

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
