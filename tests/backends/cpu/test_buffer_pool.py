"""The CPU backend's pool of large buffers: reuse only once no array uses the memory."""

import gc

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.cpu import buffer_pool

BIG = (1024, 1024)  # 4 MiB of float32: pooled


@pytest.fixture(autouse=True)
def _fresh_pool():
    gc.collect()  # (a cycle of an earlier test holding a pooled array frees it now)
    buffer_pool.clear()
    yield
    buffer_pool.clear()


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_memory_comes_back_when_the_last_array_is_gone():
    a = buffer_pool.empty(BIG, np.float32)
    where = _address(a)
    del a
    gc.collect()
    assert buffer_pool.idle_bytes() > 0
    b = buffer_pool.empty(BIG, np.float32)
    assert _address(b) == where and buffer_pool.idle_bytes() == 0


def test_a_view_keeps_the_memory_in_use():
    a = buffer_pool.empty(BIG, np.float32)
    a[:] = 7.0
    view = a[10:20].reshape(-1)
    where = _address(a)
    del a
    gc.collect()
    b = buffer_pool.empty(BIG, np.float32)
    assert _address(b) != where
    b[:] = 0.0
    assert np.all(view == 7.0)


def test_arrays_are_aligned_contiguous_and_of_the_asked_type():
    for dtype in (np.float32, np.float64, np.int8, np.bool_, ml_dtypes.bfloat16):
        a = buffer_pool.empty((3, 1 << 19), dtype)
        assert a.shape == (3, 1 << 19) and a.dtype == np.dtype(dtype)
        assert a.flags.c_contiguous and a.flags.writeable
        assert _address(a) % buffer_pool.ALIGN == 0


def test_an_allocator_hands_out_arrays_of_its_shape_and_reuses_memory():
    # Mid-size outputs (256 KiB to 1 MiB) are pooled too: malloc gave their memory back to
    # the system between calls, so every call paid its page faults again.
    for dtype, shape in ((np.float32, (256, 256)), (np.int8, 1 << 18),
                         (ml_dtypes.bfloat16, (2, 3, 1 << 16)), (np.complex64, (1 << 15,))):
        b = None
        buffer_pool.clear()
        allocate = buffer_pool.allocator(shape, dtype)
        a = allocate()
        want = (shape,) if isinstance(shape, int) else shape
        assert a.shape == want and a.dtype == np.dtype(dtype) and a.flags.c_contiguous
        assert _address(a) % buffer_pool.ALIGN == 0 and a.flags.writeable
        a[...] = 3
        where = _address(a)
        del a
        gc.collect()
        assert buffer_pool.idle_bytes() > 0  # (in the pool, not given back to malloc)
        b = allocate()
        assert _address(b) == where and np.all(b == 3)  # the same memory, not fresh pages
        assert buffer_pool.idle_bytes() == 0


def test_small_arrays_are_plain_numpy_arrays():
    a = buffer_pool.empty((10,), np.float32)
    assert a.base is None and a.shape == (10,)


def test_capacity_bounds_what_is_kept(monkeypatch):
    monkeypatch.setattr(buffer_pool, "_capacity", 0)
    a = buffer_pool.empty(BIG, np.float32)
    assert a.base is None  # no reuse at all: plain arrays
    monkeypatch.setattr(buffer_pool, "_capacity", 6 << 20)  # room for one 4 MiB buffer
    arrays = [buffer_pool.empty(BIG, np.float32) for _ in range(3)]
    del arrays
    gc.collect()
    assert 0 < buffer_pool.idle_bytes() <= 6 << 20


def test_a_full_pool_frees_the_buffers_idle_longest(monkeypatch):
    monkeypatch.setattr(buffer_pool, "_capacity", 10 << 20)  # room for two 4 MiB buffers
    shapes = [(1024, 1024), (1024, 1025), (1024, 1026)]  # three sizes
    where = []
    for shape in shapes:  # given back in this order: the first is idle longest
        a = buffer_pool.empty(shape, np.float32)
        where.append(_address(a))
        del a
        gc.collect()
    assert buffer_pool.idle_bytes() <= 10 << 20
    # The two latest sizes come back from the pool; the first was freed to make room.
    again = [buffer_pool.empty(shapes[2], np.float32), buffer_pool.empty(shapes[1], np.float32)]
    assert [_address(a) for a in again] == [where[2], where[1]]
    assert buffer_pool.idle_bytes() == 0
    kept = buffer_pool.empty(shapes[0], np.float32)
    kept[:] = 1.0  # fresh memory, usable
    assert float(kept.sum()) == 1024 * 1024


def test_a_buffer_larger_than_the_capacity_is_not_kept(monkeypatch):
    monkeypatch.setattr(buffer_pool, "_capacity", 6 << 20)
    small = buffer_pool.empty(BIG, np.float32)
    del small
    gc.collect()
    held = buffer_pool.idle_bytes()
    big = buffer_pool.empty((2048, 1024), np.float32)  # 8 MiB
    del big
    gc.collect()
    assert buffer_pool.idle_bytes() == held > 0  # (the small one was not freed for it)


def test_bad_capacity_setting_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(buffer_pool, "_capacity", None)
    monkeypatch.setenv("EMBER_CPU_BUFFER_POOL_BYTES", "lots")
    with pytest.raises(ValueError, match="EMBER_CPU_BUFFER_POOL_BYTES"):
        buffer_pool.capacity()


def test_jit_outputs_from_reused_memory_keep_their_values():
    f = ember.jit(lambda x: jnp.exp(x) * 2.0 + 1.0)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(BIG).astype(np.float32) for _ in range(4)]
    kept = [f(x) for x in inputs[:2]]
    for x in inputs[2:]:
        f(x).block_until_ready()  # dropped at once: its memory is reused by the next call
    more = [f(x) for x in inputs[2:]]
    for x, y in zip(inputs, kept + more):
        np.testing.assert_allclose(np.asarray(y), np.exp(x.astype(np.float64)) * 2 + 1,
                                   rtol=2e-6)
    addresses = {_address(np.asarray(y)) for y in kept + more}
    assert len(addresses) == 4  # live outputs never share memory


def test_many_outputs_of_one_size_all_come_back():
    # (an optimizer step over a model's parameters makes dozens of outputs of one size: with
    # four kept per size, the others were fresh memory on every call, page faults and all)
    n = 40
    f = ember.jit(lambda xs: [x * 0.5 + 1.0 for x in xs])
    xs = [np.full((256, 1024), float(i), np.float32) for i in range(n)]
    ember.block_until_ready(f(xs))  # (its outputs dropped: back to the pool)
    gc.collect()
    idle = buffer_pool.idle_bytes()
    assert idle >= n * (1 << 20)
    outs = ember.block_until_ready(f(xs))
    assert buffer_pool.idle_bytes() <= idle - n * (1 << 20)  # every output from the pool
    for i, y in enumerate(outs):
        np.testing.assert_array_equal(np.asarray(y), np.float32(i * 0.5 + 1.0))


def _thp_offered() -> bool:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            setting = f.read()
    except OSError:
        return False
    return "[always]" in setting or "[madvise]" in setting


def _anon_huge_kib(address: int) -> int:
    """AnonHugePages of the mapping holding ``address`` (from /proc/self/smaps)."""
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and ":" not in head:
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= address < hi
            elif inside and head == "AnonHugePages:":
                return int(line.split()[1])
    return 0


@pytest.mark.skipif(not buffer_pool._HUGE_PAGES, reason="no MADV_HUGEPAGE here")
def test_fresh_memory_starts_on_a_huge_page():
    a = buffer_pool.empty((2, 1 << 20), np.float32)  # 8 MiB
    assert _address(a) % buffer_pool.HUGE_PAGE == 0
    a[:] = 3.0
    assert np.all(a == 3.0)
    if _thp_offered():
        assert _anon_huge_kib(_address(a)) >= 2048


@pytest.mark.skipif(not buffer_pool._HUGE_PAGES, reason="no MADV_HUGEPAGE here")
def test_rounding_to_huge_pages_is_bounded():
    # A tail past the last whole huge page is rounded up when it is at least 512 KiB: 1,
    # 1.25 and 1.75 MiB to one huge page, 2.5 MiB to two; not 2.25 nor 4.25 MiB (their
    # 256 KiB tails take 4 KiB pages).
    for nbytes, rounded in ((4 << 18, True), (5 << 18, True), (7 << 18, True),
                            (10 << 18, True), (9 << 18, False), (17 << 18, False)):
        a = buffer_pool.empty(nbytes, np.uint8)
        region = a.base
        while not isinstance(region, buffer_pool.mmap.mmap):  # (array, lease, memoryview)
            if isinstance(region, buffer_pool._Lease):
                region = region.block[0]  # (the raw buffer, its aligned address)
                continue
            region = next(getattr(region, k) for k in ("base", "obj") if hasattr(region, k))
        mapped = len(region) - buffer_pool.HUGE_PAGE  # (one page of slack for alignment)
        assert (mapped % buffer_pool.HUGE_PAGE == 0) == rounded
        assert mapped >= nbytes


def test_without_memory_maps_the_pool_uses_plain_arrays(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("no maps")
    monkeypatch.setattr(buffer_pool.mmap, "mmap", refuse)
    a = buffer_pool.empty(BIG, np.float32)
    a[:] = 1.5
    assert np.all(a == 1.5) and _address(a) % buffer_pool.ALIGN == 0


def test_results_written_to_outputs_take_no_arena():
    f = ember.jit(lambda xs: [x * 0.5 + 1.0 for x in xs])
    xs = [np.full((64, 1024), float(i), np.float32) for i in range(3)]
    program = f.lower(xs).compile()._executable.executable.program
    assert program.arena_bytes == 0
    # (a temporary read by two outputs still takes its arena slot)
    g = ember.jit(lambda x: (jnp.sort(x * 2.0) + 1.0, jnp.sort(x * 2.0) - 1.0))
    x = np.random.default_rng(1).standard_normal((64, 1024)).astype(np.float32)
    program = g.lower(x).compile()._executable.executable.program
    assert program.arena_bytes > 0
    a, b = g(x)
    want = np.sort(x * np.float32(2.0), axis=-1)
    np.testing.assert_array_equal(np.asarray(a), want + np.float32(1.0))
    np.testing.assert_array_equal(np.asarray(b), want - np.float32(1.0))
