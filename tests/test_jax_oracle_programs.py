"""Random programs (``tests/backends/cpu/random_programs.py``) run by ember and by JAX.

The steps write their programs against the module names ``jnp`` and ``lax``; here they
are pointed at ``jax.numpy`` and ``jax.lax`` for a second run of the same program on the
same inputs (which hold infinities and signed zeros, but no NaN: see ``check_against_jax``).
Exact steps (moves, selections, max/min, sorts, casts, integer math, fmod, signed zeros
included) must agree with JAX bit for bit, the rest within the float type's tolerance.
ember runs eagerly here and under ``jit``; the CPU backend's own fuzzer checks ``jit``
against eager more widely. Skipped where JAX is absent (it is a
test-only oracle; ember never imports it).
"""

import contextlib
import os

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
jax = pytest.importorskip("jax")
jax.config.update("jax_platforms", "cpu")

import ember  # noqa: E402
import ember.numpy as ejnp  # noqa: E402
from tests.backends.cpu import random_programs as rp  # noqa: E402
from tests.backends.cpu import random_steps, random_steps_control, random_steps_more  # noqa: E402

STEP_MODULES = (random_steps, random_steps_more, random_steps_control)


@contextlib.contextmanager
def jax_namespace():
    """The steps' ``jnp`` and ``lax`` are JAX's inside the block."""
    saved = [(m.jnp, m.lax) for m in STEP_MODULES]
    for m in STEP_MODULES:
        m.jnp, m.lax = jax.numpy, jax.lax
    try:
        yield
    finally:
        for m, (np_, lax_) in zip(STEP_MODULES, saved):
            m.jnp, m.lax = np_, lax_


def flush_like_xla(got, want) -> np.ndarray:
    """``got`` with its subnormals set to zero where JAX's ``want`` has a zero: XLA's CPU code
    flushes subnormal results to zero and ember keeps them, as NumPy does (the README's one
    known exception), so e.g. ``jnp.modf`` of a subnormal has a zero fraction in JAX."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype.kind != "f" or got.shape != want.shape:
        return got
    g = got.astype(np.float64)
    subnormal = (g != 0) & (np.abs(g) < float(ejnp.finfo(got.dtype).tiny))
    return np.where(subnormal & (want.astype(np.float64) == 0), want, got).astype(got.dtype)


def check_against_jax(seed: int, max_size: int, under_jit: bool) -> None:
    if jax.config.read("jax_enable_x64"):
        pytest.skip("JAX runs with x64 on")
    shapes = rp.input_shapes(seed, max_size)
    # (No NaN inputs: XLA's CPU min/max reductions over larger arrays drop NaNs, e.g.
    # jnp.min over a (256, 17) column holding NaN and -inf gives -inf, while jnp.min and
    # ember propagate NaN as documented and as NumPy does. Infinities and signed zeros stay.)
    raw = rp.input_arrays(seed, shapes, nans=False)
    program = rp.make_program(seed)
    with np.errstate(all="ignore"), jax_namespace():
        want, exact = program(*[jax.numpy.asarray(a) for a in raw])
        want = [np.asarray(w) for w in want]
    args = [ejnp.asarray(a) for a in raw]
    outputs = lambda *xs: program(*xs)[0]  # noqa: E731
    with np.errstate(all="ignore"):
        got = ember.jit(outputs)(*args) if under_jit else outputs(*args)
    rtol = rp.program_rtol(outputs, *args)
    specials = not all(np.isfinite(a).all() for a in raw)
    for i, (g, w, e) in enumerate(zip(got, want, exact, strict=True)):
        mode = "jit" if under_jit else "eager"
        rp.assert_agree(flush_like_xla(g, w), w, e,
                        f"seed {seed} ({mode}), output {i} {w.dtype}{list(w.shape)}", rtol,
                        specials)


@pytest.mark.parametrize("seed", range(16))
def test_random_program_matches_jax_eagerly(seed):
    check_against_jax(seed, max_size=20_000, under_jit=False)


@pytest.mark.parametrize("seed", range(16, 24))
def test_random_program_matches_jax_under_jit(seed):
    check_against_jax(seed, max_size=20_000, under_jit=True)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(24, 1500))
def test_random_program_matches_jax_fuzz(seed):
    check_against_jax(seed, max_size=100_000, under_jit=bool(seed % 2))


def test_flush_like_xla_forgives_only_subnormals_against_zeros():
    tiny = np.float32(1.4e-45)
    got = np.array([tiny, -tiny, tiny, 1e-30, 0.5, -0.0], np.float32)
    want = np.array([0.0, 0.0, 2 * tiny, 0.0, 0.0, 0.0], np.float32)
    out = flush_like_xla(got, want)
    np.testing.assert_array_equal(out.view(np.uint32),
                                  np.array([0.0, 0.0, tiny, 1e-30, 0.5, -0.0],
                                           np.float32).view(np.uint32))
    ints = np.array([1, 2])
    assert flush_like_xla(ints, np.array([0, 0])) is not None
    np.testing.assert_array_equal(flush_like_xla(ints, np.array([0, 0])), ints)
