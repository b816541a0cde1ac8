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


def _install_fast_paths() -> None:
    """The samplers most called eagerly get ember.numpy's eager fast path: from a
    signature's second call (key aval, shape, dtype, Python-scalar parameters), the traced
    sampler is replayed with the primitives' kernels, without per-op dispatch (JAX jits its
    samplers for the same reason). A single typed key goes through its data (the same bits);
    key arrays, tracers and array parameters take the ordinary path."""
    import functools

    from ember.numpy._fastpath import fastpath
    from ember.random.key_array import PRNGKeyArray
    from ember.runtime.array import Array

    def typed_too(fast, returns_keys):
        @functools.wraps(fast)
        def sampler(key, *args, **kwargs):
            if type(key) is PRNGKeyArray and type(key._base_array) is Array and not key.shape:
                out = fast(key._base_array, *args, **kwargs)
                return PRNGKeyArray(out) if returns_keys else out
            return fast(key, *args, **kwargs)
        return sampler

    namespace = globals()
    for name in ("bits", "uniform", "normal", "split", "randint", "bernoulli",
                 "truncated_normal", "cauchy", "exponential", "gumbel", "laplace", "logistic",
                 "maxwell", "rademacher"):
        namespace[name] = typed_too(fastpath(namespace[name], 1, statics=True),
                                    returns_keys=name == "split")


_install_fast_paths()
