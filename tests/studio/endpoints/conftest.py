"""Endpoint test fixtures: a staff persona (endpoints are shared by every project, so
staff manage them), a scripted endpoint, and a real OpenAI-compatible server on
loopback (tests.support.fault_server) for checks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from studio.endpoints.models import Endpoint
from tests.studio.conftest import client_for, make_user
from tests.support.fault_server import FaultServer


@pytest.fixture
def staff(db: None) -> User:
    return make_user("stella", is_staff=True)


@pytest.fixture
def as_staff(staff: User) -> Client:
    return client_for(staff)


@pytest.fixture
def scripted(staff: User) -> Endpoint:
    script = settings.EXAMPLE_PACKS / "support_triage" / "fakes" / "scripted.json"
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
