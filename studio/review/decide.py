"""Deciding a review item: approve, edit or reject, verified, committed once.

1. The decider takes (or renews) the claim (studio/review/claims.py); another
   reviewer's live claim refuses the decision.
2. An answer (approve: the best candidate, or the form's values; edit: the reviewer's)
   is checked by the runtime against the node's schema for the run's state and its
   `assert` (`runtime.check_answer`), exactly as a model's answer would be. A refused
   answer changes nothing: the reasons go back to the form.
3. One transaction: a conditional UPDATE moves the item from "claimed by the decider,
   claim live" to "decided" (the guard: of two racing decisions one matches), and the
   deployments app resumes the run (`resume_served_run`: the answer is committed with
   provenance `human:<user>` by the resume task) or, on reject, ends it failed with the
   note (`reject_served_run`). Both guard on the run still waiting at the node; when it
   is not (cancelled meanwhile) the whole transaction rolls back and the decision is
   refused. So the run is resumed exactly once.

Reject means: the run ends `failed`, its error "rejected by human:<user> at <node>:
<note>"; the webhook and the `run.end` event say so. It is not resumed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from runtime import check_answer
from studio import packs
from studio.deployments.service import reject_served_run, resume_served_run
from studio.errors import Refused
from studio.review import claims
from studio.review.models import ReviewItem

D = ReviewItem.Decision
S = ReviewItem.Status


class DecisionRefused(Refused):
    """The decision was not taken; `status` is the HTTP status that says why (409: the
    item is held by someone else, decided, or its run no longer waits; 400: the answer
    fails verification (`reasons` says how) or the request is incomplete)."""

    def __init__(self, message: str, status: int = 409, reasons: list[str] | None = None) -> None:
        super().__init__(message, status=status)
        self.reasons = list(reasons or [])

    def body(self) -> dict[str, Any]:
        """The API's answer with the verification's `reasons` (review's RefusedOut)."""
        return {"detail": self.message, "reasons": self.reasons}


@dataclass
class Decided:
    item: ReviewItem
    decision: str
    answer: Any = None
    reasons: list[str] = field(default_factory=list)


def _same(a: Any, b: Any) -> bool:
    """The same JSON value: a number typed as 0.0 in the form is the candidate's 0."""
    return bool(a == b)


def verify(item: ReviewItem, answer: Any) -> list[str]:
    """Why the runtime would refuse `answer` at the item's node ([] when it would commit it)."""
    try:
        with packs.loaded(item.project, item.run.version, own_model=False) as got:
            return check_answer(got.pack, item.node, item.state, answer)
    except packs.PackUnrunnable as exc:
        return [f"the pack at the run's version does not load: {exc}"]
    except KeyError:
        return [f"the pack at the run's version has no node {item.node!r}"]


def decide(item: ReviewItem, user: User, decision: str, *, answer: Any = None, note: str = "") -> Decided:
    """Take `decision` on `item` for `user` (see the module's docstring)."""
    note = (note or "").strip()
    if decision not in D.values:
        raise DecisionRefused(f"decision must be one of {', '.join(D.values)}", 400)
    if item.is_decided:
        raise DecisionRefused(_decided_text(item))
    if decision == D.REJECT:
        if not note:
            raise DecisionRefused("a rejection needs a note: it becomes the run's error", 400)
        answer = None
    else:
        if answer is None:
            answer = item.best
        if answer is None:
            raise DecisionRefused("there is no candidate to approve; edit the answer instead", 400)
        if decision == D.APPROVE and not _same(answer, item.best):
            decision = D.EDIT  # the record says what happened: the answer is not the models'
    if not claims.claim(item, user):
        if item.is_decided:
            raise DecisionRefused(_decided_text(item))
        raise DecisionRefused(f"{claims.holder(item) or 'another reviewer'} has claimed this item")
    if answer is not None:
        reasons = verify(item, answer)
        if reasons:
            raise DecisionRefused("the answer cannot be committed: " + "; ".join(reasons), 400, reasons)
    run = item.run
    with transaction.atomic():
        won = ReviewItem.objects.filter(
            pk=item.pk, status=S.CLAIMED, claimed_by=user, claim_until__gte=timezone.now()
        ).update(
            status=S.DECIDED, decision=decision, answer=answer, note=note, decided_by=user, decided_at=timezone.now()
        )
        if not won:
            item.refresh_from_db()
            raise DecisionRefused(_decided_text(item) if item.is_decided else "your claim on this item lapsed")
        if decision == D.REJECT:
            moved = reject_served_run(run, item.node, note, user)
        else:
            moved = resume_served_run(run, item.node, answer, user)
        if not moved:
            transaction.set_rollback(True)
    if not moved:
        run.refresh_from_db()
        item.refresh_from_db()
        raise DecisionRefused(f"the run no longer waits at {item.node} (it is {run.status}); nothing was decided")
    item.refresh_from_db()
    return Decided(item, decision, answer)


def _decided_text(item: ReviewItem) -> str:
    who = item.decided_by.username if item.decided_by is not None else "someone"
    return f"this item was already decided ({item.decision}) by {who}"
