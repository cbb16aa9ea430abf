"""The second pass for finals through the engine, on the bundled models (issue 24).

Real parts: the bundled Transducer as the first pass, the shipped Whisper model file as the second, audio
spoken by espeak-ng (a voice neither model was trained on as such) or made to provoke a guard."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import numpy as np
import pytest

from backend.engine import Engine, EngineConfig, Final, StreamOptions
from backend.engine.final_guards import disagreement
from captions_model.paths import BUNDLED_LM_PATH, BUNDLED_MODEL_PATH, FINAL_PASS_MODEL_PATH
from tests.engine.conftest import finals_of, running
from tests.support.speech import spoken

pytestmark = pytest.mark.slow

SENTENCES = (
    "The weather is quite pleasant today and the children are playing in the garden.",
    "Please send the quarterly report to the finance team before Friday.",
    "We will review the budget again at the next meeting.",
)
TERM_SENTENCE = "The patient started Caelmira on Monday."


@asynccontextmanager
async def two_pass(**overrides: object) -> AsyncIterator[Engine]:
    """The bundled model with the second pass on (beam decoding, the service's default)."""
    for path in (BUNDLED_MODEL_PATH, FINAL_PASS_MODEL_PATH):
        if not path.is_file():
            pytest.skip(f"{path} is not built")
    settings: dict[str, object] = {"beam_size": 4, **overrides}
    config = EngineConfig(model=str(BUNDLED_MODEL_PATH), final_pass="decode", **settings)  # type: ignore[arg-type]
    async with running(config) as engine:
        yield engine


def text(finals: list[Final]) -> str:
    return " ".join(f.text for f in finals)


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> list[np.ndarray]:
    return [spoken(s, tmp_path_factory.mktemp("wav")) for s in SENTENCES]


async def test_the_second_pass_rewrites_finals_closer_to_what_was_said(speech: list[np.ndarray]) -> None:
    async with two_pass() as engine:
        refined = [await finals_of(engine, audio) for audio in speech]
        stats = dict(engine.stats().final_pass_outcomes)
    firsts = []
    async with running(EngineConfig(model=str(BUNDLED_MODEL_PATH), beam_size=4)) as engine:
        firsts = [await finals_of(engine, audio) for audio in speech]
    second_errors = sum(disagreement(s, text(f)) for s, f in zip(SENTENCES, refined, strict=True))
    first_errors = sum(disagreement(s, text(f)) for s, f in zip(SENTENCES, firsts, strict=True))
    assert stats.get("second", 0) >= 2, stats
    assert any(f.source == "second" for finals in refined for f in finals)
    assert second_errors < first_errors, (refined, firsts)
    assert second_errors / len(SENTENCES) <= 0.15, refined


async def test_a_batched_second_pass_gives_what_each_stream_gets_alone(speech: list[np.ndarray]) -> None:
    async with two_pass(max_wait_ms=200.0) as engine:
        alone = [text(await finals_of(engine, audio)) for audio in speech]
        together = await asyncio.gather(*(finals_of(engine, audio) for audio in speech))
        batched = engine.stats().max_batch_streams_seen
    assert batched == len(speech)  # the streams really shared steps
    assert [text(f) for f in together] == alone


async def test_a_term_survives_and_one_meetings_terms_stay_out_of_another(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    audio = spoken(TERM_SENTENCE, tmp_path_factory.mktemp("term"))
    async with two_pass(max_wait_ms=200.0) as engine:
        vocabulary = await engine.load_vocabulary(["caelmira", "Velcade"])
        with_list, without = await asyncio.gather(
            finals_of(engine, audio, vocabulary), finals_of(engine, audio)
        )
        vocabulary.release()
    assert "caelmira" in text(with_list).lower(), with_list  # the service shows it as listed (termforms)
    assert "caelmira" in [t.lower() for f in with_list for t in f.matched_terms]
    assert "caelmira" not in text(without).lower(), without


async def test_silence_noise_and_tones_give_no_invented_final() -> None:
    rng = np.random.default_rng(0)
    t = np.arange(4 * 16000) / 16000
    chord = sum(0.15 * np.sin(2 * np.pi * f * t) for f in (261.6, 329.6, 392.0)).astype(np.float32)
    noise = (0.05 * rng.standard_normal(4 * 16000)).astype(np.float32)
    silence = np.zeros(4 * 16000, np.float32)
    async with two_pass(leading_silence_dbfs=None) as engine:  # the decoder sees the quiet audio too
        results = {
            name: await finals_of(engine, audio)
            for name, audio in [("silence", silence), ("noise", noise), ("chord", chord)]
        }
    for name, finals in results.items():
        for final in finals:  # at most a short first-pass guess; never a second-pass invention or a loop
            assert final.source == "first" or len(final.text.split()) <= 3, (name, final)
            assert len(final.text.split()) <= 6, (name, final)


async def test_speech_without_a_long_pause_is_cut_into_finals_whisper_can_read(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    sentence = " ".join(SENTENCES * 4).replace(".", ",")  # ~50 s with no 0.8 s pause to end an utterance
    audio = spoken(sentence, tmp_path_factory.mktemp("long"))
    assert len(audio) / 16000 > 30
    async with two_pass() as engine:
        finals = await finals_of(engine, audio)
        outcomes = dict(engine.stats().final_pass_outcomes)
    assert len(finals) >= 2
    assert max(f.end_s - f.start_s for f in finals) <= 26  # ended on a comma's pause, 25 s at the most
    assert outcomes.get("too_long", 0) == 0 and sum(outcomes.values()) >= len(finals)  # Whisper read each
    words = " ".join(f.text for f in finals).split()
    assert len(words) >= 0.8 * len(sentence.split())  # no part of the speech was lost at a cut
    for final in finals:  # never more words than the audio can hold
        assert len(final.text.split()) <= 6 * (final.end_s - final.start_s) + 2


async def test_a_final_whose_beginning_whisper_no_longer_holds_keeps_the_first_pass(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    sentence = " ".join(SENTENCES * 4).replace(".", ",")
    audio = spoken(sentence, tmp_path_factory.mktemp("long"))
    no_cut = {"long_utterance_s": 60.0, "very_long_utterance_s": 60.0, "max_utterance_s": 60.0}
    async with two_pass(**no_cut, sentence_pause_ms=800) as engine:  # one ~50 s utterance
        finals = await finals_of(engine, audio)
        outcomes = dict(engine.stats().final_pass_outcomes)
    longest = max(finals, key=lambda f: f.end_s - f.start_s)
    assert longest.end_s - longest.start_s > 28
    # Whisper keeps 30 s: it would read only the end of this one and drop its first 20 s of words
    assert longest.source == "first" and outcomes.get("too_long", 0) >= 1
    assert len(longest.text.split()) >= 0.8 * len(sentence.split()) * (longest.end_s - longest.start_s) / (
        len(audio) / 16000
    )


async def test_an_utterance_cut_by_a_disconnect_is_refined_within_its_audio(speech: list[np.ndarray]) -> None:
    audio = speech[1][: len(speech[1]) // 2]  # the client vanished mid-sentence
    async with two_pass() as engine:
        finals = await finals_of(engine, audio)
    assert finals
    heard = len(audio) / 16000
    for final in finals:
        assert final.end_s <= heard + 1.12  # the padded last chunk at most
        assert len(final.text.split()) <= 6 * heard + 2
    assert disagreement(SENTENCES[1][: len(SENTENCES[1]) // 2], text(finals)) <= 0.6


async def test_no_stray_word_is_committed_in_the_pause_after_a_sentence(speech: list[np.ndarray]) -> None:
    """Measured with the service's decoding: the streaming pass alone commits "The" or "To a" in the silence
    after a sentence (6.7 s and 18.0 s here); Whisper hears no speech there and the final is dropped."""
    sentence = np.concatenate([speech[1], np.zeros(4 * 16000, np.float32)])
    audio = np.concatenate([sentence, sentence])
    served = {"beam_size": 8, "lm_path": str(BUNDLED_LM_PATH), "lm_token_bonus": 1.0}
    async with two_pass(**served) as engine:
        for chunk_s in (1.12, 0.56):
            finals = await finals_of(engine, audio, chunk_s=chunk_s)
            assert [len(f.text.split()) >= 5 for f in finals] == [True, True], (chunk_s, finals)


async def test_the_second_pass_runs_beside_the_decode_thread_and_gives_way_under_load(
    speech: list[np.ndarray],
) -> None:
    """Issue 37: Whisper re-reads finals on its own thread while the decode thread goes on with the other
    streams; with the second pass switched off (the ladder's first rung) finals keep the first pass's text."""
    async with two_pass() as engine:
        final_pass = engine._loaded_decoder().final_pass
        assert final_pass is not None
        original, threads = final_pass.apply, []
        entered, release = threading.Event(), threading.Event()

        def held_apply(job: object, *, skip: str | None = None) -> object:
            threads.append(threading.current_thread().name)
            entered.set()
            release.wait(60)
            return original(job, skip=skip)  # type: ignore[arg-type]

        final_pass.apply = held_apply  # type: ignore[method-assign]
        speaker = asyncio.create_task(finals_of(engine, speech[0]))
        assert await asyncio.to_thread(entered.wait, 120)
        other = engine.open_stream(StreamOptions(chunk_s=1.12, decoding="beam"))
        size = other.chunk_samples
        steps = engine.stats().steps_total
        for k in (1, 2):  # loud chunks (a leading quiet one is skipped, not decoded)
            await asyncio.wait_for(other.push(speech[1][k * size : (k + 1) * size]), 60)
        assert engine.stats().steps_total >= steps + 2
        assert not speaker.done()  # its final is still being re-read
        release.set()
        refined = await speaker
        await other.finish()
        final_pass.apply = original  # type: ignore[method-assign]
        assert threads and all(name.startswith("engine-final") for name in threads)
        assert any(f.source == "second" for f in refined), refined

        engine.second_pass_enabled = False
        unrefined = await finals_of(engine, speech[2])
        outcomes = dict(engine.stats().final_pass_outcomes)
    assert unrefined and all(f.source == "first" for f in unrefined), unrefined
    assert outcomes.get("skipped_load", 0) >= len(unrefined), outcomes


async def partials_of(engine: Engine, audio: np.ndarray) -> tuple[list[str], list[Final]]:
    """Every non-empty partial one stream shows over ``audio`` (1.12 s chunks, beam), and its finals."""
    stream = engine.open_stream(StreamOptions(chunk_s=1.12, decoding="beam"))
    size = stream.chunk_samples
    padded = np.concatenate([audio, np.zeros(-len(audio) % size, np.float32)])
    partials: list[str] = []
    finals: list[Final] = []
    for start in range(0, len(padded), size):
        result = await stream.push(padded[start : start + size])
        finals += result.finals
        if result.partial:
            partials.append(result.partial)
    finals += (await stream.finish()).finals
    return partials, finals


def reread(engine: Engine) -> int:
    return sum(n for name, n in engine.stats().final_pass_outcomes if name.startswith("partial_"))


async def test_the_open_utterance_is_re_read_live_and_the_screen_shows_the_better_reading(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Issue 45 step 4: an utterance still open is re-read by the second pass every 1.5 s once 2 s long;
    the partial shows that reading (and the streaming pass's newer words after it), so what the screen
    shows before the final is closer to what was said; off (0), and on the ladder's first rung, never."""
    sentence = " ".join(SENTENCES[:2]).replace(".", ",")  # ~8 s, one utterance
    audio = spoken(sentence, tmp_path_factory.mktemp("open"))
    async with two_pass(final_pass_refine_partials_s=0.0) as engine:
        plain, _ = await partials_of(engine, audio)
        assert reread(engine) == 0
    async with two_pass() as engine:
        shown, finals = await partials_of(engine, audio)
        assert reread(engine) >= 2
        engine.second_pass_enabled = False  # the degradation ladder's first rung
        before = reread(engine)
        await partials_of(engine, audio)
        assert reread(engine) == before
    assert finals and len(shown) == len(plain)
    assert disagreement(sentence, shown[-1]) < disagreement(sentence, plain[-1]), (shown[-1], plain[-1])
    assert sum(a != b for a, b in zip(shown, plain, strict=True)) >= 2  # re-read partials were shown
    assert len(shown[-1].split()) >= 0.8 * len(sentence.split())  # no words lost between re-read and tail


def test_words_on_screen_change_only_for_a_confident_re_read() -> None:
    """Flicker (issue 45 step 4): a re-read that only adds words after what the screen shows is taken at any
    confidence; one that changes words already shown is taken only when Whisper is confident of it
    (``confident_logprob``), else the earlier reading stays with the streaming pass's newer words after it."""
    from backend.engine.final_guards import FinalPassConfig, Refinement
    from backend.engine.final_pass import FinalPass, _StreamAudio

    if not FINAL_PASS_MODEL_PATH.is_file():
        pytest.skip(f"{FINAL_PASS_MODEL_PATH} is not built")
    second = FinalPass(FinalPassConfig(model=str(FINAL_PASS_MODEL_PATH)))
    second._audio[7] = _StreamAudio()

    def show(partial: str, reading: str, logprob: float) -> str:
        final = Final(reading, 0.0, 3.0)
        return second._shown(7, 0, partial, Refinement(final, "second", reading, avg_logprob=logprob))

    assert show("the whether is", "The weather is", -0.9) == "The weather is"  # nothing shown before
    unsure = second.config.confident_logprob - 0.4
    assert show("the whether is nice today", "The weather is nice today.", unsure) == (
        "The weather is nice today."  # adds words after the shown ones
    )
    assert show("the whether is nice today and", "The feather is nice today and", unsure) == (
        "The weather is nice today. and"  # an unsure rewrite of shown words waits; the tail follows
    )
    assert second.outcomes.get("partial_unsure_rewrite") == 1
    confident = second.config.confident_logprob + 0.2
    assert show("the whether is nice today and", "The weather is nice today, and", confident) == (
        "The weather is nice today, and"
    )
