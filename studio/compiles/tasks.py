"""Compile tasks: thin, an id in, one call into studio.compiles.worker.

Acknowledged late and rejected (so redelivered) when its worker process is lost; it is
idempotent: a compile already final, or held by another delivery's live lease, is a
no-op (studio.work.leases). Whatever the broker loses with a SIGKILLed worker, the sweep of
a live worker sends again (studio/compiles/recovery.py), and the compile resumes from
its work dir after the last finished attempt. Its time limits are its own: a compile
runs many attempts, each an eval of the whole gold set."""

from __future__ import annotations

from typing import Any

from celery.signals import worker_ready

from studio.celery import app
from studio.compiles import recovery, worker
from studio.compiles.settings import setting
from studio.compiles.shared import COMPILE_TASK

SOFT_LIMIT_S = setting("PACKFORGE_COMPILE_SOFT_TIME_LIMIT_S")


@app.task(
    name=COMPILE_TASK,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    soft_time_limit=SOFT_LIMIT_S,
    time_limit=SOFT_LIMIT_S + 60,
)
def execute_compile(compile_id: int) -> None:
    # No retries: every failure is written to the compile's row, or (the database away)
    # the lease lapses and a sweep sends the compile again.
    worker.run_compile(compile_id)


@worker_ready.connect
def start_watching(**_: Any) -> None:
    """A worker that starts sweeps at once: it may be the one replacing a killed worker."""
    recovery.watcher().start()
