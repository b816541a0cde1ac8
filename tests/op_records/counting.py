"""Records for counting and set membership: isin, digitize, bincount, unique_* (with size=).

bincount and the unique_* functions have data-dependent output shapes; the records pass the
static ``length=``/``size=`` that makes them traceable (the eager, data-sized forms are tested
in tests/test_counting.py).
"""

import numpy as np

import ember.numpy as jnp
from tests.op_records.base import ALL, FLOATS, INTS, NUMERIC, OpRecord

I32 = np.dtype("int32")
F32 = np.dtype("float32")
BOOL = np.dtype("bool")

ISIN_SHAPES = (((5,), (3,)), ((2, 3), (4,)), ((), (3,)), ((4,), (2, 2)), ((0,), (3,)),
               ((4,), (0,)))
DIGITIZE_SHAPES = (((6,), (3,)), ((2, 3), (4,)), ((), (2,)), ((5,), (1,)), ((0,), (3,)),
                   ((4,), (0,)))
BINCOUNT_SHAPES = (((7,),), ((1,),), ((12,),), ((0,),))
UNIQUE_SHAPES = (((6,),), ((2, 3),), ((),), ((1, 4, 2),))


def _bincount_ref(x, w=None, length=6):
    x = np.maximum(np.asarray(x).astype(np.int64), 0)
    keep = x < length
    w = None if w is None else np.asarray(w)[keep]
    return np.bincount(x[keep], w, minlength=length)[:length]


def _unique_ref(x, size):
    """values, indices, inverse_indices, counts padded/truncated to ``size`` as JAX does."""
    values, indices, inverse, counts = np.unique(
        x, return_index=True, return_inverse=True, return_counts=True, equal_nan=False)
    n = len(values)
    pad = max(size - n, 0)
    values = np.concatenate([values, np.full(pad, values[0], values.dtype)])[:size]
    indices = np.concatenate([indices, np.full(pad, indices[0], indices.dtype)])[:size]
    counts = np.concatenate([counts, np.zeros(pad, counts.dtype)])[:size]
    return values, indices, np.reshape(inverse, np.shape(x)), counts


RECORDS = [
    OpRecord("isin", lambda a, b: jnp.isin(a, b), np.isin, ALL, ISIN_SHAPES, rng="small",
             out_dtype=lambda d: BOOL),
    OpRecord("isin_invert", lambda a, b: jnp.isin(a, b, invert=True),
             lambda a, b: np.isin(a, b, invert=True), ALL, ISIN_SHAPES, rng="small"),
    OpRecord("isin_binary_search", lambda a, b: jnp.isin(a, b, method="binary_search"),
             np.isin, NUMERIC, ISIN_SHAPES, rng="small"),
    OpRecord("isin_sort", lambda a, b: jnp.isin(a, b, method="sort"), np.isin, ALL,
             ISIN_SHAPES, rng="small"),
    OpRecord("isin_sort_invert", lambda a, b: jnp.isin(a, b, invert=True, method="sort"),
             lambda a, b: np.isin(a, b, invert=True), (I32, F32), ISIN_SHAPES, rng="small"),
    OpRecord("digitize", lambda x, b: jnp.digitize(x, jnp.sort(b)),
             lambda x, b: np.digitize(x, np.sort(b)), NUMERIC, DIGITIZE_SHAPES, rng="small",
             out_dtype=lambda d: I32),
    OpRecord("digitize_right", lambda x, b: jnp.digitize(x, jnp.sort(b), right=True),
             lambda x, b: np.digitize(x, np.sort(b), right=True), NUMERIC, DIGITIZE_SHAPES,
             rng="small"),
    OpRecord("digitize_decreasing", lambda x, b: jnp.digitize(x, jnp.flip(jnp.sort(b))),
             lambda x, b: np.digitize(x, np.flip(np.sort(b))), NUMERIC, DIGITIZE_SHAPES,
             rng="small"),
    OpRecord("digitize_decreasing_right",
             lambda x, b: jnp.digitize(x, jnp.flip(jnp.sort(b)), right=True),
             lambda x, b: np.digitize(x, np.flip(np.sort(b)), right=True), (I32, F32),
             DIGITIZE_SHAPES, rng="small"),
    OpRecord("digitize_compare_all",
             lambda x, b: jnp.digitize(x, jnp.sort(b), method="compare_all"),
             lambda x, b: np.digitize(x, np.sort(b)), (I32, F32), DIGITIZE_SHAPES, rng="small"),
    OpRecord("bincount_length", lambda x: jnp.bincount(x, length=6), _bincount_ref,
             INTS + (BOOL,), BINCOUNT_SHAPES, rng="default", out_dtype=lambda d: I32),
    OpRecord("bincount_length_small", lambda x: jnp.bincount(x, length=2),
             lambda x: _bincount_ref(x, length=2), (I32, np.dtype("uint8")), BINCOUNT_SHAPES,
             rng="small", out_dtype=lambda d: I32),
    OpRecord("bincount_weights", lambda x, w: jnp.bincount(x, w, length=5),
             lambda x, w: _bincount_ref(x, w, length=5), FLOATS + (I32, np.dtype("int8")),
             (((7,), (7,)), ((1,), (1,)), ((0,), (0,))), arg_dtypes={0: I32},
             arg_rngs={0: "small"}, out_dtype=lambda d: d),
    OpRecord("unique_values_size", lambda x: jnp.unique_values(x, size=4),
             lambda x: _unique_ref(x, 4)[0], ALL, UNIQUE_SHAPES, rng="small"),
    OpRecord("unique_counts_size", lambda x: jnp.unique_counts(x, size=5),
             lambda x: (lambda r: (r[0], r[3]))(_unique_ref(x, 5)), ALL, UNIQUE_SHAPES,
             rng="small"),
    OpRecord("unique_inverse_size", lambda x: jnp.unique_inverse(x, size=3),
             lambda x: (lambda r: (r[0], r[2]))(_unique_ref(x, 3)), ALL, UNIQUE_SHAPES,
             rng="small"),
    OpRecord("unique_all_size", lambda x: jnp.unique_all(x, size=6),
             lambda x: _unique_ref(x, 6), ALL, UNIQUE_SHAPES, rng="small"),
    OpRecord("unique_size", lambda x: jnp.unique(x, size=5, return_index=True,
                                                 return_inverse=True, return_counts=True),
             lambda x: _unique_ref(x, 5), ALL, UNIQUE_SHAPES, rng="small"),
    OpRecord("unique_all_size_fill", lambda x: jnp.unique_all(x, size=8, fill_value=-1),
             lambda x: (lambda r: (np.where(np.arange(8) < len(np.unique(x)), r[0],
                                            np.asarray(-1).astype(r[0].dtype)),) + r[1:])(
                 _unique_ref(x, 8)), INTS[:2] + (F32,), UNIQUE_SHAPES, rng="small"),
]
