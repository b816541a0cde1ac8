"""The in-memory compile cache of jitted functions.

Each jitted Python function owns a ``FunctionCache`` per set of jit options, found through a
``WeakKeyDictionary`` keyed on the function object: ``ember.jit(f)`` built afresh in a loop
finds the same cache, while a new lambda or ``functools.partial`` gets a new one (and its
cache goes away with it). A ``FunctionCache`` maps a call signature (argument structure,
every argument's shape/dtype/weak type, the static arguments and the x64 flag) to a
``CacheEntry``: the traced jaxpr and, once the function ran at top level, its executable.

Example:
    >>> cache = function_cache(f, options=())
    >>> cache.lookup(key) is None
    True
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from ember._pytree import treedef_is_leaf

MAX_ENTRIES_PER_FUNCTION = 4096


class CacheEntry:
    """What one signature of a function compiled to.

    ``closed``: the traced closed jaxpr; ``out_tree``: the output pytree structure;
    ``arg_desc``: ``(name, description)`` pairs of the signature (for compile logs);
    ``executable``: the ``LoadedExecutable`` (None until the function ran at top level);
    ``unflatten``: builds the output pytree from the flat output list.
    """

    __slots__ = ("closed", "out_tree", "arg_desc", "executable", "unflatten")

    def __init__(self, closed: Any, out_tree: Any, arg_desc: list[tuple[str, str]]):
        self.closed = closed
        self.out_tree = out_tree
        self.arg_desc = arg_desc
        self.executable = None
        if out_tree.num_leaves == 1 and treedef_is_leaf(out_tree):  # a bare array result
            self.unflatten: Callable = _first
        else:
            self.unflatten = out_tree.unflatten


def _first(outs: list) -> Any:
    return outs[0]


class FunctionCache:
    """Signature → ``CacheEntry`` for one function and one set of jit options."""

    __slots__ = ("entries", "fast", "last", "compiles", "__weakref__")

    def __init__(self) -> None:
        self.entries: dict[Any, CacheEntry] = {}
        # Keys of plain calls (positional Arrays only) → entry: the cached-call fast path.
        self.fast: dict[Any, CacheEntry] = {}
        self.last: CacheEntry | None = None
        self.compiles = 0

    def lookup(self, key: Any) -> CacheEntry | None:
        return self.entries.get(key)

    def insert(self, key: Any, entry: CacheEntry) -> None:
        if len(self.entries) >= MAX_ENTRIES_PER_FUNCTION:
            # Oldest first (dicts keep insertion order); the fast index is rebuilt lazily.
            self.entries.pop(next(iter(self.entries)))
            self.fast.clear()
        self.entries[key] = entry

    def clear(self) -> None:
        self.entries.clear()
        self.fast.clear()
        self.last = None

    def __len__(self) -> int:
        return len(self.entries)


_caches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def function_cache(fun: Callable, options: Any) -> FunctionCache:
    """The cache of ``fun`` under jit ``options`` (a hashable tuple), shared across wrappers.

    Callables that cannot be weakly referenced get a private cache.
    """
    with _lock:
        try:
            per_fun = _caches.get(fun)
        except TypeError:  # not weak-referenceable (or unhashable)
            return FunctionCache()
        if per_fun is None:
            per_fun = {}
            try:
                _caches[fun] = per_fun
            except TypeError:
                return FunctionCache()
        cache = per_fun.get(options)
        if cache is None:
            cache = per_fun[options] = FunctionCache()
        return cache


# Other caches of compiled code (eager loops' executables...) that ``clear_caches`` empties.
_clear_hooks: list[Callable[[], None]] = []


def on_clear(hook: Callable[[], None]) -> None:
    """Makes ``clear_caches`` call ``hook`` too."""
    _clear_hooks.append(hook)


def clear_caches() -> None:
    """Forgets every compiled function (``ember.clear_caches``)."""
    with _lock:
        for per_fun in list(_caches.values()):
            for cache in per_fun.values():
                cache.clear()
    for hook in _clear_hooks:
        hook()
