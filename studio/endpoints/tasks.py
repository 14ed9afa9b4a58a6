"""Endpoint tasks: thin, ids in, one call into studio.endpoints.backends."""

from __future__ import annotations

from studio.celery import app
from studio.endpoints import backends


@app.task(name="endpoints.check_endpoint")
def check_endpoint(endpoint_id: int) -> None:
    # No retries: a check is a reading of the endpoint now; a failed one is the answer.
    backends.check(endpoint_id)
