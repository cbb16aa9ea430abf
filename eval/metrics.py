"""Keyword precision/recall/F-score and WER, as NeMo 3.0.0 defines them.

``keyword_counts`` is a per-utterance port of
``nemo.collections.asr.parts.context_biasing.context_biasing_utils.compute_fscore`` (NeMo 3.0.0), which only
reads a manifest file and prints: the same ``kaldialign`` alignment, the same n-gram walk over non-epsilon
positions, the same tp/gt/fp rules and the same ``1e-8`` smoothing. ``tests/tools/test_eval.py`` checks it
against NeMo's function. Texts are normalised first (punctuation dropped, whitespace collapsed);
the lower-case variant is the paper's metric, the case-kept variant checks that captions show the display
casing.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Sequence
from dataclasses import dataclass

EPS = "<eps>"
_PUNCT = re.compile(r"[^\w\s'-]")


def normalize(text: str, keep_case: bool = False) -> str:
    """Punctuation removed (apostrophes and hyphens inside words kept), single spaces, lower-cased unless
    ``keep_case``."""
    words = (w.strip("'-") for w in _PUNCT.sub(" ", unicodedata.normalize("NFC", text)).split())
    joined = " ".join(w for w in words if w)
    return joined if keep_case else joined.lower()


@dataclass(frozen=True)
class KeywordCounts:
    """Micro-averaged keyword counts: ``tp`` correct, ``gt`` in the references, ``fp`` false triggers."""

    tp: int = 0
    gt: int = 0
    fp: int = 0

    def __add__(self, other: KeywordCounts) -> KeywordCounts:
        return KeywordCounts(self.tp + other.tp, self.gt + other.gt, self.fp + other.fp)

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp + 1e-8)

    @property
    def recall(self) -> float:
        return self.tp / (self.gt + 1e-8)

    @property
    def fscore(self) -> float:
        p, r = self.precision, self.recall
        return 2 * (p * r) / (p + r + 1e-8)


def _windows(positions: list[int], order: int) -> list[list[int]]:
    return [positions[i : i + order] for i in range(len(positions) - order + 1)]


def keyword_counts(ref: str, hyp: str, keywords: Collection[str]) -> KeywordCounts:
    """Counts for one reference/hypothesis pair (whitespace-split, compared exactly: normalise first).

    1-grams: a reference keyword counts in gt and is a tp when aligned to the same word; otherwise an aligned
    hypothesis keyword is an fp. n-grams (n >= 2, up to the longest keyword): every window of n consecutive
    non-epsilon reference words that is a keyword counts in gt (tp if the aligned hypothesis words are equal);
    every window of n non-epsilon hypothesis words that is a keyword and differs from its aligned reference
    words is an fp.
    """
    from kaldialign import align

    keyword_set = set(keywords)
    if not keyword_set:
        raise ValueError("the keyword list is empty")
    ali = align(ref.split(), hyp.split(), EPS)
    tp = gt = fp = 0
    for word_ref, word_hyp in ali:
        if word_ref in keyword_set:
            gt += 1
            tp += word_ref == word_hyp
        elif word_hyp in keyword_set:
            fp += 1
    ref_positions = [i for i, (r, _) in enumerate(ali) if r != EPS]
    hyp_positions = [i for i, (_, h) in enumerate(ali) if h != EPS]
    for order in range(2, max(len(k.split()) for k in keyword_set) + 1):
        for window in _windows(ref_positions, order):
            phrase_ref = " ".join(ali[i][0] for i in window)
            if phrase_ref in keyword_set:
                gt += 1
                tp += phrase_ref == " ".join(ali[i][1] for i in window)
        for window in _windows(hyp_positions, order):
            phrase_hyp = " ".join(ali[i][1] for i in window)
            if phrase_hyp in keyword_set and phrase_hyp != " ".join(ali[i][0] for i in window):
                fp += 1
    return KeywordCounts(tp, gt, fp)


def corpus_keyword_counts(
    refs: Sequence[str], hyps: Sequence[str], keywords: Collection[str]
) -> KeywordCounts:
    """Sum of ``keyword_counts`` over aligned lists of references and hypotheses."""
    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    total = KeywordCounts()
    for ref, hyp in zip(refs, hyps, strict=True):
        total += keyword_counts(ref, hyp, keywords)
    return total


@dataclass(frozen=True)
class Scores:
    """One configuration's accuracy: keyword P/R/F on lower-cased and on case-kept text, and WER."""

    lower: KeywordCounts
    cased: KeywordCounts
    wer: float


def word_error_rate(refs: Sequence[str], hyps: Sequence[str]) -> float:
    """NeMo's corpus WER (0-1) of raw texts after ``normalize`` (lower-cased, punctuation dropped)."""
    from nemo.collections.asr.metrics.wer import word_error_rate as nemo_wer

    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    return float(nemo_wer(hypotheses=[normalize(t) for t in hyps], references=[normalize(t) for t in refs]))


def score(refs: Sequence[str], hyps: Sequence[str], keywords_display: Sequence[str]) -> Scores:
    """Normalise raw texts and score them; ``keywords_display`` are the terms in display casing (none, as
    for a manifest without lists: zero keyword counts)."""
    keywords_lower = {normalize(k) for k in keywords_display}
    keywords_cased = {normalize(k, keep_case=True) for k in keywords_display}
    wer = word_error_rate(refs, hyps)
    if not keywords_lower:
        return Scores(lower=KeywordCounts(), cased=KeywordCounts(), wer=wer)
    return Scores(
        lower=corpus_keyword_counts(
            [normalize(t) for t in refs], [normalize(t) for t in hyps], keywords_lower
        ),
        cased=corpus_keyword_counts(
            [normalize(t, keep_case=True) for t in refs],
            [normalize(t, keep_case=True) for t in hyps],
            keywords_cased,
        ),
        wer=wer,
    )
