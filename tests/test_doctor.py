"""`lsp-complete doctor`: each check's verdict and fix, the text and --json reports, the exit
code. The model and cache checks run on real files (the tiny GGUF, folders with real modes);
the backend check also runs on the real llama-cpp-python."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import types
from pathlib import Path

import pytest

from lsp_complete import doctor, model_store
from lsp_complete.models import load_registry


def _by_name(checks: list[doctor.Check]) -> dict[str, doctor.Check]:
    return {check.name: check for check in checks}


# ---------------------------------------------------------------------------------- the CLI


def _run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lsp_complete", "doctor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_cli_json_all_well_with_a_model_file(tiny_model_path: Path, tmp_path: Path) -> None:
    done = _run_cli("--json", "--model", str(tiny_model_path),
                    env={"LSP_COMPLETE_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True
    checks = {c["name"]: c for c in report["checks"]}
    assert list(checks) == ["python", "llama.cpp", "model", "cache", "daemon"]
    assert all(c["status"] in doctor.STATUSES for c in checks.values())
    assert checks["python"]["status"] == "ok"
    assert checks["llama.cpp"]["status"] in ("ok", "warn")
    assert isinstance(checks["llama.cpp"]["details"]["gpuOffload"], bool)
    assert checks["model"]["status"] == "ok"
    assert checks["model"]["details"]["path"] == str(tiny_model_path)
    assert checks["cache"]["status"] == "ok"
    assert "not created yet" in checks["cache"]["summary"]
    assert not (tmp_path / "cache").exists(), "the doctor creates nothing"


def test_cli_text_fails_with_a_fix_and_exit_code_1(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.gguf"
    done = _run_cli("--model", str(missing), env={"LSP_COMPLETE_CACHE_DIR": str(tmp_path)})
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    model_line = next(i for i, line in enumerate(lines) if line.startswith("[FAIL] model"))
    assert str(missing) in lines[model_line]
    assert lines[model_line + 1].strip().startswith("fix: ")
    assert lines[-1] == "1 check(s) failed."


# ---------------------------------------------------------------------------------- python


def test_python_too_old_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "version_info", (3, 10, 12, "final", 0))
    check = doctor.check_python()
    assert check.status == "fail"
    assert "3.10.12" in check.summary
    assert "3.11" in check.fix and doctor.INSTALL_HINT in check.fix


# ---------------------------------------------------------------------------------- backend


def test_system_info_parsing() -> None:
    text = "CUDA : ARCHS = 890 | USE_GRAPHS = 1 | CPU : SSE3 = 1 | AVX2 = 0 | FMA = 1 | "
    assert doctor.parse_system_info(text) == {
        "CUDA": {"ARCHS": "890", "USE_GRAPHS": "1"},
        "CPU": {"SSE3": "1", "AVX2": "0", "FMA": "1"},
    }


def _fake_llama(info: bytes, gpu: bool) -> types.SimpleNamespace:
    return types.SimpleNamespace(
        __version__="9.9.9",
        llama_print_system_info=lambda: info,
        llama_supports_gpu_offload=lambda: gpu,
    )


def _check_backend_on_x86(monkeypatch: pytest.MonkeyPatch, info: bytes,
                          gpu: bool) -> doctor.Check:
    """doctor's backend check with a llama_cpp that reports `info`, on an x86_64 machine."""
    fake = _fake_llama(info, gpu)
    real_import = doctor.importlib.import_module
    monkeypatch.setattr(doctor.importlib, "import_module",
                        lambda name: fake if name == "llama_cpp" else real_import(name))
    monkeypatch.setattr(doctor.platform, "machine", lambda: "x86_64")
    return doctor.check_backend()


def test_backend_without_avx2_warns_and_reports_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    check = _check_backend_on_x86(monkeypatch, b"CPU : SSE3 = 1 | AVX2 = 0 | ", gpu=True)
    assert check.status == "warn"
    assert "AVX2" in check.fix
    assert "GPU offload available" in check.summary
    assert check.details["cpuFeatures"] == ["SSE3"]


def test_backend_with_amx_kernels_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    check = _check_backend_on_x86(
        monkeypatch, b"CPU : AVX2 = 1 | AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1 | ", gpu=False)
    assert check.status == "warn"
    assert "AMX" in check.fix and "GGML_NATIVE=OFF" in check.fix


def test_backend_that_does_not_load_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(name: str) -> object:
        raise OSError("libllama.so: cannot open shared object file")

    monkeypatch.setattr(doctor.importlib, "import_module", broken)
    check = doctor.check_backend()
    assert check.status == "fail"
    assert "libllama.so" in check.summary
    assert doctor.INSTALL_HINT in check.fix


def test_real_backend_loads() -> None:
    check = doctor.check_backend()
    assert check.status in ("ok", "warn"), check
    assert check.details["version"]


# ------------------------------------------------------------------------------------ model


def test_registry_model_absent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LSP_COMPLETE_CACHE_DIR", str(tmp_path))
    registry = load_registry()
    absent = [s for s in registry.values() if not s.default and model_store._status(s) == "absent"]
    if not absent:
        pytest.skip("every model's packages are installed here")
    other = absent[0]
    check = doctor.check_model(other.name)
    assert check.status == "fail"
    assert str(model_store.model_path(other)) in check.summary
    assert f"lsp-complete models pull {other.name}" in check.fix
    # The default model comes with the extra: the fix is the install command.
    default = next(spec for spec in registry.values() if spec.default)
    monkeypatch.setattr(model_store, "_status", lambda spec: "absent")
    check = doctor.check_model(default.name)
    assert check.status == "fail" and doctor.INSTALL_HINT in check.fix


def test_registry_model_damaged(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LSP_COMPLETE_CACHE_DIR", str(tmp_path))
    spec = next(s for s in load_registry().values() if s.sha256 and s.size)
    path = model_store.model_path(spec)
    path.write_bytes(b"GGUF" + b"\0" * 60)
    check = doctor.check_model(spec.name)
    assert check.status == "fail"
    assert "expected" in check.summary
    assert check.fix == f"lsp-complete models pull {spec.name}"


def test_registry_model_assembled_from_packages_warns(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LSP_COMPLETE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(model_store, "_status", lambda spec: "installed-packages")
    check = doctor.check_model(None)  # the default
    assert check.status == "warn"
    assert "lsp-complete models pull" in check.fix
    assert not list(tmp_path.iterdir()), "nothing is assembled by the doctor"


def test_model_from_the_environment(monkeypatch: pytest.MonkeyPatch, tiny_model_path: Path) -> None:
    monkeypatch.setenv("LSP_COMPLETE_MODEL", str(tiny_model_path))
    check = doctor.check_model(None)
    assert check.status in ("ok", "warn")
    assert check.details["path"] == str(tiny_model_path)


def test_model_that_is_not_gguf(tmp_path: Path) -> None:
    bogus = tmp_path / "x.gguf"
    bogus.write_text("not a model")
    check = doctor.check_model(str(bogus))
    assert check.status == "fail"
    assert "GGUF" in check.summary


# ------------------------------------------------------------------------------------ cache


@pytest.mark.skipif(os.name != "posix", reason="POSIX modes")
def test_cache_writable_by_others_fails(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("LSP_COMPLETE_CACHE_DIR", str(cache))
    assert doctor.check_cache().status == "ok"
    kv = model_store.kv_cache_dir()
    kv.mkdir()
    kv.chmod(0o777)
    check = doctor.check_cache()
    assert check.status == "fail"
    assert "writable by other users" in check.summary
    assert f"chmod 700 {kv}" in check.fix
    assert "LSP_COMPLETE_CACHE_DIR" in check.fix


def test_cache_that_is_a_file_fails(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "cache").write_text("")
    monkeypatch.setenv("LSP_COMPLETE_CACHE_DIR", str(tmp_path / "cache"))
    check = doctor.check_cache()
    assert check.status == "fail" and "not a folder" in check.summary


def test_cache_below_a_file_says_the_file_is_not_a_folder(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Round 6: a cache folder under a file was diagnosed as "<the file> is not writable"."""
    (tmp_path / "cache").write_text("")
    monkeypatch.setenv("LSP_COMPLETE_CACHE_DIR", str(tmp_path / "cache" / "below"))
    check = doctor.check_cache()
    assert check.status == "fail"
    assert check.summary == f"{tmp_path / 'cache'} is not a folder"


def test_cache_low_on_space_warns(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LSP_COMPLETE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(doctor.shutil, "disk_usage", lambda p: types.SimpleNamespace(free=1000))
    check = doctor.check_cache()
    assert check.status == "warn" and "disk space" in check.fix


# ----------------------------------------------------------------------------------- daemon


def _with_daemon(monkeypatch: pytest.MonkeyPatch, socket_path: Path) -> None:
    fake = types.SimpleNamespace(socket_path=lambda: socket_path)
    real_import = doctor.importlib.import_module
    monkeypatch.setattr(doctor.importlib, "import_module",
                        lambda name: fake if name == "lsp_complete.daemon" else real_import(name))


def test_daemon_without_one_is_skipped() -> None:
    assert doctor.check_daemon().status in ("skip", "ok")


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="Unix sockets")
def test_daemon_socket_states(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "d.sock"
    _with_daemon(monkeypatch, path)
    check = doctor.check_daemon()
    assert check.status == "ok" and "no daemon running" in check.summary
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen(1)
        check = doctor.check_daemon()
        assert check.status == "ok" and "answering" in check.summary
    # Closed but the file is left: a stale socket.
    check = doctor.check_daemon()
    assert check.status == "warn" and "stale" in check.fix


# ----------------------------------------------------------------------------------- report


def test_text_and_json_reports() -> None:
    checks = [
        doctor.Check("python", "ok", "Python 3.11"),
        doctor.Check("model", "fail", "no file", "pull it"),
        doctor.Check("daemon", "skip", "none"),
    ]
    text = doctor.format_text(checks)
    assert "[FAIL] model" in text and "fix: pull it" in text and "[skip] daemon" in text
    data = doctor.report(checks)
    assert data["ok"] is False
    assert data["checks"][1] == {
        "name": "model", "status": "fail", "summary": "no file", "fix": "pull it", "details": {}
    }
    assert doctor.report(checks[:1])["ok"] is True
    assert "Everything" in doctor.format_text(checks[:1])
