"""Eval workers for the integration tests: `celery worker` subprocesses (celery_workers.py)
on the test's own database and broker, serving the refund_desk pack's real host tools,
each real call logged to a file the test reads (tests/integration/test_eval_kill.py tells
the story)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import celery_workers
from tests.support.celery_workers import TOOL_LOG, TOOL_SLEEP, CeleryWorker, wait_for

__all__ = ["TOOLS_REF", "EvalWorker", "Worker", "tool_log", "wait_for"]

TOOLS_REF = "tests.support.celery_workers:REFUND_TOOLS"


class EvalWorker(CeleryWorker):
    """An eval worker: threads pool, refund_desk's logged tools, short leases and sweeps."""

    def __init__(self, name: str, queue: str, folder: Path, git_root: Path, threads: int, database_url: str) -> None:
        from django.conf import settings

        env = {
            "DATABASE_URL": database_url,
            "PACKFORGE_GIT_ROOT": str(git_root),
            "PACKFORGE_TOOLS": TOOLS_REF,
            TOOL_LOG: str(folder / "tools.log"),
            TOOL_SLEEP: "0.3",
            "PACKFORGE_EVAL_QUEUE": queue,
            # short leases and sweeps, so a dead worker's case is sent again within seconds
            "PACKFORGE_WORK_LEASE_S": "2",
            "PACKFORGE_WORK_SWEEP_S": "0.5",
            "PACKFORGE_WORK_STALL_S": "3",
        }
        if getattr(settings, "REDIS_URL", ""):
            env["REDIS_URL"] = settings.REDIS_URL
        super().__init__(name, queue, folder / f"{name}.log", env, pool="threads", concurrency=threads)


def tool_log(folder: Path) -> list[dict[str, Any]]:
    """The tool calls the eval workers sharing `folder` logged."""
    return celery_workers.tool_log(folder / "tools.log")


# -- the try-it worker (tests/integration/conftest.py `live`) -------------------------------


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    log: Path
    queue: str
    git_root: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")
