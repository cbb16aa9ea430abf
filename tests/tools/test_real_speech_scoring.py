"""The real-speech check's scoring (training/real_speech.py): settings, normalisation, pooled WER."""

import math

import pytest

from training.real_speech import REFERENCES, Setting, plain_words, pooled_wer


def test_settings_parse_greedy_and_beam_with_lm_weight() -> None:
    assert Setting.parse("greedy") == Setting("greedy")
    assert Setting.parse("beam:8:0.7") == Setting("beam", 8, 0.7)
    assert str(Setting.parse("beam:4:0")) == "beam 4, LM 0"
    assert Setting.parse("beam:8:0.7:1.5") == Setting("beam", 8, 0.7, 1.5)
    assert str(Setting.parse("beam:8:0.7:1.5")) == "beam 8, LM 0.7, bonus 1.5"


@pytest.mark.parametrize(
    "bad", ["beam", "beam:8", "beam:0:0.7", "beam:4:-1", "beam:4:0.7:-1", "greedy:4:0.7"]
)
def test_malformed_settings_are_rejected_by_name(bad: str) -> None:
    with pytest.raises(ValueError, match=bad):
        Setting.parse(bad)


def test_scoring_ignores_case_and_punctuation_but_not_words() -> None:
    assert plain_words("Ever tried. Ever failed!") == ["ever", "tried", "ever", "failed"]
    exact = REFERENCES["beckett.wav"].upper().replace(".", ",")
    assert pooled_wer({"beckett.wav": exact}) == (0.0, 12)
    one_wrong = REFERENCES["beckett.wav"].replace("Fail better", "Fail batter")
    wer, words = pooled_wer({"beckett.wav": one_wrong, "unscored.wav": "anything"})
    assert words == 12 and wer == pytest.approx(1 / 12)


def test_pooled_wer_weights_files_by_their_words() -> None:
    dropped = REFERENCES["two_cities.wav"].rsplit(" ", 3)[0]  # the last three words missing
    wer, words = pooled_wer({"two_cities.wav": dropped, "beckett.wav": REFERENCES["beckett.wav"]})
    assert words == len(plain_words(REFERENCES["two_cities.wav"])) + 12
    assert wer == pytest.approx(3 / words)
    assert math.isnan(pooled_wer({"other.wav": "text"})[0])
