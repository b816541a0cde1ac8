"""lax sorting primitives (being written)."""

__all__: list[str] = []
