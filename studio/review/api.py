"""The review queue API (gathered into studio.api under /api/review): list, get, claim,
release, decide, add to gold. The same rules as the pages (studio/review/access.py):
members read, reviewers and authors work, strangers get 404. A token scoped to a
deployment (it may only submit and read that deployment's runs) gets 403 here, as on
every route but those runs (studio.accounts.auth)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from ninja import Router, Schema, Status

from studio.accounts.models import Role
from studio.errors import CONFLICT, ERRORS, INVALID, Conflict, Refused
from studio.http import StudioRequest
from studio.numbers import whole_number
from studio.review import claims, gold, present
from studio.review.access import can_work, item_for
from studio.review.decide import decide
from studio.review.models import ReviewItem
from studio.review.queue import MAX_OFFSET, PAGE, Filters, counts, items_for, page_of

router = Router(tags=["review"])


class CountOut(Schema):
    deployment: str
    node: str
    count: int
    oldest: datetime
    age_s: float


class ItemOut(Schema):
    id: int
    project: str
    deployment: str
    run_id: str
    run_status: str
    node: str
    reason: str
    status: str  # open | claimed | decided (a lapsed claim is open)
    claimed_by: str | None
    claim_until: datetime | None
    created_at: datetime
    decision: str
    decided_by: str | None
    decided_at: datetime | None
    note: str
    gold_case: str
    gold_commit: str
    gold_proposal: int | None  # the proposal's number, when the case was added as one


class ItemDetailOut(ItemOut):
    question: str
    input: Any
    state: dict[str, Any]
    answer_schema: dict[str, Any] | None  # the node's JSON schema for the run's state
    candidates: list[dict[str, Any]]
    disagreement: list[str]
    best: Any
    answer: Any
    trace: dict[str, Any]
    output: Any
    can_work: bool
    eval_delta: dict[str, Any] | None


class ListOut(Schema):
    total: int
    counts: list[CountOut]
    items: list[ItemOut]


class DecideIn(Schema):
    decision: Literal["approve", "edit", "reject"]
    answer: Any = None  # approve: leave out for the best candidate; edit: required
    note: str = ""


class DecidedOut(Schema):
    item: ItemDetailOut
    decision: str


class RefusedOut(Schema):
    detail: str
    reasons: list[str] = []


class GoldIn(Schema):
    message: str = ""
    propose: bool = False  # open a proposal with the case instead of committing to main


def _summary(item: ReviewItem) -> dict[str, Any]:
    return {
        "id": item.pk,
        "project": item.project.slug,
        "deployment": item.deployment.name,
        "run_id": item.run.run_id,
        "run_status": item.run.status,
        "node": item.node,
        "reason": item.reason,
        "status": item.shown_status,
        "claimed_by": claims.holder(item) or None,
        "claim_until": item.claim_until if item.claim_live() else None,
        "created_at": item.created_at,
        "decision": item.decision,
        "decided_by": item.decided_by.username if item.decided_by is not None else None,
        "decided_at": item.decided_at,
        "note": item.note,
        "gold_case": item.gold_case,
        "gold_commit": item.gold_commit if item.gold_commit != gold.RESERVED else "",
        "gold_proposal": item.gold_proposal,
    }


def _detail(item: ReviewItem, role: Role) -> ItemDetailOut:
    delta = gold.delta_of(item)
    return ItemDetailOut(
        **_summary(item),
        question=item.question,
        input=item.run.input,
        state=item.state,
        answer_schema=item.schema,
        candidates=[
            {k: v for k, v in c.items() if k not in ("answer_json",)} for c in present.visible_candidates(item, role)
        ],
        disagreement=item.disagreement,
        best=item.best,
        answer=item.answer,
        trace=present.trace_for(item, role),
        output=item.run.output,
        can_work=can_work(role),
        eval_delta=delta.as_dict() if delta is not None else None,
    )


@router.get("/items", response={200: ListOut, **ERRORS, **INVALID}, summary="The review queue")
def list_items(
    request: StudioRequest,
    deployment: str = "",
    node: str = "",
    reason: str = "",
    status: str = "todo",
    offset: int = 0,
    limit: int = PAGE,
) -> ListOut:
    """Items of the caller's projects, oldest first; `status`: todo (open or claimed, the
    default), open, claimed, decided, all. `counts`: per deployment and node."""
    if whole_number(offset, maximum=MAX_OFFSET) is None or not 1 <= limit <= 500:
        raise Refused(f"offset must be from 0 to {MAX_OFFSET} and limit from 1 to 500")
    filters = Filters.of({"deployment": deployment, "node": node, "reason": reason, "status": status})
    items = items_for(request.user, filters)
    groups = counts(items)
    return ListOut(
        total=sum(g.count for g in groups),
        counts=[
            CountOut(deployment=g.deployment, node=g.node, count=g.count, oldest=g.oldest, age_s=g.age_s)
            for g in groups
        ],
        items=[ItemOut(**_summary(i)) for i in page_of(items, offset, limit)],
    )


@router.get("/items/{item_id}", response={200: ItemDetailOut, **ERRORS, **INVALID}, summary="One review item")
def get_item(request: StudioRequest, item_id: int) -> ItemDetailOut:
    item, role = item_for(request.user, item_id)
    return _detail(item, role)


@router.post(
    "/items/{item_id}/claim", response={200: ItemDetailOut, **ERRORS, **CONFLICT, **INVALID}, summary="Claim an item"
)
def claim_item(request: StudioRequest, item_id: int) -> ItemDetailOut:
    """Take (or renew) the claim: 409 when another reviewer holds it or it is decided."""
    item, role = item_for(request.user, item_id, work=True)
    if not claims.claim(item, request.user):
        if item.is_decided:
            raise Conflict("this item was already decided")
        raise Conflict(f"{claims.holder(item) or 'another reviewer'} has claimed this item")
    return _detail(item, role)


@router.post("/items/{item_id}/release", response={200: ItemDetailOut, **ERRORS, **INVALID}, summary="Give a claim up")
def release_item(request: StudioRequest, item_id: int) -> ItemDetailOut:
    item, role = item_for(request.user, item_id, work=True)
    claims.release(item, request.user)
    return _detail(item, role)


@router.post(
    "/items/{item_id}/decide",
    response={**ERRORS, 200: DecidedOut, 400: RefusedOut, 409: RefusedOut, **INVALID},
    summary="Approve, edit or reject an item",
)
def decide_item(request: StudioRequest, item_id: int, payload: DecideIn) -> Any:
    """approve: the best candidate (or `answer`, which must equal it, else it is recorded
    as an edit); edit: `answer`; reject: `note` (the run ends failed with it). The answer
    is verified by the runtime: 400 with `reasons` when it may not be committed."""
    item, role = item_for(request.user, item_id, work=True)
    if payload.decision == "edit" and payload.answer is None:
        return Status(400, RefusedOut(detail="an edit needs an answer"))
    decided = decide(item, request.user, payload.decision, answer=payload.answer, note=payload.note)
    return Status(200, DecidedOut(item=_detail(decided.item, role), decision=decided.decision))


@router.post(
    "/items/{item_id}/gold",
    response={200: ItemDetailOut, **ERRORS, **CONFLICT, **INVALID},
    summary="Add a decided item to gold",
)
def gold_item(request: StudioRequest, item_id: int, payload: GoldIn) -> ItemDetailOut:
    """Commit the item as an evalset case (input, decided output, path, the answer under
    `human`) by the caller, and start the eval that gives the delta (`eval_delta`)."""
    item, role = item_for(request.user, item_id, work=True)
    item = gold.add_to_gold(item, request.user, payload.message, propose=payload.propose)
    return _detail(item, role)
