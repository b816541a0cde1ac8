"""Eager (no jit) functions on large arrays: ember vs JAX vs NumPy.

Run: ``python benchmarks/eager_large.py [--markdown]``. Each function runs on (4096, 1024)
arrays (16 MiB of float32) under each engine in this one process (JAX only when installed);
the table gives the median time per call over fresh repeats, after warm-up calls (ember
compiles a signature's program at its second call, JAX at its first), and ember / JAX.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

SHAPE = (4096, 1024)
WARMUP, REPEATS = 3, 9


def _functions(m, bfloat16):
    """name -> function of (x, y, i): float32 x and y, int32 i, as module ``m`` spells it."""
    return {
        "x + y": lambda x, y, i: x + y,
        "x * 2.0": lambda x, y, i: x * 2.0,
        "x ** 2": lambda x, y, i: x ** 2,
        "x / y": lambda x, y, i: x / y,
        "where(x > 0, x, y)": lambda x, y, i: m.where(x > 0, x, y),
        "clip(x, -1, 1)": lambda x, y, i: m.clip(x, -1, 1),
        "maximum(x, 0.0)": lambda x, y, i: m.maximum(x, 0.0),
        "x.astype(int32)": lambda x, y, i: x.astype(m.int32),
        "x.astype(float16)": lambda x, y, i: x.astype(m.float16),
        "x.astype(bfloat16)": lambda x, y, i: x.astype(bfloat16),
        "i.astype(float32)": lambda x, y, i: i.astype(m.float32),
        "i // 7": lambda x, y, i: i // 7,
        "i % 7": lambda x, y, i: i % 7,
        "exp(x)": lambda x, y, i: m.exp(x),
        "tanh(x)": lambda x, y, i: m.tanh(x),
        "sum(x)": lambda x, y, i: m.sum(x),
        "sum(x, axis=1)": lambda x, y, i: m.sum(x, axis=1),
        "cumsum(x, axis=1)": lambda x, y, i: m.cumsum(x, axis=1),
        "argmax(x, axis=1)": lambda x, y, i: m.argmax(x, axis=1),
        "transpose(x) + 0": lambda x, y, i: m.transpose(x) + 0,
    }


def _engines():
    import ember
    import ember.numpy as enp

    engines = {"ember": (enp, enp.bfloat16, enp.asarray, ember.block_until_ready)}
    try:
        import jax
        import jax.numpy as jnp
        engines["jax"] = (jnp, jnp.bfloat16, jnp.asarray, jax.block_until_ready)
    except ImportError:
        pass
    engines["numpy"] = (np, ml_dtypes.bfloat16, np.asarray, lambda v: v)
    return engines


def _median_seconds(fn) -> float:
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    data = (rng.standard_normal(SHAPE, np.float32), rng.standard_normal(SHAPE, np.float32),
            rng.integers(-1000, 1000, SHAPE).astype(np.int32))
    engines = _engines()
    times: dict[str, dict[str, float]] = {}
    for name, (m, bfloat16, put, block) in engines.items():
        x, y, i = (put(a) for a in data)
        for label, fn in _functions(m, bfloat16).items():
            times.setdefault(label, {})[name] = _median_seconds(
                lambda fn=fn, x=x, y=y, i=i, block=block: block(fn(x, y, i)))
    cols = list(engines)
    if args.markdown:
        print("| function | " + " | ".join(cols) + " | ember/jax |")
        print("| --- |" + " ---: |" * (len(cols) + 1))
    for label, row in times.items():
        ratio = row["ember"] / row["jax"] if "jax" in row else float("nan")
        cells = [f"{row[c] * 1e3:.2f} ms" for c in cols]
        if args.markdown:
            print(f"| {label} | " + " | ".join(cells) + f" | {ratio:.2f} |")
        else:
            print(f"{label:22s} " + " ".join(f"{c}={v:>10s}" for c, v in zip(cols, cells))
                  + f"  ember/jax={ratio:.2f}")


if __name__ == "__main__":
    main()
