"""Helpers shared by the distribution modules of ``ember.scipy.stats``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import lax
from ember.numpy._util import promote_args_inexact

Array = Any
ArrayLike = Any

__all__ = ["Array", "ArrayLike", "const", "promote_args_inexact"]


def const(argument: Any, like: Any, value: float) -> Any:
    """``value`` in ``like``'s dtype (``like``: ``argument`` after promotion), as the constants
    JAX's distributions compute with (``_const``): a NumPy constant, not weakly typed, so a
    Python float parameter beside an array argument leaves the result strongly typed; a weak
    value where ``argument`` was a Python scalar."""
    if type(argument) in (bool, int, float, complex):
        return lax.convert_element_type(value, like.dtype, weak_type=True)
    return np.array(value, like.dtype)
