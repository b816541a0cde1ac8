"""ember.numpy misc functions (being written)."""

__all__: list[str] = []
