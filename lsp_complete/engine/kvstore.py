"""Per-file KV sequences on disk (diskcache), so a reopened file or a restarted server is warm.

An entry is the sequence's tokens plus llama.cpp's per-sequence state. Entries are keyed by the
model's identity and the file, carry a checksum, and are discarded rather than trusted when
anything about them does not add up.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import struct
from pathlib import Path

import diskcache
import numpy as np

log = logging.getLogger(__name__)

_MAGIC = b"LSPCKV1\0"
_HEADER = struct.Struct("<8sI32s")  # magic, token count, blake2b-256 of tokens+state


class KVStore:
    def __init__(self, directory: str | Path, size_limit: int = 1 << 30) -> None:
        self.directory = Path(directory)
        try:
            self._cache = diskcache.Cache(str(self.directory), size_limit=size_limit)
        except Exception as exc:  # a corrupt database file: start over rather than fail
            log.warning("KV cache at %s unusable (%s); recreating it", self.directory, exc)
            import shutil

            shutil.rmtree(self.directory, ignore_errors=True)
            self._cache = diskcache.Cache(str(self.directory), size_limit=size_limit)

    @staticmethod
    def _key(model_id: str, file_key: str) -> str:
        return f"{model_id}\n{file_key}"

    def save(self, model_id: str, file_key: str, tokens: list[int], state: bytes) -> None:
        token_bytes = np.asarray(tokens, dtype=np.int32).tobytes()
        digest = hashlib.blake2b(token_bytes + state, digest_size=32).digest()
        blob = _HEADER.pack(_MAGIC, len(tokens), digest) + token_bytes + state
        try:
            self._cache.set(self._key(model_id, file_key), blob)
        except Exception as exc:  # disk full, permissions: persistence is an optimisation
            log.warning("could not save KV cache entry: %s", exc)

    def load(self, model_id: str, file_key: str) -> tuple[list[int], bytes] | None:
        key = self._key(model_id, file_key)
        try:
            blob = self._cache.get(key)
        except Exception as exc:
            log.warning("could not read KV cache entry: %s", exc)
            return None
        if blob is None:
            return None
        parsed = _parse(blob)
        if parsed is None:
            log.warning("discarding corrupt KV cache entry for %s", file_key)
            self.discard(model_id, file_key)
        return parsed

    def discard(self, model_id: str, file_key: str) -> None:
        with contextlib.suppress(Exception):
            self._cache.delete(self._key(model_id, file_key))

    def volume(self) -> int:
        return int(self._cache.volume())

    def close(self) -> None:
        self._cache.close()


def _parse(blob: object) -> tuple[list[int], bytes] | None:
    if not isinstance(blob, bytes) or len(blob) < _HEADER.size:
        return None
    magic, count, digest = _HEADER.unpack_from(blob)
    if magic != _MAGIC:
        return None
    body = blob[_HEADER.size :]
    token_bytes, state = body[: count * 4], body[count * 4 :]
    if len(token_bytes) != count * 4 or not state:
        return None
    if hashlib.blake2b(token_bytes + state, digest_size=32).digest() != digest:
        return None
    return np.frombuffer(token_bytes, dtype=np.int32).tolist(), state
