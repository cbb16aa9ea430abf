"""WER of what the load test's streams were shown (issue 45): the finals, and the partial on screen just
before each final, against the sentences the looped WAV says (its transcript, ``audio.load_transcript``).

Scored as ``python -m eval run`` scores (corpus WER over lower-cased text without punctuation, NeMo's
``word_error_rate`` definition: edit distance over reference words); ``normalize`` repeats
``eval.metrics.normalize`` because the load test may not import ``eval`` (``scripts/import_graph.py``), and
``tests/tools/test_loadtest.py`` checks that the two agree.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from captions_model.words import edit_distance

_PUNCT = re.compile(r"[^\w\s'-]")
EDGE_SLACK_S = 0.3  # a final belongs to the scored span when its middle is this close to it


def normalize(text: str) -> str:
    """Punctuation removed (apostrophes and hyphens inside words kept), single spaces, lower case."""
    words = (w.strip("'-") for w in _PUNCT.sub(" ", unicodedata.normalize("NFC", text)).split())
    return " ".join(w for w in words if w).lower()


def corpus_wer(refs: Sequence[str], hyps: Sequence[str]) -> float:
    """Edit distance summed over pairs / reference words summed (0-1; NaN without reference words)."""
    words = errors = 0
    for ref, hyp in zip(refs, hyps, strict=True):
        ref_words, hyp_words = normalize(ref).split(), normalize(hyp).split()
        words += len(ref_words)
        errors += edit_distance(ref_words, hyp_words)
    return errors / words if words else float("nan")


def stream_texts(
    captions: Sequence[tuple[float, float, str, str]], reference: Sequence[tuple[float, float, str]]
) -> tuple[str, str, str]:
    """(reference, finals, partials shown) of one stream over the span of its whole sentences: the finals
    whose middle lies within that span (``EDGE_SLACK_S``), so sentences cut at the stream's start or stop
    and their captions are left out."""
    if not reference:
        return "", "", ""
    begin, end = reference[0][0] - EDGE_SLACK_S, reference[-1][1] + EDGE_SLACK_S
    inside = [c for c in captions if begin <= (c[0] + c[1]) / 2 <= end]
    return (
        " ".join(text for _, _, text in reference),
        " ".join(c[2] for c in inside if c[2].strip()),
        " ".join(c[3] for c in inside if c[3].strip()),
    )


def step_wer(clients: Sequence[Any]) -> dict[str, Any]:
    """A step's ``wer`` and ``wer_partial`` (percent, 1 decimal) over its clients whose first connection ran
    whole (``ClientResult.measured_whole``) and said whole sentences; None without a transcript."""
    triples = [stream_texts(c.captions, c.reference) for c in clients if c.measured_whole and c.reference]
    if not triples:
        return {"wer": None, "wer_partial": None, "wer_streams": 0, "wer_words": 0}
    refs = [t[0] for t in triples]
    return {
        "wer": round(100 * corpus_wer(refs, [t[1] for t in triples]), 1),
        "wer_partial": round(100 * corpus_wer(refs, [t[2] for t in triples]), 1),
        "wer_streams": len(triples),
        "wer_words": sum(len(normalize(r).split()) for r in refs),
    }
