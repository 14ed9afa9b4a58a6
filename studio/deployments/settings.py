"""Serving settings: `setting(NAME)` reads settings.py, else the environment, else the
default here (studio.work.settings.read). Leases, polls, sweeps and stall times are the
work core's (PACKFORGE_WORK_*), shared by every leased row."""

from __future__ import annotations

from typing import Any

from studio.work.settings import read

DEFAULTS: dict[str, Any] = {
    "PACKFORGE_SERVE_MAX_ATTEMPTS": 3,  # claims of one served run before it is closed as failed
    "PACKFORGE_SERVE_QUEUE": "",  # the Celery queue of served runs ("" = the default queue)
    "PACKFORGE_SERVE_MAX_WAIT_S": 60.0,  # the most a `?wait=` may ask for
    # A `?wait=` run is walked by the web process that accepted it, handed to a worker
    # if it has not settled when the wait ends (docs/serving.md, "Where a run is walked").
    "PACKFORGE_SERVE_WALK_ON_WAIT": True,
    "PACKFORGE_SSE_MAX_S": 300.0,  # an event stream ends after this long; the client resumes
    "PACKFORGE_SSE_POLL_S": 0.2,  # how often an event stream looks for new events
    "PACKFORGE_SSE_IDLE_S": 60.0,  # an event stream with no event this long closes; the client resumes
    "PACKFORGE_SSE_MAX_PER_USER": 4,  # event streams one user may hold open, across web processes
    "PACKFORGE_SSE_MAX_PER_PROCESS": 4,  # event streams one web process serves at once (of its 8 threads)
    "PACKFORGE_WEBHOOK_TIMEOUT_S": 10.0,  # one webhook POST
    "PACKFORGE_WEBHOOK_RETRIES": 6,  # retries of a failed webhook, with backoff
}


def setting(name: str) -> Any:
    return read(name, DEFAULTS)
