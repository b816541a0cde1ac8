"""Bitwise comparison of arrays, for tests of code that must reproduce exact bits."""

import numpy as np


def assert_same_bits(got, want) -> None:
    """Same dtype, shape and bits (NaN payloads and the signs of zeros included)."""
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "b":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_array_equal(got.view(f"u{got.dtype.itemsize}"),
                                      want.view(f"u{want.dtype.itemsize}"))
