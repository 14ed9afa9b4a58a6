"""The test database's end: Postgres refuses to drop a database while any session is
connected to it, and a thread of the test process (a lease watcher, a racing client)
can keep its connection until the process exits. `end_stray_sessions` ends those
sessions just before pytest-django drops the database."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session", autouse=True)
def end_stray_sessions(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    yield
    from django.db import connection

    with django_db_blocker.unblock():
        if connection.vendor != "postgresql":
            return
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
