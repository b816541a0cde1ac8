"""Ordering tokens: ``create_token`` and ``after_all`` (XLA's CreateToken/AfterAll).

ember orders side effects by program order, so a token carries no data: it is an empty
boolean array (``bool[0]``), which every transformation, the jit cache and both backends
already handle. ``after_all`` accepts only such tokens, as JAX accepts only its ``Tok``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import core, dtypes
from ember.core import ShapedArray
from ember.interpreters import ad
from ember.interpreters.batching import not_mapped

_TOKEN_AVAL = ShapedArray((0,), dtypes.bool_)


def is_token(x: Any) -> bool:
    """Whether ``x`` (a value or an aval) is a token."""
    aval = x if isinstance(x, ShapedArray) else core.get_aval(x) if core.is_array_like(x) or \
        hasattr(x, "aval") else None
    return aval is not None and aval.shape == (0,) and aval.dtype == dtypes.bool_


def _new_token() -> np.ndarray:
    return np.zeros((0,), np.bool_)


def _lower_token(ctx, *_, **__):
    return ctx.b.constant(_new_token())


create_token_p = core.Primitive("create_token")
create_token_p.def_impl(_new_token)
create_token_p.def_abstract_eval(lambda: _TOKEN_AVAL)
create_token_p.def_lowering(_lower_token)
create_token_p.def_batching(lambda vals, dims: (create_token_p.bind(), not_mapped))


def _after_all_abstract_eval(*avals):
    if not all(is_token(a) for a in avals):
        raise TypeError("Arguments to after_all must be tokens")
    return _TOKEN_AVAL


after_all_p = core.Primitive("after_all")
after_all_p.def_impl(lambda *tokens: _new_token())
after_all_p.def_abstract_eval(_after_all_abstract_eval)
after_all_p.def_lowering(_lower_token)
after_all_p.def_batching(lambda vals, dims: (after_all_p.bind(), not_mapped))
ad.defjvp_zero(create_token_p)
ad.defjvp_zero(after_all_p)


def create_token(_: Any = None) -> Any:
    """A fresh ordering token (its argument, kept for JAX's signature, is ignored).

    Example:
        >>> lax.after_all(lax.create_token(), lax.create_token()).shape
        (0,)
    """
    return create_token_p.bind()


def after_all(*operands: Any) -> Any:
    """A token that depends on every token in ``operands``.

    Raises:
        TypeError: an operand is not a token.

    Example:
        >>> lax.after_all(lax.create_token()).dtype
        dtype('bool')
    """
    for x in operands:
        if not is_token(x):
            raise TypeError("Arguments to after_all must be tokens")
    return after_all_p.bind(*operands)


__all__ = ["after_all", "after_all_p", "create_token", "create_token_p"]
