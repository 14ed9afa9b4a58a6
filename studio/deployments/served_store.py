"""A served run's checkpoint in the database, with its events (`ServedStore`), and the
trace of a run still walking, read from its journal (`journal_trace`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from runtime import Entry, Pack, RunRecord, RunStateError, Trace, TraceBuilder
from studio import sqlwrites
from studio.deployments.models import ServedRun
from studio.deployments.recording import Recorder
from studio.redaction import stored
from studio.work.checkpoints import JOURNAL, OutcomeStore, insert_checkpoint
from studio.work.models import JournalEntry, RunCheckpoint


class ServedStore(OutcomeStore):
    """The run's database checkpoint (fenced writes; the final status held back until the
    row's outcome is written in the same transaction) that also writes the run's events:
    each journal write is one transaction holding the fence check, the journal entry and
    the events emitted since the last write (the node's model calls, its refused attempts,
    the next node's node.start), so a node's checkpoint and its events commit together,
    in order, or not at all, and a fenced-out walker writes no event either. It rebuilds
    the run's trace as steps are journaled (a resumed run's from the journal it took
    over); the trace reaches the run's row once, when the run settles. It knows the node
    a taken-over run continues at."""

    def __init__(self, run_id: str, pack: Pack, recorder: Recorder) -> None:
        super().__init__()
        self.run_id = run_id
        self.builder = TraceBuilder(run_id, pack.name)  # the runtime's journal decoder
        self.entry = pack.entry
        self.recorder = recorder
        recorder.store = self
        self.fence: int | None = None
        self.resume_at: tuple[str, int] = (pack.entry, 1)
        self.announce: dict[str, Any] | None = None  # run.start data to write on take-over

    def _with_events(self, body: Callable[[], None]) -> None:
        """`body`'s writes and the pending events, in one transaction. A clash of event
        numbers (another writer numbered after this one read the run's highest) reads
        the highest again and tries once more."""
        batch = self.recorder.batch
        for again in (False, True):
            try:
                with transaction.atomic():
                    body()
                    count = batch.write()
            except IntegrityError:
                if again:
                    raise
                batch.reread()
                continue
            batch.written(count)
            return

    def begin(self, run_id: str, *, pack: str, digest: str, input: dict[str, Any], case_id: str | None) -> int:
        def create() -> None:
            insert_checkpoint(run_id, pack=pack, digest=digest, input=input, case_id=case_id)

        try:
            self._with_events(create)
        except IntegrityError:
            # Begun by a delivery that lost its lease: this walk does not start at the
            # entry (its run.start / node.start are dropped); it resumes (take_over).
            self.recorder.batch.pending.clear()
            raise RunStateError(f"run '{run_id}' already exists") from None
        self._seq[run_id] = 0
        self.fence = 1
        return 1

    def take_over(self, run_id: str) -> tuple[int, RunRecord, list[Entry]]:
        fence, record, entries = super().take_over(run_id)
        self.fence = fence
        self.builder = TraceBuilder(self.trace.run_id, self.trace.pack)
        at, step = self.entry, 1
        for e in entries:
            self.builder.add_entry(e)
            if e.kind == "step":
                edge = e.payload.get("edge")
                at, step = (edge["target"] if edge else e.node), e.step + 1
            elif e.kind in ("wait", "escalate"):
                at, step = e.node, e.step
        self.resume_at = (at, step)
        if self.announce is not None:
            self.recorder.emit("run.start", {**self.announce, "replayed_steps": len(self.trace.steps)})
            self.recorder.node_start(at, step)
            self.write_events()
        return fence, record, entries

    def write_events(self) -> None:
        """Write the pending events now, if this walker's fence is still current."""
        fence = self.fence
        if fence is None:
            return
        self._with_events(lambda: self._fenced_update(self.run_id, fence, updated_at=timezone.now()))

    def append(self, run_id: str, fence: int, kind: str, node: str, step: int, payload: dict[str, Any]) -> None:
        seq = self._seq.get(run_id)
        if seq is None:  # not begun or taken over through this store (never, in a worker)
            super().append(run_id, fence, kind, node, step, payload)
            self.write_events()
            self.builder.add(kind, node, step, payload)
            return
        self.budget.charge(run_id, payload)  # the studio's cap on one run's journal bytes
        for a in payload.get("attempts", []):
            if not a.get("ok") and a.get("stage") != "reasoning":
                self.recorder.emit(
                    "attempt.rejected",
                    {k: a.get(k) for k in ("node", "step", "attempt", "tier", "stage", "category", "reason")},
                )
        edge = payload.get("edge")
        if kind == "step" and payload.get("status") != "end" and edge is not None:
            self.recorder.node_start(edge["target"], step + 1)

        def journal() -> None:
            self._fenced_update(run_id, fence, updated_at=timezone.now())
            sqlwrites.insert(JournalEntry, JOURNAL, [(run_id, seq + 1, kind, node, step, payload)])

        self._with_events(journal)
        self._seq[run_id] = seq + 1
        self.builder.add(kind, node, step, payload)

    @property
    def trace(self) -> Trace:
        """The run's trace so far, rebuilt from its journal as it is written."""
        return self.builder.trace


def journal_trace(run: ServedRun) -> dict[str, Any] | None:
    """The trace of run `run` as its journal has it (a running run's row has the trace
    only once it settles); None when nothing is journaled."""
    cid = run.checkpoint_id
    pack = RunCheckpoint.objects.filter(run_id=cid).values_list("pack", flat=True).first()
    if pack is None:
        return None
    rows = JournalEntry.objects.filter(run_id=cid).values_list("kind", "node", "step", "payload")
    trace = Trace.from_journal(rows, run_id=cid, pack=pack)
    return stored(trace.to_dict(include_rejected_text=True))
