"""Per-file KV sequences on disk, so a reopened file or a restarted server is warm.

This module owns the on-disk format of an entry and the safety of the folder that holds them.
An entry is one plain file per (model, file URI): a framed byte string that is parsed, never
unpickled, and trusted only when everything about it adds up:

    magic (8 bytes) | format version (u16) | header length (u32) | blake2b-256 (32 bytes)
    header: JSON {"model", "uri", "tokens", "state"}
    payload: the tokens (int32, little-endian) then llama.cpp's per-sequence state

The checksum covers the fixed fields, the header and the payload; the header names the model
identity (see `model_identity`) and the URI the entry was saved for, so an entry copied to
another model's or another file's name is a miss. A miss that was caused by a bad entry
deletes it. The folder is 0700 and entries 0600; a folder owned by someone else, writable by
others, or not writable at all disables persistence (one message), never the model.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import logging
import os
import secrets
import stat
import struct
import time
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
_MAGIC = b"LSPCKV\0\0"
_FIXED = struct.Struct("<8sHI")  # magic, format version, header length
_DIGEST_SIZE = 32
_PREFIX_SIZE = _FIXED.size + _DIGEST_SIZE
_MAX_HEADER = 64 * 1024
_SUFFIX = ".kv"
_STALE_TEMP_S = 3600  # a temporary file this old was left by a process that died mid-write
# Opening never follows a link nor blocks on a FIFO; the checks below refuse anything else.
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)


def model_identity(model_path: Path, model_id: str, **layout: object) -> str:
    """What an entry is bound to: the model (its sha256 or name), the exact file it was loaded
    from (path, size, mtime) and the settings that shape its KV state (`layout`)."""
    st = model_path.stat()
    parts = [model_id, str(model_path.resolve()), f"size={st.st_size}", f"mtime={st.st_mtime_ns}"]
    parts += [f"{key}={value}" for key, value in sorted(layout.items())]
    return "|".join(parts)


class KVStore:
    """Entries in `directory`; at most `size_limit` bytes, least recently used evicted first.

    `unavailable` is None, or the one message saying why persistence is off (the folder cannot
    be used); then load and save do nothing.
    """

    def __init__(self, directory: str | Path, size_limit: int = 1 << 30) -> None:
        self.directory = Path(directory)
        self.size_limit = size_limit
        self.unavailable = _prepare_folder(self.directory)
        self._warned = False

    def _path(self, model_id: str, file_key: str) -> Path:
        name = hashlib.blake2b(f"{model_id}\0{file_key}".encode(), digest_size=20).hexdigest()
        return self.directory / (name + _SUFFIX)

    def save(self, model_id: str, file_key: str, tokens: list[int], state: bytes) -> None:
        if self.unavailable is not None or not tokens or not state:
            return
        blob = encode_entry(model_id, file_key, tokens, state)
        if len(blob) > self.size_limit:
            return
        path = self._path(model_id, file_key)
        temp = self.directory / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            _write_private(temp, blob)
            os.replace(temp, path)  # readers see the old entry or the new one, never half
        except OSError as exc:  # disk full, folder gone read-only: persistence is an optimisation
            with contextlib.suppress(OSError):
                temp.unlink()
            self._warn_once(f"could not save a KV cache entry in {self.directory}: {exc}")
            return
        self._trim()

    def load(self, model_id: str, file_key: str) -> tuple[list[int], bytes] | None:
        if self.unavailable is not None:
            return None
        path = self._path(model_id, file_key)
        try:
            blob = _read_private(path, self.size_limit)
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._warn_once(f"could not read a KV cache entry in {self.directory}: {exc}")
            return None
        parsed = None if blob is None else decode_entry(blob, model_id, file_key)
        if parsed is None:
            log.warning("discarding corrupt or foreign KV cache entry for %s", file_key)
            self._remove(path)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: evicted last
        return parsed

    def discard(self, model_id: str, file_key: str) -> None:
        if self.unavailable is None:
            self._remove(self._path(model_id, file_key))

    def volume(self) -> int:
        return sum(size for _, size, _ in self._entries())

    def close(self) -> None:
        """Nothing is held open between calls; kept so that owners can close any store."""

    def _remove(self, path: Path) -> None:
        with contextlib.suppress(OSError):
            path.unlink()

    def _entries(self) -> list[tuple[int, int, Path]]:
        """(mtime, size, path) of every entry file, oldest first."""
        found: list[tuple[int, int, Path]] = []
        with contextlib.suppress(OSError), os.scandir(self.directory) as it:
            for item in it:
                with contextlib.suppress(OSError):
                    st = item.stat(follow_symlinks=False)
                    if item.name.endswith(_SUFFIX) and stat.S_ISREG(st.st_mode):
                        found.append((st.st_mtime_ns, st.st_size, Path(item.path)))
                    elif item.name.endswith(".tmp") and time.time() - st.st_mtime > _STALE_TEMP_S:
                        self._remove(Path(item.path))
        return sorted(found)

    def _trim(self) -> None:
        entries = self._entries()
        total = sum(size for _, size, _ in entries)
        for _, size, path in entries:
            if total <= self.size_limit:
                break
            self._remove(path)
            total -= size

    def _warn_once(self, message: str) -> None:
        # Every keystroke could hit the same broken disk: one line in the log is enough.
        if not self._warned:
            self._warned = True
            log.warning("%s (further KV cache errors are not logged)", message)


# --------------------------------------------------------------------------- entry format


def encode_entry(model_id: str, file_key: str, tokens: list[int], state: bytes) -> bytes:
    header = json.dumps(
        {"model": model_id, "uri": file_key, "tokens": len(tokens), "state": len(state)},
        separators=(",", ":"),
    ).encode()
    fixed = _FIXED.pack(_MAGIC, FORMAT_VERSION, len(header))
    payload = np.asarray(tokens, dtype="<i4").tobytes() + state
    digest = hashlib.blake2b(fixed + header + payload, digest_size=_DIGEST_SIZE).digest()
    return fixed + digest + header + payload


def decode_entry(blob: bytes, model_id: str, file_key: str) -> tuple[list[int], bytes] | None:
    """(tokens, state) when `blob` is an intact entry saved for this model and file, else None."""
    if len(blob) < _PREFIX_SIZE:
        return None
    magic, version, header_len = _FIXED.unpack_from(blob)
    if magic != _MAGIC or version != FORMAT_VERSION or header_len > _MAX_HEADER:
        return None
    digest = blob[_FIXED.size : _PREFIX_SIZE]
    body = memoryview(blob)[_PREFIX_SIZE:]
    actual = hashlib.blake2b(blob[: _FIXED.size], digest_size=_DIGEST_SIZE)
    actual.update(body)
    if len(body) < header_len or not hmac.compare_digest(actual.digest(), digest):
        return None
    try:
        header = json.loads(bytes(body[:header_len]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(header, dict):
        return None
    if header.get("model") != model_id or header.get("uri") != file_key:
        return None  # another model's or another file's entry under this name
    count, state_len = header.get("tokens"), header.get("state")
    if not _count(count) or not _count(state_len) or state_len == 0:
        return None
    payload = body[header_len:]
    if len(payload) != count * 4 + state_len:
        return None
    tokens = np.frombuffer(payload[: count * 4], dtype="<i4").tolist()
    return tokens, bytes(payload[count * 4 :])


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# --------------------------------------------------------------------------- files and folder


def _prepare_folder(directory: Path) -> str | None:
    """Create the folder (0700) or check the existing one; the reason it cannot be used, else
    None. Nothing here deletes anything: a folder we cannot use is left as it is."""
    off = f"KV cache persistence is off: {directory}"
    after = "completions still work, files just start cold after a restart"
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)
        st = os.stat(directory)
    except OSError as exc:
        return f"{off} cannot be created ({exc.strerror or exc}); {after}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{off} is not a folder; {after}"
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    if uid is not None and st.st_uid != uid:
        return (f"{off} belongs to another user (uid {st.st_uid}), so its entries cannot be "
                f"trusted; {after}. Remove it or point LSP_COMPLETE_CACHE_DIR elsewhere")
    if uid is not None and st.st_mode & 0o022:
        return (f"{off} is writable by other users (mode {stat.S_IMODE(st.st_mode):o}), so its "
                f"entries cannot be trusted; {after}. Run `chmod 700 {directory}` to use it")
    if uid is not None and st.st_mode & 0o077:
        with contextlib.suppress(OSError):
            os.chmod(directory, 0o700)  # ours, created readable by an older version: tighten
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"{off} is not writable; {after}"
    return None


def _write_private(path: Path, blob: bytes) -> None:
    fd = os.open(path, _WRITE_FLAGS, 0o600)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o600)  # the umask can only remove bits; be explicit anyway
        view = memoryview(blob)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _read_private(path: Path, limit: int) -> bytes | None:
    """The file's bytes; None when it is not a regular file of ours within the size limit."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a symbolic link where an entry belongs: not an entry
            return None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            return None
        chunks: list[bytes] = []
        left = st.st_size
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
