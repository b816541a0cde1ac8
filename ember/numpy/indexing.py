"""NumPy indexing with JAX semantics: ``x[idx]`` and ``x.at[idx].set(v)``.

Static int/slice indices lower to ``slice``/``rev``/``squeeze`` (``dynamic_slice`` when an
index is a scalar tracer); advanced (array) indexing lowers to ``gather`` with clamped indices
(out-of-bounds reads clamp, as in JAX). ``x.at[idx]`` updates lower to the scatter primitives;
negative indices wrap first, out-of-bounds updates are dropped. Boolean masks must be concrete.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import _pytree, core, dtypes, lax
from ember.core import Tracer
from ember.errors import NonConcreteBooleanIndexError
from ember.lax.slicing import GatherScatterMode, normalize_index
from ember.numpy import _util, ufuncs
from ember.numpy.creation import array


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
    # (A Python bool is an int here, as in NumPy and JAX; a NumPy bool is not.)
    if isinstance(v, np.bool_) or not (
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
        if any(isinstance(leaf, Tracer) for leaf in _pytree.tree_leaves(v)):
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
    if isinstance(v, (str, bytes)):
        raise TypeError(f"Indexing with strings is not supported: got {v!r} at position {i}")
    raise IndexError("only integers, slices (`:`), ellipsis (`...`), newaxis (`None`) and "
                     f"integer or boolean arrays are valid indices; got {v!r} of type "
                     f"{type(v).__name__} at position {i}")


def _reject_list_index(idx: Any) -> None:
    # JAX raises for every non-tuple sequence index (NumPy's heuristics are ambiguous).
    if isinstance(idx, Sequence) and not isinstance(idx, (tuple, str)) and \
            not _is_array_index(idx):
        seq_like = any(isinstance(i, (Sequence, slice)) or i is Ellipsis or i is None or
                       _is_array_index(i) and np.ndim(i) != 0 for i in idx)
        fix = "arr[tuple(seq)]" if seq_like else "arr[array(seq)]"
        raise TypeError("Using a non-tuple sequence for multidimensional indexing is not "
                        f"allowed; use `{fix}` instead of `arr[seq]`. See "
                        "https://github.com/jax-ml/jax/issues/4564 for more information.")


def _parse(shape: tuple[int, ...], idx: Any) -> list[tuple]:
    """Entries aligned with the operand's dimensions (Ellipsis expanded, masks -> arrays)."""
    _reject_list_index(idx)
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


def _no_negative_wrap(shape: tuple[int, ...], entries: list[tuple]) -> list[tuple]:
    """``entries`` with negative integer indices made out of bounds for good (``-n - 1``
    wraps to -1), so they clamp, fill or drop instead of counting from the end (JAX's
    ``wrap_negative_indices=False``). Slices keep Python's meaning."""
    out, d = [], 0
    for e in entries:
        if e[0] in ("int", "dyn", "adv"):
            oob = -shape[d] - 1
            if e[0] == "int":
                e = ("int", oob if e[1] < 0 else e[1])
            elif isinstance(e[1], Tracer):
                a = lax.convert_element_type(e[1], _int_dtype())
                e = (e[0], lax.select(lax.lt(a, 0), lax.full_like(a, oob), a))
            else:
                a = np.asarray(e[1]).astype(np.int64)
                e = (e[0], np.where(a < 0, oob, a))
        out.append(e)
        d += e[0] not in ("none", "newadv")
    return out


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
    return lax.rev(x, revs)


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
    y = lax.squeeze(y, remove)
    new_axes, p = [], 0
    for e in entries:
        if e[0] == "none":
            new_axes.append(p)
            p += 1
        elif e[0] == "slice":
            p += 1
    return lax.expand_dims(y, new_axes)


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
                    unique_indices: bool = False, indices_are_sorted: bool = False,
                    wrap_negative_indices: bool = True) -> Any:
    x = _util.ensure_array(x)
    shape = core.get_aval(x).shape
    entries = _parse(shape, idx)
    if not wrap_negative_indices:
        entries = _no_negative_wrap(shape, entries)
    gmode = GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else \
        GatherScatterMode.from_any(mode)
    has_array = any(e[0] in ("adv", "newadv") for e in entries)
    force_gather = gmode == GatherScatterMode.FILL_OR_DROP and any(
        e[0] in ("int", "dyn") for e in entries)
    if not has_array and not force_gather:
        if all(e[0] == "slice" and e[1] == slice(None) for e in entries):
            return x
        if gmode != GatherScatterMode.CLIP:
            entries = _out_of_bounds_ints_dynamic(shape, entries)
        return _basic_index(x, entries)
    # With arrays present, ints are advanced indices too (NumPy's rule).
    entries = [("adv", np.asarray(e[1])) if e[0] == "int" else
               ("adv", e[1]) if e[0] == "dyn" else e for e in entries]
    return _advanced_index(x, entries, gmode, fill_value, unique_indices, indices_are_sorted)


def _out_of_bounds_ints_dynamic(shape: tuple[int, ...], entries: list[tuple]) -> list[tuple]:
    """``entries`` with out-of-bounds static ints made dynamic: as in JAX, only in-bounds
    ints become static slices; the others are read by a ``dynamic_slice`` (which clamps to
    the same element), so ``checkify``'s index checks see and report them."""
    out, d = [], 0
    for e in entries:
        if e[0] == "int" and shape[d] and not -shape[d] <= e[1] < shape[d]:
            e = ("dyn", e[1])
        out.append(e)
        d += e[0] != "none"
    return out


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


def _prepare_updates(fn: str, x: Any, values: Any, shape: tuple[int, ...]) -> tuple:
    """``x`` and ``values`` promoted to their common dtype (the scatter runs in it, as in
    JAX: ``int_x.at[i].multiply(1.5)`` scales by 1.5, then truncates), ``values`` broadcast
    to ``shape``."""
    if isinstance(values, (list, tuple)):
        values = array(values)
    _util.check_arraylike(fn, values)
    vshape = tuple(core.get_aval(values).shape)
    # NumPy's broadcast_to rule, as in JAX: no extra leading dims, not even size-1 ones.
    try:
        ok = len(vshape) <= len(shape) and np.broadcast_shapes(vshape, shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{fn}: cannot broadcast update values of shape {vshape} to the "
                         f"indexed shape {shape}")
    dt = core.get_aval(x).dtype
    # JAX: a Python int that fits an integer x takes x's dtype (uint8 x, 200 stays uint8).
    if isinstance(values, int) and dtypes.is_integer(dt) and \
            np.iinfo(dt).min <= values <= np.iinfo(dt).max:
        values = lax.convert_element_type(values, dt, False)
    # JAX's deprecation (a future error): values whose dtype x's cannot hold, as the
    # promotion lattice says (a weak scalar fits any x of its kind; float16 fits float32).
    unsafe = dtypes.result_type(dt, values) != dt
    x, values = _util.promote_dtypes(x, values)
    if unsafe:
        warnings.warn(f"scatter inputs have incompatible types: cannot safely cast value from "
                      f"dtype={core.get_aval(values).dtype} to dtype={dt} with "
                      f"jax_numpy_dtype_promotion=standard. In future JAX releases this will "
                      f"result in an error.", FutureWarning, stacklevel=5)
    return x, lax.broadcast_to_shape(values, shape)


def _leading_index_scatter(x: Any, entries: list[tuple]) -> tuple | None:
    """For ``x[i, j, ...]`` whose indexed dims lead and whose other dims are whole (``:``):
    the per-row coordinates of the indexed dims (shape S + (p,)), the indexed shape
    (S + the whole dims) and dimension numbers updating whole windows of those dims; else
    None. (``x.at[rows].add(...)``: one coordinate per row, not per element.)"""
    shape = core.get_aval(x).shape
    p = 0
    while p < len(entries) and entries[p][0] in ("int", "dyn", "adv"):
        p += 1
    if p == 0 or p == len(shape) or len(entries) != len(shape):
        return None
    if any(e[0] != "slice" or e[1].indices(n) != (0, n, 1)
           for e, n in zip(entries[p:], shape[p:])):
        return None
    s_shape = _broadcast_index_shape([e[1] for e in entries[:p] if e[0] == "adv"])
    cols = [_prep_index(e[1] if e[0] != "int" else np.asarray(e[1]), n, s_shape)
            for e, n in zip(entries[:p], shape)]
    indices = _stack_last(cols, s_shape)
    windows = tuple(range(len(s_shape), len(s_shape) + len(shape) - p))
    dn = lax.ScatterDimensionNumbers(update_window_dims=windows,
                                     inserted_window_dims=tuple(range(p)),
                                     scatter_dims_to_operand_dims=tuple(range(p)))
    return indices, s_shape + tuple(shape[p:]), dn


def _block_scatter(x: Any, entries: list[tuple]) -> tuple | None:
    """For ``x[idx]`` made of integers and slices of step 1 only (a block of ``x``): the
    block's corner as the one scatter index (shape ``(ndim,)``), the block's shape without
    the integer-indexed dims, and dimension numbers updating the block as one window; else
    None. (``x.at[a:b].set(v)``: one coordinate, not one per element; as JAX.)"""
    shape = core.get_aval(x).shape
    if len(entries) != len(shape) or any(e[0] not in ("int", "dyn", "slice") for e in entries):
        return None
    corner, windows, inserted, block = [], [], [], []
    for d, (e, n) in enumerate(zip(entries, shape)):
        if e[0] == "slice":
            start, stop, step = e[1].indices(n)
            if step != 1:
                return None
            corner.append(np.asarray(start, _int_dtype()))
            windows.append(len(block))
            block.append(max(stop - start, 0))
        else:
            corner.append(_prep_index(e[1] if e[0] != "int" else np.asarray(e[1]), n, ()))
            inserted.append(d)
    dn = lax.ScatterDimensionNumbers(update_window_dims=tuple(windows),
                                     inserted_window_dims=tuple(inserted),
                                     scatter_dims_to_operand_dims=tuple(range(len(shape))))
    return _stack_last(corner, ()), tuple(block), dn


def _scatter_plan(x: Any, entries: list[tuple]) -> tuple:
    """The scatter indices, the indexed shape (the updates' shape) and the dimension numbers
    that update ``x[idx]`` (``entries``: ``idx`` parsed by ``_parse``)."""
    for plan in (_leading_index_scatter, _block_scatter):
        found = plan(x, entries)
        if found is not None:
            return found
    indices, out_shape = _scatter_indices(x, entries)
    ndim = core.get_aval(x).ndim
    dn = lax.ScatterDimensionNumbers(update_window_dims=(),
                                     inserted_window_dims=tuple(range(ndim)),
                                     scatter_dims_to_operand_dims=tuple(range(ndim)))
    return indices, out_shape, dn


def _scatter_entries(x: Any, idx: Any, wrap_negative_indices: bool) -> list[tuple]:
    shape = core.get_aval(x).shape
    entries = _parse(shape, idx)
    return entries if wrap_negative_indices else _no_negative_wrap(shape, entries)


def _scatter_update(x: Any, idx: Any, values: Any, scatter_fn, fn: str, mode: Any,
                    indices_are_sorted: bool, unique_indices: bool,
                    wrap_negative_indices: bool = True) -> Any:
    x = _util.ensure_array(x)
    entries = _scatter_entries(x, idx, wrap_negative_indices)
    if not any(e[0] in ("adv", "newadv") for e in entries):
        # No advanced (array or mask) entries: every element is named once, in order, so
        # JAX marks such a scatter's indices unique and sorted.
        unique_indices = indices_are_sorted = True
    indices, out_shape, dn = _scatter_plan(x, entries)
    if 0 in out_shape:  # nothing to update: JAX returns x without checking the values' shape
        return x
    aval = core.get_aval(x)
    operand, updates = _prepare_updates(fn, x, values, out_shape)
    out = scatter_fn(operand, indices, updates, dn, indices_are_sorted=indices_are_sorted,
                     unique_indices=unique_indices, mode=GatherScatterMode.from_any(mode))
    return lax.convert_element_type(out, aval.dtype, aval.weak_type)


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
            mode: Any = None, fill_value: Any = None,
            wrap_negative_indices: bool = True) -> Any:
        """``x[idx]`` with an explicit out-of-bounds ``mode`` ('clip', 'fill', ...).

        With ``wrap_negative_indices=False`` (a keyword of every ``x.at[idx]`` method, as in
        JAX) negative integer indices are out of bounds instead of counting from the end.

        Example:
            >>> jnp.arange(3).at[5].get(mode="fill", fill_value=-1)
            Array(-1, dtype=int32)
        """
        return _rewriting_take(self.array, self.index, mode, fill_value, unique_indices,
                               indices_are_sorted, wrap_negative_indices)

    def _update(self, values, fn, name, indices_are_sorted, unique_indices, mode, wrap):
        return _scatter_update(self.array, self.index, values, fn, f"at[...].{name}", mode,
                               indices_are_sorted, unique_indices, wrap)

    def set(self, values: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None,
            wrap_negative_indices: bool = True) -> Any:
        """``x[idx] = values`` (functionally). With repeated indices one write wins (eagerly
        the last one, as in NumPy; unspecified under compilation, as in JAX).

        Example:
            >>> jnp.zeros(3).at[0].set(1.0)
            Array([1., 0., 0.], dtype=float32)
        """
        return self._update(values, lax.scatter, "set", indices_are_sorted, unique_indices,
                            mode, wrap_negative_indices)

    def add(self, values: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None,
            wrap_negative_indices: bool = True) -> Any:
        """``x[idx] += values``; repeated indices accumulate (like ``np.add.at``).

        Example:
            >>> jnp.zeros(2).at[jnp.array([0, 0])].add(1.0)
            Array([2., 0.], dtype=float32)
        """
        return self._update(values, lax.scatter_add, "add", indices_are_sorted,
                            unique_indices, mode, wrap_negative_indices)

    def multiply(self, values: Any, *, indices_are_sorted: bool = False,
                 unique_indices: bool = False, mode: Any = None,
                 wrap_negative_indices: bool = True) -> Any:
        """``x[idx] *= values``; repeated indices multiply together.

        Example:
            >>> jnp.ones(2).at[1].multiply(3.0)
            Array([1., 3.], dtype=float32)
        """
        return self._update(values, lax.scatter_mul, "multiply", indices_are_sorted,
                            unique_indices, mode, wrap_negative_indices)

    mul = multiply

    def _scaled_ones(self, values, name, indices_are_sorted, unique_indices, mode, wrap):
        # Ones with ``values`` multiplied in at ``idx``: the divisor/exponent of divide/power.
        x = _util.ensure_array(self.array)
        ones = lax.full_like(x, 1)
        return x, _scatter_update(ones, self.index, values, lax.scatter_mul, f"at[...].{name}",
                                  mode, indices_are_sorted, unique_indices, wrap)

    def divide(self, values: Any, *, indices_are_sorted: bool = False,
               unique_indices: bool = False, mode: Any = None,
               wrap_negative_indices: bool = True) -> Any:
        """``x[idx] /= values`` (true division: integer arrays give floats, as in JAX).

        Example:
            >>> jnp.ones(2).at[1].divide(4.0)
            Array([1.  , 0.25], dtype=float32)
        """
        x, denom = self._scaled_ones(values, "divide", indices_are_sorted, unique_indices,
                                     mode, wrap_negative_indices)
        return ufuncs.true_divide(x, denom)

    def power(self, values: Any, *, indices_are_sorted: bool = False,
              unique_indices: bool = False, mode: Any = None,
              wrap_negative_indices: bool = True) -> Any:
        """``x[idx] **= values``.

        Example:
            >>> jnp.full(2, 3.0).at[0].power(2.0)
            Array([9., 3.], dtype=float32)
        """
        x, exps = self._scaled_ones(values, "power", indices_are_sorted, unique_indices,
                                     mode, wrap_negative_indices)
        return ufuncs.power(x, exps)

    def min(self, values: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None,
            wrap_negative_indices: bool = True) -> Any:
        """``x[idx] = minimum(x[idx], values)``.

        Example:
            >>> jnp.full(2, 3.0).at[0].min(1.0)
            Array([1., 3.], dtype=float32)
        """
        return self._update(values, lax.scatter_min, "min", indices_are_sorted,
                            unique_indices, mode, wrap_negative_indices)

    def max(self, values: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None,
            wrap_negative_indices: bool = True) -> Any:
        """``x[idx] = maximum(x[idx], values)``.

        Example:
            >>> jnp.zeros(2).at[0].max(1.0)
            Array([1., 0.], dtype=float32)
        """
        return self._update(values, lax.scatter_max, "max", indices_are_sorted,
                            unique_indices, mode, wrap_negative_indices)

    def apply(self, func: Any, *, indices_are_sorted: bool = False,
              unique_indices: bool = False, mode: Any = None,
              wrap_negative_indices: bool = True) -> Any:
        """``x[idx] = func(x[idx])`` for a unary elementwise ``func``; an index that appears
        ``n`` times gets ``func`` ``n`` times (``lax.scatter_apply``; no derivative, as in
        JAX).

        Example:
            >>> jnp.arange(3.0).at[jnp.array([1, 1, 2])].apply(lambda v: v * 10)
            Array([  0., 100.,  20.], dtype=float32)
        """
        x = _util.ensure_array(self.array)
        entries = _scatter_entries(x, self.index, wrap_negative_indices)
        indices, out_shape, dn = _scatter_plan(x, entries)
        if 0 in out_shape:
            return x
        return lax.scatter_apply(x, indices, func, dn, update_shape=out_shape,
                                 indices_are_sorted=indices_are_sorted,
                                 unique_indices=unique_indices,
                                 mode=GatherScatterMode.from_any(mode))

    def subtract(self, values: Any, *, indices_are_sorted: bool = False,
                 unique_indices: bool = False, mode: Any = None,
                 wrap_negative_indices: bool = True) -> Any:
        """``x[idx] -= values``.

        Example:
            >>> jnp.zeros(2).at[0].subtract(1.0)
            Array([-1.,  0.], dtype=float32)
        """
        return self._update(values, lax.scatter_sub, "subtract", indices_are_sorted,
                            unique_indices, mode, wrap_negative_indices)


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


__all__ = ["NonConcreteBooleanIndexError"]
