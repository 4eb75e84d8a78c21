"""The import graph keeps the layering docs/ARCHITECTURE.md draws: no circle anywhere in the
package, the server's parts built with their collaborators (none imports the server that
builds them), the server never reaching into the engine past the pipeline, and config
importing nothing of the stages after it. Every import counts, typing-only ones included."""

from __future__ import annotations

import ast
from pathlib import Path

import lsp_complete

PACKAGE = Path(lsp_complete.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                # `from package import module` names the module, not the package's own code
                subs = [f"{base}.{a.name}" for a in node.names]
                targets = [t for t in subs if t in modules] or [base]
            for target in targets:
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]], within: str) -> list[list[str]]:
    """Strongly connected groups of more than one module under `within` (Tarjan)."""
    nodes = [n for n in graph if n == within or n.startswith(within + ".")]
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in nodes:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in nodes:
        if node not in index:
            visit(node)
    return found


def test_no_import_circle_in_the_server_or_the_pipeline() -> None:
    graph = _graph()
    for package in ("lsp_complete.server", "lsp_complete.pipeline", "lsp_complete.engine",
                    "lsp_complete.context", "lsp_complete.bench", "lsp_complete.nextedit"):
        assert _cycles(graph, package) == [], package


def test_server_parts_do_not_import_the_server_that_builds_them() -> None:
    graph = _graph()
    top = {"lsp_complete.server.completion_server", "lsp_complete.server.handlers"}
    for name, imports in graph.items():
        if name.startswith("lsp_complete.server.") and name not in top:
            assert not imports & top, f"{name} imports {imports & top}"


def test_only_the_pipeline_and_the_daemon_reach_the_engine_from_the_server_side() -> None:
    """The server asks the pipeline (Completer) for everything, the engine included; the one
    place it names an engine module is none."""
    graph = _graph()
    for name, imports in graph.items():
        if name.startswith("lsp_complete.server"):
            engine = {m for m in imports if m.startswith("lsp_complete.engine")}
            assert engine <= {"lsp_complete.engine.base"}, f"{name} imports {engine}"


def test_config_imports_nothing_of_the_package() -> None:
    assert _graph()["lsp_complete.config"] == set()


def test_next_edit_parts_are_pure() -> None:
    """The history, prompts and diff of next edits are plain functions over text: they use
    the registry's templates and the sanitizer, never the engine, the worker or the server."""
    graph = _graph()
    allowed = {"lsp_complete.models", "lsp_complete.postprocess"}
    for name, imports in graph.items():
        if name.startswith("lsp_complete.nextedit"):
            outside = {m for m in imports if not m.startswith("lsp_complete.nextedit")}
            assert outside <= allowed, f"{name} imports {outside - allowed}"
