"""A served run's events are written with its checkpoint (studio.deployments.worker
ServedStore): a step's events commit in its journal transaction, so a walker that lost
the run writes none, and a running run's steps are read from its journal."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db.models import F
from django.test import Client

from runtime import ModelCall, ModelReply
from studio.deployments import recording, service, worker
from studio.deployments.models import Deployment, ServedRun
from studio.work.models import JournalEntry, RunCheckpoint
from tests.support.serving import TICKET, kinds


def submitted(deployment: Deployment, owner: User, run_id: str, capture: Any) -> ServedRun:
    with capture(execute=False):
        return service.submit(deployment, TICKET, run_id=run_id, user=owner).run


@pytest.fixture
def on_call(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Hooks called after each model call of a served walk, with the call's number (1..)."""
    hooks: list[Any] = []
    real = recording.EventBackend.complete
    made: list[str] = []

    def complete(self: recording.EventBackend, call: ModelCall) -> ModelReply:
        reply = real(self, call)
        made.append(call.node)
        for hook in hooks:
            hook(len(made))
        return reply

    monkeypatch.setattr(recording.EventBackend, "complete", complete)
    return hooks


def test_it_writes_no_event_once_another_delivery_took_the_run_over(
    deployment: Deployment, owner: User, django_capture_on_commit_callbacks: Any, on_call: list[Any]
) -> None:
    run = submitted(deployment, owner, "b-1", django_capture_on_commit_callbacks)

    def take_over(n: int) -> None:
        if n == 2:  # during the second step: another delivery bumps the fence
            RunCheckpoint.objects.filter(run_id=run.checkpoint_id).update(fence=F("fence") + 1)

    on_call.append(take_over)
    assert worker.run_served(run.pk) is None  # dropped: FencedOut
    # The first step's events, with its journal entry; nothing of the second step.
    assert kinds(run) == ["run.start", "node.start", "model.call", "node.start"]
    assert JournalEntry.objects.filter(run_id=run.checkpoint_id).count() == 1


def test_it_shows_a_running_runs_steps_from_its_journal(
    deployment: Deployment,
    owner: User,
    as_owner: Client,
    django_capture_on_commit_callbacks: Any,
    on_call: list[Any],
) -> None:
    run = submitted(deployment, owner, "b-2", django_capture_on_commit_callbacks)
    seen: list[dict[str, Any]] = []

    def look(n: int) -> None:
        if n == 3:  # during the third step: two are journaled
            seen.append(as_owner.get(f"/api/deployments/{deployment.name}/runs/b-2").json())

    on_call.append(look)
    assert worker.run_served(run.pk) == "done"
    assert seen[0]["status"] == "running"
    assert [s["node"] for s in seen[0]["steps"]] == ["classify", "extract"]
    assert seen[0]["steps"][0]["output"] == {"category": "billing"}
    assert ServedRun.objects.get(pk=run.pk).trace["status"] == "done"  # the row's trace, once settled
