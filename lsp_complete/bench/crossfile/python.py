"""Cross-file tasks from multi-module Python packages: the standard library and site-packages
(see the package's docstring for what a task is)."""

from __future__ import annotations

import re
import sysconfig
from collections.abc import Collection, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from lsp_complete.bench.crossfile import tasks as shared
from lsp_complete.bench.crossfile.tasks import (
    DEFINITION_LINES,
    IDENT,
    CrossFileTask,
    Definitions,
    Import,
    Syntax,
    module_tasks,
    parse,
)
from lsp_complete.context.imports import extract_imports
from lsp_complete.languages import spec_for

_SKIP_PACKAGES = frozenset({"test", "tests", "idlelib", "lib2to3", "tkinter", "turtledemo",
                            "ensurepip", "pip", "setuptools", "_distutils_hack", "pkg_resources",
                            "site-packages"})


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


PYTHON = Syntax("python", IDENT, r"\w.", ("#", "from ", "import ", "@"),
                ("string", "comment", "string_content"))


def _definitions(path: Path) -> Definitions | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    root = parse("python", data)
    if root is None:
        return None
    source: dict[str, str] = {}
    members: dict[str, Collection[str]] = {}

    def define(name: str, node: Any) -> None:
        text = data[node.start_byte:node.end_byte].decode("utf-8", "replace")
        source[name] = "\n".join(text.split("\n")[:DEFINITION_LINES])

    for node in root.named_children:
        inner = node
        if node.type == "decorated_definition":
            inner = node.child_by_field_name("definition") or node
        if inner.type in ("function_definition", "class_definition"):
            name_node = inner.child_by_field_name("name")
            if name_node is None:
                continue
            name = data[name_node.start_byte:name_node.end_byte].decode()
            define(name, node)
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
            members[name] = found - {"self", "cls"}
        elif inner.type == "expression_statement" and inner.named_children and \
                inner.named_children[0].type == "assignment":
            left = inner.named_children[0].child_by_field_name("left")
            if left is not None and left.type == "identifier":
                define(data[left.start_byte:left.end_byte].decode(), node)
    return Definitions(source, members)


def _parameters(text: str) -> set[str]:
    return set(re.findall(r"(?:^|,)\s*\**([A-Za-z_]\w*)", text))


def _sibling_imports(text: str, root: Any, path: Path, package: str) -> list[Import]:
    spec = spec_for("python")
    assert spec is not None  # `root` was parsed with it
    data = text.encode()
    refs = extract_imports(spec, root, lambda a, b: data[a:b].decode("utf-8", "replace"))
    found: list[Import] = []
    for ref in refs:
        if ref.kind != "python" or not ref.names:  # `import a.b`: not a sibling's name
            continue
        module, level = ref.module, ref.level
        if not level and module.startswith(package + "."):
            module, level = module[len(package) + 1:], 1
        if level != 1:
            continue
        if module and "." not in module:
            sibling = path.parent / f"{module}.py"
            if sibling.is_file():
                found += [Import(alias, sibling, False)
                          for name, alias in zip(ref.names, ref.aliases, strict=True)
                          if name != "*"]
        elif not module:
            for name, alias in zip(ref.names, ref.aliases, strict=True):
                sibling = path.parent / f"{name}.py"
                if sibling.is_file():
                    found.append(Import(alias, sibling, True))
    return [f for f in found if f.sibling != path]


def _module_tasks(path: Path, root: Path, package: str) -> list[CrossFileTask]:
    imports = partial(_sibling_imports, path=path, package=package)
    return module_tasks(path, PYTHON, imports, _definitions, package, root,
                        path.relative_to(root).as_posix())


def build_python_tasks(n: int, seed: int = 0,
                       roots: list[Path] | None = None) -> list[CrossFileTask]:
    if n <= 0:
        return []
    folders = [(root, folder) for root in roots or package_roots() for folder in _packages(root)]

    def package(found: tuple[Path, Path]) -> Iterator[list[CrossFileTask]]:
        root, folder = found
        name = folder.relative_to(root).as_posix().replace("/", ".")
        return (_module_tasks(m, root, name) for m in sorted(folder.glob("*.py")))

    return shared.spread(n, f"crossfile:{seed}", -(-n // shared.PACKAGES_WANTED), folders,
                         package)
