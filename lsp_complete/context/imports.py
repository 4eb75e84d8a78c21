"""What a file imports from its workspace: import statements read with tree-sitter, and the
workspace files they name.

`extract_imports` runs where the syntax tree lives (the server's event loop): one tree-sitter
query, then a look at the few import nodes it finds; its result is plain, hashable data
(`ImportRef`), which is what a file's repository context is keyed by. `resolve_imports` runs off
the loop: it asks the `Workspace` (which keeps every read inside the roots, outside ignored
files) which files those imports name, per language:

* Python: `import a.b`, `from a.b import c`, relative imports (`from ..x import y`), packages
  (`__init__.py`, and `from pkg import submodule`);
* JavaScript / TypeScript: relative `import ... from './x'`, `export ... from`, `require('./x')`
  (with the name it is bound to: `const m = require('./x')` names the module `m`),
  with the usual extensions and `index` files (and `./x.js` meaning `./x.ts`);
* Go: the other files of the same package, and imported packages inside the workspace's module
  (go.mod's `module` path);
* Rust: `mod x;` (x.rs or x/mod.rs) and `use crate::` / `super::` / `self::` paths;
* C / C++: `#include "x.h"` relative to the file, then to the roots (and their include/);
* Java: the same package's other files, and imports mapped to paths under the source root.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

import tree_sitter

from lsp_complete.languages import LanguageSpec
from lsp_complete.safe_read import MANIFEST
from lsp_complete.workspace import Workspace

MAX_TARGETS = 12  # files one file's imports may bring in (the nearest ones)
_MAX_FOUND = 64  # imports resolved before the nearest MAX_TARGETS are kept
_SCAN_BYTES = 256 * 1024  # imports are looked for in this much of a file (they sit on top)
_PACKAGE_FILES = 6  # files of one Go / Java package (the same one or an imported one)
MAX_IMPORTS = 256  # distinct imports kept, in file order: MAX_TARGETS files come from the first
MAX_NAMES = 64  # names kept of one import (`from m import (...)`), in order

Text = Callable[[int, int], str]  # (start byte, end byte) -> source text


@dataclass(frozen=True)
class ImportRef:
    """One import, as written (no filesystem involved): what the repository context is keyed
    by. `names` are the names taken from the module as it defines them, `aliases` the local
    names they go by in the importing file (same length); an import of a whole module
    (`import a.b as c`, `mod x;`, a Go import) has no names and its local name as alias."""

    kind: str  # python | path | go | go-package | rust-mod | rust-use | include | java
    module: str
    names: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    level: int = 0  # python: leading dots; include: 1 for "x.h", 0 for <x.h>; java: 1 static


@dataclass(frozen=True)
class ImportTarget:
    """A workspace file some imports name, and what the importing file takes from it."""

    path: Path  # resolved
    names: tuple[str, ...] = ()  # names it defines that the file imports ("*": all of it)
    aliases: tuple[str, ...] = field(default=())  # the local names the file uses for it


# ---------------------------------------------------------------------- extraction

_QUERIES = {
    "python": "[(import_statement) (import_from_statement)] @import",
    "javascript": """
        (import_statement) @import
        (export_statement source: (_)) @import
        (call_expression function: (identifier) arguments: (arguments . (string))) @import
    """,
    "go": "[(package_clause) (import_spec)] @import",
    "rust": "[(mod_item) (use_declaration)] @import",
    "c": "(preproc_include) @import",
    "java": "[(package_declaration) (import_declaration)] @import",
}
_QUERY_OF = {"typescript": "javascript", "tsx": "javascript", "cpp": "c"}


@cache
def _query(spec: LanguageSpec) -> tree_sitter.Query | None:
    source = _QUERIES.get(_QUERY_OF.get(spec.name, spec.name))
    return tree_sitter.Query(spec.language, source) if source else None


def extract_imports(spec: LanguageSpec, root: tree_sitter.Node,
                    text: Text) -> tuple[ImportRef, ...]:
    """The file's imports, in file order (duplicates removed)."""
    query = _query(spec)
    if query is None:
        return ()
    cursor = tree_sitter.QueryCursor(query)
    cursor.set_byte_range(0, min(root.end_byte, _SCAN_BYTES))
    captures = cursor.captures(root)
    nodes = sorted(captures.get("import", []), key=lambda n: n.start_byte)
    read = _READERS[_QUERY_OF.get(spec.name, spec.name)]
    refs: dict[ImportRef, None] = {}  # ordered, and a set: a repeat costs one lookup
    for node in nodes[:4 * MAX_IMPORTS]:  # a file of repeats is read no further
        if node.has_error:
            continue  # half-typed: the import set must not follow a keystroke mid-statement
        for ref in read(node, text):
            if len(ref.names) > MAX_NAMES:  # each name may cost disk lookups (Python's)
                ref = replace(ref, names=ref.names[:MAX_NAMES],
                              aliases=ref.aliases[:MAX_NAMES])
            refs.setdefault(ref)
            if len(refs) >= MAX_IMPORTS:
                return tuple(refs)
    return tuple(refs)


def _node_text(node: tree_sitter.Node | None, text: Text) -> str:
    return text(node.start_byte, node.end_byte) if node is not None else ""


def _python(node: tree_sitter.Node, text: Text) -> Iterator[ImportRef]:
    def name_and_alias(child: tree_sitter.Node) -> tuple[str, str]:
        if child.type == "aliased_import":
            name = _node_text(child.child_by_field_name("name"), text)
            return name, _node_text(child.child_by_field_name("alias"), text) or name
        return _node_text(child, text), _node_text(child, text)

    if node.type == "import_statement":
        for child in node.children_by_field_name("name"):
            module, alias = name_and_alias(child)
            yield ImportRef("python", module, aliases=(alias,))
        return
    module_node = node.child_by_field_name("module_name")
    if module_node is None:
        return
    level, module = 0, _node_text(module_node, text)
    if module_node.type == "relative_import":
        prefix = next((c for c in module_node.children if c.type == "import_prefix"), None)
        level = len(_node_text(prefix, text).strip())
        dotted = next((c for c in module_node.children if c.type == "dotted_name"), None)
        module = _node_text(dotted, text)
    pairs = [name_and_alias(c) for c in node.children_by_field_name("name")]
    if any(c.type == "wildcard_import" for c in node.children):
        pairs.append(("*", "*"))
    yield ImportRef("python", module, tuple(p[0] for p in pairs), tuple(p[1] for p in pairs),
                    level)


def _string_value(node: tree_sitter.Node | None, text: Text) -> str:
    raw = _node_text(node, text)
    return raw[1:-1] if len(raw) >= 2 and raw[0] in "\"'`" and raw[-1] == raw[0] else ""


def _javascript(node: tree_sitter.Node, text: Text) -> Iterator[ImportRef]:
    if node.type == "call_expression":
        if _node_text(node.child_by_field_name("function"), text) != "require":
            return
        args = node.child_by_field_name("arguments")
        source = args.named_children[0] if args is not None and args.named_children else None
        if source is not None and source.type == "string":
            bound, local = _required_as(node, text)
            yield ImportRef("path", _string_value(source, text), bound, local)
        return
    source = node.child_by_field_name("source")
    if source is None:
        return
    names: list[str] = []
    aliases: list[str] = []
    for spec in _descendants(node, ("import_specifier", "export_specifier")):
        name = _node_text(spec.child_by_field_name("name"), text)
        names.append(name)
        aliases.append(_node_text(spec.child_by_field_name("alias"), text) or name)
    clause = next((c for c in node.named_children if c.type == "import_clause"), None)
    if clause is not None:
        for child in clause.named_children:
            if child.type == "identifier":
                names.append("default")
                aliases.append(_node_text(child, text))
            elif child.type == "namespace_import":
                names.append("*")
                ident = next((c for c in child.named_children if c.type == "identifier"), None)
                aliases.append(_node_text(ident, text))
    yield ImportRef("path", _string_value(source, text), tuple(names), tuple(aliases))


def _required_as(call: tree_sitter.Node, text: Text) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(names, aliases) a `require(...)` is bound to: `const m = require(...)` binds the whole
    module to `m` (no names: `m.` names it, as `import * as m`), also through a wrapper call
    (`__importDefault(require(...))`, what TypeScript compiles to) or `await`; `const {a, b: c}
    = require(...)` binds names a and b, as a and c."""
    node = call
    while node.parent is not None and node.parent.type in (
            "arguments", "call_expression", "await_expression", "parenthesized_expression"):
        node = node.parent
    declarator = node.parent
    if declarator is None or declarator.type != "variable_declarator":
        return (), ()
    target = declarator.child_by_field_name("name")
    if target is None:
        return (), ()
    if target.type == "identifier":
        return (), (_node_text(target, text),)
    names: list[str] = []
    aliases: list[str] = []
    if target.type == "object_pattern":
        for part in target.named_children:
            if part.type == "shorthand_property_identifier_pattern":
                names.append(_node_text(part, text))
                aliases.append(names[-1])
            elif part.type == "pair_pattern":
                value = part.child_by_field_name("value")
                if value is not None and value.type == "identifier":
                    names.append(_node_text(part.child_by_field_name("key"), text))
                    aliases.append(_node_text(value, text))
    return tuple(names), tuple(aliases)


def _descendants(node: tree_sitter.Node, types: tuple[str, ...]) -> Iterator[tree_sitter.Node]:
    for child in node.named_children:
        if child.type in types:
            yield child
        else:
            yield from _descendants(child, types)


def _go(node: tree_sitter.Node, text: Text) -> Iterator[ImportRef]:
    if node.type == "package_clause":
        ident = next((c for c in node.named_children if c.type == "package_identifier"), None)
        yield ImportRef("go-package", _node_text(ident, text))
        return
    path = _string_value(node.child_by_field_name("path"), text)
    if path:
        local = _node_text(node.child_by_field_name("name"), text) or path.rsplit("/", 1)[-1]
        yield ImportRef("go", path, aliases=(local,))


def _rust(node: tree_sitter.Node, text: Text) -> Iterator[ImportRef]:
    if node.type == "mod_item":
        if node.child_by_field_name("body") is None:  # `mod x;`: a file, not an inline module
            name = _node_text(node.child_by_field_name("name"), text)
            yield ImportRef("rust-mod", name, aliases=(name,))
        return
    argument = node.child_by_field_name("argument")
    for path, alias in _use_paths(argument, "", text):
        if path.split("::", 1)[0] in ("crate", "super", "self"):
            name = path.rsplit("::", 1)[-1]
            yield ImportRef("rust-use", path, (name,), (alias or name,))


def _use_paths(node: tree_sitter.Node | None, prefix: str,
               text: Text) -> Iterator[tuple[str, str]]:
    """The paths a use tree names, each with its local alias ("" when none)."""
    if node is None:
        return
    join = (prefix + "::") if prefix else ""
    if node.type == "use_as_clause":
        path = _node_text(node.child_by_field_name("path"), text)
        yield join + path, _node_text(node.child_by_field_name("alias"), text)
    elif node.type == "scoped_use_list":
        base = join + _node_text(node.child_by_field_name("path"), text)
        for child in (node.child_by_field_name("list") or node).named_children:
            yield from _use_paths(child, base, text)
    elif node.type == "use_list":
        for child in node.named_children:
            yield from _use_paths(child, prefix, text)
    elif node.type == "use_wildcard":
        inner = node.named_children[0] if node.named_children else None
        yield join + _node_text(inner, text) + "::*", ""
    elif node.type in ("scoped_identifier", "identifier", "crate", "self", "super"):
        yield join + _node_text(node, text), ""


def _c(node: tree_sitter.Node, text: Text) -> Iterator[ImportRef]:
    path = node.child_by_field_name("path")
    if path is None:
        return
    raw = _node_text(path, text).strip()
    if path.type == "string_literal" and len(raw) >= 2:
        yield ImportRef("include", raw[1:-1], level=1)
    elif path.type == "system_lib_string" and len(raw) >= 2:
        yield ImportRef("include", raw[1:-1], level=0)


def _java(node: tree_sitter.Node, text: Text) -> Iterator[ImportRef]:
    ident = next((c for c in node.named_children
                  if c.type in ("scoped_identifier", "identifier")), None)
    name = _node_text(ident, text)
    if not name:
        return
    if node.type == "package_declaration":
        yield ImportRef("java-package", name)
        return
    wildcard = any(c.type == "asterisk" for c in node.children)
    static = any(c.type == "static" for c in node.children)
    yield ImportRef("java", name, ("*",) if wildcard else (name.rsplit(".", 1)[-1],),
                    level=1 if static else 0)


_READERS: dict[str, Callable[[tree_sitter.Node, Text], Iterator[ImportRef]]] = {
    "python": _python,
    "javascript": _javascript,
    "go": _go,
    "rust": _rust,
    "c": _c,
    "java": _java,
}


# ---------------------------------------------------------------------- resolution

class _Targets:
    """Targets in the order found, one per file (the names of repeated ones merged)."""

    def __init__(self, current: Path, cancelled: Callable[[], bool]) -> None:
        self.current = current
        self.found: dict[Path, ImportTarget] = {}
        self.cancelled = cancelled

    def live(self, refs: tuple[ImportRef, ...]) -> Iterator[ImportRef]:
        """`refs` in order, until the work is no longer wanted (each costs disk lookups)."""
        for ref in refs:
            if self.cancelled():
                return
            yield ref

    def add(self, path: Path | None, names: tuple[str, ...] = (),
            aliases: tuple[str, ...] = ()) -> None:
        if path is None or path == self.current:
            return
        known = self.found.get(path)
        if known is None:
            if len(self.found) < _MAX_FOUND:
                self.found[path] = ImportTarget(path, names, aliases)
            return
        merged = tuple(dict.fromkeys(known.names + names))
        merged_aliases = tuple(dict.fromkeys(known.aliases + aliases))
        self.found[path] = ImportTarget(path, merged, merged_aliases)


def resolve_imports(refs: tuple[ImportRef, ...], path: Path, language: str,
                    workspace: Workspace,
                    cancelled: Callable[[], bool] = lambda: False) -> list[ImportTarget]:
    """The workspace files `refs` (the imports of the file at `path`) name: the MAX_TARGETS
    nearest to the file in the folder tree (its siblings and its package before the rest of
    the workspace), in import order. Only files the workspace may read are returned; once
    `cancelled()`, no further import is looked up."""
    resolver = _RESOLVERS.get(_QUERY_OF.get(language, language))
    found = workspace.allowed(Path(path))
    if resolver is None or found is None:
        return []
    current = found[0]
    targets = _Targets(current, cancelled)
    resolver(refs, current, workspace, targets)
    found_targets = list(targets.found.values())
    nearest = sorted(range(len(found_targets)),
                     key=lambda i: (_distance(current, found_targets[i].path), i))
    return [found_targets[i] for i in sorted(nearest[:MAX_TARGETS])]


def _distance(current: Path, target: Path) -> int:
    """Steps between the two files' folders in the folder tree (0: the same folder)."""
    a, b = current.parent.parts, target.parent.parts
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    return len(a) + len(b) - 2 * common


def _first_file(workspace: Workspace, candidates: list[Path]) -> Path | None:
    for candidate in candidates:
        if workspace.is_file(candidate):
            return workspace.allowed(candidate)[0]  # type: ignore[index]
    return None


# Python ------------------------------------------------------------------------------------

def _python_module(workspace: Workspace, base: Path, dotted: str) -> tuple[Path | None, bool]:
    """(file, is_package) of module `dotted` under `base` ("" = the base package itself)."""
    folder = base.joinpath(*dotted.split(".")) if dotted else base
    init = _first_file(workspace, [folder / "__init__.py", folder / "__init__.pyi"])
    if init is not None:
        return init, True
    if not dotted:
        return None, False
    return _first_file(workspace, [folder.with_suffix(".py"), folder.with_suffix(".pyi")]), False


def _python_bases(current: Path, workspace: Workspace) -> list[Path]:
    """Where absolute imports may start: above the file's top package, then the roots."""
    bases: list[Path] = []
    folder = current.parent
    while workspace.is_file(folder / "__init__.py"):
        folder = folder.parent
    bases.append(folder)
    for root in workspace.roots:
        bases += [root, root / "src"]
    return list(dict.fromkeys(bases))


def _resolve_python(refs: tuple[ImportRef, ...], current: Path, workspace: Workspace,
                    targets: _Targets) -> None:
    bases = _python_bases(current, workspace)
    for ref in targets.live(refs):
        if ref.level:
            base = current.parent
            for _ in range(ref.level - 1):
                base = base.parent
            candidates = [base]
        else:
            candidates = bases
        for base in candidates:
            module, is_package = _python_module(workspace, base, ref.module)
            if module is None and not (ref.level and not ref.module):
                continue
            if not ref.names:  # `import a.b`: the whole module
                targets.add(module, (), ref.aliases)
                break
            package_dir = base.joinpath(*ref.module.split(".")) if ref.module else base
            rest: list[tuple[str, str]] = []
            for name, alias in zip(ref.names, ref.aliases, strict=True):
                if targets.cancelled():  # four disk checks a name: not once unwanted
                    return
                # `from pkg import submodule` names a module, not something pkg defines.
                sub = None
                if name != "*" and (is_package or not ref.module):
                    sub, _ = _python_module(workspace, package_dir, name)
                if sub is not None:
                    targets.add(sub, (), (alias,))
                else:
                    rest.append((name, alias))
            if rest and module is not None:
                targets.add(module, tuple(n for n, _ in rest), tuple(a for _, a in rest))
            break


# JavaScript / TypeScript -------------------------------------------------------------------

_JS_EXTENSIONS = (".ts", ".tsx", ".d.ts", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts")


def _resolve_js_path(workspace: Workspace, current: Path, spec: str) -> Path | None:
    if not spec.startswith((".", "/")):
        return None  # a package from node_modules, not the workspace's own code
    target = current.parent / spec
    candidates = [target]
    stem, dot, ext = spec.rpartition(".")
    if dot and ext in ("js", "mjs", "cjs", "jsx") and "/" not in ext:
        # TypeScript's ESM imports name the compiled file: './x.js' is './x.ts'.
        base = current.parent / stem
        candidates += [base.with_name(base.name + e) for e in (".ts", ".tsx", ".mts", ".cts")]
    candidates += [target.with_name(target.name + e) for e in _JS_EXTENSIONS]
    candidates += [target / ("index" + e) for e in _JS_EXTENSIONS]
    return _first_file(workspace, candidates)


def _resolve_javascript(refs: tuple[ImportRef, ...], current: Path, workspace: Workspace,
                        targets: _Targets) -> None:
    for ref in targets.live(refs):
        names = tuple(n for n in ref.names if n != "default") or ref.names
        targets.add(_resolve_js_path(workspace, current, ref.module), names, ref.aliases)


# Go ------------------------------------------------------------------------------------------

_GO_MODULE = re.compile(r"^\s*module\s+(\S+)", re.MULTILINE)


def _go_module(workspace: Workspace, current: Path) -> tuple[Path, str] | None:
    """(folder of go.mod, module path) for the file, searching up to its root."""
    root = workspace.root_of(current)
    folder = current.parent
    while root is not None:
        source = workspace.read(folder / "go.mod", MANIFEST)
        if source is not None:
            match = _GO_MODULE.search(source.text)
            return (folder, match.group(1).strip('"')) if match else None
        if folder == root or folder.parent == folder:
            return None
        folder = folder.parent
    return None


def _go_package_files(workspace: Workspace, folder: Path, current: Path) -> list[Path]:
    testing = current.name.endswith("_test.go")
    files = [f for f in workspace.list_dir(folder, (".go",))
             if testing or not f.name.endswith("_test.go")]
    return files[:_PACKAGE_FILES + 1]


def _resolve_go(refs: tuple[ImportRef, ...], current: Path, workspace: Workspace,
                targets: _Targets) -> None:
    module = None
    for ref in targets.live(refs):
        if ref.kind == "go-package":
            for file in _go_package_files(workspace, current.parent, current):
                targets.add(file)
            continue
        module = module or _go_module(workspace, current) or (None, "")
        folder, prefix = module
        if folder is None or not prefix or not ref.module.startswith(prefix + "/"):
            continue
        package = folder.joinpath(*ref.module[len(prefix) + 1 :].split("/"))
        for file in _go_package_files(workspace, package, current)[:_PACKAGE_FILES]:
            targets.add(file, (), ref.aliases)


# Rust ----------------------------------------------------------------------------------------

_MODULE_ROOTS = ("lib.rs", "main.rs", "mod.rs")


def _rust_module_dir(current: Path) -> Path:
    """Where the submodules of the file's own module live."""
    if current.name in _MODULE_ROOTS:
        return current.parent
    return current.parent / current.stem


def _rust_module_file(workspace: Workspace, folder: Path, name: str) -> Path | None:
    return _first_file(workspace, [folder / f"{name}.rs", folder / name / "mod.rs"])


def _rust_crate_src(workspace: Workspace, current: Path) -> Path | None:
    root = workspace.root_of(current)
    folder = current.parent
    while root is not None:
        if workspace.is_file(folder / "Cargo.toml"):
            return folder / "src"
        if folder == root or folder.parent == folder:
            return None
        folder = folder.parent
    return None


def _resolve_rust(refs: tuple[ImportRef, ...], current: Path, workspace: Workspace,
                  targets: _Targets) -> None:
    for ref in targets.live(refs):
        if ref.kind == "rust-mod":
            targets.add(_rust_module_file(workspace, _rust_module_dir(current), ref.module))
            continue
        segments = ref.module.split("::")
        head, rest = segments[0], segments[1:]
        module: Path | None
        if head == "crate":
            folder = _rust_crate_src(workspace, current)
            module = _first_file(workspace, [folder / "lib.rs", folder / "main.rs"]) \
                if folder is not None else None
        elif head == "self":
            folder, module = _rust_module_dir(current), current
        else:  # super: the module whose submodules sit where this file's module sits
            folder = current.parent.parent if current.name in _MODULE_ROOTS else current.parent
            module = _first_file(workspace, [folder / "mod.rs", folder / "lib.rs",
                                             folder / "main.rs", folder.with_suffix(".rs")])
        if folder is None:
            continue
        names: tuple[str, ...] = ()
        for segment in rest:
            found = _rust_module_file(workspace, folder, segment) if segment != "*" else None
            if found is None:
                names = (segment,)
                break
            module, folder = found, folder / segment
        targets.add(module, names, ref.aliases if names else ())


# C / C++ -------------------------------------------------------------------------------------

def _resolve_c(refs: tuple[ImportRef, ...], current: Path, workspace: Workspace,
               targets: _Targets) -> None:
    for ref in targets.live(refs):
        candidates = [current.parent / ref.module] if ref.level else []
        for root in workspace.roots:
            candidates += [root / ref.module, root / "include" / ref.module]
        targets.add(_first_file(workspace, candidates))
    # A source file's own header, included or not (`x.c` and `x.h`).
    if current.suffix in (".c", ".cc", ".cpp", ".cxx"):
        targets.add(_first_file(workspace, [current.with_suffix(e)
                                            for e in (".h", ".hpp", ".hh")]))


# Java ----------------------------------------------------------------------------------------

def _resolve_java(refs: tuple[ImportRef, ...], current: Path, workspace: Workspace,
                  targets: _Targets) -> None:
    package = next((r.module for r in refs if r.kind == "java-package"), "")
    parts = package.split(".") if package else []
    source_root = current.parent
    if parts and list(source_root.parts[-len(parts):]) == parts:
        source_root = Path(*source_root.parts[: -len(parts)])
    # The same package: no import needed, and the classes most likely used.
    for file in workspace.list_dir(current.parent, (".java",))[:_PACKAGE_FILES + 1]:
        targets.add(file)
    for ref in targets.live(refs):
        if ref.kind != "java":
            continue
        segments = ref.module.split(".")
        if ref.names == ("*",):
            folder = source_root.joinpath(*segments)
            for file in workspace.list_dir(folder, (".java",))[:_PACKAGE_FILES]:
                targets.add(file, ("*",))
            continue
        if ref.level:  # `import static a.B.m`: the class is B
            segments = segments[:-1]
        found = _first_file(workspace, [source_root.joinpath(*segments).with_suffix(".java")])
        targets.add(found, (segments[-1],) if segments else ())


_RESOLVERS: dict[str, Callable[[tuple[ImportRef, ...], Path, Workspace, _Targets], None]] = {
    "python": _resolve_python,
    "javascript": _resolve_javascript,
    "go": _resolve_go,
    "rust": _resolve_rust,
    "c": _resolve_c,
    "java": _resolve_java,
}
