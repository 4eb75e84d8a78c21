"""Reading a file in an editor that highlights occurrences: the cursor rests at SPOTS lines
for REST_S each (documentHighlight 250 ms into each rest, as VS Code asks), no key typed.
Prints the server's CPU seconds and the tokens its engine encoded, per rest.

usage: python probe_read.py MODEL_PATH FILE WORKSPACE_FOLDER [SPOTS] [REST_S]
(run from the checkout under test; --no-daemon, so the CPU is the server process's own)
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())
from tests.raw_lsp import RawServer  # noqa: E402
from tests.strict_client import StrictClient  # noqa: E402


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    model, path, folder = sys.argv[1:4]
    spots = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    rest_s = float(sys.argv[5]) if len(sys.argv) > 5 else 4.0
    text = Path(path).read_text()
    lines = text.split("\n")
    uri = Path(path).resolve().as_uri()
    server = RawServer(model, "--no-daemon")
    client = StrictClient(server, inline=True)
    caps = client.initialize({"threads": 2}, folders=[Path(folder).resolve().as_uri()])
    assert caps.get("documentHighlightProvider"), "the server offers no highlights"
    server.wait_ready(120)
    client.open(uri, text, "python")
    time.sleep(2.0)
    server.wait_idle()
    start_cpu = cpu_s(server.proc.pid)
    start_tokens = server.wait_idle()["engineCounters"]
    rows = [int(len(lines) * (i + 0.5) / spots) for i in range(spots)]
    for row in rows:
        col = len(lines[row]) - len(lines[row].lstrip())
        time.sleep(0.25)
        client.highlight(uri, row, col)
        time.sleep(rest_s - 0.25)
    spent = cpu_s(server.proc.pid) - start_cpu
    counters = server.call("lsp-complete/status", {"recent": 0})["result"]["engineCounters"]
    encoded = {k: counters[k] - start_tokens.get(k, 0) for k in counters
               if isinstance(counters[k], (int, float))}
    print(f"spots={spots} rest={rest_s}s cpu={spent:.1f}s cpu/rest={spent / spots:.2f}s "
          f"share of 2 cores={spent / (spots * rest_s * 2):.0%}")
    print("engine counters:", encoded)
    client.shutdown()


if __name__ == "__main__":
    main()
