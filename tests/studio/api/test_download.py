from __future__ import annotations

import io
import tarfile
import zipfile

from django.test import Client

from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import head_of

URL = "/api/projects/triage/download"


def test_it_downloads_a_zip_of_the_head(as_viewer: Client, project: Project) -> None:
    answer = as_viewer.get(URL)
    assert answer.status_code == 200
    sha = head_of(project)
    assert answer["Content-Type"] == "application/zip"
    assert answer["Content-Disposition"] == f'attachment; filename="triage-{sha[:10]}.zip"'
    assert answer["X-Packforge-Version"] == sha
    names = zipfile.ZipFile(io.BytesIO(answer.content)).namelist()
    assert "triage/manifest.yaml" in names and "triage/fakes/scripted.json" in names


def test_it_downloads_a_tar_gz_of_an_older_version(as_viewer: Client, project: Project) -> None:
    first = head_of(project)
    PackRepo(project.repo_path).save({"pack/extra.txt": b"x"}, base=first, author="o", email="", message="add")
    answer = as_viewer.get(f"{URL}?format=tar.gz&version={first}")
    assert answer.status_code == 200 and answer["Content-Type"] == "application/gzip"
    with tarfile.open(fileobj=io.BytesIO(answer.content), mode="r:gz") as archive:
        names = archive.getnames()
    assert "triage/graph.yaml" in names and "triage/extra.txt" not in names


def test_it_refuses_a_bad_format_or_version(as_owner: Client, project: Project) -> None:
    answer = as_owner.get(f"{URL}?format=rar")
    assert answer.status_code == 400 and answer.json() == {"detail": "unknown format 'rar'; use zip or tar.gz"}
    answer = as_owner.get(f"{URL}?version=nothex")
    assert answer.status_code == 404 and "no version 'nothex'" in answer.json()["detail"]


def test_it_requires_authentication_to_download(anonymous: Client, project: Project) -> None:
    assert anonymous.get(URL).status_code == 401


def test_it_hides_downloads_from_strangers(as_stranger: Client, project: Project) -> None:
    assert as_stranger.get(URL).status_code == 404
