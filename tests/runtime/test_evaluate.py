"""The evalset runner: scoring, blame, coverage, tiers, the baseline gate."""

from __future__ import annotations

import json
from pathlib import Path

from runtime import (
    DEFAULT_TOLERANCES,
    METRIC_DIRECTIONS,
    CaseProblem,
    baseline_document,
    check_baseline,
    evaluate,
    load_pack,
    open_backend,
)
from tests.support.runtime_packs import ENUM_SCHEMA, pf, write_pack


def three_step(tmp_path: Path, script: dict[str, object]) -> Path:
    cases = [
        {
            "id": "bill",
            "input": {"ticket": "refund"},
            "expected": {"category": "billing", "queue": "money"},
            "path": ["classify", "route"],
            "end": "done",
        },
        {
            "id": "tech",
            "input": {"ticket": "crash"},
            "expected": {"category": "technical", "queue": "eng"},
            "end": "done",
        },
    ]
    return write_pack(
        tmp_path / "p",
        nodes={
            "classify": {"kind": "generate", "reads": ["input.ticket"], "writes": ["category"]},
            "route": {"kind": "generate", "reads": ["category"], "writes": ["queue"]},
            "done": {"kind": "end"},
            "fallback": {"kind": "end"},
        },
        edges=[
            {"from": "classify", "to": "route"},
            {"from": "classify", "on_fail": "fallback"},
            {"from": "route", "to": "done"},
        ],
        grammars={"classify": ENUM_SCHEMA},
        script=script,
        cases=cases,
    )


GOOD = {
    "cases": {
        "bill": {"classify": {"category": "billing"}, "route": {"queue": "money"}},
        "tech": {"classify": {"category": "technical"}, "route": {"queue": "eng"}},
    },
    "prices": {"input": 1.0, "output": 2.0},
}


def test_it_passes_every_case_of_a_correct_model(tmp_path: Path) -> None:
    pack = load_pack(three_step(tmp_path, GOOD))
    report = evaluate(pack, open_backend(pack.model or "", base_dir=pack.root))
    assert (report.passed, report.total) == (2, 2)
    assert report.tiers() == {"auto": 2, "escalated": 0, "failed": 0, "auto_accuracy": 1.0}
    cov = report.coverage()
    assert (cov["taken"], cov["total"]) == (2, 3)
    assert cov["untaken"] == ["classify -> fallback (on_fail)"]
    assert report.metrics()["cost_per_case"] > 0


def test_it_blames_the_node_whose_write_first_diverged(tmp_path: Path) -> None:
    script = json.loads(json.dumps(GOOD))
    script["cases"]["tech"]["classify"] = {"category": "billing"}  # wrong, and route then follows it
    script["cases"]["tech"]["route"] = {"queue": "money"}
    pack = load_pack(three_step(tmp_path, script))
    report = evaluate(pack, open_backend(pack.model or "", base_dir=pack.root))
    [failed] = [c for c in report.cases if not c.passed]
    assert failed.case_id == "tech"
    assert failed.blamed == "classify"
    assert {d.field for d in failed.diffs} == {"category", "queue"}
    assert report.failures_by_node() == {"classify": 1}


def test_it_blames_the_node_that_left_the_happy_path(tmp_path: Path) -> None:
    script = json.loads(json.dumps(GOOD))
    script["cases"]["bill"]["classify"] = {"category": "refunds"}  # never valid: on_fail to fallback
    pack = load_pack(three_step(tmp_path, script))
    report = evaluate(pack, open_backend(pack.model or "", base_dir=pack.root))
    failed = next(c for c in report.cases if c.case_id == "bill")
    assert not failed.passed and failed.blamed == "classify" and failed.tier == "failed"
    [end, *_] = failed.problems
    assert (end.kind, str(end)) == ("end", "expected to stop at 'done', stopped at 'fallback'")
    assert failed.rejections == {"schema": 4}
    assert report.tiers()["auto_accuracy"] == 1.0


def test_the_baseline_gate_rejects_a_worse_model(tmp_path: Path) -> None:
    root = three_step(tmp_path, GOOD)
    baseline = tmp_path / "baseline.json"
    good = pf("eval", str(root), "--write-baseline", str(baseline))
    assert good.returncode == 0, good.stderr
    assert pf("eval", str(root), "--baseline", str(baseline)).returncode == 0
    worse = pf("eval", str(root), "--baseline", str(baseline), "--model", "sim:error=0.6,seed=3")
    assert worse.returncode == 4  # the gate failed, not merely some cases
    assert "baseline gate: REGRESSION" in worse.stdout


def test_check_baseline_applies_tolerances(tmp_path: Path) -> None:
    pack = load_pack(three_step(tmp_path, GOOD))
    report = evaluate(pack, open_backend(pack.model or "", base_dir=pack.root))
    doc = baseline_document(report)
    doc["metrics"]["mean_model_calls"] = report.metrics()["mean_model_calls"] / 1.05
    assert all(r["ok"] for r in check_baseline(report.metrics(), doc))  # +5% calls is inside the 10% tolerance
    doc["tolerances"]["mean_model_calls"] = 0.01
    rows = {r["metric"]: r["ok"] for r in check_baseline(report.metrics(), doc)}
    assert rows["mean_model_calls"] is False and rows["pass_rate"] is True


def test_it_writes_the_report_as_json(tmp_path: Path) -> None:
    out = pf("eval", str(three_step(tmp_path, GOOD)), "--json")
    assert out.returncode == 0
    doc = json.loads(out.stdout)
    assert {
        "pack",
        "passed",
        "total",
        "metrics",
        "tiers",
        "coverage",
        "failures_by_node",
        "per_case",
        "per_node",
        "cases",
    } <= set(doc)
    assert doc["cases"][0]["path"] == ["classify", "route", "done"]
    assert doc["per_node"]["classify"]["attempts"] == 2


def test_it_selects_cases_by_tag(tmp_path: Path) -> None:
    root = three_step(tmp_path, GOOD)
    lines = (root / "evalset.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["tags"] = ["smoke"]
    (root / "evalset.jsonl").write_text(json.dumps(first) + "\n" + lines[1] + "\n")
    pack = load_pack(root)
    report = evaluate(pack, open_backend(pack.model or "", base_dir=pack.root), tags={"smoke"})
    assert [c.case_id for c in report.cases] == ["bill"]


def test_it_reads_back_problems_stored_as_dicts_and_as_old_sentences() -> None:
    stored = [
        CaseProblem("path", "path did not visit 'route' (took a > b)").to_dict(),
        "expected to stop at 'done', stopped at 'fallback'",
        "run failed: boom",
    ]
    assert [CaseProblem.from_stored(p).kind for p in stored] == ["path", "end", "status"]


def test_it_gates_a_plain_mapping_of_metrics_by_direction() -> None:
    baseline = {"metrics": {"pass_rate": 0.9, "cost_per_case": 1.0}}
    rows = check_baseline({"pass_rate": 0.95, "cost_per_case": 1.2}, baseline)
    assert [(r["metric"], r["ok"]) for r in rows] == [("pass_rate", True), ("cost_per_case", False)]
    assert METRIC_DIRECTIONS["pass_rate"] == "higher" and set(METRIC_DIRECTIONS) == set(DEFAULT_TOLERANCES)
