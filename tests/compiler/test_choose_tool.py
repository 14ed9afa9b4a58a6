"""The choose_tool node kind in the compiler (issue 24): the plan format accepts it and
refuses it with problems named by their JSON path, emit writes it as packs/calculator has
it, the rules planner plans the calculator spec as a choose_tool loop, and the offline
test model drives that loop from each gold case's `tools`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from compiler import (
    PlanInvalid,
    PlanRequest,
    RulesPlanner,
    Spec,
    ToolSpec,
    catalogue,
    induce,
    load_spec,
    offline_script,
    parse_plan,
)
from compiler.emit import emit
from compiler.offline import NOT_JSON
from compiler.offline_tools import tool_calls, with_tool_args
from runtime import EvalReport, evaluate, load_pack, load_tools, open_backend
from tests.support.packplans import plan_from_pack

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ["add", "subtract", "multiply", "divide", "convert"]


@pytest.fixture(scope="module")
def spec() -> Spec:
    return load_spec(ROOT / "specs" / "calculator")


@pytest.fixture(scope="module")
def registry() -> dict[str, Any]:
    found: dict[str, Any] = load_tools(f"{ROOT / 'packs' / 'calculator' / 'tools.py'}:registry")
    return found


def request_for(spec: Spec, registry: dict[str, Any] | None) -> PlanRequest:
    induction = induce([(c.input, c.expected) for c in spec.gold], list(spec.outputs), declared=spec.declared_values())
    return PlanRequest(spec=spec, induction=induction, catalogue=catalogue(registry, spec.tools), attempt=1)


def loop_plan() -> dict[str, Any]:
    """packs/calculator's graph as a plan document."""
    return {
        "name": "calculator",
        "entry": "pick",
        "nodes": [
            {
                "id": "pick",
                "kind": "choose_tool",
                "reads": ["input.question"],
                "writes": ["calls"],
                "tools": list(TOOLS),
                "max_calls": 3,
                "min_calls": 1,
                "to": "answer",
                "instructions": "Call the tools the question needs, one at a time.",
            },
            {"id": "answer", "kind": "generate", "reads": ["input.question", "calls"], "writes": ["answer"]},
            {"id": "review", "kind": "human", "reads": ["input.question"], "writes": ["answer"]},
            {"id": "done", "kind": "end", "output": ["answer"]},
        ],
        "edges": [
            {"from": "pick", "to": "answer"},
            {"from": "pick", "on_fail": "review"},
            {"from": "answer", "to": "done"},
            {"from": "answer", "on_fail": "review"},
            {"from": "review", "to": "done"},
        ],
    }


def problems_of(doc: Any, spec: Spec | None = None) -> list[str]:
    with pytest.raises(PlanInvalid) as info:
        parse_plan(doc, spec)
    return info.value.problems


def scored(pack_dir: Path, script: str, registry: dict[str, Any]) -> EvalReport:
    pack = load_pack(pack_dir, tools=set(registry))
    return evaluate(pack, open_backend(f"fake:fakes/{script}", base_dir=pack_dir), tools=registry, concurrency=1)


def failing(report: EvalReport) -> list[str]:
    return [c.case_id for c in report.cases if not c.passed]


# -- the plan format -----------------------------------------------------------------


def test_it_accepts_a_choose_tool_node_with_and_without_a_spec(spec: Spec) -> None:
    for against in (None, spec):
        pick = parse_plan(loop_plan(), against).node("pick")
        assert (pick.kind, pick.tools, pick.max_calls, pick.min_calls, pick.to) == (
            "choose_tool",
            tuple(TOOLS),
            3,
            1,
            "answer",
        )
        assert pick.writes == ("calls",)


def test_it_takes_the_final_answer_node_from_the_to_edge_when_the_node_does_not_say() -> None:
    doc = loop_plan()
    for key in ("to", "max_calls", "min_calls"):
        del doc["nodes"][0][key]
    pick = parse_plan(doc).node("pick")
    assert (pick.to, pick.max_calls, pick.min_calls) == ("answer", None, None)


def hand_plan() -> dict[str, Any]:
    """packs/calculator's own graph.yaml read back as a plan, its choose_tool keys kept."""
    doc = plan_from_pack(ROOT / "packs" / "calculator")
    graph = yaml.safe_load((ROOT / "packs" / "calculator" / "graph.yaml").read_text())
    for node in doc["nodes"]:
        body = graph["nodes"][node["id"]]
        node.update({k: body[k] for k in ("tools", "max_calls", "min_calls", "to") if k in body})
    return doc


def test_it_accepts_the_hand_written_calculator_pack_as_a_plan(spec: Spec) -> None:
    assert parse_plan(hand_plan(), spec).node("pick").to == "answer"


def _set(i: int, **keys: Any) -> Any:
    return lambda d: d["nodes"][i].update(keys)


# Each row: a change to the calculator loop plan, and the problem it must give.
REFUSED: list[tuple[str, Any, str]] = [
    ("no tools", lambda d: d["nodes"][0].pop("tools"), "nodes[0].tools: a choose_tool node needs 'tools'"),
    ("empty tools", _set(0, tools=[]), "nodes[0].tools: a choose_tool node needs 'tools'"),
    ("tools not a list", _set(0, tools="add"), "nodes[0].tools: 'add' is not of type 'array'"),
    ("done as a tool", _set(0, tools=["add", "done"]), "nodes[0].tools[1]: 'done' is the choice that ends the loop"),
    ("a tool twice", _set(0, tools=["add", "add"]), "nodes[0].tools[1]: 'add' is listed twice (also tools[0])"),
    ("two writes", _set(0, writes=["calls", "more"]), "nodes[0].writes: a choose_tool node writes exactly one"),
    ("no writes", _set(0, writes=[]), "nodes[0].writes: a choose_tool node writes exactly one field"),
    ("max_calls 0", _set(0, max_calls=0), "nodes[0].max_calls: 0 is less than the minimum of 1"),
    ("max_calls 21", _set(0, max_calls=21), "nodes[0].max_calls: 21 is greater than the maximum of 20"),
    ("min over max", _set(0, max_calls=2, min_calls=3), "nodes[0].min_calls: min_calls 3 is more than max_calls 2"),
    ("to unknown", _set(0, to="final"), "nodes[0].to: no node has id 'final'"),
    ("to elsewhere", _set(0, to="review"), "nodes[0].to: 'review' is not where its 'to' edge goes ('answer')"),
    ("tools on generate", _set(1, tools=["add"]), "nodes[1].tools: a generate node has no 'tools'"),
    ("to on generate", _set(1, to="done"), "nodes[1].to: a generate node has no 'to'"),
    ("max_calls on a tool", _set(1, max_calls=5), "nodes[1].max_calls: a generate node has no 'max_calls'"),
    ("tool key on it", _set(0, tool="add"), "nodes[0].tool: a choose_tool node has no 'tool'"),
    ("samples on it", _set(0, samples=3), "nodes[0].samples: a choose_tool node has no 'samples'"),
    (
        "a when on its edge",
        lambda d: d["edges"][0].update(when="true"),
        "edges[0].when: choose_tool node 'pick' always goes on to its 'to' node",
    ),
    (
        "two to edges",
        lambda d: d["edges"].insert(1, {"from": "pick", "to": "review"}),
        "edges[1]: choose_tool node 'pick' has one 'to' edge",
    ),
    (
        "to an end",
        lambda d: (d["edges"].__setitem__(0, {"from": "pick", "to": "done"}), d["nodes"][0].pop("to")),
        "edges[0].to: choose_tool node 'pick' goes on to a generate node that answers from its calls, not to a end",
    ),
    (
        "on_unsure from it",
        lambda d: d["edges"].append({"from": "pick", "on_unsure": "review"}),
        "'pick' is never unsure",
    ),
    (
        "the calls read after a failure",
        lambda d: (d["nodes"][2]["reads"].append("calls"), d["edges"].pop(3)),  # review only after pick fails
        "nodes[2].reads[1]: 'calls': no node before 'review' can have written 'calls'",
    ),
]


@pytest.mark.parametrize(("change", "expected"), [(c[1], c[2]) for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_it_refuses_a_bad_choose_tool_node_at_its_path(change: Any, expected: str) -> None:
    doc = loop_plan()
    change(doc)
    problems = problems_of(doc)
    assert any(expected in p for p in problems), problems


def test_it_refuses_a_tool_the_spec_does_not_name(spec: Spec) -> None:
    doc = loop_plan()
    doc["nodes"][0]["tools"] = ["add", "power"]
    assert problems_of(doc, spec) == [
        "nodes[0].tools[1]: 'power' is not one of the spec's tools (add, subtract, multiply, divide, convert)"
    ]
    assert parse_plan(doc).node("pick").tools == ("add", "power")  # without a spec, any name


def test_it_survives_nonsense_in_the_choose_tool_keys() -> None:
    for value in (None, 3, "x", [1, None], {"a": 1}, True):
        doc = loop_plan()
        doc["nodes"][0].update(tools=value, max_calls=value, min_calls=value, to=value)
        try:
            parse_plan(doc)
        except PlanInvalid as exc:
            assert all(isinstance(p, str) and ":" in p for p in exc.problems)


# -- emit ------------------------------------------------------------------------------


def test_it_emits_the_loop_as_the_hand_written_pack_has_it(
    spec: Spec, registry: dict[str, Any], tmp_path: Path
) -> None:
    request = request_for(spec, registry)
    plan = parse_plan(loop_plan(), spec)
    out = emit(plan, spec, tmp_path / "pack", induction=request.induction, catalogue=request.catalogue)
    graph = yaml.safe_load((out / "graph.yaml").read_text())
    hand = yaml.safe_load((ROOT / "packs" / "calculator" / "graph.yaml").read_text())
    keys = ("kind", "reads", "writes", "tools", "prompt", "max_calls", "min_calls", "to")
    assert {k: graph["nodes"]["pick"].get(k) for k in keys} == {k: hand["nodes"]["pick"].get(k) for k in keys}
    assert graph["edges"] == hand["edges"]
    manifest = yaml.safe_load((out / "manifest.yaml").read_text())
    assert manifest["tools"] == TOOLS
    prompt = (out / "prompts" / "pick.txt").read_text()
    assert "{{ input.question }}" in prompt and "{{ tools }}" in prompt and "{{ calls }}" in prompt
    assert not (out / "grammars" / "pick.json").exists()
    load_pack(out, tools=set(registry))


def test_the_hand_written_script_drives_the_emitted_loop(spec: Spec, registry: dict[str, Any], tmp_path: Path) -> None:
    request = request_for(spec, registry)
    own = json.loads((ROOT / "packs" / "calculator" / "fakes" / "scripted.json").read_text())
    plan = parse_plan(loop_plan(), spec)
    out = emit(
        plan, spec, tmp_path / "p", induction=request.induction, catalogue=request.catalogue, fakes={"own.json": own}
    )
    assert failing(scored(out, "own.json", registry)) == []


# -- the rules planner -----------------------------------------------------------------


def test_the_rules_planner_plans_calculator_as_a_choose_tool_loop(spec: Spec, registry: dict[str, Any]) -> None:
    document = RulesPlanner().plan(request_for(spec, registry)).document
    plan = parse_plan(document, spec)
    assert [(n.id, n.kind) for n in plan.nodes] == [
        ("pick", "choose_tool"),
        ("answer", "generate"),
        ("review", "human"),
        ("done", "end"),
    ]
    pick = plan.node("pick")
    # max_calls: c-12 lists four calls; min_calls: every case lists at least one
    assert (pick.tools, pick.writes, pick.max_calls, pick.min_calls, pick.to) == (
        tuple(TOOLS),
        ("calls",),
        4,
        1,
        "answer",
    )
    assert "never divide by zero" in pick.instructions
    answer = plan.node("answer")
    assert (answer.reads, answer.writes) == (("input.question", "calls"), ("answer",))
    assert plan.node("review").reads == ("input.question",)  # pick's on_fail carries no calls
    assert [(e.source, e.to or e.on_fail) for e in plan.edges] == [
        ("pick", "answer"),
        ("pick", "review"),
        ("answer", "done"),
        ("answer", "review"),
        ("review", "done"),
    ]
    assert RulesPlanner().plan(request_for(spec, registry)).document == document


def test_its_calculator_pack_loads_and_passes_every_case_offline(
    spec: Spec, registry: dict[str, Any], tmp_path: Path
) -> None:
    request = request_for(spec, registry)
    plan = parse_plan(RulesPlanner().plan(request).document, spec)
    own = json.loads((ROOT / "packs" / "calculator" / "fakes" / "scripted.json").read_text())
    fakes = {"offline.json": offline_script(plan, spec), "scripted.json": own}
    out = emit(plan, spec, tmp_path / "p", induction=request.induction, catalogue=request.catalogue, fakes=fakes)
    offline = scored(out, "offline.json", registry)
    assert (offline.passed, offline.total) == (21, 21)
    tools = offline.tool_metrics()
    assert tools["precision"] == 1.0 and tools["matched_calls"] == 28  # all but c-14's and c-15's division by 0
    assert failing(scored(out, "scripted.json", registry)) == []  # the hand pack's script drives it too


def test_a_tool_whose_arguments_map_to_fields_stays_a_tool_node() -> None:
    spec = load_spec(ROOT / "specs" / "refund_desk")
    registry = load_tools(f"{ROOT / 'packs' / 'refund_desk' / 'tools.py'}:registry")
    plan = parse_plan(RulesPlanner().plan(request_for(spec, registry)).document, spec)
    assert [n.kind for n in plan.nodes].count("choose_tool") == 0
    assert [n.tool for n in plan.nodes if n.kind == "tool"] == ["lookup_order", "issue_refund"]


# -- the offline test model ------------------------------------------------------------


def test_it_calls_the_gold_tools_with_arguments_from_their_schemas(spec: Spec, registry: dict[str, Any]) -> None:
    plan = parse_plan(loop_plan(), spec)
    cases = offline_script(plan, spec, catalogue(registry, spec.tools))["cases"]
    own = json.loads((ROOT / "packs" / "calculator" / "fakes" / "scripted.json").read_text())["cases"]
    for case_id in ("c-01", "c-02", "c-03", "c-04"):  # the numbers the question quotes, in order
        assert cases[case_id]["pick"] == own[case_id]["pick"]
    assert cases["c-07"]["pick"] == [
        {"tool": "add", "args": {"a": 3, "b": 4}},
        {"tool": "multiply", "args": {"a": 4, "b": 5}},  # shifted by one per call
        {"tool": "done"},
    ]
    assert cases["c-05"]["pick"][0] == {"tool": "convert", "args": {"value": 10, "unit_from": "km", "unit_to": "km"}}
    assert cases["c-08"]["pick"][1] == {"tool": "divide", "args": {"a": 20, "b": 4}}
    assert [c["tool"] for c in cases["c-11"]["pick"]] == ["add", "add", "add"]  # max_calls 3: the budget ends it
    assert len({json.dumps(c) for c in cases["c-11"]["pick"]}) == 3  # no call repeats an earlier one
    assert cases["c-14"]["pick"] == [NOT_JSON]  # the unsure end: invalid choices past the ladder (the last repeats)
    assert cases["c-15"]["pick"] == [NOT_JSON]
    assert cases["c-01"]["answer"] == {"answer": 42}


def test_emit_fills_in_the_arguments_the_loop_could_not(spec: Spec, registry: dict[str, Any]) -> None:
    plan = parse_plan(loop_plan(), spec)
    known = catalogue(registry, spec.tools)
    bare = offline_script(plan, spec)
    assert bare["cases"]["c-01"]["pick"] == [{"tool": "add", "args": {}}, {"tool": "done"}]
    assert with_tool_args(bare, plan, spec, known) == offline_script(plan, spec, known)
    assert with_tool_args(bare, plan, spec, known) == with_tool_args(
        with_tool_args(bare, plan, spec, known), plan, spec, known
    )


def test_it_notes_a_call_it_finds_no_arguments_for(spec: Spec) -> None:
    pattern = ToolSpec(
        "lookup",
        args={
            "type": "object",
            "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"}},
            "required": ["code"],
        },
    )
    case = next(c for c in spec.gold if c.id == "c-01")
    calls, notes = tool_calls(["lookup", "add"], case, {"lookup": pattern})
    assert calls == [{"tool": "add", "args": {}}]
    assert notes == ["no arguments of 'lookup' that its schema accepts come from the case"]
    doc = loop_plan()
    doc["nodes"][0]["tools"] = ["lookup", "convert"]
    # c-01 lists add, which this node does not offer: min_calls 1 makes it call lookup
    script = offline_script(parse_plan(doc), spec, {"lookup": pattern})
    assert (
        script["notes"]["c-01"]
        == "choose_tool 'pick': no arguments of 'lookup' that its schema accepts come from the case"
    )
    assert script["cases"]["c-01"]["pick"] == [{"tool": "done"}]
    assert "c-05" not in script["notes"]  # convert: no arguments known, none needed offline


def test_the_hand_written_graph_passes_every_case_on_the_offline_model(
    spec: Spec, registry: dict[str, Any], tmp_path: Path
) -> None:
    script = offline_script(parse_plan(hand_plan(), spec), spec, catalogue(registry, spec.tools))
    assert "notes" not in script
    (tmp_path / "offline.json").write_text(json.dumps(script))
    pack = load_pack(ROOT / "packs" / "calculator", tools=set(registry))
    report = evaluate(pack, open_backend(f"fake:{tmp_path / 'offline.json'}"), tools=registry, concurrency=1)
    assert failing(report) == []
