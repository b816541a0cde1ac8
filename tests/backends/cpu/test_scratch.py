"""``ember._scratch``: library kernels' large temporaries come from the CPU backend's buffer
pool once it is loaded, and give the same results as plain NumPy memory."""

import numpy as np
import pytest

import ember.backends.cpu  # noqa: F401 - registers the pool as the scratch allocator
import ember.lax.convolution as conv
from ember import _scratch
from ember.backends.cpu import buffer_pool


@pytest.fixture
def numpy_allocator():
    _scratch.register_allocator(np.empty)
    yield
    _scratch.register_allocator(buffer_pool.empty)


def test_large_scratch_arrays_come_from_the_pool_and_go_back():
    assert _scratch._empty is buffer_pool.empty
    buffer_pool.clear()
    a = _scratch.empty((512, 1024), np.float32)  # 2 MiB: pooled
    assert a.flags.c_contiguous and a.shape == (512, 1024) and a.dtype == np.float32
    address = a.ctypes.data
    del a
    assert buffer_pool.idle_bytes() > 0
    again = _scratch.zeros((512, 1024), np.float32)  # the same memory, zeroed
    assert again.ctypes.data == address and not again.any()
    src = np.arange(24, dtype=np.float64).reshape(2, 3, 4).transpose(2, 0, 1)
    copied = _scratch.copy(src)
    assert copied.flags.c_contiguous
    np.testing.assert_array_equal(copied, src)


CONV = dict(window_strides=(1, 1), padding=(1, 1, 1, 1), lhs_dilation=(1, 1),
            rhs_dilation=(1, 1), lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1),
            out_spec=(0, 3, 1, 2), feature_group_count=1, batch_group_count=1,
            out_dtype="float32")


def _conv_reference(x, k):
    """The NHWC/HWIO convolution with SAME padding as a loop over the taps, in float64."""
    n, h, w, _ = x.shape
    padded = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros((n, h, w, k.shape[-1]))
    for i in range(3):
        for j in range(3):
            out += padded[:, i:i + h, j:j + w, :] @ k[i, j].astype(np.float64)
    return out


def test_pooled_convolution_equals_numpy_memory_bit_for_bit(numpy_allocator):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 40, 40, 16)).astype(np.float32)  # > 256 KiB temporaries
    k = rng.standard_normal((3, 3, 16, 8)).astype(np.float32)
    plain = conv.conv_numpy(x, k, **CONV)
    _scratch.register_allocator(buffer_pool.empty)
    pooled = [conv.conv_numpy(x, k, **CONV) for _ in range(3)]  # reused memory too
    for p in pooled:
        np.testing.assert_array_equal(p, plain)
    np.testing.assert_allclose(plain, _conv_reference(x, k), rtol=1e-4, atol=1e-4)
