"""Calibration from the evalset (runtime/calibration.py): reliability table, threshold
curve and proposed threshold per gated node, in the eval report and the CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.calibration import Calibration, calibrate, format_calibration, gate_minimums
from runtime.cli import main
from runtime.confidence import ConfidenceGate
from runtime.evaluate import EvalReport
from runtime.pack.fields import FieldRule
from runtime.pack.model import Pack
from runtime.trace import Step, Trace
from tests.support.confidence import gate_classify

REPO = Path(__file__).resolve().parents[2]
TRIAGE = REPO / "packs" / "support_triage"


def gated_trace(case_id: str, value: Any, p: float | None, *, node: str = "classify") -> Trace:
    conf = {"field": "category", "value": value, "p": p, "margin": 0.1, "source": "logprobs"}
    return Trace(
        run_id=f"r-{case_id}",
        pack="t",
        case_id=case_id,
        steps=[Step(node=node, step=0, kind="generate", status="ok", writes={"category": value}, confidence=conf)],
    )


def runs_of(pairs: list[tuple[float, bool]]) -> list[tuple[Trace, dict[str, Any]]]:
    return [
        (gated_trace(f"c{i}", "billing" if ok else "technical", p), {"category": "billing"})
        for i, (p, ok) in enumerate(pairs)
    ]


# 10 runs: the confident ones are right, the unsure ones mostly wrong.
TEN = [(0.99, True), (0.97, True), (0.95, True), (0.9, True), (0.9, True), (0.83, True)]
TEN += [(0.7, False), (0.6, True), (0.5, False), (0.3, False)]


def test_it_pairs_each_gated_nodes_confidence_with_whether_its_value_was_right() -> None:
    cal = calibrate(runs_of(TEN))["classify"]
    assert cal.field == "category" and cal.source == "logprobs"
    assert sorted(cal.pairs) == sorted(TEN)
    assert cal.accuracy == 0.7


def test_it_proposes_the_lowest_threshold_that_reaches_the_target() -> None:
    cal = calibrate(runs_of(TEN + TEN))["classify"]
    point, sentence = cal.propose(0.95)
    assert point is not None
    assert point.threshold == 0.83 and point.auto == 12 and point.auto_accuracy == 1.0
    assert sentence == "at 0.83, 60% of cases go through automatically at 100% accuracy; the rest go to the next tier"
    assert point.accuracy_low is not None and 0.5 < point.accuracy_low < 1.0


def test_it_proposes_no_threshold_with_fewer_than_ten_cases_behind_it() -> None:
    cal = calibrate(runs_of(TEN))["classify"]  # 0.83 reaches 95%, on 6 cases
    point, reason = cal.propose(0.95)
    assert point is None
    assert reason == (
        "no threshold is proposed: the lowest that reaches 95% auto-tier accuracy, 0.83, has 6 cases in its "
        "auto tier, fewer than 10; add gold cases"
    )


def test_it_says_why_when_no_threshold_reaches_the_target() -> None:
    cal = calibrate(runs_of([(0.9, False), (0.8, True), (0.4, False)]))["classify"]
    point, reason = cal.propose(0.95)
    assert point is None
    assert reason == "no threshold reaches 95% auto-tier accuracy; the best is 50% at 0.8 (66.7% of cases)"


def test_it_bins_p_into_a_reliability_table() -> None:
    bins = calibrate(runs_of(TEN))["classify"].bins()
    assert len(bins) == 10
    top = bins[9]
    assert top["count"] == 5 and top["accuracy"] == 1.0 and top["mean_p"] == pytest.approx(0.942)
    assert bins[7] == {"low": 0.7, "high": 0.8, "count": 1, "mean_p": 0.7, "accuracy": 0.0}
    assert bins[0]["count"] == 0 and bins[0]["accuracy"] is None
    assert sum(b["count"] for b in bins) == 10


def test_it_leaves_out_cases_without_the_field_and_steps_without_p() -> None:
    runs = runs_of(TEN[:2])
    runs.append((gated_trace("no-field", "billing", 0.9), {"priority": "p1"}))
    runs.append((gated_trace("no-p", "billing", None), {"category": "billing"}))
    runs.append((Trace(run_id="never-reached", pack="t"), {"category": "billing"}))
    cal = calibrate(runs)["classify"]
    assert len(cal.pairs) == 2 and cal.skipped == 1 and cal.without_p == 1


def test_it_counts_the_last_visit_of_a_node_in_a_run() -> None:
    trace = gated_trace("loop", "technical", 0.4)
    trace.steps.append(gated_trace("loop", "billing", 0.9).steps[0])
    assert calibrate([(trace, {"category": "billing"})])["classify"].pairs == [(0.9, True)]


def test_it_reports_the_nodes_current_min_beside_the_proposal() -> None:
    doc = calibrate(runs_of(TEN + TEN), {"classify": 0.5})["classify"].to_dict(0.95)
    assert doc["min"] == 0.5
    assert doc["current"]["auto"] == 18 and doc["current"]["auto_accuracy"] == pytest.approx(7 / 9)
    assert doc["proposed"]["threshold"] == 0.83 and doc["proposed"]["auto_share"] == 0.6
    assert [pt["threshold"] for pt in doc["curve"]] == [0.3, 0.5, 0.6, 0.7, 0.83, 0.9, 0.95, 0.97, 0.99]


def test_it_reads_each_gated_nodes_min_from_the_pack() -> None:
    nodes = {
        "classify": SimpleNamespace(id="classify", confidence=ConfidenceGate("category", 0.8)),
        "route": SimpleNamespace(id="route", confidence=ConfidenceGate("queue", 0.6)),
        "extract": SimpleNamespace(id="extract", confidence=None),
    }
    assert gate_minimums(cast(Pack, SimpleNamespace(nodes=nodes))) == {"classify": 0.8, "route": 0.6}


def test_it_finds_no_gated_node_in_traces_without_confidence() -> None:
    trace = Trace(run_id="r", pack="t", steps=[Step(node="classify", step=0, kind="generate", status="ok")])
    assert calibrate([(trace, {"category": "billing"})]) == {}


pairs_strategy = st.lists(
    st.tuples(st.floats(min_value=0, max_value=1, allow_nan=False), st.booleans()), min_size=1, max_size=60
)


@given(pairs_strategy)
def test_it_lets_every_case_through_at_threshold_zero(pairs: list[tuple[float, bool]]) -> None:
    cal = Calibration("n", "f", pairs=pairs)
    assert cal.at(0).auto_share == 1.0
    assert cal.at(0).auto_accuracy == cal.accuracy
    assert cal.curve()[0].auto_accuracy == cal.accuracy


@given(pairs_strategy)
def test_it_never_lets_more_through_as_the_threshold_rises(pairs: list[tuple[float, bool]]) -> None:
    cal = Calibration("n", "f", pairs=pairs)
    curve = cal.curve()
    assert [pt.threshold for pt in curve] == sorted({p for p, _ in pairs})
    shares = [pt.auto_share for pt in curve]
    assert shares == sorted(shares, reverse=True)
    assert all(pt == cal.at(pt.threshold) for pt in curve)


@given(pairs_strategy, st.floats(min_value=0, max_value=1), st.floats(min_value=0, max_value=1))
def test_it_lets_no_more_through_at_a_higher_threshold(pairs: list[tuple[float, bool]], a: float, b: float) -> None:
    cal = Calibration("n", "f", pairs=pairs)
    low, high = sorted((a, b))
    assert cal.at(high).auto_share <= cal.at(low).auto_share


@given(pairs_strategy, st.floats(min_value=0.01, max_value=1))
def test_it_proposes_a_threshold_that_meets_the_target(pairs: list[tuple[float, bool]], target: float) -> None:
    cal = Calibration("n", "f", pairs=pairs)
    point, _ = cal.propose(target)
    reaching = [pt for pt in cal.curve() if (pt.auto_accuracy or 0) >= target and pt.auto >= 10]
    if point is None:
        assert reaching == []
    else:
        assert point.auto_accuracy is not None and point.auto_accuracy >= target
        assert point.threshold == min(pt.threshold for pt in reaching)


# -- the report and the CLI -----------------------------------------------------------


@pytest.fixture
def gated_eval(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real eval of support_triage, with the confidence a gate on classify records
    (tests/support/confidence.py)."""
    module = sys.modules["runtime.evaluate"]  # `runtime.evaluate` is the exported function
    real = module.evaluate

    def gated(*args: Any, **kwargs: Any) -> EvalReport:
        return gate_classify(real(*args, **kwargs))

    monkeypatch.setattr(module, "evaluate", gated)


@pytest.mark.usefixtures("gated_eval")
def test_it_puts_calibration_in_the_json_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(TRIAGE), "--json", "--target-auto-accuracy", "0.9"]) == 0
    doc = json.loads(capsys.readouterr().out)
    cal = doc["calibration"]["classify"]
    assert cal["field"] == "category" and cal["runs"] == 14 and cal["skipped"] == 1 and cal["target"] == 0.9
    assert cal["proposed"]["threshold"] == 0.9
    assert cal["proposed"]["auto_share"] == pytest.approx(10 / 14)
    assert cal["proposed"]["auto_accuracy"] == 1.0
    assert [b["count"] for b in cal["bins"]] == [0, 0, 0, 0, 4, 0, 0, 0, 0, 10]


@pytest.mark.usefixtures("gated_eval")
def test_it_prints_the_proposal_and_a_reliability_table(capsys: pytest.CaptureFixture[str]) -> None:
    main(["eval", str(TRIAGE)])
    out = capsys.readouterr().out
    assert "calibration of classify.category (14 runs, p from logprobs):" in out
    assert "    target 95%: propose min 0.9 (95% lower bound of its accuracy 72.2%)\n" in out
    assert (
        "      at 0.9, 71.4% of cases go through automatically at 100% accuracy; the rest go to the next tier\n" in out
    )
    assert "    0.4-0.5       4   0.400       50%" in out
    assert "    0.9-1.0      10   0.900      100%" in out


def test_it_prints_no_calibration_for_a_pack_without_a_gate(capsys: pytest.CaptureFixture[str]) -> None:
    main(["eval", str(TRIAGE)])
    assert "calibration" not in capsys.readouterr().out


def test_it_refuses_a_target_outside_zero_to_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(TRIAGE), "--target-auto-accuracy", "1.5"]) == 2
    assert "--target-auto-accuracy must be above 0 and at most 1" in capsys.readouterr().err


def test_it_formats_a_node_that_reaches_no_target() -> None:
    doc = calibrate(runs_of([(0.9, False), (0.4, True)]))["classify"].to_dict(0.95)
    text = format_calibration({"classify": doc})
    assert "target 95%: no threshold reaches 95% auto-tier accuracy" in text


def test_it_judges_the_chosen_value_by_the_fields_rule() -> None:
    steps = [Step(node="tag", step=0, kind="generate", status="ok", confidence=_conf("label", " Billing ", 0.9))]
    trace = Trace(run_id="r", pack="t", steps=steps)
    plain = calibrate([(trace, {"label": "billing"})])["tag"]
    loose = calibrate([(trace, {"label": "billing"})], rules={"label": FieldRule("loose")})["tag"]
    assert (plain.to_dict(0.9)["accuracy"], loose.to_dict(0.9)["accuracy"]) == (0.0, 1.0)


def _conf(field: str, value: Any, p: float) -> dict[str, Any]:
    return {"field": field, "value": value, "p": p, "margin": p, "source": "logprobs"}


def test_it_never_counts_a_run_the_vote_held_as_automatic() -> None:
    held = {**_conf("label", "billing", 0.99), "held": "vote"}
    runs = [
        (Trace(run_id="a", pack="t", steps=[Step("tag", 0, "generate", "unsure", confidence=held)]), {"label": "x"}),
        (
            Trace(run_id="b", pack="t", steps=[Step("tag", 0, "generate", "ok", confidence=_conf("label", "x", 0.5))]),
            {"label": "x"},
        ),
    ]
    cal = calibrate(runs)["tag"]
    doc = cal.to_dict(0.9)
    assert doc["held_by_vote"] == 1 and doc["accuracy"] == 0.5
    # At every threshold the held run is outside the auto tier but inside the total.
    assert [(pt["auto"], pt["auto_share"]) for pt in doc["curve"]] == [(1, 0.5)]
    assert doc["proposed"]["threshold"] is None and "fewer than 10" in doc["proposed"]["reason"]
