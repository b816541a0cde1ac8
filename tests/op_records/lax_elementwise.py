"""Records for the elementwise lax primitives (kind="lax"; references are NumPy or loops)."""

import math

import numpy as np

from ember import lax
from tests.op_records.base import ALL, BOOLS, FLOATS, INTS, NUMERIC, OpRecord

U = (((),), ((0,),), ((2, 3),))
B = (((), ()), ((4,), (4,)), ((2, 3), (2, 3)), ((), (2, 3)), ((0,), (0,)))
SIGNED = (np.dtype("int32"), np.dtype("int8"))
FI = FLOATS + INTS
INT_BOOL = INTS + BOOLS


def _u(name, fn, ref, dtypes=FLOATS, rng="default", diff=True, shapes=U, **kw):
    return OpRecord("lax_" + name, fn, ref, dtypes, shapes, rng=rng, differentiable=diff,
                    kind="lax", **kw)


def _b(name, fn, ref, dtypes=FLOATS, rng="default", diff=True, shapes=B, **kw):
    return OpRecord("lax_" + name, fn, ref, dtypes, shapes, rng=rng, differentiable=diff,
                    kind="lax", **kw)


def _vec(f):
    return lambda x: np.vectorize(lambda v: f(float(v)), otypes=[np.float64])(x)


def _trunc_div(x, y):
    if x.dtype.kind in "iu":
        q = np.abs(x.astype(np.int64)) // np.abs(y.astype(np.int64))
        return np.where((x < 0) != (y < 0), -q, q).astype(x.dtype)
    return x / y


def _rem(x, y):
    return np.fmod(x, y)


def _round_away(x):
    return np.vectorize(lambda v: math.copysign(math.floor(abs(v) + 0.5), v),
                        otypes=[np.float64])(x.astype(np.float64))


def _erf_inv_ref(y):
    # Bisection on math.erf: independent of the rational approximation used by the impl.
    def one(v):
        lo, hi = -6.0, 6.0
        for _ in range(80):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if math.erf(mid) < v else (lo, mid)
        return (lo + hi) / 2
    return np.vectorize(one, otypes=[np.float64])(y.astype(np.float64))


def _digamma_ref(x):
    h = 1e-5  # central difference of lgamma
    return _vec(lambda v: (math.lgamma(v + h) - math.lgamma(v - h)) / (2 * h))(x)


def _bits(x):
    return x.dtype.itemsize * 8


def _popcount_ref(x):
    u = x.astype(np.int64) % (1 << _bits(x))
    return sum((u >> k) & 1 for k in range(_bits(x))).astype(x.dtype)


def _clz_ref(x):
    n = _bits(x)
    f = np.vectorize(lambda v: n - (int(v) % (1 << n)).bit_length(), otypes=[np.int64])
    return f(x).astype(x.dtype)


def _bitcast_ref(dt):
    def ref(x):
        dt_ = np.dtype(dt)
        flat = np.ascontiguousarray(x).reshape(-1).view(dt_)
        if dt_.itemsize < x.dtype.itemsize:
            return flat.reshape(x.shape + (x.dtype.itemsize // dt_.itemsize,))
        return flat.reshape(x.shape[:-1] if dt_.itemsize > x.dtype.itemsize else x.shape)
    return ref


def _mulhi_ref(x, y):
    x, y = np.broadcast_arrays(x, y)
    n = _bits(x)
    hi = [(int(a) * int(b)) >> n for a, b in zip(x.ravel(), y.ravel())]
    return np.array([h % (1 << n) for h in hi], np.uint64).astype(x.dtype).reshape(x.shape)


def _shift_ref(kind):
    def ref(x, y):
        n = _bits(x)
        xi = x.astype(np.int64)
        out = []
        for a, s in zip(np.broadcast_to(xi, np.broadcast_shapes(x.shape, y.shape)).ravel(),
                        np.broadcast_to(y, np.broadcast_shapes(x.shape, y.shape)).ravel()):
            a, s = int(a), int(s)
            u = a % (1 << n)
            if kind == "left":
                r = (u << s) % (1 << n) if 0 <= s < n else 0
            elif kind == "logical":
                r = u >> s if 0 <= s < n else 0
            else:
                signed = u - (1 << n) if u >= 1 << (n - 1) else u
                r = signed >> min(s, n - 1) if s >= 0 else (-1 if signed < 0 else 0)
            out.append(r % (1 << n))
        shape = np.broadcast_shapes(x.shape, y.shape)
        return np.array(out, dtype=np.uint64).reshape(shape).astype(
            np.dtype(f"u{x.dtype.itemsize}")).view(x.dtype)
    return ref


def _int_pow_ref(y):
    def ref(x):
        return np.vectorize(lambda v: v ** y if y >= 0 else (1 if v == 1 else (
            (-1) ** (-y) if v == -1 else 0)), otypes=[object])(x.astype(object)).astype(
            np.int64).astype(x.dtype) if x.dtype.kind in "iu" else np.power(
            x.astype(np.float64), float(y))
    return ref


def _parts(z):
    # The generic tests compare real arrays: complex results are checked as (real, imag).
    return lax.real(z), lax.imag(z)


RECORDS = [
    _b("add", lax.add, np.add, NUMERIC),
    _b("sub", lax.sub, np.subtract, NUMERIC),
    _b("mul", lax.mul, np.multiply, NUMERIC),
    _b("div", lax.div, _trunc_div, FI, "nonzero"),
    _b("rem", lax.rem, _rem, FI, "nonzero"),
    _b("max", lax.max, np.maximum, ALL),
    _b("min", lax.min, np.minimum, ALL),
    _u("neg", lax.neg, np.negative, NUMERIC),
    _u("sign", lax.sign, np.sign, FLOATS + SIGNED + (np.dtype("uint8"),), diff=False),
    _u("floor", lax.floor, np.floor, diff=False),
    _u("ceil", lax.ceil, np.ceil, diff=False),
    _u("round_away", lax.round, _round_away, diff=False),
    _u("round_even", lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), np.rint,
       diff=False),
    _u("is_finite", lambda x: lax.is_finite(lax.log(x)), lambda x: np.isfinite(np.log(x)),
       diff=False),
    _u("exp", lax.exp, np.exp),
    _u("exp2", lax.exp2, np.exp2),
    _u("expm1", lax.expm1, np.expm1),
    _u("log", lax.log, np.log, rng="positive"),
    _u("log1p", lax.log1p, np.log1p, rng="positive"),
    _u("sqrt", lax.sqrt, np.sqrt, rng="positive"),
    _u("rsqrt", lax.rsqrt, lambda x: 1 / np.sqrt(x), rng="positive"),
    _u("cbrt", lax.cbrt, np.cbrt),
    _u("logistic", lax.logistic, lambda x: 1 / (1 + np.exp(-x.astype(np.float64)))),
    _u("sin", lax.sin, np.sin),
    _u("cos", lax.cos, np.cos),
    _u("tan", lax.tan, np.tan, rng="small"),
    _u("asin", lax.asin, np.arcsin, rng="unit"),
    _u("acos", lax.acos, np.arccos, rng="unit"),
    _u("atan", lax.atan, np.arctan),
    _u("sinh", lax.sinh, np.sinh),
    _u("cosh", lax.cosh, np.cosh),
    _u("tanh", lax.tanh, np.tanh),
    _u("asinh", lax.asinh, np.arcsinh),
    _u("acosh", lax.acosh, np.arccosh, rng="ge1"),
    _u("atanh", lax.atanh, np.arctanh, rng="unit"),
    _b("atan2", lax.atan2, np.arctan2, rng="nonzero"),
    _b("pow", lax.pow, np.power, rng="positive"),
    _b("pow_int_exponent", lax.pow, lambda x, y: np.power(x.astype(np.float64), y), FLOATS,
       arg_dtypes={1: np.dtype("int32")}, arg_rngs={1: "default"}),
    _u("integer_pow3", lambda x: lax.integer_pow(x, 3), _int_pow_ref(3), NUMERIC),
    _u("integer_pow_neg", lambda x: lax.integer_pow(x, -2), _int_pow_ref(-2), FLOATS,
       rng="nonzero"),  # integer bases raise TypeError, as in JAX (tests/test_elementwise.py)
    _u("square", lax.square, np.square, NUMERIC),
    _u("reciprocal", lax.reciprocal, np.reciprocal, rng="nonzero"),
    _u("abs", lax.abs, np.abs, FLOATS + SIGNED),
    _b("nextafter", lax.nextafter, np.nextafter, (np.dtype("float32"),), diff=False),
    _u("erf", lax.erf, _vec(math.erf)),
    _u("erfc", lax.erfc, _vec(math.erfc)),
    _u("erf_inv", lax.erf_inv, _erf_inv_ref, rng="unit"),
    _u("lgamma", lax.lgamma, _vec(lambda v: math.log(abs(math.gamma(v)))), rng="positive"),
    _u("digamma", lax.digamma, _digamma_ref, rng="positive", tol=None),
    _u("not", lax.bitwise_not, np.invert, INT_BOOL, diff=False),
    _b("and", lax.bitwise_and, np.bitwise_and, INT_BOOL, diff=False),
    _b("or", lax.bitwise_or, np.bitwise_or, INT_BOOL, diff=False),
    _b("xor", lax.bitwise_xor, np.bitwise_xor, INT_BOOL, diff=False),
    _b("shift_left", lax.shift_left, _shift_ref("left"), INTS, diff=False),
    _b("shift_right_logical", lax.shift_right_logical, _shift_ref("logical"), INTS,
       diff=False),
    _b("shift_right_arithmetic", lax.shift_right_arithmetic, _shift_ref("arith"), INTS,
       diff=False),
    _u("population_count", lax.population_count, _popcount_ref, INTS, diff=False),
    _u("clz", lax.clz, _clz_ref, INTS, diff=False),
    _b("eq", lax.eq, np.equal, ALL, diff=False),
    _b("ne", lax.ne, np.not_equal, ALL, diff=False),
    _b("lt", lax.lt, np.less, ALL, diff=False),
    _b("le", lax.le, np.less_equal, ALL, diff=False),
    _b("gt", lax.gt, np.greater, ALL, diff=False),
    _b("ge", lax.ge, np.greater_equal, ALL, diff=False),
    OpRecord("lax_select_n", lax.select_n, lambda c, a, b: np.where(c, b, a), ALL,
             (((), (), ()), ((3,), (3,), (3,)), ((), (2, 3), (2, 3)), ((0,), (0,), (0,))),
             arg_dtypes={0: np.dtype("bool")}, differentiable=True, kind="lax"),
    OpRecord("lax_select_n_int", lax.select_n, lambda i, *c: np.choose(i, c), NUMERIC,
             (((4,), (4,), (4,), (4,)), ((), (2, 3), (2, 3), (2, 3))),
             arg_dtypes={0: np.dtype("int32")}, arg_rngs={0: "index"}, differentiable=True,
             kind="lax"),
    OpRecord("lax_clamp", lax.clamp, lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi),
             NUMERIC, (((), (2, 3), ()), ((4,), (4,), (4,)), ((), (0,), ())),
             differentiable=True, kind="lax"),
    _u("real", lambda x: lax.real(lax.complex(x, x)), lambda x: x,
       (np.dtype("float32"),)),
    _u("imag", lambda x: lax.imag(lax.complex(x, -x)), lambda x: -x,
       (np.dtype("float32"),)),
    _u("conj", lambda x: _parts(lax.conj(lax.complex(x, lax.sin(x)))),
       lambda x: (x, -np.sin(x)), (np.dtype("float32"),)),
    _b("complex", lambda x, y: _parts(lax.complex(x, y)), lambda x, y: np.broadcast_arrays(x, y),
       (np.dtype("float32"),)),
    _u("copy", lambda x: lax.copy_p.bind(x), lambda x: x.copy(), ALL),
    _u("reduce_precision", lambda x: lax.reduce_precision(x, 5, 10),
       lambda x: x.astype(np.float16).astype(np.float32), (np.dtype("float32"),), diff=False),
    _u("convert_element_type", lambda x: lax.convert_element_type(x, np.float32),
       lambda x: x.astype(np.float32), FLOATS + SIGNED),
    # The primitives autodiff adds (lax/ad_util.py). stop_gradient's derivative is zero by
    # design, which finite differences cannot check: its rule is tested in test_autodiff.
    _b("add_any", lax.add_any, lambda x, y: x + y, FLOATS,
       shapes=(((), ()), ((4,), (4,)), ((2, 3), (2, 3)), ((0,), (0,)))),
    _u("stop_gradient", lax.stop_gradient, lambda x: x, ALL, diff=False),
    # Bit-level primitives (lax/bits.py): same width, narrowing (a trailing dim), widening.
    _u("bitcast_convert_type", lambda x: lax.bitcast_convert_type(x, np.int32),
       lambda x: x.view(np.int32), (np.dtype("float32"), np.dtype("uint32")), diff=False),
    _u("bitcast_convert_type_narrow", lambda x: lax.bitcast_convert_type(x, np.uint8),
       _bitcast_ref(np.uint8), (np.dtype("float32"), np.dtype("int32")), diff=False),
    _u("bitcast_convert_type_widen", lambda x: lax.bitcast_convert_type(x, np.int32),
       _bitcast_ref(np.int32), (np.dtype("uint8"), np.dtype("int8")), diff=False,
       shapes=(((4,),), ((2, 4),), ((0, 4),))),
    _b("mulhi", lax.mulhi, _mulhi_ref, INTS, diff=False),
    _u("optimization_barrier", lambda x: lax.optimization_barrier((x, x))[1], lambda x: x,
       ALL),
]
