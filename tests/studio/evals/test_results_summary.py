"""The summary page: /evals/<id>/summary."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from studio.projects.models import Project
from tests.support.eval_results import REJECTED, sample_eval


def test_it_shows_the_headline_numbers(as_owner: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    page = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/summary")
    assert page.status_code == 200
    text = page.content.decode()
    assert "93.8%" in text  # 15 of 16 runs passed
    assert "15 / 16" in text
    assert "95% CI" in text
    assert 'id="eval-summary"' in text
    assert "<svg" in text  # the tier chart
    assert "Mark as baseline" in text


def test_it_requires_login(project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    page = Client().get(f"/p/{ev.project.slug}/evals/{ev.pk}/summary")
    assert page.status_code == 302
    assert page["Location"].startswith("/login/")


def test_it_hides_the_eval_from_strangers(as_stranger: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    assert as_stranger.get(f"/p/{ev.project.slug}/evals/{ev.pk}/summary").status_code == 404
    assert as_stranger.get("/p/triage/evals/999999/summary").status_code == 404


def test_it_lets_a_viewer_read_without_the_baseline_button(as_viewer: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    page = as_viewer.get(f"/p/{ev.project.slug}/evals/{ev.pk}/summary")
    assert page.status_code == 200
    assert "Mark as baseline" not in page.content.decode()
    assert REJECTED.encode() not in page.content


def test_it_answers_htmx_with_the_results_fragment(as_owner: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    page = as_owner.get(
        f"/p/{ev.project.slug}/evals/{ev.pk}/summary", headers={"HX-Request": "true", "HX-Target": "results-page"}
    )
    assert page.status_code == 200
    text = page.content.decode()
    assert text.lstrip().startswith('<div id="results-page"')
    assert "<html" not in text
