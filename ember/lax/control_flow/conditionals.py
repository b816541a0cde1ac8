"""Control flow: conditionals (being written)."""

__all__: list[str] = []
