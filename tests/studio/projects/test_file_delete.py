"""Deleting a prompt or grammar (/p/<slug>/delete/<path>)."""

from __future__ import annotations

from django.test import Client

from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import HTMX, teammate_saves

PROMPT = "prompts/sentiment.txt"


def delete(client: Client, path: str, base: str, **extra: object) -> object:
    return client.post(f"/p/triage/delete/{path}", {"base": base, "message": f"Delete {path}"}, **extra)


def test_it_deletes_a_prompt_in_one_commit(as_owner: Client, project: Project, repo: PackRepo) -> None:
    page = delete(as_owner, PROMPT, repo.head())
    assert page.status_code == 302 and page["Location"] == "/p/triage/files/"
    assert PROMPT not in repo.files(prefix="pack/")
    assert repo.log(limit=1)[0].message == f"Delete {PROMPT}"
    project.refresh_from_db()
    assert project.head == repo.head()


def test_it_redirects_htmx_with_a_header(as_owner: Client, project: Project, repo: PackRepo) -> None:
    page = delete(as_owner, PROMPT, repo.head(), headers=HTMX)
    assert page.status_code == 200 and page["HX-Redirect"] == "/p/triage/files/"


def test_it_refuses_to_delete_the_manifest(as_owner: Client, project: Project, repo: PackRepo) -> None:
    head = repo.head()
    page = delete(as_owner, "manifest.yaml", head)
    assert page.status_code == 400 and b"cannot be deleted" in page.content
    assert repo.head() == head


def test_it_refuses_a_stale_delete_with_the_diff(as_owner: Client, project: Project, repo: PackRepo) -> None:
    base = repo.head()
    teammate_saves(repo, PROMPT, "Newer sentiment prompt {{ input.ticket }}\n")
    page = delete(as_owner, PROMPT, base)
    assert page.status_code == 409 and b"Newer sentiment prompt" in page.content
    assert PROMPT in repo.files(prefix="pack/")


def test_it_answers_404_for_a_missing_file(as_owner: Client, project: Project, repo: PackRepo) -> None:
    assert delete(as_owner, "prompts/nope.txt", repo.head()).status_code == 404


def test_it_requires_a_post(as_owner: Client, project: Project) -> None:
    assert as_owner.get(f"/p/triage/delete/{PROMPT}").status_code == 405


def test_it_requires_login(project: Project, repo: PackRepo) -> None:
    page = delete(Client(), PROMPT, repo.head())
    assert page.status_code == 302 and page["Location"].startswith("/login/")


def test_it_hides_the_project_from_a_stranger(as_stranger: Client, project: Project, repo: PackRepo) -> None:
    assert delete(as_stranger, PROMPT, repo.head()).status_code == 404


def test_it_forbids_a_viewer(as_viewer: Client, project: Project, repo: PackRepo) -> None:
    assert delete(as_viewer, PROMPT, repo.head()).status_code == 403
    assert PROMPT in repo.files(prefix="pack/")
