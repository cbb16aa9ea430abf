"""Public value types of the streaming engine: configuration, per-stream options, results, errors."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from backend.engine.errors import EngineError as EngineError  # re-exported with the value types
from backend.engine.errors import EngineOverloaded as EngineOverloaded

if TYPE_CHECKING:
    from biasing.graph import GraphParams

SAMPLE_RATE_HZ = 16000
FINAL_PASS_MODES = ("off", "decode")
FINAL_PASS_ARBITRATIONS = (
    "agreement",
    "confidence",
    "scored",
)  # ``backend.engine.final_guards.ARBITRATIONS``
ENCODER_FRAME_S = 0.08


_REPEATED_MARK = re.compile(r"([.,?!])\1+")


def collapse_repeated_marks(text: str) -> str:
    """One mark where the decoder emitted the same one twice: ``"decoration.."`` -> ``"decoration."``.

    NeMo's buffered greedy pipeline ends such finals with the full stop twice (28 of 100 held-out utterances
    with the bundled model, at the end-of-utterance flush). NeMo's text processor collapses runs of marks for
    segment-level output only; the engine takes word-level output, so it collapses them itself."""
    return _REPEATED_MARK.sub(r"\1", text)


def exact_frames(seconds: float, frame_s: float = ENCODER_FRAME_S) -> int:
    """``seconds`` as a whole number of ``frame_s`` frames (rounded, never ceil'ed); ValueError if not."""
    frames = round(seconds / frame_s)
    if frames < 0 or abs(frames * frame_s - seconds) > 1e-6:
        raise ValueError(f"{seconds} s is not a whole number of {frame_s} s encoder frames")
    return frames


def exact_samples(seconds: float, sample_rate_hz: int = SAMPLE_RATE_HZ) -> int:
    """``seconds`` as a whole number of samples (rounded); ValueError if not whole."""
    samples = round(seconds * sample_rate_hz)
    if abs(samples / sample_rate_hz - seconds) > 1e-9:
        raise ValueError(f"{seconds} s is not a whole number of samples at {sample_rate_hz} Hz")
    return samples


class VocabularyRef(Protocol):
    """A registered vocabulary, from the engine's ``load_vocabulary``; ``release`` (idempotent) lets the
    engine drop it once no stream uses it."""

    def release(self) -> None: ...


@dataclass(frozen=True)
class EngineConfig:
    """How the engine loads and runs the model. Limits are checked in ``__post_init__``.

    ``model``: a ``.nemo`` path or a pretrained NeMo model name (any RNNT/TDT BPE Transducer).
    ``max_wait_ms``: how long the batcher waits for more live streams to submit a chunk before a step;
    ``max_hold_ms`` instead (when longer) while the decode thread was busy more than ``hold_when_busy`` of the
    last 3 s, so that streams sending at their own phases share a step (issue 37; 0: never hold).
    ``left_context_s`` / ``right_context_s``: audio context the buffered pipeline re-encodes around each chunk
    (right context adds latency). ``long_utterance_s`` / ``long_utterance_pause_ms`` / ``max_utterance_s``
    (beam decoding): an utterance longer than ``long_utterance_s`` also ends on a pause of
    ``long_utterance_pause_ms``, and one reaching ``max_utterance_s`` ends at once, so that every final fits
    the second pass's window and is checked (a 44 s reading without a long pause was one unread final);
    past ``very_long_utterance_s`` (off at the default, = ``max_utterance_s``) any pause of two frames ends
    it. ``sentence_pause_ms`` (beam decoding): an
    utterance whose last label closes a sentence (``. ? !``) ends on this shorter pause (issue 37).
    ``stop_history_eou_ms``: trailing silence (blank frames) that ends an
    utterance. ``max_live_streams``: open streams beyond this raise ``EngineOverloaded``.
    ``beam_size``: beams per stream for ``decoding="beam"``. ``max_symbols_per_step``: labels the decoder
    may emit per encoder frame (NeMo's default 10). ``vocabulary_cache_dir``: compiled vocabulary graphs on
    disk (None: memory cache only). ``lm_path``: a token-level n-gram LM over the model's vocabulary (NeMo
    ``NGramGPULanguageModel``, ``.nemo`` or ARPA), fused into beam search with weight ``lm_alpha``; greedy
    decoding does not use it (it gained ~1 WER point there, against ~10 in beam search).
    ``lm_token_bonus``: added to every non-blank label's score when the LM is fused, against the LM's pull
    towards dropping words (0: NeMo's fusion unchanged).
    ``leading_silence_dbfs``: a stream's leading chunks without speech are not decoded (None: decode
    everything). The Transducer, started from its initial state on silence or faint noise, emits a
    stray word ("To a", "I'm") at 0.0 s; the decoder starts at the first chunk with speech and times keep the
    skipped audio. Speech is judged against the stream's own noise floor (``backend.engine.level``): a chunk
    holds speech when some of its 20 ms frames stand 12 dB over the floor and over this absolute level
    (dBFS), so a quiet microphone's speech starts the decoder and a louder fan does not.
    ``input_gain_max_db``: the most a stream's quiet speech is raised towards the level the model reads
    best (a slow per-stream gain, held in pauses; 0: no gain).
    ``final_pass``: ``off`` or ``decode`` (each final re-read by Whisper's own decoder, boosted by the
    stream's vocabulary: ``backend.engine.final_pass``) with the model file ``final_pass_model`` (None: the
    bundled one), ``final_pass_beam_size`` beams and biasing weight ``final_pass_alpha``; a term stays in a
    final only where Whisper scores it at most ``final_pass_term_deficit`` nats below what it reads there
    without the vocabulary (``backend.engine.term_check``; None: terms are not checked).
    ``final_pass_arbitration``: where Whisper's reading disagrees with the first pass's, which one is kept
    (``backend.engine.final_guards.ARBITRATIONS``: ``agreement`` keeps the first pass's; ``confidence`` and
    ``scored`` take Whisper's where its scores say the audio supports it).
    ``final_pass_refine_partials_s``: while an utterance is open and 2 s long or more, the second pass
    re-reads it this often and the partial shows its reading, the first pass's newer words after it (0: the
    partial is the first pass's alone). The degradation ladder's first rung gives it up with the finals'.
    ``biasing_evidence_margin``: in beam search, a vocabulary boost is added to a label only where the model
    itself (before any fusion) scores that label within this many nats of its best label other than blank:
    a term is boosted where the audio makes it plausible, never pulled in against it (None: every label).
    ``int8_encoder``: on the CPU, run the streaming model's encoder with dynamically quantized int8 linear
    layers (``captions_model.nemo_encoder.quantize_encoder``): ~2.4x faster per step, accuracy in
    models/MODEL_CARD.md.
    """

    model: str
    device: str = "cpu"
    torch_threads: int = 1
    max_batch_streams: int = 64
    max_wait_ms: float = 20.0
    max_hold_ms: float = 0.0
    hold_when_busy: float = 0.6
    beam_size: int = 4
    allowed_chunk_s: tuple[float, ...] = (0.56, 1.12)
    biasing_alpha: float = 1.0
    biasing_graph_mode: str = "case_insensitive"
    lm_path: str | None = None
    lm_alpha: float = 0.7
    lm_token_bonus: float = 0.0
    biasing_tau: float = 0.5
    left_context_s: float = 2.0
    right_context_s: float = 0.0
    stop_history_eou_ms: int = 800
    long_utterance_s: float = 12.0
    long_utterance_pause_ms: int = 320
    very_long_utterance_s: float = 25.0
    max_utterance_s: float = 25.0
    sentence_pause_ms: int = 800
    max_live_streams: int = 256
    max_symbols_per_step: int = 10
    vocabulary_cache_dir: str | None = None
    leading_silence_dbfs: float | None = -70.0
    input_gain_max_db: float = 30.0
    final_pass: str = "off"
    final_pass_model: str | None = None
    final_pass_beam_size: int = 4
    final_pass_alpha: float = 1.5
    int8_encoder: bool = False
    biasing_evidence_margin: float | None = None
    final_pass_term_deficit: float | None = None
    final_pass_arbitration: str = "scored"
    final_pass_refine_partials_s: float = 1.5

    def __post_init__(self) -> None:
        if self.torch_threads < 1:
            raise ValueError("torch_threads must be >= 1")
        if self.max_batch_streams < 1:
            raise ValueError("max_batch_streams must be >= 1")
        if self.max_wait_ms < 0:
            raise ValueError("max_wait_ms must be >= 0")
        if self.beam_size < 1:
            raise ValueError("beam_size must be >= 1")
        if not self.allowed_chunk_s:
            raise ValueError("allowed_chunk_s must not be empty")
        for chunk_s in self.allowed_chunk_s:
            if exact_frames(chunk_s) < 1:
                raise ValueError(f"chunk {chunk_s} s is shorter than one encoder frame")
            exact_samples(chunk_s)
        exact_frames(self.left_context_s)
        exact_frames(self.right_context_s)
        if self.biasing_alpha < 0:
            raise ValueError("biasing_alpha must be >= 0")
        self.graph_params()  # raises ValueError for an unknown mode or a tau out of range
        if self.lm_alpha < 0:
            raise ValueError("lm_alpha must be >= 0")
        if self.lm_token_bonus < 0:
            raise ValueError("lm_token_bonus must be >= 0")
        if self.stop_history_eou_ms < 0:
            raise ValueError("stop_history_eou_ms must be >= 0")
        if not 0 < self.long_utterance_s <= self.very_long_utterance_s <= self.max_utterance_s:
            raise ValueError("need 0 < long_utterance_s <= very_long_utterance_s <= max_utterance_s")
        if self.long_utterance_pause_ms < 0 or self.sentence_pause_ms < 0:
            raise ValueError("long_utterance_pause_ms and sentence_pause_ms must be >= 0")
        if self.max_live_streams < 1:
            raise ValueError("max_live_streams must be >= 1")
        if self.max_symbols_per_step < 1:
            raise ValueError("max_symbols_per_step must be >= 1")
        if self.leading_silence_dbfs is not None and self.leading_silence_dbfs > 0:
            raise ValueError("leading_silence_dbfs must be <= 0 (or None)")
        if not 0 <= self.input_gain_max_db <= 60:
            raise ValueError("input_gain_max_db must be within 0-60")
        if self.final_pass not in FINAL_PASS_MODES:
            raise ValueError(f"final_pass must be one of {FINAL_PASS_MODES}, got {self.final_pass!r}")
        if self.final_pass_beam_size < 1:
            raise ValueError("final_pass_beam_size must be >= 1")
        if self.final_pass_alpha < 0:
            raise ValueError("final_pass_alpha must be >= 0")
        if self.final_pass_term_deficit is not None and not self.final_pass_term_deficit >= 0:
            raise ValueError("final_pass_term_deficit must be >= 0 (or None)")
        if not self.final_pass_refine_partials_s >= 0:
            raise ValueError("final_pass_refine_partials_s must be >= 0 (0: off)")
        if self.final_pass_arbitration not in FINAL_PASS_ARBITRATIONS:
            choices, got = FINAL_PASS_ARBITRATIONS, self.final_pass_arbitration
            raise ValueError(f"final_pass_arbitration must be one of {choices}, got {got!r}")
        if self.biasing_evidence_margin is not None and not self.biasing_evidence_margin >= 0:
            raise ValueError("biasing_evidence_margin must be >= 0 (or None)")

    def graph_params(self) -> GraphParams:
        """How vocabularies are compiled: ``biasing_graph_mode`` (``case_insensitive``, the default;
        ``case_sensitive_tree``, NeMo's own tree; ``char``) and ``biasing_tau`` (score spreading)."""
        from biasing.graph import GraphMode, GraphParams

        try:
            mode = GraphMode(self.biasing_graph_mode)
        except ValueError:
            known = ", ".join(m.value for m in GraphMode)
            got = self.biasing_graph_mode
            raise ValueError(f"biasing_graph_mode must be one of {known}, got {got!r}") from None
        return GraphParams(mode=mode, tau=self.biasing_tau)


@dataclass(frozen=True)
class StreamOptions:
    """What a client chose for its stream: chunk duration (one of ``EngineConfig.allowed_chunk_s``),
    decoding mode and an optional vocabulary (a handle from ``Engine.load_vocabulary``)."""

    chunk_s: float = 1.12
    decoding: Literal["greedy", "beam"] = "greedy"
    vocabulary: VocabularyRef | None = None


@dataclass(frozen=True)
class Word:
    """One word of a final, times in seconds from the start of the stream."""

    text: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Final:
    """A committed utterance (never revised). Times in seconds from the start of the stream.

    ``matched_terms``: the stream's vocabulary terms that occur in ``text`` (case-insensitive, whole words).
    ``source``: the pass whose text this is: ``first`` (the streaming Transducer) or ``second`` (Whisper's
    decoder re-read the utterance).
    """

    text: str
    start_s: float
    end_s: float
    words: tuple[Word, ...] = ()
    matched_terms: tuple[str, ...] = ()
    source: str = "first"


@dataclass(frozen=True)
class StepResult:
    """The result of one chunk: the current utterance's partial text, finals committed by this step, how
    much of the stream's audio has been decoded so far (seconds) and the stream's input level after the
    chunk (None for the flush)."""

    partial: str
    finals: tuple[Final, ...]
    audio_decoded_s: float
    level: InputLevel | None = None


LevelState = Literal["ok", "quiet", "loud"]


@dataclass(frozen=True)
class InputLevel:
    """What a stream's level meter says after a chunk (``backend.engine.level``): ``state`` ``ok``, ``quiet``
    (its speech has stayed under -42 dBFS for 2 s) or ``loud`` (clipping for 2 s); ``speech_dbfs``: the
    smoothed level of its speech (None before any); ``peak_dbfs``: the chunk's peak; ``gain_db``: the gain
    applied to it."""

    state: LevelState
    speech_dbfs: float | None
    peak_dbfs: float
    gain_db: float


@dataclass(frozen=True)
class EngineStats:
    """A snapshot for /metrics. ``max_lag_s``: largest (audio received - audio decoded) over live streams.
    ``final_pass_outcomes``: finals the second pass handled so far, by outcome (``second``: its text was
    kept; otherwise the guard that kept the first pass's text, or ``no_speech``: dropped);
    ``final_pass_last_ms``: the last step's second-pass time; ``final_pass_backlog``: steps whose finals wait
    for the second pass (its own thread). ``decoding_ms_per_audio_s``: per decoding mode
    (greedy, beam), decode-thread milliseconds per second of audio it decoded since start (its cost)."""

    ready: bool
    live_streams: int
    last_batch_streams: int
    max_batch_streams_seen: int
    last_step_ms: float
    queue_wait_ms: float
    max_lag_s: float
    steps_total: int
    registered_vocabularies: int
    final_pass_outcomes: tuple[tuple[str, int], ...] = ()
    final_pass_last_ms: float = 0.0
    final_pass_backlog: int = 0
    decoding_ms_per_audio_s: tuple[tuple[str, float], ...] = ()
