"""ember.example_libraries (stax, optimizers) against jax.example_libraries as the oracle."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as ejnp
from ember.example_libraries import optimizers as eo
from ember.example_libraries import stax as es


def _leaves_close(got, want, rtol=1e-6, atol=1e-6):
    got_leaves, want_leaves = ember.tree_util.tree_leaves(got), ember.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


@pytest.fixture(scope="module")
def js(jax):
    from jax.example_libraries import stax
    return stax


@pytest.fixture(scope="module")
def jo(jax):
    from jax.example_libraries import optimizers
    return optimizers


# ---------------------------------------------------------------------------- stax

def _cnn(S):
    return S.serial(
        S.Conv(4, (3, 3), padding="SAME"), S.BatchNorm(), S.Relu,
        S.MaxPool((2, 2), strides=(2, 2)), S.SumPool((1, 1)), S.Tanh,
        S.FanOut(2), S.parallel(S.Identity, S.Exp), S.FanInConcat(), S.Flatten,
        S.Dense(5), S.Gelu, S.Selu, S.Elu, S.LeakyRelu, S.Softplus, S.Sigmoid,
        S.FanOut(2), S.parallel(S.Dense(5), S.Identity), S.FanInSum, S.LogSoftmax)


def _to_numpy(tree):
    return ember.tree_util.tree_map(np.asarray, tree)


def test_stax_cnn_params_shapes_and_outputs_match_jax(jax, js):
    # JAX's initializers compile per shape, so this is the one model initialized by both.
    j_init, j_apply = _cnn(js)
    e_init, e_apply = _cnn(es)
    j_shape, j_params = j_init(jax.random.PRNGKey(1), (2, 8, 8, 3))
    e_shape, e_params = e_init(ember.random.PRNGKey(1), (2, 8, 8, 3))
    assert e_shape == tuple(int(d) for d in j_shape) == (2, 5)
    assert str(ember.tree_util.tree_structure(e_params)) == str(jax.tree.structure(j_params))
    _leaves_close(e_params, j_params, rtol=1e-6, atol=1e-7)
    x = np.random.RandomState(0).randn(2, 8, 8, 3).astype(np.float32)
    want = np.asarray(jax.jit(j_apply)(j_params, x))
    np.testing.assert_allclose(np.asarray(e_apply(e_params, x)), want, rtol=1e-5, atol=1e-5)
    jitted = ember.jit(e_apply)(e_params, x)
    np.testing.assert_allclose(np.asarray(jitted), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make", [
    lambda S: S.GeneralConv(("NCHW", "OIHW", "NCHW"), 3, (2, 3), (2, 1), "SAME"),
    lambda S: S.GeneralConvTranspose(("NCHW", "IOHW", "NCHW"), 2, (3, 2), (2, 2), "SAME"),
    lambda S: S.Conv1DTranspose(2, (3,), (2,)),
    lambda S: S.serial(S.AvgPool((2, 3), (1, 2), "SAME", spec="NCHW"),
                       S.MaxPool((2, 1), spec="NCHW")),
    lambda S: S.BatchNorm(axis=(0, 2), center=False),
    lambda S: S.BatchNorm(axis=0, scale=False, epsilon=1e-3),
    lambda S: S.shape_dependent(lambda shape: S.Dense(shape[1])),
    lambda S: S.serial(S.FanOut(3), S.FanInConcat(axis=1), S.Softmax),
], ids=["general_conv", "general_conv_transpose", "conv1d_transpose", "pools_nchw",
        "batchnorm_scale_only", "batchnorm_center_only", "shape_dependent", "concat_softmax"])
def test_stax_layer_matches_jax(jax, js, make, request):
    case = request.node.callspec.id
    x = np.random.RandomState(1).randn(2, 3, 6, 5).astype(np.float32)
    if case == "conv1d_transpose":
        x = x[:, 0]  # NHC
    j_init, j_apply = make(js)
    e_init, e_apply = make(es)
    e_shape, e_params = e_init(ember.random.PRNGKey(7), x.shape)
    if case == "general_conv":
        # Values too: the default kernel initializer's fan axes follow the kernel layout.
        _, j_params = j_init(jax.random.PRNGKey(7), x.shape)
        _leaves_close(e_params, j_params, rtol=1e-6, atol=1e-7)
    else:
        # Structure and shapes only (JAX's initializers are slow to compile); apply JAX's
        # layer to ember's parameters.
        j_struct = jax.eval_shape(lambda k: j_init(k, x.shape)[1], jax.random.PRNGKey(7))
        assert str(ember.tree_util.tree_structure(e_params)) == str(jax.tree.structure(j_struct))
        assert [p.shape for p in ember.tree_util.tree_leaves(e_params)] == [
            p.shape for p in jax.tree.leaves(j_struct)]
    want = np.asarray(jax.jit(j_apply)(_to_numpy(e_params), x))
    got = e_apply(e_params, x)
    assert got.shape == e_shape == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_stax_dropout_and_serial_rng_match_jax(jax, js):
    x = np.random.RandomState(2).randn(4, 6).astype(np.float32)
    _, j_apply = js.serial(js.Dense(6), js.Dropout(0.7), js.Dropout(0.5, mode="test"))
    e_init, e_apply = es.serial(es.Dense(6), es.Dropout(0.7), es.Dropout(0.5, mode="test"))
    _, e_params = e_init(ember.random.PRNGKey(0), x.shape)
    want = np.asarray(j_apply(_to_numpy(e_params), x, rng=jax.random.PRNGKey(3)))
    got = np.asarray(e_apply(e_params, x, rng=ember.random.PRNGKey(3)))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert (got == 0).any() and (got != 0).any()
    with pytest.raises(ValueError, match="PRNG key"):
        es.Dropout(0.5)[1]((), x)
    # Outside "train" mode the inputs pass through.
    np.testing.assert_array_equal(np.asarray(es.Dropout(0.5, "eval")[1]((), x, rng=0)), x)


def test_stax_parallel_and_fan_shapes():
    init, apply = es.serial(es.FanOut(2), es.parallel(es.Dense(3), es.Identity), es.FanInConcat())
    shape, params = init(ember.random.PRNGKey(0), (4, 2))
    assert shape == (4, 5)
    out = apply(params, ejnp.ones((4, 2)))
    W, b = params[1][0]
    want = np.concatenate([np.ones((4, 2)) @ np.asarray(W) + np.asarray(b), np.ones((4, 2))], 1)
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)
    assert es.FanInSum[0](None, [(2, 3), (2, 3)])[0] == (2, 3)
    assert es.Flatten[0](None, (5, 2, 3))[0] == (5, 6)


# ---------------------------------------------------------------------------- optimizers

_RS = np.random.RandomState(0)
_PARAMS = {"w": _RS.randn(3, 2).astype(np.float32), "b": _RS.randn(2).astype(np.float32),
           "s": np.float32(0.5)}
_X = _RS.randn(5, 3).astype(np.float32)
_Y = _RS.randn(5, 2).astype(np.float32)


# Fixed gradient sequences (one zero entry exercises the optimizers' divide-by-zero guards).
_GRADS = [{"w": _RS.randn(3, 2).astype(np.float32), "b": np.array([_RS.randn(), 0.], np.float32),
           "s": np.float32(_RS.randn())} for _ in range(4)]


def _train(J, opt, jit, model, steps=4):
    """Runs the optimizer for a few steps on a small tanh model's gradients, or (cheaper for
    the JAX oracle, which compiles each eager op) on the fixed gradient sequence."""
    np_ = J.numpy

    def loss(p):
        return np_.mean((np_.tanh(_X @ p["w"] + p["b"]) * p["s"] - _Y) ** 2)

    init, update, get = opt
    grad = J.grad(loss)

    def step(i, state):
        return update(i, grad(get(state)) if model else _GRADS[i], state)

    if jit:
        step = J.jit(step)
    state = init(_PARAMS)
    for i in range(steps):
        state = step(i, state)
    return get(state)


_OPTIMIZERS = [
    ("sgd", lambda O: (0.1,)), ("momentum", lambda O: (0.1, 0.9)),
    ("nesterov", lambda O: (0.1, 0.9)), ("adagrad", lambda O: (0.1,)),
    ("rmsprop", lambda O: (0.01,)), ("rmsprop_momentum", lambda O: (0.01,)),
    ("adam", lambda O: (0.01,)), ("adamax", lambda O: (0.01,)), ("sm3", lambda O: (0.1,)),
    ("sgd", lambda O: (O.exponential_decay(0.1, 2, 0.5),)),
    ("adam", lambda O: (O.polynomial_decay(0.1, 3, 0.01, 2.0),)),
    ("momentum", lambda O: (O.inverse_time_decay(0.1, 2, 0.5, staircase=True), 0.5)),
    ("rmsprop", lambda O: (O.inverse_time_decay(0.1, 2, 0.5),)),
    ("nesterov", lambda O: (O.piecewise_constant([1, 2], [0.1, 0.05, 0.01]), 0.8)),
]


# Every optimizer eagerly on fixed gradients; a few (with and without schedules) training the
# model with the whole step jitted. sm3 keeps the parameter's shape in its state, which jit
# would trace (as in JAX), so it stays eager.
_CASES = ([(n, a, False) for n, a in _OPTIMIZERS]
          + [(n, a, True) for n, a in (_OPTIMIZERS[i] for i in (1, 6, 7, 10, 13))])


@pytest.mark.parametrize("name,args,jit", _CASES, ids=[
    f"{n}{i}-{'jit' if j else 'eager'}" for i, (n, _, j) in enumerate(_CASES)])
def test_optimizer_matches_jax_over_steps(jax, jo, name, args, jit):
    want = _train(jax, getattr(jo, name)(*args(jo)), jit, model=jit)
    got = _train(ember, getattr(eo, name)(*args(eo)), jit, model=jit)
    _leaves_close(got, want, rtol=2e-6, atol=2e-7)
    # The parameters moved: the test compares a real trajectory.
    assert not np.allclose(np.asarray(got["w"]), _PARAMS["w"])


def test_schedules_match_jax(jo):
    pairs = [
        (eo.constant(0.3), jo.constant(0.3)),
        (eo.exponential_decay(0.1, 3, 0.7), jo.exponential_decay(0.1, 3, 0.7)),
        (eo.inverse_time_decay(0.1, 3, 0.7), jo.inverse_time_decay(0.1, 3, 0.7)),
        (eo.inverse_time_decay(0.1, 3, 0.7, True), jo.inverse_time_decay(0.1, 3, 0.7, True)),
        (eo.polynomial_decay(0.1, 4, 0.01, 0.5), jo.polynomial_decay(0.1, 4, 0.01, 0.5)),
        (eo.piecewise_constant([2, 5], [1.0, 0.5, 0.1]),
         jo.piecewise_constant([2, 5], [1.0, 0.5, 0.1])),
    ]
    for e_sched, j_sched in pairs:
        for i in range(8):
            np.testing.assert_allclose(float(e_sched(i)), float(j_sched(i)), rtol=1e-6)
    assert eo.make_schedule(0.2)(5) == 0.2
    with pytest.raises(TypeError):
        eo.make_schedule(np.ones(2))
    with pytest.raises(ValueError, match="one shorter"):
        eo.piecewise_constant([1, 2], [0.1, 0.2])
    with pytest.raises(ValueError, match="sequences"):
        eo.piecewise_constant(1, [0.1, 0.2])


def test_clip_grads_and_l2_norm(jo):
    tree = {"a": np.array([3.0, 0.0], np.float32), "b": [np.array([[4.0]], np.float32)]}
    np.testing.assert_allclose(float(eo.l2_norm(tree)), 5.0, rtol=1e-6)
    for max_norm in (1.0, 10.0):
        _leaves_close(eo.clip_grads(tree, max_norm), jo.clip_grads(tree, max_norm))
    clipped = eo.clip_grads(tree, 1.0)
    np.testing.assert_allclose(float(eo.l2_norm(clipped)), 1.0, rtol=1e-6)


def test_optimizer_state_is_a_pytree_and_packs(jax, jo):
    init, update, get = eo.adam(0.1)
    state = init({"w": ejnp.ones((2, 2)), "b": ejnp.zeros(2)})
    assert isinstance(state, eo.OptimizerState)
    assert len(ember.tree_util.tree_leaves(state)) == 6
    doubled = ember.tree_util.tree_map(lambda x: 2 * x, state)
    np.testing.assert_array_equal(np.asarray(get(doubled)["w"]), 2 * np.ones((2, 2)))
    marked = eo.unpack_optimizer_state(state)
    assert isinstance(marked["w"], eo.JoinPoint)
    x, m, v = marked["w"].subtree
    np.testing.assert_array_equal(np.asarray(x), np.ones((2, 2)))
    repacked = eo.pack_optimizer_state(marked)
    assert repacked.tree_def == state.tree_def and repacked.subtree_defs == state.subtree_defs
    _leaves_close(repacked.packed_state, state.packed_state)
    with pytest.raises(TypeError, match="JoinPoint"):
        eo.pack_optimizer_state({"w": 1.0})
    # Same JoinPoint layout as JAX's.
    j_marked = jo.unpack_optimizer_state(jo.adam(0.1)[0]({"w": np.ones((2, 2)), "b": np.zeros(2)}))
    assert sorted(j_marked) == sorted(marked)
    assert len(list(j_marked["w"])[0]) == len(list(marked["w"])[0]) == 3


def test_optimizer_rejects_mismatched_grad_tree():
    init, update, get = eo.momentum(0.1, 0.9)
    state = init({"w": ejnp.ones(2)})
    with pytest.raises(TypeError, match="did not match the parameter tree"):
        update(0, {"v": ejnp.ones(2)}, state)

    @eo.optimizer
    def broken():
        return (lambda x: (x, x)), (lambda i, g, s: s[0]), (lambda s: s)

    b_init, b_update, _ = broken()
    with pytest.raises(TypeError, match="did not match its input structure"):
        b_update(0, [ejnp.ones(1)], b_init([ejnp.ones(1)]))
