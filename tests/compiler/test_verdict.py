"""The verdict's statistics and the auto tier (compiler/verdict.py): the Clopper-Pearson
bound, the threshold chosen on validation (refused below 10 cases), and a case that ends
at the unsure end is never auto (a real run of an emitted pack against a loopback target)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compiler import load_spec, parse_plan
from compiler.induce import induce
from compiler.target_cache import CachedBackend
from compiler.trials import CaseOutcome, NodeSetting, TrialRunner
from compiler.verdict import MIN_AUTO_CASES, choose_threshold, clopper_pearson_lower, mcnemar, measure_auto
from runtime import open_backend
from tests.support.fault_server import FaultServer
from tests.support.tickets import gold_cases, write_spec


def outcome(i: int, passed: bool, confidence: float | None, eligible: bool = True) -> CaseOutcome:
    return CaseOutcome(
        id=f"c{i}",
        passed=passed,
        score=float(passed),
        fields={"f": passed},
        confidence=confidence,
        eligible=eligible,
        calls=1,
        tokens=10,
        overflow=False,
    )


@pytest.mark.parametrize(("k", "n", "expected"), [(10, 10, 0.6915), (9, 10, 0.5550), (45, 50, 0.7819), (0, 5, 0.0)])
def test_the_clopper_pearson_lower_bound_matches_the_exact_interval(k: int, n: int, expected: float) -> None:
    assert clopper_pearson_lower(k, n) == pytest.approx(expected, abs=5e-4)


def test_it_chooses_the_lowest_threshold_whose_lower_bound_reaches_the_target() -> None:
    # 40 confident right answers, then 20 unsure ones that are mostly wrong
    cases = [outcome(i, True, 0.95) for i in range(40)] + [outcome(40 + i, i % 4 == 0, 0.4) for i in range(20)]
    tier = choose_threshold(cases, 0.9)
    assert tier.threshold == 0.95
    assert tier.validation_cases == 40 and tier.lower_bound is not None and tier.lower_bound >= 0.9


def test_it_refuses_a_threshold_backed_by_fewer_than_ten_validation_cases() -> None:
    cases = [outcome(i, True, 0.99) for i in range(MIN_AUTO_CASES - 1)] + [
        outcome(100 + i, False, 0.5) for i in range(20)
    ]
    tier = choose_threshold(cases, 0.5)
    assert tier.threshold is None
    assert "refused" in tier.reason and f"{MIN_AUTO_CASES - 1} validation cases" in tier.reason


def test_it_measures_the_tier_on_test_beside_one_call_on_the_same_cases() -> None:
    validation = [outcome(i, True, 0.9) for i in range(30)]
    tier = choose_threshold(validation, 0.85)
    test = [outcome(i, True, 0.9) for i in range(6)] + [outcome(6 + i, False, 0.1) for i in range(4)]
    one_call = [outcome(i, i < 3, None) for i in range(10)]
    measured = measure_auto(tier, test, one_call)
    assert (measured.test_cases, measured.test_share, measured.test_accuracy) == (6, 0.6, 1.0)
    assert measured.one_call_accuracy == 0.5  # one call on the six auto cases only, not on all ten


def test_mcnemar_counts_the_discordant_test_cases() -> None:
    pack = [outcome(i, True, None) for i in range(8)] + [outcome(8, False, None)]
    one = [outcome(i, i < 3, None) for i in range(9)]
    found = mcnemar(pack, one)
    assert found is not None and (found["fixed"], found["broken"], found["cases"]) == (5, 0, 9)
    assert found["p"] == pytest.approx(0.0625)


def test_a_case_that_ends_at_the_unsure_end_is_never_auto(tmp_path: Path) -> None:
    cases = gold_cases(12)
    write_spec(tmp_path / "spec", cases, extra="unsure_end: review\n")
    spec = load_spec(tmp_path / "spec")
    plan = parse_plan(
        {
            "name": "tickets",
            "entry": "classify",
            "nodes": [
                {"id": "classify", "kind": "generate", "reads": ["input.message"], "writes": ["topic", "urgency"]},
                {"id": "done", "kind": "end"},
                {"id": "review", "kind": "end"},
            ],
            "edges": [{"from": "classify", "to": "done"}, {"from": "classify", "on_fail": "review"}],
        },
        spec,
    )
    unsure = {"ticket-001", "ticket-002"}

    def answer(body: dict[str, object]) -> str:
        text = json.dumps(body["messages"])
        if any(u in text for u in unsure):
            return "no json here"  # every draw refused: the node takes on_fail to the unsure end
        exp = next(c["expected"] for c in cases if c["input"]["message"].split(":")[0] in text)
        return json.dumps(exp)

    with FaultServer(answer=answer, logprobs=False) as server:
        backend = CachedBackend(open_backend(server.spec()), tmp_path / "cache", server.spec())
        induction = induce([(c.input, c.expected) for c in spec.gold], list(spec.outputs))
        runner = TrialRunner(spec, induction, {}, tmp_path / "search", backend, model=server.spec(), train=[])
        setting = (("classify", NodeSetting(shots=0)),)
        outcomes = {o.id: o for o in runner.score("pack", plan, setting, [c.id for c in spec.gold])}
        backend.close()
    assert not outcomes["c001"].eligible and not outcomes["c002"].eligible
    assert all(o.eligible and o.passed for i, o in outcomes.items() if i not in ("c001", "c002"))
    tier = choose_threshold(list(outcomes.values()), 0.5)
    assert tier.threshold is not None and tier.validation_cases == 10  # the two unsure cases are left out


def test_the_lower_bound_holds_at_large_counts_without_overflow() -> None:
    assert clopper_pearson_lower(1050, 1100) == pytest.approx(0.9413, abs=2e-3)
    assert 0.0 < clopper_pearson_lower(5000, 5000) < 1.0
