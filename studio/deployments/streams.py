"""Bounds on event streams (GET .../runs/{id}/events), so that open streams cannot take
every web thread: a stream holds a request thread for as long as it is open (the studio
is served by threaded WSGI workers).

- **Per user**, across every web process: at most PACKFORGE_SSE_MAX_PER_USER streams
  open at once (a slot of studio.work.slots, the cross-process cap model calls use:
  lock files, or Redis when REDIS_URL is set; a killed process frees its slots).
- **Per process**: at most PACKFORGE_SSE_MAX_PER_PROCESS streams at once, so the
  process keeps threads for pages, logins and other users' API calls (the default, 4,
  is half of gunicorn.conf.py's 8 threads).
- **Idle**: a stream that has sent no event for PACKFORGE_SSE_IDLE_S closes; the client
  resumes with Last-Event-ID, and takes a slot again.

A stream over either cap is answered 429 with `Retry-After`, before anything else."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

from django.http import JsonResponse

from studio.deployments.models import RunEvent
from studio.deployments.settings import setting
from studio.work.slots import Held, slots

RETRY_AFTER_S = 5
_process_lock = threading.Lock()
_open_here = [0]  # streams open in this process


class StreamRefused(Exception):
    """Over a stream cap; `response` is the 429 to send."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.response = JsonResponse({"detail": why}, status=429)
        self.response["Retry-After"] = str(RETRY_AFTER_S)


class Stream:
    """One run's events as SSE frames (`frames`), holding its user's slot and this
    process's count until it is closed (Django closes it when the response ends, read or
    not: `close` is a resource closer of StreamingHttpResponse)."""

    def __init__(self, user_pk: int, run_pk: int, after: int, timeout: float) -> None:
        self.run_pk, self.after, self.timeout = run_pk, after, timeout
        self.held: Held | None = None
        self._closed = True  # until both places are held
        per_user = int(setting("PACKFORGE_SSE_MAX_PER_USER"))
        per_process = int(setting("PACKFORGE_SSE_MAX_PER_PROCESS"))
        with _process_lock:
            if _open_here[0] >= per_process:
                raise StreamRefused(
                    f"this server has {per_process} event streams open (PACKFORGE_SSE_MAX_PER_PROCESS); "
                    f"try again in {RETRY_AFTER_S} s, or poll the run"
                )
            _open_here[0] += 1
        self.held = slots().try_acquire(f"streams-user-{user_pk}", per_user)
        if self.held is None:
            self._leave_process()
            raise StreamRefused(
                f"you have {per_user} event streams open (PACKFORGE_SSE_MAX_PER_USER); close one, "
                f"or try again in {RETRY_AFTER_S} s"
            )
        self._closed = False

    def _leave_process(self) -> None:
        with _process_lock:
            _open_here[0] -= 1

    def close(self) -> None:
        if self.held is None or self._closed:
            return
        self._closed = True
        slots().release(self.held)
        self._leave_process()

    def __del__(self) -> None:  # a response dropped unclosed (never in a server) still gives its place back
        self.close()

    def __iter__(self) -> Iterator[str]:
        return self.frames()

    def frames(self) -> Iterator[str]:
        """The run's events after number `after`, as they are written; ends after run.end,
        after `timeout` seconds, or after PACKFORGE_SSE_IDLE_S without an event."""
        after = self.after
        started = time.monotonic()
        poll = setting("PACKFORGE_SSE_POLL_S")
        idle = setting("PACKFORGE_SSE_IDLE_S")
        last_event = kept_alive = started
        yield "retry: 1000\n\n"
        while True:
            ended = False
            for e in RunEvent.objects.filter(run_id=self.run_pk, seq__gt=after).order_by("seq")[:500]:
                after = e.seq
                body = {"seq": e.seq, "kind": e.kind, "at": e.at.isoformat(), "data": e.data}
                yield f"id: {e.seq}\nevent: {e.kind}\ndata: {json.dumps(body)}\n\n"
                last_event = kept_alive = time.monotonic()
                ended = ended or e.kind == "run.end"
            now = time.monotonic()
            if ended or now - started >= self.timeout or now - last_event >= idle:
                return
            if now - kept_alive >= 15:
                yield ": keep-alive\n\n"
                kept_alive = now
            time.sleep(poll)


def open_here() -> int:
    """Streams open in this process now (tests, metrics)."""
    with _process_lock:
        return _open_here[0]
