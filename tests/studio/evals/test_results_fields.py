"""Per-field accuracy, the mean score and the trivial baseline on the summary page."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runtime import Pack, evaluate, load_pack, open_backend
from studio.evals.results.fields import field_scores
from studio.projects.models import Project
from tests.support.eval_results import add_run, example_pack, make_eval, run_example, sample_eval, store_report
from tests.support.runtime_packs import write_pack


def labelled_pack(root: Path) -> Pack:
    """A category (exact) and labels (set): the scripted model gets some of each wrong."""
    gold = [
        (
            {"category": "billing", "labels": ["refund", "urgent"]},
            {"category": "billing", "labels": ["urgent", "refund"]},
        ),
        ({"category": "billing", "labels": ["refund"]}, {"category": "technical", "labels": ["refund"]}),
        ({"category": "technical", "labels": ["bug"]}, {"category": "technical", "labels": ["bug", "urgent"]}),
        ({"category": "billing", "labels": ["refund"]}, {"category": "billing", "labels": []}),
    ]
    write_pack(
        root,
        manifest={"fields": {"labels": {"compare": "set"}}},
        nodes={
            "classify": {"kind": "generate", "reads": ["input.ticket"], "writes": ["category", "labels"]},
            "done": {"kind": "end"},
        },
        edges=[{"from": "classify", "to": "done"}],
        script={"cases": {f"c{i}": {"classify": answer} for i, (_, answer) in enumerate(gold)}},
        cases=[{"id": f"c{i}", "input": {"ticket": "t"}, "expected": want} for i, (want, _) in enumerate(gold)],
    )
    return load_pack(root)


def test_it_agrees_with_the_runtime_report_on_field_scores(project: Project, owner: User, tmp_path: Path) -> None:
    pack = labelled_pack(tmp_path / "p")
    report = evaluate(pack, open_backend(pack.model or "", base_dir=pack.root), concurrency=1)
    assert 0 < report.passed < report.total
    ev = make_eval(project, owner)
    store_report(ev, report)
    got = field_scores(ev, pack)
    assert got["fields"] == report.field_table()
    assert "f1_micro" in got["fields"]["labels"]
    assert got["baseline"] == report.trivial_baseline()
    assert got["mean_score"] == pytest.approx(report.mean_score())
    assert (got["runs"], got["unknown"]) == (report.total, 0)


def test_it_scores_a_wrong_field_an_error_run_and_a_case_the_evalset_lost(project: Project, owner: User) -> None:
    pack = example_pack("support_triage")
    case = pack.cases[0]
    ev = make_eval(project, owner)
    add_run(ev, case.id)  # every field right
    wrong = {"field": "category", "expected": case.expected["category"], "actual": "nonsense", "missing": False}
    add_run(ev, case.id, repeat=1, status="failed", diffs=[wrong])
    add_run(ev, case.id, repeat=2, status="error", tier="")  # no outcome: every field wrong
    add_run(ev, "gone-1")  # not in the evalset at this version
    got = field_scores(ev, pack)
    n = len(case.expected)
    assert got["fields"]["category"]["accuracy"] == pytest.approx(1 / 3)
    assert all(r["accuracy"] == pytest.approx(2 / 3) for f, r in got["fields"].items() if f != "category")
    assert got["mean_score"] == pytest.approx((1 + (n - 1) / n + 0) / 3)
    assert got["baseline"]["pass_rate"] == 1.0  # three runs of one case: its values are the modes
    assert (got["runs"], got["unknown"]) == (3, 1)


def test_it_shows_per_field_accuracy_beside_the_baseline_and_the_mean_score(
    as_viewer: Client, project: Project, owner: User
) -> None:
    ev = sample_eval(project, owner)
    _, report = run_example("support_triage")
    page = as_viewer.get(f"/p/{ev.project.slug}/evals/{ev.pk}/summary")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="field-table"' in text
    base = report.trivial_baseline()
    assert f"(trivial baseline {base['mean_score']:.2f})" in text
    assert f"(trivial baseline {100 * base['pass_rate']:.1f}%)" in text
    table = report.field_table()
    for name in ("category", "priority"):
        row = text[text.index(f'<td class="mono">{name}</td>') :].split("</tr>")[0]
        assert f"{100 * table[name]['accuracy']:.1f}%" in row
        assert f"{100 * table[name]['baseline_accuracy']:.1f}%" in row
    assert "1 scored run of cases no longer in the evalset is left out" in text  # bad-1


def test_it_leaves_the_field_table_out_of_an_eval_without_scored_runs(
    as_owner: Client, project: Project, owner: User
) -> None:
    ev = make_eval(project, owner, status="running")
    page = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/summary")
    assert page.status_code == 200
    assert 'id="field-table"' not in page.content.decode()
