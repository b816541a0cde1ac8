"""Dispatch overhead: a cached ``jit`` call and an eager op on a tiny array, ember vs JAX.

Run: ``python benchmarks/dispatch.py``. JAX is measured only when it is installed. Each
number is the median over repeats of the mean time per call (µs).
"""

from __future__ import annotations

import os
import statistics
import timeit

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")

REPEATS, NUMBER = 7, 2000


def _per_call_us(fn) -> float:
    fn()  # compile / warm up
    times = timeit.repeat(fn, repeat=REPEATS, number=NUMBER)
    return statistics.median(times) / NUMBER * 1e6


def _workloads(jax, jnp):
    x = jnp.asarray(np.arange(3, dtype=np.float32))
    add_one = jax.jit(lambda v: v + 1)
    mlp_layer = jax.jit(lambda v: jnp.tanh(v * 2.0 + 1.0).sum())
    return {
        "jit(x + 1), cached call": lambda: add_one(x).block_until_ready(),
        "jit(tanh(2x + 1).sum()), cached call": lambda: mlp_layer(x).block_until_ready(),
        "eager x + 1": lambda: (x + 1).block_until_ready(),
    }


def main() -> None:
    import ember
    import ember.numpy as enp

    results = {"ember": {k: _per_call_us(f) for k, f in _workloads(ember, enp).items()}}
    try:
        import jax
        import jax.numpy as jjnp
    except ImportError:
        jax = None
    if jax is not None:
        results["jax"] = {k: _per_call_us(f) for k, f in _workloads(jax, jjnp).items()}
    print(f"{'workload':42s} {'ember µs':>10s} {'jax µs':>10s} {'ember/jax':>10s}")
    for name, t in results["ember"].items():
        if "jax" in results:
            tj = results["jax"][name]
            print(f"{name:42s} {t:10.2f} {tj:10.2f} {t / tj:10.2f}")
        else:
            print(f"{name:42s} {t:10.2f} {'-':>10s} {'-':>10s}")


if __name__ == "__main__":
    main()
