"""Backends compile an optimized HLO module into an executable.

A backend has a ``name``, a ``platform`` and ``compile(module, dump=None) -> Executable``. An
executable's ``execute(args)`` takes one NumPy array per entry parameter and returns the list
of the entry's outputs (the elements of its root tuple) as NumPy arrays. Backends know nothing
of ``ember.Array``: the runtime (``ember.runtime.dispatch``) wraps them.

Two backends exist: ``cpu`` (the default: native code compiled by LLVM, ``ember.backends.cpu``)
and ``interpreter`` (the NumPy evaluator of HLO, the reference). ``EMBER_BACKEND`` or the
``jax_default_backend`` option picks the default.

``import ember`` preloads the default backend's compiler (``preload_default_backend``), as
``import jax`` loads XLA: a backend registered with a ``preload`` hook imports its modules and
native libraries then, so the first jit pays for compiling only. ``EMBER_PRELOAD=0`` leaves
that to the first compile (a process that only runs cached programs then never loads them).

Example:
    >>> exe = get_backend("interpreter").compile(module)
    >>> outs = exe.execute([np.ones(3, np.float32)])
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

# name -> zero-argument factory; backends are created on first use.
_FACTORIES: dict[str, Callable[[], Any]] = {}
_BACKENDS: dict[str, Any] = {}
_ALIASES: dict[str, str] = {}
_PRELOADS: dict[str, Callable[[], None]] = {}

DEFAULT_BACKEND = "cpu"


def register_backend(name: str, factory: Callable[[], Any],
                     preload: Callable[[], None] | None = None) -> None:
    """Makes ``get_backend(name)`` create its backend with ``factory()``; ``preload()`` (if
    given) loads its compiler when it is the default backend at ``import ember``."""
    _FACTORIES[name] = factory
    _BACKENDS.pop(name, None)
    _ALIASES.pop(name, None)
    if preload is None:
        _PRELOADS.pop(name, None)
    else:
        _PRELOADS[name] = preload


def preload_default_backend() -> None:
    """Runs the default backend's ``preload`` hook unless ``EMBER_PRELOAD=0``.

    An unknown default name is left alone here: the first compile reports it.
    """
    if os.environ.get("EMBER_PRELOAD", "1").strip() == "0":
        return
    from ember.config import config
    try:
        name = canonical_name(config.read("jax_default_backend"))
    except ValueError:
        return
    hook = _PRELOADS.get(name)
    if hook is not None:
        hook()


def backend_names() -> list[str]:
    """Names accepted by ``get_backend`` (aliases included)."""
    return sorted(set(_FACTORIES) | set(_ALIASES))


def canonical_name(name: str | None) -> str:
    """The backend a name stands for (``None`` and ``""`` mean the default backend)."""
    name = _ALIASES.get(name or DEFAULT_BACKEND, name or DEFAULT_BACKEND)
    if name not in _FACTORIES:
        raise ValueError(f"unknown backend {name!r}; known backends: {backend_names()}")
    return name


def get_backend(name: str | None = None) -> Any:
    """The backend called ``name`` (created once).

    Example:
        >>> get_backend("interpreter").name
        'interpreter'
    """
    name = canonical_name(name)
    backend = _BACKENDS.get(name)
    if backend is None:
        backend = _BACKENDS[name] = _FACTORIES[name]()
    return backend


def _interpreter_backend() -> Any:
    from ember.backends.interpreter import InterpreterBackend
    return InterpreterBackend()


register_backend("interpreter", _interpreter_backend)


def _cpu_backend() -> Any:
    from ember.backends.cpu import CpuBackend
    return CpuBackend()


def _cpu_preload() -> None:
    from ember.backends.cpu import preload
    preload()


register_backend("cpu", _cpu_backend, _cpu_preload)
