"""Compile against the target (docs/compiler.md, "The search", "The verdict"): a real
HTTP server on loopback plays the target, and its accuracy depends on the prompt it is
sent, so what the search finds and what the verdict says can be checked."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from compiler import load_spec
from compiler.cli import main as cli_main
from compiler.judge import SPLIT_FILE, TRIALS_FILE, VERDICT_FILE
from compiler.loop import build
from compiler.planners import make_planner
from compiler.splits import split_gold
from runtime import load_pack
from tests.support.fault_server import FaultServer
from tests.support.tickets import (
    CASE_ID,
    Target,
    asked_case,
    gold_cases,
    no_examples,
    one_field,
    request_index,
    write_spec,
)


@pytest.fixture
def serve() -> Iterator[Callable[[Target], FaultServer]]:
    servers: list[FaultServer] = []

    def start(target: Target) -> FaultServer:
        server = FaultServer(answer=target, logprobs=False).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def compile_against(tmp_path: Path, server: FaultServer, name: str = "out", **kw: Any) -> Any:
    spec = load_spec(tmp_path / "spec")
    return build(
        spec,
        make_planner("rules"),
        tmp_path / f"{name}.build",
        out=tmp_path / name,
        target=server.spec(),
        concurrency=2,
        **kw,
    )


def test_the_search_finds_the_setting_the_target_needs_and_the_pack_beats_one_call(
    tmp_path: Path, serve: Callable[[Target], FaultServer]
) -> None:
    cases = gold_cases()
    write_spec(tmp_path / "spec", cases)
    target = Target(cases, one_field)
    result = compile_against(tmp_path, serve(target), cache=tmp_path / "cache")
    verdict = result.verdict.document
    assert verdict["judged"] is True
    assert verdict["chosen"] == "pack", verdict["sentence"]
    assert result.verdict.exit_code == 0
    pack = verdict["arms"]["pack"]
    assert pack["validation"]["accuracy"] == 1.0
    assert pack["test"]["accuracy"] == 1.0
    assert all(s["shots"] == 0 for s in pack["setting"].values())  # started at 3 nearest; the search dropped them
    assert verdict["arms"]["one_call"]["validation"]["accuracy"] < 1.0
    assert verdict["mcnemar"]["fixed"] > 0 and verdict["mcnemar"]["broken"] == 0
    trials = [json.loads(line) for line in (tmp_path / "out.build" / TRIALS_FILE).read_text().splitlines()]
    assert trials[0]["coordinate"] == "start" and any(t["kept"] and t["coordinate"] == "survivor" for t in trials)
    assert {t["arm"] for t in trials} == {"pack", "one_call"}
    # the written pack runs on the target, never on the offline stand-in, and shows no examples
    written = load_pack(tmp_path / "out")
    assert written.model == target_spec(verdict)
    assert all(n.examples is None for n in written.nodes.values() if n.kind == "generate")
    assert (tmp_path / "out" / "fakes" / "offline.json").is_file()


def target_spec(verdict: dict[str, Any]) -> str:
    return str(verdict["target"])


def test_a_rebuild_with_the_same_cache_makes_no_target_call(
    tmp_path: Path, serve: Callable[[Target], FaultServer]
) -> None:
    cases = gold_cases(36)
    write_spec(tmp_path / "spec", cases)
    target = Target(cases, no_examples)
    server = serve(target)
    first = compile_against(tmp_path, server, cache=tmp_path / "cache", budget=90)  # a budget that stops the search
    assert first.verdict.document["stopped"]["pack"] == "budget"
    made = len(target.requests)
    cost = first.verdict.document["cost"]
    assert made > 0 and cost["target_calls"] + cost["attempt_calls"] == made
    second = compile_against(tmp_path, server, name="again", cache=tmp_path / "cache", budget=90)
    assert len(target.requests) == made  # not one request more
    assert second.verdict.document["cost"]["target_calls"] == 0
    assert second.verdict.document["arms"] == first.verdict.document["arms"]


def test_no_test_case_reaches_a_prompt_as_an_example_and_train_runs_once_per_arm(
    tmp_path: Path, serve: Callable[[Target], FaultServer]
) -> None:
    cases = gold_cases(36)
    write_spec(tmp_path / "spec", cases)
    target = Target(cases, lambda body: True)
    compile_against(tmp_path, serve(target))
    split = json.loads((tmp_path / "out.build" / SPLIT_FILE).read_text())
    train = {int(i[1:]) for i in split["train"]}
    assert train and split["validation"] and split["test"]
    asked: Counter[int] = Counter()
    for body in target.requests:
        case, at = asked_case(body), request_index(body)
        if case is None:  # a label prior's content-free filler asks about no case: only examples
            at = len(body["messages"])
        else:
            asked[case] += 1
        for m in body["messages"][:at]:  # every message before the request: system and few-shot turns
            shown = {int(x) for x in CASE_ID.findall(m["content"])}
            assert shown <= train, f"a non-train case reached a prompt as an example: {shown - train}"
    # train cases are asked only by the one run per arm that finds bootstrap examples: a call per
    # generate node, two in the planned chain (topic, urgency) and one in the one-call pack
    assert any(asked[i] for i in train)
    assert {i: n for i, n in asked.items() if i in train and n > 3} == {}


def test_the_verdict_exits_1_and_names_the_baseline_when_the_target_knows_only_the_most_frequent_value(
    tmp_path: Path, serve: Callable[[Target], FaultServer], capsys: pytest.CaptureFixture[str]
) -> None:
    cases = gold_cases(36)
    write_spec(tmp_path / "spec", cases)
    server = serve(Target(cases, lambda body: False))
    code = cli_main(["build", str(tmp_path / "spec"), "-o", str(tmp_path / "out"), "--target", server.spec()])
    shown = capsys.readouterr().out
    assert code == 1
    verdict = json.loads((tmp_path / "out.build" / VERDICT_FILE).read_text())
    assert verdict["chosen"] is None
    assert "trivial baseline" in verdict["sentence"] and "beats" in verdict["sentence"]
    assert "trivial baseline" in shown and "exit 1" in shown
    assert not (tmp_path / "out").exists()  # no pack: not the judged one (none won), not the offline stand-in
    # The nearest known case copied is scored beside them, on the same splits, and shown.
    nearest = verdict["arms"]["nearest"]
    assert nearest["test"]["total"] == verdict["split"]["test"] and nearest["calls_per_case"] == 0
    assert "nearest case" in shown
    k, n = nearest["validation"]["passed"], verdict["split"]["validation"]
    assert k > 0  # the templated gold cases: a case's nearest neighbour often shares its labels
    assert f"copying the nearest known case's answers does as well or better ({k}/{n})" in verdict["sentence"]


def test_without_a_target_the_build_says_nothing_was_judged_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_spec(tmp_path / "spec", gold_cases(24))
    code = cli_main(["build", str(tmp_path / "spec"), "-o", str(tmp_path / "out")])
    shown = capsys.readouterr().out
    assert code == 1
    assert "nothing was judged on a model" in shown
    assert "full marks" not in shown.split("verdict:")[-1]


def test_a_budget_stops_the_search_before_it_overspends(tmp_path: Path, serve: Callable[[Target], FaultServer]) -> None:
    cases = gold_cases(48)
    write_spec(tmp_path / "spec", cases)
    target = Target(cases, no_examples)
    result = compile_against(tmp_path, serve(target), budget=60)
    verdict = result.verdict.document
    assert verdict["stopped"]["pack"] == "budget"
    searched = [json.loads(line) for line in (tmp_path / "out.build" / TRIALS_FILE).read_text().splitlines()]
    assert searched[-1]["calls_total"] <= 60 * 0.85  # the search kept to its share; the test split is paid after


def test_the_seeded_split_is_stratified_reproducible_and_reports_labels_train_never_shows(tmp_path: Path) -> None:
    cases = gold_cases(40)
    cases.append(
        {"id": "rare", "input": {"message": "ticket-999 rare"}, "expected": {"topic": "account", "urgency": "low"}}
    )
    write_spec(tmp_path / "spec", cases)
    spec = load_spec(tmp_path / "spec")
    first, again = split_gold(spec), split_gold(spec)
    assert first == again
    assert sorted(first.train + first.validation + first.test) == sorted(c["id"] for c in cases)
    for ids in (first.validation, first.test):
        assert {next(c for c in cases if c["id"] == i)["expected"]["topic"] for i in ids} >= {"billing"}
    assert 8 <= len(first.test) <= 12 and 8 <= len(first.validation) <= 12


def test_the_judged_pack_gets_the_auto_threshold_as_its_gates_floor_with_an_edge_to_the_unsure_end(
    tmp_path: Path,
) -> None:
    cases = gold_cases(48)
    write_spec(tmp_path / "spec", cases, extra="unsure_end: review\nauto_accuracy: 0.7\n")
    target = Target(cases, lambda body: True)
    with FaultServer(answer=target, logprobs=True, token_logprob=-0.05) as server:
        result = compile_against(tmp_path, server)
    auto = result.verdict.document["auto"]
    assert auto["threshold"] is not None and 0.5 < auto["threshold"] <= 1.0, auto["reason"]
    assert auto["validation"]["cases"] >= 10 and auto["test"]["share"] == 1.0
    written = load_pack(tmp_path / "out")
    gated = [n for n in written.nodes.values() if n.kind == "generate" and n.confidence is not None]
    assert gated and all(n.confidence.min == auto["threshold"] for n in gated)
    for node in gated:
        assert [e.target for e in written.outgoing(node.id, "on_unsure")] == ["review"]


def test_cases_that_expect_no_output_are_not_scored_for_any_arm(
    tmp_path: Path, serve: Callable[[Target], FaultServer]
) -> None:
    cases = gold_cases(36)
    for case in cases[::4]:
        case["expected"] = {}  # a case that checks only its route: one call and the baseline would pass it free
    write_spec(tmp_path / "spec", cases)
    result = compile_against(tmp_path, serve(Target(cases, no_examples)))
    verdict = result.verdict.document
    split = json.loads((tmp_path / "out.build" / SPLIT_FILE).read_text())
    empty = {c["id"] for c in cases if not c["expected"]}
    assert verdict["split"]["validation"] == len(set(split["validation"]) - empty)
    assert verdict["split"]["test"] == len(set(split["test"]) - empty)
    assert verdict["arms"]["baseline"]["test"]["total"] == verdict["split"]["test"]


def test_judged_on_a_target_the_planner_and_the_offline_check_never_see_a_test_case(
    tmp_path: Path, serve: Callable[[Target], FaultServer]
) -> None:
    cases = gold_cases(36)
    write_spec(tmp_path / "spec", cases)
    seen: list[set[str]] = []

    class Watching:
        name = "watching"

        def plan(self, request: Any, cancel: Any = None) -> Any:
            seen.append({c.id for c in request.spec.gold})
            return make_planner("rules").plan(request, cancel)

    build(
        load_spec(tmp_path / "spec"),
        Watching(),  # type: ignore[arg-type]
        tmp_path / "b",
        out=tmp_path / "out",
        target=serve(Target(cases, no_examples)).spec(),
        concurrency=2,
    )
    split = json.loads((tmp_path / "b" / SPLIT_FILE).read_text())
    assert seen and all(ids == set(split["train"]) | set(split["validation"]) for ids in seen)
    evalset = (tmp_path / "b" / "attempts" / "1" / "pack" / "evalset.jsonl").read_text()
    offline_ids = {json.loads(line)["id"] for line in evalset.splitlines()}
    assert offline_ids and not offline_ids & set(split["test"])
