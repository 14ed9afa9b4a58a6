"""A try-it or served run's trace as the run pages show it: one row per step, with its
attempts, tool calls and totals (`trace_steps`), and the run's totals (`totals`)."""

from __future__ import annotations

import json
from typing import Any

from runtime import NODE_KINDS

_ATTEMPT_KEYS = (
    "attempt",
    "stage",
    "ok",
    "hidden",
    "category",
    "reason",
    "text",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "latency_s",
    "ttft_s",
    "cost_usd",
    "request_id",  # the X-Request-ID the call sent (run.node.attempt), shown on the run page
    "given",  # a quorum's later draw (sure_fields): the first draw's settled values it was completed with
)


def trace_steps(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """A trace dict (as studio.redaction.visible_trace shows it), one row per step: node,
    status, writes, edge, every attempt (with its rejection category and reason, tokens,
    latency) and tool calls. Attempts of a step that never committed (the run stopped
    inside it) are a last row with status `stopped`."""
    attempts: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for a in trace.get("attempts") or []:
        attempts.setdefault((a.get("node"), a.get("step")), []).append({k: a[k] for k in _ATTEMPT_KEYS if k in a})
    tools: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for c in trace.get("tool_calls") or []:
        tools.setdefault((c.get("node"), c.get("step")), []).append(
            {k: c.get(k) for k in ("tool", "args", "result", "latency_s")}
        )
    rows = []
    for s in trace.get("steps") or []:
        key = (s.get("node"), s.get("step"))
        edge = s.get("edge")
        row = {k: s.get(k) for k in ("step", "node", "kind", "status", "writes", "attempt", "reason", "prompt")}
        row["edge"] = {"kind": edge["kind"], "target": edge["target"]} if edge else None
        rows.append(_with_totals(row, attempts.pop(key, []), tools.pop(key, [])))
    for (node, step), rest in attempts.items():
        row = {"step": step, "node": node, "kind": "", "status": "stopped", "writes": {}, "edge": None}
        rows.append(_with_totals(row, rest, tools.pop((node, step), [])))
    return rows


def _with_totals(row: dict[str, Any], attempts: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        **row,
        "attempts": attempts,
        "tool_calls": tools,
        "prompt_tokens": sum(a.get("prompt_tokens") or 0 for a in attempts),
        "completion_tokens": sum(a.get("completion_tokens") or 0 for a in attempts),
        "latency_s": round(sum(a.get("latency_s") or 0.0 for a in attempts), 4),
        "cost_usd": sum(a.get("cost_usd") or 0.0 for a in attempts),
    }


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def for_page(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`trace_steps` rows readied for runs/_steps.html: what a person reads in each step is
    a question (a human node) or a prompt, and writes and tool calls as formatted JSON."""
    for step in steps:
        kind = NODE_KINDS.get(step.get("kind") or "")
        step["prompt_label"] = "question" if kind is not None and kind.waits else "prompt"
        step["writes_json"] = pretty(step.get("writes") or {})
        for call in step.get("tool_calls", []):
            call["args_json"], call["result_json"] = pretty(call.get("args")), pretty(call.get("result"))
        for attempt in step.get("attempts", []):
            add_given_json(attempt)
    return steps


def add_given_json(attempt: dict[str, Any]) -> None:
    """A quorum's later draw (`sure_fields`) was completed with the first draw's settled
    values: `given_json` is them as runs/_given.html shows them. Nothing where there are
    none, or where studio.redaction withheld them (None) with a rejected draw's text."""
    if attempt.get("given"):
        attempt["given_json"] = json.dumps(attempt["given"], ensure_ascii=False, sort_keys=True, default=str)


def totals(steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "steps": len(steps),
        "model_calls": sum(len(s.get("attempts", [])) for s in steps),
        "rejected": sum(1 for s in steps for a in s.get("attempts", []) if not a.get("ok")),
        "prompt_tokens": sum(s.get("prompt_tokens", 0) for s in steps),
        "completion_tokens": sum(s.get("completion_tokens", 0) for s in steps),
        "latency_s": round(sum(s.get("latency_s", 0.0) for s in steps), 3),
        "cost_usd": sum(s.get("cost_usd", 0.0) for s in steps),
    }
