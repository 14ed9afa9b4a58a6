"""`scripts/start`, the README's first command, run for real: it migrates, makes the
admin, loads the example packs, serves pages under gunicorn and runs a Celery worker
process, and SIGTERM stops them all. On a fresh var/ (temp folders); the venv is the
one the suite runs in, so the script's install step finds everything in place."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.support.started import (
    REFUND_INPUT,
    ROOT,
    Started,
    api_client,
    group_processes,
    is_worker,
    log_in,
    start_studio,
    wait_final,
    worker_main_pids,
)
from tests.support.waiting import wait_until

EXAMPLES = sorted(p.name for p in (ROOT / "packs").iterdir() if (p / "manifest.yaml").is_file())

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Started]:
    yield from start_studio(tmp_path)


RULE = "-" * 72


def final_block(started: Started) -> str:
    """The block the script ends its start with: from the first rule to the second."""
    block = started.wait_for(rf"^{RULE}\n((?:.*\n)*?){RULE}$", timeout=90).group(1)
    return str(block)


def test_it_starts_the_studio_and_a_worker_and_stops_both(started: Started) -> None:
    url = started.wait_for(r"^Packforge studio: (http://\S+)", timeout=60).group(1)
    assert url == f"http://127.0.0.1:{started.port}/"
    password = started.wait_for(r"^admin password: (\S+)$", timeout=1).group(1)
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
    assert any(is_worker(cmd) for cmd in running.values()), running
    assert any("gunicorn studio.wsgi" in cmd for cmd in running.values()), running
    assert any("redis-server" in cmd for cmd in running.values()), running

    started.proc.send_signal(signal.SIGTERM)  # the script alone, as `kill PID` would
    assert started.proc.wait(timeout=30) == 0, started.output
    wait_until(
        lambda: group_processes(started.proc.pid) == {},
        timeout=10,
        message=lambda: f"processes left: {group_processes(started.proc.pid)}",
    )
    assert started.output.count(password) == 1


def test_it_says_what_it_does_and_ends_with_the_address_the_admin_and_the_password(tmp_path: Path) -> None:
    with contextlib.closing(start_studio(tmp_path)) as first_start:
        started = next(first_start)
        block = final_block(started)
        password = re.search(r"^admin password: (\S+)$", block, re.M)
        assert password, block
        lines = block.splitlines()
        assert lines[:3] == [
            f"Packforge studio: http://127.0.0.1:{started.port}/",
            "admin user: admin",
            f"admin password: {password.group(1)}",
        ]
        assert "changepassword admin" in block and "source .venv/bin/activate" in block
        assert "does not answer" not in block  # the worker replied to the ping first
        out = started.output
        # Progress, stage by stage, before the block.
        stages = [
            "start: .venv holds the studio",
            "start: migrating the database",
            "start: the admin account",
            "start: loading the example packs",
            "start: starting Redis",
            "start: starting the Celery worker and the web server",
            # CELERY_CONCURRENCY=1 (tests/support/started.py): one worker, so one run per user.
            "start: runs going at once per user: 1 of 1 workers (PACKFORGE_MAX_RUNS_PER_USER)",
            "start: waiting for the web server and the worker",
            RULE,
        ]
        at = [out.index(stage) for stage in stages]
        assert at == sorted(at), out
        # Quiet: no Celery banner, no root warning, no Redis start-up lines, said once.
        for noise in ("[tasks]", "[config]", "superuser privileges", "Redis is starting", "Booting worker"):
            assert noise not in out
        assert out.count(password.group(1)) == 1
        started.proc.send_signal(signal.SIGTERM)
        assert started.proc.wait(timeout=30) == 0, out

    # A second start on the same var/ says where the password went, and shows none.
    with contextlib.closing(start_studio(tmp_path)) as second_start:
        again = next(second_start)
        block = final_block(again)
        assert block.splitlines()[:2] == [f"Packforge studio: http://127.0.0.1:{again.port}/", "admin user: admin"]
        assert "admin password:" not in again.output.replace('"admin password: ..."', "")
        assert 'printed when the studio first started, as "admin password: ..."' in block
        assert ".venv/bin/python manage.py changepassword admin" in block
        again.proc.send_signal(signal.SIGTERM)
        assert again.proc.wait(timeout=30) == 0, again.output


def test_it_prints_the_new_password_when_it_stops_before_it_is_ready(tmp_path: Path) -> None:
    # gunicorn refuses a worker count that is not a number: the web server never answers.
    with contextlib.closing(start_studio(tmp_path, WEB_WORKERS="none")) as starting:
        started = next(starting)
        assert started.proc.wait(timeout=90) != 0
        started.close()
    assert RULE not in started.output
    assert re.search(
        r"^the studio stopped before it was ready; the admin account it made is admin:\nadmin password: \S+$",
        started.output,
        re.M,
    ), started.output


def test_it_prints_progress_while_pip_installs(tmp_path: Path) -> None:
    """scripts/lib.sh's ensure_venv, as scripts/start and scripts/test call it, on a small
    project of one dependency (the studio's own install takes minutes)."""
    (tmp_path / "tinypkg").mkdir()
    (tmp_path / "tinypkg" / "__init__.py").write_text("")
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "tinypkg"\nversion = "0.1"\ndependencies = ["PyYAML"]\n'
        '[tool.setuptools]\npackages = ["tinypkg"]\n'
    )
    done = subprocess.run(
        ["bash", "-c", f"set -euo pipefail; source {ROOT / 'scripts' / 'lib.sh'}; ensure_venv ."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(
        r"  creating \.venv \(Python 3\.\d+\.\d+\)\n"
        r"  pip install -e '\.' \(.*\) \.\.\.\n"
        r"    requirements resolved: 1; building the project \.\.\.\n"
        r"    installing 2 packages \.\.\.\n"
        r"    installed 2 packages\n",
        done.stdout,
    ), done.stdout
    assert (tmp_path / ".venv" / "bin" / "python").exists()


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
    where = Path(started.wait_for(r"^requests are logged to (\S+)$", timeout=60).group(1))
    wait_until(
        lambda: where.is_file() and '"GET /api/projects HTTP/1.1" 401 ' in where.read_text(),
        timeout=10,
        message=lambda: f"no 401 line in {where}",
    )
    logged = where.read_text()
    assert "NEVERLOGGED" not in logged and "page=2" not in logged
    assert "NEVERLOGGED" not in started.output and "GET /api/projects" not in started.output  # not on the terminal


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
