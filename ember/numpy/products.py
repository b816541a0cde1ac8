"""ember.numpy products functions (being written)."""

__all__: list[str] = []
