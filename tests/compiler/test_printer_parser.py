"""The HLO text format: golden text, print -> parse -> print identity for every opcode, errors."""

import ml_dtypes
import numpy as np
import pytest

from ember.compiler.hlo import (
    BINARY_ELEMENTWISE,
    OPCODES,
    UNARY_ELEMENTWISE,
    Builder,
    Module,
    Shape,
)
from ember.compiler.parser import parse_module
from ember.compiler.printer import attr_to_text, constant_to_text, module_to_text
from ember.compiler.verifier import verify_module

F32, S32, PRED = np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.bool_)
BF16 = np.dtype(ml_dtypes.bfloat16)


def S(dtype, *dims):
    return Shape(np.dtype(dtype), dims)


GOLDEN = """\
HloModule jit_f

%region_sum.3 (Arg_0.1: f32[], Arg_1.2: f32[]) -> f32[] {
  %Arg_0.1 = f32[] parameter(0)
  %Arg_1.2 = f32[] parameter(1)
  ROOT %add.3 = f32[] add(%Arg_0.1, %Arg_1.2)
}

ENTRY %main (Arg_0.4: f32[3,4]) -> (f32[3], s32[2,2]) {
  %Arg_0.4 = f32[3,4] parameter(0)
  %constant.5 = f32[] constant(0)
  %reduce.6 = f32[3] reduce(%Arg_0.4, %constant.5), dimensions={1}, calls={%region_sum.3}
  %constant.7 = s32[2,2] constant({{1,-2},{3,4}})
  ROOT %tuple.8 = (f32[3], s32[2,2]) tuple(%reduce.6, %constant.7)
}
"""


def test_golden_text():
    m = Module("jit_f")
    b = Builder(m, "")
    x = b.parameter(0, S(F32))
    y = b.parameter(1, S(F32))
    root = b.op("add", x, y)
    b.name = root.name.replace("add", "region_sum")
    body = b.build(root)
    b = Builder(m, "main")
    a = b.parameter(0, S(F32, 3, 4))
    r = b.op("reduce", a, b.constant(0.0, np.float32), dimensions=(1,), calls=[body])
    b.build(b.op("tuple", r, b.constant([[1, -2], [3, 4]], np.int32)), entry=True)
    assert module_to_text(m) == GOLDEN
    assert m.to_text() == GOLDEN
    parsed = parse_module(GOLDEN)
    assert parsed.to_text() == GOLDEN
    verify_module(parsed)
    # Generated names continue after the parsed ones.
    assert parsed.new_name("add") == "add.9"


def test_attribute_text():
    assert attr_to_text((1, 2)) == "{1,2}"
    assert attr_to_text(((0, 1), (2, 3))) == "{{0,1},{2,3}}"
    assert attr_to_text(()) == "{}"
    assert attr_to_text(True) == "true" and attr_to_text(None) == "none"
    assert attr_to_text(1.0) == "1.0" and attr_to_text(1e-5) == "1e-05"
    assert attr_to_text(float("-inf")) == "-inf" and attr_to_text(float("nan")) == "nan"
    assert attr_to_text("LT") == "LT"
    assert attr_to_text("two words") == '"two words"'
    assert attr_to_text("true") == '"true"'
    assert attr_to_text("1x") == '"1x"'
    with pytest.raises(TypeError, match="unsupported attribute value"):
        attr_to_text({"a": 1})


def test_constant_text():
    assert constant_to_text(np.float32(0.1)) == "0.1"
    assert constant_to_text(np.array([[1.5, -0.0]], np.float32)) == "{{1.5,-0}}"
    assert constant_to_text(np.array([True, False])) == "{true,false}"
    # An array of no elements prints as {} whatever its shape (f32[256,256,0] would otherwise
    # be 65536 pairs of braces); the parser reads back both forms.
    assert constant_to_text(np.zeros((2, 0), np.int8)) == "{}"
    assert constant_to_text(np.zeros((256, 256, 0), np.float32)) == "{}"
    assert constant_to_text(np.array([1 - 2j], np.complex64)) == "{(1,-2)}"
    assert constant_to_text(np.array([np.nan, -np.inf], np.float16)) == "{nan,-inf}"


# --------------------------------------------------------------------------- every opcode

_UNARY_DTYPE = {"popcnt": S32, "count_leading_zeros": S32, "not": PRED,
                "real": np.complex64, "imag": np.complex64, "conj": np.complex64}
_BINARY_DTYPE = {"and": S32, "or": PRED, "xor": S32, "shift_left": S32,
                 "shift_right_arithmetic": S32, "shift_right_logical": np.uint32}
_UNARY_ATTRS = {"reduce_precision": dict(exponent_bits=5, mantissa_bits=10)}
_BINARY_ATTRS = {"compare": dict(comparison_direction="GE", compare_type="FLOAT")}


def _scalar_comp(m, name, dtypes, make_root):
    b = Builder(m, m.new_name(name))
    ps = [b.parameter(i, S(d)) for i, d in enumerate(dtypes)]
    return b.build(make_root(b, ps))


def _constants(b):
    """Constants of every element type, with nan/inf/-0 and extreme values."""
    out = [
        b.constant([True, False]),
        b.constant(np.array([-128, 127], np.int8)),
        b.constant(np.array([-32768, 5], np.int16)),
        b.constant(np.array([[-(2 ** 31), 2 ** 31 - 1]], np.int32)),
        b.constant(np.array([-(2 ** 63), 2 ** 63 - 1], np.int64)),
        b.constant(np.array([0, 255], np.uint8)),
        b.constant(np.array([65535], np.uint16)),
        b.constant(np.array([2 ** 32 - 1], np.uint32)),
        b.constant(np.array([2 ** 64 - 1], np.uint64)),
        b.constant(np.array([np.nan, np.inf, -np.inf, -0.0, 65504, 6e-8, 0.1], np.float16)),
        b.constant(np.array([np.nan, -np.inf, 3.3895e38, 1e-40, 0.1, 1 / 3], BF16)),
        b.constant(np.array([[np.nan, np.inf], [-0.0, 1e-45], [3.4028235e38, 0.1]],
                            np.float32)),
        b.constant(np.array([np.nan, -np.inf, 5e-324, 1.7976931348623157e308, 0.1],
                            np.float64)),
        b.constant(np.array([complex(np.inf, -np.nan), 0.1 - 2j], np.complex64)),
        b.constant(np.array([[1e300 + 1e-300j]], np.complex128)),
        b.constant(np.float32(-2.5)),
        b.constant(np.zeros((0, 3), np.float32)),
    ]
    nan = b.constant(np.array(-np.nan, np.float32))  # a negative nan keeps its sign
    return out + [nan]


def build_every_op_module() -> Module:
    """A module with at least one instruction of every opcode, nested computations included."""
    m = Module("every_op")
    add = _scalar_comp(m, "add", [F32, F32], lambda b, p: b.op("add", *p))
    less = _scalar_comp(m, "less", [F32, F32, S32, S32],
                        lambda b, p: b.op("compare", p[0], p[1], comparison_direction="LT"))
    argmax = _scalar_comp(
        m, "argmax", [F32, S32, F32, S32],
        lambda b, p: b.op("tuple", b.op("maximum", p[0], p[2]), b.op("minimum", p[1], p[3])))
    inner = _scalar_comp(m, "inner", [F32], lambda b, p: b.op("negate", p[0]))
    # A while loop whose body calls another computation (a nested call).
    cond = _scalar_comp(m, "cond", [S32, F32],
                        lambda b, p: b.op("compare", p[0], b.constant(3, np.int32),
                                          comparison_direction="LT"))
    b = Builder(m, m.new_name("body"))
    i = b.parameter(0, S(S32))
    x = b.parameter(1, S(F32))
    body = b.build(b.op("tuple", b.op("add", i, b.constant(1, np.int32)),
                        b.op("call", x, calls=[inner])))
    fused = _scalar_comp(m, "fused", [F32, F32],
                         lambda b, p: b.op("exponential", b.op("multiply", *p)))

    b = Builder(m, "main")
    v = b.parameter(0, S(F32, 4))
    mat = b.parameter(1, S(F32, 2, 3))
    idx = b.parameter(2, S(S32, 2, 1))
    k = b.parameter(3, S(S32))
    outs = list(_constants(b))
    for opcode in sorted(UNARY_ELEMENTWISE):
        dtype = _UNARY_DTYPE.get(opcode, F32)
        arg = v if dtype == F32 else b.op("convert", v, shape=S(dtype, 4))
        if opcode == "convert":
            outs.append(b.op("convert", v, shape=S(BF16, 4)))
        elif opcode == "bitcast_convert":
            outs.append(b.op("bitcast_convert", v, shape=S(np.int32, 4)))
        else:
            outs.append(b.op(opcode, arg, **_UNARY_ATTRS.get(opcode, {})))
    for opcode in sorted(BINARY_ELEMENTWISE):
        dtype = _BINARY_DTYPE.get(opcode, F32)
        arg = v if dtype == F32 else b.op("convert", v, shape=S(dtype, 4))
        outs.append(b.op(opcode, arg, arg, **_BINARY_ATTRS.get(opcode, {})))
    pred = b.op("compare", v, v, comparison_direction="EQ")
    outs.append(b.op("select", pred, v, v))
    zero = b.constant(0.0, np.float32)
    outs.append(b.op("clamp", zero, v, b.constant(1.0, np.float32)))
    outs.append(b.op("iota", shape=S(S32, 2, 3), iota_dimension=1))
    outs.append(b.op("broadcast_in_dim", v, shape=S(F32, 3, 4), broadcast_dimensions=(1,)))
    outs.append(b.op("reshape", mat, shape=S(F32, 3, 2)))
    outs.append(b.op("transpose", mat, permutation=(1, 0)))
    outs.append(b.op("slice", mat, start_indices=(0, 1), limit_indices=(2, 3), strides=(1, 2)))
    outs.append(b.op("dynamic_slice", mat, k, k, slice_sizes=(1, 2)))
    outs.append(b.op("dynamic_update_slice", mat, b.op("slice", mat, start_indices=(0, 0),
                                                       limit_indices=(1, 1), strides=(1, 1)),
                     k, k))
    outs.append(b.op("concatenate", mat, mat, dimension=0))
    outs.append(b.op("pad", mat, zero, edge_padding_low=(1, -1), edge_padding_high=(0, 2),
                     interior_padding=(1, 0)))
    outs.append(b.op("reverse", mat, dimensions=(0, 1)))
    outs.append(b.op("reduce", mat, zero, dimensions=(1,), calls=[add]))
    iota = b.op("iota", shape=S(S32, 2, 3), iota_dimension=1)
    outs.append(b.op("reduce", mat, iota, b.constant(-np.inf, np.float32),
                     b.constant(0, np.int32), dimensions=(1,), calls=[argmax]))
    outs.append(b.op("reduce_window", mat, zero, window_dimensions=(2, 2), window_strides=(1, 2),
                     base_dilations=(2, 1), window_dilations=(1, 2),
                     padding=((1, 0), (-1, 2)), calls=[add]))
    outs.append(b.op("reduce_window", mat, iota, b.constant(-np.inf, np.float32),
                     b.constant(0, np.int32), window_dimensions=(1, 3),
                     padding=((0, 0), (2, 0)), calls=[argmax]))
    outs.append(b.op("dot_general", mat, mat, lhs_batching_dimensions=(),
                     rhs_batching_dimensions=(), lhs_contracting_dimensions=(1,),
                     rhs_contracting_dimensions=(1,), shape=S(F32, 2, 2)))
    gather_dn = dict(offset_dims=(1,), collapsed_slice_dims=(0,), operand_batching_dims=(),
                     start_indices_batching_dims=(), start_index_map=(0,), index_vector_dim=1,
                     slice_sizes=(1, 3), indices_are_sorted=False)
    rows = b.op("gather", mat, idx, **gather_dn)
    outs.append(rows)
    outs.append(b.op("scatter", mat, idx, rows, update_window_dims=(1,),
                     inserted_window_dims=(0,), input_batching_dims=(),
                     scatter_indices_batching_dims=(), scatter_dims_to_operand_dims=(0,),
                     index_vector_dim=1, indices_are_sorted=True, unique_indices=False,
                     calls=[add]))
    outs.append(b.op("sort", mat, iota, dimension=1, is_stable=True, calls=[less]))
    loop = b.op("while", k, b.op("reduce", v, zero, dimensions=(0,), calls=[add]),
                calls=[cond, body])
    outs.append(b.op("get_tuple_element", loop, index=1))
    outs.append(b.op("case", k, zero, zero, calls=[add, add]))
    outs.append(b.op("call", zero, zero, calls=[add]))
    outs.append(b.op("fusion", zero, zero, kind="loop", calls=[fused]))
    outs.append(b.op("custom_call", mat, shape=S(F32, 2, 2), call_target_name="lapack spotrf",
                     lower=True, alpha=0.5, note=None, dims=((0, 1), (2,))))
    b.build(b.op("tuple", *outs), entry=True)
    return m


def test_every_opcode_round_trips():
    m = build_every_op_module()
    used = {i.opcode for c in m.computations for i in c.instructions}
    assert used == OPCODES
    verify_module(m)
    text = m.to_text()
    parsed = parse_module(text)
    verify_module(parsed)
    assert parsed.to_text() == text
    assert m.clone().to_text() == text
    # New objects, same structure; constants keep every bit (nan compared as nan).
    for c_old, c_new in zip(m.computations, parsed.computations):
        assert c_old.name == c_new.name and c_old.root.name == c_new.root.name
        for a, b in zip(c_old.instructions, c_new.instructions):
            assert a is not b and a.name == b.name and a.shape == b.shape
            assert [o.name for o in a.operands] == [o.name for o in b.operands]
            assert [c.name for c in a.calls] == [c.name for c in b.calls]
            if a.opcode == "constant":
                _assert_same_bits(a.attrs["value"], b.attrs["value"])
            else:
                assert repr(sorted(a.attrs.items())) == repr(sorted(b.attrs.items()))


def _assert_same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype.kind == "c":
        _assert_same_bits(a.real, b.real)
        _assert_same_bits(a.imag, b.imag)
        return
    if a.dtype.kind in "fV":
        fa, fb = a.astype(np.float64), b.astype(np.float64)
        assert np.array_equal(np.isnan(fa), np.isnan(fb))
        assert np.array_equal(np.signbit(fa), np.signbit(fb))
        a, b = np.where(np.isnan(fa), 0, fa), np.where(np.isnan(fb), 0, fb)
    assert np.array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32, np.float64])
def test_random_floats_round_trip_exactly(dtype):
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2 ** 63, size=300, dtype=np.uint64)
    itemsize = np.dtype(dtype).itemsize
    values = bits.astype(f"u{itemsize}").view(dtype)
    with np.errstate(invalid="ignore"):  # signaling nans warn when cast
        values = values[~np.isnan(values.astype(np.float64))]
    m = Module("m")
    b = Builder(m, "main")
    scalars = [b.constant(v) for v in values[:40]]  # (small constants: checked in Python)
    b.build(b.op("tuple", b.constant(values), *scalars), entry=True)
    root = parse_module(m.to_text()).entry.root
    back = root.operands[0].attrs["value"]
    assert np.array_equal(back.view(f"u{itemsize}"), values.view(f"u{itemsize}"))
    back = np.array([c.attrs["value"] for c in root.operands[1:]], dtype)
    assert np.array_equal(back.view(f"u{itemsize}"), values[:40].view(f"u{itemsize}"))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 5, 100])  # (up to 64 elements are checked in Python)
def test_texts_that_read_back_wrong_are_found(dtype, n):
    from ember.compiler.printer import _misread_texts
    flat = np.full(n, 0.25, dtype)
    texts = ["0.25"] * n
    texts[-1] = "0.5"
    assert _misread_texts(texts, flat) == [n - 1]
    assert _misread_texts(["0.25"] * n, flat) == []


def test_clone_is_independent():
    m = build_every_op_module()
    c = m.clone()
    original = m.entry.instructions[0].name
    c.entry.instructions[0].name = "renamed"
    c.entry.instructions[0].operands.append(c.entry.root)
    assert m.entry.instructions[0].name == original and not m.entry.instructions[0].operands
    assert c.new_name("x") == m.new_name("x")


def test_odd_names_are_quoted():
    m = Module("jit_<lambda>")
    b = Builder(m, "pjit <lambda>")
    x = b.parameter(0, S(F32), name="x y")
    inner = b.build(b.op("negate", x))
    b = Builder(m, "main")
    y = b.parameter(0, S(F32))
    b.build(b.op("call", y, calls=[inner]), entry=True)
    text = m.to_text()
    assert '%"pjit <lambda>" ("x y": f32[])' in text
    assert parse_module(text).to_text() == text


# --------------------------------------------------------------------------- errors

_OK = """HloModule m

ENTRY %main (x.1: f32[2]) -> f32[2] {
  %x.1 = f32[2] parameter(0)
  ROOT %negate.2 = f32[2] negate(%x.1)
}
"""


@pytest.mark.parametrize("old,new,message", [
    ("HloModule m", "Module m", "line 1, column 1: expected 'HloModule'"),
    ("negate(%x.1)", "negate(%y.1)", "line 5, .*operand %y.1 is not defined earlier"),
    ("negate(%x.1)", "frob(%x.1)", "line 5, .*unknown opcode 'frob'"),
    ("= f32[2] negate", "= f33[2] negate", "line 5, .*unknown HLO element type 'f33'"),
    ("= f32[2] negate", "= f32[2 negate", "line 5, .*expected ']'"),
    ("ROOT %negate", "%negate", "line 3, .*has no ROOT instruction"),
    ("negate(%x.1)", "negate(%x.1), calls={%nowhere}",
     "line 5, .*called computation %nowhere is not defined earlier"),
    ("negate(%x.1)", "negate(%x.1), a=1, a=2", "line 5, .*attribute a is given twice"),
    ("negate(%x.1)", "negate(%x.1) junk", "line 5, .*unexpected text 'junk'"),
    ("negate(%x.1)", "negate(%x.1), a={1,2", "line 5, .*expected '}'"),
    ("parameter(0)", "parameter(x)", "line 4, .*expected a parameter index"),
    ("ENTRY %main", "%main", "the module has no ENTRY computation"),
    ("-> f32[2] {", "-> f32[3] {", "line 3, .*declared to return f32\\[3\\]"),
    ("(x.1: f32[2])", "(x.2: f32[2])", "line 3, .*parameters of %main do not match"),
    ("\n}\n", "\n", "line 3, .*not closed"),
])
def test_parse_errors(old, new, message):
    text = _OK.replace(old, new)
    assert text != _OK
    with pytest.raises(ValueError, match=message):
        parse_module(text)


@pytest.mark.parametrize("value,message", [
    ("{1,2}", "constant value does not have the shape s32\\[3\\]"),
    ("{1,2,x}", "bad constant element for s32\\[3\\]: 'x' is not an integer"),
    ("{1,2,300}", "bad constant element"),
    ("{{1,2,3}}", "constant value does not have the shape"),
])
def test_constant_parse_errors(value, message):
    text = f"""HloModule m

ENTRY %main () -> s32[3] {{
  ROOT %c.1 = s32[3] constant({value})
}}"""
    if "300" in value:
        text = text.replace("s32", "s8")
    with pytest.raises(ValueError, match="line 4, .*" + message):
        parse_module(text)


@pytest.mark.parametrize("value", ["{}", "{{},{}}"])
def test_constants_of_no_elements_read_back(value):
    m = parse_module(f"""HloModule m

ENTRY %main () -> s8[2,0] {{
  ROOT %c.1 = s8[2,0] constant({value})
}}""")
    got = m.entry.root.attrs["value"]
    assert got.shape == (2, 0) and got.dtype == np.int8
    with pytest.raises(ValueError, match="constant value does not have the shape"):
        parse_module(m.to_text().replace("s8[2,0]", "s8[2,1]"))


def test_parse_errors_for_module_structure():
    with pytest.raises(ValueError, match="empty text"):
        parse_module("\n\n")
    twice = _OK + _OK.split("\n", 2)[2]
    with pytest.raises(ValueError, match="line 7, .*ENTRY computation must be the last"):
        parse_module(twice)
    dup = _OK.replace("ROOT %negate.2", "%negate.2 = f32[2] negate(%x.1)\n  ROOT %negate.2")
    with pytest.raises(ValueError, match="line 6, .*instruction %negate.2 is defined twice"):
        parse_module(dup)
