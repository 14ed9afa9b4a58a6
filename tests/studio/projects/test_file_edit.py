"""The file editor (/p/<slug>/files/<path>): show a file, save it with a message."""

from __future__ import annotations

from django.test import Client

from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import HTMX, pack_text, teammate_saves

PROMPT = "prompts/classify.txt"


def save(client: Client, path: str, content: str, base: str, message: str = "Tighten the prompt") -> object:
    return client.post(f"/p/triage/files/{path}", {"content": content, "base": base, "message": message})


def test_it_shows_the_file_with_its_base_version(as_owner: Client, project: Project, repo: PackRepo) -> None:
    page = as_owner.get(f"/p/triage/files/{PROMPT}")
    assert page.status_code == 200
    html = page.content.decode()
    assert f'<input type="hidden" name="base" value="{repo.head()}">' in html
    assert 'hx-post="/p/triage/validate/prompts/classify.txt"' in html
    assert 'hx-trigger="input changed delay:400ms"' in html
    assert 'id="problems"' in html
    assert "{{ input.ticket }}" in html  # the prompt text, in the textarea


def test_it_saves_a_commit_and_moves_the_project_head(as_owner: Client, project: Project, repo: PackRepo) -> None:
    base = repo.head()
    before = project.updated_at
    text = pack_text(repo, PROMPT) + "\nAnswer with the category only.\n"
    page = save(as_owner, PROMPT, text.replace("\n", "\r\n"), base)  # browsers send CRLF
    assert page.status_code == 302 and page["Location"] == f"/p/triage/files/{PROMPT}"
    assert repo.head() != base
    assert pack_text(repo, PROMPT) == text  # stored with LF line ends
    log = repo.log(limit=1)[0]
    assert log.message == "Tighten the prompt" and log.author.startswith("olive <olive@example.com>")
    project.refresh_from_db()
    assert project.head == repo.head() and project.updated_at > before


def test_it_saves_an_invalid_pack_and_shows_its_problems(as_owner: Client, project: Project, repo: PackRepo) -> None:
    page = save(as_owner, "grammars/classify.json", "{ not json", repo.head(), "WIP: grammar")
    assert page.status_code == 302
    assert pack_text(repo, "grammars/classify.json") == "{ not json"
    shown = as_owner.get(page["Location"]).content.decode()
    assert "saved anyway" in shown
    assert 'data-line="1"' in shown and "JSON syntax error" in shown


def test_it_creates_a_new_file_by_saving_it(as_owner: Client, project: Project, repo: PackRepo) -> None:
    page = save(as_owner, "prompts/summarise.txt", "Summarise {{ input.ticket }}\n", repo.head(), "Add a prompt")
    assert page.status_code == 302
    assert pack_text(repo, "prompts/summarise.txt") == "Summarise {{ input.ticket }}\n"


def test_it_refuses_a_stale_save_with_the_diff_and_keeps_the_text(
    as_owner: Client, project: Project, repo: PackRepo
) -> None:
    base = repo.head()
    teammate_saves(repo, PROMPT, "Teammate's prompt for {{ input.ticket }}\n")
    newer = repo.head()
    page = save(as_owner, PROMPT, "My own prompt for {{ input.ticket }}\n", base)
    assert page.status_code == 409
    html = page.content.decode()
    assert "Not saved: the project moved on" in html
    assert "Teammate&#x27;s prompt for" in html  # the newer version, in the diff
    assert "My own prompt for {{ input.ticket }}" in html  # the user's text, kept
    assert f'name="base" value="{newer}"' in html
    assert repo.head() == newer  # nothing overwritten
    assert pack_text(repo, PROMPT).startswith("Teammate's prompt")


def test_it_refuses_a_save_without_a_message_and_keeps_the_text(
    as_owner: Client, project: Project, repo: PackRepo
) -> None:
    head = repo.head()
    page = save(as_owner, PROMPT, "Edited {{ input.ticket }}", head, message="  ")
    assert page.status_code == 400
    assert b"Write a commit message" in page.content and b"Edited {{ input.ticket }}" in page.content
    assert repo.head() == head


def test_it_refuses_a_save_that_changes_nothing(as_owner: Client, project: Project, repo: PackRepo) -> None:
    page = save(as_owner, PROMPT, pack_text(repo, PROMPT), repo.head())
    assert page.status_code == 400 and b"Nothing to save" in page.content


def test_it_refuses_a_save_on_an_unknown_base(as_owner: Client, project: Project, repo: PackRepo) -> None:
    page = save(as_owner, PROMPT, "x {{ input.ticket }}", "0" * 40)
    assert page.status_code == 400 and b"Not saved" in page.content


def test_it_answers_404_for_a_file_that_is_not_there(as_owner: Client, project: Project) -> None:
    assert as_owner.get("/p/triage/files/nope.txt").status_code == 404
    assert as_owner.get("/p/triage/files/../../etc/passwd").status_code == 404


def test_it_requires_login(project: Project) -> None:
    page = Client().get(f"/p/triage/files/{PROMPT}")
    assert page.status_code == 302 and page["Location"].startswith("/login/")


def test_it_hides_the_project_from_a_stranger(as_stranger: Client, project: Project, repo: PackRepo) -> None:
    assert as_stranger.get(f"/p/triage/files/{PROMPT}").status_code == 404
    assert save(as_stranger, PROMPT, "x", repo.head()).status_code == 404


def test_it_lets_a_viewer_read_but_not_save(
    as_viewer: Client, as_reviewer: Client, project: Project, repo: PackRepo
) -> None:
    page = as_viewer.get(f"/p/triage/files/{PROMPT}")
    assert page.status_code == 200 and b"readonly" in page.content and b'id="save-form"' not in page.content
    head = repo.head()
    assert save(as_viewer, PROMPT, "x", head).status_code == 403
    assert save(as_reviewer, PROMPT, "x", head).status_code == 403
    assert repo.head() == head


def test_it_renders_the_fragment_for_htmx(as_owner: Client, project: Project) -> None:
    fragment = as_owner.get(f"/p/triage/files/{PROMPT}", headers=HTMX).content.decode()
    assert "<html" not in fragment and fragment.lstrip().startswith('<div id="project-page">')


def test_it_builds_an_empty_project_up_file_by_file(as_owner: Client, owner: object) -> None:
    from studio.projects.models import create_project

    made = create_project(slug="blank", name="Blank", owner=owner, pack_files={})
    repo = PackRepo(made.repo_path)
    overview = as_owner.get("/p/blank/").content.decode()
    assert 'id="load-problems"' in overview and 'href="/p/blank/files/manifest.yaml"' in overview
    assert as_owner.get("/p/blank/files/manifest.yaml").status_code == 200  # a new file, for an author
    page = as_owner.post(
        "/p/blank/files/manifest.yaml",
        {"content": "name: blank\nversion: 1\nentry: done\n", "base": repo.head(), "message": "Add a manifest"},
    )
    assert page.status_code == 302
    page = as_owner.post(
        "/p/blank/files/graph.yaml",
        {"content": "nodes:\n  done: {kind: end}\nedges: []\n", "base": repo.head(), "message": "Add a graph"},
    )
    assert page.status_code == 302
    assert '<svg class="graph"' in as_owner.get("/p/blank/").content.decode()
    assert set(repo.files(prefix="pack/")) == {"manifest.yaml", "graph.yaml"}  # the placeholder is gone
