"""ember.numpy indexing functions (being written)."""

__all__: list[str] = []
