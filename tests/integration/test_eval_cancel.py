"""Cancelling an eval stops its in-flight model calls, and a worker's calls to an
endpoint never exceed the endpoint's global cap.

A real worker process (threads pool, more threads than the cap) runs an eval against
the fault-injecting OpenAI-compatible server (tests/support/fault_server.py) with a
latency far longer than the test waits: once the cap's worth of calls is in flight,
the eval is cancelled through the API, and every case must be closed within seconds,
which only happens if the in-flight calls were dropped (the worker's watcher sets each
case's cancel event; the openai backend closes the streaming response)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from django.contrib.auth.models import User

from studio.accounts.models import ApiToken
from studio.endpoints.models import Endpoint
from studio.evals.models import Eval, EvalCase
from studio.evals.start import start_eval
from studio.projects.models import create_project
from studio.projects.views import example_files
from tests.support.eval_workers import EvalWorker, wait_for
from tests.support.fault_server import FaultServer

LATENCY_S = 30.0
CAP = 2


def test_it_stops_in_flight_model_calls_when_an_eval_is_cancelled(
    workers: Callable[[str, int], EvalWorker], tmp_path: Path
) -> None:
    owner = User.objects.create_user("olive", "olive@example.com", "correct horse battery staple")
    project = create_project(
        slug="triage",
        name="Support triage",
        owner=owner,
        pack_files=example_files("support_triage"),
        message="Create from example",
    )
    with FaultServer(latency=LATENCY_S) as server:
        endpoint = Endpoint.objects.create(name="slow", spec=server.spec(), concurrency=CAP, created_by=owner)
        worker = workers("canceller", 6)  # wishes for 6 calls at once; the cap allows 2
        ev = start_eval(project, user=owner, endpoints=[endpoint.pk])[0]
        wait_for(f"{CAP} calls in flight", lambda: server.in_flight >= CAP, [worker])
        # A sleep on purpose: the claim is that nothing happens (no third call gets past the
        # cap), and there is no condition to wait on for that; this is the window given.
        time.sleep(0.5)
        assert server.max_in_flight == CAP

        _, token = ApiToken.issue(owner, "ci")
        from django.test import Client

        response = Client(headers={"Authorization": f"Bearer {token}"}).post(f"/api/evals/{ev.pk}/cancel")
        assert response.status_code == 200 and response.json()["status"] == "cancelled"

        def ended() -> bool:  # every case closed, and the eval's end written
            return Eval.objects.get(pk=ev.pk).finished_at is not None

        wait_for("the cancelled eval to end", ended, [worker])
        # The eval ended while the model still held every call it had been sent (each takes
        # LATENCY_S): the worker stopped them, it did not wait for their answers.
        answered = [c for c in server.completions() if c.ended is not None]
        ev.refresh_from_db()
        assert ev.status == "cancelled" and ev.finished_at is not None
        assert set(EvalCase.objects.filter(eval=ev).values_list("status", flat=True)) == {"cancelled"}
        assert len(server.completions()) == CAP and answered == [], answered
        assert server.max_in_flight == CAP
        assert Eval.objects.get(pk=ev.pk).summary is not None
