"""Lowering + HLO evaluation of the elementwise, reduction and dot primitives vs eager ember.

Each case stages a function (``make_jaxpr``), lowers it to HLO, verifies the module, runs it
with the NumPy evaluator and compares with the eager result: exactly where the evaluator
shares the eager kernel, to a tolerance where the lowering uses another formula (a log-step
scan, repeated multiplication, ...) or eager runs the CPU backend's native vector math.
"""

import importlib

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax, tree_util
from ember.compiler.evaluator import evaluate_computation
from ember.compiler.hlo import Builder, Module, Shape
from ember.compiler.lower import lower_closed_jaxpr
from ember.compiler.verifier import verify_module
from ember.lax import elementwise, reduction
from tests.op_records import ALL_RECORDS, make_args

BF16 = np.dtype(jnp.bfloat16)
F16, F32, I32, I8, U8, U32, B = (np.dtype(t) for t in (
    "float16", "float32", "int32", "int8", "uint8", "uint32", "bool"))

# Relative (= absolute) tolerance by dtype for lowerings that use another formula than eager.
_APPROX_TOL = {F32: 2e-5, F16: 4e-3, BF16: 3e-2, np.dtype("float64"): 1e-13}
# Records whose lowering computes differently from the eager kernel (so: not bit-exact).
_APPROX = ("exp2", "integer_pow", "pow_int_exponent", "reciprocal", "cumsum", "cumprod",
           "cumlogsumexp")


def _run_lowered(f, args):
    closed = ember.make_jaxpr(f)(*args)
    lowered = lower_closed_jaxpr(closed)
    verify_module(lowered.module)
    inputs = [np.asarray(a) for a in args] + [np.asarray(c) for c in lowered.hoisted_consts]
    out = evaluate_computation(lowered.module.entry, inputs)
    assert isinstance(out, tuple)
    return list(out), lowered


def _assert_same(actual, expected, tol):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    if actual.dtype.kind == "c":
        _assert_same(actual.real, expected.real, tol)
        _assert_same(actual.imag, expected.imag, tol)
    elif tol and (actual.dtype.kind == "f" or actual.dtype == BF16):
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                                   rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(actual.astype(np.float64) if actual.dtype == BF16
                                      else actual, expected.astype(np.float64)
                                      if expected.dtype == BF16 else expected)


def _native_math_dtype(closed):
    """The dtype of the first equation that eager evaluation of ``closed`` runs on the CPU
    backend's native vector math (whose results differ from the evaluator's NumPy kernels
    in the last bits), or None."""
    for e in closed.jaxpr.eqns:
        native = getattr(e.primitive.impl, "native_kernel", None)
        if native is not None and native(e.invars[0].aval.dtype) is not None:
            return np.dtype(e.invars[0].aval.dtype)
    return None


def check(f, *args, tol=0.0):
    """Lowered-and-evaluated ``f(*args)`` equals eager ``f(*args)`` (NaNs equal; within
    the approximate tolerance where eager runs native vector math)."""
    args = [np.asarray(a) for a in args]
    out, lowered = _run_lowered(f, args)
    if not tol and (dt := _native_math_dtype(ember.make_jaxpr(f)(*args))) is not None:
        tol = _APPROX_TOL[dt]
    eager = tree_util.tree_leaves(f(*[jnp.asarray(a) for a in args]))
    assert len(out) == len(eager)
    for o, e in zip(out, eager):
        _assert_same(o, np.asarray(e), tol)
    return lowered


# ------------------------------------------------------------------ op-record driven cases

_MY_PRIMITIVES = {
    p.name for mod in (elementwise, reduction) for p in vars(mod).values()
    if isinstance(p, ember.core.Primitive)} | {"dot_general"}


def _is_mine(rec):
    return rec.kind == "lax" and (rec.name.startswith("lax_") or rec.name.startswith(
        ("lax.reduce", "lax.arg", "lax.cum", "lax.dot", "lax.batch_matmul")))


def _record_cases():
    for rec in ALL_RECORDS:
        if not _is_mine(rec):
            continue
        for dtype in rec.dtypes:
            for shapes in rec.shapes:
                yield pytest.param(rec, dtype, shapes,
                                   id=f"{rec.name}-{np.dtype(dtype).name}-{shapes}")


@pytest.mark.parametrize("rec,dtype,shapes", list(_record_cases()))
def test_op_record(rec, dtype, shapes):
    args = make_args(rec, dtype, shapes)
    approx = any(k in rec.name for k in _APPROX)
    check(rec.fn, *args, tol=_APPROX_TOL.get(np.dtype(dtype), 0.0) if approx else 0.0)


def test_records_cover_every_primitive():
    covered = set()
    for rec in ALL_RECORDS:
        if _is_mine(rec):
            dtype, shapes = rec.dtypes[0], rec.shapes[0]
            args = [jnp.asarray(a) for a in make_args(rec, dtype, shapes)]
            closed = ember.make_jaxpr(rec.fn)(*args)
            covered |= {e.primitive.name for e in closed.jaxpr.eqns}
    covered |= {"select_n", "exp2", "integer_pow", "convert_element_type"}  # tested below
    assert _MY_PRIMITIVES - covered == set()


def test_every_primitive_has_a_lowering():
    prims = [p for mod in (elementwise, reduction) for p in vars(mod).values()
             if isinstance(p, ember.core.Primitive)]
    assert len(prims) >= 70
    assert [p.name for p in prims if p.lowering is None] == []
    assert importlib.import_module("ember.lax.dot").dot_general_p.lowering is not None


# ------------------------------------------------------------------ elementwise edge cases

_RNG = np.random.default_rng(0)


def _floats(shape, dtype=F32, scale=3.0):
    return (_RNG.standard_normal(shape) * scale).astype(dtype)


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
@pytest.mark.parametrize("shape", [(), (0,), (7,), (2, 3)])
def test_unary_math(dtype, shape):
    x = _floats(shape, dtype)
    fns = [lax.exp, lax.expm1, lax.sin, lax.cos, lax.tanh, lax.logistic, lax.atan, lax.sinh,
           lax.asinh, lax.floor, lax.ceil, lax.round, lax.sign, lax.neg, lax.abs, lax.cbrt,
           lax.erf, lax.erfc, lax.square, lax.is_finite,
           lambda v: lax.round(v, lax.RoundingMethod.TO_NEAREST_EVEN),
           lambda v: lax.log(lax.abs(v)), lambda v: lax.sqrt(lax.abs(v)),
           lambda v: lax.rsqrt(lax.abs(v)), lambda v: lax.log1p(lax.abs(v)),
           lambda v: lax.lgamma(lax.abs(v) + 0.1), lambda v: lax.digamma(v),
           lambda v: lax.erf_inv(lax.tanh(v)), lambda v: lax.tan(v * 0.3)]
    for fn in fns:
        check(fn, x)


def test_special_values():
    x = np.array([0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, np.inf, -np.inf, np.nan, 1e30,
                  -1e-30], F32)
    for fn in (lax.round, lambda v: lax.round(v, 1), lax.sign, lax.logistic, lax.is_finite,
               lax.exp, lambda v: lax.log(v), lambda v: lax.erf_inv(v), lax.lgamma,
               lax.digamma, lambda v: lax.reduce_precision(v, 5, 10),
               lambda v: lax.reduce_precision(v, 8, 7), lax.floor, lax.tanh):
        check(fn, x)


@pytest.mark.parametrize("dtype", [I32, I8, U8, U32])
def test_integer_arithmetic(dtype):
    info = np.iinfo(dtype)
    x = np.array([0, 1, 7, -7, info.min, info.max, -1, 13], np.int64).astype(dtype)
    y = np.array([3, 0, -2, 2, -1, 1, 0, 5], np.int64).astype(dtype)
    for fn in (lax.add, lax.sub, lax.mul, lax.div, lax.rem, lax.max, lax.min,
               lax.bitwise_and, lax.bitwise_or, lax.bitwise_xor, lax.shift_left,
               lax.shift_right_logical, lax.shift_right_arithmetic, lax.eq, lax.lt, lax.ge):
        check(fn, x, y)
    for fn in (lax.neg, lax.bitwise_not, lax.population_count, lax.clz, lax.square,
               lambda v: lax.integer_pow(v, 3), lambda v: lax.integer_pow(v, 0),
               lambda v: lax.integer_pow(v, 1), lambda v: lax.integer_pow(v, 6)):
        check(fn, x)
    if info.min < 0:
        for n in (-1, -2, -3):  # JAX: integers cannot be raised to negative powers
            with pytest.raises(TypeError, match="negative powers"):
                ember.make_jaxpr(lambda v, n=n: lax.integer_pow(v, n))(x)
        check(lax.abs, x)
        check(lax.sign, x)


@pytest.mark.parametrize("n", [-5, -2, -1, 0, 1, 2, 3, 7, 16])
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_integer_pow_float(n, dtype):
    x = (_RNG.uniform(0.5, 1.5, (3, 4)) * _RNG.choice([-1, 1], (3, 4))).astype(dtype)
    check(lambda v: lax.integer_pow(v, n), x, tol=_APPROX_TOL[dtype])


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_exp2_and_pow(dtype):
    x = _floats((4, 3), dtype)
    check(lax.exp2, x, tol=_APPROX_TOL[dtype])
    p = (np.abs(_floats((4, 3), F32)) + 0.5).astype(dtype)
    check(lax.pow, p, x)
    check(lambda a, k: lax.pow(a, k), p, np.arange(-6, 6, dtype=np.int32).reshape(4, 3),
          tol=_APPROX_TOL[dtype])
    check(lambda a: lax.pow(a, 2.5), p)
    check(lambda a: lax.atan2(a, 1.5), x)
    check(lambda a: lax.nextafter(a, np.zeros((), dtype)), x)


def test_scalar_operands_broadcast():
    x = _floats((2, 3))
    s = np.float32(1.5)
    check(lambda a, b: lax.add(a, b), x, s)
    check(lambda a, b: lax.sub(b, a), x, s)
    check(lambda a, b: lax.max(b, a), x, s)
    check(lambda a, b: lax.lt(b, a), x, s)
    check(lambda a: lax.mul(a, 2.0), x)
    check(lambda a: lax.complex(a, np.float32(2.0)), x)
    check(lambda a: lax.clamp(-1.0, a, 1.0), x)
    check(lambda a, lo, hi: lax.clamp(lo, a, hi), x, x - 1, x + np.float32(0.5))


def test_compare_all_directions():
    for dtype in (F32, BF16, I8, U32, B):
        x = np.array([0, 1, 2, 1, 0, 1], np.float64).astype(dtype)
        y = np.array([1, 1, 0, 2, 0, 0], np.float64).astype(dtype)
        for fn in (lax.eq, lax.ne, lax.lt, lax.le, lax.gt, lax.ge):
            check(fn, x, y)
    nan = np.array([np.nan, 1.0, np.nan], F32)
    for fn in (lax.eq, lax.ne, lax.lt, lax.ge, lax.max, lax.min):
        check(fn, nan, np.array([np.nan, np.nan, 0.0], F32))


def test_select_n():
    cases = [_floats((2, 3)) for _ in range(4)]
    which_bool = np.array([[True, False, True], [False, False, True]])
    check(lambda w, a, b: lax.select_n(w, a, b), which_bool, cases[0], cases[1])
    check(lambda w, a, b: lax.select_n(w, a, b), np.bool_(True), cases[0], cases[1])
    which = np.array([[0, 1, 2], [3, -1, 7]], np.int32)
    check(lambda w, *c: lax.select_n(w, *c), which, *cases)
    check(lambda w, *c: lax.select_n(w, *c), np.int32(2), *cases)
    check(lambda w, *c: lax.select_n(w, *c), which, *cases[:3])
    check(lambda w, a: lax.select_n(w, a), which, cases[0])
    check(lambda p, a, b: lax.select(p, a, b), which_bool, cases[2], cases[3])


def test_convert_element_type():
    x = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, -2.7, 2.7, 0.0, -0.0, 255.5], F32)
    for dt in (I32, I8, U8, U32, B, F16, BF16, np.dtype("complex64")):
        check(lambda v, dt=dt: lax.convert_element_type(v, dt), x)
    ints = np.array([-129, -1, 0, 1, 127, 255, 70000], np.int32)
    for dt in (I8, U8, F32, F16, BF16, B):
        check(lambda v, dt=dt: lax.convert_element_type(v, dt), ints)
    check(lambda v: lax.convert_element_type(v, F32), np.array([True, False]))
    check(lambda v: lax.convert_element_type(v, I32), np.array([1.5, -3.9], BF16))


def test_complex_ops():
    x, y = _floats((3, 2)), _floats((3, 2))
    check(lambda a, b: lax.abs(lax.complex(a, b)), x, y)
    check(lambda a, b: lax.real(lax.mul(lax.complex(a, b), lax.complex(b, a))), x, y)
    check(lambda a, b: lax.imag(lax.exp(lax.complex(a * 0.1, b))), x, y)
    check(lambda a: lax.conj(a), x)
    check(lambda a, b: lax.conj(lax.complex(a, b)), x, y)
    check(lambda a, b: lax.sign(lax.complex(a, b)), x, y)
    check(lambda a, b: lax.convert_element_type(lax.complex(a, b), F32), x, y)


def test_bool_ops():
    x = np.array([True, False, True, False])
    y = np.array([True, True, False, False])
    for fn in (lax.bitwise_and, lax.bitwise_or, lax.bitwise_xor, lax.max, lax.min, lax.eq,
               lax.ne):
        check(fn, x, y)
    check(lax.bitwise_not, x)
    check(lambda v: lax.copy_p.bind(v), x)


# ------------------------------------------------------------------ reductions


_REDUCERS = [lax.reduce_sum, lax.reduce_prod, lax.reduce_max, lax.reduce_min]


@pytest.mark.parametrize("dtype", [F32, F16, BF16, I32, I8, U8])
@pytest.mark.parametrize("shape,axes", [((), ()), ((5,), (0,)), ((0,), (0,)), ((2, 3, 4), (1,)),
                                        ((2, 3, 4), (0, 2)), ((2, 3, 4), (0, 1, 2)),
                                        ((2, 0, 3), (1,)), ((2, 0, 3), (0,)), ((3, 4), ())])
def test_reductions(dtype, shape, axes):
    x = _floats(shape, F32, 1.5)
    x = x.astype(dtype) if dtype.kind != "u" else np.abs(x).astype(dtype)
    for fn in _REDUCERS:
        check(lambda v, fn=fn: fn(v, axes), x)
    if dtype.kind in "iu":
        for fn in (lax.reduce_and, lax.reduce_or, lax.reduce_xor):
            check(lambda v, fn=fn: fn(v, axes), x)


def test_reductions_bool_and_nan():
    b = np.array([[True, False, True], [True, True, True]])
    for fn in (lax.reduce_and, lax.reduce_or, lax.reduce_xor, lax.reduce_max, lax.reduce_min):
        for axes in ((0,), (1,), (0, 1)):
            check(lambda v, fn=fn, axes=axes: fn(v, axes), b)
    x = np.array([[1.0, np.nan, 3.0], [-np.inf, 2.0, 0.0]], F32)
    for fn in _REDUCERS:
        check(lambda v, fn=fn: fn(v, (1,)), x)


def test_low_precision_sum_accumulates_in_f32():
    x = np.full((4096,), 1.0, F16)
    lowered = check(lambda v: lax.reduce_sum(v, (0,)), x)
    text = " ".join(i.opcode for i in lowered.module.entry.instructions)
    assert "convert" in text and "reduce" in text


@pytest.mark.parametrize("dtype", [F32, BF16, I32, U8, B])
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 5), (2, 1, 4)])
def test_argminmax(dtype, shape):
    x = _floats(shape, F32, 2.0).round()
    x = (x > 0) if dtype == B else (np.abs(x) if dtype.kind == "u" else x).astype(dtype)
    for axis in range(len(shape)):
        check(lambda v, a=axis: lax.argmax(v, a, np.int32), x)
        check(lambda v, a=axis: lax.argmin(v, a, np.int32), x)


def test_argminmax_nan_and_ties():
    x = np.array([[1.0, 3.0, 3.0, np.nan, np.nan, 0.0],
                  [np.nan, 1.0, 2.0, 2.0, 0.0, 0.0],
                  [2.0, 2.0, 2.0, 2.0, 2.0, 2.0],
                  [-np.inf, -np.inf, -np.inf, -np.inf, -np.inf, -np.inf],
                  [np.inf, 0.0, np.inf, -np.inf, 1.0, -np.inf]], F32)
    for axis in (0, 1):
        check(lambda v, a=axis: lax.argmax(v, a, np.int32), x)
        check(lambda v, a=axis: lax.argmin(v, a, np.int32), x)
    ints = np.array([np.iinfo(I32).min, np.iinfo(I32).min, 5, np.iinfo(I32).max], I32)
    check(lambda v: lax.argmax(v, 0, np.int32), ints)
    check(lambda v: lax.argmin(v, 0, np.int32), ints)
    check(lambda v: lax.argmax(v, 0, np.int32), ints[:2])


@pytest.mark.parametrize("dtype", [F32, F16, BF16, I32, U8])
@pytest.mark.parametrize("shape", [(1,), (2,), (5,), (17,), (3, 4), (2, 0, 3), (4, 9, 2)])
def test_cumulative(dtype, shape):
    x = _floats(shape, F32, 1.0)
    x = np.abs(x * 3).astype(dtype) if dtype.kind == "u" else x.astype(dtype)
    tol = _APPROX_TOL.get(dtype, 0.0)
    fns = [lax.cummax, lax.cummin, lax.cumsum, lax.cumprod]
    if dtype.kind == "f" or dtype == BF16:
        fns.append(lax.cumlogsumexp)
    for axis in range(len(shape)):
        for reverse in (False, True):
            for fn in fns:
                check(lambda v, fn=fn, a=axis, r=reverse: fn(v, a, r), x, tol=tol)


def test_cumulative_special_values():
    x = np.array([[-np.inf, -np.inf, 1.0, np.inf, np.nan, 2.0, -1.0, 0.5]], F32)
    for fn in (lax.cummax, lax.cummin, lax.cumsum, lax.cumlogsumexp):
        for reverse in (False, True):
            check(lambda v, fn=fn, r=reverse: fn(v, 1, r), x, tol=1e-6)


# ------------------------------------------------------------------ dot_general


@pytest.mark.parametrize("dtype", [F32, F16, BF16, I32, I8, U8, B])
def test_dot_general(dtype):
    def draw(shape):
        x = _floats(shape, F32, 2.0).round()
        return (x > 0) if dtype == B else (np.abs(x) if dtype.kind == "u" else x).astype(dtype)
    cases = [
        ((2, 3), (3, 4), (((1,), (0,)), ((), ()))),
        ((3,), (3,), (((0,), (0,)), ((), ()))),
        ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,)))),
        ((2, 3, 4), (4, 3, 2, 5), (((0, 2), (2, 0)), ((1,), (1,)))),
        ((2,), (3,), (((), ()), ((), ()))),
        ((2, 0), (0, 4), (((1,), (0,)), ((), ()))),
        ((), (), (((), ()), ((), ()))),
    ]
    for ls, rs, dn in cases:
        check(lambda a, b, dn=dn: lax.dot_general(a, b, dn), draw(ls), draw(rs))


def test_dot_general_preferred_element_type():
    a = np.arange(-6, 6, dtype=I8).reshape(3, 4) * 20
    b = np.arange(8, dtype=I8).reshape(4, 2) * 15
    lowered = check(lambda x, y: lax.dot_general(x, y, (((1,), (0,)), ((), ())),
                                                 preferred_element_type=np.int32), a, b)
    dot = [i for i in lowered.module.entry.instructions if i.opcode == "dot_general"][0]
    assert dot.dtype == I32
    for dt in (F16, BF16):
        x, y = _floats((5, 7), dt), _floats((7, 3), dt)
        check(lambda p, q: lax.dot_general(p, q, (((1,), (0,)), ((), ())),
                                           preferred_element_type=np.float32), x, y)
        lowered = check(lambda p, q: lax.dot(p, q), x, y)
        dot = [i for i in lowered.module.entry.instructions if i.opcode == "dot_general"][0]
        assert dot.dtype == F32  # low precision accumulates in f32


def test_large_constant_is_hoisted():
    c = jnp.asarray(np.arange(2000, dtype=F32))
    x = np.ones(2000, F32)
    out, lowered = _run_lowered(lambda v: lax.reduce_sum(lax.mul(v, c), (0,)), [x])
    assert len(lowered.hoisted_consts) == 1
    np.testing.assert_allclose(out[0], np.sum(np.arange(2000, dtype=F32)))


# ------------------------------------------------------------------ reduce evaluator paths


def _reduce_module(body_fn, n_inputs, x_shape, dims, dtype=F32):
    """A module reducing ``n_inputs`` parameters (then as many scalar inits) with a body."""
    m = Module("m")
    bb = Builder(m, "body")
    scalar = Shape(dtype, ())
    params = [bb.parameter(i, scalar) for i in range(2 * n_inputs)]
    outs = body_fn(bb, params[:n_inputs], params[n_inputs:])
    bb_root = outs[0] if len(outs) == 1 else bb.op("tuple", *outs)
    body = bb.build(bb_root)
    b = Builder(m, "main")
    xs = [b.parameter(i, Shape(dtype, x_shape)) for i in range(n_inputs)]
    inits = [b.parameter(n_inputs + i, scalar) for i in range(n_inputs)]
    red = b.op("reduce", *xs, *inits, dimensions=dims, calls=[body])
    b.build(red, entry=True)
    verify_module(m)
    return m


def test_reduce_general_body():
    # sum of |x| through a body that is not a single op: the tree path, init combined last.
    def body(bb, acc, x):
        return [bb.op("add", bb.op("abs", acc[0]), bb.op("abs", x[0]))]
    x = np.arange(-11, 13, dtype=F32).reshape(2, 3, 4)
    for dims in ((0,), (1, 2), (0, 1, 2), ()):
        m = _reduce_module(body, 1, x.shape, dims)
        out = evaluate_computation(m.entry, [x, np.float32(-2.0)])
        expected = np.sum(np.abs(x), axis=dims) + 2.0 if dims else np.abs(x) + 2.0
        np.testing.assert_array_equal(out, expected)
        assert out.dtype == F32 and out.shape == expected.shape


def test_reduce_fast_path_non_identity_init_and_variadic():
    def add(bb, acc, x):
        return [bb.op("add", x[0], acc[0])]
    x = np.arange(12, dtype=F32).reshape(3, 4)
    m = _reduce_module(add, 1, x.shape, (1,))
    np.testing.assert_array_equal(evaluate_computation(m.entry, [x, np.float32(10)]),
                                  x.sum(1) + 10)
    empty = np.zeros((3, 0), F32)
    m = _reduce_module(add, 1, empty.shape, (1,))
    np.testing.assert_array_equal(evaluate_computation(m.entry, [empty, np.float32(7)]),
                                  np.full(3, 7, F32))

    def sum_and_max(bb, acc, x):
        return [bb.op("add", acc[0], x[0]), bb.op("maximum", acc[1], x[1])]
    y = -x
    m = _reduce_module(sum_and_max, 2, x.shape, (0,))
    s, mx = evaluate_computation(m.entry, [x, y, np.float32(0), np.float32(-np.inf)])
    np.testing.assert_array_equal(s, x.sum(0))
    np.testing.assert_array_equal(mx, y.max(0))
