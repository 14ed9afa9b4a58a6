"""Helpers for the project page tests: the project's repository, and a teammate's save
made behind the page's back (to make a base stale)."""

from __future__ import annotations

from typing import Any

import pytest

from studio.projects.models import Project
from studio.projects.storage import PackRepo

HTMX = {"HX-Request": "true"}


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    """The personas' passwords are hashed once per test; PBKDF2 at full strength makes
    that most of each test's time. (A candidate for tests/studio/conftest.py.)"""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def repo(project: Project) -> PackRepo:
    return PackRepo(project.repo_path)


def pack_text(repo: PackRepo, path: str, version: str | None = None) -> str:
    return repo.files(version, prefix="pack/")[path].decode()


def teammate_saves(repo: PackRepo, path: str, text: str, message: str = "Teammate's change") -> str:
    return repo.save({f"pack/{path}": text.encode()}, base=repo.head(), author="Tess Teammate",
                     email="tess@example.com", message=message)
