"""The queue page (counts and age per deployment and node, oldest first, filters,
keyboard, a live list fragment) and the item page (input, trace so far, question,
candidates with tier and disagreement, the form; a refused answer's reasons)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from studio.deployments.models import ServedRun
from studio.review import claims
from studio.review.items import open_item
from studio.review.models import ReviewItem
from tests.support.css import REVIEW_CSS, STUDIO_CSS, rules
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


def test_the_item_page_carries_its_projects_tabs(item: ReviewItem, reviewer: User) -> None:
    page = client_for(reviewer).get(f"/review/{item.pk}").content.decode()
    nav = page[page.index('<nav class="tabs project-nav"') :]
    nav = nav[: nav.index("</nav>")]
    assert 'aria-label="Project triage"' in nav
    for name in ("projects-overview", "projects-files", "evals-history", "deployments-list", "runs-new"):
        assert f'href="{reverse(name, args=["triage"])}"' in nav, name
    assert page.index('class="tabs project-nav"') < page.index("<h1>")


def test_the_item_page_shows_a_steps_writes_as_json_that_scrolls_in_its_cell(item: ReviewItem, reviewer: User) -> None:
    page = client_for(reviewer).get(f"/review/{item.pk}").content.decode()
    assert '<pre class="writes">{\n  &quot;category&quot;: &quot;billing&quot;\n}</pre>' in page  # JSON, not a repr
    assert "&#x27;category&#x27;" not in page
    css = rules(STUDIO_CSS, REVIEW_CSS)
    for where in (".candidates pre", ".steps pre.writes"):  # in a cell: bounded, and it scrolls
        assert css[where]["overflow"] == "auto" and css[where]["max-width"].endswith("rem"), where
    assert css[".steps pre.writes"]["white-space"] == "pre"  # a long line scrolls, it is not cut or wrapped away
    assert css[".review-grid > section"] == {"min-width": "0", "overflow-x": "auto"}
    assert css["pre"]["overflow"] == "auto" and css["pre"]["max-width"] == "100%"  # every page's JSON box scrolls
    assert css[".code-editor textarea.code"]["overflow"] == "auto"  # and the editor's


def test_the_item_page_says_what_each_button_does_and_where_the_run_waits(item: ReviewItem, reviewer: User) -> None:
    page = client_for(reviewer).get(f"/review/{item.pk}").content.decode()
    assert ">Approve as shown (a)</button>" in page
    help_text = " ".join(page[page.index('id="decide-help"') :].split("</p>")[0].split())
    assert "<b>Approve</b> accepts the answer exactly as the fields above show it" in help_text
    assert "<b>Reject</b> gives no answer: the run ends failed" in help_text
    waits = " ".join(page[page.index('id="where-it-waits"') :].split("</p>")[0].split())
    assert 'waits at model node <span class="mono">extract</span> itself' in waits
    assert "an eval run without tiers takes that edge" in waits


def test_an_item_at_a_human_node_says_the_run_reached_the_packs_human_node(
    make_waiting: Callable[..., ServedRun], reviewer: User
) -> None:
    made = open_item(make_waiting(run_id="h1", waiting_at="review", waiting_reason="human", candidates=[]))
    assert made is not None and made.reason == "human"
    page = client_for(reviewer).get(f"/review/{made.pk}").content.decode()
    waits = " ".join(page[page.index('id="where-it-waits"') :].split("</p>")[0].split())
    assert "a <code>human</code> node of the pack" in waits and "no tier" not in waits
