"""A two-level routing spec (department, then a sub-issue of that department) and a
target that gets the sub-issue right only when its grammar offers the department's own
sub-issues (keyed choices), for the hierarchy coordinate's tests
(tests/compiler/test_search_coordinates.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.support.tickets import asked_case, request_schema

SUBISSUES = {"billing": ("double_charge", "refund_status"), "shipping": ("late_delivery", "damaged_item")}
MESSAGE_ID = re.compile(r"msg-(\d{3})")


def routing_cases(n: int = 48) -> list[dict[str, Any]]:
    cases = []
    for i in range(n):
        department = "billing" if i % 2 == 0 else "shipping"
        subissue = SUBISSUES[department][(i // 2) % 2]
        text = f"msg-{i:03d}: a customer writes about {department}, {subissue.replace('_', ' ')}"
        cases.append(
            {
                "id": f"r{i:03d}",
                "input": {"message": text},
                "expected": {"department": department, "subissue": subissue},
            }
        )
    return cases


def write_routing_spec(root: Path, cases: list[dict[str, Any]]) -> Path:
    root.mkdir(parents=True)
    allowed = " or ".join(
        f"(department == '{d}' and subissue in [{', '.join(repr(s) for s in subs)}])" for d, subs in SUBISSUES.items()
    )
    values = [s for subs in SUBISSUES.values() for s in subs]
    (root / "spec.yaml").write_text(
        "name: routing\n"
        "task: Route one customer message to its department, then to a sub-issue of that department.\n"
        "inputs:\n  message: {description: The customer's message.}\n"
        "outputs:\n"
        "  department: {description: The department., values: [billing, shipping]}\n"
        f"  subissue: {{description: The sub-issue of the department., values: [{', '.join(values)}]}}\n"
        "rules:\n"
        "  - text: The sub-issue is one of the department's.\n"
        f'    expr: "{allowed}"\n'
    )
    (root / "gold.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    return root


class KeyedTarget:
    """Right on the department always; right on the sub-issue only when the grammar it is
    sent allows at most the department's own sub-issues, else the first sub-issue it
    allows of the other department (which the spec's rule rejects)."""

    def __init__(self, cases: list[dict[str, Any]]) -> None:
        self.gold = {int(c["id"][1:]): c["expected"] for c in cases}
        self.requests: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> str:
        self.requests.append(body)
        schema = request_schema(body) or {}
        props = schema.get("properties") or {}
        found = asked_case(body, MESSAGE_ID)
        expected = self.gold[found] if found is not None else {"department": "billing", "subissue": "double_charge"}
        answer: dict[str, Any] = {}
        for name, prop in props.items():
            if name != "subissue":
                answer[name] = expected.get(name)
                continue
            allowed = list(prop.get("enum") or [])
            own = SUBISSUES[expected["department"]]
            if allowed and set(allowed) <= set(own):
                answer[name] = expected["subissue"]
            else:
                answer[name] = next((s for s in allowed if s not in own), allowed[0] if allowed else None)
        return json.dumps(answer)
