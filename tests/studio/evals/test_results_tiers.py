"""The confidence tier page: /evals/<id>/tiers."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from runtime import EvalReport
from studio.evals.models import Eval
from studio.evals.results.calibration import calibration
from studio.evals.views.summary import TIER_COLOURS
from studio.projects.models import Project
from tests.support.confidence import gate_classify
from tests.support.css import STUDIO_CSS, rules
from tests.support.eval_results import add_run, example_pack, make_eval, run_example, sample_eval, store_report


def test_it_shows_count_accuracy_and_cost_per_tier(as_owner: Client, project: Project, owner: User) -> None:
    ev = make_eval(project, owner)
    add_run(ev, "a1", cost=0.002)
    add_run(ev, "a2", status="failed", cost=0.004)
    add_run(ev, "h1", tier="escalated", cost=0.01)
    page = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/tiers")
    assert page.status_code == 200
    text = page.content.decode()
    row = text[text.index('<span class="pill auto">auto</span>') :]
    row = row[: row.index("</tr>")]
    assert ">2<" in row and "50.0%" in row and "$0.003000" in row
    assert "Accuracy inside each tier" in text


def test_it_requires_login(project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    assert Client().get(f"/p/{ev.project.slug}/evals/{ev.pk}/tiers").status_code == 302


def test_it_hides_the_eval_from_strangers(as_stranger: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    assert as_stranger.get(f"/p/{ev.project.slug}/evals/{ev.pk}/tiers").status_code == 404


def test_it_lets_a_viewer_read(as_viewer: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    assert as_viewer.get(f"/p/{ev.project.slug}/evals/{ev.pk}/tiers").status_code == 200


def test_it_answers_htmx_with_the_results_fragment(as_owner: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    page = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/tiers", headers={"HX-Request": "true"})
    assert page.content.decode().lstrip().startswith('<div id="results-page"')


# -- calibration of gated nodes ------------------------------------------------------------


def gated_eval(project: Project, owner: User) -> tuple[Eval, EvalReport]:
    """support_triage's real eval, with the confidence a gate on classify records."""
    report = gate_classify(run_example("support_triage")[1])
    ev = make_eval(project, owner)
    store_report(ev, report)
    return ev, report


def test_it_draws_the_threshold_curve_of_a_gated_node(as_owner: Client, project: Project, owner: User) -> None:
    ev, _ = gated_eval(project, owner)
    page = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/tiers")
    assert page.status_code == 200
    text = page.content.decode()
    section = text[text.index('<section class="calibration" data-node="classify">') :]
    section = section[: section.index("</section>")]
    assert "Proposed min 0.9:</strong> at 0.9, 71.4% of cases go through automatically at 100% accuracy" in section
    assert "the rest go to the next tier" in section
    svg = section[section.index("<svg") : section.index("</svg>")]
    assert 'class="curve"' in svg and "proposed min 0.9" in svg and "target 95%" in svg
    rows = section[section.index('<table class="reliability">') :]
    assert rows.count("<tr") == 11
    assert (
        '<td class="mono">0.9–1.0</td><td class="num">10</td><td class="num">0.900</td><td class="num">100.0%</td>'
        in rows
    )
    assert "1 run whose case expects no category" in section


def test_it_proposes_for_the_target_the_author_asks(as_owner: Client, project: Project, owner: User) -> None:
    ev, _ = gated_eval(project, owner)
    text = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/tiers?target=80").content.decode()
    assert "target 80%" in text
    assert (
        "Proposed min 0.4:</strong> at 0.4, all cases go through automatically at 85.7% accuracy; none go to the next tier"
        in text
    )


def test_it_computes_what_the_runtime_reports(project: Project, owner: User) -> None:
    ev, report = gated_eval(project, owner)
    pack = example_pack("support_triage")
    assert {node: cal.to_dict() for node, cal in calibration(ev, pack).items()} == report.calibration()


def test_it_shows_no_thresholds_for_a_pack_without_a_gate(as_owner: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    text = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/tiers").content.decode()
    assert "Confidence thresholds" not in text and 'class="calibration"' not in text


def test_a_passing_unanswered_case_is_drawn_as_a_warning_never_as_a_failure(
    as_owner: Client, project: Project, owner: User
) -> None:
    ev = make_eval(project, owner)
    add_run(ev, "st-13", status="passed", tier="failed")  # expected to go unanswered, and it did
    add_run(ev, "a1")
    cases = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/cases").content.decode()
    row = cases[cases.index('data-case="st-13"') :]
    row = row[: row.index("</tr>")]
    assert '<span class="pill passed">passed</span>' in row and '<span class="pill unanswered">unanswered</span>' in row
    css = rules(STUDIO_CSS)
    failure, warning = css[".results .pill.failed"], css[".results .pill.escalated"]
    assert css[".results .pill.unanswered"] == warning != failure
    for tab in ("tiers", "summary"):  # the tier bars: the pill's warning colour, not the failures' red
        page = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/{tab}").content.decode()
        assert f'fill="{TIER_COLOURS["unanswered"]}"' in page, tab
    root = css[":root"]
    assert warning["color"] == "var(--warn)" and failure["color"] == "var(--bad)"
    assert TIER_COLOURS["unanswered"] == root["--warn"] != root["--bad"]


def test_a_gate_on_several_fields_is_calibrated_on_all_of_them(as_owner: Client, project: Project, owner: User) -> None:
    """A `confidence: {fields: [...]}` step records each field's value: a run counts right
    only when every one is, and the page names the fields together."""
    report = run_example("support_triage")[1]
    right_at: dict[float, bool] = {}  # each run's p (all distinct) -> whether both fields are right
    for i, case in enumerate(sorted(report.cases, key=lambda c: c.case_id)):
        expected = report.expected.get(case.case_id, {})
        values = {"order_id": expected.get("order_id"), "amount_usd": expected.get("amount_usd")}
        if i % 2:  # every other run has one field wrong: the whole run is wrong
            values["amount_usd"] = 12345.0
        p = 0.3 + i / 100
        right_at[p] = not i % 2
        conf = {"field": "amount_usd", "value": values["amount_usd"], "p": p, "source": "logprobs"}
        for step in case.trace.steps:
            if step.node == "extract":
                step.confidence = {
                    **conf,
                    "margin": None,
                    "fields": {"order_id": 0.99, "amount_usd": p},
                    "values": values,
                }
    ev = make_eval(project, owner)
    store_report(ev, report)
    [(node, cal)] = calibration(ev, example_pack("support_triage")).items()
    assert node == "extract" and cal.field == "order_id, amount_usd"
    assert len(cal.pairs) >= 4 and all(ok == right_at[p] for p, ok in cal.pairs)
    assert {ok for _, ok in cal.pairs} == {True, False}
    assert {n: c.to_dict() for n, c in calibration(ev, example_pack("support_triage")).items()} == report.calibration()
    text = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/tiers").content.decode()
    section = text[text.index('<section class="calibration" data-node="extract">') :]
    assert "accuracy of order_id, amount_usd inside the auto tier" in section[: section.index("</section>")]
