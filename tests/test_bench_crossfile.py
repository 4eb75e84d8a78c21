"""The bench's cross-file lines: how tasks are found and scored (bench/crossfile.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lsp_complete.bench import crossfile, workload
from lsp_complete.models import FimTemplate

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
    monkeypatch.setattr(crossfile, "MAX_PER_MODULE", 10)  # every task of the one module
    monkeypatch.setattr(crossfile, "PACKAGES_WANTED", 1)
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


def test_the_oracle_uses_the_models_repository_format(site: Path) -> None:
    task = next(t for t in crossfile.build_tasks(10, 0, [site]) if t.target.startswith("4,"))
    fim = FimTemplate("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|file_sep|>",
                      "<|repo_name|>")
    text, special = crossfile.oracle_text(task, fim)
    assert special and text.startswith("<|repo_name|>geometry\n<|file_sep|>geometry/shapes.py\n")
    assert text.endswith("<|file_sep|>geometry/uses.py\n")
    plain, special = crossfile.oracle_text(task, None)
    assert not special and plain.startswith("# Path: geometry/shapes.py\n# def make_square(")


def test_the_replay_workspace_of_a_python_module_is_above_its_top_package(site: Path) -> None:
    (site / ".git").mkdir()  # a marker further up (a pyenv checkout) does not win for Python
    module = site / "geometry" / "shapes.py"
    assert workload.workspace_root(str(module)) == str(site)
    other = site / "tool" / "main.go"
    other.parent.mkdir()
    other.write_text("package main\n")
    assert workload.workspace_root(str(other)) == str(site)
