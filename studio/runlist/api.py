"""GET /api/runs: every run the user may see, try-it and served, filtered, newest first,
the next page's cursor in the X-Next-Cursor and Link headers (studio.runlist.query).
The operation is added to studio.runs.api's router (POST /api/runs, GET /api/runs/{id}):
ninja serves the operations of one path from one router, and the list shares the path
of the start. That router is what studio.api mounts, from here."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.http import HttpResponse
from ninja import Field, Query, Schema

from studio.accounts.access import project_for
from studio.errors import ERRORS, INVALID, Refused
from studio.http import StudioRequest
from studio.runlist.query import MAX_LIMIT, BadQuery, ListedRun, query_from, run_page
from studio.runs.api import router  # the try-it routes' router, which this extends

__all__ = ["router"]


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
