"""A tiny llama-architecture GGUF for tests and `bench --quick`.

The model is random but *shaped*: its tokenizer looks like Qwen2.5-Coder's (byte-level BPE,
same pre-tokenizer, same FIM control tokens) and its weights are crafted so that greedy decoding
prints ASCII text, sometimes a newline, and never an end/control token early.  Its output is
gibberish; what it is good for is that it runs through the real llama.cpp in milliseconds and is
deterministic, so "cached path == fresh context" comparisons are meaningful.
"""

from __future__ import annotations

import os
from pathlib import Path

import gguf
import numpy as np

__all__ = [
    "MERGES",
    "SPECIAL_TOKENS",
    "byte_to_unicode",
    "tiny_vocab",
    "write_tiny_gguf",
]

# Hyperparameters.  Grouped-query attention (4 query heads sharing 2 KV heads) like real coder
# models, so KV-cache code paths see n_head != n_head_kv.
N_LAYER = 2
N_EMBD = 64
N_HEAD = 4
N_HEAD_KV = 2
HEAD_DIM = N_EMBD // N_HEAD
N_FF = 128
N_CTX_TRAIN = 4096
RMS_EPS = 1e-6
# Not 10000: the copy-head amplitudes below were optimized for this base (see _COPY_AMPLITUDES).
ROPE_FREQ_BASE = 500.0

# Control tokens in Qwen2.5-Coder's relative order.  The ids are assigned after the byte tokens
# and the merges (see `tiny_vocab`).
SPECIAL_NAMES = (
    "<|endoftext|>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)

# BPE merges over *plain text* pieces, in rank order (earlier = applied first).  They are chosen
# so that ordinary Python splits into multi-byte tokens (indentation, keywords, "):\n" ...): the
# server's token healing and prefix reuse must be exercised by tokens longer than one byte.
# Each merge's parts must already exist (a byte or an earlier merge's result).
_MERGE_PAIRS: tuple[tuple[str, str], ...] = (
    (" ", " "),
    ("  ", "  "),
    ("  ", " "),
    ("    ", "    "),
    ("r", "e"),
    ("i", "n"),
    ("d", "e"),
    ("de", "f"),
    (" ", "def"),
    ("s", "e"),
    ("l", "f"),
    ("se", "lf"),
    (" ", "self"),
    ("(", "self"),
    ("(", ")"),
    (")", ":"),
    ("):", "\n"),
    ("t", "u"),
    ("r", "n"),
    ("re", "tu"),
    ("retu", "rn"),
    (" ", "return"),
    ("o", "r"),
    ("f", "or"),
    (" ", "for"),
    (" ", "in"),
    ("i", "f"),
    (" ", "if"),
    ("e", "l"),
    ("el", "se"),
    ("el", "if"),
    (" ", "="),
    ("=", "="),
    (" =", "="),
    ("p", "r"),
    ("in", "t"),
    ("pr", "int"),
    ("i", "m"),
    ("or", "t"),
    ("im", "p"),
    ("imp", "ort"),
    ("o", "n"),
    ("on", "e"),
    ("N", "one"),
    (" ", "None"),
    ("c", "l"),
    ("a", "s"),
    ("as", "s"),
    ("cl", "ass"),
    (" ", "class"),
    ("a", "r"),
    ("e", "n"),
    ("l", "en"),
    ("s", "t"),
    ("a", "l"),
    (" ", "x"),
    (" ", "a"),
    (" ", "b"),
    ("(", "x"),
    ("(", "a"),
    (")", "\n"),
    (",", " "),
    ("1", "0"),
)


def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable code point mapping (what llama.cpp's BPE expects)."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    mapping: dict[int, str] = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def _encode(text: str, table: dict[int, str]) -> str:
    return "".join(table[b] for b in text.encode("utf-8"))


def _build_merges() -> tuple[list[str], list[str]]:
    """Return (merge strings "a b", merged token texts) in byte-unicode form, validated."""
    table = byte_to_unicode()
    known = {table[b] for b in range(256)}
    merges: list[str] = []
    results: list[str] = []
    for left, right in _MERGE_PAIRS:
        a, b = _encode(left, table), _encode(right, table)
        if a not in known or b not in known:
            raise RuntimeError(f"merge {left!r}+{right!r} uses a token not yet in the vocab")
        merged = a + b
        if merged in known:
            raise RuntimeError(f"merge {left!r}+{right!r} duplicates a token")
        known.add(merged)
        merges.append(f"{a} {b}")
        results.append(merged)
    return merges, results


MERGES, _MERGED_TOKENS = _build_merges()


def tiny_vocab() -> tuple[list[str], list[int]]:
    """Token texts and GGUF token types: ids 0-255 are byte b (id == byte value), then one
    token per merge, then the control tokens of SPECIAL_NAMES."""
    table = byte_to_unicode()
    tokens = [table[b] for b in range(256)] + list(_MERGED_TOKENS) + list(SPECIAL_NAMES)
    types = [int(gguf.TokenType.NORMAL)] * (256 + len(_MERGED_TOKENS))
    types += [int(gguf.TokenType.CONTROL)] * len(SPECIAL_NAMES)
    return tokens, types


N_VOCAB = 256 + len(_MERGED_TOKENS) + len(SPECIAL_NAMES)
SPECIAL_TOKENS: dict[str, int] = {
    name: 256 + len(_MERGED_TOKENS) + i for i, name in enumerate(SPECIAL_NAMES)
}


def _printable_bytes() -> set[int]:
    return set(range(0x20, 0x7F)) | {0x0A}


# ----------------------------------------------------------------------------- weights
#
# Why the weights are not simply random: the server compares results of different evaluation
# paths (a prefix restored from the KV cache plus a batch of new tokens, versus one fresh batch;
# ubatch 64 versus token by token).  llama.cpp keeps K/V in f16 and, depending on the path,
# rounds Q to f16 or not and accumulates attention in f16 or f32.  With random weights that soft
# attention noise moves logits by ~1e-2, enough to flip a greedy argmax every few hundred tokens.
# So every attention head here is either
#   * a *hard copy* head: Q and K are constant (built from a constant residual channel), RoPE alone
#     makes the score peak at one relative distance T with a gap of >40 nats, so the softmax is
#     exactly one-hot in f32 and f16, and the copied values (+-1) are exact in f16; or
#   * a *uniform* head (Q = 0): every score is exactly 0, so the weights are exactly 1/n and the
#     sum of +-1 values is exact in any order.
# All values feeding layer-1 attention are powers of two times +-1, so RMS norm is exact too.
# What remains is f32 summation-order noise (~1e-7 relative) in the FFN and output matmuls.
# The model therefore computes next token = F(last 7 tokens, mean of all token codes), with F a
# random nonlinear function (the layer-1 FFN): chaotic enough for varied gibberish, sensitive to
# the whole context (the uniform head), and stable across evaluation paths.

_SCALE = 1024.0  # magnitude of every residual entry before layer 1 (a power of two: exact norms)
_KAPPA = 32.0  # |k| per rotary pair of the constant keys
# Per-pair score amplitudes of the copy heads, from a linear program that maximizes the worst
# score gap between the target distance T (1..6) and every other distance < 8192 (and, at the
# first positions where T is not yet available, makes the nearest earlier token win).  The
# normalized worst gap is 0.115 (checked in tests/test_tiny_model.py).
_COPY_AMPLITUDES = (0.1, 0.663, 0.037, 0.044, 0.035, 0.033, 0.029, 0.058)
_COPY_SCORE = 1600.0  # sum of amplitudes: worst raw gap 184, i.e. 46 nats after the 1/4 scale
# Layer 0: heads 0-2 copy the tokens 1, 2, 3 back into residual blocks 1-3; head 3 is unused.
# Layer 1: heads 0, 1, 3 copy the tokens 4, 5, 6 back; head 2 averages over the whole context.
_LAYER0_TARGETS = (1, 2, 3, None)
_LAYER1_TARGETS = (4, 5, "mean", 6)
_CODE_DIMS = HEAD_DIM  # block 0 = the current token's code: [+1, 15 random signs]
# Balance of the layer-1 residual (rms ~3000): copies ~1000, context mean ~500, FFN ~2000.
_MEAN_GAIN = 4.0  # extra gain of the uniform head in the layer-1 output projection
_FFN_DOWN = 80.0
# Output biases, as weights on the constant channel (whose normed value is ~0.3): logits of
# printable tokens spread with std ~14 around their mean.
_FORBIDDEN_BIAS = -4000.0  # control tokens and non-printable bytes: ~ -1200, never chosen
_MULTIBYTE_BIAS = 20.0  # favour merged tokens, so healing of long tokens gets exercised
_NEWLINE_BIAS = 85.0


def rope_thetas() -> np.ndarray:
    """Per-pair rotation speeds as llama.cpp computes them (NORM rope, f32 theta_scale)."""
    theta_scale = float(np.float32(ROPE_FREQ_BASE) ** np.float32(-2.0 / HEAD_DIM))
    return np.array([theta_scale**i for i in range(HEAD_DIM // 2)], dtype=np.float64)


def copy_head_scores(target: int, distances: np.ndarray) -> np.ndarray:
    """Raw (unscaled) attention score of a copy head aimed at `target` for each distance."""
    amp = np.array(_COPY_AMPLITUDES) * _COPY_SCORE
    return np.cos(np.outer(distances - target, rope_thetas())) @ amp


def _grid(x: np.ndarray) -> np.ndarray:
    # cos/sin differ in the last bits between libms; rounding to a 1/1024 grid makes the stored
    # values the same everywhere.
    return (np.round(np.asarray(x, dtype=np.float64) * 1024.0) / 1024.0).astype(np.float32)


def _copy_query(target: int, n_const: float) -> np.ndarray:
    """Q rows of one copy head, as weights on the constant channel whose normed value is n_const.

    With K = (kappa, 0) per pair, q = a/kappa * exp(-i T theta) makes q.k after RoPE equal to
    a * cos((d - T) theta) for query-key distance d.
    """
    q = np.zeros(HEAD_DIM, dtype=np.float64)
    for i, (amp, theta) in enumerate(zip(_COPY_AMPLITUDES, rope_thetas(), strict=True)):
        mag = amp * _COPY_SCORE / _KAPPA / n_const
        q[2 * i] = mag * np.cos(target * theta)
        q[2 * i + 1] = -mag * np.sin(target * theta)
    return _grid(q)


class _Rand:
    """Uniform floats and signs straight from PCG64's raw 64-bit stream.

    The raw stream is the one part of numpy's RNG with a cross-version, cross-platform
    guarantee; converting 24 bits to float32 by a power-of-two scale is exact.
    """

    def __init__(self, seed: int) -> None:
        self._bits = np.random.PCG64(seed)

    def raw(self, n: int) -> np.ndarray:
        return self._bits.random_raw(n)

    def uniform(self, *shape: int, scale: float) -> np.ndarray:
        n = int(np.prod(shape))
        ints = (self.raw(n) >> np.uint64(40)).astype(np.int64) - (1 << 23)
        values = ints.astype(np.float32) * np.float32(2.0**-23)  # exact, in [-1, 1)
        return (values * np.float32(scale)).reshape(shape)


def _token_codes(rand: _Rand) -> np.ndarray:
    """A distinct [+1, 15 random signs] code per token (distinct, so no two tokens alias)."""
    seen: set[int] = set()
    codes = np.zeros((N_VOCAB, _CODE_DIMS), dtype=np.float32)
    tok = 0
    while tok < N_VOCAB:
        bits = int(rand.raw(1)[0] >> np.uint64(49))  # 15 bits
        if bits in seen:
            continue
        seen.add(bits)
        codes[tok, 0] = 1.0
        for j in range(1, _CODE_DIMS):
            codes[tok, j] = 1.0 if (bits >> (j - 1)) & 1 else -1.0
        tok += 1
    return codes


def _weights(seed: int) -> dict[str, np.ndarray]:
    """Seeded float32 weights, as numpy arrays in GGUF (row-major, out x in) layout."""
    rand = _Rand(seed)
    f32 = np.float32
    t: dict[str, np.ndarray] = {}
    ones = np.ones(N_EMBD, dtype=f32)

    # Block 0 holds the token code; 16 of 64 entries at +-1024 give RMS exactly 512.
    codes = _token_codes(rand)
    embd = np.zeros((N_VOCAB, N_EMBD), dtype=f32)
    embd[:, :_CODE_DIMS] = codes * f32(_SCALE)
    t["token_embd.weight"] = embd

    def attention(layer: int, targets: tuple[object, ...], n_const: float) -> None:
        p = f"blk.{layer}."
        wq = np.zeros((N_HEAD * HEAD_DIM, N_EMBD), dtype=f32)
        wk = np.zeros((N_HEAD_KV * HEAD_DIM, N_EMBD), dtype=f32)
        for h, target in enumerate(targets):
            if isinstance(target, int):
                wq[h * HEAD_DIM : (h + 1) * HEAD_DIM, 0] = _copy_query(target, n_const)
            # "mean" and unused heads keep Q = 0: scores exactly 0, weights exactly 1/n.
        for g in range(N_HEAD_KV):
            wk[g * HEAD_DIM : (g + 1) * HEAD_DIM : 2, 0] = f32(_KAPPA / n_const)
        t[p + "attn_q.weight"] = wq
        t[p + "attn_k.weight"] = wk

    # ---- layer 0: copy tokens t-1, t-2, t-3 into blocks 1-3 (exactly).
    attention(0, _LAYER0_TARGETS, n_const=2.0)
    wv = np.zeros((N_HEAD_KV * HEAD_DIM, N_EMBD), dtype=f32)
    for g in range(N_HEAD_KV):
        for j in range(_CODE_DIMS):
            wv[g * HEAD_DIM + j, j] = 0.5  # normed entries are +-2 -> V = +-1
    wo = np.zeros((N_EMBD, N_HEAD * HEAD_DIM), dtype=f32)
    for h, target in enumerate(_LAYER0_TARGETS):
        if target is not None:
            for j in range(HEAD_DIM):
                wo[(h + 1) * HEAD_DIM + j, h * HEAD_DIM + j] = f32(_SCALE)
    t["blk.0.attn_norm.weight"] = ones.copy()
    t["blk.0.attn_v.weight"] = wv
    t["blk.0.attn_output.weight"] = wo
    # No FFN in layer 0: its output would make layer-1 inputs inexact.
    t["blk.0.ffn_norm.weight"] = ones.copy()
    t["blk.0.ffn_gate.weight"] = np.zeros((N_FF, N_EMBD), dtype=f32)
    t["blk.0.ffn_up.weight"] = np.zeros((N_FF, N_EMBD), dtype=f32)
    t["blk.0.ffn_down.weight"] = np.zeros((N_EMBD, N_FF), dtype=f32)

    # ---- layer 1: residual is 64 entries of +-1024 (RMS exactly 1024, normed +-1).
    attention(1, _LAYER1_TARGETS, n_const=1.0)
    wv = np.zeros((N_HEAD_KV * HEAD_DIM, N_EMBD), dtype=f32)
    for j in range(_CODE_DIMS):
        wv[j, j] = 1.0  # KV head 0 (copy heads 0, 1): the token code
    for j in range(1, _CODE_DIMS):
        # KV head 1 (mean head 2, copy head 3): the code without its constant entry, so the
        # uniform average stays a small exact integer sum even in f16 accumulators.
        wv[HEAD_DIM + j, j] = 1.0
    # The output projection, FFN and head may be inexact: nothing downstream rounds to f16.
    wo = rand.uniform(N_EMBD, N_HEAD * HEAD_DIM, scale=256.0)
    mean_head = _LAYER1_TARGETS.index("mean")
    wo[:, mean_head * HEAD_DIM : (mean_head + 1) * HEAD_DIM] *= f32(_MEAN_GAIN)
    wo[0, :] = f32(0.0)  # keep channel 0 constant: it carries the output bias
    t["blk.1.attn_norm.weight"] = ones.copy()
    t["blk.1.attn_v.weight"] = wv
    t["blk.1.attn_output.weight"] = wo
    t["blk.1.ffn_norm.weight"] = ones.copy()
    t["blk.1.ffn_gate.weight"] = rand.uniform(N_FF, N_EMBD, scale=0.6)
    t["blk.1.ffn_up.weight"] = rand.uniform(N_FF, N_EMBD, scale=0.6)
    down = rand.uniform(N_EMBD, N_FF, scale=_FFN_DOWN)
    down[0, :] = f32(0.0)
    t["blk.1.ffn_down.weight"] = down

    t["output_norm.weight"] = ones.copy()

    # Output head: printable tokens get random rows; tokens that must not be generated
    # (control tokens, non-printable bytes) get a zero row and a large negative bias on the
    # constant channel, which keeps them far below every printable token.
    out = rand.uniform(N_VOCAB, N_EMBD, scale=3.0)
    printable = _printable_bytes()
    first_special = min(SPECIAL_TOKENS.values())
    for tok in range(N_VOCAB):
        if tok >= first_special or (tok < 256 and tok not in printable):
            out[tok, :] = f32(0.0)
            out[tok, 0] = f32(_FORBIDDEN_BIAS)
        elif tok >= 256:
            # Multi-byte tokens are favoured, so generated text exercises healing of long tokens.
            out[tok, 0] = f32(_MULTIBYTE_BIAS)
        else:
            out[tok, 0] = f32(0.0)
    # Single-line stop rules need newlines now and then: "\n" gets a context-independent logit
    # (only the bias), so it wins whenever the context gives no strong candidate (~5% of steps).
    out[0x0A, :] = f32(0.0)
    out[0x0A, 0] = f32(_NEWLINE_BIAS)
    t["output.weight"] = out
    return t


def write_tiny_gguf(path: Path, *, seed: int = 0) -> Path:
    """Write the tiny model to `path` (atomically) and return `path`.

    Same seed -> same bytes.  About 0.5 MB; takes well under a second.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tokens, types = tiny_vocab()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")

    writer = gguf.GGUFWriter(tmp, "llama")
    writer.add_name(f"lsp-complete tiny test model (seed {seed})")
    writer.add_file_type(int(gguf.LlamaFileType.ALL_F32))
    writer.add_vocab_size(N_VOCAB)
    writer.add_context_length(N_CTX_TRAIN)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD_KV)
    writer.add_rope_dimension_count(HEAD_DIM)
    writer.add_rope_freq_base(ROPE_FREQ_BASE)
    writer.add_layer_norm_rms_eps(RMS_EPS)

    writer.add_tokenizer_model("gpt2")
    # "qwen2" selects the same pre-tokenizer regex as the real default model.
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(MERGES)
    eot = SPECIAL_TOKENS["<|endoftext|>"]
    # Like Qwen2.5: <|endoftext|> doubles as bos/eos/eot/pad, and no BOS is prepended.
    writer.add_bos_token_id(eot)
    writer.add_eos_token_id(eot)
    writer.add_eot_token_id(eot)
    writer.add_pad_token_id(eot)
    writer.add_add_bos_token(False)
    # gguf 0.19 has keys but no add_* helpers for the FIM ids.
    keys = gguf.Keys.Tokenizer
    for key, name in (
        (keys.FIM_PRE_ID, "<|fim_prefix|>"),
        (keys.FIM_SUF_ID, "<|fim_suffix|>"),
        (keys.FIM_MID_ID, "<|fim_middle|>"),
        (keys.FIM_PAD_ID, "<|fim_pad|>"),
        (keys.FIM_REP_ID, "<|repo_name|>"),
        (keys.FIM_SEP_ID, "<|file_sep|>"),
    ):
        writer.add_uint32(key, SPECIAL_TOKENS[name])

    for name, array in _weights(seed).items():
        writer.add_tensor(name, array)

    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()
    # Atomic so that concurrent test workers never load a half-written file.
    os.replace(tmp, path)
    return path
