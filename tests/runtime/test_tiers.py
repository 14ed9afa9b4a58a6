"""Model tiers (issue 12, docs/tiers.md): a generate node that fails its ladder, is
unsure, or keeps failing its assert on one tier is re-run on the next with the run's
committed state; past the last tier a person answers, checked like a model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    PERSON,
    MemoryStore,
    OutputRejected,
    Tier,
    Trace,
    check_answer,
    evaluate,
    load_pack,
    node_schema,
    open_backend,
    resume_run,
    run_pack,
)
from runtime.backends.base import ModelCall, ModelReply
from runtime.checkpoint import CheckpointStore
from runtime.report import format_report
from runtime.walker import RunOptions
from tests.support.fault_server import FaultServer
from tests.support.hierarchy import write_hierarchy
from tests.support.runtime_packs import ENUM_SCHEMA, LOOKUP_NODE, Killed, Recorder, Tools, pf, write_pack

GEN = {"kind": "generate", "reads": ["input.ticket"], "writes": ["category"]}
GARBAGE = "this is not json"


def tier_pack(
    tmp_path: Path,
    small: Any,
    large: Any,
    *,
    node: dict[str, Any] | None = None,
    on_fail: bool = False,
    cases: list[dict[str, Any]] | None = None,
    small_cases: dict[str, Any] | None = None,
    large_cases: dict[str, Any] | None = None,
) -> Path:
    """classify -> done (and -> fallback on_fail, when asked); the manifest's model
    (fakes/scripted.json) is the small tier, fakes/large.json the large one."""
    edges = [{"from": "classify", "to": "done"}]
    nodes: dict[str, Any] = {"classify": {**GEN, **(node or {})}, "done": {"kind": "end"}}
    if on_fail:
        edges.append({"from": "classify", "on_fail": "fallback"})
        nodes["fallback"] = {"kind": "end"}
    root = write_pack(
        tmp_path / "p",
        nodes=nodes,
        edges=edges,
        grammars={"classify": ENUM_SCHEMA},
        script={"nodes": {"classify": small}, "cases": small_cases or {}},
        cases=cases,
    )
    (root / "fakes" / "large.json").write_text(json.dumps({"nodes": {"classify": large}, "cases": large_cases or {}}))
    return root


def tiers_for(root: Path, large: str = "fakes/large.json") -> list[Tier]:
    return [
        Tier("small", Recorder(open_backend("fake:fakes/scripted.json", base_dir=root))),
        Tier("large", Recorder(open_backend(f"fake:{large}", base_dir=root))),
    ]


def run_on(root: Path, tiers: list[Tier], store: CheckpointStore | None = None, **kw: Any) -> Any:
    return run_pack(load_pack(root), {"ticket": "t"}, backend=tiers[0].backend, tiers=tiers, store=store, **kw)


def calls(tier: Tier) -> int:
    backend = tier.backend
    assert isinstance(backend, Recorder)
    return len(backend.calls)


# -- escalation, per reason ------------------------------------------------------------


def test_it_escalates_a_node_that_fails_its_ladder(tmp_path: Path) -> None:
    root = tier_pack(tmp_path, GARBAGE, {"category": "technical"})
    tiers = tiers_for(root)
    result = run_on(root, tiers)
    assert result.status == "done" and result.output == {"category": "technical"}
    step = result.trace.steps[0]
    assert step.tier == "large"
    assert step.escalations == [
        {
            "from": "small",
            "to": "large",
            "reason": "fail: parse: the answer was not a single valid JSON object (after 4 attempt(s))",
            "node": "classify",
        }
    ]
    assert [(c["tier"], c["status"], c["answer"]) for c in step.candidates] == [("small", "rejected", None)] * 4 + [
        ("large", "ok", {"category": "technical"})
    ]
    assert step.candidates[0]["reason"].startswith("parse: ")
    assert (calls(tiers[0]), calls(tiers[1])) == (4, 1)
    assert [a.tier for a in result.trace.attempts] == ["small"] * 4 + ["large"]
    assert step.attempt == 5  # attempt numbers run on across tiers: request ids stay distinct
    assert (result.trace.settled_by, result.settled_by, result.tier) == ("large", "large", "auto")
    assert result.trace.escalations == step.escalations


def test_it_escalates_a_node_whose_draws_disagree(tmp_path: Path) -> None:
    votes = [{"category": "billing"}, {"category": "technical"}, {"category": "other"}]
    root = tier_pack(tmp_path, votes, {"category": "other"}, node={"samples": 3, "agree": 2})
    result = run_on(root, tiers_for(root))
    assert result.status == "done" and result.output == {"category": "other"}
    step = result.trace.steps[0]
    assert step.tier == "large"
    assert [e["reason"] for e in step.escalations] == ["unsure: draws disagreed (1, 1, 1 of 3; need 2)"]
    assert [(c["tier"], c["status"]) for c in step.candidates] == [("small", "unsure")] * 3 + [("large", "ok")] * 2
    assert step.candidates[0]["reason"] == "draws disagreed (1, 1, 1 of 3; need 2)"


def test_it_escalates_a_node_below_its_confidence_gate(tmp_path: Path) -> None:
    root = tier_pack(
        tmp_path,
        {"category": "billing", "$probs": {"category": 0.5}},
        {"category": "billing", "$probs": {"category": 0.99}},
        node={"confidence": {"field": "category", "min": 0.8}},
    )
    result = run_on(root, tiers_for(root))
    assert result.status == "done" and result.output == {"category": "billing"}
    step = result.trace.steps[0]
    assert step.tier == "large"
    assert len(step.escalations) == 1 and step.escalations[0]["reason"].startswith("unsure: confidence 0.5 < 0.8")
    assert step.confidence is not None and step.confidence["p"] >= 0.8
    assert [(c["tier"], c["status"]) for c in step.candidates] == [("small", "unsure"), ("large", "ok")]


def test_it_escalates_a_node_whose_assert_keeps_failing(tmp_path: Path) -> None:
    root = tier_pack(tmp_path, {"category": "other"}, {"category": "billing"}, node={"assert": "category != 'other'"})
    tiers = tiers_for(root)
    result = run_on(root, tiers)
    assert result.output == {"category": "billing"}
    step = result.trace.steps[0]
    assert step.escalations[0]["reason"].startswith("fail: assert: the answer fails the check")
    assert [(c["tier"], c["status"], c["answer"]) for c in step.candidates[:1]] == [
        ("small", "rejected", {"category": "other"})
    ]
    assert calls(tiers[0]) == 4 and calls(tiers[1]) == 1


def test_it_does_not_escalate_a_node_the_first_tier_settles(tmp_path: Path) -> None:
    root = tier_pack(tmp_path, {"category": "billing"}, {"category": "other"})
    tiers = tiers_for(root)
    result = run_on(root, tiers)
    step = result.trace.steps[0]
    assert (step.tier, step.escalations, calls(tiers[1])) == ("small", [], 0)
    assert step.candidates == [{"tier": "small", "answer": {"category": "billing"}, "status": "ok", "reason": ""}]
    assert result.settled_by == "small"


# -- past the last tier -----------------------------------------------------------------


def test_it_waits_for_a_person_when_the_last_tier_is_unsure(tmp_path: Path) -> None:
    votes = [{"category": "billing"}, {"category": "technical"}] * 2  # by attempt number, which runs on
    root = tier_pack(tmp_path, votes, votes, node={"samples": 2, "agree": 2})
    store = MemoryStore()
    result = run_on(root, tiers_for(root), store=store, run_id="w1")
    assert (result.status, result.waiting_at, result.waiting_reason) == ("waiting", "classify", "escalated")
    assert [(e["from"], e["to"]) for e in result.trace.escalations] == [("small", "large"), ("large", PERSON)]
    assert result.trace.steps[-1].status == "wait" and len(result.trace.steps[-1].candidates) == 4
    record = store.get("w1")
    assert record.status == "waiting"
    assert record.result is not None and record.result["waiting_reason"] == "escalated"
    assert (result.tier, result.settled_by) == ("escalated", PERSON)


def test_an_answer_given_up_front_answers_a_person_past_the_last_tier(tmp_path: Path) -> None:
    root = tier_pack(tmp_path, GARBAGE, GARBAGE)
    seen: list[dict[str, Any]] = []
    result = run_on(
        root,
        tiers_for(root),
        answers={"classify": {"category": "other"}},
        answered_by="human:dan",
        options=RunOptions(on_escalate=seen.append),
    )
    assert result.status == "done" and result.output == {"category": "other"}
    step = result.trace.steps[0]
    assert (step.tier, step.provenance) == (PERSON, "human:dan")
    assert [(e["from"], e["to"]) for e in seen] == [("small", "large"), ("large", PERSON)]


def test_it_takes_the_on_fail_edge_past_the_last_tier(tmp_path: Path) -> None:
    root = tier_pack(tmp_path, GARBAGE, GARBAGE, on_fail=True)
    result = run_on(root, tiers_for(root))
    assert result.trace.path == ["classify", "fallback"]
    step = result.trace.steps[0]
    assert step.edge is not None and step.edge.kind == "on_fail"
    assert [(e["from"], e["to"]) for e in step.escalations] == [("small", "large")]
    assert step.tier == "large" and len(step.candidates) == 8
    assert result.tier == "failed"


def test_it_waits_for_a_person_when_the_last_tier_fails_without_an_on_fail_edge(tmp_path: Path) -> None:
    root = tier_pack(tmp_path, GARBAGE, GARBAGE)
    result = run_on(root, tiers_for(root))
    assert (result.status, result.waiting_at, result.waiting_reason) == ("waiting", "classify", "escalated")
    assert result.trace.escalations[-1]["to"] == PERSON
    assert result.trace.escalations[-1]["reason"].startswith("fail: parse:")


# -- a person's answer -----------------------------------------------------------------


def hierarchy_waiting(tmp_path: Path) -> tuple[Path, MemoryStore, list[Tier]]:
    """top (label) -> sub (choices from labels by label, 2 draws that must agree): both
    tiers' draws disagree at sub, so the run waits there for a person."""
    root = write_hierarchy(tmp_path / "p", sub={"samples": 2, "agree": 2})
    (root / "fakes").mkdir()
    sub = [{"sublabel": "cat"}, {"sublabel": "dog"}] * 2
    (root / "fakes" / "small.json").write_text(json.dumps({"nodes": {"top": {"label": "animal"}, "sub": sub}}))
    (root / "fakes" / "large.json").write_text(json.dumps({"nodes": {"sub": sub}}))
    tiers = [
        Tier("small", Recorder(open_backend("fake:fakes/small.json", base_dir=root))),
        Tier("large", Recorder(open_backend("fake:fakes/large.json", base_dir=root))),
    ]
    store = MemoryStore()
    result = run_pack(
        load_pack(root), {"text": "it purrs"}, backend=tiers[0].backend, tiers=tiers, store=store, run_id="h"
    )
    assert (result.status, result.waiting_at, result.waiting_reason) == ("waiting", "sub", "escalated")
    return root, store, tiers


def test_it_gives_the_schema_and_checks_an_answer_for_the_state(tmp_path: Path) -> None:
    root, _, _ = hierarchy_waiting(tmp_path)
    pack = load_pack(root)
    state = {"label": "animal", "input": {"text": "it purrs"}}
    schema = node_schema(pack, "sub", state)
    assert schema is not None and schema["properties"]["sublabel"]["enum"] == ["cat", "dog"]
    assert check_answer(pack, "sub", state, {"sublabel": "tree"}) == ['sublabel must be one of: "cat", "dog"']
    assert check_answer(pack, "sub", state, {"sublabel": "dog"}) == []
    assert check_answer(pack, "sub", state, {}) == ["the answer is missing required field(s): sublabel"]


def test_it_refuses_a_bad_answer_and_leaves_the_run_waiting(tmp_path: Path) -> None:
    root, store, tiers = hierarchy_waiting(tmp_path)
    pack = load_pack(root)
    before = store.take_over("h")[2]
    with pytest.raises(OutputRejected) as refused:
        resume_run(pack, "h", backend=tiers[0].backend, store=store, tiers=tiers, answers={"sub": {"sublabel": "tree"}})
    assert refused.value.reasons == ['sublabel must be one of: "cat", "dog"']
    assert store.get("h").status == "waiting"
    assert store.take_over("h")[2] == before  # nothing journaled
    assert calls(tiers[0]) == 3 and calls(tiers[1]) == 2  # and no model asked again


def test_it_commits_a_persons_answer_with_provenance_and_continues(tmp_path: Path) -> None:
    root, store, tiers = hierarchy_waiting(tmp_path)
    asked = calls(tiers[0]), calls(tiers[1])
    done = resume_run(
        load_pack(root),
        "h",
        backend=tiers[0].backend,
        store=store,
        tiers=tiers,
        answers={"sub": {"sublabel": "dog"}},
        answered_by="human:alice",
    )
    assert done.status == "done" and done.output == {"label": "animal", "sublabel": "dog"}
    step = done.trace.steps[-2]
    assert (step.node, step.status, step.tier, step.provenance) == ("sub", "ok", PERSON, "human:alice")
    assert step.writes == {"sublabel": "dog"}
    assert [(e["from"], e["to"]) for e in step.escalations] == [("small", "large"), ("large", PERSON)]
    assert [(c["tier"], c["status"]) for c in step.candidates] == [("small", "unsure")] * 2 + [("large", "unsure")] * 2
    assert (calls(tiers[0]), calls(tiers[1])) == asked
    assert (done.tier, done.settled_by) == ("escalated", PERSON)
    assert len(done.trace.attempts) == 5  # top's, then 2 + 2 at sub: replayed from the journal, once each
    again = Trace.from_dict(json.loads(json.dumps(done.trace.to_dict())))
    assert again.steps[-2].provenance == "human:alice" and again.settled_by == PERSON


def test_it_stays_waiting_when_resumed_without_an_answer(tmp_path: Path) -> None:
    root, store, tiers = hierarchy_waiting(tmp_path)
    again = resume_run(load_pack(root), "h", backend=tiers[0].backend, store=store, tiers=tiers)
    assert (again.status, again.waiting_at, again.waiting_reason) == ("waiting", "sub", "escalated")
    assert calls(tiers[0]) == 3 and calls(tiers[1]) == 2
    assert len(again.trace.steps[-1].candidates) == 4


def test_it_records_who_answered_a_human_node(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={
            "review": {"kind": "human", "reads": ["input.ticket"], "writes": ["approved"]},
            "done": {"kind": "end"},
        },
        edges=[{"from": "review", "to": "done"}],
        grammars={
            "review": {"type": "object", "required": ["approved"], "properties": {"approved": {"type": "boolean"}}}
        },
        script={"nodes": {}},
    )
    pack, store = load_pack(root), MemoryStore()
    backend = open_backend("fake:fakes/scripted.json", base_dir=root)
    waiting = run_pack(pack, {"ticket": "t"}, backend=backend, store=store, run_id="r")
    assert (waiting.status, waiting.waiting_reason) == ("waiting", "human")
    with pytest.raises(OutputRejected):
        resume_run(pack, "r", backend=backend, store=store, answers={"review": {"approved": "yes"}})
    assert store.get("r").status == "waiting"
    done = resume_run(
        pack, "r", backend=backend, store=store, answers={"review": {"approved": True}}, answered_by="human:bob"
    )
    assert done.status == "done" and done.trace.steps[0].provenance == "human:bob"


# -- kill and resume mid-escalation ---------------------------------------------------


class DiesOnFirstCall:
    """A backend whose process dies at its first call."""

    spec = "dies"

    def complete(self, call: ModelCall) -> ModelReply:
        raise Killed()

    def close(self) -> None:
        pass


def test_it_resumes_a_run_killed_mid_escalation_on_the_tier_it_had_reached(tmp_path: Path, sqlite_store: Any) -> None:
    root = write_pack(
        tmp_path / "p",
        manifest={"tools": ["lookup"]},
        nodes={
            "lookup": LOOKUP_NODE,
            "classify": {"kind": "generate", "reads": ["input.order", "total"], "writes": ["category"]},
            "done": {"kind": "end"},
        },
        edges=[{"from": "lookup", "to": "classify"}, {"from": "classify", "to": "done"}],
        grammars={"classify": ENUM_SCHEMA},
        script={"nodes": {"classify": GARBAGE}},
    )
    (root / "fakes" / "large.json").write_text(json.dumps({"nodes": {"classify": {"category": "billing"}}}))
    pack, tools, store = load_pack(root), Tools(), sqlite_store()
    small = Tier("small", Recorder(open_backend("fake:fakes/scripted.json", base_dir=root)))
    seen: list[dict[str, Any]] = []
    with pytest.raises(Killed):
        run_pack(
            pack,
            {"order": "A1"},
            backend=small.backend,
            tools=tools.registry(),
            store=store,
            run_id="k",
            tiers=[small, Tier("large", DiesOnFirstCall())],
            options=RunOptions(on_escalate=seen.append),
        )
    assert [(e["from"], e["to"]) for e in seen] == [("small", "large")]
    assert store.get("k").status == "running"
    tiers = tiers_for(root)
    result = resume_run(pack, "k", backend=tiers[0].backend, store=store, tools=tools.registry(), tiers=tiers)
    assert result.status == "done" and result.output == {"total": 40.0, "category": "billing"}
    assert [name for name, _ in tools.calls] == ["lookup"]  # no tool repeated
    assert (calls(tiers[0]), calls(tiers[1])) == (0, 1)  # resumed on the large tier, small not asked again
    step = result.trace.steps[-2]
    assert (step.node, step.tier, step.attempt) == ("classify", "large", 5)
    assert [(e["from"], e["to"]) for e in step.escalations] == [("small", "large")]
    assert [(c["tier"], c["status"]) for c in step.candidates] == [("small", "rejected")] * 4 + [("large", "ok")]
    assert [a.tier for a in result.trace.attempts] == ["small"] * 4 + ["large"]
    _, _, journal = store.take_over("k")
    assert [e.kind for e in journal] == ["tool", "step", "escalate", "step", "step"]


# -- eval ------------------------------------------------------------------------------


def test_it_splits_an_eval_by_the_tier_that_settled_each_case(tmp_path: Path) -> None:
    root = tier_pack(
        tmp_path,
        {"category": "billing"},
        {"category": "technical"},
        cases=[
            {"id": "easy", "input": {"ticket": "a"}, "expected": {"category": "billing"}},
            {"id": "hard", "input": {"ticket": "b"}, "expected": {"category": "technical"}},
            {"id": "stuck", "input": {"ticket": "c"}, "expected": {"category": "other"}},
        ],
        # A script keyed by case answers only its cases; an empty entry takes the `nodes` default.
        small_cases={"easy": {}, "hard": {"classify": GARBAGE}, "stuck": {"classify": GARBAGE}},
        large_cases={"hard": {}, "stuck": {"classify": GARBAGE}},
    )
    tiers = tiers_for(root)
    report = evaluate(load_pack(root), tiers[0].backend, tiers=tiers, model="small", concurrency=1)
    by = report.tiers_by_model()
    assert list(by) == ["small", "large", PERSON]
    assert {k: (v["cases"], v["passed"]) for k, v in by.items()} == {"small": (1, 1), "large": (1, 1), PERSON: (1, 0)}
    assert (by["small"]["model_calls"], by["large"]["model_calls"]) == (9, 5)
    assert by["small"]["escalations"] == {"fail": 2, "unsure": 0}
    assert by["large"]["escalations"] == {"fail": 1, "unsure": 0}
    assert by["small"]["prompt_tokens"] > 0 and by["large"]["prompt_tokens"] > 0
    doc = report.to_dict()
    assert doc["tiers_by_model"] == json.loads(json.dumps(by))
    assert [c["settled_by"] for c in doc["cases"]] == ["small", "large", PERSON]
    text = format_report(report)
    assert "tiers by model" in text
    assert "    small: settled 1 (1 passed); escalated 2 (fail 2, unsure 0); 9 model calls" in text
    assert f"    {PERSON}: settled 1 (0 passed)" in text


def test_an_eval_without_tiers_has_one_row_named_by_its_model(tmp_path: Path) -> None:
    root = tier_pack(
        tmp_path, {"category": "billing"}, {}, cases=[{"id": "a", "input": {"ticket": "a"}, "expected": {}}]
    )
    pack = load_pack(root)
    report = evaluate(pack, open_backend("fake:fakes/scripted.json", base_dir=root), model="m")
    assert list(report.tiers_by_model()) == ["m"] and report.tiers_by_model()["m"]["model_calls"] == 1
    assert "tiers by model" not in format_report(report)


# -- a real server that answers garbage on the small tier --------------------------------


@pytest.fixture
def server() -> Iterator[FaultServer]:
    def answer(body: dict[str, Any]) -> str:
        return GARBAGE if body.get("model") == "small" else json.dumps({"category": "technical"})

    with FaultServer(answer=answer) as running:
        yield running


def test_it_escalates_to_the_next_tier_when_a_real_server_answers_garbage(tmp_path: Path, server: FaultServer) -> None:
    root = tier_pack(tmp_path, {}, {})
    tiers = [Tier(name, open_backend(server.spec("backoff=0.01", model=name))) for name in ("small", "large")]
    try:
        result = run_on(root, tiers)
    finally:
        for tier in tiers:
            tier.backend.close()
    assert result.status == "done" and result.output == {"category": "technical"}
    step = result.trace.steps[0]
    assert step.tier == "large"
    assert step.escalations[0]["reason"] == (
        "fail: parse: the answer was not a single valid JSON object (after 4 attempt(s))"
    )
    sent = server.completions()
    assert [r.body["model"] for r in sent] == ["small"] * 4 + ["large"]
    ids = [r.request_id for r in sent]
    assert len(set(ids)) == 5 and ids[-1] is not None and ids[-1].endswith(".classify.5")


# -- the command line ------------------------------------------------------------------


def test_the_cli_runs_and_evals_with_escalate_to(tmp_path: Path) -> None:
    root = tier_pack(
        tmp_path,
        GARBAGE,
        {"category": "technical"},
        cases=[{"id": "a", "input": {"ticket": "a"}, "expected": {"category": "technical"}}],
    )
    trace = tmp_path / "trace.json"
    out = pf(
        "run",
        str(root),
        "--input",
        '{"ticket": "t"}',
        "--model",
        "fake:fakes/scripted.json",
        "--escalate-to",
        "big=fake:fakes/large.json",
        "--trace",
        str(trace),
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"category": "technical"}
    saved = json.loads(trace.read_text())
    assert saved["ladder"] == ["fake:fakes/scripted.json", "big"] and saved["settled_by"] == "big"
    assert saved["escalations"][0]["to"] == "big"
    out = pf("eval", str(root), "--json", "--no-progress", "--escalate-to", "fake:fakes/large.json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["tiers_by_model"]["fake:fakes/large.json"]["cases"] == 1
    out = pf("run", str(root), "--input", "{}", "--escalate-to", "big=")
    assert out.returncode == 2 and "give a model spec" in out.stderr


def test_the_cli_says_why_a_run_waits_after_the_last_tier(tmp_path: Path) -> None:
    root = tier_pack(tmp_path, GARBAGE, GARBAGE)
    db = tmp_path / "runs.sqlite"
    args = ("run", str(root), "--db", str(db), "--escalate-to", "big=fake:fakes/large.json")
    out = pf(*args, "--input", '{"ticket": "t"}', "--run-id", "c1")
    assert out.returncode == 3
    assert "escalated: big -> person: fail: parse:" in out.stderr
    assert "waiting at node 'classify'" in out.stderr
    out = pf(*args, "--resume", "c1", "--answer", '{"category": "nope"}')
    assert out.returncode == 2 and "does not match grammars/classify.json" in out.stderr
    out = pf(*args, "--resume", "c1", "--answer", '{"category": "other"}', "--answered-by", "human:carol")
    assert out.returncode == 0 and json.loads(out.stdout) == {"category": "other"}
