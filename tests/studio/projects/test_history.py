"""The history page (/p/<slug>/history/)."""

from __future__ import annotations

from django.test import Client

from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import HTMX, teammate_saves


def test_it_lists_the_commits_newest_first(as_owner: Client, project: Project, repo: PackRepo) -> None:
    first = repo.head()
    second = teammate_saves(repo, "prompts/classify.txt", "New prompt {{ input.ticket }}\n", "Rewrite <classify>")
    page = as_owner.get("/p/triage/history/")
    assert page.status_code == 200
    html = page.content.decode()
    assert html.index(second[:10]) < html.index(first[:10])
    assert "Rewrite &lt;classify&gt;" in html and "Tess Teammate" in html and "Create from example" in html
    assert f'name="a" value="{first}"' in html and f'name="b" value="{second}"' in html
    assert f'href="/p/triage/diff/?a={first}&amp;b={second}"' in html  # this commit's changes
    assert f"/p/triage/download/?version={first}&amp;format=zip" in html


def test_it_requires_login(project: Project) -> None:
    page = Client().get("/p/triage/history/")
    assert page.status_code == 302 and page["Location"].startswith("/login/")


def test_it_hides_the_project_from_a_stranger(as_stranger: Client, project: Project) -> None:
    assert as_stranger.get("/p/triage/history/").status_code == 404


def test_it_shows_a_viewer_the_history(as_viewer: Client, project: Project) -> None:
    assert as_viewer.get("/p/triage/history/").status_code == 200


def test_it_renders_the_fragment_for_htmx(as_owner: Client, project: Project) -> None:
    fragment = as_owner.get("/p/triage/history/", headers=HTMX).content.decode()
    assert "<html" not in fragment and fragment.lstrip().startswith('<div id="project-page">')


def test_it_pages_a_long_history(as_owner: Client, project: Project, repo: PackRepo) -> None:
    head = repo.head()
    for n in range(55):
        head = repo.save(
            {"pack/prompts/classify.txt": f"v{n} {{{{ input.ticket }}}}".encode()},
            base=head,
            author="olive",
            email="",
            message=f"edit {n}",
        )
    first = as_owner.get(f"/p/{project.slug}/history/")
    assert first.status_code == 200
    assert b"Commits 1\xe2\x80\x9350" in first.content and b"edit 54" in first.content
    assert b"?page=2" in first.content and b"edit 4<" not in first.content
    second = as_owner.get(f"/p/{project.slug}/history/?page=2")
    assert b"Commits 51\xe2\x80\x9356" in second.content and b"Create from example" in second.content
    assert b"?page=3" not in second.content
