"""LLVM IR for one element of the elementwise ops on complex numbers, in front of ``scalar_ops``.

A complex64/complex128 element lives in registers as a ``Complex`` pair of float/double
values and in memory as ``[2 x float]``/``[2 x double]`` (NumPy's layout), so loops over
complex arrays are loops over interleaved floats, which the loop vectorizer handles.

The functions here (``load``, ``store``, ``const``, ``unary``, ``binary``, ``select``) take any
dtype: complex ones are computed here with the evaluator's (NumPy's) formulas, the others are
passed on to ``scalar_ops``. Arithmetic, ``abs``, ``sign``, ``exp``, ``log``, ``sqrt``,
``sin``/``cos``/``tan``, ``sinh``/``cosh``/``tanh``, ``real``/``imag``/``conj``/``complex``,
conversions, ``==``/``!=`` and ``select`` have native code, with XLA's results at the special
values where they differ from C99's (``nan + i nan`` where C99 keeps a part), else C99's
(glibc's where C99 leaves a sign open); the other complex functions (``power``,
``arcsinh``...) raise ``UnsupportedOp`` (their fusions run through the evaluator), as do
complex values in reductions, scatters and scans (``check_instruction``). Complex sums and
cumulative sums do not get here: the algebraic simplifier turns them into float sums of the
parts (``complex_sum_as_parts``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from llvmlite import ir

from ember.backends.cpu import scalar_ops as S
from ember.backends.cpu import vecmath
from ember.backends.cpu.scalar_ops import UnsupportedOp
from ember.compiler.hlo import ELEMENTWISE, Instruction

# Ops that may produce or consume complex values in a native kernel: elementwise ops (those
# without native code raise when emitted) and the index ops the element emitter handles.
_COMPLEX_OPCODES = ELEMENTWISE | {
    "parameter", "constant", "broadcast_in_dim", "reshape", "transpose", "slice", "reverse",
    "concatenate", "pad", "gather", "dynamic_slice", "dot_general", "tuple",
}


class Complex(NamedTuple):
    """A complex element in registers: its real and imaginary parts."""

    re: ir.Value
    im: ir.Value


def is_complex(dt) -> bool:
    return np.dtype(dt).kind == "c"


def part_dtype(dt) -> np.dtype:
    """The dtype of a complex dtype's real and imaginary parts."""
    return np.dtype(np.float64 if np.dtype(dt) == np.complex128 else np.float32)


def check_instruction(inst: Instruction) -> None:
    """Raises ``UnsupportedOp`` unless a native kernel can hold ``inst``."""
    leaves = inst.shape.leaves() if inst.shape.is_tuple else (inst.shape,)
    for leaf in leaves:
        if is_complex(leaf.dtype):
            if inst.opcode not in _COMPLEX_OPCODES and not _linalg_call(inst) \
                    or leaf.dtype.itemsize > 16:
                raise UnsupportedOp(f"{inst.opcode} on {leaf.dtype}")
        else:
            S.check_dtype(leaf.dtype)


def _linalg_call(inst: Instruction) -> bool:
    """Whether ``inst`` is a linear-algebra custom call that a kernel runs, complex operands
    included (``linalg_steps``: LAPACK's own routines, called from the kernel)."""
    if inst.opcode != "custom_call":
        return False
    from ember.backends.cpu.linalg_steps import is_native_linalg
    return is_native_linalg(inst)


# --------------------------------------------------------------------------- memory


def load(b: ir.IRBuilder, ptr: ir.Value, dt) -> ir.Value | Complex:
    """Loads an element from a pointer of ``memory_type(dt)*``."""
    if not is_complex(dt):
        return S.load(b, ptr, dt)
    zero = ir.Constant(S.I32, 0)
    return Complex(b.load(b.gep(ptr, [zero, zero], inbounds=True)),
                   b.load(b.gep(ptr, [zero, ir.Constant(S.I32, 1)], inbounds=True)))


def store(b: ir.IRBuilder, value, ptr: ir.Value, dt) -> None:
    if not is_complex(dt):
        S.store(b, value, ptr, dt)
        return
    zero = ir.Constant(S.I32, 0)
    b.store(value.re, b.gep(ptr, [zero, zero], inbounds=True))
    b.store(value.im, b.gep(ptr, [zero, ir.Constant(S.I32, 1)], inbounds=True))


def const(dt, value) -> ir.Value | Complex:
    if not is_complex(dt):
        return S.const(dt, value)
    part = part_dtype(dt)
    value = complex(np.asarray(value, dtype=dt)[()])
    return Complex(S.const(part, value.real), S.const(part, value.imag))


def select(b: ir.IRBuilder, cond: ir.Value, x, y):
    """``cond ? x : y`` for register values, complex pairs included."""
    if isinstance(x, Complex):
        return Complex(b.select(cond, x.re, y.re), b.select(cond, x.im, y.im))
    return b.select(cond, x, y)


# --------------------------------------------------------------------------- unary ops


def unary(b: ir.IRBuilder, opcode: str, x, dt, out_dt, attrs: dict):
    """One element of the unary op ``opcode`` on ``x`` (dtype ``dt``, result ``out_dt``)."""
    dt, out_dt = np.dtype(dt), np.dtype(out_dt)
    if opcode == "convert":
        return convert(b, x, dt, out_dt)
    if not is_complex(dt):
        return S.unary(b, opcode, x, dt, out_dt, attrs)
    if opcode == "copy":
        return x
    if opcode == "real":
        return x.re
    if opcode == "imag":
        return x.im
    if opcode == "conj":
        return Complex(x.re, b.fneg(x.im))
    if opcode == "negate":
        return Complex(b.fneg(x.re), b.fneg(x.im))
    if opcode == "abs":
        return magnitude(b, x)
    if opcode == "sign":
        return _in_float64(b, _sign, x)
    if opcode == "exponential":
        return _exp(b, x)
    if opcode == "log":
        return _in_float64(b, _log, x)
    if opcode == "sqrt":
        return _in_float64(b, _sqrt, x)
    if opcode in _TRIGONOMETRIC:
        fn, narrow = _TRIGONOMETRIC[opcode], x.re.type == S.F32
        return _in_float64(b, lambda b, x: fn(b, x, narrow), x)
    raise UnsupportedOp(f"{opcode} on {dt}")


def _in_float64(b: ir.IRBuilder, fn, x: Complex) -> Complex:
    """``fn(x)`` computed in float64 (complex64: the parts widened, the result rounded once,
    which leaves the float64 algorithm's few-ulp errors far below float32's ulp)."""
    if x.re.type == S.F64:
        return fn(b, x)
    out = fn(b, Complex(b.fpext(x.re, S.F64), b.fpext(x.im, S.F64)))
    return Complex(b.fptrunc(out.re, S.F32), b.fptrunc(out.im, S.F32))


def convert(b: ir.IRBuilder, x, src: np.dtype, dst: np.dtype):
    """``convert``: a complex source keeps its real part (to bool: ``x != 0``); a real source
    becomes the real part of a complex result."""
    if not is_complex(src) and not is_complex(dst):
        return S.convert(b, x, src, dst)
    if not is_complex(src):
        part = part_dtype(dst)
        return Complex(S.convert(b, x, src, part), S.const(part, 0.0))
    part = part_dtype(src)
    if is_complex(dst):
        return Complex(S.convert(b, x.re, part, part_dtype(dst)),
                       S.convert(b, x.im, part, part_dtype(dst)))
    if dst == np.bool_:
        zero = S.const(part, 0.0)
        return b.or_(b.fcmp_unordered("!=", x.re, zero), b.fcmp_unordered("!=", x.im, zero))
    return S.convert(b, x.re, part, dst)


_HUGE, _TINY, _DOWN, _UP = 2.0 ** 500, 2.0 ** -500, 2.0 ** -600, 2.0 ** 600


def _f64(value: float) -> ir.Constant:
    return ir.Constant(S.F64, value)


def _power_of_two_scale(b: ir.IRBuilder, big: ir.Value) -> ir.Value:
    """A power of two that brings float64 parts whose larger magnitude is ``big`` near 1
    (exactly: no bits lost) when they are so large or small that squaring them would
    overflow or underflow; else 1."""
    return b.select(b.fcmp_ordered(">", big, _f64(_HUGE)), _f64(_DOWN),
                    b.select(b.fcmp_ordered("<", big, _f64(_TINY)), _f64(_UP), _f64(1.0)))


def magnitude(b: ir.IRBuilder, x: Complex) -> ir.Value:
    """``|x|`` as XLA computes it: no overflow or underflow in between, infinite when either
    part is, NaN when either part is NaN (C's ``hypot``: inf for inf and NaN). float32 parts
    are summed in float64 (exact squares, one rounding at the end); float64 parts are scaled
    by a power of two (exact) into a range where their squares neither overflow nor
    underflow."""
    ty = x.re.type
    re, im = S.fintr(b, "fabs", x.re), S.fintr(b, "fabs", x.im)
    if ty == S.F32:
        wre, wim = b.fpext(re, S.F64), b.fpext(im, S.F64)
        r = b.fptrunc(S.fintr(b, "sqrt", b.fadd(b.fmul(wre, wre), b.fmul(wim, wim))), S.F32)
    else:
        scale = _power_of_two_scale(b, S.fintr(b, "maxnum", re, im))
        sre, sim = b.fmul(re, scale), b.fmul(im, scale)
        root = S.fintr(b, "sqrt", b.fadd(b.fmul(sre, sre), b.fmul(sim, sim)))
        r = b.fdiv(root, scale)
    return r


def _sign(b: ir.IRBuilder, x: Complex) -> Complex:
    """``x / |x|``, 0 at 0 (float64 parts; ``x`` is first scaled by a power of two, so
    ``|x|`` stays finite for every finite ``x``)."""
    scale = _power_of_two_scale(b, S.fintr(b, "maxnum", S.fintr(b, "fabs", x.re),
                                           S.fintr(b, "fabs", x.im)))
    x = Complex(b.fmul(x.re, scale), b.fmul(x.im, scale))
    a = magnitude(b, x)
    is_zero = b.fcmp_ordered("==", a, _f64(0.0))
    safe = b.select(is_zero, _f64(1.0), a)
    return select(b, is_zero, Complex(_f64(0.0), _f64(0.0)),
                  Complex(b.fdiv(x.re, safe), b.fdiv(x.im, safe)))


def _exp(b: ir.IRBuilder, x: Complex) -> Complex:
    """``exp(re) * (cos(im) + i sin(im))`` as XLA: a zero imaginary part is kept (``exp`` of
    a real number stays real, infinities included); a non-finite imaginary part gives
    ``nan + i nan`` (its cosine and sine are NaN; C99 has 0 and ``inf + i nan`` at an
    infinite real part). Where ``exp(re)`` alone overflows but the product may not, it is
    applied as two factors ``exp(re / 2)``."""
    ty = x.re.type
    c = lambda v: ir.Constant(ty, v)  # noqa: E731
    big = b.fcmp_ordered(">", x.re, c(88.0 if ty == S.F32 else 709.0))
    e = vecmath.emit_unary(b, "exponential", b.select(big, b.fmul(x.re, c(0.5)), x.re))
    re = b.fmul(e, vecmath.emit_unary(b, "cosine", x.im))
    im = b.fmul(e, vecmath.emit_unary(b, "sine", x.im))
    out = select(b, big, Complex(b.fmul(re, e), b.fmul(im, e)), Complex(re, im))
    real = b.fcmp_ordered("==", x.im, c(0.0))
    return select(b, real, Complex(b.select(big, b.fmul(e, e), e), x.im), out)


def _log(b: ir.IRBuilder, x: Complex) -> Complex:
    """``log|x| + i atan2(im, re)`` (float64 parts). With ``big``/``small`` the larger and
    smaller magnitude, ``log|x| = log(big) + log1p((small/big)**2) / 2``: no overflow or
    underflow. Near ``|x| = 1`` (``1/2 <= big**2 + small**2 <= 2``) those terms would cancel;
    there it is ``log1p(big**2 - 1 + small**2) / 2`` with the squares and ``big**2 - 1`` split
    exactly into two doubles each (``fma``, a two-sum), so the argument keeps its relative
    accuracy (to ~1e-33 absolute, for points within ~1e-17 of the unit circle). Infinite
    when either part is, NaN when either is NaN (as XLA), ``-inf`` at 0."""
    re, im = S.fintr(b, "fabs", x.re), S.fintr(b, "fabs", x.im)
    big, small = S.fintr(b, "maxnum", re, im), S.fintr(b, "minnum", re, im)
    ratio = b.fdiv(small, big)
    far = b.fadd(vecmath.emit_unary(b, "log", big),
                 b.fmul(_f64(0.5), vecmath.emit_unary(b, "log_plus_one", b.fmul(ratio, ratio))))
    big2, small2 = b.fmul(big, big), b.fmul(small, small)
    big2_lo = S.fintr(b, "fma", big, big, b.fneg(big2))
    small2_lo = S.fintr(b, "fma", small, small, b.fneg(small2))
    minus_one = b.fsub(big2, _f64(1.0))  # exact for big2 >= 1/2; else its error is
    minus_one_lo = b.fsub(big2, b.fadd(minus_one, _f64(1.0)))  # this (Dekker's fast two-sum)
    u = b.fadd(b.fadd(minus_one, small2),
               b.fadd(b.fadd(big2_lo, small2_lo), minus_one_lo))
    near = b.fmul(_f64(0.5), vecmath.emit_unary(b, "log_plus_one", u))
    sum2 = b.fadd(big2, small2)
    is_near = b.and_(b.fcmp_ordered(">=", sum2, _f64(0.5)), b.fcmp_ordered("<=", sum2, _f64(2.0)))
    mag = b.select(is_near, near, far)
    inf = _f64(float("inf"))
    mag = b.select(b.fcmp_ordered("==", big, _f64(0.0)), _f64(-float("inf")), mag)
    mag = b.select(b.or_(b.fcmp_ordered("==", re, inf), b.fcmp_ordered("==", im, inf)),
                   inf, mag)
    mag = b.select(b.fcmp_unordered("uno", re, im), _f64(float("nan")), mag)
    return Complex(mag, vecmath.emit_binary(b, "atan2", x.im, x.re))


def _sqrt(b: ir.IRBuilder, x: Complex) -> Complex:
    """The principal square root (float64 parts): ``t = sqrt((|re| + |x|) / 2)``, then
    ``t + i im/(2t)`` for ``re >= 0`` and ``|im|/(2t) + i copysign(t, im)`` otherwise, with no
    cancellation. Parts past ``2**1000`` are scaled by ``1/4`` (the root by 2) and parts
    below ``2**-1000`` by ``2**600`` (the root by ``2**-300``), exactly, so nothing overflows
    or loses bits as a denormal. C99's ``csqrt`` at the special values: ``sqrt(±0 + i y0)``
    is ``+0 + i y0``, an infinite imaginary part gives ``inf + i im``."""
    re, im = S.fintr(b, "fabs", x.re), S.fintr(b, "fabs", x.im)
    big = S.fintr(b, "maxnum", re, im)
    huge = b.fcmp_ordered(">", big, _f64(2.0 ** 1000))
    tiny = b.fcmp_ordered("<", big, _f64(2.0 ** -1000))
    scale_in = b.select(huge, _f64(0.25), b.select(tiny, _f64(2.0 ** 600), _f64(1.0)))
    scale_out = b.select(huge, _f64(2.0), b.select(tiny, _f64(2.0 ** -300), _f64(1.0)))
    sx = Complex(b.fmul(x.re, scale_in), b.fmul(x.im, scale_in))
    t = S.fintr(b, "sqrt", b.fmul(_f64(0.5), b.fadd(b.fmul(re, scale_in), magnitude(b, sx))))
    other = b.fdiv(b.fmul(im, scale_in), b.fmul(_f64(2.0), t))  # |im| / 2t
    t, other = b.fmul(t, scale_out), b.fmul(other, scale_out)
    negative = b.fcmp_ordered("<", x.re, _f64(0.0))
    out = select(b, negative, Complex(other, b.select(
        b.fcmp_ordered("<", x.im, _f64(0.0)), b.fneg(t), t)),
        Complex(t, S.fintr(b, "copysign", other, x.im)))
    inf = _f64(float("inf"))
    out = select(b, b.and_(b.fcmp_ordered("==", im, inf), b.fcmp_ordered("ord", re, re)),
                 Complex(inf, x.im), out)
    is_zero = b.and_(b.fcmp_ordered("==", re, _f64(0.0)), b.fcmp_ordered("==", im, _f64(0.0)))
    return select(b, is_zero, Complex(_f64(0.0), x.im), out)


def _circular(b: ir.IRBuilder, op: str, v: ir.Value, narrow: bool) -> ir.Value:
    """``sine``/``cosine`` of the float64 ``v``; in float32 when ``narrow`` (``v`` a widened
    float32: float64 sine and cosine reduce every argument by a table, whose loads become
    gathers; float32's own are within 1 ulp, which the float64 result keeps)."""
    if not narrow:
        return vecmath.emit_unary(b, op, v)
    return b.fpext(vecmath.emit_unary(b, op, b.fptrunc(v, S.F32)), S.F64)


def _products(b: ir.IRBuilder, x: Complex, even: bool, narrow: bool) -> Complex:
    """``(cosh re · cos im, sinh re · sin im)`` (``even``) or ``(sinh re · cos im, cosh re ·
    sin im)`` (float64 parts), the parts of ``cosh x`` and ``sinh x``. Past ``|re| = 709``,
    where ``cosh`` alone overflows but a product may not, ``cosh re`` and ``|sinh re|`` are
    ``exp(|re|/2)**2 / 2`` and multiply in as two factors."""
    re = x.re
    sh, ch = (vecmath.emit_unary(b, op, re) for op in ("sinh", "cosh"))
    cos, sin = (_circular(b, op, x.im, narrow) for op in ("cosine", "sine"))
    half = vecmath.emit_unary(b, "exponential", b.fmul(S.fintr(b, "fabs", re), _f64(0.5)))
    big = b.fcmp_ordered(">", S.fintr(b, "fabs", re), _f64(709.0))
    sign = S.fintr(b, "copysign", _f64(0.5), re)

    def product(hyperbolic, g, odd):  # (g times half first: a tiny g must not underflow)
        scaled = b.fmul(b.fmul(b.fmul(half, g), sign if odd else _f64(0.5)), half)
        return b.select(big, scaled, b.fmul(hyperbolic, g))
    if even:
        return Complex(product(ch, cos, False), product(sh, sin, True))
    return Complex(product(sh, cos, True), product(ch, sin, False))


def _sinh(b: ir.IRBuilder, x: Complex, narrow: bool) -> Complex:
    """``sinh re · cos im + i cosh re · sin im`` as XLA: a zero imaginary part stays (a real
    argument has a real result); a non-finite one gives ``nan + i nan`` (its cosine and sine
    are NaN; C99 keeps ``±0 + i nan`` and ``±inf + i nan``)."""
    out = _products(b, x, False, narrow)
    return select(b, b.fcmp_ordered("==", x.im, _f64(0.0)), Complex(out.re, x.im), out)


def _cosh(b: ir.IRBuilder, x: Complex, narrow: bool) -> Complex:
    """``cosh re · cos im + i sinh re · sin im`` as XLA: a zero imaginary part gives a zero
    imaginary part (signed as the product, as C99's ``ccosh``); a non-finite one gives
    ``nan + i nan`` (C99 keeps ``nan ± i0`` and ``inf + i nan``)."""
    out = _products(b, x, True, narrow)
    zero = _f64(0.0)
    signed_zero = b.select(b.fcmp_unordered("uno", x.re, x.re), x.im, b.fmul(
        S.fintr(b, "copysign", _f64(1.0), x.re), S.fintr(b, "copysign", zero, x.im)))
    return select(b, b.fcmp_ordered("==", x.im, zero), Complex(out.re, signed_zero), out)


def _tanh(b: ir.IRBuilder, x: Complex, narrow: bool) -> Complex:
    """``(sinh re cosh re + i sin im cos im) / (sinh(re)**2 + cos(im)**2)`` (float64 parts;
    Kahan's formula with ``1 + tan(im)**2`` written as ``1 / cos(im)**2``: the denominator is
    a sum of squares, so nothing cancels); past ``|re| = 22`` it is ``±1 + i 4 sin(im) cos(im)
    exp(-2|re|)``. Special values as XLA: a zero imaginary part stays, an infinite real part
    gives ``±1 ± i0`` (as C99), a finite one beside a non-finite imaginary part ``nan + i
    nan`` (C99 keeps ``±0 + i nan``)."""
    zero, one, two, inf = _f64(0.0), _f64(1.0), _f64(2.0), _f64(float("inf"))
    # (sinh re cosh re and sin im cos im as sinh(2 re)/2 and sin(2 im)/2: one rounding each)
    cos = _circular(b, "cosine", x.im, narrow)
    sin2 = _circular(b, "sine", b.fmul(two, x.im), narrow)
    huge = b.fcmp_ordered(">", S.fintr(b, "fabs", x.im),  # (2 im overflows)
                          _f64(2.0 ** 100 if narrow else 2.0 ** 1000))
    sin2 = b.select(huge, b.fmul(b.fmul(two, _circular(b, "sine", x.im, narrow)), cos), sin2)
    sh = vecmath.emit_unary(b, "sinh", x.re)
    sh2 = vecmath.emit_unary(b, "sinh", b.fmul(two, x.re))
    denom = b.fmul(two, b.fadd(b.fmul(sh, sh), b.fmul(cos, cos)))
    out = Complex(b.fdiv(sh2, denom), b.fdiv(sin2, denom))
    ax = S.fintr(b, "fabs", x.re)
    tiny = vecmath.emit_unary(b, "exponential", b.fmul(_f64(-2.0), ax))
    far = Complex(S.fintr(b, "copysign", one, x.re), b.fmul(b.fmul(two, sin2), tiny))
    im_finite = b.fcmp_ordered("<", S.fintr(b, "fabs", x.im), inf)
    out = select(b, b.and_(im_finite, b.fcmp_ordered(">", ax, _f64(22.0))), far, out)
    infinite = Complex(S.fintr(b, "copysign", one, x.re),
                       S.fintr(b, "copysign", zero, b.select(im_finite, sin2, x.im)))
    out = select(b, b.fcmp_ordered("==", ax, inf), infinite, out)
    return select(b, b.fcmp_ordered("==", x.im, zero), Complex(out.re, x.im), out)


def _times_i(b: ir.IRBuilder, x: Complex) -> Complex:
    return Complex(b.fneg(x.im), x.re)


def _sin(b: ir.IRBuilder, x: Complex, narrow: bool) -> Complex:
    """``-i sinh(i x)`` (``nan + i nan`` at a non-finite real part, as XLA)."""
    w = _sinh(b, _times_i(b, x), narrow)
    return Complex(w.im, b.fneg(w.re))


def _cos(b: ir.IRBuilder, x: Complex, narrow: bool) -> Complex:
    return _cosh(b, _times_i(b, x), narrow)


def _tan(b: ir.IRBuilder, x: Complex, narrow: bool) -> Complex:
    w = _tanh(b, _times_i(b, x), narrow)
    return Complex(w.im, b.fneg(w.re))


_TRIGONOMETRIC = {"sinh": _sinh, "cosh": _cosh, "tanh": _tanh, "sine": _sin, "cosine": _cos,
                  "tan": _tan}


# --------------------------------------------------------------------------- binary ops


def binary(b: ir.IRBuilder, opcode: str, x, y, dt, out_dt, attrs: dict, y_dt=None):
    """One element of the binary op ``opcode`` (operands of dtype ``dt``)."""
    dt = np.dtype(dt)
    if opcode == "complex":
        return Complex(x, y)
    if not is_complex(dt):
        return S.binary(b, opcode, x, y, dt, out_dt, attrs, y_dt=y_dt)
    if opcode == "add":
        return Complex(b.fadd(x.re, y.re), b.fadd(x.im, y.im))
    if opcode == "subtract":
        return Complex(b.fsub(x.re, y.re), b.fsub(x.im, y.im))
    if opcode == "multiply":
        return Complex(b.fsub(b.fmul(x.re, y.re), b.fmul(x.im, y.im)),
                       b.fadd(b.fmul(x.re, y.im), b.fmul(x.im, y.re)))
    if opcode == "divide":
        return _divide(b, x, y)
    if opcode == "compare" and attrs["comparison_direction"] in ("EQ", "NE"):
        if attrs["comparison_direction"] == "EQ":
            return b.and_(b.fcmp_ordered("==", x.re, y.re), b.fcmp_ordered("==", x.im, y.im))
        return b.or_(b.fcmp_unordered("!=", x.re, y.re), b.fcmp_unordered("!=", x.im, y.im))
    raise UnsupportedOp(f"{opcode} on {dt}")


def _divide(b: ir.IRBuilder, x: Complex, y: Complex) -> Complex:
    """``x / y`` as XLA computes it (the evaluator's ``_complex_divide``): Smith's method,
    dividing through by the divisor's larger part, and where both parts come out NaN, C99's
    limits: a zero divisor gives ``inf * x`` (signed as ``y.re``), an infinite numerator over
    a finite divisor an infinite quotient, a finite numerator over an infinite divisor 0."""
    ty = x.re.type
    one, zero, inf = (ir.Constant(ty, v) for v in (1.0, 0.0, float("inf")))
    fabs = lambda v: S.fintr(b, "fabs", v)  # noqa: E731
    a, bi, c, d = x.re, x.im, y.re, y.im
    by_im = b.fcmp_ordered("<", fabs(c), fabs(d))  # (false where NaN: the second formula)
    ratio = b.select(by_im, b.fdiv(c, d), b.fdiv(d, c))
    denom = b.select(by_im, b.fadd(d, b.fmul(c, ratio)), b.fadd(c, b.fmul(d, ratio)))
    re = b.fdiv(b.select(by_im, b.fadd(b.fmul(a, ratio), bi), b.fadd(b.fmul(bi, ratio), a)),
                denom)
    im = b.fdiv(b.select(by_im, b.fsub(b.fmul(bi, ratio), a), b.fsub(bi, b.fmul(a, ratio))),
                denom)
    is_inf = lambda v: b.fcmp_ordered("==", fabs(v), inf)  # noqa: E731
    finite = lambda v, w: b.and_(b.fcmp_ordered("<", fabs(v), inf),  # noqa: E731
                                 b.fcmp_ordered("<", fabs(w), inf))
    unit = lambda v: S.fintr(b, "copysign", b.select(is_inf(v), one, zero), v)  # noqa: E731
    zero_y = b.and_(b.and_(b.fcmp_ordered("==", c, zero), b.fcmp_ordered("==", d, zero)),
                    b.or_(b.fcmp_ordered("ord", a, a), b.fcmp_ordered("ord", bi, bi)))
    big = S.fintr(b, "copysign", inf, c)
    inf_x = b.and_(b.or_(is_inf(a), is_inf(bi)), finite(c, d))
    sa, sb = unit(a), unit(bi)
    inf_y = b.and_(b.or_(is_inf(c), is_inf(d)), finite(a, bi))
    sc, sd = unit(c), unit(d)
    limit = select(b, zero_y, Complex(b.fmul(big, a), b.fmul(big, bi)), select(
        b, inf_x, Complex(b.fmul(inf, b.fadd(b.fmul(sa, c), b.fmul(sb, d))),
                          b.fmul(inf, b.fsub(b.fmul(sb, c), b.fmul(sa, d)))),
        select(b, inf_y, Complex(b.fmul(zero, b.fadd(b.fmul(a, sc), b.fmul(bi, sd))),
                                 b.fmul(zero, b.fsub(b.fmul(bi, sc), b.fmul(a, sd)))),
               Complex(re, im))))
    both_nan = b.and_(b.fcmp_unordered("uno", re, re), b.fcmp_unordered("uno", im, im))
    return select(b, both_nan, limit, Complex(re, im))
