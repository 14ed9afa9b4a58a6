"""How many statements a served run costs the database, counted (not timed), so that a
change that adds a write per event or per step shows here: the worker's walk of the
five-step support_triage run, and the web's accept of a submitted run."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from studio.accounts.models import ApiToken
from studio.deployments import service, worker
from studio.deployments.models import Deployment, RunEvent, ServedRun
from tests.support.serving import ACCEPT_MAX, TICKET, WORKER_MAX, statements


def submitted(deployment: Deployment, owner: User, run_id: str, capture: Any) -> ServedRun:
    with capture(execute=False):  # the task is run below, in this process, not sent
        return service.submit(deployment, TICKET, run_id=run_id, user=owner).run


def test_it_walks_a_five_step_run_in_one_write_per_step(
    deployment: Deployment, owner: User, django_capture_on_commit_callbacks: Any
) -> None:
    worker.run_served(submitted(deployment, owner, "warm", django_capture_on_commit_callbacks).pk)  # opens the pack
    run = submitted(deployment, owner, "q-1", django_capture_on_commit_callbacks)
    with CaptureQueriesContext(connection) as captured, django_capture_on_commit_callbacks(execute=False):
        assert worker.run_served(run.pk) == "done"
    run.refresh_from_db()
    steps = len(run.trace["steps"])
    sql = statements(captured)
    assert steps == 5
    assert len(sql) <= WORKER_MAX, "\n".join(q[:100] for q in sql)
    # The events go in batches with their step's checkpoint, never one INSERT each...
    event_inserts = [s for s in sql if s.startswith('INSERT INTO "deployments_runevent"')]
    assert len(event_inserts) <= steps + 2  # the start, each step, the end
    assert RunEvent.objects.filter(run=run).count() == 11
    # ... and the run's row gets its trace once, when the run ends.
    assert sum(s.startswith('UPDATE "deployments_servedrun"') and '"trace"' in s for s in sql) == 1


def test_it_accepts_a_run_in_a_few_statements(
    deployment: Deployment, owner: User, django_capture_on_commit_callbacks: Any
) -> None:
    _, token = ApiToken.issue(owner, "ci")
    client = Client(headers={"Authorization": f"Bearer {token}"})
    url = f"/api/deployments/{deployment.name}/runs"
    with django_capture_on_commit_callbacks(execute=False):
        client.post(url, {"run_id": "warm", "input": TICKET}, content_type="application/json")
    with CaptureQueriesContext(connection) as captured, django_capture_on_commit_callbacks(execute=False):
        response = client.post(url, {"run_id": "a-1", "input": TICKET}, content_type="application/json")
    assert response.status_code == 202, response.content
    sql = statements(captured)
    assert len(sql) <= ACCEPT_MAX, "\n".join(q[:100] for q in sql)
    assert sum(s.startswith(("INSERT", "UPDATE", "DELETE")) for s in sql) == 1  # the run's row, nothing else


@pytest.mark.parametrize("wait", ["", "?wait=5"])
def test_it_answers_a_settled_run_with_its_steps(
    deployment: Deployment, owner: User, django_capture_on_commit_callbacks: Any, wait: str, as_owner: Client
) -> None:
    run = submitted(deployment, owner, "w-1", django_capture_on_commit_callbacks)
    worker.run_served(run.pk)
    again = as_owner.post(
        f"/api/deployments/{deployment.name}/runs{wait}", {"run_id": "w-1", "input": TICKET}, "application/json"
    )
    assert again.status_code == 200 and again.json()["status"] == "done"
    assert len(again.json()["steps"]) == 5
