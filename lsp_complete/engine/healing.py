"""Token healing and stop strings on a server: constraints that make it generate the healed
characters first (a GBNF grammar for llama.cpp servers, a regular expression for vLLM), and the
stop strings it may apply itself without cutting inside them.

The local engine gets the same result by masking tokens (`LlamaEngine._heal_candidates`).
"""

from __future__ import annotations

from lsp_complete.engine.base import GenerationRequest


def server_stops(request: GenerationRequest) -> list[str]:
    """Stop strings the server may apply itself. A server sees the healed characters as output,
    so a stop string that could match inside them (or straddle their end) stays client-side."""
    stops = list(request.stop) + (["\n"] if request.single_line else [])
    heal = request.heal

    def safe(stop: str) -> bool:
        return bool(stop) and stop not in heal and not any(
            heal.endswith(stop[:k]) for k in range(1, len(stop))
        )

    return list(dict.fromkeys(s for s in stops if safe(s)))


def _code_after(heal: str, code: bool) -> bool:
    """Whether code must follow the healed text: asked for, and the heal is a blank run."""
    return code and bool(heal) and not heal.strip(" \t")


def gbnf_prefix_grammar(heal: str, code: bool = False) -> str:
    """GBNF that forces the output to start with `heal` and allows anything after it (with
    `code`, a healed space or tab must be followed by code, as in the local engine)."""
    out = []
    for ch in heal:
        point = ord(ch)  # not `code`: that is the parameter, read after the loop
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif point < 0x20 or point == 0x7F:
            out.append(f"\\x{point:02X}")
        else:
            out.append(ch)
    if _code_after(heal, code):
        return f'root ::= "{"".join(out)}" [^ \\t\\r\\n] .*'
    return f'root ::= "{"".join(out)}" .*'


def regex_prefix(heal: str, code: bool = False) -> str:
    """A regular expression (vLLM structured outputs) with the same meaning as the grammar."""
    out = []
    for ch in heal:
        if ch in ".^$*+?()[]{}|\\/":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    if _code_after(heal, code):
        return "".join(out) + r"\S[\s\S]*"
    return "".join(out) + r"[\s\S]*"
