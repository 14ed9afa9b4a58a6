"""Eval workers for the integration tests: `celery worker` subprocesses on the test's own
database and broker, serving the refund_desk pack's real host tools (`TOOLS`), each real
call logged to a file the test reads (tests/integration/test_eval_kill.py tells the story)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
TOOLS_REF = "tests.support.eval_workers:TOOLS"
TOOL_LOG = "EVAL_KILL_TOOL_LOG"
TOOL_SLEEP = "EVAL_KILL_TOOL_SLEEP_S"
WAIT_S = 120.0


# -- the tools the worker serves (PACKFORGE_TOOLS=tests.support.eval_workers:TOOLS) -----------


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
    from runtime.cli import load_tools

    return load_tools(f"{ROOT / 'packs' / 'refund_desk' / 'tools.py'}:registry") or {}


TOOLS = {name: _logged(name, fn) for name, fn in _refund_tools().items()}


# -- workers ----------------------------------------------------------------------------------


class EvalWorker:
    def __init__(self, name: str, queue: str, folder: Path, git_root: Path, threads: int, database_url: str) -> None:
        self.log = folder / f"{name}.log"
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "PACKFORGE_GIT_ROOT": str(git_root),
            "CELERY_TASK_ALWAYS_EAGER": "false",
            "PYTHONUNBUFFERED": "1",
            "PACKFORGE_TOOLS": TOOLS_REF,
            TOOL_LOG: str(folder / "tools.log"),
            TOOL_SLEEP: "0.3",
            "PACKFORGE_EVAL_QUEUE": queue,
            # short leases and sweeps, so a dead worker's case is sent again within seconds
            "PACKFORGE_EVAL_LEASE_S": "2",
            "PACKFORGE_EVAL_SWEEP_S": "0.5",
            "PACKFORGE_EVAL_STALL_S": "3",
        }
        from django.conf import settings

        if getattr(settings, "REDIS_URL", ""):
            env["REDIS_URL"] = settings.REDIS_URL
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "studio",
                    "worker",
                    "--pool=threads",
                    f"--concurrency={threads}",
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
                env=env,
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

        wait_until(ready, timeout=60, message=lambda: f"the worker was not ready:\n{self.output()}")

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


def wait_for(what: str, done: Callable[[], bool], workers: list[EvalWorker]) -> None:
    """Wait until `done()`; on timeout, say `what` was awaited and show the workers' logs."""

    def logs() -> str:
        return f"{what}\n" + "\n\n".join(f"--- {w.log.name}\n{w.output()[-4000:]}" for w in workers)

    wait_until(done, timeout=WAIT_S, message=logs)


def tool_log(folder: Path) -> list[dict[str, Any]]:
    path = folder / "tools.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# -- the try-it worker (tests/integration/conftest.py `live`) -------------------------------


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    log: Path
    queue: str
    git_root: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")
