"""Records for ember.nn (references are NumPy formulas in float64)."""

from math import erf

import numpy as np

from ember import nn
from tests.op_records.base import FLOATS, OpRecord

F32 = (np.dtype("float32"),)
U = (((),), ((5,),), ((2, 3),))
ROWS = (((5,),), ((2, 3),), ((2, 0),))


def _r(name, fn, ref, dtypes=F32, shapes=U, diff=True, **kw):
    return OpRecord("nn." + name, fn, ref, dtypes, shapes, differentiable=diff, kind="nn", **kw)


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _softplus(x):
    return np.logaddexp(x, 0)


def _lse(x, axis=-1, keepdims=True):
    m = np.max(x, axis=axis, keepdims=True) if x.size else 0
    return np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m


def _softmax(x):
    e = np.exp(x - (np.max(x, -1, keepdims=True) if x.size else 0))
    return e / e.sum(-1, keepdims=True)


def _gelu_exact(x):
    return x * 0.5 * (1 + np.vectorize(erf, otypes=[np.float64])(x / np.sqrt(2)))


def _standardize(x):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)


def _one_hot(x):
    return (x[..., None] == np.arange(4)).astype(np.float32)


def _attention(q, k, v):
    logits = np.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(q.shape[-1])
    return np.einsum("bnts,bsnh->btnh", _softmax(logits), v)


_SELU = (1.6732632423543772848170429916717, 1.0507009873554804934193349852946)

RECORDS = [
    _r("relu", nn.relu, lambda x: np.maximum(x, 0), FLOATS),
    _r("sigmoid", nn.sigmoid, _sig, FLOATS),
    _r("softplus", nn.softplus, _softplus),
    _r("log_sigmoid", nn.log_sigmoid, lambda x: -_softplus(-x)),
    _r("silu", nn.silu, lambda x: x * _sig(x)),
    _r("mish", nn.mish, lambda x: x * np.tanh(_softplus(x))),
    _r("gelu", nn.gelu, lambda x: 0.5 * x * (1 + np.tanh(
        np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
    _r("gelu_exact", lambda x: nn.gelu(x, approximate=False), _gelu_exact),
    _r("elu", nn.elu, lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0)))),
    _r("selu", nn.selu,
       lambda x: _SELU[1] * np.where(x > 0, x, _SELU[0] * np.expm1(np.minimum(x, 0)))),
    _r("celu", lambda x: nn.celu(x, 2.0),
       lambda x: np.maximum(x, 0) + 2 * np.expm1(np.minimum(x, 0) / 2)),
    _r("soft_sign", nn.soft_sign, lambda x: x / (np.abs(x) + 1)),
    _r("squareplus", nn.squareplus, lambda x: (x + np.sqrt(x * x + 4)) / 2),
    _r("leaky_relu", nn.leaky_relu, lambda x: np.where(x >= 0, x, 0.01 * x)),
    _r("glu", nn.glu, lambda x: x[..., :1] * _sig(x[..., 1:]), shapes=(((2,),), ((3, 2),))),
    _r("softmax", nn.softmax, _softmax, shapes=ROWS),
    _r("log_softmax", nn.log_softmax, lambda x: x - _lse(x), shapes=ROWS),
    _r("logsumexp_axis-1", lambda x: nn.logsumexp(x, axis=-1),
       lambda x: _lse(x)[..., 0], shapes=(((5,),), ((2, 3),))),
    _r("standardize", nn.standardize, _standardize, shapes=(((5,),), ((2, 3),)), tol=1e-4),
    _r("one_hot", lambda x: nn.one_hot(x, 4), _one_hot, (np.dtype("int32"),),
       shapes=(((5,),), ((2, 3),)), diff=False),
    # (Its softmax is float32 whatever the input, as JAX's: float64 gradients would not be
    # exact, so the record casts to float32 and check_grads uses float32 tolerances.)
    _r("dot_product_attention",
       lambda *a: nn.dot_product_attention(*(x.astype(np.float32) for x in a)), _attention,
       shapes=(((1, 3, 2, 4), (1, 5, 2, 4), (1, 5, 2, 4)),), tol=1e-5),
]

# The remaining activations (JAX's formulas; inputs stay off the kinks' float neighbourhoods
# only by chance of the draw, as for relu).
RECORDS += [
    _r("relu6", nn.relu6, lambda x: np.clip(x, 0, 6)),
    _r("hard_tanh", nn.hard_tanh, lambda x: np.clip(x, -1, 1)),
    _r("hard_sigmoid", nn.hard_sigmoid, lambda x: np.clip(x + 3, 0, 6) / 6),
    _r("hard_silu", nn.hard_silu, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    _r("hard_swish", nn.hard_swish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    _r("swish", nn.swish, lambda x: x * _sig(x)),
    _r("sparse_plus", nn.sparse_plus,
       lambda x: np.where(x <= -1, 0, np.where(x >= 1, x, (x + 1) ** 2 / 4))),
    _r("sparse_sigmoid", nn.sparse_sigmoid, lambda x: 0.5 * np.clip(x + 1, 0, 2)),
    _r("log1mexp", nn.log1mexp, lambda x: np.log(-np.expm1(-x)), rng="positive", tol=1e-5),
    _r("logmeanexp", lambda x: nn.logmeanexp(x, axis=-1),
       lambda x: _lse(x)[..., 0] - np.log(x.shape[-1]), shapes=(((5,),), ((2, 3),))),
]
