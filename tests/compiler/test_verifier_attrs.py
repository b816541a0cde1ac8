"""Every opcode's attributes: a missing or malformed one is a clear error naming the op and
the attribute (the verifier's ``HloVerifierError``, the builder's and the parser's
``ValueError``/``TypeError``), never a ``KeyError`` later in a pass or a backend.

The table lists each opcode's required and optional attributes; a test checks that it covers
every opcode the IR knows, so a new opcode must be added here.
"""

from __future__ import annotations

import numpy as np
import pytest

from ember.compiler.hlo import OPCODES, Builder, Module, Shape
from ember.compiler.parser import parse_module
from ember.compiler.verifier import HloVerifierError, verify_module
from tests.compiler.test_printer_parser import build_every_op_module

# opcode -> (required attributes, optional attributes)
ATTRIBUTES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "parameter": (("index",), ()),
    "constant": (("value",), ()),
    "iota": (("iota_dimension",), ()),
    "get_tuple_element": (("index",), ()),
    "broadcast_in_dim": (("broadcast_dimensions",), ()),
    "transpose": (("permutation",), ()),
    "slice": (("start_indices", "limit_indices", "strides"), ()),
    "dynamic_slice": (("slice_sizes",), ()),
    "concatenate": (("dimension",), ()),
    "pad": (("edge_padding_low", "edge_padding_high", "interior_padding"), ()),
    "reverse": (("dimensions",), ()),
    "reduce": (("dimensions",), ()),
    "reduce_window": (("window_dimensions",),
                      ("window_strides", "base_dilations", "window_dilations", "padding")),
    "reduce_precision": (("exponent_bits", "mantissa_bits"), ()),
    "dot_general": (("lhs_batching_dimensions", "rhs_batching_dimensions",
                     "lhs_contracting_dimensions", "rhs_contracting_dimensions"), ()),
    "gather": (("index_vector_dim", "offset_dims", "collapsed_slice_dims",
                "operand_batching_dims", "start_indices_batching_dims", "start_index_map",
                "slice_sizes"), ("indices_are_sorted",)),
    "scatter": (("index_vector_dim", "update_window_dims", "inserted_window_dims",
                 "input_batching_dims", "scatter_indices_batching_dims",
                 "scatter_dims_to_operand_dims"), ("indices_are_sorted", "unique_indices")),
    "sort": (("dimension",), ("is_stable",)),
    "compare": (("comparison_direction",), ("compare_type",)),
    "fusion": (("kind",), ()),
    "custom_call": (("call_target_name",), ("has_side_effect",)),  # + the target's own
}
NO_ATTRIBUTES = OPCODES - set(ATTRIBUTES)  # elementwise ops, tuple, while, case, call, ...

# Values no required attribute accepts (a custom call's target name is any non-empty string).
MALFORMED = [None, 1.5, "bad", ((0, 1, 2),)]


def _one_of_each() -> tuple[Module, dict]:
    module = build_every_op_module()
    first = {}
    for comp in module.computations:
        for inst in comp.instructions:
            first.setdefault(inst.opcode, inst)
    return module, first


def _with(module: Module, opcode: str, attr: str):
    """An ``opcode`` instruction of ``module`` that has ``attr`` (given False if none has)."""
    insts = [i for c in module.computations for i in c.instructions if i.opcode == opcode]
    for inst in insts:
        if attr in inst.attrs:
            return inst
    insts[0].attrs[attr] = False
    return insts[0]


def _cases(kind: str) -> list[tuple[str, str]]:
    return [(op, a) for op, (req, opt) in sorted(ATTRIBUTES.items())
            for a in (req if kind == "required" else opt)]


def test_table_covers_every_opcode():
    _, first = _one_of_each()
    assert set(first) == OPCODES  # the module holds one of each
    for op in NO_ATTRIBUTES:
        assert not first[op].attrs, op
    for op, inst in first.items():
        required, optional = ATTRIBUTES.get(op, ((), ()))
        if op != "custom_call":  # (the test target there has attributes of its own)
            assert set(required) <= set(inst.attrs) <= set(required) | set(optional), op


@pytest.mark.parametrize("opcode, attr", _cases("required"))
def test_missing_required_attribute_is_named(opcode, attr):
    module, first = _one_of_each()
    del first[opcode].attrs[attr]
    with pytest.raises(HloVerifierError, match=rf"{opcode}.*\b{attr}\b"):
        verify_module(module)


@pytest.mark.parametrize("opcode, attr", _cases("required"))
@pytest.mark.parametrize("value", MALFORMED, ids=repr)
def test_malformed_required_attribute_is_named(opcode, attr, value):
    if attr == "call_target_name" and value == "bad":
        pytest.skip("any non-empty target name is well-formed")
    module, first = _one_of_each()
    first[opcode].attrs[attr] = value
    with pytest.raises(HloVerifierError, match=rf"instruction %{first[opcode].name}: "
                                               rf"(custom_call|{opcode})"):
        verify_module(module)


@pytest.mark.parametrize("opcode, attr", _cases("optional"))
def test_missing_optional_attribute_reads_as_its_default(opcode, attr):
    module, _ = _one_of_each()
    inst = _with(module, opcode, attr)
    del inst.attrs[attr]
    try:
        verify_module(module)
    except HloVerifierError as e:  # only where the default gives another result shape
        assert f"instruction %{inst.name}: shape" in str(e) and "inferred" in str(e)


@pytest.mark.parametrize("opcode, attr", _cases("optional"))
def test_malformed_optional_attribute_is_named(opcode, attr):
    module, first = _one_of_each()
    first[opcode].attrs[attr] = "bad"
    with pytest.raises(HloVerifierError, match=rf"{opcode}.*\b{attr}\b"):
        verify_module(module)


# --------------------------------------------------------------------------- the reported bugs

TEXT = """HloModule m

ENTRY %main (x: f32[4,2], i: s32[]) -> {shape} {{
  %x = f32[4,2] parameter(0)
  %i = s32[] parameter(1)
  ROOT %r = {shape} {op}
}}
"""


@pytest.mark.parametrize("op, shape, attr", [
    ("dynamic_slice(%x, %i, %i)", "f32[2,2]", "slice_sizes"),
    ("transpose(%x)", "f32[2,4]", "permutation"),
])
def test_parser_rejects_what_a_backend_would_crash_on(op, shape, attr):
    # (These used to parse, and the backends then failed with a KeyError.)
    with pytest.raises(ValueError, match=rf"line 6.*%r: \w+: missing attribute '{attr}'"):
        parse_module(TEXT.format(op=op, shape=shape))
    good = {"slice_sizes": ", slice_sizes={2,2}", "permutation": ", permutation={1,0}"}[attr]
    parse_module(TEXT.format(op=op + good, shape=shape))


def test_parser_rejects_a_declared_shape_the_operands_do_not_give():
    with pytest.raises(ValueError, match=r"%r is declared f32\[4,2\], its operands and "
                                         r"attributes give f32\[2,4\]"):
        parse_module(TEXT.format(op="transpose(%x), permutation={1,0}", shape="f32[4,2]"))


@pytest.mark.parametrize("attrs, message", [
    ({"slice_sizes": (2,)}, "attribute slice_sizes must have 2 entries"),
    ({"slice_sizes": (2, 9)}, "slice size 9 of dimension 1"),
    ({}, "missing attribute 'slice_sizes'"),
])
def test_builder_rejects_malformed_dynamic_slice(attrs, message):
    b = Builder(Module("m"), "main")
    x = b.parameter(0, Shape(np.float32, (4, 2)))
    i = b.parameter(1, Shape(np.int32, ()))
    with pytest.raises(ValueError, match=f"dynamic_slice: {message}"):
        b.op("dynamic_slice", x, i, i, **attrs)


# --------------------------------------------------------------------------- custom calls


def _custom_call(shape: Shape, **attrs):
    b = Builder(Module("m"), "main")
    x = b.parameter(0, Shape(np.float32, (3, 5)))
    return b.op("custom_call", x, shape=shape, **attrs)


TOP_K = Shape.tuple([Shape(np.float32, (3, 2)), Shape(np.int32, (3, 2))])


@pytest.mark.parametrize("attrs, shape, error, message", [
    ({}, TOP_K, ValueError, "missing attribute 'k'"),
    ({"k": 2.0}, TOP_K, TypeError, "attribute k must be an int"),
    ({"k": 6}, TOP_K, ValueError, r"k=6 must be in \[0, last dimension\]"),
    ({"k": 3}, TOP_K, TypeError, r"result \(f32\[3,2\], s32\[3,2\]\) must be"),
])
def test_top_k_custom_call_attributes(attrs, shape, error, message):
    with pytest.raises(error, match=rf"custom_call ember.top_k: {message}"):
        _custom_call(shape, call_target_name="ember.top_k", **attrs)
    _custom_call(TOP_K, call_target_name="ember.top_k", k=2)


@pytest.mark.parametrize("attrs, error, message", [
    ({}, ValueError, "missing attribute 'callback_id'"),
    ({"callback_id": -1}, ValueError, "callback_id must be non-negative"),
    ({"callback_id": 0, "has_side_effect": "yes"}, TypeError,
     "attribute has_side_effect must be a bool"),
])
def test_host_callback_custom_call_attributes(attrs, error, message):
    out = Shape.tuple([Shape(np.float32, (3, 5))])
    with pytest.raises(error, match=rf"custom_call ember.host_callback: {message}"):
        _custom_call(out, call_target_name="ember.host_callback", **attrs)
