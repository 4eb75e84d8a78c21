"""The tiny GGUF (lsp_complete.testing) on the real llama.cpp: every inference test relies on it."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
from llama_cpp import Llama

from lsp_complete.testing import tiny_gguf as tg
from lsp_complete.testing import write_tiny_gguf
from tests.work_count import work_of

FIM_PROMPT = "<|fim_prefix|>def add(a, b):\n    <|fim_suffix|>\n<|fim_middle|>"
PROMPTS = [
    FIM_PROMPT,
    "<|fim_prefix|>import os\n\nclass Foo:\n    def bar(self):\n        "
    "<|fim_suffix|>\n<|fim_middle|>",
    "<|file_sep|>util.py\ndef f(x):\n    return",
    "for i in range(10):\n    print(",
]
PRINTABLE = {bytes([b]) for b in range(0x20, 0x7F)} | {b"\n"}


def _llama(path: Path, **kwargs: object) -> Llama:
    options: dict[str, object] = {"n_ctx": 512, "n_threads": 1, "verbose": False, "seed": 0}
    return Llama(model_path=str(path), **(options | kwargs))


@pytest.fixture(scope="module")
def llm(tiny_model_path: Path) -> Llama:
    return _llama(tiny_model_path)


def _greedy(llm: Llama, prompt: str, n: int) -> list[int]:
    tokens = llm.tokenize(prompt.encode(), add_bos=False, special=True)
    out: list[int] = []
    for tok in llm.generate(tokens, temp=0.0, top_k=1, reset=True):
        out.append(tok)
        if len(out) == n or llm.token_eos() == tok:
            break
    return out


def _greedy_logits(
    llm: Llama, prompt: list[int], n: int, *, batch: bool
) -> tuple[list[int], np.ndarray]:
    """Greedy continuation by argmax, prompt evaluated in one batch or token by token.

    Returns the tokens and the logits rows that chose them (needs logits_all=True).
    """
    llm.reset()
    if batch:
        llm.eval(prompt)
    else:
        for tok in prompt:
            llm.eval([tok])
    out: list[int] = []
    rows = []
    for _ in range(n):
        row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        rows.append(row)
        out.append(int(np.argmax(row)))
        llm.eval([out[-1]])
    return out, np.array(rows)


# ------------------------------------------------------------------------------- the file


def test_write_is_deterministic_small_and_fast(tmp_path: Path) -> None:
    work = work_of(lambda: write_tiny_gguf(tmp_path / "a.gguf"), lambda name: name == tg.__file__)
    a, lines, peak = work.result, work.lines, work.peak
    b = write_tiny_gguf(tmp_path / "sub" / "b.gguf", seed=0)
    c = write_tiny_gguf(tmp_path / "c.gguf", seed=1)
    assert a == tmp_path / "a.gguf"
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    assert a.stat().st_size < 1_000_000
    # Fast by the work it does, not by a stopwatch (CI machines are shared; it takes a few
    # ms): weights in closed form from the seed, no search or fitting at write time, which
    # would run many more lines or allocate far more. (~15,500 lines and ~1.5 MiB now.)
    assert lines < 100_000, lines
    assert peak < 8 << 20, f"{peak / 2**20:.1f} MiB"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.gguf", "c.gguf", "sub"]  # no temp


def test_metadata(tiny_model_path: Path) -> None:
    reader = gguf.GGUFReader(tiny_model_path)

    def value(key: str) -> object:
        return reader.fields[key].contents()

    assert value("general.architecture") == "llama"
    assert value("general.file_type") == int(gguf.LlamaFileType.ALL_F32)
    assert value("llama.block_count") == 2
    assert value("llama.context_length") == 4096
    assert value("llama.attention.head_count") == 4
    assert value("llama.attention.head_count_kv") == 2
    assert value("llama.rope.dimension_count") == tg.HEAD_DIM
    assert value("tokenizer.ggml.model") == "gpt2"
    assert value("tokenizer.ggml.pre") == "qwen2"
    special = tg.SPECIAL_TOKENS
    assert value(gguf.Keys.Tokenizer.EOS_ID) == special["<|endoftext|>"]
    assert value(gguf.Keys.Tokenizer.EOT_ID) == special["<|endoftext|>"]
    assert value(gguf.Keys.Tokenizer.FIM_PRE_ID) == special["<|fim_prefix|>"]
    assert value(gguf.Keys.Tokenizer.FIM_SUF_ID) == special["<|fim_suffix|>"]
    assert value(gguf.Keys.Tokenizer.FIM_MID_ID) == special["<|fim_middle|>"]
    assert value(gguf.Keys.Tokenizer.FIM_SEP_ID) == special["<|file_sep|>"]
    assert all(t.data.dtype == np.float32 for t in reader.tensors)
    assert len(reader.tensors) == 3 + 9 * 2


def test_copy_heads_attend_hard() -> None:
    """The exactness argument in tiny_gguf needs one-hot attention: >= 40 nats of gap."""
    kq_scale = 1.0 / np.sqrt(tg.HEAD_DIM)
    distances = np.arange(8192)
    for target in range(1, 7):
        scores = tg.copy_head_scores(target, distances) * kq_scale
        assert scores[target] - np.delete(scores, target).max() >= 40.0
        # Before position `target` exists, the nearest earlier token must win just as clearly.
        for pos in range(1, target):
            assert scores[pos] - scores[:pos].max() >= 40.0


# ------------------------------------------------------------------------- on llama.cpp


def test_loads_with_expected_vocab(llm: Llama) -> None:
    assert llm.n_vocab() == tg.N_VOCAB
    assert llm.token_eos() == tg.SPECIAL_TOKENS["<|endoftext|>"]
    assert llm.n_ctx() == 512


@pytest.mark.parametrize("name", tg.SPECIAL_NAMES)
def test_special_tokens_are_single_tokens(llm: Llama, name: str) -> None:
    assert llm.tokenize(name.encode(), add_bos=False, special=True) == [tg.SPECIAL_TOKENS[name]]
    # As plain text (special=False) they must not become control tokens.
    plain = llm.tokenize(name.encode(), add_bos=False, special=False)
    assert len(plain) > 1 and tg.SPECIAL_TOKENS[name] not in plain


def test_fim_prompt_tokenizes_with_control_tokens(llm: Llama) -> None:
    tokens = llm.tokenize(FIM_PROMPT.encode(), add_bos=False, special=True)
    ids = tg.SPECIAL_TOKENS
    assert tokens[0] == ids["<|fim_prefix|>"]
    assert tokens[-1] == ids["<|fim_middle|>"]
    assert tokens.count(ids["<|fim_suffix|>"]) == 1


@pytest.mark.parametrize(
    "text",
    [
        "def foo(x):\n    return x",
        "import os\n\nclass A:\n    def f(self):\n        if x == None:\n            pass\n",
        "  \t mixed\r\n whitespace\n\n\n",
        "unicode: é ü 中文 🙂",
        "x=1;y=[a,b]  # comment",
    ],
)
def test_text_round_trips(llm: Llama, text: str) -> None:
    tokens = llm.tokenize(text.encode(), add_bos=False)
    assert llm.detokenize(tokens).decode() == text


def test_code_uses_multi_byte_tokens(llm: Llama) -> None:
    """Token healing and prefix reuse must see tokens longer than one byte."""
    tokens = llm.tokenize(b"def foo(x):\n    return x", add_bos=False)
    pieces = [llm.detokenize([t]) for t in tokens]
    assert pieces == [b"def", b" ", b"f", b"o", b"o", b"(x", b"):\n", b"   ", b" return", b" x"]


def test_greedy_fim_generation_is_printable_and_reproducible(tiny_model_path: Path) -> None:
    first = _greedy(_llama(tiny_model_path), FIM_PROMPT, 40)
    second = _greedy(_llama(tiny_model_path), FIM_PROMPT, 40)
    assert first == second
    assert len(first) == 40  # no end token
    special = set(tg.SPECIAL_TOKENS.values())
    llm = _llama(tiny_model_path)
    for tok in first:
        assert tok not in special
        assert all(bytes([b]) in PRINTABLE for b in llm.detokenize([tok]))
    assert any(tok >= 256 for tok in first)  # merged tokens get generated too


def test_generation_has_newlines_and_no_end_tokens(llm: Llama) -> None:
    special = set(tg.SPECIAL_TOKENS.values())
    text = b""
    for prompt in PROMPTS:
        out = _greedy(llm, prompt, 60)
        assert len(out) == 60 and not special & set(out)
        piece = llm.detokenize(out)
        assert piece.strip()
        text += piece
    # Single-line stop rules need newlines; the model emits one every ~10-20 tokens.
    assert text.count(b"\n") >= 4
    assert b" " in text


@pytest.mark.parametrize("flash_attn", [False, True])
def test_batch_and_token_by_token_agree(tiny_model_path: Path, flash_attn: bool) -> None:
    """The cache-equivalence premise: evaluation paths differ only by f32 rounding noise."""
    llm = _llama(tiny_model_path, logits_all=True, flash_attn=flash_attn)
    for prompt in PROMPTS:
        tokens = llm.tokenize(prompt.encode(), add_bos=False, special=True)
        batch_out, batch_rows = _greedy_logits(llm, tokens, 30, batch=True)
        single_out, single_rows = _greedy_logits(llm, tokens, 30, batch=False)
        assert batch_out == single_out
        # Soft attention over f16 KV would differ by ~1e-2; the crafted heads keep it ~1e-5.
        assert np.abs(batch_rows - single_rows).max() < 1e-2


def test_small_ubatch_matches_one_batch(tiny_model_path: Path) -> None:
    """The server evaluates in ubatches of 64 and in restored-prefix + suffix chunks."""
    text = "\n".join(f"def f{i}(self, x):\n    return x + {i}" for i in range(30))
    whole = _llama(tiny_model_path, logits_all=True, n_ctx=1024)
    chunked = _llama(tiny_model_path, logits_all=True, n_ctx=1024, n_batch=64, n_ubatch=7)
    tokens = whole.tokenize(text.encode(), add_bos=False)
    assert len(tokens) > 200
    a, _ = _greedy_logits(whole, tokens, 20, batch=True)
    b, _ = _greedy_logits(chunked, tokens, 20, batch=True)
    assert a == b


def test_output_depends_on_far_context(llm: Llama) -> None:
    """A stale or wrong cached prefix must be able to change the result (the mean head)."""
    body = "\n".join(f"    v{i} = v{i - 1} + 1" for i in range(1, 25)) + "\n    return"
    outs = {
        tuple(_greedy(llm, f"def {name}():\n{body}", 20))
        for name in ("alpha", "beta", "gamma", "delta")
    }
    assert len(outs) > 1
