"""The plan document: PLAN_SCHEMA is a JSON schema that accepts the recorded plans, and
parse_plan reports every problem at once, each at its JSON path."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from compiler import PLAN_SCHEMA, CompilerError, Plan, PlanEdge, PlanInvalid, PlanNode, load_spec, parse_plan

ROOT = Path(__file__).resolve().parents[2]
RECORDED = sorted(ROOT.glob("specs/*/plans/*.json"))


def refund_plan() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((ROOT / "specs/refund_desk/plans/1.json").read_text())
    return doc


def small_plan() -> dict[str, Any]:
    return {
        "name": "triage",
        "summary": "Classify, then route.",
        "entry": "classify",
        "nodes": [
            {
                "id": "classify",
                "kind": "generate",
                "reads": ["input.ticket"],
                "writes": ["category", "amount_usd"],
                "instructions": "Pick the category.",
                "assert": "amount_usd == null or amount_usd >= 0",
            },
            {
                "id": "check",
                "kind": "assert",
                "reads": ["amount_usd"],
                "expr": "amount_usd == null or amount_usd < 500",
            },
            {"id": "billing", "kind": "end"},
            {"id": "other", "kind": "end", "output": ["category"]},
            {"id": "manual", "kind": "end"},
        ],
        "edges": [
            {"from": "classify", "to": "check"},
            {"from": "classify", "on_fail": "manual"},
            {"from": "check", "to": "billing", "when": "category == 'billing'"},
            {"from": "check", "to": "other"},
            {"from": "check", "on_fail": "manual"},
        ],
    }


def problems_of(doc: Any, spec: Any = None) -> list[str]:
    with pytest.raises(PlanInvalid) as info:
        parse_plan(doc, spec)
    assert isinstance(info.value, CompilerError)
    return info.value.problems


def test_it_is_itself_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(PLAN_SCHEMA)
    assert "oneOf" not in json.dumps(PLAN_SCHEMA)
    assert "anyOf" not in json.dumps(PLAN_SCHEMA)


def test_it_has_recorded_plans_to_check() -> None:
    assert RECORDED, "specs/*/plans/*.json"


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: f"{p.parts[-3]}/{p.name}")
def test_it_accepts_the_recorded_plans(path: Path) -> None:
    doc = json.loads(path.read_text())
    jsonschema.Draft202012Validator(PLAN_SCHEMA).validate(doc)
    spec = load_spec(path.parents[1])
    plan = parse_plan(doc, spec)
    assert plan.name == spec.name
    assert plan.document == doc


def test_it_builds_the_plan_objects() -> None:
    plan = parse_plan(refund_plan(), load_spec(ROOT / "specs/refund_desk"))
    assert isinstance(plan, Plan)
    assert plan.entry == "intent"
    assert [n.id for n in plan.nodes][:3] == ["intent", "lookup", "approve"]
    approve = plan.node("approve")
    assert isinstance(approve, PlanNode)
    assert (approve.kind, approve.samples, approve.agree, approve.two_stage) == ("generate", 3, 2, False)
    assert approve.assert_ is not None and approve.assert_.startswith("(decision == 'approve'")
    assert plan.node("lookup").args == {"order_id": "order_id"}
    assert plan.node("check_amount").expr is not None
    assert plan.node("refunded").output == ("intent", "order_id", "decision", "refund_usd", "refund_id")
    assert plan.node("no_order").output == ("intent", "order_id")
    assert plan.edges[0] == PlanEdge(
        source="intent", to="lookup", when="intent == 'refund' and order_id != null", on_fail=None, on_unsure=None
    )
    assert plan.edges[4].on_fail == "no_order" and plan.edges[4].target == "no_order"
    assert "order" in plan.state
    with pytest.raises(KeyError):
        plan.node("nope")


def test_it_writes_the_document_back_sorted_and_indented() -> None:
    plan = parse_plan(small_plan())
    text = plan.to_json()
    assert json.loads(text) == small_plan()
    assert text == json.dumps(small_plan(), sort_keys=True, indent=2) + "\n"
    assert parse_plan(json.loads(text)) == plan


def test_it_keeps_a_copy_of_the_document() -> None:
    doc = small_plan()
    plan = parse_plan(doc)
    doc["nodes"][0]["id"] = "changed"
    assert plan.document["nodes"][0]["id"] == "classify"


def test_it_accepts_null_and_default_keys_on_any_kind() -> None:
    doc = small_plan()
    doc["nodes"][1].update({"assert": None, "agree": None, "max_tokens": None, "two_stage": False, "samples": 1})
    doc["nodes"][0].update({"agree": None, "confidence": None, "max_tokens": None})
    parse_plan(doc)


def test_it_checks_without_a_spec() -> None:
    assert parse_plan(small_plan()).node("classify").writes == ("category", "amount_usd")


# Each row: a change to the small plan, and the problem it must give (path, then a piece
# of the message).
CASES: list[tuple[str, Any, str]] = [
    ("unknown top-level key", lambda d: d.update(extra=1), "$: unknown key 'extra'"),
    ("missing entry", lambda d: d.pop("entry"), "$: 'entry' is a required property"),
    ("bad name", lambda d: d.update(name="Triage"), "name: 'Triage' must match"),
    ("nodes not a list", lambda d: d.update(nodes={}), "nodes: {} is not of type 'array'"),
    ("no nodes", lambda d: d.update(nodes=[], edges=[]), "nodes: [] should be non-empty"),
    ("unknown node key", lambda d: d["nodes"][0].update(prompt="x"), "nodes[0]: unknown key 'prompt'"),
    ("bad kind", lambda d: d["nodes"][1].update(kind="branch"), "nodes[1].kind: 'branch' is not one of"),
    ("missing kind", lambda d: d["nodes"][2].pop("kind"), "nodes[2]: 'kind' is a required property"),
    ("samples 0", lambda d: d["nodes"][0].update(samples=0), "nodes[0].samples: 0 is less than the minimum of 1"),
    ("writes not list", lambda d: d["nodes"][0].update(writes="category"), "nodes[0].writes: 'category' is not"),
    ("duplicate id", lambda d: d["nodes"][3].update(id="billing"), "nodes[3].id: duplicate id 'billing'"),
    ("entry unknown", lambda d: d.update(entry="start"), "entry: no node has id 'start'"),
    ("edge from unknown", lambda d: d["edges"][0].update({"from": "klassify"}), "edges[0].from: no node has id"),
    ("edge to unknown", lambda d: d["edges"][0].update(to="chek"), "edges[0].to: no node has id 'chek'"),
    ("on_fail unknown", lambda d: d["edges"][1].update(on_fail="x"), "edges[1].on_fail: no node has id 'x'"),
    ("edge without target", lambda d: d["edges"][0].pop("to"), "edges[0]: an edge has exactly one of"),
    ("edge with two targets", lambda d: d["edges"][1].update(to="check"), "(this one has to, on_fail)"),
    ("when without to", lambda d: d["edges"][1].update(when="true"), "edges[1].when: 'when' goes only with 'to'"),
    ("when bad syntax", lambda d: d["edges"][2].update(when="category =="), "edges[2].when: expression"),
    ("when reads unknown", lambda d: d["edges"][2].update(when="colour == 'x'"), "edges[2].when: 'colour': no node"),
    ("assert bad", lambda d: d["nodes"][0].update({"assert": "__import__('os')"}), "nodes[0].assert: expression"),
    ("assert unread", lambda d: d["nodes"][0].update({"assert": "score > 1"}), "nodes[0].assert: uses 'score'"),
    ("expr missing", lambda d: d["nodes"][1].pop("expr"), "nodes[1]: an assert node needs 'expr'"),
    ("expr bad", lambda d: d["nodes"][1].update(expr="amount_usd <"), "nodes[1].expr: expression"),
    ("expr unread", lambda d: d["nodes"][1].update(expr="category == 'x'"), "nodes[1].expr: uses 'category'"),
    ("read unknown", lambda d: d["nodes"][1]["reads"].append("total"), "nodes[1].reads[1]: 'total': no node writes"),
    ("read input alone", lambda d: d["nodes"][0]["reads"].append("input"), "nodes[0].reads[1]: 'input' alone"),
    ("output unknown", lambda d: d["nodes"][3]["output"].append("x"), "nodes[3].output[1]: 'x': no node writes"),
    ("tool key on generate", lambda d: d["nodes"][0].update(tool="t"), "nodes[0].tool: a generate node has no"),
    ("writes on end", lambda d: d["nodes"][2].update(writes=["category"]), "nodes[2].writes: a end node has no"),
    ("samples on assert", lambda d: d["nodes"][1].update(samples=3), "nodes[1].samples: a assert node has no"),
    ("generate writes none", lambda d: d["nodes"][0].update(writes=[]), "nodes[0].writes: a generate node must"),
    ("agree > samples", lambda d: d["nodes"][0].update(samples=3, agree=4), "nodes[0].agree: agree 4 is more"),
    ("agree alone", lambda d: d["nodes"][0].update(agree=2), "nodes[0].agree: agree needs samples >= 2"),
    (
        "confidence field",
        lambda d: d["nodes"][0].update(confidence={"field": "colour", "min": 0.8}),
        "nodes[0].confidence.field: 'colour' is not one of the node's writes",
    ),
    (
        "confidence min",
        lambda d: d["nodes"][0].update(confidence={"field": "category", "min": 0}),
        "nodes[0].confidence.min: 0 is less than or equal to the minimum of 0",
    ),
    (
        "tool without name",
        lambda d: d["nodes"].append({"id": "look", "kind": "tool", "reads": [], "writes": ["order"]}),
        "nodes[5]: a tool node needs 'tool'",
    ),
    (
        "tool arg unknown",
        lambda d: d["nodes"].append({"id": "look", "kind": "tool", "tool": "t", "args": {"id": "order_no"}}),
        "nodes[5].args.id: 'order_no': no node writes",
    ),
    ("unreachable", lambda d: d["nodes"].append({"id": "lost", "kind": "end"}), "nodes[5]: 'lost' cannot be reached"),
    ("no to edge", lambda d: d["edges"].pop(0), "nodes[0]: 'classify' has no 'to' edge"),
    ("edge from end", lambda d: d["edges"].append({"from": "billing", "to": "other"}), "'billing' is an end node"),
    ("shadowed", lambda d: d["edges"].insert(3, {"from": "check", "to": "manual"}), "edges[4]: never taken"),
    ("two on_fail", lambda d: d["edges"].append({"from": "check", "on_fail": "other"}), "already has an on_fail"),
    ("never unsure", lambda d: d["edges"].append({"from": "classify", "on_unsure": "manual"}), "is never unsure"),
    (
        "human on_fail",
        lambda d: (
            d["nodes"].append({"id": "ask", "kind": "human", "reads": [], "writes": ["category"]}),
            d["edges"].extend([{"from": "check", "to": "ask", "when": "false"}, {"from": "ask", "to": "other"}]),
            d["edges"].append({"from": "ask", "on_fail": "manual"}),
        ),
        "a human node cannot fail",
    ),
    (
        "read after a failure",
        lambda d: (
            d["nodes"].append({"id": "fix", "kind": "generate", "reads": ["category"], "writes": ["category"]}),
            d["edges"].__setitem__(1, {"from": "classify", "on_fail": "fix"}),
            d["edges"].append({"from": "fix", "to": "manual"}),
        ),
        "nodes[5].reads[0]: 'category': no node before 'fix' can have written 'category'",
    ),
    (
        "when after a failure",
        lambda d: (
            d["nodes"].append({"id": "retry", "kind": "generate", "reads": ["input.ticket"], "writes": ["amount_usd"]}),
            d["edges"].__setitem__(1, {"from": "classify", "on_fail": "retry"}),
            d["edges"].append({"from": "retry", "to": "billing", "when": "category == 'billing'"}),
            d["edges"].append({"from": "retry", "to": "manual"}),
        ),
        "edges[5].when: 'category': no node before 'retry' can have written 'category'",
    ),
    (
        "cycle without exit",
        lambda d: (
            d["edges"].__setitem__(3, {"from": "check", "to": "classify"}),
            d["edges"].__setitem__(2, {"from": "check", "to": "classify", "when": "category == 'x'"}),
        ),
        "cycle classify -> check -> classify has no way out",
    ),
    ("compare unknown", lambda d: d.update(fields={"category": {"compare": "fuzzy"}}), "fields.category.compare"),
    ("compare unwritten", lambda d: d.update(fields={"colour": {"compare": "text"}}), "fields.colour: no node writes"),
    (
        "tolerance not number",
        lambda d: d.update(fields={"category": {"compare": "text", "tolerance": 1}}),
        "fields.category.tolerance: a tolerance goes only with compare: number",
    ),
    ("state not objects", lambda d: d.update(state={"x": 1}), "state.x: 1 is not of type 'object'"),
]


@pytest.mark.parametrize(("change", "expected"), [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_it_reports_each_problem_at_its_path(change: Any, expected: str) -> None:
    doc = small_plan()
    change(doc)
    problems = problems_of(doc)
    assert any(expected in p for p in problems), problems


def test_it_reports_every_problem_at_once() -> None:
    doc = small_plan()
    doc["nodes"][0]["prompt"] = "x"
    doc["nodes"][3]["id"] = "billing"
    doc["edges"][0]["to"] = "nowhere"
    doc["nodes"][1]["expr"] = "amount_usd <"
    doc["edges"][2]["when"] = "colour == 'red'"
    problems = problems_of(doc)
    assert [p.split(":")[0] for p in problems] == [
        "nodes[0]",
        "nodes[3].id",
        "nodes[1].expr",
        "edges[0].to",
        "edges[2].when",
        "edges[3].to",  # 'other' is gone: renamed to a duplicate 'billing'
        "nodes[1]",  # with edges[0] broken, nothing reaches 'check'
        "nodes[2]",  # nor 'billing'
    ]


def test_it_checks_against_the_spec() -> None:
    spec = load_spec(ROOT / "specs/refund_desk")
    doc = refund_plan()
    doc["nodes"][0]["writes"] = ["intent", "order_number"]
    doc["nodes"][1]["tool"] = "fetch_order"
    doc["nodes"][0]["reads"] = ["input.msg"]
    problems = problems_of(doc, spec)
    joined = "\n".join(problems)
    assert "nodes[0].writes[1]: 'order_number' is neither a spec output" in joined
    assert "nodes[1].tool: 'fetch_order' is not one of the spec's tools (lookup_order, issue_refund)" in joined
    assert "nodes[0].reads[0]: 'input.msg': 'msg' is not a spec input (message)" in joined
    # Without the spec, the same document's writes and tools are not checked against it.
    doc["nodes"][0]["writes"] = ["intent", "order_id"]
    parse_plan(doc)


def test_it_lets_state_give_a_spec_output_its_schema() -> None:
    doc = refund_plan()
    doc["state"]["decision"] = {"type": "string", "enum": ["approve", "decline"]}
    assert parse_plan(doc, load_spec(ROOT / "specs/refund_desk")).state["decision"]["enum"] == ["approve", "decline"]


def test_it_accepts_state_fields_as_writes() -> None:
    spec = load_spec(ROOT / "specs/refund_desk")
    doc = refund_plan()
    doc["state"].pop("reviewer_note")
    assert any("nodes[4].writes[2]: 'reviewer_note'" in p for p in problems_of(doc, spec))


def test_it_refuses_a_document_that_is_not_an_object() -> None:
    assert problems_of([1, 2]) == ["$: a plan is a JSON object, not list"]


def test_it_survives_nonsense_in_every_slot() -> None:
    doc: dict[str, Any] = {
        "name": 3,
        "entry": None,
        "state": [],
        "nodes": [1, {"id": 2, "kind": "tool", "reads": "x", "args": [], "writes": {}}, {"kind": "end"}],
        "edges": [None, {"from": 1, "to": 2, "when": 3}],
    }
    problems = problems_of(copy.deepcopy(doc))
    assert problems and all(":" in p for p in problems)


def test_it_is_written_out_in_the_docs() -> None:
    docs = (ROOT / "docs/compiler.md").read_text()
    block = docs.split("<details><summary>PLAN_SCHEMA</summary>", 1)[1].split("```json\n", 1)[1].split("\n```", 1)[0]
    assert json.loads(block) == PLAN_SCHEMA
    assert block == json.dumps(PLAN_SCHEMA, indent=2)
