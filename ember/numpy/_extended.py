"""Array types of other layers that some ``ember.numpy`` functions take (typed PRNG keys).

A key array (``ember.random.key``) is not an ember Array, so the ``jnp`` functions refuse it
with their usual TypeError. For the functions that only move elements around (stacking,
reshaping, indexing, selecting), JAX accepts key arrays; ember does the same by catching that
TypeError and giving the call to a handler registered by the layer owning the type (ember.random
registers one that applies the function to the key data). The handler is consulted only on the
error path: a call without key arrays costs nothing more.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

# handler(fn, args, kwargs) -> result, or NotImplemented when no argument is of its type.
_HANDLERS: list[Callable[[Callable, tuple, dict], Any]] = []

# The functions that take key arrays, as in JAX (they move elements, never combine them).
FUNCTIONS = (
    "append", "array", "array_split", "asarray", "atleast_1d", "atleast_2d", "atleast_3d",
    "broadcast_arrays", "broadcast_to", "column_stack", "concatenate", "copy", "delete",
    "dsplit", "dstack", "expand_dims", "flip", "fliplr", "flipud", "hsplit", "hstack",
    "insert", "matrix_transpose", "moveaxis", "permute_dims", "ravel", "repeat", "reshape",
    "roll", "rot90", "select", "split", "squeeze", "stack", "swapaxes", "take",
    "take_along_axis", "tile", "transpose", "unstack", "vsplit", "vstack", "where",
)


def register_handler(handler: Callable[[Callable, tuple, dict], Any]) -> None:
    """Adds ``handler(fn, args, kwargs)``, called when one of ``FUNCTIONS`` refuses its
    arguments with a TypeError; it returns the result, or NotImplemented to pass."""
    _HANDLERS.append(handler)


def _accepting_extended(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TypeError:
            for handler in _HANDLERS:
                result = handler(fn, args, kwargs)
                if result is not NotImplemented:
                    return result
            raise
    return wrapper


def install(module: Any) -> None:
    """Wraps ``module``'s ``FUNCTIONS`` (the ember.numpy namespace)."""
    for name in FUNCTIONS:
        setattr(module, name, _accepting_extended(getattr(module, name)))
