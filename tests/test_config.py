"""Settings: flat camelCase keys on the wire, parsed into groups; ranges checked."""

from __future__ import annotations

import dataclasses

import pytest

from lsp_complete.config import (
    CacheSettings,
    CompletionSettings,
    DocumentSettings,
    EngineSettings,
    NextEditSettings,
    Settings,
    _check,
    combined_problems,
    parse_settings,
)

# Every key the server takes, as editors send it: the wire format must not change.
WIRE_KEYS = {
    "model", "threads", "threadPolicy", "contextSize", "slots", "gpuLayers", "maxTokens",
    "maxPromptTokens",
    "multiline", "enabled", "debounceMs", "timeBudgetMs", "tokenHealing", "persistCache",
    "cacheSizeMb", "idleReanchorMs", "maxFileBytes", "engine", "engineUrl", "apiKeyEnv",
    "remoteModel", "requestTimeoutMs", "connectTimeoutMs", "remoteSlots", "remoteHealing",
    "speculation", "repoContextTokens", "alternatives", "minConfidencePercent",
    "replaceLineSuffix", "nextEdit", "nextEditDelayMs", "nextEditModel",
}
# What needs a new engine when it changes (the model is loaded again).
RELOAD_KEYS = {
    "model", "threads", "threadPolicy", "contextSize", "gpuLayers", "slots", "engine", "engineUrl",
    "apiKeyEnv", "remoteModel", "requestTimeoutMs", "connectTimeoutMs", "remoteSlots",
    "remoteHealing",
}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def test_the_wire_keys_are_the_settings_fields_and_each_is_in_one_group() -> None:
    names = [f.name for f in dataclasses.fields(Settings)]
    assert {_camel(n) for n in names} == WIRE_KEYS
    groups = (EngineSettings, CompletionSettings, DocumentSettings, NextEditSettings,
              CacheSettings)
    grouped = [f.name for g in groups for f in dataclasses.fields(g)]
    assert sorted(grouped) == sorted(names)  # each field in exactly one group
    assert {_camel(f.name) for f in dataclasses.fields(EngineSettings)} == RELOAD_KEYS


def test_every_default_passes_its_own_check() -> None:
    defaults = Settings()
    for spec in dataclasses.fields(Settings):
        if spec.name != "model":
            assert _check(spec, getattr(defaults, spec.name)) is None, spec.name


_FIELD_OF = {_camel(f.name): f.name for f in dataclasses.fields(Settings)}
_OTHER_VALUE = {"model": "other.gguf", "engine": "openai", "multiline": "never",
                "remoteHealing": "off", "enabled": {"python": False}, "speculation": "off",
                "threadPolicy": "fixed", "nextEdit": "off", "nextEditModel": "other"}


@pytest.mark.parametrize("key", sorted(WIRE_KEYS))
def test_a_change_needs_a_new_engine_exactly_for_the_engine_group(key: str) -> None:
    base = Settings()
    old = getattr(base, _FIELD_OF[key])
    if key in _OTHER_VALUE:
        value = _OTHER_VALUE[key]
    elif isinstance(old, bool):
        value = not old
    else:
        value = old + 1 if isinstance(old, int) else old + "x"
    new, problems = parse_settings({key: value}, base)
    assert problems == []
    assert getattr(new, _FIELD_OF[key]) != old
    assert (new.engine_settings != base.engine_settings) == (key in RELOAD_KEYS)


def test_out_of_range_numbers_are_refused_and_the_previous_value_kept() -> None:
    base, _ = parse_settings({"slots": 8, "maxTokens": 32})
    new, problems = parse_settings(
        {"slots": 100_000, "maxTokens": -1, "contextSize": 1 << 40, "threads": 2}, base
    )
    assert (new.slots, new.max_tokens, new.context_size) == (8, 32, Settings().context_size)
    assert new.threads == 2  # the valid one still applies
    assert len(problems) == 3
    assert any("'slots'" in p and "0 to 32" in p and "100000" in p for p in problems)
    assert any("'maxTokens'" in p for p in problems)


@pytest.mark.parametrize("value", ["lots", 1.5, True])
def test_wrong_types_are_refused(value: object) -> None:
    new, problems = parse_settings({"maxTokens": value})
    assert new.max_tokens == Settings().max_tokens
    assert len(problems) == 1 and "maxTokens" in problems[0]


def test_null_means_unset_and_keeps_the_previous_value() -> None:
    # VS Code's workspace/configuration answers null for a nullable setting left unset (our
    # extension declares maxTokens, gpuLayers, debounceMs so): no warning, nothing changes.
    base, _ = parse_settings({"maxTokens": 32})
    new, problems = parse_settings({"maxTokens": None, "gpuLayers": None, "debounceMs": None},
                                   base)
    assert problems == []
    assert (new.max_tokens, new.gpu_layers, new.debounce_ms) == (32, base.gpu_layers,
                                                                 base.debounce_ms)


def test_settings_are_read_flat_and_cannot_change_in_place() -> None:
    settings, problems = parse_settings({"max_tokens": 12, "engineUrl": "http://h:1"})
    assert problems == []
    assert (settings.max_tokens, settings.engine_url) == (12, "http://h:1")
    assert settings.engine_settings.engine_url == "http://h:1"
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.max_tokens = 1  # type: ignore[misc]


def test_gpu_layers_minus_one_means_every_layer() -> None:
    # The VS Code extension and the JetBrains template send -1 ("offload all layers").
    settings, problems = parse_settings({"gpuLayers": -1})
    assert problems == [] and settings.gpu_layers == -1
    _, problems = parse_settings({"gpuLayers": -2})
    assert len(problems) == 1 and "gpuLayers" in problems[0]


def test_one_change_of_settings_is_told_in_one_message_per_kind_of_problem() -> None:
    """A client that sends its whole settings tree (no `lspComplete` section) got one popup per
    key it holds: 300 keys, 300 popups. Now the unknown keys are named in one message (the
    first ten, then how many more), the refused values in another, each in its own words."""
    options = {**{f"k{i}": i for i in range(300)}, "maxTokens": -1, "slots": "many",
               "x" * 500: 1}
    _, problems = parse_settings(options)
    assert len(problems) == 303  # parse_settings still says each problem
    unknown, refused = combined_problems(problems)
    assert unknown.startswith("unknown settings 'k0', 'k1', ")
    assert "'k9' and 291 more" in unknown and "'k10'" not in unknown
    assert len(unknown) < 300
    assert refused == ("setting 'maxTokens': expected an integer from 0 to 4096, got -1; "
                       "setting 'slots': expected an integer from 0 to 32")
    assert combined_problems(parse_settings({"foo": 1})[1]) == ["unknown setting 'foo'"]
    # The server says where ours go (a client that sent its whole tree missed the section).
    hinted, _ = combined_problems(problems, "lspComplete")
    assert hinted.endswith("291 more (lsp-complete's settings go under \"lspComplete\")")
    assert combined_problems(parse_settings({"x" * 500: 1})[1]) == [f"unknown setting '{'x' * 38}…"]
    assert combined_problems([]) == []


def test_the_confidence_floor_is_off_unless_the_environment_sets_it(monkeypatch) -> None:
    """Suggestions the model is unsure of are shown by default (holding them back trades the
    characters a partial accept takes for fewer wrong ones: docs/bench/2026-12-06f-confidence);
    LSP_COMPLETE_MIN_CONFIDENCE sets the default for every editor's server at once."""
    from lsp_complete.config import default_min_confidence

    monkeypatch.delenv("LSP_COMPLETE_MIN_CONFIDENCE", raising=False)
    assert default_min_confidence() == 0 and Settings().min_confidence_percent == 0
    monkeypatch.setenv("LSP_COMPLETE_MIN_CONFIDENCE", "25")
    assert Settings().min_confidence_percent == 25
    for unusable in ("", "ten", "-5", "1e3"):
        monkeypatch.setenv("LSP_COMPLETE_MIN_CONFIDENCE", unusable)
        assert default_min_confidence() == 0
    monkeypatch.setenv("LSP_COMPLETE_MIN_CONFIDENCE", "400")
    assert default_min_confidence() == 100


def test_an_on_off_setting_takes_true_and_false() -> None:
    # VS Code's settings hold `nextEdit` as a checkbox; the server pulls them as they are.
    on, problems = parse_settings({"nextEdit": True})
    off, more = parse_settings({"nextEdit": False}, on)
    assert problems == more == []
    assert (on.next_edit, off.next_edit) == ("on", "off")
    # A boolean for a choice without on/off, or a number for one with, is still refused.
    _, refused = parse_settings({"multiline": True, "nextEdit": 1})
    assert len(refused) == 2
