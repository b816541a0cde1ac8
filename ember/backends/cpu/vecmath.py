"""Vectorizable math functions emitted as straight-line LLVM IR.

The CPU code generator emits scalar code per element and lets LLVM's loop vectorizer widen the
loop, which only works when the math inside is branch-free and calls no libm function. This
module emits such code: polynomial approximations (near-minimax fits made offline with mpmath),
integer bit manipulation, selects for special values, and LLVM intrinsics that vectorize
(``llvm.fma``, ``llvm.rint``, ``llvm.sqrt``, ...). float32 and float64 are both supported; most
float32 functions (exp, expm1, exp2, log, log1p, tanh, logistic, sine, cosine, tan, rsqrt,
sinh, cosh, asinh, acosh, atanh, erf, erfc) use native float32 code, the rest of float32 is
computed through the float64 routines.

Accuracy (tested in ``tests/backends/cpu/test_vecmath.py`` against NumPy in float64, rounded
for float32): every function within 4 ulp over the whole float range for both dtypes (float64
``power`` within 2 ulp, float64 ``atan2`` within 3); special values (signed zeros, infinities,
NaN, denormal inputs and outputs, overflow thresholds) as NumPy. The trigonometric range
reduction is exact for every finite argument (Payne-Hanek style: x = m * 2**k is reduced with
(2**k * 2/pi) mod 4 taken from a table indexed by the exponent, in float64), so sine, cosine
and tan stay accurate up to the largest finite float. The table loads become gathers, which
cost more than the rest of the function; so float32 sine and cosine (within 1 ulp) reduce
|x| < 2**16 table-free (Cody-Waite) and are emitted as a call of a module-internal function
with vector variants that take the table path only for vectors holding a larger argument
(see ``_trig_f32_function``): the one place where the emitted code is not straight-line.

Example:
    >>> from llvmlite import ir
    >>> mod = ir.Module()
    >>> fn = ir.Function(mod, ir.FunctionType(ir.FloatType(), [ir.FloatType()]), "f")
    >>> b = ir.IRBuilder(fn.append_basic_block())
    >>> y = emit_unary(b, "exponential", fn.args[0])
    >>> str(y.type)
    'float'
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache, partial

import numpy as np
from llvmlite import ir

__all__ = ["SUPPORTED_UNARY", "SUPPORTED_BINARY", "emit_unary", "emit_binary"]

# Polynomial coefficients, lowest degree first, fitted offline with mpmath (relative-error
# weighted least squares on Chebyshev nodes with Lawson reweighting, then rounded; fit errors
# about 2**-28 for float32 and 2**-54..2**-60 for float64). Each approximates a smooth
# remainder so that leading terms stay exact: exp(r) = 1 + r + r^2*P(r);
# expm1(r) = r + r^2/2 + r^3*P(r);
# log(1+f) = f - s*(f - z*P(z)) with s = f/(2+f), z = s^2; odd f(x) = x + x^3*P(x^2);
# cos(x) = 1 - x^2/2 + x^4*P(x^2); erf(x) = x*P(x^2); float64 erfc(x) = exp(-x^2)*P(x - c) on
# [0.5, 4) (five intervals) and exp(-x^2)/x*P(1/x^2) beyond; float32 erf(x) = 1 - P(x - 2.5)
# on [1, 4] and erfc(x) = exp(-x^2) / (sqrt(pi) * (x + P(x)/Q(x))) from 0.5 (_erfc_big_f32).
_C32 = {
    "exp": (  # degree 6 in all: fit error 3e-9 relative, far below float32's ulp
        0.4999999403953552, 0.1666652113199234, 0.04166838899254799, 0.0083687175065279,
        0.0013814595295116305,
    ),
    "expm1": (
        0.1666666567325592, 0.041666481643915176, 0.008333420380949974, 0.001393343205563724,
        0.00019823976617772132,
    ),
    "log": (0.6666666865348816, 0.4000012278556824, 0.28550785779953003, 0.23331336677074432,),
    "tanh": (
        -0.3333333134651184, 0.1333320587873459, -0.053946755826473236, 0.0217006653547287,
        -0.008177312090992928, 0.0021428887266665697,
    ),
    "sin": (
        -0.1666666716337204, 0.008333329111337662, -0.0001983930851565674, 2.7180819870409323e-06,
    ),
    "cos": (
        0.0416666679084301, -0.0013888883404433727, 2.479945578670595e-05, -2.720536542710761e-07,
    ),
    # erf(x) = x*(2/sqrt(pi) + z*Q(z)), z = x^2, |x| <= 1: 2/sqrt(pi) (rounded; the code adds
    # its remainder _TWO_OVER_SQRTPI_LO32), then Q: fit error 2**-29.3 relative
    "erf": (
        1.128379225730896, -0.3761262893676758, 0.11283604055643082, -0.026854272931814194,
        0.005188812967389822, -0.0008011996978893876, 7.853450370021164e-05,
    ),
    # erfc(a) = E(a - 2.5) on [1, 4], for erf = 1 - E: fit error 2**-30.6 absolute
    "erf1": (
        0.0004069523129146546, -0.002178278286010027, 0.005445691291242838,
        -0.00835021585226059, 0.00862258393317461, -0.00611656391993165, 0.002797613386064768,
        -0.0005445932038128376, -0.00025881026522256434, 0.0002534989034757018,
        -8.104459993774071e-05, -7.805791938153561e-06, 1.5700055882916786e-05,
        -3.446327355050016e-06, -8.875533126229129e-07, 3.491665552246559e-07,
    ),
    # erfc(a) = exp(-a^2) / (sqrt(pi) * (a + P(a)/Q(a))) on [0.5, 10.1] (P: "erfc_num", Q:
    # "erfc_den", Q(0) = 1): the fit of P/Q makes at most 2**-28.5 relative error in erfc
    "erfc_num": (
        0.5641776919364929, 0.40850380063056946, 0.15340693295001984, 0.0258307084441185,
        1.1767446039812057e-06,
    ),
    "erfc_den": (
        1.0, 1.3679543733596802, 0.8803619742393494, 0.30550533533096313, 0.05174592509865761,
    ),
}
_C64 = {
    "exp": (
        0.5, 0.16666666666666666, 0.041666666666666706, 0.008333333333333269, 0.0013888888888865397,
        0.00019841269841476783, 2.480158736124965e-05, 2.7557318930885295e-06,
        2.755724328288981e-07, 2.505228995527971e-08, 2.0924053178678957e-09,
        1.6029229412893206e-10,
    ),
    "expm1": (
        0.16666666666666666, 0.04166666666666668, 0.008333333333333314, 0.0013888888888876915,
        0.0001984126984134296, 2.4801587341752594e-05, 2.755731911037298e-06,
        2.7557258189574355e-07, 2.505217665256814e-08, 2.091982589852134e-09,
        1.6056524024696042e-10,
    ),
    "tanh": (
        -0.33333333333333315, 0.1333333333332974, -0.053968253966057624, 0.021869488468684556,
        -0.008863234312138925, 0.0035921139958933553, -0.0014557259242704863, 0.000589451703932204,
        -0.00023701147915337277, 9.155799060855762e-05, -3.0186813960320052e-05,
        6.042296423679895e-06,
    ),
    "sin": (
        -0.16666666666666666, 0.008333333333333323, -0.00019841269841254706, 2.7557319214016997e-06,
        -2.5052104869516578e-08, 1.60583616003529e-10, -7.578462779349471e-13,
    ),
    "cos": (
        0.041666666666666664, -0.0013888888888888872, 2.480158730157046e-05,
        -2.7557319214960493e-07, 2.0876754278315234e-09, -1.1470283855152971e-11,
        4.737706409911368e-14,
    ),
    "log": (
        0.6666666666666666, 0.4000000000000088, 0.2857142857080076, 0.22222222392322885,
        0.18181795578324222, 0.15386242916653275, 0.13268690426547916, 0.13087461027834665,
    ),
    "sinh": (
        0.16666666666666666, 0.008333333333333333, 0.000198412698412696, 2.7557319224116314e-06,
        2.5052108346503903e-08, 1.605905060184716e-10, 7.64648286050765e-13, 2.8482338748522048e-15,
    ),
    "atan": (
        -0.3333333333333292, 0.19999999999873574, -0.14285714272253736, 0.11111110394747575,
        -0.09090886868061092, 0.07691872129165622, -0.06661033056182812, 0.05833317420328749,
        -0.04975889870880646, 0.03650975845218846, -0.016265037617186538,
    ),
    "asin": (
        0.1666666666666676, 0.07499999999970802, 0.0446428571746065, 0.030381942708123777,
        0.022372214976479274, 0.0173516122343437, 0.013980817730335134, 0.011398936250990213,
        0.010780114443845652, 0.0037069403609214405, 0.02170613964165473, -0.020997200519620063,
        0.032627455573684766,
    ),
    "asinh": (
        -0.1666666666666661, 0.07499999999984404, -0.04464285712782156, 0.03038194371601012,
        -0.022372138349636597, 0.01735238683357957, -0.01396023113214288, 0.011512977114716952,
        -0.009534113765981766, 0.007465523504660551, -0.0047473951866479165, 0.0017180046330480402,
    ),
    "atanh": (
        0.3333333333333328, 0.20000000000018123, 0.142857142834394, 0.11111111255231579,
        0.09090903688286296, 0.07692438422422726, 0.06664516602078575, 0.059071256172412816,
        0.05060217533120526, 0.05945268261080536, -0.004942517028975081, 0.17404452435477963,
        -0.19491882968629548, 0.24041201498077855,
    ),
    "erf": (
        1.1283791670955126, -0.3761263890318352, 0.11283791670944184, -0.026866170643111205,
        0.005223977606116405, -0.0008548325929219129, 0.00012055293574155257,
        -1.4924712251189505e-05, 1.6447130966345193e-06, -1.6206309283483713e-07,
        1.3710961677120903e-08, -7.779434648471054e-10,
    ),
    "erfc0": (
        0.5069376502931449, -0.3679726916557954, 0.23095813155129502, -0.12983606199488515,
        0.06679054252840899, -0.031897262039294154, 0.014289198585144268, -0.006051532307651464,
        0.002437641056484258, -0.0009385122647758492, 0.0003466639843956939,
        -0.00012333945097851677, 4.3378136682102306e-05, -1.4343258043257472e-05,
    ),
    "erfc1": (
        0.3678229164523611, -0.20882187596460952, 0.10679557149659918, -0.05021827439604748,
        0.022011364250808883, -0.009081627615009242, 0.0035531099040698143, -0.0013257839132166096,
        0.0004739704107398166, -0.0001629338015144772, 5.4049040429270185e-05,
        -1.7678631095190798e-05, 5.479688344804564e-06,
    ),
    "erfc2": (
        0.2849722347374364, -0.13097634551448517, 0.055763630087087304, -0.022259995241407853,
        0.008404319207325381, -0.003020974648924824, 0.0010392045223683185, -0.00034353349061743804,
        0.00010950530694245782, -3.375170109911501e-05, 1.0085962974709502e-05,
        -2.974596959768432e-06, 8.38274550001074e-07,
    ),
    "erfc3": (
        0.2108063640611436, -0.07434734678979472, 0.024937997086656873, -0.008001569382093923,
        0.0024670368157024606, -0.000733590937471408, 0.00021101982429352437,
        -5.886895836710278e-05, 1.5961852460648842e-05, -4.214357737021871e-06,
        1.085232209163599e-06, -2.7263031990068684e-07, 6.707998836764897e-08,
        -1.7021669740358153e-08, 3.995301756884451e-09,
    ),
    "erfc4": (
        0.1552936556088943, -0.04132357783325249, 0.010661133192510112, -0.0026730744396436822,
        0.000652686326908612, -0.00015546891822899422, 3.6181703648507826e-05,
        -8.237986473016298e-06, 1.8371959877178756e-06, -4.017410488254232e-07,
        8.617210210077421e-08, -1.8168243097455567e-08, 3.904618311748193e-09,
        -7.937987047169433e-10,
    ),
    "erfcq": (
        0.5641895835477562, -0.28209479177361213, 0.42314218750271754, -1.0578554207914077,
        3.702485366222762, -16.660195539653976, 91.55454176424878, -590.9807923270206,
        4274.910483686746, -32053.0940172201, 222053.17418111212, -1235204.8972882833,
        4629233.808035209, -8453510.662997715,
    ),
}

# The odd polynomials of asinh, atanh (|x| < 1/2) and sinh (|x| < 1) for float32: the float64
# fits cut where the dropped terms add at most 1e-8 relative (under 0.2 ulp).
_C32.update(asinh=_C64["asinh"][:9], atanh=_C64["atanh"][:12], sinh=_C64["sinh"][:5])

# 2/pi to 1216 bits (hex digits after the binary point), for the trigonometric range reduction.
_TWO_OVER_PI_HEX = (
    "a2f9836e4e441529fc2757d1f534ddc0db6295993c439041fe5163abdebbc561b7246e3a424dd2e006492eea"
    "09d1921cfe1deb1cb129a73ee88235f52ebb4484e99c7026b45f7e413991d639835339f49c845f8bbdf9283b"
    "1ff897ffde05980fef2f118b5a0a6d1f6d367ecf27cb09b74f463f669e5fea2d7527bac7ebe5f17b3d0739f7"
    "8a5292ea6bfb5fb11f8d5d0856033046fc7b6bab"
)

SUPPORTED_UNARY = frozenset({
    "exponential", "exponential_minus_one", "log", "log_plus_one", "tanh", "logistic", "sine",
    "cosine", "tan", "erf", "erfc", "cbrt", "rsqrt", "atan", "asin", "acos", "sinh", "cosh",
    "asinh", "acosh", "atanh", "lgamma", "digamma", "erf_inv",
})
SUPPORTED_BINARY = frozenset({"power", "atan2", "remainder"})

_PI_HEX = "3243f6a8885a308d313198a2e03707344a4093822299f31d0082efa98ec4e6c89452821e638d0137"
# pi to 316 bits: enough to split pi/2 and pi into double-double constants
_PI = Fraction(int(_PI_HEX, 16), 16 ** (len(_PI_HEX) - 1))


def _split(v: Fraction) -> tuple[float, float]:
    hi = float(v)
    return hi, float(v - Fraction(hi))


_PIO2_HI, _PIO2_LO = _split(_PI / 2)
_PI_HI, _PI_LO = _split(_PI)
_LN2 = math.log(2.0)
_LN2_LO = 2.3190468138462996e-17  # ln(2) - _LN2
_TWO_OVER_SQRTPI_LO = 1.533545961316588e-17  # 2/sqrt(pi) - _C64['erf'][0]
_TWO_OVER_SQRTPI_LO32 = -5.8635382771399236e-08  # 2/sqrt(pi) - _C32['erf'][0]


def _intrinsic(module: ir.Module, name: str, fnty: ir.FunctionType) -> ir.Function:
    """The declaration of intrinsic ``name`` in ``module``, added on first use."""
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, fnty, name)
    return fn


@cache
def _native_ldexp() -> bool:
    """Whether the host CPU scales by a power of two in one vector instruction (AVX-512's
    ``vscalef``), so that ``llvm.ldexp`` vectorizes instead of calling libm. The host CPU's
    features are part of every object-code cache key, so code that depends on them is
    never loaded on another CPU."""
    from ember.backends.cpu.llvm_support import host_has_feature

    return host_has_feature("avx512f")


class _Em:
    """Terse emission helpers for one float type, or a vector of one (Python numbers become
    constants, splatted for vectors)."""

    def __init__(self, b: ir.IRBuilder, ty: ir.Type):
        self.b, self.ty = b, ty
        self.lanes = ty.count if isinstance(ty, ir.VectorType) else None
        scalar = ty.element if self.lanes else ty
        self.d = isinstance(scalar, ir.DoubleType)
        self.scalar = scalar
        self.ity = self.like(ir.IntType(64 if self.d else 32))
        self.mant = 52 if self.d else 23
        self.bias = 1023 if self.d else 127
        self.sfx = (f"v{self.lanes}" if self.lanes else "") + ("f64" if self.d else "f32")

    def like(self, scalar_ty: ir.Type) -> ir.Type:
        """``scalar_ty``, or a vector of it with this type's lanes."""
        return ir.VectorType(scalar_ty, self.lanes) if self.lanes else scalar_ty

    def other(self, scalar_ty: ir.Type) -> _Em:
        """Helpers for ``scalar_ty`` with the same lanes (e.g. float64 steps of float32 code)."""
        return _Em(self.b, self.like(scalar_ty))

    def const(self, scalar_ty: ir.Type, v):
        if self.lanes:
            return ir.Constant(self.like(scalar_ty), [v] * self.lanes)
        return ir.Constant(scalar_ty, v)

    def c(self, v):
        if isinstance(v, ir.Value):
            return v
        return self.const(self.scalar, float(v) if self.d else float(np.float32(v)))

    def ci(self, v):
        if isinstance(v, ir.Value):
            return v
        return self.const(ir.IntType(64 if self.d else 32), int(v))

    def i32(self, v):
        return self.const(ir.IntType(32), int(v))

    def add(self, a, b):
        return self.b.fadd(self.c(a), self.c(b))

    def sub(self, a, b):
        return self.b.fsub(self.c(a), self.c(b))

    def mul(self, a, b):
        return self.b.fmul(self.c(a), self.c(b))

    def div(self, a, b):
        return self.b.fdiv(self.c(a), self.c(b))

    def neg(self, a):
        return self.b.fneg(self.c(a))

    def call(self, name, *args):
        fnty = ir.FunctionType(self.ty, [self.ty] * len(args))
        fn = _intrinsic(self.b.module, f"llvm.{name}.{self.sfx}", fnty)
        return self.b.call(fn, [self.c(a) for a in args])

    def fma(self, a, b, c):
        return self.call("fma", a, b, c)

    def fabs(self, a):
        return self.call("fabs", a)

    def rint(self, a):
        return self.call("rint", a)

    def sqrt(self, a):
        return self.call("sqrt", a)

    def copysign(self, a, b):
        return self.call("copysign", a, b)

    def clamp(self, a, lo, hi):  # NaN becomes lo; callers patch NaN afterwards
        return self.call("minnum", self.call("maxnum", a, lo), hi)

    def sel(self, cond, a, b):
        return self.b.select(cond, self.c(a), self.c(b))

    def cmp(self, op, a, b):
        return self.b.fcmp_ordered(op, self.c(a), self.c(b))

    def isnan(self, a):
        return self.b.fcmp_unordered("uno", a, a)

    def bits(self, a):
        return self.b.bitcast(a, self.ity)

    def flt(self, i):
        return self.b.bitcast(i, self.ty)

    def signbit(self, a):
        return self.b.icmp_signed("<", self.bits(a), self.ci(0))

    def toint(self, a):
        return self.b.fptosi(a, self.ity)

    def pow2(self, k):
        """2**k for an integer k in the normal exponent range."""
        return self.flt(self.b.shl(self.b.add(k, self.ci(self.bias)), self.ci(self.mant)))

    def scale2(self, p, k):
        """p * 2**k rounded once, overflow to inf and gradual underflow included, for an
        integer k with |k| < 2 * (bias + mant) (as exp's reduction gives). Where the target
        has a native instruction for it (x86's AVX-512 ``vscalef``) this is ``llvm.ldexp``;
        elsewhere ``ldexp`` would become a libm call, which does not vectorize, so 2**k is
        applied as two normal factors (the first product is exact, the second rounds)."""
        if _native_ldexp():
            fnty = ir.FunctionType(self.ty, [self.ty, self.like(ir.IntType(32))])
            isfx = f"v{self.lanes}i32" if self.lanes else "i32"
            fn = _intrinsic(self.b.module, f"llvm.ldexp.{self.sfx}.{isfx}", fnty)
            k32 = self.b.trunc(k, self.like(ir.IntType(32))) if self.d else k
            return self.b.call(fn, [p, k32])
        k1 = self.b.ashr(k, self.ci(1))
        return self.mul(self.mul(p, self.pow2(k1)), self.pow2(self.b.sub(k, k1)))

    def poly(self, x, cs):
        acc = self.c(cs[-1])
        for k in reversed(cs[:-1]):
            acc = self.fma(acc, x, k)
        return acc

    def two_sum(self, a, b):
        s = self.add(a, b)
        bb = self.sub(s, a)
        return s, self.add(self.sub(a, self.sub(s, bb)), self.sub(b, bb))

    def fast_two_sum(self, a, b):  # |a| >= |b|
        s = self.add(a, b)
        return s, self.sub(b, self.sub(s, a))

    def C(self, name):
        return (_C64 if self.d else _C32)[name]

    def flip(self, cond, a):
        return self.sel(cond, self.neg(a), a)

    def nan(self):
        return self.c(math.nan)


def _or(b, *conds):
    out = conds[0]
    for c in conds[1:]:
        out = b.or_(out, c)
    return out


def _and(b, *conds):
    out = conds[0]
    for c in conds[1:]:
        out = b.and_(out, c)
    return out


# ----------------------------------------------------------------------------------- exp family

# Arguments below which exp rounds to 0, by float64-ness: exp(x) < 2**-150 (2**-1075),
# half the smallest denormal, with room for the polynomial's error and ``lo``.
UNDERFLOW_TO_ZERO = {False: -104.5, True: -746.0}


def _exp_core(e: _Em, x, lo=None, scale: int = 0, mult=None):
    """exp(x + lo) * 2**scale (times ``mult`` if given, rounded once) for non-NaN x (lo a small
    correction), overflow to inf and gradual underflow included: 2**n is applied as two
    factors so denormals round once."""
    under = None
    if scale == 0 and mult is None:
        # Below UNDERFLOW_TO_ZERO exp(x) rounds to 0: those lanes get 0 by a select, which
        # x86's backend folds into the scaling (a zero-masked ``vscalef``): its masked-off
        # lanes are not computed, and scaling into zero or the denormals takes a microcode
        # assist (~150 cycles a vector): a causal-masked softmax, half its entries -inf,
        # ran 5x slower than an unmasked one. (Selecting x too cost another ~6% there.)
        under = e.cmp("<", x, UNDERFLOW_TO_ZERO[e.d])
    lim = 1400.0 if e.d else 150.0
    xc = e.clamp(x, -lim, lim)
    n = e.rint(e.mul(xc, 1.0 / _LN2))
    hi = _LN2 if e.d else float(np.float32(_LN2))
    r = e.fma(e.neg(n), hi, xc)  # exact: the difference fits in the mantissa
    r = e.fma(e.neg(n), _LN2_LO if e.d else _LN2 - hi, r)
    if lo is not None:  # dropped where x was clamped (the result is 0 or inf there anyway)
        r = e.add(r, e.sel(e.cmp("==", xc, x), lo, 0.0))
    t = e.fma(e.mul(r, r), e.poly(r, e.C("exp")), r)  # exp(r) - 1
    p = e.add(1.0, t) if mult is None else e.fma(mult, t, mult)
    out = e.scale2(p, e.b.add(e.toint(n), e.ci(scale)))
    return out if under is None else e.sel(under, 0.0, out)


def _exp(e: _Em, x):
    return e.sel(e.isnan(x), x, _exp_core(e, x))


def _expm1(e: _Em, x):
    xc = e.clamp(x, -40.0 if e.d else -25.0, 710.0 if e.d else 89.0)
    n = e.rint(e.mul(xc, 1.0 / _LN2))
    hi = _LN2 if e.d else float(np.float32(_LN2))
    r = e.fma(e.neg(n), hi, xc)
    r = e.fma(e.neg(n), _LN2_LO if e.d else _LN2 - hi, r)
    r2 = e.mul(r, r)
    p = e.fma(r2, e.fma(r, e.poly(r, e.C("expm1")), 0.5), r)  # expm1(r)
    h = e.pow2(e.b.sub(e.toint(n), e.ci(1)))  # 2**(n-1): finite even when 2**n is not
    res = e.mul(2.0, e.fma(h, p, e.sub(h, 0.5)))  # 2**n * (1 + p) - 1, one rounding
    return e.sel(_or(e.b, e.isnan(x), e.cmp("==", x, 0.0)), x, res)


def _logistic(e: _Em, x):
    t = _exp_core(e, e.neg(e.fabs(x)))  # never overflows
    d = e.add(1.0, t)
    res = e.sel(e.signbit(x), e.div(t, d), e.div(1.0, d))
    return e.sel(e.isnan(x), x, res)


def _tanh(e: _Em, x):
    ax = e.fabs(x)
    z = e.mul(ax, ax)
    small = e.fma(e.mul(ax, z), e.poly(z, e.C("tanh")), ax)
    big = e.sub(1.0, e.div(2.0, e.add(_exp_core(e, e.mul(2.0, ax)), 1.0)))
    res = e.copysign(e.sel(e.cmp("<", ax, 0.625), small, big), x)
    return e.sel(e.isnan(x), x, res)


def _exp2(e: _Em, x):
    """2**x: n = rint(x) and f = x - n are exact, so 2**f = exp(f*ln2) (|f*ln2| <= ln2/2, the
    exp polynomial's range, with one rounding in the argument: under 0.2 ulp) scaled by 2**n.
    Cheaper and more accurate than the general power (``2.0 ** x``, ``jnp.exp2``)."""
    lim = 1100.0 if e.d else 160.0  # (past overflow, and past the smallest denormal)
    xc = e.clamp(x, -lim, lim)
    n = e.rint(xc)
    r = e.mul(e.sub(xc, n), _LN2)
    t = e.fma(e.mul(r, r), e.poly(r, e.C("exp")), r)  # exp(r) - 1
    return e.sel(e.isnan(x), x, e.scale2(e.add(1.0, t), e.toint(n)))


def _sinh(e: _Em, x):
    ax = e.fabs(x)
    z = e.mul(ax, ax)
    small = e.fma(e.mul(ax, z), e.poly(z, e.C("sinh")), ax)
    h = _exp_core(e, ax, scale=-1)  # exp(|x|)/2
    big = e.sub(h, e.div(0.25, h))
    res = e.copysign(e.sel(e.cmp("<", ax, 1.0), small, big), x)
    return e.sel(e.isnan(x), x, res)


def _cosh(e: _Em, x):
    h = _exp_core(e, e.fabs(x), scale=-1)
    return e.sel(e.isnan(x), x, e.add(h, e.div(0.25, h)))


# ----------------------------------------------------------------------------------- log family

def _log_parts(e: _Em, x):
    """x = 2**k * (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)) for positive finite x (denormals
    too); returns (k as float, f, s = f/(2+f), R = z*P(z) with z = s*s)."""
    tiny = e.cmp("<", x, 2.0 ** (-1022 if e.d else -126))
    up = 54 if e.d else 25
    xs = e.sel(tiny, e.mul(x, 2.0 ** up), x)
    i = e.bits(xs)
    t = e.b.sub(i, e.ci(0x3FE6A09E667F3BCD if e.d else 0x3F3504F3))  # bits of sqrt(1/2)
    k = e.b.ashr(t, e.ci(e.mant))
    m = e.flt(e.b.sub(i, e.b.shl(k, e.ci(e.mant))))
    k = e.b.sub(k, e.b.select(tiny, e.ci(up), e.ci(0)))
    f = e.sub(m, 1.0)
    s = e.div(f, e.add(2.0, f))
    z = e.mul(s, s)
    return e.b.sitofp(k, e.ty), f, s, e.mul(z, e.poly(z, e.C("log")))


def _ln2_split(e: _Em):
    # ln2_hi has trailing zero bits so k * ln2_hi is exact
    return (0.6931471803691238, 1.9082149292705877e-10) if e.d else (0.693145751953125,
                                                                      1.4286067653301870e-06)


def _log_assemble(e: _Em, k, f, s, R, c=None):
    hi, lo = _ln2_split(e)
    hfsq = e.mul(0.5, e.mul(f, f))
    klo = e.mul(k, lo)
    if c is not None:
        klo = e.add(klo, c)
    inner = e.sub(hfsq, e.fma(s, e.add(hfsq, R), klo))
    return e.sub(e.mul(k, hi), e.sub(inner, f))


def _log(e: _Em, x):
    res = _log_assemble(e, *_log_parts(e, x))
    res = e.sel(e.cmp("==", x, math.inf), x, res)
    res = e.sel(e.cmp("==", x, 0.0), -math.inf, res)
    return e.sel(e.b.fcmp_unordered("<", x, e.c(0.0)), e.nan(), res)


def _log1p(e: _Em, x):
    u = e.add(1.0, x)
    # u = 1 + x rounded; c = (1 + x - u) / u corrects log(u) to first order
    c_big = e.sub(1.0, e.sub(u, x))
    c_small = e.sub(x, e.sub(u, 1.0))
    c = e.div(e.sel(e.cmp(">=", u, 2.0), c_big, c_small), u)
    res = _log_assemble(e, *_log_parts(e, u), c=c)
    res = e.sel(e.cmp("==", x, math.inf), x, res)
    res = e.sel(e.cmp("==", x, -1.0), -math.inf, res)
    res = e.sel(e.cmp("==", x, 0.0), x, res)
    return e.sel(e.b.fcmp_unordered("<", x, e.c(-1.0)), e.nan(), res)


def _log_dd(e: _Em, x):
    """log(x) as a double-double (hi, lo), relative error about 2**-64, for positive finite x."""
    k, f, _, _ = _log_parts(e, x)
    dh, dl = e.fast_two_sum(2.0, f)  # 2 + f exactly
    sh = e.div(f, dh)
    sl = e.div(e.sub(e.fma(e.neg(sh), dh, f), e.mul(sh, dl)), dh)
    z = e.mul(sh, sh)
    R = e.mul(z, e.poly(z, e.C("log")))  # 2*atanh(s) = 2s + s*R
    L1, L2 = _ln2_split(e)
    H, err = e.two_sum(e.mul(k, L1), e.mul(2.0, sh))
    lo = e.add(e.add(err, e.mul(k, L2)), e.add(e.mul(2.0, sl), e.mul(sh, R)))
    return e.fast_two_sum(H, lo)


def _pow(e: _Em, x, y):
    """x**y in float64 with NumPy's (C99) special cases."""
    b = e.b
    ax = e.fabs(x)
    ay = e.fabs(y)
    lh, ll = _log_dd(e, ax)
    ph = e.mul(y, lh)
    pl = e.add(e.fma(y, lh, e.neg(ph)), e.mul(y, ll))
    mag = _exp_core(e, ph, lo=pl)
    y_int = e.cmp("==", e.rint(y), y)
    half = e.mul(y, 0.5)
    y_odd = b.and_(y_int, e.cmp("!=", e.rint(half), half))
    y_neg = e.cmp("<", y, 0.0)
    # infinite y: |x| == 1 gives 1, otherwise 0 or inf depending on |x| < 1 and the sign of y
    inf_y = e.sel(e.cmp("==", ax, 1.0), 1.0,
                  e.sel(b.icmp_unsigned("==", e.cmp("<", ax, 1.0), y_neg), math.inf, 0.0))
    mag = e.sel(e.cmp("==", ay, math.inf), inf_y, mag)
    mag = e.sel(e.cmp("==", ax, 0.0), e.sel(y_neg, math.inf, 0.0), mag)
    mag = e.sel(e.cmp("==", ax, math.inf), e.sel(y_neg, 0.0, math.inf), mag)
    res = e.flip(b.and_(e.signbit(x), y_odd), mag)
    neg_base = _and(b, e.cmp("<", x, 0.0), e.cmp("!=", ax, math.inf), e.cmp("!=", ay, math.inf),
                    b.not_(y_int))
    res = e.sel(_or(b, neg_base, e.isnan(x), e.isnan(y)), e.nan(), res)
    return e.sel(_or(b, e.cmp("==", y, 0.0), e.cmp("==", x, 1.0)), 1.0, res)


# ------------------------------------------------------------------------- trigonometric family

@cache
def _two_over_pi_bits() -> tuple[int, int]:
    return int(_TWO_OVER_PI_HEX, 16), 4 * len(_TWO_OVER_PI_HEX)


def _g_fixed(k: int, frac: int) -> int:
    """floor(((2**k * 2/pi) mod 4) * 2**frac)."""
    v, n = _two_over_pi_bits()
    j = k + frac
    return (v >> (n - j) if j <= n else v << (j - n)) & ((1 << (frac + 2)) - 1)


_F64_TABLE_K0 = -53  # smallest exponent k (x = m * 2**k, m a 53-bit integer) with |x| >= pi/4
_F64_TABLE_N = 971 + 26 - _F64_TABLE_K0 + 1
_F64_LIMBS = 6


@cache
def _trig_table(double: bool) -> tuple[float, ...]:
    """float32: (2**k*2/pi mod 4) as two doubles per biased exponent; float64: the same value in
    six 25-bit fixed-point limbs (limb i a multiple of 2**-(23+25i)) for k from -53 to 997."""
    out = []
    if not double:
        for ebias in range(255):
            g = Fraction(_g_fixed(max(ebias, 1) - 150, 360), 1 << 360)
            out += _split(g)
        return tuple(out)
    for k in range(_F64_TABLE_K0, _F64_TABLE_K0 + _F64_TABLE_N):
        v = _g_fixed(k, 148)
        for i in range(_F64_LIMBS):
            limb = (v >> (125 - 25 * i)) & ((1 << 25) - 1) if i else v >> 125
            out.append(math.ldexp(limb, -(23 + 25 * i)))
    return tuple(out)


def _table_global(module: ir.Module, double: bool) -> ir.GlobalVariable:
    name = f"__ember_vecmath_two_over_pi_{'f64' if double else 'f32'}"
    gv = module.globals.get(name)
    if gv is None:
        vals = _trig_table(double)
        aty = ir.ArrayType(ir.DoubleType(), len(vals))
        gv = ir.GlobalVariable(module, aty, name)
        gv.initializer = ir.Constant(aty, [ir.Constant(ir.DoubleType(), v) for v in vals])
        gv.global_constant = True
        gv.linkage = "internal"
    return gv


def _load(b: ir.IRBuilder, gv, idx):
    return b.load(b.gep(gv, [ir.Constant(ir.IntType(64), 0), idx], inbounds=True))


def _mod4(d: _Em, v):
    return d.sub(v, d.mul(4.0, d.rint(d.mul(v, 0.25))))


def _table_pair(b: ir.IRBuilder, gv, idx):
    """Entries ``idx`` and ``idx + 1`` of the table ``gv`` (``idx`` an i64 or a vector of them:
    one pair of loads per lane, as a vectorizer would scalarize a gather)."""
    if not isinstance(idx.type, ir.VectorType):
        return _load(b, gv, idx), _load(b, gv, b.add(idx, ir.Constant(idx.type, 1)))
    vty = ir.VectorType(ir.DoubleType(), idx.type.count)
    hi = lo = ir.Constant(vty, None)
    for lane in range(idx.type.count):
        k = ir.Constant(ir.IntType(32), lane)
        i = b.extract_element(idx, k)
        hi = b.insert_element(hi, _load(b, gv, i), k)
        lo = b.insert_element(lo, _load(b, gv, b.add(i, ir.Constant(i.type, 1))), k)
    return hi, lo


def _reduce_f32(e: _Em, x):
    """|x| (float32) = (n + r) * pi/2 with r in about [-1/2, 1/2]: returns (r*pi/2 as a double,
    n mod 4 as i32). Exact for every finite x: m * ((2**k * 2/pi) mod 4) in float64."""
    b = e.b
    d = e.other(ir.DoubleType())
    i64 = e.like(ir.IntType(64))
    i = b.and_(e.bits(x), e.ci(0x7FFFFFFF))
    ebias = b.lshr(i, e.ci(23))
    m = b.and_(i, e.ci(0x7FFFFF))
    m = b.select(b.icmp_unsigned("==", ebias, e.ci(0)), m, b.or_(m, e.ci(0x800000)))
    idx = b.select(b.icmp_unsigned("==", ebias, e.ci(0)), e.ci(1), ebias)
    idx = b.select(b.icmp_unsigned(">", idx, e.ci(254)), e.ci(254), idx)
    idx = b.shl(b.zext(idx, i64), d.ci(1))
    fh, fl = _table_pair(b, _table_global(b.module, False), idx)
    md = b.uitofp(m, d.ty)
    p = d.mul(md, fh)
    pe = d.fma(md, fh, d.neg(p))  # md * fh == p + pe exactly
    q = _mod4(d, p)
    c = d.add(pe, d.mul(md, fl))
    n = d.rint(d.add(q, c))
    r = d.add(d.sub(q, n), c)
    return d.mul(r, _PIO2_HI), b.trunc(b.and_(d.toint(n), d.ci(3)), e.like(ir.IntType(32)))


# Below this |x|, float32 sine and cosine use the table-free reduction ``_reduce_f32_fast``.
# Checked for every float32 below it: sine and cosine stay within 1 ulp (as with the table);
# up to 2**17 one cosine input was 2 ulp off, so the bound is 2**16.
TRIG_F32_FAST_BOUND = float(2 ** 16)


@cache
def _pio2_f32_parts() -> tuple[float, float, float]:
    """pi/2 as P1 + P2 + P3 + O(2**-76), each part a float32 (P1 the nearest to pi/2)."""
    rest, parts = _PI / 2, []
    for _ in range(3):
        part = float(np.float32(float(rest)))
        parts.append(part)
        rest -= Fraction(part)
    return tuple(parts)


def _reduce_f32_fast(e: _Em, ax):
    """|x| (float32, below ``TRIG_F32_FAST_BOUND``) = n*pi/2 + y: returns (y, n mod 4 as i32)
    in float32 without tables (Cody-Waite with fma): n = rint(|x| * 2/pi), then
    y = |x| - n*P1 - n*P2 - n*P3 with pi/2 = P1 + P2 + P3 + O(2**-76). The first step is
    exact (the exact difference is a multiple of 2**-24 below 1 in magnitude), the other two
    round once each (half an ulp of y each), and the dropped n*(pi/2 - P1 - P2 - P3) is below
    2**-60 for n < 2**16. Cancellation makes y small only near multiples of pi/2, where the
    checks over every float32 below the bound (see ``TRIG_F32_FAST_BOUND``) bound the effect
    on the results."""
    p1, p2, p3 = _pio2_f32_parts()
    n = e.rint(e.mul(ax, float(2 / _PI)))
    y = e.fma(n, -p1, ax)
    y = e.fma(n, -p2, y)
    y = e.fma(n, -p3, y)
    return y, e.b.trunc(e.b.and_(e.toint(n), e.ci(3)), e.like(ir.IntType(32)))


# ---- float32 sine and cosine: functions with vector variants
#
# The loop vectorizer cannot skip a gather for the lanes that do not need it: it either
# gathers for every lane or scalarizes the loads behind a branch per lane, and both cost more
# than the rest of sine. So float32 sine (cosine) is a call of an internal function
# ``__ember_vecmath_sin_f32`` (``..._cos_f32``) that names vector variants of itself (LLVM's
# ``vector-function-abi-variant``): a vectorized loop calls ``..._v<N>`` on N lanes at once,
# which reduces every lane the fast way, and only when some lane is large (a branch once per
# vector, almost never taken for typical data) recomputes the vector lane by lane with the
# scalar function. That one (also used for remainder iterations and loops that do not
# vectorize) branches per element to the table reduction.

# Vector variants made: LLVM picks 8 float lanes with 256-bit vectors (AVX2) and 4 for
# epilogues and SSE; on AVX-512 hosts a 16-lane variant (whose slow path is two calls of the
# 8-lane one) makes loops 20% faster. Each variant costs compile time, at -O0 too.
TRIG_F32_LANES = (4, 8)
TRIG_F32_WIDE_LANES = 16


@cache
def _trig_f32_lanes() -> tuple[int, ...]:
    from ember.backends.cpu.llvm_support import host_has_feature
    return TRIG_F32_LANES + ((TRIG_F32_WIDE_LANES,) if host_has_feature("avx512f") else ())


def _trig_f32_finish(e: _Em, x, ax, y, q, which: str):
    """sin(x) or cos(x) from |x| = q*pi/2 + y (mod 2*pi), y a float32."""
    b = e.b
    s, c = _sin_cos_kernels(e, y)
    if which == "cos":
        q = b.add(q, e.i32(1))  # cos(x) = sin(|x| + pi/2)
    odd = b.icmp_unsigned("!=", b.and_(q, e.i32(1)), e.i32(0))
    res = e.flip(b.icmp_unsigned("!=", b.and_(q, e.i32(2)), e.i32(0)), e.sel(odd, c, s))
    if which == "sin":
        res = e.flip(e.signbit(x), res)
    return e.sel(e.cmp("==", ax, math.inf), e.nan(), e.sel(e.isnan(x), x, res))


def _trig_f32_scalar_body(fn: ir.Function, which: str) -> None:
    """The scalar float32 sine/cosine: the fast reduction, or the table's on a branch."""
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    (x,) = fn.args
    e = _Em(b, x.type)
    ax = e.fabs(x)
    y, q = _reduce_f32_fast(e, ax)
    fast_block = b.block
    with b.if_then(e.cmp(">=", ax, TRIG_F32_FAST_BOUND), likely=False):  # NaN: False
        y_slow, q_slow = _reduce_f32(e, ax)
        y_slow = b.fptrunc(y_slow, e.ty)
        slow_block = b.block
    y_phi, q_phi = b.phi(y.type), b.phi(q.type)
    for phi, fast, slow in ((y_phi, y, y_slow), (q_phi, q, q_slow)):
        phi.add_incoming(fast, fast_block)
        phi.add_incoming(slow, slow_block)
    b.ret(_trig_f32_finish(e, x, ax, y_phi, q_phi, which))


def _trig_f32_vector_body(fn: ir.Function, scalar: ir.Function, which: str,
                          halves: ir.Function | None = None) -> None:
    """A vector variant: every lane the fast way; when some lane is at or above the bound
    (or infinite), the whole vector lane by lane through the scalar function instead, or
    with ``halves`` (the variant of half the lanes), half by half through it."""
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    (x,) = fn.args
    e = _Em(b, x.type)
    ax = e.fabs(x)
    y, q = _reduce_f32_fast(e, ax)
    fast = _trig_f32_finish(e, x, ax, y, q, which)
    mask_ty = ir.IntType(e.lanes)
    large = b.bitcast(e.cmp(">=", ax, TRIG_F32_FAST_BOUND), mask_ty)
    fast_block = b.block
    with b.if_then(b.icmp_unsigned("!=", large, ir.Constant(mask_ty, 0)), likely=False):
        if halves is not None:
            def lanes(first, count):
                return ir.Constant(ir.VectorType(ir.IntType(32), count),
                                   list(range(first, first + count)))
            half = e.lanes // 2
            lo, hi = (b.call(halves, [b.shuffle_vector(x, x, lanes(start, half))])
                      for start in (0, half))
            slow = b.shuffle_vector(lo, hi, lanes(0, e.lanes))
        else:
            slow = ir.Constant(x.type, None)
            for lane in range(e.lanes):
                k = ir.Constant(ir.IntType(32), lane)
                slow = b.insert_element(slow, b.call(scalar, [b.extract_element(x, k)]), k)
        slow_block = b.block
    out = b.phi(x.type)
    out.add_incoming(fast, fast_block)
    out.add_incoming(slow, slow_block)
    b.ret(out)


def _keep_until_codegen(module: ir.Module, fns: list[ir.Function]) -> None:
    """Adds ``fns`` to ``llvm.compiler.used`` (so optimization keeps them although nothing
    calls them before vectorization)."""
    i8p = ir.IntType(8).as_pointer()
    used = module.globals.get("llvm.compiler.used")
    items = list(used.initializer.constant) if used is not None else []
    items += [f.bitcast(i8p) for f in fns]
    ty = ir.ArrayType(i8p, len(items))
    if used is None:
        used = ir.GlobalVariable(module, ty, "llvm.compiler.used")
        used.linkage = "appending"
        used.section = "llvm.metadata"
    used.value_type = ty  # an appending array grows; nothing refers to it by its type
    used.initializer = ir.Constant(ty, items)


def _trig_f32_function(module: ir.Module, which: str) -> ir.Function:
    """The module's scalar float32 ``which`` ("sin"/"cos") function, with its vector variants
    (made on first use)."""
    name = f"__ember_vecmath_{which}_f32"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    f32 = ir.FloatType()
    fn = ir.Function(module, ir.FunctionType(f32, [f32]), name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")  # inlined before vectorization, the variants go unused
    fn.attributes.add("nounwind")
    _trig_f32_scalar_body(fn, which)
    variants: dict[int, ir.Function] = {}
    for lanes in _trig_f32_lanes():
        vec = ir.VectorType(f32, lanes)
        vfn = ir.Function(module, ir.FunctionType(vec, [vec]), f"{name}_v{lanes}")
        vfn.linkage = "internal"
        _trig_f32_vector_body(vfn, fn, which, variants.get(lanes // 2))
        variants[lanes] = vfn
    _keep_until_codegen(module, [fn, *variants.values()])  # (fn: as _fmod_function's)
    return fn


def _trig_f32_call(e: _Em, x, which: str):
    return _call_naming_variants(e.b, _trig_f32_function(e.b.module, which), [x])


def _call_naming_variants(b: ir.IRBuilder, fn: ir.Function, args: list) -> ir.Value:
    """A call of the scalar function ``fn`` that names its vector variants ``<fn>_v<N>``
    (N in ``_trig_f32_lanes()``, arguments all vectors). The attribute sits on this call
    only: on the function itself, the vectorizers would also turn the variants' own
    lane-by-lane calls of it into a call of a variant (recursing forever)."""
    call = b.call(fn, args)
    params = "v" * len(args)
    mangled = ",".join(f"_ZGV_LLVM_N{n}{params}_{fn.name}({fn.name}_v{n})"
                       for n in _trig_f32_lanes())
    # llvmlite knows no string attributes: this one is written out as given.
    set.add(call.attributes, f'"vector-function-abi-variant"="{mangled}"')
    return call


def _reduce_f64(e: _Em, ax):
    """|x| = (n + r) * pi/2, returns (y_hi, y_lo) = r*pi/2 as a double-double and n mod 4 (i32).
    Exact for every finite x: x = (mh*2**26 + ml) * 2**k and m*(2**k*2/pi mod 4) is summed from
    exact 25-bit-limb products."""
    b = e.b
    i64 = ir.IntType(64)
    i = e.bits(ax)
    k = b.sub(b.lshr(i, e.ci(52)), e.ci(1075))
    k = b.select(b.icmp_signed("<", k, e.ci(_F64_TABLE_K0)), e.ci(_F64_TABLE_K0), k)
    k = b.select(b.icmp_signed(">", k, e.ci(971)), e.ci(971), k)
    m = b.or_(b.and_(i, e.ci((1 << 52) - 1)), e.ci(1 << 52))
    mh = b.sitofp(b.lshr(m, e.ci(26)), e.ty)
    ml = b.sitofp(b.and_(m, e.ci((1 << 26) - 1)), e.ty)
    gv = _table_global(b.module, True)
    ib = b.mul(b.sub(k, e.ci(_F64_TABLE_K0)), e.ci(_F64_LIMBS))
    ia = b.add(ib, e.ci(26 * _F64_LIMBS))  # mh * 2**26 * G(k) == mh * G(k + 26) mod 4
    cols = []
    for j in range(_F64_LIMBS):
        a = _load(b, gv, b.add(ia, ir.Constant(i64, j)))
        bb = _load(b, gv, b.add(ib, ir.Constant(i64, j)))
        cols.append(e.add(e.mul(mh, a), e.mul(ml, bb)))  # exact: < 2**53 units of the limb
    s01 = e.add(_mod4(e, cols[0]), _mod4(e, cols[1]))
    n = e.rint(e.add(s01, cols[2]))
    h, lo = e.two_sum(e.sub(s01, n), cols[2])
    h, lo2 = e.two_sum(h, cols[3])
    lo = e.add(e.add(e.add(cols[5], cols[4]), lo2), lo)
    rh, rl = e.fast_two_sum(h, lo)
    yh = e.mul(rh, _PIO2_HI)
    yl = e.add(e.fma(rh, _PIO2_HI, e.neg(yh)), e.add(e.mul(rh, _PIO2_LO), e.mul(rl, _PIO2_HI)))
    yh, yl = e.fast_two_sum(yh, yl)
    small = e.cmp("<", ax, math.pi / 4)
    q = b.trunc(b.and_(e.toint(n), e.ci(3)), ir.IntType(32))
    return (e.sel(small, ax, yh), e.sel(small, 0.0, yl),
            b.select(small, ir.Constant(ir.IntType(32), 0), q))


def _sin_cos_kernels(e: _Em, y, yl=None):
    """(sin(y + yl), cos(y + yl)) for |y| <= pi/4."""
    z = e.mul(y, y)
    s_poly = e.mul(e.mul(y, z), e.poly(z, e.C("sin")))
    c_poly = e.mul(e.mul(z, z), e.poly(z, e.C("cos")))
    hz = e.mul(0.5, z)
    w = e.sub(1.0, hz)
    if yl is None:
        return e.add(y, s_poly), e.add(w, e.add(e.sub(e.sub(1.0, w), hz), c_poly))
    s = e.add(y, e.add(s_poly, e.mul(yl, w)))
    c = e.add(w, e.add(e.sub(e.sub(1.0, w), hz), e.sub(c_poly, e.mul(y, yl))))
    return s, c


def _trig(e: _Em, x, which: str):
    b = e.b
    ax = e.fabs(x)
    i32 = ir.IntType(32)
    if e.d:
        y, yl, q = _reduce_f64(e, ax)
        s, c = _sin_cos_kernels(e, y, yl)
        t_odd, t_even = e.neg(e.div(c, s)), e.div(s, c)
    elif which != "tan":
        return _trig_f32_call(e, x, which)
    else:  # the quotient loses about 1.5 ulp: float32 tan is done in float64
        y, q = _reduce_f32(e, ax)
        t_odd, t_even = (b.fptrunc(v, e.ty) for v in _tan_parts_f64(_Em(b, y.type), y))
    odd = b.icmp_unsigned("!=", b.and_(q, ir.Constant(i32, 1)), ir.Constant(i32, 0))
    if which == "tan":
        res = e.flip(e.signbit(x), e.sel(odd, t_odd, t_even))
    elif which == "sin":
        res = e.flip(b.icmp_unsigned("!=", b.and_(q, ir.Constant(i32, 2)), ir.Constant(i32, 0)),
                     e.sel(odd, c, s))
        res = e.flip(e.signbit(x), res)
    else:
        q1 = b.add(q, ir.Constant(i32, 1))
        res = e.flip(b.icmp_unsigned("!=", b.and_(q1, ir.Constant(i32, 2)), ir.Constant(i32, 0)),
                     e.sel(odd, s, c))
    return e.sel(e.cmp("==", ax, math.inf), e.nan(), e.sel(e.isnan(x), x, res))


def _tan_parts_f64(d: _Em, y):
    """(-cos/sin, sin/cos) of y in float64: the odd- and even-quadrant tangents."""
    s, c = _sin_cos_kernels(d, y)
    return d.neg(d.div(c, s)), d.div(s, c)


# ------------------------------------------------------------------------- inverse trigonometric

_ATAN_BREAKS = (7 / 16, 11 / 16, 19 / 16, 39 / 16)
# atan(0), atan(1/2), atan(1), atan(3/2), atan(inf) as double-doubles
_ATAN_HI = (0.0, 0.4636476090008061, 0.7853981633974483, 0.982793723247329, 1.5707963267948966)
_ATAN_LO = (0.0, 2.2698777452961687e-17, 3.061616997868383e-17, 1.3903311031230998e-17,
            6.123233995736766e-17)


def _atan_abs(e: _Em, ax):
    """atan(ax) for ax >= 0: atan(c) + atan(t) with t = (ax - c)/(1 + c*ax) on five intervals."""
    conds = [e.cmp(">=", ax, v) for v in _ATAN_BREAKS]

    def pick(vals):
        out = e.c(vals[0])
        for cond, v in zip(conds, vals[1:]):
            out = e.sel(cond, v, out)
        return out

    num = e.fma(pick((1.0, 2.0, 1.0, 1.0, 0.0)), ax, pick((0.0, -1.0, -1.0, -1.5, 0.0)))
    den = e.fma(pick((0.0, 1.0, 1.0, 1.5, 1.0)), ax, pick((1.0, 2.0, 1.0, 1.0, 0.0)))
    num = e.sel(conds[3], -1.0, num)  # t = -1/ax (also for ax = inf)
    t = e.div(num, den)
    z = e.mul(t, t)
    tp = e.mul(e.mul(t, z), e.poly(z, e.C("atan")))
    return e.sub(pick(_ATAN_HI), e.sub(e.sub(e.neg(tp), pick(_ATAN_LO)), t))


def _atan(e: _Em, x):
    return e.sel(e.isnan(x), x, e.copysign(_atan_abs(e, e.fabs(x)), x))


# Steps of ``_fmod_f32``: divisors |y| * 2**k, largest first. 48 bits apart, so each step's
# quotient is below 2**48 (the first one's below 2**37: |x| < 2**128, |y| * 2**240 >= 2**91).
_FMOD_F32_STEPS = (240, 192, 144, 96, 48, 0)


def _fmod_f32_steps(divisor: float) -> tuple[int, ...]:
    """The steps needed for a constant |y| (finite, nonzero): the first quotient, below
    2**128 / (|y| * 2**k), must stay under 2**48 (3 steps for 2**-16 <= |y| < 2**32)."""
    need = 128 - 48 - math.log2(divisor)  # the first step's k must be at least this
    top = min([k for k in _FMOD_F32_STEPS if k >= need], default=_FMOD_F32_STEPS[0])
    return tuple(k for k in _FMOD_F32_STEPS if k <= top)


def _fmod_f32(e: _Em, x, y, steps: tuple[int, ...] = _FMOD_F32_STEPS):
    """C's fmod of two float32 values, given as float64 (``e`` is float64), exactly.

    ``r = |x|`` is reduced by ``s = |y| * 2**k`` for each k of ``_FMOD_F32_STEPS``; since
    ``|y| * 2**k`` is a multiple of ``|y|``, the last step's remainder is fmod's. In a step
    the quotient ``r / s`` is below 2**48, so ``q = trunc(r * (1/|y|) * 2**-k)`` (relative
    error ~2**-52) is the true one or one off either way, and one correction puts
    ``r - q*s`` into [0, s). That difference is exact (``fma``): it is a multiple of
    ``2**min(lsb(x), lsb(s))`` below ``2*s``, and when a step changes r at all, |x| is at least
    about s/2, so lsb(x) >= lsb(s) - 1 and the difference has at most 26 bits. The result,
    below |y| and a multiple of float32 units of x or y, is a float32 value. The frem it
    replaces is a libm call per element; this vectorizes.

    ``steps``: fewer suffice for a constant divisor (``_fmod_f32_steps``), and ``(0,)`` while
    |x| < |y| * 2**48 (``_fmod_function``). NaNs and y = inf are ``_fmod_special_cases``'s."""
    ax, ay = e.fabs(x), e.fabs(y)
    inv = e.div(1.0, ay)
    r = ax
    for k in steps:
        s = e.mul(ay, 2.0 ** k)
        q = e.call("trunc", e.mul(r, e.mul(inv, 2.0 ** -k)))
        t = e.fma(e.neg(q), s, r)
        fix = e.sel(e.cmp("<", t, 0.0), s, e.sel(e.cmp(">=", t, s), e.neg(s), 0.0))
        r = e.add(t, fix)
    return e.copysign(r, x)


def _fmod_function(module: ir.Module, scalar: ir.Type) -> ir.Function:
    """The module's fmod of two float32 or float64 variables (``__ember_vecmath_fmod_f32``,
    ``..._f64``; made on first use) with vector variants, as float32 sine: each lane takes one
    exact step, and only a vector (a scalar) with some lane beyond it, or with y = 0 or
    x = inf, takes the general code on a branch.

    float32, in float64: one step of ``_fmod_f32`` is exact while |x| < |y| * 2**48; the
    general code is its six steps (4x the cost). float64: ``_fmod_one_division`` is exact
    while |x| < |y| * 2**52; the general code is ``frem`` (libm's fmod, lane by lane)."""
    double = isinstance(scalar, ir.DoubleType)
    name = "__ember_vecmath_fmod_" + ("f64" if double else "f32")
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    variants = []
    for lanes in (None, *_trig_f32_lanes()):
        ty = scalar if lanes is None else ir.VectorType(scalar, lanes)
        vfn = ir.Function(module, ir.FunctionType(ty, [ty, ty]),
                          name if lanes is None else f"{name}_v{lanes}")
        vfn.linkage = "internal"
        if lanes is None:
            vfn.attributes.add("noinline")  # inlined before vectorization, no variant is used
            vfn.attributes.add("nounwind")
        else:
            variants.append(vfn)
        b = ir.IRBuilder(vfn.append_basic_block("entry"))
        d = _Em(b, ty).other(ir.DoubleType())
        x, y = vfn.args if double else (b.fpext(a, d.ty) for a in vfn.args)
        if double:
            fast, bound = _fmod_one_division(d, x, y), 2.0 ** 52
        else:
            fast, bound = _fmod_f32(d, x, y, (0,)), 2.0 ** 48
        rare = d.cmp(">=", d.fabs(x), d.mul(d.fabs(y), bound))  # (NaN: False)
        if lanes is not None:
            rare = b.icmp_unsigned("!=", b.bitcast(rare, ir.IntType(lanes)),
                                   ir.Constant(ir.IntType(lanes), 0))
        fast_block = b.block
        with b.if_then(rare, likely=False):
            general = b.frem(x, y) if double else _fmod_f32(d, x, y)
            slow_block = b.block
        out = b.phi(d.ty)
        out.add_incoming(fast, fast_block)
        out.add_incoming(general, slow_block)
        b.ret(_fmod_special_cases(_Em(b, ty), *vfn.args,
                                  out if double else b.fptrunc(out, ty)))
    # (the scalar one too: a use besides calls keeps its signature, which the variant names
    # describe, from losing an argument that every call passes the same constant)
    _keep_until_codegen(module, [module.globals[name], *variants])
    return module.globals[name]


def _fmod_one_division(e: _Em, x, y):
    """fmod of float64 values while |x| < |y| * 2**52 (and y != 0, x finite): the correctly
    rounded quotient truncates to the true one or one more (never less: an integer below
    2**52 is a float), so ``fma(-q, |y|, |x|)``, exact (a multiple of lsb(y) below |y| in
    magnitude, since |x| >= |y| whenever q > 0), needs one correction up."""
    ax, ay = e.fabs(x), e.fabs(y)
    t = e.fma(e.neg(e.call("trunc", e.div(ax, ay))), ay, ax)
    return e.copysign(e.add(t, e.sel(e.cmp("<", t, 0.0), ay, 0.0)), x)


def _fmod_power_of_two(e: _Em, x, y, c: float):
    """fmod by the constant ``|y| = c``, a power of two, in x's own type: one exact step,
    ``|x| - trunc(|x| / c) * c`` (the quotient is exact; from ``|x| >= 2**24 * c``, where the
    float32 quotient could overflow, x is a multiple of c and the remainder 0)."""
    ax = e.fabs(x)
    q = e.call("trunc", e.mul(ax, 1.0 / c))
    big = e.b.and_(e.cmp(">=", ax, c * 2.0 ** 24), e.cmp("<", ax, math.inf))
    return e.copysign(e.sel(big, 0.0, e.sub(ax, e.mul(q, c))), x)


@cache
def _default_nan_bits(dtype: str) -> int:
    """The bits of the NaN this processor makes of an invalid operation (inf * 0), which
    libm's fmod returns for y = 0 or x = inf (x86: the sign bit set)."""
    with np.errstate(invalid="ignore"):
        nan = np.array([np.inf], dtype) * np.zeros(1, dtype)
    return int(nan.view(f"u{nan.itemsize}")[0])


def _fmod_special_cases(e: _Em, x, y, out):
    """fmod's special cases over ``out = copysign(fmod(|x|, |y|), x)``, in the result type:
    y = inf gives x (the steps made NaN of 0 * inf); NaNs with libm's bits, chosen where
    LLVM keeps bits (select, integer or; which NaN arithmetic makes is the optimizer's
    choice): sort and top_k order NaNs by their sign bit, and eager code's fmod is libm's.
    y = 0 or x = inf: the processor's default NaN; a NaN operand: itself, quieted, x's
    first."""
    b = e.b
    quiet = e.ci(1 << (e.mant - 1))
    nan_bits = _default_nan_bits("float64" if e.d else "float32")
    ax, ay = e.fabs(x), e.fabs(y)
    out = e.sel(b.and_(e.cmp("==", ay, math.inf), e.cmp("<", ax, math.inf)), x, out)
    invalid = b.or_(e.cmp("==", ay, 0.0), e.cmp("==", ax, math.inf))
    out = e.sel(invalid, e.flt(e.ci(nan_bits)), out)
    out = e.sel(e.isnan(y), e.flt(b.or_(e.bits(y), quiet)), out)
    return e.sel(e.isnan(x), e.flt(b.or_(e.bits(x), quiet)), out)


def _atan2(e: _Em, y, x):
    """numpy.arctan2(y, x) with the C99 special cases."""
    b = e.b
    ax, ay = e.fabs(x), e.fabs(y)
    swap = e.cmp(">", ay, ax)
    num = e.sel(swap, ax, ay)
    den = e.sel(swap, ay, ax)
    t = e.div(num, den)
    t = e.sel(e.cmp("==", den, 0.0), 0.0, t)
    t = e.sel(e.cmp("==", num, math.inf), 1.0, t)
    a = _atan_abs(e, t)
    # angle = c + sign * a with c in {0, pi/2, pi} (double-double) chosen by octant
    neg_x = e.signbit(x)
    c_hi = e.sel(swap, _PIO2_HI, e.sel(neg_x, _PI_HI, 0.0))
    c_lo = e.sel(swap, _PIO2_LO, e.sel(neg_x, _PI_LO, 0.0))
    a = e.add(c_hi, e.add(e.flip(b.xor(swap, neg_x), a), c_lo))
    res = e.copysign(a, y)
    return e.sel(b.or_(e.isnan(x), e.isnan(y)), e.nan(), res)


def _asin_tail(e: _Em, ax):
    """(s, w) with asin(s) = s + w and s = sqrt((1 - ax)/2), for 1/2 <= ax <= 1."""
    z = e.mul(e.sub(1.0, ax), 0.5)
    s = e.sqrt(z)
    corr = e.div(e.fma(e.neg(s), s, z), e.mul(2.0, s))  # sqrt(z) - s
    corr = e.sel(e.cmp("==", s, 0.0), 0.0, corr)
    return s, e.add(corr, e.mul(e.mul(s, z), e.poly(z, e.C("asin"))))


def _asin_small(e: _Em, x):
    z = e.mul(x, x)
    return e.fma(e.mul(x, z), e.poly(z, e.C("asin")), x)


def _asin(e: _Em, x):
    ax = e.fabs(x)
    s, w = _asin_tail(e, ax)
    big = e.sub(e.sub(_PIO2_HI, e.mul(2.0, s)), e.sub(e.mul(2.0, w), _PIO2_LO))
    res = e.copysign(e.sel(e.cmp("<", ax, 0.5), _asin_small(e, ax), big), x)
    return e.sel(e.b.fcmp_unordered(">", ax, e.c(1.0)), e.nan(), res)


def _acos(e: _Em, x):
    ax = e.fabs(x)
    s, w = _asin_tail(e, ax)
    small = e.sub(_PIO2_HI, e.sub(_asin_small(e, x), _PIO2_LO))
    pos = e.mul(2.0, e.add(s, w))
    neg = e.sub(e.sub(_PI_HI, e.mul(2.0, s)), e.sub(e.mul(2.0, w), _PI_LO))
    res = e.sel(e.cmp("<", ax, 0.5), small, e.sel(e.signbit(x), neg, pos))
    return e.sel(e.b.fcmp_unordered(">", ax, e.c(1.0)), e.nan(), res)


# ---------------------------------------------------------------------- inverse hyperbolic

def _odd_poly(e: _Em, ax, name):
    z = e.mul(ax, ax)
    return e.fma(e.mul(ax, z), e.poly(z, e.C(name)), ax)


def _asinh(e: _Em, x):
    # One log1p for both ranges past the polynomial's: log1p(u) with u = |x| + z/(1 + sqrt(1 +
    # z)) below 2, and u = w - 1 beyond, where log(w) = asinh(|x|) (less ln 2 past 2**28);
    # the rounding of w - 1 costs under half an ulp of the result there.
    ax = e.fabs(x)
    z = e.mul(ax, ax)
    huge = e.cmp(">=", ax, 2.0 ** 28)
    w = e.sel(huge, ax, e.fma(2.0, ax, e.div(1.0, e.add(e.sqrt(e.add(z, 1.0)), ax))))
    u = e.sel(e.cmp("<", ax, 2.0), e.add(ax, e.div(z, e.add(1.0, e.sqrt(e.add(1.0, z))))),
              e.sub(w, 1.0))
    big = e.add(_log1p(e, u), e.sel(huge, _LN2, 0.0))
    res = e.sel(e.cmp("<", ax, 0.5), _odd_poly(e, ax, "asinh"), big)
    return e.sel(e.isnan(x), x, e.copysign(res, x))


def _acosh(e: _Em, x):
    # One log1p, as in _asinh: u = t + sqrt(t*t + 2t) (t = x - 1) below 2, else w - 1 with
    # log(w) = acosh(x) (less ln 2 past 2**28).
    t = e.sub(x, 1.0)
    huge = e.cmp(">=", x, 2.0 ** 28)
    w = e.sel(huge, x, e.sub(e.mul(2.0, x),
                             e.div(1.0, e.add(x, e.sqrt(e.fma(x, x, -1.0))))))
    u = e.sel(e.cmp("<", x, 2.0), e.add(t, e.sqrt(e.fma(t, t, e.mul(2.0, t)))), e.sub(w, 1.0))
    res = e.add(_log1p(e, u), e.sel(huge, _LN2, 0.0))
    return e.sel(e.b.fcmp_unordered("<", x, e.c(1.0)), e.nan(), res)


def _atanh(e: _Em, x):
    ax = e.fabs(x)
    big = e.mul(0.5, _log1p(e, e.div(e.mul(2.0, ax), e.sub(1.0, ax))))
    res = e.copysign(e.sel(e.cmp("<", ax, 0.5), _odd_poly(e, ax, "atanh"), big), x)
    return e.sel(e.b.fcmp_unordered(">", ax, e.c(1.0)), e.nan(), res)


# ------------------------------------------------------------------------------- erf, cbrt

_ERFC_BREAKS = (1.0, 1.5, 2.0, 3.0, 4.0)
_ERFC_CENTERS = (0.75, 1.25, 1.75, 2.5, 3.5)


def _erfc_big(e: _Em, ax):
    """erfc(ax) for ax >= 1/2: exp(-ax^2) times a fitted factor."""
    a = e.clamp(ax, 0.5, 30.0)
    conds = [e.cmp(">=", a, v) for v in _ERFC_BREAKS]
    sets = [e.C(f"erfc{i}") for i in range(5)] + [e.C("erfcq")]
    deg = max(len(s) for s in sets)

    def pick(vals):
        out = e.c(vals[0])
        for cond, v in zip(conds, vals[1:]):
            out = e.sel(cond, v, out)
        return out

    coeffs = [pick([s[j] if j < len(s) else 0.0 for s in sets]) for j in range(deg)]
    q = conds[-1]
    v = e.sel(q, e.div(1.0, e.mul(a, a)), e.sub(a, pick(_ERFC_CENTERS + (0.0,))))
    p = e.poly(v, coeffs)
    h = e.sel(q, e.div(p, a), p)
    x2 = e.mul(a, a)
    x2l = e.fma(a, a, e.neg(x2))
    return _exp_core(e, e.neg(x2), lo=e.neg(x2l), mult=h)


def _erf_small(e: _Em, ax):
    """erf(ax) for 0 <= ax <= 1: ax * (2/sqrt(pi) + z*Q(z)), z = ax^2, with 2/sqrt(pi) as a
    hi + lo pair so that the leading term rounds once."""
    z = e.mul(ax, ax)
    cs = e.C("erf")
    lo = _TWO_OVER_SQRTPI_LO if e.d else _TWO_OVER_SQRTPI_LO32
    return e.fma(ax, cs[0], e.mul(ax, e.fma(z, e.poly(z, cs[1:]), lo)))


def _erf(e: _Em, x):
    if not e.d:
        return _erf_f32(e, x)
    ax = e.fabs(x)
    big = e.sub(1.0, _erfc_big(e, ax))
    res = e.copysign(e.sel(e.cmp("<", ax, 1.0), _erf_small(e, ax), big), x)
    return e.sel(e.isnan(x), x, res)


def _erfc(e: _Em, x):
    if not e.d:
        return _erfc_f32(e, x)
    ax = e.fabs(x)
    small = e.fma(e.neg(x), e.poly(e.mul(x, x), e.C("erf")), 1.0)
    big = _erfc_big(e, ax)
    res = e.sel(e.cmp("<", ax, 1.0), small, e.sel(e.signbit(x), e.sub(2.0, big), big))
    res = e.sel(e.cmp(">=", x, 0.5), big, res)
    return e.sel(e.isnan(x), x, res)


# float32 erf and erfc have code of their own (float64 vectors have half the lanes): two
# polynomials for erf, one rational function times an exponential for erfc.
_ERFC32_MAX = 10.1  # erfc(x) < 2**-151 from here on: rounds to 0
_LN_TWO_OVER_SQRTPI = math.log(2 / math.sqrt(math.pi))  # 1/sqrt(pi) = exp(this) / 2


def _erf_f32(e: _Em, x):
    # 1 - erfc(|x|) from 1 on, erfc a polynomial in |x| - 2.5 (an exact subtraction) on
    # [1, 4]; beyond 4, erfc(4) < 2**-25 and the result rounds to 1. Within 1 ulp.
    ax = e.fabs(x)
    big = e.sub(1.0, e.poly(e.sub(e.call("minnum", ax, 4.0), 2.5), e.C("erf1")))
    res = e.copysign(e.sel(e.cmp("<", ax, 1.0), _erf_small(e, ax), big), x)
    return e.sel(e.isnan(x), x, res)


def _erfc_f32(e: _Em, x):
    # 1 - erf(x) below 1/2 (erfc >= 1/2 up to 0.4769, and the subtraction is exact from there
    # on), 2 - erfc(|x|) up to -1
    ax = e.fabs(x)
    big = _erfc_big_f32(e, ax)
    small = e.sub(1.0, e.copysign(_erf_small(e, ax), x))
    res = e.sel(e.cmp("<=", x, -1.0), e.sub(2.0, big), small)
    res = e.sel(e.cmp(">=", x, 0.5), big, res)
    return e.sel(e.isnan(x), x, res)


def _erfc_big_f32(e: _Em, ax):
    """float32 erfc(ax) for ax >= 1/2: exp(-a^2) / (sqrt(pi) * (a + P(a)/Q(a))), a = min(ax,
    10.1), within 3 ulp (checked for every float32 from 1/2 to 10.1).

    The quotient is Q / (a*Q + P): the rounding errors of the polynomials then only enter
    through P/Q (about 1/(2a) for large a), weighted by its share of a + P/Q, under 1/2.
    1/sqrt(pi) = exp(L)/2 joins the exponent instead of costing a rounded product, and -a^2 is
    split exactly, a^2 = h + l (l from an fma), so exp(L - h - l) is accurate even where h is
    100. The exponential rounds once, in its product with the quotient, before the scaling
    (denormal results, from a = 9.2, round again there)."""
    a = e.call("minnum", ax, _ERFC32_MAX)  # (NaN becomes 10.1: callers patch NaN)
    q = e.poly(a, e.C("erfc_den"))
    quot = e.div(q, e.fma(a, q, e.poly(a, e.C("erfc_num"))))  # 1 / (a + P/Q)
    h = e.mul(a, a)
    l = e.fma(a, a, e.neg(h))
    # exp(y), y = L - h - l: n = rint(y/ln2), and r = y - n*ln2 is (-h - n*ln2_hi), exact (a
    # multiple of ulp(h) or of 2**-24, h >= 1/4, under 1/2 in size), plus L - l - n*ln2_lo
    n = e.rint(e.fma(h, -1 / _LN2, _LN_TWO_OVER_SQRTPI / _LN2))
    hi = float(np.float32(_LN2))
    r = e.add(e.fma(e.neg(n), hi, e.neg(h)),
              e.fma(e.neg(n), _LN2 - hi, e.sub(_LN_TWO_OVER_SQRTPI, l)))
    t = e.fma(e.mul(r, r), e.poly(r, e.C("exp")), r)  # exp(r) - 1
    return e.scale2(e.fma(quot, t, quot), e.b.sub(e.toint(n), e.ci(1)))


def _cbrt(e: _Em, x):
    """float64 cube root: exponent/3 bit guess, then Newton steps (the last with an fma
    residual)."""
    b = e.b
    ax = e.fabs(x)
    tiny = e.cmp("<", ax, 2.0 ** -1022)
    xs = e.sel(tiny, e.mul(ax, 2.0 ** 54), ax)
    i32 = ir.IntType(32)
    hi = b.trunc(b.lshr(e.bits(xs), e.ci(32)), i32)
    g = b.add(b.udiv(hi, ir.Constant(i32, 3)), ir.Constant(i32, 0x2A9F7893))
    y = e.flt(b.shl(b.zext(g, e.ity), e.ci(32)))
    for _ in range(4):
        y2 = e.mul(y, y)
        y = e.sub(y, e.div(e.fma(y2, y, e.neg(xs)), e.mul(3.0, y2)))
    res = e.copysign(e.mul(y, e.sel(tiny, 2.0 ** -18, 1.0)), x)
    keep = _or(b, e.cmp("==", ax, 0.0), e.cmp("==", ax, math.inf), e.isnan(x))
    return e.sel(keep, x, res)


def _rsqrt(e: _Em, x):
    return e.div(1.0, e.sqrt(x))


# ------------------------------------------------------------------------------- dispatch

_UNARY = {
    "exponential": _exp, "exponential_minus_one": _expm1, "log": _log, "log_plus_one": _log1p,
    "tanh": _tanh, "logistic": _logistic, "sine": lambda e, x: _trig(e, x, "sin"),
    "cosine": lambda e, x: _trig(e, x, "cos"), "tan": lambda e, x: _trig(e, x, "tan"),
    "erf": _erf, "erfc": _erfc, "cbrt": _cbrt, "rsqrt": _rsqrt, "atan": _atan, "asin": _asin,
    "acos": _acos, "sinh": _sinh, "cosh": _cosh, "asinh": _asinh, "acosh": _acosh,
    "atanh": _atanh,
}


def _special(name: str):
    """lgamma, digamma and erf_inv live in ``vecmath_special``, which builds on this module
    (imported at first use, so either module can be imported first)."""
    def impl(e: _Em, x):
        from ember.backends.cpu import vecmath_special
        return getattr(vecmath_special, name)(e, x)
    return impl


_UNARY.update({opcode: _special(opcode) for opcode in ("lgamma", "digamma", "erf_inv")})
_BINARY = {"power": _pow, "atan2": _atan2}  # ("remainder": emit_binary picks its form)
# float32 opcodes with native float32 code; the others run the float64 code and round
_NATIVE_F32 = frozenset({"exponential", "exponential_minus_one", "log", "log_plus_one", "tanh",
                         "logistic", "sine", "cosine", "tan", "rsqrt", "exp2", "sinh",
                         "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "erf_inv"})


def _float_type(fn: str, arg: str, v) -> ir.Type:
    if not isinstance(v, ir.Value) or not isinstance(v.type, (ir.FloatType, ir.DoubleType)):
        raise TypeError(f"{fn}: {arg} must be an llvmlite float or double value, got "
                        f"{getattr(v, 'type', type(v).__name__)}")
    return v.type


def _run(builder: ir.IRBuilder, ty: ir.Type, opcode: str, impl, args):
    if isinstance(ty, ir.FloatType) and opcode not in _NATIVE_F32:
        f64 = ir.DoubleType()
        out = impl(_Em(builder, f64), *[builder.fpext(a, f64) for a in args])
        return builder.fptrunc(out, ty)
    return impl(_Em(builder, ty), *args)


def emit_unary(builder: ir.IRBuilder, opcode: str, x: ir.Value) -> ir.Value:
    """Emits IR computing the HLO unary ``opcode`` of the scalar float ``x``.

    The code is branch-free, except for float32 sine and cosine: a call of a function of the
    module that LLVM's loop vectorizer replaces by its vector variant (``_trig_f32_function``).

    Args:
        builder: positioned where the code goes; intrinsics and tables are declared in
            ``builder.module``.
        opcode: an HLO opcode from ``SUPPORTED_UNARY`` (``"exponential"``, ``"sine"``, ...).
        x: a ``float`` or ``double`` value.

    Returns:
        The result, of the type of ``x``.

    Example:
        >>> y = emit_unary(builder, "tanh", x)  # doctest: +SKIP
    """
    ty = _float_type("emit_unary", "x", x)
    if opcode not in SUPPORTED_UNARY:
        raise ValueError(f"emit_unary: unsupported opcode {opcode!r}; supported: "
                         f"{sorted(SUPPORTED_UNARY)}")
    return _run(builder, ty, opcode, _UNARY[opcode], (x,))


def emit_binary(builder: ir.IRBuilder, opcode: str, x: ir.Value, y: ir.Value) -> ir.Value:
    """Emits branch-free IR computing the HLO binary ``opcode`` of scalar floats ``x``, ``y``.

    ``"power"`` is ``x ** y`` and ``"atan2"`` is ``numpy.arctan2(x, y)`` (HLO operand order),
    both with NumPy's special cases; ``"remainder"`` is C's ``fmod`` (exact and vectorized,
    ``_fmod_function``; float64 quotients beyond 2**52 through libm). A power of the constant 2 is
    computed as ``exp2(y)``, a constant exponent of 0, 1, 2, -1 or 1/2 without pow
    (``_power_of_constant``).

    Example:
        >>> z = emit_binary(builder, "atan2", lhs, rhs)  # doctest: +SKIP
    """
    ty = _float_type("emit_binary", "x", x)
    if _float_type("emit_binary", "y", y) != ty:
        raise TypeError(f"emit_binary: x and y must have the same type, got {ty} and {y.type}")
    if opcode not in SUPPORTED_BINARY:
        raise ValueError(f"emit_binary: unsupported opcode {opcode!r}; supported: "
                         f"{sorted(SUPPORTED_BINARY)}")
    if opcode == "remainder":
        return _remainder(builder, ty, x, y)
    if opcode == "power" and isinstance(x, ir.Constant) and x.constant == 2.0:
        return _run(builder, ty, "exp2", _exp2, (y,))
    if opcode == "power" and isinstance(y, ir.Constant):
        direct = _power_of_constant(_Em(builder, ty), x, float(y.constant))
        if direct is not None:
            return direct
    return _run(builder, ty, opcode, _BINARY[opcode], (x, y))


def _remainder(builder: ir.IRBuilder, ty: ir.Type, x, y):
    """fmod: a call of ``_fmod_function`` (float64, or a variable divisor); a float32
    constant divisor inline, one step for a power of two, else the steps it needs."""
    c = abs(float(y.constant)) if isinstance(y, ir.Constant) else math.nan
    if not (isinstance(ty, ir.FloatType) and 0.0 < c < math.inf):
        return _call_naming_variants(builder, _fmod_function(builder.module, ty), [x, y])
    if math.frexp(c)[0] == 0.5:  # a power of two
        out = _fmod_power_of_two(_Em(builder, ty), x, y, c)
    else:
        out = _run(builder, ty, "remainder", partial(_fmod_f32, steps=_fmod_f32_steps(c)),
                   (x, y))
    return _fmod_special_cases(_Em(builder, ty), x, y, out)


def _power_of_constant(e: _Em, x, c: float):
    """``x ** c`` for the exponents NumPy's power takes without pow: 0, 1, 2 (``x * x``), -1
    (``1 / x``) and 1/2 (``sqrt``, with C's ``pow(-0, 0.5) = +0`` and ``pow(-inf, 0.5) =
    +inf``); each is one correctly rounded operation, the rounding of pow's exact result (a
    general pow costs ~30 operations: ``x ** 0.5`` on 1e6 float32 took 1.6 ms). None for
    other exponents."""
    if c == 0.0:
        return e.c(1.0)
    if c == 1.0:
        return x
    if c == 2.0:
        return e.mul(x, x)
    if c == -1.0:
        return e.div(1.0, x)
    if c == 0.5:
        return e.sel(e.cmp("==", x, -math.inf), math.inf, e.add(e.sqrt(x), 0.0))
    return None
