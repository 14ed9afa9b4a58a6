"""The offline test model: each gold case's answers are its expected values, and the gates
gold sends off the happy path give way by the node's own mechanism."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compiler import Spec, load_spec, offline_script, parse_plan
from compiler.offline import NOT_JSON
from runtime import BackendError, evaluate, load_pack, load_tools, open_backend
from runtime.backends.base import ModelCall
from tests.support.packplans import plan_from_pack

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ["invoice_extract", "lead_qualifier", "moderation", "refund_desk", "support_triage"]

SPEC_YAML = """\
name: triage
task: Classify a ticket and read the amount it disputes.
inputs:
  ticket: {description: The ticket., type: string}
outputs:
  category: {description: billing or other., type: string}
  amount_usd: {description: The disputed amount; null when none., type: number}
unsure_end: manual
"""

GOLD = [
    {
        "id": "t1",
        "input": {"ticket": "I was charged $20 twice"},
        "expected": {"category": "billing", "amount_usd": 20},
        "end": "billing",
    },
    {
        "id": "t2",
        "input": {"ticket": "The app crashes"},
        "expected": {"category": "other", "amount_usd": None},
        "end": "other",
    },
    {"id": "t3", "input": {"ticket": "Refund my $900 now"}, "expected": {}, "end": "manual"},
    {
        "id": "t4",
        "input": {"ticket": "Billing question, $15"},
        "expected": {"category": "billing", "amount_usd": 15},
        "end": "billing",
    },
]


def write_spec(root: Path, gold: list[dict[str, Any]] = GOLD) -> Spec:
    root.mkdir(parents=True, exist_ok=True)
    (root / "spec.yaml").write_text(SPEC_YAML)
    (root / "gold.jsonl").write_text("".join(json.dumps(c) + "\n" for c in gold))
    return load_spec(root)


def triage_plan(classify: dict[str, Any] | None = None, gate: str = "on_fail") -> dict[str, Any]:
    """classify -> check (amount < 500) -> billing / other; failures go to manual."""
    node = {
        "id": "classify",
        "kind": "generate",
        "reads": ["input.ticket"],
        "writes": ["category", "amount_usd"],
        "instructions": "Classify.",
    }
    node.update(classify or {})
    return {
        "name": "triage",
        "summary": "classify, check, route",
        "entry": "classify",
        "nodes": [
            node,
            {
                "id": "check",
                "kind": "assert",
                "reads": ["amount_usd"],
                "expr": "amount_usd == null or amount_usd < 500",
            },
            {"id": "billing", "kind": "end"},
            {"id": "other", "kind": "end"},
            {"id": "manual", "kind": "end"},
        ],
        "edges": [
            {"from": "classify", "to": "check"},
            {"from": "classify", gate: "manual"},
            {"from": "check", "to": "billing", "when": "category == 'billing'"},
            {"from": "check", "to": "other"},
        ],
    }


def test_it_answers_each_case_with_its_expected_values(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "spec")
    script = offline_script(parse_plan(triage_plan(), spec), spec)
    assert script["cases"]["t1"]["classify"] == {"category": "billing", "amount_usd": 20}
    assert script["cases"]["t2"]["classify"] == {"category": "other", "amount_usd": None}
    assert script["cases"]["t4"]["classify"] == {"category": "billing", "amount_usd": 15}
    assert "notes" not in script


def test_it_answers_the_gold_cases_only(tmp_path: Path) -> None:
    """No `nodes` defaults: a pack deployed on its offline script fails a real input,
    saying so, instead of answering it with a gold case's answer."""
    spec = write_spec(tmp_path / "spec")
    script = offline_script(parse_plan(triage_plan(), spec), spec)
    assert "nodes" not in script and sorted(script["cases"]) == ["t1", "t2", "t3", "t4"]
    path = tmp_path / "offline.json"
    path.write_text(json.dumps(script))
    model = open_backend(f"fake:{path}")
    gold = ModelCall("r", "classify", 1, [], None, case_id="t1", input=GOLD[0]["input"])
    assert json.loads(model.complete(gold).text) == {"category": "billing", "amount_usd": 20}
    real = ModelCall("r", "classify", 1, [], None, input={"ticket": "Where is my parcel?"})
    with pytest.raises(BackendError, match="matches none of its 4 cases; a scripted model only answers the inputs"):
        model.complete(real)


def test_it_makes_a_gate_with_only_on_fail_answer_what_no_parser_accepts(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "spec")
    script = offline_script(parse_plan(triage_plan(), spec), spec)
    assert script["cases"]["t3"]["classify"] == NOT_JSON


def test_it_makes_sampled_draws_disagree(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "spec")
    plan = parse_plan(triage_plan({"samples": 3, "agree": 2}, gate="on_unsure"), spec)
    draws = offline_script(plan, spec)["cases"]["t3"]["classify"]
    assert isinstance(draws, list) and len(draws) == 3
    assert all(draws.count(d) < 2 for d in draws)


def test_it_makes_a_confidence_gate_unsure_with_low_probabilities(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "spec")
    gate = {"confidence": {"field": "category", "min": 0.8}}
    plan = parse_plan(triage_plan(gate, gate="on_unsure"), spec)
    script = offline_script(plan, spec)
    assert script["cases"]["t3"]["classify"]["$probs"]["category"] < 0.8
    assert script["cases"]["t1"]["classify"]["$probs"]["category"] == 1.0


def test_it_breaks_an_assert_through_the_node_that_wrote_its_reads(tmp_path: Path) -> None:
    gold = [*GOLD[:2], {**GOLD[2], "path": ["classify", "check", "manual"]}, GOLD[3]]
    spec = write_spec(tmp_path / "spec", gold)
    doc = triage_plan()
    doc["edges"].append({"from": "check", "on_fail": "manual"})
    doc["edges"] = [e for e in doc["edges"] if e != {"from": "classify", "on_fail": "manual"}]
    answer = offline_script(parse_plan(doc, spec), spec)["cases"]["t3"]["classify"]
    assert answer["amount_usd"] >= 500


def test_it_notes_a_case_it_cannot_express(tmp_path: Path) -> None:
    gold = [*GOLD[:2], {**GOLD[2], "path": ["classify", "check", "manual"]}, GOLD[3]]
    spec = write_spec(tmp_path / "spec", gold)
    doc = triage_plan()
    doc["nodes"][1] = {"id": "check", "kind": "assert", "reads": ["input.ticket"], "expr": "len(input.ticket) > 0"}
    doc["edges"] = [e for e in doc["edges"] if e != {"from": "classify", "on_fail": "manual"}]
    doc["edges"].append({"from": "check", "on_fail": "manual"})
    script = offline_script(parse_plan(doc, spec), spec)
    assert "t3" in script["notes"]
    assert "check" in script["notes"]["t3"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_it_passes_every_case_of_an_example_pack_on_its_own_graph(name: str, tmp_path: Path) -> None:
    spec = load_spec(ROOT / "specs" / name)
    script = offline_script(parse_plan(plan_from_pack(ROOT / "packs" / name), spec), spec)
    (tmp_path / "offline.json").write_text(json.dumps(script))
    tools_file = ROOT / "packs" / name / "tools.py"
    tools = load_tools(f"{tools_file}:registry") if tools_file.exists() else None
    report = evaluate(load_pack(ROOT / "packs" / name), open_backend(f"fake:{tmp_path / 'offline.json'}"), tools=tools)
    failed = [(c.case_id, c.blamed, [str(p) for p in c.problems]) for c in report.cases if not c.passed]
    assert failed == []
    assert "notes" not in script
