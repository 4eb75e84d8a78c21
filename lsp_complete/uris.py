"""URIs from the client to local file paths: the one place that decides whether a URI names a
file, and which.

Every URI the client sends (documents, workspace folders, saved and watched files) goes
through `file_path`. One that cannot name a file here (another scheme, a NUL byte, a bad
escape or UTF-8 sequence, another host on POSIX, no drive on Windows, a malformed URI) gives
None: the document is then an unsaved buffer (no repository context of its own, never read
from or matched against the disk), and nothing it holds reaches a file-system call.

Windows: `file:///C:/x` and `file:///c%3A/x` (VS Code's form) name `C:\\x`; `file://server/share/x`
names the UNC path `\\\\server\\share\\x`. The conversion takes the path module to follow
(`os.path` by default), so the tests check Windows rules with `ntpath` on any system.
"""

from __future__ import annotations

import os
import re
from types import ModuleType
from urllib.parse import unquote_to_bytes, urlsplit

_LOCAL_HOSTS = ("", "localhost")
# `/C:/x`, `/c%3A/x` once unescaped, and the old `/C|/x`.
_DRIVE = re.compile(r"/?(?P<letter>[A-Za-z])[:|](?=/|$)")


def file_path(uri: object, flavour: ModuleType = os.path) -> str | None:
    """The local path `uri` names under `flavour`'s rules (posixpath or ntpath), or None."""
    if not isinstance(uri, str) or "\x00" in uri:
        return None
    try:
        parts = urlsplit(uri)
    except ValueError:  # e.g. an unclosed `[` in the host
        return None
    if parts.scheme.lower() != "file":
        return None
    try:
        raw = unquote_to_bytes(parts.path)
    except UnicodeEncodeError:  # a lone UTF-16 surrogate, which no file name holds
        return None
    if b"\x00" in raw:
        return None
    windows = flavour.sep == "\\"
    try:
        # POSIX paths are bytes: keep any byte as the file system would (surrogateescape).
        path = raw.decode("utf-8", "strict" if windows else "surrogateescape")
    except UnicodeDecodeError:
        return None
    host = parts.netloc.lower()
    if windows:
        return _windows_path(path, host)
    if host not in _LOCAL_HOSTS or not path.startswith("/"):
        return None  # another machine's file, or no absolute path
    return path


def _windows_path(path: str, host: str) -> str | None:
    if host not in _LOCAL_HOSTS:  # file://server/share/x
        if "@" in host or ":" in host or not path.startswith("/") or path == "/":
            return None  # credentials or a port: not a share
        return "\\\\" + host + path.replace("/", "\\")
    drive = _DRIVE.match(path)
    if drive is not None:
        rest = path[drive.end():] or "/"
        return drive["letter"].upper() + ":" + rest.replace("/", "\\")
    if path.startswith("//") and len(path) > 2 and path[2] != "/":  # file:////server/share
        return path.replace("/", "\\")
    return None  # no drive: not a path Windows can open the same way from every folder
