"""The runtime's CheckpointStore, kept in the studio database.

Each write checks the fencing token inside the same transaction as the write, with the
run's row locked (SELECT ... FOR UPDATE on Postgres; SQLite transactions take the
write lock up front, settings' transaction_mode IMMEDIATE). A worker that stalled and
wakes up after another worker took the case over gets FencedOut, never a write."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from runtime import Entry, FencedOut, RunNotFound, RunRecord, RunStateError
from studio import sqlwrites
from studio.work.caps import JournalBudget
from studio.work.models import JournalEntry, RunCheckpoint

CHECKPOINT = ("run_id", "pack", "digest", "input", "case_id", "status", "fence", "updated_at")
JOURNAL = ("run", "seq", "kind", "node", "step", "payload")


def _record(row: RunCheckpoint) -> RunRecord:
    return RunRecord(row.run_id, row.pack, row.digest, row.input, row.case_id, row.status, row.fence, row.result)


def insert_checkpoint(run_id: str, *, pack: str, digest: str, input: dict[str, Any], case_id: str | None) -> None:
    """The new run's checkpoint row, at fence 1 (IntegrityError when `run_id` has one)."""
    row = (run_id, pack, digest, input, case_id, "running", 1, timezone.now())
    sqlwrites.insert(RunCheckpoint, CHECKPOINT, [row])


class DatabaseStore:
    def begin(self, run_id: str, *, pack: str, digest: str, input: dict[str, Any], case_id: str | None) -> int:
        try:
            with transaction.atomic():
                insert_checkpoint(run_id, pack=pack, digest=digest, input=input, case_id=case_id)
        except IntegrityError:
            raise RunStateError(f"run '{run_id}' already exists") from None
        return 1

    def take_over(self, run_id: str) -> tuple[int, RunRecord, list[Entry]]:
        with transaction.atomic():
            row = self._locked(run_id)
            row.fence += 1
            row.updated_at = timezone.now()
            row.save(update_fields=["fence", "updated_at"])
            entries = [Entry(e.seq, e.kind, e.node, e.step, e.payload) for e in row.journal.order_by("seq")]
        return row.fence, _record(row), entries

    def append(self, run_id: str, fence: int, kind: str, node: str, step: int, payload: dict[str, Any]) -> None:
        with transaction.atomic():
            row = self._checked(run_id, fence)
            last = row.journal.aggregate(m=Max("seq"))["m"] or 0
            JournalEntry.objects.create(run=row, seq=last + 1, kind=kind, node=node, step=step, payload=payload)

    def set_status(self, run_id: str, fence: int, status: str, result: dict[str, Any] | None = None) -> None:
        with transaction.atomic():
            row = self._checked(run_id, fence)
            row.status, row.result, row.updated_at = status, result, timezone.now()
            row.save(update_fields=["status", "result", "updated_at"])

    def get(self, run_id: str) -> RunRecord:
        row = RunCheckpoint.objects.filter(run_id=run_id).first()
        if row is None:
            raise RunNotFound(f"no run '{run_id}'")
        return _record(row)

    def exists(self, run_id: str) -> bool:
        return RunCheckpoint.objects.filter(run_id=run_id).exists()

    def close(self) -> None:
        pass

    @staticmethod
    def _locked(run_id: str) -> RunCheckpoint:
        row = RunCheckpoint.objects.select_for_update().filter(run_id=run_id).first()
        if row is None:
            raise RunNotFound(f"no run '{run_id}'")
        return row

    def _checked(self, run_id: str, fence: int) -> RunCheckpoint:
        row = self._locked(run_id)
        if row.fence != fence:
            raise FencedOut(f"run '{run_id}' was taken over (fence {row.fence}, this writer has {fence})")
        return row


class OutcomeStore(DatabaseStore):
    """The database checkpoint store for one leased run (an eval case's, a try-it run's,
    a served run's), with two changes:

    - the run's final status is held back until the row's outcome is written, in the
      same transaction (`commit_final`): both are there, or neither;
    - a journal write is two statements: an UPDATE of the run row that matches only
      while this writer's fence is current (the fence check, and the row's write lock
      until commit), then the INSERT, at the next sequence number this writer keeps
      (it is the run's only writer while its fence is current; the unique (run, seq)
      constraint backs that up). DatabaseStore's SELECT FOR UPDATE + MAX(seq) + INSERT
      was half the time of a scripted case (benchmarks/eval_scale.py)."""

    FINAL = frozenset({"done", "failed", "cancelled", "waiting"})

    def __init__(self) -> None:
        self.pending: tuple[str, int, str, dict[str, Any] | None] | None = None
        self._seq: dict[str, int] = {}
        self.budget = JournalBudget()  # the studio's cap on one run's journal bytes

    def begin(self, run_id: str, *, pack: str, digest: str, input: dict[str, Any], case_id: str | None) -> int:
        fence = super().begin(run_id, pack=pack, digest=digest, input=input, case_id=case_id)
        self._seq[run_id] = 0
        return fence

    def take_over(self, run_id: str) -> tuple[int, RunRecord, list[Entry]]:
        fence, record, entries = super().take_over(run_id)
        self._seq[run_id] = entries[-1].seq if entries else 0
        self.budget.took_over(run_id, [e.payload for e in entries])
        return fence, record, entries

    def append(self, run_id: str, fence: int, kind: str, node: str, step: int, payload: dict[str, Any]) -> None:
        self.budget.charge(run_id, payload)
        seq = self._seq.get(run_id)
        if seq is None:  # not begun or taken over through this store: the general path
            super().append(run_id, fence, kind, node, step, payload)
            return
        with transaction.atomic():
            self._fenced_update(run_id, fence, updated_at=timezone.now())
            sqlwrites.insert(JournalEntry, JOURNAL, [(run_id, seq + 1, kind, node, step, payload)])
        self._seq[run_id] = seq + 1

    def set_status(self, run_id: str, fence: int, status: str, result: dict[str, Any] | None = None) -> None:
        if status in self.FINAL:
            self.pending = (run_id, fence, status, result)
            return
        self._fenced_update(run_id, fence, status=status, result=result, updated_at=timezone.now())

    def commit_final(self) -> None:
        if self.pending is not None:
            run_id, fence, status, result = self.pending
            self._fenced_update(run_id, fence, status=status, result=result, updated_at=timezone.now())

    @staticmethod
    def _fenced_update(run_id: str, fence: int, **fields: Any) -> None:
        if not sqlwrites.update(RunCheckpoint, {"run_id": run_id, "fence": fence}, fields):
            current = RunCheckpoint.objects.filter(run_id=run_id).values_list("fence", flat=True).first()
            if current is None:
                raise RunNotFound(f"no run '{run_id}'")
            raise FencedOut(f"run '{run_id}' was taken over (fence {current}, this writer has {fence})")
