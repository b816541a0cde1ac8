"""Static type annotations for ember code, as ``jax.typing``: ``ArrayLike`` (anything that
converts to an array implicitly: ember arrays, NumPy arrays and scalars, Python numbers) and
``DTypeLike`` (anything that names a dtype: strings, scalar types, dtypes, objects with a
``dtype``).

Example:
    >>> from ember.typing import ArrayLike
    >>> def f(x: ArrayLike) -> ember.Array:
    ...     return jnp.asarray(x) * 2
    >>> isinstance(1.0, ArrayLike)
    True
"""

from __future__ import annotations

from typing import Any, Protocol, Union, runtime_checkable

import numpy as np

from ember.runtime.array import Array


@runtime_checkable
class SupportsDType(Protocol):
    """Objects with a ``dtype`` attribute (``jnp.float32``, arrays)."""

    @property
    def dtype(self) -> np.dtype: ...


ArrayLike = Union[  # noqa: UP007 - a runtime Union, usable with isinstance as in JAX
    Array,
    np.ndarray,
    np.bool_,
    np.number,
    bool,
    int,
    float,
    complex,
]

DTypeLike = Union[  # noqa: UP007
    str,
    type[Any],
    np.dtype,
    SupportsDType,
]

__all__ = ["ArrayLike", "DTypeLike"]
