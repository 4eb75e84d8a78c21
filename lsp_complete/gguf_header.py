"""The one GGUF header reader: a model file's magic, version, metadata (scalars, strings and
the arrays asked for) and where its tensor data ends, read without touching the tensor data.
The registry checks (models.py), the store's completeness check (model_store.py) and through
them the doctor all read headers here. `ModelError` is its error (and every model error's).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

GGUF_MAGIC = b"GGUF"


class ModelError(Exception):
    """A model is unknown, missing, corrupt or misdescribed; the message says what to do."""


def has_gguf_magic(path: Path) -> bool:
    """Whether the file starts with the GGUF magic (OSError when it cannot be read)."""
    with open(path, "rb") as f:
        return f.read(len(GGUF_MAGIC)) == GGUF_MAGIC


@dataclass(frozen=True)
class GGUFInfo:
    version: int
    # Every scalar and string value, plus the arrays that were asked for (others are skipped:
    # decoding a 150k-entry vocabulary is what makes a full parse slow).
    metadata: dict[str, Any]
    tensor_count: int
    data_offset: int
    # Where the last tensor's data ends; a shorter file is truncated. None when a tensor type
    # is unknown to the installed gguf package.
    data_end: int | None


_SCALAR_FORMATS: dict[int, str] = {
    GGUFValueType.UINT8: "B",
    GGUFValueType.INT8: "b",
    GGUFValueType.UINT16: "H",
    GGUFValueType.INT16: "h",
    GGUFValueType.UINT32: "I",
    GGUFValueType.INT32: "i",
    GGUFValueType.FLOAT32: "f",
    GGUFValueType.BOOL: "?",
    GGUFValueType.UINT64: "Q",
    GGUFValueType.INT64: "q",
    GGUFValueType.FLOAT64: "d",
}


class _Truncated(Exception):
    pass


# Read from the file this much at a time: a model's header (vocabulary, merges) is a few MiB.
_CHUNK = 1 << 20


class _Cursor:
    """Sequential reads over the header, from the file with ordinary reads into a window
    (not a memory mapping: a file cut short during the parse, a second copy over it, would
    kill the process with SIGBUS; a short read is just _Truncated). Skips move past bytes
    without reading them. Raises _Truncated past the end."""

    def __init__(self, f: BinaryIO, size: int, endian: str, pos: int) -> None:
        self._file = f
        self._size = size  # at open: a larger count is corrupt, whatever the file holds later
        self._window = b""
        self._start = 0  # the file offset of the window's first byte
        self.pos = pos
        self.endian = endian

    def _at(self, n: int) -> int:
        """Where in the window the `n` bytes at `pos` are, reading them in if they are not."""
        if n < 0 or self.pos + n > self._size:
            raise _Truncated
        if self.pos + n > self._start + len(self._window):
            self._file.seek(self.pos)
            self._window = self._file.read(max(n, _CHUNK))
            self._start = self.pos
            if len(self._window) < n:  # cut short since it was opened
                raise _Truncated
        return self.pos - self._start

    def unpack(self, fmt: str) -> tuple[Any, ...]:
        full = self.endian + fmt
        try:
            size = struct.calcsize(full)
        except struct.error:
            raise _Truncated from None
        at = self._at(size)  # (first: it may read a new window)
        values = struct.unpack_from(full, self._window, at)
        self.pos += size
        return values

    def u32(self) -> int:
        return int(self.unpack("I")[0])

    def u64(self) -> int:
        return int(self.unpack("Q")[0])

    def skip(self, n: int) -> None:
        if n < 0 or self.pos + n > self._size:
            raise _Truncated
        self.pos += n

    def string(self) -> str:
        n = self.u64()
        at = self._at(n)
        self.pos += n
        return self._window[at : at + n].decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        self.skip(self.u64())


def _read_value(cur: _Cursor, vtype: int, decode: bool) -> Any:
    if vtype == GGUFValueType.STRING:
        if decode:
            return cur.string()
        cur.skip_string()
        return None
    fmt = _SCALAR_FORMATS.get(vtype)
    if fmt is not None:
        return cur.unpack(fmt)[0]
    if vtype != GGUFValueType.ARRAY:
        raise _Truncated  # unknown type: the header is corrupt
    item_type, count = cur.u32(), cur.u64()
    item_fmt = _SCALAR_FORMATS.get(item_type)
    if item_fmt is not None:
        if decode:
            return list(cur.unpack(f"{count}{item_fmt}"))
        cur.skip(count * struct.calcsize(item_fmt))
        return None
    items = [_read_value(cur, item_type, decode) for _ in range(count)]
    return items if decode else None


def read_gguf_info(path: Path, arrays: Collection[str] = ()) -> GGUFInfo:
    """Parse a GGUF header without touching tensor data.

    Not gguf.GGUFReader: it builds numpy views for every metadata item, which took 7 s on the
    0.5B Qwen file (300k vocabulary and merge strings); this walk takes a fraction of a second
    and decodes only the `arrays` asked for. The value types and tensor sizes are the gguf
    package's.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8 or head[:4] != GGUF_MAGIC:
                raise ModelError(
                    f"{path} is not a GGUF model file (it does not start with the bytes 'GGUF')"
                )
            return _parse_header(f, head, arrays)
    except OSError as err:
        raise ModelError(f"cannot read model file {path}: {err.strerror or err}") from None
    except _Truncated:
        raise ModelError(f"{path}: the GGUF header is truncated or corrupt") from None


def _parse_header(f: BinaryIO, head: bytes, arrays: Collection[str]) -> GGUFInfo:
    endian = "<"
    version = struct.unpack_from("<I", head, 4)[0]
    if version & 0xFFFF == 0:  # written on a big-endian machine
        endian = ">"
        version = struct.unpack_from(">I", head, 4)[0]
    if version not in (2, 3):
        raise ModelError(f"unsupported GGUF version {version} (lsp-complete reads 2 and 3)")
    cur = _Cursor(f, os.fstat(f.fileno()).st_size, endian, pos=8)
    tensor_count, kv_count = cur.u64(), cur.u64()
    metadata: dict[str, Any] = {}
    for _ in range(kv_count):
        key = cur.string()
        vtype = cur.u32()
        value = _read_value(cur, vtype, decode=vtype != GGUFValueType.ARRAY or key in arrays)
        if value is not None:
            metadata[key] = value
    data_ends: list[int] = []
    known_types = True
    for _ in range(tensor_count):
        cur.skip_string()  # tensor name
        n_dims = cur.u32()
        dims = cur.unpack(f"{n_dims}Q")
        ggml_type, offset = cur.u32(), cur.u64()
        nbytes = _tensor_nbytes(ggml_type, dims)
        if nbytes is None:
            known_types = False
        else:
            data_ends.append(offset + nbytes)
    alignment = metadata.get("general.alignment", 32)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise _Truncated
    data_offset = -(-cur.pos // alignment) * alignment
    data_end = data_offset + max(data_ends, default=0) if known_types else None
    return GGUFInfo(version, metadata, tensor_count, data_offset, data_end)


def _tensor_nbytes(ggml_type: int, dims: tuple[int, ...]) -> int | None:
    try:
        block_size, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(ggml_type)]
    except (ValueError, KeyError):
        return None
    n_elements = 1
    for d in dims:
        n_elements *= d
    return n_elements // block_size * type_size
