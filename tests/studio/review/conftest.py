"""Review fixtures: support_triage (tests/studio/conftest.py's `project`, with its
owner, reviewer, viewer and stranger) deployed on the `scripted` endpoint, and a served
run waiting for a person at `extract` (escalated past the last tier, with the answers
the small tier gave), built in plain sight, with its review item."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from studio.deployments import service
from studio.deployments.models import Deployment, ServedRun
from studio.endpoints.models import Endpoint
from studio.projects.models import Project
from studio.review.items import open_item
from studio.review.models import ReviewItem
from tests.support.review import CANDIDATES, TICKET, waiting_trace


@pytest.fixture(autouse=True)
def no_watcher(settings: Any) -> None:
    settings.PACKFORGE_WORK_WATCH = False


@pytest.fixture
def deployment(project: Project, owner: User, scripted: Endpoint) -> Deployment:
    return service.create_deployment(project, user=owner, name="triage-prod", version=None, tiers=[scripted.pk])


@pytest.fixture
def make_waiting(deployment: Deployment) -> Callable[..., ServedRun]:
    def make(run_id: str = "r1", candidates: list[dict[str, Any]] | None = None, **fields: Any) -> ServedRun:
        values: dict[str, Any] = {
            "deployment": deployment,
            "run_id": run_id,
            "input": {"ticket": TICKET},
            "input_digest": service.input_digest({"ticket": TICKET}),
            "version": deployment.version,
            "status": ServedRun.Status.WAITING,
            "waiting_at": "extract",
            "waiting_reason": "escalated",
            "question": "Copy two facts out of this support ticket.",
            "state": {"category": "billing", "input": {"ticket": TICKET}},
            "trace": waiting_trace(CANDIDATES if candidates is None else candidates),
        }
        return ServedRun.objects.create(**{**values, **fields})

    return make


@pytest.fixture
def waiting(make_waiting: Callable[..., ServedRun]) -> ServedRun:
    return make_waiting()


@pytest.fixture
def item(waiting: ServedRun) -> ReviewItem:
    made = open_item(waiting)
    assert made is not None
    return made
