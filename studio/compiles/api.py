"""The compiles API routes (gathered into studio.api): start a compile, read one (its
progress and attempts), list a project's, cancel one, read one attempt (plan, pack
files, eval summaries), read the pack judged on the target, and adopt an attempt's pack
(it runs on the offline test model: structure tests only) or the judged pack (it runs on
the target model) as the project's pack.

Same rules as the pages: any member reads; only authors start, cancel or adopt (403); a
stranger gets 404. `planner` is "rules" (the default: the model-free planner) or an
endpoint's id or name; `target` an endpoint's id or name, or null for none. The spec is
read at the project's head."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import BooleanField, ExpressionWrapper, Q
from ninja import Router, Schema, Status

from studio.accounts.access import compile_for, project_for
from studio.compiles.models import Compile, CompileAttempt
from studio.compiles.start import (
    adopt_attempt,
    adopt_judged,
    adoption_message,
    cancel_compile,
    endpoint_named,
    judged_adoption_message,
    start_compile,
)
from studio.errors import CONFLICT, ERRORS, INVALID, Conflict, NotFound
from studio.http import StudioRequest

router = Router(tags=["compiles"])
ERRORS_409 = {**ERRORS, **CONFLICT, **INVALID}


class CompileIn(Schema):
    project: str
    planner: int | str = "rules"
    target: int | str | None = None
    attempts: int | None = None


class AttemptOut(Schema):
    number: int
    status: str
    offline_score: float | None
    target_score: float | None
    tokens: int
    cost_usd: float
    seconds: float
    failing_nodes: list[str]
    problems: list[str]


class AttemptDetailOut(AttemptOut):
    plan: dict[str, Any] | None
    pack_files: dict[str, str] | None
    evals: dict[str, Any]


class JudgedOut(Schema):
    """What judging on the target found: which arm won ("pack" | "one_call"; "" when
    none), the judged pack's model (the target), the verdict's sentence, and whether the
    pack was kept (GET /api/compiles/{id}/judged has its files)."""

    arm: str
    model: str
    sentence: str
    pack: bool


class JudgedPackOut(JudgedOut):
    pack_files: dict[str, str] | None


class CompileOut(Schema):
    id: int
    project: str
    version: str
    planner: str
    planner_endpoint: str | None
    target_endpoint: str | None
    max_attempts: int | None
    status: str
    final: bool
    cancel_requested: bool
    attempt: int
    stage: str
    message: str
    tokens: int
    offline_score: float | None
    target_score: float | None
    best_attempt: int | None
    full_marks: bool
    error: str
    judged: JudgedOut | None  # null: no verdict (no target, or the compile did not get that far)
    attempts: list[AttemptOut]
    created_by: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class AdoptOut(Schema):
    compile: int
    attempt: int
    proposal: int  # the proposal opened with it (docs/proposals.md); merged, it reaches main
    version: str  # the proposal's head: the commit that adopts it
    message: str


class JudgedAdoptOut(Schema):
    compile: int
    arm: str
    model: str  # the judged pack's model: the target
    proposal: int  # the proposal opened with it
    version: str  # the proposal's head: the commit that adopts it
    message: str


def judged_out(c: Compile) -> JudgedOut | None:
    if not (c.judged_sentence or c.judged_arm):
        return None
    kept = getattr(c, "judged_kept", None)  # list_compiles annotates it (the files are deferred there)
    pack = bool(kept) if kept is not None else c.has_judged_pack
    return JudgedOut(arm=c.judged_arm, model=c.judged_model, sentence=c.judged_sentence, pack=pack)


def attempt_out(a: CompileAttempt) -> AttemptOut:
    return AttemptOut(
        number=a.number,
        status=a.status,
        offline_score=a.offline_score,
        target_score=a.target_score,
        tokens=a.tokens,
        cost_usd=a.cost_usd,
        seconds=a.seconds,
        failing_nodes=a.failing_nodes,
        problems=a.problems,
    )


def compile_out(c: Compile) -> CompileOut:
    rows = c.attempt_rows.defer("plan", "pack_files", "evals")
    return CompileOut(
        id=c.pk,
        project=c.project.slug,
        version=c.version,
        planner=c.planner,
        planner_endpoint=c.planner_endpoint.name if c.planner_endpoint else None,
        target_endpoint=c.target_endpoint.name if c.target_endpoint else None,
        max_attempts=c.max_attempts,
        status=c.status,
        final=c.is_final,
        cancel_requested=c.cancel_requested,
        attempt=c.attempt,
        stage=c.stage,
        message=c.message,
        tokens=c.tokens,
        offline_score=c.offline_score,
        target_score=c.target_score,
        best_attempt=c.best_attempt,
        full_marks=c.full_marks,
        error=c.error,
        judged=judged_out(c),
        attempts=[attempt_out(a) for a in rows],
        created_by=c.created_by.username,
        created_at=c.created_at,
        started_at=c.started_at,
        finished_at=c.finished_at,
    )


def _attempt(c: Compile, number: int) -> CompileAttempt:
    found = CompileAttempt.objects.filter(compile=c, number=number).first()
    if found is None:
        raise NotFound(f"compile {c.pk} has no finished attempt {number}")
    found.compile = c
    return found


@router.post("", response={201: CompileOut, **ERRORS_409}, summary="Start a compile of the project's spec")
def start(request: StudioRequest, payload: CompileIn) -> Status[CompileOut]:
    project, _ = project_for(request.user, payload.project, edit=True)
    made = start_compile(
        project,
        user=request.user,
        planner=endpoint_named(payload.planner, "planner"),
        target=endpoint_named(payload.target, "target model"),
        attempts=payload.attempts,
    )
    return Status(201, compile_out(compile_for(request.user, made.pk)[0]))


@router.get("", response={200: list[CompileOut], **ERRORS, **INVALID}, summary="A project's compiles, newest first")
def list_compiles(request: StudioRequest, project: str, limit: int = 50) -> list[CompileOut]:
    found, _ = project_for(request.user, project)
    rows = (
        Compile.objects.filter(project=found)
        .select_related("project", "planner_endpoint", "target_endpoint", "created_by")
        .defer("judged_pack_files")
        .annotate(judged_kept=ExpressionWrapper(Q(judged_pack_files__isnull=False), output_field=BooleanField()))
    )
    return [compile_out(c) for c in rows[: max(1, min(limit, 200))]]


@router.get("/{compile_id}", response={200: CompileOut, **ERRORS, **INVALID}, summary="A compile's progress")
def get_compile(request: StudioRequest, compile_id: int) -> CompileOut:
    return compile_out(compile_for(request.user, compile_id)[0])


@router.post("/{compile_id}/cancel", response={200: CompileOut, **ERRORS_409}, summary="Cancel a compile")
def cancel(request: StudioRequest, compile_id: int) -> CompileOut:
    c, _ = compile_for(request.user, compile_id, edit=True)
    if not cancel_compile(c) and c.status != Compile.Status.CANCELLED:
        raise Conflict(f"compile {c.pk} already ended ({c.status}); there is nothing to cancel")
    return compile_out(compile_for(request.user, compile_id)[0])


@router.get(
    "/{compile_id}/attempts/{number}",
    response={200: AttemptDetailOut, **ERRORS, **INVALID},
    summary="One attempt: its plan, pack files and eval summaries",
)
def get_attempt(request: StudioRequest, compile_id: int, number: int) -> AttemptDetailOut:
    c, _ = compile_for(request.user, compile_id)
    a = _attempt(c, number)
    return AttemptDetailOut(**attempt_out(a).dict(), plan=a.plan, pack_files=a.pack_files, evals=a.evals or {})


@router.post(
    "/{compile_id}/attempts/{number}/adopt",
    response={200: AdoptOut, **ERRORS_409},
    summary="Adopt an attempt: open a proposal that makes the project's pack/ its pack (the evalset kept)",
)
def adopt(request: StudioRequest, compile_id: int, number: int, base: str | None = None) -> AdoptOut:
    """`?base=SHA`: the version you reviewed the attempt against; the proposal starts
    there (main's tip without it). The project's evalset is kept (one gold)."""
    c, _ = compile_for(request.user, compile_id, edit=True)
    a = _attempt(c, number)
    made = adopt_attempt(a, user=request.user, base=base)
    return AdoptOut(
        compile=c.pk, attempt=a.number, proposal=made.number, version=made.head, message=adoption_message(a)
    )


@router.get(
    "/{compile_id}/judged",
    response={200: JudgedPackOut, **ERRORS, **INVALID},
    summary="The pack judged on the target: its files, arm, model and verdict",
)
def get_judged(request: StudioRequest, compile_id: int) -> JudgedPackOut:
    c, _ = compile_for(request.user, compile_id)
    found = judged_out(c)
    if found is None:
        raise NotFound(f"compile {c.pk} has no verdict on a target model")
    return JudgedPackOut(**found.dict(), pack_files=c.judged_pack_files)


@router.post(
    "/{compile_id}/adopt",
    response={200: JudgedAdoptOut, **ERRORS_409},
    summary="Adopt the judged pack: open a proposal that makes the project's pack/ the pack judged on the target",
)
def adopt_judged_pack(request: StudioRequest, compile_id: int, base: str | None = None) -> JudgedAdoptOut:
    """The pack that won on the compile's target model (its manifest's model is the
    target), not an attempt's (which run on the offline test model). `?base=SHA`: the
    version you reviewed it against, where the proposal starts. 409 when there is no
    judged pack (no target, or neither arm beat the trivial baseline)."""
    c, _ = compile_for(request.user, compile_id, edit=True)
    made = adopt_judged(c, user=request.user, base=base)
    return JudgedAdoptOut(
        compile=c.pk,
        arm=c.judged_arm,
        model=c.judged_model,
        proposal=made.number,
        version=made.head,
        message=judged_adoption_message(c),
    )
