from __future__ import annotations

from django.test import Client

from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import head_of


def test_it_lists_versions_newest_first(as_viewer: Client, project: Project) -> None:
    repo = PackRepo(project.repo_path)
    second = repo.save(
        {"pack/README.md": b"new"},
        base=head_of(project),
        author="Olive",
        email="o@example.com",
        message="Edit the readme",
    )
    answer = as_viewer.get("/api/projects/triage/versions")
    assert answer.status_code == 200
    rows = answer.json()
    assert next(r["sha"] for r in rows) == second and len(rows) == 2
    assert rows[0]["author"] == "Olive" and rows[0]["email"] == "o@example.com"
    assert rows[0]["message"] == "Edit the readme" and rows[0]["time"].endswith("Z")


def test_it_requires_authentication_for_versions(anonymous: Client, project: Project) -> None:
    assert anonymous.get("/api/projects/triage/versions").status_code == 401


def test_it_hides_versions_from_strangers(as_stranger: Client, project: Project) -> None:
    assert as_stranger.get("/api/projects/triage/versions").status_code == 404


def test_it_refuses_a_bad_limit(as_owner: Client, project: Project) -> None:
    answer = as_owner.get("/api/projects/triage/versions?limit=0")
    assert answer.status_code == 400 and answer.json() == {"detail": "limit must be between 1 and 10000"}
    assert as_owner.get("/api/projects/triage/versions?limit=x").status_code == 422
