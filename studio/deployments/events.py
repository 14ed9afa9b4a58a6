"""A served run's event stream: RunEvent rows numbered 1.. per run, of the fixed kinds
in models.EVENT_KINDS (docs/serving.md has what each carries). The number is the SSE
event id a client resumes from (Last-Event-ID).

A writer numbers its event the next after the run's highest (one indexed MAX on the
unique (run, seq)); a clash with another writer (a review decision in the web process
while a stale walker writes) re-reads and tries again."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max

from studio.deployments.models import EVENT_KINDS, RunEvent
from studio.redaction import stored


def record(run_pk: int, kind: str, data: dict[str, Any] | None = None) -> int:
    """Append one event to run `run_pk`'s stream; its number."""
    if kind not in EVENT_KINDS:
        raise ValueError(f"{kind!r} is not an event kind; the taxonomy is fixed: {', '.join(EVENT_KINDS)}")
    payload = stored(data or {})
    for _ in range(20):
        seq = (RunEvent.objects.filter(run_id=run_pk).aggregate(m=Max("seq"))["m"] or 0) + 1
        try:
            with transaction.atomic():
                RunEvent.objects.create(run_id=run_pk, seq=seq, kind=kind, data=payload)
        except IntegrityError:
            continue
        return seq
    raise RuntimeError(f"could not number an event of served run {run_pk}")
