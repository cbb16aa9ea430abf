"""Word-level edit distance, shared by the second pass's guards (``backend.engine.final_pass``) and the
tools that score transcripts (``training.real_speech``); no heavy imports."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["edit_distance"]


def edit_distance(a: Sequence[str], b: Sequence[str]) -> int:
    """Levenshtein distance between two word sequences (substitution, insertion, deletion cost 1)."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]
