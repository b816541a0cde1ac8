"""Records for the elementwise ember.numpy functions (ufuncs)."""

import numpy as np

import ember.numpy as jnp
from tests.op_records.base import ALL, BINARY_SHAPES, FLOATS, NUMERIC, UNARY_SHAPES, OpRecord

RECORDS = [
    OpRecord("add", jnp.add, np.add, NUMERIC, BINARY_SHAPES, differentiable=True),
    OpRecord("subtract", jnp.subtract, np.subtract, FLOATS, BINARY_SHAPES, differentiable=True),
    OpRecord("multiply", jnp.multiply, np.multiply, NUMERIC, BINARY_SHAPES,
             differentiable=True),
    OpRecord("true_divide", jnp.true_divide, np.true_divide, FLOATS, BINARY_SHAPES,
             rng="nonzero", differentiable=True),
    OpRecord("maximum", jnp.maximum, np.maximum, ALL, BINARY_SHAPES, differentiable=True),
    OpRecord("minimum", jnp.minimum, np.minimum, ALL, BINARY_SHAPES, differentiable=True),
    OpRecord("equal", jnp.equal, np.equal, ALL, BINARY_SHAPES),
    OpRecord("less", jnp.less, np.less, NUMERIC, BINARY_SHAPES),
    OpRecord("negative", jnp.negative, np.negative, FLOATS, UNARY_SHAPES, differentiable=True),
    OpRecord("exp", jnp.exp, np.exp, FLOATS, UNARY_SHAPES, differentiable=True),
    OpRecord("log", jnp.log, np.log, FLOATS, UNARY_SHAPES, rng="positive",
             differentiable=True),
    OpRecord("sin", jnp.sin, np.sin, FLOATS, UNARY_SHAPES, differentiable=True),
    OpRecord("cos", jnp.cos, np.cos, FLOATS, UNARY_SHAPES, differentiable=True),
]
