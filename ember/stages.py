"""The stages of a jitted computation (``jax.stages``): for ``isinstance`` checks and typing.

``ember.jit(f)`` gives a ``Wrapped``; ``.trace(*args)`` a ``Traced``, ``.lower(*args)`` a
``Lowered``, ``.compile()`` a ``Compiled``. ``ArgInfo`` describes one argument leaf of a
stage (``args_info``); ``CompilerOptions`` is the type of ``jit``'s ``compiler_options``.

Example:
    >>> from ember import stages
    >>> f = ember.jit(jnp.sin)
    >>> isinstance(f, stages.Wrapped), isinstance(f.lower(1.0), stages.Lowered)
    (True, True)
"""

from __future__ import annotations

import abc
from typing import Any

from ember.api import ArgInfo, Compiled, JitFunction, Lowered, Traced

__all__ = ["ArgInfo", "Compiled", "CompilerOptions", "Lowered", "Traced", "Wrapped"]

CompilerOptions = dict[str, str | bool]


class Wrapped(abc.ABC):
    """A function ready to be traced, lowered and compiled: what ``ember.jit`` returns.

    Calling it runs the function; ``trace``, ``lower`` and ``eval_shape`` stage it for the
    given arguments. A plain Python function is not ``Wrapped``.

    Example:
        >>> isinstance(ember.jit(jnp.cos), Wrapped), isinstance(jnp.cos, Wrapped)
        (True, False)
    """

    @abc.abstractmethod
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Runs the wrapped function."""

    @abc.abstractmethod
    def trace(self, *args: Any, **kwargs: Any) -> Traced:
        """Traces the function for these arguments."""

    @abc.abstractmethod
    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        """Traces and lowers the function for these arguments."""


Wrapped.register(JitFunction)
