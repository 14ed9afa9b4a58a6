"""Deployment fixtures: support_triage (tests/studio/conftest.py's `project`) deployed on
scripted endpoints: `good` answers every ticket of the evalset, `broken` answers
`classify` and `extract` with text that is not JSON (so a node escalates from it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from studio.deployments import service
from studio.deployments.models import Deployment
from studio.endpoints.models import Endpoint
from studio.projects.models import Project
from tests.support.serving import scripted_tier


@pytest.fixture(autouse=True)
def no_watcher(settings: Any) -> None:
    # No lease-watcher thread in unit tests (it would hold its own connection).
    settings.PACKFORGE_WORK_WATCH = False


@pytest.fixture
def good(tmp_path: Path, staff: User) -> Endpoint:
    return scripted_tier(tmp_path, staff, "large")


@pytest.fixture
def broken(tmp_path: Path, staff: User) -> Endpoint:
    return scripted_tier(tmp_path, staff, "small", {"classify": "not json at all", "extract": "nor this"})


@pytest.fixture
def deployment(project: Project, owner: User, good: Endpoint) -> Deployment:
    return service.create_deployment(project, user=owner, name="triage-prod", version=None, tiers=[good.pk])


@pytest.fixture
def other(project: Project, owner: User, good: Endpoint) -> Deployment:
    return service.create_deployment(project, user=owner, name="triage-canary", version=None, tiers=[good.pk])
