from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from studio.projects.models import Project
from studio.projects.storage import PackRepo


def _zip(members: dict[str, str]) -> SimpleUploadedFile:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, text in members.items():
            zf.writestr(name, text)
    return SimpleUploadedFile("pack.zip", buf.getvalue(), content_type="application/zip")


def test_it_creates_a_project_from_a_zip(as_owner: Client) -> None:
    answer = as_owner.post("/api/projects/upload", {"slug": "up", "archive": _zip({"p/manifest.yaml": "name: x\n"})})
    assert answer.status_code == 201
    assert PackRepo(Project.objects.get(slug="up").repo_path).files(prefix="pack/") == {"manifest.yaml": b"name: x\n"}


def test_it_creates_a_project_from_a_tar_gz(as_owner: Client) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        info = tarfile.TarInfo("p/graph.yaml")
        info.size = 5
        tf.addfile(info, io.BytesIO(b"a: 1\n"))
    upload = SimpleUploadedFile("p.tar.gz", buf.getvalue(), content_type="application/gzip")
    answer = as_owner.post("/api/projects/upload", {"slug": "tgz", "name": "T", "archive": upload})
    assert answer.status_code == 201 and answer.json()["name"] == "T"


def test_it_refuses_an_unsafe_archive_and_stores_nothing(as_owner: Client, git_root: Path) -> None:
    answer = as_owner.post("/api/projects/upload", {"slug": "evil", "archive": _zip({"../../evil.txt": "x"})})
    assert answer.status_code == 400
    assert "would be written outside the pack folder" in answer.json()["detail"]
    assert "Nothing was stored" in answer.json()["detail"]
    assert not Project.objects.filter(slug="evil").exists()
    assert not (git_root / "evil.git").exists()


def test_it_refuses_an_oversized_archive(as_owner: Client, settings: object, git_root: Path) -> None:
    settings.UPLOAD_MAX_BYTES = 1024  # type: ignore[attr-defined]
    answer = as_owner.post("/api/projects/upload", {"slug": "big", "archive": _zip({"a.txt": "x" * 5000})})
    assert answer.status_code == 400
    assert "limit" in answer.json()["detail"]
    assert not (git_root / "big.git").exists()


def test_it_requires_an_archive(as_owner: Client) -> None:
    answer = as_owner.post("/api/projects/upload", {"slug": "none"})
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"][-1] == "archive"


def test_it_requires_authentication_to_upload(anonymous: Client) -> None:
    answer = anonymous.post("/api/projects/upload", {"slug": "up", "archive": _zip({"a.txt": "x"})})
    assert answer.status_code == 401
    assert not Project.objects.filter(slug="up").exists()
