"""The contextual test set: sentences, rare terms and term lists (deterministic for a seed and a pool).

Two domains. An earnings **call** has its own company, a partner company, three products and two people; a
clinical **patient** has six drugs (generic, brand and invented-brand names) plus procedures and dosages in
words (fillers, not terms). Each sentence holds 0-3 of its group's terms. Lists (term ids):

- ``local/<utt>``: the terms spoken in that utterance (absent when it has none);
- ``global/<group>``: the whole call's / patient's terms (most are not in any one utterance) plus three
  distractors that are never spoken;
- ``full``: the union of every global list (what one shared list for the whole server would hold).

Every term has a display casing (what captions should show: ``Caelmira Holdings``, ``CaelMira``, ``Zytiga``,
``linezolid``) and a typed casing (all lower case, as users type lists).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from eval.sources import COMPANY_SUFFIXES, RarePools, camel_case, words_of

SET_VERSION = 1
UTTERANCES_PER_GROUP = 8
DISTRACTORS_PER_GROUP = 3
MAX_TRIES = 50
TERMS_PER_SENTENCE_WEIGHTS = (0.15, 0.4, 0.3, 0.15)  # P(0), P(1), P(2), P(3 terms)
DEFAULT_VOICES = ("kal_diphone", "cmu_us_slt_arctic_hts", "ked_diphone")

EARNINGS_TEMPLATES = (
    "Operating margin improved across the whole business this quarter.",
    "Demand remained strong in every region despite the weaker currency.",
    "We will now open the line for questions from the analysts.",
    "Free cash flow was {money} for the quarter.",
    "Good morning and welcome to the {company} earnings call for the third quarter.",
    "I will now hand the call over to {person}, our chief financial officer.",
    "Revenue from {product} grew {pct} this quarter.",
    "Thank you, {person}, and good afternoon everyone.",
    "We expect {product} to reach more customers in Europe next year.",
    "Our agreement with {company2} closed earlier than we planned.",
    "{person} will walk you through the results for {product}.",
    "Sales of {product} and {product2} both beat our guidance.",
    "Can you comment on the pricing of {product} against the offer from {company2}?",
    "At {company}, we shipped {product} to every major customer.",
    "{person} and {person2} will present the roadmap for {product}.",
    "{company} sold more {product} units than {product2} units this quarter.",
    "Our partnership with {company2} lifted the margins of {product} and {product2}.",
)
CLINICAL_TEMPLATES = (
    "No known drug allergies, and the vital signs are stable.",
    "The patient is scheduled for {procedure} next week.",
    "Follow up in the clinic in two weeks.",
    "The patient was started on {drug} {dose} {freq}.",
    "Continue {drug} {dose} {freq} and review in two weeks.",
    "She tolerated {drug} well after {procedure}.",
    "He stopped taking {drug} because of mild nausea.",
    "Please discontinue {drug} and switch to {drug2} {dose} {freq}.",
    "History of {procedure}, currently taking {drug} and {drug2}.",
    "Increase {drug} to {dose} {freq}, and add {drug2} in the morning.",
    "Current medications are {drug}, {drug2} and {drug3}.",
    "Reports dizziness since starting {drug}, so hold {drug2} and continue {drug3} {dose}.",
)
DOSES = (
    "five milligrams",
    "ten milligrams",
    "twenty milligrams",
    "forty milligrams",
    "one gram",
    "two hundred and fifty milligrams",
    "zero point five milligrams",
    "one tablet",
)
FREQUENCIES = (
    "once daily",
    "twice daily",
    "three times a day",
    "at bedtime",
    "every eight hours",
    "as needed",
)
PERCENTS = ("three percent", "twelve percent", "eighteen percent", "twenty two percent", "forty percent")
MONEY = ("four hundred million dollars", "one point two billion dollars", "ninety million dollars")
PROCEDURES = (
    "a colonoscopy",
    "an appendectomy",
    "a knee replacement",
    "a hip replacement",
    "cataract surgery",
    "a biopsy",
    "an echocardiogram",
    "an angioplasty",
    "a tonsillectomy",
    "a lumpectomy",
)
SLOT = re.compile(r"\{(company2?|product[23]?|person2?|drug[23]?)\}")
KIND_OF_SLOT = {
    "company": "company",
    "company2": "partner",
    "product": "product",
    "product2": "product",
    "product3": "product",
    "person": "person",
    "person2": "person",
    "drug": "drug",
    "drug2": "drug",
    "drug3": "drug",
}


@dataclass(frozen=True)
class SetTerm:
    """One rare term: ``display`` is the casing captions should show; ``typed`` is how users type it."""

    term_id: str
    display: str
    kind: str
    domain: str
    rare_words: tuple[str, ...]

    @property
    def typed(self) -> str:
        return self.display.lower()


@dataclass(frozen=True)
class Utterance:
    """One sentence of a group (call or patient), with the ids of the terms it contains."""

    utt_id: str
    domain: str
    group: str
    text: str
    term_ids: tuple[str, ...]
    voice: str

    def list_ids(self) -> dict[str, str | None]:
        """The ids of this utterance's local, global and full lists (local is None without terms)."""
        local = f"local/{self.utt_id}" if self.term_ids else None
        return {"local_list": local, "global_list": f"global/{self.group}", "full_list": "full"}


@dataclass
class ContextSet:
    """The generated set before synthesis: terms, utterances and lists (JSON-able via ``to_json``)."""

    seed: int
    terms: dict[str, SetTerm] = field(default_factory=dict)
    utterances: list[Utterance] = field(default_factory=list)
    lists: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": SET_VERSION,
            "seed": self.seed,
            "terms": {tid: {**asdict(t), "typed": t.typed} for tid, t in self.terms.items()},
            "lists": self.lists,
            "utterances": [asdict(u) for u in self.utterances],
        }


class TermPicker:
    """Draws fresh terms from the pools; no rare word is used by two terms (keeps n-gram keywords apart)."""

    def __init__(self, pools: RarePools, rng: random.Random) -> None:
        self._rng = rng
        self._pools = pools
        self._used: set[str] = set()
        self._iters = {
            name: self._shuffled(getattr(pools, name))
            for name in ("drug_generics", "drug_brands", "invented_brands", "surnames")
        }

    def _shuffled(self, items: tuple[str, ...]) -> Iterator[str]:
        order = list(items)
        self._rng.shuffle(order)
        return iter(order)

    def _fresh(self, pool: str) -> str:
        for candidate in self._iters[pool]:
            words = words_of(candidate)
            if not self._used.intersection(words):
                self._used.update(words)
                return candidate
        raise ValueError(f"the {pool} pool ran out of rare terms; use a smaller --n")

    def draw(self, kind: str) -> tuple[str, tuple[str, ...]]:
        """A display string and its rare words for a term of ``kind``."""
        rng = self._rng
        if kind in ("company", "partner"):
            brand = self._fresh("invented_brands")
            return f"{brand} {rng.choice(COMPANY_SUFFIXES)}", (brand.lower(),)
        if kind == "product":
            brand = self._fresh("invented_brands")
            shown = camel_case(brand, self._pools.brand_prefixes) if rng.random() < 0.4 else brand
            return shown, (brand.lower(),)
        if kind == "person":
            surname = self._fresh("surnames")
            return f"{rng.choice(self._pools.first_names)} {surname}", (surname.lower(),)
        pool = rng.choices(("drug_generics", "drug_brands", "invented_brands"), (0.4, 0.3, 0.3))[0]
        name = self._fresh(pool)
        return name, (name.lower(),)


def _group_sizes(count: int) -> list[int]:
    groups = max(1, -(-count // UTTERANCES_PER_GROUP))
    return [count // groups + (1 if i < count % groups else 0) for i in range(groups)]


class _Builder:
    def __init__(self, pools: RarePools, seed: int, voices: tuple[str, ...]) -> None:
        self.rng = random.Random(seed)
        self.picker = TermPicker(pools, self.rng)
        self.voices = voices
        self.result = ContextSet(seed=seed)
        self.texts: set[str] = set()

    def new_term(self, kind: str, domain: str) -> str:
        display, rare = self.picker.draw(kind)
        term_id = f"{domain[0]}{len(self.result.terms):04d}"
        self.result.terms[term_id] = SetTerm(term_id, display, kind, domain, rare)
        return term_id

    def group(self, domain: str, group: str, size: int) -> None:
        kinds = (
            ("company", "partner", "product", "product", "product", "person", "person")
            if domain == "earnings"
            else ("drug",) * 6
        )
        pool = [self.new_term(kind, domain) for kind in kinds]
        templates = EARNINGS_TEMPLATES if domain == "earnings" else CLINICAL_TEMPLATES
        by_count: dict[int, list[str]] = {}
        for template in templates:
            by_count.setdefault(len(SLOT.findall(template)), []).append(template)
        for index in range(size):
            for _ in range(MAX_TRIES):  # no sentence twice in a set
                count = self.rng.choices(range(4), TERMS_PER_SENTENCE_WEIGHTS)[0]
                text, ids = self.sentence(self.rng.choice(by_count[count]), pool)
                if text not in self.texts:
                    break
            self.texts.add(text)
            utt_id = f"{group}_{index:02d}"
            self.result.utterances.append(
                Utterance(utt_id, domain, group, text, ids, self.rng.choice(self.voices))
            )
            if ids:
                self.result.lists[f"local/{utt_id}"] = list(ids)
        distractors = [self.new_term(kinds[i % len(kinds)], domain) for i in range(DISTRACTORS_PER_GROUP)]
        self.result.lists[f"global/{group}"] = pool + distractors

    def sentence(self, template: str, pool: list[str]) -> tuple[str, tuple[str, ...]]:
        """The template filled from the group's pool: its text and the ids of the terms in it."""
        terms = self.result.terms
        by_kind: dict[str, list[str]] = {}
        for term_id in pool:
            by_kind.setdefault(terms[term_id].kind, []).append(term_id)
        for ids in by_kind.values():
            self.rng.shuffle(ids)
        chosen: dict[str, str] = {}
        for slot in SLOT.findall(template):
            chosen[slot] = by_kind[KIND_OF_SLOT[slot]].pop()
        text = fill_template(template, self.rng, {slot: terms[tid].display for slot, tid in chosen.items()})
        return text, tuple(chosen[slot] for slot in SLOT.findall(template))


def fill_template(template: str, rng: random.Random, names: dict[str, str]) -> str:
    """A template with its name slots from ``names`` and its dose, frequency, percentage, money and
    procedure drawn from their lists."""
    return template.format(
        **names,
        dose=rng.choice(DOSES),
        freq=rng.choice(FREQUENCIES),
        pct=rng.choice(PERCENTS),
        money=rng.choice(MONEY),
        procedure=rng.choice(PROCEDURES),
    )


def build_set(n: int, seed: int, pools: RarePools, voices: tuple[str, ...] = DEFAULT_VOICES) -> ContextSet:
    """``n`` utterances (half earnings calls, half clinical dictation) with their terms and lists."""
    if n < 2:
        raise ValueError("n must be >= 2 (one utterance per domain)")
    builder = _Builder(pools, seed, voices)
    halves = {"earnings": (n + 1) // 2, "clinical": n // 2}
    for domain, count in halves.items():
        prefix = "call" if domain == "earnings" else "patient"
        for index, size in enumerate(_group_sizes(count)):
            builder.group(domain, f"{prefix}{index:02d}", size)
    result = builder.result
    full = sorted({tid for key, ids in result.lists.items() if key.startswith("global/") for tid in ids})
    result.lists["full"] = full
    return result


def rare_words_in(context_set: ContextSet, vocabulary: set[str]) -> list[str]:
    """Display strings of the terms that have a rare word in ``vocabulary`` (empty: the set is rare)."""
    return [t.display for t in context_set.terms.values() if set(t.rare_words) & vocabulary]
