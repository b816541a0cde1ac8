"""Records for ``lax.scan``, ``lax.map`` and ``lax.fori_loop``: a running sum with a product
output (forward and reverse), a small RNN cell over rows, a map of sin (with and without
``batch_size``) and a fori_loop with static bounds. The references are plain NumPy loops."""

import numpy as np

import ember.numpy as jnp
from ember import lax
from tests.op_records.base import OpRecord

F32 = (np.dtype("float32"),)
SEQ_SHAPES = (((4, 3),), ((0, 2),))


def _cumsum(xs, reverse=False):
    return lax.scan(lambda c, x: (c + x, c * x), jnp.zeros(xs.shape[1:], xs.dtype), xs,
                    reverse=reverse)


def _cumsum_ref(xs, reverse=False):
    c, ys = np.zeros(xs.shape[1:], np.float64), np.zeros(xs.shape, np.float64)
    for i in (range(len(xs) - 1, -1, -1) if reverse else range(len(xs))):
        ys[i] = c * xs[i]
        c = c + xs[i]
    return c.astype(xs.dtype), ys.astype(xs.dtype)


def _rnn(w, h0, xs):
    return lax.scan(lambda h, x: (jnp.tanh(w @ h + x), jnp.sin(h)), h0, xs)


def _rnn_ref(w, h0, xs):
    h, ys = h0.astype(np.float64), []
    for x in xs:
        ys.append(np.sin(h))
        h = np.tanh(w @ h + x)
    return h.astype(xs.dtype), np.array(ys, np.float64).reshape(xs.shape).astype(xs.dtype)


def _fori(x):
    return lax.fori_loop(0, 4, lambda i, v: jnp.sin(v) * x + i, x)


def _fori_ref(x):
    v = x.astype(np.float64)
    for i in range(4):
        v = np.sin(v) * x + i
    return v.astype(x.dtype)


def _map_ref(xs):
    return np.stack([np.sin(x) for x in xs]) if len(xs) else np.sin(xs)


RECORDS = [
    OpRecord("scan[cumsum]", _cumsum, _cumsum_ref, F32, SEQ_SHAPES, differentiable=True,
             kind="lax"),
    OpRecord("scan[cumsum,reverse]", lambda xs: _cumsum(xs, True),
             lambda xs: _cumsum_ref(xs, True), F32, SEQ_SHAPES, differentiable=True, kind="lax"),
    OpRecord("scan[rnn]", _rnn, _rnn_ref, F32, (((3, 3), (3,), (4, 3)),), rng="small",
             differentiable=True, kind="lax"),
    OpRecord("map[sin]", lambda xs: lax.map(jnp.sin, xs), _map_ref, F32, SEQ_SHAPES,
             differentiable=True, kind="lax"),
    OpRecord("map[sin,batch_size=2]", lambda xs: lax.map(jnp.sin, xs, batch_size=2),
             _map_ref, F32, (((5,),),), differentiable=True, kind="lax"),
    OpRecord("fori_loop[sin]", _fori, _fori_ref, F32, (((),), ((3,),)), rng="small",
             differentiable=True, kind="lax"),
]
