"""Running a served run, in a worker: claim it, walk it (or resume it) on the
deployment's tiers, write its one outcome. The durability of an eval case
(studio/evals/worker.py, docs/serving.md "Execution"):

- **Claim** (studio.leases): one conditional UPDATE takes a queued run, or a running one
  whose lease lapsed or that a sweep re-sent; it bumps `attempts`. A delivery that claims
  nothing returns at once (the run is final or waiting, or another delivery holds it).
  A run claimed more than PACKFORGE_SERVE_MAX_ATTEMPTS times is closed as failed
  ("poisoned").
- **Checkpoint**: the run's journal is in the database (studio.evals.store, fenced
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
- **Tiers**: one runtime Tier per deployment endpoint, named by the endpoint, each call
  holding a slot of that endpoint's global cap (studio.evals.limits, the key evals use,
  so served runs and evals share one cap per endpoint). A deployment without tiers runs
  on the pack's own (scripted) model as its one tier, "pack".
- **Events** (RunEvent; each one's `at` is when it happened, its number the order):
  run.start, node.start (when the walk moves to a node),
  model.call (each call, after it), attempt.rejected (each refused attempt, as journaled),
  escalated (the runtime's on_escalate), tool.call / tool.result (around each real tool
  call; a replayed tool result is not called, so has none), waiting, run.end. tool.call
  and escalated are written at once (a client sees a slow tool or a climb while it
  happens), the others with their step."""

from __future__ import annotations

import atexit
import logging
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from django.db import IntegrityError, InterfaceError, OperationalError, connection, transaction
from django.db.models import DateTimeField, F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from runtime import (
    Attempt,
    Backend,
    BackendError,
    EdgeTaken,
    Entry,
    FencedOut,
    HostFailed,
    ModelCall,
    ModelReply,
    OutputRejected,
    Pack,
    PackforgeError,
    Registry,
    RunOptions,
    RunRecord,
    RunResult,
    RunStateError,
    Step,
    Tier,
    Tool,
    ToolCall,
    Trace,
    open_backend,
    resume_run,
    run_pack,
)
from studio import host_tools, leases, packs, sqlwrites
from studio.deployments import events, settled
from studio.deployments.models import Deployment, ServedRun
from studio.deployments.recovery import hand_over, lease, send, watcher, web_watcher
from studio.deployments.settings import setting
from studio.endpoints.execute import spec_for
from studio.endpoints.models import Endpoint
from studio.evals.limits import endpoint_tiers
from studio.evals.models import JournalEntry, RunCheckpoint
from studio.evals.store import JOURNAL, EvalCaseStore, insert_checkpoint
from studio.leases import LeaseLost, LeaseWatcher
from studio.redaction import stored

log = logging.getLogger("packforge.studio.deployments")

S = ServedRun.Status
OWN_TIER = "pack"  # the one tier of a deployment without endpoints: the pack's own model


# -- what a worker opens once per deployment version and tiers ------------------------


@dataclass
class Runner:
    pack: Pack
    tools: Registry | None
    tiers: list[Tier]
    users: int = 0  # walks using it now (a web process walks several at once)
    evicted: bool = False

    def close(self) -> None:
        for tier in self.tiers:
            tier.backend.close()


_cache_lock = threading.RLock()
_runners: OrderedDict[tuple[Any, ...], Runner] = OrderedDict()
_pack_dirs: dict[tuple[int, str], Path] = {}
_pack_root: list[Path] = []
_RUNNERS_KEPT = 8


def _pack_dir(deployment: Deployment, sha: str) -> Path:
    key = (deployment.project_id, sha)
    if key not in _pack_dirs:
        if not _pack_root:
            root = Path(tempfile.mkdtemp(prefix="pf-serve-packs-"))
            atexit.register(shutil.rmtree, root, True)
            _pack_root.append(root)
        folder = _pack_root[0] / f"{deployment.project_id}-{sha}"
        _, files = packs.read_version(deployment.project, sha)
        shutil.rmtree(folder, ignore_errors=True)
        packs.materialize(files, folder)
        _pack_dirs[key] = folder
    return _pack_dirs[key]


def _endpoints(deployment: Deployment) -> list[Endpoint]:
    if not deployment.tiers:
        return []
    found = {e.pk: e for e in Endpoint.objects.filter(pk__in=deployment.tiers)}
    missing = [pk for pk in deployment.tiers if pk not in found]
    if missing:
        raise packs.PackUnrunnable([f"the deployment's tier endpoint {missing[0]} was deleted; change its tiers"])
    return [found[pk] for pk in deployment.tiers]


@contextmanager
def using_runner(deployment: Deployment, version: str) -> Iterator[Runner]:
    """The runner of `deployment` at `version` for one walk. One that leaves the cache
    meanwhile (more than _RUNNERS_KEPT others opened) is closed when its last walk ends,
    not under a walk."""
    runner = runner_for(deployment, version)
    try:
        yield runner
    finally:
        with _cache_lock:
            runner.users -= 1
            if runner.evicted and runner.users == 0:
                runner.close()


def runner_for(deployment: Deployment, version: str) -> Runner:
    """The cached runner (counted as used: `using_runner` gives it back)."""
    endpoints = _endpoints(deployment)
    key = (deployment.project_id, version, tuple((e.pk, e.name, spec_for(e), e.concurrency) for e in endpoints))
    with _cache_lock:
        runner = _runners.get(key)
        if runner is not None:
            _runners.move_to_end(key)
            runner.users += 1
            return runner
        got = packs.load_folder(_pack_dir(deployment, version), version, own_model=not endpoints).ensure_runnable()
        pack = got.pack
        tiers: list[Tier] = []
        if not endpoints:
            tiers.append(Tier(OWN_TIER, open_backend(pack.model or "", base_dir=pack.root, default=pack.model)))
        tiers.extend(endpoint_tiers(endpoints, base_dir=pack.root, default=pack.model))
        runner = Runner(pack, got.tools, tiers, users=1)
        _runners[key] = runner
        while len(_runners) > _RUNNERS_KEPT:
            _, old = _runners.popitem(last=False)
            old.evicted = True
            if old.users == 0:
                old.close()
        return runner


def forget_runners() -> None:
    """Close and drop this process's opened deployments (tests; a worker keeps them)."""
    with _cache_lock:
        for runner in _runners.values():
            runner.evicted = True
            if runner.users == 0:
                runner.close()
        _runners.clear()
        _pack_dirs.clear()
        host_tools.forget()


# -- the run's events -----------------------------------------------------------------


class Recorder:
    """One run's events (an events.Batch): held until the transaction of the next
    checkpoint write, which writes them with it (ServedStore); `now` ones (a tool about
    to be called, an escalation) are written at once, in a transaction of their own that
    checks the fence. Knows the node the walk is at (for model and tool events)."""

    def __init__(self, run_pk: int) -> None:
        self.run_pk = run_pk
        self.node: str | None = None
        self.step = 0
        self.batch = events.Batch(run_pk)
        self.store: ServedStore | None = None

    def emit(self, kind: str, data: dict[str, Any], *, now: bool = False) -> None:
        self.batch.add(kind, data)
        if now and self.store is not None and self.store.fence is not None:
            self.store.write_events()

    def node_start(self, node: str, step: int) -> None:
        self.node, self.step = node, step
        self.emit("node.start", {"node": node, "step": step})


class EventBackend:
    """A tier's backend, writing a model.call event for each call (after it)."""

    def __init__(self, inner: Backend, tier: str, recorder: Recorder) -> None:
        self.inner, self.tier, self.recorder = inner, tier, recorder
        self.spec = inner.spec

    def complete(self, call: ModelCall) -> ModelReply:
        started = time.monotonic()
        data: dict[str, Any] = {
            "node": call.node,
            "attempt": call.attempt,
            "tier": self.tier,
            "request_id": call.request_id,
            "purpose": call.purpose,
        }
        try:
            reply = self.inner.complete(call)
        except BackendError as exc:
            self.recorder.emit(
                "model.call", {**data, "ok": False, "error": str(exc), "latency_s": time.monotonic() - started}
            )
            raise
        self.recorder.emit(
            "model.call",
            {
                **data,
                "ok": True,
                "latency_s": round(reply.latency_s or time.monotonic() - started, 4),
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "finish_reason": reply.finish_reason,
            },
        )
        return reply

    def close(self) -> None:  # the runner owns the inner backend
        pass


def _tool_with_events(name: str, fn: Tool, recorder: Recorder) -> Tool:
    def emit(kind: str, data: dict[str, Any], *, now: bool = False) -> None:
        # The database failing here is the host's trouble, not the tool's: HostFailed
        # stops the run unjournaled (run_served releases it for another delivery)
        # instead of failing the node and taking its on_fail.
        try:
            recorder.emit(kind, data, now=now)
        except (OperationalError, InterfaceError) as exc:
            raise HostFailed(f"writing the {kind} event failed: {exc}") from exc

    def call(**kwargs: Any) -> Any:
        emit("tool.call", {"node": recorder.node, "tool": name, "args": kwargs}, now=True)
        started = time.monotonic()
        try:
            result = fn(**kwargs)
        except Exception as exc:
            emit(
                "tool.result",
                {"node": recorder.node, "tool": name, "ok": False, "error": f"{type(exc).__name__}: {exc}"},
            )
            raise
        emit(
            "tool.result",
            {
                "node": recorder.node,
                "tool": name,
                "ok": True,
                "result": result,
                "latency_s": round(time.monotonic() - started, 4),
            },
        )
        return result

    return call


class ServedStore(EvalCaseStore):
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
        self.trace = Trace(run_id=run_id, pack=pack.name)
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
        self.trace = Trace(run_id=self.trace.run_id, pack=self.trace.pack)
        at, step = self.entry, 1
        for e in entries:
            note(self.trace, e.kind, e.node, e.step, e.payload)
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
            note(self.trace, kind, node, step, payload)
            return
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
        note(self.trace, kind, node, step, payload)


def note(trace: Trace, kind: str, node: str, step: int, payload: dict[str, Any]) -> None:
    """Add journal entry (kind, node, step, payload) to `trace`, as the walk did."""
    if kind == "step":
        edge = payload.get("edge")
        fields = {k: v for k, v in payload.items() if k not in ("attempts", "edge", "budget_left")}
        trace.steps.append(Step(**fields, edge=EdgeTaken(**edge) if edge else None))
        trace.attempts.extend(Attempt(**a) for a in payload.get("attempts", []))
    elif kind in ("escalate", "wait"):
        trace.attempts.extend(Attempt(**a) for a in payload.get("attempts", []))
    elif kind == "tool":
        trace.tool_calls.append(
            ToolCall(node, step, payload["tool"], payload["args"], payload["result"], payload["latency_s"])
        )


def journal_trace(run: ServedRun) -> dict[str, Any] | None:
    """The trace of run `run` as its journal has it (a running run's row has the trace
    only once it settles); None when nothing is journaled."""
    cid = run.checkpoint_id
    pack = RunCheckpoint.objects.filter(run_id=cid).values_list("pack", flat=True).first()
    if pack is None:
        return None
    trace = Trace(run_id=cid, pack=pack)
    for kind, node, step, payload in JournalEntry.objects.filter(run_id=cid).values_list(
        "kind", "node", "step", "payload"
    ):
        note(trace, kind, node, step, payload)
    return stored(trace.to_dict(include_rejected_text=True))


# -- one delivery ---------------------------------------------------------------------


def _path(trace: Trace) -> str:
    return " " + " ".join(trace.path) + " " if trace.path else ""


def _close(pk: int, token: str, status: str, error: str, **fields: Any) -> bool:
    return leases.close(ServedRun, pk, token, status=status, error=stored(error), finished_at=timezone.now(), **fields)


def _last_events(recorder: Recorder, kind: str, data: dict[str, Any]) -> None:
    """The run's last event after the pending ones, in the caller's (closing) transaction."""
    recorder.emit(kind, data)
    recorder.batch.write()  # nothing is written after it: no bookkeeping to keep
    settled.announce(recorder.run_pk)


def _end(pk: int, token: str, status: str, error: str, recorder: Recorder | None = None, **fields: Any) -> str | None:
    """Close the run as `status` with its run.end event and webhook (one transaction);
    the events the walk emitted and had not written yet go first."""
    from studio.deployments.webhooks import send_on_end

    with transaction.atomic():
        if not _close(pk, token, status, error, **fields):
            return None
        _last_events(recorder or Recorder(pk), "run.end", {"status": status, "error": error})
        send_on_end(pk)
    return status


class _Counter:
    """Counts the statements a delivery sends (connection.execute_wrapper)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        self.count += 1
        return execute(sql, params, many, context)


def run_served(pk: int) -> str | None:
    """Run served run `pk` to its end (or to a wait); the status written, or None when this
    delivery had nothing to do or lost the run. Safe to deliver any number of times.
    Logs (INFO) the statements it sent and the CPU this process spent on it
    (benchmarks/serving.py reads the line)."""
    return _counted(pk, lambda: _claim_and_walk(pk), "worker")


def _claim_and_walk(pk: int) -> str | None:
    token = leases.new_token()
    now = timezone.now()
    if not leases.claim(
        ServedRun, pk, token, lease(), started_at=Coalesce(F("started_at"), Value(now, output_field=DateTimeField()))
    ):
        log.info("served run %s is gone, final, waiting, or held by another delivery; nothing to do", pk)
        return None
    return _run_served(pk, token, watcher())


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
    try:
        return _counted(run.pk, lambda: _run_served(run.pk, token, web_watcher(), seconds, run), "web")
    except (OperationalError, InterfaceError, HostFailed) as exc:
        log.warning("served run %s: walking it here failed (%s); sending it to the workers", run.pk, exc)
        try:
            send([run.pk])
        except Exception as again:  # the broker away too: a sweep sends it once its lease lapses
            log.warning("served run %s could not be sent either (%s); a sweep will", run.pk, again)
        return None


def _counted(pk: int, walk: Callable[[], str | None], where: str) -> str | None:
    cpu = time.process_time()
    counter = _Counter()
    with connection.execute_wrapper(counter):
        status = walk()
    if status is not None:
        spent = 1000 * (time.process_time() - cpu)
        log.info("served run %s %s: %d statements, %.2f ms CPU (%s)", pk, status, counter.count, spent, where)
    return status


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


def _run_served(
    pk: int, token: str, watch: LeaseWatcher, seconds: float | None = None, row: ServedRun | None = None
) -> str | None:
    run = row if row is not None else ServedRun.objects.select_related("deployment").get(pk=pk)
    limit = setting("PACKFORGE_SERVE_MAX_ATTEMPTS")
    if run.cancel_requested:
        return _end(pk, token, S.CANCELLED, "cancelled")
    if run.attempts > limit:
        reason = (
            f"killed its worker {run.attempts - 1} times: {run.attempts - 1} deliveries started this run and none "
            f"finished it (PACKFORGE_SERVE_MAX_ATTEMPTS={limit}); not tried again"
        )
        log.warning("served run %s: %s", pk, reason)
        return _end(pk, token, S.FAILED, reason)
    held = watch.register(pk, token)
    deadline = _Deadline(seconds, held.cancel) if seconds is not None else None
    store: ServedStore | None = None
    recorder = Recorder(pk)
    try:
        with using_runner(run.deployment, run.version) as runner:
            store = ServedStore(run.checkpoint_id, runner.pack, recorder)
            result = _walk(run, runner, store, recorder, token, held.cancel)
        if held.lost:
            raise LeaseLost(str(pk))
        if deadline is not None and deadline.passed and result.status == S.CANCELLED:
            # The wait ended first; the cancelled walk wrote no outcome (the checkpoint
            # holds its final status back): a worker resumes it from the checkpoint.
            log.info("served run %s did not settle within its wait; handed to the workers", pk)
            hand_over(pk, token)
            return None
        return _settle(run, token, result, store, recorder)
    except (FencedOut, LeaseLost) as exc:
        log.warning("served run %s was taken over by another delivery; dropping this one: %s", pk, exc)
        return None
    except (OperationalError, InterfaceError, HostFailed):
        leases.release(ServedRun, pk, token)
        raise
    except OutputRejected as exc:  # a person's answer the runtime refused: back to waiting
        reasons = "; ".join(exc.reasons or [exc.reason])
        with transaction.atomic():
            refused = stored(f"the answer was refused: {reasons}")
            if not leases.close(ServedRun, pk, token, status=S.WAITING, error=refused, answer=None, answer_node=""):
                return None
            _last_events(
                recorder, "waiting", {"node": run.waiting_at, "reason": run.waiting_reason, "refused": reasons}
            )
            _signal_waiting(pk)
        return S.WAITING
    except (packs.PackUnrunnable, PackforgeError) as exc:
        return _end(pk, token, S.FAILED, str(exc), recorder, trace=_stopped(store, str(exc)))
    except Exception as exc:  # the row must end whatever happened; the log has the rest
        log.exception("served run %s crashed", pk)
        error = f"internal error: {type(exc).__name__}: {exc}"
        return _end(pk, token, S.FAILED, error, recorder, trace=_stopped(store, error))
    finally:
        if deadline is not None:
            deadline.stop()
        watch.unregister(pk)


def _walk(
    run: ServedRun, runner: Runner, store: ServedStore, recorder: Recorder, token: str, cancel: threading.Event
) -> RunResult:
    tiers = [Tier(t.name, EventBackend(t.backend, t.name, recorder)) for t in runner.tiers]
    # Each ToolDef keeps its declaration (schemas, side effects, state); only its function is wrapped.
    tools = {
        name: replace(t, function=_tool_with_events(name, t.function, recorder))
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
        "options": RunOptions(on_escalate=on_escalate),
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
        "tier": result.settled_by or "",
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
