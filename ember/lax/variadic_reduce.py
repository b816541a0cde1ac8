"""lax.reduce: a reduction over dimensions with a user computation (variadic operands)."""

__all__: list[str] = []
