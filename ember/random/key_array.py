"""Typed PRNG keys (``random.key``): arrays of keys with the dtype ``key<fry>``.

JAX represents typed keys as arrays of an *extended dtype*. ember keeps the simplest design
that composes with every transformation: a :class:`PRNGKeyArray` wraps its ``uint32[..., 2]``
key data and is registered as a node over that data in ember's own pytrees
(``ember._pytree``), so ``jit`` (arguments and results), ``vmap``, ``grad`` and
``lax.scan``/``fori_loop``/``cond`` carries see the key data as an ordinary array and rebuild
the key array around their results. The public ``tree_util`` shows a key array as a leaf,
as JAX does. What the user sees
is JAX's: ``shape`` without the trailing 2, ``dtype`` printing as ``key<fry>`` (a subdtype of
``ember.dtypes.prng_key``), indexing, slicing, ``reshape``, ``==`` and JAX's ``repr``.

The ``jnp`` and ``lax`` functions that only move elements (``stack``, ``concatenate``,
``where``, ``take``, ``reshape``, ``lax.select``, ``lax.dynamic_slice``, ...; see
``ember._extended_types``) take key arrays as in JAX, through :func:`on_key_data`; so do
``keys.at[...].set``/``get``, ``take`` and ``swapaxes``.

Differences from JAX (by design): ``lax`` functions that compute (``add``, ``sort``, ...) do
not take key arrays.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ember import _extended_types, _pytree, dtypes
from ember.runtime.array import Array

IMPL_NAME = "threefry2x32"


class PRNGKeyDtype:
    """The dtype of threefry2x32 key arrays, printed ``key<fry>`` (JAX's ``KeyTy``).

    Example:
        >>> random.key(0).dtype
        key<fry>
    """

    type = dtypes.prng_key
    name = "key<fry>"
    kind = "V"
    itemsize = 8  # (two uint32 words per key)
    _impl = IMPL_NAME

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, PRNGKeyDtype)

    def __hash__(self) -> int:
        return hash(PRNGKeyDtype)


KEY_DTYPE = PRNGKeyDtype()


def _is_tracer(x: Any) -> bool:
    from ember import core
    return isinstance(x, core.Tracer)


class PRNGKeyArray:
    """An array of typed PRNG keys (made by ``random.key``, ``split``, ``wrap_key_data``).

    Example:
        >>> keys = random.split(random.key(0), 4)
        >>> keys.shape, keys[1:3].shape, keys.reshape(2, 2).shape
        ((4,), (2,), (2, 2))
    """

    __slots__ = ("_base_array",)
    __array_priority__ = 100

    def __init__(self, data: Any):
        self._base_array = data

    # -- array attributes (without the trailing key-data axis)
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(np.shape(self._base_array)[:-1])

    @property
    def dtype(self) -> PRNGKeyDtype:
        return KEY_DTYPE

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def itemsize(self) -> int:
        return KEY_DTYPE.itemsize

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d key array")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, idx: Any) -> PRNGKeyArray:
        if not isinstance(idx, tuple):
            idx = (idx,)
        # A trailing full slice keeps the key words: with an Ellipsis it still binds last.
        return PRNGKeyArray(self._base_array[(*idx, slice(None))])

    def reshape(self, *shape: Any, order: str = "C") -> PRNGKeyArray:
        if order != "C":
            raise NotImplementedError("reshape of key arrays supports only order='C'")
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        shape = tuple(operator.index(d) for d in shape)
        return PRNGKeyArray(self._base_array.reshape((*shape, 2)))

    def ravel(self) -> PRNGKeyArray:
        return self.reshape(-1)

    flatten = ravel

    def squeeze(self, axis: Any = None) -> PRNGKeyArray:
        from ember import lax
        if axis is None:
            axis = tuple(i for i, d in enumerate(self.shape) if d == 1)
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        return PRNGKeyArray(lax.squeeze(self._base_array, tuple(a % self.ndim for a in axes)))

    def transpose(self, *axes: Any) -> PRNGKeyArray:
        from ember import lax
        if not axes or axes == (None,):
            axes = tuple(reversed(range(self.ndim)))
        elif len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
            axes = tuple(axes[0])
        perm = (*(operator.index(a) % self.ndim for a in axes), self.ndim)
        return PRNGKeyArray(lax.transpose(self._base_array, perm))

    @property
    def T(self) -> PRNGKeyArray:  # noqa: N802 (NumPy's name)
        return self.transpose()

    def swapaxes(self, axis1: int, axis2: int) -> PRNGKeyArray:
        return on_key_data(lambda k: k.swapaxes(axis1, axis2), (self,), {})

    def take(self, indices: Any, axis: int | None = None, **kwargs: Any) -> PRNGKeyArray:
        return on_key_data(lambda k: k.take(indices, axis=axis, **kwargs), (self,), {})

    def copy(self) -> PRNGKeyArray:
        return PRNGKeyArray(self._base_array.copy())

    @property
    def at(self) -> _KeyIndexUpdates:
        """Functional updates, as ``Array.at``: ``keys.at[0].set(key)``."""
        return _KeyIndexUpdates(self)

    def block_until_ready(self) -> PRNGKeyArray:
        return self

    # -- comparisons (keys are equal when their data is)
    def _compare(self, other: Any, op: Any) -> Any:
        from ember import lax
        if not isinstance(other, PRNGKeyArray):
            from ember import dtypes
            name = {"eq": "equal", "ne": "not_equal"}[op]
            raise TypeError(f"{name} does not accept dtypes key<fry>, "
                            f"{dtypes.result_type(other)}.")
        import ember.numpy as jnp
        eq = jnp.all(lax.eq(*jnp.broadcast_arrays(self._base_array, other._base_array)),
                     axis=-1)
        return eq if op == "eq" else lax.bitwise_not(eq)

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return self._compare(other, "eq")

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return self._compare(other, "ne")

    __hash__ = None  # type: ignore[assignment]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError("JAX array with PRNGKey dtype cannot be converted to a NumPy array. "
                        "Use jax.random.key_data(arr) if you wish to extract the underlying "
                        "integer array.")

    def __bool__(self) -> bool:
        raise TypeError("A key array has no truth value; compare key_data instead.")

    def __repr__(self) -> str:
        head = f"Array({self.shape}, dtype={KEY_DTYPE})"
        if _is_tracer(self._base_array):
            return f"{head} overlaying traced data {self._base_array!r}"
        return f"{head} overlaying:\n{np.asarray(self._base_array)}"

    __str__ = __repr__


class _KeyIndexUpdates:
    __slots__ = ("_keys",)

    def __init__(self, keys: PRNGKeyArray):
        self._keys = keys

    def __getitem__(self, idx: Any) -> _KeyIndexRef:
        return _KeyIndexRef(self._keys, idx)


class _KeyIndexRef:
    __slots__ = ("_keys", "_idx")

    def __init__(self, keys: PRNGKeyArray, idx: Any):
        self._keys, self._idx = keys, idx

    def get(self, **kwargs: Any) -> PRNGKeyArray:
        return on_key_data(lambda k: k.at[self._idx].get(**kwargs), (self._keys,), {})

    def set(self, values: Any, **kwargs: Any) -> PRNGKeyArray:
        if not isinstance(values, PRNGKeyArray):
            raise TypeError(f"key_array.at[...].set: expected a key array of values, got "
                            f"{type(values).__name__}")
        return on_key_data(lambda k, v: k.at[self._idx].set(v, **kwargs),
                           (self._keys, values), {})


def on_key_data(fn: Any, args: tuple, kwargs: dict) -> Any:
    """``fn(*args, **kwargs)`` with its key arrays seen as arrays of their shape: ``fn`` runs
    vmapped over the key data's trailing axis of words, and each output becomes a key array
    again. Right for the functions that only move elements (stack, reshape, where, take,
    ...); NotImplemented when no argument holds a key array."""
    leaves, tree = _pytree.tree_flatten((args, kwargs), is_leaf=is_typed_key)
    where = [i for i, x in enumerate(leaves) if isinstance(x, PRNGKeyArray)]
    if not where:
        return NotImplemented
    from ember._vmap_api import vmap

    def on_data(*data: Any) -> Any:
        full = list(leaves)
        for i, d in zip(where, data):
            full[i] = d
        a, kw = _pytree.tree_unflatten(tree, full)
        return fn(*a, **kw)

    out = vmap(on_data, in_axes=-1, out_axes=-1)(*[leaves[i]._base_array for i in where])
    return _pytree.tree_map(PRNGKeyArray, out)


def _has_dtype(x: Any) -> bool:
    return hasattr(x, "dtype") or isinstance(x, (int, float, complex, bool))


def _binop_error(name: str):
    def method(self, other):
        other_dt = KEY_DTYPE if isinstance(other, PRNGKeyArray) else (
            dtypes.dtype(other, canonicalize=True) if _has_dtype(other) else type(other))
        raise TypeError(f"{name} does not accept dtypes key<fry>, {other_dt}.")
    return method


# Arithmetic on keys is an error (JAX: "add does not accept dtypes key<fry>, int32.").
for _dunder, _name in [("add", "add"), ("sub", "sub"), ("mul", "mul"), ("truediv", "div"),
                       ("floordiv", "floor_divide"), ("mod", "rem"), ("pow", "pow"),
                       ("and", "and"), ("or", "or"), ("xor", "xor"), ("lt", "lt"),
                       ("le", "le"), ("gt", "gt"), ("ge", "ge")]:
    setattr(PRNGKeyArray, f"__{_dunder}__", _binop_error(_name))
    if _dunder not in ("lt", "le", "gt", "ge"):
        setattr(PRNGKeyArray, f"__r{_dunder}__", _binop_error(_name))


# An ``ember.Array`` to ``isinstance``, as in JAX.
type(Array).other_array_types.add(PRNGKeyArray)
# A node over its data for ember's transformations; a leaf in the public ``tree_util``.
_pytree.register_internal_node(PRNGKeyArray, lambda k: ((k._base_array,), None),
                               lambda _, children: PRNGKeyArray(children[0]))


def is_typed_key(x: Any) -> bool:
    """Whether ``x`` is a typed key array (``random.key``), not legacy uint32 key data."""
    return isinstance(x, PRNGKeyArray)


_extended_types.register_handler(on_key_data)
