"""Records for lax.with_sharding_constraint (the identity on values, on ember's one device)."""

import numpy as np

import ember
from ember import lax
from ember.sharding import AxisType, NamedSharding, PartitionSpec
from tests.op_records.base import OpRecord

F32 = np.dtype("float32")
I32 = np.dtype("int32")
_MESH = ember.make_mesh((1,), ("x",), axis_types=(AxisType.Auto,))

RECORDS = [
    OpRecord("with_sharding_constraint",
             lambda x: lax.with_sharding_constraint(x, NamedSharding(_MESH, PartitionSpec("x"))),
             lambda x: x, (F32, I32), (((4,),), ((2, 3),)), differentiable=True, kind="lax"),
]
