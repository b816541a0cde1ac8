"""Builder and shape inference: good and malformed cases for every opcode family."""

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
    normalize_attr,
)
from ember.compiler.shape_inference import _RULES, infer_shape

F32, S32, PRED = np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.bool_)


def S(dtype, *dims):
    return Shape(np.dtype(dtype), dims)


def infer(opcode, *operands, calls=(), given=None, **attrs):
    return infer_shape(opcode, list(operands), attrs, list(calls), given)


def scalar_fn(name, param_dtypes, root_op="add", root_dtype=None):
    """A computation over scalars: ``root_op`` of its first two parameters (or a tuple)."""
    m = Module("helpers")
    b = Builder(m, name)
    ps = [b.parameter(i, S(d)) for i, d in enumerate(param_dtypes)]
    if root_op == "compare":
        root = b.op("compare", ps[0], ps[1], comparison_direction="LT")
    elif root_op == "tuple":
        n = len(ps) // 2
        root = b.op("tuple", *[b.op("add", ps[i], ps[n + i]) for i in range(n)])
    elif root_op == "convert":
        root = b.op("convert", ps[0], shape=S(root_dtype))
    else:
        root = b.op(root_op, ps[0], ps[1])
    return b.build(root)


def test_every_opcode_has_a_rule():
    assert OPCODES <= set(_RULES)


# --------------------------------------------------------------------------- builder


def test_builder_infers_and_names():
    m = Module("m")
    b = Builder(m, "main")
    x = b.parameter(0, S(F32, 2, 3))
    c = b.constant(2.0, np.float32)
    y = b.op("broadcast_in_dim", c, shape=S(F32, 2, 3), broadcast_dimensions=[])
    z = b.op("multiply", x, y)
    comp = b.build(z, entry=True)
    assert z.shape == S(F32, 2, 3)
    assert [i.name for i in comp.instructions] == ["Arg_0.1", "constant.2",
                                                   "broadcast_in_dim.3", "multiply.4"]
    assert m.entry is comp and comp.parameter_shapes == [S(F32, 2, 3)]
    # Lists and NumPy scalars in attributes are canonicalized to tuples and Python values.
    assert y.attrs["broadcast_dimensions"] == ()
    t = b.op("transpose", x, permutation=np.array([1, 0]).tolist())
    assert t.attrs["permutation"] == (1, 0) and t.shape == S(F32, 3, 2)


def test_builder_rejects_wrong_given_shape():
    m = Module("m")
    b = Builder(m, "main")
    x = b.parameter(0, S(F32, 2))
    with pytest.raises(ValueError, match="add: given shape f32\\[3\\] differs"):
        b.op("add", x, x, shape=S(F32, 3))


def test_normalize_attr():
    assert normalize_attr([np.int64(1), [np.float32(0.5), np.bool_(True)]]) == (1, (0.5, True))
    assert type(normalize_attr(np.int32(3))) is int


def test_add_computation_keeps_entry_last():
    m = Module("m")
    b = Builder(m, "main")
    b.build(b.parameter(0, S(F32)), entry=True)
    helper = scalar_fn("h", [F32, F32])
    b2 = Builder(m, "later")
    b2.build(b2.parameter(0, S(F32)))
    assert m.entry.name == "main" and m.computations[0].name == "later"
    assert helper.name == "h"


# --------------------------------------------------------------------------- elementwise


@pytest.mark.parametrize("opcode", sorted(UNARY_ELEMENTWISE - {
    "convert", "bitcast_convert", "reduce_precision", "is_finite", "real", "imag", "popcnt",
    "count_leading_zeros", "not"}))
def test_unary_keeps_shape(opcode):
    assert infer(opcode, S(F32, 2, 3)) == S(F32, 2, 3)


def test_unary_special_results():
    assert infer("is_finite", S(F32, 4)) == S(PRED, 4)
    assert infer("real", S(np.complex64, 2)) == S(F32, 2)
    assert infer("imag", S(np.complex128)) == S(np.float64)
    assert infer("abs", S(np.complex64, 3)) == S(F32, 3)
    assert infer("abs", S(S32, 3)) == S(S32, 3)
    assert infer("popcnt", S(np.uint8, 2)) == S(np.uint8, 2)
    assert infer("not", S(PRED, 2)) == S(PRED, 2)
    assert infer("convert", S(F32, 2), given=S(ml_dtypes.bfloat16, 2)) == \
        S(ml_dtypes.bfloat16, 2)
    assert infer("reduce_precision", S(F32, 2), exponent_bits=5, mantissa_bits=10) == S(F32, 2)


def test_unary_errors():
    with pytest.raises(ValueError, match="negate: expected 1 operands, got 2"):
        infer("negate", S(F32), S(F32))
    with pytest.raises(TypeError, match="exponential: operands must have a floating-point or "
                                        "complex element type, got s32"):
        infer("exponential", S(S32, 2))
    with pytest.raises(TypeError, match="floor: .*floating-point element type, got c64"):
        infer("floor", S(np.complex64))
    with pytest.raises(TypeError, match="popcnt: .*integer element type, got f32"):
        infer("popcnt", S(F32))
    with pytest.raises(TypeError, match="negate: operand 0 must be an array"):
        infer("negate", Shape.tuple([S(F32)]))
    with pytest.raises(ValueError, match="convert: the result shape .* must be given"):
        infer("convert", S(F32, 2))
    assert infer("bitcast_convert", S(F32, 2), given=S(S32, 2)) == S(S32, 2)
    with pytest.raises(ValueError, match="bitcast_convert: the result shape .* must be given"):
        infer("bitcast_convert", S(F32, 2))
    with pytest.raises(ValueError, match="element width"):  # (same width only)
        infer("bitcast_convert", S(F32, 2), given=S(np.int16, 2))
    with pytest.raises(ValueError, match="convert: result s32\\[3\\] must have the operand's "
                                         "dimensions"):
        infer("convert", S(F32, 2), given=S(S32, 3))
    with pytest.raises(ValueError, match="reduce_precision: missing attribute 'mantissa_bits'"):
        infer("reduce_precision", S(F32), exponent_bits=5)
    with pytest.raises(ValueError, match="reduce_precision: exponent_bits must be at least 1"):
        infer("reduce_precision", S(F32), exponent_bits=0, mantissa_bits=3)


@pytest.mark.parametrize("opcode", sorted(BINARY_ELEMENTWISE - {
    "compare", "complex", "and", "or", "xor", "shift_left", "shift_right_arithmetic",
    "shift_right_logical"}))
def test_binary_keeps_shape(opcode):
    assert infer(opcode, S(F32, 3), S(F32, 3)) == S(F32, 3)


def test_binary_special_results():
    assert infer("compare", S(S32, 2), S(S32, 2), comparison_direction="GE") == S(PRED, 2)
    assert infer("compare", S(F32), S(F32), comparison_direction="EQ",
                 compare_type="TOTALORDER") == S(PRED)
    assert infer("complex", S(F32, 2), S(F32, 2)) == S(np.complex64, 2)
    assert infer("and", S(PRED, 2), S(PRED, 2)) == S(PRED, 2)
    assert infer("shift_left", S(np.uint32), S(np.uint32)) == S(np.uint32)


def test_binary_errors():
    with pytest.raises(ValueError, match="add: operands must have the same dimensions, got "
                                         "f32\\[2\\], f32\\[3\\]"):
        infer("add", S(F32, 2), S(F32, 3))
    with pytest.raises(TypeError, match="multiply: operands must have one element type"):
        infer("multiply", S(F32, 2), S(S32, 2))
    with pytest.raises(ValueError, match="compare: comparison_direction must be one of"):
        infer("compare", S(F32), S(F32), comparison_direction="LESS")
    with pytest.raises(ValueError, match="compare: compare_type must be one of"):
        infer("compare", S(F32), S(F32), comparison_direction="LT", compare_type="BOGUS")
    with pytest.raises(TypeError, match="complex: operands must be f32 or f64"):
        infer("complex", S(S32), S(S32))
    with pytest.raises(TypeError, match="and: .*integer or pred element type, got f32"):
        infer("and", S(F32), S(F32))
    with pytest.raises(TypeError, match="shift_left: .*integer element type, got pred"):
        infer("shift_left", S(PRED), S(PRED))


def test_select_and_clamp():
    assert infer("select", S(PRED, 2), S(F32, 2), S(F32, 2)) == S(F32, 2)
    assert infer("select", S(PRED), S(F32, 2), S(F32, 2)) == S(F32, 2)
    assert infer("clamp", S(F32), S(F32, 3), S(F32)) == S(F32, 3)
    assert infer("clamp", S(F32, 3), S(F32, 3), S(F32, 3)) == S(F32, 3)
    with pytest.raises(TypeError, match="select: the predicate must be pred"):
        infer("select", S(S32, 2), S(F32, 2), S(F32, 2))
    with pytest.raises(TypeError, match="select: on_true f32\\[2\\] and on_false s32\\[2\\]"):
        infer("select", S(PRED, 2), S(F32, 2), S(S32, 2))
    with pytest.raises(ValueError, match="select: the predicate pred\\[3\\] must be a scalar"):
        infer("select", S(PRED, 3), S(F32, 2), S(F32, 2))
    with pytest.raises(TypeError, match="clamp: min s32\\[\\] must have the operand's "
                                        "element type"):
        infer("clamp", S(S32), S(F32, 3), S(F32))
    with pytest.raises(ValueError, match="clamp: max f32\\[2\\] must be a scalar or have"):
        infer("clamp", S(F32), S(F32, 3), S(F32, 2))


# --------------------------------------------------------------------------- leaves, tuples


def test_parameter_constant_iota_tuple():
    assert infer("parameter", given=S(F32, 2), index=0) == S(F32, 2)
    assert infer("constant", value=np.zeros((2, 3), np.int8)) == S(np.int8, 2, 3)
    assert infer("iota", given=S(S32, 4, 2), iota_dimension=1) == S(S32, 4, 2)
    t = infer("tuple", S(F32), S(S32, 2))
    assert t == Shape.tuple([S(F32), S(S32, 2)])
    assert infer("get_tuple_element", t, index=1) == S(S32, 2)
    assert infer("tuple") == Shape.tuple([])
    with pytest.raises(ValueError, match="parameter: index must be non-negative"):
        infer("parameter", given=S(F32), index=-1)
    with pytest.raises(TypeError, match="constant: value must be an ndarray"):
        infer("constant", value=[1, 2])
    with pytest.raises(ValueError, match="iota: iota_dimension 2 out of range"):
        infer("iota", given=S(S32, 4, 2), iota_dimension=2)
    with pytest.raises(ValueError, match="iota: the result shape must be given"):
        infer("iota", iota_dimension=0)
    with pytest.raises(TypeError, match="get_tuple_element: operand must be a tuple"):
        infer("get_tuple_element", S(F32), index=0)
    with pytest.raises(ValueError, match="get_tuple_element: index 2 out of range"):
        infer("get_tuple_element", t, index=2)


# --------------------------------------------------------------------------- shape ops


def test_broadcast_in_dim():
    assert infer("broadcast_in_dim", S(F32, 3), given=S(F32, 2, 3),
                 broadcast_dimensions=(1,)) == S(F32, 2, 3)
    assert infer("broadcast_in_dim", S(F32, 1, 3), given=S(F32, 4, 3),
                 broadcast_dimensions=(0, 1)) == S(F32, 4, 3)
    with pytest.raises(ValueError, match="broadcast_in_dim: operand dimension 0 of f32\\[3\\] "
                                         "has size 3, which cannot broadcast to 2"):
        infer("broadcast_in_dim", S(F32, 3), given=S(F32, 2, 3), broadcast_dimensions=(0,))
    with pytest.raises(ValueError, match="broadcast_in_dim: broadcast_dimensions \\(1,\\) must "
                                         "have one entry per operand dimension"):
        infer("broadcast_in_dim", S(F32, 1, 3), given=S(F32, 2, 3), broadcast_dimensions=(1,))
    with pytest.raises(ValueError, match="broadcast_in_dim: broadcast_dimensions \\(2,\\) has "
                                         "the dimension 2 out of range for rank 2"):
        infer("broadcast_in_dim", S(F32, 3), given=S(F32, 2, 3), broadcast_dimensions=(2,))
    with pytest.raises(ValueError, match="broadcast_in_dim: the result shape must be given"):
        infer("broadcast_in_dim", S(F32, 3), broadcast_dimensions=(0,))
    with pytest.raises(TypeError, match="broadcast_in_dim: result s32\\[3\\] must have the "
                                        "operand's element type"):
        infer("broadcast_in_dim", S(F32, 3), given=S(S32, 3), broadcast_dimensions=(0,))
    with pytest.raises(TypeError, match="broadcast_in_dim: attribute broadcast_dimensions "
                                        "must be a tuple of ints"):
        infer("broadcast_in_dim", S(F32, 3), given=S(F32, 3), broadcast_dimensions=0)


def test_reshape_transpose_reverse():
    assert infer("reshape", S(F32, 2, 3), given=S(F32, 3, 2, 1)) == S(F32, 3, 2, 1)
    assert infer("transpose", S(F32, 2, 3, 4), permutation=(2, 0, 1)) == S(F32, 4, 2, 3)
    assert infer("reverse", S(F32, 2, 3), dimensions=(0, 1)) == S(F32, 2, 3)
    with pytest.raises(ValueError, match="reshape: cannot reshape f32\\[2,3\\] \\(6 elements\\)"
                                         " to f32\\[4\\]"):
        infer("reshape", S(F32, 2, 3), given=S(F32, 4))
    with pytest.raises(ValueError, match="transpose: permutation \\(0,\\) is not a "
                                         "permutation"):
        infer("transpose", S(F32, 2, 3), permutation=(0,))
    with pytest.raises(ValueError, match="transpose: permutation \\(0, 0\\) repeats"):
        infer("transpose", S(F32, 2, 3), permutation=(0, 0))
    with pytest.raises(ValueError, match="reverse: dimensions \\(3,\\) has the dimension 3 out "
                                         "of range"):
        infer("reverse", S(F32, 2, 3), dimensions=(3,))
    with pytest.raises(ValueError, match="reverse: missing attribute 'dimensions'"):
        infer("reverse", S(F32, 2, 3))


def test_slice():
    assert infer("slice", S(F32, 10, 4), start_indices=(1, 0), limit_indices=(8, 4),
                 strides=(3, 1)) == S(F32, 3, 4)
    assert infer("slice", S(F32, 5), start_indices=(2,), limit_indices=(2,),
                 strides=(1,)) == S(F32, 0)
    with pytest.raises(ValueError, match="slice: dimension 0 of f32\\[5\\]: need 0 <= start "
                                         "\\(3\\) <= limit \\(2\\)"):
        infer("slice", S(F32, 5), start_indices=(3,), limit_indices=(2,), strides=(1,))
    with pytest.raises(ValueError, match="slice: stride 0 of dimension 0 must be positive"):
        infer("slice", S(F32, 5), start_indices=(0,), limit_indices=(2,), strides=(0,))
    with pytest.raises(ValueError, match="slice: attribute strides must have 1 entries"):
        infer("slice", S(F32, 5), start_indices=(0,), limit_indices=(2,), strides=(1, 1))


def test_dynamic_slice_and_update():
    idx = S(S32)
    assert infer("dynamic_slice", S(F32, 5, 4), idx, idx, slice_sizes=(2, 4)) == S(F32, 2, 4)
    assert infer("dynamic_update_slice", S(F32, 5, 4), S(F32, 2, 4), idx, idx) == S(F32, 5, 4)
    with pytest.raises(ValueError, match="dynamic_slice: expected 3 operands, got 2"):
        infer("dynamic_slice", S(F32, 5, 4), idx, slice_sizes=(2, 4))
    with pytest.raises(TypeError, match="dynamic_slice: start index 1 must be an integer "
                                        "scalar, got f32\\[\\]"):
        infer("dynamic_slice", S(F32, 5, 4), idx, S(F32), slice_sizes=(2, 4))
    with pytest.raises(ValueError, match="dynamic_slice: slice size 6 of dimension 0 must be "
                                         "in \\[0, 5\\]"):
        infer("dynamic_slice", S(F32, 5, 4), idx, idx, slice_sizes=(6, 4))
    with pytest.raises(TypeError, match="dynamic_slice: start indices must have one element "
                                        "type"):
        infer("dynamic_slice", S(F32, 5, 4), idx, S(np.int64), slice_sizes=(2, 4))
    with pytest.raises(ValueError, match="dynamic_update_slice: update f32\\[6,4\\] is larger"):
        infer("dynamic_update_slice", S(F32, 5, 4), S(F32, 6, 4), idx, idx)
    with pytest.raises(TypeError, match="dynamic_update_slice: update s32\\[2,4\\] must have "
                                        "the operand's element type"):
        infer("dynamic_update_slice", S(F32, 5, 4), S(S32, 2, 4), idx, idx)


def test_concatenate_and_pad():
    assert infer("concatenate", S(F32, 2, 3), S(F32, 4, 3), dimension=0) == S(F32, 6, 3)
    assert infer("pad", S(F32, 3, 2), S(F32), edge_padding_low=(1, -1),
                 edge_padding_high=(0, 2), interior_padding=(2, 0)) == S(F32, 8, 3)
    assert infer("pad", S(F32, 0), S(F32), edge_padding_low=(1,), edge_padding_high=(1,),
                 interior_padding=(3,)) == S(F32, 2)
    with pytest.raises(ValueError, match="concatenate: operands f32\\[2,3\\] and f32\\[4,2\\] "
                                         "differ outside dimension 0"):
        infer("concatenate", S(F32, 2, 3), S(F32, 4, 2), dimension=0)
    with pytest.raises(TypeError, match="concatenate: operands must have one element type"):
        infer("concatenate", S(F32, 2), S(S32, 2), dimension=0)
    with pytest.raises(ValueError, match="concatenate: dimension 1 out of range"):
        infer("concatenate", S(F32, 2), dimension=1)
    with pytest.raises(ValueError, match="concatenate: expected at least one operand"):
        infer("concatenate", dimension=0)
    with pytest.raises(TypeError, match="pad: the padding value f32\\[2\\] must be a scalar"):
        infer("pad", S(F32, 2), S(F32, 2), edge_padding_low=(0,), edge_padding_high=(0,),
              interior_padding=(0,))
    with pytest.raises(ValueError, match="pad: interior_padding -1 of dimension 0 is negative"):
        infer("pad", S(F32, 2), S(F32), edge_padding_low=(0,), edge_padding_high=(0,),
              interior_padding=(-1,))
    with pytest.raises(ValueError, match="pad: dimension 0 of f32\\[2\\] would have negative "
                                         "size -1"):
        infer("pad", S(F32, 2), S(F32), edge_padding_low=(-2,), edge_padding_high=(-1,),
              interior_padding=(0,))


# --------------------------------------------------------------------------- reduce, dot


def test_reduce():
    add = scalar_fn("add", [F32, F32])
    assert infer("reduce", S(F32, 2, 3, 4), S(F32), dimensions=(0, 2), calls=[add]) == \
        S(F32, 3)
    pair = scalar_fn("pair", [F32, S32, F32, S32], root_op="tuple")
    out = infer("reduce", S(F32, 5), S(S32, 5), S(F32), S(S32), dimensions=(0,), calls=[pair])
    assert out == Shape.tuple([S(F32), S(S32)])
    with pytest.raises(ValueError, match="reduce: expected N inputs then N init values, got 3"):
        infer("reduce", S(F32, 2), S(F32, 2), S(F32), dimensions=(0,), calls=[add])
    with pytest.raises(ValueError, match="reduce: init values must be scalars"):
        infer("reduce", S(F32, 2), S(F32, 1), dimensions=(0,), calls=[add])
    with pytest.raises(TypeError, match="reduce: body add takes \\(f32\\[\\], f32\\[\\]\\), "
                                        "expected \\(s32\\[\\], s32\\[\\]\\)"):
        infer("reduce", S(S32, 2), S(S32), dimensions=(0,), calls=[add])
    with pytest.raises(ValueError, match="reduce: dimensions \\(1,\\) has the dimension 1 out "
                                         "of range"):
        infer("reduce", S(F32, 2), S(F32), dimensions=(1,), calls=[add])
    with pytest.raises(ValueError, match="reduce: expected 1 called computation"):
        infer("reduce", S(F32, 2), S(F32), dimensions=(0,))
    to_int = scalar_fn("to_int", [F32, F32], root_op="convert", root_dtype=S32)
    with pytest.raises(TypeError, match="reduce: body to_int returns s32\\[\\], expected "
                                        "f32\\[\\]"):
        infer("reduce", S(F32, 2), S(F32), dimensions=(0,), calls=[to_int])


def test_dot_general():
    dn = dict(lhs_batching_dimensions=(0,), rhs_batching_dimensions=(0,),
              lhs_contracting_dimensions=(2,), rhs_contracting_dimensions=(1,))
    assert infer("dot_general", S(F32, 2, 3, 4), S(F32, 2, 4, 5), **dn) == S(F32, 2, 3, 5)
    assert infer("dot_general", S(np.int8, 2, 3, 4), S(np.int8, 2, 4, 5), given=S(S32, 2, 3, 5),
                 **dn) == S(S32, 2, 3, 5)
    outer = dict(lhs_batching_dimensions=(), rhs_batching_dimensions=(),
                 lhs_contracting_dimensions=(), rhs_contracting_dimensions=())
    assert infer("dot_general", S(F32, 2), S(F32, 3), **outer) == S(F32, 2, 3)
    with pytest.raises(ValueError, match="dot_general: contracting dimension 2 of "
                                         "f32\\[2,3,4\\] and 1 of f32\\[2,5,5\\] differ"):
        infer("dot_general", S(F32, 2, 3, 4), S(F32, 2, 5, 5), **dn)
    with pytest.raises(TypeError, match="dot_general: operands must have one element type"):
        infer("dot_general", S(F32, 2, 3, 4), S(S32, 2, 4, 5), **dn)
    with pytest.raises(ValueError, match="dot_general: lhs and rhs batching dimensions differ "
                                         "in number"):
        infer("dot_general", S(F32, 2, 3, 4), S(F32, 2, 4, 5),
              **{**dn, "rhs_batching_dimensions": ()})
    with pytest.raises(ValueError, match="dot_general: lhs batching \\(0,\\) and contracting "
                                         "\\(0,\\) dimensions overlap"):
        infer("dot_general", S(F32, 2, 3), S(F32, 2, 2), lhs_batching_dimensions=(0,),
              rhs_batching_dimensions=(0,), lhs_contracting_dimensions=(0,),
              rhs_contracting_dimensions=(1,))
    with pytest.raises(ValueError, match="dot_general: missing attribute "
                                         "'lhs_batching_dimensions'"):
        infer("dot_general", S(F32, 2), S(F32, 2), lhs_contracting_dimensions=(0,),
              rhs_contracting_dimensions=(0,))
    with pytest.raises(ValueError, match="dot_general: given result f32\\[3\\] must have the "
                                         "dimensions \\[2, 3, 5\\]"):
        infer("dot_general", S(F32, 2, 3, 4), S(F32, 2, 4, 5), given=S(F32, 3), **dn)


# --------------------------------------------------------------------------- gather, scatter

GATHER_SPEC = dict(offset_dims=(3, 4), collapsed_slice_dims=(1,), operand_batching_dims=(0,),
                   start_indices_batching_dims=(1,), start_index_map=(2, 1),
                   index_vector_dim=3, slice_sizes=(1, 1, 2, 2), indices_are_sorted=False)
GATHER_ROWS = dict(offset_dims=(1,), collapsed_slice_dims=(0,), operand_batching_dims=(),
                   start_indices_batching_dims=(), start_index_map=(0,), index_vector_dim=1,
                   slice_sizes=(1, 3), indices_are_sorted=False)


def test_gather():
    # The StableHLO spec's example, with batching dimensions.
    assert infer("gather", S(S32, 2, 3, 4, 2), S(np.int64, 2, 2, 3, 2), **GATHER_SPEC) == \
        S(S32, 2, 2, 3, 2, 2)
    assert infer("gather", S(F32, 5, 3), S(S32, 4, 1), **GATHER_ROWS) == S(F32, 4, 3)
    # index_vector_dim == rank(indices): an implicit trailing index vector of size 1.
    assert infer("gather", S(F32, 5, 3), S(S32, 4), **{**GATHER_ROWS, "index_vector_dim": 1}) \
        == S(F32, 4, 3)
    with pytest.raises(TypeError, match="gather: start indices must be integers"):
        infer("gather", S(F32, 5, 3), S(F32, 4, 1), **GATHER_ROWS)
    with pytest.raises(ValueError, match="gather: slice size of collapsed or batching "
                                         "dimension 0 must be at most 1, got 2"):
        infer("gather", S(F32, 5, 3), S(S32, 4, 1), **{**GATHER_ROWS, "slice_sizes": (2, 3)})
    with pytest.raises(ValueError, match="gather: slice size 4 of dimension 1 must be in "
                                         "\\[0, 3\\]"):
        infer("gather", S(F32, 5, 3), S(S32, 4, 1), **{**GATHER_ROWS, "slice_sizes": (1, 4)})
    with pytest.raises(ValueError, match="gather: start_index_map \\(0, 1\\) must have one "
                                         "entry per index vector component \\(1\\)"):
        infer("gather", S(F32, 5, 3), S(S32, 4, 1), **{**GATHER_ROWS,
                                                        "start_index_map": (0, 1)})
    with pytest.raises(ValueError, match="gather: offset_dims \\(\\) must have one entry per "
                                         "slice dimension"):
        infer("gather", S(F32, 5, 3), S(S32, 4, 1), **{**GATHER_ROWS, "offset_dims": ()})
    with pytest.raises(ValueError, match="gather: index_vector_dim 3 out of range"):
        infer("gather", S(F32, 5, 3), S(S32, 4, 1), **{**GATHER_ROWS, "index_vector_dim": 3})
    with pytest.raises(ValueError, match="gather: batching dimension 0 of s32\\[2,3,4,2\\] and "
                                         "1 of the indices"):
        infer("gather", S(S32, 2, 3, 4, 2), S(np.int64, 2, 5, 3, 2), **GATHER_SPEC)
    with pytest.raises(ValueError, match="gather: missing attribute 'offset_dims'"):
        infer("gather", S(F32, 5, 3), S(S32, 4, 1),
              **{k: v for k, v in GATHER_ROWS.items() if k != "offset_dims"})


SCATTER_SPEC = dict(update_window_dims=(3, 4), inserted_window_dims=(1,),
                    input_batching_dims=(0,), scatter_indices_batching_dims=(1,),
                    scatter_dims_to_operand_dims=(2, 1), index_vector_dim=3,
                    indices_are_sorted=False, unique_indices=False)
SCATTER_ROWS = dict(update_window_dims=(1,), inserted_window_dims=(0,), input_batching_dims=(),
                    scatter_indices_batching_dims=(), scatter_dims_to_operand_dims=(0,),
                    index_vector_dim=1, indices_are_sorted=False, unique_indices=False)


def test_scatter():
    add64 = scalar_fn("add64", [np.int64, np.int64])
    assert infer("scatter", S(np.int64, 2, 3, 4, 2), S(np.int64, 2, 2, 3, 2),
                 S(np.int64, 2, 2, 3, 2, 2), calls=[add64], **SCATTER_SPEC) == \
        S(np.int64, 2, 3, 4, 2)
    add = scalar_fn("add", [F32, F32])
    assert infer("scatter", S(F32, 5, 3), S(S32, 4, 1), S(F32, 4, 3), calls=[add],
                 **SCATTER_ROWS) == S(F32, 5, 3)
    with pytest.raises(ValueError, match="scatter: the scatter dimensions of the updates "
                                         "f32\\[3,3\\] must match the indices"):
        infer("scatter", S(F32, 5, 3), S(S32, 4, 1), S(F32, 3, 3), calls=[add], **SCATTER_ROWS)
    with pytest.raises(ValueError, match="scatter: update window dimension 1 of f32\\[4,4\\] "
                                         "exceeds the operand's bound 3"):
        infer("scatter", S(F32, 5, 3), S(S32, 4, 1), S(F32, 4, 4), calls=[add], **SCATTER_ROWS)
    with pytest.raises(TypeError, match="scatter: updates s32\\[4,3\\] must have the "
                                        "operand's element type"):
        infer("scatter", S(F32, 5, 3), S(S32, 4, 1), S(S32, 4, 3), calls=[add], **SCATTER_ROWS)
    with pytest.raises(TypeError, match="scatter: update computation add64 takes"):
        infer("scatter", S(F32, 5, 3), S(S32, 4, 1), S(F32, 4, 3), calls=[add64],
              **SCATTER_ROWS)
    with pytest.raises(ValueError, match="scatter: the operand f32\\[5,3\\] must have "
                                         "len\\(update_window_dims\\)"):
        infer("scatter", S(F32, 5, 3), S(S32, 4, 1), S(F32, 4, 3), calls=[add],
              **{**SCATTER_ROWS, "inserted_window_dims": ()})
    with pytest.raises(TypeError, match="scatter: attribute unique_indices must be a bool"):
        infer("scatter", S(F32, 5, 3), S(S32, 4, 1), S(F32, 4, 3), calls=[add],
              **{**SCATTER_ROWS, "unique_indices": 1})


# --------------------------------------------------------------------------- sort, control flow


def test_sort():
    less = scalar_fn("less", [F32, F32, S32, S32], root_op="compare")
    assert infer("sort", S(F32, 3, 4), S(S32, 3, 4), dimension=1, is_stable=True,
                 calls=[less]) == Shape.tuple([S(F32, 3, 4), S(S32, 3, 4)])
    with pytest.raises(TypeError, match="sort: comparator less takes"):
        infer("sort", S(F32, 3, 4), dimension=1, calls=[less])
    with pytest.raises(ValueError, match="sort: dimension 2 out of range"):
        infer("sort", S(F32, 3, 4), S(S32, 3, 4), dimension=2, calls=[less])
    with pytest.raises(ValueError, match="sort: operands must have the same dimensions"):
        infer("sort", S(F32, 3, 4), S(S32, 4, 3), dimension=1, calls=[less])
    add = scalar_fn("add", [F32, F32])
    with pytest.raises(TypeError, match="sort: comparator add must return pred\\[\\], got "
                                        "f32\\[\\]"):
        infer("sort", S(F32, 3), dimension=0, calls=[add])


def _loop_fns():
    m = Module("loops")
    b = Builder(m, "cond")
    i = b.parameter(0, S(S32))
    b.parameter(1, S(F32, 3))
    cond = b.build(b.op("compare", i, b.constant(10, np.int32), comparison_direction="LT"))
    b = Builder(m, "body")
    i = b.parameter(0, S(S32))
    x = b.parameter(1, S(F32, 3))
    body = b.build(b.op("tuple", b.op("add", i, b.constant(1, np.int32)), b.op("add", x, x)))
    return cond, body


def test_while():
    cond, body = _loop_fns()
    state = Shape.tuple([S(S32), S(F32, 3)])
    assert infer("while", S(S32), S(F32, 3), calls=[cond, body]) == state
    with pytest.raises(TypeError, match="while: condition cond takes \\(s32\\[\\], "
                                        "f32\\[3\\]\\), expected \\(s32\\[\\], f32\\[4\\]\\)"):
        infer("while", S(S32), S(F32, 4), calls=[cond, body])
    with pytest.raises(TypeError, match="while: condition body must return pred\\[\\]"):
        infer("while", S(S32), S(F32, 3), calls=[body, body])
    with pytest.raises(ValueError, match="while: expected 2 called computation"):
        infer("while", S(S32), S(F32, 3), calls=[cond])


def test_case_call_fusion_custom_call():
    add = scalar_fn("add", [F32, F32])
    sub = scalar_fn("sub", [F32, F32], root_op="subtract")
    assert infer("case", S(S32), S(F32), S(F32), calls=[add, sub]) == S(F32)
    assert infer("call", S(F32), S(F32), calls=[add]) == S(F32)
    assert infer("fusion", S(F32), S(F32), calls=[add], kind="loop") == S(F32)
    assert infer("custom_call", S(F32, 3), given=S(F32, 3, 3), call_target_name="lapack_potrf",
                 lower=True) == S(F32, 3, 3)
    with pytest.raises(TypeError, match="case: the index must be an s32 scalar, got "
                                        "s64\\[\\]"):
        infer("case", S(np.int64), S(F32), S(F32), calls=[add, sub])
    to_int = scalar_fn("to_int", [F32, F32], root_op="convert", root_dtype=S32)
    with pytest.raises(TypeError, match="case: branches return different shapes"):
        infer("case", S(S32), S(F32), S(F32), calls=[add, to_int])
    with pytest.raises(ValueError, match="case: expected at least one called computation"):
        infer("case", S(S32))
    with pytest.raises(TypeError, match="call: callee add takes"):
        infer("call", S(F32), calls=[add])
    with pytest.raises(ValueError, match="fusion: kind must be one of"):
        infer("fusion", S(F32), S(F32), calls=[add], kind="fast")
    with pytest.raises(ValueError, match="custom_call: call_target_name must be a non-empty "
                                         "string"):
        infer("custom_call", S(F32), given=S(F32))
    with pytest.raises(ValueError, match="custom_call potrf: the result shape must be given"):
        infer("custom_call", S(F32), call_target_name="potrf")


def test_unknown_opcode():
    with pytest.raises(ValueError, match="no shape rule for opcode 'frobnicate'"):
        infer("frobnicate", S(F32))
