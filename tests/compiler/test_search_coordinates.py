"""The search's coordinates beyond few-shot count and the planner's prompt (docs/compiler.md,
"The search"): keyed choices (hierarchy), bootstrapped examples, and instruction texts a
model planner proposes from failing validation cases. Each test's loopback target is
right only under the setting the coordinate can find."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from compiler import load_spec
from compiler.hierarchy import Keyed, keyed_for
from compiler.induce import induce
from compiler.judge import SPLIT_FILE
from compiler.loop import build
from compiler.plan import Plan, PlanNode, parse_plan
from compiler.planners import make_planner
from compiler.planners.model import ModelPlanner
from compiler.planners.shared import PlanRequest
from compiler.proposer import PROPOSALS_FILE
from compiler.search import Search
from compiler.spec import GoldCase, Spec
from compiler.splits import Split, split_gold
from compiler.target_cache import CachedBackend
from compiler.trials import NodeSetting, TrialRunner
from runtime import BackendError, load_pack, measure_prior, open_backend
from tests.support.fault_server import FaultServer
from tests.support.routing import SUBISSUES, KeyedTarget, routing_cases, write_routing_spec
from tests.support.tickets import CASE_ID, Target, asked_case, gold_cases, request_index, request_schema, write_spec


@pytest.fixture
def servers() -> Iterator[list[FaultServer]]:
    started: list[FaultServer] = []
    yield started
    for server in started:
        server.stop()


def serve(started: list[FaultServer], answer: Any) -> FaultServer:
    server = FaultServer(answer=answer, logprobs=False).start()
    started.append(server)
    return server


def test_the_search_splits_a_field_by_its_parent_when_the_target_needs_the_narrow_grammar(
    tmp_path: Path, servers: list[FaultServer]
) -> None:
    cases = routing_cases()
    write_routing_spec(tmp_path / "spec", cases)
    server = serve(servers, KeyedTarget(cases))
    result = build(
        load_spec(tmp_path / "spec"), make_planner("rules"), tmp_path / "b", out=tmp_path / "out", target=server.spec()
    )
    assert result.verdict is not None
    verdict = result.verdict.document
    assert verdict["chosen"] == "pack", verdict["sentence"]
    assert verdict["arms"]["pack"]["setting"]["subissue"].get("hierarchy") is True
    assert verdict["arms"]["pack"]["test"]["accuracy"] == 1.0
    graph = yaml.safe_load((tmp_path / "out" / "graph.yaml").read_text())
    assert graph["nodes"]["subissue"]["choices"] == {"subissue": {"labels": "subissue-subissue", "key": "department"}}
    labels = yaml.safe_load((tmp_path / "out" / "labels" / "subissue-subissue.yaml").read_text())
    assert {d: set(v) for d, v in labels.items()} == {d: set(s) for d, s in SUBISSUES.items()}


def test_keyed_choices_may_also_show_only_examples_of_the_parent_value(
    tmp_path: Path, servers: list[FaultServer]
) -> None:
    cases = routing_cases()
    spec = load_spec(write_routing_spec(tmp_path / "spec", cases))
    split = split_gold(spec)
    induction = induce([(c.input, c.expected) for c in spec.gold], list(spec.outputs))
    plan = parse_plan(make_planner("rules").plan(PlanRequest(spec, induction, {}, 1)).document, spec)
    target = serve(servers, KeyedTarget(cases)).spec()
    backend = CachedBackend(open_backend(target), tmp_path / "cache", target)
    runner = TrialRunner(spec, induction, {}, tmp_path / "search", backend, model=target, train=split.train)
    search = Search("pack", plan, runner, split.validation, backend.counts, 1000, tmp_path / "trials.jsonl")
    start = search.start()
    offered = [dict(v)["subissue"] for v in search.variants(start, "subissue", "hierarchy")]
    assert [(s.hierarchy, s.matched, s.shots) for s in offered] == [
        (False, False, 3),
        (True, False, 3),
        (True, True, 2),
    ]
    # Without examples there is nothing to match: that value would emit the same pack again.
    none = tuple((n, dataclasses.replace(s, shots=0) if n == "subissue" else s) for n, s in start)
    assert [dict(v)["subissue"].matched for v in search.variants(none, "subissue", "hierarchy")] == [False, False]
    runner.emit("pack", plan, tuple((n, offered[2] if n == "subissue" else s) for n, s in start), tmp_path / "pack")
    backend.close()
    graph = yaml.safe_load((tmp_path / "pack" / "graph.yaml").read_text())
    assert graph["nodes"]["subissue"]["examples"] == {
        "file": "examples/subissue.jsonl",
        "count": 2,
        "strategy": "nearest",
        "match": ["department"],
    }
    assert "match" not in graph["nodes"]["department"]["examples"]
    node = load_pack(tmp_path / "pack").nodes["subissue"]
    assert node.examples is not None and node.examples.match == ("department",)


def test_the_label_map_holds_what_train_shows_and_keeps_unseen_values_open() -> None:
    enum = {"type": "string", "enum": ["double_charge", "refund_status", "late_delivery", "damaged_item"]}
    schemas = {"department": {"type": "string", "enum": ["billing", "shipping", "technical"]}, "subissue": enum}
    node = PlanNode("subissue", "generate", reads=("input.message", "department"), writes=("subissue",))
    train = [
        GoldCase(f"t{i}", {"message": "m"}, {"department": d, "subissue": s}, None, None, (), i)
        for i, (d, s) in enumerate(
            [("billing", "double_charge"), ("billing", "refund_status"), ("shipping", "late_delivery")]
        )
    ]
    keyed = keyed_for(node, schemas, train)
    assert keyed is not None and (keyed.field, keyed.key) == ("subissue", "department")
    table = dict(keyed.table)
    # damaged_item: no train case shows it, so every department allows it; technical: no train case, all allowed
    assert table["billing"] == ("double_charge", "refund_status", "damaged_item")
    assert table["shipping"] == ("late_delivery", "damaged_item")
    assert table["technical"] == tuple(enum["enum"])
    # the label file reads back as the table, whatever the labels' characters; it is named per node
    odd = Keyed("route", "sub", "dept", (("café 🚚", ("naïve", 'a"b')), ("x", ("y",))))
    assert yaml.safe_load(odd.yaml_text()) == {"café 🚚": ["naïve", 'a"b'], "x": ["y"]}
    assert odd.labels == "route-sub"
    # an empty label is no closed choice a label file can hold
    assert keyed_for(node, {**schemas, "subissue": {"type": "string", "enum": ["", "x"]}}, train) is None
    # a node whose train cases narrow nothing is no candidate
    flat = [
        GoldCase(f"f{i}", {"message": "m"}, {"department": d, "subissue": s}, None, None, (), i)
        for i, d in enumerate(["billing", "shipping"])
        for s in enum["enum"]
    ]
    assert keyed_for(node, schemas, flat) is None


@dataclass
class Bench:
    """A tickets spec, its split and rules plan, and a trial runner on `target` (a model spec)."""

    cases: list[dict[str, Any]]
    spec: Spec
    split: Split
    plan: Plan
    backend: CachedBackend
    runner: TrialRunner

    @property
    def node(self) -> str:
        return next(n.id for n in self.plan.nodes if n.kind == "generate")


def bench(tmp_path: Path, cases: list[dict[str, Any]], target: str, *, with_train: bool = True) -> Bench:
    write_spec(tmp_path / "spec", cases)
    spec = load_spec(tmp_path / "spec")
    split = split_gold(spec)
    induction = induce([(c.input, c.expected) for c in spec.gold], list(spec.outputs))
    plan = parse_plan(make_planner("rules").plan(PlanRequest(spec, induction, {}, 1)).document, spec)
    backend = CachedBackend(open_backend(target), tmp_path / "cache", target)
    train = split.train if with_train else ()
    runner = TrialRunner(spec, induction, {}, tmp_path / "search", backend, model=target, train=train)
    return Bench(cases, spec, split, plan, backend, runner)


def test_bootstrapped_examples_are_the_train_cases_the_target_got_right(
    tmp_path: Path, servers: list[FaultServer]
) -> None:
    cases = gold_cases(40)
    # right on even-numbered tickets only, whatever the prompt
    server = serve(servers, Target(cases, lambda body: (asked_case(body) or 0) % 2 == 0))
    b = bench(tmp_path, cases, server.spec())
    plan, split, runner, backend, node = b.plan, b.split, b.runner, b.backend, b.node
    search = Search("pack", plan, runner, split.validation, backend.counts, 1000, tmp_path / "trials.jsonl")
    start = search.start()
    assert search.bootstrap_ready() and search.bootstrap_calls > 0  # the train run at the start setting
    offered = search.variants(start, node, "fewshot")
    assert any(dict(v)[node].strategy == "bootstrap" for v in offered)
    boot = tuple((n, NodeSetting(3, "bootstrap") if n == node else s) for n, s in start)
    runner.emit("pack", plan, boot, tmp_path / "pack")
    backend.close()
    ids = {
        json.loads(line)["id"] for line in (tmp_path / "pack" / "examples" / f"{node}.jsonl").read_text().splitlines()
    }
    # the node got a case right when the ticket is even, or when the target's wrong answer is the right one
    wrong = {"topic": "billing", "urgency": "high"}
    expected = {c["id"]: c["expected"] for c in cases}
    writes = next(n.writes for n in plan.nodes if n.id == node)
    right = {i for i in split.train if int(i[1:]) % 2 == 0 or all(expected[i][w] == wrong[w] for w in writes)}
    assert ids == right and len(right) < len(split.train)
    graph = yaml.safe_load((tmp_path / "pack" / "graph.yaml").read_text())
    assert graph["nodes"][node]["examples"]["strategy"] == "nearest"


def test_a_search_that_cannot_pay_for_the_train_run_offers_no_bootstrap(
    tmp_path: Path, servers: list[FaultServer]
) -> None:
    b = bench(tmp_path, gold_cases(40), serve(servers, Target(gold_cases(40), lambda body: True)).spec())
    backend, node = b.backend, b.node
    search = Search(
        "pack", b.plan, b.runner, b.split.validation, backend.counts, len(b.split.train), tmp_path / "t.jsonl"
    )
    assert all(dict(v)[node].strategy != "bootstrap" for v in search.variants(search.start(), node, "fewshot"))
    backend.close()
    assert backend.counts.calls == 0


MAGIC = "Answer as the magic rule says."


class Planner:
    """A loopback frontier model: the rules planner's plan for a plan request, and one
    proposal holding MAGIC for a proposal request. Keeps every proposal request."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.proposal_requests: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> str:
        props = (request_schema(body) or {}).get("properties") or {}
        if "instructions" in props:
            self.proposal_requests.append(body)
            return json.dumps({"instructions": [f"Read the ticket. {MAGIC}"]})
        return json.dumps(self.plan)


def test_a_model_planner_proposes_an_instruction_text_from_failing_validation_cases(
    tmp_path: Path, servers: list[FaultServer]
) -> None:
    cases = gold_cases(48)
    write_spec(tmp_path / "spec", cases)
    spec = load_spec(tmp_path / "spec")
    plan = (
        make_planner("rules")
        .plan(PlanRequest(spec, induce([(c.input, c.expected) for c in spec.gold], list(spec.outputs)), {}, 1))
        .document
    )
    planner = Planner(plan)
    planner_server = serve(servers, planner)
    target = serve(servers, Target(cases, lambda body: MAGIC in json.dumps(body["messages"])))
    model = ModelPlanner(planner_server.spec())
    result = build(spec, model, tmp_path / "b", out=tmp_path / "out", target=target.spec(), attempts=1)
    assert result.verdict is not None
    verdict = result.verdict.document
    assert verdict["arms"][verdict["chosen"]]["validation"]["accuracy"] == 1.0, verdict["sentence"]
    chosen = verdict["arms"][verdict["chosen"]]["setting"]
    assert any(s["prompt"].startswith("proposal-") for s in chosen.values())
    assert any(MAGIC in p.read_text() for p in (tmp_path / "out" / "prompts").glob("*.txt"))
    assert planner.proposal_requests and verdict["cost"]["proposal_requests"] == len(planner.proposal_requests)
    split = json.loads((tmp_path / "b" / SPLIT_FILE).read_text())
    test_numbers = {int(i[1:]) for i in split["test"]}
    for body in planner.proposal_requests:  # the planner saw failing validation cases, never a test case
        shown = {int(x) for x in CASE_ID.findall(json.dumps(body["messages"]))}
        assert shown and not shown & test_numbers
        assert shown <= {int(i[1:]) for i in split["validation"]}
    asked = len(planner.proposal_requests)
    again = build(spec, model, tmp_path / "b", out=tmp_path / "out2", target=target.spec(), attempts=1)
    assert len(planner.proposal_requests) == asked  # answered from search/proposals.jsonl
    assert again.verdict is not None and again.verdict.document["arms"] == verdict["arms"]
    assert (tmp_path / "b" / "cache" / PROPOSALS_FILE).is_file()  # beside the target cache
    assert re.search(r"proposal-[0-9a-f]{10}", json.dumps(chosen))


def test_the_search_turns_on_reasoning_first_when_the_target_needs_it(
    tmp_path: Path, servers: list[FaultServer]
) -> None:
    cases = gold_cases(48)
    write_spec(tmp_path / "spec", cases)

    def reasoned(body: dict[str, Any]) -> bool:  # right only on the answer turn that follows a reasoning turn
        at = request_index(body)
        return at is not None and any(m["role"] == "assistant" for m in body["messages"][at + 1 :])

    server = serve(servers, Target(cases, reasoned))
    result = build(
        load_spec(tmp_path / "spec"), make_planner("rules"), tmp_path / "b", out=tmp_path / "out", target=server.spec()
    )
    assert result.verdict is not None
    verdict = result.verdict.document
    setting = verdict["arms"][verdict["chosen"]]["setting"]
    assert all(s.get("two_stage") is True for s in setting.values()), setting
    assert verdict["arms"][verdict["chosen"]]["validation"]["accuracy"] == 1.0
    graph = yaml.safe_load((tmp_path / "out" / "graph.yaml").read_text())
    assert all(n.get("two_stage") is True for n in graph["nodes"].values() if n["kind"] == "generate")
    trials = (tmp_path / "b" / "search" / "trials.jsonl").read_text()
    assert '"draws": 3' in trials  # the draws coordinate was scored too


TOPIC_HEAD = '{"topic": '  # one streamed piece; the value and the closing brace are the next


def test_the_search_divides_out_a_label_prior_when_the_target_is_biased(tmp_path: Path) -> None:
    topics = ("billing", "shipping", "account")
    cases = [
        {
            "id": f"c{i:03d}",
            "input": {"message": f"ticket-{i:03d} about {topics[i % 3]}"},
            "expected": {"topic": topics[i % 3]},
        }
        for i in range(48)
    ]
    root = tmp_path / "spec"
    root.mkdir()
    (root / "spec.yaml").write_text(
        "name: topics\ntask: Name the ticket's topic.\ninputs:\n  message: {description: The ticket.}\n"
        "outputs:\n  topic: {description: The topic., values: [billing, shipping, account]}\n"
    )
    (root / "gold.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    gold = {i: topics[i % 3] for i in range(48)}

    def shares(body: dict[str, Any], piece: str) -> list[tuple[str, float]]:
        """Always writes billing; the logprobs lean toward the right topic less than the
        content-free prior leans toward billing."""
        if not piece.startswith('"'):
            return [(piece, 0.0)]
        case = asked_case(body)
        if case is None:  # a content-free filler: the bias
            p = {"billing": 0.8, "shipping": 0.1, "account": 0.1}
        elif gold[case] == "billing":
            p = {"billing": 0.9, "shipping": 0.05, "account": 0.05}
        else:
            p = {"billing": 0.6, gold[case]: 0.35, ({"shipping", "account"} - {gold[case]}).pop(): 0.05}
        return [(f'"{t}"}}', math.log(v)) for t, v in sorted(p.items(), key=lambda kv: -kv[1])]

    with FaultServer(answer=TOPIC_HEAD + '"billing"}', chunk_chars=len(TOPIC_HEAD), alternatives=shares) as server:
        result = build(
            load_spec(root), make_planner("rules"), tmp_path / "b", out=tmp_path / "out", target=server.spec()
        )
    assert result.verdict is not None
    verdict = result.verdict.document
    arm = verdict["arms"][verdict["chosen"]]
    assert next(iter(arm["setting"].values())).get("prior") is True, arm["setting"]
    assert arm["validation"]["accuracy"] == 1.0 and arm["test"]["accuracy"] == 1.0
    graph = yaml.safe_load((tmp_path / "out" / "graph.yaml").read_text())
    prior = next(n["prior"] for n in graph["nodes"].values() if "prior" in n)
    assert prior["field"] == "topic" and prior["values"]["billing"] == pytest.approx(0.8, abs=0.01)


def test_a_target_that_refuses_the_content_free_fillers_has_no_prior(tmp_path: Path) -> None:
    cases = gold_cases(24)
    script = tmp_path / "target.json"  # a scripted model: it answers its cases and refuses any other input
    script.write_text(json.dumps({"cases": {c["id"]: {"topic": c["expected"]} for c in cases}}))
    b = bench(tmp_path, cases, f"fake:{script}", with_train=False)
    plan, backend, runner = b.plan, b.backend, b.runner
    start = tuple((n.id, NodeSetting(shots=0)) for n in plan.nodes if n.kind == "generate")
    node = start[0][0]
    with pytest.raises(BackendError, match="no answer"):  # what measuring it directly meets
        measure_prior(runner.load("pack", plan, start), node, backend)
    assert runner.prior_for("pack", plan, start, node) is None  # refused, not raised
    search = Search("pack", plan, runner, [], backend.counts, 100, tmp_path / "t.jsonl")
    assert search.variants(start, node, "prior") == [start]
    backend.close()
