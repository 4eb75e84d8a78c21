"""docs/ARCHITECTURE.md's "Client contract" names every method, command and settings section
the server puts on the wire (server/protocol.py), so a new client can be written from it."""

from __future__ import annotations

from pathlib import Path

from lsp_complete.server import protocol

DOC = Path(__file__).resolve().parent.parent / "docs" / "ARCHITECTURE.md"


def _contract_section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("## Client contract")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def test_the_client_contract_names_every_wire_name() -> None:
    names = {name: value for name, value in vars(protocol).items()
             if name.endswith(("_METHOD", "_COMMAND")) or name == "SECTION"}
    assert len(names) >= 8  # the method constants are found at all
    section = _contract_section()
    missing = {name: value for name, value in names.items() if f"`{value}" not in section}
    assert not missing, f"docs/ARCHITECTURE.md's client contract lacks {missing}"
