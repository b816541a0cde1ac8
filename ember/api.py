"""User-facing transformations: make_jaxpr (and, as they land, jit, grad, vmap, ...)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ember import core, tree_util
from ember.interpreters import partial_eval as pe
from ember.jaxpr import ClosedJaxpr


def _abstractify(x: Any) -> core.ShapedArray:
    if isinstance(x, core.ShapedArray):
        return x
    if hasattr(x, "shape") and hasattr(x, "dtype") and not core.is_array_like(x):
        from ember import dtypes
        return core.ShapedArray(x.shape, dtypes.canonicalize_dtype(x.dtype),
                                getattr(x, "weak_type", False))
    return core.get_aval(x)


def _static_argnums_tuple(static_argnums: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(static_argnums, int):
        return (static_argnums,)
    return tuple(static_argnums)


def _arg_names(fun: Callable, args: Sequence[Any], kwargs: dict,
               dyn_positions: Sequence[int]) -> list[str] | None:
    """The Python parameter name of each flat argument leaf (for error messages)."""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return None
    positional = [p.name for p in params
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    varargs = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), None)
    names: list[str] = []
    for i in dyn_positions:
        if i < len(positional):
            name = positional[i]
        elif varargs is not None:
            name = f"{varargs}[{i - len(positional)}]"
        else:
            name = f"args[{i}]"
        names.extend([name] * len(tree_util.tree_leaves(args[i])))
    for key in sorted(kwargs):  # dicts flatten in sorted key order
        names.extend([key] * len(tree_util.tree_leaves(kwargs[key])))
    return names


def make_jaxpr(fun: Callable, static_argnums: int | Sequence[int] = (),
               return_shape: bool = False) -> Callable[..., ClosedJaxpr]:
    """Returns a function that traces ``fun`` on example arguments and gives its jaxpr.

    Example:
        >>> print(ember.make_jaxpr(jnp.sin)(1.0))
        { lambda ; a:f32[]. let b:f32[] = sin a in (b,) }
    """
    static = _static_argnums_tuple(static_argnums)

    @functools.wraps(fun)
    def make(*args, **kwargs):
        dyn_positions = [i for i in range(len(args)) if i not in static]
        dyn_args = [args[i] for i in dyn_positions]
        flat, in_tree = tree_util.tree_flatten((dyn_args, kwargs))
        in_avals = [_abstractify(x) for x in flat]
        out_tree_box = []

        def flat_fun(*flat_tracers):
            dyn, kw = tree_util.tree_unflatten(in_tree, list(flat_tracers))
            full = list(args)
            for i, v in zip(dyn_positions, dyn):
                full[i] = v
            out = fun(*full, **kw)
            out_flat, out_tree = tree_util.tree_flatten(out)
            out_tree_box.append((out_tree, out_flat))
            return out_flat

        names = _arg_names(fun, args, kwargs, dyn_positions)
        closed, out_flat = pe.trace_to_jaxpr(flat_fun, in_avals, names)
        if return_shape:
            out_tree, _ = out_tree_box[0]
            shapes = [ShapeDtypeStruct(a.shape, a.dtype) for a in closed.out_avals]
            return closed, tree_util.tree_unflatten(out_tree, shapes)
        return closed

    return make


class ShapeDtypeStruct:
    """A shape and dtype standing in for an array (for eval_shape and make_jaxpr)."""

    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape: Sequence[int], dtype: Any, weak_type: bool = False):
        import numpy as np
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.weak_type = weak_type

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        import math
        return math.prod(self.shape)

    def __repr__(self) -> str:
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name})"

    def __eq__(self, other) -> bool:
        return isinstance(other, ShapeDtypeStruct) and (self.shape, self.dtype) == (
            other.shape, other.dtype)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype))
