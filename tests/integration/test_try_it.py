"""Try-it and endpoint checks end to end, through a real Celery worker process.

The test creates a project from the support_triage example and starts a run through
the pages (or the API) as a user would; the view enqueues the task on commit; a real
`celery worker` subprocess picks it up from the broker, runs the pack from git, and
writes the trace to the row step by step; the test follows it through the page's own
htmx poller until the poller is told to stop (286).

Which database and broker: whatever the settings name, the same for the test and the
worker. On the default configuration that is SQLite (a file-based test database, see
conftest.py) and the filesystem broker; under `scripts/with-services` it is the real
Postgres (`test_<name>` on the harness's server) and the real Redis. How the worker
reaches pytest-django's test database is described in conftest.py.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from studio.accounts.models import ApiToken
from studio.endpoints.models import Endpoint
from studio.projects.models import Project
from studio.runs import steps
from studio.runs.models import TryRun
from tests.support.eval_workers import Worker
from tests.support.fault_server import FaultServer
from tests.support.waiting import wait_until

HX = {"HX-Request": "true"}
TIMEOUT_S = 60.0


def _first_case() -> dict[str, Any]:
    line = (settings.EXAMPLE_PACKS / "support_triage" / "evalset.jsonl").read_text().splitlines()[0]
    return dict(json.loads(line))


def _follow_poller(client: Client, url: str, worker: Worker) -> list[int]:
    """GET `url` as htmx does every 500 ms until it answers 286; the statuses seen."""
    seen: list[int] = []

    def stopped() -> bool:
        seen.append(client.get(url, headers=HX).status_code)
        return seen[-1] != 200

    wait_until(
        stopped, timeout=TIMEOUT_S, message=lambda: f"{url} still polling; worker log:\n{worker.output()}", interval=0.2
    )
    return seen


def _author(client: Client) -> User:
    owner = User.objects.create_user("olive", "olive@example.com", "correct horse battery staple")
    client.force_login(owner)
    return owner


def test_it_runs_a_try_it_run_on_a_real_worker(live: Worker) -> None:
    client = Client()
    _author(client)
    created = client.post("/new", {"slug": "triage", "name": "Support triage", "example": "support_triage"})
    assert created.status_code == 302, created.content
    project = Project.objects.get(slug="triage")
    case = _first_case()

    started = client.post(
        "/p/triage/runs/new", {"version": project.head, "endpoint": "", "input": json.dumps(case["input"])}
    )
    assert started.status_code == 302, started.content
    run = TryRun.objects.get()
    assert started["Location"] == f"/p/triage/runs/{run.pk}"

    seen = _follow_poller(client, f"/p/triage/runs/{run.pk}", live)
    assert seen[-1] == 286, seen

    run.refresh_from_db()
    assert run.status == "done", (run.error, live.output())
    assert run.output == case["expected"]
    assert [s["node"] for s in steps.trace_steps(run.trace)] == case["path"]
    assert all(s["attempts"] for s in steps.trace_steps(run.trace) if s["kind"] == "generate")
    assert "runs.execute_try_run" in live.output()


def test_it_runs_a_run_started_through_the_api_on_a_real_worker(live: Worker) -> None:
    client = Client()
    owner = _author(client)
    client.post("/new", {"slug": "triage", "name": "Support triage", "example": "support_triage"})
    _, token = ApiToken.issue(owner, "ci")
    api = Client(headers={"Authorization": f"Bearer {token}"})
    case = _first_case()

    started = api.post("/api/runs", {"project": "triage", "input": case["input"]}, content_type="application/json")
    assert started.status_code == 201, started.content
    run_id = started.json()["id"]

    data = wait_until(
        lambda: (answer := api.get(f"/api/runs/{run_id}").json())["final"] is not False and answer,
        timeout=TIMEOUT_S,
        message=live.output,
        interval=0.2,
    )
    assert data["status"] == "done" and data["output"] == case["expected"]
    assert [s["node"] for s in data["steps"]] == case["path"]


def test_it_checks_an_endpoint_on_a_real_worker(live: Worker) -> None:
    client = Client()
    staff = _author(client)
    staff.is_staff = True
    staff.save()
    with FaultServer() as server:
        endpoint = Endpoint.objects.create(name="served", spec=server.spec(), created_by=staff)
        client.post(f"/endpoints/{endpoint.pk}/check", headers=HX)
        seen = _follow_poller(client, f"/endpoints/{endpoint.pk}/check", live)
        assert seen[-1] == 286, seen
        assert len(server.completions()) == 2  # the answer, then one asking for logprobs
    endpoint.refresh_from_db()
    assert endpoint.last_check["ok"] is True and endpoint.last_check["honoured"] is True
