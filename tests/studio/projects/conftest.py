"""Helpers for the project page tests: the project's repository, and a teammate's save
made behind the page's back (to make a base stale)."""

from __future__ import annotations

import pytest

from studio.projects.models import Project
from studio.projects.storage import PackRepo

HTMX = {"HX-Request": "true"}


@pytest.fixture
def repo(project: Project) -> PackRepo:
    return PackRepo(project.repo_path)


def pack_text(repo: PackRepo, path: str, version: str | None = None) -> str:
    return repo.files(version, prefix="pack/")[path].decode()


def teammate_saves(repo: PackRepo, path: str, text: str, message: str = "Teammate's change") -> str:
    return repo.save(
        {f"pack/{path}": text.encode()},
        base=repo.head(),
        author="Tess Teammate",
        email="tess@example.com",
        message=message,
    )
