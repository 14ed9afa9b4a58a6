"""Rebuilding a run in progress from its checkpoint journal, for resume_run: finished
steps, journaled tool results, attempts and a pending escalation or wait are replayed,
never re-run. Decoding the entries into the trace is runtime.trace.TraceBuilder's;
this module replays the walk's own state (where it continues, its committed state, its
model-call counts, its retry budget, the tool results to reuse)."""

from __future__ import annotations

from runtime.checkpoint import Entry
from runtime.journal import EscalatePayload, ToolPayload, WaitPayload
from runtime.trace import TraceBuilder
from runtime.walk import Walk


def replay_journal(walk: Walk, journal: list[Entry]) -> str | None:
    """Replay `journal` onto `walk` (a new walk of the run); the node the run continues
    at, None when the journal ends with the run's last step."""
    current: str | None = walk.pack.entry
    builder = TraceBuilder.onto(walk.trace, replayed=True)
    for entry in journal:
        payload = entry.payload
        before = len(walk.trace.attempts)
        step = builder.add(entry.kind, entry.node, entry.step, payload)
        if entry.kind == "tool":
            walk.pending_tools.setdefault((entry.node, entry.step), []).append(ToolPayload.from_payload(payload))
            continue
        if entry.kind not in ("wait", "escalate", "step"):
            continue
        for a in walk.trace.attempts[before:]:
            if a.stage not in ("reasoning", "lookahead"):  # a call made ahead and dropped numbers nothing
                walk.calls[a.node] = max(walk.calls.get(a.node, 0), a.attempt)
        walk.budget_left = payload.get("budget_left", walk.budget_left)
        if entry.kind == "wait":
            current = entry.node
            walk.waiting, walk.pending = WaitPayload.from_payload(entry.node, payload), None
        elif entry.kind == "escalate":
            walk.pending = EscalatePayload.from_payload(entry.node, entry.step, payload)
        elif step is not None:
            if step.status == "ok":
                walk.state.update(step.writes)
            walk.step = entry.step
            walk.waiting = walk.pending = None
            current = step.edge.target if step.edge else None
    walk.journaled = len(walk.trace.attempts)
    return current
