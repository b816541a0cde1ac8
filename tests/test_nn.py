"""ember.nn vs JAX (values, dtypes, gradients at kinks and extremes), NumPy references, errors."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import nn
from ember.test_util import check_grads

# Points where the activations have kinks, saturate or overflow naively.
SPECIAL = np.array([-np.inf, -100.0, -6.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0, 100.0,
                    np.inf], np.float32)

UNARY = ["relu", "relu6", "sigmoid", "log_sigmoid", "softplus", "sparse_plus",
         "sparse_sigmoid", "soft_sign", "silu", "swish", "elu", "celu", "selu", "leaky_relu",
         "hard_tanh", "hard_sigmoid", "hard_silu", "hard_swish", "mish", "squareplus", "tanh",
         "identity", "gelu", "log1mexp"]


def _close(a, b, tol=2e-6):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=tol, atol=tol,
                               equal_nan=True)


@pytest.fixture(scope="module")
def jax_unary(jax):
    """Every activation's values and elementwise gradients at SPECIAL, from one JAX program."""
    def all_of(x):
        return {n: (getattr(jax.nn, n)(x), jax.vmap(jax.grad(getattr(jax.nn, n)))(x))
                for n in UNARY}
    return jax.jit(all_of)(SPECIAL)


@pytest.mark.parametrize("name", UNARY)
def test_unary_values_and_grads_vs_jax(name, jax_unary):
    f = getattr(nn, name)
    want, dwant = jax_unary[name]
    _close(f(SPECIAL), want)
    # Gradients elementwise at every special point (JAX pins relu'(0) = 0 and the like).
    _close(ember.vmap(ember.grad(f))(SPECIAL), dwant, 1e-5)


@pytest.mark.parametrize("name", ["relu", "relu6", "softplus", "gelu", "hard_tanh",
                                  "squareplus", "leaky_relu", "sparse_plus"])
@pytest.mark.parametrize("dtype", ["int32", "bfloat16", "float16"])
def test_dtypes_vs_jax(name, dtype, jax):
    x = np.array([-3, -1, 0, 1, 2, 7]).astype(jnp.dtype(dtype))
    want = getattr(jax.nn, name)(x)
    got = getattr(nn, name)(x)
    assert got.dtype == want.dtype
    assert got.weak_type == want.weak_type
    _close(got, want, 1e-2)


def test_weak_scalar_inputs_vs_jax(jax):
    for name in ["relu", "sigmoid", "gelu", "elu", "softplus"]:
        got, want = getattr(nn, name)(1.5), getattr(jax.nn, name)(1.5)
        assert got.dtype == want.dtype and got.weak_type == want.weak_type, name
        _close(got, want)


def test_parameters_vs_jax(jax):
    x = np.linspace(-4, 4, 9).astype(np.float32)
    _close(nn.gelu(x, approximate=False), jax.nn.gelu(x, approximate=False))
    _close(nn.elu(x, 0.5), jax.nn.elu(x, 0.5))
    _close(nn.celu(x, 2.0), jax.nn.celu(x, 2.0))
    _close(nn.leaky_relu(x, 0.2), jax.nn.leaky_relu(x, 0.2))
    _close(nn.squareplus(x, 1.0), jax.nn.squareplus(x, 1.0))
    y = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 10
    _close(nn.glu(y), jax.nn.glu(y))
    _close(nn.glu(y, axis=0), jax.nn.glu(y, axis=0))


def test_numpy_references():
    x = np.linspace(-5, 5, 41)
    xf = x.astype(np.float32)
    sig = 1 / (1 + np.exp(-x))
    _close(nn.sigmoid(xf), sig.astype(np.float32))
    _close(nn.softplus(xf), np.log1p(np.exp(x)).astype(np.float32), 1e-6)
    _close(nn.silu(xf), (x * sig).astype(np.float32), 1e-6)
    _close(nn.mish(xf), (x * np.tanh(np.log1p(np.exp(x)))).astype(np.float32), 1e-5)
    a, s = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    _close(nn.selu(xf), (s * np.where(x > 0, x, a * np.expm1(x))).astype(np.float32), 1e-6)
    from math import erf
    phi = 0.5 * (1 + np.array([erf(v / np.sqrt(2)) for v in x]))
    _close(nn.gelu(xf, approximate=False), (x * phi).astype(np.float32), 1e-6)


def test_relu_gradient_at_zero_and_second_order():
    assert float(ember.grad(nn.relu)(0.0)) == 0.0
    assert float(ember.grad(nn.relu6)(6.0)) == 0.0
    assert float(ember.grad(nn.relu6)(5.0)) == 1.0
    check_grads(nn.softplus, (np.array([-2.0, 0.3, 4.0]),), order=2, modes=("fwd", "rev"),
                atol=1e-2, rtol=1e-2)
    check_grads(nn.gelu, (np.array([-2.0, 0.3, 4.0], np.float32),), order=2,
                modes=("fwd", "rev"), atol=1e-2, rtol=1e-2)


AXES = [-1, 0, (0, 1), None]
_SM_X = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32) * 3
_SM_WHERE = np.random.default_rng(1).random((3, 4)) < 0.7
_SM_WHERE[:, 0] = True
_SM_W = np.linspace(0.1, 1.2, 12).reshape(3, 4).astype(np.float32)


def _softmax_family(m, x, axis):
    """The softmax-family results (and two gradients) of module ``m`` (ember.nn or jax.nn)."""
    grad = ember.grad if m is nn else __import__("jax").grad
    where = _SM_WHERE
    out = {}
    for name in ["softmax", "log_softmax"]:
        f = getattr(m, name)
        out[name] = f(x, axis=axis)
        out[name + "_where"] = f(x, axis=axis, where=where)
        out[name + "_grad"] = grad(lambda x, f=f: (f(x, axis=axis) * _SM_W).sum())(x)
    out["logsumexp"] = m.logsumexp(x, axis=axis)
    out["logsumexp_keep"] = m.logsumexp(x, axis=axis, keepdims=True)
    out["logsumexp_where"] = m.logsumexp(x, axis=axis, where=where)
    out["logmeanexp"] = m.logmeanexp(x, axis=axis)
    out["logmeanexp_where"] = m.logmeanexp(x, axis=axis, where=where)
    out["standardize"] = m.standardize(x, axis=axis)
    out["standardize_stable"] = m.standardize(x, axis=axis, algorithm="stable")
    return out


@pytest.mark.parametrize("axis", AXES)
def test_softmax_family_vs_jax(axis, jax):
    got = _softmax_family(nn, _SM_X, axis)
    want = jax.jit(lambda x: _softmax_family(jax.nn, x, axis))(_SM_X)
    for key in want:
        _close(got[key], want[key], 1e-5)
    # NumPy reference for softmax.
    e = np.exp(_SM_X.astype(np.float64))
    _close(got["softmax"], (e / e.sum(axis=axis, keepdims=True)).astype(np.float32), 1e-6)


def test_softmax_custom_jvp_config(jax):
    x = np.array([1.0, -np.inf, 2.0], np.float32)
    w = np.array([1.0, 2.0, 3.0], np.float32)
    for flag in (False, True):
        with ember.softmax_custom_jvp(flag), jax.softmax_custom_jvp(flag):
            _close(ember.grad(lambda x: jnp.sum(nn.softmax(x) * w))(x),
                   jax.jit(jax.grad(lambda x: (jax.nn.softmax(x) * w).sum()))(x))
            _close(ember.jacfwd(nn.softmax)(x[::2]), jax.jit(jax.jacfwd(jax.nn.softmax))(x[::2]),
                   1e-6)


def _logsumexp_cases(m, a, b):
    grad = ember.grad if m is nn else __import__("jax").grad
    lse = m.logsumexp
    return [lse(a, b=b), lse(a, axis=1, b=b),  # (the second row's sum is negative: NaN)
            lse(a, axis=1, b=b, return_sign=True), lse(a[1, 1:2] * 1.0),  # all -inf
            lse(np.array([np.inf, 1.0, 0.0], np.float32)),
            grad(lambda a: lse(a, b=b[0]))(a[0])]


def test_logsumexp_b_and_sign_vs_jax(jax):
    a = np.array([[0.5, 1.0, -2.0], [3.0, -np.inf, 0.0]], np.float32)
    b = np.array([[1.0, -2.0, 0.0], [0.01, -1.0, -2.0]], np.float32)
    got = _logsumexp_cases(nn, a, b)
    want = jax.jit(lambda a, b: _logsumexp_cases(jax.nn, a, b))(a, b)
    assert len(jax.tree.leaves(got)) == len(jax.tree.leaves(want)) == 7
    for x, y in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        _close(x, y)
    assert np.isnan(got[1][1]) and float(got[2][1][1]) == -1.0
    # NumPy references.
    x = np.array([1000.0, 1000.0], np.float32)
    _close(nn.logsumexp(x), np.float32(1000 + np.log(2)))
    _close(ember.grad(nn.logsumexp)(x), np.array([0.5, 0.5], np.float32))


def test_one_hot_vs_jax(jax):
    x = np.array([[0, 2], [-1, 3]], np.int32)
    for axis in (-1, 0, 1, -2):
        _close(nn.one_hot(x, 3, axis=axis), jax.nn.one_hot(x, 3, axis=axis))
    got = nn.one_hot(x, 4, dtype=jnp.int8)
    assert got.dtype == np.int8
    _close(got, jax.nn.one_hot(x, 4, dtype=np.int8))
    _close(ember.jit(lambda x: nn.one_hot(x, 3))(x), jax.nn.one_hot(x, 3))
    with pytest.raises(TypeError, match="num_classes"):
        ember.jit(lambda x, n: nn.one_hot(x, n))(x, 3)


def test_errors():
    with pytest.raises(TypeError, match="relu"):
        nn.relu([1.0, 2.0])
    with pytest.raises(ValueError, match="glu"):
        nn.glu(jnp.ones(3))
    with pytest.raises(ValueError, match="algorithm"):
        nn.standardize(jnp.ones(3), algorithm="nope")
    with pytest.raises(TypeError):
        nn.sigmoid(jnp.arange(3))


def _attention_args(rng, B=2, T=3, S=4, N=4, K=2, H=8, dtype=np.float32):
    q = rng.normal(size=(B, T, N, H)).astype(dtype)
    k = rng.normal(size=(B, S, K, H)).astype(dtype)
    v = rng.normal(size=(B, S, K, H)).astype(dtype)
    return q, k, v


def _attention_ref(q, k, v, bias=None, mask=None, scale=None, causal=False):
    """A slow NumPy reference (float64) for grouped-query attention."""
    B, T, N, H = q.shape
    S, K = k.shape[1], k.shape[2]
    G = N // K
    scale = 1 / np.sqrt(H) if scale is None else scale
    out = np.zeros((B, T, N, H))
    for b in range(B):
        for n in range(N):
            logits = q[b, :, n].astype(np.float64) @ k[b, :, n // G].T.astype(np.float64)
            logits *= scale
            if bias is not None:
                logits += np.broadcast_to(bias, (B, N, T, S))[b, n]
            keep = np.ones((T, S), bool)
            if mask is not None:
                keep &= np.broadcast_to(mask, (B, N, T, S))[b, n]
            if causal:
                keep &= np.tri(T, S, dtype=bool)
            logits = np.where(keep, logits, -0.7 * np.finfo(np.float32).max)
            p = np.exp(logits - logits.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            out[b, :, n] = p @ v[b, :, n // G]
    return out


def _attention_cases(m, q, k, v, bias, mask):
    """Attention outputs of module ``m`` (ember.nn or jax.nn) over the option combinations."""
    grad = ember.grad if m is nn else __import__("jax").grad
    f = m.dot_product_attention
    cases = [dict(), dict(bias=bias), dict(mask=mask), dict(is_causal=True),
             dict(local_window_size=1), dict(local_window_size=(0, 2)),
             dict(query_seq_lengths=np.array([2, 3], np.int32),
                  key_value_seq_lengths=np.array([4, 1], np.int32)),
             dict(bias=bias, mask=mask, is_causal=True, scale=0.3)]
    out = [f(q, k, v, **kw) for kw in cases]
    out.append(f(q, k, v, is_causal=True, return_residual=True))
    out.append(f(q[0], k[0], v[0]))  # 3-D inputs: no batch
    out.append(f(*(a.astype(jnp.bfloat16) for a in (q, k, v)), is_causal=True))
    out.append(grad(lambda q, k, v: (f(q, k, v, bias=bias, is_causal=True) ** 2).sum(),
                    (0, 1, 2))(q, k, v))
    return out


def test_dot_product_attention_vs_reference_and_jax(jax):
    rng = np.random.default_rng(0)
    q, k, v = _attention_args(rng)
    bias = rng.normal(size=(1, 4, 3, 4)).astype(np.float32)
    mask = rng.random((2, 1, 3, 4)) < 0.7
    mask[..., 0] = True
    _close(nn.dot_product_attention(q, k, v), _attention_ref(q, k, v).astype(np.float32), 1e-5)
    _close(nn.dot_product_attention(q, k, v, bias, mask, is_causal=True, scale=0.3),
           _attention_ref(q, k, v, bias, mask, 0.3, True).astype(np.float32), 1e-5)
    got = _attention_cases(nn, q, k, v, bias, mask)
    want = jax.jit(lambda *a: _attention_cases(jax.nn, *a))(q, k, v, bias, mask)
    assert len(jax.tree.leaves(got)) == len(jax.tree.leaves(want)) == 15
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        _close(a, b, 2e-2 if b.dtype == jnp.bfloat16 else 1e-4)
    _close(ember.jit(nn.dot_product_attention)(q, k, v), got[0], 1e-5)


def test_dot_product_attention_errors():
    q, k, v = _attention_args(np.random.default_rng(0))
    with pytest.raises(ValueError, match="value shape"):
        nn.dot_product_attention(q, k, v[:, :2])
    with pytest.raises(ValueError, match="multiple"):
        nn.dot_product_attention(q[:, :, :3], k, v)
    with pytest.raises(ValueError, match="mask dtype"):
        nn.dot_product_attention(q, k, v, mask=np.ones((1, 1, 3, 4), np.float32))
    with pytest.raises(ValueError, match="implementation"):
        nn.dot_product_attention(q, k, v, implementation="nope")


def test_jit_and_vmap_of_activations():
    x = np.linspace(-3, 3, 12).reshape(3, 4).astype(np.float32)
    for f in (nn.relu, nn.gelu, nn.softmax, nn.log_softmax, nn.standardize, nn.selu):
        _close(ember.jit(f)(x), f(x), 1e-6)
        _close(ember.vmap(f)(x), np.stack([f(r) for r in x]), 1e-6)
