"""Native ``reduce_window`` (pooling) and ``select_and_scatter_add`` kernels
(``ember.backends.cpu.window_kernel``): bit for bit against the HLO evaluator over a grid of
windows, strides, paddings, dilations, reducers and dtypes, NaN and infinities included;
against JAX (when installed) for pooling and its gradients; threaded and single-threaded
runs agree exactly."""

import itertools

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import dtypes, lax
from ember.backends import get_backend
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu import window_kernel
from ember.backends.cpu.executable import KernelPlan, LibraryPlan
from ember.compiler.evaluator import evaluate_computation
from ember.compiler.hlo import Builder, Module, Shape
from ember.lax.windowed import select_and_scatter_add_numpy, select_and_scatter_add_p
from tests.backends.cpu.helpers import optimized, x64

BIG = {"maximum": True, "minimum": False}


def window_module(shape, dt, opcode, init, window, strides=None, padding=None, base=None,
                  dilation=None, init_param=False, body=None):
    """``reduce_window(x, init)`` with the reducer ``opcode`` (or the body ``body(builder,
    a, c)``); ``init_param``: the init is a second parameter, not a constant."""
    dt = np.dtype(dt)
    m = Module("m")
    bb = Builder(m, "body")
    a, c = (bb.parameter(i, Shape(dt, ())) for i in range(2))
    region = bb.build(body(bb, a, c) if body else bb.op(opcode, a, c))
    b = Builder(m, "main")
    x = b.parameter(0, Shape(dt, tuple(shape)))
    start = b.parameter(1, Shape(dt, ())) if init_param else b.constant(init, dt)
    rank = len(shape)
    b.build(b.op("reduce_window", x, start, calls=[region], window_dimensions=tuple(window),
                 window_strides=tuple(strides or (1,) * rank),
                 padding=tuple(padding or ((0, 0),) * rank),
                 base_dilations=tuple(base or (1,) * rank),
                 window_dilations=tuple(dilation or (1,) * rank)), entry=True)
    return m


def run_native(m, args):
    exe = get_backend("cpu").compile(m)
    return exe.execute(args)[0], exe.program.steps


def values(rng, shape, dt, opcode):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        return rng.integers(0, 4 if opcode == "multiply" else 100, shape).astype(dt)
    if opcode == "multiply":
        return (1 + 0.1 * rng.standard_normal(shape)).astype(dt)
    return (rng.standard_normal(shape) * 10.0 ** rng.integers(-2, 3, shape)).astype(dt)


def identity(opcode, dt):
    dt = np.dtype(dt)
    if opcode in ("add", "or"):
        return 0
    if opcode in ("multiply", "and"):
        return 1
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return info.max if opcode == "minimum" else info.min
    return np.inf if opcode == "minimum" else -np.inf


def check_native(m, args, kernels=1):
    """Runs ``m`` natively: every step a kernel, the result the evaluator's, bit for bit."""
    want = evaluate_computation(m.entry, args)
    got, steps = run_native(m, args)
    assert [type(s) for s in steps] == [KernelPlan] * kernels
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), np.asarray(want).view(np.uint8))
    return got


OPS_BY_DTYPE = [
    (np.float32, ("add", "maximum", "minimum", "multiply")),
    (np.float64, ("add", "maximum")),
    (np.float16, ("add", "minimum")),
    (dtypes.bfloat16, ("add", "maximum")),
    (np.int32, ("add", "maximum", "minimum", "multiply")),
    (np.int8, ("add", "maximum")),
    (np.uint8, ("minimum", "add")),
    (np.bool_, ("and", "or")),
]


@pytest.mark.parametrize("seed", range(40))
def test_random_windows_match_the_evaluator_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    dt, ops = OPS_BY_DTYPE[seed % len(OPS_BY_DTYPE)]
    opcode = ops[(seed // len(OPS_BY_DTYPE)) % len(ops)]
    rank = int(rng.integers(1, 5))
    shape = tuple(int(d) for d in rng.integers(1, 8, rank))
    window = tuple(int(rng.integers(1, min(n, 4) + 1)) for n in shape)
    strides = tuple(int(rng.integers(1, 4)) for _ in shape)
    padding = tuple((int(rng.integers(-1, 3)), int(rng.integers(-1, 3))) for _ in shape)
    base = tuple(int(rng.integers(1, 3)) for _ in shape)
    dilation = tuple(int(rng.integers(1, 3)) for _ in shape)
    # (an init other than the identity: padding combines it too)
    init = identity(opcode, dt) if rng.random() < 0.5 or dt == np.bool_ else 3
    m = window_module(shape, dt, opcode, init, window, strides, padding, base, dilation)
    out_dims = m.entry.root.dims
    x = values(rng, shape, dt, opcode)
    if 0 in out_dims:
        return
    check_native(m, [x])


@pytest.mark.parametrize("case", [
    # NHWC pooling: SAME (padding on both sides), VALID, overlapping and strided windows
    ((2, 9, 11, 5), (1, 3, 3, 1), (1, 2, 2, 1), ((0, 0), (1, 1), (1, 1), (0, 0))),
    ((2, 8, 8, 16), (1, 2, 2, 1), (1, 2, 2, 1), None),
    # NCHW (the window along the minor dim), a 1-D window wider than the dim's padding
    ((3, 2, 10, 10), (1, 1, 3, 3), (1, 1, 1, 1), ((0, 0), (0, 0), (2, 2), (2, 2))),
    ((17,), (5,), (2,), ((7, 7),)),
    # pads wider than the window (some taps never inside), a crop
    ((6, 6), (2, 2), (1, 1), ((3, 3), (-2, 4))),
])
@pytest.mark.parametrize("opcode", ["add", "maximum", "minimum"])
def test_pooling_windows_on_floats(case, opcode):
    shape, window, strides, padding = case
    x = values(np.random.default_rng(3), shape, np.float32, opcode)
    m = window_module(shape, np.float32, opcode, identity(opcode, np.float32), window,
                      strides, padding)
    check_native(m, [x])


@pytest.mark.parametrize("opcode", ["maximum", "minimum", "add"])
def test_nan_and_infinities_propagate_as_in_xla(opcode):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 9, 9, 3)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan
    x[1, 4, 4, 1] = np.inf
    x[2, 3, 5, 2] = -np.inf
    x[3, 8, 8, :] = np.nan
    m = window_module(x.shape, np.float32, opcode, identity(opcode, np.float32),
                      (1, 3, 3, 1), (1, 2, 2, 1), ((0, 0), (1, 1), (1, 1), (0, 0)))
    got = check_native(m, [x])
    assert np.isnan(got[0, 0, 0, 0]) and np.isnan(got[3, 4, 4, :]).all()
    if opcode == "maximum":
        assert got[1, 2, 2, 1] == np.inf
        assert np.isfinite(got[2, 1, 2, 2])  # (-inf loses to its neighbours)


def test_large_windows_run_as_loops():
    # Windows of more than UNROLL_MAX elements: a loop nest per output element.
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 20, 20, 4)).astype(np.float32)
    for opcode in ("add", "maximum"):
        m = window_module(x.shape, np.float32, opcode, identity(opcode, np.float32),
                          (1, 9, 9, 1), (1, 3, 3, 1), ((0, 0), (4, 4), (4, 4), (0, 0)),
                          dilation=(1, 1, 2, 1))
        assert 81 > window_kernel.UNROLL_MAX
        check_native(m, [x])
    y = rng.integers(-50, 50, (40, 40)).astype(np.int32)
    m = window_module(y.shape, np.int32, "add", 7, (9, 9), (2, 2), ((1, 1), (0, 0)),
                      base=(2, 1))
    check_native(m, [y])


def test_a_general_body_and_a_runtime_init():
    # A body that is not one op of its parameters, an init that is a parameter.
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 12)).astype(np.float32)

    def body(bb, a, c):  # acc * 0.5 + x: order matters
        return bb.op("add", bb.op("multiply", a, bb.constant(0.5, np.float32)), c)
    m = window_module(x.shape, np.float32, None, 1.0, (2, 3), (1, 2), ((1, 0), (1, 1)),
                      body=body)
    check_native(m, [x])
    m = window_module(x.shape, np.float32, "maximum", None, (2, 3), (1, 2),
                      ((1, 0), (1, 1)), init_param=True)
    for init in (np.float32(-np.inf), np.float32(0.25)):
        check_native(m, [x, init])


def test_variadic_windows_run_natively():
    # A (value, index) argmax window through ``lax.reduce_window`` on a pytree, and
    # ``select_and_gather_add`` (max pooling's JVP): tuple-shaped reduce_window kernels.
    rng = np.random.default_rng(15)
    x = rng.integers(0, 4, (3, 10, 7)).astype(np.float32)
    x[0, 0, 0] = np.nan
    i = np.arange(x.size, dtype=np.int32).reshape(x.shape)

    def argmax_window(x, i):
        def body(a, b):
            keep = (a[0] > b[0]) | ((a[0] == b[0]) & (a[1] < b[1]))
            return lax.select(keep, a[0], b[0]), lax.select(keep, a[1], b[1])
        return lax.reduce_window((x, i), (-jnp.inf, np.int32(2**31 - 1)), body, (1, 3, 2),
                                 (1, 2, 1), ((0, 0), (1, 1), (0, 1)))
    module = optimized(argmax_window, x, i)
    exe = get_backend("cpu").compile(module)
    assert [type(s) for s in exe.program.steps] == [KernelPlan]
    got = exe.execute([x, i])
    want = evaluate_computation(module.entry, [x, i])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)

    t = rng.standard_normal(x.shape).astype(np.float32)

    def jvp(x, t):
        return ember.jvp(lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3),
                                                     (1, 2, 2), "SAME"), (x,), (t,))[1]
    module = optimized(jvp, x, t)
    exe = get_backend("cpu").compile(module)
    assert all(type(s) is KernelPlan for s in exe.program.steps)
    (want,) = evaluate_computation(module.entry, [x, t])
    np.testing.assert_array_equal(exe.execute([x, t])[0], want)
    np.testing.assert_array_equal(want, np.asarray(jvp(x, t)))  # (eager)


def test_scans_keep_their_kernel_and_their_rule():
    # A cumulative sum: ``scan_kernel`` (float64 accumulation); from another init (a
    # parameter, or a non-identity constant) the library runs the evaluator's general rule.
    x = np.random.default_rng(4).standard_normal((3, 300)).astype(np.float32)
    scan = dict(window=(1, 300), padding=((0, 0), (299, 0)))
    got = check_native(window_module(x.shape, np.float32, "add", 0.0, **scan), [x])
    np.testing.assert_array_equal(got, np.cumsum(x.astype(np.float64), 1).astype(np.float32))
    m = window_module(x.shape, np.float32, "add", 1.0, **scan)
    _, steps = run_native(m, [x])
    assert [type(s) for s in steps] == [LibraryPlan]


@pytest.mark.parametrize("shape", [(16, 64, 64, 32), (2, 3, 300, 300)])
def test_threaded_and_single_threaded_runs_agree_exactly(shape, monkeypatch):
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    m = window_module(shape, np.float32, "add", 0.0, (1, 3, 3, 1), (1, 2, 2, 1),
                      ((0, 0), (1, 1), (1, 1), (0, 0)))
    exe = get_backend("cpu").compile(m)
    (plan,) = exe.program.steps
    assert plan.extent > 1 and plan.work >= cpu_exe.PARALLEL_MIN_WORK  # (split)
    threaded = exe.execute([x])[0]
    monkeypatch.setattr(cpu_exe, "PARALLEL_MIN_WORK", 1 << 62)
    single = get_backend("cpu").compile(m).execute([x])[0]
    np.testing.assert_array_equal(threaded.view(np.uint32), single.view(np.uint32))
    np.testing.assert_array_equal(threaded, evaluate_computation(m.entry, [x]))


def test_threaded_max_pool_gradient_agrees_with_single_threaded(monkeypatch):
    x = np.random.default_rng(13).integers(0, 5, (8, 40, 40, 32)).astype(np.float32)
    g = np.random.default_rng(14).standard_normal((8, 40, 40, 32)).astype(np.float32)

    def f(x):  # (stride 1 and ties: several windows select one element)
        pooled = lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 1, 1, 1), "SAME")
        return (pooled * g).sum()
    threaded = np.asarray(ember.jit(ember.grad(f))(x))
    monkeypatch.setattr(cpu_exe, "PARALLEL_MIN_WORK", 1 << 62)
    single = np.asarray(ember.jit(ember.grad(lambda x: f(x)))(x))
    np.testing.assert_array_equal(threaded.view(np.uint32), single.view(np.uint32))
    np.testing.assert_array_equal(threaded, np.asarray(ember.grad(f)(x)))


def test_empty_outputs_and_operands():
    for shape, window, padding in (((0, 4), (1, 2), ((0, 0), (0, 0))),
                                   ((3, 1), (1, 2), ((0, 0), (0, 0))),
                                   ((0, 2), (1, 1), ((1, 1), (0, 0)))):
        m = window_module(shape, np.float32, "maximum", -np.inf, window, padding=padding)
        x = np.zeros(shape, np.float32)
        got, _ = run_native(m, [x])
        np.testing.assert_array_equal(got, evaluate_computation(m.entry, [x]))


# ------------------------------------------------------------------ select_and_scatter_add


def _scatter_ref(source, operand, select_prim, window, strides, padding):
    return select_and_scatter_add_numpy(source, operand, select_prim=select_prim,
                                        window_dimensions=window, window_strides=strides,
                                        padding=padding)


def _slow_scatter(source, operand, select_prim, window, strides, padding):
    """A loop over windows: each selects the first maximum (minimum) in row-major order,
    padding reading as the identity; its source value added there, windows in order."""
    ident = -np.inf if select_prim == "ge" else np.inf
    if operand.dtype.kind in "iu":
        info = np.iinfo(operand.dtype)
        ident = info.min if select_prim == "ge" else info.max
    out = np.zeros(operand.shape, source.dtype)
    for o in itertools.product(*map(range, source.shape)):
        best, chosen = ident, None
        first = None
        for k in itertools.product(*map(range, window)):
            pos = tuple(oi * s + ki - lo for oi, s, ki, (lo, _) in
                        zip(o, strides, k, padding))
            inside = all(0 <= p < n for p, n in zip(pos, operand.shape))
            v = operand[pos] if inside else ident
            first = (pos, inside) if first is None else first
            keep = best >= v if select_prim == "ge" else best <= v
            if not keep:
                best, chosen = v, (pos, inside)
        pos, inside = chosen if chosen is not None else first
        if inside:
            out[pos] += source[o]
    return out


SCATTER_CASES = [
    ((2, 9, 9, 3), (1, 3, 3, 1), (1, 2, 2, 1), ((0, 0), (1, 1), (1, 1), (0, 0))),
    ((2, 8, 8, 3), (1, 2, 2, 1), (1, 2, 2, 1), ((0, 0),) * 4),
    ((7, 6), (3, 2), (1, 1), ((1, 1), (0, 1))),  # overlapping windows: sums of several
    ((11,), (4,), (3,), ((2, 3),)),
    ((5, 5), (2, 2), (3, 3), ((0, 0), (0, 0))),  # gaps between windows
    ((6, 6), (2, 3), (2, 1), ((-1, 1), (2, 0))),  # a crop
    ((1, 5, 4), (1, 2, 3), (3, 2, 4), ((0, 0), (1, 0), (2, 2))),  # strides past the dims
    ((), (), (), ()),
]


@pytest.mark.parametrize("case", SCATTER_CASES)
@pytest.mark.parametrize("select_prim", ["ge", "le"])
def test_select_and_scatter_add_native_matches_slow_loops(case, select_prim):
    shape, window, strides, padding = case
    rng = np.random.default_rng(6)
    x = rng.integers(-3, 3, shape).astype(np.float32)  # (many ties)
    x.flat[::7] = np.nan if select_prim == "ge" else x.flat[::7]
    out = lax.reduce_window_shape_tuple(shape, window, strides, padding)
    s = rng.standard_normal(out).astype(np.float32)

    def f(s, x):
        return select_and_scatter_add_p.bind(s, x, select_prim=select_prim,
                                             window_dimensions=window, window_strides=strides,
                                             padding=padding)
    got = np.asarray(ember.jit(f)(s, x))
    slow = _slow_scatter(s, x, select_prim, window, strides, padding)
    np.testing.assert_allclose(got, slow, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(got, _scatter_ref(s, x, select_prim, window, strides,
                                                    padding))
    np.testing.assert_array_equal(got, np.asarray(f(s, x)))  # (eager)
    steps = ember.jit(f).lower(s, x).compile().as_text()
    assert "ember.window_select" in steps and "ember.window_scatter_selected" in steps


@pytest.mark.parametrize("dt", [np.float64, np.float16, dtypes.bfloat16])
def test_select_and_scatter_add_on_other_floats_matches_numpy_bit_for_bit(dt):
    rng = np.random.default_rng(12)
    x = rng.integers(-4, 4, (2, 9, 9, 3)).astype(dt)
    s = rng.standard_normal((2, 8, 8, 3)).astype(dt)
    params = dict(select_prim="ge", window_dimensions=(1, 3, 3, 1),
                  window_strides=(1, 1, 1, 1), padding=((0, 0), (1, 0), (0, 1), (0, 0)))

    def f(s, x):
        return select_and_scatter_add_p.bind(s, x, **params)
    with x64(dt == np.float64):
        got = np.asarray(ember.jit(f)(s, x))
    assert got.dtype == np.dtype(dt)
    want = _scatter_ref(s, x, "ge", params["window_dimensions"], params["window_strides"],
                        params["padding"])
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_select_and_scatter_add_runs_native_kernels_on_ints():
    rng = np.random.default_rng(7)
    x = rng.integers(-5, 5, (3, 10, 10)).astype(np.int32)
    s = rng.integers(-9, 9, (3, 5, 5)).astype(np.int32)
    params = dict(select_prim="ge", window_dimensions=(1, 3, 3), window_strides=(1, 2, 2),
                  padding=((0, 0), (1, 1), (1, 1)))
    got = np.asarray(ember.jit(lambda s, x: select_and_scatter_add_p.bind(s, x, **params))(
        s, x))
    np.testing.assert_array_equal(got, _slow_scatter(s, x, "ge", (1, 3, 3), (1, 2, 2),
                                                     params["padding"]))


# ------------------------------------------------------------------ against JAX


def _pair(name):
    jax = pytest.importorskip("jax")
    import jax.numpy as jjnp
    return ((ember, jnp, lax), (jax, jjnp, jax.lax))[name == "jax"]


POOLS = {
    "max": lambda j, m, lx: lambda x: lx.reduce_window(x, -m.inf, lx.max, (1, 3, 3, 1),
                                                       (1, 2, 2, 1), "SAME"),
    "avg": lambda j, m, lx: lambda x: lx.reduce_window(x, 0., lx.add, (1, 3, 3, 1),
                                                       (1, 2, 2, 1), "SAME") / 9.0,
    "relu_max": lambda j, m, lx: lambda x: lx.reduce_window(
        m.maximum(x, 0.), -m.inf, lx.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
    "avg_grad": lambda j, m, lx: j.grad(lambda x: lx.reduce_window(
        x, 0., lx.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID").sum()),
    "max_grad": lambda j, m, lx: j.grad(lambda x: (lx.reduce_window(
        x, -m.inf, lx.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME") ** 2).sum()),
    "min_grad_dilated": lambda j, m, lx: j.grad(lambda x: lx.reduce_window(
        x, m.inf, lx.min, (2, 2), (1, 1), "VALID", base_dilation=(2, 1)).sum()),
    "max_jvp": lambda j, m, lx: lambda x: j.jvp(lambda x: lx.reduce_window(
        x, -m.inf, lx.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"), (x,), (m.cos(x),))[1],
}


@pytest.mark.parametrize("name", list(POOLS))
def test_pooling_and_gradients_match_jax(name):
    jax_mods = _pair("jax")
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 12, 10, 8) if "dilated" not in name else (7, 9))
    x = x.astype(np.float32)
    if name == "max_grad":  # ties: the first maximum gets the gradient
        x[0, 2:5, 2:5, 0] = 1.5
    want = np.asarray(jax_mods[0].jit(POOLS[name](*jax_mods))(x))
    got = np.asarray(ember.jit(POOLS[name](ember, jnp, lax))(x))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_max_pool_gradient_sums_in_xla_order():
    # Overlapping windows selecting one element add several source values: the same
    # order as XLA's (windows in increasing order), so float32 sums agree bit for bit.
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(9)
    x = np.zeros((64, 64), np.float32)
    x[::5, ::5] = 1.0
    g = (rng.standard_normal((62, 62)) * 10.0 ** rng.integers(-4, 5, (62, 62)))
    g = g.astype(np.float32)

    def f(lx, x, g):
        return (lx.reduce_window(x, -np.inf, lx.max, (3, 3), (1, 1), "VALID") * g).sum()
    want = np.asarray(jax.jit(jax.grad(lambda x: f(jax.lax, x, g)))(x))
    got = np.asarray(ember.jit(ember.grad(lambda x: f(lax, x, g)))(x))
    np.testing.assert_array_equal(got, want)
    eager = np.asarray(ember.grad(lambda x: f(lax, x, g))(x))
    np.testing.assert_array_equal(eager, want)


@pytest.mark.parametrize("window, strides, fused", [
    ((1, 2, 2, 1), (1, 2, 2, 1), True), ((1, 3, 3, 1), (1, 2, 2, 1), True),
    # (stride 1: each relu computed 9 times per element, past MAX_EVALUATIONS)
    ((1, 3, 3, 1), (1, 1, 1, 1), False)])
def test_a_relu_feeding_a_pool_fuses_into_its_kernel(window, strides, fused):
    x = np.random.default_rng(10).standard_normal((4, 16, 16, 8)).astype(np.float32)

    def f(x):
        pooled = lax.reduce_window(jnp.maximum(x, 0.), -jnp.inf, lax.max, window, strides,
                                   "SAME")
        return pooled / 4.0
    compiled = ember.jit(f).lower(x).compile()
    entry = compiled.as_text().split("ENTRY")[1]
    # (the pool fuses with the division that reads it in every case)
    assert entry.count("fusion(") == (1 if fused else 2), entry
    assert "reduce_window(" not in entry
    np.testing.assert_array_equal(np.asarray(compiled(x)), np.asarray(f(x)))


def test_fused_windows_match_the_evaluator_bit_for_bit():
    # Producers (a pad with interior padding: avg pooling's gradient) and a consumer fused
    # with a window; a window reading a window (not fused: 9 reads of each element).
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 8, 8, 4)).astype(np.float32)

    def f(x):
        y = lax.pad(jnp.sqrt(x * x + 1.0), 0.0, ((0, 0, 0), (1, 1, 1), (1, 1, 1), (0, 0, 0)))
        s = lax.reduce_window(y, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "VALID")
        m = lax.reduce_window(s, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 1, 1, 1), "SAME")
        return m * m - s * 0.5
    got = np.asarray(ember.jit(f)(x))
    np.testing.assert_allclose(got, np.asarray(f(x)), rtol=1e-6)
    module = optimized(f, x)
    (want,) = evaluate_computation(module.entry, [x])
    exe = get_backend("cpu").compile(module)
    assert all(type(s) is KernelPlan for s in exe.program.steps)
    # (sqrt, an expensive op the window would recompute, is computed once into a buffer)
    ops = [i.opcode for i in module.entry.instructions]
    assert "pad" not in ops and "reduce_window" not in ops and ops.count("fusion") == 3, ops
    np.testing.assert_array_equal(exe.execute([x])[0], want)


# ------------------------------------------------------------------ memory bounds


def _guarded_run(module, arrays):
    """Runs each kernel of ``module``'s program with every buffer against an inaccessible
    page, after its end and then before its start (an access outside faults), and returns
    the last kernel's output."""
    from ember.backends.cpu import llvm_support
    from ember.backends.cpu.executable import CpuExecutable
    from ember.backends.cpu.program import KernelStep, ProgramBuilder
    from tests.backends.cpu.test_short_rows import _guarded, _kernel_runner

    program = ProgramBuilder(module, prefix=f"guard{next(_guard_names)}").build()
    lib = llvm_support.LoadedObject(llvm_support.compile_ir(program.ir_text).object_code)
    exe = CpuExecutable(program, lib, module)
    assert all(type(s) is KernelStep for s in program.steps)
    for at_end in (True, False):
        results, keep = {}, []  # (the steps' outputs by buffer)
        for step in program.steps:
            run = _kernel_runner(program, exe, step.info.name)
            ins = []
            for ref in step.inputs:
                if ref.kind == "param":
                    value = arrays[ref.index]
                elif ref.kind == "const":
                    value = program.constants[ref.index]
                else:
                    value = results[(ref.kind, ref.index)]
                arr, k = _guarded(np.ascontiguousarray(value, ref.dtype).reshape(ref.dims),
                                  at_end)
                ins.append(arr)
                keep.append(k)
            (ref,) = step.outputs
            out, k = _guarded(np.zeros(ref.dims, ref.dtype), at_end)
            keep.append(k)
            run(ins + [out], 0, step.info.extent)
            results[(ref.kind, ref.index)] = out.copy()
        yield results[(ref.kind, ref.index)]


_guard_names = itertools.count()


@pytest.mark.parametrize("case", [
    ((5, 7, 3), (2, 3, 1), (2, 2, 1), ((1, 2), (3, 1), (0, 0)), (1, 2, 1), (2, 1, 1)),
    ((9, 4), (3, 2), (3, 1), ((-1, 2), (1, -1)), (1, 1), (1, 3)),
    ((4, 33), (1, 9), (1, 1), ((0, 0), (4, 4)), (1, 1), (1, 9)),  # a large window: loops
])
def test_window_kernels_stay_inside_their_buffers(case):
    shape, window, strides, padding, base, dilation = case
    x = np.random.default_rng(16).standard_normal(shape).astype(np.float32)
    m = window_module(shape, np.float32, "add", 0.5, window, strides, padding, base, dilation)
    want = evaluate_computation(m.entry, [x])
    for got in _guarded_run(m, [x, np.float32(0.5)]):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", SCATTER_CASES[:6])
def test_select_and_scatter_kernels_stay_inside_their_buffers(case):
    shape, window, strides, padding = case
    rng = np.random.default_rng(17)
    x = rng.integers(-3, 3, shape).astype(np.float32)
    s = rng.standard_normal(lax.reduce_window_shape_tuple(shape, window, strides, padding))
    s = s.astype(np.float32)

    def f(s, x):
        return select_and_scatter_add_p.bind(s, x, select_prim="ge",
                                             window_dimensions=window, window_strides=strides,
                                             padding=padding)
    module = optimized(f, s, x)
    for got in _guarded_run(module, [s, x]):
        np.testing.assert_array_equal(got, _scatter_ref(s, x, "ge", window, strides, padding))


def test_long_producer_chains_are_not_copied_into_every_window_position():
    # A fused window emits its producers once per window element: a chain of 200 ops under
    # an 8x8 window stays a kernel of its own (the fused code would be past the kernel's
    # size budget and run in the library).
    x = np.random.default_rng(18).standard_normal((2, 16, 16, 4)).astype(np.float32)

    def f(x):
        for i in range(200):
            x = x * 1.0001 + 0.001 if i % 2 else jnp.maximum(x, -3.0)
        return lax.reduce_window(x, 0.0, lax.add, (1, 8, 8, 1), (1, 8, 8, 1), "VALID")
    module = optimized(f, x)
    exe = get_backend("cpu").compile(module)
    assert all(type(s) is KernelPlan for s in exe.program.steps)
    assert len(exe.program.steps) >= 2
    np.testing.assert_allclose(exe.execute([x])[0], np.asarray(f(x)), rtol=1e-6)


@pytest.mark.parametrize("reducer", ["max", "min"])
def test_eager_windows_order_signed_zeros_as_jit_and_xla(reducer):
    x = np.zeros((1, 6, 6, 2), np.float32)
    x[..., 0] = -0.0
    x[0, ::2, ::2, 0] = 0.0
    x[0, 1, 1, 1] = -0.0
    x[0, 4, 5, 1] = np.nan
    init, op = (-np.inf, lax.max) if reducer == "max" else (np.inf, lax.min)

    def pool(v):
        return lax.reduce_window(v, init, op, (1, 3, 3, 1), (1, 1, 1, 1), "SAME")
    eager, jitted = np.asarray(pool(x)), np.asarray(ember.jit(pool)(x))
    np.testing.assert_array_equal(eager, jitted)
    np.testing.assert_array_equal(np.signbit(eager), np.signbit(jitted))
    # XLA: -0 below +0, so a window holding both zeros gives +0 (max) or -0 (min).
    mixed = eager[0, 1, 1, 0]
    assert mixed == 0 and bool(np.signbit(mixed)) == (reducer == "min")
