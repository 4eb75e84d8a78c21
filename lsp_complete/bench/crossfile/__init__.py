"""Cross-file lines: where only another module of the same package knows the answer.

Tasks come from real multi-module Python packages on the machine (the standard library and
site-packages): a line of module A uses a name A imports from a sibling module B (`from .b
import N`, `from . import b`, `from pkg.b import N`), the cursor sits right after `N(` or `N.`,
and the rest of the line uses an identifier B defines (a top-level name, or a member of the
class N) that A's text before the cursor never mentions: the model can know it only from B.
The document is A with the rest of that line removed.

Scores per task: exact match of the first suggested line with the rest of the line, the share
of the needed identifiers it produces, and edit similarity (1 - Levenshtein / longer length).

Engines:
  (b)  standard PSM on llama.cpp, 80 lines before / 20 after, no repository context;
  (b+) the same, given B's definition of what the line needs (an oracle) in the model's
       repository format: `<repo_name>pkg <file_sep>pkg/b.py definition <file_sep>pkg/a.py`;
  (d)  lsp-complete over LSP, with and without repository context (repoContextTokens), with
       only A open and with B open in another tab. The cursor is put on the line first
       (didMoveCursor) and the server is left to finish its idle work, as a user pausing
       there would; then one suggestion is asked for.

Modules: tasks.py (the task, its scores, spreading tasks over packages), python.py (tasks from
Python packages), javascript.py (from JavaScript/TypeScript packages in node_modules),
engines.py (running them on (b), (b+) and (d), and the summary).
"""

from __future__ import annotations

from pathlib import Path

from lsp_complete.bench.crossfile.engines import (
    LSP_CONFIGS,
    VARIANT_LABELS,
    oracle_text,
    run_baselines,
    run_lsp_config,
    summarize,
)
from lsp_complete.bench.crossfile.javascript import build_js_tasks
from lsp_complete.bench.crossfile.python import build_python_tasks
from lsp_complete.bench.crossfile.tasks import CrossFileTask, levenshtein, score

__all__ = [
    "LSP_CONFIGS", "VARIANT_LABELS", "CrossFileTask", "build_tasks", "levenshtein", "oracle_text",
    "run_baselines", "run_lsp_config", "score", "summarize",
]


def build_tasks(n: int, seed: int = 0, roots: list[Path] | None = None,
                js_share: float = 0.0) -> list[CrossFileTask]:
    """`n` tasks from packages taken in an order `seed` decides, about n / PACKAGES_WANTED
    from each (MAX_PER_MODULE per module); packages are read only until there are enough.
    With `js_share`, that share of them comes from JavaScript/TypeScript packages in
    node_modules (javascript.py) when the machine has any, the rest from Python."""
    if n <= 0:
        return []
    js = build_js_tasks(round(n * js_share), seed) if js_share > 0 else []
    return js + build_python_tasks(n - len(js), seed, roots)
