"""Bitwise comparison of arrays, for tests of code that must reproduce exact bits."""

import ml_dtypes
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


def top_k_order(x):
    """Positions of each row (last axis) in TopK's order, from values, signs and NaN tests:
    larger first, +0 before -0, +NaN first and -NaN last (a larger payload further out),
    ties by position."""
    x = np.asarray(x)
    if x.dtype.kind != "f" and x.dtype != ml_dtypes.bfloat16:
        return np.argsort(-x.astype(np.float64) if x.dtype != np.bool_ else ~x, axis=-1,
                          kind="stable")
    f = x.astype(np.float64)
    nan, negative = np.isnan(f), np.signbit(f)
    category = np.where(nan, np.where(negative, 0, 2), 1)
    bits = x.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])
    mantissa = {np.dtype(np.float16): 10, np.dtype(ml_dtypes.bfloat16): 7,
                np.dtype(np.float32): 23, np.dtype(np.float64): 52}[x.dtype]
    payload = (bits & bits.dtype.type((1 << mantissa) - 1)).astype(np.float64)
    value = np.where(nan, np.where(negative, -payload, payload), f)
    rows = [np.lexsort((negative[i], -value[i], -category[i]))
            for i in np.ndindex(x.shape[:-1])]
    return np.array(rows).reshape(x.shape) if rows else np.zeros(x.shape, np.intp)
