"""Recovery of served runs, in this process (tasks inline): a run whose worker's lease
lapsed is sent again by a sweep and finishes; a run that keeps killing its workers is
closed as failed (poisoned); a run cancelled before a delivery claims it never walks."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from studio.deployments import recovery, worker
from studio.deployments.models import Deployment, RunEvent, ServedRun
from tests.support.serving import TICKET

pytestmark = pytest.mark.usefixtures("eager")


def lapsed(deployment: Deployment, run_id: str, attempts: int) -> ServedRun:
    """A run a dead worker left running: its lease lapsed a minute ago."""
    return ServedRun.objects.create(
        deployment=deployment,
        run_id=run_id,
        input=TICKET,
        input_digest="x",
        version=deployment.version,
        status="running",
        attempts=attempts,
        lease_owner="dead-worker",
        lease_until=timezone.now() - timedelta(minutes=1),
    )


def test_it_sends_a_run_whose_lease_lapsed_again_and_finishes_it(deployment: Deployment) -> None:
    run = lapsed(deployment, "lost", attempts=1)
    assert recovery.sweep(idle=False) == {"resent": 1, "queued": 0}
    run.refresh_from_db()
    assert run.status == "done" and run.attempts == 2 and run.output is not None
    assert recovery.sweep(idle=False) == {"resent": 0, "queued": 0}


def test_it_closes_a_run_that_keeps_killing_its_workers(deployment: Deployment) -> None:
    run = lapsed(deployment, "poison", attempts=3)
    assert worker.run_served(run.pk) == "failed"
    run.refresh_from_db()
    assert run.status == "failed" and "killed its worker 3 times" in run.error and run.lease_owner == ""
    assert list(RunEvent.objects.filter(run=run).values_list("kind", flat=True)) == ["run.end"]
    assert worker.run_served(run.pk) is None  # final: a later delivery has nothing to do


def test_it_never_walks_a_run_cancelled_before_it_was_claimed(deployment: Deployment) -> None:
    run = lapsed(deployment, "stopped", attempts=1)
    ServedRun.objects.filter(pk=run.pk).update(cancel_requested=True)
    assert worker.run_served(run.pk) == "cancelled"
    assert not RunEvent.objects.filter(run=run, kind="run.start").exists()


def test_it_leaves_a_run_held_by_a_live_lease_alone(deployment: Deployment) -> None:
    run = lapsed(deployment, "held", attempts=1)
    ServedRun.objects.filter(pk=run.pk).update(lease_until=timezone.now() + timedelta(minutes=5))
    assert worker.run_served(run.pk) is None
    run.refresh_from_db()
    assert run.status == "running" and run.lease_owner == "dead-worker" and run.attempts == 1
