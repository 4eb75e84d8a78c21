"""The model file the in-process engine loaded, watched: held open from load, so that its
size and mtime say whether that very file was rewritten in place (its memory-mapped weights
would then crash the process with SIGBUS at the next decode) and the path's say whether another
file took its name. Also whether the weights are read into memory or mapped.

Model-free (a stat or two): testable without llama.cpp.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from lsp_complete.engine.base import ModelFileChanged, file_stamp, path_stamp

log = logging.getLogger(__name__)


class ModelFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = os.open(path, os.O_RDONLY)
        self.loaded_stamp = file_stamp(os.fstat(self._fd))
        self._stale: str | None = None

    @property
    def size(self) -> int:
        return self.loaded_stamp[2]

    def changed(self) -> str | None:
        """Why the file on disk is no longer the one loaded, else None."""
        if self._stale is not None:
            return self._stale
        fd = self._fd
        if fd is None:
            return None
        if file_stamp(os.fstat(fd)) != self.loaded_stamp:
            return f"the model file {self.path} was rewritten on disk while in use"
        named = path_stamp(self.path)
        if named is not None and named != self.loaded_stamp:
            return f"the model file {self.path} was replaced on disk"
        return None  # unchanged, or removed (what is loaded still works; nothing to reload)

    def check_mapping(self) -> None:
        """Raise ModelFileChanged, now and from then on, once the mapped file was rewritten:
        its pages may be gone, and touching them is a SIGBUS."""
        if self._stale is None and self._fd is not None and (
                file_stamp(os.fstat(self._fd)) != self.loaded_stamp):
            self._stale = (f"the model file {self.path} was rewritten on disk while in "
                           "use; its weights are no longer used until it is loaded again")
            log.warning("%s", self._stale)
        if self._stale is not None:
            raise ModelFileChanged(self._stale)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def fits_in_memory(size: int) -> bool:
    """Whether the weights may be read into the process's memory rather than mapped: at most
    half the memory available now (a large model on a small machine stays mapped)."""
    available = None
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError):
        pass
    if available is None:
        try:  # no /proc (macOS): a quarter of the physical memory
            available = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
        except (OSError, ValueError, AttributeError):
            return False
    return size <= available // 2
