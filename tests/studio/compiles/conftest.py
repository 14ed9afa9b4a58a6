"""Compile test fixtures: a project with a spec, and the loop replaced by a scripted
stand-in (tests.support.compile_stand_in.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from studio.accounts.models import Membership, Role
from studio.compiles import worker
from studio.projects.models import Project, create_project
from studio.projects.views import example_files
from tests.support.compile_stand_in import FakePlanner, Scripted, StandIn, spec_files


@pytest.fixture(autouse=True)
def no_watcher(settings: Any, tmp_path: Path) -> None:
    # No lease-watcher thread in unit tests (it would hold its own connection, outside
    # the test's transaction); work dirs under the test's folder.
    settings.PACKFORGE_WORK_WATCH = False
    settings.PACKFORGE_COMPILE_ROOT = str(tmp_path / "compiles")


@pytest.fixture
def project(owner: User, reviewer: User, viewer: User) -> Project:
    """support_triage with its spec under spec/, owned by `owner`, with a reviewer and a viewer."""
    made = create_project(
        slug="triage",
        name="Support triage",
        owner=owner,
        pack_files=example_files("support_triage"),
        spec_files=spec_files(),
        message="Create from example",
    )
    Membership.objects.create(user=reviewer, project=made, role=Role.REVIEWER)
    Membership.objects.create(user=viewer, project=made, role=Role.VIEWER)
    return made


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[list[Scripted]], StandIn]]:
    """Replace the loop (and the planner factory) in studio.compiles.worker."""

    def install(script: list[Scripted]) -> StandIn:
        fake = StandIn(script)
        monkeypatch.setattr(worker, "build", fake)
        monkeypatch.setattr(worker, "make_planner", FakePlanner)
        return fake

    yield install
