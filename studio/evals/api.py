"""The evals API routes (gathered into studio.api): start an eval, read its status and
counts, cancel it, mark it as the project's baseline, and ask whether it passes the
baseline gate (for CI).

Same rules as the pages: any member reads; only authors start, cancel or mark a
baseline (403); a stranger gets 404. `endpoints` lists endpoint ids or names, `null`
for the pack's own model; one eval per endpoint is made, sharing a `batch`. `tiers`
(endpoint ids or names, small to large) makes one eval whose cases climb that ladder;
`deployment` (a deployment's name, instead of `project`) evaluates that deployment:
its version over its tier ladder (docs/serving.md, "Evaluating a deployment"). A
deployment-scoped token may not start evals (it reaches only its deployment's runs).
`record_tools` keeps every tool call's result on the eval (its tape, downloadable
from /p/<slug>/evals/<id>/tools.jsonl once it ends); `replay_tools_from` (a finished
recording eval's id) answers every tool call from that tape, calling no tool
(docs/tools.md, "Recorded tool results")."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Count, Q, QuerySet
from ninja import Field, Router, Schema, Status
from pydantic import model_validator

from studio.accounts.access import eval_for, project_for
from studio.deployments.access import deployment_for
from studio.errors import CONFLICT, ERRORS, INVALID, Conflict
from studio.evals import shared
from studio.evals.lists import visible_evals
from studio.evals.models import Eval, EvalCase
from studio.evals.results.gate import baseline_gate, mark_baseline
from studio.evals.start import EvalRefused, cancel_eval, start_deployment_eval, start_eval
from studio.http import StudioRequest

router = Router(tags=["evals"])


class EvalIn(Schema):
    project: str | None = None  # required unless `deployment` is given
    version: str | None = None
    endpoints: list[int | str | None] = Field(default_factory=lambda: list[int | str | None]([None]))
    tiers: list[int | str] = Field(default_factory=list)
    deployment: str | None = None  # evaluate this deployment: its version over its tiers
    tags: list[str] = Field(default_factory=list)  # cases with any of these tags
    untagged: bool = False  # cases with no tag (with tags: those too)
    exclude_tags: list[str] = Field(default_factory=list)  # leave out cases with any of these
    repeats: int = 1
    record_tools: bool = False  # keep every tool call's result (the eval's tape)
    replay_tools_from: int | None = None  # answer tool calls from this recording eval's tape

    @model_validator(mode="after")
    def _project_or_deployment(self) -> EvalIn:
        if self.project is None and self.deployment is None:
            raise ValueError("give the project (its slug), or a deployment to evaluate")
        return self


class CountsOut(Schema):
    total: int
    finished: int
    queued: int
    running: int
    passed: int
    failed: int
    error: int
    cancelled: int
    escalated: int
    diverged: int = 0


class EvalOut(Schema):
    id: int
    project: str
    version: str
    endpoint: str | None
    tiers: list[int]
    deployment: str | None
    tools_mode: str  # "" (tools called live) | record | replay
    tools_from: int | None  # the recording a replay replays
    model_spec: str
    batch: str
    tags: list[str]
    untagged: bool
    exclude_tags: list[str]
    repeats: int
    status: str
    ended: bool
    total: int
    counts: CountsOut
    is_baseline: bool
    complete: bool  # done: every case ran; a cancelled eval is never complete (nor gated)
    ran: int  # case runs with an outcome (passed, failed, error)
    summary: dict[str, Any] | None
    created_by: str
    created_at: datetime
    finished_at: datetime | None


class StartOut(Schema):
    batch: str
    evals: list[EvalOut]


class GateRowOut(Schema):
    metric: str
    baseline: float
    current: float
    limit: float
    ok: bool


class GateOut(Schema):
    eval: int
    passes: bool
    baseline: int | None
    detail: str
    metrics: dict[str, float]
    rows: list[GateRowOut]


ERRORS_409 = {**ERRORS, **CONFLICT, **INVALID}
CASE = EvalCase.Status


def with_counts(rows: QuerySet[Eval]) -> QuerySet[Eval]:
    """Each eval's case counts in the list's own query (what `shared.counts_of` gives
    for one eval), so listing n evals is one query, not n + 1."""
    per_status = {f"n_{status.value}": Count("cases", filter=Q(cases__status=status)) for status in CASE}
    escalated = Count("cases", filter=Q(cases__tier="escalated", cases__status__in=[CASE.PASSED, CASE.FAILED]))
    # an aggregate drops Meta.ordering, so the list's order is said again
    return rows.annotate(**per_status, n_escalated=escalated, n_total=Count("cases")).order_by(
        *list(Eval._meta.ordering or ())
    )


def counts_annotated(ev: Eval) -> dict[str, int]:
    counts = {status.value: int(getattr(ev, f"n_{status.value}")) for status in CASE}
    counts.update(escalated=int(ev.n_escalated), total=int(ev.n_total))  # type: ignore[attr-defined]
    counts["finished"] = counts["total"] - counts[CASE.QUEUED] - counts[CASE.RUNNING]
    return counts


def eval_out(ev: Eval, counts: dict[str, int] | None = None) -> EvalOut:
    """`counts` when the caller has them already (the list annotates them in its one query)."""
    counts = counts if counts is not None else shared.counts_of(ev)
    return EvalOut(
        id=ev.pk,
        project=ev.project.slug,
        version=ev.version,
        endpoint=ev.endpoint.name if ev.endpoint else None,
        tiers=list(ev.tiers),
        deployment=ev.deployment.name if ev.deployment else None,
        tools_mode=ev.tools_mode,
        tools_from=ev.tools_from_id,
        model_spec=ev.model_spec,
        batch=ev.batch,
        tags=ev.tags,
        untagged=ev.untagged,
        exclude_tags=ev.exclude_tags,
        repeats=ev.repeats,
        status=ev.status,
        ended=ev.is_final,
        total=ev.total,
        counts=CountsOut(**counts),
        is_baseline=ev.is_baseline,
        complete=ev.status == Eval.Status.DONE,
        ran=counts["passed"] + counts["failed"] + counts["error"],
        summary=ev.summary,
        created_by=ev.created_by.username,
        created_at=ev.created_at,
        finished_at=ev.finished_at,
    )


def _eval(request: StudioRequest, eval_id: int, *, edit: bool = False) -> Eval:
    return eval_for(request.user, eval_id, edit=edit)[0]  # 404 for strangers, 403 for readers on writes


@router.post("", response={201: StartOut, **ERRORS_409}, summary="Start an eval (one per endpoint)")
def start(request: StudioRequest, payload: EvalIn) -> Status[StartOut]:
    if payload.deployment is not None:
        evals = [_start_deployment_eval(request, payload)]
    else:
        assert payload.project is not None  # EvalIn checks: one of project and deployment
        project, _ = project_for(request.user, payload.project, edit=True)
        evals = start_eval(
            project,
            user=request.user,
            version=payload.version,
            endpoints=payload.endpoints,
            tiers=payload.tiers,
            tags=payload.tags,
            untagged=payload.untagged,
            exclude_tags=payload.exclude_tags,
            repeats=payload.repeats,
            record_tools=payload.record_tools,
            replay_tools_from=payload.replay_tools_from,
        )
    fresh = Eval.objects.select_related("project", "endpoint", "deployment", "created_by").filter(
        pk__in=[e.pk for e in evals]
    )
    return Status(201, StartOut(batch=evals[0].batch, evals=[eval_out(ev) for ev in fresh.order_by("pk")]))


def _start_deployment_eval(request: StudioRequest, payload: EvalIn) -> Eval:
    assert payload.deployment is not None
    deployment, _ = deployment_for(request.user, payload.deployment, edit=True)
    if payload.project is not None and payload.project != deployment.project.slug:
        raise EvalRefused(f"deployment {deployment.name!r} is not of project {payload.project!r}")
    if payload.version is not None or payload.tiers or payload.endpoints not in ([None], []):
        raise EvalRefused("a deployment's eval runs its version over its tiers; leave version, endpoints and tiers out")
    return start_deployment_eval(
        deployment,
        user=request.user,
        tags=payload.tags,
        untagged=payload.untagged,
        exclude_tags=payload.exclude_tags,
        repeats=payload.repeats,
        record_tools=payload.record_tools,
        replay_tools_from=payload.replay_tools_from,
    )


@router.get(
    "",
    response={200: list[EvalOut], **ERRORS, **INVALID},
    summary="Evals, newest first: one project's, or without `project` every project's you are a member of",
)
def list_evals(request: StudioRequest, project: str = "", limit: int = 50) -> list[EvalOut]:
    if project:
        found, _ = project_for(request.user, project)
        rows = Eval.objects.filter(project=found)
    else:
        rows = visible_evals(request.user)
    rows = with_counts(rows.select_related("project", "endpoint", "deployment", "created_by"))
    return [eval_out(ev, counts_annotated(ev)) for ev in rows[: max(1, min(limit, 200))]]


@router.get("/{eval_id}", response={200: EvalOut, **ERRORS, **INVALID}, summary="An eval's status and counts")
def get_eval(request: StudioRequest, eval_id: int) -> EvalOut:
    return eval_out(_eval(request, eval_id))


@router.post("/{eval_id}/cancel", response={200: EvalOut, **ERRORS_409}, summary="Cancel an eval")
def cancel(request: StudioRequest, eval_id: int) -> EvalOut:
    ev = _eval(request, eval_id, edit=True)
    if not cancel_eval(ev) and ev.status == Eval.Status.DONE:
        raise Conflict(f"eval {ev.pk} already finished; there is nothing to cancel")
    ev.refresh_from_db()
    return eval_out(ev)


@router.post(
    "/{eval_id}/baseline", response={200: EvalOut, **ERRORS_409}, summary="Mark an eval as its project's baseline"
)
def baseline(request: StudioRequest, eval_id: int) -> EvalOut:
    ev = _eval(request, eval_id, edit=True)
    if ev.status != Eval.Status.DONE:
        raise Conflict(f"eval {ev.pk} is {ev.status}; only a finished eval can be the baseline")
    mark_baseline(ev)
    return eval_out(ev)


@router.get(
    "/{eval_id}/gate",
    response={200: GateOut, **ERRORS_409},
    summary="Does the eval pass its project's baseline? (for CI)",
)
def gate(request: StudioRequest, eval_id: int) -> GateOut:
    ev = _eval(request, eval_id)
    if ev.status != Eval.Status.DONE:
        raise Conflict(f"eval {ev.pk} is {ev.status}; only a finished eval is gated (poll GET /api/evals/{ev.pk})")
    return GateOut(eval=ev.pk, **baseline_gate(ev))
