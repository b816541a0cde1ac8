"""Eager (op-by-op, no jit) overhead: ember vs JAX vs NumPy.

Run: ``python benchmarks/eager.py``. JAX is measured only when it is installed (it is imported
here only). Each number is the median over repeats of the mean time (µs) per call, or per
operation for the 20-op chains on 10,000 float32 elements. ``ember/jax`` is the ratio of the
two (the target is at most 0.25).
"""

from __future__ import annotations

import os
import statistics
import timeit

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")

REPEATS = 15
CHAIN_OPS = 20


def _sin_chain(jnp, x):
    for _ in range(CHAIN_OPS // 2):
        x = jnp.sin(x) * 1.01
    return x


def _mixed_chain(jnp, x, y):
    for _ in range(2):
        x = jnp.multiply(jnp.add(x, y), 0.5)
        x = jnp.maximum(jnp.tanh(jnp.exp(x)), y)
        x = jnp.tanh(jnp.multiply(jnp.subtract(jnp.where(jnp.greater(x, 0.1), x, y), y), 2.0))
    return x


def _workloads(jnp, asarray, ready):
    a = asarray(np.arange(4, dtype=np.float32))
    b = asarray(np.ones(4, np.float32))
    x = asarray(np.linspace(-1, 1, 10_000, dtype=np.float32))
    y = asarray(np.linspace(1, -1, 10_000, dtype=np.float32))
    return {
        "jnp.add(a, b), 4 x f32": (lambda: ready(jnp.add(a, b)), 5_000, 1),
        "a + 1, 4 x f32": (lambda: ready(a + 1), 5_000, 1),
        "a * 2.0, 4 x f32": (lambda: ready(a * 2.0), 5_000, 1),
        "jnp.sin(a), 4 x f32": (lambda: ready(jnp.sin(a)), 5_000, 1),
        "chain sin(x) * 1.01, 1e4 f32, per op": (lambda: ready(_sin_chain(jnp, x)), 50,
                                                  CHAIN_OPS),
        "chain add/mul/exp/tanh/max/where, 1e4 f32, per op": (
            lambda: ready(_mixed_chain(jnp, x, y)), 50, CHAIN_OPS),
    }


def _measure(libraries: dict) -> dict[str, dict[str, float]]:
    """Median µs per call (per op for chains) of each workload for each library.

    The libraries' repeats are interleaved, so load changes on a shared machine affect all
    of them alike.
    """
    loads = {lib: _workloads(*args) for lib, args in libraries.items()}
    results: dict[str, dict[str, float]] = {lib: {} for lib in libraries}
    for name in loads["ember"]:
        samples: dict[str, list[float]] = {lib: [] for lib in libraries}
        for lib in libraries:
            fn = loads[lib][name][0]
            fn()  # warm up (JAX compiles each op once)
            fn()
        for _ in range(REPEATS):
            for lib in libraries:
                fn, number, ops = loads[lib][name]
                samples[lib].append(timeit.timeit(fn, number=number) / number / ops * 1e6)
        for lib in libraries:
            results[lib][name] = statistics.median(samples[lib])
    return results


def main() -> None:
    import ember.numpy as enp

    libraries = {"ember": (enp, enp.asarray, lambda v: v.block_until_ready()),
                 "numpy": (np, np.asarray, lambda v: v)}
    try:
        import jax.numpy as jjnp
    except ImportError:
        jjnp = None
    if jjnp is not None:
        libraries["jax"] = (jjnp, jjnp.asarray, lambda v: v.block_until_ready())
    results = _measure(libraries)

    header = f"{'workload (µs)':52s} {'ember':>8s} {'jax':>8s} {'numpy':>8s} {'ember/jax':>10s}"
    print(header)
    for name, t in results["ember"].items():
        tj = results.get("jax", {}).get(name)
        jax_col = f"{tj:8.2f}" if tj is not None else f"{'-':>8s}"
        ratio = f"{t / tj:10.2f}" if tj is not None else f"{'-':>10s}"
        print(f"{name:52s} {t:8.2f} {jax_col} {results['numpy'][name]:8.2f} {ratio}")


if __name__ == "__main__":
    main()
