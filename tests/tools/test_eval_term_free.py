"""The term-free evaluation (issue 35): speech that holds no list term, realistic lists, false alarms per
1,000 words next to the WER change, at the weights a user can choose."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from eval.dataset import load_set
from eval.metrics import normalize
from eval.report import Row, table, to_row
from eval.runner import RunConfig, RunOutput, expand_configs
from eval.sources import RarePools, load_pools
from eval.term_free import build_lists, meeting_sentences, soundalike_surnames

REFERENCES = (
    "Good morning and welcome to the company earnings call.",
    "The patient was started on insulin ten milligrams twice daily.",
    "He was lounging on the sofa.",
)


def test_meeting_sentences_fill_every_slot_with_ordinary_words() -> None:
    import random

    sentences = meeting_sentences(40, random.Random(0))
    assert len(sentences) == len(set(sentences)) == 40
    for sentence in sentences:
        assert "{" not in sentence and not re.search(r"\bthe (the|our|my)\b", sentence), sentence
        assert sentence[0].isupper()


def test_soundalikes_are_rare_words_one_phone_from_a_common_one() -> None:
    from wordfreq import zipf_frequency

    pairs = soundalike_surnames()
    assert len(pairs) > 500
    for rare, common in pairs[:: len(pairs) // 50]:
        assert zipf_frequency(rare, "en") < 1.5 <= 4.3 <= zipf_frequency(common, "en")
        assert rare != common and not rare.startswith(common)


@pytest.fixture(scope="module")
def real_pools() -> RarePools:
    return load_pools()


def test_lists_are_nested_sized_and_never_spoken(real_pools: RarePools) -> None:
    first = build_lists(real_pools, 0, REFERENCES)
    person = next(t["display"] for t in first["terms"].values() if t["kind"] == "person")
    references = [*REFERENCES, f"Thank you, {person}, and good afternoon."]
    meta = build_lists(real_pools, 0, references)
    lists, terms = meta["lists"], meta["terms"]
    assert {name: len(ids) for name, ids in lists.items()} == {
        "names54": 54, "names200": 200, "soundalikes100": 100, "multiword50": 50, "mixed500": 500
    }  # fmt: skip
    assert set(lists["names54"]) <= set(lists["names200"]) <= set(lists["mixed500"])
    assert set(lists["soundalikes100"]) | set(lists["multiword50"]) <= set(lists["mixed500"])
    kinds = {terms[t]["kind"] for t in lists["names54"]}
    assert kinds == {"person", "company", "product", "drug"}
    spoken = " " + " ".join(normalize(r) for r in references) + " "
    displays = [terms[t]["display"] for t in lists["mixed500"]]
    assert len(set(displays)) == 500
    assert not [d for d in displays if f" {normalize(d)} " in spoken]
    assert person not in displays  # drawn, found in a reference, skipped
    assert all(len(terms[t]["display"].split()) == 3 for t in lists["multiword50"])


def _term_free_set(root: Path) -> Path:
    """A tiny term-free set on disk: three references, one list of two terms."""
    (root / "wav").mkdir(parents=True)
    entries = []
    for index, text in enumerate(REFERENCES):
        sf.write(str(root / "wav" / f"u{index}.wav"), np.zeros(8000, np.float32), 16000)
        entries.append(
            {"audio_filepath": f"wav/u{index}.wav", "duration": 0.5, "text": text, "utt_id": f"u{index}",
             "group": "meeting", "term_ids": [], "names2_list": "names2"}
        )  # fmt: skip
    (root / "manifest.json").write_text("".join(json.dumps(e) + "\n" for e in entries))
    terms = {
        "t0": {"display": "Halvorsen", "kind": "person"},
        "t1": {"display": "Gravavex Labs", "kind": "company"},
    }
    (root / "lists.json").write_text(json.dumps({"terms": terms, "lists": {"names2": ["t0", "t1"]}}))
    return root / "manifest.json"


def test_false_alarms_are_counted_per_1000_reference_words(tmp_path: Path) -> None:
    eval_set = load_set(_term_free_set(tmp_path))
    assert eval_set.modes() == {"names2"}
    clean = RunOutput(RunConfig("none", None, "beam", 1.12, None, None), hyps=REFERENCES, audio_s=1.5)
    hijacked = RunOutput(
        RunConfig("names2", "insensitive", "beam", 1.12, 2.0, 3.0, weight=2.0),
        hyps=(
            REFERENCES[0],
            "The patient was started on Halvorsen ten Gravavex Labs twice daily.",
            REFERENCES[2],
        ),
        audio_s=1.5,
    )
    words = sum(len(normalize(r).split()) for r in REFERENCES)
    base, listed = to_row(clean, eval_set), to_row(hijacked, eval_set)
    assert (base.words, base.false_alarms, base.fa_per_1k, base.wer) == (words, 0, 0.0, 0.0)
    assert listed.false_alarms == 2 and listed.fa_per_1k == pytest.approx(2000 / words)
    assert listed.weight == 2.0 and listed.config.endswith("weight=2")
    rendered = table([base, listed]).splitlines()
    assert "FA /1k words" in rendered[0] and "WER +" in rendered[0]
    cells = [c.strip() for c in rendered[-1].split("|")]
    assert float(cells[8]) == pytest.approx(listed.wer - base.wer, abs=0.05)  # the WER change against no list
    assert float(cells[10]) == pytest.approx(listed.fa_per_1k, abs=0.05)


def test_a_sweep_over_the_sets_lists_and_weights() -> None:
    configs = expand_configs(
        ["none", "names54"], ["insensitive"], ["beam"], [1.12], [2.0], [3.0], [1.0, 2.0], modes={"names54"}
    )
    assert [c.name for c in configs] == [
        "none/beam/1.12s",
        "names54/insensitive/beam/1.12s/tau=2/alpha=3/weight=1",
        "names54/insensitive/beam/1.12s/tau=2/alpha=3/weight=2",
    ]
    with pytest.raises(ValueError, match="names200"):
        expand_configs(["names200"], ["insensitive"], ["beam"], [1.12], [2.0], [3.0], modes={"names54"})


def test_rows_of_older_runs_still_load() -> None:
    old = {c: 0 for c in ("precision", "recall", "fscore", "fscore_cased", "wer", "rtfx", "vocab_s")}
    row = Row(config="x", biasing="none", casing="-", decoding="beam", chunk_s=1.12, tau=None, alpha=None,
              utterances=1, skipped=None, **old)  # fmt: skip
    assert row.words == 0 and row.false_alarms == 0
