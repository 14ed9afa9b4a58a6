"""The side-by-side diff (/p/<slug>/diff/?a=SHA&b=SHA)."""

from __future__ import annotations

from django.test import Client

from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import HTMX


def two_versions(repo: PackRepo) -> tuple[str, str]:
    old = repo.head()
    new = repo.save(
        {
            "pack/prompts/classify.txt": b"Classify: {{ input.ticket }}\n",
            "pack/prompts/summary.txt": b"Summarise <this>\n",
            "pack/prompts/sentiment.txt": None,
        },
        base=old,
        author="Tess",
        email="t@example.com",
        message="Rework prompts",
    )
    return old, new


def test_it_shows_changed_files_side_by_side(as_owner: Client, project: Project, repo: PackRepo) -> None:
    old, new = two_versions(repo)
    page = as_owner.get("/p/triage/diff/", {"a": old, "b": new})
    assert page.status_code == 200
    html = page.content.decode()
    assert "3 files changed" in html
    assert "</span> prompts/classify.txt</h3>" in html and '<span class="status status-modified">' in html
    assert "</span> prompts/summary.txt</h3>" in html and '<span class="status status-added">' in html
    assert "</span> prompts/sentiment.txt</h3>" in html and '<span class="status status-deleted">' in html
    assert "pack/graph.yaml" not in html  # unchanged files are left out
    assert "Summarise &lt;this&gt;" in html
    assert '<tr class="change">' in html or '<tr class="add">' in html


def test_it_accepts_short_shas(as_owner: Client, project: Project, repo: PackRepo) -> None:
    old, new = two_versions(repo)
    assert as_owner.get("/p/triage/diff/", {"a": old[:8], "b": new[:8]}).status_code == 200


def test_it_refuses_missing_or_unknown_versions(as_owner: Client, project: Project, repo: PackRepo) -> None:
    page = as_owner.get("/p/triage/diff/", {"a": repo.head()})
    assert page.status_code == 400 and b"Choose two versions" in page.content
    page = as_owner.get("/p/triage/diff/", {"a": repo.head(), "b": "nothex!"})
    assert page.status_code == 400 and b"Cannot compare these versions" in page.content
    page = as_owner.get("/p/triage/diff/", {"a": repo.head(), "b": "a" * 40})
    assert page.status_code == 400


def test_it_requires_login(project: Project) -> None:
    page = Client().get("/p/triage/diff/")
    assert page.status_code == 302 and page["Location"].startswith("/login/")


def test_it_hides_the_project_from_a_stranger(as_stranger: Client, project: Project, repo: PackRepo) -> None:
    old, new = two_versions(repo)
    assert as_stranger.get("/p/triage/diff/", {"a": old, "b": new}).status_code == 404


def test_it_shows_a_viewer_the_diff(as_viewer: Client, project: Project, repo: PackRepo) -> None:
    old, new = two_versions(repo)
    assert as_viewer.get("/p/triage/diff/", {"a": old, "b": new}).status_code == 200


def test_it_renders_the_fragment_for_htmx(as_owner: Client, project: Project, repo: PackRepo) -> None:
    old, new = two_versions(repo)
    fragment = as_owner.get("/p/triage/diff/", {"a": old, "b": new}, headers=HTMX).content.decode()
    assert "<html" not in fragment and fragment.lstrip().startswith('<div id="project-page">')


def test_it_folds_long_unchanged_stretches(as_owner: Client, project: Project, repo: PackRepo) -> None:
    old = repo.head()
    body = "".join(f"line {i}\n" for i in range(1, 41))
    middle = repo.save({"pack/prompts/long.txt": body.encode()}, base=old, author="T", email="", message="Long")
    new = repo.save(
        {"pack/prompts/long.txt": body.replace("line 20\n", "line twenty\n").encode()},
        base=middle,
        author="T",
        email="",
        message="Edit line 20",
    )
    html = as_owner.get("/p/triage/diff/", {"a": middle, "b": new}).content.decode()
    assert "line twenty" in html and "line 17" in html and "line 23" in html
    assert '<td class="old">line 5</td>' not in html
    assert "16 unchanged lines" in html and "17 unchanged lines" in html
