"""Instruction proposals (compiler/proposals.py) against a real OpenAI-compatible HTTP
server on loopback (tests/support/fault_server.py) that answers a set JSON text."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from compiler import ModelPlanner, PlanNode, Spec, load_spec
from compiler.proposals import MAX_FAILURES, Failure, Proposals, propose, schema
from runtime import BackendError, Cancelled
from tests.support.fault_server import FaultServer
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
CURRENT = "Say what the customer wants and copy the order number."
NODE = PlanNode(
    id="intent",
    kind="generate",
    description="Classify the request",
    reads=("input.message",),
    writes=("intent", "order_id"),
    instructions=CURRENT,
)
FAILURES = [
    Failure(
        case_id="c2",
        input={"message": "Where is my parcel ORD-10007?"},
        got={"intent": "refund", "order_id": "ORD-10007"},
        expected={"intent": "order_status", "order_id": "ORD-10007"},
    ),
    Failure(
        case_id="c1",
        input={"message": "Money back for ORD-10001 please"},
        got={"intent": "other", "order_id": None},
        expected={"intent": "refund", "order_id": "ORD-10001"},
    ),
]


@pytest.fixture
def spec() -> Spec:
    loaded = load_spec(ROOT / "specs" / "refund_desk")
    intent = replace(loaded.outputs["intent"], values=("refund", "order_status", "cancel", "other"))
    return replace(loaded, outputs={**loaded.outputs, "intent": intent})


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer(logprobs=False) as s:
        yield s


@pytest.fixture
def planner(server: FaultServer) -> Iterator[ModelPlanner]:
    model = ModelPlanner(server.spec())
    yield model
    model.close()


def answering(*texts: Any) -> str:
    return json.dumps({"instructions": list(texts)})


def body(server: FaultServer, k: int = 0) -> dict[str, Any]:
    recorded = server.completions()[k].body
    assert isinstance(recorded, dict)
    return recorded


def test_the_request_shows_the_node_its_instructions_and_the_failures(
    server: FaultServer, planner: ModelPlanner, spec: Spec
) -> None:
    server.configure(answer=answering("Decide the intent first."))
    propose(planner, spec, NODE, CURRENT, FAILURES, count=3)
    sent = body(server)
    assert sent["response_format"]["json_schema"]["schema"] == schema(3)
    assert schema(3)["properties"]["instructions"]["maxItems"] == 3
    assert sent["temperature"] == 0.0
    prompt = sent["messages"][1]["content"]
    assert CURRENT in prompt
    assert "The step 'intent': Classify the request" in prompt
    assert "input.message: The customer's message. (string)" in prompt
    assert 'one of: "refund", "order_status", "cancel", "other"' in prompt
    assert "order_id: The order number in the message" in prompt
    assert '"Where is my parcel ORD-10007?"' in prompt
    assert 'the step wrote: {"intent":"refund","order_id":"ORD-10007"}' in prompt
    assert 'expected: {"intent":"order_status","order_id":"ORD-10007"}' in prompt
    assert 'the step wrote: {"intent":"other","order_id":null}' in prompt
    assert "Handle a customer's refund request end to end" in prompt
    assert "- An approval refunds more than 0 dollars; a decline refunds exactly 0." in prompt
    assert "Write 3 different rewritten instruction texts" in prompt
    assert prompt.index("case c1") < prompt.index("case c2")  # case-id order, whatever the caller's


def test_the_same_failures_in_another_order_make_the_same_request(
    server: FaultServer, planner: ModelPlanner, spec: Spec
) -> None:
    server.configure(answer=answering("Decide the intent first."))
    propose(planner, spec, NODE, CURRENT, FAILURES)
    propose(planner, spec, NODE, CURRENT, list(reversed(FAILURES)))
    assert body(server, 0)["messages"] == body(server, 1)["messages"]


def test_at_most_eight_failures_are_shown_each_bounded(server: FaultServer, planner: ModelPlanner, spec: Spec) -> None:
    server.configure(answer=answering("Decide the intent first."))
    many = [
        Failure(f"c{k:02d}", {"message": "long " * 400}, {"intent": "other"}, {"intent": f"want{k}"}) for k in range(12)
    ]
    propose(planner, spec, NODE, CURRENT, many)
    prompt = body(server)["messages"][1]["content"]
    assert f"(12; {MAX_FAILURES} shown)" in prompt
    assert "case c07" in prompt and "case c08" not in prompt
    assert 'expected: {"intent":"want7"}' in prompt  # the input is cut, not the expected values
    assert len(prompt) < 8000


def test_texts_are_stripped_distinct_and_new(server: FaultServer, planner: ModelPlanner, spec: Spec) -> None:
    server.configure(
        answer=answering(
            "  Name the intent first.  ",
            "Name the intent first.",
            CURRENT,
            "   ",
            "Read {{ input.message }} and answer }}",
            "x" * 2001,
        )
    )
    result = propose(planner, spec, NODE, CURRENT, FAILURES, count=6)
    assert result.texts == ("Name the intent first.", "Read { { input.message } } and answer } }")
    assert result.tokens > 0
    assert result.cost_usd == 0.0


def test_no_more_texts_than_asked(server: FaultServer, planner: ModelPlanner, spec: Spec) -> None:
    server.configure(answer=answering("One.", "Two.", "Three."))
    result = propose(planner, spec, NODE, CURRENT, FAILURES, count=2)
    assert result.texts == ("One.", "Two.")


@pytest.mark.parametrize("answer", ["not json", '{"instructions": "One."}', '["One."]'])
def test_an_answer_not_of_the_grammar_gives_no_texts(
    server: FaultServer, planner: ModelPlanner, spec: Spec, answer: str
) -> None:
    server.configure(answer=answer)
    result = propose(planner, spec, NODE, CURRENT, FAILURES)
    assert result.texts == ()
    assert len(server.completions()) == 1
    assert result.tokens > 0


def test_an_answer_cut_off_gives_no_texts(server: FaultServer, planner: ModelPlanner, spec: Spec) -> None:
    server.configure(answer=answering("Name the intent first."), finish_reason="length")
    result = propose(planner, spec, NODE, CURRENT, FAILURES)
    assert result.texts == ()
    assert len(server.completions()) == 1


def test_a_spent_budget_makes_no_call(server: FaultServer, planner: ModelPlanner, spec: Spec) -> None:
    server.configure(answer=answering("Name the intent first."))
    small = replace(spec, budgets=replace(spec.budgets, planner_tokens=100, cost_usd=1.0))
    assert propose(planner, small, NODE, CURRENT, FAILURES, spent_tokens=100) == Proposals()
    assert propose(planner, small, NODE, CURRENT, FAILURES, spent_cost_usd=1.5) == Proposals()
    assert server.completions() == []
    assert propose(planner, small, NODE, CURRENT, FAILURES, spent_tokens=99).texts == ("Name the intent first.",)
    assert len(server.completions()) == 1


def test_a_backend_error_propagates(server: FaultServer, planner: ModelPlanner, spec: Spec) -> None:
    server.configure(script=[{"status": 401, "message": "bad key"}] * 5)
    with pytest.raises(BackendError):
        propose(planner, spec, NODE, CURRENT, FAILURES)


def test_it_does_not_call_once_cancelled(server: FaultServer, planner: ModelPlanner, spec: Spec) -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        propose(planner, spec, NODE, CURRENT, FAILURES, cancel=cancel)
    assert server.completions() == []


def test_it_stops_an_in_flight_request_when_cancelled(spec: Spec) -> None:
    with FaultServer(latency=30.0, answer=answering("Name the intent first.")) as slow:
        cancel = threading.Event()
        outcome: list[BaseException] = []
        planner = ModelPlanner(slow.spec())

        def run() -> None:
            try:
                propose(planner, spec, NODE, CURRENT, FAILURES, cancel=cancel)
            except BaseException as exc:  # handed to the test thread
                outcome.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        wait_until(lambda: slow.in_flight == 1, timeout=30, message="the proposal request in flight")
        cancel.set()
        thread.join(timeout=30)
        planner.close()
        assert [type(e) for e in outcome] == [Cancelled]
        assert len(slow.completions()) == 1


def test_count_must_be_positive(server: FaultServer, planner: ModelPlanner, spec: Spec) -> None:
    with pytest.raises(ValueError):
        propose(planner, spec, NODE, CURRENT, FAILURES, count=0)
    assert server.completions() == []
