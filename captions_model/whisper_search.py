"""The final pass's search over Whisper's decoder: batched beam search with per-utterance shallow fusion
(``Booster``), the loop guard, and teacher-forced rescoring of candidate texts.

``WhisperSearch`` holds the decoding half of ``captions_model.whisper_final.FinalPassModel`` (which builds
the special tokens, the prompt and the suppression masks it reads); the network is
``captions_model.whisper_network``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch
from tokenizers import Tokenizer
from torch import Tensor

from captions_model.whisper_network import WhisperModel

__all__ = ["Booster", "Hypothesis", "SpecialTokens", "WhisperSearch"]


@dataclass(frozen=True)
class SpecialTokens:
    """Ids of the special tokens the decoding uses."""

    sot: int
    eot: int
    no_timestamps: int
    no_speech: int
    blank: int


@dataclass
class Hypothesis:
    """One decoded utterance: text tokens (no prompt, no end-of-text), the stripped text, the model's own
    sum/average log-probability (including end-of-text when emitted), the no-speech probability, and the
    total booster score that was added to the ranking score (``sum_logprob + boost``)."""

    tokens: list[int]
    text: str
    sum_logprob: float
    avg_logprob: float
    no_speech_prob: float
    boost: float


class Booster(Protocol):
    """Shallow-fusion scorer over a per-utterance phrase graph, consulted during the beam search.

    A hypothesis carries an integer state, starting at ``initial_state()``. ``scores(state)`` gives, for
    every token id, the boost to add to its log-probability and the state after it (dense, length
    ``vocab_size``); only text tokens are boosted. ``final_score(state)`` is added when the hypothesis emits
    end-of-text (e.g. to take back the boost of an unfinished phrase).
    """

    def initial_state(self) -> int: ...

    def scores(self, state: int) -> tuple[np.ndarray, np.ndarray]: ...

    def final_score(self, state: int) -> float: ...


@dataclass
class _Beam:
    """A live hypothesis of the search."""

    tokens: list[int]
    logprob: float
    boost: float
    state: int
    ended: bool = False
    # (logprob, boost, state) after each prefix of ``tokens`` (entry j: after j tokens), to cut loops.
    history: list[tuple[float, float, int]] = field(default_factory=list)

    def extended(self, token: int, logprob: float, boost: float, state: int) -> _Beam:
        """This hypothesis followed by ``token``."""
        history = self.history or [(self.logprob, self.boost, self.state)]
        return _Beam(self.tokens + [token], logprob, boost, state, False, history + [(logprob, boost, state)])

    def truncated(self, n: int) -> _Beam:
        """The hypothesis cut to its first ``n`` tokens (scores and state as they were then)."""
        logprob, boost, state = self.history[n]
        return _Beam(self.tokens[:n], logprob, boost, state, False, self.history[: n + 1])

    @property
    def total(self) -> float:
        return self.logprob + self.boost


def _repeated_block(tokens: list[int], min_len: int) -> int:
    """Length of a block of >= ``min_len`` tokens that ``tokens`` ends with twice in a row, else 0."""
    n = len(tokens)
    for size in range(min_len, n // 2 + 1):
        if tokens[n - size :] == tokens[n - 2 * size : n - size]:
            return size
    return 0


class WhisperSearch:
    """Beam search and rescoring over ``model``'s decoder, for encoder output of ``FinalPassModel.encode``.

    The attributes are set by ``FinalPassModel``: the tokenizer, the special tokens, the decoding prompt, the
    token suppression masks (every step / the first step) and the mask of text tokens (those a booster may
    boost)."""

    model: WhisperModel
    tokenizer: Tokenizer
    special: SpecialTokens
    vocab_size: int
    text_token_limit: int
    prompt: list[int]
    _suppress: Tensor
    _suppress_first: Tensor
    _text_mask: Tensor

    # ------------------------------------------------------------------ decoder helpers

    def _cross(self, encoded: Tensor, lengths: Tensor) -> tuple[list[tuple[Tensor, Tensor]], Tensor | None]:
        """Cross keys/values of every block and the key mask [G, 1, 1, T] (None when nothing is padded)."""
        cross = self.model.decoder.cross_keys_values(encoded)
        t = encoded.shape[1]
        mask = None
        if bool((lengths < t).any()):
            mask = (torch.arange(t)[None, :] < lengths[:, None])[:, None, None, :]
        return cross, mask

    def _logprobs(self, logits: Tensor, first: bool) -> Tensor:
        """Suppress tokens on logits [..., V], then log-softmax (the order Whisper uses)."""
        suppress = self._suppress_first if first else self._suppress
        return torch.log_softmax(logits.masked_fill(suppress, float("-inf")), dim=-1)

    def text(self, tokens: list[int]) -> str:
        """Decoded text of text tokens, stripped."""
        return str(self.tokenizer.decode([t for t in tokens if t < self.text_token_limit])).strip()

    # ------------------------------------------------------------------ beam search

    @torch.inference_mode()
    def decode(
        self,
        encoded: Tensor,
        lengths: Tensor,
        *,
        beam_size: int = 4,
        max_tokens: list[int],
        boosters: list[Booster | None] | None = None,
        length_penalty: float = 1.0,
        min_repeat: int = 3,
        evidence_margin: float | None = None,
    ) -> list[Hypothesis]:
        """Beam search (``beam_size`` 1 = greedy) over all utterances at once; one best hypothesis each.

        ``max_tokens[i]`` caps utterance i's text tokens (at least 1, at most the decoder's 446 free
        positions). ``boosters[i]`` (optional) adds shallow-fusion scores to text tokens; the ranking score is
        ``sum_logprob + boost``, and finished hypotheses are ranked by it divided by
        ``len(tokens) ** length_penalty``.

        Loop guard: on unpadded short audio Whisper tends to repeat the whole transcript instead of ending
        it. When a hypothesis's tokens end with the same block of >= ``min_repeat`` tokens twice in a row,
        it is finished before the second copy (scored as of then, without an end-of-text log-probability).
        ``min_repeat=0`` disables this.

        ``evidence_margin``: a booster's positive score is added only to tokens whose own log-probability is
        within this many nats of the best token's at that step (a term is favoured where Whisper finds it
        plausible, not forced in against what it hears); None: everywhere.
        """
        b = encoded.shape[0]
        if len(max_tokens) != b:
            raise ValueError("max_tokens needs one entry per utterance")
        boosters = boosters if boosters is not None else [None] * b
        if len(boosters) != b:
            raise ValueError("boosters needs one entry per utterance")
        k = max(1, int(beam_size))
        dec = self.model.decoder
        room = dec.positions.shape[0] - len(self.prompt)  # the decoder's context bounds the output too
        limits = [max(1, min(int(m), room)) for m in max_tokens]
        any_booster = any(x is not None for x in boosters)
        cross, cross_mask = self._cross(encoded, lengths)
        boost_cache: dict[tuple[int, int], tuple[Tensor, np.ndarray]] = {}
        zeros = torch.zeros(self.vocab_size)

        def boost_of(i: int, state: int) -> tuple[Tensor, np.ndarray | None]:
            booster = boosters[i]
            if booster is None:
                return zeros, None
            hit = boost_cache.get((i, state))
            if hit is None:
                scores, nxt = booster.scores(state)
                vec = torch.from_numpy(np.asarray(scores, dtype=np.float32)).masked_fill(
                    ~self._text_mask, 0.0
                )
                hit = (vec, np.asarray(nxt, dtype=np.int64))
                boost_cache[(i, state)] = hit
            return hit

        # Prompt: one row per utterance, expanded to k rows after the first step.
        prompt = torch.tensor([self.prompt] * b)
        logits, cache = dec(prompt, 0, None, cross, cross_mask)
        no_speech = torch.softmax(logits[:, 0], dim=-1)[:, self.special.no_speech].tolist()
        step_logits = logits[:, -1]
        cache = [(kk.repeat_interleave(k, 0), vv.repeat_interleave(k, 0)) for kk, vv in cache]
        step_logits = step_logits.repeat_interleave(k, 0)
        beams: list[list[_Beam]] = []
        for i in range(b):
            init = boosters[i].initial_state() if boosters[i] is not None else 0  # type: ignore[union-attr]
            # Only the first beam is live at the first step (the others are copies).
            beams.append([_Beam([], 0.0 if j == 0 else float("-inf"), 0.0, init) for j in range(k)])
        finished: list[list[_Beam]] = [[] for _ in range(b)]
        active = list(range(b))  # utterances still in the decoder batch, in batch order
        offset = len(self.prompt)
        step = 0
        while active:
            logp = self._logprobs(step_logits, first=step == 0)  # [len(active) * k, V]
            boost_rows = []
            states_next: list[np.ndarray | None] = []
            for i in active:
                for beam in beams[i]:
                    vec, nxt = boost_of(i, beam.state)
                    boost_rows.append(vec)
                    states_next.append(nxt)
            boost = torch.stack(boost_rows) if any_booster else torch.zeros(1, 1).expand_as(logp)
            if any_booster and evidence_margin is not None:
                unsupported = (boost > 0) & (logp < logp.max(dim=-1, keepdim=True).values - evidence_margin)
                boost = boost.masked_fill(unsupported, 0.0)
            base = torch.tensor([beam.total for i in active for beam in beams[i]])
            cand = (logp + boost + base[:, None]).view(len(active), k * self.vocab_size)
            top_scores, top_idx = cand.topk(min(2 * k + 1, cand.shape[1]), dim=1)
            top_idx_l, top_scores_l = top_idx.tolist(), top_scores.tolist()
            keep_groups: list[int] = []
            source_rows: list[int] = []
            next_tokens: list[int] = []
            for g, i in enumerate(active):
                new: list[_Beam] = []
                rows_g: list[int] = []
                for score, flat in zip(top_scores_l[g], top_idx_l[g], strict=True):
                    if score == float("-inf"):
                        break
                    j, token = divmod(flat, self.vocab_size)
                    row = g * k + j
                    old = beams[i][j]
                    lp = old.logprob + float(logp[row, token])
                    bst = old.boost + float(boost[row, token])
                    if token == self.special.eot:
                        booster = boosters[i]
                        extra = booster.final_score(old.state) if booster is not None else 0.0
                        finished[i].append(_Beam(old.tokens, lp, bst + extra, old.state, ended=True))
                    else:
                        nxt = states_next[row]
                        state = int(nxt[token]) if nxt is not None else old.state
                        cand_beam = old.extended(token, lp, bst, state)
                        block = _repeated_block(cand_beam.tokens, min_repeat) if min_repeat > 0 else 0
                        if block:  # a loop: end the hypothesis before the repetition, like an end-of-text
                            cut = cand_beam.truncated(len(cand_beam.tokens) - block)
                            booster = boosters[i]
                            if booster is not None:
                                cut.boost += booster.final_score(cut.state)
                            finished[i].append(cut)
                        else:
                            new.append(cand_beam)
                            rows_g.append(row)
                    if len(new) == k:
                        break
                while len(new) < k:  # fewer live candidates than beams: pad with dead copies
                    filler = new[0] if new else beams[i][0]
                    new.append(_Beam(filler.tokens, float("-inf"), 0.0, filler.state))
                    rows_g.append(rows_g[0] if rows_g else g * k)
                beams[i] = new
                live = [x for x in new if x.logprob > float("-inf")]
                if len(finished[i]) >= k or not live or len(new[0].tokens) >= limits[i]:
                    if len(finished[i]) < k:  # out of token budget: rank the live beams too
                        finished[i].extend(live)
                else:
                    keep_groups.append(g)
                    source_rows.extend(rows_g)
                    next_tokens.extend(x.tokens[-1] if x.tokens else self.special.eot for x in new)
            active = [active[g] for g in keep_groups]
            if not active:
                break
            step += 1
            rows = torch.tensor(source_rows)
            cache = [(kk.index_select(0, rows), vv.index_select(0, rows)) for kk, vv in cache]
            if len(keep_groups) < len(cross[0][0]):
                groups = torch.tensor(keep_groups)
                cross = [(ck.index_select(0, groups), cv.index_select(0, groups)) for ck, cv in cross]
                cross_mask = None if cross_mask is None else cross_mask.index_select(0, groups)
            tokens = torch.tensor(next_tokens)[:, None]
            logits, cache = dec(tokens, offset, cache, cross, cross_mask)
            step_logits = logits[:, -1]
            offset += 1

        out = []
        for i in range(b):
            cands = finished[i] or beams[i][:1]

            def rank(x: _Beam) -> float:
                return x.total / max(1, len(x.tokens)) ** length_penalty

            best = max(cands, key=rank)
            n = len(best.tokens) + int(best.ended)
            out.append(
                Hypothesis(
                    tokens=list(best.tokens),
                    text=self.text(best.tokens),
                    sum_logprob=float(best.logprob),
                    avg_logprob=float(best.logprob) / max(1, n),
                    no_speech_prob=float(no_speech[i]),
                    boost=float(best.boost),
                )
            )
        return out

    # ------------------------------------------------------------------ rescoring

    @torch.inference_mode()
    def score(self, encoded: Tensor, lengths: Tensor, token_seqs: list[list[list[int]]]) -> list[list[float]]:
        """Teacher-forced sum log-probability of candidate texts: ``token_seqs[i]`` are utterance i's
        candidates (text tokens only; the prompt and end-of-text are added here). Uses the same token
        suppression as :meth:`decode`, so a decoded hypothesis scores its own ``sum_logprob``."""
        groups = [i for i, seqs in enumerate(token_seqs) for _ in seqs]
        seqs = [list(s) + [self.special.eot] for per in token_seqs for s in per]
        if not seqs:
            return [[] for _ in token_seqs]
        idx = torch.tensor(groups)
        enc = encoded.index_select(0, idx)
        cross, cross_mask = self._cross(enc, lengths.index_select(0, idx))
        p = len(self.prompt)
        width = max(len(s) for s in seqs)
        tokens = torch.full((len(seqs), p + width - 1), self.special.eot, dtype=torch.long)
        for r, s in enumerate(seqs):
            row = self.prompt + s[:-1]
            tokens[r, : len(row)] = torch.tensor(row)
        logits, _ = self.model.decoder(tokens, 0, None, cross, cross_mask)
        results: list[list[float]] = [[] for _ in token_seqs]
        for r, s in enumerate(seqs):
            lp = self._logprobs(logits[r, p - 1 : p - 1 + len(s)], first=False)
            first = self._logprobs(logits[r, p - 1], first=True)
            total = float(first[s[0]]) + float(lp[torch.arange(1, len(s)), torch.tensor(s[1:])].sum())
            results[groups[r]].append(total)
        return results
