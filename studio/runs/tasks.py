"""Try-it tasks: thin, ids in, one call into studio.runs.worker.

Acknowledged late and rejected (so redelivered) when its worker process is lost; it is
idempotent: a run already final, or held by another delivery's live lease, is a no-op
(studio.work.leases). Whatever the broker loses with a SIGKILLed worker, the sweep of a live
worker sends again (studio/runs/recovery.py), and the run resumes from its database
checkpoint (no tool call repeated)."""

from __future__ import annotations

from typing import Any

from celery.signals import worker_ready

from studio.celery import app
from studio.runs import recovery, worker


@app.task(name=recovery.RUN_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def execute_try_run(run_id: int) -> None:
    # No retries: every failure is written to the run's row, or (the database away) the
    # lease lapses and a sweep sends the run again.
    worker.run_try(run_id)


@worker_ready.connect
def start_watching(**_: Any) -> None:
    """A worker that starts sweeps at once: it may be the one replacing a killed worker."""
    recovery.watcher().start()
