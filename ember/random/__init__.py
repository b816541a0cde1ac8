"""ember.random: JAX's counter-based PRNG (threefry2x32), bit-compatible with ``jax.random``.

Example:
    >>> key = random.PRNGKey(0)
    >>> key, sub = random.split(key)
    >>> x = random.normal(sub, (3,))
"""

from ember.random.continuous import *  # noqa: F403
from ember.random.discrete import *  # noqa: F403
from ember.random.distributions import *  # noqa: F403
from ember.random.gamma import *  # noqa: F403
from ember.random.keys import *  # noqa: F403
from ember.random.keys import PRNGKey, key_data




