"""JAX-oracle and reference tests for dot algorithms, conv_general_dilated_local, tokens, the
internal primitive handles, pcast, ragged_all_to_all, scaled_dot and jax.nn's scaled
matmuls."""

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember import nn as enn

RNG = np.random.default_rng(0)
X = RNG.standard_normal((5, 7)).astype(np.float32)
Y = RNG.standard_normal((7, 3)).astype(np.float32)


def _close(a, b, tol=1e-5):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=tol, atol=tol)


# ---------------------------------------------------------------- dot algorithms


def test_dot_algorithm_types_match_jax(jax):
    assert list(lax.DotAlgorithmPreset.__members__) == list(
        jax.lax.DotAlgorithmPreset.__members__)
    assert list(lax.AccuracyMode.__members__) == list(jax.lax.AccuracyMode.__members__)
    for p in lax.DotAlgorithmPreset:
        q = jax.lax.DotAlgorithmPreset[p.name]
        assert str(p) == str(q) and repr(p) == repr(q)
        assert p.accumulation_type == (None if q.accumulation_type is None
                                       else np.dtype(q.accumulation_type))
        assert p.supported_lhs_types == (None if q.supported_lhs_types is None else
                                         tuple(np.dtype(t) for t in q.supported_lhs_types))
    assert lax.DotAlgorithm._fields == jax.lax.DotAlgorithm._fields
    assert lax.Tolerance(atol=1e-3, ulps=2).ulps == 2
    with pytest.raises(ValueError, match="non-negative"):
        lax.Tolerance(atol=-1.0)
    with pytest.raises(ValueError, match="at least one"):
        lax.Tolerance()


@pytest.mark.parametrize("preset", ["DEFAULT", "F16_F16_F16", "F32_F32_F32", "BF16_BF16_F32",
                                    "BF16_BF16_F32_X3", "F64_F64_F64"])
@pytest.mark.parametrize("pet", [None, np.float16])
def test_dot_presets_match_jax(jax, preset, pet):
    def run(lx, a, b, jit):
        f = lambda a, b: lx.dot(a, b, precision=lx.DotAlgorithmPreset[preset],  # noqa: E731
                                preferred_element_type=pet)
        return (jax.jit(f) if lx is jax.lax else ember.jit(f) if jit else f)(a, b)

    want = np.asarray(run(jax.lax, X, Y, True))
    for jit in (False, True):
        _close(run(lax, X, Y, jit), want, 1e-6)


def test_dot_presets_through_numpy_api_and_grad(jax):
    p, q = lax.DotAlgorithmPreset.F16_F16_F16, jax.lax.DotAlgorithmPreset.F16_F16_F16
    _close(jnp.matmul(X, Y, precision=p), jax.numpy.matmul(X, Y, precision=q))
    _close(jnp.einsum("ij,jk", X, Y, precision=p), jax.numpy.einsum("ij,jk", X, Y, precision=q))
    _close(jnp.dot(X, Y, precision="F16_F16_F16"), jax.numpy.dot(X, Y, precision=q))
    g = ember.grad(lambda a: (lax.dot(a, Y, precision=p) ** 2).sum())(X)
    gj = jax.grad(lambda a: (jax.lax.dot(a, Y, precision=q) ** 2).sum())(X)
    _close(g, gj, 1e-3)
    _close(ember.vmap(lambda a: lax.dot(a, Y, precision=p))(X),
           jax.vmap(lambda a: jax.lax.dot(a, Y, precision=q))(X))


def test_dot_unsupported_preset_and_explicit_algorithm(jax):
    with pytest.raises(ValueError, match="not supported by dot_general on CPU"):
        lax.dot(X, Y, precision=lax.DotAlgorithmPreset.TF32_TF32_F32)
    with pytest.raises(ValueError, match="not supported by dot_general on CPU"):
        ember.jit(lambda a: lax.dot(a, Y, precision="F16_F16_F32"))(X)
    # (tracing is fine, as in JAX: the check is made when the product is computed)
    assert "precision=F16_F16_F32" in str(
        ember.make_jaxpr(lambda a: lax.dot(a, Y, precision="F16_F16_F32"))(X))
    with pytest.raises(ValueError, match="not supported by dot_general on CPU"):
        jax.lax.dot(X, Y, precision=jax.lax.DotAlgorithmPreset.TF32_TF32_F32)
    with pytest.raises(ValueError, match="precision"):
        lax.dot(X, Y, precision="F99")
    # An explicit DotAlgorithm is computed with its types (JAX's CPU backend refuses it).
    alg = lax.DotAlgorithm(np.float16, np.float16, np.float32)
    want = X.astype(np.float16).astype(np.float64) @ Y.astype(np.float16).astype(np.float64)
    for f in (lambda a, b: lax.dot(a, b, precision=alg),
              ember.jit(lambda a, b: lax.dot(a, b, precision=alg))):
        out = f(X, Y)
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- conv_general_dilated_local

_LOCAL_CASES = [
    ((2, 3, 9), (4, 9, 7), (1,), "VALID", (3,), None, None, None),
    ((2, 3, 8, 7), (5, 18, 4, 4), (2, 2), "SAME", (2, 3), None, (1, 2), None),
    ((1, 6, 5, 2), (11, 5, 8, 3), (1, 1), [(1, 0), (0, 1)], (2, 2), (2, 1), None,
     ("NHWC", "HWIO", "NHWC")),
    ((1, 7, 2, 5), (6, 3, 12, 4), (1, 1), "VALID", (2, 3), None, None,
     ("NWCH", "WHIO", "NCHW")),
]


@pytest.mark.parametrize("case", _LOCAL_CASES)
def test_conv_general_dilated_local_matches_jax(jax, case):
    ls, rs, strides, pad, fs, ld, rd, dn = case
    x = RNG.standard_normal(ls).astype(np.float32)
    k = RNG.standard_normal(rs).astype(np.float32)
    f = lambda lx: lambda a, b: lx.conv_general_dilated_local(  # noqa: E731
        a, b, strides, pad, fs, ld, rd, dn)
    _close(f(lax)(x, k), f(jax.lax)(x, k), 1e-4)
    _close(ember.jit(f(lax))(x, k), f(jax.lax)(x, k), 1e-4)
    loss = lambda lx: lambda a, b: (f(lx)(a, b) ** 2).sum()  # noqa: E731
    for got, want in zip(ember.grad(loss(lax), (0, 1))(x, k),
                         jax.grad(loss(jax.lax), (0, 1))(x, k)):
        _close(got, want, 1e-3)


def test_conv_general_dilated_local_errors():
    x = np.ones((1, 2, 5), np.float32)
    with pytest.raises(TypeError, match="conv_general_dilated_local: rhs shape"):
        lax.conv_general_dilated_local(x, np.ones((4, 5, 3), np.float32), (1,), "VALID", (3,))
    with pytest.raises(ValueError, match="Unsupported precision"):
        lax.conv_general_dilated_local(x, np.ones((4, 6, 3), np.float32), (1,), "VALID", (3,),
                                       precision=lax.DotAlgorithmPreset.F32_F32_F32)


# ---------------------------------------------------------------- tokens and small helpers


def test_tokens(jax):
    t = lax.create_token()
    assert t.shape == (0,) and t.dtype == np.bool_
    for f in (lambda: lax.after_all(lax.create_token(), lax.create_token()),
              ember.jit(lambda: lax.after_all(lax.create_token(), lax.create_token()))):
        assert f().shape == (0,)
    assert ember.jit(lambda t: lax.after_all(t))(t).shape == (0,)
    jaxpr = str(ember.make_jaxpr(lambda: lax.after_all(lax.create_token()))())
    assert "create_token" in jaxpr and "after_all" in jaxpr
    with pytest.raises(TypeError) as ours:
        lax.after_all(jnp.ones(3))
    with pytest.raises(TypeError) as theirs:
        jax.lax.after_all(jax.numpy.ones(3))
    assert str(ours.value) == str(theirs.value)


def test_stage_dce_sink_shape_as_value(jax):
    assert isinstance(lax.stage(np.float32(2.0)), ember.Array)
    assert ember.grad(lambda x: lax.stage(x) ** 2)(3.0) == 6.0
    assert lax.dce_sink(jnp.ones(3)) is None
    assert ember.jit(lambda x: (lax.dce_sink(x), x + 1)[1])(1.0) == 2.0
    assert "dce_sink[prevent_mlir_dce=False]" in str(
        ember.make_jaxpr(lambda x: lax.dce_sink(x))(1.0))
    for shape in [(2, 3), ()]:
        got, want = lax.shape_as_value(shape), jax.lax.shape_as_value(shape)
        assert np.asarray(got).dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(got, want)
    assert lax.linear_solve_p.name == "custom_linear_solve"
    assert lax.dot_general_p.name == "dot_general"


@pytest.mark.parametrize("is_max_k", [True, False])
@pytest.mark.parametrize("aggregate", [True, False])
def test_approx_top_k_p_matches_jax(jax, is_max_k, aggregate):
    x = RNG.standard_normal((3, 2000)).astype(np.float32)
    p = dict(k=3, reduction_dimension=1, recall_target=0.9, is_max_k=is_max_k,
             reduction_input_size_override=-1, aggregate_to_topk=aggregate)
    want = jax.lax.approx_top_k_p.bind(x, **p)
    for f in (lambda v: lax.approx_top_k_p.bind(v, **p),
              ember.jit(lambda v: lax.approx_top_k_p.bind(v, **p))):
        for got, w in zip(f(x), want):
            np.testing.assert_array_equal(got, w)


def test_pcast():
    x = jnp.arange(3.0)
    out = ember.vmap(lambda v: lax.pcast(v, "i", to="varying") * 2, axis_name="i")(x)
    np.testing.assert_array_equal(out, [0.0, 2.0, 4.0])
    assert lax.pcast(x, (), to="varying") is x
    with pytest.raises(TypeError, match="must be a tuple or a str"):
        lax.pcast(x, {"i"}, to="varying")
    with pytest.raises(ValueError, match="Allowed `to` values"):
        ember.vmap(lambda v: lax.pcast(v, "i", to="sideways"), axis_name="i")(x)
    with pytest.raises(NameError, match="unbound axis name"):
        lax.pcast(x, "j", to="varying")


# ---------------------------------------------------------------- ragged_all_to_all


def _ragged_ref(operand, output, in_off, send, out_off):
    size, k = in_off.shape
    per = k // size
    out = output.copy()
    for r in range(size):
        for i in range(size):
            for s in range(per):
                e = r * per + s
                n, src, dst = send[i, e], in_off[i, e], out_off[i, e]
                out[r, dst:dst + n] = operand[i, src:src + n]
    return out


def _ragged_case(size, per, n_in, n_out, rng):
    """Random slices, disjoint at both ends: member i sends every receiver ``per`` runs.
    (Rows sent twice would get, as in JAX's transpose, only one slice's cotangent.)"""
    k = size * per
    in_off = np.zeros((size, k), np.int32)
    send = np.zeros((size, k), np.int32)
    out_off = np.zeros((size, k), np.int32)
    cursor = np.zeros(size, int)  # next free row of each receiver
    taken = np.zeros(size, int)  # next unsent row of each sender
    for r in range(size):
        for i in range(size):
            for s in range(per):
                e = r * per + s
                n = min(int(rng.integers(0, 3)), n_out - cursor[r], n_in - taken[i])
                send[i, e] = n
                in_off[i, e] = taken[i] + rng.integers(0, 2) * (taken[i] + n < n_in)
                out_off[i, e] = cursor[r]
                cursor[r] += n
                taken[i] = in_off[i, e] + n
    recv = np.stack([send[:, r * per:(r + 1) * per].reshape(-1) for r in range(size)])
    return in_off, send, out_off, recv.astype(np.int32)


def _ragged(*args):
    return ember.vmap(lambda *a: lax.ragged_all_to_all(*a, axis_name="i"),
                      axis_name="i")(*args)


def test_ragged_all_to_all_doc_example():
    args = ([[1, 2, 2], [3, 4, 0]], np.zeros((2, 4), np.int32), [[0, 1], [0, 1]],
            [[1, 2], [1, 1]], [[0, 0], [1, 2]], [[1, 1], [2, 1]])
    args = [np.asarray(a, np.int32) for a in args]
    np.testing.assert_array_equal(_ragged(*args), [[1, 3, 0, 0], [2, 2, 4, 0]])


@pytest.mark.parametrize("size,per", [(3, 1), (2, 2)])
def test_ragged_all_to_all_random(size, per):
    rng = np.random.default_rng(size)
    idx = _ragged_case(size, per, 6, 10, rng)
    operand = rng.standard_normal((size, 6, 2)).astype(np.float32)
    output = rng.standard_normal((size, 10, 2)).astype(np.float32)
    want = _ragged_ref(operand, output, *idx[:3])
    np.testing.assert_array_equal(_ragged(operand, output, *idx), want)
    np.testing.assert_array_equal(ember.jit(_ragged)(operand, output, *idx), want)
    # A vmap not naming the axis, outside the exchange: each of its members exchanges alone.
    inner = lambda op, out: ember.vmap(  # noqa: E731
        lambda o, u: lax.ragged_all_to_all(o, u, *[jnp.asarray(a[0]) for a in idx],
                                           axis_name="i"))(op, out)
    two = np.stack([operand[:, :3], operand[:, 3:]], 1)  # [size, 2, 3, 2]
    got = ember.vmap(inner, axis_name="i")(two, np.zeros((size, 2, 10, 2), np.float32))
    same = [np.tile(a[:1], (size, 1)) for a in idx]  # every member uses member 0's arrays
    if (same[0] + same[1] <= 3).all():
        for j in range(2):
            np.testing.assert_array_equal(
                got[:, j], _ragged_ref(two[:, j], np.zeros((size, 10, 2), np.float32),
                                       *same[:3]))


def test_ragged_all_to_all_grad():
    rng = np.random.default_rng(7)
    idx = _ragged_case(2, 2, 5, 8, rng)
    operand = rng.standard_normal((2, 5)).astype(np.float32)
    output = rng.standard_normal((2, 8)).astype(np.float32)
    w = rng.standard_normal((2, 8)).astype(np.float32)

    def member_loss(op, out, wi, *ix):
        return (lax.ragged_all_to_all(op, out, *ix, axis_name="i") * wi).sum()

    # grad inside the named vmap (the primitive's JVP and transpose, with all_to_all) ...
    g_in = ember.vmap(ember.grad(member_loss, (0, 1)), axis_name="i")(operand, output, w,
                                                                       *idx)
    # ... against grad of the vmapped exchange (differentiating its lax expansion).
    total = lambda op, out: (_ragged(op, out, *idx) * w).sum()  # noqa: E731
    g_out = ember.grad(total, (0, 1))(operand, output)
    for a, b in zip(g_in, g_out):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    # and against the NumPy adjoint: output rows that get overwritten get no gradient.
    written = _ragged_ref(np.ones_like(operand), np.zeros_like(output), *idx[:3]) != 0
    np.testing.assert_allclose(g_out[1], np.where(written, 0, w))


def test_ragged_all_to_all_errors(jax):
    ones = np.ones((2, 4), np.float32)
    idx = np.zeros((2, 2), np.int32)
    with pytest.raises(ValueError, match="input_offsets must be integer type"):
        _ragged(ones, ones, idx.astype(np.float32), idx, idx, idx)
    with pytest.raises(ValueError, match="send_sizes must be rank 1"):
        _ragged(ones, ones, idx, np.zeros((2, 2, 2), np.int32), idx, idx)
    with pytest.raises(ValueError, match="divisible"):
        _ragged(ones, ones, *[np.zeros((2, 3), np.int32)] * 4)
    with pytest.raises(NameError):
        lax.ragged_all_to_all(ones[0], ones[0], idx[0], idx[0], idx[0], idx[0], axis_name="z")


# ---------------------------------------------------------------- scaled_dot


def test_scaled_dot_matches_jax(jax):
    a = RNG.standard_normal((3, 4, 8)).astype(np.float32)
    b = RNG.standard_normal((3, 8, 5)).astype(np.float32)
    sa = RNG.uniform(0.5, 2, (3, 4, 2)).astype(np.float32)
    sb = RNG.uniform(0.5, 2, (3, 2, 5)).astype(np.float32)
    for kw in (dict(lhs_scale=sa, rhs_scale=sb), {},
               dict(lhs_scale=sa, preferred_element_type=np.float32)):
        _close(lax.scaled_dot(a, b, **kw), jax.lax.scaled_dot(a, b, **kw), 1e-6)
    f = lambda lx: lambda *x: lx.scaled_dot(  # noqa: E731
        x[0], x[1], lhs_scale=x[2], rhs_scale=x[3], dimension_numbers=(((1,), (0,)), ((), ())),
        preferred_element_type=np.float32)
    _close(ember.jit(f(lax))(a[0], b[0], sa[0], sb[0]), f(jax.lax)(a[0], b[0], sa[0], sb[0]), 1e-6)
    for bad in (RNG.uniform(size=(3, 4, 3)), RNG.uniform(size=(3, 4, 8)),
                RNG.uniform(size=(3, 2, 2))):
        bad = bad.astype(np.float32)
        with pytest.raises(TypeError) as theirs:
            jax.lax.scaled_dot(a, b, lhs_scale=bad)
        with pytest.raises(TypeError, match=str(theirs.value).split("(")[0][:30]):
            lax.scaled_dot(a, b, lhs_scale=bad)


# ---------------------------------------------------------------- jax.nn scaled matmuls


def test_scaled_matmul_and_errors(jax):
    a = jnp.array([1.0, 2.0, 3.0]).reshape(1, 1, 3)
    b = jnp.array([4.0, 5.0, 6.0]).reshape(1, 1, 3)
    s = jnp.full((1, 1, 1), 0.5)
    np.testing.assert_array_equal(enn.scaled_matmul(a, b, s, s), [[[8.0]]])
    assert enn.scaled_matmul(a, b, s, s, preferred_element_type=jnp.bfloat16).dtype == \
        jnp.bfloat16
    x = np.ones((2, 3, 8), np.float32)
    for args in ((x, np.ones((2, 4, 4), np.float32), np.ones((2, 3, 2)), np.ones((2, 4, 2))),
                 (x, np.ones((2, 4, 8), np.float32), np.ones((2, 3, 2)), np.ones((2, 4, 4))),
                 (x, np.ones((2, 4, 8), np.float32), np.ones((2, 2, 2)), np.ones((2, 4, 2))),
                 (x[0], x[0], x[0], x[0])):
        args = [np.asarray(v, np.float32) for v in args]
        with pytest.raises(ValueError) as theirs:
            jax.nn.scaled_matmul(*args)
        with pytest.raises(ValueError) as ours:
            enn.scaled_matmul(*args)
        assert str(ours.value) == str(theirs.value)


def test_get_scaled_dot_general_config(jax):
    for mode in ("mxfp8", "nvfp4"):
        ours, theirs = (m.get_scaled_dot_general_config(mode) for m in (enn, jax.nn))
        assert (ours.mode, ours.block_size, ours.infer_only) == (
            theirs.mode, theirs.block_size, theirs.infer_only)
        assert ours.data_type == np.dtype(theirs.data_type)
        assert ours.scale_type == np.dtype(theirs.scale_type)
    with pytest.raises(ValueError, match="Unsupported mode"):
        enn.get_scaled_dot_general_config("fp3")


def _np_quantize(x, cfg):
    """Block quantization with ml_dtypes' real float8/float4 casts (the reference)."""
    b, m, k = x.shape
    bs = cfg.block_size
    x = x.reshape(b, m, k // bs, bs).astype(np.float32)
    big = float(ml_dtypes.finfo(cfg.data_type).max)
    if cfg.mode == "mxfp8":
        s = np.exp2(np.ceil(np.log2(np.abs(x).max(-1, keepdims=True) / np.float32(big))))
        s = s.astype(np.float32)
    else:
        x = x / np.asarray(cfg.global_scale, np.float32)
        s = np.clip(np.abs(x).max(-1, keepdims=True) / np.float32(big), 0,
                    float(ml_dtypes.finfo(cfg.scale_type).max))
        s = s.astype(cfg.scale_type).astype(np.float32)
    q = np.clip(x / s, -big, big).astype(cfg.data_type).astype(np.float64)
    return (q * s).reshape(b, m, k)


@pytest.mark.parametrize("mode", ["mxfp8", "nvfp4"])
def test_scaled_dot_general_against_ml_dtypes(mode):
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((2, 32, 64)) * 3).astype(np.float32)
    b = rng.standard_normal((2, 32, 64)).astype(np.float32)
    gs = None if mode == "mxfp8" else jnp.asarray([0.5], np.float32)
    cfg = enn.get_scaled_dot_general_config(mode, gs)
    dn = (((2,), (2,)), ((0,), (0,)))
    want = np.einsum("bmk,bnk->bmn", _np_quantize(a, cfg), _np_quantize(b, cfg))
    if mode == "nvfp4":
        want = want * 0.25
    f = lambda a, b: enn.scaled_dot_general(a, b, dn, configs=[cfg] * 3)  # noqa: E731
    np.testing.assert_allclose(f(a, b), want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(ember.jit(f)(a, b), want, rtol=1e-5, atol=1e-4)
    # Quantized, so near the exact product; the gradient flows (with quantized cotangents).
    exact = np.einsum("bmk,bnk->bmn", a.astype(np.float64), b)
    assert 0 < np.abs(want - exact).max() < 0.2 * np.abs(exact).max()
    ga = ember.grad(lambda a: f(a, b).sum())(a)
    ref = np.broadcast_to(b.sum(1, keepdims=True), a.shape)
    np.testing.assert_allclose(ga, ref, atol=0.15 * np.abs(ref).max())
    assert enn.scaled_dot_general(a, b, dn, preferred_element_type=jnp.bfloat16,
                                  configs=[cfg] * 3).dtype == jnp.bfloat16


def test_scaled_dot_general_without_configs_and_errors():
    x = RNG.standard_normal((64, 32)).astype(np.float32)
    y = RNG.standard_normal((64, 5)).astype(np.float32)
    dn = (((0,), (0,)), ((), ()))
    np.testing.assert_allclose(enn.scaled_dot_general(x, y, dn), x.T @ y, rtol=1e-5,
                               atol=1e-5)
    cfg = [enn.get_scaled_dot_general_config("mxfp8")] * 3
    assert enn.scaled_dot_general(x, y, dn, configs=cfg).shape == (32, 5)
    with pytest.raises(TypeError, match="preferred_element_type"):
        enn.scaled_dot_general(x, y, dn, preferred_element_type=np.int32, configs=cfg)
    with pytest.raises(ValueError, match="multiple of the block size"):
        enn.scaled_dot_general(x[:40], y[:40], dn, configs=cfg)


@pytest.mark.parametrize("name", ["cbrt", "cos", "exp", "exp2", "expm1", "log", "log1p",
                                  "logistic", "rsqrt", "sin", "sqrt", "tan", "tanh"])
def test_accuracy_keyword(jax, name):
    # JAX's ``accuracy=``: accepted as a Tolerance or AccuracyMode, refused otherwise.
    x = np.array([0.3, 1.7], np.float32)
    plain = np.asarray(getattr(lax, name)(x))
    for accuracy in (lax.Tolerance(atol=1e-4, rtol=0, ulps=0), lax.AccuracyMode.HIGHEST):
        np.testing.assert_array_equal(np.asarray(getattr(lax, name)(x, accuracy=accuracy)),
                                      plain)
    want = np.asarray(getattr(jax.lax, name)(x, accuracy=jax.lax.AccuracyMode.HIGHEST))
    np.testing.assert_allclose(plain, want, rtol=2e-6)
    with pytest.raises(NotImplementedError, match="Accuracy 3 not supported"):
        getattr(lax, name)(x, accuracy=3)


def test_approx_max_min_k_bind_approx_top_k_as_jax(jax):
    # lax.approx_max_k/min_k stage JAX's approx_top_k equation (same jaxpr text).
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    for f in (lambda l: lambda a: l.approx_max_k(a, 2),
              lambda l: lambda a: l.approx_min_k(a, 2, reduction_dimension=0,
                                                 aggregate_to_topk=False)):
        assert str(ember.make_jaxpr(f(lax))(x)) == str(jax.make_jaxpr(f(jax.lax))(x))
    # negative dimensions under vmap (batch axis after the reduced one) and jvp
    y = RNG.standard_normal((4, 3, 5)).astype(np.float32)
    g = lambda a: lax.approx_max_k(a, 2, reduction_dimension=-2)  # noqa: E731
    got = ember.vmap(g, in_axes=2)(y)
    for j in range(2):
        want = np.stack([np.asarray(g(y[:, :, i])[j]) for i in range(5)])
        np.testing.assert_array_equal(np.asarray(got[j]), want)
    ours = ember.grad(lambda a: lax.approx_max_k(a, 2)[0].sum())(y[:, :, 0])
    theirs = jax.grad(lambda a: jax.lax.approx_max_k(a, 2)[0].sum())(y[:, :, 0])
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
