"""A spec whose output is compared by a host scorer, and a target model that only a scorer
can pass, for the compile-with-scorers tests (tests/compiler/test_scorers.py,
tests/studio/compiles/test_scorers.py).

The spec reads an invoice and writes its `line_items`, compared by the example registry's
`line_items` scorer (packs/invoice_extract/scorers.py: descriptions compared as text,
amounts within `amount_tolerance`). The target (`fake:` script, by input) answers every
invoice's items as a careless reader would: descriptions upper-cased without their
punctuation and amounts a tenth of a cent off. Under `compare: exact` no case passes;
under the scorer every case does. The recorded plan's own `fields:` says `exact` for
the field, which the spec's scorer rule must outrank."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.support.scorers import EXAMPLE

SCORERS_REF = EXAMPLE  # MODULE:SCORERS, as --scorers takes it (registers `line_items`)
NODE = "extract"  # the recorded plan's one generate node
ONE_CALL = "answer"  # compiler.one_call's node: the target answers it wrongly, so the pack wins
SCORER_RULE = {"compare": "scorer:line_items", "options": {"amount_tolerance": 0.01}, "pass": 0.9}
SCORER_YAML = "    compare: scorer:line_items\n    options: {amount_tolerance: 0.01}\n    pass: 0.9\n"
GOODS = ("Gel pens, black", "A4 paper (5 reams)", "Stapler; heavy duty", "Desk lamp, LED", "Toner: cyan", "Mouse pad")


def spec_yaml(compare: str = SCORER_YAML) -> str:
    return (
        "name: invoice_items\n"
        "task: List the line items an invoice charges, in the order printed.\n"
        "inputs:\n  invoice: {description: The invoice's text., type: string}\n"
        "outputs:\n"
        "  line_items:\n"
        "    description: Each charged line - description, quantity and amount.\n"
        "    type: array\n" + compare
    )


def gold_cases(n: int = 16) -> list[dict[str, Any]]:
    cases = []
    for i in range(n):
        items = [
            {
                "description": f"{GOODS[(i + k) % len(GOODS)]}, batch {3 * i + k}",  # free text: no enum is induced
                "quantity": 1 + (i + k) % 4,
                "amount": round(3.5 + i + k, 2),
            }
            for k in range(1 + i % 3)
        ]
        lines = "\n".join(f"  {it['description']}  x{it['quantity']}  ${it['amount']:.2f}" for it in items)
        text = f"INVOICE INV-{i:03d}\n{lines}\n"
        cases.append({"id": f"inv-{i:02d}", "input": {"invoice": text}, "expected": {"line_items": items}})
    return cases


def write_spec(root: Path, cases: list[dict[str, Any]], compare: str = SCORER_YAML) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "spec.yaml").write_text(spec_yaml(compare))
    (root / "gold.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    return root


def plan_document() -> dict[str, Any]:
    return {
        "name": "invoice_items",
        "summary": "One extraction node reads the invoice and writes its line items.",
        "entry": NODE,
        "fields": {"line_items": {"compare": "exact"}},
        "nodes": [
            {
                "id": NODE,
                "kind": "generate",
                "description": "Read the invoice's line items.",
                "reads": ["input.invoice"],
                "writes": ["line_items"],
                "instructions": "List every line item of the invoice: description, quantity and amount.",
            },
            {"id": "done", "kind": "end"},
        ],
        "edges": [{"from": NODE, "to": "done"}],
    }


def write_plan(path: Path) -> Path:
    path.write_text(json.dumps(plan_document(), indent=2))
    return path


def careless(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items as the target reads them: equal under the scorer, never under exact."""
    return [
        {
            "description": re.sub(r"[^\w\s]", "", it["description"]).upper(),
            "quantity": it["quantity"],
            "amount": round(it["amount"] + 0.001, 3),
        }
        for it in items
    ]


def write_target(path: Path, cases: list[dict[str, Any]]) -> str:
    """A `fake:` target (by input): the plan's node reads every case carelessly, the
    one-call node answers no item at all. Returns its model spec."""
    inputs = [
        {
            "match": c["input"],
            "answers": {NODE: {"line_items": careless(c["expected"]["line_items"])}, ONE_CALL: {"line_items": []}},
        }
        for c in cases
    ]
    path.write_text(json.dumps({"inputs": inputs}))
    return f"fake:{path}"
