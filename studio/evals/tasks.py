"""Eval tasks: thin, ids in, one call into studio.evals.worker.

`execute_eval_case` is acknowledged late and rejected (so redelivered) when its worker
process is lost; it is idempotent: a case already final, or held by another worker's
live lease, is a no-op, and every outcome write is guarded (studio/evals/worker.py).
Whatever the broker loses with a SIGKILLed worker, the sweep of a live worker sends
again (studio/evals/recovery.py, docs/evals.md). Cases are sent by the task's name
(studio.evals.shared.enqueue_cases), so the modules below need not import this one."""

from __future__ import annotations

from typing import Any

from celery.signals import worker_ready
from django.db import InterfaceError, OperationalError

from studio.celery import app
from studio.evals import recovery, worker
from studio.evals.shared import CASE_TASK


@app.task(
    name=CASE_TASK,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=5,
    ignore_result=True,
)
def execute_eval_case(self: Any, eval_case_id: int) -> None:
    try:
        worker.run_eval_case(eval_case_id)
    except (OperationalError, InterfaceError) as exc:
        # The database was locked or unreachable: the case's lease was given back, so a
        # later delivery claims it (and counts one more attempt).
        raise self.retry(exc=exc, countdown=min(30, 2**self.request.retries)) from exc


@worker_ready.connect
def start_watching(**_: Any) -> None:
    """A worker that starts sweeps at once: it may be the one replacing a killed worker."""
    recovery.watcher().start()
