"""The degradation ladder (issue 37): what a replica gives up under load, in a documented order, before it
closes a speaker who is already captioned, and only the newest one.

Pressure is the largest backlog of a live session beyond the chunk being decoded (``overdue_s - chunk_s``:
a resumed client's held audio does not count), the least reading of the last ``window_s`` (2 s: a backlog
that does not go down). Each rung is climbed when the pressure reaches its threshold
and climbed back down, one rung at a time, when the pressure has stayed under half the rung's threshold for
``down_after_s``:

1. ``second_pass_off``: new finals keep the streaming pass's text (Whisper's re-reading costs the most);
2. ``greedy_for_new``: new sessions decode greedy (sessions already on beam stay on beam);
3. ``fewer_partials``: a partial every other chunk;
4. ``refuse_new``: new sessions get 503 and ``/readyz`` fails, so a load balancer sends them elsewhere;
5. ``shed_newest``: the newest live session is closed (``busy``, 1013; its page resumes later), one every
   ``shed_interval_s`` while the pressure stays there.

``LoadLadder`` is pure (tests drive it with made-up pressures); ``run_ladder`` applies it to a replica.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


class Rung(enum.IntEnum):
    """The ladder's rungs, lowest first."""

    NORMAL = 0
    SECOND_PASS_OFF = 1
    GREEDY_FOR_NEW = 2
    FEWER_PARTIALS = 3
    REFUSE_NEW = 4
    SHED_NEWEST = 5

    @property
    def label(self) -> str:
        return self.name.lower()


MESSAGES = {
    Rung.NORMAL: "",
    Rung.SECOND_PASS_OFF: "The server is busy: captions skip their second reading for now.",
    Rung.GREEDY_FOR_NEW: "The server is busy: captions skip their second reading, and new speakers get "
    "faster, simpler decoding.",
    Rung.FEWER_PARTIALS: "The server is busy: live text updates less often for now.",
    Rung.REFUSE_NEW: "The server is busy: nobody new can start captions here until it catches up.",
    Rung.SHED_NEWEST: "The server is overloaded: the newest speakers are being asked to retry shortly.",
}


@dataclass
class LoadLadder:
    """The ladder's state. ``thresholds_s[i]``: the pressure (seconds of backlog) at which rung ``i + 1`` is
    climbed."""

    thresholds_s: Sequence[float] = (0.5, 1.0, 2.0, 4.0, 8.0)
    down_after_s: float = 10.0
    shed_interval_s: float = 5.0
    window_s: float = 0.0  # the pressure is the least reading of this long: a backlog that does not go down
    rung: Rung = Rung.NORMAL
    since: float = field(default_factory=time.monotonic)
    climbed: deque[tuple[float, Rung]] = field(default_factory=lambda: deque(maxlen=64))  # the last changes
    _calm_since: float | None = None
    _last_shed: float = float("-inf")
    _readings: deque[tuple[float, float]] = field(default_factory=deque)

    def __post_init__(self) -> None:
        if len(self.thresholds_s) != len(Rung) - 1 or list(self.thresholds_s) != sorted(self.thresholds_s):
            raise ValueError(f"need {len(Rung) - 1} increasing thresholds, got {list(self.thresholds_s)}")

    def observe(self, reading_s: float, now: float) -> Rung | None:
        """Feed one pressure reading; the new rung when it changed, else None. With ``window_s`` the pressure
        is the least reading of the last ``window_s``: a stream whose final waits for the second pass shows
        one chunk more lag for a moment, which is not a backlog."""
        self._readings.append((now, reading_s))
        while self._readings[0][0] < now - self.window_s:
            self._readings.popleft()
        pressure_s = min(r for _, r in self._readings)
        target = Rung(sum(pressure_s >= t for t in self.thresholds_s))
        if target > self.rung:
            self._calm_since = None
            return self._move(Rung(self.rung + 1), now)  # one rung per reading: each is seen to act
        if self.rung == Rung.NORMAL or pressure_s >= self.thresholds_s[self.rung - 1] / 2:
            self._calm_since = None
            return None
        if self._calm_since is None:
            self._calm_since = now
        if now - self._calm_since >= self.down_after_s:
            self._calm_since = now
            return self._move(Rung(self.rung - 1), now)
        return None

    def should_shed(self, now: float) -> bool:
        """At the top rung, whether to close the newest session now (one per ``shed_interval_s``)."""
        if self.rung < Rung.SHED_NEWEST or now - self._last_shed < self.shed_interval_s:
            return False
        self._last_shed = now
        return True

    def _move(self, rung: Rung, now: float) -> Rung:
        self.rung, self.since = rung, now
        self.climbed.append((now, rung))
        return rung

    def snapshot(self) -> dict[str, Any]:
        """For ``/api/live``, the ``ready`` message and the ``load`` message."""
        return {"rung": int(self.rung), "state": self.rung.label, "message": MESSAGES[self.rung]}


def pressure_of(sessions: Sequence[Any]) -> float:
    """The largest backlog beyond the chunk being decoded over live sessions (seconds, >= 0)."""
    return max((max(0.0, s.overdue_s - s.chunk_s) for s in sessions), default=0.0)


async def run_ladder(
    ladder: LoadLadder,
    sessions: Callable[[], Sequence[Any]],
    on_change: Callable[[Rung], None],
    shed: Callable[[Any], None],
    interval_s: float = 0.5,
) -> None:
    """Read the pressure every ``interval_s``, move the ladder, and close the newest session at the top."""
    while True:
        await asyncio.sleep(interval_s)
        live = sessions()
        now = time.monotonic()
        changed = ladder.observe(pressure_of(live), now)
        if changed is not None:
            on_change(changed)
        if live and ladder.should_shed(now):
            shed(max(live, key=lambda s: s.started_monotonic))
