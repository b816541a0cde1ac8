"""ember.debug: printing and callbacks that work inside jit, vmap and grad (``jax.debug``).

Both stage a ``debug_callback`` (``ember.lax.callback``): it runs when the program runs, is
never dropped as dead code, sees primal values under differentiation and runs once per batch
element under vmap.

Example:
    >>> @ember.jit
    ... def f(x):
    ...     ember.debug.print("x = {}", x)
    ...     return x * 2
    >>> f(jnp.arange(3.0))
    x = [0. 1. 2.]
    Array([0., 2., 4.], dtype=float32)
"""

from __future__ import annotations

import logging
import string
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from ember.lax.callback import bind_debug_callback, flatten_callback

__all__ = ["callback", "log", "print", "visualize_array_sharding", "visualize_sharding"]

_logger = logging.getLogger("ember.debug")


def callback(callback: Callable[..., None] | None = None, *args: Any, ordered: bool = False,
             partitioned: bool = False, **kwargs: Any) -> Callable[..., None] | None:
    """Calls ``callback(*args, **kwargs)`` when the program runs, with arrays for the traced
    leaves of the arguments (other leaves pass unchanged).

    Also callable as ``callback(ordered=True)(fn, *args)`` (options first, as in JAX).

    Args:
        callback: a Python function; its result is ignored.
        *args: its positional arguments (pytrees).
        ordered: whether calls keep their program order (they always do here).
        partitioned: accepted for compatibility (one device).
        **kwargs: its keyword arguments.

    Example:
        >>> ember.jit(lambda x: ember.debug.callback(print, x.sum()))(jnp.ones(3))
        3.0
    """
    def stage(fn: Callable[..., None], *c_args: Any, **c_kwargs: Any) -> None:
        _stage(fn, c_args, c_kwargs, "debug.callback", ordered, partitioned)

    return _one_or_two_calls(stage, callback, args, kwargs, "debug.callback")


class _UnusedArgumentCheck(string.Formatter):
    """Formats nothing; raises ValueError for arguments the format string does not use."""

    def format_field(self, value: Any, format_spec: str) -> str:
        return ""

    def check_unused_args(self, used_args, args, kwargs) -> None:
        unused = [a for i, a in enumerate(args) if i not in used_args]
        if unused:
            raise ValueError(f"Unused positional arguments to `jax.debug.print`: {unused}")
        unused_kw = [k for k in kwargs if k not in used_args]
        if unused_kw:
            raise ValueError(
                f"Unused keyword arguments to `jax.debug.print`: {unused_kw}. You may be "
                "passing an f-string (i.e, `f\"{x}\"`) into `jax.debug.print` and instead "
                "should pass in a regular string.")


class _Printer:
    """Formats and writes one ``debug.print`` line with the print options of its trace."""

    __slots__ = ("fmt", "printoptions", "has_placeholders", "use_logging")

    def __init__(self, fmt: str, printoptions: tuple, has_placeholders: bool,
                 use_logging: bool = False):
        self.fmt, self.printoptions, self.has_placeholders = fmt, printoptions, has_placeholders
        self.use_logging = use_logging

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        if self.has_placeholders:
            with np.printoptions(**dict(self.printoptions)):
                text = self.fmt.format(*args, **kwargs)
        else:
            text = " ".join((self.fmt, *(str(a) for a in args)))
        if self.use_logging:
            _logger.info(text)
        else:
            sys.stdout.write(text + "\n")

    def __repr__(self) -> str:
        return f"debug_print(fmt={self.fmt!r})"

    def _key(self) -> tuple:
        return (self.fmt, self.printoptions, self.has_placeholders, self.use_logging)

    def __eq__(self, other: Any) -> bool:
        return type(other) is _Printer and other._key() == self._key()

    def __hash__(self) -> int:
        return hash(self._key())


def print(fmt: str | None = None, *args: Any, ordered: bool = False,  # noqa: A001
          partitioned: bool = False, skip_format_check: bool = False,
          _use_logging: bool = False, **kwargs: Any) -> Callable[..., None] | None:
    """Prints ``fmt.format(*args, **kwargs)`` when the program runs (not when it is traced).

    Pass values as arguments, not through an f-string: ``print("x = {x}", x=x)``. NumPy's
    print options at the call apply to the values. Also callable as
    ``print(ordered=True)(fmt, *args)``.

    Args:
        fmt: a ``str.format`` format string; without placeholders the arguments follow it,
            separated by spaces.
        *args: positional values to format (pytrees of arrays, or other objects).
        ordered: whether prints keep their program order (they always do here).
        partitioned: accepted for compatibility (one device).
        skip_format_check: do not check that every argument is used.
        **kwargs: keyword values to format.

    Example:
        >>> ember.vmap(lambda x: ember.debug.print("{}", x))(jnp.arange(2))
        0
        1
    """
    def stage(fmt: str, *c_args: Any, **c_kwargs: Any) -> None:
        if not isinstance(fmt, str):
            raise TypeError(f"debug.print: fmt must be a string, got {type(fmt).__name__}")
        if not skip_format_check:
            _UnusedArgumentCheck().format(fmt, *c_args, **c_kwargs)
        has_placeholders = bool(fmt) and next(iter(string.Formatter().parse(fmt)))[1] is not None
        printer = _Printer(fmt, tuple(np.get_printoptions().items()), has_placeholders,
                           _use_logging)
        _stage(printer, c_args, c_kwargs, "debug.print", ordered, partitioned)

    return _one_or_two_calls(stage, fmt, args, kwargs, "debug.print")


def log(fmt: str | None = None, *args: Any, ordered: bool = False, partitioned: bool = False,
        skip_format_check: bool = False, **kwargs: Any) -> Callable[..., None] | None:
    """``debug.print``, written to the ``ember.debug`` logger at level INFO instead of
    stdout.

    Example:
        >>> logging.basicConfig(level=logging.INFO)
        >>> ember.jit(lambda x: ember.debug.log("x={}", x))(1.0)   # logs "x=1.0"
    """
    return print(fmt, *args, ordered=ordered, partitioned=partitioned,
                 skip_format_check=skip_format_check, _use_logging=True, **kwargs)


def visualize_array_sharding(arr: Any, **kwargs: Any) -> None:
    """Prints how ``arr`` is laid out over the devices: here, whole on the one CPU device.

    Args:
        arr: a concrete array (not a tracer).
        **kwargs: accepted for compatibility (colors, widths, ...).

    Example:
        >>> ember.debug.visualize_array_sharding(jnp.ones((2, 3)))
        ┌───────┐
        │ CPU 0 │
        └───────┘
    """
    from ember.core import Tracer
    if isinstance(arr, Tracer):
        raise ValueError("visualize_array_sharding: the array must be concrete, not a "
                         "tracer; call it outside jit or use debug.inspect_array_sharding")
    if not hasattr(arr, "shape"):
        raise TypeError(f"visualize_array_sharding: expected an array, got {type(arr).__name__}")
    label = " CPU 0 "
    sys.stdout.write(f"┌{'─' * len(label)}┐\n│{label}│\n└{'─' * len(label)}┘\n")


def visualize_sharding(shape: Any, sharding: Any = None, **kwargs: Any) -> None:
    """Prints the device layout of an array of ``shape`` (whole on the one CPU device).

    Example:
        >>> ember.debug.visualize_sharding((4, 4))
        ┌───────┐
        │ CPU 0 │
        └───────┘
    """
    visualize_array_sharding(np.empty(shape, dtype=np.int8))


def _stage(fn: Callable, args: tuple, kwargs: dict, name: str, ordered: bool,
           partitioned: bool) -> None:
    flat, dynamic = flatten_callback(fn, args, kwargs, name)
    bind_debug_callback(dynamic, callback=flat, ordered=bool(ordered),
                        partitioned=bool(partitioned))


def _one_or_two_calls(stage: Callable, first: Any, args: tuple, kwargs: dict,
                      name: str) -> Callable | None:
    """JAX's two forms: ``f(first, *args)`` stages at once; ``f(**options)`` (``first``
    None, nothing else) returns ``stage`` for the second call."""
    if first is not None:
        stage(first, *args, **kwargs)
        return None
    if args or kwargs:
        raise TypeError(f"{name} received unexpected arguments in the two-call form: "
                        f"args={args} kwargs={kwargs}")
    return stage
