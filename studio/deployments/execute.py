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
- **One outcome**: the checkpoint's final status and the run's row are written in one
  transaction, guarded by the lease token; the run's last events (waiting, run.end)
  in the same transaction.
- **Tiers**: one runtime Tier per deployment endpoint, named by the endpoint, each call
  holding a slot of that endpoint's global cap (studio.evals.limits, the key evals use,
  so served runs and evals share one cap per endpoint). A deployment without tiers runs
  on the pack's own (scripted) model as its one tier, "pack".
- **Events** (RunEvent): run.start, node.start (when the walk moves to a node),
  model.call (each call, after it), attempt.rejected (each refused attempt, as journaled),
  escalated (the runtime's on_escalate), tool.call / tool.result (around each real tool
  call; a replayed tool result is not called, so has none), waiting, run.end."""

from __future__ import annotations

import atexit
import logging
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from django.db import InterfaceError, OperationalError, transaction
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
from studio import host_tools, leases, packs
from studio.deployments import events
from studio.deployments.models import Deployment, ServedRun
from studio.deployments.recovery import lease, watcher
from studio.deployments.settings import setting
from studio.endpoints.execute import open_endpoint, spec_for
from studio.endpoints.models import Endpoint
from studio.evals.limits import CappedBackend, slots
from studio.evals.store import EvalCaseStore
from studio.redaction import stored

log = logging.getLogger("packforge.studio.deployments")

S = ServedRun.Status
OWN_TIER = "pack"  # the one tier of a deployment without endpoints: the pack's own model


class LeaseLost(Exception):
    """The run's lease passed to another delivery while this one walked it."""


# -- what a worker opens once per deployment version and tiers ------------------------


@dataclass
class Runner:
    pack: Pack
    tools: Registry | None
    tiers: list[Tier]

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
    found = {e.pk: e for e in Endpoint.objects.filter(pk__in=deployment.tiers)}
    missing = [pk for pk in deployment.tiers if pk not in found]
    if missing:
        raise packs.PackUnrunnable([f"the deployment's tier endpoint {missing[0]} was deleted; change its tiers"])
    return [found[pk] for pk in deployment.tiers]


def runner_for(deployment: Deployment, version: str) -> Runner:
    endpoints = _endpoints(deployment)
    key = (deployment.project_id, version, tuple((e.pk, e.name, spec_for(e), e.concurrency) for e in endpoints))
    with _cache_lock:
        runner = _runners.get(key)
        if runner is not None:
            _runners.move_to_end(key)
            return runner
        got = packs.load_folder(_pack_dir(deployment, version), version, own_model=not endpoints).ensure_runnable()
        pack = got.pack
        tiers: list[Tier] = []
        if not endpoints:
            tiers.append(Tier(OWN_TIER, open_backend(pack.model or "", base_dir=pack.root, default=pack.model)))
        for e in endpoints:
            inner = open_endpoint(e, base_dir=pack.root, default=pack.model)
            tiers.append(Tier(e.name, CappedBackend(inner, slots(), f"endpoint-{e.pk}", e.concurrency)))
        runner = Runner(pack, got.tools, tiers)
        _runners[key] = runner
        while len(_runners) > _RUNNERS_KEPT:
            _, old = _runners.popitem(last=False)
            old.close()
        return runner


def forget_runners() -> None:
    """Close and drop this process's opened deployments (tests; a worker keeps them)."""
    with _cache_lock:
        for runner in _runners.values():
            runner.close()
        _runners.clear()
        _pack_dirs.clear()
        host_tools.forget()


# -- the run's events -----------------------------------------------------------------


class Recorder:
    """Writes one run's events; knows the node the walk is at (for model and tool events)."""

    def __init__(self, run_pk: int) -> None:
        self.run_pk = run_pk
        self.node: str | None = None
        self.step = 0

    def emit(self, kind: str, data: dict[str, Any]) -> None:
        events.record(self.run_pk, kind, data)

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
    def call(**kwargs: Any) -> Any:
        recorder.emit("tool.call", {"node": recorder.node, "tool": name, "args": kwargs})
        started = time.monotonic()
        try:
            result = fn(**kwargs)
        except Exception as exc:
            recorder.emit(
                "tool.result",
                {"node": recorder.node, "tool": name, "ok": False, "error": f"{type(exc).__name__}: {exc}"},
            )
            raise
        recorder.emit(
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
    row's outcome is written in the same transaction) that also rebuilds the run's trace
    as steps are journaled (a resumed run's from the journal it took over), writes an
    attempt.rejected event for each refused attempt journaled, and knows the node a
    taken-over run continues at."""

    def __init__(self, run_id: str, pack: Pack, recorder: Recorder) -> None:
        super().__init__()
        self.trace = Trace(run_id=run_id, pack=pack.name)
        self.entry = pack.entry
        self.recorder = recorder
        self.resume_at: tuple[str, int] = (pack.entry, 1)
        self.announce: dict[str, Any] | None = None  # run.start data to write on take-over

    def take_over(self, run_id: str) -> tuple[int, RunRecord, list[Entry]]:
        fence, record, entries = super().take_over(run_id)
        self.trace = Trace(run_id=self.trace.run_id, pack=self.trace.pack)
        at, step = self.entry, 1
        for e in entries:
            self._note(e.kind, e.node, e.step, e.payload)
            if e.kind == "step":
                edge = e.payload.get("edge")
                at, step = (edge["target"] if edge else e.node), e.step + 1
            elif e.kind in ("wait", "escalate"):
                at, step = e.node, e.step
        self.resume_at = (at, step)
        if self.announce is not None:
            self.recorder.emit("run.start", {**self.announce, "replayed_steps": len(self.trace.steps)})
            self.recorder.node_start(at, step)
        return fence, record, entries

    def append(self, run_id: str, fence: int, kind: str, node: str, step: int, payload: dict[str, Any]) -> None:
        super().append(run_id, fence, kind, node, step, payload)
        self._note(kind, node, step, payload)
        for a in payload.get("attempts", []):
            if not a.get("ok") and a.get("stage") != "reasoning":
                self.recorder.emit(
                    "attempt.rejected",
                    {k: a.get(k) for k in ("node", "step", "attempt", "tier", "stage", "category", "reason")},
                )

    def _note(self, kind: str, node: str, step: int, payload: dict[str, Any]) -> None:
        if kind == "step":
            edge = payload.get("edge")
            fields = {k: v for k, v in payload.items() if k not in ("attempts", "edge", "budget_left")}
            self.trace.steps.append(Step(**fields, edge=EdgeTaken(**edge) if edge else None))
            self.trace.attempts.extend(Attempt(**a) for a in payload.get("attempts", []))
        elif kind in ("escalate", "wait"):
            self.trace.attempts.extend(Attempt(**a) for a in payload.get("attempts", []))
        elif kind == "tool":
            self.trace.tool_calls.append(
                ToolCall(node, step, payload["tool"], payload["args"], payload["result"], payload["latency_s"])
            )


# -- one delivery ---------------------------------------------------------------------


def _path(trace: Trace) -> str:
    return " " + " ".join(trace.path) + " " if trace.path else ""


def _close(pk: int, token: str, status: str, error: str, **fields: Any) -> bool:
    return leases.close(ServedRun, pk, token, status=status, error=stored(error), finished_at=timezone.now(), **fields)


def _end(pk: int, token: str, status: str, error: str, **fields: Any) -> str | None:
    """Close the run as `status` with its run.end event and webhook (one transaction)."""
    from studio.deployments.webhooks import send_on_end

    with transaction.atomic():
        if not _close(pk, token, status, error, **fields):
            return None
        events.record(pk, "run.end", {"status": status, "error": error})
        send_on_end(pk)
    return status


def run_served(pk: int) -> str | None:
    """Run served run `pk` to its end (or to a wait); the status written, or None when this
    delivery had nothing to do or lost the run. Safe to deliver any number of times."""
    token = leases.new_token()
    now = timezone.now()
    if not leases.claim(
        ServedRun, pk, token, lease(), started_at=Coalesce(F("started_at"), Value(now, output_field=DateTimeField()))
    ):
        log.info("served run %s is gone, final, waiting, or held by another delivery; nothing to do", pk)
        return None
    run = ServedRun.objects.select_related("deployment__project").get(pk=pk)
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
    held = watcher().register(pk, token)
    store: ServedStore | None = None
    try:
        runner = runner_for(run.deployment, run.version)
        recorder = Recorder(pk)
        store = ServedStore(run.checkpoint_id, runner.pack, recorder)
        result = _walk(run, runner, store, recorder, token, held.cancel)
        if held.lost:
            raise LeaseLost(str(pk))
        return _settle(run, token, result, store)
    except (FencedOut, LeaseLost) as exc:
        log.warning("served run %s was taken over by another delivery; dropping this one: %s", pk, exc)
        return None
    except (OperationalError, InterfaceError):
        leases.release(ServedRun, pk, token)
        raise
    except OutputRejected as exc:  # a person's answer the runtime refused: back to waiting
        reasons = "; ".join(exc.reasons or [exc.reason])
        with transaction.atomic():
            refused = stored(f"the answer was refused: {reasons}")
            if not leases.close(ServedRun, pk, token, status=S.WAITING, error=refused, answer=None, answer_node=""):
                return None
            events.record(pk, "waiting", {"node": run.waiting_at, "reason": run.waiting_reason, "refused": reasons})
            _signal_waiting(pk)
        return S.WAITING
    except (packs.PackUnrunnable, PackforgeError) as exc:
        return _end(pk, token, S.FAILED, str(exc), trace=_stopped(store, str(exc)))
    except Exception as exc:  # the row must end whatever happened; the log has the rest
        log.exception("served run %s crashed", pk)
        error = f"internal error: {type(exc).__name__}: {exc}"
        return _end(pk, token, S.FAILED, error, trace=_stopped(store, error))
    finally:
        watcher().unregister(pk)


def _walk(
    run: ServedRun, runner: Runner, store: ServedStore, recorder: Recorder, token: str, cancel: threading.Event
) -> RunResult:
    pk = run.pk
    tiers = [Tier(t.name, EventBackend(t.backend, t.name, recorder)) for t in runner.tiers]
    # Each ToolDef keeps its declaration (schemas, side effects, state); only its function is wrapped.
    tools = {
        name: replace(t, function=_tool_with_events(name, t.function, recorder))
        for name, t in (runner.tools or Registry()).items()
    }
    live = store

    def on_step(step: Step) -> None:
        ServedRun.objects.filter(pk=pk, lease_owner=token).update(
            trace=stored(live.trace.to_dict(include_rejected_text=True)), path=_path(live.trace)
        )
        if step.status != "end" and step.edge is not None:
            recorder.node_start(step.edge.target, step.step + 1)

    def on_escalate(escalation: dict[str, Any]) -> None:
        recorder.emit("escalated", dict(escalation))

    common: dict[str, Any] = {
        "backend": tiers[0].backend,
        "tiers": tiers,
        "tools": tools,
        "store": store,
        "options": RunOptions(on_step=on_step, on_escalate=on_escalate),
        "cancel": cancel,
    }
    answers = {run.answer_node: run.answer} if run.answer_node and run.answer is not None else None
    if answers:
        common.update(answers=answers, answered_by=run.answered_by or None)
    started = {"deployment": run.deployment.name, "version": run.version, "tiers": [t.name for t in tiers]}
    cid = run.checkpoint_id
    # Only a claim can begin a checkpoint: a first claim finds none (an answered run has one).
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


def _settle(run: ServedRun, token: str, result: RunResult, store: ServedStore) -> str | None:
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
            if not leases.close(ServedRun, run.pk, token, status=S.WAITING, error="", **fields):
                raise LeaseLost(str(run.pk))
            events.record(
                run.pk,
                "waiting",
                {"node": result.waiting_at, "reason": result.waiting_reason, "question": question},
            )
            _signal_waiting(run.pk)
            return S.WAITING
        error = trace.error or ""
        output = result.output if status == "done" else None
        fields.update(output=output, waiting_at="", waiting_reason="", question="", state=None)
        if not _close(run.pk, token, status, error, **fields):
            raise LeaseLost(str(run.pk))  # rolls the checkpoint's final status back too
        events.record(
            run.pk,
            "run.end",
            {"status": status, "output": output, "error": error, "tier": fields["tier"]},
        )
        send_on_end(run.pk)
    return status


def _signal_waiting(pk: int) -> None:
    from studio.deployments.signals import run_waiting

    def send() -> None:
        row = ServedRun.objects.select_related("deployment__project").get(pk=pk)
        run_waiting.send(sender=ServedRun, run=row)

    transaction.on_commit(send)


def _stopped(store: ServedStore | None, error: str) -> dict[str, Any] | None:
    if store is None:
        return None
    store.trace.status, store.trace.error = "failed", error
    return stored(store.trace.to_dict(include_rejected_text=True))
