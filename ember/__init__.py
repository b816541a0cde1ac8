"""ember: a JAX-compatible array framework (``import ember as jax``)."""

import contextlib as _contextlib

from ember import (
    ad_checkpoint,
    custom_derivatives,
    dtypes,
    errors,
    flatten_util,
    lax,
    numpy,
    test_util,
    tree,
    tree_util,
)
from ember.api import (
    ShapeDtypeStruct,
    checkpoint,
    custom_jvp,
    custom_vjp,
    disable_jit,
    eval_shape,
    grad,
    hessian,
    jacfwd,
    jacrev,
    jit,
    jvp,
    linearize,
    make_jaxpr,
    remat,
    value_and_grad,
    vjp,
    vmap,
)
from ember.config import config
from ember.dtypes import float0
from ember.runtime import Array, block_until_ready, device_get, device_put, devices
from ember.runtime.compile_cache import clear_caches

__version__ = "0.1.0"

jacobian = jacrev  # (``jax.jacobian`` is reverse mode too)


def default_backend() -> str:
    """The platform name of the default backend, as ``jax.default_backend()``: ``"cpu"``
    (ember's native backend and its NumPy interpreter both run on the host CPU).

    Example:
        >>> ember.default_backend()
        'cpu'
    """
    from ember.backends import get_backend

    return get_backend(config.read("jax_default_backend") or None).platform


def named_scope(name: str):
    """A context manager (or function decorator) naming the operations traced inside it,
    as ``jax.named_scope``. JAX puts the name in its HLO metadata for profilers; ember's
    HLO has no such metadata, so the scope only checks its argument, for code written for
    JAX to run unchanged.

    Raises:
        TypeError: if ``name`` is not a string (as in JAX, when called).

    Example:
        >>> with ember.named_scope("layer1"):
        ...     y = x * 2
    """
    if not isinstance(name, str):
        raise TypeError("named_scope name argument must be a string.")
    return _no_op_scope()


@_contextlib.contextmanager
def _no_op_scope():
    yield


__all__ = [
    "Array", "ShapeDtypeStruct", "block_until_ready", "clear_caches", "config", "device_get",
    "device_put", "devices", "disable_jit", "dtypes", "errors", "eval_shape", "jit", "lax",
    "make_jaxpr", "numpy", "tree_util",
    "checkpoint", "custom_jvp", "custom_vjp", "grad", "hessian", "jacfwd", "jacrev", "jvp",
    "linearize", "remat", "value_and_grad", "vjp", "vmap", "ad_checkpoint", "custom_derivatives",
    "test_util", "default_backend", "flatten_util", "float0", "jacobian", "named_scope", "tree",
]

from ember import core as _core  # noqa: E402

_core.seal_builtin_primitives()  # (every primitive of ember exists by now)

# Loads the default backend's compiler now, as ``import jax`` loads XLA (``EMBER_PRELOAD=0``
# defers it to the first compile; see ``ember.backends``).
from ember.backends import preload_default_backend  # noqa: E402
from ember.runtime.dispatch import start_worker  # noqa: E402

preload_default_backend()
start_worker()  # (its thread waits for asynchronous work: see ``start_worker``)
