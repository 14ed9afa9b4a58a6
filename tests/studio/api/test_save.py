from __future__ import annotations

from django.test import Client

from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import head_of, send

URL = "/api/projects/triage/files"


def test_it_saves_files_as_a_new_version(as_owner: Client, project: Project) -> None:
    base = head_of(project)
    answer = send(
        as_owner,
        "put",
        URL,
        {
            "base": base,
            "message": "Tighten the prompt",
            "files": {
                "prompts/classify.txt": "Classify: {{ input.ticket }}\n",
                "notes/new.md": "hello",
                "README.md": None,
            },
        },
    )
    assert answer.status_code == 200
    body = answer.json()
    assert body["base"] == base and body["version"] == head_of(project)
    assert {c["path"]: c["status"] for c in body["changes"]} == {
        "prompts/classify.txt": "modified",
        "notes/new.md": "added",
        "README.md": "deleted",
    }
    files = PackRepo(project.repo_path).files(prefix="pack/")
    assert files["notes/new.md"] == b"hello" and "README.md" not in files
    [latest, *_] = PackRepo(project.repo_path).log()
    assert latest.message == "Tighten the prompt" and latest.author.startswith("olive <olive@example.com>")
    project.refresh_from_db()
    assert project.head == body["version"]


def test_it_refuses_a_stale_base_and_writes_nothing(as_owner: Client, project: Project) -> None:
    base = head_of(project)
    moved = PackRepo(project.repo_path).save(
        {"pack/README.md": b"theirs"}, base=base, author="rita", email="", message="Someone else's edit"
    )
    answer = send(as_owner, "put", URL, {"base": base, "message": "mine", "files": {"README.md": "mine"}})
    assert answer.status_code == 409
    body = answer.json()
    assert body["head"] == moved and body["changes"] == [{"path": "README.md", "status": "modified"}]
    assert "nothing was saved" in body["detail"]
    assert head_of(project) == moved
    assert PackRepo(project.repo_path).files(prefix="pack/")["README.md"] == b"theirs"


def test_it_refuses_paths_escaping_the_pack(as_owner: Client, project: Project) -> None:
    for path in ("../spec/x.txt", "/etc/passwd", "a/../../b", "a//b", "a\\b", ""):
        answer = send(as_owner, "put", URL, {"base": head_of(project), "message": "m", "files": {path: "x"}})
        assert answer.status_code == 400, path
        assert "bad file path" in answer.json()["detail"]
    assert len(PackRepo(project.repo_path).log()) == 1


def test_it_refuses_bad_saves_with_a_message(as_owner: Client, project: Project) -> None:
    base = head_of(project)
    cases = [
        ({"base": base, "message": " ", "files": {"a": "x"}}, "needs a message"),
        ({"base": base, "message": "m", "files": {}}, "no files given"),
        ({"base": "feedface", "message": "m", "files": {"a": "x"}}, "base: no version feedface"),
        ({"base": base, "message": "m", "files": {"gone.txt": None}}, "cannot delete gone.txt"),
        ({"base": base, "message": "m", "files": {"README.md": None, "README.md ": None}}, "cannot delete"),
    ]
    for body, expected in cases:
        answer = send(as_owner, "put", URL, body)
        assert answer.status_code == 400, body
        assert expected in answer.json()["detail"]
    readme = PackRepo(project.repo_path).files(prefix="pack/")["README.md"].decode()
    answer = send(as_owner, "put", URL, {"base": base, "message": "m", "files": {"README.md": readme}})
    assert answer.status_code == 400 and answer.json()["detail"] == "nothing changed"
    assert send(as_owner, "put", URL, {"base": base, "files": {"a": "x"}}).status_code == 422


def test_it_forbids_viewers_and_reviewers_to_save(as_viewer: Client, as_reviewer: Client, project: Project) -> None:
    for client in (as_viewer, as_reviewer):
        answer = send(client, "put", URL, {"base": head_of(project), "message": "m", "files": {"a.txt": "x"}})
        assert answer.status_code == 403
        assert "only authors can change it" in answer.json()["detail"]
    assert len(PackRepo(project.repo_path).log()) == 1


def test_it_hides_the_project_from_strangers_on_save(as_stranger: Client, project: Project) -> None:
    answer = send(as_stranger, "put", URL, {"base": head_of(project), "message": "m", "files": {"a.txt": "x"}})
    assert answer.status_code == 404


def test_it_requires_authentication_to_save(anonymous: Client, project: Project) -> None:
    answer = send(anonymous, "put", URL, {"base": head_of(project), "message": "m", "files": {"a.txt": "x"}})
    assert answer.status_code == 401
