from __future__ import annotations

from django.test import Client

from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import head_of


def test_it_lists_the_pack_files_with_sizes(as_viewer: Client, project: Project) -> None:
    answer = as_viewer.get("/api/projects/triage/files")
    assert answer.status_code == 200
    body = answer.json()
    assert body["version"] == head_of(project)
    sizes = {f["path"]: f["size"] for f in body["files"]}
    assert sizes["graph.yaml"] > 0 and "manifest.yaml" in sizes and "prompts/classify.txt" in sizes
    assert not any(p.startswith(("pack/", "spec/")) for p in sizes)


def test_it_lists_files_at_an_older_version(as_viewer: Client, project: Project) -> None:
    first = head_of(project)
    PackRepo(project.repo_path).save({"pack/extra.txt": b"x"}, base=first, author="o", email="", message="add")
    paths = [f["path"] for f in as_viewer.get(f"/api/projects/triage/files?version={first[:8]}").json()["files"]]
    assert "extra.txt" not in paths
    assert "extra.txt" in [f["path"] for f in as_viewer.get("/api/projects/triage/files").json()["files"]]


def test_it_reads_one_file(as_viewer: Client, project: Project) -> None:
    answer = as_viewer.get("/api/projects/triage/files/prompts/classify.txt")
    assert answer.status_code == 200
    body = answer.json()
    stored = PackRepo(project.repo_path).files(prefix="pack/")["prompts/classify.txt"]
    assert body["content"] == stored.decode() and body["size"] == len(stored) and body["version"] == head_of(project)


def test_it_answers_404_for_a_missing_file_or_version(as_owner: Client, project: Project) -> None:
    answer = as_owner.get("/api/projects/triage/files/nope.txt")
    assert answer.status_code == 404 and "no file nope.txt" in answer.json()["detail"]
    answer = as_owner.get("/api/projects/triage/files?version=deadbeef")
    assert answer.status_code == 404 and "no version deadbeef" in answer.json()["detail"]
    answer = as_owner.get("/api/projects/triage/files/graph.yaml?version=" + "0" * 40)
    assert answer.status_code == 404 and "no version" in answer.json()["detail"]


def test_it_refuses_a_path_outside_the_pack(as_owner: Client, project: Project) -> None:
    # The client would normalise a literal '..'; an encoded one reaches the server.
    answer = as_owner.get("/api/projects/triage/files/prompts/%2E%2E/%2E%2E/HEAD")
    assert answer.status_code == 400
    assert "bad file path" in answer.json()["detail"]


def test_it_requires_authentication_for_files(anonymous: Client, project: Project) -> None:
    assert anonymous.get("/api/projects/triage/files").status_code == 401
    assert anonymous.get("/api/projects/triage/files/graph.yaml").status_code == 401


def test_it_hides_files_from_strangers(as_stranger: Client, project: Project) -> None:
    assert as_stranger.get("/api/projects/triage/files").status_code == 404
    assert as_stranger.get("/api/projects/triage/files/graph.yaml").status_code == 404
