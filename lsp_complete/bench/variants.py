"""lsp-complete variants: one model x `speculation` mode each, sides of the A/B drive (bench/ab/):
the candidate's code served with that model, the mode sent in initializationOptions as an
editor sends it. `draft` runs only for a model whose models.toml entry declares a draft model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsp_complete.engine.speculation import SPECULATION_MODES


@dataclass(frozen=True)
class ModelUnderTest:
    name: str  # models.toml name, or the file's stem
    path: str
    draft: str | None = None  # the draft model its entry declares


@dataclass(frozen=True)
class Variant:
    model: ModelUnderTest
    mode: str

    @property
    def key(self) -> str:
        return f"{self.model.name}/{self.mode}"


def parse_modes(text: str) -> tuple[str, ...]:
    modes = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    unknown = [m for m in modes if m not in SPECULATION_MODES]
    if unknown or not modes:
        raise ValueError(
            f"--speculation: unknown mode(s) {', '.join(unknown) or '(none given)'}; use a comma "
            f"list of {', '.join(SPECULATION_MODES)}"
        )
    return modes


def resolve_models(names: Sequence[str]) -> list[ModelUnderTest]:
    """Each `--models` entry resolved as the server would (offline: assembled from installed
    packages if need be), with the draft model its entry declares."""
    from lsp_complete.model_store import resolve_model

    return unique_names([model_under_test(str(resolved.path), resolved.spec)
                         for resolved in map(resolve_model, names)])


def model_under_test(path: str, spec: Any) -> ModelUnderTest:
    name = getattr(spec, "name", None) or Path(path).stem
    return ModelUnderTest(name=name, path=path, draft=getattr(spec, "draft", None))


def unique_names(models: Sequence[ModelUnderTest]) -> list[ModelUnderTest]:
    """Variant keys must differ: a second model of the same name gets `#2`."""
    seen: dict[str, int] = {}
    out: list[ModelUnderTest] = []
    for model in models:
        seen[model.name] = seen.get(model.name, 0) + 1
        count = seen[model.name]
        name = model.name if count == 1 else f"{model.name}#{count}"
        out.append(dataclasses.replace(model, name=name))
    return out


def plan(models: Sequence[ModelUnderTest], modes: Sequence[str]) -> tuple[list[Variant], list[str]]:
    """Every (model, mode) pair to run, model by model, and notes on the pairs left out."""
    variants: list[Variant] = []
    notes: list[str] = []
    for model in models:
        for mode in modes:
            if mode == "draft" and not model.draft:
                notes.append(f"{model.name}: its models.toml entry declares no draft model, "
                             "so `draft` did not run for it.")
                continue
            variants.append(Variant(model, mode))
    return variants, notes


def side_by_side(speculation: str | None, models: str | None,
                 main_model: ModelUnderTest) -> tuple[list[Variant], list[str]]:
    """The variants `--speculation MODES` and `--models A,B` ask for (none when neither is
    given), and notes on the pairs left out: without --models, the main model; without
    --speculation, the server's default mode. Raises ValueError for an unknown mode; a model
    that cannot be resolved, ModelError."""
    if speculation is None and models is None:
        return [], []
    modes = parse_modes(speculation or "auto")
    names = [m.strip() for m in (models or "").split(",") if m.strip()]
    return plan(resolve_models(names) if names else [main_model], modes)


def options(variant: Variant) -> dict[str, Any]:
    """What a variant's server is given beside every side's settings."""
    return {"model": variant.model.path, "speculation": variant.mode}
