"""Add to gold: a decided item becomes an evalset case (input, decided output, path, the
reviewer's answer), one commit by the reviewer, and an eval of the new version gives
the pass rate with and without the new case."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User

from studio.deployments.models import ServedRun
from studio.evals.models import Eval
from studio.projects.storage import PackRepo
from studio.proposals.models import Proposal
from studio.review.decide import decide
from studio.review.gold import delta_of
from studio.review.models import ReviewItem
from tests.support.studio import client_for, run_all

EDITED = {"order_id": "ORD-48213", "amount_usd": 60.0}
OUTPUT = {"category": "billing", "order_id": "ORD-48213", "amount_usd": 60.0, "sentiment": "angry", "priority": "p1"}
PATH = ["classify", "extract", "sentiment", "prioritise", "billing_ops"]


def _finish(run_pk: int) -> None:
    """What the worker leaves when the resumed run ends."""
    steps: list[dict[str, Any]] = [{"node": n, "step": i + 1, "status": "ok"} for i, n in enumerate(PATH)]
    steps[-1]["status"] = "end"
    ServedRun.objects.filter(pk=run_pk).update(status="done", output=OUTPUT, trace={"steps": steps})


@pytest.fixture
def decided(item: ReviewItem, reviewer: User) -> ReviewItem:
    decide(item, reviewer, "edit", answer=EDITED, note="the customer paid 60")
    _finish(item.run_id)
    return ReviewItem.objects.get(pk=item.pk)


def _last_case(item: ReviewItem) -> dict[str, Any]:
    text = PackRepo(item.project.repo_path).files(None, prefix="pack/")["evalset.jsonl"].decode()
    return dict(json.loads(text.splitlines()[-1]))


def test_it_commits_the_case_as_the_reviewer(decided: ReviewItem, reviewer: User) -> None:
    response = client_for(reviewer).post(f"/review/{decided.pk}/gold", {"message": "Gold: the 60 dollar refund"})
    assert response.status_code == 302
    decided.refresh_from_db()
    repo = PackRepo(decided.project.repo_path)
    head = repo.log(limit=1)[0]
    assert (head.sha, head.message) == (decided.gold_commit, "Gold: the 60 dollar refund")
    assert head.author.startswith("rita <rita@example.com>")
    assert _last_case(decided) == {
        "id": f"review-{decided.pk}",
        "input": decided.run.input,
        "expected": OUTPUT,
        "path": PATH,
        "tags": ["review"],
        "note": f"from review item {decided.pk} (triage-prod/r1 at extract), edit by rita: the customer paid 60",
    }
    history = client_for(reviewer).get("/p/triage/history/").content.decode()
    assert "Gold: the 60 dollar refund" in history


def test_it_gives_the_pass_rate_with_and_without_the_new_case(decided: ReviewItem, reviewer: User) -> None:
    answer = client_for(reviewer).post(f"/api/review/items/{decided.pk}/gold", {}, content_type="application/json")
    assert answer.status_code == 200, answer.content
    decided.refresh_from_db()
    assert decided.gold_error == ""
    ev = Eval.objects.get()
    assert (decided.gold_eval, ev.version) == (ev, decided.gold_commit)
    assert answer.json()["eval_delta"]["done"] is False
    run_all(ev)
    delta = delta_of(decided)
    assert delta is not None and delta.done
    # The scripted model reads 59.98 where the reviewer decided 60: the new case fails.
    assert delta.new_case_passed is False
    assert (delta.with_total, delta.without_total) == (delta.without_total + 1, delta.with_total - 1)
    assert delta.with_passed == delta.without_passed
    assert delta.delta is not None and delta.delta < 0
    page = client_for(reviewer).get(f"/review/{decided.pk}").content.decode()
    assert f"pass rate with the new case {delta.with_passed}/{delta.with_total}" in page
    assert "the new case fails" in page


def test_it_adds_an_item_to_gold_once(decided: ReviewItem, reviewer: User, owner: User) -> None:
    assert client_for(reviewer).post(f"/review/{decided.pk}/gold").status_code == 302
    again = client_for(owner).post(f"/api/review/items/{decided.pk}/gold", {}, content_type="application/json")
    assert again.status_code == 409 and "already in the evalset" in again.json()["detail"]
    assert len(PackRepo(decided.project.repo_path).log()) == 2


def test_it_refuses_an_item_that_is_not_decided(item: ReviewItem, reviewer: User) -> None:
    response = client_for(reviewer).post(f"/review/{item.pk}/gold")
    assert response.status_code == 409 and "decide the item first" in response.content.decode()


def test_it_refuses_a_rejected_item(item: ReviewItem, reviewer: User) -> None:
    decide(item, reviewer, "reject", note="spam")
    answer = client_for(reviewer).post(f"/api/review/items/{item.pk}/gold", {}, content_type="application/json")
    assert answer.status_code == 409 and "rejected" in answer.json()["detail"]


def test_it_waits_for_the_run_to_finish(item: ReviewItem, reviewer: User) -> None:
    decide(item, reviewer, "approve")
    answer = client_for(reviewer).post(f"/api/review/items/{item.pk}/gold", {}, content_type="application/json")
    assert answer.status_code == 409 and "has not finished" in answer.json()["detail"]
    assert len(PackRepo(item.project.repo_path).log()) == 1


def test_it_refuses_a_case_that_would_break_the_pack(decided: ReviewItem, reviewer: User) -> None:
    # Said to wait at a human node, the item's case would answer `extract` under
    # `human`, which the loader refuses (extract is a model node): nothing is committed.
    ReviewItem.objects.filter(pk=decided.pk).update(reason=ReviewItem.Reason.HUMAN)
    answer = client_for(reviewer).post(f"/api/review/items/{decided.pk}/gold", {}, content_type="application/json")
    assert answer.status_code == 400 and "the case would not load" in answer.json()["detail"]
    assert len(PackRepo(decided.project.repo_path).log()) == 1
    assert ReviewItem.objects.get(pk=decided.pk).gold_commit == ""


def test_it_answers_a_refused_htmx_add_with_the_gold_fragment(item: ReviewItem, reviewer: User) -> None:
    headers = {"HX-Request": "true", "HX-Target": "review-gold"}
    response = client_for(reviewer).post(f"/review/{item.pk}/gold", headers=headers)
    body = response.content.decode().strip()
    assert response.status_code == 409 and body.startswith('<div id="review-gold">')
    assert "Not added to gold: decide the item first." in body


def test_it_adds_an_item_to_gold_as_a_proposal(decided: ReviewItem, reviewer: User) -> None:
    repo = PackRepo(decided.project.repo_path)
    main = repo.head()
    answer = client_for(reviewer).post(
        f"/api/review/items/{decided.pk}/gold", {"propose": True}, content_type="application/json"
    )
    assert answer.status_code == 200, answer.content
    decided.refresh_from_db()
    proposal = Proposal.objects.get()
    assert repo.head() == main, "main waits for the proposal's review"
    assert (proposal.source, proposal.author, proposal.base) == ("review", reviewer, main)
    assert (answer.json()["gold_proposal"], decided.gold_commit) == (proposal.number, proposal.head)
    assert decided.gold_eval == proposal.head_eval and decided.gold_eval is not None
    added = json.loads(repo.files(proposal.head, prefix="pack/")["evalset.jsonl"].decode().splitlines()[-1])
    assert added["id"] == f"review-{decided.pk}" and added["expected"] == OUTPUT
    page = client_for(reviewer).get(f"/review/{decided.pk}").content.decode()
    assert f"proposal #{proposal.number}" in page


def test_a_closed_gold_proposal_frees_its_item(decided: ReviewItem, reviewer: User, owner: User) -> None:
    client_for(reviewer).post(
        f"/api/review/items/{decided.pk}/gold", {"propose": True}, content_type="application/json"
    )
    number = ReviewItem.objects.get(pk=decided.pk).gold_proposal
    closed = client_for(owner).post(
        f"/api/projects/triage/proposals/{number}/close", {}, content_type="application/json"
    )
    assert closed.status_code == 200
    item = ReviewItem.objects.get(pk=decided.pk)
    assert (item.gold_commit, item.gold_proposal) == ("", None)
    again = client_for(reviewer).post(f"/api/review/items/{decided.pk}/gold", {}, content_type="application/json")
    assert again.status_code == 200, again.content
