"""Rebuilding a run in progress from its checkpoint journal, for resume_run: finished
steps, journaled tool results, attempts and a pending escalation or wait are replayed,
never re-run."""

from __future__ import annotations

from typing import Any

from runtime.checkpoint import Entry
from runtime.trace import Attempt, EdgeTaken, Step, ToolCall
from runtime.walk import Walk


def replay_journal(walk: Walk, journal: list[Entry]) -> str | None:
    current: str | None = walk.pack.entry
    for entry in journal:
        payload = entry.payload
        if entry.kind == "tool":
            walk.pending_tools.setdefault((entry.node, entry.step), []).append(payload)
            walk.trace.tool_calls.append(
                ToolCall(
                    entry.node,
                    entry.step,
                    payload["tool"],
                    payload["args"],
                    payload["result"],
                    payload["latency_s"],
                    replayed=True,
                    key=payload.get("key"),
                )
            )
        elif entry.kind == "wait":
            current = entry.node
            replay_attempts(walk, payload)
            walk.waiting, walk.pending = {**payload, "node": entry.node}, None
        elif entry.kind == "escalate":
            replay_attempts(walk, payload)
            walk.pending = {**payload, "node": entry.node, "step": entry.step}
        elif entry.kind == "step":
            step = step_from(payload)
            walk.trace.steps.append(step)
            replay_attempts(walk, payload)
            if step.status == "ok":
                walk.state.update(step.writes)
            walk.step = entry.step
            walk.waiting = walk.pending = None
            current = step.edge.target if step.edge else None
    walk.journaled = len(walk.trace.attempts)
    return current


def replay_attempts(walk: Walk, payload: dict[str, Any]) -> None:
    for a in payload.get("attempts", []):
        walk.trace.attempts.append(Attempt(**a))
        if a["stage"] != "reasoning":
            walk.calls[a["node"]] = max(walk.calls.get(a["node"], 0), a["attempt"])
    walk.budget_left = payload.get("budget_left", walk.budget_left)


def step_from(payload: dict[str, Any]) -> Step:
    edge = payload["edge"]
    fields = {k: v for k, v in payload.items() if k not in ("attempts", "edge", "budget_left")}
    return Step(**fields, edge=EdgeTaken(**edge) if edge else None, replayed=True)
