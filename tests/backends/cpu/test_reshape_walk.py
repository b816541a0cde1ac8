"""Loop fusions whose outputs are reshapes merging dims walk the reshape operand's dims
(``KernelBuilder._walk``): same positions, no index division, no vector gathers."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.cpu import executable as cpu_exe

rng = np.random.default_rng(11)


CASES = {
    "repeat": (lambda a: jnp.repeat(a, 3), lambda a: np.repeat(a, 3), (1001,)),
    "repeat rows": (lambda a: jnp.repeat(a, 2, axis=0).reshape(-1), lambda a: np.repeat(
        a, 2, axis=0).reshape(-1), (37, 5)),
    "tile": (lambda a: jnp.tile(a, 4), lambda a: np.tile(a, 4), (333,)),
    "transpose flat": (lambda a: (a.T * 2.0).reshape(-1), lambda a: (a.T * 2.0).reshape(-1),
                       (70, 90)),
    "outer flat": (lambda a: (a[:, None] * a[None, :]).reshape(-1),
                   lambda a: (a[:, None] * a[None, :]).reshape(-1), (129,)),
    "rank 3 to 2": (lambda a: jnp.broadcast_to(a[:, None, :], (6, 4, 7)).reshape(24, 7) + 1.0,
                    lambda a: np.broadcast_to(a[:, None, :], (6, 4, 7)).reshape(24, 7) + 1.0,
                    (6, 7)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_merging_reshapes_give_numpys_values(name):
    f, ref, shape = CASES[name]
    x = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(ember.jit(f)(x)), ref(x))


def test_several_reshaped_outputs_of_one_walk():
    x = rng.standard_normal((50, 3)).astype(np.float32)

    def f(a):
        b = jnp.broadcast_to(a[:, None, :], (50, 4, 3))
        return (b * 2.0).reshape(-1), (b + 1.0).reshape(200, 3)
    got = ember.jit(f)(x)
    b = np.broadcast_to(x[:, None, :], (50, 4, 3))
    np.testing.assert_array_equal(np.asarray(got[0]), (b * 2.0).reshape(-1))
    np.testing.assert_array_equal(np.asarray(got[1]), (b + 1.0).reshape(200, 3))


def test_threaded_walk_matches_one_thread(monkeypatch):
    x = rng.standard_normal(200_003).astype(np.float32)
    f = ember.jit(lambda a: jnp.repeat(a * 2.0, 3))
    threaded = np.asarray(f(x))
    monkeypatch.setattr(cpu_exe, "PARALLEL_MIN_WORK", 1 << 40)
    single = np.asarray(ember.jit(lambda a: jnp.repeat(a * 2.0, 3))(x))
    np.testing.assert_array_equal(threaded, single)
    np.testing.assert_array_equal(threaded, np.repeat(x * 2.0, 3))


def test_repeat_reads_without_gathers(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))
    x = rng.standard_normal(100_000).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda a: jnp.repeat(a, 3))(x)),
                                  np.repeat(x, 3))
    ember.backends.get_backend("cpu").wait_for_background()
    optimized = [open(p).read() for p in glob.glob(os.path.join(tmp_path, "*.llvm.opt.ll"))]
    assert optimized and all("masked.gather" not in text for text in optimized)
    assert all(" udiv " not in text and " urem " not in text for text in optimized)


def test_a_walk_keeps_a_parallel_dim():
    """Merging a leading unit dim away would leave one item to split: the loop walks the
    output's own dims instead (and stays correct either way)."""
    from ember.backends.cpu.kernel_gen import WALK_MIN_EXTENT
    x = rng.standard_normal((1, 40_000, 3)).astype(np.float32)
    f = ember.jit(lambda a: (a * 2.0 + 1.0).transpose(0, 2, 1).reshape(-1))
    np.testing.assert_array_equal(np.asarray(f(x)), (x * 2.0 + 1.0).transpose(0, 2, 1)
                                  .reshape(-1))
    assert WALK_MIN_EXTENT > 1
