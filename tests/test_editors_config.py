"""The editor integrations' configuration files (editors/): they parse, start `lsp-complete
serve`, cover the languages, and only send options the server knows."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from lsp_complete.config import parse_settings

REPO = Path(__file__).resolve().parent.parent
EDITORS = REPO / "editors"
JETBRAINS = EDITORS / "jetbrains" / "lsp-complete"

# initializationOptions an editor may send (camelCase), per the server's contract.
KNOWN_OPTIONS = {
    "model",
    "threads",
    "contextSize",
    "gpuLayers",
    "maxTokens",
    "multiline",
    "enabled",
    "debounceMs",
}
# LSP language ids every integration must cover.
LANGUAGE_IDS = {"python", "javascript", "typescript", "go", "rust", "java", "c", "cpp"}


def _check_options(options: object, where: str) -> None:
    assert isinstance(options, dict), f"{where}: expected an object"
    unknown = set(options) - KNOWN_OPTIONS
    assert not unknown, f"{where}: options the server does not know: {sorted(unknown)}"
    _settings, problems = parse_settings(options)
    assert not problems, f"{where}: the server rejects {problems}"


def _runs_serve(command_line: str) -> bool:
    argv = shlex.split(command_line, posix=True)
    exe = Path(argv[0]).name.lower()
    if exe in ("lsp-complete", "lsp-complete.exe"):
        return argv[1:2] == ["serve"]
    # python -m lsp_complete serve
    return argv[1:4] == ["-m", "lsp_complete", "serve"]


# --------------------------------------------------------------------------------- every editor


@pytest.mark.parametrize("editor", ["vscode", "nvim", "jetbrains", "helix", "emacs"])
def test_each_editor_has_a_readme(editor: str) -> None:
    readme = EDITORS / editor / "README.md"
    assert readme.is_file(), f"{readme} is missing"
    text = readme.read_text()
    assert "lsp-complete" in text
    assert "pip install lsp-complete" in text, "a new user is told how to install the server"


# ------------------------------------------------------------------------------------ JetBrains


def test_jetbrains_template_files_are_valid_json() -> None:
    names = sorted(p.name for p in JETBRAINS.glob("*.json"))
    assert {"template.json", "settings.json", "initializationOptions.json"} <= set(names)
    for path in JETBRAINS.glob("*.json"):
        json.loads(path.read_text())  # raises on invalid JSON
    assert (JETBRAINS / "README.md").is_file()


def test_jetbrains_template_starts_the_server() -> None:
    template = json.loads((JETBRAINS / "template.json").read_text())
    assert template["name"] == "lsp-complete"
    assert template["id"] == "lsp-complete"
    program_args = template["programArgs"]
    assert "default" in program_args
    for os_name, command_line in program_args.items():
        assert _runs_serve(command_line), f"programArgs.{os_name} = {command_line!r}"


def test_jetbrains_mappings_cover_the_languages() -> None:
    template = json.loads((JETBRAINS / "template.json").read_text())
    by_language: dict[str, set[str]] = {}
    for mapping in template.get("fileTypeMappings", []):
        patterns = mapping["fileType"].get("patterns") or []
        assert patterns or mapping["fileType"].get("name"), mapping
        by_language.setdefault(mapping["languageId"], set()).update(patterns)
    for mapping in template.get("languageMappings", []):
        by_language.setdefault(mapping["languageId"], set())
    assert set(by_language) >= LANGUAGE_IDS, f"missing: {LANGUAGE_IDS - set(by_language)}"
    expected_patterns = {
        "python": "*.py",
        "javascript": "*.js",
        "typescript": "*.ts",
        "go": "*.go",
        "rust": "*.rs",
        "java": "*.java",
        "c": "*.c",
        "cpp": "*.cpp",
    }
    for language, pattern in expected_patterns.items():
        assert pattern in by_language[language], f"{language} lacks {pattern}"
    # One pattern, one language.
    seen: dict[str, str] = {}
    for language, patterns in by_language.items():
        for pattern in patterns:
            assert pattern not in seen, f"{pattern} mapped to {seen.get(pattern)} and {language}"
            seen[pattern] = language


def test_jetbrains_options_are_known_to_the_server() -> None:
    init = json.loads((JETBRAINS / "initializationOptions.json").read_text())
    _check_options(init, "initializationOptions.json")
    settings = json.loads((JETBRAINS / "settings.json").read_text())
    assert isinstance(settings, dict)
    # The server reads didChangeConfiguration settings under "lspComplete" (or flat).
    _check_options(settings.get("lspComplete", settings), "settings.json")


# ---------------------------------------------------------------------------------------- Helix


def _helix() -> dict:
    return tomllib.loads((EDITORS / "helix" / "languages.toml").read_text())


def test_helix_language_server_entry() -> None:
    server = _helix()["language-server"]["lsp-complete"]
    assert _runs_serve(shlex.join([server["command"], *server.get("args", [])]))
    _check_options(server.get("config", {}), "languages.toml config")


def test_helix_languages_use_lsp_complete() -> None:
    languages = {entry["name"]: entry for entry in _helix()["language"]}
    # Helix's language names; tsx/jsx carry typescriptreact/javascriptreact.
    helix_names = {
        "python",
        "javascript",
        "jsx",
        "typescript",
        "tsx",
        "go",
        "rust",
        "java",
        "c",
        "cpp",
    }
    assert helix_names <= set(languages), f"missing: {helix_names - set(languages)}"
    for name, entry in languages.items():
        servers = entry["language-servers"]
        ours = [
            s
            for s in servers
            if s == "lsp-complete" or (isinstance(s, dict) and s.get("name") == "lsp-complete")
        ]
        assert len(ours) == 1, f"{name}: lsp-complete listed {len(ours)} times"
        if isinstance(ours[0], dict) and "only-features" in ours[0]:
            assert "completion" in ours[0]["only-features"], name
        # The usual server stays first, so lsp-complete does not take over hover etc.
        assert servers[0] != "lsp-complete", f"{name}: lsp-complete should not come first"


# ---------------------------------------------------------------------------------------- Emacs


def _lisp_balanced(source: str) -> bool:
    """Parentheses balance outside strings, comments and character literals."""
    depth = 0
    i = 0
    in_string = False
    while i < len(source):
        ch = source[i]
        if in_string:
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                in_string = False
        elif ch == ";":
            while i < len(source) and source[i] != "\n":
                i += 1
        elif ch == "?":  # character literal like ?\( or ?a
            i += 3 if source[i + 1 : i + 2] == "\\" else 2
            continue
        elif ch == "\\":
            i += 2
            continue
        elif ch == '"':
            in_string = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                return False
        i += 1
    return depth == 0 and not in_string


def test_emacs_package_registers_with_eglot() -> None:
    source = (EDITORS / "emacs" / "lsp-complete.el").read_text()
    assert _lisp_balanced(source)
    assert "eglot-server-programs" in source
    assert '("lsp-complete" "serve")' in source
    assert "(provide 'lsp-complete)" in source
    assert source.startswith(";;; lsp-complete.el ---")
    assert "lexical-binding: t" in source.splitlines()[0]


@pytest.mark.skipif(shutil.which("emacs") is None, reason="emacs is not installed")
def test_emacs_package_loads_and_builds_the_entry(tmp_path: Path) -> None:
    """Where Emacs (with Eglot) exists: byte-compile the file and check the entry it adds."""
    el = tmp_path / "lsp-complete.el"
    shutil.copyfile(EDITORS / "emacs" / "lsp-complete.el", el)
    script = f"""
      (progn
        (package-initialize)
        (unless (require 'eglot nil t) (princ "NO-EGLOT") (kill-emacs 0))
        (setq byte-compile-error-on-warn nil)
        (unless (byte-compile-file {json.dumps(str(el))}) (kill-emacs 3))
        (load {json.dumps(str(el) + "c")})
        (lsp-complete-eglot-setup)
        (lsp-complete-eglot-setup)
        (let ((entry (car eglot-server-programs)))
          (princ (format "MODES=%S\\nCONTACT=%S\\nCOUNT=%d\\n" (car entry) (cdr entry)
                         (cl-count-if (lambda (e) (and (consp (cdr e))
                                                       (eq (cadr e) 'eglot-lsp-complete)))
                                      eglot-server-programs)))))
    """
    done = subprocess.run(
        ["emacs", "--batch", "-q", "--eval", script],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, HOME=str(tmp_path)),
    )
    if "NO-EGLOT" in done.stdout:
        pytest.skip("this Emacs has no Eglot")
    assert done.returncode == 0, done.stderr
    assert 'CONTACT=(eglot-lsp-complete "lsp-complete" "serve")' in done.stdout
    assert "COUNT=1" in done.stdout  # calling setup twice adds one entry
    assert "python-mode" in done.stdout and "rust-ts-mode" in done.stdout


def _emacs_with_eglot() -> bool:
    if shutil.which("emacs") is None:
        return False
    done = subprocess.run(
        ["emacs", "--batch", "-q", "--eval", '(princ (if (require \'eglot nil t) "yes" "no"))'],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout.strip().endswith("yes")


@pytest.mark.skipif(shutil.which("emacs") is None, reason="emacs is not installed")
def test_emacs_eglot_gets_a_suggestion_from_the_real_server(
    tmp_path: Path, tiny_model_path
) -> None:
    """Where Emacs with Eglot exists: connect to `lsp-complete serve` (tiny model) through the
    entry lsp-complete.el adds, ask for the status and for completions at a position."""
    if not _emacs_with_eglot():
        pytest.skip("this Emacs has no Eglot")
    source = tmp_path / "sample.py"
    source.write_text("import os\n\n\ndef main():\n    x = 1\n    print(x)\n")
    command = [sys.executable, "-m", "lsp_complete", "serve", "--model", str(tiny_model_path)]
    script = f"""
      (progn
        (require 'eglot)
        (load {json.dumps(str(EDITORS / "emacs" / "lsp-complete.el"))})
        (setq lsp-complete-command '({" ".join(json.dumps(c) for c in command)}))
        (setq lsp-complete-initialization-options '(:maxTokens 16 :multiline "never"))
        (lsp-complete-eglot-setup)
        (find-file {json.dumps(str(source))})
        (python-mode)
        (apply #'eglot (eglot--guess-contact))
        (let ((deadline (+ (float-time) 60)) state)
          (while (and (not (equal state "ready")) (< (float-time) deadline))
            (setq state (plist-get (plist-get (jsonrpc-request (eglot-current-server)
                                                               :lsp-complete/status eglot--{{}})
                                              :model)
                                   :state))
            (unless (equal state "ready") (accept-process-output nil 0.3)))
          (princ (format "STATE=%s\n" state)))
        (lsp-complete-status)
        (goto-char (point-min)) (forward-line 4) (end-of-line)
        (insert " + ab")
        (eglot--signal-textDocument/didChange)
        (let* ((capf (eglot-completion-at-point))
               (cands (all-completions "" (nth 2 capf))))
          (dolist (c cands)
            (let ((item (get-text-property 0 'eglot--lsp-item c)))
              (princ (format "ITEM detail=%s command=%s\n"
                             (plist-get item :detail)
                             (plist-get (plist-get item :command) :command))))))
        (eglot-shutdown (eglot-current-server))
        (kill-emacs 0))
    """
    done = subprocess.run(
        ["emacs", "--batch", "-q", "--eval", script],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
        env=dict(
            os.environ,
            HOME=str(tmp_path),
            PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        ),
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "STATE=ready" in out, out[-3000:]
    assert re.search(r"^lsp-complete: .* \(ready\)", out, re.M), out[-3000:]  # lsp-complete-status
    assert "ITEM detail=lsp-complete (AI) command=lsp-complete.accepted" in out, out[-3000:]


# -------------------------------------------------------------------------------------- VS Code


def _vscode_package() -> dict:
    return json.loads((EDITORS / "vscode" / "package.json").read_text())


def test_vscode_manifest() -> None:
    pkg = _vscode_package()
    assert pkg["main"] == "./out/extension.js"
    assert pkg["activationEvents"] == ["onStartupFinished"]
    assert pkg["engines"]["vscode"].startswith("^1.9")
    assert pkg["dependencies"]["vscode-languageclient"].startswith("^9.")
    for script in ("compile", "test"):
        assert script in pkg["scripts"]
    commands = {c["command"] for c in pkg["contributes"]["commands"]}
    assert {"lspComplete.toggle", "lspComplete.showStatus"} <= commands
    props = pkg["contributes"]["configuration"]["properties"]
    assert props["lspComplete.serverPath"]["default"] == "lsp-complete"
    assert props["lspComplete.serverArgs"]["default"] == ["serve"]
    for key in ("model", "threads", "maxTokens", "multiline", "enabled", "debounceMs"):
        assert f"lspComplete.{key}" in props, key
    for name in ("package-lock.json", ".vscodeignore", "LICENSE", "README.md", "tsconfig.json"):
        assert (EDITORS / "vscode" / name).is_file(), name
    ci = EDITORS / "vscode" / "scripts" / "ci.sh"
    assert ci.is_file() and os.access(ci, os.X_OK)


def test_vscode_settings_that_become_options_are_known_to_the_server() -> None:
    props = _vscode_package()["contributes"]["configuration"]["properties"]
    option_settings = {
        key.removeprefix("lspComplete."): spec
        for key, spec in props.items()
        if key.removeprefix("lspComplete.") in KNOWN_OPTIONS
    }
    assert {"model", "threads", "maxTokens", "multiline", "enabled", "debounceMs"} <= set(
        option_settings
    )
    # Each default, where set, is a value the server accepts.
    defaults = {
        k: v["default"] for k, v in option_settings.items() if v.get("default") not in (None, "")
    }
    _check_options(defaults, "package.json defaults")
    assert option_settings["multiline"]["enum"] == ["auto", "always", "never"]


def test_vscode_lockfile_matches_manifest() -> None:
    pkg = _vscode_package()
    lock = json.loads((EDITORS / "vscode" / "package-lock.json").read_text())
    root = lock["packages"][""]
    assert root.get("dependencies", {}) == pkg.get("dependencies", {})
    assert root.get("devDependencies", {}) == pkg.get("devDependencies", {})


# --------------------------------------------------------------------------------------- Neovim


def test_nvim_plugin_layout() -> None:
    lua = EDITORS / "nvim" / "lua" / "lsp_complete"
    assert (lua / "init.lua").is_file()
    assert (lua / "health.lua").is_file()
    init = (lua / "init.lua").read_text()
    assert 'cmd = { "lsp-complete", "serve" }' in init
    assert "LspCompleteGhost" in init
    readme = (EDITORS / "nvim" / "README.md").read_text()
    assert "lazy.nvim" in readme and "vim.opt.rtp" in readme


def test_clients_send_the_cursor_notification_the_server_handles() -> None:
    from lsp_complete.server import CURSOR_METHOD

    for client in ("vscode/src/logic.ts", "nvim/lua/lsp_complete/init.lua"):
        assert f'"{CURSOR_METHOD}"' in (EDITORS / client).read_text(), client
