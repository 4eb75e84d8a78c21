"""Where does the editor's `)` go when a callback's first line is accepted in VS Code?

The 2026-12-07-autoclose check (`vscode_check.check`: code-server with the packaged extension,
which asks for `replaceLineSuffix`; the model's answer scripted) on a TypeScript file: the
browser types `  useEffect(` (VS Code puts the `)` in), waits for the ghost text, presses Tab,
then Enter, `load();`, Enter, `}`, and saves. Run at efac73b (the `)` taken into the item) and
at 0cc7c4c (left in place), from the repository root:
    python docs/bench/2026-12-07c-first-key/vscode_callback.py
"""

import importlib.util
import os
import sys
from pathlib import Path

sys.path.insert(0, os.getcwd())
_spec = importlib.util.spec_from_file_location(
    "vscode_check", Path(__file__).parent.parent / "2026-12-07-autoclose" / "vscode_check.py")
assert _spec is not None and _spec.loader is not None
vscode_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(vscode_check)

vscode_check.check(
    "() => {\n    load();\n  }, []);\n", "app.ts",
    "declare function useEffect(f: () => void, deps: unknown[]): void;\n"
    "declare function load(): void;\n\nexport function Clock() {\n",
    "  useEffect(", line_match="useEffect(",
    after_tab=[{"press": "Enter"}, {"type": "load();"}, {"press": "Enter"}, {"type": "}"}])
