"""studio/evals/results/ on rows built in plain sight (the helpers: tests/support/eval_results.py)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from django.contrib.auth.models import User

from runtime import check_baseline, wilson_interval
from studio.evals.models import Eval, EvalCase
from studio.evals.results.compare import NotComparable, compare, history
from studio.evals.results.cost import cost_table
from studio.evals.results.gate import baseline_for, gate
from studio.evals.results.nodes import coverage, node_blame, node_stats
from studio.evals.results.summary import case_pass_rates, metrics_of, summarize, tiers
from studio.projects.models import Project, create_project
from studio.projects.views import example_files
from tests.support.eval_results import (
    add_run,
    example_pack,
    make_eval,
    rejected_trace,
    run_example,
    store_report,
)

# -- summary ------------------------------------------------------------------------------


def test_it_computes_the_pass_rate_with_a_wilson_interval(project: Project, owner: User) -> None:
    ev = make_eval(project, owner, total=13)
    for i in range(8):
        add_run(ev, f"p{i}", cost=0.001 * (i + 1), latency=0.1 * (i + 1))
    add_run(ev, "f1", status="failed", blamed="classify")
    add_run(ev, "f2", status="failed", blamed="classify")
    add_run(ev, "e1", status="error", tier="")
    add_run(ev, "q1", status="queued", tier="")
    add_run(ev, "c1", status="cancelled", tier="")
    summary = summarize(ev)
    assert (summary["scored"], summary["passed"], summary["total"]) == (11, 8, 13)
    assert summary["pass_rate"] == pytest.approx(8 / 11)
    assert summary["ci95"] == pytest.approx(wilson_interval(8, 11))
    assert summary["counts"]["queued"] == summary["counts"]["cancelled"] == 1
    assert summary["cost"]["p50"] == pytest.approx(0.003)  # nearest rank over 11 runs: 3 zeros, then 0.001...
    assert summary["cost"]["p95"] == pytest.approx(0.008)


def test_it_agrees_with_the_runtime_report_on_a_real_eval(project: Project, owner: User) -> None:
    pack, report = run_example("refund_desk")
    ev = make_eval(project, owner)
    store_report(ev, report)
    assert metrics_of(ev) == pytest.approx(report.metrics())
    split = tiers(ev)
    runtime_tiers = report.tiers()  # keyed by the stored tier names; the studio says "unanswered"
    assert {k: split[k] for k in ("auto", "escalated", "auto_accuracy")} == {
        k: runtime_tiers[k] for k in ("auto", "escalated", "auto_accuracy")
    }
    assert split["unanswered"] == runtime_tiers["failed"]
    cov = coverage(ev, pack)
    assert {e["name"]: e["cases"] for e in cov["edges"]} == report.coverage()["per_edge"]
    assert [e["name"] for e in cov["untaken"]] == report.coverage()["untaken"]
    blame = {r["node"]: r for r in node_blame(ev, pack)["nodes"]}
    for node, want in report.per_node().items():
        got = blame[node]
        assert (got["attempts"], got["rejections"], got["tokens"]) == (
            want["attempts"],
            want["rejections"],
            want["tokens"],
        )
        assert (got["latency_s"], got["cost_usd"]) == pytest.approx((want["latency_s"], want["cost_usd"]))
    assert {n: r["failures"] for n, r in blame.items() if r["failures"]} == report.failures_by_node()
    assert sum(r["tool_calls"] for r in blame.values()) == sum(len(c.trace.tool_calls) for c in report.cases)


def test_it_splits_tiers_with_accuracy_inside_auto(project: Project, owner: User) -> None:
    ev = make_eval(project, owner)
    add_run(ev, "a1", cost=0.002)
    add_run(ev, "a2", cost=0.004)
    add_run(ev, "a3", status="failed", cost=0.006)
    add_run(ev, "s1", tier="escalated", cost=0.01)
    add_run(ev, "x1", status="error", tier="")  # no tier: counted as unanswered, as the runtime does
    split = {r["tier"]: r for r in tiers(ev)["rows"]}
    assert [split[t]["count"] for t in ("auto", "escalated", "unanswered")] == [3, 1, 1]
    assert split["auto"]["accuracy"] == pytest.approx(2 / 3)
    assert split["auto"]["cost_per_case"] == pytest.approx(0.004)
    assert split["unanswered"]["accuracy"] == 0 and "failed" not in split


# -- blame --------------------------------------------------------------------------------


def test_it_shares_blame_across_nodes(project: Project, owner: User) -> None:
    ev = make_eval(project, owner)
    for i in range(3):
        add_run(ev, f"c{i}", status="failed", blamed="classify")
    add_run(ev, "e1", status="failed", blamed="extract")
    add_run(ev, "ok", blamed="")
    add_run(ev, "queued", status="queued", blamed="sentiment")  # not scored: not blamed
    blame = node_blame(ev, example_pack())
    assert blame["failures"] == 4
    assert blame["shares"]["classify"] == pytest.approx(0.75)
    assert blame["shares"]["extract"] == pytest.approx(0.25)
    assert blame["shares"]["sentiment"] == 0
    assert [r["node"] for r in blame["nodes"]][:4] == ["classify", "extract", "sentiment", "prioritise"]


def test_it_counts_attempts_rejections_and_reasons_per_node_from_traces(project: Project, owner: User) -> None:
    ev = make_eval(project, owner)
    add_run(ev, "bad-1", status="failed", blamed="classify", trace=rejected_trace("bad-1"))
    add_run(ev, "bad-2", status="failed", blamed="classify", trace=rejected_trace("bad-2"))
    add_run(ev, "gone", status="cancelled", trace=rejected_trace("gone"))  # not scored
    nodes = {r["node"]: r for r in node_blame(ev, example_pack())["nodes"]}
    classify = nodes["classify"]
    assert (classify["attempts"], classify["rejections"], classify["tokens"]) == (4, 2, 436)
    assert classify["categories"] == {"schema": 2}
    assert classify["reasons"] == [{"category": "schema", "reason": 'category must be one of: "billing"', "count": 2}]
    assert classify["latency_s"] == pytest.approx(1.5)
    assert nodes["extract"]["tool_calls"] == 0  # support_triage has no tool node: that pass is skipped
    extract = node_stats(ev)["nodes"]["extract"]
    assert (extract["tool_calls"], extract["tool_latency_s"]) == (2, pytest.approx(0.125))


def test_it_recomputes_node_stats_when_rows_change(project: Project, owner: User) -> None:
    ev = make_eval(project, owner, status="running")
    add_run(ev, "bad-1", status="failed", trace=rejected_trace("bad-1"))
    assert node_stats(ev)["nodes"]["classify"]["attempts"] == 2
    add_run(ev, "bad-2", status="failed", trace=rejected_trace("bad-2"))
    assert node_stats(ev)["nodes"]["classify"]["attempts"] == 4


def test_it_reads_node_stats_the_backend_stored_in_the_summary(project: Project, owner: User) -> None:
    ev = make_eval(project, owner)
    add_run(ev, "bad-1", status="failed", trace=rejected_trace("bad-1"))
    ev.summary = {"node_stats": node_stats(ev)}
    ev.summary["node_stats"]["nodes"]["classify"]["attempts"] = 99  # proves it is read, not recomputed
    ev.save()
    assert node_stats(ev)["nodes"]["classify"]["attempts"] == 99


# -- coverage -----------------------------------------------------------------------------


def test_it_counts_runs_per_edge_and_lists_untaken_edges(project: Project, owner: User) -> None:
    ev = make_eval(project, owner)
    add_run(ev, "billing", edges=[0, 2, 3, 4])
    add_run(ev, "billing-2", edges=[0, 2, 3, 4, 4])  # an edge taken twice in one run counts once
    add_run(ev, "manual", status="failed", tier="failed", edges=[1])
    add_run(ev, "queued", status="queued", edges=[5])  # not scored
    cov = coverage(ev, example_pack())
    assert {e["index"]: e["cases"] for e in cov["edges"]} == {0: 2, 1: 1, 2: 2, 3: 2, 4: 2, 5: 0, 6: 0, 7: 0}
    assert (cov["taken"], cov["total"]) == (5, 8)
    assert [e["name"] for e in cov["untaken"]] == [
        "prioritise -> tech_support [category == 'technical']",
        "prioritise -> account_team [category == 'account']",
        "prioritise -> general",
    ]


def test_it_lists_runs_whose_declared_path_or_end_was_not_reached(project: Project, owner: User) -> None:
    ev = make_eval(project, owner)
    add_run(ev, "wrong-end", status="failed", problems=["expected to stop at 'billing_ops', stopped at 'general'"])
    add_run(ev, "wrong-path", status="failed", problems=["path did not visit 'extract' (took classify > general)"])
    add_run(ev, "crashed", status="failed", problems=["run failed: boom"])
    add_run(ev, "fine")
    cov = coverage(ev, example_pack())
    assert [(c["case_id"], len(c["problems"])) for c in cov["unreached"]] == [("wrong-end", 1), ("wrong-path", 1)]
    assert cov["unreached_count"] == 2


# -- cost ---------------------------------------------------------------------------------


def test_it_sorts_the_cost_table_by_a_whitelisted_column(project: Project, owner: User) -> None:
    ev = make_eval(project, owner)
    add_run(ev, "a", cost=0.3, tokens=(1, 1, 1), latency=3)
    add_run(ev, "b", cost=0.1, tokens=(50, 0, 0), latency=1)
    add_run(ev, "c", cost=0.2, tokens=(5, 5, 0), latency=2)
    assert [r["case_id"] for r in cost_table(ev)["rows"]] == ["a", "c", "b"]
    assert [r["case_id"] for r in cost_table(ev, sort="tokens", direction="asc")["rows"]] == ["a", "c", "b"]
    assert [r["case_id"] for r in cost_table(ev, sort="latency", direction="asc")["rows"]] == ["b", "c", "a"]
    table = cost_table(ev, sort="trace; DROP TABLE", direction="sideways", per_page=2, page=9)
    assert (table["sort"], table["dir"], table["page"], table["pages"]) == ("cost", "desc", 2, 2)


def test_the_cost_table_says_a_tier_as_every_page_does(project: Project, owner: User) -> None:
    """Stored "failed" is the "unanswered" tier (runtime TIER_WORDS), on the cost page too;
    a run that has not finished has no tier yet."""
    ev = make_eval(project, owner)
    add_run(ev, "st-13", status="passed", tier="failed")  # expected to go unanswered, and it did
    add_run(ev, "st-01", status="passed", tier="auto")
    add_run(ev, "st-02", status="running", tier="")
    tiers = {r["case_id"]: r["tier"] for r in cost_table(ev)["rows"]}
    assert tiers == {"st-13": "unanswered", "st-01": "auto", "st-02": ""}


# -- compare ------------------------------------------------------------------------------


def _outcomes(ev: Eval, passed: list[bool], repeat: int = 0) -> None:
    for i, ok in enumerate(passed):
        add_run(ev, f"case-{i:02d}", repeat=repeat, status="passed" if ok else "failed")


def test_it_gives_the_exact_mcnemar_p_value_on_a_known_table(project: Project, owner: User) -> None:
    # before/after: 5 pass both, 2 fail both, 1 fixed, 8 broken
    before = [True] * 5 + [False] * 2 + [False] * 1 + [True] * 8
    after = [True] * 5 + [False] * 2 + [True] * 1 + [False] * 8
    a, b = make_eval(project, owner, ago_s=60), make_eval(project, owner)
    _outcomes(a, before)
    _outcomes(b, after)
    cmp = compare(a, b)
    assert (cmp["both_pass"], cmp["n_fixed"], cmp["n_broken"], cmp["both_fail"]) == (5, 1, 8, 2)
    # two-sided binomial tail: 2 * (C(9,0) + C(9,1)) / 2^9
    assert cmp["p_value"] == pytest.approx(2 * (1 + 9) / 512)
    assert [c["case_id"] for c in cmp["fixed"]] == ["case-07"]
    deltas = {m["metric"]: m for m in cmp["metrics"]}
    assert deltas["pass_rate"]["delta"] == pytest.approx(-7 / 16)
    assert deltas["pass_rate"]["better"] is False


def test_it_pairs_by_case_when_the_repeats_differ(project: Project, owner: User) -> None:
    a, b = make_eval(project, owner, ago_s=60), make_eval(project, owner, repeats=3)
    _outcomes(a, [False, True])
    for repeat, outcome in enumerate([[True, True], [True, False], [False, False]]):
        _outcomes(b, outcome, repeat=repeat)
    cmp = compare(a, b)
    assert cmp["paired_by"] == "case"
    assert (cmp["n_fixed"], cmp["n_broken"]) == (1, 1)  # case-00: 0 -> 2/3; case-01: 1 -> 1/3
    assert cmp["fixed"][0]["after"] == pytest.approx(2 / 3)


def test_it_refuses_to_compare_different_case_sets(project: Project, owner: User) -> None:
    a, b = make_eval(project, owner), make_eval(project, owner)
    _outcomes(a, [True, True, True])
    _outcomes(b, [True, True])
    with pytest.raises(NotComparable, match="1 case\\(s\\) only in eval"):
        compare(a, b)


def test_it_refuses_to_compare_evals_of_different_projects(project: Project, owner: User) -> None:
    other = create_project(slug="other", name="Other", owner=owner, pack_files=example_files("support_triage"))
    a, b = make_eval(project, owner), make_eval(other, owner)
    with pytest.raises(NotComparable, match=r"different|only evals of one project"):
        compare(a, b)


# -- history ------------------------------------------------------------------------------


def test_it_gives_pass_rate_and_cost_per_version_and_model(project: Project, owner: User) -> None:
    v1, v2 = "a" * 40, "b" * 40
    old = make_eval(project, owner, version=v1, ago_s=300)
    _outcomes(old, [True, False])
    newer = make_eval(project, owner, version=v1, ago_s=200)  # the same version again: the later one counts
    _outcomes(newer, [True, True])
    other_model = make_eval(project, owner, version=v1, model="openai:http://x#m", ago_s=150)
    _outcomes(other_model, [False, False])
    v2_eval = make_eval(project, owner, version=v2, ago_s=100)
    add_run(v2_eval, "case-00", cost=0.5)
    add_run(v2_eval, "case-01", status="failed", cost=1.5)
    make_eval(project, owner, version=v2, status="queued")  # nothing scored: no point
    hist = history(project, order=[v1, v2])
    assert hist["versions"] == [v1, v2]
    by_model = {s["model"]: [(p["x"], p["pass_rate"], p["cost_per_case"]) for p in s["points"]] for s in hist["series"]}
    assert by_model["fake:fakes/scripted.json"] == [(0, 1.0, 0.0), (1, 0.5, 1.0)]
    assert by_model["openai:http://x#m"] == [(0, 0.0, 0.0)]
    assert len(hist["evals"]) == 5


# -- the gate -----------------------------------------------------------------------------


def test_it_rejects_a_worse_eval_at_the_gate(project: Project, owner: User) -> None:
    base = make_eval(project, owner, ago_s=60)
    _outcomes(base, [True] * 9 + [False])
    worse = make_eval(project, owner)
    _outcomes(worse, [True] * 7 + [False] * 3)
    rows = {r["metric"]: r for r in gate(worse, base)}
    assert rows["pass_rate"]["ok"] is False
    assert (rows["pass_rate"]["baseline"], rows["pass_rate"]["current"]) == pytest.approx((0.9, 0.7))
    assert all(r["ok"] for name, r in rows.items() if name != "pass_rate")


def test_it_gates_exactly_as_the_runtime_does(project: Project, owner: User) -> None:
    _, report = run_example("refund_desk")
    base, now = make_eval(project, owner, ago_s=60), make_eval(project, owner)
    store_report(base, report)
    store_report(now, report)
    EvalCase.objects.filter(eval=now).update(cost_usd=1.0)  # cost per case far above the baseline
    rows = gate(now, base)
    runtime_rows = check_baseline(metrics_of(now), {"metrics": report.metrics()})
    assert [(r["metric"], r["ok"]) for r in rows] == [(r["metric"], r["ok"]) for r in runtime_rows]
    assert [r["limit"] for r in rows] == pytest.approx([r["limit"] for r in runtime_rows])
    assert [r["metric"] for r in rows if not r["ok"]] == ["cost_per_case"]


def test_it_gates_only_evals_made_after_the_baseline(project: Project, owner: User) -> None:
    before = make_eval(project, owner, ago_s=120)
    base = make_eval(project, owner, ago_s=60)
    after = make_eval(project, owner)
    Eval.objects.filter(pk=base.pk).update(is_baseline=True)
    assert baseline_for(after) == base
    assert baseline_for(before) is None
    assert baseline_for(base) is None


def test_it_reports_zero_rates_for_an_eval_with_no_scored_runs(project: Project, owner: User) -> None:
    ev = make_eval(project, owner, status="queued")
    add_run(ev, "q", status="queued")
    summary = summarize(ev)
    assert summary["pass_rate"] is None
    assert summary["ci95"] == (0.0, 1.0)
    assert not math.isnan(summary["cost"]["mean"])
    assert metrics_of(ev)["pass_rate"] == 0.0


def test_it_gives_each_case_a_pass_rate_over_its_repeats(project: Project, owner: User, as_owner: Any) -> None:
    ev = make_eval(project, owner, repeats=4)
    for repeat in range(4):
        add_run(ev, "steady", repeat=repeat, status="passed")
        add_run(ev, "flaky", repeat=repeat, status="passed" if repeat % 2 else "failed")
    assert [(r["case_id"], r["passed"], r["runs"]) for r in case_pass_rates(ev)] == [
        ("flaky", 2, 4),
        ("steady", 4, 4),
    ]
    page = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/summary")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="per-case-pass-rate"' in html and html.index("flaky") < html.index("steady")
