"""Try-it tasks: thin, ids in, one call into studio.runs.execute."""

from __future__ import annotations

from studio.celery import app
from studio.runs import execute


@app.task(name="runs.execute_try_run")
def execute_try_run(run_id: int) -> None:
    # No retries: every failure is written to the run's row. A worker lost mid-run
    # (acks late) redelivers the task, and run_try starts the run again from its input.
    execute.run_try(run_id)
