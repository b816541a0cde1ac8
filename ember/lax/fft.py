"""The ``fft`` primitive: n-d discrete Fourier transforms over the trailing axes.

``fft[fft_type fft_lengths]`` with ``fft_type`` one of ``FftType.FFT`` (complex -> complex),
``IFFT`` (complex -> complex, divided by the size), ``RFFT`` (real -> the non-negative
frequencies of the last axis, ``n // 2 + 1``) and ``IRFFT`` (its inverse, real output of the
``fft_lengths``). Single precision stays single (float32 <-> complex64), as in JAX; the
kernel (eager, and run by compiled code as a library step: the ``ember.fft`` custom call) is
a backend's native FFT where one is registered for the case (the CPU backend's handles
power-of-two lengths), else ``numpy.fft``. All four are linear: the transpose of FFT/IFFT is
itself, RFFT's is the real part of an FFT of the zero-extended cotangent, IRFFT's a weighted
RFFT (conjugated: JAX's convention for the transpose of a complex-to-real map).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import core, dtypes
from ember.compiler.evaluator import CUSTOM_CALL_TARGETS, register_custom_call_target
from ember.compiler.hlo import Shape
from ember.interpreters import ad
from ember.lax import base
from ember.lax import elementwise as E
from ember.lax.base import standard_primitive
from ember.lax.batch_util import moveaxis
from ember.lax.shape import broadcast_in_dim, pad

_TARGET = "ember.fft"
# A backend's faster kernel: ``fn(x, fft_type, fft_lengths)`` -> the result, or None where
# it has no kernel for the case (see ``fft_kernel``).
NATIVE_TARGET = "ember.fft.native"


class FftType(enum.IntEnum):
    """The kind of transform ``lax.fft`` computes."""

    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3

    def __repr__(self) -> str:
        return f"FftType.{self.name}"

    __str__ = __repr__


_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64),
               np.dtype(np.float64): np.dtype(np.complex128)}
_REAL_OF = {v: k for k, v in _COMPLEX_OF.items()}


def fft_numpy(x: np.ndarray, fft_type: Any, fft_lengths: Sequence[int]) -> np.ndarray:
    """The transform in NumPy (computed in double precision, rounded to x's precision)."""
    fft_type = FftType(fft_type) if not isinstance(fft_type, str) else FftType[fft_type]
    axes = tuple(range(x.ndim - len(fft_lengths), x.ndim))
    lengths = tuple(int(n) for n in fft_lengths)
    if fft_type == FftType.FFT:
        out, dt = np.fft.fftn(x, lengths, axes), x.dtype
    elif fft_type == FftType.IFFT:
        out, dt = np.fft.ifftn(x, lengths, axes), x.dtype
    elif fft_type == FftType.RFFT:
        out, dt = np.fft.rfftn(x, lengths, axes), _COMPLEX_OF[x.dtype]
    else:
        out, dt = np.fft.irfftn(x, lengths, axes), _REAL_OF[x.dtype]
    return np.ascontiguousarray(out.astype(dt, copy=False))


def fft_kernel(x: np.ndarray, fft_type: Any, fft_lengths: Sequence[int]) -> np.ndarray:
    """The transform: the native kernel a backend registered as ``NATIVE_TARGET`` where it
    has one for these lengths and dtype (it answers None otherwise), else NumPy's.

    The kernel is found through the evaluator's registry of custom-call targets, so this
    layer never imports a backend (the CPU backend registers ``fft_kernel.transform``)."""
    native = CUSTOM_CALL_TARGETS.get(NATIVE_TARGET)
    if native is not None:
        out = native(x, int(fft_type), tuple(fft_lengths))
        if out is not None:
            return out
    return fft_numpy(x, fft_type, fft_lengths)


register_custom_call_target(
    _TARGET, lambda x, *, fft_type, fft_lengths: fft_kernel(x, fft_type, fft_lengths))


def _fft_shape(x, *, fft_type, fft_lengths):
    k = len(fft_lengths)
    if not 1 <= k <= 3:
        raise ValueError(f"fft: fft_lengths must have 1 to 3 entries, got {fft_lengths}")
    if x.ndim < k:
        raise ValueError(f"fft: an operand of rank {x.ndim} is too small for "
                         f"{k}-dimensional fft_lengths {fft_lengths}")
    lead, tail = x.shape[:-k], x.shape[-k:]
    want = tuple(fft_lengths)
    if fft_type == FftType.IRFFT:
        want = want[:-1] + (want[-1] // 2 + 1,)
    if tail != want:
        raise ValueError(f"fft: the last {k} dimensions of the operand must be {want} for "
                         f"{fft_type!r} with fft_lengths {fft_lengths}, got shape {x.shape}")
    if fft_type == FftType.RFFT:
        return lead + tail[:-1] + (fft_lengths[-1] // 2 + 1,)
    if fft_type == FftType.IRFFT:
        return lead + tuple(fft_lengths)
    return x.shape


def _fft_dtype(x, *, fft_type, fft_lengths):
    if fft_type == FftType.RFFT:
        base.check_dtype("fft", "operand", x.dtype, (dtypes.float32, dtypes.float64))
        return _COMPLEX_OF[x.dtype]
    base.check_dtype("fft", "operand", x.dtype, base.complex_dtypes)
    return _REAL_OF[x.dtype] if fft_type == FftType.IRFFT else x.dtype


fft_p = standard_primitive(
    "fft", lambda x, *, fft_type, fft_lengths: fft_kernel(x, fft_type, fft_lengths),
    _fft_shape, _fft_dtype, lambda x, **_: False)


@fft_p.def_lowering
def _fft_lowering(ctx, x, *, fft_type, fft_lengths):
    out = ctx.aval_out
    return ctx.b.op("custom_call", x, shape=Shape(out.dtype, tuple(out.shape)),
                    call_target_name=_TARGET, fft_type=int(fft_type),
                    fft_lengths=tuple(fft_lengths))


def _last_axis_weights(n_out: int, n: int, dtype) -> np.ndarray:
    # Each stored frequency of a real signal of length n stands for itself and its mirror,
    # except frequency 0 and (n even) the Nyquist one.
    w = np.full(n_out, 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    return w.astype(dtype)


def _fft_transpose(ct, x, *, fft_type, fft_lengths):
    if fft_type in (FftType.FFT, FftType.IFFT):
        return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=fft_lengths)]
    aval = x.aval
    if fft_type == FftType.RFFT:
        # rfft(x) = fft(complex(x))[..., :n//2+1]: its transpose zero-extends the cotangent,
        # applies the (symmetric) FFT and keeps the real part.
        n = fft_lengths[-1]
        cta = core.get_aval(ct)
        config = [(0, 0, 0)] * (cta.ndim - 1) + [(0, n - cta.shape[-1], 0)]
        full = pad(ct, np.zeros((), cta.dtype), config)
        out = E.real(fft_p.bind(full, fft_type=FftType.FFT, fft_lengths=fft_lengths))
        return [E.convert_element_type(out, aval.dtype, aval.weak_type)]
    r = fft_p.bind(ct, fft_type=FftType.RFFT, fft_lengths=fft_lengths)
    ra = core.get_aval(r)
    w = _last_axis_weights(ra.shape[-1], fft_lengths[-1], _REAL_OF[ra.dtype])
    w = w / math.prod(fft_lengths)
    scaled = E.mul(r, E.convert_element_type(
        broadcast_in_dim(w, ra.shape, (ra.ndim - 1,)), ra.dtype, False))
    return [E.convert_element_type(E.conj(scaled), aval.dtype, aval.weak_type)]


ad.deflinear2(fft_p, _fft_transpose)


@fft_p.def_batching
def _fft_batch(vals, dims, *, fft_type, fft_lengths):
    (x,), (d,) = vals, dims
    return fft_p.bind(moveaxis(x, d, 0), fft_type=fft_type, fft_lengths=fft_lengths), 0


def _fft_type(fft_type: Any) -> FftType:
    if isinstance(fft_type, FftType):
        return fft_type
    if isinstance(fft_type, str) and fft_type.upper() in FftType.__members__:
        return FftType[fft_type.upper()]
    if isinstance(fft_type, (int, np.integer)) and not isinstance(fft_type, bool):
        return FftType(int(fft_type))
    raise TypeError(f"fft: fft_type must be a lax.FftType or one of 'fft', 'ifft', 'rfft', "
                    f"'irfft', got {fft_type!r}")


def fft(x: Any, fft_type: Any, fft_lengths: Sequence[int]) -> Any:
    """Discrete Fourier transform over the last ``len(fft_lengths)`` axes of ``x``.

    Args:
        x: complex for FFT/IFFT/IRFFT, real for RFFT.
        fft_type: a ``lax.FftType`` (or its name as a string).
        fft_lengths: the transform's sizes (1 to 3 axes).

    Returns:
        The transform; IFFT and IRFFT divide by ``prod(fft_lengths)``.

    Example:
        >>> lax.fft(jnp.array([1., 2., 3.], jnp.complex64), lax.FftType.FFT, (3,))
        Array([ 6.+0.j       , -1.5+0.8660254j, -1.5-0.8660254j], dtype=complex64)
    """
    x = base.as_operand(x, "fft", "x")
    typ = _fft_type(fft_type)
    lengths = base.check_shape("fft", "fft_lengths", fft_lengths)
    # As in JAX: integer and boolean operands become float32 (RFFT) or complex64, real
    # operands of the complex transforms become complex.
    dt = np.dtype(core.get_aval(x).dtype)
    if typ == FftType.RFFT:
        if dt.kind == "c":
            raise ValueError("fft: only real valued inputs supported for rfft")
        if dt.kind in "biu":
            x = E.convert_element_type(x, np.dtype(np.float32), False)
        elif dt not in _COMPLEX_OF:
            raise ValueError(f"fft: RFFT input must be float32 or float64, got {dt}")
    elif dt.kind != "c":
        x = E.convert_element_type(x, _COMPLEX_OF.get(dt, np.dtype(np.complex64)), False)
    if not lengths:
        return x
    return fft_p.bind(x, fft_type=typ, fft_lengths=lengths)


__all__ = ["FftType", "fft", "fft_p"]
