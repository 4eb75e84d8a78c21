"""What every cross-file task is, however it was found: the task, its scores, how a module's
tasks are found and how they are spread over packages."""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from lsp_complete.bench.records import AtCursor
from lsp_complete.languages import spec_for

MAX_PER_MODULE = 2
PACKAGES_WANTED = 12  # tasks are spread over about this many packages
MIN_LINES, MAX_LINES = 40, 4000  # a module A of fewer or more lines gives no task
DEFINITION_LINES = 60  # an oracle definition is cut to this many lines
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"  # a Python identifier
JS_IDENT = r"[A-Za-z_$][\w$]*"  # a JavaScript or TypeScript one: `$` is a letter there


@dataclass(frozen=True)
class CrossFileTask(AtCursor):
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
    language: str = "python"  # A's and B's language id (javascript.py: javascript, typescript)

    def relative(self, path: str) -> str:
        return Path(path).relative_to(self.root).as_posix()

    def oracle_context(self, file_sep: str | None, repo_name: str | None,
                       comment_prefix: str) -> tuple[str, bool]:
        """What the oracle is given before the PSM prompt, B's definition of what the line
        needs: (text, whether it holds the template's special markers). In the template's
        repository format when it has one, else as a commented block."""
        if file_sep:
            # JavaScript: the workspace folder's name, as the server names a repository (a
            # package.json name, `@scope/name`, is no folder's); Python: the top package's.
            package = self.relative(self.path).split("/", 1)[0] \
                if self.language == "python" else Path(self.root).name
            repo = f"{repo_name}{package}\n" if repo_name else ""
            return (f"{repo}{file_sep}{self.relative(self.imported_path)}\n{self.definition}\n"
                    f"{file_sep}{self.relative(self.path)}\n"), True
        lines = "".join(f"{comment_prefix} {line}".rstrip() + "\n"
                        for line in self.definition.split("\n"))
        return f"{comment_prefix} Path: {self.relative(self.imported_path)}\n{lines}\n", False


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
    produced = set(re.findall(IDENT if task.language == "python" else JS_IDENT, line))
    needed = sum(1 for n in task.needed if n in produced) / len(task.needed)
    return {"em": float(line.strip() == target.strip()), "needed": needed, "es": similarity}


# ------------------------------------------------------------- finding tasks

@dataclass(frozen=True)
class Syntax:
    """What finding tasks needs to know of a language."""

    language: str  # its language id (spec_for's, and the task's)
    ident: str  # an identifier's pattern
    boundary: str  # characters that may not come just before a use (a longer name, a member)
    skip: tuple[str, ...]  # lines starting so (stripped) give no task: comments, imports
    strings: tuple[str, ...]  # tree-sitter node types of strings and comments
    max_width: int | None = None  # a module with a longer line gives no task


@dataclass(frozen=True)
class Definitions:  # what module B defines
    source: dict[str, str]  # a top-level name -> its source, cut to DEFINITION_LINES
    # a class -> its members, a function -> its parameters (keyword arguments are B's names too)
    members: dict[str, Collection[str]]


@dataclass(frozen=True)
class Import:
    local: str  # the name module A uses
    sibling: Path  # module B
    is_module: bool  # whether `local` is B itself, not a name B defines
    after: int = 0  # uses in A before this offset (the import itself) give no task


def parse(language: str, data: bytes) -> Any | None:
    spec = spec_for(language)
    return None if spec is None else spec.parser().parse(data).root_node


def _in_string_or_comment(syntax: Syntax, root: Any, byte: int) -> bool:
    node = root.descendant_for_byte_range(byte, byte)
    while node is not None:
        if node.type in syntax.strings:
            return True
        node = node.parent
    return False


def module_tasks(path: Path, syntax: Syntax, imports: Callable[[str, Any], Iterable[Import]],
                 definitions: Callable[[Path], Definitions | None], package: str, root: Path,
                 label: str) -> list[CrossFileTask]:
    """The tasks of module A at `path` (of MIN_LINES to MAX_LINES lines): a cursor right after
    a use `N(` or `N.` of each name `imports(text, tree)` finds, whose line's rest needs names
    only B defines. A task is named `label:line`."""
    try:
        text = path.read_text(encoding="utf-8")  # universal newlines: "\r\n" reads as "\n"
    except (OSError, UnicodeDecodeError):
        return []
    if not MIN_LINES <= text.count("\n") <= MAX_LINES or syntax.max_width is not None and \
            max(map(len, text.split("\n"))) > syntax.max_width:
        return []
    tree = parse(syntax.language, text.encode())
    if tree is None:
        return []
    read = functools.cache(definitions)  # B is read once for all of A's imports from it
    tasks: list[CrossFileTask] = []
    for imported in imports(text, tree):
        local, is_module = imported.local, imported.is_module
        defs = read(imported.sibling)
        if defs is None or not (is_module or local in defs.source):
            continue
        candidates = set(defs.source) | set(defs.members.get(local, ()))
        for use in re.finditer(rf"(?<![{syntax.boundary}]){re.escape(local)}[.(]", text):
            cursor = use.end()
            line_start = text.rfind("\n", 0, cursor) + 1
            line_end = text.find("\n", cursor)
            line_end = len(text) if line_end < 0 else line_end
            target = text[cursor:line_end].rstrip()
            if cursor <= imported.after or len(target.strip()) < 2 or \
                    text[line_start:line_end].lstrip().startswith(syntax.skip) or \
                    _in_string_or_comment(syntax, tree, len(text[:cursor].encode()) - 1):
                continue
            seen = set(re.findall(syntax.ident, text[:cursor]))
            needed = tuple(dict.fromkeys(
                n for n in re.findall(syntax.ident, target) if n in candidates and n not in seen
            ))
            names = [n for n in ([] if is_module else [local]) + list(needed) if n in defs.source]
            definition = "\n\n".join(dict.fromkeys(defs.source[n] for n in names))
            if not needed or not definition:
                continue
            tasks.append(CrossFileTask(
                name=f"{label}:{text.count(chr(10), 0, cursor) + 1}", package=package,
                root=str(root), path=str(path), imported_path=str(imported.sibling),
                prefix=text[:cursor], suffix=text[line_end:], target=target, needed=needed,
                definition=definition, language=syntax.language,
            ))
    return tasks


# ------------------------------------------------------ spreading over packages

Package = TypeVar("Package")


def spread(n: int, seed: str, per_package: int, packages: list[Package],
           modules: Callable[[Package], Iterable[list[CrossFileTask]]]) -> list[CrossFileTask]:
    """About `per_package` tasks from each package in turn, in an order `seed` decides
    (MAX_PER_MODULE from each of its modules), until there are `n`. A package's modules' task
    lists are found only when it is reached: packages after the last one needed are never
    read."""
    rng = random.Random(seed)
    rng.shuffle(packages)
    chosen: list[CrossFileTask] = []
    for package in packages:
        found: list[CrossFileTask] = []
        for tasks in modules(package):
            rng.shuffle(tasks)
            found += tasks[:MAX_PER_MODULE]
        rng.shuffle(found)
        chosen += found[:per_package]
        if len(chosen) >= n:
            break
    return chosen[:n]
