"""Waking a `?wait` request when its run settles (ends, or waits for a person).

The database is the truth: a waiting request reads the run's row. When the broker is
Redis (REDIS_URL, or the Redis server `scripts/start` runs; every setup but the test
suite's filesystem broker), the process that settles a run pushes to a per-run list
(`packforge:settled:<pk>`, kept a minute) once its transaction has committed, and a
waiting request blocks on that list (BLPOP) instead of sleeping, for at most
SLICE_S before it reads the row again: a lost push (Redis away, a worker killed between
its commit and its push) costs at most one slice. A request that is woken pushes the
mark back, so every request waiting on the same run wakes. Without Redis, a waiting
request polls the row, 5 ms growing to 50 ms."""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from django.conf import settings
from django.db import transaction

log = logging.getLogger("packforge.studio.deployments")

KEEP_S = 60  # a mark nobody waited for lapses after this
SLICE_S = 1.0  # the longest a waiting request goes without reading the row
POLL_FIRST_S = 0.005
POLL_MAX_S = 0.05

_lock = threading.Lock()
_client: list[Any] = []  # [redis.Redis, pid] for this process, made on first use


def key(pk: int) -> str:
    return f"packforge:settled:{pk}"


def client() -> Any | None:
    """This process's Redis client, or None without REDIS_URL."""
    url = getattr(settings, "REDIS_URL", "")
    if not url:
        return None
    with _lock:
        if not _client or _client[1] != os.getpid():
            import redis

            # Longer than any BLPOP below, so the socket never times out first.
            _client[:] = [redis.Redis.from_url(url, socket_timeout=SLICE_S + 5, socket_connect_timeout=5), os.getpid()]
        return _client[0]


def announce(pk: int) -> None:
    """Once the current transaction commits, wake the requests waiting on run `pk`."""
    redis = client()
    if redis is None:
        return

    def push() -> None:
        try:
            redis.pipeline(transaction=False).lpush(key(pk), 1).expire(key(pk), KEEP_S).execute()
        except Exception as exc:  # the waiting request reads the row within a slice anyway
            log.warning("could not announce that served run %s settled: %s", pk, exc)

    transaction.on_commit(push)


class Waiter:
    """Sleeps until run `pk` may have settled (woken by `announce`) or `wait(seconds)`
    passes. The caller reads the row after each wait; when it has settled after a wake,
    `pass_on` wakes the next request waiting on the same run. A mark that woke a request
    whose run has not settled (left by an earlier settle of a run resumed since) is not
    passed on: it is spent."""

    def __init__(self, pk: int) -> None:
        self.pk = pk
        self.redis = client()
        self.delay = POLL_FIRST_S
        self.woken = False

    def wait(self, seconds: float) -> None:
        self.woken = False
        if seconds <= 0:
            return
        if self.redis is not None:
            try:
                # at least 10 ms: Redis before 7 reads a timeout under 1 ms as 0, "block forever"
                timeout = max(0.01, min(seconds, SLICE_S))
                self.woken = self.redis.blpop([key(self.pk)], timeout=timeout) is not None
                return
            except Exception as exc:
                log.warning("waiting on Redis for served run %s failed (%s); polling the database", self.pk, exc)
                self.redis = None
        time.sleep(min(self.delay, seconds))
        self.delay = min(self.delay * 2, POLL_MAX_S)

    def pass_on(self) -> None:
        if self.woken and self.redis is not None:
            try:
                self.redis.pipeline(transaction=False).lpush(key(self.pk), 1).expire(key(self.pk), KEEP_S).execute()
            except Exception as exc:
                log.warning("could not pass on that served run %s settled: %s", self.pk, exc)
