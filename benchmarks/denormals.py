"""Workloads that meet denormal floats: ember with IEEE denormals (the default), ember with
``EMBER_CPU_FLUSH_DENORMALS=1`` (flushed to zero, as XLA's CPU code runs), and JAX.

Run from the repository root: ``python benchmarks/denormals.py``. Each ember mode runs in a
fresh process (the switch is read when code compiles); JAX runs only when installed. Prints
the minimum of 20 timed calls (after >= 0.3 s of warm-up) per workload in microseconds.

Workloads: (s) softmax over (4096, 1024) float32 logits drawn uniformly from [0, 5) and from
[0, 200) (then ~8% of the exponentials are float32 denormals); (m) a ``fori_loop`` of 1,000
``tanh(A @ v)`` steps with a 4 x 4 matrix whose iteration decays towards zero (denormal
values from ~700 steps on); (e) ``exp`` of 1e5 float32 denormals.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np


def _time(fn) -> float:
    fn()
    start = time.perf_counter()
    while time.perf_counter() - start < 0.3:
        fn()
    times = []
    for _ in range(20):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times) * 1e6


def workloads(root, jnp, lax):
    rng = np.random.default_rng(0)
    out = {}
    for spread in (5.0, 200.0):
        x = root.device_put((rng.random((4096, 1024)) * spread).astype(np.float32))
        f = root.jit(lambda v: root.nn.softmax(v, axis=-1))
        out[f"softmax, logits in [0, {spread:g})"] = _time(
            lambda f=f, x=x: f(x).block_until_ready())
    matrix_rng = np.random.default_rng(0)  # (a 4 x 4 whose iteration reaches denormals
    # after ~700 steps and stays there)
    a = root.device_put((matrix_rng.standard_normal((4, 4)) / 2).astype(np.float32))
    v = root.device_put(matrix_rng.standard_normal(4).astype(np.float32))
    f = root.jit(lambda a, v: lax.fori_loop(0, 1000, lambda i, v: jnp.tanh(a @ v), v))
    out["fori_loop 1000 x tanh(A @ v), 4 x 4, decaying"] = _time(
        lambda: f(a, v).block_until_ready())
    d = root.device_put(np.full(100_000, 1e-40, np.float32))
    f = root.jit(jnp.exp)
    out["exp of 1e5 float32 denormals"] = _time(lambda: f(d).block_until_ready())
    return out


def child(engine: str) -> None:
    if engine == "jax":
        import jax
        jax.config.update("jax_platforms", "cpu")
        print(json.dumps(workloads(jax, jax.numpy, jax.lax)))
    else:
        import ember
        print(json.dumps(workloads(ember, ember.numpy, ember.lax)))


def main() -> None:
    runs = {"ember (IEEE)": ("ember", "0"), "ember (flushed)": ("ember", "1"),
            "jax": ("jax", "0")}
    results = {}
    for label, (engine, flush) in runs.items():
        env = dict(os.environ, EMBER_CPU_FLUSH_DENORMALS=flush)
        done = subprocess.run([sys.executable, __file__, "--child", engine], env=env,
                              capture_output=True, text=True)
        if done.returncode != 0:
            if engine == "jax":
                continue  # (JAX not installed)
            raise RuntimeError(done.stderr)
        results[label] = json.loads(done.stdout.strip().splitlines()[-1])
    labels = list(results)
    print("| workload | " + " | ".join(labels) + " |")
    print("| --- |" + " ---: |" * len(labels))
    for name in results[labels[0]]:
        print(f"| {name} | " + " | ".join(f"{results[k][name]:.0f} µs" for k in labels) + " |")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        main()
