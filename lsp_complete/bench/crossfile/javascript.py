"""Cross-file tasks from JavaScript packages in node_modules (see the package's docstring for
what a task is).

Module A takes names from module B of the same package by a relative path
(`const b = require('./b')`, `const { f } = require('../b')`, `import { f } from './b.js'`,
`import * as b from './b'`); the cursor sits right after `f(`/`b.`, and the rest of the line
uses an identifier B defines (a top-level function, class or constant, an exported name, a
method of the class) that A's text before the cursor never mentions.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from collections.abc import Collection, Iterator
from pathlib import Path

from lsp_complete.bench.crossfile import tasks as shared
from lsp_complete.bench.crossfile.tasks import (
    DEFINITION_LINES,
    JS_IDENT,
    CrossFileTask,
    Definitions,
    Import,
    Syntax,
    parse,
    spread,
)

NODE_MODULES = ("/usr/lib/node_modules", "/usr/local/lib/node_modules")
_SUFFIXES = (".js", ".cjs", ".mjs", ".ts")
_MAX_MODULES = 400  # per package: enough for a few tasks without reading all of a huge one
_REQUIRE = re.compile(
    rf"(?:const|let|var)\s+(?:(?P<module>{JS_IDENT})|\{{(?P<names>[^}}]*)\}})\s*=\s*"
    r"require\(\s*['\"](?P<path>\.{1,2}/[^'\"]+)['\"]\s*\)")
_IMPORT = re.compile(
    rf"import\s+(?:\*\s+as\s+(?P<module>{JS_IDENT})|\{{(?P<names>[^}}]*)\}})\s+from\s+"
    r"['\"](?P<path>\.{1,2}/[^'\"]+)['\"]")
JAVASCRIPT = Syntax("javascript", JS_IDENT, r"\w.$", ("//", "*", "import "),
                    ("string", "comment", "template_string", "string_fragment", "regex"),
                    max_width=220)
TYPESCRIPT = dataclasses.replace(JAVASCRIPT, language="typescript")


def _syntax(path: Path) -> Syntax:
    return TYPESCRIPT if path.suffix == ".ts" else JAVASCRIPT


def package_dirs(roots: tuple[str, ...] = NODE_MODULES, depth: int = 2) -> list[Path]:
    """Packages (with a package.json) in the node_modules folders, scoped ones included, and
    those in their own node_modules (npm ships its dependencies so), by their real folders:
    a linked one (`npm link`) is read, and named in the oracle's repository line, where it is,
    as the server sees the workspace."""
    found: list[Path] = []
    for root in map(Path, roots):
        if not root.is_dir():
            continue
        for entry in sorted(root.iterdir()):
            inner = sorted(entry.iterdir()) if entry.name.startswith("@") and entry.is_dir() \
                else [entry]
            for package in inner:
                if (package / "package.json").is_file():
                    found.append(package.resolve())
                    if depth > 1 and (package / "node_modules").is_dir():
                        found += package_dirs((str(package / "node_modules"),), depth - 1)
    return found


def package_name(folder: Path) -> str:
    try:
        return str(json.loads((folder / "package.json").read_text()).get("name") or folder.name)
    except (OSError, ValueError):
        return folder.name


def modules(folder: Path) -> Iterator[Path]:
    found = (path for path in sorted(folder.rglob("*"))
             if path.suffix in _SUFFIXES and "node_modules" not in path.relative_to(folder).parts
             and not path.name.endswith((".min.js", ".d.ts")) and path.is_file())
    return itertools.islice(found, _MAX_MODULES)


def resolve(path: Path, spec: str, folder: Path) -> Path | None:
    base = (path.parent / spec).resolve()
    candidates = [base, *(base.with_name(base.name + s) for s in _SUFFIXES),
                  *(base / f"index{s}" for s in _SUFFIXES)]
    if base.suffix == ".js":  # TypeScript sources import "./b.js" for "./b.ts"
        candidates.append(base.with_suffix(".ts"))
    return next((c for c in candidates if c.is_file() and c.suffix in _SUFFIXES
                 and folder.resolve() in c.parents), None)


def _names(text: str) -> list[str]:
    """Local names bound by `{ a, b: c }` (require) or `{ a, b as c }` (import)."""
    bound = (re.split(r"\s+as\s+|\s*:\s*", part.strip())[-1].strip() for part in text.split(","))
    return [local for local in bound if re.fullmatch(JS_IDENT, local)]


def definitions(path: Path) -> Definitions | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    root = parse(_syntax(path).language, data)
    if root is None:
        return None
    top: dict[str, str] = {}
    members: dict[str, Collection[str]] = {}
    for node in root.named_children:
        inner = node.child_by_field_name("declaration") or node \
            if node.type == "export_statement" else node
        text = data[inner.start_byte:inner.end_byte].decode("utf-8", "replace")
        source = "\n".join(text.split("\n")[:DEFINITION_LINES])
        if inner.type in ("function_declaration", "class_declaration",
                          "generator_function_declaration"):
            name = inner.child_by_field_name("name")
            if name is None:
                continue
            key = data[name.start_byte:name.end_byte].decode()
            top[key] = source
            found = set(re.findall(rf"^\s+(?:static\s+|async\s+|get\s+|set\s+)*({JS_IDENT})\s*\(",
                                   text, re.MULTILINE))
            found |= set(re.findall(rf"this\.({JS_IDENT})\s*=", text))
            signature = re.search(r"\(([^)]*)\)", text)
            found |= set(re.findall(JS_IDENT, signature.group(1))) if signature else set()
            members[key] = found - {"constructor", "if", "for", "while", "switch", "catch",
                                    "function", "return"}
        elif inner.type in ("lexical_declaration", "variable_declaration"):
            for declarator in inner.named_children:
                name = declarator.child_by_field_name("name")
                if name is not None and name.type == "identifier":
                    top[data[name.start_byte:name.end_byte].decode()] = source
        elif inner.type == "expression_statement":
            # exports.f = ..., module.exports.f = ..., module.exports = { f, g() {} }
            for key in re.findall(rf"^(?:module\.)?exports\.({JS_IDENT})\s*=", text):
                top.setdefault(key, source)
            block = re.match(r"module\.exports\s*=\s*\{(.*)\}", text, re.DOTALL)
            if block:
                for key in re.findall(rf"(?:^|,|\n)\s*({JS_IDENT})\s*(?=[,:(\n}}]|$)",
                                      block.group(1)):
                    top.setdefault(key, source)
    return Definitions(top, members)


def _imports(text: str, path: Path, folder: Path) -> Iterator[Import]:
    for match in (*_REQUIRE.finditer(text), *_IMPORT.finditer(text)):
        sibling = resolve(path, match.group("path"), folder)
        if sibling is None or sibling == path.resolve():
            continue
        module = match.group("module")
        for local in [module] if module else _names(match.group("names") or ""):
            yield Import(local, sibling, bool(module), after=match.end())


def module_tasks(path: Path, folder: Path, package: str) -> list[CrossFileTask]:
    return shared.module_tasks(path, _syntax(path), lambda text, _: _imports(text, path, folder),
                               definitions, package, folder,
                               f"{package}/{path.relative_to(folder).as_posix()}")


def build_js_tasks(n: int, seed: int = 0) -> list[CrossFileTask]:
    """`n` tasks from the node_modules packages, about a quarter of them from each package
    reached, in an order `seed` decides."""
    if n <= 0:
        return []

    def package(folder: Path) -> Iterator[list[CrossFileTask]]:
        name = package_name(folder)
        return (module_tasks(m, folder, name) for m in modules(folder))

    return spread(n, f"crossfile-js:{seed}", -(-n // 4), package_dirs(), package)
