"""Settings: typed, fully defaulted groups, parsed once from flat camelCase options.

Each setting is declared once, with its default, type and (for numbers) its range, in the group
of what it affects: `EngineSettings` (a change needs a new engine: the model is loaded again),
`CompletionSettings` (one suggestion), `DocumentSettings` (which files get suggestions, and
when), `NextEditSettings` (next-edit suggestions), `CacheSettings` (the KV cache on disk).
`Settings` is all of them at once, so every setting is still read flat (`settings.max_tokens`)
and arrives flat on the wire: the camelCase key is the field's name (`maxTokens` is
`max_tokens`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

MULTILINE_MODES = ("auto", "always", "never")
ENGINES = ("local", "llama-server", "openai")
# Token healing on a remote engine: as a grammar, as a regex, or none (auto: what it supports).
HEALING_MODES = ("auto", "grammar", "regex", "off")
# Speculative decoding in the local engine (engine/speculation.py says what each does).
SpeculationMode = Literal["auto", "off", "lookup", "draft"]
SPECULATION_MODES: tuple[SpeculationMode, ...] = get_args(SpeculationMode)
# Threads per decode (engine/threads.py): the cheapest measured of a few counts up to
# `threads` (auto: load on the machine makes fewer threads faster), or always `threads`.
THREAD_POLICIES = ("auto", "fixed")


def default_threads() -> int:
    # Generation is memory-bound: more threads than physical cores only adds contention.
    return max(1, min(8, (os.cpu_count() or 2)))


def default_min_confidence() -> int:
    """0 (off), or what LSP_COMPLETE_MIN_CONFIDENCE says (an integer percent) for every
    editor's server at once. Off by default: holding back unsure lines trades what a partial,
    word-by-word accept takes for fewer wrong suggestions (docs/bench/2026-12-06f-confidence)."""
    value = os.environ.get("LSP_COMPLETE_MIN_CONFIDENCE", "")
    return min(100, max(0, int(value))) if value.strip().isdigit() else 0


MIN_CONTEXT_SIZE = 256
MAX_SLOTS = 32


def _int(default: int | Callable[[], int], low: int, high: int) -> Any:
    """An integer setting (`default` may be a function) and the range it accepts: a value
    outside is refused, as one that breaks the engine (`slots: 100000`) or means nothing."""
    metadata = {"range": (low, high)}
    if callable(default):
        return field(default_factory=default, metadata=metadata)
    return field(default=default, metadata=metadata)


def _choice(default: str, choices: tuple[str, ...]) -> Any:
    return field(default=default, metadata={"choices": choices})


@dataclass(frozen=True)
class EngineSettings:
    """What the engine is made of: any change here loads the model again."""

    model: str | None = None  # models.toml name or a path to a .gguf file
    threads: int = _int(default_threads, 0, 1024)  # 0: as many as suit the machine
    thread_policy: str = _choice("auto", THREAD_POLICIES)  # auto | fixed
    # KV cells shared by all open files; fewer than a prompt's worth serve nothing.
    context_size: int = _int(8192, MIN_CONTEXT_SIZE, 1 << 20)
    # Files whose KV sequences stay in memory at once; each uses two sequences, and llama.cpp
    # holds no more sequences than the tokens of one batch (engine/llama.py: 64).
    slots: int = _int(4, 0, MAX_SLOTS)
    gpu_layers: int = _int(0, -1, 100_000)  # -1: every layer (llama.cpp's own convention)
    engine: str = _choice("local", ENGINES)
    # Remote engines (engine "llama-server" or "openai"); `model` still names the model, for
    # its FIM template and, when its file is here, its tokenizer.
    engine_url: str = ""  # the server's root URL, e.g. http://gpu-box:8080
    api_key_env: str = "LSP_COMPLETE_API_KEY"  # environment variable holding the API key
    remote_model: str = ""  # the model's name on the server ("" = the server's first model)
    request_timeout_ms: int = _int(5000, 1, 600_000)  # one suggestion, connect to last token
    connect_timeout_ms: int = _int(1000, 1, 600_000)
    remote_slots: int = _int(0, 0, 1024)  # llama-server slots to use for open files (0 = all)
    remote_healing: str = _choice("auto", HEALING_MODES)  # token healing: auto|grammar|regex|off


@dataclass(frozen=True)
class CompletionSettings:
    """How one suggestion is made: applies from the next request."""

    max_tokens: int = _int(64, 0, 4096)
    max_prompt_tokens: int = _int(1536, 0, 1 << 20)
    multiline: str = _choice("auto", MULTILINE_MODES)
    time_budget_ms: int = _int(800, 0, 600_000)  # then multi-line stops at the next line end
    token_healing: bool = True
    # Speculative decoding in the local engine, lossless (the same output, sooner): off |
    # lookup (draft from the prompt and the previous suggestion) | draft (a draft model; lookup
    # until one is loaded) | auto (the fastest of these for the model in use).
    speculation: SpeculationMode = _choice("auto", SPECULATION_MODES)
    # Repository context: definitions the file imports from the workspace and similar code
    # from other open files, the prompt's first segment, at most this many tokens (0: off).
    repo_context_tokens: int = _int(512, 0, 16_384)
    # An explicit request (triggerKind Invoked: cycling to the next suggestion) also gets up to
    # this many alternatives, each starting with another token; computed in idle time after a
    # suggestion is shown (0: one suggestion only).
    alternatives: int = _int(3, 0, 8)
    # A suggestion whose first line (what is left of it to type) the model gave less
    # probability than this, in percent, is not shown; an explicit request shows it. 0:
    # every suggestion is shown. The default may be set with LSP_COMPLETE_MIN_CONFIDENCE.
    min_confidence_percent: int = _int(default_min_confidence, 0, 100)
    # A one-line suggestion may type through the closers and quotes an auto-closing editor put
    # after the cursor (`foo(|)` + `o2);`): its range then ends past them and the client
    # replaces them. Off unless the client renders such a range (VS Code's ghost text does).
    replace_line_suffix: bool = False


@dataclass(frozen=True)
class DocumentSettings:
    """Which files get suggestions, and when the server works on them."""

    enabled: dict[str, bool] = field(default_factory=dict)  # languageId or language -> on (default)
    debounce_ms: int = _int(0, 0, 10_000)  # 0: the server cancels stale work instead of waiting
    idle_reanchor_ms: int = _int(400, 0, 600_000)
    max_file_bytes: int = _int(4 * 1024 * 1024, 0, 1 << 30)

    def language_enabled(self, keys: tuple[str, ...]) -> bool:
        """`enabled` for a document's `setting_keys` (the first key set wins), else "*"."""
        found = next((key for key in keys if key in self.enabled), "*")
        return self.enabled.get(found, True)


@dataclass(frozen=True)
class NextEditSettings:
    """Next-edit suggestions (textDocument/copilotInlineEdit): applies from the next edit."""

    # auto: computed when a client asks, and ahead of its requests once it has asked (most
    # clients never ask: they cost nothing); on: ahead from the start (our clients, opted in);
    # off: answered with no edits, none computed.
    next_edit: str = _choice("auto", ("auto", "on", "off"))
    # The pause after an edit before the next edit is computed (in idle time).
    next_edit_delay_ms: int = _int(500, 0, 600_000)
    # A models.toml name or .gguf path for next edits alone (server/next_edit_model.py);
    # None or "": the completion model.
    next_edit_model: str | None = None


@dataclass(frozen=True)
class CacheSettings:
    """The KV cache kept on disk between sessions (read when the engine is made)."""

    persist_cache: bool = True
    cache_size_mb: int = _int(1024, 0, 1 << 20)


# Bases in reverse order: a dataclass lists the fields of its last base first.
@dataclass(frozen=True)
class Settings(CacheSettings, NextEditSettings, DocumentSettings, CompletionSettings,
               EngineSettings):
    """Every setting, read flat; `engine_settings` is the part that needs a new engine."""

    @property
    def engine_settings(self) -> EngineSettings:
        """Compare two of these to know whether a change needs the model loaded again."""
        return EngineSettings(
            **{f.name: getattr(self, f.name) for f in dataclasses.fields(EngineSettings)}
        )


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def wire_name(name: str) -> str:
    """A field's key on the wire: `max_tokens` is `maxTokens`."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def hide_credentials(url: str) -> str:
    """`url` without `user:password@`, for showing a URL that may not parse (a setting)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    end = min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))
    return f"{scheme}{sep}{rest[:end].rpartition('@')[2]}{rest[end:]}"


_FIELDS = {f.name: f for f in dataclasses.fields(Settings)}
# Every setting's key as clients send it (initializationOptions, didChangeConfiguration).
WIRE_NAMES = frozenset(wire_name(name) for name in _FIELDS)
# Keys of the editors' own settings that arrive in the same section (the VS Code extension's
# `lspComplete.serverPath` starts the server; it is not ours to complain about), and TCP mode's
# `token` (checked and taken out before settings are read; over stdio it means nothing), and
# what Copilot's clients (copilot.el, copilot-lsp) send their own server, which a user may
# point at ours for next edits.
CLIENT_ONLY_KEYS = frozenset({"serverPath", "serverArgs", "statusPollSeconds", "trace", "token",
                              "editorInfo", "editorPluginInfo", "networkProxy",
                              "nextEditSuggestions"})
# Settings come from the client, and the key in the variable `apiKeyEnv` names is sent to
# `engineUrl`: a client may name only our own variables, or the one named at launch.
API_KEY_ENV_PREFIX = "LSP_COMPLETE_"


def api_key_env_refusal(name: str, allowed: str | None = None) -> str | None:
    """Why settings may not name `name` as the API key's environment variable, or None.
    `allowed`: the name given by `lsp-complete serve --api-key-env NAME`."""
    if not name or name.startswith(API_KEY_ENV_PREFIX) or name == allowed:
        return None
    return (f"setting 'apiKeyEnv': {name!r} refused: settings may only name an environment "
            f"variable starting with {API_KEY_ENV_PREFIX} (or the one given by "
            f"`lsp-complete serve --api-key-env NAME`); the previous one stays")


_UNKNOWN = "unknown setting "  # how parse_settings words an unknown key: "unknown setting 'x'"
UNKNOWN_NAMED = 10  # a message on unknown keys names this many, then says how many more
NAME_CHARS = 40  # of each unknown key named (a key may be any string)


def combined_problems(problems: list[str], section: str | None = None) -> list[str]:
    """One change of settings' problems as the user is shown them: at most two messages, not
    one per problem (a client that sends its whole settings tree, not our section alone, has
    hundreds of keys we do not know). The unknown keys in one, the first UNKNOWN_NAMED named
    and then how many more (and, given the `section` ours go under, where that is); the other
    problems (a value refused, and why) in the other."""
    unknown = [_cut(p.removeprefix(_UNKNOWN)) for p in problems if p.startswith(_UNKNOWN)]
    others = [p for p in problems if not p.startswith(_UNKNOWN)]
    combined = []
    if len(unknown) == 1:
        combined.append(f"{_UNKNOWN}{unknown[0]}")
    elif unknown:
        named = ", ".join(unknown[:UNKNOWN_NAMED])
        more = f" and {len(unknown) - UNKNOWN_NAMED} more" if len(unknown) > UNKNOWN_NAMED else ""
        where = f" (lsp-complete's settings go under \"{section}\")" if section else ""
        combined.append(f"unknown settings {named}{more}{where}")
    if others:
        combined.append("; ".join(others))
    return combined


def _cut(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"


def parse_settings(options: Any, base: Settings | None = None) -> tuple[Settings, list[str]]:
    """Merge camelCase (or snake_case) options into settings; returns (settings, problems).

    Unknown keys, wrong types and values out of range are reported, not fatal: the server
    tells the user and keeps the previous value.
    """
    settings = base or Settings()
    if base is None and os.environ.get("LSP_COMPLETE_MODEL"):
        settings = dataclasses.replace(settings, model=os.environ["LSP_COMPLETE_MODEL"])
    problems: list[str] = []
    if not options:
        return settings, problems
    if not isinstance(options, dict):
        return settings, [f"settings must be an object, got {type(options).__name__}"]
    changes: dict[str, Any] = {}
    for key, value in options.items():
        if key in CLIENT_ONLY_KEYS:
            continue
        if value is None:  # VS Code sends null for a setting the user left unset
            continue
        name = _snake(key)
        spec = _FIELDS.get(name)
        if spec is None:
            problems.append(f"{_UNKNOWN}{key!r}")
            continue
        value = _on_off(spec, value)
        error = _check(spec, value)
        if error:
            problems.append(f"setting {key!r}: {error}")
            continue
        changes[name] = value
    return dataclasses.replace(settings, **changes), problems


def _on_off(spec: dataclasses.Field[Any], value: Any) -> Any:
    """true/false for a setting whose choices include "on" and "off": VS Code's settings
    (which the server pulls with workspace/configuration) hold `nextEdit` as a checkbox."""
    if isinstance(value, bool) and {"on", "off"} <= set(spec.metadata.get("choices", ())):
        return "on" if value else "off"
    return value


def _check(spec: dataclasses.Field[Any], value: Any) -> str | None:
    if spec.name in ("model", "next_edit_model"):
        return None if value is None or isinstance(value, str) else "expected a string"
    if spec.name == "enabled":
        if isinstance(value, dict) and all(isinstance(v, bool) for v in value.values()):
            return None
        return "expected an object mapping languageId to true/false"
    if "choices" in spec.metadata:
        choices = spec.metadata["choices"]
        return None if value in choices else f"expected one of {', '.join(choices)}"
    if "range" in spec.metadata:
        low, high = spec.metadata["range"]
        if not isinstance(value, int) or isinstance(value, bool):
            return f"expected an integer from {low} to {high}"
        if not low <= value <= high:
            return f"expected an integer from {low} to {high}, got {value}"
        return None
    if isinstance(spec.default, bool):
        return None if isinstance(value, bool) else "expected true or false"
    return None if isinstance(value, str) else "expected a string"
