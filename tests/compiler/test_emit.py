"""Emit: every emitted pack loads with the runtime's loader (an emitted pack that does not
load is a compiler bug), the gold cases become the evalset byte for byte, and each file
holds what docs/compiler.md, "Emit", says."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from compiler import CompilerError, PlanInvalid, Spec, induce, load_spec, parse_plan
from compiler.emit import REPLY_LINE, emit
from runtime import load_pack, load_tools

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Entry:
    """A catalogue entry as compiler.tools.ToolSpec has it (name, description, args, result)."""

    name: str
    description: str = ""
    args: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    result: dict[str, Any] = field(default_factory=lambda: {"type": "object"})


def induced(spec: Spec) -> Any:
    return induce([(c.input, c.expected) for c in spec.gold], list(spec.outputs), declared=spec.declared_values())


def refund() -> tuple[Spec, dict[str, Any]]:
    spec = load_spec(ROOT / "specs/refund_desk")
    return spec, json.loads((ROOT / "specs/refund_desk/plans/1.json").read_text())


def emit_refund(out: Path, **kwargs: Any) -> Path:
    spec, doc = refund()
    return emit(parse_plan(doc, spec), spec, out, induction=induced(spec), **kwargs)


def tool_names() -> set[str]:
    tools = load_tools(f"{ROOT / 'packs/refund_desk/tools.py'}:registry")
    assert tools is not None
    return set(tools)


def test_it_emits_a_pack_that_loads(tmp_path: Path) -> None:
    out = emit_refund(tmp_path / "pack")
    assert out == tmp_path / "pack"
    pack = load_pack(out, tools=tool_names())
    assert pack.name == "refund_desk"
    assert pack.entry == "intent"
    assert set(pack.nodes) == {
        "intent",
        "lookup",
        "approve",
        "check_amount",
        "review",
        "refund",
        "refunded",
        "declined",
        "no_order",
        "not_refund",
    }
    assert pack.nodes["approve"].samples == 3 and pack.nodes["approve"].agree == 2


def test_it_writes_the_gold_cases_as_the_evalset_byte_for_byte(tmp_path: Path) -> None:
    spec, _ = refund()
    out = emit_refund(tmp_path / "pack")
    assert (out / "evalset.jsonl").read_bytes() == spec.gold_bytes
    assert (out / "evalset.jsonl").read_bytes() == (ROOT / "packs/refund_desk/evalset.jsonl").read_bytes()


def test_it_writes_the_manifest(tmp_path: Path) -> None:
    spec, _ = refund()
    manifest = yaml.safe_load((emit_refund(tmp_path / "pack") / "manifest.yaml").read_text())
    assert manifest["name"] == "refund_desk"
    assert manifest["version"] == "1.0"
    assert manifest["description"] == spec.task.strip()
    assert manifest["entry"] == "intent"
    assert manifest["inputs"] == ["message"]
    assert manifest["tools"] == ["lookup_order", "issue_refund"]
    assert manifest["output"] == list(spec.outputs)
    assert "model" not in manifest  # the spec names none, no fake was given


def test_it_picks_the_model(tmp_path: Path) -> None:
    def model_of(out: Path) -> Any:
        return yaml.safe_load((out / "manifest.yaml").read_text()).get("model")

    offline = {"nodes": {"intent": {"intent": "other", "order_id": None}}}
    assert model_of(emit_refund(tmp_path / "a", fakes={"offline.json": offline})) == "fake:fakes/offline.json"
    assert json.loads((tmp_path / "a/fakes/offline.json").read_text()) == offline
    assert model_of(emit_refund(tmp_path / "b", model="openai:http://127.0.0.1:8080/v1#m")) == (
        "openai:http://127.0.0.1:8080/v1#m"
    )
    assert model_of(emit_refund(tmp_path / "c", fakes={"x.json": {}}, version="2")) is None
    assert yaml.safe_load((tmp_path / "c/manifest.yaml").read_text())["version"] == "2"


def test_it_writes_a_prompt_per_generate_and_human_node(tmp_path: Path) -> None:
    out = emit_refund(tmp_path / "pack")
    assert sorted(p.name for p in (out / "prompts").iterdir()) == ["approve.txt", "intent.txt", "review.txt"]
    prompt = (out / "prompts/approve.txt").read_text()
    assert prompt.startswith("You decide refund requests for an online store.")
    assert '"""\n{{ input.message }}\n"""' in prompt
    assert "Order:\n{{ order }}" in prompt
    assert prompt.index("{{ input.message }}") < prompt.index("{{ order }}") < prompt.index(REPLY_LINE)
    last = prompt.strip().splitlines()[-1]
    assert last == REPLY_LINE + '{"decision": "approve" | "decline", "refund_usd": <number>}'
    intent = (out / "prompts/intent.txt").read_text().strip().splitlines()[-1]
    assert '"intent": "refund" | "order_status" | "cancel" | "other"' in intent
    assert '"order_id": <string or null>' in intent


def test_it_writes_closed_grammars_with_every_write_required(tmp_path: Path) -> None:
    out = emit_refund(tmp_path / "pack")
    assert sorted(p.name for p in (out / "grammars").iterdir()) == [
        "approve.json",
        "intent.json",
        "lookup.json",
        "refund.json",
        "review.json",
    ]
    intent = json.loads((out / "grammars/intent.json").read_text())
    assert intent["required"] == ["intent", "order_id"]
    assert intent["additionalProperties"] is False
    # the plan's state wins over induction (gold never shows 'other')...
    assert intent["properties"]["intent"] == {"type": "string", "enum": ["refund", "order_status", "cancel", "other"]}
    # ...and induction gives the rest
    assert intent["properties"]["order_id"]["pattern"] == "^ORD-[0-9]{5}$"
    review = json.loads((out / "grammars/review.json").read_text())
    assert review["properties"]["reviewer_note"] == {"type": "string"}
    # a tool's grammar checks its result and leaves other keys of it alone
    lookup = json.loads((out / "grammars/lookup.json").read_text())
    assert lookup["required"] == ["order"] and "additionalProperties" not in lookup


def test_it_takes_tool_fields_from_the_catalogue(tmp_path: Path) -> None:
    spec, doc = refund()
    del doc["state"]["order"]
    del doc["state"]["refunded"]
    plan = parse_plan(doc, spec)
    order = {"type": "object", "properties": {"total_usd": {"type": "number"}}}
    catalogue = {
        "lookup_order": Entry("lookup_order", result={"type": "object", "properties": {"order": order}}),
        "issue_refund": Entry("issue_refund", result={"type": "object"}),
    }
    out = emit(plan, spec, tmp_path / "pack", induction=induced(spec), catalogue=catalogue)
    lookup = json.loads((out / "grammars/lookup.json").read_text())
    assert lookup["properties"] == {"order": order}
    # issue_refund's result schema names no 'refunded': no grammar for that tool node
    assert not (out / "grammars/refund.json").exists()
    load_pack(out, tools=tool_names())


def test_it_uses_the_declared_type_when_gold_shows_nothing(tmp_path: Path) -> None:
    spec, doc = refund()
    doc["nodes"][0]["writes"] = ["intent", "order_id", "refund_id"]
    out = emit(parse_plan(doc, spec), spec, tmp_path / "pack", induction=induce([]))
    grammar = json.loads((out / "grammars/intent.json").read_text())
    assert grammar["properties"]["refund_id"] == {"type": ["string", "null"]}
    assert grammar["properties"]["order_id"] == {}  # no type declared, no gold: anything


def test_it_breaks_up_braces_in_instructions(tmp_path: Path) -> None:
    spec, doc = refund()
    doc["nodes"][0]["instructions"] = "Never write {{ input.secret }} or }} here."
    out = emit(parse_plan(doc, spec), spec, tmp_path / "pack", induction=induced(spec))
    assert "{{ input.secret }}" not in (out / "prompts/intent.txt").read_text()
    load_pack(out, tools=tool_names())


def test_it_refuses_a_folder_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "pack").mkdir()
    (tmp_path / "pack/keep.txt").write_text("mine")
    with pytest.raises(CompilerError, match="must not exist or be empty"):
        emit_refund(tmp_path / "pack")
    assert (tmp_path / "pack/keep.txt").read_text() == "mine"
    (tmp_path / "empty").mkdir()
    assert emit_refund(tmp_path / "empty") == tmp_path / "empty"


def test_it_refuses_a_fake_name_that_is_not_a_plain_file(tmp_path: Path) -> None:
    with pytest.raises(CompilerError, match="plain file name"):
        emit_refund(tmp_path / "pack", fakes={"../x.json": {}})
    assert not (tmp_path / "pack").exists()


def test_it_writes_the_plans_compare_rules(tmp_path: Path) -> None:
    spec = load_spec(ROOT / "specs/invoice_extract")
    plan = parse_plan(json.loads((ROOT / "specs/invoice_extract/plans/1.json").read_text()), spec)
    out = emit(plan, spec, tmp_path / "pack", induction=induced(spec))
    pack = load_pack(out)
    assert pack.fields["vendor"].compare == "text"
    assert pack.fields["total"].tolerance == 0.005


def test_it_writes_a_readme_naming_the_spec(tmp_path: Path) -> None:
    text = (emit_refund(tmp_path / "pack") / "README.md").read_text()
    assert text.startswith("# refund_desk\n")
    assert "Compiled from spec refund_desk" in text
    assert "- `lookup` (tool)" in text


# --- the property: any spec and any plan parse_plan accepts emit to a pack that loads ---

OUTPUT_NAMES = ("label", "score", "title", "kind", "amount", "code")
LABELS = ("alpha", "beta", "gamma", "delta")
TEXT = st.text(alphabet="abcXYZ 019-_.,'\"{}$\n", max_size=20)


def value_of(kind: str) -> st.SearchStrategy[Any]:
    if kind == "enum":
        return st.sampled_from(LABELS)
    if kind == "number":
        return st.integers(-1000, 1000) | st.floats(-1e6, 1e6, allow_nan=False).map(lambda f: round(f, 2))
    return TEXT


@st.composite
def specs_and_plans(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    names = draw(st.lists(st.sampled_from(OUTPUT_NAMES), min_size=1, max_size=4, unique=True))
    kinds = {n: draw(st.sampled_from(("enum", "number", "string"))) for n in names}
    spec: dict[str, Any] = {
        "name": "gen",
        "task": "Task: " + draw(TEXT),
        "inputs": {"text": {"description": "The text.", "type": "string"}},
        "outputs": {n: {"description": f"The {n}."} for n in names},
        "unsure_end": "manual",
    }
    cases = []
    for i in range(draw(st.integers(1, 8))):
        expected = {n: draw(value_of(kinds[n]) | st.none()) for n in names}
        if draw(st.booleans()):  # some cases leave some outputs out
            expected = {n: v for n, v in expected.items() if draw(st.booleans())}
        cases.append({"id": f"c{i}", "input": {"text": draw(TEXT)}, "expected": expected})
    if len(cases) >= 2 and draw(st.booleans()):
        # a train split: some cases tagged, at least one left out
        tagged = draw(st.lists(st.integers(0, len(cases) - 2), min_size=1, unique=True))
        for i in tagged:
            cases[i]["tags"] = ["train"]
        spec["train"] = "train"

    # generate nodes, each writing a share of the outputs
    count = draw(st.integers(1, len(names)))
    owner = {n: (i if i < count else draw(st.integers(0, count - 1))) for i, n in enumerate(names)}
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    written: list[str] = []
    for i in range(count):
        writes = [n for n in names if owner[n] == i]
        earlier = draw(st.lists(st.sampled_from(written), unique=True)) if written else []
        reads = ["input.text", *earlier]
        node: dict[str, Any] = {"id": f"g{i}", "kind": "generate", "reads": reads, "writes": writes}
        if draw(st.booleans()):
            node["instructions"] = draw(TEXT)
        if draw(st.booleans()):
            node["description"] = draw(TEXT)
        if draw(st.booleans()):
            node["two_stage"] = True
        if draw(st.booleans()):
            node["samples"], node["agree"] = 3, 2
        if draw(st.booleans()):
            node["max_tokens"] = draw(st.integers(16, 1024))
        if draw(st.booleans()):
            node["assert"] = f"{writes[0]} == null or {writes[0]} != null"
        gated = [w for w in writes if kinds[w] == "enum"]
        if gated and draw(st.booleans()):
            node["confidence"] = {"field": gated[0], "min": draw(st.sampled_from((0.5, 0.8, 1)))}
        nodes.append(node)
        written += writes
    last = nodes[-1]["id"]
    numbers = [n for n in names if kinds[n] == "number"]
    add_check: bool = draw(st.booleans())
    if numbers and add_check:
        nodes.append({"id": "check", "kind": "assert", "reads": [numbers[0]], "expr": f"{numbers[0]} == null or 1 > 0"})
        edges.append({"from": last, "to": "check"})
        edges.append({"from": "check", "on_fail": "manual"})
        last = "check"
    ends = {"done"}
    enums = [n for n in names if kinds[n] == "enum"]
    if enums:
        edges.append({"from": last, "to": "elsewhere", "when": f"{enums[0]} == '{draw(st.sampled_from(LABELS))}'"})
        ends.add("elsewhere")
    edges.append({"from": last, "to": "done"})
    for i in range(count):
        here = nodes[i]["id"]
        if i + 1 < count:
            edges.append({"from": here, "to": nodes[i + 1]["id"]})
        if draw(st.booleans()):
            edges.append({"from": here, "on_fail": "manual"})
            ends.add("manual")
        if (nodes[i].get("samples") or nodes[i].get("confidence")) and draw(st.booleans()):
            edges.append({"from": here, "on_unsure": "manual"})
            ends.add("manual")
    if "check" in [n["id"] for n in nodes]:
        ends.add("manual")
    if "manual" in ends and draw(st.booleans()):
        # the unsure end becomes a person who answers, then the run goes on to 'done'
        ends.discard("manual")
        human = {"id": "manual", "kind": "human", "reads": ["input.text"], "writes": [names[0]]}
        if draw(st.booleans()):
            human["instructions"] = draw(TEXT)
        nodes.append(human)
        edges.append({"from": "manual", "to": "done"})
    for end in sorted(ends):
        node = {"id": end, "kind": "end"}
        if draw(st.booleans()):
            node["output"] = draw(st.lists(st.sampled_from(names), unique=True))
        nodes.append(node)
    plan = {"name": "gen", "summary": draw(TEXT), "entry": "g0", "nodes": nodes, "edges": edges}
    return spec, cases, plan


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs_and_plans())
def test_it_emits_packs_that_load_for_generated_specs_and_plans(
    generated: tuple[dict[str, Any], list[dict[str, Any]], Mapping[str, Any]],
) -> None:
    spec_doc, cases, plan_doc = generated
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "spec").mkdir()
        (root / "spec/spec.yaml").write_text(yaml.safe_dump(spec_doc, sort_keys=False))
        gold = "".join(json.dumps(c) + "\n" for c in cases).encode()
        (root / "spec/gold.jsonl").write_bytes(gold)
        spec = load_spec(root / "spec")
        plan = parse_plan(plan_doc, spec)
        try:
            out = emit(plan, spec, root / "pack", induction=induced(spec), fakes={"offline.json": {}})
        except PlanInvalid as e:
            # the one refusal emit may make: a gate on a field gold does not close
            assert all(".confidence.field: " in p and "not a closed choice" in p for p in e.problems)
            assert not (root / "pack").exists()
            event("emit refused an open-choice gate")
            return
        pack = load_pack(out)  # PackInvalid here is an emit bug
        if any(n.examples is not None for n in pack.nodes.values()):
            event("pack with few-shot examples loaded")
        event("gated pack loaded" if any(n.confidence for n in plan.nodes) else "pack loaded")
        assert (out / "evalset.jsonl").read_bytes() == gold
        assert set(pack.nodes) == {n["id"] for n in plan_doc["nodes"]}
        assert len(pack.cases) == len(cases)


def test_it_emits_the_specs_declared_values_and_compare_rules(tmp_path: Path) -> None:
    """invoice_extract's spec declares currency's values (AUD is in no gold case) and its
    compare rules: the grammar's enum is the declared set, the rules go to `fields:`, and a
    rule the plan sets for a field wins over the spec's."""
    from compiler.planners.rules import rules_plan

    spec = load_spec(ROOT / "specs/invoice_extract")
    doc = rules_plan(spec, induced(spec), {})
    doc["fields"] = {"vendor": {"compare": "loose"}}
    out = emit(parse_plan(doc, spec), spec, tmp_path / "pack", induction=induced(spec))
    manifest = yaml.safe_load((out / "manifest.yaml").read_text())
    assert manifest["fields"] == {
        "vendor": {"compare": "loose"},
        "invoice_number": {"compare": "loose"},
        "subtotal": {"compare": "number", "tolerance": 0.005},
        "tax": {"compare": "number", "tolerance": 0.005},
        "total": {"compare": "number", "tolerance": 0.005},
    }
    enums = [
        g["properties"]["currency"]["enum"]
        for g in (json.loads(p.read_text()) for p in sorted((out / "grammars").glob("*.json")))
        if "currency" in g["properties"]
    ]
    assert enums and all(e == ["USD", "EUR", "GBP", "CAD", "AUD"] for e in enums)
    assert load_pack(out).fields["total"].tolerance == 0.005
