"""A scripted engine for the page tests: it follows the loudness of the real microphone audio.

The browser's fake microphone plays a synthesised sentence followed by silence, in a loop. Each loud
chunk reveals more of ``SENTENCE`` as the partial; the first quiet chunk after speech commits the whole
sentence as a final. So the pages are tested end to end on real captured audio (AudioWorklet, resampling,
chunking, the socket) without depending on a trained model's accuracy.
"""

from __future__ import annotations

import array
import math
from dataclasses import dataclass, field

from backend.engine.types import Final, StepResult, StreamOptions, Word
from tests.support.fake_engine import FakeEngine

SENTENCE = "Today we review the linezolid dosing protocol"
VOICED_RMS = 300.0  # PCM16 units; espeak speech is in the thousands, digital silence near zero


def chunk_rms(pcm: bytes) -> float:
    """Root mean square of little-endian PCM16 samples."""
    samples = array.array("h")
    samples.frombytes(pcm)
    if not samples:
        return 0.0
    return math.sqrt(sum(s * s for s in samples) / len(samples))


@dataclass
class LoudnessStream:
    engine: LoudnessEngine
    options: StreamOptions
    voiced_chunks: int = 0
    start_s: float = 0.0
    decoded_s: float = 0.0

    async def push(self, pcm: bytes) -> StepResult:
        begin = self.decoded_s
        self.decoded_s += self.options.chunk_s
        self.engine.chunk_sizes.add(len(pcm))
        if chunk_rms(pcm) >= VOICED_RMS:
            if self.voiced_chunks == 0:
                self.start_s = begin
            self.voiced_chunks += 1
            words = SENTENCE.split()
            shown = min(len(words), self.voiced_chunks * 2)
            return StepResult(" ".join(words[:shown]), (), self.decoded_s)
        return StepResult("", self._commit(), self.decoded_s)

    def _commit(self) -> tuple[Final, ...]:
        if self.voiced_chunks == 0:
            return ()
        self.voiced_chunks = 0
        word = Word(SENTENCE.split()[0], self.start_s, self.decoded_s)
        return (Final(SENTENCE, self.start_s, self.decoded_s, (word,)),)

    async def finish(self) -> StepResult:
        return StepResult("", self._commit(), self.decoded_s)

    async def set_vocabulary(self, handle: object) -> None:
        self.options = StreamOptions(self.options.chunk_s, self.options.decoding, handle)

    def abort(self) -> None:
        """Nothing to release."""


@dataclass
class LoudnessEngine(FakeEngine):
    """``FakeEngine``'s API (vocabulary handles, readiness) with ``LoudnessStream`` streams."""

    chunk_sizes: set[int] = field(default_factory=set)

    def open_stream(self, options: StreamOptions) -> LoudnessStream:
        return LoudnessStream(self, options)
