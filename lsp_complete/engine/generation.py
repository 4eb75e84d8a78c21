"""One request's generation on one KV sequence (llama.cpp's `server_slot` idea): greedy
decoding token by token, as far as every rule is concerned, with the bookkeeping of lossless
speculation (the pending draft, where it sits in the sequence, which logits row predicts the
next token, and what each verify step accepted).

It owns that per-request state and nothing engine-wide: the vocabulary chooses tokens, the
decoder runs decodes, the draft policy sizes drafts, and the engine prepares the sequence (the
prompt decoded, its last row's logits ready) and keeps what the drafter learns across requests.
"""

from __future__ import annotations

import codecs
import time

import numpy as np

from lsp_complete.engine.base import (
    CancelToken,
    EngineCounters,
    GenerationRequest,
    GenerationResult,
)
from lsp_complete.engine.decoder import Decoder
from lsp_complete.engine.sequences import KVSequence
from lsp_complete.engine.speculation import Draft, Drafter, DraftPolicy, TokenHistory
from lsp_complete.engine.stream_rules import TextRules
from lsp_complete.engine.vocabulary import Vocabulary


class Generation:
    def __init__(self, decoder: Decoder, vocabulary: Vocabulary, counters: EngineCounters,
                 policy: DraftPolicy, near_tie: float, seq: KVSequence,
                 request: GenerationRequest, cancel: CancelToken, result: GenerationResult,
                 drafter: Drafter | None) -> None:
        self.decoder = decoder
        self.vocabulary = vocabulary
        self.counters = counters
        self.policy = policy
        self.near_tie = near_tie
        self.seq = seq
        self.request = request
        self.cancel = cancel
        self.result = result
        self.drafter = drafter
        # The tokens drafts are looked up in: the prompt, then what is generated.
        self.history = (TokenHistory(seq.tokens, request.max_tokens)
                        if drafter is not None else None)
        self.pending: list[int] = []  # the last decode's tokens: the chosen token, its draft
        self.kind = ""  # where that draft came from
        self.base = 0  # where `pending` starts in the sequence
        self.row = -1  # the logits row of the last decode that predicts the next token

    def run(self, first: int | None = None) -> None:
        """Generate into `result`; with `first`, that token is the first one instead of the
        greedy choice (an alternative).

        With speculation, a step that needs the next logits decodes the chosen token together
        with a draft of what may follow, with logits for each; while the draft agrees with the
        tokens greedy decoding picks from those logits, the next logits are already there.
        At the first disagreement the rest of the draft leaves the KV cache: output, stop
        rules, healing, max_tokens and cancellation are exactly those of a plain step each.
        """
        request, result, cancel = self.request, self.result, self.cancel
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        heal = request.heal.encode("utf-8")
        code_next = False  # healed spaces ended by a token of their own: code comes next
        rules = TextRules(request)
        for step in range(request.max_tokens):
            if cancel.cancelled:
                result.stop_reason = "cancelled"
                break
            probability: float | None
            if step == 0 and first is not None:  # chosen, not the model's pick: sure
                token, lead = first, np.inf
                probability = 1.0 if request.probabilities else None
            else:
                token, lead, probability = self._pick(heal, code_next, gap=self.row >= 0)
            if lead < self.near_tie:  # a near-tie in batched logits: decide as a plain step
                if not self._redecide():
                    result.stop_reason = "cancelled"
                    break
                token, _, probability = self._pick(heal, code_next)
            if self.vocabulary.stop_mask[token]:
                result.stop_reason = "eog"
                break
            piece = self.vocabulary.pieces[token]
            code_next = request.heal_code and piece == heal and not piece.strip()
            heal = heal[len(piece):] if heal.startswith(piece) else b""
            if step == 0:
                result.first_token = token
            result.generated_tokens += 1
            self.counters.tokens_generated += 1
            if self.history is not None:
                self.history.append(token)
            reason = rules.feed(decoder.decode(piece))
            if probability is not None:
                result.token_probabilities.append(probability)
                result.token_ends.append(len(rules.text))
            if reason is not None:
                result.stop_reason = reason
                break
            if step == request.max_tokens - 1:
                result.stop_reason = "max_tokens"
                break
            if 0 <= self.row < len(self.pending) - 1 and self.pending[self.row + 1] == token:
                self.row += 1  # the draft guessed this token: its logits are computed already
                continue
            if not self._step(token, request.max_tokens - step - 2):
                result.stop_reason = "cancelled"
                self.row = -1
                break
        if self.row >= 0:  # stopped inside a draft: its unjudged rest leaves the KV
            self._verified(len(self.pending) - 1, self.row, judged_all=False)
            self.decoder.table.truncate(self.seq, self.base + self.row + 1)
        result.text = rules.text

    def _pick(self, heal: bytes, code_next: bool,
              gap: bool = False) -> tuple[int, float, float | None]:
        return self.vocabulary.pick(self.decoder.logits(self.row), heal,
                                    self.request.heal_code, gap, code_next,
                                    self.request.probabilities)

    def _redecide(self) -> bool:
        """Drop the draft from the current row on and decode that row's token alone, so its
        logits are a plain step's. False when cancelled."""
        self._verified(len(self.pending) - 1, self.row, judged_all=False)
        self.decoder.table.truncate(self.seq, self.base + self.row)
        self.pending = self.pending[self.row : self.row + 1]
        self.base, self.row = self.base + self.row, -1
        if not self.decoder.decode(self.seq, self.pending, True, self.cancel, abortable=False):
            return False
        self.counters.generation_decodes += 1
        self.counters.near_ties += 1
        return True

    def _step(self, token: int, room: int) -> bool:
        """Decode `token` with a draft of what may follow (`room`: how many more tokens
        max_tokens lets the draft yield). False when cancelled."""
        if self.row >= 0:  # the draft ends here: accepted up to `row`, the rest leaves the KV
            self._verified(len(self.pending) - 1, self.row, judged_all=True)
            self.decoder.table.truncate(self.seq, self.base + self.row + 1)
        draft = self._draft(room)
        self.pending, self.kind = [token, *draft.tokens], draft.kind
        self.base = len(self.seq.tokens)
        started = time.perf_counter()
        rows = len(self.pending) if draft.tokens else True
        if not self.decoder.decode(self.seq, self.pending, rows, self.cancel, abortable=False):
            return False
        if self.drafter is not None:  # what each size of decode costs here sizes the drafts
            self.policy.costs.observe(len(self.pending), time.perf_counter() - started)
        self.counters.generation_decodes += 1
        self.row = 0 if draft.tokens else -1
        return True

    def _draft(self, room: int) -> Draft:
        """The draft to verify with the next decode (none: a plain step). `room` is how many
        more tokens max_tokens lets the verify step yield beyond the model's own next one."""
        limit = min(room, self.policy.max_draft, self.decoder.n_batch - 1)
        if self.drafter is None or self.history is None or limit <= 0:
            return Draft([], "")
        draft = self.drafter.propose(self.history, limit)
        if draft is None or not draft.tokens:
            return Draft([], "")
        length = self.policy.length(draft.kind, len(draft.tokens))
        return Draft(draft.tokens[:length], draft.kind)

    def _verified(self, proposed: int, accepted: int, judged_all: bool) -> None:
        """Count a verified draft: `accepted` of its `proposed` tokens, in a row."""
        self.result.verify_steps += 1
        self.result.draft_tokens += proposed
        self.result.accepted_tokens += accepted
        self.counters.drafts_verified += 1
        self.counters.draft_tokens += proposed
        self.counters.draft_accepted += accepted
        self.policy.record(self.kind, proposed, accepted, judged_all)
