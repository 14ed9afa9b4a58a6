"""The studio's calls into the runtime for try-it runs.

`prepare` checks, in the web process, everything that can be known before a run is
queued (the version exists, the pack at that version loads, its tools can be served,
there is a model to ask); `run_try` is what the worker does: load the pack version
from git into a temporary folder, open the model, walk the pack with an `on_step`
hook that writes each checkpointed step to the TryRun row as it happens, then store
the run's status, output and error.

Tools: a pack that names tools runs only when the studio has a tool registry
(`PACKFORGE_TOOLS=MODULE:REGISTRY` or `path/to/tools.py:REGISTRY`, the CLI's `--tools`
syntax); the pack is then loaded against that registry, so it reaches only the tools
the host registered (invariant 5)."""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.utils import timezone

from runtime import MemoryStore, PackforgeError, RunOptions, open_backend, run_pack
from runtime.pack import Pack
from runtime.trace import Step
from studio import packs
from studio.endpoints.execute import spec_for
from studio.endpoints.models import Endpoint
from studio.projects.models import Project
from studio.runs.models import TryRun

log = logging.getLogger("packforge.studio.runs")


class TryRefused(Exception):
    """The run cannot start; the message says why and what to do."""


@dataclass
class Prepared:
    sha: str
    pack: Pack
    problem: str | None  # why it cannot be tried (tools, no model), or None


def prepare(project: Project, version: str | None, endpoint: Endpoint | None) -> Prepared:
    """Resolve `version` and load the pack at it; `problem` says why it cannot be tried.
    Raises TryRefused when the version does not exist or the pack does not load."""
    try:
        with packs.loaded(project, version, own_model=endpoint is None) as got:
            return Prepared(got.sha, got.pack, "; ".join(got.problems) or None)
    except packs.PackUnrunnable as exc:
        raise TryRefused(str(exc)) from None


def first_case_input(pack: Pack) -> dict[str, Any] | None:
    return dict(pack.cases[0].input) if pack.cases else None


def new_try_run(
    project: Project, *, user: object, version: str | None, endpoint: Endpoint | None, input: object
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


class _Journal(MemoryStore):
    """A checkpoint store that also keeps each step's journal payload (its attempts)
    and the tool calls journaled before it, for the on_step hook to publish."""

    def __init__(self) -> None:
        super().__init__()
        self.last_step: dict[str, Any] = {}
        self.tool_calls: list[dict[str, Any]] = []

    def append(self, run_id: str, fence: int, kind: str, node: str, step: int, payload: dict[str, Any]) -> None:
        super().append(run_id, fence, kind, node, step, payload)
        if kind == "step":
            self.last_step = payload
        elif kind == "tool":
            self.tool_calls.append({"node": node, "step": step, **payload})


def step_row(step: Step, payload: dict[str, Any], tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
    """One step as the TryRun row keeps it: node, status, writes, edge, every attempt
    (with its rejection category and reason, tokens, latency) and tool calls."""
    attempts = [
        {
            k: a.get(k)
            for k in (
                "attempt",
                "stage",
                "ok",
                "category",
                "reason",
                "text",
                "prompt_tokens",
                "completion_tokens",
                "reasoning_tokens",
                "latency_s",
                "ttft_s",
                "cost_usd",
            )
        }
        for a in payload.get("attempts", [])
    ]
    return {
        "step": step.step,
        "node": step.node,
        "kind": step.kind,
        "status": step.status,
        "writes": step.writes,
        "attempt": step.attempt,
        "reason": step.reason,
        "edge": {"kind": step.edge.kind, "target": step.edge.target} if step.edge else None,
        "prompt": step.prompt,
        "attempts": attempts,
        "tool_calls": [
            {k: c[k] for k in ("tool", "args", "result", "latency_s")} for c in tool_calls if c["step"] == step.step
        ],
        "prompt_tokens": sum(a["prompt_tokens"] or 0 for a in attempts),
        "completion_tokens": sum(a["completion_tokens"] or 0 for a in attempts),
        "latency_s": round(sum(a["latency_s"] or 0.0 for a in attempts), 4),
        "cost_usd": sum(a["cost_usd"] or 0.0 for a in attempts),
    }


def _finish(
    run_id: int, status: str, *, output: Any = None, error: str = "", steps: list[dict[str, Any]] | None = None
) -> None:
    fields: dict[str, Any] = {"status": status, "output": output, "error": error, "finished_at": timezone.now()}
    if steps is not None:
        fields["steps"] = steps
    TryRun.objects.filter(pk=run_id).update(**fields)


def run_try(run_id: int) -> str | None:
    """Run a queued TryRun to its end; returns the final status (None: nothing to do).

    Idempotent for a redelivered task: a run already final is left alone; a run left
    `running` by a lost worker starts again from its input (a try-it run keeps no
    checkpoint across workers)."""
    claimed = TryRun.objects.filter(pk=run_id, status__in=[TryRun.Status.QUEUED, TryRun.Status.RUNNING]).update(
        status=TryRun.Status.RUNNING, steps=[], output=None, error=""
    )
    if not claimed:
        log.info("try run %s is gone or already final; nothing to do", run_id)
        return None
    run = TryRun.objects.select_related("project", "endpoint").get(pk=run_id)
    steps: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="pf-try-") as tmp:
            # The spec recorded when the run was started (an endpoint edited or deleted
            # since does not change what this run asks), else the pack's own model.
            got = packs.load_version(run.project, run.version, Path(tmp), own_model=not run.model_spec)
            pack, tools = got.ensure_runnable().pack, got.tools
            spec = run.model_spec or pack.model or ""
            backend = open_backend(spec, base_dir=pack.root, default=pack.model)
            journal = _Journal()

            def on_step(step: Step) -> None:
                steps.append(step_row(step, journal.last_step, journal.tool_calls))
                TryRun.objects.filter(pk=run_id).update(steps=steps)

            try:
                result = run_pack(
                    pack,
                    run.input,
                    backend=backend,
                    tools=tools,
                    store=journal,
                    run_id=f"try-{run_id}",
                    options=RunOptions(on_step=on_step),
                )
            finally:
                backend.close()
        if result.status == "waiting" and result.trace.steps:
            last = result.trace.steps[-1]
            steps.append(step_row(last, {}, []))  # the wait is not a checkpointed step: no hook
        error = result.trace.error or ""
        if result.status == "waiting":
            error = f"waiting for a person at node '{result.waiting_at}'; try-it runs do not take human answers"
        _finish(
            run_id, result.status, output=result.output if result.status == "done" else None, error=error, steps=steps
        )
        return result.status
    except (TryRefused, packs.PackUnrunnable, PackforgeError) as exc:
        _finish(run_id, TryRun.Status.FAILED, error=str(exc), steps=steps)
    except Exception as exc:  # the row must end final whatever happened; the log has the rest
        log.exception("try run %s crashed", run_id)
        _finish(run_id, TryRun.Status.FAILED, error=f"internal error: {type(exc).__name__}: {exc}", steps=steps)
    return TryRun.Status.FAILED


def public_steps(steps: list[dict[str, Any]], *, author: bool) -> list[dict[str, Any]]:
    """The steps as `author` may see them: rejected generation text is for the pack's
    authors only (it may be wrong in ways that mislead; it is never shown to others)."""
    if author:
        return steps
    out = []
    for step in steps:
        attempts = [a if a.get("ok") else {**a, "text": ""} for a in step.get("attempts", [])]
        out.append({**step, "attempts": attempts})
    return out


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
