"""The on-disk object-code cache: keys, round trips, invalid entries, concurrency, the switch."""

import logging
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

import ember
from ember.backends.cpu import object_cache as oc
from ember.backends.cpu.object_cache import ObjectCache, cache_key, get_object_cache


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """Never touch the real user cache; restore the config options afterwards."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "env-cache"))
    saved = {name: ember.config.read(name)
             for name in ("jax_enable_compilation_cache", "jax_compilation_cache_dir")}
    yield
    for name, value in saved.items():
        ember.config.update(name, value)


def _run(code: str, **env) -> str:
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("EMBER_ENABLE_COMPILATION_CACHE", "JAX_ENABLE_COMPILATION_CACHE")}
    full_env.update(env)
    out = subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


# --- keys ---------------------------------------------------------------------------------

def test_cache_key_is_sha256_hex_and_deterministic():
    key = cache_key("HloModule m", b"\x00\x01", "llvmlite=0.50")
    assert len(key) == 64 and int(key, 16) >= 0
    assert key == cache_key("HloModule m", b"\x00\x01", "llvmlite=0.50")


@pytest.mark.parametrize("index", [0, 1, 2, 3])
def test_cache_key_changes_when_any_part_changes(index):
    parts = ["HloModule m { ... }", "ember=0.1.0", "llvmlite=0.50.0", "cpu=znver4;+avx512f"]
    changed = list(parts)
    changed[index] = changed[index] + "x"
    assert cache_key(*parts) != cache_key(*changed)


def test_cache_key_is_unambiguous():
    keys = {cache_key("ab", "c"), cache_key("a", "bc"), cache_key("abc"), cache_key(b"ab", "c"),
            cache_key("abc", ""), cache_key(), cache_key("")}
    assert len(keys) == 7


def test_cache_key_rejects_other_types():
    with pytest.raises(TypeError, match="cache_key: part 1"):
        cache_key("a", 3)


# --- round trips and misses ----------------------------------------------------------------

@pytest.mark.parametrize("payload", [b"", b"\x7fELF object code", os.urandom(300_000)],
                         ids=["empty", "short", "random-300KB"])
def test_round_trip(tmp_path, payload):
    cache = ObjectCache(tmp_path)
    key = cache_key("module", str(len(payload)))
    assert cache.load(key) is None
    cache.store(key, payload)
    assert cache.load(key) == payload
    # A second instance (another process, later) finds it too.
    assert ObjectCache(tmp_path).load(key) == payload


def test_entries_are_sharded_by_key_prefix(tmp_path):
    cache = ObjectCache(tmp_path)
    key = cache_key("m")
    cache.store(key, b"abc")
    assert os.path.isfile(tmp_path / key[:2] / (key + oc.SUFFIX))
    assert cache.path(key) == str(tmp_path / key[:2] / (key + oc.SUFFIX))


def test_miss_in_missing_directory(tmp_path):
    assert ObjectCache(tmp_path / "does" / "not" / "exist").load(cache_key("m")) is None


def test_store_overwrites(tmp_path):
    cache = ObjectCache(tmp_path)
    key = cache_key("m")
    cache.store(key, b"first")
    cache.store(key, bytearray(b"second"))
    assert cache.load(key) == b"second"
    assert [n for n in os.listdir(tmp_path / key[:2])] == [key + oc.SUFFIX]  # no temp files left


def test_bad_arguments(tmp_path):
    cache = ObjectCache(tmp_path)
    for bad in ("../../etc/passwd", "ABCDEF0123", "", "abc", 12345678):
        with pytest.raises(ValueError, match="ObjectCache: key"):
            cache.load(bad)
    with pytest.raises(TypeError, match="payload"):
        cache.store(cache_key("m"), "not bytes")
    with pytest.raises(TypeError, match="directory"):
        ObjectCache(3)
    with pytest.raises(ValueError, match="max_bytes"):
        ObjectCache(tmp_path, max_bytes=0)


# --- invalid entries: detected, removed, never loaded ---------------------------------------

def _stored(tmp_path, payload=b"object code " * 100):
    cache = ObjectCache(tmp_path)
    key = cache_key("module")
    cache.store(key, payload)
    return cache, key, cache.path(key)


def _assert_rejected(cache, key, path, caplog):
    with caplog.at_level(logging.DEBUG, logger=oc.__name__):
        assert cache.load(key) is None
    assert not os.path.exists(path)
    assert "removing invalid entry" in caplog.text
    assert cache.load(key) is None  # now a plain miss


@pytest.mark.parametrize("keep", [0, 10, oc._HEADER.size + 20, -1])
def test_truncated_entry(tmp_path, caplog, keep):
    cache, key, path = _stored(tmp_path)
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:keep] if keep >= 0 else data[:-1])
    _assert_rejected(cache, key, path, caplog)


@pytest.mark.parametrize("where", ["payload", "checksum", "magic", "length"])
def test_flipped_byte(tmp_path, caplog, where):
    cache, key, path = _stored(tmp_path)
    data = bytearray(open(path, "rb").read())
    offset = {"payload": len(data) - 7, "checksum": oc._HEADER.size - 1, "magic": 0,
              "length": 14}[where]
    data[offset] ^= 0x01
    with open(path, "wb") as f:
        f.write(data)
    _assert_rejected(cache, key, path, caplog)


def test_appended_bytes(tmp_path, caplog):
    cache, key, path = _stored(tmp_path)
    with open(path, "ab") as f:
        f.write(b"\0")
    _assert_rejected(cache, key, path, caplog)


def test_foreign_entry_under_another_keys_name(tmp_path, caplog):
    cache, key, path = _stored(tmp_path, b"code of module A")
    other = cache_key("module B")
    os.makedirs(os.path.dirname(cache.path(other)), exist_ok=True)
    shutil.copyfile(path, cache.path(other))
    with caplog.at_level(logging.DEBUG, logger=oc.__name__):
        assert cache.load(other) is None
    assert "another key" in caplog.text
    assert not os.path.exists(cache.path(other))
    assert cache.load(key) == b"code of module A"


def test_older_format_version_rejected(tmp_path, caplog):
    cache = ObjectCache(tmp_path)
    key = cache_key("module")
    os.makedirs(os.path.dirname(cache.path(key)))
    with open(cache.path(key), "wb") as f:
        f.write(oc.encode_entry(key, b"old code", version=oc.FORMAT_VERSION - 1))
    _assert_rejected(cache, key, cache.path(key), caplog)
    assert "format version" in caplog.text


def test_valid_hand_written_entry_loads(tmp_path):
    cache = ObjectCache(tmp_path)
    key = cache_key("module")
    os.makedirs(os.path.dirname(cache.path(key)))
    with open(cache.path(key), "wb") as f:
        f.write(oc.encode_entry(key, b"code"))
    assert cache.load(key) == b"code"


# --- I/O errors -----------------------------------------------------------------------------

def test_store_never_raises_and_warns_once(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(oc, "_warned", False)
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"not a directory")
    cache = ObjectCache(blocker)
    with caplog.at_level(logging.WARNING, logger=oc.__name__):
        cache.store(cache_key("a"), b"x")
        cache.store(cache_key("b"), b"y")
    assert caplog.text.count("cannot write") == 1
    assert cache.load(cache_key("a")) is None


# --- concurrency ----------------------------------------------------------------------------

def test_concurrent_threads(tmp_path):
    cache = ObjectCache(tmp_path)
    key = cache_key("shared")
    payloads = [bytes([i]) * (50_000 + i) for i in range(4)]
    seen, stop = [], threading.Event()

    def write(payload):
        for _ in range(30):
            cache.store(key, payload)

    def read():
        while not stop.is_set():
            seen.append(cache.load(key))

    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=write, args=(p,)) for p in payloads]
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    reader.join()
    assert all(s is None or s in payloads for s in seen)
    assert cache.load(key) in payloads
    assert os.listdir(tmp_path / key[:2]) == [key + oc.SUFFIX]


def test_concurrent_processes(tmp_path):
    key = cache_key("shared")
    code = ("import sys; from ember.backends.cpu.object_cache import ObjectCache\n"
            "c = ObjectCache(sys.argv[1]); p = sys.argv[2].encode() * 40000\n"
            "for _ in range(40):\n"
            "    c.store(sys.argv[3], p)\n"
            "    assert c.load(sys.argv[3]) in (b'A' * 40000, b'B' * 40000)\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path), tag, key],
                              stderr=subprocess.PIPE, text=True) for tag in "AB"]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert ObjectCache(tmp_path).load(key) in (b"A" * 40000, b"B" * 40000)
    assert os.listdir(tmp_path / key[:2]) == [key + oc.SUFFIX]


def test_hit_in_a_second_process(tmp_path):
    code = ("import sys; from ember.backends.cpu.object_cache import cache_key, "
            "get_object_cache\nc = get_object_cache(); k = cache_key('m')\n"
            "print(c.load(k)); c.store(k, b'native code')")
    env = {"EMBER_CACHE_DIR": str(tmp_path)}
    assert _run(code, **env) == "None"
    assert _run(code, **env) == "b'native code'"


# --- size bound -----------------------------------------------------------------------------

def test_size_bound_evicts_least_recently_used(tmp_path):
    cache = ObjectCache(tmp_path, max_bytes=100_000)
    keys = [cache_key(str(i)) for i in range(12)]
    base = time.time() - 1000
    for i, key in enumerate(keys[:8]):
        cache.store(key, bytes(10_000))
        os.utime(cache.path(key), (base + i, base + i))  # stored in order, far apart
    assert cache.load(keys[0]) is not None  # a hit makes keys[0] the most recently used
    for key in keys[8:]:
        cache.store(key, bytes(10_000))
    total = sum(os.path.getsize(cache.path(k)) for k in keys if os.path.exists(cache.path(k)))
    assert total <= 100_000
    assert cache.load(keys[0]) is not None and cache.load(keys[-1]) is not None
    assert cache.load(keys[1]) is None  # the oldest unused entry went first


def test_processes_share_a_size_estimate_and_only_the_first_store_scans(tmp_path, monkeypatch):
    first = ObjectCache(tmp_path, max_bytes=100_000)
    for i in range(3):
        first.store(cache_key(str(i)), bytes(10_000))
    assert first._read_size_file() == sum(
        os.path.getsize(first.path(cache_key(str(i)))) for i in range(3))
    # A second process (a fresh cache object) reads the estimate instead of scanning...
    second = ObjectCache(tmp_path, max_bytes=100_000)
    scans = []
    real_scan = second._scan
    monkeypatch.setattr(second, "_scan", lambda: scans.append(1) or real_scan())
    for i in range(3, 9):
        second.store(cache_key(str(i)), bytes(10_000))
    assert scans == []
    # ...and counts the first one's stores: crossing the bound evicts (one scan) to 3/4.
    for i in range(9, 12):
        first.store(cache_key(str(i)), bytes(10_000))
    total = sum(os.path.getsize(p) for p in tmp_path.glob("*/*" + oc.SUFFIX))
    assert total <= 100_000 and first._read_size_file() == total
    # A lost estimate file means one scan again.
    os.remove(tmp_path / oc._SIZE_FILE)
    third = ObjectCache(tmp_path, max_bytes=100_000)
    third.store(cache_key("x"), b"y")
    assert third._read_size_file() == sum(
        os.path.getsize(p) for p in tmp_path.glob("*/*" + oc.SUFFIX))


def test_stale_temporary_files_are_removed(tmp_path):
    cache = ObjectCache(tmp_path, max_bytes=10_000)
    shard = tmp_path / "ab"
    shard.mkdir()
    stale, fresh = shard / (oc._TMP_PREFIX + "old"), shard / (oc._TMP_PREFIX + "new")
    stale.write_bytes(b"partial")
    fresh.write_bytes(b"partial")
    old = time.time() - 2 * oc._STALE_TMP_SECONDS
    os.utime(stale, (old, old))
    cache.store(cache_key("m"), b"x")  # the first store scans the directory
    assert not stale.exists() and fresh.exists()


# --- the switch and the directory ------------------------------------------------------------

def test_switch_and_directory_option(tmp_path):
    ember.config.update("jax_enable_compilation_cache", False)
    assert get_object_cache() is None
    ember.config.update("jax_enable_compilation_cache", True)
    ember.config.update("jax_compilation_cache_dir", str(tmp_path / "chosen"))
    cache = get_object_cache()
    assert cache.directory == str(tmp_path / "chosen")
    assert get_object_cache() is cache
    ember.config.update("jax_compilation_cache_dir", None)
    assert get_object_cache().directory == str(tmp_path / "env-cache")
    with pytest.raises(ValueError, match="new string config value"):  # (as JAX's update)
        ember.config.update("jax_compilation_cache_dir", 5)
    ember.config._set("jax_compilation_cache_dir", 5)  # (past the check: the cache's own)
    with pytest.raises(TypeError, match="jax_compilation_cache_dir"):
        get_object_cache()


def test_default_cache_dir(monkeypatch, tmp_path):
    assert oc.default_cache_dir() == str(tmp_path / "env-cache")
    monkeypatch.delenv("EMBER_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert oc.default_cache_dir() == str(tmp_path / "xdg" / "ember")
        monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        assert oc.default_cache_dir() == str(tmp_path / "home" / ".cache" / "ember")


def test_environment_variables_in_a_fresh_process(tmp_path):
    code = ("from ember.backends.cpu.object_cache import get_object_cache\n"
            "c = get_object_cache(); print(None if c is None else c.directory)")
    assert _run(code, EMBER_CACHE_DIR=str(tmp_path / "from-env")) == str(tmp_path / "from-env")
    assert _run(code, EMBER_CACHE_DIR=str(tmp_path), EMBER_ENABLE_COMPILATION_CACHE="0") == "None"
    assert _run(code, EMBER_CACHE_DIR=str(tmp_path), JAX_ENABLE_COMPILATION_CACHE="false") == (
        "None")
    assert _run(code, EMBER_CACHE_DIR=str(tmp_path),
                EMBER_ENABLE_COMPILATION_CACHE="1") == str(tmp_path)
