"""Failure classification and the retry schedule for model endpoints.

Every failed attempt becomes a `Failure` with one of the `FAILURE_CLASSES`; the
policy turns it into "give up now" or "wait this long, then try again". Jitter spreads
clients that were rejected together so they do not come back together (measured in
benchmarks/overload.py); a server's Retry-After is a floor that jitter only adds to."""

from __future__ import annotations

import email.utils
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

# class -> (retried?, counted against `attempts`?)
FAILURE_CLASSES: dict[str, tuple[bool, bool]] = {
    "overloaded": (True, False),  # 429/503 with Retry-After: the server asked us to wait
    "loading": (True, False),  # 503 "loading model": wait for readiness within the deadline
    "server": (True, True),  # 500/502/504, 408, 429/503 without Retry-After, in-band 5xx error
    "connection": (True, True),  # refused, reset, DNS, TLS
    "timeout": (True, True),  # connect or read timeout (includes a first token slower than `timeout`)
    "truncated": (True, True),  # the stream ended before finish_reason / [DONE]
    "rejected": (False, True),  # 400/401/403/404/422 and other 4xx: the request itself is wrong
}

BACKOFF_CAP_S = 20.0
LOADING_POLL_S = 1.0


@dataclass
class Failure:
    kind: str  # one of FAILURE_CLASSES
    message: str
    status: int | None = None
    retry_after: float | None = None

    @property
    def retried(self) -> bool:
        return FAILURE_CLASSES[self.kind][0]

    @property
    def counted(self) -> bool:
        return FAILURE_CLASSES[self.kind][1]


def classify_status(status: int, retry_after: float | None, message: str) -> Failure:
    """Classify an HTTP error status (anything but 200)."""
    if status == 503 and "loading" in message.lower():
        return Failure("loading", message, status, retry_after)
    if status in (429, 503) and retry_after is not None:
        return Failure("overloaded", message, status, retry_after)
    if status >= 500 or status in (408, 429):
        return Failure("server", message, status, retry_after)
    return Failure("rejected", message, status)


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: delay-seconds (fractions accepted) or
    an HTTP date. None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)


@dataclass
class RetryPolicy:
    backoff_s: float = 0.5
    jitter: bool = True
    rng: Callable[[], float] = random.random

    def _r(self) -> float:
        return float(self.rng())

    def delay(self, failure: Failure, failures: int) -> float:
        """Seconds to wait before the next try. `failures` counts the counted failures
        so far (>= 1 for counted classes). Never less than the server's Retry-After."""
        if failure.kind == "loading":
            poll = failure.retry_after if failure.retry_after is not None else LOADING_POLL_S
            return poll + (self._r() * poll / 2 if self.jitter else 0.0)
        if failure.kind == "overloaded":
            delay = 0.0
        else:
            step = min(BACKOFF_CAP_S, self.backoff_s * 2.0 ** max(0, failures - 1))
            # "Equal jitter": half fixed, half random, so a wait never collapses to zero.
            delay = step / 2 + self._r() * step / 2 if self.jitter else step
        floor = failure.retry_after
        if floor is not None and delay < floor:
            # Retry-After is a floor; jitter only adds to it: up to a quarter of it (at least
            # half of backoff_s), enough to spread clients rejected together over several
            # call latencies without making every rejected call wait much longer.
            delay = floor + (self._r() * max(self.backoff_s / 2, floor / 4) if self.jitter else 0.0)
        return delay


def wait(seconds: float, cancel: threading.Event | None) -> bool:
    """Sleep; return True if `cancel` was set meanwhile."""
    if seconds <= 0:
        return cancel is not None and cancel.is_set()
    if cancel is None:
        time.sleep(seconds)
        return False
    return cancel.wait(seconds)


class CancelWatch:
    """One thread for all in-flight streams: when a call's cancel event is set, run its
    closer (which shuts the socket down), so a read blocked inside httpx returns at once
    and the server sees the client go away and stops generating."""

    POLL_S = 0.02

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: dict[int, tuple[threading.Event, Callable[[], None]]] = {}
        self._next = 0
        self._thread: threading.Thread | None = None

    def add(self, cancel: threading.Event, closer: Callable[[], None]) -> int:
        with self._lock:
            self._next += 1
            token = self._next
            self._watched[token] = (cancel, closer)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="packforge-cancel-watch", daemon=True)
                self._thread.start()
            return token

    def remove(self, token: int) -> None:
        with self._lock:
            self._watched.pop(token, None)

    def _run(self) -> None:
        while True:
            time.sleep(self.POLL_S)
            with self._lock:
                if not self._watched:
                    self._thread = None
                    return
                fired = [(t, c) for t, (e, c) in self._watched.items() if e.is_set()]
                for token, _ in fired:
                    del self._watched[token]
            for _, closer in fired:
                try:
                    closer()
                except Exception:
                    pass


CANCEL_WATCH = CancelWatch()
