"""Download a version (/p/<slug>/download/?version=SHA&format=zip|tar.gz); the download
is a pack the runtime loads and evaluates as it is."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from django.conf import settings
from django.test import Client

from runtime import load_pack
from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import teammate_saves


def test_it_downloads_the_head_as_a_zip_that_the_runtime_evaluates(
    as_owner: Client, project: Project, repo: PackRepo, tmp_path: Path
) -> None:
    page = as_owner.get("/p/triage/download/")
    assert page.status_code == 200 and page["Content-Type"] == "application/zip"
    assert page["Content-Disposition"] == f'attachment; filename="triage-{repo.head()[:10]}.zip"'
    with zipfile.ZipFile(io.BytesIO(page.content)) as zf:
        assert all(name.startswith("triage/") for name in zf.namelist())
        zf.extractall(tmp_path)
    pack = load_pack(tmp_path / "triage")
    assert pack.name == "support_triage" and len(pack.cases) >= 10
    run = subprocess.run(
        [sys.executable, "-m", "runtime", "eval", str(tmp_path / "triage")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=settings.BASE_DIR,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_it_downloads_an_older_version_as_tar_gz(
    as_owner: Client, project: Project, repo: PackRepo, tmp_path: Path
) -> None:
    first = repo.head()
    teammate_saves(repo, "prompts/classify.txt", "changed {{ input.ticket }}\n")
    page = as_owner.get("/p/triage/download/", {"version": first[:7], "format": "tar.gz"})
    assert page.status_code == 200 and page["Content-Type"] == "application/gzip"
    assert page["Content-Disposition"] == f'attachment; filename="triage-{first[:10]}.tar.gz"'
    with tarfile.open(fileobj=io.BytesIO(page.content), mode="r:gz") as tf:
        tf.extractall(tmp_path, filter="data")
    assert (tmp_path / "triage/prompts/classify.txt").read_bytes() == repo.files(first, prefix="pack/")[
        "prompts/classify.txt"
    ]
    assert load_pack(tmp_path / "triage").name == "support_triage"


def test_it_refuses_an_unknown_format_or_version(as_owner: Client, project: Project) -> None:
    page = as_owner.get("/p/triage/download/", {"format": "rar"})
    assert page.status_code == 400 and b"Unknown format" in page.content
    page = as_owner.get("/p/triage/download/", {"version": "beef" * 10})
    assert page.status_code == 400 and b"Cannot download" in page.content


def test_it_requires_login(project: Project) -> None:
    page = Client().get("/p/triage/download/")
    assert page.status_code == 302 and page["Location"].startswith("/login/")


def test_it_hides_the_project_from_a_stranger(as_stranger: Client, project: Project) -> None:
    assert as_stranger.get("/p/triage/download/").status_code == 404


def test_it_lets_a_viewer_download(as_viewer: Client, project: Project) -> None:
    assert as_viewer.get("/p/triage/download/").status_code == 200


def test_it_renders_the_error_fragment_for_htmx(as_owner: Client, project: Project) -> None:
    page = as_owner.get("/p/triage/download/", {"format": "rar"}, headers={"HX-Request": "true"})
    assert page.status_code == 400 and b"<html" not in page.content and b"Unknown format" in page.content
