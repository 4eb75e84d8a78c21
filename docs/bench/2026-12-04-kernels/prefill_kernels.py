"""Prefill and decode speed of one GGUF under llama.cpp's CPU kernels: plain, or with the
chosen weight types moved to an extra buffer type (CPU_REPACK, AMX) by tensor_buft_overrides.

    python prefill_kernels.py MODEL.gguf plain
    python prefill_kernels.py MODEL.gguf CPU_REPACK Q4_K      # the blk.* tensors of that type
    python prefill_kernels.py MODEL.gguf --requantize OUT.gguf q8_0|q4_0

Prints the prefill time of 160, 160 and 400 tokens and the median decode time of 16 tokens
(greedy), with the tokens, so that outputs can be compared.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
import time
from pathlib import Path

import gguf
import llama_cpp
import llama_cpp.llama_cpp as lib
import numpy as np

FTYPES = {"q8_0": 7, "q4_0": 2}


class Override(ctypes.Structure):
    _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]


def extra_buffer_types() -> dict[str, int]:
    """The CPU device's extra buffer types by name (AMX, CPU_REPACK, ...)."""
    folder = os.path.join(os.path.dirname(llama_cpp.__file__), "lib")
    ggml = ctypes.CDLL(os.path.join(folder, "libggml.so"))
    base = ctypes.CDLL(os.path.join(folder, "libggml-base.so"))
    ggml.ggml_backend_dev_by_type.restype = ctypes.c_void_p
    ggml.ggml_backend_dev_by_type.argtypes = [ctypes.c_int]
    base.ggml_backend_dev_backend_reg.restype = ctypes.c_void_p
    base.ggml_backend_dev_backend_reg.argtypes = [ctypes.c_void_p]
    base.ggml_backend_reg_get_proc_address.restype = ctypes.c_void_p
    base.ggml_backend_reg_get_proc_address.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    base.ggml_backend_buft_name.restype = ctypes.c_char_p
    base.ggml_backend_buft_name.argtypes = [ctypes.c_void_p]
    device = ggml.ggml_backend_dev_by_type(0)  # the CPU
    address = base.ggml_backend_reg_get_proc_address(
        base.ggml_backend_dev_backend_reg(device), b"ggml_backend_dev_get_extra_bufts")
    listed = ctypes.CFUNCTYPE(ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)(address)(device)
    found, i = {}, 0
    while listed[i]:
        found[base.ggml_backend_buft_name(listed[i]).decode()] = listed[i]
        i += 1
    return found


def main(path: str, mode: str, weight_types: list[str]) -> None:
    lib.llama_backend_init()
    params = lib.llama_model_default_params()
    params.use_extra_bufts = False
    if mode != "plain":
        names = [t.name for t in gguf.GGUFReader(path).tensors
                 if t.tensor_type.name in weight_types and t.name.startswith("blk.")]
        pattern = ("^(" + "|".join(re.escape(n) for n in names) + ")$").encode()
        overrides = (Override * 2)()
        overrides[0].pattern, overrides[0].buft = pattern, extra_buffer_types()[mode]
        params.tensor_buft_overrides = ctypes.cast(overrides, ctypes.c_void_p)
    model = lib.llama_model_load_from_file(path.encode(), params)
    cparams = lib.llama_context_default_params()
    cparams.n_ctx, cparams.n_batch, cparams.n_ubatch = 2048, 512, 512
    cparams.n_threads = cparams.n_threads_batch = 2
    ctx = lib.llama_init_from_model(model, cparams)
    vocab = lib.llama_model_get_vocab(model)
    text = Path(lib.__file__).with_name("llama.py").read_text()[:4000].encode()
    tokens = (lib.llama_token * 4096)()
    lib.llama_tokenize(vocab, text, len(text), tokens, 4096, True, False)
    memory = lib.llama_get_memory(ctx)
    for count in (160, 160, 400):
        lib.llama_memory_clear(memory, True)
        started = time.perf_counter()
        assert lib.llama_decode(ctx, lib.llama_batch_get_one(tokens, count)) == 0
        print(f"prefill {count}: {(time.perf_counter() - started) * 1000:.0f} ms")
    one, out, times = (lib.llama_token * 1)(), [], []
    n_vocab = lib.llama_vocab_n_tokens(vocab)
    for _ in range(16):
        logits = np.ctypeslib.as_array(lib.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))
        one[0] = int(logits.argmax())
        out.append(one[0])
        started = time.perf_counter()
        assert lib.llama_decode(ctx, lib.llama_batch_get_one(one, 1)) == 0
        times.append(time.perf_counter() - started)
    print(f"decode ms/token {sorted(times)[len(times) // 2] * 1000:.1f} tokens {out}")


def requantize(path: str, out: str, ftype: str) -> None:
    lib.llama_backend_init()
    params = lib.llama_model_quantize_default_params()
    params.nthread, params.ftype, params.allow_requantize = 2, FTYPES[ftype], True
    assert lib.llama_model_quantize(path.encode(), out.encode(), params) == 0


if __name__ == "__main__":
    if sys.argv[2] == "--requantize":
        requantize(sys.argv[1], sys.argv[3], sys.argv[4])
    else:
        main(sys.argv[1], sys.argv[2], sys.argv[3].split(",") if len(sys.argv) > 3 else [])
