"""Counting what one delivery costs the database and this process's CPU, for the serving
benchmark (benchmarks/serving.py reads the log line): off unless PACKFORGE_WORK_METER is
set, so the production path pays nothing for it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from django.db import connection

from studio.work.settings import setting

log = logging.getLogger("packforge.studio.work")


class _Counter:
    """Counts the statements a delivery sends (connection.execute_wrapper)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        self.count += 1
        return execute(sql, params, many, context)


def metered(noun: str, pk: int, where: str, deliver: Callable[[], str | None]) -> str | None:
    """`deliver()`, logging (INFO) "<noun> <pk> <status>: N statements, M ms CPU (<where>)"
    when PACKFORGE_WORK_METER is on and it wrote a status."""
    if not setting("PACKFORGE_WORK_METER"):
        return deliver()
    cpu = time.process_time()
    counter = _Counter()
    with connection.execute_wrapper(counter):
        status = deliver()
    if status is not None:
        spent = 1000 * (time.process_time() - cpu)
        log.info("%s %s %s: %d statements, %.2f ms CPU (%s)", noun, pk, status, counter.count, spent, where)
    return status
