from __future__ import annotations

from django.test import Client

from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import head_of, send

URL = "/api/projects/triage/validate"


def test_it_validates_the_head(as_viewer: Client, project: Project) -> None:
    answer = send(as_viewer, "post", URL, {})
    assert answer.status_code == 200
    body = answer.json()
    assert body["valid"] is True and body["problems"] == [] and body["version"] == head_of(project)
    assert body["summary"]["name"] == "support_triage" and body["summary"]["nodes"] > 0
    assert body["summary"]["edges"] > 0 and body["summary"]["cases"] > 0


def test_it_reports_problems_in_unsaved_files(as_reviewer: Client, project: Project) -> None:
    answer = send(as_reviewer, "post", URL, {"files": {"grammars/classify.json": "{not json"}})
    assert answer.status_code == 200
    body = answer.json()
    assert body["valid"] is False and body["summary"]["nodes"] is None
    [problem, *_] = body["problems"]
    assert problem["file"] == "grammars/classify.json" and problem["line"] == 1 and problem["message"]
    assert len(PackRepo(project.repo_path).log()) == 1  # validating writes nothing


def test_it_reports_a_removed_file(as_owner: Client, project: Project) -> None:
    body = send(as_owner, "post", URL, {"files": {"prompts/classify.txt": None}}).json()
    assert body["valid"] is False
    assert any(p["file"].startswith("prompts/classify.txt") for p in body["problems"])


def test_it_validates_an_older_version(as_owner: Client, project: Project) -> None:
    first = head_of(project)
    PackRepo(project.repo_path).save(
        {"pack/graph.yaml": b"nodes: ["}, base=first, author="o", email="", message="break"
    )
    assert send(as_owner, "post", URL, {}).json()["valid"] is False
    assert send(as_owner, "post", URL, {"version": first}).json()["valid"] is True


def test_it_refuses_bad_validate_input(as_owner: Client, project: Project) -> None:
    answer = send(as_owner, "post", URL, {"files": {"../../../tmp/x": "x"}})
    assert answer.status_code == 400 and "bad file path" in answer.json()["detail"]
    answer = send(as_owner, "post", URL, {"version": "beef"})
    assert answer.status_code == 404 and "no version beef" in answer.json()["detail"]
    assert send(as_owner, "post", URL, {"files": ["graph.yaml"]}).status_code == 422


def test_it_requires_authentication_to_validate(anonymous: Client, project: Project) -> None:
    assert send(anonymous, "post", URL, {}).status_code == 401


def test_it_hides_validation_from_strangers(as_stranger: Client, project: Project) -> None:
    assert send(as_stranger, "post", URL, {}).status_code == 404


def test_it_is_not_valid_when_the_own_scripted_model_is_outside_the_pack(as_owner: Client, project: Project) -> None:
    manifest = PackRepo(project.repo_path).files(None)["pack/manifest.yaml"].decode()
    changed = manifest.replace("model: fake:fakes/scripted.json", "model: fake:/etc/passwd")
    body = send(as_owner, "post", URL, {"files": {"manifest.yaml": changed}}).json()
    assert body["valid"] is False
    assert [p["message"] for p in body["problems"]] == [
        "the manifest's model 'fake:/etc/passwd' names a file outside the pack; scripted models live in the pack"
    ]
