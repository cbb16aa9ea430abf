"""A fake decoder that is busy like the real one: every stream's steps share one decode worker.

``backend.engine.Engine`` decodes on one thread, so the streams of other sessions delay each other's steps.
``SerialEngine`` keeps that property with the fake's script (``tests.support.fake_engine``): a step holds
the one worker for ``step_s`` seconds, whichever stream it belongs to.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from backend.engine.types import StepResult, StreamOptions
from tests.support.fake_engine import FakeEngine, FakeStream


class SerialStream(FakeStream):
    """A fake stream whose step waits for, and then holds, its engine's one worker."""

    engine: SerialEngine

    async def push(self, pcm: bytes) -> StepResult:
        async with self.engine.worker:
            await asyncio.sleep(self.engine.step_s)
            return await super().push(pcm)


@dataclass
class SerialEngine(FakeEngine):
    """``FakeEngine`` with one decode worker shared by every stream; ``step_s`` per step."""

    step_s: float = 0.05
    worker: asyncio.Lock = field(default_factory=asyncio.Lock)

    def open_stream(self, options: StreamOptions) -> FakeStream:
        stream = SerialStream(self, options)
        self.open_streams.add(id(stream))
        return stream
