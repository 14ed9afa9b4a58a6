"""The model planner against a real OpenAI-compatible HTTP server on loopback
(tests/support/fault_server.py) that answers from a script."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from compiler import PLAN_SCHEMA, Feedback, ModelPlanner, PlannerFailed, PlanRequest, catalogue, induce, load_spec
from runtime import Cancelled, load_tools
from tests.support.fault_server import FaultServer
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
GOOD = json.loads((ROOT / "specs" / "refund_desk" / "plans" / "1.json").read_text())
# Valid JSON of the plan's shape, but wrong: an edge to a node that does not exist.
BAD = {**GOOD, "edges": [*GOOD["edges"], {"from": "intent", "to": "nowhere"}]}


@pytest.fixture
def request_() -> PlanRequest:
    spec = load_spec(ROOT / "specs" / "refund_desk")
    registry = load_tools(f"{ROOT / 'packs' / 'refund_desk' / 'tools.py'}:registry")
    induction = induce([(c.input, c.expected) for c in spec.gold], list(spec.outputs), declared=spec.declared_values())
    return PlanRequest(spec, induction, catalogue(registry, spec.tools), attempt=1)


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer() as s:
        yield s


def scripted(*answers: Any) -> Any:
    """Answer each request with the next text (JSON-encoded unless already a string)."""
    queue = [a if isinstance(a, str) else json.dumps(a) for a in answers]
    lock = threading.Lock()

    def answer(body: dict[str, Any]) -> str:
        with lock:
            return queue.pop(0) if len(queue) > 1 else queue[0]

    return answer


def messages(server: FaultServer, k: int) -> list[dict[str, str]]:
    body = server.completions()[k].body
    assert isinstance(body, dict)
    return list(body["messages"])


def test_it_re_asks_with_the_problems_and_returns_the_valid_plan(server: FaultServer, request_: PlanRequest) -> None:
    server.configure(answer=scripted(BAD, GOOD))
    planner = ModelPlanner(server.spec())
    result = planner.plan(request_)
    assert result.document == GOOD
    assert len(server.completions()) == 2
    retry = messages(server, 1)
    assert retry[:2] == messages(server, 0)
    assert "edges[13].to: no node has id 'nowhere'" in retry[-1]["content"]
    assert not any("nowhere" in m["content"] and m["role"] == "assistant" for m in retry)
    assert all('"nowhere"' not in m["content"] for m in retry)  # the rejected text never goes back
    assert result.tokens > 0


def test_it_sends_the_plan_schema_as_the_grammar(server: FaultServer, request_: PlanRequest) -> None:
    server.configure(answer=scripted(GOOD))
    ModelPlanner(server.spec()).plan(request_)
    body = server.completions()[0].body
    assert body["response_format"]["json_schema"]["schema"] == PLAN_SCHEMA
    prompt = body["messages"][1]["content"]
    assert "lookup_order" in prompt and "issue_refund" in prompt and "'review'" in prompt


def test_it_counts_the_tokens_the_server_reports(server: FaultServer, request_: PlanRequest) -> None:
    server.configure(answer=scripted("not json", GOOD))
    result = ModelPlanner(server.spec()).plan(request_)
    sizes = [sum(len(m["content"]) // 4 + 1 for m in messages(server, k)) for k in (0, 1)]
    answer_pieces = [-(-len(t) // 4) for t in ("not json", json.dumps(GOOD))]
    assert result.tokens == sum(sizes) + sum(answer_pieces)


def test_it_fails_with_the_last_problems_after_its_tries(server: FaultServer, request_: PlanRequest) -> None:
    server.configure(answer=scripted("[1, 2]", "{not json", BAD))
    with pytest.raises(PlannerFailed) as caught:
        ModelPlanner(server.spec(), tries=3).plan(request_)
    assert len(server.completions()) == 3
    assert caught.value.problems[0].startswith("edges[13].to: no node has id 'nowhere'")
    assert caught.value.tokens > 0
    assert "a plan is a JSON object, not list" in messages(server, 1)[-1]["content"]
    assert "the answer is not JSON" in messages(server, 2)[-1]["content"]


def test_it_stops_when_the_spec_token_budget_is_spent(server: FaultServer, request_: PlanRequest) -> None:
    server.configure(answer=scripted(BAD, GOOD))
    spec = replace(request_.spec, budgets=replace(request_.spec.budgets, planner_tokens=100))
    with pytest.raises(PlannerFailed) as caught:
        ModelPlanner(server.spec(), tries=5).plan(replace(request_, spec=spec))
    assert len(server.completions()) == 1
    assert caught.value.tokens > 100


def test_it_re_asks_an_answer_cut_off_at_the_token_limit(server: FaultServer, request_: PlanRequest) -> None:
    server.configure(answer=scripted(GOOD), finish_reason="length")
    with pytest.raises(PlannerFailed) as caught:
        ModelPlanner(server.spec(), tries=2).plan(request_)
    assert "cut off at the token limit" in caught.value.problems[0]
    assert len(server.completions()) == 2


def test_it_hands_the_feedback_to_a_re_plan(server: FaultServer, request_: PlanRequest) -> None:
    server.configure(answer=scripted(GOOD))
    feedback = Feedback(
        attempt=1, plan=GOOD, score=0.5, failing_nodes=("check_amount", "approve"), report="check_amount: 4 cases"
    )
    ModelPlanner(server.spec()).plan(replace(request_, attempt=2, feedback=feedback))
    prompt = messages(server, 0)[1]["content"]
    assert "Attempt 1 scored 50%." in prompt
    assert "Failing nodes, most blamed first: check_amount, approve." in prompt
    assert "check_amount: 4 cases" in prompt


def test_it_stops_an_in_flight_request_when_cancelled(request_: PlanRequest) -> None:
    with FaultServer(latency=30.0, answer=scripted(GOOD)) as slow:
        cancel = threading.Event()
        outcome: list[BaseException] = []

        def plan() -> None:
            try:
                ModelPlanner(slow.spec()).plan(request_, cancel)
            except BaseException as exc:  # handed to the test thread
                outcome.append(exc)

        thread = threading.Thread(target=plan)
        thread.start()
        wait_until(lambda: slow.in_flight == 1, timeout=30, message="the planner's request in flight")
        cancel.set()
        thread.join()
        assert [type(e) for e in outcome] == [Cancelled]
        assert len(slow.completions()) == 1


def test_it_does_not_call_the_model_once_cancelled(server: FaultServer, request_: PlanRequest) -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        ModelPlanner(server.spec()).plan(request_, cancel)
    assert server.completions() == []
