"""The per-node blame page: /evals/<id>/blame."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from studio.projects.graph_svg import heat_colour
from studio.projects.models import Project
from tests.support.eval_results import REJECTED, sample_eval


def test_it_colours_the_graph_by_blame_share(as_owner: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    page = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/blame")
    assert page.status_code == 200
    text = page.content.decode()
    assert f'<g class="node heat" data-node="classify" fill="{heat_colour(1.0)}">' in text  # the one failure's node
    assert f'<g class="node heat" data-node="sentiment" fill="{heat_colour(0.0)}">' in text
    assert text.count('<svg class="graph heat"') == 1  # the one graph renderer, the overview's
    assert "category must be one of" in text  # the rejection's reason
    assert 'data-node="classify"' in text


def test_it_requires_login(project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    assert Client().get(f"/p/{ev.project.slug}/evals/{ev.pk}/blame").status_code == 302


def test_it_hides_the_eval_from_strangers(as_stranger: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    assert as_stranger.get(f"/p/{ev.project.slug}/evals/{ev.pk}/blame").status_code == 404


def test_it_shows_a_viewer_reasons_but_no_rejected_text(as_viewer: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    page = as_viewer.get(f"/p/{ev.project.slug}/evals/{ev.pk}/blame")
    assert page.status_code == 200
    assert b"category must be one of" in page.content
    assert REJECTED.encode() not in page.content


def test_it_answers_htmx_with_the_results_fragment(as_owner: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    page = as_owner.get(
        f"/p/{ev.project.slug}/evals/{ev.pk}/blame", headers={"HX-Request": "true", "HX-Target": "results-page"}
    )
    assert page.content.decode().lstrip().startswith('<div id="results-page"')
