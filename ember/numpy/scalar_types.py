"""ember.numpy scalar_types functions (being written)."""

__all__: list[str] = []
