"""The file list (/p/<slug>/files/) and starting a new file from it."""

from __future__ import annotations

from django.test import Client

from studio.projects.models import Project
from tests.support.studio import HTMX


def test_it_lists_the_pack_files_with_their_problem_counts(as_owner: Client, project: Project) -> None:
    page = as_owner.get("/p/triage/files/")
    assert page.status_code == 200
    html = page.content.decode()
    for path in ("manifest.yaml", "graph.yaml", "prompts/classify.txt", "grammars/classify.json"):
        assert f'href="/p/triage/files/{path}"' in html
    assert 'href="/p/triage/evalset/"' in html
    assert "The pack loads" in html


def test_it_starts_a_new_prompt_in_the_editor(as_owner: Client, project: Project) -> None:
    page = as_owner.get("/p/triage/files/", {"new": "prompts/summarise.txt"})
    assert page.status_code == 302 and page["Location"] == "/p/triage/files/prompts/summarise.txt"
    editor = as_owner.get(page["Location"])
    assert editor.status_code == 200 and b"new file" in editor.content


def test_it_refuses_a_new_file_with_a_bad_name(as_owner: Client, project: Project) -> None:
    page = as_owner.get("/p/triage/files/", {"new": "../etc/passwd"})
    assert page.status_code == 400
    assert b"is not a pack file the studio edits" in page.content


def test_it_refuses_a_new_file_that_exists(as_owner: Client, project: Project) -> None:
    page = as_owner.get("/p/triage/files/", {"new": "prompts/classify.txt"})
    assert page.status_code == 400 and b"exists already" in page.content


def test_it_requires_login(project: Project) -> None:
    page = Client().get("/p/triage/files/")
    assert page.status_code == 302 and page["Location"].startswith("/login/")


def test_it_hides_the_project_from_a_stranger(as_stranger: Client, project: Project) -> None:
    assert as_stranger.get("/p/triage/files/").status_code == 404


def test_it_shows_a_viewer_the_files_without_the_new_file_form(as_viewer: Client, project: Project) -> None:
    page = as_viewer.get("/p/triage/files/")
    assert page.status_code == 200
    assert b'name="new"' not in page.content


def test_it_renders_the_fragment_for_htmx(as_owner: Client, project: Project) -> None:
    fragment = as_owner.get("/p/triage/files/", headers=HTMX).content.decode()
    assert "<html" not in fragment and fragment.lstrip().startswith('<div id="project-page">')
