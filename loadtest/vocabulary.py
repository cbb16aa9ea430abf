"""Generated per-meeting vocabularies: realistic, valid, unique company- and drug-like names.

Deterministic for a seed, lower-case ASCII letters and single spaces only (every tokenizer can spell them),
with a display form; each list is unique case-insensitively, as the server requires.
"""

from __future__ import annotations

import random
from typing import Any

_ONSETS = (
    "b",
    "br",
    "c",
    "cl",
    "d",
    "dr",
    "f",
    "g",
    "gr",
    "k",
    "l",
    "m",
    "n",
    "p",
    "pr",
    "r",
    "s",
    "st",
    "t",
    "tr",
    "v",
    "z",
    "x",
    "qu",
    "h",
    "j",
)
_VOWELS = ("a", "e", "i", "o", "u", "ae", "io", "ou", "y")
_CODAS = ("", "n", "r", "l", "s", "x", "m", "nt", "st", "v")
_DRUG_SUFFIXES = (
    "mab",
    "tinib",
    "zolid",
    "oxetine",
    "pril",
    "sartan",
    "statin",
    "vir",
    "cillin",
    "mycin",
    "prazole",
    "olol",
    "azepam",
    "parin",
    "dronate",
)
WEIGHT_LEVELS = (0.5, 1.0, 1.5, 2.0)  # what a person picks on the admin page (biasing.terms.TermLimits)

_COMPANY_SUFFIXES = (
    "holdings",
    "analytics",
    "systems",
    "therapeutics",
    "labs",
    "partners",
    "logistics",
    "pharma",
    "capital",
    "robotics",
    "biosciences",
    "networks",
    "foods",
    "energy",
)


def _syllables(rng: random.Random, count: int) -> str:
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(count))


def _drug(rng: random.Random) -> str:
    return _syllables(rng, rng.randint(1, 2)) + rng.choice(_DRUG_SUFFIXES)


def _company(rng: random.Random) -> str:
    return f"{_syllables(rng, rng.randint(2, 3))} {rng.choice(_COMPANY_SUFFIXES)}"


def generate_terms(count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` distinct terms as protocol/REST term items: ``{"text", "display", "weight"}``."""
    rng = random.Random(seed)
    seen: set[str] = set()
    terms: list[dict[str, Any]] = []
    while len(terms) < count:
        text = _drug(rng) if rng.random() < 0.5 else _company(rng)
        if text in seen or len(text) > 60:
            continue
        seen.add(text)
        display = " ".join(word.capitalize() for word in text.split())
        terms.append({"text": text, "display": display, "weight": rng.choice(WEIGHT_LEVELS)})
    return terms
