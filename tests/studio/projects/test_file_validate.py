"""Live validation (/p/<slug>/validate/<path>): the whole pack at `base`, with one file
replaced by the text being edited."""

from __future__ import annotations

from django.test import Client

from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import HTMX, pack_text

GRAMMAR = "grammars/classify.json"


def validate(client: Client, path: str, content: str, base: str, htmx: bool = True) -> object:
    return client.post(f"/p/triage/validate/{path}", {"content": content, "base": base}, headers=HTMX if htmx else {})


def test_it_lists_this_files_problems_with_their_lines(as_owner: Client, project: Project, repo: PackRepo) -> None:
    broken = pack_text(repo, GRAMMAR).replace('"type": "object"', '"type": "objekt"', 1)
    page = validate(as_owner, GRAMMAR, broken, repo.head())
    assert page.status_code == 200
    html = page.content.decode()
    assert html.lstrip().startswith('<aside id="problems"')
    assert "<html" not in html
    assert "This file" in html and "No problems in" not in html
    assert "objekt" in html
    assert repo.head() == project.head  # nothing saved


def test_it_reports_a_json_error_with_its_line(as_owner: Client, project: Project, repo: PackRepo) -> None:
    page = validate(as_owner, GRAMMAR, '{\n  "type": "object",\n  oops\n}', repo.head())
    assert page.status_code == 200
    assert b'data-line="3"' in page.content


def test_it_groups_other_files_problems_by_file(as_owner: Client, project: Project, repo: PackRepo) -> None:
    graph = pack_text(repo, "graph.yaml")
    graph = graph.replace(
        "  billing_ops:\n",
        "  summarise:\n    kind: generate\n    reads: [input.ticket]\n    writes: [summary]\n  billing_ops:\n",
    )
    graph = graph.replace(
        "  - {from: prioritise, to: general}",
        "  - {from: prioritise, to: summarise}\n  - {from: summarise, to: general}",
    )
    page = validate(as_owner, "graph.yaml", graph, repo.head())
    html = page.content.decode()
    assert "No problems in graph.yaml" in html
    assert "Other files" in html
    assert 'href="/p/triage/files/prompts/summarise.txt"' in html
    assert 'href="/p/triage/files/grammars/summarise.json"' in html
    assert "needs a prompt template" in html


def test_it_says_so_when_the_pack_loads(as_owner: Client, project: Project, repo: PackRepo) -> None:
    page = validate(as_owner, GRAMMAR, pack_text(repo, GRAMMAR), repo.head())
    assert b"No problems in grammars/classify.json" in page.content
    assert b"The whole pack loads" in page.content


def test_it_refuses_a_missing_or_unknown_base(as_owner: Client, project: Project) -> None:
    page = validate(as_owner, GRAMMAR, "{}", "")
    assert page.status_code == 400 and b"base version is missing" in page.content
    page = validate(as_owner, GRAMMAR, "{}", "f" * 40)
    assert page.status_code == 400 and b"Cannot validate" in page.content


def test_it_refuses_a_file_the_studio_does_not_edit(as_owner: Client, project: Project, repo: PackRepo) -> None:
    page = validate(as_owner, "fakes/scripted.json", "{}", repo.head())
    assert page.status_code == 400 and b"not a file the studio edits" in page.content


def test_it_renders_the_whole_editor_without_htmx(as_owner: Client, project: Project, repo: PackRepo) -> None:
    page = validate(as_owner, GRAMMAR, "{ broken", repo.head(), htmx=False)
    assert page.status_code == 200
    assert b"<html" in page.content and b"{ broken" in page.content and b'id="problems"' in page.content


def test_it_requires_login(project: Project, repo: PackRepo) -> None:
    page = Client().post(f"/p/triage/validate/{GRAMMAR}", {"content": "{}", "base": repo.head()})
    assert page.status_code == 302 and page["Location"].startswith("/login/")


def test_it_hides_the_project_from_a_stranger(as_stranger: Client, project: Project, repo: PackRepo) -> None:
    assert validate(as_stranger, GRAMMAR, "{}", repo.head()).status_code == 404


def test_it_lets_a_viewer_validate_since_it_writes_nothing(as_viewer: Client, project: Project, repo: PackRepo) -> None:
    assert validate(as_viewer, GRAMMAR, "{}", repo.head()).status_code == 200
    assert as_viewer.get(f"/p/triage/validate/{GRAMMAR}").status_code == 405


def test_renaming_an_enum_value_that_an_edge_and_the_evalset_use_is_not_a_clean_load(
    as_owner: Client, project: Project, repo: PackRepo
) -> None:
    renamed = pack_text(repo, GRAMMAR).replace('"billing"', '"payments"')
    page = validate(as_owner, GRAMMAR, renamed, repo.head())
    html = page.content.decode()
    assert "The whole pack loads" not in html
    assert "when compares category to &#x27;billing&#x27;, which grammars/classify.json does not allow" in html
    assert "expected.category &#x27;billing&#x27; is not a value grammars/classify.json allows" in html


def test_a_scripted_model_outside_the_pack_is_a_problem_of_the_manifest(
    as_owner: Client, project: Project, repo: PackRepo
) -> None:
    manifest = pack_text(repo, "manifest.yaml").replace("model: fake:fakes/scripted.json", "model: fake:/etc/passwd")
    assert "fake:/etc/passwd" in manifest
    html = validate(as_owner, "manifest.yaml", manifest, repo.head()).content.decode()
    assert "The whole pack loads" not in html
    assert "names a file outside the pack; scripted models live in the pack" in html
