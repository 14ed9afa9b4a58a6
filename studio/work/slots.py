"""One concurrency cap per model endpoint, held across every worker process.

Each model call holds a slot of its endpoint's cap (`Endpoint.concurrency`) for as long
as it is in flight (`CappedBackend`), so adding workers adds waiting calls, never calls
the model server sees. Two implementations, chosen by the broker (`slots()`):

- `RedisSlots` (REDIS_URL set; workers on many hosts): a sorted set per endpoint whose
  members are the slots held, scored by when each lapses. Acquiring is one Lua script
  (drop lapsed slots, count, add if under the cap) run atomically on the Redis server,
  with the server's clock; a thread renews the slots this process holds, so a worker
  that was SIGKILLed frees its slots when their lease lapses (`PACKFORGE_SLOT_TTL_S`).
- `FileSlots` (no Redis: the filesystem broker, one machine): N lock files per endpoint
  under var/slots/; a slot is held by an exclusive `flock` on one of them. The kernel
  drops the lock when the holder's file is closed or its process dies, so a killed
  worker frees its slots at once.

Waiting polls with a short jittered sleep (2 ms growing to 25 ms) and stops at once when
the call's cancel event is set. See docs/evals.md for the measurements."""

from __future__ import annotations

import errno
import fcntl
import os
import random
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from django.conf import settings

from runtime import Backend, Cancelled, ModelCall, ModelReply, NoSpareSlot, Tier
from studio.work.settings import setting

if TYPE_CHECKING:
    from studio.endpoints.models import Endpoint

__all__ = ["CappedBackend", "FileSlots", "RedisSlots", "Slots", "capped_endpoint", "endpoint_tiers", "slots"]

_POLL_FIRST = 0.002
_POLL_MAX = 0.025


@dataclass
class Held:
    key: str
    token: str
    handle: Any = None  # the open lock file (FileSlots)


class Slots(Protocol):
    def try_acquire(self, key: str, limit: int) -> Held | None:
        """Take one of `limit` slots of `key` if one is free; never waits."""

    def release(self, held: Held) -> None: ...


def acquire(
    slots: Slots, key: str, limit: int, cancel: threading.Event | None = None, timeout: float | None = None
) -> Held:
    """Wait for a slot of `key`. Raises Cancelled when `cancel` is set while waiting,
    TimeoutError when `timeout` seconds pass."""
    delay = _POLL_FIRST
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if cancel is not None and cancel.is_set():
            raise Cancelled("run cancelled while waiting for a model slot")
        held = slots.try_acquire(key, limit)
        if held is not None:
            return held
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"no free slot of {key} (cap {limit}) within {timeout} s")
        pause = delay * (0.5 + random.random())  # jitter: waiters do not retry in step
        if cancel is not None:
            cancel.wait(pause)
        else:
            time.sleep(pause)
        delay = min(_POLL_MAX, delay * 2)


@contextmanager
def holding(slots: Slots, key: str, limit: int, cancel: threading.Event | None = None) -> Iterator[Held]:
    held = acquire(slots, key, limit, cancel)
    try:
        yield held
    finally:
        slots.release(held)


class FileSlots:
    """`limit` lock files per key under `root`; a slot is an exclusive flock on one."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _folder(self, key: str) -> Path:
        folder = self.root / key
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def try_acquire(self, key: str, limit: int) -> Held | None:
        folder = self._folder(key)
        first = random.randrange(limit)  # spread holders over the files
        for i in range(limit):
            path = folder / f"{(first + i) % limit}.lock"
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                # flock locks belong to the open file description, so two threads of one
                # process that opened the file separately exclude each other too.
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    continue
                raise
            return Held(key, path.name, fd)
        return None

    def release(self, held: Held) -> None:
        if held.handle is not None:
            os.close(held.handle)  # closing the descriptor drops its lock
            held.handle = None


_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
  redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 60)
  return 1
end
return 0
"""


class RedisSlots:
    """Slots in a Redis sorted set per key (`packforge:slots:<key>`), leased for
    `ttl` seconds and renewed by a daemon thread while held."""

    def __init__(self, url: str, ttl: float = 30.0, prefix: str = "packforge:slots:") -> None:
        import redis

        self.client = redis.Redis.from_url(url)
        self.ttl = ttl
        self.prefix = prefix
        self._acquire = self.client.register_script(_ACQUIRE)
        self._held: dict[str, str] = {}  # token -> redis key
        self._lock = threading.Lock()
        self._renewer: threading.Thread | None = None
        self._pid = os.getpid()

    def try_acquire(self, key: str, limit: int) -> Held | None:
        token = f"{os.getpid()}-{uuid.uuid4().hex}"
        rkey = self.prefix + key
        if not self._acquire(keys=[rkey], args=[limit, self.ttl, token]):
            return None
        with self._lock:
            self._held[token] = rkey
            self._ensure_renewer()
        return Held(key, token)

    def release(self, held: Held) -> None:
        with self._lock:
            rkey = self._held.pop(held.token, None)
        if rkey is not None:
            self.client.zrem(rkey, held.token)

    def renew(self) -> None:
        """Push the lapse time of every slot this process holds `ttl` seconds ahead."""
        with self._lock:
            held = dict(self._held)
        if not held:
            return
        pipe = self.client.pipeline(transaction=False)
        for token, rkey in held.items():
            # XX: only slots still held; one that lapsed stays lapsed (see docs/evals.md).
            pipe.zadd(rkey, {token: time.time() + self.ttl}, xx=True)
        pipe.execute()

    def _ensure_renewer(self) -> None:
        if self._pid != os.getpid():  # forked: the parent's thread is not ours
            self._pid, self._renewer = os.getpid(), None
        if self._renewer is None or not self._renewer.is_alive():
            self._renewer = threading.Thread(target=self._renew_forever, name="slot-renewer", daemon=True)
            self._renewer.start()

    def _renew_forever(self) -> None:
        while True:
            time.sleep(self.ttl / 4)
            try:
                self.renew()
            except Exception:  # Redis away for a moment: the next round tries again
                continue


class CappedBackend:
    """A backend whose every call holds a slot of `key`'s global cap while in flight.
    A call made ahead of its node (`call.spare`, runtime.lookahead) takes a slot only if
    one is free now, and fails with NoSpareSlot otherwise: it never queues."""

    def __init__(self, inner: Backend, slots: Slots, key: str, limit: int) -> None:
        self.inner = inner
        self.slots = slots
        self.key = key
        self.limit = limit
        self.spec = inner.spec
        self.lookahead: int = getattr(inner, "lookahead", 0)

    def complete(self, call: ModelCall) -> ModelReply:
        if call.spare:
            held = self.slots.try_acquire(self.key, self.limit)
            if held is None:
                raise NoSpareSlot(f"no free slot of {self.key} (cap {self.limit}) for a call made ahead")
            try:
                return self.inner.complete(call)
            finally:
                self.slots.release(held)
        with holding(self.slots, self.key, self.limit, call.cancel):
            return self.inner.complete(call)

    def close(self) -> None:
        self.inner.close()


_slots: Slots | None = None
_slots_lock = threading.Lock()


def slots() -> Slots:
    """This process's slots: in Redis when REDIS_URL is set, else lock files under var/."""
    global _slots
    with _slots_lock:
        if _slots is None:
            url = getattr(settings, "REDIS_URL", "")
            if url:
                _slots = RedisSlots(url, ttl=setting("PACKFORGE_SLOT_TTL_S"))
            else:
                _slots = FileSlots(Path(settings.VAR_DIR) / "slots")
        return _slots


def capped_endpoint(endpoint: Endpoint, *, base_dir: Path | None, default: str | None) -> CappedBackend:
    """`endpoint`'s backend, each call holding a slot of the endpoint's global cap: the
    one construction evals, eval tier ladders and served runs share (one cap per endpoint
    whoever calls it)."""
    # imported here: this module is imported without Django's apps (a slot-holding subprocess)
    from studio.endpoints.backends import open_endpoint

    inner = open_endpoint(endpoint, base_dir=base_dir, default=default)
    return CappedBackend(inner, slots(), f"endpoint-{endpoint.pk}", endpoint.concurrency)


def endpoint_tiers(endpoints: list[Endpoint], *, base_dir: Path | None, default: str | None) -> list[Tier]:
    """A tier ladder over `endpoints` (small to large): one runtime Tier per endpoint,
    named by the endpoint, behind its global cap (a deployment's tiers, an eval's)."""
    return [Tier(e.name, capped_endpoint(e, base_dir=base_dir, default=default)) for e in endpoints]
