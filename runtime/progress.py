"""The progress line `packforge eval` writes to stderr while cases run: runs done out of
planned, the pass rate so far, and an estimate of the time left.

On a terminal the line is redrawn in place (a carriage return, then the line, then an
erase-to-end-of-line); elsewhere (`--progress` into a file or a pipe) each update is
its own line, so a CI log reads top to bottom. Never written to stdout: `--json`'s
stdout stays one document."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

ERASE_TO_END = "\x1b[K"


class EvalProgress:
    """Counts finished runs and redraws the line after each one (`update`); `finish`
    ends the line. Not thread-safe by itself: `evaluate` calls `on_case` one at a time."""

    def __init__(
        self,
        total: int,
        stream: TextIO,
        *,
        in_place: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.stream = stream
        self.in_place = in_place
        self.clock = clock
        self.started = clock()
        self.done = 0
        self.passed = 0
        self._drawn = False

    def update(self, passed: bool) -> None:
        self.done += 1
        self.passed += bool(passed)
        self._draw(self.line())

    def line(self) -> str:
        rate = f"{100 * self.passed / self.done:.1f}%" if self.done else "-"
        elapsed = self.clock() - self.started
        if self.done >= self.total:
            when = f"took {format_duration(elapsed)}"
        elif self.done:
            when = f"ETA {format_duration(elapsed / self.done * (self.total - self.done))}"
        else:
            when = "ETA -"
        return f"eval: {self.done}/{self.total} runs, {self.passed} passed ({rate}), {when}"

    def finish(self) -> None:
        if self._drawn and self.in_place:
            self.stream.write("\n")
            self.stream.flush()

    def _draw(self, text: str) -> None:
        self.stream.write(f"\r{text}{ERASE_TO_END}" if self.in_place else f"{text}\n")
        self.stream.flush()
        self._drawn = True


def format_duration(seconds: float) -> str:
    """`42s`, `3m05s`, `2h07m`: short enough for one status line."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"
