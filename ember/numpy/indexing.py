"""NumPy indexing with JAX semantics: ``x[idx]``, ``x.at[idx].set(v)``, take, nonzero, ...

Static int/slice indices lower to ``slice``/``rev``/``squeeze`` (``dynamic_slice`` when an
index is a scalar tracer); advanced (array) indexing lowers to ``gather`` with clamped indices
(out-of-bounds reads clamp, as in JAX). ``x.at[idx]`` updates lower to the scatter primitives;
negative indices wrap first, out-of-bounds updates are dropped. Boolean masks must be concrete.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import core, dtypes, lax, tree_util
from ember.core import Tracer
from ember.lax.slicing import GatherScatterMode, normalize_index
from ember.numpy import _util


class NonConcreteBooleanIndexError(IndexError):
    """A boolean mask index was a tracer: its number of True entries is not known statically."""

    def __init__(self, tracer: Any):
        aval = getattr(tracer, "aval", None)
        what = aval.str_short() if aval is not None else type(tracer).__name__
        super().__init__(
            f"Array boolean indices must be concrete; got a traced boolean array of type {what}. "
            "A boolean mask selects a data-dependent number of elements, which cannot be "
            "traced. Use jnp.where(mask, x, fill) to keep the shape, or jnp.nonzero(mask, "
            "size=...) / jnp.where(mask, size=...) to get a static number of indices.")
        self.tracer = tracer


def _int_dtype() -> np.dtype:
    return dtypes.default_int_dtype()


def _is_array_index(v: Any) -> bool:
    return isinstance(v, (Tracer, np.ndarray)) or hasattr(v, "aval")


def _index_error_type(i: int, v: Any) -> TypeError:
    dt = getattr(v, "dtype", None)
    if dt is None:
        dt = type(v).__name__
    return TypeError(f"Indexer must have integer or boolean type, got indexer with type {dt} "
                     f"at position {i}, indexer value {v!r}")


# ---------------------------------------------------------------- index parsing

# Entries after parsing: ("int", i) static int; ("dyn", t) scalar int array/tracer;
# ("slice", s); ("none",); ("adv", a) int array (ndim >= 1, NumPy or ember/tracer);
# ("newadv", a) a scalar boolean: a new axis of size 1 indexed by a (length 1 or 0).


def _static_slice_part(v: Any, what: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, Tracer):
        raise IndexError(f"Array slice indices must have static start/stop/step to be used "
                         f"with NumPy indexing syntax. Found a traced slice {what}: use "
                         "lax.dynamic_slice instead.")
    if isinstance(v, (bool, np.bool_)) or not (
            isinstance(v, (int, np.integer)) or (hasattr(v, "dtype") and np.ndim(v) == 0 and
                                                 dtypes.is_integer(v.dtype))):
        raise TypeError(f"slice indices must be integers or None, got {what}={v!r}")
    return int(v)


def _classify(i: int, v: Any) -> tuple:
    if v is None:
        return ("none",)
    if v is Ellipsis:
        return ("ellipsis",)
    if isinstance(v, slice):
        start, stop = _static_slice_part(v.start, "start"), _static_slice_part(v.stop, "stop")
        step = _static_slice_part(v.step, "step")
        if step == 0:
            raise ValueError("slice step cannot be zero")
        return ("slice", slice(start, stop, step))
    if isinstance(v, (bool, np.bool_)):
        return ("newadv", np.ones(1, _int_dtype()) * 0 if v else np.zeros(0, _int_dtype()))
    if isinstance(v, (int, np.integer)):
        return ("int", int(v))
    if isinstance(v, (list, tuple)):
        if any(isinstance(leaf, Tracer) for leaf in tree_util.tree_leaves(v)):
            from ember.numpy.creation import array
            v = array(v)
        else:
            try:
                arr = np.asarray(v)
            except ValueError:
                raise TypeError(f"Indexer at position {i} is a ragged sequence: {v!r}") from None
            if arr.size == 0:
                arr = arr.astype(_int_dtype())
            v = arr
    if _is_array_index(v):
        dt = np.dtype(v.dtype)
        if dt == np.bool_:
            if isinstance(v, Tracer):
                raise NonConcreteBooleanIndexError(v)
            mask = np.asarray(v)
            if mask.ndim == 0:
                return _classify(i, bool(mask))
            return ("mask", mask)
        if not dtypes.is_integer(dt):
            raise _index_error_type(i, v)
        if np.ndim(v) == 0 if not isinstance(v, Tracer) else v.ndim == 0:
            if isinstance(v, Tracer):
                return ("dyn", v)
            return ("int", int(np.asarray(v)))
        return ("adv", v)
    if isinstance(v, (float, complex, np.floating, np.complexfloating)):
        raise _index_error_type(i, v)
    raise TypeError(f"Indexing mode not supported: unsupported indexer at position {i} of type "
                    f"{type(v).__name__}: {v!r}")


def _parse(shape: tuple[int, ...], idx: Any) -> list[tuple]:
    """Entries aligned with the operand's dimensions (Ellipsis expanded, masks -> arrays)."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    entries = [_classify(i, v) for i, v in enumerate(idx)]
    if sum(e[0] == "ellipsis" for e in entries) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(e[1].ndim if e[0] == "mask" else 1 for e in entries
               if e[0] not in ("none", "ellipsis", "newadv"))
    ndim = len(shape)
    if used > ndim:
        raise IndexError(f"Too many indices: {ndim}-dimensional array indexed with {used} "
                         f"regular {'index' if used == 1 else 'indices'}.")
    out: list[tuple] = []
    for e in entries:
        if e[0] == "ellipsis":
            out.extend([("slice", slice(None))] * (ndim - used))
        else:
            out.append(e)
    if not any(e[0] == "ellipsis" for e in entries):
        out.extend([("slice", slice(None))] * (ndim - used))
    # Expand boolean masks into integer arrays (concrete only).
    final, d = [], 0
    for e in out:
        if e[0] == "mask":
            mask = e[1]
            for k in range(mask.ndim):
                if mask.shape[k] != shape[d + k]:
                    raise IndexError(f"boolean index did not match indexed array along axis "
                                     f"{d + k}; size of axis is {shape[d + k]} but size of "
                                     f"corresponding boolean axis is {mask.shape[k]}")
            final.extend(("adv", a.astype(_int_dtype())) for a in np.nonzero(mask))
            d += mask.ndim
        else:
            final.append(e)
            d += e[0] not in ("none", "newadv")
    return final


def _slice_bounds(s: slice, n: int) -> tuple[int, int, int, bool]:
    """(lo, hi, stride, reversed) for lax.slice (+ rev) selecting s from a length-n axis."""
    start, stop, step = s.indices(n)
    m = len(range(start, stop, step))
    if m == 0:
        return 0, 0, 1, False
    if step > 0:
        return start, start + (m - 1) * step + 1, step, False
    return start + (m - 1) * step, start + 1, -step, True


def _static_int(i: int, n: int, axis: int) -> int:
    if n == 0:
        raise IndexError(f"index {i} is out of bounds for axis {axis} with size 0")
    i = i + n if i < 0 else i
    return min(max(i, 0), n - 1)  # out-of-bounds reads clamp, as in JAX


def _apply_slices(x: Any, entries: list[tuple]) -> Any:
    """Applies every static slice entry with lax.slice/rev (dimensions are kept)."""
    shape = core.get_aval(x).shape
    starts, limits, strides, revs, d = [], [], [], [], 0
    for e in entries:
        if e[0] in ("none", "newadv"):
            continue
        n = shape[d]
        lo, hi, st, r = (0, n, 1, False) if e[0] != "slice" else _slice_bounds(e[1], n)
        starts.append(lo)
        limits.append(hi)
        strides.append(st)
        if r:
            revs.append(d)
        d += 1
    if starts != [0] * len(shape) or limits != list(shape) or any(s != 1 for s in strides):
        x = lax.slice(x, starts, limits, strides)
    return lax.slicing.rev_dims(x, revs)


def _basic_index(x: Any, entries: list[tuple]) -> Any:
    shape = core.get_aval(x).shape
    # Static ints become length-1 slices, removed by a squeeze at the end.
    sl, remove, dyn, d = [], [], {}, 0
    for e in entries:
        if e[0] == "int":
            i = _static_int(e[1], shape[d], d)
            sl.append(("slice", slice(i, i + 1)))
            remove.append(d)
        elif e[0] == "dyn":
            if shape[d] == 0:
                raise IndexError(f"index is out of bounds for axis {d} with size 0")
            sl.append(("slice", slice(None)))
            dyn[d] = e[1]
            remove.append(d)
        else:
            sl.append(e)
        d += e[0] != "none"
    y = _apply_slices(x, sl)
    if dyn:
        yshape = core.get_aval(y).shape
        # lax.dynamic_slice wraps negative indices once and clamps, like JAX's x[i].
        starts = [dyn.get(k, 0) for k in range(len(yshape))]
        sizes = [1 if k in dyn else yshape[k] for k in range(len(yshape))]
        y = lax.dynamic_slice(y, starts, sizes)
    y = lax.slicing.squeeze_dims(y, remove)
    new_axes, p = [], 0
    for e in entries:
        if e[0] == "none":
            new_axes.append(p)
            p += 1
        elif e[0] == "slice":
            p += 1
    return lax.slicing.expand_dims_at(y, new_axes)


def _broadcast_index_shape(arrays: Sequence[Any]) -> tuple[int, ...]:
    shapes = [tuple(np.shape(a)) if not _is_array_index(a) else tuple(a.shape) for a in arrays]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise IndexError("shape mismatch: indexing arrays could not be broadcast together with "
                         f"shapes {' '.join(str(s) for s in shapes)}") from None


def _prep_index(a: Any, n: int, shape: tuple[int, ...]) -> Any:
    """Wraps negative indices, casts to the default int type, broadcasts to ``shape``."""
    if isinstance(a, Tracer):
        a = normalize_index(a, n)
        a = lax.convert_element_type(a, _int_dtype())
        return lax.broadcast_to_shape(a, shape)
    v = np.asarray(a).astype(np.int64)
    v = np.clip(np.where(v < 0, v + n, v), -1, n)  # keeps out-of-bounds-ness, fits int32
    return np.broadcast_to(v.astype(_int_dtype()), shape)


def _stack_last(arrays: list[Any], shape: tuple[int, ...]) -> Any:
    """Stacks index arrays of ``shape`` along a new last axis (NumPy if all are concrete)."""
    if not any(isinstance(a, Tracer) for a in arrays):
        return np.stack(arrays, axis=-1) if arrays else np.zeros(shape + (0,), _int_dtype())
    cols = [lax.broadcast_in_dim(a, shape + (1,), tuple(range(len(shape)))) for a in arrays]
    return cols[0] if len(cols) == 1 else lax.concatenate(cols, len(shape))


def _empty_result(x: Any, shape: tuple[int, ...]) -> Any:
    dt = core.get_aval(x).dtype
    return lax.broadcast_in_dim(np.zeros((), dt), shape, ())


def _advanced_index(x: Any, entries: list[tuple], mode: GatherScatterMode,
                    fill_value: Any, unique_indices: bool, indices_are_sorted: bool) -> Any:
    """General indexing by gather: slices are applied first, then arrays index the rest."""
    # Static slices first; None / scalar-bool entries become new size-1 axes.
    y = _apply_slices(x, [e if e[0] in ("slice", "none", "newadv") else ("slice", slice(None))
                          for e in entries])
    yshape = list(core.get_aval(y).shape)
    new_shape, kinds, d = [], [], 0
    for e in entries:
        if e[0] in ("none", "newadv"):
            new_shape.append(1)
            kinds.append(("full",) if e[0] == "none" else ("adv", e[1]))
            continue
        new_shape.append(yshape[d])
        kinds.append(("full",) if e[0] == "slice" else ("adv", e[1]))
        d += 1
    if len(new_shape) != len(yshape):
        y = lax.reshape(y, tuple(new_shape))
    adv = [k for k, kind in enumerate(kinds) if kind[0] == "adv"]
    s_shape = _broadcast_index_shape([kinds[k][1] for k in adv])
    size_s = int(np.prod(s_shape, dtype=np.int64))
    contiguous = adv == list(range(adv[0], adv[0] + len(adv)))
    p0 = adv[0] if contiguous else 0
    rest = [k for k in range(len(kinds)) if k not in adv]
    out_rank = len(s_shape) + len(rest)
    offset_dims = tuple(i for i in range(out_rank) if not p0 <= i < p0 + len(s_shape))
    out_shape = list(new_shape[k] for k in rest)
    out_shape[p0:p0] = s_shape
    if any(new_shape[k] == 0 for k in adv):
        if size_s == 0:
            return _empty_result(x, tuple(out_shape))
        k = next(k for k in adv if new_shape[k] == 0)
        raise IndexError(f"index is out of bounds for axis {k} with size 0")
    cols = [_prep_index(kinds[k][1], new_shape[k], s_shape) for k in adv]
    indices = _stack_last(cols, s_shape)
    dn = lax.GatherDimensionNumbers(offset_dims=offset_dims, collapsed_slice_dims=tuple(adv),
                                    start_index_map=tuple(adv))
    sizes = tuple(1 if k in adv else n for k, n in enumerate(new_shape))
    return lax.gather(y, indices, dn, sizes, mode=mode, fill_value=fill_value,
                      unique_indices=unique_indices, indices_are_sorted=indices_are_sorted)


def _rewriting_take(x: Any, idx: Any, mode: Any = None, fill_value: Any = None,
                    unique_indices: bool = False, indices_are_sorted: bool = False) -> Any:
    x = _util.ensure_array(x)
    shape = core.get_aval(x).shape
    entries = _parse(shape, idx)
    gmode = GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else \
        GatherScatterMode.from_any(mode)
    has_array = any(e[0] in ("adv", "newadv") for e in entries)
    force_gather = gmode == GatherScatterMode.FILL_OR_DROP and any(
        e[0] in ("int", "dyn") for e in entries)
    if not has_array and not force_gather:
        if all(e[0] == "slice" and e[1] == slice(None) for e in entries):
            return x
        return _basic_index(x, entries)
    # With arrays present, ints are advanced indices too (NumPy's rule).
    entries = [("adv", np.asarray(e[1])) if e[0] == "int" else
               ("adv", e[1]) if e[0] == "dyn" else e for e in entries]
    return _advanced_index(x, entries, gmode, fill_value, unique_indices, indices_are_sorted)


def _getitem(x: Any, idx: Any) -> Any:
    """``x[idx]`` with NumPy's basic and advanced indexing and JAX's semantics."""
    return _rewriting_take(x, idx)


# ---------------------------------------------------------------- x.at[idx] updates


def _scatter_indices(x: Any, entries: list[tuple]) -> tuple[Any, tuple[int, ...]]:
    """Per-element operand coordinates (shape O + (ndim,)) of ``x[idx]``, and O."""
    shape = core.get_aval(x).shape
    adv_pos = [k for k, e in enumerate(entries) if e[0] in ("int", "dyn", "adv", "newadv")]
    s_shape = _broadcast_index_shape([e[1] for e in entries if e[0] in ("adv", "newadv")])
    contiguous = adv_pos == list(range(adv_pos[0], adv_pos[0] + len(adv_pos))) \
        if adv_pos else True
    # Output layout: slice/None dims in order, the advanced block at its NumPy position.
    layout, d = [], 0  # items: ("slice", dim, lo, step, m) | ("none",) | ("adv",)
    for k, e in enumerate(entries):
        if e[0] == "none":
            layout.append(("none",))
        elif e[0] == "slice":
            start, stop, step = e[1].indices(shape[d])
            layout.append(("slice", d, start, step, len(range(start, stop, step))))
        elif adv_pos and k == adv_pos[0] and contiguous:
            layout.append(("adv",))
        d += e[0] not in ("none", "newadv")
    if adv_pos and not contiguous:
        layout.insert(0, ("adv",))
    out_shape: list[int] = []
    pos: dict[Any, Any] = {}
    for item in layout:
        if item[0] == "adv":
            pos["adv"] = tuple(range(len(out_shape), len(out_shape) + len(s_shape)))
            out_shape.extend(s_shape)
        elif item[0] == "none":
            out_shape.append(1)
        else:
            pos[item[1]] = len(out_shape)
            out_shape.append(item[4])
    out_shape_t = tuple(out_shape)
    cols, d = [], 0
    for e in entries:
        if e[0] in ("none", "newadv"):
            continue
        n = shape[d]
        if e[0] == "slice":
            _, _, start, step, m = next(it for it in layout if it[0] == "slice" and it[1] == d)
            col = np.arange(m, dtype=np.int64) * step + start
            bshape = [1] * len(out_shape_t)
            bshape[pos[d]] = m
            cols.append(np.broadcast_to(col.reshape(bshape).astype(_int_dtype()), out_shape_t))
        else:
            a = _prep_index(e[1], n, s_shape) if e[0] != "int" else \
                _prep_index(np.asarray(e[1]), n, s_shape)
            if isinstance(a, Tracer):
                cols.append(lax.broadcast_in_dim(a, out_shape_t, pos["adv"]))
            else:
                bshape = [1] * len(out_shape_t)
                for p, sz in zip(pos["adv"], s_shape):
                    bshape[p] = sz
                cols.append(np.broadcast_to(np.reshape(a, bshape), out_shape_t))
        d += 1
    return _stack_last(cols, out_shape_t), out_shape_t


def _prepare_updates(fn: str, x: Any, values: Any, shape: tuple[int, ...]) -> Any:
    if isinstance(values, (list, tuple)):
        from ember.numpy.creation import array
        values = array(values)
    _util.check_arraylike(fn, values)
    xaval = core.get_aval(x)
    vaval = core.get_aval(values)
    vshape = tuple(vaval.shape)
    while len(vshape) > len(shape) and vshape[0] == 1:
        vshape = vshape[1:]
    try:
        np.broadcast_shapes(vshape, shape)
        if len(vshape) > len(shape) or np.broadcast_shapes(vshape, shape) != shape:
            raise ValueError
    except ValueError:
        raise ValueError(f"{fn}: cannot broadcast update values of shape {vaval.shape} to the "
                         f"indexed shape {shape}") from None
    values = lax.convert_element_type(values, xaval.dtype, False)
    if vshape != vaval.shape:
        values = lax.reshape(values, vshape)
    return lax.broadcast_to_shape(values, shape)


def _scatter_update(x: Any, idx: Any, values: Any, scatter_fn, fn: str, mode: Any,
                    indices_are_sorted: bool, unique_indices: bool) -> Any:
    x = _util.ensure_array(x)
    smode = GatherScatterMode.from_any(mode)
    entries = _parse(core.get_aval(x).shape, idx)
    indices, out_shape = _scatter_indices(x, entries)
    updates = _prepare_updates(fn, x, values, out_shape)
    ndim = core.get_aval(x).ndim
    dn = lax.ScatterDimensionNumbers(update_window_dims=(),
                                     inserted_window_dims=tuple(range(ndim)),
                                     scatter_dims_to_operand_dims=tuple(range(ndim)))
    return scatter_fn(x, indices, updates, dn, indices_are_sorted=indices_are_sorted,
                      unique_indices=unique_indices, mode=smode)


class _IndexUpdateRef:
    """``x.at[idx]``: functional updates of the elements ``x[idx]``.

    Example:
        >>> jnp.zeros(3).at[1].set(5.0)
        Array([0., 5., 0.], dtype=float32)
    """

    __slots__ = ("array", "index")

    def __init__(self, array: Any, index: Any):
        self.array, self.index = array, index

    def __repr__(self) -> str:
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def get(self, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: Any = None, fill_value: Any = None) -> Any:
        """``x[idx]`` with an explicit out-of-bounds ``mode`` ('clip', 'fill', ...).

        Example:
            >>> jnp.arange(3).at[5].get(mode="fill", fill_value=-1)
            Array(-1, dtype=int32)
        """
        return _rewriting_take(self.array, self.index, mode, fill_value, unique_indices,
                               indices_are_sorted)

    def _update(self, values, fn, name, indices_are_sorted, unique_indices, mode):
        return _scatter_update(self.array, self.index, values, fn, f"at[...].{name}", mode,
                               indices_are_sorted, unique_indices)

    def set(self, values: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None) -> Any:
        """``x[idx] = values`` (functionally). With repeated indices one write wins (eagerly
        the last one, as in NumPy; unspecified under compilation, as in JAX).

        Example:
            >>> jnp.zeros(3).at[0].set(1.0)
            Array([1., 0., 0.], dtype=float32)
        """
        return self._update(values, lax.scatter, "set", indices_are_sorted, unique_indices,
                            mode)

    def add(self, values: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None) -> Any:
        """``x[idx] += values``; repeated indices accumulate (like ``np.add.at``).

        Example:
            >>> jnp.zeros(2).at[jnp.array([0, 0])].add(1.0)
            Array([2., 0.], dtype=float32)
        """
        return self._update(values, lax.scatter_add, "add", indices_are_sorted,
                            unique_indices, mode)

    def multiply(self, values: Any, *, indices_are_sorted: bool = False,
                 unique_indices: bool = False, mode: Any = None) -> Any:
        """``x[idx] *= values``; repeated indices multiply together.

        Example:
            >>> jnp.ones(2).at[1].multiply(3.0)
            Array([1., 3.], dtype=float32)
        """
        return self._update(values, lax.scatter_mul, "multiply", indices_are_sorted,
                            unique_indices, mode)

    mul = multiply

    def divide(self, values: Any, *, indices_are_sorted: bool = False,
               unique_indices: bool = False, mode: Any = None) -> Any:
        """``x[idx] /= values`` (true division: integer arrays give floats, as in JAX).

        Example:
            >>> jnp.ones(2).at[1].divide(4.0)
            Array([1.  , 0.25], dtype=float32)
        """
        x = _util.ensure_array(self.array)
        ones = lax.broadcast_in_dim(np.ones((), x.dtype), x.shape, ())
        denom = _scatter_update(ones, self.index, values, lax.scatter_mul, "at[...].divide",
                                mode, indices_are_sorted, unique_indices)
        from ember import numpy as jnp
        return jnp.true_divide(x, denom)

    def power(self, values: Any, *, indices_are_sorted: bool = False,
              unique_indices: bool = False, mode: Any = None) -> Any:
        """``x[idx] **= values``.

        Example:
            >>> jnp.full(2, 3.0).at[0].power(2.0)
            Array([9., 3.], dtype=float32)
        """
        from ember import numpy as jnp
        x = _util.ensure_array(self.array)
        ones = lax.broadcast_in_dim(np.ones((), x.dtype), x.shape, ())
        exps = _scatter_update(ones, self.index, values, lax.scatter_mul, "at[...].power",
                               mode, indices_are_sorted, unique_indices)
        return lax.convert_element_type(jnp.power(x, exps), x.dtype, x.weak_type)

    def min(self, values: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None) -> Any:
        """``x[idx] = minimum(x[idx], values)``.

        Example:
            >>> jnp.full(2, 3.0).at[0].min(1.0)
            Array([1., 3.], dtype=float32)
        """
        return self._update(values, lax.scatter_min, "min", indices_are_sorted,
                            unique_indices, mode)

    def max(self, values: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None) -> Any:
        """``x[idx] = maximum(x[idx], values)``.

        Example:
            >>> jnp.zeros(2).at[0].max(1.0)
            Array([1., 0.], dtype=float32)
        """
        return self._update(values, lax.scatter_max, "max", indices_are_sorted,
                            unique_indices, mode)

    def subtract(self, values: Any, *, indices_are_sorted: bool = False,
                 unique_indices: bool = False, mode: Any = None) -> Any:
        """``x[idx] -= values``.

        Example:
            >>> jnp.zeros(2).at[0].subtract(1.0)
            Array([-1.,  0.], dtype=float32)
        """
        x = _util.ensure_array(self.array)
        if isinstance(values, (list, tuple)):
            from ember.numpy.creation import array
            values = array(values)
        _util.check_arraylike("at[...].subtract", values)
        (neg,) = [lax.neg(lax.convert_element_type(values, x.dtype, False))]
        return self._update(neg, lax.scatter_add, "subtract", indices_are_sorted,
                            unique_indices, mode)


class _IndexUpdateHelper:
    """The ``x.at`` property: ``x.at[idx].set(v)``, ``.add(v)``, ``.get()``, ...

    Example:
        >>> jnp.arange(3).at[-1].set(7)
        Array([0, 1, 7], dtype=int32)
    """

    __slots__ = ("array",)

    def __init__(self, array: Any):
        self.array = array

    def __getitem__(self, index: Any) -> _IndexUpdateRef:
        return _IndexUpdateRef(self.array, index)

    def __repr__(self) -> str:
        return f"_IndexUpdateHelper({self.array!r})"


# ---------------------------------------------------------------- take / take_along_axis


def _take_mode(fn: str, mode: Any) -> str:
    mode = "fill" if mode is None else mode
    if mode == "raise":
        raise NotImplementedError(f"{fn}: the 'raise' mode is not supported (indices are not "
                                  "checked at run time); use 'fill', 'clip' or 'wrap'")
    if mode not in ("fill", "clip", "wrap", "promise_in_bounds", "drop"):
        raise ValueError(f"{fn}: invalid mode {mode!r}; expected 'fill', 'clip', 'wrap' or "
                         "'promise_in_bounds'")
    return mode


def _index_array(fn: str, indices: Any) -> Any:
    _util.check_arraylike(fn, indices)
    dt = np.dtype(core.get_aval(indices).dtype)
    if not dtypes.is_integer(dt):
        raise TypeError(f"{fn}: indices must have an integer dtype, got {dt}")
    return indices if isinstance(indices, Tracer) or hasattr(indices, "aval") else \
        np.asarray(indices)


def _wrap_or_normalize(idx: Any, n: int, mode: str, shape: tuple[int, ...]) -> Any:
    if mode == "wrap":
        if isinstance(idx, Tracer):
            idx = lax.convert_element_type(idx, _int_dtype())
            r = lax.rem(idx, max(n, 1))
            r = lax.add(r, lax.mul(lax.convert_element_type(lax.lt(r, 0), r.dtype), max(n, 1)))
            return lax.broadcast_to_shape(r, shape)
        v = np.mod(np.asarray(idx).astype(np.int64), max(n, 1)).astype(_int_dtype())
        return np.broadcast_to(v, shape)
    return _prep_index(idx, n, shape)


def take(a: Any, indices: Any, axis: int | None = None, out: None = None,
         mode: str | None = None, unique_indices: bool = False,
         indices_are_sorted: bool = False, fill_value: Any = None) -> Any:
    """Elements of ``a`` at ``indices`` along ``axis`` (the flattened array when None).

    ``mode`` is 'fill' by default (out-of-bounds give ``fill_value``: NaN for floats), or
    'clip' / 'wrap'. Negative indices count from the end.

    Example:
        >>> jnp.take(jnp.array([4., 5., 6.]), jnp.array([2, 0]))
        Array([6., 4.], dtype=float32)
    """
    if out is not None:
        raise NotImplementedError("take: the 'out' argument is not supported")
    _util.check_arraylike("take", a)
    a = _util.ensure_array(a)
    indices = _index_array("take", indices)
    mode = _take_mode("take", mode)
    if axis is None:
        a = lax.reshape(a, (core.get_aval(a).size,))
        axis = 0
    shape = core.get_aval(a).shape
    axis = _util.canonicalize_axis("take", axis, len(shape))
    ishape = tuple(np.shape(indices)) if not _is_array_index(indices) else tuple(indices.shape)
    n = shape[axis]
    out_shape = shape[:axis] + ishape + shape[axis + 1:]
    if n == 0:
        if int(np.prod(ishape, dtype=np.int64)) == 0 or mode == "fill":
            if int(np.prod(out_shape, dtype=np.int64)) == 0:
                return _empty_result(a, out_shape)
        raise IndexError(f"take: cannot take from axis {axis} of size 0 with non-empty indices")
    idx = _wrap_or_normalize(indices, n, mode, ishape)
    idx = _stack_last([idx], ishape)
    offset = tuple(range(axis)) + tuple(range(axis + len(ishape), len(out_shape)))
    dn = lax.GatherDimensionNumbers(offset_dims=offset, collapsed_slice_dims=(axis,),
                                    start_index_map=(axis,))
    sizes = tuple(1 if d == axis else s for d, s in enumerate(shape))
    gmode = {"fill": "fill", "drop": "fill", "clip": "clip", "wrap": "promise_in_bounds",
             "promise_in_bounds": "promise_in_bounds"}[mode]
    return lax.gather(a, idx, dn, sizes, mode=gmode, fill_value=fill_value,
                      unique_indices=unique_indices, indices_are_sorted=indices_are_sorted)


def take_along_axis(arr: Any, indices: Any, axis: int | None, mode: str | None = None,
                    fill_value: Any = None) -> Any:
    """Picks ``arr`` values at ``indices`` along ``axis``; other axes broadcast.

    Example:
        >>> jnp.take_along_axis(jnp.array([[3, 1], [0, 2]]), jnp.array([[1], [0]]), axis=1)
        Array([[1],
               [0]], dtype=int32)
    """
    _util.check_arraylike("take_along_axis", arr)
    arr = _util.ensure_array(arr)
    indices = _index_array("take_along_axis", indices)
    mode = _take_mode("take_along_axis", mode)
    if axis is None:
        arr = lax.reshape(arr, (core.get_aval(arr).size,))
        if np.ndim(indices) != 1 if not _is_array_index(indices) else indices.ndim != 1:
            indices = lax.reshape(indices, (int(np.prod(indices.shape)),)) \
                if _is_array_index(indices) and not isinstance(indices, np.ndarray) \
                else np.ravel(indices)
        axis = 0
    shape = core.get_aval(arr).shape
    ishape = tuple(indices.shape)
    if len(ishape) != len(shape):
        raise ValueError(f"take_along_axis: indices and arr must have the same number of "
                         f"dimensions, got {len(ishape)} and {len(shape)}")
    axis = _util.canonicalize_axis("take_along_axis", axis, len(shape))
    try:
        bshape = np.broadcast_shapes(tuple(1 if d == axis else s for d, s in enumerate(shape)),
                                     tuple(1 if d == axis else s for d, s in enumerate(ishape)))
    except ValueError:
        raise ValueError(f"take_along_axis: arr shape {shape} and indices shape {ishape} are "
                         "not broadcast-compatible outside the axis") from None
    out_shape = tuple(ishape[axis] if d == axis else s for d, s in enumerate(bshape))
    n = shape[axis]
    if int(np.prod(out_shape, dtype=np.int64)) == 0:
        return _empty_result(arr, out_shape)
    if n == 0:
        raise IndexError("take_along_axis: cannot take from an axis of size 0")
    if isinstance(indices, Tracer):
        indices = lax.broadcast_to_shape(indices, out_shape) if tuple(ishape) != out_shape \
            else indices
    else:
        indices = np.broadcast_to(np.asarray(indices), out_shape)
    cols = []
    for d, s in enumerate(shape):
        if d == axis:
            cols.append(_wrap_or_normalize(indices, n, mode, out_shape))
        else:
            v = np.arange(out_shape[d]) if s != 1 else np.zeros(out_shape[d], np.int64)
            bs = [1] * len(out_shape)
            bs[d] = out_shape[d]
            cols.append(np.broadcast_to(v.reshape(bs).astype(_int_dtype()), out_shape))
    idx = _stack_last(cols, out_shape)
    dn = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=tuple(range(len(shape))),
                                    start_index_map=tuple(range(len(shape))))
    gmode = {"fill": "fill", "drop": "fill", "clip": "clip", "wrap": "promise_in_bounds",
             "promise_in_bounds": "promise_in_bounds"}[mode]
    return lax.gather(arr, idx, dn, (1,) * len(shape), mode=gmode, fill_value=fill_value)


# ---------------------------------------------------------------- nonzero and friends


def _concrete_value(fn: str, a: Any) -> np.ndarray:
    a = core.concrete_or_error(
        a, f"{fn}: the size of the result depends on the values of the argument; pass a static "
           "size= to use it under jit/tracing")
    return np.asarray(a)


def _fill_tuple(fn: str, fill_value: Any, n: int) -> list[Any]:
    if fill_value is None:
        return [0] * n
    if isinstance(fill_value, (tuple, list)):
        if len(fill_value) != n:
            raise ValueError(f"{fn}: fill_value must be a scalar or a tuple of length {n}, got "
                             f"{fill_value!r}")
        return list(fill_value)
    return [fill_value] * n


def nonzero(a: Any, *, size: int | None = None,
            fill_value: Any = None) -> tuple[Any, ...]:
    """Indices of the non-zero elements, one array per dimension.

    Without ``size`` the argument must be concrete; with ``size`` the result has that
    length (padded with ``fill_value``, default 0, or truncated) and works under tracing.

    Example:
        >>> jnp.nonzero(jnp.array([0, 3, 0, 5]))
        (Array([1, 3], dtype=int32),)
    """
    _util.check_arraylike("nonzero", a)
    aval = core.get_aval(a)
    if aval.ndim == 0:
        raise ValueError("nonzero: calling nonzero on 0d arrays is not allowed; use "
                         "jnp.atleast_1d(a).nonzero() instead")
    from ember.numpy.creation import array
    if size is None:
        if fill_value is not None:
            raise ValueError("nonzero: fill_value requires size to be set")
        v = _concrete_value("nonzero", a)
        return tuple(array(i.astype(_int_dtype())) for i in np.nonzero(v))
    size = int(core.concrete_or_error(size, "nonzero: size must be a static integer"))
    if size < 0:
        raise ValueError(f"nonzero: size must be non-negative, got {size}")
    fills = _fill_tuple("nonzero", fill_value, aval.ndim)
    if not isinstance(a, Tracer):
        v = np.asarray(a)
        res = []
        for i, f in zip(np.nonzero(v), fills):
            i = i[:size]
            pad = np.full(size - len(i), f, _int_dtype())
            res.append(array(np.concatenate([i.astype(_int_dtype()), pad])))
        return tuple(res)
    return _traced_nonzero(a, aval, size, fills)


def _traced_nonzero(a: Any, aval: core.ShapedArray, size: int, fills: list[Any]):
    from ember import numpy as jnp
    n = aval.size
    flat = lax.reshape(a, (n,))
    mask = lax.ne(flat, np.zeros((), aval.dtype)) if aval.dtype != np.bool_ else flat
    pos = jnp.cumsum(lax.convert_element_type(mask, _int_dtype())) - 1
    # Selected elements go to their rank; the rest to `size` (out of bounds: dropped).
    target = lax.select_n(mask, lax.broadcast_in_dim(np.asarray(size, _int_dtype()), (n,), ()),
                          lax.convert_element_type(pos, _int_dtype()))
    coords = np.unravel_index(np.arange(n), aval.shape)
    dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    out = []
    for c, f in zip(coords, fills):
        f = core.concrete_or_error(f, "nonzero: fill_value must be concrete")
        init = np.full((size,), f, _int_dtype())
        out.append(lax.scatter(init, lax.reshape(target, (n, 1)), c.astype(_int_dtype()), dn,
                               unique_indices=True, mode="drop"))
    return tuple(out)


def flatnonzero(a: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """Indices of the non-zero elements of the flattened array.

    Example:
        >>> jnp.flatnonzero(jnp.array([[0, 1], [2, 0]]))
        Array([1, 2], dtype=int32)
    """
    _util.check_arraylike("flatnonzero", a)
    a = _util.ensure_array(a)
    return nonzero(lax.reshape(a, (core.get_aval(a).size,)), size=size,
                   fill_value=fill_value)[0]


def argwhere(a: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """Indices of the non-zero elements as an ``(N, a.ndim)`` array.

    Example:
        >>> jnp.argwhere(jnp.array([[0, 1], [2, 0]]))
        Array([[0, 1],
               [1, 0]], dtype=int32)
    """
    _util.check_arraylike("argwhere", a)
    aval = core.get_aval(a)
    if aval.ndim == 0:
        from ember.numpy.creation import array
        v = bool(_concrete_value("argwhere", a)) if size is None else None
        rows = (1 if v else 0) if size is None else size
        return array(np.zeros((rows, 0), _int_dtype()))
    cols = nonzero(a, size=size, fill_value=fill_value)
    n = core.get_aval(cols[0]).shape[0]
    return _util.ensure_array(_stack_last(list(cols), (n,)))


def compress(condition: Any, a: Any, axis: int | None = None, *, size: int | None = None,
             fill_value: Any = 0, out: None = None) -> Any:
    """Slices of ``a`` along ``axis`` where the 1-d ``condition`` is true (concrete).

    Example:
        >>> jnp.compress(jnp.array([True, False, True]), jnp.array([1, 2, 3]))
        Array([1, 3], dtype=int32)
    """
    if out is not None:
        raise NotImplementedError("compress: the 'out' argument is not supported")
    _util.check_arraylike("compress", condition, a)
    cond = _concrete_value("compress", condition)
    if cond.ndim != 1:
        raise ValueError(f"compress: condition must be a 1-d array, got shape {cond.shape}")
    a = _util.ensure_array(a)
    if axis is None:
        a = lax.reshape(a, (core.get_aval(a).size,))
        axis = 0
    shape = core.get_aval(a).shape
    axis = _util.canonicalize_axis("compress", axis, len(shape))
    idx = np.nonzero(cond)[0]
    if len(idx) and idx[-1] >= shape[axis]:
        raise ValueError(f"compress: condition has true entries beyond the length "
                         f"{shape[axis]} of axis {axis}")
    if size is not None:
        idx = idx[:size]
        pad = size - len(idx)
    else:
        pad = 0
    res = take(a, idx.astype(_int_dtype()), axis=axis, mode="clip")
    if pad:
        fshape = list(core.get_aval(res).shape)
        fshape[axis] = pad
        filler = lax.broadcast_in_dim(np.asarray(fill_value, core.get_aval(a).dtype),
                                      tuple(fshape), ())
        res = lax.concatenate([res, filler], axis)
    return res


def extract(condition: Any, arr: Any, *, size: int | None = None, fill_value: Any = 0) -> Any:
    """Elements of ``arr`` where ``condition`` is true (both flattened; concrete).

    Example:
        >>> jnp.extract(jnp.array([0, 1, 1]), jnp.array([4, 5, 6]))
        Array([5, 6], dtype=int32)
    """
    _util.check_arraylike("extract", condition, arr)
    cond = _concrete_value("extract", condition).ravel() != 0
    arr = _util.ensure_array(arr)
    return compress(cond, lax.reshape(arr, (core.get_aval(arr).size,)), size=size,
                    fill_value=fill_value)


def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Any:
    """``choicelist[i]`` where ``condlist[i]`` is the first true condition, else ``default``.

    Example:
        >>> x = jnp.arange(4)
        >>> jnp.select([x < 1, x > 2], [x, -x], 9)
        Array([ 0,  9,  9, -3], dtype=int32)
    """
    if not isinstance(condlist, (list, tuple)) or not isinstance(choicelist, (list, tuple)):
        raise TypeError("select: condlist and choicelist must be lists or tuples of arrays")
    if len(condlist) != len(choicelist):
        raise ValueError(f"select: condlist and choicelist must have the same length, got "
                         f"{len(condlist)} and {len(choicelist)}")
    if not condlist:
        raise ValueError("select: condlist must not be empty")
    _util.check_arraylike("select", *condlist, *choicelist, default)
    for i, c in enumerate(condlist):
        if core.get_aval(c).dtype != np.bool_:
            raise TypeError(f"select: condlist entry {i} must be a boolean array, got dtype "
                            f"{core.get_aval(c).dtype}")
    *choices, default = _util.promote_dtypes(*choicelist, default)
    args = _util.promote_shapes("select", *condlist, *choices, default)
    shape = _util.broadcast_shapes(*(core.get_aval(x).shape for x in args))
    args = [lax.broadcast_to_shape(_util.ensure_array(x), shape) for x in args]
    conds, choices, result = args[:len(condlist)], args[len(condlist):-1], args[-1]
    for c, v in zip(reversed(conds), reversed(choices)):
        result = lax.select_n(c, result, v)
    return result


def choose(a: Any, choices: Sequence[Any], out: None = None, mode: str = "raise") -> Any:
    """``choices[a[i]][i]`` elementwise; ``mode`` 'clip' or 'wrap' ('raise' needs concrete a).

    Example:
        >>> jnp.choose(jnp.array([0, 1]), [jnp.array([1, 2]), jnp.array([3, 4])])
        Array([1, 4], dtype=int32)
    """
    if out is not None:
        raise NotImplementedError("choose: the 'out' argument is not supported")
    _util.check_arraylike("choose", a, *choices)
    n = len(choices)
    if mode == "raise":
        v = _concrete_value("choose", a)
        if v.size and (v.min() < 0 or v.max() >= n):
            raise ValueError("choose: invalid entry in choice array")
        mode = "clip"
    if mode not in ("clip", "wrap"):
        raise ValueError(f"choose: invalid mode {mode!r}; expected 'raise', 'clip' or 'wrap'")
    ch = _util.promote_dtypes(*choices)
    args = _util.promote_shapes("choose", _util.ensure_array(a), *ch)
    shape = _util.broadcast_shapes(*(core.get_aval(x).shape for x in args))
    a, *ch = [lax.broadcast_to_shape(_util.ensure_array(x), shape) for x in args]
    stacked = lax.concatenate([lax.broadcast_in_dim(c, (1,) + shape,
                                                    tuple(range(1, len(shape) + 1)))
                               for c in ch], 0)
    idx = lax.reshape(_util.ensure_array(a), (1,) + shape)
    return take_along_axis(stacked, idx, axis=0, mode=mode)[0]


# ---------------------------------------------------------------- index construction


def _concrete_ints(fn: str, arg: str, v: Any) -> int:
    v = core.concrete_or_error(v, f"{fn}: {arg} must be a static integer")
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{fn}: {arg} must be an integer, got {v!r}")
    return int(v)


def _arrays(*xs: np.ndarray) -> tuple[Any, ...]:
    from ember.numpy.creation import array
    return tuple(array(np.asarray(x).astype(_int_dtype())) for x in xs)


def diag_indices(n: int, ndim: int = 2) -> tuple[Any, ...]:
    """Indices of the main diagonal of an ``n``-sized ``ndim``-dimensional array.

    Example:
        >>> jnp.diag_indices(2)
        (Array([0, 1], dtype=int32), Array([0, 1], dtype=int32))
    """
    n = _concrete_ints("diag_indices", "n", n)
    ndim = _concrete_ints("diag_indices", "ndim", ndim)
    if n < 0 or ndim < 0:
        raise ValueError(f"diag_indices: n and ndim must be non-negative, got {n}, {ndim}")
    return _arrays(*np.diag_indices(n, ndim))


def diag_indices_from(arr: Any) -> tuple[Any, ...]:
    """Main-diagonal indices of a square array.

    Example:
        >>> jnp.diag_indices_from(jnp.zeros((2, 2)))[0]
        Array([0, 1], dtype=int32)
    """
    _util.check_arraylike("diag_indices_from", arr)
    shape = core.get_aval(arr).shape
    if len(shape) < 2:
        raise ValueError("diag_indices_from: input array must be at least 2-d")
    if len(set(shape)) != 1:
        raise ValueError(f"diag_indices_from: all dimensions of the input must be of equal "
                         f"length, got shape {shape}")
    return diag_indices(shape[0], len(shape))


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Any, Any]:
    """Row and column indices of the lower triangle of an ``(n, m)`` array.

    Example:
        >>> jnp.tril_indices(2)
        (Array([0, 1, 1], dtype=int32), Array([0, 0, 1], dtype=int32))
    """
    n = _concrete_ints("tril_indices", "n", n)
    k = _concrete_ints("tril_indices", "k", k)
    m = n if m is None else _concrete_ints("tril_indices", "m", m)
    if n < 0 or m < 0:
        raise ValueError(f"tril_indices: n and m must be non-negative, got {n}, {m}")
    return _arrays(*np.tril_indices(n, k, m))


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Any, Any]:
    """Row and column indices of the upper triangle of an ``(n, m)`` array.

    Example:
        >>> jnp.triu_indices(2)
        (Array([0, 0, 1], dtype=int32), Array([0, 1, 1], dtype=int32))
    """
    n = _concrete_ints("triu_indices", "n", n)
    k = _concrete_ints("triu_indices", "k", k)
    m = n if m is None else _concrete_ints("triu_indices", "m", m)
    if n < 0 or m < 0:
        raise ValueError(f"triu_indices: n and m must be non-negative, got {n}, {m}")
    return _arrays(*np.triu_indices(n, k, m))


def _from_2d(fn: str, arr: Any) -> tuple[int, int]:
    _util.check_arraylike(fn, arr)
    shape = core.get_aval(arr).shape
    if len(shape) != 2:
        raise ValueError(f"{fn}: input array must be 2-d, got shape {shape}")
    return shape


def tril_indices_from(arr: Any, k: int = 0) -> tuple[Any, Any]:
    """``tril_indices`` for the shape of the 2-d ``arr``.

    Example:
        >>> jnp.tril_indices_from(jnp.zeros((2, 2)))[1]
        Array([0, 0, 1], dtype=int32)
    """
    n, m = _from_2d("tril_indices_from", arr)
    return tril_indices(n, k, m)


def triu_indices_from(arr: Any, k: int = 0) -> tuple[Any, Any]:
    """``triu_indices`` for the shape of the 2-d ``arr``.

    Example:
        >>> jnp.triu_indices_from(jnp.zeros((2, 2)))[1]
        Array([0, 1, 1], dtype=int32)
    """
    n, m = _from_2d("triu_indices_from", arr)
    return triu_indices(n, k, m)


def _shape_tuple(fn: str, shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        dims = tuple(_concrete_ints(fn, "shape", d) for d in shape)
    except TypeError as e:
        if "Abstract tracer" in str(e):
            raise
        raise TypeError(f"{fn}: shape must be a sequence of integers, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise ValueError(f"{fn}: dimensions must be non-negative, got {dims}")
    return dims


def unravel_index(indices: Any, shape: Sequence[int]) -> tuple[Any, ...]:
    """Converts flat indices into coordinate arrays for ``shape``.

    Negative indices count from the end; out-of-bounds indices are clamped (JAX).

    Example:
        >>> jnp.unravel_index(jnp.array([5, 1]), (2, 3))
        (Array([1, 0], dtype=int32), Array([2, 1], dtype=int32))
    """
    _util.check_arraylike("unravel_index", indices)
    shape = _shape_tuple("unravel_index", shape)
    dt = core.get_aval(indices).dtype
    if not dtypes.is_integer(dt):
        raise TypeError(f"unravel_index: indices must have an integer dtype, got {dt}")
    total = int(np.prod(shape, dtype=np.int64))
    idx = _util.ensure_array(indices)
    if not isinstance(idx, Tracer):
        v = np.asarray(idx).astype(np.int64)
        v = np.clip(np.where(v < 0, v + total, v), 0, max(total - 1, 0))
        return _arrays(*np.unravel_index(v, shape)) if total else _arrays(
            *[np.zeros_like(v)] * len(shape))
    idx = lax.convert_element_type(idx, _int_dtype())
    idx = normalize_index(idx, total)
    idx = lax.max(lax.min(idx, max(total - 1, 0)), 0)
    out, stride = [], total
    for d in shape:
        stride = stride // d if d else 0
        q = lax.div(idx, max(stride, 1))
        out.append(lax.rem(q, max(d, 1)))
    return tuple(out)


def ravel_multi_index(multi_index: Sequence[Any], dims: Sequence[int], mode: str = "raise",
                      order: str = "C") -> Any:
    """Flat indices of the coordinate arrays ``multi_index`` in an array of shape ``dims``.

    ``mode`` is 'raise' (concrete indices only), 'clip' or 'wrap'.

    Example:
        >>> jnp.ravel_multi_index((jnp.array([1, 0]), jnp.array([2, 1])), (2, 3))
        Array([5, 1], dtype=int32)
    """
    dims = _shape_tuple("ravel_multi_index", dims)
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: got {len(multi_index)} index arrays for "
                         f"{len(dims)} dimensions")
    if order not in ("C", "F"):
        raise ValueError(f"ravel_multi_index: order must be 'C' or 'F', got {order!r}")
    if mode not in ("raise", "clip", "wrap"):
        raise ValueError(f"ravel_multi_index: invalid mode {mode!r}")
    _util.check_arraylike("ravel_multi_index", *multi_index)
    for i in multi_index:
        if not dtypes.is_integer(core.get_aval(i).dtype):
            raise TypeError("ravel_multi_index: only integer indices are supported, got "
                            f"dtype {core.get_aval(i).dtype}")
    if mode == "raise":
        for k, (i, d) in enumerate(zip(multi_index, dims)):
            v = _concrete_value("ravel_multi_index", i)
            if v.size and (v.min() < 0 or v.max() >= d):
                raise ValueError(f"ravel_multi_index: invalid entry in coordinates array "
                                 f"{k} (out of bounds for dimension of size {d})")
    idx = [lax.convert_element_type(_util.ensure_array(i), _int_dtype()) for i in multi_index]
    idx = _util.promote_shapes("ravel_multi_index", *idx)
    strides = [int(np.prod(dims[k + 1:], dtype=np.int64)) for k in range(len(dims))] \
        if order == "C" else [int(np.prod(dims[:k], dtype=np.int64)) for k in range(len(dims))]
    result = None
    for i, d, s in zip(idx, dims, strides):
        if mode == "clip":
            i = lax.max(lax.min(i, max(d - 1, 0)), 0)
        elif mode == "wrap":
            i = lax.rem(i, max(d, 1))
            i = lax.add(i, lax.mul(lax.convert_element_type(lax.lt(i, 0), i.dtype), max(d, 1)))
        term = lax.mul(i, s)
        result = term if result is None else lax.add(*_util.promote_shapes(
            "ravel_multi_index", result, term))
    return result


def ix_(*args: Any) -> tuple[Any, ...]:
    """Open-mesh index arrays from 1-d sequences (boolean ones are converted by nonzero).

    Example:
        >>> [a.shape for a in jnp.ix_(jnp.array([0, 1]), jnp.array([2, 0, 1]))]
        [(2, 1), (1, 3)]
    """
    _util.check_arraylike("ix_", *args)
    n = len(args)
    out = []
    for k, a in enumerate(args):
        aval = core.get_aval(a)
        if aval.ndim != 1:
            raise ValueError(f"ix_: arguments must be 1-d, got shape {aval.shape} at position "
                             f"{k}")
        if aval.dtype == np.bool_:
            (a,) = nonzero(a)
        elif not dtypes.is_integer(aval.dtype):
            raise TypeError(f"ix_: arguments must be integer or boolean, got {aval.dtype}")
        a = _util.ensure_array(a)
        shape = [1] * n
        shape[k] = core.get_aval(a).shape[0]
        out.append(lax.reshape(a, tuple(shape)))
    return tuple(out)


def indices(dimensions: Sequence[int], dtype: Any = None,
            sparse: bool = False) -> Any:
    """A grid of coordinate arrays for an array of shape ``dimensions``.

    Example:
        >>> jnp.indices((2, 2))[0]
        Array([[0, 0],
               [1, 1]], dtype=int32)
    """
    from ember.numpy.creation import array
    dims = _shape_tuple("indices", dimensions)
    dt = dtypes.canonicalize_dtype(dtypes.dtype(dtype)) if dtype is not None else _int_dtype()
    res = np.indices(dims, dtype=np.int64, sparse=sparse)
    if sparse:
        return tuple(array(r.astype(dt)) for r in res)
    return array(res.astype(dt))


__all__ = [
    "NonConcreteBooleanIndexError", "take", "take_along_axis", "nonzero", "flatnonzero",
    "argwhere", "compress", "extract", "select", "choose", "diag_indices",
    "diag_indices_from", "tril_indices", "triu_indices", "tril_indices_from",
    "triu_indices_from", "unravel_index", "ravel_multi_index", "ix_", "indices",
]
