"""A served run's event stream: RunEvent rows numbered 1.. per run, of the fixed kinds
in models.EVENT_KINDS (docs/serving.md has what each carries). The number is the SSE
event id a client resumes from (Last-Event-ID).

Numbers are given by the writer: the next after the run's highest, kept per process
for the run it walks; a clash on the unique (run, seq) (another writer got there: a
resume or a review decision in the web process) re-reads the highest and tries again."""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max

from studio.deployments.models import EVENT_KINDS, RunEvent
from studio.redaction import stored

log = logging.getLogger("packforge.studio.deployments")

_lock = threading.Lock()
_next: dict[int, int] = {}


def record(run_pk: int, kind: str, data: dict[str, Any] | None = None) -> int:
    """Append one event to run `run_pk`'s stream; its number."""
    if kind not in EVENT_KINDS:
        raise ValueError(f"{kind!r} is not an event kind; the taxonomy is fixed: {', '.join(EVENT_KINDS)}")
    payload = stored(data or {})
    for _ in range(20):
        with _lock:
            seq = _next.get(run_pk)
        if seq is None:
            seq = (RunEvent.objects.filter(run_id=run_pk).aggregate(m=Max("seq"))["m"] or 0) + 1
        try:
            with transaction.atomic():
                RunEvent.objects.create(run_id=run_pk, seq=seq, kind=kind, data=payload)
        except IntegrityError:
            with _lock:
                _next.pop(run_pk, None)
            continue
        with _lock:
            _next[run_pk] = seq + 1
            if len(_next) > 10_000:
                _next.clear()
        return seq
    raise RuntimeError(f"could not number an event of served run {run_pk}")


def forget(run_pk: int) -> None:
    with _lock:
        _next.pop(run_pk, None)
