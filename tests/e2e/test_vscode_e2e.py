"""The whole chain in a real VS Code: our .vsix installed, our server started by it, ghost text
from our model as the user types, Tab accepting it, the status bar, the on/off toggle, the
snooze and the per-language switch of the status bar menu, the extension's Alt+\\ key, and
cycling through the server's alternative suggestions with VS Code's Alt+] and Alt+[.

1. `editors/vscode/scripts/ci.sh` builds, unit-tests and packages the extension.
2. code-server (VS Code 1.139 for the browser, from scripts/e2e-setup.sh) installs the .vsix into
   a fresh profile and serves, on 127.0.0.1 only, a workspace holding a copy of the stdlib's
   colorsys.py; user settings point lspComplete.serverPath/serverArgs at
   `sys.executable -m lsp_complete serve` and lspComplete.model at the tiny GGUF.
3. tests/e2e/vscode/drive.mjs opens it in headless Chromium (Playwright) and acts like a user:
   checks the extension is not running before a source file is open (it activates on the
   served languages), opens the file, waits for the status bar item to show the model ready,
   opens a new line in rgb_to_yiq() and types `q = 0`, waits for the ghost text, screenshots
   it, accepts it with Tab, saves; undoes, turns suggestions off (lspComplete.toggle) and checks
   none show, turns them on; from the status bar item's menu snoozes for 5 minutes (no ghost
   text), resumes and presses Alt+\\ alone (the extension's keybinding: the ghost text is
   back), turns suggestions off for Python (none show; the user settings say so) and on again;
   then opens another new line, types `y = `, waits for the ghost text, presses Alt+] (VS Code's
   "Show next inline suggestion": it asks explicitly, and the server answers with the
   suggestion and its alternatives) and sees another suggestion, then Alt+[ and sees the first.
4. Meanwhile this test asks the server itself, over LSP (tests/lsp_helpers.py), for the
   suggestion at the same document content and position: the ghost text must be that text, and
   the saved file must be the typed file with it inserted at the cursor; likewise for the
   alternatives at the second spot.

Run: bash scripts/e2e-setup.sh && pytest -m e2e tests/e2e   (skipped without -m e2e).
Artifacts (screenshots, logs, the driver's observations) go to tests/e2e/artifacts/.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from lsp_helpers import alive, descendants, signal_alive, start_server
from lsprotocol import types
from pytest_lsp.client import LanguageClient

from lsp_complete.testing.lsp_client import (
    inline,
    insert,
    move_cursor,
    open_doc,
    suggestion_of,
    wait_idle,
)

pytestmark = pytest.mark.e2e

E2E = Path(__file__).resolve().parent
REPO = E2E.parent.parent
VSCODE = REPO / "editors" / "vscode"
DRIVER = E2E / "vscode" / "drive.mjs"
ARTIFACTS = E2E / "artifacts"
CACHE = Path(
    os.environ.get("LSP_COMPLETE_E2E_CACHE") or Path.home() / ".cache" / "lsp-complete-e2e"
)

FILE_NAME = "colorsys.py"
ANCHOR = "    i = 0.74*(r-y)"  # a new line is opened below this one (in rgb_to_yiq)
INDENT = "    "  # what VS Code's auto-indent gives the new line
TYPED = "q = 0"
# editor.action.inlineSuggest.trigger has no default key in VS Code; the extension binds
# alt+\ (package.json contributes.keybindings), and the profile here has no keybindings.json.
TRIGGER_KEY = "Alt+Backslash"  # alt+\, as Playwright names it
# Typed on another new line below, where the tiny model has alternatives to cycle through with
# VS Code's default keys for editor.action.inlineSuggest.showNext / showPrevious.
CYCLE_TYPED = "y = "
NEXT_KEY, PREVIOUS_KEY = "Alt+BracketRight", "Alt+BracketLeft"
# The extension's settings, and the same options as initializationOptions for the direct
# server (tests/lsp_helpers.start_server sends threads 1 and contextSize 4096 too).
SERVER_OPTIONS = {"threads": 1, "contextSize": 4096}
# A rest after an answer, longer than the server's idle delay (idleReanchorMs, 400 ms): the
# driver takes longer than that to open the new line before it types.
REST_S = 1.0
DRIVER_TIMEOUT_S = 150


# ----------------------------------------------------------------------------------- setup


def _setup() -> dict[str, str]:
    """What scripts/e2e-setup.sh installed: fail (not skip) when it is missing or stale."""
    how = f"run `bash scripts/e2e-setup.sh` first (cache: {CACHE})"
    env_file = CACHE / "e2e-env.json"
    if not env_file.is_file():
        pytest.fail(f"the e2e setup is missing: {how}", pytrace=False)
    env = json.loads(env_file.read_text())
    pkg = E2E / "vscode"
    digest = hashlib.sha256(
        (pkg / "package.json").read_bytes() + (pkg / "package-lock.json").read_bytes()
    ).hexdigest()[:16]
    if env.get("hash") != digest:
        pytest.fail(f"the e2e setup is stale (tests/e2e/vscode changed): {how}", pytrace=False)
    for key in ("node", "codeServer", "nodeModules", "chromium"):
        if not Path(env[key]).exists():
            pytest.fail(f"the e2e setup lacks {env[key]}: {how}", pytrace=False)
    return env


# ------------------------------------------------------------------------------- processes


def _stop(proc: subprocess.Popen, grace_s: float = 10) -> list[int]:
    """End `proc` and everything it started, each by its own pid: SIGTERM, then SIGKILL.
    Returns the pids that needed SIGKILL (none, normally)."""
    tree = descendants(proc.pid)
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    # Children still running (e.g. orphaned when their parent went first): same treatment.
    deadline = time.monotonic() + grace_s
    while (left := alive(tree)) and time.monotonic() < deadline:
        for pid in left:
            tree.update(descendants(pid))
        signal_alive(left, signal.SIGTERM)
        time.sleep(0.2)
    killed = list(alive(tree))
    signal_alive(tree, signal.SIGKILL)
    return killed


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"code-server exited ({proc.returncode}):\n{_tail(log)}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"code-server did not answer {url} in {timeout} s:\n{_tail(log)}")
        time.sleep(0.2)


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


# ---------------------------------------------------------------------- the server directly


def _typed_text(original: list[str], anchor: int, k: int) -> str:
    """The file after opening a line below `anchor` and typing TYPED[:k] into it."""
    lines = original[: anchor + 1] + [INDENT + TYPED[:k]] + original[anchor + 1 :]
    return "\n".join(lines)


@contextlib.asynccontextmanager
async def _direct_server(model: Path) -> AsyncIterator[LanguageClient]:
    """Our server over stdio with its own, fresh KV cache folder: what one variant encodes and
    saves is not restored from disk by the next (VS Code's server starts with a fresh one)."""
    with tempfile.TemporaryDirectory(prefix="lsp-complete-e2e-kv-") as kv_cache:
        env = {**os.environ, "LSP_COMPLETE_CACHE_DIR": kv_cache}
        client = await start_server(model, init_options=SERVER_OPTIONS, env=env)
        try:
            yield client
        finally:
            await client.shutdown_session()


async def _server_suggestions(
    model: Path, original: list[str], anchor: int, rested: bool
) -> list[str]:
    """What our server suggests after each prefix TYPED[:k] (k = 0..len): the text the ghost
    text shows (the item's insertText less the part of the word already typed). Each state is
    a fresh document with the same file name, so no answer comes from an earlier one.

    `rested`: as the driver opens the new line, VS Code asks there (our extension reports the
    cursor too), the server answers, and the cursor rests there (REST_S) before the first key;
    the server then prepares its full-context prompt anchored at that line, and the keys
    typed on meet it. Otherwise the keys find the file cold and use the smaller prompt (a
    rest before any answer prepares that one). Which one the editor's keystrokes meet depends
    on timing, so both are right answers."""
    async with _direct_server(model) as client:
        out = []
        line = anchor + 1
        for k in range(len(TYPED) + 1):
            uri = f"file:///lsp-complete-e2e/{k}/{FILE_NAME}"
            text = _typed_text(original, anchor, k)
            column = len(INDENT) + k
            if rested:
                await _rest_then_type(client, uri, _typed_text(original, anchor, 0), line,
                                      TYPED[:k])
            else:
                open_doc(client, uri, text)
            insert_text, item = suggestion_of(await inline(client, uri, line, column))
            if item is None:
                out.append("")
                continue
            start = item.range.start if item.range else None
            typed_word = text.split("\n")[line][start.character : column] if start else ""
            assert insert_text.startswith(typed_word), (insert_text, typed_word)
            out.append(insert_text[len(typed_word) :])
        return out


async def _rest_then_type(client: LanguageClient, uri: str, opened: str, line: int,
                          typed: str) -> None:
    """Open `opened`, whose `line` holds INDENT only: the new line is answered there, the
    cursor rests, and then `typed` is typed (one edit) after INDENT."""
    open_doc(client, uri, opened)
    move_cursor(client, uri, line, len(INDENT))
    await inline(client, uri, line, len(INDENT))
    await asyncio.sleep(REST_S)
    await wait_idle(client)
    if typed:
        insert(client, uri, 2, line, len(INDENT), typed)


def _cycle_text(original: list[str], anchor: int, typed: str = CYCLE_TYPED) -> str:
    """The file when cycling: TYPED on the line below `anchor`, `typed` on the next."""
    lines = original[: anchor + 1] + [INDENT + TYPED, INDENT + typed]
    return "\n".join(lines + original[anchor + 1 :])


async def _server_alternatives(model: Path, original: list[str], anchor: int,
                               rested: bool) -> list[str]:
    """What our server offers at the cycling spot when asked explicitly (triggerKind Invoked)
    after a suggestion was shown there: that suggestion and its alternatives, as ghost texts.
    `rested` as in `_server_suggestions`."""
    async with _direct_server(model) as client:
        uri = f"file:///lsp-complete-e2e/cycle/{FILE_NAME}"
        text = _cycle_text(original, anchor)
        line, column = anchor + 2, len(INDENT + CYCLE_TYPED)
        if rested:
            await _rest_then_type(client, uri, _cycle_text(original, anchor, ""), line,
                                  CYCLE_TYPED)
        else:
            open_doc(client, uri, text)
        await inline(client, uri, line, column)  # as you type: the suggestion shown
        invoked = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=column),
            context=types.InlineCompletionContext(
                trigger_kind=types.InlineCompletionTriggerKind.Invoked),
        )
        answer = await client.text_document_inline_completion_async(invoked)
        out = []
        for item in answer.items if answer else []:
            start = item.range.start.character if item.range else column
            typed_word = text.split("\n")[line][start:column]
            assert item.insert_text.startswith(typed_word), (item.insert_text, typed_word)
            out.append(item.insert_text[len(typed_word) :])
        return out


def _ghost_candidates(*variants: list[str]) -> list[str]:
    """Texts VS Code may rightly show after the whole TYPED: the server's answer for that state,
    or, when VS Code asked at an earlier keystroke and the typed characters match that answer,
    its rest (the server's typing-ahead); for each variant of the server's answers. The first
    is the first variant's fresh answer."""
    n = len(TYPED)
    out = [suggestions[n] for suggestions in variants]
    for suggestions in variants:
        for k, text in enumerate(suggestions[:n]):
            if text.startswith(TYPED[k:]) and text[n - k :]:
                out.append(text[n - k :])
    return out[:1] + [text for text in dict.fromkeys(out[1:]) if text and text != out[0]]


# -------------------------------------------------------------------------------- the test


@pytest.fixture
def workdir() -> Iterator[Path]:
    """Profile, extensions, workspace and browser profile: removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="lsp-complete-e2e-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_vsix_in_vscode_shows_ghost_text_from_our_server(
    tiny_model_path: Path, tmp_path: Path, workdir: Path
) -> None:
    env_paths = _setup()
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    ARTIFACTS.mkdir(exist_ok=True)
    for old in ARTIFACTS.iterdir():
        if old.is_file():
            old.unlink()
        else:
            shutil.rmtree(old, ignore_errors=True)

    # 1. Build, unit-test and package the extension.
    build = subprocess.run(
        ["bash", str(VSCODE / "scripts" / "ci.sh")], capture_output=True, text=True, timeout=600
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    vsix = VSCODE / "lsp-complete.vsix"
    assert vsix.is_file()
    timings["build"] = time.monotonic() - t0

    # 2. A workspace with a real source file; a fresh VS Code profile with our settings.
    import colorsys

    workspace = workdir / "workspace"
    workspace.mkdir()
    source = workspace / FILE_NAME
    shutil.copyfile(inspect.getsourcefile(colorsys), source)
    original_text = source.read_text()
    original = original_text.split("\n")
    anchor = next(n for n, line in enumerate(original) if line.startswith(ANCHOR))

    user_data, extensions = workdir / "user-data", workdir / "extensions"
    (user_data / "User").mkdir(parents=True)
    settings = {
        "lspComplete.serverPath": sys.executable,
        "lspComplete.serverArgs": ["-m", "lsp_complete", "serve"],
        "lspComplete.model": str(tiny_model_path),
        **{f"lspComplete.{k}": v for k, v in SERVER_OPTIONS.items()},
        "lspComplete.statusPollSeconds": 1,
        "files.autoSave": "off",
        "files.hotExit": "off",
        "editor.inlineSuggest.enabled": True,
        # Nothing but our ghost text: no suggest widget to take the Tab.
        "editor.quickSuggestions": {"other": "off", "comments": "off", "strings": "off"},
        "editor.suggestOnTriggerCharacters": False,
        "editor.wordBasedSuggestions": "off",
        "editor.parameterHints.enabled": False,
        "editor.minimap.enabled": False,
        "workbench.startupEditor": "none",
        "workbench.tips.enabled": False,
        "workbench.enableExperiments": False,
        "workbench.colorTheme": "Default Dark Modern",
        "workbench.secondarySideBar.defaultVisibility": "hidden",
        "telemetry.telemetryLevel": "off",
        "extensions.autoCheckUpdates": False,
        "extensions.autoUpdate": False,
        "extensions.ignoreRecommendations": True,
        "update.mode": "none",
        "security.workspace.trust.enabled": False,
        "chat.disableAIFeatures": True,
    }
    user_settings = user_data / "User" / "settings.json"
    user_settings.write_text(json.dumps(settings, indent=2))

    env = {k: v for k, v in os.environ.items() if not k.startswith(("VSCODE_", "ELECTRON_"))}
    env.pop("LSP_COMPLETE_MODEL", None)
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "TMPDIR"):
        (workdir / name.lower()).mkdir()
        env[name] = str(workdir / name.lower())
    env["LSP_COMPLETE_CACHE_DIR"] = str(workdir / "kv")  # the server's KV cache: fresh
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    code_server = [
        env_paths["node"],
        env_paths["codeServer"],
        "--user-data-dir",
        str(user_data),
        "--extensions-dir",
        str(extensions),
    ]
    t1 = time.monotonic()
    install = subprocess.run(
        [*code_server, "--install-extension", str(vsix)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    assert "successfully installed" in install.stdout, install.stdout + install.stderr
    assert any(p.name.startswith("lsp-complete.lsp-complete-") for p in extensions.iterdir())
    timings["install extension"] = time.monotonic() - t1

    # The expected ghost text: our server's answer for the same content and position.
    t1 = time.monotonic()
    rested = asyncio.run(_server_suggestions(tiny_model_path, original, anchor, True))
    cold = asyncio.run(_server_suggestions(tiny_model_path, original, anchor, False))
    candidates = _ghost_candidates(rested, cold)
    cycle = [*asyncio.run(_server_alternatives(tiny_model_path, original, anchor, True)),
             *asyncio.run(_server_alternatives(tiny_model_path, original, anchor, False))]
    timings["server directly"] = time.monotonic() - t1
    assert len(set(cycle)) >= 2, (
        f"the server offers no alternatives after typing {CYCLE_TYPED!r}: pick another text "
        f"for the cycling step (answers: {cycle})"
    )
    assert candidates[0], (
        f"the server suggests nothing after typing {TYPED!r} below line {anchor + 1} of "
        f"{FILE_NAME}: pick another place for this test (answers per keystroke: {cold})"
    )
    typed_text = _typed_text(original, anchor, len(TYPED))
    cursor = sum(len(line) + 1 for line in typed_text.split("\n")[: anchor + 1])
    cursor += len(INDENT) + len(TYPED)

    # 3. code-server on loopback, then the browser.
    port = _free_port()
    server_log = tmp_path / "code-server.log"
    drive_log = tmp_path / "drive.log"
    result_path = tmp_path / "result.json"
    with server_log.open("wb") as out:
        server = subprocess.Popen(
            [
                *code_server,
                "--bind-addr",
                f"127.0.0.1:{port}",
                "--auth",
                "none",
                "--disable-telemetry",
                "--disable-update-check",
                "--disable-workspace-trust",
                "--disable-getting-started-override",
                "--ignore-last-opened",
                str(workspace),
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    driver = None
    leftovers: list[int] = []
    result: dict = {}
    try:
        t1 = time.monotonic()
        _wait_http(f"http://127.0.0.1:{port}/healthz", server, server_log)
        timings["code-server up"] = time.monotonic() - t1

        config = {
            "nodeModules": env_paths["nodeModules"],
            "chromium": env_paths["chromium"],
            "url": f"http://127.0.0.1:{port}/?folder={quote(str(workspace))}",
            "profileDir": str(workdir / "chromium-profile"),
            "fileName": FILE_NAME,
            "file": str(source),
            "gotoLine": anchor + 1,
            "typed": TYPED,
            "triggerKey": TRIGGER_KEY,
            "cycleTyped": CYCLE_TYPED,
            "nextKey": NEXT_KEY,
            "previousKey": PREVIOUS_KEY,
            "cycleShot": str(tmp_path / "cycled.png"),
            "expectedGhost": candidates,
            "screenshot": str(tmp_path / "ghost-text.png"),
            "screenshotEditor": str(tmp_path / "ghost-text-editor.png"),
            "failureShot": str(tmp_path / "failure.png"),
            "resultPath": str(result_path),
            "readyTimeoutMs": 60_000,
            "ghostTimeoutMs": 30_000,
            "idleCheckMs": 3000,
            "userSettings": str(user_settings),
        }
        config_path = tmp_path / "drive-config.json"
        config_path.write_text(json.dumps(config, indent=2))
        driver_env = dict(env, HOME=str(workdir / "home"))
        (workdir / "home").mkdir()
        t1 = time.monotonic()
        with drive_log.open("wb") as out:
            driver = subprocess.Popen(
                [env_paths["node"], str(DRIVER), str(config_path)],
                env=driver_env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        with contextlib.suppress(subprocess.TimeoutExpired):
            driver.wait(timeout=DRIVER_TIMEOUT_S)
        timings["browser"] = time.monotonic() - t1
        if result_path.is_file():
            result = json.loads(result_path.read_text())
    finally:
        if driver is not None:
            leftovers += _stop(driver)
        leftovers += _stop(server)
        _save_artifacts(tmp_path, user_data)
    timings["total"] = time.monotonic() - t0
    print("e2e timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))

    # 4. What the user saw and got.
    context = (
        f"\ndriver log:\n{_tail(drive_log)}\ncode-server log:\n{_tail(server_log, 1500)}"
        f"\nnotifications: {result.get('notifications')}\nartifacts: {ARTIFACTS}"
    )
    assert driver.returncode == 0, f"the driver did not finish ({driver.returncode})" + context
    assert result.get("error") is None, (
        f"in step {result.get('failedStep')!r}: {result.get('error')}\n"
        f"expected ghost text: {candidates[0]!r}\nlast ghost text seen: {result.get('lastGhost')}\n"
        f"last status bar item: {result.get('lastStatus')}" + context
    )

    # Nothing ran before a Python file was open: activation on the served languages.
    assert result["statusBeforeOpen"] is None, result["statusBeforeOpen"]
    # The status bar item showed the model's state: ready ($(sparkle)), the tooltip says so.
    assert result["statusReady"]["text"].startswith("lsp-complete"), result["statusReady"]
    assert "is ready" in result["statusTooltip"], result["statusTooltip"]
    assert "Model: " in result["statusTooltip"], result["statusTooltip"]
    # After a suggestion it also shows the last latency, e.g. "lsp-complete 12 ms".
    assert re.fullmatch(r"lsp-complete \d+(\.\d)? m?s", result["statusWithGhost"]["text"]), result[
        "statusWithGhost"
    ]

    # The ghost text is our server's suggestion for this content and position.
    ghost = result["ghost"]
    matching = [c for c in candidates if c.split("\n")[0] == ghost["inline"]]
    assert matching, f"ghost text {ghost} is not the server's suggestion {candidates[0]!r}"
    shown = matching[0]
    assert ghost["below"] == shown.split("\n")[1:], (ghost, shown)

    # Tab inserted exactly that text at the cursor: the saved file says so.
    assert result["savedAfterAccept"] == typed_text[:cursor] + shown + typed_text[cursor:]
    # Undo took it out again, leaving what was typed.
    assert result["savedAfterUndo"] == typed_text

    # Off: the status bar says so and no ghost text shows, however the editor asks.
    assert result["statusOff"]["text"] == "lsp-complete: off", result["statusOff"]
    assert result["ghostWhileOff"]["any"] is False, result["ghostWhileOff"]
    # On again: ready, and the suggestion is back.
    assert "codicon-sparkle" in result["statusOnAgain"]["icons"]
    assert result["ghostOnAgain"]["inline"] == ghost["inline"]

    # Snoozed from the status bar menu: it says so, and no ghost text shows.
    assert re.fullmatch(r"lsp-complete: snoozed \d+ min", result["statusSnoozed"]["text"])
    assert result["ghostWhileSnoozed"]["any"] is False, result["ghostWhileSnoozed"]
    # Resumed: Alt+\ alone (the extension's keybinding, nothing typed) brings the suggestion.
    assert "codicon-sparkle" in result["statusResumed"]["icons"]
    assert result["ghostByKey"]["inline"] == ghost["inline"]
    assert result["ghostByKey"]["presses"] >= 1
    # Off for Python: the status bar says so, the user settings hold it, no ghost text.
    assert result["statusLanguageOff"]["text"] == "lsp-complete: off for python"
    assert json.loads(result["settingsLanguageOff"])["lspComplete.enabled"] == {"python": False}
    assert result["ghostWhileLanguageOff"]["any"] is False, result["ghostWhileLanguageOff"]
    assert "codicon-sparkle" in result["statusLanguageOn"]["icons"]
    assert result["ghostLanguageOn"]["inline"] == ghost["inline"]

    # Cycling: Alt+] showed another of the server's suggestions for that spot (VS Code asked
    # explicitly and got the alternatives), Alt+[ the first one again.
    first, following, back = (result[k] for k in ("cycleFirst", "cycleNext", "cyclePrevious"))

    def whole(g: dict) -> str:
        return "\n".join([g["inline"], *g["below"]])

    assert first["any"] and following["any"], (first, following)
    assert whole(following) != whole(first), (first, following)
    offered = {text.split("\n")[0] for text in cycle}
    assert following["inline"] in offered, f"{following} is not among the server's {cycle}"
    assert whole(back) == whole(first), (first, back)

    assert not leftovers, f"processes that needed SIGKILL: {leftovers}"
    assert timings["total"] < 300, timings


def _save_artifacts(tmp_path: Path, user_data: Path) -> None:
    """Screenshots, logs and observations to tests/e2e/artifacts/ (git-ignored)."""
    for name in (
        "ghost-text.png",
        "ghost-text-editor.png",
        "cycled.png",
        "failure.png",
        "result.json",
        "drive.log",
        "code-server.log",
    ):
        if (tmp_path / name).is_file():
            shutil.copyfile(tmp_path / name, ARTIFACTS / name)
    # VS Code's own logs, the extension's output channel among them.
    if (user_data / "logs").is_dir():
        shutil.copytree(user_data / "logs", tmp_path / "vscode-logs", dirs_exist_ok=True)
        shutil.copytree(user_data / "logs", ARTIFACTS / "vscode-logs", dirs_exist_ok=True)
