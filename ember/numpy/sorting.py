"""ember.numpy sorting functions (being written)."""

__all__: list[str] = []
