"""What generating a block aside costs on a real model (issue 31): the same block request on
the same prompt, aside (a scratch copy of the file's sequence, no prompt-lookup drafting) and
in place (the file's own sequence), alternately, twice each, at the lines that open an `if`,
`for` or `def` body in six stdlib modules.

    python scripts/block_aside_cost.py ~/.cache/lsp-complete/models/<model>.gguf
"""

from __future__ import annotations

import argparse
import calendar
import csv
import dataclasses
import difflib
import inspect
import shlex
import statistics
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsp_complete.config import Settings  # noqa: E402
from lsp_complete.documents import Document  # noqa: E402
from lsp_complete.engine.base import CancelToken  # noqa: E402
from lsp_complete.pipeline import load_completer, prepare  # noqa: E402
from lsp_complete.pipeline.completer import BLOCK_MAX_TOKENS  # noqa: E402

MODULES = (argparse, difflib, textwrap, shlex, csv, calendar)
SPOTS_PER_MODULE = 4


def main(model: str) -> None:
    settings = Settings(model=model, threads=2, context_size=8192, persist_cache=False,
                        max_tokens=48)
    completer, _, _ = load_completer(settings)
    times: dict[str, dict[bool, list[float]]] = {}
    prefill: dict[bool, list[float]] = {True: [], False: []}
    for module in MODULES:
        lines = inspect.getsource(module).split("\n")
        openers = [i for i, line in enumerate(lines) if line.rstrip().endswith(":")
                   and line.strip().startswith(("if ", "for ", "def "))]
        for i in openers[:SPOTS_PER_MODULE]:
            indent = len(lines[i]) - len(lines[i].lstrip()) + 4
            text = "\n".join(lines[: i + 1] + [" " * indent] + lines[i + 1 :])
            doc = Document(f"file:///w/{module.__name__}.py", "python", 1, text)
            prepared = prepare(doc, doc.line_range(i + 1)[0] + indent, None, settings)
            request = completer.run(prepared, CancelToken()).request
            if request is None:
                continue
            spot = times.setdefault(f"{module.__name__}:{i + 1}", {True: [], False: []})
            for aside in (True, False, True, False):
                block = dataclasses.replace(
                    request, aside=aside, single_line=False, on_text=None,
                    max_tokens=BLOCK_MAX_TOKENS, deadline=time.monotonic() + 30)
                t0 = time.perf_counter()
                result = completer.engine.complete(block, CancelToken())
                spot[aside].append((time.perf_counter() - t0) * 1000)
                prefill[aside].append(result.prefill_ms)
                completer.run(prepared, CancelToken())  # the file's cache as the keystroke left it
    for aside in (True, False):
        every = [ms for spot in times.values() for ms in spot[aside]]
        fill = statistics.median(prefill[aside])
        print(f"{'aside' if aside else 'in place'}: {len(every)} blocks, median "
              f"{statistics.median(every):.0f} ms (prefill {fill:.0f} ms)")
    ratios = [statistics.mean(s[True]) / statistics.mean(s[False]) for s in times.values()]
    print(f"aside / in place per spot: median {statistics.median(ratios):.2f}x "
          f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x, {len(ratios)} spots)")


if __name__ == "__main__":
    main(sys.argv[1])
