"""Client URIs to local paths (lsp_complete.uris), by Windows rules (ntpath) and POSIX rules
(posixpath), on any system; and what the workspace makes of a URI that names no file."""

from __future__ import annotations

import ntpath
import posixpath
from pathlib import Path

import pytest

from lsp_complete.uris import file_path
from lsp_complete.workspace import path_of_uri

WINDOWS = [
    ("file:///C:/x", "C:\\x"),
    ("file:///c%3A/x", "C:\\x"),  # VS Code's form: lower-case drive, escaped colon
    ("file:///c%3a/Users/me/proj/main.py", "C:\\Users\\me\\proj\\main.py"),
    ("file:///C|/x", "C:\\x"),  # the old form
    ("file://localhost/D:/src/a.py", "D:\\src\\a.py"),
    ("file:C:/x", "C:\\x"),
    ("file:///C:", "C:\\"),
    ("file:///C:/", "C:\\"),
    ("file://server/share/x", "\\\\server\\share\\x"),  # UNC
    ("file://Server/share/dir/a%20b.py", "\\\\server\\share\\dir\\a b.py"),
    ("file:////server/share/x", "\\\\server\\share\\x"),  # UNC written with four slashes
    ("file:///C:/My%20Files/%E4%B8%AD.py", "C:\\My Files\\中.py"),
    ("file:///C:/a%23b/c%3Fd.py", "C:\\a#b\\c?d.py"),
    ("FILE:///C:/x", "C:\\x"),  # the scheme is case-insensitive
]

POSIX = [
    ("file:///work/a.py", "/work/a.py"),
    ("file://localhost/work/a.py", "/work/a.py"),
    ("file:///work/My%20Files/%E4%B8%AD.py", "/work/My Files/中.py"),
    ("file:///C:/x", "/C:/x"),  # on POSIX a folder named `C:`
    ("file:///work/a%23b.py", "/work/a#b.py"),
    ("file:///work/%FF.py", "/work/\udcff.py"),  # not UTF-8: the byte as the file system has it
]

NO_FILE = [
    "file:///work/a%00b.py",  # NUL: no file system takes it
    "file:///work/a\x00b.py",
    "untitled:Untitled-1",
    "vscode-notebook-cell:/work/a.ipynb#X1",
    "http://example.com/a.py",
    "file://[::1/x",  # malformed
    "file:",
    "file://",
    "relative/path.py",
    "",
]


@pytest.mark.parametrize(("uri", "path"), WINDOWS)
def test_windows_uris_name_windows_paths(uri: str, path: str) -> None:
    assert file_path(uri, ntpath) == path


@pytest.mark.parametrize(("uri", "path"), POSIX)
def test_posix_uris_name_posix_paths(uri: str, path: str) -> None:
    assert file_path(uri, posixpath) == path


@pytest.mark.parametrize("uri", [*NO_FILE, "file:///x/y", "file:///C:%2F..%00/x",
                                 "file:///C:/%FF.py", "file://user@server/share/x"])
def test_uris_that_name_no_windows_file(uri: str) -> None:
    """No drive (rooted at whatever drive is current), bad UTF-8, credentials: no file."""
    assert file_path(uri, ntpath) is None


@pytest.mark.parametrize("uri", [*NO_FILE, "file://server/share/x"])
def test_uris_that_name_no_posix_file(uri: str) -> None:
    assert file_path(uri, posixpath) is None


def test_the_workspace_takes_the_same_rules() -> None:
    """Before: `path_of_uri` kept %00 as a NUL in the path (os.path.realpath then raised
    ValueError at every lookup) and read `file:///C:/x` on Windows as `\\C:\\x`."""
    assert path_of_uri("file:///work/a%00b.py") is None
    assert path_of_uri("file:///work/a.py") == Path(file_path("file:///work/a.py"))
    assert path_of_uri("untitled:Untitled-1") is None


# ------------------------------------------------------------------ end to end


async def test_a_uri_that_names_no_file_leaves_every_other_files_context(
        tiny_model_path: Path, tmp_path: Path) -> None:
    """Before: once a document whose URI holds %00 was open, `RepoHost._buffer` raised
    ValueError (embedded null byte) in os.path.realpath at every lookup, for every file, and
    no file's repository block was built or updated again."""
    from lsprotocol import types

    from lsp_complete.testing.lsp_client import inline, insert, open_doc, poll_status, status
    from tests.lsp_helpers import start_server

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/__init__.py").write_text("")
    (tmp_path / "pkg/b.py").write_text("def helper(x, y=2):\n    return x * y\n")
    (tmp_path / "pkg/c.py").write_text("def other(flag):\n    return not flag\n")
    text = "from .b import helper\n\n\ndef main():\n    value = 1\n    \n"
    (tmp_path / "pkg/a.py").write_text(text)
    client = await start_server(tiny_model_path, {"repoContextTokens": 256,
                                                  "idleReanchorMs": 30, "maxTokens": 4},
                                workspace_folders=[tmp_path.as_uri()])
    try:
        odd = tmp_path.as_uri() + "/pkg/odd%00name.py"
        open_doc(client, odd, text)
        await inline(client, odd, 5, 4)
        uri = (tmp_path / "pkg/a.py").as_uri()
        open_doc(client, uri, text)

        def files_of(st: dict) -> list[str]:
            doc = next((d for d in st["documents"] if d["uri"] == uri), {})
            return sorted(f["path"] for f in (doc.get("repoContext") or {}).get("files", []))

        await inline(client, uri, 5, 4)  # idle work after it brings the block
        st = await poll_status(client, lambda s: files_of(s) == ["pkg/b.py"], 30)
        assert files_of(st) == ["pkg/b.py"], st["documents"]
        # The block follows an import edit.
        insert(client, uri, 2, 1, 0, "from .c import other\n")
        await inline(client, uri, 6, 4)
        st = await poll_status(client, lambda s: files_of(s) == ["pkg/b.py", "pkg/c.py"], 30)
        assert files_of(st) == ["pkg/b.py", "pkg/c.py"], st["documents"]
        # The odd document is an unsaved buffer: open, served, with no repository block.
        odd_doc = next(d for d in (await status(client))["documents"] if d["uri"] == odd)
        assert odd_doc["repoContext"] is None
        assert not [m for m in client.messages if m.type == types.MessageType.Error]
    finally:
        await client.shutdown_session()
