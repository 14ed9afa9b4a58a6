"""The queue page (counts and age per deployment and node, oldest first, filters,
keyboard, a live list fragment) and the item page (input, trace so far, question,
candidates with tier and disagreement, the form; a refused answer's reasons)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from django.contrib.auth.models import User
from django.utils import timezone

from studio.deployments.models import ServedRun
from studio.review import claims
from studio.review.items import open_item
from studio.review.models import ReviewItem
from tests.support.studio import client_for

HX = {"HX-Request": "true", "HX-Target": "review-list"}


def _items(make_waiting: Callable[..., ServedRun], n: int) -> list[ReviewItem]:
    made = []
    for i in range(n):
        item = open_item(make_waiting(run_id=f"r{i}"))
        assert item is not None
        ReviewItem.objects.filter(pk=item.pk).update(created_at=timezone.now() - timedelta(minutes=10 * (n - i)))
        made.append(item)
    return made


def test_it_lists_items_oldest_first_with_counts_per_deployment_and_node(
    make_waiting: Callable[..., ServedRun], reviewer: User
) -> None:
    first, second, third = _items(make_waiting, 3)
    page = client_for(reviewer).get("/review/").content.decode()
    assert (
        page.index(f'id="item-{first.pk}"') < page.index(f'id="item-{second.pk}"') < page.index(f'id="item-{third.pk}"')
    )
    assert (
        '<td class="mono">triage-prod</td><td class="mono">extract</td><td class="count-cell">3</td><td>30m</td>'
        in page
    )
    assert "review.js" in page and "<kbd>j</kbd>" in page


def test_it_answers_the_poller_with_the_list_fragment(item: ReviewItem, reviewer: User, owner: User) -> None:
    client = client_for(reviewer)
    body = client.get("/review/", headers=HX).content.decode()
    assert body.strip().startswith('<div id="review-list"') and "<html" not in body
    assert 'hx-trigger="every 2s"' in body
    claims.claim(item, owner)
    assert "claimed by olive" in client.get("/review/", headers=HX).content.decode()


def test_it_filters_by_deployment_node_reason_and_status(
    make_waiting: Callable[..., ServedRun], reviewer: User, owner: User
) -> None:
    a, b = _items(make_waiting, 2)
    claims.claim(b, owner)
    client = client_for(reviewer)

    def listed(query: str) -> set[int]:
        return {i["id"] for i in client.get(f"/api/review/items?{query}").json()["items"]}

    assert listed("") == {a.pk, b.pk}
    assert listed("status=open") == {a.pk}
    assert listed("status=claimed") == {b.pk}
    assert listed("node=classify") == set()
    assert listed("reason=human") == set()
    assert listed("reason=escalated&deployment=triage-prod") == {a.pk, b.pk}
    page = client.get("/review/?status=claimed").content.decode()
    assert f'id="item-{b.pk}"' in page and f'id="item-{a.pk}"' not in page


def test_it_leaves_items_of_runs_that_no_longer_wait_off_the_queue(item: ReviewItem, reviewer: User) -> None:
    ServedRun.objects.filter(pk=item.run_id).update(status=ServedRun.Status.CANCELLED)
    client = client_for(reviewer)
    assert client.get("/api/review/items").json()["total"] == 0
    assert client.get("/api/review/items?status=all").json()["total"] == 1


def test_it_shows_input_trace_question_candidates_and_the_pre_filled_form(item: ReviewItem, reviewer: User) -> None:
    page = client_for(reviewer).get(f"/review/{item.pk}").content.decode()
    assert "I was charged TWICE" in page  # the input
    assert '<td><b>classify</b> <span class="muted">generate</span></td>' in page  # the trace so far
    assert "Copy two facts out of this support ticket." in page  # the question
    assert 'The models disagreed on: <span class="badge differs">amount_usd</span>' in page
    assert "differs on amount_usd" in page
    assert '<input type="text" name="a_order_id" value="ORD-48213"' in page
    assert 'name="a_amount_usd"' in page and 'value="59.98"' in page
    assert 'id="decide-form"' in page


def test_it_shows_rejected_candidates_text_to_authors_only(item: ReviewItem, reviewer: User, owner: User) -> None:
    assert "&lt;b&gt;ORD-9&lt;/b&gt;" not in client_for(reviewer).get(f"/review/{item.pk}").content.decode()
    assert "&lt;b&gt;ORD-9&lt;/b&gt;" in client_for(owner).get(f"/review/{item.pk}").content.decode()
    api = client_for(reviewer).get(f"/api/review/items/{item.pk}").json()
    assert [c.get("hidden", False) for c in api["candidates"]] == [False, False, True]


def test_it_shows_no_form_to_a_viewer(item: ReviewItem, viewer: User) -> None:
    page = client_for(viewer).get(f"/review/{item.pk}").content.decode()
    assert 'id="decide-form"' not in page and "your role is viewer" in page


def test_it_shows_the_reasons_of_a_refused_edit_and_saves_nothing(item: ReviewItem, reviewer: User) -> None:
    response = client_for(reviewer).post(
        f"/review/{item.pk}/decide", {"decision": "edit", "a_order_id": "48213", "a_amount_usd": "1"}
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert 'id="answer-reasons"' in page and "order_id" in page and "Nothing was saved" in page
    assert 'name="a_order_id" value="48213"' in page  # what was typed is kept
    assert ReviewItem.objects.get(pk=item.pk).status != "decided"
    assert ServedRun.objects.get(pk=item.run_id).status == "waiting"


def test_it_approves_from_the_queue_without_answer_fields(item: ReviewItem, reviewer: User) -> None:
    response = client_for(reviewer).post(f"/review/{item.pk}/decide", {"decision": "approve", "next": "queue"})
    assert response.status_code == 302 and response["Location"] == "/review/"
    assert ReviewItem.objects.get(pk=item.pk).answer == {"order_id": "ORD-48213", "amount_usd": 59.98}


def test_it_tells_a_second_reviewer_the_item_is_decided(item: ReviewItem, reviewer: User, owner: User) -> None:
    client_for(reviewer).post(f"/review/{item.pk}/decide", {"decision": "approve"})
    response = client_for(owner).post(f"/review/{item.pk}/decide", {"decision": "approve"})
    assert response.status_code == 409
    assert "already decided (approve) by rita" in response.content.decode()


def test_it_stops_the_item_poller_once_the_run_ended(item: ReviewItem, reviewer: User) -> None:
    client = client_for(reviewer)
    headers = {"HX-Request": "true", "HX-Target": "item-status"}
    assert client.get(f"/review/{item.pk}?poll=1", headers=headers).status_code == 200
    client.post(f"/review/{item.pk}/decide", {"decision": "reject", "note": "spam"})
    response = client.get(f"/review/{item.pk}?poll=1", headers=headers)
    assert response.status_code == 286
    assert "rejected by human:rita at extract: spam" in response.content.decode()


def test_it_records_the_untouched_form_as_an_approve(make_waiting: Callable[..., ServedRun], reviewer: User) -> None:
    best = {"order_id": "ORD-48213", "amount_usd": 60}
    item = open_item(make_waiting(candidates=[{"tier": "small", "answer": best, "status": "unsure", "reason": ""}]))
    assert item is not None
    client_for(reviewer).post(
        f"/review/{item.pk}/decide", {"decision": "approve", "a_order_id": "ORD-48213", "a_amount_usd": "60"}
    )
    assert ReviewItem.objects.get(pk=item.pk).decision == "approve"  # 60.0 from the number input is the candidate's 60
