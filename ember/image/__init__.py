"""ember.image: image resampling with JAX's ``jax.image`` interface."""

from ember.image._scale import ResizeMethod as ResizeMethod
from ember.image._scale import resize as resize
from ember.image._scale import scale_and_translate as scale_and_translate

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]
