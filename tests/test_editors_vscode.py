"""The VS Code extension builds, passes its own unit tests and packages to a .vsix."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

VSCODE = Path(__file__).resolve().parent.parent / "editors" / "vscode"


@pytest.mark.skipif(shutil.which("npm") is None, reason="needs Node.js and npm")
def test_extension_builds_tests_and_packages() -> None:
    proc = subprocess.run(
        ["bash", str(VSCODE / "scripts" / "ci.sh")],
        capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    vsix = VSCODE / "lsp-complete.vsix"
    with zipfile.ZipFile(vsix) as archive:
        names = archive.namelist()
    assert "extension/out/extension.js" in names
    assert "extension/package.json" in names
