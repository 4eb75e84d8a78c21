"""Cross-file tasks from multi-module Python packages: the standard library and site-packages
(see the package's docstring for what a task is)."""

from __future__ import annotations

import random
import re
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsp_complete.bench.crossfile import tasks as shared
from lsp_complete.bench.crossfile.tasks import (
    DEFINITION_LINES,
    IDENT,
    MAX_LINES,
    MIN_LINES,
    CrossFileTask,
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
    return "\n".join(lines[:DEFINITION_LINES])


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
    if not MIN_LINES <= text.count("\n") <= MAX_LINES:
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
            seen = set(IDENT.findall(text[:cursor]))
            needed = tuple(dict.fromkeys(
                n for n in IDENT.findall(target) if n in candidates and n not in seen
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


def build_python_tasks(n: int, seed: int = 0,
                       roots: list[Path] | None = None) -> list[CrossFileTask]:
    if n <= 0:
        return []
    rng = random.Random(f"crossfile:{seed}")
    per_package = max(1, -(-n // shared.PACKAGES_WANTED))
    folders = [(root, folder) for root in roots or package_roots() for folder in _packages(root)]
    rng.shuffle(folders)

    def package(root: Path, folder: Path) -> Iterator[list[CrossFileTask]]:
        name = folder.relative_to(root).as_posix().replace("/", ".")
        return (_module_tasks(m, root, name) for m in sorted(folder.glob("*.py")))

    packages = (package(root, folder) for root, folder in folders)
    return shared.spread(n, rng, per_package, packages)
