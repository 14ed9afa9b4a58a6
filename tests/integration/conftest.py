"""Integration fixtures: a real Celery worker process on the test's own database and
broker.

The worker is a subprocess, so it must reach the very database pytest-django made for
the test, and the test's writes must be committed before it looks (`transactional_db`):

- SQLite: pytest-django's test database is in memory by default, which no other
  process can open. Importing this conftest (which happens whenever tests/integration
  is collected) names a file for it instead, through the standard TEST NAME setting,
  for the whole pytest session; the worker gets `DATABASE_URL=sqlite:////that/file`.
- Postgres: the test database is `test_<name>` on the same server; the worker gets a
  DATABASE_URL naming it, built from the live connection's settings.

Broker: the worker uses the same broker settings as the test process (the filesystem
broker under var/celery by default, or REDIS_URL), but listens on a queue of its own
(`-Q it-<random>`), and the test process sends to that queue for the duration
(`task_default_queue`), so a developer's worker on the same broker neither steals the
test's tasks nor hands it stale ones.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.db import connections

from tests.support.celery_workers import database_url
from tests.support.db_teardown import end_stray_sessions  # noqa: F401 (a session fixture)
from tests.support.eval_workers import TOOLS_REF, EvalWorker, Worker
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 60.0


def _file_test_database() -> None:
    db = connections["default"].settings_dict
    if db["ENGINE"] != "django.db.backends.sqlite3":
        return
    test = db.setdefault("TEST", {})
    if not test.get("NAME"):
        folder = Path(tempfile.mkdtemp(prefix="pf-test-db-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        test["NAME"] = str(folder / "test.sqlite3")


_file_test_database()


def _wait_ready(worker: Worker) -> None:
    def ready() -> bool:
        if worker.process.poll() is not None:
            raise RuntimeError(f"the Celery worker exited with {worker.process.returncode}:\n{worker.output()}")
        return " ready." in worker.output()

    wait_until(ready, timeout=READY_TIMEOUT_S, message=lambda: f"the Celery worker was not ready:\n{worker.output()}")


def _stop(worker: Worker) -> None:
    if worker.process.poll() is None:
        worker.process.send_signal(signal.SIGTERM)  # warm shutdown: finish the task in hand
        try:
            worker.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.process.kill()
            worker.process.wait()


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="module")
def worker(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    """A real `celery worker` process (solo pool) on the test database, a git root of
    its own and a private queue; one per test module (starting and stopping one takes
    seconds), stopped after the module's last test."""
    from studio.celery import app

    folder = tmp_path_factory.mktemp("worker")
    queue = f"it-{uuid.uuid4().hex[:12]}"
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "PACKFORGE_GIT_ROOT": str(folder / "git"),
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "PYTHONUNBUFFERED": "1",
    }
    if getattr(django_settings, "REDIS_URL", ""):
        env["REDIS_URL"] = django_settings.REDIS_URL
    log = folder / "worker.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "studio",
                "worker",
                "--pool=solo",
                "--concurrency=1",
                "--loglevel=INFO",
                "-Q",
                queue,
                "-n",
                f"{queue}@%h",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    running = Worker(process, log, queue, folder / "git")
    saved_queue = app.conf.task_default_queue
    try:
        _wait_ready(running)
        app.conf.task_default_queue = queue
        yield running
    finally:
        app.conf.task_default_queue = saved_queue
        _stop(running)


@pytest.fixture
def live(worker: Worker, transactional_db: None, settings: Any) -> Iterator[Worker]:
    """The worker, with this test's writes committed (so the worker sees them) and the
    test process using the worker's git root; the repositories go with the test."""
    settings.GIT_ROOT = worker.git_root
    yield worker
    shutil.rmtree(worker.git_root, ignore_errors=True)


@pytest.fixture
def workers(transactional_db: None, tmp_path: Path, settings: Any) -> Iterator[Callable[[str, int], EvalWorker]]:
    """Start eval workers on a private queue; the test process sends to that queue and
    shares the workers' git root and tool registry."""
    queue = f"it-evals-{uuid.uuid4().hex[:10]}"
    settings.GIT_ROOT = tmp_path / "git"
    settings.PACKFORGE_EVAL_QUEUE = queue
    settings.PACKFORGE_TOOLS = TOOLS_REF
    started: list[EvalWorker] = []

    def start(name: str, threads: int) -> EvalWorker:
        worker = EvalWorker(name, queue, tmp_path, settings.GIT_ROOT, threads, database_url())
        started.append(worker)
        worker.wait_ready()
        return worker

    yield start
    for worker in started:
        worker.stop()
