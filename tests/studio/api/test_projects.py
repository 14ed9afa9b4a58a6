from __future__ import annotations

import io
import zipfile
from pathlib import Path

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from studio.accounts.models import Membership, Role
from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import head_of, send


def test_it_lists_the_projects_a_user_can_see(as_viewer: Client, project: Project) -> None:
    answer = as_viewer.get("/api/projects")
    assert answer.status_code == 200
    [row] = answer.json()
    assert row["slug"] == "triage" and row["role"] == "viewer" and row["head"] == head_of(project)
    assert row["created_by"] == "olive"


def test_it_hides_projects_from_strangers_in_the_list(as_stranger: Client, project: Project) -> None:
    assert as_stranger.get("/api/projects").json() == []


def test_it_requires_authentication(anonymous: Client, project: Project) -> None:
    for answer in (
        anonymous.get("/api/projects"),
        anonymous.get("/api/projects/triage"),
        send(anonymous, "post", "/api/projects", {"slug": "x"}),
    ):
        assert answer.status_code == 401
        assert answer.json() == {"detail": "Unauthorized"}
    assert not Project.objects.filter(slug="x").exists()


def test_it_shows_one_project(as_owner: Client, project: Project) -> None:
    answer = as_owner.get("/api/projects/triage")
    assert answer.status_code == 200
    assert answer.json()["name"] == "Support triage" and answer.json()["role"] == "author"


def test_it_answers_404_to_a_stranger(as_stranger: Client, project: Project) -> None:
    answer = as_stranger.get("/api/projects/triage")
    assert answer.status_code == 404
    assert answer.json() == {"detail": "Not found"}
    assert as_stranger.get("/api/projects/nope").json() == {"detail": "Not found"}


def test_it_creates_a_project_from_an_example(as_owner: Client, owner: object) -> None:
    answer = send(as_owner, "post", "/api/projects", {"slug": "st", "name": "ST", "example": "support_triage"})
    assert answer.status_code == 201
    assert answer.json()["slug"] == "st" and answer.json()["role"] == "author"
    project = Project.objects.get(slug="st")
    assert Membership.objects.get(project=project, user=owner).role == Role.AUTHOR
    assert "graph.yaml" in PackRepo(project.repo_path).files(prefix="pack/")


def test_it_creates_an_empty_project(as_viewer: Client) -> None:
    answer = send(as_viewer, "post", "/api/projects", {"slug": "blank"})
    assert answer.status_code == 201
    assert answer.json()["name"] == "blank"


def test_it_refuses_a_bad_slug(as_owner: Client) -> None:
    answer = send(as_owner, "post", "/api/projects", {"slug": "Bad Slug!"})
    assert answer.status_code == 400
    assert "lowercase letters" in answer.json()["detail"]


def test_it_refuses_an_unknown_example(as_owner: Client, git_root: object) -> None:
    answer = send(as_owner, "post", "/api/projects", {"slug": "ok", "example": "../../etc"})
    assert answer.status_code == 400
    assert "no example '../../etc'" in answer.json()["detail"] and "support_triage" in answer.json()["detail"]
    assert not Project.objects.filter(slug="ok").exists()


def test_it_tells_a_stranger_only_that_a_taken_slug_is_unavailable(
    as_stranger: Client, project: Project, git_root: Path
) -> None:
    # Held by a project the stranger cannot see, and by a repository with no project row:
    # the same answer, which names no project.
    PackRepo.create(git_root / "held.git", {"pack/.keep": b""}, author="x", email="", message="left over")
    for slug in ("triage", "held"):
        answer = send(as_stranger, "post", "/api/projects", {"slug": slug})
        assert answer.status_code == 409
        assert answer.json() == {"detail": f"the slug {slug!r} is unavailable; choose another slug"}


def test_it_tells_a_member_that_the_project_exists(as_viewer: Client, project: Project) -> None:
    answer = send(as_viewer, "post", "/api/projects", {"slug": "triage"})
    assert answer.status_code == 409
    assert "a project with slug 'triage' exists" in answer.json()["detail"]


def test_it_tells_a_stranger_uploading_to_a_taken_slug_only_that_it_is_unavailable(
    as_stranger: Client, project: Project
) -> None:
    archive = SimpleUploadedFile("p.zip", _zip({"p/manifest.yaml": "name: p\n"}), content_type="application/zip")
    answer = as_stranger.post("/api/projects/upload", {"slug": "triage", "archive": archive})
    assert answer.status_code == 409
    assert answer.json() == {"detail": "the slug 'triage' is unavailable; choose another slug"}


def test_it_answers_422_to_a_body_without_a_slug(as_owner: Client) -> None:
    answer = send(as_owner, "post", "/api/projects", {"name": "x"})
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"][-1] == "slug"


def _zip(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return buf.getvalue()
