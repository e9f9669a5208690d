"""The session watchdog: active seconds of a turn, counted per node (a paused run's wait does not count)."""

from __future__ import annotations

import time


class TurnClock:
    """Measures one node's share of the turn and how much of the limit is left for it."""

    def __init__(self, elapsed: float, limit: float) -> None:
        self.before, self.limit = elapsed, limit
        self._started = time.monotonic()

    @property
    def remaining(self) -> float:
        """Seconds left before the watchdog ends the turn (never negative)."""
        return max(0.0, self.limit - self.elapsed)

    @property
    def elapsed(self) -> float:
        """Active seconds of the turn so far, this node's included."""
        return round(self.before + time.monotonic() - self._started, 6)

    @property
    def expired(self) -> bool:
        """The turn has used its time."""
        return self.elapsed >= self.limit
