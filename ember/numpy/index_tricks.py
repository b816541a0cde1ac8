"""Index helpers and array editing: c_, r_, s_, index_exp, mgrid, ogrid, block, delete, insert, fill_diagonal, put, put_along_axis, place, mask_indices, piecewise, vectorize, apply_along_axis, apply_over_axes, fromfunction, set operations."""

__all__: list[str] = []
