"""Settings -> a loaded engine: which model file, which backend, its tokenizer and KV store.

The only module outside the engines themselves that names a concrete engine. The in-process
engine and the GGUF tokenizer are imported only when used, so that a remote engine with a
server-side tokenizer never loads llama.cpp.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsp_complete.config import Settings
from lsp_complete.engine.base import Engine, RemoteEngineError
from lsp_complete.engine.kvstore import KVStore
from lsp_complete.engine.remote import RemoteOptions
from lsp_complete.engine.remote_llama_server import LlamaServerEngine
from lsp_complete.engine.remote_openai import OpenAIEngine
from lsp_complete.model_store import kv_cache_dir, model_path, resolve_model
from lsp_complete.models import ModelSpec, check_template, default_model_name, load_registry


@dataclass
class LoadedEngine:
    engine: Engine
    spec: ModelSpec  # the model's FIM template and stop strings
    info: dict[str, Any]  # name, path (and engine, url for a remote one), for the status
    warnings: list[str]  # template problems worth telling the user


def load_engine(settings: Settings,
                cancelled: Callable[[], bool] = lambda: False) -> LoadedEngine:
    """Resolve the model, check its template, and load it (seconds: run off the event loop;
    a local model's load stops once `cancelled()`)."""
    if settings.engine != "local":
        return _load_remote(settings)
    from lsp_complete.engine.llama import LlamaEngine

    resolved = resolve_model(settings.model)
    warnings = check_template(resolved.path, resolved.spec)
    store = None
    if settings.persist_cache:
        store = KVStore(kv_cache_dir(), size_limit=settings.cache_size_mb << 20)
        if store.unavailable:  # persistence is off, the model still loads: tell the user
            warnings.append(store.unavailable)
    stat = resolved.path.stat()
    model_id = resolved.spec.sha256 or f"{resolved.path}:{stat.st_size}:{stat.st_mtime_ns}"
    try:
        engine = LlamaEngine(
            resolved.path,
            n_ctx=settings.context_size,
            n_threads=settings.threads,
            thread_policy=settings.thread_policy,
            n_gpu_layers=settings.gpu_layers,
            slots=settings.slots,
            kv_store=store,
            model_id=model_id,
            cancelled=cancelled,
        )
    except BaseException:
        if store is not None:  # a failed (re)load must not leak the store's SQLite handle
            store.close()
        raise
    info = {"name": resolved.spec.name, "path": str(resolved.path)}
    return LoadedEngine(engine, resolved.spec, info, warnings)


def _load_remote(settings: Settings) -> LoadedEngine:
    """A remote engine: the model's template from `model`, its tokenizer from the local file
    when there is one (else from the server). The server is not contacted here, so a server
    that is down at start only means no suggestions until it answers."""
    if not settings.engine_url:
        raise RemoteEngineError(
            f"engine '{settings.engine}' needs the server's URL in the engineUrl setting"
        )
    spec, vocab, warnings = _remote_model(settings.model)
    options = RemoteOptions(
        url=settings.engine_url,
        api_key=os.environ.get(settings.api_key_env, "") if settings.api_key_env else "",
        model=settings.remote_model,
        request_timeout_s=settings.request_timeout_ms / 1000,
        connect_timeout_s=settings.connect_timeout_ms / 1000,
        slots=settings.remote_slots,
        healing=settings.remote_healing,
    )
    tokenizer = None
    if vocab is not None:
        from lsp_complete.engine.llama_backend import GgufTokenizer

        tokenizer = GgufTokenizer(vocab)
    engine_class = LlamaServerEngine if settings.engine == "llama-server" else OpenAIEngine
    engine = engine_class(options, tokenizer)
    info = {"name": spec.name, "path": str(vocab or ""), "engine": settings.engine,
            "url": engine.url}
    return LoadedEngine(engine, spec, info, warnings)


def _remote_model(name: str | None) -> tuple[ModelSpec, Path | None, list[str]]:
    """(template, local GGUF for the tokenizer or None, warnings) for a remote engine."""
    registry = load_registry()
    if name is None:
        spec = registry[default_model_name(registry)]
        warning = (f"no `model` set for the remote engine: using the FIM template of "
                   f"{spec.name}; set `model` to the registry name or .gguf file of the model "
                   "the server runs")
        return spec, None, [warning]
    if name in registry:
        spec = registry[name]
        local = model_path(spec)
        return spec, (local if local.is_file() else None), []
    resolved = resolve_model(name)  # a path to a .gguf: its template and vocabulary
    return resolved.spec, resolved.path, check_template(resolved.path, resolved.spec)
