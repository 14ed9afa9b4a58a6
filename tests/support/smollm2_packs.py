"""A routing pack for the tests against SmolLM2 on llama-server (tests/endpoints): a
`department` node (and a `subissue` one whose choices depend on it), its system prompt,
grammars, labels and few-shot examples, written in plain sight."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.support.model_servers import RunningServer

DEPARTMENTS = ["billing", "shipping", "technical", "account"]
SUBISSUES = {
    "billing": ["double_charge", "refund_status", "invoice_request"],
    "shipping": ["late_delivery", "damaged_item", "wrong_item"],
    "technical": ["app_crash", "login_problem"],
    "account": ["password_reset", "close_account"],
}
DEPARTMENT_SCHEMA = {
    "type": "object",
    "properties": {"department": {"type": "string", "enum": DEPARTMENTS}},
    "required": ["department"],
    "additionalProperties": False,
}
SUBISSUE_SCHEMA = {
    "type": "object",
    "properties": {"subissue": {"type": "string", "enum": sorted({s for v in SUBISSUES.values() for s in v})}},
    "required": ["subissue"],
    "additionalProperties": False,
}
SYSTEM = (
    "You route customer messages of an online shop to a department: billing (charges, refunds), "
    "shipping (parcels), technical (the app is broken), account (passwords, closing the account). "
    "Answer with one JSON object."
)
EXAMPLES = [
    {"id": "ex-1", "input": {"message": "I was charged twice for one order."}, "expected": {"department": "billing"}},
    {
        "id": "ex-2",
        "input": {"message": "The parcel arrived with a broken lid."},
        "expected": {"department": "shipping"},
    },
    {"id": "ex-3", "input": {"message": "The app crashes when I open it."}, "expected": {"department": "technical"}},
]


def smol_spec(server: RunningServer, options: str = "") -> str:
    return f"openai:{server.base_url}#smollm2" + (f";{options}" if options else "")


def write_pack(root: Path, nodes: dict[str, Any], edges: list[dict[str, Any]], **manifest: Any) -> Path:
    """A routing pack in plain sight: `department` (and `subissue` when `nodes` has it)."""
    for folder in ("prompts", "grammars", "labels"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "manifest.yaml").write_text(
        yaml.safe_dump({"name": "routing", "version": "1", "entry": "department", "inputs": ["message"], **manifest})
    )
    (root / "graph.yaml").write_text(yaml.safe_dump({"nodes": nodes, "edges": edges}, sort_keys=False))
    (root / "system.txt").write_text(SYSTEM + "\n")
    (root / "prompts" / "department.txt").write_text("Message: {{ input.message }}\nDepartment?\n")
    (root / "prompts" / "subissue.txt").write_text(
        "Message: {{ input.message }}\nDepartment: {{ department }}\nSub-issue?\n"
    )
    (root / "grammars" / "department.json").write_text(json.dumps(DEPARTMENT_SCHEMA))
    (root / "grammars" / "subissue.json").write_text(json.dumps(SUBISSUE_SCHEMA))
    (root / "labels" / "subissues.yaml").write_text(yaml.safe_dump(SUBISSUES))
    (root / "examples.jsonl").write_text("".join(json.dumps(e) + "\n" for e in EXAMPLES))
    return root


def department_node(**extra: Any) -> dict[str, Any]:
    return {"kind": "generate", "reads": ["input.message"], "writes": ["department"], "max_tokens": 32, **extra}


ONE_NODE_EDGES = [{"from": "department", "to": "done"}, {"from": "department", "on_fail": "escalate"}]
ENDS = {"done": {"kind": "end"}, "escalate": {"kind": "end"}}
