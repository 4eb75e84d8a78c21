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
"""

from __future__ import annotations

import asyncio
import random
import re
import sysconfig
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsp_complete.bench.baselines import FimTokens, LlamaBaseline
from lsp_complete.bench.records import Completion, Sample
from lsp_complete.context.imports import extract_imports
from lsp_complete.languages import spec_for, syntax_for
from lsp_complete.testing.lsp_client import position_at

LINES_BEFORE = 80  # the (b) windows the table used
LINES_AFTER = 20
MAX_PER_MODULE = 2
PACKAGES_WANTED = 12  # tasks are spread over about this many packages
_MIN_LINES, _MAX_LINES = 40, 4000
_DEFINITION_LINES = 60  # an oracle definition is cut to this many lines
_SKIP_PACKAGES = frozenset({"test", "tests", "idlelib", "lib2to3", "tkinter", "turtledemo",
                            "ensurepip", "pip", "setuptools", "_distutils_hack", "pkg_resources",
                            "site-packages"})
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
WAIT_IDLE_S = 900.0  # idle work at a spot: seconds on a loaded 2-core machine

# (d) configurations: name -> (repoContextTokens or None for the server's default, B open)
LSP_CONFIGS: dict[str, tuple[int | None, bool]] = {
    "d-norepo": (0, False),
    "d-norepo-open": (0, True),
    "d-repo": (None, False),
    "d-repo-open": (None, True),
}
VARIANT_LABELS = {
    "b": "(b) PSM 80/20, no repository context",
    "b+": "(b+) PSM 80/20 + the imported definition (oracle)",
    "d-norepo": "(d) lsp-complete, no repository context, file alone",
    "d-norepo-open": "(d) lsp-complete, no repository context, imported file open",
    "d-repo": "(d) lsp-complete, repository context, file alone",
    "d-repo-open": "(d) lsp-complete, repository context, imported file open",
}


@dataclass(frozen=True)
class CrossFileTask:
    name: str  # "package/module.py:line"
    package: str  # the package's dotted name
    root: str  # the folder holding the package (the workspace root)
    path: str  # module A
    imported_path: str  # module B
    prefix: str  # A's text up to the cursor
    suffix: str  # A's text after the removed rest of the line (starts with "\n")
    target: str  # the rest of the line
    needed: tuple[str, ...]  # identifiers B defines, in `target`, never before the cursor
    definition: str  # B's source of what the line needs (the oracle's context)
    language: str = "python"  # A's and B's language id (crossfile_js.py: javascript, typescript)

    @property
    def text(self) -> str:
        return self.prefix + self.suffix

    @property
    def offset(self) -> int:
        return len(self.prefix)

    def relative(self, path: str) -> str:
        return Path(path).relative_to(self.root).as_posix()


# ---------------------------------------------------------------------- scores

def levenshtein(a: str, b: str) -> int:
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def score(task: CrossFileTask, suggestion: str) -> dict[str, float]:
    line = suggestion.split("\n", 1)[0].rstrip()
    target = task.target.rstrip()
    longest = max(len(line), len(target))
    similarity = 1.0 - levenshtein(line, target) / longest if longest else 1.0
    produced = set(_IDENT.findall(line))
    needed = sum(1 for n in task.needed if n in produced) / len(task.needed)
    return {"em": float(line.strip() == target.strip()), "needed": needed, "es": similarity}


# ---------------------------------------------------------------------- finding tasks

def package_roots() -> list[Path]:
    """Where multi-module packages are looked for: the standard library, site-packages."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys(Path(paths[k]) for k in ("stdlib", "purelib") if paths.get(k)))


def _packages(root: Path) -> Iterator[Path]:
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.name in _SKIP_PACKAGES or not entry.name.isidentifier():
            continue
        if entry.is_dir() and (entry / "__init__.py").is_file():
            yield entry
            for sub in sorted(entry.iterdir()):
                if sub.is_dir() and sub.name not in _SKIP_PACKAGES and \
                        (sub / "__init__.py").is_file():
                    yield sub


@dataclass(frozen=True)
class _Defs:
    top: dict[str, tuple[int, int]]  # name -> (start byte, end byte) of its definition
    # class -> member names (methods, attributes, __init__'s parameters); function -> its
    # parameters (keyword arguments are names the module defines too)
    members: dict[str, frozenset[str]]
    data: bytes


def _definitions(path: Path) -> _Defs | None:
    spec = spec_for("python")
    if spec is None:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    root = spec.parser().parse(data).root_node
    top: dict[str, tuple[int, int]] = {}
    members: dict[str, frozenset[str]] = {}
    for node in root.named_children:
        inner = node
        if node.type == "decorated_definition":
            inner = node.child_by_field_name("definition") or node
        if inner.type in ("function_definition", "class_definition"):
            name_node = inner.child_by_field_name("name")
            if name_node is None:
                continue
            name = data[name_node.start_byte:name_node.end_byte].decode()
            top[name] = (node.start_byte, node.end_byte)
            body = data[inner.start_byte:inner.end_byte].decode("utf-8", "replace")
            if inner.type == "class_definition":
                found = set(re.findall(r"^\s+def\s+([A-Za-z_]\w*)", body, re.MULTILINE))
                found |= set(re.findall(r"^\s{4}([A-Za-z_]\w*)\s*[:=]", body, re.MULTILINE))
                found |= set(re.findall(r"self\.([A-Za-z_]\w*)\s*=", body))
                init = re.search(r"def\s+__init__\s*\(([^)]*)\)", body)
                found |= _parameters(init.group(1)) if init else set()
            else:
                signature = re.match(r"(?:async\s+)?def\s+\w+\s*\(([^)]*)\)", body)
                found = _parameters(signature.group(1)) if signature else set()
            members[name] = frozenset(found - {"self", "cls"})
        elif inner.type == "expression_statement" and inner.named_children and \
                inner.named_children[0].type == "assignment":
            left = inner.named_children[0].child_by_field_name("left")
            if left is not None and left.type == "identifier":
                top[data[left.start_byte:left.end_byte].decode()] = (node.start_byte,
                                                                     node.end_byte)
    return _Defs(top, members, data)


def _parameters(text: str) -> set[str]:
    return {m for m in re.findall(r"(?:^|,)\s*\**([A-Za-z_]\w*)", text)}


def _source(defs: _Defs, name: str) -> str:
    start, end = defs.top[name]
    lines = defs.data[start:end].decode("utf-8", "replace").split("\n")
    return "\n".join(lines[:_DEFINITION_LINES])


def _in_string_or_comment(root: Any, byte: int) -> bool:
    node = root.descendant_for_byte_range(byte, byte)
    while node is not None:
        if node.type in ("string", "comment", "string_content"):
            return True
        node = node.parent
    return False


def _sibling_imports(root: Any, data: bytes, path: Path,
                     package: str) -> list[tuple[str, Path, bool]]:
    """(local name, sibling module file, whether the name is the module itself)."""
    spec = spec_for("python")
    assert spec is not None
    refs = extract_imports(spec, root, lambda a, b: data[a:b].decode("utf-8", "replace"))
    found: list[tuple[str, Path, bool]] = []
    for ref in refs:
        if ref.kind != "python" or not ref.names:  # `import a.b`: not a sibling's name
            continue
        module = ref.module
        if not ref.level and module.startswith(package + "."):
            module, level = module[len(package) + 1:], 1
        else:
            level = ref.level
        if level != 1:
            continue
        if module and "." not in module:
            sibling = path.parent / f"{module}.py"
            if sibling.is_file():
                found += [(alias, sibling, False)
                          for name, alias in zip(ref.names, ref.aliases, strict=True)
                          if name != "*"]
        elif not module:
            for name, alias in zip(ref.names, ref.aliases, strict=True):
                sibling = path.parent / f"{name}.py"
                if sibling.is_file():
                    found.append((alias, sibling, True))
    return [f for f in found if f[1] != path]


def _module_tasks(path: Path, root: Path, package: str) -> list[CrossFileTask]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    text = text.replace("\r\n", "\n")
    if not _MIN_LINES <= text.count("\n") <= _MAX_LINES:
        return []
    tasks: list[CrossFileTask] = []
    cache: dict[Path, _Defs | None] = {}
    spec = spec_for("python")
    assert spec is not None
    data = text.encode()
    tree = spec.parser().parse(data).root_node
    for local, sibling, is_module in _sibling_imports(tree, data, path, package):
        if sibling not in cache:
            cache[sibling] = _definitions(sibling)
        defs = cache[sibling]
        if defs is None:
            continue
        original = local
        if not is_module and original not in defs.top:
            continue
        candidates = set(defs.top) | set(defs.members.get(original, ()))
        for match in re.finditer(rf"(?<![\w.]){re.escape(local)}[.(]", text):
            cursor = match.end()
            line_start = text.rfind("\n", 0, cursor) + 1
            line_end = text.find("\n", cursor)
            line_end = len(text) if line_end < 0 else line_end
            line = text[line_start:line_end]
            if line.lstrip().startswith(("#", "from ", "import ", "@")):
                continue
            target = text[cursor:line_end].rstrip()
            if len(target.strip()) < 2:
                continue
            if _in_string_or_comment(tree, len(text[:cursor].encode()) - 1):
                continue
            seen = set(_IDENT.findall(text[:cursor]))
            needed = tuple(dict.fromkeys(
                n for n in _IDENT.findall(target) if n in candidates and n not in seen
            ))
            if not needed:
                continue
            names = [n for n in ([] if is_module else [original]) + list(needed)
                     if n in defs.top]
            definition = "\n\n".join(_source(defs, n) for n in dict.fromkeys(names))
            if not definition:
                continue
            tasks.append(CrossFileTask(
                name=f"{path.relative_to(root).as_posix()}:{text.count(chr(10), 0, cursor) + 1}",
                package=package, root=str(root), path=str(path), imported_path=str(sibling),
                prefix=text[:cursor], suffix=text[line_end:], target=target,
                needed=needed, definition=definition,
            ))
    return tasks


def build_tasks(n: int, seed: int = 0, roots: list[Path] | None = None,
                js_share: float = 0.0) -> list[CrossFileTask]:
    """`n` tasks from packages taken in an order `seed` decides, about n / PACKAGES_WANTED
    from each (MAX_PER_MODULE per module); packages are read only until there are enough.
    With `js_share`, that share of them comes from JavaScript/TypeScript packages in
    node_modules (crossfile_js.py) when the machine has any, the rest from Python."""
    if n <= 0:
        return []
    js = build_js_tasks(round(n * js_share), seed) if js_share > 0 else []
    return js + build_python_tasks(n - len(js), seed, roots)


def build_js_tasks(n: int, seed: int = 0) -> list[CrossFileTask]:
    from lsp_complete.bench import crossfile_js

    if n <= 0:
        return []
    rng = random.Random(f"crossfile-js:{seed}")
    folders = crossfile_js.package_dirs()
    rng.shuffle(folders)

    def package(folder: Path) -> Iterator[list[CrossFileTask]]:
        name = crossfile_js.package_name(folder)
        return (crossfile_js.module_tasks(m, folder, name) for m in crossfile_js.modules(folder))

    return _spread(n, rng, max(1, -(-n // 4)), map(package, folders))


def build_python_tasks(n: int, seed: int = 0,
                       roots: list[Path] | None = None) -> list[CrossFileTask]:
    if n <= 0:
        return []
    rng = random.Random(f"crossfile:{seed}")
    per_package = max(1, -(-n // PACKAGES_WANTED))
    folders = [(root, folder) for root in roots or package_roots() for folder in _packages(root)]
    rng.shuffle(folders)

    def package(root: Path, folder: Path) -> Iterator[list[CrossFileTask]]:
        name = folder.relative_to(root).as_posix().replace("/", ".")
        return (_module_tasks(m, root, name) for m in sorted(folder.glob("*.py")))

    return _spread(n, rng, per_package, (package(root, folder) for root, folder in folders))


def _spread(n: int, rng: random.Random, per_package: int,
            packages: Iterable[Iterable[list[CrossFileTask]]]) -> list[CrossFileTask]:
    """About `per_package` tasks from each package in turn (MAX_PER_MODULE from each of its
    modules) until there are `n`. A package is its modules' task lists, found only when it is
    reached: packages after the last one needed are never read."""
    chosen: list[CrossFileTask] = []
    for modules in packages:
        found: list[CrossFileTask] = []
        for tasks in modules:
            rng.shuffle(tasks)
            found += tasks[:MAX_PER_MODULE]
        rng.shuffle(found)
        chosen += found[:per_package]
        if len(chosen) >= n:
            break
    return chosen[:n]


# ---------------------------------------------------------------------- engines

def _sample(variant: str, task: CrossFileTask, c: Completion) -> Sample:
    return Sample.of(
        "d" if variant.startswith("d") else variant, "crossfile", task.name, 0, c,
        extra={"variant": variant, "target": task.target, "needed": list(task.needed),
               **score(task, c.text)},
    )


def oracle_text(task: CrossFileTask, fim: Any) -> tuple[str, bool]:
    """The oracle's context before the PSM prompt: (text, whether it holds special markers).
    In the repository format when the template has one, else as a commented block."""
    package = task.relative(task.path).split("/", 1)[0] if task.language == "python" \
        else Path(task.root).name
    if fim is not None and getattr(fim, "file_sep", None):
        repo = f"{fim.repo_name}{package}\n" if getattr(fim, "repo_name", None) else ""
        return (f"{repo}{fim.file_sep}{task.relative(task.imported_path)}\n{task.definition}\n"
                f"{fim.file_sep}{task.relative(task.path)}\n"), True
    mark = syntax_for(task.language).comment_prefix
    lines = "".join(f"{mark} {line}".rstrip() + "\n" for line in task.definition.split("\n"))
    return f"{mark} Path: {task.relative(task.imported_path)}\n{lines}\n", False


def run_baselines(model_path: str, fim: FimTokens | None, repo_fim: Any, stop: tuple[str, ...],
                  threads: int, max_tokens: int, tasks: list[CrossFileTask],
                  variants: tuple[str, ...] = ("b", "b+"),
                  on_task: Callable[[], Any] = lambda: None) -> list[Sample]:
    """(b) and (b+) on one in-process model."""
    engine = LlamaBaseline(model_path, fim, stop, threads, max_tokens, reuse=True,
                           lines_before=LINES_BEFORE, lines_after=LINES_AFTER)
    samples: list[Sample] = []
    try:
        for task in tasks:
            for variant in variants:
                extra: list[int] = []
                if variant == "b+":
                    text, special = oracle_text(task, repo_fim)
                    extra = engine.tokenize_context(text, special)
                c = engine.complete_with_context(task.text, task.offset, extra)
                samples.append(_sample(variant, task, c))
            on_task()
    finally:
        engine.close()
    return samples


async def run_lsp_config(session: Any, tasks: list[CrossFileTask], variant: str,
                         open_imported: bool, on_task: Callable[[], Any]) -> list[Sample]:
    """One (d) configuration on a started `lsp_driver.ServerSession`."""
    from lsp_complete.bench import lsp_driver
    from lsp_complete.testing import lsp_client

    samples: list[Sample] = []
    for number, task in enumerate(tasks):
        version = (number + 1) * 10
        uri = Path(task.path).resolve().as_uri()
        other = Path(task.imported_path).resolve().as_uri()
        if open_imported:
            session.open(other, task.language,
                         Path(task.imported_path).read_text(encoding="utf-8"),
                         version)
        session.open(uri, task.language, task.text, version)
        session.move_cursor(uri, position_at(task.text, task.offset))
        await asyncio.sleep(0.05)
        await lsp_client.wait_idle(session.client, WAIT_IDLE_S)
        suggestion, latency, error = await session.inline(uri, task.text, task.offset)
        status = await session.status()
        record = lsp_driver.stats_by_version(status, uri).get(version)
        c = lsp_driver.completion_with_stats(suggestion, latency, record, error)
        sample = _sample(variant, task, c)
        doc = next((d for d in status.get("documents") or [] if d.get("uri") == uri), {})
        repo = doc.get("repoContext") or {}
        sample.extra["repo_tokens"] = repo.get("tokens", 0)
        sample.extra["repo_files"] = [f.get("path") for f in repo.get("files") or []]
        sample.extra["rss_mib"] = (status.get("memory") or {}).get("rssMiB")
        samples.append(sample)
        session.close(uri)
        if open_imported:
            session.close(other)
        on_task()
    return samples


# ---------------------------------------------------------------------- summary

def summarize(samples: list[Sample]) -> dict[str, dict[str, Any]]:
    """Per variant: tasks, exact match, needed identifiers, edit similarity, repo tokens."""
    rows: dict[str, dict[str, Any]] = {}
    for variant in VARIANT_LABELS:
        mine = [s for s in samples if s.workload == "crossfile"
                and s.extra.get("variant") == variant]
        if not mine:
            continue
        n = len(mine)
        tokens = [s.extra.get("repo_tokens", 0) for s in mine]
        rss = [s.extra["rss_mib"] for s in mine if s.extra.get("rss_mib") is not None]
        rows[variant] = {
            "label": VARIANT_LABELS[variant],
            "n": n,
            "em": sum(s.extra["em"] for s in mine) / n,
            "needed": sum(s.extra["needed"] for s in mine) / n,
            "es": sum(s.extra["es"] for s in mine) / n,
            "repo_tokens_mean": sum(tokens) / n,
            "latency_mean_ms": sum(s.latency_ms for s in mine) / n,
            "rss_max_mib": max(rss, default=None),
        }
    return rows
