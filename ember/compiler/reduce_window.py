"""StableHLO ``reduce_window`` in NumPy: the evaluator rule and the prefix-scan fast path.

General path: the inputs are base-dilated and padded into arrays filled with the init values,
then every window offset (in row-major window order) takes a strided view of them, one element
per output position, and combines it into the accumulators, which start as the init values.
A body that is one binary op of its parameters (``add(p0, p1)``, ...) combines with its
ufunc; any other body (variadic ones included) is evaluated vectorized over the views.

Prefix scans (``prefix_scan``: a reduce_window whose window spans one whole dimension, padded
so that output ``i`` sees the elements ``0..i``, or ``i..n-1`` for a reverse scan, from an
init equal to the reducer's identity) take a fast path, ``scan_accumulate``. Its precision
is a fixed rule that native kernels follow bit for bit. Elements are combined sequentially
from the start of the scan (element 0 of a forward scan, the last element of a reverse one:
``ufunc.accumulate`` on the flipped array):

- ``add`` on float32, float16 and bfloat16 accumulates in float64, and each prefix is
  rounded to the result dtype once;
- ``add`` on float64, complex and integers (wrapping), and ``multiply``, ``maximum`` and
  ``minimum`` on every dtype accumulate in the operand dtype, each step rounded to it
  (``maximum``/``minimum`` propagate NaN, as ``np.maximum`` does).

So float sums and products may differ in the last bits from the general path, which combines
each window in index order starting from the init value (``+0.0 + -0.0`` is ``+0.0`` there,
a scan of ``-0.0`` stays ``-0.0``). No floating-point warnings are raised.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ember import dtypes
from ember.compiler.eval_elementwise import (
    REDUCE_UFUNCS,
    apply_body,
    is_reducer_identity,
    order_zeros,
    simple_reducer_opcode,
)
from ember.compiler.evaluator import eval_rule
from ember.compiler.hlo import Instruction
from ember.compiler.shape_inference import reduce_window_attrs

SCAN_OPCODES = ("add", "multiply", "maximum", "minimum")
# Float dtypes whose scanned sums accumulate in float64.
_WIDE_SUM_DTYPES = frozenset({np.dtype(np.float32), dtypes.float16, dtypes.bfloat16})


def prefix_scan(inst: Instruction) -> tuple[int, bool, str] | None:
    """``(axis, reverse, opcode)`` when ``inst`` is a ``reduce_window`` computing a cumulative
    add/multiply/maximum/minimum along ``axis`` (``scan_axis``) from an init operand that is a
    ``constant`` equal to the identity of ``opcode``, else None.

    Example:
        >>> prefix_scan(cumsum_inst)  # doctest: +SKIP
        (0, False, 'add')
    """
    init = inst.operands[1] if len(inst.operands) == 2 else None
    if init is None or init.opcode != "constant":
        return None
    return scan_from(inst, init.attrs["value"])


def scan_from(inst: Instruction, init) -> tuple[int, bool, str] | None:
    """``prefix_scan`` of ``inst`` with the init's value ``init`` (whatever its operand)."""
    scan = scan_axis(inst)
    if scan is None or scan[2] not in SCAN_OPCODES or not is_reducer_identity(
            REDUCE_UFUNCS[scan[2]], np.asarray(init)):
        return None
    return scan


def scan_axis(inst: Instruction) -> tuple[int, bool, str | None] | None:
    """``(axis, reverse, opcode)`` when the windows of ``inst`` (a ``reduce_window``) make it
    a cumulative scan along ``axis``, whatever its init value; ``opcode`` is the body's op
    when the body is ``op(p0, p1)``, else None.

    That is: one input; along ``axis`` a window of the whole dimension (size >= 1) padded by
    ``(size - 1, 0)`` (forward) or ``(0, size - 1)`` (reverse); every other dimension a window
    of 1 without padding; all strides and dilations 1. A scan along a dimension of size 1 is
    reported forward (on the lowest such dimension when no window is larger).
    """
    if inst.opcode != "reduce_window" or len(inst.operands) != 2:
        return None
    dims = inst.operands[0].dims
    window = reduce_window_attrs(inst.attrs, len(dims))
    if any(v != 1 for name in ("window_strides", "base_dilations", "window_dilations")
           for v in window[name]):
        return None
    axis, reverse = None, False
    for i, (n, w, pad) in enumerate(zip(dims, window["window_dimensions"], window["padding"])):
        if w == 1 and pad == (0, 0):
            continue  # not scanned (or a scan of length 1, handled below)
        if axis is not None or w != n:
            return None
        if pad == (n - 1, 0):
            reverse = False
        elif pad == (0, n - 1):
            reverse = True
        else:
            return None
        axis = i
    if axis is None:
        axis = next((i for i, n in enumerate(dims) if n == 1), None)
        if axis is None:
            return None
    return axis, reverse, simple_reducer_opcode(inst.calls[0])


def scan_accumulate(x: np.ndarray, axis: int, reverse: bool, opcode: str) -> np.ndarray:
    """The inclusive scan of ``x`` along ``axis`` with ``opcode`` (one of ``SCAN_OPCODES``),
    from the last element backwards when ``reverse``, with the module's precision rule.

    Example:
        >>> scan_accumulate(np.array([1, 2, 3], np.int32), 0, True, "add")
        array([6, 5, 3], dtype=int32)
    """
    if opcode not in SCAN_OPCODES:
        raise ValueError(f"scan_accumulate: opcode must be one of {SCAN_OPCODES}, got "
                         f"{opcode!r}")
    x = np.asarray(x)
    if reverse:
        x = np.flip(x, axis)
    with np.errstate(all="ignore"):
        if opcode == "add" and x.dtype in _WIDE_SUM_DTYPES:
            out = np.add.accumulate(x.astype(np.float64), axis=axis).astype(x.dtype)
        else:
            out = REDUCE_UFUNCS[opcode].accumulate(x, axis=axis, dtype=x.dtype)
            if opcode in ("maximum", "minimum") and dtypes.is_float(x.dtype):
                out = order_zeros(out, x, opcode == "maximum",
                                  lambda m: np.logical_or.accumulate(m, axis=axis))
    if reverse:
        out = np.flip(out, axis)
    return np.ascontiguousarray(out)


def _padded(x: np.ndarray, init: np.ndarray, window: dict[str, tuple]) -> np.ndarray:
    """``x`` base-dilated and padded (negative padding crops), holes filled with ``init``."""
    grow = [(max(lo, 0), max(hi, 0)) for lo, hi in window["padding"]]
    dilated = [(d - 1) * b + 1 if d else 0 for d, b in zip(x.shape, window["base_dilations"])]
    full = np.full([lo + d + hi for (lo, hi), d in zip(grow, dilated)], init, dtype=x.dtype)
    full[tuple(slice(lo, lo + d, b) for (lo, _), d, b in
               zip(grow, dilated, window["base_dilations"]))] = x
    crop = tuple(slice(max(-lo, 0), n - max(-hi, 0))
                 for (lo, hi), n in zip(window["padding"], full.shape))
    return full[crop]


def _window_views(arrays: list[np.ndarray], window: dict[str, tuple],
                  out_dims: tuple[int, ...]):
    """For each window offset (row-major), the strided views of ``arrays`` that put the
    element at that offset of every window at its output position."""
    strides, dilations = window["window_strides"], window["window_dilations"]
    for offset in itertools.product(*(range(w) for w in window["window_dimensions"])):
        index = tuple(slice(k * wd, k * wd + (n - 1) * s + 1, s)
                      for k, wd, n, s in zip(offset, dilations, out_dims, strides))
        yield [a[index] for a in arrays]


@eval_rule("reduce_window")
def reduce_window(inst: Instruction, *values: np.ndarray) -> np.ndarray | tuple:
    """The value of the ``reduce_window`` instruction ``inst`` on its operand values."""
    n = len(values) // 2
    inputs = [np.asarray(v) for v in values[:n]]
    inits = [np.asarray(v) for v in values[n:]]
    # (The init is checked by value: in a library step it is a parameter, not the constant
    # ``prefix_scan`` looks for.)
    scan = scan_from(inst, inits[0]) if n == 1 else None
    if scan is not None:
        return scan_accumulate(inputs[0], *scan)
    return window_by_window(inst, inputs, inits)


def window_by_window(inst: Instruction, inputs: list[np.ndarray],
                     inits: list[np.ndarray]) -> np.ndarray | tuple:
    """``reduce_window`` by the general path: each window combined in index order from the
    init value (the rule's fallback when ``inst`` is not a prefix scan from the identity)."""
    n = len(inputs)
    out_shapes = inst.shape.tuple_shapes if inst.shape.is_tuple else (inst.shape,)
    out_dims = out_shapes[0].dims
    out_dtypes = [s.dtype for s in out_shapes]
    accs = [np.full(out_dims, i, dtype=dt) for i, dt in zip(inits, out_dtypes)]
    if math.prod(out_dims):
        window = reduce_window_attrs(inst.attrs, inputs[0].ndim)
        padded = [_padded(x, i, window) for x, i in zip(inputs, inits)]
        ufunc = REDUCE_UFUNCS.get(simple_reducer_opcode(inst.calls[0])) if n == 1 else None
        for views in _window_views(padded, window, out_dims):
            if ufunc is not None:
                with np.errstate(all="ignore"):
                    accs = [ufunc(accs[0], views[0]).astype(out_dtypes[0], copy=False)]
            else:
                accs = apply_body(inst.calls[0], accs + views, out_dims, out_dtypes)
    outs = [np.array(a) for a in accs]  # copies: no broadcast views escape
    return outs[0] if n == 1 else tuple(outs)

