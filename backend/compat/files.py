"""Whole recordings decoded through the live engine: one engine stream per file, fed a chunk as soon as the
engine has taken the previous one (faster than real time: the batcher decodes it beside the live streams,
in the same steps), with the vocabulary's biasing graph (the same compile, cache and registration as a
meeting's) and the second pass for finals. Used by the OpenAI-compatible route, recordings and the CLI."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from backend.engine.contract import CaptionEngine, CaptionStream, VocabularyRef
from backend.engine.types import Final, StreamOptions
from backend.services import Services
from backend.sessions.ladder import Rung
from backend.sessions.vocabulary import TooManyTerms, validate_session_terms
from backend.text.vocab import EffectiveVocabulary, ItemError, VocabularyTerm

__all__ = ["FILE_CHUNK_S", "Segment", "TermsRejected", "check_terms", "decode_file", "transcribe_samples"]

FILE_CHUNK_S = 1.12
"""A file is decoded in the larger of the live chunk sizes: fewer steps per second of audio."""
Progress = Callable[[float, float], None]
"""Called after every chunk with (seconds decoded, seconds in the file)."""


@dataclass(frozen=True)
class Word:
    """One word, seconds from the start of the file."""

    text: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Segment:
    """One final of the file in the vocabulary's display forms: its text, times (seconds from the start of
    the file), words, the terms it matched and which pass wrote it."""

    text: str
    start_s: float
    end_s: float
    words: tuple[Word, ...]
    matched_terms: tuple[str, ...]
    source: str


class TermsRejected(ValueError):
    """Terms that cannot be boosted: every bad one with its index, text and reason, or too many of them."""

    def __init__(self, message: str, errors: list[ItemError]) -> None:
        super().__init__(message)
        self.errors = errors


async def check_terms(svc: Services, items: list[str]) -> list[VocabularyTerm]:
    """Client-given terms validated like a session's ``configure`` terms (same rules, same limit:
    ``max_terms_per_session``); ``TermsRejected`` names each bad one."""
    await svc.engine_started()  # the tokenizer that tells which terms can be represented
    try:
        valid, errors = validate_session_terms(
            items, svc.settings.max_terms_per_session, svc.term_limits, svc.tokenizer
        )
    except TooManyTerms as exc:
        raise TermsRejected(str(exc), []) from exc
    if errors:
        first = errors[0]
        raise TermsRejected(f"term {first.text!r} rejected: {first.reason}", errors)
    return valid


def file_options(svc: Services, decoding: str, handle: VocabularyRef | None) -> StreamOptions:
    """A file's stream: the large chunk where allowed, its decoding unless the ladder says greedy."""
    allowed = svc.settings.allowed_chunk_s
    chunk_s = FILE_CHUNK_S if FILE_CHUNK_S in allowed else max(allowed)
    if decoding == "beam" and svc.ladder.rung >= Rung.GREEDY_FOR_NEW:
        decoding = "greedy"
    return StreamOptions(
        chunk_s=chunk_s, decoding="beam" if decoding == "beam" else "greedy", vocabulary=handle
    )


async def transcribe_samples(
    svc: Services,
    samples: np.ndarray,
    vocabulary: EffectiveVocabulary,
    decoding: str | None = None,
    progress: Progress | None = None,
) -> list[Segment]:
    """Decode 16 kHz mono float32 ``samples`` on the service's engine, with ``vocabulary`` compiled and
    registered like a meeting's (released after); the finals in order, in display forms."""
    await svc.engine_started()
    handle = await svc.hub.compile(vocabulary)
    try:
        options = file_options(svc, decoding or svc.settings.default_decoding, handle)
        return await decode_file(svc.engine, options, samples, vocabulary, progress)
    finally:
        if handle is not None:
            handle.release()


async def decode_file(
    engine: CaptionEngine,
    options: StreamOptions,
    samples: np.ndarray,
    vocabulary: EffectiveVocabulary,
    progress: Progress | None = None,
) -> list[Segment]:
    """One stream of ``engine`` (started; ``options.vocabulary`` registered by the caller) fed ``samples``
    a chunk at a time; its finals in display forms. The stream is closed whatever happens."""
    stream = engine.open_stream(options)
    try:
        finals = await _feed(engine, stream, options.chunk_s, samples, progress)
    finally:
        stream.abort()  # a no-op once finished
    return [s for s in (_segment(f, vocabulary) for f in finals) if s is not None]


async def _feed(
    engine: CaptionEngine,
    stream: CaptionStream,
    chunk_s: float,
    samples: np.ndarray,
    progress: Progress | None,
) -> list[Final]:
    chunk = engine.chunk_samples(chunk_s)
    total_s = len(samples) / 16000
    padded = np.concatenate([samples, np.zeros(-len(samples) % chunk, np.float32)])
    pcm = (np.clip(padded, -1.0, 1.0) * 32767).astype("<i2")  # what the contract's streams take
    finals: list[Final] = []
    for start in range(0, len(pcm), chunk):
        result = await stream.push(pcm[start : start + chunk].tobytes())
        finals += result.finals
        if progress is not None:
            progress(min(total_s, (start + chunk) / 16000), total_s)
    finals += (await stream.finish()).finals
    return finals


def _segment(final: Final, vocabulary: EffectiveVocabulary) -> Segment | None:
    text, matched = vocabulary.apply(final.text.strip())
    if not text:
        return None
    words = tuple(Word(w.text, round(w.start_s, 3), round(w.end_s, 3)) for w in final.words)
    return Segment(text, round(final.start_s, 3), round(final.end_s, 3), words, tuple(matched), final.source)
