"""Try-it run settings: `setting(NAME)` reads settings.py, else the environment, else the
default here (studio.work.settings.read). Leases, polls, sweeps and stall times are the
work core's (PACKFORGE_WORK_*). Imports no model."""

from __future__ import annotations

from typing import Any

from studio.work.settings import read

DEFAULTS: dict[str, Any] = {
    "PACKFORGE_RUN_MAX_ATTEMPTS": 3,  # claims of one try-it run before it is closed as failed
    "PACKFORGE_RUN_QUEUE": "",  # where try-it runs are sent ("" = the default queue)
}


def setting(name: str) -> Any:
    return read(name, DEFAULTS)
