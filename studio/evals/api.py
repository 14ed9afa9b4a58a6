"""The evals API routes (gathered into studio.api): start an eval, read its status and
counts, cancel it, mark it as the project's baseline, and ask whether it passes the
baseline gate (for CI).

Same rules as the pages: any member reads; only authors start, cancel or mark a
baseline (403); a stranger gets 404. `endpoints` lists endpoint ids or names, `null`
for the pack's own model; one eval per endpoint is made, sharing a `batch`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Count, Q, QuerySet
from ninja import Field, Router, Schema, Status
from ninja.errors import HttpError

from studio.accounts.access import eval_for, project_for
from studio.errors import CONFLICT, ERRORS, INVALID
from studio.evals import shared
from studio.evals.lists import visible_evals
from studio.evals.models import Eval, EvalCase
from studio.evals.results.gate import baseline_gate, mark_baseline
from studio.evals.start import EvalRefused, cancel_eval, start_eval
from studio.http import StudioRequest

router = Router(tags=["evals"])


class EvalIn(Schema):
    project: str
    version: str | None = None
    endpoints: list[int | str | None] = Field(default_factory=lambda: list[int | str | None]([None]))
    tags: list[str] = Field(default_factory=list)
    repeats: int = 1


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


class EvalOut(Schema):
    id: int
    project: str
    version: str
    endpoint: str | None
    model_spec: str
    batch: str
    tags: list[str]
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
        model_spec=ev.model_spec,
        batch=ev.batch,
        tags=ev.tags,
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
    project, _ = project_for(request.user, payload.project, edit=True)
    try:
        evals = start_eval(
            project,
            user=request.user,
            version=payload.version,
            endpoints=payload.endpoints,
            tags=payload.tags,
            repeats=payload.repeats,
        )
    except EvalRefused as exc:
        raise HttpError(400, str(exc)) from None
    fresh = Eval.objects.select_related("project", "endpoint", "created_by").filter(pk__in=[e.pk for e in evals])
    return Status(201, StartOut(batch=evals[0].batch, evals=[eval_out(ev) for ev in fresh.order_by("pk")]))


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
    rows = with_counts(rows.select_related("project", "endpoint", "created_by"))
    return [eval_out(ev, counts_annotated(ev)) for ev in rows[: max(1, min(limit, 200))]]


@router.get("/{eval_id}", response={200: EvalOut, **ERRORS, **INVALID}, summary="An eval's status and counts")
def get_eval(request: StudioRequest, eval_id: int) -> EvalOut:
    return eval_out(_eval(request, eval_id))


@router.post("/{eval_id}/cancel", response={200: EvalOut, **ERRORS_409}, summary="Cancel an eval")
def cancel(request: StudioRequest, eval_id: int) -> EvalOut:
    ev = _eval(request, eval_id, edit=True)
    if not cancel_eval(ev) and ev.status == Eval.Status.DONE:
        raise HttpError(409, f"eval {ev.pk} already finished; there is nothing to cancel")
    ev.refresh_from_db()
    return eval_out(ev)


@router.post(
    "/{eval_id}/baseline", response={200: EvalOut, **ERRORS_409}, summary="Mark an eval as its project's baseline"
)
def baseline(request: StudioRequest, eval_id: int) -> EvalOut:
    ev = _eval(request, eval_id, edit=True)
    if ev.status != Eval.Status.DONE:
        raise HttpError(409, f"eval {ev.pk} is {ev.status}; only a finished eval can be the baseline")
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
        raise HttpError(
            409, f"eval {ev.pk} is {ev.status}; only a finished eval is gated (poll GET /api/evals/{ev.pk})"
        )
    return GateOut(eval=ev.pk, **baseline_gate(ev))
