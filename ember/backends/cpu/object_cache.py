"""The on-disk cache of compiled object code.

Entries are files named by their key, sharded into subdirectories by the key's first two
characters (``<dir>/ab/abcdef....ember``). Each file holds a header (magic, format version,
the full key, the payload length, the payload's sha256) followed by the payload. An entry that
is truncated, corrupted, written by another format version or stored under another key's name
is never returned: ``load`` logs it at debug level, deletes it and reports a miss, so the caller
recompiles. Writes go to a temporary file in the same directory and are moved into place with
``os.replace``, so readers see either the old entry or the whole new one. The cache is an
optimization: I/O errors never propagate (``store`` warns once through logging).

The total size is bounded (``max_bytes``): when a store pushes the cache past it, the least
recently used entries (by modification time, which a hit refreshes) are removed.

The caller builds the key with ``cache_key`` from everything the object code depends on
(optimized HLO text, ember's and llvmlite's versions, CPU name and features, flags).

Example:
    >>> cache = ObjectCache(tmp_dir)
    >>> key = cache_key(hlo_text, backend_fingerprint())
    >>> cache.load(key) is None
    True
    >>> cache.store(key, object_code)
    >>> cache.load(key) == object_code
    True
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import struct
import sys
import tempfile
import threading
import time

from ember.config import config

_log = logging.getLogger(__name__)

MAGIC = b"EMBEROBJ"
FORMAT_VERSION = 1
SUFFIX = ".ember"
DEFAULT_MAX_BYTES = 1 << 30
_SIZE_FILE = "size-estimate"  # the entries' total size in bytes, as the last store saw it
# magic, format version, key length, payload length, payload sha256; then key, then payload.
_HEADER = struct.Struct("<8sIHQ32s")
_KEY_RE = re.compile(r"[0-9a-f]{8,128}")
_TMP_PREFIX = ".tmp-"
_STALE_TMP_SECONDS = 3600.0

_warned = False
_warn_lock = threading.Lock()


def cache_key(*parts: str | bytes) -> str:
    """A sha256 hex digest of ``parts``; each is tagged by type and length-prefixed.

    ``cache_key("ab", "c")``, ``cache_key("a", "bc")`` and ``cache_key(b"ab", "c")`` differ.

    Example:
        >>> len(cache_key("HloModule m ...", "llvmlite=0.50"))
        64
    """
    h = hashlib.sha256()
    h.update(len(parts).to_bytes(8, "little"))
    for i, part in enumerate(parts):
        if isinstance(part, str):
            tag, data = b"s", part.encode("utf-8")
        elif isinstance(part, (bytes, bytearray, memoryview)):
            tag, data = b"b", bytes(part)
        else:
            raise TypeError(f"cache_key: part {i} must be str or bytes, got "
                            f"{type(part).__name__}")
        h.update(tag)
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def encode_entry(key: str, payload: bytes, version: int = FORMAT_VERSION) -> bytes:
    """The bytes of a cache file holding ``payload`` under ``key`` (``version`` for tests)."""
    key_bytes = key.encode("ascii")
    digest = hashlib.sha256(payload).digest()
    header = _HEADER.pack(MAGIC, version, len(key_bytes), len(payload), digest)
    return header + key_bytes + payload


def _decode_entry(key: str, data: bytes) -> bytes:
    """The payload of ``data`` if it is a valid entry for ``key``; ValueError says why not."""
    if len(data) < _HEADER.size:
        raise ValueError("truncated header")
    magic, version, key_len, payload_len, digest = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ValueError("bad magic")
    if version != FORMAT_VERSION:
        raise ValueError(f"format version {version}, expected {FORMAT_VERSION}")
    start = _HEADER.size + key_len
    if data[_HEADER.size:start] != key.encode("ascii"):
        raise ValueError("entry belongs to another key")
    if len(data) != start + payload_len:
        raise ValueError(f"payload is {len(data) - start} bytes, header says {payload_len}")
    payload = data[start:]
    if hashlib.sha256(payload).digest() != digest:
        raise ValueError("checksum mismatch")
    return payload


def _warn_once(message: str, *args: object) -> None:
    global _warned
    with _warn_lock:
        if _warned:
            return
        _warned = True
    _log.warning(message, *args)


class ObjectCache:
    """Object code on disk under ``directory``, keyed by ``cache_key`` digests.

    ``max_bytes`` bounds the total size of the entries (``None``: unbounded).

    Example:
        >>> cache = ObjectCache("/tmp/ember-cache")
        >>> cache.store(key, b"object code")
        >>> cache.load(key)
        b'object code'
    """

    def __init__(self, directory: str | os.PathLike, max_bytes: int | None = DEFAULT_MAX_BYTES):
        if not isinstance(directory, (str, os.PathLike)):
            raise TypeError(f"ObjectCache: directory must be a str or path, got "
                            f"{type(directory).__name__}")
        if max_bytes is not None and (not isinstance(max_bytes, int) or max_bytes <= 0):
            raise ValueError(f"ObjectCache: max_bytes must be a positive int or None, got "
                             f"{max_bytes!r}")
        self.directory = os.fspath(directory)
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._size_estimate: int | None = None  # bytes on disk, scanned on the first store

    def __repr__(self) -> str:
        return f"ObjectCache({self.directory!r})"

    def path(self, key: str) -> str:
        """The file that holds (or would hold) the entry for ``key``."""
        if not isinstance(key, str) or not _KEY_RE.fullmatch(key):
            raise ValueError(f"ObjectCache: key must be a lowercase hex digest (from "
                             f"cache_key), got {key!r}")
        return os.path.join(self.directory, key[:2], key + SUFFIX)

    def load(self, key: str) -> bytes | None:
        """The payload stored under ``key``, or None on a miss or an invalid entry (removed)."""
        path = self.path(key)
        try:
            with open(path, "rb") as f:
                stat = os.fstat(f.fileno())
                data = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            _log.debug("object cache: cannot read %s: %s", path, e)
            return None
        try:
            payload = _decode_entry(key, data)
        except ValueError as e:
            _log.debug("object cache: removing invalid entry %s: %s", path, e)
            self._remove_if_unchanged(path, stat)
            return None
        try:
            os.utime(path)  # a hit makes the entry recently used for eviction
        except OSError:
            pass
        return payload

    def store(self, key: str, payload: bytes) -> None:
        """Stores ``payload`` under ``key`` atomically; I/O errors are logged, never raised."""
        path = self.path(key)
        if not isinstance(payload, (bytes, bytearray, memoryview)):
            raise TypeError(f"ObjectCache.store: payload must be bytes, got "
                            f"{type(payload).__name__}")
        data = encode_entry(key, bytes(payload))
        shard = os.path.dirname(path)
        tmp = None
        try:
            os.makedirs(shard, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=shard)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
            tmp = None
        except OSError as e:
            _warn_once("object cache: cannot write to %s (%s); compiled code is not cached",
                       self.directory, e)
            return
        finally:
            if tmp is not None:
                try:
                    os.remove(tmp)
                except OSError:
                    pass
        self._account(len(data))

    def remove(self, key: str) -> None:
        """Removes the entry for ``key`` if there is one (an entry found unusable)."""
        try:
            os.remove(self.path(key))
        except OSError:
            pass

    def _remove_if_unchanged(self, path: str, stat: os.stat_result) -> None:
        # Another process may have replaced the bad entry with a good one since we read it.
        try:
            now = os.stat(path)
            if (now.st_ino, now.st_mtime_ns, now.st_size) == (stat.st_ino, stat.st_mtime_ns,
                                                              stat.st_size):
                os.remove(path)
        except OSError:
            pass

    def _account(self, added: int) -> None:
        """Adds a store to the size estimate (evicting above ``max_bytes``). The estimate
        lives in a small file shared by the processes using the directory, so only the first
        store ever (or after the file is lost) scans every entry: a cache of 95,000 entries
        took 0.7 s to scan. Concurrent processes may lose each other's additions; eviction
        scans the entries and rewrites the true total."""
        if self.max_bytes is None:
            return
        with self._lock:
            if self._size_estimate is None:
                known = self._read_size_file()
                if known is None:
                    self._size_estimate = sum(size for _, size, _ in self._scan())
                else:
                    self._size_estimate = known + added
            else:
                shared = self._read_size_file()  # (other processes' stores since ours)
                self._size_estimate = max(self._size_estimate, shared or 0) + added
            if self._size_estimate > self.max_bytes:
                self._size_estimate = self._evict()
            self._write_size_file(self._size_estimate)

    def _read_size_file(self) -> int | None:
        try:
            with open(os.path.join(self.directory, _SIZE_FILE)) as f:
                return max(0, int(f.read(32)))
        except (OSError, ValueError):
            return None

    def _write_size_file(self, size: int) -> None:
        path = os.path.join(self.directory, _SIZE_FILE)
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}"
        try:
            with open(tmp, "w") as f:
                f.write(str(size))
            os.replace(tmp, path)
        except OSError:
            try:
                os.remove(tmp)
            except OSError:
                pass

    def _scan(self) -> list[tuple[str, int, float]]:
        """(path, size, mtime) of every entry; stale temporary files are removed on the way."""
        entries = []
        now = time.time()
        try:
            shards = [e.path for e in os.scandir(self.directory) if e.is_dir()]
        except OSError:
            return entries
        for shard in shards:
            try:
                files = list(os.scandir(shard))
            except OSError:
                continue
            for entry in files:
                try:
                    st = entry.stat()
                    if entry.name.startswith(_TMP_PREFIX):
                        if now - st.st_mtime > _STALE_TMP_SECONDS:
                            os.remove(entry.path)
                    elif entry.name.endswith(SUFFIX):
                        entries.append((entry.path, st.st_size, st.st_mtime))
                except OSError:
                    continue
        return entries

    def _evict(self) -> int:
        """Removes least recently used entries down to 3/4 of ``max_bytes``; the new total."""
        entries = sorted(self._scan(), key=lambda e: e[2])
        total = sum(size for _, size, _ in entries)
        target = self.max_bytes * 3 // 4
        for path, size, _ in entries:
            if total <= target:
                break
            try:
                os.remove(path)
                total -= size
            except OSError:
                continue
        return total


def default_cache_dir() -> str:
    """``$EMBER_CACHE_DIR`` if set, else ember's folder in the user's cache directory.

    That is ``$XDG_CACHE_HOME/ember`` or ``~/.cache/ember`` on Linux,
    ``~/Library/Caches/ember`` on macOS and ``%LOCALAPPDATA%\\ember\\cache`` on Windows.

    Example:
        >>> default_cache_dir()  # doctest: +SKIP
        '/home/me/.cache/ember'
    """
    explicit = os.environ.get("EMBER_CACHE_DIR")
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    if sys.platform == "darwin":
        return os.path.join(os.path.expanduser("~"), "Library", "Caches", "ember")
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~")
        return os.path.join(base, "ember", "cache")
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):  # the XDG spec says to ignore relative paths
        return os.path.join(xdg, "ember")
    return os.path.join(os.path.expanduser("~"), ".cache", "ember")


_caches: dict[str, ObjectCache] = {}
_caches_lock = threading.Lock()


def get_object_cache() -> ObjectCache | None:
    """The cache the config selects, or None when ``jax_enable_compilation_cache`` is off.

    The directory is ``jax_compilation_cache_dir`` if set, else ``default_cache_dir()``;
    both are read on every call.

    Example:
        >>> ember.config.update("jax_enable_compilation_cache", False)
        >>> get_object_cache() is None
        True
    """
    if not config.read("jax_enable_compilation_cache"):
        return None
    directory = config.read("jax_compilation_cache_dir") or default_cache_dir()
    if not isinstance(directory, (str, os.PathLike)):
        raise TypeError(f"get_object_cache: config jax_compilation_cache_dir must be a str, "
                        f"a path or None, got {type(directory).__name__}")
    directory = os.path.abspath(os.path.expanduser(os.fspath(directory)))
    cache = _caches.get(directory)
    if cache is None:
        with _caches_lock:
            cache = _caches.setdefault(directory, ObjectCache(directory))
    return cache
