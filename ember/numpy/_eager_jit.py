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
A random sampler's call is large by its ``shape`` argument too (``jit_when_large(...,
shape="shape")``): ``random.normal(key, (1000, 1000))`` took 31 ms eagerly, 2.1 compiled.
The eager fast path (``_fastpath``) leaves the calls that compile here to this module
(``compiles``).

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


def jit_when_large(*static_argnames: str, shape: str | None = None
                   ) -> Callable[[Callable], Callable]:
    """A decorator: large eager calls of the function run as ``jit(fn, static_argnames)``.

    ``shape`` names a static argument holding the result's shape (a random sampler's), whose
    size also makes a call large; a list there is taken as the tuple it stands for."""
    statics = frozenset(static_argnames)

    def decorate(fn: Callable) -> Callable:
        names = list(inspect.signature(fn).parameters)
        static_positions = tuple(i for i, n in enumerate(names) if n in statics)
        shape_at = names.index(shape) if shape is not None else None
        jitted: list[Callable] = []

        def compiled_call(args: tuple, kwargs: dict) -> tuple | None:
            """``(args, kwargs)`` of the call to compile (a list shape made a tuple), or None
            where the call runs ``fn`` itself."""
            if shape_at is not None:
                args, kwargs = _shape_as_tuple(args, kwargs, shape_at, shape)
            if not (_large(args, kwargs) or _large_shape(args, kwargs, shape_at, shape)) \
                    or not _hashable_statics(args, kwargs, static_positions, statics):
                return None
            return args, kwargs

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            call = None
            if type(_trace_state.trace) is EvalTrace:
                call = compiled_call(args, kwargs)
            if call is None:
                return fn(*args, **kwargs)
            if not jitted:
                from ember.api import jit
                jitted.append(jit(fn, static_argnames=tuple(static_argnames)))
            return jitted[0](*call[0], **call[1])

        wrapper._compiled_call = compiled_call
        return wrapper
    return decorate


def compiles(fn: Callable, args: tuple, kwargs: dict) -> bool:
    """Whether an eager call of ``fn`` with these arguments runs compiled (``jit_when_large``):
    the eager fast path (``_fastpath``) then leaves such calls to it."""
    compiled_call = getattr(fn, "_compiled_call", None)
    return compiled_call is not None and compiled_call(args, kwargs) is not None


def _large(args: tuple, kwargs: dict) -> bool:
    for v in (*args, *kwargs.values()):
        nbytes = getattr(v, "nbytes", 0)  # (ember's Arrays and NumPy's; not a class's)
        if type(nbytes) is int and nbytes >= MIN_BYTES:
            return True
    return False


def _shape_as_tuple(args: tuple, kwargs: dict, at: int, name: str) -> tuple[tuple, dict]:
    if at < len(args) and type(args[at]) is list:
        args = (*args[:at], tuple(args[at]), *args[at + 1:])
    elif type(kwargs.get(name)) is list:
        kwargs = {**kwargs, name: tuple(kwargs[name])}
    return args, kwargs


def _large_shape(args: tuple, kwargs: dict, at: int | None, name: str | None) -> bool:
    if at is None:
        return False
    value = args[at] if at < len(args) else kwargs.get(name)
    if type(value) is not tuple:
        return False
    size = 4
    for d in value:
        if type(d) is not int:
            return False
        size *= d
    return size >= MIN_BYTES


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
