"""Records for the PRNG primitive ``threefry2x32`` (a reference written from the Threefry
specification with Python ints; ``ember.random``'s samplers take keys, which the record
machinery cannot draw or map, and are compared with JAX bit for bit in tests/test_random.py).
"""

import numpy as np

from ember.lax.prng import threefry2x32
from tests.op_records.base import OpRecord

_M = 0xFFFFFFFF
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _threefry_words(k1, k2, x1, x2):
    def rotl(v, d):
        return ((v << d) | (v >> (32 - d))) & _M
    ks = (k1, k2, k1 ^ k2 ^ 0x1BD11BDA)
    x1, x2 = (x1 + ks[0]) & _M, (x2 + ks[1]) & _M
    for step in range(5):
        for r in _ROTATIONS[step % 2]:
            x1 = (x1 + x2) & _M
            x2 = rotl(x2, r) ^ x1
        x1 = (x1 + ks[(step + 1) % 3]) & _M
        x2 = (x2 + ks[(step + 2) % 3] + step + 1) & _M
    return x1, x2


def _threefry_ref(k1, k2, x1, x2):
    k1, k2, x1, x2 = np.broadcast_arrays(k1, k2, x1, x2)
    words = [_threefry_words(*map(int, v)) for v in zip(k1.ravel(), k2.ravel(), x1.ravel(),
                                                         x2.ravel())]
    out = np.array(words, dtype=np.uint32).reshape(*k1.shape, 2)
    return out[..., 0], out[..., 1]


def _threefry(k1, k2, x1, x2):
    return tuple(threefry2x32(k1, k2, x1, x2))


RECORDS = [
    OpRecord("lax.threefry2x32", _threefry, _threefry_ref, (np.dtype("uint32"),),
             (((), (), (), ()), ((), (), (5,), (5,)), ((2, 3), (2, 3), (2, 3), (2, 3))),
             kind="lax"),
]
