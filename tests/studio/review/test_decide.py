"""Claims and decisions: one reviewer holds an item at a time, an abandoned claim
expires, a decision is verified by the runtime, taken once, and resumes the run once."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from studio.deployments.models import RunEvent, ServedRun
from studio.review import claims
from studio.review.decide import DecisionRefused, decide
from studio.review.models import ReviewItem
from tests.support.review import GOOD


def test_it_lets_one_of_two_reviewers_claim_an_item(item: ReviewItem, reviewer: User, owner: User) -> None:
    assert claims.claim(item, reviewer)
    assert not claims.claim(ReviewItem.objects.get(pk=item.pk), owner)
    item.refresh_from_db()
    assert (item.status, item.claimed_by) == ("claimed", reviewer)


def test_it_renews_a_claim_for_its_holder(item: ReviewItem, reviewer: User) -> None:
    claims.claim(item, reviewer)
    first = item.claim_until
    assert claims.claim(item, reviewer)
    assert item.claim_until is not None and first is not None and item.claim_until >= first


def test_it_lets_another_reviewer_take_an_abandoned_claim(item: ReviewItem, reviewer: User, owner: User) -> None:
    claims.claim(item, reviewer)
    ReviewItem.objects.filter(pk=item.pk).update(claim_until=timezone.now() - timedelta(seconds=1))
    item.refresh_from_db()
    assert item.shown_status == "open"
    assert claims.claim(item, owner)
    assert item.claimed_by == owner


def test_it_opens_an_item_again_when_its_holder_releases_it(item: ReviewItem, reviewer: User, owner: User) -> None:
    claims.claim(item, reviewer)
    assert not claims.release(item, owner)
    assert claims.release(item, reviewer)
    assert (item.status, item.claimed_by) == ("open", None)


@pytest.mark.django_db(transaction=True)
def test_it_lets_exactly_one_of_two_concurrent_claims_win(item: ReviewItem, reviewer: User, owner: User) -> None:
    barrier = threading.Barrier(2)
    won: list[bool] = []

    def race(user: User) -> None:
        try:
            barrier.wait()
            won.append(claims.claim(ReviewItem.objects.get(pk=item.pk), user))
        finally:
            connection.close()

    threads = [threading.Thread(target=race, args=(u,)) for u in (reviewer, owner)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(won) == [False, True]


def test_it_approves_the_best_candidate_and_resumes_the_run(item: ReviewItem, reviewer: User) -> None:
    decided = decide(item, reviewer, "approve")
    assert decided.decision == "approve"
    item.refresh_from_db()
    assert (item.status, item.decision, item.answer, item.decided_by) == ("decided", "approve", GOOD, reviewer)
    run = ServedRun.objects.get(pk=item.run_id)
    assert (run.status, run.answer, run.answer_node, run.answered_by) == ("queued", GOOD, "extract", "human:rita")
    assert RunEvent.objects.filter(run=run, kind="review.decided").count() == 1


def test_it_records_an_approve_of_a_changed_answer_as_an_edit(item: ReviewItem, reviewer: User) -> None:
    answer = {"order_id": "ORD-48213", "amount_usd": 60.0}
    assert decide(item, reviewer, "approve", answer=answer).decision == "edit"
    assert ServedRun.objects.get(pk=item.run_id).answer == answer


def test_it_refuses_an_answer_the_runtime_refuses_and_saves_nothing(item: ReviewItem, reviewer: User) -> None:
    with pytest.raises(DecisionRefused) as refused:
        decide(item, reviewer, "edit", answer={"order_id": "48213", "amount_usd": -1})
    assert refused.value.status == 400
    assert len(refused.value.reasons) == 2 and any("order_id" in r for r in refused.value.reasons)
    item.refresh_from_db()
    assert item.status != "decided" and item.answer is None
    run = ServedRun.objects.get(pk=item.run_id)
    assert (run.status, run.answer) == ("waiting", None)
    assert not RunEvent.objects.filter(run=run).exists()


def test_it_takes_a_decision_once(item: ReviewItem, reviewer: User, owner: User) -> None:
    decide(item, reviewer, "approve")
    for user in (reviewer, owner):
        with pytest.raises(DecisionRefused) as refused:
            decide(ReviewItem.objects.get(pk=item.pk), user, "reject", note="no")
        assert refused.value.status == 409
    assert RunEvent.objects.filter(run_id=item.run_id, kind="review.decided").count() == 1
    assert ServedRun.objects.get(pk=item.run_id).status == "queued"


def test_it_refuses_a_decision_while_another_reviewer_holds_the_claim(
    item: ReviewItem, reviewer: User, owner: User
) -> None:
    claims.claim(item, owner)
    with pytest.raises(DecisionRefused, match="olive has claimed"):
        decide(ReviewItem.objects.get(pk=item.pk), reviewer, "approve")
    assert ServedRun.objects.get(pk=item.run_id).status == "waiting"


def test_it_ends_a_rejected_run_failed_with_the_note(item: ReviewItem, reviewer: User) -> None:
    decide(item, reviewer, "reject", note="the ticket is spam")
    run = ServedRun.objects.get(pk=item.run_id)
    assert run.status == "failed" and "the ticket is spam" in run.error and "human:rita" in run.error
    assert ReviewItem.objects.get(pk=item.pk).decision == "reject"


def test_it_refuses_a_rejection_without_a_note(item: ReviewItem, reviewer: User) -> None:
    with pytest.raises(DecisionRefused) as refused:
        decide(item, reviewer, "reject", note="  ")
    assert refused.value.status == 400


def test_it_decides_nothing_when_the_run_no_longer_waits(item: ReviewItem, reviewer: User) -> None:
    ServedRun.objects.filter(pk=item.run_id).update(status=ServedRun.Status.CANCELLED)
    with pytest.raises(DecisionRefused, match="no longer waits"):
        decide(item, reviewer, "approve")
    item.refresh_from_db()
    assert item.status != "decided" and item.decision == ""
