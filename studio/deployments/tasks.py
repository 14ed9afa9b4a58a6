"""Serving tasks: thin, ids in, one call into studio.deployments.worker / webhooks.

`execute_served_run` is acknowledged late and rejected (so redelivered) when its worker
process is lost; it is idempotent (studio.work.leases): a run already final or waiting, or
held by another delivery's live lease, is a no-op. Whatever the broker loses with a
SIGKILLed worker, a live worker's sweep sends again (studio/deployments/recovery.py),
and the run resumes from its database checkpoint (no tool call repeated)."""

from __future__ import annotations

from typing import Any

from celery.signals import worker_ready

from studio.celery import app
from studio.deployments import recovery, webhooks, worker
from studio.deployments.settings import setting


@app.task(name=recovery.RUN_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def execute_served_run(pk: int) -> None:
    # No retries: every failure is written to the run's row, or (the database away) the
    # lease lapses and a sweep sends the run again.
    worker.run_served(pk)


@app.task(name=webhooks.WEBHOOK_TASK, bind=True, max_retries=None, ignore_result=True)
def send_webhook(self: Any, pk: int) -> None:
    try:
        webhooks.deliver(pk)
    except webhooks.WebhookFailed as exc:
        if self.request.retries >= setting("PACKFORGE_WEBHOOK_RETRIES"):
            webhooks.log.warning(
                "webhook of served run %s given up after %s retries: %s", pk, self.request.retries, exc
            )
            return
        raise self.retry(exc=exc, countdown=min(600, 2 ** (self.request.retries + 1))) from exc


@worker_ready.connect
def start_watching(**_: Any) -> None:
    recovery.watcher().start()
