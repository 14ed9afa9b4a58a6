"""The runs API routes (gathered into studio.api): start a try-it run, read one, list the
runs a user may see, try-it and served, filtered and paged with a cursor (studio.runs.listing).

Same rules as the pages: any member may read a run of their project; only authors may
start one (403); a stranger gets 404. `endpoint` names an endpoint by its name; leave
it out for the pack's own model. `version` is a commit sha (or a prefix); leave it
out for the head."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.http import HttpResponse
from ninja import Field, Query, Router, Schema, Status

from studio.accounts.access import project_for, run_for
from studio.accounts.models import Role
from studio.endpoints.models import Endpoint
from studio.errors import ERRORS, INVALID, Refused
from studio.http import StudioRequest
from studio.redaction import visible_trace
from studio.runs import start, steps
from studio.runs.listing import MAX_LIMIT, BadQuery, ListedRun, query_from, run_page
from studio.runs.models import TryRun
from studio.runs.tasks import execute_try_run

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
    trace: dict[str, Any]  # the runtime's trace dict, rejected text for authors only


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


def _out(run: TryRun, role: Role) -> RunOut:
    trace = visible_trace(run.trace or {}, role)
    return RunOut(
        **_listed(run),
        final=run.is_final,
        output=run.output,
        error=run.error,
        steps=steps.trace_steps(trace),
        trace=trace,
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
    run, role = run_for(request.user, run.pk)
    return Status(201, _out(run, role))


class ListFilters(Schema):
    project: str = ""
    deployment: str = ""
    kind: str = Field("", description="try or served (both when left out)")
    status: str = ""
    tier: str = Field("", description="served runs settled by this tier")
    node: str = Field("", description="served runs waiting at this node")
    since: str = Field("", description="submitted at or after (ISO date or time; UTC without an offset)")
    until: str = Field("", description="submitted before")
    q: str = Field("", description="text in the input or the output")
    cursor: str = Field("", description="the X-Next-Cursor of the page before")
    limit: int = Field(50, ge=1, le=MAX_LIMIT)


class ListedOut(Schema):
    kind: str = Field(..., description="try (a try-it run) or served (a deployment's run)")
    id: int = Field(..., description="the run's number within its kind")
    project: str
    status: str
    version: str
    input: dict[str, Any]
    output: dict[str, Any] | None
    created_at: datetime
    finished_at: datetime | None
    created_by: str = Field(..., description="who started or submitted it ('' for a served run with no user)")
    url: str = Field(..., description="the run's trace page")
    api: str = Field(..., description="where the API reads this run")
    endpoint: str | None = Field(None, description="a try-it run's endpoint (none: the pack's model)")
    model_spec: str = ""
    deployment: str = ""
    run_id: str = Field("", description="a served run's id")
    tier: str = Field("", description="the tier that settled a served run ('person' when a person answered)")
    waiting_at: str = Field("", description="the node a served run waits at")
    review_item: int | None = None


def _api_of(run: ListedRun) -> str:
    if run.kind == "served":
        return f"/api/deployments/{run.deployment}/runs/{run.run_id}"
    return f"/api/runs/{run.pk}"


def _listed_out(run: ListedRun) -> ListedOut:
    return ListedOut(
        kind=run.kind,
        id=run.pk,
        project=run.project,
        status=run.status,
        version=run.version,
        input=run.input,
        output=run.output,
        created_at=run.created_at,
        finished_at=run.finished_at,
        created_by=run.by,
        url=run.url,
        api=_api_of(run),
        endpoint=run.endpoint or None,
        model_spec=run.model,
        deployment=run.deployment,
        run_id=run.run_id,
        tier=run.tier,
        waiting_at=run.waiting_at,
        review_item=run.review_item,
    )


@router.get(
    "",
    response={200: list[ListedOut], **ERRORS, **INVALID},
    summary="Runs, try-it and served, newest first, of every project you are a member of; "
    "the next page's cursor is in the Link and X-Next-Cursor headers",
)
def list_runs(request: StudioRequest, response: HttpResponse, filters: Query[ListFilters]) -> list[ListedOut]:
    user = request.user
    if filters.project:
        project_for(user, filters.project)  # a stranger's project is not found (404)
    params = filters.dict(exclude={"limit"})
    try:
        query = query_from(params, limit=filters.limit)
    except BadQuery as exc:
        raise Refused(str(exc)) from None
    got = run_page(user, query)
    if got.next:
        after = got.next.encode()
        response["X-Next-Cursor"] = after
        page = urlencode({**query.params(), "limit": query.limit, "cursor": after})
        response["Link"] = f'<{request.path}?{page}>; rel="next"'
    return [_listed_out(r) for r in got.runs]


@router.get("/{run_id}", response={200: RunOut, **ERRORS, **INVALID}, summary="A try-it run and its trace so far")
def get_run(request: StudioRequest, run_id: int) -> RunOut:
    run, role = run_for(request.user, run_id)
    return _out(run, role)
