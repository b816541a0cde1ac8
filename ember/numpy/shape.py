"""ember.numpy shape functions (being written)."""

__all__: list[str] = []
