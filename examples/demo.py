"""ember demo: trace a function, print its jaxpr, and run it."""

import ember
import ember.numpy as jnp


def log2(x):
    return jnp.log(x) / jnp.log(2.0)


def main() -> None:
    print("jaxpr of log2:")
    print(ember.make_jaxpr(log2)(1.0))
    x = jnp.array([1.0, 2.0, 8.0, 1024.0])
    print("log2", x, "=", log2(x))
    print("devices:", ember.devices())


if __name__ == "__main__":
    main()
