"""Accuracy, special values and vectorization of the IR math in ember.backends.cpu.vecmath.

Each function is compiled into a loop kernel ``out[i] = f(x[i])`` and compared in ulps with
NumPy computed in float64 (rounded to float32 for float32), or with ``math.erf``/``math.erfc``
and a long-double logistic where NumPy has no accurate float64 function.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache

import numpy as np
import pytest
from llvmlite import ir

cffi = pytest.importorskip("cffi")

import ember  # noqa: E402
import ember.numpy as jnp  # noqa: E402
from ember.backends.cpu import vecmath  # noqa: E402
from ember.backends.cpu.llvm_support import (  # noqa: E402
    LoadedObject,
    compile_ir,
    host_has_feature,
)
from tests.backends.cpu.helpers import x64  # noqa: E402

_FFI = cffi.FFI()
_CTYPES = {np.float32: (ir.FloatType(), "float"), np.float64: (ir.DoubleType(), "double")}
DTYPES = [np.float32, np.float64]


def _kernel_ir(opcode: str, dtype, nargs: int) -> str:
    ty = _CTYPES[dtype][0]
    mod = ir.Module(name=opcode)
    i64 = ir.IntType(64)
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ty.as_pointer()] * (nargs + 1) + [i64]),
                     "kernel")
    for a in fn.args[:-1]:
        a.add_attribute("noalias")
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    n = fn.args[-1]
    b.cbranch(b.icmp_signed(">", n, ir.Constant(i64, 0)), loop, done)
    b.position_at_end(loop)
    i = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    xs = [b.load(b.gep(fn.args[1 + k], [i])) for k in range(nargs)]
    if opcode == "power of 2":  # (a power with the constant base 2: exp2)
        y = vecmath.emit_binary(b, "power", ir.Constant(ty, 2.0), xs[0])
    elif nargs == 1:
        y = vecmath.emit_unary(b, opcode, xs[0])
    else:
        y = vecmath.emit_binary(b, opcode, *xs)
    b.store(y, b.gep(fn.args[0], [i]))
    i1 = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(i1, b.block)  # float32 trigonometry ends in a block of its own
    b.cbranch(b.icmp_signed("<", i1, n), loop, done)
    b.position_at_end(done)
    b.ret_void()
    return str(mod)


class _Kernel:
    def __init__(self, opcode: str, dtype, nargs: int = 1):
        self.dtype, self.cname = dtype, _CTYPES[dtype][1]
        # (The math's own accuracy, denormals included: without the flushing wrapper that
        # jitted code runs under, see ``denormals``.)
        self.lib = LoadedObject(compile_ir(_kernel_ir(opcode, dtype, nargs),
                                           flush_denormals=False).object_code)
        sig = f"void(*)({', '.join([self.cname + '*'] * (nargs + 1))}, int64_t)"
        self.fn = _FFI.cast(sig, self.lib.address("kernel"))

    def __call__(self, *xs):
        xs = [np.ascontiguousarray(x, dtype=self.dtype) for x in xs]
        out = np.empty_like(xs[0])
        buf = self.cname + "[]"
        self.fn(_FFI.from_buffer(buf, out), *[_FFI.from_buffer(buf, x) for x in xs], out.size)
        return out


@cache
def kernel(opcode: str, dtype, nargs: int = 1) -> _Kernel:
    return _Kernel(opcode, dtype, nargs)


def ulp_dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many representable values lie between a and b (NaN vs NaN: 0, NaN vs number: inf;
    +0 and -0 count as the same value, signs of zeros are checked separately)."""
    it = np.int32 if a.dtype == np.float32 else np.int64
    mask = np.int64(np.iinfo(it).max)

    def ordinal(v):
        i = v.view(it).astype(np.int64)
        return np.where(i < 0, -(i & mask), i)

    oa, ob = ordinal(a), ordinal(b)
    with np.errstate(over="ignore"):
        d = np.abs(oa - ob).astype(np.float64)
    far = (oa < 0) != (ob < 0)
    d = np.where(far, np.abs(oa.astype(np.float64)) + np.abs(ob.astype(np.float64)), d)
    na, nb = np.isnan(a), np.isnan(b)
    return np.where(na ^ nb, np.inf, np.where(na & nb, 0.0, d))


def _logistic_ref(x):
    x = x.astype(np.longdouble)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(np.float64)


def _vec(f):
    u = np.frompyfunc(f, 1, 1)
    return lambda x: u(x).astype(np.float64)


def _lgamma_or_inf(v: float) -> float:
    try:
        return math.lgamma(v)
    except (ValueError, OverflowError):  # the poles, and past the largest float
        return math.inf


def _scipy(name: str):
    def ref(x):
        special = pytest.importorskip("scipy.special")
        out = getattr(special, name)(x)
        if name == "psi":  # digamma's poles (0 and the negative integers) are NaN in XLA
            out = np.where((x <= 0) & (x == np.floor(x)), np.nan, out)
        if name == "erfinv":  # erf_inv(-0) is -0 in XLA
            out = np.where(x == 0, x, out)
        return out
    return ref


REFERENCE = {
    "exponential": np.exp, "exponential_minus_one": np.expm1, "log": np.log,
    "log_plus_one": np.log1p, "tanh": np.tanh, "logistic": _logistic_ref, "sine": np.sin,
    "cosine": np.cos, "tan": np.tan, "erf": _vec(math.erf), "erfc": _vec(math.erfc),
    "cbrt": np.cbrt, "rsqrt": lambda x: 1 / np.sqrt(x), "atan": np.arctan, "asin": np.arcsin,
    "acos": np.arccos, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh,
    "acosh": np.arccosh, "atanh": np.arctanh, "lgamma": _vec(_lgamma_or_inf),
    "digamma": _scipy("psi"), "erf_inv": _scipy("erfinv"),
}
SLOW_REF = {"erf", "erfc"}  # references evaluated in Python
# accuracy tested against mpmath region by region in test_vecmath_special.py
OWN_ACCURACY_TESTS = {"lgamma", "digamma", "erf_inv"}
UNARY = sorted(REFERENCE)
assert set(UNARY) == vecmath.SUPPORTED_UNARY


def reference(opcode: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return REFERENCE[opcode](x.astype(np.float64)).astype(x.dtype)


def sweep(dtype, n: int, seed: int = 0) -> np.ndarray:
    """Random bit patterns (log-uniform over all exponents, both signs, denormals, inf, NaN),
    dense grids over the interesting range, and the float limits."""
    rng = np.random.default_rng(seed)
    it = np.uint32 if dtype == np.float32 else np.uint64
    bits = rng.integers(0, np.iinfo(it).max, n, dtype=it, endpoint=True).view(dtype)
    info = np.finfo(dtype)
    dense = [np.linspace(-1.5, 1.5, n // 4), np.linspace(-12, 12, n // 4),
             np.linspace(-800, 800, n // 8), np.linspace(0.999, 1.001, n // 16),
             np.linspace(-1.001, -0.999, n // 16)]
    edge = [0, 1, 2, 0.5, info.max, info.tiny, info.smallest_subnormal, info.eps, np.inf, np.nan]
    edge = edge + [-v for v in edge]
    return np.concatenate([bits] + [d.astype(dtype) for d in dense] + [np.array(edge, dtype)])


def _mpmath_reference(opcode: str, x: np.ndarray) -> np.ndarray:
    """erf/erfc in float64 from mpmath (math.erfc itself is up to 2 ulp off)."""
    mp = pytest.importorskip("mpmath")
    f = {"erf": mp.erf, "erfc": mp.erfc}[opcode]
    g = {"erf": math.erf, "erfc": math.erfc}[opcode]  # exact enough beyond |x| = 30
    with mp.workdps(30):
        return np.array([float(f(mp.mpf(v))) if abs(v) < 30 else g(v)
                         for v in x.astype(np.float64).tolist()])


def _max_ulp(opcode, dtype, x):
    got = kernel(opcode, dtype)(x)
    if dtype == np.float64 and opcode in SLOW_REF:
        d = ulp_dist(got, _mpmath_reference(opcode, x))
    else:
        d = ulp_dist(got, reference(opcode, x))
    j = int(np.argmax(d))
    return d[j], x[j], got[j]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("opcode", [op for op in UNARY if op not in OWN_ACCURACY_TESTS])
def test_unary_accuracy(opcode, dtype):
    n = 1 << (20 if dtype == np.float32 else 18)
    x = sweep(dtype, n)
    if opcode in SLOW_REF:  # Python-level references: fewer points, dense where it matters
        dense = np.linspace(-6, 28, 2001 if dtype == np.float64 else 20001).astype(dtype)
        x = np.concatenate([x[:: 256 if dtype == np.float64 else 16], dense])
    worst, at, got = _max_ulp(opcode, dtype, x)
    assert worst <= 4, f"{opcode} {dtype.__name__}: {worst} ulp at x={at!r} (got {got!r})"


SPECIAL_INPUTS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("opcode", UNARY)
def test_unary_special_values_exact(opcode, dtype):
    info = np.finfo(dtype)
    x = np.array(SPECIAL_INPUTS + [info.smallest_subnormal, -info.smallest_subnormal, info.tiny,
                                   info.max, -info.max], dtype)
    got = kernel(opcode, dtype)(x)
    want = reference(opcode, x)
    special = (want == 0) | ~np.isfinite(want) | ~np.isfinite(x) | (x == 0)
    d = ulp_dist(got, want)
    exact = (d == 0) & (np.signbit(got) == np.signbit(want)) | np.isnan(want)
    ok = np.where(special, exact, d <= 4)
    assert ok.all(), f"{opcode}: x={x[~ok]} got={got[~ok]} want={want[~ok]}"


@pytest.mark.parametrize("opcode,value,want", [
    ("exponential", -0.0, 1.0), ("log", 0.0, -np.inf), ("log", -1.0, np.nan),
    ("exponential_minus_one", -np.inf, -1.0), ("exponential_minus_one", -0.0, -0.0),
    ("log_plus_one", -0.0, -0.0), ("log_plus_one", -1.0, -np.inf), ("logistic", -np.inf, 0.0),
    ("logistic", np.inf, 1.0), ("tanh", np.inf, 1.0), ("tanh", -np.inf, -1.0),
    ("sine", -0.0, -0.0), ("tan", -0.0, -0.0), ("sine", np.inf, np.nan),
    ("cosine", -np.inf, np.nan), ("atan", -np.inf, -np.pi / 2), ("cbrt", -0.0, -0.0),
    ("cbrt", -8.0, -2.0), ("rsqrt", 0.0, np.inf), ("acosh", 0.5, np.nan), ("atanh", 1.0, np.inf),
    ("atanh", -1.0, -np.inf), ("asin", 1.5, np.nan), ("erfc", -np.inf, 2.0), ("erf", -0.0, -0.0),
    ("sinh", -0.0, -0.0), ("cosh", -np.inf, np.inf), ("asinh", -0.0, -0.0),
    ("erf", np.inf, 1.0), ("erf", -np.inf, -1.0), ("erfc", np.inf, 0.0),
])
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_named_special_values(opcode, value, want, dtype):
    got = kernel(opcode, dtype)(np.array([value], dtype))[0]
    want = dtype(want)
    if np.isnan(want):
        assert np.isnan(got)
    else:
        assert got == want and np.signbit(got) == np.signbit(want), (got, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_exp_overflow_and_denormal_thresholds(dtype):
    info = np.finfo(dtype)
    hi = np.log(float(info.max))
    lo = np.log(float(info.smallest_subnormal))
    x = np.concatenate([np.linspace(hi - 0.01, hi + 0.01, 20001),
                        np.linspace(lo - 1, lo + 30, 20001),
                        np.linspace(-hi - 0.5, -hi + 0.5, 2001)]).astype(dtype)
    for opcode in ("exponential", "exponential_minus_one", "sinh", "cosh", "logistic"):
        got = kernel(opcode, dtype)(x)
        d = ulp_dist(got, reference(opcode, x))
        assert d.max() <= 4, (opcode, x[d.argmax()], got[d.argmax()])
    # the overflow threshold itself: inf exactly where the rounded reference is inf
    ref = reference("exponential", x)
    got = kernel("exponential", dtype)(x)
    assert np.array_equal(np.isinf(got), np.isinf(ref)) or ulp_dist(got, ref).max() <= 1


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_exp_is_zero_exactly_where_it_rounds_to_zero(dtype):
    # Below ``UNDERFLOW_TO_ZERO`` exp's lanes are set to 0 by a select (sparing the scaling
    # a microcode assist); above it the denormal results stay as the reference rounds them.
    t = vecmath.UNDERFLOW_TO_ZERO[dtype == np.float64]
    x = np.concatenate([np.linspace(t - 3, t + 3, 60001), [t, -np.inf, -1e30]]).astype(dtype)
    x = np.concatenate([x, np.nextafter(x[-3:-2], np.inf), np.nextafter(x[-3:-2], -np.inf)])
    for opcode in ("exponential", "logistic"):
        got = kernel(opcode, dtype)(x)
        ref = reference(opcode, x)
        assert ulp_dist(got, ref).max() <= 1, opcode
        assert np.array_equal(got == 0, ref == 0), opcode
        assert (got[x < t] == 0).all() and not np.signbit(got).any()


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_log_of_denormals(dtype):
    info = np.finfo(dtype)
    x = np.geomspace(float(info.smallest_subnormal), float(info.tiny) * 4, 100001).astype(dtype)
    for opcode in ("log", "log_plus_one", "cbrt", "rsqrt", "asinh", "atan", "sine"):
        worst, at, got = _max_ulp(opcode, dtype, x)
        assert worst <= 4, (opcode, at, got)


def _float32_neighbours(centers, count: int) -> np.ndarray:
    """The ``count`` float32 values on each side of each (nonzero) center, and the centers."""
    bits = np.asarray(centers, np.float32).view(np.int32)[:, None]
    return (bits + np.arange(-count, count + 1, dtype=np.int32)).ravel().view(np.float32)


@pytest.mark.parametrize("opcode", ["erf", "erfc"])
def test_float32_erf_erfc_near_the_seams(opcode):
    """float32 erf and erfc (native float32 code) within 4 ulp of mpmath, densely where the code
    switches formulas (|x| = 1/2, 1, 4, the clamp at 10.1), where erfc crosses 1/2 and where
    erf rounds to 1, through erfc's denormal results (x from 9.2) and its underflow to 0 (past
    10.0542), and for tiny arguments, denormals included; exact limits beyond."""
    seams = [0.4769362762044699, 0.5, 1.0, 3.919205843636722, 4.0, 9.2, 10.054194928818095, 10.1]
    info = np.finfo(np.float32)
    tiny = np.geomspace(float(info.smallest_subnormal), 1e-3, 2001)
    x = np.concatenate([_float32_neighbours(seams + [-v for v in seams], 300),
                        np.linspace(9, 10.1, 4001), tiny, -tiny,
                        np.linspace(-1.02, -0.98, 2001)]).astype(np.float32)
    k = kernel(opcode, np.float32)
    got = k(x)
    d = ulp_dist(got, _mpmath_reference(opcode, x).astype(np.float32))
    assert d.max() <= 4, (x[d.argmax()], got[d.argmax()], d.max())
    far = np.array([4.0, 5.0, 10.06, 30.0, 1e10, info.max, np.inf], np.float32)
    if opcode == "erf":
        assert (k(far) == 1).all() and (k(-far) == -1).all()
    else:
        assert (k(far[2:]) == 0).all() and not np.signbit(k(far[2:])).any()
        assert (k(-far) == 2).all()


# float32 functions that keep float64 steps on purpose: the table-based range reduction of
# sine and cosine, and tan's quotient
_F32_WITH_F64_STEPS = {"sine", "cosine", "tan"}


@pytest.mark.parametrize("opcode", UNARY)
def test_native_float32_functions_emit_no_float64(opcode):
    """The float32 opcodes in ``vecmath._NATIVE_F32`` compute in float32 (vectors keep all their
    lanes); the others run the float64 routines."""
    mod = ir.Module()
    fn = ir.Function(mod, ir.FunctionType(ir.FloatType(), [ir.FloatType()]), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(vecmath.emit_unary(b, opcode, fn.args[0]))
    uses_double = "double" in str(mod)
    if opcode not in vecmath._NATIVE_F32:
        assert uses_double
    elif opcode not in _F32_WITH_F64_STEPS:
        assert not uses_double


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_trig_huge_arguments(dtype):
    rng = np.random.default_rng(7)
    top = math.log10(float(np.finfo(dtype).max)) - 1e-9
    x = np.concatenate([np.logspace(3, top, 200001), rng.uniform(-1e9, 1e9, 100000),
                        -np.logspace(20, top, 10001)]).astype(dtype)
    if dtype == np.float32:
        x = np.concatenate([x, np.array([16367173.0, 1.6263733e38, 3.4028235e38], dtype)])
    for opcode in ("sine", "cosine", "tan"):
        worst, at, got = _max_ulp(opcode, dtype, x)
        assert worst <= 4, (opcode, at, got)


def test_trig_hardest_float64_reduction():
    # the double closest to a multiple of pi/2 (x mod pi/2 ~ 4.7e-19); values from mpmath at
    # 400 digits (NumPy's own float64 cos is 8 ulp off here)
    x = np.array([math.ldexp(6381956970095103, 797)])
    assert kernel("cosine", np.float64)(x)[0] == -4.687165924254628e-19
    assert kernel("sine", np.float64)(x)[0] == 1.0


def _binary_inputs(dtype, n: int):
    rng = np.random.default_rng(3)
    it = np.uint32 if dtype == np.float32 else np.uint64
    lim = 700 if dtype == np.float64 else 85

    def rbits():
        return rng.integers(0, np.iinfo(it).max, n, dtype=it, endpoint=True).view(dtype)

    xs = [rbits(), rng.uniform(0, 10, n), rng.uniform(-5, 5, n), np.exp(rng.uniform(-lim, lim, n))]
    ys = [rbits(), rng.uniform(-40, 40, n), np.round(rng.uniform(-30, 30, n)),
          rng.uniform(-1, 1, n)]
    return (np.concatenate([np.asarray(v, dtype) for v in xs]),
            np.concatenate([np.asarray(v, dtype) for v in ys]))


BINARY_SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -2.5, np.inf,
                   -np.inf, np.nan, 1e-40]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("opcode,ref,bound", [
    ("power", np.power, {np.float32: 4, np.float64: 2}),
    ("atan2", np.arctan2, {np.float32: 4, np.float64: 3}),
])
def test_binary(opcode, ref, bound, dtype):
    x, y = _binary_inputs(dtype, 1 << 17)
    k = kernel(opcode, dtype, 2)
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float64), y.astype(np.float64)).astype(dtype)
    d = ulp_dist(k(x, y), want)
    assert d.max() <= bound[dtype], (x[d.argmax()], y[d.argmax()], k(x, y)[d.argmax()])
    # special values: exact, including signed zeros and infinities
    sx, sy = (a.ravel() for a in np.meshgrid(np.array(BINARY_SPECIALS, dtype),
                                             np.array(BINARY_SPECIALS, dtype)))
    with np.errstate(all="ignore"):
        want = ref(sx.astype(np.float64), sy.astype(np.float64)).astype(dtype)
    got = k(sx, sy)
    exact = ~np.isfinite(want) | (want == 0) | (want == 1) | (np.abs(want) == np.float32(np.pi))
    d = ulp_dist(got, want)
    bad = (exact & ((d > 0) | ((np.signbit(got) != np.signbit(want)) & ~np.isnan(want))))
    bad |= d > bound[dtype]
    assert not bad.any(), list(zip(sx[bad], sy[bad], got[bad], want[bad]))


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_powers_of_two(dtype):
    # 2 ** y within 1 ulp of float64 NumPy everywhere, exact at integers (and at the
    # overflow and denormal limits), special values as NumPy's power.
    k = kernel("power of 2", dtype)
    info = np.finfo(dtype)
    lim = 1080 if dtype == np.float64 else 155
    y = np.concatenate([sweep(dtype, 1 << 16), np.linspace(-lim, lim, 1 << 16).astype(dtype),
                        np.arange(-lim, lim).astype(dtype),
                        np.array([info.nexp - 1, -info.nexp + 2, -0.0, np.inf, -np.inf],
                                 dtype)])
    got = k(y)
    with np.errstate(all="ignore"):
        want = np.exp2(y.astype(np.float64)).astype(dtype)
    assert ulp_dist(got, want).max() <= 1, y[np.argmax(ulp_dist(got, want))]
    ints = np.arange(-lim, lim).astype(dtype)
    with np.errstate(all="ignore"):
        want = np.exp2(ints.astype(np.float64)).astype(dtype)
    np.testing.assert_array_equal(k(ints), want)
    assert np.isnan(k(np.array([np.nan], dtype))[0])


def test_power_negative_base_and_integer_exponents():
    x = np.array([-2.0, -2.0, -2.0, -0.0, -0.0, -np.inf, -np.inf, -1.0, np.nan, 1.0, -8.0])
    y = np.array([3.0, 2.0, 0.5, -3.0, -2.0, 3.0, -3.0, np.inf, 0.0, np.nan, 1 / 3])
    for dtype in DTYPES:
        got = kernel("power", dtype, 2)(x.astype(dtype), y.astype(dtype))
        with np.errstate(all="ignore"):
            want = np.power(x, y).astype(dtype)
        assert np.array_equal(got, want, equal_nan=True)
        assert np.array_equal(np.signbit(got), np.signbit(want)) or np.isnan(want).any() and \
            np.array_equal(np.signbit(got)[~np.isnan(want)], np.signbit(want)[~np.isnan(want)])


def _vector_width_in(ir_text: str, dtype) -> bool:
    name = "float" if dtype == np.float32 else "double"
    return any(f"<{w} x {name}>" in ir_text for w in (4, 8, 16))


@pytest.mark.parametrize("opcode", ["exponential", "log", "sine", "tanh", "logistic", "cosine"])
def test_hot_float32_loops_vectorize(opcode):
    art = compile_ir(_kernel_ir(opcode, np.float32, 1), want_text=True)
    assert "<16 x float>" in art.optimized_ir or "<8 x float>" in art.optimized_ir


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("opcode", UNARY + sorted(vecmath.SUPPORTED_BINARY))
def test_every_loop_vectorizes(opcode, dtype):
    nargs = 2 if opcode in vecmath.SUPPORTED_BINARY else 1
    art = compile_ir(_kernel_ir(opcode, dtype, nargs), want_text=True)
    name = "float" if dtype == np.float32 else "double"
    assert any(f"<{w} x {name}>" in art.optimized_ir for w in (4, 8, 16))


def _helper_functions(text: str) -> dict[str, str]:
    """The bodies of the module-internal functions vecmath defines, by name."""
    bodies, name = {}, None
    for line in text.splitlines():
        if line.startswith("define internal"):
            name = line.split("@", 1)[1].split("(", 1)[0].strip('"')
            bodies[name] = ""
        elif name is not None:
            bodies[name] += line + "\n"
            if line.startswith("}"):
                name = None
    return bodies


def test_emitted_code_is_straight_line_without_libm():
    mod = ir.Module()
    for dtype in DTYPES:
        ty = _CTYPES[dtype][0]
        for opcode in UNARY:
            fn = ir.Function(mod, ir.FunctionType(ty, [ty]), f"{opcode}_{dtype.__name__}")
            b = ir.IRBuilder(fn.append_basic_block())
            b.ret(vecmath.emit_unary(b, opcode, fn.args[0]))
            assert len(fn.blocks) == 1
        for opcode in vecmath.SUPPORTED_BINARY:
            fn = ir.Function(mod, ir.FunctionType(ty, [ty, ty]), f"{opcode}_{dtype.__name__}")
            b = ir.IRBuilder(fn.append_basic_block())
            b.ret(vecmath.emit_binary(b, opcode, *fn.args))
    text = str(mod)
    declared = [ln for ln in text.splitlines() if ln.startswith("declare")]
    assert declared and all('@"llvm.' in ln for ln in declared), declared
    # Branches only inside the float32 sine/cosine and the fmod helpers (and their vector
    # variants).
    helpers = _helper_functions(text)
    assert sorted(helpers) == sorted(f"__ember_vecmath_{w}{v}"
                                     for w in ("sin_f32", "cos_f32", "fmod_f32", "fmod_f64")
                                     for v in ["", *(f"_v{n}" for n in vecmath._trig_f32_lanes())])
    outside = text
    for body in helpers.values():
        outside = outside.replace(body, "")
    assert " br " not in outside and "switch" not in outside
    # intrinsics are declared once per module even when used by many functions
    assert len(declared) == len(set(declared))
    compile_ir(text)  # verifies


@pytest.mark.parametrize("opcode", ["sine", "cosine"])
def test_float32_trig_loops_call_the_vector_variant(opcode):
    art = compile_ir(_kernel_ir(opcode, np.float32, 1), want_text=True)
    which = "sin" if opcode == "sine" else "cos"
    calls = [ln for ln in art.optimized_ir.splitlines()
             if f"@__ember_vecmath_{which}_f32_v" in ln and " call " in ln]
    assert calls, "the vectorized loop should call a vector variant"
    if host_has_feature("avx512f"):  # the 16-lane variant, whose slow path halves the vector
        assert any(f"_f32_v{vecmath.TRIG_F32_WIDE_LANES}(" in ln for ln in calls), calls


@pytest.mark.parametrize("opcode", ["sine", "cosine"])
def test_float32_trig_vectors_mixing_small_and_large_lanes(opcode):
    # Every vector holds a lane past the fast reduction's bound, in each position in turn:
    # the variants' slow paths (16 lanes -> two of 8 -> lane by lane) against float64.
    small = np.linspace(-3, 3, 16 * 16).astype(np.float32).reshape(16, 16)
    large = np.float32(3.0e7) + np.arange(16, dtype=np.float32) * 1024
    x = small.copy()
    x[np.arange(16), np.arange(16)] = large
    x = x.ravel()
    got = kernel(opcode, np.float32)(x)
    ref = (np.sin if opcode == "sine" else np.cos)(x.astype(np.float64)).astype(np.float32)
    assert ulp_dist(got, ref).max() <= 1


def test_sine_and_cosine_in_one_module():
    # Both helpers (and all their variants) kept in one llvm.compiler.used list.
    mod = ir.Module(name="both")
    f32p = ir.FloatType().as_pointer()
    i64 = ir.IntType(64)
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [f32p, f32p, i64]), "kernel")
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    n = fn.args[2]
    b.cbranch(b.icmp_signed(">", n, ir.Constant(i64, 0)), loop, done)
    b.position_at_end(loop)
    i = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    x = b.load(b.gep(fn.args[1], [i]))
    y = b.fadd(vecmath.emit_unary(b, "sine", x), vecmath.emit_unary(b, "cosine", x))
    b.store(y, b.gep(fn.args[0], [i]))
    i1 = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(i1, b.block)
    b.cbranch(b.icmp_signed("<", i1, n), loop, done)
    b.position_at_end(done)
    b.ret_void()
    art = compile_ir(str(mod), want_text=True)
    for which in ("sin", "cos"):
        assert f"@__ember_vecmath_{which}_f32_v" in art.optimized_ir
    lib = LoadedObject(art.object_code)
    k = _FFI.cast("void(*)(float*, float*, int64_t)", lib.address("kernel"))
    xs = np.linspace(-1e6, 1e6, 10001).astype(np.float32)
    out = np.empty_like(xs)
    k(_FFI.from_buffer("float[]", out), _FFI.from_buffer("float[]", xs), xs.size)
    want = (np.sin(xs.astype(np.float64)) + np.cos(xs.astype(np.float64))).astype(np.float32)
    np.testing.assert_allclose(out, want, atol=2e-7 * 4)


def _near_multiples_of_half_pi(count: int, top: float) -> np.ndarray:
    """The float32 values nearest to (and around) k*pi/2 for k up to top/(pi/2): the
    arguments whose reduced value cancels most."""
    k = np.unique(np.geomspace(1, top / (np.pi / 2), count).astype(np.int64))
    centers = (k * (np.pi / 2)).astype(np.float32)
    offsets = np.arange(-3, 4, dtype=np.int32)
    bits = centers.view(np.int32)[:, None] + offsets[None, :]
    return bits.reshape(-1).view(np.float32)


@pytest.mark.parametrize("opcode", ["sine", "cosine"])
def test_float32_trig_within_one_ulp_around_the_fast_bound(opcode):
    bound = np.float32(vecmath.TRIG_F32_FAST_BOUND)
    below = bound.view(np.int32) - np.arange(1, 200001, dtype=np.int32)
    above = bound.view(np.int32) + np.arange(0, 200000, dtype=np.int32)
    x = np.concatenate([below.view(np.float32), above.view(np.float32),
                        _near_multiples_of_half_pi(20000, float(bound) * 4)])
    x = np.concatenate([x, -x])
    worst, at, got = _max_ulp(opcode, np.float32, x)
    assert worst <= 1, (at, got)


@pytest.mark.parametrize("opcode", ["sine", "cosine"])
@pytest.mark.parametrize("n", [1, 3, 7, 8, 13, 16, 31, 33, 100])
def test_float32_trig_mixed_lanes(opcode, n):
    """Vectors mixing fast-path, table-path and special lanes, in every position, and short
    loops (the scalar remainder)."""
    rng = np.random.default_rng(n)
    pool = np.array([0.5, -2.0, 1e3, 70000.0, -3e7, 1.6263733e38, np.inf, -np.inf, np.nan,
                     -0.0, 1e-42, 16367173.0, 65535.996, 65536.0], np.float32)
    for _ in range(20):
        x = rng.choice(pool, n) * np.where(rng.random(n) < 0.5, 1, -1).astype(np.float32)
        got = kernel(opcode, np.float32)(x)
        want = reference(opcode, x)
        d = ulp_dist(got, want)
        assert d.max() <= 1, (x[d.argmax()], got[d.argmax()], want[d.argmax()])
        zero = want == 0
        assert np.array_equal(np.signbit(got[zero]), np.signbit(want[zero]))


def test_two_over_pi_constant_matches_pi():
    v, n = vecmath._two_over_pi_bits()
    prod = Fraction(v, 1 << n) * vecmath._PI
    assert abs(prod - 2) < Fraction(1, 1 << 300)


def test_bad_arguments():
    mod = ir.Module()
    fn = ir.Function(mod, ir.FunctionType(ir.FloatType(), [ir.FloatType(), ir.IntType(32),
                                                           ir.DoubleType()]), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    with pytest.raises(ValueError, match="emit_unary.*opcode"):
        vecmath.emit_unary(b, "sqrtt", fn.args[0])
    with pytest.raises(TypeError, match="emit_unary: x"):
        vecmath.emit_unary(b, "exponential", fn.args[1])
    with pytest.raises(TypeError, match="emit_binary"):
        vecmath.emit_binary(b, "power", fn.args[0], fn.args[2])
    with pytest.raises(ValueError, match="emit_binary.*opcode"):
        vecmath.emit_binary(b, "exponential", fn.args[0], fn.args[0])


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("opcode", UNARY)
def test_unary_accuracy_large_sweep(opcode, dtype):
    n = 1 << (24 if dtype == np.float32 else 22)
    if opcode in SLOW_REF:
        n >>= 5 if dtype == np.float32 else 10
    for seed in (11, 12):
        worst, at, got = _max_ulp(opcode, dtype, sweep(dtype, n, seed))
        assert worst <= 4, f"{opcode} {dtype.__name__}: {worst} ulp at x={at!r} (got {got!r})"


@pytest.mark.slow
@pytest.mark.parametrize("opcode", ["sine", "cosine"])
def test_float32_trig_fast_range_dense(opcode):
    """Every 61st float32 below the fast-path bound (about 18 million values) within 1 ulp. (An
    exhaustive run over all 1.1e9 of them, made when the bound was chosen, also gave 1 ulp.)"""
    top = int(np.float32(vecmath.TRIG_F32_FAST_BOUND).view(np.int32))
    step = 1 << 22
    k = kernel(opcode, np.float32)
    for start in range(0, top, step * 61):
        x = np.arange(start, min(start + step * 61, top), 61, dtype=np.int32).view(np.float32)
        d = ulp_dist(k(x), reference(opcode, x))
        assert d.max() <= 1, (x[d.argmax()], d.max())


def _power_reference(x: np.ndarray, c: float) -> np.ndarray:
    """C's pow for these exponents: IEEE's correctly rounded operations, in x's dtype."""
    with np.errstate(all="ignore"):
        if c == 0.0:
            return np.ones_like(x)
        if c == 1.0:
            return x.copy()
        if c == 2.0:
            return x * x
        if c == -1.0:
            return x.dtype.type(1) / x
        root = np.sqrt(x) + x.dtype.type(0)  # (+0 for -0)
        return np.where(x == -np.inf, np.inf, root).astype(x.dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("c", [0.0, 1.0, 2.0, -1.0, 0.5])
def test_powers_with_the_exponents_numpy_takes_without_pow(c, dtype):
    """A constant exponent of 0, 1, 2, -1 or 1/2 is one correctly rounded operation (the
    rounding of pow's exact result), with C's special values (pow(-0, 0.5) = +0,
    pow(-inf, 0.5) = +inf, pow(nan, 0) = 1): a few instructions, not pow's hundred; jitted
    and eager results agree bit for bit."""
    ty = _CTYPES[dtype][0]
    mod = ir.Module()
    fn = ir.Function(mod, ir.FunctionType(ty, [ty]), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(vecmath.emit_binary(b, "power", fn.args[0], ir.Constant(ty, c)))
    assert len(fn.blocks[0].instructions) <= 6
    info = np.finfo(dtype)
    x = np.concatenate([sweep(dtype, 1 << 12),
                        np.array([-0.0, 0.0, -np.inf, np.inf, np.nan, -1.0, info.max,
                                  info.smallest_subnormal], dtype)])
    want = _power_reference(x, c)
    with x64(dtype == np.float64):
        jitted = np.asarray(ember.jit(lambda v: v ** c)(x))
        eager = np.asarray(jnp.asarray(x) ** c)
    for got in (jitted, eager):
        assert got.dtype == dtype
        assert ulp_dist(got, want).max() == 0
        zeros = want == 0
        assert np.array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]))
