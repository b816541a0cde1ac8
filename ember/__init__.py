"""ember: a JAX-compatible array framework (``import ember as jax``)."""

from ember import dtypes, errors, lax, numpy, tree_util
from ember.api import ShapeDtypeStruct, disable_jit, eval_shape, jit, make_jaxpr
from ember.config import config
from ember.runtime import Array, block_until_ready, device_get, device_put, devices
from ember.runtime.compile_cache import clear_caches

__version__ = "0.1.0"

__all__ = [
    "Array", "ShapeDtypeStruct", "block_until_ready", "clear_caches", "config", "device_get",
    "device_put", "devices", "disable_jit", "dtypes", "errors", "eval_shape", "jit", "lax",
    "make_jaxpr", "numpy", "tree_util",
]
