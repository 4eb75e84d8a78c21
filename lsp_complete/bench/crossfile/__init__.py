"""Cross-file lines: where only another module of the same package knows the answer.

Tasks come from real multi-module Python packages on the machine (the standard library and
site-packages): a line of module A uses a name A imports from a sibling module B (`from .b
import N`, `from . import b`, `from pkg.b import N`), the cursor sits right after `N(` or `N.`,
and the rest of the line uses an identifier B defines (a top-level name, or a member of the
class N) that A's text before the cursor never mentions: the model can know it only from B.
The document is A with the rest of that line removed.

Scores per task: exact match of the first suggested line with the rest of the line, the share
of the needed identifiers it produces, and edit similarity (1 - Levenshtein / longer length).

They are the crossfile scenarios of the drive (bench/ab/): every side, the stateless baselines
included, is asked each line once it is quiet at the spot (crossfile, crossfile-open), or as
a generic client asks, at open or after a pause (crossfile-at-open, crossfile-pause).

Modules: tasks.py (the task, its scores, finding a module's tasks, spreading tasks over
packages), python.py (the imports and definitions of Python packages), javascript.py (of
JavaScript/TypeScript packages in node_modules).
"""

from __future__ import annotations

from pathlib import Path

from lsp_complete.bench.crossfile.javascript import build_js_tasks
from lsp_complete.bench.crossfile.python import build_python_tasks
from lsp_complete.bench.crossfile.tasks import CrossFileTask, levenshtein, score

__all__ = ["CrossFileTask", "build_tasks", "levenshtein", "score"]


def build_tasks(n: int, seed: int = 0, roots: list[Path] | None = None,
                js_share: float = 0.0) -> list[CrossFileTask]:
    """`n` tasks from packages taken in an order `seed` decides, about n / PACKAGES_WANTED
    from each (MAX_PER_MODULE per module); packages are read only until there are enough.
    With `js_share`, that share of them comes from JavaScript/TypeScript packages in
    node_modules (javascript.py) when the machine has any, the rest from Python."""
    js = build_js_tasks(round(n * js_share), seed)
    return js + build_python_tasks(n - len(js), seed, roots)
