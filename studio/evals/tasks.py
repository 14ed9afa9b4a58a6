"""Eval tasks: thin, ids in, one call into studio.evals.execute.

`execute_eval_case` is acknowledged late and rejected (so redelivered) when its worker
process is lost; it is idempotent: a case already final, or held by another worker's
live lease, is a no-op, and every outcome write is guarded (studio/evals/execute.py).
Whatever the broker loses with a SIGKILLed worker, the sweep of a live worker sends
again (docs/evals.md)."""

from __future__ import annotations

from typing import Any

from celery.signals import worker_ready
from django.db import InterfaceError, OperationalError

from studio.celery import app
from studio.evals import execute


@app.task(
    name="evals.execute_eval_case",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=5,
    ignore_result=True,
)
def execute_eval_case(self: Any, eval_case_id: int) -> None:
    try:
        execute.run_eval_case(eval_case_id)
    except (OperationalError, InterfaceError) as exc:
        # The database was locked or unreachable: the case's lease was given back, so a
        # later delivery claims it (and counts one more attempt).
        raise self.retry(exc=exc, countdown=min(30, 2**self.request.retries)) from exc


def enqueue_cases(case_ids: list[int]) -> None:
    """Send one `execute_eval_case` per id, through one producer connection. Callers send
    after commit (start_eval uses transaction.on_commit), so a worker never sees an
    uncommitted row."""
    queue = execute.setting("PACKFORGE_EVAL_QUEUE") or None
    with app.producer_or_acquire() as producer:
        for case_id in case_ids:
            execute_eval_case.apply_async((case_id,), queue=queue, producer=producer)


@worker_ready.connect
def start_watching(**_: Any) -> None:
    """A worker that starts sweeps at once: it may be the one replacing a killed worker."""
    execute.watcher().start()
