"""What every in-process studio benchmark does first: point the settings at temp storage
(SQLite, git and var/ under `tmp`, no Redis, tasks not inline), then start Django and
migrate. Settings read the environment once, at import, so this runs before any studio
import."""

from __future__ import annotations

import os
from pathlib import Path


def configure(tmp: Path) -> None:
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "studio.settings",
            "DATABASE_URL": f"sqlite:///{tmp}/studio.sqlite3",
            "PACKFORGE_VAR": str(tmp / "var"),
            "PACKFORGE_GIT_ROOT": str(tmp / "git"),
            "LOG_LEVEL": "ERROR",
        }
    )
    for name in ("REDIS_URL", "DEBUG", "CELERY_TASK_ALWAYS_EAGER"):
        os.environ.pop(name, None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
