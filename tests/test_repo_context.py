"""Repository context: the workspace's rules, import resolution per language, the block, its
place in the prompt, and its KV discipline in the real server (tiny model)."""

from __future__ import annotations

import asyncio
import builtins
import io
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from lsp_complete.context import CodeContext
from lsp_complete.context.imports import extract_imports, resolve_imports
from lsp_complete.context.limits import RepoContext, RepoFile
from lsp_complete.context.outline import file_outline
from lsp_complete.context.repo import (
    _render_entry,
    build_repo_context,
    document_imports,
    line_definitions,
    repo_request,
)
from lsp_complete.context.similar import OpenText
from lsp_complete.documents import Document
from lsp_complete.languages import spec_for
from lsp_complete.models import FimTemplate
from lsp_complete.prompt import SegmentTokenizer, build_prompt
from lsp_complete.workspace import SourceText, Workspace

# --------------------------------------------------------------------------- helpers


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def workspace(root: Path, **kw: Any) -> Workspace:
    ws = Workspace(**kw)
    ws.set_roots([root])
    return ws


def targets(ws: Workspace, path: Path, language: str) -> dict[str, tuple[str, ...]]:
    """Resolved imports of a file: relative path -> names."""
    text = path.read_text()
    spec = spec_for(language)
    assert spec is not None
    data = text.encode()
    tree = spec.parser().parse(data)
    refs = extract_imports(spec, tree.root_node, lambda a, b: data[a:b].decode())
    root = ws.roots[0]
    return {t.path.relative_to(root).as_posix(): t.names
            for t in resolve_imports(refs, path, spec.name, ws)}


def doc_of(path: Path, language: str = "python", text: str | None = None) -> Document:
    return Document(path.as_uri(), language, 1, path.read_text() if text is None else text)


def block_for(ws: Workspace, path: Path, cursor_marker: str | None = None, budget: int = 512,
              previous: RepoContext | None = None, others: tuple[OpenText, ...] = (),
              language: str = "python") -> RepoContext | None:
    doc = doc_of(path, language)
    cursor = doc.text.index(cursor_marker) if cursor_marker else len(doc.text)
    request = repo_request(doc, cursor, budget, others)
    assert request is not None
    return build_repo_context(request, ws, previous)


def block_text(block: RepoContext | None) -> str:
    return "" if block is None else "\n".join(f"## {f.path}\n{f.text}" for f in block.files)


# --------------------------------------------------------------------------- resolution

def test_python_imports_resolve_relative_absolute_packages_and_reexports(tmp_path: Path) -> None:
    write(tmp_path, {
        "app/__init__.py": "",
        "app/core.py": (
            "from .models import User, make_user\n"
            "from . import util\n"
            "from .sub import Thing\n"
            "import app.config\n"
            "from app.models import ROLE\n"
            "from ..outside import nope\n"
            "import os\n"
            "\n\ndef run():\n    pass\n"
        ),
        "app/models.py": "ROLE = 'x'\n\nclass User:\n    name: str\n\ndef make_user(n): ...\n",
        "app/util.py": "def helper(): ...\n",
        "app/config.py": "DEBUG = True\n",
        "app/sub/__init__.py": "from .impl import Thing\n",
        "app/sub/impl.py": "class Thing:\n    def go(self, speed): ...\n",
    })
    ws = workspace(tmp_path)
    found = targets(ws, tmp_path / "app/core.py", "python")
    assert found["app/models.py"] == ("User", "make_user", "ROLE")
    assert found["app/util.py"] == ()  # `from . import util`: the module itself
    assert found["app/sub/__init__.py"] == ("Thing",)
    assert found["app/config.py"] == ()
    assert not any("outside" in p or p.startswith("os") for p in found)
    # The block follows the re-export in sub/__init__.py to where Thing is defined.
    text = block_text(block_for(ws, tmp_path / "app/core.py", "pass"))
    assert "class Thing:" in text and "def go(self, speed)" in text
    assert "class User:" in text and "name: str" in text and "def make_user(n)" in text


def test_javascript_and_typescript_imports_resolve(tmp_path: Path) -> None:
    write(tmp_path, {
        "src/main.ts": (
            "import { add } from './math';\n"
            "import util from '../lib/util.js';\n"
            "import * as widgets from './widgets';\n"
            "export { thing } from './thing';\n"
            "const legacy = require('./legacy');\n"
            "import fs from 'fs';\n"
        ),
        "src/math.ts": "export function add(a: number, b: number): number { return a + b; }\n",
        "lib/util.ts": "export default function util() {}\n",
        "src/widgets/index.tsx": "export const Button = () => null;\n",
        "src/thing.mjs": "export const thing = 1;\n",
        "src/legacy.js": "module.exports = { old: 1 };\n",
    })
    found = targets(workspace(tmp_path), tmp_path / "src/main.ts", "typescript")
    assert set(found) == {"src/math.ts", "lib/util.ts", "src/widgets/index.tsx",
                          "src/thing.mjs", "src/legacy.js"}
    assert found["src/math.ts"] == ("add",)


def test_go_same_package_and_module_imports_resolve(tmp_path: Path) -> None:
    write(tmp_path, {
        "go.mod": "module example.com/shop\n\ngo 1.22\n",
        "cart/cart.go": ('package cart\n\nimport (\n\t"fmt"\n\tm "example.com/shop/money"\n)\n'
                         "\nfunc Total() m.Amount { fmt.Println(); return 0 }\n"),
        "cart/item.go": "package cart\n\ntype Item struct {\n\tName string\n}\n",
        "cart/cart_test.go": "package cart\n",
        "money/money.go": "package money\n\ntype Amount int\n",
        "money/money_test.go": "package money\n",
    })
    found = targets(workspace(tmp_path), tmp_path / "cart/cart.go", "go")
    assert set(found) == {"cart/item.go", "money/money.go"}


def test_rust_mod_and_use_paths_resolve(tmp_path: Path) -> None:
    write(tmp_path, {
        "Cargo.toml": "[package]\nname = \"x\"\n",
        "src/lib.rs": "mod shapes;\nmod util;\npub use crate::shapes::Circle;\n",
        "src/shapes.rs": "mod round;\nuse super::util::clamp;\npub struct Circle { r: f64 }\n",
        "src/shapes/round.rs": "pub fn area(r: f64) -> f64 { r * r }\n",
        "src/util/mod.rs": "pub fn clamp(x: f64) -> f64 { x }\n",
    })
    ws = workspace(tmp_path)
    assert targets(ws, tmp_path / "src/lib.rs", "rust") == {
        "src/shapes.rs": ("Circle",), "src/util/mod.rs": ()}
    assert targets(ws, tmp_path / "src/shapes.rs", "rust") == {
        "src/shapes/round.rs": (), "src/util/mod.rs": ("clamp",)}


def test_c_includes_resolve_next_to_the_file_then_the_roots(tmp_path: Path) -> None:
    write(tmp_path, {
        "src/main.c": '#include "util.h"\n#include "api/types.h"\n#include <stdio.h>\n',
        "src/util.h": "int twice(int x);\n",
        "include/api/types.h": "typedef struct { int id; } record;\n",
        "src/main.h": "void run(void);\n",
    })
    found = targets(workspace(tmp_path), tmp_path / "src/main.c", "c")
    assert set(found) == {"src/util.h", "include/api/types.h", "src/main.h"}


def test_java_same_package_and_imports_resolve(tmp_path: Path) -> None:
    base = "src/main/java/com/ex"
    write(tmp_path, {
        f"{base}/app/App.java": ("package com.ex.app;\n\nimport com.ex.util.Strings;\n"
                                 "import static com.ex.util.Maths.square;\n"
                                 "import com.ex.model.*;\n\nclass App {}\n"),
        f"{base}/app/Config.java": "package com.ex.app;\nclass Config {}\n",
        f"{base}/util/Strings.java": "package com.ex.util;\npublic class Strings {}\n",
        f"{base}/util/Maths.java": "package com.ex.util;\npublic class Maths {}\n",
        f"{base}/model/User.java": "package com.ex.model;\npublic class User {}\n",
    })
    found = targets(workspace(tmp_path), tmp_path / f"{base}/app/App.java", "java")
    assert set(found) == {f"{base}/{p}" for p in (
        "app/Config.java", "util/Strings.java", "util/Maths.java", "model/User.java")}


# --------------------------------------------------------------------------- workspace rules

def test_nothing_outside_the_roots_is_read(tmp_path: Path, monkeypatch) -> None:
    root, outside = tmp_path / "project", tmp_path / "secret"
    write(outside, {"keys.py": "API_KEY = 'hunter2'\n", "keys.h": "#define KEY 42\n"})
    write(root, {
        "pkg/__init__.py": "",
        "pkg/a.py": ("from .linked import API_KEY\nfrom ... import secret\n"
                     "from ..secret.keys import API_KEY as K\n\n\ndef f():\n    pass\n"),
        "pkg/a.c": '#include "../../secret/keys.h"\n#include "/etc/hostname"\n',
    })
    (root / "pkg/linked.py").symlink_to(outside / "keys.py")  # a symlink out of the root
    (root / "pkg/linkdir").symlink_to(outside, target_is_directory=True)

    touched: list[str] = []
    real_open, real_scandir = builtins.open, os.scandir

    def spy_open(file: Any, *args: Any, **kw: Any) -> Any:
        touched.append(os.path.realpath(file))
        return real_open(file, *args, **kw)

    def spy_scandir(path: Any = ".") -> Any:
        touched.append(os.path.realpath(path))
        return real_scandir(path)

    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(io, "open", spy_open)
    monkeypatch.setattr(os, "scandir", spy_scandir)
    ws = workspace(root)
    text = block_text(block_for(ws, root / "pkg/a.py", "pass"))
    assert ws.read(root / "pkg/linked.py") is None
    assert ws.read(root / "pkg/linkdir/keys.py") is None
    assert ws.read(root / "pkg/../../secret/keys.py") is None
    assert targets(ws, root / "pkg/a.c", "c") == {}
    monkeypatch.setattr(builtins, "open", real_open)
    monkeypatch.setattr(io, "open", real_open)
    monkeypatch.setattr(os, "scandir", real_scandir)
    assert "hunter2" not in text
    real_root = os.path.realpath(root)
    assert touched and all(p.startswith(real_root + os.sep) for p in touched), touched


def test_ignored_binary_and_oversized_files_are_skipped(tmp_path: Path) -> None:
    write(tmp_path, {
        ".gitignore": "build/\n*.gen.py\n",
        "pkg/__init__.py": "",
        "pkg/.gitignore": "local_*.py\n!local_keep.py\n",
        "pkg/a.py": ("from .generated import A\nfrom .local_conf import B\n"
                     "from .local_keep import C\nfrom .big import D\nfrom .blob import E\n"
                     "from build.out import F\nfrom .ok import G\n"),
        "pkg/generated.py": "A = 1\n",
        "pkg/generated.gen.py": "A = 1\n",
        "pkg/local_conf.py": "B = 1\n",
        "pkg/local_keep.py": "C = 1\n",
        "pkg/big.py": "D = 1\n" + "# padding\n" * 2000,
        "build/out.py": "F = 1\n",
        "pkg/ok.py": "G = 1\n",
        ".git/config.py": "X = 1\n",
    })
    (tmp_path / "pkg/blob.py").write_bytes(b"E = 1\n\x00\x01\x02binary")
    ws = workspace(tmp_path, max_file_bytes=4096)
    assert ws.read(tmp_path / "pkg/generated.gen.py") is None
    assert ws.read(tmp_path / "pkg/local_conf.py") is None  # nested .gitignore
    assert ws.read(tmp_path / "pkg/local_keep.py") is not None  # re-included by "!"
    assert ws.read(tmp_path / "build/out.py") is None  # an ignored folder
    assert ws.read(tmp_path / ".git/config.py") is None
    assert ws.read(tmp_path / "pkg/big.py") is None  # over the size cap
    assert ws.read(tmp_path / "pkg/blob.py") is None  # binary
    block = block_for(ws, tmp_path / "pkg/a.py")
    assert block is not None
    assert {f.path for f in block.files} == {"pkg/generated.py", "pkg/local_keep.py",
                                             "pkg/ok.py"}


def test_the_open_buffer_wins_over_the_disk(tmp_path: Path) -> None:
    write(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "from .b import f\n\nx = f(",
                     "pkg/b.py": "def f(on_disk): ...\n"})
    ws = workspace(tmp_path)
    buffer = (7, "def f(in_the_editor, unsaved=True): ...\n")
    ws.buffers = lambda p: buffer if p == (tmp_path / "pkg/b.py").resolve() else None
    text = block_text(block_for(ws, tmp_path / "pkg/a.py"))
    assert "in_the_editor, unsaved=True" in text and "on_disk" not in text


# --------------------------------------------------------------------------- the block

def test_outlines_show_what_calling_the_code_needs(tmp_path: Path) -> None:
    write(tmp_path, {"m.py": (
        '"""Shapes and sizes."""\nimport math\n\nMAX_SIDES = 12\n__all__ = ["Shape"]\n\n\n'
        "class Shape:\n    \"\"\"A polygon.\n\n    More words.\n    \"\"\"\n    sides: int = 3\n\n"
        "    def __init__(self, sides: int, *, name: str = '') -> None:\n"
        "        self.sides = sides\n\n"
        "    def area(self, scale=1.0):\n        \"\"\"The area, scaled.\"\"\"\n"
        "        return math.pi * scale\n\n\n"
        "def build(kind: str, **options) -> Shape:\n    return Shape(3)\n"
    )})
    outline = file_outline(workspace(tmp_path).read(tmp_path / "m.py"))
    assert outline is not None
    text = "\n".join(e.text + "".join("\n" + m.text for m in e.members)
                     for e in outline.entries)
    for expected in ('"""Shapes and sizes."""', "MAX_SIDES = 12", "class Shape:",
                     '    """A polygon."""', "    sides: int = 3",
                     "    def __init__(self, sides: int, *, name: str = '') -> None: ...",
                     "    def area(self, scale=1.0):\n        \"\"\"The area, scaled.\"\"\"",
                     "def build(kind: str, **options) -> Shape: ..."):
        assert expected in text
    assert "__all__" not in text and "import math" not in text and "math.pi" not in text


@pytest.mark.parametrize("name, source, expected", [
    ("a.go", "package shop\n\ntype Cart struct {\n\tItems []string\n}\n\n// Add puts one.\n"
     "func (c *Cart) Add(it string) error {\n\treturn nil\n}\n",
     ["type Cart struct {\n\tItems []string\n}", "// Add puts one.",
      "func (c *Cart) Add(it string) error { ... }"]),
    ("a.rs", "pub struct Circle { pub r: f64 }\nimpl Circle {\n    /// Area.\n"
     "    pub fn area(&self) -> f64 { 3.0 * self.r }\n}\n",
     ["pub struct Circle { pub r: f64 }", "impl Circle {\n    // Area.\n"
      "    pub fn area(&self) -> f64 { ... }\n}"]),
    ("a.ts", "/** Adds. */\nexport function add(a: number): number { return a; }\n"
     "export class Store {\n  constructor(public name: string) {}\n  put(x: number): void {}\n}\n",
     ["// Adds.\nexport function add(a: number): number { ... }",
      "export class Store {\n  constructor(public name: string) { ... }\n"
      "  put(x: number): void { ... }\n}"]),
    ("A.java", "/** A user. */\npublic class User {\n    private String name;\n"
     "    public String getName() { return name; }\n}\n",
     ["// A user.\npublic class User {\n    private String name;\n"
      "    public String getName() { ... }\n}"]),
    ("a.h", "#define MAX_LEN 32\ndouble distance(int a, int b);\n"
     "static int twice(int x) { return 2 * x; }\n",
     ["#define MAX_LEN 32", "double distance(int a, int b);", "static int twice(int x) { ... }"]),
])
def test_outlines_in_other_languages(tmp_path: Path, name: str, source: str,
                                     expected: list[str]) -> None:
    write(tmp_path, {name: source})
    outline = file_outline(workspace(tmp_path).read(tmp_path / name))
    assert outline is not None
    text = "\n".join(_render_entry(e, set(range(len(e.members)))) for e in outline.entries)
    for part in expected:
        assert part in text


def test_over_budget_the_names_used_near_the_cursor_come_first(tmp_path: Path) -> None:
    many = "".join(f"def function_{i}(argument_{i}, other_{i}):\n    pass\n\n" for i in range(60))
    write(tmp_path, {"pkg/__init__.py": "", "pkg/lib.py": many + "def wanted(x, y): ...\n",
                     "pkg/a.py": "from . import lib\n\n\ndef f():\n    return lib.wanted(1, 2)\n"})
    text = block_text(block_for(workspace(tmp_path), tmp_path / "pkg/a.py", budget=120))
    assert "def wanted(x, y)" in text
    assert text.count("def function_") < 20


def test_the_block_stays_the_same_object_until_imports_or_files_change(tmp_path: Path) -> None:
    write(tmp_path, {"pkg/__init__.py": "", "pkg/b.py": "def f(x): ...\n",
                     "pkg/c.py": "def g(y): ...\n",
                     "pkg/a.py": "from .b import f\n\n\ndef main():\n    value = 1\n"})
    ws = workspace(tmp_path)
    a = tmp_path / "pkg/a.py"
    first = block_for(ws, a)
    assert first is not None and [f.path for f in first.files] == ["pkg/b.py"]
    # Typing in a body: same imports, same files -> the very same block.
    doc = doc_of(a)
    for typed in ("    value = f(", "    value = f(value) + 1\n    return value\n"):
        text = doc.text + typed
        typed_doc = Document(a.as_uri(), "python", 2, text)
        again = build_repo_context(repo_request(typed_doc, len(text), 512), ws, first)
        assert again is first
    # An import edit changes it.
    changed = Document(a.as_uri(), "python", 3, "from .c import g\n" + doc.text)
    other = build_repo_context(repo_request(changed, len(changed.text), 512), ws, first)
    assert other is not first and [f.path for f in other.files] == ["pkg/b.py", "pkg/c.py"] \
        or [f.path for f in other.files] == ["pkg/c.py", "pkg/b.py"]
    # A deleted file drops out once the workspace hears of it.
    (tmp_path / "pkg/c.py").unlink()
    ws.invalidate(tmp_path / "pkg/gone.py", tmp_path / "pkg/c.py")  # as a checkout reports them
    gone = build_repo_context(repo_request(changed, len(changed.text), 512), ws, other)
    assert [f.path for f in gone.files] == ["pkg/b.py"]


def test_what_the_cursor_line_calls_is_shown_whole_and_only_that_changes_it(
    tmp_path: Path,
) -> None:
    def members(name: str) -> str:
        return "".join(f"    def {name}_{i}(self, value_{i}): ...\n" for i in range(12))

    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/big.py": f"class Big:\n{members('big')}\n\nclass Other:\n{members('other')}\n",
        "pkg/a.py": "from .big import Big, Other\n\n\ndef f(x):\n    y = 1\n    return x\n",
    })
    ws, a = workspace(tmp_path), tmp_path / "pkg/a.py"
    text = a.read_text()

    def block_at(line_text: str, previous: RepoContext | None) -> RepoContext | None:
        typed = text.replace("    y = 1\n", line_text + "\n")
        doc = Document(a.as_uri(), "python", 2, typed)
        request = repo_request(doc, typed.index(line_text) + len(line_text), 256)
        return build_repo_context(request, ws, previous)

    first = block_at("    y = 1", None)
    assert first is not None and "other_11" not in block_text(first)
    # Typing a line that calls nothing imported: the same block.
    assert block_at("    y = compute(x) + 2", first) is first
    # The cursor's line calls Other.: Other is shown whole (in idle time, at re-anchoring).
    called = block_at("    y = Other.", first)
    assert called is not first
    shown = block_text(called)
    assert "class Other:" in shown and "def other_11(self, value_11)" in shown
    # Still calling Other, or nothing: no change.
    assert block_at("    y = Other.other_3(x) + Other.", called) is called
    assert block_at("    y = 2", called) is called


def test_the_lines_definitions_are_what_it_names_and_only_that(tmp_path: Path) -> None:
    """`line_definitions`: a file asked before it has a block gets the definitions its line
    names from the files it imports, whole, and nothing else (None when it names none)."""
    def members(name: str) -> str:
        return "".join(f"    def {name}_{i}(self, value_{i}): ...\n" for i in range(12))

    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/big.py": f"class Big:\n{members('big')}\n\nclass Other:\n{members('other')}\n"
                      "\n\ndef unrelated(a, b):\n    return a\n",
        "pkg/util.py": "LIMIT = 3\n\n\ndef clamp(value, low=0):\n    return max(value, low)\n",
        "pkg/a.py": "from .big import Big, Other\nfrom . import util\n\n\ndef f(x):\n"
                    "    y = 1\n    return x\n",
    })
    ws, a = workspace(tmp_path), tmp_path / "pkg/a.py"
    text = a.read_text()

    def line_block(line_text: str) -> RepoContext | None:
        typed = text.replace("    y = 1\n", line_text + "\n")
        doc = Document(a.as_uri(), "python", 2, typed)
        request = repo_request(doc, typed.index(line_text) + len(line_text), 192)
        assert request is not None
        return line_definitions(request, ws)

    assert line_block("    y = 1") is None
    assert line_block("    y = compute(x)") is None  # names nothing the imports define
    called = line_block("    y = Other.")
    assert called is not None and called.cold
    shown = block_text(called)
    assert "class Other:" in shown and "def other_11(self, value_11)" in shown
    assert "class Big" not in shown and "unrelated" not in shown and "util" not in shown
    assert {f.source for f in called.files} == {"line"}
    # A module named on the line (`util.`): its top-level definitions.
    module = block_text(line_block("    y = util."))
    assert "def clamp(value, low=0)" in module and "LIMIT" in module and "Other" not in module


def test_a_required_module_is_named_by_what_it_is_bound_to(tmp_path: Path) -> None:
    """CommonJS (and what TypeScript compiles to): `const m = require('./m')` binds the whole
    module to `m`, as `import * as m` does, so a line naming `m.` gets m's definitions;
    `const {a, b: c} = require(...)` binds names."""
    text = ("const m = require('./m');\n"
            "const d = __importDefault(require('./d'));\n"
            "const { parse, format: show } = require('./n');\n"
            "require('./side-effect');\n"
            "function f(x) {\n    return m.\n}\n")
    write(tmp_path, {"a.js": text, "m.js": "class Widget {\n  constructor(size) {}\n}\n"
                     "exports.Widget = Widget;\n", "d.js": "", "n.js": "",
                     "side-effect.js": ""})
    doc = doc_of(tmp_path / "a.js", "javascript")
    refs = {r.module: (r.names, r.aliases) for r in document_imports(doc)}
    assert refs == {"./m": ((), ("m",)), "./d": ((), ("d",)),
                    "./n": (("parse", "format"), ("parse", "show")), "./side-effect": ((), ())}
    request = repo_request(doc, text.index("m.\n") + 2, 192)
    assert request is not None
    block = line_definitions(request, workspace(tmp_path))
    assert block is not None and "class Widget" in block_text(block)
    assert "constructor(size)" in block_text(block)


def test_similar_code_from_other_open_files(tmp_path: Path) -> None:
    shared = "".join(f"    record_{i} = parse_record(stream, schema_{i}, strict=True)\n"
                     for i in range(8))
    write(tmp_path, {
        "a.py": "def load(stream):\n" + shared[:300] + "    ",
        "b.py": "import os\n\n" * 40 + "def other(stream):\n" + shared + "    return 1\n",
        "c.py": "def unrelated():\n    return 42\n",
    })
    ws = workspace(tmp_path)
    others = (OpenText((tmp_path / "b.py").as_uri(), (81,)), OpenText((tmp_path / "c.py").as_uri()))
    block = block_for(ws, tmp_path / "a.py", others=others)
    assert block is not None
    assert [(f.path, f.source) for f in block.files] == [("b.py", "similar")]
    assert "record_7 = parse_record(stream, schema_7" in block.files[0].text
    # Nothing better came: the same picks, the same block.
    assert block_for(ws, tmp_path / "a.py", others=others, previous=block) is block


@pytest.mark.parametrize("line_break", ["\r\n", "\r"])
def test_similar_code_of_a_file_of_other_line_breaks_is_its_lf_twins(
        tmp_path: Path, line_break: str) -> None:
    # An open file's lines were split at "\n" only: a lone-CR file was one line (the window
    # the whole file, the edited line's window missed), and a CRLF file's lines kept "\r".
    shared = "".join(f"    record_{i} = parse_record(stream, schema_{i}, strict=True)\n"
                     for i in range(8))
    other = "import os\n\n" * 40 + "def other(stream):\n" + shared + "    return 1\n"
    other += "".join(f"def tail_{i}():\n    return {i}\n" for i in range(60))

    def shown(text: str) -> str:
        # b.py is open: its buffer's text as the client sent it (disk reads are normalized).
        write(tmp_path, {"a.py": "def load(stream):\n" + shared[:300] + "    ", "b.py": ""})
        ws = workspace(tmp_path)
        ws.buffers = lambda path: (1, text) if path.name == "b.py" else None
        block = block_for(ws, tmp_path / "a.py",
                          others=(OpenText((tmp_path / "b.py").as_uri(), (81,)),))
        assert block is not None
        return block.files[0].text

    assert shown(other.replace("\n", line_break)) == shown(other)


def test_document_imports_ignore_a_half_typed_import(tmp_path: Path) -> None:
    text = "from .b import f\nfrom .c imp\n\nx = 1\n"
    doc = Document((tmp_path / "a.py").as_uri(), "python", 1, text)
    assert [r.module for r in document_imports(doc)] == ["b"]


# --------------------------------------------------------------------------- the prompt

FIM = FimTemplate(prefix="<P>", suffix="<S>", middle="<M>", file_sep="<F>", repo_name="<R>")
MARKERS = {"<P>": 1, "<S>": 2, "<M>": 3, "<F>": 4, "<R>": 5}


def tokenize(text: str, special: bool = False) -> list[int]:
    if special:
        return [MARKERS[text]]
    return [ord(ch) + 16 for ch in text]


def detokenize(tokens: list[int]) -> str:
    return "".join(f"<{t}>" if t < 16 else chr(t - 16) for t in tokens)


REPO = RepoContext("shop", "pkg/a.py",
                   (RepoFile("pkg/b.py", "def f(x): ...  # <F>", "definitions"),))


def ctx(repo: RepoContext | None) -> CodeContext:
    return CodeContext(path="a.py", language_id="python", head="import os\n",
                       before="x = 1\n", suffix="\n", middle="y = f(", anchor=0, repo=repo)


def test_the_repository_block_is_the_first_segment_in_the_models_format() -> None:
    prompt = build_prompt(ctx(REPO), FIM, SegmentTokenizer(tokenize), detokenize, 10_000)
    assert detokenize(prompt.segments[0]) == (
        "<5>shop\n<4>pkg/b.py\ndef f(x): ...  # <F>\n<4>pkg/a.py\n")
    # A file's text that spells a marker is text, never the marker token.
    assert prompt.segments[0].count(4) == 2
    assert prompt.segments[1][0] == 1  # then <fim_prefix>
    assert prompt.repo_tokens == len(prompt.segments[0]) and prompt.repo_segments == 1
    plain = build_prompt(ctx(None), FIM, SegmentTokenizer(tokenize), detokenize, 10_000)
    assert prompt.segments[1:] == plain.segments and plain.repo_tokens == 0


def test_templates_without_a_repository_format_get_commented_path_blocks() -> None:
    fim = FimTemplate(prefix="<P>", suffix="<S>", middle="<M>")
    prompt = build_prompt(ctx(REPO), fim, SegmentTokenizer(tokenize), detokenize, 10_000)
    assert detokenize(prompt.segments[0]).startswith(
        "<1># Path: pkg/b.py\n# def f(x): ...  # <F>\n\nimport os\n")
    assert prompt.repo_segments == 0


# --------------------------------------------------------------------------- the server

A_TEXT = "from .b import helper, Thing\n\n\ndef main():\n    value = 1\n    \n    return value\n"
B_TEXT = ('"""Helpers."""\nLIMIT = 10\n\n\ndef helper(x, y=2):\n    """Add two numbers."""\n'
          "    return x + y\n\n\nclass Thing:\n    size: int = 0\n\n"
          "    def grow(self, by):\n        self.size += by\n")
C_TEXT = "def other(flag):\n    return not flag\n"


class Harness:
    """The real server in this process (its protocol fed messages directly) on the tiny
    model; each prompt the engine computes is recorded."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.sent: list[dict[str, Any]] = []
        self.requests: list[tuple[list[int], int]] = []  # (segment 0, tokens encoded)
        protocol = server.protocol
        protocol.set_writer(type("W", (), {"write": lambda _s, d: self._out(d),
                                           "close": lambda _s: None})())

    def _out(self, data: bytes) -> None:
        self.sent.append(json.loads(data.split(b"\r\n\r\n", 1)[1]))

    def deliver(self, message: dict[str, Any]) -> None:
        protocol = self.server.protocol
        protocol.handle_message(json.loads(json.dumps({"jsonrpc": "2.0", **message}),
                                           object_hook=protocol.structure_message))

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.deliver({"method": method, "params": params})

    async def start(self, root: Path, capabilities: dict[str, Any] | None = None) -> None:
        self.deliver({"id": "init", "method": "initialize", "params": {
            "processId": None, "rootUri": root.as_uri(), "capabilities": capabilities or {},
            "initializationOptions": {"threads": 1, "contextSize": 8192,
                                      "repoContextTokens": 256, "idleReanchorMs": 30,
                                      "maxTokens": 4, "multiline": "never"}}})
        await asyncio.sleep(0.05)
        self.notify("initialized", {})
        await until(lambda: self.server.model.state != "loading", 60)
        assert self.server.model.state == "ready", self.server.model.error
        engine = self.server.model.completer.engine
        complete = engine.complete

        def recorded(request: Any, cancel: Any) -> Any:
            result = complete(request, cancel)
            self.requests.append((list(request.segments[0]), result.encoded_tokens))
            return result

        engine.complete = recorded

    def open(self, path: Path, text: str) -> str:
        uri = path.as_uri()
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": text}})
        return uri

    def insert(self, uri: str, version: int, line: int, character: int, text: str) -> None:
        position = {"line": line, "character": character}
        self.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": position, "end": position}, "text": text}]})

    async def suggest(self, uri: str, line: int, character: int) -> None:
        await self.server.suggester.suggestion(uri, types.Position(line=line,
                                                                   character=character))

    def block(self, uri: str) -> RepoContext | None:
        return self.server.repo.active_for(uri)

    def stop(self) -> None:
        self.server.scheduler.stop()


async def until(condition: Any, timeout: float) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": A_TEXT, "pkg/b.py": B_TEXT,
                     "pkg/c.py": C_TEXT})
    return tmp_path


@pytest.fixture
async def harness(tiny_model_path: Path, monkeypatch) -> Any:
    from lsp_complete.server import create_server

    made = Harness(create_server(str(tiny_model_path)))
    yield made
    made.stop()


async def test_typing_never_changes_the_repository_segment_an_import_edit_does(
    harness: Harness, project: Path
) -> None:
    await harness.start(project)
    uri = harness.open(project / "pkg/a.py", A_TEXT)
    await harness.suggest(uri, 5, 4)
    assert await until(lambda: harness.block(uri) is not None, 30), "idle work brings the block"
    block = harness.block(uri)
    assert [f.path for f in block.files] == ["pkg/b.py"]
    assert "def helper(x, y=2):" in block.files[0].text
    described = harness.server.repo.describe(uri)
    assert described["files"][0]["path"] == "pkg/b.py" and described["tokens"] > 0

    # Type a line in the body, one character at a time, with pauses for idle work between.
    start = len(harness.requests)
    version = 2
    for i, ch in enumerate("result = helper(value, 3)"):
        harness.insert(uri, version, 5, 4 + i, ch)
        version += 1
        await harness.suggest(uri, 5, 5 + i)
        if i % 6 == 5:
            await asyncio.sleep(0.3)  # re-anchoring in idle time
    typed = harness.requests[start:]
    assert len(typed) >= 10
    first = typed[0][0]
    assert first[0] == harness.server.model.completer.engine.tokenize("<|repo_name|>", True)[0]
    assert all(segment == first for segment, _ in typed)  # token by token, every keystroke
    assert harness.block(uri) is block

    # An import edit: keystrokes right after it keep the old segment; idle work builds the new
    # prompt aside, and the first keystroke with the new block encodes only what it typed.
    harness.insert(uri, version, 1, 0, "from .c import other\n")
    version += 1
    before_idle = len(harness.requests)
    await harness.suggest(uri, 6, 29)
    assert harness.requests[before_idle][0] == first
    assert await until(lambda: harness.block(uri) is not block, 30)
    new_block = harness.block(uri)
    assert sorted(f.path for f in new_block.files) == ["pkg/b.py", "pkg/c.py"]
    await until(lambda: harness.server.scheduler.idle, 30)
    harness.insert(uri, version, 6, 29, " ")
    after = len(harness.requests)
    await harness.suggest(uri, 6, 30)
    segment, encoded = harness.requests[after]
    assert segment != first and "c.py" in harness.server.model.completer.engine.detokenize(
        segment)
    assert encoded <= 8, encoded


async def test_a_file_asked_at_open_gets_what_its_line_names_then_its_whole_block(
    harness: Harness, project: Path
) -> None:
    """Asked at open, before any answer (a generic client asks at once, or after a pause
    with no keystroke): the definitions the cursor's line names are built for that first
    prompt, small as it is; after the answer, idle work brings the file's whole block."""
    text = A_TEXT.replace("    \n", "    value = helper(\n")
    await harness.start(project)
    uri = harness.open(project / "pkg/a.py", text)
    await harness.suggest(uri, 5, len("    value = helper("))
    detokenize = harness.server.model.completer.engine.detokenize
    first_prompt = detokenize(harness.requests[0][0])
    assert "def helper(x, y=2):" in first_prompt and "class Thing" not in first_prompt
    assert harness.server.repo.describe(uri)["sources"] == ["line"]
    assert await until(
        lambda: (harness.server.repo.describe(uri) or {}).get("sources") == ["definitions"], 30)
    assert "class Thing" in block_text(harness.block(uri))


async def test_a_resting_cursor_prepares_what_its_line_names_for_the_first_key(
    harness: Harness, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cursor at rest, before the file's first answer: the look builds the definitions the
    line names, not the whole block (that waits for an answer: a rest while reading would
    pay for it), and encodes the prompt a request there is given, with them. A look that
    encoded it without them left the request, given them, to encode its whole prompt again.
    The request does not look them up again (tens of ms before its answer)."""
    import lsp_complete.server.repo as host

    lookups: list[str] = []

    def counted(request: Any, *args: Any) -> Any:
        lookups.append(request.uri)
        return line_definitions(request, *args)

    monkeypatch.setattr(host, "line_definitions", counted)
    text = A_TEXT.replace("    \n", "    value = helper(\n")
    await harness.start(project)
    uri = harness.open(project / "pkg/a.py", text)
    column = len("    value = helper(")
    harness.notify("lsp-complete/didMoveCursor", {
        "textDocument": {"uri": uri}, "position": {"line": 5, "character": column}})
    assert await until(lambda: (harness.server.repo.describe(uri) or {}).get("sources")
                       == ["line"], 30)
    assert await until(lambda: harness.server.scheduler.idle, 30)
    await harness.suggest(uri, 5, column)
    segment, encoded = harness.requests[0]
    assert "def helper(x, y=2):" in harness.server.model.completer.engine.detokenize(segment)
    assert encoded <= 2, encoded
    assert lookups == [uri]


async def test_a_rest_on_another_line_before_the_first_answer_brings_that_lines_block(
    harness: Harness, project: Path
) -> None:
    """A person reads before typing: rests on a line naming one import, then on a line naming
    another, and types there. The first key is given what its own line names, prepared by the
    rest there, not the block of the first line. A rest on a line that names nothing the
    imports define, or only what the block shows, keeps the block there is."""
    text = ("from .b import helper\nfrom .c import other\n\n\ndef main():\n"
            "    value = helper(\n    flag = other(\n    done = 1\n    both = other(helper(\n"
            "    return value\n")
    await harness.start(project)
    uri = harness.open(project / "pkg/a.py", text)
    lines = text.split("\n")
    scheduler = harness.server.scheduler

    async def rest(line: int) -> str:
        """The cursor rests at the end of `line`: the block once the server is quiet."""
        harness.notify("lsp-complete/didMoveCursor", {"textDocument": {"uri": uri},
                       "position": {"line": line, "character": len(lines[line])}})
        await asyncio.sleep(0.1)
        assert await until(lambda: scheduler.idle, 30)
        return block_text(harness.block(uri))

    assert "def helper(" in await rest(5)
    assert "def helper(" in await rest(7)  # names nothing imported: the block stays
    shown = await rest(6)
    assert "def other(" in shown and "def helper(" not in shown
    assert (harness.server.repo.describe(uri) or {}).get("sources") == ["line"]
    shown = await rest(8)
    assert "def other(" in shown and "def helper(" in shown
    shown = await rest(6)  # names part of what the block shows: it stays
    assert "def other(" in shown and "def helper(" in shown
    await harness.suggest(uri, 6, len(lines[6]))
    segment, encoded = harness.requests[-1]
    assert "def other(flag):" in harness.server.model.completer.engine.detokenize(segment)
    assert encoded <= 2, encoded


async def test_a_line_naming_nothing_imported_gets_no_block_at_open(
    harness: Harness, project: Path
) -> None:
    await harness.start(project)
    uri = harness.open(project / "pkg/a.py", A_TEXT)
    await harness.suggest(uri, 4, len("    value = 1"))
    assert "def helper" not in harness.server.model.completer.engine.detokenize(
        harness.requests[0][0])
    described = harness.server.repo.describe(uri)
    assert described is None or described["sources"] == ["definitions"]  # (idle work's)


async def test_a_save_refreshes_the_files_with_a_block_and_leaves_the_others_alone(
    harness: Harness, project: Path
) -> None:
    """A saved file may be named by the other open files' blocks: a file with a block brings
    it up to date. A file opened only to be read has none, and gets no idle work: its whole
    prompt would be encoded, at offset 0, at every save."""
    await harness.start(project)
    uri = harness.open(project / "pkg/a.py", A_TEXT)
    await harness.suggest(uri, 5, 4)
    assert await until(lambda: "def helper(x, y=2)" in block_text(harness.block(uri)), 30)
    reader = harness.open(project / "pkg/c.py", C_TEXT)
    scheduler = harness.server.scheduler
    assert await until(lambda: scheduler.idle, 30)
    (project / "pkg/b.py").write_text(B_TEXT.replace("def helper(x, y=2):",
                                                     "def helper(x, y=2, *, z=0):"))
    harness.notify("textDocument/didSave", {"textDocument": {
        "uri": (project / "pkg/b.py").as_uri()}})
    assert await until(lambda: "z=0" in block_text(harness.block(uri)), 30)
    assert await until(lambda: scheduler.idle, 30)
    sequences = harness.server.model.completer.engine.describe()["sequences"]
    assert reader not in [s["uri"] for s in sequences], sequences


async def test_deleted_and_renamed_files_drop_out(harness: Harness, project: Path) -> None:
    text = "from .b import helper\nfrom .c import other\n\n\ndef main():\n    \n"
    (project / "pkg/a.py").write_text(text)
    await harness.start(project)
    uri = harness.open(project / "pkg/a.py", text)
    await harness.suggest(uri, 5, 4)
    assert await until(lambda: harness.block(uri) is not None
                       and len(harness.block(uri).files) == 2, 30)
    (project / "pkg/c.py").rename(project / "pkg/renamed.py")
    harness.notify("workspace/didChangeWatchedFiles", {"changes": [
        {"uri": (project / "pkg/c.py").as_uri(), "type": 3},
        {"uri": (project / "pkg/renamed.py").as_uri(), "type": 1}]})
    assert await until(lambda: harness.block(uri) is not None
                       and [f.path for f in harness.block(uri).files] == ["pkg/b.py"], 30)
    (project / "pkg/b.py").unlink()
    harness.notify("workspace/didChangeWatchedFiles", {"changes": [
        {"uri": (project / "pkg/b.py").as_uri(), "type": 3}]})
    assert await until(lambda: harness.block(uri) is None, 30)


async def test_the_watcher_is_registered_when_the_client_can(harness: Harness,
                                                             project: Path) -> None:
    caps = {"workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}}}
    task = asyncio.ensure_future(harness.start(project, caps))
    assert await until(lambda: any(m.get("method") == "client/registerCapability"
                                   for m in harness.sent), 10)
    message = next(m for m in harness.sent if m.get("method") == "client/registerCapability")
    registration = message["params"]["registrations"][0]
    assert registration["method"] == "workspace/didChangeWatchedFiles"
    harness.deliver({"id": message["id"], "result": None})
    await asyncio.wait_for(task, 60)


async def test_a_thousand_folders_added_at_once_are_resolved_once_in_one_trip(
        harness: Harness, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: each folder added resolved every root again, one trip to the I/O thread per
    folder (1,000 folders held the event loop for over a minute)."""
    from lsp_complete import workspace as ws_module

    await harness.start(project)
    added = [project / "more" / f"d{i}" for i in range(1000)]
    for folder in added:
        folder.mkdir(parents=True)
    loop = threading.get_ident()
    trips = resolved = 0
    io_call, real = ws_module.io_call, ws_module._real

    def counted_trip(*args: Any, **kw: Any) -> Any:
        nonlocal trips
        trips += threading.get_ident() == loop
        return io_call(*args, **kw)

    def counted_real(path: Path) -> Path:
        nonlocal resolved
        resolved += 1
        if resolved > 10 * len(added):  # the quadratic path: stop it rather than wait
            raise RuntimeError("every root resolved again")
        return real(path)

    monkeypatch.setattr(ws_module, "io_call", counted_trip)
    monkeypatch.setattr(ws_module, "_real", counted_real)
    harness.notify("workspace/didChangeWorkspaceFolders", {"event": {
        "added": [{"uri": f.as_uri(), "name": f.name} for f in added],
        "removed": [{"uri": project.as_uri(), "name": "project"}]}})
    assert (trips, resolved) == (1, 1001)  # the root removed, and each folder added, once
    harness.deliver({"id": "status", "method": "lsp-complete/status", "params": {}})
    assert await until(lambda: any(m.get("id") == "status" for m in harness.sent), 30)
    answer = next(m for m in harness.sent if m.get("id") == "status")
    assert answer["result"]["repository"]["roots"] == [str(f) for f in added]


@pytest.mark.parametrize("name, language", [("m.py", "python"), ("a.go", "go")])
@pytest.mark.parametrize("line_break", ["\r\n", "\r"])
def test_a_workspace_file_outlines_as_its_lf_twin_whatever_its_line_breaks(
        tmp_path: Path, name: str, language: str, line_break: str) -> None:
    # Read from disk as it is: tree-sitter breaks lines at "\n" only, so a lone-CR file came
    # out as a statement or two, and a CRLF one put "\r" into every line the prompt shows.
    text = {"m.py": "import math\n\nMAX = 3\n\n\nclass Shape:\n    sides: int = 3\n\n"
                    "    def area(self, scale=1.0):\n        return math.pi * scale\n\n\n"
                    "def build(kind: str) -> Shape:\n    return Shape()\n",
            "a.go": "package shop\n\ntype Cart struct {\n\tItems []string\n}\n\n"
                    "func (c *Cart) Add(it string) error {\n\treturn nil\n}\n"}[name]

    def outline(source: str) -> object:  # an open file's buffer, as the client sent it
        write(tmp_path, {name: ""})
        ws = workspace(tmp_path)
        ws.buffers = lambda path: (1, source) if path.name == name else None
        read = ws.read(tmp_path / name)
        assert read is not None
        return file_outline(read)

    assert outline(text.replace("\n", line_break)) == outline(text)


def test_commonjs_exports_are_definitions(tmp_path: Path) -> None:
    """Compiled TypeScript and Babel output define what a module exports by assignment."""
    text = ('"use strict";\n'
            'exports.ROOT = exports.PSEUDO = void 0;\n'
            'exports.PSEUDO = "pseudo";\n'
            'exports.ROOT = "root";\n'
            'function verify(entry) {\n  return entry;\n}\n'
            'exports.verify = verify;\n'
            'module.exports.MAX = 256;\n'
            'module.exports = { verify, parse: (x) => x, check(y) { return y; } };\n')
    outline = file_outline(SourceText(path=tmp_path / "types.js", root=tmp_path, text=text,
                                           language_id="javascript", version=(1,)))
    assert outline is not None
    names = [entry.names for entry in outline.entries]
    assert names == [("PSEUDO",), ("ROOT",), ("verify",), ("MAX",),
                     ("verify", "parse", "check")]


def _closed_during_check(close: Any) -> Any:
    """The open files, where a close lands (on another thread, as the event loop's would)
    at the moment the worker's apply looks the file up."""
    import threading

    from lsp_complete.server.open_file import OpenFileRegistry
    from lsp_complete.typeahead import TypeAhead

    class ClosedDuringCheck(OpenFileRegistry):
        thread: threading.Thread

        def holds(self, file: Any) -> bool:
            found = super().holds(file)
            nonlocal close
            if close is not None:
                target, close = close, None
                self.thread = threading.Thread(target=target, args=(file.uri,))
                self.thread.start()
                self.thread.join(0.2)  # done at once unless apply holds the registry's lock
            return found

    return ClosedDuringCheck(TypeAhead())


def test_a_close_during_apply_leaves_no_block_for_the_closed_file() -> None:
    """Issue 29: `apply` (worker) checked the file was open, then wrote its block; a close
    (event loop) between the two left a repository block for a closed file."""
    from lsp_complete.config import Settings
    from lsp_complete.pipeline import Switch
    from lsp_complete.server.repo import RepoHost

    uri = "file:///w/a.py"

    def close(key: str) -> None:
        files.close(key)
        host.closed(key)

    files = _closed_during_check(close)
    file = files.open(Document(uri, "python", 1, "import os\n"))
    host = RepoHost(lambda: Settings(), None, files)  # type: ignore[arg-type]
    block = RepoContext("w", "a.py", (RepoFile("b.py", "x = 1\n", "definitions"),))
    host.apply(file, Switch(block, 12))
    files.thread.join(5)
    assert uri not in files and host.active_for(uri) is None and host.describe(uri) is None


def test_a_block_chosen_for_a_file_closed_and_opened_again_is_not_applied() -> None:
    from lsp_complete.config import Settings
    from lsp_complete.pipeline import Switch
    from lsp_complete.server.open_file import OpenFile, OpenFileRegistry
    from lsp_complete.server.repo import RepoHost
    from lsp_complete.typeahead import TypeAhead

    uri = "file:///w/a.py"
    old = OpenFile(Document(uri, "python", 1, "import os\n"))
    files = OpenFileRegistry(TypeAhead())
    new = files.open(Document(uri, "python", 1, "import sys\n"))  # opened again meanwhile
    host = RepoHost(lambda: Settings(), None, files)  # type: ignore[arg-type]
    block = RepoContext("w", "a.py", (RepoFile("b.py", "x = 1\n", "definitions"),))
    host.apply(old, Switch(block, 12))
    assert host.active_for(uri) is None
    host.apply(new, Switch(block, 12))
    assert host.active_for(uri) is block
    described = host.describe(uri)
    assert described is not None and described["tokens"] == 12
