"""The proposals API (gathered into studio.api under /api/projects/{slug}/proposals):
open, list, read, update, comment, approve, request changes, merge, close, reopen.

Access as on the pages (studio.accounts.access): members read; authors open, update,
merge, close and reopen; reviewers and authors review and comment, never their own
proposal; a viewer gets 403 on any change; a stranger 404."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Field, Router, Schema, Status

from studio.accounts.access import project_for, proposal_for
from studio.accounts.models import Role
from studio.deployments.models import Deployment
from studio.errors import ERRORS, INVALID, Refused
from studio.http import StudioRequest
from studio.numbers import whole_number
from studio.packs import PACK_PREFIX
from studio.projects.api import changes_out, check_changes
from studio.projects.branches import MergeConflict
from studio.projects.schemas import ChangeOut, StaleOut
from studio.projects.storage import PackRepo, StaleBase
from studio.proposals import service
from studio.proposals.checks import checks_of
from studio.proposals.models import Proposal, ProposalEvent
from studio.proposals.service import MAX_APPROVALS

router = Router(tags=["proposals"])
PAGE = 50


class ProposalIn(Schema):
    title: str
    description: str = ""
    base: str | None = Field(None, description="a version on main; main's tip when left out")
    message: str = Field("", description="the first commit's message; the title when left out")
    files: dict[str, str | None] = Field(..., description="pack-relative path -> new content, or null to delete")
    deployment: str | None = Field(None, description="checks run on this deployment's tiers; else the pack's model")


class ProposalUpdateIn(Schema):
    base: str = Field(..., description="the proposal's head these changes were made on")
    message: str
    files: dict[str, str | None]


class CommentIn(Schema):
    body: str
    path: str = Field("", description="a pack-relative file, for a comment on a line of the diff")
    line: int | None = Field(None, ge=1, le=2**31 - 1)


class ReviewIn(Schema):
    body: str = ""
    head: str | None = Field(None, description="the head you reviewed; refused (409) when the proposal moved since")


class SyncIn(Schema):
    head: str = Field(..., description="the proposal's head as you read it")
    files: dict[str, str | None] = Field(
        default_factory=dict, description="your version of each file both main and the proposal changed"
    )


class EventOut(Schema):
    at: datetime
    user: str
    kind: str
    body: str
    head: str
    path: str
    line: int | None


class ProposalOut(Schema):
    number: int
    project: str
    title: str
    description: str
    author: str
    source: str
    status: str
    branch: str
    base: str
    head: str
    merged_sha: str
    approvals: list[str]
    approvals_required: int
    merge_problems: list[str] | None  # what stands between it and a merge; read one proposal for it (None in lists)
    created_at: datetime
    updated_at: datetime


class ChecksOut(Schema):
    state: str = Field(..., description="not started | running | done | error")
    error: str
    base_eval: int | None
    head_eval: int | None
    pairs: int | None = None  # outcomes paired: on cases both sides ran
    fixed: list[dict[str, Any]] = []
    broken: list[dict[str, Any]] = []
    p_value: float | None = None
    pass_base: int | None = None
    pass_head: int | None = None
    ci_base: list[float] | None = None
    ci_head: list[float] | None = None
    metrics: list[dict[str, Any]] = []
    only_base: list[str] = []  # cases only the base ran: not counted as fixed or broken
    only_head: list[str] = []  # cases only the head ran: likewise
    gate: list[dict[str, Any]] | None = None
    gate_passes: bool | None = None
    evalset_added: list[str] = []
    evalset_removed: list[str] = []
    evalset_changed: list[str] = []


class ProposalDetailOut(ProposalOut):
    changes: list[ChangeOut]
    events: list[EventOut]
    checks: ChecksOut


class MergeOut(Schema):
    version: str
    how: str = Field(..., description="fast-forward | merge commit")


class ConflictOut(Schema):
    detail: str
    paths: list[str]
    changes: list[ChangeOut] = Field(..., description="what main changed in those files since the base")


def _out(p: Proposal, approvals: list[str] | None = None, *, problems: bool = True) -> dict[str, Any]:
    return {
        "number": p.number,
        "project": p.project.slug,
        "title": p.title,
        "description": p.description,
        "author": p.author.username,
        "source": p.source,
        "status": p.status,
        "branch": p.branch,
        "base": p.base,
        "head": p.head,
        "merged_sha": p.merged_sha,
        "approvals": service.approvals(p) if approvals is None else approvals,
        "approvals_required": p.project.approvals_required,
        "merge_problems": service.merge_problems(p) if problems else None,
        "created_at": p.created_at,
        "updated_at": p.updated_at,
    }


def _event_out(e: ProposalEvent) -> EventOut:
    return EventOut(at=e.at, user=e.user.username, kind=e.kind, body=e.body, head=e.head, path=e.path, line=e.line)


def checks_out(p: Proposal) -> ChecksOut:
    found = checks_of(p)
    out = ChecksOut(
        state=found.state,
        error=found.error,
        base_eval=found.base_eval.pk if found.base_eval else None,
        head_eval=found.head_eval.pk if found.head_eval else None,
        gate=found.gate,
        gate_passes=found.gate_passes,
        evalset_added=found.evalset.added,
        evalset_removed=found.evalset.removed,
        evalset_changed=found.evalset.changed,
    )
    if found.delta is not None:
        d = found.delta
        out.pairs, out.fixed, out.broken, out.p_value = d["pairs"], d["fixed"], d["broken"], d["p_value"]
        out.pass_base, out.pass_head = d["pass_a"], d["pass_b"]
        out.ci_base, out.ci_head = list(d["ci_a"]), list(d["ci_b"])
        out.metrics, out.only_base, out.only_head = d["metrics"], d["only_a"], d["only_b"]
    return out


def _detail(p: Proposal) -> ProposalDetailOut:
    repo = PackRepo(p.project.repo_path)
    events = ProposalEvent.objects.filter(proposal=p).select_related("user")
    return ProposalDetailOut(
        **_out(p),
        changes=changes_out(repo.diff(p.base, p.head)),
        events=[_event_out(e) for e in events],
        checks=checks_out(p),
    )


def _repo_changes(files: dict[str, str | None]) -> dict[str, bytes | None]:
    if not files:
        raise Refused("no files given; send {path: content} (or null to delete)")
    return {PACK_PREFIX + path: data for path, data in check_changes(files).items()}


@router.post(
    "/{slug}/proposals",
    response={201: ProposalDetailOut, **ERRORS, **INVALID},
    summary="Open a proposal: a branch with these changes, and its checks (authors)",
)
def open_proposal(request: StudioRequest, slug: str, body: ProposalIn) -> Status[ProposalDetailOut]:
    project, _ = project_for(request.user, slug, edit=True)
    deployment = None
    if body.deployment:
        deployment = Deployment.objects.filter(project=project, name=body.deployment).first()
        if deployment is None:
            raise Refused(f"no deployment {body.deployment!r} in {project.slug}")
    made = service.open_proposal(
        project,
        user=request.user,
        title=body.title,
        description=body.description,
        changes=_repo_changes(body.files),
        base=body.base,
        message=body.message,
        deployment=deployment,
    )
    return Status(201, _detail(made))


@router.get(
    "/{slug}/proposals", response={200: list[ProposalOut], **ERRORS, **INVALID}, summary="A project's proposals"
)
def list_proposals(request: StudioRequest, slug: str, status: str = "", offset: int = 0) -> list[ProposalOut]:
    project, _ = project_for(request.user, slug)
    rows = Proposal.objects.filter(project=project).select_related("project", "author")
    if status:
        if status not in Proposal.Status.values:
            raise Refused(f"unknown status {status!r}; use one of {', '.join(Proposal.Status.values)}")
        rows = rows.filter(status=status)
    if whole_number(offset) is None:
        raise Refused("offset must be a whole number, 0 or more")
    page = list(rows[offset : offset + PAGE])
    approving = service.approvals_of(page)
    return [ProposalOut(**_out(p, approving[p.pk], problems=False)) for p in page]


@router.get(
    "/{slug}/proposals/{number}",
    response={200: ProposalDetailOut, **ERRORS, **INVALID},
    summary="A proposal: its diff, timeline and checks",
)
def get_proposal(request: StudioRequest, slug: str, number: int) -> ProposalDetailOut:
    proposal, _ = proposal_for(request.user, slug, number)
    return _detail(proposal)


@router.put(
    "/{slug}/proposals/{number}",
    response={200: ProposalDetailOut, **ERRORS, 409: StaleOut, **INVALID},
    summary="Save more changes on a proposal's branch (authors); its checks start again",
)
def update_proposal(
    request: StudioRequest, slug: str, number: int, body: ProposalUpdateIn
) -> ProposalDetailOut | Status[StaleOut]:
    proposal, _ = proposal_for(request.user, slug, number, edit=True)
    try:
        service.update_proposal(
            proposal, user=request.user, changes=_repo_changes(body.files), base=body.base, message=body.message
        )
    except StaleBase as exc:
        detail = f"{exc}; nothing was saved. Re-read the proposal at {exc.head[:10]} and save again"
        return Status(409, StaleOut(detail=detail, head=exc.head, changes=changes_out(exc.changes)))
    return _detail(proposal)


@router.post(
    "/{slug}/proposals/{number}/sync",
    response={200: ProposalDetailOut, **ERRORS, 409: ConflictOut, **INVALID},
    summary="Bring main into a proposal, with your version of the files both changed (authors)",
)
def sync(request: StudioRequest, slug: str, number: int, body: SyncIn) -> ProposalDetailOut | Status[ConflictOut]:
    """After a merge refused on a conflict: send each conflicting file as it should be;
    the proposal then starts at main's tip and its merge is a fast-forward. Without
    `files`, when main changed only other files, main's changes are simply brought in."""
    proposal, _ = proposal_for(request.user, slug, number, edit=True)
    resolved = {PACK_PREFIX + path: data for path, data in check_changes(body.files).items()} if body.files else {}
    try:
        service.sync_proposal(proposal, user=request.user, head=body.head, resolved=resolved)
    except MergeConflict as exc:
        return Status(409, ConflictOut(detail=str(exc), paths=exc.paths, changes=changes_out(exc.changes)))
    return _detail(proposal)


@router.post(
    "/{slug}/proposals/{number}/comments",
    response={201: EventOut, **ERRORS, **INVALID},
    summary="Comment on a proposal, or on a line of its diff (reviewers and authors)",
)
def add_comment(request: StudioRequest, slug: str, number: int, body: CommentIn) -> Status[EventOut]:
    proposal, role = proposal_for(request.user, slug, number)
    if role == Role.VIEWER:
        raise Refused("viewers read proposals; reviewers and authors comment", status=403)
    service.comment(proposal, user=request.user, body=body.body, path=body.path, line=body.line)
    e = ProposalEvent.objects.filter(proposal=proposal).order_by("-pk").first()
    assert e is not None
    return Status(201, _event_out(e))


@router.post(
    "/{slug}/proposals/{number}/approve",
    response={200: ProposalOut, **ERRORS, **INVALID},
    summary="Approve a proposal's current head (reviewers and authors; not your own)",
)
def approve(request: StudioRequest, slug: str, number: int, body: ReviewIn) -> ProposalOut:
    proposal, role = proposal_for(request.user, slug, number)
    service.review(proposal, user=request.user, role=role, approve=True, body=body.body, head=body.head)
    return ProposalOut(**_out(proposal))


@router.post(
    "/{slug}/proposals/{number}/request-changes",
    response={200: ProposalOut, **ERRORS, **INVALID},
    summary="Ask for changes to a proposal's current head (reviewers and authors; not your own)",
)
def request_changes(request: StudioRequest, slug: str, number: int, body: ReviewIn) -> ProposalOut:
    proposal, role = proposal_for(request.user, slug, number)
    service.review(proposal, user=request.user, role=role, approve=False, body=body.body, head=body.head)
    return ProposalOut(**_out(proposal))


@router.post(
    "/{slug}/proposals/{number}/merge",
    response={200: MergeOut, **ERRORS, 409: ConflictOut, **INVALID},
    summary="Merge a proposal into main (authors): fast-forward or merge commit, refused on conflict",
)
def merge(request: StudioRequest, slug: str, number: int) -> MergeOut | Status[ConflictOut]:
    proposal, _ = proposal_for(request.user, slug, number, edit=True)
    try:
        merged = service.merge_proposal(proposal, user=request.user)
    except MergeConflict as exc:
        return Status(409, ConflictOut(detail=str(exc), paths=exc.paths, changes=changes_out(exc.changes)))
    return MergeOut(version=merged.sha, how=merged.how)


@router.post(
    "/{slug}/proposals/{number}/close", response={200: ProposalOut, **ERRORS, **INVALID}, summary="Close (authors)"
)
def close(request: StudioRequest, slug: str, number: int, body: ReviewIn) -> ProposalOut:
    proposal, _ = proposal_for(request.user, slug, number, edit=True)
    service.close(proposal, user=request.user, body=body.body)
    return ProposalOut(**_out(proposal))


@router.post(
    "/{slug}/proposals/{number}/reopen", response={200: ProposalOut, **ERRORS, **INVALID}, summary="Reopen (authors)"
)
def reopen(request: StudioRequest, slug: str, number: int) -> ProposalOut:
    proposal, _ = proposal_for(request.user, slug, number, edit=True)
    service.reopen(proposal, user=request.user)
    return ProposalOut(**_out(proposal))


class RulesOut(Schema):
    approvals_required: int = Field(..., description="approvals of a proposal's current head a merge needs")
    merge_needs_gate: bool = Field(..., description="whether a merge also needs checks that pass the gate")


class RulesIn(Schema):
    approvals_required: int | None = Field(None, ge=1, le=MAX_APPROVALS)
    merge_needs_gate: bool | None = None


@router.get("/{slug}/proposal-rules", response={200: RulesOut, **ERRORS}, summary="What a merge needs here")
def get_rules(request: StudioRequest, slug: str) -> RulesOut:
    project, _ = project_for(request.user, slug)
    return RulesOut(approvals_required=project.approvals_required, merge_needs_gate=project.merge_needs_gate)


@router.patch(
    "/{slug}/proposal-rules",
    response={200: RulesOut, **ERRORS, **INVALID},
    summary="Change what a merge needs (authors)",
)
def set_rules(request: StudioRequest, slug: str, body: RulesIn) -> RulesOut:
    project, _ = project_for(request.user, slug, edit=True)
    service.set_rules(project, approvals_required=body.approvals_required, merge_needs_gate=body.merge_needs_gate)
    return RulesOut(approvals_required=project.approvals_required, merge_needs_gate=project.merge_needs_gate)
