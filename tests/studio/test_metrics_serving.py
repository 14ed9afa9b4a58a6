"""/metrics over a real served run: a deployment on two scripted tiers runs a ticket on
the worker code (eager), one node escalating from `small` to `large`; the metrics agree
with the run's own event stream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.deployments import service
from studio.deployments.models import RunEvent, ServedRun
from studio.projects.models import Project
from tests.support.metrics import scrape, value
from tests.support.serving import TICKET, scripted_tier
from tests.support.studio import send


@pytest.fixture(autouse=True)
def no_watcher(settings: Any) -> None:
    settings.PACKFORGE_WORK_WATCH = False


def test_it_counts_a_served_run_as_its_events_tell_it(
    eager: None,
    as_owner: Client,
    as_staff: Client,
    project: Project,
    owner: User,
    staff: User,
    tmp_path: Path,
    django_capture_on_commit_callbacks: Any,
) -> None:
    small = scripted_tier(tmp_path, staff, "small", {"classify": "not json at all"})
    large = scripted_tier(tmp_path, staff, "large")
    service.create_deployment(project, user=owner, name="ladder", version=None, tiers=[small.pk, large.pk])
    with django_capture_on_commit_callbacks(execute=True):
        send(as_owner, "post", "/api/deployments/ladder/runs", {"run_id": "m-1", "input": TICKET})
    run = ServedRun.objects.get(run_id="m-1")
    assert run.status == "done"
    events = list(RunEvent.objects.filter(run=run))
    calls_on = {
        t: sum(1 for e in events if e.kind == "model.call" and e.data.get("tier") == t) for t in ("small", "large")
    }
    escalated = [e.data for e in events if e.kind == "escalated"]

    got = scrape(as_staff)
    assert value(got, "packforge_served_runs", deployment="ladder", status="done") == 1
    assert value(got, "packforge_served_run_duration_seconds_count", deployment="ladder") == 1
    for tier, n in calls_on.items():
        assert n > 0 and value(got, "packforge_model_calls_total", source="served", endpoint=tier) == n
    assert value(got, "packforge_model_errors_total", source="served", endpoint="small", cause="parse") > 0
    assert escalated and sum(
        v for k, v in got["packforge_escalations_total"].items() if dict(k)["node"] == "classify"
    ) == sum(1 for e in escalated if e["node"] == "classify")
    assert (
        value(got, "packforge_node_outcomes_total", deployment="ladder", node="classify", tier="large", outcome="ok")
        == 1
    )
    assert value(got, "packforge_replayed_steps_total", source="served") == 0


def test_it_never_counts_the_replayed_steps_of_a_resumed_run_as_model_calls(
    eager: None,
    as_owner: Client,
    as_staff: Client,
    project: Project,
    owner: User,
    staff: User,
    tmp_path: Path,
    django_capture_on_commit_callbacks: Any,
) -> None:
    weak = scripted_tier(tmp_path, staff, "weak", {"extract": "not json"})
    service.create_deployment(project, user=owner, name="weak", version=None, tiers=[weak.pk])
    with django_capture_on_commit_callbacks(execute=True):
        send(as_owner, "post", "/api/deployments/weak/runs", {"run_id": "w-1", "input": TICKET})
    run = ServedRun.objects.get(run_id="w-1")
    assert run.status == "waiting"
    before = value(scrape(as_staff), "packforge_model_calls_total", source="served", endpoint="weak")
    with django_capture_on_commit_callbacks(execute=True):
        assert service.resume_served_run(run, "extract", {"order_id": "ORD-48213", "amount_usd": 59.98}, owner)
    run.refresh_from_db()
    assert run.status == "done"
    made = sum(1 for e in RunEvent.objects.filter(run=run, kind="model.call"))

    got = scrape(as_staff)
    assert value(got, "packforge_replayed_steps_total", source="served") > 0
    assert before > 0 and value(got, "packforge_model_calls_total", source="served", endpoint="weak") == made
    assert (
        value(got, "packforge_node_outcomes_total", deployment="weak", node="extract", tier="person", outcome="ok") == 1
    )
