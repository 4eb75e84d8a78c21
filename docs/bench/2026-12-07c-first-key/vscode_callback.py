"""Where does the editor's `)` go when a callback's first line is accepted in VS Code?

The 2026-12-07-autoclose check (vscode_check.py) on a TypeScript file: code-server with the
packaged extension (which asks for `replaceLineSuffix`), the server's model answers from the
tests' scripted stand-in (ANSWER, `\n` for line breaks). The browser types `  useEffect(`
(VS Code puts the `)` in), waits for the ghost text, presses Tab, then Enter, `load();`,
Enter, `}`, and saves. VSCHECK_KEEP_PAREN=1 ran efac73b's server with this stop's final
`types_through` rule patched in (vscode_callback_server.py). From the repository root:
    python docs/bench/2026-12-07c-first-key/vscode_callback.py '() => {\n    load();\n  }, []);\n'
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
ANSWER = sys.argv[1]
env_paths = json.loads((Path.home() / ".cache/lsp-complete-e2e/e2e-env.json").read_text())
work = Path(tempfile.mkdtemp(prefix="vscheck-"))
fake = FakeLlamaServer()
fake.pieces = [ANSWER.replace("\\n", "\n")]
workspace = work / "ws"
workspace.mkdir()
source = workspace / "app.ts"
source.write_text("declare function useEffect(f: () => void, deps: unknown[]): void;\n"
                  "declare function load(): void;\n\nexport function Clock() {\n")
user_data, extensions = work / "user-data", work / "extensions"
(user_data / "User").mkdir(parents=True)
(user_data / "User" / "settings.json").write_text(json.dumps({
    "lspComplete.serverPath": sys.executable,
    "lspComplete.serverArgs": [str(HERE / "vscode_callback_server.py")],
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
        "VSCHECK_KEEP_PAREN": os.environ.get("VSCHECK_KEEP_PAREN", ""),
        "VSCHECK_EXTRA": json.dumps({"engine": "openai", "engineUrl": fake.url,
                                     "remoteHealing": "off", "debounceMs": 0})}
code = [env_paths["node"], env_paths["codeServer"], "--user-data-dir", str(user_data),
        "--extensions-dir", str(extensions)]
subprocess.run([*code, "--install-extension", "editors/vscode/lsp-complete.vsix"], env=env,
               check=True, stdin=subprocess.DEVNULL)
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
with (work / "code-server.log").open("wb") as log:
    server = subprocess.Popen(
        [*code, "--bind-addr", f"127.0.0.1:{port}", "--auth", "none", "--disable-telemetry",
         "--disable-update-check", "--disable-workspace-trust", "--ignore-last-opened",
         str(workspace)], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
time.sleep(4)
config = {"nodeModules": env_paths["nodeModules"], "chromium": env_paths["chromium"],
          "url": f"http://127.0.0.1:{port}/?folder={workspace}", "profileDir": str(work / "p"),
          "fileName": "app.ts", "file": str(source), "typed": "  useEffect(",
          "shot": str(work / "shot.png"), "result": str(work / "result.json")}
(work / "config.json").write_text(json.dumps(config))
try:
    subprocess.run([env_paths["node"], str(HERE / "vscode_callback_drive.mjs"),
                    str(work / "config.json")], env=dict(env, HOME=str(work)), timeout=150)
finally:
    os.killpg(server.pid, 15)
    fake.close()
print((work / "result.json").read_text())
print("screenshot:", work / "shot.png")
