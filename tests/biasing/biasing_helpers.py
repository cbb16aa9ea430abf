"""Independent reference scoring for the biasing tests: plain strings and brute force, no tries, no arrays."""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Sequence

import numpy as np
import sentencepiece as spm
import torch
from hypothesis import strategies as st

from biasing.compile import WEIGHT_EXPONENT, build_graph
from biasing.graph import BoostingGraph, GraphParams
from biasing.nemo.compat import to_nemo_model
from biasing.terms import Term

BOUNDARY = "\u2581"
WORDS = (  # the test tokenizers are trained on these, in all casings
    "linezolid husqvarna metformin acme group new york times city the patient takes meeting about with and "
    "review quarterly earnings nvidia aspirin zolpidem bank of america johnson wexford quintessa"
).split()


LETTERS = "abcdefghijklmnopqrstuvwxyz"
# hypothesis strategies shared by the property tests: known words and made-up ones, phrases of 1-3 of them,
# and phrases from a small pool, so that they overlap, nest and share prefixes often
words = st.one_of(st.sampled_from(WORDS), st.text(alphabet=LETTERS, min_size=2, max_size=7))
phrases = st.lists(words, min_size=1, max_size=3).map(" ".join)
dense_phrases = st.lists(
    st.sampled_from(["new", "york", "times", "city", "ne", "yo"]), min_size=1, max_size=3
).map(" ".join)
weighted_phrases = st.lists(
    st.tuples(st.one_of(phrases, dense_phrases), st.sampled_from([0.5, 1.0, 3.0])), min_size=1, max_size=4
)


def lower1(text: str) -> str:
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


def surfaces(sp: spm.SentencePieceProcessor) -> list[str]:
    """Folded surface of each label; "" for control/unknown/byte labels."""
    out = []
    for label in range(sp.get_piece_size()):
        special = sp.is_control(label) or sp.is_unknown(label) or sp.is_byte(label) or sp.is_unused(label)
        out.append("" if special else lower1(sp.id_to_piece(label)))
    return out


def nemo_token_scores(tokens: int, cs: float = 1.0, ds: float = 2.0) -> list[float]:
    """NeMo ContextGraph: first token cs, token i>0 cs*ds + ln(i+1)."""
    return [cs if i == 0 else cs * ds + math.log(i + 1) for i in range(tokens)]


def scored_pieces(pieces: Sequence[str], labels: Collection[str]) -> list[str]:
    """The tokens a phrase's score goes to: greedy pieces, a bare "▁" joined to the next piece when one of
    ``labels`` (folded surfaces) spells "▁" and that piece's first character."""
    out: list[str] = []
    pending = ""
    for position, piece in enumerate(pieces):
        following = pieces[position + 1] if position + 1 < len(pieces) else ""
        if piece == BOUNDARY and following and lower1(BOUNDARY + following[0]) in labels:
            pending += piece
            continue
        out.append(pending + piece)
        pending = ""
    return out


def nemo_score(tokens: int, cs: float = 1.0, ds: float = 2.0) -> float:
    """A phrase's total: the sum of its token scores."""
    return sum(nemo_token_scores(tokens, cs, ds))


class ReferenceScorer:
    """The scoring contract of biasing/graph.py, evaluated by brute force over strings.

    ``chains`` are (folded greedy pieces, each piece's score): piece k's score is spread over its own
    characters with shares exp((i+1)^tau), on top of the scores of the pieces before it."""

    def __init__(self, chains: Sequence[tuple[Sequence[str], Sequence[float]]], tau: float) -> None:
        self.chains = {"".join(pieces) for pieces, _ in chains}
        self.best: dict[str, float] = {}
        for pieces, scores in chains:
            prefix, before = "", 0.0
            for piece, score in zip(pieces, scores, strict=True):
                top = len(piece) ** tau  # exp((i+1)^tau) scaled by exp(-top): same ratios, no overflow
                shares = [math.exp((i + 1) ** tau - top) for i in range(len(piece))]
                for i, char in enumerate(piece):
                    prefix += char
                    value = before + score * sum(shares[: i + 1]) / sum(shares)
                    self.best[prefix] = max(self.best.get(prefix, 0.0), value)
                before += score

    def is_state(self, text: str) -> bool:
        return text == "" or text in self.best

    def pot(self, state: str) -> float:
        return max((self.best[state[:d]] for d in range(1, len(state) + 1)), default=0.0)

    def longest_suffix_state(self, text: str, proper: bool = False) -> str:
        for start in range(1 if proper else 0, len(text) + 1):
            if self.is_state(text[start:]):
                return text[start:]
        return ""

    def banked(self, state: str, continuing: bool = False) -> float:
        """What backing off from ``state`` keeps: the best phrase inside it (not wholly in its longest proper
        suffix state) that a word boundary follows in ``state``, or that ends ``state`` when the next label
        starts a new word (not ``continuing``)."""
        limit = len(state) - len(self.longest_suffix_state(state, proper=True))
        best = 0.0
        for start in range(limit):
            for end in range(start + 1, len(state) + 1):
                if state[start:end] not in self.chains:
                    continue
                closed = end < len(state) and not state[end].isalnum()
                if closed or (end == len(state) and not continuing):
                    best = max(best, self.pot(state[start:end]))
        return best

    def totals(self, pieces: Sequence[str]) -> list[float]:
        """Running total after each token (pieces are folded surfaces; "" = a label that matches nothing)."""
        text, state, banked, out = "", "", 0.0, []
        for piece in pieces:
            continuing = bool(piece) and piece[0].isalnum()  # the label goes on spelling the word
            chain_of_state = [state[k:] for k in range(len(state)) if self.is_state(state[k:])]
            if piece:
                text += piece
                new_state = self.longest_suffix_state(text)
            else:
                text, new_state = "", ""
            for suffix in chain_of_state:
                if not piece or len(suffix) + len(piece) > len(new_state):
                    banked += self.banked(suffix, continuing)
            state = new_state
            out.append(banked + self.pot(state))
        return out


def nemo_totals(graph, sequences: Sequence[Sequence[int]]) -> np.ndarray:
    """Running totals of each label sequence, advanced through NeMo's own GPUBoostingTreeModel.advance
    (which knows nothing of word ends: equal to ours only where no word-continuing label backs off from a
    state with a word-end refund)."""
    model = to_nemo_model(graph)
    return _running_totals(model.get_init_states, lambda states: model.advance(states), sequences)


def runtime_totals(graph, sequences: Sequence[Sequence[int]], alpha: float = 1.0) -> np.ndarray:
    """Running totals of each label sequence through what the service runs: the graph registered in our
    ``SparseAdvanceMultiModel`` (the word-end rule included)."""
    from biasing.nemo.multi_model import SparseAdvanceMultiModel

    multi = SparseAdvanceMultiModel(vocab_size=graph.vocab_size, use_triton=False)
    model_id = multi.add_model(to_nemo_model(graph), alpha=alpha)

    def advance(states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return multi.advance(states, torch.full_like(states, model_id))

    return _running_totals(multi.get_init_states, advance, sequences)


def _running_totals(init, advance, sequences: Sequence[Sequence[int]]) -> np.ndarray:
    length = max(len(s) for s in sequences)
    totals = np.zeros((len(sequences), length))
    with torch.inference_mode():
        states = init(len(sequences))
        running = torch.zeros(len(sequences), dtype=torch.float64)
        for step in range(length):
            labels = torch.tensor([s[step] if step < len(s) else 0 for s in sequences])
            scores, next_states = advance(states)
            rows = torch.arange(len(sequences))
            running += scores[rows, labels].double()
            states = next_states[rows, labels]
            totals[:, step] = running.numpy()
    return totals


def random_labels(
    vocab: int, chains: list[str], folded: list[str], rng: random.Random, chunks: int
) -> list[int]:
    """Noise, whole phrases in random casing/segmentation, and phrase prefixes that then stop."""
    labels: list[int] = []
    for _ in range(chunks):
        kind = rng.random()
        if kind < 0.3:
            labels.extend(rng.randrange(vocab) for _ in range(rng.randint(1, 3)))
            continue
        chain = rng.choice(chains)
        stop = len(chain) if kind < 0.7 else rng.randint(1, len(chain))
        position = 0
        while position < stop:
            options = [i for i, s in enumerate(folded) if s and chain.startswith(s, position)]
            label = rng.choice(options)
            labels.append(label)
            position += len(folded[label])
    return labels


def phrase_case(
    sp: spm.SentencePieceProcessor,
    items: list[tuple[str, float]],
    tau: float,
    seed: int,
    nest: bool,
    count: int,
) -> tuple[BoostingGraph, list[str], ReferenceScorer, list[list[int]]]:
    """A case-insensitive graph of weighted phrases (``nest``: plus a phrase inside the first one), the folded
    surfaces, the brute-force reference over the phrases' greedy pieces, and ``count`` label sequences."""
    first_words = items[0][0].split()
    if nest and len(first_words) > 1:  # a phrase inside another one
        items = [*items, (first_words[1], 1.0)]
    graph = build_graph([Term(text, weight) for text, weight in items], sp, GraphParams(tau=tau))
    folded = surfaces(sp)
    chains = []
    for text, weight in items:
        greedy = [lower1(piece) for piece in sp.encode(lower1(text), out_type=str)]
        pieces = scored_pieces(greedy, set(folded))
        boost = weight**WEIGHT_EXPONENT  # a weight is a boost level: its square root multiplies the scores
        chains.append((pieces, [boost * score for score in nemo_token_scores(len(pieces))]))
    rng = random.Random(seed)
    texts = ["".join(pieces) for pieces, _ in chains]
    vocab = sp.get_piece_size()
    sequences = [random_labels(vocab, texts, folded, rng, rng.randint(1, 6)) for _ in range(count)]
    return graph, folded, ReferenceScorer(chains, tau), sequences
