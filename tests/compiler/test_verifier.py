"""The verifier accepts well-formed modules and names the place of each broken invariant."""

import numpy as np
import pytest

from ember.compiler.hlo import Builder, Instruction, Module, Shape
from ember.compiler.verifier import HloVerifierError, verify_module
from tests.compiler.test_printer_parser import build_every_op_module

F32 = np.dtype(np.float32)


def S(dtype, *dims):
    return Shape(np.dtype(dtype), dims)


def small_module():
    """%add.3 (a reduce body) and an entry %main that reduces with it."""
    m = Module("m")
    b = Builder(m, "add_fn")
    body = b.build(b.op("add", b.parameter(0, S(F32)), b.parameter(1, S(F32))))
    b = Builder(m, "main")
    x = b.parameter(0, S(F32, 3))
    r = b.op("reduce", x, b.constant(0.0, np.float32), dimensions=(0,), calls=[body])
    n = b.op("negate", r)
    b.build(b.op("tuple", n), entry=True)
    return m


def test_well_formed_modules_verify():
    verify_module(small_module())
    verify_module(build_every_op_module())


def test_error_is_a_value_error():
    assert issubclass(HloVerifierError, ValueError)


def _main(m):
    return {i.opcode: i for i in m.entry.instructions}


def test_duplicate_instruction_name():
    m = small_module()
    _main(m)["negate"].name = m.computations[0].root.name
    with pytest.raises(HloVerifierError, match="computation %main, instruction %add.3: the "
                                               "name is also used in computation %add_fn"):
        verify_module(m)


def test_duplicate_computation_name():
    m = small_module()
    m.computations[0].name = "main"
    with pytest.raises(HloVerifierError, match="computation name %main is used twice"):
        verify_module(m)


def test_operand_defined_later():
    m = small_module()
    insts = m.entry.instructions
    neg = _main(m)["negate"]
    insts.remove(neg)
    insts.insert(1, neg)
    with pytest.raises(HloVerifierError, match="computation %main, instruction %negate.7: "
                                               "operand 0 \\(%reduce.6\\) is not defined "
                                               "earlier"):
        verify_module(m)


def test_operand_from_another_computation():
    m = small_module()
    _main(m)["negate"].operands[0] = m.computations[0].root
    with pytest.raises(HloVerifierError, match="instruction %negate.7: operand 0 \\(%add.3\\) "
                                               "is not defined earlier in this computation"):
        verify_module(m)


def test_instruction_listed_twice():
    m = small_module()
    m.entry.instructions.insert(-1, _main(m)["negate"])
    with pytest.raises(HloVerifierError, match="instruction %negate.7: listed twice"):
        verify_module(m)


def test_root_outside_computation():
    m = small_module()
    m.entry.root = m.computations[0].root
    with pytest.raises(HloVerifierError, match="computation %main: the root %add.3 is not one "
                                               "of its instructions"):
        verify_module(m)


def test_parameter_numbering():
    m = small_module()
    m.computations[0].instructions[1].attrs["index"] = 2
    with pytest.raises(HloVerifierError, match="computation %add_fn: parameters must be "
                                               "numbered 0..1, got \\[0, 2\\]"):
        verify_module(m)
    m.computations[0].instructions[1].attrs["index"] = 0
    with pytest.raises(HloVerifierError, match="got \\[0, 0\\]"):
        verify_module(m)


def test_shape_differs_from_inference():
    m = small_module()
    _main(m)["negate"].shape = S(F32, 2)
    with pytest.raises(HloVerifierError, match="instruction %negate.7: shape f32\\[2\\] "
                                               "differs from the inferred f32\\[\\]"):
        verify_module(m)


def test_shape_inference_error_is_reported_with_its_place():
    m = small_module()
    _main(m)["reduce"].attrs["dimensions"] = (1,)
    with pytest.raises(HloVerifierError, match="computation %main, instruction %reduce.6: "
                                               "reduce: dimensions \\(1,\\) has the "
                                               "dimension 1 out of range"):
        verify_module(m)


def test_called_computation_outside_module():
    m = small_module()
    other = small_module()
    _main(m)["reduce"].calls = [other.computations[0]]
    with pytest.raises(HloVerifierError, match="instruction %reduce.6: called computation "
                                               "%add_fn is not in the module before"):
        verify_module(m)


def test_called_computation_after_caller():
    m = small_module()
    m.computations.reverse()  # main, then the add_fn it calls
    with pytest.raises(HloVerifierError, match="instruction %reduce.6: called computation "
                                               "%add_fn is not in the module before"):
        verify_module(m)


def test_unknown_opcode():
    m = small_module()
    _main(m)["negate"].opcode = "frobnicate"
    with pytest.raises(HloVerifierError, match="instruction %negate.7: unknown opcode "
                                               "'frobnicate'"):
        verify_module(m)


def test_attribute_must_be_plain():
    m = small_module()
    _main(m)["reduce"].attrs["dimensions"] = [0]
    with pytest.raises(HloVerifierError, match="attribute dimensions=\\[0\\] is not a plain "
                                               "value"):
        verify_module(m)
    _main(m)["reduce"].attrs["dimensions"] = (np.int64(0),)
    with pytest.raises(HloVerifierError, match="is not a plain value"):
        verify_module(m)


def test_bad_names():
    m = small_module()
    _main(m)["negate"].name = ""
    with pytest.raises(HloVerifierError, match="instruction %: bad name ''"):
        verify_module(m)
    m = small_module()
    m.computations[0].name = "two\nlines"
    with pytest.raises(HloVerifierError, match="bad name"):
        verify_module(m)


def test_constant_value_must_match_shape():
    m = Module("m")
    b = Builder(m, "main")
    c = b.constant(np.zeros(3, np.float32))
    b.build(c, entry=True)
    verify_module(m)
    c.attrs["value"] = np.zeros(4, np.float32)
    with pytest.raises(HloVerifierError, match="instruction %constant.1: shape f32\\[3\\] "
                                               "differs from the inferred f32\\[4\\]"):
        verify_module(m)


def test_empty_module():
    with pytest.raises(HloVerifierError, match="module empty: no computations"):
        verify_module(Module("empty"))


def test_hand_made_instruction_without_shape_class():
    m = small_module()
    neg = _main(m)["negate"]
    m.entry.instructions[m.entry.instructions.index(neg)] = Instruction(
        "negate", neg.operands, "f32[]", {}, (), neg.name)
    m.entry.root.operands[0] = m.entry.instructions[-2]
    with pytest.raises(HloVerifierError, match="shape 'f32\\[\\]' is not a Shape"):
        verify_module(m)
