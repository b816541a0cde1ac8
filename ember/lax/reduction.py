"""lax reduction primitives (being written)."""

__all__: list[str] = []
