"""Deleting one evalset case (/p/<slug>/evalset/<line>/delete)."""

from __future__ import annotations

from django.test import Client

from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import HTMX, pack_text, teammate_saves


def delete(client: Client, line: int, base: str, **extra: object) -> object:
    return client.post(f"/p/triage/evalset/{line}/delete", {"base": base}, **extra)


def test_it_deletes_one_line_in_one_commit(as_owner: Client, project: Project, repo: PackRepo) -> None:
    before = pack_text(repo, "evalset.jsonl").splitlines()
    page = delete(as_owner, 2, repo.head())
    assert page.status_code == 302 and page["Location"] == "/p/triage/evalset/"
    assert pack_text(repo, "evalset.jsonl").splitlines() == [before[0], *before[2:]]
    assert repo.log(limit=1)[0].message == "Delete case st-02"
    project.refresh_from_db()
    assert project.head == repo.head()


def test_it_redirects_htmx_with_a_header(as_owner: Client, project: Project, repo: PackRepo) -> None:
    page = delete(as_owner, 1, repo.head(), headers=HTMX)
    assert page.status_code == 200 and page["HX-Redirect"] == "/p/triage/evalset/"


def test_it_refuses_a_stale_delete(as_owner: Client, project: Project, repo: PackRepo) -> None:
    base = repo.head()
    teammate_saves(repo, "evalset.jsonl", pack_text(repo, "evalset.jsonl").replace("st-02", "st-02b"))
    newer = repo.head()
    page = delete(as_owner, 2, base)
    assert page.status_code == 409 and b"was not deleted" in page.content and b"st-02b" in page.content
    assert repo.head() == newer


def test_it_refuses_a_missing_base(as_owner: Client, project: Project) -> None:
    page = delete(as_owner, 1, "")
    assert page.status_code == 400 and b"base version is missing" in page.content


def test_it_answers_404_for_a_line_that_is_not_a_case(as_owner: Client, project: Project, repo: PackRepo) -> None:
    assert delete(as_owner, 999, repo.head()).status_code == 404


def test_it_requires_login(project: Project, repo: PackRepo) -> None:
    page = delete(Client(), 1, repo.head())
    assert page.status_code == 302 and page["Location"].startswith("/login/")


def test_it_hides_the_project_from_a_stranger(as_stranger: Client, project: Project, repo: PackRepo) -> None:
    assert delete(as_stranger, 1, repo.head()).status_code == 404


def test_it_forbids_a_viewer(as_viewer: Client, project: Project, repo: PackRepo) -> None:
    head = repo.head()
    assert delete(as_viewer, 1, head).status_code == 403
    assert repo.head() == head
