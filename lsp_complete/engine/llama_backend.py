"""The llama.cpp library as the in-process engine and the GGUF tokenizer share it: starting the
backend once (with its log routed to Python logging), loading a model (mapped or read into
memory) and making its context, tokenizing with a vocabulary, reading a token's text and a
vocabulary's pieces, and `GgufTokenizer` (a model's vocabulary without its weights).

Importing this module loads the native library: only the modules that run llama.cpp do.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Callable
from pathlib import Path

import llama_cpp
import numpy as np

from lsp_complete.engine.base import EngineError
from lsp_complete.engine.vocabulary import Vocabulary
from lsp_complete.utf8 import utf8

llama_log = logging.getLogger("llama.cpp")

_backend_lock = threading.Lock()
_backend_ready = False
# ggml levels: 1 debug, 2 info, 3 warn, 4 error, 5 continuation of the previous line.
# Its warnings are about model files we validate ourselves: keep them at INFO.
_LOG_LEVELS = {2: logging.DEBUG, 3: logging.INFO, 4: logging.ERROR}
# What llama.cpp reports as errors when our abort callback stops a decode: that is a
# cancellation working as intended, not a failure.
_ABORT_NOISE = ("compute status: 1", "failed with error 1", "failed to decode, ret = 2")


@llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]  # a ctypes CFUNCTYPE
def _route_llama_log(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
    # llama.cpp prints a lot at load time; keep it out of stderr unless asked for.
    message = text.decode("utf-8", errors="replace").rstrip()
    if message:
        if any(noise in message for noise in _ABORT_NOISE):
            level = 1
        llama_log.log(_LOG_LEVELS.get(level, logging.DEBUG), "%s", message)


def init_backend() -> None:
    """Start llama.cpp once per process, its log routed to the "llama.cpp" logger."""
    global _backend_ready
    with _backend_lock:
        if not _backend_ready:
            llama_cpp.llama_log_set(_route_llama_log, ctypes.c_void_p(0))
            llama_cpp.llama_backend_init()
            _backend_ready = True


def extra_buffer_types_safe() -> bool:
    """Whether llama.cpp's extra CPU buffer types (weights repacked for faster matrix
    products) may be used. Not in a build with the AMX kernels: on a CPU with AMX they crash
    in ggml_backend_amx_mul_mat with K-quant models (seen here with Qwen2.5-Coder Q4_K_M;
    llama.cpp issue #20824) or compute wrong results (#16315). The build's feature list says
    whether it has them; without extra buffer types the plain CPU kernels run, correctly."""
    info = llama_cpp.llama_print_system_info().decode("utf-8", errors="replace")
    return "AMX_INT8 = 1" not in info


def load_model(path: Path, n_gpu_layers: int, mapped: bool, extra_buffer_types: bool,
               cancelled: Callable[[], bool] = lambda: False) -> llama_cpp.llama_model_p | None:
    """The model's weights, mapped or read into memory; None when llama.cpp cannot load it,
    or once `cancelled()` (asked as the tensors are read: a 1 GB model takes seconds)."""
    mparams = llama_cpp.llama_model_default_params()
    mparams.n_gpu_layers = n_gpu_layers
    mparams.use_extra_bufts = extra_buffer_types
    _set_load_mode(mparams, mapped)

    @llama_cpp.llama_progress_callback  # type: ignore[untyped-decorator]  # a ctypes CFUNCTYPE
    def go_on(_progress: float, _user_data: ctypes.c_void_p) -> bool:
        return not cancelled()  # False: llama.cpp stops loading and returns no model

    mparams.progress_callback = go_on  # (kept alive by this frame until the call returns)
    model: llama_cpp.llama_model_p | None = llama_cpp.llama_model_load_from_file(
        str(path).encode(), mparams)
    return model or None


def _set_load_mode(mparams: llama_cpp.llama_model_params, mapped: bool) -> None:
    """Map the weights, or read them into memory (llama.cpp's load_mode; use_mmap before)."""
    if hasattr(mparams, "load_mode"):
        mparams.load_mode = (llama_cpp.LLAMA_LOAD_MODE_MMAP if mapped
                             else llama_cpp.LLAMA_LOAD_MODE_NONE)
        if not mapped and hasattr(mparams, "lazy_mode"):
            mparams.lazy_mode = llama_cpp.LLAMA_LAZY_MODE_OFF  # lazy reads need the mapping
    elif hasattr(mparams, "use_mmap"):
        mparams.use_mmap = mapped


def new_context(model: llama_cpp.llama_model_p, n_ctx: int, n_batch: int, n_ubatch: int,
                n_seq: int, n_threads: int) -> llama_cpp.llama_context_p | None:
    """A context whose `n_seq` sequences share one pool of cells; None when it cannot be
    made (out of memory)."""
    cparams = llama_cpp.llama_context_default_params()
    cparams.n_ctx = n_ctx
    cparams.n_batch = n_batch
    cparams.n_ubatch = min(n_ubatch, n_batch)
    cparams.n_seq_max = n_seq
    cparams.kv_unified = True  # one pool of cells shared by all files' sequences
    cparams.n_threads = n_threads
    cparams.n_threads_batch = n_threads
    cparams.no_perf = True
    ctx: llama_cpp.llama_context_p | None = llama_cpp.llama_init_from_model(model, cparams)
    return ctx or None


def vocab_pieces(vocab: llama_cpp.llama_vocab_p) -> tuple[list[bytes], np.ndarray]:
    """Every token's bytes (control tokens: none) and which tokens end generation or are
    control tokens: what `Vocabulary` is built from."""
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    buf = ctypes.create_string_buffer(256)
    pieces: list[bytes] = []
    stop = np.zeros(n_vocab, dtype=bool)
    for token in range(n_vocab):
        n = llama_cpp.llama_token_to_piece(vocab, token, buf, 256, 0, False)
        pieces.append(buf.raw[: max(n, 0)])
        stop[token] = (llama_cpp.llama_vocab_is_eog(vocab, token)
                       or llama_cpp.llama_vocab_is_control(vocab, token))
    return pieces, stop


def vocab_tokenize(vocab: llama_cpp.llama_vocab_p, text: str, special: bool) -> list[int]:
    """Tokenize with a llama.cpp vocabulary; no BOS is added (prompts are built by us).
    A lone surrogate (from a client's JSON) is tokenized as U+FFFD, never an error."""
    data = utf8(text)
    capacity = len(data) + 8
    buf = (llama_cpp.llama_token * capacity)()
    n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, capacity, False, special)
    if n < 0:  # the buffer was too small: -n is the size needed
        capacity = -n
        buf = (llama_cpp.llama_token * capacity)()
        n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, capacity, False, special)
    return list(buf[:n])


def token_piece(vocab: llama_cpp.llama_vocab_p, token: int, special: bool) -> bytes:
    """A token's bytes; with `special`, control tokens give their text instead of nothing."""
    buf = ctypes.create_string_buffer(256)
    n = llama_cpp.llama_token_to_piece(vocab, token, buf, 256, 0, special)
    return buf.raw[: max(n, 0)]


class GgufTokenizer:
    """The vocabulary of a local GGUF file, loaded without its weights (a `Tokenizer`)."""

    def __init__(self, path: str | Path) -> None:
        init_backend()
        self.path = Path(path)
        self.name = f"local vocabulary ({self.path.name})"
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        params.n_gpu_layers = 0
        self._model = llama_cpp.llama_model_load_from_file(str(self.path).encode(), params)
        if not self._model:
            raise EngineError(f"llama.cpp could not read the vocabulary of {self.path}")
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        self.n_vocab: int | None = llama_cpp.llama_vocab_n_tokens(self._vocab)
        self._pieces: dict[tuple[int, bool], bytes] = {}
        self._vocabulary = Vocabulary(*vocab_pieces(self._vocab))

    @property
    def begins_a_token(self) -> Callable[[str], bool]:
        return self._vocabulary.begins_a_token

    def tokenize(self, text: str, special: bool = False) -> list[int]:
        return vocab_tokenize(self._vocab, text, special)

    def _piece(self, token: int, special: bool) -> bytes:
        key = (token, special)
        piece = self._pieces.get(key)
        if piece is None:
            piece = self._pieces[key] = token_piece(self._vocab, token, special)
        return piece

    def detokenize(self, tokens: list[int]) -> str:
        # Same rule as LlamaEngine.detokenize: control tokens contribute no text.
        return b"".join(self._piece(t, False) for t in tokens).decode("utf-8", errors="replace")

    def render(self, tokens: list[int]) -> str:
        return b"".join(self._piece(t, True) for t in tokens).decode("utf-8", errors="replace")

    def close(self) -> None:
        if getattr(self, "_model", None):
            llama_cpp.llama_model_free(self._model)
            self._model = None
