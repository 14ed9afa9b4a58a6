"""Served runs on real `celery worker` subprocesses (tests/support/celery_workers.py), on
the test's own database and broker:

- a worker SIGKILLed while a run sits inside its second tool call: a second worker's
  sweep sends the run again, it resumes from its database checkpoint, and finishes with
  each tool call completed once and each step counted once;
- a `?wait` run walked by the request (this process) that is not settled when the wait
  ends: handed to a worker, which resumes it with no tool call repeated;
- concurrent duplicate submits (threads posting the same run_id): one run;
- escalation to a second tier on a real fault-injecting HTTP server (the first tier
  answers text that is not JSON);
- cancel of a run whose model call is in flight: the call is dropped, the run ends
  cancelled."""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.support.celery_workers import (
    ROOT,
    TOOL_LOG,
    TOOL_SLEEP,
    CeleryWorker,
    serving_worker_pool,
    tool_log,
    wait_for,
)
from tests.support.fault_server import FaultServer

REFUND = json.loads((ROOT / "packs" / "refund_desk" / "evalset.jsonl").read_text().splitlines()[0])["input"]
TRIAGE = json.loads((ROOT / "packs" / "support_triage" / "evalset.jsonl").read_text().splitlines()[0])["input"]
PASSWORD = "correct horse battery staple"


@pytest.fixture
def workers(transactional_db: None, tmp_path: Path, settings: Any) -> Iterator[Callable[[str], CeleryWorker]]:
    settings.PACKFORGE_TOOLS = "tests.support.celery_workers:REFUND_TOOLS"
    env = {
        "PACKFORGE_TOOLS": settings.PACKFORGE_TOOLS,
        TOOL_LOG: str(tmp_path / "tools.log"),
        TOOL_SLEEP: "0.5",
        # short leases and sweeps, so a dead worker's run is sent again within seconds
        "PACKFORGE_WORK_LEASE_S": "2",
        "PACKFORGE_WORK_SWEEP_S": "0.5",
        "PACKFORGE_WORK_POLL_S": "0.2",
        "PACKFORGE_WORK_STALL_S": "3",  # a message the broker lost is sent again
    }
    with serving_worker_pool("serve", tmp_path, settings, env) as start:
        yield start


def _people() -> tuple[Any, Any]:
    from django.contrib.auth.models import User

    owner = User.objects.create_user("olive", "olive@example.com", PASSWORD)
    staff = User.objects.create_user("sam", "sam@example.com", PASSWORD, is_staff=True)
    return owner, staff


def _project(owner: Any, example: str, slug: str) -> Any:
    from studio.projects.models import create_project
    from studio.projects.views import example_files

    return create_project(slug=slug, name=slug, owner=owner, pack_files=example_files(example), message="Create")


def _refund_deployment(tmp_path: Path) -> tuple[Any, Any]:
    """(the owner, deployment "refunds"): refund_desk on a scripted endpoint answering rd-01."""
    from studio.deployments import service
    from studio.endpoints.models import Endpoint

    owner, staff = _people()
    project = _project(owner, "refund_desk", "refunds")
    script = json.loads((ROOT / "packs" / "refund_desk" / "fakes" / "scripted.json").read_text())
    (tmp_path / "refunder.json").write_text(
        json.dumps({"inputs": [{"match": REFUND, "answers": script["cases"]["rd-01"]}]})
    )
    endpoint = Endpoint.objects.create(name="refunder", spec=f"fake:{tmp_path / 'refunder.json'}", created_by=staff)
    deployment = service.create_deployment(project, user=owner, name="refunds", version=None, tiers=[endpoint.pk])
    return owner, deployment


def test_it_finishes_a_served_run_after_its_worker_is_killed(
    workers: Callable[[str], CeleryWorker], tmp_path: Path
) -> None:
    from studio.deployments import service
    from studio.deployments.models import RunEvent, ServedRun
    from studio.work.models import JournalEntry

    owner, deployment = _refund_deployment(tmp_path)

    first = workers("first")
    run = service.submit(deployment, REFUND, run_id="kill-1", user=owner).run  # autocommit: sent at once

    def in_refund() -> bool:
        events = tool_log(tmp_path / "tools.log")
        return bool(events) and events[-1]["event"] == "start" and events[-1]["tool"] == "issue_refund"

    wait_for("the run inside issue_refund", in_refund, [first])
    first.kill()
    run.refresh_from_db()
    assert run.status == "running" and run.attempts == 1
    assert JournalEntry.objects.filter(run_id=run.checkpoint_id, kind="tool", node="lookup").exists()

    second = workers("second")
    wait_for("the run to end", lambda: ServedRun.objects.get(pk=run.pk).is_final, [first, second])
    run.refresh_from_db()
    assert run.status == "done", (run.error, second.output()[-3000:])
    assert run.output is not None and run.output["refund_id"] == "R-ORD-10001"
    assert run.attempts == 2 and run.lease_owner == ""
    done = Counter(e["tool"] for e in tool_log(tmp_path / "tools.log") if e["event"] == "done")
    assert done == Counter({"lookup_order": 1, "issue_refund": 1})  # each tool call completed once
    steps = [(s["node"], s["step"]) for s in run.trace["steps"]]
    assert len(steps) == len(set(steps)) == len(run.trace["path"])  # no step counted twice
    assert JournalEntry.objects.filter(run_id=run.checkpoint_id, kind="step").count() == len(steps)
    kinds = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("kind", "data"))
    starts = [d for k, d in kinds if k == "run.start"]
    assert [d["resumed"] for d in starts] == [False, True]
    assert [k for k, _ in kinds].count("run.end") == 1
    tool_results = [d["tool"] for k, d in kinds if k == "tool.result"]
    assert tool_results == ["lookup_order", "issue_refund"]  # the replayed lookup is not called again
    assert "lost its worker" in second.output()


def test_a_waited_run_not_settled_in_time_is_handed_to_a_worker(
    workers: Callable[[str], CeleryWorker], tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.test import Client

    from studio.deployments.models import RunEvent, ServedRun

    # This process is the web process: the request walks the run here (its tools log to
    # the same file as the worker's, with their pid), for 0.2 s, inside its first tool
    # call (0.5 s); then it hands the run to the worker.
    settings.PACKFORGE_WORK_WATCH = False  # the walk here is far shorter than its lease
    monkeypatch.setenv(TOOL_LOG, str(tmp_path / "tools.log"))
    monkeypatch.setenv(TOOL_SLEEP, "0.5")
    owner, _ = _refund_deployment(tmp_path)
    worker = workers("only")
    client = Client()
    client.force_login(owner)
    body = {"run_id": "handed", "input": REFUND}
    response = client.post("/api/deployments/refunds/runs?wait=0.2", body, content_type="application/json")
    assert response.status_code == 202 and response.json()["status"] == "running", response.content
    run = ServedRun.objects.get(run_id="handed")
    wait_for("the run to end", lambda: ServedRun.objects.get(pk=run.pk).is_final, [worker])
    run.refresh_from_db()
    assert run.status == "done", (run.error, worker.output()[-3000:])
    assert run.output is not None and run.output["refund_id"] == "R-ORD-10001"
    assert run.attempts == 1  # the hand-over is not counted as a failed delivery
    done = [e for e in tool_log(tmp_path / "tools.log") if e["event"] == "done"]
    assert Counter(e["tool"] for e in done) == Counter({"lookup_order": 1, "issue_refund": 1})
    by = {e["tool"]: e["pid"] for e in done}
    assert by["lookup_order"] == os.getpid() != by["issue_refund"]  # walked here, then by the worker
    starts = RunEvent.objects.filter(run=run, kind="run.start").order_by("seq").values_list("data", flat=True)
    assert [d["resumed"] for d in starts] == [False, True]
    steps = [(s["node"], s["step"]) for s in run.trace["steps"]]
    assert len(steps) == len(set(steps))  # no step counted twice


def test_it_makes_one_run_of_concurrent_duplicate_submits(workers: Callable[[str], CeleryWorker]) -> None:
    from django.test import Client

    from studio.deployments import service
    from studio.deployments.models import RunEvent, ServedRun
    from studio.endpoints.models import Endpoint

    owner, staff = _people()
    project = _project(owner, "support_triage", "triage")
    script = ROOT / "packs" / "support_triage" / "fakes" / "scripted.json"
    endpoint = Endpoint.objects.create(name="scripted", spec=f"fake:{script}", created_by=staff)
    service.create_deployment(project, user=owner, name="triage", version=None, tiers=[endpoint.pk])
    worker = workers("only")
    answers: list[int] = []
    barrier = threading.Barrier(6)

    def post() -> None:
        try:
            client = Client()
            client.force_login(owner)
            barrier.wait()
            body = {"run_id": "same", "input": TRIAGE}
            response = client.post("/api/deployments/triage/runs", body, content_type="application/json")
            answers.append(response.status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(answers) == [200, 200, 200, 200, 200, 202], answers
    assert ServedRun.objects.filter(run_id="same").count() == 1
    run = ServedRun.objects.get(run_id="same")
    wait_for("the run to end", lambda: ServedRun.objects.get(pk=run.pk).is_final, [worker])
    run.refresh_from_db()
    assert run.status == "done" and run.attempts == 1
    assert list(RunEvent.objects.filter(run=run, kind="run.start").values_list("kind", flat=True)) == ["run.start"]


def test_it_escalates_a_node_to_the_second_tier_on_a_faulty_server(workers: Callable[[str], CeleryWorker]) -> None:
    from studio.deployments import service
    from studio.deployments.models import RunEvent, ServedRun
    from studio.endpoints.models import Endpoint

    owner, staff = _people()
    project = _project(owner, "support_triage", "triage")
    with FaultServer(answer="this is not JSON") as small, FaultServer() as large:
        tiers = [
            Endpoint.objects.create(name="small", spec=small.spec(model="small"), created_by=staff),
            Endpoint.objects.create(name="large", spec=large.spec(model="large"), created_by=staff),
        ]
        deployment = service.create_deployment(
            project, user=owner, name="ladder", version=None, tiers=[t.pk for t in tiers]
        )
        worker = workers("only")
        run = service.submit(deployment, TRIAGE, run_id="esc-1", user=owner).run
        wait_for(
            "the run to settle", lambda: ServedRun.objects.get(pk=run.pk).status not in ("queued", "running"), [worker]
        )
        run.refresh_from_db()
        assert small.completions() and large.completions()
        assert all(r.headers.get("x-request-id", "").startswith(run.checkpoint_id) for r in small.completions())
    classify = next(s for s in run.trace["steps"] if s["node"] == "classify")
    assert classify["tier"] == "large"
    climb = classify["escalations"][0]
    assert (climb["from"], climb["to"]) == ("small", "large") and climb["reason"].startswith("fail")
    escalated = RunEvent.objects.filter(run=run, kind="escalated", data__node="classify")
    assert escalated.exists()
    rejected = RunEvent.objects.filter(run=run, kind="attempt.rejected", data__node="classify")
    assert rejected.exists() and {e.data["tier"] for e in rejected} == {"small"}
    assert {e.data["category"] for e in rejected} == {"parse"}
    assert run.status in ("done", "waiting"), run.error


def test_it_cancels_a_run_whose_model_call_is_in_flight(workers: Callable[[str], CeleryWorker]) -> None:
    from django.test import Client

    from studio.deployments import service
    from studio.deployments.models import RunEvent, ServedRun
    from studio.endpoints.models import Endpoint

    owner, staff = _people()
    project = _project(owner, "support_triage", "triage")
    # A latency far longer than the run is given to end: it ends cancelled only if the
    # worker dropped the call (the watcher sets the run's cancel event; the openai
    # backend closes the stream). Leaving the server waits out the latency.
    with FaultServer(latency=20) as slow:
        endpoint = Endpoint.objects.create(name="slow", spec=slow.spec(model="slow"), created_by=staff)
        deployment = service.create_deployment(project, user=owner, name="slow", version=None, tiers=[endpoint.pk])
        worker = workers("only")
        run = service.submit(deployment, TRIAGE, run_id="cancel-1", user=owner).run
        wait_for("a model call in flight", lambda: bool(slow.completions()), [worker])
        client = Client()
        client.force_login(owner)
        response = client.post("/api/deployments/slow/runs/cancel-1/cancel")
        assert response.status_code == 200
        wait_for("the run to end", lambda: ServedRun.objects.get(pk=run.pk).is_final, [worker], timeout_s=15)
        assert [r.outcome for r in slow.completions()] == ["pending"]  # never answered: dropped
    run.refresh_from_db()
    assert run.status == "cancelled" and run.output is None
    end = RunEvent.objects.filter(run=run, kind="run.end").get()
    assert end.data["status"] == "cancelled"
