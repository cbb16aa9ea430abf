"""Beam search on cache-aware streaming models (issue 38): the cache-aware pipeline encodes each chunk with
the stream's encoder caches and our streaming beam search (``beam.py``, the same as for buffered models)
decodes the new frames, each stream's beams and vocabulary kept across chunks. Random tiny models: outputs
are compared, not accuracy."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
import torch

from backend.engine import Engine, EngineConfig, Final
from backend.engine.decoder import StreamDecoder
from backend.engine.steps import StepItem, make_frame
from tests.engine.conftest import finals_of, noise, running
from tests.engine.test_engine_equivalence import Plan, outputs, run_batched, run_stream
from tests.engine.test_engine_lm import vocab_size, write_arpa

# Found on the tiny TDT's babble of seed 1: beam search with this list (alpha 3) reads the term where greedy
# decoding with the same list does not (greedy reaches it only at alpha 8).
TERM = "rendas"
CHUNKS = (0.56, 1.12)


@pytest.fixture(params=["tdt", "rnnt"])
def kind_model(request: pytest.FixtureRequest) -> Path:
    name = "cache_aware_model" if request.param == "tdt" else "cache_aware_rnnt_model"
    path: Path = request.getfixturevalue(name)
    return path


@pytest.fixture
def beam_one_decoder(kind_model: Path) -> Iterator[StreamDecoder]:
    torch.set_num_threads(1)
    yield StreamDecoder(EngineConfig(model=str(kind_model), max_symbols_per_step=3, beam_size=1))


@pytest_asyncio.fixture
async def engine(cache_aware_model: Path) -> AsyncIterator[Engine]:
    config = EngineConfig(model=str(cache_aware_model), biasing_alpha=3.0, max_symbols_per_step=3)
    async with running(config) as started:
        yield started


def test_beam_one_equals_greedy_token_for_token(beam_one_decoder: StreamDecoder) -> None:
    """One greedy and one beam-1 stream of the same audio in the same steps: after every chunk the beam
    holds exactly the greedy hypothesis's labels, at the same frames."""
    decoder = beam_one_decoder
    assert decoder.cache_aware
    for chunk_s in CHUNKS:
        chunk_pipeline = decoder.chunk_pipeline(chunk_s, "greedy")
        size = chunk_pipeline.chunk_samples
        audio = noise(2, 5.6)
        for index in range(len(audio) // size):
            samples = audio[index * size : (index + 1) * size]
            first = index == 0
            decoder.step(
                [
                    StepItem(1, chunk_s, "greedy", samples, first, False),
                    StepItem(2, chunk_s, "beam", samples, first, False),
                ]
            )
            greedy = chunk_pipeline.pipeline.get_state(1).get_previous_hypothesis()
            beam = decoder._beam._states[2].histories[0]
            assert [t.label for t in beam] == greedy.y_sequence.tolist()
            assert [t.start_frame for t in beam] == list(greedy.timestamp)
        assert len(beam) >= 10
        decoder.step(
            [
                StepItem(1, chunk_s, "greedy", None, False, True),
                StepItem(2, chunk_s, "beam", None, False, True),
            ]
        )
    assert decoder.live_stream_count() == 0


def test_chunk_calls_equal_one_call(kind_model: Path) -> None:
    """A stream's cache-aware encoder frames, decoded chunk by chunk as the engine does (beams kept between
    calls), end with the beams (labels, frames, scores) of one beam call over all of them."""
    torch.set_num_threads(1)
    decoder = StreamDecoder(EngineConfig(model=str(kind_model), max_symbols_per_step=3))
    search = decoder._beam.search
    for chunk_s in CHUNKS:
        chunk_pipeline = decoder.chunk_pipeline(chunk_s, "beam")
        chunk_pipeline.activate()
        size = chunk_pipeline.chunk_samples
        audio = noise(4, 4.48)
        count = len(audio) // size
        with torch.inference_mode():
            parts = []
            for index in range(count):
                item = StepItem(
                    7, chunk_s, "beam", audio[index * size : (index + 1) * size], index == 0, False
                )
                encoded = chunk_pipeline.encode([make_frame(chunk_pipeline, item)])
                assert encoded.lengths.tolist() == [chunk_pipeline.frames_per_chunk]
                assert encoded.delay_frames == 0
                parts.append(encoded.encoder_output)
            flush = chunk_pipeline.encode(
                [make_frame(chunk_pipeline, StepItem(7, chunk_s, "beam", None, False, True))]
            )
            assert flush.lengths.tolist() == [0]
            frames = torch.cat(parts, dim=1)
            one = search.initial_state(frames.device)
            search.decode([one], frames, torch.tensor([frames.shape[1]]), [-1], [True])
            chunked = search.initial_state(frames.device)
            for index, part in enumerate(parts):
                search.decode([chunked], part, torch.tensor([part.shape[1]]), [-1], [index == count - 1])
        want, got = one.histories[search.best_beam(one)], chunked.histories[search.best_beam(chunked)]
        assert len(want) >= 5
        assert [(t.label, t.start_frame, t.end_frame) for t in got] == [
            (t.label, t.start_frame, t.end_frame) for t in want
        ]
        torch.testing.assert_close(chunked.scores, one.scores, atol=1e-3, rtol=0)
        assert chunked.decoded_frames == one.decoded_frames == frames.shape[1]
    assert decoder.live_stream_count() == 0


def test_a_stream_ends_with_the_beams_of_one_call(cache_aware_rnnt_model: Path, tmp_path: Path) -> None:
    """Through the decoder's steps: the end of a cache-aware stream brings no new encoder frames, yet RNNT
    beams that stopped behind the last chunk's end (the LM makes some) finish in its last call, so the final
    is the best beam of one call over all the stream's frames."""
    torch.set_num_threads(1)
    arpa = write_arpa(tmp_path / "lm.arpa", vocab_size(cache_aware_rnnt_model), favoured=3)
    config = EngineConfig(  # no pause ends an utterance: one final, at the end
        model=str(cache_aware_rnnt_model), max_symbols_per_step=3, lm_path=str(arpa), lm_alpha=0.8,
        stop_history_eou_ms=60_000, long_utterance_s=60.0, very_long_utterance_s=60.0, max_utterance_s=60.0,
    )  # fmt: skip
    decoder = StreamDecoder(config)
    search = decoder._beam.search
    chunk_pipeline = decoder.chunk_pipeline(0.56, "beam")
    size, audio = chunk_pipeline.chunk_samples, noise(4, 3.36)
    pieces = [audio[i : i + size] for i in range(0, len(audio), size)]
    finals: list[Final] = []
    for index, samples in enumerate(pieces):
        finals += decoder.step([StepItem(1, 0.56, "beam", samples, index == 0, False)])[0].finals
    assert not finals and search.has_pending(decoder._beam._states[1])  # some beams are behind
    finals += decoder.step([StepItem(1, 0.56, "beam", None, False, True)])[0].finals
    with torch.inference_mode():
        chunk_pipeline.activate()
        parts = [
            chunk_pipeline.encode([make_frame(chunk_pipeline, StepItem(2, 0.56, "beam", p, i == 0, False))])
            for i, p in enumerate(pieces)
        ]
        chunk_pipeline.encode([make_frame(chunk_pipeline, StepItem(2, 0.56, "beam", None, False, True))])
        frames = torch.cat([part.encoder_output for part in parts], dim=1)
        one = search.initial_state(frames.device)
        search.decode([one], frames, torch.tensor([frames.shape[1]]), [-1], [True])
    best = one.histories[search.best_beam(one)]
    assert [f.text for f in finals] == [decoder._beam._text([t.label for t in best])]
    assert decoder.live_stream_count() == 0


async def test_beam_reads_a_boosted_term_greedy_misses(engine: Engine) -> None:
    audio = noise(1, 3.36)
    handle = await engine.load_vocabulary([TERM])
    for chunk_s in CHUNKS:
        beam = " ".join(f.text for f in await finals_of(engine, audio, handle, chunk_s, "beam"))
        greedy = " ".join(f.text for f in await finals_of(engine, audio, handle, chunk_s, "greedy"))
        plain = " ".join(f.text for f in await finals_of(engine, audio, None, chunk_s, "beam"))
        assert TERM in beam.split(), (chunk_s, beam)
        assert TERM not in greedy and TERM not in plain, (chunk_s, greedy, plain)
    cost = dict(engine.stats().decoding_ms_per_audio_s)  # /metrics: decode-thread ms per audio second
    assert set(cost) == {"beam", "greedy"} and all(0 < ms < 1000 for ms in cost.values()), cost


async def test_a_term_stays_in_its_stream(engine: Engine) -> None:
    """Streams of the same audio batched together, one with the term's list, one with another list, one
    without: only the first reads the term, and the others decode exactly as they do alone."""
    handles = {
        "term": await engine.load_vocabulary([TERM]),
        "other": await engine.load_vocabulary(["zhum", "he re"]),
    }
    plans = [
        Plan(
            seed=1, seconds=3.36, chunk_s=chunk_s, vocabulary=vocabulary, join_after_steps=0, decoding="beam"
        )
        for chunk_s in CHUNKS
        for vocabulary in ("term", "other", None)
    ]
    batched = await run_batched(engine, plans, handles)
    assert engine.stats().max_batch_streams_seen >= 3
    for plan, results in zip(plans, batched, strict=True):
        text = " ".join(f.text for result in results for f in result.finals)
        assert (TERM in text) == (plan.vocabulary == "term"), (plan, text)
        if plan.vocabulary != "term":
            assert outputs(results) == outputs(await run_stream(engine, plan, handles)), plan


async def test_the_lm_steers_cache_aware_beams(cache_aware_model: Path, tmp_path: Path) -> None:
    """An n-gram LM configured for the model is fused into the cache-aware beam search as into the
    buffered one: beams read more of the label it favours ("ar"); greedy decoding ignores it."""
    arpa = write_arpa(tmp_path / "lm.arpa", vocab_size(cache_aware_model), favoured=3)
    audio = noise(3, 3.36)
    texts: dict[str | None, list[str]] = {}
    for lm_path in (None, str(arpa)):
        config = EngineConfig(
            model=str(cache_aware_model), max_symbols_per_step=3, lm_path=lm_path, lm_alpha=2.0
        )
        async with running(config) as started:
            assert started._loaded_decoder().tokenizer.ids_to_tokens([3]) == ["ar"]
            texts[lm_path] = [
                " ".join(f.text for f in await finals_of(started, audio, None, 0.56, decoding))
                for decoding in ("beam", "greedy")
            ]
    (plain_beam, plain_greedy), (lm_beam, lm_greedy) = texts[None], texts[str(arpa)]
    assert lm_beam.count("ar") > plain_beam.count("ar"), (plain_beam, lm_beam)
    assert lm_greedy == plain_greedy
