"""ember demo: trace functions into jaxprs, print them, run them eagerly and under jit.

Run with ``python examples/demo.py``.
"""

import ember as jax
import ember.numpy as jnp


def log2(x):
    return jnp.log(x) / jnp.log(2.0)


def predict(params, inputs):
    w, b = params
    return jnp.tanh(inputs @ w + b)


def loss(params, inputs, targets):
    return jnp.mean((predict(params, inputs) - targets) ** 2)


def main() -> None:
    print("jaxpr of log2:")
    print(jax.make_jaxpr(log2)(1.0))
    x = jnp.array([1.0, 2.0, 8.0, 64.0])
    print("log2(x) =", repr(log2(x)))

    params = (jnp.ones((3, 2)) * 0.5, jnp.zeros(2))
    inputs = jnp.arange(12.0).reshape(4, 3) / 10
    targets = jnp.array([[0.0, 1.0]] * 4)
    print("\njaxpr of a small model's loss:")
    print(jax.make_jaxpr(loss)(params, inputs, targets))
    print("loss =", loss(params, inputs, targets))

    fast_loss = jax.jit(loss)
    print("jit(loss) =", fast_loss(params, inputs, targets))
    compiled = fast_loss.lower(params, inputs, targets).compile()
    print("\noptimized HLO of jit(loss):")
    print(compiled.as_text())
    print("cost analysis:", compiled.cost_analysis())

    y = x.at[1:3].set(0.0)
    print("\nx.at[1:3].set(0.0) =", repr(y), " (x unchanged:", repr(x), ")")
    print("devices:", jax.devices())


if __name__ == "__main__":
    main()
