"""Every op record lowers to a module that verifies and survives print -> parse -> print."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.compiler.lower import lower_closed_jaxpr
from ember.compiler.parser import parse_module
from ember.compiler.verifier import verify_module
from tests.op_records import ALL_RECORDS, make_args


@pytest.mark.parametrize("rec", ALL_RECORDS, ids=[r.name for r in ALL_RECORDS])
def test_lower_verify_roundtrip(rec):
    dtype, shapes = rec.dtypes[0], rec.shapes[0]
    args = [jnp.asarray(a) for a in make_args(rec, dtype, shapes)]
    closed = ember.make_jaxpr(rec.fn)(*args)
    lowered = lower_closed_jaxpr(closed)
    module = lowered.module
    verify_module(module)
    text = module.to_text()
    again = parse_module(text)
    verify_module(again)
    assert again.to_text() == text
    assert module.clone().to_text() == text
    # The entry takes the jaxpr's inputs (then hoisted constants) and returns their tuple.
    params = again.entry.parameter_shapes
    assert [tuple(p.dims) for p in params[:len(args)]] == [np.shape(a) for a in args]
    assert again.entry.root.shape.is_tuple
    assert len(again.entry.root.shape.tuple_shapes) == len(closed.jaxpr.outvars)
