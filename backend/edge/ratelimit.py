"""Counting recent events per key in a sliding window, with bounded memory (login and no-login limits)."""

from __future__ import annotations

import itertools
from collections import deque


class SlidingWindow:
    """The monotonic times of each key's events within the last ``window_s`` seconds (event-loop thread
    only). At ``max_keys`` keys, the expired ones and then the oldest tenth are dropped, so a stream of new
    keys (random usernames, forged addresses) cannot grow it without bound."""

    def __init__(self, window_s: float, max_keys: int = 100_000) -> None:
        self.window_s = window_s
        self.max_keys = max_keys
        self._times: dict[str, deque[float]] = {}

    def recent(self, key: str, now: float) -> int:
        """How many events ``key`` had within the window before ``now``."""
        times = self._times.get(key)
        if times is None:
            return 0
        while times and now - times[0] > self.window_s:
            times.popleft()
        return len(times)

    def add(self, key: str, now: float) -> None:
        """Count one event of ``key`` at ``now``."""
        times = self._times.get(key)
        if times is None:
            if len(self._times) >= self.max_keys:
                self._evict(now)
            times = self._times[key] = deque()
        times.append(now)

    def retry_after_s(self, key: str, now: float) -> float:
        """Seconds until the oldest event of ``key`` leaves the window (0 when it has none)."""
        times = self._times.get(key)
        return max(0.0, self.window_s - (now - times[0])) if times else 0.0

    def take_back(self, key: str) -> None:
        """Forget the latest event of ``key`` (it turned out not to count)."""
        times = self._times.get(key)
        if times:
            times.pop()

    def forget(self, key: str) -> None:
        """Forget every event of ``key``."""
        self._times.pop(key, None)

    def _evict(self, now: float) -> None:
        for key in [k for k, t in self._times.items() if not t or now - t[-1] > self.window_s]:
            del self._times[key]
        for key in list(itertools.islice(self._times, len(self._times) - self.max_keys * 9 // 10)):
            del self._times[key]
