"""ragged_dot and ragged_dot_general: grouped matrix products over ragged groups of rows."""

__all__: list[str] = []
