"""What the review pages and the API show of an item: candidates under the rule for
rejected text (authors only, studio.redaction), the trace so far, the run's input."""

from __future__ import annotations

import json
from typing import Any

from studio.accounts.models import Role
from studio.redaction import sees_rejected_text, visible_trace
from studio.review.models import ReviewItem


def visible_candidates(item: ReviewItem, role: Role) -> list[dict[str, Any]]:
    """The item's candidates as `role` may see them: a rejected answer's text is for
    authors only (others see its tier, status and reason); each verified one says
    which disagreeing fields it holds."""
    shown = sees_rejected_text(role)
    out = []
    for c in item.candidates or []:
        row = dict(c)
        if row.get("status") == "rejected" and not shown:
            row["answer"] = None
            row["hidden"] = True
        answer = row.get("answer")
        row["answer_json"] = json.dumps(answer, ensure_ascii=False, indent=2) if answer is not None else ""
        row["differs"] = [f for f in item.disagreement if isinstance(answer, dict) and f in answer]
        out.append(row)
    return out


def trace_for(item: ReviewItem, role: Role) -> dict[str, Any]:
    """The run's trace so far, as `role` may read it; step candidates under the same rule."""
    trace = visible_trace(item.run.trace or {}, role)
    if sees_rejected_text(role):
        return trace
    steps = []
    for step in trace.get("steps") or []:
        cands = [
            {**c, "answer": None, "hidden": True} if c.get("status") == "rejected" else c
            for c in step.get("candidates") or []
        ]
        steps.append({**step, "candidates": cands})
    return {**trace, "steps": steps}


def pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)
