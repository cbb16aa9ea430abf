"""Build the training and held-out sentence lists from offline text sources.

Sources: WordNet usage examples and glosses (Debian ``wordnet-base``), ``fortunes``, ``essential-generators``
(Markov text from Wikipedia) and templated ``faker`` sentences. Sentences are kept only when they consist of
``[A-Za-z ,.?!'-]`` and have 4-24 words, so the spoken form equals the written form (cased, punctuated).

Rare evaluation terms stay out of the training text: every sentence containing a word of a drug name from
``drug-named-entity-recognition`` (unless the word is common English, Zipf >= 4 in ``wordfreq``) or of an
invented brand from ``faker-healthcare-provider`` is dropped. No company or product names are generated.

Usage::

    python -m training.text --out training/work/text
"""

from __future__ import annotations

import argparse
import bz2
import pickle
import random
import re
from collections.abc import Iterator
from pathlib import Path

from eval.sentences import clean, fortune_sentences, is_test, wordnet_sentences

WORD = re.compile(r"[A-Za-z']+")


def generator_sentences(n: int, seed: int) -> Iterator[str]:
    from essential_generators import DocumentGenerator

    random.seed(seed)
    gen = DocumentGenerator()
    for _ in range(n):
        yield gen.sentence()


def faker_sentences(n: int, seed: int) -> Iterator[str]:
    from faker import Faker

    fake = Faker("en_US")
    Faker.seed(seed)
    rng = random.Random(seed)
    templates = [
        "{name} moved to {city} last year.",
        "Please ask {first} to call me back before the meeting.",
        "{name} works as a {job} in {city}.",
        "Did {first} send the report to {name}?",
        "We met {name} at the station in {city}.",
        "The new {job} starts on {day}.",
        "{first} said the trip to {city} was wonderful.",
        "Could you tell {first} that the {job} is waiting?",
        "Our office in {city} opens again on {day}.",
        "{name} and {first2} will present the results.",
    ]
    for _ in range(n):
        yield rng.choice(templates).format(
            name=fake.name(),
            first=fake.first_name(),
            first2=fake.first_name(),
            city=fake.city(),
            job=fake.job().split(",")[0].lower(),
            day=fake.day_of_week(),
        )


def excluded_words() -> set[str]:
    """Lower-case words of drug names and invented drug brands that must not occur in training text."""
    import drug_named_entity_recognition
    from faker_healthcare.brand_names import BRAND_DRUG_NAMES
    from wordfreq import zipf_frequency

    pkl = Path(drug_named_entity_recognition.__file__).parent / "drug_ner_dictionary.pkl.bz2"
    with bz2.open(pkl) as f:
        drugs = pickle.load(f)  # noqa: S301 - the package's own bundled data file
    words = set()
    for variant in drugs["drug_variant_to_canonical"]:
        for w in WORD.findall(variant.lower()):
            if len(w) > 2 and zipf_frequency(w, "en") < 4.0:
                words.add(w)
    for brand in BRAND_DRUG_NAMES:
        words.update(WORD.findall(brand.lower()))
    return words


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--generated", type=int, default=40000, help="essential-generators sentences")
    parser.add_argument("--faker", type=int, default=5000)
    parser.add_argument("--test-fraction", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    excluded = excluded_words()
    sources = {
        "wordnet": wordnet_sentences(),
        "fortunes": fortune_sentences(),
        "generated": generator_sentences(args.generated, args.seed),
        "faker": faker_sentences(args.faker, args.seed),
    }
    seen: set[str] = set()
    train, test = [], []
    for name, it in sources.items():
        kept = dropped = 0
        for raw in it:
            s = clean(raw)
            if s is None or s.lower() in seen:
                continue
            if any(w.lower() in excluded for w in WORD.findall(s)):
                dropped += 1
                continue
            seen.add(s.lower())
            (test if is_test(s, args.test_fraction) else train).append(s)
            kept += 1
        print(f"{name}: kept {kept}, dropped {dropped} for excluded words")
    args.out.mkdir(parents=True, exist_ok=True)
    random.Random(args.seed).shuffle(train)
    (args.out / "train.txt").write_text("\n".join(train) + "\n")
    (args.out / "test.txt").write_text("\n".join(test) + "\n")
    (args.out / "excluded_words.txt").write_text("\n".join(sorted(excluded)) + "\n")
    print(f"train {len(train)} sentences, test {len(test)}, excluded words {len(excluded)}")


if __name__ == "__main__":
    main()
