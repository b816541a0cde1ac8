"""Sorting with NumPy when a sort's comparator is a plain lexicographic order.

``lexicographic_keys(comp)`` recognizes the comparators ember's ``lax`` builds for ``sort``
and ``argsort``, and their descending forms: the first keys compared in order, each key
ascending (or every key descending), where for floats NaNs come after every number (and are
equal among themselves) and -0.0 equals 0.0. That is exactly NumPy's sort order, so
``stable_order`` can sort with NumPy's stable sorts instead of evaluating the comparator
pair by pair.

``top_k`` (the ``ember.top_k`` custom call that ``lax.top_k`` lowers to) takes the first
``k`` positions of the stable descending order without sorting whole rows: each value's
descending order key and its position pack into one unique 64-bit key (values of 32 bits or
fewer), which ``np.partition`` splits and a sort of the ``k`` smallest orders.

The recognized forms, per key ``k`` with parameters ``a = 2k``, ``b = 2k + 1`` (swapped when
descending), where ``isnan(x)`` is ``compare(x, x, NE)`` and ``notnan(x)`` is ``not(isnan(x))``
or ``compare(x, x, EQ)``; ``or``/``and`` operands may come in either order:

- less: ``compare(a, b, LT)`` (not float) or ``or(compare(a, b, LT), and(notnan(a), isnan(b)))``;
- equal: ``compare(a, b, EQ)`` (not float) or ``or(compare(a, b, EQ), and(isnan(a), isnan(b)))``;
- lexicographic: ``less(k0)`` or ``or(less(k0), and(equal(k0), <lexicographic of the rest>))``.

Example:
    >>> stable_order([np.array([[2.0, np.nan, 1.0]])], axis=1)
    array([[2, 0, 1]])
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np

from ember.compiler.evaluator import register_custom_call_target
from ember.compiler.hlo import Computation, Instruction

_FLOAT_KINDS = "f"
_LOW_PRECISION = frozenset({"float16", "bfloat16"})


def _is_compare(node: Instruction, direction: str) -> bool:
    return node.opcode == "compare" and node.attrs.get("comparison_direction") == direction


def _either(node: Instruction, opcode: str):
    """Both operand orders of a two-operand ``opcode`` node (empty when it is not one)."""
    if node.opcode != opcode or len(node.operands) != 2:
        return []
    x, y = node.operands
    return [(x, y), (y, x)]


def _isnan(node: Instruction, x: Instruction) -> bool:
    return _is_compare(node, "NE") and node.operands[0] is x and node.operands[1] is x


def _notnan(node: Instruction, x: Instruction) -> bool:
    if node.opcode == "not" and len(node.operands) == 1:
        return _isnan(node.operands[0], x)
    return _is_compare(node, "EQ") and node.operands[0] is x and node.operands[1] is x


def _is_float(x: Instruction) -> bool:
    dt = np.dtype(x.shape.dtype)
    return dt.kind in _FLOAT_KINDS or dt.name in _LOW_PRECISION


class _Matcher:
    def __init__(self, comp: Computation):
        params = comp.parameters
        self.key_of: dict[int, tuple[int, int]] = {}  # id(param) -> (operand, 0 lhs / 1 rhs)
        for p in params:
            index = p.attrs["index"]
            self.key_of[id(p)] = (index // 2, index % 2)

    def key(self, a: Instruction, b: Instruction) -> tuple[int, bool] | None:
        """(operand, descending) when ``a`` and ``b`` are the two parameters of one operand."""
        ka, kb = self.key_of.get(id(a)), self.key_of.get(id(b))
        if ka is None or kb is None or ka[0] != kb[0] or ka[1] == kb[1] or \
                a.shape.dtype != b.shape.dtype or a.shape.dims != () or b.shape.dims != ():
            return None
        if np.dtype(a.shape.dtype).kind not in "biuf" and not _is_float(a):
            return None  # (complex numbers have no such order)
        return ka[0], ka[1] == 1

    def less(self, node: Instruction) -> tuple[Instruction, Instruction] | None:
        """The (a, b) of a key's ``less(a, b)``, or None."""
        if _is_compare(node, "LT"):
            a, b = node.operands
            if self.key(a, b) is not None and not _is_float(a):
                return a, b
            return None
        for lt, nan_case in _either(node, "or"):
            if not _is_compare(lt, "LT"):
                continue
            a, b = lt.operands
            if self.key(a, b) is None or not _is_float(a):
                continue
            if any(_notnan(x, a) and _isnan(y, b) for x, y in _either(nan_case, "and")):
                return a, b
        return None

    def equal(self, node: Instruction, a: Instruction, b: Instruction) -> bool:
        def eq(n):
            return _is_compare(n, "EQ") and {id(o) for o in n.operands} == {id(a), id(b)} \
                and a is not b
        if not _is_float(a):
            return eq(node)
        return any(eq(e) and any(_isnan(x, a) and _isnan(y, b) or _isnan(x, b) and _isnan(y, a)
                                 for x, y in _either(nan_case, "and"))
                   for e, nan_case in _either(node, "or"))

    def lexicographic(self, node: Instruction) -> list[tuple[int, bool]] | None:
        pair = self.less(node)
        if pair is not None:
            return [self.key(*pair)]
        for first, rest in _either(node, "or"):
            pair = self.less(first)
            if pair is None:
                continue
            for eq, tail in _either(rest, "and"):
                if self.equal(eq, *pair):
                    later = self.lexicographic(tail)
                    if later is not None:
                        return [self.key(*pair)] + later
        return None


def lexicographic_keys(comp: Computation) -> tuple[list[int], bool] | None:
    """``(key operands, most significant first; descending)`` when ``comp`` compares its
    operands in the plain lexicographic order (see the module doc), else None."""
    params = comp.parameters
    if len(params) % 2 or [p.attrs["index"] for p in params] != list(range(len(params))):
        return None
    keys = _Matcher(comp).lexicographic(comp.root)
    if keys is None:
        return None
    operands = [k for k, _ in keys]
    directions = {d for _, d in keys}
    if len(set(operands)) != len(operands) or len(directions) != 1:
        return None
    return operands, directions.pop()


def _exact_key(x: np.ndarray) -> np.ndarray:
    # NumPy orders float16 natively but not bfloat16; float32 holds both exactly.
    return x.astype(np.float32) if x.dtype.name in _LOW_PRECISION else x


def stable_order(keys: Sequence[np.ndarray], axis: int, descending: bool = False) -> np.ndarray:
    """Positions that sort along ``axis`` by ``keys`` (most significant first), stably: ties
    keep their order, NaNs come after every number, -0.0 equals 0.0.

    Example:
        >>> stable_order([np.array([1, 0, 1]), np.array([5, 6, 4])], axis=0)
        array([1, 2, 0])
    """
    keys = [_exact_key(np.asarray(k)) for k in keys]
    if descending:
        # A stable ascending sort of the reversed keys, read backwards, keeps ties in order.
        n = keys[0].shape[axis]
        flip = [np.flip(k, axis) for k in keys]
        order = stable_order(flip, axis)
        return n - 1 - np.flip(order, axis)
    if len(keys) == 1:
        packed = packed_order(keys[0], axis)
        if packed is not None:
            return packed
        return np.argsort(keys[0], axis=axis, kind="stable")
    return np.lexsort(keys[::-1], axis=axis)  # (lexsort's primary key is its last)


# The least elements, and row length, from which ``packed_order`` sorts: below them NumPy's
# stable argsort is as quick as the packing's dozen passes (float32, one row of 4096: 74 us
# against 103; eight rows of 1024: 159 against 126; 1000 rows of 10: 33 against 60).
_PACKED_MIN_SIZE = 1 << 13
_PACKED_MIN_ROW = 1 << 7


def _ascending_key(x: np.ndarray) -> np.ndarray | None:
    """A uint32 whose order is ``stable_order``'s (NaNs after every number and equal among
    themselves, -0.0 equal to 0.0) for values of 32 bits or fewer, else None: the bits'
    total order (``_descending_key``) of the values with their zeros and NaNs made one."""
    if x.dtype.itemsize > 4:
        return None
    if x.dtype.kind == "f":
        x = np.add(x, np.float32(0), dtype=np.float32)  # (-0.0 + 0.0 is 0.0)
        np.copyto(x, np.float32(np.nan), where=np.isnan(x))  # (one NaN: equal ones tie)
    return _descending_key(x)


def packed_order(x: np.ndarray, axis: int) -> np.ndarray | None:
    """``np.argsort(x, axis, kind="stable")`` as a sort of unique 64-bit integers, each
    value's key above its position, or None for values wider than 32 bits or a small ``x``.
    NumPy's stable sort of floats is a merge sort: on (256, 256) float32 rows ~2.2 ms,
    against ~0.19 ms so; 2.3x faster on one row of 65536."""
    if x.ndim == 0 or x.size < _PACKED_MIN_SIZE or x.shape[axis] < _PACKED_MIN_ROW:
        return None
    key = _ascending_key(np.moveaxis(x, axis, -1))
    if key is None:
        return None
    n = key.shape[-1]
    position_bits = (n - 1).bit_length()  # (n < 2**32: a key and a position fit in 64 bits)
    packed = key.astype(np.uint64)
    packed <<= np.uint64(position_bits)
    packed |= np.arange(n, dtype=np.uint64)
    packed.sort(axis=-1)  # (keys are unique, so any sort gives the stable order)
    packed &= np.uint64((1 << position_bits) - 1)
    order = np.moveaxis(packed.view(np.int64).astype(np.intp, copy=False), -1, axis)
    # (C order, as NumPy's argsort gives: what is gathered by it is then C-ordered too, and
    # large eager results stay eligible for the aligned copy compiled programs read)
    return np.ascontiguousarray(order)


def _descending_key(x: np.ndarray) -> np.ndarray | None:
    """An unsigned integer whose order is ``top_k``'s: for floats, the total order of their
    bits (+NaN > +inf > ... > +0 > -0 > ... > -inf > -NaN, as XLA's TopK orders them);
    uint32 for values of 32 bits or fewer, uint64 for wider ones; None for other dtypes."""
    dt = x.dtype
    if dt.name in _LOW_PRECISION or dt.kind == "f":
        # (float16 and bfloat16 widen exactly, signs and NaN payload order kept)
        f = np.ascontiguousarray(x, np.float64 if dt.itemsize == 8 else np.float32)
        ut, it = (np.uint64, np.int64) if dt.itemsize == 8 else (np.uint32, np.int32)
        u = f.view(ut)
        sign = ut(1 << (8 * u.itemsize - 1))
        # (negative: all bits flipped; positive: the sign bit set; into one fresh array, as
        # fresh memory costs page faults)
        key = (u.view(it) >> (8 * u.itemsize - 1)).view(ut)
        key |= sign
        key ^= u
        return key
    if dt.kind == "i":  # (the signed order as unsigned)
        if dt.itemsize == 8:
            return x.view(np.uint64) ^ np.uint64(1 << 63)
        return (x.astype(np.int64) - np.iinfo(np.int32).min).astype(np.uint32)
    if dt.kind in "bu":
        return x.astype(np.uint64 if dt.itemsize == 8 else np.uint32)
    return None


def _pack(high: np.ndarray, low: np.ndarray) -> np.ndarray:
    """uint64 ``high << 32 | low`` of two uint32 arrays (written as word pairs when the
    machine is little-endian: a 64-bit shift of a whole array is several times slower)."""
    if sys.byteorder != "little":
        return (high.astype(np.uint64) << np.uint64(32)) | low.astype(np.uint64)
    words = np.empty(high.shape + (2,), np.uint32)
    words[..., 0] = low
    words[..., 1] = high
    return words.view(np.uint64)[..., 0]


def top_k(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest values of each row (last axis) of ``x`` and their positions (int32):
    the first ``k`` of the stable descending order of ``_descending_key`` (+0 before -0; a
    NaN with its sign bit clear first, one with it set last).

    Example:
        >>> top_k(np.array([1.0, 3.0, 3.0, np.nan]), 3)
        (array([nan,  3.,  3.]), array([3, 1, 2], dtype=int32))
    """
    x = np.asarray(x)
    n = x.shape[-1]
    key = _descending_key(x)
    if key is None:
        order = stable_order([x], x.ndim - 1, descending=True)[..., :k]
    elif key.ndim == 1 and 0 < k and n >= PREFILTER_MIN_N and k * 64 <= n < 2**32 and \
            (found := _top_k_prefiltered(x, key, k)) is not None:
        return found
    elif key.dtype != np.uint32 or not 0 < k < n < 2**32:
        order = np.argsort(np.invert(key), axis=-1, kind="stable")[..., :k]
    else:
        # Unique keys (the position breaks ties), so any sort of them is stable.
        packed = _pack(np.invert(key, out=key), np.arange(n, dtype=np.uint32))
        packed.partition(k - 1, axis=-1)  # (in place: fresh arrays cost page faults)
        smallest = np.sort(packed[..., :k], axis=-1)
        order = (smallest & np.uint64(0xFFFFFFFF)).astype(np.intp)
    return np.take_along_axis(x, order, axis=-1), order.astype(np.int32)


# One long row: the k-th largest key of every 16th element bounds the row's k-th largest key
# from below (k elements of the row reach it), so only the elements reaching it can be among
# the k largest; they are few on most rows (1e6 float32, k=1000: ~16000), and only they are
# packed and partitioned.
PREFILTER_MIN_N = 1 << 16


def _top_k_prefiltered(x: np.ndarray, key: np.ndarray, k: int):
    sample = key[::16].copy()
    bound = np.partition(sample, sample.size - k)[sample.size - k]  # (the k-th largest)
    reach = key >= bound
    if np.count_nonzero(reach) > key.size // 8:  # (many ties at the bound: no gain)
        return None
    where = np.flatnonzero(reach)
    if key.dtype == np.uint32:
        packed = _pack(np.invert(key[where]), where.astype(np.uint32))
        if packed.size > k:
            packed.partition(k - 1)
        order = (np.sort(packed[:k]) & np.uint64(0xFFFFFFFF)).astype(np.intp)
    else:  # (a stable sort of the few candidates, in position order: ties stay in order)
        order = where[np.argsort(np.invert(key[where]), kind="stable")[:k]]
    return x[order], order.astype(np.int32)


register_custom_call_target("ember.top_k", lambda x, *, k: top_k(x, int(k)))
