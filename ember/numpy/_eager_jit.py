"""Large eager calls of composite functions run as one compiled program, as in JAX.

JAX compiles functions such as ``jnp.var``, ``jax.nn.softmax`` and ``jnp.linalg.norm`` with
``jit`` even when they are called eagerly, so each call is one fused program. Eagerly, ember
runs their primitives one by one with NumPy's kernels: several passes over memory and NumPy's
float sums (``x.var()`` of 1M float32 took 0.54 ms so, against 0.19 compiled and 0.19 in JAX;
``jnp.linalg.norm(x)`` 0.38 ms against JAX's 0.08). ``jit_when_large`` gives such a function
JAX's behaviour for calls outside any transformation with an array argument of at least
``MIN_BYTES``: the call is ``jit(fn)`` with the named static arguments, so each such signature
gets the compiled program's results on every call, the first included. Smaller calls (where
a compile would cost more than it saves), calls under a transformation (which trace ``fn``
inline) and calls with an unhashable static argument (a list of axes) run ``fn`` itself.

Example:
    >>> @jit_when_large("axis", "keepdims")
    ... def spread(x, axis=None, keepdims=False):
    ...     return x.max(axis, keepdims=keepdims) - x.min(axis, keepdims=keepdims)
    >>> spread(jnp.ones((512, 512)), axis=0)   # one compiled program
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from ember import core
from ember.core import EvalTrace

# The least bytes of some array argument for a call to be compiled (as ``_compiled``'s).
MIN_BYTES = 1 << 16

_trace_state = core._ctx


def jit_when_large(*static_argnames: str) -> Callable[[Callable], Callable]:
    """A decorator: large eager calls of the function run as ``jit(fn, static_argnames)``."""
    statics = frozenset(static_argnames)

    def decorate(fn: Callable) -> Callable:
        names = list(inspect.signature(fn).parameters)
        static_positions = tuple(i for i, n in enumerate(names) if n in statics)
        jitted: list[Callable] = []

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if type(_trace_state.trace) is not EvalTrace or not _large(args, kwargs) \
                    or not _hashable_statics(args, kwargs, static_positions, statics):
                return fn(*args, **kwargs)
            if not jitted:
                from ember.api import jit
                jitted.append(jit(fn, static_argnames=tuple(static_argnames)))
            return jitted[0](*args, **kwargs)

        wrapper.__wrapped_eager__ = fn
        return wrapper
    return decorate


def compiles(fn: Callable, args: tuple, kwargs: dict) -> bool:
    """Whether an eager call of ``fn`` with these arguments runs compiled (``jit_when_large``):
    the eager fast path (``_fastpath``) then leaves such calls to it."""
    return hasattr(fn, "__wrapped_eager__") and _large(args, kwargs)


def _large(args: tuple, kwargs: dict) -> bool:
    for v in (*args, *kwargs.values()):
        if getattr(v, "nbytes", 0) >= MIN_BYTES:  # (ember's Arrays and NumPy's)
            return True
    return False


def _hashable_statics(args: tuple, kwargs: dict, positions: tuple, names: frozenset) -> bool:
    try:
        for i in positions:
            if i < len(args):
                hash(args[i])
        for k, v in kwargs.items():
            if k in names:
                hash(v)
    except TypeError:
        return False
    return True
