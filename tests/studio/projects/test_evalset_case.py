"""Adding and editing one evalset case (/p/<slug>/evalset/new, /p/<slug>/evalset/<line>/)."""

from __future__ import annotations

import json
from typing import Any

from django.test import Client

from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import HTMX, pack_text, teammate_saves

NEW = {
    "case_id": "st-new",
    "input": '{"ticket": "Where is my parcel? Order ORD-1."}',
    "expected": '{"category": "general"}',
    "path": "classify, extract",
    "end": "general",
    "tags": "smoke, new",
    "human": "",
    "note": "",
    "message": "Add a parcel case",
}


def post(client: Client, url: str, base: str, **fields: Any) -> Any:
    return client.post(url, {**NEW, "base": base, **fields})


def lines(repo: PackRepo) -> list[str]:
    return pack_text(repo, "evalset.jsonl").splitlines()


def test_it_adds_a_case_as_one_json_line(as_owner: Client, project: Project, repo: PackRepo) -> None:
    before = lines(repo)
    page = post(as_owner, "/p/triage/evalset/new", repo.head())
    assert page.status_code == 302 and page["Location"] == "/p/triage/evalset/"
    after = lines(repo)
    assert after[:-1] == before
    assert json.loads(after[-1]) == {
        "id": "st-new",
        "input": {"ticket": "Where is my parcel? Order ORD-1."},
        "expected": {"category": "general"},
        "path": ["classify", "extract"],
        "end": "general",
        "tags": ["smoke", "new"],
    }
    assert pack_text(repo, "evalset.jsonl").endswith("\n")
    assert repo.log(limit=1)[0].message == "Add a parcel case"
    project.refresh_from_db()
    assert project.head == repo.head()


def test_it_edits_one_case_and_leaves_the_other_lines_alone(as_owner: Client, project: Project, repo: PackRepo) -> None:
    before = lines(repo)
    form = as_owner.get("/p/triage/evalset/2/")
    assert form.status_code == 200 and b'value="st-02"' in form.content
    page = post(
        as_owner,
        "/p/triage/evalset/2/",
        repo.head(),
        case_id="st-02",
        tags="",
        path="",
        end="tech_support",
        expected='{"category": "technical"}',
        message="Loosen st-02",
    )
    assert page.status_code == 302
    after = lines(repo)
    assert after[0] == before[0] and after[2:] == before[2:]
    edited = json.loads(after[1])
    assert list(edited) == ["id", "input", "expected", "end"]  # the original key order kept
    assert edited["expected"] == {"category": "technical"} and edited["input"] == {
        "ticket": "Where is my parcel? Order ORD-1."
    }


def test_it_shows_a_json_error_next_to_the_field(as_owner: Client, project: Project, repo: PackRepo) -> None:
    head = repo.head()
    page = post(as_owner, "/p/triage/evalset/new", head, input='{"ticket": "x",}', expected="[1, 2]")
    assert page.status_code == 400
    html = page.content.decode()
    assert 'id="input-error"' in html and "not valid JSON" in html and "line 1, column" in html
    assert 'id="expected-error"' in html and "must be a JSON object" in html
    assert "{&quot;ticket&quot;: &quot;x&quot;,}" in html  # what was typed is kept
    assert repo.head() == head


def test_it_refuses_a_duplicate_id(as_owner: Client, project: Project, repo: PackRepo) -> None:
    page = post(as_owner, "/p/triage/evalset/new", repo.head(), case_id="st-01")
    assert page.status_code == 400 and b"ids must be unique" in page.content


def test_it_refuses_bad_node_ids(as_owner: Client, project: Project, repo: PackRepo) -> None:
    page = post(as_owner, "/p/triage/evalset/new", repo.head(), path="classify, Bad-Node")
    assert page.status_code == 400 and b"not node ids: Bad-Node" in page.content


def test_it_refuses_a_stale_save_and_keeps_the_form(as_owner: Client, project: Project, repo: PackRepo) -> None:
    base = repo.head()
    teammate_saves(repo, "evalset.jsonl", "\n".join(lines(repo)[1:]) + "\n", "Drop st-01")  # st-02 moves to line 1
    newer = repo.head()
    page = post(as_owner, "/p/triage/evalset/2/", base, case_id="st-02", note="my note")
    assert page.status_code == 409
    html = page.content.decode()
    assert "Not saved: the evalset moved on" in html and "my note" in html
    assert f'name="base" value="{newer}"' in html
    assert 'action="/p/triage/evalset/1/"' in html  # st-02, found again by its id
    assert repo.head() == newer


def test_it_refuses_a_missing_base(as_owner: Client, project: Project) -> None:
    page = post(as_owner, "/p/triage/evalset/new", "")
    assert page.status_code == 400 and b"base version is missing" in page.content


def test_it_answers_404_for_a_line_that_is_not_a_case(as_owner: Client, project: Project) -> None:
    assert as_owner.get("/p/triage/evalset/999/").status_code == 404


def test_it_requires_login(project: Project) -> None:
    page = Client().get("/p/triage/evalset/new")
    assert page.status_code == 302 and page["Location"].startswith("/login/")


def test_it_hides_the_project_from_a_stranger(as_stranger: Client, project: Project, repo: PackRepo) -> None:
    assert as_stranger.get("/p/triage/evalset/new").status_code == 404
    assert post(as_stranger, "/p/triage/evalset/new", repo.head()).status_code == 404


def test_it_forbids_a_viewer_and_a_reviewer(
    as_viewer: Client, as_reviewer: Client, project: Project, repo: PackRepo
) -> None:
    head = repo.head()
    assert as_viewer.get("/p/triage/evalset/new").status_code == 403
    assert post(as_viewer, "/p/triage/evalset/new", head).status_code == 403
    assert post(as_reviewer, "/p/triage/evalset/1/", head).status_code == 403
    assert repo.head() == head


def test_it_renders_the_form_fragment_for_htmx(as_owner: Client, project: Project) -> None:
    fragment = as_owner.get("/p/triage/evalset/1/", headers=HTMX).content.decode()
    assert "<html" not in fragment and fragment.lstrip().startswith('<div id="case-form"')
    assert "<html" in as_owner.get("/p/triage/evalset/1/").content.decode()
