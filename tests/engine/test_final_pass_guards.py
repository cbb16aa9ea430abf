"""The second pass's guards and word timing, decided on given hypotheses (no model needed).

Each guard is also provoked with real audio through the engine in ``test_final_pass.py``; here each rule is
pinned on its own, with the case just inside and just outside it."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from backend.engine.final_guards import (
    FinalPassConfig,
    FinalVocabulary,
    Readings,
    collapse_stutter,
    compression_ratio,
    disagreement,
    judge,
    max_tokens_for,
    needs_readings,
    repeats,
    spoken_text,
    strip_repeat,
    with_text,
)
from backend.engine.types import Final, Word
from biasing.matching import TermFinder

CONFIG = FinalPassConfig(model="unused")


@dataclass
class Hyp:
    text: str
    avg_logprob: float = -0.2
    no_speech_prob: float = 0.01
    tokens: list[int] = field(default_factory=lambda: [1, 2, 3])


def first(text: str, start: float = 1.0, end: float = 3.0) -> Final:
    words = text.split()
    step = (end - start) / len(words)
    timed = tuple(Word(w, start + i * step, start + (i + 1) * step) for i, w in enumerate(words))
    return Final(text, start, end, timed)


def test_a_confident_close_hypothesis_replaces_the_first_pass_text() -> None:
    result = judge(
        CONFIG, first("The patient takes lines olid daily."), Hyp("The patient takes linezolid daily."), 3, 40
    )
    assert result.reason == "second"
    assert result.final is not None
    assert result.final.text == "The patient takes linezolid daily."
    assert result.final.source == "second"


def test_numbers_are_written_as_the_first_pass_writes_them() -> None:
    result = judge(
        CONFIG, first("Give six hundred milligrams twice daily."), Hyp("Give 600 mg twice daily."), 3, 40
    )
    assert result.final is not None and result.final.text == "Give six hundred milligrams twice daily."


def test_silence_that_whisper_calls_no_speech_drops_the_final() -> None:
    hyp = Hyp("you", avg_logprob=-1.5, no_speech_prob=0.9)
    assert judge(CONFIG, first("To a."), hyp, 2, 30).final is None
    confident = Hyp("Yes.", avg_logprob=-0.3, no_speech_prob=0.9)  # a short confident word is kept
    assert judge(CONFIG, first("Yes."), confident, 2, 30).final is not None


def test_a_stray_word_in_a_pause_that_whisper_calls_no_speech_is_dropped() -> None:
    # measured: the streaming pass's "The" 2 s after a sentence; Whisper "you", log-prob -0.98, no speech 0.97
    assert (
        judge(CONFIG, first("The"), Hyp("you", avg_logprob=-0.98, no_speech_prob=0.97), 1.1, 16).final is None
    )
    # the same doubt on a word both passes hear is not enough to drop it
    agreed = judge(CONFIG, first("Yes."), Hyp("Yes.", avg_logprob=-0.5, no_speech_prob=0.8), 1.1, 16)
    assert agreed.final is not None


def test_an_unsure_second_pass_keeps_the_first_pass_text() -> None:
    final = first("It was the best of times.")
    result = judge(CONFIG, final, Hyp("It was the beast of tides.", avg_logprob=-2.2), 3, 40)
    assert (result.reason, result.final) == ("unsure", final)


def test_a_loop_keeps_the_first_pass_text() -> None:
    final = first("We will see you next week.")
    looped = Hyp("We will see you next week. See you next week. See you next week. See you next week.")
    assert judge(CONFIG, final, looped, 8, 80).reason == "repeats"
    assert judge(CONFIG, final, Hyp("so so so so"), 8, 80).reason in {"repeats", "disagrees"}


def test_more_words_than_the_audio_can_hold_keeps_the_first_pass_text() -> None:
    final = first("Hello there.", 0.0, 1.0)
    long = Hyp("Hello there, and welcome to the quarterly earnings call of the company.")
    assert judge(CONFIG, final, long, 1.0, 40).reason == "too_many_words"


def test_running_into_the_token_limit_keeps_the_first_pass_text() -> None:
    final = first("Hello there.", 0.0, 1.0)
    hyp = Hyp("Hello there.", tokens=list(range(max_tokens_for(1.0))))
    assert judge(CONFIG, final, hyp, 1.0, max_tokens_for(1.0)).reason == "token_limit"


def test_a_reading_that_skips_a_sentence_of_a_long_window_keeps_the_first_pass_text() -> None:
    """Issue 37: Whisper, given a long window of similar sentences, may leave one out; the agreement guard
    (60 % disagreement) let that through, losing words."""
    said = "The weather is quite nice today. Please send the report before Friday. We will review it again."
    final = first(said.replace("quite nice", "quiet nice"))
    skipped = Hyp("The weather is quite nice today. We will review it again.")
    assert judge(CONFIG, final, skipped, 8, 80).reason == "dropped_words"
    corrected = Hyp(said.replace("the report", "a report"))  # a reading with the same words is taken
    assert judge(CONFIG, final, corrected, 8, 80).reason == "second"
    short = first("Please stand the quarter lee report.")  # a few words fewer in a short final are fine
    assert judge(CONFIG, short, Hyp("Please send the quarterly report."), 3, 40).reason == "second"


def test_disagreement_beyond_the_threshold_keeps_the_first_pass_text() -> None:
    final = first("Revenue grew twelve percent this quarter.")
    assert judge(CONFIG, final, Hyp("Thank you for watching."), 3, 40).reason == "disagrees"


def test_a_term_the_first_pass_found_is_never_lost() -> None:
    vocabulary = FinalVocabulary(scorer=None, finder=TermFinder(["Velcade"]))
    final = first("Start Velcade on Monday.")
    spliced = judge(CONFIG, final, Hyp("Start Valcade on Monday, please."), 3, 40, vocabulary)
    assert spliced.reason == "second_terms_kept"
    assert spliced.final is not None and spliced.final.text == "Start Velcade on Monday, please."
    kept = judge(CONFIG, final, Hyp("Start velcade on Monday."), 3, 40, vocabulary)
    assert kept.reason == "second"
    # a term glued to its neighbour by the second pass comes back with the first pass's words around it
    merged = judge(
        CONFIG,
        first("Please start Velcade today, nurse."),
        Hyp("Please start Velcadetoday, nurse."),
        3,
        40,
        vocabulary,
    )
    assert merged.final is not None and merged.final.text == "Please start Velcade today, nurse."


def test_repeats_and_compression_detect_loops_not_ordinary_speech() -> None:
    assert repeats("thank you thank you thank you")
    assert repeats("no no no")
    assert not repeats("it was the best of times, it was the worst of times")
    assert compression_ratio("the same words again " * 8) > CONFIG.max_compression
    assert (
        compression_ratio("It was the best of times, it was the worst of times, it was the age of wisdom.")
        < 2.0
    )


def test_disagreement_is_a_lower_cased_word_error_rate() -> None:
    assert disagreement("The cat sat.", "the cat sat") == 0.0
    assert disagreement("The cat sat.", "the dog sat") == 1 / 3
    assert disagreement("", "") == 0.0


def test_word_times_come_from_the_first_pass_words_aligned_by_content() -> None:
    final = first("take lines olid daily", 2.0, 4.0)  # words 0.5 s each: take 2.0-2.5, lines 2.5-3.0, ...
    refined = with_text(final, "Take linezolid daily.")
    assert [w.text for w in refined.words] == ["Take", "linezolid", "daily."]
    take, linezolid, daily = refined.words
    assert (take.start_s, take.end_s) == (2.0, 2.5)
    assert (linezolid.start_s, linezolid.end_s) == (2.5, 3.5)  # the two replaced words' span
    assert (daily.start_s, daily.end_s) == (3.5, 4.0)
    assert (refined.start_s, refined.end_s) == (2.0, 4.0)


def test_an_inserted_word_takes_the_gap_between_its_neighbours() -> None:
    final = first("the best times", 0.0, 3.0)
    refined = with_text(final, "the best of times")
    times = [(w.text, round(w.start_s, 3), round(w.end_s, 3)) for w in refined.words]
    assert times == [("the", 0.0, 1.0), ("best", 1.0, 2.0), ("of", 2.0, 2.0), ("times", 2.0, 3.0)]


def test_a_lost_term_is_spliced_back_and_the_other_corrections_stay() -> None:
    vocabulary = FinalVocabulary(scorer=None, finder=TermFinder(["Moexipril"]))
    final = first("History of angy lasty, currently taken moexipril and Mirapex.")
    hyp = Hyp("History of an angioplasty, currently taking Moexa Pril and Mirapex.")
    result = judge(CONFIG, final, hyp, 5, 60, vocabulary)
    assert result.reason == "second_terms_kept"
    assert result.final is not None
    # the differing stretch around the term comes from the first pass; the rest from the second
    assert result.final.text == "History of an angioplasty, currently taken moexipril and Mirapex."


def test_a_transcript_said_twice_keeps_its_first_copy() -> None:
    once = "a cloth of an olive brown color used for uniforms."
    doubled = f"{once} {once.capitalize()}"
    result = judge(CONFIG, first("A class of an olive color used for uniforms."), Hyp(doubled), 4.5, 60)
    assert result.final is not None
    assert result.final.text == "A cloth of an olive brown color used for uniforms."
    cut = "A small pouch inside a garment. A small pouch inside"  # the copy cut short by the token cap
    assert strip_repeat(cut) == "A small pouch inside a garment."
    assert strip_repeat("No, no, no.") == "No, no, no."  # a short repeat is speech, not a loop
    assert strip_repeat("It was the best of times, it was the worst of times.") == (
        "It was the best of times, it was the worst of times."
    )


def test_a_repeat_the_first_pass_heard_too_is_speech_and_is_never_cut_off() -> None:
    once = "Please send the report before Friday. We will review the budget."
    said_twice = first(f"{once} Please send the report before Fright. We will review the budget.", 0.0, 8.0)
    result = judge(CONFIG, said_twice, Hyp(f"{once} {once}"), 8.0, 120)
    assert result.final is not None and result.final.text == f"{once} {once}"  # not cut to its first copy
    assert spoken_text(f"{once} {once}", said_twice.text) == f"{once} {once}"
    assert spoken_text(f"{once} {once}", once) == once  # Whisper's loop, which the first pass did not hear
    assert spoken_text(f"{once} {once}") == once


def test_a_window_too_short_to_read_is_never_rewritten_only_dropped_as_no_speech() -> None:
    short = first("I", 0.0, 0.3)
    assert judge(CONFIG, short, Hyp("Hi."), 0.5, 8).reason == "too_short"  # kept as the first pass wrote it
    assert (
        judge(CONFIG, short, Hyp("Okay, okay.", avg_logprob=-0.5, no_speech_prob=0.8), 0.5, 8).final is None
    )


class _Whisper:
    """A stand-in for ``FinalPassModel``: the boosted and plain readings of each utterance and Whisper's
    teacher-forced log-probability of any text, as given."""

    def __init__(self, boosted: list[Hyp], plain: list[Hyp], logprob: dict[str, float]) -> None:
        self.boosted, self.plain, self.logprob = boosted, plain, logprob
        self.texts: list[str] = []

    def encode(self, batch: list[object], pad_s: float) -> tuple[object, object]:
        import torch

        return torch.zeros(1, 4, 2), torch.tensor([4])

    def decode(self, encoded: object, lengths: object, *, boosters: list[object], **_: object) -> list[Hyp]:
        twins = len(boosters) - len(self.boosted)  # a plain twin per utterance with a vocabulary, if checked
        assert twins in (0, sum(b is not None for b in boosters[: len(self.boosted)]))
        assert all(b is None for b in boosters[len(self.boosted) :])
        return self.boosted + self.plain[:twins]

    def ids(self, text: str) -> list[int]:
        self.texts.append(text)
        return [len(self.texts) - 1]

    def score(self, encoded: object, lengths: object, seqs: list[list[list[int]]]) -> list[list[float]]:
        return [[self.logprob.get(self.texts[s[0]], -50.0) for s in per] for per in seqs]


def _second_pass(whisper: _Whisper, deficit: float | None = 8.0) -> object:
    import numpy as np

    from backend.engine.final_pass import FinalPass

    second = FinalPass.__new__(FinalPass)
    second.config = FinalPassConfig(model="unused", max_term_deficit=deficit)
    second.model, second.adapter = whisper, whisper
    second.outcomes = {}
    return second, np.zeros(3 * 16000, np.float32)


VOCABULARY = FinalVocabulary(scorer=object(), finder=TermFinder(["Halvorsen", "Antiplasmins"]))


def test_a_reading_the_vocabulary_pulled_off_gives_way_to_whispers_plain_reading() -> None:
    final = first("He was not an ill disposed young man.")
    whisper = _Whisper(
        boosted=[Hyp("He was not Antiplasmins young man", avg_logprob=-2.6, no_speech_prob=0.7)],
        plain=[Hyp("He was not an ill-disposed young man.", avg_logprob=-0.4)],
        logprob={},
    )
    second, audio = _second_pass(whisper)
    (refined,) = second.refine_many([(final, audio, VOCABULARY)])
    assert refined.reason == "plain_second"
    assert refined.final is not None and refined.final.text == "He was not an ill-disposed young man."


def test_a_term_the_audio_does_not_carry_is_replaced_by_what_whisper_reads_there() -> None:
    final = first("And mister John Dashwood had then leisure.")
    hijacked = "Antiplasmins John Dashwood had then leisure."
    plain = "And Mr. John Dashwood had then leisure."
    whisper = _Whisper(
        boosted=[Hyp(hijacked, avg_logprob=-0.9)],
        plain=[Hyp(plain, avg_logprob=-0.3)],
        logprob={hijacked: -40.0, "And Mr. John Dashwood had then leisure.": -12.0},
    )
    second, audio = _second_pass(whisper)
    (refined,) = second.refine_many([(final, audio, VOCABULARY)])
    assert refined.final is not None and refined.final.text == "And Mr. John Dashwood had then leisure."
    (check,) = refined.checks
    assert (check.term, check.alternative, check.margin) == ("Antiplasmins", ("And", "Mr."), -28.0)
    assert second.outcomes == {"term_dropped": 1, "term_confirmed": 0}


def test_a_term_close_to_the_plain_reading_is_kept_and_the_check_can_be_off() -> None:
    final = first("Mister Halverson will present.")
    text = "Mister Halvorsen will present."
    whisper = _Whisper(
        boosted=[Hyp(text, avg_logprob=-0.5)],
        plain=[Hyp("Mister Halverson will present.", avg_logprob=-0.4)],
        logprob={text: -14.0, "Mister Halverson will present.": -9.5},
    )
    second, audio = _second_pass(whisper)
    (refined,) = second.refine_many([(final, audio, VOCABULARY)])
    assert refined.final is not None and refined.final.text == text
    assert [c.margin for c in refined.checks] == [-4.5]
    assert second.outcomes == {"term_dropped": 0, "term_confirmed": 1}
    whisper.logprob[text] = -60.0
    unchecked, audio = _second_pass(whisper, deficit=None)
    (refined,) = unchecked.refine_many([(final, audio, VOCABULARY)])
    assert refined.final is not None and refined.final.text == text and refined.checks == ()


def test_a_lone_junk_word_on_noise_is_dropped_at_any_window_length() -> None:
    """issue 39: "A", "a", "pio", "Re" were 5 of 13 cues of a WebVTT export."""
    for junk, heard in (("A", Hyp("")), ("pio", Hyp("Re.")), ("Re", Hyp("Okay", no_speech_prob=0.9))):
        for seconds in (0.4, 2.0):
            result = judge(CONFIG, first(junk, 1.0, 1.0 + seconds), heard, seconds, 40)
            assert (result.final, result.reason) == (None, "junk_word"), (junk, seconds)


def test_a_short_answer_a_term_or_a_word_whisper_hears_as_speech_is_kept() -> None:
    assert judge(CONFIG, first("Yes."), Hyp("Yes."), 2, 40).reason == "second"
    assert judge(CONFIG, first("Ten"), Hyp(""), 0.5, 40).final is not None  # an answer, too short to read
    vocabulary = FinalVocabulary(scorer=None, finder=TermFinder(["Pio"]))
    assert judge(CONFIG, first("Pio"), Hyp(""), 0.5, 40, vocabulary).final is not None
    kept = judge(CONFIG, first("A"), Hyp("A cup of tea."), 2, 40)
    assert kept.reason != "junk_word"  # Whisper hears speech: the usual guards decide


def _timed(*spans: tuple[str, float, float]) -> tuple[Word, ...]:
    return tuple(Word(text, start, end) for text, start, end in spans)


def test_the_models_one_frame_loop_is_cut_and_words_said_at_a_pace_are_kept() -> None:
    """issue 39: the bundled model wrote "Go more been every every every every every everyone." for espeak's
    "Good morning everyone." (greedy, 1.12 s and 0.56 s): each "every" one 80 ms frame after the other."""
    loop = _timed(
        ("been", 0.96, 1.2),
        *((("every", 1.2 + 0.08 * k, 1.28 + 0.08 * k)) for k in range(5)),
        ("everyone.", 1.6, 1.92),
    )
    assert [w.text for w in collapse_stutter(loop)] == ["been", "everyone."]
    alone = _timed(("the", 0.5, 0.58), ("the", 0.58, 0.66), ("the", 0.66, 0.74), ("end.", 0.74, 1.0))
    assert [w.text for w in collapse_stutter(alone)] == ["the", "end."]
    said = _timed(("no", 0.5, 0.8), ("no", 0.9, 1.2), ("no", 1.3, 1.6), ("nobody", 1.7, 2.1))
    assert collapse_stutter(said) == said  # a person saying it: each word longer than a frame
    two = _timed(("very", 0.5, 0.58), ("very", 0.58, 0.66), ("good", 0.7, 1.0))
    assert collapse_stutter(two) == two  # two alone may be speech


REVERB_FIRST = "Ever knew a group is a person, this border."  # the first pass in a reverberant room
WHISPER_READS = "Revenue grew twelve percent this quarter."


def test_by_agreement_a_reading_that_disagrees_keeps_the_first_pass_text_however_confident() -> None:
    config = FinalPassConfig(model="unused", arbitration="agreement")
    final = first(REVERB_FIRST)
    assert disagreement(final.text, WHISPER_READS) > config.max_disagreement
    assert judge(config, final, Hyp(WHISPER_READS, avg_logprob=-0.1), 3, 40).reason == "disagrees"


def test_by_confidence_a_confident_reading_that_disagrees_replaces_the_first_pass_text() -> None:
    config = FinalPassConfig(model="unused", arbitration="confidence", confident_logprob=-0.5)
    final = first(REVERB_FIRST)
    confident = judge(config, final, Hyp(WHISPER_READS, avg_logprob=-0.5), 3, 40)
    assert confident.reason == "second"
    assert confident.final is not None and confident.final.text == WHISPER_READS
    assert judge(config, final, Hyp(WHISPER_READS, avg_logprob=-0.51), 3, 40).reason == "disagrees"


def test_by_confidence_whispers_known_failures_still_keep_or_drop_the_final() -> None:
    config = FinalPassConfig(model="unused", arbitration="confidence", confident_logprob=-0.5)
    final = first(REVERB_FIRST)
    loop = Hyp("Revenue grew and grew and grew and grew.", avg_logprob=-0.1)
    assert judge(config, final, loop, 3, 40).reason == "repeats"
    hallucinated = Hyp("Thank you for watching.", avg_logprob=-0.1, no_speech_prob=0.7)  # in a pause
    assert judge(config, final, hallucinated, 3, 40).final is None
    capped = Hyp(WHISPER_READS, avg_logprob=-0.1, tokens=list(range(40)))
    assert judge(config, final, capped, 3, 40).reason == "token_limit"
    assert judge(config, final, Hyp(WHISPER_READS, avg_logprob=-2.1), 3, 40).reason == "unsure"
    long_final = first(
        "The weather is quite nice today. Please send the report before Friday. We will review it."
    )
    skipped = Hyp("The weather is quite nice. We will review it.", avg_logprob=-0.1)
    assert judge(config, long_final, skipped, 8, 80).reason == "dropped_words"


def test_by_score_the_reading_whisper_prefers_on_the_audio_is_kept() -> None:
    config = FinalPassConfig(model="unused", arbitration="scored", score_margin=0.2)
    final = first(REVERB_FIRST)
    hyp = Hyp(WHISPER_READS, avg_logprob=-0.9)
    assert needs_readings(config, final, hyp)
    assert not needs_readings(FinalPassConfig(model="unused", arbitration="agreement"), final, hyp)
    assert not needs_readings(config, final, Hyp(REVERB_FIRST.replace("border", "boarder")))
    won = judge(config, final, hyp, 3, 40, readings=Readings(first_logprob=-1.4, second_logprob=-1.2))
    assert won.reason == "second" and won.final is not None and won.final.text == WHISPER_READS
    lost = judge(config, final, hyp, 3, 40, readings=Readings(first_logprob=-1.4, second_logprob=-1.21))
    assert lost.reason == "disagrees"
    assert judge(config, final, hyp, 3, 40).reason == "disagrees"  # not scored: no evidence for Whisper
    loop = Hyp("Revenue grew and grew and grew and grew.")
    assert judge(config, final, loop, 3, 40, readings=Readings(-3.0, -0.1)).reason == "repeats"


def test_by_score_the_second_pass_scores_both_texts_where_they_disagree() -> None:
    final = first(REVERB_FIRST)
    whisper = _Whisper(
        boosted=[Hyp(WHISPER_READS, avg_logprob=-0.9)],
        plain=[],
        logprob={REVERB_FIRST: -3.0, WHISPER_READS: -1.0},  # per text: one token and end-of-text here
    )
    second, audio = _second_pass(whisper)
    second.config = FinalPassConfig(model="unused", arbitration="scored")
    (refined,) = second.refine_many([(final, audio, None)])
    assert refined.reason == "second" and refined.final is not None and refined.final.text == WHISPER_READS
    whisper.logprob[REVERB_FIRST] = -0.5  # Whisper itself finds the first pass's text likelier
    (refined,) = second.refine_many([(final, audio, None)])
    assert refined.reason == "disagrees" and refined.final == final


def test_an_unknown_arbitration_is_rejected() -> None:
    from backend.engine.types import EngineConfig

    with pytest.raises(ValueError, match="final_pass_arbitration must be one of"):
        EngineConfig(model="unused", final_pass_arbitration="vote")


def test_by_score_words_skipped_stand_only_where_whisper_finds_them_far_less_likely() -> None:
    """Babble: the first pass's long final is mostly noise words, which Whisper's reading has nothing for; a
    sentence Whisper skipped in clean speech scores close to its own reading."""
    config = FinalPassConfig(model="unused", arbitration="scored", skip_margin=1.0)
    said = "The weather is quite nice today. Please send the report before Friday. We will review it again."
    final = first(said)
    skipped = Hyp("The weather is quite nice today. We will review it again.")
    assert needs_readings(config, final, skipped)
    kept = judge(config, final, skipped, 8, 80, readings=Readings(first_logprob=-0.6, second_logprob=-0.3))
    assert kept.reason == "dropped_words" and kept.final == final
    noise = judge(config, final, skipped, 8, 80, readings=Readings(first_logprob=-4.0, second_logprob=-0.3))
    assert noise.reason == "second"


def test_a_reading_rewrites_what_is_shown_only_where_a_shown_word_changes() -> None:
    from backend.engine.final_guards import rewrites

    assert not rewrites("The weather is", "the weather, is nice today.")  # case, marks, words after
    assert not rewrites("", "Anything at all.")
    assert rewrites("The weather is nice", "The feather is nice")
    assert rewrites("The weather is nice", "The weather")  # shown words taken away
