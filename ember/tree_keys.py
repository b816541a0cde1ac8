"""Key paths of pytrees: the keys that lead from a tree's root to a leaf, as in JAX.

A leaf's path is a tuple of keys, one per node on the way: ``SequenceKey(i)`` for a
``tuple``/``list`` element, ``DictKey(k)`` for a dict entry, ``GetAttrKey(name)`` for a
namedtuple field or a dataclass attribute, ``FlattenedIndexKey(i)`` for the i-th child of a
custom node registered without keys. ``keystr`` prints a path. ``tree_util`` uses these for
``tree_flatten_with_path`` and friends.

Example:
    >>> keystr((DictKey('params'), SequenceKey(0), GetAttrKey('w')))
    "['params'][0].w"
"""

from __future__ import annotations

import operator
from typing import Any


class _KeyEntry:
    """Base of the key classes: immutable, hashable, equal only to a key of the same class
    holding an equal value (``SequenceKey(0) != FlattenedIndexKey(0)``), as in JAX, so paths
    can be dictionary keys and compared across trees."""

    __slots__ = ("_value",)
    __match_args__: tuple[str, ...] = ()

    def __init__(self, value: Any):
        object.__setattr__(self, "_value", value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._value == self._value

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._value))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__match_args__[0]}={self._value!r})"

    def __reduce__(self):
        return type(self), (self._value,)


# Each key class names its value as JAX does (``SequenceKey(0).idx``, ``DictKey('a').key``).
_value = property(operator.attrgetter("_value"))


class SequenceKey(_KeyEntry):
    """The key of a ``tuple``/``list`` element: ``str()`` is ``[idx]``.

    Example:
        >>> SequenceKey(0), str(SequenceKey(0))
        (SequenceKey(idx=0), '[0]')
    """

    __slots__ = ()
    __match_args__ = ("idx",)

    def __init__(self, idx: int):
        super().__init__(operator.index(idx))  # (a TypeError for non-integers, as in JAX)

    idx = _value

    def __str__(self) -> str:
        return f"[{self._value!r}]"


class DictKey(_KeyEntry):
    """The key of a dict entry: ``str()`` is ``[key!r]``, e.g. ``['a']``.

    Example:
        >>> str(DictKey('a')), str(DictKey(1))
        ("['a']", '[1]')
    """

    __slots__ = ()
    __match_args__ = ("key",)

    def __init__(self, key: Any):  # (named ``key``, so that ``DictKey(key='a')`` works)
        super().__init__(key)

    key = _value

    def __str__(self) -> str:
        return f"[{self._value!r}]"


class GetAttrKey(_KeyEntry):
    """The key of an attribute (namedtuple fields, dataclass fields): ``str()`` is ``.name``.

    Example:
        >>> str(GetAttrKey('x'))
        '.x'
    """

    __slots__ = ()
    __match_args__ = ("name",)

    def __init__(self, name: str):
        if not isinstance(name, str):
            raise TypeError(f"GetAttrKey: name must be a str, got {type(name).__name__}")
        super().__init__(name)

    name = _value

    def __str__(self) -> str:
        return f".{self._value}"


class FlattenedIndexKey(_KeyEntry):
    """The key of the i-th child of a custom node registered without keys.

    Example:
        >>> str(FlattenedIndexKey(1))
        '[<flat index 1>]'
    """

    __slots__ = ()
    __match_args__ = ("key",)

    def __init__(self, key: int):
        super().__init__(operator.index(key))

    key = _value

    def __str__(self) -> str:
        return f"[<flat index {self._value}>]"


KeyEntry = Any  # (JAX's alias: any hashable object may be a key of a custom node)
KeyPath = tuple[Any, ...]


def keystr(keys: KeyPath, *, simple: bool = False, separator: str = "") -> str:
    """A key path as a string: ``"['a'][0].x"``, or ``"a/0/x"`` with ``simple=True`` and
    ``separator='/'`` (simple strings drop the brackets, quotes and dots, so they are
    shorter but ambiguous: ``0`` may be a list index or a dict key).

    Example:
        >>> path = (DictKey('a'), SequenceKey(0), GetAttrKey('x'))
        >>> keystr(path), keystr(path, simple=True, separator='/')
        ("['a'][0].x", 'a/0/x')
    """
    if simple:
        return separator.join(str(k._value) if isinstance(k, _KeyEntry) else str(k) for k in keys)
    return separator.join(str(k) for k in keys)
