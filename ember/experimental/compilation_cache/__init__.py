"""ember.experimental.compilation_cache: the persistent compilation cache's switches, as
``jax.experimental.compilation_cache`` (see ``compilation_cache``)."""

from ember.experimental.compilation_cache import compilation_cache

__all__ = ["compilation_cache"]
