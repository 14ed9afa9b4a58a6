"""The review queue on a real `celery worker` subprocess (tests/support/celery_workers.py),
on the test's own database and broker.

A run of support_triage is served on one tier whose model answers `extract` with text
that is not JSON: the node fails its ladder on the last model tier, has no `on_fail`
edge, and the run waits for a person. The worker's `run_waiting` signal makes the
review item. Two reviewers then race to decide it through the API at the same moment:
exactly one decision is taken, the run is resumed once, and it finishes on the worker
with the winner's answer committed as `human:<winner>`."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from tests.support.celery_workers import ROOT, CeleryWorker, serving_worker_pool, wait_for

CASE = json.loads((ROOT / "packs" / "support_triage" / "evalset.jsonl").read_text().splitlines()[0])
ANSWER = {"order_id": "ORD-48213", "amount_usd": 59.98}
PASSWORD = "correct horse battery staple"


@pytest.fixture
def workers(transactional_db: None, tmp_path: Path, settings: Any) -> Iterator[Callable[[str], CeleryWorker]]:
    with serving_worker_pool("review", tmp_path, settings) as start:
        yield start


def test_it_takes_one_of_two_racing_decisions_and_resumes_the_run_once(
    workers: Callable[[str], CeleryWorker], tmp_path: Path
) -> None:
    from django.contrib.auth.models import User

    from studio.accounts.models import Membership, Role
    from studio.deployments import service
    from studio.deployments.models import RunEvent, ServedRun
    from studio.endpoints.models import Endpoint
    from studio.projects.models import create_project
    from studio.projects.views import example_files
    from studio.review.models import ReviewItem

    owner = User.objects.create_user("olive", "olive@example.com", PASSWORD)
    rita = User.objects.create_user("rita", "rita@example.com", PASSWORD)
    staff = User.objects.create_user("stella", "stella@example.com", PASSWORD, is_staff=True)
    project = create_project(
        slug="triage", name="triage", owner=owner, pack_files=example_files("support_triage"), message="Create"
    )
    Membership.objects.create(user=rita, project=project, role=Role.REVIEWER)
    script = json.loads((ROOT / "packs" / "support_triage" / "fakes" / "scripted.json").read_text())
    answers = {**script["inputs"][0]["answers"], "extract": "no JSON here"}
    (tmp_path / "small.json").write_text(json.dumps({"inputs": [{"match": CASE["input"], "answers": answers}]}))
    small = Endpoint.objects.create(name="small", spec=f"fake:{tmp_path / 'small.json'}", created_by=staff)
    deployment = service.create_deployment(project, user=owner, name="triage-prod", version=None, tiers=[small.pk])

    worker = workers("w1")
    run = service.submit(deployment, CASE["input"], run_id="race-1", user=owner).run  # autocommit: sent at once
    wait_for("the review item", lambda: ReviewItem.objects.filter(run=run).exists(), [worker])
    run.refresh_from_db()
    assert (run.status, run.waiting_at, run.waiting_reason) == ("waiting", "extract", "escalated")
    item = ReviewItem.objects.get(run=run)
    assert (item.node, item.reason, item.status) == ("extract", "escalated", "open")
    assert item.candidates and all(c["status"] == "rejected" for c in item.candidates)

    barrier = threading.Barrier(2)
    answered: dict[str, int] = {}

    def decide(user: Any) -> None:
        client = Client()
        client.force_login(user)
        try:
            barrier.wait()
            response = client.post(
                f"/api/review/items/{item.pk}/decide",
                {"decision": "edit", "answer": ANSWER, "note": f"{user.username} read the ticket"},
                content_type="application/json",
            )
            answered[user.username] = response.status_code
        finally:
            connection.close()

    racers = [threading.Thread(target=decide, args=(u,)) for u in (rita, owner)]
    for t in racers:
        t.start()
    for t in racers:
        t.join()
    assert sorted(answered.values()) == [200, 409], answered
    winner = next(name for name, status in answered.items() if status == 200)

    wait_for("the resumed run's end", lambda: ServedRun.objects.get(pk=run.pk).is_final, [worker])
    run.refresh_from_db()
    assert run.status == "done", (run.error, worker.output()[-3000:])
    assert run.output == CASE["expected"]
    item.refresh_from_db()
    assert (item.status, item.decision, item.decided_by.username if item.decided_by else None) == (
        "decided",
        "edit",
        winner,
    )
    assert ReviewItem.objects.filter(run=run).count() == 1
    events = list(RunEvent.objects.filter(run=run).values_list("kind", "data"))
    assert [k for k, _ in events].count("review.decided") == 1
    assert sum(1 for k, d in events if k == "run.start" and d.get("resumed")) == 1  # resumed once
    assert [k for k, _ in events].count("run.end") == 1
    extract = [s for s in run.trace["steps"] if s["node"] == "extract" and s["status"] == "ok"]
    assert len(extract) == 1 and extract[0]["provenance"] == f"human:{winner}"
    assert extract[0]["writes"] == ANSWER
