"""ember.experimental.compilation_cache: the persistent compilation cache's switches, as
``jax.experimental.compilation_cache`` (see ``compilation_cache``)."""
