"""Fusions that compute the same thing share one kernel (``ProgramBuilder._try_kernel``,
keyed by ``cse.computation_fingerprint``): an optimizer's update of same-shaped parameters
compiles one function, each step running it on its own buffers."""

import numpy as np

import ember
import ember.numpy as jnp
from ember.backends.cpu.executable import KernelPlan
from tests.backends.cpu.helpers import cpu_executable


def kernel_names(f, *args) -> list[str]:
    return [s.name for s in cpu_executable(f, *args).program.steps
            if isinstance(s, KernelPlan)]


def test_same_fusions_share_a_kernel_and_each_reads_its_own_buffers():
    rng = np.random.default_rng(0)
    params = [rng.standard_normal((64, 33)).astype(np.float32) for _ in range(5)]
    grads = [rng.standard_normal((64, 33)).astype(np.float32) for _ in range(5)]
    odd = rng.standard_normal((64, 34)).astype(np.float32)

    def update(ps, gs, odd):
        new = [p - 0.1 * jnp.tanh(g) for p, g in zip(ps, gs)]
        return new, odd - 0.1 * jnp.tanh(odd), [p * 3.0 for p in ps]

    names = kernel_names(update, params, grads, odd)
    # (five updates, each with its parameter's tripling: one kernel; the odd shape another)
    assert len(names) == 6 and len(set(names)) == 2
    new, odd_new, tripled = ember.jit(update, backend="cpu")(params, grads, odd)
    for p, g, n, t in zip(params, grads, new, tripled):
        np.testing.assert_allclose(np.asarray(n), p - 0.1 * np.tanh(g), rtol=2e-6, atol=2e-6)
        np.testing.assert_array_equal(np.asarray(t), p * np.float32(3.0))
    np.testing.assert_allclose(np.asarray(odd_new), odd - 0.1 * np.tanh(odd), rtol=2e-6,
                               atol=2e-6)


def test_fusions_differing_in_a_constant_keep_their_own_kernels():
    xs = [np.linspace(-2, 2, 4096, dtype=np.float32) + k for k in range(3)]

    def f(xs):  # (separate inputs: three fusions)
        return [jnp.exp(x * s) + 1.0 for x, s in zip(xs, (2.0, 3.0, -2.0))]

    names = kernel_names(f, xs)
    assert len(set(names)) == len(names) == 3
    for got, x, scale in zip(ember.jit(f, backend="cpu")(xs), xs, (2.0, 3.0, -2.0)):
        np.testing.assert_allclose(np.asarray(got), np.exp(x * scale) + 1.0, rtol=4e-6)


def test_a_loop_body_shares_kernels_with_the_code_around_it():
    x = np.arange(1000, dtype=np.float32) / 1000

    def f(x):
        y = jnp.sin(x) * 0.5 + x
        return ember.lax.fori_loop(0, 3, lambda i, v: jnp.sin(v) * 0.5 + v, y)

    want = x
    for _ in range(4):
        want = np.sin(want) * np.float32(0.5) + want
    np.testing.assert_allclose(np.asarray(ember.jit(f, backend="cpu")(x)), want, rtol=1e-5)
