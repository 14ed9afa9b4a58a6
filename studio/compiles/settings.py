"""The compile app's settings: `setting(NAME)` reads settings.py, else the environment,
else the default here (studio.work.settings.read). Leases, polls, sweeps and stall times
are the work core's (PACKFORGE_WORK_*)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.conf import settings

from studio.work.settings import read

DEFAULTS: dict[str, Any] = {
    "PACKFORGE_COMPILE_MAX_CLAIMS": 5,  # deliveries of one compile before it is closed as failed
    "PACKFORGE_COMPILE_QUEUE": "",  # where compiles are sent ("" = the default queue)
    "PACKFORGE_COMPILE_MAX_ATTEMPTS": 20,  # the most attempts an author may ask for
    # A compile's task runs much longer than a case's: its own time limits (a worker
    # killed at the hard limit is like any killed worker: the compile resumes).
    "PACKFORGE_COMPILE_SOFT_TIME_LIMIT_S": 6 * 3600,
}


def setting(name: str) -> Any:
    return read(name, DEFAULTS)


def compile_root() -> Path:
    """Where compiles keep their work dirs: PACKFORGE_COMPILE_ROOT, else <var>/compiles.
    A work dir must outlive its worker (a resumed compile continues from it): with workers
    on several hosts, put it on storage they share."""
    value = getattr(settings, "PACKFORGE_COMPILE_ROOT", None) or os.environ.get("PACKFORGE_COMPILE_ROOT", "")
    return Path(value) if value else Path(settings.VAR_DIR) / "compiles"
