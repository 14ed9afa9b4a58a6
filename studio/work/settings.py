"""The durable-work core's settings, and the one reader every studio app's settings go
through: `read(NAME, defaults)` takes settings.py, else the environment variable of the
same name, else the default, parsed as the default's type.

The lease, poll, sweep and stall settings are shared by every leased row (eval cases,
try-it runs, served runs, compiles): PACKFORGE_WORK_*. Until release 0.3 the old names
(PACKFORGE_EVAL_LEASE_S, ...) are read too when the new one is not set, with a warning
logged once per name. Imports no model, so slots.py (and a worker's subprocess) can use
it before Django's apps are ready."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

log = logging.getLogger("packforge.studio.work")

DEFAULTS: dict[str, Any] = {
    "PACKFORGE_WORK_LEASE_S": 30.0,  # a leased row's lease; renewed every quarter of it
    "PACKFORGE_WORK_POLL_S": 0.5,  # how often a worker's watcher renews leases and looks for cancels
    "PACKFORGE_WORK_SWEEP_S": 5.0,  # how often a worker sweeps for lost rows
    "PACKFORGE_WORK_STALL_S": 60.0,  # nothing moved this long: re-send queued rows
    "PACKFORGE_WORK_WATCH": True,  # run the watcher thread (tests drive it by hand)
    "PACKFORGE_SLOT_TTL_S": 30.0,  # a Redis model slot's lease; renewed every quarter
    "PACKFORGE_WORK_METER": False,  # log each delivery's statements and CPU (benchmarks/serving.py)
    "PACKFORGE_MAX_STEPS": 10_000,  # steps of one run, whatever its pack asks for (studio.work.caps)
    "PACKFORGE_MAX_JOURNAL_BYTES": 8 << 20,  # journal bytes of one run (studio.work.caps)
    "PACKFORGE_MAX_STEP_RATE": 50,  # steps a second of one run, after a burst (studio.work.caps)
    "PACKFORGE_STEP_BURST": 200,  # steps a run may take before its step rate holds it back
    "PACKFORGE_MAX_RUNS_PER_USER": 4,  # runs going at once per user, try-it and eval cases (studio.work.admission)
    "PACKFORGE_MAX_RUNS_PER_PROJECT": 8,  # the same per project
}

# The names these settings had before the work core (read when the new one is unset).
ALIASES: dict[str, str] = {
    "PACKFORGE_WORK_LEASE_S": "PACKFORGE_EVAL_LEASE_S",
    "PACKFORGE_WORK_POLL_S": "PACKFORGE_EVAL_POLL_S",
    "PACKFORGE_WORK_SWEEP_S": "PACKFORGE_EVAL_SWEEP_S",
    "PACKFORGE_WORK_STALL_S": "PACKFORGE_EVAL_STALL_S",
    "PACKFORGE_WORK_WATCH": "PACKFORGE_EVAL_WATCH",
}

_warned: set[str] = set()


def setting(name: str) -> Any:
    """A setting of the work core (DEFAULTS), by its new name, else its old one."""
    old = ALIASES.get(name)
    if old is not None and _given(name) is None and _given(old) is not None:
        if old not in _warned:
            _warned.add(old)
            log.warning("%s is the old name of %s; it is read until release 0.3", old, name)
        return read(old, {old: DEFAULTS[name]})
    return read(name, DEFAULTS)


def _given(name: str) -> object | None:
    value = getattr(settings, name, None)
    if value is None:
        value = os.environ.get(name) or None
    return value


def read(name: str, defaults: Mapping[str, Any]) -> Any:
    """`name` from settings.py, else the environment, else `defaults[name]`, parsed as the
    default's type (bool, whole number >= 1, seconds > 0, text). Every app's `setting`
    reads through this one parser; a bad value raises ImproperlyConfigured naming the
    variable."""
    default = defaults[name]
    value = _given(name)
    if value is None:
        return default
    try:
        if isinstance(default, bool):
            if isinstance(value, str):
                low = value.strip().lower()
                if low not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
                    raise ValueError("expected true or false")
                return low in ("1", "true", "yes", "on")
            return bool(value)
        if isinstance(default, int):
            number = int(value)  # type: ignore[call-overload]
            if number < 1:
                raise ValueError("must be at least 1")
            return number
        if isinstance(default, float):
            seconds = float(value)  # type: ignore[arg-type]
            if not seconds > 0:
                raise ValueError("must be more than 0")
            return seconds
        return str(value)
    except (TypeError, ValueError) as exc:
        raise ImproperlyConfigured(f"{name}={value!r}: {exc}") from None
