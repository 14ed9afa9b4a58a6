"""`scripts/start` run for real, as tests/test_start.py and the browser tests (tests/e2e)
start it: its output read line by line, waited on by pattern."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support.services import free_port
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


def group_processes(pgid: int) -> dict[int, str]:
    """pid -> command line of every live process in the process group."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] != "Z" and int(fields[2]) == pgid:
                out[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
    return out


class Started:
    def __init__(self, proc: subprocess.Popen[str], port: int) -> None:
        self.proc, self.port = proc, port
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def close(self) -> None:
        self._reader.join(timeout=10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        def seen() -> re.Match[str] | None:
            match = re.search(pattern, self.output, re.M)
            if match is None and self.proc.poll() is not None:
                raise AssertionError(f"scripts/start exited; no {pattern!r} in its output:\n{self.output}")
            return match

        return wait_until(
            seen, timeout=timeout, message=lambda: f"no {pattern!r} in scripts/start's output:\n{self.output}"
        )


@dataclass
class Studio:
    """A studio the browser tests share: where it serves, the admin password, its var/."""

    url: str
    password: str
    var: Path


def start_studio(tmp_path: Path, **env: str) -> Iterator[Started]:
    """scripts/start on a fresh var/ under tmp_path and a free port, in its own session;
    every process it left is killed afterwards. `env` overrides (WEB_WORKERS, ...)."""
    port = free_port()
    environ = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "SECRET_KEY", "DEBUG")}
    environ.update(
        PORT=str(port),
        HOST="127.0.0.1",
        PACKFORGE_VAR=str(tmp_path / "var"),
        DATABASE_URL=f"sqlite:///{tmp_path}/var/studio.sqlite3",
        PACKFORGE_GIT_ROOT=str(tmp_path / "var" / "git"),
        WEB_WORKERS="1",
        CELERY_CONCURRENCY="1",
    )
    environ.update(env)
    proc = subprocess.Popen(
        [str(ROOT / "scripts" / "start")],
        cwd=ROOT,
        env=environ,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    started = Started(proc, port)
    try:
        yield started
    finally:
        if proc.poll() is None or group_processes(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        started.close()
        print(started.output)  # shown by pytest when the test fails


def log_in(client: httpx.Client, username: str, password: str) -> None:
    page = client.get("/login/")
    assert page.status_code == 200
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token, page.text
    done = client.post(
        "/login/", data={"csrfmiddlewaretoken": token.group(1), "username": username, "password": password, "next": ""}
    )
    assert done.status_code == 302 and done.headers["location"] == "/", done.text


def api_client(url: str, password: str) -> httpx.Client:
    """A client with a bearer token of the admin's, made through the API as a user would."""
    with httpx.Client(base_url=url, timeout=30) as browser:
        log_in(browser, "admin", password)
        made = browser.post("/api/tokens", json={"name": "test"}, headers={"X-CSRFToken": browser.cookies["csrftoken"]})
    assert made.status_code == 201, made.text
    return httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {made.json()['token']}"})


# rd-01's input: the pack's scripted model answers its evalset cases only (a run on it is
# walked as that case, and ends done at `refunded`).
REFUND_INPUT = {
    "message": "Hi, my pour-over set (order ORD-10001) arrived with the kettle spout snapped off. "
    "I'd like my money back please."
}


def wait_final(client: httpx.Client, run_id: int, timeout: float = 60) -> dict[str, object]:
    def final() -> dict[str, object] | None:
        run = client.get(f"/api/runs/{run_id}")
        assert run.status_code == 200, run.text
        body = dict(run.json())
        return body if body["final"] else None

    return wait_until(final, timeout=timeout, message=f"run {run_id} did not finish in {timeout} s")


def is_worker(cmd: str) -> bool:
    """A command line of the start script's Celery worker (`celery -A studio --quiet worker ...`)."""
    return re.search(r"\bcelery -A studio (--?\w[\w-]* )*worker\b", cmd) is not None


def worker_main_pids(pgid: int) -> set[int]:
    """The Celery worker's main process(es): celery processes whose parent is the start
    script's supervisor (not the pool processes, nor a killed worker's orphans)."""
    running = group_processes(pgid)
    celery = {pid for pid, cmd in running.items() if is_worker(cmd)}
    parents = {pid: int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1]) for pid in celery}
    return {pid for pid, parent in parents.items() if "scripts/start" in running.get(parent, "")}
