"""The studio's calls into the runtime for try-it runs.

`prepare` checks, in the web process, everything that can be known before a run is
queued (studio.packs: the version exists, the pack at that version loads, its tools
can be served, there is a model to ask); `run_try` is what the worker does: load the
pack version into a temporary folder, open the model, walk the pack with an `on_step`
hook that writes the trace so far to the TryRun row as each step is checkpointed, then
store the run's status, output, error and trace (the runtime's trace dict, as evals
store it; studio.redaction says who reads rejected text). A run is held under a lease
and checkpointed in the database, so a run whose worker died resumes (`run_try`).

Tools: a pack that names tools runs only when the studio has a tool registry
(`PACKFORGE_TOOLS=MODULE:REGISTRY` or `path/to/tools.py:REGISTRY`, the CLI's `--tools`
syntax); the pack is then loaded against that registry, so it reaches only the tools
the host registered (invariant 5)."""

from __future__ import annotations

import json
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.db import InterfaceError, OperationalError, transaction
from django.utils import timezone

from runtime import (
    Attempt,
    EdgeTaken,
    Entry,
    FencedOut,
    Pack,
    PackforgeError,
    RunOptions,
    RunRecord,
    RunStateError,
    Step,
    ToolCall,
    Trace,
    open_backend,
    resume_run,
    run_pack,
)
from studio import leases, packs
from studio.endpoints.execute import spec_for
from studio.endpoints.models import Endpoint
from studio.errors import Refused
from studio.evals.settings import setting
from studio.evals.store import EvalCaseStore
from studio.leases import LeaseLost
from studio.projects.models import Project
from studio.redaction import stored
from studio.runs import recovery
from studio.runs.models import TryRun

log = logging.getLogger("packforge.studio.runs")


class TryRefused(Refused):
    """The run cannot start; the message says why and what to do."""


@dataclass
class Prepared:
    sha: str
    pack: Pack
    problem: str | None  # why it cannot be tried (tools, no model), or None
    case_keyed: bool = False  # the pack's own model is a script that answers per evalset case id


def scripted_by_case(pack: Pack) -> bool:
    """Whether the pack's own model is a scripted one (`fake:FILE`) whose answers are
    keyed by evalset case id: it has no answer for any other input (the run fails, saying
    so), so a try-it run is worth starting from an evalset case (see `case_for_input`)."""
    spec = pack.model or ""
    if not spec.startswith("fake:"):
        return False
    root = pack.root.resolve()
    script = (root / spec.removeprefix("fake:")).resolve()
    if not script.is_relative_to(root):  # the runtime refuses it too; nothing to read here
        return False
    try:
        data = json.loads(script.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and bool(data.get("cases"))


def case_for_input(pack: Pack, input: object) -> str | None:
    """The id of the evalset case whose input this is, exactly; the run is walked as that
    case, so a scripted model keyed by case id answers as it does in an eval."""
    return next((case.id for case in pack.cases if dict(case.input) == input), None)


def prepare(project: Project, version: str | None, endpoint: Endpoint | None) -> Prepared:
    """Resolve `version` and load the pack at it; `problem` says why it cannot be tried.
    Raises TryRefused when the version does not exist or the pack does not load."""
    try:
        with packs.loaded(project, version, own_model=endpoint is None) as got:
            return Prepared(
                got.sha,
                got.pack,
                "; ".join(got.problems) or None,
                case_keyed=endpoint is None and scripted_by_case(got.pack),
            )
    except packs.PackUnrunnable as exc:
        raise TryRefused(str(exc)) from None


def first_case_input(pack: Pack) -> dict[str, Any] | None:
    return dict(pack.cases[0].input) if pack.cases else None


def new_try_run(
    project: Project, *, user: User, version: str | None, endpoint: Endpoint | None, input: object
) -> TryRun:
    """Check and save a queued TryRun; the caller enqueues it (on commit)."""
    if not isinstance(input, dict):
        raise TryRefused('the input must be a JSON object, e.g. {"ticket": "..."}')
    prepared = prepare(project, version, endpoint)
    if prepared.problem:
        raise TryRefused(prepared.problem)
    model_spec = spec_for(endpoint) if endpoint is not None else (prepared.pack.model or "")
    return TryRun.objects.create(
        project=project, version=prepared.sha, endpoint=endpoint, input=input, model_spec=model_spec, created_by=user
    )


# -- the worker side -------------------------------------------------------------------


class _Journal(EvalCaseStore):
    """The run's database checkpoint store (studio.evals.store: fenced writes; the final
    status held back until the row's outcome is written in the same transaction), which
    also rebuilds the run's trace as steps are journaled, for the on_step hook to publish
    while the run goes on (the runtime's trace format). A resumed run's trace starts from
    the journal it took over."""

    def __init__(self, run_id: str, pack: str) -> None:
        super().__init__()
        self.trace = Trace(run_id=run_id, pack=pack)

    def take_over(self, run_id: str) -> tuple[int, RunRecord, list[Entry]]:
        fence, record, entries = super().take_over(run_id)
        self.trace = Trace(run_id=self.trace.run_id, pack=self.trace.pack)
        for e in entries:
            self._note(e.kind, e.node, e.step, e.payload)
        return fence, record, entries

    def append(self, run_id: str, fence: int, kind: str, node: str, step: int, payload: dict[str, Any]) -> None:
        super().append(run_id, fence, kind, node, step, payload)
        self._note(kind, node, step, payload)

    def _note(self, kind: str, node: str, step: int, payload: dict[str, Any]) -> None:
        if kind == "step":
            edge = payload.get("edge")
            fields = {k: v for k, v in payload.items() if k not in ("attempts", "edge", "budget_left")}
            self.trace.steps.append(Step(**fields, edge=EdgeTaken(**edge) if edge else None))
            self.trace.attempts.extend(Attempt(**a) for a in payload.get("attempts", []))
        elif kind == "tool":
            self.trace.tool_calls.append(
                ToolCall(node, step, payload["tool"], payload["args"], payload["result"], payload["latency_s"])
            )


_ATTEMPT_KEYS = (
    "attempt",
    "stage",
    "ok",
    "hidden",
    "category",
    "reason",
    "text",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "latency_s",
    "ttft_s",
    "cost_usd",
    "request_id",  # the X-Request-ID the call sent (run.node.attempt), shown on the run page
)


def trace_steps(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """A trace dict (as studio.redaction.visible_trace shows it), one row per step: node,
    status, writes, edge, every attempt (with its rejection category and reason, tokens,
    latency) and tool calls. Attempts of a step that never committed (the run stopped
    inside it) are a last row with status `stopped`."""
    attempts: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for a in trace.get("attempts") or []:
        attempts.setdefault((a.get("node"), a.get("step")), []).append({k: a[k] for k in _ATTEMPT_KEYS if k in a})
    tools: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for c in trace.get("tool_calls") or []:
        tools.setdefault((c.get("node"), c.get("step")), []).append(
            {k: c.get(k) for k in ("tool", "args", "result", "latency_s")}
        )
    rows = []
    for s in trace.get("steps") or []:
        key = (s.get("node"), s.get("step"))
        edge = s.get("edge")
        row = {k: s.get(k) for k in ("step", "node", "kind", "status", "writes", "attempt", "reason", "prompt")}
        row["edge"] = {"kind": edge["kind"], "target": edge["target"]} if edge else None
        rows.append(_with_totals(row, attempts.pop(key, []), tools.pop(key, [])))
    for (node, step), rest in attempts.items():
        row = {"step": step, "node": node, "kind": "", "status": "stopped", "writes": {}, "edge": None}
        rows.append(_with_totals(row, rest, tools.pop((node, step), [])))
    return rows


def _with_totals(row: dict[str, Any], attempts: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        **row,
        "attempts": attempts,
        "tool_calls": tools,
        "prompt_tokens": sum(a.get("prompt_tokens") or 0 for a in attempts),
        "completion_tokens": sum(a.get("completion_tokens") or 0 for a in attempts),
        "latency_s": round(sum(a.get("latency_s") or 0.0 for a in attempts), 4),
        "cost_usd": sum(a.get("cost_usd") or 0.0 for a in attempts),
    }


def _finish(
    run_id: int, token: str, status: str, *, output: Any = None, error: str = "", trace: Trace | None = None
) -> bool:
    """Write the run's end, if this delivery still holds its lease."""
    fields: dict[str, Any] = {"status": status, "output": output, "error": error, "finished_at": timezone.now()}
    if trace is not None:
        # Rejected generations are kept for authors; studio.redaction decides who reads them.
        fields["trace"] = trace.to_dict(include_rejected_text=True)
    return leases.close(TryRun, run_id, token, **stored(fields))


def run_try(run_id: int) -> str | None:
    """Run a queued TryRun to its end; returns the final status written (None: this
    delivery had nothing to do, or lost the run to another one).

    Safe to deliver any number of times (studio.leases): a delivery claims the run with
    a lease, or does nothing (the run is final, or another delivery holds it). The run
    checkpoints into the database (`_Journal`); a run claimed again after its worker
    died resumes from its checkpoint (runtime.resume_run): finished steps and journaled
    tool results are replayed, never called again; taking it over bumps the fencing
    token, so a stalled former holder cannot write. A run claimed more than
    PACKFORGE_RUN_MAX_ATTEMPTS times is closed as failed ("poisoned"), not tried again."""
    token = leases.new_token()
    if not leases.claim(TryRun, run_id, token, recovery.lease()):
        log.info("try run %s is gone, final, or held by another delivery; nothing to do", run_id)
        return None
    run = TryRun.objects.select_related("project", "endpoint").get(pk=run_id)
    limit = setting("PACKFORGE_RUN_MAX_ATTEMPTS")
    if run.attempts > limit:
        reason = (
            f"killed its worker {run.attempts - 1} times: {run.attempts - 1} deliveries started this run and none "
            f"finished it (PACKFORGE_RUN_MAX_ATTEMPTS={limit}); not tried again"
        )
        log.warning("try run %s: %s", run_id, reason)
        return TryRun.Status.FAILED if _finish(run_id, token, TryRun.Status.FAILED, error=reason) else None
    held = recovery.watcher().register(run_id, token)
    journal: _Journal | None = None
    try:
        with tempfile.TemporaryDirectory(prefix="pf-try-") as tmp:
            # The spec recorded when the run was started (an endpoint edited or deleted
            # since does not change what this run asks), else the pack's own model.
            got = packs.load_version(run.project, run.version, Path(tmp), own_model=not run.model_spec)
            pack, tools = got.ensure_runnable().pack, got.tools
            spec = run.model_spec or pack.model or ""
            backend = open_backend(spec, base_dir=pack.root, default=pack.model)
            journal = _Journal(f"try-{run_id}", pack.name)
            live = journal

            def on_step(step: Step) -> None:
                TryRun.objects.filter(pk=run_id, lease_owner=token).update(
                    trace=stored(live.trace.to_dict(include_rejected_text=True))
                )

            common: dict[str, Any] = {
                "backend": backend,
                "tools": tools,
                "store": journal,
                "options": RunOptions(on_step=on_step),
                "cancel": held.cancel,
            }
            try:
                # Only a claim can begin a checkpoint: the first one finds none.
                if run.attempts > 1 and journal.exists(f"try-{run_id}"):
                    result = resume_run(pack, f"try-{run_id}", **common)
                else:
                    try:
                        # The pack's own model (a script keyed by case) answers an evalset
                        # case's input as that case; an endpoint answers what it is sent.
                        case_id = case_for_input(pack, run.input) if run.endpoint_id is None else None
                        result = run_pack(pack, run.input, run_id=f"try-{run_id}", case_id=case_id, **common)
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
    except (FencedOut, LeaseLost) as exc:
        # Another delivery owns the run now (this worker stalled past its lease): its
        # outcome is the one that counts, so this one writes nothing.
        log.warning("try run %s was taken over by another delivery; dropping this one: %s", run_id, exc)
        return None
    except (OperationalError, InterfaceError):  # the database is away: the lease lapses, a sweep re-sends
        leases.release(TryRun, run_id, token)
        raise
    except (TryRefused, packs.PackUnrunnable, PackforgeError) as exc:
        ended = _finish(run_id, token, TryRun.Status.FAILED, error=str(exc), trace=_stopped(journal, str(exc)))
    except Exception as exc:  # the row must end final whatever happened; the log has the rest
        log.exception("try run %s crashed", run_id)
        error = f"internal error: {type(exc).__name__}: {exc}"
        ended = _finish(run_id, token, TryRun.Status.FAILED, error=error, trace=_stopped(journal, error))
    finally:
        recovery.watcher().unregister(run_id)
    return TryRun.Status.FAILED if ended else None


def _stopped(journal: _Journal | None, error: str) -> Trace | None:
    """The trace so far of a run that stopped with `error` (None: it never started)."""
    if journal is None:
        return None
    journal.trace.status, journal.trace.error = "failed", error
    return journal.trace


def totals(steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "steps": len(steps),
        "model_calls": sum(len(s.get("attempts", [])) for s in steps),
        "rejected": sum(1 for s in steps for a in s.get("attempts", []) if not a.get("ok")),
        "prompt_tokens": sum(s.get("prompt_tokens", 0) for s in steps),
        "completion_tokens": sum(s.get("completion_tokens", 0) for s in steps),
        "latency_s": round(sum(s.get("latency_s", 0.0) for s in steps), 3),
        "cost_usd": sum(s.get("cost_usd", 0.0) for s in steps),
    }
