"""The ``ember.numpy`` functions that take typed PRNG key arrays, as in JAX (see
``ember._extended_types``: the mechanism, shared with ``ember.lax``)."""

from __future__ import annotations

from typing import Any

from ember import _extended_types

# The functions that take key arrays, as in JAX (they move elements, never combine them; the
# ``*_like`` functions fill every word of the key data with their value, as JAX's do).
FUNCTIONS = (
    "append", "array", "array_split", "asarray", "atleast_1d", "atleast_2d", "atleast_3d",
    "broadcast_arrays", "broadcast_to", "column_stack", "concatenate", "copy", "delete",
    "dsplit", "dstack", "empty_like", "expand_dims", "flip", "fliplr", "flipud", "full_like",
    "hsplit", "hstack", "insert", "matrix_transpose", "moveaxis", "ones_like", "permute_dims",
    "ravel", "repeat", "reshape", "roll", "rot90", "select", "split", "squeeze", "stack",
    "swapaxes", "take", "take_along_axis", "tile", "transpose", "unstack", "vsplit", "vstack",
    "where", "zeros_like",
)


def install(module: Any) -> None:
    """Wraps ``module``'s ``FUNCTIONS`` (the ember.numpy namespace)."""
    _extended_types.install(module, FUNCTIONS)
