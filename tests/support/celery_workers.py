"""Real `celery worker` subprocesses for integration tests that kill one mid-task, and
host tools that log each real call to a file, so a test can count the calls that
completed across workers (tests/integration/test_try_it_kill.py).

The worker runs on the test's own database (`database_url`)
and broker, listens on a private queue, and serves `PACKFORGE_TOOLS` =
`tests.support.celery_workers:REFUND_TOOLS` (refund_desk's real tools, logged)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
TOOL_LOG = "PF_TEST_TOOL_LOG"  # the file each tool call's start and end is appended to
TOOL_SLEEP = "PF_TEST_TOOL_SLEEP_S"  # how long a tool call takes (a window to kill in)
READY_S = 60.0


def _log(event: dict[str, Any]) -> None:
    path = os.environ.get(TOOL_LOG)
    if path:
        line = (json.dumps({**event, "pid": os.getpid()}, sort_keys=True) + "\n").encode()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)  # one write of an O_APPEND file: lines never interleave
        finally:
            os.close(fd)


def _logged(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(**kwargs: Any) -> Any:
        _log({"event": "start", "tool": name, "args": kwargs})
        time.sleep(float(os.environ.get(TOOL_SLEEP, "0")))  # the behaviour: a slow tool, so a kill lands inside it
        result = fn(**kwargs)
        _log({"event": "done", "tool": name, "args": kwargs})
        return result

    return call


def _refund_tools() -> dict[str, Callable[..., Any]]:
    from runtime import load_tools

    return load_tools(f"{ROOT / 'packs' / 'refund_desk' / 'tools.py'}:registry") or {}


REFUND_TOOLS = {name: _logged(name, fn) for name, fn in _refund_tools().items()}


def tool_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


class CeleryWorker:
    """One `celery worker` subprocess; `env` is added to the test process's environment."""

    def __init__(
        self, name: str, queue: str, log: Path, env: dict[str, str], pool: str = "solo", concurrency: int = 1
    ) -> None:
        self.log = log
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "studio",
                    "worker",
                    f"--pool={pool}",
                    f"--concurrency={concurrency}",
                    "--loglevel=INFO",
                    "-Q",
                    queue,
                    "-n",
                    f"{name}-{queue}@%h",
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                ],
                cwd=ROOT,
                env={**os.environ, "CELERY_TASK_ALWAYS_EAGER": "false", "PYTHONUNBUFFERED": "1", **env},
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self) -> None:
        def ready() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"the worker exited with {self.process.returncode}:\n{self.output()}")
            return " ready." in self.output()

        wait_until(ready, timeout=READY_S, message=lambda: f"the worker was not ready:\n{self.output()}")

    def kill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def wait_for(what: str, done: Callable[[], bool], workers: list[CeleryWorker], timeout_s: float = 120.0) -> None:
    """Wait until `done()`; on timeout, say `what` was awaited and show the workers' logs."""

    def logs() -> str:
        return f"{what}\n" + "\n\n".join(f"--- {w.log.name}\n{w.output()[-4000:]}" for w in workers)

    wait_until(done, timeout=timeout_s, message=logs)


def database_url() -> str:
    """A DATABASE_URL for the database the test process is connected to now."""
    from django.db import connections

    db = connections["default"].settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        name = str(db["NAME"])
        if name.startswith("file:") or name == ":memory:":
            raise RuntimeError("the test database is in memory; a worker process cannot open it")
        return "sqlite:///" + str(Path(name).resolve())
    if db["ENGINE"] == "django.db.backends.postgresql":
        user = quote(db.get("USER") or "", safe="")
        password = quote(db.get("PASSWORD") or "", safe="")
        auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
        query = urlencode(db.get("OPTIONS") or {})
        return f"postgres://{auth}{db['HOST']}:{db['PORT']}/{quote(db['NAME'], safe='')}" + (
            f"?{query}" if query else ""
        )
    raise RuntimeError(f"no DATABASE_URL for engine {db['ENGINE']}")


@contextlib.contextmanager
def worker_pool(queue: str, logs: Path, env: dict[str, str], settings: Any) -> Iterator[Callable[[str], CeleryWorker]]:
    """`start(name)` starts a ready worker on `queue` (logs under `logs`) with `env` plus
    the test's Redis, while the test process sends to `queue` by default; every worker
    started is stopped on the way out."""
    from studio.celery import app

    env = dict(env)
    if getattr(settings, "REDIS_URL", ""):
        env["REDIS_URL"] = settings.REDIS_URL
    started: list[CeleryWorker] = []
    saved_queue = app.conf.task_default_queue
    app.conf.task_default_queue = queue

    def start(name: str) -> CeleryWorker:
        worker = CeleryWorker(name, queue, logs / f"{name}.log", env)
        started.append(worker)
        worker.wait_ready()
        return worker

    try:
        yield start
    finally:
        app.conf.task_default_queue = saved_queue
        for worker in started:
            worker.stop()


@contextlib.contextmanager
def serving_worker_pool(
    name: str, tmp_path: Path, settings: Any, env: dict[str, str] | None = None
) -> Iterator[Callable[[str], CeleryWorker]]:
    """worker_pool for served runs: a queue of its own (`it-<name>-...`) for the test and
    its workers, the pack repositories under `tmp_path`, fast password hashing, and no
    lease watcher in the test process (the workers sweep). `env` adds to the workers'."""
    queue = f"it-{name}-{uuid.uuid4().hex[:10]}"
    settings.GIT_ROOT = tmp_path / "git"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.PACKFORGE_SERVE_QUEUE = queue
    settings.PACKFORGE_WORK_WATCH = False
    base = {
        "DATABASE_URL": database_url(),
        "PACKFORGE_GIT_ROOT": str(settings.GIT_ROOT),
        "PACKFORGE_SERVE_QUEUE": queue,
    }
    with worker_pool(queue, tmp_path, {**base, **(env or {})}, settings) as start:
        yield start
