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


# What may be imported from outside engine/: the protocol, the factory that names the
# backends, and the model-free drafting module (its modes and constants).
ENGINE_FACADE = {"lsp_complete.engine.base", "lsp_complete.engine.factory",
                 "lsp_complete.engine.speculation"}
# The bench's stateless baselines are engines of their own on llama.cpp: they load the model
# as the engine does (one decision on llama.cpp's crashing CPU buffer types), nothing more;
# the servers it installs (earlier releases) are told that decision.
LLAMA_LOADER_USERS = {"lsp_complete.bench.baselines": {"lsp_complete.engine.llama_backend"},
                      "lsp_complete.bench.install": {"lsp_complete.engine.llama_backend"}}
# Engine parts that must not load llama.cpp: testable without it (test_vocabulary).
MODEL_FREE = ("lsp_complete.engine.base", "lsp_complete.engine.vocabulary",
              "lsp_complete.engine.model_file", "lsp_complete.engine.speculation")


def _external_imports(name: str) -> set[str]:
    path = PACKAGE.parent.joinpath(*name.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def test_the_engine_imports_nothing_of_the_layers_above_it() -> None:
    above = ("lsp_complete.pipeline", "lsp_complete.server", "lsp_complete.daemon",
             "lsp_complete.scheduler", "lsp_complete.context", "lsp_complete.bench")
    for name, imports in _graph().items():
        if name.startswith("lsp_complete.engine"):
            bad = {m for m in imports if m.startswith(above)}
            assert not bad, f"{name} imports {bad}"


def test_nothing_outside_the_engine_names_a_concrete_engine_or_its_parts() -> None:
    for name, imports in _graph().items():
        if not name.startswith("lsp_complete.engine"):
            engine = {m for m in imports if m.startswith("lsp_complete.engine.")}
            allowed = ENGINE_FACADE | LLAMA_LOADER_USERS.get(name, set())
            assert engine <= allowed, f"{name} imports {engine - allowed}"


def test_the_model_free_engine_parts_never_load_llama_cpp() -> None:
    graph = _graph()
    for name in MODEL_FREE:
        for module in _reachable(graph, name):
            assert "llama_cpp" not in _external_imports(module), f"{name} loads it via {module}"


def test_gguf_headers_are_read_in_one_module() -> None:
    """gguf_header is the one reader (the test model's writer aside), a leaf like config."""
    graph = _graph()
    readers = {name for name in graph if "gguf" in _external_imports(name)}
    assert readers <= {"lsp_complete.gguf_header", "lsp_complete.testing.tiny_gguf"}, readers
    assert graph["lsp_complete.gguf_header"] == set()


def test_no_class_forwards_attributes_it_does_not_name() -> None:
    """Proxies (the daemon's per-session engine and scheduler) spell out what they forward,
    so the type checker holds them to the protocol they stand for."""
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                names = {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
                assert not names & {"__getattr__", "__getattribute__"}, f"{path}: {node.name}"


def test_next_edit_parts_are_pure() -> None:
    """The history, prompts and diff of next edits are plain functions over text: they use
    the registry's templates and the sanitizer, never the engine, the worker or the server."""
    graph = _graph()
    allowed = {"lsp_complete.models", "lsp_complete.postprocess"}
    for name, imports in graph.items():
        if name.startswith("lsp_complete.nextedit"):
            outside = {m for m in imports if not m.startswith("lsp_complete.nextedit")}
            assert outside <= allowed, f"{name} imports {outside - allowed}"


def test_scheduler_keys_are_typed_in_one_leaf_module() -> None:
    """Every job's key is a `JobKey` (jobkey.py, importing nothing of the package): no module
    hands the scheduler a string key, as the NUL-joined strings of four modules once were."""
    assert _graph()["lsp_complete.jobkey"] == set()
    queueing = {"submit", "submit_background", "call", "drop", "drop_idle"}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in queueing and node.args):
                key = node.args[0]
                assert not isinstance(key, (ast.Constant, ast.JoinedStr, ast.BinOp)), (
                    f"{path.name}:{node.lineno} queues work under a string key")


def test_only_the_planner_encodes_ahead_of_a_keystroke() -> None:
    """When a file's prompt is encoded is pipeline/planner.py's (issue 29): nothing else in
    the package calls an engine's `warm` (the engines and the daemon's proxy forward it), and
    the planner knows nothing of the server that queues its steps."""
    forwarders = {"lsp_complete.pipeline.planner", "lsp_complete.daemon.server"}
    for path in PACKAGE.rglob("*.py"):
        name = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "warm" and not name.startswith("lsp_complete.engine")):
                assert name in forwarders, f"{name} encodes a prompt ahead of a keystroke"
    graph = _graph()
    planner = "lsp_complete.pipeline.planner"
    outside = {m for m in _reachable(graph, planner) if m.startswith("lsp_complete.server")}
    assert not outside, f"the planner reaches the server: {outside}"


def test_the_bench_has_one_cli_server_lifecycle_statistics_and_format() -> None:
    """bench/ is one harness (issue 28): only __init__.py parses options, only servers.py
    starts a server under test (lsp-complete or a stateless baseline: no workload builds
    its own engine), only stats.py computes statistics and only fmt.py lays out report
    tables."""
    owners = {"add_argument(": "__init__.py", "ServerSession(": "servers.py",
              "StatelessSession(": "servers.py", "LlamaServerClient(": "servers.py",
              "LlamaBaseline(": "servers.py",
              "np.percentile(": "stats.py", "statistics.": "stats.py", "default_rng(": "stats.py",
              '" | ".join(': "fmt.py"}
    for path in (PACKAGE / "bench").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for needle, owner in owners.items():
            if needle in text:
                assert path == PACKAGE / "bench" / owner, f"{path} has {needle}"


def _server_side_modules() -> list[tuple[str, ast.Module]]:
    found = []
    for path in sorted([*(PACKAGE / "server").rglob("*.py"), *(PACKAGE / "daemon").rglob("*.py")]):
        found.append((_module_name(path), ast.parse(path.read_text(encoding="utf-8"))))
    return found


def test_the_registry_is_the_one_owner_of_the_open_files() -> None:
    """Issue 29: one OpenFile per document, in one registry (server/open_file.py). No other
    part makes a file's state or keeps documents, states or files by URI of its own; a
    file's repository block is written by the registry and the repository host only."""
    owner = "lsp_complete.server.open_file"
    per_file = {"Document", "DocState", "OpenFile"}
    for name, tree in _server_side_modules():
        if name == owner:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in {"DocState", "OpenFile"}, f"{name} makes one"
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                    and node.value.id in {"dict", "Mapping", "MutableMapping", "OrderedDict"}:
                held = {n.id for n in ast.walk(node.slice) if isinstance(n, ast.Name)}
                assert not held & per_file, f"{name} keeps {ast.unparse(node)}"
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                    and node.attr == "repo" and ast.unparse(node.value) != "self":
                assert name == "lsp_complete.server.repo", f"{name} writes a file's block"


def test_the_open_file_registry_sits_below_the_parts_that_use_it() -> None:
    """The registry knows documents, states and typing-ahead, none of the parts above it."""
    graph = _graph()
    server = {m for m in graph["lsp_complete.server.open_file"]
              if m.startswith("lsp_complete.server")}
    assert server <= {"lsp_complete.server.state"}, server
