"""Offline sentence sources shared by the training text (``training/text.py``) and the term-free evaluation
set (``eval/term_free.py``): WordNet usage examples and glosses (Debian ``wordnet-base``) and ``fortunes``,
the character filter that keeps the spoken form equal to the written form, and the held-out split.

``is_test`` decides which sentences the bundled model never trained on (2 % by sentence hash, the split
``training/text.py`` wrote ``test.txt`` with), so an evaluation can draw held-out sentences without the
training text on disk.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

ALLOWED = re.compile(r"^[A-Za-z ,.?!'-]+$")
WORDNET_DIR = Path("/usr/share/wordnet")
FORTUNES_DIR = Path("/usr/share/games/fortunes")
TEST_FRACTION = 0.02  # training/text.py's default held-out share


def clean(sentence: str, min_words: int = 4, max_words: int = 24) -> str | None:
    """Normalise whitespace, capitalise, end with punctuation; None unless it passes the character filter."""
    s = re.sub(r"\s+", " ", sentence.replace("`", "'").replace("--", ", ")).strip(" ,;:-")
    if not s or not ALLOWED.match(s):
        return None
    s = re.sub(r"\s+([,.?!])", r"\1", s)
    if s[-1] not in ".?!":
        s += "."
    s = s[0].upper() + s[1:]
    n = len(s.split())
    if n < min_words or n > max_words or re.search(r"[,.?!'-]{2,}|^'|\s'\s", s):
        return None
    return s


def wordnet_sentences(usage_examples_only: bool = False) -> Iterator[str]:
    """WordNet's usage examples and the first clause of each gloss (``usage_examples_only``: no glosses)."""
    for pos in ("noun", "verb", "adj", "adv"):
        for line in (WORDNET_DIR / f"data.{pos}").read_text(errors="ignore").splitlines():
            if line.startswith("  ") or "|" not in line:
                continue
            gloss = line.split("|", 1)[1]
            yield from re.findall(r'"([^"]+)"', gloss)
            if not usage_examples_only:
                yield re.sub(r'"[^"]*"', "", gloss).split(";")[0]


def fortune_sentences() -> Iterator[str]:
    """Sentences of the ``fortunes`` quotes (the offensive ones excluded), attributions dropped."""
    for path in sorted(FORTUNES_DIR.iterdir()):
        if path.suffix or not path.is_file() or "off" in path.parts:
            continue
        for entry in path.read_text(errors="ignore").split("\n%\n"):
            body = " ".join(line.strip() for line in entry.splitlines() if not line.strip().startswith("--"))
            yield from re.split(r"(?<=[.?!])\s+", body)


def is_test(sentence: str, fraction: float = TEST_FRACTION) -> bool:
    """Deterministic held-out split by sentence hash."""
    h = int(hashlib.sha1(sentence.lower().encode()).hexdigest()[:8], 16)
    return h / 0xFFFFFFFF < fraction
