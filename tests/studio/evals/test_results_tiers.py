"""The confidence tier page: /evals/<id>/tiers."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from studio.projects.models import Project
from tests.support.eval_results import add_run, make_eval, sample_eval


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
