"""Does VS Code draw and apply an inline item whose range ends past the cursor?

code-server (the e2e setup's, scripts/e2e-setup.sh) with the packaged extension; the server's
model answers come from the tests' scripted llama-server stand-in (ANSWER). The browser types
`    x = foo(` at the end of a Python file (VS Code puts the `)` in), waits for the ghost text,
presses Tab and saves. Run from the repository root after editors/vscode/scripts/ci.sh:
    python docs/bench/2026-12-07-autoclose/vscode_check.py "1) + 2"
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())
from lsp_complete.testing import write_tiny_gguf  # noqa: E402
from tests.test_remote_engine import FakeLlamaServer  # noqa: E402

HERE = Path(__file__).parent


def check(answer: str, file_name: str, text: str, typed: str, line_match: str = "foo(",
          after_tab: list[dict[str, str]] | None = None,
          server_script: Path = HERE / "vscode_check_server.py",
          extra_env: dict[str, str] | None = None) -> None:
    """Type `typed` at the end of `file_name` (holding `text`) in code-server, the model
    answering `answer`; Tab, then the `after_tab` keys ({"press": key} or {"type": text});
    save. Prints what the browser saw and the saved file."""
    env_paths = json.loads((Path.home() / ".cache/lsp-complete-e2e/e2e-env.json").read_text())
    work = Path(tempfile.mkdtemp(prefix="vscheck-"))
    fake = FakeLlamaServer()
    fake.pieces = [answer]
    workspace = work / "ws"
    workspace.mkdir()
    source = workspace / file_name
    source.write_text(text)
    user_data, extensions = work / "user-data", work / "extensions"
    (user_data / "User").mkdir(parents=True)
    (user_data / "User" / "settings.json").write_text(json.dumps({
        "lspComplete.serverPath": sys.executable,
        "lspComplete.serverArgs": [str(server_script)],
        "lspComplete.model": str(write_tiny_gguf(work / "tiny.gguf")), "lspComplete.threads": 1,
        "files.autoSave": "off", "editor.inlineSuggest.enabled": True,
        "editor.quickSuggestions": {"other": "off", "comments": "off", "strings": "off"},
        "editor.suggestOnTriggerCharacters": False, "editor.wordBasedSuggestions": "off",
        "workbench.startupEditor": "none", "security.workspace.trust.enabled": False,
        "chat.disableAIFeatures": True, "telemetry.telemetryLevel": "off",
    }))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VSCODE_", "ELECTRON_"))}
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        (work / name.lower()).mkdir()
        env[name] = str(work / name.lower())
    env |= {"LSP_COMPLETE_CACHE_DIR": str(work / "kv"), "LSP_COMPLETE_NO_DAEMON": "1",
            "PYTHONPATH": os.getcwd(),
            "VSCHECK_EXTRA": json.dumps({"engine": "openai", "engineUrl": fake.url,
                                         "remoteHealing": "off", "debounceMs": 0}),
            **(extra_env or {})}
    code = [env_paths["node"], env_paths["codeServer"], "--user-data-dir", str(user_data),
            "--extensions-dir", str(extensions)]
    subprocess.run([*code, "--install-extension", "editors/vscode/lsp-complete.vsix"],
                   env=env, check=True, stdin=subprocess.DEVNULL)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with (work / "code-server.log").open("wb") as log:
        server = subprocess.Popen(
            [*code, "--bind-addr", f"127.0.0.1:{port}", "--auth", "none", "--disable-telemetry",
             "--disable-update-check", "--disable-workspace-trust", "--ignore-last-opened",
             str(workspace)], env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
    time.sleep(4)
    config = {"nodeModules": env_paths["nodeModules"], "chromium": env_paths["chromium"],
              "url": f"http://127.0.0.1:{port}/?folder={workspace}",
              "profileDir": str(work / "p"), "fileName": file_name, "file": str(source),
              "typed": typed, "lineMatch": line_match, "afterTab": after_tab,
              "shot": str(work / "shot.png"), "result": str(work / "result.json")}
    (work / "config.json").write_text(json.dumps(config))
    try:
        subprocess.run([env_paths["node"], str(HERE / "vscode_check_drive.mjs"),
                        str(work / "config.json")], env=dict(env, HOME=str(work)), timeout=150)
    finally:
        os.killpg(server.pid, 15)
        fake.close()
    print((work / "result.json").read_text())
    print("screenshot:", work / "shot.png")


if __name__ == "__main__":
    check(sys.argv[1], "main.py", "def foo(a):\n    return a\n\n\ndef main():\n",
          "    x = foo(")
