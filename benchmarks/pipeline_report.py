"""What each optimization pass does to a real program: instruction counts after every pass.

Run: ``python benchmarks/pipeline_report.py``. The program is a two-layer MLP's forward pass
and softmax cross-entropy loss (batch 128, 784 → 256 → 10), lowered by ``ember.jit``.
"""

from __future__ import annotations

import numpy as np

import ember
import ember.numpy as jnp
from ember.compiler.lower import lower_closed_jaxpr
from ember.compiler.parser import parse_module
from ember.compiler.pipeline import optimize


def mlp_loss(params, x, labels):
    (w1, b1), (w2, b2) = params
    h = jnp.tanh(x @ w1 + b1)
    logits = h @ w2 + b2
    logits = logits - logits.max(axis=1, keepdims=True)
    log_probs = logits - jnp.log(jnp.exp(logits).sum(axis=1, keepdims=True))
    return -(log_probs * labels).sum() / x.shape[0]


def _counts(module) -> tuple[int, int, int]:
    """(entry instructions, all instructions incl. fused computations, fusions)."""
    fusions = sum(1 for i in module.entry.instructions if i.opcode == "fusion")
    return len(module.entry.instructions), module.instruction_count(), fusions


def main() -> None:
    rng = np.random.default_rng(0)
    params = ((rng.normal(size=(784, 256)).astype(np.float32), np.zeros(256, np.float32)),
              (rng.normal(size=(256, 10)).astype(np.float32), np.zeros(10, np.float32)))
    x = rng.normal(size=(128, 784)).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]
    closed = ember.make_jaxpr(mlp_loss)(params, x, labels)
    module = lower_closed_jaxpr(closed, "jit_mlp_loss").module
    stages: list[tuple[str, tuple[int, int, int]]] = []
    optimize(module, verify=True,
             dump=lambda stage, text: stages.append((stage, _counts(parse_module(text)))))
    print(f"jaxpr equations: {len(closed.jaxpr.eqns)}")
    print(f"{'stage':36s} {'entry':>6s} {'total':>6s} {'fusions':>8s}")
    previous = None
    for stage, counts in stages:
        if counts != previous:
            print(f"{stage:36s} {counts[0]:6d} {counts[1]:6d} {counts[2]:8d}")
        previous = counts
    eager = mlp_loss(params, x, labels)
    jitted = ember.jit(mlp_loss)(params, x, labels)
    print(f"loss eager {float(eager):.6f}, jit {float(jitted):.6f}")


if __name__ == "__main__":
    main()
