from __future__ import annotations

from django.test import Client

from studio.projects.models import Project


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
