"""Serving settings: `setting(NAME)` reads settings.py, else the environment, else the
default here (the rules of studio.evals.settings). Leases, polls, sweeps and stall
times are the evals' (PACKFORGE_EVAL_LEASE_S, ...), shared by every leased row."""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from studio.evals import settings as eval_settings

DEFAULTS: dict[str, Any] = {
    "PACKFORGE_SERVE_MAX_ATTEMPTS": 3,  # claims of one served run before it is closed as failed
    "PACKFORGE_SERVE_QUEUE": "",  # the Celery queue of served runs ("" = the default queue)
    "PACKFORGE_SERVE_MAX_WAIT_S": 60.0,  # the most a `?wait=` may ask for
    "PACKFORGE_SSE_MAX_S": 300.0,  # an event stream ends after this long; the client resumes
    "PACKFORGE_SSE_POLL_S": 0.2,  # how often an event stream looks for new events
    "PACKFORGE_WEBHOOK_TIMEOUT_S": 10.0,  # one webhook POST
    "PACKFORGE_WEBHOOK_RETRIES": 6,  # retries of a failed webhook, with backoff
}


def setting(name: str) -> Any:
    if name not in DEFAULTS:
        return eval_settings.setting(name)
    default = DEFAULTS[name]
    value = getattr(settings, name, None)
    if value is None:
        raw = os.environ.get(name, "")
        if raw == "":
            return default
        value = raw
    try:
        if isinstance(default, int):
            number = int(value)
            if number < 1:
                raise ValueError("must be at least 1")
            return number
        if isinstance(default, float):
            seconds = float(value)
            if not seconds > 0:
                raise ValueError("must be more than 0")
            return seconds
        return str(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={value!r}: {exc}") from None
