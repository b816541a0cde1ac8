"""Array types of higher layers that some ``ember.numpy``/``ember.lax`` functions take
(typed PRNG keys).

A key array (``ember.random.key``) is not an ember Array, so ``jnp`` and ``lax`` functions
refuse it with their usual TypeError. For the functions that only move elements around
(stacking, reshaping, slicing, selecting), JAX accepts key arrays; ember does the same by
catching that TypeError and giving the call to a handler registered by the layer owning the
type (ember.random registers one that applies the function to the key data). The handler is
consulted only on the error path: a call without key arrays costs nothing more.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

# handler(fn, args, kwargs) -> result, or NotImplemented when no argument is of its type.
_HANDLERS: list[Callable[[Callable, tuple, dict], Any]] = []


def register_handler(handler: Callable[[Callable, tuple, dict], Any]) -> None:
    """Adds ``handler(fn, args, kwargs)``, called when a wrapped function refuses its
    arguments with a TypeError; it returns the result, or NotImplemented to pass."""
    _HANDLERS.append(handler)


def accepting_extended(fn: Callable) -> Callable:
    """``fn``, handing calls it refuses with a TypeError to the registered handlers."""
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


def install(module: Any, names: Iterable[str]) -> None:
    """Wraps ``module``'s functions ``names`` with ``accepting_extended``."""
    for name in names:
        setattr(module, name, accepting_extended(getattr(module, name)))
