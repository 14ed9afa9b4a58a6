"""The eval app's settings: `setting(NAME)` reads settings.py, else the environment,
else the default here. Imports no model, so limits.py (and a worker's subprocess) can
use it before Django's apps are ready."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

DEFAULTS: dict[str, Any] = {
    "PACKFORGE_EVAL_MAX_ATTEMPTS": 3,  # claims of one case before it is closed as an error
    "PACKFORGE_EVAL_LEASE_S": 30.0,  # a case's lease; renewed every quarter of it
    "PACKFORGE_EVAL_POLL_S": 0.5,  # how often a worker looks for cancelled evals
    "PACKFORGE_EVAL_SWEEP_S": 5.0,  # how often a worker sweeps for lost cases
    "PACKFORGE_EVAL_STALL_S": 60.0,  # nothing moved this long: re-send queued cases
    "PACKFORGE_EVAL_QUEUE": "",  # the Celery queue of eval tasks ("" = the default queue)
    "PACKFORGE_EVAL_MAX_CASES": 100_000,  # cases x repeats x endpoints in one start
    "PACKFORGE_EVAL_WATCH": True,  # run the watcher thread (tests drive it by hand)
    "PACKFORGE_SLOT_TTL_S": 30.0,  # a Redis model slot's lease; renewed every quarter
    # try-it runs (studio/runs/) share the lease, poll, sweep and stall settings above
    "PACKFORGE_RUN_MAX_ATTEMPTS": 3,  # claims of one try-it run before it is closed as failed
    "PACKFORGE_RUN_QUEUE": "",  # where a sweep re-sends try-it runs ("" = the default queue)
}


def setting(name: str) -> Any:
    """A setting of this app: from settings.py when it defines it, else the environment
    variable of the same name, else the default above. Bad values raise
    ImproperlyConfigured naming the variable."""
    return read(name, DEFAULTS)


def read(name: str, defaults: Mapping[str, Any]) -> Any:
    """`name` from settings.py, else the environment, else `defaults[name]`, parsed as the
    default's type (bool, whole number >= 1, seconds > 0, text). Every app's `setting`
    reads through this one parser."""
    default = defaults[name]
    value = getattr(settings, name, None)
    if value is None:
        raw = os.environ.get(name, "")
        if raw == "":
            return default
        value = raw
    try:
        if isinstance(default, bool):
            if isinstance(value, str):
                low = value.strip().lower()
                if low not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
                    raise ValueError("expected true or false")
                return low in ("1", "true", "yes", "on")
            return bool(value)
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
