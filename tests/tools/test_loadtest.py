"""The load test tool (loadtest/): its figures against hand-computed cases, and short runs against a
real uvicorn with the fake engine, including an overload run that must degrade in RELIABILITY.md row 5's
order (partials dropped, then 503 handshakes, then 1013 busy) without losing a final."""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import struct
import wave
from pathlib import Path

import numpy as np
import pytest

from loadtest.audio import AudioLoop, Sentence, load_transcript, speech_ends, transcript_path
from loadtest.cli import add_arguments
from loadtest.client import ClientResult
from loadtest.report import (
    Criteria,
    Sample,
    capacity,
    degradation,
    finals_check,
    finals_overlapping,
    percentile,
    verdict,
    write_outputs,
)
from loadtest.runner import LoadTestConfig, run_loadtest
from loadtest.server import ServerProcess
from loadtest.vocabulary import generate_terms
from loadtest.wer import corpus_wer, normalize, step_wer, stream_texts
from tests.support.fake_engine import FakeEngine
from tests.support.server import ADMIN_PASSWORD, LiveServer, make_settings

CHUNK_S = 0.56
CHUNK_SAMPLES = 8960


def scripted_wav(path: Path, pattern: tuple[int, ...] = (5, 9, 0)) -> Path:
    """A WAV for the fake engine: a chunk per first sample in ``pattern`` (0: silence, ends the utterance),
    with its transcript (what the fake says: "word5 word9")."""
    frames = b"".join(struct.pack("<h", first) + b"\x01\x00" * (CHUNK_SAMPLES - 1) for first in pattern)
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(16000)
        wav.writeframes(frames)
    sentences, start = [], None
    for index, first in enumerate((*pattern, 0)):
        if first and start is None:
            start = index
        elif not first and start is not None:
            words = " ".join(f"word{f}" for f in pattern[start:index])
            sentences.append({"text": words, "start": start * CHUNK_SAMPLES, "end": index * CHUNK_SAMPLES})
            start = None
    transcript_path(path).write_text(json.dumps({"sentences": sentences}))
    return path


# ----- pure helpers, hand-computed -------------------------------------------------------------------------
def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([], 50) is None
    assert percentile([7.0], 99) == 7.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5  # rank 1.5 between 2 and 3
    assert percentile([10.0, 20.0, 30.0, 40.0, 50.0], 95) == pytest.approx(48.0)  # rank 3.8
    assert percentile(list(range(1, 101)), 99) == pytest.approx(99.01)  # rank 98.01


def _step(n: int, realtime: bool) -> dict:
    return {"n": n, "realtime": realtime}


def test_capacity_is_the_largest_n_with_every_smaller_step_real_time() -> None:
    assert capacity([_step(1, True), _step(8, True), _step(16, False), _step(32, True)]) == 8
    assert capacity([_step(16, True), _step(1, True), _step(8, True)]) == 16
    assert capacity([_step(1, False), _step(8, True)]) == 0
    assert capacity([]) == 0


def _row(**overrides: object) -> dict:
    row = {
        "n": 4, "chunk_s": 1.12, "connected": 4, "handshake_503": 0, "handshake_other": 0, "busy_1013": 0,
        "stream_max_lag_s": 0.5, "server_max_lag_s": 1.12, "final_ms_p95": 250.0, "finals_lost": 0,
        "finals_duplicated": 0, "finals_unpersisted": 0, "errors": {},
    }  # fmt: skip
    return row | overrides


def test_verdict_rules() -> None:
    criteria = Criteria(latency_budget_ms=300, max_lag_chunks=1.0)
    assert verdict(_row(), criteria) == (True, [])
    assert not verdict(_row(final_ms_p95=301.0), criteria)[0]
    assert not verdict(_row(server_max_lag_s=2.24), criteria)[0]  # a chunk queued behind the one decoding
    assert not verdict(_row(final_ms_p95=None), criteria)[0]
    assert not verdict(_row(handshake_503=1, connected=3), criteria)[0]
    assert not verdict(_row(busy_1013=1), criteria)[0]
    assert not verdict(_row(finals_lost=1), criteria)[0]


def test_finals_check_counts_lost_duplicated_and_unpersisted() -> None:
    persisted = [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("other", 1)]
    received = [("a", 1), ("a", 2), ("a", 2), ("b", 1), ("b", 9)]
    assert finals_check(received, persisted, {"a", "b"}) == {
        "finals_persisted": 4,
        "finals_received": 5,
        "finals_lost": 1,  # a/3
        "finals_duplicated": 1,  # a/2 twice
        "finals_unpersisted": 1,  # b/9
    }


def test_finals_overlapping_counts_audio_decoded_twice() -> None:
    def final(session: str, seq: int, start_s: float, end_s: float) -> dict[str, object]:
        return {"session_id": session, "seq": seq, "start_s": start_s, "end_s": end_s}

    persisted = [
        final("a", 2, 1.12, 2.24),
        final("a", 1, 0.0, 1.12),
        final("a", 3, 2.2, 3.0),  # within the 0.1 s tolerance
        final("a", 4, 2.5, 3.5),  # starts 0.5 s before seq 3 ended: decoded twice
        final("b", 1, 0.0, 5.0),
        final("b", 2, 1.0, 2.0),  # another session's clock
        final("c", 1, 0.0, 9.0),  # not a session of this step
        final("c", 2, 0.0, 9.0),
    ]
    assert finals_overlapping(persisted, {"a"}) == 1
    assert finals_overlapping(persisted, {"a", "b"}) == 2


def test_degradation_order() -> None:
    def sample(t: float, dropped: float) -> Sample:
        return Sample(t, {"captions_partials_dropped_total": dropped}, True, None, None)

    refused = ClientResult(0, 1, handshake_status=503, handshake_refused_at=103.0)
    busy = ClientResult(1, 1, busy_at=106.0)
    samples = [sample(0.0, 2.0), sample(1.0, 2.0), sample(2.0, 5.0)]
    ordered = degradation([refused, busy], samples, started_at=100.0)
    assert ordered["events_s"] | {"not_ready": None} == {
        "partials_dropped": 2.0, "handshake_503": 3.0, "busy_1013": 6.0, "not_ready": None,
    }  # fmt: skip
    assert ordered["in_order"]
    early_busy = ClientResult(1, 1, busy_at=101.0)
    assert not degradation([refused, early_busy], samples, started_at=100.0)["in_order"]


def test_the_ladder_rungs_are_reported_with_when_each_was_first_seen() -> None:
    def sample(t: float, rung: float) -> Sample:
        return Sample(t, {"captions_load_rung": rung}, True, None, None)

    ladder = degradation([], [sample(0.0, 0), sample(1.0, 2), sample(2.0, 3), sample(3.0, 1)], 0.0)["ladder"]
    assert ladder["rungs_s"] == {
        "second_pass_off": 1.0, "greedy_for_new": 1.0, "fewer_partials": 2.0, "refuse_new": None,
        "shed_newest": None,
    }  # fmt: skip
    assert ladder["max_rung"] == 3 and ladder["in_order"]


def test_sentence_ends_are_where_speech_pauses_and_follow_the_loop() -> None:
    def tone(seconds: float) -> np.ndarray:
        t = np.arange(round(seconds * 16000)) / 16000
        return (8000 * np.sin(2 * np.pi * 220 * t)).astype(np.int16)

    def silence(seconds: float) -> np.ndarray:
        return np.zeros(round(seconds * 16000), dtype=np.int16)

    # speech 0-1 s, 1.8-2.3 s, 2.5-3 s (a 0.2 s gap is not a sentence end), then silence to 4 s
    wav = np.concatenate([tone(1.0), silence(0.8), tone(0.5), silence(0.2), tone(0.5), silence(1.0)])
    assert speech_ends(wav) == [16000, 48000]
    loop = AudioLoop(wav, 8960)
    assert loop.sentence_ends_s(16000, -1.0, 10.0) == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]  # from 1 s into the WAV
    assert loop.sentence_ends_s(0, 2.0, 9.0) == [3.0, 5.0, 7.0, 9.0]  # (2, 9]: 1 s and every 2 s


def test_the_sentences_a_looped_stream_says_whole() -> None:
    sentences = (Sentence("one two", 0, 16000), Sentence("three", 24000, 32000))
    loop = AudioLoop(np.zeros(40000, dtype=np.int16), 8000, sentences)
    # from sample 8000 on: "one two" is cut (it comes whole at 32000 - 8000 = 2 s), "three" is at 1-1.5 s
    assert loop.sentences_within(8000, 3.9) == [(1.0, 1.5, "three"), (2.0, 3.0, "one two")]
    assert loop.sentences_within(8000, 4.0)[-1] == (3.5, 4.0, "three")  # the loop's next pass
    assert loop.sentences_within(8000, 2.9) == [(1.0, 1.5, "three")]
    looped = [(0.0, 1.0, "one two"), (1.5, 2.0, "three"), (2.5, 3.5, "one two"), (4.0, 4.5, "three")]
    assert loop.sentences_within(0, 5.0) == looped


def test_a_stream_is_scored_on_its_whole_sentences_finals_and_partials_shown() -> None:
    reference = [(1.0, 2.0, "The cat sat."), (3.0, 4.0, "It rained.")]
    captions = [
        (0.0, 0.6, "at.", "at"),  # the sentence cut by the stream's start: left out
        (1.0, 2.1, "The cat sat.", "the cap"),
        (3.0, 4.1, "It rained.", ""),  # nothing was shown before this final
        (5.0, 5.2, "And", "and"),  # cut by the stop: left out
    ]
    said = "The cat sat. It rained."
    assert stream_texts(captions, reference) == (said, said, "the cap")
    assert stream_texts(captions, []) == ("", "", "")
    whole = ClientResult(0, 1, captions=captions, reference=reference, measured_whole=True)
    dropped = ClientResult(1, 1, captions=[], reference=reference, measured_whole=False)
    figures = step_wer([whole, dropped])
    # 5 reference words; partials "the cap": "cap" for "cat", "sat", "it", "rained" deleted = 4 errors
    assert figures == {"wer": 0.0, "wer_partial": 80.0, "wer_streams": 1, "wer_words": 5}
    no_transcript = ClientResult(2, 1, captions=captions, reference=[], measured_whole=True)
    assert step_wer([no_transcript])["wer"] is None


def test_load_test_wer_is_scored_as_eval_run_scores() -> None:
    from eval.metrics import normalize as eval_normalize
    from eval.metrics import word_error_rate

    rng = random.Random(0)
    vocab = ["The", "cat's", "sat,", "on", "mat.", "--", "well-known", "Dr.", "¿qué?", "it", "'quoted'"]
    for _ in range(200):
        refs = [" ".join(rng.choices(vocab, k=rng.randint(1, 8))) for _ in range(3)]
        hyps = [" ".join(rng.choices(vocab, k=rng.randint(0, 8))) for _ in range(3)]
        assert [normalize(t) for t in refs] == [eval_normalize(t) for t in refs]
        if all(normalize(r) for r in refs):
            assert corpus_wer(refs, hyps) == pytest.approx(word_error_rate(refs, hyps))


def test_the_synthesised_speech_brings_its_transcript(tmp_path: Path) -> None:
    from loadtest.audio import SENTENCES, load_pcm16, synthesize

    assert load_transcript(tmp_path / "none.wav") == ()
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed")
    path = synthesize(tmp_path)
    sentences = load_transcript(path)
    assert tuple(s.text for s in sentences) == SENTENCES
    samples = load_pcm16(path)
    assert sentences[-1].end < len(samples)
    assert all(a.end < b.start for a, b in zip(sentences, sentences[1:], strict=False))
    assert all(np.abs(samples[s.start : s.end]).max() > 1000 for s in sentences)


def test_generated_terms_are_unique_and_plain() -> None:
    terms = generate_terms(1000, seed=4)
    texts = [t["text"] for t in terms]
    assert len(set(texts)) == 1000
    assert all(set(text) <= set("abcdefghijklmnopqrstuvwxyz ") and "  " not in text for text in texts)
    assert generate_terms(5, seed=4) == terms[:5]


# ----- runs against a real uvicorn with the fake engine ----------------------------------------------------
@pytest.mark.slow
def test_small_run_loses_nothing_and_measures_latency(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    config_kwargs = dict(
        admin_password=ADMIN_PASSWORD, steps=(3,), step_seconds=3.5, ramp_seconds=0.5, chunk_s=CHUNK_S,
        terms=20, reconnect_fraction=0.34, reconnect_delay_s=0.3, wav=scripted_wav(tmp_path / "s.wav"),
        sample_interval_s=0.25, label="fake", progress=False,
        criteria=Criteria(latency_budget_ms=2000, max_lag_chunks=2),  # loaded CI hosts; the fake is instant
    )  # fmt: skip
    with LiveServer(settings, FakeEngine()) as server:
        report = asyncio.run(run_loadtest(LoadTestConfig(base_url=server.base_url, **config_kwargs)))
    (step,) = report["steps"]
    assert step["connected"] == 3 and step["reconnected"] == 1, step
    assert step["finals_persisted"] > 0 and step["finals_received"] >= step["finals_persisted"]
    assert (step["finals_lost"], step["finals_duplicated"], step["finals_unpersisted"]) == (0, 0, 0)
    assert step["finals_overlapping"] == 0 and step["not_captioned_s"] == 0  # the resume sent its audio again
    assert step["partial_ms_p50"] is not None and step["final_ms_p95"] is not None and step["final_ms_n"] > 0
    assert step["close_codes"] == {"1000": 3} and step["errors"] == {}
    assert step["batch_max"] == 1 and step["partials_dropped"] == 0
    # the two clients that were not dropped are scored on their whole sentences; the fake's partials grow
    # into its finals, so the screen showed the same words
    assert (step["wer"], step["wer_partial"], step["wer_streams"]) == (0.0, 0.0, 2), step
    assert step["realtime"], step["not_realtime_because"]
    assert report["capacity"] == 3
    paths = write_outputs(report, tmp_path / "out")
    assert all(path.stat().st_size > 0 for path in paths.values())
    assert paths["csv"].read_text().splitlines()[1].startswith("fake,3,3,0,0,1,")


@pytest.mark.slow
def test_overload_degrades_in_order_without_losing_finals(tmp_path: Path) -> None:
    """The engine 2x slower than real time: lag grows 0.5 s per second in every stream. The degradation
    ladder climbs a rung per half second of backlog readings, in its order, and sheds only the newest."""
    settings = make_settings(
        tmp_path, lag_drop_partials_s=0.5, lag_not_ready_s=1.5, lag_busy_s=3.0, max_sessions_per_user=8,
        ladder_window_s=0.5,
    )  # fmt: skip
    config_kwargs = dict(
        admin_password=ADMIN_PASSWORD, steps=(8,), step_seconds=10.0, ramp_seconds=5.25, chunk_s=CHUNK_S,
        terms=0, clients_per_user=8, wav=scripted_wav(tmp_path / "s.wav"), sample_interval_s=0.25,
        progress=False,
    )  # fmt: skip
    with LiveServer(settings, FakeEngine(step_delay_s=2 * CHUNK_S)) as server:
        report = asyncio.run(run_loadtest(LoadTestConfig(base_url=server.base_url, **config_kwargs)))
    (step,) = report["steps"]
    events = step["degradation"]["events_s"]
    assert None not in (events["partials_dropped"], events["handshake_503"], events["busy_1013"]), step
    assert step["degradation"]["order"] == ["partials_dropped", "handshake_503", "busy_1013"], events
    assert step["partials_dropped"] > 0 and step["handshake_503"] > 0 and step["busy_1013"] > 0
    ladder = step["degradation"]["ladder"]
    assert ladder["in_order"] and ladder["max_rung"] == 5, ladder
    assert step["busy_1013"] < step["connected"]  # the newest were shed, one every 5 s; the others kept
    assert (step["finals_lost"], step["finals_duplicated"], step["finals_unpersisted"]) == (0, 0, 0)
    assert not step["realtime"] and report["capacity"] == 0


# ----- fault mode: the real service, the bundled model, kill -9 ---------------------------------------------
@pytest.mark.slow
def test_fault_mode_kill_9_mid_run_loses_and_doubles_nothing(tmp_path: Path) -> None:
    """``captions loadtest --start-server --kill-at-s``: `captions serve` with the bundled model is killed
    with SIGKILL mid-step and started again; every client resumes as the page does and sends its audio again
    from ``resume_from_s``: no final lost, received twice, or decoded twice (overlapping times)."""

    with ServerProcess() as server:
        config = LoadTestConfig(
            base_url=server.base_url, admin_password=server.admin_password, steps=(2,), step_seconds=24.0,
            ramp_seconds=1.0, chunk_s=1.12, decoding="greedy", terms=20, kill_at_s=10.0, fault_grace_s=300.0,
            wav=None, server_pid=server.pid, progress=False, label="fault",
        )  # fmt: skip
        report = asyncio.run(run_loadtest(config, server.kill_and_restart))
    (step,) = report["steps"]
    assert step["killed_at_s"] == pytest.approx(10.0, abs=1.0) and step["down_s"] > 0
    assert step["outages"] >= 2, step  # both connections died with the server
    assert step["close_codes"].get("1000") == 2, step  # ... and both resumed and finished with `stop`
    assert step["finals_persisted"] > 0 and step["finals_received"] == step["finals_persisted"]
    assert (step["finals_lost"], step["finals_duplicated"], step["finals_unpersisted"]) == (0, 0, 0)
    assert step["finals_overlapping"] == 0
    assert step["errors"] == {}, step


def test_start_server_can_run_another_checkout(tmp_path: Path) -> None:
    """``--server-checkout``: `captions serve` runs from the given source tree (an older commit's worktree),
    so two versions are measured by the same client. A stand-in tree records what ran, then exits."""
    package = tmp_path / "older" / "backend"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "cli.py").write_text(
        "import pathlib, sys\n"
        "pathlib.Path(__file__).with_name(sys.argv[1] + '.ran').write_text(sys.argv[1])\n"
        "sys.exit(0 if sys.argv[1] == 'migrate' else 3)\n"
    )
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--start-server", "--server-checkout", str(tmp_path / "older")])
    server = ServerProcess(checkout=args.server_checkout, start_timeout_s=30)
    with pytest.raises(RuntimeError, match="exited with 3"):
        server.start()
    assert (package / "migrate.ran").exists() and (package / "serve.ran").exists()
