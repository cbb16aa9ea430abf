"""Decode an evaluation set with the streaming engine, as the server does, for a sweep of configurations.

Every utterance is one engine stream: its audio is pushed in exact chunks (the last one zero-padded, as a
client pads it), all utterances run concurrently so the engine batches them, and each stream carries its own
vocabulary handle (local: one per utterance; global: one per call/patient, shared by reference; full: one for
all). Vocabularies are registered before the streams start (the paper's "decoder cache" level), so RTFx is
decoding speed only; compile + registration time is reported apart.

Graph mode, tau and alpha are engine settings (``EngineConfig.biasing_graph_mode``/``biasing_tau``/
``biasing_alpha``), so configurations that differ in them run on separate engines, started in turn.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import soundfile as sf

from backend.engine import Engine, EngineConfig, StepResult, StreamOptions, VocabularyHandle
from biasing.graph import GraphMode, GraphParams
from biasing.terms import Term
from eval.dataset import EvalItem, EvalSet

BIASING_MODES = ("none", "local", "global", "full")
CASINGS = {  # list casing -> (list strings, graph mode)
    "lower": ("typed", GraphMode.CASE_SENSITIVE_TREE),
    "cased": ("display", GraphMode.CASE_SENSITIVE_TREE),
    "insensitive": ("typed", GraphMode.CASE_INSENSITIVE),
}
SAMPLE_RATE_HZ = 16000


@dataclass(frozen=True)
class RunConfig:
    """One point of the sweep. ``casing``/``alpha`` are None without biasing; ``tau`` is None unless the
    graph is the case-insensitive one (the tree ignores it); ``weight`` is every term's weight (None: the
    default weight, as a list typed without weights)."""

    biasing: str
    casing: str | None
    decoding: str
    chunk_s: float
    tau: float | None
    alpha: float | None
    weight: float | None = None

    @property
    def name(self) -> str:
        parts = [self.biasing]
        if self.casing is not None:
            parts.append(self.casing)
        parts += [self.decoding, f"{self.chunk_s:g}s"]
        if self.tau is not None:
            parts.append(f"tau={self.tau:g}")
        if self.alpha is not None:
            parts.append(f"alpha={self.alpha:g}")
        if self.weight is not None:
            parts.append(f"weight={self.weight:g}")
        return "/".join(parts)

    def graph_params(self) -> GraphParams:
        mode = CASINGS[self.casing][1] if self.casing is not None else GraphMode.CASE_SENSITIVE_TREE
        return GraphParams(mode=mode, tau=self.tau if self.tau is not None else GraphParams().tau)

    def engine_key(self) -> tuple[Any, ...]:
        """Configurations with the same key share one engine (same graph parameters and alpha)."""
        if self.biasing == "none":
            return ()
        params = self.graph_params()
        return (params.mode.value, params.tau, self.alpha)


def expand_configs(
    biasing: Sequence[str],
    casings: Sequence[str],
    decodings: Sequence[str],
    chunks_s: Sequence[float],
    taus: Sequence[float],
    alphas: Sequence[float],
    weights: Sequence[float | None] = (None,),
    modes: Iterable[str] = BIASING_MODES,
) -> list[RunConfig]:
    """The distinct configurations of a sweep (no duplicates for parameters that do not apply); ``modes``:
    the biasing modes the set has lists for ("none" is always allowed)."""
    allowed = ("none", *sorted(set(modes) - {"none"}))
    for mode in biasing:
        if mode not in allowed:
            raise ValueError(f"biasing must be among {allowed}, got {mode!r}")
    for casing in casings:
        if casing not in CASINGS:
            raise ValueError(f"casing must be among {tuple(CASINGS)}, got {casing!r}")
    configs: list[RunConfig] = []
    for chunk_s in chunks_s:
        for decoding in decodings:
            for mode in biasing:
                if mode == "none":
                    configs.append(RunConfig(mode, None, decoding, chunk_s, None, None))
                    continue
                for casing in casings:
                    tree = CASINGS[casing][1] is GraphMode.CASE_SENSITIVE_TREE
                    for tau in [None] if tree else taus:
                        for alpha in alphas:
                            for weight in weights:
                                configs.append(RunConfig(mode, casing, decoding, chunk_s, tau, alpha, weight))
    return list(dict.fromkeys(configs))


@dataclass(frozen=True)
class RunOutput:
    """Hypotheses (in item order) and timings of one configuration; ``skipped`` says why it did not run."""

    config: RunConfig
    hyps: tuple[str, ...] = ()
    decode_wall_s: float = 0.0
    vocab_wall_s: float = 0.0
    audio_s: float = 0.0
    skipped: str | None = None
    final_pass_outcomes: tuple[tuple[str, int], ...] = ()  # the second pass's decisions in this run
    shown: tuple[str, ...] = ()  # per item: the partial on screen just before each final (StreamTexts.shown)

    @property
    def rtfx(self) -> float:
        return self.audio_s / self.decode_wall_s if self.decode_wall_s > 0 else math.nan


def load_audio(items: Iterable[EvalItem]) -> dict[str, np.ndarray]:
    """Every item's audio as 16 kHz mono float32 (ValueError for another rate)."""
    audio = {}
    for item in items:
        samples, rate = sf.read(str(item.audio_path), dtype="float32", always_2d=True)
        if rate != SAMPLE_RATE_HZ:
            raise ValueError(f"{item.audio_path}: {rate} Hz, expected {SAMPLE_RATE_HZ}")
        audio[item.utt_id] = samples.mean(axis=1)
    return audio


@dataclass(frozen=True)
class StreamTexts:
    """What one stream gave: ``finals``, its finals' texts joined by spaces; ``shown``, for each final in the
    same order, the partial the screen showed just before it (``ShownPartials``), joined the same way."""

    finals: str
    shown: str


class ShownPartials:
    """Follows a stream's step results and keeps, per final, the partial on screen when it came: the text of
    the latest non-empty partial seen before the step that produced the final ("" if none came since the
    previous final, e.g. the second of two finals of one step). A step's partial belongs to the utterance
    after its finals, so it is read after them."""

    def __init__(self) -> None:
        self.finals: list[str] = []
        self.shown: list[str] = []
        self._latest = ""

    def add(self, result: StepResult) -> None:
        """Record one step's finals and then its partial."""
        for final in result.finals:
            self.finals.append(final.text)
            self.shown.append(self._latest)
            self._latest = ""
        if result.partial.strip():
            self._latest = result.partial

    def texts(self) -> StreamTexts:
        """The finals and the partials shown before them, each joined by spaces (empty ones skipped)."""
        return StreamTexts(" ".join(self.finals), " ".join(t for t in self.shown if t.strip()))


async def decode_stream_texts(
    engine: Engine,
    samples: np.ndarray,
    options: StreamOptions,
    progress: Callable[[float], None] | None = None,
    realtime: bool = False,
) -> StreamTexts:
    """One engine stream over ``samples`` (16 kHz), pushed in exact chunks (the last zero-padded) as the
    server does; its finals and the partials shown before them. ``progress`` gets the audio seconds of each
    chunk pushed. ``realtime``: each chunk is pushed no sooner than a microphone would have recorded it (as
    fast as the engine answers otherwise)."""
    stream = engine.open_stream(options)
    size = stream.chunk_samples
    tracker = ShownPartials()
    loop = asyncio.get_running_loop()
    began = loop.time()
    try:
        for start in range(0, len(samples), size):
            if realtime:
                await asyncio.sleep(max(0.0, began + (start + size) / SAMPLE_RATE_HZ - loop.time()))
            chunk = samples[start : start + size]
            if len(chunk) < size:
                chunk = np.concatenate([chunk, np.zeros(size - len(chunk), dtype=np.float32)])
            tracker.add(await stream.push(chunk))
            if progress is not None:
                progress(min(size, len(samples) - start) / SAMPLE_RATE_HZ)
        tracker.add(await stream.finish())
    finally:
        stream.abort()  # no-op after finish; frees the stream if a push failed
    return tracker.texts()


async def decode_stream(
    engine: Engine,
    samples: np.ndarray,
    options: StreamOptions,
    progress: Callable[[float], None] | None = None,
) -> str:
    """``decode_stream_texts``' finals only: the stream's finals joined by spaces."""
    return (await decode_stream_texts(engine, samples, options, progress)).finals


def _list_id(item: EvalItem, biasing: str) -> str | None:
    return None if biasing == "none" else item.lists.get(biasing)


async def _load_lists(engine: Engine, eval_set: EvalSet, config: RunConfig) -> dict[str, VocabularyHandle]:
    casing = CASINGS[config.casing][0] if config.casing is not None else "typed"
    handles: dict[str, VocabularyHandle] = {}
    for item in eval_set.items:
        list_id = _list_id(item, config.biasing)
        if list_id is not None and list_id not in handles:
            texts = eval_set.list_texts(list_id, casing)
            terms = texts if config.weight is None else [Term(text, config.weight) for text in texts]
            handles[list_id] = await engine.load_vocabulary(terms)
    return handles


def decoding_supported(engine: Engine, config: RunConfig) -> str | None:
    """None if the engine serves this decoding and chunk, else the engine's reason."""
    try:
        engine.open_stream(StreamOptions(chunk_s=config.chunk_s, decoding=config.decoding)).abort()
    except ValueError as exc:
        return str(exc)
    return None


async def run_config(
    engine: Engine,
    eval_set: EvalSet,
    audio: dict[str, np.ndarray],
    config: RunConfig,
    progress: Callable[[float], None],
    live: int = 0,
) -> RunOutput:
    """Decode every item of ``eval_set`` concurrently under ``config``: all at once as fast as the engine
    answers, or with ``live`` > 0, ``live`` streams at a time, each at the pace of speech (as live sessions
    stream; what the screen shows between finals depends on it)."""
    reason = decoding_supported(engine, config)
    if reason is not None:
        return RunOutput(config, skipped=reason)
    started = time.monotonic()
    handles = await _load_lists(engine, eval_set, config)
    vocab_wall_s = time.monotonic() - started
    limit = asyncio.Semaphore(live or engine.config.max_live_streams)

    async def one(item: EvalItem) -> StreamTexts:
        list_id = _list_id(item, config.biasing)
        options = StreamOptions(config.chunk_s, config.decoding, handles.get(list_id) if list_id else None)
        async with limit:
            return await decode_stream_texts(engine, audio[item.utt_id], options, progress, live > 0)

    before = dict(engine.stats().final_pass_outcomes)
    started = time.monotonic()
    try:
        texts = await asyncio.gather(*(one(item) for item in eval_set.items))
    finally:
        for handle in handles.values():
            handle.release()
    decode_wall_s = time.monotonic() - started
    audio_s = sum(len(audio[item.utt_id]) for item in eval_set.items) / SAMPLE_RATE_HZ
    after = engine.stats().final_pass_outcomes
    outcomes = tuple((name, n - before.get(name, 0)) for name, n in after if n > before.get(name, 0))
    hyps = tuple(t.finals for t in texts)
    shown = tuple(t.shown for t in texts)
    return RunOutput(config, hyps, decode_wall_s, vocab_wall_s, audio_s, None, outcomes, shown)


def group_by_engine(configs: Sequence[RunConfig]) -> list[tuple[RunConfig, list[RunConfig]]]:
    """Configurations grouped by engine key, in first-seen order; no-biasing runs join the first group.

    Returns (a representative configuration, its configurations) pairs.
    """
    groups: dict[tuple[Any, ...], list[RunConfig]] = {}
    for config in configs:
        groups.setdefault(config.engine_key(), []).append(config)
    if () in groups and len(groups) > 1:
        plain = groups.pop(())
        first = next(iter(groups))
        groups[first] = plain + groups[first]
    return [
        (
            next(c for c in group if c.biasing != "none")
            if any(c.biasing != "none" for c in group)
            else group[0],
            group,
        )
        for group in groups.values()
    ]


async def run_sweep(
    base: EngineConfig,
    eval_set: EvalSet,
    configs: Sequence[RunConfig],
    progress: Callable[[float], None],
    on_group: Callable[[str], None] = lambda _: None,
    live: int = 0,
) -> list[RunOutput]:
    """Run ``configs`` (one engine per graph mode/tau/alpha, started and stopped in turn), in input order;
    ``live``: see ``run_config``."""
    audio = load_audio(eval_set.items)
    outputs: dict[RunConfig, RunOutput] = {}
    for representative, group in group_by_engine(configs):
        alpha = representative.alpha if representative.alpha is not None else base.biasing_alpha
        chunks = tuple(sorted(set(base.allowed_chunk_s) | {c.chunk_s for c in group}))
        params = representative.graph_params()
        engine = Engine(
            replace(
                base,
                biasing_alpha=alpha,
                allowed_chunk_s=chunks,
                biasing_graph_mode=params.mode.value,
                biasing_tau=params.tau,
            )
        )
        on_group(f"engine: {representative.name}")
        await engine.start()
        try:
            for config in group:
                on_group(config.name)
                outputs[config] = await run_config(engine, eval_set, audio, config, progress, live)
        finally:
            await engine.stop()
    return [outputs[config] for config in configs]
