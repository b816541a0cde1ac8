"""``vmap``: vectorizing a function over an axis of its arguments (JAX's semantics).

The function runs once on a batch trace (``ember.interpreters.batching``); each primitive's
batching rule maps it over the batch dimension. Re-exported by ``ember.api`` and ``ember``.

Example:
    >>> ember.vmap(jnp.dot)(jnp.ones((3, 2)), jnp.ones((3, 2)))
    Array([2., 2., 2.], dtype=float32)
"""

from __future__ import annotations

import collections
import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from ember import _pytree, core, dtypes
from ember.interpreters import batching
from ember.interpreters.batching import not_mapped

_IN_AXES_TOP = ("vmap in_axes must be an int, None, or a tuple of entries corresponding to the "
                "positional arguments passed to the function, but got {}.")
_AXES_LEAVES = ("vmap {} must be an int, None, or (nested) container with those types as "
                "leaves, but got {}.")


def _is_none(x: Any) -> bool:
    return x is None


def _is_axis(a: Any) -> bool:
    # JAX accepts exactly Python ints (not bools, not NumPy integers) and None.
    return a is None or type(a) is int


def _check_axis_spec(spec: Any, what: str) -> None:
    if not all(_is_axis(a) for a in _pytree.tree_leaves(spec, is_leaf=_is_none)):
        raise TypeError(_AXES_LEAVES.format(what, spec))


# --------------------------------------------------------------------------- leaf names


def _leaf_paths(tree: Any, prefix: str, out: list[str]) -> None:
    """Appends a key path (``[0]``, ``['a']``, ``.field``) for each leaf of ``tree``."""
    if tree is None:
        return
    t = type(tree)
    if t in (tuple, list):
        for i, c in enumerate(tree):
            _leaf_paths(c, f"{prefix}[{i}]", out)
    elif isinstance(tree, tuple) and hasattr(tree, "_fields"):  # namedtuple
        for f, c in zip(tree._fields, tree):
            _leaf_paths(c, f"{prefix}.{f}", out)
    elif t in (dict, collections.OrderedDict, collections.defaultdict):
        for k in _dict_keys(tree):
            _leaf_paths(tree[k], f"{prefix}[{k!r}]", out)
    else:
        n = len(_pytree.tree_leaves(tree))
        if n == 1 and _pytree.treedef_is_leaf(_pytree.tree_structure(tree)):
            out.append(prefix)
        else:
            out.extend(f"{prefix}[{i}]" for i in range(n))


def _dict_keys(d: dict) -> list:
    """Keys in the order tree_util flattens a dict (sorted when sortable)."""
    try:
        return sorted(d)
    except TypeError:
        return list(d)


def _arg_paths(fun: Callable, args: tuple, kwargs: dict) -> list[str]:
    """One name per leaf of ``(args, kwargs)``: ``argument x[0]``, ``args[2]``, ``kwargs['k']``."""
    names: list[str | None] = [None] * len(args)
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        params = []
    for i, p in enumerate(params[:len(args)]):
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names[i] = f"argument {p.name}"
        else:
            break
    out: list[str] = []
    for i, a in enumerate(args):
        _leaf_paths(a, names[i] or f"args[{i}]", out)
    for k in _dict_keys(kwargs):
        _leaf_paths(kwargs[k], f"kwargs[{k!r}]", out)
    return out


# --------------------------------------------------------------------------- in_axes


def _broadcast_prefix(spec: Any, tree: Any, what: str) -> list:
    """One axis per leaf of ``tree``: ``spec`` is a prefix of ``tree`` (None is a leaf)."""
    spec_leaves, spec_tree = _pytree.tree_flatten(spec, is_leaf=_is_none)
    try:
        subtrees = spec_tree.flatten_up_to(tree)
    except ValueError:
        raise ValueError(f"vmap {what} specification must be a tree prefix of the "
                         f"corresponding value; got specification {spec} for value tree "
                         f"{_pytree.tree_structure(tree)}.") from None
    from ember.random.key_array import is_typed_key
    out = []
    for axis, sub in zip(spec_leaves, subtrees):
        if axis is not None and axis < 0:
            # (a key array's data has one more axis, the key's words, last: a negative axis
            # of the keys is one further from the data's end)
            out.extend([axis - 1 if is_typed_key(x) else axis
                        for x in _pytree.tree_leaves(sub, is_leaf=is_typed_key)])
        else:
            out.extend([axis] * len(_pytree.tree_leaves(sub)))
    return out


def _type_str(aval: core.ShapedArray) -> str:
    name = "float0" if aval.dtype == dtypes.float0 else aval.dtype.name
    return f"{name}[{','.join(str(d) for d in aval.shape)}]"


def _mapped_size(leaves: list, axes: list, axis_size: int | None, names: Callable) -> int:
    """The size of the mapped axis; JAX's errors for bad axes and inconsistent sizes."""
    sizes: list[int] = []
    mapped: list[tuple[int, int]] = []  # (size, leaf index)
    for i, (x, a) in enumerate(zip(leaves, axes)):
        if a is None:
            continue
        shape = core.get_aval(x).shape
        if not -len(shape) <= a < len(shape):
            raise ValueError(f"vmap was requested to map its argument along axis {a}, which "
                             f"implies that its rank should be at least {a + 1 if a >= 0 else -a}"
                             f", but is only {len(shape)} (its shape is {shape})")
        sizes.append(shape[a])
        mapped.append((shape[a], i))
    distinct = set(sizes) | ({axis_size} if axis_size is not None else set())
    if len(distinct) <= 1:
        return axis_size if axis_size is not None else sizes[0]
    paths = names()
    lines = [f"  * the `axis_size` argument was {axis_size}"] if axis_size is not None else []
    counts = collections.Counter(sizes)
    first_many = True
    for size, count in sorted(counts.items(), key=lambda kv: -kv[1]):  # stable: first seen
        i = next(i for s, i in mapped if s == size)
        where = (f"axis {axes[i]} of {paths[i]} of type "
                 f"{_type_str(core.get_aval(leaves[i]))}")
        if count == 1:
            lines.append(f"  * one axis had size {size}: {where}")
        else:
            kind = "most" if first_many else "some"
            first_many = False
            lines.append(f"  * {kind} axes ({count} of them) had size {size}, e.g. {where}")
    raise ValueError("vmap got inconsistent sizes for array axes to be mapped:\n"
                     + ";\n".join(lines))


# --------------------------------------------------------------------------- outputs


def _flat_fun(fun: Callable, in_tree: Any, store: dict) -> Callable:
    """``fun`` on the flat leaves of ``(args, kwargs)``; the output tree lands in ``store``."""
    def flat_fun(*leaves):
        args, kwargs = _pytree.tree_unflatten(in_tree, list(leaves))
        out = fun(*args, **kwargs)
        out_flat, store["out_tree"] = _pytree.tree_flatten(out)
        for x in out_flat:
            if not core.valid_jaxtype(x):
                raise TypeError(f"Output from batched function {x!r} with type {type(x)} is "
                                "not a valid JAX type")
        return out_flat
    return flat_fun


def _out_paths(out_tree: Any) -> list[str]:
    out: list[str] = []
    _leaf_paths(_pytree.tree_unflatten(out_tree, [0] * out_tree.num_leaves), "", out)
    return out


def _place_output(x: Any, dim: int | None, out_axis: int | None, size: int,
                  path: Callable[[], str]) -> Any:
    """``x`` (mapped along ``dim``) with its mapped axis at ``out_axis``."""
    if out_axis is None:
        if dim is not not_mapped:
            raise ValueError(f"at vmap out_axes{path()}, got axis spec None but output was "
                             f"batched on axis {dim}")
        return x
    aval = core.get_aval(x)
    ndim = aval.ndim + (1 if dim is not_mapped else 0)
    if not -ndim <= out_axis < ndim:
        raise ValueError(f"axis {out_axis} is out of bounds for array of dimension {ndim}")
    dst = out_axis % ndim
    if aval.dtype == dtypes.float0:  # float0 zeros carry no data: only their shape changes
        shape = list(aval.shape)
        if dim is not_mapped:
            shape.insert(dst, size)
        else:
            shape.insert(dst, shape.pop(dim))
        return np.zeros(shape, dtypes.float0)
    return batching.match_dim(x, dim, dst, size)


# --------------------------------------------------------------------------- vmap


def vmap(fun: Callable, in_axes: Any = 0, out_axes: Any = 0, axis_name: Any = None,
         axis_size: int | None = None, spmd_axis_name: Any = None) -> Callable:
    """Vectorizes ``fun`` over an axis of its arguments.

    Args:
        fun: the function to map; it sees one slice of each mapped argument.
        in_axes: an int, None, or a tuple with one entry per positional argument, each a
            pytree prefix of that argument whose leaves are ints (the axis to map, negative
            counting from the end) or None (not mapped: passed to every call whole).
            Keyword arguments are always mapped along axis 0.
        out_axes: a pytree prefix of the output giving where the mapped axis goes in each
            output leaf (negative counts from the end); None for outputs that do not depend
            on mapped inputs. Outputs that do not depend on mapped inputs are broadcast.
        axis_name: a name for the mapped axis, over which collectives in ``fun``
            (``lax.psum``, ``lax.all_gather``, ``lax.axis_index``, ...) work.
        axis_size: the size of the mapped axis; needed when no argument is mapped.
        spmd_axis_name: accepted for compatibility; has no effect on one device.

    Returns:
        The vectorized function.

    Example:
        >>> ember.vmap(lambda x, y: x * y, in_axes=(0, None))(jnp.arange(3.), 2.)
        Array([0., 2., 4.], dtype=float32)
    """
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if not (in_axes is None or type(in_axes) in (int, tuple)):
        raise TypeError(_IN_AXES_TOP.format(in_axes))
    _check_axis_spec(in_axes, "in_axes")
    _check_axis_spec(out_axes, "out_axes")
    if axis_size is not None:
        axis_size = core.concrete_or_error(axis_size, "vmap axis_size")
        if isinstance(axis_size, bool) or not isinstance(axis_size, (int, np.integer)) \
                or axis_size < 0:
            raise TypeError(f"vmap axis_size must be a non-negative int, got {axis_size!r}")
        axis_size = int(axis_size)

    @functools.wraps(fun, updated=())
    def vmapped(*args: Any, **kwargs: Any) -> Any:
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError("vmap in_axes must be an int, None, or a tuple of entries "
                             "corresponding to the positional arguments passed to the "
                             f"function, but got len(in_axes)={len(in_axes)}, "
                             f"len(args)={len(args)}")
        leaves, in_tree = _pytree.tree_flatten((args, kwargs))
        axes = _broadcast_prefix((in_axes, 0), (args, kwargs), "in_axes")
        for x, a in zip(leaves, axes):
            if a is not None and not core.valid_jaxtype(x):
                raise TypeError(f"Argument {x!r} of type {type(x)} is not a valid JAX type")
        if all(a is None for a in axes):
            if axis_size is None:
                if not leaves:
                    raise ValueError("vmap wrapped function must be passed at least one "
                                     "argument containing an array or axis_size must be "
                                     f"specified, got empty *args={args} and **kwargs={kwargs}")
                raise ValueError("vmap must have at least one non-None value in in_axes or "
                                 "axis_size must be specified")
            size = axis_size
        else:
            size = _mapped_size(leaves, axes, axis_size,
                                lambda: _arg_paths(fun, args, kwargs))
        dims = [None if a is None else a % core.get_aval(x).ndim for x, a in zip(leaves, axes)]
        store: dict[str, Any] = {}
        outs, out_dims = batching.batch_flat(_flat_fun(fun, in_tree, store), leaves, dims,
                                             size, axis_name)
        out_tree = store["out_tree"]
        out_spec = _broadcast_prefix(out_axes, _pytree.tree_unflatten(out_tree, outs),
                                     "out_axes")
        paths: list[list[str]] = []

        def path(i: int) -> Callable[[], str]:
            def get() -> str:
                if not paths:
                    paths.append(_out_paths(out_tree))
                return paths[0][i]
            return get

        placed = [_place_output(o, d, a, size, path(i))
                  for i, (o, d, a) in enumerate(zip(outs, out_dims, out_spec))]
        return _pytree.tree_unflatten(out_tree, placed)

    return vmapped
