"""ember.experimental: JAX's experimental names that ember implements (``io_callback``)."""

from ember.lax.callback import io_callback

__all__ = ["io_callback"]
