"""Recorded tool results in the studio's evals (docs/tools.md, "Recorded tool results"):
an eval started with "record tool results" keeps every tool call its cases make (each
case's calls on its row while it runs, the whole tape on the Eval when it ends); one
started with "replay tools from eval #N" copies that tape and answers every tool call
from it, calling no tool, each case whose calls leave it `diverged`.

The runtime does the work (runtime.recordings.ToolTape, the hook in Walk.call_tool);
this module only chooses the tape, gathers counts and stores them."""

from __future__ import annotations

import json
from typing import Any

from django.db.models import Count, Q, Sum

from runtime import RunResult, RunTape, ToolTape
from studio.errors import Refused
from studio.evals.models import Eval, EvalCase

__all__ = [
    "RECORD",
    "REPLAY",
    "case_fields",
    "divergences_in",
    "hook_for",
    "replay_source",
    "replay_tape",
    "tape_of",
    "tools_summary",
]

RECORD, REPLAY = "record", "replay"
DIVERGED_MARK = "diverged from the recording"  # runtime.walker's reason for a `diverged` ToolOutcome


class RecordingRefused(Refused):
    """The eval cannot replay what was asked; the message says why."""


def replay_source(project_id: int, ref: Eval | int | str) -> Eval:
    """The finished recording eval of this project a new eval may replay."""
    source = ref if isinstance(ref, Eval) else Eval.objects.filter(pk=int(ref), project_id=project_id).first()
    if source is None or source.project_id != project_id:
        raise RecordingRefused(f"no eval #{ref} in this project to replay tool results from")
    if source.tools_mode != RECORD:
        raise RecordingRefused(f"eval #{source.pk} did not record its tool results; start one with record_tools")
    if source.status != Eval.Status.DONE:
        raise RecordingRefused(f"eval #{source.pk} is {source.status}; replay a recording once its eval is done")
    return source


def replay_tape(ev: Eval) -> ToolTape | None:
    """The tape a replaying eval answers from (parsed once per worker runner)."""
    if ev.tools_mode != REPLAY:
        return None
    return ToolTape.from_jsonl(ev.tape, REPLAY, name=f"eval {ev.pk}'s tool recording")


def hook_for(ev: Eval, replaying: ToolTape | None) -> RunTape | None:
    """One case run's hook (RunOptions.tape): into a fresh tape of its own when
    recording, onto the eval's replay tape when replaying, None otherwise."""
    if ev.tools_mode == RECORD:
        return ToolTape(RECORD).for_run()
    if ev.tools_mode == REPLAY and replaying is not None:
        return replaying.for_run()
    return None


def divergences_in(result: RunResult) -> list[str]:
    """The divergences a run's trace shows (the failed steps' reasons): what a delivery
    that resumed the run after a kill knows of the calls the killed one diverged on."""
    return [s.reason for s in result.trace.steps if s.status == "fail" and DIVERGED_MARK in s.reason]


def case_fields(ev: Eval, hook: RunTape | None, result: RunResult) -> dict[str, Any]:
    """The EvalCase columns of a finished run's tool calls: live and replayed counts,
    the divergences (when replaying) and the calls it made (when recording)."""
    calls = result.trace.tool_calls
    replayed = sum(1 for c in calls if c.replayed)
    fields: dict[str, Any] = {"tool_live": len(calls) - replayed, "tool_replayed": replayed}
    if ev.tools_mode == REPLAY:
        seen = list(hook.divergences) if hook is not None else []
        fields["diverged"] = seen + [r for r in divergences_in(result) if not any(s in r for s in seen)]
    if ev.tools_mode == RECORD and hook is not None:
        hook.tape.record_trace(result.trace)  # calls journaled by a delivery killed before this one
        fields["tape"] = [c.to_dict() for c in hook.tape.calls()]
    return fields


def tape_of(ev: Eval) -> str:
    """A recording eval's whole tape, JSONL (from its cases' rows), when it ends."""
    rows = EvalCase.objects.filter(eval=ev).order_by("repeat", "pk").values_list("tape", flat=True)
    lines = "".join(json.dumps(call) + "\n" for calls in rows.iterator() for call in calls or [])
    # one tape: the first run of a case to make a call at an index keeps it (repeats)
    return ToolTape.from_jsonl(lines, RECORD, name=f"eval {ev.pk}'s cases").to_jsonl()


def tools_summary(ev: Eval) -> dict[str, Any]:
    """Tool calls made live and replayed over the eval's finished cases, the calls
    recorded, and the diverged cases (id, repeat, reasons)."""
    got = EvalCase.objects.filter(eval=ev).aggregate(
        live=Sum("tool_live"), replayed=Sum("tool_replayed"), diverged=Count("pk", filter=Q(status="diverged"))
    )
    diverged = list(
        EvalCase.objects.filter(eval=ev, status=EvalCase.Status.DIVERGED)
        .order_by("case_id", "repeat")
        .values("case_id", "repeat", "diverged")[:200]
    )
    recorded = sum(1 for line in ev.tape.splitlines() if line.strip()) if ev.tape else 0
    return {
        "mode": ev.tools_mode or "live",
        "from": ev.tools_from_id,
        "live": int(got["live"] or 0),
        "replayed": int(got["replayed"] or 0),
        "recorded": recorded,
        "diverged": int(got["diverged"] or 0),
        "diverged_cases": [{"id": d["case_id"], "repeat": d["repeat"], "reasons": d["diverged"]} for d in diverged],
    }
