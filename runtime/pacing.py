"""A run's step rate (RunOptions.pacer): a token bucket the walker takes one token from
before each step. A pack whose steps each ask a model never meets it; a graph that
loops over steps that cost nothing (assert nodes, routing) is slowed to the rate, so one
run cannot write its journal as fast as a core allows (a host's shared database, its
other users). The walker waits on the run's cancel event, so a paced run still cancels
at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class StepPacer:
    """At most `rate` steps a second after a burst of `burst` steps."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a step rate must be above 0 and its burst at least 1")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()

    def delay(self) -> float:
        """Take the next step's token; the seconds to wait before the step (0: none)."""
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate)
        self._at = now
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self.rate

    def hold(self, cancel: threading.Event | None) -> bool:
        """Wait for the next step's token; True when the run was cancelled meanwhile."""
        wait = self.delay()
        if wait <= 0:
            return False
        if cancel is not None:
            return cancel.wait(wait)
        time.sleep(wait)
        return False
