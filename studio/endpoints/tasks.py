"""Endpoint tasks: thin, ids in, one call into studio.endpoints.execute."""

from __future__ import annotations

from studio.celery import app
from studio.endpoints import execute


@app.task(name="endpoints.check_endpoint")
def check_endpoint(endpoint_id: int) -> None:
    # No retries: a check is a reading of the endpoint now; a failed one is the answer.
    execute.check(endpoint_id)
