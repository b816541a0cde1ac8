"""Control flow: while_loop (being written)."""

__all__: list[str] = []
