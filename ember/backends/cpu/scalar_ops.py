"""LLVM IR for one element of every elementwise HLO op, with ember's (the evaluator's) semantics.

Values live in registers as: ``i1`` for pred, ``iN`` for integers (signedness comes from the
dtype), ``float``/``double`` for float32/float64, and ``float`` for float16/bfloat16, rounded to
their precision after every op (``round_low_float``), which is what computing each op in float32
and casting back gives. ``memory_type`` is how an element is stored (pred as ``i8``, float16 as
``half``, bfloat16 as ``i16`` bits).

Integer division and shifts are guarded so no input is undefined behaviour in LLVM: ``x / 0`` is
-1, ``x % 0`` is ``x``, ``INT_MIN / -1`` wraps, out-of-range shift amounts give 0 (or the sign
fill), float-to-int conversion saturates with NaN mapping to 0 — the evaluator's semantics.
Transcendental functions come from ``vecmath`` (straight-line IR, so loops vectorize).

``UnsupportedOp`` is raised for what has no native code (``lgamma``...): the backend then runs
that fusion through the NumPy evaluator instead. Complex numbers are ``complex_ops``' job.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from ember import dtypes
from ember.backends.cpu import vecmath

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
F64 = ir.DoubleType()
HALF = ir.HalfType()

_BF16 = np.dtype(dtypes.bfloat16)
_F16 = np.dtype(np.float16)
LOW_FLOATS = (_F16, _BF16)


class UnsupportedOp(Exception):
    """An op (or dtype) the native code generator does not handle."""


def counted_loop(b: ir.IRBuilder, lo: ir.Value, hi: ir.Value, step: int = 1):
    """Opens ``for i in range(lo, hi, step)`` at ``b``'s position (bounds of one integer
    type); returns ``(i, close)``: emit the body, then call ``close()``, which leaves ``b``
    after the loop."""
    pre = b.block
    fn = pre.function
    head, body, end = (fn.append_basic_block(s) for s in ("head", "body", "end"))
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(lo.type)
    i.add_incoming(lo, pre)
    b.cbranch(b.icmp_signed("<", i, hi), body, end)
    b.position_at_end(body)

    def close():
        i.add_incoming(b.add(i, ir.Constant(lo.type, step), flags=["nsw"]), b.block)
        b.branch(head)
        b.position_at_end(end)
    return i, close


def carried_loop(b: ir.IRBuilder, lo: ir.Value, hi: ir.Value, values: list, body) -> list:
    """``for i in range(lo, hi)`` at ``b``'s position carrying ``values`` in registers
    (phis beside ``counted_loop``'s counter): ``body(i, values)`` emits an iteration and
    returns the next values. Leaves ``b`` after the loop; returns the values there."""
    i, close = counted_loop(b, lo, hi)
    at = ir.IRBuilder(i.parent)
    at.position_after(i)
    pre = i.incomings[0][1]
    phis = []
    for v in values:
        phi = at.phi(v.type)
        phi.add_incoming(v, pre)
        phis.append(phi)
    new = body(i, phis)
    for phi, v in zip(phis, new):
        phi.add_incoming(v, b.block)
    close()
    return phis


def is_float(dt: np.dtype) -> bool:
    return dt.kind == "f" or dt == _BF16


def is_signed(dt: np.dtype) -> bool:
    return dt.kind == "i"


def check_dtype(dt: np.dtype) -> None:
    if dt.kind == "c" or dt == dtypes.float0:
        raise UnsupportedOp(f"dtype {dt}")


def value_type(dt: np.dtype) -> ir.Type:
    """The register type of an element of ``dt``."""
    dt = np.dtype(dt)
    check_dtype(dt)
    if dt == np.bool_:
        return I1
    if dt.kind in "iu":
        return ir.IntType(8 * dt.itemsize)
    if dt == np.float64:
        return F64
    return F32


def memory_type(dt: np.dtype) -> ir.Type:
    """The in-memory type of an element of ``dt`` (complex: ``[2 x float]``, real and imaginary
    parts; ``complex_ops`` holds their register form and ops)."""
    dt = np.dtype(dt)
    if dt == np.complex64 or dt == np.complex128:
        return ir.ArrayType(F32 if dt == np.complex64 else F64, 2)
    check_dtype(dt)
    if dt == np.bool_:
        return I8
    if dt == _F16:
        return HALF
    if dt == _BF16:
        return I16
    return value_type(dt)


def const(dt: np.dtype, value) -> ir.Constant:
    """A register constant of ``dt`` holding ``value`` (a Python or NumPy scalar)."""
    dt = np.dtype(dt)
    ty = value_type(dt)
    if dt == np.bool_:
        return ir.Constant(I1, int(bool(value)))
    if dt.kind in "iu":
        return ir.Constant(ty, int(np.asarray(value).astype(dt).view(f"u{dt.itemsize}")))
    v = float(np.asarray(value, dtype=dt).astype(np.float64))
    return ir.Constant(ty, v)


# --------------------------------------------------------------------------- intrinsics


def intrinsic(b: ir.IRBuilder, name: str, ret: ir.Type, args: list) -> ir.Value:
    """Calls the LLVM intrinsic ``name`` (declared once per module)."""
    module = b.module
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, [a.type for a in args]), name)
    return b.call(fn, args)


def _suffix(ty: ir.Type) -> str:
    if ty == F32:
        return "f32"
    if ty == F64:
        return "f64"
    return f"i{ty.width}"


def fintr(b: ir.IRBuilder, base: str, *args: ir.Value) -> ir.Value:
    """A float intrinsic overloaded on its first argument's type (``llvm.fabs.f32``...)."""
    ty = args[0].type
    return intrinsic(b, f"llvm.{base}.{_suffix(ty)}", ty, list(args))


# --------------------------------------------------------------------------- memory


def load(b: ir.IRBuilder, ptr: ir.Value, dt: np.dtype) -> ir.Value:
    """Loads an element from a pointer of ``memory_type(dt)*`` as a register value."""
    v = b.load(ptr)
    dt = np.dtype(dt)
    if dt == np.bool_:
        return b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
    if dt == _F16:
        return b.fpext(v, F32)
    if dt == _BF16:
        return b.bitcast(b.shl(b.zext(v, I32), ir.Constant(I32, 16)), F32)
    return v


def store(b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, dt: np.dtype) -> None:
    dt = np.dtype(dt)
    if dt == np.bool_:
        value = b.zext(value, I8)
    elif dt == _F16:
        value = b.fptrunc(value, HALF)
    elif dt == _BF16:
        value = _bf16_bits(b, value)
    b.store(value, ptr)


def _bf16_bits(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """float32 -> bfloat16 bits, rounding to nearest even; NaN stays a (quiet) NaN."""
    bits = b.bitcast(x, I32)
    lsb = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
    rounded = b.add(b.add(bits, ir.Constant(I32, 0x7FFF)), lsb)
    nan = b.fcmp_unordered("uno", x, x)
    quiet = b.or_(bits, ir.Constant(I32, 0x00400000))
    out = b.select(nan, quiet, rounded)
    return b.trunc(b.lshr(out, ir.Constant(I32, 16)), I16)


def round_low_float(b: ir.IRBuilder, x: ir.Value, dt: np.dtype) -> ir.Value:
    """Rounds a float32 register value to float16/bfloat16 precision (others: unchanged)."""
    dt = np.dtype(dt)
    if dt == _F16:
        return b.fpext(b.fptrunc(x, HALF), F32)
    if dt == _BF16:
        return b.bitcast(b.shl(b.zext(_bf16_bits(b, x), I32), ir.Constant(I32, 16)), F32)
    return x


# --------------------------------------------------------------------------- conversions


def convert(b: ir.IRBuilder, x: ir.Value, src: np.dtype, dst: np.dtype) -> ir.Value:
    """``convert`` from ``src`` to ``dst`` (register values)."""
    src, dst = np.dtype(src), np.dtype(dst)
    sty, dty = value_type(src), value_type(dst)
    if dst == np.bool_:
        if is_float(src):
            return b.fcmp_unordered("!=", x, ir.Constant(sty, 0.0))
        return b.icmp_unsigned("!=", x, ir.Constant(sty, 0))
    if src == np.bool_:
        return b.uitofp(x, dty) if is_float(dst) else b.zext(x, dty)
    if is_float(src) and is_float(dst):
        if dst == _F16 and sty == F64:  # one rounding, straight to half
            return b.fpext(b.fptrunc(_round_to_odd_f32(b, x), HALF), F32)
        if sty == dty:
            out = x
        elif sty == F32 and dty == F64:
            out = b.fpext(x, dty)
        else:
            out = b.fptrunc(x, dty)
        return round_low_float(b, out, dst)
    if is_float(dst):  # int -> float
        out = b.sitofp(x, dty) if is_signed(src) else b.uitofp(x, dty)
        return round_low_float(b, out, dst)
    if is_float(src):
        return _float_to_int_saturating(b, x, dst)
    if sty.width == dty.width:
        return x
    if sty.width > dty.width:
        return b.trunc(x, dty)
    return b.sext(x, dty) if is_signed(src) else b.zext(x, dty)


def _round_to_odd_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Float64 ``x`` rounded to float32 by round-to-odd: truncated, and the last bit set when
    anything was cut off. Rounding that to half then rounds ``x`` once (float32 keeps more
    than half's 11 bits + 2), and both steps vectorize, where LLVM's double -> half is a
    libm call per element."""
    t = b.fptrunc(x, F32)
    inexact = b.fcmp_ordered("!=", b.fpext(t, F64), x)  # (NaN: false, kept as is)
    bits = b.bitcast(t, I32)
    # rounded away from zero (an overflow to inf too): one step back towards it
    away = b.fcmp_ordered(">", b.fpext(fintr(b, "fabs", t), F64), fintr(b, "fabs", x))
    bits = b.select(away, b.sub(bits, ir.Constant(I32, 1)), bits)
    bits = b.select(inexact, b.or_(bits, ir.Constant(I32, 1)), bits)
    return b.bitcast(bits, F32)


def _float_to_int_saturating(b: ir.IRBuilder, x: ir.Value, dst: np.dtype) -> ir.Value:
    """Float to integer as XLA converts: truncated, saturating out of range, NaN -> 0.

    Written as compares and selects around a plain ``fptosi``/``fptoui`` of an in-range value
    rather than LLVM's ``fptosi.sat``, which the x86 backend turns into one scalar conversion
    per lane (float32 -> int32 on 1e6 elements: 0.94 ms against 0.17). The bounds are powers
    of two, exact in every float type."""
    ity, fty = value_type(dst), x.type
    info = np.iinfo(dst)
    lo, hi = ir.Constant(fty, float(info.min)), ir.Constant(fty, float(info.max) + 1.0)
    below = b.fcmp_ordered("<", x, lo)
    above = b.fcmp_ordered(">=", x, hi)
    inside = b.and_(b.fcmp_ordered(">=", x, lo), b.fcmp_ordered("<", x, hi))  # NaN: outside
    safe = b.select(inside, x, ir.Constant(fty, 0.0))
    out = b.fptosi(safe, ity) if is_signed(dst) else b.fptoui(safe, ity)
    return b.select(below, const(dst, info.min), b.select(above, const(dst, info.max), out))


# --------------------------------------------------------------------------- unary ops


def _float_sign(b, x):
    one = ir.Constant(x.type, 1.0)
    pos = b.fcmp_ordered(">", x, ir.Constant(x.type, 0.0))
    neg = b.fcmp_ordered("<", x, ir.Constant(x.type, 0.0))
    return b.select(pos, one, b.select(neg, ir.Constant(x.type, -1.0), x))


def _int_sign(b, x, dt):
    zero = ir.Constant(x.type, 0)
    if not is_signed(dt):
        return b.zext(b.icmp_unsigned("!=", x, zero), x.type)
    pos = b.zext(b.icmp_signed(">", x, zero), x.type)
    neg = b.zext(b.icmp_signed("<", x, zero), x.type)
    return b.sub(pos, neg)


def unary(b: ir.IRBuilder, opcode: str, x: ir.Value, dt: np.dtype, out_dt: np.dtype,
          attrs: dict) -> ir.Value:
    """One element of the unary op ``opcode`` on ``x`` (dtype ``dt``, result ``out_dt``)."""
    dt = np.dtype(dt)
    if opcode == "convert":
        return convert(b, x, dt, out_dt)
    if opcode == "bitcast_convert":
        return bitcast(b, x, dt, out_dt)
    if opcode == "copy":
        return x
    if opcode == "is_finite":
        return b.fcmp_ordered("<", fintr(b, "fabs", x), ir.Constant(x.type, float("inf")))
    if opcode == "not":
        return b.not_(x)
    if opcode == "reduce_precision":
        return reduce_precision(b, x, dt, attrs["exponent_bits"], attrs["mantissa_bits"])
    if is_float(dt):
        out = _float_unary(b, opcode, x)
        return round_low_float(b, out, out_dt)
    return _int_unary(b, opcode, x, dt)


def reduce_precision(b: ir.IRBuilder, x: ir.Value, dt: np.dtype, exponent_bits: int,
                     mantissa_bits: int) -> ir.Value:
    """XLA's ``reduce_precision`` on ``x``'s own bits, as the evaluator computes it
    (``eval_elementwise.reduce_precision``): the mantissa rounds to nearest even by an
    integer add, a narrower exponent range overflows to infinity and underflows to zero,
    NaN stays NaN. float32 and float64 (a float16/bfloat16 register holds a widened value,
    not the type's bits: the evaluator does those)."""
    dt = np.dtype(dt)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise UnsupportedOp(f"reduce_precision on {dt}")
    nbits = 8 * dt.itemsize
    src_mantissa = 23 if nbits == 32 else 52
    src_exponent = nbits - 1 - src_mantissa
    it = ir.IntType(nbits)

    def c(v):
        return ir.Constant(it, v & ((1 << nbits) - 1))
    bits = b.bitcast(x, it)
    if mantissa_bits < src_mantissa:
        shift = src_mantissa - mantissa_bits
        last_kept = b.lshr(b.and_(bits, c(1 << shift)), c(shift))
        bias = b.add(last_kept, c((1 << (shift - 1)) - 1))
        bits = b.and_(b.add(bits, bias), c(~((1 << shift) - 1)))
    if exponent_bits < src_exponent:
        exponent_mask = ((1 << src_exponent) - 1) << src_mantissa
        src_bias = (1 << (src_exponent - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        exponent = b.and_(bits, c(exponent_mask))
        sign = b.and_(bits, c(1 << (nbits - 1)))
        over = b.icmp_unsigned(">", exponent, c((src_bias + reduced_bias) << src_mantissa))
        under = b.icmp_unsigned("<=", exponent, c((src_bias - reduced_bias) << src_mantissa))
        bits = b.select(over, b.or_(sign, c(exponent_mask)), b.select(under, sign, bits))
    return b.select(b.fcmp_unordered("uno", x, x), x, b.bitcast(bits, x.type))


def bitcast(b: ir.IRBuilder, x: ir.Value, dt: np.dtype, out_dt: np.dtype) -> ir.Value:
    """The same bits as ``out_dt``, for types of 32 or 64 bits (their registers hold the
    bits themselves; float16/bfloat16 registers are widened floats: the evaluator does
    those)."""
    out_dt = np.dtype(out_dt)
    if np.dtype(dt).itemsize not in (4, 8) or np.dtype(dt).kind not in "iuf" \
            or out_dt.kind not in "iuf":
        raise UnsupportedOp(f"bitcast_convert from {np.dtype(dt)} to {out_dt}")
    return b.bitcast(x, value_type(out_dt))


_FLOAT_INTRINSICS = {"floor": "floor", "ceil": "ceil", "round_nearest_even": "roundeven",
                     "round_nearest_afz": "round", "sqrt": "sqrt", "abs": "fabs"}


def _float_unary(b, opcode, x):
    if opcode in _FLOAT_INTRINSICS:
        return fintr(b, _FLOAT_INTRINSICS[opcode], x)
    if opcode == "negate":
        return b.fneg(x)
    if opcode == "sign":
        return _float_sign(b, x)
    if opcode == "rsqrt":
        return b.fdiv(ir.Constant(x.type, 1.0), fintr(b, "sqrt", x))
    if opcode in vecmath.SUPPORTED_UNARY:
        return vecmath.emit_unary(b, opcode, x)
    raise UnsupportedOp(opcode)


def _int_unary(b, opcode, x, dt):
    zero = ir.Constant(x.type, 0)
    if opcode == "negate":
        return b.sub(zero, x)
    if opcode == "abs":
        if not is_signed(dt):
            return x
        return b.select(b.icmp_signed("<", x, zero), b.sub(zero, x), x)
    if opcode == "sign":
        return _int_sign(b, x, dt)
    if opcode == "popcnt":
        return intrinsic(b, f"llvm.ctpop.i{x.type.width}", x.type, [x])
    if opcode == "count_leading_zeros":
        return intrinsic(b, f"llvm.ctlz.i{x.type.width}", x.type, [x, ir.Constant(I1, 0)])
    raise UnsupportedOp(f"{opcode} on {dt}")


# --------------------------------------------------------------------------- binary ops


_FCMP = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


def compare(b: ir.IRBuilder, direction: str, x: ir.Value, y: ir.Value,
            dt: np.dtype) -> ir.Value:
    op = _FCMP[direction]
    dt = np.dtype(dt)
    if is_float(dt):
        if direction == "NE":
            return b.fcmp_unordered("!=", x, y)
        return b.fcmp_ordered(op, x, y)
    if is_signed(dt):
        return b.icmp_signed(op, x, y)
    return b.icmp_unsigned(op, x, y)


def _int_max_min(b, x, y, dt, is_max):
    if dt == np.bool_:
        return b.or_(x, y) if is_max else b.and_(x, y)
    name = ("s" if is_signed(dt) else "u") + ("max" if is_max else "min")
    return intrinsic(b, f"llvm.{name}.i{x.type.width}", x.type, [x, y])


def max_min(b: ir.IRBuilder, x: ir.Value, y: ir.Value, dt: np.dtype, is_max: bool):
    """``maximum``/``minimum``; for floats NaN propagates (LLVM's ``maximum``/``minimum``)."""
    if is_float(np.dtype(dt)):
        return fintr(b, "maximum" if is_max else "minimum", x, y)
    return _int_max_min(b, x, y, np.dtype(dt), is_max)


# --------------------------------------------------------------------------- order keys
#
# A float maximum/minimum reduction runs as an integer max/min of *order keys*: a key's
# signed order is the reducer's order of floats (-0 below +0, every NaN above everything for
# a maximum and below everything for a minimum), so ``llvm.smax``/``llvm.smin`` of keys is
# ``llvm.maximum``/``llvm.minimum`` of floats, exactly and in any order of combining. On x86
# a step is five one-cycle integer vector instructions, only the max on the loop-carried
# chain, instead of the six float ones ``llvm.maximum``'s NaN and signed-zero rules take,
# with a chain of about nine cycles (a float32 row max in cache: ~1.5x faster).
#
# The key of bits ``i`` (a float's bits as a signed integer): ``i ^ (i >> (w-1) >>> 1)``
# flips the magnitude bits of negative floats, which orders all non-NaN floats (-inf < ...
# < -0 < +0 < ... < +inf) and leaves the NaNs of each sign outside that range, above +inf
# or below -inf. A maximum's key then subtracts ``2**mantissa_bits - 1`` (wrapping), which
# moves the negative NaNs just below -inf around to the top; a minimum's key adds it,
# moving the positive NaNs to the bottom. The reverse steps give back the float's bits.


def _key_span(ty: ir.Type) -> tuple[ir.IntType, ir.Constant]:
    """The integer type of a float register type's keys and its NaN span."""
    mantissa = 52 if ty == F64 else 23
    int_ty = I64 if ty == F64 else I32
    return int_ty, ir.Constant(int_ty, (1 << mantissa) - 1)


def _flip_negative(b: ir.IRBuilder, i: ir.Value) -> ir.Value:
    width = i.type.width
    sign = b.ashr(i, ir.Constant(i.type, width - 1))
    return b.xor(i, b.lshr(sign, ir.Constant(i.type, 1)))


def extreme_key(b: ir.IRBuilder, x: ir.Value, is_max: bool) -> ir.Value:
    """The order key of the float register value ``x`` for a maximum (``is_max``) or
    minimum reduction (see the comment above)."""
    int_ty, span = _key_span(x.type)
    key = _flip_negative(b, b.bitcast(x, int_ty))
    return b.sub(key, span) if is_max else b.add(key, span)


def from_extreme_key(b: ir.IRBuilder, key: ir.Value, ty: ir.Type, is_max: bool) -> ir.Value:
    """The float (register type ``ty``) whose ``extreme_key`` is ``key``, bit for bit."""
    _, span = _key_span(ty)
    key = b.add(key, span) if is_max else b.sub(key, span)
    return b.bitcast(_flip_negative(b, key), ty)


def extreme_of_keys(b: ir.IRBuilder, x: ir.Value, y: ir.Value, is_max: bool) -> ir.Value:
    """The key of the maximum (minimum) of the floats of keys ``x`` and ``y``."""
    return _int_max_min(b, x, y, np.dtype(f"int{x.type.width}"), is_max)


def _int_divide(b, x, y, dt, remainder):
    # (a divisor known here divides natively: LLVM multiplies by its reciprocal, in vectors
    # too; another divides in floating point, ``_quotient``)
    native = isinstance(y, ir.Constant)
    ty = x.type
    zero, one, minus1 = ir.Constant(ty, 0), ir.Constant(ty, 1), ir.Constant(ty, -1)
    y_zero = b.icmp_unsigned("==", y, zero)
    if is_signed(dt):
        int_min = ir.Constant(ty, -(1 << (ty.width - 1)))
        overflow = b.and_(b.icmp_signed("==", x, int_min), b.icmp_signed("==", y, minus1))
        safe_y = b.select(b.or_(y_zero, overflow), one, y)
        if remainder:
            r = _remainder(b, x, safe_y, True, native)
            return b.select(y_zero, x, b.select(overflow, zero, r))
        # (INT_MIN / -1: x / 1 = INT_MIN, wrapped)
        q = _quotient(b, x, safe_y, True, native)
        return b.select(y_zero, minus1, q)
    safe_y = b.select(y_zero, one, y)
    if remainder:
        return b.select(y_zero, x, _remainder(b, x, safe_y, False, native))
    return b.select(y_zero, minus1, _quotient(b, x, safe_y, False, native))


def _quotient(b, x, y, signed, native=False):
    """``x / y`` rounded toward zero, for a nonzero ``y`` (and not ``INT_MIN / -1``).

    Integers of up to 32 bits divide in floating point (float32 up to 16 bits, float64 for
    32): vector units have no integer division, so LLVM would divide lane by lane. The float
    quotient truncates to the exact one: the operands are exact, and the correctly rounded
    quotient of ``|x| < 2**w`` by ``y`` is within ``2**(w - p) / |y|`` (p: the float's
    precision, ``w - p`` at most -8) of the true one, closer than any quotient of
    non-multiple ``x`` gets to the next integer (``1 / |y|``), so truncation cannot cross it.
    """
    width = x.type.width
    if width > 32 or native:
        return b.sdiv(x, y) if signed else b.udiv(x, y)
    fty = F32 if width <= 16 else F64
    to_float = b.sitofp if signed else b.uitofp
    q = b.fdiv(to_float(x, fty), to_float(y, fty))
    return b.fptosi(q, x.type) if signed else b.fptoui(q, x.type)


def _remainder(b, x, y, signed, native=False):
    """``x - y * (x / y)`` (C's ``%``) for a nonzero ``y`` (and not ``INT_MIN % -1``)."""
    if x.type.width > 32 or native:
        return b.srem(x, y) if signed else b.urem(x, y)
    return b.sub(x, b.mul(_quotient(b, x, y, signed), y))


def _shift(b, opcode, x, y):
    ty = x.type
    width = ir.Constant(ty, ty.width)
    bad = b.icmp_unsigned(">=", y, width)
    safe = b.select(bad, ir.Constant(ty, 0), y)
    if opcode == "shift_left":
        return b.select(bad, ir.Constant(ty, 0), b.shl(x, safe))
    if opcode == "shift_right_logical":
        return b.select(bad, ir.Constant(ty, 0), b.lshr(x, safe))
    fill = b.ashr(x, ir.Constant(ty, ty.width - 1))
    return b.select(bad, fill, b.ashr(x, safe))


def binary(b: ir.IRBuilder, opcode: str, x: ir.Value, y: ir.Value, dt: np.dtype,
           out_dt: np.dtype, attrs: dict, y_dt: np.dtype | None = None) -> ir.Value:
    """One element of the binary op ``opcode`` (operands of dtype ``dt``)."""
    dt = np.dtype(dt)
    if opcode == "compare":
        return compare(b, attrs["comparison_direction"], x, y, dt)
    if opcode in ("maximum", "minimum"):
        return max_min(b, x, y, dt, opcode == "maximum")
    if opcode == "next_after":
        if dt in LOW_FLOATS or not is_float(dt):  # (steps of float16/bfloat16's own bits)
            raise UnsupportedOp(f"next_after on {dt}")
        return _nextafter(b, x, y)
    if is_float(dt):
        out = _float_binary(b, opcode, x, y, y_dt)
        return round_low_float(b, out, out_dt)
    return _int_binary(b, opcode, x, y, dt)


def _nextafter(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """numpy.nextafter: the float after x towards y (y itself when equal, NaN when either
    is NaN, the smallest denormal with y's sign from a zero): one step of x's bits, up when
    moving away from zero."""
    ity = I64 if x.type == F64 else I32
    xb = b.bitcast(x, ity)
    away = b.icmp_unsigned("==", b.fcmp_ordered("<", x, y),
                           b.fcmp_ordered(">", x, ir.Constant(x.type, 0.0)))
    stepped = b.add(xb, b.select(away, ir.Constant(ity, 1), ir.Constant(ity, -1)))
    sign = ir.Constant(ity, 1 << (ity.width - 1))
    from_zero = b.or_(b.and_(b.bitcast(y, ity), sign), ir.Constant(ity, 1))
    zero = b.fcmp_ordered("==", x, ir.Constant(x.type, 0.0))
    out = b.bitcast(b.select(zero, from_zero, stepped), x.type)
    out = b.select(b.fcmp_ordered("==", x, y), y, out)
    return b.select(b.fcmp_unordered("uno", x, y), ir.Constant(x.type, float("nan")), out)


_FLOAT_BINARY = {
    "add": ir.IRBuilder.fadd, "subtract": ir.IRBuilder.fsub, "multiply": ir.IRBuilder.fmul,
    "divide": ir.IRBuilder.fdiv,
}


def _float_binary(b, opcode, x, y, y_dt):
    op = _FLOAT_BINARY.get(opcode)
    if op is not None:
        return op(b, x, y)
    if opcode == "power" and y_dt is not None and not is_float(np.dtype(y_dt)):
        y = convert(b, y, y_dt, np.float64 if x.type == F64 else np.float32)
    if opcode in vecmath.SUPPORTED_BINARY:
        return vecmath.emit_binary(b, opcode, x, y)
    raise UnsupportedOp(opcode)


# pred arithmetic: add is or, multiply is and.
_INT_BINARY = {
    "add": lambda b, x, y, dt: b.or_(x, y) if dt == np.bool_ else b.add(x, y),
    "subtract": lambda b, x, y, dt: b.sub(x, y),
    "multiply": lambda b, x, y, dt: b.and_(x, y) if dt == np.bool_ else b.mul(x, y),
    "divide": lambda b, x, y, dt: _int_divide(b, x, y, dt, remainder=False),
    "remainder": lambda b, x, y, dt: _int_divide(b, x, y, dt, remainder=True),
    "and": lambda b, x, y, dt: b.and_(x, y),
    "or": lambda b, x, y, dt: b.or_(x, y),
    "xor": lambda b, x, y, dt: b.xor(x, y),
    "shift_left": lambda b, x, y, dt: _shift(b, "shift_left", x, y),
    "shift_right_logical": lambda b, x, y, dt: _shift(b, "shift_right_logical", x, y),
    "shift_right_arithmetic": lambda b, x, y, dt: _shift(b, "shift_right_arithmetic", x, y),
}


def _int_binary(b, opcode, x, y, dt):
    op = _INT_BINARY.get(opcode)
    if op is None:
        raise UnsupportedOp(f"{opcode} on {dt}")
    return op(b, x, y, dt)


def clamp(b: ir.IRBuilder, lo: ir.Value, x: ir.Value, hi: ir.Value, dt: np.dtype):
    """``min(max(x, lo), hi)`` (NaN propagates)."""
    return max_min(b, max_min(b, x, lo, dt, True), hi, dt, False)
