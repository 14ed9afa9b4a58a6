"""Review items are made when a served run goes waiting: one per wait, holding the
question, the candidates (tier, status, where they disagree), the node's schema for the
run's state, and the best candidate."""

from __future__ import annotations

from collections.abc import Callable

from studio.deployments.models import ServedRun
from studio.deployments.signals import run_waiting
from studio.review.items import best_candidate, reason_of
from studio.review.models import ReviewItem
from tests.support.review import GOOD


def test_it_makes_an_item_on_the_run_waiting_signal(waiting: ServedRun) -> None:
    run_waiting.send(sender=ServedRun, run=waiting)
    item = ReviewItem.objects.get()
    assert (item.run, item.node, item.step, item.reason, item.status) == (waiting, "extract", 2, "escalated", "open")
    assert item.question == "Copy two facts out of this support ticket."
    assert [c["tier"] for c in item.candidates] == ["small", "small", "small"]
    assert item.disagreement == ["amount_usd"]
    assert item.schema is not None and item.schema["properties"]["order_id"]["pattern"] == "^ORD-[0-9]{5}$"
    assert item.state == {"category": "billing", "input": waiting.input}
    assert item.best == GOOD  # a tie of verified answers: the latest


def test_it_makes_one_item_per_wait_when_the_signal_comes_twice(waiting: ServedRun) -> None:
    run_waiting.send(sender=ServedRun, run=waiting)
    run_waiting.send(sender=ServedRun, run=waiting)
    assert ReviewItem.objects.count() == 1


def test_it_makes_no_item_for_a_run_that_is_not_waiting(make_waiting: Callable[..., ServedRun]) -> None:
    run = make_waiting(status=ServedRun.Status.CANCELLED)
    run_waiting.send(sender=ServedRun, run=run)
    assert not ReviewItem.objects.exists()


def test_it_has_no_best_candidate_when_every_answer_was_rejected(make_waiting: Callable[..., ServedRun]) -> None:
    run = make_waiting(
        candidates=[{"tier": "small", "answer": None, "status": "rejected", "reason": "parse: not JSON"}]
    )
    run_waiting.send(sender=ServedRun, run=run)
    assert ReviewItem.objects.get().best is None


def test_it_prefers_the_highest_tier_and_the_most_frequent_answer() -> None:
    a, b = {"x": 1}, {"x": 2}
    found = [
        {"tier": "small", "answer": a, "status": "unsure"},
        {"tier": "large", "answer": b, "status": "unsure"},
        {"tier": "large", "answer": a, "status": "unsure"},
        {"tier": "large", "answer": b, "status": "unsure"},
        {"tier": "large", "answer": {"x": 9}, "status": "rejected"},
    ]
    assert best_candidate(found, ["small", "large"], {"properties": {"x": {}}}) == b


def test_it_says_unsure_for_a_human_node_an_on_unsure_edge_led_to() -> None:
    trace = {
        "steps": [
            {"node": "approve", "step": 3, "status": "unsure", "edge": {"kind": "on_unsure", "target": "review"}},
            {"node": "review", "step": 4, "status": "wait", "reason": "human"},
        ]
    }
    assert reason_of(trace, trace["steps"][1]) == "unsure"
    trace["steps"][0]["edge"] = {"kind": "on_fail", "target": "review"}
    assert reason_of(trace, trace["steps"][1]) == "human"
