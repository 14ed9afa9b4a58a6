"""Add to gold: a decided item becomes an evalset case, committed by the reviewer.

The case is the run's input, the decided output (the run's output once it finished
after the decision), the path it took (its nodes, in order), and, for a human node,
the reviewer's answer under `human` (so an eval that reaches that node is answered as
the reviewer answered; an evalset's `human` names human nodes only). A case that would
make the pack fail to load is refused, nothing committed. It is appended to the project's pack/evalset.jsonl as one commit
by the reviewer (shown in the project's history like any change).

The eval delta: one eval of the new commit (the project's pack with the case added),
on the deployment's first tier (its smallest model; the pack's own model when the
deployment has no tiers), started through the studio's eval start code. The pass rate
"with" the case is over every case of that eval, "without" over every case but the
new one: the same run, so the delta is the new case's effect alone, with no second
eval's noise. Shown on the item once the eval is done. A refused eval start (say the
evalset is over the case limit) keeps the commit and records why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User

from studio.deployments.models import ServedRun
from studio.errors import Refused
from studio.evals.evalset_case import CaseRefused, Saved, commit_case
from studio.evals.models import Eval, EvalCase
from studio.evals.start import EvalRefused, start_eval
from studio.proposals.models import Proposal
from studio.review.models import ReviewItem

RESERVED = "pending"  # gold_commit while one request is committing: a second one is refused
TAGS = ["review"]


class GoldRefused(Refused):
    """The item was not added to gold; the message says why (409 unless told)."""

    def __init__(self, message: str, status: int = 409) -> None:
        super().__init__(message, status=status)


def why_not(item: ReviewItem) -> str:
    """Why the item cannot be added to gold now ("" when it can)."""
    if item.gold_commit:
        return "this item is already in the evalset" if item.gold_commit != RESERVED else "it is being added"
    if not item.is_decided:
        return "decide the item first"
    if item.decision == ReviewItem.Decision.REJECT:
        return "a rejected item has no decided output to keep"
    if item.run.status != ServedRun.Status.DONE:
        return f"the run has not finished with an output yet (it is {item.run.status})"
    return ""


def path_of(trace: dict[str, Any]) -> list[str]:
    return [str(s.get("node")) for s in trace.get("steps") or [] if s.get("status") != "wait"]


def case_for(item: ReviewItem, taken: set[str]) -> dict[str, Any]:
    run = item.run
    case_id = f"review-{item.pk}"
    n = 2
    while case_id in taken:
        case_id, n = f"review-{item.pk}-{n}", n + 1
    who = item.decided_by.username if item.decided_by is not None else "a reviewer"
    note = f"from review item {item.pk} ({item.deployment.name}/{run.run_id} at {item.node}), {item.decision} by {who}"
    if item.note:
        note += f": {item.note}"
    case: dict[str, Any] = {
        "id": case_id,
        "input": run.input,
        "expected": run.output or {},
        "path": path_of(run.trace or {}),
        "tags": TAGS,
    }
    if item.reason != ReviewItem.Reason.ESCALATED:
        # A human node's answer (an evalset's `human` names human nodes only): an eval
        # that reaches it is answered as the reviewer answered. An escalated model node's
        # answer is in the expected output; the eval asks the model again.
        case["human"] = {item.node: item.answer}
    case["note"] = note
    return case


def add_to_gold(item: ReviewItem, user: User, message: str = "", *, propose: bool = False) -> ReviewItem:
    """Commit the item's case on the project's evalset and start the eval that measures
    it; GoldRefused when it cannot be added (see why_not). With `propose`, the case opens
    a proposal instead (docs/proposals.md), and its checks' head eval is the one that
    measures it."""
    problem = why_not(item)
    if problem:
        raise GoldRefused(problem)
    if not ReviewItem.objects.filter(pk=item.pk, gold_commit="").update(gold_commit=RESERVED):
        raise GoldRefused("this item is already in the evalset")
    try:
        saved = _commit(item, user, message, propose)
    except BaseException:
        ReviewItem.objects.filter(pk=item.pk, gold_commit=RESERVED).update(gold_commit="")
        raise
    if saved.proposal is not None:
        made = Proposal.objects.get(project=item.project, number=saved.proposal)
        ev, error = made.head_eval, made.checks_error
    else:
        ev, error = _start_eval(item, user, saved.sha)
    ReviewItem.objects.filter(pk=item.pk).update(
        gold_commit=saved.sha, gold_case=saved.case_id, gold_eval=ev, gold_error=error, gold_proposal=saved.proposal
    )
    item.refresh_from_db()
    return item


def _commit(item: ReviewItem, user: User, message: str, propose: bool) -> Saved:
    def subject(case: dict[str, Any]) -> str:
        return message.strip() or f"Add review item {item.pk} to gold ({item.deployment.name} at {item.node})"

    try:
        return commit_case(item.project, user, lambda taken: case_for(item, taken), subject, propose=propose)
    except CaseRefused as exc:
        raise GoldRefused(str(exc), exc.status) from None


def _start_eval(item: ReviewItem, user: User, sha: str) -> tuple[Eval | None, str]:
    tiers = item.deployment.tiers or []
    endpoint = tiers[0] if tiers else None
    try:
        made = start_eval(item.project, user=user, version=sha, endpoints=[endpoint])
    except EvalRefused as exc:
        return None, f"the eval could not start: {exc}"
    return made[0], ""


@dataclass
class Delta:
    done: bool
    finished: int
    total: int
    with_passed: int = 0
    with_total: int = 0
    without_passed: int = 0
    without_total: int = 0
    new_case_passed: bool | None = None

    @staticmethod
    def rate(passed: int, total: int) -> float | None:
        return passed / total if total else None

    @property
    def with_rate(self) -> float | None:
        return self.rate(self.with_passed, self.with_total)

    @property
    def without_rate(self) -> float | None:
        return self.rate(self.without_passed, self.without_total)

    @property
    def delta(self) -> float | None:
        a, b = self.with_rate, self.without_rate
        return None if a is None or b is None else a - b

    def as_dict(self) -> dict[str, Any]:
        return {
            "done": self.done,
            "finished": self.finished,
            "total": self.total,
            "with": {"passed": self.with_passed, "total": self.with_total, "rate": self.with_rate},
            "without": {"passed": self.without_passed, "total": self.without_total, "rate": self.without_rate},
            "delta": self.delta,
            "new_case_passed": self.new_case_passed,
        }


def delta_of(item: ReviewItem) -> Delta | None:
    """The eval delta so far (None when no eval was started)."""
    ev = item.gold_eval
    if ev is None:
        return None
    ev.refresh_from_db(fields=["status"])
    rows = list(EvalCase.objects.filter(eval=ev).values_list("case_id", "status"))
    final = [(c, s) for c, s in rows if s in EvalCase.FINAL and s != EvalCase.Status.CANCELLED]
    out = Delta(done=ev.is_final, finished=len(final), total=len(rows))
    for case_id, status in final:
        passed = status == EvalCase.Status.PASSED
        out.with_total += 1
        out.with_passed += passed
        if case_id == item.gold_case:
            out.new_case_passed = passed if out.new_case_passed is None else out.new_case_passed and passed
        else:
            out.without_total += 1
            out.without_passed += passed
    return out
