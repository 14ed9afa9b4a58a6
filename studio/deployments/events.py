"""A served run's event stream: RunEvent rows numbered 1.. per run, of the fixed kinds
in models.EVENT_KINDS (docs/serving.md has what each carries). The number is the SSE
event id a client resumes from (Last-Event-ID).

Two writers:

- `record` (the web process: a review decision, a cancel) writes one event in its own
  transaction, numbered the next after the run's highest (one indexed MAX on the unique
  (run, seq)); a clash with another writer re-reads and tries again.
- `Batch` (the worker walking the run) holds the events of the node being walked and
  writes them in the transaction of that node's checkpoint (studio.deployments.served_store
  ServedStore): one INSERT for the node's events, none committed on its own. It reads the
  run's highest number once (its first write, inside that transaction) and numbers on
  from it; the walk is the run's only writer while its lease and fence are current (a
  review or a cancel writes only to a queued or waiting run), and the unique (run, seq)
  backs that up: a clash raises IntegrityError, and the caller reads again (`reread`).
  Each event keeps `at` = when it happened (emitted), not when its batch was written."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from studio import sqlwrites
from studio.deployments.models import EVENT_KINDS, RunEvent
from studio.redaction import stored

COLUMNS = ("run", "seq", "kind", "data", "at")


def _check(kind: str) -> None:
    if kind not in EVENT_KINDS:
        raise ValueError(f"{kind!r} is not an event kind; the taxonomy is fixed: {', '.join(EVENT_KINDS)}")


def last_seq(run_pk: int) -> int:
    return sqlwrites.max_of(RunEvent, "seq", {"run": run_pk})


def record(run_pk: int, kind: str, data: dict[str, Any] | None = None) -> int:
    """Append one event to run `run_pk`'s stream; its number."""
    _check(kind)
    payload = stored(data or {})
    for _ in range(20):
        seq = last_seq(run_pk) + 1
        try:
            with transaction.atomic():
                RunEvent.objects.create(run_id=run_pk, seq=seq, kind=kind, data=payload)
        except IntegrityError:
            continue
        return seq
    raise RuntimeError(f"could not number an event of served run {run_pk}")


class Batch:
    """The events a worker emitted and has not written yet (see the module docstring)."""

    def __init__(self, run_pk: int) -> None:
        self.run_pk = run_pk
        self.pending: list[tuple[str, dict[str, Any], datetime]] = []
        self.last: int | None = None  # the run's highest number written, once read

    def add(self, kind: str, data: dict[str, Any]) -> None:
        _check(kind)
        self.pending.append((kind, data, timezone.now()))

    def write(self) -> int:
        """INSERT the pending events, in the caller's transaction; how many. Call `written`
        with the count once that transaction has committed (`reread` when it failed)."""
        if not self.pending:
            return 0
        if self.last is None:
            self.last = last_seq(self.run_pk)
        # Redacted as one value: the secrets to redact are gathered once per batch.
        payloads = stored([data for _, data, _ in self.pending])
        rows = [
            (self.run_pk, self.last + i, kind, data, at)
            for i, ((kind, _, at), data) in enumerate(zip(self.pending, payloads, strict=True), start=1)
        ]
        sqlwrites.insert(RunEvent, COLUMNS, rows)
        return len(self.pending)

    def written(self, count: int) -> None:
        if count:
            del self.pending[:count]
            self.last = (self.last or 0) + count

    def reread(self) -> None:
        self.last = None
