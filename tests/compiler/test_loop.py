"""The compile loop: re-plan feedback, gold untouched, the best pack kept, budgets,
cancel and resume, on a small spec with a recorded sequence of plans."""

from __future__ import annotations

import copy
import json
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from compiler import AttemptRecord, Budgets, CompilerError, PlanRequest, PlanResult, Progress, Spec, build, load_spec
from runtime import Cancelled
from tests.support.triage import BROKEN, GOLD, INVALID, RIGHT, WORSE, write_spec


class Recorded:
    """Replays plan documents (attempt N gets the Nth; the last repeats) and keeps every
    request it was given. `tokens`/`cost` are reported per plan; `on_plan` runs inside
    the call (to cancel mid-plan, say)."""

    name = "recorded:test"

    def __init__(self, *docs: dict[str, Any], tokens: int = 0, cost: float = 0.0, on_plan: Any = None) -> None:
        self.docs = [copy.deepcopy(d) for d in docs]
        self.tokens = tokens
        self.cost = cost
        self.on_plan = on_plan
        self.requests: list[PlanRequest] = []

    def plan(self, request: PlanRequest, cancel: threading.Event | None = None) -> PlanResult:
        self.requests.append(request)
        if self.on_plan is not None:
            self.on_plan(cancel)
        doc = self.docs[min(request.attempt, len(self.docs)) - 1]
        return PlanResult(copy.deepcopy(doc), tokens=self.tokens, cost_usd=self.cost)


@pytest.fixture
def spec(tmp_path: Path) -> Spec:
    return load_spec(write_spec(tmp_path / "spec"))


def statuses(records: list[AttemptRecord]) -> list[str]:
    return [r.status for r in records]


def test_it_names_the_failing_node_when_it_replans(spec: Spec, tmp_path: Path) -> None:
    planner = Recorded(BROKEN, RIGHT)
    result = build(spec, planner, tmp_path / "work", out=tmp_path / "pack")
    assert [r.offline_score for r in result.attempts] == [0.75, 1.0]
    assert planner.requests[0].feedback is None
    feedback = planner.requests[1].feedback
    assert feedback is not None
    assert feedback.attempt == 1
    assert feedback.failing_nodes == ("check",)
    assert feedback.score == 0.75
    assert feedback.plan == BROKEN
    assert "check: 1" in feedback.report and "t1" in feedback.report
    assert (result.best, result.full_marks, result.stopped) == (2, True, "full_marks")


def test_it_hands_plan_problems_back_when_a_plan_is_invalid(spec: Spec, tmp_path: Path) -> None:
    planner = Recorded(INVALID, RIGHT)
    result = build(spec, planner, tmp_path / "work")
    assert statuses(result.attempts) == ["plan_invalid", "ok"]
    feedback = planner.requests[1].feedback
    assert feedback is not None and feedback.problems
    assert any("entry" in p for p in feedback.problems)


def test_it_never_edits_gold(spec: Spec, tmp_path: Path) -> None:
    build(spec, Recorded(WORSE, BROKEN, RIGHT), tmp_path / "work", out=tmp_path / "pack")
    packs = sorted((tmp_path / "work" / "attempts").glob("*/pack"))
    assert len(packs) == 3
    for pack in [*packs, tmp_path / "pack"]:
        assert (pack / "evalset.jsonl").read_bytes() == spec.gold_bytes
    assert (spec.root / "gold.jsonl").read_bytes() == spec.gold_bytes


def test_it_never_overwrites_a_better_pack_with_a_worse_one(spec: Spec, tmp_path: Path) -> None:
    out = tmp_path / "pack"
    result = build(spec, Recorded(BROKEN, WORSE, INVALID), tmp_path / "work", out=out, attempts=3)
    assert [r.offline_score for r in result.attempts] == [0.75, 0.5, None]
    assert (result.best, result.full_marks, result.out) == (1, False, out)
    first = tmp_path / "work" / "attempts" / "1" / "pack" / "graph.yaml"
    assert (out / "graph.yaml").read_bytes() == first.read_bytes()
    assert json.loads((tmp_path / "work" / "best.json").read_text())["attempt"] == 1
    # a resumed build whose next attempt is worse still leaves the better pack in place
    build(spec, Recorded(WORSE), tmp_path / "work", out=out, attempts=4)
    assert (out / "graph.yaml").read_bytes() == first.read_bytes()


def test_it_replaces_the_pack_when_an_attempt_is_better(spec: Spec, tmp_path: Path) -> None:
    out = tmp_path / "pack"
    build(spec, Recorded(WORSE, RIGHT), tmp_path / "work", out=out)
    right = tmp_path / "work" / "attempts" / "2" / "pack" / "graph.yaml"
    assert (out / "graph.yaml").read_bytes() == right.read_bytes()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".pack.")]


def test_it_stops_when_the_attempts_are_spent(spec: Spec, tmp_path: Path) -> None:
    result = build(spec, Recorded(BROKEN, WORSE), tmp_path / "work", attempts=2)
    assert (len(result.attempts), result.stopped, result.full_marks) == (2, "attempts", False)


def test_it_ends_when_the_planner_answers_a_plan_it_answered_before(spec: Spec, tmp_path: Path) -> None:
    result = build(spec, Recorded(BROKEN), tmp_path / "work", attempts=5)
    assert statuses(result.attempts) == ["ok", "repeated_plan"]
    assert result.stopped == "repeated_plan"
    assert not (tmp_path / "work" / "attempts" / "2" / "pack").exists()  # nothing emitted or evaluated


def test_it_stops_when_the_planner_tokens_are_spent(spec: Spec, tmp_path: Path) -> None:
    result = build(spec, Recorded(BROKEN, WORSE, tokens=600), tmp_path / "work")
    assert (len(result.attempts), result.stopped) == (2, "planner_tokens")
    assert sum(r.tokens for r in result.attempts) == 1200


def test_it_stops_when_the_dollars_are_spent(spec: Spec, tmp_path: Path) -> None:
    result = build(spec, Recorded(BROKEN, WORSE, cost=2.0), tmp_path / "work")
    assert (len(result.attempts), result.stopped) == (2, "cost_usd")


def test_it_records_an_attempt_cancelled_while_planning(spec: Spec, tmp_path: Path) -> None:
    cancel = threading.Event()
    seen: list[Progress] = []
    result = build(
        spec, Recorded(BROKEN, on_plan=lambda c: c.set()), tmp_path / "work", cancel=cancel, on_progress=seen.append
    )
    assert (statuses(result.attempts), result.stopped) == (["cancelled"], "cancelled")
    stored = json.loads((tmp_path / "work" / "attempts" / "1" / "attempt.json").read_text())
    assert stored["status"] == "cancelled"
    assert not (tmp_path / "work" / "attempts" / "1" / "pack").exists()
    assert seen[-1].stage == "cancelled"


def test_it_records_a_planner_call_cut_short_by_cancel(spec: Spec, tmp_path: Path) -> None:
    def interrupted(cancel: threading.Event | None) -> None:
        assert cancel is not None
        cancel.set()
        raise Cancelled("planner call cancelled")

    result = build(spec, Recorded(BROKEN, on_plan=interrupted), tmp_path / "work", cancel=threading.Event())
    assert statuses(result.attempts) == ["cancelled"]
    assert result.attempts[0].problems == ("planner call cancelled",)


def test_it_does_not_start_when_cancelled_before(spec: Spec, tmp_path: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    planner = Recorded(RIGHT)
    result = build(spec, planner, tmp_path / "work", cancel=cancel)
    assert (result.attempts, result.stopped, planner.requests) == ([], "cancelled", [])


def test_it_resumes_after_the_last_finished_attempt(spec: Spec, tmp_path: Path) -> None:
    work = tmp_path / "work"
    build(spec, Recorded(BROKEN), work, attempts=1)
    # a worker killed mid-attempt 2: its folder holds a plan and half a pack, no attempt.json
    half = work / "attempts" / "2"
    (half / "pack").mkdir(parents=True)
    (half / "plan.json").write_text(json.dumps(WORSE))
    planner = Recorded(BROKEN, RIGHT)
    result = build(spec, planner, work, out=tmp_path / "pack")
    assert [r.attempt for r in planner.requests] == [2]
    feedback = planner.requests[0].feedback
    assert feedback is not None and (feedback.attempt, feedback.failing_nodes) == (1, ("check",))
    assert [r.number for r in result.attempts] == [1, 2]
    assert (result.best, result.full_marks) == (2, True)
    assert json.loads((half / "plan.json").read_text()) == RIGHT


def test_it_reports_each_stage_of_an_attempt(spec: Spec, tmp_path: Path) -> None:
    seen: list[Progress] = []
    build(spec, Recorded(RIGHT), tmp_path / "work", on_progress=seen.append)
    stages = [p.stage for p in seen]
    assert stages[:1] == ["induce"] and stages[-1] == "done"
    for stage in ("plan", "emit", "load", "offline_eval"):
        assert stage in stages
    assert seen[-1].offline_score == 1.0


def test_it_keeps_every_attempts_files(spec: Spec, tmp_path: Path) -> None:
    build(spec, Recorded(BROKEN, RIGHT), tmp_path / "work")
    for n in ("1", "2"):
        folder = tmp_path / "work" / "attempts" / n
        for name in ("plan.json", "offline.json", "attempt.json", "pack/manifest.yaml", "pack/fakes/offline.json"):
            assert (folder / name).is_file(), name


def target_script(tmp_path: Path, wrong: dict[str, Any]) -> str:
    """A fake: target model answering gold, except the cases in `wrong`."""
    cases = {c["id"]: {"classify": c["expected"] or {"category": "other", "amount_usd": None}} for c in GOLD}
    cases.update({case: {"classify": answer} for case, answer in wrong.items()})
    path = tmp_path / "target.json"
    path.write_text(json.dumps({"cases": cases}))
    return f"fake:{path}"


def test_it_scores_attempts_on_the_validation_split_of_the_target_never_on_all_gold(spec: Spec, tmp_path: Path) -> None:
    target = target_script(tmp_path, {"t1": {"category": "other", "amount_usd": 20}})
    planner = Recorded(BROKEN, RIGHT)
    result = build(spec, planner, tmp_path / "work", target=target, attempts=3)
    # a graph that fails offline spends no target call; one that passes is scored on validation only.
    # Judged on a target, the offline check runs on train and validation (no test case): 2 of 3 pass
    assert [(r.offline_score, r.target_score) for r in result.attempts] == [(2 / 3, None), (1.0, 1.0)]
    assert not (tmp_path / "work" / "attempts" / "2" / "target.json").exists()
    assert result.verdict is not None and result.verdict.document["judged"] is True
    assert (tmp_path / "work" / "verdict.json").is_file()


def test_it_lets_a_free_planner_run_on_a_zero_dollar_budget(spec: Spec, tmp_path: Path) -> None:
    free = replace(spec, budgets=Budgets(attempts=2, planner_tokens=10, cost_usd=0.0))
    result = build(free, Recorded(BROKEN, WORSE), tmp_path / "work")
    assert (len(result.attempts), result.stopped) == (2, "attempts")


def test_it_refuses_a_work_dir_made_for_another_version_of_the_spec(spec: Spec, tmp_path: Path) -> None:
    build(spec, Recorded(RIGHT), tmp_path / "work")
    with (spec.root / "gold.jsonl").open("a") as gold:
        gold.write(json.dumps({**GOLD[0], "id": "t5"}) + "\n")
    with pytest.raises(CompilerError, match="another version of spec 'triage'"):
        build(load_spec(spec.root), Recorded(RIGHT), tmp_path / "work")
