"""The runs API of a deployment (gathered into studio.api under /api/deployments, beside
api.py): submit (idempotent on run_id), read, list, cancel, and the event stream
(server-sent events, resumable with Last-Event-ID). docs/serving.md."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from django.apps import apps
from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from django.http.response import HttpResponseBase
from ninja import Field, Query, Router, Schema, Status

from studio.accounts.models import Role
from studio.deployments import served_store, service, settled, worker
from studio.deployments.access import deployment_for, served_run_for
from studio.deployments.models import ServedRun
from studio.deployments.settings import setting
from studio.deployments.streams import Stream, StreamRefused
from studio.errors import CONFLICT, ERRORS, INVALID, ErrorOut, Refused
from studio.http import StudioRequest
from studio.redaction import visible_trace
from studio.runs.steps import trace_steps

router = Router(tags=["deployments"])


class RunIn(Schema):
    run_id: str | None = Field(None, description="yours, for idempotency (1-64 of A-Z a-z 0-9 . _ : -)")
    input: dict[str, Any]


class RunSummaryOut(Schema):
    run_id: str
    deployment: str
    status: str
    final: bool
    version: str
    tier: str = Field(..., description="the tier that settled it ('person' when a person answered)")
    waiting_at: str
    error: str
    attempts: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class RunOut(RunSummaryOut):
    input: dict[str, Any]
    output: dict[str, Any] | None
    waiting_reason: str
    question: str
    cancel_requested: bool
    review_item: int | None = Field(None, description="the review item of a run that waited for a person")
    steps: list[dict[str, Any]] = Field(
        ..., description="the steps journaled so far: node, status, attempts, tier, latency, writes"
    )


def _summary(run: ServedRun, name: str) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "deployment": name,
        "status": run.status,
        "final": run.is_final,
        "version": run.version,
        "tier": run.tier,
        "waiting_at": run.waiting_at,
        "error": run.error,
        "attempts": run.attempts,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
    }


def _review_item(run: ServedRun) -> int | None:
    if not (run.status == ServedRun.Status.WAITING or run.waiting_at or run.answered_by):
        return None  # an item is opened only for a run that waited (studio.review.items)
    try:
        label = "review.ReviewItem"  # the review queue's (studio/review/), when installed
        model = apps.get_model(label)
    except LookupError:
        return None
    return model._default_manager.filter(run_id=run.pk).order_by("-pk").values_list("pk", flat=True).first()


def steps_of(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """trace_steps (studio.runs.steps) plus each step's tier, escalations and provenance."""
    rows = trace_steps(trace)
    extra = {(s.get("node"), s.get("step")): s for s in trace.get("steps") or []}
    for row in rows:
        s = extra.get((row.get("node"), row.get("step")), {})
        row.update(
            tier=s.get("tier"),
            escalations=s.get("escalations") or [],
            provenance=s.get("provenance"),
            output=row.get("writes"),
        )
    return rows


def run_out(run: ServedRun, name: str, role: Role) -> RunOut:
    # A running run's trace is written when it settles; until then its steps are the journal's.
    raw = served_store.journal_trace(run) if run.status == ServedRun.Status.RUNNING else None
    trace = visible_trace(raw or run.trace or {}, role)
    return RunOut(
        **_summary(run, name),
        input=run.input,
        output=run.output,
        waiting_reason=run.waiting_reason,
        question=run.question,
        cancel_requested=run.cancel_requested,
        review_item=_review_item(run),
        steps=steps_of(trace),
    )


def _settled(run: ServedRun) -> bool:
    return run.is_final or run.status == ServedRun.Status.WAITING


def _wait_for(run: ServedRun, seconds: float) -> ServedRun:
    """Read the run again each time its worker may have settled it (studio.deployments.settled)."""
    deadline = time.monotonic() + min(seconds, setting("PACKFORGE_SERVE_MAX_WAIT_S"))
    waiter = settled.Waiter(run.pk)
    while not _settled(run) and (left := deadline - time.monotonic()) > 0:
        waiter.wait(left)
        run.refresh_from_db()
    if _settled(run):
        waiter.pass_on()
    return run


@router.post(
    "/{name}/runs",
    response={200: RunOut, 202: RunOut, **ERRORS, **CONFLICT, **INVALID},
    summary="Submit a run (idempotent on run_id); ?wait=N answers with the result if it ends in N seconds",
)
def submit_run(request: StudioRequest, name: str, body: RunIn, wait: float = 0) -> Status[RunOut]:
    deployment, role = deployment_for(request.user, name, edit=True)
    if wait < 0:
        raise Refused("wait is a number of seconds, 0 or more")
    seconds = min(wait, setting("PACKFORGE_SERVE_MAX_WAIT_S"))
    here = seconds > 0 and setting("PACKFORGE_SERVE_WALK_ON_WAIT")
    got = service.submit(deployment, body.input, run_id=body.run_id, user=request.user, walk_here=here)
    run = got.run
    if got.held_by:  # created held by this request: walked here (docs/serving.md, "Where a run is walked")
        status = worker.walk_here(run, got.held_by, seconds)
        # The walk keeps `run` as it settled it; read it again when it did not settle it
        # (handed over, lost, ended before its walk) or when a cancel may have come in.
        if status is None or status != run.status or status == ServedRun.Status.CANCELLED:
            run.refresh_from_db()
    elif seconds:
        run = _wait_for(run, seconds)
    code = 200 if (not got.created or _settled(run)) else 202
    return Status(code, run_out(run, name, role))


class RunFilters(Schema):
    status: str | None = None
    tier: str | None = None
    node: str | None = Field(None, description="runs that visited this node")
    since: datetime | None = Field(None, description="submitted at or after")
    until: datetime | None = Field(None, description="submitted before")
    limit: int = Field(50, ge=1, le=500)
    offset: int = Field(0, ge=0)


def filtered(rows: QuerySet[ServedRun], f: RunFilters) -> QuerySet[ServedRun]:
    if f.status:
        rows = rows.filter(status=f.status)
    if f.tier:
        rows = rows.filter(tier=f.tier)
    if f.node:
        rows = rows.filter(path__contains=f" {f.node} ")
    if f.since:
        rows = rows.filter(created_at__gte=f.since)
    if f.until:
        rows = rows.filter(created_at__lt=f.until)
    return rows


@router.get(
    "/{name}/runs",
    response={200: list[RunSummaryOut], **ERRORS, **INVALID},
    summary="A deployment's runs, newest first (filters: status, tier, node, since, until)",
)
def list_runs(request: StudioRequest, name: str, filters: Query[RunFilters]) -> list[RunSummaryOut]:
    deployment, _ = deployment_for(request.user, name)
    rows = filtered(ServedRun.objects.filter(deployment=deployment), filters)
    page = rows.order_by("-created_at", "-pk")[filters.offset : filters.offset + filters.limit]
    return [RunSummaryOut(**_summary(r, name)) for r in page]


@router.get("/{name}/runs/{run_id}", response={200: RunOut, **ERRORS}, summary="A run: status, steps so far, output")
def get_run(request: StudioRequest, name: str, run_id: str) -> RunOut:
    deployment, role = deployment_for(request.user, name)
    return run_out(served_run_for(deployment, run_id), name, role)


@router.post(
    "/{name}/runs/{run_id}/cancel",
    response={200: RunOut, **ERRORS},
    summary="Cancel a run (its in-flight model calls are dropped); a run that ended is unchanged",
)
def cancel_run(request: StudioRequest, name: str, run_id: str) -> RunOut:
    deployment, role = deployment_for(request.user, name, edit=True)
    run = served_run_for(deployment, run_id)
    service.cancel(run)
    run.refresh_from_db()
    return run_out(run, name, role)


@router.get(
    "/{name}/runs/{run_id}/events",
    response={200: None, **ERRORS, **INVALID, 429: ErrorOut},
    summary="The run's events as server-sent events (resume with Last-Event-ID; at most a few open per user)",
)
def run_events(
    request: StudioRequest, name: str, run_id: str, last_event_id: int = 0, timeout: float = 0
) -> HttpResponseBase:
    deployment, _ = deployment_for(request.user, name)
    run = served_run_for(deployment, run_id)
    header = request.headers.get("Last-Event-ID", "").strip()
    after = last_event_id
    if header:
        if not header.isdigit():
            raise Refused("Last-Event-ID must be an event number")
        after = int(header)
    limit = setting("PACKFORGE_SSE_MAX_S")
    seconds = min(timeout, limit) if timeout > 0 else limit
    try:
        stream = Stream(request.user.pk, run.pk, after, seconds)
    except StreamRefused as refused:
        return refused.response
    response = StreamingHttpResponse(stream, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


__all__ = ["router", "run_out", "steps_of"]
