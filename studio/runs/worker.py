"""Walking a try-it run, in a worker: one delivery of the work core (studio.work.delivery:
claim, poison check, watch, run, settle). The delivery loads the pack version into a
temporary folder, opens the model, walks the pack with an `on_step` hook that writes the
trace so far to the TryRun row as each step is checkpointed, then stores the run's status,
output, error and trace (the runtime's trace dict, as evals store it; studio.redaction
says who reads rejected text). The run checkpoints into the database, so a run whose
worker died resumes (`run_try`)."""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from runtime import (
    Entry,
    PackforgeError,
    RunRecord,
    RunStateError,
    Step,
    Trace,
    TraceBuilder,
    open_backend,
    resume_run,
    run_pack,
)
from studio import packs
from studio.redaction import stored
from studio.runs import recovery
from studio.runs.models import TryRun
from studio.runs.settings import setting
from studio.runs.start import TryRefused, case_for_input
from studio.work import admission, caps, leases
from studio.work.checkpoints import OutcomeStore
from studio.work.delivery import Delivery
from studio.work.leases import LeaseLost
from studio.work.watcher import Held, LeaseWatcher

log = logging.getLogger("packforge.studio.runs")


class _Journal(OutcomeStore):
    """The run's database checkpoint store (studio.work.checkpoints: fenced writes; the final
    status held back until the row's outcome is written in the same transaction), which
    also rebuilds the run's trace as steps are journaled, for the on_step hook to publish
    while the run goes on (the runtime's trace format). A resumed run's trace starts from
    the journal it took over."""

    def __init__(self, run_id: str, pack: str) -> None:
        super().__init__()
        self.builder = TraceBuilder(run_id, pack)  # the runtime's journal decoder

    @property
    def trace(self) -> Trace:
        return self.builder.trace

    def take_over(self, run_id: str) -> tuple[int, RunRecord, list[Entry]]:
        fence, record, entries = super().take_over(run_id)
        self.builder = TraceBuilder(self.trace.run_id, self.trace.pack)
        self.builder.extend(entries)
        return fence, record, entries

    def append(self, run_id: str, fence: int, kind: str, node: str, step: int, payload: dict[str, Any]) -> None:
        super().append(run_id, fence, kind, node, step, payload)
        self.builder.add(kind, node, step, payload)


def _finish(
    run_id: int, token: str, status: str, *, output: Any = None, error: str = "", trace: Trace | None = None
) -> bool:
    """Write the run's end, if this delivery still holds its lease."""
    fields: dict[str, Any] = {"status": status, "output": output, "error": error, "finished_at": timezone.now()}
    bump: dict[str, Any] = {}
    if trace is not None:
        # Rejected generations are kept for authors; studio.redaction decides who reads them.
        fields["trace"] = trace.to_dict(include_rejected_text=True)
        bump["trace_rev"] = F("trace_rev") + 1
    return leases.close(TryRun, run_id, token, **stored(fields), **bump)


class TryRunDelivery(Delivery[TryRun]):
    """One delivery of a try-it run (studio.work.delivery). A run claimed again after its
    worker died resumes from its checkpoint (runtime.resume_run): finished steps and
    journaled tool results are replayed, never called again; taking it over bumps the
    fencing token, so a stalled former holder cannot write. A run claimed more than
    PACKFORGE_RUN_MAX_ATTEMPTS times is closed as failed ("poisoned")."""

    model = TryRun
    noun = "try run"
    max_claims_setting = "PACKFORGE_RUN_MAX_ATTEMPTS"
    failed = TryRun.Status.FAILED
    admitted = admission.register(admission.Kind(TryRun, user="created_by", project="project", resend=recovery.send))

    def __init__(self, pk: int) -> None:
        super().__init__(pk)
        self.journal: _Journal | None = None  # the run's checkpoint store, once its walk began

    def load(self) -> TryRun:
        return TryRun.objects.select_related("project", "endpoint").get(pk=self.pk)

    def watcher(self) -> LeaseWatcher:
        return recovery.watcher()

    def max_claims(self) -> int:
        return int(setting("PACKFORGE_RUN_MAX_ATTEMPTS"))

    def refusal(self, exc: Exception) -> str | None:
        return str(exc) if isinstance(exc, TryRefused | packs.PackUnrunnable | PackforgeError) else None

    def end(self, row: TryRun, status: str, error: str) -> bool:
        return _finish(self.pk, self.token, status, error=error, trace=_stopped(self.journal, error))

    def run(self, row: TryRun, held: Held) -> str | None:
        run_id, token = self.pk, self.token
        with tempfile.TemporaryDirectory(prefix="pf-try-") as tmp:
            # The spec recorded when the run was started (an endpoint edited or deleted
            # since does not change what this run asks), else the pack's own model.
            got = packs.load_version(row.project, row.version, Path(tmp), own_model=not row.model_spec)
            pack, tools = got.ensure_runnable().pack, got.tools
            spec = row.model_spec or pack.model or ""
            backend = open_backend(spec, base_dir=pack.root, default=pack.model)
            self.journal = journal = _Journal(f"try-{run_id}", pack.name)

            published = _Publishing()

            def on_step(step: Step) -> None:
                # Writing the whole trace at every step costs the square of the steps (a
                # looping run at 10,000 steps rewrote ~1 MB per step): when _Publishing
                # says it is due.
                if published.due(len(journal.trace.steps)):
                    TryRun.objects.filter(pk=run_id, lease_owner=token).update(
                        trace=stored(journal.trace.to_dict(include_rejected_text=True)),
                        trace_rev=F("trace_rev") + 1,
                    )

            common: dict[str, Any] = {
                "backend": backend,
                "tools": tools,
                "store": journal,
                "options": caps.run_options(pack, on_step=on_step),
                "cancel": held.cancel,
            }
            try:
                # Only a claim can begin a checkpoint: the first one finds none.
                if row.attempts > 1 and journal.exists(f"try-{run_id}"):
                    result = resume_run(pack, f"try-{run_id}", **common)
                else:
                    try:
                        # The pack's own model (a script keyed by case) answers an evalset
                        # case's input as that case; an endpoint answers what it is sent.
                        case_id = case_for_input(pack, row.input) if row.endpoint_id is None else None
                        result = run_pack(pack, row.input, run_id=f"try-{run_id}", case_id=case_id, **common)
                    except RunStateError:  # begun by a delivery that lost its lease before this claim
                        result = resume_run(pack, f"try-{run_id}", **common)
            finally:
                backend.close()
        if held.lost:
            raise LeaseLost(run_id)
        error = result.trace.error or ""
        if result.status == "waiting":
            error = f"waiting for a person at node '{result.waiting_at}'; try-it runs do not take human answers"
        output = result.output if result.status == "done" else None
        with transaction.atomic():
            journal.commit_final()
            if not _finish(run_id, token, result.status, output=output, error=error, trace=result.trace):
                raise LeaseLost(run_id)  # rolls the checkpoint's final status back too
        return result.status


class _Publishing:
    """When a running try-it run's trace so far is written to its row (the run page
    polls it): at each of its first EVERY_STEP_UNTIL steps; then once the trace has grown
    by GROWTH since it was last written (at most once per PUBLISH_EVERY_S), or once it is
    STALE_S old whatever the growth (a slow run's page still moves). Each write carries
    the whole trace so far, so a fixed interval costs the square of a long run's steps
    (a 10,000-step loop rewrote 6 MB a second into the database other users write to);
    growing by a quarter keeps the growth writes of a run under five times its final
    trace, and the staleness writes are one per STALE_S. The final trace is always
    written when the run ends."""

    EVERY_STEP_UNTIL = 50
    PUBLISH_EVERY_S = 1.0
    STALE_S = 10.0
    GROWTH = 1.25

    def __init__(self) -> None:
        self.last = time.monotonic()
        self.last_steps = 0

    def due(self, steps: int) -> bool:
        now = time.monotonic()
        age = now - self.last
        grown = steps >= self.last_steps * self.GROWTH and age >= self.PUBLISH_EVERY_S
        if steps <= self.EVERY_STEP_UNTIL or grown or (steps > self.last_steps and age >= self.STALE_S):
            self.last, self.last_steps = now, steps
            return True
        return False


def run_try(run_id: int) -> str | None:
    """Run a queued TryRun to its end; returns the final status written (None: this
    delivery had nothing to do, or lost the run to another one). Safe to deliver any
    number of times (TryRunDelivery)."""
    return TryRunDelivery(run_id).deliver()


def _stopped(journal: _Journal | None, error: str) -> Trace | None:
    """The trace so far of a run that stopped with `error` (None: it never started)."""
    if journal is None:
        return None
    journal.trace.status, journal.trace.error = "failed", error
    return journal.trace
