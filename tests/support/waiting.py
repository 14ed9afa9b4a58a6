"""Waiting on a condition in tests: poll it, never sleep a guessed time.

A `timeout` here is how long to wait before giving up with a clear message, not a bound
on how fast the thing under test must be."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimedOut(AssertionError):
    """The condition did not hold within the timeout."""


def wait_until(
    predicate: Callable[[], T | None], *, timeout: float, message: str | Callable[[], str], interval: float = 0.02
) -> T:
    """Call `predicate` until it returns something truthy and return that. After `timeout`
    seconds raise WaitTimedOut with `message` (a callable is called then, so it can show a
    log as it is at that moment). An exception from `predicate` propagates at once: raise
    from it to stop waiting early (a process that exited)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise WaitTimedOut(f"waited {timeout:g} s: {message() if callable(message) else message}")
        time.sleep(interval)  # the polling interval, not a guess at how long the wait takes
