"""Collective primitives over named axes (psum, pmean, all_gather, axis_index, ...) under vmap."""

__all__: list[str] = []
