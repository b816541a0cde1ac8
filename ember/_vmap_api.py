"""``vmap``: vectorizing a function over an axis of its arguments (JAX's semantics).

The function runs once on a batch trace (``ember.interpreters.batching``); each primitive's
batching rule maps it over the batch dimension. Re-exported by ``ember.api`` and ``ember``.

Example:
    >>> ember.vmap(jnp.dot)(jnp.ones((3, 2)), jnp.ones((3, 2)))
    Array([2., 2., 2.], dtype=float32)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ember import core, tree_util
from ember.interpreters import batching
from ember.interpreters.batching import not_mapped


def _is_none(x: Any) -> bool:
    return x is None


def _check_axis_spec(spec: Any, what: str) -> None:
    for a in tree_util.tree_leaves(spec, is_leaf=_is_none):
        if a is not None and (isinstance(a, bool) or not isinstance(a, (int, np.integer))):
            raise ValueError(f"vmap {what} must be an int, None, or (nested) container with "
                             f"those types as leaves, but got {spec}.")


def _broadcast_prefix(spec: Any, tree: Any, what: str) -> list:
    """One axis per leaf of ``tree``: ``spec`` is a prefix of ``tree`` (None is a leaf)."""
    spec_leaves, spec_tree = tree_util.tree_flatten(spec, is_leaf=_is_none)
    try:
        subtrees = spec_tree.flatten_up_to(tree)
    except ValueError as e:
        raise ValueError(f"vmap {what} specification must be a tree prefix of the "
                         f"corresponding value, got specification {spec} for value tree "
                         f"{tree_util.tree_structure(tree)}.") from e
    out = []
    for axis, sub in zip(spec_leaves, subtrees):
        out.extend([axis] * len(tree_util.tree_leaves(sub)))
    return out


def _mapped_size(leaves: list, axes: list) -> int:
    sizes = []
    for x, a in zip(leaves, axes):
        if a is None:
            continue
        shape = core.get_aval(x).shape
        if not -len(shape) <= a < len(shape):
            raise ValueError(f"vmap was requested to map its argument along axis {a}, which "
                             f"implies that its rank should be at least {a + 1 if a >= 0 else -a}"
                             f", but is only {len(shape)} (its shape is {shape})")
        sizes.append(shape[a])
    if len(set(sizes)) > 1:
        lines = [f"  argument with shape {core.get_aval(x).shape} has size "
                 f"{core.get_aval(x).shape[a]} along axis {a}"
                 for x, a in zip(leaves, axes) if a is not None]
        raise ValueError("vmap got inconsistent sizes for array axes to be mapped:\n"
                         + "\n".join(lines))
    return sizes[0]


def _flat_fun(fun: Callable, in_tree: Any, store: dict) -> Callable:
    """``fun`` on the flat leaves of ``(args, kwargs)``; the output tree lands in ``store``."""
    def flat_fun(*leaves):
        args, kwargs = tree_util.tree_unflatten(in_tree, list(leaves))
        out = fun(*args, **kwargs)
        out_flat, store["out_tree"] = tree_util.tree_flatten(out)
        for x in out_flat:
            if not core.valid_jaxtype(x):
                raise TypeError(f"vmap: output {x!r} of type {type(x).__name__} is not a valid "
                                "JAX type")
        return out_flat
    return flat_fun


def _place_output(x: Any, dim: int | None, out_axis: int | None, size: int) -> Any:
    from ember.lax import batch_util
    if out_axis is None:
        if dim is not not_mapped:
            raise ValueError("vmap has mapped output but out_axes is None")
        return x
    ndim = core.get_aval(x).ndim + (1 if dim is not_mapped else 0)
    if not -ndim <= out_axis < ndim:
        raise ValueError(f"vmap out_axes specification {out_axis} is out of bounds for an "
                         f"output of rank {ndim}")
    return batch_util.move_to(x, dim, out_axis % ndim, size)


def vmap(fun: Callable, in_axes: Any = 0, out_axes: Any = 0, axis_name: Any = None,
         axis_size: int | None = None) -> Callable:
    """Vectorizes ``fun`` over the axes ``in_axes`` of its positional arguments.

    ``in_axes`` is an int, None, or a tuple with one entry per positional argument, each a
    pytree prefix of that argument; None leaves an argument unmapped. ``out_axes`` places the
    mapped axis in the outputs (None: the output must not depend on mapped inputs).
    ``axis_size`` is needed when no argument is mapped. Keyword arguments are mapped along
    axis 0.

    Example:
        >>> ember.vmap(lambda x, y: x * y, in_axes=(0, None))(jnp.arange(3.), 2.)
        Array([0., 2., 4.], dtype=float32)
    """
    if not callable(fun):
        raise TypeError(f"vmap requires a callable as its first argument, got {fun!r}")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if isinstance(in_axes, bool) or not (in_axes is None or
                                         isinstance(in_axes, (int, np.integer, tuple))):
        raise TypeError("vmap in_axes must be an int, None, or a tuple of entries corresponding "
                        f"to the positional arguments passed to the function, but got "
                        f"{in_axes}.")
    _check_axis_spec(in_axes, "in_axes")
    _check_axis_spec(out_axes, "out_axes")

    @functools.wraps(fun, updated=())
    def vmapped(*args: Any, **kwargs: Any) -> Any:
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError("vmap in_axes must be an int, None, or a tuple of entries "
                             "corresponding to the positional arguments passed to the "
                             f"function, but got len(in_axes)={len(in_axes)}, "
                             f"len(args)={len(args)}")
        leaves, in_tree = tree_util.tree_flatten((args, kwargs))
        axes = _broadcast_prefix((in_axes, 0), (args, kwargs), "in_axes")
        for x in leaves:
            if not core.valid_jaxtype(x):
                raise TypeError(f"vmap: argument {x!r} of type {type(x).__name__} is not a "
                                "valid JAX type")
        if all(a is None for a in axes):
            if axis_size is None:
                raise ValueError("vmap must have at least one non-None value in in_axes")
            size = int(axis_size)
        else:
            size = _mapped_size(leaves, axes)
            if axis_size is not None and int(axis_size) != size:
                raise ValueError(f"vmap got axis_size={axis_size} but the mapped arguments "
                                 f"have size {size}")
        dims = [None if a is None else a % core.get_aval(x).ndim for x, a in zip(leaves, axes)]
        store: dict[str, Any] = {}

        outs, out_dims = batching.batch_flat(_flat_fun(fun, in_tree, store), leaves, dims,
                                             size, axis_name)
        out_tree = store["out_tree"]
        out_spec = _broadcast_prefix(out_axes, tree_util.tree_unflatten(out_tree, outs),
                                     "out_axes")
        placed = [_place_output(o, d, a, size) for o, d, a in zip(outs, out_dims, out_spec)]
        return tree_util.tree_unflatten(out_tree, placed)

    return vmapped
