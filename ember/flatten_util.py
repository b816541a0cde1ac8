"""``ravel_pytree``: a pytree of arrays as one flat vector, and the function that undoes it.

Optimizers and solvers written for vectors (``scipy.optimize``-style code, Newton steps,
Hessians of many parameters) use it to treat a tree of parameters as one array. Written on
``ember.lax`` so that raveling and unraveling are traced like any other code: they work on
tracers under ``jit``, ``grad`` and ``vmap``.

Example:
    >>> import ember.numpy as jnp
    >>> flat, unravel = ravel_pytree({'w': jnp.ones((2, 2)), 'b': jnp.zeros(2)})
    >>> flat
    Array([0., 0., 1., 1., 1., 1.], dtype=float32)
    >>> unravel(flat * 2)['b']
    Array([0., 0.], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ember import core, dtypes, lax
from ember._pytree import PyTreeDef, tree_flatten

__all__ = ["ravel_pytree"]


def ravel_pytree(pytree: Any) -> tuple[Any, Callable[[Any], Any]]:
    """Ravels the leaves of ``pytree`` and concatenates them into one 1-D array.

    The vector's dtype is the promotion (``result_type``) of the leaves' dtypes, so mixed
    leaves are converted to it (an int32 and a float16 leaf give a float32 vector); when
    every leaf has one dtype nothing is converted. A tree without leaves gives an empty
    float32 vector, as in JAX.

    Args:
        pytree: a pytree of arrays and scalars.

    Returns:
        ``(flat, unravel)``: the vector, and a function taking a vector of the same size
        back to a pytree of ``pytree``'s structure, each leaf with its original shape and
        (where the dtypes were mixed) its original dtype.

    Example:
        >>> import ember.numpy as jnp
        >>> flat, unravel = ravel_pytree((jnp.arange(2), jnp.float32(5)))
        >>> flat
        Array([0., 1., 5.], dtype=float32)
        >>> unravel(flat)
        (Array([0, 1], dtype=int32), Array(5., dtype=float32))
    """
    leaves, treedef = tree_flatten(pytree)
    if not leaves:
        return lax.full((0,), 0, np.float32), _Unravel(treedef, (), (), (), None)
    from_dtypes = tuple(dtypes.dtype(x, canonicalize=True) for x in leaves)
    to_dtype = dtypes.result_type(*from_dtypes)
    sizes = tuple(int(np.size(x)) for x in leaves)
    shapes = tuple(tuple(np.shape(x)) for x in leaves)
    if all(dt == to_dtype for dt in from_dtypes):
        # One dtype: no conversion, and an unravel that takes a vector of any dtype (as
        # JAX's does: a float32 tree may be unraveled from, e.g., a float16 vector).
        pieces = [lax.reshape(x, (n,)) for x, n in zip(leaves, sizes)]
        return lax.concatenate(pieces, 0), _Unravel(treedef, sizes, shapes, None, None)
    pieces = [
        lax.reshape(lax.convert_element_type(x, to_dtype), (n,)) for x, n in zip(leaves, sizes)
    ]
    unravel = _Unravel(treedef, sizes, shapes, from_dtypes, to_dtype)
    return lax.concatenate(pieces, 0), unravel


class _Unravel:
    """The ``unravel`` function of :func:`ravel_pytree`.

    A class rather than a closure so that it is hashable and compared by value (structure,
    sizes, shapes and dtypes), as JAX's is: ravelling two trees of one structure gives
    equal functions, and an ``unravel`` can be a static argument of ``jit`` without
    recompiling for every new one.
    """

    __slots__ = ("treedef", "sizes", "shapes", "from_dtypes", "to_dtype")

    def __init__(self, treedef: PyTreeDef, sizes: tuple, shapes: tuple, from_dtypes, to_dtype):
        self.treedef = treedef
        self.sizes = sizes
        self.shapes = shapes
        self.from_dtypes = from_dtypes  # None: one dtype, nothing to convert back
        self.to_dtype = to_dtype

    def _key(self) -> tuple:
        return (self.treedef, self.sizes, self.shapes, self.from_dtypes, self.to_dtype)

    def __eq__(self, other: object) -> bool:
        return type(other) is _Unravel and other._key() == self._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"<unravel to {self.treedef!r}>"

    def __call__(self, flat: Any) -> Any:
        if not self.sizes:  # (no leaves: JAX ignores the argument too)
            return self.treedef.unflatten([])
        if not core.is_array_like(flat):  # (lists included, as in JAX)
            raise TypeError(f"unravel: expected an array, got {type(flat).__name__}")
        total = sum(self.sizes)
        shape = np.shape(flat)
        if shape != (total,):
            raise ValueError(
                f"unravel: expected a vector of shape ({total},) (the size of the raveled "
                f"pytree), got an array of shape {shape}"
            )
        if self.from_dtypes is None:
            chunks = lax.split(flat, self.sizes)
            return self.treedef.unflatten([lax.reshape(c, s) for c, s in zip(chunks, self.shapes)])
        flat_dtype = dtypes.dtype(flat, canonicalize=True)
        if flat_dtype != self.to_dtype:
            raise TypeError(
                f"unravel function given array of dtype {flat_dtype}, but expected dtype "
                f"{self.to_dtype}"
            )
        chunks = lax.split(flat, self.sizes)
        leaves = [
            lax.convert_element_type(lax.reshape(c, s), dt)
            for c, s, dt in zip(chunks, self.shapes, self.from_dtypes)
        ]
        return self.treedef.unflatten(leaves)
