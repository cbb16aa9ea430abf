"""Beam-search streams on the decode thread: the chunk's NeMo pipeline buffers and encodes the chunks (exact
sizes; buffered models re-encode their context, cache-aware ones keep each stream's encoder caches,
``ChunkPipeline.encode``), ``beam.BeamSearch`` decodes them, and this module turns the best beam into
partials and finals.

End of utterance: the best beam has emitted something and then ``stop_history_eou_ms`` of trailing blank
frames (``sentence_pause_ms`` after a label that closes a sentence; ``long_utterance_pause_ms`` once the
utterance is longer than ``long_utterance_s``; any short pause past ``very_long_utterance_s``; at
``max_utterance_s`` it ends at once); the best beam is committed as a final and the stream's beams restart
from it with fresh scores.
"""

from __future__ import annotations

from typing import Any

import torch

from backend.engine.steps import StepItem, StepOutput, make_frame
from backend.engine.types import EngineConfig, EngineError, Final, Word


def load_lm(path: str, asr_model: Any) -> Any:
    """A token-level n-gram LM (NeMo ``NGramGPULanguageModel``, ``.nemo`` or ARPA) over the model's
    vocabulary, on the model's device; ``EngineError`` when it does not fit the model."""
    from nemo.collections.asr.parts.submodules.ngram_lm import NGramGPULanguageModel

    vocab_size = int(asr_model.decoder.blank_idx)  # labels without blank
    try:
        # use_triton None: NeMo's Triton kernel on CUDA where Triton is installed (the PyTorch fallback syncs
        # with the host on every back-off hop), the PyTorch code on CPU
        lm = NGramGPULanguageModel.from_file(path, vocab_size=vocab_size, use_triton=None)
    except (AssertionError, FileNotFoundError, ValueError) as exc:
        raise EngineError(f"language model {path} does not load for this model: {exc!r}") from exc
    if int(lm.vocab_size) != vocab_size:
        raise EngineError(f"language model {path} has {lm.vocab_size} labels, the model {vocab_size}")
    return lm.to(asr_model.device).eval()


def _label_classes(tokenizer: Any) -> tuple[frozenset[int], frozenset[int]]:
    """The labels whose text ends a sentence (``.``, ``?`` or ``!`` last; none for a model without them),
    and those that start a word (SentencePiece's ``\u2581``)."""
    size = int(getattr(tokenizer, "vocab_size", 0) or 0)
    pieces = tokenizer.ids_to_tokens(list(range(size))) if size else []
    ends = frozenset(label for label, piece in enumerate(pieces) if piece.rstrip().endswith((".", "?", "!")))
    starts = frozenset(label for label, piece in enumerate(pieces) if piece.startswith("\u2581"))
    return ends, starts


class BeamStreams:
    """Per-stream beam states (by stream id) and the batched beam search they share."""

    def __init__(self, config: EngineConfig, wrapper: Any, multi_model: Any) -> None:
        from backend.engine.beam import BeamSearch, build_beam_computer

        asr_model = wrapper.asr_model
        lm = load_lm(config.lm_path, asr_model) if config.lm_path and config.lm_alpha > 0 else None
        computer = build_beam_computer(
            asr_model,
            multi_model,
            config.beam_size,
            config.max_symbols_per_step,
            lm,
            config.lm_alpha,
            config.lm_token_bonus,
            config.biasing_evidence_margin,
        )
        self.search = BeamSearch(computer)
        self.tokenizer = wrapper.tokenizer
        self.frame_s: float = wrapper.get_model_stride(in_secs=True)
        self.eou_frames = max(1, round(config.stop_history_eou_ms / 1000.0 / self.frame_s))
        self.long_frames = round(config.long_utterance_s / self.frame_s)
        self.long_pause_frames = max(1, round(config.long_utterance_pause_ms / 1000.0 / self.frame_s))
        self.max_frames = round(config.max_utterance_s / self.frame_s)
        self.sentence_pause_frames = max(1, round(config.sentence_pause_ms / 1000.0 / self.frame_s))
        self.very_long_frames = round(config.very_long_utterance_s / self.frame_s)
        self.sentence_ends, self.word_starts = _label_classes(self.tokenizer)
        self._committed: dict[int, int] = {}  # stream id -> first frame not yet committed (inside-chunk cuts)
        self._states: dict[int, Any] = {}
        self._biasing: dict[int, tuple[int, int]] = {}

    def live_stream_count(self) -> int:
        """Streams holding beam state."""
        return len(self._states)

    def drop(self, stream_id: int) -> None:
        """Forget a stream (abort)."""
        self._states.pop(stream_id, None)
        self._biasing.pop(stream_id, None)
        self._committed.pop(stream_id, None)

    def step(self, chunk_pipeline: Any, items: list[StepItem]) -> list[StepOutput]:
        """Buffer and encode one chunk per stream, advance the beams of streams with new frames, and report
        each stream's best beam (committing it at end of utterance and at the end of the stream)."""
        chunk = chunk_pipeline.encode([make_frame(chunk_pipeline, item) for item in items])
        encoder_output, lengths = chunk.encoder_output, chunk.lengths
        states = [self._state_for(item, encoder_output.device) for item in items]
        rows = [  # a stream's end without new frames (cache-aware) still finishes the beams behind (RNNT)
            i
            for i, n in enumerate(lengths.tolist())
            if n > 0 or (items[i].is_last and self.search.has_pending(states[i]))
        ]
        if rows:
            self.search.decode(
                [states[i] for i in rows],
                encoder_output[rows],
                lengths[rows],
                [items[i].model_id for i in rows],
                [items[i].is_last for i in rows],
            )
        delay_frames = chunk.delay_frames
        # one host-device sync for the step, not two per stream; beams ranked as if each utterance ended now
        picks = self.search.best_beams(states, [item.model_id for item in items])
        return [
            self._report(item, state, delay_frames, best, lag)
            for item, state, (best, lag) in zip(items, states, picks, strict=True)
        ]

    def _state_for(self, item: StepItem, device: torch.device) -> Any:
        biasing = (item.model_id, item.biasing_generation)
        if item.is_first:
            state = self.search.initial_state(device)
            self._states[item.stream_id] = state
        else:
            state = self._states[item.stream_id]
            if self._biasing.get(item.stream_id) != biasing:
                self.search.reset_biasing(state)
        self._biasing[item.stream_id] = biasing
        return state

    def _report(self, item: StepItem, state: Any, delay_frames: int, best: int, lag: int) -> StepOutput:
        """``best``: the stream's best beam; ``lag``: that beam's frames not consumed yet (RNNT).

        A pause inside the chunk that ends an utterance (a sentence closed, then ``sentence_pause_ms``)
        commits the words before it at once: a 1.12 s chunk often holds the pause and the next sentence's
        first word, and checking only at chunk ends let finals run on over several sentences (issue 37). The
        beams go on (the next sentence keeps its LM context); the committed part is left out by its frames."""
        committed = self._committed.get(item.stream_id, 0)
        tokens = [t for t in state.histories[best] if t.start_frame >= committed]
        finals: list[Final] = []
        while (cut := self._pause_inside(tokens)) is not None:
            final = self._final(tokens[:cut], delay_frames, state.decoded_frames)
            if final is not None:
                finals.append(final)
            tokens = tokens[cut:]
            self._committed[item.stream_id] = tokens[0].start_frame
        consumed = state.decoded_frames - lag
        if item.is_last or (tokens and self._utterance_ends(tokens, consumed)):
            final = self._final(tokens, delay_frames, state.decoded_frames)
            if final is not None:
                finals.append(final)
            if item.is_last:
                self.drop(item.stream_id)
            else:
                self.search.restart_utterance(state, best)
            return StepOutput(partial="", finals=tuple(finals))
        return StepOutput(partial=self._text([t.label for t in tokens]), finals=tuple(finals))

    def _pause_needed(self, label: int, length: int) -> int:
        """Blank frames after ``label`` that end an utterance ``length`` frames long so far. A sentence the
        model closed (its last label ends in ``. ? !``) ends on a shorter pause (issue 37: finals when a
        sentence ends, not at the next long silence); past ``very_long_utterance_s`` any pause ends it."""
        if length >= self.very_long_frames:
            pause = min(2, self.long_pause_frames)
        elif length >= self.long_frames:
            pause = self.long_pause_frames
        else:
            pause = self.eou_frames
        if label in self.sentence_ends:
            pause = min(pause, self.sentence_pause_frames)
        return int(pause)

    def _pause_inside(self, tokens: list[Any]) -> int | None:
        """Where the first pause long enough to end the utterance falls between two of its tokens (the index
        of the token after it, which starts a word), or None."""
        for index in range(1, len(tokens)):
            before, after = tokens[index - 1], tokens[index]
            if after.label not in self.word_starts:
                continue
            length = before.end_frame - tokens[0].start_frame
            if after.start_frame - before.end_frame >= self._pause_needed(before.label, length):
                return index
        return None

    def _utterance_ends(self, tokens: list[Any], consumed: int) -> bool:
        """A pause long enough for the utterance's length so far (``_pause_needed``) after its last token, or
        the longest utterance reached."""
        trailing_blank_frames: int = consumed - tokens[-1].end_frame
        length: int = consumed - tokens[0].start_frame
        if length >= self.max_frames:
            return True
        return bool(trailing_blank_frames >= self._pause_needed(tokens[-1].label, length))

    def _text(self, labels: list[int]) -> str:
        return " ".join(self.tokenizer.ids_to_text(labels).split()) if labels else ""

    def _final(self, tokens: list[Any], delay_frames: int, decoded_frames: int) -> Final | None:
        words = self._words(tokens, delay_frames, decoded_frames)
        text = self._text([t.label for t in tokens])
        if not text:
            return None
        return Final(text=text, start_s=words[0].start_s, end_s=words[-1].end_s, words=tuple(words))

    def _words(self, tokens: list[Any], delay_frames: int, decoded_frames: int) -> list[Word]:
        """Group tokens into words at SentencePiece word starts; times in seconds from the stream start
        (a TDT duration may reach past the decoded audio: clamped)."""
        pieces = self.tokenizer.ids_to_tokens([t.label for t in tokens])
        groups: list[list[Any]] = []
        for token, piece in zip(tokens, pieces, strict=True):
            if not groups or piece.startswith("\u2581"):
                groups.append([])
            groups[-1].append(token)
        words = []
        for group in groups:
            text = self._text([t.label for t in group])
            if not text:
                continue
            start = max(0, group[0].start_frame - delay_frames) * self.frame_s
            end = max(0, min(group[-1].end_frame, decoded_frames) - delay_frames) * self.frame_s
            words.append(Word(text, round(start, 6), round(max(start, end), 6)))
        return words
