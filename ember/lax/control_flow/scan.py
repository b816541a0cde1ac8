"""Control flow: scan (being written)."""

__all__: list[str] = []
