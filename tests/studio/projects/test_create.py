from __future__ import annotations

import io
import zipfile
from pathlib import Path

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from studio.accounts.models import Membership, Role
from studio.projects.models import Project
from studio.projects.storage import PackRepo


def test_it_creates_a_project_from_an_example(as_owner: Client, owner: object) -> None:
    page = as_owner.post("/new", {"slug": "st", "name": "ST", "example": "support_triage"})
    assert page.status_code == 302 and page["Location"] == "/p/st/"
    project = Project.objects.get(slug="st")
    assert Membership.objects.get(project=project).role == Role.AUTHOR
    files = PackRepo(project.repo_path).files(prefix="pack/")
    assert "graph.yaml" in files and "evalset.jsonl" in files
    assert project.head == PackRepo(project.repo_path).head()


def test_it_creates_a_project_from_an_upload(as_owner: Client) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("mypack/manifest.yaml", "name: x\nversion: 1\nentry: a\n")
    upload = SimpleUploadedFile("mypack.zip", buf.getvalue(), content_type="application/zip")
    page = as_owner.post("/new", {"slug": "up", "archive": upload})
    assert page.status_code == 302
    files = PackRepo(Project.objects.get(slug="up").repo_path).files(prefix="pack/")
    assert files == {"manifest.yaml": b"name: x\nversion: 1\nentry: a\n"}


def test_it_refuses_an_unsafe_upload_and_stores_nothing(as_owner: Client, git_root: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("../../evil.txt", "x")
    upload = SimpleUploadedFile("evil.zip", buf.getvalue(), content_type="application/zip")
    page = as_owner.post("/new", {"slug": "evil", "archive": upload})
    assert page.status_code == 400
    assert b"would be written outside the pack folder" in page.content
    assert not Project.objects.filter(slug="evil").exists()
    assert not (git_root / "evil.git").exists()


def test_it_refuses_a_bad_slug(as_owner: Client) -> None:
    page = as_owner.post("/new", {"slug": "Bad Slug!"})
    assert page.status_code == 400
    assert b"lowercase letters" in page.content


def test_it_tells_a_stranger_only_that_a_taken_slug_is_unavailable(
    as_stranger: Client, project: Project, git_root: Path
) -> None:
    PackRepo.create(git_root / "held.git", {"pack/.keep": b""}, author="x", email="", message="left over")
    for slug in ("triage", "held"):  # a project the stranger cannot see; a repository without a project
        page = as_stranger.post("/new", {"slug": slug})
        assert page.status_code == 400
        text = page.content.decode()
        assert f"the slug &#x27;{slug}&#x27; is unavailable; choose another slug" in text
        assert "exists" not in text and str(git_root) not in text


def test_it_tells_a_member_that_the_project_exists(as_viewer: Client, project: Project) -> None:
    page = as_viewer.post("/new", {"slug": "triage"})
    assert page.status_code == 400
    assert "a project with slug &#x27;triage&#x27; exists" in page.content.decode()


def test_it_starts_an_empty_project_from_a_skeleton_that_loads_and_passes_its_eval(
    as_owner: Client, tmp_path: Path
) -> None:
    from runtime import evaluate, load_pack, open_backend
    from studio.packs import materialize

    page = as_owner.post("/new", {"slug": "fresh"})
    assert page.status_code == 302
    files = PackRepo(Project.objects.get(slug="fresh").repo_path).files(prefix="pack/")
    assert {"manifest.yaml", "graph.yaml", "prompts/answer.txt", "grammars/answer.json", "evalset.jsonl"} <= set(files)
    assert all(b"docs/pack-format.md" in files[f] for f in ("manifest.yaml", "graph.yaml", "README.md"))
    pack = load_pack(materialize(files, tmp_path / "pack"))
    assert [n.kind for n in pack.nodes.values()] == ["generate", "end"] and len(pack.cases) == 1
    report = evaluate(pack, open_backend(pack.model or "", base_dir=pack.root, default=pack.model))
    assert report.passed == len(pack.cases) == 1
    overview = as_owner.get("/p/fresh/").content.decode()
    assert '<svg class="graph"' in overview and 'href="/docs/pack-format"' in overview


def test_it_serves_the_pack_format_reference_to_signed_in_users(as_viewer: Client, client: Client) -> None:
    page = as_viewer.get("/docs/pack-format")
    assert page.status_code == 200
    html = page.content.decode()
    assert '<h2 id="manifest-yaml">manifest.yaml</h2>' in html and '<h2 id="evalset-jsonl">' in html
    assert client.get("/docs/pack-format").status_code == 302  # anonymous: to the login page
