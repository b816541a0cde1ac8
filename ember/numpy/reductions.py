"""ember.numpy reductions functions (being written)."""

__all__: list[str] = []
