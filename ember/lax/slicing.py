"""lax slicing primitives (being written)."""

__all__: list[str] = []
