"""The project page tests' repository fixture (their helpers: tests/support/studio.py)."""

from __future__ import annotations

import pytest

from studio.projects.models import Project
from studio.projects.storage import PackRepo


@pytest.fixture
def repo(project: Project) -> PackRepo:
    return PackRepo(project.repo_path)
