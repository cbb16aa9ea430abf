"""The first-pass/second-pass scorer's helpers (training/real_speech.py) and the real-speech set's parsing
(training/real_data.py): no engine, no audio."""

import json
import math
from pathlib import Path

import pytest

from training.real_data import parse_sphinx_transcription, tidigits_words
from training.real_speech import (
    EvalSet,
    Utterance,
    cardinal_words,
    cased_words,
    corpus_wer,
    edit_distance,
    markdown_table,
    parse_final_passes,
    plain_words,
    read_manifest,
    score_set,
    spell_numbers,
    unique_names,
)


def test_final_pass_list_keeps_order_and_rejects_junk() -> None:
    assert parse_final_passes("off,decode") == ["off", "decode"]
    assert parse_final_passes(" decode , off,decode") == ["decode", "off"]
    for bad in ["", ",", "Off", "de code", "off;decode"]:
        with pytest.raises(ValueError):
            parse_final_passes(bad)


@pytest.mark.parametrize(
    ("written", "spoken"),
    [
        ("go forward 10 meters", "go forward ten meters"),
        ("250", "two hundred and fifty"),
        ("1050", "one thousand and fifty"),
        ("1,500 people", "one thousand five hundred people"),
        ("3.5", "three point five"),
        ("the 21st and 40th", "the twenty first and fortieth"),
        ("50%", "fifty percent"),
        ("In 1999.", "In nineteen ninety nine."),
        ("1905 1900 2005 2026", "nineteen oh five nineteen hundred two thousand and five twenty twenty six"),
        ("007", "zero zero seven"),
        ("no digits here", "no digits here"),
    ],
)
def test_numbers_are_spelled_as_the_first_pass_writes_them(written: str, spoken: str) -> None:
    assert spell_numbers(written) == spoken


def test_cardinals() -> None:
    assert cardinal_words(0) == "zero"
    assert cardinal_words(19) == "nineteen"
    assert cardinal_words(2_000_005) == "two million and five"
    assert cardinal_words(1_234) == "one thousand two hundred and thirty four"


def test_lower_and_cased_words() -> None:
    assert plain_words("He was not, an ill-disposed man.") == [
        "he",
        "was",
        "not",
        "an",
        "ill",
        "disposed",
        "man",
    ]
    assert plain_words("Go 10 meters!") == ["go", "ten", "meters"]
    assert cased_words("Fail again. Fail 2 times.") == ["Fail", "again.", "Fail", "two", "times."]


def test_edit_distance_and_pooled_wer() -> None:
    assert edit_distance([], []) == 0
    assert edit_distance(["a", "b", "c"], ["a", "c"]) == 1
    assert edit_distance(["x"], ["a", "b"]) == 2
    wer, errors, words = corpus_wer([(["a", "b"], ["a", "c"]), (["d"], ["d", "e", "f"])])
    assert (errors, words) == (3, 5) and wer == pytest.approx(0.6)
    assert math.isnan(corpus_wer([])[0])


def test_score_set_scores_cased_only_where_the_reference_is_cased() -> None:
    utts = [
        Utterance("a", Path("a.wav"), "Ever tried. Ever failed.", cased=True, group="moon"),
        Utterance("b", Path("b.wav"), "ten of clubs", cased=False, group="cards"),
        Utterance("c", Path("c.wav"), "", group="none"),  # unscored
    ]
    r = score_set(EvalSet("real", utts), ["ever tried. Ever failed.", "Ten of clubs.", "anything"])
    assert (r["cased_errors"], r["cased_words"], r["cased_utterances"]) == (1, 4, 1)
    assert (r["lower_errors"], r["lower_words"], r["scored"]) == (0, 7, 2)
    assert r["groups"]["cards"]["lower_wer"] == 0 and math.isnan(r["groups"]["cards"]["cased_wer"])
    assert [u["hyp"] for u in r["utterances"]] == ["ever tried. Ever failed.", "Ten of clubs.", "anything"]
    assert "lower_errors" not in r["utterances"][2]


def test_manifest_paths_resolve_relative_to_the_manifest(tmp_path: Path) -> None:
    (tmp_path / "real" / "wav").mkdir(parents=True)
    (tmp_path / "real" / "wav" / "x.wav").write_bytes(b"")
    (tmp_path / "real" / "wav" / "y.wav").write_bytes(b"")
    lines = [
        {"audio_filepath": "wav/x.wav", "duration": 1.5, "text": "hi", "utt_id": "x", "cased": False},
        {"audio_filepath": "/elsewhere/wav/y.wav", "duration": 1.5, "text": "Hi.", "voice": "v"},
    ]
    manifest = tmp_path / "real" / "manifest.json"
    manifest.write_text("".join(json.dumps(x) + "\n" for x in lines))
    s = read_manifest(manifest)
    assert s.name == "real" and [u.utt_id for u in s.utterances] == ["x", "y"]
    assert all(u.audio.exists() for u in s.utterances)
    assert [u.cased for u in s.utterances] == [False, True] and s.minutes == pytest.approx(0.05)
    assert len(read_manifest(manifest, limit=1).utterances) == 1
    other = tmp_path / "real" / "manifest_unscored.json"
    other.write_text(manifest.read_text())
    names = [s.name for s in unique_names([read_manifest(manifest), read_manifest(other)])]
    assert names == ["real/manifest", "real/manifest_unscored"]


def test_markdown_table_rows_are_setting_by_final_pass() -> None:
    def run(fp: str, chunk: float, wer: float) -> dict:
        return {
            "setting": "beam 8",
            "final_pass": fp,
            "chunk": chunk,
            "sets": {"s": {"cased_wer": wer, "lower_wer": wer / 2}},
        }

    table = markdown_table(
        "s", [run("off", 1.12, 0.3), run("decode", 1.12, 0.2), run("off", 0.56, 0.4)], [1.12, 0.56]
    )
    lines = table.splitlines()
    assert lines[0] == "| setting | final pass | 1.12 s cased | 1.12 s lower | 0.56 s cased | 0.56 s lower |"
    assert lines[2] == "| beam 8 | off | 30.00 % | 15.00 % | 40.00 % | 20.00 % |"
    assert lines[3] == "| beam 8 | decode | 20.00 % | 10.00 % | - | - |"


def test_sphinx_transcriptions_and_tidigits_names() -> None:
    text = "<s> ten of clubs  </s> (001)\n<s> he was not an ill disposed young man </s> (s-0880)\n\n"
    assert parse_sphinx_transcription(text) == {
        "001": "ten of clubs",
        "s-0880": "he was not an ill disposed young man",
    }
    assert tidigits_words("dhd.2934z") == "two nine three four zero"
    assert tidigits_words("man.ah.35oa") == "three five oh"
