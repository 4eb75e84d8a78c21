"""How much of a new spot's head did the file's cache hold? Offline, in tokens of the 0.5B's
vocabulary, for the bench's `moved` spans (seed 0, one span of 1 and of 3 lines per corpus
file): the head at the new spot against the head an open encoded (the file's top, as
3160e12's `prepare_head` built it) and the head at the spot asked before the move.

    python head_sharing.py [MODEL.gguf]
"""

from __future__ import annotations

import glob
import os
import statistics
import sys

from llama_cpp import Llama

from lsp_complete.bench import workload
from lsp_complete.config import Settings
from lsp_complete.context import ContextLimits, build_context
from lsp_complete.documents import Document
from lsp_complete.pipeline.prepare import prepare

MODEL = "~/.cache/lsp-complete/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def common(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def main() -> None:
    model = os.path.expanduser(sys.argv[1] if len(sys.argv) > 1 else MODEL)
    llm = Llama(model, vocab_only=True, verbose=False)

    def tok(text: str) -> list[int]:
        return llm.tokenize(text.encode(), add_bos=False, special=False)

    files = [os.path.abspath(f) for f in sorted(glob.glob("/work/corpus/*/*"))]
    rows = []
    for ep in workload.build_episodes(files, 1, [1, 3], 0, 200):
        doc = Document("file:///x/" + ep.name.split(":")[0], ep.language_id, 1,
                       ep.original_text)
        at_top = tok(build_context(doc, 0, 0, ContextLimits()).head)
        before_move = tok(prepare(doc, workload.elsewhere_offset(ep), None,
                                  Settings()).ctx.head)
        moved = Document(doc.uri, ep.language_id, 2, ep.initial_text)
        head = tok(prepare(moved, ep.start_offset, None, Settings()).ctx.head)
        rows.append((len(head), common(head, at_top), common(head, before_move)))
        print(f"{ep.name[:34]:34} head {len(head):4}  shared with the top's {rows[-1][1]:4}"
              f"  with the spot before {rows[-1][2]:4}")
    heads, top, spot = zip(*rows, strict=True)
    print(f"{len(rows)} spots: head median {statistics.median(heads)} tokens; shared with the "
          f"top's: none at {top.count(0)}, at most {max(top)}; with the spot before: median "
          f"{statistics.median(spot)}, at most {max(spot)}")


if __name__ == "__main__":
    main()
