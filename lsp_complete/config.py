"""Settings: one typed, fully defaulted dataclass, parsed once from camelCase options."""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any

from lsp_complete.engine.llama import default_threads
from lsp_complete.engine.remote import HEALING_MODES

MULTILINE_MODES = ("auto", "always", "never")
ENGINES = ("local", "llama-server", "openai")


@dataclass
class Settings:
    model: str | None = None  # models.toml name or a path to a .gguf file
    threads: int = field(default_factory=default_threads)
    context_size: int = 8192  # KV cells shared by all open files
    slots: int = 4  # files whose KV sequences stay in memory at once
    gpu_layers: int = 0
    max_tokens: int = 64
    max_prompt_tokens: int = 1536
    multiline: str = "auto"
    enabled: dict[str, bool] = field(default_factory=dict)  # languageId -> enabled; default on
    debounce_ms: int = 0  # 0: the server cancels stale work instead of waiting
    time_budget_ms: int = 800  # after this, multi-line generation stops at the next line end
    token_healing: bool = True
    persist_cache: bool = True
    cache_size_mb: int = 1024
    idle_reanchor_ms: int = 400
    max_file_bytes: int = 4 * 1024 * 1024
    engine: str = "local"
    # Remote engines (engine "llama-server" or "openai"); `model` still names the model, for
    # its FIM template and, when its file is here, its tokenizer.
    engine_url: str = ""  # the server's root URL, e.g. http://gpu-box:8080
    api_key_env: str = "LSP_COMPLETE_API_KEY"  # environment variable holding the API key
    remote_model: str = ""  # the model's name on the server ("" = the server's first model)
    request_timeout_ms: int = 5000  # one suggestion, connect to last token
    connect_timeout_ms: int = 1000
    remote_slots: int = 0  # llama-server slots to use for open files (0 = all it has)
    remote_healing: str = "auto"  # token healing: auto | grammar | regex | off

    def language_enabled(self, language_id: str) -> bool:
        return self.enabled.get(language_id, self.enabled.get("*", True))


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


_FIELDS = {f.name: f for f in dataclasses.fields(Settings)}
# Keys of the editors' own settings that arrive in the same section (the VS Code extension's
# `lspComplete.serverPath` starts the server; it is not ours to complain about).
CLIENT_ONLY_KEYS = frozenset({"serverPath", "serverArgs", "statusPollSeconds", "trace"})


def parse_settings(options: Any, base: Settings | None = None) -> tuple[Settings, list[str]]:
    """Merge camelCase (or snake_case) options into settings; returns (settings, problems).

    Unknown keys and wrong types are reported, not fatal: the server tells the user and keeps
    the previous value.
    """
    settings = dataclasses.replace(base) if base else Settings()
    if base is None and os.environ.get("LSP_COMPLETE_MODEL"):
        settings.model = os.environ["LSP_COMPLETE_MODEL"]
    problems: list[str] = []
    if not options:
        return settings, problems
    if not isinstance(options, dict):
        return settings, [f"settings must be an object, got {type(options).__name__}"]
    for key, value in options.items():
        if key in CLIENT_ONLY_KEYS:
            continue
        name = _snake(key)
        spec = _FIELDS.get(name)
        if spec is None:
            problems.append(f"unknown setting {key!r}")
            continue
        error = _check(name, value)
        if error:
            problems.append(f"setting {key!r}: {error}")
            continue
        setattr(settings, name, value)
    return settings, problems


def _check(name: str, value: Any) -> str | None:
    if name == "model":
        return None if value is None or isinstance(value, str) else "expected a string"
    if name == "enabled":
        if isinstance(value, dict) and all(isinstance(v, bool) for v in value.values()):
            return None
        return "expected an object mapping languageId to true/false"
    if name == "multiline":
        return None if value in MULTILINE_MODES else f"expected one of {', '.join(MULTILINE_MODES)}"
    if name == "engine":
        return None if value in ENGINES else f"expected one of {', '.join(ENGINES)}"
    if name == "remote_healing":
        return None if value in HEALING_MODES else f"expected one of {', '.join(HEALING_MODES)}"
    default = _FIELDS[name].default
    if isinstance(default, str):
        return None if isinstance(value, str) else "expected a string"
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "expected true or false"
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if (isinstance(default, int) or name == "threads") and (not is_int or value < 0):
        return "expected a non-negative integer"
    return None
