"""A small spec (classify a ticket, check the amount, route) and plan documents for it,
right and broken in known ways: the compile loop's and `packforge build`'s test subject."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SPEC_YAML = """\
name: triage
task: Classify a ticket and read the amount it disputes.
inputs:
  ticket: {description: The ticket., type: string}
outputs:
  category: {description: billing or other., type: string}
  amount_usd: {description: The disputed amount; null when none., type: number}
unsure_end: manual
budgets: {attempts: 5, planner_tokens: 1000, cost_usd: 3}
"""

GOLD = [
    {
        "id": "t1",
        "input": {"ticket": "Charged $20 twice"},
        "expected": {"category": "billing", "amount_usd": 20},
        "end": "billing",
    },
    {
        "id": "t2",
        "input": {"ticket": "The app crashes"},
        "expected": {"category": "other", "amount_usd": None},
        "end": "other",
    },
    {
        "id": "t3",
        "input": {"ticket": "Billing: $15 fee"},
        "expected": {"category": "billing", "amount_usd": 15},
        "end": "billing",
    },
    {
        "id": "t4",
        "input": {"ticket": "Password reset"},
        "expected": {"category": "other", "amount_usd": None},
        "end": "other",
    },
]


def plan_doc(check: str = "amount_usd == null or amount_usd < 500") -> dict[str, Any]:
    """classify -> check (an assert) -> billing / other; check's on_fail goes to manual."""
    return {
        "name": "triage",
        "summary": "classify, check the amount, route by category",
        "entry": "classify",
        "nodes": [
            {
                "id": "classify",
                "kind": "generate",
                "reads": ["input.ticket"],
                "writes": ["category", "amount_usd"],
                "instructions": "Classify the ticket and read the amount.",
            },
            {"id": "check", "kind": "assert", "reads": ["amount_usd"], "expr": check},
            {"id": "billing", "kind": "end"},
            {"id": "other", "kind": "end"},
            {"id": "manual", "kind": "end"},
        ],
        "edges": [
            {"from": "classify", "to": "check"},
            {"from": "check", "to": "billing", "when": "category == 'billing'"},
            {"from": "check", "to": "other"},
            {"from": "check", "on_fail": "manual"},
        ],
    }


RIGHT = plan_doc()
BROKEN = plan_doc("amount_usd == null or amount_usd < 18")  # rejects t1's gold amount: 3 of 4
WORSE = plan_doc("amount_usd == null")  # rejects t1 and t3: 2 of 4
INVALID = {**plan_doc(), "entry": "nowhere"}


def write_spec(root: Path) -> Path:
    """The triage spec folder at `root` (spec.yaml + gold.jsonl)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "spec.yaml").write_text(SPEC_YAML)
    (root / "gold.jsonl").write_text("".join(json.dumps(c) + "\n" for c in GOLD))
    return root
