from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from studio.evals.models import Eval
from studio.projects.models import Project, create_project
from studio.projects.skeleton import skeleton_files
from tests.support.eval_results import make_eval


def test_it_lists_the_projects_a_user_belongs_to(as_owner: Client, project: Project) -> None:
    page = as_owner.get("/")
    assert page.status_code == 200
    assert b'href="/p/triage/"' in page.content


def test_it_hides_projects_from_strangers(as_stranger: Client, project: Project) -> None:
    page = as_stranger.get("/")
    assert page.status_code == 200
    assert b"triage" not in page.content


def test_it_requires_login(db: None) -> None:
    page = Client().get("/")
    assert page.status_code == 302
    assert page["Location"].startswith("/login/")


def test_it_shows_each_projects_last_finished_eval_in_a_constant_number_of_queries(
    as_owner: Client, project: Project, owner: User
) -> None:
    older = make_eval(project, owner)
    Eval.objects.filter(pk=older.pk).update(summary={"pass_rate": 0.5}, finished_at=timezone.now() - timedelta(hours=1))
    newest = make_eval(project, owner)
    Eval.objects.filter(pk=newest.pk).update(summary={"pass_rate": 0.8}, finished_at=timezone.now())
    make_eval(project, owner, status="running")  # not finished: not the last eval
    html = as_owner.get("/").content.decode()
    assert f'href="/p/triage/evals/{newest.pk}/">80.0% passed</a>' in html

    def queries() -> int:
        with CaptureQueriesContext(connection) as seen:
            assert as_owner.get("/").status_code == 200
        return len(seen)

    before = queries()
    for i in range(5):
        other = create_project(slug=f"p{i}", name=f"P{i}", owner=owner, pack_files=skeleton_files(f"p{i}"), message="m")
        done = make_eval(other, owner)
        Eval.objects.filter(pk=done.pk).update(summary={"pass_rate": 1.0}, finished_at=timezone.now())
    assert queries() == before  # one query for every project's last eval, not one per project
