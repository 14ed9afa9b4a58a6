"""The services harness: `scripts/with-services CMD` gives CMD a real Postgres and a
real Redis (tests/support/services.py), passes CMD's exit status on, and stops both."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.services import ServiceError, postgres_bin

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, os, sys
import psycopg, redis
with psycopg.connect(os.environ["DATABASE_URL"].replace("postgres://", "postgresql://", 1)) as conn:
    conn.execute("create table t (x int)")
    conn.execute("insert into t values (42)")
    pg = conn.execute("select x, version() from t").fetchone()
client = redis.Redis.from_url(os.environ["REDIS_URL"])
client.set("k", "v")
print(json.dumps({"pg": list(pg), "redis": client.get("k").decode(),
                  "urls": [os.environ["DATABASE_URL"], os.environ["REDIS_URL"]]}))
sys.exit(3)
"""


def _installed() -> bool:
    try:
        postgres_bin()
    except ServiceError:
        return False
    return shutil.which("redis-server") is not None


def _refuses(url: str) -> bool:
    parts = urlsplit(url)
    try:
        socket.create_connection((parts.hostname, parts.port), timeout=1).close()
    except OSError:
        return True
    return False


@pytest.mark.skipif(not _installed(), reason="needs Debian's postgresql and redis-server (.ci/run installs them)")
def test_it_runs_a_command_against_real_postgres_and_redis_then_stops_them() -> None:
    done = subprocess.run(
        [str(ROOT / "scripts" / "with-services"), sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr  # the command's own status
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["pg"][0] == 42 and seen["pg"][1].startswith("PostgreSQL")
    assert seen["redis"] == "v"
    database_url, redis_url = seen["urls"]
    assert urlsplit(database_url).hostname == "127.0.0.1" and urlsplit(redis_url).hostname == "127.0.0.1"
    assert _refuses(database_url) and _refuses(redis_url)
