"""The URLs from before every project page lived under /p/<slug>/ (docs/studio.md):
each redirects to its new home for a member, and answers 404 to a stranger, so a
redirect never reveals which project an eval or a run belongs to."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.evals.models import Eval
from studio.projects.models import Project, create_project
from studio.projects.views import example_files
from studio.runs.models import TryRun

pytestmark = pytest.mark.django_db


def _eval(project: Project, owner: User) -> Eval:
    return Eval.objects.create(project=project, version=project.head, model_spec="fake:x", created_by=owner)


def _run(project: Project, owner: User) -> TryRun:
    return TryRun.objects.create(project=project, version=project.head, input={}, created_by=owner)


def test_it_redirects_an_old_eval_page_keeping_its_tail_and_query(
    as_viewer: Client, project: Project, owner: User
) -> None:
    ev = _eval(project, owner)
    assert as_viewer.get(f"/evals/{ev.pk}/")["Location"] == f"/p/triage/evals/{ev.pk}/"
    page = as_viewer.get(f"/evals/{ev.pk}/cost?sort=latency")
    assert page.status_code == 301 and page["Location"] == f"/p/triage/evals/{ev.pk}/cost?sort=latency"


def test_it_redirects_an_old_form_post_as_a_post(as_owner: Client, project: Project, owner: User) -> None:
    ev = _eval(project, owner)
    page = as_owner.post(f"/evals/{ev.pk}/cancel")
    assert page.status_code == 308 and page["Location"] == f"/p/triage/evals/{ev.pk}/cancel"


def test_it_redirects_the_old_start_compare_and_history_pages(as_owner: Client, project: Project, owner: User) -> None:
    a, b = _eval(project, owner), _eval(project, owner)
    assert as_owner.get("/evals/new?project=triage")["Location"] == "/p/triage/evals/new"
    assert as_owner.get(f"/evals/compare?a={a.pk}&b={b.pk}")["Location"] == (
        f"/p/triage/evals/compare?a={a.pk}&b={b.pk}"
    )
    assert as_owner.get("/evals/history/triage")["Location"] == "/p/triage/evals/history"


def test_it_redirects_the_old_run_pages(as_owner: Client, project: Project, owner: User) -> None:
    run = _run(project, owner)
    assert as_owner.get(f"/runs/{run.pk}")["Location"] == f"/p/triage/runs/{run.pk}"
    assert as_owner.get("/runs/new?project=triage")["Location"] == "/p/triage/runs/new"


def test_it_answers_a_stranger_404_on_every_old_url(as_stranger: Client, project: Project, owner: User) -> None:
    ev, run = _eval(project, owner), _run(project, owner)
    for url in (
        f"/evals/{ev.pk}/",
        f"/evals/{ev.pk}/summary",
        "/evals/new?project=triage",
        f"/evals/compare?a={ev.pk}&b={ev.pk}",
        "/evals/history/triage",
        f"/runs/{run.pk}",
        "/runs/new?project=triage",
    ):
        assert as_stranger.get(url).status_code == 404, url


def test_it_finds_no_eval_or_run_under_another_projects_slug(as_owner: Client, project: Project, owner: User) -> None:
    create_project(slug="other", name="Other", owner=owner, pack_files=example_files("support_triage"))
    ev, run = _eval(project, owner), _run(project, owner)
    assert as_owner.get(f"/p/other/evals/{ev.pk}/summary").status_code == 404
    assert as_owner.get(f"/p/other/runs/{run.pk}").status_code == 404
    assert as_owner.get(f"/p/triage/evals/{ev.pk}/summary").status_code == 200


def test_it_redirects_an_old_try_it_post_as_a_post(as_owner: Client, project: Project) -> None:
    page = as_owner.post("/runs/new?project=triage", {"input": "{}"})
    assert page.status_code == 308 and page["Location"] == "/p/triage/runs/new"
