"""Helpers shared by the distribution modules of ``ember.scipy.stats``."""

from __future__ import annotations

from typing import Any

from ember.numpy._util import promote_args_inexact

Array = Any
ArrayLike = Any

__all__ = ["Array", "ArrayLike", "promote_args_inexact"]
