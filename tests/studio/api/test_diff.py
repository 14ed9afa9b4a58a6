from __future__ import annotations

from django.test import Client

from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import head_of


def _edit(project: Project) -> tuple[str, str]:
    base = head_of(project)
    new = PackRepo(project.repo_path).save(
        {"pack/README.md": b"one\ntwo\n", "pack/extra.txt": b"x\n"}, base=base, author="o", email="", message="edit"
    )
    return base, new


def test_it_diffs_the_head_against_its_parent_as_unified_text(as_viewer: Client, project: Project) -> None:
    base, new = _edit(project)
    answer = as_viewer.get("/api/projects/triage/diff")
    assert answer.status_code == 200
    body = answer.json()
    assert body["a"] == base and body["b"] == new and body["layout"] == "unified"
    files = {f["path"]: f for f in body["files"]}
    assert files["extra.txt"]["status"] == "added" and "+x" in files["extra.txt"]["unified"]
    assert files["README.md"]["status"] == "modified"
    assert "--- a/README.md" in files["README.md"]["unified"] and "+one" in files["README.md"]["unified"]


def test_it_diffs_two_versions_side_by_side(as_viewer: Client, project: Project) -> None:
    base, new = _edit(project)
    answer = as_viewer.get(f"/api/projects/triage/diff?a={new}&b={base[:7]}&layout=side-by-side")
    files = {f["path"]: f for f in answer.json()["files"]}
    assert files["extra.txt"]["status"] == "deleted"
    assert files["extra.txt"]["rows"] == [{"old_line": 1, "old": "x", "new_line": None, "new": "", "kind": "del"}]
    assert files["extra.txt"]["unified"] is None


def test_it_diffs_the_first_version_as_all_added(as_viewer: Client, project: Project) -> None:
    body = as_viewer.get("/api/projects/triage/diff").json()
    assert body["a"] is None and body["b"] == head_of(project)
    assert {f["status"] for f in body["files"]} == {"added"} and "graph.yaml" in [f["path"] for f in body["files"]]


def test_it_refuses_bad_diff_input(as_owner: Client, project: Project) -> None:
    answer = as_owner.get("/api/projects/triage/diff?layout=wide")
    assert answer.status_code == 400 and "unknown layout 'wide'" in answer.json()["detail"]
    answer = as_owner.get("/api/projects/triage/diff?a=abcdef12")
    assert answer.status_code == 404 and "no version abcdef12" in answer.json()["detail"]


def test_it_requires_authentication_for_diffs(anonymous: Client, project: Project) -> None:
    assert anonymous.get("/api/projects/triage/diff").status_code == 401


def test_it_hides_diffs_from_strangers(as_stranger: Client, project: Project) -> None:
    assert as_stranger.get("/api/projects/triage/diff").status_code == 404
