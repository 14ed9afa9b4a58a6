"""Studio test personas and projects, built in plain sight.

Personas, as a user would meet them: `owner` (author of the project), `reviewer` and
`viewer` (members with those roles), `stranger` (logged in, not a member)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.test import Client

from studio.accounts.models import Membership, Role
from studio.endpoints.models import Endpoint
from studio.projects.models import Project, create_project
from studio.projects.views import example_files
from tests.support.db_teardown import end_stray_sessions  # noqa: F401 (a session fixture)
from tests.support.fault_server import FaultServer
from tests.support.studio import client_for, make_user


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    """Personas log in on every test; the production hasher costs ~0.3 s a user."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def git_root(tmp_path: Path, settings: Any) -> Path:
    settings.GIT_ROOT = tmp_path / "git"
    return settings.GIT_ROOT  # type: ignore[no-any-return]


@pytest.fixture
def owner(db: None) -> User:
    return make_user("olive")


@pytest.fixture
def reviewer(db: None) -> User:
    return make_user("rita")


@pytest.fixture
def viewer(db: None) -> User:
    return make_user("victor")


@pytest.fixture
def stranger(db: None) -> User:
    return make_user("sam")


@pytest.fixture
def project(owner: User, reviewer: User, viewer: User) -> Project:
    """support_triage, owned by `owner`, with a reviewer and a viewer."""
    made = create_project(
        slug="triage",
        name="Support triage",
        owner=owner,
        pack_files=example_files("support_triage"),
        message="Create from example",
    )
    Membership.objects.create(user=reviewer, project=made, role=Role.REVIEWER)
    Membership.objects.create(user=viewer, project=made, role=Role.VIEWER)
    return made


@pytest.fixture
def as_owner(owner: User) -> Client:
    return client_for(owner)


@pytest.fixture
def as_viewer(viewer: User) -> Client:
    return client_for(viewer)


@pytest.fixture
def as_reviewer(reviewer: User) -> Client:
    return client_for(reviewer)


@pytest.fixture
def as_stranger(stranger: User) -> Client:
    return client_for(stranger)


# -- endpoints: staff, a scripted endpoint, a fault server, eager tasks (endpoints/ and runs/) --


@pytest.fixture
def staff(db: None) -> User:
    return make_user("stella", is_staff=True)


@pytest.fixture
def as_staff(staff: User) -> Client:
    return client_for(staff)


@pytest.fixture
def scripted(staff: User) -> Endpoint:
    script = django_settings.EXAMPLE_PACKS / "support_triage" / "fakes" / "scripted.json"
    return Endpoint.objects.create(name="scripted", spec=f"fake:{script}", created_by=staff)


@pytest.fixture
def fault() -> Iterator[FaultServer]:
    with FaultServer() as server:
        yield server


@pytest.fixture
def eager() -> Iterator[None]:
    """Tasks run inline when their on-commit callbacks run (with
    django_capture_on_commit_callbacks(execute=True)), never through a broker."""
    from studio.celery import app

    saved: dict[str, Any] = {k: app.conf[k] for k in ("task_always_eager", "task_eager_propagates")}
    app.conf.update(task_always_eager=True, task_eager_propagates=True)
    yield
    app.conf.update(saved)


@pytest.fixture(autouse=True)
def no_watcher_thread(settings: Any) -> None:
    """The test process never runs a lease watcher thread (tests drive watchers by hand);
    a stray one would hold a database connection until the process exits."""
    settings.PACKFORGE_WORK_WATCH = False
