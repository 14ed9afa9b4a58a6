"""The model planner's contract with a real model server: llama-server serving
SmolLM2-135M-Instruct (tests/support/model_servers.py) as the planner endpoint, driven
by the compile loop. A 135M model is not expected to write a good plan; what is held is
the contract: every answer is JSON the plan grammar allows (or was cut off at the token
limit), every rejected answer is re-asked with its problems (never its text), and the
loop stops within its budget. Slow: it starts llama-server (PACKFORGE_BUILD_CACHE points
at a built one)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from compiler import PLAN_SCHEMA, ModelPlanner, PlanInvalid, build, load_spec, parse_plan
from runtime import open_backend
from tests.support import model_servers
from tests.support.model_servers import RunningServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

SPEC = """\
name: ticket_router
task: Route a customer's message to the desk that handles it - billing, shipping or other.
inputs:
  message:
    description: The customer's message.
    type: string
outputs:
  department:
    description: billing, shipping or other.
    type: string
unsure_end: escalate
budgets: {attempts: 1, planner_tokens: 40000, cost_usd: 1}
"""
GOLD = [
    ("I was charged twice for my order.", "billing", "billing_desk"),
    ("My refund has not arrived yet.", "billing", "billing_desk"),
    ("Where is my parcel? It is a week late.", "shipping", "shipping_desk"),
    ("The courier left the box at the wrong door.", "shipping", "shipping_desk"),
    ("Do you sell gift cards?", "other", "general"),
    ("What are your opening hours?", "other", "general"),
]


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    yield from model_servers.serve_smollm2(tmp_path_factory)


def test_it_keeps_the_planner_contract_with_a_real_small_model(smollm2: RunningServer, tmp_path: Path) -> None:
    folder = tmp_path / "spec"
    folder.mkdir()
    (folder / "spec.yaml").write_text(SPEC)
    (folder / "gold.jsonl").write_text(
        "".join(
            json.dumps({"id": f"t{i}", "input": {"message": m}, "expected": {"department": d}, "end": e}) + "\n"
            for i, (m, d, e) in enumerate(GOLD, 1)
        )
    )
    spec = load_spec(folder)
    # A grammar this size decodes at a few tokens a second on a shared CPU: a long deadline,
    # one attempt of at most two answers of at most 256 tokens each (a longer plan is cut
    # off, and re-asked as such), so the test stays a few minutes in CI.
    endpoint = f"openai:{smollm2.base_url}#smollm2;attempts=1;deadline=1200;timeout=1200"
    recording = model_servers.RecordingBackend(open_backend(endpoint))
    planner = ModelPlanner(endpoint, tries=2, max_tokens=256, backend=recording)

    result = build(spec, planner, tmp_path / "work")
    planner.close()

    # The loop stopped within its budget: one attempt of at most 2 answers.
    assert 1 <= len(result.attempts) <= spec.budgets.attempts
    assert 1 <= len(recording.calls) <= spec.budgets.attempts * 2
    assert [a.problems for a in result.attempts if a.status == "error"] == []
    assert all(a.status in ("ok", "plan_invalid", "pack_invalid") for a in result.attempts)
    assert sum(a.tokens for a in result.attempts) == sum(
        r.prompt_tokens + r.completion_tokens for _, r in recording.calls
    )

    for k, (call, reply) in enumerate(recording.calls):
        assert call.schema == PLAN_SCHEMA  # the plan grammar went out with every call
        if reply.finish_reason != "length":
            jsonschema.validate(json.loads(reply.text), PLAN_SCHEMA)  # grammar-valid by construction
        # Each answer either passes parse_plan or the next call in the same attempt re-asks
        # with its problems, and never with its text.
        try:
            parse_plan(json.loads(reply.text), spec)
            accepted = True
        except (PlanInvalid, json.JSONDecodeError):
            accepted = False
        nxt = recording.calls[k + 1][0] if k + 1 < len(recording.calls) else None
        if not accepted and nxt is not None and nxt.run_id == call.run_id:
            assert nxt.messages[-1]["content"].startswith("Your last plan was rejected. Its problems:\n- ")
            assert all(m["role"] != "assistant" for m in nxt.messages)
            assert all(reply.text not in m["content"] for m in nxt.messages)
