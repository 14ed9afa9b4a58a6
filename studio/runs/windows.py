"""A window of a try-it run's trace, as its API answer and its page show it.

A run's answer and page carry at most STEPS_PER_ANSWER steps (with their attempts and
tool calls) from `steps_from`. The stored trace is one JSON value: reading a window
means parsing all of it, 6 MB for a 10,000-step loop, about 85 ms of a web process
(with the interpreter lock held) for every poll, four polls a second from one page;
that was what slowed other users' requests in the noisy-neighbour benchmark. So the
windows are cached in each process, keyed by the run's `trace_rev` (bumped with every
write of the trace, studio.runs.worker): a poll of an unchanged trace reads one
integer from the database, and the whole trace is parsed once per write, not per poll."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from studio.kept import Kept
from studio.runs.models import TryRun

STEPS_PER_ANSWER = 200
CACHED_WINDOWS = 64  # per process; a window is at most STEPS_PER_ANSWER steps

# (run pk, its created_at, trace_rev, steps_from): the creation time keeps a run apart
# from an earlier one of the same number (a test database rolled back reuses numbers).
Key = tuple[int, float, int, int]


@dataclass(frozen=True)
class Window:
    trace: dict[str, Any]  # the stored trace cut to the window's steps (rejected text included)
    steps_total: int
    steps_from: int
    next_steps_from: int | None  # None: the window reaches the last step


def window(trace: dict[str, Any], start: int, count: int = STEPS_PER_ANSWER) -> tuple[dict[str, Any], int | None]:
    """`trace` with only steps[start:start + count], the attempts and tool calls of those
    steps (by step number; on the last window also those of a step the run stopped
    inside), and their path and escalations; and the index the next window starts at
    (None: this is the last)."""
    every = trace.get("steps") or []
    if start == 0 and len(every) <= count:
        return trace, None
    shown = every[start : start + count]
    last = start + count >= len(every)

    def number(step: Any) -> int:
        return int(step.get("step") or 0) if isinstance(step, dict) else 0

    low = number(shown[0]) if shown else (number(every[-1]) + 1 if every else 0)
    high = None if last else number(every[start + count])

    def inside(item: Any) -> bool:
        at = number(item)
        return at >= low and (high is None or at < high)

    cut = {
        **trace,
        "steps": shown,
        "attempts": [a for a in trace.get("attempts") or [] if inside(a)],
        "tool_calls": [c for c in trace.get("tool_calls") or [] if inside(c)],
    }
    # The keys derived from every step (runtime Trace.path, .escalations) follow the
    # window too; the run's totals and tool counters stay whole (their size is fixed).
    if "path" in trace:
        cut["path"] = (trace.get("path") or [])[start : start + count]
    if "escalations" in trace:
        cut["escalations"] = [e for s in shown if isinstance(s, dict) for e in s.get("escalations") or []]
    return cut, None if last else start + count


_windows: Kept[Key, Window] = Kept(lambda: CACHED_WINDOWS)


def trace_window(run: TryRun, start: int = 0) -> Window:
    """The window of `run`'s trace from step index `start`. `run` may have been loaded
    without its trace (`run_for(..., trace=False)`): the trace is read and parsed only
    when this process holds no window of the run's current `trace_rev`. The trace and
    its revision are read together, so a window is never cached under a newer trace's
    revision than its own."""
    born = run.created_at.timestamp()
    got = _windows.get((run.pk, born, run.trace_rev, start))
    if got is not None:
        return got
    row = TryRun.objects.filter(pk=run.pk).values_list("trace", "trace_rev").first()
    trace, rev = row if row is not None else ({}, run.trace_rev)
    trace = trace or {}
    cut, following = window(trace, start)
    got = Window(cut, len(trace.get("steps") or []), start, following)
    _windows.put((run.pk, born, rev, start), got)
    return got
