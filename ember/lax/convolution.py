"""Convolutions: ``conv_general_dilated`` (XLA's ConvGeneralDilated) and the helpers on top
of it (``conv``, ``conv_with_general_padding``, ``conv_transpose``,
``conv_general_dilated_patches``, ``conv_dimension_numbers``, ``padtype_to_pads``).

``conv_general_dilated[window_strides padding lhs_dilation rhs_dilation dimension_numbers
feature_group_count batch_group_count precision preferred_element_type]`` has JAX's params;
``dimension_numbers`` is a ``ConvDimensionNumbers`` of three permutations (lhs: batch,
feature, spatial...; rhs: out feature, in feature, spatial...; out: batch, feature,
spatial...). The kernel (``conv_numpy``) is NumPy and BLAS: convolutions with few input
features, and kernel gradients into few outputs, run a backend's native loops where it has
them (``DIRECT_TARGET``, ``TAP_GRAD_TARGET``), stride-1 convolutions with many features one
GEMM per kernel tap over shifted rows of the padded input, depthwise ones a multiply-add per
tap, the others im2col in cache-sized chunks, all spread over a thread per core; compiled
code runs it as a library step (the ``ember.conv`` custom call).
The primitive is bilinear: its JVP is two convolutions, and its transposes are
convolutions with swapped roles of strides and dilations (the adjoint of a strided, padded,
dilated correlation).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.lib.stride_tricks import as_strided, sliding_window_view

from ember import _scratch, core, dtypes
from ember import _threads as _threads_pool
from ember._blas_threads import one_blas_thread
from ember.compiler import eval_elementwise as K
from ember.compiler.evaluator import CUSTOM_CALL_TARGETS, register_custom_call_target
from ember.compiler.hlo import Shape
from ember.interpreters import ad
from ember.interpreters.batching import not_mapped
from ember.lax import _lapack, base
from ember.lax import elementwise as E
from ember.lax.base import standard_primitive
from ember.lax.batch_util import moveaxis
from ember.lax.dot import _compute_dtype, _preferred, canonicalize_precision
from ember.lax.shape import reshape, rev, transpose

_TARGET = "ember.conv"
_FN = "conv_general_dilated"


class ConvDimensionNumbers(NamedTuple):
    """The layout of a convolution's operands and result, as three permutations.

    ``lhs_spec`` = (batch dim, feature dim, spatial dims...), ``rhs_spec`` = (output feature
    dim, input feature dim, spatial dims...), ``out_spec`` = (batch dim, feature dim,
    spatial dims...).

    Example:
        >>> lax.ConvDimensionNumbers((0, 1, 2), (0, 1, 2), (0, 1, 2)).lhs_spec
        (0, 1, 2)
    """

    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


def _spec_from_string(specs: Sequence[str]) -> ConvDimensionNumbers:
    lhs, rhs, out = specs
    for spec, pair in ((lhs, "NC"), (rhs, "OI"), (out, "NC")):
        if spec.count(pair[0]) != 1 or spec.count(pair[1]) != 1:
            raise TypeError(f"convolution dimension_numbers[{specs.index(spec)}] must contain "
                            f"one '{pair[0]}' and one '{pair[1]}', got {spec}.")
        if len(set(spec)) != len(spec):
            raise TypeError(f"convolution dimension_numbers must not repeat a character, "
                            f"got {spec}.")
    if not set(lhs) - set("NC") == set(rhs) - set("OI") == set(out) - set("NC"):
        raise TypeError(f"convolution dimension_numbers elements must each have the same set "
                        f"of spatial characters, got {tuple(specs)}.")

    def perm(spec: str, pair: str) -> tuple[int, ...]:
        # Spatial dims are listed in the order the kernel spec lists them.
        spatial = sorted((i for i, c in enumerate(spec) if c not in pair),
                         key=lambda i: rhs.index(spec[i]))
        return (spec.index(pair[0]), spec.index(pair[1])) + tuple(spatial)

    return ConvDimensionNumbers(perm(lhs, "NC"), perm(rhs, "OI"), perm(out, "NC"))


def conv_dimension_numbers(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                           dimension_numbers: Any) -> ConvDimensionNumbers:
    """Canonicalizes ``dimension_numbers`` (None, a ``ConvDimensionNumbers`` or a triple of
    strings like ``('NHWC', 'HWIO', 'NHWC')``) for operands of the given shapes.

    Example:
        >>> lax.conv_dimension_numbers((1, 5, 5, 3), (3, 3, 3, 8), ('NHWC', 'HWIO', 'NHWC'))
        ConvDimensionNumbers(lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1), out_spec=(0, 3, 1, 2))
    """
    if len(lhs_shape) != len(rhs_shape):
        raise TypeError(f"convolution requires lhs and rhs ndim to be equal, got "
                        f"{len(lhs_shape)} and {len(rhs_shape)}.")
    if len(lhs_shape) < 2:
        raise TypeError(f"convolution requires operands of rank >= 2, got {len(lhs_shape)}.")
    nd = len(lhs_shape)
    if dimension_numbers is None:
        iota = tuple(range(nd))
        return ConvDimensionNumbers(iota, iota, iota)
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        dn = dimension_numbers
    elif (isinstance(dimension_numbers, (tuple, list)) and len(dimension_numbers) == 3
          and all(isinstance(s, str) for s in dimension_numbers)):
        for s in dimension_numbers:
            if len(s) != nd:
                raise TypeError(f"convolution dimension_numbers[i] must have len equal to the "
                                f"ndim of lhs and rhs, got {len(s)} for lhs and rhs shapes "
                                f"{tuple(lhs_shape)} and {tuple(rhs_shape)}.")
        dn = _spec_from_string(dimension_numbers)
    elif isinstance(dimension_numbers, (tuple, list)) and len(dimension_numbers) == 3:
        dn = ConvDimensionNumbers(*(tuple(int(i) for i in s) for s in dimension_numbers))
    else:
        raise TypeError(f"convolution dimension_numbers must be None, a ConvDimensionNumbers "
                        f"or a tuple of three strings, got {dimension_numbers!r}.")
    for name, spec in zip(("lhs_spec", "rhs_spec", "out_spec"), dn):
        if sorted(spec) != list(range(nd)):
            raise TypeError(f"convolution dimension_numbers.{name} must be a permutation of "
                            f"range({nd}), got {spec}.")
    return ConvDimensionNumbers(*(tuple(int(i) for i in s) for s in dn))


def _dilate(sizes: Sequence[int], dilation: Sequence[int]) -> tuple[int, ...]:
    return tuple(0 if n == 0 else (n - 1) * d + 1 for n, d in zip(sizes, dilation))


def padtype_to_pads(in_shape: Sequence[int], window_shape: Sequence[int],
                    window_strides: Sequence[int], padding: str) -> list[tuple[int, int]]:
    """Explicit ``(low, high)`` pads for a padding mode 'VALID', 'SAME' or 'SAME_LOWER'.

    'SAME' pads so that the output size is ``ceil(in / stride)``, the odd element going high;
    'SAME_LOWER' puts it low.

    Example:
        >>> lax.padtype_to_pads((5,), (2,), (1,), "SAME")
        [(0, 1)]
    """
    mode = padding.upper() if isinstance(padding, str) else padding
    if mode == "VALID":
        return [(0, 0)] * len(in_shape)
    if mode not in ("SAME", "SAME_LOWER"):
        raise ValueError(f"Unrecognized padding type: expected 'VALID', 'SAME', or "
                         f"'SAME_LOWER', got {padding}.")
    pads = []
    for n, w, s in zip(in_shape, window_shape, window_strides):
        total = max(0, (-(-n // s) - 1) * s + w - n)
        small = total // 2
        pads.append((small, total - small) if mode == "SAME" else (total - small, small))
    return pads


# ---------------------------------------------------------------- the NumPy kernel


def _pad_dilate(x: np.ndarray, axes: Sequence[int], pads: Sequence[tuple[int, int]],
                dilation: Sequence[int]) -> np.ndarray:
    """``x`` dilated by ``dilation`` (zeros between elements) and padded by ``pads`` (negative
    pads crop) along ``axes``."""
    if all(d == 1 for d in dilation) and all(p == (0, 0) for p in pads):
        return x
    shape = list(x.shape)
    src: list[Any] = [slice(None)] * x.ndim
    dst: list[Any] = [slice(None)] * x.ndim
    empty = False
    for ax, (lo, hi), d in zip(axes, pads, dilation):
        n = x.shape[ax]
        size = max(0, _dilate((n,), (d,))[0] + lo + hi)
        shape[ax] = size
        # Element i lands at lo + i*d; keep those inside [0, size).
        first = 0 if lo >= 0 else (-lo + d - 1) // d
        last = min(n, (size - 1 - lo) // d + 1) if size - 1 - lo >= 0 else 0
        if last <= first:
            empty = True
            continue
        start = lo + first * d
        src[ax] = slice(first, last)
        dst[ax] = slice(start, start + (last - first - 1) * d + 1, d)
    if empty or any(d != 1 for d in dilation):
        out = _scratch.zeros(shape, x.dtype)  # (holes between the elements: zero it all)
    else:  # only the borders around the copied block need zeros
        out = _scratch.empty(shape, x.dtype)
        for ax in axes:
            for border in (slice(0, dst[ax].start), slice(dst[ax].stop, shape[ax])):
                if border.start < border.stop:
                    index: list[Any] = [slice(None)] * x.ndim
                    index[ax] = border
                    out[tuple(index)] = 0
    if not empty:
        out[tuple(dst)] = x[tuple(src)]
    return out


def conv_numpy(lhs: np.ndarray, rhs: np.ndarray, *, window_strides, padding, lhs_dilation,
               rhs_dilation, lhs_spec, rhs_spec, out_spec, feature_group_count,
               batch_group_count, out_dtype) -> np.ndarray:
    """The convolution in NumPy (im2col and a matmul per group); ``padding`` is flat
    ``(lo0, hi0, lo1, hi1, ...)``, ``out_dtype`` the result dtype (a name or dtype)."""
    out_dtype = dtypes.dtype(out_dtype)
    compute = _compute_dtype(lhs.dtype, rhs.dtype, out_dtype)
    acc = K.accumulation_dtype(compute)
    if acc == dtypes.bool_:
        acc = np.dtype(np.int32)
    lhs, rhs = (x.astype(compute, copy=False).astype(acc, copy=False) for x in (lhs, rhs))
    nsp = lhs.ndim - 2
    pads = [(padding[2 * i], padding[2 * i + 1]) for i in range(nsp)]
    res = _conv_logical(lhs, rhs, window_strides, pads, lhs_dilation, rhs_dilation, lhs_spec,
                        rhs_spec, out_spec, feature_group_count, batch_group_count)
    return _finish(res, out_spec, compute, out_dtype)


def _conv_logical(lhs, rhs, window_strides, pads, lhs_dilation, rhs_dilation, lhs_spec,
                  rhs_spec, out_spec, feature_group_count, batch_group_count):
    """``conv_numpy``'s convolution of operands already in the accumulation type, as the
    logical (N, O, out...) result (any strides) in that type."""
    nsp = lhs.ndim - 2
    acc = lhs.dtype
    gb, gf = batch_group_count, feature_group_count
    res = None
    if _FAST_PATHS and any(d > 1 for d in lhs_dilation):
        res = _conv_scatter(lhs, rhs, window_strides, pads, lhs_dilation, rhs_dilation,
                            lhs_spec, rhs_spec, gf, gb)
        if res is None:
            res = _conv_phases(lhs, rhs, window_strides, pads, lhs_dilation, rhs_dilation,
                               lhs_spec, rhs_spec, out_spec, gf, gb)
    if res is None and gb == gf == 1:
        res = _conv_flat(lhs, rhs, window_strides, pads, lhs_dilation, rhs_dilation,
                         lhs_spec, rhs_spec)
    if res is not None:
        return res
    if gb > 1 and lhs.shape[lhs_spec[0]] == gb and _FAST_PATHS:
        res = _conv_depthwise_kernel_grad(lhs, rhs, window_strides, pads, lhs_dilation,
                                          rhs_dilation, lhs_spec, rhs_spec)
        if res is not None:
            return res
    groups = max(gb, gf)
    in_feat, taps = rhs.shape[rhs_spec[1]], math.prod(rhs.shape[d] for d in rhs_spec[2:])
    if _FAST_PATHS and groups <= _MAX_GROUP_LOOP and in_feat * taps >= _MIN_GROUP_CONTRACTION:
        # A few groups with real work each: one ungrouped convolution per group (each takes
        # the fast paths above), slicing the lhs's features (or batch, for batch groups).
        axis = lhs_spec[1] if gf > 1 else lhs_spec[0]
        lg, og = lhs.shape[axis] // groups, rhs.shape[rhs_spec[0]] // groups
        outs = []
        for g in range(groups):
            part = _conv_flat(np.take(lhs, range(g * lg, (g + 1) * lg), axis),
                              np.take(rhs, range(g * og, (g + 1) * og), rhs_spec[0]),
                              window_strides, pads, lhs_dilation, rhs_dilation, lhs_spec,
                              rhs_spec)
            if part is None:
                break
            outs.append(part)
        else:
            return np.concatenate(outs, 1)
    # lhs as (N, S..., C); rhs as (O, I, K...).
    x = lhs.transpose((lhs_spec[0],) + tuple(lhs_spec[2:]) + (lhs_spec[1],))
    w = rhs.transpose(rhs_spec)
    x = _pad_dilate(x, range(1, nsp + 1), pads, lhs_dilation)
    if gb == 1 and w.shape[1] == 1 and _FAST_PATHS:
        res = _conv_depthwise(np.ascontiguousarray(x), w, window_strides, rhs_dilation)
        if res is not None:
            return res
    n, c = x.shape[0], x.shape[-1]
    o, i_feat, ks = w.shape[0], w.shape[1], w.shape[2:]
    eff = _dilate(ks, rhs_dilation)
    out_sp = tuple(max(0, (p - k) // s + 1) if p >= k else 0
                   for p, k, s in zip(x.shape[1:-1], eff, window_strides))
    g = gb * gf
    nb = n // gb
    if 0 in out_sp or nb == 0 or o == 0:
        res = np.zeros((nb, o) + out_sp, acc)
    else:
        win = sliding_window_view(x, eff, axis=tuple(range(1, nsp + 1)))
        # win: (N, P..., C, E...) -> strided outputs and dilated taps.
        idx = ((slice(None),) + tuple(slice(None, None, s) for s in window_strides)
               + (slice(None),) + tuple(slice(None, None, d) for d in rhs_dilation))
        win = win[idx][(slice(None),) + tuple(slice(0, m) for m in out_sp)]
        win = win.reshape((gb, nb) + out_sp + (gf, c // gf) + ks)
        # -> (Gb, Gf, N', out..., K..., I): one matrix of patches per group.
        perm = ((0, 2 + nsp) + tuple(range(1, 2 + nsp))
                + tuple(range(4 + nsp, 4 + 2 * nsp)) + (3 + nsp,))
        patches = win.transpose(perm).reshape(g, nb * math.prod(out_sp), -1)
        og = o // g
        wm = w.reshape((g, og, i_feat) + ks)
        wm = wm.transpose((0,) + tuple(range(3, 3 + nsp)) + (2, 1)).reshape(g, -1, og)
        res = np.matmul(patches, wm)  # (G, N'*out, O')
        res = res.reshape((g, nb) + out_sp + (og,))
        res = res.transpose((1, 0, 2 + nsp) + tuple(range(2, 2 + nsp))).reshape(
            (nb, o) + out_sp)
    return res


def _phase_taps(n, k, stride, lo, dil_l, dil_r, out):
    """One spatial dim of a convolution with input dilation ``dil_l`` split by output phase.

    Output ``o`` reads dilated position ``o*stride + t*dil_r - lo`` for tap ``t``, an input
    element only when that is a multiple of ``dil_l``. The outputs ``o = q*phases + r``
    (``phases = dil_l / gcd(stride, dil_l)``) of one phase ``r`` advance the dilated position
    by a multiple of ``dil_l`` per ``q``, so they all read elements through the same taps:
    ``t0, t0 + tstep, ...``. Returns ``phases`` and, per phase that reads any element, ``(r,
    taps slice, (stride, low pad, high pad, rhs dilation) of a convolution of the undilated
    input whose output q is output o)``."""
    phases = dil_l // math.gcd(stride, dil_l)
    sub_stride = stride * phases // dil_l
    tstep, sub_dil = dil_l // math.gcd(dil_r, dil_l), dil_r // math.gcd(dil_r, dil_l)
    out_phases = []
    for r in range(min(phases, out)):
        t0 = next((t for t in range(min(k, tstep)) if (r * stride + t * dil_r - lo) % dil_l == 0),
                  None)
        if t0 is None:
            continue  # this phase only reads holes and padding: zeros
        ntaps = len(range(t0, k, tstep))
        nq = -(-(out - r) // phases)
        first = (r * stride + t0 * dil_r - lo) // dil_l  # input index of output q=0, tap t0
        padded = (nq - 1) * sub_stride + (ntaps - 1) * sub_dil + 1
        out_phases.append((r, slice(t0, k, tstep),
                           (sub_stride, -first, padded - n + first, sub_dil)))
    return phases, out_phases


def _conv_phases(lhs, rhs, strides, pads, lhs_dilation, rhs_dilation, lhs_spec, rhs_spec,
                 out_spec, feature_groups, batch_groups):
    """A convolution with input dilation (a transposed convolution, the input gradient of a
    strided one) as one convolution of the undilated input per output phase, each with the
    kernel taps of its phase: the dilated input's holes are neither stored nor multiplied (a
    stride-2 2-d transpose did 4x the work on zeros). None when an operand is empty.
    Returns the logical (N, O, out...) result, in memory laid out by ``out_spec``."""
    if 0 in lhs.shape or 0 in rhs.shape:
        return None
    nsp = lhs.ndim - 2
    ns = [lhs.shape[d] for d in lhs_spec[2:]]
    ks = [rhs.shape[d] for d in rhs_spec[2:]]
    padded = [m + lo + hi for m, (lo, hi) in zip(_dilate(ns, lhs_dilation), pads)]
    eff = _dilate(ks, rhs_dilation)
    out_sp = [(p - e) // s + 1 if p >= e else 0 for p, e, s in zip(padded, eff, strides)]
    if 0 in out_sp:
        return None
    dims = [_phase_taps(n, k, s, lo, dl, dr, o) for n, k, s, (lo, _), dl, dr, o in
            zip(ns, ks, strides, pads, lhs_dilation, rhs_dilation, out_sp)]
    logical = (lhs.shape[lhs_spec[0]] // batch_groups, rhs.shape[rhs_spec[0]]) + tuple(out_sp)
    phys = _scratch.empty(tuple(logical[i] for i in np.argsort(out_spec)), lhs.dtype)
    res = phys.transpose(out_spec)
    if math.prod(len(ph) for _, ph in dims) < math.prod(min(p, o) for (p, _), o in
                                                      zip(dims, out_sp)):
        res[...] = 0  # some phases read no input element
    for combo in itertools.product(*(ph for _, ph in dims)):
        taps = [slice(None)] * rhs.ndim
        for d, (_, sl, _) in zip(rhs_spec[2:], combo):
            taps[d] = sl
        sub = _conv_logical(lhs, rhs[tuple(taps)], tuple(c[2][0] for c in combo),
                            [c[2][1:3] for c in combo], (1,) * nsp,
                            tuple(c[2][3] for c in combo), lhs_spec, rhs_spec, out_spec,
                            feature_groups, batch_groups)
        dst = (slice(None), slice(None)) + tuple(slice(c[0], None, p) for c, (p, _) in
                                                 zip(combo, dims))
        res[dst] = sub
    return res


# The custom-call target of a backend's native tap sums for ``_conv_scatter`` (the CPU
# backend's ``tap_sum_kernel.tap_sums``; the registry keeps this layer from importing it).
TAP_SUMS_TARGET = "ember.conv.tap_sums"
# The custom-call target of a backend's direct convolution loop (``_conv_direct``).
DIRECT_TARGET = "ember.conv.direct"
# ... and of its kernel-gradient loop (``_conv_tap_grad``), used for at most this many
# outputs x features (measured: 0.35-0.8 of im2col's time on 3x3 kernel gradients of 1-256
# input features into up to 64).
TAP_GRAD_TARGET = "ember.conv.tap_grad"
_TAP_GRAD_MAX_PAIRS = 2304
# Products per chunk of ``_conv_scatter`` (about 1 MiB of float32: the adds read them from
# cache).
_SCATTER_CHUNK_ELEMENTS = 1 << 18
# ``_scatter_by_rows``: the most products it keeps (64 MiB of float32; larger calls take
# the phases), and the input positions per GEMM block.
_SCATTER_BY_ROWS_MAX_ELEMENTS = 1 << 24
_SCATTER_ROW_BLOCK = 256
_TAP_SUM_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))  # (native tap sums' dtypes)


def _conv_scatter(lhs, rhs, strides, pads, lhs_dilation, rhs_dilation, lhs_spec, rhs_spec,
                  feature_groups, batch_groups):
    """A transposed convolution (input dilation with unit window strides and kernel
    dilation, one group, real floats, at least a batch element per thread) as a scatter of
    products: with every tap's kernel matrix side by side, one GEMM per chunk of batch
    elements gives each input position times each tap, and each tap's block is added into
    the outputs it reaches, ``o = s*i + lo - t`` along each spatial dim. The multiplies are
    the convolution's own, none by the dilation's zeros, in a GEMM as wide as taps x output
    features (``_conv_phases``' per-phase GEMMs are as wide as the output features, where
    BLAS is slow for few of them). Threads take whole batch elements, so each output adds
    its taps in one order whatever the thread count. With fewer batch elements than
    threads, where a backend has native tap sums (``TAP_SUMS_TARGET``), the threads instead
    split the GEMM's rows and then the output rows (``_scatter_by_rows``). Returns the
    logical (N, O, out...) result, or None where this does not apply."""
    if not _FAST_PATHS or feature_groups != 1 or batch_groups != 1 or lhs.dtype.kind != "f" \
            or any(v != 1 for v in strides) or any(v != 1 for v in rhs_dilation) \
            or 0 in lhs.shape or 0 in rhs.shape:
        return None
    n = lhs.shape[lhs_spec[0]]
    ns = [lhs.shape[d] for d in lhs_spec[2:]]
    ks = [rhs.shape[d] for d in rhs_spec[2:]]
    out_sp = tuple(m + lo + hi - k + 1
                   for m, (lo, hi), k in zip(_dilate(ns, lhs_dilation), pads, ks))
    if min(out_sp) <= 0:
        return None
    native = CUSTOM_CALL_TARGETS.get(TAP_SUMS_TARGET)  # (a backend's loop for the adds)
    by_rows = n < _threads()
    if by_rows and (native is None or len(ns) > 2 or lhs.dtype not in _TAP_SUM_DTYPES
                    or n * math.prod(ns) * math.prod(ks) * rhs.shape[rhs_spec[0]]
                    > _SCATTER_BY_ROWS_MAX_ELEMENTS):
        return None  # (the phases split one batch element's rows among the threads)
    nsp = len(ns)
    x = np.ascontiguousarray(lhs.transpose((lhs_spec[0],) + tuple(lhs_spec[2:]) +
                                           (lhs_spec[1],)))
    c = x.shape[-1]
    w = rhs.transpose(rhs_spec)  # (O, I, K...)
    o = w.shape[0]
    taps = list(itertools.product(*(range(k) for k in ks)))
    # (C, taps * O): column t*O + j holds tap t's weights into output feature j
    wall = np.ascontiguousarray(w.reshape(o, c, len(taps)).transpose(1, 2, 0)).reshape(c, -1)
    plan = []  # per tap reaching any output: (tap, input slices, output slices)
    for ti, tap in enumerate(taps):
        src, dst = [], []
        for m, s, (lo, _), size, t in zip(ns, lhs_dilation, pads, out_sp, tap):
            first = max(0, -((lo - t) // s))  # the first i with s*i + lo - t >= 0
            last = min(m - 1, (size - 1 + t - lo) // s)
            if first > last:
                break
            start = s * first + lo - t
            src.append(slice(first, last + 1))
            dst.append(slice(start, start + s * (last - first) + 1, s))
        else:
            plan.append((ti, tuple(src), tuple(dst)))
    out = _scratch.empty((n,) + out_sp + (o,), x.dtype)
    lows = [lo for lo, _ in pads]
    if by_rows:
        _scatter_by_rows(x, wall, out, native, lhs_dilation, lows, ks)
        return out.transpose((0, nsp + 1) + tuple(range(1, nsp + 1)))
    per_element = math.prod(ns) * len(taps) * o
    step = _even_split(n, max(1, _SCATTER_CHUNK_ELEMENTS // per_element))
    chunks = [(a, min(a + step, n)) for a in range(0, n, step)]
    parts = min(_threads(), len(chunks))

    def run(part):
        for a, b in chunks[part::parts]:
            y = np.matmul(x[a:b].reshape(-1, c), wall).reshape(
                (b - a, *ns, len(taps), o))
            dest = out[a:b]
            if native is not None and native(y, dest, lhs_dilation, lows, ks):
                continue
            dest[...] = 0
            for ti, src, dst in plan:
                dest[(slice(None),) + dst] += y[(slice(None),) + src + (ti,)]

    _in_threads(run, parts)
    return out.transpose((0, nsp + 1) + tuple(range(1, nsp + 1)))


def _scatter_by_rows(x, wall, out, native, dilation, lows, ks) -> None:
    """``_conv_scatter`` for fewer batch elements than threads: the threads take blocks of
    the GEMM's rows (input positions; blocks of a fixed size, so the products do not depend
    on the thread count), then ranges of output rows for the native tap sums. ``x``: (N,
    in..., C); ``out``: (N, out..., O), filled."""
    n, *ns, c = x.shape
    pixels = math.prod(ns) * n
    y = _scratch.empty((pixels, wall.shape[1]), x.dtype)
    xm = x.reshape(pixels, c)
    blocks = [(a, min(a + _SCATTER_ROW_BLOCK, pixels))
              for a in range(0, pixels, _SCATTER_ROW_BLOCK)]
    parts = min(_threads(), len(blocks))

    def products(part):
        for a, b in blocks[part::parts]:
            np.matmul(xm[a:b], wall, out=y[a:b])

    _in_threads(products, parts)
    y = y.reshape((n, *ns, -1, out.shape[-1]))  # (N, in..., taps, O)
    rows = n * (out.shape[1] if len(ns) == 2 else 1)
    parts = min(_threads(), rows)
    bounds = [rows * i // parts for i in range(parts + 1)]

    def sums(part):
        if not native(y, out, dilation, lows, ks, (bounds[part], bounds[part + 1])):
            raise RuntimeError("native tap sums refused a transposed convolution")

    _in_threads(sums, parts)


def _finish(res: np.ndarray, out_spec, compute, out_dtype) -> np.ndarray:
    """The logical (N, O, out...) result laid out by ``out_spec``, in ``out_dtype``."""
    res = res.transpose(np.argsort(out_spec))
    if out_dtype == dtypes.bool_:
        return np.ascontiguousarray(res != 0)
    res = res.astype(compute, copy=False).astype(out_dtype, copy=False)
    return res if res.flags.c_contiguous else _scratch.copy(res)


# Grouped convolutions run one ungrouped convolution per group for at most this many groups
# with at least this long a contraction (features per group x taps) each; the others (many
# small groups) take one batched im2col matmul.
_MAX_GROUP_LOOP = 16
_MIN_GROUP_CONTRACTION = 32

# The patches of one chunk (rows x taps*features elements) are at most about this many
# elements (512 KiB of float32, cache-sized), gathered and multiplied by one thread of ours
# running single-threaded BLAS; the chunks are spread over as many threads as there are
# cores. (One BLAS call per chunk with BLAS's own threads synchronizes them per call: on a
# loaded machine a small CNN's fwd+bwd went from 29 ms with one chunk per conv to 180 ms
# with 1 MiB chunks.)
_CHUNK_ELEMENTS = 1 << 17
_MIN_CHUNK_ROWS = 256  # a GEMM needs some rows to be efficient


def _patch_chunks(view: np.ndarray, nrow: int, work) -> None:
    """Calls ``work(part, q0, q1, patches)`` for chunks of the matrix whose rows are the
    first ``nrow`` axes of ``view`` (an overlapping strided view) and whose columns are the
    others, flattened row-major: ``patches`` holds rows ``[q0, q1)``, gathered by one copy.
    Chunks split the first axis, or the second within one index of the first when that is
    too big; thread ``part`` (of ``_chunk_parts``) handles every ``parts``-th chunk."""
    rdims = view.shape[:nrow]
    cols = math.prod(view.shape[nrow:])
    step = max(_MIN_CHUNK_ROWS, _CHUNK_ELEMENTS // max(cols, 1))
    r1, r2 = math.prod(rdims[1:]), math.prod(rdims[2:])
    if r1 <= step:
        per = _even_split(rdims[0], max(1, step // r1))
        chunks = [((slice(i, min(i + per, rdims[0])),), i * r1, min(i + per, rdims[0]) * r1)
                  for i in range(0, rdims[0], per)]
    else:
        per = _even_split(rdims[1], max(1, step // r2))
        chunks = [((i, slice(j, min(j + per, rdims[1]))), i * r1 + j * r2,
                   i * r1 + min(j + per, rdims[1]) * r2)
                  for i in range(rdims[0]) for j in range(0, rdims[1], per)]
    parts = _chunk_parts(view, nrow)
    size = max(q1 - q0 for _, q0, q1 in chunks) * cols

    def run(part):
        buf = np.empty(size, view.dtype)
        for index, q0, q1 in chunks[part::parts]:
            sub = view[index]
            patches = buf[:(q1 - q0) * cols]
            np.copyto(patches.reshape(sub.shape), sub)
            work(part, q0, q1, patches.reshape(q1 - q0, cols))

    _in_threads(run, parts)


def _even_split(n: int, at_most: int) -> int:
    """The size of pieces of ``n`` items, at most ``at_most`` each, in as few pieces as
    that allows, all of about one size: threads that take every other piece then get equal
    work (4096 rows in pieces of 819 made a 1-row sixth piece, and one thread 60% of it)."""
    pieces = max(1, -(-n // at_most))
    return max(1, -(-n // pieces))


def _chunk_parts(view: np.ndarray, nrow: int) -> int:
    """How many threads ``_patch_chunks`` uses for ``view``: one per core, while each gets
    at least a few chunks' work."""
    total = math.prod(view.shape)
    return max(1, min(_threads(), total // (4 * _CHUNK_ELEMENTS)))


def _conv_flat(lhs, rhs, strides, pads, lhs_dilation, rhs_dilation, lhs_spec, rhs_spec):
    """An ungrouped convolution without a whole im2col buffer (None for an empty one).

    The padded lhs is laid out (major, spatial..., minor) in memory; an overlapping strided
    view of it is the patch matrix, gathered chunk by chunk into a cache-sized buffer and
    multiplied by BLAS. Two forms of the same product, chunked along its long dimension:

    - taps form (no more taps than outputs): rows are (batch, output position), columns
      (tap, feature), ``out[rows] = P @ W`` (forward convolutions, input gradients);
    - outputs form (fewer outputs than taps): rows are (feature, tap) and the contraction
      runs over them, ``out += P.T @ K`` (kernel gradients: the sum over batch and space
      has a large inner dimension and a small result).

    Returns the logical (N, O, out...) result."""
    nsp = lhs.ndim - 2
    ks = tuple(rhs.shape[d] for d in rhs_spec[2:])
    lsp = [lhs.shape[d] for d in lhs_spec[2:]]
    padded = [n + lo + hi for n, (lo, hi) in zip(_dilate(lsp, lhs_dilation), pads)]
    eff = _dilate(ks, rhs_dilation)
    out_sp = tuple((p - k) // s + 1 if p >= k else 0
                   for p, k, s in zip(padded, eff, strides))
    if 0 in out_sp or 0 in lhs.shape or 0 in rhs.shape:
        return None
    taps_form = math.prod(ks) <= math.prod(out_sp)
    major, minor = (lhs_spec[0], lhs_spec[1]) if taps_form else (lhs_spec[1], lhs_spec[0])
    x = lhs.transpose((major,) + tuple(lhs_spec[2:]) + (minor,))
    if taps_form:
        res = _conv_direct(x, rhs, out_sp, strides, pads, lhs_dilation, rhs_dilation,
                           rhs_spec)
        if res is not None:
            return res
    x = np.ascontiguousarray(_pad_dilate(x, range(1, nsp + 1), pads, lhs_dilation))
    res = _conv_shifted(x, rhs, taps_form, ks, out_sp, strides, rhs_dilation, rhs_spec) \
        if taps_form else _conv_tap_grad(x, rhs, out_sp, strides, rhs_dilation, rhs_spec)
    if res is not None:
        return res
    sp = x.strides[1:-1]
    by_out = tuple(st * s for st, s in zip(sp, strides))
    by_tap = tuple(st * d for st, d in zip(sp, rhs_dilation))
    w = rhs.transpose(rhs_spec)  # (O, I, K...)
    o = w.shape[0]
    n_major, n_minor = x.shape[0], x.shape[-1]
    if taps_form:
        view = as_strided(x, shape=(n_major,) + out_sp + ks + (n_minor,),
                          strides=(x.strides[0],) + by_out + by_tap + (x.strides[-1],),
                          writeable=False)
        wm = np.ascontiguousarray(w.transpose(tuple(range(2, 2 + nsp)) + (1, 0))).reshape(
            -1, o)
        out = _scratch.empty((n_major * math.prod(out_sp), o), x.dtype)

        def product(part, q0, q1, patches):
            np.matmul(patches, wm, out=out[q0:q1])

        _patch_chunks(view, 1 + nsp, product)
        out = out.reshape((n_major,) + out_sp + (o,))
        return out.transpose((0, nsp + 1) + tuple(range(1, nsp + 1)))
    view = as_strided(x, shape=(n_major,) + ks + out_sp + (n_minor,),
                      strides=(x.strides[0],) + by_tap + by_out + (x.strides[-1],),
                      writeable=False)
    kern = np.ascontiguousarray(w.transpose(tuple(range(1, 2 + nsp)) + (0,))).reshape(-1, o)
    parts = _chunk_parts(view, 1 + nsp)
    acc = np.zeros((parts, math.prod(out_sp) * n_minor, o), x.dtype)
    tmp = np.empty_like(acc)

    def accumulate(part, q0, q1, patches):
        np.matmul(patches.T, kern[q0:q1], out=tmp[part])
        acc[part] += tmp[part]

    _patch_chunks(view, 1 + nsp, accumulate)
    res = (acc.sum(0) if parts > 1 else acc[0]).reshape(out_sp + (n_minor, o))
    return res.transpose((nsp, nsp + 1) + tuple(range(nsp)))


# The shifted-rows kernels (below) compute over the whole padded grid: they are used while
# that wastes at most this fraction of the work over the valid positions, and (GEMM per tap)
# for at least this many input features: with fewer, im2col's longer GEMM (its chunks in
# cache) was as fast or faster on a 2-core machine (the two were within noise at 64).
_SHIFTED_MAX_WASTE = 1.6
_SHIFTED_MIN_FEATURES = 64
# Convolutions with at most this many input features run on a backend's native direct loop
# where it has one and takes them (``_conv_direct``): against im2col, 3x3 convolutions of
# (16, 28, 28, C) for C = 8-48 took 0.5-0.9 of the time (up to 64 outputs; 128 with C = 8),
# 1x1 ones of 64-128 features 0.7-0.9 of the per-tap GEMMs' (``_conv_shifted``).
_DIRECT_MAX_FEATURES = 64
# Rows per block of the GEMMs per tap: the block of the output stays in cache over the taps.
_TAPS_BLOCK_ELEMENTS = 1 << 17
_FAST_PATHS = True  # tests turn the paths below and the group loop off (plain im2col)


def _conv_direct(x, rhs, out_sp, strides, pads, lhs_dilation, rhs_dilation, rhs_spec):
    """``_conv_flat``'s taps form by a backend's native loop computing each output in
    registers (``DIRECT_TARGET``), for few input features (``_DIRECT_MAX_FEATURES``), where
    im2col's GEMM is short and narrow (None where it does not apply). ``x`` is the lhs as
    (batch, spatial..., features), not yet padded: the loop skips the taps in the padding
    (a padded copy is made only for input dilation or negative padding)."""
    native = CUSTOM_CALL_TARGETS.get(DIRECT_TARGET)
    if not _FAST_PATHS or native is None or x.shape[-1] > _DIRECT_MAX_FEATURES:
        return None
    nsp = x.ndim - 2
    if all(v == 1 for v in lhs_dilation) and all(lo >= 0 and hi >= 0 for lo, hi in pads):
        x, padding = np.ascontiguousarray(x), pads
    else:
        x = np.ascontiguousarray(_pad_dilate(x, range(1, nsp + 1), pads, lhs_dilation))
        padding = None
    w = rhs.transpose(rhs_spec)  # (O, I, K...)
    wm = np.ascontiguousarray(w.transpose(tuple(range(2, 2 + nsp)) + (1, 0)))  # (K..., I, O)
    out = _scratch.empty((x.shape[0],) + tuple(out_sp) + (w.shape[0],), x.dtype)
    if not native(x, wm, out, strides, rhs_dilation, padding=padding):
        return None
    return out.transpose((0, nsp + 1) + tuple(range(1, nsp + 1)))


def _conv_tap_grad(x, rhs, out_sp, strides, rhs_dilation, rhs_spec):
    """``_conv_flat``'s outputs form (a kernel gradient: few outputs, a long contraction) by
    a backend's native loop streaming the positions once per group of outputs
    (``TAP_GRAD_TARGET``), for at most ``_TAP_GRAD_MAX_PAIRS`` outputs x features, where
    im2col's GEMM has that few rows (None where it does not apply). ``x`` is the padded
    lhs as (its features, spatial..., its batch)."""
    native = CUSTOM_CALL_TARGETS.get(TAP_GRAD_TARGET)
    nsp = x.ndim - 2
    if not _FAST_PATHS or native is None \
            or math.prod(out_sp) * x.shape[-1] > _TAP_GRAD_MAX_PAIRS:
        return None
    w = rhs.transpose(rhs_spec)  # (O, I, K...): the positions' values
    dy = np.ascontiguousarray(w.transpose(tuple(range(1, 2 + nsp)) + (0,)))  # (I, K..., O)
    res = native(x, dy, out_sp, strides, rhs_dilation)
    if res is None:
        return None
    return res.transpose((nsp, nsp + 1) + tuple(range(nsp)))


def _conv_shifted(x, rhs, taps_form, ks, out_sp, strides, rhs_dilation, rhs_spec):
    """``_conv_flat``'s taps form as one BLAS GEMM per tap over shifted rows, without im2col
    (None where it does not apply or would be slower).

    With the padded lhs ``x`` flattened to rows (batch, padded spatial...) of features, the
    rows a tap reads for consecutive output positions are consecutive when the positions are
    (stride 1): computed over the whole padded grid (the positions past the valid ones are
    dropped), tap ``t`` reads the plain matrix of rows ``r + off(t)`` and
    ``out[r] += x[r + off(t)] @ W[t]`` accumulates through GEMM's beta. Row blocks are spread
    over our threads, each running single-threaded BLAS.
    """
    if not (_FAST_PATHS and taps_form) or any(v != 1 for v in strides):
        return None
    nsp = x.ndim - 2
    n_major, padded, minor = x.shape[0], x.shape[1:-1], x.shape[-1]
    if minor < _SHIFTED_MIN_FEATURES or \
            math.prod(padded) > _SHIFTED_MAX_WASTE * math.prod(out_sp):
        return None
    blas = _lapack.gemm_fn(x.dtype)
    if blas is None:
        return None
    gemm, ffi, itype = blas
    offs = _tap_offsets(padded, ks, rhs_dilation)
    rows = n_major * math.prod(padded)
    m = rows - offs[-1]  # the last valid position's row is below this
    w = rhs.transpose(rhs_spec)  # (O, I, K...)
    o = w.shape[0]
    wm = np.ascontiguousarray(w.transpose(tuple(range(2, 2 + nsp)) + (1, 0)))  # (K..., I, O)
    out = _scratch.empty((rows, o), x.dtype)
    out[m:] = 0  # never read (past the valid positions); keep the buffer defined
    sz = x.itemsize
    one, zero = np.ones(1, x.dtype), np.zeros(1, x.dtype)
    p_one, p_zero = ffi.from_buffer(one), ffi.from_buffer(zero)
    px = ffi.cast("char*", ffi.from_buffer(x))
    pw = ffi.cast("char*", ffi.from_buffer(wm))
    pout = ffi.cast("char*", ffi.from_buffer(out))
    cell = lambda v: ffi.new(itype + "*", int(v))  # noqa: E731
    # Column-major: out^T (O x rows) = W[t]^T (O x I) @ x_t^T (I x rows).
    M, K, LDO, LDI = cell(o), cell(minor), cell(o), cell(minor)
    # Blocks of about the target size, as many as a multiple of the threads and of equal
    # size: each thread gets the same share of rows.
    parts = _threads()
    target = max(256, _TAPS_BLOCK_ELEMENTS // max(o, minor))
    block = -(-m // (parts * max(1, -(-m // (parts * target)))))
    starts = list(range(0, m, block))
    parts = max(1, min(parts, len(starts)))

    def run(i):
        for r0 in starts[i::parts]:
            N = cell(min(block, m - r0))
            for t, off in enumerate(offs):
                gemm(b"N", b"N", M, N, K, p_one, pw + t * minor * o * sz, LDO,
                     px + (r0 + off) * minor * sz, LDI, p_zero if t == 0 else p_one,
                     pout + r0 * o * sz, LDO, 1, 1)

    _in_threads(run, parts)
    return _valid_positions(out, n_major, padded, out_sp)


def _conv_depthwise(x, w, strides, rhs_dilation):
    """A stride-1 depthwise convolution (one input feature per group) as a multiply-add per
    tap over shifted rows of the padded ``x`` (N, padded..., C), row blocks that stay in
    cache spread over our threads; None where it does not apply. ``w`` is (C*m, 1, K...);
    returns the logical (N, C*m, out...) result."""
    nsp = x.ndim - 2
    n, padded, c = x.shape[0], x.shape[1:-1], x.shape[-1]
    ks = w.shape[2:]
    eff = _dilate(ks, rhs_dilation)
    out_sp = tuple(p - k + 1 for p, k in zip(padded, eff))
    if any(s != 1 for s in strides) or min(out_sp, default=1) <= 0 or 0 in x.shape or \
            0 in w.shape or math.prod(padded) > _SHIFTED_MAX_WASTE * math.prod(out_sp):
        return None
    mult = w.shape[0] // c
    wt = np.ascontiguousarray(w.reshape((c, mult) + ks).transpose(
        tuple(range(2, 2 + nsp)) + (0, 1))).reshape(-1, c, mult)
    offs = _tap_offsets(padded, ks, rhs_dilation)
    rows = n * math.prod(padded)
    m = rows - offs[-1]
    xf = x.reshape(rows, c, 1)
    out = _scratch.empty((rows, c, mult), x.dtype)
    out[m:] = 0  # past the valid positions: never read
    block = max(64, _CHUNK_ELEMENTS // (c * mult))
    starts = list(range(0, m, block))
    parts = max(1, min(_threads(), len(starts) // 2))

    def run(i):
        tmp = np.empty((block, c, mult), x.dtype)
        for r0 in starts[i::parts]:
            r1 = min(r0 + block, m)
            dst, t_ = out[r0:r1], tmp[:r1 - r0]
            np.multiply(xf[r0 + offs[0]:r1 + offs[0]], wt[0], out=dst)
            for t in range(1, len(offs)):
                np.multiply(xf[r0 + offs[t]:r1 + offs[t]], wt[t], out=t_)
                dst += t_

    _in_threads(run, parts)
    return _valid_positions(out.reshape(rows, c * mult), n, padded, out_sp)


def _conv_depthwise_kernel_grad(lhs, rhs, strides, pads, lhs_dilation, rhs_dilation,
                                lhs_spec, rhs_spec):
    """The kernel gradient of a depthwise convolution: one batch group per lhs "batch" entry
    (the gradient's batch groups are the forward's feature groups, its lhs batch the
    forward's features). With the lhs laid out (forward batch, padded..., features) and
    the cotangent (``rhs``) zero-padded onto the same grid, each kernel tap ``t`` is
    ``sum_r x[r + off(t)] * ct[r]`` per feature: a multiply and a column sum per tap over
    cache-sized row blocks spread over our threads (stride-1 forward convolutions; None
    otherwise). Returns the logical (1, O, out...) result."""
    nsp = lhs.ndim - 2
    if any(d != 1 for d in rhs_dilation):
        return None
    x = lhs.transpose((lhs_spec[1],) + tuple(lhs_spec[2:]) + (lhs_spec[0],))
    w = rhs.transpose(rhs_spec)  # (C*mult, N, K...): K are the cotangent's positions
    ks = w.shape[2:]
    lsp = x.shape[1:-1]
    padded = tuple(n + lo + hi for n, (lo, hi) in zip(_dilate(lsp, lhs_dilation), pads))
    out_sp = tuple((p - k) // s + 1 if p >= k else 0 for p, k, s in zip(padded, ks, strides))
    if 0 in out_sp or 0 in x.shape or 0 in w.shape or \
            math.prod(padded) > _SHIFTED_MAX_WASTE * math.prod(ks):
        return None
    x = np.ascontiguousarray(_pad_dilate(x, range(1, nsp + 1), pads, lhs_dilation))
    n, c = x.shape[0], x.shape[-1]
    mult = w.shape[0] // c
    ct = _scratch.zeros((n,) + padded + (c, mult), x.dtype)
    ct[(slice(None),) + tuple(slice(0, k) for k in ks)] = \
        w.reshape((c, mult, n) + ks).transpose((2,) + tuple(range(3, 3 + nsp)) + (0, 1))
    offs = _tap_offsets(padded, out_sp, strides)
    rows = n * math.prod(padded)
    m = rows - offs[-1]  # rows past this hold no cotangent
    xf, cf = x.reshape(rows, c, 1), ct.reshape(rows, c, mult)
    block = max(64, _CHUNK_ELEMENTS // (c * mult))
    starts = list(range(0, m, block))
    parts = max(1, min(_threads(), len(starts) // 2))
    res = np.zeros((parts, len(offs), c, mult), x.dtype)

    def run(i):
        tmp = np.empty((block, c, mult), x.dtype)
        for r0 in starts[i::parts]:
            r1 = min(r0 + block, m)
            t_, cb = tmp[:r1 - r0], cf[r0:r1]
            for t, off in enumerate(offs):
                np.multiply(xf[r0 + off:r1 + off], cb, out=t_)
                res[i, t] += t_.sum(0)

    _in_threads(run, parts)
    res = (res.sum(0) if parts > 1 else res[0]).reshape(out_sp + (c * mult,))
    return res.transpose((nsp,) + tuple(range(nsp)))[None]


def _threads() -> int:
    return _threads_pool.cpu_count()


def _in_threads(fn, parts: int) -> None:
    """``fn(i)`` for ``i < parts``, on ember's thread pool (BLAS releases the GIL), each
    with OpenBLAS on its calling thread (``one_blas_thread``)."""
    def single(i, _):
        fn(i)

    with one_blas_thread:  # (one part too: its small GEMMs lose to BLAS's threads' syncs)
        if parts == 1:
            fn(0)
        else:
            _threads_pool.pool().run(single, [(i, i + 1) for i in range(parts)])


def _tap_offsets(padded, ks, steps) -> list[int]:
    """Row offsets, in the flattened grid ``padded``, of the positions of a window of
    ``ks`` taps ``steps`` apart (row-major over the taps)."""
    rows_per = [math.prod(padded[d + 1:]) for d in range(len(padded))]
    return [sum(i * st * rp for i, st, rp in zip(idx, steps, rows_per))
            for idx in np.ndindex(*ks)]


def _valid_positions(out, n_major, padded, out_sp):
    """A result computed over the whole padded grid, (rows, features), as the logical
    (major, features, out...) array of its valid positions."""
    nsp = len(padded)
    out = out.reshape((n_major,) + tuple(padded) + (-1,))
    out = out[(slice(None),) + tuple(slice(0, v) for v in out_sp)]
    return out.transpose((0, nsp + 1) + tuple(range(1, nsp + 1)))


def _target(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, lhs_spec,
            rhs_spec, out_spec, feature_group_count, batch_group_count, out_dtype):
    return conv_numpy(lhs, rhs, window_strides=window_strides, padding=padding,
                      lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation,
                      lhs_spec=lhs_spec, rhs_spec=rhs_spec, out_spec=out_spec,
                      feature_group_count=int(feature_group_count),
                      batch_group_count=int(batch_group_count), out_dtype=out_dtype)


register_custom_call_target(_TARGET, _target)


# ---------------------------------------------------------------- the primitive


def _flat(padding) -> tuple[int, ...]:
    return tuple(int(v) for p in padding for v in p)


def _conv_shape(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                dimension_numbers, feature_group_count, batch_group_count, precision,
                preferred_element_type):
    if lhs.ndim != rhs.ndim:
        raise TypeError(f"convolution requires lhs and rhs ndim to be equal, got {lhs.ndim} "
                        f"and {rhs.ndim}.")
    lspec, rspec, ospec = dimension_numbers
    nsp = lhs.ndim - 2
    for name, v in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation),
                    ("rhs_dilation", rhs_dilation), ("padding", padding)):
        if len(v) != nsp:
            raise ValueError(f"{_FN} window and {name} must have the same number of "
                             f"dimensions, but got {nsp} and {len(v)}")
        if name != "padding" and any(s <= 0 for s in v):
            raise ValueError(f"{_FN} {name} must be positive, got {tuple(v)}")
    for name, count in (("feature_group_count", feature_group_count),
                        ("batch_group_count", batch_group_count)):
        if count <= 0:
            raise ValueError(f"{_FN} {name} must be a positive integer, got {count}.")
    if feature_group_count > 1 and batch_group_count > 1:
        raise ValueError(f"{_FN} At most one of batch_group_count and feature_group_count "
                         f"may be > 1, got batch_group_count={batch_group_count} and "
                         f"feature_group_count={feature_group_count}.")
    lf, rin, rout = lhs.shape[lspec[1]], rhs.shape[rspec[1]], rhs.shape[rspec[0]]
    if lf % feature_group_count:
        raise ValueError(f"{_FN} feature_group_count must divide lhs feature dimension size, "
                         f"but {feature_group_count} does not divide {lf}.")
    if lf // feature_group_count != rin:
        raise ValueError(f"{_FN} lhs feature dimension size divided by feature_group_count "
                         f"must equal the rhs input feature dimension size, but "
                         f"{lf} // {feature_group_count} != {rin}.")
    if rout % feature_group_count:
        raise ValueError(f"{_FN} rhs output feature dimension size must be a multiple of "
                         f"feature_group_count, but {rout} is not a multiple of "
                         f"{feature_group_count}.")
    lb = lhs.shape[lspec[0]]
    if lb % batch_group_count:
        raise ValueError(f"{_FN} batch_group_count must divide lhs batch dimension size, but "
                         f"{batch_group_count} does not divide {lb}.")
    if rout % batch_group_count:
        raise ValueError(f"{_FN} rhs output feature dimension size must be a multiple of "
                         f"batch_group_count, but {rout} is not a multiple of "
                         f"{batch_group_count}.")
    lsp = _dilate([lhs.shape[d] for d in lspec[2:]], lhs_dilation)
    ksp = _dilate([rhs.shape[d] for d in rspec[2:]], rhs_dilation)
    out_sp = []
    for n, (lo, hi), k, s in zip(lsp, padding, ksp, window_strides):
        padded = n + lo + hi
        out_sp.append(max(0, (padded - k) // s + 1) if padded >= k else 0)
    logical = (lb // batch_group_count, rout) + tuple(out_sp)
    out = [0] * lhs.ndim
    for i, d in enumerate(ospec):
        out[d] = logical[i]
    return tuple(out)


def _conv_dtype(lhs, rhs, *, preferred_element_type, **_):
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"lax.conv_general_dilated requires arguments to have the same "
                        f"dtypes, got {lhs.dtype}, {rhs.dtype}.")
    base.check_dtype(_FN, "lhs", lhs.dtype, base.all_dtypes)
    return lhs.dtype if preferred_element_type is None else np.dtype(preferred_element_type)


def _conv_impl(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
               dimension_numbers, feature_group_count, batch_group_count, precision,
               preferred_element_type):
    out_dtype = lhs.dtype if preferred_element_type is None else preferred_element_type
    lspec, rspec, ospec = dimension_numbers
    return conv_numpy(lhs, rhs, window_strides=window_strides, padding=_flat(padding),
                      lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation, lhs_spec=lspec,
                      rhs_spec=rspec, out_spec=ospec, feature_group_count=feature_group_count,
                      batch_group_count=batch_group_count, out_dtype=out_dtype)


conv_general_dilated_p = standard_primitive(
    "conv_general_dilated", _conv_impl, _conv_shape, _conv_dtype,
    lambda lhs, rhs, **_: lhs.weak_type and rhs.weak_type)


@conv_general_dilated_p.def_lowering
def _conv_lowering(ctx, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                   dimension_numbers, feature_group_count, batch_group_count, precision,
                   preferred_element_type):
    out = ctx.aval_out
    lspec, rspec, ospec = dimension_numbers
    return ctx.b.op("custom_call", lhs, rhs, shape=Shape(out.dtype, tuple(out.shape)),
                    call_target_name=_TARGET, window_strides=tuple(window_strides),
                    padding=_flat(padding), lhs_dilation=tuple(lhs_dilation),
                    rhs_dilation=tuple(rhs_dilation), lhs_spec=tuple(lspec),
                    rhs_spec=tuple(rspec), out_spec=tuple(ospec),
                    feature_group_count=feature_group_count,
                    batch_group_count=batch_group_count, out_dtype=np.dtype(out.dtype).name)


# ---------------------------------------------------------------- autodiff


def _split_axis(x: Any, axis: int, parts: int) -> Any:
    """Axis ``axis`` of size ``parts * m`` becomes two axes ``(parts, m)``."""
    shape = core.get_aval(x).shape
    return reshape(x, shape[:axis] + (parts, shape[axis] // parts) + shape[axis + 1:])


def _merge_axis(x: Any, src: int, dst: int) -> Any:
    """Axis ``src`` folded into axis ``dst`` as its major part (the result drops ``src``)."""
    x = moveaxis(x, src, dst - 1 if src < dst else dst)
    d = dst - 1 if src < dst else dst
    shape = core.get_aval(x).shape
    return reshape(x, shape[:d] + (shape[d] * shape[d + 1],) + shape[d + 2:])


def _swap_io(spec: Sequence[int]) -> tuple[int, ...]:
    return (spec[1], spec[0]) + tuple(spec[2:])


def _conv_transpose_lhs(ct, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                        dimension_numbers, feature_group_count, batch_group_count, precision,
                        preferred_element_type):
    # d lhs = a correlation of ct (dilated by the strides) with the flipped kernel, the
    # kernel's in/out features swapped; groups of rhs output features move into its input
    # features. Batch groups become feature groups, then go back into lhs's batch dim.
    lspec, rspec, ospec = dimension_numbers
    lhs_shape = lhs.aval.shape
    rhs_shape = core.get_aval(rhs).shape
    groups = max(feature_group_count, batch_group_count)
    if groups > 1:
        rhs = _split_axis(rhs, rspec[0], groups)
        o_ax, i_ax = rspec[0], rspec[1] + (1 if rspec[1] > rspec[0] else 0)
        rhs = _merge_axis(rhs, o_ax, i_ax)
    ksp = _dilate([rhs_shape[d] for d in rspec[2:]], rhs_dilation)
    lsp = _dilate([lhs_shape[d] for d in lspec[2:]], lhs_dilation)
    osp = _dilate([core.get_aval(ct).shape[d] for d in ospec[2:]], window_strides)
    pads = []
    for k, n, o, (lo, _) in zip(ksp, lsp, osp, padding):
        before = k - lo - 1
        pads.append((before, n + k - 1 - o - before))
    out = conv_general_dilated_p.bind(
        ct, rev(rhs, tuple(rspec[2:])), window_strides=tuple(lhs_dilation),
        padding=tuple(pads), lhs_dilation=tuple(window_strides),
        rhs_dilation=tuple(rhs_dilation),
        dimension_numbers=ConvDimensionNumbers(ospec, _swap_io(rspec), lspec),
        feature_group_count=groups, batch_group_count=1, precision=precision,
        preferred_element_type=preferred_element_type)
    if batch_group_count > 1:
        out = _split_axis(out, lspec[1], batch_group_count)
        b_ax = lspec[0] + (1 if lspec[0] > lspec[1] else 0)
        out = _merge_axis(out, lspec[1], b_ax)
    return E.convert_element_type(out, lhs.aval.dtype, lhs.aval.weak_type)


def _conv_transpose_rhs(ct, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                        dimension_numbers, feature_group_count, batch_group_count, precision,
                        preferred_element_type):
    # d rhs = a correlation of lhs with ct, batch and feature roles swapped: strides and
    # rhs dilation trade places; feature groups become batch groups and vice versa.
    lspec, rspec, ospec = dimension_numbers
    lhs_shape = core.get_aval(lhs).shape
    rhs_shape = rhs.aval.shape
    ct_shape = core.get_aval(ct).shape
    lsp = _dilate([lhs_shape[d] for d in lspec[2:]], lhs_dilation)
    ksp = _dilate([rhs_shape[d] for d in rspec[2:]], rhs_dilation)
    osp = _dilate([ct_shape[d] for d in ospec[2:]], window_strides)
    pads = [(lo, o - n + k - lo - 1) for n, k, o, (lo, _) in zip(lsp, ksp, osp, padding)]
    out = conv_general_dilated_p.bind(
        lhs, ct, window_strides=tuple(rhs_dilation), padding=tuple(pads),
        lhs_dilation=tuple(lhs_dilation), rhs_dilation=tuple(window_strides),
        dimension_numbers=ConvDimensionNumbers(_swap_io(lspec), _swap_io(ospec),
                                               _swap_io(rspec)),
        feature_group_count=batch_group_count, batch_group_count=feature_group_count,
        precision=precision, preferred_element_type=preferred_element_type)
    return E.convert_element_type(out, rhs.aval.dtype, rhs.aval.weak_type)


def _conv_transpose(ct, lhs, rhs, **params):
    if ad.is_undefined_primal(lhs) == ad.is_undefined_primal(rhs):
        raise ValueError("conv_general_dilated: can transpose with respect to exactly one "
                         "operand")
    if ad.is_undefined_primal(lhs):
        return [_conv_transpose_lhs(ct, lhs, rhs, **params), None]
    return [None, _conv_transpose_rhs(ct, lhs, rhs, **params)]


ad.defjvp(conv_general_dilated_p,
          lambda g, lhs, rhs, **params: conv_general_dilated_p.bind(g, rhs, **params),
          lambda g, lhs, rhs, **params: conv_general_dilated_p.bind(lhs, g, **params))
E.def_transpose(conv_general_dilated_p, _conv_transpose)


# ---------------------------------------------------------------- batching


def _fold_in(x: Any, bdim: int, axis: int, groups: int = 1) -> Any:
    """Folds the batch dim ``bdim`` of ``x`` into ``axis`` (an axis of the unbatched
    operand), inside each of ``groups`` groups of that axis: sizes (G, B, rest)."""
    x = moveaxis(x, bdim, 0)
    shape = core.get_aval(x).shape
    b, n = shape[0], shape[axis + 1]
    x = reshape(x, (b,) + shape[1:axis + 1] + (groups, n // groups) + shape[axis + 2:])
    x = moveaxis(x, 0, axis + 1)  # (..., G, B, rest, ...)
    s = core.get_aval(x).shape
    return reshape(x, s[:axis] + (n * b,) + s[axis + 3:])


def _fold_out(x: Any, axis: int, b: int, groups: int = 1) -> Any:
    """The inverse of ``_fold_in``: splits ``axis`` (sizes (G, B, rest)) and puts B first."""
    s = core.get_aval(x).shape
    n = s[axis] // b
    x = reshape(x, s[:axis] + (groups, b, n // groups) + s[axis + 1:])
    x = moveaxis(x, axis + 1, 0)
    s = core.get_aval(x).shape
    return reshape(x, s[:axis + 1] + (n,) + s[axis + 3:])


@conv_general_dilated_p.def_batching
def _conv_batch(vals, dims, **params):
    (lhs, rhs), (dl, dr) = vals, dims
    lspec, rspec, ospec = params["dimension_numbers"]
    fgc, bgc = params["feature_group_count"], params["batch_group_count"]
    if dl is not not_mapped and dr is not not_mapped:
        b = core.get_aval(lhs).shape[dl]
        # Each batch member is one more group: of the batch when batch-grouped, else of
        # the features.
        if bgc > 1:
            lhs = _fold_in(lhs, dl, lspec[0])
            params = dict(params, batch_group_count=bgc * b)
        else:
            lhs = _fold_in(lhs, dl, lspec[1])
            params = dict(params, feature_group_count=fgc * b)
        rhs = _fold_in(rhs, dr, rspec[0])
        out = conv_general_dilated_p.bind(lhs, rhs, **params)
        return _fold_out(out, ospec[1], b), 0
    if dl is not not_mapped:
        b = core.get_aval(lhs).shape[dl]
        lhs = _fold_in(lhs, dl, lspec[0], bgc)
        out = conv_general_dilated_p.bind(lhs, rhs, **params)
        return _fold_out(out, ospec[0], b), 0
    b = core.get_aval(rhs).shape[dr]
    groups = max(fgc, bgc)
    rhs = _fold_in(rhs, dr, rspec[0], groups)
    out = conv_general_dilated_p.bind(lhs, rhs, **params)
    return _fold_out(out, ospec[1], b, groups), 0


# ---------------------------------------------------------------- user API


def _int_seq(fn: str, arg: str, v: Any, n: int) -> tuple[int, ...]:
    if v is None:
        return (1,) * n
    try:
        out = tuple(v)
    except TypeError:
        raise TypeError(f"{fn}: {arg} must be a sequence of integers, got {v!r}") from None
    for d in out:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"{fn}: {arg} must be a sequence of integers, got {v!r}")
    return tuple(int(d) for d in out)


def _explicit_pads(fn: str, padding: Any, n: int) -> tuple[tuple[int, int], ...]:
    try:
        pads = tuple((int(lo), int(hi)) for lo, hi in padding)
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: padding must be a string or a sequence of (low, high) integer "
                        f"pairs, got {padding!r}") from None
    if len(pads) != n:
        raise TypeError(f"Wrong number of explicit pads for convolution: expected {n}, got "
                        f"{len(pads)}.")
    return pads


def conv_general_dilated(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any,
                         lhs_dilation: Sequence[int] | None = None,
                         rhs_dilation: Sequence[int] | None = None,
                         dimension_numbers: Any = None, feature_group_count: int = 1,
                         batch_group_count: int = 1, precision: Any = None,
                         preferred_element_type: Any = None) -> Any:
    """General n-d convolution (XLA's ConvGeneralDilated; a cross-correlation, unflipped).

    Args:
        lhs: the input, rank n+2.
        rhs: the kernel, rank n+2.
        window_strides: n strides.
        padding: 'VALID', 'SAME', 'SAME_LOWER' or n ``(low, high)`` pairs.
        lhs_dilation: n input dilations (transposed convolution), default 1.
        rhs_dilation: n kernel dilations (atrous convolution), default 1.
        dimension_numbers: None (NCHW/OIHW/NCHW), a ``ConvDimensionNumbers`` or three
            strings such as ``('NHWC', 'HWIO', 'NHWC')``.
        feature_group_count: groups of input features (depthwise convolutions).
        batch_group_count: groups of the batch (gradients of grouped convolutions).
        precision: recorded, the CPU computes exactly.
        preferred_element_type: the result dtype.

    Returns:
        The convolution, laid out by ``dimension_numbers``' out spec.

    Example:
        >>> x, k = jnp.ones((1, 1, 5)), jnp.ones((1, 1, 3))
        >>> lax.conv_general_dilated(x, k, (1,), "SAME")
        Array([[[2., 3., 3., 3., 2.]]], dtype=float32)
    """
    lhs = base.as_operand(lhs, _FN, "lhs")
    rhs = base.as_operand(rhs, _FN, "rhs")
    la, ra = core.get_aval(lhs), core.get_aval(rhs)
    dn = conv_dimension_numbers(la.shape, ra.shape, dimension_numbers)
    n = la.ndim - 2
    strides = _int_seq(_FN, "window_strides", window_strides, n)
    lhs_dilation = _int_seq(_FN, "lhs_dilation", lhs_dilation, n)
    rhs_dilation = _int_seq(_FN, "rhs_dilation", rhs_dilation, n)
    for name, v in (("window_strides", strides), ("lhs_dilation", lhs_dilation),
                    ("rhs_dilation", rhs_dilation)):
        if len(v) != n:
            raise ValueError(f"{_FN} window and {name} must have the same number of "
                             f"dimensions, but got {n} and {len(v)}")
    if isinstance(padding, str):
        if any(d != 1 for d in lhs_dilation):
            raise ValueError("String padding is not implemented for transposed convolution "
                             "using this op. Please either exactly specify the required "
                             "padding or use conv_transpose.")
        lsp = _dilate([la.shape[d] for d in dn.lhs_spec[2:]], lhs_dilation)
        ksp = _dilate([ra.shape[d] for d in dn.rhs_spec[2:]], rhs_dilation)
        if any(s <= 0 for s in strides):
            raise ValueError(f"{_FN} window_strides must be positive, got {strides}")
        pads = tuple(padtype_to_pads(lsp, ksp, strides, padding))
    else:
        pads = _explicit_pads(_FN, padding, n)
    for name, v in (("feature_group_count", feature_group_count),
                    ("batch_group_count", batch_group_count)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{_FN}: {name} must be an integer, got {v!r}")
    return conv_general_dilated_p.bind(
        lhs, rhs, window_strides=strides, padding=pads, lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation, dimension_numbers=dn,
        feature_group_count=int(feature_group_count), batch_group_count=int(batch_group_count),
        precision=canonicalize_precision(precision, _FN),
        preferred_element_type=_preferred(preferred_element_type))


def conv(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: str,
         precision: Any = None, preferred_element_type: Any = None) -> Any:
    """Convolution in NCHW/OIHW layout without dilation.

    Example:
        >>> lax.conv(jnp.ones((1, 1, 4, 4)), jnp.ones((2, 1, 3, 3)), (1, 1), "VALID").shape
        (1, 2, 2, 2)
    """
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs: Any, rhs: Any, window_strides: Sequence[int],
                              padding: Any, lhs_dilation: Sequence[int] | None,
                              rhs_dilation: Sequence[int] | None, precision: Any = None,
                              preferred_element_type: Any = None) -> Any:
    """Convolution in NCHW/OIHW layout with explicit padding and dilations.

    Example:
        >>> lax.conv_with_general_padding(jnp.ones((1, 1, 4)), jnp.ones((1, 1, 2)), (1,),
        ...                               [(1, 1)], None, None).shape
        (1, 1, 5)
    """
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                rhs_dilation=rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


def _conv_transpose_padding(k: int, s: int, padding: str) -> tuple[int, int]:
    # Pads of the dilated input so that the output has size in*s ('SAME') or in*s + max(k-s,0)
    # ('VALID'), the sizes of the gradient of a forward conv with those settings.
    if padding == "SAME":
        total = k + s - 2
        lo = k - 1 if s > k - 1 else -(-total // 2)
    elif padding == "VALID":
        total = k + s - 2 + max(k - s, 0)
        lo = k - 1
    else:
        raise ValueError("Padding mode must be `SAME` or `VALID`.")
    return lo, total - lo


_TRANSPOSE_DEFAULT_DN = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"),
                         4: ("NHWC", "HWIO", "NHWC"), 5: ("NHWDC", "HWDIO", "NHWDC")}


def conv_transpose(lhs: Any, rhs: Any, strides: Sequence[int], padding: Any,
                   rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                   transpose_kernel: bool = False, precision: Any = None,
                   preferred_element_type: Any = None) -> Any:
    """Transposed convolution ("deconvolution"): the input dilated by ``strides``.

    With ``transpose_kernel=True`` it is the gradient of ``conv_general_dilated`` with
    respect to its input (the kernel flipped, its in/out features swapped).

    Example:
        >>> lax.conv_transpose(jnp.ones((1, 4, 1)), jnp.ones((3, 1, 1)), (2,), "SAME").shape
        (1, 8, 1)
    """
    fn = "conv_transpose"
    lhs = base.as_operand(lhs, fn, "lhs")
    rhs = base.as_operand(rhs, fn, "rhs")
    la, ra = core.get_aval(lhs), core.get_aval(rhs)
    if la.ndim != ra.ndim or la.ndim < 2:
        raise TypeError(f"{fn}: lhs and rhs must have the same rank >= 2, got shapes "
                        f"{la.shape} and {ra.shape}")
    if dimension_numbers is None:
        if la.ndim not in _TRANSPOSE_DEFAULT_DN:
            raise ValueError("No 4+ dimensional dimension_number defaults.")
        dimension_numbers = _TRANSPOSE_DEFAULT_DN[la.ndim]
    dn = conv_dimension_numbers(la.shape, ra.shape, dimension_numbers)
    n = la.ndim - 2
    strides = _int_seq(fn, "strides", strides, n)
    rhs_dilation = _int_seq(fn, "rhs_dilation", rhs_dilation, n)
    if isinstance(padding, str):
        ksp = _dilate([ra.shape[d] for d in dn.rhs_spec[2:]], rhs_dilation)
        pads = [_conv_transpose_padding(k, s, padding) for k, s in zip(ksp, strides)]
    else:
        pads = padding
    if transpose_kernel:
        rhs = rev(rhs, tuple(dn.rhs_spec[2:]))
        perm = list(range(ra.ndim))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = perm[dn.rhs_spec[1]], perm[dn.rhs_spec[0]]
        rhs = transpose(rhs, tuple(perm))
    return conv_general_dilated(lhs, rhs, (1,) * n, pads, strides, rhs_dilation, dn,
                                precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_patches(lhs: Any, filter_shape: Sequence[int],
                                 window_strides: Sequence[int], padding: Any,
                                 lhs_dilation: Sequence[int] | None = None,
                                 rhs_dilation: Sequence[int] | None = None,
                                 dimension_numbers: Any = None, precision: Any = None,
                                 preferred_element_type: Any = None) -> Any:
    """The patches a convolution with a kernel of ``filter_shape`` would see, as features:
    output feature ``c * prod(filter_shape) + k`` is input feature ``c`` at tap ``k``.

    Example:
        >>> lax.conv_general_dilated_patches(jnp.ones((1, 2, 5)), (3,), (1,), "VALID").shape
        (1, 6, 3)
    """
    fn = "conv_general_dilated_patches"
    lhs = base.as_operand(lhs, fn, "lhs")
    la = core.get_aval(lhs)
    filter_shape = _int_seq(fn, "filter_shape", filter_shape, la.ndim - 2)
    dn = conv_dimension_numbers(la.shape, (1, 1) + filter_shape, dimension_numbers)
    taps = math.prod(filter_shape)
    channels = la.shape[dn.lhs_spec[1]]
    # One one-hot kernel per tap, repeated for each channel (a depthwise convolution).
    eye = np.eye(taps, dtype=la.dtype).reshape((taps, 1) + filter_shape)
    kernel = np.tile(eye, (channels,) + (1,) * (eye.ndim - 1))
    kernel = np.moveaxis(kernel, (0, 1), (dn.rhs_spec[0], dn.rhs_spec[1]))
    return conv_general_dilated(lhs, np.ascontiguousarray(kernel), window_strides, padding,
                                lhs_dilation, rhs_dilation, dn, channels, 1, precision,
                                preferred_element_type)


__all__ = ["ConvDimensionNumbers", "conv_dimension_numbers", "padtype_to_pads",
           "conv_general_dilated", "conv", "conv_with_general_padding", "conv_transpose",
           "conv_general_dilated_patches", "conv_general_dilated_p"]
