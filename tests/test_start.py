"""`scripts/start`, the README's first command, run for real: it migrates, makes the
admin, loads the example packs, serves pages under gunicorn and runs a Celery worker
process, and SIGTERM stops them all. On a fresh var/ (temp folders); the venv is the
one the suite runs in, so the script's install step finds everything in place."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.support.services import free_port
from tests.support.started import ROOT, Started, group_processes
from tests.support.waiting import wait_until

EXAMPLES = sorted(p.name for p in (ROOT / "packs").iterdir() if (p / "manifest.yaml").is_file())

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Started]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "SECRET_KEY", "DEBUG")}
    env.update(
        PORT=str(port),
        HOST="127.0.0.1",
        PACKFORGE_VAR=str(tmp_path / "var"),
        DATABASE_URL=f"sqlite:///{tmp_path}/var/studio.sqlite3",
        PACKFORGE_GIT_ROOT=str(tmp_path / "var" / "git"),
        WEB_WORKERS="1",
        CELERY_CONCURRENCY="1",
    )
    proc = subprocess.Popen(
        [str(ROOT / "scripts" / "start")],
        cwd=ROOT,
        env=env,
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

    # A real worker process, connected to the filesystem broker.
    started.wait_for(r"Connected to filesystem://", timeout=30)
    started.wait_for(r"\bready\.", timeout=30)
    running = group_processes(started.proc.pid)
    assert any("celery -A studio worker" in cmd for cmd in running.values()), running
    assert any("gunicorn studio.wsgi" in cmd for cmd in running.values()), running

    started.proc.send_signal(signal.SIGTERM)  # the script alone, as `kill PID` would
    assert started.proc.wait(timeout=30) == 0, started.output
    wait_until(
        lambda: group_processes(started.proc.pid) == {},
        timeout=10,
        message=lambda: f"processes left: {group_processes(started.proc.pid)}",
    )
    assert started.output.count(password) == 1


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
