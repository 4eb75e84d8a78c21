"""How many right blocks would our block rules keep? Model-free: the canonical lines of every
hole of the official HumanEval-MultiLineInfilling set are passed through the cuts a generated
block gets (`completer.cut_block`, as `Completer.block` cuts), and
each hole whose answer is not kept whole is put down to the rule that cut it. A hole cut here
cannot pass, whatever the model writes: this is the ceiling the rules leave for pass@1.

    python scripts/block_oracle.py HumanEval-MultiLineInfilling.jsonl.gz
"""

from __future__ import annotations

import argparse
import collections
import dataclasses

from lsp_complete.bench.humaneval import BlockTask, load_multi_line_file
from lsp_complete.config import Settings
from lsp_complete.documents import Document
from lsp_complete.pipeline import prepare
from lsp_complete.pipeline.completer import MAX_LINES, cut_block
from lsp_complete.postprocess import count_block_lines


def verdict(task: BlockTask, settings: Settings) -> str:
    """"kept", or the rule that cut the canonical answer."""
    doc = Document("file:///he/hole.py", "python", 1, task.prefix + task.suffix)
    prepared = prepare(doc, len(task.prefix), None, settings)
    site = dataclasses.replace(prepared.site, multiline=True)
    if task.exact_match(cut_block(task.target, site, prepared.ctx, ())):
        return "kept"
    kept = count_block_lines(task.target, site, MAX_LINES)
    if task.target_lines > MAX_LINES and kept == MAX_LINES:
        return "more lines than MAX_LINES"
    if kept < task.target_lines:
        return "scope (statements)" if site.statements else "scope (enclosing block)"
    return "the parse check or other cleaning"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", help="HumanEval-MultiLineInfilling.jsonl(.gz)")
    parser.add_argument("--examples", type=int, default=8, help="holes named per rule")
    args = parser.parse_args()
    settings = Settings(multiline="auto", persist_cache=False)
    found: dict[str, list[str]] = collections.defaultdict(list)
    tasks = load_multi_line_file(args.path)
    for task in tasks:
        found[verdict(task, settings)].append(task.name)
    for why, names in sorted(found.items(), key=lambda item: -len(item[1])):
        shown = ", ".join(names[: args.examples]) if why != "kept" else ""
        print(f"{why}: {len(names)} of {len(tasks)} ({100 * len(names) / len(tasks):.1f}%) {shown}")


if __name__ == "__main__":
    main()
