"""Running a served run, in a worker: claim it, walk it (or resume it) on the
deployment's tiers, write its one outcome. The durability of an eval case
(studio/evals/worker.py, docs/serving.md "Execution"):

- **Claim** (studio.work.delivery, the template every leased row runs through;
  studio.work.leases): one conditional UPDATE takes a queued run, or a running one
  whose lease lapsed or that a sweep re-sent; it bumps `attempts`. A delivery that claims
  nothing returns at once (the run is final or waiting, or another delivery holds it).
  A run claimed more than PACKFORGE_SERVE_MAX_ATTEMPTS times is closed as failed
  ("poisoned").
- **Checkpoint**: the run's journal is in the database (studio.work.checkpoints, fenced
  writes). A run claimed again resumes from it (runtime.resume_run): finished nodes
  replayed, a journaled tool result reused, never called again; a node killed while a
  larger tier was being asked continues on that tier. Taking over bumps the fencing
  token: a stalled former holder gets FencedOut and writes nothing.
- **One transaction per step**: a step's journal entry (fence checked), the events
  emitted while it ran (its model calls, its refused attempts) and the next node's
  node.start commit together (ServedStore, events.Batch): a node's checkpoint is
  durable before the next node starts, and its events are never ahead of it nor lost
  with it. The run's row gets its trace once, when the run settles (GET of a running
  run reads the steps from the journal: `journal_trace`).
- **One outcome**: the checkpoint's final status and the run's row are written in one
  transaction, guarded by the lease token; the run's last events (waiting, run.end)
  in the same transaction; once it commits, a request waiting on the run (`?wait`) is
  woken (studio.deployments.settled).
- **Tiers** (runners.py): one runtime Tier per deployment endpoint, sharing the
  endpoint's global cap with evals.
- **Events** (recording.py): written with their step, or at once for a tool call and an
  escalation."""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from typing import Any

from django.db import InterfaceError, OperationalError, transaction
from django.utils import timezone

from runtime import (
    HostFailed,
    OutputRejected,
    PackforgeError,
    Registry,
    RunResult,
    RunStateError,
    Tier,
    Trace,
    resume_run,
    run_pack,
)
from studio import packs
from studio.deployments import settled
from studio.deployments.models import ServedRun
from studio.deployments.recording import EventBackend, Recorder, tool_with_events
from studio.deployments.recovery import hand_over, send, watcher, web_watcher
from studio.deployments.runners import Runner, using_runner
from studio.deployments.served_store import ServedStore
from studio.deployments.settings import setting
from studio.redaction import stored
from studio.work import caps, leases, metering
from studio.work.delivery import Delivery
from studio.work.leases import LeaseLost
from studio.work.watcher import Held, LeaseWatcher

log = logging.getLogger("packforge.studio.deployments")

S = ServedRun.Status


def _path(trace: Trace) -> str:
    return " " + " ".join(trace.path) + " " if trace.path else ""


def _close(pk: int, token: str, status: str, error: str, **fields: Any) -> bool:
    return leases.close(ServedRun, pk, token, status=status, error=stored(error), finished_at=timezone.now(), **fields)


def _last_events(recorder: Recorder, kind: str, data: dict[str, Any]) -> None:
    """The run's last event after the pending ones, in the caller's (closing) transaction."""
    recorder.emit(kind, data)
    recorder.batch.write()  # nothing is written after it: no bookkeeping to keep
    settled.announce(recorder.run_pk)


def _end(pk: int, token: str, status: str, error: str, recorder: Recorder | None = None, **fields: Any) -> bool:
    """Close the run as `status` with its run.end event and webhook (one transaction);
    the events the walk emitted and had not written yet go first. False when this
    delivery no longer held the run."""
    from studio.deployments.webhooks import send_on_end

    with transaction.atomic():
        if not _close(pk, token, status, error, **fields):
            return False
        _last_events(recorder or Recorder(pk), "run.end", {"status": status, "error": error})
        send_on_end(pk)
    return True


class _Deadline:
    """Sets `event` (the walk's cancel) after `seconds`, and remembers that it did."""

    def __init__(self, seconds: float, event: threading.Event) -> None:
        self.passed = False
        self.event = event
        self.timer = threading.Timer(max(0.0, seconds), self._fire)
        self.timer.daemon = True
        self.timer.start()

    def _fire(self) -> None:
        self.passed = True
        self.event.set()

    def stop(self) -> None:
        self.timer.cancel()


class ServedDelivery(Delivery[ServedRun]):
    """One delivery of a served run (studio.work.delivery), by a worker, or by the web
    process that accepted a `?wait` run (`walk_here`: its own watcher, and a deadline
    after which the run is handed to the workers). A person's answer the runtime refuses
    sends the run back to waiting."""

    model = ServedRun
    noun = "served run"
    max_claims_setting = "PACKFORGE_SERVE_MAX_ATTEMPTS"
    failed = S.FAILED
    stamps_start = True
    transient = (HostFailed,)

    def __init__(self, pk: int, watch: LeaseWatcher | None = None, seconds: float | None = None) -> None:
        super().__init__(pk)
        self.watch = watch or watcher()
        self.seconds = seconds
        self.recorder = Recorder(pk)
        self.store: ServedStore | None = None

    def load(self) -> ServedRun:
        return ServedRun.objects.select_related("deployment").get(pk=self.pk)

    def watcher(self) -> LeaseWatcher:
        return self.watch

    def max_claims(self) -> int:
        return int(setting("PACKFORGE_SERVE_MAX_ATTEMPTS"))

    def before(self, row: ServedRun) -> tuple[bool, str | None]:
        if not row.cancel_requested:
            return False, None
        return True, (S.CANCELLED if _end(self.pk, self.token, S.CANCELLED, "cancelled") else None)

    def end(self, row: ServedRun, status: str, error: str) -> bool:
        trace = {"trace": _stopped(self.store, error)} if self.store is not None else {}
        return _end(self.pk, self.token, status, error, self.recorder, **trace)

    def refusal(self, exc: Exception) -> str | None:
        return str(exc) if isinstance(exc, packs.PackUnrunnable | PackforgeError) else None

    def settle(self, row: ServedRun, exc: Exception, message: str) -> str | None:
        if isinstance(exc, OutputRejected):  # a person's answer the runtime refused: back to waiting
            return _refused_answer(row, self.token, exc, self.recorder)
        return super().settle(row, exc, message)

    def run(self, row: ServedRun, held: Held) -> str | None:
        pk, token = self.pk, self.token
        deadline = _Deadline(self.seconds, held.cancel) if self.seconds is not None else None
        try:
            with using_runner(row.deployment, row.version) as runner:
                self.store = store = ServedStore(row.checkpoint_id, runner.pack, self.recorder)
                result = _walk(row, runner, store, self.recorder, token, held.cancel)
        finally:
            if deadline is not None:
                deadline.stop()
        if held.lost:
            raise LeaseLost(str(pk))
        if deadline is not None and deadline.passed and result.status == S.CANCELLED:
            # The wait ended first; the cancelled walk wrote no outcome (the checkpoint
            # holds its final status back): a worker resumes it from the checkpoint.
            log.info("served run %s did not settle within its wait; handed to the workers", pk)
            hand_over(pk, token)
            return None
        return _settle(row, token, result, store, self.recorder)


def run_served(pk: int) -> str | None:
    """Run served run `pk` to its end (or to a wait); the status written, or None when this
    delivery had nothing to do or lost the run. Safe to deliver any number of times."""
    return ServedDelivery(pk).deliver()


def walk_here(run: ServedRun, token: str, seconds: float) -> str | None:
    """Walk `run`, just created held by `token` (service.submit with walk_here), in this
    process: a `?wait` request's run, walked by the web process that accepted it, with
    no broker hand-off and no wake-up to wait for. What a worker would write, the same
    way (leases, checkpoints, events, one outcome); this process's WebWatcher renews the
    lease and stops the walk when its cancel is asked for. When `seconds` pass before
    the run settles, its in-flight model call is dropped and the run is handed to the
    workers (recovery.hand_over), which resume it from its checkpoint. The status
    written, or None (handed over, or lost). When the database fails under the walk (it
    gave the lease up, as a worker does), the run is sent to the workers at once rather
    than left for a sweep, and None is returned."""
    delivery = ServedDelivery(run.pk, web_watcher(), seconds)
    try:
        return metering.metered("served run", run.pk, "web", lambda: delivery.deliver_held(token, run))
    except (OperationalError, InterfaceError, HostFailed) as exc:
        log.warning("served run %s: walking it here failed (%s); sending it to the workers", run.pk, exc)
        try:
            send([run.pk])
        except Exception as again:  # the broker away too: a sweep sends it once its lease lapses
            log.warning("served run %s could not be sent either (%s); a sweep will", run.pk, again)
        return None


def _refused_answer(run: ServedRun, token: str, exc: OutputRejected, recorder: Recorder) -> str | None:
    reasons = "; ".join(exc.reasons or [exc.reason])
    with transaction.atomic():
        refused = stored(f"the answer was refused: {reasons}")
        if not leases.close(ServedRun, run.pk, token, status=S.WAITING, error=refused, answer=None, answer_node=""):
            return None
        _last_events(recorder, "waiting", {"node": run.waiting_at, "reason": run.waiting_reason, "refused": reasons})
        _signal_waiting(run.pk)
    return S.WAITING


def _walk(
    run: ServedRun, runner: Runner, store: ServedStore, recorder: Recorder, token: str, cancel: threading.Event
) -> RunResult:
    tiers = [Tier(t.name, EventBackend(t.backend, t.name, recorder)) for t in runner.tiers]
    # Each ToolDef keeps its declaration (schemas, side effects, state); only its function is wrapped.
    tools = {
        name: replace(t, function=tool_with_events(name, t.function, recorder))
        for name, t in (runner.tools or Registry()).items()
    }

    # Each step's checkpoint, with its events and the next node's node.start, is one
    # transaction (ServedStore.append); the trace reaches the row when the run settles.
    def on_escalate(escalation: dict[str, Any]) -> None:
        recorder.emit("escalated", dict(escalation), now=True)

    common: dict[str, Any] = {
        "backend": tiers[0].backend,
        "tiers": tiers,
        "tools": tools,
        "store": store,
        "options": caps.run_options(runner.pack, on_escalate=on_escalate),
        "cancel": cancel,
    }
    answers = {run.answer_node: run.answer} if run.answer_node and run.answer is not None else None
    if answers:
        common.update(answers=answers, answered_by=run.answered_by or None)
    started = {"deployment": run.deployment.name, "version": run.version, "tiers": [t.name for t in tiers]}
    cid = run.checkpoint_id
    # Only a claim can begin a checkpoint: a first claim finds none (an answered run has
    # one; so has a run handed over by the request that walked it, its claim given back:
    # its begin fails and it resumes, RunStateError below).
    if (run.attempts > 1 or answers) and store.exists(cid):
        return _resume(runner, cid, common, store, started)
    recorder.emit("run.start", {**started, "resumed": False, "attempt": run.attempts})
    try:
        recorder.node, recorder.step = runner.pack.entry, 1
        recorder.node_start(runner.pack.entry, 1)
        return run_pack(runner.pack, run.input, run_id=cid, **common)
    except RunStateError:  # begun by a delivery that lost its lease before this claim
        return _resume(runner, cid, common, store, started)


def _resume(
    runner: Runner,
    cid: str,
    common: dict[str, Any],
    store: ServedStore,
    started: dict[str, Any],
) -> RunResult:
    # run.start / node.start of a resumed walk are written when it has taken the run
    # over (then it knows the node it continues at): ServedStore.take_over.
    store.announce = {**started, "resumed": True}
    return resume_run(runner.pack, cid, **common)


def _settle(run: ServedRun, token: str, result: RunResult, store: ServedStore, recorder: Recorder) -> str | None:
    from studio.deployments.webhooks import send_on_end

    trace = result.trace
    fields: dict[str, Any] = {
        "trace": stored(trace.to_dict(include_rejected_text=True)),
        "path": _path(trace),
        # A run waiting for a person has not been settled by anyone yet (the runtime's
        # settled_by says "person" for it already): its tier is written when it ends.
        "tier": (result.settled_by or "") if result.status != S.WAITING else "",
        "answer": None,
        "answer_node": "",
    }
    status = result.status
    with transaction.atomic():
        store.commit_final()
        if status == S.WAITING:
            pending = store.pending[3] if store.pending else None
            question = (pending or {}).get("question", "")
            fields.update(
                waiting_at=result.waiting_at or "",
                waiting_reason=result.waiting_reason or "",
                question=question,
                state=stored({**result.state, "input": run.input}),
                output=None,
            )
            fields.update(status=S.WAITING, error="")
            if not leases.close(ServedRun, run.pk, token, **fields):
                raise LeaseLost(str(run.pk))
            _last_events(
                recorder, "waiting", {"node": result.waiting_at, "reason": result.waiting_reason, "question": question}
            )
            _signal_waiting(run.pk)
        else:
            error = trace.error or ""
            output = result.output if status == "done" else None
            fields.update(output=output, waiting_at="", waiting_reason="", question="", state=None)
            fields.update(status=status, error=stored(error), finished_at=timezone.now())
            if not leases.close(ServedRun, run.pk, token, **fields):
                raise LeaseLost(str(run.pk))  # rolls the checkpoint's final status back too
            end = {"status": status, "output": output, "error": error, "tier": fields["tier"]}
            _last_events(recorder, "run.end", end)
            send_on_end(run.pk, run.deployment.webhook_url)
    # `run` as written (committed): a request that walked it answers without reading it again.
    for name, value in {**fields, "lease_owner": "", "lease_until": None}.items():
        setattr(run, name, value)
    return str(fields["status"])


def _signal_waiting(pk: int) -> None:
    from studio.deployments.signals import run_waiting

    def send() -> None:
        row = ServedRun.objects.select_related("deployment__project").get(pk=pk)
        run_waiting.send(sender=ServedRun, run=row)

    transaction.on_commit(send)


def _stopped(store: ServedStore | None, error: str) -> dict[str, Any]:
    if store is None:  # stopped before its walk began (the pack or a tier would not open)
        return {}
    store.trace.status, store.trace.error = "failed", error
    return stored(store.trace.to_dict(include_rejected_text=True))
