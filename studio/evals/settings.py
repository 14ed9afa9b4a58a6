"""The eval app's settings: `setting(NAME)` reads settings.py, else the environment,
else the default here (studio.work.settings.read). Leases, polls, sweeps and stall
times are the work core's (PACKFORGE_WORK_*). Imports no model."""

from __future__ import annotations

from typing import Any

from studio.work.settings import read

DEFAULTS: dict[str, Any] = {
    "PACKFORGE_EVAL_MAX_ATTEMPTS": 3,  # claims of one case before it is closed as an error
    "PACKFORGE_EVAL_QUEUE": "",  # the Celery queue of eval tasks ("" = the default queue)
    "PACKFORGE_EVAL_MAX_CASES": 100_000,  # cases x repeats x endpoints in one start
}


def setting(name: str) -> Any:
    return read(name, DEFAULTS)
