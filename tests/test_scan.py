"""lax.scan, lax.map and lax.fori_loop: values (eager, jit on both backends) against NumPy
loops, derivatives against finite differences and JAX, vmap against loops, JAX's errors and
jaxpr text."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.test_util import check_grads

BACKENDS = ("cpu", "interpreter")
RNG = np.random.default_rng(0)


def _cumsum_body(c, x):
    return c + x, c * x


def _np_cumsum_body(xs, c=0.0, reverse=False):
    ys = np.zeros_like(xs)
    order = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
    for i in order:
        ys[i] = c * xs[i]
        c = c + xs[i]
    return c, ys


def _rnn(params, h0, xs):
    w, u, b = params

    def cell(h, x):
        h = jnp.tanh(w @ h + u @ x + b)
        return h, h.sum()

    return lax.scan(cell, h0, xs)


def _np_rnn(params, h0, xs):
    w, u, b = [np.asarray(p, np.float64) for p in params]
    h, ys = np.asarray(h0, np.float64), []
    for x in xs:
        h = np.tanh(w @ h + u @ x + b)
        ys.append(h.sum())
    return h, np.array(ys)


def _rnn_args():
    rng = np.random.default_rng(1)
    params = (rng.normal(size=(3, 3)).astype(np.float32) * 0.5,
              rng.normal(size=(3, 2)).astype(np.float32) * 0.5,
              rng.normal(size=(3,)).astype(np.float32) * 0.1)
    return params, rng.normal(size=(3,)).astype(np.float32), \
        rng.normal(size=(4, 2)).astype(np.float32)


# --------------------------------------------------------------------------- values


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("mode", ["eager", *BACKENDS])
def test_cumsum_like_matches_numpy_loop(reverse, mode):
    xs = RNG.normal(size=5).astype(np.float32)

    def f(xs):
        return lax.scan(_cumsum_body, 0.5, xs, reverse=reverse)

    c, ys = f(xs) if mode == "eager" else ember.jit(f, backend=mode)(xs)
    rc, rys = _np_cumsum_body(xs, 0.5, reverse)
    np.testing.assert_allclose(c, rc, rtol=1e-5)
    np.testing.assert_allclose(ys, rys, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["eager", *BACKENDS])
def test_rnn_cell_matches_numpy(mode):
    params, h0, xs = _rnn_args()
    fn = _rnn if mode == "eager" else ember.jit(_rnn, backend=mode)
    h, ys = fn(params, h0, xs)
    rh, rys = _np_rnn(params, h0, xs)
    np.testing.assert_allclose(h, rh, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ys, rys, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["eager", "cpu"])
def test_pytrees_of_carry_xs_and_ys(mode):
    xs = {"a": np.arange(4.0, dtype=np.float32), "b": np.ones((4, 2), np.int32)}

    def body(carry, x):
        s, n = carry
        s = s + x["a"]
        n = n + x["b"].sum()
        return (s, n), {"s": s, "pair": (n, x["a"] * 2)}

    def f(xs):
        return lax.scan(body, (0.0, jnp.int32(0)), xs)

    (s, n), ys = f(xs) if mode == "eager" else ember.jit(f, backend=mode)(xs)
    assert float(s) == 6.0 and int(n) == 8 and np.asarray(n).dtype == np.int32
    np.testing.assert_array_equal(ys["s"], np.cumsum(np.arange(4.0)))
    np.testing.assert_array_equal(ys["pair"][0], [2, 4, 6, 8])
    np.testing.assert_array_equal(ys["pair"][1], np.arange(4.0) * 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_closures_over_jit_arguments_and_concrete_arrays(backend):
    k = np.array([1.0, 2.0, 3.0], np.float32)

    @ember.jit
    def f(xs, a):
        return lax.scan(lambda c, x: (c * a + x * k, (c * k).sum()), jnp.zeros(3), xs)

    f = ember.jit(f, backend=backend)
    xs = RNG.normal(size=(4, 3)).astype(np.float32)
    c, ys = f(xs, 0.5)
    rc, rys = np.zeros(3, np.float32), []
    for x in xs:
        rys.append((rc * k).sum())
        rc = rc * 0.5 + x * k
    np.testing.assert_allclose(c, rc, rtol=1e-5)
    np.testing.assert_allclose(ys, rys, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["eager", *BACKENDS])
def test_length_zero(mode):
    def f(xs):
        return lax.scan(lambda c, x: (c + x, (c * x, x[None])), 1.0, xs)

    c, (ys, zs) = f(np.zeros(0, np.float32)) if mode == "eager" else \
        ember.jit(f, backend=mode)(np.zeros(0, np.float32))
    assert float(c) == 1.0 and ys.shape == (0,) and zs.shape == (0, 1)


@pytest.mark.parametrize("mode", ["eager", "cpu"])
def test_xs_none_with_length(mode):
    def f(c0):
        return lax.scan(lambda c, _: (c * 2, c), c0, None, length=4)

    c, ys = f(1.5) if mode == "eager" else ember.jit(f, backend=mode)(1.5)
    assert float(c) == 24.0
    np.testing.assert_array_equal(ys, [1.5, 3.0, 6.0, 12.0])


def test_unroll_gives_the_same_results():
    xs = RNG.normal(size=7).astype(np.float32)
    ref = lax.scan(_cumsum_body, 0.0, xs)
    for unroll in (2, 3, True, False):
        f = ember.jit(lambda xs, u=unroll: lax.scan(_cumsum_body, 0.0, xs, unroll=u))
        for out, r in zip(f(xs), ref):
            np.testing.assert_allclose(out, r, rtol=1e-6)


def test_disable_jit_runs_a_python_loop():
    calls = []

    def body(c, x):
        calls.append(type(x).__name__)
        return c + x, c

    with ember.disable_jit():
        c, ys = lax.scan(body, 0.0, jnp.arange(3.0), reverse=True)
        assert lax.fori_loop(0, 0, lambda i, x: x + 1, 5) == 5
    assert calls == ["Array"] * 3
    assert float(c) == 3.0
    np.testing.assert_array_equal(ys, [3.0, 2.0, 0.0])


def test_weak_init_takes_the_carry_output_type():
    c, ys = lax.scan(lambda c, x: (c + x, c), 0, jnp.arange(3.0))
    assert c.dtype == np.float32 and ys.dtype == np.float32
    assert float(c) == 3.0


def test_against_jax(jax):
    xs = RNG.normal(size=(5, 2)).astype(np.float32)

    def f(lax_, np_, xs):
        def body(c, x):
            return np_.sin(c) + x, np_.cos(c * x).sum()
        return lax_.scan(body, np_.ones(2, np.float32), xs, reverse=True)

    ours = f(lax, jnp, xs)
    theirs = f(jax.lax, jax.numpy, xs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    g = ember.grad(lambda xs: f(lax, jnp, xs)[1].sum())(xs)
    jg = jax.grad(lambda xs: f(jax.lax, jax.numpy, xs)[1].sum())(xs)
    np.testing.assert_allclose(g, jg, rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------- derivatives


class _x64:
    def __enter__(self):
        self.prev = ember.config.jax_enable_x64
        ember.config.update("jax_enable_x64", True)

    def __exit__(self, *a):
        ember.config.update("jax_enable_x64", self.prev)


def test_check_grads_cumsum_wrt_init_and_xs():
    xs = RNG.normal(size=4)
    with _x64():
        check_grads(lambda c, xs: lax.scan(lambda c, x: (jnp.sin(c) * x, c * x), c, xs),
                    (0.3, xs), order=2, modes=("fwd", "rev"))


def test_check_grads_rnn_wrt_params_h0_xs():
    params, h0, xs = _rnn_args()
    with _x64():
        args = ([p.astype(np.float64) for p in params], h0.astype(np.float64),
                xs.astype(np.float64))
        check_grads(lambda p, h, x: _rnn(p, h, x), args, order=2, modes=("fwd", "rev"))


def test_grad_wrt_closed_over_consts_jacfwd_jacrev_hessian(jax):
    xs = RNG.normal(size=(4, 2)).astype(np.float32)

    def f(lax_, np_, a):
        return lax_.scan(lambda c, x: (np_.tanh(c * a + x), (c * a).sum()), np_.zeros(2),
                         xs)[1]

    a = np.float32(0.7)
    for ours, theirs in ((ember.jacfwd, jax.jacfwd), (ember.jacrev, jax.jacrev)):
        np.testing.assert_allclose(ours(lambda a: f(lax, jnp, a))(a),
                                   theirs(lambda a: f(jax.lax, jax.numpy, a))(a),
                                   rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ember.hessian(lambda a: f(lax, jnp, a).sum())(a),
                               jax.hessian(lambda a: f(jax.lax, jax.numpy, a).sum())(a),
                               rtol=1e-4, atol=1e-5)


def test_grad_of_jit_and_jit_of_grad():
    params, h0, xs = _rnn_args()
    loss = lambda p: _rnn(p, h0, xs)[1].sum()  # noqa: E731
    ref = ember.grad(loss)(params)
    for g in (ember.grad(ember.jit(loss))(params), ember.jit(ember.grad(loss))(params),
              ember.jit(ember.grad(loss), backend="interpreter")(params)):
        for a, b in zip(g, ref):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_grad_hoists_loop_invariant_residuals():
    # Residuals computed from consts alone (cos w, sin w) are consts of the backward scan,
    # computed once: nothing of the weight's shape is stacked per iteration.
    def f(w, h):
        return lax.scan(lambda h, _: (jnp.tanh(jnp.cos(w) @ h), None), h, None,
                        length=5)[0].sum()

    w, h = RNG.normal(size=(3, 3)).astype(np.float32), np.ones(3, np.float32)
    text = str(ember.make_jaxpr(ember.grad(f, argnums=(0, 1)))(w, h))
    assert text.count("scan[") == 2 and "f32[5,3,3]" not in text
    with _x64():
        check_grads(f, (w.astype(np.float64), h.astype(np.float64)), order=1,
                    modes=("rev",))


# --------------------------------------------------------------------------- vmap


def _loop(f, *args, axis_size):
    outs = [f(*[a[i] if b else a for a, b in args]) for i in range(axis_size)]
    return ember.tree_util.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *outs)


@pytest.mark.parametrize("which", ["xs", "carry", "consts", "all"])
def test_vmap_matches_loop(which):
    b = 3
    xs = RNG.normal(size=(b, 4, 2)).astype(np.float32)
    c0 = RNG.normal(size=(b, 2)).astype(np.float32)
    a = RNG.normal(size=(b,)).astype(np.float32)

    def f(xs, c0, a):
        return lax.scan(lambda c, x: (jnp.sin(c) * a + x, (c * x).sum()), c0, xs)

    batched = {"xs": (True, False, False), "carry": (False, True, False),
               "consts": (False, False, True), "all": (True, True, True)}[which]
    args = [x if bt else x[0] for x, bt in zip((xs, c0, a), batched)]
    in_axes = tuple(0 if bt else None for bt in batched)
    ref = _loop(f, *zip(args, batched), axis_size=b)
    for fn in (ember.vmap(f, in_axes=in_axes, axis_size=b),
               ember.jit(ember.vmap(f, in_axes=in_axes, axis_size=b))):
        for out, r in zip(fn(*args), ref):
            np.testing.assert_allclose(out, r, rtol=1e-5, atol=1e-6)


def test_vmap_xs_batched_along_another_axis():
    xs = RNG.normal(size=(4, 3)).astype(np.float32)  # scan axis 0, batch axis 1
    c, ys = ember.vmap(lambda xs: lax.scan(_cumsum_body, 0.0, xs), in_axes=1)(xs)
    for j in range(3):
        rc, rys = _np_cumsum_body(xs[:, j])
        np.testing.assert_allclose(c[j], rc, rtol=1e-5)
        np.testing.assert_allclose(ys[j], rys, rtol=1e-5, atol=1e-6)


def test_vmap_of_grad():
    params, h0, xs = _rnn_args()
    xss = np.stack([xs, xs * 0.5, -xs])
    g = ember.vmap(ember.grad(lambda x: _rnn(params, h0, x)[1].sum()))(xss)
    for i in range(3):
        np.testing.assert_allclose(
            g[i], ember.grad(lambda x: _rnn(params, h0, x)[1].sum())(xss[i]), rtol=1e-5,
            atol=1e-6)


# --------------------------------------------------------------------------- fori_loop, map


@pytest.mark.parametrize("mode", ["eager", *BACKENDS])
def test_fori_loop_static_bounds(mode):
    def f(x):
        return lax.fori_loop(1, 5, lambda i, v: v * x + i, 1.0)

    fn = f if mode == "eager" else ember.jit(f, backend=mode)
    v = 1.0
    for i in range(1, 5):
        v = v * 1.5 + i
    np.testing.assert_allclose(fn(np.float32(1.5)), v, rtol=1e-6)
    assert "scan[" in str(ember.make_jaxpr(f)(1.5))
    # reverse mode works (a scan): d/dx against finite differences
    with _x64():
        check_grads(f, (1.5,), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_fori_loop_traced_bounds_is_a_while_loop(backend):
    def f(n, x):
        return lax.fori_loop(0, n, lambda i, v: v * x + i, 1.0)

    out = ember.jit(f, backend=backend)(4, np.float32(1.5))
    v = 1.0
    for i in range(4):
        v = v * 1.5 + i
    np.testing.assert_allclose(out, v, rtol=1e-6)
    assert "while[" in str(ember.make_jaxpr(f)(4, 1.5))
    fwd = ember.jvp(lambda x: ember.jit(f)(4, x), (np.float32(1.5),), (np.float32(1.0),))[1]
    dv = 0.0
    v = 1.0
    for i in range(4):
        v, dv = v * 1.5 + i, dv * 1.5 + v
    np.testing.assert_allclose(fwd, dv, rtol=1e-5)
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        ember.grad(lambda x: ember.jit(f)(4, x))(1.5)


def test_fori_loop_index_dtype_and_bound_errors():
    seen = []
    lax.fori_loop(0, 2, lambda i, v: seen.append(i.dtype) or v, 0.0)
    assert seen == [np.dtype(np.int32)]
    assert int(lax.fori_loop(jnp.int32(0), 3, lambda i, v: v + i, 0)) == 3
    with pytest.raises(TypeError, match="must have equal types"):
        lax.fori_loop(jnp.int32(0), jnp.int8(3), lambda i, v: v, 0.0)
    with pytest.raises(TypeError, match="body_fun argument should be callable"):
        lax.fori_loop(0, 3, None, 0.0)
    with pytest.raises(ValueError, match="unroll"):
        ember.jit(lambda n: lax.fori_loop(0, n, lambda i, v: v, 0.0, unroll=2))(3)


@pytest.mark.parametrize("batch_size", [None, 0, 2, 3, 5, 7])
def test_map_matches_loop(batch_size):
    xs = RNG.normal(size=(5, 2)).astype(np.float32)
    tree = {"x": xs, "y": np.arange(5, dtype=np.int32)}

    def f(t):
        return jnp.sin(t["x"]) * t["y"], t["y"] + 1

    a, b = lax.map(f, tree, batch_size=batch_size)
    ra = np.stack([np.sin(x) * y for x, y in zip(xs, range(5))])
    np.testing.assert_allclose(a, ra, rtol=1e-6)
    np.testing.assert_array_equal(b, np.arange(5) + 1)
    np.testing.assert_allclose(ember.jit(lambda t: lax.map(f, t, batch_size=batch_size))(
        tree)[0], ra, rtol=1e-6)


# --------------------------------------------------------------------------- errors, jaxprs


def test_errors_match_jax():
    xs = jnp.arange(3.0)
    with pytest.raises(TypeError, match="f argument should be a callable"):
        lax.scan(3, 0.0, xs)
    with pytest.raises(ValueError, match=r"`length` argument of 4 which disagrees with "
                                         r"leading axis sizes \[3\]"):
        lax.scan(lambda c, x: (c, c), 0.0, xs, length=4)
    with pytest.raises(ValueError, match="different leading axis sizes: 3, 4"):
        lax.scan(lambda c, x: (c, c), 0.0, (xs, jnp.arange(4.0)))
    with pytest.raises(ValueError, match="no values to scan over and `length` not provided"):
        lax.scan(lambda c, x: (c, c), 0.0, None)
    with pytest.raises(ValueError, match="no leading axis to scan over: 1.0"):
        lax.scan(lambda c, x: (c, c), 0.0, 1.0)
    with pytest.raises(TypeError, match=r"scan body output must be a pair, got ~float32\[\]"):
        lax.scan(lambda c, x: c, 0.0, xs)
    with pytest.raises(ValueError, match="non-negative `int`"):
        lax.scan(lambda c, x: (c, c), 0.0, xs, unroll=-1)
    with pytest.raises(ember.errors.ConcretizationTypeError, match="`length` argument"):
        ember.jit(lambda n: lax.scan(lambda c, x: (c, c), 0.0, None, length=n))(3)


def test_carry_type_errors_match_jax(jax):
    def first_line_and_detail(fn, lax_, np_):
        with pytest.raises(TypeError) as e:
            fn(lax_, np_)
        return str(e.value)

    cases = [
        lambda lax_, np_: lax_.scan(lambda c, x: (c + x, c), np_.int32(0), np_.arange(3.0)),
        lambda lax_, np_: lax_.scan(lambda c, x: (np_.zeros(2), c), 0.0, np_.arange(3.0)),
        lambda lax_, np_: lax_.scan(lambda c, x: ((c[0], c[1] * 1.0), c[0]),
                                    (0.0, np_.int32(1)), np_.arange(3.0)),
    ]
    for case in cases:
        assert (first_line_and_detail(case, lax, jnp)
                == first_line_and_detail(case, jax.lax, jax.numpy))
    msg = first_line_and_detail(
        lambda lax_, np_: lax_.scan(lambda c, x: ((c, c), c), 0.0, np_.arange(3.0)), lax, jnp)
    assert msg.startswith("scan body function carry input and carry output must have the "
                          "same pytree structure")


def test_make_jaxpr_text_matches_jax(jax):
    def f(lax_, np_):
        return lambda xs, y: lax_.scan(lambda c, x: (c + x * y, c * x), 0.0, xs, reverse=True)

    xs = np.arange(3.0, dtype=np.float32)
    ours = str(ember.make_jaxpr(f(lax, jnp))(xs, np.float32(2.0)))
    theirs = str(jax.make_jaxpr(f(jax.lax, jax.numpy))(xs, np.float32(2.0)))
    assert ours == theirs
    text = str(ember.make_jaxpr(lambda xs: lax.map(jnp.sin, xs))(xs))
    assert text == str(jax.make_jaxpr(lambda xs: jax.lax.map(jax.numpy.sin, xs))(xs))


def test_dce_drops_unused_outputs_and_what_only_they_need():
    def f(xs, a, b):
        # carry 0 feeds carry 1; carry 2 and the ys depend on b only through unused outputs
        def body(c, x):
            u, v, w = c
            return (u + x, v * u, w + b), (jnp.sin(x) * b, u)
        return lax.scan(body, (0.0, 1.0, 0.0), xs)

    from ember.interpreters import partial_eval as pe
    xs = np.arange(1.0, 4.0, dtype=np.float32)
    closed = ember.make_jaxpr(f)(xs, 2.0, 3.0)
    # keep only the second carry (v): u is needed by it, w, b and both ys are not
    dced, used_inputs = pe.dce_jaxpr(closed, [False, True, False, False, False])
    (eqn,) = [e for e in dced.eqns if e.primitive.name == "scan"]
    assert eqn.params["num_carry"] == 2 and eqn.params["num_consts"] == 0
    assert len(eqn.outvars) == 2 and len(eqn.params["jaxpr"].out_avals) == 2
    assert used_inputs == [True, False, False]
    out = ember.jaxpr.eval_jaxpr(dced.jaxpr, dced.consts, xs, 2.0, 3.0)
    np.testing.assert_allclose(out[0], f(xs, 2.0, 3.0)[0][1])
