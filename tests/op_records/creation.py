"""Records for the array-creation functions (static arguments are baked into the lambdas)."""

import numpy as np

import ember.numpy as jnp
from tests.op_records.base import ALL, FLOATS, NUMERIC, OpRecord

S1 = (((),), ((0,),), ((5,),), ((2, 3),), ((1, 4, 3),))
S2 = (((2, 3),), ((0, 3),), ((1, 4, 3),), ((3, 3),), ((4, 2),))
SCALAR = (((),),)
F32 = FLOATS[:1]  # for functions whose output does not depend on the argument


def _rec(name, fn, ref, shapes, dtypes=ALL, **kw):
    return OpRecord(name, fn, ref, dtypes, shapes, **kw)


RECORDS = [
    # ---- like / fill functions (traced arguments stay primitives)
    _rec("zeros_like", jnp.zeros_like, np.zeros_like, S1,
         out_dtype=lambda d: d),
    _rec("ones_like", jnp.ones_like, np.ones_like, S1, out_dtype=lambda d: d),
    _rec("empty_like_shape", lambda x: jnp.empty_like(x, shape=(2, 2)) * 0,
         lambda x: np.zeros((2, 2), x.dtype), S1[:3], dtypes=NUMERIC),
    _rec("full_like", lambda x: jnp.full_like(x, 1), lambda x: np.full_like(x, 1), S1),
    _rec("full_like_dtype_shape", lambda x: jnp.full_like(x, 2, dtype=jnp.int8, shape=(3,)),
         lambda x: np.full((3,), 2, np.int8), S1[:3], out_dtype=lambda d: np.dtype("int8")),
    _rec("full_like_traced_fill", lambda x, y: jnp.full_like(x, y),
         lambda x, y: np.full_like(x, y), (((2, 3), ()), ((0,), ()), ((), ())),
         differentiable=True),
    _rec("full_traced_fill", lambda x: jnp.full((2, 3), x), lambda x: np.full((2, 3), x),
         SCALAR, out_dtype=lambda d: d, differentiable=True),
    _rec("full_array_fill", lambda x: jnp.full((2,) + x.shape, x),
         lambda x: np.full((2,) + x.shape, x), S1),
    _rec("zeros", lambda x: jnp.zeros((2,) + x.shape, x.dtype),
         lambda x: np.zeros((2,) + x.shape, x.dtype), S1[:3], out_dtype=lambda d: d),
    _rec("ones", lambda x: jnp.ones(x.shape, dtype=x.dtype),
         lambda x: np.ones(x.shape, x.dtype), S1[:3]),
    _rec("empty", lambda x: jnp.empty(x.shape, x.dtype) * 0,
         lambda x: np.zeros(x.shape, x.dtype), S1[:3], dtypes=NUMERIC),
    _rec("array_list_of_tracers", lambda x, y: jnp.array([x, y, x]),
         lambda x, y: np.array([x, y, x]), (((), ()), ((2,), (2,)), ((0,), (0,)))),
    _rec("array_nested_list", lambda x: jnp.array([[x, x], [x, x]]),
         lambda x: np.array([[x, x], [x, x]]), (((),), ((3,),))),
    _rec("asarray", jnp.asarray, np.asarray, S1, differentiable=True),
    _rec("copy", jnp.copy, np.copy, S1, differentiable=True),
    # ---- ranges (static arguments)
    _rec("arange", lambda x: jnp.arange(7), lambda x: np.arange(7), SCALAR, dtypes=F32,
         out_dtype=lambda d: np.dtype("int32")),
    _rec("arange_dtype", lambda x: jnp.arange(2, 12, 3, dtype=x.dtype),
         lambda x: np.arange(2, 12, 3).astype(x.dtype), SCALAR, dtypes=NUMERIC,
         out_dtype=lambda d: d),
    _rec("arange_float", lambda x: jnp.arange(-1.0, 1.0, 0.25),
         lambda x: np.arange(-1.0, 1.0, 0.25, dtype=np.float32), SCALAR, dtypes=F32,
         out_dtype=lambda d: np.dtype("float32")),
    _rec("linspace", lambda x: jnp.linspace(-1, 3, 7), lambda x: np.linspace(-1, 3, 7),
         SCALAR, dtypes=F32, out_dtype=lambda d: np.dtype("float32")),
    _rec("linspace_no_endpoint_int", lambda x: jnp.linspace(0, 10, 6, endpoint=False,
                                                           dtype=x.dtype),
         lambda x: np.linspace(0, 10, 6, endpoint=False).astype(x.dtype), SCALAR,
         dtypes=NUMERIC),
    _rec("linspace_traced", lambda x, y: jnp.linspace(x, y, 5),
         lambda x, y: np.linspace(x, y, 5), (((), ()), ((3,), (3,)), ((2, 1), (1, 3))),
         dtypes=FLOATS[:1], tol=1e-5, differentiable=True),
    _rec("linspace_traced_axis", lambda x, y: jnp.linspace(x, y, 4, endpoint=False, axis=-1),
         lambda x, y: np.linspace(x, y, 4, endpoint=False, axis=-1),
         (((2,), (2,)), ((2, 3), (3,))), dtypes=FLOATS, tol=3e-2, differentiable=True),
    _rec("logspace", lambda x: jnp.logspace(0, 3, 4), lambda x: np.logspace(0, 3, 4), SCALAR,
         dtypes=F32, tol=1e-5),
    _rec("logspace_base2", lambda x: jnp.logspace(1, 4, 5, base=2.0, endpoint=False),
         lambda x: np.logspace(1, 4, 5, base=2.0, endpoint=False), SCALAR, dtypes=F32, tol=1e-5),
    _rec("geomspace", lambda x: jnp.geomspace(1, 1000, 4), lambda x: np.geomspace(1, 1000, 4),
         SCALAR, dtypes=F32, tol=1e-5),
    _rec("geomspace_negative", lambda x: jnp.geomspace(-2, -32, 5),
         lambda x: np.geomspace(-2, -32, 5), SCALAR, dtypes=F32, tol=1e-5),
    # ---- matrices
    _rec("eye", lambda x: jnp.eye(3, 4, 1, dtype=x.dtype),
         lambda x: np.eye(3, 4, 1).astype(x.dtype), SCALAR, out_dtype=lambda d: d),
    _rec("eye_k_neg", lambda x: jnp.eye(4, k=-2), lambda x: np.eye(4, k=-2), SCALAR, dtypes=F32),
    _rec("identity", lambda x: jnp.identity(3, x.dtype),
         lambda x: np.identity(3).astype(x.dtype), SCALAR),
    _rec("tri", lambda x: jnp.tri(3, 5, -1, dtype=x.dtype),
         lambda x: np.tri(3, 5, -1).astype(x.dtype), SCALAR),
    _rec("tril", jnp.tril, np.tril, S2, differentiable=True),
    _rec("tril_k", lambda x: jnp.tril(x, k=1), lambda x: np.tril(x, k=1), S2,
         differentiable=True),
    _rec("triu", jnp.triu, np.triu, S2, differentiable=True),
    _rec("triu_k", lambda x: jnp.triu(x, -1), lambda x: np.triu(x, -1), S2,
         differentiable=True),
    _rec("diag_1d", jnp.diag, np.diag, (((0,),), ((1,),), ((4,),)), differentiable=True),
    _rec("diag_1d_k", lambda x: jnp.diag(x, 2), lambda x: np.diag(x, 2),
         (((0,),), ((3,),)), differentiable=True),
    _rec("diag_1d_kneg", lambda x: jnp.diag(x, -1), lambda x: np.diag(x, -1), (((3,),),),
         differentiable=True),
    _rec("diag_2d", jnp.diag, np.diag, S2[:2] + (((3, 3),), ((4, 2),)), differentiable=True),
    _rec("diag_2d_k", lambda x: jnp.diag(x, 1), lambda x: np.diag(x, 1),
         (((2, 3),), ((4, 2),), ((3, 3),)), differentiable=True),
    _rec("diag_2d_kneg", lambda x: jnp.diag(x, -2), lambda x: np.diag(x, -2),
         (((2, 3),), ((4, 2),), ((3, 3),)), differentiable=True),
    _rec("diagflat", jnp.diagflat, np.diagflat, (((2, 2),), ((3,),), ((),)),
         differentiable=True),
    _rec("diagonal", lambda x: jnp.diagonal(x, 1, 2, 0), lambda x: np.diagonal(x, 1, 2, 0),
         (((2, 3, 4),), ((1, 0, 2),), ((3, 2, 3),)), differentiable=True),
    _rec("meshgrid_xy", jnp.meshgrid, np.meshgrid, (((2,), (3,)), ((0,), (4,)), ((1,), (1,)))),
    _rec("meshgrid_ij", lambda x, y: jnp.meshgrid(x, y, x, indexing="ij"),
         lambda x, y: np.meshgrid(x, y, x, indexing="ij"), (((2,), (3,)), ((0,), (4,)))),
    _rec("meshgrid_sparse", lambda x, y: jnp.meshgrid(x, y, sparse=True),
         lambda x, y: np.meshgrid(x, y, sparse=True), (((2,), (3,)),)),
]
