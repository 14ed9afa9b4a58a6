"""The try-it runs API routes (gathered into studio.api): start a try-it run, read one.
The list of every run, GET /api/runs, is studio.runlist.api.

Same rules as the pages: any member may read a run of their project; only authors may
start one (403); a stranger gets 404. `endpoint` names an endpoint by its name; leave
it out for the pack's own model. `version` is a commit sha (or a prefix); leave it
out for the head.

A run's answer carries at most STEPS_PER_ANSWER steps (with their attempts and tool
calls; studio.runs.windows): `steps_total` says how many the run has, `?steps_from=N`
reads on from step index N, and `next_steps_from` is where the next window starts
(null at the end). A run of 10,000 looping steps answered 6 MB a poll before; a window
is bounded whatever the run."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Query, Router, Schema, Status
from pydantic import Field

from studio.accounts.access import project_for, run_for
from studio.accounts.models import Role
from studio.endpoints.models import Endpoint
from studio.errors import ERRORS, INVALID, Refused
from studio.http import StudioRequest
from studio.redaction import visible_trace
from studio.runs import start, steps
from studio.runs.models import TryRun
from studio.runs.tasks import execute_try_run
from studio.runs.windows import trace_window

router = Router(tags=["runs"])


class RunIn(Schema):
    project: str
    version: str | None = None
    endpoint: str | None = None
    input: dict[str, Any]


class RunListedOut(Schema):
    id: int
    project: str
    version: str
    endpoint: str | None
    model_spec: str
    status: str
    input: dict[str, Any]
    created_by: str
    created_at: datetime
    finished_at: datetime | None


class RunOut(RunListedOut):
    final: bool
    output: dict[str, Any] | None
    error: str
    steps: list[dict[str, Any]]
    trace: dict[str, Any]  # the runtime's trace dict, rejected text for authors only; one window of steps
    steps_total: int
    steps_from: int
    next_steps_from: int | None


class StepsWindow(Schema):
    steps_from: int = Field(0, ge=0, description="the index of the first step in the answer")


def _listed(run: TryRun) -> dict[str, Any]:
    return {
        "id": run.pk,
        "project": run.project.slug,
        "version": run.version,
        "endpoint": run.endpoint.name if run.endpoint else None,
        "model_spec": run.model_spec,
        "status": run.status,
        "input": run.input,
        "created_by": run.created_by.username,
        "created_at": run.created_at,
        "finished_at": run.finished_at,
    }


def _out(run: TryRun, role: Role, start: int = 0) -> RunOut:
    shown = trace_window(run, start)
    trace = visible_trace(shown.trace, role)
    return RunOut(
        **_listed(run),
        final=run.is_final,
        output=run.output,
        error=run.error,
        steps=steps.trace_steps(trace),
        trace=trace,
        steps_total=shown.steps_total,
        steps_from=start,
        next_steps_from=shown.next_steps_from,
    )


@router.post("", response={201: RunOut, **ERRORS, **INVALID}, summary="Start a try-it run")
def create_run(request: StudioRequest, payload: RunIn) -> Status[RunOut]:
    project, _ = project_for(request.user, payload.project, edit=True)
    endpoint = None
    if payload.endpoint:
        endpoint = Endpoint.objects.filter(name=payload.endpoint).first()
        if endpoint is None:
            raise Refused(f"no endpoint named {payload.endpoint!r}")
    run = start.new_try_run(project, user=request.user, version=payload.version, endpoint=endpoint, input=payload.input)
    execute_try_run.delay_on_commit(run.pk)
    run, role = run_for(request.user, run.pk, trace=False)
    return Status(201, _out(run, role))


@router.get("/{run_id}", response={200: RunOut, **ERRORS, **INVALID}, summary="A try-it run and its trace so far")
def get_run(request: StudioRequest, run_id: int, page: Query[StepsWindow]) -> RunOut:
    run, role = run_for(request.user, run_id, trace=False)
    return _out(run, role, page.steps_from)
