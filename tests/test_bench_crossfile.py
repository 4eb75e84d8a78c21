"""The bench's cross-file lines: how tasks are found and scored (bench/crossfile/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lsp_complete.bench import crossfile, workload

SHAPES = '''"""Shapes."""

UNIT = 1.0


class Circle:
    def __init__(self, radius):
        self.radius = radius

    def scaled_area(self, factor):
        return self.radius * factor


def make_square(side, rounded=False):
    return side
'''

USES = '''from .shapes import Circle, make_square
from . import shapes


def circle_area(r):
    c = Circle(r)
    total = c.scaled_area(2)  # Circle. never written before: needed
    return Circle.scaled_area(c, shapes.UNIT)


def square():
    # make_square(1) in a comment is no task
    return make_square(4, rounded=True)
''' + "\n".join(f"# filler {i}" for i in range(40)) + "\n"


@pytest.fixture
def site(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setattr(crossfile.tasks, "MAX_PER_MODULE", 10)  # every task of the one module
    monkeypatch.setattr(crossfile.tasks, "PACKAGES_WANTED", 1)
    package = tmp_path / "geometry"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "shapes.py").write_text(SHAPES)
    (package / "uses.py").write_text(USES)
    return tmp_path


def test_tasks_need_what_only_the_imported_module_defines(site: Path) -> None:
    tasks = crossfile.build_tasks(10, seed=0, roots=[site])
    by_line = {t.prefix.rsplit("\n", 1)[-1].strip(): t for t in tasks}
    assert set(by_line) == {"return Circle.", "return make_square(",
                            "return Circle.scaled_area(c, shapes."}
    task = by_line["return Circle."]
    assert task.target == "scaled_area(c, shapes.UNIT)"
    # scaled_area appears before the cursor (c.scaled_area): only UNIT is still unknown...
    assert task.needed == ("UNIT",)
    assert "class Circle:" in task.definition and "UNIT = 1.0" in task.definition
    assert task.prefix + task.target + task.suffix == USES and task.package == "geometry"
    square = by_line["return make_square("]
    assert square.target == "4, rounded=True)" and square.needed == ("rounded",)
    assert all("# make_square" not in t.prefix.rsplit("\n", 1)[-1] for t in tasks)


def test_scores() -> None:
    task = crossfile.CrossFileTask("m.py:1", "p", "/r", "/r/p/m.py", "/r/p/b.py",
                                   "x = b.", "\n", "helper(1, LIMIT)", ("helper", "LIMIT"), "")
    assert crossfile.score(task, "helper(1, LIMIT)\nmore") == {"em": 1.0, "needed": 1.0,
                                                               "es": 1.0}
    partial = crossfile.score(task, "helper(2)")
    assert partial["em"] == 0.0 and partial["needed"] == 0.5
    assert partial["es"] == pytest.approx(1 - crossfile.levenshtein("helper(2)",
                                                                    "helper(1, LIMIT)") / 16)


def test_the_replay_workspace_of_a_python_module_is_above_its_top_package(site: Path) -> None:
    (site / ".git").mkdir()  # a marker further up (a pyenv checkout) does not win for Python
    module = site / "geometry" / "shapes.py"
    assert workload.workspace_root(str(module)) == str(site)
    other = site / "tool" / "main.go"
    other.parent.mkdir()
    other.write_text("package main\n")
    assert workload.workspace_root(str(other)) == str(site)


# --- JavaScript/TypeScript packages in node_modules (bench/crossfile/javascript.py) ---------------

SHAPES_JS = '''"use strict";
const UNIT = 1.0;

class Circle {
  constructor(radius) {
    this.radius = radius;
  }

  scaledArea(factor) {
    return this.radius * factor;
  }
}

function makeSquare(side, rounded) {
  return side;
}

module.exports = { Circle, makeSquare, UNIT };
'''

USES_JS = '''const { Circle, makeSquare } = require('./shapes');
const shapes = require('./shapes.js');
const outside = require('../../outside');

function circleArea(r) {
  const c = new Circle(r);
  return Circle.scaledArea(c, 2);
}

function square() {
  // makeSquare(1) in a comment is no task
  return shapes.makeSquare(4, shapes.UNIT);
}
''' + "\n".join(f"// filler {i}" for i in range(40)) + "\n"

USES_TS = '''import { makeSquare } from './shapes.js';
import * as geometry from './shapes';

export function twice(n: number): number {
  return makeSquare(n, geometry.UNIT);
}
''' + "\n".join(f"// filler {i}" for i in range(40)) + "\n"


@pytest.fixture
def node_modules(tmp_path: Path) -> Path:
    root = tmp_path / "node_modules"
    package = root / "geometry"
    (package / "lib").mkdir(parents=True)
    (package / "package.json").write_text('{"name": "geometry"}')
    (package / "lib" / "shapes.js").write_text(SHAPES_JS)
    (package / "lib" / "uses.js").write_text(USES_JS)
    (package / "lib" / "twice.ts").write_text(USES_TS)
    (tmp_path / "outside.js").write_text("function secret() {}\n")
    return root


def test_javascript_tasks_need_what_only_the_required_module_defines(node_modules: Path) -> None:
    from lsp_complete.bench.crossfile import javascript as crossfile_js

    (package,) = crossfile_js.package_dirs((str(node_modules),))
    tasks = [t for module in crossfile_js.modules(package)
             for t in crossfile_js.module_tasks(module, package, "geometry")]
    by_target = {(Path(t.path).name, t.target): t for t in tasks}
    # require with names and a whole module, ESM named and namespace imports.
    assert set(by_target) == {
        ("uses.js", "scaledArea(c, 2);"),
        ("uses.js", "makeSquare(4, shapes.UNIT);"),
        ("uses.js", "UNIT);"),
        ("twice.ts", "n, geometry.UNIT);"),  # after `makeSquare(`: UNIT is B's too
        ("twice.ts", "UNIT);"),
    }
    # makeSquare is named before the cursor (the require line): only UNIT is needed.
    assert by_target[("uses.js", "makeSquare(4, shapes.UNIT);")].needed == ("UNIT",)
    scaled = by_target[("uses.js", "scaledArea(c, 2);")]
    assert scaled.needed == ("scaledArea",) and "class Circle" in scaled.definition
    assert scaled.language == "javascript" and Path(scaled.root) == package
    assert by_target[("twice.ts", "UNIT);")].language == "typescript"
    # Nothing outside the package is read, whatever the path says.
    assert all("outside" not in t.imported_path for t in tasks)


PICK_JS = '''function pick($el, key$) {
  return $el[key$];
}

class Box {
  constructor($root) {}
  $get(k) { return k; }
}

module.exports = { pick, Box };
'''


def test_javascript_names_may_hold_a_dollar(node_modules: Path) -> None:
    """`$` is a letter of a JavaScript name: parameters and members keep it, and so does the
    score's reading of a suggestion."""
    from lsp_complete.bench.crossfile import javascript as crossfile_js

    lib = node_modules / "geometry" / "lib"
    (lib / "pick.js").write_text(PICK_JS)
    defs = crossfile_js.definitions(lib / "pick.js")
    assert defs is not None
    assert defs.members["pick"] == {"$el", "key$"} and defs.members["Box"] == {"$root", "$get"}
    (lib / "first.js").write_text("const { pick } = require('./pick');\n\nfunction first() {\n"
                                  "  return pick($el, key$);\n}\n" + "// filler\n" * 40)
    (task,) = crossfile_js.module_tasks(lib / "first.js", lib.parent, "geometry")
    assert task.target == "$el, key$);" and task.needed == ("$el", "key$")
    assert crossfile.score(task, "$el, key$);") == {"em": 1.0, "needed": 1.0, "es": 1.0}
    assert crossfile.score(task, "el, key);")["needed"] == 0.0


def test_the_oracle_is_given_the_definition_in_the_templates_repository_format(
        site: Path) -> None:
    task = next(t for t in crossfile.build_tasks(10, seed=0, roots=[site])
                if t.target == "scaled_area(c, shapes.UNIT)")
    text, special = task.oracle_context("<|file_sep|>", "<|repo_name|>", "#")
    assert special and text == ("<|repo_name|>geometry\n<|file_sep|>geometry/shapes.py\n"
                                f"{task.definition}\n<|file_sep|>geometry/uses.py\n")
    text, special = task.oracle_context(None, None, "#")
    assert not special and text.startswith("# Path: geometry/shapes.py\n# ")
    assert "# UNIT = 1.0\n" in text and "class Circle" in text


def test_the_oracles_javascript_repository_is_named_as_the_server_names_it(
        node_modules: Path) -> None:
    """The server names a repository after its workspace folder once resolved (context/repo.py),
    and a JavaScript line's workspace is its package's folder: a scoped package's folder has no
    scope, and a linked one (`npm link`) is read, and named, where it is. The task's `package`
    keeps the package.json name: folder names repeat (`node-gyp`, `@npmcli/node-gyp`)."""
    from lsp_complete.bench.crossfile import javascript as crossfile_js

    real = node_modules.parent / "geo-src"
    (node_modules / "geometry").rename(real)
    (real / "package.json").write_text('{"name": "@shapes/geo"}')
    (node_modules / "@shapes").mkdir()
    (node_modules / "@shapes" / "geo").symlink_to(real)
    (folder,) = crossfile_js.package_dirs((str(node_modules),))
    task = next(t for t in crossfile_js.module_tasks(folder / "lib" / "uses.js", folder,
                                                     crossfile_js.package_name(folder))
                if t.target == "scaledArea(c, 2);")
    text, _ = task.oracle_context("<|file_sep|>", "<|repo_name|>", "//")
    assert text.startswith("<|repo_name|>geo-src\n<|file_sep|>lib/shapes.js\n")
    assert text.endswith("<|file_sep|>lib/uses.js\n")
    assert task.package == "@shapes/geo" and task.name.startswith("@shapes/geo/lib/uses.js:")
