"""The branch coverage page: /evals/<id>/coverage."""

from __future__ import annotations

import re

from django.contrib.auth.models import User
from django.test import Client

from studio.projects.models import Project
from tests.support.eval_results import add_run, make_eval, sample_eval


def test_it_highlights_and_lists_untaken_edges(as_owner: Client, project: Project, owner: User) -> None:
    ev = make_eval(project, owner)
    add_run(ev, "billing", edges=[0, 2, 3, 4])
    add_run(
        ev,
        "lost",
        status="failed",
        edges=[0, 2, 3, 7],
        problems=["expected to stop at 'billing_ops', stopped at 'general'"],
    )
    page = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/coverage")
    assert page.status_code == 200
    text = page.content.decode()
    assert "5 / 8" in text
    assert re.search(r'<g class="edge edge-on_fail untaken" [^>]*data-edge="1">', text)  # classify -> manual_triage
    assert re.search(r'<g class="edge edge-next" [^>]*data-edge="0">', text)
    assert text.count('<svg class="graph counted"') == 1
    assert "classify -&gt; manual_triage (on_fail)" in text  # listed, escaped
    assert "stopped at &#x27;general&#x27;" in text  # the run that missed its declared end
    assert f"/p/{ev.project.slug}/evals/{ev.pk}/cases/lost/0" in text


def test_it_requires_login(project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    assert Client().get(f"/p/{ev.project.slug}/evals/{ev.pk}/coverage").status_code == 302


def test_it_hides_the_eval_from_strangers(as_stranger: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    assert as_stranger.get(f"/p/{ev.project.slug}/evals/{ev.pk}/coverage").status_code == 404


def test_it_lets_a_viewer_read(as_viewer: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    assert as_viewer.get(f"/p/{ev.project.slug}/evals/{ev.pk}/coverage").status_code == 200


def test_it_answers_htmx_with_the_results_fragment(as_owner: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    page = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/coverage", headers={"HX-Request": "true"})
    assert page.content.decode().lstrip().startswith('<div id="results-page"')
