"""The second pass for finals: Whisper's own pretrained decoder re-reads each finished utterance (issue 24).

The streaming Transducer (first pass) gives partials and decides where an utterance ends. When a step
commits finals, this module takes each final's audio (kept per stream on the decode thread), encodes each
with Whisper's encoder (the utterance followed by ``pad_s`` seconds of silence: an unpadded window with no
trailing silence makes Whisper loop), and decodes all of the step's utterances in one batched beam search
with Whisper's decoder, each boosted by its own stream's vocabulary (the same case-insensitive TurboBias
graph, compiled for Whisper's byte-level BPE tokens; ``biasing.scorer``).

Guards (each a measured rule; ``FinalPassConfig``): the second pass's text replaces the first pass's only when
- the utterance fits Whisper's 30 s window (with the padding) and its audio is at least ``min_window_s`` long
  (the streaming pass sometimes commits one word at a stream's start on a 0.5 s window: Whisper may drop such
  a final as no speech, mostly rightly (stray "To", "Moex"; on the keyword set at 0.56 s keeping them all cost
  2-3 WER points), but never rewrites it);
- Whisper is not unsure (average log-probability per token >= ``min_avg_logprob``);
- it did not run into the token limit the audio allows, and does not repeat itself (a word n-gram repeated
  back to back, or text that compresses too well);
- where it disagrees with the first pass (their word error rate, lower-cased, > ``max_disagreement``), the
  evidence favours it (``arbitration``, by default ``scored``: Whisper scores both texts on the audio,
  teacher-forced, and prefers its own by ``score_margin`` nats per token; ``agreement`` keeps the first pass's
  text); where it has nothing for a run of ``max_skipped_words`` of the first pass's words, ``scored`` keeps
  it only where Whisper finds those words ``skip_margin`` nats per token less likely than its own reading;
- no vocabulary term the first pass found is lost (where the second pass lost one, the first pass's words
  around it are put back: ``splice_terms``).
Otherwise the first pass's final stands (``source="first"``). Then every vocabulary term in the text to
commit, from either pass, must be confirmed by the audio (``backend.engine.term_check``): Whisper also decodes
the utterance without the vocabulary, and a term whose text Whisper scores more than ``max_term_deficit``
below the unboosted words at its place is replaced by those words. When Whisper says there was no speech
(no-speech probability >= ``no_speech_prob`` and average log-probability < ``no_speech_logprob``, Whisper's
own rule, or no-speech probability >= ``no_speech_prob`` and the two passes disagree), the final is dropped:
silence gives no final, not even the streaming pass's stray word in a pause ("The", "To a").

The text is written in the first pass's style (``captions_model.spoken_form``: cased, ``, . ? ! ' -``,
numbers as words). Word times come from the first pass: the two texts are aligned word by word; a word the
second pass added takes a share of its neighbours' span.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from backend.engine.final_guards import (
    ACCEPTED,
    SETTLED,
    UNCHECKED,
    FinalPassConfig,
    FinalVocabulary,
    Readings,
    Refinement,
    capitalized,
    covered,
    judge,
    max_tokens_for,
    needs_readings,
    rewrites,
    spoken_text,
    with_text,
)
from backend.engine.steps import StepItem, StepOutput
from backend.engine.term_check import apply_checks, candidates
from backend.engine.types import SAMPLE_RATE_HZ, Final

__all__ = ["FinalPass", "FinalPassConfig", "FinalVocabulary", "Refinement", "RefineJob"]

KEEP_BEFORE_S = 0.5  # audio kept before the first pass's first word
KEEP_AFTER_S = 0.5  # and after its last
CUT_AFTER_S = 0.25  # the next utterance's audio starts no earlier (a sentence may end on a ~0.5 s pause)
MAX_WINDOW_S = 30.0  # Whisper's window


@dataclass
class _StreamAudio:
    """A stream's recent audio as the decoder saw it, kept as the chunks it came in (appending copies
    nothing: this runs for every chunk of every stream); ``start``/``end``: the stream samples the kept
    chunks span."""

    chunks: deque[np.ndarray] = field(default_factory=deque)
    start: int = 0
    end: int = 0
    cut: int = 0  # where the last refined utterance's audio ended: nothing before it is read again
    utterance: int = 0  # counts the finals cut: a partial's re-read belongs to the utterance it was taken in
    read_at: int = 0  # stream sample up to which the open utterance was last re-read (live refinement)
    read_text: str = ""  # the second pass's reading of the open utterance so far ("" none yet)
    read_words: int = 0  # words of the first pass's partial when it was re-read: later words are its tail

    def append(self, chunk: np.ndarray, keep: int) -> None:
        """Add a chunk; drop whole chunks older than ``keep`` samples or wholly before ``cut``."""
        self.chunks.append(chunk)
        self.end += len(chunk)
        floor = max(self.cut, self.end - keep)
        while self.chunks and self.start + len(self.chunks[0]) <= floor:
            self.start += len(self.chunks.popleft())

    def window(self, first: int, last: int) -> np.ndarray:
        """Stream samples ``first..last`` (clipped to what is kept) as one array."""
        first, last = max(first, self.start), min(last, self.end)
        pieces, position = [], self.start
        for chunk in self.chunks:
            if position >= last:
                break
            if position + len(chunk) > first:
                pieces.append(chunk[max(first - position, 0) : last - position])
            position += len(chunk)
        return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)


@dataclass(frozen=True)
class RefineJob:
    """A step's first-pass outputs and the audio of its finals, cut on the decode thread (``FinalPass.take``):
    ``jobs`` are (output index, final index, final, audio); ``settled`` the finals decided without Whisper."""

    outputs: tuple[StepOutput, ...]
    vocabularies: tuple[FinalVocabulary | None, ...]
    jobs: tuple[tuple[int, int, Final, np.ndarray], ...]
    settled: dict[tuple[int, int], Refinement]
    partials: tuple[tuple[int, int, Final, np.ndarray, int], ...] = ()  # (output index, stream id, the open
    # utterance as a final, its audio, utterance number): re-read live (``FinalPassConfig.refine_partials_s``)

    @property
    def pending(self) -> bool:
        """Whether any final or open utterance waits for the second pass."""
        return bool(self.jobs or self.settled or self.partials)

    def waits(self, index: int) -> bool:
        """Whether output ``index`` waits for the second pass (its finals, or its partial re-read)."""
        return bool(self.outputs[index].finals) or any(p[0] == index for p in self.partials)


class FinalPass:
    """Per-stream audio (decode thread: ``observe``, ``take``, ``forget``) and the batched second pass
    (``apply``: the engine runs it on its own thread, so both cores work: issue 37)."""

    def __init__(self, config: FinalPassConfig) -> None:
        from captions_model.whisper_final import FinalPassModel
        from captions_model.whisper_tokens import WhisperTokenizerAdapter

        self.config = config
        self.model = FinalPassModel.load(config.model, int8_decoder=config.int8_decoder)
        self.adapter = WhisperTokenizerAdapter(
            self.model.tokenizer, self.model.text_token_limit, vocab_size=self.model.vocab_size
        )
        self._audio: dict[int, _StreamAudio] = {}
        self._keep = int(MAX_WINDOW_S * SAMPLE_RATE_HZ)
        self.last_ms = 0.0
        self.outcomes: dict[str, int] = {}  # read by the event loop for /metrics (ints: no torn reads)

    def observe(self, item: StepItem) -> None:
        """Keep the chunk a step is about to decode (the time base of the first pass's finals)."""
        if item.samples is None:
            return
        audio = self._audio.setdefault(item.stream_id, _StreamAudio())
        audio.append(item.samples, self._keep)

    def warm_up(self) -> None:
        """One short utterance through the encoder and the decoder, so the first real final is not slow."""
        tone = 0.1 * np.sin(np.arange(SAMPLE_RATE_HZ) * 2 * np.pi * 220 / SAMPLE_RATE_HZ).astype(np.float32)
        self.refine_many([(Final("A tone.", 0.0, 1.0), tone, None)])
        self.outcomes.clear()

    def _count(self, outcome: str, n: int = 1) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + n

    def forget(self, stream_id: int) -> None:
        self._audio.pop(stream_id, None)

    def stream_count(self) -> int:
        return len(self._audio)

    def take(self, items: list[StepItem], outputs: list[StepOutput], reread: bool = True) -> RefineJob:
        """Decode thread, right after the first pass: cut each final's audio out of its stream's kept audio
        (copies) and forget the streams whose last chunk this was. What it returns is all ``apply`` reads, so
        ``apply`` may run on another thread while the decode thread goes on with the next step."""
        jobs: list[tuple[int, int, Final, np.ndarray]] = []
        settled: dict[tuple[int, int], Refinement] = {}
        partials: list[tuple[int, int, Final, np.ndarray, int]] = []
        shown = list(outputs)
        for index, (item, output) in enumerate(zip(items, outputs, strict=True)):
            audio = self._audio.get(item.stream_id)
            if audio is None:
                continue
            if output.finals:
                audio.utterance += 1
                audio.read_at, audio.read_text, audio.read_words = 0, "", 0
            elif output.partial and not item.is_last:
                again = self._reread(audio, output.partial) if reread else None
                if again is not None:
                    partials.append((index, item.stream_id, *again, audio.utterance))
                elif audio.read_text:  # the last re-read, and the first pass's words since as its tail
                    shown[index] = replace(output, partial=self._with_tail(audio, output.partial))
            for final_index, final in enumerate(output.finals):
                first = max(audio.cut, int((final.start_s - KEEP_BEFORE_S) * SAMPLE_RATE_HZ))
                last = audio.end if item.is_last else int((final.end_s + KEEP_AFTER_S) * SAMPLE_RATE_HZ)
                last = max(last, first)
                if audio.start > int(final.start_s * SAMPLE_RATE_HZ):  # its beginning is no longer kept:
                    settled[(index, final_index)] = Refinement(final, "too_long")  # Whisper would miss it
                else:
                    jobs.append((index, final_index, final, audio.window(first, last)))
                cut = int((final.end_s + CUT_AFTER_S) * SAMPLE_RATE_HZ)
                audio.cut = min(max(audio.cut, cut if not item.is_last else last), audio.end)
        for item in items:
            if item.is_last:
                self.forget(item.stream_id)
        vocabularies = tuple(item.final_vocabulary for item in items)
        return RefineJob(tuple(shown), vocabularies, tuple(jobs), settled, tuple(partials))

    def _reread(self, audio: _StreamAudio, partial: str) -> tuple[Final, np.ndarray] | None:
        """The open utterance to re-read now (as a final of the partial's text, and its audio), or None: it is
        shorter than ``refine_min_s``, was re-read less than ``refine_partials_s`` ago, or is too long for
        Whisper's window (its final will be cut soon)."""
        every = self.config.refine_partials_s
        if not every:
            return None
        start, rate = max(audio.cut, audio.start), SAMPLE_RATE_HZ
        if audio.end - start < self.config.refine_min_s * rate or audio.end - audio.read_at < every * rate:
            return None
        if audio.end - start > (MAX_WINDOW_S - 1.0) * rate:
            return None
        audio.read_at = audio.end
        return Final(partial, start / rate, audio.end / rate), audio.window(start, audio.end)

    @staticmethod
    def _with_tail(audio: _StreamAudio, partial: str) -> str:
        tail = partial.split()[audio.read_words :]
        return " ".join([audio.read_text, *tail])

    def apply(self, job: RefineJob, *, skip: str | None = None) -> list[StepOutput]:
        """Run the second pass over a step's finals (any one thread at a time; the model is not shared with
        the first pass). ``skip``: keep every first-pass final as it is, counted under this outcome (the
        degradation ladder's first rung)."""
        results = dict(job.settled)
        for reason in results.values():
            self._count(reason.reason)
        shown: dict[int, str] = {}
        if job.jobs and skip is not None:
            for index, final_index, final, _ in job.jobs:
                results[(index, final_index)] = Refinement(final, skip)
            self._count(skip, len(job.jobs))
        elif skip is None and (job.jobs or job.partials):  # the ladder gives the live re-read up first
            started = time.perf_counter()
            partials = job.partials
            refinements = self.refine_many(
                [(final, samples, job.vocabularies[i]) for i, _, final, samples in job.jobs]
                + [(final, samples, job.vocabularies[i]) for i, _, final, samples, _ in partials]
            )
            if job.jobs:
                self.last_ms = (time.perf_counter() - started) * 1000.0
            for (index, final_index, _, _), refinement in zip(
                job.jobs, refinements[: len(job.jobs)], strict=True
            ):
                results[(index, final_index)] = refinement
                self._count(refinement.reason)
            for (index, stream_id, final, _, utterance), refinement in zip(
                partials, refinements[len(job.jobs) :], strict=True
            ):
                shown[index] = self._shown(stream_id, utterance, final.text, refinement)
        if not results and not shown:
            return list(job.outputs)
        refined_outputs = []
        for index, output in enumerate(job.outputs):
            if index in shown:
                output = replace(output, partial=shown[index])
            finals = []
            for final_index, final in enumerate(output.finals):
                found = results.get((index, final_index))
                if found is None:
                    finals.append(final)
                elif found.final is not None:
                    finals.append(found.final)
            refined_outputs.append(replace(output, finals=tuple(finals)))
        return refined_outputs

    def _shown(self, stream_id: int, utterance: int, partial: str, refinement: Refinement) -> str:
        """The partial to show after a re-read of the open utterance: the second pass's reading where the
        guards accept it (it then stands until the next re-read, the first pass's new words after it), else
        the previous reading with its tail, else the first pass's partial."""
        self._count(f"partial_{refinement.reason}")
        audio = self._audio.get(stream_id)
        if audio is None or audio.utterance != utterance:
            return partial
        if refinement.reason in ACCEPTED and refinement.final is not None:
            reading = refinement.final.text
            if (
                audio.read_text
                and rewrites(audio.read_text, reading)
                and (refinement.avg_logprob is None or refinement.avg_logprob < self.config.confident_logprob)
            ):  # words on screen change only for a confident reading (flicker); an unsure one waits
                self._count("partial_unsure_rewrite")
                return self._with_tail(audio, partial)
            audio.read_text, audio.read_words = reading, covered(partial, reading)
            return audio.read_text
        if audio.read_text:
            return self._with_tail(audio, partial)
        return partial

    def compile(self, terms: tuple[Any, ...], params: Any) -> Any:
        """The scorer of a vocabulary for the second pass (compile thread): the same graph, over Whisper's
        tokens (``FinalVocabulary.scorer``)."""
        from biasing.compile import build_graph
        from biasing.scorer import GraphScorer

        graph = build_graph(list(terms), self.adapter, params)
        return GraphScorer(graph, self.config.biasing_alpha, end="refund")

    def _encode(self, utterances: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        """Each utterance encoded on its own, then stacked (zero past each length) for one batched decode.

        The model runs on the CPU, where a batched encoder call costs the same per utterance (measured:
        ``OFFLINE_DATA.md``) and its padded shapes change the float sums slightly, which the int8 decoder
        can turn into another word: one call per utterance keeps a stream's final independent of who else
        ended an utterance in the same step."""
        parts = [self.model.encode([samples], pad_s=self.config.pad_s) for samples in utterances]
        longest = max(int(encoded.shape[1]) for encoded, _ in parts)
        stacked = torch.zeros(len(parts), longest, int(parts[0][0].shape[2]))
        for row, (encoded, _) in enumerate(parts):
            stacked[row, : encoded.shape[1]] = encoded[0]
        return stacked, torch.cat([lengths for _, lengths in parts])

    def refine_many(self, jobs: list[tuple[Final, np.ndarray, FinalVocabulary | None]]) -> list[Refinement]:
        """Refine finals given with their audio and boosters (None: no vocabulary), in one batch."""
        config = self.config
        limit = int((MAX_WINDOW_S - config.pad_s) * SAMPLE_RATE_HZ)
        batch = [i for i, (_, samples, _) in enumerate(jobs) if 0 < len(samples) <= limit]
        out = [Refinement(final, "too_long") for final, _, _ in jobs]
        if not batch:
            return out
        encoded, lengths = self._encode([jobs[i][1] for i in batch])
        durations = [len(jobs[i][1]) / SAMPLE_RATE_HZ for i in batch]
        max_tokens = [max_tokens_for(d) for d in durations]
        vocabularies = [jobs[i][2] for i in batch]
        checked = [r for r, v in enumerate(vocabularies) if v is not None]
        if config.max_term_deficit is None:  # terms are not checked: no plain reading either
            checked = []
        rows = torch.tensor(list(range(len(batch))) + checked, dtype=torch.long)
        # the boosted decodes, then unboosted twins of the rows whose terms are checked
        hyps = self.model.decode(
            encoded.index_select(0, rows),
            lengths.index_select(0, rows),
            beam_size=config.beam_size,
            max_tokens=[max_tokens[r] for r in rows.tolist()],
            boosters=[v.scorer if v is not None else None for v in vocabularies] + [None] * len(checked),
            evidence_margin=config.evidence_margin,
        )
        plains = dict(zip(checked, hyps[len(batch) :], strict=True))
        boosted = dict(enumerate(hyps[: len(batch)]))
        readings = self._read_both([jobs[i][0] for i in batch], [boosted, plains], (encoded, lengths))
        refined: dict[int, Refinement] = {}
        for row, (i, hyp, duration, token_cap) in enumerate(
            zip(batch, hyps[: len(batch)], durations, max_tokens, strict=True)
        ):
            final, vocabulary = jobs[i][0], vocabularies[row]
            refined[row] = replace(
                judge(config, final, hyp, duration, token_cap, vocabulary, readings.get((0, row))),
                avg_logprob=float(hyp.avg_logprob),
            )
            plain = plains.get(row)
            if plain is not None and refined[row].reason not in SETTLED:
                # the boosted reading failed a guard: the vocabulary may have pulled Whisper off (an unsure
                # or looping hypothesis, or one too unsure to count as speech); read it without
                fallback = judge(
                    config, final, plain, duration, token_cap, vocabulary, readings.get((1, row))
                )
                if fallback.reason in ACCEPTED:
                    refined[row] = replace(fallback, reason=f"plain_{fallback.reason}")
        self._check_terms(refined, plains, vocabularies, (encoded, lengths))
        for row, i in enumerate(batch):
            out[i] = refined[row]
        return out

    def _read_both(
        self,
        finals: list[Final],
        readings: list[dict[int, Any]],
        audio: tuple[torch.Tensor, torch.Tensor],
    ) -> dict[tuple[int, int], Readings]:
        """Both texts of each final (row) and each of its second-pass readings (``readings[k][row]``) that
        ``judge`` arbitrates by score (``needs_readings``), scored by Whisper on the row's audio in one
        batched teacher-forced call; keyed by (k, row)."""
        wanted = [
            (k, row, hyp)
            for k, hyps in enumerate(readings)
            for row, hyp in hyps.items()
            if needs_readings(self.config, finals[row], hyp)
        ]
        if not wanted:
            return {}
        ids = [
            [self.adapter.ids(finals[row].text), self.adapter.ids(spoken_text(hyp.text, finals[row].text))]
            for _, row, hyp in wanted
        ]
        encoded, lengths = audio
        index = torch.tensor([row for _, row, _ in wanted], dtype=torch.long)
        totals = self.model.score(encoded.index_select(0, index), lengths.index_select(0, index), ids)
        return {
            (k, row): Readings(first / (len(first_ids) + 1), second / (len(second_ids) + 1))
            for (k, row, _), (first_ids, second_ids), (first, second) in zip(wanted, ids, totals, strict=True)
        }

    def _check_terms(
        self,
        refined: dict[int, Refinement],
        plains: dict[int, Any],
        vocabularies: list[FinalVocabulary | None],
        audio: tuple[torch.Tensor, torch.Tensor],
    ) -> None:
        """Confirm or drop each term of the texts about to be committed (``term_check``), in one batched
        teacher-forced scoring call; ``refined`` is updated in place."""
        jobs = []
        for row, plain in plains.items():
            refinement, vocabulary = refined[row], vocabularies[row]
            if refinement.final is None or refinement.reason in UNCHECKED or vocabulary is None:
                continue
            texts, checks = candidates(
                refinement.final.text, spoken_text(plain.text, refinement.final.text), vocabulary.finder
            )
            if checks:
                jobs.append((row, texts, checks))
        if not jobs:
            return
        encoded, lengths = audio
        index = torch.tensor([row for row, _, _ in jobs], dtype=torch.long)
        scores = self.model.score(
            encoded.index_select(0, index),
            lengths.index_select(0, index),
            [[self.adapter.ids(text) for text in texts] for _, texts, _ in jobs],
        )
        limit = self.config.max_term_deficit if self.config.max_term_deficit is not None else float("inf")
        for (row, texts, checks), totals in zip(jobs, scores, strict=True):
            filled = tuple(replace(c, margin=totals[0] - totals[k + 1]) for k, c in enumerate(checks))
            dropped = sum(not c.kept(limit) for c in filled)
            self._count("term_confirmed", len(filled) - dropped)
            self._count("term_dropped", dropped)
            refinement = refined[row]
            if not dropped or refinement.final is None:  # (every job has a final: for the type checker)
                refined[row] = replace(refinement, checks=filled)
                continue
            text = capitalized(apply_checks(texts[0], filled, limit))
            kept = with_text(refinement.final, text) if text.strip() else None
            refined[row] = replace(refinement, final=kept, checks=filled)
