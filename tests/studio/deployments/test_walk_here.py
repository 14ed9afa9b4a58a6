"""A `?wait` run walked by the web process that accepted it (worker.walk_here), in this
process: no task is sent for it; what it writes is what a worker writes; a run that has
not settled when the wait ends is handed to the workers, which resume it from its
checkpoint; a run whose accepting process died is finished by a worker's sweep; and with
PACKFORGE_SERVE_WALK_ON_WAIT off, a `?wait` run goes through the broker as before."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from studio.deployments import recovery, runners, service, worker
from studio.deployments.models import Deployment, RunEvent, ServedRun
from studio.work.models import JournalEntry
from tests.support.serving import ACCEPT_MAX, TICKET, WORKER_MAX, kinds, statements
from tests.support.studio import send

pytestmark = pytest.mark.usefixtures("eager")

STEPS = ["classify", "extract", "sentiment", "prioritise", "billing_ops"]


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The served runs whose task was sent to the broker (then run inline, as before)."""
    pks: list[int] = []
    real = recovery.send

    def record(run_pks: list[int]) -> None:
        pks.extend(run_pks)
        real(run_pks)

    monkeypatch.setattr(recovery, "send", record)
    return pks


def test_a_waited_run_is_walked_by_the_request_that_accepted_it(
    transactional_db: None, as_owner: Client, deployment: Deployment, sent: list[int]
) -> None:
    response = send(as_owner, "post", f"/api/deployments/{deployment.name}/runs?wait=5", {"input": TICKET})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "done" and body["output"]["priority"] == "p1" and body["tier"] == "large"
    assert [s["node"] for s in body["steps"]] == STEPS
    # The answer is the row as the walk wrote it: the same as reading it afterwards.
    assert as_owner.get(f"/api/deployments/{deployment.name}/runs/{body['run_id']}").json() == body
    run = ServedRun.objects.get(run_id=body["run_id"])
    assert sent == []  # no task: the request walked it
    assert run.attempts == 1 and run.lease_owner == "" and run.started_at is not None
    assert kinds(run)[:2] == ["run.start", "node.start"] and kinds(run)[-1] == "run.end"
    assert kinds(run).count("node.start") == 5 and kinds(run).count("run.end") == 1
    assert JournalEntry.objects.filter(run_id=run.checkpoint_id, kind="step").count() == 5


def test_a_waited_run_costs_its_accept_and_its_walk_in_statements(
    transactional_db: None, owner: User, deployment: Deployment, sent: list[int]
) -> None:
    from studio.accounts.models import ApiToken

    _, token = ApiToken.issue(owner, "ci")
    client = Client(headers={"Authorization": f"Bearer {token}"})
    url = f"/api/deployments/{deployment.name}/runs?wait=5"
    client.post(url, {"run_id": "warm", "input": TICKET}, content_type="application/json")  # opens the pack
    with CaptureQueriesContext(connection) as captured:
        response = client.post(url, {"run_id": "h-1", "input": TICKET}, content_type="application/json")
    assert response.status_code == 200 and response.json()["status"] == "done"
    sql = statements(captured)
    # The accept less its review-item lookup (a run that never waited has none), and the
    # worker's walk less its claim (the insert holds the lease) and its read of the row
    # (the request has it); the answer is the row as the walk wrote it, not read again.
    assert len(sql) <= (ACCEPT_MAX - 1) + (WORKER_MAX - 2), "\n".join(q[:100] for q in sql)
    assert sum(s.startswith('SELECT "deployments_servedrun"') for s in sql) == 0
    assert not any("review_reviewitem" in s for s in sql)
    assert sent == []


def test_a_run_not_settled_when_the_wait_ends_is_handed_to_a_worker(
    transactional_db: None, as_owner: Client, deployment: Deployment, sent: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    class Passed:
        """The wait ends at once: the walk is stopped at its first step (a real timer
        races a scripted model that answers in a millisecond)."""

        def __init__(self, seconds: float, event: threading.Event) -> None:
            self.passed = True
            event.set()

        def stop(self) -> None:
            pass

    monkeypatch.setattr(worker, "_Deadline", Passed)
    response = send(as_owner, "post", f"/api/deployments/{deployment.name}/runs?wait=5", {"input": TICKET})
    run = ServedRun.objects.get(run_id=response.json()["run_id"])
    # Handed over: the task was sent, and (tasks inline) a worker's delivery resumed it
    # from the checkpoint the request began, at once.
    assert sent == [run.pk]
    run.refresh_from_db()
    assert run.status == "done" and run.output is not None and run.output["priority"] == "p1"
    assert run.attempts == 1  # the hand-over is not counted against PACKFORGE_SERVE_MAX_ATTEMPTS
    starts = list(RunEvent.objects.filter(run=run, kind="run.start").order_by("seq").values_list("data", flat=True))
    assert [d["resumed"] for d in starts] == [False, True]
    assert kinds(run).count("run.end") == 1
    assert [s["node"] for s in run.trace["steps"]] == STEPS  # no step twice


def test_a_run_whose_accepting_process_died_is_finished_by_a_sweep(
    transactional_db: None, owner: User, deployment: Deployment, sent: list[int]
) -> None:
    got = service.submit(deployment, TICKET, run_id="orphan", user=owner, walk_here=True)
    run = got.run
    assert got.held_by and sent == []  # created held by the request, no task
    run.refresh_from_db()
    assert run.status == "running" and run.lease_owner == got.held_by and run.attempts == 1
    # The process died before it walked: nothing renews the lease; once it lapses, a
    # worker's sweep sends the run, as after a worker's death.
    ServedRun.objects.filter(pk=run.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert recovery.sweep(idle=False) == {"resent": 1, "queued": 0}
    run.refresh_from_db()
    assert run.status == "done" and run.attempts == 2 and sent == [run.pk]


def test_a_waited_run_goes_through_the_broker_when_walking_here_is_off(
    transactional_db: None, as_owner: Client, deployment: Deployment, sent: list[int], settings: Any
) -> None:
    settings.PACKFORGE_SERVE_WALK_ON_WAIT = False
    response = send(as_owner, "post", f"/api/deployments/{deployment.name}/runs?wait=5", {"input": TICKET})
    assert response.status_code == 200 and response.json()["status"] == "done"
    assert sent == [ServedRun.objects.get(run_id=response.json()["run_id"]).pk]


def test_a_duplicate_waited_submit_waits_for_the_first(
    transactional_db: None, as_owner: Client, deployment: Deployment, sent: list[int]
) -> None:
    first = send(as_owner, "post", f"/api/deployments/{deployment.name}/runs?wait=5", {"run_id": "d", "input": TICKET})
    again = send(as_owner, "post", f"/api/deployments/{deployment.name}/runs?wait=5", {"run_id": "d", "input": TICKET})
    assert first.status_code == again.status_code == 200
    assert again.json()["status"] == "done" and again.json()["steps"] == first.json()["steps"]
    assert ServedRun.objects.filter(run_id="d").count() == 1 and sent == []


def test_a_waited_run_that_waits_for_a_person_answers_with_its_review_item(
    transactional_db: None,
    as_owner: Client,
    project: Any,
    owner: User,
    staff: User,
    tmp_path: Any,
    sent: list[int],
) -> None:
    from tests.support.serving import scripted_tier

    weak = scripted_tier(tmp_path, staff, "weak", {"extract": "not json"})
    service.create_deployment(project, user=owner, name="weak", version=None, tiers=[weak.pk])
    response = send(as_owner, "post", "/api/deployments/weak/runs?wait=5", {"run_id": "p-1", "input": TICKET})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "waiting" and body["waiting_at"] == "extract" and body["waiting_reason"] == "escalated"
    assert body["review_item"] is not None  # opened when the wait committed, before the answer
    assert as_owner.get("/api/deployments/weak/runs/p-1").json() == body
    assert sent == []


def test_a_waited_run_that_cannot_open_its_tiers_answers_failed(
    transactional_db: None, as_owner: Client, deployment: Deployment, good: Any, sent: list[int]
) -> None:
    runners.forget_runners()
    good.delete()  # the deployment's one tier is gone: the run ends before its walk
    response = send(as_owner, "post", f"/api/deployments/{deployment.name}/runs?wait=5", {"input": TICKET})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "failed" and "was deleted" in body["error"] and body["final"]
    assert as_owner.get(f"/api/deployments/{deployment.name}/runs/{body['run_id']}").json() == body
    run = ServedRun.objects.get(run_id=body["run_id"])
    assert run.trace == {} and run.lease_owner == "" and sent == []


def test_a_runner_evicted_while_a_walk_uses_it_is_closed_when_the_walk_ends(
    deployment: Deployment, project: Any, owner: User, broken: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    runners.forget_runners()
    monkeypatch.setattr(runners, "_RUNNERS_KEPT", 1)
    closed: list[runners.Runner] = []
    monkeypatch.setattr(runners.Runner, "close", lambda self: closed.append(self))
    other = service.create_deployment(project, user=owner, name="small-tier", version=None, tiers=[broken.pk])
    with runners.using_runner(deployment, deployment.version) as first:
        with runners.using_runner(other, other.version) as second:  # the cache keeps one: `first` leaves it
            assert first.evicted and not second.evicted and closed == []
        assert closed == []  # `first` is still walked; `second` is cached
    assert closed == [first]
    runners.forget_runners()
    assert closed == [first, second]
