"""reduce_window: shape inference, text round trip, the NumPy evaluator against a slow
reference, and the prefix-scan fast path (recognition and its precision rule)."""

import itertools

import ml_dtypes
import numpy as np
import pytest

from ember.compiler.cost_analysis import cost_analysis
from ember.compiler.evaluator import evaluate_computation
from ember.compiler.hlo import Builder, Module, Shape
from ember.compiler.parser import parse_module
from ember.compiler.reduce_window import prefix_scan, scan_accumulate, window_by_window
from ember.compiler.shape_inference import infer_shape
from ember.compiler.verifier import verify_module

F32, F64, S32 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32)
BF16 = np.dtype(ml_dtypes.bfloat16)


def S(dtype, *dims):
    return Shape(np.dtype(dtype), dims)


def scalar_comp(m, name, dtypes, make_root):
    b = Builder(m, m.new_name(name))
    ps = [b.parameter(i, S(d)) for i, d in enumerate(dtypes)]
    return b.build(make_root(b, ps))


def binary_body(m, opcode, dtype):
    return scalar_comp(m, opcode, [dtype, dtype], lambda b, p: b.op(opcode, *p))


def double_then_add_body(m, dtype):
    """``acc * 2 + x``: not a simple reducer, and sensitive to the combining order."""
    return scalar_comp(m, "dbl_add", [dtype, dtype], lambda b, p: b.op(
        "add", b.op("multiply", p[0], b.constant(np.asarray(2, dtype))), p[1]))


def argmax_body(m):
    """(value, index) pairs: keeps the greater value, the smaller index on ties."""
    def root(b, p):
        av, ai, xv, xi = p
        gt = b.op("compare", xv, av, comparison_direction="GT")
        eq = b.op("compare", xv, av, comparison_direction="EQ")
        lt = b.op("compare", xi, ai, comparison_direction="LT")
        take = b.op("or", gt, b.op("and", eq, lt))
        return b.op("tuple", b.op("select", take, xv, av), b.op("select", take, xi, ai))
    return scalar_comp(m, "argmax", [F32, S32, F32, S32], root)


def window_module(dims, dtypes, inits, body_fn, const_init=True, **attrs):
    """A module whose entry computes one reduce_window of its parameters; ``inits`` are
    constants (``const_init``) or further parameters."""
    m = Module("rw")
    body = body_fn(m)
    b = Builder(m, "main")
    xs = [b.parameter(i, S(dt, *dims)) for i, dt in enumerate(dtypes)]
    if const_init:
        init_ops = [b.constant(np.asarray(v, dt)) for v, dt in zip(inits, dtypes)]
    else:
        init_ops = [b.parameter(len(xs) + i, S(dt)) for i, dt in enumerate(dtypes)]
    inst = b.op("reduce_window", *xs, *init_ops, calls=[body], **attrs)
    b.build(inst, entry=True)
    verify_module(m)
    return m, inst


def run(m, *args):
    return evaluate_computation(m.entry, [np.asarray(a) for a in args])


# --------------------------------------------------------------------------- slow reference


def reference(xs, inits, combine, window_dimensions, window_strides=None,
              base_dilations=None, window_dilations=None, padding=None):
    """StableHLO's reduce_window by loops over output and window positions; ``combine``
    maps (accumulators, elements) tuples of NumPy scalars to the new accumulators."""
    rank = xs[0].ndim
    strides = window_strides or (1,) * rank
    base = base_dilations or (1,) * rank
    wdil = window_dilations or (1,) * rank
    padding = padding or ((0, 0),) * rank
    out_dims = []
    for d, w, s, bd, wd, (lo, hi) in zip(xs[0].shape, window_dimensions, strides, base, wdil,
                                         padding):
        padded = ((d - 1) * bd + 1 if d else 0) + lo + hi
        span = (w - 1) * wd + 1
        out_dims.append(0 if padded < span else (padded - span) // s + 1)
    outs = [np.empty(out_dims, np.asarray(i).dtype) for i in inits]
    with np.errstate(all="ignore"):
        for pos in itertools.product(*map(range, out_dims)):
            accs = tuple(np.asarray(i)[()] for i in inits)
            for k in itertools.product(*map(range, window_dimensions)):
                src = []
                for o, kk, s, wd, (lo, _), bd, d in zip(pos, k, strides, wdil, padding, base,
                                                        xs[0].shape):
                    p = o * s + kk * wd - lo  # position in the base-dilated input
                    src.append(p // bd if p % bd == 0 and 0 <= p // bd < d else None)
                if None in src:
                    elems = tuple(np.asarray(i)[()] for i in inits)
                else:
                    elems = tuple(x[tuple(src)] for x in xs)
                accs = combine(accs, elems)
            for out, a in zip(outs, accs):
                out[pos] = a
    return outs


_COMBINE = {
    "add": lambda a, e: (a[0] + e[0],),
    "maximum": lambda a, e: (np.maximum(a[0], e[0]),),
    "minimum": lambda a, e: (np.minimum(a[0], e[0]),),
    "dbl_add": lambda a, e: (a[0] * a[0].dtype.type(2) + e[0],),
}


def _argmax_combine(a, e):
    take = e[0] > a[0] or (e[0] == a[0] and e[1] < a[1])
    return (e[0], e[1]) if take else a


def _random_window(rng, rank):
    dims = tuple(int(d) for d in rng.integers(0, 5, rank))
    attrs = dict(window_dimensions=tuple(int(w) for w in rng.integers(1, 4, rank)))
    if rng.random() < 0.7:
        attrs["window_strides"] = tuple(int(s) for s in rng.integers(1, 3, rank))
    if rng.random() < 0.5:
        attrs["base_dilations"] = tuple(int(s) for s in rng.integers(1, 3, rank))
    if rng.random() < 0.5:
        attrs["window_dilations"] = tuple(int(s) for s in rng.integers(1, 3, rank))
    if rng.random() < 0.7:
        attrs["padding"] = tuple((int(lo), int(hi)) for lo, hi in rng.integers(-1, 3, (rank, 2)))
    return dims, attrs


def _bits_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype.kind == "f":
        view = f"u{a.dtype.itemsize}"
        assert np.array_equal(a.view(view), b.view(view)), (a, b)
    else:
        assert np.array_equal(a, b), (a, b)


@pytest.mark.parametrize("seed", range(60))
def test_random_windows_match_the_reference(seed):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 4))
    dims, attrs = _random_window(rng, rank)
    kind = ["add", "maximum", "minimum", "dbl_add"][seed % 4]
    dtype = [F32, S32, F64][seed % 3] if kind != "dbl_add" else F64
    init = rng.choice([0, 1, -2]) if kind != "maximum" else rng.choice([-5, 0])
    x = rng.integers(-8, 9, dims).astype(dtype)
    if dtype.kind == "f":
        x = x * np.asarray(0.37, dtype)
    if kind == "dbl_add":
        body_fn = lambda m: double_then_add_body(m, dtype)  # noqa: E731
    else:
        body_fn = lambda m: binary_body(m, kind, dtype)  # noqa: E731
    # Init as a parameter: the general path, never the scan fast path.
    m, inst = window_module(dims, [dtype], [init], body_fn, const_init=False, **attrs)
    assert prefix_scan(inst) is None
    got = run(m, x, np.asarray(init, dtype))
    (want,) = reference([x], [np.asarray(init, dtype)], _COMBINE[kind], **attrs)
    assert inst.shape == S(dtype, *want.shape)
    _bits_equal(got, want)


@pytest.mark.parametrize("seed", range(20))
def test_random_variadic_argmax_windows(seed):
    rng = np.random.default_rng(100 + seed)
    rank = int(rng.integers(1, 4))
    dims, attrs = _random_window(rng, rank)
    values = rng.integers(0, 4, dims).astype(F32)  # many ties
    index = np.arange(values.size, dtype=S32).reshape(dims)
    inits = [np.float32(-np.inf), np.int32(-1)]
    m, inst = window_module(dims, [F32, S32], inits, argmax_body, **attrs)
    assert inst.shape.is_tuple and prefix_scan(inst) is None
    got = run(m, values, index)
    want = reference([values, index], inits, _argmax_combine, **attrs)
    assert isinstance(got, tuple) and len(got) == 2
    for g, w in zip(got, want):
        _bits_equal(g, w)


def test_window_larger_than_input_gives_empty_result():
    m, inst = window_module((3, 2), [F32], [0], lambda m: binary_body(m, "add", F32),
                            window_dimensions=(4, 1))
    assert inst.shape == S(F32, 0, 2)
    out = run(m, np.ones((3, 2), F32))
    assert out.shape == (0, 2) and out.dtype == F32


def test_empty_input_with_padding_reduces_the_padding():
    # (d = 0 dilates to 0; the padding alone holds one window of init values.)
    m, inst = window_module((0,), [F32], [1.5], lambda m: binary_body(m, "add", F32),
                            window_dimensions=(2,), padding=((1, 1),))
    assert inst.shape == S(F32, 1)
    _bits_equal(run(m, np.zeros(0, F32)), np.array([4.5], F32))  # 1.5 + 1.5 + 1.5


def test_hand_computed_values():
    x = np.arange(1, 6, dtype=F32)  # [1, 2, 3, 4, 5]
    add = lambda m: binary_body(m, "add", F32)  # noqa: E731
    m, _ = window_module((5,), [F32], [0], add, window_dimensions=(2,),
                         window_strides=(2,), padding=((-1, 1),))
    _bits_equal(run(m, x), np.array([5, 9], F32))  # [2+3, 4+5]
    m, _ = window_module((5,), [F32], [0], add, window_dimensions=(2,),
                         window_dilations=(3,))
    _bits_equal(run(m, x), np.array([5, 7], F32))  # [1+4, 2+5]
    m, _ = window_module((5,), [F32], [10], add, window_dimensions=(3,),
                         base_dilations=(2,), window_strides=(3,))
    # dilated: [1 i 2 i 3 i 4 i 5] (i = 10): windows [1 i 2], [i 3 i], [4 i 5], each
    # combined into the init value 10.
    _bits_equal(run(m, x), np.array([23, 33, 29], F32))


# --------------------------------------------------------------------------- prefix_scan


def scan_module(dims, axis, reverse, opcode, dtype=F32, init=None, **overrides):
    n = dims[axis]
    pad = (0, n - 1) if reverse else (n - 1, 0)
    attrs = dict(window_dimensions=tuple(n if i == axis else 1 for i in range(len(dims))),
                 padding=tuple(pad if i == axis else (0, 0) for i in range(len(dims))))
    attrs.update(overrides)
    if init is None:
        init = _identity(opcode, dtype)
    return window_module(dims, [dtype], [init], lambda m: binary_body(m, opcode, dtype),
                         **attrs)


def _identity(opcode, dtype):
    dtype = np.dtype(dtype)
    if opcode in ("maximum", "minimum"):
        big = np.iinfo(dtype).max if dtype.kind in "iu" else np.inf
        small = np.iinfo(dtype).min if dtype.kind in "iu" else -np.inf
        return small if opcode == "maximum" else big
    return 0 if opcode == "add" else 1


@pytest.mark.parametrize("opcode", ["add", "multiply", "maximum", "minimum"])
@pytest.mark.parametrize("reverse", [False, True])
def test_prefix_scan_is_recognized(opcode, reverse):
    _, inst = scan_module((3, 5), 1, reverse, opcode)
    assert prefix_scan(inst) == (1, reverse, opcode)
    _, inst = scan_module((4, 2, 3), 0, reverse, opcode, dtype=S32)
    assert prefix_scan(inst) == (0, reverse, opcode)


def test_prefix_scan_of_length_one_is_forward():
    _, inst = scan_module((3, 1), 1, True, "add")
    assert prefix_scan(inst) == (1, False, "add")
    _, inst = scan_module((1,), 0, False, "maximum")
    assert prefix_scan(inst) == (0, False, "maximum")


@pytest.mark.parametrize("case", [
    "stride", "padding", "window", "init", "non_simple", "variadic", "base_dilation",
    "window_dilation", "two_axes", "init_parameter", "xor",
])
def test_prefix_scan_negatives(case):
    if case == "stride":
        _, inst = scan_module((3, 5), 1, False, "add", window_strides=(1, 2))
    elif case == "padding":
        _, inst = scan_module((3, 5), 1, False, "add", padding=((0, 0), (3, 0)))
    elif case == "window":
        _, inst = scan_module((3, 5), 1, False, "add", window_dimensions=(1, 4),
                              padding=((0, 0), (3, 0)))
    elif case == "init":
        _, inst = scan_module((3, 5), 1, False, "add", init=1.0)
    elif case == "base_dilation":
        _, inst = scan_module((3, 5), 1, False, "add", base_dilations=(2, 1))
    elif case == "window_dilation":
        _, inst = scan_module((3, 5), 1, False, "maximum", window_dilations=(1, 2))
    elif case == "two_axes":
        _, inst = scan_module((3, 5), 1, False, "add", window_dimensions=(3, 5),
                              padding=((2, 0), (4, 0)))
    elif case == "xor":
        _, inst = scan_module((5,), 0, False, "xor", dtype=S32)
    elif case == "non_simple":
        _, inst = window_module((5,), [F32], [0], lambda m: double_then_add_body(m, F32),
                                window_dimensions=(5,), padding=((4, 0),))
    elif case == "variadic":
        _, inst = window_module((5,), [F32, S32], [-np.inf, -1], argmax_body,
                                window_dimensions=(5,), padding=((4, 0),))
    else:  # init_parameter
        _, inst = window_module((5,), [F32], [0], lambda m: binary_body(m, "add", F32),
                                const_init=False, window_dimensions=(5,), padding=((4, 0),))
    assert prefix_scan(inst) is None


# --------------------------------------------------------------------------- scan_accumulate


def _general(dims, axis, reverse, opcode, dtype, x):
    """The general path on a scan (``window_by_window``), the init as a parameter."""
    n = dims[axis]
    pad = (0, n - 1) if reverse else (n - 1, 0)
    m, inst = window_module(
        dims, [dtype], [0], lambda m: binary_body(m, opcode, dtype), const_init=False,
        window_dimensions=tuple(n if i == axis else 1 for i in range(len(dims))),
        padding=tuple(pad if i == axis else (0, 0) for i in range(len(dims))))
    assert prefix_scan(inst) is None
    return window_by_window(inst, [x], [np.asarray(_identity(opcode, dtype), dtype)])


@pytest.mark.parametrize("dtype", [S32, np.dtype(np.int8), np.dtype(np.uint16)])
@pytest.mark.parametrize("opcode", ["add", "multiply", "maximum", "minimum"])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_matches_general_path_on_integers(dtype, opcode, reverse):
    rng = np.random.default_rng(7)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, (3, 9), endpoint=True).astype(dtype)  # sums wrap
    got = scan_accumulate(x, 1, reverse, opcode)
    assert got.dtype == dtype
    _bits_equal(got, _general((3, 9), 1, reverse, opcode, dtype, x))
    m, _ = scan_module((3, 9), 1, reverse, opcode, dtype=dtype)  # the evaluator's fast path
    _bits_equal(run(m, x), got)


@pytest.mark.parametrize("dtype", [F32, F64, np.dtype(np.float16)])
@pytest.mark.parametrize("opcode", ["maximum", "minimum"])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_max_min_match_general_path_on_floats(dtype, opcode, reverse):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((4, 6)) * 1.5).astype(dtype)
    x[1, 2] = np.nan
    x[2, 0] = -np.inf
    got = scan_accumulate(x, 0, reverse, opcode)
    _bits_equal(got, _general((4, 6), 0, reverse, opcode, dtype, x))


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_multiply_is_sequential_in_the_operand_dtype(dtype, reverse):
    rng = np.random.default_rng(6)
    x = (1 + rng.standard_normal((5, 30)) * 0.1).astype(dtype)
    want = np.empty_like(x)
    order = range(29, -1, -1) if reverse else range(30)
    acc = np.ones(5, dtype)
    for j in order:  # from the scan's first element, rounding each step to dtype
        acc = acc * x[:, j]
        want[:, j] = acc
    got = scan_accumulate(x, 1, reverse, "multiply")
    _bits_equal(got, want)
    # The general path multiplies each window in index order: the same up to rounding.
    np.testing.assert_allclose(_general((5, 30), 1, reverse, "multiply", dtype, x), got,
                               rtol=1e-5)


def test_scan_add_float64_is_sequential_in_float64():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 50))
    got = scan_accumulate(x, 1, False, "add")
    _bits_equal(got, _general((2, 50), 1, False, "add", F64, x))
    _bits_equal(got, np.cumsum(x, axis=1))


@pytest.mark.parametrize("dtype", [F32, np.dtype(np.float16), BF16])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_add_low_floats_accumulate_in_float64_rounded_once(dtype, reverse):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((3, 200)) * 100).astype(dtype)
    wide = x.astype(np.float64)
    if reverse:
        want = np.flip(np.cumsum(np.flip(wide, 1), axis=1), 1).astype(dtype)
    else:
        want = np.cumsum(wide, axis=1).astype(dtype)
    got = scan_accumulate(x, 1, reverse, "add")
    _bits_equal(got, want)
    if dtype == F32:
        m, _ = scan_module((3, 200), 1, reverse, "add")
        _bits_equal(run(m, x), want)
        # ... which is not what sequential float32 sums (the general path) give.
        assert not np.array_equal(_general((3, 200), 1, reverse, "add", F32, x), want)


def test_a_scan_from_an_identity_parameter_takes_the_fast_path():
    # (A library step passes the init as a parameter: checked by value, so the evaluator
    # gives the native kernels' numbers, and a complex cumsum does not cost O(n**2).)
    x = (np.random.default_rng(6).standard_normal((3, 200)) * 100).astype(F32)
    m, inst = window_module(
        (3, 200), [F32], [0], lambda m: binary_body(m, "add", F32), const_init=False,
        window_dimensions=(1, 200), padding=((0, 0), (199, 0)))
    _bits_equal(run(m, x, np.float32(0)), scan_accumulate(x, 1, False, "add"))
    # any other init: the general path, from that init (padding holds it too: output i
    # combines 200 - i of them)
    _bits_equal(run(m, x, np.float32(1.5)), window_by_window(inst, [x], [np.float32(1.5)]))
    np.testing.assert_allclose(run(m, x, np.float32(1.5)),
                               np.cumsum(x, 1) + 1.5 * (200 - np.arange(200)), rtol=1e-4,
                               atol=1e-3)


def test_scan_maximum_propagates_nan():
    x = np.array([1, np.nan, 3, 0], F32)
    _bits_equal(scan_accumulate(x, 0, False, "maximum"), np.array([1, np.nan, np.nan, np.nan],
                                                                  F32))
    _bits_equal(scan_accumulate(x, 0, True, "maximum"), np.array([np.nan, np.nan, 3, 0], F32))
    _bits_equal(scan_accumulate(x, 0, False, "minimum"), np.array([1, np.nan, np.nan, np.nan],
                                                                  F32))


def test_scan_accumulate_rejects_other_opcodes():
    with pytest.raises(ValueError, match="scan_accumulate: opcode must be one of"):
        scan_accumulate(np.ones(3, S32), 0, False, "xor")


# --------------------------------------------------------------------------- shape inference


def _add(dtype=F32):
    return binary_body(Module("h"), "add", dtype)


def infer(*operands, calls=None, **attrs):
    return infer_shape("reduce_window", list(operands), attrs,
                       [_add()] if calls is None else calls)


@pytest.mark.parametrize("dims,attrs,out", [
    ((10,), dict(window_dimensions=(3,), window_strides=(2,)), (4,)),
    ((4,), dict(window_dimensions=(3,), base_dilations=(2,)), (5,)),  # padded 7
    ((4,), dict(window_dimensions=(3,), window_dilations=(2,)), (0,)),  # span 5 > 4
    ((6,), dict(window_dimensions=(3,), window_dilations=(2,)), (2,)),
    ((5,), dict(window_dimensions=(2,), padding=((-1, -1),)), (2,)),
    ((2,), dict(window_dimensions=(1,), padding=((-3, 0),)), (0,)),  # padded size -1
    ((0,), dict(window_dimensions=(2,), padding=((1, 1),)), (1,)),
    ((3, 4), dict(window_dimensions=(4, 1)), (0, 4)),
    ((3, 4), dict(window_dimensions=(2, 2), window_strides=(1, 3), padding=((1, 0), (2, 2))),
     (3, 3)),
    ((), dict(window_dimensions=()), ()),
])
def test_result_dims(dims, attrs, out):
    assert infer(S(F32, *dims), S(F32), **attrs) == S(F32, *out)


def test_variadic_result_is_a_tuple_of_the_init_types():
    pair = argmax_body(Module("h"))
    out = infer(S(F32, 5), S(S32, 5), S(F32), S(S32), calls=[pair], window_dimensions=(2,))
    assert out == Shape.tuple([S(F32, 4), S(S32, 4)])


def test_builder_stores_the_defaults():
    m, inst = window_module((3, 4), [F32], [0], lambda m: binary_body(m, "add", F32),
                            window_dimensions=(2, 2), window_strides=(2, 1))
    assert inst.attrs == dict(window_dimensions=(2, 2), window_strides=(2, 1),
                              base_dilations=(1, 1), window_dilations=(1, 1),
                              padding=((0, 0), (0, 0)))
    assert ("base_dilations={1,1}, padding={{0,0},{0,0}}, window_dilations={1,1}, "
            "window_dimensions={2,2}, window_strides={2,1}") in m.to_text()


@pytest.mark.parametrize("operands,attrs,calls,error,message", [
    ([S(F32, 4), S(F32)], {}, None, ValueError,
     "reduce_window: missing attribute 'window_dimensions'"),
    ([S(F32, 4, 2), S(F32)], dict(window_dimensions=(2,)), None, ValueError,
     "reduce_window: attribute window_dimensions must have 2 entries, got 1"),
    ([S(F32, 4), S(F32)], dict(window_dimensions=(2,), window_strides=(1, 1)), None,
     ValueError, "reduce_window: attribute window_strides must have 1 entries, got 2"),
    ([S(F32, 4), S(F32)], dict(window_dimensions=(0,)), None, ValueError,
     "reduce_window: window_dimensions \\(0,\\) must all be at least 1"),
    ([S(F32, 4), S(F32)], dict(window_dimensions=(1,), window_strides=(0,)), None,
     ValueError, "reduce_window: window_strides \\(0,\\) must all be at least 1"),
    ([S(F32, 4), S(F32)], dict(window_dimensions=(1,), base_dilations=(-1,)), None,
     ValueError, "reduce_window: base_dilations \\(-1,\\) must all be at least 1"),
    ([S(F32, 4), S(F32)], dict(window_dimensions=(1,), window_dilations=(0,)), None,
     ValueError, "reduce_window: window_dilations \\(0,\\) must all be at least 1"),
    ([S(F32, 4), S(F32)], dict(window_dimensions=(1.5,)), None, TypeError,
     "reduce_window: attribute window_dimensions must be a tuple of ints"),
    ([S(F32, 4), S(F32)], dict(window_dimensions=(1,), padding=(1, 2)), None, TypeError,
     "reduce_window: attribute padding must be a tuple of \\(low, high\\) int pairs"),
    ([S(F32, 4), S(F32)], dict(window_dimensions=(1,), padding=((1, 2), (0, 0))), None,
     ValueError, "reduce_window: attribute padding must have 1 entries, got 2"),
    ([S(F32, 4), S(F32, 1)], dict(window_dimensions=(1,)), None, ValueError,
     "reduce_window: init values must be scalars, got f32\\[1\\]"),
    ([S(F32, 4), S(F32, 4), S(F32)], dict(window_dimensions=(1,)), None, ValueError,
     "reduce_window: expected N inputs then N init values, got 3 operands"),
    ([S(F32, 4), S(F32, 3), S(F32), S(F32)], dict(window_dimensions=(1,)), None, ValueError,
     "reduce_window: operands must have the same dimensions"),
    ([S(F32, 4), S(S32)], dict(window_dimensions=(1,)), None, TypeError,
     "reduce_window: init value 0 \\(s32\\[\\]\\) must have the element type of input 0"),
    ([S(S32, 4), S(S32)], dict(window_dimensions=(1,)), None, TypeError,
     "reduce_window: body add.* takes \\(f32\\[\\], f32\\[\\]\\), expected "
     "\\(s32\\[\\], s32\\[\\]\\)"),
    ([S(F32, 4), S(F32)], dict(window_dimensions=(1,)), [], ValueError,
     "reduce_window: expected 1 called computation"),
])
def test_shape_errors(operands, attrs, calls, error, message):
    with pytest.raises(error, match=message):
        infer(*operands, calls=calls, **attrs)


def test_body_return_type_error():
    m = Module("h")
    to_int = scalar_comp(m, "to_int", [F32, F32],
                         lambda b, p: b.op("convert", p[0], shape=S(S32)))
    with pytest.raises(TypeError, match="reduce_window: body to_int.* returns s32\\[\\], "
                                        "expected f32\\[\\]"):
        infer(S(F32, 4), S(F32), calls=[to_int], window_dimensions=(1,))


def test_builder_reports_errors():
    m = Module("m")
    body = binary_body(m, "add", F32)
    b = Builder(m, "main")
    x = b.parameter(0, S(F32, 4))
    with pytest.raises(ValueError, match="reduce_window: window_dimensions"):
        b.op("reduce_window", x, b.constant(np.float32(0)), window_dimensions=(0,),
             calls=[body])


# --------------------------------------------------------------------------- text, verifier


def test_print_parse_round_trip_and_verify():
    m = Module("rw")
    add = binary_body(m, "add", F32)
    pair = argmax_body(m)
    b = Builder(m, "main")
    x = b.parameter(0, S(F32, 4, 6))
    idx = b.op("iota", shape=S(S32, 4, 6), iota_dimension=1)
    zero = b.constant(np.float32(0))
    r1 = b.op("reduce_window", x, zero, window_dimensions=(2, 3), window_strides=(2, 1),
              base_dilations=(1, 2), window_dilations=(2, 1), padding=((1, -1), (0, 2)),
              calls=[add])
    r2 = b.op("reduce_window", x, idx, b.constant(np.float32(-np.inf)),
              b.constant(np.int32(-1)), window_dimensions=(1, 6), padding=((0, 0), (5, 0)),
              calls=[pair])
    b.build(b.op("tuple", r1, r2), entry=True)
    verify_module(m)
    text = m.to_text()
    assert "padding={{1,-1},{0,2}}" in text
    parsed = parse_module(text)
    verify_module(parsed)
    assert parsed.to_text() == text
    x_val = np.random.default_rng(0).standard_normal((4, 6)).astype(F32)
    for a, b_ in zip(run(m, x_val), run(parsed, x_val)):
        if isinstance(a, tuple):
            for u, v in zip(a, b_):
                _bits_equal(u, v)
        else:
            _bits_equal(a, b_)


def test_text_without_optional_attributes_parses_verifies_and_runs():
    text = """HloModule m

%add.1 (a.2: f32[], b.3: f32[]) -> f32[] {
  %a.2 = f32[] parameter(0)
  %b.3 = f32[] parameter(1)
  ROOT %add.4 = f32[] add(%a.2, %b.3)
}

ENTRY %main (x.5: f32[5]) -> f32[5] {
  %x.5 = f32[5] parameter(0)
  %c.6 = f32[] constant(0)
  ROOT %rw.7 = f32[5] reduce_window(%x.5, %c.6), window_dimensions={5}, padding={{0,4}}, \
calls={%add.1}
}
"""
    m = parse_module(text)
    verify_module(m)
    assert prefix_scan(m.entry.root) == (0, True, "add")
    _bits_equal(run(m, np.arange(5, dtype=F32)), np.array([10, 10, 9, 7, 4], F32))


def test_verifier_rejects_a_wrong_shape():
    from ember.compiler.verifier import HloVerifierError
    m, inst = window_module((5,), [F32], [0], lambda m: binary_body(m, "add", F32),
                            window_dimensions=(2,))
    inst.attrs["window_strides"] = (2,)
    with pytest.raises(HloVerifierError, match="shape f32\\[4\\] differs from the inferred "
                                               "f32\\[2\\]"):
        verify_module(m)


def test_cost_analysis_counts_one_body_per_window_element():
    m, _ = window_module((6, 4), [F32], [0], lambda m: binary_body(m, "add", F32),
                         window_dimensions=(3, 2), window_strides=(3, 2))
    # 2 x 2 outputs, 6 window elements each; bytes: input + init + output.
    assert cost_analysis(m) == {"flops": 24.0, "transcendentals": 0.0,
                                "bytes accessed": 96.0 + 4.0 + 16.0}
