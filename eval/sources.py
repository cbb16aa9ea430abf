"""Rare-term pools, drawn from the sources ``training/text.py`` keeps out of the training text.

- clinical: generic (with a drug-name stem) and brand names of ``drug-named-entity-recognition`` (single
  words with English Zipf frequency < 1.5; the training text drops every drug-name word under Zipf 4) and the
  invented brands of
  ``faker-healthcare-provider`` (all dropped from the training text);
- earnings: company and product names made of invented brands (the other half of that list), and people whose
  surnames come from non-English ``faker`` locales and are unknown to English (Zipf < 1.5).

Every term records its ``rare_words``: the lower-case words that must not occur in the model's training text.
``RarePools.without(vocabulary)`` removes every candidate with a rare word in a training vocabulary, so a set
built against ``training/work/text/train.txt`` is rare for the bundled model by construction (and checked).
"""

from __future__ import annotations

import bz2
import pickle
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

WORD = re.compile(r"[A-Za-z']+")
ZIPF_RARE = 1.5
SURNAME_LOCALES = ("pl_PL", "fi_FI", "nl_NL", "it_IT", "sv_SE", "tr_TR")
# Nonproprietary-name stems: keep generics that sound like drugs ("voriconazole"), drop the chemistry and
# protein names the dictionary also holds ("diynes", "connectin").
INN_STEMS = re.compile(
    r"(mab|nib|vir|azole|pril|sartan|olol|statin|mycin|cillin|cycline|azepam|oxacin|parin|dronate|gliptin|"
    r"lukast|setron|triptan|afil|caine|platin|rubicin|dipine|terol|sone|olone|tidine|fenib|ciclib|semide|"
    r"thiazide|tadine|gabalin|glitazone|flozin|glutide|relin|tecan|taxel|barb|pramine|oxetine|faxine)$"
)
COMPANY_SUFFIXES = ("Holdings", "Systems", "Group", "Labs", "Networks", "Energy", "Logistics", "Robotics")


@dataclass(frozen=True)
class RarePools:
    """Sorted candidate lists (display casing); the generator samples from them with its own seeded RNG."""

    drug_generics: tuple[str, ...]
    drug_brands: tuple[str, ...]
    invented_brands: tuple[str, ...]
    surnames: tuple[str, ...]
    first_names: tuple[str, ...]
    brand_prefixes: tuple[str, ...]

    def without(self, vocabulary: set[str]) -> RarePools:
        """The pools minus every candidate that has a word in ``vocabulary`` (lower-case training words)."""

        def keep(items: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(x for x in items if not any(w in vocabulary for w in words_of(x)))

        return RarePools(
            drug_generics=keep(self.drug_generics),
            drug_brands=keep(self.drug_brands),
            invented_brands=keep(self.invented_brands),
            surnames=keep(self.surnames),
            first_names=self.first_names,  # common on purpose: a person term is rare by its surname
            brand_prefixes=self.brand_prefixes,
        )


def words_of(text: str) -> list[str]:
    """Lower-case words of ``text`` (letters and apostrophes), as ``training/text.py`` splits them."""
    return [w.lower() for w in WORD.findall(text)]


def training_vocabulary(path: Path) -> set[str]:
    """Every lower-case word of a training text file."""
    vocabulary: set[str] = set()
    with path.open(encoding="utf-8", errors="ignore") as f:
        for line in f:
            vocabulary.update(words_of(line))
    return vocabulary


def _real_drugs() -> tuple[list[str], list[str]]:
    """Single-word generic names (lower case, as written) and brand names (Capitalised), rare in English."""
    import drug_named_entity_recognition
    from wordfreq import zipf_frequency

    pkl = Path(drug_named_entity_recognition.__file__).parent / "drug_ner_dictionary.pkl.bz2"
    with bz2.open(pkl) as f:
        variants: dict[str, list[str]] = pickle.load(f)["drug_variant_to_canonical"]  # noqa: S301 - bundled data
    generics, brands = set(), set()
    for variant, canonical in variants.items():
        if not re.fullmatch(r"[a-z]{6,12}", variant) or zipf_frequency(variant, "en") >= ZIPF_RARE:
            continue
        if variant in canonical:
            if INN_STEMS.search(variant):
                generics.add(variant)
        elif not any(variant[:5] == name[:5] for name in canonical):  # not a translation ("acarbosa")
            brands.add(variant.capitalize())
    return sorted(generics), sorted(brands)


def _surnames() -> list[str]:
    from faker import Faker
    from wordfreq import zipf_frequency

    names: set[str] = set()
    for locale in SURNAME_LOCALES:
        fake = Faker(locale)
        fake.seed_instance(0)
        for _ in range(150):
            name = fake.last_name()
            if re.fullmatch(r"[A-Z][a-z]{4,10}", name) and zipf_frequency(name.lower(), "en") < ZIPF_RARE:
                names.add(name)
    return sorted(names)


def _first_names() -> list[str]:
    from faker import Faker

    fake = Faker("en_US")
    fake.seed_instance(0)
    return sorted({n for n in (fake.first_name() for _ in range(400)) if re.fullmatch(r"[A-Z][a-z]{2,8}", n)})


def load_pools() -> RarePools:
    """All candidate pools from the installed packages (deterministic for fixed package versions)."""
    from faker_healthcare.constants import BRAND_DRUG_NAMES, BRAND_PREFIXES

    generics, brands = _real_drugs()
    return RarePools(
        drug_generics=tuple(generics),
        drug_brands=tuple(brands),
        invented_brands=tuple(sorted(b for b in BRAND_DRUG_NAMES if re.fullmatch(r"[A-Z][a-z]+", b))),
        surnames=tuple(_surnames()),
        first_names=tuple(_first_names()),
        brand_prefixes=tuple(sorted(BRAND_PREFIXES, key=lambda p: (-len(p), p))),
    )


def camel_case(brand: str, prefixes: Iterable[str]) -> str:
    """``Caelmira`` -> ``CaelMira`` if it starts with a known prefix (longest first), else unchanged."""
    for prefix in prefixes:
        if brand.startswith(prefix) and len(brand) > len(prefix) + 1:
            return prefix + brand[len(prefix)].upper() + brand[len(prefix) + 1 :]
    return brand
