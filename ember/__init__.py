"""ember: a JAX-compatible array framework (``import ember as jax``)."""

from ember import dtypes, errors, lax, numpy, tree_util
from ember.api import ShapeDtypeStruct, make_jaxpr
from ember.config import config
from ember.runtime import Array, block_until_ready, device_get, device_put, devices

__version__ = "0.1.0"

__all__ = [
    "Array", "ShapeDtypeStruct", "block_until_ready", "config", "device_get", "device_put",
    "devices", "dtypes", "errors", "lax", "make_jaxpr", "numpy", "tree_util",
]
