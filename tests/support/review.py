"""Review queue test data (tests/studio/review/): a support_triage run waiting for a
person at `extract`, escalated past its only tier, with the answers that tier gave."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

SCRIPT = settings.EXAMPLE_PACKS / "support_triage" / "fakes" / "scripted.json"
TICKET = json.loads(SCRIPT.read_text())["inputs"][0]["match"]["ticket"]
GOOD = {"order_id": "ORD-48213", "amount_usd": 59.98}

CANDIDATES: list[dict[str, Any]] = [
    {
        "tier": "small",
        "answer": {"order_id": "ORD-48213", "amount_usd": 5998},
        "status": "unsure",
        "reason": "draws disagreed",
    },
    {"tier": "small", "answer": GOOD, "status": "unsure", "reason": "draws disagreed"},
    {
        "tier": "small",
        "answer": {"order_id": "<b>ORD-9</b>"},
        "status": "rejected",
        "reason": "schema: order_id does not match",
    },
]


def waiting_trace(candidates: list[dict[str, Any]]) -> dict[str, Any]:
    """The trace of a run that committed `classify` and waits at `extract`."""
    return {
        "version": 3,
        "run_id": "served1",
        "pack": "support_triage",
        "status": "waiting",
        "ladder": ["small"],
        "steps": [
            {
                "node": "classify",
                "step": 1,
                "kind": "generate",
                "status": "ok",
                "writes": {"category": "billing"},
                "edge": {"index": 0, "kind": "next", "target": "extract"},
                "tier": "small",
                "candidates": [],
                "escalations": [],
            },
            {
                "node": "extract",
                "step": 2,
                "kind": "generate",
                "status": "wait",
                "reason": "escalated",
                "prompt": "Copy two facts out of this support ticket.",
                "edge": None,
                "escalations": [
                    {"from": "small", "to": "person", "reason": "fail: every answer rejected", "node": "extract"}
                ],
                "candidates": candidates,
            },
        ],
        "attempts": [],
        "tool_calls": [],
    }
