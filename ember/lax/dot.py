"""lax dot primitives (being written)."""

__all__: list[str] = []
