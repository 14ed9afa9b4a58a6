"""`scripts/start`, the README's first command, run for real: it migrates, makes the
admin, loads the example packs, serves pages under gunicorn and runs a Celery worker
process, and SIGTERM stops them all. On a fresh var/ (temp folders); the venv is the
one the suite runs in, so the script's install step finds everything in place."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(p.name for p in (ROOT / "packs").iterdir() if (p / "manifest.yaml").is_file())

pytestmark = pytest.mark.timeout(120)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
        self.proc, self.port, self.lines = proc, port, []  # type: list[str]
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
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(pattern, self.output, re.M)
            if match:
                return match
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"no {pattern!r} in scripts/start's output:\n{self.output}")


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


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Started]:
    yield from start_studio(tmp_path)


def log_in(client: httpx.Client, username: str, password: str) -> None:
    page = client.get("/login/")
    assert page.status_code == 200
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token, page.text
    done = client.post(
        "/login/", data={"csrfmiddlewaretoken": token.group(1), "username": username, "password": password, "next": ""}
    )
    assert done.status_code == 302 and done.headers["location"] == "/", done.text


def test_it_starts_the_studio_and_a_worker_and_stops_both(started: Started) -> None:
    url = started.wait_for(r"^Packforge studio: (http://\S+)", timeout=60).group(1)
    assert url == f"http://127.0.0.1:{started.port}/"
    password = started.wait_for(r"^admin password: (\S+)$", timeout=1).group(1)
    assert "log in as admin" in started.output
    started.wait_for(rf"example packs: loaded {len(EXAMPLES)}", timeout=1)

    with httpx.Client(base_url=url, timeout=10) as client:
        log_in(client, "admin", password)
        projects = client.get("/")
    assert projects.status_code == 200
    for name in EXAMPLES:
        assert f'href="/p/{name}/"' in projects.text

    # A real worker process, connected to the studio's own Redis on a unix socket.
    sock = Path(started.wait_for(r"^broker: Redis on unix://(\S+)", timeout=1).group(1))
    assert sock.is_socket() and sock.parent.stat().st_mode & 0o077 == 0
    started.wait_for(r"Connected to redis\+socket://", timeout=30)
    started.wait_for(r"\bready\.", timeout=30)
    running = group_processes(started.proc.pid)
    assert any("celery -A studio worker" in cmd for cmd in running.values()), running
    assert any("gunicorn studio.wsgi" in cmd for cmd in running.values()), running
    assert any("redis-server" in cmd for cmd in running.values()), running

    started.proc.send_signal(signal.SIGTERM)  # the script alone, as `kill PID` would
    assert started.proc.wait(timeout=30) == 0, started.output
    deadline = time.monotonic() + 10
    while group_processes(started.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert group_processes(started.proc.pid) == {}
    assert started.output.count(password) == 1


def api_client(url: str, password: str) -> httpx.Client:
    """A client with a bearer token of the admin's, made through the API as a user would."""
    with httpx.Client(base_url=url, timeout=30) as browser:
        log_in(browser, "admin", password)
        made = browser.post("/api/tokens", json={"name": "test"}, headers={"X-CSRFToken": browser.cookies["csrftoken"]})
    assert made.status_code == 201, made.text
    return httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {made.json()['token']}"})


REFUND_INPUT = {"message": "Hi, my pour-over set (order ORD-10001) arrived with the kettle spout snapped off. Refund?"}


def wait_final(client: httpx.Client, run_id: int, timeout: float = 60) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while True:
        run = client.get(f"/api/runs/{run_id}")
        assert run.status_code == 200, run.text
        if run.json()["final"] or time.monotonic() > deadline:
            return dict(run.json())
        time.sleep(0.1)


def worker_main_pids(pgid: int) -> set[int]:
    """The Celery worker's main process(es): celery processes whose parent is the start
    script's supervisor (not the pool processes, nor a killed worker's orphans)."""
    running = group_processes(pgid)
    celery = {pid for pid, cmd in running.items() if "celery -A studio worker" in cmd}
    parents = {pid: int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1]) for pid in celery}
    return {pid for pid, parent in parents.items() if "scripts/start" in running.get(parent, "")}


def test_it_restarts_a_worker_that_dies_and_the_new_one_runs_work(started: Started) -> None:
    url = started.wait_for(r"^Packforge studio: (http://\S+)", timeout=60).group(1)
    password = started.wait_for(r"^admin password: (\S+)$", timeout=1).group(1)
    started.wait_for(r"\bready\.", timeout=60)
    (first,) = worker_main_pids(started.proc.pid)

    os.kill(first, signal.SIGKILL)
    started.wait_for(r"^supervisor: the Celery worker exited \(status 137\); starting it again in 1 s$", timeout=30)
    started.wait_for(r"\bready\.(.|\n)*\bready\.", timeout=60)
    (second,) = worker_main_pids(started.proc.pid)
    assert second != first

    with api_client(url, password) as client:
        created = client.post("/api/runs", json={"project": "refund_desk", "input": REFUND_INPUT})
        assert created.status_code == 201, created.text
        run = wait_final(client, created.json()["id"])
    assert run["status"] == "done", run
    assert started.proc.poll() is None  # the studio kept serving throughout


def test_it_logs_requests_without_their_query_strings(started: Started) -> None:
    url = started.wait_for(r"^Packforge studio: (http://\S+)", timeout=60).group(1)
    refused = httpx.get(url + "api/projects?token=pf_s_NEVERLOGGED&page=2", timeout=10)
    assert refused.status_code == 401
    started.wait_for(r'"GET /api/projects HTTP/1\.1" 401 ', timeout=10)
    assert "NEVERLOGGED" not in started.output and "page=2" not in started.output


def test_the_compose_file_parses_and_names_the_scale_out_stack() -> None:
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "migrate", "web", "worker"} <= set(services)
    for name in ("web", "worker", "migrate"):
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgres://") and env["REDIS_URL"].startswith("redis://")
        assert any(str(v).endswith(":/data/git") for v in services[name]["volumes"])
    assert "gunicorn" in " ".join(services["web"]["command"])
    assert services["worker"]["deploy"]["replicas"] >= 2
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    assert "FROM python:3.12-slim" in dockerfile and '"gunicorn", "studio.wsgi"' in dockerfile
