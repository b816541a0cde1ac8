"""rng_bit_generator and rng_uniform: the stateless and stateful random-bit primitives of lax."""

__all__: list[str] = []
